/* The GPT example's configuration, in one place.
 *
 * examples/gpt/gpt_gen.c writes the weights (.safetensors, whose
 * "__metadata__" records these numbers for examples/gpt/reference.py) and
 * the tensor-level program (.hasm, whose static shapes are these numbers)
 * from one gpt_config_t; `gpt_gen --d-model=512 --layers=8 ...` writes
 * another configuration (bench/gpt uses it for the scaling run).  The
 * kernels (examples/gpt/kernels.c) take every size from their push
 * constants and bindings and know none of these. */
#ifndef HALI_EXAMPLES_GPT_CONFIG_H_
#define HALI_EXAMPLES_GPT_CONFIG_H_

typedef struct gpt_config_s {
  int vocab;    /* byte-level: token ids 0..255 */
  int d_model;  /* embedding width */
  int heads;    /* attention heads; d_model / heads per head */
  int layers;   /* transformer blocks */
  int context;  /* positions (wpe rows, KV-cache rows) */
  int generate; /* tokens @generate produces (unrolled; no loops yet) */
  unsigned seed;
} gpt_config_t;

#define GPT_CONFIG_DEFAULT {256, 128, 4, 4, 128, 16, 20261201u}

/* The kernels' tile: one workgroup of @linear computes GPT_TILE_M rows by
 * GPT_TILE_N columns of its output (the module declares it as the export's
 * workgroup_size, so the workgroup count is ceil(N / TILE_N) x
 * ceil(M / TILE_M)). */
#define GPT_TILE_N 32
#define GPT_TILE_M 4
/* Scores one attention workgroup can hold (its scratch): the longest
 * context the kernels accept. */
#define GPT_MAX_CONTEXT 4096

#endif
