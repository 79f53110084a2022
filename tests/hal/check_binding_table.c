/* Binding tables (hal/binding_table.h): a reusable command buffer recorded
 * once on binding slots and constant slots, submitted with different
 * buffers and values each time; the submit-time checks of a table, each
 * error naming the slot and the command buffer; the replay-time ones.
 * Every test runs on local-sync and on local-task with 2 workers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/binding_table.h"
#include "hal/validate.h"
#include "tests/hal/hal_testutil.h"

static const struct {
  hali_hal_device_kind_t kind;
  uint32_t workers;
} configs[] = {
    {HALI_HAL_DEVICE_LOCAL_SYNC, 0},
    {HALI_HAL_DEVICE_LOCAL_TASK, 2},
};

static hali_hal_device_t *device_for(int i) {
  hali_hal_device_params_t params;
  hali_hal_device_params_initialize(&params);
  params.kind = configs[i].kind;
  params.worker_count = configs[i].workers;
  hali_hal_device_t *device = NULL;
  HALI_CK_OK(hali_hal_device_create(&params, &device));
  return device;
}

/* axpb(x i32[n], y i32[n]; a, b) -> out i32[n]: out[i] = a * x[i] + y[i]
 * + b; one workgroup per element, bounds from the bindings. */
static int axpb(const hali_kernel_dispatch_state_t *d,
                const hali_kernel_workgroup_state_t *w) {
  const uint32_t i = w->workgroup_id_x;
  for (uint32_t b = 0; b < 3; ++b)
    if (d->binding_lengths[b] < ((size_t)i + 1) * 4) return 3;
  const int32_t *x = d->binding_ptrs[0], *y = d->binding_ptrs[1];
  int32_t *out = d->binding_ptrs[2];
  out[i] = (int32_t)d->constants[0] * x[i] + y[i] + (int32_t)d->constants[1];
  return 0;
}

static const hali_kernel_export_t exports[] = {
    {"axpb", axpb, 3, 2, {1, 1, 1}, 0},
};
static const hali_kernel_library_t library = {HALI_KERNEL_ABI_VERSION, "bt",
                                              1, exports};

static hali_hal_buffer_t *slot(uint32_t index, hali_hal_device_size_t length) {
  hali_hal_buffer_t *b = NULL;
  HALI_CK_OK(hali_hal_buffer_create_slot(index, hali_test_host_params(),
                                         length, &b));
  return b;
}

static hali_hal_buffer_t *ints(hali_hal_device_t *device, size_t n,
                               int32_t first, int32_t step) {
  hali_hal_buffer_t *b =
      hali_test_allocate(hali_hal_device_allocator(device), n * 4);
  int32_t *p = NULL;
  HALI_CK_OK(hali_hal_buffer_map_range(b, 0, HALI_HAL_WHOLE_BUFFER,
                                       (void **)&p));
  for (size_t i = 0; i < n; ++i) p[i] = first + (int32_t)i * step;
  return b;
}

static int32_t at(hali_hal_buffer_t *b, size_t i) {
  int32_t *p = NULL;
  HALI_CK_OK(hali_hal_buffer_map_range(b, 0, HALI_HAL_WHOLE_BUFFER,
                                       (void **)&p));
  return p[i];
}

/* The recorded program: slots 0 (x), 1 (y), 2 (out), 4 elements each;
 * constants a = constant slot 1, b = 7 (a plain constant); then a copy
 * of out's elements 1..2 into slot 3 at element 1 (the KV-cache row
 * pattern: where it lands is the table's offset). */
/* (|device|: recorded for it, as the VM records, so that its validation
 * mode sees the accesses; NULL: a device-less recording.) */
static hali_hal_command_buffer_t *record_for(hali_hal_device_t *device,
                                             hali_hal_executable_t *exe) {
  hali_hal_command_buffer_t *cb = NULL;
  if (device)
    HALI_CK_OK(hali_hal_device_create_command_buffer(
        device, HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
        HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  else
    HALI_CK_OK(hali_hal_command_buffer_create(
        HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
        &cb));
  hali_hal_buffer_t *s[4] = {slot(0, 16), slot(1, 16), slot(2, 16),
                             slot(3, 8)};
  const uint32_t b = 7, a_slot = 1;
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 1, &b, 1));
  HALI_CK_OK(hali_hal_command_buffer_push_constant_slots(cb, 0, &a_slot, 1));
  for (uint32_t i = 0; i < 3; ++i)
    HALI_CK_OK(hali_hal_command_buffer_push_binding(cb, i, s[i], 0, 16));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 4, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
  HALI_CK_OK(hali_hal_command_buffer_copy(cb, s[2], 4, s[3], 0, 8));
  for (int i = 0; i < 4; ++i) hali_hal_buffer_release(s[i]);
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  ck_assert_uint_eq(hali_hal_command_buffer_binding_slot_count(cb), 4);
  ck_assert_uint_eq(hali_hal_command_buffer_constant_slot_count(cb), 2);
  return cb;
}

