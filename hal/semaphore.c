/* hali HAL — timeline semaphores (see hal/semaphore.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/semaphore.h"
#include "hal/semaphore_lock.h"
#include "base/alloc.h"

struct hali_hal_semaphore_t {
  hali_ref_t ref;
  /* A 4-byte lock (hal/semaphore_lock.h) and no condition variable: a
   * blocking wait registers a timepoint of its own
   * (hali_hal_semaphore_wait), so a semaphore is small and cheap to make
   * (a group holds one per member). */
  hali_small_lock_t lock;
  /* Guarded by |lock|. */
  uint64_t value;
  hali_status_t failure; /* first failure, owned; NULL while healthy */
  uint64_t failure_order; /* when it failed, process-wide order */
  hali_hal_semaphore_timepoint_t *timepoints; /* unordered list */
  atomic_bool host_visible;
  /* Made in storage of a pool's (hali_hal_semaphore_init_in): called
   * instead of freeing it.  NULL: made by hali_hal_semaphore_create. */
  void (*recycle)(hali_hal_semaphore_t *semaphore);
};

size_t hali_hal_semaphore_storage_size(void) {
  return sizeof(hali_hal_semaphore_t);
}

void hali_hal_semaphore_mark_host_visible(hali_hal_semaphore_t *semaphore) {
  atomic_store_explicit(&semaphore->host_visible, true, memory_order_relaxed);
}

bool hali_hal_semaphore_host_visible(hali_hal_semaphore_t *semaphore) {
  return atomic_load_explicit(&semaphore->host_visible, memory_order_relaxed);
}

/* Orders failures across semaphores, so that a fence made of several
 * reports the one that happened first. */
static atomic_uint_fast64_t hali_hal_failure_clock;

uint64_t hali_hal_semaphore_failure_order(hali_hal_semaphore_t *semaphore) {
  hali_small_lock(&semaphore->lock);
  uint64_t order = semaphore->failure ? semaphore->failure_order : 0;
  hali_small_unlock(&semaphore->lock);
  return order;
}

static void hali_hal_semaphore_destroy(hali_ref_t *ref) {
  hali_hal_semaphore_t *semaphore = (hali_hal_semaphore_t *)ref;
  hali_status_free(semaphore->failure);
  hali_small_lock_destroy(&semaphore->lock);
  if (semaphore->recycle) semaphore->recycle(semaphore);
  else hali_free(semaphore);
}

static const hali_ref_vtable_t hali_hal_semaphore_vtable = {
    .destroy = hali_hal_semaphore_destroy,
};

hali_status_t hali_hal_semaphore_create(uint64_t initial_value,
                                        hali_hal_semaphore_t **out_semaphore) {
  *out_semaphore = NULL;
  /* malloc + memset, not calloc: glibc's calloc skips the per-thread
   * cache of freed blocks (one semaphore per spawn). */
  hali_hal_semaphore_t *semaphore = hali_malloc(sizeof(*semaphore));
  if (!semaphore)
    return hali_status_annotate(hali_status_oom(), "creating a semaphore");
  hali_hal_semaphore_init_in(semaphore, initial_value, NULL);
  *out_semaphore = semaphore;
  return HALI_OK;
}

hali_hal_semaphore_t *hali_hal_semaphore_init_in(
    void *storage, uint64_t initial_value,
    void (*recycle)(hali_hal_semaphore_t *semaphore)) {
  hali_hal_semaphore_t *semaphore = storage;
  memset(semaphore, 0, sizeof(*semaphore));
  hali_ref_init(&semaphore->ref, HALI_TYPE_NONE, &hali_hal_semaphore_vtable);
  hali_small_lock_init(&semaphore->lock);
  semaphore->value = initial_value;
  semaphore->recycle = recycle;
  return semaphore;
}

bool hali_hal_semaphore_reached_for_good(hali_hal_semaphore_t *semaphore,
                                         uint64_t value) {
  /* Only the caller holds it: nobody can signal or fail it any more (a
   * reference comes only from a holder).  The acquire load pairs with the
   * release of every other holder's reference, after its last signal. */
  if (atomic_load_explicit(&semaphore->ref.count, memory_order_acquire) != 1)
    return false;
  hali_small_lock(&semaphore->lock);
  bool reached = !semaphore->failure && semaphore->value >= value;
  hali_small_unlock(&semaphore->lock);
  return reached;
}

void hali_hal_semaphore_retain(hali_hal_semaphore_t *semaphore) {
  if (semaphore) hali_ref_retain(&semaphore->ref);
}

void hali_hal_semaphore_release(hali_hal_semaphore_t *semaphore) {
  if (semaphore) hali_ref_release(&semaphore->ref);
}

