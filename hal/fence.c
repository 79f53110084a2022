/* hali HAL — fences (see hal/fence.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "hal/fence.h"
#include "base/alloc.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"

typedef struct hali_hal_fence_point_t {
  hali_hal_semaphore_t *semaphore; /* retained */
  uint64_t value;
} hali_hal_fence_point_t;

struct hali_hal_fence_t {
  hali_ref_t ref;
  pthread_mutex_t mutex;
  /* Guarded by |mutex|. */
  size_t count;
  size_t capacity;
  hali_hal_fence_point_t *points;
  /* Whose tracer the fence reports to (retained; NULL = none): read at
   * each line, so clearing the allocator's tracer silences the fence. */
  hali_hal_allocator_t *traced_by;
};

static void hali_hal_fence_destroy(hali_ref_t *ref) {
  hali_hal_fence_t *fence = (hali_hal_fence_t *)ref;
  for (size_t i = 0; i < fence->count; ++i)
    hali_hal_semaphore_release(fence->points[i].semaphore);
  hali_free(fence->points);
  hali_hal_allocator_release(fence->traced_by);
  pthread_mutex_destroy(&fence->mutex);
  hali_free(fence);
}

static const hali_ref_vtable_t hali_hal_fence_vtable = {
    .destroy = hali_hal_fence_destroy,
};

hali_status_t hali_hal_fence_create(hali_hal_fence_t **out_fence) {
  *out_fence = NULL;
  hali_hal_fence_t *fence = hali_calloc(1, sizeof(*fence));
  if (!fence)
    return hali_status_annotate(hali_status_oom(), "creating a fence");
  hali_ref_init(&fence->ref, HALI_TYPE_FENCE, &hali_hal_fence_vtable);
  pthread_mutex_init(&fence->mutex, NULL);
  *out_fence = fence;
  return HALI_OK;
}

hali_status_t hali_hal_fence_create_at(hali_hal_semaphore_t *semaphore,
                                       uint64_t value,
                                       hali_hal_fence_t **out_fence) {
  hali_hal_fence_t *fence = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_create(&fence));
  hali_status_t status = hali_hal_fence_insert(fence, semaphore, value);
  if (status) {
    hali_hal_fence_release(fence);
    *out_fence = NULL;
    return status;
  }
  *out_fence = fence;
  return HALI_OK;
}

hali_status_t hali_hal_fence_create_pending(hali_hal_fence_t **out_fence) {
  *out_fence = NULL;
  hali_hal_semaphore_t *semaphore = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_semaphore_create(0, &semaphore));
  hali_status_t status = hali_hal_fence_create_at(semaphore, 1, out_fence);
  hali_hal_semaphore_release(semaphore);
  return status;
}

void hali_hal_fence_retain(hali_hal_fence_t *fence) {
  if (fence) hali_ref_retain(&fence->ref);
}

void hali_hal_fence_release(hali_hal_fence_t *fence) {
  if (fence) hali_ref_release(&fence->ref);
}

/* Caller holds |fence->mutex|. */
static hali_status_t hali_hal_fence_insert_locked(
    hali_hal_fence_t *fence, hali_hal_semaphore_t *semaphore, uint64_t value) {
  for (size_t i = 0; i < fence->count; ++i) {
    if (fence->points[i].semaphore == semaphore) {
      if (fence->points[i].value < value) fence->points[i].value = value;
      return HALI_OK;
    }
  }
  if (fence->count == fence->capacity) {
    size_t capacity = fence->capacity ? fence->capacity * 2 : 2;
    hali_hal_fence_point_t *grown =
        hali_realloc(fence->points, capacity * sizeof(*grown));
    if (!grown)
      return hali_status_annotate(hali_status_oom(),
                                  "growing a fence to %zu "
                                  "points",
                                  capacity);
    fence->points = grown;
    fence->capacity = capacity;
  }
  hali_hal_semaphore_retain(semaphore);
  fence->points[fence->count].semaphore = semaphore;
  fence->points[fence->count].value = value;
  fence->count++;
  return HALI_OK;
}

