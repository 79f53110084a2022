/* Fuzz target: the command line's .npy reader (tools/tensor.c). */
#include <stdlib.h>

#include "tests/fuzz/fuzz.h"
#include "tools/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tool_tensor_t t;
  hali_status_t s = tool_tensor_parse_npy(data, size, "fuzz.npy", &t);
  if (s) {
    if (!hali_status_message(s)) abort();
    hali_status_free(s);
    return 0;
  }
  /* What was read is consistent: its bytes are what its shape needs. */
  uint64_t n = 1;
  for (size_t d = 0; d < t.rank; ++d) n *= (uint64_t)t.shape[d];
  if (n * hali_element_type_byte_size(t.type) != t.size) abort();
  tool_tensor_free(&t);
  return 0;
}
