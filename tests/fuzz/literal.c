/* Fuzz target: the command line's tensor literals ("2x3xf32=1 2 3 4 5 6",
 * "2x2xi32=[1 2][3 4]", tools/tensor.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096 || memchr(data, '@', size) || memchr(data, 0, size))
    return 0; /* '@' reads files; literals are C strings */
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