hali_status_t hali_hal_semaphore_query(hali_hal_semaphore_t *semaphore,
                                       uint64_t *out_value) {
  hali_small_lock(&semaphore->lock);
  *out_value = semaphore->value;
  hali_status_t status = hali_status_clone(semaphore->failure);
  hali_small_unlock(&semaphore->lock);
  return status;
}

/* Fires every timepoint that is ready (value reached, or any once failed):
 * each is unlinked and its fields copied under the lock, and the
 * semaphore never touches it again.  So once hali_hal_semaphore_cancel
 * returns false the owner may free the timepoint, and a callback may free
 * or re-register its own.  One pass under the lock takes every ready one
 * (up to FIRE_BATCH at a time): a timepoint registered later is never
 * ready (notify refuses those), and a later signal fires its own.  Called
 * without the lock held, with a reference held by the caller (a callback
 * may drop the last outside one). */
#define FIRE_BATCH 16
static void hali_hal_semaphore_fire_ready(hali_hal_semaphore_t *semaphore) {
  for (;;) {
    hali_hal_semaphore_callback_t callbacks[FIRE_BATCH];
    void *users[FIRE_BATCH];
    size_t n = 0;
    hali_small_lock(&semaphore->lock);
    hali_hal_semaphore_timepoint_t **link = &semaphore->timepoints;
    while (*link && n < FIRE_BATCH) {
      hali_hal_semaphore_timepoint_t *tp = *link;
      if (!semaphore->failure && tp->value > semaphore->value) {
        link = &tp->next;
        continue;
      }
      *link = tp->next;
      callbacks[n] = tp->callback;
      users[n++] = tp->user_data;
    }
    /* |failure| is immutable once set, so the callbacks can borrow it. */
    hali_status_t status = semaphore->failure;
    hali_small_unlock(&semaphore->lock);
    for (size_t i = 0; i < n; ++i) callbacks[i](users[i], status);
    if (n < FIRE_BATCH) return;
  }
}

/* Moves |semaphore| (locked) to |value|, past its current one, unlocks it
 * and fires the timepoints that are now reached. */
static void raise_locked(hali_hal_semaphore_t *semaphore, uint64_t value) {
  semaphore->value = value;
  bool has_timepoints = semaphore->timepoints != NULL;
  if (has_timepoints) hali_ref_retain(&semaphore->ref);
  hali_small_unlock(&semaphore->lock);
  if (has_timepoints) {
    hali_hal_semaphore_fire_ready(semaphore);
    hali_hal_semaphore_release(semaphore);
  }
}

/* Raises the payload to |value| when it is lower (hal/fence.c: signalling
 * a fence leaves points already reached alone); a clone of the failure
 * when failed. */
hali_status_t hali_hal_semaphore_advance(hali_hal_semaphore_t *semaphore,
                                         uint64_t value) {
  hali_small_lock(&semaphore->lock);
  if (semaphore->failure) {
    hali_status_t status = hali_status_clone(semaphore->failure);
    hali_small_unlock(&semaphore->lock);
    return status;
  }
  if (value <= semaphore->value) {
    hali_small_unlock(&semaphore->lock);
    return HALI_OK;
  }
  raise_locked(semaphore, value);
  return HALI_OK;
}

hali_status_t hali_hal_semaphore_signal(hali_hal_semaphore_t *semaphore,
                                        uint64_t value) {
  hali_small_lock(&semaphore->lock);
  if (semaphore->failure) {
    hali_status_t status = hali_status_clone(semaphore->failure);
    hali_small_unlock(&semaphore->lock);
    return hali_status_annotate(status,
                                "signalling a failed semaphore to %" PRIu64,
                                value);
  }
  if (value <= semaphore->value) {
    uint64_t current = semaphore->value;
    hali_small_unlock(&semaphore->lock);
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "semaphore signal to %" PRIu64
                            " does not advance the current value %" PRIu64
                            " (values only move forward)",
                            value, current);
  }
  raise_locked(semaphore, value);
  return HALI_OK;
}

void hali_hal_semaphore_fail(hali_hal_semaphore_t *semaphore,
                             hali_status_t status) {
  if (!status)
    status = hali_status_make(HALI_STATUS_UNKNOWN,
                              "semaphore failed without a status");
  hali_small_lock(&semaphore->lock);
  if (semaphore->failure) {
    /* The first failure wins. */
    hali_small_unlock(&semaphore->lock);
    hali_status_free(status);
    return;
  }
  semaphore->failure = status;
  semaphore->failure_order = atomic_fetch_add(&hali_hal_failure_clock, 1) + 1;
  hali_ref_retain(&semaphore->ref);
  hali_small_unlock(&semaphore->lock);
  hali_hal_semaphore_fire_ready(semaphore);
  hali_hal_semaphore_release(semaphore);
}

