/* hali HAL — command buffer recording (see hal/command_buffer.h; replay is
 * in hal/command_exec.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/binding_table.h"
#include "hal/buffer_impl.h"
#include "hal/command_list.h"
#include "hal/validate.h"
#include "base/alloc.h"

struct hali_hal_command_buffer_cache_t {
  atomic_uint refs;
  _Atomic(hali_hal_command_buffer_t *) spare;
};

/* Frees |cb|'s storage (its resources are released already). */
static void hali_hal_command_buffer_free(hali_hal_command_buffer_t *cb) {
  hali_free(cb->resources);
  hali_free(cb->data);
  hali_free(cb);
}

hali_status_t hali_hal_command_buffer_cache_create(
    hali_hal_command_buffer_cache_t **out_cache) {
  *out_cache = hali_calloc(1, sizeof(**out_cache));
  if (!*out_cache)
    return hali_status_annotate(hali_status_oom(),
                                "creating a command buffer cache");
  atomic_init(&(*out_cache)->refs, 1);
  atomic_init(&(*out_cache)->spare, NULL);
  return HALI_OK;
}

static void hali_hal_command_buffer_cache_retain(
    hali_hal_command_buffer_cache_t *cache) {
  atomic_fetch_add_explicit(&cache->refs, 1, memory_order_relaxed);
}

void hali_hal_command_buffer_cache_release(
    hali_hal_command_buffer_cache_t *cache) {
  if (!cache ||
      atomic_fetch_sub_explicit(&cache->refs, 1, memory_order_acq_rel) != 1)
    return;
  hali_hal_command_buffer_t *spare = atomic_load(&cache->spare);
  if (spare) hali_hal_command_buffer_free(spare);
  hali_free(cache);
}

bool hali_hal_command_buffer_cache_has_spare(
    hali_hal_command_buffer_cache_t *cache) {
  return atomic_load(&cache->spare) !=
         NULL;
}

static void hali_hal_command_buffer_destroy(hali_ref_t *ref) {
  hali_hal_command_buffer_t *cb = (hali_hal_command_buffer_t *)ref;
  if (cb->base) { /* bound (hal/binding_table.h): its table, no records */
    for (size_t i = 0; i < cb->table.binding_count; ++i)
      hali_hal_buffer_release(cb->table_entries[i].buffer);
    hali_free(cb->table_entries);
    hali_free(cb->table_constants);
    hali_hal_command_buffer_release(cb->base);
    hali_free(cb);
    return;
  }
  for (size_t i = 0; i < cb->resource_count; ++i)
    hali_ref_release(cb->resources[i]);
  /* The replay program goes with its recording, cached or not. */
  hali_hal_command_list_program_free(cb->program);
  cb->program = NULL;
  hali_free(cb->slots);
  cb->slots = NULL;
  cb->slot_count = 0;
  cb->constant_slot_count = 0;
  if (HALI_UNLIKELY(cb->validate_state != NULL))
    hali_hal_validate_command_buffer_free(cb);
  hali_hal_command_buffer_cache_t *cache = cb->cache;
  if (cache && cb->capacity <= HALI_HAL_COMMAND_CACHE_MAX_BYTES &&
      cb->resource_capacity * sizeof(*cb->resources) <=
          HALI_HAL_COMMAND_CACHE_MAX_BYTES) {
    /* Kept with its arrays; create_cached resets the rest. */
    cb->cache = NULL;
    hali_hal_command_buffer_t *old = atomic_exchange(&cache->spare, cb);
    if (old) hali_hal_command_buffer_free(old);
  } else {
    hali_hal_command_buffer_free(cb);
  }
  hali_hal_command_buffer_cache_release(cache);
}

static const hali_ref_vtable_t hali_hal_command_buffer_vtable = {
    .destroy = hali_hal_command_buffer_destroy,
};

hali_status_t hali_hal_command_buffer_create(
    hali_hal_command_buffer_mode_bits_t mode,
    hali_hal_command_category_bits_t categories,
    hali_hal_command_buffer_t **out_command_buffer) {
  return hali_hal_command_buffer_create_cached(NULL, mode, categories,
                                               out_command_buffer);
}

hali_status_t hali_hal_command_buffer_create_cached(
    hali_hal_command_buffer_cache_t *cache,
    hali_hal_command_buffer_mode_bits_t mode,
    hali_hal_command_category_bits_t categories,
    hali_hal_command_buffer_t **out_command_buffer) {
  *out_command_buffer = NULL;
  if (mode & ~(uint32_t)HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown command buffer mode bits 0x%x", mode);
  if (!categories || (categories & ~(uint32_t)HALI_HAL_COMMAND_CATEGORY_ANY))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "invalid command categories 0x%x (need TRANSFER "
                            "and/or DISPATCH)",
                            categories);
  hali_hal_command_buffer_t *cb =
      cache ? atomic_exchange(&cache->spare, NULL) : NULL;
  if (cb) {
    /* A destroyed one: everything but its arrays back to the state
     * calloc gives (the bindings are read only where |bindings_set| says
     * they were pushed). */
    cb->finalized = false;
    cb->dispatches_checked = false;
    cb->size = 0;
    cb->command_count = 0;
    cb->collective_count = 0;
    cb->resource_count = 0;
    cb->constants_set = 0;
    cb->bindings_set = 0;
    cb->last_executable = NULL;
    cb->last_root = NULL;
    memset(&cb->tracer, 0, sizeof(cb->tracer));
    cb->validate = 0;
  } else {
    cb = hali_calloc(1, sizeof(*cb));
    if (!cb)
      return hali_status_annotate(hali_status_oom(),
                                  "creating a command buffer");
  }
  hali_ref_init(&cb->ref, HALI_TYPE_COMMAND_BUFFER,
                &hali_hal_command_buffer_vtable);
  cb->mode = mode;
  cb->categories = categories;
  atomic_init(&cb->submitted, false);
  if (cache) hali_hal_command_buffer_cache_retain(cache);
  cb->cache = cache;
  *out_command_buffer = cb;
  return HALI_OK;
}

