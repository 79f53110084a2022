/* hali HAL — fences: sets of (semaphore, value) timepoints.
 *
 * A fence is reached when every point is; it fails when any of its
 * semaphores fails (with that semaphore's first failure).  A fence holds at
 * most one point per semaphore (inserting a second keeps the larger value).
 * A NULL fence and an empty fence are always reached: await returns OK at
 * once, signal and fail do nothing.
 *
 * Thread-safety: every function may be called from any thread; inserting
 * while another thread awaits the same fence is allowed (the await sees the
 * points present when it started).
 */
#ifndef HALI_HAL_FENCE_H
#define HALI_HAL_FENCE_H

#include "hal/allocator.h"
#include "hal/semaphore.h"

/* Creates an empty fence.  The caller owns |*out_fence|. */
HALI_MUST_USE hali_status_t hali_hal_fence_create(hali_hal_fence_t **out_fence);
/* Creates a fence at the single point (|semaphore| (retained), |value|). */
HALI_MUST_USE hali_status_t hali_hal_fence_create_at(
    hali_hal_semaphore_t *semaphore, uint64_t value,
    hali_hal_fence_t **out_fence);
/* Creates a fresh semaphore at 0 and a fence at its value 1: the usual
 * "signal me when done" fence (what hal.fence.create makes). */
HALI_MUST_USE hali_status_t hali_hal_fence_create_pending(
    hali_hal_fence_t **out_fence);
/* A pool of pending fences (what a spawn makes, once per fiber): each
 * fence and its semaphore are one block, reused once both are destroyed
 * (on any thread), so a warm spawn allocates nothing.  The pool's owner
 * creates it, makes fences from it on any thread, and closes it when done;
 * fences still alive then keep working, and the pool is freed when the
 * last of them is destroyed.  |max_kept|: blocks kept for reuse at most. */
typedef struct hali_hal_fence_pool_t hali_hal_fence_pool_t;
HALI_MUST_USE hali_status_t hali_hal_fence_pool_create(
    size_t max_kept, hali_hal_fence_pool_t **out_pool);
void hali_hal_fence_pool_close(hali_hal_fence_pool_t *pool);
/* hali_hal_fence_create_pending, from |pool| (NULL: allocated alone). */
HALI_MUST_USE hali_status_t hali_hal_fence_create_pending_pooled(
    hali_hal_fence_pool_t *pool, hali_hal_fence_t **out_fence);
/* Blocks of |pool| handed out and not back yet, and kept for reuse (for
 * the tests). */
void hali_hal_fence_pool_counts(hali_hal_fence_pool_t *pool, size_t *out_out,
                                size_t *out_kept);
/* Creates a fence with the points of every non-NULL fence in |fences|. */
HALI_MUST_USE hali_status_t hali_hal_fence_join(hali_hal_fence_t *const *fences,
                                                size_t count,
                                                hali_hal_fence_t **out_fence);
void hali_hal_fence_retain(hali_hal_fence_t *fence);
void hali_hal_fence_release(hali_hal_fence_t *fence);

/* Adds every point of |from| to |into| in place, in O(1) amortised per
 * point (a fence indexes its points by semaphore), and drops |into|'s
 * payload.  Only for an |into| nobody else holds (its one reference is the
 * caller's: hali_hal_fence_is_unshared), since a fence's points are
 * otherwise fixed once it is handed out.  |from| == |into| or NULL: no-op.
 * When |into| is full (16 points or more) it first drops the points that
 * are reached for good (their semaphore reached the value, has not failed,
 * and nobody but |into| holds it, so it never can): a group of N fibers
 * keeps only the members still running (or still held elsewhere), not N
 * points.  The fence's state (reached, failed, which failure) is the same
 * with or without them; hali_hal_fence_point_count may be lower. */
HALI_MUST_USE hali_status_t hali_hal_fence_join_into(hali_hal_fence_t *into,
                                                     hali_hal_fence_t *from);
