/* hali — the names of the HAL's constants (base layer): memory types,
 * buffer usage, command-buffer modes and categories, element types,
 * encodings and status codes, as the text format writes them
 * (`memory(device_local|host_visible)`, doc/asm.md "Symbolic constants").
 * The assembler parses them, the IR printer prints them; the values are
 * those of base/hal_bits.h and hali/base.h, so a name and its number
 * assemble to the same bytes. */
#ifndef HALI_BASE_HAL_NAMES_H
#define HALI_BASE_HAL_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

/* The kinds of named constant; 0 is "none". */
typedef enum hali_hal_const_kind_e {
  HALI_HAL_CONST_NONE = 0,
  HALI_HAL_CONST_MEMORY,       /* memory(...): memory type bits */
  HALI_HAL_CONST_USAGE,        /* usage(...): buffer usage bits */
  HALI_HAL_CONST_MODE,         /* mode(...): command buffer mode bits */
  HALI_HAL_CONST_CATEGORY,     /* category(...): command category bits */
  HALI_HAL_CONST_ELEMENT_TYPE, /* element_type(f32) */
  HALI_HAL_CONST_ENCODING,     /* encoding(dense_row_major) */
  HALI_HAL_CONST_STATUS,       /* status(deadline_exceeded) */
  HALI_HAL_CONST_KIND_COUNT
} hali_hal_const_kind_t;

typedef struct hali_hal_const_name_s {
  const char *name;
  uint32_t value;
} hali_hal_const_name_t;

typedef struct hali_hal_const_kind_info_s {
  const char *keyword; /* "memory" */
  const char *what;    /* "memory type", for messages */
  bool bits;           /* a bit set: names joined by '|' */
  const hali_hal_const_name_t *names;
  uint32_t name_count;
} hali_hal_const_kind_info_t;

/* The table row of |kind|, NULL for NONE or out of range. */
const hali_hal_const_kind_info_t *hali_hal_const_kind_info(unsigned kind);
/* The kind whose keyword is the |len| bytes at |s|, or NONE. */
hali_hal_const_kind_t hali_hal_const_kind_lookup(const char *s, size_t len);
/* The value of name |s| (|len| bytes) of |kind|; false for an unknown name. */
bool hali_hal_const_name_lookup(hali_hal_const_kind_t kind, const char *s,
                                size_t len, uint32_t *out_value);
/* Appends "keyword(name|name)" for |value| of |kind| and returns true, or
 * appends nothing and returns false when names cannot spell it (unknown
 * bits, an unknown code). */
bool hali_hal_const_format(hali_hal_const_kind_t kind, uint32_t value,
                           hali_strbuf_t *sb);
/* Appends the names of |kind| separated by ", " (for error messages). */
void hali_hal_const_list_names(hali_hal_const_kind_t kind, hali_strbuf_t *sb);
/* Appends the keywords "memory(...), usage(...), ..." (for messages). */
void hali_hal_const_list_kinds(hali_strbuf_t *sb);

#endif /* HALI_BASE_HAL_NAMES_H */
