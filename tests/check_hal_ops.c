/* VM-level tests of every HAL op (vm/ops_hal.def and the hal.buffer.load/
 * store rows of vm/ops.def): each test runs a small .hasm program through
 * the interpreter with a device, and checks results, error codes, error
 * messages and the backtrace.
 *
 * Everything that touches a device runs twice, on local-sync and on
 * local-task with 2 workers, and the two runs must agree exactly: the same
 * results (scalars by bits, buffer views by type, shape and bytes) and the
 * same status text.  The helpers return the local-sync outcome.
 *
 * Compiled into check_ops (tests/hal_ops_suite.h), whose coverage case
 * then checks that every HAL op was encoded by some test here.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h" /* HALI_DEBUG */
#include "base/clock.h"
#include "base/status.h"
#include "hal/hal.h"
#include "loader/executables.h"
#include "tests/hal_ops_suite.h"
#include "vm/fiber.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define I32(v) hali_value_i32((int32_t)(uint32_t)(v))
#define I64(v) hali_value_i64((int64_t)(uint64_t)(v))
#define F32(v) hali_value_f32((float)(v))
#define F64(v) hali_value_f64((double)(v))
#define ARGS(...)                                                              \
  (const hali_value_t[]){__VA_ARGS__},                                         \
      sizeof((const hali_value_t[]){__VA_ARGS__}) / sizeof(hali_value_t)
#define NO_ARGS NULL, 0

/* ------------------------------------------------------------------------ */
/* Running programs on devices. */

typedef struct {
  const char *name;
  hali_hal_device_kind_t kind;
  uint32_t workers;
} device_config_t;

static const device_config_t k_devices[] = {
    {"local-sync", HALI_HAL_DEVICE_LOCAL_SYNC, 1},
    {"local-task", HALI_HAL_DEVICE_LOCAL_TASK, 2},
};

/* Loads |text| (recording its ops for the coverage case), optionally loads
 * its executables, and runs @|fn| on a fresh stack whose device is a new
 * |dev| (NULL: no device). */
static hali_status_t invoke_on(const device_config_t *dev, bool executables,
                               const char *text, const char *fn,
                               const hali_value_t *args, size_t nargs,
                               hali_value_t *results, size_t nresults) {
  hali_vm_module_t *m = hali_test_module(text);
  check_ops_note_module(m);
  const hali_vm_func_t *f = hali_vm_module_lookup(m, fn);
  hali_status_t s = HALI_OK;
  if (!f) s = hali_status_make(HALI_STATUS_NOT_FOUND, "test: no @%s", fn);
  hali_vm_link_t *l = NULL;
  if (!s) s = hali_vm_link_create(m, &l);
  if (!s && executables) {
    hali_executable_registry_t *r = NULL;
    s = hali_executable_registry_create(&r);
    if (!s) s = hali_executable_registry_load_link(r, l, NULL, NULL, 0);
    hali_executable_registry_free(r);
  }
  hali_hal_device_t *d = NULL;
  if (!s && dev) {
    hali_hal_device_params_t p;
    hali_hal_device_params_initialize(&p);
    p.kind = dev->kind;
    p.worker_count = dev->workers;
    s = hali_hal_device_create(&p, &d);
  }
  hali_vm_stack_t *st = NULL;
  if (!s) s = hali_vm_stack_create(0, &st);
  if (!s) {
    /* Callers expecting an error pass room for any number of results. */
    if (nresults > f->ir->result_count) nresults = f->ir->result_count;
    st->device = d;
    s = hali_vm_link_invoke(st, l, f, args, nargs, results, nresults);
  }
  hali_vm_stack_free(st);
  hali_vm_link_free(l);
  hali_vm_module_release(m);
  if (d) hali_hal_device_release(d);
  return s;
}

/* The bytes of a buffer-view result (at most |cap|); returns the count. */
static size_t view_bytes(const hali_value_t *v, uint8_t *out, size_t cap) {
  ck_assert_int_eq(v->type, HALI_TYPE_BUFFER_VIEW);
  const hali_hal_buffer_view_t *view = (const hali_hal_buffer_view_t *)v->ref;
  size_t n = (size_t)hali_hal_buffer_view_byte_length(view);
  ck_assert_uint_le(n, cap);
  ck_assert_ok(hali_hal_buffer_read(hali_hal_buffer_view_buffer(view), 0, out,
                                    n));
  return n;
}

static bool same_result(const hali_value_t *a, const hali_value_t *b) {
  if (a->type != b->type) return false;
  switch (a->type) {
  case HALI_TYPE_I32:
  case HALI_TYPE_F32:
    return memcmp(&a->i32, &b->i32, 4) == 0;
  case HALI_TYPE_I64:
  case HALI_TYPE_F64:
    return memcmp(&a->i64, &b->i64, 8) == 0;
  case HALI_TYPE_BUFFER_VIEW: {
    const hali_hal_buffer_view_t *x = (const hali_hal_buffer_view_t *)a->ref;
    const hali_hal_buffer_view_t *y = (const hali_hal_buffer_view_t *)b->ref;
    char tx[256], ty[256];
    hali_hal_buffer_view_format_type(x, tx, sizeof tx);
    hali_hal_buffer_view_format_type(y, ty, sizeof ty);
    if (strcmp(tx, ty) != 0) return false;
    static uint8_t bx[4096], by[4096];
    size_t nx = view_bytes(a, bx, sizeof bx), ny = view_bytes(b, by, sizeof by);
    return nx == ny && memcmp(bx, by, nx) == 0;
  }
  default:
    return a->ref == b->ref;
  }
}

/* Runs @|fn| on every device of k_devices (with executables loaded); the
 * runs must agree.  Returns the first device's status and results. */
/* Equal once every "#<digits>" is treated as the same, and so are the
 * device names (statuses name the device that ran the work). */
static bool same_modulo_ids(const char *a, const char *b) {
  while (*a && *b) {
    if (!strncmp(a, "local-sync", 10) && !strncmp(b, "local-task", 10)) {
      a += 10, b += 10;
      continue;
    }
    if (*a == '#' && *b == '#') {
      ++a, ++b;
      while (*a >= '0' && *a <= '9') ++a;
      while (*b >= '0' && *b <= '9') ++b;
      continue;
    }
    if (*a++ != *b++) return false;
  }
  return *a == *b;
}

static hali_status_t run_hal(const char *text, const char *fn,
                             const hali_value_t *args, size_t nargs,
                             hali_value_t *results, size_t nresults) {
  hali_status_t first = invoke_on(&k_devices[0], true, text, fn, args, nargs,
                                  results, nresults);
  char *first_text = first ? hali_status_to_string(first) : NULL;
  for (size_t d = 1; d < COUNT_OF(k_devices); ++d) {
    hali_value_t other[8] = {{0}};
    ck_assert_uint_le(nresults, COUNT_OF(other));
    hali_status_t s = invoke_on(&k_devices[d], true, text, fn, args, nargs,
                                other, nresults);
    char *text2 = s ? hali_status_to_string(s) : NULL;
    hali_status_free(s);
    /* Object ids (#N) count objects per process: they differ by run. */
    bool same_status = (!first_text && !text2) ||
                       (first_text && text2 && same_modulo_ids(first_text, text2));
    char buf[1024];
    snprintf(buf, sizeof buf, "@%s: %s says '%s', %s says '%s'", fn,
             k_devices[0].name, first_text ? first_text : "OK",
             k_devices[d].name, text2 ? text2 : "OK");
    free(text2);
    bool same = same_status;
    for (size_t i = 0; same && !first && i < nresults; ++i)
      same = same_result(&results[i], &other[i]);
    for (size_t i = 0; !first && i < nresults; ++i)
      hali_value_release(&other[i]);
    if (!same) {
      free(first_text);
      hali_status_free(first);
      ck_abort_msg("devices disagree: %s", buf);
    }
  }
  free(first_text);
  return first;
}

/* Runs @|fn| (on both devices) and returns its i32 / i64 result. */
static hali_value_t run_ok1(const char *file, int line, const char *text,
                            const char *fn, const hali_value_t *args,
                            size_t nargs) {
  hali_value_t r = {0};
  hali_status_t s = run_hal(text, fn, args, nargs, &r, 1);
  if (s) {
    char *t = hali_status_to_string(s);
    hali_status_free(s);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", t ? t : "");
    free(t);
    ck_abort_msg("%s:%d: @%s failed: %s", file, line, fn, buf);
  }
  return r;
}
#define RUN1(text, fn, ...)                                                    \
  run_ok1(__FILE__, __LINE__, text, fn, ARGS(__VA_ARGS__))
#define RUN1_NOARGS(text, fn) run_ok1(__FILE__, __LINE__, text, fn, NO_ARGS)
#define EXPECT_I32(text, fn, want, ...)                                        \
  do {                                                                         \
    hali_value_t r_ = RUN1(text, fn, __VA_ARGS__);                             \
    ck_assert_int_eq(r_.type, HALI_TYPE_I32);                                  \
    ck_assert_int_eq(r_.i32, (int32_t)(want));                                 \
  } while (0)
#define EXPECT_I32_NOARGS(text, fn, want)                                      \
  do {                                                                         \
    hali_value_t r_ = RUN1_NOARGS(text, fn);                                   \
    ck_assert_int_eq(r_.type, HALI_TYPE_I32);                                  \
    ck_assert_int_eq(r_.i32, (int32_t)(want));                                 \
  } while (0)
#define EXPECT_I64(text, fn, want, ...)                                        \
  do {                                                                         \
    hali_value_t r_ = RUN1(text, fn, __VA_ARGS__);                             \
    ck_assert_int_eq(r_.type, HALI_TYPE_I64);                                  \
    ck_assert_int_eq(r_.i64, (int64_t)(want));                                 \
  } while (0)

/* Asserts that |s| has |code|, that its message contains |needle| and that
 * its backtrace names @|fn|; frees |s|. */
static void check_error(const char *file, int line, hali_status_t s,
                        hali_status_code_t code, const char *needle,
                        const char *fn) {
  char *t = s ? hali_status_to_string(s) : NULL;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", t ? t : "OK");
  free(t);
  hali_status_code_t have = hali_status_code(s);
  const char *msg = s ? hali_status_message(s) : "";
  bool msg_ok = strstr(msg, needle) != NULL;
  char at[128];
  snprintf(at, sizeof at, "at @%s@", fn);
  bool at_ok = strstr(buf, at) != NULL;
  hali_status_free(s);
  ck_assert_msg(have == code, "%s:%d: expected %s, got %s", file, line,
                hali_status_code_name(code), buf);
  ck_assert_msg(msg_ok, "%s:%d: message lacks \"%s\": %s", file, line, needle,
                buf);
  ck_assert_msg(at_ok, "%s:%d: backtrace lacks \"%s\": %s", file, line, at,
                buf);
}
#define EXPECT_ERROR(text, fn, code, needle, ...)                              \
  do {                                                                         \
    hali_value_t r_[4] = {{0}};                                                \
    check_error(__FILE__, __LINE__,                                            \
                run_hal(text, fn, ARGS(__VA_ARGS__), r_, COUNT_OF(r_)), code,  \
                needle, fn);                                                   \
  } while (0)
#define EXPECT_ERROR_NOARGS(text, fn, code, needle)                            \
  do {                                                                         \
    hali_value_t r_[4] = {{0}};                                                \
    check_error(__FILE__, __LINE__,                                            \
                run_hal(text, fn, NO_ARGS, r_, COUNT_OF(r_)), code, needle,    \
                fn);                                                           \
  } while (0)

/* Checks the bytes of view result |v| (and releases it). */
static void expect_view_bytes(const char *file, int line, hali_value_t *v,
                              const uint8_t *want, size_t n) {
  uint8_t got[256];
  size_t len = view_bytes(v, got, sizeof got);
  hali_value_release(v);
  ck_assert_msg(len == n, "%s:%d: view has %zu bytes, expected %zu", file,
                line, len, n);
  for (size_t i = 0; i < n; ++i)
    ck_assert_msg(got[i] == want[i],
                  "%s:%d: byte %zu is 0x%02x, expected 0x%02x", file, line, i,
                  got[i], want[i]);
}
#define EXPECT_VIEW_BYTES(v, ...)                                              \
  expect_view_bytes(__FILE__, __LINE__, v, (const uint8_t[]){__VA_ARGS__},     \
                    sizeof((const uint8_t[]){__VA_ARGS__}))

/* Runs a function returning several scalars; checks each as i64 bits
 * (i32 sign-extended, floats by bit pattern). */
static void expect_results(const char *file, int line, const char *text,
                           const char *fn, const hali_value_t *args,
                           size_t nargs, const hali_value_t *want,
                           size_t nwant) {
  hali_value_t got[8] = {{0}};
  ck_assert_uint_le(nwant, COUNT_OF(got));
  hali_status_t s = run_hal(text, fn, args, nargs, got, nwant);
  if (s) {
    char *t = hali_status_to_string(s);
    hali_status_free(s);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", t ? t : "");
    free(t);
    ck_abort_msg("%s:%d: @%s failed: %s", file, line, fn, buf);
  }
  for (size_t i = 0; i < nwant; ++i)
    ck_assert_msg(same_result(&got[i], &want[i]),
                  "%s:%d: @%s result %zu: got type %d 0x%016" PRIx64
                  ", expected type %d 0x%016" PRIx64,
                  file, line, fn, i, (int)got[i].type, (uint64_t)got[i].i64,
                  (int)want[i].type, (uint64_t)want[i].i64);
}
#define WANT(...)                                                              \
  (const hali_value_t[]){__VA_ARGS__},                                         \
      sizeof((const hali_value_t[]){__VA_ARGS__}) / sizeof(hali_value_t)
#define EXPECT_RESULTS(text, fn, args, want)                                   \
  expect_results(__FILE__, __LINE__, text, fn, args, want)

/* Common code: a device, its allocator and host-visible mappable memory
 * (device-local | host-visible | device-visible = 19; transfer | dispatch |
 * mapping = 7). */
#define PRELUDE                                                                \
  "  %device = hal.device.get\n"                                               \
  "  %allocator = hal.device.allocator %device\n"                              \
  "  %mem = const.i32 19\n"                                                    \
  "  %use = const.i32 7\n"                                                     \
  "  %z = const.i64 0\n"                                                       \
  "  %c16 = const.i64 16\n"                                                    \
  "  %one32 = const.i32 1\n"                                                   \
  "  %zero32 = const.i32 0\n"
/* Submit %cmd and wait for it, asserting success. */
#define SUBMIT                                                                 \
  "  hal.command_buffer.finalize %cmd\n"                                       \
  "  %wait = hal.fence.null\n"                                                 \
  "  %done = hal.fence.create %device\n"                                       \
  "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"                 \
  "  %forever = const.i64 -1\n"                                                \
  "  %st = hal.fence.await %done, %forever\n"                                  \
  "  %ok = eq.i32 %st, %zero32\n"                                              \
  "  assert %ok, \"submission failed\"\n"
/* %view = the i8 view of all 16 bytes of %b. */
#define VIEW16                                                                 \
  "  %i8 = const.i32 0x10000008\n"                                             \
  "  %view = hal.buffer_view.create %b, %i8, %one32, [%c16]\n"                 \
  "  return %view\n"

