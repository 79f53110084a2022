/* Tests for the pluggable executable loader (loader/executables.c): each of
 * the four built-in loaders (native, ffi, static, bytecode) loads, runs and
 * produces the same results on local-sync and on local-task with 1, 2 and 4
 * workers; every failure path has its message checked; host programs
 * register static kernels and loaders of their own; the CLI resolves
 * kernel libraries through --executable-path and $HALI_EXECUTABLE_PATH.
 *
 * The native and ffi libraries are tests/kernels/test_native.so and
 * test_ffi.so, built by `make check`; the static kernels are the same C bodies linked in here
 * (tests/kernels/test_kernels.h); the bytecode kernels are below. */
#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/hal.h"
#include "hali/hali.h"
#include "loader/executables.h"
#include "tests/kernels/test_kernels.h"
#include "tests/testutil.h"

#define KERNEL_DIR HALI_BUILDDIR "/tests/kernels"

/* ------------------------------------------------------------------------ */
/* Static kernels: the bodies of test_kernels.h in the kernel ABI, plus one
 * that counts its calls (to prove that rejected dispatches never ran). */

static atomic_uint static_calls;

static uint32_t linear_id(const hali_kernel_dispatch_state_t *d,
                          const hali_kernel_workgroup_state_t *w) {
  return test_linear_id(w->workgroup_id_x, w->workgroup_id_y,
                        w->workgroup_id_z, d->workgroup_count_x,
                        d->workgroup_count_y);
}

static int static_affine(const hali_kernel_dispatch_state_t *d,
                         const hali_kernel_workgroup_state_t *w) {
  float a;
  memcpy(&a, &d->constants[0], sizeof(a));
  atomic_fetch_add(&static_calls, 1);
  test_affine(d->binding_ptrs[0], a, (int32_t)d->constants[1],
              d->binding_ptrs[1], linear_id(d, w));
  return 0;
}

static int static_fail(const hali_kernel_dispatch_state_t *d,
                       const hali_kernel_workgroup_state_t *w) {
  atomic_fetch_add(&static_calls, 1);
  return test_fail(d->binding_ptrs[0], (int32_t)d->constants[0],
                   d->binding_ptrs[1], linear_id(d, w));
}

static const hali_kernel_export_t static_exports[] = {
    {"affine", static_affine, 2, 2, {TEST_AFFINE_WORKGROUP_SIZE, 1, 1}, 0},
    {"fail", static_fail, 2, 1, {1, 1, 1}, 0},
};
static const hali_kernel_library_t static_library = {
    HALI_KERNEL_ABI_VERSION, "test_static", 2, static_exports};

/* A table compiled against a future ABI. */
static const hali_kernel_library_t future_library = {
    HALI_KERNEL_ABI_VERSION + 1, "test_future", 2, static_exports};

/* A kernel that reads 65 push constants: more than the HAL allows. */
static const hali_kernel_export_t greedy_exports[] = {
    {"greedy", static_affine, 2, HALI_HAL_MAX_PUSH_CONSTANTS + 1, {1, 1, 1}, 0},
};
static const hali_kernel_library_t greedy_library = {
    HALI_KERNEL_ABI_VERSION, "test_greedy", 1, greedy_exports};

/* ------------------------------------------------------------------------ */
/* The four loaders, each with exports @affine (ordinal 0) and @fail (1). */

#define SIG_AFFINE "(tensor<?xf32>, f32, i32) -> (tensor<?xf32>)"
#define SIG_FAIL "(tensor<?xi32>, i32) -> (tensor<?xi32>)"

static const char *const native_exe =
    "executable @k format \"native\" library \"test_native.so\" {\n"
    "  export @affine" SIG_AFFINE " workgroup_size [4, 1, 1]\n"
    "  export @fail" SIG_FAIL "\n"
    "}\n";

static const char *const ffi_exe =
    "executable @k format \"ffi\" library \"test_ffi.so\" {\n"
    "  export @affine" SIG_AFFINE " symbol \"affine_ffi\" workgroup_size [4, "
    "1, 1] workgroup_info\n"
    "  export @fail" SIG_FAIL " symbol \"fail_ffi\" workgroup_info "
    "returns_status\n"
    "}\n";

static const char *const static_exe =
    "executable @k format \"static\" library \"test_static\" {\n"
    "  export @affine" SIG_AFFINE " workgroup_size [4, 1, 1]\n"
    "  export @fail" SIG_FAIL "\n"
    "}\n";

static const char *const bytecode_exe =
    "executable @k format \"bytecode\" {\n"
    "  export @affine" SIG_AFFINE " function @affine_kernel workgroup_size "
    "[4, 1, 1]\n"
    "  export @fail" SIG_FAIL " function @fail_kernel\n"
    "}\n"
    "func @affine_kernel(%in: !hal.buffer, %a: f32, %n: i32, %out: "
    "!hal.buffer, %x: i32, %y: i32, %z: i32, %cx: i32, %cy: i32, %cz: i32) "
    "{\n"
    "^entry:\n"
    "  %l = mul.i32 %z, %cy\n"
    "  %l = add.i32 %l, %y\n"
    "  %l = mul.i32 %l, %cx\n"
    "  %l = add.i32 %l, %x\n"
    "  %lf = uitofp.i32.f32 %l\n"
    "  %four = const.i32 4\n"
    "  %i = mul.i32 %l, %four\n"
    "  %end = add.i32 %i, %four\n"
    "  %end = min.s.i32 %end, %n\n"
    "  %empty = ge.s.i32 %i, %end\n"
    "  cond_br %empty, ^done, ^loop\n"
    "^loop:\n"
    "  %i64 = ext.s.i32.i64 %i\n"
    "  %four64 = const.i64 4\n"
    "  %at = mul.i64 %i64, %four64\n"
    "  %v = hal.buffer.load.f32 %in, %at\n"
    "  %v = mul.f32 %a, %v\n"
    "  %v = add.f32 %v, %lf\n"
    "  hal.buffer.store.f32 %out, %at, %v\n"
    "  %one = const.i32 1\n"
    "  %i = add.i32 %i, %one\n"
    "  %more = lt.s.i32 %i, %end\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n"
    "func @fail_kernel(%in: !hal.buffer, %bad: i32, %out: !hal.buffer, %x: "
    "i32, %y: i32, %z: i32, %cx: i32, %cy: i32, %cz: i32) {\n"
    "  %l = mul.i32 %z, %cy\n"
    "  %l = add.i32 %l, %y\n"
    "  %l = mul.i32 %l, %cx\n"
    "  %l = add.i32 %l, %x\n"
    "  %l64 = ext.u.i32.i64 %l\n"
    "  %four = const.i64 4\n"
    "  %at = mul.i64 %l64, %four\n"
    "  %v = hal.buffer.load.i32 %in, %at\n"
    "  %one = const.i32 1\n"
    "  %v = add.i32 %v, %one\n"
    "  hal.buffer.store.i32 %out, %at, %v\n"
    "  %ok = ne.i32 %l, %bad\n"
    "  assert %ok, \"workgroup asked to fail\"\n"
    "  return\n"
    "}\n";

typedef struct {
  const char *name;
  const char *failure; /* what a failing kernel's status says */
} loader_case_t;

static const loader_case_t loaders[] = {
    {"native", "kernel returned error code 42"},
    {"ffi", "kernel returned error code 42"},
    {"static", "kernel returned error code 42"},
    {"bytecode", "assertion failed: workgroup asked to fail"},
};
#define LOADER_COUNT 4

static const char *loader_exe(int i) {
  const char *const exes[LOADER_COUNT] = {native_exe, ffi_exe, static_exe,
                                          bytecode_exe};
  return exes[i];
}

/* The devices every dispatch runs on. */
typedef struct {
  const char *name;
  hali_hal_device_kind_t kind;
  uint32_t workers;
} device_case_t;

static const device_case_t devices[] = {
    {"local-sync", HALI_HAL_DEVICE_LOCAL_SYNC, 0},
    {"local-task x1", HALI_HAL_DEVICE_LOCAL_TASK, 1},
    {"local-task x2", HALI_HAL_DEVICE_LOCAL_TASK, 2},
    {"local-task x4", HALI_HAL_DEVICE_LOCAL_TASK, 4},
};
#define DEVICE_COUNT 4

/* ------------------------------------------------------------------------ */
/* Helpers. */

static hali_executable_registry_t *registry;

static void registry_setup(void) {
  ck_assert_ok(hali_executable_registry_create(&registry));
  ck_assert_ok(
      hali_executable_registry_register_static(registry, &static_library));
  atomic_store(&static_calls, 0);
}

static void registry_teardown(void) {
  hali_executable_registry_free(registry);
  registry = NULL;
}

/* Asserts |s| failed with |code| and its text contains every needle (a
 * NULL-terminated list); frees |s|. */
