/* hali HAL — allocator (see hal/allocator.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/allocator.h"
#include "base/alloc.h"
#include "hal/buffer.h"

struct hali_hal_allocator_t {
  hali_ref_t ref;
  pthread_mutex_t mutex;
  hali_hal_memory_hooks_t hooks; /* immutable */
  hali_hal_tracer_t tracer;      /* |line| NULL = off; set before use */
  uint8_t validate; /* hal/validate.h mode of the device; set before use */
  /* Guarded by |mutex|. */
  hali_hal_allocator_statistics_t stats;
  /* Storage freed without hooks or validation, kept for the next
   * allocation of the same rounded size (which zeroes it again): a program
   * allocating the same few buffers every step (a decode loop's slab and
   * results) reaches the host allocator once.  At most
   * HALI_HAL_STORAGE_CACHE_SLOTS blocks of HALI_HAL_STORAGE_CACHE_MAX bytes
   * or less, oldest first (a free into a full cache evicts the oldest);
   * freed with the allocator. */
  struct {
    void *storage;
    size_t size; /* storage_size() of the allocation */
  } cached[4];
  size_t cached_count;
};

enum {
  HALI_HAL_STORAGE_CACHE_SLOTS = 4,
  HALI_HAL_STORAGE_CACHE_MAX = 64 << 10,
};

/* Storage is handed out in whole alignment units. */
static size_t storage_size(hali_hal_device_size_t size) {
  const uint64_t align = HALI_HAL_ALLOCATOR_ALIGNMENT;
  size_t rounded = (size_t)((size + align - 1) / align * align);
  return rounded ? rounded : (size_t)align;
}

static void hali_hal_allocator_destroy(hali_ref_t *ref) {
  hali_hal_allocator_t *allocator = (hali_hal_allocator_t *)ref;
  for (size_t i = 0; i < allocator->cached_count; ++i)
    hali_aligned_free(allocator->cached[i].storage);
  pthread_mutex_destroy(&allocator->mutex);
  hali_free(allocator);
}

static const hali_ref_vtable_t hali_hal_allocator_vtable = {
    .destroy = hali_hal_allocator_destroy,
};

static const char *hali_hal_bits_format(uint32_t bits, const char *const *names,
                                        size_t name_count, char *buf,
                                        size_t cap) {
  size_t used = 0;
  if (cap == 0) return buf;
  buf[0] = 0;
  if (bits == 0) {
    snprintf(buf, cap, "NONE");
    return buf;
  }
  for (size_t i = 0; i < 32; ++i) {
    if (!(bits & (1u << i))) continue;
    char unknown[16];
    const char *name = names[i < name_count ? i : 0];
    if (i >= name_count) {
      snprintf(unknown, sizeof(unknown), "0x%x", 1u << i);
      name = unknown;
    }
    int n = snprintf(buf + used, cap - used, "%s%s", used ? "|" : "", name);
    if (n < 0 || (size_t)n >= cap - used) break;
    used += (size_t)n;
  }
  return buf;
}

const char *hali_hal_memory_type_bits_format(hali_hal_memory_type_bits_t bits,
                                             char *buf, size_t cap) {
  static const char *const names[] = {"DEVICE_LOCAL",  "HOST_VISIBLE",
                                      "HOST_COHERENT", "HOST_CACHED",
                                      "DEVICE_VISIBLE", "TRANSIENT"};
  return hali_hal_bits_format(bits, names, sizeof(names) / sizeof(names[0]),
                              buf, cap);
}

const char *hali_hal_buffer_usage_bits_format(hali_hal_buffer_usage_bits_t bits,
                                              char *buf, size_t cap) {
  static const char *const names[] = {"TRANSFER", "DISPATCH", "MAPPING",
                                      "CONSTANT"};
  return hali_hal_bits_format(bits, names, sizeof(names) / sizeof(names[0]),
                              buf, cap);
}

void hali_hal_tracer_printf(const hali_hal_tracer_t *tracer, const char *fmt,
                            ...) {
  if (!tracer || !tracer->line) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  tracer->line(tracer->user, line);
}