static hali_hal_command_buffer_t *record(hali_hal_executable_t *exe) {
  return record_for(NULL, exe);
}

static hali_status_t run(hali_hal_device_t *device,
                         hali_hal_command_buffer_t *cb,
                         const hali_hal_binding_table_t *table) {
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  hali_status_t s = hali_hal_device_queue_execute_indirect(device, NULL,
                                                           signal, cb, table,
                                                           NULL);
  if (!s) s = hali_hal_fence_await(signal, HALI_INFINITE);
  hali_hal_fence_release(signal);
  return s;
}

/* One recording, three submissions with other buffers, offsets and
 * constants: each computes with its own table (against a plain loop). */
START_TEST(test_replay_with_tables) {
  hali_hal_device_t *device = device_for(_i);
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&library, NULL, &exe));
  hali_hal_command_buffer_t *cb = record(exe);
  for (int round = 0; round < 3; ++round) {
    const int32_t a = 2 + round, x0 = 10 * round, y0 = -round;
    hali_hal_buffer_t *x = ints(device, 4, x0, 1), *y = ints(device, 4, y0, 3);
    /* out is elements 2..5 of a larger buffer (an offset in the table). */
    hali_hal_buffer_t *out = ints(device, 8, 0, 0),
                      *cache = ints(device, 8, -1, 0);
    hali_hal_binding_table_entry_t entries[4] = {
        {x, 0, HALI_HAL_WHOLE_BUFFER},
        {y, 0, 16},
        {out, 8, 16},
        {cache, (hali_hal_device_size_t)(4 * (1 + round)), 8},
    };
    const uint32_t constants[2] = {999, (uint32_t)a};
    hali_hal_binding_table_t table = {4, entries, 2, constants};
    HALI_CK_OK(run(device, cb, &table));
    for (int i = 0; i < 4; ++i)
      ck_assert_int_eq(at(out, 2 + (size_t)i),
                       a * (x0 + i) + (y0 + 3 * i) + 7);
    ck_assert_int_eq(at(out, 0), 0);
    ck_assert_int_eq(at(out, 6), 0);
    for (int i = 0; i < 8; ++i) {
      const int row = i - (1 + round); /* copied elements 1, 2 of out */
      const int32_t want =
          row == 0 || row == 1 ? a * (x0 + row + 1) + (y0 + 3 * (row + 1)) + 7
                               : -1;
      ck_assert_int_eq(at(cache, (size_t)i), want);
    }
    hali_hal_buffer_release(x);
    hali_hal_buffer_release(y);
    hali_hal_buffer_release(out);
    hali_hal_buffer_release(cache);
  }
  hali_hal_command_buffer_release(cb);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* The table is checked at submit; each error names the slot (or the
 * constants) and the command buffer, and nothing runs. */
