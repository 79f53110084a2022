/* Fuzz target: a binary module (.hbc) -> read, passes, verify, encode,
 * link, and run every scalar-argument function under limits.  The input's
 * payload length and checksum are set to match its bytes first: a mutation
 * would otherwise almost always stop at the checksum (which has its own
 * tests), and never reach the section readers. */
#include <stdlib.h>
#include <string.h>

#include "loader/hbc.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < HALI_HBC_HEADER_SIZE || size > (1u << 20)) return 0;
  uint8_t *m = malloc(size);
  if (!m) return 0;
  memcpy(m, data, size);
  uint32_t len = (uint32_t)(size - HALI_HBC_HEADER_SIZE);
  uint32_t crc = hali_crc32(m + HALI_HBC_HEADER_SIZE, len);
  for (int i = 0; i < 4; ++i) {
    m[16 + i] = (uint8_t)(len >> (8 * i));
    m[20 + i] = (uint8_t)(crc >> (8 * i));
  }
  hali_fuzz_load_and_run(m, size);
  free(m);
  return 0;
}
