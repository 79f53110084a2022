/* hali HAL — timeline semaphores (see hal/semaphore.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "hal/semaphore.h"
#include "base/alloc.h"

struct hali_hal_semaphore_t {
  hali_ref_t ref;
  pthread_mutex_t mutex;
  pthread_cond_t cond; /* broadcast on every signal and on failure */
  /* Guarded by |mutex|. */
  uint64_t value;
  hali_status_t failure; /* first failure, owned; NULL while healthy */
  uint64_t failure_order; /* when it failed, process-wide order */
  hali_hal_semaphore_timepoint_t *timepoints; /* unordered list */
  atomic_bool host_visible;
};

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
  pthread_mutex_lock(&semaphore->mutex);
  uint64_t order = semaphore->failure ? semaphore->failure_order : 0;
  pthread_mutex_unlock(&semaphore->mutex);
  return order;
}

static void hali_hal_semaphore_destroy(hali_ref_t *ref) {
  hali_hal_semaphore_t *semaphore = (hali_hal_semaphore_t *)ref;
  hali_status_free(semaphore->failure);
  pthread_cond_destroy(&semaphore->cond);
  pthread_mutex_destroy(&semaphore->mutex);
  hali_free(semaphore);
}

static const hali_ref_vtable_t hali_hal_semaphore_vtable = {
    .destroy = hali_hal_semaphore_destroy,
};

/* The semaphore's own bytes, rounded up so that what follows it in
 * hali_hal_semaphore_create_with is aligned for any type. */
#define SEMAPHORE_SIZE                                                    \
  ((sizeof(hali_hal_semaphore_t) + _Alignof(max_align_t) - 1) /           \
   _Alignof(max_align_t) * _Alignof(max_align_t))

hali_status_t hali_hal_semaphore_create_with(
    uint64_t initial_value, size_t extra_size, void **out_extra,
    hali_hal_semaphore_t **out_semaphore) {
  *out_semaphore = NULL;
  if (out_extra) *out_extra = NULL;
  if (extra_size > SIZE_MAX - SEMAPHORE_SIZE)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "a semaphore with %zu more bytes overflows",
                            extra_size);
  hali_hal_semaphore_t *semaphore =
      hali_calloc(1, extra_size ? SEMAPHORE_SIZE + extra_size
                                : sizeof(*semaphore));
  if (!semaphore)
    return hali_status_annotate(hali_status_oom(), "creating a semaphore");
  hali_ref_init(&semaphore->ref, HALI_TYPE_NONE, &hali_hal_semaphore_vtable);
  pthread_mutex_init(&semaphore->mutex, NULL);
  /* Deadlines are measured on the monotonic clock. */
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&semaphore->cond, &attr);
  pthread_condattr_destroy(&attr);
  semaphore->value = initial_value;
  if (out_extra && extra_size)
    *out_extra = (char *)semaphore + SEMAPHORE_SIZE;
  *out_semaphore = semaphore;
  return HALI_OK;
}

hali_status_t hali_hal_semaphore_create(uint64_t initial_value,
                                        hali_hal_semaphore_t **out_semaphore) {
  return hali_hal_semaphore_create_with(initial_value, 0, NULL,
                                        out_semaphore);
}

void hali_hal_semaphore_retain(hali_hal_semaphore_t *semaphore) {
  if (semaphore) hali_ref_retain(&semaphore->ref);
}

void hali_hal_semaphore_release(hali_hal_semaphore_t *semaphore) {
  if (semaphore) hali_ref_release(&semaphore->ref);
}

hali_status_t hali_hal_semaphore_query(hali_hal_semaphore_t *semaphore,
                                       uint64_t *out_value) {
  pthread_mutex_lock(&semaphore->mutex);
  *out_value = semaphore->value;
  hali_status_t status = hali_status_clone(semaphore->failure);
  pthread_mutex_unlock(&semaphore->mutex);
  return status;
}

/* Fires every timepoint that is ready (value reached, or any once failed),
 * one at a time: each is unlinked and its fields copied under the lock, and
 * the semaphore never touches it again.  So once hali_hal_semaphore_cancel
 * returns false the owner may free the timepoint, and a callback may free
 * or re-register its own.  Called without the lock held, with a reference
 * held by the caller (a callback may drop the last outside one). */
static void hali_hal_semaphore_fire_ready(hali_hal_semaphore_t *semaphore) {
  for (;;) {
    pthread_mutex_lock(&semaphore->mutex);
    hali_hal_semaphore_timepoint_t **link = &semaphore->timepoints;
    while (*link && !semaphore->failure && (*link)->value > semaphore->value)
      link = &(*link)->next;
    hali_hal_semaphore_timepoint_t *tp = *link;
    if (!tp) {
      pthread_mutex_unlock(&semaphore->mutex);
      return;
    }
    *link = tp->next;
    hali_hal_semaphore_callback_t callback = tp->callback;
    void *user_data = tp->user_data;
    /* |failure| is immutable once set, so the callback can borrow it. */
    hali_status_t status = semaphore->failure;
    pthread_mutex_unlock(&semaphore->mutex);
    callback(user_data, status);
  }
}

