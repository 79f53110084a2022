/* hali loader — the .npy header (numpy's format 1.0/2.0/3.0).
 *
 * One reader for every .npy hali takes: `hali run --input=@x.npy` (through
 * the public hali_npy_parse) and parameter archives (loader/params.c),
 * which map the file and alias its data rather than copy it.  The reader
 * only describes: where the data starts, its element type and shape.
 *
 * Accepted: little-endian (or byte-sized) data in C order, the element
 * types of base/hal_bits.h that numpy has ('b1', 'i1'..'i8', 'u1'..'u8',
 * 'f2', 'f4', 'f8', and 'V2' for bf16 as ml_dtypes writes it).  Errors are
 * INVALID_ARGUMENT "PATH: not a valid .npy file: WHY" (or "unsupported
 * .npy element type", ".npy data is N bytes but the shape needs M").
 */
#ifndef HALI_LOADER_NPY_H
#define HALI_LOADER_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/hal_bits.h"
#include "base/status.h"

#define HALI_NPY_MAX_RANK 64

typedef struct hali_npy_header_s {
  hali_hal_element_type_t element_type;
  size_t rank;
  int64_t shape[HALI_NPY_MAX_RANK];
  size_t data_offset; /* where the data starts in the file */
  size_t data_length; /* == product(shape) * element size == the rest */
} hali_npy_header_t;

/* Parses the header of the |size| bytes at |data| (the whole file; |path|
 * names it in errors) and checks that exactly the bytes the shape needs
 * follow it. */
HALI_MUST_USE hali_status_t hali_npy_parse_header(const uint8_t *data,
                                                  size_t size,
                                                  const char *path,
                                                  hali_npy_header_t *out);

/* The descr numpy writes for |type| ("f4", "i1", "b1", "V2"; signless
 * integers as signed), or NULL when it has none. */
const char *hali_npy_type_descr(hali_hal_element_type_t type);

#endif /* HALI_LOADER_NPY_H */
