/* hali HAL — fences (see hal/fence.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "hal/fence.h"
#include "hal/semaphore_lock.h"
#include "base/alloc.h"

#include <stdio.h>
#include <string.h>

#include "base/checked.h"
#include "base/clock.h"

typedef struct hali_hal_fence_point_t {
  hali_hal_semaphore_t *semaphore; /* retained */
  uint64_t value;
} hali_hal_fence_point_t;

struct hali_hal_fence_t {
  hali_ref_t ref;
  hali_small_lock_t lock; /* hal/semaphore_lock.h */
  /* Guarded by |lock|. */
  size_t count;
  size_t capacity;
  hali_hal_fence_point_t *points; /* |first| until a second point */
  /* Past FENCE_INDEX_MIN points, an open-addressing index from semaphore
   * to point (slot = point + 1, 0 = empty; capacity a power of two at
   * least twice |count|), so adding a point costs O(1) however many the
   * fence has: joining N fences one at a time is O(N), not O(N^2). */
  uint32_t *index;
  size_t index_capacity;
  /* What the fence's producer attached (a spawned fiber's results): owned,
   * freed with |payload_free|; dropped when a join adds points in place. */
  void *payload;
  void (*payload_free)(void *);
  /* Whose tracer the fence reports to (retained; NULL = none): read at
   * each line, so clearing the allocator's tracer silences the fence. */
  hali_hal_allocator_t *traced_by;
  /* The first point's storage: a fence of one point (most of them) makes
   * no second allocation for it. */
  hali_hal_fence_point_t first;
  /* A spawn fence of a pool's (hali_hal_fence_pool_t): the fence and its
   * semaphore share one block, which goes back to the pool once both are
   * destroyed.  NULL: the fence alone was allocated. */
  struct fence_pair_s *pair;
};

/* ---- The pool of spawn fences.
 *
 * hali_hal_fence_create_pending_pooled makes a fence and its semaphore in
 * one block (a pair) taken from the pool; the pair comes back when both
 * are destroyed (a group may keep the semaphore after the fence is gone),
 * on whatever thread drops the last reference.  Each pair points back at
 * its pool, which therefore lives until its owner closed it and every
 * pair handed out came back. */
typedef struct fence_pair_s {
  hali_hal_fence_t fence;
  /* Of fence and semaphore, not destroyed: 2 for a spawn fence, 1 for a
   * fence alone (hal.fence.offset's, whose semaphore storage is unused:
   * one size of block serves both). */
  atomic_int parts;
  struct hali_hal_fence_pool_t *pool;
  struct fence_pair_s *next;       /* in the pool's free list */
  max_align_t semaphore[];         /* hali_hal_semaphore_storage_size() */
} fence_pair_t;

struct hali_hal_fence_pool_t {
  hali_small_lock_t lock;
  /* Guarded by |lock|. */
  fence_pair_t *free; /* kept for reuse, linked through |next| */
  size_t kept, max_kept;
  size_t out;         /* handed out and not back yet */
  bool closed;        /* the owner let go: freed when |out| is 0 */
};

hali_status_t hali_hal_fence_pool_create(size_t max_kept,
                                         hali_hal_fence_pool_t **out_pool) {
  *out_pool = NULL;
  hali_hal_fence_pool_t *pool = hali_malloc(sizeof(*pool));
  if (!pool)
    return hali_status_annotate(hali_status_oom(), "creating a fence pool");
  memset(pool, 0, sizeof(*pool));
  hali_small_lock_init(&pool->lock);
  pool->max_kept = max_kept;
  *out_pool = pool;
  return HALI_OK;
}

static void pool_free_list(fence_pair_t *p) {
  while (p) {
    fence_pair_t *next = p->next;
    hali_free(p);
    p = next;
  }
}

