/* hali — validation mode (hal/validate.c, doc/validation.md), through the
 * public API and the CLI: each check fires on a broken program with its
 * exact message and stays silent on the corrected one; the new-user trial's
 * three programs fail with a named error; off means off. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hali/hali.h"

#define ck_ok(s) assert_ok((s), __FILE__, __LINE__)
static void assert_ok(hali_status_t s, const char *file, int line) {
  if (!s) return;
  char *text = hali_status_to_string(s);
  hali_status_free(s);
  ck_abort_msg("%s:%d: unexpected error: %s", file, line, text);
}

/* |text| with every "#<digits>" as "#N": ref ids depend on what ran
 * before in the process. */
static void normalize_ids(const char *text, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = text; *p && n + 3 < cap;) {
    if (p[0] == '#' && p[1] >= '0' && p[1] <= '9') {
      out[n++] = '#';
      out[n++] = 'N';
      for (++p; *p >= '0' && *p <= '9';) ++p;
    } else {
      out[n++] = *p++;
    }
  }
  out[n] = 0;
}

/* |s| is FAILED_PRECONDITION and its message (ids normalized) is exactly
 * |want|. */
#define ck_finding(s, want) assert_finding((s), (want), __FILE__, __LINE__)
static void assert_finding(hali_status_t s, const char *want, const char *file,
                           int line) {
  if (!s) ck_abort_msg("%s:%d: expected the finding '%s', got OK", file, line,
                       want);
  char got[2048];
  normalize_ids(hali_status_message(s), got, sizeof(got));
  hali_status_code_t code = hali_status_code(s);
  char *all = hali_status_to_string(s);
  hali_status_free(s);
  if (code != HALI_STATUS_FAILED_PRECONDITION || strcmp(got, want) != 0) {
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s:%d:\n  want: %s\n  got:  %s\n  (%s)", file,
             line, want, got, all);
    free(all);
    ck_abort_msg("%s", buf);
  }
  free(all);
}

/* |text| with its "@@" replaced by |insert| (hasm text is full of '%'). */
static char *splice(const char *text, const char *insert) {
  const char *at = strstr(text, "@@");
  ck_assert_ptr_nonnull(at);
  size_t n = strlen(text) + strlen(insert) + 1;
  char *out = malloc(n);
  ck_assert_ptr_nonnull(out);
  snprintf(out, n, "%.*s%s%s", (int)(at - text), text, insert, at + 2);
  return out;
}

/* ------------------------------------------------------------------------ */
/* Static kernels (the "static" format; validation guards them like native
 * and ffi ones). */

static int twice_kernel(const hali_kernel_dispatch_state_t *d,
                        const hali_kernel_workgroup_state_t *w) {
  (void)w;
  const int32_t *x = d->binding_ptrs[0];
  int32_t *out = d->binding_ptrs[1];
  size_t n = d->binding_lengths[0] / sizeof(int32_t);
  for (size_t i = 0; i < n; ++i) out[i] = 2 * x[i];
  return 0;
}
/* Writes 4 ints past the end of its result. */
static int overrun_kernel(const hali_kernel_dispatch_state_t *d,
                          const hali_kernel_workgroup_state_t *w) {
  (void)w;
  volatile int32_t *out = d->binding_ptrs[1];
  size_t n = d->binding_lengths[1] / sizeof(int32_t);
  for (size_t i = 0; i < n + 4; ++i) out[i] = 1;
  return 0;
}
/* Writes the int before its result. */
static int underrun_kernel(const hali_kernel_dispatch_state_t *d,
                           const hali_kernel_workgroup_state_t *w) {
  (void)w;
  volatile int32_t *out = d->binding_ptrs[1];
  out[-1] = 1;
  out[0] = 2;
  return 0;
}
/* Writes its input. */
static int scribble_kernel(const hali_kernel_dispatch_state_t *d,
                           const hali_kernel_workgroup_state_t *w) {
  (void)w;
  volatile int32_t *x = d->binding_ptrs[0];
  x[1] = 9;
  return 0;
}
/* Reads 100 bytes past the end of its input. */
static int overread_kernel(const hali_kernel_dispatch_state_t *d,
                           const hali_kernel_workgroup_state_t *w) {
  (void)w;
  volatile const uint8_t *x = d->binding_ptrs[0];
  int32_t *out = d->binding_ptrs[1];
  out[0] = x[d->binding_lengths[0] + 100];
  return 0;
}

static const hali_kernel_export_t k_exports[] = {
    {"twice", twice_kernel, 2, 0, {1, 1, 1}, 0},
    {"overrun", overrun_kernel, 2, 0, {1, 1, 1}, 0},
    {"underrun", underrun_kernel, 2, 0, {1, 1, 1}, 0},
    {"scribble", scribble_kernel, 2, 0, {1, 1, 1}, 0},
    {"overread", overread_kernel, 2, 0, {1, 1, 1}, 0},
};
static const hali_kernel_library_t k_library = {
    HALI_KERNEL_ABI_VERSION, "vk", 5, k_exports};

/* ------------------------------------------------------------------------ */
/* Programs: a module around |body| (from line 24 on), which records into
 * %cmd with 16-byte buffers %a and %b (usage transfer|dispatch|mapping),
 * %zero, %len, %four, %seven, %one32, %exe (executable @vk) at hand; the
 * function submits %cmd, awaits it unless |await| is false, and returns
 * %b as 4 x i32. */

