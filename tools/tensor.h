/* hali run — tensors on the host: parsing --input/--expected_output
 * values, reading and writing .npy and raw files, printing, comparing.
 *
 * A host tensor owns its bytes (dense, row-major, little-endian); turning
 * it into a buffer view (and back) goes through the public API
 * (hali/hali.h), like everything else in the tool.
 */
#ifndef HALI_TOOLS_TENSOR_H
#define HALI_TOOLS_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hali/hali.h"

/* The tool's rank limit (the HAL's too). */
#define TOOL_TENSOR_MAX_RANK 64

typedef struct tool_tensor_s {
  hali_element_type_t type;
  size_t rank;
  int64_t shape[TOOL_TENSOR_MAX_RANK];
  uint8_t *data;
  size_t size; /* bytes */
} tool_tensor_t;

void tool_tensor_free(tool_tensor_t *t);

/* Parses "2x3xf32=1 2 3 4 5 6", "2x2xi32=[1 2][3 4]", "f32=1.5" (rank 0),
 * "@file.npy" or "4xf32=@raw.bin".  |what| names the flag in errors
 * ("--input #2"). */
HALI_MUST_USE hali_status_t tool_tensor_parse(const char *spec,
                                              const char *what,
                                              tool_tensor_t *out);

/* .npy (format 1.0/2.0/3.0, little-endian, C order) in and out. */
HALI_MUST_USE hali_status_t tool_tensor_read_npy(const char *path,
                                                 tool_tensor_t *out);
/* The same for |size| bytes already read; |path| names them in errors. */
HALI_MUST_USE hali_status_t tool_tensor_parse_npy(const uint8_t *data,
                                                  size_t size, const char *path,
                                                  tool_tensor_t *out);
HALI_MUST_USE hali_status_t tool_tensor_write_npy(const tool_tensor_t *t,
                                                  FILE *f);

/* Prints "2x3xf32=[1 2 3][4 5 6]" to |f|, eliding after |max_elements|
 * with "...". */
void tool_tensor_print(const tool_tensor_t *t, size_t max_elements, FILE *f);

/* Compares |actual| to |expected|: OK, or FAILED_PRECONDITION with a message
 * such as "element at index 3 (7.5) does not match the expected (8)". */
HALI_MUST_USE hali_status_t tool_tensor_compare(const tool_tensor_t *actual,
                                                const tool_tensor_t *expected,
                                                double f32_threshold,
                                                double f64_threshold);

/* Host tensor <-> buffer view (in host-visible memory of |device|). */
HALI_MUST_USE hali_status_t tool_tensor_to_view(const tool_tensor_t *t,
                                                hali_device_t *device,
                                                hali_buffer_view_t **out);
HALI_MUST_USE hali_status_t tool_tensor_from_view(const hali_buffer_view_t *v,
                                                  tool_tensor_t *out);

/* Reads a whole file (malloc'ed, NUL-terminated); NOT_FOUND "PATH: cannot
 * open: REASON" when it cannot be opened. */
HALI_MUST_USE hali_status_t tool_read_file(const char *path,
                                                uint8_t **out,
                                                size_t *out_size);

#endif /* HALI_TOOLS_TENSOR_H */
