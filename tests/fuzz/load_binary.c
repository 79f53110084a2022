/* Fuzz target: a binary module (.hbc) -> read, passes, verify, encode,
 * link, and run every scalar-argument function under limits. */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Only what starts as a module: the magic is 8 bytes. */
  if (size < 8 || data[0] != 'H') return 0;
  hali_fuzz_load_and_run(data, size);
  return 0;
}
