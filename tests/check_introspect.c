/* The "Inspection" part of the public API (api/introspect.c), through
 * include/hali/hali.h only: hali_module_describe (what `hali dump`
 * prints) and hali_context_wait_idle (what `hali run` does before
 * printing results), with their error paths. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"

#define ck_ok(s) assert_ok((s), __FILE__, __LINE__)
static void assert_ok(hali_status_t s, const char *file, int line) {
  if (!s) return;
  char *text = hali_status_to_string(s);
  hali_status_free(s);
  ck_abort_msg("%s:%d: unexpected error: %s", file, line, text);
}

/* |s| has |code| and its message contains |needle|; consumes |s|. */
static void assert_status(hali_status_t s, hali_status_code_t code,
                          const char *needle) {
  ck_assert_msg(s != HALI_OK, "expected %s, got OK",
                hali_status_code_name(code));
  ck_assert_str_eq(hali_status_code_name(hali_status_code(s)),
                   hali_status_code_name(code));
  ck_assert_msg(strstr(hali_status_message(s), needle) != NULL,
                "'%s' not in '%s'", needle, hali_status_message(s));
  hali_status_free(s);
}

static const char module_text[] =
    "module @shown\n"
    "executable @k format \"ffi\" library \"libk.so\" {\n"
    "  export @scale(tensor<?xf32>, f32) -> (tensor<?xf32>) symbol "
    "\"scale_ffi\"\n"
    "}\n"
    "rodata @table = i32[1, 2, 3]\n"
    "func @env.log(%x: i32) import optional\n"
    "func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %s = const.f32 2.0\n"
    "  %y = tensor.dispatch @k::@scale[1](%x, %s) -> tensor<4xf32>\n"
    "  return %y\n"
    "}\n";

static hali_module_t *load_text(hali_instance_t *in, const char *text,
                                const char *name) {
  hali_module_t *m = NULL;
  ck_ok(hali_module_load_bytes(in, text, strlen(text), name, &m));
  return m;
}

START_TEST(describe_text) {
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  hali_module_t *m = load_text(in, module_text, "shown.hasm");
  char *text = NULL;
  ck_ok(hali_module_describe(m, HALI_DESCRIBE_TEXT, &text));
  const char *const want[] = {
      "module @shown\n  file: shown.hasm (text .hasm, ",
      "  debug info: yes (names, source lines), source shown.hasm\n"
      "functions as written:\n"
      "  @main(%x: tensor<4xf32>) -> (tensor<4xf32>)\n"
      "functions after the load-time passes:\n"
      "  @main(%x: !hal.buffer_view) -> (!hal.buffer_view)\n",
      "  @main$async(",
      "imports:\n  @env.log(%x: i32) -> () (optional)\n",
      "executables:\n  @k format \"ffi\" library \"libk.so\" (1 export)\n"
      "    export @scale(tensor<?xf32>, f32) -> (tensor<?xf32>) symbol "
      "\"scale_ffi\"\n"
      "      workgroup size [1, 1, 1], layout(constants 1, bindings 2)\n",
      "rodata:\n  @table i32, 12 bytes\n  total 12 bytes\n"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); ++i)
    ck_assert_msg(strstr(text, want[i]) != NULL, "no \"%s\" in:\n%s", want[i],
                  text);
  hali_free(text);

  /* A stripped binary of the same module: positions only, the format
   * version, no source. */
  void *data = NULL;
  size_t size = 0;
  ck_ok(hali_module_write_binary(m, true, &data, &size));
  hali_module_t *b = NULL;
  ck_ok(hali_module_load_bytes(in, data, size, "shown.hbc", &b));
  ck_ok(hali_module_describe(b, HALI_DESCRIBE_TEXT, &text));
  ck_assert_msg(strstr(text, "(binary .hbc, format 1.") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "  debug info: no (stripped)\n") != NULL, "%s",
                text);
  ck_assert_msg(strstr(text, "  @main(tensor<4xf32>) -> (tensor<4xf32>)\n"),
                "%s", text);
  hali_free(text);
  hali_free(data);
  hali_module_release(b);
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

