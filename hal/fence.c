/* hali HAL — fences (see hal/fence.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "hal/fence.h"

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
};

static void hali_hal_fence_destroy(hali_ref_t *ref) {
  hali_hal_fence_t *fence = (hali_hal_fence_t *)ref;
  for (size_t i = 0; i < fence->count; ++i)
    hali_hal_semaphore_release(fence->points[i].semaphore);
  free(fence->points);
  pthread_mutex_destroy(&fence->mutex);
  free(fence);
}

static const hali_ref_vtable_t hali_hal_fence_vtable = {
    .destroy = hali_hal_fence_destroy,
};

hali_status_t hali_hal_fence_create(hali_hal_fence_t **out_fence) {
  *out_fence = NULL;
  hali_hal_fence_t *fence = calloc(1, sizeof(*fence));
  if (!fence)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "out of host memory creating a fence");
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
        realloc(fence->points, capacity * sizeof(*grown));
    if (!grown)
      return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                              "out of host memory growing a fence to %zu "
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
    points = malloc(count * sizeof(*points));
    if (!points) {
      pthread_mutex_unlock(&fence->mutex);
      return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                              "out of host memory copying a fence");
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
  free(points);
}

hali_status_t hali_hal_fence_signal(hali_hal_fence_t *fence) {
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

void hali_hal_fence_fail(hali_hal_fence_t *fence, hali_status_t status) {
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

hali_status_t hali_hal_fence_query(hali_hal_fence_t *fence, bool *out_ready) {
  *out_ready = true;
  if (!fence) return HALI_OK;
  pthread_mutex_lock(&fence->mutex);
  hali_status_t failure = HALI_OK;
  for (size_t i = 0; i < fence->count; ++i) {
    uint64_t current = 0;
    hali_status_t status =
        hali_hal_semaphore_query(fence->points[i].semaphore, &current);
    if (status) {
      failure = status;
      *out_ready = true;
      break;
    }
    if (current < fence->points[i].value) *out_ready = false;
  }
  pthread_mutex_unlock(&fence->mutex);
  return failure;
}

static int64_t hali_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Awaits |count| points within a deadline derived from |timeout_ns|. */
static hali_status_t hali_hal_fence_await_points(
    const hali_hal_fence_point_t *points, size_t count,
    hali_timeout_ns_t timeout_ns) {
  int64_t deadline = timeout_ns > 0 ? hali_now_ns() + timeout_ns : 0;
  for (size_t i = 0; i < count; ++i) {
    hali_timeout_ns_t remaining = timeout_ns;
    if (timeout_ns > 0) {
      remaining = deadline - hali_now_ns();
      if (remaining < 0) remaining = 0;
    }
    hali_status_t status =
        hali_hal_semaphore_wait(points[i].semaphore, points[i].value, remaining);
    if (status)
      return hali_status_annotate(status,
                                  "awaiting fence point %zu of %zu (timeout "
                                  "%" PRId64 " ns)",
                                  i, count, timeout_ns);
  }
  return HALI_OK;
}

hali_status_t hali_hal_fence_await(hali_hal_fence_t *fence,
                                   hali_timeout_ns_t timeout_ns) {
  return hali_hal_fence_await_all(&fence, 1, timeout_ns);
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
