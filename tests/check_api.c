/* The public C API end to end, through include/hali/hali.h only and
 * linked against the shared libhali (so every entry point used here is
 * exported): instances, devices, modules, contexts, invocation (sync and
 * async), host imports (callbacks, libffi, other modules), executable
 * loaders and static kernels, buffer views, fences, limits and
 * cancellation, tracing, and the error paths of each. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hali/hali.h"

/* ------------------------------------------------------------------------ */
/* Helpers. */

#define ck_ok(s) assert_ok((s), __FILE__, __LINE__)
static void assert_ok(hali_status_t s, const char *file, int line) {
  if (!s) return;
  char *text = hali_status_to_string(s);
  hali_status_free(s);
  ck_abort_msg("%s:%d: unexpected error: %s", file, line, text);
}

/* |s| has |code| and its text contains |needle|. */
#define ck_status(s, code, needle)                                             \
  assert_status((s), (code), (needle), __FILE__, __LINE__)
static void assert_status(hali_status_t s, hali_status_code_t code,
                          const char *needle, const char *file, int line) {
  if (!s) ck_abort_msg("%s:%d: expected %s, got OK", file, line,
                       hali_status_code_name(code));
  char *text = hali_status_to_string(s);
  hali_status_code_t have = hali_status_code(s);
  hali_status_free(s);
  int bad_code = have != code;
  int bad_text = needle && !strstr(text, needle);
  if (bad_code || bad_text) {
    char buf[2048];
    snprintf(buf, sizeof(buf), "%s:%d: expected %s containing '%s', got: %s",
             file, line, hali_status_code_name(code), needle ? needle : "",
             text);
    free(text);
    ck_abort_msg("%s", buf);
  }
  free(text);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static hali_instance_t *instance_new(void) {
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  return in;
}

static hali_device_t *device_new(hali_instance_t *in, hali_device_kind_t k) {
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  p.kind = k;
  p.worker_count = 2;
  hali_device_t *d = NULL;
  ck_ok(hali_device_create(in, &p, &d));
  return d;
}

static hali_module_t *module_new(hali_instance_t *in, const char *text) {
  hali_module_t *m = NULL;
  ck_ok(hali_module_load_bytes(in, text, strlen(text), "test.hasm", &m));
  return m;
}

/* Links |text| alone on a new local-sync device with |params|. */
static hali_status_t try_context(hali_instance_t *in, const char *text,
                                 const hali_context_params_t *params,
                                 hali_context_t **out) {
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(in, text);
  hali_status_t s = hali_context_create(in, d, &m, 1, params, out);
  hali_module_release(m);
  hali_device_release(d);
  return s;
}

static hali_context_t *context_new(hali_instance_t *in, const char *text,
                                   const hali_context_params_t *params) {
  hali_context_t *c = NULL;
  ck_ok(try_context(in, text, params, &c));
  return c;
}

static hali_function_t *lookup(hali_context_t *c, const char *name) {
  hali_function_t *f = NULL;
  ck_ok(hali_context_lookup_function(c, name, &f));
  return f;
}

/* Calls a (i32...) -> i32 function. */
static hali_status_t call_i32(hali_context_t *c, const char *name,
                              const int32_t *in, size_t n, int32_t *out) {
  hali_variant_t args[8], res;
  for (size_t i = 0; i < n; ++i) args[i] = hali_variant_i32(in[i]);
  hali_status_t s =
      hali_context_invoke(c, lookup(c, name), args, n, &res, 1);
  if (!s) *out = res.u.i32;
  return s;
}

static const char k_arith[] =
    "module @arith\n"
    "func @add(%a: i32, %b: i32) -> i32 {\n"
    "  %c = add.i32 %a, %b\n"
    "  return %c\n"
    "}\n"
    "func @mix(%a: i64, %b: f32, %c: f64) -> (i64, f32, f64) {\n"
    "  return %a, %b, %c\n"
    "}\n"
    "func @dim0(%v: !hal.buffer_view) -> i64 {\n"
    "  %z = const.i32 0\n"
    "  %d = hal.buffer_view.dim %v, %z\n"
    "  return %d\n"
    "}\n"
    "func @same(%v: !hal.buffer_view) -> !hal.buffer_view {\n"
    "  return %v\n"
    "}\n"
    "func @nothing() {\n"
    "  return\n"
    "}\n"
    "func @fails() {\n"
    "  %f = const.i32 0\n"
    "  assert %f, \"deliberately\"\n"
    "  return\n"
    "}\n";

/* ------------------------------------------------------------------------ */
/* Instance, device, module. */

START_TEST(instance_lifecycle_and_errors) {
  ck_status(hali_instance_create(NULL, NULL), HALI_STATUS_INVALID_ARGUMENT,
            "out_instance is NULL");
  hali_instance_options_t o;
  hali_instance_options_initialize(&o);
  const char *paths[] = {"/nonexistent", "/tmp"};
  o.executable_paths = paths;
  o.executable_path_count = 2;
  o.default_context_params.max_call_depth = 7;
  o.default_context_params.trace_filter = "x*";
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(&o, &in));
  hali_instance_retain(in);
  hali_instance_release(in);
  /* NULL handles are refused, not dereferenced. */
  ck_status(hali_instance_register_static_library(NULL, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "instance is NULL");
  ck_status(hali_instance_register_import_module(in, NULL, NULL, 0),
            HALI_STATUS_INVALID_ARGUMENT, "module_name is NULL");
  ck_status(hali_instance_register_import_module(in, "a.b", NULL, 0),
            HALI_STATUS_INVALID_ARGUMENT, "without '.'");
  ck_status(hali_instance_register_ffi_library(in, "m", NULL),
            HALI_STATUS_INVALID_ARGUMENT, "library_path is NULL");
  ck_status(hali_instance_register_executable_loader(in, NULL, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "loader is NULL");
  hali_executable_loader_t empty = {0};
  ck_status(hali_instance_register_executable_loader(in, &empty, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "supports and load");
  hali_instance_release(in);
  hali_instance_release(NULL);
  hali_instance_retain(NULL);
  ck_assert_str_eq(hali_version(), HALI_VERSION_STRING);
}
END_TEST

START_TEST(device_kinds_and_errors) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = NULL;
  ck_ok(hali_device_create(in, NULL, &d)); /* defaults */
  hali_device_retain(d);
  hali_device_release(d);
  hali_device_release(d);
  hali_device_t *t = device_new(in, HALI_DEVICE_LOCAL_TASK);
  hali_device_release(t);
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  p.kind = (hali_device_kind_t)7;
  ck_status(hali_device_create(in, &p, &d), HALI_STATUS_INVALID_ARGUMENT,
            "unknown device kind 7");
  ck_assert_ptr_null(d);
  ck_status(hali_device_create(in, NULL, NULL), HALI_STATUS_INVALID_ARGUMENT,
            "out_device");
  hali_device_release(NULL);
  hali_instance_release(in);
}
END_TEST

START_TEST(module_load_and_errors) {
  hali_instance_t *in = instance_new();
  hali_module_t *m = module_new(in, k_arith);
  ck_assert_str_eq(hali_module_name(m), "arith");
  hali_module_retain(m);
  hali_module_release(m);
  hali_module_release(m);
  ck_assert_ptr_null(hali_module_name(NULL));
  const char bad[] = "func @f() -> i32 {\n  return %nope\n}\n";
  ck_status(hali_module_load_bytes(in, bad, strlen(bad), "bad.hasm", &m),
            HALI_STATUS_INVALID_ARGUMENT, "bad.hasm:2");
  ck_assert_ptr_null(m);
  ck_status(hali_module_load_file(in, "/nonexistent/x.hasm", &m),
            HALI_STATUS_NOT_FOUND, "/nonexistent/x.hasm");
  ck_status(hali_module_load_file(NULL, "x", &m),
            HALI_STATUS_INVALID_ARGUMENT, "instance is NULL");
  ck_status(hali_module_load_bytes(in, NULL, 0, "x", &m),
            HALI_STATUS_INVALID_ARGUMENT, "data is NULL");
  /* From a file: the examples' fib. */
  ck_ok(hali_module_load_file(in, HALI_SRCDIR "/examples/fib.hasm", &m));
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  int32_t n = 20, r = 0;
  ck_ok(call_i32(c, "fib", &n, 1, &r));
  ck_assert_int_eq(r, 6765);
  hali_context_release(c);
  hali_device_release(d);
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Contexts, lookup, synchronous invoke. */

START_TEST(invoke_scalars) {
  hali_instance_t *in = instance_new();
  hali_context_t *c = context_new(in, k_arith, NULL);
  int32_t ab[2] = {40, 2}, r = 0;
  ck_ok(call_i32(c, "add", ab, 2, &r));
  ck_assert_int_eq(r, 42);
  ck_ok(call_i32(c, "@arith.add", ab, 2, &r)); /* qualified, with sigil */
  hali_function_t *mix = lookup(c, "mix");
  ck_assert_str_eq(hali_function_name(mix), "mix");
  ck_assert_uint_eq(hali_function_argument_count(mix), 3);
  ck_assert_uint_eq(hali_function_result_count(mix), 3);
  ck_assert_int_eq(hali_function_argument_type(mix, 1), HALI_VARIANT_F32);
  ck_assert_int_eq(hali_function_result_type(mix, 2), HALI_VARIANT_F64);
  ck_assert_int_eq(hali_function_result_type(mix, 3), HALI_VARIANT_NONE);
  ck_assert_uint_eq(hali_function_argument_count(NULL), 0);
  ck_assert_ptr_null(hali_function_name(NULL));
  hali_variant_t args[3] = {hali_variant_i64(-5), hali_variant_f32(1.5f),
                            hali_variant_f64(2.25)};
  hali_variant_t res[3];
  ck_ok(hali_context_invoke(c, mix, args, 3, res, 3));
  ck_assert_int_eq(res[0].type, HALI_VARIANT_I64);
  ck_assert_int_eq(res[0].u.i64, -5);
  ck_assert(res[1].u.f32 == 1.5f);
  ck_assert(res[2].u.f64 == 2.25);
  ck_ok(hali_context_invoke(c, lookup(c, "nothing"), NULL, 0, NULL, 0));
  ck_assert_str_eq(hali_variant_type_name(HALI_VARIANT_BUFFER_VIEW),
                   "!hal.buffer_view");
  ck_assert_str_eq(hali_variant_type_name((hali_variant_type_t)99), "?");
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

START_TEST(invoke_errors) {
  hali_instance_t *in = instance_new();
  hali_context_t *c = context_new(in, k_arith, NULL);
  hali_function_t *add = lookup(c, "add"), *f = NULL;
  hali_variant_t args[3] = {hali_variant_i32(1), hali_variant_i32(2),
                            hali_variant_i32(3)};
  hali_variant_t res[2];
  ck_status(hali_context_invoke(c, add, args, 3, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "@add takes 2 argument(s), 3 given");
  ck_status(hali_context_invoke(c, add, args, 1, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "2 argument(s), 1 given");
  ck_status(hali_context_invoke(c, add, args, 2, res, 2),
            HALI_STATUS_INVALID_ARGUMENT, "returns 1 result(s), room for 2");
  ck_status(hali_context_invoke(c, add, args, 2, NULL, 1),
            HALI_STATUS_INVALID_ARGUMENT, "results is NULL");
  ck_status(hali_context_invoke(c, add, NULL, 2, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "argument array is NULL");
  args[1] = hali_variant_f32(2.0f);
  ck_status(hali_context_invoke(c, add, args, 2, res, 1),
            HALI_STATUS_INVALID_ARGUMENT,
            "@add argument 1: expected i32, got f32");
  ck_status(hali_context_invoke(NULL, add, args, 2, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "context is NULL");
  ck_status(hali_context_invoke(c, NULL, args, 2, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "function is NULL");
  /* Refs: NULL, and an object that is not what its label says. */
  hali_function_t *dim0 = lookup(c, "dim0");
  hali_variant_t v = hali_variant_view(NULL);
  ck_status(hali_context_invoke(c, dim0, &v, 1, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "NULL !hal.buffer_view");
  hali_fence_t *fence = NULL;
  ck_ok(hali_fence_create(&fence));
  v = hali_variant_fence(fence);
  ck_status(hali_context_invoke(c, dim0, &v, 1, res, 1),
            HALI_STATUS_INVALID_ARGUMENT,
            "expected !hal.buffer_view, got !hal.fence");
  v.type = HALI_VARIANT_BUFFER_VIEW; /* mislabelled */
  ck_status(hali_context_invoke(c, dim0, &v, 1, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "the object is a !hal.fence");
  hali_fence_release(fence);
  /* Lookup. */
  ck_status(hali_context_lookup_function(c, "nope", &f), HALI_STATUS_NOT_FOUND,
            "no function @nope");
  ck_assert_ptr_null(f);
  ck_status(hali_context_lookup_function(c, "other.add", &f),
            HALI_STATUS_NOT_FOUND, "@other.add");
  ck_status(hali_context_lookup_function(NULL, "add", &f),
            HALI_STATUS_INVALID_ARGUMENT, "context is NULL");
  ck_status(hali_context_lookup_function(c, NULL, &f),
            HALI_STATUS_INVALID_ARGUMENT, "name is NULL");
  /* A program failure comes back with its location. */
  ck_status(hali_context_invoke(c, lookup(c, "fails"), NULL, 0, NULL, 0),
            HALI_STATUS_FAILED_PRECONDITION, "deliberately");
  /* A function of another context. */
  hali_context_t *c2 = context_new(in, k_arith, NULL);
  args[1] = hali_variant_i32(2);
  ck_status(hali_context_invoke(c2, add, args, 2, res, 1),
            HALI_STATUS_INVALID_ARGUMENT, "another context");
  hali_context_release(c2);
  /* Context creation errors. */
  hali_context_t *bad = NULL;
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *none[1] = {NULL};
  ck_status(hali_context_create(in, d, none, 1, NULL, &bad),
            HALI_STATUS_INVALID_ARGUMENT, "module 0 is NULL");
  ck_status(hali_context_create(in, d, none, 0, NULL, &bad),
            HALI_STATUS_INVALID_ARGUMENT, "at least one module");
  ck_status(hali_context_create(in, NULL, none, 1, NULL, &bad),
            HALI_STATUS_INVALID_ARGUMENT, "device is NULL");
  ck_assert_ptr_null(bad);
  hali_device_release(d);
  hali_context_cancel(NULL);
  hali_context_release(NULL);
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

START_TEST(handles_outlive_their_creators) {
  /* The context keeps instance, device and module alive: the host may drop
   * its references right after creating it. */
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_TASK);
  hali_module_t *m = module_new(in, k_arith);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
  int32_t ab[2] = {1, 2}, r = 0;
  ck_ok(call_i32(c, "add", ab, 2, &r));
  ck_assert_int_eq(r, 3);
  hali_context_retain(c);
  hali_context_release(c);
  hali_context_release(c);
}
END_TEST

START_TEST(instance_frozen_after_first_context) {
  hali_instance_t *in = instance_new();
  hali_context_t *c = context_new(in, k_arith, NULL);
  ck_status(hali_instance_register_import_module(in, "late", NULL, 0),
            HALI_STATUS_FAILED_PRECONDITION, "register everything before");
  ck_status(hali_instance_register_ffi_library(in, "late", "x.so"),
            HALI_STATUS_FAILED_PRECONDITION, "already has a context");
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Buffer views. */

START_TEST(buffer_views) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  hali_buffer_view_t *v = NULL;
  ck_ok(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_F32, 2, shape, data,
                                sizeof(data), &v));
  ck_assert_uint_eq(hali_buffer_view_rank(v), 2);
  ck_assert_int_eq(hali_buffer_view_dim(v, 1), 3);
  ck_assert_int_eq(hali_buffer_view_dim(v, 2), 0);
  ck_assert_uint_eq(hali_buffer_view_element_type(v), HALI_ELEMENT_TYPE_F32);
  ck_assert_uint_eq(hali_buffer_view_element_count(v), 6);
  ck_assert_uint_eq(hali_buffer_view_byte_length(v), 24);
  float back[6] = {0};
  ck_ok(hali_buffer_view_read(v, back, sizeof(back)));
  ck_assert(memcmp(back, data, sizeof(data)) == 0);
  ck_status(hali_buffer_view_read(v, back, 8), HALI_STATUS_OUT_OF_RANGE,
            "holds 24 bytes; the target has room for 8");
  ck_status(hali_buffer_view_read(NULL, back, 8), HALI_STATUS_INVALID_ARGUMENT,
            "view is NULL");
  hali_buffer_view_t *w = NULL;
  ck_status(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_F32, 2, shape, data,
                                    8, &w),
            HALI_STATUS_INVALID_ARGUMENT, "holds 24 bytes; 8 given");
  ck_status(hali_buffer_view_create(d, 0x77000020u, 2, shape, data, 24, &w),
            HALI_STATUS_INVALID_ARGUMENT, "unknown element type");
  int64_t neg = -1;
  ck_status(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_F32, 1, &neg, NULL, 0,
                                    &w),
            HALI_STATUS_INVALID_ARGUMENT, NULL);
  ck_status(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_F32, 2, NULL, NULL, 0,
                                    &w),
            HALI_STATUS_INVALID_ARGUMENT, "shape is NULL");
  ck_assert_ptr_null(w);
  /* Zero-filled when no data is given; views pass through functions. */
  ck_ok(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_I32, 1, shape, NULL, 0,
                                &w));
  hali_module_t *m = module_new(in, k_arith);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  hali_variant_t arg = hali_variant_view(v), res;
  ck_ok(hali_context_invoke(c, lookup(c, "dim0"), &arg, 1, &res, 1));
  ck_assert_int_eq(res.u.i64, 2);
  arg = hali_variant_view(w);
  ck_ok(hali_context_invoke(c, lookup(c, "same"), &arg, 1, &res, 1));
  ck_assert_int_eq(res.type, HALI_VARIANT_BUFFER_VIEW);
  ck_assert_ptr_eq(res.u.view, w);
  int32_t zeros[2] = {7, 7};
  ck_ok(hali_buffer_view_read(res.u.view, zeros, sizeof(zeros)));
  ck_assert_int_eq(zeros[0] + zeros[1], 0);
  hali_variant_release(&res); /* the result's reference */
  ck_assert_int_eq(res.type, HALI_VARIANT_NONE);
  hali_variant_release(NULL);
  hali_buffer_view_retain(w);
  hali_buffer_view_release(w);
  hali_buffer_view_release(w);
  hali_buffer_view_release(v);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Host imports. */

static const char k_imports[] =
    "module @imp\n"
    "func @env.add(%a: i32, %b: i32) -> i32 import\n"
    "func @env.maybe(%a: i32) -> i32 import optional\n"
    "func @env.make(%n: i64) -> !hal.buffer_view import optional\n"
    "func @twice(%x: i32) -> i32 {\n"
    "  %y = call @env.add(%x, %x)\n"
    "  return %y\n"
    "}\n"
    "func @maybe(%x: i32) -> i32 {\n"
    "  %y = call @env.maybe(%x)\n"
    "  return %y\n"
    "}\n"
    "func @make(%n: i64) -> !hal.buffer_view {\n"
    "  %v = call @env.make(%n)\n"
    "  return %v\n"
    "}\n";

static atomic_int g_calls;
static hali_device_t *g_device;

static hali_status_t host_add(void *user, const hali_variant_t *args,
                              size_t n, hali_variant_t *results, size_t m) {
  ck_assert_ptr_eq(user, &g_calls);
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_eq(m, 1);
  ck_assert_int_eq(args[0].type, HALI_VARIANT_I32);
  ck_assert_int_eq(results[0].type, HALI_VARIANT_I32);
  atomic_fetch_add(&g_calls, 1);
  results[0].u.i32 = args[0].u.i32 + args[1].u.i32;
  return HALI_OK;
}

static hali_status_t host_refuse(void *user, const hali_variant_t *args,
                                 size_t n, hali_variant_t *results, size_t m) {
  return hali_status_make(HALI_STATUS_PERMISSION_DENIED, "the host says no");
}

static hali_status_t host_make(void *user, const hali_variant_t *args,
                               size_t n, hali_variant_t *results, size_t m) {
  int64_t shape = args[0].u.i64;
  return hali_buffer_view_create(g_device, HALI_ELEMENT_TYPE_I8, 1, &shape,
                                 NULL, 0, &results[0].u.view);
}

START_TEST(imports_host_callbacks) {
  hali_instance_t *in = instance_new();
  hali_import_function_t fns[] = {
      {"add", "(i32, i32) -> i32", host_add, &g_calls},
      {"maybe", NULL, host_refuse, NULL},
      {"make", "(i64) -> (!hal.buffer_view)", host_make, NULL},
  };
  ck_ok(hali_instance_register_import_module(in, "env", fns, 3));
  ck_status(hali_instance_register_import_module(in, "env", fns, 1),
            HALI_STATUS_ALREADY_EXISTS, "'env' is already registered");
  g_device = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(in, k_imports);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, g_device, &m, 1, NULL, &c));
  int32_t x = 21, r = 0;
  atomic_store(&g_calls, 0);
  ck_ok(call_i32(c, "twice", &x, 1, &r));
  ck_assert_int_eq(r, 42);
  ck_assert_int_eq(atomic_load(&g_calls), 1);
  ck_status(call_i32(c, "maybe", &x, 1, &r), HALI_STATUS_PERMISSION_DENIED,
            "in host import @env.maybe");
  hali_variant_t n = hali_variant_i64(5), res;
  ck_ok(hali_context_invoke(c, lookup(c, "make"), &n, 1, &res, 1));
  ck_assert_int_eq(hali_buffer_view_dim(res.u.view, 0), 5);
  hali_variant_release(&res);
  /* Imports are not functions to call. */
  hali_function_t *f;
  ck_status(hali_context_lookup_function(c, "env.add", &f),
            HALI_STATUS_NOT_FOUND, "is an import");
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(g_device);
  hali_instance_release(in);
}
END_TEST

START_TEST(imports_missing_and_mismatched) {
  /* Nothing registered: the required import is a link error naming it. */
  hali_instance_t *in = instance_new();
  hali_context_t *c = NULL;
  ck_status(try_context(in, k_imports, NULL, &c), HALI_STATUS_NOT_FOUND,
            "required import(s) not provided by the host: @env.add");
  ck_assert_ptr_null(c);
  hali_instance_release(in);
  /* Only the required one: optional ones stay unbound and fail if called. */
  in = instance_new();
  hali_import_function_t add = {"add", "(i32,i32)->i32", host_add, &g_calls};
  ck_ok(hali_instance_register_import_module(in, "env", &add, 1));
  c = context_new(in, k_imports, NULL);
  int32_t x = 1, r;
  ck_status(call_i32(c, "maybe", &x, 1, &r), HALI_STATUS_NOT_FOUND,
            "import @env.maybe is not provided by the host");
  hali_context_release(c);
  hali_instance_release(in);
  /* A signature that differs from the declaration. */
  in = instance_new();
  hali_import_function_t wrong = {"add", "(i32) -> i32", host_add, NULL};
  ck_ok(hali_instance_register_import_module(in, "env", &wrong, 1));
  ck_status(try_context(in, k_imports, NULL, &c), HALI_STATUS_INVALID_ARGUMENT,
            "declares (i32, i32) -> (i32) but the host registered (i32) -> "
            "(i32)");
  hali_instance_release(in);
  /* Malformed signatures and entries. */
  in = instance_new();
  hali_import_function_t bad = {"add", "(i32, int) -> i32", host_add, NULL};
  ck_status(hali_instance_register_import_module(in, "env", &bad, 1),
            HALI_STATUS_INVALID_ARGUMENT, "cannot parse signature");
  bad.signature = "i32 -> i32";
  ck_status(hali_instance_register_import_module(in, "env", &bad, 1),
            HALI_STATUS_INVALID_ARGUMENT, "cannot parse signature");
  bad.signature = NULL;
  bad.callback = NULL;
  ck_status(hali_instance_register_import_module(in, "env", &bad, 1),
            HALI_STATUS_INVALID_ARGUMENT, "needs a name and a callback");
  hali_instance_release(in);
}
END_TEST

static const char k_ffi[] =
    "module @ffi\n"
    "func @c.imp_add3(%a: i32, %b: i32, %c: i32) -> i32 import\n"
    "func @c.imp_mul64(%a: i64, %b: i64) -> i64 import\n"
    "func @c.imp_mix(%a: f64, %b: f32) -> f64 import\n"
    "func @c.imp_half(%a: f32) -> f32 import\n"
    "func @c.imp_bump(%a: i32) import\n"
    "func @c.imp_counter() -> i32 import\n"
    "func @run(%a: i32, %x: i64, %d: f64, %f: f32) -> (i32, i64, f64, f32, "
    "i32) {\n"
    "  %r1 = call @c.imp_add3(%a, %a, %a)\n"
    "  %r2 = call @c.imp_mul64(%x, %x)\n"
    "  %r3 = call @c.imp_mix(%d, %f)\n"
    "  %r4 = call @c.imp_half(%f)\n"
    "  call @c.imp_bump(%a)\n"
    "  call @c.imp_bump(%a)\n"
    "  %r5 = call @c.imp_counter()\n"
    "  return %r1, %r2, %r3, %r4, %r5\n"
    "}\n";

#define TEST_IMPORTS_SO HALI_BUILDDIR "/tests/kernels/test_imports.so"

START_TEST(imports_ffi_library) {
  hali_instance_t *in = instance_new();
  ck_ok(hali_instance_register_ffi_library(in, "c", TEST_IMPORTS_SO));
  ck_status(hali_instance_register_ffi_library(in, "c", TEST_IMPORTS_SO),
            HALI_STATUS_ALREADY_EXISTS, "'c'");
  hali_context_t *c = context_new(in, k_ffi, NULL);
  hali_variant_t args[4] = {hali_variant_i32(5), hali_variant_i64(3000000000),
                            hali_variant_f64(1.25), hali_variant_f32(3.0f)};
  hali_variant_t res[5];
  ck_ok(hali_context_invoke(c, lookup(c, "run"), args, 4, res, 5));
  ck_assert_int_eq(res[0].u.i32, 15);
  ck_assert(res[1].u.i64 == 9000000000000000000ll);
  ck_assert(res[2].u.f64 == 5.5);
  ck_assert(res[3].u.f32 == 1.5f);
  ck_assert_int_eq(res[4].u.i32, 10);
  hali_context_release(c);
  hali_instance_release(in);
  /* Link errors: a missing library, a missing symbol, a ref parameter. */
  in = instance_new();
  ck_ok(hali_instance_register_ffi_library(in, "c", "/nonexistent/lib.so"));
  ck_status(try_context(in, k_ffi, NULL, &c), HALI_STATUS_NOT_FOUND,
            "cannot load library \"/nonexistent/lib.so\"");
  hali_instance_release(in);
  in = instance_new();
  ck_ok(hali_instance_register_ffi_library(in, "c", TEST_IMPORTS_SO));
  const char missing[] = "func @c.imp_nope() import\n"
                         "func @f() {\n  call @c.imp_nope()\n  return\n}\n";
  ck_status(try_context(in, missing, NULL, &c), HALI_STATUS_NOT_FOUND,
            "no symbol 'imp_nope'");
  const char refs[] = "func @c.imp_half(%v: !hal.fence) import\n"
                      "func @f() {\n  return\n}\n";
  ck_status(try_context(in, refs, NULL, &c), HALI_STATUS_INVALID_ARGUMENT,
            "parameter 0 is !hal.fence");
  hali_instance_release(in);
}
END_TEST

START_TEST(imports_between_modules) {
  const char lib[] = "module @lib\n"
                     "func @square(%x: i32) -> i32 {\n"
                     "  %y = mul.i32 %x, %x\n"
                     "  return %y\n"
                     "}\n";
  const char app[] = "module @app\n"
                     "func @lib.square(%x: i32) -> i32 import\n"
                     "func @main(%x: i32) -> i32 {\n"
                     "  %y = call @lib.square(%x)\n"
                     "  %z = call @lib.square(%y)\n"
                     "  return %z\n"
                     "}\n";
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *ms[2] = {module_new(in, app), module_new(in, lib)};
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, ms, 2, NULL, &c));
  int32_t x = 3, r = 0;
  ck_ok(call_i32(c, "main", &x, 1, &r));
  ck_assert_int_eq(r, 81);
  ck_ok(call_i32(c, "lib.square", &x, 1, &r));
  ck_assert_int_eq(r, 9);
  hali_context_release(c);
  /* Alone, @app misses its import. */
  ck_status(hali_context_create(in, d, ms, 1, NULL, &c), HALI_STATUS_NOT_FOUND,
            "@lib.square");
  /* A signature mismatch between modules. */
  const char app2[] = "module @app2\n"
                      "func @lib.square(%x: i64) -> i64 import\n"
                      "func @f() {\n  return\n}\n";
  hali_module_t *ms2[2] = {module_new(in, app2), ms[1]};
  ck_status(hali_context_create(in, d, ms2, 2, NULL, &c),
            HALI_STATUS_INVALID_ARGUMENT, "module @lib defines (i32)");
  hali_module_release(ms2[0]);
  hali_module_release(ms[0]);
  hali_module_release(ms[1]);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Static kernels and custom executable loaders. */

static int twice_kernel(const hali_kernel_dispatch_state_t *d,
                        const hali_kernel_workgroup_state_t *w) {
  const int32_t *x = d->binding_ptrs[0];
  int32_t *out = d->binding_ptrs[1];
  size_t n = d->binding_lengths[0] / sizeof(int32_t);
  for (size_t i = 0; i < n; ++i) out[i] = 2 * x[i];
  return 0;
}

static const hali_kernel_export_t k_twice_exports[] = {
    {"twice", twice_kernel, 2, 0, {1, 1, 1}, 0},
};
static const hali_kernel_library_t k_twice_library = {
    HALI_KERNEL_ABI_VERSION, "test_static", 1, k_twice_exports};

/* A dispatch of export @twice of executable @EXE over an i32 vector. */
#define DISPATCH_FN(EXE)                                                       \
  "func @run_" EXE "(%x: !hal.buffer_view) -> !hal.buffer_view {\n"            \
  "  %zero32 = const.i32 0\n"                                                  \
  "  %one32 = const.i32 1\n"                                                   \
  "  %two32 = const.i32 2\n"                                                   \
  "  %n = hal.buffer_view.dim %x, %zero32\n"                                   \
  "  %device = hal.device.get\n"                                               \
  "  %allocator = hal.device.allocator %device\n"                              \
  "  %four = const.i64 4\n"                                                    \
  "  %bytes = mul.i64 %n, %four\n"                                             \
  "  %memory = const.i32 19\n"                                                 \
  "  %usage = const.i32 7\n"                                                   \
  "  %out = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"      \
  "  %xb = hal.buffer_view.buffer %x\n"                                        \
  "  %cmd = hal.command_buffer.create %device, %one32, %two32\n"               \
  "  %zero = const.i64 0\n"                                                    \
  "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %xb, %zero, "       \
  "%bytes\n"                                                                   \
  "  hal.command_buffer.push_descriptor_set %cmd, %one32, %out, %zero, "       \
  "%bytes\n"                                                                   \
  "  %exe = hal.executable.get @" EXE "\n"                                     \
  "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %one32, %one32, "        \
  "%one32\n"                                                                   \
  "  hal.command_buffer.finalize %cmd\n"                                       \
  "  %wait = hal.fence.null\n"                                                 \
  "  %done = hal.fence.create %device\n"                                       \
  "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"                 \
  "  %forever = const.i64 -1\n"                                                \
  "  %status = hal.fence.await %done, %forever\n"                              \
  "  %i32 = const.i32 0x10000020\n"                                            \
  "  %view = hal.buffer_view.create %out, %i32, %one32, [%n]\n"                \
  "  return %view\n"                                                           \
  "}\n"

static const char k_kernels[] =
    "module @kern\n"
    "executable @st format \"static\" library \"test_static\" {\n"
    "  export @twice(tensor<?xi32>) -> (tensor<?xi32>)\n"
    "}\n"
    "executable @mine format \"mine\" library \"anything\" {\n"
    "  export @twice(tensor<?xi32>) -> (tensor<?xi32>)\n"
    "}\n" DISPATCH_FN("st") DISPATCH_FN("mine");

typedef struct {
  int loads, destroyed;
  char library[64];
} my_loader_t;

static bool my_supports(void *self, const char *format) {
  return strcmp(format, "mine") == 0;
}
static hali_status_t my_load(void *self, const hali_executable_request_t *r,
                             const hali_kernel_library_t **out) {
  my_loader_t *l = self;
  l->loads++;
  snprintf(l->library, sizeof(l->library), "%s", r->library);
  if (strcmp(r->name, "mine") != 0)
    return hali_status_make(HALI_STATUS_NOT_FOUND, "not mine");
  *out = &k_twice_library;
  return HALI_OK;
}
static void my_destroy(void *self) { ((my_loader_t *)self)->destroyed++; }

static void check_twice(hali_context_t *c, hali_device_t *d, const char *fn) {
  int32_t data[5] = {1, 2, 3, 4, -5}, out[5];
  int64_t n = 5;
  hali_buffer_view_t *v = NULL;
  ck_ok(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_I32, 1, &n, data,
                                sizeof(data), &v));
  hali_variant_t arg = hali_variant_view(v), res;
  ck_ok(hali_context_invoke(c, lookup(c, fn), &arg, 1, &res, 1));
  ck_ok(hali_buffer_view_read(res.u.view, out, sizeof(out)));
  for (int i = 0; i < 5; ++i) ck_assert_int_eq(out[i], 2 * data[i]);
  hali_variant_release(&res);
  hali_buffer_view_release(v);
}

START_TEST(static_kernels_and_host_loader) {
  my_loader_t mine = {0};
  hali_instance_t *in = instance_new();
  hali_executable_loader_t loader = {my_destroy, my_supports, my_load, "mine"};
  ck_ok(hali_instance_register_executable_loader(in, &loader, &mine));
  ck_ok(hali_instance_register_static_library(in, &k_twice_library));
  ck_status(hali_instance_register_static_library(in, &k_twice_library),
            HALI_STATUS_ALREADY_EXISTS, "test_static");
  hali_kernel_library_t old = k_twice_library;
  old.abi_version = 99;
  ck_status(hali_instance_register_static_library(in, &old),
            HALI_STATUS_INVALID_ARGUMENT, "ABI version 99");
  hali_device_t *d = device_new(in, _i ? HALI_DEVICE_LOCAL_TASK
                                       : HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(in, k_kernels);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  ck_assert_int_eq(mine.loads, 1);
  ck_assert_str_eq(mine.library, "anything");
  check_twice(c, d, "run_st");
  check_twice(c, d, "run_mine");
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  ck_assert_int_eq(mine.destroyed, 0);
  hali_instance_release(in);
  ck_assert_int_eq(mine.destroyed, 1);
  /* Without the static table or the loader the module does not link. */
  in = instance_new();
  ck_status(try_context(in, k_kernels, NULL, &c), HALI_STATUS_NOT_FOUND,
            "no static kernel library named 'test_static'");
  hali_instance_release(in);
  in = instance_new();
  ck_ok(hali_instance_register_static_library(in, &k_twice_library));
  ck_status(try_context(in, k_kernels, NULL, &c), HALI_STATUS_UNIMPLEMENTED,
            "format \"mine\", which no loader supports");
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Limits. */

static const char k_limits[] =
    "module @limits\n"
    "func @down(%n: i32) -> i32 {\n"
    "  %one = const.i32 1\n"
    "  %m = sub.i32 %n, %one\n"
    "  %r = call @down(%m)\n"
    "  return %r\n"
    "}\n"
    "func @count(%n: i32) -> i32 {\n"
    "  %i = const.i32 0\n"
    "  %one = const.i32 1\n"
    "  br ^head\n"
    "^head:\n"
    "  %more = lt.s.i32 %i, %n\n"
    "  cond_br %more, ^body, ^done\n"
    "^body:\n"
    "  %i = add.i32 %i, %one\n"
    "  br ^head\n"
    "^done:\n"
    "  return %i\n"
    "}\n"
    "func @alloc(%bytes: i64) -> i64 {\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %b = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %n = hal.buffer.length %b\n"
    "  return %n\n"
    "}\n";

START_TEST(limit_memory) {
  hali_instance_t *in = instance_new();
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.max_memory_bytes = 64 * 1024;
  hali_context_t *c = context_new(in, k_limits, &p);
  hali_variant_t arg = hali_variant_i64(4096), res;
  ck_ok(hali_context_invoke(c, lookup(c, "alloc"), &arg, 1, &res, 1));
  ck_assert_int_eq(res.u.i64, 4096);
  arg = hali_variant_i64(1 << 20);
  ck_status(hali_context_invoke(c, lookup(c, "alloc"), &arg, 1, &res, 1),
            HALI_STATUS_RESOURCE_EXHAUSTED, NULL);
  hali_context_release(c);
  /* The device's own limit applies as well. */
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.max_memory_bytes = 1024;
  hali_device_t *d = NULL;
  ck_ok(hali_device_create(in, &dp, &d));
  int64_t big = 2048;
  hali_buffer_view_t *v = NULL;
  ck_status(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_I8, 1, &big, NULL, 0,
                                    &v),
            HALI_STATUS_RESOURCE_EXHAUSTED, NULL);
  hali_module_t *m = module_new(in, k_limits);
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  arg = hali_variant_i64(2048);
  ck_status(hali_context_invoke(c, lookup(c, "alloc"), &arg, 1, &res, 1),
            HALI_STATUS_RESOURCE_EXHAUSTED, NULL);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* Allocator hooks: every buffer's storage goes through them, and all of
 * it comes back. */
typedef struct {
  atomic_int allocs, frees;
  atomic_llong live;
} hook_counts_t;

static void *hook_alloc(void *user, size_t size, size_t alignment) {
  hook_counts_t *h = user;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  atomic_fetch_add(&h->allocs, 1);
  atomic_fetch_add(&h->live, (long long)size);
  return p;
}

static void hook_free(void *user, void *ptr, size_t size) {
  hook_counts_t *h = user;
  atomic_fetch_add(&h->frees, 1);
  atomic_fetch_sub(&h->live, (long long)size);
  free(ptr);
}

START_TEST(allocator_hooks) {
  hook_counts_t counts;
  atomic_init(&counts.allocs, 0);
  atomic_init(&counts.frees, 0);
  atomic_init(&counts.live, 0);
  hali_instance_options_t o;
  hali_instance_options_initialize(&o);
  o.allocator.alloc = hook_alloc;
  o.allocator.free = hook_free;
  o.allocator.user = &counts;
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(&o, &in));
  hali_context_t *c = context_new(in, k_limits, NULL);
  hali_variant_t arg = hali_variant_i64(4096), res;
  ck_ok(hali_context_invoke(c, lookup(c, "alloc"), &arg, 1, &res, 1));
  ck_assert_int_eq(res.u.i64, 4096);
  hali_context_release(c);
  hali_instance_release(in);
  ck_assert_int_ge(atomic_load(&counts.allocs), 1);
  ck_assert_int_eq(atomic_load(&counts.allocs), atomic_load(&counts.frees));
  ck_assert_int_eq(atomic_load(&counts.live), 0);
  /* Only one of the two is an error. */
  o.allocator.free = NULL;
  ck_status(hali_instance_create(&o, &in), HALI_STATUS_INVALID_ARGUMENT,
            "allocator hooks need both alloc and free");
}
END_TEST

START_TEST(limit_call_depth) {
  hali_instance_t *in = instance_new();
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.max_call_depth = 50;
  hali_context_t *c = context_new(in, k_limits, &p);
  int32_t n = 10, r;
  ck_status(call_i32(c, "down", &n, 1, &r), HALI_STATUS_RESOURCE_EXHAUSTED,
            "call depth limit of 50 exceeded");
  hali_context_release(c);
  /* The instance's defaults apply when a context gives no params. */
  hali_instance_options_t o;
  hali_instance_options_initialize(&o);
  o.default_context_params.max_call_depth = 9;
  hali_instance_release(in);
  ck_ok(hali_instance_create(&o, &in));
  c = context_new(in, k_limits, NULL);
  ck_status(call_i32(c, "down", &n, 1, &r), HALI_STATUS_RESOURCE_EXHAUSTED,
            "call depth limit of 9 exceeded");
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

/* A call-depth failure's backtrace through the API: repeated frames are one
 * annotation with a count, however deep (doc/tracing.md, "Backtraces"). */
static const char k_recursion[] = "module @recursion\n"             /*  1 */
                                  "func @self(%n: i32) -> i32 {\n"  /*  2 */
                                  "  %r = call @self(%n)\n"         /*  3 */
                                  "  return %r\n"                   /*  4 */
                                  "}\n"                             /*  5 */
                                  "func @ping(%n: i32) -> i32 {\n"  /*  6 */
                                  "  %r = call @pong(%n)\n"         /*  7 */
                                  "  return %r\n"                   /*  8 */
                                  "}\n"                             /*  9 */
                                  "func @pong(%n: i32) -> i32 {\n"  /* 10 */
                                  "  %r = call @ping(%n)\n"         /* 11 */
                                  "  return %r\n"                   /* 12 */
                                  "}\n"                             /* 13 */
                                  "func @main(%n: i32) -> i32 {\n"  /* 14 */
                                  "  %r = call @ping(%n)\n"         /* 15 */
                                  "  return %r\n"                   /* 16 */
                                  "}\n";                            /* 17 */

/* Invokes @name(0) on a context limited to |depth| frames; returns the
 * status text (the caller frees it) and its annotation count. */
static char *recursion_failure(hali_instance_t *in, const char *name,
                               uint32_t depth, size_t *out_lines) {
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.max_call_depth = depth;
  hali_context_t *c = context_new(in, k_recursion, &p);
  int32_t n = 0, r;
  hali_status_t s = call_i32(c, name, &n, 1, &r);
  hali_context_release(c);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_RESOURCE_EXHAUSTED);
  *out_lines = hali_status_annotation_count(s);
  char *text = hali_status_to_string(s);
  hali_status_free(s);
  ck_assert_ptr_nonnull(text);
  return text;
}

START_TEST(limit_call_depth_backtrace) {
  hali_instance_t *in = instance_new();
  size_t lines;
  /* 100,000 frames: one line (it was 100,000 lines; check_cli runs a
   * million, which is slow under TSan). */
  char *text = recursion_failure(in, "self", 100000, &lines);
  ck_assert_str_eq(text, "RESOURCE_EXHAUSTED: call depth limit of 100000 "
                         "exceeded\n"
                         "  at @self@0 (test.hasm:3) × 100000");
  ck_assert_uint_eq(lines, 1);
  free(text);
  /* Mutual recursion under @main: frame k (from the bottom, @main's is 1)
   * is @ping's when k is even, so the innermost (k = 100000) is @ping's,
   * then 49999 pairs end at k = 3, and frame 2 is left over. */
  text = recursion_failure(in, "main", 100000, &lines);
  ck_assert_str_eq(text, "RESOURCE_EXHAUSTED: call depth limit of 100000 "
                         "exceeded\n"
                         "  at [@ping@0 (test.hasm:7), @pong@0 "
                         "(test.hasm:11)] × 49999\n"
                         "  at @ping@0 (test.hasm:7)\n"
                         "  at @main@0 (test.hasm:15)");
  ck_assert_uint_eq(lines, 3);
  ck_assert_uint_lt(strlen(text), 256);
  free(text);
  /* Nothing repeats in three frames: one line each. */
  text = recursion_failure(in, "main", 3, &lines);
  ck_assert_str_eq(text, "RESOURCE_EXHAUSTED: call depth limit of 3 "
                         "exceeded\n"
                         "  at @pong@0 (test.hasm:11)\n"
                         "  at @ping@0 (test.hasm:7)\n"
                         "  at @main@0 (test.hasm:15)");
  ck_assert_uint_eq(lines, 3);
  free(text);
  hali_instance_release(in);
}
END_TEST

/* The context's memory limit and the call depth bound an invocation and
 * every fiber it spawns: a self-spawning recursion that holds 64 KiB per
 * level stops at the 1 MiB limit, and one that holds nothing at the call
 * depth (a spawn counts as a call). */
static const char k_spawn_limits[] =
    "module @spawn_limits\n"
    "func @grow(%n: i32) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %bytes = const.i64 65536\n"
    "  %b = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %one = const.i32 1\n"
    "  %m = add.i32 %n, %one\n"
    "  %f = fiber.spawn @grow(%m)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  %len = hal.buffer.length %b\n"
    "  return %m\n"
    "}\n"
    "func @deepen(%n: i32) -> i32 {\n"
    "  %one = const.i32 1\n"
    "  %m = add.i32 %n, %one\n"
    "  %f = fiber.spawn @deepen(%m)\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %m\n"
    "}\n";

START_TEST(limit_memory_and_depth_across_spawns) {
  hali_instance_t *in = instance_new();
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.max_memory_bytes = 1 << 20;
  p.max_call_depth = 64;
  hali_context_t *c = context_new(in, k_spawn_limits, &p);
  int32_t n = 0, r = 0;
  char *texts[2];
  for (int i = 0; i < 2; ++i) {
    hali_status_t s = call_i32(c, "grow", &n, 1, &r);
    ck_assert_int_eq(hali_status_code(s), HALI_STATUS_RESOURCE_EXHAUSTED);
    /* 16 levels hold the whole megabyte: the 17th fails (16 awaits up the
     * chain), far from the depth limit. */
    size_t awaits = 0;
    for (size_t k = 0; k < hali_status_annotation_count(s); ++k)
      if (strstr(hali_status_annotation(s, k), "awaited fence #")) awaits++;
    ck_assert_uint_eq(awaits, 16);
    texts[i] = hali_status_to_string(s);
    hali_status_free(s);
  }
  ck_assert_msg(strstr(texts[0], "65536") != NULL, "%s", texts[0]);
  /* (The second run failing at the same level shows that everything the
   * first held was freed with its fibers.) */
  free(texts[0]);
  free(texts[1]);
  ck_status(call_i32(c, "deepen", &n, 1, &r), HALI_STATUS_RESOURCE_EXHAUSTED,
            "call depth limit of 64 exceeded: cannot spawn @deepen 64 frames "
            "deep (counting the fibers that spawned this one)");
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

/* fiber_threads: the context's fibers also run on workers; a tree of
 * spawned fibers joined with fiber.join gives the same count on 1 and 3
 * threads. */
static const char k_tree[] =
    "module @tree\n"
    "func @tree(%depth: i32) -> i32 {\n"
    "^entry:\n"
    "  %one = const.i32 1\n"
    "  %zero = const.i32 0\n"
    "  %leaf = le.s.i32 %depth, %zero\n"
    "  cond_br %leaf, ^leaf, ^inner\n"
    "^leaf:\n"
    "  return %one\n"
    "^inner:\n"
    "  %d = sub.i32 %depth, %one\n"
    "  %a = fiber.spawn @tree(%d)\n"
    "  %b = fiber.spawn @tree(%d)\n"
    "  %x = fiber.join @tree(%a)\n"
    "  %y = fiber.join @tree(%b)\n"
    "  %s = add.i32 %x, %y\n"
    "  %t = add.i32 %s, %one\n"
    "  return %t\n"
    "}\n";

START_TEST(fiber_threads_option) {
  hali_instance_t *in = instance_new();
  for (uint32_t threads = 0; threads <= 3; threads += 3) {
    hali_context_params_t p;
    hali_context_params_initialize(&p);
    ck_assert_uint_eq(p.fiber_threads, 0);
    p.fiber_threads = threads;
    hali_context_t *c = context_new(in, k_tree, &p);
    for (int rep = 0; rep < 3; ++rep) {
      int32_t depth = 10, r = 0;
      ck_ok(call_i32(c, "tree", &depth, 1, &r));
      ck_assert_int_eq(r, (1 << 11) - 1);
    }
    hali_context_release(c);
  }
  hali_instance_release(in);
}
END_TEST

START_TEST(limit_fuel) {
  hali_instance_t *in = instance_new();
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.fuel = 1000;
  hali_context_t *c = context_new(in, k_limits, &p);
  int32_t n = 10, r = 0;
  ck_ok(call_i32(c, "count", &n, 1, &r));
  ck_assert_int_eq(r, 10);
  n = 1000000;
  ck_status(call_i32(c, "count", &n, 1, &r), HALI_STATUS_RESOURCE_EXHAUSTED,
            "instruction budget (fuel) of 1000 exhausted");
  /* Each invocation gets the whole budget again. */
  n = 10;
  ck_ok(call_i32(c, "count", &n, 1, &r));
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

static const char k_spin[] =
    "module @spin\n"
    "func @env.started() import\n"
    "func @spin() -> i32 {\n"
    "  call @env.started()\n"
    "  %x = const.i32 0\n"
    "  %one = const.i32 1\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %x = add.i32 %x, %one\n"
    "  br ^loop\n"
    "}\n"
    "func @quick() -> i32 {\n"
    "  %one = const.i32 1\n"
    "  return %one\n"
    "}\n";

static const char k_ticking[] =
    "module @ticking\n"
    "func @env.tick() -> i64 import\n"
    "func @tick_forever() -> i64 {\n"
    "^entry:\n"
    "  br ^loop\n"
    "^loop:\n"
    "  %n = call @env.tick()\n"
    "  br ^loop\n"
    "}\n";

/* @env.tick: counts calls; at the 1000th it cancels (from another thread,
 * which it waits for) the invocation, or the context when none is set. */
typedef struct {
  hali_context_t *context;
  hali_invocation_t *invocation;
  int64_t ticks, cancelled_at_tick;
} tick_state_t;

static void *tick_cancel(void *p) {
  tick_state_t *t = p;
  if (t->invocation) hali_invocation_cancel(t->invocation);
  else hali_context_cancel(t->context);
  return NULL;
}

static hali_status_t host_tick(void *user, const hali_variant_t *args,
                               size_t n, hali_variant_t *results, size_t m) {
  tick_state_t *t = user;
  if (++t->ticks == 1000) {
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, tick_cancel, t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    t->cancelled_at_tick = t->ticks;
  }
  results[0] = hali_variant_i64(t->ticks);
  return HALI_OK;
}

static atomic_int g_started;

static hali_status_t host_started(void *user, const hali_variant_t *args,
                                  size_t n, hali_variant_t *results,
                                  size_t m) {
  atomic_store(&g_started, 1);
  return HALI_OK;
}

typedef struct {
  hali_context_t *context;
  hali_invocation_t *invocation;
  int64_t cancelled_at;
} canceller_t;

static void *cancel_soon(void *p) {
  canceller_t *k = p;
  while (!atomic_load(&g_started)) usleep(1000);
  usleep(20000); /* well inside the loop */
  k->cancelled_at = now_ns();
  if (k->invocation) hali_invocation_cancel(k->invocation);
  else hali_context_cancel(k->context);
  return NULL;
}

/* ---- The direct invoke (api/context.c): a synchronous invoke of a
 * function that cannot suspend runs without the scheduler. */

static const char k_direct[] =
    "module @direct\n"
    "func @spin() -> i32 {\n"
    "  %z = const.i32 0\n"
    "  br ^loop\n"
    "^loop:\n"
    "  br ^loop\n"
    "}\n"
    "func @div(%a: i32, %b: i32) -> i32 {\n"
    "  %q = div.s.i32 %a, %b\n"
    "  return %q\n"
    "}\n"
    "func @deep(%n: i32) -> i32 {\n"
    "  %one = const.i32 1\n"
    "  %zero = const.i32 0\n"
    "  %end = le.s.i32 %n, %zero\n"
    "  cond_br %end, ^done, ^more\n"
    "^done:\n"
    "  return %zero\n"
    "^more:\n"
    "  %m = sub.i32 %n, %one\n"
    "  %r = call @deep(%m)\n"
    "  %s = add.i32 %r, %one\n"
    "  return %s\n"
    "}\n"
    "func @buffer(%bytes: i64) -> !hal.buffer {\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %b = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  return %b\n"
    "}\n"
    "func @count(%n: i32) -> i32 {\n"
    "  %i = const.i32 0\n"
    "  %one = const.i32 1\n"
    "  br ^head\n"
    "^head:\n"
    "  %more = lt.s.i32 %i, %n\n"
    "  cond_br %more, ^body, ^done\n"
    "^body:\n"
    "  %i = add.i32 %i, %one\n"
    "  br ^head\n"
    "^done:\n"
    "  return %i\n"
    "}\n";

typedef struct {
  hali_context_t *context;
  atomic_int done;
  int64_t first_cancel;
} direct_canceller_t;

/* Cancels the context 20 ms from now, and again every millisecond until
 * told to stop (the invoke may not have begun at the first). */
static void *direct_cancel(void *p) {
  direct_canceller_t *k = p;
  usleep(20000);
  k->first_cancel = now_ns();
  while (!atomic_load(&k->done)) {
    hali_context_cancel(k->context);
    usleep(1000);
  }
  return NULL;
}

/* hali_context_cancel stops a synchronous invoke that runs directly (a
 * loop that never calls the host nor awaits); the next invoke of the
 * context is not affected by the cancels that came before it. */
START_TEST(direct_invoke_cancel_from_another_thread) {
  hali_instance_t *in = instance_new();
  hali_context_t *c = context_new(in, k_direct, NULL);
  static direct_canceller_t k;
  memset(&k, 0, sizeof(k));
  k.context = c;
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, direct_cancel, &k), 0);
  hali_variant_t res;
  hali_status_t s = hali_context_invoke(c, lookup(c, "spin"), NULL, 0, &res, 1);
  int64_t returned = now_ns();
  atomic_store(&k.done, 1);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_status(s, HALI_STATUS_CANCELLED, "invocation cancelled");
  ck_assert_int_ge(returned, k.first_cancel);
  int32_t n = 1000, r = 0;
  ck_ok(call_i32(c, "count", &n, 1, &r));
  ck_assert_int_eq(r, 1000);
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

/* The direct path gives what the scheduler's path gives: the same results
 * (a ref result too), the same failures with the same text, the same
 * call-depth limit.  A context with max_duration_ns always takes the
 * scheduler's path (its watchdog needs a fiber): the reference. */
START_TEST(direct_invoke_matches_scheduler_path) {
  hali_instance_t *in = instance_new();
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.max_call_depth = 40;
  hali_context_t *direct = context_new(in, k_direct, &p);
  p.max_duration_ns = 600ull * 1000000000ull;
  hali_context_t *sched = context_new(in, k_direct, &p);
  hali_context_t *cs[2] = {direct, sched};
  char *texts[2][3] = {{NULL}};
  int32_t got[2][3];
  for (int k = 0; k < 2; ++k) {
    int32_t ab[2] = {7, 0};
    hali_status_t s = call_i32(cs[k], "div", ab, 2, &got[k][0]);
    ck_assert_int_eq(hali_status_code(s), HALI_STATUS_OUT_OF_RANGE);
    texts[k][0] = hali_status_to_string(s);
    hali_status_free(s);
    int32_t n = 39;
    ck_ok(call_i32(cs[k], "deep", &n, 1, &got[k][1]));
    ck_assert_int_eq(got[k][1], 39);
    n = 40;
    s = call_i32(cs[k], "deep", &n, 1, &got[k][2]);
    ck_assert_int_eq(hali_status_code(s), HALI_STATUS_RESOURCE_EXHAUSTED);
    texts[k][1] = hali_status_to_string(s);
    hali_status_free(s);
    ab[0] = -12, ab[1] = 5;
    ck_ok(call_i32(cs[k], "div", ab, 2, &got[k][0]));
    ck_assert_int_eq(got[k][0], -2);
    hali_variant_t arg = hali_variant_i64(4096), res;
    ck_ok(hali_context_invoke(cs[k], lookup(cs[k], "buffer"), &arg, 1, &res,
                              1));
    ck_assert_int_eq(res.type, HALI_VARIANT_BUFFER);
    ck_assert_ptr_nonnull(res.u.ref);
    hali_variant_release(&res);
    /* A wrong argument type fails before anything runs. */
    arg = hali_variant_i32(1);
    s = hali_context_invoke(cs[k], lookup(cs[k], "buffer"), &arg, 1, &res, 1);
    ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
    texts[k][2] = hali_status_to_string(s);
    hali_status_free(s);
  }
  for (int t = 0; t < 3; ++t) {
    ck_assert_str_eq(texts[0][t], texts[1][t]);
    hali_free(texts[0][t]);
    hali_free(texts[1][t]);
  }
  ck_assert_int_eq(got[0][0], got[1][0]);
  ck_assert_int_eq(got[0][1], got[1][1]);
  hali_context_release(direct);
  hali_context_release(sched);
  hali_instance_release(in);
}
END_TEST

/* Cancellation from another thread stops a running invocation at its next
 * branch: the loop calls the host each iteration, and the host cancels
 * from another thread at the 1000th call, so "no call after the cancel"
 * is the bound (in iterations: it held however loaded the machine, where
 * a 10 ms latency bound, even the best of three, need not under TSan). */
START_TEST(limit_cancel_from_another_thread) {
  hali_instance_t *in = instance_new();
  static tick_state_t ticks;
  memset(&ticks, 0, sizeof(ticks));
  hali_import_function_t env[] = {
      {"started", "()", host_started, NULL},
      {"tick", "() -> i64", host_tick, &ticks}};
  ck_ok(hali_instance_register_import_module(in, "env", env, 2));
  hali_context_t *tc = context_new(in, k_ticking, NULL);
  ticks.context = tc;
  hali_variant_t res;
  ck_status(hali_context_invoke(tc, lookup(tc, "tick_forever"), NULL, 0, &res,
                                1),
            HALI_STATUS_CANCELLED, "at @tick_forever@");
  ck_assert_int_eq(ticks.cancelled_at_tick, 1000);
  ck_assert_int_eq(ticks.ticks, 1000); /* not one call after the cancel */
  /* The context stays usable; an async invocation can be cancelled too. */
  hali_invocation_t *inv = NULL;
  ck_ok(hali_context_invoke_async(tc, lookup(tc, "tick_forever"), NULL, 0,
                                  &inv));
  ticks.ticks = ticks.cancelled_at_tick = 0;
  ticks.invocation = inv;
  ck_ok(hali_invocation_await(inv));
  ck_status(hali_invocation_status(inv), HALI_STATUS_CANCELLED,
            "at @tick_forever@");
  ck_assert_int_eq(ticks.ticks, 1000);
  hali_invocation_release(inv);
  hali_context_release(tc);
  hali_context_t *c = context_new(in, k_spin, NULL);
  /* Code that never awaits (nor calls the host) still yields to a bounded
   * await at the end of its preemption slice, and a cancel from a thread
   * that does not synchronise with it stops it (the latency is printed:
   * the OS may deschedule the spinning thread). */
  atomic_store(&g_started, 0);
  ck_ok(hali_context_invoke_async(c, lookup(c, "spin"), NULL, 0, &inv));
  int64_t t0 = now_ns();
  ck_status(hali_invocation_await_for(inv, 30000000),
            HALI_STATUS_DEADLINE_EXCEEDED, "@spin has not finished");
  ck_assert_msg(now_ns() - t0 < 1000000000, "await_for overran by %lld ns",
                (long long)(now_ns() - t0 - 30000000));
  ck_assert(!hali_invocation_is_done(inv));
  ck_assert(atomic_load(&g_started));
  canceller_t k = {c, inv, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, cancel_soon, &k), 0);
  ck_ok(hali_invocation_await(inv));
  int64_t returned_at = now_ns();
  pthread_join(t, NULL);
  ck_assert(hali_invocation_is_done(inv));
  ck_status(hali_invocation_status(inv), HALI_STATUS_CANCELLED,
            "invocation cancelled");
  printf("cancel of a spinning invocation: stopped %.3f ms after "
         "hali_invocation_cancel\n",
         (double)(returned_at - k.cancelled_at) / 1e6);
  hali_invocation_release(inv);
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

/* A host callback of a spinning invocation awaits another invocation of
 * the same context (a nested scheduler run); the outer bounded await must
 * still stop the spin when the nested run is over. */
static hali_invocation_t *g_inner;
static bool g_inner_ok;

static hali_status_t host_await_inner(void *user, const hali_variant_t *args,
                                      size_t n, hali_variant_t *results,
                                      size_t m) {
  hali_status_t s = hali_invocation_await_for(g_inner, 5000000000);
  g_inner_ok = s == HALI_OK && hali_invocation_is_done(g_inner);
  hali_status_free(s);
  return HALI_OK;
}

START_TEST(await_for_after_nested_run) {
  hali_instance_t *in = instance_new();
  hali_import_function_t cb = {"started", "()", host_await_inner, NULL};
  ck_ok(hali_instance_register_import_module(in, "env", &cb, 1));
  hali_context_t *c = context_new(in, k_spin, NULL);
  hali_invocation_t *spin = NULL;
  g_inner = NULL;
  g_inner_ok = false;
  ck_ok(hali_context_invoke_async(c, lookup(c, "spin"), NULL, 0, &spin));
  ck_ok(hali_context_invoke_async(c, lookup(c, "quick"), NULL, 0, &g_inner));
  int64_t t0 = now_ns();
  ck_status(hali_invocation_await_for(spin, 50000000),
            HALI_STATUS_DEADLINE_EXCEEDED, "@spin has not finished");
  int64_t waited = now_ns() - t0;
  ck_assert_msg(waited < 2000000000, "await_for(50 ms) took %lld ns",
                (long long)waited);
  ck_assert(g_inner_ok);
  hali_invocation_cancel(spin);
  ck_ok(hali_invocation_await(spin));
  ck_status(hali_invocation_status(spin), HALI_STATUS_CANCELLED, NULL);
  hali_invocation_release(g_inner);
  hali_invocation_release(spin);
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Limits bound kernels too (issue 13 row 8): an invocation's deadline,
 * fuel and cancellation stop a bytecode kernel at its next branch and
 * abandon a native kernel's dispatch at its next workgroup; the kernel's
 * fence fails, the invocation fails with the reason, and releasing the
 * context and the device afterwards returns at once. */

static atomic_int g_slow_workgroups;

/* Under valgrind or a sanitizer everything is many times slower: the
 * deadlines below (and the bounds measured against them) stretch by this
 * factor, so that start-up never eats the time given to the kernels. */
static int64_t slow_factor(void) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  return 20;
#endif
  const char *p = getenv("LD_PRELOAD");
  if (p && strstr(p, "valgrind")) return 50;
  const char *h = getenv("HALI_TEST_SLOW");
  if (h && *h) return atoi(h) > 0 ? atoi(h) : 20;
  return 1;
}
static int _runaway_kind; /* 0: local-sync, 1: local-task */

/* A slow native workgroup: 2 ms. */
static int slow_kernel(const hali_kernel_dispatch_state_t *d,
                       const hali_kernel_workgroup_state_t *w) {
  atomic_fetch_add(&g_slow_workgroups, 1);
  usleep(2000);
  return 0;
}

static const hali_kernel_export_t k_slow_exports[] = {
    {"slow", slow_kernel, 0, 1, {1, 1, 1}, 0},
};
static const hali_kernel_library_t k_slow_library = {
    HALI_KERNEL_ABI_VERSION, "test_slow", 1, k_slow_exports};

/* @run(EXE, n): dispatches export @spin of executable @EXE over n
 * workgroups with constant %c, submits it and awaits its fence. */
#define RUNAWAY_FN(EXE, EXPORT)                                                \
  "func @run_" EXE "(%n: i32, %c: i32) -> i32 {\n"                             \
  "  %zero32 = const.i32 0\n"                                                  \
  "  %one32 = const.i32 1\n"                                                   \
  "  %two32 = const.i32 2\n"                                                   \
  "  %device = hal.device.get\n"                                               \
  "  %cmd = hal.command_buffer.create %device, %one32, %two32\n"               \
  "  hal.command_buffer.push_constants %cmd, %zero32, [%c]\n"                  \
  "  %exe = hal.executable.get @" EXE "\n"                                     \
  "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %n, %one32, %one32\n"    \
  "  hal.command_buffer.finalize %cmd\n"                                       \
  "  %wait = hal.fence.null\n"                                                 \
  "  %done = hal.fence.create %device\n"                                       \
  "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"                 \
  "  %forever = const.i64 -1\n"                                                \
  "  %status = hal.fence.await %done, %forever\n"                              \
  "  return %status\n"                                                         \
  "}\n"

static const char k_runaway[] =
    "module @runaway\n"
    "executable @bc format \"bytecode\" {\n"
    "  export @spin(i32) -> () function @spin_kernel workgroup_size "
    "[1, 1, 1]\n"
    "}\n"
    "executable @st format \"static\" library \"test_slow\" {\n"
    "  export @slow(i32) -> ()\n"
    "}\n" RUNAWAY_FN("bc", "spin") RUNAWAY_FN("st", "slow")
    /* Counts to %c, or forever when %c is 0. */
    "func @spin_kernel(%c: i32, %x: i32, %y: i32, %z: i32, %cx: i32, "
    "%cy: i32, %cz: i32) {\n"
    "^entry:\n"
    "  %i = const.i32 0\n"
    "  %one = const.i32 1\n"
    "  %zero = const.i32 0\n"
    "  %endless = eq.i32 %c, %zero\n"
    "  cond_br %endless, ^forever, ^count\n"
    "^forever:\n"
    "  %i = add.i32 %i, %one\n"
    "  br ^forever\n"
    "^count:\n"
    "  %i = add.i32 %i, %one\n"
    "  %more = lt.s.i32 %i, %c\n"
    "  cond_br %more, ^count, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n";

static hali_context_t *runaway_context(hali_instance_t **out_in,
                                       hali_device_t **out_d,
                                       const hali_context_params_t *p) {
  hali_instance_t *in = instance_new();
  ck_ok(hali_instance_register_static_library(in, &k_slow_library));
  hali_device_t *d =
      device_new(in, _runaway_kind ? HALI_DEVICE_LOCAL_TASK
                                   : HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(in, k_runaway);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, p, &c));
  hali_module_release(m);
  *out_in = in;
  *out_d = d;
  return c;
}

/* Releases the context, the device and the instance; each must return at
 * once (work left behind was abandoned, not waited for).  The bound is
 * loose: a hang is what it catches, not a slow machine. */
static void release_promptly(hali_context_t *c, hali_device_t *d,
                             hali_instance_t *in) {
  int64_t t0 = now_ns();
  hali_context_release(c);
  hali_device_release(d);
  hali_instance_release(in);
  int64_t took = now_ns() - t0;
  ck_assert_msg(took < 5000000000LL * slow_factor(), "releasing took %lld ns",
                (long long)took);
}

START_TEST(kernel_deadline) {
  _runaway_kind = _i;
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  const int64_t deadline = 100000000 * slow_factor(); /* 100 ms */
  p.max_duration_ns = (uint64_t)deadline;
  hali_instance_t *in;
  hali_device_t *d;
  hali_context_t *c = runaway_context(&in, &d, &p);
  /* A kernel that finishes in time is untouched. */
  int32_t args[2] = {4, 1000}, r = -1;
  ck_ok(call_i32(c, "run_bc", args, 2, &r));
  ck_assert_int_eq(r, 0);
  /* One that never ends stops at its deadline, at a branch. */
  args[0] = 1;
  args[1] = 0;
  int64_t t0 = now_ns();
  ck_status(call_i32(c, "run_bc", args, 2, &r),
            HALI_STATUS_DEADLINE_EXCEEDED, "exceeded its deadline");
  int64_t took = now_ns() - t0;
  ck_assert_msg(took >= deadline && took < deadline + 5000000000LL,
                "the %lld ns deadline ended the kernel after %lld ns",
                (long long)deadline, (long long)took);
  /* 10,000 workgroups of 2 ms (20 s of work): abandoned at a workgroup
   * boundary, long before the end. */
  atomic_store(&g_slow_workgroups, 0);
  args[0] = 10000;
  /* On local-sync the dispatch runs inside the invocation's submit, so the
   * kernel's failure is what it sees; on local-task the invocation waits
   * for the fence, and whichever sees the deadline first (the workers, at
   * a workgroup boundary, or the scheduler's watchdog) reports it. */
  ck_status(call_i32(c, "run_st", args, 2, &r),
            HALI_STATUS_DEADLINE_EXCEEDED,
            _i ? "exceeded its deadline"
               : "abandoned before its next workgroup");
  /* A workgroup in progress ends (2 ms). */
  usleep((useconds_t)(30000 * slow_factor()));
  int ran = atomic_load(&g_slow_workgroups);
  ck_assert_msg(ran >= 1 && ran < 10000, "%d of 10000 workgroups ran", ran);
  usleep((useconds_t)(50000 * slow_factor()));
  ck_assert_int_eq(atomic_load(&g_slow_workgroups), ran); /* none later */
  release_promptly(c, d, in);
}
END_TEST

START_TEST(kernel_fuel) {
  _runaway_kind = _i;
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.fuel = 200000;
  hali_instance_t *in;
  hali_device_t *d;
  hali_context_t *c = runaway_context(&in, &d, &p);
  /* 4 workgroups of ~3,000 instructions fit in the pool (half of what
   * the invocation has left when it submits)... */
  int32_t args[2] = {4, 1000}, r = -1;
  ck_ok(call_i32(c, "run_bc", args, 2, &r));
  ck_assert_int_eq(r, 0);
  /* ...4 of ~300,000 do not, and neither does one that never ends. */
  args[1] = 100000;
  ck_status(call_i32(c, "run_bc", args, 2, &r),
            HALI_STATUS_RESOURCE_EXHAUSTED,
            "instruction budget (fuel) of the invocation exhausted in a "
            "kernel");
  args[0] = 1;
  args[1] = 0;
  ck_status(call_i32(c, "run_bc", args, 2, &r),
            HALI_STATUS_RESOURCE_EXHAUSTED, "in bytecode kernel");
  release_promptly(c, d, in);
}
END_TEST

typedef struct {
  hali_invocation_t *invocation;
  int64_t delay_ns;
} kernel_canceller_t;

static void *cancel_kernel_soon(void *p) {
  kernel_canceller_t *k = p;
  usleep((useconds_t)(k->delay_ns / 1000));
  hali_invocation_cancel(k->invocation);
  return NULL;
}

START_TEST(kernel_cancel_from_another_thread) {
  _runaway_kind = _i;
  hali_instance_t *in;
  hali_device_t *d;
  hali_context_t *c = runaway_context(&in, &d, NULL);
  const char *fns[] = {"run_bc", "run_st"};
  for (int k = 0; k < 2; ++k) {
    atomic_store(&g_slow_workgroups, 0);
    hali_variant_t args[2] = {hali_variant_i32(k ? 10000 : 1),
                              hali_variant_i32(0)};
    hali_invocation_t *inv = NULL;
    ck_ok(hali_context_invoke_async(c, lookup(c, fns[k]), args, 2, &inv));
    kernel_canceller_t kc = {inv, 50000000};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, cancel_kernel_soon, &kc), 0);
    /* On local-sync the kernel runs here, inside the await. */
    ck_ok(hali_invocation_await(inv));
    pthread_join(t, NULL);
    ck_status(hali_invocation_status(inv), HALI_STATUS_CANCELLED, NULL);
    if (k) {
      int ran = atomic_load(&g_slow_workgroups);
      ck_assert_msg(ran < 10000, "%d of 10000 workgroups ran", ran);
    }
    hali_invocation_release(inv);
  }
  /* Still usable afterwards. */
  int32_t ok_args[2] = {2, 10}, r = -1;
  ck_ok(call_i32(c, "run_bc", ok_args, 2, &r));
  release_promptly(c, d, in);
}
END_TEST

/* An invocation left running in a kernel when its context goes: the
 * release cancels it and its kernel, and returns (local-task waited for
 * the queue forever). */
START_TEST(kernel_abandoned_by_context_release) {
  _runaway_kind = _i;
  hali_instance_t *in;
  hali_device_t *d;
  hali_context_t *c = runaway_context(&in, &d, NULL);
  hali_variant_t args[2] = {hali_variant_i32(1), hali_variant_i32(0)};
  hali_invocation_t *inv = NULL;
  ck_ok(hali_context_invoke_async(c, lookup(c, "run_bc"), args, 2, &inv));
  hali_fence_t *fence = hali_invocation_fence(inv);
  ck_assert_ptr_nonnull(fence);
  hali_fence_retain(fence);
  if (_i) {
    /* local-task: the kernel runs on the workers while this waits. */
    ck_status(hali_invocation_await_for(inv, 30000000),
              HALI_STATUS_DEADLINE_EXCEEDED, NULL);
  }
  hali_invocation_release(inv);
  release_promptly(c, d, in);
  /* Whoever waits on the invocation learns why it ended. */
  bool ready = false;
  hali_status_t s = hali_fence_query(fence, &ready);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_CANCELLED);
  hali_status_free(s);
  hali_fence_release(fence);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Asynchronous invocation and fences. */

static const char k_async[] =
    "module @async\n"
    "func @env.log(%x: i32) import\n"
    "func @step$async(%x: i32, %wait: !hal.fence, %signal: !hal.fence) -> "
    "i32 {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %wait, %forever\n"
    "  call @env.log(%x)\n"
    "  %one = const.i32 1\n"
    "  %y = add.i32 %x, %one\n"
    "  hal.fence.signal %signal\n"
    "  return %y\n"
    "}\n";

static int g_log[8], g_log_count;

static hali_status_t host_log(void *user, const hali_variant_t *args,
                              size_t n, hali_variant_t *results, size_t m) {
  if (g_log_count < 8) g_log[g_log_count++] = args[0].u.i32;
  return HALI_OK;
}

START_TEST(async_chain_through_fences) {
  hali_instance_t *in = instance_new();
  hali_import_function_t log = {"log", "(i32)", host_log, NULL};
  ck_ok(hali_instance_register_import_module(in, "env", &log, 1));
  hali_device_t *d = device_new(in, _i ? HALI_DEVICE_LOCAL_TASK
                                       : HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(in, k_async);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  hali_function_t *step = lookup(c, "step$async");
  hali_fence_t *f0, *f1, *f2;
  ck_ok(hali_fence_create(&f0));
  ck_ok(hali_fence_create(&f1));
  ck_ok(hali_fence_create(&f2));
  g_log_count = 0;
  /* Start the second step first: the order comes from the fences. */
  hali_variant_t a2[3] = {hali_variant_i32(20), hali_variant_fence(f1),
                          hali_variant_fence(f2)};
  hali_variant_t a1[3] = {hali_variant_i32(10), hali_variant_fence(f0),
                          hali_variant_fence(f1)};
  hali_invocation_t *i2 = NULL, *i1 = NULL;
  ck_ok(hali_context_invoke_async(c, step, a2, 3, &i2));
  ck_ok(hali_context_invoke_async(c, step, a1, 3, &i1));
  ck_ok(hali_context_run(c));
  ck_assert(!hali_invocation_is_done(i1));
  ck_assert(!hali_invocation_is_done(i2));
  ck_assert_int_eq(g_log_count, 0);
  ck_status(hali_invocation_status(i1), HALI_STATUS_FAILED_PRECONDITION,
            "has not finished");
  hali_variant_t r;
  ck_status(hali_invocation_results(i1, &r, 1),
            HALI_STATUS_FAILED_PRECONDITION, "has not finished");
  bool ready = true;
  ck_ok(hali_fence_query(f2, &ready));
  ck_assert(!ready);
  /* A bounded await gives up while the chain waits on the host, and
   * leaves it pending. */
  int64_t t0 = now_ns();
  ck_status(hali_invocation_await_for(i2, 20000000),
            HALI_STATUS_DEADLINE_EXCEEDED,
            "@step$async has not finished by the deadline");
  int64_t waited = now_ns() - t0;
  ck_assert_msg(waited >= 20000000 && waited < 1000000000,
                "await_for(20 ms) returned after %lld ns", (long long)waited);
  ck_status(hali_invocation_await_for(i2, 0), HALI_STATUS_DEADLINE_EXCEEDED,
            NULL);
  ck_assert(!hali_invocation_is_done(i2));
  ck_assert_int_eq(g_log_count, 0);
  /* The host releases the chain. */
  ck_ok(hali_fence_signal(f0));
  ck_ok(hali_invocation_await_for(i2, 5000000000));
  ck_assert(hali_invocation_is_done(i1));
  ck_assert(hali_invocation_is_done(i2));
  ck_assert_int_eq(g_log_count, 2);
  ck_assert_int_eq(g_log[0], 10);
  ck_assert_int_eq(g_log[1], 20);
  ck_ok(hali_fence_query(f2, &ready));
  ck_assert(ready);
  ck_ok(hali_fence_await(hali_invocation_fence(i1), 0));
  ck_ok(hali_invocation_status(i2));
  ck_ok(hali_invocation_results(i2, &r, 1));
  ck_assert_int_eq(r.u.i32, 21);
  ck_status(hali_invocation_results(i2, &r, 2), HALI_STATUS_INVALID_ARGUMENT,
            "returns 1 result(s), room for 2");
  hali_invocation_t *bad = i1;
  ck_status(hali_context_invoke_async(c, step, a1, 2, &bad),
            HALI_STATUS_INVALID_ARGUMENT, "takes 3 argument(s), 2 given");
  ck_assert_ptr_null(bad);
  /* A failed wait fence fails the invocation waiting on it. */
  hali_fence_t *f3;
  ck_ok(hali_fence_create(&f3));
  hali_variant_t a3[3] = {hali_variant_i32(0), hali_variant_fence(f3),
                          hali_variant_fence(f2)};
  hali_invocation_t *i3 = NULL;
  ck_ok(hali_context_invoke_async(c, step, a3, 3, &i3));
  hali_fence_fail(f3, hali_status_make(HALI_STATUS_ABORTED, "upstream"));
  ck_ok(hali_invocation_await(i3));
  ck_status(hali_invocation_status(i3), HALI_STATUS_ABORTED, "upstream");
  ck_status(hali_fence_await(hali_invocation_fence(i3), 0),
            HALI_STATUS_ABORTED, "upstream");
  hali_invocation_release(i3);
  hali_fence_release(f3);
  /* A pending invocation released by the host is cancelled with the
   * context. */
  hali_fence_t *never;
  ck_ok(hali_fence_create(&never));
  hali_variant_t a4[3] = {hali_variant_i32(0), hali_variant_fence(never),
                          hali_variant_fence(f2)};
  hali_invocation_t *i4 = NULL;
  ck_ok(hali_context_invoke_async(c, step, a4, 3, &i4));
  ck_ok(hali_context_run(c));
  hali_invocation_release(i4);
  hali_fence_release(never);
  /* A synchronous invoke of a function awaiting a fence nobody signals is
   * a deadlock report, not a hang. */
  hali_fence_t *stuck;
  ck_ok(hali_fence_create(&stuck));
  hali_variant_t a5[3] = {hali_variant_i32(0), hali_variant_fence(stuck),
                          hali_variant_fence(f2)};
  ck_status(hali_context_invoke(c, step, a5, 3, &r, 1),
            HALI_STATUS_FAILED_PRECONDITION, "deadlock");
  hali_fence_release(stuck);
  hali_invocation_release(i1);
  hali_invocation_release(i2);
  hali_fence_release(f0);
  hali_fence_release(f1);
  hali_fence_release(f2);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

START_TEST(fences) {
  hali_fence_t *f = NULL;
  ck_ok(hali_fence_create(&f));
  bool ready = true;
  ck_ok(hali_fence_query(f, &ready));
  ck_assert(!ready);
  ck_status(hali_fence_await(f, 1000000), HALI_STATUS_DEADLINE_EXCEEDED, NULL);
  hali_fence_retain(f);
  ck_ok(hali_fence_signal(f));
  ck_ok(hali_fence_await(f, HALI_TIMEOUT_INFINITE));
  ck_ok(hali_fence_query(f, &ready));
  ck_assert(ready);
  hali_fence_release(f);
  hali_fence_release(f);
  ck_ok(hali_fence_create(&f));
  hali_fence_fail(f, hali_status_make(HALI_STATUS_DATA_LOSS, "gone"));
  ck_status(hali_fence_query(f, &ready), HALI_STATUS_DATA_LOSS, "gone");
  ck_assert(ready);
  ck_status(hali_fence_signal(f), HALI_STATUS_DATA_LOSS, "gone");
  hali_fence_fail(f, NULL); /* the first failure stays */
  ck_status(hali_fence_await(f, 0), HALI_STATUS_DATA_LOSS, "gone");
  hali_fence_release(f);
  ck_status(hali_fence_create(NULL), HALI_STATUS_INVALID_ARGUMENT, NULL);
  ck_status(hali_fence_signal(NULL), HALI_STATUS_INVALID_ARGUMENT, NULL);
  ck_status(hali_fence_query(NULL, &ready), HALI_STATUS_INVALID_ARGUMENT,
            NULL);
  ck_status(hali_fence_await(NULL, 0), HALI_STATUS_INVALID_ARGUMENT, NULL);
  hali_fence_fail(NULL, hali_status_make(HALI_STATUS_UNKNOWN, "dropped"));
  hali_fence_release(NULL);
  ck_assert_ptr_null(hali_invocation_fence(NULL));
  ck_assert(!hali_invocation_is_done(NULL));
  hali_invocation_cancel(NULL);
  hali_invocation_release(NULL);
  ck_status(hali_invocation_await(NULL), HALI_STATUS_INVALID_ARGUMENT, NULL);
  ck_status(hali_invocation_await_for(NULL, 0), HALI_STATUS_INVALID_ARGUMENT,
            NULL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Tracing. */

typedef struct {
  int lines;
  int saw_add;
} trace_sink_t;

static void on_trace(void *user, const char *line) {
  trace_sink_t *t = user;
  t->lines++;
  if (strstr(line, "add.i32")) t->saw_add = 1;
}

START_TEST(tracing_to_a_callback) {
  hali_instance_t *in = instance_new();
  trace_sink_t sink = {0};
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.trace_bits = HALI_TRACE_BITS_VM | HALI_TRACE_BITS_HAL;
  p.trace_callback = on_trace;
  p.trace_user = &sink;
  hali_context_t *c = context_new(in, k_arith, &p);
  int32_t ab[2] = {1, 2}, r;
  ck_ok(call_i32(c, "add", ab, 2, &r));
  ck_assert_int_eq(r, 3);
  hali_context_release(c);
  ck_assert_int_gt(sink.lines, 0);
  ck_assert(sink.saw_add);
  /* A filter that matches nothing: no instruction lines. */
  trace_sink_t quiet = {0};
  p.trace_bits = HALI_TRACE_BITS_VM;
  p.trace_user = &quiet;
  p.trace_filter = "nomatch*";
  c = context_new(in, k_arith, &p);
  ck_ok(call_i32(c, "add", ab, 2, &r));
  hali_context_release(c);
  ck_assert(!quiet.saw_add);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* What the hali tool needs: element text, load and print options, binary
 * output, trace formats and files, abandoning a device. */

START_TEST(elements_by_name_and_text) {
  static const struct {
    const char *name;
    hali_element_type_t type;
    size_t bytes;
  } k[] = {
      {"i1", HALI_ELEMENT_TYPE_I1, 1},     {"i8", HALI_ELEMENT_TYPE_I8, 1},
      {"i16", HALI_ELEMENT_TYPE_I16, 2},   {"i32", HALI_ELEMENT_TYPE_I32, 4},
      {"i64", HALI_ELEMENT_TYPE_I64, 8},   {"si8", HALI_ELEMENT_TYPE_SI8, 1},
      {"si16", HALI_ELEMENT_TYPE_SI16, 2}, {"si32", HALI_ELEMENT_TYPE_SI32, 4},
      {"si64", HALI_ELEMENT_TYPE_SI64, 8}, {"u8", HALI_ELEMENT_TYPE_U8, 1},
      {"u16", HALI_ELEMENT_TYPE_U16, 2},   {"u32", HALI_ELEMENT_TYPE_U32, 4},
      {"u64", HALI_ELEMENT_TYPE_U64, 8},   {"bool", HALI_ELEMENT_TYPE_BOOL, 1},
      {"f16", HALI_ELEMENT_TYPE_F16, 2},   {"f32", HALI_ELEMENT_TYPE_F32, 4},
      {"f64", HALI_ELEMENT_TYPE_F64, 8},   {"bf16", HALI_ELEMENT_TYPE_BF16, 2},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    /* Enumerable, in this order, and nothing more. */
    ck_assert_uint_eq(hali_element_type_at(i), k[i].type);
    hali_element_type_t t = 0;
    ck_ok(hali_element_type_parse(k[i].name, strlen(k[i].name), &t));
    ck_assert_uint_eq(t, k[i].type);
    ck_assert_str_eq(hali_element_type_name(t), k[i].name);
    ck_assert_uint_eq(hali_element_type_byte_size(t), k[i].bytes);
  }
  ck_assert_uint_eq(hali_element_type_at(sizeof k / sizeof k[0]), 0);
  ck_assert_uint_eq(hali_element_type_at(SIZE_MAX), 0);
  /* Only |length| bytes are read. */
  hali_element_type_t t = 0;
  ck_ok(hali_element_type_parse("f32=1", 3, &t));
  ck_assert_uint_eq(t, HALI_ELEMENT_TYPE_F32);
  ck_status(hali_element_type_parse("q32", 3, &t),
            HALI_STATUS_INVALID_ARGUMENT, "unknown element type 'q32'");
  ck_assert_uint_eq(t, 0);
  ck_status(hali_element_type_parse("f32", 3, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_type");
  ck_assert_ptr_null(hali_element_type_name(0x12345678u));

  /* Parsing: ranges, spellings, never octal. */
  uint8_t b[8];
  ck_ok(hali_element_parse(HALI_ELEMENT_TYPE_I8, "-128", 4, b));
  ck_assert_int_eq((int8_t)b[0], -128);
  ck_status(hali_element_parse(HALI_ELEMENT_TYPE_I8, "300", 3, b),
            HALI_STATUS_INVALID_ARGUMENT, "'300' is not a valid i8");
  ck_status(hali_element_parse(HALI_ELEMENT_TYPE_SI8, "255", 3, b),
            HALI_STATUS_INVALID_ARGUMENT, "not a valid si8");
  ck_ok(hali_element_parse(HALI_ELEMENT_TYPE_I8, "255", 3, b)); /* signless */
  ck_assert_int_eq(b[0], 255);
  ck_status(hali_element_parse(HALI_ELEMENT_TYPE_U8, "-1", 2, b),
            HALI_STATUS_INVALID_ARGUMENT, "'-1' is not a valid u8");
  int32_t i32;
  ck_ok(hali_element_parse(HALI_ELEMENT_TYPE_I32, "0xffffffff", 10, &i32));
  ck_assert_int_eq(i32, -1);
  ck_ok(hali_element_parse(HALI_ELEMENT_TYPE_I32, "010", 3, &i32));
  ck_assert_int_eq(i32, 10);
  ck_ok(hali_element_parse(HALI_ELEMENT_TYPE_BOOL, "true", 4, b));
  ck_assert_int_eq(b[0], 1);
  float f32;
  ck_ok(hali_element_parse(HALI_ELEMENT_TYPE_F32, "1.5e3", 5, &f32));
  ck_assert(f32 == 1500.0f);
  ck_status(hali_element_parse(HALI_ELEMENT_TYPE_F32, "pi", 2, &f32),
            HALI_STATUS_INVALID_ARGUMENT, "'pi' is not a valid f32");
  ck_status(hali_element_parse(HALI_ELEMENT_TYPE_F32, "", 0, &f32),
            HALI_STATUS_INVALID_ARGUMENT, "'' is not a valid f32");
  ck_status(hali_element_parse(0x12345678u, "1", 1, b),
            HALI_STATUS_INVALID_ARGUMENT, "unknown element type");
  ck_status(hali_element_parse(HALI_ELEMENT_TYPE_I8, "1", 1, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_element");

  /* Formatting: shortest text that reads back to the same value of the
   * type; f16's largest finite value is 65504. */
  char buf[64];
  uint16_t h = 0x7bff;
  hali_element_format(HALI_ELEMENT_TYPE_F16, &h, buf, sizeof buf);
  ck_assert_str_eq(buf, "6.55e+04");
  ck_assert(hali_element_to_f64(HALI_ELEMENT_TYPE_F16, &h) == 65504.0);
  uint16_t bf = 0x4049; /* 3.140625 */
  hali_element_format(HALI_ELEMENT_TYPE_BF16, &bf, buf, sizeof buf);
  ck_assert_str_eq(buf, "3.14");
  f32 = 0.1f;
  hali_element_format(HALI_ELEMENT_TYPE_F32, &f32, buf, sizeof buf);
  ck_assert_str_eq(buf, "0.1");
  double f64 = -1.0 / 0.0;
  hali_element_format(HALI_ELEMENT_TYPE_F64, &f64, buf, sizeof buf);
  ck_assert_str_eq(buf, "-inf");
  uint8_t m1 = 0xff;
  hali_element_format(HALI_ELEMENT_TYPE_I8, &m1, buf, sizeof buf);
  ck_assert_str_eq(buf, "-1");
  hali_element_format(HALI_ELEMENT_TYPE_U8, &m1, buf, sizeof buf);
  ck_assert_str_eq(buf, "255");
  ck_assert(hali_element_to_f64(HALI_ELEMENT_TYPE_I8, &m1) == -1.0);
  ck_assert(hali_element_to_f64(HALI_ELEMENT_TYPE_U8, &m1) == 255.0);
  uint64_t u64 = UINT64_MAX;
  hali_element_format(HALI_ELEMENT_TYPE_U64, &u64, buf, sizeof buf);
  ck_assert_str_eq(buf, "18446744073709551615");
  hali_element_format(0x12345678u, &u64, buf, sizeof buf);
  ck_assert_str_eq(buf, "?");
  ck_assert(isnan(hali_element_to_f64(0x12345678u, &u64)));
  /* Every printed value parses back to the same bits. */
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    uint8_t in[8] = {0x81, 0x42, 0x13, 0x04, 0x35, 0x26, 0x17, 0x08};
    if (k[i].type == HALI_ELEMENT_TYPE_I1 || k[i].type == HALI_ELEMENT_TYPE_BOOL)
      in[0] = 1;
    uint8_t out[8] = {0};
    hali_element_format(k[i].type, in, buf, sizeof buf);
    ck_ok(hali_element_parse(k[i].type, buf, strlen(buf), out));
    ck_assert_msg(memcmp(in, out, k[i].bytes) == 0, "%s: %s", k[i].name, buf);
  }
}
END_TEST

START_TEST(view_sizes) {
  uint64_t n = 1;
  const int64_t shape[3] = {2, 3, 4};
  ck_ok(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_F32, 3, shape, &n));
  ck_assert_uint_eq(n, 2 * 3 * 4 * 4);
  ck_ok(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_I1, 0, NULL, &n));
  ck_assert_uint_eq(n, 1); /* rank 0: one element, a byte */
  const int64_t empty[2] = {5, 0};
  ck_ok(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_F64, 2, empty, &n));
  ck_assert_uint_eq(n, 0);
  const int64_t huge[2] = {INT64_MAX, 4};
  ck_status(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_I8, 2, huge, &n),
            HALI_STATUS_OUT_OF_RANGE, "at dim 1");
  ck_assert_uint_eq(n, 0);
  const int64_t big[1] = {INT64_MAX};
  ck_status(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_I32, 1, big, &n),
            HALI_STATUS_OUT_OF_RANGE, "byte size overflows");
  const int64_t neg[1] = {-1};
  ck_status(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_I32, 1, neg, &n),
            HALI_STATUS_INVALID_ARGUMENT, "negative");
  ck_status(hali_buffer_view_compute_size(0x12345678u, 1, shape, &n),
            HALI_STATUS_INVALID_ARGUMENT, NULL);
  ck_status(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_I32, 1, NULL, &n),
            HALI_STATUS_INVALID_ARGUMENT, "shape");
  ck_status(hali_buffer_view_compute_size(HALI_ELEMENT_TYPE_I32, 1, shape,
                                          NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_byte_length");
}
END_TEST

START_TEST(device_kind_names_and_abandon) {
  hali_device_kind_t k = HALI_DEVICE_LOCAL_TASK;
  ck_ok(hali_device_kind_parse("local-sync", &k));
  ck_assert_int_eq(k, HALI_DEVICE_LOCAL_SYNC);
  ck_ok(hali_device_kind_parse("local-task", &k));
  ck_assert_int_eq(k, HALI_DEVICE_LOCAL_TASK);
  ck_status(hali_device_kind_parse("gpu", &k), HALI_STATUS_NOT_FOUND,
            "unknown device 'gpu' (known: local-sync, local-task)");
  ck_assert_int_eq(k, HALI_DEVICE_LOCAL_SYNC);
  ck_status(hali_device_kind_parse(NULL, &k), HALI_STATUS_INVALID_ARGUMENT,
            "name");
  ck_status(hali_device_kind_parse("local-sync", NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_kind");
  hali_device_abandon(NULL); /* a no-op */

  /* A failing program leaves a submission waiting on a fence only it
   * could have signalled: after hali_device_abandon, releasing the device
   * returns (the tcase timeout catches a hang). */
  static const char pending[] =
      "func @main() -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %go = hal.fence.create %device\n"
      "  %done = hal.fence.create %device\n"
      "  hal.device.queue.execute %device, %go, %done, []\n"
      "  %code = const.i32 3\n"
      "  fail %code, \"early exit\"\n"
      "}\n";
  for (int kind = 0; kind < 2; ++kind) {
    hali_instance_t *in = instance_new();
    hali_device_t *d = device_new(in, (hali_device_kind_t)kind);
    hali_module_t *m = module_new(in, pending);
    hali_context_t *c = NULL;
    ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
    hali_variant_t r;
    ck_status(hali_context_invoke(c, lookup(c, "main"), NULL, 0, &r, 1),
              HALI_STATUS_INVALID_ARGUMENT, "early exit");
    hali_context_release(c);
    hali_device_abandon(d);
    hali_device_release(d);
    hali_module_release(m);
    hali_instance_release(in);
  }
}
END_TEST

START_TEST(module_load_options_and_functions) {
  hali_instance_t *in = instance_new();
  const char *tensor = HALI_SRCDIR "/examples/mlp_tensor_rodata.hasm";
  hali_module_load_options_t o;
  hali_module_load_options_initialize(&o);
  ck_assert_ptr_null(o.passes);
  ck_assert(!o.no_passes);
  hali_module_t *m = NULL;
  /* The defaults, spelled out or not, lower the tensor level. */
  ck_ok(hali_module_load_file_ex(in, tensor, &o, &m));
  size_t n = hali_module_function_count(m);
  hali_module_release(m);
  ck_ok(hali_module_load_file_ex(in, tensor, NULL, &m));
  ck_assert_uint_eq(hali_module_function_count(m), n);
  hali_module_release(m);
  o.passes = "func-conversion,materialize-interfaces,stream-to-hal";
  ck_ok(hali_module_load_file_ex(in, tensor, &o, &m));
  /* A context lowers the module as it was loaded, and runs it. */
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  hali_variant_t r = {0};
  ck_ok(hali_context_invoke(c, lookup(c, "main"), NULL, 0, &r, 1));
  ck_assert_int_eq(r.type, HALI_VARIANT_BUFFER_VIEW);
  hali_variant_release(&r);
  hali_context_release(c);
  hali_device_release(d);
  hali_module_release(m);
  /* Without the passes a tensor-level module does not verify. */
  o.passes = NULL;
  o.no_passes = true;
  ck_status(hali_module_load_file_ex(in, tensor, &o, &m),
            HALI_STATUS_INVALID_ARGUMENT, "register 0 is a tensor");
  ck_assert_ptr_null(m);
  o.no_passes = false;
  o.passes = "func-conversion,bogus";
  ck_status(hali_module_load_file_ex(in, tensor, &o, &m),
            HALI_STATUS_INVALID_ARGUMENT,
            "unknown pass 'bogus' (passes: func-conversion, ");
  ck_status(hali_module_load_file_ex(in, HALI_SRCDIR "/nope.hasm", NULL, &m),
            HALI_STATUS_NOT_FOUND, "nope.hasm: cannot open");
  ck_status(hali_module_load_file_ex(NULL, tensor, NULL, &m),
            HALI_STATUS_INVALID_ARGUMENT, "instance");
  ck_status(hali_module_load_file_ex(in, NULL, NULL, &m),
            HALI_STATUS_INVALID_ARGUMENT, "path");
  ck_status(hali_module_load_file_ex(in, tensor, NULL, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_module");

  /* Functions by index, imports included. */
  m = module_new(in, "module @two\n"
                     "func @env.log(%x: i32) import\n"
                     "func @f() {\n  return\n}\n"
                     "func @g(%x: i32) -> i32 {\n  return %x\n}\n");
  ck_assert_uint_eq(hali_module_function_count(m), 3);
  bool seen[3] = {false, false, false};
  for (size_t i = 0; i < 3; ++i) {
    const char *name = hali_module_function_name(m, i);
    ck_assert_ptr_nonnull(name);
    if (strcmp(name, "env.log") == 0) seen[0] = true;
    if (strcmp(name, "f") == 0) seen[1] = true;
    if (strcmp(name, "g") == 0) seen[2] = true;
  }
  ck_assert(seen[0] && seen[1] && seen[2]);
  ck_assert_ptr_null(hali_module_function_name(m, 3));
  ck_assert_ptr_null(hali_module_function_name(NULL, 0));
  ck_assert_uint_eq(hali_module_function_count(NULL), 0);
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

START_TEST(module_binary_and_text) {
  hali_instance_t *in = instance_new();
  const char *fib = HALI_SRCDIR "/examples/fib.hasm";
  hali_module_t *m = NULL, *back = NULL, *stripped = NULL;
  ck_ok(hali_module_load_file(in, fib, &m));
  void *data = NULL, *sdata = NULL;
  size_t size = 0, ssize = 0;
  ck_ok(hali_module_write_binary(m, false, &data, &size));
  ck_ok(hali_module_write_binary(m, true, &sdata, &ssize));
  ck_assert_uint_gt(size, 0);
  ck_assert_uint_lt(ssize, size); /* no names, no lines */
  ck_ok(hali_module_load_bytes(in, data, size, "fib.hbc", &back));
  ck_ok(hali_module_load_bytes(in, sdata, ssize, "s.hbc", &stripped));
  ck_assert_str_eq(hali_module_name(back), "fib");
  ck_assert_uint_eq(hali_module_function_count(back),
                    hali_module_function_count(m));
  /* The bytes of the reloaded module are the same bytes. */
  void *again = NULL;
  size_t asize = 0;
  ck_ok(hali_module_write_binary(back, false, &again, &asize));
  ck_assert(asize == size && memcmp(again, data, size) == 0);
  free(again);
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &stripped, 1, NULL, &c));
  int32_t ten = 10, r = 0;
  ck_ok(call_i32(c, "fib", &ten, 1, &r));
  ck_assert_int_eq(r, 55);
  hali_context_release(c);
  hali_device_release(d);
  free(data);
  free(sdata);
  ck_status(hali_module_write_binary(NULL, false, &data, &size),
            HALI_STATUS_INVALID_ARGUMENT, "module");
  ck_status(hali_module_write_binary(m, false, NULL, &size),
            HALI_STATUS_INVALID_ARGUMENT, "out_data");
  ck_status(hali_module_write_binary(m, false, &data, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_size");
  ck_assert_ptr_null(data);

  /* As written, with and without locations. */
  char *text = NULL;
  ck_ok(hali_module_print_file(fib, NULL, &text));
  ck_assert(strncmp(text, "module @fib source \"", 20) == 0);
  ck_assert_ptr_nonnull(strstr(text, "\nfunc @fib(%n: i32) -> (i32) {\n"));
  ck_assert_ptr_nonnull(strstr(text, " loc(7)\n"));
  free(text);
  hali_module_print_options_t po = {0};
  po.no_locs = true;
  ck_ok(hali_module_print_file(fib, &po, &text));
  ck_assert(strncmp(text, "module @fib\n", 12) == 0);
  ck_assert_ptr_null(strstr(text, "loc("));
  free(text);
  /* After a pass: the tensor-level module's lowered IR, not verified. */
  const char *tensor = HALI_SRCDIR "/examples/mlp_tensor.hasm";
  po.after = "func-conversion";
  ck_ok(hali_module_print_file(tensor, &po, &text));
  ck_assert_ptr_nonnull(strstr(text, "module @mlp_tensor"));
  ck_assert_ptr_nonnull(strstr(text, "@main$async"));
  free(text);
  /* "all": the module after each pass, in order, each headed by its
   * name; the last copy is what --after=stream-to-hal prints. */
  po.after = "all";
  ck_ok(hali_module_print_file(tensor, &po, &text));
  const char *h1 = strstr(text, "# after pass 1 of 3: func-conversion\n"
                                "module @mlp_tensor");
  const char *h2 = strstr(text, "\n# after pass 2 of 3: "
                                "materialize-interfaces\nmodule @mlp_tensor");
  const char *h3 = strstr(text, "\n# after pass 3 of 3: stream-to-hal\n");
  ck_assert(h1 == text && h2 && h3 && h2 < h3);
  char *last = NULL;
  po.after = "stream-to-hal";
  ck_ok(hali_module_print_file(tensor, &po, &last));
  ck_assert_str_eq(h3 + strlen("\n# after pass 3 of 3: stream-to-hal\n"),
                   last);
  free(last);
  free(text);
  po.after = "all";
  po.passes = "func-conversion,materialize-interfaces";
  ck_ok(hali_module_print_file(tensor, &po, &text));
  ck_assert(strncmp(text, "# after pass 1 of 2: func-conversion\n", 37) == 0);
  ck_assert_ptr_nonnull(
      strstr(text, "\n# after pass 2 of 2: materialize-interfaces\n"));
  ck_assert_ptr_null(strstr(text, "stream-to-hal\n"));
  free(text);
  po.passes = NULL;
  po.after = "bogus";
  ck_status(hali_module_print_file(tensor, &po, &text),
            HALI_STATUS_INVALID_ARGUMENT, "unknown pass 'bogus'");
  ck_assert_ptr_null(text);
  /* As written, a module that does not load is not printed, unless the
   * verifier is skipped with the passes. */
  po.after = NULL;
  po.no_passes = true;
  ck_ok(hali_module_print_file(tensor, &po, &text));
  ck_assert_ptr_nonnull(strstr(text, "module @mlp_tensor"));
  free(text);
  static const char bad[] = "func @f(%a: i32) -> i32 {\n"
                            "  return %b\n"
                            "}\n";
  char path[] = "/tmp/hali-api-print-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
  close(fd);
  ck_status(hali_module_print_file(path, NULL, &text),
            HALI_STATUS_INVALID_ARGUMENT, "%b");
  ck_assert_ptr_null(text);
  unlink(path);
  ck_status(hali_module_print_file(HALI_SRCDIR "/nope.hasm", NULL, &text),
            HALI_STATUS_NOT_FOUND, "cannot open");
  ck_status(hali_module_print_file(NULL, NULL, &text),
            HALI_STATUS_INVALID_ARGUMENT, "path");
  ck_status(hali_module_print_file(fib, NULL, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_text");

  char *md = hali_instruction_set_markdown();
  ck_assert_ptr_nonnull(md);
  ck_assert(strncmp(md, "# hali instruction set\n", 23) == 0);
  ck_assert_ptr_nonnull(strstr(md, "add.i32"));
  free(md);
  hali_module_release(back);
  hali_module_release(stripped);
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

/* Reads all of |f| from the start. */
static char *slurp(FILE *f) {
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  ck_assert_int_ge(n, 0);
  rewind(f);
  char *text = calloc((size_t)n + 1, 1);
  ck_assert_ptr_nonnull(text);
  ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  return text;
}

START_TEST(tracing_formats_and_files) {
  hali_instance_t *in = instance_new();
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  ck_assert_int_eq(p.trace_format, HALI_TRACE_FORMAT_TEXT);
  ck_assert_ptr_null(p.trace_file);
  ck_assert_uint_eq(p.trace_max_values, 0);
  p.trace_bits = HALI_TRACE_BITS_VM;
  hali_context_t *c = NULL;
  if (!hali_trace_available()) {
    ck_status(try_context(in, k_arith, &p, &c), HALI_STATUS_UNIMPLEMENTED,
              "--disable-tracing");
    hali_instance_release(in);
    return;
  }
  /* Text lines into a file, at most two elements of a view each. */
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  p.trace_file = f;
  p.trace_max_values = 2;
  c = context_new(in, k_arith, &p);
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  const int64_t shape[1] = {4};
  const int32_t vals[4] = {1, 2, 3, 4};
  hali_buffer_view_t *v = NULL;
  ck_ok(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_I32, 1, shape, vals,
                                sizeof vals, &v));
  hali_variant_t arg = hali_variant_view(v), r;
  ck_ok(hali_context_invoke(c, lookup(c, "dim0"), &arg, 1, &r, 1));
  ck_assert_int_eq(r.u.i64, 4);
  hali_context_release(c);
  char *text = slurp(f);
  ck_assert_msg(strstr(text, "[vm] @dim0@1 ") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "<4xi32>=[1 2 ...]") != NULL, "%s", text);
  free(text);
  fclose(f);
  /* Chrome JSON: the whole document once the context is released. */
  f = tmpfile();
  ck_assert_ptr_nonnull(f);
  p.trace_file = f;
  p.trace_format = HALI_TRACE_FORMAT_CHROME;
  p.trace_bits = HALI_TRACE_BITS_VM | HALI_TRACE_BITS_HAL;
  c = context_new(in, k_arith, &p);
  int32_t ab[2] = {1, 2}, sum;
  ck_ok(call_i32(c, "add", ab, 2, &sum));
  hali_context_release(c);
  text = slurp(f);
  ck_assert_msg(strncmp(text, "{\"traceEvents\":[", 16) == 0, "%s", text);
  ck_assert_msg(strstr(text, "],\"displayTimeUnit\":\"ns\"}\n") != NULL, "%s",
                text);
  ck_assert_msg(strstr(text, "\"ph\":\"X\"") != NULL, "%s", text);
  ck_assert_ptr_null(strstr(text, "[vm]")); /* no instruction lines */
  free(text);
  fclose(f);
  /* An unknown format. */
  p.trace_file = NULL;
  p.trace_format = (hali_trace_output_format_t)7;
  ck_status(try_context(in, k_arith, &p, &c), HALI_STATUS_INVALID_ARGUMENT,
            "unknown trace format 7");
  ck_assert_ptr_null(c);
  hali_buffer_view_release(v);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Host memory without copies: imports and maps. */

static int released_count;
static void *released_user;
static void count_release(void *user) {
  released_count++;
  released_user = user;
}

static const char k_import[] =
    "module @imp\n"
    "func @poke(%v: !hal.buffer_view) {\n"
    "  %b = hal.buffer_view.buffer %v\n"
    "  %at = const.i64 4\n"
    "  %x = const.i32 77\n"
    "  hal.buffer.store.i32 %b, %at, %x\n"
    "  return\n"
    "}\n"
    "func @same(%v: !hal.buffer_view) -> !hal.buffer_view {\n"
    "  return %v\n"
    "}\n"
    "func @splat_into(%a: mutable tensor<4xi32>, %v: i32) {\n"
    "  %t = tensor.splat %v : tensor<4xi32>\n"
    "  tensor.overwrite %t, %a\n"
    "  return\n"
    "}\n"
    "func @copy(%a: tensor<4xi32>) -> tensor<4xi32> {\n"
    "  %c = tensor.clone %a\n"
    "  return %c\n"
    "}\n";

START_TEST(import_host_memory) {
  hali_instance_t *in = instance_new();
  hali_context_t *c = context_new(in, k_import, NULL);
  static _Alignas(64) int32_t mem[4] = {1, 2, 3, 4};
  const int64_t shape[1] = {4};
  released_count = 0;
  int tag;
  hali_buffer_view_t *v = NULL;
  ck_ok(hali_buffer_view_import(HALI_ELEMENT_TYPE_I32, 1, shape, mem,
                                sizeof mem, HALI_IMPORT_READ_ONLY,
                                count_release, &tag, &v));
  ck_assert_uint_eq(hali_buffer_view_element_count(v), 4);
  ck_assert_uint_eq(hali_buffer_view_byte_length(v), 16);
  ck_assert(!hali_buffer_view_is_writable(v));
  /* The memory is shared: a map gives the caller's pointer back, and a
   * host write shows through the view. */
  void *p = NULL;
  size_t n = 0;
  ck_ok(hali_buffer_view_map(v, false, &p, &n));
  ck_assert_ptr_eq(p, mem);
  ck_assert_uint_eq(n, sizeof mem);
  mem[3] = 40;
  int32_t got[4];
  ck_ok(hali_buffer_view_read(v, got, sizeof got));
  ck_assert_int_eq(got[3], 40);
  /* Read-only: no writable map, no store, no mutable parameter. */
  ck_status(hali_buffer_view_map(v, true, &p, &n),
            HALI_STATUS_PERMISSION_DENIED, "imported read-only");
  ck_assert_ptr_null(p);
  ck_assert_uint_eq(n, 0);
  hali_variant_t arg = hali_variant_view(v);
  ck_status(hali_context_invoke(c, lookup(c, "poke"), &arg, 1, NULL, 0),
            HALI_STATUS_PERMISSION_DENIED, "imported read-only");
  hali_variant_t two[2] = {hali_variant_view(v), hali_variant_i64(9)};
  ck_status(hali_context_invoke(c, lookup(c, "splat_into"), two, 2, NULL, 0),
            HALI_STATUS_PERMISSION_DENIED,
            "@splat_into argument 0 (%a) is a mutable parameter");
  ck_assert_int_eq(mem[0], 1);
  ck_assert_int_eq(mem[1], 2);
  /* An immutable tensor parameter reads it in place. */
  hali_variant_t r;
  ck_ok(hali_context_invoke(c, lookup(c, "copy"), &arg, 1, &r, 1));
  ck_ok(hali_buffer_view_read(r.u.view, got, sizeof got));
  ck_assert_int_eq(got[0], 1);
  ck_assert_int_eq(got[3], 40);
  ck_assert(hali_buffer_view_is_writable(r.u.view));
  hali_variant_release(&r);
  /* A result that is the import itself keeps the memory alive: the
   * callback runs once, when the last reference goes. */
  ck_ok(hali_context_invoke(c, lookup(c, "same"), &arg, 1, &r, 1));
  ck_assert_ptr_eq(r.u.view, v);
  hali_buffer_view_release(v);
  ck_assert_int_eq(released_count, 0);
  hali_variant_release(&r);
  ck_assert_int_eq(released_count, 1);
  ck_assert_ptr_eq(released_user, &tag);

  /* Read-write: programs write the caller's memory in place. */
  static _Alignas(64) int32_t rw[4] = {0, 0, 0, 0};
  ck_ok(hali_buffer_view_import(HALI_ELEMENT_TYPE_I32, 1, shape, rw,
                                sizeof rw, HALI_IMPORT_READ_WRITE,
                                count_release, &tag, &v));
  ck_assert(hali_buffer_view_is_writable(v));
  arg = hali_variant_view(v);
  ck_ok(hali_context_invoke(c, lookup(c, "poke"), &arg, 1, NULL, 0));
  ck_assert_int_eq(rw[1], 77);
  two[0] = hali_variant_view(v);
  ck_ok(hali_context_invoke(c, lookup(c, "splat_into"), two, 2, NULL, 0));
  for (int i = 0; i < 4; ++i) ck_assert_int_eq(rw[i], 9);
  ck_ok(hali_buffer_view_map(v, true, &p, &n));
  ck_assert_ptr_eq(p, rw);
  hali_buffer_view_release(v);
  /* The context kept nothing: released at once. */
  ck_assert_int_eq(released_count, 2);
  /* No callback at all is fine; an empty view needs no memory. */
  ck_ok(hali_buffer_view_import(HALI_ELEMENT_TYPE_I32, 1, shape, rw,
                                sizeof rw, HALI_IMPORT_READ_ONLY, NULL, NULL,
                                &v));
  hali_buffer_view_release(v);
  const int64_t empty[2] = {3, 0};
  ck_ok(hali_buffer_view_import(HALI_ELEMENT_TYPE_F64, 2, empty, NULL, 0,
                                HALI_IMPORT_READ_ONLY, count_release, &tag,
                                &v));
  ck_assert_uint_eq(hali_buffer_view_byte_length(v), 0);
  hali_buffer_view_release(v);
  ck_assert_int_eq(released_count, 3);
  hali_context_release(c);
  hali_instance_release(in);
}
END_TEST

START_TEST(import_host_memory_errors) {
  static _Alignas(64) uint8_t mem[64];
  const int64_t shape[1] = {4};
  hali_buffer_view_t *v = (hali_buffer_view_t *)1;
  released_count = 0;
  /* Misaligned for the element type. */
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 1, shape, mem + 2,
                                    16, HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, &v),
            HALI_STATUS_INVALID_ARGUMENT,
            "is not aligned to the 4 bytes of a f32 element");
  ck_assert_ptr_null(v);
  /* One-byte elements may sit anywhere. */
  ck_ok(hali_buffer_view_import(HALI_ELEMENT_TYPE_U8, 1, shape, mem + 1, 4,
                                HALI_IMPORT_READ_ONLY, NULL, NULL, &v));
  hali_buffer_view_release(v);
  /* Sizes. */
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 1, shape, mem, 15,
                                    HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, &v),
            HALI_STATUS_INVALID_ARGUMENT, "holds 16 bytes; 15 given");
  const int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 2, huge, mem, 16,
                                    HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, &v),
            HALI_STATUS_OUT_OF_RANGE, "hali_buffer_view_import");
  const int64_t negative[1] = {-1};
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 1, negative, mem,
                                    16, HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, &v),
            HALI_STATUS_INVALID_ARGUMENT, "hali_buffer_view_import");
  ck_status(hali_buffer_view_import(0x12345678u, 1, shape, mem, 16,
                                    HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, &v),
            HALI_STATUS_INVALID_ARGUMENT, "unknown element type 0x12345678");
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 1, shape, mem, 16,
                                    (hali_import_access_t)5, count_release,
                                    NULL, &v),
            HALI_STATUS_INVALID_ARGUMENT, "unknown access 5");
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 1, shape, NULL, 16,
                                    HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, &v),
            HALI_STATUS_INVALID_ARGUMENT, "data");
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 1, NULL, mem, 16,
                                    HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, &v),
            HALI_STATUS_INVALID_ARGUMENT, "shape");
  ck_status(hali_buffer_view_import(HALI_ELEMENT_TYPE_F32, 1, shape, mem, 16,
                                    HALI_IMPORT_READ_ONLY, count_release,
                                    NULL, NULL),
            HALI_STATUS_INVALID_ARGUMENT, "out_view");
  /* A failed import never calls the release callback. */
  ck_assert_int_eq(released_count, 0);
  /* Maps: argument errors, and storage the host cannot map. */
  void *p = (void *)1;
  size_t n = 1;
  ck_status(hali_buffer_view_map(NULL, false, &p, &n),
            HALI_STATUS_INVALID_ARGUMENT, "view");
  ck_assert_ptr_null(p);
  ck_assert_uint_eq(n, 0);
  ck_assert(!hali_buffer_view_is_writable(NULL));
}
END_TEST

