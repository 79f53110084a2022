/* Fuzz target: the command line's tensor literals ("2x3xf32=1 2 3 4 5 6",
 * "2x2xi32=[1 2][3 4]", tools/tensor.c). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096 || memchr(data, '@', size) || memchr(data, 0, size))
    return 0; /* '@' reads files; literals are C strings */
  /* A literal may ask for any size (one value splats): keep the fuzzer's
   * inputs to shapes of at most 2^24 elements, which the reader allocates
   * before it reads the values. */
  uint64_t elems = 1, dim = 0;
  bool in_dim = false;
  for (size_t i = 0; i < size && data[i] != '='; ++i) {
    if (data[i] >= '0' && data[i] <= '9') {
      dim = dim * 10 + (data[i] - '0');
      in_dim = true;
      if (dim > (1u << 24)) return 0;
    } else if (data[i] == 'x' && in_dim) {
      elems *= dim ? dim : 1;
      if (elems > (1u << 24)) return 0;
      dim = 0;
      in_dim = false;
    } else {
      dim = 0;
      in_dim = false;
    }
  }
  char *spec = malloc(size + 1);
  if (!spec) return 0;
  memcpy(spec, data, size);
  spec[size] = 0;
  tool_tensor_t t;
  hali_status_t s = tool_tensor_parse(spec, "fuzz", &t);
  free(spec);
  if (s) {
    if (!hali_status_message(s)) abort();
    hali_status_free(s);
    return 0;
  }
  tool_tensor_free(&t);
  return 0;
}