void hali_hal_fence_pool_close(hali_hal_fence_pool_t *pool) {
  if (!pool) return;
  hali_small_lock(&pool->lock);
  pool->closed = true;
  fence_pair_t *list = pool->free;
  pool->free = NULL;
  pool->kept = 0;
  bool last = pool->out == 0;
  hali_small_unlock(&pool->lock);
  pool_free_list(list);
  if (last) {
    hali_small_lock_destroy(&pool->lock);
    hali_free(pool);
  }
}

/* One part of |pair| (its fence or its semaphore) is destroyed; the
 * second returns the pair to its pool (or frees it). */
static void pair_part_done(fence_pair_t *pair) {
  if (atomic_fetch_sub_explicit(&pair->parts, 1, memory_order_acq_rel) != 1)
    return;
  hali_hal_fence_pool_t *pool = pair->pool;
  hali_small_lock(&pool->lock);
  pool->out--;
  bool keep = !pool->closed && pool->kept < pool->max_kept;
  if (keep) {
    pair->next = pool->free;
    pool->free = pair;
    pool->kept++;
  }
  bool last = pool->closed && pool->out == 0;
  hali_small_unlock(&pool->lock);
  if (!keep) hali_free(pair);
  if (last) {
    hali_small_lock_destroy(&pool->lock);
    hali_free(pool);
  }
}

static void pair_semaphore_done(hali_hal_semaphore_t *semaphore) {
  pair_part_done((fence_pair_t *)((char *)semaphore -
                                  offsetof(fence_pair_t, semaphore)));
}

static void hali_hal_fence_destroy(hali_ref_t *ref) {
  hali_hal_fence_t *fence = (hali_hal_fence_t *)ref;
  for (size_t i = 0; i < fence->count; ++i)
    hali_hal_semaphore_release(fence->points[i].semaphore);
  if (fence->points != &fence->first) hali_free(fence->points);
  hali_free(fence->index);
  if (fence->payload_free) fence->payload_free(fence->payload);
  hali_hal_allocator_release(fence->traced_by);
  hali_small_lock_destroy(&fence->lock);
  if (fence->pair) pair_part_done(fence->pair);
  else hali_free(fence);
}

static const hali_ref_vtable_t hali_hal_fence_vtable = {
    .destroy = hali_hal_fence_destroy,
};

static void fence_init(hali_hal_fence_t *fence) {
  hali_ref_init(&fence->ref, HALI_TYPE_FENCE, &hali_hal_fence_vtable);
  hali_small_lock_init(&fence->lock);
  fence->points = &fence->first;
  fence->capacity = 1;
}

hali_status_t hali_hal_fence_create(hali_hal_fence_t **out_fence) {
  *out_fence = NULL;
  /* malloc + memset, not calloc: glibc's calloc skips the per-thread
   * cache of freed blocks, and fences come and go at every spawn and
   * hal.fence.offset. */
  hali_hal_fence_t *fence = hali_malloc(sizeof(*fence));
  if (!fence)
    return hali_status_annotate(hali_status_oom(), "creating a fence");
  memset(fence, 0, sizeof(*fence));
  fence_init(fence);
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
  /* Two allocations, not one: a group keeps each member's semaphore (a
   * point) long after the member's fence is gone. */
  hali_hal_semaphore_t *semaphore = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_semaphore_create(0, &semaphore));
  hali_hal_fence_t *fence = NULL;
  hali_status_t status = hali_hal_fence_create(&fence);
  if (status) {
    hali_hal_semaphore_release(semaphore);
    return status;
  }
  /* Unshared yet: no lock.  The point takes the creation reference. */
  fence->first.semaphore = semaphore;
  fence->first.value = 1;
  fence->count = 1;
  *out_fence = fence;
  return HALI_OK;
}

void hali_hal_fence_pool_counts(hali_hal_fence_pool_t *pool, size_t *out_out,
                                size_t *out_kept) {
  hali_small_lock(&pool->lock);
  *out_out = pool->out;
  *out_kept = pool->kept;
  hali_small_unlock(&pool->lock);
}

/* A block of |pool| (kept or new) holding a fresh fence of no point that
 * returns the block when |parts| parts are destroyed; NULL when out of
 * memory. */