const hali_hal_tracer_t *hali_hal_allocator_line_tracer(
    const hali_hal_allocator_t *allocator) {
  return allocator && HALI_UNLIKELY(allocator->tracer.line != NULL)
             ? &allocator->tracer
             : NULL;
}

void hali_hal_allocator_set_tracer(hali_hal_allocator_t *allocator,
                                   const hali_hal_tracer_t *tracer) {
  if (tracer) allocator->tracer = *tracer;
  else memset(&allocator->tracer, 0, sizeof(allocator->tracer));
}

hali_status_t hali_hal_allocator_create(
    const hali_hal_allocator_params_t *params,
    hali_hal_allocator_t **out_allocator) {
  *out_allocator = NULL;
  hali_hal_allocator_t *allocator = hali_calloc(1, sizeof(*allocator));
  if (!allocator)
    return hali_status_annotate(hali_status_oom(), "creating an allocator");
  hali_ref_init(&allocator->ref, HALI_TYPE_ALLOCATOR,
                &hali_hal_allocator_vtable);
  pthread_mutex_init(&allocator->mutex, NULL);
  if (params) {
    allocator->stats.max_bytes = params->max_bytes;
    if (params->hooks.alloc && params->hooks.free)
      allocator->hooks = params->hooks;
  }
  *out_allocator = allocator;
  return HALI_OK;
}

void hali_hal_allocator_retain(hali_hal_allocator_t *allocator) {
  if (allocator) hali_ref_retain(&allocator->ref);
}

void hali_hal_allocator_release(hali_hal_allocator_t *allocator) {
  if (allocator) hali_ref_release(&allocator->ref);
}

void hali_hal_allocator_query_statistics(
    hali_hal_allocator_t *allocator,
    hali_hal_allocator_statistics_t *out_statistics) {
  pthread_mutex_lock(&allocator->mutex);
  *out_statistics = allocator->stats;
  pthread_mutex_unlock(&allocator->mutex);
}

void hali_hal_allocator_reset_peak(hali_hal_allocator_t *allocator) {
  pthread_mutex_lock(&allocator->mutex);
  allocator->stats.bytes_peak = allocator->stats.bytes_live;
  pthread_mutex_unlock(&allocator->mutex);
}

void hali_hal_allocator_set_max_bytes(hali_hal_allocator_t *allocator,
                                      uint64_t max_bytes) {
  pthread_mutex_lock(&allocator->mutex);
  allocator->stats.max_bytes = max_bytes;
  pthread_mutex_unlock(&allocator->mutex);
}

hali_status_t hali_hal_allocator_allocate_storage(
    hali_hal_allocator_t *allocator, hali_hal_device_size_t size,
    uint8_t **out_storage) {
  *out_storage = NULL;
  const uint64_t align = HALI_HAL_ALLOCATOR_ALIGNMENT;
  if (size > SIZE_MAX - align || size > UINT64_MAX - align)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "allocation of %" PRIu64
                            " bytes exceeds the host address space",
                            size);
  /* Reserve against the limit first so concurrent allocations cannot both
   * squeeze under it. */
  pthread_mutex_lock(&allocator->mutex);
  hali_hal_allocator_statistics_t *st = &allocator->stats;
  if (st->max_bytes &&
      (size > st->max_bytes || st->bytes_live > st->max_bytes - size)) {
    uint64_t live = st->bytes_live, max = st->max_bytes;
    pthread_mutex_unlock(&allocator->mutex);
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "allocating %" PRIu64
                            " bytes would exceed the allocator limit of %" PRIu64
                            " bytes (%" PRIu64 " bytes live)",
                            size, max, live);
  }
  st->bytes_live += size;
  if (st->bytes_live > st->bytes_peak) st->bytes_peak = st->bytes_live;
  st->allocation_count++;
  st->allocations_live++;
  size_t rounded = storage_size(size);
  void *p = NULL;
  for (size_t i = allocator->cached_count; i-- > 0;) /* newest first */
    if (allocator->cached[i].size == rounded) {
      p = allocator->cached[i].storage;
      memmove(&allocator->cached[i], &allocator->cached[i + 1],
              (--allocator->cached_count - i) * sizeof(allocator->cached[0]));
      break;
    }
  pthread_mutex_unlock(&allocator->mutex);

  if (!p && allocator->hooks.alloc) /* (a cached block is zeroed below) */
    p = allocator->hooks.alloc(allocator->hooks.user, rounded, (size_t)align);
  else if (!p)
    p = hali_aligned_alloc((size_t)align, rounded);
  if (!p) {
    hali_hal_allocator_free_storage(allocator, NULL, size);
    /* Device memory a program asked for, not the runtime's own: the size
     * belongs in the message (tests/passes/run.test expects it). */
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "out of host memory allocating %" PRIu64 " bytes",
                            size);
  }
  memset(p, 0, rounded);
  *out_storage = p;
  return HALI_OK;
}

