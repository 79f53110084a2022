/* Executable variants (doc/asm.md, "Executable variants"): an executable
 * lists several ways of loading it (`format A ... or format B ...`), each
 * optionally conditioned on the device kind or on a loader being
 * registered; at link time the first variant whose conditions hold and
 * that loads is used.  Tests: fallback from a missing library to bytecode,
 * selection by device kind, the all-refused error (exact text), the text
 * and binary round trips, bad syntax, and the CLI (`hali run --trace=hal`
 * names the choice, `hali dump` lists the variants, results are right on
 * both devices). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/hal.h"
#include "hali/hali.h"
#include "loader/executables.h"
#include "loader/hbc.h"
#include "loader/loader.h"
#include "tests/testutil.h"

#define EXAMPLES_BUILD HALI_BUILDDIR "/examples"

/* saxpy's export, with both a symbol (native: "saxpy") and a bytecode
 * kernel function, so one list serves every variant. */
#define SAXPY_EXPORT                                                       \
  "  export @saxpy(f32, tensor<?xf32>, tensor<?xf32>, index) -> "          \
  "(tensor<?xf32>) function @saxpy_kernel workgroup_size [64, 1, 1]\n}\n"

static const char *const saxpy_kernel =
    "func @saxpy_kernel(%a: f32, %x: !hal.buffer, %y: !hal.buffer, %n: i32, "
    "%out: !hal.buffer, %wx: i32, %wy: i32, %wz: i32, %cx: i32, %cy: i32, "
    "%cz: i32) {\n"
    "^entry:\n"
    "  %k64 = const.i32 64\n"
    "  %i = mul.i32 %wx, %k64\n"
    "  %end = add.i32 %i, %k64\n"
    "  %end = min.u.i32 %end, %n\n"
    "  %empty = ge.u.i32 %i, %end\n"
    "  cond_br %empty, ^done, ^loop\n"
    "^loop:\n"
    "  %i64 = ext.u.i32.i64 %i\n"
    "  %four = const.i64 4\n"
    "  %at = mul.i64 %i64, %four\n"
    "  %xv = hal.buffer.load.f32 %x, %at\n"
    "  %yv = hal.buffer.load.f32 %y, %at\n"
    "  %v = mul.f32 %a, %xv\n"
    "  %v = add.f32 %v, %yv\n"
    "  hal.buffer.store.f32 %out, %at, %v\n"
    "  %one = const.i32 1\n"
    "  %i = add.i32 %i, %one\n"
    "  %more = lt.u.i32 %i, %end\n"
    "  cond_br %more, ^loop, ^done\n"
    "^done:\n"
    "  return\n"
    "}\n";

/* The tensor-level caller: one dispatch of ceil(n / 64) workgroups. */
static const char *const saxpy_main =
    "func @saxpy(%a: f32, %x: tensor<?xf32>, %y: tensor<?xf32>, %n: index) "
    "-> tensor<?xf32> {\n"
    "  %r = tensor.dispatch @kernels::@saxpy[%n](%a, %x, %y, %n) -> "
    "tensor<?xf32>{%n}\n"
    "  return %r\n"
    "}\n";

/* "module @v\n" + "executable @kernels " + |head| + " {\n" + export +
 * the kernel (+ the caller when |with_main|).  Caller frees. */
static char *module_text(const char *head, bool with_main) {
  size_t len = strlen(head) + strlen(saxpy_kernel) + strlen(saxpy_main) +
               strlen(SAXPY_EXPORT) + 64;
  char *text = malloc(len);
  snprintf(text, len, "module @v\nexecutable @kernels %s {\n" SAXPY_EXPORT
                      "%s%s",
           head, saxpy_kernel, with_main ? saxpy_main : "");
  return text;
}

static hali_executable_registry_t *registry;

static void registry_setup(void) {
  ck_assert_ok(hali_executable_registry_create(&registry));
}

static void registry_teardown(void) {
  hali_executable_registry_free(registry);
  registry = NULL;
}

/* Loads executable 0 of the module |head| describes for |device| (NULL =
 * unknown) with the library search path EXAMPLES_BUILD; |*out| is NULL on
 * failure. */