/* ------------------------------------------------------------------------ */
/* Devices and allocation. */

static const char alloc_text[] =
    "func @alloc(%n: i64) -> i64 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %n\n"
    "  %len = hal.buffer.length %b\n"
    "  return %len\n"
    "}\n"
    "func @alloc_bits(%m: i32, %u: i32) -> i64 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %m, %u, %c16\n"
    "  %len = hal.buffer.length %b\n"
    "  return %len\n"
    "}\n"
    "func @zeroed() -> i64 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %x = hal.buffer.load.i64 %b, %z\n"
    "  %eight = const.i64 8\n"
    "  %y = hal.buffer.load.i64 %b, %eight\n"
    "  %x = or.i64 %x, %y\n"
    "  return %x\n"
    "}\n";

START_TEST(device_get_and_allocate) {
  EXPECT_I64(alloc_text, "alloc", 10, I64(10));
  EXPECT_I64(alloc_text, "alloc", 0, I64(0));
  hali_value_t r = RUN1_NOARGS(alloc_text, "zeroed");
  ck_assert_int_eq(r.type, HALI_TYPE_I64);
  ck_assert_int_eq(r.i64, 0);
  EXPECT_I64(alloc_text, "alloc_bits", 16, I32(1), I32(0));
  EXPECT_ERROR(alloc_text, "alloc", HALI_STATUS_OUT_OF_RANGE,
               "allocation size -1 is negative", I64(-1));
  EXPECT_ERROR(alloc_text, "alloc_bits", HALI_STATUS_INVALID_ARGUMENT,
               "unknown memory type bits 0x40", I32(0x40 | 19), I32(7));
  EXPECT_ERROR(alloc_text, "alloc_bits", HALI_STATUS_INVALID_ARGUMENT,
               "unknown buffer usage bits 0x10", I32(19), I32(0x17));
}
END_TEST

/* hal.allocator.reuse (format 1.5, tensor control flow): the buffer
 * itself when it is exactly the size asked with the bits asked, else a
 * fresh one; mov.ref copies a ref between registers. */
static const char reuse_text[] =
    "func @reuse(%n: i64, %m: i32, %off: i64) -> (i64, i32) {\n" PRELUDE
    "  %whole = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %a = hal.buffer.subspan %whole, %off, %n\n"
    "  %v = const.i32 42\n"
    "  hal.buffer.store.i32 %a, %z, %v\n"
    "  %b = hal.allocator.reuse %allocator, %a, %m, %use, %n\n"
    "  %seven = const.i32 7\n"
    "  hal.buffer.store.i32 %b, %z, %seven\n"
    "  %got = hal.buffer.load.i32 %a, %z\n"
    "  %len = hal.buffer.length %b\n"
    "  return %len, %got\n"
    "}\n"
    "func @grow(%n: i64) -> i64 {\n" PRELUDE
    "  %a = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %b = hal.allocator.reuse %allocator, %a, %mem, %use, %n\n"
    "  %len = hal.buffer.length %b\n"
    "  return %len\n"
    "}\n"
    "func @mov() -> i32 {\n" PRELUDE
    "  %a = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %b = mov.ref %a\n"
    "  %v = const.i32 5\n"
    "  hal.buffer.store.i32 %b, %z, %v\n"
    "  %a = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %got = hal.buffer.load.i32 %b, %z\n"
    "  %other = hal.buffer.load.i32 %a, %z\n"
    "  %got = add.i32 %got, %other\n"
    "  return %got\n"
    "}\n";

static void reuse_case(int64_t n, int32_t m, int64_t off, int64_t want_len,
                       int32_t want_got) {
  hali_value_t r[2] = {{0}};
  ck_assert_ok(invoke_on(&k_devices[0], false, reuse_text, "reuse",
                         ARGS(I64(n), I32(m), I64(off)), r, 2));
  ck_assert_int_eq(r[0].i64, want_len);
  ck_assert_int_eq(r[1].i32, want_got);
}

START_TEST(allocator_reuse_and_mov_ref) {
  reuse_case(16, 19, 0, 16, 7); /* same size and bits: the same buffer */
  reuse_case(16, 3, 0, 16, 7);  /* fewer bits asked: still fits */
  reuse_case(8, 19, 0, 8, 7);   /* a subspan at offset 0 is reused */
  reuse_case(8, 19, 4, 8, 42);  /* at an offset: a fresh buffer */
  reuse_case(12, 19 | 8, 0, 12, 42); /* a bit it lacks: a fresh buffer */
  EXPECT_I64(reuse_text, "grow", 64, I64(64));
  EXPECT_I64(reuse_text, "grow", 0, I64(0));
  EXPECT_ERROR(reuse_text, "grow", HALI_STATUS_OUT_OF_RANGE,
               "allocation size -1 is negative", I64(-1));
  hali_value_t r = RUN1_NOARGS(reuse_text, "mov");
  ck_assert_int_eq(r.i32, 5); /* %b kept the first buffer; the new one is 0 */
  hali_vm_module_t *m = NULL;
  ck_assert_status(
      hali_test_try_module("func @f() {\n"
                           "  %device = hal.device.get\n"
                           "  %allocator = hal.device.allocator %device\n"
                           "  %n = const.i64 4\n"
                           "  %t = const.i32 19\n"
                           "  %u = const.i32 7\n"
                           "  %d = hal.allocator.allocate %allocator, %t, %u, %n\n"
                           "  %e = hal.fence.create %device\n"
                           "  %d = mov.ref %e\n"
                           "  return\n"
                           "}\n",
                           &m),
      HALI_STATUS_INVALID_ARGUMENT,
      "register is !hal.buffer but this operand must be !hal.fence");
}
END_TEST