void hali_hal_command_buffer_set_tracer(hali_hal_command_buffer_t *cb,
                                        const hali_hal_tracer_t *tracer) {
  if (tracer) cb->tracer = *tracer;
  else memset(&cb->tracer, 0, sizeof(cb->tracer));
}

/* A [hal] line about |cb| (nothing when it has no tracer). */
#define CB_TRACE(cb, fmt, ...)                                                 \
  do {                                                                         \
    if (HALI_UNLIKELY((cb)->tracer.line != NULL))                              \
      hali_hal_tracer_printf(&(cb)->tracer, "[hal] command_buffer#%u " fmt,    \
                             hali_hal_trace_id(cb), __VA_ARGS__);              \
  } while (0)

void hali_hal_command_buffer_retain(hali_hal_command_buffer_t *cb) {
  if (cb) hali_ref_retain(&cb->ref);
}

void hali_hal_command_buffer_release(hali_hal_command_buffer_t *cb) {
  if (cb) hali_ref_release(&cb->ref);
}

hali_hal_command_buffer_mode_bits_t hali_hal_command_buffer_mode(
    const hali_hal_command_buffer_t *cb) {
  return cb->mode;
}

hali_hal_command_category_bits_t hali_hal_command_buffer_categories(
    const hali_hal_command_buffer_t *cb) {
  return cb->categories;
}

bool hali_hal_command_buffer_is_finalized(const hali_hal_command_buffer_t *cb) {
  return cb->finalized;
}

size_t hali_hal_command_buffer_command_count(
    const hali_hal_command_buffer_t *cb) {
  return cb->command_count;
}

/* ---- Recording helpers. ---- */

static hali_status_t hali_hal_command_buffer_check_recording(
    const hali_hal_command_buffer_t *cb, hali_hal_command_category_bits_t need,
    const char *what) {
  if (cb->finalized)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "cannot record %s: the command buffer is "
                            "finalized",
                            what);
  if ((cb->categories & need) != need)
    return hali_status_make(HALI_STATUS_PERMISSION_DENIED,
                            "cannot record %s in a command buffer without the "
                            "%s category (categories 0x%x)",
                            what,
                            need == HALI_HAL_COMMAND_CATEGORY_DISPATCH
                                ? "DISPATCH"
                                : "TRANSFER",
                            cb->categories);
  return HALI_OK;
}

/* Reserves room for the resources a record will add, so that appending
 * them after the record is built cannot fail. */
static hali_status_t hali_hal_command_buffer_grow_resources(
    hali_hal_command_buffer_t *cb, size_t extra) {
  size_t capacity = cb->resource_capacity ? cb->resource_capacity : 8;
  while (capacity < cb->resource_count + extra) capacity *= 2;
  hali_ref_t **grown = hali_realloc(cb->resources, capacity * sizeof(*grown));
  if (!grown)
    return hali_status_annotate(hali_status_oom(), "recording a command");
  cb->resources = grown;
  cb->resource_capacity = capacity;
  return HALI_OK;
}

static inline hali_status_t hali_hal_command_buffer_reserve_resources(
    hali_hal_command_buffer_t *cb, size_t extra) {
  if (HALI_LIKELY(cb->resource_count + extra <= cb->resource_capacity))
    return HALI_OK;
  return hali_hal_command_buffer_grow_resources(cb, extra);
}

/* Retains |ref| into the (reserved) resource list; skips a repeat of the
 * last one, the common case of consecutive commands on one buffer. */
static inline void hali_hal_command_buffer_add_resource(
    hali_hal_command_buffer_t *cb, hali_ref_t *ref) {
  if (cb->resource_count && cb->resources[cb->resource_count - 1] == ref)
    return;
  hali_ref_retain(ref);
  cb->resources[cb->resource_count++] = ref;
}

/* Appends a zeroed record of |size| bytes (rounded up to 8); returns it via
 * |out_record|.  Resources for it must be reserved before, so nothing after
 * this call fails. */
static hali_status_t hali_hal_command_buffer_append_slow(
    hali_hal_command_buffer_t *cb, hali_hal_command_type_t type, size_t size,
    void **out_record) {
  *out_record = NULL;
  if (size > UINT32_MAX - 8)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "command of %zu bytes is too large to record",
                            size);
  size = (size + 7) & ~(size_t)7;
  if (HALI_UNLIKELY(cb->validate))
    HALI_RETURN_IF_ERROR_PLAIN(
        hali_hal_validate_on_record(cb, cb->command_count));
  if (cb->size + size > cb->capacity) {
    size_t capacity = cb->capacity ? cb->capacity : 256;
    while (capacity < cb->size + size) capacity *= 2;
    uint8_t *grown = hali_realloc(cb->data, capacity);
    if (!grown)
      return hali_status_annotate(hali_status_oom(),
                                  "recording a command of %zu "
                                  "bytes",
                                  size);
    cb->data = grown;
    cb->capacity = capacity;
  }
  hali_hal_command_header_t *h = (void *)(cb->data + cb->size);
  memset(h, 0, size);
  h->type = type;
  h->size = (uint32_t)size;
  cb->size += size;
  cb->command_count++;
  *out_record = h;
  return HALI_OK;
}

