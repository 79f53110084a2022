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

/* Whether |type| is one of HALI_HAL_ELEMENT_TYPES. */
bool hali_hal_element_type_is_known(hali_hal_element_type_t type);
/* "f32", ...; NULL for an unknown code. */
const char *hali_hal_element_type_name(hali_hal_element_type_t type);
/* Parses a name of |length| bytes ("f32"; "ui8" is accepted for "u8").
 * INVALID_ARGUMENT naming the text for an unknown name. */
HALI_MUST_USE hali_status_t hali_hal_element_type_parse(
    const char *text, size_t length, hali_hal_element_type_t *out_type);


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
 * caller owns |*out_view|.  A traced buffer (hali_hal_buffer_tracer)
 * reports "[hal] buffer_view.create !hal.buffer#B SHAPExTYPE ->
 * !hal.buffer_view#V". */
HALI_MUST_USE hali_status_t hali_hal_buffer_view_create(
    hali_hal_buffer_t *buffer, size_t rank, const hali_hal_dim_t *shape,
    hali_hal_element_type_t element_type,
    hali_hal_encoding_type_t encoding_type, hali_hal_buffer_view_t **out_view);
/* The same without the trace line: for views made on a program's behalf
 * rather than by it (the C API's input tensors). */
HALI_MUST_USE hali_status_t hali_hal_buffer_view_create_untraced(
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
