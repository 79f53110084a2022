/* The GPT example's kernels, in the native kernel ABI (<hali/kernel.h>).
 *
 * Every size comes from the push constants and the bindings' lengths; each
 * kernel checks that what it is about to touch lies inside the bindings it
 * was given, and returns a non-zero code instead of reading or writing
 * past them:
 *
 *   1  a token id outside the vocabulary (wte's rows)
 *   2  a position outside the context (wpe's or the KV cache's rows)
 *   3  bindings or constants that disagree (a binding too small, a width
 *      of 0, a workgroup size other than the one the kernel is tiled for)
 *   4  a context longer than the attention scratch holds
 *
 * Layouts (row-major f32 unless noted; GPT-2's, whose Conv1D weights are
 * [in, out]):  x [T, D] activations; qkv [3, T, D] (the planes q, k, v:
 * @linear_qkv writes them, so the keys and values of the T rows are one
 * contiguous range [1, 0, 0] + [2, T, D]); kv [2, C, D] one layer's cache
 * (keys, then values); wte [V, D], wpe [C, D].
 *
 * bench/gpt_direct.c calls these same functions, through the same table,
 * from a plain C loop. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hali/kernel.h"
#include "config.h"

enum {
  ERR_VOCAB = 1,
  ERR_POSITION = 2,
  ERR_SHAPE = 3,
  ERR_SCRATCH = 4,
};

typedef const hali_kernel_dispatch_state_t dstate_t;
typedef const hali_kernel_workgroup_state_t wstate_t;

/* Binding |b| holds at least |elems| 4-byte elements (no overflow: the
 * counts are 32-bit, their products are computed in 64 bits). */
static int fits(dstate_t *d, uint32_t b, uint64_t elems) {
  return b < d->binding_count && elems <= (uint64_t)SIZE_MAX / 4 &&
         elems * 4 <= d->binding_lengths[b];
}

/* Rows of width |w| binding |b| holds. */
static uint64_t rows_of(dstate_t *d, uint32_t b, uint64_t w) {
  return w ? d->binding_lengths[b] / 4 / w : 0;
}

/* embed(tokens i32[T], wte[V, D], wpe[C, D]; D, p0, first) -> x[T, D]:
 * x[t] = wte[tokens[first + t]] + wpe[p0 + t].  One workgroup per row t. */
static int embed(dstate_t *d, wstate_t *wg) {
  const uint32_t D = d->constants[0], p0 = d->constants[1],
                 first = d->constants[2], t = wg->workgroup_id_x;
  if (D == 0 || !fits(d, 0, (uint64_t)first + t + 1) ||
      !fits(d, 3, ((uint64_t)t + 1) * D))
    return ERR_SHAPE;
  const int32_t token = ((const int32_t *)d->binding_ptrs[0])[first + t];
  if (token < 0 || (uint64_t)token >= rows_of(d, 1, D)) return ERR_VOCAB;
  const uint64_t pos = (uint64_t)p0 + t;
  if (pos >= rows_of(d, 2, D)) return ERR_POSITION;
  const float *te = (const float *)d->binding_ptrs[1] + (size_t)token * D;
  const float *pe = (const float *)d->binding_ptrs[2] + (size_t)pos * D;
  float *x = (float *)d->binding_ptrs[3] + (size_t)t * D;
  for (uint32_t i = 0; i < D; ++i) x[i] = te[i] + pe[i];
  return 0;
}

/* layernorm(x[T, D], gamma[D], beta[D]; D) -> y[T, D], eps 1e-5, biased
 * variance (GPT-2's).  One workgroup per row. */