hali_status_t hali_hal_fence_insert(hali_hal_fence_t *fence,
                                    hali_hal_semaphore_t *semaphore,
                                    uint64_t value) {
  pthread_mutex_lock(&fence->mutex);
  hali_status_t status = hali_hal_fence_insert_locked(fence, semaphore, value);
  pthread_mutex_unlock(&fence->mutex);
  return status;
}

void hali_hal_fence_trace_to(hali_hal_fence_t *fence,
                             hali_hal_allocator_t *allocator) {
  if (!fence) return;
  hali_hal_allocator_retain(allocator);
  hali_hal_allocator_release(fence->traced_by);
  fence->traced_by = allocator;
}

/* |fence|'s tracer when it takes lines, else NULL. */
static const hali_hal_tracer_t *line_tracer(const hali_hal_fence_t *fence) {
  return fence && HALI_UNLIKELY(fence->traced_by != NULL)
             ? hali_hal_allocator_line_tracer(fence->traced_by)
             : NULL;
}

hali_status_t hali_hal_fence_join(hali_hal_fence_t *const *fences,
                                  size_t count, hali_hal_fence_t **out_fence) {
  hali_hal_fence_t *joined = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_create(&joined));
  hali_status_t status = HALI_OK;
  for (size_t f = 0; f < count && !status; ++f) {
    hali_hal_fence_t *fence = fences[f];
    if (!fence) continue;
    pthread_mutex_lock(&fence->mutex);
    for (size_t i = 0; i < fence->count && !status; ++i)
      status = hali_hal_fence_insert(joined, fence->points[i].semaphore,
                                     fence->points[i].value);
    pthread_mutex_unlock(&fence->mutex);
  }
  if (status) {
    hali_hal_fence_release(joined);
    joined = NULL;
  }
  *out_fence = joined;
  const hali_hal_tracer_t *t = NULL;
  for (size_t f = 0; !status && !t && f < count; ++f) {
    t = line_tracer(fences[f]);
    /* The joined fence reports where the first traced input does. */
    if (t) hali_hal_fence_trace_to(joined, fences[f]->traced_by);
  }
  if (t) {
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof(text), "[hal] fence.join");
    for (size_t f = 0; f < count && n < sizeof(text) - 40; ++f)
      n += (size_t)snprintf(text + n, sizeof(text) - n, " !hal.fence#%u",
                            hali_hal_trace_id(fences[f]));
    hali_hal_tracer_printf(t, "%s -> !hal.fence#%u", text,
                           hali_hal_trace_id(joined));
  }
  return status;
}

size_t hali_hal_fence_point_count(hali_hal_fence_t *fence) {
  if (!fence) return 0;
  pthread_mutex_lock(&fence->mutex);
  size_t count = fence->count;
  pthread_mutex_unlock(&fence->mutex);
  return count;
}

void hali_hal_fence_point(hali_hal_fence_t *fence, size_t i,
                          hali_hal_semaphore_t **out_semaphore,
                          uint64_t *out_value) {
  pthread_mutex_lock(&fence->mutex);
  *out_semaphore = i < fence->count ? fence->points[i].semaphore : NULL;
  *out_value = i < fence->count ? fence->points[i].value : 0;
  pthread_mutex_unlock(&fence->mutex);
}

void hali_hal_fence_mark_host_visible(hali_hal_fence_t *fence) {
  if (!fence) return;
  pthread_mutex_lock(&fence->mutex);
  for (size_t i = 0; i < fence->count; ++i)
    hali_hal_semaphore_mark_host_visible(fence->points[i].semaphore);
  pthread_mutex_unlock(&fence->mutex);
}

bool hali_hal_fence_host_may_signal(hali_hal_fence_t *fence) {
  if (!fence) return false;
  bool may = false;
  pthread_mutex_lock(&fence->mutex); /* lock order: fence -> semaphore */
  for (size_t i = 0; i < fence->count && !may; ++i) {
    hali_hal_semaphore_t *sem = fence->points[i].semaphore;
    uint64_t now = 0;
    hali_status_t failed = hali_hal_semaphore_query(sem, &now);
    if (failed) {
      hali_status_free(failed);
      may = true; /* the wait is over already */
    } else if (now < fence->points[i].value) {
      may = hali_hal_semaphore_host_visible(sem);
    }
  }
  pthread_mutex_unlock(&fence->mutex);
  return may;
}