/* A result's storage, mapped in place: the pointer stays valid while the
 * view is retained, also after the context is gone. */
START_TEST(map_result_view) {
  hali_instance_t *in = instance_new();
  hali_context_t *c = context_new(in, k_import, NULL);
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  const int64_t shape[1] = {4};
  const int32_t vals[4] = {5, 6, 7, 8};
  hali_buffer_view_t *v = NULL;
  ck_ok(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_I32, 1, shape, vals,
                                sizeof vals, &v));
  hali_variant_t arg = hali_variant_view(v), r;
  ck_ok(hali_context_invoke(c, lookup(c, "copy"), &arg, 1, &r, 1));
  hali_context_release(c);
  void *p = NULL, *p2 = NULL;
  size_t n = 0;
  ck_ok(hali_buffer_view_map(r.u.view, false, &p, &n));
  ck_assert_uint_eq(n, 16);
  ck_assert(memcmp(p, vals, 16) == 0);
  /* Writable (the result's own storage): writes show in reads. */
  ck_ok(hali_buffer_view_map(r.u.view, true, &p2, &n));
  ck_assert_ptr_eq(p, p2);
  ((int32_t *)p2)[0] = -1;
  int32_t got[4];
  ck_ok(hali_buffer_view_read(r.u.view, got, sizeof got));
  ck_assert_int_eq(got[0], -1);
  /* The argument was copied, not changed. */
  ck_ok(hali_buffer_view_read(v, got, sizeof got));
  ck_assert_int_eq(got[0], 5);
  hali_variant_release(&r);
  hali_buffer_view_release(v);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* Chrome tracing to a file by path: the context creates it and closes it,
 * complete, when released. */