/* The common case inline: no validation, room in the array. */
static inline hali_status_t hali_hal_command_buffer_append(
    hali_hal_command_buffer_t *cb, hali_hal_command_type_t type, size_t size,
    void **out_record) {
  const size_t rounded = (size + 7) & ~(size_t)7;
  if (HALI_LIKELY(size <= 4096 && !cb->validate &&
                  cb->capacity - cb->size >= rounded)) {
    hali_hal_command_header_t *h = (void *)(cb->data + cb->size);
    memset(h, 0, rounded);
    h->type = type;
    h->size = (uint32_t)rounded;
    cb->size += rounded;
    cb->command_count++;
    *out_record = h;
    return HALI_OK;
  }
  return hali_hal_command_buffer_append_slow(cb, type, size, out_record);
}

/* ---- Transfer commands. ---- */

hali_status_t hali_hal_command_buffer_fill(hali_hal_command_buffer_t *cb,
                                           hali_hal_buffer_t *target,
                                           hali_hal_device_size_t offset,
                                           hali_hal_device_size_t length,
                                           uint32_t pattern,
                                           uint32_t pattern_length) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_check_recording(
      cb, HALI_HAL_COMMAND_CATEGORY_TRANSFER, "fill"));
  if (pattern_length != 1 && pattern_length != 2 && pattern_length != 4)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "fill pattern length %u is not 1, 2 or 4",
                            pattern_length);
  if (offset % pattern_length || length % pattern_length)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "fill offset %" PRIu64 " and length %" PRIu64
                            " must be multiples of the pattern length %u",
                            offset, length, pattern_length);
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_validate_range(target, offset, length, "fill target"));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_usage(
      target, HALI_HAL_BUFFER_USAGE_TRANSFER, "fill target"));
  HALI_RETURN_IF_ERROR(hali_hal_buffer_check_writable(target), "fill target");
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_reserve_resources(cb, 1));
  hali_hal_command_fill_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_FILL, sizeof(*cmd), (void **)&cmd));
  cmd->target = target;
  cmd->offset = offset;
  cmd->length = length;
  cmd->pattern = pattern_length == 4 ? pattern
                                     : pattern & ((1u << (8 * pattern_length)) - 1);
  cmd->pattern_length = pattern_length;
  hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)target);
  CB_TRACE(cb,
           "fill !hal.buffer#%u [%" PRIu64 ", +%" PRIu64 ") pattern=0x%x/%u",
           hali_hal_trace_id(target), offset, length, pattern, pattern_length);
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_copy(
    hali_hal_command_buffer_t *cb, hali_hal_buffer_t *source,
    hali_hal_device_size_t source_offset, hali_hal_buffer_t *target,
    hali_hal_device_size_t target_offset, hali_hal_device_size_t length) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_check_recording(
      cb, HALI_HAL_COMMAND_CATEGORY_TRANSFER, "copy"));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_range(
      source, source_offset, length, "copy source"));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_range(
      target, target_offset, length, "copy target"));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_usage(
      source, HALI_HAL_BUFFER_USAGE_TRANSFER, "copy source"));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_usage(
      target, HALI_HAL_BUFFER_USAGE_TRANSFER, "copy target"));
  HALI_RETURN_IF_ERROR(hali_hal_buffer_check_writable(target), "copy target");
  if (hali_hal_buffer_allocated_buffer(source) ==
      hali_hal_buffer_allocated_buffer(target)) {
    /* Both ranges are inside one allocation, so these sums cannot
     * overflow: each is bounded by the allocation's length. */
    uint64_t s = hali_hal_buffer_byte_offset(source) + source_offset;
    uint64_t t = hali_hal_buffer_byte_offset(target) + target_offset;
    if (length && s < t + length && t < s + length)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "copy source [%" PRIu64 ", %" PRIu64
                              ") and target [%" PRIu64 ", %" PRIu64
                              ") overlap in the same allocation",
                              s, s + length, t, t + length);
  }
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_reserve_resources(cb, 2));
  hali_hal_command_copy_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_COPY, sizeof(*cmd), (void **)&cmd));
  cmd->source = source;
  cmd->source_offset = source_offset;
  cmd->target = target;
  cmd->target_offset = target_offset;
  cmd->length = length;
  hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)source);
  hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)target);
  CB_TRACE(cb,
           "copy !hal.buffer#%u+%" PRIu64 " -> !hal.buffer#%u+%" PRIu64
           " %" PRIu64 " bytes",
           hali_hal_trace_id(source), source_offset, hali_hal_trace_id(target),
           target_offset, length);
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_update(hali_hal_command_buffer_t *cb,
                                             const void *source,
                                             hali_hal_buffer_t *target,
                                             hali_hal_device_size_t offset,
                                             hali_hal_device_size_t length) {
  return hali_hal_command_buffer_update_from(cb, source, "host", 0, target,
                                             offset, length);
}