START_TEST(test_table_errors) {
  hali_hal_device_t *device = device_for(_i);
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&library, NULL, &exe));
  hali_hal_command_buffer_t *cb = record(exe);
  hali_hal_buffer_t *x = ints(device, 4, 1, 1), *y = ints(device, 4, 1, 1),
                    *out = ints(device, 4, 0, 0), *cache = ints(device, 4, 0, 0);
  hali_hal_binding_table_entry_t good[4] = {
      {x, 0, 16}, {y, 0, 16}, {out, 0, 16}, {cache, 0, 8}};
  const uint32_t constants[2] = {0, 3};
  hali_hal_binding_table_entry_t e[4];
  hali_hal_binding_table_t t = {4, e, 2, constants};
  char id[32];
  snprintf(id, sizeof(id), "command buffer #%u", hali_hal_trace_id(cb));

  memcpy(e, good, sizeof(e));
  t.binding_count = 3;
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_INVALID_ARGUMENT, id,
                 "uses binding slots 0 .. 3: the binding table has 3 entries",
                 "queue_execute_indirect");
  t.binding_count = 4;
  t.constant_count = 1;
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_INVALID_ARGUMENT, id,
                 "uses constant slots 0 .. 1: the binding table has 1 "
                 "constants");
  t.constant_count = 2;
  e[1].buffer = NULL;
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_INVALID_ARGUMENT,
                 "binding table slot 1 of", id, "has no buffer");
  memcpy(e, good, sizeof(e));
  e[2].offset = UINT64_MAX - 3; /* offset + length wraps */
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_OUT_OF_RANGE,
                 "binding table slot 2 of", id, "is outside !hal.buffer#");
  memcpy(e, good, sizeof(e));
  e[3].offset = 4; /* [4, +8) of a 16-byte buffer fits, but ... */
  e[3].length = 4; /* ... the slot's commands use 8 bytes */
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_OUT_OF_RANGE,
                 "binding table slot 3 of", id, "4 bytes given, its commands "
                 "use 8");
  memcpy(e, good, sizeof(e));
  e[0].offset = 20;
  e[0].length = HALI_HAL_WHOLE_BUFFER;
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_OUT_OF_RANGE,
                 "binding table slot 0 of", id, "offset 20 is past the end");
  /* A buffer without DISPATCH usage in a dispatched slot. */
  hali_hal_buffer_params_t transfer_only = hali_test_host_params();
  transfer_only.usage = HALI_HAL_BUFFER_USAGE_TRANSFER;
  hali_hal_buffer_t *plain = NULL;
  HALI_CK_OK(hali_hal_allocator_allocate_buffer(
      hali_hal_device_allocator(device), transfer_only, 16, &plain));
  memcpy(e, good, sizeof(e));
  e[1].buffer = plain;
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_PERMISSION_DENIED,
                 "binding table slot 1 of", id, "the slot needs");
  /* A read-only buffer in the slot the copy writes. */
  static int32_t weights[4];
  hali_hal_buffer_t *ro = NULL;
  HALI_CK_OK(hali_hal_buffer_wrap_host(hali_test_host_params(), weights,
                                       sizeof(weights), "the weights", NULL,
                                       NULL, &ro));
  memcpy(e, good, sizeof(e));
  e[3].buffer = ro;
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_PERMISSION_DENIED,
                 "binding table slot 3 of", id,
                 "is written by a transfer, but", "read-only (the weights)");
  /* ... while a read-only buffer in a slot only read is fine. */
  memcpy(e, good, sizeof(e));
  e[0].buffer = ro;
  HALI_CK_OK(run(device, cb, &t));
  /* A placeholder is not a buffer to bind. */
  hali_hal_buffer_t *ph = slot(9, 16);
  memcpy(e, good, sizeof(e));
  e[1].buffer = ph;
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_INVALID_ARGUMENT,
                 "binding table slot 1 of", id, "placeholder itself (slot 9)");
  /* Plain queue_execute refuses a command buffer with slots. */
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_STATUS(
      hali_hal_device_queue_execute(device, NULL, signal, &cb, 1),
      HALI_STATUS_FAILED_PRECONDITION,
      "has 4 binding and 2 constant slots: submit it with a binding table");
  hali_hal_fence_release(signal);
  /* The copy's two slots resolving to overlapping bytes of one buffer:
   * refused when the copy runs, naming both slots. */
  hali_hal_buffer_t *big = ints(device, 8, 0, 0);
  memcpy(e, good, sizeof(e));
  e[2] = (hali_hal_binding_table_entry_t){big, 0, 16};
  e[3] = (hali_hal_binding_table_entry_t){big, 8, 8};
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_INVALID_ARGUMENT,
                 "from binding slot 2 to binding slot 3: the binding table "
                 "makes the ranges overlap");
  /* Bad slots at record time. */
  hali_hal_buffer_t *none = NULL;
  HALI_CK_STATUS(hali_hal_buffer_create_slot(HALI_HAL_MAX_SLOTS,
                                             hali_test_host_params(), 4,
                                             &none),
                 HALI_STATUS_OUT_OF_RANGE, "binding slot 4096: at most 4096");
  ck_assert_ptr_null(none);
  hali_hal_command_buffer_t *cb2 = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
      &cb2));
  const uint32_t bad = HALI_HAL_MAX_SLOTS;
  HALI_CK_STATUS(hali_hal_command_buffer_push_constant_slots(cb2, 3, &bad, 1),
                 HALI_STATUS_OUT_OF_RANGE, "constant 3 is slot 4096");
  HALI_CK_STATUS(hali_hal_command_buffer_push_constant_slots(cb2, 64, &bad, 1),
                 HALI_STATUS_OUT_OF_RANGE, "exceed the 64");
  /* A slot shorter than a command's range is refused at record time, as
   * for any buffer. */
  hali_hal_buffer_t *small = slot(0, 4);
  HALI_CK_STATUS(hali_hal_command_buffer_copy(cb2, small, 0, x, 0, 8),
                 HALI_STATUS_OUT_OF_RANGE, "");
  hali_hal_buffer_release(small);
  hali_hal_command_buffer_release(cb2);
  hali_hal_buffer_release(big);
  hali_hal_buffer_release(ph);
  hali_hal_buffer_release(ro);
  hali_hal_buffer_release(plain);
  hali_hal_buffer_release(x);
  hali_hal_buffer_release(y);
  hali_hal_buffer_release(out);
  hali_hal_buffer_release(cache);
  hali_hal_command_buffer_release(cb);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* Storage that is not committed (a queue_alloca'd buffer whose
 * queue_dealloca has run) is found when the replay resolves the slot,
 * naming it. */
