/* Calls that leave the running function: host imports, fiber.spawn, and
 * timelines through hal.fence.offset.  Compiled into check_ops (its
 * coverage case sees these ops). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "tests/hal_ops_suite.h"
#include "vm/fiber.h"
#include "vm/trace.h"

static const char k_imports[] =
    "func @env.add(%a: i32, %b: i32) -> i32 import\n"
    "func @env.maybe(%a: i32) -> i32 import optional\n"
    "func @env.view(%v: !hal.buffer_view) -> !hal.buffer_view import optional\n"
    "func @twice(%x: i32) -> i32 {\n"
    "  %y = call @env.add(%x, %x)\n"
    "  return %y\n"
    "}\n"
    "func @maybe(%x: i32) -> i32 {\n"
    "  %y = call @env.maybe(%x)\n"
    "  return %y\n"
    "}\n";

static int g_calls;

static hali_status_t host_add(void *user, const hali_value_t *args, size_t n,
                              hali_value_t *results, size_t nres) {
  ck_assert_ptr_eq(user, &g_calls);
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_eq(nres, 1);
  ck_assert_int_eq(args[0].type, HALI_TYPE_I32);
  ck_assert_int_eq(results[0].type, HALI_TYPE_I32);
  g_calls++;
  results[0].i32 = args[0].i32 + args[1].i32;
  return HALI_OK;
}

static hali_status_t host_fails(void *user, const hali_value_t *args, size_t n,
                                hali_value_t *results, size_t nres) {
  return hali_status_make(HALI_STATUS_UNAVAILABLE, "the host says no");
}

static hali_status_t call1(hali_vm_link_t *l, const char *fn, int32_t x,
                           int32_t *out) {
  hali_vm_stack_t *st = NULL;
  hali_status_t s = hali_vm_stack_create(0, &st);
  hali_value_t arg = hali_value_i32(x), res = {0};
  if (!s)
    s = hali_vm_link_invoke(st, l, hali_vm_module_lookup(l->module, fn), &arg,
                            1, &res, 1);
  hali_vm_stack_free(st);
  *out = res.i32;
  return s;
}

START_TEST(import_bound_and_called) {
  hali_vm_module_t *m = hali_test_module(k_imports);
  check_ops_note_module(m);
  hali_vm_link_t *l = NULL;
  ck_assert_ok(hali_vm_link_create(m, &l));
  ck_assert_status(hali_vm_link_check_imports(l), HALI_STATUS_NOT_FOUND,
                   "1 required import(s) not provided by the host: @env.add");
  ck_assert_status(hali_vm_link_bind_import(l, "twice", host_add, NULL),
                   HALI_STATUS_NOT_FOUND, "has no import @twice");
  ck_assert_ok(hali_vm_link_bind_import(l, "env.add", host_add, &g_calls));
  ck_assert_ok(hali_vm_link_check_imports(l));
  int32_t r = 0;
  g_calls = 0;
  ck_assert_ok(call1(l, "twice", 21, &r));
  ck_assert_int_eq(r, 42);
  ck_assert_int_eq(g_calls, 1);
  hali_vm_link_free(l);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(import_optional_unbound_and_failing) {
  hali_vm_module_t *m = hali_test_module(k_imports);
  hali_vm_link_t *l = NULL;
  ck_assert_ok(hali_vm_link_create(m, &l));
  ck_assert_ok(hali_vm_link_bind_import(l, "env.add", host_fails, NULL));
  int32_t r;
  ck_assert_status(call1(l, "maybe", 1, &r), HALI_STATUS_NOT_FOUND,
                   "import @env.maybe is not provided by the host");
  hali_status_t s = call1(l, "twice", 1, &r);
  ck_assert_status(s, HALI_STATUS_UNAVAILABLE, "in host import @env.add");
  s = call1(l, "twice", 1, &r);
  ck_assert_status(s, HALI_STATUS_UNAVAILABLE, "at @twice@0");
  hali_vm_link_free(l);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(import_round_trips_through_binary) {
  hali_ir_module_t *ir = NULL;
  ck_assert_ok(hali_asm_parse(k_imports, strlen(k_imports), "i.hasm", &ir));
  uint8_t *bytes;
  size_t size;
  ck_assert_ok(hali_hbc_write(ir, NULL, &bytes, &size));
  hali_ir_module_t *back = NULL;
  ck_assert_ok(hali_hbc_read(bytes, size, NULL, &back));
  ck_assert_uint_eq(back->funcs[0].flags, HALI_FUNC_IMPORT);
  ck_assert_uint_eq(back->funcs[1].flags,
                    HALI_FUNC_IMPORT | HALI_FUNC_OPTIONAL);
  ck_assert_uint_eq(back->funcs[3].flags, 0);
  char *text = hali_ir_print(back, false);
  ck_assert_ptr_nonnull(strstr(text, "func @env.maybe(%a: i32) -> (i32) "
                                     "import optional\n"));
  free(text);
  free(bytes);
  hali_ir_module_free(ir);
  hali_ir_module_free(back);
}
END_TEST

/* A spawned fiber computes into a buffer; the spawner awaits its fence. */
static const char k_spawn[] =
    "func @fill(%b: !hal.buffer, %v: i32) {\n"
    "  %zero = const.i64 0\n"
    "  hal.buffer.store.i32 %b, %zero, %v\n"
    "  return\n"
    "}\n"
    "func @bad(%b: !hal.buffer, %v: i32) {\n"
    "  %c = const.i32 9\n"
    "  fail %c, \"bad fiber\"\n"
    "}\n"
    "func @main(%v: i32) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %alloc = hal.device.allocator %device\n"
    "  %mem = const.i32 3\n"
    "  %use = const.i32 5\n"
    "  %four = const.i64 4\n"
    "  %b = hal.allocator.allocate %alloc, %mem, %use, %four\n"
    "  %f = fiber.spawn @fill(%b, %v)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  %zero = const.i64 0\n"
    "  %r = hal.buffer.load.i32 %b, %zero\n"
    "  return %r\n"
    "}\n"
    "func @main_bad(%v: i32) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %alloc = hal.device.allocator %device\n"
    "  %mem = const.i32 3\n"
    "  %use = const.i32 5\n"
    "  %four = const.i64 4\n"
    "  %b = hal.allocator.allocate %alloc, %mem, %use, %four\n"
    "  %f = fiber.spawn @bad(%b, %v)\n"
    "  %q = hal.fence.query %f\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %s\n"
    "}\n"
    /* Two timelines, ping-pong n times via hal.fence.offset. */
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
    "func @pingpong(%n: i64) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %b = hal.fence.create %device\n"
    "  %p = fiber.spawn @ping(%a, %b, %n)\n"
    "  %q = fiber.spawn @ping(%b, %a, %n)\n"
    "  %both = hal.fence.join %p, %q\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %both, %forever\n"
    "  return %s\n"
    "}\n"
    /* fiber.join: the spawned function's result comes back. */
    "func @triple(%v: i32) -> i32 {\n"
    "  %three = const.i32 3\n"
    "  %r = mul.i32 %v, %three\n"
    "  return %r\n"
    "}\n"
    "func @main_join(%v: i32) -> i32 {\n"
    "  %f = fiber.spawn @triple(%v)\n"
    "  %r = fiber.join @triple(%f)\n"
    "  return %r\n"
    "}\n"
    "func @backwards(%n: i64) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %minus = const.i64 -1\n"
    "  %b = hal.fence.offset %a, %minus\n"
    "  %zero = const.i32 0\n"
    "  return %zero\n"
    "}\n";