static char *program(const char *body, bool await) {
  static const char head[] =
      "module @v\n"                                                   /* 1 */
      "executable @vk format \"static\" library \"vk\" {\n"            /* 2 */
      "  export @twice(tensor<4xi32>) -> (tensor<4xi32>)\n"            /* 3 */
      "  export @overrun(tensor<4xi32>) -> (tensor<4xi32>)\n"          /* 4 */
      "  export @underrun(tensor<4xi32>) -> (tensor<4xi32>)\n"         /* 5 */
      "  export @scribble(tensor<4xi32>) -> (tensor<4xi32>)\n"         /* 6 */
      "  export @overread(tensor<4xi32>) -> (tensor<4xi32>)\n"         /* 7 */
      "}\n"                                                           /* 8 */
      "func @f() -> !hal.buffer_view {\n"                             /* 9 */
      "  %device = hal.device.get\n"                                  /* 10 */
      "  %alloc = hal.device.allocator %device\n"                     /* 11 */
      "  %mem = const.i32 19\n"                                       /* 12 */
      "  %usage = const.i32 7\n"                                      /* 13 */
      "  %len = const.i64 16\n"                                       /* 14 */
      "  %a = hal.allocator.allocate %alloc, %mem, %usage, %len\n"    /* 15 */
      "  %b = hal.allocator.allocate %alloc, %mem, %usage, %len\n"    /* 16 */
      "  %one32 = const.i32 1\n"                                      /* 17 */
      "  %three32 = const.i32 3\n"                                    /* 18 */
      "  %zero = const.i64 0\n"                                       /* 19 */
      "  %four = const.i32 4\n"                                       /* 20 */
      "  %seven = const.i32 7\n"                                      /* 21 */
      "  %exe = hal.executable.get @vk\n"                             /* 22 */
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n"; /* 23 */
  static const char tail_await[] =
      "  hal.command_buffer.finalize %cmd\n"
      "  %null = hal.fence.null\n"
      "  %done = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %null, %done, [%cmd]\n"
      "  %forever = const.i64 -1\n"
      "  %st = hal.fence.await %done, %forever\n"
      "  %i32 = const.i32 0x10000020\n"
      "  %n = const.i64 4\n"
      "  %view = hal.buffer_view.create %b, %i32, %one32, [%n]\n"
      "  return %view\n"
      "}\n";
  static const char tail_no_await[] =
      "  hal.command_buffer.finalize %cmd\n"
      "  %null = hal.fence.null\n"
      "  %done = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %null, %done, [%cmd]\n"
      "  %i32 = const.i32 0x10000020\n"
      "  %n = const.i64 4\n"
      "  %view = hal.buffer_view.create %b, %i32, %one32, [%n]\n"
      "  return %view\n"
      "}\n";
  const char *tail = await ? tail_await : tail_no_await;
  size_t n = strlen(head) + strlen(body) + strlen(tail) + 1;
  char *text = malloc(n);
  ck_assert_ptr_nonnull(text);
  snprintf(text, n, "%s%s%s", head, body, tail);
  return text;
}

typedef struct {
  hali_instance_t *instance;
  hali_device_t *device;
  hali_context_t *context;
  hali_status_t load; /* of the module / context */
} env_t;

static env_t env_new(const char *text, hali_validation_t mode,
                     hali_device_kind_t kind) {
  env_t e = {0};
  hali_instance_options_t io;
  hali_instance_options_initialize(&io);
  io.validation = mode;
  ck_ok(hali_instance_create(&io, &e.instance));
  ck_ok(hali_instance_register_static_library(e.instance, &k_library));
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.kind = kind;
  dp.worker_count = 2;
  ck_ok(hali_device_create(e.instance, &dp, &e.device));
  hali_module_t *m = NULL;
  ck_ok(hali_module_load_bytes(e.instance, text, strlen(text), "test.hasm",
                               &m));
  e.load = hali_context_create(e.instance, e.device, &m, 1, NULL, &e.context);
  hali_module_release(m);
  return e;
}

static void env_free(env_t *e) {
  hali_status_free(e->load);
  hali_context_release(e->context);
  hali_device_release(e->device);
  hali_instance_release(e->instance);
}

/* Runs @f of program(|body|, |await|); on success reads the 4 ints of the
 * result into |out| (the read is a host access: check 3). */
static hali_status_t run_body(const char *body, bool await,
                              hali_validation_t mode, hali_device_kind_t kind,
                              int32_t out[4]) {
  char *text = program(body, await);
  env_t e = env_new(text, mode, kind);
  free(text);
  ck_ok(e.load);
  e.load = NULL;
  hali_function_t *f = NULL;
  ck_ok(hali_context_lookup_function(e.context, "f", &f));
  hali_variant_t res;
  hali_status_t s = hali_context_invoke(e.context, f, NULL, 0, &res, 1);
  if (!s) {
    s = hali_buffer_view_read(res.u.view, out, 4 * sizeof(int32_t));
    hali_variant_release(&res);
  }
  env_free(&e);
  return s;
}

static const hali_device_kind_t k_kinds[2] = {HALI_DEVICE_LOCAL_SYNC,
                                              HALI_DEVICE_LOCAL_TASK};

static void expect_ok(const char *body, int32_t b0, int32_t b3, int kind) {
  int32_t out[4] = {-1, -1, -1, -1};
  ck_ok(run_body(body, true, HALI_VALIDATION_FAIL, k_kinds[kind], out));
  ck_assert_int_eq(out[0], b0);
  ck_assert_int_eq(out[3], b3);
}

static void expect_finding(const char *body, bool await, const char *want,
                           int kind) {
  int32_t out[4];
  ck_finding(run_body(body, await, HALI_VALIDATION_FAIL, k_kinds[kind], out),
             want);
}

/* ------------------------------------------------------------------------ */
/* Check 1: hazards inside a command buffer. */

#define FILL_A "  hal.command_buffer.fill %cmd, %a, %zero, %len, %seven, %four\n"
#define FILL_B "  hal.command_buffer.fill %cmd, %b, %zero, %len, %seven, %four\n"
#define COPY_AB "  hal.command_buffer.copy %cmd, %a, %zero, %b, %zero, %len\n"
#define BARRIER "  hal.command_buffer.execution_barrier %cmd\n"

START_TEST(cb_read_after_write) {
  expect_finding(
      FILL_A COPY_AB, true,
      "validation: read-after-write hazard in !hal.command_buffer#N: command "
      "1 (copy source, @f@15 (test.hasm:25)) reads bytes [0, 16) of "
      "!hal.buffer#N, which command 0 (fill, @f@14 (test.hasm:24)) writes, "
      "with no execution_barrier between them (record "
      "hal.command_buffer.execution_barrier after command 0)",
      _i);
  expect_ok(FILL_A BARRIER COPY_AB, 7, 7, _i);
}
END_TEST