static hali_status_t load_variant(const char *head, const char *device,
                                  hali_hal_executable_t **out,
                                  uint32_t *out_variant) {
  char *text = module_text(head, false);
  hali_vm_module_t *m = NULL;
  hali_status_t s = hali_test_try_module(text, &m);
  free(text);
  if (s) return s;
  const char *paths[] = {EXAMPLES_BUILD};
  hali_executable_load_params_t p = {
      .executable = &m->ir->executables[0],
      .module = m,
      .search_paths = paths,
      .search_path_count = 1,
      .device_kind = device,
  };
  s = hali_executable_registry_load_variant(registry, &p, out, out_variant);
  hali_vm_module_release(m);
  return s;
}

/* A native variant whose library is missing falls back to bytecode. */
START_TEST(test_fallback_missing_library) {
  hali_hal_executable_t *exe = NULL;
  uint32_t k = 99;
  ck_assert_ok(load_variant(
      "format \"native\" library \"kernels/no_such_saxpy.so\" "
      "or format \"bytecode\"",
      "local-sync", &exe, &k));
  ck_assert_uint_eq(k, 1);
  ck_assert_str_eq(hali_hal_executable_format(exe), "bytecode");
  hali_ref_release((hali_ref_t *)exe);
  /* The library exists: the native variant wins. */
  ck_assert_ok(load_variant(
      "format \"native\" library \"kernels/saxpy_native.so\" "
      "or format \"bytecode\"",
      "local-sync", &exe, &k));
  ck_assert_uint_eq(k, 0);
  ck_assert_str_eq(hali_hal_executable_format(exe), "native");
  hali_ref_release((hali_ref_t *)exe);
}
END_TEST

/* `if device "K"`: the native variant only on local-task. */
START_TEST(test_select_by_device) {
  const char *head =
      "format \"native\" library \"kernels/saxpy_native.so\" "
      "if device \"local-task\" or format \"bytecode\"";
  const struct {
    const char *device;
    uint32_t variant;
    const char *format;
  } cases[] = {{"local-task", 0, "native"},
               {"local-sync", 1, "bytecode"},
               {NULL, 1, "bytecode"}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    hali_hal_executable_t *exe = NULL;
    uint32_t k = 99;
    ck_assert_ok(load_variant(head, cases[i].device, &exe, &k));
    ck_assert_msg(k == cases[i].variant, "on %s: variant %u, expected %u",
                  cases[i].device ? cases[i].device : "(unknown)", k,
                  cases[i].variant);
    ck_assert_str_eq(hali_hal_executable_format(exe), cases[i].format);
    hali_ref_release((hali_ref_t *)exe);
  }
  /* `if loader "F"`: holds when a registered loader supports F. */
  hali_hal_executable_t *exe = NULL;
  uint32_t k = 99;
  ck_assert_ok(load_variant("format \"bytecode\" if loader \"spirv\" "
                            "or format \"bytecode\" if loader \"ffi\"",
                            "local-sync", &exe, &k));
  ck_assert_uint_eq(k, 1);
  hali_ref_release((hali_ref_t *)exe);
}
END_TEST

/* None loads: every variant and why, in order (the exact text). */
START_TEST(test_all_refused) {
  hali_hal_executable_t *exe = NULL;
  hali_status_t s = load_variant(
      "format \"cuda\" library \"k.ptx\" "
      "or format \"native\" library \"kernels/saxpy_native.so\" if device "
      "\"local-task\" "
      "or format \"bytecode\" if loader \"spirv\"",
      "local-sync", &exe, NULL);
  ck_assert_ptr_null(exe);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_UNIMPLEMENTED);
  ck_assert_str_eq(
      hali_status_message(s),
      "executable @kernels: none of its 3 variants can be loaded on "
      "local-sync (available formats: native, ffi, static, bytecode): "
      "variant 0 (format \"cuda\" library \"k.ptx\"): no loader supports "
      "format \"cuda\"; "
      "variant 1 (format \"native\" library \"kernels/saxpy_native.so\" if "
      "device \"local-task\"): the device is local-sync; "
      "variant 2 (format \"bytecode\" if loader \"spirv\"): no loader "
      "supports format \"spirv\"");
  hali_status_free(s);
  /* A load failure is a refusal too, with the loader's reason. */
  s = load_variant("format \"native\" library \"/nonexistent/k.so\" "
                   "or format \"ffi\" library \"/nonexistent/k.so\" if device "
                   "\"local-sync\"",
                   "local-sync", &exe, NULL);
  ck_assert_ptr_null(exe);
  char *text = hali_status_to_string(s);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_UNIMPLEMENTED);
  hali_status_free(s);
  ck_assert_msg(
      strstr(text, "none of its 2 variants can be loaded on local-sync") &&
          strstr(text, "variant 0 (format \"native\" library "
                       "\"/nonexistent/k.so\"): cannot load library "
                       "\"/nonexistent/k.so\"") &&
          strstr(text, "; variant 1 (format \"ffi\" library "
                       "\"/nonexistent/k.so\" if device \"local-sync\"): "
                       "cannot load library"),
      "%s", text);
  free(text);
}
END_TEST