/* True when the caller's reference is the only one. */
bool hali_hal_fence_is_unshared(hali_hal_fence_t *fence);
/* Attaches what the fence's producer hands to its consumers (a spawned
 * fiber's results), owned by the fence and freed with |payload_free|; a
 * previous payload is freed.  hali_hal_fence_payload returns it (borrowed)
 * when it was attached with |payload_free| (the attacher's tag), else
 * NULL.  Attach before signalling: the signal publishes it. */
void hali_hal_fence_set_payload(hali_hal_fence_t *fence, void *payload,
                                void (*payload_free)(void *));
void *hali_hal_fence_payload(hali_hal_fence_t *fence,
                             void (*payload_free)(void *));

/* Adds the point (|semaphore|, |value|), or raises the value of the point
 * on |semaphore| if it is lower. */
HALI_MUST_USE hali_status_t hali_hal_fence_insert(
    hali_hal_fence_t *fence, hali_hal_semaphore_t *semaphore, uint64_t value);

/* Number of points, and point |i| (semaphore borrowed). */
size_t hali_hal_fence_point_count(hali_hal_fence_t *fence);
void hali_hal_fence_point(hali_hal_fence_t *fence, size_t i,
                          hali_hal_semaphore_t **out_semaphore,
                          uint64_t *out_value);

/* Copies up to |max| points (semaphores borrowed: the fence holds them)
 * under one lock and returns how many the fence has (more than |max|:
 * read the rest with hali_hal_fence_point). */
size_t hali_hal_fence_points_peek(hali_hal_fence_t *fence, size_t max,
                                  hali_hal_semaphore_t **out_semaphores,
                                  uint64_t *out_values);
/* A new fence with every point of |from| (NULL: none) raised by |delta|
 * (hal.fence.offset).  A value that would pass 2^64-1 makes no fence:
 * OK with |*out_fence| NULL and that point's index and value in
 * |*out_overflow_point| / |*out_overflow_value| (else SIZE_MAX), for the
 * caller's message. */
HALI_MUST_USE hali_status_t hali_hal_fence_create_offset(
    hali_hal_fence_t *from, uint64_t delta, hali_hal_fence_t **out_fence,
    size_t *out_overflow_point, uint64_t *out_overflow_value);
/* The same, the new fence's block taken from |pool| (NULL: allocated
 * alone) and given back when it is destroyed, on any thread: a
 * hal.fence.offset in a fiber's loop allocates nothing once warm (its
 * points past the first aside). */
HALI_MUST_USE hali_status_t hali_hal_fence_create_offset_pooled(
    hali_hal_fence_pool_t *pool, hali_hal_fence_t *from, uint64_t delta,
    hali_hal_fence_t **out_fence, size_t *out_overflow_point,
    uint64_t *out_overflow_value);
/* hal.fence.offset into a register that holds the only reference to
 * |fence|: when |fence| and |from| are fences of one point on the same
 * semaphore (a timeline loop's `%m = hal.fence.offset %base, %i`), |fence|
 * becomes from's point raised by |delta| in place, with a new id, and
 * reports to |trace_to| (NULL: nobody); true when it did.  False (and
 * |fence| untouched) otherwise, and when the value would pass 2^64-1: the
 * caller then makes a new fence, which reports the overflow.  Nobody else
 * can see the change: whoever else held the fence would hold a reference. */
bool hali_hal_fence_reuse_offset(hali_hal_fence_t *fence,
                                 hali_hal_fence_t *from, uint64_t delta,
                                 hali_hal_allocator_t *trace_to);

/* Marks every point's semaphore host-visible (hal/semaphore.h): the host
 * holds this fence and may signal or fail it.  NULL: no-op. */
void hali_hal_fence_mark_host_visible(hali_hal_fence_t *fence);
/* Whether any point not yet reached is on a host-visible semaphore (or
 * failed): the host could still end a wait on the fence. */
