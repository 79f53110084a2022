/* hali HAL — timeline semaphores.
 *
 * A semaphore holds a 64-bit payload that only moves forward, or a failure.
 * Signalling sets the payload to a larger value and wakes every waiter whose
 * value has been reached.  Failing stores a status: the FIRST failure is
 * kept for the semaphore's lifetime (later ones are dropped) and every
 * waiter, present or future, and every query receives a clone of it —
 * including waits for values reached before the failure.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef HALI_HAL_SEMAPHORE_H
#define HALI_HAL_SEMAPHORE_H

#include <time.h>

#include "hal/common.h"

/* Creates a semaphore with payload |initial_value|.  Semaphores are
 * reference counted (type HALI_TYPE_NONE: they are never held in a VM
 * register; fences are).  The caller owns |*out_semaphore|. */
HALI_MUST_USE hali_status_t hali_hal_semaphore_create(
    uint64_t initial_value, hali_hal_semaphore_t **out_semaphore);
void hali_hal_semaphore_retain(hali_hal_semaphore_t *semaphore);
void hali_hal_semaphore_release(hali_hal_semaphore_t *semaphore);
/* Whether the host may signal or fail the semaphore: it was created for
 * the host, or a fence holding it was handed to the host (the C API marks
 * them; hal/fence.h hali_hal_fence_mark_host_visible).  Never cleared.
 * Deadlock detection treats a semaphore that is not host-visible, and
 * that no queue work can signal, as one nobody can signal. */
void hali_hal_semaphore_mark_host_visible(hali_hal_semaphore_t *semaphore);
bool hali_hal_semaphore_host_visible(hali_hal_semaphore_t *semaphore);

/* Stores the current payload in |*out_value| (also when failed: the value
 * reached before the failure) and returns a clone of the failure status if
 * the semaphore failed, else OK. */
HALI_MUST_USE hali_status_t hali_hal_semaphore_query(
    hali_hal_semaphore_t *semaphore, uint64_t *out_value);

/* Advances the payload to |value|, waking waiters and firing timepoints
 * whose value is now reached (on this thread, after the lock is dropped).
 * FAILED_PRECONDITION naming both values when |value| is not greater than
 * the current payload; a clone of the failure when the semaphore failed. */
HALI_MUST_USE hali_status_t hali_hal_semaphore_signal(
    hali_hal_semaphore_t *semaphore, uint64_t value);

/* Internal (hal/fence.c): advances the payload to |value| when it is
 * lower, waking as signal does; a payload already at or past |value| is
 * left alone (OK).  A clone of the failure when the semaphore failed. */
HALI_MUST_USE hali_status_t hali_hal_semaphore_advance(
    hali_hal_semaphore_t *semaphore, uint64_t value);

/* Internal (hal/fence.c's pool of spawn fences): the bytes a semaphore
 * takes, and making one in |storage| (that many bytes, aligned for any
 * type) whose last release calls |recycle| instead of freeing it (NULL:
 * freed, as a created one).  Returns |storage| as the semaphore, holding
 * one reference. */
size_t hali_hal_semaphore_storage_size(void);
hali_hal_semaphore_t *hali_hal_semaphore_init_in(
    void *storage, uint64_t initial_value,
    void (*recycle)(hali_hal_semaphore_t *semaphore));
/* Internal (hal/fence.c's group compaction): true when the caller holds
 * the only reference to |semaphore| and it reached |value| without
 * failing, so it stays reached for good (nobody else can signal or fail
 * it).  The caller may then drop a point on it. */
bool hali_hal_semaphore_reached_for_good(hali_hal_semaphore_t *semaphore,
                                         uint64_t value);

/* Fails the semaphore with |status| (consumed; must not be OK — OK is
 * turned into an UNKNOWN failure).  Only the first failure is kept. */
void hali_hal_semaphore_fail(hali_hal_semaphore_t *semaphore,
                             hali_status_t status);

/* Blocks until the payload is >= |value| or the semaphore fails, for at
 * most |timeout_ns| (0 polls, HALI_INFINITE waits forever).  Returns OK, a
 * clone of the failure, or DEADLINE_EXCEEDED naming the current and the
 * awaited value. */
HALI_MUST_USE hali_status_t hali_hal_semaphore_wait(
    hali_hal_semaphore_t *semaphore, uint64_t value,
    hali_timeout_ns_t timeout_ns);

/* The CLOCK_MONOTONIC time |timeout_ns| (> 0) from now, for the
 * pthread_cond_timedwait calls behind every timed wait. */
void hali_deadline_from_timeout(hali_timeout_ns_t timeout_ns,
                                struct timespec *out);

/* The order in which |semaphore| failed among all failures in the process
 * (0 while healthy): fences report the earliest failure of their points. */
uint64_t hali_hal_semaphore_failure_order(hali_hal_semaphore_t *semaphore);

/* ---- Timepoints: learn without blocking when a value is reached. ---- */

/* Called once when the payload reaches the timepoint's value (|status| OK)
 * or the semaphore fails (|status| is the failure, borrowed: clone it to
 * keep it).  Runs on the thread that signals or fails, with no semaphore
 * lock held: it may signal, wait on or register with any semaphore. */
typedef void (*hali_hal_semaphore_callback_t)(void *user_data,
                                              hali_status_t status);

/* Caller-owned storage for one registration; fields are private. */
typedef struct hali_hal_semaphore_timepoint_t {
  struct hali_hal_semaphore_timepoint_t *next;
  uint64_t value;
  hali_hal_semaphore_callback_t callback;
  void *user_data;
} hali_hal_semaphore_timepoint_t;

/* Registers |timepoint| to fire when the payload reaches |value|.  Returns
 * true if registered; false — without calling |callback| — if the value is
 * already reached or the semaphore already failed (the caller handles that
 * case inline; query tells which).  |timepoint| must stay valid until it
 * fires or is cancelled; the semaphore never touches it after it has been
 * unlinked for firing, so the callback may free or re-register it, and
 * the owner may free it once cancel returned false (the callback may then
 * still be running with |user_data|: synchronize on that yourself). */
bool hali_hal_semaphore_notify(hali_hal_semaphore_t *semaphore,
                               uint64_t value,
                               hali_hal_semaphore_timepoint_t *timepoint,
                               hali_hal_semaphore_callback_t callback,
                               void *user_data);
/* Unregisters |timepoint|.  True if it was still pending (it will never
 * fire); false if it already fired or is firing right now. */
bool hali_hal_semaphore_cancel(hali_hal_semaphore_t *semaphore,
                               hali_hal_semaphore_timepoint_t *timepoint);

#endif /* HALI_HAL_SEMAPHORE_H */