START_TEST(device_get_without_device) {
  hali_value_t r = {0};
  check_error(__FILE__, __LINE__,
              invoke_on(NULL, false, alloc_text, "alloc", ARGS(I64(4)), &r, 1),
              HALI_STATUS_FAILED_PRECONDITION,
              "no device: the invocation was started without one", "alloc");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Channels and collectives (format 1.5) on a channel of one rank: the test
 * process is not started by mpirun.  tests/collectives.test runs the same
 * ops on 1-4 ranks. */

static const char channel_text[] =
    "func @shape() -> (i32, i32, i32) {\n" PRELUDE
    "  %ch = hal.channel.default %device\n"
    "  %r = hal.channel.rank %ch\n"
    "  %n = hal.channel.count %ch\n"
    "  %color = const.i32 -1\n"
    "  %alone = hal.channel.split %ch, %color, %zero32\n"
    "  %m = hal.channel.count %alone\n"
    "  return %r, %n, %m\n"
    "}\n"
    "func @sum(%v: i32, %kind: i32, %red: i32, %len: i64) -> i32 {\n" PRELUDE
    "  %ch = hal.channel.default %device\n"
    "  %a = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %c4 = const.i64 4\n"
    "  %four = const.i32 4\n"
    "  %any = const.i32 3\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %any\n"
    "  hal.command_buffer.fill %cmd, %a, %z, %c16, %v, %four\n"
    "  hal.command_buffer.execution_barrier %cmd\n"
    "  %i32 = const.i32 0x10000020\n"
    "  hal.command_buffer.collective %cmd, %ch, %kind, %red, %i32, %zero32, "
    "%c4, %a, %z, %len, %b, %z, %c16\n"
    SUBMIT
    "  %x = hal.buffer.load.i32 %b, %z\n"
    "  return %x\n"
    "}\n";

START_TEST(channel_ops_one_rank) {
  hali_value_t r[3];
  ck_assert_ok(invoke_on(&k_devices[0], false, channel_text, "shape", NULL, 0,
                       r, 3));
  ck_assert_int_eq(r[0].i32, 0);
  ck_assert_int_eq(r[1].i32, 1);
  ck_assert_int_eq(r[2].i32, 1);
  /* all_reduce(sum) of one rank: what it sent. */
  EXPECT_I32(channel_text, "sum", 7, I32(7), I32(1), I32(1), I64(16));
  /* all_gather (0) without a reduction. */
  EXPECT_I32(channel_text, "sum", -3, I32(-3), I32(0), I32(0), I64(16));
  EXPECT_ERROR(channel_text, "sum", HALI_STATUS_INVALID_ARGUMENT,
               "all_reduce needs a reduction", I32(1), I32(1), I32(0),
               I64(16));
  EXPECT_ERROR(channel_text, "sum", HALI_STATUS_INVALID_ARGUMENT,
               "all_reduce: the send range is 12 bytes; this rank sends "
               "exactly 16",
               I32(1), I32(1), I32(1), I64(12));
  EXPECT_ERROR(channel_text, "sum", HALI_STATUS_OUT_OF_RANGE,
               "send length -1 is negative", I32(1), I32(1), I32(1), I64(-1));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Scalar loads and stores. */

static const char access_text[] =
    "func @i8(%v: i32) -> (i32, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %off = const.i64 3\n"
    "  hal.buffer.store.i8 %b, %off, %v\n"
    "  %s = hal.buffer.load.i8.s %b, %off\n"
    "  %u = hal.buffer.load.i8.u %b, %off\n"
    "  return %s, %u\n"
    "}\n"
    "func @i16(%v: i32) -> (i32, i32, i32, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %off = const.i64 5\n" /* unaligned */
    "  hal.buffer.store.i16 %b, %off, %v\n"
    "  %s = hal.buffer.load.i16.s %b, %off\n"
    "  %u = hal.buffer.load.i16.u %b, %off\n"
    "  %lo = hal.buffer.load.i8.u %b, %off\n"
    "  %six = const.i64 6\n"
    "  %hi = hal.buffer.load.i8.u %b, %six\n"
    "  return %s, %u, %lo, %hi\n"
    "}\n"
    "func @i32(%v: i32) -> (i32, i32, i32, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %off = const.i64 1\n"
    "  hal.buffer.store.i32 %b, %off, %v\n"
    "  %x = hal.buffer.load.i32 %b, %off\n"
    "  %b0 = hal.buffer.load.i8.u %b, %off\n"
    "  %four = const.i64 4\n"
    "  %b3 = hal.buffer.load.i8.u %b, %four\n"
    "  %five = const.i64 5\n"
    "  %after = hal.buffer.load.i8.u %b, %five\n"
    "  return %x, %b0, %b3, %after\n"
    "}\n"
    "func @i64(%v: i64) -> (i64, i32, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %off = const.i64 3\n"
    "  hal.buffer.store.i64 %b, %off, %v\n"
    "  %x = hal.buffer.load.i64 %b, %off\n"
    "  %lo = hal.buffer.load.i32 %b, %off\n"
    "  %seven = const.i64 7\n"
    "  %hi = hal.buffer.load.i32 %b, %seven\n"
    "  return %x, %lo, %hi\n"
    "}\n"
    "func @f32(%v: f32) -> (f32, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %off = const.i64 6\n"
    "  hal.buffer.store.f32 %b, %off, %v\n"
    "  %x = hal.buffer.load.f32 %b, %off\n"
    "  %bits = hal.buffer.load.i32 %b, %off\n"
    "  return %x, %bits\n"
    "}\n"
    "func @f64(%v: f64) -> (f64, i64) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %off = const.i64 7\n"
    "  hal.buffer.store.f64 %b, %off, %v\n"
    "  %x = hal.buffer.load.f64 %b, %off\n"
    "  %bits = hal.buffer.load.i64 %b, %off\n"
    "  return %x, %bits\n"
    "}\n"
    /* Every width at |off| in an 8-byte buffer: width selects the op. */
    "func @oob(%width: i32, %off: i64) -> i32 {\n" PRELUDE
    "  %eight = const.i64 8\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %eight\n"
    "  %v = const.i32 0\n"
    "  switch %width, ^l8, [^l8, ^l16, ^l32, ^l64, ^s8, ^s16, ^s32, ^s64, "
    "^lf32, ^lf64, ^sf32, ^sf64, ^l8s, ^l16s]\n"
    "^l8:\n  %v = hal.buffer.load.i8.u %b, %off\n  return %v\n"
    "^l16:\n  %v = hal.buffer.load.i16.u %b, %off\n  return %v\n"
    "^l32:\n  %v = hal.buffer.load.i32 %b, %off\n  return %v\n"
    "^l64:\n  %w = hal.buffer.load.i64 %b, %off\n  return %v\n"
    "^s8:\n  hal.buffer.store.i8 %b, %off, %v\n  return %v\n"
    "^s16:\n  hal.buffer.store.i16 %b, %off, %v\n  return %v\n"
    "^s32:\n  hal.buffer.store.i32 %b, %off, %v\n  return %v\n"
    "^s64:\n  hal.buffer.store.i64 %b, %off, %z\n  return %v\n"
    "^lf32:\n  %f = hal.buffer.load.f32 %b, %off\n  return %v\n"
    "^lf64:\n  %d = hal.buffer.load.f64 %b, %off\n  return %v\n"
    "^sf32:\n  %fz = const.f32 0.0\n"
    "  hal.buffer.store.f32 %b, %off, %fz\n  return %v\n"
    "^sf64:\n  %dz = const.f64 0.0\n"
    "  hal.buffer.store.f64 %b, %off, %dz\n  return %v\n"
    "^l8s:\n  %v = hal.buffer.load.i8.s %b, %off\n  return %v\n"
    "^l16s:\n  %v = hal.buffer.load.i16.s %b, %off\n  return %v\n"
    "}\n"
    /* Access to buffers of memory types |m| and usage |u|. */
    "func @perm(%m: i32, %u: i32, %store: i32) -> i32 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %m, %u, %c16\n"
    "  cond_br %store, ^st, ^ld\n"
    "^st:\n"
    "  hal.buffer.store.i32 %b, %z, %one32\n"
    "  return %one32\n"
    "^ld:\n"
    "  %x = hal.buffer.load.i32 %b, %z\n"
    "  return %x\n"
    "}\n";

START_TEST(load_store_widths_and_extension) {
  EXPECT_RESULTS(access_text, "i8", ARGS(I32(0x1ff)), WANT(I32(-1), I32(255)));
  EXPECT_RESULTS(access_text, "i8", ARGS(I32(0x7f)), WANT(I32(127), I32(127)));
  EXPECT_RESULTS(access_text, "i8", ARGS(I32(0x80)), WANT(I32(-128), I32(128)));
  EXPECT_RESULTS(access_text, "i16", ARGS(I32(0x18001)),
                 WANT(I32(-32767), I32(32769), I32(0x01), I32(0x80)));
  EXPECT_RESULTS(access_text, "i16", ARGS(I32(0x7ffe)),
                 WANT(I32(32766), I32(32766), I32(0xfe), I32(0x7f)));
  EXPECT_RESULTS(access_text, "i32", ARGS(I32(0x80000001u)),
                 WANT(I32(0x80000001u), I32(0x01), I32(0x80), I32(0)));
  EXPECT_RESULTS(access_text, "i64", ARGS(I64(0x8877665544332211ull)),
                 WANT(I64(0x8877665544332211ull), I32(0x44332211),
                      I32(0x88776655u)));
  EXPECT_RESULTS(access_text, "f32", ARGS(F32(-1.5)),
                 WANT(F32(-1.5), I32(0xbfc00000u)));
  EXPECT_RESULTS(access_text, "f64", ARGS(F64(0.1)),
                 WANT(F64(0.1), I64(0x3fb999999999999aull)));
}
END_TEST

START_TEST(load_store_bounds) {
  static const struct {
    int width;
    const char *op;
    unsigned size;
  } k[] = {{0, "load", 1},  {1, "load", 2},  {2, "load", 4},  {3, "load", 8},
           {4, "store", 1}, {5, "store", 2}, {6, "store", 4}, {7, "store", 8},
           {8, "load", 4},  {9, "load", 8},  {10, "store", 4}, {11, "store", 8},
           {12, "load", 1}, {13, "load", 2}};
  for (size_t i = 0; i < COUNT_OF(k); ++i) {
    /* The last in-range offset works. */
    EXPECT_I32(access_text, "oob", 0, I32(k[i].width), I64(8 - k[i].size));
    char want[128];
    snprintf(want, sizeof want,
             "%s of %u bytes at offset %u is outside the buffer of 8 bytes",
             k[i].op, k[i].size, 9 - k[i].size);
    EXPECT_ERROR(access_text, "oob", HALI_STATUS_OUT_OF_RANGE, want,
                 I32(k[i].width), I64(9 - k[i].size));
    snprintf(want, sizeof want,
             "%s of %u bytes at offset -1 is outside the buffer of 8 bytes",
             k[i].op, k[i].size);
    EXPECT_ERROR(access_text, "oob", HALI_STATUS_OUT_OF_RANGE, want,
                 I32(k[i].width), I64(-1));
  }
  /* Offsets near 2^63 do not wrap around. */
  EXPECT_ERROR(access_text, "oob", HALI_STATUS_OUT_OF_RANGE,
               "at offset 9223372036854775807 is outside", I32(7),
               I64(INT64_MAX));
  EXPECT_ERROR(access_text, "oob", HALI_STATUS_OUT_OF_RANGE,
               "at offset -9223372036854775808 is outside", I32(2),
               I64(INT64_MIN));
}
END_TEST

START_TEST(load_store_memory_types_and_usage) {
  EXPECT_I32(access_text, "perm", 0, I32(2), I32(4), I32(0));
  EXPECT_I32(access_text, "perm", 1, I32(2), I32(4), I32(1));
  /* Device-local only: not host-visible. */
  EXPECT_ERROR(access_text, "perm", HALI_STATUS_PERMISSION_DENIED,
               "load: buffer is not host-visible", I32(1), I32(7), I32(0));
  EXPECT_ERROR(access_text, "perm", HALI_STATUS_PERMISSION_DENIED,
               "store: buffer is not host-visible", I32(17), I32(7), I32(1));
  /* Host-visible, but no mapping usage. */
  EXPECT_ERROR(access_text, "perm", HALI_STATUS_PERMISSION_DENIED,
               "load: buffer lacks mapping usage", I32(3), I32(3), I32(0));
  EXPECT_ERROR(access_text, "perm", HALI_STATUS_PERMISSION_DENIED,
               "store: buffer lacks mapping usage", I32(3), I32(1), I32(1));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Constant data (rodata). */

static const char rodata_text[] =
    "rodata @w = f32[1.0, 2.0, bits(0x7fc00001)]\n"
    "rodata @bytes = bytes \"AB\\x00\\xff\"\n"
    "rodata @i8s = i8[-1, 127, 0x80]\n"
    "rodata @i16s = i16[-2, 0x1234]\n"
    "rodata @i32s = i32[-3, 0x7fffffff]\n"
    "rodata @i64s = i64[-4, 0x123456789abcdef0]\n"
    "rodata @f64s = f64[0.5, -inf]\n"
    "rodata @empty = i32[]\n"
    "func @values() -> (i64, f32, i32, i32, i32, i32, i64, i64) {\n"
    "  %z = const.i64 0\n"
    "  %one = const.i64 1\n"
    "  %two = const.i64 2\n"
    "  %three = const.i64 3\n"
    "  %four = const.i64 4\n"
    "  %eight = const.i64 8\n"
    "  %w = hal.buffer.constant @w\n"
    "  %wlen = hal.buffer.length %w\n"
    "  %w1 = hal.buffer.load.f32 %w, %four\n"
    "  %nanbits = hal.buffer.load.i32 %w, %eight\n"
    "  %by = hal.buffer.constant @bytes\n"
    "  %b3 = hal.buffer.load.i8.u %by, %three\n"
    "  %b0 = hal.buffer.load.i8.u %by, %z\n"
    "  %b0 = add.i32 %b0, %b3\n" /* 'A' + 0xff */
    "  %i8s = hal.buffer.constant @i8s\n"
    "  %i8a = hal.buffer.load.i8.s %i8s, %two\n"
    "  %i16s = hal.buffer.constant @i16s\n"
    "  %i16a = hal.buffer.load.i16.s %i16s, %z\n"
    "  %i32s = hal.buffer.constant @i32s\n"
    "  %i32a = hal.buffer.load.i32 %i32s, %four\n"
    "  %i64s = hal.buffer.constant @i64s\n"
    "  %i64a = hal.buffer.load.i64 %i64s, %eight\n"
    "  %f64s = hal.buffer.constant @f64s\n"
    "  %f64a = hal.buffer.load.i64 %f64s, %eight\n"
    "  %e = hal.buffer.constant @empty\n"
    "  %elen = hal.buffer.length %e\n"
    "  %wlen = add.i64 %wlen, %elen\n"
    "  return %wlen, %w1, %nanbits, %b0, %i8a, %i16a, %i64a, %f64a\n"
    "}\n"
    /* What a rodata buffer is: memory types and usage. */
    "func @assert_const() -> i32 {\n"
    "  %w = hal.buffer.constant @w\n"
    "  %n = const.i64 12\n"
    "  %mt = const.i32 19\n"
    "  %us = const.i32 15\n"
    "  hal.buffer.assert %w, %n, %mt, %us, \"rodata\"\n"
    "  %ok = const.i32 1\n"
    "  return %ok\n"
    "}\n"
    "func @store_const() {\n"
    "  %w = hal.buffer.constant @w\n"
    "  %z = const.i64 0\n"
    "  %four = const.i64 4\n"
    "  %s = hal.buffer.subspan %w, %four, %four\n"
    "  %x = const.i32 7\n"
    "  hal.buffer.store.i32 %s, %z, %x\n"
    "  return\n"
    "}\n"
    "func @fill_const() {\n"
    "  %device = hal.device.get\n"
    "  %w = hal.buffer.constant @w\n"
    "  %z = const.i64 0\n"
    "  %four = const.i64 4\n"
    "  %one = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %one, %one\n"
    "  hal.command_buffer.fill %cmd, %w, %z, %four, %one, %one\n"
    "  return\n"
    "}\n"
    /* A view over rodata outlives the invocation and the module. */
    "func @view_const() -> !hal.buffer_view {\n"
    "  %w = hal.buffer.constant @w\n"
    "  %z = const.i64 0\n"
    "  %two = const.i64 2\n"
    "  %eight = const.i64 8\n"
    "  %s = hal.buffer.subspan %w, %z, %eight\n"
    "  %f32 = const.i32 0x21000020\n"
    "  %dense = const.i32 1\n"
    "  %v = hal.buffer_view.create %s, %f32, %dense, [%two]\n"
    "  return %v\n"
    "}\n";

START_TEST(buffer_constant_rodata) {
  EXPECT_RESULTS(rodata_text, "values", NO_ARGS,
                 WANT(I64(12), F32(2.0), I32(0x7fc00001), I32('A' + 0xff),
                      I32(-128), I32(-2), I64(0x123456789abcdef0ull),
                      I64(0xfff0000000000000ull)));
  EXPECT_I32_NOARGS(rodata_text, "assert_const", 1);
  EXPECT_ERROR_NOARGS(rodata_text, "store_const", HALI_STATUS_PERMISSION_DENIED,
                      "read-only (module constant data)");
  EXPECT_ERROR_NOARGS(rodata_text, "fill_const", HALI_STATUS_PERMISSION_DENIED,
                      "read-only (module constant data)");
  hali_value_t v = {0};
  ck_assert_ok(run_hal(rodata_text, "view_const", NO_ARGS, &v, 1));
  EXPECT_VIEW_BYTES(&v, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Subspans and buffer.assert. */

static const char subspan_text[] =
    "func @subspan(%off: i64, %len: i64) -> (i64, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %s = hal.buffer.subspan %b, %off, %len\n"
    "  %slen = hal.buffer.length %s\n"
    /* A subspan of the subspan, one byte in: writes land in %b. */
    "  %one = const.i64 1\n"
    "  %rest = sub.i64 %slen, %one\n"
    "  %ss = hal.buffer.subspan %s, %one, %rest\n"
    "  %v = const.i32 0x5a\n"
    "  hal.buffer.store.i8 %ss, %z, %v\n"
    "  %where = add.i64 %off, %one\n"
    "  %x = hal.buffer.load.i8.u %b, %where\n"
    "  return %slen, %x\n"
    "}\n"
    "func @store_sub(%off: i64) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %four = const.i64 4\n"
    "  %s = hal.buffer.subspan %b, %four, %four\n"
    "  hal.buffer.store.i32 %s, %off, %one32\n"
    "  return\n"
    "}\n"
    "func @check(%size: i64, %min: i64, %mt: i32, %us: i32) -> i32 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %size\n"
    "  hal.buffer.assert %b, %min, %mt, %us, \"input 0\"\n"
    "  return %one32\n"
    "}\n";

START_TEST(buffer_subspan_and_length) {
  EXPECT_RESULTS(subspan_text, "subspan", ARGS(I64(4), I64(8)),
                 WANT(I64(8), I32(0x5a)));
  EXPECT_RESULTS(subspan_text, "subspan", ARGS(I64(0), I64(16)),
                 WANT(I64(16), I32(0x5a)));
  EXPECT_RESULTS(subspan_text, "subspan", ARGS(I64(14), I64(2)),
                 WANT(I64(2), I32(0x5a)));
  EXPECT_ERROR(subspan_text, "subspan", HALI_STATUS_OUT_OF_RANGE,
               "subspan: range [offset 12, length 8] exceeds the buffer "
               "length 16",
               I64(12), I64(8));
  EXPECT_ERROR(subspan_text, "subspan", HALI_STATUS_OUT_OF_RANGE,
               "subspan offset -1 is negative", I64(-1), I64(4));
  EXPECT_ERROR(subspan_text, "subspan", HALI_STATUS_OUT_OF_RANGE,
               "subspan length -2 is negative", I64(0), I64(-2));
  /* Accesses through a subspan are bounded by the subspan. */
  EXPECT_ERROR(subspan_text, "store_sub", HALI_STATUS_OUT_OF_RANGE,
               "store of 4 bytes at offset 1 is outside the buffer of 4 bytes",
               I64(1));
}
END_TEST

START_TEST(buffer_assert_conditions) {
  EXPECT_I32(subspan_text, "check", 1, I64(16), I64(16), I32(19), I32(7));
  EXPECT_I32(subspan_text, "check", 1, I64(16), I64(0), I32(0), I32(0));
  EXPECT_I32(subspan_text, "check", 1, I64(16), I64(3), I32(2), I32(4));
  EXPECT_ERROR(subspan_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "input 0: buffer has 16 bytes, expected at least 17", I64(16),
               I64(17), I32(19), I32(7));
  EXPECT_ERROR(subspan_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "input 0: buffer has 16 bytes, expected at least -1", I64(16),
               I64(-1), I32(0), I32(0));
  EXPECT_ERROR(subspan_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "input 0: buffer memory types DEVICE_LOCAL|HOST_VISIBLE|"
               "DEVICE_VISIBLE lack the expected TRANSIENT",
               I64(16), I64(16), I32(32), I32(0));
  EXPECT_ERROR(subspan_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "input 0: buffer usage TRANSFER|DISPATCH|MAPPING lacks the "
               "expected CONSTANT",
               I64(16), I64(16), I32(19), I32(8));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Buffer views. */

static const char view_text[] =
    "func @view(%d0: i64, %d1: i64, %k: i32) -> (i32, i64, i32, i64) {\n"
    PRELUDE
    "  %n = const.i64 24\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %n\n"
    "  %et = const.i32 0x10000020\n"
    "  %v = hal.buffer_view.create %b, %et, %one32, [%d0, %d1]\n"
    "  %rank = hal.buffer_view.rank %v\n"
    "  %dim = hal.buffer_view.dim %v, %k\n"
    "  %type = hal.buffer_view.element_type %v\n"
    "  %vb = hal.buffer_view.buffer %v\n"
    "  %len = hal.buffer.length %vb\n"
    /* The view's buffer is %b itself. */
    "  %x = const.i64 77\n"
    "  hal.buffer.store.i64 %vb, %c16, %x\n"
    "  %y = hal.buffer.load.i64 %b, %c16\n"
    "  %len = add.i64 %len, %y\n"
    "  return %rank, %dim, %type, %len\n"
    "}\n"
    "func @scalar_view(%k: i32) -> (i32, i64) {\n" PRELUDE
    "  %four = const.i64 4\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %four\n"
    "  %et = const.i32 0x21000020\n"
    "  %v = hal.buffer_view.create %b, %et, %one32, []\n"
    "  %rank = hal.buffer_view.rank %v\n"
    "  %dim = hal.buffer_view.dim %v, %k\n"
    "  return %rank, %dim\n"
    "}\n"
    "func @make(%et: i32, %enc: i32, %d0: i64) -> i32 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %v = hal.buffer_view.create %b, %et, %enc, [%d0]\n"
    "  %rank = hal.buffer_view.rank %v\n"
    "  return %rank\n"
    "}\n"
    "func @check(%d0: i64, %d1: i64, %et: i32, %enc: i32) -> i32 {\n" PRELUDE
    "  %n = const.i64 24\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %n\n"
    "  %i32 = const.i32 0x10000020\n"
    "  %two = const.i64 2\n"
    "  %three = const.i64 3\n"
    "  %v = hal.buffer_view.create %b, %i32, %one32, [%two, %three]\n"
    "  hal.buffer_view.assert %v, %et, %enc, \"tensor x\", [%d0, %d1]\n"
    "  return %one32\n"
    "}\n"
    "func @check_rank1(%d0: i64) -> i32 {\n" PRELUDE
    "  %n = const.i64 24\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %n\n"
    "  %i32 = const.i32 0x10000020\n"
    "  %two = const.i64 2\n"
    "  %three = const.i64 3\n"
    "  %v = hal.buffer_view.create %b, %i32, %one32, [%two, %three]\n"
    "  hal.buffer_view.assert %v, %i32, %one32, \"rank\", [%d0]\n"
    "  return %one32\n"
    "}\n";

START_TEST(buffer_view_create_and_query) {
  EXPECT_RESULTS(view_text, "view", ARGS(I64(2), I64(3), I32(0)),
                 WANT(I32(2), I64(2), I32(0x10000020), I64(24 + 77)));
  EXPECT_RESULTS(view_text, "view", ARGS(I64(2), I64(3), I32(1)),
                 WANT(I32(2), I64(3), I32(0x10000020), I64(24 + 77)));
  EXPECT_RESULTS(view_text, "view", ARGS(I64(1), I64(3), I32(1)),
                 WANT(I32(2), I64(3), I32(0x10000020), I64(24 + 77)));
  EXPECT_RESULTS(view_text, "view", ARGS(I64(0), I64(3), I32(0)),
                 WANT(I32(2), I64(0), I32(0x10000020), I64(24 + 77)));
  EXPECT_ERROR(view_text, "view", HALI_STATUS_OUT_OF_RANGE,
               "dimension 2 of a rank-2 view", I64(2), I64(3), I32(2));
  EXPECT_ERROR(view_text, "view", HALI_STATUS_OUT_OF_RANGE,
               "dimension -1 of a rank-2 view", I64(2), I64(3), I32(-1));
  EXPECT_ERROR(view_text, "view", HALI_STATUS_OUT_OF_RANGE,
               "buffer view needs 36 bytes but the buffer has 24", I64(3),
               I64(3), I32(0));
  EXPECT_ERROR(view_text, "view", HALI_STATUS_INVALID_ARGUMENT,
               "dim 0 is negative (-1)", I64(-1), I64(3), I32(0));
  EXPECT_ERROR(view_text, "view", HALI_STATUS_OUT_OF_RANGE,
               "element count overflows 64 bits at dim 1", I64(INT64_MAX),
               I64(4), I32(0));
}
END_TEST

START_TEST(buffer_view_rank0_and_bad_types) {
  EXPECT_ERROR(view_text, "scalar_view", HALI_STATUS_OUT_OF_RANGE,
               "dimension 0 of a rank-0 view", I32(0));
  EXPECT_I32(view_text, "make", 1, I32(0x10000008), I32(1), I64(16));
  EXPECT_I32(view_text, "make", 1, I32(0x22000010), I32(1), I64(8));
  EXPECT_ERROR(view_text, "make", HALI_STATUS_INVALID_ARGUMENT,
               "unknown element type 0x10000003", I32(0x10000003), I32(1),
               I64(1));
  EXPECT_ERROR(view_text, "make", HALI_STATUS_INVALID_ARGUMENT,
               "unsupported encoding type 0", I32(0x10000008), I32(0),
               I64(1));
}
END_TEST

START_TEST(buffer_view_assert_messages) {
  EXPECT_I32(view_text, "check", 1, I64(2), I64(3), I32(0x10000020), I32(1));
  EXPECT_ERROR(view_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "tensor x: view is 2x3xi32, expected 3x2xi32", I64(3), I64(2),
               I32(0x10000020), I32(1));
  EXPECT_ERROR(view_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "tensor x: view is 2x3xi32, expected 2x3xf32", I64(2), I64(3),
               I32(0x21000020), I32(1));
  EXPECT_ERROR(view_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "tensor x: view is 2x3xi32, expected 2x3xi32 (encoding "
               "differs)",
               I64(2), I64(3), I32(0x10000020), I32(0));
  EXPECT_ERROR(view_text, "check", HALI_STATUS_INVALID_ARGUMENT,
               "tensor x: view is 2x3xi32, expected 2x3x<type 0x00000099>",
               I64(2), I64(3), I32(0x99), I32(1));
  EXPECT_ERROR(view_text, "check_rank1", HALI_STATUS_INVALID_ARGUMENT,
               "rank: view is 2x3xi32, expected 6xi32", I64(6));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Command buffers: fill, copy, update. */

static const char transfer_text[] =
    "rodata @seq = i8[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n"
    /* Fill all 16 bytes with 0xaa, then [off, off + len) with the pattern. */
    "func @fill(%off: i64, %len: i64, %pattern: i32, %size: i32) -> "
    "!hal.buffer_view {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  %aa = const.i32 0xaa\n"
    "  hal.command_buffer.fill %cmd, %b, %z, %c16, %aa, %one32\n"
    "  hal.command_buffer.execution_barrier %cmd\n"
    "  hal.command_buffer.fill %cmd, %b, %off, %len, %pattern, %size\n"
    SUBMIT VIEW16
    "}\n"
    "func @fill_usage(%u: i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %u, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  hal.command_buffer.fill %cmd, %b, %z, %c16, %one32, %one32\n"
    "  return\n"
    "}\n"
    /* Recording into a dispatch-only command buffer, or after finalize. */
    "func @fill_category(%cat: i32, %finalized: i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %cat\n"
    "  cond_br %finalized, ^fin, ^rec\n"
    "^fin:\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  br ^rec\n"
    "^rec:\n"
    "  hal.command_buffer.fill %cmd, %b, %z, %c16, %one32, %one32\n"
    "  return\n"
    "}\n"
    "func @create(%mode: i32, %cat: i32) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %cmd = hal.command_buffer.create %device, %mode, %cat\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %one = const.i32 1\n"
    "  return %one\n"
    "}\n"
    "func @finalize_twice() {\n"
    "  %device = hal.device.get\n"
    "  %one = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %one, %one\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  return\n"
    "}\n"
    "func @barrier_after_finalize() {\n"
    "  %device = hal.device.get\n"
    "  %one = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %one, %one\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  hal.command_buffer.execution_barrier %cmd\n"
    "  return\n"
    "}\n"
    /* %a = seq (by update), then copy [so, so + len) of %a to %to of the
     * other buffer (same == 0), of %a itself (same == 1) or of a subspan
     * of %a starting at 4 (same == 2); returns the target's bytes. */
    "func @copy(%so: i64, %to: i64, %len: i64, %same: i32) -> "
    "!hal.buffer_view {\n" PRELUDE
    "  %a = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  hal.command_buffer.update %cmd, @seq, %z, %a, %z, %c16\n"
    "  hal.command_buffer.execution_barrier %cmd\n"
    "  %two32 = const.i32 2\n"
    "  switch %same, ^other, [^other, ^self, ^sub]\n"
    "^other:\n"
    "  hal.command_buffer.copy %cmd, %a, %so, %b, %to, %len\n"
    "  br ^go\n"
    "^self:\n"
    "  hal.command_buffer.copy %cmd, %a, %so, %a, %to, %len\n"
    "  %b = hal.buffer.subspan %a, %z, %c16\n"
    "  br ^go\n"
    "^sub:\n"
    "  %four = const.i64 4\n"
    "  %twelve = const.i64 12\n"
    "  %s = hal.buffer.subspan %a, %four, %twelve\n"
    "  hal.command_buffer.copy %cmd, %a, %so, %s, %to, %len\n"
    "  %b = hal.buffer.subspan %a, %z, %c16\n"
    "  br ^go\n"
    "^go:\n" SUBMIT VIEW16
    "}\n"
    "func @update(%so: i64, %to: i64, %len: i64) -> !hal.buffer_view {\n"
    PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  hal.command_buffer.update %cmd, @seq, %so, %b, %to, %len\n" SUBMIT
    VIEW16 "}\n"
    "func @update_const() {\n" PRELUDE
    "  %w = hal.buffer.constant @seq\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  %four = const.i64 4\n"
    "  hal.command_buffer.update %cmd, @seq, %z, %w, %z, %four\n"
    "  return\n"
    "}\n"
    "func @copy_into_const() {\n" PRELUDE
    "  %w = hal.buffer.constant @seq\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  %four = const.i64 4\n"
    "  hal.command_buffer.copy %cmd, %b, %z, %w, %z, %four\n"
    "  return\n"
    "}\n"
    /* Copy out of rodata works (and is what update does without a
     * recording copy). */
    "func @copy_from_const() -> !hal.buffer_view {\n" PRELUDE
    "  %w = hal.buffer.constant @seq\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  hal.command_buffer.copy %cmd, %w, %z, %b, %z, %c16\n" SUBMIT VIEW16
    "}\n";

START_TEST(command_buffer_fill_patterns) {
  const uint8_t A = 0xaa;
  hali_value_t v = {0};
  ck_assert_ok(run_hal(transfer_text, "fill",
                       ARGS(I64(3), I64(5), I32(0x11), I32(1)), &v, 1));
  EXPECT_VIEW_BYTES(&v, A, A, A, 0x11, 0x11, 0x11, 0x11, 0x11, A, A, A, A, A,
                    A, A, A);
  ck_assert_ok(run_hal(transfer_text, "fill",
                       ARGS(I64(2), I64(6), I32(0x2211), I32(2)), &v, 1));
  EXPECT_VIEW_BYTES(&v, A, A, 0x11, 0x22, 0x11, 0x22, 0x11, 0x22, A, A, A, A,
                    A, A, A, A);
  ck_assert_ok(run_hal(transfer_text, "fill",
                       ARGS(I64(4), I64(8), I32(0x44332211), I32(4)), &v, 1));
  EXPECT_VIEW_BYTES(&v, A, A, A, A, 0x11, 0x22, 0x33, 0x44, 0x11, 0x22, 0x33,
                    0x44, A, A, A, A);
  /* Only the low pattern bytes count. */
  ck_assert_ok(run_hal(transfer_text, "fill",
                       ARGS(I64(1), I64(1), I32(0x1ff), I32(1)), &v, 1));
  EXPECT_VIEW_BYTES(&v, A, 0xff, A, A, A, A, A, A, A, A, A, A, A, A, A, A);
  ck_assert_ok(run_hal(transfer_text, "fill",
                       ARGS(I64(14), I64(2), I32(0xabcd1234u), I32(2)), &v,
                       1));
  EXPECT_VIEW_BYTES(&v, A, A, A, A, A, A, A, A, A, A, A, A, A, A, 0x34, 0x12);
  /* Zero length: nothing changes. */
  ck_assert_ok(run_hal(transfer_text, "fill",
                       ARGS(I64(4), I64(0), I32(0), I32(4)), &v, 1));
  EXPECT_VIEW_BYTES(&v, A, A, A, A, A, A, A, A, A, A, A, A, A, A, A, A);
}
END_TEST

START_TEST(command_buffer_fill_errors) {
  EXPECT_ERROR(transfer_text, "fill", HALI_STATUS_INVALID_ARGUMENT,
               "fill offset 3 and length 4 must be multiples of the pattern "
               "length 2",
               I64(3), I64(4), I32(0), I32(2));
  EXPECT_ERROR(transfer_text, "fill", HALI_STATUS_INVALID_ARGUMENT,
               "fill offset 4 and length 6 must be multiples of the pattern "
               "length 4",
               I64(4), I64(6), I32(0), I32(4));
  EXPECT_ERROR(transfer_text, "fill", HALI_STATUS_INVALID_ARGUMENT,
               "fill pattern length 3 is not 1, 2 or 4", I64(0), I64(3),
               I32(0), I32(3));
  EXPECT_ERROR(transfer_text, "fill", HALI_STATUS_OUT_OF_RANGE,
               "fill target: range [offset 12, length 8] exceeds the buffer "
               "length 16",
               I64(12), I64(8), I32(0), I32(4));
  EXPECT_ERROR(transfer_text, "fill", HALI_STATUS_OUT_OF_RANGE,
               "fill offset -4 is negative", I64(-4), I64(4), I32(0), I32(4));
  EXPECT_ERROR(transfer_text, "fill", HALI_STATUS_OUT_OF_RANGE,
               "fill length -1 is negative", I64(0), I64(-1), I32(0), I32(1));
  EXPECT_ERROR(transfer_text, "fill_usage", HALI_STATUS_PERMISSION_DENIED,
               "fill target: buffer usage DISPATCH|MAPPING lacks the required "
               "TRANSFER usage",
               I32(6));
  EXPECT_ERROR(transfer_text, "fill_category", HALI_STATUS_PERMISSION_DENIED,
               "cannot record fill in a command buffer without the TRANSFER "
               "category",
               I32(2), I32(0));
  EXPECT_ERROR(transfer_text, "fill_category", HALI_STATUS_FAILED_PRECONDITION,
               "cannot record fill: the command buffer is finalized", I32(1),
               I32(1));
}
END_TEST

START_TEST(command_buffer_create_and_finalize) {
  EXPECT_I32(transfer_text, "create", 1, I32(0), I32(1));
  EXPECT_I32(transfer_text, "create", 1, I32(1), I32(3));
  EXPECT_ERROR(transfer_text, "create", HALI_STATUS_INVALID_ARGUMENT,
               "unknown command buffer mode bits 0x4", I32(4), I32(1));
  EXPECT_ERROR(transfer_text, "create", HALI_STATUS_INVALID_ARGUMENT,
               "invalid command categories 0x0", I32(1), I32(0));
  EXPECT_ERROR(transfer_text, "create", HALI_STATUS_INVALID_ARGUMENT,
               "invalid command categories 0x4", I32(1), I32(4));
  EXPECT_ERROR_NOARGS(transfer_text, "finalize_twice",
                      HALI_STATUS_FAILED_PRECONDITION,
                      "command buffer is already finalized");
  EXPECT_ERROR_NOARGS(transfer_text, "barrier_after_finalize",
                      HALI_STATUS_FAILED_PRECONDITION,
                      "cannot record execution_barrier: the command buffer "
                      "is finalized");
}
END_TEST

START_TEST(command_buffer_copy) {
  hali_value_t v = {0};
  ck_assert_ok(run_hal(transfer_text, "copy",
                       ARGS(I64(2), I64(5), I64(4), I32(0)), &v, 1));
  EXPECT_VIEW_BYTES(&v, 0, 0, 0, 0, 0, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0);
  /* Adjacent ranges of one buffer do not overlap. */
  ck_assert_ok(run_hal(transfer_text, "copy",
                       ARGS(I64(0), I64(8), I64(8), I32(1)), &v, 1));
  EXPECT_VIEW_BYTES(&v, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  /* Subspan offsets are absolute: [0, 4) -> [4 + 4, 4 + 8). */
  ck_assert_ok(run_hal(transfer_text, "copy",
                       ARGS(I64(0), I64(4), I64(4), I32(2)), &v, 1));
  EXPECT_VIEW_BYTES(&v, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15);
  ck_assert_ok(run_hal(transfer_text, "copy_from_const", NO_ARGS, &v, 1));
  EXPECT_VIEW_BYTES(&v, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  EXPECT_ERROR(transfer_text, "copy", HALI_STATUS_INVALID_ARGUMENT,
               "copy source [0, 8) and target [4, 12) overlap in the same "
               "allocation",
               I64(0), I64(4), I64(8), I32(1));
  /* Through a subspan: target offset 0 of the subspan is byte 4. */
  EXPECT_ERROR(transfer_text, "copy", HALI_STATUS_INVALID_ARGUMENT,
               "copy source [2, 8) and target [4, 10) overlap in the same "
               "allocation",
               I64(2), I64(0), I64(6), I32(2));
  EXPECT_ERROR(transfer_text, "copy", HALI_STATUS_OUT_OF_RANGE,
               "copy source: range [offset 10, length 8] exceeds the buffer "
               "length 16",
               I64(10), I64(0), I64(8), I32(0));
  EXPECT_ERROR(transfer_text, "copy", HALI_STATUS_OUT_OF_RANGE,
               "copy target: range [offset 9, length 8] exceeds the buffer "
               "length 16",
               I64(0), I64(9), I64(8), I32(0));
  EXPECT_ERROR(transfer_text, "copy", HALI_STATUS_OUT_OF_RANGE,
               "copy source offset -1 is negative", I64(-1), I64(0), I64(1),
               I32(0));
  EXPECT_ERROR(transfer_text, "copy", HALI_STATUS_OUT_OF_RANGE,
               "copy target offset -2 is negative", I64(0), I64(-2), I64(1),
               I32(0));
  EXPECT_ERROR(transfer_text, "copy", HALI_STATUS_OUT_OF_RANGE,
               "copy length -3 is negative", I64(0), I64(0), I64(-3), I32(0));
  EXPECT_ERROR_NOARGS(transfer_text, "copy_into_const",
                      HALI_STATUS_PERMISSION_DENIED,
                      "read-only (module constant data)");
}
END_TEST

START_TEST(command_buffer_update_from_rodata) {
  hali_value_t v = {0};
  ck_assert_ok(
      run_hal(transfer_text, "update", ARGS(I64(4), I64(2), I64(3)), &v, 1));
  EXPECT_VIEW_BYTES(&v, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  ck_assert_ok(
      run_hal(transfer_text, "update", ARGS(I64(8), I64(8), I64(8)), &v, 1));
  EXPECT_VIEW_BYTES(&v, 0, 0, 0, 0, 0, 0, 0, 0, 8, 9, 10, 11, 12, 13, 14, 15);
  EXPECT_ERROR(transfer_text, "update", HALI_STATUS_OUT_OF_RANGE,
               "update reads [10, 10 + 8) of rodata @seq which has 16 bytes",
               I64(10), I64(0), I64(8));
  EXPECT_ERROR(transfer_text, "update", HALI_STATUS_OUT_OF_RANGE,
               "update target: range [offset 12, length 8] exceeds the "
               "buffer length 16",
               I64(0), I64(12), I64(8));
  EXPECT_ERROR(transfer_text, "update", HALI_STATUS_OUT_OF_RANGE,
               "update source offset -1 is negative", I64(-1), I64(0), I64(1));
  EXPECT_ERROR(transfer_text, "update", HALI_STATUS_OUT_OF_RANGE,
               "update target offset -1 is negative", I64(0), I64(-1), I64(1));
  EXPECT_ERROR(transfer_text, "update", HALI_STATUS_OUT_OF_RANGE,
               "update length -1 is negative", I64(0), I64(0), I64(-1));
  EXPECT_ERROR_NOARGS(transfer_text, "update_const",
                      HALI_STATUS_PERMISSION_DENIED,
                      "read-only (module constant data)");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Dispatch: a bytecode saxpy kernel declared in the module. */

/* The bytecode kernel both dispatch programs below run: out = a * x + y
 * over 4 elements a workgroup. */
#define SAXPY_KERNEL \
  "func @saxpy_kernel(%a: f32, %x: !hal.buffer, %y: !hal.buffer, %n: i32, " \
  "%out: !hal.buffer, %wg_x: i32, %wg_y: i32, %wg_z: i32, %count_x: i32, " \
  "%count_y: i32, %count_z: i32) {\n" \
  "^entry:\n" \
  "  %k4 = const.i32 4\n" \
  "  %begin = mul.i32 %wg_x, %k4\n" \
  "  %end = add.i32 %begin, %k4\n" \
  "  %end = min.s.i32 %end, %n\n" \
  "  %i = ext.s.i32.i64 %begin\n" \
  "  %stop = ext.s.i32.i64 %end\n" \
  "  %four = const.i64 4\n" \
  "  %one = const.i64 1\n" \
  "  %empty = ge.s.i64 %i, %stop\n" \
  "  cond_br %empty, ^done, ^loop\n" \
  "^loop:\n" \
  "  %offset = mul.i64 %i, %four\n" \
  "  %xi = hal.buffer.load.f32 %x, %offset\n" \
  "  %yi = hal.buffer.load.f32 %y, %offset\n" \
  "  %r = mul.f32 %a, %xi\n" \
  "  %r = add.f32 %r, %yi\n" \
  "  hal.buffer.store.f32 %out, %offset, %r\n" \
  "  %i = add.i64 %i, %one\n" \
  "  %more = lt.s.i64 %i, %stop\n" \
  "  cond_br %more, ^loop, ^done\n" \
  "^done:\n" \
  "  return\n" \
  "}\n"

static const char dispatch_text[] =
    "executable @k format \"bytecode\" {\n"
    "  export @saxpy(f32, tensor<?xf32>, tensor<?xf32>, i32) -> "
    "(tensor<?xf32>) function @saxpy_kernel workgroup_size [4, 1, 1]\n"
    "}\n"
    "rodata @x = f32[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]\n"
    "rodata @y = f32[10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, "
    "100.0]\n"
    /* out = a * x + y over n elements (pushed as |n|) in |groups|
     * workgroups of export |ordinal|; returns the await status and out. */
    "func @saxpy(%a: f32, %n: i32, %groups: i32, %ordinal: i32) -> "
    "(i32, !hal.buffer_view) {\n" PRELUDE
    "  %bytes = const.i64 40\n"
    "  %out = hal.allocator.allocate %allocator, %mem, %use, %bytes\n"
    "  %x = hal.buffer.constant @x\n"
    "  %y = hal.buffer.constant @y\n"
    "  %two32 = const.i32 2\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %two32\n"
    "  %abits = bitcast.f32.i32 %a\n"
    "  hal.command_buffer.push_constants %cmd, %zero32, [%abits, %n]\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %x, %z, %bytes\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %one32, %y, %z, %bytes\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %two32, %out, %z, "
    "%bytes\n"
    "  %exe = hal.executable.get @k\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %ordinal, %groups, %one32, "
    "%one32\n"
    "  hal.command_buffer.execution_barrier %cmd\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %wait = hal.fence.null\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  %forever = const.i64 -1\n"
    "  %st = hal.fence.await_status %done, %forever\n"
    "  %f32 = const.i32 0x21000020\n"
    "  %ten = const.i64 10\n"
    "  %view = hal.buffer_view.create %out, %f32, %one32, [%ten]\n"
    "  return %st, %view\n"
    "}\n"
    /* Recording errors: |what| selects the mistake. */
    "func @bad(%what: i32, %v: i32) {\n" PRELUDE
    "  %bytes = const.i64 40\n"
    "  %out = hal.allocator.allocate %allocator, %mem, %use, %bytes\n"
    "  %five = const.i32 5\n"
    "  %nodispatch = hal.allocator.allocate %allocator, %mem, %five, %bytes\n"
    "  %two32 = const.i32 2\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %two32\n"
    "  %exe = hal.executable.get @k\n"
    "  switch %what, ^nopush, [^nopush, ^offset, ^toomany, ^ordinal, "
    "^usage, ^range, ^nobind, ^category, ^boffset, ^blength]\n"
    "^nopush:\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %one32, %one32, "
    "%one32\n"
    "  return\n"
    "^offset:\n"
    "  hal.command_buffer.push_constants %cmd, %v, [%one32]\n"
    "  return\n"
    "^toomany:\n"
    "  hal.command_buffer.push_constants %cmd, %v, [%one32, %one32]\n"
    "  return\n"
    "^ordinal:\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %v, %one32, %one32, %one32\n"
    "  return\n"
    "^usage:\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %nodispatch, "
    "%z, %bytes\n"
    "  return\n"
    "^range:\n"
    "  %len = ext.s.i32.i64 %v\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %out, %z, "
    "%len\n"
    "  return\n"
    "^nobind:\n"
    "  hal.command_buffer.push_constants %cmd, %zero32, [%one32, %one32]\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %one32, %one32, "
    "%one32\n"
    "  return\n"
    "^category:\n"
    "  %xfer = hal.command_buffer.create %device, %one32, %one32\n"
    "  hal.command_buffer.push_constants %xfer, %zero32, [%one32]\n"
    "  return\n"
    "^boffset:\n"
    "  %off = ext.s.i32.i64 %v\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %out, %off, "
    "%bytes\n"
    "  return\n"
    "^blength:\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %v, %out, %z, %bytes\n"
    "  return\n"
    "}\n"
    SAXPY_KERNEL;

/* The expected saxpy output bytes: a * i + 10 * (i + 1) for i < computed,
 * 0 after. */
static void expect_saxpy(hali_value_t *v, float a, int computed) {
  uint8_t want[40] = {0};
  for (int i = 0; i < computed; ++i) {
    float f = a * (float)i + 10.0f * (float)(i + 1);
    memcpy(want + 4 * i, &f, 4);
  }
  expect_view_bytes(__FILE__, __LINE__, v, want, sizeof want);
}

/* Binding tables (format 1.6): saxpy recorded once on slot placeholders,
 * with |a| a constant slot and a fill whose pattern is another, run
 * through a bound command buffer that gives the slots real buffers (the
 * fill's target a subspan at a run-time offset). */
static const char slots_text[] =
    "executable @k format \"bytecode\" {\n"
    "  export @saxpy(f32, tensor<?xf32>, tensor<?xf32>, i32) -> "
    "(tensor<?xf32>) function @saxpy_kernel workgroup_size [4, 1, 1]\n"
    "}\n"
    "rodata @x = f32[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]\n"
    "rodata @y = f32[10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, "
    "100.0]\n"
    "func @slots(%a: f32, %at: i64, %pattern: i32, %entries: i32, "
    "%cslot: i32) -> (i32, !hal.buffer_view, !hal.buffer_view) {\n" PRELUDE
    "  %bytes = const.i64 40\n"
    "  %eight = const.i64 8\n"
    "  %two32 = const.i32 2\n"
    "  %three32 = const.i32 3\n"
    "  %four32 = const.i32 4\n"
    "  %ten32 = const.i32 10\n"
    "  %s0 = hal.buffer.slot %zero32, %bytes, %mem, %use\n"
    "  %s1 = hal.buffer.slot %one32, %bytes, %mem, %use\n"
    "  %s2 = hal.buffer.slot %two32, %bytes, %mem, %use\n"
    "  %s3 = hal.buffer.slot %three32, %eight, %mem, %use\n"
    "  %cmd = hal.command_buffer.create %device, %zero32, %three32\n"
    "  hal.command_buffer.push_constant_slots %cmd, %zero32, [%cslot]\n"
    "  hal.command_buffer.push_constants %cmd, %one32, [%ten32]\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %s0, %z, %bytes\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %one32, %s1, %z, %bytes\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %two32, %s2, %z, %bytes\n"
    "  %exe = hal.executable.get @k\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %three32, %one32, "
    "%one32\n"
    "  hal.command_buffer.execution_barrier %cmd\n"
    "  hal.command_buffer.fill_slot %cmd, %s3, %z, %eight, %one32, %four32\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %out = hal.allocator.allocate %allocator, %mem, %use, %bytes\n"
    "  %e = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %x = hal.buffer.constant @x\n"
    "  %y = hal.buffer.constant @y\n"
    "  %row = hal.buffer.subspan %e, %at, %eight\n"
    "  %abits = bitcast.f32.i32 %a\n"
    "  cond_br %entries, ^all, ^short\n"
    "^all:\n"
    "  %b = hal.command_buffer.bind %cmd, [%x, %y, %out, %row]\n"
    "  br ^run\n"
    "^short:\n"
    "  %b = hal.command_buffer.bind %cmd, [%x, %y, %out]\n"
    "  br ^run\n"
    "^run:\n"
    "  hal.command_buffer.bind_constants %b, [%abits, %pattern]\n"
    "  %wait = hal.fence.null\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %wait, %done, [%b]\n"
    "  %forever = const.i64 -1\n"
    "  %st = hal.fence.await_status %done, %forever\n"
    "  %f32 = const.i32 0x21000020\n"
    "  %ten = const.i64 10\n"
    "  %view = hal.buffer_view.create %out, %f32, %one32, [%ten]\n"
    "  %i8 = const.i32 0x10000008\n"
    "  %view2 = hal.buffer_view.create %e, %i8, %one32, [%c16]\n"
    "  return %st, %view, %view2\n"
    "}\n"
    "func @bad_slot(%slot: i32) {\n" PRELUDE
    "  %s = hal.buffer.slot %slot, %c16, %mem, %use\n"
    "  return\n"
    "}\n"
    "func @bad_constant_slot(%slot: i32) {\n" PRELUDE
    "  %cmd = hal.command_buffer.create %device, %zero32, %one32\n"
    "  %two32 = const.i32 2\n"
    "  %cmd2 = hal.command_buffer.create %device, %zero32, %two32\n"
    "  hal.command_buffer.push_constant_slots %cmd2, %zero32, [%slot]\n"
    "  return\n"
    "}\n"
    "func @bind_open() {\n" PRELUDE
    "  %cmd = hal.command_buffer.create %device, %zero32, %one32\n"
    "  %b = hal.command_buffer.bind %cmd, []\n"
    "  return\n"
    "}\n"
    SAXPY_KERNEL;

START_TEST(binding_table_ops) {
  for (int k = 0; k < 2; ++k) {
    hali_value_t r[3] = {{0}};
    const float a = k ? -1.5f : 2.0f;
    const int64_t at = k ? 8 : 4;
    const uint32_t pattern = k ? 0x01020304u : 0xa0b0c0d0u;
    ck_assert_ok(run_hal(slots_text, "slots",
                         ARGS(F32(a), I64(at), I32(pattern), I32(1), I32(0)),
                         r, 3));
    ck_assert_int_eq(r[0].i32, 0);
    expect_saxpy(&r[1], a, 10);
    uint8_t want[16] = {0};
    for (int i = 0; i < 8; ++i)
      want[at + i] = (uint8_t)(pattern >> (8 * (i % 4)));
    expect_view_bytes(__FILE__, __LINE__, &r[2], want, sizeof want);
    for (int i = 0; i < 3; ++i) hali_value_release(&r[i]);
  }
  /* A table one entry short, a constant slot past the values bound, a
   * subspan shorter than its slot: refused at submit, naming the slot. */
  EXPECT_ERROR(slots_text, "slots", HALI_STATUS_INVALID_ARGUMENT,
               "uses binding slots 0 .. 3: the binding table has 3 entries",
               F32(1), I64(0), I32(0), I32(0), I32(0));
  EXPECT_ERROR(slots_text, "slots", HALI_STATUS_INVALID_ARGUMENT,
               "uses constant slots 0 .. 2: the binding table has 2 constants",
               F32(1), I64(0), I32(0), I32(1), I32(2));
  EXPECT_ERROR(slots_text, "bad_slot", HALI_STATUS_OUT_OF_RANGE,
               "binding slot -1 is outside [0, 4096)", I32(-1));
  EXPECT_ERROR(slots_text, "bad_constant_slot", HALI_STATUS_OUT_OF_RANGE,
               "constant slot 4096 is outside [0, 4096)", I32(4096));
  EXPECT_ERROR_NOARGS(slots_text, "bind_open", HALI_STATUS_FAILED_PRECONDITION,
                      "it must be a finalized reusable recording");
}
END_TEST

START_TEST(dispatch_bytecode_saxpy) {
  hali_value_t r[2] = {{0}};
  ck_assert_ok(run_hal(dispatch_text, "saxpy",
                       ARGS(F32(2), I32(10), I32(3), I32(0)), r, 2));
  ck_assert_int_eq(r[0].i32, 0);
  expect_saxpy(&r[1], 2.0f, 10);
  /* Two workgroups of 4 compute 8 elements; zero workgroups run nothing. */
  ck_assert_ok(run_hal(dispatch_text, "saxpy",
                       ARGS(F32(-1), I32(10), I32(2), I32(0)), r, 2));
  ck_assert_int_eq(r[0].i32, 0);
  expect_saxpy(&r[1], -1.0f, 8);
  ck_assert_ok(run_hal(dispatch_text, "saxpy",
                       ARGS(F32(3), I32(10), I32(0), I32(0)), r, 2));
  ck_assert_int_eq(r[0].i32, 0);
  expect_saxpy(&r[1], 3.0f, 0);
}
END_TEST

START_TEST(dispatch_kernel_failure_fails_the_fence) {
  /* n = 11 reads past the 40-byte bindings in the last workgroup: the
   * dispatch fails and so does the fence (OUT_OF_RANGE = 11). */
  hali_value_t r[2] = {{0}};
  ck_assert_ok(run_hal(dispatch_text, "saxpy",
                       ARGS(F32(2), I32(11), I32(3), I32(0)), r, 2));
  ck_assert_int_eq(r[0].i32, HALI_STATUS_OUT_OF_RANGE);
  hali_value_release(&r[1]);
}
END_TEST

START_TEST(dispatch_recording_errors) {
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_FAILED_PRECONDITION,
               "needs 2 push constants but constant 0 was never pushed",
               I32(0), I32(0));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_OUT_OF_RANGE,
               "push constant offset -1 is negative", I32(1), I32(-1));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_OUT_OF_RANGE,
               "push constants [63, 63 + 2) exceed the 64 available", I32(2),
               I32(63));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_OUT_OF_RANGE,
               "executable 'k' has no export 1 (it has 1)", I32(3), I32(1));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_PERMISSION_DENIED,
               "lacks the required DISPATCH usage", I32(4), I32(0));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_OUT_OF_RANGE,
               "exceeds the buffer length 40", I32(5), I32(44));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_OUT_OF_RANGE,
               "binding length -1 is negative", I32(5), I32(-1));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_FAILED_PRECONDITION,
               "needs 3 bindings but binding 0 was never pushed", I32(6),
               I32(0));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_PERMISSION_DENIED,
               "cannot record push_constants in a command buffer without the "
               "DISPATCH category",
               I32(7), I32(0));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_OUT_OF_RANGE,
               "binding offset -8 is negative", I32(8), I32(-8));
  EXPECT_ERROR(dispatch_text, "bad", HALI_STATUS_OUT_OF_RANGE,
               "binding ordinal 32 exceeds the maximum of 31", I32(9),
               I32(32));
}
END_TEST

START_TEST(executable_get_not_loaded) {
  hali_value_t r[2] = {{0}};
  check_error(__FILE__, __LINE__,
              invoke_on(&k_devices[0], false, dispatch_text, "saxpy",
                        ARGS(F32(2), I32(10), I32(3), I32(0)), r, 2),
              HALI_STATUS_FAILED_PRECONDITION,
              "executable @k was not loaded (the module was not linked with "
              "an executable loader)",
              "saxpy");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Queue: execute, alloca, dealloca; fences. */

static const char queue_text[] =
    /* A fill that waits on a fence the program signals later: the fill has
     * not run (signal fence pending, bytes zero) until then. */
    "func @ordered() -> (i32, i32, i32, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  %v = const.i32 0x77\n"
    "  hal.command_buffer.fill %cmd, %b, %z, %c16, %v, %one32\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %go = hal.fence.create %device\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %go, %done, [%cmd]\n"
    "  %before = hal.fence.query %done\n"
    "  %byte_before = hal.buffer.load.i8.u %b, %z\n"
    "  hal.fence.signal %go\n"
    "  %forever = const.i64 -1\n"
    "  %after = hal.fence.await %done, %forever\n"
    "  %byte_after = hal.buffer.load.i8.u %b, %z\n"
    "  return %before, %byte_before, %after, %byte_after\n"
    "}\n"
    /* Submissions run in order: a barrier (no command buffers) waiting on
     * the first one's fence, then a fill and a copy in two submissions. */
    "func @chain() -> (i32, i32) {\n" PRELUDE
    "  %a = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %fill = hal.command_buffer.create %device, %one32, %one32\n"
    "  %v = const.i32 0x5a\n"
    "  hal.command_buffer.fill %fill, %a, %z, %c16, %v, %one32\n"
    "  hal.command_buffer.finalize %fill\n"
    "  %copy = hal.command_buffer.create %device, %one32, %one32\n"
    "  hal.command_buffer.copy %copy, %a, %z, %b, %z, %c16\n"
    "  hal.command_buffer.finalize %copy\n"
    "  %go = hal.fence.create %device\n"
    "  %f1 = hal.fence.create %device\n"
    "  %f2 = hal.fence.create %device\n"
    "  %f3 = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %go, %f1, [%fill]\n"
    "  hal.device.queue.execute %device, %f1, %f2, []\n"
    "  hal.device.queue.execute %device, %f2, %f3, [%copy]\n"
    "  hal.fence.signal %go\n"
    "  %forever = const.i64 -1\n"
    "  %st = hal.fence.await %f3, %forever\n"
    "  %fifteen = const.i64 15\n"
    "  %x = hal.buffer.load.i8.u %b, %fifteen\n"
    "  return %st, %x\n"
    "}\n"
    /* A failed wait fence fails the submission's signal fence with the
     * same code and the command buffer does not run. */
    "func @propagate(%code: i32) -> (i32, i32, i32) {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  hal.command_buffer.fill %cmd, %b, %z, %c16, %one32, %one32\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %go = hal.fence.create %device\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %go, %done, [%cmd]\n"
    "  hal.fence.fail %go, %code\n"
    "  %forever = const.i64 -1\n"
    "  %st = hal.fence.await_status %done, %forever\n"
    "  %q = hal.fence.query %done\n"
    "  %x = hal.buffer.load.i8.u %b, %z\n"
    "  return %st, %q, %x\n"
    "}\n"
    "func @submit_errors(%what: i32) {\n" PRELUDE
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  %wait = hal.fence.null\n"
    "  %done = hal.fence.create %device\n"
    "  cond_br %what, ^twice, ^unfinished\n"
    "^unfinished:\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  return\n"
    "^twice:\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  return\n"
    "}\n"
    /* A reusable command buffer runs once per submission. */
    "func @reusable() -> i32 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %zero32, %one32\n"
    "  %four = const.i64 4\n"
    "  hal.command_buffer.copy %cmd, %b, %z, %b, %four, %four\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %v = const.i32 0x01020304\n"
    "  hal.buffer.store.i32 %b, %z, %v\n"
    "  %wait = hal.fence.null\n"
    "  %f1 = hal.fence.create %device\n"
    "  %f2 = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %wait, %f1, [%cmd]\n"
    "  %forever = const.i64 -1\n"
    "  %s1 = hal.fence.await %f1, %forever\n"
    "  %v = const.i32 0x0a0b0c0d\n"
    "  hal.buffer.store.i32 %b, %z, %v\n"
    "  hal.device.queue.execute %device, %wait, %f2, [%cmd]\n"
    "  %s2 = hal.fence.await %f2, %forever\n"
    "  %x = hal.buffer.load.i32 %b, %four\n"
    "  %x = add.i32 %x, %s1\n"
    "  %x = add.i32 %x, %s2\n"
    "  return %x\n"
    "}\n"
    /* Stream-ordered allocation: the buffer has no storage until its
     * alloca executes after %go; then it can be used; after the dealloca
     * its storage is gone again. |step| says where to stop and access. */
    "func @alloca(%step: i32, %go: !hal.fence) -> (i32, i32, i32) {\n" PRELUDE
    "  %ready = hal.fence.create %device\n"
    "  %b = hal.device.queue.alloca %device, %go, %ready, %mem, %use, %c16\n"
    "  %len = hal.buffer.length %b\n"
    "  %len32 = trunc.i64.i32 %len\n"
    "  %q0 = hal.fence.query %ready\n"
    "  switch %step, ^early, [^early, ^use]\n"
    "^early:\n"
    "  %x = hal.buffer.load.i8.u %b, %z\n"
    "  return %x, %x, %x\n"
    "^use:\n"
    "  hal.fence.signal %go\n"
    "  %forever = const.i64 -1\n"
    "  %s1 = hal.fence.await %ready, %forever\n"
    "  %v = const.i32 42\n"
    "  hal.buffer.store.i32 %b, %z, %v\n"
    "  %x = hal.buffer.load.i32 %b, %z\n"
    "  %freed = hal.fence.create %device\n"
    "  hal.device.queue.dealloca %device, %ready, %freed, %b\n"
    "  %s2 = hal.fence.await %freed, %forever\n"
    "  %s1 = add.i32 %s1, %s2\n"
    "  %x = add.i32 %x, %s1\n"
    "  %q0 = add.i32 %q0, %len32\n"
    "  return %q0, %x, %s2\n"
    "}\n"
    "func @after_dealloca(%twice: i32) -> i32 {\n" PRELUDE
    "  %wait = hal.fence.null\n"
    "  %ready = hal.fence.create %device\n"
    "  %b = hal.device.queue.alloca %device, %wait, %ready, %mem, %use, %c16\n"
    "  %freed = hal.fence.create %device\n"
    "  hal.device.queue.dealloca %device, %ready, %freed, %b\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %freed, %forever\n"
    "  cond_br %twice, ^again, ^load\n"
    "^again:\n"
    "  %freed2 = hal.fence.create %device\n"
    "  hal.device.queue.dealloca %device, %freed, %freed2, %b\n"
    "  %s2 = hal.fence.await_status %freed2, %forever\n"
    "  return %s2\n"
    "^load:\n"
    "  %x = hal.buffer.load.i8.u %b, %z\n"
    "  return %x\n"
    "}\n"
    "func @dealloca_subspan() {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %four = const.i64 4\n"
    "  %s = hal.buffer.subspan %b, %four, %four\n"
    "  %wait = hal.fence.null\n"
    "  %freed = hal.fence.create %device\n"
    "  hal.device.queue.dealloca %device, %wait, %freed, %s\n"
    "  return\n"
    "}\n"
    "func @alloca_bad(%n: i64) {\n" PRELUDE
    "  %wait = hal.fence.null\n"
    "  %ready = hal.fence.create %device\n"
    "  %b = hal.device.queue.alloca %device, %wait, %ready, %mem, %use, %n\n"
    "  return\n"
    "}\n";

START_TEST(queue_execute_waits_for_its_fence) {
  EXPECT_RESULTS(queue_text, "ordered", NO_ARGS,
                 WANT(I32(4), I32(0), I32(0), I32(0x77)));
  EXPECT_RESULTS(queue_text, "chain", NO_ARGS, WANT(I32(0), I32(0x5a)));
  EXPECT_I32_NOARGS(queue_text, "reusable", 0x0a0b0c0d);
}
END_TEST

START_TEST(queue_execute_failure_propagates) {
  EXPECT_RESULTS(queue_text, "propagate", ARGS(I32(10)),
                 WANT(I32(10), I32(10), I32(0)));
  EXPECT_RESULTS(queue_text, "propagate", ARGS(I32(13)),
                 WANT(I32(13), I32(13), I32(0)));
  EXPECT_ERROR(queue_text, "submit_errors", HALI_STATUS_FAILED_PRECONDITION,
               "queue_execute: command buffer 0 of 1 is not finalized", I32(0));
  EXPECT_ERROR(queue_text, "submit_errors", HALI_STATUS_FAILED_PRECONDITION,
               "one-shot command buffer submitted more than once", I32(1));
}
END_TEST

/* Runs @alloca(step, go) on |dev| with a fence the host signals after the
 * call and before releasing the device (which drains the queue, so a
 * submission still waiting on |go| would block it forever). */
static hali_status_t run_alloca(const device_config_t *dev, int32_t step,
                                hali_value_t *results) {
  hali_vm_module_t *m = hali_test_module(queue_text);
  check_ops_note_module(m);
  hali_hal_device_params_t p;
  hali_hal_device_params_initialize(&p);
  p.kind = dev->kind;
  p.worker_count = dev->workers;
  hali_hal_device_t *d = NULL;
  ck_assert_ok(hali_hal_device_create(&p, &d));
  hali_hal_fence_t *go = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&go));
  hali_value_t args[2] = {I32(step), {.type = HALI_TYPE_FENCE}};
  args[1].ref = (hali_ref_t *)go;
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->device = d;
  hali_status_t s = hali_vm_invoke(st, m, hali_vm_module_lookup(m, "alloca"),
                                   args, 2, results, 3);
  ck_assert_ok(hali_hal_fence_signal(go));
  hali_hal_fence_release(go);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
  hali_hal_device_release(d);
  return s;
}

