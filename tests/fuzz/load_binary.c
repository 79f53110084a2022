/* Fuzz target: a binary module (.hbc) -> read, passes, verify, encode,
 * link, and run every scalar-argument function under limits; and the
 * round trip: a module that loads prints, as written, as text that assembles back to a module writing the same bytes (issue
 * 13: `hali dis | hali asm` never fails on what `hali run` accepts).  The input's
 * payload length and checksum are set to match its bytes first: a mutation
 * would otherwise almost always stop at the checksum (which has its own
 * tests), and never reach the section readers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "loader/hbc.h"
#include "loader/loader.h"
#include "tests/fuzz/fuzz.h"

/* write(read(m)) == write(asm(print(read(m)))), with and without debug
 * information; aborts (a finding) when not. */
static void round_trip(const uint8_t *data, size_t size) {
  hali_hbc_read_options_t ro = {0};
  hali_ir_module_t *a = NULL, *b = NULL;
  /* Only what loads (passes and verifier) is printed by hali dis. */
  hali_status_t s = hali_load_bytes(data, size, "fuzz", &a);
  hali_ir_module_free(a);
  a = NULL;
  if (!s) s = hali_hbc_read(data, size, &ro, &a);
  if (s) {
    hali_status_free(s);
    hali_ir_module_free(a);
    return;
  }
  char *text = hali_ir_print(a, true);
  if (!text) {
    hali_ir_module_free(a);
    return;
  }
  s = hali_asm_parse(text, strlen(text), a->source ? a->source : "fuzz", &b);
  if (s) {
    char *t = hali_status_to_string(s);
    fprintf(stderr, "round trip: the printed text does not assemble: %s\n%s\n",
            t ? t : "?", text);
    abort();
  }
  /* A stripped module prints with %rN names, which assemble to a module
   * with debug names: compare stripped writes only (`hali dis | hali asm
   * --strip`).  A module with debug names but no source file gets the
   * assembler's file name as its source: compare stripped writes too. */
  for (int strip = a->has_debug && a->source ? 0 : 1; strip < 2; ++strip) {
    hali_hbc_write_options_t wo = {.strip = strip != 0};
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    hali_status_t e1 = hali_hbc_write(a, &wo, &x, &nx);
    hali_status_t e2 = hali_hbc_write(b, &wo, &y, &ny);
    if (!e1 != !e2 || (!e1 && (nx != ny || memcmp(x, y, nx) != 0))) {
      fprintf(stderr, "round trip: %s bytes differ after dis | asm:\n%s\n",
              strip ? "stripped" : "debug", text);
      abort();
    }
    hali_status_free(e1);
    hali_status_free(e2);
    hali_free(x);
    hali_free(y);
  }
  hali_free(text);
  hali_ir_module_free(a);
  hali_ir_module_free(b);
}

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
  round_trip(m, size);
  hali_fuzz_load_and_run(m, size);
  free(m);
  return 0;
}
