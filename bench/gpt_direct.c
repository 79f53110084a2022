/* bench/gpt_direct -- the GPT example's kernels called in the same order
 * as examples/gpt/gpt.hasm's @forward, from a plain C loop: the baseline
 * for hali's per-token overhead (bench/gpt prints the ratio).
 *
 *   bench/gpt_direct KERNELS.so WEIGHTS.safetensors [--prompt=ID,...]
 *                    [--steps=N] [--rounds=N]
 *
 * The same library (through its hali_kernel_library_query table, so the
 * same functions and tile sizes), the same weight file (mapped, used in
 * place as hali does), the same buffers (one per activation, one KV cache
 * per layer), every workgroup of a dispatch run in linear order on this
 * thread, as local-sync does.  Prints the tokens (bench/gpt checks they
 * are hali's) and the best round's decode time per token:
 *
 *   tokens: 45 15 ...
 *   decode: 64 tokens, 5.01 ms, 12774.0 tokens/s, 78.28 us/token, cpu 78.01 us/token (best of 5)
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hali/kernel.h"
#include "examples/gpt/config.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (every thread): on a loaded machine the
 * single-threaded runs' CPU time per token is steadier than wall time. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *arg) {
  fprintf(stderr, "gpt_direct: %s%s\n", what, arg);
  exit(1);
}

/* ----- the weight file (gpt_gen's own layout: enough JSON for it) ----- */

static uint8_t *file_data;
static size_t file_size;
static const char *header;
static size_t header_len;
static uint64_t data_start;

typedef struct {
  float *p;
  size_t bytes;
} buf_t;

static buf_t tensor(const char *name) {
  char key[128];
  snprintf(key, sizeof(key), "\"%s\":{", name);
  const char *at = strstr(header, key);
  if (!at) die("no tensor in the weights named ", name);
  const char *off = strstr(at, "\"data_offsets\":[");
  unsigned long long b, e;
  if (!off || sscanf(off, "\"data_offsets\":[%llu,%llu]", &b, &e) != 2 ||
      e < b || data_start + e > file_size)
    die("bad entry for ", name);
  buf_t t = {(float *)(file_data + data_start + b), (size_t)(e - b)};
  return t;
}

static int meta(const char *name) {
  char key[64];
  snprintf(key, sizeof(key), "\"%s\":\"", name);
  const char *at = strstr(header, key);
  if (!at) die("no metadata in the weights named ", name);
  return atoi(at + strlen(key));
}

/* ----- dispatch: the kernel ABI, one thread ------------------------- */

static const hali_kernel_library_t *lib;
static void *scratch;

static const hali_kernel_export_t *kernel(const char *name) {
  for (uint32_t i = 0; i < lib->export_count; ++i)
    if (strcmp(lib->exports[i].name, name) == 0) return &lib->exports[i];
  die("no kernel in the library named ", name);
  return NULL;
}

static buf_t alloc(size_t bytes) {
  buf_t b = {aligned_alloc(64, (bytes + 63) / 64 * 64), bytes};
  if (!b.p) die("out of memory", "");
  memset(b.p, 0, bytes);
  return b;
}

/* Runs |k| over ceil(workload / its workgroup size) workgroups, as the
 * lowering records it. */
static void dispatch(const hali_kernel_export_t *k, uint32_t wx, uint32_t wy,
                     const buf_t *bind, uint32_t nbind, const uint32_t *consts,
                     uint32_t nconsts) {
  void *ptrs[8];
  size_t lens[8];
  for (uint32_t i = 0; i < nbind; ++i) ptrs[i] = bind[i].p, lens[i] = bind[i].bytes;
  hali_kernel_dispatch_state_t d = {0};
  d.workgroup_size_x = k->workgroup_size[0];
  d.workgroup_size_y = k->workgroup_size[1];
  d.workgroup_size_z = 1;
  d.workgroup_count_x = (wx + d.workgroup_size_x - 1) / d.workgroup_size_x;
  d.workgroup_count_y = (wy + d.workgroup_size_y - 1) / d.workgroup_size_y;
  d.workgroup_count_z = 1;
  d.constant_count = nconsts;
  d.constants = consts;
  d.binding_count = nbind;
  d.binding_ptrs = ptrs;
  d.binding_lengths = lens;
  hali_kernel_workgroup_state_t w = {0};
  w.scratch = k->scratch_size ? scratch : NULL;
  w.scratch_size = k->scratch_size;
  for (uint32_t y = 0; y < d.workgroup_count_y; ++y)
    for (uint32_t x = 0; x < d.workgroup_count_x; ++x) {
      w.workgroup_id_x = x;
      w.workgroup_id_y = y;
      int rc = k->fn(&d, &w);
      if (rc) {
        fprintf(stderr, "gpt_direct: kernel %s returned %d\n", k->name, rc);
        exit(1);
      }
    }
}