START_TEST(queue_alloca_dealloca) {
  for (size_t d = 0; d < COUNT_OF(k_devices); ++d) {
    hali_value_t r[3] = {{0}};
    /* Before its alloca runs, the buffer has a length but no storage. */
    check_error(__FILE__, __LINE__, run_alloca(&k_devices[d], 0, r),
                HALI_STATUS_FAILED_PRECONDITION,
                "load: buffer storage is not committed", "alloca");
    /* q0 = 4 (pending) + 16 bytes; 42 stored; both fences OK. */
    ck_assert_ok(run_alloca(&k_devices[d], 1, r));
    ck_assert_int_eq(r[0].i32, 4 + 16);
    ck_assert_int_eq(r[1].i32, 42);
    ck_assert_int_eq(r[2].i32, 0);
  }
  EXPECT_ERROR(queue_text, "after_dealloca", HALI_STATUS_FAILED_PRECONDITION,
               "load: buffer storage is not committed", I32(0));
  /* A second dealloca fails its fence: FAILED_PRECONDITION = 9. */
  EXPECT_I32(queue_text, "after_dealloca", HALI_STATUS_FAILED_PRECONDITION,
             I32(1));
  EXPECT_ERROR_NOARGS(queue_text, "dealloca_subspan",
                      HALI_STATUS_INVALID_ARGUMENT, "subspan");
  EXPECT_ERROR(queue_text, "alloca_bad", HALI_STATUS_OUT_OF_RANGE,
               "allocation size -16 is negative", I64(-16));
}
END_TEST

