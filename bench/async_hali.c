/* bench/async_hali — the four workloads of bench/async, in hali (issue 17).
 *
 *   bench/async_hali [n] [reps] [threads] [workload]
 *                                     defaults 10000, 5 and 1 (fiber
 *                                     threads of the scheduler); with a
 *                                     workload (fanout, chain, pingpong)
 *                                     only that one, for a profiler
 *   bench/async_hali --rss n          fan-out of n fibers; prints the
 *                                     peak RSS in KiB (ru_maxrss)
 *   bench/async_hali --rss-live n     the same with all n fibers live at
 *                                     once (each awaits a gate opened
 *                                     after the last spawn)
 *
 * Each workload is a hali program run through the scheduler on local-sync;
 * the median of |reps| runs is printed as "name total_ns per_task_ns
 * cpu_per_task_ns" (the last: the process's CPU time over the run, all
 * threads, median of the runs: what a loaded machine's wall clock hides).
 *   fanout    spawn n trivial fibers into a group, then await the group
 *   chain     n fibers, each awaiting the previous one's fence
 *   pingpong  n round trips between two fibers (timeline fences)
 *   cpu       8 fibers of ~50 ms of arithmetic each (wall time)
 *   cpu1      one such fiber (for the ideal: cpu1 * 8 / cores)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hal/hal.h"
#include "loader/loader.h"
#include "vm/fiber.h"
#include "vm/vm.h"

#define BENCH_NAME "bench/async_hali"
#include "bench/bench_util.h"

static const char program[] =
    "func @nothing() {\n"
    "  return\n"
    "}\n"
    "func @fanout(%n: i64) {\n"
    "^entry:\n"
    "  %g = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %some = lt.s.i64 %k, %n\n"
    "  cond_br %some, ^spawn, ^await\n"
    "^spawn:\n"
    "  %f = fiber.spawn @nothing()\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^await\n"
    "^await:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  return\n"
    "}\n"
    "func @link(%prev: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %prev, %forever\n"
    "  return\n"
    "}\n"
    "func @chain(%n: i64) {\n"
    "^entry:\n"
    "  %prev = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %prev = fiber.spawn @link(%prev)\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^await\n"
    "^await:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %prev, %forever\n"
    "  return\n"
    "}\n"
    /* Round trip i: ping signals its timeline at i + 1 and awaits pong's
     * at i + 1; pong awaits ping's at i + 1 and signals its own. */
    "func @ping(%mine: !hal.fence, %theirs: !hal.fence, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %forever = const.i64 -1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %m = hal.fence.offset %mine, %i\n"
    "  hal.fence.signal %m\n"
    "  %t = hal.fence.offset %theirs, %i\n"
    "  %s = hal.fence.await %t, %forever\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    "func @pong(%mine: !hal.fence, %theirs: !hal.fence, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %forever = const.i64 -1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %t = hal.fence.offset %theirs, %i\n"
    "  %s = hal.fence.await %t, %forever\n"
    "  %m = hal.fence.offset %mine, %i\n"
    "  hal.fence.signal %m\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    "func @pingpong(%n: i64) {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %b = hal.fence.create %device\n"
    "  %p = fiber.spawn @ping(%a, %b, %n)\n"
    "  %q = fiber.spawn @pong(%b, %a, %n)\n"
    "  %both = hal.fence.join %p, %q\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %both, %forever\n"
    "  return\n"
    "}\n"
    "func @spin(%iters: i64) -> i64 {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %acc = const.i64 1\n"
    "  %one = const.i64 1\n"
    "  %mul = const.i64 6364136223846793005\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %acc = mul.i64 %acc, %mul\n"
    "  %acc = add.i64 %acc, %i\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %iters\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return %acc\n"
    "}\n"
    /* Every child live at once: each awaits the gate, opened once all
     * are spawned (for the memory per live, suspended fiber). */
    "func @gate_wait(%gate: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %gate, %forever\n"
    "  return\n"
    "}\n"
    "func @gated(%n: i64) {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %gate = hal.fence.create %device\n"
    "  %g = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = fiber.spawn @gate_wait(%gate)\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^open\n"
    "^open:\n"
    "  hal.fence.signal %gate\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  return\n"
    "}\n"
    "func @cpu(%tasks: i64, %iters: i64) {\n"
    "^entry:\n"
    "  %g = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = fiber.spawn @spin(%iters)\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %tasks\n"
    "  cond_br %more, ^spawn, ^await\n"
    "^await:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  return\n"
    "}\n";

static hali_vm_module_t *module;
static int64_t last_cpu_ns; /* CPU time of the last run() */

static int64_t cpu_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
static hali_hal_device_t *device;
static uint32_t threads = 1;

static int64_t run(const char *fn, const hali_value_t *args, size_t nargs) {
  hali_vm_scheduler_options_t o = {0};
  o.max_fibers = 1u << 22;
  o.max_invocation_fibers = 1u << 22;
  o.threads = threads;
  hali_vm_scheduler_t *s = NULL;
  bench_check(hali_vm_scheduler_create(device, &o, &s), "scheduler");
  const hali_vm_func_t *f = hali_vm_module_lookup(module, fn);
  if (!f) bench_check(hali_status_make(HALI_STATUS_NOT_FOUND, "@%s", fn), "");
  hali_vm_fiber_t *fiber = NULL;
  int64_t c0 = cpu_now_ns();
  int64_t t0 = (int64_t)bench_now_ns();
  bench_check(hali_vm_scheduler_start(s, module, f, args, nargs, &fiber), "start");
  bench_check(hali_vm_scheduler_run(s, fiber), "run");
  int64_t t1 = (int64_t)bench_now_ns();
  last_cpu_ns = cpu_now_ns() - c0;
  bench_check(hali_status_clone(hali_vm_fiber_status(fiber)), fn);
  hali_vm_fiber_release(fiber);
  hali_vm_scheduler_free(s);
  return t1 - t0;
}

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

static int64_t median_cpu_ns; /* of the last median() */

static int64_t median(const char *fn, const hali_value_t *args, size_t nargs,
                      int reps) {
  int64_t t[64], c[64];
  if (reps > 64) reps = 64;
  for (int r = 0; r < reps; ++r) {
    t[r] = run(fn, args, nargs);
    c[r] = last_cpu_ns;
  }
  qsort(t, (size_t)reps, sizeof(t[0]), cmp_i64);
  qsort(c, (size_t)reps, sizeof(c[0]), cmp_i64);
  median_cpu_ns = c[reps / 2];
  return t[reps / 2];
}

static void print_row(const char *name, int64_t t, int64_t n) {
  printf("%s %" PRId64 " %.1f %.1f\n", name, t, (double)t / (double)n,
         (double)median_cpu_ns / (double)n);
}

int main(int argc, char **argv) {
  hali_ir_module_t *ir = NULL;
  bench_check(hali_load_bytes((const uint8_t *)program, strlen(program),
                        "async_bench.hasm", &ir),
        "load");
  bench_check(hali_vm_module_create(ir, &module), "module");
  bench_check(hali_hal_device_create(NULL, &device), "device");
  if (argc > 2 && (strcmp(argv[1], "--rss") == 0 ||
                   strcmp(argv[1], "--rss-live") == 0)) {
    hali_value_t a[] = {hali_value_i64(atoll(argv[2]))};
    run(strcmp(argv[1], "--rss") == 0 ? "fanout" : "gated", a, 1);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%ld\n", ru.ru_maxrss);
    return 0;
  }
  int64_t n = argc > 1 ? atoll(argv[1]) : 10000;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (argc > 3) threads = (uint32_t)atoi(argv[3]);
  if (n < 1 || reps < 1) {
    fprintf(stderr, "usage: bench/async_hali [n >= 1] [reps >= 1]\n");
    return 2;
  }
  hali_value_t a[] = {hali_value_i64(n)};
  if (argc > 4) { /* one workload alone (for a profiler) */
    int64_t t = median(argv[4], a, 1, reps);
    print_row(argv[4], t, n);
    hali_hal_device_release(device);
    hali_vm_module_release(module);
    return 0;
  }
  run("fanout", a, 1); /* warm up */
  int64_t t = median("fanout", a, 1, reps);
  print_row("fanout", t, n);
  t = median("chain", a, 1, reps);
  print_row("chain", t, n);
  t = median("pingpong", a, 1, reps);
  print_row("pingpong", t, n);
  /* ~50 ms of @spin: calibrated on one task. */
  int64_t iters = 1000000;
  hali_value_t one[] = {hali_value_i64(1), hali_value_i64(iters)};
  int64_t t1 = run("cpu", one, 2);
  iters = (int64_t)((double)iters * 50e6 / (double)(t1 > 0 ? t1 : 1));
  hali_value_t c1[] = {hali_value_i64(1), hali_value_i64(iters)};
  hali_value_t c8[] = {hali_value_i64(8), hali_value_i64(iters)};
  int64_t cpu1 = median("cpu", c1, 2, 3);
  int64_t cpu8 = median("cpu", c8, 2, 3);
  printf("cpu1 %" PRId64 " %.1f\n", cpu1, (double)cpu1);
  printf("cpu %" PRId64 " %.1f\n", cpu8, (double)cpu8 / 8.0);
  hali_hal_device_release(device);
  hali_vm_module_release(module);
  return 0;
}
