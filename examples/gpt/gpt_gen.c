/* examples/gpt/gpt_gen: writes the GPT example's weights and its
 * tensor-level program for one configuration (examples/gpt/config.h).
 *
 *   gpt_gen [--vocab=N] [--d-model=N] [--heads=N] [--layers=N]
 *           [--context=N] [--generate=N] [--seed=N]
 *           [--weights=OUT.safetensors] [--hasm=OUT.hasm]
 *           [--omit=TENSOR] [--misshape=TENSOR]
 *
 * The weights: GPT-2's tensor names and layouts (wte.weight [V, D],
 * wpe.weight [C, D], h.L.ln_1.weight [D], h.L.attn.c_attn.weight [D, 3D],
 * ... ln_f.bias [D]; Conv1D weights are [in, out]; the logits projection
 * is tied to wte), f32, drawn from a fixed-seed generator (xorshift64*,
 * normals by Box-Muller) so the file is the same on every machine.  The
 * "__metadata__" of the file records the configuration, which
 * examples/gpt/reference.py reads.  The header is padded so that the data
 * starts at a multiple of 64 and every tensor is a multiple of 64 bytes
 * (d_model must be a multiple of 16), so hali maps them in place.
 *
 * --omit and --misshape write a broken file (a tensor left out, or given
 * one row too many) for the bad-input tests.
 *
 * The program (examples/gpt/gpt.hasm is this output for the default
 * configuration; tests/gpt.test checks that it is up to date) is described
 * in doc/tutorial-gpt.md. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static uint64_t rng;

static double uniform01(void) { /* (0, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  uint64_t r = rng * 2685821657736338717ull;
  return ((double)(r >> 11) + 0.5) / 9007199254740992.0;
}

static float normal(double std) {
  double u = uniform01(), v = uniform01();
  return (float)(std * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

typedef struct {
  char name[64];
  int rank;
  long shape[2];
  float *data;
} tensor_t;

static tensor_t *tensors;
static int tensor_count;

static long numel(const tensor_t *t) {
  return t->rank == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
}

/* A tensor of normals (std, plus |mean|) drawn in file order. */
static void add(const char *name, long rows, long cols, double mean,
                double std) {
  tensor_t *t = &tensors[tensor_count++];
  snprintf(t->name, sizeof(t->name), "%s", name);
  t->rank = cols ? 2 : 1;
  t->shape[0] = rows;
  t->shape[1] = cols;
  long n = numel(t);
  t->data = malloc((size_t)n * sizeof(float));
  if (!t->data) {
    fprintf(stderr, "gpt_gen: out of memory\n");
    exit(1);
  }
  for (long i = 0; i < n; ++i) t->data[i] = (float)mean + normal(std);
}

static int put_f32(FILE *f, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                  (uint8_t)(u >> 24)};
  return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static int write_weights(const char *path, const gpt_config_t *c,
                         const char *omit, const char *misshape) {
  size_t cap = 256 + (size_t)tensor_count * 160, at = 0;
  char *h = malloc(cap + 64);
  if (!h) return -1;
  uint64_t offset = 0;
  at += (size_t)snprintf(h + at, cap - at, "{");
  for (int i = 0; i < tensor_count; ++i) {
    tensor_t *t = &tensors[i];
    if (omit && strcmp(omit, t->name) == 0) continue;
    long rows = t->shape[0];
    if (misshape && strcmp(misshape, t->name) == 0) rows += 1;
    uint64_t bytes = (uint64_t)(t->rank == 1 ? rows : rows * t->shape[1]) * 4;
    if (t->rank == 1)
      at += (size_t)snprintf(h + at, cap - at,
                             "\"%s\":{\"dtype\":\"F32\",\"shape\":[%ld],", t->name,
                             rows);
    else
      at += (size_t)snprintf(h + at, cap - at,
                             "\"%s\":{\"dtype\":\"F32\",\"shape\":[%ld,%ld],",
                             t->name, rows, t->shape[1]);
    at += (size_t)snprintf(h + at, cap - at,
                           "\"data_offsets\":[%llu,%llu]},",
                           (unsigned long long)offset,
                           (unsigned long long)(offset + bytes));
    offset += bytes;
  }
  at += (size_t)snprintf(
      h + at, cap - at,
      "\"__metadata__\":{\"generator\":\"examples/gpt/gpt_gen.c\","
      "\"vocab\":\"%d\",\"d_model\":\"%d\",\"heads\":\"%d\",\"layers\":"
      "\"%d\",\"context\":\"%d\",\"generate\":\"%d\",\"seed\":\"%u\"}}",
      c->vocab, c->d_model, c->heads, c->layers, c->context, c->generate,
      c->seed);
  while ((8 + at) % 64) h[at++] = ' ';
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    free(h);
    return -1;
  }
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = (uint8_t)((uint64_t)at >> (8 * i));
  int bad = fwrite(len, 1, 8, f) != 8 || fwrite(h, 1, at, f) != at;
  free(h);
  for (int i = 0; i < tensor_count && !bad; ++i) {
    tensor_t *t = &tensors[i];
    if (omit && strcmp(omit, t->name) == 0) continue;
    long n = numel(t);
    for (long k = 0; k < n && !bad; ++k) bad = put_f32(f, t->data[k]) != 0;
    if (misshape && strcmp(misshape, t->name) == 0)
      for (long k = 0; k < (t->rank == 1 ? 1 : t->shape[1]) && !bad; ++k)
        bad = put_f32(f, 0.0f) != 0;
  }
  if (fclose(f) != 0) bad = 1;
  if (bad) {
    perror(path);
    remove(path);
    return -1;
  }
  return 0;
}