START_TEST(test_uncommitted_entry) {
  hali_hal_device_t *device = device_for(_i);
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&library, NULL, &exe));
  hali_hal_command_buffer_t *cb = record(exe);
  hali_hal_fence_t *made = NULL, *freed = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&made));
  HALI_CK_OK(hali_hal_fence_create_pending(&freed));
  hali_hal_buffer_t *late = NULL;
  HALI_CK_OK(hali_hal_device_queue_alloca(device, NULL, made,
                                          hali_test_host_params(), 16, &late));
  HALI_CK_OK(hali_hal_device_queue_dealloca(device, made, freed, late));
  HALI_CK_OK(hali_hal_fence_await(freed, HALI_INFINITE));
  hali_hal_fence_release(made);
  hali_hal_fence_release(freed);
  hali_hal_buffer_t *x = ints(device, 4, 1, 1), *out = ints(device, 4, 0, 0),
                    *cache = ints(device, 4, 0, 0);
  hali_hal_binding_table_entry_t e[4] = {
      {x, 0, 16}, {late, 0, 16}, {out, 0, 16}, {cache, 0, 8}};
  const uint32_t constants[2] = {0, 3};
  hali_hal_binding_table_t t = {4, e, 2, constants};
  HALI_CK_STATUS(run(device, cb, &t), HALI_STATUS_FAILED_PRECONDITION,
                 "not committed", "binding slot 1 (!hal.buffer#",
                 "binding 1 of dispatch of executable 'bt' export 0 'axpb'");
  hali_hal_buffer_release(late);
  hali_hal_buffer_release(x);
  hali_hal_buffer_release(out);
  hali_hal_buffer_release(cache);
  hali_hal_command_buffer_release(cb);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* Two command buffers bound to one recording with different tables, in
 * one queue_execute: each runs the recording with its own slots; binding
 * needs a finalized reusable recording, constants a bound command buffer
 * not yet submitted, and a bound one is submitted once. */