hali_status_t hali_hal_command_buffer_update_from(
    hali_hal_command_buffer_t *cb, const void *source, const char *label,
    hali_hal_device_size_t label_offset, hali_hal_buffer_t *target,
    hali_hal_device_size_t offset, hali_hal_device_size_t length) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_check_recording(
      cb, HALI_HAL_COMMAND_CATEGORY_TRANSFER, "update"));
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_validate_range(target, offset, length, "update target"));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_usage(
      target, HALI_HAL_BUFFER_USAGE_TRANSFER, "update target"));
  HALI_RETURN_IF_ERROR(hali_hal_buffer_check_writable(target), "update target");
  if (length > SIZE_MAX - sizeof(hali_hal_command_update_t))
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "update of %" PRIu64 " bytes is too large", length);
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_reserve_resources(cb, 1));
  hali_hal_command_update_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_UPDATE, sizeof(*cmd) + (size_t)length,
      (void **)&cmd));
  cmd->target = target;
  cmd->offset = offset;
  cmd->length = length;
  if (length) memcpy(cmd->data, source, (size_t)length);
  hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)target);
  CB_TRACE(cb, "update %s+%" PRIu64 " -> !hal.buffer#%u+%" PRIu64
               " %" PRIu64 " bytes",
           label, label_offset, hali_hal_trace_id(target), offset, length);
  return HALI_OK;
}

/* ---- Dispatch commands. ---- */

/* push_constants and push_constant_slots: |values| (constants, or slot
 * indices for HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS) at [offset, offset +
 * count), recorded as |type|. */
static hali_status_t hali_hal_command_buffer_push(
    hali_hal_command_buffer_t *cb, hali_hal_command_type_t type,
    uint32_t offset, const uint32_t *values, uint32_t count) {
  const bool slots = type == HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS;
  const char *what = slots ? "push_constant_slots" : "push_constants";
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_check_recording(
      cb, HALI_HAL_COMMAND_CATEGORY_DISPATCH, what));
  if (offset > HALI_HAL_MAX_PUSH_CONSTANTS ||
      count > HALI_HAL_MAX_PUSH_CONSTANTS - offset)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "push constant%s [%u, %u + %u) exceed the %d "
                            "%savailable",
                            slots ? " slots" : "s", offset, offset, count,
                            HALI_HAL_MAX_PUSH_CONSTANTS,
                            slots ? "constants " : "");
  for (uint32_t i = 0; slots && i < count; ++i)
    if (values[i] >= HALI_HAL_MAX_SLOTS)
      return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                              "push_constant_slots: constant %u is slot %u "
                              "(at most %d slots)",
                              offset + i, values[i], HALI_HAL_MAX_SLOTS);
  hali_hal_command_push_constants_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, type, sizeof(*cmd) + count * sizeof(uint32_t), (void **)&cmd));
  cmd->offset = offset;
  cmd->count = count;
  for (uint32_t i = 0; i < count; ++i) {
    cmd->values[i] = values[i];
    /* A hint for finalize (hali_hal_command_list_collect_slots). */
    if (slots && values[i] + 1 > cb->constant_slot_count)
      cb->constant_slot_count = values[i] + 1;
  }
  /* offset + count <= 64 (checked above). */
  if (count)
    cb->constants_set |=
        (count >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << count) - 1) << offset;
  if (HALI_UNLIKELY(cb->tracer.line != NULL)) {
    char list[512];
    size_t n = 0;
    list[0] = 0;
    for (uint32_t i = 0; i < count && n < sizeof(list) - 16; ++i)
      n += (size_t)snprintf(list + n, sizeof(list) - n,
                            slots ? "%s%u" : "%s0x%x", i ? " " : "",
                            values[i]);
    CB_TRACE(cb, "%s at %u [%s]", what, offset, list);
  }
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_push_constants(
    hali_hal_command_buffer_t *cb, uint32_t offset, const uint32_t *values,
    uint32_t count) {
  return hali_hal_command_buffer_push(cb, HALI_HAL_COMMAND_PUSH_CONSTANTS,
                                      offset, values, count);
}

hali_status_t hali_hal_command_buffer_fill_slot(
    hali_hal_command_buffer_t *cb, hali_hal_buffer_t *target,
    hali_hal_device_size_t offset, hali_hal_device_size_t length,
    uint32_t constant_slot, uint32_t pattern_length) {
  if (constant_slot >= HALI_HAL_MAX_SLOTS)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "fill_slot: the pattern is constant slot %u (at "
                            "most %d slots)",
                            constant_slot, HALI_HAL_MAX_SLOTS);
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_fill(
      cb, target, offset, length, 0, pattern_length));
  /* fill appended its record last. */
  const size_t rounded = (sizeof(hali_hal_command_fill_t) + 7) & ~(size_t)7;
  hali_hal_command_fill_t *cmd = (void *)(cb->data + cb->size - rounded);
  cmd->pattern_slot = constant_slot + 1;
  if (constant_slot + 1 > cb->constant_slot_count)
    cb->constant_slot_count = constant_slot + 1;
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_bind(
    hali_hal_command_buffer_t *base,
    const hali_hal_binding_table_entry_t *bindings, size_t count,
    hali_hal_command_buffer_t **out_command_buffer) {
  *out_command_buffer = NULL;
  if (!base->finalized || base->base ||
      (base->mode & HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT))
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "binding a table to command buffer #%u: it must "
                            "be a finalized reusable recording",
                            hali_hal_trace_id(base));
  if (count > HALI_HAL_MAX_SLOTS)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "binding a table of %zu entries to command "
                            "buffer #%u (at most %d)",
                            count, hali_hal_trace_id(base),
                            HALI_HAL_MAX_SLOTS);
  hali_hal_command_buffer_t *cb = hali_calloc(1, sizeof(*cb));
  hali_hal_binding_table_entry_t *entries =
      cb ? hali_malloc((count ? count : 1) * sizeof(*entries)) : NULL;
  if (!entries) {
    hali_free(cb);
    return hali_status_annotate(hali_status_oom(),
                                "binding a table to command buffer #%u",
                                hali_hal_trace_id(base));
  }
  hali_ref_init(&cb->ref, HALI_TYPE_COMMAND_BUFFER,
                &hali_hal_command_buffer_vtable);
  cb->mode = HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT;
  cb->categories = base->categories;
  cb->finalized = true;
  cb->dispatches_checked = true;
  atomic_init(&cb->submitted, false);
  for (size_t i = 0; i < count; ++i) {
    entries[i] = bindings[i];
    hali_hal_buffer_retain(entries[i].buffer);
    /* A whole-buffer length is resolved now (the check refuses an offset
     * past the end first). */
    if (entries[i].buffer && entries[i].length == HALI_HAL_WHOLE_BUFFER &&
        entries[i].offset <= entries[i].buffer->length)
      entries[i].length = entries[i].buffer->length - entries[i].offset;
  }
  cb->table_entries = entries;
  cb->table.bindings = entries;
  cb->table.binding_count = count;
  cb->base = base;
  hali_hal_command_buffer_retain(base);
  *out_command_buffer = cb;
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_bind_constants(
    hali_hal_command_buffer_t *cb, const uint32_t *values, size_t count) {
  if (!cb->base || atomic_load(&cb->submitted))
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "binding constants to command buffer #%u: it is "
                            "not a bound command buffer waiting to be "
                            "submitted",
                            hali_hal_trace_id(cb));
  if (count > HALI_HAL_MAX_SLOTS)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "binding %zu constants to command buffer #%u (at "
                            "most %d)",
                            count, hali_hal_trace_id(cb), HALI_HAL_MAX_SLOTS);
  uint32_t *copy = hali_malloc((count ? count : 1) * sizeof(*copy));
  if (!copy)
    return hali_status_annotate(hali_status_oom(),
                                "binding %zu constants", count);
  if (count) memcpy(copy, values, count * sizeof(*copy));
  hali_free(cb->table_constants);
  cb->table_constants = copy;
  cb->table.constants = copy;
  cb->table.constant_count = count;
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_push_constant_slots(
    hali_hal_command_buffer_t *cb, uint32_t offset, const uint32_t *slots,
    uint32_t count) {
  return hali_hal_command_buffer_push(cb, HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS,
                                      offset, slots, count);
}

