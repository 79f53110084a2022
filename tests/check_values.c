/* Value semantics at the tensor level, seen from a host program through the
 * public API (include/hali/hali.h): an immutable tensor argument is the
 * caller's value, and nothing a function does may change its bytes
 * (doc/passes.md, "Value semantics").  The programs are the golden tests'
 * (tests/passes/sh_cow_*.hasm); the expected numbers are computed here in
 * plain C from the inputs.  Each check runs on local-sync and local-task. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"

#define ck_ok(s) assert_ok((s), __FILE__, __LINE__)
static void assert_ok(hali_status_t s, const char *file, int line) {
  if (!s) return;
  char *t = hali_status_to_string(s);
  ck_abort_msg("%s:%d: %s", file, line, t);
}

typedef struct {
  hali_instance_t *in;
  hali_device_t *dev;
  hali_context_t *ctx;
} env_t;

static env_t env_new(const char *rel, int device) {
  env_t e = {0};
  ck_ok(hali_instance_create(NULL, &e.in));
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  p.kind = device ? HALI_DEVICE_LOCAL_TASK : HALI_DEVICE_LOCAL_SYNC;
  p.worker_count = 2;
  ck_ok(hali_device_create(e.in, &p, &e.dev));
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", HALI_SRCDIR, rel);
  hali_module_t *m = NULL;
  ck_ok(hali_module_load_file(e.in, path, &m));
  ck_ok(hali_context_create(e.in, e.dev, &m, 1, NULL, &e.ctx));
  hali_module_release(m);
  return e;
}

static void env_free(env_t *e) {
  hali_context_release(e->ctx);
  hali_device_release(e->dev);
  hali_instance_release(e->in);
}

static hali_buffer_view_t *vec4(const env_t *e, const float v[4]) {
  int64_t n = 4;
  hali_buffer_view_t *view = NULL;
  ck_ok(hali_buffer_view_create(e->dev, HALI_ELEMENT_TYPE_F32, 1, &n, v,
                                4 * sizeof(float), &view));
  return view;
}

static void expect(hali_buffer_view_t *v, const float want[4], const char *what) {
  float got[4];
  ck_ok(hali_buffer_view_read(v, got, sizeof(got)));
  for (int i = 0; i < 4; ++i)
    ck_assert_msg(got[i] == want[i], "%s[%d]: got %g, want %g", what, i,
                  (double)got[i], (double)want[i]);
}

/* Calls |fn| with the views |args|, returns |nres| results in |res|. */
static void call(env_t *e, const char *fn, hali_buffer_view_t **args, size_t nargs,
                 hali_variant_t *res, size_t nres) {
  hali_function_t *f = NULL;
  ck_ok(hali_context_lookup_function(e->ctx, fn, &f));
  hali_variant_t a[4];
  for (size_t i = 0; i < nargs; ++i) a[i] = hali_variant_view(args[i]);
  ck_ok(hali_context_invoke(e->ctx, f, a, nargs, res, nres));
}

static const float k_x[4] = {1, 2, 3, 4};

START_TEST(tie_to_immutable_argument_writes_a_copy) {
  env_t e = env_new("tests/passes/sh_cow_argument.hasm", _i);
  float twice[4], thrice[4];
  for (int i = 0; i < 4; ++i) twice[i] = 2 * k_x[i], thrice[i] = k_x[i] + twice[i];
  static const char *fns[] = {"f", "g", "dup"};
  for (size_t k = 0; k < 3; ++k) {
    hali_buffer_view_t *x = vec4(&e, k_x);
    hali_variant_t res[2];
    size_t nres = k == 1 ? 1 : 2;
    call(&e, fns[k], &x, 1, res, nres);
    /* The caller's bytes after the call: unchanged. */
    expect(x, k_x, "the caller's input");
    if (k == 0) {
      expect(res[0].u.view, k_x, "@f result 0 (%x after the tie)");
      expect(res[1].u.view, twice, "@f result 1");
    } else if (k == 1) {
      expect(res[0].u.view, thrice, "@g result (x + 2x)");
    } else {
      expect(res[0].u.view, twice, "@dup result 0");
      expect(res[1].u.view, twice, "@dup result 1");
    }
    /* Called again on the same view: the same answers. */
    for (size_t r = 0; r < nres; ++r) hali_variant_release(&res[r]);
    call(&e, fns[k], &x, 1, res, nres);
    expect(x, k_x, "the caller's input (second call)");
    if (k == 1) expect(res[0].u.view, thrice, "@g result (second call)");
    for (size_t r = 0; r < nres; ++r) hali_variant_release(&res[r]);
    hali_buffer_view_release(x);
  }
  env_free(&e);
}
END_TEST

