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

static hali_status_t call1(hali_vm_module_t *m, const char *fn, int32_t x,
                           int32_t *out) {
  hali_vm_stack_t *st = NULL;
  hali_status_t s = hali_vm_stack_create(0, &st);
  hali_value_t arg = hali_value_i32(x), res = {0};
  if (!s) s = hali_vm_invoke(st, m, hali_vm_module_lookup(m, fn), &arg, 1,
                             &res, 1);
  hali_vm_stack_free(st);
  *out = res.i32;
  return s;
}

START_TEST(import_bound_and_called) {
  hali_vm_module_t *m = hali_test_module(k_imports);
  check_ops_note_module(m);
  ck_assert_status(hali_vm_module_check_imports(m), HALI_STATUS_NOT_FOUND,
                   "1 required import(s) not provided by the host: @env.add");
  ck_assert_status(hali_vm_module_bind_import(m, "twice", host_add, NULL),
                   HALI_STATUS_NOT_FOUND, "has no import @twice");
  ck_assert_ok(hali_vm_module_bind_import(m, "env.add", host_add, &g_calls));
  ck_assert_ok(hali_vm_module_check_imports(m));
  int32_t r = 0;
  g_calls = 0;
  ck_assert_ok(call1(m, "twice", 21, &r));
  ck_assert_int_eq(r, 42);
  ck_assert_int_eq(g_calls, 1);
  hali_vm_module_free(m);
}
END_TEST

