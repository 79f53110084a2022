/* hali HAL — devices and their queue.
 *
 * Two CPU devices:
 *   local-sync  no threads.  Work runs inline: a submission whose wait fence
 *               is already reached runs before queue_* returns; one whose
 *               wait fence is not yet reached is parked and runs on the
 *               thread that signals the fence (from inside that signal
 *               call).  Deterministic; the default for tests.
 *   local-task  queue runner threads and a pool of worker threads (one
 *               runner per worker; default: one worker per core).  queue_*
 *               return at once; a runner takes any submission whose wait
 *               fence is reached (the oldest first), runs it and signals,
 *               so up to |workers| submissions that do not wait on each
 *               other run at the same time; dispatches are split across
 *               the workers, which serve several dispatches at once.
 *
 * Queue order: local-sync executes submissions strictly in the order they
 * were made, one at a time.  local-task orders them only by their fences:
 * a submission never starts before its wait fence is reached, and one
 * whose wait fence is reached does not wait for earlier submissions it
 * does not wait on (order dependent work with fences; that is what the
 * load-time passes do).  On both, each submission waits for its wait
 * fence, runs (command buffers in order, or an allocation), then signals
 * its signal fence.  If the wait fence fails, or a command fails, the signal fence
 * fails with that status (annotated) and the rest of that submission does
 * not run; later submissions still run (they see the failure only if they
 * wait on it).  Errors found at submission time (a command buffer not
 * finalized, a one-shot one submitted twice) are returned directly and
 * nothing is queued.
 *
 * The device owns its allocator.  Releasing the last reference drains the
 * queue (blocks until every submission has run — including ones waiting on
 * fences other threads have yet to signal) and joins all threads.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef HALI_HAL_DEVICE_H
#define HALI_HAL_DEVICE_H

#include "hal/allocator.h"
#include "hal/channel.h"
#include "hal/command_buffer.h"
#include "hal/fence.h"
#include "hal/stop.h"

typedef enum hali_hal_device_kind_e {
  HALI_HAL_DEVICE_LOCAL_SYNC = 0,
  HALI_HAL_DEVICE_LOCAL_TASK = 1,
} hali_hal_device_kind_t;

typedef struct hali_hal_device_params_t {
  hali_hal_device_kind_t kind;
  /* local-task only: worker threads; 0 = one per online core. */
  uint32_t worker_count;
  /* The allocator's max_bytes (0 = unlimited). */
  uint64_t max_bytes;
  /* Where buffer storage comes from (zeroed = the C library). */
  hali_hal_memory_hooks_t hooks;
  /* Collectives (hal/channel.h): how long one waits for every rank to
   * arrive; 0 = 10 s, negative = forever. */
  hali_timeout_ns_t collective_timeout_ns;
  /* The default channel (hali_hal_device_default_channel), retained; NULL =
   * hali_hal_channel_create_default's, made on first use. */
  hali_hal_channel_t *channel;
  /* Validation mode (hal/validate.h: 0 off, 1 fail, 2 warn). */
  uint32_t validate;
} hali_hal_device_params_t;

/* Defaults: local-sync, workers = cores, no memory limit. */
void hali_hal_device_params_initialize(hali_hal_device_params_t *out_params);
/* "local-sync" / "local-task". */
const char *hali_hal_device_kind_name(hali_hal_device_kind_t kind);
/* Parses a kind name; NOT_FOUND listing the known names otherwise. */
HALI_MUST_USE hali_status_t hali_hal_device_kind_parse(
    const char *name, hali_hal_device_kind_t *out_kind);

/* Creates a device (|params| NULL = defaults).  The caller owns
 * |*out_device|. */
HALI_MUST_USE hali_status_t hali_hal_device_create(
    const hali_hal_device_params_t *params, hali_hal_device_t **out_device);
void hali_hal_device_retain(hali_hal_device_t *device);
void hali_hal_device_release(hali_hal_device_t *device);

hali_hal_device_kind_t hali_hal_device_kind(const hali_hal_device_t *device);
/* The device's default channel (hal.channel.default): the params' channel,
 * or one made on first use by hali_hal_channel_create_default with the
 * params' collective timeout; the same channel every call.  The caller owns
 * a reference. */
HALI_MUST_USE hali_status_t hali_hal_device_default_channel(
    hali_hal_device_t *device, hali_hal_channel_t **out_channel);
/* Workers that run dispatches (1 for local-sync). */
uint32_t hali_hal_device_worker_count(const hali_hal_device_t *device);
/* local-task: how long runner 0 spins for new work the next time its
 * queue empties, in ns (adaptive, at most ~20 us; 0: it sleeps at once).
 * 0 on local-sync and on a single online core.  For tests and
 * benchmarks. */
int64_t hali_hal_device_runner_spin_ns(hali_hal_device_t *device);
/* The device's allocator, borrowed (retain to keep it past the device). */
hali_hal_allocator_t *hali_hal_device_allocator(const hali_hal_device_t *device);

/* Queues |command_buffers| (each retained until executed; each must be
 * finalized) to run after |wait_fence| and signal |signal_fence|.  Either
 * fence may be NULL (no wait / nothing to signal — a failure is then
 * dropped).  |count| may be 0: a pure wait -> signal barrier. */
