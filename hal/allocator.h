/* hali HAL — the allocator: 64-byte aligned host memory with statistics and
 * an optional limit.
 *
 * Thread-safety: every function may be called from any thread; statistics
 * are updated under a lock.  A device owns one allocator; buffers retain the
 * allocator that made them, so an allocator lives until its last buffer is
 * released.
 */
#ifndef HALI_HAL_ALLOCATOR_H
#define HALI_HAL_ALLOCATOR_H

#include "hal/common.h"

/* Alignment of every allocation's host memory. */
#define HALI_HAL_ALLOCATOR_ALIGNMENT 64

/* Where buffer storage comes from (NULL functions: posix_memalign/free).
 * |alloc| returns |size| bytes aligned to |alignment| (a power of two) or
 * NULL; |free| gets back the pointer and the same size.  Called from any
 * thread that allocates or frees (queue threads included). */
typedef struct hali_hal_memory_hooks_t {
  void *(*alloc)(void *user, size_t size, size_t alignment);
  void (*free)(void *user, void *ptr, size_t size);
  void *user;
} hali_hal_memory_hooks_t;

typedef struct hali_hal_allocator_params_t {
  hali_hal_memory_hooks_t hooks;
  /* Upper bound on live bytes (the sum of the sizes of committed buffers);
   * 0 = unlimited.  An allocation that would exceed it fails with
   * RESOURCE_EXHAUSTED naming the sizes. */
  uint64_t max_bytes;
} hali_hal_allocator_params_t;

typedef struct hali_hal_buffer_params_t {
  hali_hal_memory_type_bits_t memory_types;
  hali_hal_buffer_usage_bits_t usage;
} hali_hal_buffer_params_t;

/* The buffers that carry tensors in from and out to the host (hali run,
 * the embedding API): device memory the host can map, usable by every
 * command. */
static inline hali_hal_buffer_params_t hali_hal_host_tensor_params(void) {
  hali_hal_buffer_params_t p = {
      HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE |
          HALI_HAL_MEMORY_TYPE_HOST_VISIBLE,
      HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH |
          HALI_HAL_BUFFER_USAGE_MAPPING};
  return p;
}

typedef struct hali_hal_allocator_statistics_t {
  uint64_t bytes_live;        /* bytes currently allocated */
  uint64_t bytes_peak;        /* high-water mark of bytes_live */
  uint64_t allocation_count;  /* allocations ever made */
  uint64_t allocations_live;  /* allocations not yet freed */
  uint64_t max_bytes;         /* the limit, 0 = unlimited */
} hali_hal_allocator_statistics_t;

/* Creates an allocator; |params| may be NULL for defaults.  The caller owns
 * |*out_allocator|. */
HALI_MUST_USE hali_status_t hali_hal_allocator_create(
    const hali_hal_allocator_params_t *params,
    hali_hal_allocator_t **out_allocator);
void hali_hal_allocator_retain(hali_hal_allocator_t *allocator);
void hali_hal_allocator_release(hali_hal_allocator_t *allocator);

/* Allocates a committed buffer of |size| bytes (zero-filled) with the
 * memory types and usage of |params|.  Errors: INVALID_ARGUMENT for unknown
 * bits, RESOURCE_EXHAUSTED beyond the limit or when the host is out of
 * memory.  The caller owns |*out_buffer|. */
HALI_MUST_USE hali_status_t hali_hal_allocator_allocate_buffer(
    hali_hal_allocator_t *allocator, hali_hal_buffer_params_t params,
    hali_hal_device_size_t size, hali_hal_buffer_t **out_buffer);

/* Starts a new high-water mark: bytes_peak = bytes_live. */
void hali_hal_allocator_reset_peak(hali_hal_allocator_t *allocator);

/* A snapshot of the statistics. */
void hali_hal_allocator_query_statistics(
    hali_hal_allocator_t *allocator,
    hali_hal_allocator_statistics_t *out_statistics);

/* Reports each buffer allocated by hali_hal_allocator_allocate_buffer to
 * |tracer|'s line callback (copied; NULL = off): "[hal] allocate N bytes
 * memory=TYPES usage=USAGE -> !hal.buffer#ID".  A device passes its own
 * tracer on to its allocator (hali_hal_device_set_tracer).  Set it before
 * other threads use the allocator; what |tracer| points at must outlive its
 * use. */
void hali_hal_allocator_set_tracer(hali_hal_allocator_t *allocator,
                                   const hali_hal_tracer_t *tracer);
/* The allocator's tracer when it takes lines, else NULL.  Buffers report
 * to their allocator's tracer (subspans and views: hal/buffer.h). */
const hali_hal_tracer_t *hali_hal_allocator_line_tracer(
    const hali_hal_allocator_t *allocator);

/* Changes the limit (0 = unlimited).  Live allocations are not affected. */
void hali_hal_allocator_set_max_bytes(hali_hal_allocator_t *allocator,
                                      uint64_t max_bytes);

/* ---- Internal: used by buffers to commit and free their storage. ---- */

/* Reserves |size| bytes against the statistics and the limit and returns
 * zeroed, 64-byte aligned memory of at least max(size, 1) bytes. */
HALI_MUST_USE hali_status_t hali_hal_allocator_allocate_storage(
    hali_hal_allocator_t *allocator, hali_hal_device_size_t size,
    uint8_t **out_storage);
/* Validation mode (hal/validate.h) for the buffers this allocator makes:
 * set by a validating device before use; 0 = off. */
void hali_hal_allocator_set_validate(hali_hal_allocator_t *allocator,
                                     uint8_t mode);
uint8_t hali_hal_allocator_validate_mode(const hali_hal_allocator_t *allocator);
/* Frees storage from hali_hal_allocator_allocate_storage of |size| bytes. */
void hali_hal_allocator_free_storage(hali_hal_allocator_t *allocator,
                                     uint8_t *storage,
                                     hali_hal_device_size_t size);

#endif /* HALI_HAL_ALLOCATOR_H */
