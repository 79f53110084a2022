/* hali HAL — binding tables: command buffers recorded once with binding
 * *slots* and constant slots, whose buffers and values are supplied each
 * time they are submitted (what IREE calls indirect command buffers).
 *
 * A slot is a placeholder buffer (hali_hal_buffer_create_slot): it has a
 * length, memory types and usage but never any storage, and commands are
 * recorded on it (or on its subspans) as on any buffer, with the same
 * record-time checks against its length and usage.  A constant slot is a
 * push constant whose value comes from the table
 * (hali_hal_command_buffer_push_constant_slots).  Finalize validates the
 * whole list once (as for any command buffer) and collects what each slot
 * must be bound to: at least the placeholder's length, its usage, and
 * whether a transfer writes it.
 *
 * A table gives slot i's bytes as entry i, [offset, offset + length) of
 * a buffer, and constant slot i's value as constants[i]; a table is bound
 * to the recording by hali_hal_command_buffer_bind (a cheap one-shot
 * command buffer that runs the recording with it, submitted with plain
 * queue_execute) or given straight to
 * hali_hal_device_queue_execute_indirect.  The table is checked at submit, with every error
 * naming the slot and the command buffer: an entry missing or NULL, a
 * range outside its buffer (overflow-checked), shorter than the slot, a
 * buffer without the slot's usage, a read-only buffer in a slot a transfer
 * writes; too few constants.  Replay then resolves a slot's storage from
 * the table (the committed check happens there, as for any buffer), and
 * a copy between slots that resolve to overlapping bytes of one
 * allocation is refused (INVALID_ARGUMENT naming both slots).
 *
 * Executing a command buffer that has slots without a table (plain
 * queue_execute) is FAILED_PRECONDITION. */
#ifndef HALI_HAL_BINDING_TABLE_H
#define HALI_HAL_BINDING_TABLE_H

#include "hal/buffer.h"
#include "hal/command_buffer.h"
#include "hal/stop.h"

/* Slots per command buffer (binding and constant slots each). */
enum { HALI_HAL_MAX_SLOTS = 4096 };

typedef struct hali_hal_binding_table_entry_t {
  hali_hal_buffer_t *buffer; /* borrowed by the caller */
  hali_hal_device_size_t offset;
  hali_hal_device_size_t length; /* or HALI_HAL_WHOLE_BUFFER */
} hali_hal_binding_table_entry_t;

typedef struct hali_hal_binding_table_t {
  size_t binding_count;
  const hali_hal_binding_table_entry_t *bindings;
  size_t constant_count;
  const uint32_t *constants;
} hali_hal_binding_table_t;

/* A placeholder for binding slot |slot| (< HALI_HAL_MAX_SLOTS) of
 * |length| bytes with |params|' memory types and usage.  The caller owns
 * |*out_buffer|. */
HALI_MUST_USE hali_status_t hali_hal_buffer_create_slot(
    uint32_t slot, hali_hal_buffer_params_t params,
    hali_hal_device_size_t length, hali_hal_buffer_t **out_buffer);
/* Slot + 1 of |buffer|'s placeholder root, or 0 when it is a real
 * buffer. */
uint32_t hali_hal_buffer_slot(const hali_hal_buffer_t *buffer);

/* Sets push constants [offset, offset + count) to constant slots
 * |slots[0..count)| (each < HALI_HAL_MAX_SLOTS): at execute, constant
 * |offset + i| is the table's constants[slots[i]].  Same range rules as
 * push_constants. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_push_constant_slots(
    hali_hal_command_buffer_t *command_buffer, uint32_t offset,
    const uint32_t *slots, uint32_t count);

/* hali_hal_command_buffer_fill whose pattern is constant slot
 * |constant_slot| (< HALI_HAL_MAX_SLOTS), masked to |pattern_length| bytes
 * at execute. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_fill_slot(
    hali_hal_command_buffer_t *command_buffer, hali_hal_buffer_t *target,
    hali_hal_device_size_t offset, hali_hal_device_size_t length,
    uint32_t constant_slot, uint32_t pattern_length);

/* Binding and constant slots |command_buffer| (finalized) needs: one past
 * the highest of each. */
uint32_t hali_hal_command_buffer_binding_slot_count(
    const hali_hal_command_buffer_t *command_buffer);
uint32_t hali_hal_command_buffer_constant_slot_count(
    const hali_hal_command_buffer_t *command_buffer);

/* The submit-time check of |table| against |command_buffer|'s slots
 * (above). */
HALI_MUST_USE hali_status_t hali_hal_binding_table_check(
    const hali_hal_command_buffer_t *command_buffer,
    const hali_hal_binding_table_t *table);

/* A command buffer that runs |base| (finalized, reusable; retained) with
 * binding slot i given by |bindings[i]| (copied; the buffers retained)
 * and no constants (hali_hal_command_buffer_bind_constants gives them).
 * It is finalized and one-shot: submit it once with queue_execute, which
 * checks the table against |base|'s slots (the errors above, annotated
 * with the command buffers).  Many may be bound to one |base| and run
 * concurrently.  The caller owns |*out_command_buffer|. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_bind(
    hali_hal_command_buffer_t *base,
    const hali_hal_binding_table_entry_t *bindings, size_t count,
    hali_hal_command_buffer_t **out_command_buffer);
/* Gives |bound| (from hali_hal_command_buffer_bind, not yet submitted)
 * constant slots 0 .. count-1 (copied), replacing any given before. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_bind_constants(
    hali_hal_command_buffer_t *bound, const uint32_t *values, size_t count);

/* hali_hal_command_buffer_bind + bind_constants + queue_execute: queues
 * |command_buffer| (finalized; a reusable one may be queued again, with
 * another table, before this submission runs) with |table| (checked now;
 * copied, its buffers retained until the submission completes) after
 * |wait_fence|, signalling |signal_fence|; |stop| as for
 * hali_hal_device_queue_execute_stoppable (NULL: none). */
HALI_MUST_USE hali_status_t hali_hal_device_queue_execute_indirect(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence, hali_hal_command_buffer_t *command_buffer,
    const hali_hal_binding_table_t *table, hali_hal_stop_t *stop);

#endif /* HALI_HAL_BINDING_TABLE_H */