START_TEST(cb_write_after_write) {
  /* Two fills of %b overlapping in bytes [8, 16). */
  static const char half[] =
      "  %eight = const.i64 8\n"
      "  %nine = const.i32 9\n"
      "  hal.command_buffer.fill %cmd, %b, %eight, %eight, %nine, %four\n";
  char bad[512], good[512];
  snprintf(bad, sizeof(bad), "%s%s", FILL_B, half);
  snprintf(good, sizeof(good), "%s%s%s", FILL_B, BARRIER, half);
  expect_finding(
      bad, true,
      "validation: write-after-write hazard in !hal.command_buffer#N: "
      "command 1 (fill, @f@17 (test.hasm:27)) writes bytes [8, 16) of "
      "!hal.buffer#N, which command 0 (fill, @f@14 (test.hasm:24)) writes, "
      "with no execution_barrier between them (record "
      "hal.command_buffer.execution_barrier after command 0)",
      _i);
  expect_ok(good, 7, 9, _i);
}
END_TEST

START_TEST(cb_write_after_read) {
  static const char refill[] =
      "  %nine = const.i32 9\n"
      "  hal.command_buffer.fill %cmd, %a, %zero, %len, %nine, %four\n";
  char bad[512], good[512];
  snprintf(bad, sizeof(bad), "%s%s%s%s", FILL_A, BARRIER, COPY_AB, refill);
  snprintf(good, sizeof(good), "%s%s%s%s%s", FILL_A, BARRIER, COPY_AB, BARRIER,
           refill);
  expect_finding(
      bad, true,
      "validation: write-after-read hazard in !hal.command_buffer#N: command "
      "3 (fill, @f@18 (test.hasm:28)) writes bytes [0, 16) of !hal.buffer#N, "
      "which command 2 (copy source, @f@16 (test.hasm:26)) reads, with no "
      "execution_barrier between them (record "
      "hal.command_buffer.execution_barrier after command 2)",
      _i);
  expect_ok(good, 7, 7, _i);
}
END_TEST

/* Two dispatches writing the same output in one group (no barrier): a
 * concurrent group's overlapping writes. */
#define BIND(ord, buf)                                                      \
  "  %o" #ord " = const.i32 " #ord "\n"                                     \
  "  hal.command_buffer.push_descriptor_set %cmd, %o" #ord ", " buf         \
  ", %zero, %len\n"
#define DISPATCH(export)                                                    \
  "  %x" export " = const.i32 " export "\n"                                 \
  "  hal.command_buffer.dispatch %cmd, %exe, %x" export                     \
  ", %one32, %one32, %one32\n"