hali_status_t hali_hal_semaphore_signal(hali_hal_semaphore_t *semaphore,
                                        uint64_t value) {
  pthread_mutex_lock(&semaphore->mutex);
  if (semaphore->failure) {
    hali_status_t status = hali_status_clone(semaphore->failure);
    pthread_mutex_unlock(&semaphore->mutex);
    return hali_status_annotate(status,
                                "signalling a failed semaphore to %" PRIu64,
                                value);
  }
  if (value <= semaphore->value) {
    uint64_t current = semaphore->value;
    pthread_mutex_unlock(&semaphore->mutex);
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "semaphore signal to %" PRIu64
                            " does not advance the current value %" PRIu64
                            " (values only move forward)",
                            value, current);
  }
  semaphore->value = value;
  bool has_timepoints = semaphore->timepoints != NULL;
  if (has_timepoints) hali_ref_retain(&semaphore->ref);
  pthread_cond_broadcast(&semaphore->cond);
  pthread_mutex_unlock(&semaphore->mutex);
  if (has_timepoints) {
    hali_hal_semaphore_fire_ready(semaphore);
    hali_hal_semaphore_release(semaphore);
  }
  return HALI_OK;
}

void hali_hal_semaphore_fail(hali_hal_semaphore_t *semaphore,
                             hali_status_t status) {
  if (!status)
    status = hali_status_make(HALI_STATUS_UNKNOWN,
                              "semaphore failed without a status");
  pthread_mutex_lock(&semaphore->mutex);
  if (semaphore->failure) {
    /* The first failure wins. */
    pthread_mutex_unlock(&semaphore->mutex);
    hali_status_free(status);
    return;
  }
  semaphore->failure = status;
  semaphore->failure_order = atomic_fetch_add(&hali_hal_failure_clock, 1) + 1;
  hali_ref_retain(&semaphore->ref);
  pthread_cond_broadcast(&semaphore->cond);
  pthread_mutex_unlock(&semaphore->mutex);
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

hali_status_t hali_hal_semaphore_wait(hali_hal_semaphore_t *semaphore,
                                      uint64_t value,
                                      hali_timeout_ns_t timeout_ns) {
  struct timespec deadline;
  bool forever = timeout_ns < 0;
  if (!forever && timeout_ns > 0)
    hali_deadline_from_timeout(timeout_ns, &deadline);
  hali_status_t status = HALI_OK;
  pthread_mutex_lock(&semaphore->mutex);
  for (;;) {
    if (semaphore->failure) {
      status = hali_status_clone(semaphore->failure);
      break;
    }
    if (semaphore->value >= value) break;
    int rc = 0;
    if (forever)
      pthread_cond_wait(&semaphore->cond, &semaphore->mutex);
    else if (timeout_ns > 0)
      rc = pthread_cond_timedwait(&semaphore->cond, &semaphore->mutex,
                                  &deadline);
    else
      rc = ETIMEDOUT;
    if (rc == ETIMEDOUT && !semaphore->failure && semaphore->value < value) {
      status = hali_status_make(HALI_STATUS_DEADLINE_EXCEEDED,
                                "semaphore at value %" PRIu64
                                " did not reach %" PRIu64 " within %" PRId64
                                " ns",
                                semaphore->value, value, timeout_ns);
      break;
    }
  }
  pthread_mutex_unlock(&semaphore->mutex);
  return status;
}

bool hali_hal_semaphore_notify(hali_hal_semaphore_t *semaphore, uint64_t value,
                               hali_hal_semaphore_timepoint_t *timepoint,
                               hali_hal_semaphore_callback_t callback,
                               void *user_data) {
  pthread_mutex_lock(&semaphore->mutex);
  bool pending = !semaphore->failure && semaphore->value < value;
  if (pending) {
    timepoint->value = value;
    timepoint->callback = callback;
    timepoint->user_data = user_data;
    timepoint->next = semaphore->timepoints;
    semaphore->timepoints = timepoint;
  }
  pthread_mutex_unlock(&semaphore->mutex);
  return pending;
}

bool hali_hal_semaphore_cancel(hali_hal_semaphore_t *semaphore,
                               hali_hal_semaphore_timepoint_t *timepoint) {
  bool found = false;
  pthread_mutex_lock(&semaphore->mutex);
  for (hali_hal_semaphore_timepoint_t **link = &semaphore->timepoints; *link;
       link = &(*link)->next) {
    if (*link == timepoint) {
      *link = timepoint->next;
      found = true;
      break;
    }
  }
  pthread_mutex_unlock(&semaphore->mutex);
  return found;
}