/* A single unconditioned variant behaves as before variants existed. */
START_TEST(test_single_variant_unchanged) {
  hali_hal_executable_t *exe = NULL;
  hali_status_t s = load_variant("format \"cuda\"", "local-sync", &exe, NULL);
  ck_assert_status(s, HALI_STATUS_UNIMPLEMENTED,
                   "executable @kernels has format \"cuda\", which no loader "
                   "supports; available formats: native, ffi, static, "
                   "bytecode");
  /* One variant with a condition is a variant list of one. */
  s = load_variant("format \"bytecode\" if device \"local-task\"",
                   "local-sync", &exe, NULL);
  ck_assert_status(s, HALI_STATUS_UNIMPLEMENTED,
                   "none of its 1 variants can be loaded on local-sync");
}
END_TEST

/* Text -> IR -> text is stable; text -> binary -> text keeps every
 * variant and condition; a binary that declares 1.4 may not carry them. */
START_TEST(test_round_trip) {
  const char *head =
      "format \"native\" library \"kernels/saxpy_native.so\" if device "
      "\"local-task\" if loader \"native\" "
      "or format \"ffi\" library \"kernels/saxpy_ffi.so\" "
      "or format \"bytecode\" if device \"local-sync\"";
  char *text = module_text(head, false);
  hali_ir_module_t *ir = NULL;
  ck_assert_ok(hali_load_bytes((const uint8_t *)text, strlen(text),
                               "v.hasm", &ir));
  free(text);
  const hali_ir_executable_t *e = &ir->executables[0];
  ck_assert_uint_eq(e->variant_count, 2);
  ck_assert_str_eq(e->if_device, "local-task");
  ck_assert_str_eq(e->if_loader, "native");
  ck_assert_str_eq(e->variants[0].format, "ffi");
  ck_assert_str_eq(e->variants[0].library, "kernels/saxpy_ffi.so");
  ck_assert_ptr_null(e->variants[0].if_device);
  ck_assert_str_eq(e->variants[1].format, "bytecode");
  ck_assert_ptr_null(e->variants[1].library);
  ck_assert_str_eq(e->variants[1].if_device, "local-sync");
  char *printed = hali_ir_print(ir, false);
  ck_assert_ptr_nonnull(printed);
  ck_assert_msg(
      strstr(printed, "\nexecutable @kernels format \"native\" library "
             "\"kernels/saxpy_native.so\" if device \"local-task\" if loader "
             "\"native\"\n    or format \"ffi\" library "
             "\"kernels/saxpy_ffi.so\"\n    or format \"bytecode\" if device "
             "\"local-sync\" {\n"),
      "%s", printed);
  /* Binary: write, read back, print: the same text. */
  uint8_t *bytes = NULL;
  size_t size = 0;
  ck_assert_ok(hali_hbc_write(ir, NULL, &bytes, &size));
  /* The current minor (1.5 has VARIANTS; later minors keep it). */
  ck_assert_uint_eq(bytes[10] | (bytes[11] << 8), HALI_HBC_VERSION_MINOR);
  ck_assert_uint_ge(HALI_HBC_VERSION_MINOR, 5);
  hali_ir_module_t *back = NULL;
  ck_assert_ok(hali_load_bytes(bytes, size, "v.hbc", &back));
  char *again = hali_ir_print(back, false);
  ck_assert_str_eq(again, printed);
  hali_ir_module_free(back);
  /* The same bytes declaring minor 4: VARIANTS is refused by name. */
  bytes[10] = 4;
  hali_status_t s = hali_load_bytes(bytes, size, "v.hbc", &back);
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT,
                   "VARIANTS is new in format 1.5, but the module declares "
                   "1.4");
  free(again);
  free(printed);
  free(bytes);
  hali_ir_module_free(ir);
}
END_TEST