START_TEST(test_bound_command_buffers) {
  hali_hal_device_t *device = device_for(_i);
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&library, NULL, &exe));
  hali_hal_command_buffer_t *cb = record(exe);
  hali_hal_buffer_t *x = ints(device, 4, 1, 1), *y = ints(device, 4, 0, 0);
  hali_hal_buffer_t *out[2] = {ints(device, 4, 0, 0), ints(device, 4, 0, 0)};
  hali_hal_buffer_t *cache[2] = {ints(device, 2, 0, 0), ints(device, 2, 0, 0)};
  hali_hal_command_buffer_t *bound[2] = {NULL, NULL};
  for (int k = 0; k < 2; ++k) {
    hali_hal_binding_table_entry_t e[4] = {{x, 0, 16},
                                           {y, 0, HALI_HAL_WHOLE_BUFFER},
                                           {out[k], 0, 16},
                                           {cache[k], 0, 8}};
    HALI_CK_OK(hali_hal_command_buffer_bind(cb, e, 4, &bound[k]));
    const uint32_t c[2] = {0, (uint32_t)(10 * (k + 1))};
    HALI_CK_OK(hali_hal_command_buffer_bind_constants(bound[k], c, 2));
  }
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, bound, 2));
  HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
  hali_hal_fence_release(signal);
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 4; ++i)
      ck_assert_int_eq(at(out[k], (size_t)i), 10 * (k + 1) * (1 + i) + 7);
    ck_assert_int_eq(at(cache[k], 0), 10 * (k + 1) * 2 + 7);
    ck_assert_int_eq(at(cache[k], 1), 10 * (k + 1) * 3 + 7);
  }
  HALI_CK_STATUS(hali_hal_command_buffer_bind_constants(bound[0], NULL, 0),
                 HALI_STATUS_FAILED_PRECONDITION,
                 "not a bound command buffer waiting to be submitted");
  HALI_CK_STATUS(
      hali_hal_device_queue_execute(device, NULL, NULL, &bound[0], 1),
      HALI_STATUS_FAILED_PRECONDITION, "submitted more than once");
  HALI_CK_STATUS(hali_hal_command_buffer_bind_constants(cb, NULL, 0),
                 HALI_STATUS_FAILED_PRECONDITION, "not a bound command buffer");
  hali_hal_command_buffer_t *nested = NULL;
  HALI_CK_STATUS(hali_hal_command_buffer_bind(bound[1], NULL, 0, &nested),
                 HALI_STATUS_FAILED_PRECONDITION,
                 "must be a finalized reusable recording");
  hali_hal_command_buffer_t *open = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
      &open));
  HALI_CK_STATUS(hali_hal_command_buffer_bind(open, NULL, 0, &nested),
                 HALI_STATUS_FAILED_PRECONDITION,
                 "must be a finalized reusable recording");
  ck_assert_ptr_null(nested);
  /* A bound command buffer whose table is short fails at submit, naming
   * both command buffers. */
  hali_hal_binding_table_entry_t shorter[2] = {{x, 0, 16}, {y, 0, 16}};
  HALI_CK_OK(hali_hal_command_buffer_bind(cb, shorter, 2, &nested));
  char want[64];
  snprintf(want, sizeof(want), "bound to #%u", hali_hal_trace_id(cb));
  HALI_CK_STATUS(hali_hal_device_queue_execute(device, NULL, NULL, &nested, 1),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "the binding table has 2 entries", want);
  hali_hal_command_buffer_release(nested);
  hali_hal_command_buffer_release(open);
  for (int k = 0; k < 2; ++k) {
    hali_hal_command_buffer_release(bound[k]);
    hali_hal_buffer_release(out[k]);
    hali_hal_buffer_release(cache[k]);
  }
  hali_hal_buffer_release(x);
  hali_hal_buffer_release(y);
  hali_hal_command_buffer_release(cb);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* A fill whose pattern is a constant slot: each submission fills with its
 * table's value, masked to the pattern length. */
START_TEST(test_fill_slot) {
  hali_hal_device_t *device = device_for(_i);
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
      &cb));
  hali_hal_buffer_t *s0 = slot(0, 16);
  HALI_CK_OK(hali_hal_command_buffer_fill_slot(cb, s0, 4, 8, 2, 2));
  HALI_CK_STATUS(hali_hal_command_buffer_fill_slot(cb, s0, 0, 4, 4096, 4),
                 HALI_STATUS_OUT_OF_RANGE, "constant slot 4096");
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  ck_assert_uint_eq(hali_hal_command_buffer_constant_slot_count(cb), 3);
  for (uint32_t k = 0; k < 2; ++k) {
    hali_hal_buffer_t *b = ints(device, 4, 0, 0);
    hali_hal_binding_table_entry_t e[1] = {{b, 0, 16}};
    const uint32_t c[3] = {0, 0, 0xabcd0000u + 0x1111u * (k + 1)};
    hali_hal_binding_table_t t = {1, e, 3, c};
    HALI_CK_OK(run(device, cb, &t));
    const int32_t half = (int32_t)(0x1111u * (k + 1));
    ck_assert_int_eq(at(b, 0), 0);
    ck_assert_int_eq(at(b, 1), half | (half << 16));
    ck_assert_int_eq(at(b, 2), half | (half << 16));
    ck_assert_int_eq(at(b, 3), 0);
    hali_hal_binding_table_t few = {1, e, 2, c};
    HALI_CK_STATUS(run(device, cb, &few), HALI_STATUS_INVALID_ARGUMENT,
                   "uses constant slots 0 .. 2");
    hali_hal_buffer_release(b);
  }
  hali_hal_buffer_release(s0);
  hali_hal_command_buffer_release(cb);
  hali_hal_device_release(device);
}
END_TEST

