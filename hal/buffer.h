/* hali HAL — buffers: byte ranges of allocator memory.
 *
 * An *allocated* buffer owns its storage; a *subspan* aliases a range of
 * another buffer and retains the allocated buffer underneath, which stays
 * alive (and keeps its storage) while any subspan does.  Every buffer
 * records the memory types and usage of its allocation.
 *
 * Storage may be *uncommitted*: buffers from hali_hal_device_queue_alloca
 * get their storage when the allocation executes in queue order and lose it
 * when the matching dealloca executes.  Mapping, reading or writing an
 * uncommitted buffer is FAILED_PRECONDITION; so is a queue command that
 * touches one.
 *
 * Thread-safety: reference counts are atomic and the metadata is immutable,
 * so buffers may be shared across threads; the bytes themselves are not
 * synchronized — order host access against queue work with fences.
 */
#ifndef HALI_HAL_BUFFER_H
#define HALI_HAL_BUFFER_H

#include "hal/allocator.h"

/* Creates a subspan of |buffer| covering [offset, offset + length);
 * |length| may be HALI_HAL_WHOLE_BUFFER for "to the end".  OUT_OF_RANGE if
 * the range does not fit.  The subspan retains the allocated buffer; the
 * caller owns |*out_buffer|. */
HALI_MUST_USE hali_status_t hali_hal_buffer_subspan(
    hali_hal_buffer_t *buffer, hali_hal_device_size_t offset,
    hali_hal_device_size_t length, hali_hal_buffer_t **out_buffer);

/* The tracer |buffer| reports to (its allocator's; hal/allocator.h), or
 * NULL: subspans and views of a traced buffer print "[hal] subspan" and
 * "[hal] buffer_view.create" lines (doc/tracing.md).  Wrapped host memory
 * has no allocator, hence no tracer. */
const hali_hal_tracer_t *hali_hal_buffer_tracer(
    const hali_hal_buffer_t *buffer);
void hali_hal_buffer_retain(hali_hal_buffer_t *buffer);
void hali_hal_buffer_release(hali_hal_buffer_t *buffer);

/* Length in bytes. */
hali_hal_device_size_t hali_hal_buffer_length(const hali_hal_buffer_t *buffer);
/* Offset of this buffer's first byte in its allocated buffer (0 for an
 * allocated buffer). */
hali_hal_device_size_t hali_hal_buffer_byte_offset(
    const hali_hal_buffer_t *buffer);
/* The allocated buffer underneath (|buffer| itself if it is one); borrowed. */
hali_hal_buffer_t *hali_hal_buffer_allocated_buffer(
    const hali_hal_buffer_t *buffer);
hali_hal_memory_type_bits_t hali_hal_buffer_memory_types(
    const hali_hal_buffer_t *buffer);
hali_hal_buffer_usage_bits_t hali_hal_buffer_usage(
    const hali_hal_buffer_t *buffer);
/* Whether the storage is committed right now (see above). */
bool hali_hal_buffer_is_committed(const hali_hal_buffer_t *buffer);

/* Host pointer to [offset, offset + length) of |buffer| (length may be
 * HALI_HAL_WHOLE_BUFFER).  Requires HOST_VISIBLE memory and MAPPING usage
 * (PERMISSION_DENIED otherwise), a range inside the buffer (OUT_OF_RANGE)
 * and committed storage (FAILED_PRECONDITION).  The pointer stays valid
 * while the buffer is alive and committed; nothing needs unmapping. */
HALI_MUST_USE hali_status_t hali_hal_buffer_map_range(
    hali_hal_buffer_t *buffer, hali_hal_device_size_t offset,
    hali_hal_device_size_t length, void **out_ptr);
/* Copies |length| bytes at |offset| of |buffer| to |target| (same rules as
 * map_range). */
HALI_MUST_USE hali_status_t hali_hal_buffer_read(hali_hal_buffer_t *buffer,
                                                 hali_hal_device_size_t offset,
                                                 void *target, size_t length);
/* Copies |length| bytes from |source| to |offset| of |buffer| (same rules
 * as map_range). */
HALI_MUST_USE hali_status_t hali_hal_buffer_write(hali_hal_buffer_t *buffer,
                                                  hali_hal_device_size_t offset,
                                                  const void *source,
                                                  size_t length);

/* Checks that |buffer| has every bit of |required| usage; PERMISSION_DENIED
 * naming |what| (e.g. "dispatch binding 2") and the bits otherwise. */
HALI_MUST_USE hali_status_t hali_hal_buffer_validate_usage(
    const hali_hal_buffer_t *buffer, hali_hal_buffer_usage_bits_t required,
    const char *what);
/* Checks that [offset, offset + length) fits in |buffer|; OUT_OF_RANGE
 * naming |what|, the numbers and the buffer otherwise ("offset X + length Y
 * overflows 64 bits" when the end itself is past 2^64-1). */