/* ----- the program -------------------------------------------------- */

/* A global's name in the module: the tensor's with '.' as '_'. */
static const char *gname(const char *tensor) {
  static char buf[4][64];
  static int k;
  char *b = buf[k++ & 3];
  snprintf(b, 64, "%s", tensor);
  for (char *p = b; *p; ++p)
    if (*p == '.') *p = '_';
  return b;
}

static void emit_params(FILE *o) {
  for (int i = 0; i < tensor_count; ++i) {
    tensor_t *t = &tensors[i];
    if (t->rank == 1)
      fprintf(o, "global @%s : tensor<%ldxf32> = parameter \"model\" :: \"%s\"\n",
              gname(t->name), t->shape[0], t->name);
    else
      fprintf(o,
              "global @%s : tensor<%ldx%ldxf32> = parameter \"model\" :: "
              "\"%s\"\n",
              gname(t->name), t->shape[0], t->shape[1], t->name);
  }
}

static void emit_layer(FILE *o, const gpt_config_t *c, int l) {
  const int D = c->d_model;
  char p[32];
  snprintf(p, sizeof(p), "h_%d_", l);
  fprintf(o, "  # block %d\n", l);
  fprintf(o, "  %%g%d = tensor.global.load @%sln_1_weight\n", l, p);
  fprintf(o, "  %%b%d = tensor.global.load @%sln_1_bias\n", l, p);
  fprintf(o,
          "  %%a%d = tensor.dispatch @gpt::@layernorm[%%T](%%x%d, %%g%d, "
          "%%b%d, %%D) -> tensor<?x%dxf32>{%%T}\n",
          l, 2 * l, l, l, D);
  fprintf(o, "  %%wqkv%d = tensor.global.load @%sattn_c_attn_weight\n", l, p);
  fprintf(o, "  %%bqkv%d = tensor.global.load @%sattn_c_attn_bias\n", l, p);
  fprintf(o,
          "  %%qkv%d = tensor.dispatch @gpt::@linear_qkv[%d, %%T](%%a%d, "
          "%%wqkv%d, %%bqkv%d, %%D, %%D3) -> tensor<3x?x%dxf32>{%%T}\n",
          l, 3 * D, l, l, l, D);
  fprintf(o, "  %%kv%d = tensor.global.load @kv%d\n", l, l);
  fprintf(o,
          "  %%new%d = tensor.slice %%qkv%d[1, 0, 0] : tensor<2x?x%dxf32>{%%T}\n",
          l, l, D);
  fprintf(o, "  %%kv%d.new = tensor.update %%new%d, %%kv%d[0, %%p0.64, 0]\n",
          l, l, l);
  fprintf(o,
          "  %%att%d = tensor.dispatch @gpt::@attention[%%H, %%T](%%qkv%d, "
          "%%kv%d.new, %%D, %%H32, %%p0) -> tensor<?x%dxf32>{%%T}\n",
          l, l, l, D);
  fprintf(o, "  %%wo%d = tensor.global.load @%sattn_c_proj_weight\n", l, p);
  fprintf(o, "  %%bo%d = tensor.global.load @%sattn_c_proj_bias\n", l, p);
  fprintf(o,
          "  %%x%d = tensor.dispatch @gpt::@linear_residual[%d, %%T](%%att%d, "
          "%%wo%d, %%bo%d, %%x%d, %%D, %%D) -> tensor<?x%dxf32>{%%T}\n",
          2 * l + 1, D, l, l, l, 2 * l, D);
  fprintf(o, "  %%g%d.2 = tensor.global.load @%sln_2_weight\n", l, p);
  fprintf(o, "  %%b%d.2 = tensor.global.load @%sln_2_bias\n", l, p);
  fprintf(o,
          "  %%m%d = tensor.dispatch @gpt::@layernorm[%%T](%%x%d, %%g%d.2, "
          "%%b%d.2, %%D) -> tensor<?x%dxf32>{%%T}\n",
          l, 2 * l + 1, l, l, D);
  fprintf(o, "  %%wfc%d = tensor.global.load @%smlp_c_fc_weight\n", l, p);
  fprintf(o, "  %%bfc%d = tensor.global.load @%smlp_c_fc_bias\n", l, p);
  fprintf(o,
          "  %%f%d = tensor.dispatch @gpt::@linear_gelu[%d, %%T](%%m%d, "
          "%%wfc%d, %%bfc%d, %%D, %%D4) -> tensor<?x%dxf32>{%%T}\n",
          l, 4 * D, l, l, l, 4 * D);
  fprintf(o, "  %%wp%d = tensor.global.load @%smlp_c_proj_weight\n", l, p);
  fprintf(o, "  %%bp%d = tensor.global.load @%smlp_c_proj_bias\n", l, p);
  fprintf(o,
          "  %%x%d = tensor.dispatch @gpt::@linear_residual[%d, %%T](%%f%d, "
          "%%wp%d, %%bp%d, %%x%d, %%D4, %%D) -> tensor<?x%dxf32>{%%T}\n",
          2 * l + 2, D, l, l, l, 2 * l + 1, D);
}