static void expect_status_(hali_status_t s, hali_status_code_t code,
                           const char *file, int line, ...) {
  char *text = hali_status_to_string(s);
  hali_status_code_t have = hali_status_code(s);
  hali_status_free(s);
  if (have != code)
    ck_abort_msg("%s:%d: expected %s, got %s: %s", file, line,
                 hali_status_code_name(code), hali_status_code_name(have),
                 text ? text : "(OK)");
  va_list ap;
  va_start(ap, line);
  for (const char *n; (n = va_arg(ap, const char *)) != NULL;)
    if (!text || !strstr(text, n)) {
      va_end(ap);
      ck_abort_msg("%s:%d: status does not mention \"%s\": %s", file, line, n,
                   text ? text : "");
    }
  va_end(ap);
  free(text);
}
#define expect_status(s, code, ...) \
  expect_status_((s), (code), __FILE__, __LINE__, __VA_ARGS__, (char *)NULL)

/* Assembles "module @t" + |exe| + |extra| and loads its executables with
 * the registry into a new link table (which holds the module), searching
 * |module_path|'s directory and KERNEL_DIR. */
static hali_status_t load_with(const char *exe, const char *extra,
                               const char *module_path,
                               hali_vm_link_t **out) {
  *out = NULL;
  size_t len = strlen(exe) + (extra ? strlen(extra) : 0) + 32;
  char *text = malloc(len);
  snprintf(text, len, "module @t\n%s%s", exe, extra ? extra : "");
  hali_vm_module_t *m = NULL;
  hali_status_t s = hali_test_try_module(text, &m);
  free(text);
  if (s) return s;
  const char *paths[] = {KERNEL_DIR};
  hali_vm_link_t *l = NULL;
  s = hali_vm_link_create(m, &l);
  hali_vm_module_release(m); /* |l| holds it */
  if (!s) s = hali_executable_registry_load_link(registry, l, module_path,
                                                 paths, 1);
  if (s) {
    hali_vm_link_free(l);
    return s;
  }
  *out = l;
  return HALI_OK;
}

static hali_vm_link_t *load(const char *exe) {
  hali_vm_link_t *m = NULL;
  ck_assert_ok(load_with(exe, NULL, NULL, &m));
  return m;
}

static hali_hal_device_t *make_device(const device_case_t *dc) {
  hali_hal_device_params_t p;
  hali_hal_device_params_initialize(&p);
  p.kind = dc->kind;
  p.worker_count = dc->workers;
  hali_hal_device_t *dev = NULL;
  ck_assert_ok(hali_hal_device_create(&p, &dev));
  return dev;
}

static hali_hal_buffer_t *make_buffer(hali_hal_device_t *dev, size_t size) {
  hali_hal_buffer_params_t p = {
      HALI_HAL_MEMORY_TYPE_HOST_VISIBLE | HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH |
          HALI_HAL_BUFFER_USAGE_MAPPING};
  hali_hal_buffer_t *b = NULL;
  ck_assert_ok(hali_hal_allocator_allocate_buffer(
      hali_hal_device_allocator(dev), p, size, &b));
  return b;
}

/* One dispatch of export |ordinal| with |in| as binding 0 and |out_bytes|
 * of output as binding 1 (zeroed first, read back into |out| afterwards,
 * even on failure).  Returns what the signal fence says. */
static hali_status_t dispatch(hali_hal_device_t *dev, hali_hal_executable_t *exe,
                              uint32_t ordinal, const void *in,
                              size_t in_bytes, void *out, size_t out_bytes,
                              const uint32_t *constants, uint32_t count,
                              uint32_t gx, uint32_t gy, uint32_t gz) {
  hali_hal_buffer_t *bin = make_buffer(dev, in_bytes);
  hali_hal_buffer_t *bout = make_buffer(dev, out_bytes);
  ck_assert_ok(hali_hal_buffer_write(bin, 0, in, in_bytes));
  memset(out, 0, out_bytes);
  ck_assert_ok(hali_hal_buffer_write(bout, 0, out, out_bytes));
  hali_hal_command_buffer_t *cb = NULL;
  ck_assert_ok(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_DISPATCH, &cb));
  ck_assert_ok(hali_hal_command_buffer_push_constants(cb, 0, constants, count));
  const hali_hal_buffer_binding_t bindings[2] = {
      {0, bin, 0, in_bytes}, {1, bout, 0, out_bytes}};
  ck_assert_ok(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 2));
  ck_assert_ok(hali_hal_command_buffer_dispatch(cb, exe, ordinal, gx, gy, gz));
  ck_assert_ok(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *done = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&done));
  ck_assert_ok(hali_hal_device_queue_execute(dev, NULL, done, &cb, 1));
  hali_status_t s = hali_hal_fence_await(done, HALI_INFINITE);
  ck_assert_ok(hali_hal_buffer_read(bout, 0, out, out_bytes));
  hali_hal_fence_release(done);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(bin);
  hali_hal_buffer_release(bout);
  return s;
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* The affine case: a 5x3x2 grid over 117 elements (the last workgroup is
 * partial, three elements beyond n stay zero). */
enum { AFFINE_N = 117, AFFINE_GX = 5, AFFINE_GY = 3, AFFINE_GZ = 2 };
#define AFFINE_CAP (AFFINE_GX * AFFINE_GY * AFFINE_GZ * 4)

static void affine_input(float *in) {
  for (int i = 0; i < AFFINE_CAP; ++i) in[i] = (float)i * 0.5f - 7.0f;
}

static void affine_expected(const float *in, float a, float *out) {
  memset(out, 0, AFFINE_CAP * sizeof(float));
  for (uint32_t l = 0; l < AFFINE_GX * AFFINE_GY * AFFINE_GZ; ++l)
    test_affine(in, a, AFFINE_N, out, l);
}

/* ------------------------------------------------------------------------ */
/* Each loader: load, dispatch, results, on every device. */

START_TEST(test_dispatch_on_every_device) {
  hali_vm_link_t *m = load(loader_exe(_i));
  hali_hal_executable_t *exe = m->executables[0];
  ck_assert_str_eq(hali_hal_executable_format(exe), loaders[_i].name);
  ck_assert_uint_eq(hali_hal_executable_export_count(exe), 2);
  const hali_hal_executable_export_t *x = hali_hal_executable_export(exe, 0);
  ck_assert_str_eq(x->name, "affine");
  ck_assert_uint_eq(x->binding_count, 2);
  ck_assert_uint_eq(x->constant_count, 2);
  ck_assert_uint_eq(x->workgroup_size[0], 4);
  float in[AFFINE_CAP], want[AFFINE_CAP], got[AFFINE_CAP];
  affine_input(in);
  affine_expected(in, 1.5f, want);
  const uint32_t constants[2] = {f32_bits(1.5f), AFFINE_N};
  for (int d = 0; d < DEVICE_COUNT; ++d) {
    hali_hal_device_t *dev = make_device(&devices[d]);
    ck_assert_ok(dispatch(dev, exe, 0, in, sizeof(in), got, sizeof(got),
                          constants, 2, AFFINE_GX, AFFINE_GY, AFFINE_GZ));
    for (int i = 0; i < AFFINE_CAP; ++i)
      ck_assert_msg(memcmp(&got[i], &want[i], 4) == 0,
                    "%s on %s: element %d is %g, expected %g",
                    loaders[_i].name, devices[d].name, i, (double)got[i],
                    (double)want[i]);
    hali_hal_device_release(dev);
  }
  hali_vm_link_free(m);
}
END_TEST

/* A kernel's non-zero return fails the submission's signal fence with a
 * status naming the executable, the export and the workgroup. */
START_TEST(test_kernel_error_fails_the_fence) {
  hali_vm_link_t *m = load(loader_exe(_i));
  hali_hal_executable_t *exe = m->executables[0];
  int32_t in[12], out[12];
  for (int i = 0; i < 12; ++i) in[i] = 100 + i;
  const uint32_t bad = 6; /* workgroup (2,1,0) of 4x3x1 */
  for (int d = 0; d < DEVICE_COUNT; d += 3) {
    hali_hal_device_t *dev = make_device(&devices[d]);
    hali_status_t s = dispatch(dev, exe, 1, in, sizeof(in), out, sizeof(out),
                               &bad, 1, 4, 3, 1);
    expect_status(s, loaders[_i].name[0] == 'b' ? HALI_STATUS_FAILED_PRECONDITION
                                                : HALI_STATUS_INTERNAL,
                  loaders[_i].failure, "executable 'k'", "'fail'",
                  "workgroup (2,1,0)", "of (4,3,1)");
    /* The failing workgroup ran (it writes before failing). */
    ck_assert_int_eq(out[bad], 100 + (int)bad + 1);
    /* Later submissions still run. */
    const uint32_t none = 99;
    ck_assert_ok(dispatch(dev, exe, 1, in, sizeof(in), out, sizeof(out),
                          &none, 1, 4, 3, 1));
    for (int i = 0; i < 12; ++i) ck_assert_int_eq(out[i], 101 + i);
    hali_hal_device_release(dev);
  }
  hali_vm_link_free(m);
}
END_TEST