static fence_pair_t *pool_take(hali_hal_fence_pool_t *pool, int parts) {
  hali_small_lock(&pool->lock);
  fence_pair_t *pair = pool->free;
  if (pair) {
    pool->free = pair->next;
    pool->kept--;
  }
  pool->out++;
  hali_small_unlock(&pool->lock);
  if (!pair) {
    pair = hali_malloc(sizeof(*pair) + hali_hal_semaphore_storage_size());
    if (!pair) {
      hali_small_lock(&pool->lock);
      pool->out--; /* the owner still holds the pool: it is not closed */
      hali_small_unlock(&pool->lock);
      return NULL;
    }
  }
  hali_hal_fence_t *fence = &pair->fence;
  memset(fence, 0, sizeof(*fence));
  fence_init(fence);
  fence->pair = pair;
  atomic_init(&pair->parts, parts);
  pair->pool = pool;
  pair->next = NULL;
  return pair;
}

hali_status_t hali_hal_fence_create_pending_pooled(
    hali_hal_fence_pool_t *pool, hali_hal_fence_t **out_fence) {
  if (!pool) return hali_hal_fence_create_pending(out_fence);
  *out_fence = NULL;
  fence_pair_t *pair = pool_take(pool, 2);
  if (!pair)
    return hali_status_annotate(hali_status_oom(), "creating a fence");
  hali_hal_fence_t *fence = &pair->fence;
  /* The point takes the semaphore's creation reference. */
  fence->first.semaphore =
      hali_hal_semaphore_init_in(pair->semaphore, 0, pair_semaphore_done);
  fence->first.value = 1;
  fence->count = 1;
  *out_fence = fence;
  return HALI_OK;
}

void hali_hal_fence_retain(hali_hal_fence_t *fence) {
  if (fence) hali_ref_retain(&fence->ref);
}

void hali_hal_fence_release(hali_hal_fence_t *fence) {
  if (fence) hali_ref_release(&fence->ref);
}

#define FENCE_INDEX_MIN 8

static size_t fence_hash(const hali_hal_semaphore_t *semaphore, size_t mask) {
  uint64_t h = (uint64_t)(uintptr_t)semaphore;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return (size_t)h & mask;
}

/* The point on |semaphore|, or SIZE_MAX (caller holds |fence->lock|). */
static size_t fence_find_locked(const hali_hal_fence_t *fence,
                                const hali_hal_semaphore_t *semaphore) {
  if (!fence->index) {
    for (size_t i = 0; i < fence->count; ++i)
      if (fence->points[i].semaphore == semaphore) return i;
    return SIZE_MAX;
  }
  size_t mask = fence->index_capacity - 1;
  for (size_t h = fence_hash(semaphore, mask);; h = (h + 1) & mask) {
    uint32_t slot = fence->index[h];
    if (!slot) return SIZE_MAX;
    if (fence->points[slot - 1].semaphore == semaphore) return slot - 1;
  }
}

static void fence_index_put(uint32_t *index, size_t capacity,
                            const hali_hal_semaphore_t *semaphore,
                            size_t point) {
  size_t mask = capacity - 1;
  size_t h = fence_hash(semaphore, mask);
  while (index[h]) h = (h + 1) & mask;
  index[h] = (uint32_t)(point + 1);
}

/* Makes room for one more point, in the array and in the index (caller
 * holds |fence->lock|). */
static hali_status_t fence_grow_locked(hali_hal_fence_t *fence);

static hali_status_t fence_reserve_locked(hali_hal_fence_t *fence) {
  if (fence->count >= UINT32_MAX - 1)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "a fence has %zu points, the most one can hold",
                            fence->count);
  if (fence->count == fence->capacity)
    HALI_RETURN_IF_ERROR_PLAIN(fence_grow_locked(fence));
  size_t want = fence->count + 1;
  if (want > FENCE_INDEX_MIN && want * 2 > fence->index_capacity) {
    size_t capacity = fence->index_capacity ? fence->index_capacity * 2 : 32;
    while (capacity < want * 2) capacity *= 2;
    uint32_t *index = hali_calloc(capacity, sizeof(*index));
    if (!index)
      return hali_status_annotate(hali_status_oom(),
                                  "indexing a fence of %zu points", want);
    for (size_t i = 0; i < fence->count; ++i)
      fence_index_put(index, capacity, fence->points[i].semaphore, i);
    hali_free(fence->index);
    fence->index = index;
    fence->index_capacity = capacity;
  }
  return HALI_OK;
}

