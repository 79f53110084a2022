/* hali HAL — buffers (see hal/buffer.h). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hal/buffer.h"
#include "hal/binding_table.h"
#include "hal/buffer_impl.h"
#include "hal/validate.h"
#include "base/alloc.h"

/* What scalar loads and stores may do with |root|'s bytes without a call
 * (hal/buffer_impl.h: the interpreter's inline path and
 * hali_hal_buffer_scalar_ptr's first test): everything they check but the
 * range and whether the storage is committed, decided when the root is made
 * and again when validation attaches its state (a validated buffer always
 * takes the slow path, which reports host accesses). */
static uint8_t scalar_access(const hali_hal_buffer_t *root) {
  if (!(root->memory_types & HALI_HAL_MEMORY_TYPE_HOST_VISIBLE) ||
      !(root->usage & HALI_HAL_BUFFER_USAGE_MAPPING) || root->validate_state)
    return 0;
  return HALI_HAL_SCALAR_LOAD |
         (root->read_only ? 0 : HALI_HAL_SCALAR_STORE);
}

void *hali_hal_buffer_validate_state(const hali_hal_buffer_t *buffer) {
  return buffer->allocated->validate_state;
}

void hali_hal_buffer_set_validate_state(hali_hal_buffer_t *buffer,
                                        void *state) {
  hali_hal_buffer_t *root = buffer->allocated;
  root->validate_state = state;
  root->scalar_access = scalar_access(root);
}


static void hali_hal_buffer_destroy(hali_ref_t *ref) {
  hali_hal_buffer_t *buffer = (hali_hal_buffer_t *)ref;
  if (buffer->allocated == buffer && !buffer->allocator) {
    if (buffer->release) buffer->release(buffer->release_user);
    hali_hal_allocator_release(buffer->traced_by);
  } else if (buffer->allocated == buffer) {
    uint8_t *storage = atomic_load(&buffer->storage);
    if (storage)
      hali_hal_allocator_free_storage(buffer->allocator, storage,
                                      buffer->length);
    hali_hal_allocator_release(buffer->allocator);
  } else {
    hali_hal_buffer_release(buffer->allocated);
  }
  if (HALI_UNLIKELY(buffer->validate_state != NULL))
    hali_hal_validate_buffer_free(buffer->validate_state);
  hali_free(buffer);
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
  hali_hal_buffer_t *buffer = hali_calloc(1, sizeof(*buffer));
  if (!buffer)
    return hali_status_annotate(hali_status_oom(), "creating a buffer");
  hali_ref_init(&buffer->ref, HALI_TYPE_BUFFER, &hali_hal_buffer_vtable);
  buffer->allocated = buffer;
  buffer->allocator = allocator;
  hali_hal_allocator_retain(allocator);
  atomic_init(&buffer->storage, NULL);
  buffer->length = size;
  buffer->memory_types = params.memory_types;
  buffer->usage = params.usage;
  buffer->scalar_access = scalar_access(buffer);
  uint8_t validate = hali_hal_allocator_validate_mode(allocator);
  if (HALI_UNLIKELY(validate)) {
    hali_hal_buffer_set_validate_state(
        buffer, hali_hal_validate_buffer_create_fresh(
                    (hali_hal_validate_mode_t)validate));
    if (!buffer->validate_state) {
      hali_hal_buffer_release(buffer);
      return hali_status_annotate(hali_status_oom(), "creating a buffer");
    }
  }
  *out_buffer = buffer;
  return HALI_OK;
}

hali_status_t hali_hal_buffer_wrap_host(hali_hal_buffer_params_t params,
                                        void *data,
                                        hali_hal_device_size_t length,
                                        const char *read_only,
                                        void (*release)(void *user),
                                        void *user,
                                        hali_hal_buffer_t **out_buffer) {
  *out_buffer = NULL;
  if (!data && length)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "wrapping NULL host memory of %" PRIu64 " bytes",
                            length);
  hali_hal_buffer_t *buffer = hali_calloc(1, sizeof(*buffer));
  if (!buffer)
    return hali_status_annotate(hali_status_oom(), "creating a buffer");
  hali_ref_init(&buffer->ref, HALI_TYPE_BUFFER, &hali_hal_buffer_vtable);
  buffer->allocated = buffer;
  /* Zero-length wraps still need a non-NULL storage to count as committed. */
  static uint8_t empty[1];
  atomic_init(&buffer->storage, data ? (uint8_t *)data : empty);
  buffer->length = length;
  buffer->memory_types = params.memory_types;
  buffer->usage = params.usage;
  buffer->read_only = read_only;
  buffer->scalar_access = scalar_access(buffer);
  buffer->release = release;
  buffer->release_user = user;
  *out_buffer = buffer;
  return HALI_OK;
}

/* hali_hal_buffer_scalar_ptr of a buffer under validation whose access is
 * otherwise allowed: the host-access check (hal/validate.h), then the
 * pointer. */
