/* The flagship example, examples/mlp.hasm (bytecode kernel) and
 * examples/mlp_native.hasm (native C kernel): their @main's 10 logits match
 * a plain-C forward pass computed from the module's own rodata, within
 * 1e-5, on local-sync and on local-task; both variants agree; the CLI
 * prints them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "loader/executables.h"
#include "tests/testutil.h"

enum { IN = 64, HIDDEN = 128, OUT = 10 };

/* mlp_tensor_rodata.hasm is the same network written at the tensor level
 * (the loader's passes lower it); mlp_tensor.hasm, with its weights in
 * examples/mlp.safetensors, is checked by tests/check_params.c. */
static const char *const variants[] = {"mlp.hasm", "mlp_native.hasm",
                                       "mlp_tensor_rodata.hasm"};

/* The module's rodata entry |name|, which must hold |count| f32. */
static const float *rodata(const hali_ir_module_t *ir, const char *name,
                           size_t count) {
  for (uint32_t i = 0; i < ir->rodata_count; ++i)
    if (strcmp(ir->rodata[i].name, name) == 0) {
      ck_assert_uint_eq(ir->rodata[i].size, count * sizeof(float));
      ck_assert_uint_eq(ir->rodata[i].kind, HALI_RODATA_F32);
      return (const float *)(const void *)ir->rodata[i].data;
    }
  ck_abort_msg("no rodata @%s", name);
  return NULL;
}

/* The reference: y = W2 relu(W1 x + b1) + b2, in double. */
static void reference(const hali_ir_module_t *ir, double *logits) {
  const float *w1 = rodata(ir, "w1", HIDDEN * IN);
  const float *b1 = rodata(ir, "b1", HIDDEN);
  const float *w2 = rodata(ir, "w2", OUT * HIDDEN);
  const float *b2 = rodata(ir, "b2", OUT);
  const float *x = rodata(ir, "input", IN);
  double h[HIDDEN];
  for (int r = 0; r < HIDDEN; ++r) {
    double acc = b1[r];
    for (int k = 0; k < IN; ++k) acc += (double)w1[r * IN + k] * x[k];
    h[r] = acc > 0 ? acc : 0;
  }
  for (int r = 0; r < OUT; ++r) {
    double acc = b2[r];
    for (int k = 0; k < HIDDEN; ++k) acc += (double)w2[r * HIDDEN + k] * h[k];
    logits[r] = acc;
  }
}

/* Loads examples/|name| and runs its @main on a device of |kind|. */
static void run_main(const char *name, hali_hal_device_kind_t kind,
                     uint32_t workers, float *logits, double *ref) {
  char path[512];
  snprintf(path, sizeof(path), HALI_SRCDIR "/examples/%s", name);
  hali_ir_module_t *ir = NULL;
  ck_assert_ok(hali_load_file(path, &ir));
  hali_vm_module_t *m = NULL;
  ck_assert_ok(hali_vm_module_create(ir, &m));
  if (ref) reference(m->ir, ref);
  hali_executable_registry_t *registry = NULL;
  ck_assert_ok(hali_executable_registry_create(&registry));
  /* Out-of-tree builds keep the kernel library in the build tree. */
  const char *paths[] = {HALI_BUILDDIR "/examples"};
  hali_vm_link_t *l = NULL;
  ck_assert_ok(hali_vm_link_create(m, &l));
  ck_assert_ok(hali_executable_registry_load_link(registry, l, path, paths, 1));
  hali_executable_registry_free(registry);
  hali_hal_device_params_t p;
  hali_hal_device_params_initialize(&p);
  p.kind = kind;
  p.worker_count = workers;
  hali_hal_device_t *dev = NULL;
  ck_assert_ok(hali_hal_device_create(&p, &dev));
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->device = dev;
  /* Tensor-level modules keep their constants in a pool its initializer
   * uploads. */
  ck_assert_ok(hali_vm_link_run_initializers(st, l));
  hali_value_t result = {0};
  ck_assert_ok(hali_vm_link_invoke(st, l, hali_vm_module_lookup(m, "main"),
                                   NULL, 0, &result, 1));
  ck_assert_int_eq(result.type, HALI_TYPE_BUFFER_VIEW);
  hali_hal_buffer_view_t *view = (hali_hal_buffer_view_t *)result.ref;
  ck_assert_uint_eq(hali_hal_buffer_view_rank(view), 1);
  ck_assert_uint_eq(hali_hal_buffer_view_dim(view, 0), OUT);
  ck_assert_uint_eq(hali_hal_buffer_view_element_type(view),
                    HALI_HAL_ELEMENT_TYPE_FLOAT_32);
  ck_assert_ok(hali_hal_buffer_read(hali_hal_buffer_view_buffer(view), 0,
                                    logits, OUT * sizeof(float)));
  hali_value_release(&result);
  hali_vm_stack_free(st);
  hali_vm_link_free(l);
  hali_vm_module_release(m);
  hali_hal_device_release(dev);
}