/* Doubles the room for points (caller holds |fence->lock|). */
static hali_status_t fence_grow_locked(hali_hal_fence_t *fence) {
  {
    size_t capacity = fence->capacity * 2;
    uint64_t bytes;
    if (hali_mul_overflows_u64(capacity, sizeof(hali_hal_fence_point_t),
                               &bytes) ||
        bytes > SIZE_MAX)
      return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                              "a fence of %zu points overflows", capacity);
    bool inline_points = fence->points == &fence->first;
    hali_hal_fence_point_t *grown = hali_realloc(
        inline_points ? NULL : fence->points, (size_t)bytes);
    if (!grown)
      return hali_status_annotate(hali_status_oom(),
                                  "growing a fence to %zu points", capacity);
    if (inline_points) grown[0] = fence->first;
    fence->points = grown;
    fence->capacity = capacity;
  }
  return HALI_OK;
}

/* Caller holds |fence->lock|. */
static hali_status_t hali_hal_fence_insert_locked(
    hali_hal_fence_t *fence, hali_hal_semaphore_t *semaphore, uint64_t value) {
  size_t at = fence_find_locked(fence, semaphore);
  if (at != SIZE_MAX) {
    if (fence->points[at].value < value) fence->points[at].value = value;
    return HALI_OK;
  }
  HALI_RETURN_IF_ERROR_PLAIN(fence_reserve_locked(fence));
  hali_hal_semaphore_retain(semaphore);
  fence->points[fence->count].semaphore = semaphore;
  fence->points[fence->count].value = value;
  if (fence->index)
    fence_index_put(fence->index, fence->index_capacity, semaphore,
                    fence->count);
  fence->count++;
  return HALI_OK;
}

hali_status_t hali_hal_fence_insert(hali_hal_fence_t *fence,
                                    hali_hal_semaphore_t *semaphore,
                                    uint64_t value) {
  hali_small_lock(&fence->lock);
  hali_status_t status = hali_hal_fence_insert_locked(fence, semaphore, value);
  hali_small_unlock(&fence->lock);
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
    hali_small_lock(&fence->lock);
    /* |joined| is not shared yet: no lock needed for it. */
    for (size_t i = 0; i < fence->count && !status; ++i)
      status = hali_hal_fence_insert_locked(joined, fence->points[i].semaphore,
                                            fence->points[i].value);
    hali_small_unlock(&fence->lock);
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
  hali_small_lock(&fence->lock);
  size_t count = fence->count;
  hali_small_unlock(&fence->lock);
  return count;
}

size_t hali_hal_fence_points_peek(hali_hal_fence_t *fence, size_t max,
                                  hali_hal_semaphore_t **out_semaphores,
                                  uint64_t *out_values) {
  if (!fence) return 0;
  hali_small_lock(&fence->lock);
  size_t count = fence->count;
  for (size_t i = 0; i < count && i < max; ++i) {
    out_semaphores[i] = fence->points[i].semaphore;
    out_values[i] = fence->points[i].value;
  }
  hali_small_unlock(&fence->lock);
  return count;
}

hali_status_t hali_hal_fence_create_offset(hali_hal_fence_t *from,
                                           uint64_t delta,
                                           hali_hal_fence_t **out_fence,
                                           size_t *out_overflow_point,
                                           uint64_t *out_overflow_value) {
  return hali_hal_fence_create_offset_pooled(
      NULL, from, delta, out_fence, out_overflow_point, out_overflow_value);
}