static __attribute__((noinline, cold)) hali_status_t
hali_hal_buffer_scalar_ptr_validated(hali_hal_buffer_t *buffer, int64_t offset,
                                     uint32_t size, bool write,
                                     uint8_t **out_ptr) {
  hali_hal_buffer_t *root = buffer->allocated;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_validate_host_access(
      root, root->validate_state,
      buffer->offset + (hali_hal_device_size_t)offset, size, write,
      write ? "store" : "load"));
  *out_ptr = atomic_load_explicit(&root->storage, memory_order_acquire) +
             buffer->offset + (hali_hal_device_size_t)offset;
  return HALI_OK;
}

hali_status_t hali_hal_buffer_scalar_ptr(hali_hal_buffer_t *buffer,
                                         int64_t offset, uint32_t size,
                                         bool write, uint8_t **out_ptr) {
  const hali_hal_buffer_t *root = buffer->allocated;
  uint8_t *storage =
      atomic_load_explicit(&root->storage, memory_order_acquire);
  /* One test for the common case; the slow path says what went wrong. */
  if (HALI_LIKELY(offset >= 0 &&
                  hali_hal_range_fits(buffer->length,
                                      (hali_hal_device_size_t)offset, size) &&
                  storage &&
                  (root->scalar_access & (write ? HALI_HAL_SCALAR_STORE
                                                : HALI_HAL_SCALAR_LOAD)))) {
    *out_ptr = storage + buffer->offset + (hali_hal_device_size_t)offset;
    return HALI_OK;
  }
  *out_ptr = NULL;
  const char *op = write ? "store" : "load";
  if (offset < 0 || !hali_hal_range_fits(buffer->length,
                                         (hali_hal_device_size_t)offset, size))
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s of %u bytes at offset %" PRId64
                            " is outside the buffer of %" PRIu64 " bytes",
                            op, size, offset, buffer->length);
  if (!storage)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "%s: buffer storage is not committed", op);
  if (!(buffer->memory_types & HALI_HAL_MEMORY_TYPE_HOST_VISIBLE))
    return hali_status_make(HALI_STATUS_PERMISSION_DENIED,
                            "%s: buffer is not host-visible", op);
  if (!(buffer->usage & HALI_HAL_BUFFER_USAGE_MAPPING))
    return hali_status_make(HALI_STATUS_PERMISSION_DENIED,
                            "%s: buffer lacks mapping usage", op);
  /* Validation: a tail call, so that the fast path above keeps its short
   * prologue (a call here would make every load save registers). */
  if (!(write && root->read_only))
    return hali_hal_buffer_scalar_ptr_validated(buffer, offset, size, write,
                                                out_ptr);
  /* Only a store into a read-only buffer is left. */
  return hali_status_make(HALI_STATUS_PERMISSION_DENIED,
                          "store of %u bytes at offset %" PRId64
                          ": buffer of %" PRIu64 " bytes is read-only (%s)",
                          size, offset, buffer->length, root->read_only);
}

hali_status_t hali_hal_buffer_check_writable(const hali_hal_buffer_t *buffer) {
  if (buffer->allocated->read_only)
    return hali_status_make(HALI_STATUS_PERMISSION_DENIED,
                            "buffer of %" PRIu64 " bytes is read-only (%s)",
                            buffer->length, buffer->allocated->read_only);
  return HALI_OK;
}

hali_status_t hali_hal_buffer_commit(hali_hal_buffer_t *buffer) {
  if (buffer->allocated != buffer)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "cannot commit a subspan");
  if (!buffer->allocator)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "cannot commit wrapped host memory");
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
  if (!buffer->allocator)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "cannot decommit wrapped host memory");
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
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_resolve_whole(buffer, offset, &length, "subspan"));
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_validate_range(buffer, offset, length, "subspan"));
  /* malloc and a zeroing store: glibc's calloc skips its per-thread cache,
   * and a program makes many subspans (one per tensor of a step). */
  hali_hal_buffer_t *span = hali_malloc(sizeof(*span));
  if (!span)
    return hali_status_annotate(hali_status_oom(), "creating a subspan");
  *span = (hali_hal_buffer_t){0};
  hali_ref_init(&span->ref, HALI_TYPE_BUFFER, &hali_hal_buffer_vtable);
  span->allocated = buffer->allocated;
  hali_hal_buffer_retain(span->allocated);
  atomic_init(&span->storage, NULL);
  span->offset = buffer->offset + offset;
  span->length = length;
  span->memory_types = buffer->memory_types;
  span->usage = buffer->usage;
  *out_buffer = span;
  const hali_hal_tracer_t *tracer = hali_hal_buffer_tracer(buffer);
  if (HALI_UNLIKELY(tracer != NULL))
    hali_hal_tracer_printf(tracer,
                           "[hal] subspan !hal.buffer#%u [%" PRIu64
                           ", +%" PRIu64 ") -> !hal.buffer#%u",
                           hali_hal_trace_id(buffer), offset, length,
                           hali_hal_trace_id(span));
  return HALI_OK;
}

const hali_hal_tracer_t *hali_hal_buffer_tracer(
    const hali_hal_buffer_t *buffer) {
  if (!buffer) return NULL;
  const hali_hal_buffer_t *a = buffer->allocated;
  return hali_hal_allocator_line_tracer(a->allocator ? a->allocator
                                                     : a->traced_by);
}

