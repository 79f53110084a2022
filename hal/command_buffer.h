/* hali HAL — command buffers: transfer and dispatch work recorded once and
 * replayed by a device queue.
 *
 * Recording validates every command at once (ranges with overflow-safe
 * arithmetic, alignment, usage bits, categories, dispatch interfaces), so
 * replay only re-checks what can change after recording: whether buffer
 * storage is committed (queue_alloca/dealloca).  Commands are stored as a
 * compact list of variable-size records (hal/command_list.h); referenced
 * buffers and executables are retained until the command buffer dies.
 *
 * Commands execute in order, each finishing before the next starts, so
 * execution_barrier is recorded (for tracing and future backends) but costs
 * nothing on the CPU devices.
 *
 * Thread-safety: recording is single-threaded (one thread at a time, no
 * internal locking); a finalized command buffer is immutable and may be
 * submitted from any thread, and replayed concurrently if reusable.
 */
#ifndef HALI_HAL_COMMAND_BUFFER_H
#define HALI_HAL_COMMAND_BUFFER_H

#include "hal/buffer.h"
#include "hal/channel.h"
#include "hal/executable.h"


/* One binding of push_descriptor_set. */
typedef struct hali_hal_buffer_binding_t {
  uint32_t ordinal;               /* binding slot, < HALI_HAL_MAX_BINDINGS */
  hali_hal_buffer_t *buffer;      /* borrowed; retained by the recording */
  hali_hal_device_size_t offset;  /* within |buffer| */
  hali_hal_device_size_t length;  /* or HALI_HAL_WHOLE_BUFFER */
} hali_hal_buffer_binding_t;

/* Creates an empty command buffer in the recording state.  INVALID_ARGUMENT
 * for unknown mode or category bits or no category.  The caller owns
 * |*out_command_buffer|. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_create(
    hali_hal_command_buffer_mode_bits_t mode,
    hali_hal_command_category_bits_t categories,
    hali_hal_command_buffer_t **out_command_buffer);
/* A device's cache of one destroyed command buffer, to record the next one
 * in: the record and resource arrays keep their capacity, so a program
 * that records one command buffer per step (a decode loop) allocates
 * nothing for it after the first step.  Shared (counted) by the device and
 * the command buffers made from it; lock-free (one atomic exchange per
 * create and per destroy).  Arrays past HALI_HAL_COMMAND_CACHE_MAX_BYTES
 * are freed, not kept. */
typedef struct hali_hal_command_buffer_cache_t hali_hal_command_buffer_cache_t;
enum { HALI_HAL_COMMAND_CACHE_MAX_BYTES = 1 << 20 };
HALI_MUST_USE hali_status_t hali_hal_command_buffer_cache_create(
    hali_hal_command_buffer_cache_t **out_cache);
void hali_hal_command_buffer_cache_release(
    hali_hal_command_buffer_cache_t *cache);
/* Whether |cache| holds a command buffer to reuse (tests). */
bool hali_hal_command_buffer_cache_has_spare(
    hali_hal_command_buffer_cache_t *cache);
/* hali_hal_command_buffer_create, reusing |cache|'s spare (when it has
 * one) and returning the command buffer to |cache| when it is destroyed
 * (NULL |cache|: exactly hali_hal_command_buffer_create). */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_create_cached(
    hali_hal_command_buffer_cache_t *cache,
    hali_hal_command_buffer_mode_bits_t mode,
    hali_hal_command_category_bits_t categories,
    hali_hal_command_buffer_t **out_command_buffer);
/* Reports each command recorded from now on to |tracer|'s line callback
 * (copied; NULL = off), one "[hal] command_buffer#ID ..." line per
 * successful record (doc/tracing.md) — all but update, whose line names the
 * module data it copies and is the VM's.  hali_hal_device_create_command_buffer
 * sets the device's tracer.  What |tracer| points at must outlive the
 * recording; call from the recording thread. */
void hali_hal_command_buffer_set_tracer(
    hali_hal_command_buffer_t *command_buffer, const hali_hal_tracer_t *tracer);
/* Validation mode (hal/validate.h): whether |command_buffer| was made by a
 * validating device, and where its next command comes from ("@f@3
 * (f.hasm:9)", copied) for validation messages; no-op when not
 * validating. */
bool hali_hal_command_buffer_validating(
    const hali_hal_command_buffer_t *command_buffer);
void hali_hal_command_buffer_set_label(hali_hal_command_buffer_t *command_buffer,
                                       const char *label);
void hali_hal_command_buffer_retain(hali_hal_command_buffer_t *command_buffer);
void hali_hal_command_buffer_release(hali_hal_command_buffer_t *command_buffer);

hali_hal_command_buffer_mode_bits_t hali_hal_command_buffer_mode(
    const hali_hal_command_buffer_t *command_buffer);
hali_hal_command_category_bits_t hali_hal_command_buffer_categories(
    const hali_hal_command_buffer_t *command_buffer);
bool hali_hal_command_buffer_is_finalized(
    const hali_hal_command_buffer_t *command_buffer);
/* Number of commands recorded so far. */
size_t hali_hal_command_buffer_command_count(
    const hali_hal_command_buffer_t *command_buffer);

/* Every recording function below fails with FAILED_PRECONDITION once the
 * command buffer is finalized, and with PERMISSION_DENIED when the command
 * buffer lacks the command's category.  A failed record leaves the command
 * buffer unchanged. */