hali_status_t hali_hal_fence_create_offset_pooled(
    hali_hal_fence_pool_t *pool, hali_hal_fence_t *from, uint64_t delta,
    hali_hal_fence_t **out_fence, size_t *out_overflow_point,
    uint64_t *out_overflow_value) {
  *out_fence = NULL;
  *out_overflow_point = SIZE_MAX;
  *out_overflow_value = 0;
  hali_hal_fence_t *fence = NULL;
  if (pool) {
    fence_pair_t *pair = pool_take(pool, 1);
    if (!pair)
      return hali_status_annotate(hali_status_oom(), "creating a fence");
    fence = &pair->fence;
  } else {
    HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_create(&fence));
  }
  hali_status_t status = HALI_OK;
  if (from) {
    /* |fence| is not shared yet: only |from|'s lock. */
    hali_small_lock(&from->lock);
    for (size_t i = 0; i < from->count && !status; ++i) {
      uint64_t raised;
      if (hali_add_overflows_u64(from->points[i].value, delta, &raised)) {
        *out_overflow_point = i;
        *out_overflow_value = from->points[i].value;
        break;
      }
      if (!fence->count) {
        /* The first point goes into |first|: no search, no room to make
         * (|from|'s points have distinct semaphores). */
        hali_hal_semaphore_retain(from->points[i].semaphore);
        fence->first.semaphore = from->points[i].semaphore;
        fence->first.value = raised;
        fence->count = 1;
        continue;
      }
      status = hali_hal_fence_insert_locked(fence, from->points[i].semaphore,
                                            raised);
    }
    hali_small_unlock(&from->lock);
  }
  if (status || *out_overflow_point != SIZE_MAX) {
    hali_hal_fence_release(fence);
    return status;
  }
  *out_fence = fence;
  return HALI_OK;
}

bool hali_hal_fence_reuse_offset(hali_hal_fence_t *fence,
                                 hali_hal_fence_t *from, uint64_t delta,
                                 hali_hal_allocator_t *trace_to) {
  /* Acquire: pairs with the release of the last other reference dropped,
   * so everything its holder did to the fence happened before. */
  if (!fence || !from ||
      atomic_load_explicit(&fence->ref.count, memory_order_acquire) != 1 ||
      fence->count != 1 || fence->payload || fence->index)
    return false;
  hali_hal_semaphore_t *sem = NULL;
  uint64_t base = 0;
  if (from == fence) {
    sem = fence->points[0].semaphore;
    base = fence->points[0].value;
  } else {
    hali_small_lock(&from->lock);
    if (from->count == 1) {
      sem = from->points[0].semaphore;
      base = from->points[0].value;
    }
    hali_small_unlock(&from->lock);
  }
  uint64_t raised;
  if (sem != fence->points[0].semaphore ||
      hali_add_overflows_u64(base, delta, &raised))
    return false;
  fence->points[0].value = raised;
  fence->ref.id = hali_ref_next_id();
  if (fence->traced_by != trace_to) hali_hal_fence_trace_to(fence, trace_to);
  return true;
}

void hali_hal_fence_point(hali_hal_fence_t *fence, size_t i,
                          hali_hal_semaphore_t **out_semaphore,
                          uint64_t *out_value) {
  hali_small_lock(&fence->lock);
  *out_semaphore = i < fence->count ? fence->points[i].semaphore : NULL;
  *out_value = i < fence->count ? fence->points[i].value : 0;
  hali_small_unlock(&fence->lock);
}

void hali_hal_fence_mark_host_visible(hali_hal_fence_t *fence) {
  if (!fence) return;
  hali_small_lock(&fence->lock);
  for (size_t i = 0; i < fence->count; ++i)
    hali_hal_semaphore_mark_host_visible(fence->points[i].semaphore);
  hali_small_unlock(&fence->lock);
}

bool hali_hal_fence_host_may_signal(hali_hal_fence_t *fence) {
  if (!fence) return false;
  bool may = false;
  hali_small_lock(&fence->lock); /* lock order: fence -> semaphore */
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
  hali_small_unlock(&fence->lock);
  return may;
}