static const char fence_text[] =
    /* query: null = 0, created = 4 (not yet), signalled = 0; signalling
     * again is fine; join waits for both. */
    "func @states() -> (i32, i32, i32, i32, i32, i32, i32) {\n"
    "  %device = hal.device.get\n"
    "  %n = hal.fence.null\n"
    "  %qn = hal.fence.query %n\n"
    "  %a = hal.fence.create %device\n"
    "  %b = hal.fence.create %device\n"
    "  %qa = hal.fence.query %a\n"
    "  %ab = hal.fence.join %a, %b\n"
    "  hal.fence.signal %a\n"
    "  %qa2 = hal.fence.query %a\n"
    "  hal.fence.signal %a\n"
    "  %qab = hal.fence.query %ab\n"
    "  hal.fence.signal %b\n"
    "  %qab2 = hal.fence.query %ab\n"
    "  %an = hal.fence.join %n, %n\n"
    "  %qan = hal.fence.query %an\n"
    "  hal.fence.signal %n\n"
    "  %zero = const.i64 0\n"
    "  %w = hal.fence.await %ab, %zero\n"
    "  return %qn, %qa, %qa2, %qab, %qab2, %qan, %w\n"
    "}\n"
    /* fail: the first failure is kept; a join with a failed fence fails. */
    "func @failures(%first: i32, %second: i32) -> (i32, i32, i32, i32) {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %b = hal.fence.create %device\n"
    "  %ab = hal.fence.join %a, %b\n"
    "  hal.fence.fail %a, %first\n"
    "  %q1 = hal.fence.query %a\n"
    "  hal.fence.fail %a, %second\n"
    "  %q2 = hal.fence.query %a\n"
    "  %qab = hal.fence.query %ab\n"
    "  %forever = const.i64 -1\n"
    "  %w = hal.fence.await_status %a, %forever\n"
    "  return %q1, %q2, %qab, %w\n"
    "}\n"
    "func @signal_failed() {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %code = const.i32 14\n"
    "  hal.fence.fail %a, %code\n"
    "  hal.fence.signal %a\n"
    "  return\n"
    "}\n"
    /* await on a fence nobody signals: DEADLINE_EXCEEDED (4) promptly. */
    "func @timeout(%ms: i64) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %a = hal.fence.create %device\n"
    "  %st = hal.fence.await %a, %ms\n"
    "  return %st\n"
    "}\n"
    "func @await_ready(%ms: i64) -> i32 {\n"
    "  %n = hal.fence.null\n"
    "  %st = hal.fence.await %n, %ms\n"
    "  return %st\n"
    "}\n";

