/* The GPT example (examples/gpt) through the public API: the three entry
 * points agree with one another on both devices, and bad input is a clear
 * error naming the argument or tensor, never a crash or an out-of-bounds
 * access.  tests/gpt.test checks the numbers against the numpy reference.
 * Needs make's examples/gpt/{gpt.safetensors,kernels.so,gpt_gen}. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"

#define MODULE HALI_SRCDIR "/examples/gpt/gpt.hasm"
#define WEIGHTS HALI_BUILDDIR "/examples/gpt/gpt.safetensors"
#define GEN HALI_BUILDDIR "/examples/gpt/gpt_gen"
enum { VOCAB = 256, CONTEXT = 128, GENERATED = 16 };

typedef struct {
  hali_instance_t *instance;
  hali_device_t *device;
  hali_module_t *module;
  hali_parameters_t *params;
  hali_context_t *ctx;
} gpt_t;

static void ok(hali_status_t s) {
  if (!s) return;
  char *t = hali_status_to_string(s);
  ck_abort_msg("%s", t);
}

/* The context's creation status (the weights are bound then). */
static hali_status_t gpt_open(gpt_t *g, hali_device_kind_t kind,
                              uint32_t workers, const char *weights) {
  memset(g, 0, sizeof(*g));
  setenv("HALI_EXECUTABLE_PATH", HALI_BUILDDIR "/examples/gpt", 1);
  ok(hali_instance_create(NULL, &g->instance));
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.kind = kind;
  dp.worker_count = workers;
  ok(hali_device_create(g->instance, &dp, &g->device));
  ok(hali_module_load_file(g->instance, MODULE, &g->module));
  ok(hali_parameters_create(&g->params));
  ok(hali_parameters_add_file(g->params, "model", weights));
  hali_context_params_t cp;
  hali_context_params_initialize(&cp);
  cp.parameters = g->params;
  return hali_context_create(g->instance, g->device, &g->module, 1, &cp,
                             &g->ctx);
}

static void gpt_close(gpt_t *g) {
  hali_context_release(g->ctx);
  hali_parameters_release(g->params);
  hali_module_release(g->module);
  hali_device_release(g->device);
  hali_instance_release(g->instance);
}

static hali_buffer_view_t *ids_view(gpt_t *g, const int32_t *ids, size_t n) {
  hali_buffer_view_t *v = NULL;
  int64_t shape = (int64_t)n;
  ok(hali_buffer_view_create(g->device, HALI_ELEMENT_TYPE_I32, 1, &shape, ids,
                             n * 4, &v));
  return v;
}

/* Calls |fn| with |args|; |res| gets |nres| results. */
static hali_status_t call(gpt_t *g, const char *fn, hali_variant_t *args,
                          size_t nargs, hali_variant_t *res, size_t nres) {
  hali_function_t *f = NULL;
  ok(hali_context_lookup_function(g->ctx, fn, &f));
  return hali_context_invoke(g->ctx, f, args, nargs, res, nres);
}

/* @prefill or @decode: the logits (if |logits|) and the token. */
static hali_status_t step(gpt_t *g, const char *fn, hali_variant_t *args,
                          size_t nargs, float *logits, int32_t *token) {
  hali_variant_t res[2];
  hali_status_t s = call(g, fn, args, nargs, res, 2);
  if (s) return s;
  if (logits) ok(hali_buffer_view_read(res[0].u.view, logits, VOCAB * 4));
  ok(hali_buffer_view_read(res[1].u.view, token, 4));
  hali_variant_release(&res[0]);
  hali_variant_release(&res[1]);
  return HALI_OK;
}

static void expect(hali_status_t s, hali_status_code_t code,
                   const char *message) {
  ck_assert_msg(s != HALI_OK, "expected an error: %s", message);
  char *t = hali_status_to_string(s);
  ck_assert_msg(hali_status_code(s) == code, "code %d, wanted %d: %s",
                (int)hali_status_code(s), (int)code, t);
  ck_assert_msg(strstr(t, message) != NULL, "wanted \"%s\" in: %s", message,
                t);
  free(t);
  hali_status_free(s);
}

static const int32_t prompt[] = {72, 101, 108, 108, 111}; /* "Hello" */
#define NPROMPT (sizeof(prompt) / sizeof(prompt[0]))

/* @generate's ids are what a host loop of @prefill and @decode gives, and
 * @prefill of the whole sequence gives the last @decode's logits (the
 * batched path and the one-token path agree, within float rounding). */