/* Runs @fn(arg) as a fiber on a fresh scheduler and device. */
/* On |threads| fiber threads (0: the default, one per core). */
static hali_status_t run_fiber_on(hali_vm_module_t *m, const char *fn,
                                  hali_value_t arg, hali_value_t *out,
                                  uint32_t threads) {
  hali_hal_device_t *dev = NULL;
  hali_vm_scheduler_t *s = NULL;
  hali_vm_fiber_t *f = NULL;
  hali_vm_scheduler_options_t o = {.threads = threads};
  hali_status_t st = hali_hal_device_create(NULL, &dev);
  if (!st) st = hali_vm_scheduler_create(dev, &o, &s);
  if (!st)
    st = hali_vm_scheduler_start(s, m, hali_vm_module_lookup(m, fn), &arg, 1,
                                 &f);
  if (!st) st = hali_vm_scheduler_run(s, f);
  if (!st && hali_vm_fiber_status(f))
    st = hali_status_clone(hali_vm_fiber_status(f));
  if (!st) {
    size_t n;
    *out = hali_vm_fiber_results(f, &n)[0];
  }
  hali_vm_scheduler_free(s);
  hali_hal_device_release(dev);
  return st;
}

static hali_status_t run_fiber(hali_vm_module_t *m, const char *fn,
                               hali_value_t arg, hali_value_t *out) {
  return run_fiber_on(m, fn, arg, out, 0);
}

