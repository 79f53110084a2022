/* hali — fibers and the scheduler (vm/fiber.h, DESIGN §6, doc/fibers.md).
 *
 * Every test drives real programs through hali_vm_scheduler_*: ping-pong,
 * many suspended fibers, failures travelling through fences, cancellation,
 * deadlock reports, timeouts, fairness and device independence.  Keep it
 * fast (well under 5 s) and valgrind-clean:
 *   CK_FORK=no valgrind --leak-check=full --error-exitcode=1 tests/check_fiber
 */
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hal/hal.h"
#include "tests/ping_pong.h"
#include "tests/testutil.h"
#include "vm/fiber.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define MS 1000000LL

/* ------------------------------------------------------------------------ */
/* Helpers. */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Under valgrind or a sanitizer everything is many times slower: latency
 * bounds (not lower bounds) are relaxed by this factor. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define HALI_TEST_SANITIZED 1 /* clang's spelling */
#endif
#endif
static int64_t slow_factor(void) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || \
    defined(HALI_TEST_SANITIZED)
  return 20;
#endif
  const char *p = getenv("LD_PRELOAD");
  if (p && strstr(p, "valgrind")) return 50;
  const char *s = getenv("HALI_TEST_SLOW");
  if (s && *s) return atoi(s) > 0 ? atoi(s) : 20;
  return 1;
}

/* 1-based line of the first line of |text| containing |needle|. */
static unsigned line_of(const char *text, const char *needle) {
  const char *at = strstr(text, needle);
  ck_assert_msg(at != NULL, "\"%s\" not in the program", needle);
  unsigned line = 1;
  for (const char *p = text; p < at; ++p) line += *p == '\n';
  return line;
}

static const hali_vm_func_t *lookup(hali_vm_module_t *m, const char *name) {
  const hali_vm_func_t *f = hali_vm_module_lookup(m, name);
  ck_assert_msg(f != NULL, "no @%s", name);
  return f;
}

static hali_value_t fence_arg(hali_hal_fence_t *f) {
  hali_value_t v = {.type = HALI_TYPE_FENCE};
  v.ref = (hali_ref_t *)f;
  return v;
}

static uint32_t ref_id(const void *ref) { return ((const hali_ref_t *)ref)->id; }

static hali_hal_device_t *device(hali_hal_device_kind_t kind,
                                 uint32_t workers) {
  hali_hal_device_params_t p;
  hali_hal_device_params_initialize(&p);
  p.kind = kind;
  p.worker_count = workers;
  hali_hal_device_t *d = NULL;
  ck_assert_ok(hali_hal_device_create(&p, &d));
  return d;
}

/* One program, one scheduler, one device (local-sync unless given). */
typedef struct {
  hali_vm_module_t *m;
  hali_hal_device_t *dev;
  hali_vm_scheduler_t *s;
} env_t;

static env_t env_open_on(const char *text, hali_hal_device_t *dev) {
  env_t e = {.m = hali_test_module(text), .dev = dev};
  ck_assert_ok(hali_vm_scheduler_create(dev, NULL, &e.s));
  return e;
}
static env_t env_open(const char *text) {
  return env_open_on(text, device(HALI_HAL_DEVICE_LOCAL_SYNC, 0));
}
static env_t env_open_threads(const char *text, uint32_t threads);
static void env_close(env_t *e) {
  hali_vm_scheduler_free(e->s);
  hali_vm_module_release(e->m);
  if (e->dev) hali_hal_device_release(e->dev);
}

static hali_vm_fiber_t *start(env_t *e, const char *fn,
                              const hali_value_t *args, size_t n) {
  hali_vm_fiber_t *f = NULL;
  ck_assert_ok(hali_vm_scheduler_start(e->s, e->m, lookup(e->m, fn), args, n,
                                       &f));
  return f;
}

/* Runs |f| to completion; the scheduler must not report a deadlock. */
static void run_until(env_t *e, hali_vm_fiber_t *f) {
  ck_assert_ok(hali_vm_scheduler_run(e->s, f));
  ck_assert(hali_vm_fiber_done(f));
}

static int32_t result_i32(hali_vm_fiber_t *f) {
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  size_t n = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &n);
  ck_assert_uint_ge(n, 1);
  ck_assert_int_eq(r[0].type, HALI_TYPE_I32);
  return r[0].i32;
}
static int64_t result_i64(hali_vm_fiber_t *f) {
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  size_t n = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &n);
  ck_assert_uint_ge(n, 1);
  ck_assert_int_eq(r[0].type, HALI_TYPE_I64);
  return r[0].i64;
}

/* The fiber's failure as text (caller frees), asserting its code. */
static char *failure_text(hali_vm_fiber_t *f, hali_status_code_t code) {
  hali_status_t st = hali_vm_fiber_status(f);
  char *text = hali_status_to_string(st);
  ck_assert_msg(st != NULL, "expected %s, the fiber succeeded",
                hali_status_code_name(code));
  ck_assert_msg(hali_status_code(st) == code, "expected %s, got %s",
                hali_status_code_name(code), text);
  return text;
}

static void assert_contains(const char *text, const char *needle) {
  ck_assert_msg(strstr(text, needle) != NULL, "\"%s\" not in:\n%s", needle,
                text);
}

/* ------------------------------------------------------------------------ */
/* Ping-pong: two fibers hand a baton back and forth through two timeline
 * fences (fence@i = the same semaphore at value 1 + i). */

static const char ping_pong[] =
    HALI_PING_PONG_HASM
    "func @main(%n: i64) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %b = hal.fence.create %device\n"
    "  %p = fiber.spawn @ping(%a, %b, %n)\n"
    "  %q = fiber.spawn @pong(%b, %a, %n)\n"
    "  %both = hal.fence.join %p, %q\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %both, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(ping_pong_10000) {
  env_t e = env_open(ping_pong);
  const int64_t n = 10000;
  hali_value_t args[] = {hali_value_i64(n)};
  int64_t t0 = now_ns();
  hali_vm_fiber_t *f = start(&e, "main", args, 1);
  run_until(&e, f);
  int64_t t1 = now_ns();
  ck_assert_int_eq(result_i32(f), 0);
  /* Every fiber finished; the spawned ones freed themselves. */
  ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0);
  ck_assert_uint_eq(hali_vm_scheduler_suspended(e.s), 0);
  printf("ping-pong: %" PRId64 " round trips in %.2f ms (%.0f ns per "
         "round trip, two suspensions each)\n",
         n, (double)(t1 - t0) / 1e6, (double)(t1 - t0) / (double)n);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 10,000 fibers suspended at once on one fence the host signals. */

static const char waiter[] =
    "func @wait(%f: !hal.fence, %k: i32) -> i32 {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  %r = add.i32 %s, %k\n"
    "  return %r\n"
    "}\n";

START_TEST(ten_thousand_suspended) {
  enum { N = 10000 };
  env_t e = env_open(waiter);
  hali_vm_scheduler_allow_external_signals(e.s, true);
  hali_hal_fence_t *gate = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&gate));
  hali_vm_fiber_t **fibers = calloc(N, sizeof(*fibers));
  ck_assert_ptr_nonnull(fibers);

  struct mallinfo2 before = mallinfo2();
  for (int i = 0; i < N; ++i) {
    hali_value_t args[] = {fence_arg(gate), hali_value_i32(i)};
    fibers[i] = start(&e, "wait", args, 2);
  }
  /* Runs each until it suspends; the host may signal, so no deadlock. */
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
  struct mallinfo2 after = mallinfo2();
  ck_assert_uint_eq(hali_vm_scheduler_live(e.s), N);
  ck_assert_uint_eq(hali_vm_scheduler_suspended(e.s), N);

  size_t overhead = hali_vm_fiber_overhead_bytes(fibers[0]);
  for (int i = 1; i < N; ++i)
    ck_assert_uint_eq(hali_vm_fiber_overhead_bytes(fibers[i]), overhead);
  const hali_vm_func_t *fn = lookup(e.m, "wait");
  size_t banks = fn->scalar_count * sizeof(hali_slot_t) +
                 fn->ref_count * sizeof(hali_ref_t *);
  double heap = after.uordblks > before.uordblks
                    ? (double)(after.uordblks - before.uordblks) / N
                    : 0.0;
  printf("suspended fibers: %d; per fiber: %zu bytes overhead (fiber, stack "
         "bookkeeping, frames, waiter) + %zu bytes of registers "
         "(%u scalar + %u ref slots); heap in use grew by %.0f bytes per "
         "fiber (malloc headers and the stack's initial capacity "
         "included)\n",
         N, overhead, banks, fn->scalar_count, fn->ref_count, heap);
  ck_assert_uint_lt(overhead, 1024);

  /* One host signal wakes them all; each returns its own index. */
  ck_assert_ok(hali_hal_fence_signal(gate));
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
  ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0);
  for (int i = 0; i < N; ++i) {
    ck_assert(hali_vm_fiber_done(fibers[i]));
    ck_assert_int_eq(result_i32(fibers[i]), i);
    hali_vm_fiber_release(fibers[i]);
  }
  free(fibers);
  hali_hal_fence_release(gate);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Failure in a spawned fiber reaches its awaiter. */

static const char child_fails[] =
    "func @divide(%x: i32) -> i32 {\n"
    "  %zero = const.i32 0\n"
    "  %q = div.s.i32 %x, %zero\n" /* the fault */
    "  return %q\n"
    "}\n"
    "func @child(%x: i32) {\n"
    "  %q = call @divide(%x)\n" /* child's caller frame */
    "  return\n"
    "}\n"
    "func @main() -> i32 {\n"
    "  %one = const.i32 1\n"
    "  %f = fiber.spawn @child(%one)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n" /* the awaiter */
    "  return %s\n"
    "}\n";

/* Limits bound what a program spawns (issue 13 row 9): a fiber that
 * spawns itself without end stops at the scheduler's live-fiber cap with
 * RESOURCE_EXHAUSTED, and its failure reaches the first fiber with a
 * bounded report (64 lines of context at most, linear to build). */
static const char k_self_spawn[] =
    "func @self(%n: i32) -> i32 {\n"
    "  %one = const.i32 1\n"
    "  %m = add.i32 %n, %one\n"
    "  %f = fiber.spawn @self(%m)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %m\n"
    "}\n"
    "func @spin() -> i32 {\n"
    "  %x = const.i32 0\n"
    "  %one = const.i32 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %x = add.i32 %x, %one\n"
    "  br ^loop\n"
    "}\n"
    "func @spawn_spin() -> i32 {\n"
    "  %f = fiber.spawn @spin()\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(spawning_stops_at_the_fiber_cap) {
  hali_vm_module_t *m = hali_test_module(k_self_spawn);
  hali_vm_scheduler_options_t o = {.max_fibers = 300};
  hali_vm_scheduler_t *s = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, &o, &s));
  hali_value_t arg = {.type = HALI_TYPE_I32, .i32 = 0};
  hali_vm_fiber_t *f = NULL;
  ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "self"), &arg, 1, &f));
  ck_assert_ok(hali_vm_scheduler_run(s, f));
  hali_status_t st = hali_vm_fiber_status(f);
  ck_assert_int_eq(hali_status_code(st), HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(hali_status_message(st),
                   "cannot start @self: 300 fibers are live, the limit of one "
                   "context");
  /* 300 levels of "awaited fence" and "at" lines, bounded to 64. */
  ck_assert_uint_eq(hali_status_annotation_count(st), 64);
  ck_assert_ptr_nonnull(strstr(hali_status_annotation(st, 48), "more lines of context not shown"));
  hali_vm_scheduler_free(s);
  hali_vm_module_release(m);
}
END_TEST

/* The live-fiber cap is per invocation too: two invocations spawning
 * without end each stop at their own cap, well inside the context's. */
START_TEST(spawning_stops_at_the_invocation_cap) {
  hali_vm_module_t *m = hali_test_module(k_self_spawn);
  hali_vm_scheduler_options_t o = {.max_fibers = 1000,
                                   .max_invocation_fibers = 50};
  hali_vm_scheduler_t *s = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, &o, &s));
  hali_value_t arg = {.type = HALI_TYPE_I32, .i32 = 0};
  hali_vm_fiber_t *f = NULL, *g = NULL;
  ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "self"), &arg, 1, &f));
  ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "self"), &arg, 1, &g));
  ck_assert_ok(hali_vm_scheduler_run(s, f));
  ck_assert_ok(hali_vm_scheduler_run(s, g));
  hali_vm_fiber_t *both[] = {f, g};
  for (int i = 0; i < 2; ++i) {
    hali_status_t st = hali_vm_fiber_status(both[i]);
    ck_assert_int_eq(hali_status_code(st), HALI_STATUS_RESOURCE_EXHAUSTED);
    ck_assert_str_eq(hali_status_message(st),
                     "cannot spawn @self: the invocation of @self has 50 "
                     "live fibers, the limit of one invocation");
  }
  /* Every fiber of both ended with its invocation. */
  ck_assert_uint_eq(hali_vm_scheduler_live(s), 0);
  hali_vm_fiber_release(f);
  hali_vm_fiber_release(g);
  hali_vm_scheduler_free(s);
  hali_vm_module_release(m);
}
END_TEST

/* Call depth is per invocation: a spawn is a call, so a chain of spawns
 * reaches the depth limit as a chain of calls would (each fiber of the
 * chain holds one frame when it spawns the next). */
START_TEST(spawning_stops_at_the_call_depth) {
  hali_vm_module_t *m = hali_test_module(k_self_spawn);
  hali_vm_scheduler_options_t o = {.max_depth = 100};
  hali_vm_scheduler_t *s = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, &o, &s));
  hali_value_t arg = {.type = HALI_TYPE_I32, .i32 = 0};
  hali_vm_fiber_t *f = NULL;
  ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "self"), &arg, 1, &f));
  ck_assert_ok(hali_vm_scheduler_run(s, f));
  hali_status_t st = hali_vm_fiber_status(f);
  ck_assert_int_eq(hali_status_code(st), HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(hali_status_message(st),
                   "call depth limit of 100 exceeded: cannot spawn @self 100 "
                   "frames deep (counting the fibers that spawned this one)");
  ck_assert_uint_eq(hali_vm_scheduler_live(s), 0);
  hali_vm_fiber_release(f);
  hali_vm_scheduler_free(s);
  hali_vm_module_release(m);
}
END_TEST

/* Fuel is one budget for a fiber and what it spawns: a spawned fiber
 * takes half of what its spawner has left. */