static void agree(hali_device_kind_t kind, uint32_t workers,
                  int32_t want[GENERATED]) {
  gpt_t g;
  ok(gpt_open(&g, kind, workers, WEIGHTS));
  int32_t seq[NPROMPT + GENERATED], tok;
  float logits[VOCAB], batched[VOCAB];
  memcpy(seq, prompt, sizeof(prompt));
  hali_buffer_view_t *pv = ids_view(&g, prompt, NPROMPT);
  hali_variant_t a = hali_variant_view(pv);
  ok(step(&g, "prefill", &a, 1, NULL, &tok));
  seq[NPROMPT] = tok;
  for (int k = 1; k < GENERATED; ++k) {
    hali_variant_t d[2] = {hali_variant_i64(tok),
                           hali_variant_i64((int64_t)NPROMPT + k - 1)};
    ok(step(&g, "decode", d, 2, logits, &tok));
    seq[NPROMPT + k] = tok;
  }
  /* The whole sequence but the last token, batched. */
  hali_buffer_view_t *sv = ids_view(&g, seq, NPROMPT + GENERATED - 1);
  hali_variant_t sa = hali_variant_view(sv);
  int32_t btok;
  ok(step(&g, "prefill", &sa, 1, batched, &btok));
  ck_assert_int_eq(btok, tok);
  for (int i = 0; i < VOCAB; ++i)
    ck_assert_msg(fabsf(batched[i] - logits[i]) <= 1e-4f * (1 + fabsf(logits[i])),
                  "logit %d: batched %.9g, decoded %.9g", i, batched[i],
                  logits[i]);
  /* @generate: the same ids, from a prefill and decode steps chained on
   * the device. */
  hali_variant_t res;
  ok(call(&g, "generate", &a, 1, &res, 1));
  int32_t gen[GENERATED];
  ck_assert_int_eq(hali_buffer_view_element_count(res.u.view), GENERATED);
  ok(hali_buffer_view_read(res.u.view, gen, sizeof(gen)));
  hali_variant_release(&res);
  for (int k = 0; k < GENERATED; ++k) {
    ck_assert_int_eq(gen[k], seq[NPROMPT + k]);
    if (want) {
      if (want[0] >= 0) ck_assert_int_eq(gen[k], want[k]);
    }
  }
  if (want && want[0] < 0) memcpy(want, gen, sizeof(gen));
  hali_buffer_view_release(pv);
  hali_buffer_view_release(sv);
  gpt_close(&g);
}

START_TEST(entry_points_agree) {
  int32_t want[GENERATED] = {-1};
  agree(HALI_DEVICE_LOCAL_SYNC, 0, want);
  /* Not a fixed point: the ids are not all one token. */
  int distinct = 0;
  for (int k = 1; k < GENERATED; ++k) distinct += want[k] != want[0];
  ck_assert_int_gt(distinct, 0);
  /* Workgroups on 1 and 2 workers: the same ids. */
  agree(HALI_DEVICE_LOCAL_TASK, 1, want);
  agree(HALI_DEVICE_LOCAL_TASK, 2, want);
}
END_TEST

/* @generate_n(prompt, n): the same loop in hali for n tokens (tensor
 * control flow: the argmax and the ids carried from block to block): n =
 * GENERATED gives @generate's ids, a larger n extends them, n = 1 is the
 * prefill's token, on local-sync and on local-task with 2 workers; n out
 * of range is an error naming it. */
static void generate_n(gpt_t *g, const int32_t *ids, size_t nids, int64_t n,
                       int32_t *out) {
  hali_buffer_view_t *v = ids_view(g, ids, nids);
  hali_variant_t a[2] = {hali_variant_view(v), hali_variant_i64(n)}, res;
  ok(call(g, "generate_n", a, 2, &res, 1));
  ck_assert_int_eq(hali_buffer_view_element_count(res.u.view), n);
  ok(hali_buffer_view_read(res.u.view, out, (size_t)n * sizeof(int32_t)));
  hali_variant_release(&res);
  hali_buffer_view_release(v);
}