START_TEST(spawn_runs_and_joins) {
  hali_vm_module_t *m = hali_test_module(k_spawn);
  check_ops_note_module(m);
  hali_value_t r = {0};
  ck_assert_ok(run_fiber(m, "main", hali_value_i32(1234), &r));
  ck_assert_int_eq(r.i32, 1234);
  ck_assert_ok(run_fiber(m, "pingpong", hali_value_i64(500), &r));
  ck_assert_int_eq(r.i32, 0);
  ck_assert_ok(run_fiber(m, "main_join", hali_value_i32(14), &r));
  ck_assert_int_eq(r.i32, 42);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(spawn_failure_reaches_the_awaiter) {
  hali_vm_module_t *m = hali_test_module(k_spawn);
  hali_value_t r = {0};
  hali_status_t s = run_fiber(m, "main_bad", hali_value_i32(1), &r);
  char *text = hali_status_to_string(s);
  ck_assert_int_eq(hali_status_code(s), 9);
  ck_assert_ptr_nonnull(strstr(text, "bad fiber"));
  ck_assert_ptr_nonnull(strstr(text, "at @bad@1"));
  ck_assert_ptr_nonnull(strstr(text, "awaited fence #"));
  ck_assert_ptr_nonnull(strstr(text, "at @main_bad@9"));
  free(text);
  hali_status_free(s);
  ck_assert_status(run_fiber(m, "backwards", hali_value_i64(0), &r),
                   HALI_STATUS_OUT_OF_RANGE, "fence offset -1 is negative");
  hali_vm_module_release(m);
}
END_TEST

/* attributes ["blocking"]: awaits in that function block the thread, so a
 * fiber spawned just before does not get to run during the wait; without
 * the attribute the await suspends and the spawned fiber runs.  The spawn,
 * the await and the load are in one function with no call or branch
 * between them: a call or a branch may yield to the spawned fiber once the
 * time slice is over (a loaded machine under ASan got there before the
 * wait began when the spawn was in the caller). */
START_TEST(blocking_functions_block) {
  static const char text[] =
      "func @child(%b: !hal.buffer) {\n"
      "  %z = const.i64 0\n"
      "  %one = const.i32 1\n"
      "  hal.buffer.store.i32 %b, %z, %one\n"
      "  return\n"
      "}\n"
      "func @wait_blocking(%b: !hal.buffer) -> i32 attributes [\"blocking\"] {\n"
      "  %device = hal.device.get\n"
      "  %a = hal.fence.create %device\n"
      "  %ms = const.i64 20\n"
      "  %z = const.i64 0\n"
      "  %f = fiber.spawn @child(%b)\n"
      "  %s = hal.fence.await %a, %ms\n"
      "  %v = hal.buffer.load.i32 %b, %z\n"
      "  return %v\n"
      "}\n"
      "func @wait_suspending(%b: !hal.buffer) -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %a = hal.fence.create %device\n"
      "  %ms = const.i64 20\n"
      "  %z = const.i64 0\n"
      "  %f = fiber.spawn @child(%b)\n"
      "  %s = hal.fence.await %a, %ms\n"
      "  %v = hal.buffer.load.i32 %b, %z\n"
      "  return %v\n"
      "}\n"
      "func @outer_blocking(%unused: i32) -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %alloc = hal.device.allocator %device\n"
      "  %mem = const.i32 3\n"
      "  %use = const.i32 5\n"
      "  %four = const.i64 4\n"
      "  %b = hal.allocator.allocate %alloc, %mem, %use, %four\n"
      "  %v = call @wait_blocking(%b)\n"
      "  return %v\n"
      "}\n"
      "func @outer_suspending(%unused: i32) -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %alloc = hal.device.allocator %device\n"
      "  %mem = const.i32 3\n"
      "  %use = const.i32 5\n"
      "  %four = const.i64 4\n"
      "  %b = hal.allocator.allocate %alloc, %mem, %use, %four\n"
      "  %v = call @wait_suspending(%b)\n"
      "  return %v\n"
      "}\n";
  hali_vm_module_t *m = hali_test_module(text);
  hali_value_t r = {0};
  /* On one fiber thread (with more, another thread runs the child). */
  ck_assert_ok(run_fiber_on(m, "outer_blocking", hali_value_i32(0), &r, 1));
  ck_assert_int_eq(r.i32, 0); /* the child had not run yet */
  ck_assert_ok(run_fiber(m, "outer_suspending", hali_value_i32(0), &r));
  ck_assert_int_eq(r.i32, 1); /* the child ran while @wait_suspending waited */
  hali_vm_module_release(m);
}
END_TEST

/* Fairness without awaits: @spin loops until @setter (spawned after it)
 * stores a flag; on one fiber thread only preemption lets @setter run. */
START_TEST(busy_fibers_are_preempted) {
  static const char text[] =
      "func @setter(%b: !hal.buffer) {\n"
      "  %z = const.i64 0\n"
      "  %one = const.i32 1\n"
      "  hal.buffer.store.i32 %b, %z, %one\n"
      "  return\n"
      "}\n"
      "func @spin(%b: !hal.buffer) {\n"
      "^entry:\n"
      "  %z = const.i64 0\n"
      "  %zero = const.i32 0\n"
      "  br ^loop\n"
      "^loop:\n"
      "  %v = hal.buffer.load.i32 %b, %z\n"
      "  %unset = eq.i32 %v, %zero\n"
      "  cond_br %unset, ^loop, ^done\n"
      "^done:\n"
      "  return\n"
      "}\n"
      "func @main() -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %alloc = hal.device.allocator %device\n"
      "  %mem = const.i32 3\n"
      "  %use = const.i32 5\n"
      "  %four = const.i64 4\n"
      "  %b = hal.allocator.allocate %alloc, %mem, %use, %four\n"
      "  %f1 = fiber.spawn @spin(%b)\n"
      "  %f2 = fiber.spawn @setter(%b)\n"
      "  %both = hal.fence.join %f1, %f2\n"
      "  %forever = const.i64 -1\n"
      "  %s = hal.fence.await %both, %forever\n"
      "  return %s\n"
      "}\n";
  hali_vm_module_t *m = hali_test_module(text);
  hali_hal_device_t *dev = NULL;
  ck_assert_ok(hali_hal_device_create(NULL, &dev));
  hali_vm_scheduler_t *s = NULL;
  hali_vm_scheduler_options_t one_thread = {.threads = 1};
  ck_assert_ok(hali_vm_scheduler_create(dev, &one_thread, &s));
  hali_vm_fiber_t *f = NULL;
  ck_assert_ok(hali_vm_scheduler_start(s, m, hali_vm_module_lookup(m, "main"),
                                       NULL, 0, &f));
  ck_assert_ok(hali_vm_scheduler_run(s, f));
  ck_assert_ptr_null(hali_vm_fiber_status(f));
  ck_assert_uint_ge(hali_vm_scheduler_preemptions(s), 1);
  hali_vm_fiber_release(f);
  hali_vm_scheduler_free(s);
  hali_hal_device_release(dev);
  hali_vm_module_release(m);
}
END_TEST

/* Warm invocations through a scheduler reuse finished fibers and their
 * register stacks: after the first, nothing is allocated for the fiber. */
START_TEST(warm_invocations_reuse_fibers) {
  hali_vm_module_t *m = hali_test_module(k_imports);
  hali_vm_link_t *l = NULL;
  ck_assert_ok(hali_vm_link_create(m, &l));
  ck_assert_ok(hali_vm_link_bind_import(l, "env.add", host_add, &g_calls));
  hali_vm_scheduler_t *s = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, NULL, &s));
  for (int i = 0; i < 10; ++i) {
    hali_vm_fiber_t *f = NULL;
    hali_value_t arg = hali_value_i32(i);
    ck_assert_ok(hali_vm_scheduler_start_link(
        s, l, hali_vm_module_lookup(m, "twice"), &arg, 1, &f));
    ck_assert_ok(hali_vm_scheduler_run(s, f));
    size_t n;
    ck_assert_int_eq(hali_vm_fiber_results(f, &n)[0].i32, 2 * i);
    hali_vm_fiber_release(f);
  }
  uint64_t created, reused;
  hali_vm_scheduler_stats(s, &created, &reused);
  ck_assert_uint_eq(created, 1);
  ck_assert_uint_eq(reused, 9);
  hali_vm_scheduler_free(s);
  hali_vm_link_free(l);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(spawn_needs_a_scheduler) {
  hali_vm_module_t *m = hali_test_module(k_spawn);
  hali_hal_device_t *dev = NULL;
  ck_assert_ok(hali_hal_device_create(NULL, &dev));
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->device = dev;
  hali_value_t arg = hali_value_i32(1), res = {0};
  ck_assert_status(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "main"),
                                  &arg, 1, &res, 1),
                   HALI_STATUS_FAILED_PRECONDITION,
                   "fiber.spawn @fill needs a scheduler");
  hali_vm_stack_free(st);
  hali_hal_device_release(dev);
  hali_vm_module_release(m);
}
END_TEST

