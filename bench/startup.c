/* bench/startup — what it costs to get the flagship ready to run: instance,
 * device, module load (read, passes, verify, encode), parameter files and
 * context creation, until the first invocation could start.  Two versions
 * of one program (examples/mlp_gen.py):
 *
 *   rodata      examples/mlp_tensor_rodata.hasm: 38 KB of weights as text
 *   parameters  examples/mlp_tensor.hasm + examples/mlp.safetensors: the
 *               program as text, the weights mapped from the file
 *
 * Each is started N times in this process (the median is printed, so
 * another process on the machine disturbs it less), then invoked once;
 * both must print the same logits, bit for bit, or the run fails.
 *
 *   make bench-startup                       (N = 200)
 *   bench/startup [N]                        (from the build directory)
 *
 * Public API only, like any host program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hali/hali.h"

#ifndef HALI_SRCDIR
#define HALI_SRCDIR "."
#endif
#ifndef HALI_BUILDDIR
#define HALI_BUILDDIR "."
#endif

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void check(hali_status_t s, const char *what) {
  if (!s) return;
  fprintf(stderr, "bench/startup: %s: %s\n", what, hali_status_message(s));
  exit(1);
}

typedef struct {
  hali_instance_t *instance;
  hali_device_t *device;
  hali_module_t *module;
  hali_parameters_t *params;
  hali_context_t *context;
} ready_t;

/* Everything up to a context that could be invoked. */
static void start(const char *module, const char *params, ready_t *r) {
  memset(r, 0, sizeof(*r));
  check(hali_instance_create(NULL, &r->instance), "instance");
  check(hali_device_create(r->instance, NULL, &r->device), "device");
  check(hali_module_load_file(r->instance, module, &r->module), module);
  hali_context_params_t cp;
  hali_context_params_initialize(&cp);
  if (params) {
    check(hali_parameters_create(&r->params), "parameters");
    check(hali_parameters_add_file(r->params, "model", params), params);
    cp.parameters = r->params;
  }
  check(hali_context_create(r->instance, r->device, &r->module, 1, &cp,
                            &r->context),
        "context");
}

static void stop(ready_t *r) {
  hali_context_release(r->context);
  hali_parameters_release(r->params);
  hali_module_release(r->module);
  hali_device_release(r->device);
  hali_instance_release(r->instance);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median start-up of |n| runs, in ms; |logits| from one call. */
static double measure(const char *module, const char *params, int n,
                      float logits[10]) {
  double *t = calloc((size_t)n, sizeof(double));
  if (!t) exit(1);
  ready_t r;
  for (int i = 0; i < n; ++i) {
    double t0 = now_ms();
    start(module, params, &r);
    t[i] = now_ms() - t0;
    if (i + 1 < n) stop(&r);
  }
  hali_function_t *fn = NULL;
  check(hali_context_lookup_function(r.context, "main", &fn), "@main");
  hali_variant_t result;
  check(hali_context_invoke(r.context, fn, NULL, 0, &result, 1), "@main");
  check(hali_buffer_view_read(result.u.view, logits,
                              10 * sizeof(float)),
        "logits");
  hali_variant_release(&result);
  stop(&r);
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  double median = t[n / 2];
  free(t);
  return median;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  if (n < 1) n = 1;
  float a[10], b[10];
  double rodata = measure(HALI_SRCDIR "/examples/mlp_tensor_rodata.hasm",
                          NULL, n, a);
  double params = measure(HALI_SRCDIR "/examples/mlp_tensor.hasm",
                          HALI_BUILDDIR "/examples/mlp.safetensors", n, b);
  if (memcmp(a, b, sizeof(a)) != 0) {
    fprintf(stderr, "bench/startup: the two versions' logits differ\n");
    return 1;
  }
  printf("start-up of the flagship (median of %d, to a context ready to "
         "invoke):\n",
         n);
  printf("  rodata      mlp_tensor_rodata.hasm            %8.3f ms\n",
         rodata);
  printf("  parameters  mlp_tensor.hasm + mlp.safetensors %8.3f ms  "
         "(%.1fx faster)\n",
         params, rodata / params);
  return 0;
}
