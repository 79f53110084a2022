/* bench/mlp_calls -- the per-call time of the flagship perceptron written
 * at the HAL level (examples/mlp.hasm: weights bound zero-copy with
 * hal.buffer.constant) and at the tensor level (mlp_tensor_rodata.hasm:
 * weights in the context's constant pool, uploaded once).  Public API
 * only; one context per module on a local-sync device; warm calls of
 * @main, the best of several rounds.  `make bench-mlp` runs it.
 *
 *   bench/mlp_calls [--calls=N] [--rounds=N] [--only=hal|tensor] DIR
 *
 * The machine's noise is often larger than the difference: under valgrind
 * --tool=callgrind with --only=, the instructions of two runs that differ
 * only in --calls give the per-call count (bench/README.md).            */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hali/hali.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(hali_status_t s, const char *what) {
  if (!s) return;
  char *t = hali_status_to_string(s);
  fprintf(stderr, "mlp_calls: %s: %s\n", what, t);
  exit(1);
}

/* Seconds per warm call of @main of |path|: the best of |rounds| rounds of
 * |calls| calls.  |logits| receives the last result. */
static double per_call(const char *path, int calls, int rounds,
                       float logits[10]) {
  hali_instance_t *in = NULL;
  check(hali_instance_create(NULL, &in), "instance");
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.kind = HALI_DEVICE_LOCAL_SYNC;
  hali_device_t *d = NULL;
  check(hali_device_create(in, &dp, &d), "device");
  hali_module_t *m = NULL;
  check(hali_module_load_file(in, path, &m), path);
  hali_context_t *c = NULL;
  check(hali_context_create(in, d, &m, 1, NULL, &c), "context");
  hali_function_t *f = NULL;
  check(hali_context_lookup_function(c, "main", &f), "@main");
  double best = 1e30;
  for (int r = -1; r < rounds; ++r) { /* round -1 warms up */
    double t0 = now_s();
    for (int k = 0; k < calls; ++k) {
      hali_variant_t res;
      check(hali_context_invoke(c, f, NULL, 0, &res, 1), "@main");
      if (k + 1 == calls)
        check(hali_buffer_view_read(res.u.view, logits, 10 * sizeof(float)),
              "read");
      hali_buffer_view_release(res.u.view);
    }
    double t = (now_s() - t0) / calls;
    if (r >= 0 && t < best) best = t;
  }
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
  return best;
}

int main(int argc, char **argv) {
  int calls = 2000, rounds = 5;
  const char *dir = "examples", *only = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--calls=", 8) == 0) calls = atoi(argv[i] + 8);
    else if (strncmp(argv[i], "--rounds=", 9) == 0) rounds = atoi(argv[i] + 9);
    else if (strncmp(argv[i], "--only=", 7) == 0) only = argv[i] + 7;
    else dir = argv[i];
  }
  if (calls < 1 || rounds < 1) {
    fprintf(stderr, "usage: mlp_calls [--calls=N] [--rounds=N] DIR\n");
    return 2;
  }
  char hal[1024], tensor[1024];
  snprintf(hal, sizeof(hal), "%s/mlp.hasm", dir);
  snprintf(tensor, sizeof(tensor), "%s/mlp_tensor_rodata.hasm", dir);
  float a[10], b[10];
  if (only) { /* one module (instruction counts under callgrind) */
    bool t = strcmp(only, "tensor") == 0;
    double s = per_call(t ? tensor : hal, calls, rounds, a);
    printf("%s %8.2f us/call\n", t ? tensor : hal, s * 1e6);
    return 0;
  }
  double th = per_call(hal, calls, rounds, a);
  double tt = per_call(tensor, calls, rounds, b);
  if (memcmp(a, b, sizeof(a)) != 0) {
    fprintf(stderr, "mlp_calls: the two modules' logits differ\n");
    return 1;
  }
  printf("examples/mlp.hasm         %8.2f us/call\n", th * 1e6);
  printf("mlp_tensor_rodata.hasm    %8.2f us/call  (%+.1f%%)\n", tt * 1e6,
         (tt / th - 1) * 100);
  return 0;
}