HALI_MUST_USE hali_status_t hali_hal_device_queue_execute(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence,
    hali_hal_command_buffer_t *const *command_buffers, size_t count);
/* hali_hal_device_queue_execute on behalf of whoever owns |stop| (retained
 * until the submission completes; NULL: none).  Once the stop is requested
 * (or its deadline passes) the submission is abandoned with the stop's
 * status (hal/stop.h) on its signal fence: before it starts (local-task
 * runners look at waiting submissions every 20 ms; a parked
 * local-sync submission at the next pump, and at the latest when the
 * device is released), before each command and each workgroup, and inside
 * a bytecode kernel's workgroup at its next branch. */
HALI_MUST_USE hali_status_t hali_hal_device_queue_execute_stoppable(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence,
    hali_hal_command_buffer_t *const *command_buffers, size_t count,
    hali_hal_stop_t *stop);

/* Stream-ordered allocation.  Returns the buffer object at once, but its
 * storage is only committed when the allocation executes in queue order
 * (after |wait_fence|), just before |signal_fence| is signalled; until then
 * using it is FAILED_PRECONDITION.  If the allocator refuses (limit), the
 * signal fence fails with RESOURCE_EXHAUSTED.  The caller owns
 * |*out_buffer|. */
HALI_MUST_USE hali_status_t hali_hal_device_queue_alloca(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence, hali_hal_buffer_params_t params,
    hali_hal_device_size_t size, hali_hal_buffer_t **out_buffer);

/* Stream-ordered deallocation: frees the storage of |buffer| (an allocated
 * buffer, not a subspan: INVALID_ARGUMENT) when it executes in queue order,
 * then signals |signal_fence|.  The buffer object stays valid (and
 * uncommitted) until released; deallocating an uncommitted buffer fails the
 * signal fence with FAILED_PRECONDITION. */
HALI_MUST_USE hali_status_t hali_hal_device_queue_dealloca(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence, hali_hal_buffer_t *buffer);

/* Gives up on queued work that waits on fences: every submission not yet
 * running fails its signal fence with CANCELLED at once (local-task
 * runners also fail any they find waiting afterwards within ~20 ms).  For shutting down after an error
 * (releasing a device otherwise waits for all queued work). */
void hali_hal_device_abandon(hali_hal_device_t *device);

/* hali_hal_command_buffer_create for work on |device|: the command buffer
 * reports its recording to the device's tracer (if any), starting with
 * "[hal] command_buffer.create mode=M categories=C -> !hal.command_buffer#ID".
 * Same errors as hali_hal_command_buffer_create. */
HALI_MUST_USE hali_status_t hali_hal_device_create_command_buffer(
    hali_hal_device_t *device, hali_hal_command_buffer_mode_bits_t mode,
    hali_hal_command_category_bits_t categories,
    hali_hal_command_buffer_t **out_command_buffer);

/* hali_hal_fence_create_pending for work on |device|: the fence reports
 * what is done to it to the device's tracer (if any; hal/fence.h), starting
 * with "[hal] fence.create -> !hal.fence#ID".  Its storage (with its
 * semaphore's) comes from a pool of the device's and goes back there once
 * both are released, so a warm create/release allocates nothing; the fence
 * may outlive the device. */
HALI_MUST_USE hali_status_t hali_hal_device_create_fence(
    hali_hal_device_t *device, hali_hal_fence_t **out_fence);

/* The device's tracer when it takes lines, else NULL (also for a NULL
 * |device|): for hali_hal_fence_set_tracer on fences made otherwise. */
const hali_hal_tracer_t *hali_hal_device_tracer(
    const hali_hal_device_t *device);

/* Reports execution to |tracer| from now on (copied; NULL = off).  Set it
 * while the queue is idle. */
void hali_hal_device_set_tracer(hali_hal_device_t *device,
                                const hali_hal_tracer_t *tracer);

/* Whether queued work can finish without anyone else signalling: true when
 * a submission is running, or one that may run next (local-sync: the
 * oldest; local-task: any) has its wait fence reached (or failed, or is
 * being given up); false when the queue is empty or every waiting
 * submission waits on a fence nobody has signalled.  Used to tell a
 * deadlock from work in flight. */
bool hali_hal_device_queue_can_progress(hali_hal_device_t *device);

/* For deadlock detection: whether anything is queued or running
 * (|*out_pending|), and, when no queued work can progress
 * (hali_hal_device_queue_can_progress is false), the wait fence of the
 * oldest waiting submission (|*out_blocked_on|, retained; NULL when the
 * queue is empty or something runs or can start — including a submission
 * being given up, which a local-task runner fails within ~20 ms). */
void hali_hal_device_queue_state(hali_hal_device_t *device, bool *out_pending,
                                 hali_hal_fence_t **out_blocked_on);

/* Blocks until every submission made so far has executed, for at most
 * |timeout_ns|; DEADLINE_EXCEEDED naming the number still pending. */
HALI_MUST_USE hali_status_t hali_hal_device_wait_idle(
    hali_hal_device_t *device, hali_timeout_ns_t timeout_ns);

#endif /* HALI_HAL_DEVICE_H */