START_TEST(mutable_argument_is_written_in_place) {
  env_t e = env_new("tests/passes/sh_cow_elided.hasm", _i);
  float acc0[4] = {10, 20, 30, 40}, sum[4];
  for (int i = 0; i < 4; ++i) sum[i] = acc0[i] + k_x[i];
  hali_buffer_view_t *args[2] = {vec4(&e, k_x), vec4(&e, acc0)};
  hali_variant_t res;
  call(&e, "accum", args, 2, &res, 1);
  expect(args[0], k_x, "the immutable %x");
  /* A mutable argument is the function's to write: in place, no copy. */
  expect(args[1], sum, "the mutable %acc");
  expect(res.u.view, sum, "the result tied to %acc");
  hali_variant_release(&res);
  hali_buffer_view_release(args[0]);
  hali_buffer_view_release(args[1]);
  env_free(&e);
}
END_TEST

START_TEST(mutable_read_after_tie_sees_its_value) {
  env_t e = env_new("tests/passes/sh_cow_read_later.hasm", _i);
  float acc0[4] = {10, 20, 30, 40}, y[4], z[4];
  for (int i = 0; i < 4; ++i) y[i] = acc0[i] + k_x[i], z[i] = acc0[i] + y[i];
  hali_buffer_view_t *args[2] = {vec4(&e, k_x), vec4(&e, acc0)};
  hali_variant_t res[2];
  call(&e, "mutable_read", args, 2, res, 2);
  expect(args[0], k_x, "the immutable %x");
  expect(res[0].u.view, y, "%y = acc + x");
  expect(res[1].u.view, z, "%z = acc + y (acc read as it was)");
  hali_variant_release(&res[0]);
  hali_variant_release(&res[1]);
  hali_buffer_view_release(args[0]);
  hali_buffer_view_release(args[1]);
  env_free(&e);
}
END_TEST

START_TEST(overwrite_after_tie_keeps_the_tied_value) {
  env_t e = env_new("tests/passes/sh_cow_overwrite.hasm", _i);
  float acc0[4] = {10, 20, 30, 40}, y[4], v[4];
  for (int i = 0; i < 4; ++i) y[i] = acc0[i] + k_x[i], v[i] = 2 * k_x[i];
  hali_buffer_view_t *args[2] = {vec4(&e, k_x), vec4(&e, acc0)};
  hali_variant_t res;
  call(&e, "f", args, 2, &res, 1);
  expect(args[0], k_x, "the immutable %x");
  expect(args[1], v, "%acc overwritten with %v = 2x");
  expect(res.u.view, y, "%y = acc + x, returned after the overwrite");
  hali_variant_release(&res);
  hali_buffer_view_release(args[0]);
  hali_buffer_view_release(args[1]);
  env_free(&e);
}
END_TEST

START_TEST(immutable_overwrite_and_tie_are_load_errors) {
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  static const struct {
    const char *file, *needle;
  } cases[] = {
      {"tests/passes/fc_overwrite_immutable.hasm",
       "tensor.overwrite into %y, which is not a mutable parameter"},
      {"tests/passes/fc_tie_immutable.hasm",
       "result 0 is tied to parameter %x, which is not mutable"},
  };
  for (size_t k = 0; k < 2; ++k) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", HALI_SRCDIR, cases[k].file);
    hali_module_t *m = NULL;
    hali_status_t s = hali_module_load_file(in, path, &m);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
    char *t = hali_status_to_string(s);
    hali_status_free(s);
    ck_assert_msg(strstr(t, cases[k].needle) != NULL, "%s: %s", cases[k].file, t);
    ck_assert_msg(strstr(t, "@f") != NULL, "names the function: %s", t);
    free(t);
  }
  hali_instance_release(in);
}
END_TEST

static Suite *suite_values(void) {
  Suite *s = suite_create("values");
  TCase *tc = tcase_create("copy_on_write");
  tcase_add_loop_test(tc, tie_to_immutable_argument_writes_a_copy, 0, 2);
  tcase_add_loop_test(tc, mutable_argument_is_written_in_place, 0, 2);
  tcase_add_loop_test(tc, mutable_read_after_tie_sees_its_value, 0, 2);
  tcase_add_loop_test(tc, overwrite_after_tie_keeps_the_tied_value, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("load_errors");
  tcase_add_test(tc, immutable_overwrite_and_tie_are_load_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite_values());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