void hali_deadline_from_timeout(hali_timeout_ns_t timeout_ns,
                                struct timespec *out) {
  clock_gettime(CLOCK_MONOTONIC, out);
  int64_t sec = timeout_ns / 1000000000;
  int64_t nsec = timeout_ns % 1000000000;
  out->tv_sec += (time_t)sec;
  out->tv_nsec += (long)nsec;
  if (out->tv_nsec >= 1000000000) {
    out->tv_sec += 1;
    out->tv_nsec -= 1000000000;
  }
}

/* A blocked wait: its own timepoint, fired to this condition. */
typedef struct {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool fired;
} semaphore_waiter_t;

static void semaphore_waiter_fire(void *user_data, hali_status_t status) {
  (void)status; /* the waiter looks at the semaphore itself */
  semaphore_waiter_t *w = user_data;
  pthread_mutex_lock(&w->mutex);
  w->fired = true;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->mutex); /* the last touch of |w| */
}

/* The outcome of a wait for |value| (the lock is held). */
static hali_status_t semaphore_wait_result_locked(
    hali_hal_semaphore_t *semaphore, uint64_t value,
    hali_timeout_ns_t timeout_ns) {
  if (semaphore->failure) return hali_status_clone(semaphore->failure);
  if (semaphore->value >= value) return HALI_OK;
  return hali_status_make(HALI_STATUS_DEADLINE_EXCEEDED,
                          "semaphore at value %" PRIu64
                          " did not reach %" PRIu64 " within %" PRId64 " ns",
                          semaphore->value, value, timeout_ns);
}

hali_status_t hali_hal_semaphore_wait(hali_hal_semaphore_t *semaphore,
                                      uint64_t value,
                                      hali_timeout_ns_t timeout_ns) {
  hali_small_lock(&semaphore->lock);
  if (semaphore->failure || semaphore->value >= value || timeout_ns == 0) {
    hali_status_t status =
        semaphore_wait_result_locked(semaphore, value, timeout_ns);
    hali_small_unlock(&semaphore->lock);
    return status;
  }
  struct timespec deadline;
  bool forever = timeout_ns < 0;
  if (!forever) hali_deadline_from_timeout(timeout_ns, &deadline);
  semaphore_waiter_t w;
  pthread_mutex_init(&w.mutex, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&w.cond, &attr);
  pthread_condattr_destroy(&attr);
  w.fired = false;
  /* Registered under the lock the check above held: no signal between. */
  hali_hal_semaphore_timepoint_t tp = {
      .next = semaphore->timepoints,
      .value = value,
      .callback = semaphore_waiter_fire,
      .user_data = &w,
  };
  semaphore->timepoints = &tp;
  hali_small_unlock(&semaphore->lock);
  pthread_mutex_lock(&w.mutex);
  while (!w.fired) {
    if (forever) {
      pthread_cond_wait(&w.cond, &w.mutex);
    } else if (pthread_cond_timedwait(&w.cond, &w.mutex, &deadline) ==
               ETIMEDOUT) {
      break;
    }
  }
  bool fired = w.fired;
  pthread_mutex_unlock(&w.mutex);
  /* Timed out: unregister; one firing right now still touches |w|. */
  if (!fired && !hali_hal_semaphore_cancel(semaphore, &tp)) {
    pthread_mutex_lock(&w.mutex);
    while (!w.fired) pthread_cond_wait(&w.cond, &w.mutex);
    pthread_mutex_unlock(&w.mutex);
  }
  pthread_cond_destroy(&w.cond);
  pthread_mutex_destroy(&w.mutex);
  hali_small_lock(&semaphore->lock);
  hali_status_t status =
      semaphore_wait_result_locked(semaphore, value, timeout_ns);
  hali_small_unlock(&semaphore->lock);
  return status;
}

bool hali_hal_semaphore_notify(hali_hal_semaphore_t *semaphore, uint64_t value,
                               hali_hal_semaphore_timepoint_t *timepoint,
                               hali_hal_semaphore_callback_t callback,
                               void *user_data) {
  hali_small_lock(&semaphore->lock);
  bool pending = !semaphore->failure && semaphore->value < value;
  if (pending) {
    timepoint->value = value;
    timepoint->callback = callback;
    timepoint->user_data = user_data;
    timepoint->next = semaphore->timepoints;
    semaphore->timepoints = timepoint;
  }
  hali_small_unlock(&semaphore->lock);
  return pending;
}

bool hali_hal_semaphore_cancel(hali_hal_semaphore_t *semaphore,
                               hali_hal_semaphore_timepoint_t *timepoint) {
  bool found = false;
  hali_small_lock(&semaphore->lock);
  for (hali_hal_semaphore_timepoint_t **link = &semaphore->timepoints; *link;
       link = &(*link)->next) {
    if (*link == timepoint) {
      *link = timepoint->next;
      found = true;
      break;
    }
  }
  hali_small_unlock(&semaphore->lock);
  return found;
}
