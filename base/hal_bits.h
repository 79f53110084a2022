/* hali — the HAL's vocabulary (base layer): memory types, buffer usage,
 * command buffer modes and categories, element types and encodings, the
 * rank limit.  Data every part shares — the HAL enforces it, the IR, the
 * verifier, the assembler and disassembler and the passes speak it — so it
 * lives below all of them and depends on nothing (doc/hal.md has the
 * semantics).
 *
 * Element types use IREE-style numeric codes:
 *   code = (numerical_type << 24) | bit_count
 * so i32 = 0x10000020 and f32 = 0x21000020 (table in doc/hal.md).  Every
 * element occupies ceil(bit_count / 8) bytes (i1 takes one byte: no
 * sub-byte packing).
 */
#ifndef HALI_BASE_HAL_BITS_H
#define HALI_BASE_HAL_BITS_H

#include <stdint.h>

/* Where memory lives and who can see it.  Recorded on every buffer; the
 * CPU devices back every type with host memory but still enforce the
 * rules (see doc/hal.md). */
typedef uint32_t hali_hal_memory_type_bits_t;
enum {
  HALI_HAL_MEMORY_TYPE_NONE = 0u,
  HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL = 1u << 0,
  HALI_HAL_MEMORY_TYPE_HOST_VISIBLE = 1u << 1,
  HALI_HAL_MEMORY_TYPE_HOST_COHERENT = 1u << 2,
  HALI_HAL_MEMORY_TYPE_HOST_CACHED = 1u << 3,
  HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE = 1u << 4,
  HALI_HAL_MEMORY_TYPE_TRANSIENT = 1u << 5,
  HALI_HAL_MEMORY_TYPE_ALL = (1u << 6) - 1,
};

/* What a buffer may be used for. */
typedef uint32_t hali_hal_buffer_usage_bits_t;
enum {
  HALI_HAL_BUFFER_USAGE_NONE = 0u,
  HALI_HAL_BUFFER_USAGE_TRANSFER = 1u << 0, /* fill/copy/update target/source */
  HALI_HAL_BUFFER_USAGE_DISPATCH = 1u << 1, /* bound to a dispatch */
  HALI_HAL_BUFFER_USAGE_MAPPING = 1u << 2,  /* mapped / read / written by host */
  HALI_HAL_BUFFER_USAGE_CONSTANT = 1u << 3, /* immutable after initialization */
  HALI_HAL_BUFFER_USAGE_ALL = (1u << 4) - 1,
};

typedef uint32_t hali_hal_command_buffer_mode_bits_t;
enum {
  /* Reusable: may be submitted any number of times (also concurrently). */
  HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE = 0u,
  /* One-shot: may be submitted once; a second submission is rejected. */
  HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT = 1u << 0,
};

typedef uint32_t hali_hal_command_category_bits_t;
enum {
  HALI_HAL_COMMAND_CATEGORY_TRANSFER = 1u << 0, /* fill, copy, update */
  HALI_HAL_COMMAND_CATEGORY_DISPATCH = 1u << 1, /* push_*, dispatch */
  HALI_HAL_COMMAND_CATEGORY_ANY = (1u << 2) - 1,
};

typedef uint32_t hali_hal_numerical_type_t;
enum {
  HALI_HAL_NUMERICAL_TYPE_UNKNOWN = 0x00u,
  HALI_HAL_NUMERICAL_TYPE_INTEGER = 0x10u, /* signless */
  HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED = 0x11u,
  HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED = 0x12u,
  HALI_HAL_NUMERICAL_TYPE_BOOLEAN = 0x13u,
  HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE = 0x21u,
  HALI_HAL_NUMERICAL_TYPE_FLOAT_BRAIN = 0x22u,
};

typedef uint32_t hali_hal_element_type_t;
#define HALI_HAL_ELEMENT_TYPE_VALUE(numerical_type, bit_count)                 \
  ((((uint32_t)(numerical_type)&0xFFu) << 24) | ((uint32_t)(bit_count)&0xFFu))

/* The element types every part of hali knows, as X(name, enum suffix,
 * numerical type, bits).  Names are what hali_hal_element_type_name prints
 * and hali_hal_element_type_parse accepts. */
#define HALI_HAL_ELEMENT_TYPES(X)                                              \
  X("i1", INT_1, HALI_HAL_NUMERICAL_TYPE_INTEGER, 1)                           \
  X("i8", INT_8, HALI_HAL_NUMERICAL_TYPE_INTEGER, 8)                           \
  X("i16", INT_16, HALI_HAL_NUMERICAL_TYPE_INTEGER, 16)                        \
  X("i32", INT_32, HALI_HAL_NUMERICAL_TYPE_INTEGER, 32)                        \
  X("i64", INT_64, HALI_HAL_NUMERICAL_TYPE_INTEGER, 64)                        \
  X("si8", SINT_8, HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED, 8)                  \
  X("si16", SINT_16, HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED, 16)               \
  X("si32", SINT_32, HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED, 32)               \
  X("si64", SINT_64, HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED, 64)               \
  X("u8", UINT_8, HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED, 8)                 \
  X("u16", UINT_16, HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED, 16)              \
  X("u32", UINT_32, HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED, 32)              \
  X("u64", UINT_64, HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED, 64)              \
  X("bool", BOOL_8, HALI_HAL_NUMERICAL_TYPE_BOOLEAN, 8)                        \
  X("f16", FLOAT_16, HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE, 16)                   \
  X("f32", FLOAT_32, HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE, 32)                   \
  X("f64", FLOAT_64, HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE, 64)                   \
  X("bf16", BFLOAT_16, HALI_HAL_NUMERICAL_TYPE_FLOAT_BRAIN, 16)

enum {
  HALI_HAL_ELEMENT_TYPE_NONE = 0,
#define HALI_X(name, id, nt, bits)                                             \
  HALI_HAL_ELEMENT_TYPE_##id = HALI_HAL_ELEMENT_TYPE_VALUE(nt, bits),
  HALI_HAL_ELEMENT_TYPES(HALI_X)
#undef HALI_X
};

static inline uint32_t hali_hal_element_type_bit_count(
    hali_hal_element_type_t type) {
  return type & 0xFFu;
}
static inline hali_hal_numerical_type_t hali_hal_element_type_numerical_type(
    hali_hal_element_type_t type) {
  return type >> 24;
}
/* Bytes per element in storage: ceil(bits / 8). */
static inline uint32_t hali_hal_element_type_byte_size(
    hali_hal_element_type_t type) {
  return (hali_hal_element_type_bit_count(type) + 7) / 8;
}

/* Encodings: how elements are laid out. */
typedef uint32_t hali_hal_encoding_type_t;
enum {
  HALI_HAL_ENCODING_TYPE_OPAQUE = 0u,
  HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR = 1u,
};

/* Dimensions are signed 64-bit (the VM's i64) and must be >= 0. */
typedef int64_t hali_hal_dim_t;

/* Upper bound on view rank. */
#define HALI_HAL_MAX_RANK 64

#endif /* HALI_BASE_HAL_BITS_H */