hali_status_t hali_hal_command_buffer_push_descriptor_set(
    hali_hal_command_buffer_t *cb, const hali_hal_buffer_binding_t *bindings,
    uint32_t count) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_check_recording(
      cb, HALI_HAL_COMMAND_CATEGORY_DISPATCH, "push_descriptor_set"));
  if (count > HALI_HAL_MAX_BINDINGS)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "push_descriptor_set of %u bindings exceeds the "
                            "maximum of %d",
                            count, HALI_HAL_MAX_BINDINGS);
  for (uint32_t i = 0; i < count; ++i) {
    const hali_hal_buffer_binding_t *b = &bindings[i];
    /* The common case (an explicit range that fits a buffer with DISPATCH
     * usage) costs three tests; the label is only formatted for the
     * checks below, which then give the errors they always gave (this
     * runs for every binding of every dispatch a program records). */
    if (HALI_LIKELY(b->ordinal < HALI_HAL_MAX_BINDINGS && b->buffer &&
                    b->length != HALI_HAL_WHOLE_BUFFER &&
                    hali_hal_range_fits(hali_hal_buffer_length(b->buffer),
                                        b->offset, b->length) &&
                    (hali_hal_buffer_usage(b->buffer) &
                     HALI_HAL_BUFFER_USAGE_DISPATCH)))
      continue;
    char what[64];
    snprintf(what, sizeof(what), "binding %u", b->ordinal);
    if (b->ordinal >= HALI_HAL_MAX_BINDINGS)
      return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                              "binding ordinal %u exceeds the maximum of %d",
                              b->ordinal, HALI_HAL_MAX_BINDINGS - 1);
    if (!b->buffer)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "binding %u has no buffer", b->ordinal);
    hali_hal_device_size_t length = b->length;
    HALI_RETURN_IF_ERROR_PLAIN(
        hali_hal_buffer_resolve_whole(b->buffer, b->offset, &length, what));
    HALI_RETURN_IF_ERROR_PLAIN(
        hali_hal_buffer_validate_range(b->buffer, b->offset, length, what));
    HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_validate_usage(
        b->buffer, HALI_HAL_BUFFER_USAGE_DISPATCH, what));
  }
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_command_buffer_reserve_resources(cb, count));
  hali_hal_command_push_descriptor_set_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET,
      sizeof(*cmd) + count * sizeof(hali_hal_command_binding_t),
      (void **)&cmd));
  cmd->count = count;
  for (uint32_t i = 0; i < count; ++i) {
    const hali_hal_buffer_binding_t *b = &bindings[i];
    hali_hal_command_binding_t *out = &cmd->bindings[i];
    /* A subspan is recorded as the range of its root: the same bytes (a
     * replay resolves through the root either way), and the recording
     * retains the root instead of every subspan of it. */
    hali_hal_buffer_t *root = b->buffer->allocated;
    out->ordinal = b->ordinal;
    out->buffer = root;
    out->offset = b->buffer->offset + b->offset; /* within root->length */
    out->length = b->length == HALI_HAL_WHOLE_BUFFER
                      ? hali_hal_buffer_length(b->buffer) - b->offset
                      : b->length;
    cb->bindings[b->ordinal] = *out;
    cb->bindings_set |= 1u << b->ordinal;
    hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)root);
    /* The range as given (HALI_HAL_WHOLE_BUFFER stays as such). */
    CB_TRACE(cb,
             "push_descriptor_set binding %u = !hal.buffer#%u [%" PRIu64
             ", +%" PRIu64 ")",
             b->ordinal, hali_hal_trace_id(b->buffer), b->offset, b->length);
  }
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_push_binding(
    hali_hal_command_buffer_t *cb, uint32_t ordinal, hali_hal_buffer_t *buffer,
    hali_hal_device_size_t offset, hali_hal_device_size_t length) {
  /* The common case, checked inline: recording, DISPATCH category, an
   * explicit range that fits a buffer with DISPATCH usage, no validation
   * or tracer.  Anything else takes the general path, which gives the
   * errors (and trace lines) it always gave and records the same. */
  enum { RECORD = (sizeof(hali_hal_command_push_descriptor_set_t) +
                   sizeof(hali_hal_command_binding_t) + 7) & ~7u };
  if (HALI_UNLIKELY(
          cb->finalized ||
          !(cb->categories & HALI_HAL_COMMAND_CATEGORY_DISPATCH) ||
          ordinal >= HALI_HAL_MAX_BINDINGS || !buffer ||
          length == HALI_HAL_WHOLE_BUFFER ||
          !hali_hal_range_fits(buffer->length, offset, length) ||
          !(buffer->usage & HALI_HAL_BUFFER_USAGE_DISPATCH) || cb->validate ||
          cb->tracer.line != NULL)) {
    const hali_hal_buffer_binding_t b = {ordinal, buffer, offset, length};
    return hali_hal_command_buffer_push_descriptor_set(cb, &b, 1);
  }
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_reserve_resources(cb, 1));
  hali_hal_command_push_descriptor_set_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET, RECORD, (void **)&cmd));
  cmd->count = 1;
  hali_hal_command_binding_t *out = &cmd->bindings[0];
  /* As push_descriptor_set records it: the root's range. */
  hali_hal_buffer_t *root = buffer->allocated;
  out->ordinal = ordinal;
  out->buffer = root;
  out->offset = buffer->offset + offset; /* within root->length */
  out->length = length;
  cb->bindings[ordinal] = *out;
  cb->bindings_set |= 1u << ordinal;
  /* The subspans of one allocation pushed in a row of dispatches (a
   * step's slab) retain it once. */
  if (root != cb->last_root) {
    hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)root);
    if (root != buffer) cb->last_root = root;
  }
  return HALI_OK;
}