/* One-workgroup dispatches from a reusable command buffer: its op loop
 * calls each loader's kernel with the state built at finalize (a C
 * kernel's function, or the executable's run_workgroup for ffi and
 * bytecode), on every device, with the results of the plain formula on
 * every replay; a failing one fails the fence with the loader's message
 * and the walk's annotations, naming its workgroup and its command. */
static hali_hal_command_buffer_t *reusable_cb(void) {
  hali_hal_command_buffer_t *cb = NULL;
  ck_assert_ok(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
      HALI_HAL_COMMAND_CATEGORY_DISPATCH, &cb));
  return cb;
}

static hali_status_t replay(hali_hal_device_t *dev,
                            hali_hal_command_buffer_t *cb) {
  hali_hal_fence_t *done = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&done));
  ck_assert_ok(hali_hal_device_queue_execute(dev, NULL, done, &cb, 1));
  hali_status_t s = hali_hal_fence_await(done, HALI_INFINITE);
  hali_hal_fence_release(done);
  return s;
}

START_TEST(test_reusable_single_workgroups) {
  hali_vm_link_t *m = load(loader_exe(_i));
  hali_hal_executable_t *exe = m->executables[0];
  float in[4], want[4];
  for (int i = 0; i < 4; ++i) in[i] = (float)i * 0.75f - 1.0f;
  test_affine(in, 1.5f, 4, want, 0);
  const uint32_t constants[2] = {f32_bits(1.5f), 4};
  for (int d = 0; d < DEVICE_COUNT; ++d) {
    hali_hal_device_t *dev = make_device(&devices[d]);
    hali_hal_buffer_t *bin = make_buffer(dev, sizeof(in));
    hali_hal_buffer_t *bout = make_buffer(dev, sizeof(in));
    hali_hal_buffer_t *bout2 = make_buffer(dev, sizeof(in));
    ck_assert_ok(hali_hal_buffer_write(bin, 0, in, sizeof(in)));
    hali_hal_command_buffer_t *cb = reusable_cb();
    ck_assert_ok(hali_hal_command_buffer_push_constants(cb, 0, constants, 2));
    const hali_hal_buffer_binding_t bindings[2] = {{0, bin, 0, sizeof(in)},
                                                   {1, bout, 0, sizeof(in)}};
    ck_assert_ok(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 2));
    for (int k = 0; k < 5; ++k)
      ck_assert_ok(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1));
    const hali_hal_buffer_binding_t second = {1, bout2, 0, sizeof(in)};
    ck_assert_ok(hali_hal_command_buffer_push_descriptor_set(cb, &second, 1));
    ck_assert_ok(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1));
    ck_assert_ok(hali_hal_command_buffer_finalize(cb));
    for (int r = 0; r < 3; ++r) {
      ck_assert_ok(replay(dev, cb));
      float got[4], got2[4];
      ck_assert_ok(hali_hal_buffer_read(bout, 0, got, sizeof(got)));
      ck_assert_ok(hali_hal_buffer_read(bout2, 0, got2, sizeof(got2)));
      for (int i = 0; i < 4; ++i)
        ck_assert_msg(memcmp(&got[i], &want[i], 4) == 0 &&
                          memcmp(&got2[i], &want[i], 4) == 0,
                      "%s on %s, replay %d: element %d is %g / %g, expected "
                      "%g",
                      loaders[_i].name, devices[d].name, r, i, (double)got[i],
                      (double)got2[i], (double)want[i]);
    }
    hali_hal_command_buffer_release(cb);

    /* fail(bad): out[0] = in[0] + 1, then fails when bad == 0. */
    int32_t iin[1] = {100}, iout[2] = {0, 0};
    ck_assert_ok(hali_hal_buffer_write(bin, 0, iin, 4));
    ck_assert_ok(hali_hal_buffer_write(bout, 0, iout, 8));
    cb = reusable_cb();
    const hali_hal_buffer_binding_t ib[2] = {{0, bin, 0, 4}, {1, bout, 0, 8}};
    ck_assert_ok(hali_hal_command_buffer_push_descriptor_set(cb, ib, 2));
    const uint32_t never = 99, now = 0;
    ck_assert_ok(hali_hal_command_buffer_push_constants(cb, 0, &never, 1));
    ck_assert_ok(hali_hal_command_buffer_dispatch(cb, exe, 1, 1, 1, 1));
    ck_assert_ok(hali_hal_command_buffer_push_constants(cb, 0, &now, 1));
    ck_assert_ok(hali_hal_command_buffer_dispatch(cb, exe, 1, 1, 1, 1));
    ck_assert_ok(hali_hal_command_buffer_dispatch(cb, exe, 1, 1, 1, 1));
    ck_assert_ok(hali_hal_command_buffer_finalize(cb));
    expect_status(replay(dev, cb),
                  loaders[_i].name[0] == 'b' ? HALI_STATUS_FAILED_PRECONDITION
                                             : HALI_STATUS_INTERNAL,
                  loaders[_i].failure, "executable 'k'", "'fail'",
                  "at workgroup (0,0,0) of (1,1,1)",
                  "executing command 4 of 6");
    ck_assert_ok(hali_hal_buffer_read(bout, 0, iout, 8));
    ck_assert_int_eq(iout[0], 101);
    hali_hal_command_buffer_release(cb);
    hali_hal_buffer_release(bin);
    hali_hal_buffer_release(bout);
    hali_hal_buffer_release(bout2);
    hali_hal_device_release(dev);
  }
  hali_vm_link_free(m);
}
END_TEST

/* The whole stack: a module whose @main records the dispatch with HAL ops
 * and returns a view, run by the interpreter. */
static const char *const vm_main =
    "func @main(%in: !hal.buffer_view, %a: f32) -> !hal.buffer_view {\n"
    "  %f32 = const.i32 0x21000020\n"
    "  %dense = const.i32 1\n"
    "  %zero32 = const.i32 0\n"
    "  %one32 = const.i32 1\n"
    "  %n = hal.buffer_view.dim %in, %zero32\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %four = const.i64 4\n"
    "  %bytes = mul.i64 %n, %four\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %out = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %inb = hal.buffer_view.buffer %in\n"
    "  %cat = const.i32 2\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %cat\n"
    "  %abits = bitcast.f32.i32 %a\n"
    "  %n32 = trunc.i64.i32 %n\n"
    "  hal.command_buffer.push_constants %cmd, %zero32, [%abits, %n32]\n"
    "  %zero = const.i64 0\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %inb, %zero, "
    "%bytes\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %one32, %out, %zero, "
    "%bytes\n"
    "  %k3 = const.i32 3\n"
    "  %groups = add.i32 %n32, %k3\n"
    "  %k4 = const.i32 4\n"
    "  %groups = div.u.i32 %groups, %k4\n"
    "  %exe = hal.executable.get @k\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %groups, %one32, "
    "%one32\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %wait = hal.fence.null\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  %forever = const.i64 -1\n"
    "  %status = hal.fence.await %done, %forever\n"
    "  %ok = eq.i32 %status, %zero32\n"
    "  assert %ok, \"the dispatch failed\"\n"
    "  %view = hal.buffer_view.create %out, %f32, %dense, [%n]\n"
    "  return %view\n"
    "}\n";

START_TEST(test_run_through_the_vm) {
  hali_vm_link_t *m = NULL;
  ck_assert_ok(load_with(loader_exe(_i), vm_main, NULL, &m));
  enum { N = 10 };
  float in[N], want[N], got[N];
  for (int i = 0; i < N; ++i) in[i] = (float)i;
  for (uint32_t l = 0; l < 3; ++l) {
    float full[12] = {0};
    test_affine(in, 2.0f, N, full, l);
    for (uint32_t i = l * 4; i < N && i < l * 4 + 4; ++i) want[i] = full[i];
  }
  for (int d = 0; d < DEVICE_COUNT; ++d) {
    hali_hal_device_t *dev = make_device(&devices[d]);
    hali_hal_buffer_t *b = make_buffer(dev, sizeof(in));
    ck_assert_ok(hali_hal_buffer_write(b, 0, in, sizeof(in)));
    const hali_hal_dim_t shape[1] = {N};
    hali_hal_buffer_view_t *view = NULL;
    ck_assert_ok(hali_hal_buffer_view_create(
        b, 1, shape, HALI_HAL_ELEMENT_TYPE_FLOAT_32,
        HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &view));
    hali_hal_buffer_release(b);
    hali_value_t args[2] = {{.type = HALI_TYPE_BUFFER_VIEW},
                            hali_value_f32(2.0f)};
    args[0].ref = (hali_ref_t *)view;
    hali_value_t result = {0};
    hali_vm_stack_t *st = NULL;
    ck_assert_ok(hali_vm_stack_create(0, &st));
    st->device = dev;
    ck_assert_ok(hali_vm_link_invoke(st, m,
                                     hali_vm_module_lookup(m->module, "main"),
                                     args, 2, &result, 1));
    ck_assert_int_eq(result.type, HALI_TYPE_BUFFER_VIEW);
    hali_hal_buffer_view_t *rv = (hali_hal_buffer_view_t *)result.ref;
    ck_assert_ok(hali_hal_buffer_read(hali_hal_buffer_view_buffer(rv), 0, got,
                                      sizeof(got)));
    for (int i = 0; i < N; ++i)
      ck_assert_msg(got[i] == want[i], "%s on %s: [%d] = %g, expected %g",
                    loaders[_i].name, devices[d].name, i, (double)got[i],
                    (double)want[i]);
    hali_value_release(&result);
    hali_value_release(&args[0]);
    hali_vm_stack_free(st);
    hali_hal_device_release(dev);
  }
  hali_vm_link_free(m);
}
END_TEST