hali_status_t hali_hal_buffer_wrap_constant(
    hali_hal_allocator_t *traced_by, const char *label,
    hali_hal_buffer_params_t params, void *data, hali_hal_device_size_t length,
    const char *read_only, void (*release)(void *user), void *user,
    hali_hal_buffer_t **out_buffer) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_wrap_host(
      params, data, length, read_only, release, user, out_buffer));
  const hali_hal_tracer_t *tracer = hali_hal_allocator_line_tracer(traced_by);
  if (tracer) {
    hali_hal_allocator_retain(traced_by);
    (*out_buffer)->traced_by = traced_by;
    hali_hal_tracer_printf(tracer,
                           "[hal] constant %s %" PRIu64
                           " bytes -> !hal.buffer#%u",
                           label, length, hali_hal_trace_id(*out_buffer));
  }
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
  uint64_t end;
  if (hali_add_overflows_u64(offset, length, &end))
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: offset %" PRIu64 " + length %" PRIu64
                            " overflows 64 bits (the buffer length is %" PRIu64
                            ", !hal.buffer#%u)",
                            what, offset, length, buffer->length,
                            buffer->ref.id);
  return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                          "%s: range [offset %" PRIu64 ", length %" PRIu64
                          "] exceeds the buffer length %" PRIu64
                          " (!hal.buffer#%u)",
                          what, offset, length, buffer->length, buffer->ref.id);
}

hali_status_t hali_hal_buffer_resolve_whole(const hali_hal_buffer_t *buffer,
                                            hali_hal_device_size_t offset,
                                            hali_hal_device_size_t *length,
                                            const char *what) {
  if (*length != HALI_HAL_WHOLE_BUFFER) return HALI_OK;
  if (offset > buffer->length)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: offset %" PRIu64
                            " (to the end of the buffer) is past the buffer "
                            "length %" PRIu64 " (!hal.buffer#%u)",
                            what, offset, buffer->length, buffer->ref.id);
  *length = buffer->length - offset;
  return HALI_OK;
}

hali_status_t hali_hal_buffer_create_slot(uint32_t slot,
                                         hali_hal_buffer_params_t params,
                                         hali_hal_device_size_t length,
                                         hali_hal_buffer_t **out_buffer) {
  *out_buffer = NULL;
  if (slot >= HALI_HAL_MAX_SLOTS)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "binding slot %u: at most %d slots", slot,
                            HALI_HAL_MAX_SLOTS);
  if (params.usage & ~(uint32_t)HALI_HAL_BUFFER_USAGE_ALL)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown buffer usage bits 0x%x",
                            params.usage & ~(uint32_t)HALI_HAL_BUFFER_USAGE_ALL);
  if (length >= (uint64_t)1 << 62)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "binding slot %u of %" PRIu64 " bytes is too large",
                            slot, length);
  hali_hal_buffer_t *buffer = hali_calloc(1, sizeof(*buffer));
  if (!buffer)
    return hali_status_annotate(hali_status_oom(), "creating a binding slot");
  hali_ref_init(&buffer->ref, HALI_TYPE_BUFFER, &hali_hal_buffer_vtable);
  buffer->allocated = buffer;
  atomic_init(&buffer->storage, NULL); /* never any: the table's */
  buffer->length = length;
  buffer->memory_types = params.memory_types;
  buffer->usage = params.usage;
  buffer->slot = slot + 1;
  *out_buffer = buffer;
  return HALI_OK;
}

uint32_t hali_hal_buffer_slot(const hali_hal_buffer_t *buffer) {
  return buffer ? buffer->allocated->slot : 0;
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
                                               const char *what, bool write,
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
  if (HALI_UNLIKELY(buffer->allocated->validate_state != NULL))
    HALI_RETURN_IF_ERROR_PLAIN(hali_hal_validate_host_access(
        buffer->allocated, buffer->allocated->validate_state,
        buffer->offset + offset, length, write, what));
  *out_ptr = ptr;
  return HALI_OK;
}

hali_status_t hali_hal_buffer_map_range(hali_hal_buffer_t *buffer,
                                        hali_hal_device_size_t offset,
                                        hali_hal_device_size_t length,
                                        void **out_ptr) {
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_resolve_whole(buffer, offset, &length, "access"));
  return hali_hal_buffer_map_exact(buffer, offset, length, "map", false,
                                   out_ptr);
}

hali_status_t hali_hal_buffer_read(hali_hal_buffer_t *buffer,
                                   hali_hal_device_size_t offset, void *target,
                                   size_t length) {
  void *ptr = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_map_exact(buffer, offset, length, "read", false, &ptr));
  if (length) memcpy(target, ptr, length);
  return HALI_OK;
}

hali_status_t hali_hal_buffer_write(hali_hal_buffer_t *buffer,
                                    hali_hal_device_size_t offset,
                                    const void *source, size_t length) {
  void *ptr = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_check_writable(buffer));
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_map_exact(buffer, offset, length, "write", true, &ptr));
  if (length) memcpy(ptr, source, length);
  return HALI_OK;
}