/* Copies the points (retaining each semaphore) so the caller can block or
 * signal without holding the fence lock. Release with
 * hali_hal_fence_points_free. */
static hali_status_t hali_hal_fence_snapshot(hali_hal_fence_t *fence,
                                             hali_hal_fence_point_t **out,
                                             size_t *out_count) {
  *out = NULL;
  *out_count = 0;
  if (!fence) return HALI_OK;
  pthread_mutex_lock(&fence->mutex);
  size_t count = fence->count;
  hali_hal_fence_point_t *points = NULL;
  if (count) {
    points = hali_malloc(count * sizeof(*points));
    if (!points) {
      pthread_mutex_unlock(&fence->mutex);
      return hali_status_annotate(hali_status_oom(), "copying a fence");
    }
    for (size_t i = 0; i < count; ++i) {
      points[i] = fence->points[i];
      hali_hal_semaphore_retain(points[i].semaphore);
    }
  }
  pthread_mutex_unlock(&fence->mutex);
  *out = points;
  *out_count = count;
  return HALI_OK;
}

static void hali_hal_fence_points_free(hali_hal_fence_point_t *points,
                                       size_t count) {
  for (size_t i = 0; i < count; ++i)
    hali_hal_semaphore_release(points[i].semaphore);
  hali_free(points);
}

hali_status_t hali_hal_fence_signal_untraced(hali_hal_fence_t *fence) {
  hali_hal_fence_point_t *points;
  size_t count;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_snapshot(fence, &points, &count));
  hali_status_t first = HALI_OK;
  for (size_t i = 0; i < count; ++i) {
    uint64_t current = 0;
    hali_status_t status =
        hali_hal_semaphore_query(points[i].semaphore, &current);
    if (!status && current < points[i].value)
      status = hali_hal_semaphore_signal(points[i].semaphore, points[i].value);
    if (status && !first)
      first = hali_status_annotate(status, "signalling fence point %zu of %zu",
                                   i, count);
    else
      hali_status_free(status);
  }
  hali_hal_fence_points_free(points, count);
  return first;
}

void hali_hal_fence_fail_untraced(hali_hal_fence_t *fence,
                                  hali_status_t status) {
  hali_hal_fence_point_t *points;
  size_t count;
  hali_status_t snapshot = hali_hal_fence_snapshot(fence, &points, &count);
  if (snapshot) {
    /* Out of memory: fail what we can see under the lock instead. */
    hali_status_free(snapshot);
    count = 0;
    points = NULL;
  }
  for (size_t i = 0; i < count; ++i)
    hali_hal_semaphore_fail(points[i].semaphore, hali_status_clone(status));
  hali_hal_fence_points_free(points, count);
  hali_status_free(status);
}

hali_status_t hali_hal_fence_query_untraced(hali_hal_fence_t *fence,
                                           bool *out_ready) {
  *out_ready = true;
  if (!fence) return HALI_OK;
  pthread_mutex_lock(&fence->mutex);
  /* The earliest failure among the points wins (first in time, not in
   * point order). */
  hali_status_t failure = HALI_OK;
  uint64_t first = UINT64_MAX;
  for (size_t i = 0; i < fence->count; ++i) {
    uint64_t current = 0;
    hali_status_t status =
        hali_hal_semaphore_query(fence->points[i].semaphore, &current);
    if (status) {
      uint64_t order =
          hali_hal_semaphore_failure_order(fence->points[i].semaphore);
      if (order < first) {
        hali_status_free(failure);
        failure = status;
        first = order;
      } else {
        hali_status_free(status);
      }
      continue;
    }
    if (current < fence->points[i].value) *out_ready = false;
  }
  if (failure) *out_ready = true;
  pthread_mutex_unlock(&fence->mutex);
  return failure;
}

hali_status_t hali_hal_fence_signal(hali_hal_fence_t *fence) {
  hali_status_t s = hali_hal_fence_signal_untraced(fence);
  if (!s)
    hali_hal_tracer_printf(line_tracer(fence), "[hal] fence.signal !hal.fence#%u",
                           hali_hal_trace_id(fence));
  return s;
}

