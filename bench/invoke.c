/* bench/invoke -- host -> VM invoke of a trivial function through the C
 * API (hali_context_invoke of `@id(%x: i32) -> i32 { return %x }` on a
 * local-sync device), warm calls: median and minimum ns per call over
 * several rounds, beside the goal of issue 18 (<= 50 ns) and IREE's
 * figure (bench/README.md).  Every result is checked.
 *
 *   bench/invoke [--calls=N] [--rounds=N]
 *
 * Under valgrind --tool=callgrind, two runs that differ only in --calls
 * give the instructions per call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hali/hali.h"

#define BENCH_NAME "invoke"
#include "bench/bench_util.h"

static const char module_text[] =
    "module @invoke_bench\n"
    "func @id(%x: i32) -> i32 {\n"
    "  return %x\n"
    "}\n";

int main(int argc, char **argv) {
  int calls = 20000, rounds = 11;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--calls=", 8) == 0) calls = atoi(argv[i] + 8);
    else if (strncmp(argv[i], "--rounds=", 9) == 0) rounds = atoi(argv[i] + 9);
    else {
      fprintf(stderr, "usage: bench/invoke [--calls=N] [--rounds=N]\n");
      return 2;
    }
  }
  if (calls < 1 || rounds < 1) {
    fprintf(stderr, "invoke: --calls and --rounds must be >= 1\n");
    return 2;
  }
  hali_instance_t *in = NULL;
  bench_check(hali_instance_create(NULL, &in), "instance");
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.kind = HALI_DEVICE_LOCAL_SYNC;
  hali_device_t *d = NULL;
  bench_check(hali_device_create(in, &dp, &d), "device");
  hali_module_t *m = NULL;
  bench_check(hali_module_load_bytes(in, module_text, sizeof module_text - 1,
                               "invoke_bench", &m),
        "module");
  hali_context_t *c = NULL;
  bench_check(hali_context_create(in, d, &m, 1, NULL, &c), "context");
  hali_function_t *f = NULL;
  bench_check(hali_context_lookup_function(c, "id", &f), "@id");
  double *t = malloc(sizeof(double) * (size_t)rounds);
  if (!t) return 1;
  for (int r = -1; r < rounds; ++r) { /* round -1 warms up */
    double t0 = bench_now_ns();
    for (int k = 0; k < calls; ++k) {
      hali_variant_t arg = hali_variant_i32(k), res;
      bench_check(hali_context_invoke(c, f, &arg, 1, &res, 1), "@id");
      if (res.type != HALI_VARIANT_I32 || res.u.i32 != k) {
        fprintf(stderr, "invoke: @id(%d) returned %d\n", k, res.u.i32);
        return 1;
      }
    }
    if (r >= 0) t[r] = (bench_now_ns() - t0) / calls;
  }
  qsort(t, (size_t)rounds, sizeof *t, bench_cmp_double);
  printf("host -> VM invoke of @id(i32) -> i32 (hali_context_invoke, "
         "local-sync): ns per call, %d rounds of %d\n",
         rounds, calls);
  printf("median %.1f  min %.1f  goal <= 50 (%s)\n", t[rounds / 2], t[0],
         t[rounds / 2] <= 50 ? "met" : "not met");
  free(t);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
  return 0;
}
