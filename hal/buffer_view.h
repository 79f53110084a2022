/* hali HAL — buffer views: a buffer plus element type, encoding and shape.
 *
 * Element types use IREE-style numeric codes:
 *   code = (numerical_type << 24) | bit_count
 * so i32 = 0x10000020 and f32 = 0x21000020 (table in doc/hal.md).  Every
 * element occupies ceil(bit_count / 8) bytes (i1 takes one byte: no
 * sub-byte packing).
 *
 * Thread-safety: views are immutable after creation; refcounts are atomic.
 */
#ifndef HALI_HAL_BUFFER_VIEW_H
#define HALI_HAL_BUFFER_VIEW_H

#include "hal/buffer.h"

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
/* Whether |type| is one of HALI_HAL_ELEMENT_TYPES. */
bool hali_hal_element_type_is_known(hali_hal_element_type_t type);
/* "f32", ...; NULL for an unknown code. */
const char *hali_hal_element_type_name(hali_hal_element_type_t type);
/* Parses a name of |length| bytes ("f32"; "ui8" is accepted for "u8").
 * INVALID_ARGUMENT naming the text for an unknown name. */
HALI_MUST_USE hali_status_t hali_hal_element_type_parse(
    const char *text, size_t length, hali_hal_element_type_t *out_type);

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

/* Bytes needed by a dense row-major view of |shape| (|rank| dims; rank 0 is a
 * scalar) of |element_type|.  INVALID_ARGUMENT for a negative dim, an
 * unknown element type, an encoding other than dense row-major, or a rank
 * above HALI_HAL_MAX_RANK; OUT_OF_RANGE when the element count or byte size
 * overflows 64 bits (naming the dim at which it did). */
HALI_MUST_USE hali_status_t hali_hal_buffer_compute_view_size(
    size_t rank, const hali_hal_dim_t *shape,
    hali_hal_element_type_t element_type,
    hali_hal_encoding_type_t encoding_type,
    hali_hal_device_size_t *out_byte_length);

/* Creates a view of |buffer| (retained) with a copy of |shape|.  The view's
 * byte size must fit in the buffer (OUT_OF_RANGE naming both sizes).  The
 * caller owns |*out_view|. */
HALI_MUST_USE hali_status_t hali_hal_buffer_view_create(
    hali_hal_buffer_t *buffer, size_t rank, const hali_hal_dim_t *shape,
    hali_hal_element_type_t element_type,
    hali_hal_encoding_type_t encoding_type, hali_hal_buffer_view_t **out_view);
void hali_hal_buffer_view_retain(hali_hal_buffer_view_t *view);
void hali_hal_buffer_view_release(hali_hal_buffer_view_t *view);

/* Borrowed: valid while the view is. */
hali_hal_buffer_t *hali_hal_buffer_view_buffer(
    const hali_hal_buffer_view_t *view);
size_t hali_hal_buffer_view_rank(const hali_hal_buffer_view_t *view);
/* Dim |i| (< rank); 0 when out of range. */
hali_hal_dim_t hali_hal_buffer_view_dim(const hali_hal_buffer_view_t *view,
                                        size_t i);
const hali_hal_dim_t *hali_hal_buffer_view_shape(
    const hali_hal_buffer_view_t *view);
hali_hal_element_type_t hali_hal_buffer_view_element_type(
    const hali_hal_buffer_view_t *view);
hali_hal_encoding_type_t hali_hal_buffer_view_encoding_type(
    const hali_hal_buffer_view_t *view);
uint64_t hali_hal_buffer_view_element_count(const hali_hal_buffer_view_t *view);
hali_hal_device_size_t hali_hal_buffer_view_byte_length(
    const hali_hal_buffer_view_t *view);
/* Writes "2x3xf32" (shape then element type) into |buf|; returns |buf|. */
const char *hali_hal_buffer_view_format_type(const hali_hal_buffer_view_t *view,
                                             char *buf, size_t cap);

#endif /* HALI_HAL_BUFFER_VIEW_H */