static char g_trace[4096];
static void collect(void *user, const char *text) {
  size_t n = strlen(g_trace);
  snprintf(g_trace + n, sizeof(g_trace) - n, "%s\n", text);
}

START_TEST(buffer_view_trace_dumps_values) {
  static const char text[] =
      "func @f(%v: !hal.buffer_view) {\n"
      "  hal.buffer_view.trace %v, \"input\"\n"
      "  return\n"
      "}\n";
  hali_vm_module_t *m = hali_test_module(text);
  check_ops_note_module(m);
  hali_hal_device_t *dev = NULL;
  ck_assert_ok(hali_hal_device_create(NULL, &dev));
  hali_hal_buffer_params_t p = {HALI_HAL_MEMORY_TYPE_HOST_VISIBLE,
                                HALI_HAL_BUFFER_USAGE_MAPPING};
  hali_hal_buffer_t *b = NULL;
  ck_assert_ok(hali_hal_allocator_allocate_buffer(hali_hal_device_allocator(dev),
                                                  p, 40, &b));
  int32_t data[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ck_assert_ok(hali_hal_buffer_write(b, 0, data, sizeof(data)));
  hali_hal_dim_t shape[1] = {10};
  hali_hal_buffer_view_t *v = NULL;
  ck_assert_ok(hali_hal_buffer_view_create(b, 1, shape,
                                           HALI_HAL_ELEMENT_TYPE_INT_32,
                                           HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                                           &v));
  hali_trace_options_t o = {.flags = HALI_TRACE_HAL, .callback = collect,
                            .max_values = 4};
  hali_trace_t *t = NULL;
  hali_status_t ts = hali_trace_create(&o, &t);
  if (!HALI_TRACING) /* compiled out: the op still runs, silently */
    ck_assert_status(ts, HALI_STATUS_UNIMPLEMENTED, "--disable-tracing");
  else
    ck_assert_ok(ts);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_value_t arg = {.type = HALI_TYPE_BUFFER_VIEW};
  arg.ref = (hali_ref_t *)v;
  g_trace[0] = 0;
  /* Without a trace: nothing printed. */
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "f"), &arg, 1,
                              NULL, 0));
  ck_assert_str_eq(g_trace, "");
  if (!HALI_TRACING) {
    hali_vm_stack_free(st);
    hali_hal_buffer_view_release(v);
    hali_hal_buffer_release(b);
    hali_hal_device_release(dev);
    hali_vm_module_release(m);
    return;
  }
  st->trace = t;
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "f"), &arg, 1,
                              NULL, 0));
  char want[128];
  snprintf(want, sizeof(want),
           "[trace] input: !hal.buffer_view#%u<10xi32>=[1 2 3 4 ...]\n",
           ((hali_ref_t *)v)->id);
  ck_assert_str_eq(g_trace, want);
  hali_vm_stack_free(st);
  hali_trace_free(t);
  hali_hal_buffer_view_release(v);
  hali_hal_buffer_release(b);
  hali_hal_device_release(dev);
  hali_vm_module_release(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Backtraces: repeated frames collapse into one line with a count
 * (doc/tracing.md, "Backtraces").  Line numbers are in the comments. */

static const char k_backtrace[] =
    "func @self(%n: i32) -> i32 {\n"           /*  1 */
    "  %r = call @self(%n)\n"                  /*  2 */
    "  return %r\n"                            /*  3 */
    "}\n"                                      /*  4 */
    "func @ping(%n: i32) -> i32 {\n"           /*  5 */
    "  %r = call @pong(%n)\n"                  /*  6 */
    "  return %r\n"                            /*  7 */
    "}\n"                                      /*  8 */
    "func @pong(%n: i32) -> i32 {\n"           /*  9 */
    "  %r = call @ping(%n)\n"                  /* 10 */
    "  return %r\n"                            /* 11 */
    "}\n"                                      /* 12 */
    /* A cycle of five functions: longer than any collapsed cycle. */
    "func @c1(%n: i32) -> i32 {\n"             /* 13 */
    "  %r = call @c2(%n)\n"                    /* 14 */
    "  return %r\n"                            /* 15 */
    "}\n"                                      /* 16 */
    "func @c2(%n: i32) -> i32 {\n"             /* 17 */
    "  %r = call @c3(%n)\n"                    /* 18 */
    "  return %r\n"                            /* 19 */
    "}\n"                                      /* 20 */
    "func @c3(%n: i32) -> i32 {\n"             /* 21 */
    "  %r = call @c4(%n)\n"                    /* 22 */
    "  return %r\n"                            /* 23 */
    "}\n"                                      /* 24 */
    "func @c4(%n: i32) -> i32 {\n"             /* 25 */
    "  %r = call @c5(%n)\n"                    /* 26 */
    "  return %r\n"                            /* 27 */
    "}\n"                                      /* 28 */
    "func @c5(%n: i32) -> i32 {\n"             /* 29 */
    "  %r = call @c1(%n)\n"                    /* 30 */
    "  return %r\n"                            /* 31 */
    "}\n"                                      /* 32 */
    /* @again -> @twice(2) -> @twice(1) -> @twice(0) -> @again -> ...: a
     * cycle of four frames, two of them the same. */
    "func @twice(%k: i32) -> i32 {\n"          /* 33 */
    "  %zero = const.i32 0\n"                  /* 34  pc 0 */
    "  %last = le.s.i32 %k, %zero\n"           /* 35  pc 1 */
    "  cond_br %last, ^out, ^self\n"           /* 36  pc 2 */
    "^out:\n"                                  /* 37 */
    "  %r = call @again(%k)\n"                 /* 38  pc 3 */
    "  return %r\n"                            /* 39  pc 4 */
    "^self:\n"                                 /* 40 */
    "  %one = const.i32 1\n"                   /* 41  pc 5 */
    "  %k1 = sub.i32 %k, %one\n"               /* 42  pc 6 */
    "  %s = call @twice(%k1)\n"                /* 43  pc 7 */
    "  return %s\n"                            /* 44 */
    "}\n"                                      /* 45 */
    "func @again(%k: i32) -> i32 {\n"          /* 46 */
    "  %two = const.i32 2\n"                   /* 47  pc 0 */
    "  %r = call @twice(%two)\n"               /* 48  pc 1 */
    "  return %r\n"                            /* 49 */
    "}\n"                                      /* 50 */
    /* @main(n) -> @sink(n) ... @sink(0) -> @inner: divides by zero. */
    "func @inner(%x: i32) -> i32 {\n"          /* 51 */
    "  %zero = const.i32 0\n"                  /* 52  pc 0 */
    "  %q = div.s.i32 %x, %zero\n"             /* 53  pc 1 */
    "  return %q\n"                            /* 54 */
    "}\n"                                      /* 55 */
    "func @sink(%n: i32) -> i32 {\n"           /* 56 */
    "  %zero = const.i32 0\n"                  /* 57  pc 0 */
    "  %last = le.s.i32 %n, %zero\n"           /* 58  pc 1 */
    "  cond_br %last, ^leaf, ^rec\n"           /* 59  pc 2 */
    "^leaf:\n"                                 /* 60 */
    "  %q = call @inner(%n)\n"                 /* 61  pc 3 */
    "  return %q\n"                            /* 62  pc 4 */
    "^rec:\n"                                  /* 63 */
    "  %one = const.i32 1\n"                   /* 64  pc 5 */
    "  %m = sub.i32 %n, %one\n"                /* 65  pc 6 */
    "  %r = call @sink(%m)\n"                  /* 66  pc 7 */
    "  return %r\n"                            /* 67 */
    "}\n"                                      /* 68 */
    "func @main(%n: i32) -> i32 {\n"           /* 69 */
    "  %r = call @sink(%n)\n"                  /* 70  pc 0 */
    "  return %r\n"                            /* 71 */
    "}\n"                                      /* 72 */
    "func @spawn_self(%n: i32) -> i32 {\n"     /* 73 */
    "  %f = fiber.spawn @self(%n)\n"           /* 74  pc 0 */
    "  %forever = const.i64 -1\n"              /* 75  pc 1 */
    "  %s = hal.fence.await %f, %forever\n"    /* 76  pc 2 */
    "  return %s\n"                            /* 77 */
    "}\n";                                     /* 78 */

/* The text of the status of @fn(n) on a stack of |max_depth| frames
 * (0 = the default); the caller frees it. */
static char *backtrace_of(hali_vm_module_t *m, const char *fn, int32_t n,
                          uint32_t max_depth, hali_status_code_t want) {
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(max_depth, &st));
  hali_value_t arg = hali_value_i32(n), res = {0};
  hali_status_t s =
      hali_vm_invoke(st, m, hali_vm_module_lookup(m, fn), &arg, 1, &res, 1);
  hali_vm_stack_free(st);
  ck_assert_int_eq(hali_status_code(s), want);
  char *text = hali_status_to_string(s);
  hali_status_free(s);
  ck_assert_ptr_nonnull(text);
  return text;
}

