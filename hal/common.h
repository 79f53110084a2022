/* hali HAL — definitions shared by every HAL header.
 *
 * The HAL is usable from C without the VM: include "hal/hal.h" and link
 * libhali.  Objects are reference counted (hali_ref_t first, atomic counts);
 * every fallible function returns a hali_status_t (NULL = OK) that the
 * caller owns.  See doc/hal.md for the semantics in prose.
 */
#ifndef HALI_HAL_COMMON_H
#define HALI_HAL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hal_bits.h"
#include "base/ref.h"
#include "base/checked.h"
#include "hali/base.h"

/* Byte offsets and lengths of device memory. */
typedef uint64_t hali_hal_device_size_t;

/* "The rest of the buffer" for subspan and binding lengths. */
#define HALI_HAL_WHOLE_BUFFER UINT64_MAX

/* Timeouts are relative, in nanoseconds: 0 polls, HALI_INFINITE (or any
 * negative value) waits forever. */
typedef int64_t hali_timeout_ns_t;
#define HALI_INFINITE ((hali_timeout_ns_t)-1)


typedef struct hali_hal_allocator_t hali_hal_allocator_t;
typedef struct hali_hal_buffer_t hali_hal_buffer_t;
typedef struct hali_hal_buffer_view_t hali_hal_buffer_view_t;
typedef struct hali_hal_command_buffer_t hali_hal_command_buffer_t;
typedef struct hali_hal_executable_t hali_hal_executable_t;
typedef struct hali_hal_semaphore_t hali_hal_semaphore_t;
typedef struct hali_hal_fence_t hali_hal_fence_t;
typedef struct hali_hal_device_t hali_hal_device_t;
typedef struct hali_hal_channel_t hali_hal_channel_t;

/* Where a device reports what it executes (tracing; see vm/trace.h for the
 * VM's implementation).  All callbacks may run on any thread: the
 * submitting thread, the queue thread or a worker. */
typedef struct hali_hal_tracer_t {
  void *user;
  /* Nanoseconds on the tracer's clock. */
  int64_t (*now)(void *user);
  /* A finished span of work: |cat| is "queue", "command_buffer" or
   * "dispatch"; |tid| 0 is the thread that submitted (local-sync) or the
   * queue thread (local-task, 1), workers are 2 + worker id; |args| is a
   * JSON object text or NULL. */
  void (*span)(void *user, const char *cat, const char *name, uint32_t tid,
               int64_t start_ns, int64_t end_ns, const char *args);
  /* A text line, "[hal] ..." (doc/tracing.md): an executed command
   * (bindings, constants), and each allocation and queue operation as it
   * is made (hali_hal_allocator_allocate_buffer,
   * hali_hal_device_queue_execute / _alloca / _dealloca), on the thread
   * that made it.  NULL: no lines. */
  void (*line)(void *user, const char *text);
} hali_hal_tracer_t;

/* The ref id of a HAL object for trace lines (0 for NULL). */
#define hali_hal_trace_id(object)                                              \
  ((object) ? ((const hali_ref_t *)(const void *)(object))->id : 0u)

/* Formats one line and hands it to |tracer|'s line callback; nothing when
 * |tracer| is NULL or takes no lines.  Lines longer than 1 KiB are cut. */
void hali_hal_tracer_printf(const hali_hal_tracer_t *tracer, const char *fmt,
                            ...) HALI_PRINTF(2, 3);

/* Writes "DEVICE_LOCAL|HOST_VISIBLE" (or "NONE") into |buf| of |cap| bytes
 * and returns |buf|. */
const char *hali_hal_memory_type_bits_format(hali_hal_memory_type_bits_t bits,
                                             char *buf, size_t cap);
/* Writes "TRANSFER|DISPATCH" (or "NONE") into |buf| and returns it. */
const char *hali_hal_buffer_usage_bits_format(hali_hal_buffer_usage_bits_t bits,
                                              char *buf, size_t cap);

/* True when [offset, offset + length) lies inside [0, size); never
 * overflows. */
static inline bool hali_hal_range_fits(hali_hal_device_size_t size,
                                       hali_hal_device_size_t offset,
                                       hali_hal_device_size_t length) {
  return offset <= size && length <= size - offset;
}

#endif /* HALI_HAL_COMMON_H */
