/* hali HAL — the layout of a buffer, for code that must reach its bytes
 * without a call: the interpreter's scalar loads and stores
 * (vm/interp_loop.h).  Everything else goes through hal/buffer.h. */
#ifndef HALI_HAL_BUFFER_IMPL_H
#define HALI_HAL_BUFFER_IMPL_H

#include <stdatomic.h>

#include "hal/buffer.h"

/* hali_hal_buffer_t.scalar_access bits. */
enum {
  HALI_HAL_SCALAR_LOAD = 1u,  /* host-visible, mapping usage */
  HALI_HAL_SCALAR_STORE = 2u, /* ... and not read-only */
};

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
  /* Wrapped host memory (hali_hal_buffer_wrap_host): |allocator| is NULL,
   * |storage| is the caller's and |release| runs on destroy. */
  void (*release)(void *user);
  void *release_user;
  const char *read_only; /* what the bytes are; NULL = writable */
  /* Wrapped constant data only (hali_hal_buffer_wrap_constant): the
   * allocator whose tracer it reports to (retained; NULL = none). */
  hali_hal_allocator_t *traced_by;
  hali_hal_device_size_t offset; /* within |allocated| */
  hali_hal_device_size_t length;
  hali_hal_memory_type_bits_t memory_types;
  hali_hal_buffer_usage_bits_t usage;
  /* Allocated buffers under validation only (hal/validate.h): in-flight
   * accesses and written ranges, owned; NULL otherwise. */
  void *validate_state;
  /* HALI_HAL_SCALAR_* bits; set and read on the root only (a subspan's
   * accesses read its root's, so validation attaching later is seen),
   * decided at creation from the memory types, usage and read-only (which
   * never change) and cleared when validation attaches its state, so that a
   * validated buffer's scalar accesses take the reporting slow path. */
  uint8_t scalar_access;
  /* Binding-table slot placeholders only (hal/binding_table.h): slot + 1;
   * 0 for every other buffer.  Set on the root. */
  uint32_t slot;
};

/* The address of |size| bytes at |offset| for a scalar load (|need| =
 * HALI_HAL_SCALAR_LOAD) or store (HALI_HAL_SCALAR_STORE), or NULL when
 * hali_hal_buffer_scalar_ptr would fail: the same checks, inline (call it
 * for the error).  |size| is at most 8 and a length is a real allocation
 * (below 2^63), so offset + size cannot wrap once offset < length. */
static inline uint8_t *hali_hal_buffer_scalar_fast(const hali_hal_buffer_t *b,
                                                   int64_t offset,
                                                   uint32_t size,
                                                   unsigned need) {
  const uint64_t o = (uint64_t)offset; /* negative: huge, out of range */
  if (HALI_UNLIKELY(!(b->allocated->scalar_access & need) ||
                    o >= b->length ||
                    o + size > b->length))
    return NULL;
  uint8_t *storage =
      atomic_load_explicit(&b->allocated->storage, memory_order_acquire);
  if (HALI_UNLIKELY(!storage)) return NULL;
  return storage + b->offset + o;
}

#endif /* HALI_HAL_BUFFER_IMPL_H */