START_TEST(trace_to_path) {
  if (!hali_trace_available()) return;
  hali_instance_t *in = instance_new();
  char dir[] = "/tmp/hali-api-trace-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/t.json", dir);
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  ck_assert_ptr_null(p.trace_path);
  p.trace_bits = HALI_TRACE_BITS_HAL;
  p.trace_format = HALI_TRACE_FORMAT_CHROME;
  p.trace_path = path;
  hali_context_t *c = context_new(in, k_arith, &p);
  int32_t ab[2] = {1, 2}, sum;
  ck_ok(call_i32(c, "add", ab, 2, &sum));
  hali_context_release(c);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  char *text = slurp(f);
  fclose(f);
  ck_assert_msg(strncmp(text, "{\"traceEvents\":[", 16) == 0, "%s", text);
  ck_assert_msg(strstr(text, "\"cat\":\"fiber\"") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,"
                             "\"tid\":0,\"args\":{\"name\":\"vm\"}}") != NULL,
                "%s", text);
  size_t len = strlen(text);
  ck_assert(len > 26 &&
            strcmp(text + len - 26, "],\"displayTimeUnit\":\"ns\"}\n") == 0);
  free(text);
  unlink(path);
  /* Errors: a file that cannot be created; two places at once. */
  snprintf(path, sizeof path, "%s/no/such/dir/t.json", dir);
  ck_status(try_context(in, k_arith, &p, &c), HALI_STATUS_NOT_FOUND,
            "no/such/dir/t.json': cannot create it: No such file");
  ck_assert_ptr_null(c);
  p.trace_file = stderr;
  ck_status(try_context(in, k_arith, &p, &c), HALI_STATUS_INVALID_ARGUMENT,
            "trace_path and trace_file are both set");
  rmdir(dir);
  hali_instance_release(in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* One module, many contexts: the module is loaded once and shared; each
 * context links it (its own executables and import bindings). */

static const char k_shared[] =
    "module @shared\n"
    "executable @k format \"bytecode\" {\n"
    "  export @add(tensor<?xi32>, i32, i32) -> (tensor<?xi32>) function "
    "@add_kernel workgroup_size [1, 1, 1]\n"
    "}\n"
    "func @env.scale(%x: i32) -> i32 import\n"
    "func @scaled(%x: i32) -> i32 {\n"
    "  %y = call @env.scale(%x)\n"
    "  return %y\n"
    "}\n"
    /* Records (does not submit) out = in + d; returns the command buffer
     * and the view it will fill. */
    "func @record(%in: !hal.buffer_view, %d: i32) -> (!hal.command_buffer, "
    "!hal.buffer_view) {\n"
    "  %i32 = const.i32 0x10000020\n"
    "  %dense = const.i32 1\n"
    "  %zero32 = const.i32 0\n"
    "  %one32 = const.i32 1\n"
    "  %two32 = const.i32 2\n"
    "  %n = hal.buffer_view.dim %in, %zero32\n"
    "  %four = const.i64 4\n"
    "  %bytes = mul.i64 %n, %four\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %out = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %inb = hal.buffer_view.buffer %in\n"
    "  %cmd = hal.command_buffer.create %device, %one32, %two32\n"
    "  %n32 = trunc.i64.i32 %n\n"
    "  hal.command_buffer.push_constants %cmd, %zero32, [%d, %n32]\n"
    "  %zero = const.i64 0\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %zero32, %inb, %zero, "
    "%bytes\n"
    "  hal.command_buffer.push_descriptor_set %cmd, %one32, %out, %zero, "
    "%bytes\n"
    "  %exe = hal.executable.get @k\n"
    "  hal.command_buffer.dispatch %cmd, %exe, %zero32, %one32, %one32, "
    "%one32\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %view = hal.buffer_view.create %out, %i32, %dense, [%n]\n"
    "  return %cmd, %view\n"
    "}\n"
    /* Submits a recorded command buffer and waits for it. */
    "func @submit(%cmd: !hal.command_buffer) -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %wait = hal.fence.null\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  %forever = const.i64 -1\n"
    "  %status = hal.fence.await %done, %forever\n"
    "  return %status\n"
    "}\n"
    "func @add_kernel(%in: !hal.buffer, %d: i32, %n: i32, %out: !hal.buffer, "
    "%x: i32, %y: i32, %z: i32, %cx: i32, %cy: i32, %cz: i32) {\n"
    "^entry:\n"
    "  %i = const.i64 0\n"
    "  %stop = ext.s.i32.i64 %n\n"
    "  %four = const.i64 4\n"
    "  %one = const.i64 1\n"
    "  %empty = ge.s.i64 %i, %stop\n"
    "  cond_br %empty, ^done, ^loop\n"
    "^loop:\n"
    "  %at = mul.i64 %i, %four\n"
    "  %v = hal.buffer.load.i32 %in, %at\n"
    "  %v = add.i32 %v, %d\n"
    "  hal.buffer.store.i32 %out, %at, %v\n"
    "  %i = add.i64 %i, %one\n"
    "  %more = lt.s.i64 %i, %stop\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n";

static hali_status_t host_scale(void *user, const hali_variant_t *args,
                                size_t n, hali_variant_t *results, size_t m) {
  results[0].u.i32 = args[0].u.i32 * *(const int32_t *)user;
  return NULL;
}

/* An instance whose @env.scale multiplies by |*factor|. */
static hali_instance_t *scaling_instance(int32_t *factor) {
  hali_instance_t *in = instance_new();
  const hali_import_function_t fns[] = {
      {"scale", "(i32) -> i32", host_scale, factor}};
  ck_ok(hali_instance_register_import_module(in, "env", fns, 1));
  return in;
}

/* @record then @submit of in = [base, base + 1, ...] (4 elements) with |d|;
 * checks out = in + d. */
static void record_and_submit(hali_context_t *c, hali_device_t *dev,
                              int32_t base, int32_t d) {
  int32_t data[4] = {base, base + 1, base + 2, base + 3};
  int64_t shape[1] = {4};
  hali_buffer_view_t *in = NULL;
  ck_ok(hali_buffer_view_create(dev, HALI_ELEMENT_TYPE_I32, 1, shape, data,
                                sizeof(data), &in));
  hali_variant_t args[2] = {hali_variant_view(in), hali_variant_i32(d)};
  hali_variant_t rec[2], status;
  ck_ok(hali_context_invoke(c, lookup(c, "record"), args, 2, rec, 2));
  ck_assert_int_eq(rec[0].type, HALI_VARIANT_COMMAND_BUFFER);
  ck_ok(hali_context_invoke(c, lookup(c, "submit"), &rec[0], 1, &status, 1));
  ck_assert_int_eq(status.u.i32, 0);
  int32_t out[4] = {0};
  ck_ok(hali_buffer_view_read(rec[1].u.view, out, sizeof(out)));
  for (int i = 0; i < 4; ++i) ck_assert_int_eq(out[i], base + i + d);
  hali_variant_release(&rec[0]);
  hali_variant_release(&rec[1]);
  hali_buffer_view_release(in);
}

typedef struct {
  hali_context_t *context;
  hali_device_t *device;
  int32_t factor;
  int failures;
} shared_run_t;

static void *run_shared(void *p) {
  shared_run_t *r = p;
  for (int32_t i = 0; i < 200; ++i) {
    int32_t got = 0;
    hali_status_t s = call_i32(r->context, "scaled", &i, 1, &got);
    if (s || got != i * r->factor) r->failures++;
    hali_status_free(s);
    if (i % 20 == 0) record_and_submit(r->context, r->device, i, r->factor);
  }
  return NULL;
}

/* Two contexts over one module, at the same time, from two threads: each
 * with its own host binding of @env.scale and its own device (local-sync,
 * local-task).  The module is released before its contexts. */
START_TEST(contexts_share_one_module) {
  static int32_t two = 2, three = 3;
  hali_instance_t *ia = scaling_instance(&two), *ib = scaling_instance(&three);
  hali_device_t *da = device_new(ia, HALI_DEVICE_LOCAL_SYNC);
  hali_device_t *db = device_new(ib, HALI_DEVICE_LOCAL_TASK);
  hali_module_t *m = module_new(ia, k_shared);
  hali_context_t *ca = NULL, *cb = NULL;
  ck_ok(hali_context_create(ia, da, &m, 1, NULL, &ca));
  ck_ok(hali_context_create(ib, db, &m, 1, NULL, &cb));
  hali_module_release(m); /* the contexts keep it */
  /* One at a time first. */
  int32_t x = 7, r = 0;
  ck_ok(call_i32(ca, "scaled", &x, 1, &r));
  ck_assert_int_eq(r, 14);
  ck_ok(call_i32(cb, "scaled", &x, 1, &r));
  ck_assert_int_eq(r, 21);
  record_and_submit(ca, da, 10, 5);
  record_and_submit(cb, db, 10, 6);
  /* Then both at once. */
  shared_run_t runs[2] = {{ca, da, 2, 0}, {cb, db, 3, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i)
    ck_assert_int_eq(pthread_create(&t[i], NULL, run_shared, &runs[i]), 0);
  for (int i = 0; i < 2; ++i) ck_assert_int_eq(pthread_join(t[i], NULL), 0);
  ck_assert_int_eq(runs[0].failures, 0);
  ck_assert_int_eq(runs[1].failures, 0);
  hali_context_release(ca);
  /* The other context still runs the module. */
  ck_ok(call_i32(cb, "scaled", &x, 1, &r));
  ck_assert_int_eq(r, 21);
  hali_context_release(cb);
  hali_device_release(da);
  hali_device_release(db);
  hali_instance_release(ia);
  hali_instance_release(ib);
}
END_TEST

/* A module outlives its contexts: new contexts link it again, and they
 * see nothing of the ones before (bindings are the context's). */
START_TEST(module_outlives_its_contexts) {
  static int32_t two = 2, five = 5;
  hali_instance_t *ia = scaling_instance(&two), *ib = scaling_instance(&five);
  hali_device_t *d = device_new(ia, HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(ia, k_shared);
  for (int round = 0; round < 3; ++round) {
    hali_context_t *c = NULL;
    ck_ok(hali_context_create(round % 2 ? ib : ia, d, &m, 1, NULL, &c));
    int32_t x = 4, r = 0;
    ck_ok(call_i32(c, "scaled", &x, 1, &r));
    ck_assert_int_eq(r, round % 2 ? 20 : 8);
    record_and_submit(c, d, round, round);
    hali_context_release(c);
  }
  ck_assert_str_eq(hali_module_name(m), "shared");
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(ia);
  hali_instance_release(ib);
}
END_TEST

/* A command buffer recorded in one context outlives it, its module and
 * its instance: it keeps the executable it dispatches, which keeps what it
 * needs of the module, and another context submits it later. */
START_TEST(command_buffer_outlives_its_context) {
  static int32_t one = 1;
  hali_instance_t *ia = scaling_instance(&one);
  hali_device_t *d = device_new(ia, HALI_DEVICE_LOCAL_TASK);
  hali_module_t *m = module_new(ia, k_shared);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(ia, d, &m, 1, NULL, &c));
  int32_t data[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  hali_buffer_view_t *in = NULL;
  ck_ok(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_I32, 1, shape, data,
                                sizeof(data), &in));
  hali_variant_t args[2] = {hali_variant_view(in), hali_variant_i32(100)};
  hali_variant_t rec[2];
  ck_ok(hali_context_invoke(c, lookup(c, "record"), args, 2, rec, 2));
  hali_buffer_view_release(in);
  hali_context_release(c);
  hali_module_release(m);
  hali_instance_release(ia);
  /* Everything that recorded it is gone. */
  hali_instance_t *ib = scaling_instance(&one);
  hali_module_t *m2 = module_new(ib, k_shared);
  ck_ok(hali_context_create(ib, d, &m2, 1, NULL, &c));
  hali_variant_t status;
  ck_ok(hali_context_invoke(c, lookup(c, "submit"), &rec[0], 1, &status, 1));
  ck_assert_int_eq(status.u.i32, 0);
  int32_t out[4] = {0};
  ck_ok(hali_buffer_view_read(rec[1].u.view, out, sizeof(out)));
  for (int i = 0; i < 4; ++i) ck_assert_int_eq(out[i], data[i] + 100);
  hali_context_release(c);
  hali_module_release(m2);
  /* The last references: the command buffer (and its executable and the
   * first module with it), then the view. */
  hali_variant_release(&rec[0]);
  hali_variant_release(&rec[1]);
  hali_device_release(d);
  hali_instance_release(ib);
}
END_TEST

/* Modules that import each other: a call through an import runs under the
 * other module's link table, and recursion through the imports works (each
 * level needs a register stack of its own while the one kept for warm
 * calls is taken). */
START_TEST(imports_between_modules_recursive) {
  const char a[] = "module @a\n"
                   "func @b.down(%n: i32) -> i32 import\n"
                   "func @down(%n: i32) -> i32 {\n"
                   "^entry:\n"
                   "  %zero = const.i32 0\n"
                   "  %end = le.s.i32 %n, %zero\n"
                   "  cond_br %end, ^stop, ^more\n"
                   "^stop:\n"
                   "  return %zero\n"
                   "^more:\n"
                   "  %one = const.i32 1\n"
                   "  %m = sub.i32 %n, %one\n"
                   "  %r = call @b.down(%m)\n"
                   "  %r = add.i32 %r, %one\n"
                   "  return %r\n"
                   "}\n";
  const char b[] = "module @b\n"
                   "func @a.down(%n: i32) -> i32 import\n"
                   "func @down(%n: i32) -> i32 {\n"
                   "^entry:\n"
                   "  %zero = const.i32 0\n"
                   "  %end = le.s.i32 %n, %zero\n"
                   "  cond_br %end, ^stop, ^more\n"
                   "^stop:\n"
                   "  return %zero\n"
                   "^more:\n"
                   "  %two = const.i32 2\n"
                   "  %one = const.i32 1\n"
                   "  %m = sub.i32 %n, %one\n"
                   "  %r = call @a.down(%m)\n"
                   "  %r = add.i32 %r, %two\n"
                   "  return %r\n"
                   "}\n";
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in, HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *ms[2] = {module_new(in, a), module_new(in, b)};
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, ms, 2, NULL, &c));
  for (int32_t n = 0; n < 12; ++n) {
    int32_t r = -1;
    ck_ok(call_i32(c, "a.down", &n, 1, &r));
    /* a adds 1 at even levels, b adds 2 at odd ones. */
    ck_assert_int_eq(r, (n + 1) / 2 + 2 * (n / 2));
    ck_ok(call_i32(c, "b.down", &n, 1, &r));
    ck_assert_int_eq(r, 2 * ((n + 1) / 2) + n / 2);
  }
  hali_context_release(c);
  hali_module_release(ms[0]);
  hali_module_release(ms[1]);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* Queue work parked on a fence only its (cancelled) invocation would have
 * signalled: releasing the context stops the invocation and its work, so
 * releasing the device afterwards does not wait for it (before, a shared
 * device waited forever; hali_device_abandon was the only way out).  The
 * asynchronous await reports the deadlock at once (the host never held
 * %gate; it used to wait out its timeout). */
static const char k_parked[] =
    "module @parked\n"
    "func @park() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %gate = hal.fence.create %device\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %gate, %done, []\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %done, %forever\n"
    "  return %s\n"
    "}\n";

START_TEST(parked_work_abandoned_by_context_release) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in, _i ? HALI_DEVICE_LOCAL_TASK
                                       : HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(in, k_parked);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  hali_module_release(m);
  hali_invocation_t *inv = NULL;
  ck_ok(hali_context_invoke_async(c, lookup(c, "park"), NULL, 0, &inv));
  /* (The bound only stops a hang: the report comes at once.) */
  ck_status(hali_invocation_await_for(inv, 10000000000),
            HALI_STATUS_FAILED_PRECONDITION,
            "deadlock: all 1 fiber(s) are suspended");
  hali_invocation_release(inv);
  release_promptly(c, d, in);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Blocking awaits (issue 13 row 10): an await inside a ["blocking"]
 * function holds the thread, and with it every fiber of the context.  On a
 * fence nobody can signal it ends with the deadlock report; on one the
 * host may signal (passed in, during an asynchronous await) it waits. */

static const char k_blocking[] =
    "module @blocking\n"
    "func @stuck() -> i32 attributes [\"blocking\"] {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %s\n"
    "}\n"
    "func @stuck_status() -> i32 attributes [\"blocking\"] {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await_status %f, %forever\n"
    "  return %s\n"
    "}\n"
    "func @wait(%f: !hal.fence) -> i32 attributes [\"blocking\"] {\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  return %s\n"
    "}\n"
    /* Queue work signals this one: a barrier behind a fence the program
     * signals itself... after the await (so only the queue can end it,
     * and it cannot: a deadlock), or before (the queue runs). */
    "func @behind_queue(%first: i32) -> i32 attributes [\"blocking\"] {\n"
    "  %device = hal.device.get\n"
    "  %gate = hal.fence.create %device\n"
    "  %done = hal.fence.create %device\n"
    "  %zero = const.i32 0\n"
    "  %open_first = ne.i32 %first, %zero\n"
    "  cond_br %open_first, ^open, ^submit\n"
    "^open:\n"
    "  hal.fence.signal %gate\n"
    "  br ^submit\n"
    "^submit:\n"
    "  hal.device.queue.execute %device, %gate, %done, []\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %done, %forever\n"
    "  return %s\n"
    "}\n";

typedef struct {
  hali_fence_t *fence;
  hali_invocation_t *invocation; /* cancel it instead, when set */
  int64_t at;
} late_signal_t;

static void *signal_late(void *p) {
  late_signal_t *l = p;
  usleep(50000);
  l->at = now_ns();
  if (l->invocation) hali_invocation_cancel(l->invocation);
  else ck_ok(hali_fence_signal(l->fence));
  return NULL;
}

START_TEST(blocking_await_deadlock_and_host_signal) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in, _i ? HALI_DEVICE_LOCAL_TASK
                                       : HALI_DEVICE_LOCAL_SYNC);
  hali_module_t *m = module_new(in, k_blocking);
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, d, &m, 1, NULL, &c));
  int32_t r = -1;
  /* A fence the program made and kept: nobody can signal it. */
  int64_t t0 = now_ns();
  ck_status(call_i32(c, "stuck", NULL, 0, &r), HALI_STATUS_FAILED_PRECONDITION,
            "deadlock: @stuck (attributes [\"blocking\"]) awaits fence #");
  /* await_status does not turn the report into a result code. */
  ck_status(call_i32(c, "stuck_status", NULL, 0, &r),
            HALI_STATUS_FAILED_PRECONDITION, "which nothing can signal");
  /* Asynchronously too: the host may signal fences now, but not that
   * one. */
  hali_invocation_t *inv = NULL;
  ck_ok(hali_context_invoke_async(c, lookup(c, "stuck"), NULL, 0, &inv));
  ck_ok(hali_invocation_await(inv));
  ck_status(hali_invocation_status(inv), HALI_STATUS_FAILED_PRECONDITION,
            "the host never held the fence");
  hali_invocation_release(inv);
  /* Queue work that waits on a fence only the blocked program could
   * signal cannot end the wait either; queue work that can, does. */
  int32_t first = 0;
  ck_status(call_i32(c, "behind_queue", &first, 1, &r),
            HALI_STATUS_FAILED_PRECONDITION, "no queue work can progress");
  hali_device_abandon(d); /* the barrier left waiting on the gate */
  first = 1;
  ck_ok(call_i32(c, "behind_queue", &first, 1, &r));
  ck_assert_int_eq(r, 0);
  ck_assert_msg(now_ns() - t0 < 5000000000LL, "the reports took %lld ns",
                (long long)(now_ns() - t0));
  /* A fence the host passed in, during a synchronous invoke: the host is
   * inside the call, so that is a deadlock as well (as for suspending
   * awaits). */
  hali_fence_t *host = NULL;
  ck_ok(hali_fence_create(&host));
  hali_variant_t arg = hali_variant_fence(host), res;
  ck_status(hali_context_invoke(c, lookup(c, "wait"), &arg, 1, &res, 1),
            HALI_STATUS_FAILED_PRECONDITION, "a synchronous invoke");
  /* Asynchronously the host may signal it: another thread does, 50 ms
   * later, and the blocked await returns. */
  ck_ok(hali_context_invoke_async(c, lookup(c, "wait"), &arg, 1, &inv));
  late_signal_t l = {host, NULL, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, signal_late, &l), 0);
  ck_ok(hali_invocation_await(inv));
  int64_t returned = now_ns();
  pthread_join(t, NULL);
  ck_ok(hali_invocation_status(inv));
  ck_assert_int_ge(returned, l.at);
  hali_invocation_release(inv);
  hali_fence_release(host);
  /* A blocked await is still cancellable (within its 10 ms slices). */
  ck_ok(hali_fence_create(&host));
  arg = hali_variant_fence(host);
  ck_ok(hali_context_invoke_async(c, lookup(c, "wait"), &arg, 1, &inv));
  l = (late_signal_t){host, inv, 0};
  ck_assert_int_eq(pthread_create(&t, NULL, signal_late, &l), 0);
  ck_ok(hali_invocation_await(inv));
  pthread_join(t, NULL);
  ck_status(hali_invocation_status(inv), HALI_STATUS_CANCELLED,
            "cancelled while blocked");
  hali_invocation_release(inv);
  hali_fence_release(host);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