START_TEST(spawned_fibers_share_the_fuel) {
  hali_vm_module_t *m = hali_test_module(k_self_spawn);
  hali_vm_scheduler_options_t o = {.fuel_enabled = true, .fuel = 1000};
  hali_vm_scheduler_t *s = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, &o, &s));
  hali_vm_fiber_t *f = NULL;
  ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "spawn_spin"), NULL, 0, &f));
  ck_assert_ok(hali_vm_scheduler_run(s, f));
  hali_status_t st = hali_vm_fiber_status(f);
  ck_assert_int_eq(hali_status_code(st), HALI_STATUS_RESOURCE_EXHAUSTED);
  /* The spawner ran one instruction (the spawn is charged first), so the
   * spinner got (1000 - 1) / 2 = 499. */
  ck_assert_str_eq(hali_status_message(st),
                   "instruction budget (fuel) of 499 exhausted");
  /* And without end, spawning is bounded by the fuel too. */
  hali_value_t arg = {.type = HALI_TYPE_I32, .i32 = 0};
  hali_vm_fiber_t *g = NULL;
  ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "self"), &arg, 1, &g));
  ck_assert_ok(hali_vm_scheduler_run(s, g));
  ck_assert_int_eq(hali_status_code(hali_vm_fiber_status(g)),
                   HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_uint_lt(hali_vm_scheduler_live(s), 64);
  hali_vm_scheduler_free(s);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(spawned_failure_reaches_awaiter) {
  env_t e = env_open(child_fails);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  char *text = failure_text(f, HALI_STATUS_OUT_OF_RANGE);
  hali_status_t st = hali_vm_fiber_status(f);
  /* The child's own message and backtrace ... */
  ck_assert_str_eq(hali_status_message(st),
                   "div.s.i32: integer division by zero");
  char want[128];
  snprintf(want, sizeof(want), "at @divide@1 (test.hasm:%u)",
           line_of(child_fails, "div.s.i32"));
  assert_contains(text, want);
  snprintf(want, sizeof(want), "at @child@0 (test.hasm:%u)",
           line_of(child_fails, "call @divide"));
  assert_contains(text, want);
  /* ... then where it was awaited, then the awaiter's backtrace, in that
   * order (innermost first). */
  size_t n = hali_status_annotation_count(st);
  ck_assert_uint_ge(n, 4);
  const char *awaited = hali_status_annotation(st, 2);
  ck_assert_msg(strncmp(awaited, "awaited fence #", 15) == 0,
                "annotation 2 is \"%s\"; full text:\n%s", awaited, text);
  snprintf(want, sizeof(want), "at @main@3 (test.hasm:%u)",
           line_of(child_fails, "hal.fence.await %f"));
  ck_assert_str_eq(hali_status_annotation(st, 3), want);
  printf("failure seen by the awaiter:\n%s\n", text);
  free(text);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* First failure wins. */

START_TEST(first_failure_wins_fence_fail_twice) {
  static const char text[] =
      "func @main() -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %f = hal.fence.create %device\n"
      "  %aborted = const.i32 10\n"
      "  %data_loss = const.i32 15\n"
      "  hal.fence.fail %f, %aborted\n"
      "  hal.fence.fail %f, %data_loss\n"
      "  %q = hal.fence.query %f\n"
      "  %forever = const.i64 -1\n"
      "  %s = hal.fence.await %f, %forever\n"
      "  return %q\n"
      "}\n";
  env_t e = env_open(text);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  char *t = failure_text(f, HALI_STATUS_ABORTED);
  assert_contains(t, "fence failed by hal.fence.fail in @main");
  assert_contains(t, "awaited fence #");
  free(t);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* Two spawned fibers fail (ABORTED first, then DATA_LOSS); the awaiter of
 * their joined fence sees the first, in either join order. */
static const char two_failures[] =
    "func @early() {\n"
    "  %code = const.i32 10\n"
    "  fail %code, \"early failure\"\n"
    "}\n"
    "func @late(%after: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %after, %forever\n"
    "  %code = const.i32 15\n"
    "  fail %code, \"late failure\"\n"
    "}\n"
    "func @main(%swap: i32) -> i32 {\n"
    "^entry:\n"
    "  %a = fiber.spawn @early()\n"
    "  %b = fiber.spawn @late(%a)\n" /* fails only after @early failed */
    "  %forever = const.i64 -1\n"
    "  cond_br %swap, ^ba, ^ab\n"
    "^ab:\n"
    "  %ab = hal.fence.join %a, %b\n"
    "  %s = hal.fence.await %ab, %forever\n"
    "  return %s\n"
    "^ba:\n"
    "  %ba = hal.fence.join %b, %a\n"
    "  %t = hal.fence.await %ba, %forever\n"
    "  return %t\n"
    "}\n";

START_TEST(first_failure_wins_joined_fibers) {
  /* @late awaits @early's fence, which fails: @late fails with ABORTED too
   * (propagation), never reaching its own fail.  So both points carry
   * ABORTED and "early failure". */
  for (int swap = 0; swap < 2; ++swap) {
    env_t e = env_open(two_failures);
    hali_value_t args[] = {hali_value_i32(swap)};
    hali_vm_fiber_t *f = start(&e, "main", args, 1);
    run_until(&e, f);
    char *t = failure_text(f, HALI_STATUS_ABORTED);
    assert_contains(t, "early failure");
    ck_assert_msg(strstr(t, "late failure") == NULL, "%s", t);
    free(t);
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

/* Two independent failures: @first fails at once, @second only after the
 * awaiter has started waiting on the join.  The awaiter must fail with the
 * one that happened first, whatever the join order.  (A regression test:
 * the first failed point in join order used to win.) */
static const char independent_failures[] =
    "func @first() {\n"
    "  %code = const.i32 10\n"
    "  fail %code, \"first failure\"\n"
    "}\n"
    "func @second(%go: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %go, %forever\n"
    "  %code = const.i32 15\n"
    "  fail %code, \"second failure\"\n"
    "}\n"
    /* Waits for @first to have failed (await_status: a plain await
     * would fail us; a query would not wait, and with fiber threads
     * @first may not have run yet). */
    "func @release(%go: !hal.fence, %after: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %q = hal.fence.await_status %after, %forever\n"
    "  hal.fence.signal %go\n"
    "  return\n"
    "}\n"
    "func @main(%swap: i32) -> i32 {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %go = hal.fence.create %device\n"
    "  %b = fiber.spawn @second(%go)\n"
    "  %a = fiber.spawn @first()\n"
    "  %r = fiber.spawn @release(%go, %a)\n"
    "  %forever = const.i64 -1\n"
    "  cond_br %swap, ^ba, ^ab\n"
    "^ab:\n"
    "  %ab = hal.fence.join %a, %b\n"
    "  %s = hal.fence.await %ab, %forever\n"
    "  return %s\n"
    "^ba:\n"
    "  %ba = hal.fence.join %b, %a\n"
    "  %t = hal.fence.await %ba, %forever\n"
    "  return %t\n"
    "}\n";

START_TEST(first_failure_wins_independent) {
  for (int swap = 0; swap < 2; ++swap) {
    env_t e = env_open(independent_failures);
    hali_value_t args[] = {hali_value_i32(swap)};
    hali_vm_fiber_t *f = start(&e, "main", args, 1);
    run_until(&e, f);
    hali_status_t st = hali_vm_fiber_status(f);
    char *t = hali_status_to_string(st);
    ck_assert_msg(st && hali_status_code(st) == HALI_STATUS_ABORTED &&
                      strstr(t, "first failure"),
                  "join order %s: expected the first failure (ABORTED, "
                  "\"first failure\"), got: %s",
                  swap ? "(second, first)" : "(first, second)",
                  t ? t : "OK");
    free(t);
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

/* A joined fence fails as soon as any point fails: awaiting join(p, q)
 * where p waits forever and q fails must fail with q's status (as
 * hali_hal_fence_await does), not hang or report a deadlock.  (A
 * regression test: the scheduler used to wait on the first unreached point
 * only, and reported a deadlock.) */
static const char fail_fast[] =
    "func @forever(%never: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %never, %forever\n"
    "  return\n"
    "}\n"
    "func @broken() {\n"
    "  %code = const.i32 15\n"
    "  fail %code, \"broken\"\n"
    "}\n"
    "func @main() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %never = hal.fence.create %device\n"
    "  %p = fiber.spawn @forever(%never)\n"
    "  %q = fiber.spawn @broken()\n"
    "  %both = hal.fence.join %p, %q\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %both, %forever\n"
    "  hal.fence.signal %never\n"
    "  return %s\n"
    "}\n";

START_TEST(joined_fence_fails_fast) {
  env_t e = env_open(fail_fast);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  hali_status_t st = hali_vm_scheduler_run(e.s, f);
  char *t = hali_status_to_string(st);
  ck_assert_msg(st == NULL, "the scheduler reported: %s", t);
  free(t);
  ck_assert(hali_vm_fiber_done(f));
  t = failure_text(f, HALI_STATUS_DATA_LOSS);
  assert_contains(t, "broken");
  assert_contains(t, "awaited fence #");
  free(t);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Handling failures: query instead of await; assert/fail in a spawned
 * fiber fails its fence, not the invocation. */

/* Waiting without failing: await a private fence with a short timeout (the
 * scheduler runs the spawned fiber meanwhile), then query the child. */
static const char handled[] =
    "func @child(%x: i32) {\n"
    "  %zero = const.i32 0\n"
    "  %ok = ne.i32 %x, %zero\n"
    "  assert %ok, \"x must not be zero\"\n"
    "  return\n"
    "}\n"
    "func @failing() {\n"
    "  %code = const.i32 14\n"
    "  fail %code, \"unavailable\"\n"
    "}\n"
    "func @main() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %zero = const.i32 0\n"
    "  %a = fiber.spawn @child(%zero)\n"
    "  %b = fiber.spawn @failing()\n"
    "  %nap = hal.fence.create %device\n"
    "  %one_ms = const.i64 1\n"
    "  %t = hal.fence.await %nap, %one_ms\n" /* 4: timed out; a, b ran */
    "  %qa = hal.fence.query %a\n"           /* 9 FAILED_PRECONDITION */
    "  %qb = hal.fence.query %b\n"           /* 14 UNAVAILABLE */
    "  %hundred = const.i32 100\n"
    "  %x = mul.i32 %qa, %hundred\n"
    "  %y = add.i32 %x, %qb\n"
    "  %z = mul.i32 %y, %hundred\n"
    "  %r = add.i32 %z, %t\n"
    "  return %r\n" /* 9 14 04 */
    "}\n"
    /* The same without polling: await_status suspends until each fence is
     * done and gives its code instead of failing @main_status. */
    "func @main_status() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %zero = const.i32 0\n"
    "  %one = const.i32 1\n"
    "  %a = fiber.spawn @child(%zero)\n"
    "  %b = fiber.spawn @failing()\n"
    "  %c = fiber.spawn @child(%one)\n"
    "  %forever = const.i64 -1\n"
    "  %sa = hal.fence.await_status %a, %forever\n" /* 9 */
    "  %sb = hal.fence.await_status %b, %forever\n" /* 14 */
    "  %sc = hal.fence.await_status %c, %forever\n" /* 0 */
    /* Both failed: the earlier (@a ran first), whatever the join order. */
    "  %ba = hal.fence.join %b, %a\n"
    "  %sj = hal.fence.await_status %ba, %forever\n" /* 9 */
    "  %nap = hal.fence.create %device\n"
    "  %one_ms = const.i64 1\n"
    "  %t = hal.fence.await_status %nap, %one_ms\n" /* 4: timed out */
    "  %hundred = const.i32 100\n"
    "  %r = mul.i32 %sa, %hundred\n"
    "  %r = add.i32 %r, %sb\n"
    "  %r = mul.i32 %r, %hundred\n"
    "  %r = add.i32 %r, %sc\n"
    "  %r = mul.i32 %r, %hundred\n"
    "  %r = add.i32 %r, %sj\n"
    "  %r = mul.i32 %r, %hundred\n"
    "  %r = add.i32 %r, %t\n"
    "  return %r\n" /* 9 14 00 09 04 */
    "}\n";

/* Both on one fiber thread: @main relies on its children running while
 * it naps 1 ms, and @main_status's join on @a failing before @b (spawn
 * order is start order only there). */
START_TEST(query_handles_failure) {
  env_t e = env_open_threads(handled, 1);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  /* The invocation succeeded although both children failed. */
  ck_assert_int_eq(result_i32(f), 91404);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

START_TEST(await_status_handles_failure) {
  env_t e = env_open_threads(handled, 1);
  hali_vm_fiber_t *f = start(&e, "main_status", NULL, 0);
  run_until(&e, f);
  ck_assert_ptr_null(hali_vm_fiber_status(f));
  ck_assert_int_eq(result_i32(f), 914000904);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* The host sees a spawned fiber's failure on its fence; the invocation
 * itself goes on. */
static const char assert_in_child[] =
    "func @child(%x: i32) -> i32 {\n"
    "  %zero = const.i32 0\n"
    "  %ok = ne.i32 %x, %zero\n"
    "  assert %ok, \"x must not be zero\"\n"
    "  return %x\n"
    "}\n"
    "func @main(%gate: !hal.fence) -> !hal.fence {\n"
    "  %zero = const.i32 0\n"
    "  %a = fiber.spawn @child(%zero)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %gate, %forever\n"
    "  %q = hal.fence.query %a\n"
    "  %nine = const.i32 9\n"
    "  %ok = eq.i32 %q, %nine\n"
    "  assert %ok, \"the child's fence should have failed\"\n"
    "  return %a\n"
    "}\n";

START_TEST(assert_in_spawned_fails_fence_only) {
  env_t e = env_open(assert_in_child);
  hali_vm_scheduler_allow_external_signals(e.s, true);
  hali_hal_fence_t *gate = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&gate));
  hali_value_t args[] = {fence_arg(gate)};
  hali_vm_fiber_t *f = start(&e, "main", args, 1);
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL)); /* main waits, child ran */
  ck_assert(!hali_vm_fiber_done(f));
  ck_assert_ok(hali_hal_fence_signal(gate));
  run_until(&e, f);
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  size_t n = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &n);
  ck_assert_uint_eq(n, 1);
  bool ready = false;
  hali_status_t q = hali_hal_fence_query((hali_hal_fence_t *)r[0].ref, &ready);
  char *t = hali_status_to_string(q);
  ck_assert_int_eq(hali_status_code(q), HALI_STATUS_FAILED_PRECONDITION);
  assert_contains(t, "x must not be zero");
  assert_contains(t, "at @child@2");
  free(t);
  hali_status_free(q);
  hali_vm_fiber_release(f);
  hali_hal_fence_release(gate);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Cancellation. */

static const char cancellable[] =
    "func @wait(%f: !hal.fence) -> i32 {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %s\n"
    "}\n"
    "func @spin() -> i64 {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %i = add.i64 %i, %one\n"
    "  br ^loop\n"
    "}\n"
    "func @main(%f: !hal.fence) -> i32 {\n"
    "  %c = fiber.spawn @wait(%f)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %c, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(cancel_suspended) {
  env_t e = env_open(cancellable);
  hali_vm_scheduler_allow_external_signals(e.s, true);
  hali_hal_fence_t *never = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&never));
  hali_value_t args[] = {fence_arg(never)};
  hali_vm_fiber_t *w = start(&e, "wait", args, 1);
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
  ck_assert_uint_eq(hali_vm_scheduler_suspended(e.s), 1);
  hali_vm_fiber_cancel(w);
  run_until(&e, w);
  char *t = failure_text(w, HALI_STATUS_CANCELLED);
  free(t);
  /* Its fence failed with CANCELLED. */
  bool ready = false;
  hali_status_t q = hali_hal_fence_query(hali_vm_fiber_fence(w), &ready);
  ck_assert_int_eq(hali_status_code(q), HALI_STATUS_CANCELLED);
  hali_status_free(q);
  ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0);
  ck_assert_uint_eq(hali_vm_scheduler_suspended(e.s), 0);
  hali_vm_fiber_release(w);
  /* Cancelling a finished fiber does nothing. */
  hali_hal_fence_release(never);
  env_close(&e);
}
END_TEST

/* Cancelling a fiber a program awaits reaches the program as CANCELLED. */
START_TEST(cancel_reaches_awaiter) {
  env_t e = env_open(cancellable);
  hali_vm_scheduler_allow_external_signals(e.s, true);
  hali_hal_fence_t *never = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&never));
  hali_value_t args[] = {fence_arg(never)};
  hali_vm_fiber_t *main_f = start(&e, "main", args, 1);
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
  ck_assert_uint_eq(hali_vm_scheduler_suspended(e.s), 2);
  hali_vm_fiber_cancel(main_f);
  run_until(&e, main_f);
  char *t = failure_text(main_f, HALI_STATUS_CANCELLED);
  free(t);
  hali_vm_fiber_release(main_f);
  /* The spawned waiter is still suspended: freeing the scheduler cancels
   * and frees it. */
  ck_assert_uint_eq(hali_vm_scheduler_suspended(e.s), 1);
  hali_hal_fence_release(never);
  env_close(&e);
}
END_TEST

typedef struct {
  hali_vm_fiber_t *fiber;
  int delay_ms;
  int64_t cancelled_at;
} canceller_t;

static void *cancel_later(void *arg) {
  canceller_t *c = arg;
  sleep_ms(c->delay_ms);
  c->cancelled_at = now_ns();
  hali_vm_fiber_cancel(c->fiber);
  return NULL;
}

/* A loop that calls the host every iteration: the host cancels the fiber
 * from another thread at the 1000th call (and waits until that thread is
 * done), so the poll is measured in iterations, not milliseconds: a
 * running fiber stops at its next branch, so no call follows the cancel.
 * (It used to be a latency bound, best of three at 10 ms, which a loaded
 * machine under TSan could exceed without anything being wrong.) */
static const char k_ticking[] =
    "func @env.tick() -> i64 import\n"
    "func @tick_forever() -> i64 {\n"
    "^entry:\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %n = call @env.tick()\n"
    "  br ^loop\n"
    "}\n";

typedef struct {
  hali_vm_fiber_t *fiber;
  int64_t ticks;
  int64_t cancelled_at_tick;
} ticker_t;

static void *cancel_now(void *arg) {
  hali_vm_fiber_cancel(((ticker_t *)arg)->fiber);
  return NULL;
}