START_TEST(backtrace_without_repeats_is_unchanged) {
  hali_vm_module_t *m = hali_test_module(k_backtrace);
  check_ops_note_module(m);
  char *text = backtrace_of(m, "main", 0, 0, HALI_STATUS_OUT_OF_RANGE);
  ck_assert_str_eq(text, "OUT_OF_RANGE: div.s.i32: integer division by zero\n"
                         "  at @inner@1 (test.hasm:53)\n"
                         "  at @sink@3 (test.hasm:61)\n"
                         "  at @main@0 (test.hasm:70)");
  free(text);
  /* One frame of each: nothing to collapse. */
  text = backtrace_of(m, "main", 1, 0, HALI_STATUS_OUT_OF_RANGE);
  ck_assert_str_eq(text, "OUT_OF_RANGE: div.s.i32: integer division by zero\n"
                         "  at @inner@1 (test.hasm:53)\n"
                         "  at @sink@3 (test.hasm:61)\n"
                         "  at @sink@7 (test.hasm:66)\n"
                         "  at @main@0 (test.hasm:70)");
  free(text);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(backtrace_collapses_self_recursion) {
  hali_vm_module_t *m = hali_test_module(k_backtrace);
  /* The default limit: 4096 frames were 4096 lines. */
  char *text = backtrace_of(m, "self", 0, 0, HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(text, "RESOURCE_EXHAUSTED: call depth limit of 4096 "
                         "exceeded\n"
                         "  at @self@0 (test.hasm:2) × 4096");
  free(text);
  /* The innermost and the outermost frames stay on their own lines. */
  text = backtrace_of(m, "main", 1000, 0, HALI_STATUS_OUT_OF_RANGE);
  ck_assert_str_eq(text, "OUT_OF_RANGE: div.s.i32: integer division by zero\n"
                         "  at @inner@1 (test.hasm:53)\n"
                         "  at @sink@3 (test.hasm:61)\n"
                         "  at @sink@7 (test.hasm:66) × 1000\n"
                         "  at @main@0 (test.hasm:70)");
  free(text);
  /* Two frames of a kind are one line too. */
  text = backtrace_of(m, "main", 2, 0, HALI_STATUS_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(text, "\n  at @sink@7 (test.hasm:66) × 2\n"));
  free(text);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(backtrace_collapses_cycles) {
  hali_vm_module_t *m = hali_test_module(k_backtrace);
  /* Mutual recursion: frame 10 (the innermost) is @pong's. */
  char *text = backtrace_of(m, "ping", 0, 10, HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(text, "RESOURCE_EXHAUSTED: call depth limit of 10 "
                         "exceeded\n"
                         "  at [@pong@0 (test.hasm:10), @ping@0 "
                         "(test.hasm:6)] × 5");
  free(text);
  /* An odd depth: the outermost @ping is left over. */
  text = backtrace_of(m, "ping", 0, 11, HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(text, "RESOURCE_EXHAUSTED: call depth limit of 11 "
                         "exceeded\n"
                         "  at [@ping@0 (test.hasm:6), @pong@0 "
                         "(test.hasm:10)] × 5\n"
                         "  at @ping@0 (test.hasm:6)");
  free(text);
  /* A cycle of four with a repeated frame inside: the cycle covers more
   * frames than "@twice@7 × 2" would, so it wins.  Frame 25 is @again's. */
  text = backtrace_of(m, "again", 0, 25, HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(text, "RESOURCE_EXHAUSTED: call depth limit of 25 "
                         "exceeded\n"
                         "  at [@again@1 (test.hasm:48), @twice@3 "
                         "(test.hasm:38), @twice@7 (test.hasm:43), @twice@7 "
                         "(test.hasm:43)] × 6\n"
                         "  at @again@1 (test.hasm:48)");
  free(text);
  hali_vm_module_release(m);
}
END_TEST

/* The expected text of a failure at |depth| in the five-function cycle:
 * frame i (innermost 0) is frame depth - i of @c1 -> @c2 ..., so it is
 * @c((depth - i - 1) % 5 + 1), calling at line 14 + 4 * (c - 1); 16 lines
 * from each end are kept. */
static void five_cycle_text(uint32_t depth, hali_strbuf_t *sb) {
  hali_strbuf_printf(sb, "RESOURCE_EXHAUSTED: call depth limit of %u exceeded",
                     depth);
  for (uint32_t i = 0; i < depth; ++i) {
    if (i == 16 && depth > 32) {
      hali_strbuf_printf(sb, "\n  ... %u frames not shown", depth - 32);
      i = depth - 16;
    }
    uint32_t c = (depth - i - 1) % 5 + 1;
    hali_strbuf_printf(sb, "\n  at @c%u@0 (test.hasm:%u)", c, 14 + 4 * (c - 1));
  }
}

START_TEST(backtrace_keeps_both_ends_of_a_long_stack) {
  hali_vm_module_t *m = hali_test_module(k_backtrace);
  static const uint32_t depths[] = {5, 32, 33, 100, 100000};
  for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); ++d) {
    char *text = backtrace_of(m, "c1", 0, depths[d],
                              HALI_STATUS_RESOURCE_EXHAUSTED);
    hali_strbuf_t want = {0};
    five_cycle_text(depths[d], &want);
    char *w = hali_strbuf_take(&want);
    ck_assert_str_eq(text, w);
    /* Bounded whatever the depth: 33 short lines at most. */
    ck_assert_uint_lt(strlen(text), 33 * 40);
    free(w);
    free(text);
  }
  hali_vm_module_release(m);
}
END_TEST

/* A spawned fiber's frames collapse before the awaiter's are added.  The
 * depth limit is the invocation's: the spawner's one frame counts, so the
 * spawned fiber has 4095 of the 4096. */
START_TEST(backtrace_collapses_in_a_spawned_fiber) {
  hali_vm_module_t *m = hali_test_module(k_backtrace);
  hali_value_t r = {0};
  hali_status_t s = run_fiber(m, "spawn_self", hali_value_i32(0), &r);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(hali_status_message(s),
                   "call depth limit of 4096 exceeded (4095 frames here, 1 "
                   "in the fibers that spawned this one)");
  ck_assert_uint_eq(hali_status_annotation_count(s), 3);
  ck_assert_str_eq(hali_status_annotation(s, 0),
                   "at @self@0 (test.hasm:2) × 4095");
  ck_assert_ptr_nonnull(strstr(hali_status_annotation(s, 1), "awaited fence #"));
  ck_assert_str_eq(hali_status_annotation(s, 2),
                   "at @spawn_self@2 (test.hasm:76)");
  hali_status_free(s);
  hali_vm_module_release(m);
}
END_TEST

void check_calls_add_tcases(Suite *s) {
  TCase *tc = tcase_create("imports");
  tcase_add_test(tc, import_bound_and_called);
  tcase_add_test(tc, import_optional_unbound_and_failing);
  tcase_add_test(tc, import_round_trips_through_binary);
  suite_add_tcase(s, tc);
  tc = tcase_create("fibers");
  tcase_add_test(tc, spawn_runs_and_joins);
  tcase_add_test(tc, spawn_failure_reaches_the_awaiter);
  tcase_add_test(tc, spawn_needs_a_scheduler);
  tcase_add_test(tc, warm_invocations_reuse_fibers);
  tcase_add_test(tc, blocking_functions_block);
  tcase_add_test(tc, busy_fibers_are_preempted);
  suite_add_tcase(s, tc);
  tc = tcase_create("trace_op");
  tcase_add_test(tc, buffer_view_trace_dumps_values);
  suite_add_tcase(s, tc);
  tc = tcase_create("backtraces");
  tcase_add_test(tc, backtrace_without_repeats_is_unchanged);
  tcase_add_test(tc, backtrace_collapses_self_recursion);
  tcase_add_test(tc, backtrace_collapses_cycles);
  tcase_add_test(tc, backtrace_keeps_both_ends_of_a_long_stack);
  tcase_add_test(tc, backtrace_collapses_in_a_spawned_fiber);
  suite_add_tcase(s, tc);
}
