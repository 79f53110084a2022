/* hali — value types of registers, parameters and results. */
#ifndef HALI_BASE_TYPES_H
#define HALI_BASE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The numeric values are part of the binary format (doc/format.md). */
typedef uint8_t hali_type_t;
enum {
  HALI_TYPE_NONE = 0,
  HALI_TYPE_I32 = 1,
  HALI_TYPE_I64 = 2,
  HALI_TYPE_F32 = 3,
  HALI_TYPE_F64 = 4,
  /* Tensor level only (doc/passes.md): a tensor value whose element type
   * and shape are in the function's reg_xtypes.  Never valid after the
   * passes, so hali_type_is_valid rejects it. */
  HALI_TYPE_TENSOR = 8,
  /* Tensor level only: an `index` scalar.  A 64-bit integer on the host
   * (an i64 register once stream-to-hal has run, i64 at the ABI) and one
   * 32-bit push constant when passed to a kernel (materialize-interfaces
   * rewrites the export's parameter to i32, the type the kernel gets). */
  HALI_TYPE_INDEX = 9,
  /* Reference types live in the ref bank. */
  HALI_TYPE_REF_FIRST = 16,
  HALI_TYPE_DEVICE = 16,
  HALI_TYPE_ALLOCATOR = 17,
  HALI_TYPE_BUFFER = 18,
  HALI_TYPE_BUFFER_VIEW = 19,
  HALI_TYPE_COMMAND_BUFFER = 20,
  HALI_TYPE_FENCE = 21,
  HALI_TYPE_EXECUTABLE = 22,
  HALI_TYPE_CHANNEL = 23, /* format 1.5: a group of ranks (doc/collectives.md) */
  HALI_TYPE_REF_LAST = 23,
  /* Only in op signatures: any ref type. */
  HALI_TYPE_ANY_REF = 31,
};

static inline bool hali_type_is_ref(hali_type_t t) {
  return t >= HALI_TYPE_REF_FIRST;
}
static inline bool hali_type_is_valid(hali_type_t t) {
  return (t >= HALI_TYPE_I32 && t <= HALI_TYPE_F64) ||
         (t >= HALI_TYPE_REF_FIRST && t <= HALI_TYPE_REF_LAST);
}
/* Valid in a module as written (before the passes). */
static inline bool hali_type_is_valid_tensor_level(hali_type_t t) {
  return hali_type_is_valid(t) || t == HALI_TYPE_TENSOR ||
         t == HALI_TYPE_INDEX;
}
/* "i32", "!hal.buffer", ... ; "?" for an invalid type. */
const char *hali_type_name(hali_type_t t);
/* Parses a type name of length |len|; HALI_TYPE_NONE if unknown. */
hali_type_t hali_type_parse(const char *s, size_t len);
/* Signature letter <-> type (see vm/ops.def). */
hali_type_t hali_type_from_letter(char c);

#endif /* HALI_BASE_TYPES_H */