START_TEST(generate_n_loop) {
  for (int dev = 0; dev < 2; ++dev) {
    gpt_t g;
    ok(gpt_open(&g, dev ? HALI_DEVICE_LOCAL_TASK : HALI_DEVICE_LOCAL_SYNC,
                dev ? 2 : 0, WEIGHTS));
    hali_buffer_view_t *pv = ids_view(&g, prompt, NPROMPT);
    hali_variant_t a = hali_variant_view(pv), res;
    ok(call(&g, "generate", &a, 1, &res, 1));
    int32_t gen[GENERATED], more[GENERATED + 4], one[1];
    ok(hali_buffer_view_read(res.u.view, gen, sizeof(gen)));
    hali_variant_release(&res);
    hali_buffer_view_release(pv);
    generate_n(&g, prompt, NPROMPT, GENERATED + 4, more);
    for (int k = 0; k < GENERATED; ++k) ck_assert_int_eq(more[k], gen[k]);
    generate_n(&g, prompt, NPROMPT, 1, one);
    ck_assert_int_eq(one[0], gen[0]);
    /* The four extra tokens are what a host loop of @decode gives. */
    int32_t tok = gen[GENERATED - 1];
    for (int k = GENERATED; k < GENERATED + 4; ++k) {
      hali_variant_t d[2] = {hali_variant_i64(tok),
                             hali_variant_i64((int64_t)NPROMPT + k - 1)};
      ok(step(&g, "decode", d, 2, NULL, &tok));
      ck_assert_int_eq(more[k], tok);
    }
    pv = ids_view(&g, prompt, NPROMPT);
    hali_variant_t bad[2] = {hali_variant_view(pv), hali_variant_i64(0)};
    hali_variant_t r2;
    expect(call(&g, "generate_n", bad, 2, &r2, 1),
           HALI_STATUS_FAILED_PRECONDITION,
           "@generate_n: argument 1 (n) must be at least 1");
    bad[1] = hali_variant_i64(CONTEXT - (int64_t)NPROMPT + 2);
    expect(call(&g, "generate_n", bad, 2, &r2, 1),
           HALI_STATUS_FAILED_PRECONDITION,
           "@generate_n: the prompt and n - 1 generated tokens do not fit in "
           "the context (128 tokens)");
    hali_buffer_view_release(pv);
    gpt_close(&g);
  }
}
END_TEST

START_TEST(prompt_too_long) {
  gpt_t g;
  ok(gpt_open(&g, HALI_DEVICE_LOCAL_SYNC, 0, WEIGHTS));
  int32_t ids[CONTEXT + 1];
  for (int i = 0; i <= CONTEXT; ++i) ids[i] = i % VOCAB;
  hali_buffer_view_t *v = ids_view(&g, ids, CONTEXT + 1);
  hali_variant_t a = hali_variant_view(v), res[2];
  int32_t tok;
  expect(step(&g, "prefill", &a, 1, NULL, &tok), HALI_STATUS_FAILED_PRECONDITION,
         "@prefill: argument 0 (tokens) is longer than the context (128 "
         "tokens)");
  hali_buffer_view_release(v);
  /* Exactly the context is fine. */
  v = ids_view(&g, ids, CONTEXT);
  a = hali_variant_view(v);
  ok(step(&g, "prefill", &a, 1, NULL, &tok));
  hali_buffer_view_release(v);
  /* @generate needs room for the tokens it feeds back. */
  v = ids_view(&g, ids, CONTEXT - GENERATED + 2);
  a = hali_variant_view(v);
  expect(call(&g, "generate", &a, 1, res, 1), HALI_STATUS_FAILED_PRECONDITION,
         "@generate: argument 0 (prompt) is longer than 113 tokens (the "
         "context is 128 and 15 generated tokens are fed back)");
  hali_buffer_view_release(v);
  v = ids_view(&g, ids, 0);
  a = hali_variant_view(v);
  expect(step(&g, "prefill", &a, 1, NULL, &tok), HALI_STATUS_FAILED_PRECONDITION,
         "@prefill: argument 0 (tokens) is empty");
  hali_buffer_view_release(v);
  gpt_close(&g);
}
END_TEST

START_TEST(token_outside_vocab) {
  gpt_t g;
  ok(gpt_open(&g, HALI_DEVICE_LOCAL_SYNC, 0, WEIGHTS));
  int32_t tok;
  const int64_t bad[] = {VOCAB, -1, 1000000};
  for (size_t i = 0; i < 3; ++i) {
    hali_variant_t d[2] = {hali_variant_i64(bad[i]), hali_variant_i64(0)};
    expect(step(&g, "decode", d, 2, NULL, &tok),
           HALI_STATUS_FAILED_PRECONDITION,
           "@decode: argument 0 (token) is outside the vocabulary [0, 256)");
  }
  /* In a prompt, the embedding kernel checks each id against wte's rows:
   * error code 1 at the workgroup of the bad position (2). */
  const int32_t ids[] = {72, 101, 256, 108};
  hali_buffer_view_t *v = ids_view(&g, ids, 4);
  hali_variant_t a = hali_variant_view(v);
  expect(step(&g, "prefill", &a, 1, NULL, &tok), HALI_STATUS_INTERNAL,
         "kernel returned error code 1: executable 'gpt' export 0 'embed' "
         "workgroup (2,0,0)");
  hali_buffer_view_release(v);
  /* The failed prefill left the KV cache's timepoint failed (its rows
   * are not what a prefill wrote), so the context's later steps fail with
   * the same error rather than read it; a new context starts clean. */
  hali_variant_t d[2] = {hali_variant_i64(65), hali_variant_i64(0)};
  expect(step(&g, "decode", d, 2, NULL, &tok), HALI_STATUS_INTERNAL,
         "kernel returned error code 1: executable 'gpt' export 0 'embed' "
         "workgroup (2,0,0)");
  gpt_close(&g);
  ok(gpt_open(&g, HALI_DEVICE_LOCAL_SYNC, 0, WEIGHTS));
  ok(step(&g, "decode", d, 2, NULL, &tok));
  gpt_close(&g);
}
END_TEST