START_TEST(fence_create_null_join_signal_query) {
  EXPECT_RESULTS(fence_text, "states", NO_ARGS,
                 WANT(I32(0), I32(4), I32(0), I32(4), I32(0), I32(0), I32(0)));
}
END_TEST

START_TEST(fence_fail_keeps_first_failure) {
  EXPECT_RESULTS(fence_text, "failures", ARGS(I32(13), I32(5)),
                 WANT(I32(13), I32(13), I32(13), I32(13)));
  EXPECT_RESULTS(fence_text, "failures", ARGS(I32(1), I32(2)),
                 WANT(I32(1), I32(1), I32(1), I32(1)));
  /* Codes outside 1..16 become UNKNOWN (2). */
  EXPECT_RESULTS(fence_text, "failures", ARGS(I32(0), I32(3)),
                 WANT(I32(2), I32(2), I32(2), I32(2)));
  EXPECT_RESULTS(fence_text, "failures", ARGS(I32(99), I32(3)),
                 WANT(I32(2), I32(2), I32(2), I32(2)));
  EXPECT_RESULTS(fence_text, "failures", ARGS(I32(-7), I32(3)),
                 WANT(I32(2), I32(2), I32(2), I32(2)));
  /* Signalling a failed fence returns its failure. */
  EXPECT_ERROR_NOARGS(fence_text, "signal_failed", HALI_STATUS_UNAVAILABLE,
                      "fence failed by hal.fence.fail in @signal_failed");
}
END_TEST

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