void hali_hal_fence_fail(hali_hal_fence_t *fence, hali_status_t status) {
  hali_hal_tracer_printf(line_tracer(fence), "[hal] fence.fail !hal.fence#%u code %d",
                         hali_hal_trace_id(fence),
                         (int)hali_status_code(status));
  hali_hal_fence_fail_untraced(fence, status);
}

int32_t hali_hal_fence_state_code(hali_status_t status, bool ready) {
  if (status) return (int32_t)hali_status_code(status);
  return ready ? 0 : HALI_STATUS_DEADLINE_EXCEEDED;
}

hali_status_t hali_hal_fence_query(hali_hal_fence_t *fence, bool *out_ready) {
  hali_status_t s = hali_hal_fence_query_untraced(fence, out_ready);
  hali_hal_tracer_printf(line_tracer(fence), "[hal] fence.query !hal.fence#%u -> %d",
                         hali_hal_trace_id(fence),
                         hali_hal_fence_state_code(s, *out_ready));
  return s;
}

void hali_hal_fence_trace_await(hali_hal_fence_t *fence, int32_t code,
                                int64_t waited_ns) {
  const hali_hal_tracer_t *t = line_tracer(fence);
  if (!t) return;
  hali_hal_tracer_printf(
      t, "[hal] fence.await !hal.fence#%u -> %s after %lld us",
      hali_hal_trace_id(fence),
      code ? hali_status_code_name((hali_status_code_t)code) : "OK",
      (long long)(waited_ns / 1000));
}

/* A multi-point wait: one timepoint per unreached point, all reporting to
 * one condition variable, so the wait ends as soon as every point is
 * reached or ANY semaphore fails (not only once the earlier points are
 * reached). */
typedef struct hali_hal_fence_waiter_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  size_t remaining; /* registered timepoints not yet fired */
  size_t fired;     /* callbacks that have finished */
  hali_status_t failure; /* clone of the first failure reported */
} hali_hal_fence_waiter_t;

static void hali_hal_fence_waiter_notify(void *user_data,
                                         hali_status_t status) {
  hali_hal_fence_waiter_t *waiter = user_data;
  pthread_mutex_lock(&waiter->mutex);
  if (status && !waiter->failure) waiter->failure = hali_status_clone(status);
  waiter->remaining--;
  waiter->fired++;
  pthread_cond_broadcast(&waiter->cond);
  /* Last touch of |waiter|: the waiting thread frees it once |fired|
   * accounts for every callback that was not cancelled. */
  pthread_mutex_unlock(&waiter->mutex);
}

