/* Fuzz target: a text module (.hasm, HAL or tensor level) -> assemble,
 * passes, verify, encode, link, and run every scalar-argument function
 * under limits. */
#include <string.h>

#include "loader/hbc.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0; /* keep each input fast */
  if (size >= HALI_HBC_MAGIC_SIZE &&
      memcmp(data, HALI_HBC_MAGIC, HALI_HBC_MAGIC_SIZE) == 0)
    return 0; /* binary: load_binary's */
  hali_fuzz_load_and_run(data, size);
  return 0;
}