/* Fills [offset, offset + length) of |target| with the low
 * |pattern_length| (1, 2 or 4) bytes of |pattern|, repeated little-endian.
 * |offset| and |length| must be multiples of |pattern_length|
 * (INVALID_ARGUMENT); the range must fit (OUT_OF_RANGE); |target| needs
 * TRANSFER usage (PERMISSION_DENIED).  Bytes outside the range are not
 * touched. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_fill(
    hali_hal_command_buffer_t *command_buffer, hali_hal_buffer_t *target,
    hali_hal_device_size_t offset, hali_hal_device_size_t length,
    uint32_t pattern, uint32_t pattern_length);
/* Copies |length| bytes.  Both buffers need TRANSFER usage; both ranges
 * must fit; when both are views of the same allocation the ranges must not
 * overlap (INVALID_ARGUMENT naming both ranges). */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_copy(
    hali_hal_command_buffer_t *command_buffer, hali_hal_buffer_t *source,
    hali_hal_device_size_t source_offset, hali_hal_buffer_t *target,
    hali_hal_device_size_t target_offset, hali_hal_device_size_t length);
/* Writes |length| bytes from |source| (copied now) into |target| at
 * |offset|.  Same range and usage rules as fill. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_update(
    hali_hal_command_buffer_t *command_buffer, const void *source,
    hali_hal_buffer_t *target, hali_hal_device_size_t offset,
    hali_hal_device_size_t length);
/* hali_hal_command_buffer_update naming where the bytes come from for the
 * trace line: "[hal] command_buffer#N update LABEL+LABEL_OFFSET ->
 * !hal.buffer#T+OFFSET LENGTH bytes" (the VM passes "@rodata" and the
 * offset within it; plain update passes "host" and 0).  |label| is only
 * printed. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_update_from(
    hali_hal_command_buffer_t *command_buffer, const void *source,
    const char *label, hali_hal_device_size_t label_offset,
    hali_hal_buffer_t *target, hali_hal_device_size_t offset,
    hali_hal_device_size_t length);
/* Sets push constants [offset, offset + count) (in 32-bit constants, not
 * bytes) for subsequent dispatches; the range must lie within
 * HALI_HAL_MAX_PUSH_CONSTANTS (OUT_OF_RANGE). */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_push_constants(
    hali_hal_command_buffer_t *command_buffer, uint32_t offset,
    const uint32_t *values, uint32_t count);
/* Binds |count| buffer ranges for subsequent dispatches.  Each ordinal must
 * be < HALI_HAL_MAX_BINDINGS (OUT_OF_RANGE), each range must fit its buffer
 * and each buffer needs DISPATCH usage (PERMISSION_DENIED naming the
 * binding).  A subspan's range is recorded (and retained) as the range of
 * its root: the same bytes. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_push_descriptor_set(
    hali_hal_command_buffer_t *command_buffer,
    const hali_hal_buffer_binding_t *bindings, uint32_t count);
/* push_descriptor_set of the one binding |ordinal| = [offset, offset +
 * length) of |buffer|: the same record, checks and errors, with the
 * common case (what the VM records for every binding) done inline. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_push_binding(
    hali_hal_command_buffer_t *command_buffer, uint32_t ordinal,
    hali_hal_buffer_t *buffer, hali_hal_device_size_t offset,
    hali_hal_device_size_t length);
/* Dispatches export |ordinal| of |executable| over a grid of
 * x * y * z workgroups (a zero count dispatches nothing).  The export's
 * bindings 0..binding_count-1 and constants 0..constant_count-1 must have
 * been pushed (FAILED_PRECONDITION naming the first missing one);
 * NOT_FOUND-style OUT_OF_RANGE for a bad ordinal. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_dispatch(
    hali_hal_command_buffer_t *command_buffer,
    hali_hal_executable_t *executable, uint32_t ordinal,
    uint32_t workgroup_count_x, uint32_t workgroup_count_y,
    uint32_t workgroup_count_z);
/* Orders everything before it before everything after it. */
/* Records collective |op| over |channel| (hal/channel.h): this rank sends
 * [send_offset, +send_length) of |send| and receives into [recv_offset,
 * +recv_length) of |recv|, with the lengths hali_hal_collective_lengths
 * gives for this rank (a range this rank does not use is ignored, and its
 * buffer may be NULL).  Needs the transfer category; the receive range must
 * be writable and must not overlap the send range. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_collective(
    hali_hal_command_buffer_t *command_buffer, hali_hal_channel_t *channel,
    const hali_hal_collective_t *op, hali_hal_buffer_t *send,
    hali_hal_device_size_t send_offset, hali_hal_device_size_t send_length,
    hali_hal_buffer_t *recv, hali_hal_device_size_t recv_offset,
    hali_hal_device_size_t recv_length);
/* Tells the peers of every collective recorded in |command_buffer| from
 * command |first| on that this rank will not run it, because of |reason|
 * (borrowed; hali_hal_channel_abort).  For the queue, when a submission
 * fails before its collectives run. */
void hali_hal_command_buffer_abort_collectives(
    hali_hal_command_buffer_t *command_buffer, size_t first,
    hali_status_t reason);
HALI_MUST_USE hali_status_t hali_hal_command_buffer_execution_barrier(
    hali_hal_command_buffer_t *command_buffer);
/* Ends recording; the command buffer becomes immutable and submittable.
 * FAILED_PRECONDITION if already finalized. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_finalize(
    hali_hal_command_buffer_t *command_buffer);

#endif /* HALI_HAL_COMMAND_BUFFER_H */
