/* hali HAL — buffers (see hal/buffer.h). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hal/buffer.h"

struct hali_hal_buffer_t {
  hali_ref_t ref;
  /* The allocated buffer underneath: |this| for an allocated buffer, else a
   * retained reference (subspans of subspans point at the root directly). */
  hali_hal_buffer_t *allocated;
  /* Allocated buffers only: the allocator (retained) and the storage, NULL
   * while uncommitted.  The storage pointer is published with release
   * ordering by commit so a thread that sees it also sees the zeroed
   * bytes. */
  hali_hal_allocator_t *allocator;
  _Atomic(uint8_t *) storage;
  hali_hal_device_size_t offset; /* within |allocated| */
  hali_hal_device_size_t length;
  hali_hal_memory_type_bits_t memory_types;
  hali_hal_buffer_usage_bits_t usage;
};

static void hali_hal_buffer_destroy(hali_ref_t *ref) {
  hali_hal_buffer_t *buffer = (hali_hal_buffer_t *)ref;
  if (buffer->allocated == buffer) {
    uint8_t *storage = atomic_load(&buffer->storage);
    if (storage)
      hali_hal_allocator_free_storage(buffer->allocator, storage,
                                      buffer->length);
    hali_hal_allocator_release(buffer->allocator);
  } else {
    hali_hal_buffer_release(buffer->allocated);
  }
  free(buffer);
}

static const hali_ref_vtable_t hali_hal_buffer_vtable = {
    .destroy = hali_hal_buffer_destroy,
};

hali_status_t hali_hal_buffer_create_uncommitted(
    hali_hal_allocator_t *allocator, hali_hal_buffer_params_t params,
    hali_hal_device_size_t size, hali_hal_buffer_t **out_buffer) {
  *out_buffer = NULL;
  if (params.memory_types & ~(uint32_t)HALI_HAL_MEMORY_TYPE_ALL)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown memory type bits 0x%x",
                            params.memory_types &
                                ~(uint32_t)HALI_HAL_MEMORY_TYPE_ALL);
  if (params.usage & ~(uint32_t)HALI_HAL_BUFFER_USAGE_ALL)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown buffer usage bits 0x%x",
                            params.usage & ~(uint32_t)HALI_HAL_BUFFER_USAGE_ALL);
  hali_hal_buffer_t *buffer = calloc(1, sizeof(*buffer));
  if (!buffer)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "out of host memory creating a buffer");
  hali_ref_init(&buffer->ref, HALI_TYPE_BUFFER, &hali_hal_buffer_vtable);
  buffer->allocated = buffer;
  buffer->allocator = allocator;
  hali_hal_allocator_retain(allocator);
  atomic_init(&buffer->storage, NULL);
  buffer->length = size;
  buffer->memory_types = params.memory_types;
  buffer->usage = params.usage;
  *out_buffer = buffer;
  return HALI_OK;
}

hali_status_t hali_hal_buffer_commit(hali_hal_buffer_t *buffer) {
  if (buffer->allocated != buffer)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "cannot commit a subspan");
  if (atomic_load(&buffer->storage))
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "buffer of %" PRIu64 " bytes is already committed",
                            buffer->length);
  uint8_t *storage = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_allocator_allocate_storage(
      buffer->allocator, buffer->length, &storage));
  atomic_store_explicit(&buffer->storage, storage, memory_order_release);
  return HALI_OK;
}

hali_status_t hali_hal_buffer_decommit(hali_hal_buffer_t *buffer) {
  if (buffer->allocated != buffer)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "cannot decommit a subspan");
  uint8_t *storage = atomic_exchange(&buffer->storage, NULL);
  if (!storage)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "buffer of %" PRIu64
                            " bytes is not committed (deallocated twice?)",
                            buffer->length);
  hali_hal_allocator_free_storage(buffer->allocator, storage, buffer->length);
  return HALI_OK;
}

hali_status_t hali_hal_buffer_subspan(hali_hal_buffer_t *buffer,
                                      hali_hal_device_size_t offset,
                                      hali_hal_device_size_t length,
                                      hali_hal_buffer_t **out_buffer) {
  *out_buffer = NULL;
  if (length == HALI_HAL_WHOLE_BUFFER && offset <= buffer->length)
    length = buffer->length - offset;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_validate_range(buffer, offset, length, "subspan"));
  hali_hal_buffer_t *span = calloc(1, sizeof(*span));
  if (!span)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "out of host memory creating a subspan");
  hali_ref_init(&span->ref, HALI_TYPE_BUFFER, &hali_hal_buffer_vtable);
  span->allocated = buffer->allocated;
  hali_hal_buffer_retain(span->allocated);
  atomic_init(&span->storage, NULL);
  span->offset = buffer->offset + offset;
  span->length = length;
  span->memory_types = buffer->memory_types;
  span->usage = buffer->usage;
  *out_buffer = span;
  return HALI_OK;
}

void hali_hal_buffer_retain(hali_hal_buffer_t *buffer) {
  if (buffer) hali_ref_retain(&buffer->ref);
}

