/* hali loader — parameter archives: weights kept in files beside a module.
 *
 * A parameter set maps scopes to archive files, and a (scope, key) pair to
 * one tensor in one of them.  `global @w : tensor<64x32xf32> = parameter
 * "model"::"w"` names such a tensor; the context resolves it through
 * hali_param_set_load when it is created.
 *
 * Formats (doc/embedding.md "Parameters"):
 *   .safetensors  an 8-byte little-endian header length N, N bytes of JSON
 *                 {"KEY": {"dtype": "F32", "shape": [..], "data_offsets":
 *                 [BEGIN, END]}, ..., "__metadata__": {..}}, then the data;
 *                 offsets count from the first byte after the header.
 *   .npy          one tensor; its key is the file name without directory
 *                 and extension ("weights/w1.npy" holds "w1").
 *
 * Files are mapped read-only (mmap) when added and their index is checked
 * then, entirely: a corrupt or truncated header, a range outside the file,
 * entries that overlap, a byte size that is not the shape's are errors
 * naming the file (and the key) — never a crash.  A mapping stays alive
 * while the set or any buffer aliasing it does.  (A file truncated by
 * someone else *after* it was mapped is beyond what a reader can check:
 * touching the lost pages raises SIGBUS, as for every mmap reader.)
 *
 * Thread-safety: add every file before the set is shared; afterwards the
 * set is immutable and find/load may run from any thread.
 */
#ifndef HALI_LOADER_PARAMS_H
#define HALI_LOADER_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hal_bits.h"
#include "base/status.h"
#include "hal/allocator.h"
#include "hal/buffer.h"
#include "vm/ir.h"

/* Data that starts at a multiple of this in the file is aliased, not
 * copied (the HAL's buffer alignment). */
#define HALI_PARAM_ALIGNMENT 64

typedef struct hali_param_set_s hali_param_set_t; /* ref-counted */

/* An empty set; the caller owns |*out_set|. */
HALI_MUST_USE hali_status_t hali_param_set_create(hali_param_set_t **out_set);
void hali_param_set_retain(hali_param_set_t *set);
void hali_param_set_release(hali_param_set_t *set);

/* Maps |path| and adds its tensors under |scope| (a scope may hold several
 * files; "" is a scope like any other).  The format comes from the
 * extension (.safetensors, .npy).  Errors:
 *   NOT_FOUND         the file cannot be opened ("PATH: cannot open: WHY")
 *   INVALID_ARGUMENT  an unknown extension; a key that another file of the
 *                     scope already holds (naming both files)
 *   DATA_LOSS         a corrupt index: truncated, a header length past the
 *                     end, bad JSON (with its line and column), a missing
 *                     or ill-typed field, overlapping entries, a byte size
 *                     that is not product(shape) * element size
 *   OUT_OF_RANGE      data_offsets outside the file, or END < BEGIN
 *   RESOURCE_EXHAUSTED  out of memory
 * The set is unchanged after an error. */
HALI_MUST_USE hali_status_t hali_param_set_add_file(hali_param_set_t *set,
                                                    const char *scope,
                                                    const char *path);

/* Whether |scope| has a file (a NULL |set| has none). */
bool hali_param_set_has_scope(const hali_param_set_t *set, const char *scope);

/* Number of files added (all scopes). */
size_t hali_param_set_file_count(const hali_param_set_t *set);

/* What the set knows of one tensor; pointers are borrowed from the set. */
typedef struct hali_param_info_s {
  const char *key;
  const char *path;     /* the archive file */
  const uint8_t *data;  /* its first byte, in the mapping */
  uint64_t length;      /* its byte size */
  uint64_t offset;      /* of |data| in the file */
  const uint8_t *mapping;    /* the whole file */
  uint64_t mapping_size;
  const char *dtype;    /* as the file spells it ("F32", "<f4") */
  hali_hal_element_type_t element_type; /* 0: no hali type for |dtype| */
  uint32_t rank;
  const int64_t *shape;
} hali_param_info_t;

/* Looks |scope|::|key| up; NOT_FOUND "no parameters bound for scope 'S'"
 * or "parameter 'S'::'K' is not in FILES". */
HALI_MUST_USE hali_status_t hali_param_set_find(const hali_param_set_t *set,
                                                const char *scope,
                                                const char *key,
                                                hali_param_info_t *out_info);

/* The |index|th tensor of |scope| (in the order the files were added and
 * each file lists them): for listing and the fuzz target.  NOT_FOUND for
 * an unbound scope, OUT_OF_RANGE past the last. */
HALI_MUST_USE hali_status_t hali_param_set_entry(const hali_param_set_t *set,
                                                 const char *scope,
                                                 size_t index,
                                                 hali_param_info_t *out_info);

/* The bytes of |scope|::|key|, checked against |type| (a tensor xtype:
 * element type and static shape).  The element types match when equal,
 * or when both are integers of one width and one of them is signless
 * (i32 takes I32 and U32), or i1 against BOOL.  The result is a read-only
 * HAL buffer aliasing the mapping when the data is HALI_PARAM_ALIGNMENT-
 * aligned (it keeps the mapping alive), else a copy in a new buffer of
 * |allocator| (which may be NULL only when no copy is needed; a non-NULL
 * one also traces the buffer: "[hal] constant parameter S::K ...").
 * Errors: NOT_FOUND (as find), INVALID_ARGUMENT (|type| is not a tensor,
 * has a dynamic dimension, or differs in element type, rank or a
 * dimension: the message names scope, key, file and both sides),
 * RESOURCE_EXHAUSTED from the copy.  The caller owns |*out_buffer|. */
HALI_MUST_USE hali_status_t hali_param_set_load(
    const hali_param_set_t *set, const char *scope, const char *key,
    const hali_ir_xtype_t *type, hali_hal_allocator_t *allocator,
    hali_hal_buffer_t **out_buffer);

/* The index of a .safetensors file of |size| bytes at |data| (|path| names
 * it in errors), checked as hali_param_set_add_file does; for the fuzz
 * target and tests.  Returns the number of tensors in |*out_count|. */
HALI_MUST_USE hali_status_t hali_param_check_safetensors(const uint8_t *data,
                                                         size_t size,
                                                         const char *path,
                                                         size_t *out_count);

#endif /* HALI_LOADER_PARAMS_H */