static Suite *api_suite(void) {
  Suite *s = suite_create("api");
  TCase *tc = tcase_create("instance");
  tcase_add_test(tc, instance_lifecycle_and_errors);
  tcase_add_test(tc, instance_frozen_after_first_context);
  suite_add_tcase(s, tc);
  tc = tcase_create("device");
  tcase_add_test(tc, device_kinds_and_errors);
  suite_add_tcase(s, tc);
  tc = tcase_create("module");
  tcase_add_test(tc, module_load_and_errors);
  suite_add_tcase(s, tc);
  tc = tcase_create("invoke");
  tcase_add_test(tc, invoke_scalars);
  tcase_add_test(tc, invoke_errors);
  tcase_add_test(tc, handles_outlive_their_creators);
  suite_add_tcase(s, tc);
  tc = tcase_create("buffer_view");
  tcase_add_test(tc, buffer_views);
  suite_add_tcase(s, tc);
  tc = tcase_create("imports");
  tcase_add_test(tc, imports_host_callbacks);
  tcase_add_test(tc, imports_missing_and_mismatched);
  tcase_add_test(tc, imports_ffi_library);
  tcase_add_test(tc, imports_between_modules);
  suite_add_tcase(s, tc);
  tc = tcase_create("executables");
  /* _i = 0: local-sync, 1: local-task. */
  tcase_add_loop_test(tc, static_kernels_and_host_loader, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("limits");
  tcase_add_test(tc, limit_memory);
  tcase_add_test(tc, allocator_hooks);
  tcase_add_test(tc, limit_call_depth);
  tcase_add_test(tc, limit_call_depth_backtrace);
  tcase_add_test(tc, limit_fuel);
  tcase_add_test(tc, direct_invoke_cancel_from_another_thread);
  tcase_add_test(tc, direct_invoke_matches_scheduler_path);
  tcase_add_test(tc, fiber_threads_option);
  tcase_add_test(tc, limit_memory_and_depth_across_spawns);
  tcase_add_test(tc, limit_cancel_from_another_thread);
  tcase_add_test(tc, await_for_after_nested_run);
  suite_add_tcase(s, tc);
  tc = tcase_create("kernel_limits");
  /* Deadlines stretch under valgrind and sanitizers (slow_factor). */
  tcase_set_timeout(tc, 60);
  /* _i = 0: local-sync, 1: local-task. */
  tcase_add_loop_test(tc, kernel_deadline, 0, 2);
  tcase_add_loop_test(tc, kernel_fuel, 0, 2);
  tcase_add_loop_test(tc, kernel_cancel_from_another_thread, 0, 2);
  tcase_add_loop_test(tc, kernel_abandoned_by_context_release, 0, 2);
  tcase_add_loop_test(tc, parked_work_abandoned_by_context_release, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("blocking");
  tcase_add_loop_test(tc, blocking_await_deadlock_and_host_signal, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("async");
  tcase_add_loop_test(tc, async_chain_through_fences, 0, 2);
  tcase_add_test(tc, fences);
  suite_add_tcase(s, tc);
  tc = tcase_create("trace");
  tcase_add_test(tc, tracing_to_a_callback);
  suite_add_tcase(s, tc);
  tc = tcase_create("shared_module");
  tcase_add_test(tc, contexts_share_one_module);
  tcase_add_test(tc, imports_between_modules_recursive);
  tcase_add_test(tc, module_outlives_its_contexts);
  tcase_add_test(tc, command_buffer_outlives_its_context);
  suite_add_tcase(s, tc);
  tc = tcase_create("tooling");
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, elements_by_name_and_text);
  tcase_add_test(tc, view_sizes);
  tcase_add_test(tc, device_kind_names_and_abandon);
  tcase_add_test(tc, module_load_options_and_functions);
  tcase_add_test(tc, module_binary_and_text);
  tcase_add_test(tc, tracing_formats_and_files);
  tcase_add_test(tc, import_host_memory);
  tcase_add_test(tc, import_host_memory_errors);
  tcase_add_test(tc, map_result_view);
  tcase_add_test(tc, trace_to_path);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(api_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