static hali_status_t host_tick(void *user, const hali_value_t *args,
                               size_t n, hali_value_t *results, size_t m) {
  ticker_t *t = user;
  if (++t->ticks == 1000) {
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, cancel_now, t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    t->cancelled_at_tick = t->ticks;
  }
  results[0] = hali_value_i64(t->ticks);
  return HALI_OK;
}

START_TEST(cancel_running_loop_from_thread) {
  hali_vm_module_t *m = hali_test_module(k_ticking);
  hali_vm_link_t *l = NULL;
  ck_assert_ok(hali_vm_link_create(m, &l));
  ticker_t t = {0};
  ck_assert_ok(hali_vm_link_bind_import(l, "env.tick", host_tick, &t));
  hali_vm_scheduler_t *s = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, NULL, &s));
  ck_assert_ok(hali_vm_scheduler_start_link(
      s, l, hali_vm_module_lookup(m, "tick_forever"), NULL, 0, &t.fiber));
  ck_assert_ok(hali_vm_scheduler_run(s, t.fiber));
  char *text = failure_text(t.fiber, HALI_STATUS_CANCELLED);
  /* Stopped inside the loop (interrupt poll on the back-edge), not before
   * it started. */
  assert_contains(text, "invocation cancelled");
  assert_contains(text, "at @tick_forever@");
  free(text);
  ck_assert_int_eq(t.cancelled_at_tick, 1000);
  ck_assert_int_eq(t.ticks, 1000); /* not one call after the cancel */
  hali_vm_fiber_release(t.fiber);
  hali_vm_scheduler_free(s);
  hali_vm_link_free(l);
  hali_vm_module_release(m);
}
END_TEST

/* The same from a thread that does not synchronise with the loop: the
 * latency is printed (the OS may deschedule the spinning thread on a busy
 * machine, so it is no assertion); that the loop stops at all, inside the
 * loop, is. */
START_TEST(cancel_spinning_loop_latency) {
  env_t e = env_open(cancellable);
  hali_vm_fiber_t *f = start(&e, "spin", NULL, 0);
  canceller_t c = {.fiber = f, .delay_ms = 30};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, cancel_later, &c), 0);
  ck_assert_ok(hali_vm_scheduler_run(e.s, f));
  int64_t stopped_at = now_ns();
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  char *t = failure_text(f, HALI_STATUS_CANCELLED);
  assert_contains(t, "invocation cancelled");
  assert_contains(t, "at @spin@");
  free(t);
  printf("cancel of a running loop from another thread: stopped %.3f ms "
         "after hali_vm_fiber_cancel\n",
         (double)(stopped_at - c.cancelled_at) / 1e6);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* Cancellation from another thread while the fiber is busy suspending and
 * resuming (ping-pong with a partner): whenever it lands, the fiber ends
 * CANCELLED, the scheduler's counts stay consistent (only the partner is
 * left suspended) and no wake-up is left registered for the finished
 * fiber (the partner is then released and everything is freed).  (A
 * regression test: a cancel landing between the suspension and the
 * registration of its wake-up used to queue the fiber twice, and the
 * scheduler then finished it forever.) */
typedef struct {
  hali_vm_fiber_t *fiber;
  int delay_us;
} racer_t;

static void *cancel_soon(void *arg) {
  racer_t *r = arg;
  struct timespec ts = {0, (long)r->delay_us * 1000L};
  nanosleep(&ts, NULL);
  hali_vm_fiber_cancel(r->fiber);
  return NULL;
}

START_TEST(cancel_while_switching_stress) {
  hali_vm_module_t *m = hali_test_module(ping_pong);
  int bad = 0;
  const int rounds = 100;
  for (int i = 0; i < rounds && !bad; ++i) {
    hali_vm_scheduler_t *s = NULL;
    ck_assert_ok(hali_vm_scheduler_create(NULL, NULL, &s));
    hali_vm_scheduler_allow_external_signals(s, true);
    hali_hal_fence_t *a = NULL, *b = NULL;
    ck_assert_ok(hali_hal_fence_create_pending(&a));
    ck_assert_ok(hali_hal_fence_create_pending(&b));
    hali_value_t pa[] = {fence_arg(a), fence_arg(b), hali_value_i64(1000000)};
    hali_value_t pb[] = {fence_arg(b), fence_arg(a), hali_value_i64(1000000)};
    hali_vm_fiber_t *p = NULL, *q = NULL;
    ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "ping"), pa, 3, &p));
    ck_assert_ok(hali_vm_scheduler_start(s, m, lookup(m, "pong"), pb, 3, &q));
    racer_t r = {p, (i * 37) % 200};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, cancel_soon, &r), 0);
    ck_assert_ok(hali_vm_scheduler_run(s, p));
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(hali_status_code(hali_vm_fiber_status(p)),
                     HALI_STATUS_CANCELLED);
    /* pong may be ready (ping signalled it last): let it suspend. */
    ck_assert_ok(hali_vm_scheduler_run(s, NULL));
    if (hali_vm_scheduler_live(s) != 1 || hali_vm_scheduler_suspended(s) != 1)
      bad = i + 1;
    size_t live = hali_vm_scheduler_live(s),
           susp = hali_vm_scheduler_suspended(s);
    hali_vm_fiber_release(p);
    hali_vm_fiber_release(q);
    hali_vm_scheduler_free(s);
    hali_hal_fence_release(a);
    hali_hal_fence_release(b);
    ck_assert_msg(!bad,
                  "round %d: after cancelling ping, %zu live and %zu "
                  "suspended (expected 1 and 1: pong)",
                  i, live, susp);
  }
  hali_vm_module_release(m);
}
END_TEST

/* A fiber cancelled before it ever ran fails with CANCELLED at once. */
START_TEST(cancel_ready) {
  env_t e = env_open(cancellable);
  hali_vm_fiber_t *f = start(&e, "spin", NULL, 0);
  hali_vm_fiber_cancel(f);
  run_until(&e, f);
  char *t = failure_text(f, HALI_STATUS_CANCELLED);
  assert_contains(t, "@spin");
  free(t);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Deadlock: every fiber suspended, nothing can wake them. */

static const char deadlocked[] =
    "func @stuck(%theirs: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %theirs, %forever\n"
    "  return\n"
    "}\n"
    "func @main(%a: !hal.fence, %b: !hal.fence) -> i32 {\n"
    "  %p = fiber.spawn @stuck(%b)\n"
    "  %q = fiber.spawn @stuck(%a)\n"
    "  %both = hal.fence.join %p, %q\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %both, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(deadlock_report) {
  env_t e = env_open(deadlocked);
  hali_hal_fence_t *a = NULL, *b = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&a));
  ck_assert_ok(hali_hal_fence_create_pending(&b));
  hali_value_t args[] = {fence_arg(a), fence_arg(b)};
  hali_vm_fiber_t *f = start(&e, "main", args, 2);
  int64_t t0 = now_ns();
  hali_status_t st = hali_vm_scheduler_run(e.s, f);
  int64_t t1 = now_ns();
  char *t = hali_status_to_string(st);
  ck_assert_msg(st && hali_status_code(st) == HALI_STATUS_FAILED_PRECONDITION,
                "expected a deadlock report, got %s", t ? t : "OK");
  printf("deadlock report (after %.3f ms):\n%s\n", (double)(t1 - t0) / 1e6,
         t);
  assert_contains(t, "deadlock: all 3 fiber(s) are suspended");
  unsigned await_main = line_of(deadlocked, "hal.fence.await %both");
  unsigned await_stuck = line_of(deadlocked, "hal.fence.await %theirs");
  char want[160];
  /* fiber 1 is @main, awaiting the joined fence (created in the program,
   * so only its form is known); 2 and 3 are the two @stuck. */
  snprintf(want, sizeof(want), "fiber 1 (@main) awaits fence #");
  assert_contains(t, want);
  snprintf(want, sizeof(want), "at @main@4 (test.hasm:%u)", await_main);
  assert_contains(t, want);
  snprintf(want, sizeof(want),
           "fiber 2 (@stuck) awaits fence #%u at @stuck@1 (test.hasm:%u)",
           ref_id(b), await_stuck);
  assert_contains(t, want);
  snprintf(want, sizeof(want),
           "fiber 3 (@stuck) awaits fence #%u at @stuck@1 (test.hasm:%u)",
           ref_id(a), await_stuck);
  assert_contains(t, want);
  free(t);
  hali_status_free(st);
  /* Deadlock detection is immediate, not a timeout. */
  ck_assert_int_lt(t1 - t0, 1000 * MS);
  /* The program is still intact: signalling from the host unblocks it. */
  hali_vm_scheduler_allow_external_signals(e.s, true);
  ck_assert_ok(hali_hal_fence_signal(a));
  ck_assert_ok(hali_hal_fence_signal(b));
  run_until(&e, f);
  ck_assert_int_eq(result_i32(f), 0);
  hali_vm_fiber_release(f);
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
  env_close(&e);
}
END_TEST

/* With external signals allowed the scheduler waits instead: a host thread
 * signals later. */
typedef struct {
  hali_hal_fence_t *fence;
  int delay_ms;
} signaller_t;

static void *signal_later(void *arg) {
  signaller_t *sg = arg;
  sleep_ms(sg->delay_ms);
  hali_status_t s = hali_hal_fence_signal(sg->fence);
  hali_status_free(s);
  return NULL;
}

START_TEST(external_signal_no_deadlock) {
  env_t e = env_open(waiter);
  hali_vm_scheduler_allow_external_signals(e.s, true);
  hali_hal_fence_t *gate = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&gate));
  hali_value_t args[] = {fence_arg(gate), hali_value_i32(7)};
  hali_vm_fiber_t *f = start(&e, "wait", args, 2);
  signaller_t sg = {gate, 20};
  pthread_t th;
  int64_t t0 = now_ns();
  ck_assert_int_eq(pthread_create(&th, NULL, signal_later, &sg), 0);
  run_until(&e, f);
  int64_t t1 = now_ns();
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(result_i32(f), 7);
  ck_assert_int_ge(t1 - t0, 20 * MS);
  hali_vm_fiber_release(f);
  hali_hal_fence_release(gate);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Timeouts. */

static const char timed[] =
    "func @wait(%f: !hal.fence, %ms: i64) -> i32 {\n"
    "  %s = hal.fence.await %f, %ms\n"
    "  return %s\n"
    "}\n";

/* Runs @wait(never, ms) through the scheduler (or, with |blocking|, plain
 * hali_vm_invoke) and returns its result and the elapsed time. */
static int32_t timed_wait(int64_t ms, bool blocking, int64_t *out_ns) {
  env_t e = env_open(timed);
  hali_hal_fence_t *never = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&never));
  hali_value_t args[] = {fence_arg(never), hali_value_i64(ms)};
  int32_t r = -1;
  int64_t t0 = now_ns();
  if (blocking) {
    hali_vm_stack_t *st = NULL;
    hali_value_t out;
    ck_assert_ok(hali_vm_stack_create(0, &st));
    ck_assert_ok(hali_vm_invoke(st, e.m, lookup(e.m, "wait"), args, 2, &out,
                                1));
    r = out.i32;
    hali_vm_stack_free(st);
  } else {
    hali_vm_fiber_t *f = start(&e, "wait", args, 2);
    run_until(&e, f);
    r = result_i32(f);
    hali_vm_fiber_release(f);
  }
  *out_ns = now_ns() - t0;
  hali_hal_fence_release(never);
  env_close(&e);
  return r;
}

START_TEST(await_timeout_zero) {
  for (int blocking = 0; blocking < 2; ++blocking) {
    int64_t ns;
    ck_assert_int_eq(timed_wait(0, blocking, &ns), 4);
    printf("await timeout 0 (%s): %.3f ms\n",
           blocking ? "hali_vm_invoke" : "scheduler", (double)ns / 1e6);
    ck_assert_int_lt(ns, 5 * MS * slow_factor());
  }
}
END_TEST

START_TEST(await_timeout_finite) {
  for (int blocking = 0; blocking < 2; ++blocking) {
    int64_t ns;
    ck_assert_int_eq(timed_wait(30, blocking, &ns), 4);
    printf("await timeout 30 ms (%s): returned 4 after %.3f ms\n",
           blocking ? "hali_vm_invoke" : "scheduler", (double)ns / 1e6);
    ck_assert_int_ge(ns, 30 * MS);
    ck_assert_int_lt(ns, 30 * MS + 500 * MS * slow_factor());
  }
}
END_TEST

/* A timed-out await leaves the fiber free to await again: the fence is
 * signalled later by another fiber that sleeps with its own timeout. */
static const char timeout_then_signal[] =
    "func @later(%f: !hal.fence) {\n"
    "  %device = hal.device.get\n"
    "  %nap = hal.fence.create %device\n"
    "  %ms = const.i64 20\n"
    "  %t = hal.fence.await %nap, %ms\n"
    "  hal.fence.signal %f\n"
    "  return\n"
    "}\n"
    "func @main() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %g = fiber.spawn @later(%f)\n"
    "  %short = const.i64 1\n"
    "  %a = hal.fence.await %f, %short\n" /* 4 */
    "  %forever = const.i64 -1\n"
    "  %b = hal.fence.await %f, %forever\n" /* 0 */
    "  %ten = const.i32 10\n"
    "  %x = mul.i32 %a, %ten\n"
    "  %r = add.i32 %x, %b\n"
    "  return %r\n"
    "}\n";

/* On one fiber thread, where the two timeouts end in deadline order (on
 * several, a loaded core could resume @main after @later signalled). */
START_TEST(await_timeout_then_signal) {
  env_t e = env_open_threads(timeout_then_signal, 1);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  ck_assert_int_eq(result_i32(f), 40);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* A timed-out await whose fence got signalled before the fiber resumed
 * returns 0; the next await must then wait normally (a regression test: it
 * used to return 4 at once).  @a and @b both time
 * out in the same scheduler pass (while @spin kept the thread busy); @b
 * runs first (it was started later) and signals %f, so @a's timed-out
 * await finds %f ready.  @a's second await, on %h, must suspend until @b
 * signals %h. */
static const char stale_timeout[] =
    "func @a(%f: !hal.fence, %h: !hal.fence) {\n"
    "  %one = const.i64 1\n"
    "  %s1 = hal.fence.await %f, %one\n"
    "  %forever = const.i64 -1\n"
    "  %s2 = hal.fence.await %h, %forever\n"
    "  %zero = const.i32 0\n"
    "  %ok = eq.i32 %s2, %zero\n"
    "  assert %ok, \"the second await returned without %h being signalled\"\n"
    "  return\n"
    "}\n"
    "func @b(%f: !hal.fence, %h: !hal.fence) {\n"
    "  %device = hal.device.get\n"
    "  %nap = hal.fence.create %device\n"
    "  %one = const.i64 1\n"
    "  %t1 = hal.fence.await %nap, %one\n"
    "  hal.fence.signal %f\n"
    "  %t2 = hal.fence.await %nap, %one\n"
    "  hal.fence.signal %h\n"
    "  return\n"
    "}\n"
    "func @spin(%n: i64) {\n"
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
    "func @main(%n: i64) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %h = hal.fence.create %device\n"
    "  %pa = fiber.spawn @a(%f, %h)\n"
    "  %pb = fiber.spawn @b(%f, %h)\n"
    "  %ps = fiber.spawn @spin(%n)\n"
    "  %ab = hal.fence.join %pa, %pb\n"
    "  %all = hal.fence.join %ab, %ps\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %all, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(await_after_stale_timeout) {
  /* One fiber thread: the scenario is one thread's order (above). */
  env_t e = env_open_threads(stale_timeout, 1);
  /* Enough iterations to keep the thread busy for a few ms. */
  hali_value_t args[] = {hali_value_i64(3000000)};
  hali_vm_fiber_t *f = start(&e, "main", args, 1);
  run_until(&e, f);
  hali_status_t st = hali_vm_fiber_status(f);
  char *t = hali_status_to_string(st);
  ck_assert_msg(st == NULL, "%s", t);
  free(t);
  ck_assert_int_eq(result_i32(f), 0);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Blocking: plain hali_vm_invoke blocks the thread in an await (no
 * scheduler), and fiber.spawn needs a scheduler. */

START_TEST(invoke_blocks) {
  env_t e = env_open(waiter);
  hali_hal_fence_t *gate = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&gate));
  signaller_t sg = {gate, 20};
  pthread_t th;
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_value_t args[] = {fence_arg(gate), hali_value_i32(3)}, out;
  int64_t t0 = now_ns();
  ck_assert_int_eq(pthread_create(&th, NULL, signal_later, &sg), 0);
  ck_assert_ok(hali_vm_invoke(st, e.m, lookup(e.m, "wait"), args, 2, &out, 1));
  int64_t t1 = now_ns();
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(out.i32, 3);
  ck_assert_int_ge(t1 - t0, 20 * MS);
  ck_assert_status(hali_test_call(child_fails, "main", NULL, 0, &out, 1),
                   HALI_STATUS_FAILED_PRECONDITION, "needs a scheduler");
  hali_vm_stack_free(st);
  hali_hal_fence_release(gate);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Fairness.  Each round the host signals one tick; every fiber awaiting it
 * wakes, logs its id into a shared buffer and awaits the next tick: every
 * round logs each fiber exactly once (none starves, none runs twice).  A
 * second pair passes a baton and must alternate. */