static const struct {
  const char *name;
  hali_hal_device_kind_t kind;
  uint32_t workers;
} devices[] = {
    {"local-sync", HALI_HAL_DEVICE_LOCAL_SYNC, 0},
    {"local-task x1", HALI_HAL_DEVICE_LOCAL_TASK, 1},
    {"local-task x4", HALI_HAL_DEVICE_LOCAL_TASK, 4},
};

START_TEST(test_logits_match_reference) {
  const char *variant = variants[_i];
  double ref[OUT];
  float first[OUT];
  for (size_t d = 0; d < sizeof(devices) / sizeof(devices[0]); ++d) {
    float logits[OUT];
    run_main(variant, devices[d].kind, devices[d].workers, logits,
             d == 0 ? ref : NULL);
    for (int i = 0; i < OUT; ++i)
      ck_assert_msg(fabs(logits[i] - ref[i]) <= 1e-5,
                    "%s on %s: logit %d is %.9g, the reference %.9g", variant,
                    devices[d].name, i, (double)logits[i], ref[i]);
    /* Each row is one workgroup, so the worker count cannot change a bit. */
    if (d == 0) memcpy(first, logits, sizeof(first));
    else ck_assert_int_eq(memcmp(first, logits, sizeof(first)), 0);
  }
}
END_TEST

/* Both variants ship the same rodata and give the same logits. */
START_TEST(test_variants_agree) {
  float a[OUT], b[OUT];
  double ra[OUT], rb[OUT];
  run_main(variants[0], HALI_HAL_DEVICE_LOCAL_SYNC, 0, a, ra);
  run_main(variants[1], HALI_HAL_DEVICE_LOCAL_TASK, 2, b, rb);
  ck_assert_int_eq(memcmp(ra, rb, sizeof(ra)), 0);
  for (int i = 0; i < OUT; ++i)
    ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-5f, "logit %d: %.9g vs %.9g", i,
                  (double)a[i], (double)b[i]);
  /* The logits are not degenerate: a real spread of signs and sizes. */
  int positive = 0;
  for (int i = 0; i < OUT; ++i) positive += a[i] > 0;
  ck_assert_int_gt(positive, 0);
  ck_assert_int_lt(positive, OUT);
}
END_TEST

/* The tensor-level module lowers to the same two dispatches of the same
 * bytecode kernel on the same rodata: the same logits, bit for bit. */
START_TEST(test_tensor_level_matches) {
  float a[OUT], b[OUT];
  run_main(variants[0], HALI_HAL_DEVICE_LOCAL_SYNC, 0, a, NULL);
  run_main(variants[2], HALI_HAL_DEVICE_LOCAL_TASK, 2, b, NULL);
  for (int i = 0; i < OUT; ++i)
    ck_assert_msg(memcmp(&a[i], &b[i], sizeof(float)) == 0,
                  "logit %d: mlp.hasm %.9g, mlp_tensor_rodata.hasm %.9g", i,
                  (double)a[i], (double)b[i]);
}
END_TEST

/* `hali run examples/mlp.hasm` (what ./quickstart runs) prints a 10xf32
 * view. */
START_TEST(test_cli_runs_main) {
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "%s run %s/examples/%s --executable-path=%s/examples "
           "--device=local-task --workers=2",
           HALI_TOOL, HALI_SRCDIR, variants[_i], HALI_BUILDDIR);
  char *out = NULL, *err = NULL;
  ck_assert_int_eq(hali_test_shell(cmd, &out, &err), 0);
  ck_assert_str_eq(err, "");
  const char *prefix = "result[0]: hal.buffer_view\n10xf32=";
  ck_assert_msg(strncmp(out, prefix, strlen(prefix)) == 0,
                "unexpected output: %s", out);
  int values = 0;
  for (const char *c = out + strlen(prefix); *c && *c != '\n'; ++c)
    values += *c != ' ' && (c[-1] == ' ' || c[-1] == '=');
  ck_assert_int_eq(values, OUT);
  free(out);
  free(err);
}
END_TEST

static Suite *mlp_suite(void) {
  Suite *s = suite_create("mlp");
  TCase *tc = tcase_create("mlp");
  tcase_add_loop_test(tc, test_logits_match_reference, 0, 3);
  tcase_add_test(tc, test_variants_agree);
  tcase_add_test(tc, test_tensor_level_matches);
  tcase_add_loop_test(tc, test_cli_runs_main, 0, 3);
  tcase_set_timeout(tc, 30);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(mlp_suite()); }