/* Validation mode sees a bound command buffer's accesses as the table
 * makes them: the host reading a buffer a slot names while the submission
 * is in flight is a finding, and so is a second, unordered submission
 * writing it; after the host awaits, both are fine. */
START_TEST(test_validation_through_table) {
  hali_hal_device_params_t params;
  hali_hal_device_params_initialize(&params);
  params.kind = configs[_i].kind;
  params.worker_count = configs[_i].workers;
  params.validate = 1; /* fail */
  hali_hal_device_t *device = NULL;
  HALI_CK_OK(hali_hal_device_create(&params, &device));
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&library, NULL, &exe));
  hali_hal_command_buffer_t *cb = record_for(device, exe);
  hali_hal_buffer_t *x = ints(device, 4, 1, 1), *y = ints(device, 4, 0, 0),
                    *out = ints(device, 4, 0, 0), *cache = ints(device, 2, 0, 0);
  const hali_hal_binding_table_entry_t e[4] = {
      {x, 0, 16}, {y, 0, 16}, {out, 0, 16}, {cache, 0, 8}};
  const uint32_t c[2] = {0, 3};
  hali_hal_binding_table_t table = {4, e, 2, c};
  hali_hal_fence_t *gate = NULL, *done = NULL, *done2 = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gate));
  HALI_CK_OK(hali_hal_fence_create_pending(&done));
  HALI_CK_OK(hali_hal_fence_create_pending(&done2));
  HALI_CK_OK(hali_hal_device_queue_execute_indirect(device, gate, done, cb,
                                                    &table, NULL));
  /* In flight (waiting for |gate|): the host may not read |out|, which
   * slot 2 names, nor may an unordered submission write it. */
  void *p = NULL;
  HALI_CK_STATUS(hali_hal_buffer_map_range(out, 0, HALI_HAL_WHOLE_BUFFER, &p),
                 HALI_STATUS_FAILED_PRECONDITION, "validation: host",
                 "bytes [0, 16) of !hal.buffer#", "writes them");
  HALI_CK_STATUS(hali_hal_device_queue_execute_indirect(device, NULL, done2,
                                                        cb, &table, NULL),
                 HALI_STATUS_FAILED_PRECONDITION,
                 "write-after-write hazard between submissions");
  HALI_CK_OK(hali_hal_fence_signal(gate));
  HALI_CK_OK(hali_hal_fence_await(done, HALI_INFINITE));
  hali_hal_validate_observe_fence(done); /* what the VM's await tells it */
  for (int i = 0; i < 4; ++i)
    ck_assert_int_eq(at(out, (size_t)i), 3 * (1 + i) + 7);
  /* Ordered after the first (the host awaited it): accepted. */
  HALI_CK_OK(hali_hal_device_queue_execute_indirect(device, done, done2, cb,
                                                    &table, NULL));
  HALI_CK_OK(hali_hal_fence_await(done2, HALI_INFINITE));
  hali_hal_validate_observe_fence(done2);
  hali_hal_fence_release(gate);
  hali_hal_fence_release(done);
  hali_hal_fence_release(done2);
  hali_hal_buffer_release(x);
  hali_hal_buffer_release(y);
  hali_hal_buffer_release(out);
  hali_hal_buffer_release(cache);
  hali_hal_command_buffer_release(cb);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

int main(void) {
  Suite *s = suite_create("binding_table");
  TCase *tc = tcase_create("binding_table");
  tcase_set_timeout(tc, 60);
  const int n = (int)(sizeof(configs) / sizeof(configs[0]));
  tcase_add_loop_test(tc, test_replay_with_tables, 0, n);
  tcase_add_loop_test(tc, test_table_errors, 0, n);
  tcase_add_loop_test(tc, test_uncommitted_entry, 0, n);
  tcase_add_loop_test(tc, test_bound_command_buffers, 0, n);
  tcase_add_loop_test(tc, test_fill_slot, 0, n);
  tcase_add_loop_test(tc, test_validation_through_table, 0, n);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