static const char ticker[] =
    "func @tick(%clock: !hal.fence, %log: !hal.buffer, %id: i32, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %four = const.i64 4\n"
    "  %zero = const.i64 0\n"
    "  %forever = const.i64 -1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %t = hal.fence.offset %clock, %i\n"
    "  %s = hal.fence.await %t, %forever\n"
    /* log[1 + log[0]++] = id  (offsets in bytes) */
    "  %pos = hal.buffer.load.i64 %log, %zero\n"
    "  %next = add.i64 %pos, %one\n"
    "  hal.buffer.store.i64 %log, %zero, %next\n"
    "  %slot = add.i64 %pos, %one\n"
    "  %at = mul.i64 %slot, %four\n"
    "  %at = add.i64 %at, %four\n"
    "  hal.buffer.store.i32 %log, %at, %id\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    /* Two fibers pass a baton: each logs, signals the other, awaits it. */
    "func @baton(%mine: !hal.fence, %theirs: !hal.fence, %log: !hal.buffer,\n"
    "            %id: i32, %n: i64) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %four = const.i64 4\n"
    "  %zero = const.i64 0\n"
    "  %forever = const.i64 -1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %pos = hal.buffer.load.i64 %log, %zero\n"
    "  %next = add.i64 %pos, %one\n"
    "  hal.buffer.store.i64 %log, %zero, %next\n"
    "  %slot = add.i64 %pos, %one\n"
    "  %at = mul.i64 %slot, %four\n"
    "  %at = add.i64 %at, %four\n"
    "  hal.buffer.store.i32 %log, %at, %id\n"
    "  %m = hal.fence.offset %mine, %i\n"
    "  hal.fence.signal %m\n"
    "  %t = hal.fence.offset %theirs, %i\n"
    "  %s = hal.fence.await %t, %forever\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n";

static hali_hal_buffer_t *host_buffer(hali_hal_device_t *dev, size_t size) {
  hali_hal_buffer_params_t p = {.memory_types = 0x13, .usage = 0x7};
  hali_hal_buffer_t *b = NULL;
  ck_assert_ok(hali_hal_allocator_allocate_buffer(
      hali_hal_device_allocator(dev), p, size, &b));
  return b;
}

static hali_value_t buffer_arg(hali_hal_buffer_t *b) {
  hali_value_t v = {.type = HALI_TYPE_BUFFER};
  v.ref = (hali_ref_t *)b;
  return v;
}

/* The fairness tests log through plain loads and stores of one counter:
 * one fiber thread, where fibers run one at a time (doc/fibers.md). */
START_TEST(fairness_fifo_wakeups) {
  enum { FIBERS = 4, ROUNDS = 100 };
  env_t e = env_open_threads(ticker, 1);
  hali_vm_scheduler_allow_external_signals(e.s, true);
  hali_hal_semaphore_t *sem = NULL;
  ck_assert_ok(hali_hal_semaphore_create(0, &sem));
  hali_hal_fence_t *clock = NULL;
  ck_assert_ok(hali_hal_fence_create_at(sem, 1, &clock));
  hali_hal_buffer_t *log = host_buffer(e.dev, 8 + 4 * FIBERS * ROUNDS + 4);
  hali_vm_fiber_t *f[FIBERS];
  for (int k = 0; k < FIBERS; ++k) {
    hali_value_t args[] = {fence_arg(clock), buffer_arg(log),
                           hali_value_i32(k), hali_value_i64(ROUNDS)};
    f[k] = start(&e, "tick", args, 4);
  }
  for (uint64_t r = 1; r <= ROUNDS; ++r) {
    ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
    ck_assert_uint_eq(hali_vm_scheduler_suspended(e.s), FIBERS);
    ck_assert_ok(hali_hal_semaphore_signal(sem, r));
  }
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
  ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0);
  int64_t count = 0;
  ck_assert_ok(hali_hal_buffer_read(log, 0, &count, 8));
  ck_assert_int_eq(count, FIBERS * ROUNDS);
  int32_t *ids = malloc(4 * FIBERS * ROUNDS);
  ck_assert_ok(hali_hal_buffer_read(log, 8, ids, 4 * FIBERS * ROUNDS));
  /* Every round runs every fiber exactly once.  (The order within a round
   * is the order the semaphore fires its timepoints: hal/semaphore.c keeps
   * them in a LIFO list, so it alternates between reverse and forward
   * start order; the ready queue itself is FIFO.) */
  for (int r = 0; r < ROUNDS; ++r) {
    int seen = 0;
    for (int k = 0; k < FIBERS; ++k) {
      int32_t id = ids[r * FIBERS + k];
      ck_assert_msg(id >= 0 && id < FIBERS && !(seen & (1 << id)),
                    "round %d: fiber %d ran twice or is unknown", r, id);
      seen |= 1 << id;
    }
  }
  printf("fairness: wake order round 1: %d %d %d %d, round 2: %d %d %d %d\n",
         ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6], ids[7]);
  free(ids);
  for (int k = 0; k < FIBERS; ++k) hali_vm_fiber_release(f[k]);
  hali_hal_buffer_release(log);
  hali_hal_fence_release(clock);
  hali_hal_semaphore_release(sem);
  env_close(&e);
}
END_TEST

START_TEST(fairness_baton_alternates) {
  enum { N = 1000 };
  env_t e = env_open_threads(ticker, 1);
  hali_hal_fence_t *a = NULL, *b = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&a));
  ck_assert_ok(hali_hal_fence_create_pending(&b));
  hali_hal_buffer_t *log = host_buffer(e.dev, 8 + 4 * 2 * N + 4);
  hali_value_t a_args[] = {fence_arg(a), fence_arg(b), buffer_arg(log),
                           hali_value_i32(0), hali_value_i64(N)};
  hali_value_t b_args[] = {fence_arg(b), fence_arg(a), buffer_arg(log),
                           hali_value_i32(1), hali_value_i64(N)};
  hali_vm_fiber_t *fa = start(&e, "baton", a_args, 5);
  hali_vm_fiber_t *fb = start(&e, "baton", b_args, 5);
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
  ck_assert(hali_vm_fiber_done(fa) && hali_vm_fiber_done(fb));
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(fa)));
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(fb)));
  int32_t *ids = malloc(4 * 2 * N);
  ck_assert_ok(hali_hal_buffer_read(log, 8, ids, 4 * 2 * N));
  /* Each fiber is at most one step ahead of the other: after any prefix,
   * the two counts differ by at most 1 (with lag, by at most 2). */
  int seen[2] = {0, 0};
  for (int i = 0; i < 2 * N; ++i) {
    ck_assert(ids[i] == 0 || ids[i] == 1);
    seen[ids[i]]++;
    ck_assert_msg(abs(seen[0] - seen[1]) <= 2, "at %d: %d vs %d", i, seen[0],
                  seen[1]);
  }
  ck_assert_int_eq(seen[0], N);
  ck_assert_int_eq(seen[1], N);
  free(ids);
  hali_vm_fiber_release(fa);
  hali_vm_fiber_release(fb);
  hali_hal_buffer_release(log);
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Device independence: fibers mixed with queue work give the same results
 * on local-sync and local-task with 1, 2 and 4 workers. */

static const char mixed[] =
    /* Fills its slice of %buf with |value| on the queue (after %after),
     * awaits it, then sums the slice and stores the sum at sums[k]. */
    "func @part(%buf: !hal.buffer, %sums: !hal.buffer, %k: i64, %n: i64,\n"
    "           %after: !hal.fence, %done: !hal.fence) {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %four = const.i64 4\n"
    "  %eight = const.i64 8\n"
    "  %one = const.i64 1\n"
    "  %zero = const.i64 0\n"
    "  %bytes = mul.i64 %n, %four\n"
    "  %base = mul.i64 %k, %bytes\n"
    "  %k32 = trunc.i64.i32 %k\n"
    "  %seven = const.i32 7\n"
    "  %value = mul.i32 %k32, %seven\n"
    "  %c1 = const.i32 1\n"
    "  %value = add.i32 %value, %c1\n"
    "  %mode = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %mode, %mode\n"
    "  %psize = const.i32 4\n"
    "  hal.command_buffer.fill %cmd, %buf, %base, %bytes, %value, %psize\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  hal.device.queue.execute %device, %after, %done, [%cmd]\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %done, %forever\n"
    "  %i = const.i64 0\n"
    "  %sum = const.i64 0\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %off = mul.i64 %i, %four\n"
    "  %off = add.i64 %off, %base\n"
    "  %x = hal.buffer.load.i32 %buf, %off\n"
    "  %x64 = ext.s.i32.i64 %x\n"
    "  %w = add.i64 %i, %one\n"
    "  %x64 = mul.i64 %x64, %w\n"
    "  %sum = add.i64 %sum, %x64\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^out\n"
    "^out:\n"
    "  %at = mul.i64 %k, %eight\n"
    "  hal.buffer.store.i64 %sums, %at, %sum\n"
    "  return\n"
    "}\n"
    "func @main(%parts: i64, %n: i64) -> i64 {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %four = const.i64 4\n"
    "  %eight = const.i64 8\n"
    "  %total = mul.i64 %parts, %n\n"
    "  %bytes = mul.i64 %total, %four\n"
    "  %buf = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %sbytes = mul.i64 %parts, %eight\n"
    "  %sums = hal.allocator.allocate %allocator, %memory, %usage, %sbytes\n"
    "  %one = const.i64 1\n"
    "  %k = const.i64 0\n"
    "  %after = hal.fence.null\n"
    "  %all = hal.fence.null\n"
    "  br ^spawn\n"
    "^spawn:\n"
    /* Each part's queue work waits for the previous part's. */
    "  %done = hal.fence.create %device\n"
    "  %f = fiber.spawn @part(%buf, %sums, %k, %n, %after, %done)\n"
    "  %all = hal.fence.join %all, %f\n"
    "  %after = hal.fence.join %done, %done\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %parts\n"
    "  cond_br %more, ^spawn, ^join\n"
    "^join:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %all, %forever\n"
    "  %i = const.i64 0\n"
    "  %acc = const.i64 0\n"
    "  %prime = const.i64 1000003\n"
    "  br ^fold\n"
    "^fold:\n"
    "  %at = mul.i64 %i, %eight\n"
    "  %x = hal.buffer.load.i64 %sums, %at\n"
    "  %acc = mul.i64 %acc, %prime\n"
    "  %acc = add.i64 %acc, %x\n"
    "  %i = add.i64 %i, %one\n"
    "  %more2 = lt.s.i64 %i, %parts\n"
    "  cond_br %more2, ^fold, ^end\n"
    "^end:\n"
    "  return %acc\n"
    "}\n";

/* On one fiber thread: the parts submit their queue work in the order
 * they start, which is spawn order only there (with several threads a
 * later part may submit first, and its work, waiting at the head of the
 * in-order queue for a fence behind it, is the deadlock reported). */
static int64_t run_mixed(hali_hal_device_kind_t kind, uint32_t workers) {
  env_t e = {.m = hali_test_module(mixed), .dev = device(kind, workers)};
  hali_vm_scheduler_options_t o = {.threads = 1};
  ck_assert_ok(hali_vm_scheduler_create(e.dev, &o, &e.s));
  hali_value_t args[] = {hali_value_i64(8), hali_value_i64(1000)};
  hali_vm_fiber_t *f = start(&e, "main", args, 2);
  run_until(&e, f);
  int64_t r = result_i64(f);
  hali_vm_fiber_release(f);
  env_close(&e);
  return r;
}

START_TEST(same_results_on_every_device) {
  /* part k fills value 7k+1 and sums value * (i+1) over i < n. */
  const int64_t n = 1000, parts = 8;
  /* The program's i64 arithmetic wraps; so does this reference. */
  uint64_t wrapped = 0;
  for (int64_t k = 0; k < parts; ++k)
    wrapped = wrapped * 1000003u + (uint64_t)((7 * k + 1) * (n * (n + 1) / 2));
  int64_t want = (int64_t)wrapped;
  ck_assert_int_eq(run_mixed(HALI_HAL_DEVICE_LOCAL_SYNC, 0), want);
  static const uint32_t workers[] = {1, 2, 4};
  for (size_t i = 0; i < COUNT_OF(workers); ++i)
    for (int rep = 0; rep < 3; ++rep)
      ck_assert_int_eq(run_mixed(HALI_HAL_DEVICE_LOCAL_TASK, workers[i]),
                       want);
}
END_TEST

/* ------------------------------------------------------------------------ */


/* ------------------------------------------------------------------------ */
/* Groups: a fence built with "%g = hal.fence.join %g, %f" (doc/fibers.md,
 * Groups).  Adding a member costs O(1) amortised: the join adds the points
 * in place when nothing else holds %g, and a fence indexes its points by
 * semaphore.  Awaiting the group wakes the awaiter once, when the last
 * member ends (or at once when one fails). */

/* @main(n, batch): spawns n children that each store k + 1 at buf[k],
 * adds each child's fence to the group %g, awaits the newest child every
 * |batch| spawns (so few fibers are live at once), then awaits the group
 * and returns the sum over buf and the group. */
static const char group_fan_out[] =
    "func @child(%buf: !hal.buffer, %k: i64) {\n"
    "  %eight = const.i64 8\n"
    "  %at = mul.i64 %k, %eight\n"
    "  %one = const.i64 1\n"
    "  %v = add.i64 %k, %one\n"
    "  hal.buffer.store.i64 %buf, %at, %v\n"
    "  return\n"
    "}\n"
    "func @main(%n: i64, %batch: i64) -> (i64, !hal.fence) {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %eight = const.i64 8\n"
    "  %zero = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %forever = const.i64 -1\n"
    "  %slots = add.i64 %n, %one\n"
    "  %bytes = mul.i64 %slots, %eight\n"
    "  %buf = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %g = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  %some = lt.s.i64 %k, %n\n"
    "  cond_br %some, ^spawn, ^await\n"
    "^spawn:\n"
    "  %f = fiber.spawn @child(%buf, %k)\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %r = rem.s.i64 %k, %batch\n"
    "  %pause = eq.i64 %r, %zero\n"
    "  cond_br %pause, ^breathe, ^next\n"
    "^breathe:\n"
    "  %s0 = hal.fence.await %f, %forever\n"
    "  br ^next\n"
    "^next:\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^await\n"
    "^await:\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  %i = const.i64 0\n"
    "  %sum = const.i64 0\n"
    "  cond_br %some, ^fold, ^end\n"
    "^fold:\n"
    "  %at = mul.i64 %i, %eight\n"
    "  %x = hal.buffer.load.i64 %buf, %at\n"
    "  %sum = add.i64 %sum, %x\n"
    "  %i = add.i64 %i, %one\n"
    "  %more2 = lt.s.i64 %i, %n\n"
    "  cond_br %more2, ^fold, ^end\n"
    "^end:\n"
    "  return %sum, %g\n"
    "}\n";

/* The points a group of |n| finished members still holds: every member
 * below 16 (a fence that small is never compacted); past that only the
 * members that had not ended when it last filled up (those still queued
 * behind the spawner, which yields at a backlog of 64 per thread), so
 * the count stays bounded whatever |n| is (doc/fibers.md, Groups). */
static void assert_group_points(hali_hal_fence_t *g, int64_t n) {
  size_t points = hali_hal_fence_point_count(g);
  if (n < 16) ck_assert_uint_eq(points, (size_t)n);
  ck_assert_uint_le(points, (size_t)n);
  ck_assert_uint_le(points, 1024);
}

/* Runs group_fan_out with |n| members; checks the sum against a plain
 * loop (every member ended before the await returned) and that the group
 * does not keep a point per finished member.  Returns the wall time. */