START_TEST(cb_concurrent_dispatches) {
  char bad[1024], good[1024];
  snprintf(bad, sizeof(bad), "%s%s%s%s%s%s", FILL_A, BARRIER, BIND(0, "%a"),
           BIND(1, "%b"), DISPATCH("0"),
           "  hal.command_buffer.dispatch %cmd, %exe, %x0, %one32, %one32, "
           "%one32\n");
  snprintf(good, sizeof(good), "%s%s%s%s%s%s%s", FILL_A, BARRIER,
           BIND(0, "%a"), BIND(1, "%b"), DISPATCH("0"), BARRIER,
           "  hal.command_buffer.dispatch %cmd, %exe, %x0, %one32, %one32, "
           "%one32\n");
  expect_finding(
      bad, true,
      "validation: write-after-write hazard in !hal.command_buffer#N: "
      "command 5 (dispatch vk::twice binding 1 (written), @f@22 "
      "(test.hasm:32)) writes bytes [0, 16) of !hal.buffer#N, which command "
      "4 (dispatch vk::twice binding 1 (written), @f@21 (test.hasm:31)) "
      "writes, with no execution_barrier between them (record "
      "hal.command_buffer.execution_barrier after command 4)",
      _i);
  expect_ok(good, 14, 14, _i);
  /* Two dispatches that only read %a at once are fine (outputs apart). */
  char reads[1024];
  snprintf(reads, sizeof(reads), "%s%s%s%s%s%s%s", FILL_A, BARRIER,
           BIND(0, "%a"), BIND(1, "%b"), DISPATCH("0"),
           "  %c = hal.allocator.allocate %alloc, %mem, %usage, %len\n"
           "  hal.command_buffer.push_descriptor_set %cmd, %o1, %c, %zero, "
           "%len\n",
           "  hal.command_buffer.dispatch %cmd, %exe, %x0, %one32, %one32, "
           "%one32\n");
  expect_ok(reads, 14, 14, _i);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Check 2: hazards between submissions. */

static char *two_submissions(const char *second_wait) {
  static const char text[] =
      "  hal.command_buffer.fill %cmd, %a, %zero, %len, %seven, %four\n"
      "  hal.command_buffer.finalize %cmd\n"
      "  %none = hal.fence.null\n"
      "  %first = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %none, %first, [%cmd]\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n"
      "  hal.command_buffer.copy %cmd, %a, %zero, %b, %zero, %len\n"
      "  hal.command_buffer.finalize %cmd\n"
      "  %second = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, @@, %second, [%cmd]\n"
      "  %wait2 = const.i64 -1\n"
      "  %st2 = hal.fence.await %second, %wait2\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n";
  return splice(text, second_wait);
}

START_TEST(submissions_unordered) {
  char *bad = two_submissions("%none");
  char *good = two_submissions("%first");
  expect_finding(
      bad, true,
      "validation: read-after-write hazard between submissions: "
      "!hal.command_buffer#N command 0 (copy source, @f@20 (test.hasm:30)) "
      "in submission #N reads bytes [0, 16) of !hal.buffer#N, which "
      "!hal.command_buffer#N command 0 (fill, @f@14 (test.hasm:24)) in "
      "submission #N writes, and submission #N is not ordered after it: its "
      "wait fence does not reach (through a chain of fence waits) the signal "
      "fence of submission #N, and the host has not awaited that fence",
      _i);
  expect_ok(good, 7, 7, _i);
  free(bad);
  free(good);
}
END_TEST

/* Stream-ordered allocation: the users of a queue_alloca buffer must wait
 * for the alloca, and its queue_dealloca for the users. */
static char *transient(const char *use_waits, const char *free_waits) {
  static const char text[] =
      "  %none = hal.fence.null\n"
      "  %ready = hal.fence.create %device\n"
      "  %t = hal.device.queue.alloca %device, %none, %ready, %mem, %usage, "
      "%len\n"
      "  hal.command_buffer.fill %cmd, %t, %zero, %len, %seven, %four\n"
      "  hal.command_buffer.finalize %cmd\n"
      "  %used = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, @@, %used, [%cmd]\n"
      "  %freed = hal.fence.create %device\n"
      "  hal.device.queue.dealloca %device, @@, %freed, %t\n"
      "  %w = const.i64 -1\n"
      "  %sw = hal.fence.await %freed, %w\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n"
      FILL_B;
  char *once = splice(text, use_waits);
  char *twice = splice(once, free_waits);
  free(once);
  return twice;
}

START_TEST(submissions_transient) {
  char *use_early = transient("%none", "%used");
  char *free_early = transient("%ready", "%ready");
  char *good = transient("%ready", "%used");
  expect_finding(
      use_early, true,
      "validation: write-after-write hazard between submissions: "
      "!hal.command_buffer#N command 0 (fill, @f@17 (test.hasm:27)) in "
      "submission #N writes bytes [0, 16) of !hal.buffer#N, which "
      "queue_alloca in submission #N writes, and submission #N is not "
      "ordered after it: its wait fence does not reach (through a chain of "
      "fence waits) the signal fence of submission #N, and the host has not "
      "awaited that fence",
      _i);
  expect_finding(
      free_early, true,
      "validation: write-after-write hazard between submissions: "
      "queue_dealloca in submission #N writes bytes [0, 16) of "
      "!hal.buffer#N, which !hal.command_buffer#N command 0 (fill, @f@17 "
      "(test.hasm:27)) in submission #N writes, and submission #N is not "
      "ordered after it: its wait fence does not reach (through a chain of "
      "fence waits) the signal fence of submission #N, and the host has not "
      "awaited that fence",
      _i);
  expect_ok(good, 7, 7, _i);
  free(use_early);
  free(free_early);
  free(good);
}
END_TEST

/* The host awaited the first submission before making the second: the
 * two are ordered without a fence between them. */
START_TEST(submissions_host_ordered) {
  static const char body[] =
      "  hal.command_buffer.fill %cmd, %a, %zero, %len, %seven, %four\n"
      "  hal.command_buffer.finalize %cmd\n"
      "  %none = hal.fence.null\n"
      "  %first = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %none, %first, [%cmd]\n"
      "  %w1 = const.i64 -1\n"
      "  %s1 = hal.fence.await %first, %w1\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n"
      "  hal.command_buffer.copy %cmd, %a, %zero, %b, %zero, %len\n";
  expect_ok(body, 7, 7, _i);
}
END_TEST

/* A chain: the third submission waits for the second, which waited for
 * the first; so the third is ordered after the first. */
START_TEST(submissions_chain) {
  static const char body[] =
      "  hal.command_buffer.fill %cmd, %a, %zero, %len, %seven, %four\n"
      "  hal.command_buffer.finalize %cmd\n"
      "  %none = hal.fence.null\n"
      "  %f1 = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %none, %f1, [%cmd]\n"
      "  %f2 = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %f1, %f2, []\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n"
      "  hal.command_buffer.copy %cmd, %a, %zero, %b, %zero, %len\n"
      "  hal.command_buffer.finalize %cmd\n"
      "  %f3 = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %f2, %f3, [%cmd]\n"
      "  %w = const.i64 -1\n"
      "  %st3 = hal.fence.await %f3, %w\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n";
  expect_ok(body, 7, 7, _i);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Check 3: host access to storage in flight. */

START_TEST(host_read_not_awaited) {
  int32_t out[4];
  ck_finding(
      run_body(FILL_B, false, HALI_VALIDATION_FAIL, k_kinds[_i], out),
      "validation: host read of bytes [0, 16) of !hal.buffer#N while "
      "submission #N (!hal.command_buffer#N command 0 (fill, @f@14 "
      "(test.hasm:24))) writes them and the host has not awaited its signal "
      "fence (hal.fence.await it before touching the buffer)");
  expect_ok(FILL_B, 7, 7, _i);
  /* Waiting for the device to be idle is seeing everything complete. */
  char *text = program(FILL_B, false);
  env_t e = env_new(text, HALI_VALIDATION_FAIL, k_kinds[_i]);
  free(text);
  ck_ok(e.load);
  hali_function_t *f = NULL;
  ck_ok(hali_context_lookup_function(e.context, "f", &f));
  hali_variant_t res;
  ck_ok(hali_context_invoke(e.context, f, NULL, 0, &res, 1));
  ck_ok(hali_context_wait_idle(e.context, -1));
  ck_ok(hali_buffer_view_read(res.u.view, out, sizeof(out)));
  ck_assert_int_eq(out[0], 7);
  ck_assert_int_eq(out[3], 7);
  hali_variant_release(&res);
  env_free(&e);
}
END_TEST

/* hal.buffer.store into a buffer a submission still reads (a host write
 * after a device read); hal.buffer.load of one it still writes. */
START_TEST(host_store_and_load_in_flight) {
  static const char store[] =
      FILL_A
      "  hal.command_buffer.finalize %cmd\n"
      "  %none = hal.fence.null\n"
      "  %filled = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %none, %filled, [%cmd]\n"
      "  %w0 = const.i64 -1\n"
      "  %s0 = hal.fence.await %filled, %w0\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n"
      COPY_AB
      "  hal.command_buffer.finalize %cmd\n"
      "  %sent = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %none, %sent, [%cmd]\n"
      "@@"
      "  hal.buffer.store.i32 %a, %zero, %seven\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n";
  char *bad = splice(store, "");
  char *good =
      splice(store, "  %w = const.i64 -1\n  %sw = hal.fence.await %sent, %w\n");
  expect_finding(
      bad, true,
      "validation: host store of bytes [0, 4) of !hal.buffer#N while "
      "submission #N (!hal.command_buffer#N command 0 (copy source, @f@22 "
      "(test.hasm:32))) reads them and the host has not awaited its signal "
      "fence (hal.fence.await it before touching the buffer)",
      _i);
  expect_ok(good, 7, 7, _i);
  free(bad);
  free(good);
  static const char load[] =
      FILL_B
      "  hal.command_buffer.finalize %cmd\n"
      "  %none = hal.fence.null\n"
      "  %sent = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %none, %sent, [%cmd]\n"
      "  %eight = const.i64 8\n"
      "  %x = hal.buffer.load.i32 %b, %eight\n"
      "  %cmd = hal.command_buffer.create %device, %one32, %three32\n";
  expect_finding(
      load, true,
      "validation: host load of bytes [8, 12) of !hal.buffer#N while "
      "submission #N (!hal.command_buffer#N command 0 (fill, @f@14 "
      "(test.hasm:24))) writes them and the host has not awaited its signal "
      "fence (hal.fence.await it before touching the buffer)",
      _i);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Check 4: guard pages around C kernels' bindings. */

/* Whether a fault was a read or a write is known on x86-64 only. */
#if defined(__x86_64__)
#define WROTE "wrote"
#define READ "read"
#else
#define WROTE "accessed"
#define READ "accessed"
#endif

static char *dispatch_body(const char *export) {
  char *body = malloc(1024);
  ck_assert_ptr_nonnull(body);
  snprintf(body, 1024,
           "%s%s%s%s"
           "  %%k = const.i32 %s\n"
           "  hal.command_buffer.dispatch %%cmd, %%exe, %%k, %%one32, %%one32, "
           "%%one32\n",
           FILL_A, BARRIER, BIND(0, "%a"), BIND(1, "%b"), export);
  return body;
}

static void expect_kernel_fault(const char *export, const char *want_message,
                                const char *want_where, int kind) {
  char *body = dispatch_body(export);
  int32_t out[4];
  hali_status_t s =
      run_body(body, true, HALI_VALIDATION_FAIL, k_kinds[kind], out);
  free(body);
  ck_assert_ptr_nonnull(s);
  char *all = hali_status_to_string(s);
  ck_assert_msg(strstr(all, want_where) != NULL, "no '%s' in %s", want_where,
                all);
  free(all);
  ck_finding(s, want_message);
}

START_TEST(guard_overrun) {
  expect_kernel_fault(
      "1",
      "validation: kernel " WROTE " past the end of binding 1 at offset 16 (the "
      "binding is 16 bytes)",
      "in dispatch of executable 'vk' export 1 'overrun'", _i);
}
END_TEST

START_TEST(guard_underrun) {
  expect_kernel_fault(
      "2",
      "validation: kernel wrote before the start of binding 1: byte at "
      "offset -4 changed (the binding is 16 bytes)",
      "in dispatch of executable 'vk' export 2 'underrun'", _i);
}
END_TEST

START_TEST(guard_read_only_input) {
  expect_kernel_fault(
      "3",
      "validation: kernel wrote to read-only binding 0 (an input) at offset "
      "4 (the binding is 16 bytes)",
      "in dispatch of executable 'vk' export 3 'scribble' at workgroup "
      "(0,0,0) of (1,1,1)",
      _i);
}
END_TEST

START_TEST(guard_overread) {
  expect_kernel_fault(
      "4",
      "validation: kernel " READ " past the end of binding 0 (an input) at "
      "offset 116 (the binding is 16 bytes)",
      "in dispatch of executable 'vk' export 4 'overread' at workgroup "
      "(0,0,0) of (1,1,1)",
      _i);
}
END_TEST

static void dummy_segv(int sig) { (void)sig; }

START_TEST(guard_good_kernel) {
  /* The program's own SIGSEGV handler is back after guarded dispatches,
   * including one that faulted. */
  struct sigaction mine, now;
  memset(&mine, 0, sizeof(mine));
  mine.sa_handler = dummy_segv;
  sigemptyset(&mine.sa_mask);
  ck_assert_int_eq(sigaction(SIGSEGV, &mine, NULL), 0);
  char *bad = dispatch_body("1");
  int32_t ignored[4];
  hali_status_free(
      run_body(bad, true, HALI_VALIDATION_FAIL, k_kinds[_i], ignored));
  free(bad);
  char *body = dispatch_body("0");
  /* The same numbers with and without validation (copy in and out). */
  int32_t on[4], off[4];
  ck_ok(run_body(body, true, HALI_VALIDATION_FAIL, k_kinds[_i], on));
  ck_ok(run_body(body, true, HALI_VALIDATION_OFF, k_kinds[_i], off));
  free(body);
  for (int i = 0; i < 4; ++i) {
    ck_assert_int_eq(on[i], 14);
    ck_assert_int_eq(off[i], 14);
  }
  ck_assert_int_eq(sigaction(SIGSEGV, NULL, &now), 0);
  ck_assert_ptr_eq((void *)now.sa_handler, (void *)dummy_segv);
  signal(SIGSEGV, SIG_DFL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Check 5: reads of bytes nothing wrote. */

START_TEST(uninitialized_copy) {
  expect_finding(
      COPY_AB, true,
      "validation: uninitialized read: !hal.command_buffer#N command 0 (copy "
      "source, @f@14 (test.hasm:24)) reads bytes [0, 16) of !hal.buffer#N, "
      "which nothing has written (no fill, copy, update, dispatch or host "
      "write before it)",
      _i);
  /* Half written: the other half is named. */
  static const char half[] =
      "  %eight = const.i64 8\n"
      "  hal.command_buffer.fill %cmd, %a, %eight, %eight, %seven, %four\n"
      BARRIER COPY_AB;
  expect_finding(
      half, true,
      "validation: uninitialized read: !hal.command_buffer#N command 2 (copy "
      "source, @f@17 (test.hasm:27)) reads bytes [0, 8) of !hal.buffer#N, "
      "which nothing has written (no fill, copy, update, dispatch or host "
      "write before it)",
      _i);
  expect_ok(FILL_A BARRIER COPY_AB, 7, 7, _i);
}
END_TEST

START_TEST(uninitialized_dispatch_input) {
  char body[1024];
  snprintf(body, sizeof(body), "%s%s%s", BIND(0, "%a"), BIND(1, "%b"),
           DISPATCH("0"));
  expect_finding(
      body, true,
      "validation: uninitialized read: !hal.command_buffer#N command 2 "
      "(dispatch vk::twice binding 0, @f@19 (test.hasm:29)) reads bytes "
      "[0, 16) of !hal.buffer#N, which nothing has written (no fill, copy, "
      "update, dispatch or host write before it)",
      _i);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Modes. */

START_TEST(off_by_default) {
  /* The broken programs above run without a word when validation is off. */
  int32_t out[4];
  ck_ok(run_body(FILL_A COPY_AB, true, HALI_VALIDATION_OFF, k_kinds[_i], out));
  ck_assert_int_eq(out[0], 7);
  ck_ok(run_body(COPY_AB, true, HALI_VALIDATION_OFF, k_kinds[_i], out));
  ck_assert_int_eq(out[0], 0);
}
END_TEST

START_TEST(warn_carries_on) {
  int32_t out[4];
  ck_ok(run_body(FILL_A COPY_AB, true, HALI_VALIDATION_WARN, k_kinds[_i], out));
  ck_assert_int_eq(out[0], 7);
  ck_assert_int_eq(out[3], 7);
  ck_ok(run_body(COPY_AB, true, HALI_VALIDATION_WARN, k_kinds[_i], out));
  ck_assert_int_eq(out[0], 0); /* zeroed storage, as without validation */
  /* A read of a result not awaited: warned, then read (on local-sync the
   * work ran inline, so the numbers are there). */
  ck_ok(run_body(FILL_B, false, HALI_VALIDATION_WARN, k_kinds[_i], out));
  if (_i == 0) ck_assert_int_eq(out[3], 7);
}
END_TEST

START_TEST(api_options) {
  hali_validation_t m = HALI_VALIDATION_WARN;
  ck_ok(hali_validation_parse("fail", &m));
  ck_assert_int_eq(m, HALI_VALIDATION_FAIL);
  ck_ok(hali_validation_parse("warn", &m));
  ck_assert_int_eq(m, HALI_VALIDATION_WARN);
  ck_ok(hali_validation_parse("off", &m));
  ck_assert_int_eq(m, HALI_VALIDATION_OFF);
  hali_status_t s = hali_validation_parse("loud", &m);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
  ck_assert_str_eq(hali_status_message(s),
                   "unknown validation mode 'loud' (expected fail, warn or "
                   "off)");
  hali_status_free(s);
  hali_instance_options_t io;
  hali_instance_options_initialize(&io);
  ck_assert_int_eq(io.validation, HALI_VALIDATION_OFF);
  io.validation = (hali_validation_t)7;
  hali_instance_t *in = NULL;
  s = hali_instance_create(&io, &in);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(hali_status_message(s), "options->validation"));
  hali_status_free(s);
  ck_ok(hali_instance_create(NULL, &in));
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.validation = (hali_validation_t)3;
  hali_device_t *d = NULL;
  s = hali_device_create(in, &dp, &d);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(hali_status_message(s), "params->validation"));
  hali_status_free(s);
  /* A device's own mode, on an instance without one. */
  char *text = program(FILL_A COPY_AB, true);
  dp.validation = HALI_VALIDATION_FAIL;
  ck_ok(hali_device_create(in, &dp, &d));
  hali_module_t *mod = NULL;
  ck_ok(hali_module_load_bytes(in, text, strlen(text), "test.hasm", &mod));
  free(text);
  hali_context_t *c = NULL;
  ck_ok(hali_instance_register_static_library(in, &k_library));
  ck_ok(hali_context_create(in, d, &mod, 1, NULL, &c));
  hali_function_t *f = NULL;
  ck_ok(hali_context_lookup_function(c, "f", &f));
  hali_variant_t res;
  s = hali_context_invoke(c, f, NULL, 0, &res, 1);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_FAILED_PRECONDITION);
  ck_assert_ptr_nonnull(
      strstr(hali_status_message(s), "validation: read-after-write hazard"));
  hali_status_free(s);
  hali_context_release(c);
  hali_module_release(mod);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The CLI: the new-user trial's three programs, --validate=warn. */

static int shell(const char *cmd, char **out_text) {
  char full[4096];
  snprintf(full, sizeof(full), "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  ck_assert_ptr_nonnull(p);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  ck_assert_ptr_nonnull(buf);
  for (size_t got; (got = fread(buf + n, 1, cap - 1 - n, p)) > 0;) n += got;
  buf[n] = 0;
  int st = pclose(p);
  *out_text = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *write_temp(const char *name, const char *text) {
  char *path = malloc(512);
  ck_assert_ptr_nonnull(path);
  const char *dir = getenv("TMPDIR");
  snprintf(path, 512, "%s/hali_validate_%d_%s", dir ? dir : "/tmp",
           (int)getpid(), name);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return path;
}

#define TOOL HALI_BUILDDIR "/tools/hali"
#define KDIR HALI_BUILDDIR "/tests/kernels"

/* Friction 1: a plain-C kernel writing 64 bytes past a 40-byte result
 * crashed later with exit 139; under --validate it is a named error.
 * _i: 0/1 ffi on local-sync/local-task, 2/3 native. */
START_TEST(trial_overrun_kernel) {
  static const char ffi[] =
      "module @over\n"
      "executable @k format \"ffi\" library \"test_validate.so\" {\n"
      "  export @bad(tensor<1xf32>) -> (tensor<10xf32>) symbol "
      "\"fill_overrun\"\n"
      "  export @good(tensor<1xf32>) -> (tensor<10xf32>) symbol "
      "\"fill_exact\"\n"
      "}\n"
      "func @bad(%x: tensor<1xf32>) -> tensor<10xf32> {\n"
      "  %y = tensor.dispatch @k::@bad[1](%x) -> tensor<10xf32>\n"
      "  return %y\n"
      "}\n"
      "func @good(%x: tensor<1xf32>) -> tensor<10xf32> {\n"
      "  %y = tensor.dispatch @k::@good[1](%x) -> tensor<10xf32>\n"
      "  return %y\n"
      "}\n";
  /* Native: the same module with format "native" (the library's kernel
   * table has the same names as its ffi functions). */
  const char *at = strstr(ffi, "\"ffi\"");
  size_t n = strlen(ffi) + 8;
  char *text = malloc(n);
  ck_assert_ptr_nonnull(text);
  if (_i < 2)
    snprintf(text, n, "%s", ffi);
  else
    snprintf(text, n, "%.*s\"native\"%s", (int)(at - ffi), ffi, at + 5);
  const char *device = _i % 2 ? "local-task" : "local-sync";
  char *path = write_temp("over.hasm", text), cmd[2048], *out;
  free(text);
  snprintf(cmd, sizeof(cmd),
           "%s run %s --executable-path=%s --function=bad --input=1xf32=1 "
           "--validate --device=%s",
           TOOL, path, KDIR, device);
  ck_assert_int_eq(shell(cmd, &out), 1);
  ck_assert_msg(
      strstr(out,
             "hali: error: FAILED_PRECONDITION: validation: kernel wrote past "
             "the end of binding 1: from offset 40 up to offset 48, where it "
             "faulted (the binding is 40 bytes)\n"
             "  in dispatch of executable 'k' export 0 'bad' at workgroup "
             "(0,0,0) of (1,1,1)\n") != NULL,
      "%s", out);
  free(out);
  snprintf(cmd, sizeof(cmd),
           "%s run %s --executable-path=%s --function=good --input=1xf32=1 "
           "--validate --device=%s",
           TOOL, path, KDIR, device);
  ck_assert_int_eq(shell(cmd, &out), 0);
  ck_assert_msg(strstr(out, "10xf32=1 2 3 4 5 6 7 8 9 1e+01") != NULL, "%s",
                out);
  free(out);
  unlink(path);
  free(path);
}
END_TEST

/* Trial (a): a softmax told a wrong dynamic size read past its input and
 * printed garbage with exit 0. */
START_TEST(trial_softmax_wrong_size) {
  static const char text[] =
      "module @softmax\n"
      "executable @k format \"ffi\" library \"test_validate.so\" {\n"
      "  export @softmax(tensor<?xf32>, i32) -> (tensor<?xf32>) symbol "
      "\"softmax_ffi\"\n"
      "}\n"
      "func @main(%x: tensor<?xf32>, %n: index) -> tensor<?xf32> {\n"
      "  %n32 = trunc.i64.i32 %n\n"
      "  %y = tensor.dispatch @k::@softmax[1](%x, %n32) -> tensor<?xf32>{%n}\n"
      "  return %y\n"
      "}\n";
  char *path = write_temp("softmax.hasm", text), cmd[2048], *out;
  snprintf(cmd, sizeof(cmd),
           "%s run %s --executable-path=%s --input='4xf32=1 2 3 4' "
           "--input=i64=8 --validate",
           TOOL, path, KDIR);
  ck_assert_int_eq(shell(cmd, &out), 1);
  ck_assert_msg(
      strstr(out,
             "hali: error: FAILED_PRECONDITION: validation: kernel " READ " past "
             "the end of binding 0 (an input) at offset 16 (the binding is 16 "
             "bytes)\n"
             "  in dispatch of executable 'k' export 0 'softmax' at "
             "workgroup (0,0,0) of (1,1,1)\n") != NULL,
      "%s", out);
  free(out);
  /* The right size: the numbers of a plain C softmax. */
  snprintf(cmd, sizeof(cmd),
           "%s run %s --executable-path=%s --input='4xf32=1 2 3 4' "
           "--input=i64=4 --validate",
           TOOL, path, KDIR);
  ck_assert_int_eq(shell(cmd, &out), 0);
  const char *r = strstr(out, "4xf32=");
  ck_assert_msg(r != NULL, "%s", out);
  float got[4];
  ck_assert_int_eq(sscanf(r, "4xf32=%f %f %f %f", &got[0], &got[1], &got[2],
                          &got[3]),
                   4);
  double sum = 0, e[4];
  for (int i = 0; i < 4; ++i) sum += (e[i] = exp(i + 1 - 4.0));
  for (int i = 0; i < 4; ++i) ck_assert_double_eq_tol(got[i], e[i] / sum, 1e-6);
  free(out);
  unlink(path);
  free(path);
}
END_TEST

/* Trial (b): a HAL program returning a view without awaiting its copy. */
START_TEST(trial_view_not_awaited) {
  static const char text[] =
      "module @copy\n"
      "func @main(%v: i32) -> !hal.buffer_view {\n"
      "  %device = hal.device.get\n"
      "  %alloc = hal.device.allocator %device\n"
      "  %mem = const.i32 19\n"
      "  %usage = const.i32 7\n"
      "  %a_len = const.i64 32\n"
      "  %b_len = const.i64 64\n"
      "  %a = hal.allocator.allocate %alloc, %mem, %usage, %a_len\n"
      "  %b = hal.allocator.allocate %alloc, %mem, %usage, %b_len\n"
      "  %one_shot = const.i32 1\n"
      "  %transfer = const.i32 1\n"
      "  %cmd = hal.command_buffer.create %device, %one_shot, %transfer\n"
      "  %zero = const.i64 0\n"
      "  %four = const.i32 4\n"
      "  hal.command_buffer.fill %cmd, %a, %zero, %a_len, %v, %four\n"
      "  hal.command_buffer.execution_barrier %cmd\n"
      "  %dst_off = const.i64 16\n"
      "  hal.command_buffer.copy %cmd, %a, %zero, %b, %dst_off, %a_len\n"
      "  hal.command_buffer.finalize %cmd\n"
      "  %wait = hal.fence.null\n"
      "  %done = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
      "@@"
      "  %i32 = const.i32 0x10000020\n"
      "  %dense = const.i32 1\n"
      "  %n = const.i64 16\n"
      "  %view = hal.buffer_view.create %b, %i32, %dense, [%n]\n"
      "  return %view\n"
      "}\n";
  char *bad = splice(text, "");
  char *good = splice(text,
                      "  %forever = const.i64 -1\n"
                      "  %st = hal.fence.await %done, %forever\n");
  char *bad_path = write_temp("noawait.hasm", bad);
  char *good_path = write_temp("await.hasm", good);
  free(bad);
  free(good);
  for (int dev = 0; dev < 2; ++dev) {
    char cmd[2048], *out;
    const char *kind = dev ? "local-task" : "local-sync";
    snprintf(cmd, sizeof(cmd), "%s run %s --input=7 --validate --device=%s",
             TOOL, bad_path, kind);
    ck_assert_int_eq(shell(cmd, &out), 1);
    char norm[4096];
    normalize_ids(out, norm, sizeof(norm));
    ck_assert_msg(
        strstr(norm,
               "hali: error: FAILED_PRECONDITION: validation: host read of "
               "bytes [16, 48) of !hal.buffer#N while submission #N "
               "(!hal.command_buffer#N command 2 (copy target, @main@16 (") != NULL,
        "%s", out);
    free(out);
    snprintf(cmd, sizeof(cmd), "%s run %s --input=7 --validate --device=%s",
             TOOL, good_path, kind);
    ck_assert_int_eq(shell(cmd, &out), 0);
    ck_assert_msg(strstr(out, "16xi32=0 0 0 0 7 7 7 7 7 7 7 7 0 0 0 0") != NULL,
                  "%s", out);
    free(out);
  }
  unlink(bad_path);
  unlink(good_path);
  free(bad_path);
  free(good_path);
}
END_TEST

START_TEST(cli_warn_and_bad_mode) {
  char *text = program(FILL_A COPY_AB, true);
  /* No static kernels in the CLI: drop the executable (lines 2-8). */
  char *exe = strstr(text, "executable @vk");
  char *end = strstr(exe, "}\n") + 2;
  memmove(exe, end, strlen(end) + 1);
  char *line = strstr(text, "  %exe = ");
  memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
  char *path = write_temp("warn.hasm", text), cmd[2048], *out;
  free(text);
  snprintf(cmd, sizeof(cmd), "%s run %s --function=f --validate=warn", TOOL, path);
  ck_assert_int_eq(shell(cmd, &out), 0);
  char norm[4096];
  normalize_ids(out, norm, sizeof(norm));
  ck_assert_msg(
      strstr(norm,
             "hali: warning: validation: read-after-write hazard in "
             "!hal.command_buffer#N: command 1 (copy source, @f@14 (") != NULL,
      "%s", out);
  ck_assert_msg(strstr(out, "4xi32=7 7 7 7") != NULL, "%s", out);
  free(out);
  snprintf(cmd, sizeof(cmd), "%s run %s --function=f --validate", TOOL, path);
  ck_assert_int_eq(shell(cmd, &out), 1);
  ck_assert_msg(strstr(out, "hali: error: FAILED_PRECONDITION: validation: "
                            "read-after-write hazard") != NULL,
                "%s", out);
  free(out);
  snprintf(cmd, sizeof(cmd), "%s run %s --function=f", TOOL, path);
  ck_assert_int_eq(shell(cmd, &out), 0);
  ck_assert_msg(strstr(out, "4xi32=7 7 7 7") != NULL, "%s", out);
  free(out);
  snprintf(cmd, sizeof(cmd), "%s run %s --function=f --validate=loud", TOOL, path);
  ck_assert_int_eq(shell(cmd, &out), 2);
  ck_assert_msg(strstr(out, "unknown validation mode 'loud' (expected fail, "
                            "warn or off)") != NULL,
                "%s", out);
  free(out);
  unlink(path);
  free(path);
}
END_TEST

static Suite *suite_validate(void) {
  Suite *s = suite_create("validate");
  TCase *cb = tcase_create("command_buffer");
  tcase_add_loop_test(cb, cb_read_after_write, 0, 2);
  tcase_add_loop_test(cb, cb_write_after_write, 0, 2);
  tcase_add_loop_test(cb, cb_write_after_read, 0, 2);
  tcase_add_loop_test(cb, cb_concurrent_dispatches, 0, 2);
  suite_add_tcase(s, cb);
  TCase *sub = tcase_create("submissions");
  tcase_add_loop_test(sub, submissions_unordered, 0, 2);
  tcase_add_loop_test(sub, submissions_chain, 0, 2);
  tcase_add_loop_test(sub, submissions_host_ordered, 0, 2);
  tcase_add_loop_test(sub, submissions_transient, 0, 2);
  suite_add_tcase(s, sub);
  TCase *host = tcase_create("host");
  tcase_add_loop_test(host, host_read_not_awaited, 0, 2);
  tcase_add_loop_test(host, host_store_and_load_in_flight, 0, 2);
  suite_add_tcase(s, host);
  TCase *guard = tcase_create("guard");
  tcase_add_loop_test(guard, guard_overrun, 0, 2);
  tcase_add_loop_test(guard, guard_underrun, 0, 2);
  tcase_add_loop_test(guard, guard_read_only_input, 0, 2);
  tcase_add_loop_test(guard, guard_overread, 0, 2);
  tcase_add_loop_test(guard, guard_good_kernel, 0, 2);
  suite_add_tcase(s, guard);
  TCase *init = tcase_create("uninitialized");
  tcase_add_loop_test(init, uninitialized_copy, 0, 2);
  tcase_add_loop_test(init, uninitialized_dispatch_input, 0, 2);
  suite_add_tcase(s, init);
  TCase *modes = tcase_create("modes");
  tcase_add_loop_test(modes, off_by_default, 0, 2);
  tcase_add_loop_test(modes, warn_carries_on, 0, 2);
  tcase_add_test(modes, api_options);
  suite_add_tcase(s, modes);
  TCase *cli = tcase_create("cli");
  tcase_set_timeout(cli, 60);
  tcase_add_loop_test(cli, trial_overrun_kernel, 0, 4);
  tcase_add_test(cli, trial_softmax_wrong_size);
  tcase_add_test(cli, trial_view_not_awaited);
  tcase_add_test(cli, cli_warn_and_bad_mode);
  suite_add_tcase(s, cli);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite_validate());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
