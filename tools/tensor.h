/* hali run — tensors on the host: parsing --input/--expected_output
 * values, reading and writing .npy and raw files, printing, comparing.
 *
 * A host tensor owns its bytes (dense, row-major, little-endian); turning
 * it into a buffer view (and back) is the only place the HAL is involved.
 */
#ifndef HALI_TOOLS_TENSOR_H
#define HALI_TOOLS_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hal/hal.h"
#include "vm/ir.h"

typedef struct hali_tensor_s {
  hali_hal_element_type_t type;
  size_t rank;
  hali_hal_dim_t shape[HALI_HAL_MAX_RANK];
  uint8_t *data;
  size_t size; /* bytes */
} hali_tensor_t;

void hali_tensor_free(hali_tensor_t *t);

/* Parses "2x3xf32=1 2 3 4 5 6", "2x2xi32=[1 2][3 4]", "f32=1.5" (rank 0),
 * "@file.npy" or "4xf32=@raw.bin".  |what| names the flag in errors
 * ("--input #2"). */
HALI_MUST_USE hali_status_t hali_tensor_parse(const char *spec,
                                              const char *what,
                                              hali_tensor_t *out);

/* .npy (format 1.0/2.0/3.0, little-endian, C order) in and out. */
HALI_MUST_USE hali_status_t hali_tensor_read_npy(const char *path,
                                                 hali_tensor_t *out);
HALI_MUST_USE hali_status_t hali_tensor_write_npy(const hali_tensor_t *t,
                                                  FILE *f);

/* "2x3xf32=[1 2 3][4 5 6]", eliding after |max_elements| with "...". */
void hali_tensor_format(const hali_tensor_t *t, size_t max_elements,
                        hali_strbuf_t *sb);

/* Compares |actual| to |expected|: OK, or FAILED_PRECONDITION with a message
 * such as "element at index 3 (7.5) does not match the expected (8)". */
HALI_MUST_USE hali_status_t hali_tensor_compare(const hali_tensor_t *actual,
                                                const hali_tensor_t *expected,
                                                double f32_threshold,
                                                double f64_threshold);

/* Host tensor <-> buffer view.  The view's buffer is allocated from
 * |allocator| as host-visible device memory usable for everything. */
HALI_MUST_USE hali_status_t hali_tensor_to_view(const hali_tensor_t *t,
                                                hali_hal_allocator_t *allocator,
                                                hali_hal_buffer_view_t **out);
HALI_MUST_USE hali_status_t hali_tensor_from_view(hali_hal_buffer_view_t *v,
                                                  hali_tensor_t *out);


#endif /* HALI_TOOLS_TENSOR_H */