/* Misuse in the text names the place and what was expected. */
START_TEST(test_syntax_errors) {
  const struct {
    const char *head, *message;
  } cases[] = {
      {"format \"bytecode\" if colour \"red\"",
       "expected 'device \"KIND\"' or 'loader \"FORMAT\"' after 'if' (a "
       "variant's condition)"},
      {"format \"bytecode\" if device \"gpu\"",
       "unknown device kind \"gpu\" (known: local-sync, local-task)"},
      {"format \"bytecode\" if device \"local-sync\" if device "
       "\"local-task\"",
       "this variant already has an 'if device' condition"},
      {"format \"native\" library \"x.so\" or library \"y.so\"",
       "expected 'format \"NAME\"' after 'or' (the next variant of "
       "@kernels)"},
      {"format \"bytecode\" or", "expected 'format \"NAME\"' after 'or'"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char *text = module_text(cases[i].head, false);
    hali_status_t s = hali_test_try_module(text, NULL);
    free(text);
    char *msg = hali_status_to_string(s);
    ck_assert_msg(msg && strstr(msg, cases[i].message) &&
                      strstr(msg, "test.hasm:2:"),
                  "case %zu: %s", i, msg ? msg : "(OK)");
    free(msg);
    hali_status_free(s);
  }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The command line: results, the trace line naming the choice, dump. */

static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/hali-variants-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

static char *write_module(const char *head) {
  char *text = module_text(head, true);
  static char path[128];
  snprintf(path, sizeof(path), "%s/v.hasm", tmpdir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  free(text);
  return path;
}

START_TEST(test_cli) {
  const char *path = write_module(
      "format \"native\" library \"kernels/no_such_saxpy.so\" "
      "or format \"native\" library \"kernels/saxpy_native.so\" if device "
      "\"local-task\" "
      "or format \"bytecode\"");
  static const char *const devices[2] = {"local-sync", "local-task"};
  static const char *const chosen[2] = {
      "[hal] executable @kernels on local-sync: variant 2 (format "
      "\"bytecode\") chosen; refused before it: variant 0 (format \"native\" "
      "library \"kernels/no_such_saxpy.so\"): cannot load library "
      "\"kernels/no_such_saxpy.so\"",
      "[hal] executable @kernels on local-task: variant 1 (format \"native\" "
      "library \"kernels/saxpy_native.so\" if device \"local-task\") chosen; "
      "refused before it: variant 0 (format \"native\" library "
      "\"kernels/no_such_saxpy.so\"): cannot load library"};
  static const char *const refused_device =
      "variant 1 (format \"native\" library \"kernels/saxpy_native.so\" if "
      "device \"local-task\"): the device is local-sync";
  for (int d = 0; d < 2; ++d) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             HALI_TOOL " run '%s' --function=saxpy --device=%s "
                       "--executable-path=" EXAMPLES_BUILD
                       " --trace=hal --input=f64=2 "
                       "--input='70xf32=%s' --input='70xf32=%s' "
                       "--input=i64=70",
             path, devices[d],
             "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 "
             "25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 "
             "46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 "
             "67 68 69 70",
             "100");
    char *out = NULL, *err = NULL;
    int rc = hali_test_shell(cmd, &out, &err);
    ck_assert_msg(rc == 0, "%s: rc %d\n%s\n%s", devices[d], rc, out, err);
    /* 2 * x + y, x = 1..70, y = 100 broadcast from one value (the CLI
     * splats a single value), against the C loop; the CLI prints 3
     * significant digits. */
    const char *p = strstr(out, "70xf32=");
    ck_assert_msg(p, "%s: %s", devices[d], out);
    p += 7;
    for (int i = 1; i <= 70; ++i) {
      char *end = NULL;
      double v = strtod(p, &end);
      ck_assert_msg(end != p, "%s: element %d missing: %s", devices[d], i,
                    out);
      double want = 2.0 * i + 100.0;
      ck_assert_msg(v >= want * 0.995 && v <= want * 1.005,
                    "%s: element %d is %g, expected %g", devices[d], i, v,
                    want);
      p = end;
    }
    size_t both_len = strlen(out) + strlen(err) + 1;
    char *both = malloc(both_len);
    snprintf(both, both_len, "%s%s", out, err);
    const char *all = both;
    ck_assert_msg(strstr(all, chosen[d]), "%s: no choice line:\n%s",
                  devices[d], all);
    if (d == 0)
      ck_assert_msg(strstr(all, refused_device), "%s", all);
    free(both);
    free(out);
    free(err);
  }
  /* dis --device=KIND: the choice as comments after the text, which still
   * reassembles (the refusal's multi-line reason on one comment line). */
  char cmd[512];
  for (int d = 0; d < 2; ++d) {
    snprintf(cmd, sizeof(cmd),
             "export HALI_EXECUTABLE_PATH=" EXAMPLES_BUILD "; " HALI_TOOL
             " dis '%s' --no_locs --device=%s > '%s/d.hasm' && " HALI_TOOL
             " dis '%s/d.hasm' --no_locs --device=%s",
             path, devices[d], tmpdir, tmpdir, devices[d]);
    char *out = NULL, *err = NULL;
    ck_assert_msg(hali_test_shell(cmd, &out, &err) == 0, "%s", err);
    char comment[512];
    snprintf(comment, sizeof(comment), "\n# linked on %s:\n# %s", devices[d],
             chosen[d] + 6);
    ck_assert_msg(strstr(out, comment), "%s: %s", devices[d], out);
    /* Everything after the text is comments. */
    const char *tailp = strstr(out, "\n# linked on");
    for (const char *l = tailp + 1; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
      ck_assert_msg(*l == '#', "not a comment: %.40s", l);
    free(out);
    free(err);
  }
  /* dump lists every variant in order. */
  snprintf(cmd, sizeof(cmd), HALI_TOOL " dump '%s'", path);
  char *out = NULL;
  ck_assert_int_eq(hali_test_shell(cmd, &out, NULL), 0);
  ck_assert_msg(
      strstr(out,
             "  @kernels format \"native\" library "
             "\"kernels/no_such_saxpy.so\" (1 export)\n"
             "    3 variants, tried in order at link time:\n"
             "      0: format \"native\" library \"kernels/no_such_saxpy.so\"\n"
             "      1: format \"native\" library \"kernels/saxpy_native.so\" "
             "if device \"local-task\"\n"
             "      2: format \"bytecode\"\n"),
      "%s", out);
  free(out);
  snprintf(cmd, sizeof(cmd), HALI_TOOL " dump --json '%s'", path);
  ck_assert_int_eq(hali_test_shell(cmd, &out, NULL), 0);
  ck_assert_msg(
      strstr(out,
             "\"variants\": [{\"format\": \"native\", \"library\": "
             "\"kernels/no_such_saxpy.so\", \"if_device\": null, "
             "\"if_loader\": null}, {\"format\": \"native\", \"library\": "
             "\"kernels/saxpy_native.so\", \"if_device\": \"local-task\", "
             "\"if_loader\": null}, {\"format\": \"bytecode\", \"library\": "
             "null, \"if_device\": null, \"if_loader\": null}]"),
      "%s", out);
  free(out);
  /* None loads: the run fails naming all three. */
  path = write_module(
      "format \"native\" library \"kernels/no_such_saxpy.so\" "
      "or format \"bytecode\" if device \"local-task\"");
  snprintf(cmd, sizeof(cmd),
           HALI_TOOL " run '%s' --function=saxpy --device=local-sync "
                     "--input=f64=2 --input=1xf32=1 --input=1xf32=1 "
                     "--input=i64=1",
           path);
  char *err = NULL;
  ck_assert_int_ne(hali_test_shell(cmd, &out, &err), 0);
  ck_assert_msg(strstr(err, "UNIMPLEMENTED: executable @kernels: none of its "
                            "2 variants can be loaded on local-sync") &&
                    strstr(err, "variant 1 (format \"bytecode\" if device "
                                "\"local-task\"): the device is local-sync"),
                "%s", err);
  free(out);
  free(err);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("variants");
  TCase *tc = tcase_create("link");
  tcase_add_checked_fixture(tc, registry_setup, registry_teardown);
  tcase_add_test(tc, test_fallback_missing_library);
  tcase_add_test(tc, test_select_by_device);
  tcase_add_test(tc, test_all_refused);
  tcase_add_test(tc, test_single_variant_unchanged);
  suite_add_tcase(s, tc);
  tc = tcase_create("format");
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_syntax_errors);
  suite_add_tcase(s, tc);
  tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_cli);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite()); }