START_TEST(describe_json) {
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  hali_module_t *m =
      load_text(in, "module @q\nfunc @f(%a: i64) -> f64 {\n"
                    "  %x = const.f64 1.5\n  return %x\n}\n",
                "dir/\"q\".hasm");
  char *text = NULL;
  ck_ok(hali_module_describe(m, HALI_DESCRIBE_JSON, &text));
  ck_assert_str_eq(
      text,
      "{\n"
      "  \"module\": \"q\",\n"
      "  \"file\": \"dir/\\\"q\\\".hasm\",\n"
      "  \"format\": \"hasm\", \"format_version\": null,\n"
      "  \"bytes\": 71,\n"
      "  \"debug_info\": true,\n"
      "  \"source\": \"dir/\\\"q\\\".hasm\",\n"
      "  \"functions_as_written\": [\n"
      "    {\"name\": \"f\", \"signature\": \"(%a: i64) -> (f64)\", "
      "\"arguments\": 1, \"results\": 1, \"tensor_level\": false}\n  ],\n"
      "  \"functions\": [\n"
      "    {\"name\": \"f\", \"signature\": \"(%a: i64) -> (f64)\", "
      "\"arguments\": 1, \"results\": 1, \"tensor_level\": false}\n  ],\n"
      "  \"imports\": [],\n"
      "  \"globals\": [],\n"
      "  \"parameter_bytes\": 0,\n"
      "  \"executables\": [],\n"
      "  \"rodata\": [],\n"
      "  \"rodata_bytes\": 0\n"
      "}\n");
  hali_free(text);
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

START_TEST(generated_functions) {
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  hali_module_t *m = load_text(in, module_text, "shown.hasm");
  size_t n = hali_module_function_count(m);
  ck_assert_uint_eq(n, 3); /* env.log, main, main$async */
  bool gen[3] = {true, true, false};
  ck_ok(hali_module_generated_functions(m, gen, n));
  for (size_t i = 0; i < n; ++i) {
    const char *name = hali_module_function_name(m, i);
    ck_assert_msg(gen[i] == (strcmp(name, "main$async") == 0), "%s: %d",
                  name, gen[i]);
  }
  assert_status(hali_module_generated_functions(m, gen, 2),
                HALI_STATUS_INVALID_ARGUMENT,
                "count is 2, the module has 3 functions");
  assert_status(hali_module_generated_functions(NULL, gen, 2),
                HALI_STATUS_INVALID_ARGUMENT, "module");
  assert_status(hali_module_generated_functions(m, NULL, 3),
                HALI_STATUS_INVALID_ARGUMENT, "out_generated");
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

/* Globals as written: scalars with their initial value's presence,
 * mutable ones, tensors with sizes, parameter references by scope and
 * key. */
static const char globals_text[] =
    "module @g\n"
    "global @step : i64 mutable = 0\n"
    "global @cache : !hal.buffer mutable\n"
    "global @kv : tensor<8x64xf32> mutable\n"
    "global @w : tensor<64x32xf16> = parameter \"model\" :: \"layer0.weight\"\n"
    "global @b : tensor<32xf32> = parameter \"\" :: \"b\"\n"
    "func @f() -> i64 {\n"
    "  %x = global.load.i64 @step\n"
    "  return %x\n"
    "}\n"
    "func @t(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  return %x\n"
    "}\n";

START_TEST(describe_globals) {
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  hali_module_t *m = load_text(in, globals_text, "g.hasm");
  char *text = NULL;
  ck_ok(hali_module_describe(m, HALI_DESCRIBE_TEXT, &text));
  ck_assert_msg(strstr(text,
                       "globals:\n"
                       "  @step : i64 mutable\n"
                       "  @cache : !hal.buffer mutable\n"
                       "  @kv : tensor<8x64xf32> mutable, 2048 bytes\n"
                       "  @w : tensor<64x32xf16> = parameter \"model\" :: "
                       "\"layer0.weight\", 4096 bytes\n"
                       "  @b : tensor<32xf32> = parameter \"\" :: \"b\", 128 "
                       "bytes\n"
                       "  parameters total 4224 bytes\n") != NULL,
                "%s", text);
  hali_free(text);
  ck_ok(hali_module_describe(m, HALI_DESCRIBE_JSON, &text));
  ck_assert_msg(
      strstr(text,
             "  \"globals\": [\n"
             "    {\"name\": \"step\", \"type\": \"i64\", \"mutable\": true, "
             "\"parameter\": null, \"bytes\": null},\n"
             "    {\"name\": \"cache\", \"type\": \"!hal.buffer\", "
             "\"mutable\": true, \"parameter\": null, \"bytes\": null},\n"
             "    {\"name\": \"kv\", \"type\": \"tensor<8x64xf32>\", "
             "\"mutable\": true, \"parameter\": null, \"bytes\": 2048},\n"
             "    {\"name\": \"w\", \"type\": \"tensor<64x32xf16>\", "
             "\"mutable\": false, \"parameter\": {\"scope\": \"model\", "
             "\"key\": \"layer0.weight\"}, \"bytes\": 4096},\n"
             "    {\"name\": \"b\", \"type\": \"tensor<32xf32>\", "
             "\"mutable\": false, \"parameter\": {\"scope\": \"\", "
             "\"key\": \"b\"}, \"bytes\": 128}\n"
             "  ],\n  \"parameter_bytes\": 4224,\n") != NULL,
      "%s", text);
  hali_free(text);
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

START_TEST(describe_errors) {
  static char untouched[] = "untouched";
  char *text = untouched;
  assert_status(hali_module_describe(NULL, HALI_DESCRIBE_TEXT, &text),
                HALI_STATUS_INVALID_ARGUMENT, "module");
  ck_assert_ptr_null(text);
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  hali_module_t *m = load_text(in, "func @f() {\n  return\n}\n", "f.hasm");
  assert_status(hali_module_describe(m, (hali_describe_format_t)7, &text),
                HALI_STATUS_INVALID_ARGUMENT,
                "hali_module_describe: unknown format 7");
  ck_assert_ptr_null(text);
  assert_status(hali_module_describe(m, HALI_DESCRIBE_TEXT, NULL),
                HALI_STATUS_INVALID_ARGUMENT, "out_text");
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

/* A program returning a view of a buffer its queued fill still writes. */
static const char no_await_text[] =
    "func @main(%v: i32) -> !hal.buffer_view {\n"
    "  %device = hal.device.get\n"
    "  %alloc = hal.device.allocator %device\n"
    "  %mem = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %len = const.i64 65536\n"
    "  %a = hal.allocator.allocate %alloc, %mem, %usage, %len\n"
    "  %mode = const.i32 1\n"
    "  %cat = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %mode, %cat\n"
    "  %zero = const.i64 0\n"
    "  %four = const.i32 4\n"
    "  hal.command_buffer.fill %cmd, %a, %zero, %len, %v, %four\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %wait = hal.fence.null\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  %i32 = const.i32 0x10000020\n"
    "  %dense = const.i32 1\n"
    "  %n = const.i64 16384\n"
    "  %view = hal.buffer_view.create %a, %i32, %dense, [%n]\n"
    "  return %view\n"
    "}\n";

START_TEST(wait_idle_then_read) {
  hali_instance_t *in = NULL;
  ck_ok(hali_instance_create(NULL, &in));
  hali_module_t *m = load_text(in, no_await_text, "noawait.hasm");
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.kind = HALI_DEVICE_LOCAL_TASK;
  dp.worker_count = 2;
  hali_device_t *dev = NULL;
  ck_ok(hali_device_create(in, &dp, &dev));
  hali_context_t *c = NULL;
  ck_ok(hali_context_create(in, dev, &m, 1, NULL, &c));
  /* Idle: returns at once, even polling. */
  ck_ok(hali_context_wait_idle(c, 0));
  hali_function_t *fn = NULL;
  ck_ok(hali_context_lookup_function(c, "main", &fn));
  static int32_t out[16384];
  for (int round = 0; round < 20; ++round) {
    hali_variant_t arg = hali_variant_i32(round + 1), res = {0};
    ck_ok(hali_context_invoke(c, fn, &arg, 1, &res, 1));
    ck_ok(hali_context_wait_idle(c, HALI_TIMEOUT_INFINITE));
    ck_ok(hali_buffer_view_read(res.u.view, out, sizeof(out)));
    for (size_t i = 0; i < 16384; ++i)
      ck_assert_msg(out[i] == round + 1, "round %d: element %zu is %d", round,
                    i, out[i]);
    hali_variant_release(&res);
  }
  assert_status(hali_context_wait_idle(NULL, 0), HALI_STATUS_INVALID_ARGUMENT,
                "context");
  hali_context_release(c);
  hali_device_release(dev);
  hali_module_release(m);
  hali_instance_release(in);
}
END_TEST

int main(void) {
  Suite *s = suite_create("introspect");
  TCase *tc = tcase_create("describe");
  tcase_add_test(tc, describe_text);
  tcase_add_test(tc, describe_json);
  tcase_add_test(tc, describe_errors);
  tcase_add_test(tc, describe_globals);
  tcase_add_test(tc, generated_functions);
  suite_add_tcase(s, tc);
  tc = tcase_create("wait_idle");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, wait_idle_then_read);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
