/* hali HAL — validation mode (doc/validation.md): hazards inside a command
 * buffer and between submissions, host access to storage queue work still
 * uses, out-of-bounds and forbidden accesses by C kernels (guard pages) and
 * reads of bytes nothing has written.
 *
 * Off by default.  A device created with a validation mode (device params)
 * marks its allocator, its command buffers and the buffers its work touches;
 * every hook elsewhere in the HAL is one test of such a mark (a byte in the
 * object, or a NULL pointer), so nothing changes while the mode is off.
 *
 * What a check finds is a FAILED_PRECONDITION status whose message starts
 * with "validation: " and names the commands (command buffer, index, op,
 * source line when the VM gave one), the buffer and the byte range, and what
 * was missing.  HALI_HAL_VALIDATE_FAIL returns it (from finalize, from the
 * submission, from the host access, or on the submission's signal fence);
 * HALI_HAL_VALIDATE_WARN prints it to stderr as "hali: warning: ..." and
 * carries on.
 *
 * Thread-safety: all state is guarded by one mutex inside validate.c; the
 * hooks may be called from any thread.
 */
#ifndef HALI_HAL_VALIDATE_H
#define HALI_HAL_VALIDATE_H

#include "hal/command_list.h"
#include "hal/fence.h"

typedef enum hali_hal_validate_mode_e {
  HALI_HAL_VALIDATE_OFF = 0,
  HALI_HAL_VALIDATE_FAIL = 1, /* a finding fails the operation */
  HALI_HAL_VALIDATE_WARN = 2, /* a finding is printed; work goes on */
} hali_hal_validate_mode_t;

/* Number of validating devices alive (relaxed): lets host-side hooks that
 * have no object to look at (fence awaits) skip all work while it is 0. */
extern _Atomic int hali_hal_validate_devices;

/* Devices: one call each when a validating device is created and
 * destroyed (the destroy call also forgets every submission of |device|,
 * which has drained its queue). */
void hali_hal_validate_device_created(void);
void hali_hal_validate_device_destroyed(hali_hal_device_t *device);

/* Turns a finding into what the mode asks for: FAIL returns |status|, WARN
 * prints it and returns OK (freeing it).  OK stays OK. */
HALI_MUST_USE hali_status_t hali_hal_validate_report(
    hali_hal_validate_mode_t mode, hali_status_t status);

/* ---- Command buffers (hal/command_buffer.c). */

/* Where the next recorded command comes from ("@main@12 (f.hasm:9)"), for
 * the messages; copied.  Only on a validating command buffer. */
void hali_hal_validate_set_label(hali_hal_command_buffer_t *cb,
                                 const char *label);
/* Called by append for every record of a validating command buffer:
 * attaches the pending label to command |index|.  Fails only for memory. */
HALI_MUST_USE hali_status_t hali_hal_validate_on_record(
    hali_hal_command_buffer_t *cb, size_t index);
/* At finalize: builds the command buffer's access list and reports the
 * first hazard between two commands not separated by an execution
 * barrier (check 1). */
HALI_MUST_USE hali_status_t hali_hal_validate_finalize(
    hali_hal_command_buffer_t *cb);
/* Frees what validation attached to |cb|. */
void hali_hal_validate_command_buffer_free(hali_hal_command_buffer_t *cb);

/* ---- Buffers (hal/buffer.c, hal/allocator.c). */

/* State attached to an allocated buffer: its in-flight queue accesses and,
 * for buffers a validating allocator made, which bytes have been written. */
typedef struct hali_hal_validate_buffer_t hali_hal_validate_buffer_t;
/* For a buffer a validating allocator creates: every byte unwritten. */
hali_hal_validate_buffer_t *hali_hal_validate_buffer_create_fresh(
    hali_hal_validate_mode_t mode);
void hali_hal_validate_buffer_free(hali_hal_validate_buffer_t *state);
/* Host access to [offset, offset + length) of the allocated buffer
 * |root| (whose state is |state|): |what| is "load", "store", "map",
 * "read" or "write".  Reports a submission not yet awaited that writes
 * the bytes (or, for host writes, reads them) (check 3), and marks the
 * bytes written for host writes and maps. */
HALI_MUST_USE hali_status_t hali_hal_validate_host_access(
    hali_hal_buffer_t *root, hali_hal_validate_buffer_t *state,
    uint64_t offset, uint64_t length, bool write, const char *what);

/* ---- Submissions (hal/device.c). */

/* A queue submission of |device| numbered |id|: checks it against every
 * submission not known to be complete that touches the same bytes and is
 * not before it in a fence wait chain (check 2), then records it.  Its
 * accesses are its command buffers', plus, for queue_alloca and
 * queue_dealloca, a write of all of |buffer| named |buffer_op| (NULL
 * |buffer| otherwise).
 * |*out_token| (may be NULL when nothing needs tracking) goes to
 * hali_hal_validate_submission_run and _release. */
HALI_MUST_USE hali_status_t hali_hal_validate_submit(
    hali_hal_device_t *device, hali_hal_validate_mode_t mode, uint64_t id,
    hali_hal_fence_t *wait_fence, hali_hal_fence_t *signal_fence,
    hali_hal_command_buffer_t *const *command_buffers, size_t count,
    hali_hal_buffer_t *buffer, const char *buffer_op, void **out_token);
/* Just before the submission's command buffers run: reads of bytes nothing
 * has written (check 5), then marks what they write. */
HALI_MUST_USE hali_status_t hali_hal_validate_submission_run(
    void *token, hali_hal_command_buffer_t *const *command_buffers,
    size_t count);
void hali_hal_validate_submission_release(void *token);

/* The host saw |fence| reached (an await or a query that returned ready):
 * every submission it waits for is complete for the host. */
void hali_hal_validate_observe_fence(hali_hal_fence_t *fence);
/* Every submission made to |device| so far is complete (wait_idle). */
void hali_hal_validate_observe_device(hali_hal_device_t *device);

/* ---- Guarded dispatches (check 4). */

/* Runs one dispatch through |run| with every binding in its own mapping,
 * guard pages on both sides, read-only bindings (per the export's
 * read_only_bindings) mapped read-only; copies the bytes in and the
 * written bindings back, and reports bytes written into the slack between
 * a binding's end and its guard page.  A fault in a guard page or a write
 * to a read-only binding fails the workgroup (see
 * hali_hal_validate_guarded_workgroup). */
HALI_MUST_USE hali_status_t hali_hal_validate_guarded_dispatch(
    hali_hal_dispatch_runner_t run, void *self,
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, hali_hal_stop_t *stop);
/* hali_hal_validate_guarded_dispatch as a dispatch runner: |self| points
 * at one of these, naming the device's own runner. */
typedef struct hali_hal_validate_runner_t {
  hali_hal_dispatch_runner_t run;
  void *self;
} hali_hal_validate_runner_t;
HALI_MUST_USE hali_status_t hali_hal_validate_runner(
    void *self, hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, hali_hal_stop_t *stop);
/* Whether any guarded dispatch is running (relaxed): workers then run
 * each workgroup through hali_hal_validate_guarded_workgroup. */
extern _Atomic int hali_hal_validate_guards_active;
/* hali_hal_executable_run_workgroup, but a SIGSEGV in a guard page (or a
 * write to a read-only binding) of a running guarded dispatch becomes a
 * FAILED_PRECONDITION naming the binding and the offset. */
HALI_MUST_USE hali_status_t hali_hal_validate_guarded_workgroup(
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_kernel_workgroup_state_t *workgroup, hali_hal_stop_t *stop);

#endif /* HALI_HAL_VALIDATE_H */