START_TEST(import_optional_unbound_and_failing) {
  hali_vm_module_t *m = hali_test_module(k_imports);
  ck_assert_ok(hali_vm_module_bind_import(m, "env.add", host_fails, NULL));
  int32_t r;
  ck_assert_status(call1(m, "maybe", 1, &r), HALI_STATUS_NOT_FOUND,
                   "import @env.maybe is not provided by the host");
  hali_status_t s = call1(m, "twice", 1, &r);
  ck_assert_status(s, HALI_STATUS_UNAVAILABLE, "in host import @env.add");
  s = call1(m, "twice", 1, &r);
  ck_assert_status(s, HALI_STATUS_UNAVAILABLE, "at @twice@0");
  hali_vm_module_free(m);
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
    "func @backwards(%n: i64) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %minus = const.i64 -1\n"
    "  %b = hal.fence.offset %a, %minus\n"
    "  %zero = const.i32 0\n"
    "  return %zero\n"
    "}\n";

/* Runs @fn(arg) as a fiber on a fresh scheduler and device. */
static hali_status_t run_fiber(hali_vm_module_t *m, const char *fn,
                               hali_value_t arg, hali_value_t *out) {
  hali_hal_device_t *dev = NULL;
  hali_vm_scheduler_t *s = NULL;
  hali_vm_fiber_t *f = NULL;
  hali_status_t st = hali_hal_device_create(NULL, &dev);
  if (!st) st = hali_vm_scheduler_create(dev, NULL, &s);
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

START_TEST(spawn_runs_and_joins) {
  hali_vm_module_t *m = hali_test_module(k_spawn);
  check_ops_note_module(m);
  hali_value_t r = {0};
  ck_assert_ok(run_fiber(m, "main", hali_value_i32(1234), &r));
  ck_assert_int_eq(r.i32, 1234);
  ck_assert_ok(run_fiber(m, "pingpong", hali_value_i64(500), &r));
  ck_assert_int_eq(r.i32, 0);
  hali_vm_module_free(m);
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
  hali_vm_module_free(m);
}
END_TEST

/* attributes ["blocking"]: awaits in that function block the thread, so a
 * fiber spawned just before does not get to run during the wait; without
 * the attribute the await suspends and the spawned fiber runs. */
START_TEST(blocking_functions_block) {
  static const char text[] =
      "func @child(%b: !hal.buffer) {\n"
      "  %z = const.i64 0\n"
      "  %one = const.i32 1\n"
      "  hal.buffer.store.i32 %b, %z, %one\n"
      "  return\n"
      "}\n"
      "func @wait_blocking() attributes [\"blocking\"] {\n"
      "  %device = hal.device.get\n"
      "  %a = hal.fence.create %device\n"
      "  %ms = const.i64 20\n"
      "  %s = hal.fence.await %a, %ms\n"
      "  return\n"
      "}\n"
      "func @wait_suspending() {\n"
      "  %device = hal.device.get\n"
      "  %a = hal.fence.create %device\n"
      "  %ms = const.i64 20\n"
      "  %s = hal.fence.await %a, %ms\n"
      "  return\n"
      "}\n"
      /* No branch between the wait and the load: a branch may yield. */
      "func @outer_blocking(%unused: i32) -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %alloc = hal.device.allocator %device\n"
      "  %mem = const.i32 3\n"
      "  %use = const.i32 5\n"
      "  %four = const.i64 4\n"
      "  %b = hal.allocator.allocate %alloc, %mem, %use, %four\n"
      "  %f = fiber.spawn @child(%b)\n"
      "  call @wait_blocking()\n"
      "  %z = const.i64 0\n"
      "  %v = hal.buffer.load.i32 %b, %z\n"
      "  return %v\n"
      "}\n"
      "func @outer_suspending(%unused: i32) -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %alloc = hal.device.allocator %device\n"
      "  %mem = const.i32 3\n"
      "  %use = const.i32 5\n"
      "  %four = const.i64 4\n"
      "  %b = hal.allocator.allocate %alloc, %mem, %use, %four\n"
      "  %f = fiber.spawn @child(%b)\n"
      "  call @wait_suspending()\n"
      "  %z = const.i64 0\n"
      "  %v = hal.buffer.load.i32 %b, %z\n"
      "  return %v\n"
      "}\n";
  hali_vm_module_t *m = hali_test_module(text);
  hali_value_t r = {0};
  ck_assert_ok(run_fiber(m, "outer_blocking", hali_value_i32(0), &r));
  ck_assert_int_eq(r.i32, 0); /* the child had not run yet */
  ck_assert_ok(run_fiber(m, "outer_suspending", hali_value_i32(0), &r));
  ck_assert_int_eq(r.i32, 1); /* the child ran while @outer waited */
  hali_vm_module_free(m);
}
END_TEST

/* Fairness without awaits: @spin loops until @setter (spawned after it)
 * stores a flag; only preemption lets @setter run. */
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
  ck_assert_ok(hali_vm_scheduler_create(dev, NULL, &s));
  hali_vm_fiber_t *f = NULL;
  ck_assert_ok(hali_vm_scheduler_start(s, m, hali_vm_module_lookup(m, "main"),
                                       NULL, 0, &f));
  ck_assert_ok(hali_vm_scheduler_run(s, f));
  ck_assert_ptr_null(hali_vm_fiber_status(f));
  ck_assert_uint_ge(hali_vm_scheduler_preemptions(s), 1);
  hali_vm_fiber_release(f);
  hali_vm_scheduler_free(s);
  hali_hal_device_release(dev);
  hali_vm_module_free(m);
}
END_TEST

/* Warm invocations through a scheduler reuse finished fibers and their
 * register stacks: after the first, nothing is allocated for the fiber. */
START_TEST(warm_invocations_reuse_fibers) {
  hali_vm_module_t *m = hali_test_module(k_imports);
  ck_assert_ok(hali_vm_module_bind_import(m, "env.add", host_add, &g_calls));
  hali_vm_scheduler_t *s = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, NULL, &s));
  for (int i = 0; i < 10; ++i) {
    hali_vm_fiber_t *f = NULL;
    hali_value_t arg = hali_value_i32(i);
    ck_assert_ok(hali_vm_scheduler_start(s, m, hali_vm_module_lookup(m, "twice"),
                                         &arg, 1, &f));
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
  hali_vm_module_free(m);
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
  hali_vm_module_free(m);
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
    hali_vm_module_free(m);
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
  hali_vm_module_free(m);
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
}