HALI_MUST_USE hali_status_t hali_hal_buffer_validate_range(
    const hali_hal_buffer_t *buffer, hali_hal_device_size_t offset,
    hali_hal_device_size_t length, const char *what);
/* Turns a |*length| of HALI_HAL_WHOLE_BUFFER into "from |offset| to the
 * end" (other lengths are left alone); OUT_OF_RANGE naming |what| when
 * |offset| is past the end. */
HALI_MUST_USE hali_status_t hali_hal_buffer_resolve_whole(
    const hali_hal_buffer_t *buffer, hali_hal_device_size_t offset,
    hali_hal_device_size_t *length, const char *what);

/* ---- Internal: used by the allocator, the queue and devices. ---- */

/* Creates an allocated buffer without storage (retains |allocator|). */
HALI_MUST_USE hali_status_t hali_hal_buffer_create_uncommitted(
    hali_hal_allocator_t *allocator, hali_hal_buffer_params_t params,
    hali_hal_device_size_t size, hali_hal_buffer_t **out_buffer);
/* Gives an uncommitted allocated buffer its storage (FAILED_PRECONDITION if
 * it is a subspan or already committed). */
HALI_MUST_USE hali_status_t hali_hal_buffer_commit(hali_hal_buffer_t *buffer);

/* The interpreter's scalar access (hal.buffer.load/store): the address of
 * |size| bytes at |offset| (negative offsets are out of range), checking
 * bounds, commitment, host visibility and mapping usage, and for |write|
 * that the buffer is writable.  Errors name the offset, size and length. */
HALI_MUST_USE hali_status_t hali_hal_buffer_scalar_ptr(
    hali_hal_buffer_t *buffer, int64_t offset, uint32_t size, bool write,
    uint8_t **out_ptr);

/* Wraps |length| bytes of caller-owned host memory at |data| as a committed
 * buffer with |params| (no copy).  |release(user)| (may be NULL) runs when
 * the last reference goes, so the memory's owner can be kept alive by the
 * buffer.  A non-NULL |read_only| makes the buffer read-only and says what
 * the bytes are ("module constant data", "export @k binding 0, a
 * read-only input binding"); it is borrowed and must outlive the buffer.
 * Every write (host write, map for writing, store, and fill/copy/update
 * into it) then fails with PERMISSION_DENIED quoting it.  Such buffers
 * cannot be committed, decommitted or deallocated. */
HALI_MUST_USE hali_status_t hali_hal_buffer_wrap_host(
    hali_hal_buffer_params_t params, void *data, hali_hal_device_size_t length,
    const char *read_only, void (*release)(void *user), void *user,
    hali_hal_buffer_t **out_buffer);
/* hali_hal_buffer_wrap_host for constant data named |label| (the VM
 * passes "@rodata"): when |traced_by| (an allocator, may be NULL) has a
 * tracer, the buffer, its subspans and views report to it (the allocator
 * is retained; its tracer is read at each line) and the call reports
 * "[hal] constant LABEL N bytes -> !hal.buffer#ID".  |label| is only
 * printed. */
HALI_MUST_USE hali_status_t hali_hal_buffer_wrap_constant(
    hali_hal_allocator_t *traced_by, const char *label,
    hali_hal_buffer_params_t params, void *data, hali_hal_device_size_t length,
    const char *read_only, void (*release)(void *user), void *user,
    hali_hal_buffer_t **out_buffer);
/* Validation (hal/validate.h): the state of |buffer|'s allocated buffer
 * (NULL when nothing is tracked), and setting it (owned by the buffer from
 * then on: freed with hali_hal_validate_buffer_free when it dies). */
void *hali_hal_buffer_validate_state(const hali_hal_buffer_t *buffer);
void hali_hal_buffer_set_validate_state(hali_hal_buffer_t *buffer,
                                        void *state);
/* OK unless |buffer| (or the buffer it is a subspan of) is read-only. */
HALI_MUST_USE hali_status_t hali_hal_buffer_check_writable(
    const hali_hal_buffer_t *buffer);
/* Frees the storage of an allocated buffer (FAILED_PRECONDITION if it is a
 * subspan or not committed). */
HALI_MUST_USE hali_status_t hali_hal_buffer_decommit(hali_hal_buffer_t *buffer);
/* Host pointer to [offset, offset + length) without the memory-type and
 * usage checks that map_range does: range and commitment only.  For the
 * queue, which checks usage itself. */
HALI_MUST_USE hali_status_t hali_hal_buffer_resolve(
    hali_hal_buffer_t *buffer, hali_hal_device_size_t offset,
    hali_hal_device_size_t length, uint8_t **out_ptr);

#endif /* HALI_HAL_BUFFER_H */