/* The mask of the first |n| bits of 64. */
static inline uint64_t low_bits(uint32_t n) {
  return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

/* The error for a dispatch whose interface |e| is not all set in |state|
 * (the first constant or binding missing). */
static hali_status_t hali_hal_dispatch_missing(
    const hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_hal_executable_export_t *e,
    const hali_hal_dispatch_bindings_t *state) {
  for (uint32_t i = 0; i < e->constant_count; ++i)
    if (!(state->constants_set & ((uint64_t)1 << i)))
      return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                              "dispatch of executable '%s' export %u '%s' "
                              "needs %u push constants but constant %u was "
                              "never pushed",
                              hali_hal_executable_name(executable), ordinal,
                              e->name, e->constant_count, i);
  for (uint32_t i = 0; i < e->binding_count; ++i)
    if (!(state->bindings_set & (1u << i)))
      return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                              "dispatch of executable '%s' export %u '%s' "
                              "needs %u bindings but binding %u was never "
                              "pushed",
                              hali_hal_executable_name(executable), ordinal,
                              e->name, e->binding_count, i);
  return hali_status_make(HALI_STATUS_INTERNAL, "dispatch interface check");
}

/* hali_hal_dispatch_validate; |ranges| false skips the per-binding range
 * and usage checks, for state whose every binding passed them when it was
 * pushed (the recording's own: push_descriptor_set checks each binding,
 * and buffers' lengths and usage never change). */
static hali_status_t hali_hal_dispatch_validate_ex(
    const hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_hal_dispatch_bindings_t *state, bool ranges) {
  const hali_hal_executable_export_t *e =
      hali_hal_executable_export(executable, ordinal);
  if (!e)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "executable '%s' has no export %u (it has %u)",
                            hali_hal_executable_name(executable), ordinal,
                            hali_hal_executable_export_count(executable));
  /* Every declared constant and binding set: two mask tests (executables
   * declare at most 64 constants and 32 bindings). */
  const uint64_t need_c = low_bits(e->constant_count);
  const uint32_t need_b = (uint32_t)low_bits(e->binding_count);
  if (HALI_UNLIKELY((state->constants_set & need_c) != need_c ||
                    (state->bindings_set & need_b) != need_b))
    return hali_hal_dispatch_missing(executable, ordinal, e, state);
  if (!ranges) return HALI_OK;
  for (uint32_t i = 0; i < e->binding_count; ++i) {
    const hali_hal_command_binding_t *b = &state->bindings[i];
    /* The common case costs two tests; the label is only formatted for
     * the error (this runs for every binding of every dispatch). */
    if (HALI_LIKELY(hali_hal_range_fits(b->buffer->length, b->offset,
                                        b->length) &&
                    (b->buffer->usage & HALI_HAL_BUFFER_USAGE_DISPATCH)))
      continue;
    char what[64];
    snprintf(what, sizeof(what), "binding %u", i);
    HALI_RETURN_IF_ERROR(
        hali_hal_buffer_validate_range(b->buffer, b->offset, b->length, what),
        "dispatch of executable '%s' export %u '%s'",
        hali_hal_executable_name(executable), ordinal, e->name);
    HALI_RETURN_IF_ERROR(
        hali_hal_buffer_validate_usage(b->buffer,
                                       HALI_HAL_BUFFER_USAGE_DISPATCH, what),
        "dispatch of executable '%s' export %u '%s'",
        hali_hal_executable_name(executable), ordinal, e->name);
  }
  return HALI_OK;
}

