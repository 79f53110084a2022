/* hali HAL — binding tables (hal/binding_table.h): the slots a finalized
 * command buffer needs, the submit-time check of a table against them,
 * and the resolution of a slot's bytes during replay. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/checked.h"
#include "hal/binding_table.h"
#include "hal/buffer_impl.h"
#include "hal/command_list.h"

/* Notes |buffer| (may be NULL) as used by a command; |written|: a transfer
 * writes it. */
static void note_slot(hali_hal_slot_info_t *slots, const hali_hal_buffer_t *buffer,
                      bool written) {
  if (!buffer || !buffer->allocated->slot) return;
  const hali_hal_buffer_t *root = buffer->allocated;
  hali_hal_slot_info_t *info = &slots[root->slot - 1];
  info->used = true;
  if (root->length > info->length) info->length = root->length;
  info->usage |= root->usage;
  info->written |= written;
}

/* One past the highest binding slot and constant slot the records name,
 * and (|slots| not NULL) what each binding slot needs. */
static void walk_slots(const hali_hal_command_buffer_t *cb,
                       hali_hal_slot_info_t *slots, uint32_t *max_slot,
                       uint32_t *max_constant) {
#define NOTE(b, w)                                                   \
  do {                                                               \
    const hali_hal_buffer_t *b_ = (b);                               \
    if (b_ && b_->allocated->slot) {                                 \
      if (b_->allocated->slot > *max_slot)                           \
        *max_slot = b_->allocated->slot;                             \
      if (slots) note_slot(slots, b_, (w));                          \
    }                                                                \
  } while (0)
  for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb); h;
       h = hali_hal_command_list_next(cb, h)) {
    switch ((hali_hal_command_type_t)h->type) {
      case HALI_HAL_COMMAND_FILL: {
        const hali_hal_command_fill_t *c = (const void *)h;
        NOTE(c->target, true);
        if (c->pattern_slot > *max_constant) *max_constant = c->pattern_slot;
        break;
      }
      case HALI_HAL_COMMAND_COPY: {
        const hali_hal_command_copy_t *c = (const void *)h;
        NOTE(c->source, false);
        NOTE(c->target, true);
        break;
      }
      case HALI_HAL_COMMAND_UPDATE:
        NOTE(((const hali_hal_command_update_t *)(const void *)h)->target,
             true);
        break;
      case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET: {
        const hali_hal_command_push_descriptor_set_t *c = (const void *)h;
        for (uint32_t i = 0; i < c->count; ++i)
          NOTE(c->bindings[i].buffer, false);
        break;
      }
      case HALI_HAL_COMMAND_COLLECTIVE: {
        const hali_hal_command_collective_t *c = (const void *)h;
        NOTE(c->send, false);
        NOTE(c->recv, true);
        break;
      }
      case HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS: {
        const hali_hal_command_push_constants_t *c = (const void *)h;
        for (uint32_t i = 0; i < c->count; ++i)
          if (c->values[i] + 1 > *max_constant) *max_constant = c->values[i] + 1;
        break;
      }
      default:
        break;
    }
  }
#undef NOTE
}

hali_status_t hali_hal_command_list_collect_slots(hali_hal_command_buffer_t *cb) {
  /* Most command buffers have no slots: their resources (every buffer a
   * record names, or its root) hold no placeholder and no constant slot
   * was recorded (which sets |constant_slot_count| as it goes); then the
   * records need no walk. */
  bool any = cb->constant_slot_count != 0;
  for (size_t i = 0; i < cb->resource_count && !any; ++i) {
    const hali_ref_t *r = cb->resources[i];
    any = r->type == HALI_TYPE_BUFFER &&
          ((const hali_hal_buffer_t *)(const void *)r)->allocated->slot != 0;
  }
  if (!any) return HALI_OK;
  uint32_t nslots = 0, nconstants = 0;
  walk_slots(cb, NULL, &nslots, &nconstants);
  cb->constant_slot_count = nconstants;
  if (!nslots) return HALI_OK;
  hali_hal_slot_info_t *slots = hali_calloc(nslots, sizeof(*slots));
  if (!slots)
    return hali_status_annotate(hali_status_oom(),
                                "collecting %u binding slots", nslots);
  walk_slots(cb, slots, &nslots, &nconstants);
  hali_free(cb->slots);
  cb->slots = slots;
  cb->slot_count = nslots;
  return HALI_OK;
}

uint32_t hali_hal_command_buffer_binding_slot_count(
    const hali_hal_command_buffer_t *cb) {
  return cb->slot_count;
}