static uint64_t group_watchdog_wakeups;
static int64_t run_group(int64_t n, int64_t batch) {
  env_t e = env_open(group_fan_out);
  hali_value_t args[] = {hali_value_i64(n), hali_value_i64(batch)};
  int64_t t0 = now_ns();
  hali_vm_fiber_t *f = start(&e, "main", args, 2);
  run_until(&e, f);
  int64_t took = now_ns() - t0;
  int64_t want = 0;
  for (int64_t k = 0; k < n; ++k) want += k + 1;
  ck_assert_int_eq(result_i64(f), want);
  size_t count = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &count);
  ck_assert_uint_eq(count, 2);
  ck_assert_int_eq(r[1].type, HALI_TYPE_FENCE);
  hali_hal_fence_t *g = (hali_hal_fence_t *)r[1].ref;
  assert_group_points(g, n);
  bool ready = false;
  ck_assert_ok(hali_hal_fence_query(g, &ready));
  ck_assert(ready);
  group_watchdog_wakeups = hali_vm_scheduler_watchdog_wakeups(e.s);
  hali_vm_fiber_release(f);
  env_close(&e);
  return took;
}

START_TEST(group_of_zero) { run_group(0, 1); }
END_TEST

START_TEST(group_of_one) { run_group(1, 1); }
END_TEST

START_TEST(group_of_100000) {
  /* Joining one member at a time used to copy and rescan the whole group
   * (O(N^2) per join: 4.8 s for N = 4,000); now O(1) each.  The bound is
   * 100x what this takes (~0.2 s) and far below the old cost. */
  int64_t took = run_group(100000, 1000);
  printf("group of 100,000 spawned fibers: %.1f ms (%.2f us per member)\n",
         (double)took / 1e6, (double)took / 1e5 / 1e3);
  ck_assert_int_lt(took, 20000 * MS * slow_factor());
}
END_TEST

START_TEST(join_every_fiber_idiom_10000) {
  /* doc/fibers.md's idiom without pauses: the spawner never awaits until
   * the end (its backlog still makes it yield to the children). */
  int64_t took = run_group(10000, 1000000);
  printf("join of 10,000 live fibers' fences: %.1f ms, %" PRIu64
         " watchdog wake-ups\n",
         (double)took / 1e6, group_watchdog_wakeups);
  ck_assert_int_lt(took, 10000 * MS * slow_factor());
  /* ~30,000 scheduler events (a spawn, a wake-up and a finish per fiber)
   * do not wake the watchdog: it ticks at most every 5 ms while fibers
   * run (it used to share the scheduler's condition variable). */
  ck_assert_uint_le(group_watchdog_wakeups, (uint64_t)(took / (5 * MS)) + 8);
}
END_TEST

/* A group whose first-added member fails last and whose last-added member
 * fails first: awaiting the group fails with the one first in time. */
static const char group_failures[] =
    "func @late(%go: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %go, %forever\n"
    "  %code = const.i32 15\n"
    "  fail %code, \"late failure\"\n"
    "}\n"
    "func @fine() {\n"
    "  return\n"
    "}\n"
    "func @early() {\n"
    "  %code = const.i32 10\n"
    "  fail %code, \"early failure\"\n"
    "}\n"
    /* Waits for @early to have failed (not a poll: with fiber threads
     * @early may not have run yet), then lets @late fail. */
    "func @release(%go: !hal.fence, %after: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %q = hal.fence.await_status %after, %forever\n"
    "  hal.fence.signal %go\n"
    "  return\n"
    "}\n"
    "func @main() -> i32 {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %go = hal.fence.create %device\n"
    "  %g = hal.fence.null\n"
    "  %a = fiber.spawn @late(%go)\n"
    "  %g = hal.fence.join %g, %a\n"
    "  %b = fiber.spawn @fine()\n"
    "  %g = hal.fence.join %g, %b\n"
    "  %g = hal.fence.join %g, %b\n" /* the same member twice: one point */
    "  %c = fiber.spawn @early()\n"
    "  %g = hal.fence.join %g, %c\n"
    "  %r = fiber.spawn @release(%go, %c)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(group_fails_with_first_failure_in_time) {
  env_t e = env_open(group_failures);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  char *t = failure_text(f, HALI_STATUS_ABORTED);
  assert_contains(t, "early failure");
  ck_assert_msg(strstr(t, "late failure") == NULL, "%s", t);
  free(t);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* In place only when nothing else holds the group: a copy taken before
 * the join (%keep) keeps its own points. */
static const char group_shared[] =
    "func @main() -> (!hal.fence, !hal.fence) {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %b = hal.fence.create %device\n"
    "  %g = hal.fence.join %a, %a\n"
    "  %keep = hal.fence.join %g, %g\n"
    "  %g = hal.fence.join %g, %b\n"
    "  hal.fence.signal %a\n"
    "  return %keep, %g\n"
    "}\n";

START_TEST(group_join_in_place_only_when_unshared) {
  env_t e = env_open(group_shared);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  size_t n = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &n);
  ck_assert_uint_eq(n, 2);
  hali_hal_fence_t *keep = (hali_hal_fence_t *)r[0].ref;
  hali_hal_fence_t *g = (hali_hal_fence_t *)r[1].ref;
  ck_assert_uint_eq(hali_hal_fence_point_count(keep), 1);
  ck_assert_uint_eq(hali_hal_fence_point_count(g), 2);
  bool ready = false;
  ck_assert_ok(hali_hal_fence_query(keep, &ready));
  ck_assert(ready);
  ck_assert_ok(hali_hal_fence_query(g, &ready));
  ck_assert(!ready); /* %b was never signalled */
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST


/* Compaction (hali_hal_fence_join_into on a full group) drops exactly the
 * points reached for good: reached, not failed, and held by nobody but
 * the group.  It keeps a point not yet reached (even one nobody can
 * signal), a failed one, and a reached one still held elsewhere (its
 * holder may fail it yet). */
static hali_hal_semaphore_t *group_member(hali_hal_fence_t *g) {
  hali_hal_semaphore_t *sem = NULL;
  ck_assert_ok(hali_hal_semaphore_create(0, &sem));
  hali_hal_fence_t *f = NULL;
  ck_assert_ok(hali_hal_fence_create_at(sem, 1, &f));
  ck_assert_ok(hali_hal_fence_join_into(g, f));
  hali_hal_fence_release(f);
  return sem;
}

START_TEST(group_compaction_keeps_what_can_still_matter) {
  hali_hal_fence_t *g = NULL;
  ck_assert_ok(hali_hal_fence_create(&g));
  hali_hal_semaphore_t *sem[16];
  for (int i = 0; i < 16; ++i) sem[i] = group_member(g);
  ck_assert_uint_eq(hali_hal_fence_point_count(g), 16);
  /* 0-11: reached, only the group holds them: droppable. */
  for (int i = 0; i < 12; ++i) {
    ck_assert_ok(hali_hal_semaphore_signal(sem[i], 1));
    hali_hal_semaphore_release(sem[i]);
  }
  /* 12: never reached, nobody else holds it (a deadlock if awaited). */
  hali_hal_semaphore_release(sem[12]);
  /* 13: reached but held here: may still fail.  14: held, pending.
   * 15: reached past its value, then failed, only the group holds it. */
  ck_assert_ok(hali_hal_semaphore_signal(sem[13], 1));
  ck_assert_ok(hali_hal_semaphore_signal(sem[15], 5));
  hali_hal_semaphore_fail(sem[15], hali_status_make(HALI_STATUS_ABORTED,
                                                    "member 15 failed"));
  hali_hal_semaphore_release(sem[15]);
  /* The 17th member finds the group full: 12 points go, 4 + 1 stay. */
  hali_hal_semaphore_t *last = group_member(g);
  ck_assert_uint_eq(hali_hal_fence_point_count(g), 5);
  bool ready = true;
  ck_assert_status(hali_hal_fence_query(g, &ready), HALI_STATUS_ABORTED,
                   "member 15 failed");
  /* Without the failed member: still waiting (12 and 14 and the 17th),
   * and a kept reached member that fails later fails the group. */
  hali_hal_fence_t *h = NULL;
  ck_assert_ok(hali_hal_fence_create(&h));
  hali_hal_semaphore_t *held = group_member(h);
  ck_assert_ok(hali_hal_semaphore_signal(held, 1));
  for (int i = 0; i < 40; ++i) { /* reached for good: never kept long */
    hali_hal_semaphore_t *x = group_member(h);
    ck_assert_ok(hali_hal_semaphore_signal(x, 1));
    hali_hal_semaphore_release(x);
  }
  ck_assert_uint_le(hali_hal_fence_point_count(h), 16);
  ck_assert_ok(hali_hal_fence_query(h, &ready));
  ck_assert(ready);
  hali_hal_semaphore_fail(held, hali_status_make(HALI_STATUS_DATA_LOSS,
                                                 "failed after it signalled"));
  ck_assert_status(hali_hal_fence_query(h, &ready), HALI_STATUS_DATA_LOSS,
                   "failed after it signalled");
  hali_hal_semaphore_release(held);
  hali_hal_fence_release(h);
  /* A group whose members are all pending keeps every one (it grows as
   * before), and a group of finished members stays small however many
   * join it: O(1) amortised either way. */
  hali_hal_fence_t *p = NULL, *d = NULL;
  ck_assert_ok(hali_hal_fence_create(&p));
  ck_assert_ok(hali_hal_fence_create(&d));
  enum { N = 20000 };
  int64_t t0 = now_ns();
  for (int i = 0; i < N; ++i) {
    hali_hal_semaphore_release(group_member(p));
    hali_hal_semaphore_t *x = group_member(d);
    ck_assert_ok(hali_hal_semaphore_signal(x, 1));
    hali_hal_semaphore_release(x);
  }
  int64_t took = now_ns() - t0;
  ck_assert_uint_eq(hali_hal_fence_point_count(p), N);
  ck_assert_uint_le(hali_hal_fence_point_count(d), 16);
  ck_assert_int_lt(took, 2000 * MS * slow_factor());
  ck_assert_ok(hali_hal_fence_query(p, &ready));
  ck_assert(!ready);
  ck_assert_ok(hali_hal_fence_query(d, &ready));
  ck_assert(ready);
  hali_hal_fence_release(p);
  hali_hal_fence_release(d);
  for (int i = 13; i < 15; ++i) hali_hal_semaphore_release(sem[i]);
  hali_hal_semaphore_release(last);
  hali_hal_fence_release(g);
}
END_TEST

/* The same in a program: @main keeps the first member's fence in %keep
 * while 1,000 more join the group and end (the group drops those), then
 * fails the kept member, which signalled long ago: awaiting the group
 * fails with it, so the kept member's point was not dropped. */