hali_status_t hali_hal_dispatch_validate(
    const hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_hal_dispatch_bindings_t *state) {
  return hali_hal_dispatch_validate_ex(executable, ordinal, state, true);
}

hali_status_t hali_hal_dispatch_validate_workgroup_count_slow(
    const hali_hal_executable_t *executable, uint32_t ordinal, uint32_t x,
    uint32_t y, uint32_t z) {
  uint64_t total;
  bool wraps = hali_mul3_overflows_u64(x, y, z, &total);
  if (HALI_LIKELY(!wraps && x <= HALI_HAL_MAX_WORKGROUP_COUNT &&
                  y <= HALI_HAL_MAX_WORKGROUP_COUNT &&
                  z <= HALI_HAL_MAX_WORKGROUP_COUNT &&
                  total <= HALI_HAL_MAX_WORKGROUPS))
    return HALI_OK;
  const char *export_name = hali_hal_executable_export(executable, ordinal)->name;
  const uint32_t counts[3] = {x, y, z};
  for (int i = 0; i < 3; ++i)
    if (counts[i] > HALI_HAL_MAX_WORKGROUP_COUNT)
      return hali_status_make(
          HALI_STATUS_OUT_OF_RANGE,
          "dispatch of executable '%s' export %u '%s': workgroup count %c "
          "%" PRIu32 " exceeds the maximum of %u per dimension (grid %" PRIu32
          " x %" PRIu32 " x %" PRIu32 ")",
          hali_hal_executable_name(executable), ordinal, export_name,
          "xyz"[i], counts[i], HALI_HAL_MAX_WORKGROUP_COUNT, x, y, z);
  if (wraps)
    return hali_status_make(
        HALI_STATUS_OUT_OF_RANGE,
        "dispatch of executable '%s' export %u '%s': workgroup count %" PRIu32
        " x %" PRIu32 " x %" PRIu32
        " overflows 64 bits (at most %u workgroups per dispatch)",
        hali_hal_executable_name(executable), ordinal, export_name, x, y, z,
        HALI_HAL_MAX_WORKGROUPS);
  return hali_status_make(
      HALI_STATUS_OUT_OF_RANGE,
      "dispatch of executable '%s' export %u '%s': workgroup count %" PRIu32
      " x %" PRIu32 " x %" PRIu32 " = %" PRIu64
      " workgroups exceeds the maximum of %u per dispatch",
      hali_hal_executable_name(executable), ordinal, export_name, x, y, z,
      total, HALI_HAL_MAX_WORKGROUPS);
}

hali_status_t hali_hal_command_buffer_dispatch(
    hali_hal_command_buffer_t *cb, hali_hal_executable_t *executable,
    uint32_t ordinal, uint32_t workgroup_count_x, uint32_t workgroup_count_y,
    uint32_t workgroup_count_z) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_check_recording(
      cb, HALI_HAL_COMMAND_CATEGORY_DISPATCH, "dispatch"));
  if (!executable)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "dispatch without an executable");
  hali_hal_dispatch_bindings_t state = {
      .constants_set = cb->constants_set,
      .bindings_set = cb->bindings_set,
      .bindings = cb->bindings,
  };
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_dispatch_validate_ex(executable, ordinal, &state, false));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_dispatch_validate_workgroup_count(
      executable, ordinal, workgroup_count_x, workgroup_count_y,
      workgroup_count_z));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_reserve_resources(cb, 1));
  hali_hal_command_dispatch_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_DISPATCH, sizeof(*cmd), (void **)&cmd));
  cmd->executable = executable;
  cmd->ordinal = ordinal;
  cmd->workgroup_count[0] = workgroup_count_x;
  cmd->workgroup_count[1] = workgroup_count_y;
  cmd->workgroup_count[2] = workgroup_count_z;
  /* A program's dispatches mostly name one executable, between pushes of
   * other buffers: retained once (a retain and a release are two atomic
   * read-modify-writes per dispatch otherwise). */
  if (executable != cb->last_executable) {
    hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)executable);
    cb->last_executable = executable;
  }
  if (HALI_UNLIKELY(cb->tracer.line != NULL)) {
    const hali_hal_executable_export_t *e =
        hali_hal_executable_export(executable, ordinal);
    CB_TRACE(cb, "dispatch %s::%s workgroups %ux%ux%u",
             hali_hal_executable_name(executable), e ? e->name : "?",
             workgroup_count_x, workgroup_count_y, workgroup_count_z);
  }
  return HALI_OK;
}