/* @forward's body for T tokens (dynamic: tensor<?x...>{%T}), from %T =
 * tensor.dim %tokens to %logits and %next.  The global stores come last,
 * so the whole body is one region (one submission). */
static char *forward_body(const gpt_config_t *c) {
  char *buf = NULL;
  size_t len = 0;
  FILE *o = open_memstream(&buf, &len);
  if (!o) return NULL;
  const int V = c->vocab, D = c->d_model, H = c->heads, L = c->layers;
  fprintf(o,
          "  %%T = tensor.dim %%tokens, 0\n"
          "  %%D = const.i32 %d\n"
          "  %%D3 = const.i32 %d\n"
          "  %%D4 = const.i32 %d\n"
          "  %%H = const.i64 %d\n"
          "  %%H32 = const.i32 %d\n"
          "  %%first = const.i32 0\n"
          "  %%p0.64 = ext.s.i32.i64 %%p0\n"
          "  %%wte = tensor.global.load @wte_weight\n"
          "  %%wpe = tensor.global.load @wpe_weight\n"
          "  %%x0 = tensor.dispatch @gpt::@embed[%%T](%%tokens, %%wte, %%wpe, "
          "%%D, %%p0, %%first) -> tensor<?x%dxf32>{%%T}\n",
          D, 3 * D, 4 * D, H, H, D);
  for (int l = 0; l < L; ++l) emit_layer(o, c, l);
  fprintf(o,
          "  # the last row's logits (the projection is tied to wte)\n"
          "  %%gf = tensor.global.load @ln_f_weight\n"
          "  %%bf = tensor.global.load @ln_f_bias\n"
          "  %%xf = tensor.dispatch @gpt::@layernorm[%%T](%%x%d, %%gf, %%bf, "
          "%%D) -> tensor<?x%dxf32>{%%T}\n"
          "  %%T32 = trunc.i64.i32 %%T\n"
          "  %%one = const.i32 1\n"
          "  %%row = sub.i32 %%T32, %%one\n"
          "  %%logits = tensor.dispatch @gpt::@logits[%d](%%xf, %%wte, %%D, "
          "%%row) -> tensor<%dxf32>\n"
          "  %%next = tensor.dispatch @gpt::@argmax[1](%%logits) -> "
          "tensor<1xi32>\n",
          2 * L, D, V, V);
  fprintf(o, "  # the updated caches (the updates wrote them in place)\n");
  for (int l = 0; l < L; ++l)
    fprintf(o, "  tensor.global.store @kv%d, %%kv%d.new\n", l, l);
  if (fclose(o) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* The same body for one token: every "tensor<?x" is "tensor<1x", every
 * "x?x" (the rows of [3, T, D] and [2, T, D]) is "x1x", and the "{%T}"
 * dims go. */
static char *static_body(const char *dyn) {
  if (!dyn) return NULL;
  char *out = malloc(strlen(dyn) + 1), *w = out;
  if (!out) return NULL;
  for (const char *r = dyn; *r;) {
    if (strncmp(r, "tensor<?x", 9) == 0) {
      memcpy(w, "tensor<1x", 9);
      w += 9, r += 9;
    } else if (strncmp(r, "x?x", 3) == 0) {
      memcpy(w, "x1x", 3);
      w += 3, r += 3;
    } else if (strncmp(r, "{%T}", 4) == 0) {
      r += 4;
    } else {
      *w++ = *r++;
    }
  }
  *w = 0;
  return out;
}

/* The rest of @generate / @generate_n after their checks (which set
 * %T, the prompt's length, and %count, the tokens to make): prefill, then
 * a loop of decode steps; |ids| is the result's type. */
static void emit_generate_loop(FILE *o, const char *ids) {
  fprintf(o,
          "  %%zero = const.i32 0\n"
          "  %%first, %%next = call @forward(%%prompt, %%zero)\n"
          "  %%empty = tensor.splat %%zero : %s\n"
          "  %%ids = tensor.dispatch @gpt::@put[1](%%next, %%empty, %%zero) -> "
          "%%empty as %s\n"
          "  %%p = trunc.i64.i32 %%T\n"
          "  %%i = const.i32 1\n"
          "  %%one32 = const.i32 1\n"
          "  br ^head\n"
          "^head:\n"
          "  %%more = lt.s.i32 %%i, %%count\n"
          "  cond_br %%more, ^body, ^done\n"
          "^body:\n"
          "  %%logits, %%next = call @step(%%next, %%p)\n"
          "  %%ids = tensor.dispatch @gpt::@put[1](%%next, %%ids, %%i) -> %%ids "
          "as %s\n"
          "  %%p = add.i32 %%p, %%one32\n"
          "  %%i = add.i32 %%i, %%one32\n"
          "  br ^head\n"
          "^done:\n"
          "  return %%ids\n"
          "}\n\n",
          ids, ids, ids);
}

static int write_hasm(const char *path, const gpt_config_t *c) {
  FILE *o = fopen(path, "w");
  if (!o) {
    perror(path);
    return -1;
  }
  const int V = c->vocab, D = c->d_model, H = c->heads, L = c->layers,
            C = c->context, G = c->generate;
  fprintf(o,
          "# GENERATED by examples/gpt/gpt_gen.c -- edit that program, not "
          "this file.\n"
          "#\n"
          "# A GPT-2 decoder: vocab %d (bytes), d_model %d, %d heads, %d "
          "layers,\n"
          "# context %d.  doc/tutorial-gpt.md explains the layout; in short:\n"
          "#\n"
          "#   @prefill(tokens)          the prompt at positions 0..T-1 -> "
          "(logits of the\n"
          "#                             last, its argmax)\n"
          "#   @decode(token, position)  one token -> (logits, argmax)\n"
          "#   @generate(prompt)         prefill, then %d greedy tokens -> "
          "their ids\n"
          "#   @generate_n(prompt, n)    the same for n tokens (a loop in hali)\n"
          "#\n"
          "# The weights are parameters of the scope \"model\"; the KV cache "
          "is one\n"
          "# mutable tensor global per layer (@kvL: keys, then values); "
          "each step's\n"
          "# keys and values go in with tensor.update, in place.\n"
          "#\n"
          "#   hali run examples/gpt/gpt.hasm "
          "--parameters=model=examples/gpt/gpt.safetensors \\\n"
          "#       --function=generate --input=5xi32=72,101,108,108,111\n"
          "module @gpt\n\n",
          V, D, H, L, C, G);
  emit_params(o);
  fprintf(o, "\n# The KV cache: [2, context, d_model] per layer.\n");
  for (int l = 0; l < L; ++l)
    fprintf(o, "global @kv%d : tensor<2x%dx%dxf32> mutable\n", l, C, D);
  fprintf(
      o,
      "\n# examples/gpt/kernels.c; the workgroup sizes are the kernels' tiles.\n"
      "executable @gpt format \"native\" library \"kernels.so\" {\n"
      "  export @embed(tensor<?xi32>, tensor<?x?xf32>, tensor<?x?xf32>, i32, "
      "i32, i32) -> (tensor<?x?xf32>) workgroup_size [1, 1, 1]\n"
      "  export @layernorm(tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>, "
      "i32) -> (tensor<?x?xf32>) workgroup_size [1, 1, 1]\n"
      "  export @linear(tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, i32, "
      "i32) -> (tensor<?x?xf32>) workgroup_size [%d, %d, 1]\n"
      "  export @linear_qkv(tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, "
      "i32, i32) -> (tensor<?x?x?xf32>) workgroup_size [%d, %d, 1]\n"
      "  export @linear_gelu(tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, "
      "i32, i32) -> (tensor<?x?xf32>) workgroup_size [%d, %d, 1]\n"
      "  export @linear_residual(tensor<?x?xf32>, tensor<?x?xf32>, "
      "tensor<?xf32>, tensor<?x?xf32>, i32, i32) -> (tensor<?x?xf32>) "
      "workgroup_size [%d, %d, 1]\n"
      "  export @logits(tensor<?x?xf32>, tensor<?x?xf32>, i32, i32) -> "
      "(tensor<?xf32>) workgroup_size [%d, 1, 1]\n"
      "  export @attention(tensor<?x?x?xf32>, tensor<?x?x?xf32>, i32, i32, "
      "i32) "
      "-> (tensor<?x?xf32>) workgroup_size [1, 1, 1]\n"
      "  export @argmax(tensor<?xf32>) -> (tensor<1xi32>) workgroup_size [1, "
      "1, 1]\n"
      "  export @put(tensor<1xi32>, tensor<?xi32>, i32) -> (tensor<?xi32>) "
      "workgroup_size [1, 1, 1]\n"
      "}\n\n",
      GPT_TILE_N, GPT_TILE_M, GPT_TILE_N, GPT_TILE_M, GPT_TILE_N, GPT_TILE_M,
      GPT_TILE_N, GPT_TILE_M, GPT_TILE_N);

  /* @forward (dynamic T), @step (T = 1, static shapes: its
   * activations are packed into one slab per call instead of allocated
   * one by one) and @decode (the same body inline, after its checks). */
  char *dyn = forward_body(c);
  char *one = static_body(dyn);
  if (!dyn || !one) {
    fprintf(stderr, "gpt_gen: out of memory\n");
    exit(1);
  }
  fprintf(o,
          "# The model on T tokens at positions p0 .. p0+T-1: writes their "
          "keys and\n"
          "# values into the cache, returns the logits of the last and its "
          "argmax.\n"
          "# The callers check T and p0; the kernels check every index "
          "again.\n"
          "func @forward(%%tokens: tensor<?xi32>, %%p0: i32) -> "
          "(tensor<%dxf32>, tensor<1xi32>) {\n%s"
          "  return %%logits, %%next\n"
          "}\n\n",
          V, dyn);
  fprintf(o,
          "# @forward for one token, with static shapes (@generate's "
          "steps), its\n"
          "# commands recorded once (doc/passes.md, \"Commands recorded "
          "once\").\n"
          "func @step(%%tokens: tensor<1xi32>, %%p0: i32) -> "
          "(tensor<%dxf32>, tensor<1xi32>) attributes [\"record_once\"] "
          "{\n%s"
          "  return %%logits, %%next\n"
          "}\n\n",
          V, one);

  /* prefill */
  fprintf(o,
          "# The prompt, at positions 0 .. T-1 (a new sequence).\n"
          "func @prefill(%%tokens: tensor<?xi32>) -> (tensor<%dxf32>, "
          "tensor<1xi32>) {\n"
          "  %%T = tensor.dim %%tokens, 0\n"
          "  %%one = const.i64 1\n"
          "  %%C = const.i64 %d\n"
          "  %%nonempty = ge.s.i64 %%T, %%one\n"
          "  assert %%nonempty, \"@prefill: argument 0 (tokens) is empty\"\n"
          "  %%fits = le.s.i64 %%T, %%C\n"
          "  assert %%fits, \"@prefill: argument 0 (tokens) is longer than the "
          "context (%d tokens)\"\n"
          "  %%p0 = const.i32 0\n"
          "  %%logits, %%next = call @forward(%%tokens, %%p0)\n"
          "  return %%logits, %%next\n"
          "}\n\n",
          V, C, C);

  /* decode */
  fprintf(o,
          "# One token at |position| (the cache holds positions 0 .. "
          "position-1);\n"
          "# its commands are recorded once, each call binds them to its "
          "buffers.\n"
          "func @decode(%%token: i32, %%position: i32) -> (tensor<%dxf32>, "
          "tensor<1xi32>) attributes [\"record_once\"] {\n"
          "  %%zero = const.i32 0\n"
          "  %%V = const.i32 %d\n"
          "  %%C = const.i32 %d\n"
          "  %%t_lo = ge.s.i32 %%token, %%zero\n"
          "  %%t_hi = lt.s.i32 %%token, %%V\n"
          "  %%t_ok = and.i32 %%t_lo, %%t_hi\n"
          "  assert %%t_ok, \"@decode: argument 0 (token) is outside the "
          "vocabulary [0, %d)\"\n"
          "  %%p_lo = ge.s.i32 %%position, %%zero\n"
          "  %%p_hi = lt.s.i32 %%position, %%C\n"
          "  %%p_ok = and.i32 %%p_lo, %%p_hi\n"
          "  assert %%p_ok, \"@decode: argument 1 (position) is past the KV "
          "cache [0, %d)\"\n"
          "  %%tokens = tensor.splat %%token : tensor<1xi32>\n"
          "  %%p0 = mov.i32 %%position\n%s"
          "  return %%logits, %%next\n"
          "}\n\n",
          V, V, C, V, C, one);

  /* generate: a loop in hali (doc/passes.md, "Control flow"): %next and
   * %ids are carried from block to block; each iteration's step chains on
   * the device through the fences, with no host round trip. */
  fprintf(o,
          "# Prefill, then %d greedy decode steps in a loop, each fed the "
          "previous\n"
          "# step's argmax on the device (no host round trip): the generated "
          "ids.\n"
          "func @generate(%%prompt: tensor<?xi32>) -> tensor<%dxi32> {\n"
          "^entry:\n"
          "  %%T = tensor.dim %%prompt, 0\n"
          "  %%one = const.i64 1\n"
          "  %%room = const.i64 %d\n"
          "  %%nonempty = ge.s.i64 %%T, %%one\n"
          "  assert %%nonempty, \"@generate: argument 0 (prompt) is empty\"\n"
          "  %%fits = le.s.i64 %%T, %%room\n"
          "  assert %%fits, \"@generate: argument 0 (prompt) is longer than %d "
          "tokens (the context is %d and %d generated tokens are fed back)\"\n"
          "  %%count = const.i32 %d\n",
          G, G, C - G + 1, C - G + 1, C, G - 1, G);
  char ids_type[64];
  snprintf(ids_type, sizeof(ids_type), "tensor<%dxi32>", G);
  emit_generate_loop(o, ids_type);
  /* generate_n: the same loop for n tokens, n an argument. */
  fprintf(o,
          "# The same for |n| tokens: prefill, then n - 1 decode steps.\n"
          "func @generate_n(%%prompt: tensor<?xi32>, %%n: i64) -> "
          "tensor<?xi32> {\n"
          "^entry:\n"
          "  %%T = tensor.dim %%prompt, 0\n"
          "  %%one = const.i64 1\n"
          "  %%C = const.i64 %d\n"
          "  %%nonempty = ge.s.i64 %%T, %%one\n"
          "  assert %%nonempty, \"@generate_n: argument 0 (prompt) is empty\"\n"
          "  %%some = ge.s.i64 %%n, %%one\n"
          "  assert %%some, \"@generate_n: argument 1 (n) must be at least "
          "1\"\n"
          "  %%room = sub.i64 %%C, %%T\n"
          "  %%room = add.i64 %%room, %%one\n"
          "  %%fits = le.s.i64 %%n, %%room\n"
          "  assert %%fits, \"@generate_n: the prompt and n - 1 generated "
          "tokens do not fit in the context (%d tokens)\"\n"
          "  %%count = trunc.i64.i32 %%n\n",
          C, C);
  emit_generate_loop(o, "tensor<?xi32>{%n}");
  free(dyn);
  free(one);
  if (fclose(o) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

static int int_flag(const char *arg, const char *name, int *out) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || arg[n] != '=') return 0;
  char *end;
  long v = strtol(arg + n + 1, &end, 10);
  if (*end || v < 1 || v > 1 << 20) {
    fprintf(stderr, "gpt_gen: %s takes a positive integer, not '%s'\n", name,
            arg + n + 1);
    exit(2);
  }
  *out = (int)v;
  return 1;
}

int main(int argc, char **argv) {
  gpt_config_t c = GPT_CONFIG_DEFAULT;
  const char *weights = NULL, *hasm = NULL, *omit = NULL, *misshape = NULL;
  int seed = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (int_flag(a, "--vocab", &c.vocab) ||
        int_flag(a, "--d-model", &c.d_model) ||
        int_flag(a, "--heads", &c.heads) || int_flag(a, "--layers", &c.layers) ||
        int_flag(a, "--context", &c.context) ||
        int_flag(a, "--generate", &c.generate))
      continue;
    if (int_flag(a, "--seed", &seed)) c.seed = (unsigned)seed;
    else if (strncmp(a, "--weights=", 10) == 0) weights = a + 10;
    else if (strncmp(a, "--hasm=", 7) == 0) hasm = a + 7;
    else if (strncmp(a, "--omit=", 7) == 0) omit = a + 7;
    else if (strncmp(a, "--misshape=", 11) == 0) misshape = a + 11;
    else {
      fprintf(stderr,
              "usage: gpt_gen [--vocab=N] [--d-model=N] [--heads=N] "
              "[--layers=N] [--context=N] [--generate=N] [--seed=N] "
              "[--weights=OUT.safetensors] [--hasm=OUT.hasm] [--omit=TENSOR] "
              "[--misshape=TENSOR]\n");
      return 2;
    }
  }
  if (c.d_model % 16 || c.d_model % c.heads || c.context > GPT_MAX_CONTEXT ||
      c.generate > c.context || c.vocab > 1 << 16) {
    fprintf(stderr,
            "gpt_gen: d_model must be a multiple of 16 and of heads, context "
            "at most %d, generate at most context, vocab at most 65536\n",
            GPT_MAX_CONTEXT);
    return 2;
  }
  const int V = c.vocab, D = c.d_model, C = c.context;
  tensors = calloc((size_t)(4 + 12 * c.layers), sizeof(tensor_t));
  if (!tensors) return 1;
  rng = 0x9E3779B97F4A7C15ull ^ c.seed;
  add("wte.weight", V, D, 0.0, 0.1);
  add("wpe.weight", C, D, 0.0, 0.2);
  for (int l = 0; l < c.layers; ++l) {
    char n[64];
#define ADD(suffix, rows, cols, mean, std)            \
  snprintf(n, sizeof(n), "h.%d.%s", l, suffix);      \
  add(n, rows, cols, mean, std)
    ADD("ln_1.weight", D, 0, 1.0, 0.1);
    ADD("ln_1.bias", D, 0, 0.0, 0.02);
    ADD("attn.c_attn.weight", D, 3 * D, 0.0, 0.15);
    ADD("attn.c_attn.bias", 3 * D, 0, 0.0, 0.02);
    ADD("attn.c_proj.weight", D, D, 0.0, 0.1);
    ADD("attn.c_proj.bias", D, 0, 0.0, 0.02);
    ADD("ln_2.weight", D, 0, 1.0, 0.1);
    ADD("ln_2.bias", D, 0, 0.0, 0.02);
    ADD("mlp.c_fc.weight", D, 4 * D, 0.0, 0.12);
    ADD("mlp.c_fc.bias", 4 * D, 0, 0.0, 0.02);
    ADD("mlp.c_proj.weight", 4 * D, D, 0.0, 0.08);
    ADD("mlp.c_proj.bias", D, 0, 0.0, 0.02);
#undef ADD
  }
  add("ln_f.weight", D, 0, 1.0, 0.1);
  add("ln_f.bias", D, 0, 0.0, 0.02);
  int rc = 0;
  if (weights && write_weights(weights, &c, omit, misshape) != 0) rc = 1;
  if (hasm && write_hasm(hasm, &c) != 0) rc = 1;
  for (int i = 0; i < tensor_count; ++i) free(tensors[i].data);
  free(tensors);
  return rc;
}