START_TEST(position_past_cache) {
  gpt_t g;
  ok(gpt_open(&g, HALI_DEVICE_LOCAL_SYNC, 0, WEIGHTS));
  int32_t tok;
  const int64_t bad[] = {CONTEXT, -1, 1 << 30};
  for (size_t i = 0; i < 3; ++i) {
    hali_variant_t d[2] = {hali_variant_i64(65), hali_variant_i64(bad[i])};
    expect(step(&g, "decode", d, 2, NULL, &tok),
           HALI_STATUS_FAILED_PRECONDITION,
           "@decode: argument 1 (position) is past the KV cache [0, 128)");
  }
  hali_variant_t last[2] = {hali_variant_i64(65),
                            hali_variant_i64(CONTEXT - 1)};
  ok(step(&g, "decode", last, 2, NULL, &tok));
  /* @forward trusts its callers; its cache update does not: two tokens
   * from position 127 run past the cache at row 1, and the update's range
   * check (before the step's commands are submitted, so no kernel runs)
   * names the cache and the range. */
  const int32_t ids[] = {72, 101};
  hali_buffer_view_t *v = ids_view(&g, ids, 2);
  hali_variant_t a[2] = {hali_variant_view(v), hali_variant_i64(CONTEXT - 1)};
  hali_variant_t res[2];
  expect(call(&g, "forward", a, 2, res, 2), HALI_STATUS_OUT_OF_RANGE,
         "@forward$async: tensor.update of %kv0 (tensor<2x128x128xf32>): the "
         "range [0, %p0.64, 0] + [2, %T, 128] is outside it (dimension 1)");
  hali_buffer_view_release(v);
  gpt_close(&g);
}
END_TEST

/* A weight file written by gpt_gen with one tensor left out or mis-shaped:
 * the context is not created, and the error names the tensor. */
static void broken_weights(const char *flag, const char *tensor,
                           hali_status_code_t code, const char *message) {
  char path[512], cmd[1400];
  snprintf(path, sizeof(path), "%s/tests/gpt-%s.safetensors", HALI_BUILDDIR,
           flag);
  snprintf(cmd, sizeof(cmd), "%s --weights=%s --%s=%s", GEN, path, flag,
           tensor);
  ck_assert_int_eq(system(cmd), 0);
  gpt_t g;
  expect(gpt_open(&g, HALI_DEVICE_LOCAL_SYNC, 0, path), code, message);
  gpt_close(&g);
  remove(path);
}

START_TEST(weights_missing_tensor) {
  broken_weights("omit", "h.2.mlp.c_fc.bias", HALI_STATUS_NOT_FOUND,
                 "parameter 'model'::'h.2.mlp.c_fc.bias' is not in " HALI_BUILDDIR
                 "/tests/gpt-omit.safetensors\n"
                 "  global @h_2_mlp_c_fc_bias = parameter \"model\" :: "
                 "\"h.2.mlp.c_fc.bias\" of module @gpt");
}
END_TEST

START_TEST(weights_misshaped_tensor) {
  broken_weights("misshape", "h.1.attn.c_attn.weight",
                 HALI_STATUS_INVALID_ARGUMENT,
                 "parameter 'model'::'h.1.attn.c_attn.weight' in " HALI_BUILDDIR
                 "/tests/gpt-misshape.safetensors: the shape differs: declared "
                 "tensor<128x384xf32>, the file holds 129x384xf32 (dtype F32)");
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpt");
  TCase *tc = tcase_create("gpt");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, entry_points_agree);
  tcase_add_test(tc, prompt_too_long);
  tcase_add_test(tc, generate_n_loop);
  tcase_add_test(tc, token_outside_vocab);
  tcase_add_test(tc, position_past_cache);
  tcase_add_test(tc, weights_missing_tensor);
  tcase_add_test(tc, weights_misshaped_tensor);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
