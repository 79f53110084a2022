/* Writes examples/mlp.safetensors: the weights, biases and input of the
 * flagship perceptron (64 -> 128 -> 10), the same numbers that
 * examples/mlp.hasm holds as rodata.
 *
 * They come from examples/mlp_gen.py's generator, re-done here in C so the
 * build needs no Python: a 32-bit linear congruential generator (Numerical
 * Recipes constants) seeded with 20240607, each value uniform in
 * [-scale, scale) from the top 24 bits, rounded to f32; drawn in the order
 * w1, b1, w2, b2, input.  tests/check_params.c checks every tensor against
 * mlp.hasm's rodata, bit for bit.
 *
 * The file is laid out for hali to use in place: the JSON header is padded
 * with spaces so that the data starts at a multiple of 64, and the tensors
 * follow one another with no gap in an order that keeps each at a
 * multiple of 64 (w1 32768 bytes, b1 512, w2 5120, input 256, b2 40), as
 * the reference safetensors reader also requires (no holes).  Shapes are
 * the flat ones examples/mlp_tensor.hasm declares.
 *
 *   examples/mlp_params OUT.safetensors       (make builds it)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { IN = 64, HIDDEN = 128, OUT = 10 };
#define SEED 20240607u

static uint32_t state;

static float uniform(double scale) {
  state = state * 1664525u + 1013904223u;
  double unit = (double)(state >> 8) / (double)(1u << 24); /* [0, 1) */
  return (float)((unit * 2.0 - 1.0) * scale);
}

static float w1[HIDDEN * IN], b1[HIDDEN], w2[OUT * HIDDEN], b2[OUT], x[IN];

static const struct {
  const char *name;
  const float *data;
  size_t count;
} tensors[] = {
    {"w1", w1, HIDDEN * IN}, {"b1", b1, HIDDEN}, {"w2", w2, OUT * HIDDEN},
    {"input", x, IN},        {"b2", b2, OUT},
};
#define TENSORS (sizeof(tensors) / sizeof(tensors[0]))

/* f32 little-endian, whatever the host's byte order. */
static int put_f32(FILE *f, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                  (uint8_t)(u >> 24)};
  return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  state = SEED;
  for (size_t i = 0; i < HIDDEN * IN; ++i) w1[i] = uniform(0.1);
  for (size_t i = 0; i < HIDDEN; ++i) b1[i] = uniform(0.1);
  for (size_t i = 0; i < OUT * HIDDEN; ++i) w2[i] = uniform(0.1);
  for (size_t i = 0; i < OUT; ++i) b2[i] = uniform(0.1);
  for (size_t i = 0; i < IN; ++i) x[i] = uniform(1.0);

  char header[1024];
  size_t at = 0, offset = 0;
  at += (size_t)snprintf(header + at, sizeof(header) - at, "{");
  for (size_t t = 0; t < TENSORS; ++t) {
    size_t bytes = tensors[t].count * 4;
    at += (size_t)snprintf(header + at, sizeof(header) - at,
                           "\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                           "\"data_offsets\":[%zu,%zu]},",
                           tensors[t].name, tensors[t].count, offset,
                           offset + bytes);
    offset += bytes;
  }
  at += (size_t)snprintf(header + at, sizeof(header) - at,
                         "\"__metadata__\":{\"generator\":"
                         "\"examples/mlp_params.c\",\"seed\":\"%u\"}}",
                         SEED);
  while ((8 + at) % 64) header[at++] = ' ';
  FILE *f = fopen(argv[1], "wb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = (uint8_t)((uint64_t)at >> (8 * i));
  int bad = fwrite(len, 1, 8, f) != 8 || fwrite(header, 1, at, f) != at;
  for (size_t t = 0; t < TENSORS && !bad; ++t)
    for (size_t i = 0; i < tensors[t].count && !bad; ++i)
      bad = put_f32(f, tensors[t].data[i]) != 0;
  if (fclose(f) != 0) bad = 1;
  if (bad) {
    perror(argv[1]);
    remove(argv[1]);
    return 1;
  }
  return 0;
}