/* Copies the points (retaining each semaphore) so the caller can block or
 * signal without holding the fence lock: into |local| (SNAPSHOT_LOCAL
 * points, the caller's) when they fit, else into an allocation.  Release
 * with hali_hal_fence_points_free. */
#define SNAPSHOT_LOCAL 4
static hali_status_t hali_hal_fence_snapshot(hali_hal_fence_t *fence,
                                             hali_hal_fence_point_t *local,
                                             hali_hal_fence_point_t **out,
                                             size_t *out_count, bool retain) {
  *out = NULL;
  *out_count = 0;
  if (!fence) return HALI_OK;
  hali_small_lock(&fence->lock);
  size_t count = fence->count;
  hali_hal_fence_point_t *points = NULL;
  if (count) {
    points = count <= SNAPSHOT_LOCAL ? local
                                     : hali_malloc(count * sizeof(*points));
    if (!points) {
      hali_small_unlock(&fence->lock);
      return hali_status_annotate(hali_status_oom(), "copying a fence");
    }
    for (size_t i = 0; i < count; ++i) {
      points[i] = fence->points[i];
      if (retain) hali_hal_semaphore_retain(points[i].semaphore);
    }
  }
  hali_small_unlock(&fence->lock);
  *out = points;
  *out_count = count;
  return HALI_OK;
}

static void hali_hal_fence_points_free(hali_hal_fence_point_t *local,
                                       hali_hal_fence_point_t *points,
                                       size_t count, bool retained) {
  for (size_t i = 0; retained && i < count; ++i)
    hali_hal_semaphore_release(points[i].semaphore);
  if (points != local) hali_free(points);
}

hali_status_t hali_hal_fence_signal_untraced(hali_hal_fence_t *fence) {
  hali_hal_fence_point_t *points;
  size_t count;
  hali_hal_fence_point_t local[SNAPSHOT_LOCAL];
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_fence_snapshot(fence, local, &points, &count, false));
  /* Not retained: the caller's reference keeps the fence, and a fence
   * keeps its points' semaphores (points are never removed). */
  hali_status_t first = HALI_OK;
  for (size_t i = 0; i < count; ++i) {
    /* Points already reached are left alone. */
    hali_status_t status =
        hali_hal_semaphore_advance(points[i].semaphore, points[i].value);
    if (status && !first)
      first = hali_status_annotate(status, "signalling fence point %zu of %zu",
                                   i, count);
    else
      hali_status_free(status);
  }
  hali_hal_fence_points_free(local, points, count, false);
  return first;
}

void hali_hal_fence_fail_untraced(hali_hal_fence_t *fence,
                                  hali_status_t status) {
  hali_hal_fence_point_t *points;
  size_t count;
  hali_hal_fence_point_t local[SNAPSHOT_LOCAL];
  hali_status_t snapshot =
      hali_hal_fence_snapshot(fence, local, &points, &count, false);
  if (snapshot) {
    /* Out of memory: fail what we can see under the lock instead. */
    hali_status_free(snapshot);
    count = 0;
    points = NULL;
  }
  for (size_t i = 0; i < count; ++i)
    hali_hal_semaphore_fail(points[i].semaphore, hali_status_clone(status));
  hali_hal_fence_points_free(local, points, count, false);
  hali_status_free(status);
}

hali_status_t hali_hal_fence_query_untraced(hali_hal_fence_t *fence,
                                           bool *out_ready) {
  *out_ready = true;
  if (!fence) return HALI_OK;
  hali_small_lock(&fence->lock);
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
  hali_small_unlock(&fence->lock);
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
  hali_hal_fence_point_t local[SNAPSHOT_LOCAL], *points;
  size_t point_count;
  hali_status_t status =
      hali_hal_fence_snapshot(joined, local, &points, &point_count, true);
  hali_hal_fence_release(joined);
  if (status) return status;
  status = hali_hal_fence_await_points(points, point_count, timeout_ns);
  hali_hal_fence_points_free(local, points, point_count, true);
  return status;
}