void hali_hal_buffer_release(hali_hal_buffer_t *buffer) {
  if (buffer) hali_ref_release(&buffer->ref);
}

hali_hal_device_size_t hali_hal_buffer_length(const hali_hal_buffer_t *buffer) {
  return buffer->length;
}

hali_hal_device_size_t hali_hal_buffer_byte_offset(
    const hali_hal_buffer_t *buffer) {
  return buffer->offset;
}

hali_hal_buffer_t *hali_hal_buffer_allocated_buffer(
    const hali_hal_buffer_t *buffer) {
  return buffer->allocated;
}

hali_hal_memory_type_bits_t hali_hal_buffer_memory_types(
    const hali_hal_buffer_t *buffer) {
  return buffer->memory_types;
}

hali_hal_buffer_usage_bits_t hali_hal_buffer_usage(
    const hali_hal_buffer_t *buffer) {
  return buffer->usage;
}

bool hali_hal_buffer_is_committed(const hali_hal_buffer_t *buffer) {
  return atomic_load_explicit(&buffer->allocated->storage,
                              memory_order_acquire) != NULL;
}

hali_status_t hali_hal_buffer_validate_usage(
    const hali_hal_buffer_t *buffer, hali_hal_buffer_usage_bits_t required,
    const char *what) {
  if ((buffer->usage & required) == required) return HALI_OK;
  char need[96], have[96];
  return hali_status_make(
      HALI_STATUS_PERMISSION_DENIED,
      "%s: buffer usage %s lacks the required %s usage", what,
      hali_hal_buffer_usage_bits_format(buffer->usage, have, sizeof(have)),
      hali_hal_buffer_usage_bits_format(required & ~buffer->usage, need,
                                        sizeof(need)));
}

hali_status_t hali_hal_buffer_validate_range(const hali_hal_buffer_t *buffer,
                                             hali_hal_device_size_t offset,
                                             hali_hal_device_size_t length,
                                             const char *what) {
  if (hali_hal_range_fits(buffer->length, offset, length)) return HALI_OK;
  return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                          "%s: range [offset %" PRIu64 ", length %" PRIu64
                          "] exceeds the buffer length %" PRIu64,
                          what, offset, length, buffer->length);
}

hali_status_t hali_hal_buffer_resolve(hali_hal_buffer_t *buffer,
                                      hali_hal_device_size_t offset,
                                      hali_hal_device_size_t length,
                                      uint8_t **out_ptr) {
  *out_ptr = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_validate_range(buffer, offset, length, "access"));
  uint8_t *storage = atomic_load_explicit(&buffer->allocated->storage,
                                          memory_order_acquire);
  if (!storage)
    return hali_status_make(
        HALI_STATUS_FAILED_PRECONDITION,
        "buffer storage (%" PRIu64
        " bytes) is not committed: its queue_alloca has not executed yet or "
        "its queue_dealloca already has",
        buffer->allocated->length);
  *out_ptr = storage + buffer->offset + offset;
  return HALI_OK;
}

/* map_range without the HALI_HAL_WHOLE_BUFFER convenience (read and write
 * take exact lengths). */
static hali_status_t hali_hal_buffer_map_exact(hali_hal_buffer_t *buffer,
                                               hali_hal_device_size_t offset,
                                               hali_hal_device_size_t length,
                                               void **out_ptr) {
  *out_ptr = NULL;
  if (!(buffer->memory_types & HALI_HAL_MEMORY_TYPE_HOST_VISIBLE)) {
    char have[128];
    return hali_status_make(
        HALI_STATUS_PERMISSION_DENIED,
        "cannot map a buffer that is not HOST_VISIBLE (memory types %s)",
        hali_hal_memory_type_bits_format(buffer->memory_types, have,
                                         sizeof(have)));
  }
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_usage(
      buffer, HALI_HAL_BUFFER_USAGE_MAPPING, "map"));
  uint8_t *ptr = NULL;
  HALI_RETURN_IF_ERROR(hali_hal_buffer_resolve(buffer, offset, length, &ptr),
                       "mapping a buffer");
  *out_ptr = ptr;
  return HALI_OK;
}

hali_status_t hali_hal_buffer_map_range(hali_hal_buffer_t *buffer,
                                        hali_hal_device_size_t offset,
                                        hali_hal_device_size_t length,
                                        void **out_ptr) {
  if (length == HALI_HAL_WHOLE_BUFFER && offset <= buffer->length)
    length = buffer->length - offset;
  return hali_hal_buffer_map_exact(buffer, offset, length, out_ptr);
}

hali_status_t hali_hal_buffer_read(hali_hal_buffer_t *buffer,
                                   hali_hal_device_size_t offset, void *target,
                                   size_t length) {
  void *ptr = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_map_exact(buffer, offset, length, &ptr));
  if (length) memcpy(target, ptr, length);
  return HALI_OK;
}

hali_status_t hali_hal_buffer_write(hali_hal_buffer_t *buffer,
                                    hali_hal_device_size_t offset,
                                    const void *source, size_t length) {
  void *ptr = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_map_exact(buffer, offset, length, &ptr));
  if (length) memcpy(ptr, source, length);
  return HALI_OK;
}