static const char group_kept_member_fails_late[] =
    "func @nothing() {\n  return\n}\n"
    "func @main(%n: i64) -> i32 {\n"
    "^entry:\n"
    "  %forever = const.i64 -1\n"
    "  %one = const.i64 1\n"
    "  %g = hal.fence.null\n"
    "  %keep = fiber.spawn @nothing()\n"
    "  %g = hal.fence.join %g, %keep\n"
    "  %s0 = hal.fence.await %keep, %forever\n"
    "  %k = const.i64 0\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = fiber.spawn @nothing()\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^fail\n"
    "^fail:\n"
    "  %s1 = hal.fence.await %f, %forever\n"
    "  %code = const.i32 15\n"
    "  hal.fence.fail %keep, %code\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(group_keeps_member_failed_after_signal) {
  for (uint32_t threads = 1; threads <= 2; ++threads) {
    env_t e = env_open_threads(group_kept_member_fails_late, threads);
    hali_value_t arg = hali_value_i64(1000);
    hali_vm_fiber_t *f = start(&e, "main", &arg, 1);
    run_until(&e, f);
    char *t = failure_text(f, HALI_STATUS_DATA_LOSS);
    assert_contains(t, "awaited fence");
    free(t);
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* fiber.join: the spawned function's results, or its failure. */

static const char join_results[] =
    "func @pair(%x: i64, %y: f64) -> (i64, f64, !hal.fence) {\n"
    "  %device = hal.device.get\n"
    "  %forever = const.i64 -1\n"
    "  %go = hal.fence.create %device\n"
    "  hal.fence.signal %go\n"
    "  %s = hal.fence.await %go, %forever\n" /* suspends? no: ready */
    "  %two = const.i64 2\n"
    "  %x2 = mul.i64 %x, %two\n"
    "  %half = const.f64 0.5\n"
    "  %yh = mul.f64 %y, %half\n"
    "  return %x2, %yh, %go\n"
    "}\n"
    "func @sum_to(%n: i64) -> i64 {\n"
    "^entry:\n"
    "  %one = const.i64 1\n"
    "  %acc = const.i64 0\n"
    "  %i = const.i64 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %acc = add.i64 %acc, %i\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = le.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return %acc\n"
    "}\n"
    "func @divide(%a: i32, %b: i32) -> i32 {\n"
    "  %q = div.s.i32 %a, %b\n"
    "  return %q\n"
    "}\n"
    "func @main(%n: i64) -> (i64, f64, i64, i32) {\n"
    "^entry:\n"
    "  %seven = const.i64 7\n"
    "  %y = const.f64 3.0\n"
    "  %p = fiber.spawn @pair(%seven, %y)\n"
    "  %s = fiber.spawn @sum_to(%n)\n"
    "  %a = const.i32 84\n"
    "  %b = const.i32 2\n"
    "  %d = fiber.spawn @divide(%a, %b)\n"
    /* Joined twice: a fence hands its results to every joiner. */
    "  %t = fiber.join @sum_to(%s)\n"
    "  %x2, %yh, %g = fiber.join @pair(%p)\n"
    "  %t2 = fiber.join @sum_to(%s)\n"
    "  %sum = add.i64 %t, %t2\n"
    "  %q = fiber.join @divide(%d)\n"
    "  %forever = const.i64 -1\n"
    "  %ok = hal.fence.await %g, %forever\n"
    "  return %x2, %yh, %sum, %q\n"
    "}\n";

START_TEST(join_gives_results) {
  env_t e = env_open(join_results);
  hali_value_t args[] = {hali_value_i64(1000)};
  hali_vm_fiber_t *f = start(&e, "main", args, 1);
  run_until(&e, f);
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  size_t n = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &n);
  ck_assert_uint_eq(n, 4);
  ck_assert_int_eq(r[0].i64, 14);
  ck_assert(r[1].f64 == 1.5);
  int64_t want = 0;
  for (int64_t i = 1; i <= 1000; ++i) want += i;
  ck_assert_int_eq(r[2].i64, 2 * want);
  ck_assert_int_eq(r[3].i32, 42);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* A join of a fiber that failed fails with its status (and backtrace),
 * annotated with the awaited fence and the joiner's backtrace. */
static const char join_failed[] =
    "func @divide(%a: i32, %b: i32) -> i32 {\n"
    "  %q = div.s.i32 %a, %b\n"
    "  return %q\n"
    "}\n"
    "func @main() -> i32 {\n"
    "  %a = const.i32 84\n"
    "  %b = const.i32 0\n"
    "  %d = fiber.spawn @divide(%a, %b)\n"
    "  %q = fiber.join @divide(%d)\n"
    "  return %q\n"
    "}\n";

START_TEST(join_of_failed_fiber) {
  env_t e = env_open(join_failed);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  char *t = failure_text(f, HALI_STATUS_OUT_OF_RANGE);
  assert_contains(t, "division by zero");
  assert_contains(t, "at @divide@0");
  assert_contains(t, "awaited fence #");
  assert_contains(t, "at @main@3");
  free(t);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* The fence must be a spawn of the named function: a created fence, a
 * group, or another function's fiber fails the join with a clear error. */
static const char join_wrong[] =
    "func @one() -> i64 {\n"
    "  %x = const.i64 1\n"
    "  return %x\n"
    "}\n"
    "func @other() -> i64 {\n"
    "  %x = const.i64 2\n"
    "  return %x\n"
    "}\n"
    "func @plain() -> i64 {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  hal.fence.signal %f\n"
    "  %x = fiber.join @one(%f)\n"
    "  return %x\n"
    "}\n"
    "func @group() -> i64 {\n"
    "  %f = fiber.spawn @one()\n"
    "  %g = hal.fence.join %f, %f\n"
    "  %x = fiber.join @one(%g)\n"
    "  return %x\n"
    "}\n"
    "func @mismatch() -> i64 {\n"
    "  %f = fiber.spawn @other()\n"
    "  %x = fiber.join @one(%f)\n"
    "  return %x\n"
    "}\n";

START_TEST(join_wrong_fence_fails_clearly) {
  static const struct {
    const char *fn, *text;
    hali_status_code_t code;
  } cases[] = {
      {"plain", "fiber.join @one: fence #", HALI_STATUS_FAILED_PRECONDITION},
      {"group", "carries no results", HALI_STATUS_FAILED_PRECONDITION},
      {"mismatch", "is the fence of a spawned @other, not of @one",
       HALI_STATUS_INVALID_ARGUMENT},
  };
  for (size_t i = 0; i < COUNT_OF(cases); ++i) {
    env_t e = env_open(join_wrong);
    hali_vm_fiber_t *f = start(&e, cases[i].fn, NULL, 0);
    run_until(&e, f);
    char *t = failure_text(f, cases[i].code);
    assert_contains(t, cases[i].text);
    assert_contains(t, "at @");
    free(t);
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

START_TEST(join_rejected_at_load) {
  /* Wrong arity and wrong result count are assembly errors. */
  static const struct {
    const char *text, *error;
  } cases[] = {
      {"func @one() -> i64 {\n  %x = const.i64 1\n  return %x\n}\n"
       "func @main() -> i64 {\n  %f = fiber.spawn @one()\n"
       "  %x = fiber.join @one(%f, %f)\n  return %x\n}\n",
       "fiber.join @one takes one !hal.fence"},
      {"func @one() -> i64 {\n  %x = const.i64 1\n  return %x\n}\n"
       "func @main() -> i64 {\n  %f = fiber.spawn @one()\n"
       "  %x, %y = fiber.join @one(%f)\n  return %x\n}\n",
       "@one returns 1 value(s), 2 assigned"},
      {"func @one() -> i64 {\n  %x = const.i64 1\n  return %x\n}\n"
       "func @main() -> i32 {\n  %f = fiber.spawn @one()\n"
       "  %x = fiber.join @one(%f)\n  %y = add.i32 %x, %x\n  return %y\n}\n",
       "register is i64 but this operand must be i32"},
  };
  for (size_t i = 0; i < COUNT_OF(cases); ++i) {
    hali_vm_module_t *m = NULL;
    ck_assert_status(hali_test_try_module(cases[i].text, &m),
                     HALI_STATUS_INVALID_ARGUMENT, cases[i].error);
    ck_assert(m == NULL);
  }
}
END_TEST


/* ------------------------------------------------------------------------ */
/* Fiber threads (options.threads > 1): ready fibers run on the thread
 * inside run() and on the scheduler's workers. */

static env_t env_open_threads(const char *text, uint32_t threads) {
  env_t e = {.m = hali_test_module(text),
             .dev = device(HALI_HAL_DEVICE_LOCAL_SYNC, 0)};
  hali_vm_scheduler_options_t o = {0};
  o.threads = threads;
  ck_assert_ok(hali_vm_scheduler_create(e.dev, &o, &e.s));
  return e;
}

/* group_fan_out with children that each spin 2000 iterations first
 * (~10 us): waiting on the spawner's queue behind each other past the
 * steal grace, they run on every thread. */
static char *fan_out_spinning(void) {
  static const char child[] =
      "func @child(%buf: !hal.buffer, %k: i64) {\n"
      "^entry:\n"
      "  %eight = const.i64 8\n"
      "  %at = mul.i64 %k, %eight\n"
      "  %one = const.i64 1\n"
      "  %i = const.i64 0\n"
      "  %spin = const.i64 2000\n"
      "  br ^loop\n"
      "^loop:\n"
      "  %i = add.i64 %i, %one\n"
      "  %more = lt.s.i64 %i, %spin\n"
      "  cond_br %more, ^loop, ^done\n"
      "^done:\n"
      "  %v = add.i64 %k, %one\n"
      "  hal.buffer.store.i64 %buf, %at, %v\n"
      "  return\n"
      "}\n";
  const char *main_fn = strstr(group_fan_out, "func @main");
  ck_assert_ptr_nonnull(main_fn);
  size_t a = strlen(child), b = strlen(main_fn);
  char *text = malloc(a + b + 1);
  ck_assert_ptr_nonnull(text);
  memcpy(text, child, a);
  memcpy(text + a, main_fn, b + 1);
  return text;
}

START_TEST(threads_fan_out_known_sum) {
  const int64_t n = 5000;
  char *text = fan_out_spinning();
  env_t e = env_open_threads(text, 4);
  free(text);
  hali_value_t args[] = {hali_value_i64(n), hali_value_i64(1000)};
  hali_vm_fiber_t *f = start(&e, "main", args, 2);
  run_until(&e, f);
  int64_t want = 0;
  for (int64_t k = 0; k < n; ++k) want += k + 1;
  ck_assert_int_eq(result_i64(f), want);
  size_t count = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &count);
  assert_group_points((hali_hal_fence_t *)r[1].ref, n);
  uint64_t on_workers = hali_vm_scheduler_worker_runs(e.s);
  printf("threads: %" PRIu64 " of %" PRId64 " fibers resumed on workers\n",
         on_workers, n);
  ck_assert_uint_ge(on_workers, (uint64_t)n / 10); /* a real share */
  ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0); /* all finished */
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* Back-pressure: @main spawns n children in a loop that never awaits;
 * each child counts itself in buf[0].  After each spawn @main computes
 * how many of its children have not run yet and returns the most.  On one
 * thread (no preemption in so short a loop) the children run only when
 * @main yields, which its backlog makes it do every
 * HALI_VM_SPAWN_BACKLOG spawns. */
static const char spawn_backlog[] =
    "func @count(%buf: !hal.buffer) {\n"
    "  %zero = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %x = hal.buffer.load.i64 %buf, %zero\n"
    "  %y = add.i64 %x, %one\n"
    "  hal.buffer.store.i64 %buf, %zero, %y\n"
    "  return\n"
    "}\n"
    "func @main(%n: i64) -> (i64, i64) {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %eight = const.i64 8\n"
    "  %zero = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %buf = hal.allocator.allocate %allocator, %memory, %usage, %eight\n"
    "  hal.buffer.store.i64 %buf, %zero, %zero\n"
    "  %g = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  %most = const.i64 0\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = fiber.spawn @count(%buf)\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %ran = hal.buffer.load.i64 %buf, %zero\n"
    "  %waiting = sub.i64 %k, %ran\n"
    "  %most = max.s.i64 %most, %waiting\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^await\n"
    "^await:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  %all = hal.buffer.load.i64 %buf, %zero\n"
    "  return %most, %all\n"
    "}\n";

START_TEST(spawn_backlog_bounds_waiting_children) {
  env_t e = env_open_threads(spawn_backlog, 1);
  const int64_t n = 5000;
  hali_value_t arg = hali_value_i64(n);
  hali_vm_fiber_t *f = start(&e, "main", &arg, 1);
  run_until(&e, f);
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  size_t count = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &count);
  uint64_t yields = hali_vm_scheduler_spawn_yields(e.s);
  uint64_t preempted = hali_vm_scheduler_preemptions(e.s);
  printf("spawn backlog: at most %" PRId64 " children waiting, %" PRIu64
         " yields, %" PRIu64 " preemptions\n",
         r[0].i64, yields, preempted);
  ck_assert_int_eq(r[1].i64, n); /* every child ran */
  /* A yield every HALI_VM_SPAWN_BACKLOG spawns (a preemption, on a slow
   * machine, may run the children first and save one). */
  ck_assert_int_le(r[0].i64, HALI_VM_SPAWN_BACKLOG);
  ck_assert_uint_ge(yields + preempted, n / HALI_VM_SPAWN_BACKLOG - 1);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* An idle fiber thread costs nothing: children spawned first wake a
 * worker (it steals some of them, usually), then @main computes for
 * ~100 ms without
 * awaiting or spawning.  The worker must sleep meanwhile: the process's
 * CPU time stays near one core's worth of the wall time (a worker that
 * spun would double it).  Load only lowers the ratio. */
static const char busy_after_children[] =
    "func @nothing() {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %n = const.i64 20000\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %n\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    "func @main(%iters: i64) -> i64 {\n"
    "^entry:\n"
    "  %g = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %eight = const.i64 8\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = fiber.spawn @nothing()\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %eight\n"
    "  cond_br %more, ^spawn, ^wait\n"
    "^wait:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  %i = const.i64 0\n"
    "  %acc = const.i64 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %acc = mul.i64 %acc, %eight\n"
    "  %acc = add.i64 %acc, %i\n"
    "  %i = add.i64 %i, %one\n"
    "  %again = lt.s.i64 %i, %iters\n"
    "  cond_br %again, ^loop, ^done\n"
    "^done:\n"
    "  return %acc\n"
    "}\n";

static int64_t cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

START_TEST(idle_fiber_thread_costs_nothing) {
  env_t e = env_open_threads(busy_after_children, 2);
  /* Calibrate: ~100 ms of the loop on this machine. */
  int64_t iters = 200000;
  for (;;) {
    hali_value_t arg = hali_value_i64(iters);
    int64_t w0 = now_ns(), c0 = cpu_now_ns();
    hali_vm_fiber_t *f = start(&e, "main", &arg, 1);
    run_until(&e, f);
    int64_t wall = now_ns() - w0, cpu = cpu_now_ns() - c0;
    ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
    hali_vm_fiber_release(f);
    if (wall < 100 * MS && iters < (INT64_C(1) << 40)) {
      iters *= 2;
      continue;
    }
    printf("idle fiber thread: %.1f ms CPU over %.1f ms wall (%" PRId64
           " iterations), %" PRIu64 " resumes on the worker\n",
           (double)cpu / 1e6, (double)wall / 1e6, iters,
           hali_vm_scheduler_worker_runs(e.s));
    ck_assert_uint_eq(hali_vm_scheduler_threads(e.s), 2);
    /* One core's worth, plus the watchdog's ticks and start-up. */
    ck_assert_int_lt(cpu, wall + wall / 4 + 10 * MS);
    break;
  }
  env_close(&e);
}
END_TEST

/* A spawned fiber's fence (a block of the scheduler's pool) outlives the
 * scheduler: the host keeps it past hali_vm_scheduler_free and it still
 * reads as signalled (valgrind: the pool goes with the last block). */
static const char spawn_returns_fence[] =
    "func @nothing() {\n  return\n}\n"
    "func @main() -> !hal.fence {\n"
    "  %f = fiber.spawn @nothing()\n"
    "  %g = fiber.spawn @nothing()\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %g\n"
    "}\n";

START_TEST(spawn_fence_outlives_scheduler) {
  env_t e = env_open_threads(spawn_returns_fence, 2);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  size_t count = 0;
  const hali_value_t *r = hali_vm_fiber_results(f, &count);
  ck_assert_uint_eq(count, 1);
  hali_hal_fence_t *g = (hali_hal_fence_t *)r[0].ref;
  hali_hal_fence_retain(g);
  hali_vm_fiber_release(f);
  env_close(&e); /* @main's second child may not have run: cancelled */
  bool ready = false;
  hali_status_t q = hali_hal_fence_query(g, &ready);
  ck_assert(ready);
  if (q) ck_assert_int_eq(hali_status_code(q), HALI_STATUS_CANCELLED);
  hali_status_free(q);
  hali_hal_fence_release(g);
}
END_TEST

/* Spawn-heavy: a binary tree of fibers, each spawning two children and
 * joining their results (fiber.join), on 4 threads: node count known. */
static const char spawn_tree[] =
    "func @tree(%depth: i64) -> i64 {\n"
    "^entry:\n"
    "  %one = const.i64 1\n"
    "  %zero = const.i64 0\n"
    "  %leaf = le.s.i64 %depth, %zero\n"
    "  cond_br %leaf, ^leaf, ^inner\n"
    "^leaf:\n"
    "  return %one\n"
    "^inner:\n"
    "  %d = sub.i64 %depth, %one\n"
    "  %a = fiber.spawn @tree(%d)\n"
    "  %b = fiber.spawn @tree(%d)\n"
    "  %x = fiber.join @tree(%a)\n"
    "  %y = fiber.join @tree(%b)\n"
    "  %s = add.i64 %x, %y\n"
    "  %t = add.i64 %s, %one\n"
    "  return %t\n"
    "}\n";

START_TEST(threads_spawn_tree) {
  for (uint32_t threads = 1; threads <= 4; threads += 3) {
    env_t e = env_open_threads(spawn_tree, threads);
    hali_value_t args[] = {hali_value_i64(11)};
    hali_vm_fiber_t *f = start(&e, "tree", args, 1);
    run_until(&e, f);
    ck_assert_int_eq(result_i64(f), (1 << 12) - 1);
    /* (Whether workers got any of it depends on the machine's load: the
     * thread inside run() may finish the tree first.) */
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

static const char stuck_many[] =
    "func @stuck(%f: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return\n"
    "}\n"
    "func @main(%n: i64) {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %k = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %g = hal.fence.null\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = hal.fence.create %device\n"
    "  %c = fiber.spawn @stuck(%f)\n"
    "  %g = hal.fence.join %g, %c\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^await\n"
    "^await:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  return\n"
    "}\n";

START_TEST(threads_deadlock_names_every_fiber) {
  env_t e = env_open_threads(stuck_many, 3);
  hali_value_t args[] = {hali_value_i64(6)};
  hali_vm_fiber_t *f = start(&e, "main", args, 1);
  hali_status_t st = hali_vm_scheduler_run(e.s, f);
  ck_assert_int_eq(hali_status_code(st), HALI_STATUS_FAILED_PRECONDITION);
  char *t = hali_status_to_string(st);
  assert_contains(t, "deadlock: all 7 fiber(s) are suspended");
  int lines = 0;
  for (const char *p = t; (p = strstr(p, "\n  fiber ")); ++p) lines++;
  ck_assert_int_eq(lines, 7);
  assert_contains(t, "(@main) awaits fence #");
  free(t);
  hali_status_free(st);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

static const char spin_forever[] =
    "func @spin() {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %i = add.i64 %i, %one\n"
    "  br ^loop\n"
    "}\n";

typedef struct {
  hali_vm_fiber_t *f[2];
  int64_t cancelled_at[2];
  hali_vm_scheduler_t *s;
} spin_cancel_t;

static void *cancel_spinners(void *arg) {
  spin_cancel_t *c = arg;
  /* Until a worker has taken one of them (a thread just started may wait
   * tens of ms for a core when the machine is loaded): then one of the
   * two cancels is of a fiber running on another thread. */
  for (int64_t t0 = now_ns();
       !hali_vm_scheduler_worker_runs(c->s) && now_ns() - t0 < 20000 * MS;)
    sleep_ms(1);
  for (int i = 0; i < 2; ++i) {
    sleep_ms(30);
    c->cancelled_at[i] = now_ns();
    hali_vm_fiber_cancel(c->f[i]);
  }
  return NULL;
}

START_TEST(threads_cancel_running_elsewhere) {
  /* Two fibers that never await, on two threads: both run at once (one
   * on the worker), and each stops when another thread cancels it. */
  env_t e = env_open_threads(spin_forever, 2);
  spin_cancel_t c = {{start(&e, "spin", NULL, 0), start(&e, "spin", NULL, 0)},
                     {0, 0},
                     e.s};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, cancel_spinners, &c), 0);
  ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
  int64_t done = now_ns();
  pthread_join(th, NULL);
  for (int i = 0; i < 2; ++i) {
    ck_assert(hali_vm_fiber_done(c.f[i]));
    char *t = failure_text(c.f[i], HALI_STATUS_CANCELLED);
    free(t);
  }
  printf("threads: run returned %.2f ms after the second cancel\n",
         (double)(done - c.cancelled_at[1]) / 1e6);
  /* A hang bound, not a latency bound: on two loaded cores the canceller
   * and the run's return are themselves scheduled late (the latency is
   * printed; cancellation in iterations is cancel_running_loop_from_thread). */
  ck_assert_int_lt(done - c.cancelled_at[1], 500 * MS * slow_factor());
  /* Both ran on their own thread: no preemption was needed. */
  ck_assert_uint_gt(hali_vm_scheduler_worker_runs(e.s), 0);
  for (int i = 0; i < 2; ++i) hali_vm_fiber_release(c.f[i]);
  env_close(&e);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Per-thread run queues and stealing (the default: one fiber thread per
 * core). */

static uint32_t cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > (long)HALI_VM_MAX_FIBER_THREADS ? HALI_VM_MAX_FIBER_THREADS
                                             : (uint32_t)n;
}

/* Starts the workers and lets them go idle: a first run of a trivial
 * fiber, so that what follows finds every thread asleep and waiting. */
static void warm_up(env_t *e, hali_vm_module_t *m) {
  hali_vm_fiber_t *f = NULL;
  ck_assert_ok(hali_vm_scheduler_start(e->s, m, lookup(m, "nothing"), NULL,
                                       0, &f));
  run_until(e, f);
  hali_vm_fiber_release(f);
}

/* ---- What a warm spawn allocates.
 *
 * Every library allocation goes through the host allocator when one is set
 * (base/alloc.h): counting its calls counts them all.  A spawn and await
 * of a fiber, once the scheduler is warm, takes the fiber record, its
 * register stack, the await's wake-up registration and the child's
 * completion fence with its semaphore (one block, which outlives the fiber
 * in the program's registers and groups and goes back to the scheduler's
 * pool when both are gone) from pools (doc/fibers.md, "Pools"). */
static long g_alloc_calls;
static void *counting_alloc(void *user, void *ptr, size_t size) {
  (void)user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  __atomic_add_fetch(&g_alloc_calls, 1, __ATOMIC_RELAXED);
  return realloc(ptr, size);
}

static const char spawn_await_each[] =
    "func @child() {\n  return\n}\n"
    "func @main(%n: i64) {\n"
    "^entry:\n"
    "  %k = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %forever = const.i64 -1\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = fiber.spawn @child()\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n";

static long allocations_of_run(env_t *e, int64_t n) {
  hali_value_t arg = hali_value_i64(n);
  long before = __atomic_load_n(&g_alloc_calls, __ATOMIC_RELAXED);
  hali_vm_fiber_t *f = start(e, "main", &arg, 1);
  run_until(e, f);
  ck_assert_ok(hali_status_clone(hali_vm_fiber_status(f)));
  hali_vm_fiber_release(f);
  return __atomic_load_n(&g_alloc_calls, __ATOMIC_RELAXED) - before;
}

/* Installs the counting allocator; false (and says so) when it cannot
 * be: the allocator may only change while nothing of the library is
 * live, true in a forked test, while with CK_FORK=no (the valgrind run)
 * earlier tests of the process may still hold blocks. */
static bool counting_allocator_installed(void) {
  const char *fork_mode = getenv("CK_FORK");
  if (fork_mode && strcmp(fork_mode, "no") == 0 &&
      hali_host_allocations_live() != 0) {
    printf("allocations: not counted (CK_FORK=no, %zu blocks live)\n",
           hali_host_allocations_live());
    return false;
  }
  ck_assert_uint_eq(hali_host_allocations_live(), 0);
  ck_assert_ok(hali_set_host_allocator(counting_alloc, NULL));
  return true;
}

START_TEST(warm_spawn_allocates_nothing) {
  if (!counting_allocator_installed()) return;
  env_t e = env_open_threads(spawn_await_each, 1);
  const int64_t n = 100;
  long cold = allocations_of_run(&e, n);
  long warm = allocations_of_run(&e, n);
  printf("allocations: %ld for %lld cold spawns, %ld warm\n", cold,
         (long long)n, warm);
  /* Not even the completion fence and its semaphore: one block from the
   * scheduler's pool, back in it once both are gone. */
  ck_assert_int_eq(warm, 0);
  ck_assert_int_gt(cold, warm);
  env_close(&e);
  ck_assert_uint_eq(hali_host_allocations_live(), 0);
  ck_assert_ok(hali_set_host_allocator(NULL, NULL));
}
END_TEST

/* hal.fence.offset's fences come from the scheduler's fence pool: a warm
 * ping-pong allocates the same for 10 round trips as for 300 (before,
 * two fences per round trip, each a malloc and a free), and the pooled
 * fences outlive the scheduler like spawn fences (the fiber keeps its
 * last offset fence in a register until it ends; here the host keeps
 * one made by hali_hal_fence_create_offset_pooled past the pool's close). */
START_TEST(warm_offset_fences_allocate_nothing) {
  if (!counting_allocator_installed()) return;
  env_t e = env_open_threads(ping_pong, 1);
  (void)allocations_of_run(&e, 300); /* warms the pools */
  long few = allocations_of_run(&e, 10);
  long many = allocations_of_run(&e, 300);
  printf("allocations: %ld for a warm ping-pong of 10 round trips, %ld for "
         "300\n",
         few, many);
  ck_assert_int_eq(many, few);
  env_close(&e);
  ck_assert_uint_eq(hali_host_allocations_live(), 0);
  ck_assert_ok(hali_set_host_allocator(NULL, NULL));
}
END_TEST

START_TEST(offset_fence_from_pool) {
  hali_hal_fence_pool_t *pool = NULL;
  ck_assert_ok(hali_hal_fence_pool_create(4, &pool));
  hali_hal_fence_t *base = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&base));
  hali_hal_fence_t *f = NULL;
  size_t bad = 0, out = 0, kept = 0;
  uint64_t value = 0;
  ck_assert_ok(hali_hal_fence_create_offset_pooled(pool, base, 2, &f, &bad,
                                                   &value));
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(bad, SIZE_MAX);
  hali_hal_semaphore_t *sem = NULL;
  hali_hal_fence_point(f, 0, &sem, &value);
  ck_assert_uint_eq(value, 3); /* base's point 1, raised by 2 */
  hali_hal_fence_pool_counts(pool, &out, &kept);
  ck_assert_uint_eq(out, 1);
  hali_hal_fence_release(f); /* back to the pool */
  hali_hal_fence_pool_counts(pool, &out, &kept);
  ck_assert_uint_eq(out, 0);
  ck_assert_uint_eq(kept, 1);
  /* The kept block is reused, and an offset past 2^64-1 makes no fence
   * and gives the block back. */
  ck_assert_ok(hali_hal_fence_create_offset_pooled(pool, base, UINT64_MAX,
                                                   &f, &bad, &value));
  ck_assert_ptr_null(f);
  ck_assert_uint_eq(bad, 0);
  ck_assert_uint_eq(value, 1);
  hali_hal_fence_pool_counts(pool, &out, &kept);
  ck_assert_uint_eq(out, 0);
  ck_assert_uint_eq(kept, 1);
  ck_assert_ok(hali_hal_fence_create_offset_pooled(pool, base, 5, &f, &bad,
                                                   &value));
  hali_hal_fence_pool_close(pool); /* |f| keeps it alive */
  ck_assert_ok(hali_hal_fence_signal(f));
  bool ready = false;
  ck_assert_ok(hali_hal_fence_query(base, &ready)); /* base at 1 <= 6 */
  ck_assert(ready);
  hali_hal_fence_release(f); /* the last block: frees the pool */
  hali_hal_fence_release(base);
}
END_TEST

/* hal.fence.offset into a register holding the only reference to a
 * one-point fence on the same semaphore changes that fence in place
 * (hali_hal_fence_reuse_offset: a ping-pong's loop makes no fence per
 * round trip); a fence anyone else holds, of another semaphore, of two
 * points, or a value past 2^64-1, is left alone. */
START_TEST(offset_fence_reused_in_place) {
  hali_hal_fence_t *base = NULL, *other = NULL, *f = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&base)); /* (S, 1) */
  ck_assert_ok(hali_hal_fence_create_pending(&other)); /* (T, 1) */
  size_t bad = 0;
  uint64_t value = 0;
  ck_assert_ok(hali_hal_fence_create_offset(base, 2, &f, &bad, &value));
  hali_hal_semaphore_t *sem = NULL, *s_base = NULL;
  hali_hal_fence_point(base, 0, &s_base, &value);
  uint32_t id = ((hali_ref_t *)f)->id;
  ck_assert(hali_hal_fence_reuse_offset(f, base, 5, NULL));
  hali_hal_fence_point(f, 0, &sem, &value);
  ck_assert_ptr_eq(sem, s_base);
  ck_assert_uint_eq(value, 6);
  ck_assert_uint_ne(((hali_ref_t *)f)->id, id); /* a new fence to traces */
  ck_assert(hali_hal_fence_reuse_offset(f, f, 1, NULL)); /* from itself */
  hali_hal_fence_point(f, 0, &sem, &value);
  ck_assert_uint_eq(value, 7);
  hali_hal_fence_retain(f); /* shared: untouched */
  ck_assert(!hali_hal_fence_reuse_offset(f, base, 1, NULL));
  hali_hal_fence_release(f);
  ck_assert(!hali_hal_fence_reuse_offset(f, other, 1, NULL));
  ck_assert(!hali_hal_fence_reuse_offset(f, base, UINT64_MAX, NULL));
  hali_hal_fence_t *both = NULL;
  hali_hal_fence_t *pair[] = {base, other};
  ck_assert_ok(hali_hal_fence_join(pair, 2, &both));
  ck_assert(!hali_hal_fence_reuse_offset(f, both, 1, NULL));
  ck_assert(!hali_hal_fence_reuse_offset(NULL, base, 1, NULL));
  ck_assert(!hali_hal_fence_reuse_offset(f, NULL, 1, NULL));
  hali_hal_fence_point(f, 0, &sem, &value);
  ck_assert_ptr_eq(sem, s_base);
  ck_assert_uint_eq(value, 7);
  hali_hal_fence_release(both);
  hali_hal_fence_release(f);
  hali_hal_fence_release(other);
  hali_hal_fence_release(base);
}
END_TEST