static hali_status_t hali_hal_fence_await_points(
    const hali_hal_fence_point_t *points, size_t count,
    hali_timeout_ns_t timeout_ns) {
  if (count == 0) return HALI_OK;
  if (count == 1 || timeout_ns == 0) {
    /* One point (or a poll): a plain semaphore wait suffices. */
    for (size_t i = 0; i < count; ++i)
      HALI_RETURN_IF_ERROR(
          hali_hal_semaphore_wait(points[i].semaphore, points[i].value,
                                  timeout_ns),
          "awaiting fence point %zu of %zu (timeout %" PRId64 " ns)", i,
          count, timeout_ns);
    return HALI_OK;
  }
  hali_hal_semaphore_timepoint_t *timepoints =
      hali_calloc(count, sizeof(*timepoints));
  bool *registered = hali_calloc(count, sizeof(*registered));
  if (!timepoints || !registered) {
    hali_free(timepoints);
    hali_free(registered);
    return hali_status_annotate(hali_status_oom(),
                                "awaiting %zu fence points",
                                count);
  }
  hali_hal_fence_waiter_t waiter;
  pthread_mutex_init(&waiter.mutex, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&waiter.cond, &attr);
  pthread_condattr_destroy(&attr);
  waiter.remaining = 0;
  waiter.fired = 0;
  waiter.failure = HALI_OK;
  size_t registered_count = 0;
  hali_status_t status = HALI_OK;
  pthread_mutex_lock(&waiter.mutex);
  for (size_t i = 0; i < count && !status; ++i) {
    waiter.remaining++; /* before notify: the callback may run at once */
    pthread_mutex_unlock(&waiter.mutex);
    registered[i] = hali_hal_semaphore_notify(
        points[i].semaphore, points[i].value, &timepoints[i],
        hali_hal_fence_waiter_notify, &waiter);
    pthread_mutex_lock(&waiter.mutex);
    if (registered[i]) {
      registered_count++;
    } else {
      waiter.remaining--;
      uint64_t current = 0;
      status = hali_hal_semaphore_query(points[i].semaphore, &current);
    }
  }
  struct timespec deadline;
  if (timeout_ns > 0) hali_deadline_from_timeout(timeout_ns, &deadline);
  while (!status && !waiter.failure && waiter.remaining > 0) {
    if (timeout_ns < 0) {
      pthread_cond_wait(&waiter.cond, &waiter.mutex);
    } else if (pthread_cond_timedwait(&waiter.cond, &waiter.mutex,
                                      &deadline) &&
               !waiter.failure && waiter.remaining > 0) {
      status = HALI_OK; /* built below, outside the lock */
      break;
    }
  }
  bool timed_out = !status && !waiter.failure && waiter.remaining > 0;
  if (!status && waiter.failure) {
    status = waiter.failure;
    waiter.failure = HALI_OK;
  }
  pthread_mutex_unlock(&waiter.mutex);
  /* Unregister what has not fired; wait for callbacks already running. */
  size_t cancelled = 0;
  for (size_t i = 0; i < count; ++i)
    if (registered[i] &&
        hali_hal_semaphore_cancel(points[i].semaphore, &timepoints[i]))
      cancelled++;
  pthread_mutex_lock(&waiter.mutex);
  while (waiter.fired < registered_count - cancelled)
    pthread_cond_wait(&waiter.cond, &waiter.mutex);
  hali_status_free(waiter.failure); /* a failure that came too late */
  pthread_mutex_unlock(&waiter.mutex);
  pthread_cond_destroy(&waiter.cond);
  pthread_mutex_destroy(&waiter.mutex);
  hali_free(timepoints);
  hali_free(registered);
  if (timed_out) {
    /* Name the first point still short of its value. */
    for (size_t i = 0; i < count && !status; ++i) {
      uint64_t current = 0;
      status = hali_hal_semaphore_query(points[i].semaphore, &current);
      if (!status && current < points[i].value)
        status = hali_status_make(HALI_STATUS_DEADLINE_EXCEEDED,
                                  "semaphore at value %" PRIu64
                                  " did not reach %" PRIu64 " within %" PRId64
                                  " ns",
                                  current, points[i].value, timeout_ns);
    }
  }
  return hali_status_annotate(status,
                              "awaiting %zu fence points (timeout %" PRId64
                              " ns)",
                              count, timeout_ns);
}

hali_status_t hali_hal_fence_await_untraced(hali_hal_fence_t *fence,
                                           hali_timeout_ns_t timeout_ns) {
  return hali_hal_fence_await_all(&fence, 1, timeout_ns);
}

hali_status_t hali_hal_fence_await(hali_hal_fence_t *fence,
                                   hali_timeout_ns_t timeout_ns) {
  if (!line_tracer(fence))
    return hali_hal_fence_await_all(&fence, 1, timeout_ns);
  int64_t start = hali_clock_now_ns();
  hali_status_t s = hali_hal_fence_await_all(&fence, 1, timeout_ns);
  hali_hal_fence_trace_await(fence, s ? (int32_t)hali_status_code(s) : 0,
                             hali_clock_now_ns() - start);
  return s;
}

hali_status_t hali_hal_fence_await_all(hali_hal_fence_t *const *fences,
                                       size_t count,
                                       hali_timeout_ns_t timeout_ns) {
  hali_hal_fence_t *joined = NULL;
  if (count == 1) {
    joined = fences[0];
    hali_hal_fence_retain(joined);
  } else {
    HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_join(fences, count, &joined));
  }
  hali_hal_fence_point_t *points;
  size_t point_count;
  hali_status_t status =
      hali_hal_fence_snapshot(joined, &points, &point_count);
  hali_hal_fence_release(joined);
  if (status) return status;
  status = hali_hal_fence_await_points(points, point_count, timeout_ns);
  hali_hal_fence_points_free(points, point_count);
  return status;
}