/* Drops the points of |fence| (locked, unshared) that are reached for
 * good: a semaphore only this fence holds that reached its value without
 * failing can never fail or move back, so the point can never matter
 * again.  Keeps the order of the others and rebuilds the index. */
#define FENCE_COMPACT_MIN 16
static hali_status_t fence_compact_locked(hali_hal_fence_t *fence) {
  size_t kept = 0;
  for (size_t i = 0; i < fence->count; ++i) {
    hali_hal_fence_point_t p = fence->points[i];
    if (hali_hal_semaphore_reached_for_good(p.semaphore, p.value)) {
      hali_hal_semaphore_release(p.semaphore);
      continue;
    }
    fence->points[kept++] = p;
  }
  if (kept != fence->count) {
    fence->count = kept;
    if (fence->index) {
      memset(fence->index, 0, fence->index_capacity * sizeof(*fence->index));
      for (size_t i = 0; i < kept; ++i)
        fence_index_put(fence->index, fence->index_capacity,
                        fence->points[i].semaphore, i);
    }
  }
  /* More than half full still: grow now, so that the next compaction is
   * at least capacity / 2 insertions away (O(1) amortised). */
  return kept > fence->capacity / 2 ? fence_grow_locked(fence) : HALI_OK;
}

hali_status_t hali_hal_fence_join_into(hali_hal_fence_t *into,
                                       hali_hal_fence_t *from) {
  if (!from || from == into) return HALI_OK;
  /* Lock order: |into| (unshared by contract) before |from|. */
  hali_small_lock(&into->lock);
  if (into->payload_free) into->payload_free(into->payload);
  into->payload = NULL;
  into->payload_free = NULL;
  /* Full: before it grows, drop the points reached for good (a group of
   * fibers that already ended).  Only here, where nobody else holds
   * |into|: elsewhere a fence's points never change once handed out.
   * O(1) amortised: the array grows (doubles) whenever compaction leaves
   * it more than half full, so the next one is at least capacity / 2
   * insertions away. */
  hali_status_t status = HALI_OK;
  if (into->count == into->capacity && into->capacity >= FENCE_COMPACT_MIN)
    status = fence_compact_locked(into);
  hali_small_lock(&from->lock);
  for (size_t i = 0; i < from->count && !status; ++i)
    status = hali_hal_fence_insert_locked(into, from->points[i].semaphore,
                                          from->points[i].value);
  hali_small_unlock(&from->lock);
  hali_small_unlock(&into->lock);
  if (!status && !into->traced_by && from->traced_by)
    hali_hal_fence_trace_to(into, from->traced_by);
  const hali_hal_tracer_t *t = line_tracer(into);
  if (!status && t)
    hali_hal_tracer_printf(t, "[hal] fence.join !hal.fence#%u !hal.fence#%u "
                              "-> !hal.fence#%u (in place)",
                           hali_hal_trace_id(into), hali_hal_trace_id(from),
                           hali_hal_trace_id(into));
  return status;
}

bool hali_hal_fence_is_unshared(hali_hal_fence_t *fence) {
  return fence &&
         atomic_load_explicit(&fence->ref.count, memory_order_acquire) == 1;
}

void hali_hal_fence_set_payload(hali_hal_fence_t *fence, void *payload,
                                void (*payload_free)(void *)) {
  hali_small_lock(&fence->lock);
  void *old = fence->payload;
  void (*old_free)(void *) = fence->payload_free;
  fence->payload = payload;
  fence->payload_free = payload_free;
  hali_small_unlock(&fence->lock);
  if (old_free) old_free(old);
}

void *hali_hal_fence_payload(hali_hal_fence_t *fence,
                             void (*payload_free)(void *)) {
  hali_small_lock(&fence->lock);
  void *p = fence->payload_free == payload_free ? fence->payload : NULL;
  hali_small_unlock(&fence->lock);
  return p;
}