START_TEST(fence_await_timeouts) {
  double t0 = now_ms();
  EXPECT_I32(fence_text, "timeout", HALI_STATUS_DEADLINE_EXCEEDED, I64(0));
  double t1 = now_ms();
  EXPECT_I32(fence_text, "timeout", HALI_STATUS_DEADLINE_EXCEEDED, I64(30));
  double t2 = now_ms();
  /* Two devices each: 0 ms is a poll; 30 ms waits about that long. */
  ck_assert_msg(t1 - t0 < 1000, "await 0 took %.0f ms", t1 - t0);
  ck_assert_msg(t2 - t1 >= 60 && t2 - t1 < 3000, "await 30 took %.0f ms",
                t2 - t1);
  /* A huge timeout does not overflow into "no time at all". */
  EXPECT_I32(fence_text, "await_ready", 0, I64(INT64_MAX));
  EXPECT_I32(fence_text, "await_ready", 0, I64(-1));
  EXPECT_I32(fence_text, "await_ready", 0, I64(0));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Boundary values of every size, offset, count and timeline computation the
 * HAL ops make (issue 11): ranges, workgroup counts, fence offsets, and the
 * message a bytecode kernel gets for a store into an input binding (B5). */

static const char limits_text[] =
    "executable @g format \"bytecode\" {\n"
    "  export @noop() -> () function @noop_kernel\n"
    "  export @poke(f32, tensor<?xf32>, tensor<?xf32>) -> (tensor<?xf32>) "
    "function @poke_kernel\n"
    "}\n"
    "rodata @seq = i8[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n"
    /* One range operation on a 16-byte buffer, selected by |site|. */
    "func @range(%site: i32, %off: i64, %len: i64) -> i32 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %o = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %one32\n"
    "  %three32 = const.i32 3\n"
    "  %dcmd = hal.command_buffer.create %device, %one32, %three32\n"
    "  switch %site, ^sub, [^sub, ^fill, ^copy, ^update, ^rodata, ^bind]\n"
    "^sub:\n"
    "  %s = hal.buffer.subspan %b, %off, %len\n"
    "  return %one32\n"
    "^fill:\n"
    "  hal.command_buffer.fill %cmd, %b, %off, %len, %zero32, %one32\n"
    "  return %one32\n"
    "^copy:\n"
    "  hal.command_buffer.copy %cmd, %b, %off, %o, %z, %len\n"
    "  return %one32\n"
    "^update:\n"
    "  hal.command_buffer.update %cmd, @seq, %z, %b, %off, %len\n"
    "  return %one32\n"
    "^rodata:\n"
    "  hal.command_buffer.update %cmd, @seq, %off, %b, %z, %len\n"
    "  return %one32\n"
    "^bind:\n"
    "  hal.command_buffer.push_descriptor_set %dcmd, %zero32, %b, %off, %len\n"
    "  return %one32\n"
    "}\n"
    /* Records (never submits) a dispatch of @noop over x * y * z. */
    "func @grid(%gx: i32, %gy: i32, %gz: i32) -> i32 {\n" PRELUDE
    "  %two32 = const.i32 2\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %two32\n"
    "  %exe = hal.executable.get @g\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %gx, %gy, %gz\n"
    "  return %one32\n"
    "}\n"
    /* A fence at value 1 raised by %a, then %b, then %c; signalled and
     * queried (0 = reached). */
    "func @offsets(%a: i64, %b: i64, %c: i64) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %f = hal.fence.offset %f, %a\n"
    "  %f = hal.fence.offset %f, %b\n"
    "  %f = hal.fence.offset %f, %c\n"
    "  hal.fence.signal %f\n"
    "  %q = hal.fence.query %f\n"
    "  return %q\n"
    "}\n"
    /* Points at 2^63 + |a| and 2^63 + |b| on one timeline: the first is
     * signalled, both are queried. */
    "func @top(%a: i64, %b: i64) -> (i32, i32) {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %max = const.i64 0x7fffffffffffffff\n"
    "  %f = hal.fence.offset %f, %max\n"
    "  %g = hal.fence.offset %f, %a\n"
    "  %h = hal.fence.offset %f, %b\n"
    "  hal.fence.signal %g\n"
    "  %qg = hal.fence.query %g\n"
    "  %qh = hal.fence.query %h\n"
    "  return %qg, %qh\n"
    "}\n"
    /* A view of shape [%d0, %d1] and element type %et over 16 bytes. */
    "func @view(%d0: i64, %d1: i64, %et: i32) -> i64 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %v = hal.buffer_view.create %b, %et, %one32, [%d0, %d1]\n"
    "  %n = hal.buffer_view.dim %v, %one32\n"
    "  return %n\n"
    "}\n"
    /* B5: @poke stores into its input binding 1 (%y). */
    "func @poke() -> i32 {\n" PRELUDE
    "  %b = hal.allocator.allocate %allocator, %mem, %use, %c16\n"
    "  %three32 = const.i32 3\n"
    "  %two32 = const.i32 2\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %two32\n"
    "  hal.command_buffer.push_constants %cmd, %zero32, [%one32]\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %b, %z, %c16\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %one32, %b, %z, %c16\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %two32, %b, %z, %c16\n"
    "  %exe = hal.executable.get @g\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %one32, %one32, %one32, "
    "%one32\n" SUBMIT
    "  return %st\n"
    "}\n"
    "func @noop_kernel(%wg_x: i32, %wg_y: i32, %wg_z: i32, %count_x: i32, "
    "%count_y: i32, %count_z: i32) {\n"
    "  return\n"
    "}\n"
    "func @poke_kernel(%a: f32, %x: !hal.buffer, %y: !hal.buffer, "
    "%out: !hal.buffer, %wg_x: i32, %wg_y: i32, %wg_z: i32, %count_x: i32, "
    "%count_y: i32, %count_z: i32) {\n"
    "  %off = const.i64 4\n"
    "  %v = hal.buffer.load.f32 %x, %off\n"
    "  hal.buffer.store.f32 %out, %off, %v\n"
    "  hal.buffer.store.f32 %y, %off, %v\n"
    "  return\n"
    "}\n";

START_TEST(range_ops_boundaries) {
  /* i64 operands reach the HAL as 0 .. 2^63-1 (negative ones are refused
   * by name), so offset + length is at most 2^64-2 and never wraps; the
   * boundaries that matter are around the 16-byte length and 2^63. */
  static const struct {
    const char *what, *offset_name, *length_name;
  } sites[] = {
      {"subspan", "subspan offset", "subspan length"},
      {"fill target", "fill offset", "fill length"},
      {"copy source", "copy source offset", "copy length"},
      {"update target", "update target offset", "update length"},
      {NULL, "update source offset", "update length"}, /* rodata @seq */
      {"binding 0", "binding offset", "binding length"},
  };
  static const struct {
    int64_t offset, length;
    bool fits;
  } cases[] = {
      {0, 0, true},          {0, 1, true},         {0, 15, true},
      {0, 16, true},         {1, 15, true},        {15, 1, true},
      {16, 0, true},         {0, 17, false},       {1, 16, false},
      {16, 1, false},        {17, 0, false},       {INT64_MAX, 0, false},
      {INT64_MAX, 1, false}, {1, INT64_MAX, false}, {INT64_MAX, INT64_MAX, false},
      {-1, 0, false},        {0, -1, false},       {INT64_MIN, 4, false},
  };
  for (size_t i = 0; i < COUNT_OF(sites); ++i) {
    for (size_t c = 0; c < COUNT_OF(cases); ++c) {
      int64_t off = cases[c].offset, len = cases[c].length;
      hali_value_t r[1] = {{0}};
      hali_status_t st = run_hal(limits_text, "range",
                                 ARGS(I32(i), I64(off), I64(len)), r, 1);
      if (cases[c].fits) {
        char *t = st ? hali_status_to_string(st) : NULL;
        ck_assert_msg(!st, "site %zu (%lld, %lld): %s", i, (long long)off,
                      (long long)len, t);
        continue;
      }
      char want[256];
      if (off < 0)
        snprintf(want, sizeof want, "%s %lld is negative",
                 sites[i].offset_name, (long long)off);
      else if (len < 0)
        snprintf(want, sizeof want, "%s %lld is negative",
                 sites[i].length_name, (long long)len);
      else if (!sites[i].what)
        snprintf(want, sizeof want,
                 "update reads [%lld, %lld + %lld) of rodata @seq which has "
                 "16 bytes",
                 (long long)off, (long long)off, (long long)len);
      else if (i == 3 && len > 16) /* the 16-byte source is checked first */
        snprintf(want, sizeof want,
                 "update reads [0, 0 + %lld) of rodata @seq which has 16 "
                 "bytes",
                 (long long)len);
      else
        snprintf(want, sizeof want,
                 "%s: range [offset %lld, length %lld] exceeds the buffer "
                 "length 16",
                 sites[i].what, (long long)off, (long long)len);
      check_error(__FILE__, __LINE__, st, HALI_STATUS_OUT_OF_RANGE, want,
                  "range");
    }
  }
}
END_TEST

START_TEST(dispatch_workgroup_count_limits) {
  /* Recorded only: accepted grids are not run. */
  EXPECT_I32(limits_text, "grid", 1, I32(0), I32(0), I32(0));
  EXPECT_I32(limits_text, "grid", 1, I32(1), I32(1), I32(1));
  EXPECT_I32(limits_text, "grid", 1, I32(INT32_MAX), I32(1), I32(1));
  EXPECT_I32(limits_text, "grid", 1, I32(INT32_MAX), I32(2), I32(1));
  /* 65535 x 65537 = 2^32 - 1: the largest grid. */
  EXPECT_I32(limits_text, "grid", 1, I32(65535), I32(65537), I32(1));
  /* A zero dimension is an empty grid, whatever the others are. */
  EXPECT_I32(limits_text, "grid", 1, I32(INT32_MAX), I32(INT32_MAX), I32(0));
  EXPECT_ERROR(limits_text, "grid", HALI_STATUS_OUT_OF_RANGE,
               "dispatch of executable 'g' export 0 'noop': workgroup count "
               "65536 x 65536 x 1 = 4294967296 workgroups exceeds the maximum "
               "of 4294967295 per dispatch",
               I32(65536), I32(65536), I32(1));
  EXPECT_ERROR(limits_text, "grid", HALI_STATUS_OUT_OF_RANGE,
               "workgroup count 65536 x 65536 x 65536 = 281474976710656 "
               "workgroups exceeds the maximum of 4294967295 per dispatch",
               I32(65536), I32(65536), I32(65536));
  /* 2^22 x 2^21 x 2^21 = 2^64 exactly: wrapped, it would be 0 ("run
   * nothing and succeed"). */
  EXPECT_ERROR(limits_text, "grid", HALI_STATUS_OUT_OF_RANGE,
               "workgroup count 4194304 x 2097152 x 2097152 overflows 64 "
               "bits (at most 4294967295 workgroups per dispatch)",
               I32(4194304), I32(2097152), I32(2097152));
  EXPECT_ERROR(limits_text, "grid", HALI_STATUS_OUT_OF_RANGE,
               "workgroup count 2147483647 x 2147483647 x 2147483647 "
               "overflows 64 bits",
               I32(INT32_MAX), I32(INT32_MAX), I32(INT32_MAX));
  /* Negative counts (which a cast would make 2^32 - n) are named. */
  EXPECT_ERROR(limits_text, "grid", HALI_STATUS_OUT_OF_RANGE,
               "dispatch of executable 'g' export 0 'noop': workgroup count "
               "x is -1 (negative; grid -1 x 1 x 1)",
               I32(-1), I32(1), I32(1));
  EXPECT_ERROR(limits_text, "grid", HALI_STATUS_OUT_OF_RANGE,
               "workgroup count z is -2147483648 (negative",
               I32(1), I32(1), I32(INT32_MIN));
}
END_TEST

START_TEST(fence_offset_timeline_limits) {
  /* 1 + (2^63 - 1) + (2^63 - 1) = 2^64 - 1: the last value, legal. */
  EXPECT_I32(limits_text, "offsets", 0, I64(0), I64(INT64_MAX), I64(INT64_MAX));
  EXPECT_I32(limits_text, "offsets", 0, I64(INT64_MAX), I64(INT64_MAX), I64(0));
  EXPECT_I32(limits_text, "offsets", 0, I64(1), I64(INT64_MAX - 1),
             I64(INT64_MAX));
  /* One more is past 2^64-1: an error, never a wrap to 0 (which would read
   * as reached before anything is signalled). */
  EXPECT_ERROR(limits_text, "offsets", HALI_STATUS_OUT_OF_RANGE,
               "point 0 value 18446744073709551615 + offset 1 is past "
               "2^64-1",
               I64(INT64_MAX), I64(INT64_MAX), I64(1));
  EXPECT_ERROR(limits_text, "offsets", HALI_STATUS_OUT_OF_RANGE,
               "value 18446744073709551615 + offset 9223372036854775807 is "
               "past 2^64-1",
               I64(INT64_MAX), I64(INT64_MAX), I64(INT64_MAX));
  EXPECT_ERROR(limits_text, "offsets", HALI_STATUS_OUT_OF_RANGE,
               "fence offset -1 is negative", I64(0), I64(0), I64(-1));
  /* 2^64-1 is a legal payload (hali keeps failures out of the value):
   * signalling to it reaches every point at or below it... */
  EXPECT_RESULTS(limits_text, "top", ARGS(I64(INT64_MAX), I64(INT64_MAX - 1)),
                 WANT(I32(0), I32(0)));
  /* ... and a point above the signalled value stays unreached. */
  EXPECT_RESULTS(limits_text, "top", ARGS(I64(INT64_MAX - 1), I64(INT64_MAX)),
                 WANT(I32(0), I32(HALI_STATUS_DEADLINE_EXCEEDED)));
}
END_TEST

START_TEST(buffer_view_size_limits) {
  const uint32_t i8 = 0x10000008u, f32 = 0x21000020u;
  EXPECT_I64(limits_text, "view", 1, I64(4), I64(1), I32(f32));
  EXPECT_I64(limits_text, "view", 4, I64(4), I64(4), I32(i8));
  EXPECT_I64(limits_text, "view", INT64_MAX, I64(0), I64(INT64_MAX), I32(f32));
  EXPECT_ERROR(limits_text, "view", HALI_STATUS_OUT_OF_RANGE,
               "buffer view needs 20 bytes but the buffer has 16", I64(5),
               I64(1), I32(f32));
  /* 2^32 x 2^32 = 2^64 elements: would wrap to an empty view. */
  EXPECT_ERROR(limits_text, "view", HALI_STATUS_OUT_OF_RANGE,
               "element count overflows 64 bits at dim 1 (4294967296 x "
               "4294967296)",
               I64(INT64_C(1) << 32), I64(INT64_C(1) << 32), I32(i8));
  /* B3's dim: 2^62 + 4 f32 elements would wrap to 16 bytes. */
  EXPECT_ERROR(limits_text, "view", HALI_STATUS_OUT_OF_RANGE,
               "byte size overflows 64 bits (4611686018427387908 elements of "
               "4 bytes)",
               I64((INT64_C(1) << 62) + 4), I64(1), I32(f32));
  EXPECT_ERROR(limits_text, "view", HALI_STATUS_INVALID_ARGUMENT,
               "dim 1 is negative (-1)", I64(4), I64(-1), I32(f32));
}
END_TEST

START_TEST(bytecode_store_into_input_binding) {
  /* B5: the message names the export and the binding (binding 1: the
   * scalar parameter before it has no binding), not "module constant
   * data". */
  EXPECT_ERROR_NOARGS(limits_text, "poke", HALI_STATUS_PERMISSION_DENIED,
                      "store of 4 bytes at offset 4: buffer of 16 bytes is "
                      "read-only (export @poke binding 1, a read-only input "
                      "binding)");
}
END_TEST

/* The await state machine by itself (hali_vm_fiber_await, vm/fiber.c):
 * poll, suspend with a deadline (DEFERRED), resumption by the deadline or
 * the signal, failures, and blocking when the stack may not suspend. */
START_TEST(await_state_machine) {
  hali_vm_module_t *m =
      hali_test_module("module @t\nfunc @f() {\n^entry:\n  return\n}\n");
  const hali_vm_func_t *f = hali_vm_module_lookup(m, "f");
  hali_vm_link_t *l = NULL;
  ck_assert_ok(hali_vm_link_create(m, &l));
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  ck_assert_ok(hali_vm_begin(st, l, f, NULL, 0, NULL, 0));
  hali_hal_fence_t *fence = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&fence));
  int32_t code = -1;
  st->can_suspend = true;
  /* A poll never suspends: not yet -> 4. */
  ck_assert_ok(hali_vm_fiber_await(st, fence, 0, false, &code));
  ck_assert_int_eq(code, HALI_STATUS_DEADLINE_EXCEEDED);
  /* May suspend: DEFERRED, the fence kept (retained), a deadline set. */
  code = -1;
  int64_t before = hali_clock_now_ns();
  hali_status_t s = hali_vm_fiber_await(st, fence, 50, false, &code);
  ck_assert(hali_status_is_deferred(s));
  hali_status_free(s);
  ck_assert_int_eq(code, -1);
  ck_assert_ptr_eq(st->awaiting, fence);
  ck_assert_int_ge(st->await_deadline_ns, before + 50 * 1000000);
  ck_assert_int_le(st->await_deadline_ns, hali_clock_now_ns() + 50 * 1000000);
  hali_hal_fence_release(st->awaiting); /* what resume() does */
  st->awaiting = NULL;
  /* Resumed by the scheduler's deadline, still pending: 4, flag cleared. */
  st->await_timed_out = true;
  ck_assert_ok(hali_vm_fiber_await(st, fence, 50, false, &code));
  ck_assert_int_eq(code, HALI_STATUS_DEADLINE_EXCEEDED);
  ck_assert(!st->await_timed_out);
  ck_assert_int_eq(st->await_started_ns, 0);
  /* Forever: no deadline. */
  s = hali_vm_fiber_await(st, fence, -1, false, &code);
  ck_assert(hali_status_is_deferred(s));
  ck_assert_int_eq(st->await_deadline_ns, INT64_MAX);
  hali_hal_fence_release(st->awaiting);
  st->awaiting = NULL;
  /* Resumed by the signal: 0. */
  ck_assert_ok(hali_hal_fence_signal(fence));
  ck_assert_ok(hali_vm_fiber_await(st, fence, -1, false, &code));
  ck_assert_int_eq(code, 0);
  /* A failed fence: the await fails with its status, or (await_status)
   * gives its code. */
  hali_hal_fence_t *failed = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&failed));
  hali_hal_fence_fail(failed, hali_status_make(HALI_STATUS_ABORTED, "boom"));
  s = hali_vm_fiber_await(st, failed, -1, false, &code);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_ABORTED);
  char want[64];
  snprintf(want, sizeof(want), "awaited fence #%u",
           ((hali_ref_t *)failed)->id);
  ck_assert_str_eq(hali_status_annotation(s, 0), want);
  hali_status_free(s);
  code = -1;
  ck_assert_ok(hali_vm_fiber_await(st, failed, -1, true, &code));
  ck_assert_int_eq(code, HALI_STATUS_ABORTED);
  /* A stack that may not suspend blocks in the HAL instead. */
  hali_hal_fence_t *pending = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&pending));
  st->can_suspend = false;
  code = -1;
  ck_assert_ok(hali_vm_fiber_await(st, pending, 1, false, &code));
  ck_assert_int_eq(code, HALI_STATUS_DEADLINE_EXCEEDED);
  ck_assert_ptr_null(st->awaiting);
  hali_hal_fence_release(pending);
  hali_hal_fence_release(failed);
  hali_hal_fence_release(fence);
  hali_vm_stack_reset(st);
  hali_vm_stack_free(st);
  hali_vm_link_free(l);
  hali_vm_module_release(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* --enable-debug: the interpreter asserts what the verifier and encoder
 * promise (vm/interp.c, HALI_DEBUG).  Each test breaks one promise in the
 * encoded code of a verified module and expects the assertion's abort; a
 * release build trusts the code, so these run in debug builds only (the
 * whole suite passing in a debug build shows the checks accept every
 * valid program). */
#ifdef HALI_DEBUG
#include <signal.h>

/* The first instruction of |f| with opcode |op|. */
static hali_cell_t *first_insn(const hali_vm_func_t *f, unsigned op) {
  for (uint32_t i = 0; i < f->insn_count; ++i)
    if (f->code[f->insn_offset[i]].i.op == op)
      return &f->code[f->insn_offset[i]];
  ck_abort_msg("no instruction with opcode %u", op);
  return NULL;
}

static void run_broken(const char *text, const char *fn, bool device,
                       void (*breaks)(const hali_vm_func_t *f)) {
  hali_vm_module_t *m = hali_test_module(text);
  const hali_vm_func_t *f = hali_vm_module_lookup(m, fn);
  ck_assert_ptr_nonnull(f);
  breaks(f);
  hali_hal_device_t *d = NULL;
  if (device) {
    hali_hal_device_params_t p;
    hali_hal_device_params_initialize(&p);
    ck_assert_ok(hali_hal_device_create(&p, &d));
  }
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->device = d;
  hali_value_t args[2] = {hali_value_i32(1), hali_value_i32(2)};
  hali_value_t r = {.type = f->ir->results[0]};
  hali_status_free(hali_vm_invoke(st, m, f, args, f->ir->param_count, &r, 1));
  ck_abort_msg("the debug assertion did not fire");
}

static void ref_slot_past_the_bank(const hali_vm_func_t *f) {
  hali_cell_t *c = first_insn(f, HALI_OP_HAL_BUFFER_LENGTH);
  c->i.b = (uint16_t)(f->ref_count + 3);
}
START_TEST(debug_asserts_ref_slots) {
  run_broken("module @t\n"
             "func @f() -> i64 {\n"
             "^entry:\n"
             "  %device = hal.device.get\n"
             "  %allocator = hal.device.allocator %device\n"
             "  %m = const.i32 3\n"
             "  %u = const.i32 5\n"
             "  %n = const.i64 16\n"
             "  %buf = hal.allocator.allocate %allocator, %m, %u, %n\n"
             "  %len = hal.buffer.length %buf\n"
             "  return %len\n"
             "}\n",
             "f", true, ref_slot_past_the_bank);
}
END_TEST

static void target_inside_an_instruction(const hali_vm_func_t *f) {
  hali_cell_t *c = first_insn(f, HALI_OP_BR);
  c[1].target = f->code + 1; /* the immediate cell of const.i32 */
}
START_TEST(debug_asserts_jump_targets) {
  run_broken("module @t\n"
             "func @g() -> i32 {\n"
             "^entry:\n"
             "  %x = const.i32 7\n"
             "  br ^done\n"
             "^done:\n"
             "  return %x\n"
             "}\n",
             "g", false, target_inside_an_instruction);
}
END_TEST

/* mov.i32 (1 cell) rewritten as select.i32 (2 cells): its handler skips
 * the next instruction whole, landing on an instruction start. */
static void handler_longer_than_encoded(const hali_vm_func_t *f) {
  ck_assert_uint_ge(f->insn_count, 3);
  hali_cell_t *c = &f->code[f->insn_offset[0]];
  ck_assert_uint_eq(c->i.op, HALI_OP_MOV_I32);
  ck_assert_uint_eq(f->code[f->insn_offset[1]].i.op, HALI_OP_MOV_I32);
  /* select's fourth register is the next cell's first slot: the opcode
   * of that mov, a valid scalar slot here. */
  ck_assert_uint_lt(HALI_OP_MOV_I32, f->scalar_count);
  c->i.op = HALI_OP_SELECT_I32;
}
START_TEST(debug_asserts_cell_lengths) {
  run_broken("module @t\n"
             "func @h(%x: i32, %y: i32) -> i32 {\n"
             "^entry:\n"
             "  %a = mov.i32 %x\n"
             "  %b = mov.i32 %y\n"
             "  %c = add.i32 %a, %b\n"
             "  return %c\n"
             "}\n",
             "h", false, handler_longer_than_encoded);
}
END_TEST
#endif /* HALI_DEBUG */

/* ------------------------------------------------------------------------ */

void check_hal_ops_add_tcases(Suite *s) {
  TCase *tc = tcase_create("hal_buffers");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, device_get_and_allocate);
  tcase_add_test(tc, allocator_reuse_and_mov_ref);
  tcase_add_test(tc, device_get_without_device);
  tcase_add_test(tc, load_store_widths_and_extension);
  tcase_add_test(tc, load_store_bounds);
  tcase_add_test(tc, load_store_memory_types_and_usage);
  tcase_add_test(tc, buffer_constant_rodata);
  tcase_add_test(tc, buffer_subspan_and_length);
  tcase_add_test(tc, buffer_assert_conditions);
  suite_add_tcase(s, tc);

  tc = tcase_create("hal_views");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, buffer_view_create_and_query);
  tcase_add_test(tc, buffer_view_rank0_and_bad_types);
  tcase_add_test(tc, buffer_view_assert_messages);
  suite_add_tcase(s, tc);

  tc = tcase_create("hal_command_buffers");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, command_buffer_fill_patterns);
  tcase_add_test(tc, command_buffer_fill_errors);
  tcase_add_test(tc, command_buffer_create_and_finalize);
  tcase_add_test(tc, command_buffer_copy);
  tcase_add_test(tc, command_buffer_update_from_rodata);
  tcase_add_test(tc, dispatch_bytecode_saxpy);
  tcase_add_test(tc, binding_table_ops);
  tcase_add_test(tc, dispatch_kernel_failure_fails_the_fence);
  tcase_add_test(tc, dispatch_recording_errors);
  tcase_add_test(tc, executable_get_not_loaded);
  tcase_add_test(tc, channel_ops_one_rank);
  suite_add_tcase(s, tc);

  tc = tcase_create("hal_queue_and_fences");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, queue_execute_waits_for_its_fence);
  tcase_add_test(tc, queue_execute_failure_propagates);
  tcase_add_test(tc, queue_alloca_dealloca);
  tcase_add_test(tc, fence_create_null_join_signal_query);
  tcase_add_test(tc, fence_fail_keeps_first_failure);
  tcase_add_test(tc, fence_await_timeouts);
  tcase_add_test(tc, await_state_machine);
  suite_add_tcase(s, tc);

  tc = tcase_create("hal_limits");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, range_ops_boundaries);
  tcase_add_test(tc, dispatch_workgroup_count_limits);
  tcase_add_test(tc, fence_offset_timeline_limits);
  tcase_add_test(tc, buffer_view_size_limits);
  tcase_add_test(tc, bytecode_store_into_input_binding);
  suite_add_tcase(s, tc);

#ifdef HALI_DEBUG
  tc = tcase_create("debug_assertions");
  tcase_add_test_raise_signal(tc, debug_asserts_ref_slots, SIGABRT);
  tcase_add_test_raise_signal(tc, debug_asserts_jump_targets, SIGABRT);
  tcase_add_test_raise_signal(tc, debug_asserts_cell_lengths, SIGABRT);
  suite_add_tcase(s, tc);
#endif
}