static int layernorm(dstate_t *d, wstate_t *wg) {
  const uint32_t D = d->constants[0], t = wg->workgroup_id_x;
  if (D == 0 || !fits(d, 0, ((uint64_t)t + 1) * D) || !fits(d, 1, D) ||
      !fits(d, 2, D) || !fits(d, 3, ((uint64_t)t + 1) * D))
    return ERR_SHAPE;
  const float *x = (const float *)d->binding_ptrs[0] + (size_t)t * D;
  const float *g = d->binding_ptrs[1], *b = d->binding_ptrs[2];
  float *y = (float *)d->binding_ptrs[3] + (size_t)t * D;
  float mean = 0.0f, var = 0.0f;
  for (uint32_t i = 0; i < D; ++i) mean += x[i];
  mean /= (float)D;
  for (uint32_t i = 0; i < D; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= (float)D;
  const float inv = 1.0f / sqrtf(var + 1e-5f);
  for (uint32_t i = 0; i < D; ++i) y[i] = (x[i] - mean) * inv * g[i] + b[i];
  return 0;
}

/* GPT-2's GELU (the tanh approximation). */
static float gelu(float x) {
  const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

/* The tiled matmul shared by linear, linear_qkv, linear_gelu and
 * linear_residual: y[M, N] = x[M, K] W[K, N] + b[N] (+ r[M, N]) (then
 * GELU).  Workgroup (X, Y) computes rows Y*TILE_M.. and columns X*TILE_N..
 * of y; the inner loop runs over TILE_N contiguous columns of W with a
 * fixed trip count, so the compiler vectorizes it.  With |planes| (3 for
 * linear_qkv) y is stored as [planes, M, N / planes]: column n of row m
 * goes to plane n / (N / planes), row m, column n % (N / planes) (the same
 * sums, another place). */
static int matmul(dstate_t *d, wstate_t *wg, int act, int residual,
                  uint32_t planes) {
  const uint32_t K = d->constants[0], N = d->constants[1];
  const uint32_t xb = 0, wb = 1, bb = 2, rb = 3, yb = residual ? 4 : 3;
  if (K == 0 || N == 0 || (planes && N % planes) ||
      d->workgroup_size_x != GPT_TILE_N ||
      d->workgroup_size_y != GPT_TILE_M || !fits(d, wb, (uint64_t)K * N) ||
      !fits(d, bb, N))
    return ERR_SHAPE;
  const uint64_t M = rows_of(d, xb, K);
  const uint64_t m0 = (uint64_t)wg->workgroup_id_y * GPT_TILE_M;
  const uint64_t n0 = (uint64_t)wg->workgroup_id_x * GPT_TILE_N;
  if (m0 >= M || n0 >= N) return ERR_SHAPE;
  const uint32_t tm = M - m0 < GPT_TILE_M ? (uint32_t)(M - m0) : GPT_TILE_M;
  const uint32_t tn = N - n0 < GPT_TILE_N ? (uint32_t)(N - n0) : GPT_TILE_N;
  if (!fits(d, yb, (planes ? M : m0 + tm) * N) ||
      (residual && !fits(d, rb, (m0 + tm) * N)))
    return ERR_SHAPE;
  const float *x = d->binding_ptrs[xb], *w = d->binding_ptrs[wb],
              *b = d->binding_ptrs[bb];
  float *y = d->binding_ptrs[yb];
  float acc[GPT_TILE_M][GPT_TILE_N];
  memset(acc, 0, sizeof(acc));
  if (tn == GPT_TILE_N) {
    for (uint32_t k = 0; k < K; ++k) {
      const float *wk = w + (size_t)k * N + n0;
      for (uint32_t i = 0; i < tm; ++i) {
        const float xv = x[(size_t)(m0 + i) * K + k];
        for (uint32_t j = 0; j < GPT_TILE_N; ++j) acc[i][j] += xv * wk[j];
      }
    }
  } else { /* the ragged last column tile */
    for (uint32_t k = 0; k < K; ++k) {
      const float *wk = w + (size_t)k * N + n0;
      for (uint32_t i = 0; i < tm; ++i) {
        const float xv = x[(size_t)(m0 + i) * K + k];
        for (uint32_t j = 0; j < tn; ++j) acc[i][j] += xv * wk[j];
      }
    }
  }
  if (planes) {
    const uint32_t P = N / planes;
    for (uint32_t i = 0; i < tm; ++i)
      for (uint32_t j = 0; j < tn; ++j) {
        const uint32_t n = (uint32_t)n0 + j;
        y[((size_t)(n / P) * M + m0 + i) * P + n % P] = acc[i][j] + b[n];
      }
    return 0;
  }
  for (uint32_t i = 0; i < tm; ++i) {
    float *yr = y + (size_t)(m0 + i) * N + n0;
    const float *rr =
        residual ? (const float *)d->binding_ptrs[rb] + (size_t)(m0 + i) * N + n0
                 : NULL;
    for (uint32_t j = 0; j < tn; ++j) {
      float v = acc[i][j] + b[n0 + j];
      if (act) v = gelu(v);
      if (rr) v += rr[j];
      yr[j] = v;
    }
  }
  return 0;
}

/* linear(x[M, K], W[K, N], b[N]; K, N) -> y[M, N] */
static int linear(dstate_t *d, wstate_t *wg) {
  return matmul(d, wg, 0, 0, 0);
}
/* linear_qkv(x[M, K], W[K, 3P], b[3P]; K, 3P) -> y[3, M, P]: linear's
 * sums in planes (q, k, v for the attention's projection). */
static int linear_qkv(dstate_t *d, wstate_t *wg) {
  return matmul(d, wg, 0, 0, 3);
}
/* linear_gelu(x, W, b; K, N) -> gelu(x W + b) */
static int linear_gelu(dstate_t *d, wstate_t *wg) {
  return matmul(d, wg, 1, 0, 0);
}
/* linear_residual(x, W, b, r[M, N]; K, N) -> r + x W + b */
static int linear_residual(dstate_t *d, wstate_t *wg) {
  return matmul(d, wg, 0, 1, 0);
}

/* logits(x[T, D], wte[V, D]; D, row) -> y[V]: y[n] = x[row] . wte[n] (the
 * projection tied to the token embedding).  Workgroup X computes TILE_N
 * logits. */
static int logits(dstate_t *d, wstate_t *wg) {
  const uint32_t D = d->constants[0], row = d->constants[1];
  if (D == 0 || d->workgroup_size_x != GPT_TILE_N ||
      !fits(d, 0, ((uint64_t)row + 1) * D))
    return ERR_SHAPE;
  const uint64_t V = rows_of(d, 1, D);
  const uint64_t n0 = (uint64_t)wg->workgroup_id_x * GPT_TILE_N;
  if (n0 >= V) return ERR_SHAPE;
  const uint32_t tn = V - n0 < GPT_TILE_N ? (uint32_t)(V - n0) : GPT_TILE_N;
  if (!fits(d, 2, n0 + tn)) return ERR_SHAPE;
  const float *x = (const float *)d->binding_ptrs[0] + (size_t)row * D;
  const float *w = d->binding_ptrs[1];
  float *y = d->binding_ptrs[2];
  for (uint32_t j = 0; j < tn; ++j) {
    const float *wn = w + (size_t)(n0 + j) * D;
    float acc[8] = {0};
    uint32_t k = 0;
    for (; k + 8 <= D; k += 8)
      for (uint32_t l = 0; l < 8; ++l) acc[l] += x[k + l] * wn[k + l];
    float s = 0.0f;
    for (; k < D; ++k) s += x[k] * wn[k];
    for (uint32_t l = 0; l < 8; ++l) s += acc[l];
    y[n0 + j] = s;
  }
  return 0;
}

/* attention(qkv[3, T, D], kv[2, C, D]; D, H, p0) -> y[T, D]: row t (at
 * position p0 + t) of head h attends to cache rows 0 .. p0+t (the causal
 * mask: later rows are never read), softmax(q k / sqrt(D/H)) v.
 * Workgroup (h, t); the scores live in the workgroup's scratch. */
static int attention(dstate_t *d, wstate_t *wg) {
  const uint32_t D = d->constants[0], H = d->constants[1],
                 p0 = d->constants[2];
  const uint32_t h = wg->workgroup_id_x, t = wg->workgroup_id_y;
  if (D == 0 || H == 0 || D % H != 0 || h >= H ||
      !fits(d, 0, ((uint64_t)t + 1) * D) ||
      !fits(d, 2, ((uint64_t)t + 1) * D))
    return ERR_SHAPE;
  const uint64_t C = rows_of(d, 1, 2 * (uint64_t)D), n = (uint64_t)p0 + t + 1;
  if (n > C) return ERR_POSITION;
  if (!wg->scratch || n > wg->scratch_size / 4) return ERR_SCRATCH;
  const uint32_t hd = D / H;
  const float *q = (const float *)d->binding_ptrs[0] + (size_t)t * D +
                   (size_t)h * hd; /* plane 0 of qkv */
  const float *keys = (const float *)d->binding_ptrs[1] + (size_t)h * hd;
  const float *vals = keys + (size_t)C * D;
  float *y = (float *)d->binding_ptrs[2] + (size_t)t * D + (size_t)h * hd;
  float *s = wg->scratch;
  const float scale = 1.0f / sqrtf((float)hd);
  float max = -INFINITY;
  for (uint64_t j = 0; j < n; ++j) {
    const float *k = keys + (size_t)j * D;
    float dot = 0.0f;
    for (uint32_t i = 0; i < hd; ++i) dot += q[i] * k[i];
    s[j] = dot * scale;
    if (s[j] > max) max = s[j];
  }
  float sum = 0.0f;
  for (uint64_t j = 0; j < n; ++j) {
    s[j] = expf(s[j] - max);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (uint32_t i = 0; i < hd; ++i) y[i] = 0.0f;
  for (uint64_t j = 0; j < n; ++j) {
    const float *v = vals + (size_t)j * D, p = s[j] * inv;
    for (uint32_t i = 0; i < hd; ++i) y[i] += p * v[i];
  }
  return 0;
}

/* argmax(logits[V]) -> token i32[1]: the first index of the largest. */
static int argmax(dstate_t *d, wstate_t *wg) {
  (void)wg;
  const uint64_t V = d->binding_lengths[0] / 4;
  if (V == 0 || !fits(d, 1, 1)) return ERR_SHAPE;
  const float *l = d->binding_ptrs[0];
  uint64_t best = 0;
  for (uint64_t i = 1; i < V; ++i)
    if (l[i] > l[best]) best = i;
  ((int32_t *)d->binding_ptrs[1])[0] = (int32_t)best;
  return 0;
}

/* put(token i32[1], seq i32[S]; index) -> seq (tied): seq[index] = token. */
static int put(dstate_t *d, wstate_t *wg) {
  (void)wg;
  const uint32_t index = d->constants[0];
  if (!fits(d, 0, 1) || !fits(d, 1, (uint64_t)index + 1) ||
      d->binding_lengths[2] < d->binding_lengths[1])
    return ERR_SHAPE;
  ((int32_t *)d->binding_ptrs[2])[index] =
      ((const int32_t *)d->binding_ptrs[0])[0];
  return 0;
}

static const hali_kernel_export_t exports[] = {
    {"embed", embed, 4, 3, {1, 1, 1}, 0},
    {"layernorm", layernorm, 4, 1, {1, 1, 1}, 0},
    {"linear", linear, 4, 2, {GPT_TILE_N, GPT_TILE_M, 1}, 0},
    {"linear_qkv", linear_qkv, 4, 2, {GPT_TILE_N, GPT_TILE_M, 1}, 0},
    {"linear_gelu", linear_gelu, 4, 2, {GPT_TILE_N, GPT_TILE_M, 1}, 0},
    {"linear_residual", linear_residual, 5, 2, {GPT_TILE_N, GPT_TILE_M, 1},
     0},
    {"logits", logits, 3, 2, {GPT_TILE_N, 1, 1}, 0},
    {"attention", attention, 3, 3, {1, 1, 1}, GPT_MAX_CONTEXT * 4},
    {"argmax", argmax, 2, 0, {1, 1, 1}, 0},
    {"put", put, 3, 1, {1, 1, 1}, 0},
};

static const hali_kernel_library_t library = {
    HALI_KERNEL_ABI_VERSION, "gpt_kernels",
    sizeof(exports) / sizeof(exports[0]), exports};

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version);

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version) {
  return max_version >= HALI_KERNEL_ABI_VERSION ? &library : NULL;
}
