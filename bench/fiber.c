/* bench/fiber — the cost of fiber switches (DESIGN §6, doc/fibers.md).
 *
 *   make bench-fiber                  (or: make bench/fiber && bench/fiber)
 *   bench/fiber [iterations] [reps]   defaults 1000000 and 5
 *
 * Every case is a hali program run through the scheduler on local-sync;
 * each is timed |reps| times and the median is reported, minus the same
 * loop without the operation under test where that is meaningful.
 *
 *   await, ready      hal.fence.await on an already signalled fence: the
 *                     check that completes without suspending
 *   switch, pending   ping-pong through not-yet-signalled fences: every
 *                     await suspends its fiber and the scheduler resumes the
 *                     other one; per switch = suspend + resume of one fiber
 *   spawn + join      fiber.spawn of an empty function and the await of its
 *                     fence (a suspension of the spawner each time)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/hal.h"
#include "loader/loader.h"
#include "tests/ping_pong.h"
#include "vm/fiber.h"
#include "vm/vm.h"

#define BENCH_NAME "bench/fiber"
#include "bench/bench_util.h"

static const char program[] =
    /* Baseline: the loop alone (with the fence.offset the switch case
     * needs, so that the difference is the await and the signal). */
    "func @empty(%f: !hal.fence, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    "func @ready(%f: !hal.fence, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %forever = const.i64 -1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    /* One side of the ping-pong without a partner: signals and awaits its
     * own fence at the same point (never suspends) — the baseline for the
     * switch case. */
    "func @solo(%mine: !hal.fence, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %forever = const.i64 -1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %m = hal.fence.offset %mine, %i\n"
    "  hal.fence.signal %m\n"
    "  %t = hal.fence.offset %mine, %i\n"
    "  %s = hal.fence.await %t, %forever\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    HALI_PING_PONG_HASM
    "func @nothing() {\n"
    "  return\n"
    "}\n"
    "func @spawner(%f: !hal.fence, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %forever = const.i64 -1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %c = fiber.spawn @nothing()\n"
    "  %s = hal.fence.await %c, %forever\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n";

static hali_vm_module_t *module;
static hali_hal_device_t *device;

static hali_value_t fence_value(hali_hal_fence_t *f) {
  hali_value_t v = {.type = HALI_TYPE_FENCE};
  v.ref = (hali_ref_t *)f;
  return v;
}

/* Runs the named functions (each with (fence..., n)) as fibers on one
 * scheduler until all finish; returns the elapsed ns. */
static int64_t run(const char *const *fns, size_t count, int64_t n,
                   bool pair) {
  hali_vm_scheduler_t *s = NULL;
  bench_check(hali_vm_scheduler_create(device, NULL, &s), "scheduler");
  hali_hal_fence_t *a = NULL, *b = NULL;
  bench_check(hali_hal_fence_create_pending(&a), "fence");
  bench_check(hali_hal_fence_create_pending(&b), "fence");
  if (!pair) bench_check(hali_hal_fence_signal(b), "signal"); /* ready fence */
  hali_vm_fiber_t *f[2] = {NULL, NULL};
  int64_t t0 = (int64_t)bench_now_ns();
  for (size_t i = 0; i < count; ++i) {
    const hali_vm_func_t *fn = hali_vm_module_lookup(module, fns[i]);
    if (!fn) bench_check(hali_status_make(HALI_STATUS_NOT_FOUND, "@%s", fns[i]), "");
    hali_value_t args[3];
    size_t nargs = 0;
    if (pair) {
      args[nargs++] = fence_value(i ? b : a);
      args[nargs++] = fence_value(i ? a : b);
    } else {
      args[nargs++] = fence_value(strcmp(fns[i], "solo") == 0 ? a : b);
    }
    args[nargs++] = hali_value_i64(n);
    bench_check(hali_vm_scheduler_start(s, module, fn, args, nargs, &f[i]),
          "start");
  }
  bench_check(hali_vm_scheduler_run(s, NULL), "run");
  int64_t t1 = (int64_t)bench_now_ns();
  for (size_t i = 0; i < count; ++i) {
    bench_check(hali_status_clone(hali_vm_fiber_status(f[i])), fns[i]);
    hali_vm_fiber_release(f[i]);
  }
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
  hali_vm_scheduler_free(s);
  return t1 - t0;
}

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

static int64_t median(const char *const *fns, size_t count, int64_t n,
                      bool pair, int reps) {
  int64_t t[64];
  if (reps > 64) reps = 64;
  for (int r = 0; r < reps; ++r) t[r] = run(fns, count, n, pair);
  qsort(t, (size_t)reps, sizeof(t[0]), cmp_i64);
  return t[reps / 2];
}

int main(int argc, char **argv) {
  int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 1 || reps < 1) {
    fprintf(stderr, "usage: bench/fiber [iterations >= 1] [reps >= 1]\n");
    return 2;
  }
  hali_ir_module_t *ir = NULL;
  bench_check(hali_load_bytes((const uint8_t *)program, strlen(program),
                        "fiber_bench.hasm", &ir),
        "load");
  bench_check(hali_vm_module_create(ir, &module), "module");
  bench_check(hali_hal_device_create(NULL, &device), "device");

  static const char *const empty[] = {"empty"}, *const ready[] = {"ready"},
                           *const solo[] = {"solo"},
                           *const pingpong[] = {"ping", "pong"},
                           *const spawner[] = {"spawner"};
  run(pingpong, 2, n / 10 + 1, true); /* warm up */
  int64_t t_empty = median(empty, 1, n, false, reps);
  int64_t t_ready = median(ready, 1, n, false, reps);
  int64_t t_solo = median(solo, 1, n, false, reps);
  int64_t t_pp = median(pingpong, 2, n, true, reps);
  int64_t spawns = n / 4 + 1;
  int64_t t_spawn = median(spawner, 1, spawns, false, reps);
  int64_t t_empty_spawn = median(empty, 1, spawns, false, reps);

  double dn = (double)n;
  printf("hali fiber switch cost (local-sync, median of %d runs, %" PRId64
         " iterations)\n\n",
         reps, n);
  printf("%-36s %12s %12s %12s\n", "case", "total ms", "ns / iter",
         "ns / op");
  printf("%-36s %12.2f %12.1f %12s\n", "loop alone (baseline)",
         (double)t_empty / 1e6, (double)t_empty / dn, "-");
  printf("%-36s %12.2f %12.1f %12.1f\n",
         "await, already signalled (no switch)", (double)t_ready / 1e6,
         (double)t_ready / dn, (double)(t_ready - t_empty) / dn);
  printf("%-36s %12.2f %12.1f %12s\n",
         "offset+signal+offset+await, 1 fiber", (double)t_solo / 1e6,
         (double)t_solo / dn, "-");
  /* Each iteration of the ping-pong suspends and resumes both fibers:
   * two switches; the non-switching work is twice the solo loop's. */
  printf("%-36s %12.2f %12.1f %12.1f\n",
         "ping-pong, not yet signalled", (double)t_pp / 1e6,
         (double)t_pp / dn, (double)t_pp / (2 * dn));
  printf("%-36s %12s %12s %12.1f\n", "  per switch, minus the solo work", "",
         "", (double)(t_pp - 2 * t_solo) / (2 * dn));
  printf("%-36s %12.2f %12.1f %12.1f\n", "fiber.spawn + await of its fence",
         (double)t_spawn / 1e6, (double)t_spawn / (double)spawns,
         (double)(t_spawn - t_empty_spawn) / (double)spawns);
  printf("\nns / op: the operation alone (baseline loop subtracted); a switch"
         " is one\nsuspend of the running fiber plus the resume of the next"
         " one.\n");

  hali_hal_device_release(device);
  hali_vm_module_release(module);
  return 0;
}