/* ----- the model ---------------------------------------------------- */

static int V, D, H, L, C;
static const hali_kernel_export_t *k_embed, *k_ln, *k_lin, *k_gelu, *k_res,
    *k_logits, *k_att, *k_argmax;
typedef struct {
  buf_t ln1w, ln1b, wqkv, bqkv, wo, bo, ln2w, ln2b, wfc, bfc, wp, bp, kv;
} layer_t;
static layer_t *layers;
static buf_t wte, wpe, lnfw, lnfb;
/* Activations, sized for the whole context (a prefill of T rows uses the
 * first T; each kernel is given the T rows it works on). */
static buf_t tokens, x[2], a, qkv, kvrows, att, f, logits, next;

static buf_t rows(buf_t b, uint32_t T, uint32_t width) {
  buf_t r = {b.p, (size_t)T * width * 4};
  return r;
}

/* @forward: T tokens at positions p0 .. p0+T-1; returns the argmax. */
static int32_t forward(uint32_t T, uint32_t p0) {
  const uint32_t d = (uint32_t)D, d3 = 3 * d, d4 = 4 * d;
  buf_t tk = {tokens.p, (size_t)T * 4};
  buf_t xs = rows(x[0], T, d), ys = rows(x[1], T, d), as = rows(a, T, d),
        qs = rows(qkv, T, d3), ts = rows(att, T, d), fs = rows(f, T, d4);
  {
    buf_t b[] = {tk, wte, wpe, xs};
    uint32_t c[] = {d, p0, 0};
    dispatch(k_embed, T, 1, b, 4, c, 3);
  }
  for (int l = 0; l < L; ++l) {
    layer_t *ly = &layers[l];
    uint32_t cd[] = {d}, c3[] = {d, d3}, c4[] = {d, d4}, cp[] = {d, d},
             cp2[] = {d4, d}, catt[] = {d, (uint32_t)H, p0};
    buf_t b1[] = {xs, ly->ln1w, ly->ln1b, as};
    dispatch(k_ln, T, 1, b1, 4, cd, 1);
    buf_t b2[] = {as, ly->wqkv, ly->bqkv, qs};
    dispatch(k_lin, d3, T, b2, 4, c3, 2);
    /* The keys and values (planes 1 and 2 of qkv [3, T, D]): the slice is
     * a copy, then the update copies its two runs into the cache rows
     * p0 .. p0+T-1 of keys and of values, as hali records them. */
    const size_t run = (size_t)T * d;
    memcpy(kvrows.p, (float *)qs.p + run, 2 * run * 4);
    memcpy((float *)ly->kv.p + (size_t)p0 * d, kvrows.p, run * 4);
    memcpy((float *)ly->kv.p + ((size_t)C + p0) * d, (float *)kvrows.p + run,
           run * 4);
    buf_t b4[] = {qs, ly->kv, ts};
    dispatch(k_att, (uint32_t)H, T, b4, 3, catt, 3);
    buf_t b5[] = {ts, ly->wo, ly->bo, xs, ys};
    dispatch(k_res, d, T, b5, 5, cp, 2);
    buf_t b6[] = {ys, ly->ln2w, ly->ln2b, as};
    dispatch(k_ln, T, 1, b6, 4, cd, 1);
    buf_t b7[] = {as, ly->wfc, ly->bfc, fs};
    dispatch(k_gelu, d4, T, b7, 4, c4, 2);
    buf_t b8[] = {fs, ly->wp, ly->bp, ys, xs};
    dispatch(k_res, d, T, b8, 5, cp2, 2);
  }
  {
    uint32_t cd[] = {d}, cl[] = {d, T - 1};
    buf_t b1[] = {xs, lnfw, lnfb, as};
    dispatch(k_ln, T, 1, b1, 4, cd, 1);
    buf_t b2[] = {as, wte, logits};
    dispatch(k_logits, (uint32_t)V, 1, b2, 3, cl, 2);
    buf_t b3[] = {logits, next};
    dispatch(k_argmax, 1, 1, b3, 2, NULL, 0);
  }
  return ((int32_t *)next.p)[0];
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: gpt_direct KERNELS.so WEIGHTS.safetensors "
                    "[--prompt=ID,...] [--steps=N] [--rounds=N]\n");
    return 2;
  }
  const char *prompt = "72,101,108,108,111";
  long steps = 32, nrounds = 1;
  for (int i = 3; i < argc; ++i) {
    if (strncmp(argv[i], "--prompt=", 9) == 0) prompt = argv[i] + 9;
    else if (strncmp(argv[i], "--steps=", 8) == 0) steps = atol(argv[i] + 8);
    else if (strncmp(argv[i], "--rounds=", 9) == 0) nrounds = atol(argv[i] + 9);
    else die("unknown argument ", argv[i]);
  }
  void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!so) die("", dlerror());
  const hali_kernel_library_t *(*query)(uint32_t) =
      (const hali_kernel_library_t *(*)(uint32_t))dlsym(
          so, "hali_kernel_library_query");
  if (!query || !(lib = query(HALI_KERNEL_ABI_VERSION)))
    die("no kernel table in ", argv[1]);
  int fd = open(argv[2], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die("cannot open ", argv[2]);
  file_size = (size_t)st.st_size;
  file_data = mmap(NULL, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (file_data == MAP_FAILED || file_size < 8) die("cannot map ", argv[2]);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= (uint64_t)file_data[i] << (8 * i);
  if (n > file_size - 8) die("bad header in ", argv[2]);
  char *h = malloc(n + 1);
  memcpy(h, file_data + 8, n);
  h[n] = 0;
  header = h;
  header_len = n;
  data_start = 8 + n;
  V = meta("vocab"), D = meta("d_model"), H = meta("heads");
  L = meta("layers"), C = meta("context");

  k_embed = kernel("embed"), k_ln = kernel("layernorm");
  k_lin = kernel("linear_qkv"), k_gelu = kernel("linear_gelu");
  k_res = kernel("linear_residual"), k_logits = kernel("logits");
  k_att = kernel("attention");
  k_argmax = kernel("argmax");
  scratch = aligned_alloc(64, k_att->scratch_size);
  wte = tensor("wte.weight"), wpe = tensor("wpe.weight");
  lnfw = tensor("ln_f.weight"), lnfb = tensor("ln_f.bias");
  layers = calloc((size_t)L, sizeof(layer_t));
  for (int l = 0; l < L; ++l) {
    char k[64];
#define T(field, suffix) \
  snprintf(k, sizeof(k), "h.%d.%s", l, suffix), layers[l].field = tensor(k)
    T(ln1w, "ln_1.weight"); T(ln1b, "ln_1.bias");
    T(wqkv, "attn.c_attn.weight"); T(bqkv, "attn.c_attn.bias");
    T(wo, "attn.c_proj.weight"); T(bo, "attn.c_proj.bias");
    T(ln2w, "ln_2.weight"); T(ln2b, "ln_2.bias");
    T(wfc, "mlp.c_fc.weight"); T(bfc, "mlp.c_fc.bias");
    T(wp, "mlp.c_proj.weight"); T(bp, "mlp.c_proj.bias");
#undef T
    layers[l].kv = alloc((size_t)2 * C * D * 4);
  }
  tokens = alloc((size_t)C * 4);
  x[0] = alloc((size_t)C * D * 4), x[1] = alloc((size_t)C * D * 4);
  a = alloc((size_t)C * D * 4), qkv = alloc((size_t)C * 3 * D * 4);
  kvrows = alloc((size_t)C * 2 * D * 4);
  att = alloc((size_t)C * D * 4), f = alloc((size_t)C * 4 * D * 4);
  logits = alloc((size_t)V * 4), next = alloc(4);

  int32_t ids[4096];
  uint32_t T = 0;
  for (const char *p = prompt; *p && T < 4096;) {
    char *end;
    ids[T++] = (int32_t)strtol(p, &end, 10);
    if (end == p) die("bad --prompt ", prompt);
    p = *end == ',' ? end + 1 : end;
  }
  if (T == 0 || T + steps > (uint32_t)C) die("the prompt plus the steps exceed the context", "");
  int32_t *out = malloc(((size_t)steps + 1) * 4);
  double best = 1e30, best_cpu = 1e30;
  for (long r = 0; r < nrounds; ++r) {
    memcpy(tokens.p, ids, T * 4);
    out[0] = forward(T, 0);
    double t0 = now_s(), c0 = cpu_s();
    for (long k = 1; k <= steps; ++k) {
      ((int32_t *)tokens.p)[0] = out[k - 1];
      out[k] = forward(1, T + (uint32_t)k - 1);
    }
    double t = now_s() - t0, c = cpu_s() - c0;
    if (t < best) best = t;
    if (c < best_cpu) best_cpu = c;
  }
  printf("tokens:");
  for (long k = 0; k <= steps; ++k) printf(" %d", out[k]);
  printf("\n");
  if (steps > 0)
    printf("decode: %ld tokens, %.2f ms, %.1f tokens/s, %.2f us/token, cpu "
           "%.2f us/token (best of %ld)\n",
           steps, best * 1e3, (double)steps / best, best / (double)steps * 1e6,
           best_cpu / (double)steps * 1e6,
           nrounds);
  return 0;
}
