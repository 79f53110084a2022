/* hali HAL — stop requests: how device work learns that whoever submitted
 * it gave up (cancelled, out of time, out of instructions).
 *
 * A hali_hal_stop_t is shared by one invocation (every fiber it spawns)
 * and every queue submission it makes.  It holds:
 *   - a stop code, 0 until the first hali_hal_stop_request (CANCELLED,
 *     DEADLINE_EXCEEDED, ...), which is final: later requests are ignored;
 *   - an optional deadline (CLOCK_MONOTONIC ns, INT64_MAX = none): once it
 *     has passed, hali_hal_stop_check reports DEADLINE_EXCEEDED (and
 *     records it as the code) without anyone requesting it;
 *   - watchers: interrupt flags of interpreters running kernels for it
 *     (a bytecode kernel polls only its own flag, at calls and backward
 *     branches); a request sets each one, so the kernel stops at its next
 *     branch.  The deadline sets them only when someone checks it
 *     (hali_hal_stop_check: the queue before every workgroup, and the VM's
 *     scheduler watchdog every 5 ms);
 *   - a pool of fuel (instructions) for bytecode kernels, filled by the
 *     invocation from its own budget when it submits work, drawn by the
 *     kernels as they run: an invocation and its kernels never execute
 *     more instructions than the budget it started with.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef HALI_HAL_STOP_H
#define HALI_HAL_STOP_H

#include <stdatomic.h>

#include "hal/common.h"

typedef struct hali_hal_stop_t hali_hal_stop_t;

/* An interrupt flag to set on a request: |code| first, then |flag|
 * (release), the order the interpreter reads them in. */
typedef struct hali_hal_stop_watch_t {
  atomic_bool *flag;
  _Atomic(hali_status_code_t) *code;
  struct hali_hal_stop_watch_t *prev, *next; /* owned by the stop */
} hali_hal_stop_watch_t;

/* A stop with no request, deadline |deadline_ns| (INT64_MAX: none) and no
 * fuel pool.  The caller holds the one reference. */
HALI_MUST_USE hali_status_t hali_hal_stop_create(int64_t deadline_ns,
                                                 hali_hal_stop_t **out_stop);
void hali_hal_stop_retain(hali_hal_stop_t *stop);   /* NULL: no-op */
void hali_hal_stop_release(hali_hal_stop_t *stop);  /* NULL: no-op */

/* Requests a stop with |code| (not OK); the first request wins.  Sets every
 * watcher's flag. */
void hali_hal_stop_request(hali_hal_stop_t *stop, hali_status_code_t code);
/* The stop code: the request's, DEADLINE_EXCEEDED once the deadline has
 * passed (recorded as a request, so the watchers are told), or 0.  NULL
 * stop: 0.  One relaxed load when nothing is requested and there is no
 * deadline. */
hali_status_code_t hali_hal_stop_check_slow(hali_hal_stop_t *stop);
/* The leading members of every stop (hal/stop.c's struct starts with
 * them), so that the common check is inline: the queue makes it before
 * every command and every workgroup. */
typedef struct hali_hal_stop_head_t {
  atomic_uint refs;
  _Atomic(hali_status_code_t) code; /* 0 until requested */
  int64_t deadline_ns;              /* INT64_MAX: none */
} hali_hal_stop_head_t;
static inline hali_status_code_t hali_hal_stop_check(hali_hal_stop_t *stop) {
  if (!stop) return HALI_STATUS_OK;
  hali_hal_stop_head_t *h = (hali_hal_stop_head_t *)(void *)stop;
  if (HALI_LIKELY(atomic_load_explicit(&h->code, memory_order_acquire) ==
                      HALI_STATUS_OK &&
                  h->deadline_ns == INT64_MAX))
    return HALI_STATUS_OK;
  return hali_hal_stop_check_slow(stop);
}
/* The deadline given at creation (INT64_MAX: none). */
int64_t hali_hal_stop_deadline(const hali_hal_stop_t *stop);
/* A status for stop code |code| (from hali_hal_stop_check): "the
 * invocation that submitted this work was cancelled" / "exceeded its
 * deadline" / "ran out of fuel". */
hali_status_t hali_hal_stop_status(hali_status_code_t code);

/* Registers |watch| (its flag and code set by the caller): returns false,
 * registering nothing, when a stop is already requested (the caller stops
 * at once).  Every successful watch is followed by one unwatch. */
bool hali_hal_stop_watch(hali_hal_stop_t *stop, hali_hal_stop_watch_t *watch);
void hali_hal_stop_unwatch(hali_hal_stop_t *stop,
                           hali_hal_stop_watch_t *watch);

/* The fuel pool.  Kernels count instructions only when fuel is enabled
 * (the first hali_hal_stop_add_fuel enables it, even with 0). */
void hali_hal_stop_add_fuel(hali_hal_stop_t *stop, uint64_t fuel);
bool hali_hal_stop_fuel_enabled(const hali_hal_stop_t *stop);
/* Takes up to |max| instructions from the pool; 0 when it is empty. */
uint64_t hali_hal_stop_take_fuel(hali_hal_stop_t *stop, uint64_t max);
/* What is left in the pool. */
uint64_t hali_hal_stop_fuel(const hali_hal_stop_t *stop);

#endif /* HALI_HAL_STOP_H */