bool hali_hal_fence_host_may_signal(hali_hal_fence_t *fence);

/* Signals every point's semaphore to its value (points already at or past
 * their value are left alone).  Returns the first error (e.g. a failed
 * semaphore's status). */
HALI_MUST_USE hali_status_t hali_hal_fence_signal(hali_hal_fence_t *fence);
/* Fails every point's semaphore with (a clone of) |status|, which is
 * consumed.  Semaphores that already failed keep their first failure. */
void hali_hal_fence_fail(hali_hal_fence_t *fence, hali_status_t status);
/* Non-blocking: |*out_ready| is true when every point is reached.  Returns
 * a clone of the first failure found (and sets |*out_ready| true: a failed
 * fence will not change any more). */
HALI_MUST_USE hali_status_t hali_hal_fence_query(hali_hal_fence_t *fence,
                                                 bool *out_ready);
/* Blocks until every point is reached, for at most |timeout_ns| in total
 * (0 polls, HALI_INFINITE forever).  Returns OK, the failure of a failed
 * semaphore, or DEADLINE_EXCEEDED naming the values. */
HALI_MUST_USE hali_status_t hali_hal_fence_await(hali_hal_fence_t *fence,
                                                 hali_timeout_ns_t timeout_ns);
/* Awaits every non-NULL fence of |fences| within one shared timeout. */
HALI_MUST_USE hali_status_t hali_hal_fence_await_all(
    hali_hal_fence_t *const *fences, size_t count,
    hali_timeout_ns_t timeout_ns);

/* ---- Tracing (doc/tracing.md).
 *
 * A fence with a tracer reports what is done to it as "[hal] fence.*"
 * lines: hali_hal_fence_join (the joined fence takes the tracer of the first
 * traced input), _signal (when it succeeds), _fail, _query (with the state
 * code hali_hal_fence_state_code gives) and _await (with the time it
 * waited).  hali_hal_device_create_fence makes a fence with the device's
 * tracer and reports "fence.create"; other fences have none unless one is
 * set. */

/* Reports to |allocator|'s tracer from now on (hali_hal_allocator_set_tracer;
 * a device passes its tracer on to its allocator), read at every line, so
 * a tracer cleared there is not used any more; |allocator| is retained
 * (NULL = none).  Set it before the fence is shared. */
void hali_hal_fence_trace_to(hali_hal_fence_t *fence,
                             hali_hal_allocator_t *allocator);
/* A fence's state as a status code: |status|'s code (a failure found by
 * query), else 0 when |ready|, else DEADLINE_EXCEEDED. */
int32_t hali_hal_fence_state_code(hali_status_t status, bool ready);
/* Reports an await of |fence| that ended with |code| (0 = OK) after
 * |waited_ns|: for waits made of several non-blocking steps (the VM's
 * scheduler suspends a fiber rather than block), which end where only the
 * waiter knows.  Nothing when |fence| has no tracer. */
void hali_hal_fence_trace_await(hali_hal_fence_t *fence, int32_t code,
                                int64_t waited_ns);

/* ---- Internal: the same operations without a trace line, for the HAL's
 * queue (which signals, fails and polls its submissions' fences) and the
 * VM's await, whose polls are not operations of the program. */
HALI_MUST_USE hali_status_t hali_hal_fence_signal_untraced(
    hali_hal_fence_t *fence);
void hali_hal_fence_fail_untraced(hali_hal_fence_t *fence,
                                  hali_status_t status);
HALI_MUST_USE hali_status_t hali_hal_fence_query_untraced(
    hali_hal_fence_t *fence, bool *out_ready);
HALI_MUST_USE hali_status_t hali_hal_fence_await_untraced(
    hali_hal_fence_t *fence, hali_timeout_ns_t timeout_ns);

#endif /* HALI_HAL_FENCE_H */