/* One range of a collective: |need| bytes exactly (0: unused). */
static hali_status_t collective_range(hali_hal_buffer_t *buffer,
                                      hali_hal_device_size_t offset,
                                      hali_hal_device_size_t length,
                                      uint64_t need, const char *kind,
                                      const char *what, bool write) {
  if (!need) return HALI_OK;
  if (!buffer)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s needs a %s buffer of %" PRIu64 " bytes", kind,
                            what, need);
  if (length == HALI_HAL_WHOLE_BUFFER) length = need;
  if (length != need)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: the %s range is %" PRIu64 " bytes; this rank "
                            "%s exactly %" PRIu64,
                            kind, what, length,
                            write ? "receives" : "sends", need);
  HALI_RETURN_IF_ERROR(
      hali_hal_buffer_validate_range(buffer, offset, length, what), "%s",
      kind);
  HALI_RETURN_IF_ERROR(hali_hal_buffer_validate_usage(
                           buffer, HALI_HAL_BUFFER_USAGE_TRANSFER, what),
                       "%s", kind);
  if (write)
    HALI_RETURN_IF_ERROR(hali_hal_buffer_check_writable(buffer), "%s %s",
                         kind, what);
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_collective(
    hali_hal_command_buffer_t *cb, hali_hal_channel_t *channel,
    const hali_hal_collective_t *op, hali_hal_buffer_t *send,
    hali_hal_device_size_t send_offset, hali_hal_device_size_t send_length,
    hali_hal_buffer_t *recv, hali_hal_device_size_t recv_offset,
    hali_hal_device_size_t recv_length) {
  const char *kind = hali_hal_collective_kind_name(op->kind);
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_check_recording(
      cb, HALI_HAL_COMMAND_CATEGORY_TRANSFER, "collective"));
  uint64_t need_send = 0, need_recv = 0;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_collective_lengths(channel, op, &need_send, &need_recv));
  HALI_RETURN_IF_ERROR_PLAIN(collective_range(
      send, send_offset, send_length, need_send, kind, "send", false));
  HALI_RETURN_IF_ERROR_PLAIN(collective_range(
      recv, recv_offset, recv_length, need_recv, kind, "receive", true));
  if (!need_send) send = NULL, send_offset = 0;
  if (!need_recv) recv = NULL, recv_offset = 0;
  if (send && recv &&
      hali_hal_buffer_allocated_buffer(send) ==
          hali_hal_buffer_allocated_buffer(recv)) {
    uint64_t s = hali_hal_buffer_byte_offset(send) + send_offset;
    uint64_t t = hali_hal_buffer_byte_offset(recv) + recv_offset;
    if (s < t + need_recv && t < s + need_send)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s: the send range [%" PRIu64 ", %" PRIu64
                              ") and the receive range [%" PRIu64 ", %" PRIu64
                              ") overlap in the same allocation",
                              kind, s, s + need_send, t, t + need_recv);
  }
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_reserve_resources(cb, 3));
  hali_hal_command_collective_t *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_COLLECTIVE, sizeof(*cmd), (void **)&cmd));
  cmd->channel = channel;
  cmd->op = *op;
  cmd->send = send;
  cmd->send_offset = send_offset;
  cmd->send_length = need_send;
  cmd->recv = recv;
  cmd->recv_offset = recv_offset;
  cmd->recv_length = need_recv;
  ++cb->collective_count;
  hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)channel);
  if (send) hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)send);
  if (recv) hali_hal_command_buffer_add_resource(cb, (hali_ref_t *)recv);
  CB_TRACE(cb,
           "collective %s(%s) of %" PRIu64 " elements on a channel of %d "
           "ranks: send %" PRIu64 " bytes, receive %" PRIu64 " bytes",
           kind, hali_hal_collective_reduction_name(op->reduction), op->count,
           hali_hal_channel_count(channel), need_send, need_recv);
  return HALI_OK;
}

void hali_hal_command_buffer_abort_collectives(hali_hal_command_buffer_t *cb,
                                               size_t first,
                                               hali_status_t reason) {
  if (!cb->collective_count) return;
  size_t index = 0;
  for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb); h;
       h = hali_hal_command_list_next(cb, h), ++index) {
    if (index < first || h->type != HALI_HAL_COMMAND_COLLECTIVE) continue;
    const hali_hal_command_collective_t *c = (const void *)h;
    hali_hal_channel_abort(c->channel, &c->op, reason);
  }
}

hali_status_t hali_hal_command_buffer_execution_barrier(
    hali_hal_command_buffer_t *cb) {
  if (cb->finalized)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "cannot record execution_barrier: the command "
                            "buffer is finalized");
  void *cmd;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_command_buffer_append(
      cb, HALI_HAL_COMMAND_BARRIER, sizeof(hali_hal_command_header_t), &cmd));
  CB_TRACE(cb, "%s", "execution_barrier");
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_finalize(hali_hal_command_buffer_t *cb) {
  if (cb->finalized)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "command buffer is already finalized");
  HALI_RETURN_IF_ERROR(hali_hal_command_list_check_dispatches(cb),
                       "finalize");
  cb->dispatches_checked = true;
  if (HALI_UNLIKELY(cb->validate))
    HALI_RETURN_IF_ERROR_PLAIN(hali_hal_validate_report(
        (hali_hal_validate_mode_t)cb->validate,
        hali_hal_validate_finalize(cb)));
  HALI_RETURN_IF_ERROR(hali_hal_command_list_collect_slots(cb), "finalize");
  cb->finalized = true;
  /* A reusable buffer replays many times: resolve what each replay would
   * recompute once, now (a one-shot one replays once: the walk is all). */
  if (!(cb->mode & HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT))
    hali_hal_command_list_compile(cb);
  CB_TRACE(cb, "%s", "finalize");
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_begin_submit(
    hali_hal_command_buffer_t *cb) {
  if (!cb->finalized)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "command buffer submitted before finalize");
  if (cb->mode & HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT) {
    bool expected = false;
    if (!atomic_compare_exchange_strong(&cb->submitted, &expected, true))
      return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                              "one-shot command buffer submitted more than "
                              "once");
  }
  return HALI_OK;
}

bool hali_hal_command_buffer_validating(const hali_hal_command_buffer_t *cb) {
  return cb->validate != 0;
}

void hali_hal_command_buffer_set_label(hali_hal_command_buffer_t *cb,
                                       const char *label) {
  if (cb->validate) hali_hal_validate_set_label(cb, label);
}