/* The same through a program: an offset into a register whose fence a
 * second register also holds makes a new fence (the kept one still means
 * its own point), and into one nobody else holds reuses it.  40 when
 * right; 0 if the kept fence had been raised by 2 in place. */
static const char offset_alias_src[] =
    "func @main() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %zero = const.i64 0\n"
    "  %two = const.i64 2\n"
    "  %m = hal.fence.offset %a, %zero\n"
    "  %keep = mov.ref %m\n"
    "  %m = hal.fence.offset %a, %two\n"
    "  hal.fence.signal %keep\n"
    "  %q1 = hal.fence.query %keep\n"
    "  %q2 = hal.fence.query %m\n"
    "  %m = hal.fence.offset %a, %zero\n"
    "  %q3 = hal.fence.query %m\n"
    "  %c100 = const.i32 100\n"
    "  %c10 = const.i32 10\n"
    "  %r1 = mul.i32 %q1, %c100\n"
    "  %r2 = mul.i32 %q2, %c10\n"
    "  %r = add.i32 %r1, %r2\n"
    "  %r = add.i32 %r, %q3\n"
    "  return %r\n"
    "}\n";

START_TEST(offset_into_a_shared_register_makes_a_new_fence) {
  env_t e = env_open(offset_alias_src);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  ck_assert_int_eq(result_i32(f), 40);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

START_TEST(threads_default_is_one_per_core) {
  ck_assert_uint_eq(hali_vm_default_fiber_threads(), cores());
  env_t e = env_open(ping_pong); /* no options: the default */
  ck_assert_uint_eq(hali_vm_scheduler_threads(e.s), cores());
  hali_value_t arg = hali_value_i64(2000);
  hali_vm_fiber_t *f = start(&e, "main", &arg, 1);
  run_until(&e, f);
  ck_assert_int_eq(result_i32(f), 0);
  hali_vm_fiber_release(f);
  env_close(&e);
  /* threads = 1 is still one thread. */
  e = env_open_threads(ping_pong, 1);
  ck_assert_uint_eq(hali_vm_scheduler_threads(e.s), 1);
  env_close(&e);
}
END_TEST

/* @main spawns @child and then spins (never awaits) until the child has
 * signalled: only another thread can run the child without preempting
 * @main, and it must do so at once (the spawn wakes an idle thread). */
static const char spawn_then_spin[] =
    "func @nothing() {\n  return\n}\n"
    "func @child(%f: !hal.fence) {\n"
    "  hal.fence.signal %f\n"
    "  return\n"
    "}\n"
    "func @main() -> i64 {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %c = fiber.spawn @child(%f)\n"
    "  %n = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %four = const.i32 4\n"
    "  br ^poll\n"
    "^poll:\n"
    "  %n = add.i64 %n, %one\n"
    "  %q = hal.fence.query %f\n"
    "  %pending = eq.i32 %q, %four\n"
    "  cond_br %pending, ^poll, ^out\n"
    "^out:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %c, %forever\n"
    "  return %n\n"
    "}\n";

START_TEST(threads_spawn_runs_on_an_idle_thread) {
  env_t e = env_open_threads(spawn_then_spin, 2);
  warm_up(&e, e.m);
  uint64_t before = hali_vm_scheduler_worker_runs(e.s);
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  printf("threads: @main polled %" PRId64 " times before the child ran\n",
         result_i64(f));
  ck_assert_int_ge(result_i64(f), 1);
  /* The child ran on the worker (stolen from @main's queue), not after a
   * preemption of @main. */
  ck_assert_uint_eq(hali_vm_scheduler_preemptions(e.s), 0);
  ck_assert_uint_gt(hali_vm_scheduler_worker_runs(e.s), before);
  ck_assert_uint_ge(hali_vm_scheduler_steals(e.s), 1);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* A chain of short fibers, each awaiting the one spawned before it, on
 * two fiber threads: the links wait on the spawner's thread for less
 * than the steal grace, so that thread runs them in order, each finding
 * its predecessor done (before the grace, the idle thread stole links as
 * they came and most of them suspended, and were woken, across threads:
 * 3-6x the time of one thread).  The fewest steals of three runs (a
 * loaded machine may deschedule the spawner's thread past the grace). */
static const char spawn_chain[] =
    "func @link(%prev: !hal.fence) {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %prev, %forever\n"
    "  return\n"
    "}\n"
    "func @main(%n: i64) -> i64 {\n"
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
    "  return %k\n"
    "}\n";

START_TEST(threads_chain_stays_on_one_thread) {
  const int64_t n = 2000;
  uint64_t fewest = UINT64_MAX;
  for (int run = 0; run < 3; ++run) {
    /* The grace is wall time: under a sanitizer or valgrind each link
     * takes many times longer, and so may the grace. */
    env_t e = {.m = hali_test_module(spawn_chain),
               .dev = device(HALI_HAL_DEVICE_LOCAL_SYNC, 0)};
    hali_vm_scheduler_options_t o = {0};
    o.threads = 2;
    o.steal_grace_ns =
        (uint64_t)HALI_VM_STEAL_GRACE_NS * (uint64_t)slow_factor();
    ck_assert_ok(hali_vm_scheduler_create(e.dev, &o, &e.s));
    hali_value_t arg = hali_value_i64(n);
    hali_vm_fiber_t *f = start(&e, "main", &arg, 1);
    run_until(&e, f);
    ck_assert_int_eq(result_i64(f), n);
    uint64_t steals = hali_vm_scheduler_steals(e.s);
    printf("threads: chain run %d: %" PRIu64 " steals, %" PRIu64
           " resumes on the worker\n",
           run, steals, hali_vm_scheduler_worker_runs(e.s));
    if (steals < fewest) fewest = steals;
    hali_vm_fiber_release(f);
    env_close(&e);
  }
  printf("threads: a chain of %" PRId64 " links on 2 threads: %" PRIu64
         " steals (fewest of 3 runs)\n",
         n, fewest);
  ck_assert_uint_le(fewest, (uint64_t)n / 20);
}
END_TEST

/* A grace of INT64_MAX ns is clamped (to INT64_MAX / 4): the time a fiber
 * may be taken, ready_at + grace, never overflows (UBSan, in CI's
 * sanitizer build, would report it), and a busy thread's fibers stay on
 * it. */
START_TEST(threads_steal_grace_clamped) {
  const int64_t n = 200;
  env_t e = {.m = hali_test_module(spawn_chain),
             .dev = device(HALI_HAL_DEVICE_LOCAL_SYNC, 0)};
  hali_vm_scheduler_options_t o = {0};
  o.threads = 2;
  o.steal_grace_ns = (uint64_t)INT64_MAX;
  ck_assert_ok(hali_vm_scheduler_create(e.dev, &o, &e.s));
  hali_value_t arg = hali_value_i64(n);
  hali_vm_fiber_t *f = start(&e, "main", &arg, 1);
  run_until(&e, f);
  ck_assert_int_eq(result_i64(f), n);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* The grace is waited out, and no longer: @main spawns a child and spins
 * until it has run.  The idle worker may take the child only once it has
 * waited the grace (30 ms here), so the run takes at least that, and the
 * child still runs by a steal, not after a preemption of @main (a
 * waiting thief keeps the watchdog from ending @main's slice). */
START_TEST(threads_steal_grace_is_waited) {
  const uint64_t grace = 30000000;
  env_t e = {.m = hali_test_module(spawn_then_spin),
             .dev = device(HALI_HAL_DEVICE_LOCAL_SYNC, 0)};
  hali_vm_scheduler_options_t o = {0};
  o.threads = 2;
  o.steal_grace_ns = grace;
  ck_assert_ok(hali_vm_scheduler_create(e.dev, &o, &e.s));
  int64_t t0 = now_ns();
  hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
  run_until(&e, f);
  int64_t took = now_ns() - t0;
  printf("threads: with a grace of 30 ms the child ran after %.1f ms\n",
         (double)took / 1e6);
  ck_assert_int_ge(result_i64(f), 1);
  ck_assert_int_ge(took, (int64_t)grace);
  ck_assert_uint_ge(hali_vm_scheduler_steals(e.s), 1);
  ck_assert_uint_eq(hali_vm_scheduler_preemptions(e.s), 0);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* Steal-heavy: @main spawns n children onto its own queue and then spins
 * until all have finished (polling their joined fence, never awaiting),
 * so every child is run by a thread that stole it (or, when every worker
 * is busy, after @main's slice ends); then it joins each child's result.
 * Each child sums k * j for j < 200. */
static const char steal_heavy[] =
    "func @nothing() {\n  return\n}\n"
    "func @child(%k: i64) -> i64 {\n"
    "^entry:\n"
    "  %j = const.i64 0\n"
    "  %sum = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %m = const.i64 200\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %x = mul.i64 %k, %j\n"
    "  %sum = add.i64 %sum, %x\n"
    "  %j = add.i64 %j, %one\n"
    "  %more = lt.s.i64 %j, %m\n"
    "  cond_br %more, ^loop, ^out\n"
    "^out:\n"
    "  return %sum\n"
    "}\n"
    "func @main(%n: i64) -> i64 {\n"
    "^entry:\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %eight = const.i64 8\n"
    "  %one = const.i64 1\n"
    "  %four = const.i32 4\n"
    "  %bytes = mul.i64 %n, %eight\n"
    "  %fences = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %g = hal.fence.null\n"
    "  %k = const.i64 0\n"
    "  br ^spawn\n"
    "^spawn:\n"
    "  %f = fiber.spawn @child(%k)\n"
    "  %g = hal.fence.join %g, %f\n"
    "  %k = add.i64 %k, %one\n"
    "  %more = lt.s.i64 %k, %n\n"
    "  cond_br %more, ^spawn, ^poll\n"
    "^poll:\n"
    "  %q = hal.fence.query %g\n"
    "  %pending = eq.i32 %q, %four\n"
    "  cond_br %pending, ^poll, ^done\n"
    "^done:\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %g, %forever\n"
    "  return %n\n"
    "}\n";

START_TEST(threads_steal_heavy) {
  const int64_t n = 3000;
  uint32_t threads = cores() > 4 ? cores() : 4;
  env_t e = env_open_threads(steal_heavy, threads);
  warm_up(&e, e.m);
  hali_value_t arg = hali_value_i64(n);
  hali_vm_fiber_t *f = start(&e, "main", &arg, 1);
  run_until(&e, f);
  ck_assert_int_eq(result_i64(f), n);
  uint64_t steals = hali_vm_scheduler_steals(e.s);
  printf("threads: %" PRIu64 " of %" PRId64 " children stolen, %" PRIu64
         " preemptions, %u threads\n",
         steals, n, hali_vm_scheduler_preemptions(e.s), threads);
  ck_assert_uint_ge(steals, 1);
  ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0);
  hali_vm_fiber_release(f);
  env_close(&e);
}
END_TEST

/* The results of stolen children: a tree of fiber.join on every thread
 * count, against the count of nodes; then the same children's sums. */
static const char steal_sums[] =
    "func @child(%k: i64) -> i64 {\n"
    "^entry:\n"
    "  %j = const.i64 0\n"
    "  %sum = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %m = const.i64 200\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %x = mul.i64 %k, %j\n"
    "  %sum = add.i64 %sum, %x\n"
    "  %j = add.i64 %j, %one\n"
    "  %more = lt.s.i64 %j, %m\n"
    "  cond_br %more, ^loop, ^out\n"
    "^out:\n"
    "  return %sum\n"
    "}\n"
    "func @range(%lo: i64, %hi: i64) -> i64 {\n"
    "^entry:\n"
    "  %one = const.i64 1\n"
    "  %two = const.i64 2\n"
    "  %w = sub.i64 %hi, %lo\n"
    "  %leaf = le.s.i64 %w, %one\n"
    "  cond_br %leaf, ^leaf, ^split\n"
    "^leaf:\n"
    "  %c = fiber.spawn @child(%lo)\n"
    "  %v = fiber.join @child(%c)\n"
    "  return %v\n"
    "^split:\n"
    "  %h = div.s.i64 %w, %two\n"
    "  %mid = add.i64 %lo, %h\n"
    "  %a = fiber.spawn @range(%lo, %mid)\n"
    "  %b = fiber.spawn @range(%mid, %hi)\n"
    "  %x = fiber.join @range(%a)\n"
    "  %y = fiber.join @range(%b)\n"
    "  %s = add.i64 %x, %y\n"
    "  return %s\n"
    "}\n";

START_TEST(threads_stolen_results_sum) {
  const int64_t n = 1500;
  int64_t want = 0; /* the same sums, a plain C loop */
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < 200; ++j) want += k * j;
  for (uint32_t threads = 1; threads <= 4; ++threads) {
    env_t e = env_open_threads(steal_sums, threads);
    hali_value_t args[] = {hali_value_i64(0), hali_value_i64(n)};
    hali_vm_fiber_t *f = start(&e, "range", args, 2);
    run_until(&e, f);
    ck_assert_int_eq(result_i64(f), want);
    ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0);
    if (threads == 1) ck_assert_uint_eq(hali_vm_scheduler_steals(e.s), 0);
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

START_TEST(threads_join_of_failed_fiber) {
  for (uint32_t threads = 2; threads <= 4; threads += 2) {
    env_t e = env_open_threads(join_failed, threads);
    hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
    run_until(&e, f);
    char *t = failure_text(f, HALI_STATUS_OUT_OF_RANGE);
    assert_contains(t, "division by zero");
    assert_contains(t, "at @divide@0");
    assert_contains(t, "awaited fence #");
    assert_contains(t, "at @main@3");
    free(t);
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

/* An invocation's deadline also stops the fibers it spawned that are still
 * running after the host-started fiber returned. */
static const char spawn_spinner_and_return[] =
    "func @spin() {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %i = add.i64 %i, %one\n"
    "  br ^loop\n"
    "}\n"
    "func @main() -> !hal.fence {\n"
    "  %c = fiber.spawn @spin()\n"
    "  return %c\n"
    "}\n";

START_TEST(deadline_reaches_fibers_after_the_host_fiber) {
  for (uint32_t threads = 1; threads <= 2; ++threads) {
    env_t e = {.m = hali_test_module(spawn_spinner_and_return),
               .dev = device(HALI_HAL_DEVICE_LOCAL_SYNC, 0)};
    hali_vm_scheduler_options_t o = {0};
    o.threads = threads;
    o.max_duration_ns = 40 * MS;
    ck_assert_ok(hali_vm_scheduler_create(e.dev, &o, &e.s));
    int64_t t0 = now_ns();
    hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
    run_until(&e, f);
    size_t count = 0;
    const hali_value_t *r = hali_vm_fiber_results(f, &count);
    ck_assert_uint_eq(count, 1);
    hali_hal_fence_t *child = (hali_hal_fence_t *)r[0].ref;
    /* The spinner outlives @main; running what is left ends it at the
     * invocation's deadline instead of spinning forever. */
    ck_assert_ok(hali_vm_scheduler_run(e.s, NULL));
    int64_t took = now_ns() - t0;
    ck_assert_uint_eq(hali_vm_scheduler_live(e.s), 0);
    bool ready = false;
    hali_status_t st = hali_hal_fence_query(child, &ready);
    ck_assert_int_eq(hali_status_code(st), HALI_STATUS_DEADLINE_EXCEEDED);
    char *t = hali_status_to_string(st);
    assert_contains(t, "exceeded its deadline");
    free(t);
    hali_status_free(st);
    ck_assert_int_ge(took, 40 * MS);
    ck_assert_int_lt(took, 2000 * MS * slow_factor()); /* a hang bound */
    hali_vm_fiber_release(f);
    env_close(&e);
  }
}
END_TEST

/* Queue work that waits on its own signal fence can never run: with
 * external signals allowed (the C API's asynchronous awaits) the run still
 * reports the deadlock, since the host never held that fence. */
static const char await_own_signal[] =
    "func @main() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %mode = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %mode, %mode\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  hal.device.queue.execute %device, %f, %f, [%cmd]\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %s\n"
    "}\n"
    /* The same behind a fence the host holds: not a deadlock. */
    "func @behind(%gate: !hal.fence) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %mode = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %mode, %mode\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  hal.device.queue.execute %device, %gate, %f, [%cmd]\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(deadlock_own_signal_fence_with_external_signals) {
  hali_hal_device_kind_t kinds[] = {HALI_HAL_DEVICE_LOCAL_SYNC,
                                    HALI_HAL_DEVICE_LOCAL_TASK};
  for (size_t i = 0; i < COUNT_OF(kinds); ++i)
    for (int external = 0; external <= 1; ++external) {
      env_t e = env_open_on(await_own_signal, device(kinds[i], 1));
      hali_vm_scheduler_allow_external_signals(e.s, external);
      hali_vm_fiber_t *f = start(&e, "main", NULL, 0);
      int64_t t0 = now_ns();
      hali_status_t st =
          hali_vm_scheduler_run_until(e.s, f, now_ns() + 5000 * MS);
      int64_t took = now_ns() - t0;
      char *t = hali_status_to_string(st);
      ck_assert_msg(hali_status_code(st) == HALI_STATUS_FAILED_PRECONDITION,
                    "device %zu, external %d: %s", i, external, t);
      assert_contains(t, "deadlock: all 1 fiber(s) are suspended");
      assert_contains(t, "fiber 1 (@main) awaits fence #");
      ck_assert_int_lt(took, 1000 * MS * slow_factor()); /* not the 5 s */
      free(t);
      hali_status_free(st);
      hali_vm_fiber_release(f);
      env_close(&e);
    }
}
END_TEST

START_TEST(queue_behind_host_fence_no_deadlock) {
  hali_hal_device_kind_t kinds[] = {HALI_HAL_DEVICE_LOCAL_SYNC,
                                    HALI_HAL_DEVICE_LOCAL_TASK};
  for (size_t i = 0; i < COUNT_OF(kinds); ++i) {
    env_t e = env_open_on(await_own_signal, device(kinds[i], 1));
    hali_vm_scheduler_allow_external_signals(e.s, true);
    hali_hal_fence_t *gate = NULL;
    ck_assert_ok(hali_hal_fence_create_pending(&gate));
    hali_value_t arg = fence_arg(gate);
    hali_vm_fiber_t *f = start(&e, "behind", &arg, 1);
    signaller_t sg = {gate, 20};
    pthread_t th;
    int64_t t0 = now_ns();
    ck_assert_int_eq(pthread_create(&th, NULL, signal_later, &sg), 0);
    run_until(&e, f);
    int64_t t1 = now_ns();
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(result_i32(f), 0);
    ck_assert_int_ge(t1 - t0, 20 * MS);
    hali_vm_fiber_release(f);
    hali_hal_fence_release(gate);
    env_close(&e);
  }
}
END_TEST

static Suite *suite_fiber(void) {
  Suite *s = suite_create("fiber");
  TCase *tc;

  tc = tcase_create("switching");
  tcase_add_test(tc, ping_pong_10000);
  tcase_add_test(tc, ten_thousand_suspended);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);

  tc = tcase_create("errors");
  tcase_add_test(tc, spawning_stops_at_the_fiber_cap);
  tcase_add_test(tc, spawned_fibers_share_the_fuel);
  tcase_add_test(tc, spawning_stops_at_the_invocation_cap);
  tcase_add_test(tc, spawning_stops_at_the_call_depth);
  tcase_add_test(tc, spawned_failure_reaches_awaiter);
  tcase_add_test(tc, first_failure_wins_fence_fail_twice);
  tcase_add_test(tc, first_failure_wins_joined_fibers);
  tcase_add_test(tc, first_failure_wins_independent);
  tcase_add_test(tc, joined_fence_fails_fast);
  tcase_add_test(tc, query_handles_failure);
  tcase_add_test(tc, await_status_handles_failure);
  tcase_add_test(tc, assert_in_spawned_fails_fence_only);
  suite_add_tcase(s, tc);

  tc = tcase_create("cancellation");
  tcase_add_test(tc, cancel_suspended);
  tcase_add_test(tc, cancel_reaches_awaiter);
  tcase_add_test(tc, cancel_running_loop_from_thread);
  tcase_add_test(tc, cancel_spinning_loop_latency);
  tcase_add_test(tc, cancel_ready);
  tcase_add_test(tc, cancel_while_switching_stress);
  /* A hang bound: the stress test makes 100 schedulers (each with its
   * fiber threads), which takes seconds on loaded cores. */
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);

  tc = tcase_create("deadlock");
  tcase_add_test(tc, deadlock_report);
  tcase_add_test(tc, external_signal_no_deadlock);
  suite_add_tcase(s, tc);

  tc = tcase_create("timeouts");
  tcase_add_test(tc, await_timeout_zero);
  tcase_add_test(tc, await_timeout_finite);
  tcase_add_test(tc, await_timeout_then_signal);
  tcase_add_test(tc, await_after_stale_timeout);
  tcase_add_test(tc, invoke_blocks);
  suite_add_tcase(s, tc);

  tc = tcase_create("fairness");
  tcase_add_test(tc, fairness_fifo_wakeups);
  tcase_add_test(tc, fairness_baton_alternates);
  suite_add_tcase(s, tc);

  tc = tcase_create("join");
  tcase_add_test(tc, join_gives_results);
  tcase_add_test(tc, join_of_failed_fiber);
  tcase_add_test(tc, join_wrong_fence_fails_clearly);
  tcase_add_test(tc, join_rejected_at_load);
  suite_add_tcase(s, tc);

  tc = tcase_create("threads");
  tcase_add_test(tc, threads_fan_out_known_sum);
  tcase_add_test(tc, threads_chain_stays_on_one_thread);
  tcase_add_test(tc, threads_steal_grace_is_waited);
  tcase_add_test(tc, threads_steal_grace_clamped);
  tcase_add_test(tc, threads_spawn_tree);
  tcase_add_test(tc, threads_deadlock_names_every_fiber);
  tcase_add_test(tc, threads_cancel_running_elsewhere);
  tcase_add_test(tc, threads_default_is_one_per_core);
  tcase_add_test(tc, warm_spawn_allocates_nothing);
  tcase_add_test(tc, spawn_backlog_bounds_waiting_children);
  tcase_add_test(tc, idle_fiber_thread_costs_nothing);
  tcase_add_test(tc, spawn_fence_outlives_scheduler);
  tcase_add_test(tc, threads_spawn_runs_on_an_idle_thread);
  tcase_add_test(tc, warm_offset_fences_allocate_nothing);
  tcase_add_test(tc, offset_fence_reused_in_place);
  tcase_add_test(tc, offset_into_a_shared_register_makes_a_new_fence);
  tcase_add_test(tc, offset_fence_from_pool);
  tcase_add_test(tc, threads_steal_heavy);
  tcase_add_test(tc, threads_stolen_results_sum);
  tcase_add_test(tc, threads_join_of_failed_fiber);
  tcase_add_test(tc, deadline_reaches_fibers_after_the_host_fiber);
  tcase_add_test(tc, deadlock_own_signal_fence_with_external_signals);
  tcase_add_test(tc, queue_behind_host_fence_no_deadlock);
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);

  tc = tcase_create("groups");
  tcase_add_test(tc, group_of_zero);
  tcase_add_test(tc, group_of_one);
  tcase_add_test(tc, group_of_100000);
  tcase_add_test(tc, join_every_fiber_idiom_10000);
  tcase_add_test(tc, group_fails_with_first_failure_in_time);
  tcase_add_test(tc, group_join_in_place_only_when_unshared);
  tcase_add_test(tc, group_compaction_keeps_what_can_still_matter);
  tcase_add_test(tc, group_keeps_member_failed_after_signal);
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);

  tc = tcase_create("devices");
  tcase_add_test(tc, same_results_on_every_device);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite_fiber()); }