void hali_hal_allocator_free_storage(hali_hal_allocator_t *allocator,
                                     uint8_t *storage,
                                     hali_hal_device_size_t size) {
  const size_t rounded = storage_size(size);
  if (storage && !allocator->hooks.free && !allocator->validate &&
      rounded <= HALI_HAL_STORAGE_CACHE_MAX) {
    /* Full: the oldest block goes (sizes a program stopped using, say a
     * prefill's, give way to the ones it allocates every step). */
    void *evicted = NULL;
    pthread_mutex_lock(&allocator->mutex);
    if (allocator->cached_count == HALI_HAL_STORAGE_CACHE_SLOTS) {
      evicted = allocator->cached[0].storage;
      memmove(&allocator->cached[0], &allocator->cached[1],
              (HALI_HAL_STORAGE_CACHE_SLOTS - 1) * sizeof(allocator->cached[0]));
      --allocator->cached_count;
    }
    allocator->cached[allocator->cached_count].storage = storage;
    allocator->cached[allocator->cached_count++].size = rounded;
    allocator->stats.bytes_live -= size;
    allocator->stats.allocations_live--;
    pthread_mutex_unlock(&allocator->mutex);
    hali_aligned_free(evicted);
    return;
  }
  if (storage && allocator->hooks.free)
    allocator->hooks.free(allocator->hooks.user, storage, rounded);
  else
    hali_aligned_free(storage);
  pthread_mutex_lock(&allocator->mutex);
  allocator->stats.bytes_live -= size;
  allocator->stats.allocations_live--;
  pthread_mutex_unlock(&allocator->mutex);
}

hali_status_t hali_hal_allocator_allocate_buffer(
    hali_hal_allocator_t *allocator, hali_hal_buffer_params_t params,
    hali_hal_device_size_t size, hali_hal_buffer_t **out_buffer) {
  *out_buffer = NULL;
  hali_hal_buffer_t *buffer = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_create_uncommitted(allocator, params, size, &buffer));
  hali_status_t status = hali_hal_buffer_commit(buffer);
  if (status) {
    hali_hal_buffer_release(buffer);
    return status;
  }
  if (HALI_UNLIKELY(allocator->tracer.line != NULL)) {
    char mt[96], us[96];
    hali_hal_tracer_printf(
        &allocator->tracer, "[hal] allocate %" PRIu64
        " bytes memory=%s usage=%s -> !hal.buffer#%u",
        size, hali_hal_memory_type_bits_format(params.memory_types, mt,
                                               sizeof(mt)),
        hali_hal_buffer_usage_bits_format(params.usage, us, sizeof(us)),
        ((hali_ref_t *)buffer)->id);
  }
  *out_buffer = buffer;
  return HALI_OK;
}

void hali_hal_allocator_set_validate(hali_hal_allocator_t *allocator,
                                     uint8_t mode) {
  allocator->validate = mode;
}

uint8_t hali_hal_allocator_validate_mode(const hali_hal_allocator_t *allocator) {
  return allocator ? allocator->validate : 0;
}
