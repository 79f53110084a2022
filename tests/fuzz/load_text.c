/* Fuzz target: a text module (.hasm, HAL or tensor level) -> assemble,
 * passes, verify, encode, link, and run every scalar-argument function
 * under limits. */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0; /* keep each input fast */
  if (size >= 1 && data[0] == 'H') return 0; /* binary: load_binary's */
  hali_fuzz_load_and_run(data, size);
  return 0;
}