uint32_t hali_hal_command_buffer_constant_slot_count(
    const hali_hal_command_buffer_t *cb) {
  return cb->constant_slot_count;
}

hali_status_t hali_hal_binding_table_check(const hali_hal_command_buffer_t *cb,
                                           const hali_hal_binding_table_t *t) {
  const unsigned id = hali_hal_trace_id(cb);
  if (!cb->finalized)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "command buffer #%u is not finalized", id);
  if (t->binding_count < cb->slot_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "command buffer #%u uses binding slots 0 .. %u: "
                            "the binding table has %zu entries",
                            id, cb->slot_count - 1, t->binding_count);
  if (t->constant_count < cb->constant_slot_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "command buffer #%u uses constant slots 0 .. %u: "
                            "the binding table has %zu constants",
                            id, cb->constant_slot_count - 1, t->constant_count);
  for (uint32_t i = 0; i < cb->slot_count; ++i) {
    const hali_hal_slot_info_t *info = &cb->slots[i];
    if (!info->used) continue;
    const hali_hal_binding_table_entry_t *e = &t->bindings[i];
    if (!e->buffer)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "binding table slot %u of command buffer #%u "
                              "has no buffer",
                              i, id);
    const hali_hal_buffer_t *b = e->buffer;
    if (b->allocated->slot)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "binding table slot %u of command buffer #%u is "
                              "a binding slot placeholder itself (slot %u)",
                              i, id, b->allocated->slot - 1);
    hali_hal_device_size_t length = e->length;
    if (length == HALI_HAL_WHOLE_BUFFER) {
      if (e->offset > b->length)
        return hali_status_make(
            HALI_STATUS_OUT_OF_RANGE,
            "binding table slot %u of command buffer #%u: offset %" PRIu64
            " is past the end of !hal.buffer#%u (%" PRIu64 " bytes)",
            i, id, e->offset, hali_hal_trace_id(b), b->length);
      length = b->length - e->offset;
    }
    uint64_t end;
    if (hali_add_overflows_u64(e->offset, length, &end) || end > b->length)
      return hali_status_make(
          HALI_STATUS_OUT_OF_RANGE,
          "binding table slot %u of command buffer #%u: the range [%" PRIu64
          ", +%" PRIu64 ") is outside !hal.buffer#%u (%" PRIu64 " bytes)",
          i, id, e->offset, length, hali_hal_trace_id(b), b->length);
    if (length < info->length)
      return hali_status_make(
          HALI_STATUS_OUT_OF_RANGE,
          "binding table slot %u of command buffer #%u: %" PRIu64
          " bytes given, its commands use %" PRIu64,
          i, id, length, info->length);
    if ((b->usage & info->usage) != info->usage)
      return hali_status_make(
          HALI_STATUS_PERMISSION_DENIED,
          "binding table slot %u of command buffer #%u: !hal.buffer#%u has "
          "usage 0x%x, the slot needs 0x%x",
          i, id, hali_hal_trace_id(b), b->usage, info->usage);
    if (info->written && b->allocated->read_only)
      return hali_status_make(
          HALI_STATUS_PERMISSION_DENIED,
          "binding table slot %u of command buffer #%u is written by a "
          "transfer, but !hal.buffer#%u is read-only (%s)",
          i, id, hali_hal_trace_id(b), b->allocated->read_only);
  }
  return HALI_OK;
}

hali_status_t hali_hal_binding_table_resolve(
    const hali_hal_binding_table_t *table, hali_hal_buffer_t *buffer,
    hali_hal_device_size_t offset, hali_hal_device_size_t length,
    uint8_t **out_ptr) {
  const uint32_t slot = buffer ? buffer->allocated->slot : 0;
  if (HALI_LIKELY(slot == 0))
    return hali_hal_buffer_resolve(buffer, offset, length, out_ptr);
  *out_ptr = NULL;
  if (!table || slot - 1 >= table->binding_count ||
      !table->bindings[slot - 1].buffer)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "binding slot %u has no binding table entry",
                            slot - 1);
  /* The recording kept [buffer->offset + offset, +length) inside the
   * placeholder, and the check kept the placeholder's length inside the
   * entry (whose length the submission resolved): no overflow. */
  const hali_hal_binding_table_entry_t *e = &table->bindings[slot - 1];
  HALI_RETURN_IF_ERROR(hali_hal_buffer_resolve(e->buffer,
                                               e->offset + buffer->offset +
                                                   offset,
                                               length, out_ptr),
                       "binding slot %u (!hal.buffer#%u)", slot - 1,
                       hali_hal_trace_id(e->buffer));
  return HALI_OK;
}