/* An executable may outlive its module: command buffers retain it. */
START_TEST(test_executable_outlives_module) {
  hali_vm_link_t *m = load(loader_exe(_i));
  hali_hal_executable_t *exe = m->executables[0];
  hali_hal_executable_retain(exe);
  hali_vm_link_free(m);
  float in[AFFINE_CAP], want[AFFINE_CAP], got[AFFINE_CAP];
  affine_input(in);
  affine_expected(in, -3.0f, want);
  const uint32_t constants[2] = {f32_bits(-3.0f), AFFINE_N};
  hali_hal_device_t *dev = make_device(&devices[2]);
  ck_assert_ok(dispatch(dev, exe, 0, in, sizeof(in), got, sizeof(got),
                        constants, 2, AFFINE_GX, AFFINE_GY, AFFINE_GZ));
  ck_assert_int_eq(memcmp(got, want, sizeof(got)), 0);
  hali_hal_device_release(dev);
  hali_hal_executable_release(exe);
}
END_TEST

/* One executable serving two devices at once (a bytecode executable keeps
 * a register stack per worker id, and both devices have a worker 0). */
START_TEST(test_two_devices_share_an_executable) {
  hali_vm_link_t *m = load(loader_exe(_i));
  hali_hal_executable_t *exe = m->executables[0];
  hali_hal_device_t *a = make_device(&devices[3]);
  hali_hal_device_t *b = make_device(&devices[3]);
  float in[AFFINE_CAP], want[AFFINE_CAP];
  affine_input(in);
  affine_expected(in, 0.25f, want);
  const uint32_t constants[2] = {f32_bits(0.25f), AFFINE_N};
  hali_hal_buffer_t *bin[2], *bout[2];
  hali_hal_command_buffer_t *cb[2];
  hali_hal_fence_t *done[2][8];
  hali_hal_device_t *devs[2] = {a, b};
  for (int k = 0; k < 2; ++k) {
    bin[k] = make_buffer(devs[k], sizeof(in));
    bout[k] = make_buffer(devs[k], sizeof(in));
    ck_assert_ok(hali_hal_buffer_write(bin[k], 0, in, sizeof(in)));
    ck_assert_ok(hali_hal_command_buffer_create(
        HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
        HALI_HAL_COMMAND_CATEGORY_DISPATCH, &cb[k]));
    ck_assert_ok(hali_hal_command_buffer_push_constants(cb[k], 0, constants, 2));
    const hali_hal_buffer_binding_t bindings[2] = {
        {0, bin[k], 0, sizeof(in)}, {1, bout[k], 0, sizeof(in)}};
    ck_assert_ok(
        hali_hal_command_buffer_push_descriptor_set(cb[k], bindings, 2));
    for (int r = 0; r < 20; ++r)
      ck_assert_ok(hali_hal_command_buffer_dispatch(cb[k], exe, 0, AFFINE_GX,
                                                    AFFINE_GY, AFFINE_GZ));
    ck_assert_ok(hali_hal_command_buffer_finalize(cb[k]));
  }
  /* Interleave submissions so both queues run at the same time.  Each
   * device's eight are chained by their fences: only fences order
   * submissions, and unordered ones writing the same buffer would race
   * (ThreadSanitizer saw them, on local-task's several runners). */
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 2; ++k) {
      ck_assert_ok(hali_hal_fence_create_pending(&done[k][r]));
      ck_assert_ok(hali_hal_device_queue_execute(
          devs[k], r ? done[k][r - 1] : NULL, done[k][r], &cb[k], 1));
    }
  for (int k = 0; k < 2; ++k) {
    for (int r = 0; r < 8; ++r) {
      ck_assert_ok(hali_hal_fence_await(done[k][r], HALI_INFINITE));
      hali_hal_fence_release(done[k][r]);
    }
    float got[AFFINE_CAP];
    ck_assert_ok(hali_hal_buffer_read(bout[k], 0, got, sizeof(got)));
    ck_assert_int_eq(memcmp(got, want, sizeof(got)), 0);
    hali_hal_command_buffer_release(cb[k]);
    hali_hal_buffer_release(bin[k]);
    hali_hal_buffer_release(bout[k]);
  }
  hali_hal_device_release(a);
  hali_hal_device_release(b);
  hali_vm_link_free(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Load failures. */

START_TEST(test_missing_library) {
  /* native and ffi: every place tried, each with dlerror()'s text; the
   * module's directory first, then the search path. */
  const char *const fmts[2] = {"native", "ffi"};
  for (int i = 0; i < 2; ++i) {
    char exe[256];
    snprintf(exe, sizeof(exe),
             "executable @k format \"%s\" library \"no_such_kernels.so\" {\n"
             "  export @affine" SIG_AFFINE "\n}\n",
             fmts[i]);
    hali_vm_link_t *m = NULL;
    char loading[64];
    snprintf(loading, sizeof(loading),
             "loading executable @k (format \"%s\")", fmts[i]);
    expect_status(load_with(exe, NULL, "/nonexistent-dir/m.hasm", &m),
                  HALI_STATUS_NOT_FOUND,
                  "cannot load library \"no_such_kernels.so\"; tried:",
                  "\n    /nonexistent-dir/no_such_kernels.so: ",
                  "\n    " KERNEL_DIR "/no_such_kernels.so: ",
                  "cannot open shared object file", loading);
    ck_assert_ptr_null(m);
  }
  /* An absolute path is tried as given, and only there. */
  hali_vm_link_t *m = NULL;
  expect_status(
      load_with("executable @k format \"native\" library \"/nonexistent/x.so\" "
                "{\n  export @affine" SIG_AFFINE "\n}\n",
                NULL, "/somewhere/m.hasm", &m),
      HALI_STATUS_NOT_FOUND, "tried:\n    /nonexistent/x.so: /nonexistent/x.so");
  /* Not a shared object at all: dlerror says so. */
  char bogus[] = "/tmp/hali-loaders-XXXXXX.so";
  int fd = mkstemps(bogus, 3);
  ck_assert_int_ge(fd, 0);
  char junk[256];
  memset(junk, 'x', sizeof(junk));
  ck_assert_int_eq(write(fd, junk, sizeof(junk)), (int)sizeof(junk));
  close(fd);
  char exe[256];
  snprintf(exe, sizeof(exe),
           "executable @k format \"native\" library \"%s\" {\n"
           "  export @affine" SIG_AFFINE "\n}\n",
           bogus);
  expect_status(load_with(exe, NULL, NULL, &m), HALI_STATUS_NOT_FOUND, bogus,
                "invalid ELF header");
  unlink(bogus);
  /* A native or ffi executable without a library. */
  expect_status(load_with("executable @k format \"ffi\" {\n  export @affine" SIG_AFFINE
                          "\n}\n",
                          NULL, NULL, &m),
                HALI_STATUS_INVALID_ARGUMENT, "no library given");
}
END_TEST

START_TEST(test_missing_symbol) {
  hali_vm_link_t *m = NULL;
  /* native: a library without the query function (the ffi one). */
  expect_status(
      load_with("executable @k format \"native\" library \"test_ffi.so\" {\n"
                "  export @affine" SIG_AFFINE "\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_NOT_FOUND,
      "library \"test_ffi.so\" does not export hali_kernel_library_query",
      "undefined symbol: hali_kernel_library_query");
  /* native: the library was built for a newer kernel ABI. */
  char want[96];
  snprintf(want, sizeof(want),
           "library \"test_future.so\" does not support kernel ABI version %d",
           HALI_KERNEL_ABI_VERSION);
  expect_status(
      load_with("executable @k format \"native\" library \"test_future.so\" {\n"
                "  export @affine" SIG_AFFINE "\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_UNIMPLEMENTED, want);
  /* native: the table has no such kernel. */
  expect_status(
      load_with("executable @k format \"native\" library \"test_native.so\" {\n"
                "  export @affine" SIG_AFFINE "\n"
                "  export @scale" SIG_AFFINE " symbol \"scale\"\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_NOT_FOUND,
      "export @scale: kernel 'scale' not found in library 'test_native'");
  /* ffi: dlsym's text names the symbol. */
  expect_status(
      load_with("executable @k format \"ffi\" library \"test_ffi.so\" {\n"
                "  export @affine" SIG_AFFINE " symbol \"affine_ffi\"\n"
                "  export @gone" SIG_AFFINE "\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_NOT_FOUND,
      "export @gone: symbol 'gone' not found in \"test_ffi.so\"",
      "undefined symbol: gone");
  /* static: the kernel, and the library itself. */
  expect_status(
      load_with("executable @k format \"static\" library \"test_static\" {\n"
                "  export @nope" SIG_AFFINE "\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_NOT_FOUND,
      "export @nope: kernel 'nope' not found in library 'test_static'");
  expect_status(
      load_with("executable @k format \"static\" library \"elsewhere\" {\n"
                "  export @affine" SIG_AFFINE "\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_NOT_FOUND,
      "no static kernel library named 'elsewhere' is registered (1 "
      "registered)");
  /* Without a library name, static looks the executable's name up. */
  ck_assert_ok(load_with("executable @test_static format \"static\" {\n"
                         "  export @affine" SIG_AFFINE "\n}\n",
                         NULL, NULL, &m));
  ck_assert_ptr_nonnull(m);
  hali_vm_link_free(m);
  m = NULL;
  /* bytecode: an export without a kernel function. */
  expect_status(load_with("executable @k format \"bytecode\" {\n"
                          "  export @affine" SIG_AFFINE "\n}\n",
                          NULL, NULL, &m),
                HALI_STATUS_INVALID_ARGUMENT,
                "export @affine has no kernel function (function @f)");
  ck_assert_ptr_null(m);
}
END_TEST

START_TEST(test_signature_mismatch) {
  hali_vm_link_t *m = NULL;
  /* native and static: the table's counts against the signature. */
  const char *const libs[2][2] = {{"native", "test_native.so"},
                                  {"static", "test_static"}};
  for (int i = 0; i < 2; ++i) {
    char exe[512];
    snprintf(exe, sizeof(exe),
             "executable @k format \"%s\" library \"%s\" {\n"
             "  export @affine(tensor<?xf32>, f32) -> (tensor<?xf32>)\n}\n",
             libs[i][0], libs[i][1]);
    expect_status(load_with(exe, NULL, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                  "export @affine: kernel 'affine' takes 2 binding(s) and 2 "
                  "push constant(s) but the signature declares 2 and 1");
    snprintf(exe, sizeof(exe),
             "executable @k format \"%s\" library \"%s\" {\n"
             "  export @fail(tensor<?xi32>, tensor<?xi32>, i32) -> "
             "(tensor<?xi32>)\n}\n",
             libs[i][0], libs[i][1]);
    expect_status(load_with(exe, NULL, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                  "kernel 'fail' takes 2 binding(s) and 1 push constant(s) "
                  "but the signature declares 3 and 1");
  }
  /* bytecode: the kernel function's parameters against the signature. */
  expect_status(
      load_with("executable @k format \"bytecode\" {\n"
                "  export @affine" SIG_AFFINE " function @kern\n}\n"
                "func @kern(%in: !hal.buffer, %a: f32, %out: !hal.buffer) {\n"
                "  return\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_INVALID_ARGUMENT,
      "export @affine: kernel function @kern takes 3 parameter(s) and returns "
      "0; a kernel for this signature takes 10 (3 argument(s), 1 result "
      "buffer(s), then 6 i32 workgroup ids and counts)");
  expect_status(
      load_with("executable @k format \"bytecode\" {\n"
                "  export @affine" SIG_AFFINE " function @kern\n}\n"
                "func @kern(%in: !hal.buffer, %a: i32, %n: i32, %out: "
                "!hal.buffer, %x: i32, %y: i32, %z: i32, %cx: i32, %cy: i32, "
                "%cz: i32) {\n  return\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_INVALID_ARGUMENT,
      "export @affine: parameter 1 of kernel function @kern is i32, expected "
      "f32");
  /* A table compiled against another ABI version. */
  ck_assert_ok(
      hali_executable_registry_register_static(registry, &future_library));
  expect_status(
      load_with("executable @k format \"static\" library \"test_future\" {\n"
                "  export @affine" SIG_AFFINE "\n}\n",
                NULL, NULL, &m),
      HALI_STATUS_INVALID_ARGUMENT, "kernel library 'test_future' has ABI "
                                    "version 2; this runtime supports 1");
  ck_assert_ptr_null(m);
}
END_TEST

START_TEST(test_unsupported_ffi_type) {
  hali_vm_link_t *m = NULL;
  /* Scalars come back through tensors, never as the return value: the
   * materialize-interfaces pass rejects the signature before any loader. */
  expect_status(
      load_with("executable @k format \"ffi\" library \"test_ffi.so\" {\n"
                "  export @sum(tensor<?xf32>) -> (f32) symbol \"affine_ffi\"\n"
                "}\n",
                NULL, NULL, &m),
      HALI_STATUS_INVALID_ARGUMENT,
      "export @k::@sum: result 0 has type f32, but kernel results are "
      "tensors");
  /* A parameter type ffi cannot pass (the assembler rejects refs in
   * signatures, so the IR is edited the way a buggy producer would). */
  hali_vm_module_t *raw = NULL;
  ck_assert_ok(hali_test_try_module(
      "module @t\nexecutable @k format \"ffi\" library \"test_ffi.so\" {\n"
      "  export @affine" SIG_AFFINE " symbol \"affine_ffi\"\n}\n",
      &raw));
  raw->ir->executables[0].exports[0].params[1].type = HALI_TYPE_BUFFER;
  const char *paths[] = {KERNEL_DIR};
  hali_vm_link_t *rl = NULL;
  ck_assert_ok(hali_vm_link_create(raw, &rl));
  expect_status(hali_executable_registry_load_link(registry, rl, NULL, paths, 1),
                HALI_STATUS_INVALID_ARGUMENT,
                "export @affine parameter 1 has type !hal.buffer, which ffi "
                "kernels cannot take");
  hali_vm_link_free(rl);
  hali_vm_module_release(raw);
}
END_TEST

/* Every scalar width and kind reaches its own parameter slot. */
START_TEST(test_ffi_parameter_order) {
  hali_vm_link_t *m = NULL;
  ck_assert_ok(load_with(
      "executable @k format \"ffi\" library \"test_ffi.so\" {\n"
      "  export @mixed(tensor<?xf64>, f64, i64, f32, i32) -> (tensor<?xf64>) "
      "symbol \"mixed_ffi\"\n}\n",
      NULL, NULL, &m));
  hali_hal_executable_t *exe = m->executables[0];
  ck_assert_uint_eq(hali_hal_executable_export(exe, 0)->constant_count, 6);
  double in[4] = {3.0, 0, 0, 0}, out[4];
  double d = 0.5;
  int64_t k = -5000000000;
  uint32_t c[6];
  memcpy(&c[0], &d, 8);
  memcpy(&c[2], &k, 8);
  c[4] = f32_bits(-2.5f);
  c[5] = (uint32_t)-7;
  hali_hal_device_t *dev = make_device(&devices[0]);
  ck_assert_ok(
      dispatch(dev, exe, 0, in, sizeof(in), out, sizeof(out), c, 6, 1, 1, 1));
  ck_assert(out[0] == 1.5);
  ck_assert(out[1] == -5000000000.0);
  ck_assert(out[2] == -2.5);
  ck_assert(out[3] == -7.0);
  hali_hal_device_release(dev);
  hali_vm_link_free(m);
}
END_TEST

START_TEST(test_too_many_push_constants) {
  hali_vm_link_t *m = NULL;
  /* A signature with 66 push constants (33 f64). */
  char sig[1024] = "(tensor<?xf32>";
  for (int i = 0; i < 33; ++i) strcat(sig, ", f64");
  strcat(sig, ") -> (tensor<?xf32>)");
  /* A bytecode kernel function that fits it. */
  char fn[2048] = "func @greedy_kernel(%in: !hal.buffer";
  for (int i = 0; i < 33; ++i)
    snprintf(fn + strlen(fn), sizeof(fn) - strlen(fn), ", %%c%d: f64", i);
  strcat(fn, ", %out: !hal.buffer, %x: i32, %y: i32, %z: i32, %cx: i32, "
             "%cy: i32, %cz: i32) {\n  return\n}\n");
  const char *const heads[LOADER_COUNT][2] = {
      {"format \"native\" library \"test_native.so\"", "symbol \"affine\""},
      {"format \"ffi\" library \"test_ffi.so\"", "symbol \"affine_ffi\""},
      {"format \"static\" library \"test_greedy\"", ""},
      {"format \"bytecode\"", "function @greedy_kernel"}};
  ck_assert_ok(
      hali_executable_registry_register_static(registry, &greedy_library));
  for (int i = 0; i < LOADER_COUNT; ++i) {
    char exe[4096];
    snprintf(exe, sizeof(exe), "executable @k %s {\n  export @greedy%s %s\n}\n",
             heads[i][0], sig, heads[i][1]);
    hali_status_t s = load_with(exe, i == 3 ? fn : NULL, NULL, &m);
    ck_assert_ptr_null(m);
    if (i == 0) { /* a table's counts must match the signature's */
      expect_status(s, HALI_STATUS_INVALID_ARGUMENT,
                    "kernel 'affine' takes 2 binding(s) and 2 push "
                    "constant(s) but the signature declares 2 and 66");
    } else if (i == 2) {
      expect_status(s, HALI_STATUS_INVALID_ARGUMENT,
                    "kernel 'greedy' takes 2 binding(s) and 65 push "
                    "constant(s) but the signature declares 2 and 66");
    } else { /* ffi and bytecode: the HAL's limit */
      expect_status(s, HALI_STATUS_INVALID_ARGUMENT,
                    "executable 'k' export 0 'greedy' declares 66 push "
                    "constants (max 64)");
    }
  }
  /* A table that agrees with such a signature is refused by the HAL. */
  char sig65[1024] = "(tensor<?xf32>";
  for (int i = 0; i < 65; ++i) strcat(sig65, ", i32");
  strcat(sig65, ") -> (tensor<?xf32>)");
  char exe[2048];
  snprintf(exe, sizeof(exe),
           "executable @k format \"static\" library \"test_greedy\" {\n"
           "  export @greedy%s\n}\n",
           sig65);
  expect_status(load_with(exe, NULL, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                "export 0 'greedy' declares 65 push constants (max 64)");
  /* Recording more constants than the HAL holds. */
  hali_hal_command_buffer_t *cb = NULL;
  ck_assert_ok(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT, HALI_HAL_COMMAND_CATEGORY_DISPATCH,
      &cb));
  uint32_t values[8] = {0};
  expect_status(hali_hal_command_buffer_push_constants(cb, 60, values, 8),
                HALI_STATUS_OUT_OF_RANGE, "60");
  hali_hal_command_buffer_release(cb);
}
END_TEST

/* A workgroup size the module declares wins over the kernel table's, also
 * when its product wraps to 1 in 32 bits (3 x 3 x 954437177 = 2^33 + 1):
 * "declared" is decided per dimension, not by a product. */
START_TEST(test_declared_workgroup_size_product_wraps) {
  static const char *const exe =
      "executable @k format \"static\" library \"test_static\" {\n"
      "  export @affine" SIG_AFFINE " workgroup_size [4, 1, 1]\n"
      "  export @fail" SIG_FAIL " workgroup_size [3, 3, 954437177]\n"
      "}\n";
  hali_vm_link_t *m = load(exe);
  const hali_hal_executable_export_t *x =
      hali_hal_executable_export(m->executables[0], 1);
  ck_assert_uint_eq(x->workgroup_size[0], 3);
  ck_assert_uint_eq(x->workgroup_size[1], 3);
  ck_assert_uint_eq(x->workgroup_size[2], 954437177);
  hali_vm_link_free(m);
}
END_TEST

/* Binding ranges and counts are checked when recorded, so a kernel never
 * sees a bad one. */
START_TEST(test_binding_out_of_range) {
  hali_vm_link_t *m = load(static_exe);
  hali_hal_executable_t *exe = m->executables[0];
  hali_hal_device_t *dev = make_device(&devices[0]);
  hali_hal_buffer_t *b = make_buffer(dev, 64);
  hali_hal_command_buffer_t *cb = NULL;
  ck_assert_ok(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT, HALI_HAL_COMMAND_CATEGORY_DISPATCH,
      &cb));
  const uint32_t c[2] = {0, 16};
  ck_assert_ok(hali_hal_command_buffer_push_constants(cb, 0, c, 2));
  /* Past the end of the buffer. */
  hali_hal_buffer_binding_t bad = {1, b, 32, 64};
  expect_status(hali_hal_command_buffer_push_descriptor_set(cb, &bad, 1),
                HALI_STATUS_OUT_OF_RANGE, "binding 1");
  /* Beyond the HAL's binding slots. */
  bad = (hali_hal_buffer_binding_t){HALI_HAL_MAX_BINDINGS, b, 0, 64};
  expect_status(hali_hal_command_buffer_push_descriptor_set(cb, &bad, 1),
                HALI_STATUS_OUT_OF_RANGE, "32");
  /* A binding the export needs was never pushed. */
  hali_hal_buffer_binding_t good = {0, b, 0, 64};
  ck_assert_ok(hali_hal_command_buffer_push_descriptor_set(cb, &good, 1));
  expect_status(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1),
                HALI_STATUS_FAILED_PRECONDITION, "binding 1");
  /* An export that does not exist. */
  good.ordinal = 1;
  ck_assert_ok(hali_hal_command_buffer_push_descriptor_set(cb, &good, 1));
  expect_status(hali_hal_command_buffer_dispatch(cb, exe, 2, 1, 1, 1),
                HALI_STATUS_OUT_OF_RANGE, "2");
  ck_assert_ok(hali_hal_command_buffer_finalize(cb));
  ck_assert_ok(hali_hal_device_queue_execute(dev, NULL, NULL, &cb, 1));
  ck_assert_uint_eq(atomic_load(&static_calls), 0);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(b);
  hali_hal_device_release(dev);
  hali_vm_link_free(m);

  /* The same through the VM: the op fails, naming the source line, and
   * nothing was dispatched. */
  const char *main_text =
      "func @main() {\n"
      "  %device = hal.device.get\n"
      "  %allocator = hal.device.allocator %device\n"
      "  %memory = const.i32 19\n"
      "  %usage = const.i32 7\n"
      "  %size = const.i64 64\n"
      "  %b = hal.allocator.allocate %allocator, %memory, %usage, %size\n"
      "  %one = const.i32 1\n"
      "  %two = const.i32 2\n"
      "  %cmd = hal.command_buffer.create %device, %one, %two\n"
      "  %zero = const.i32 0\n"
      "  %n = const.i32 16\n"
      "  hal.command_buffer.push_constants %cmd, %zero, [%zero, %n]\n"
      "  %at = const.i64 0\n"
      "  hal.command_buffer.push_descriptor_set %cmd, %zero, %b, %at, %size\n"
      "  %big = const.i64 128\n"
      "  hal.command_buffer.push_descriptor_set %cmd, %one, %b, %at, %big\n"
      "  %exe = hal.executable.get @k\n"
      "  hal.command_buffer.dispatch %cmd, %exe, %zero, %one, %one, %one\n"
      "  return\n"
      "}\n";
  ck_assert_ok(load_with(static_exe, main_text, NULL, &m));
  dev = make_device(&devices[0]);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->device = dev;
  expect_status(
      hali_vm_link_invoke(st, m, hali_vm_module_lookup(m->module, "main"),
                          NULL, 0, NULL, 0),
      HALI_STATUS_OUT_OF_RANGE, "@main", "test.hasm:");
  ck_assert_uint_eq(atomic_load(&static_calls), 0);
  hali_vm_stack_free(st);
  hali_hal_device_release(dev);
  hali_vm_link_free(m);
}
END_TEST

START_TEST(test_unsupported_format) {
  hali_vm_link_t *m = NULL;
  expect_status(load_with("executable @gpu format \"cuda\" library \"k.ptx\" {\n"
                          "  export @affine" SIG_AFFINE "\n}\n",
                          NULL, NULL, &m),
                HALI_STATUS_UNIMPLEMENTED,
                "executable @gpu has format \"cuda\", which no loader "
                "supports; available formats: native, ffi, static, bytecode");
  ck_assert_ptr_null(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Host registration: static kernels and loaders of the host's own. */

START_TEST(test_register_static) {
  expect_status(
      hali_executable_registry_register_static(registry, &static_library),
      HALI_STATUS_ALREADY_EXISTS,
      "static kernel library 'test_static' is already registered");
  const hali_kernel_library_t nameless = {HALI_KERNEL_ABI_VERSION, NULL, 0,
                                          NULL};
  expect_status(hali_executable_registry_register_static(registry, &nameless),
                HALI_STATUS_INVALID_ARGUMENT, "needs a name");
  /* A second registry knows nothing of the first one's statics. */
  hali_executable_registry_t *other = NULL;
  ck_assert_ok(hali_executable_registry_create(&other));
  hali_vm_module_t *m = NULL;
  ck_assert_ok(hali_test_try_module(
      "module @t\nexecutable @k format \"static\" library \"test_static\" {\n"
      "  export @affine" SIG_AFFINE "\n}\n",
      &m));
  hali_vm_link_t *ml = NULL;
  ck_assert_ok(hali_vm_link_create(m, &ml));
  expect_status(hali_executable_registry_load_link(other, ml, NULL, NULL, 0),
                HALI_STATUS_NOT_FOUND, "(0 registered)");
  hali_executable_registry_free(other);
  hali_vm_link_free(ml);
  hali_vm_module_release(m);
}
END_TEST

/* A host loader for format "toy": every export becomes a kernel that
 * writes push constant 0 into each 32-bit word of its last binding. */
typedef struct {
  int supports_calls, load_calls;
  int *destroyed; /* set when the registry frees us */
  hali_kernel_export_t exports[4];
  hali_kernel_library_t library;
} toy_loader_t;

static int toy_kernel(const hali_kernel_dispatch_state_t *d,
                      const hali_kernel_workgroup_state_t *w) {
  (void)w;
  uint32_t *out = d->binding_ptrs[d->binding_count - 1];
  size_t words = d->binding_lengths[d->binding_count - 1] / 4;
  for (size_t i = 0; i < words; ++i) out[i] = d->constants[0];
  return 0;
}

static void toy_destroy(void *self) {
  toy_loader_t *t = self;
  *t->destroyed = 1;
  free(t);
}

static bool toy_supports(void *self, const char *format) {
  ((toy_loader_t *)self)->supports_calls++;
  return strcmp(format, "toy") == 0;
}

static hali_status_t toy_load(void *self,
                              const hali_executable_load_params_t *p,
                              hali_hal_executable_t **out) {
  toy_loader_t *t = self;
  const hali_ir_executable_t *e = p->executable;
  t->load_calls++;
  if (e->export_count > 4)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT, "too many exports");
  for (uint32_t i = 0; i < e->export_count; ++i) {
    uint32_t bindings, constants;
    hali_ir_export_interface(&e->exports[i], &bindings, &constants);
    t->exports[i] = (hali_kernel_export_t){
        e->exports[i].name, toy_kernel, bindings, constants, {1, 1, 1}, 0};
  }
  t->library = (hali_kernel_library_t){HALI_KERNEL_ABI_VERSION, e->name,
                                       e->export_count, t->exports};
  /* The executable copies names and metadata; the table lives in the
   * loader, which the registry keeps until it is freed. */
  return hali_hal_executable_create_from_library(&t->library, "toy", out);
}

static const hali_executable_loader_vtable_t toy_vtable = {
    toy_destroy, toy_supports, toy_load, "toy"};

START_TEST(test_host_loader) {
  int destroyed = 0;
  toy_loader_t *toy = calloc(1, sizeof(*toy));
  toy->destroyed = &destroyed;
  ck_assert_ok(hali_executable_registry_register(registry, &toy_vtable, toy));
  hali_vm_link_t *m = NULL;
  ck_assert_ok(load_with("executable @mine format \"toy\" {\n"
                         "  export @splat(i32) -> (tensor<?xi32>)\n}\n",
                         NULL, NULL, &m));
  ck_assert_int_eq(toy->load_calls, 1);
  /* Asked after the four built-in loaders said no. */
  ck_assert_int_eq(toy->supports_calls, 1);
  hali_hal_executable_t *exe = m->executables[0];
  ck_assert_str_eq(hali_hal_executable_format(exe), "toy");
  ck_assert_str_eq(hali_hal_executable_name(exe), "mine");
  hali_hal_device_t *dev = make_device(&devices[3]);
  hali_hal_buffer_t *b = make_buffer(dev, 16);
  hali_hal_command_buffer_t *cb = NULL;
  ck_assert_ok(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT, HALI_HAL_COMMAND_CATEGORY_DISPATCH,
      &cb));
  const uint32_t c = 0xC0FFEE;
  ck_assert_ok(hali_hal_command_buffer_push_constants(cb, 0, &c, 1));
  const hali_hal_buffer_binding_t binding = {0, b, 0, 16};
  ck_assert_ok(hali_hal_command_buffer_push_descriptor_set(cb, &binding, 1));
  ck_assert_ok(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1));
  ck_assert_ok(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *done = NULL;
  ck_assert_ok(hali_hal_fence_create_pending(&done));
  ck_assert_ok(hali_hal_device_queue_execute(dev, NULL, done, &cb, 1));
  ck_assert_ok(hali_hal_fence_await(done, HALI_INFINITE));
  uint32_t got[4];
  ck_assert_ok(hali_hal_buffer_read(b, 0, got, sizeof(got)));
  for (int i = 0; i < 4; ++i) ck_assert_uint_eq(got[i], 0xC0FFEE);
  hali_hal_fence_release(done);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(b);
  hali_hal_device_release(dev);
  hali_vm_link_free(m);
  /* Its format is now listed among the available ones. */
  expect_status(load_with("executable @gpu format \"cuda\" {\n"
                          "  export @affine" SIG_AFFINE "\n}\n",
                          NULL, NULL, &m),
                HALI_STATUS_UNIMPLEMENTED,
                "available formats: native, ffi, static, bytecode, toy");
  /* A built-in format stays with its built-in loader: registration order
   * decides. */
  ck_assert_ok(load_with(static_exe, NULL, NULL, &m));
  ck_assert_str_eq(hali_hal_executable_format(m->executables[0]), "static");
  ck_assert_int_eq(toy->load_calls, 1);
  hali_vm_link_free(m);
  ck_assert_int_eq(destroyed, 0);
  registry_teardown();
  ck_assert_int_eq(destroyed, 1);
  registry_setup();
}
END_TEST

/* Loaders are tried in registration order: of two that support a format,
 * the first one loads it. */
START_TEST(test_loader_order) {
  int destroyed[2] = {0, 0};
  toy_loader_t *first = calloc(1, sizeof(*first));
  toy_loader_t *second = calloc(1, sizeof(*second));
  first->destroyed = &destroyed[0];
  second->destroyed = &destroyed[1];
  ck_assert_ok(hali_executable_registry_register(registry, &toy_vtable, first));
  ck_assert_ok(
      hali_executable_registry_register(registry, &toy_vtable, second));
  hali_vm_link_t *m = NULL;
  ck_assert_ok(load_with("executable @mine format \"toy\" {\n"
                         "  export @splat(i32) -> (tensor<?xi32>)\n}\n",
                         NULL, NULL, &m));
  ck_assert_int_eq(first->load_calls, 1);
  ck_assert_int_eq(second->load_calls, 0);
  ck_assert_int_eq(second->supports_calls, 0);
  hali_vm_link_free(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The CLI: kernel libraries found through --executable-path and
 * $HALI_EXECUTABLE_PATH.  The module is copied into a scratch directory so
 * that its own directory never has the kernels (in-tree builds put them
 * beside the examples). */

static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/hali-loaders-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  char path[512];
  snprintf(path, sizeof(path), "%s/saxpy.hasm", tmpdir);
  unlink(path);
  rmdir(tmpdir);
}

static void copy_example(const char *name) {
  char src[512], dst[512];
  snprintf(src, sizeof(src), HALI_SRCDIR "/examples/%s", name);
  snprintf(dst, sizeof(dst), "%s/saxpy.hasm", tmpdir);
  uint8_t *data = NULL;
  size_t size = 0;
  ck_assert_ok(hali_read_file(src, &data, &size));
  FILE *f = fopen(dst, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, size, f), size);
  ck_assert_int_eq(fclose(f), 0);
  free(data);
}

#define SAXPY_ARGS                                                     \
  " --function=saxpy --input=f32=2 '--input=4xf32=1 2 3 4' "           \
  "'--input=4xf32=10 20 30 40'"
#define SAXPY_OUT "result[0]: hal.buffer_view\n4xf32=12 24 36 48\n"

static int run_cli(const char *env, const char *flags, char **out, char **err) {
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "%s %s run %s/saxpy.hasm %s" SAXPY_ARGS,
           env, HALI_TOOL, tmpdir, flags);
  return hali_test_shell(cmd, out, err);
}

START_TEST(test_cli_executable_path) {
  const char *const examples[2] = {"saxpy_native.hasm", "saxpy_ffi.hasm"};
  copy_example(examples[_i]);
  char *out, *err;
  /* Not found: every place tried, in order. */
  ck_assert_int_eq(run_cli("HALI_EXECUTABLE_PATH=/nonexistent-env",
                           "--executable-path=/nonexistent-flag", &out, &err),
                   1);
  ck_assert_str_eq(out, "");
  char want[1024];
  snprintf(want, sizeof(want),
           "    %s/kernels/saxpy_%s.so: %s/kernels/saxpy_%s.so: cannot open "
           "shared object file",
           tmpdir, _i ? "ffi" : "native", tmpdir, _i ? "ffi" : "native");
  ck_assert_msg(strstr(err, want), "missing '%s' in: %s", want, err);
  const char *flag = strstr(err, "/nonexistent-flag/kernels/");
  const char *env = strstr(err, "/nonexistent-env/kernels/");
  ck_assert_msg(flag && env && strstr(err, want) < flag && flag < env,
                "wrong search order: %s", err);
  free(out);
  free(err);
  /* --executable-path. */
  ck_assert_int_eq(
      run_cli("", "--executable-path=" HALI_BUILDDIR "/examples", &out, &err),
      0);
  ck_assert_str_eq(out, SAXPY_OUT);
  ck_assert_str_eq(err, "");
  free(out);
  free(err);
  /* $HALI_EXECUTABLE_PATH, colon-separated, searched in order. */
  ck_assert_int_eq(run_cli("HALI_EXECUTABLE_PATH=/nonexistent:" HALI_BUILDDIR
                           "/examples",
                           "", &out, &err),
                   0);
  ck_assert_str_eq(out, SAXPY_OUT);
  free(out);
  free(err);
  /* Both: the flag's directories come first. */
  ck_assert_int_eq(run_cli("HALI_EXECUTABLE_PATH=/nonexistent",
                           "--executable-path=" HALI_BUILDDIR "/examples",
                           &out, &err),
                   0);
  ck_assert_str_eq(out, SAXPY_OUT);
  free(out);
  free(err);
}
END_TEST

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Link tables: what a context loaded for a module, reached from the frame. */

/* One stack runs a module under two link tables in turn: frames deep in a
 * recursion must see the link of their own invocation, not a stale one
 * left at that depth by the previous invocation. */
START_TEST(test_frames_follow_their_link) {
  const char *deep =
      "func @deep(%n: i32) -> i32 {\n"
      "^entry:\n"
      "  %zero = const.i32 0\n"
      "  %bottom = le.s.i32 %n, %zero\n"
      "  cond_br %bottom, ^get, ^down\n"
      "^get:\n"
      "  %e = hal.executable.get @k\n"
      "  %one = const.i32 1\n"
      "  return %one\n"
      "^down:\n"
      "  %k1 = const.i32 1\n"
      "  %m = sub.i32 %n, %k1\n"
      "  %r = call @deep(%m)\n"
      "  %r = add.i32 %r, %k1\n"
      "  return %r\n"
      "}\n";
  hali_vm_link_t *loaded = NULL;
  ck_assert_ok(load_with(static_exe, deep, NULL, &loaded));
  hali_vm_link_t *bare = NULL; /* the same module, nothing loaded */
  ck_assert_ok(hali_vm_link_create(loaded->module, &bare));
  const hali_vm_func_t *fn = hali_vm_module_lookup(loaded->module, "deep");
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  const int32_t depths[] = {10, 10, 3, 40, 40, 7};
  for (int i = 0; i < 6; ++i) {
    hali_value_t arg = hali_value_i32(depths[i]), res = {0};
    hali_status_t s = hali_vm_link_invoke(st, i % 2 ? bare : loaded, fn, &arg,
                                          1, &res, 1);
    if (i % 2) {
      expect_status(s, HALI_STATUS_FAILED_PRECONDITION,
                    "executable @k was not loaded", "at @deep@3");
    } else {
      ck_assert_ok(s);
      ck_assert_int_eq(res.i32, depths[i] + 1);
    }
  }
  /* And the module run unlinked is the bare case too. */
  hali_value_t arg = hali_value_i32(5), res = {0};
  expect_status(hali_vm_invoke(st, loaded->module, fn, &arg, 1, &res, 1),
                HALI_STATUS_FAILED_PRECONDITION, "was not loaded");
  hali_vm_stack_free(st);
  hali_vm_link_free(bare);
  hali_vm_link_free(loaded);
}
END_TEST

/* A link table loads its executables once; the module keeps none. */
START_TEST(test_link_loads_once) {
  hali_vm_link_t *l = load(static_exe);
  ck_assert_ptr_nonnull(l->executables[0]);
  expect_status(hali_executable_registry_load_link(registry, l, NULL, NULL, 0),
                HALI_STATUS_FAILED_PRECONDITION, "already loaded");
  /* Two links of one module load executables of their own. */
  hali_vm_link_t *other = NULL;
  ck_assert_ok(hali_vm_link_create(l->module, &other));
  const char *paths[] = {KERNEL_DIR};
  ck_assert_ok(hali_executable_registry_load_link(registry, other, NULL, paths,
                                                  1));
  ck_assert_ptr_nonnull(other->executables[0]);
  ck_assert_ptr_ne(other->executables[0], l->executables[0]);
  /* Either may go first; the module lives while one of them does. */
  hali_vm_link_free(l);
  ck_assert_str_eq(hali_hal_executable_format(other->executables[0]),
                   "static");
  hali_vm_link_free(other);
}
END_TEST

/* The C API lowers a module once, at load: creating contexts does not read,
 * lower, verify or encode it again. */
START_TEST(test_contexts_do_not_reload_the_module) {
  hali_instance_t *in = NULL;
  ck_assert_ok(hali_instance_create(NULL, &in));
  hali_device_t *dev = NULL;
  ck_assert_ok(hali_device_create(in, NULL, &dev));
  uint64_t before = hali_load_module_count();
  hali_module_t *m = NULL;
  ck_assert_ok(
      hali_module_load_file(in, HALI_SRCDIR "/examples/mlp.hasm", &m));
  ck_assert_uint_eq(hali_load_module_count(), before + 1);
  hali_context_t *c[3] = {NULL};
  for (int i = 0; i < 3; ++i) {
    ck_assert_ok(hali_context_create(in, dev, &m, 1, NULL, &c[i]));
    hali_function_t *f = NULL;
    ck_assert_ok(hali_context_lookup_function(c[i], "main", &f));
    hali_variant_t r;
    ck_assert_ok(hali_context_invoke(c[i], f, NULL, 0, &r, 1));
    ck_assert_int_eq(r.type, HALI_VARIANT_BUFFER_VIEW);
    hali_variant_release(&r);
  }
  ck_assert_uint_eq(hali_load_module_count(), before + 1);
  for (int i = 0; i < 3; ++i) hali_context_release(c[i]);
  hali_module_release(m);
  hali_device_release(dev);
  hali_instance_release(in);
}
END_TEST

static Suite *loaders_suite(void) {
  Suite *s = suite_create("loaders");
  TCase *tc = tcase_create("each_loader");
  tcase_add_checked_fixture(tc, registry_setup, registry_teardown);
  tcase_add_loop_test(tc, test_dispatch_on_every_device, 0, LOADER_COUNT);
  tcase_add_loop_test(tc, test_kernel_error_fails_the_fence, 0, LOADER_COUNT);
  tcase_add_loop_test(tc, test_reusable_single_workgroups, 0, LOADER_COUNT);
  tcase_add_loop_test(tc, test_run_through_the_vm, 0, LOADER_COUNT);
  tcase_add_loop_test(tc, test_executable_outlives_module, 0, LOADER_COUNT);
  tcase_add_loop_test(tc, test_two_devices_share_an_executable, 0,
                      LOADER_COUNT);
  suite_add_tcase(s, tc);

  tc = tcase_create("load_failures");
  tcase_add_checked_fixture(tc, registry_setup, registry_teardown);
  tcase_add_test(tc, test_missing_library);
  tcase_add_test(tc, test_missing_symbol);
  tcase_add_test(tc, test_signature_mismatch);
  tcase_add_test(tc, test_unsupported_ffi_type);
  tcase_add_test(tc, test_ffi_parameter_order);
  tcase_add_test(tc, test_too_many_push_constants);
  tcase_add_test(tc, test_binding_out_of_range);
  tcase_add_test(tc, test_declared_workgroup_size_product_wraps);
  tcase_add_test(tc, test_unsupported_format);
  suite_add_tcase(s, tc);

  tc = tcase_create("host_registration");
  tcase_add_checked_fixture(tc, registry_setup, registry_teardown);
  tcase_add_test(tc, test_register_static);
  tcase_add_test(tc, test_host_loader);
  tcase_add_test(tc, test_loader_order);
  suite_add_tcase(s, tc);

  tc = tcase_create("link");
  tcase_add_checked_fixture(tc, registry_setup, registry_teardown);
  tcase_add_test(tc, test_frames_follow_their_link);
  tcase_add_test(tc, test_link_loads_once);
  tcase_add_test(tc, test_contexts_do_not_reload_the_module);
  suite_add_tcase(s, tc);

  tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_add_loop_test(tc, test_cli_executable_path, 0, 2);
  tcase_set_timeout(tc, 30);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(loaders_suite()); }
