/* hali — the .hbc binary layout (doc/format.md is the full description).
 *
 *   offset  size  field
 *   0       8     magic  7f 'H' 'B' 'C' '\r' '\n' 1a '\n'
 *   8       2     major version (a newer major is rejected)
 *   10      2     minor version (a newer minor is rejected; older ones are
 *                 read; unknown sections are skipped)
 *   12      4     flags (0)
 *   16      4     payload length in bytes (everything after the header)
 *   20      4     CRC-32 (IEEE) of the payload
 *   24      ...   sections: u32 id, u32 length, |length| bytes
 *
 * All integers are little-endian.
 */
#ifndef HALI_LOADER_HBC_H
#define HALI_LOADER_HBC_H

#include <stddef.h>
#include <stdint.h>

#define HALI_HBC_MAGIC "\x7f" "HBC\r\n\x1a\n"
#define HALI_HBC_MAGIC_SIZE 8
#define HALI_HBC_HEADER_SIZE 24
#define HALI_HBC_VERSION_MAJOR 1
#define HALI_HBC_VERSION_MINOR 6

enum {
  HALI_HBC_SECTION_MODULE = 1,    /* u32 name string, u32 flags */
  HALI_HBC_SECTION_STRINGS = 2,   /* u32 count, then (u32 len, bytes)* */
  HALI_HBC_SECTION_FUNCTIONS = 3, /* u32 count, then functions */
  HALI_HBC_SECTION_DEBUG = 4,     /* source, names, lines */
  HALI_HBC_SECTION_EXECUTABLES = 6, /* see doc/format.md */
  HALI_HBC_SECTION_IMPORTS = 7, /* u32 count, (u32 function, u32 flags)* */
  HALI_HBC_SECTION_RODATA = 5,    /* u32 count, then (u32 name, u32 kind,
                                     u64 size, bytes)* */
  /* Minor 1: the tensor level and attributes (doc/format.md); written only
   * when a module has any. */
  HALI_HBC_SECTION_TENSOR = 8,
  /* Minor 3: module globals (doc/format.md); written only when a module
   * has any, after STRINGS and before FUNCTIONS. */
  HALI_HBC_SECTION_GLOBALS = 9,
  /* Minor 5: executable variants and their conditions (doc/format.md);
   * written only when an executable has either, after EXECUTABLES. */
  HALI_HBC_SECTION_VARIANTS = 10,
};
#define HALI_HBC_SECTION_LAST 10

#define HALI_HBC_NONE 0xffffffffu

/* CRC-32 (IEEE 802.3, as zlib's crc32) of |size| bytes: with carry-less
 * multiplication where the processor has it, else slicing by 8. */
uint32_t hali_crc32(const uint8_t *data, size_t size);
/* The same, always by the table (the tests compare the two). */
uint32_t hali_crc32_sliced(const uint8_t *data, size_t size);

#endif /* HALI_LOADER_HBC_H */
