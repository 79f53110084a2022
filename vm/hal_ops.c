/* hali — the HAL instructions (everything in vm/ops.def from hal.device.get
 * on), out of the interpreter's hot loop: each does real work (allocation,
 * recording, queue submission), so one call and a generic operand decode
 * cost nothing measurable beside it.
 *
 * One static function per row of vm/ops_hal.def (op_<ENUM>, in the row's
 * order), and a table of them built from the same rows: hali_vm_hal_op
 * decodes the operands once and calls the row's function.
 *
 * Ref operands are never NULL: the verifier proves every register is
 * written before it is read, no HAL op writes NULL, and the host's invoke
 * rejects NULL ref arguments.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* HALI_DEBUG */
#include "base/alloc.h"
#include "hal/binding_table.h"
#include "hal/hal.h"
#include "hal/validate.h"
#include "vm/fiber.h"
#include "vm/hal_ops.h"
#include "vm/trace.h"

/* An instruction's operands, found in the generic layout (vm/code.h).
 * Cell 0 holds {op, a, b, c} and any further registers follow in the next
 * cells, 4 per cell, so the register operands are one run of slots that
 * starts right after the opcode: nothing is copied. */
typedef struct {
  const uint16_t *reg;    /* register operands, in order */
  const hali_cell_t *x;   /* other operands, one cell each, in order */
  uint32_t tail_count;
  const uint16_t *tail;
  const hali_cell_t *next;
  const hali_cell_t *pc; /* the instruction (validation labels) */
} decoded_t;

/* Each HAL op's layout, from its op table row: where the other operands
 * and the tail count start, and the cells without a tail.  Built once (the
 * op table's signatures are parsed at run time), so decoding an
 * instruction is a table read instead of two op-table look-ups and
 * hali_code_cells' switch per instruction. */
typedef struct {
  uint8_t x_at;        /* cell of the first non-register operand */
  uint8_t tail_at;     /* cell of the tail count (when |tail|) */
  uint8_t fixed_cells; /* cells of the instruction without its tail slots */
  uint8_t tail;        /* has a variadic register tail */
} hal_layout_t;

/* Validation (hal/validate.h): names the instruction recording the next
 * command of |cb| in the messages about it. */
static void label_command(hali_vm_stack_t *st, const decoded_t *d,
                          hali_hal_command_buffer_t *cb) {
  if (HALI_LIKELY(!hali_hal_command_buffer_validating(cb))) return;
  char where[256];
  hali_vm_describe_pc(st, d->pc, where, sizeof(where));
  hali_hal_command_buffer_set_label(cb, where);
}

/* Stores a new (owned) ref into slot |s|, releasing what was there. */
static void set_ref(hali_ref_t **refs, uint16_t s, void *object) {
  hali_ref_t *old = refs[s];
  refs[s] = (hali_ref_t *)object;
  hali_ref_release(old);
}

/* Operand k of the instruction, by the register bank its type lives in. */
#define REF(T, k) ((T *)refs[d->reg[k]])
#define I32(k) (regs[d->reg[k]].i32)
#define U32(k) (regs[d->reg[k]].u32)
#define I64(k) (regs[d->reg[k]].i64)

/* A byte offset from an i64 register: negative values are out of range. */
static hali_status_t offset_arg(int64_t v, const char *what,
                                hali_hal_device_size_t *out) {
  if (v < 0)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE, "%s %lld is negative",
                            what, (long long)v);
  *out = (hali_hal_device_size_t)v;
  return HALI_OK;
}

static void release_module(void *m) { hali_vm_module_release(m); }

/* --trace=hal: every [hal] line comes from the HAL, through the tracer of
 * the object operated on (hal/common.h hali_hal_tracer_t): the device's
 * tracer reaches its allocator, the buffers allocated from it (and their
 * subspans and views), the command buffers and fences made for it
 * (hali_hal_device_create_command_buffer, _create_fence), and the constant
 * buffers wrapped here.  The VM only passes labels for module data
 * (rodata names), so a C program using the HAL sees the same lines. */

/* One function per row of vm/ops_hal.def, named op_<ENUM>: it reads its
 * operands through |d| (decoded by hali_vm_hal_op), returns HALI_OK, an
 * error, or HALI_STATUS_DEFERRED (the fiber suspends; see hal.fence.await).
 * hali_vm_hal_op advances pc past the instruction only on HALI_OK. */
#define HAL_OP(e)                                                              \
  static hali_status_t op_##e(                                                 \
      hali_vm_stack_t *st __attribute__((unused)), const decoded_t *d,         \
      hali_slot_t *regs __attribute__((unused)),                               \
      hali_ref_t **refs __attribute__((unused)))

/* The hot ops (hali_vm_hal_op calls them inline). */
#define HOT_HAL_OPS(X)                                                         \
  X(HAL_COMMAND_BUFFER_PUSH_DESCRIPTOR_SET)                                    \
  X(HAL_COMMAND_BUFFER_DISPATCH)                                               \
  X(HAL_COMMAND_BUFFER_PUSH_CONSTANTS)                                         \
  X(HAL_COMMAND_BUFFER_EXECUTION_BARRIER)                                      \
  X(HAL_BUFFER_SUBSPAN)
#define HOT_DECL(e)                                                            \
  static inline __attribute__((always_inline)) hali_status_t op_##e(          \
      hali_vm_stack_t *st, const decoded_t *d, hali_slot_t *regs,              \
      hali_ref_t **refs);
HOT_HAL_OPS(HOT_DECL)
#undef HOT_DECL

/* ---- devices, allocators, buffers */

HAL_OP(HAL_DEVICE_GET) {
  if (!st->device)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "no device: the invocation was started without "
                            "one");
  hali_hal_device_retain(st->device);
  set_ref(refs, d->reg[0], st->device);
  return HALI_OK;
}

HAL_OP(HAL_DEVICE_ALLOCATOR) {
  hali_hal_allocator_t *a =
      hali_hal_device_allocator(REF(hali_hal_device_t, 1));
  hali_hal_allocator_retain(a);
  set_ref(refs, d->reg[0], a);
  return HALI_OK;
}

HAL_OP(HAL_ALLOCATOR_ALLOCATE) {
  hali_hal_device_size_t size = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(4), "allocation size", &size));
  hali_hal_buffer_params_t params = {U32(2), U32(3)};
  hali_hal_buffer_t *b = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_allocator_allocate_buffer(
      REF(hali_hal_allocator_t, 1), params, size, &b));
  set_ref(refs, d->reg[0], b); /* the HAL traced it (its allocator's tracer) */
  return HALI_OK;
}

/* hal.allocator.reuse: the carried tensor's spare buffer when it fits
 * exactly, else a fresh one (the spare is then released by the register's
 * next write).  No bytes move either way. */
HAL_OP(HAL_ALLOCATOR_REUSE) {
  hali_hal_device_size_t size = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(5), "allocation size", &size));
  hali_hal_buffer_params_t params = {U32(3), U32(4)};
  hali_hal_buffer_t *have = REF(hali_hal_buffer_t, 2);
  if (hali_hal_buffer_length(have) == size &&
      hali_hal_buffer_byte_offset(have) == 0 &&
      (hali_hal_buffer_memory_types(have) & params.memory_types) ==
          params.memory_types &&
      (hali_hal_buffer_usage(have) & params.usage) == params.usage) {
    hali_hal_buffer_retain(have);
    set_ref(refs, d->reg[0], have);
    return HALI_OK;
  }
  hali_hal_buffer_t *b = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_allocator_allocate_buffer(
      REF(hali_hal_allocator_t, 1), params, size, &b));
  set_ref(refs, d->reg[0], b);
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_CONSTANT) {
  /* The module's bytes, no copy; the buffer keeps the module alive. */
  const hali_ir_rodata_t *r = d->x[0].ptr;
  hali_hal_buffer_params_t params = {
      HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_HOST_VISIBLE |
          HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_CONSTANT | HALI_HAL_BUFFER_USAGE_TRANSFER |
          HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_MAPPING};
  hali_vm_module_t *m = st->frames[st->depth - 1].link->module;
  hali_hal_buffer_t *b = NULL;
  /* Traced by the HAL, through the device's tracer, with the rodata's
   * name as the label. */
  hali_hal_allocator_t *a =
      st->device ? hali_hal_device_allocator(st->device) : NULL;
  char label[1024] = "";
  if (HALI_UNLIKELY(hali_hal_device_tracer(st->device) != NULL))
    snprintf(label, sizeof(label), "@%s", r->name);
  HALI_RETURN_IF_ERROR(
      hali_hal_buffer_wrap_constant(a, label, params, r->data, r->size,
                                    "module constant data", release_module,
                                    m, &b),
      "rodata @%s", r->name);
  hali_vm_module_retain(m);
  set_ref(refs, d->reg[0], b);
  return HALI_OK;
}

HAL_OP(HAL_EXECUTABLE_GET) {
  /* The running frame's link table: what this context loaded. */
  uint32_t index = (uint32_t)(d->x[0].imm);
  const hali_vm_link_t *link = st->frames[st->depth - 1].link;
  hali_hal_executable_t *e =
      link->executables ? link->executables[index] : NULL;
  if (!e)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "executable @%s was not loaded (the module was "
                            "not linked with an executable loader)",
                            link->module->ir->executables[index].name);
  hali_hal_executable_retain(e);
  set_ref(refs, d->reg[0], e);
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_SUBSPAN) {
  hali_hal_device_size_t off = 0, len = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(2), "subspan offset", &off));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(3), "subspan length", &len));
  hali_hal_buffer_t *b = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_subspan(REF(hali_hal_buffer_t, 1), off, len, &b));
  set_ref(refs, d->reg[0], b); /* traced by the HAL (the buffer's tracer) */
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_LENGTH) {
  regs[d->reg[0]].i64 =
      (int64_t)hali_hal_buffer_length(REF(hali_hal_buffer_t, 1));
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_ASSERT) {
  hali_hal_buffer_t *b = REF(hali_hal_buffer_t, 0);
  const hali_vm_string_t *msg = d->x[0].ptr;
  hali_hal_device_size_t len = hali_hal_buffer_length(b);
  hali_hal_memory_type_bits_t mt = hali_hal_buffer_memory_types(b);
  hali_hal_buffer_usage_bits_t us = hali_hal_buffer_usage(b);
  char have[128], want[128];
  if (I64(1) < 0 || len < (hali_hal_device_size_t)I64(1))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%.*s: buffer has %llu bytes, expected at least "
                            "%lld",
                            (int)msg->length, msg->data,
                            (unsigned long long)len, (long long)I64(1));
  if ((mt & U32(2)) != U32(2))
    return hali_status_make(
        HALI_STATUS_INVALID_ARGUMENT,
        "%.*s: buffer memory types %s lack the expected %s",
        (int)msg->length, msg->data,
        hali_hal_memory_type_bits_format(mt, have, sizeof(have)),
        hali_hal_memory_type_bits_format(U32(2), want, sizeof(want)));
  if ((us & U32(3)) != U32(3))
    return hali_status_make(
        HALI_STATUS_INVALID_ARGUMENT, "%.*s: buffer usage %s lacks the "
                                      "expected %s",
        (int)msg->length, msg->data,
        hali_hal_buffer_usage_bits_format(us, have, sizeof(have)),
        hali_hal_buffer_usage_bits_format(U32(3), want, sizeof(want)));
  return HALI_OK;
}

/* ---- buffer views */

HAL_OP(HAL_BUFFER_VIEW_CREATE) {
  hali_hal_dim_t shape[HALI_HAL_MAX_RANK];
  if (d->tail_count > HALI_HAL_MAX_RANK)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "rank %u exceeds the maximum of %d",
                            d->tail_count, HALI_HAL_MAX_RANK);
  for (uint32_t i = 0; i < d->tail_count; ++i) shape[i] = regs[d->tail[i]].i64;
  hali_hal_buffer_view_t *v = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_view_create(
      REF(hali_hal_buffer_t, 1), d->tail_count, shape, U32(2), U32(3), &v));
  set_ref(refs, d->reg[0], v); /* traced by the HAL (the buffer's tracer) */
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_VIEW_BUFFER) {
  hali_hal_buffer_t *b =
      hali_hal_buffer_view_buffer(REF(hali_hal_buffer_view_t, 1));
  hali_hal_buffer_retain(b);
  set_ref(refs, d->reg[0], b);
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_VIEW_RANK) {
  regs[d->reg[0]].i32 =
      (int32_t)hali_hal_buffer_view_rank(REF(hali_hal_buffer_view_t, 1));
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_VIEW_DIM) {
  hali_hal_buffer_view_t *v = REF(hali_hal_buffer_view_t, 1);
  size_t rank = hali_hal_buffer_view_rank(v);
  if (I32(2) < 0 || (size_t)I32(2) >= rank)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "dimension %d of a rank-%zu view", I32(2), rank);
  regs[d->reg[0]].i64 = hali_hal_buffer_view_dim(v, (size_t)I32(2));
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_VIEW_ELEMENT_TYPE) {
  regs[d->reg[0]].u32 =
      hali_hal_buffer_view_element_type(REF(hali_hal_buffer_view_t, 1));
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_VIEW_TRACE) {
  if (HALI_TRACE_ON(st->trace)) {
    const hali_vm_string_t *label = d->x[0].ptr;
    hali_strbuf_t sb = {0};
    hali_trace_format_ref(st->trace, refs[d->reg[0]], &sb);
    char *text = hali_strbuf_take(&sb);
    hali_trace_printf(st->trace, "[trace] %.*s: %s", (int)label->length,
                      label->data, text ? text : "");
    hali_free(text);
  }
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_VIEW_ASSERT) {
  hali_hal_buffer_view_t *v = REF(hali_hal_buffer_view_t, 0);
  const hali_vm_string_t *msg = d->x[0].ptr;
  bool ok = hali_hal_buffer_view_element_type(v) == U32(1) &&
            hali_hal_buffer_view_encoding_type(v) == U32(2) &&
            hali_hal_buffer_view_rank(v) == d->tail_count;
  for (uint32_t i = 0; ok && i < d->tail_count; ++i)
    ok = hali_hal_buffer_view_dim(v, i) == regs[d->tail[i]].i64;
  if (!ok) {
    char have[HALI_HAL_MAX_RANK * 21 + 16], want[sizeof(have)];
    hali_hal_buffer_view_format_type(v, have, sizeof(have));
    size_t n = 0;
    for (uint32_t i = 0; i < d->tail_count && n < sizeof(want) - 24; ++i)
      n += (size_t)snprintf(want + n, sizeof(want) - n, "%lldx",
                            (long long)regs[d->tail[i]].i64);
    const char *et = hali_hal_element_type_name(U32(1));
    if (et) snprintf(want + n, sizeof(want) - n, "%s", et);
    else snprintf(want + n, sizeof(want) - n, "<type 0x%08x>", U32(1));
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%.*s: view is %s, expected %s%s",
                            (int)msg->length, msg->data, have, want,
                            hali_hal_buffer_view_encoding_type(v) != U32(2)
                                ? " (encoding differs)"
                                : "");
  }
  return HALI_OK;
}

/* ---- command buffers */

HAL_OP(HAL_COMMAND_BUFFER_CREATE) {
  /* On the device: the command buffer reports its recording to the
   * device's tracer, and so do the recording ops below (except update). */
  hali_hal_command_buffer_t *cb = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_device_create_command_buffer(
      REF(hali_hal_device_t, 1), U32(2), U32(3), &cb));
  set_ref(refs, d->reg[0], cb);
  return HALI_OK;
}

HAL_OP(HAL_COMMAND_BUFFER_FILL) {
  label_command(st, d, REF(hali_hal_command_buffer_t, 0));
  hali_hal_device_size_t off = 0, len = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(2), "fill offset", &off));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(3), "fill length", &len));
  return hali_hal_command_buffer_fill(REF(hali_hal_command_buffer_t, 0),
                                      REF(hali_hal_buffer_t, 1), off, len,
                                      U32(4), U32(5));
}

HAL_OP(HAL_COMMAND_BUFFER_COPY) {
  label_command(st, d, REF(hali_hal_command_buffer_t, 0));
  hali_hal_device_size_t so = 0, to = 0, len = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(2), "copy source offset", &so));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(4), "copy target offset", &to));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(5), "copy length", &len));
  return hali_hal_command_buffer_copy(REF(hali_hal_command_buffer_t, 0),
                                      REF(hali_hal_buffer_t, 1), so,
                                      REF(hali_hal_buffer_t, 3), to, len);
}

HAL_OP(HAL_COMMAND_BUFFER_UPDATE) {
  label_command(st, d, REF(hali_hal_command_buffer_t, 0));
  const hali_ir_rodata_t *r = d->x[0].ptr;
  hali_hal_device_size_t so = 0, to = 0, len = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(1), "update source offset", &so));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(3), "update target offset", &to));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(4), "update length", &len));
  if (!hali_hal_range_fits(r->size, so, len))
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "update reads [%llu, %llu + %llu) of rodata @%s "
                            "which has %llu bytes",
                            (unsigned long long)so, (unsigned long long)so,
                            (unsigned long long)len, r->name,
                            (unsigned long long)r->size);
  /* Traced by the command buffer, labelled with the rodata's name. */
  char label[1024] = "@";
  snprintf(label + 1, sizeof(label) - 1, "%s", r->name);
  return hali_hal_command_buffer_update_from(
      REF(hali_hal_command_buffer_t, 0), r->data + so, label, so,
      REF(hali_hal_buffer_t, 2), to, len);
}

HAL_OP(HAL_COMMAND_BUFFER_PUSH_CONSTANTS) {
  uint32_t values[256];
  if (d->tail_count > 256)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%u push constants; at most 256 per op",
                            d->tail_count);
  for (uint32_t i = 0; i < d->tail_count; ++i) values[i] = regs[d->tail[i]].u32;
  if (I32(1) < 0)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "push constant offset %d is negative", I32(1));
  return hali_hal_command_buffer_push_constants(
      REF(hali_hal_command_buffer_t, 0), U32(1), values, d->tail_count);
}

HAL_OP(HAL_COMMAND_BUFFER_PUSH_DESCRIPTOR_SET) {
  hali_hal_device_size_t offset = 0, length = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(3), "binding offset", &offset));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(4), "binding length", &length));
  return hali_hal_command_buffer_push_binding(REF(hali_hal_command_buffer_t, 0),
                                              U32(1), REF(hali_hal_buffer_t, 2),
                                              offset, length);
}

HAL_OP(HAL_COMMAND_BUFFER_DISPATCH) {
  label_command(st, d, REF(hali_hal_command_buffer_t, 0));
  /* Counts live in i32 registers: a negative one is a mistake, not
   * 2^32 - n workgroups. */
  for (int k = 3; k <= 5; ++k) {
    if (I32(k) >= 0) continue;
    hali_hal_executable_t *x = REF(hali_hal_executable_t, 1);
    const hali_hal_executable_export_t *e =
        hali_hal_executable_export(x, U32(2));
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "dispatch of executable '%s' export %u '%s': "
                            "workgroup count %c is %d (negative; grid %d x "
                            "%d x %d)",
                            hali_hal_executable_name(x), U32(2),
                            e ? e->name : "?", "xyz"[k - 3], I32(k), I32(3),
                            I32(4), I32(5));
  }
  return hali_hal_command_buffer_dispatch(
      REF(hali_hal_command_buffer_t, 0), REF(hali_hal_executable_t, 1),
      U32(2), U32(3), U32(4), U32(5));
}

HAL_OP(HAL_COMMAND_BUFFER_EXECUTION_BARRIER) {
  label_command(st, d, REF(hali_hal_command_buffer_t, 0));
  return hali_hal_command_buffer_execution_barrier(
      REF(hali_hal_command_buffer_t, 0));
}

HAL_OP(HAL_COMMAND_BUFFER_FINALIZE) {
  return hali_hal_command_buffer_finalize(REF(hali_hal_command_buffer_t, 0));
}

/* ---- queues */

HAL_OP(HAL_DEVICE_QUEUE_EXECUTE) {
  hali_hal_command_buffer_t *cbs[256];
  if (d->tail_count > 256)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%u command buffers; at most 256 per submission",
                            d->tail_count);
  for (uint32_t i = 0; i < d->tail_count; ++i)
    cbs[i] = (hali_hal_command_buffer_t *)refs[d->tail[i]];
  /* Bytecode kernels draw fuel from the invocation's pool: keep it at
   * half of what this fiber and the pool hold together (never more: the
   * invocation and its kernels share the budget it started with). */
  hali_hal_stop_t *stop = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_vm_fiber_stop_for(st, &stop));
  if (st->fuel_enabled && stop) {
    uint64_t pool = hali_hal_stop_fuel(stop);
    uint64_t give = pool < st->fuel ? (st->fuel - pool) / 2 : 0;
    st->fuel -= give;
    hali_hal_stop_add_fuel(stop, give);
  }
  /* The HAL traces the submission (the device's tracer). */
  return hali_hal_device_queue_execute_stoppable(
      REF(hali_hal_device_t, 0), REF(hali_hal_fence_t, 1),
      REF(hali_hal_fence_t, 2), cbs, d->tail_count, stop);
}

HAL_OP(HAL_DEVICE_QUEUE_ALLOCA) {
  hali_hal_device_size_t size = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(6), "allocation size", &size));
  hali_hal_buffer_params_t params = {U32(4), U32(5)};
  hali_hal_buffer_t *b = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_device_queue_alloca(
      REF(hali_hal_device_t, 1), REF(hali_hal_fence_t, 2),
      REF(hali_hal_fence_t, 3), params, size, &b));
  set_ref(refs, d->reg[0], b); /* traced by the HAL */
  return HALI_OK;
}

HAL_OP(HAL_DEVICE_QUEUE_DEALLOCA) {
  return hali_hal_device_queue_dealloca(
      REF(hali_hal_device_t, 0), REF(hali_hal_fence_t, 1),
      REF(hali_hal_fence_t, 2), REF(hali_hal_buffer_t, 3)); /* traced there */
}

/* ---- fences */

HAL_OP(HAL_FENCE_CREATE) {
  /* Made for the device, the fence reports to the device's tracer (the
   * HAL prints fence.create and every line below: hal/fence.h). */
  hali_hal_fence_t *f = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(st->device
                                 ? hali_hal_device_create_fence(st->device, &f)
                                 : hali_hal_fence_create_pending(&f));
  set_ref(refs, d->reg[0], f);
  return HALI_OK;
}

HAL_OP(HAL_FENCE_NULL) {
  hali_hal_fence_t *f = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_create(&f));
  if (st->device)
    hali_hal_fence_trace_to(f, hali_hal_device_allocator(st->device));
  set_ref(refs, d->reg[0], f);
  return HALI_OK;
}

HAL_OP(HAL_FENCE_JOIN) {
  /* %g = hal.fence.join %g, %f on a %g nobody else holds (the group /
   * "join every fiber's fence" idiom) adds %f's points in place: O(1)
   * amortised per point instead of copying %g's N points every time. */
  if (d->reg[0] == d->reg[1] &&
      hali_hal_fence_is_unshared(REF(hali_hal_fence_t, 1)))
    return hali_hal_fence_join_into(REF(hali_hal_fence_t, 1),
                                    REF(hali_hal_fence_t, 2));
  hali_hal_fence_t *both[2] = {REF(hali_hal_fence_t, 1),
                               REF(hali_hal_fence_t, 2)};
  hali_hal_fence_t *f = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_join(both, 2, &f));
  set_ref(refs, d->reg[0], f); /* traced by the HAL */
  return HALI_OK;
}

HAL_OP(HAL_FENCE_OFFSET) {
  hali_hal_fence_t *from = REF(hali_hal_fence_t, 1);
  int64_t delta = I64(2);
  if (delta < 0)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "fence offset %lld is negative: timeline values "
                            "only move forward",
                            (long long)delta);
  /* A loop's offset into the register that holds its last one (nothing
   * else holding it) changes that fence in place. */
  hali_ref_t *old = refs[d->reg[0]];
  if (old && old->type == HALI_TYPE_FENCE &&
      hali_hal_fence_reuse_offset(
          (hali_hal_fence_t *)old, from, (uint64_t)delta,
          st->device ? hali_hal_device_allocator(st->device) : NULL))
    return HALI_OK;
  hali_hal_fence_t *f = NULL;
  size_t bad = SIZE_MAX;
  uint64_t value = 0;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_fence_create_offset_pooled(hali_vm_fiber_fence_pool(st), from,
                                          (uint64_t)delta, &f, &bad, &value));
  if (!f)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "hal.fence.offset of fence #%u: point %zu "
                            "value %llu + offset %lld is past 2^64-1 "
                            "(timeline values never wrap)",
                            ((hali_ref_t *)from)->id, bad,
                            (unsigned long long)value, (long long)delta);
  if (st->device)
    hali_hal_fence_trace_to(f, hali_hal_device_allocator(st->device));
  set_ref(refs, d->reg[0], f);
  return HALI_OK;
}

HAL_OP(HAL_FENCE_SIGNAL) {
  return hali_hal_fence_signal(REF(hali_hal_fence_t, 0)); /* traced there */
}

HAL_OP(HAL_FENCE_FAIL) {
  int32_t code = I32(1);
  if (code <= 0 || code >= HALI_STATUS_CODE_COUNT) code = HALI_STATUS_UNKNOWN;
  hali_hal_fence_fail(REF(hali_hal_fence_t, 0),
                      hali_status_make((hali_status_code_t)code,
                                       "fence failed by hal.fence.fail "
                                       "in @%s",
                                       st->frames[st->depth - 1].fn->ir->name));
  return HALI_OK;
}

HAL_OP(HAL_FENCE_QUERY) {
  bool ready = false;
  hali_status_t q = hali_hal_fence_query(REF(hali_hal_fence_t, 1), &ready);
  regs[d->reg[0]].i32 = hali_hal_fence_state_code(q, ready); /* traced */
  if (!q && ready) hali_hal_validate_observe_fence(REF(hali_hal_fence_t, 1));
  hali_status_free(q);
  return HALI_OK;
}

/* hal.fence.await and hal.fence.await_status: the wait itself, with its
 * suspension, deadline and resumption, is the scheduler's
 * (hali_vm_fiber_await, vm/fiber.c).  DEFERRED passes through: pc stays. */
static hali_status_t fence_await(hali_vm_stack_t *st, const decoded_t *d,
                                 hali_slot_t *regs, hali_ref_t **refs,
                                 bool failure_is_result) {
  int32_t code = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_vm_fiber_await(
      st, REF(hali_hal_fence_t, 1), I64(2), failure_is_result, &code));
  regs[d->reg[0]].i32 = code;
  if (code == 0) hali_hal_validate_observe_fence(REF(hali_hal_fence_t, 1));
  return HALI_OK;
}

HAL_OP(HAL_FENCE_AWAIT) { return fence_await(st, d, regs, refs, false); }

HAL_OP(HAL_FENCE_AWAIT_STATUS) {
  return fence_await(st, d, regs, refs, true);
}

/* ---- channels and collectives (format 1.5, vm/ops_hal_channel.def) */

HAL_OP(HAL_CHANNEL_DEFAULT) {
  hali_hal_channel_t *ch = NULL;
  HALI_RETURN_IF_ERROR(
      hali_hal_device_default_channel(REF(hali_hal_device_t, 1), &ch),
      "hal.channel.default");
  set_ref(refs, d->reg[0], ch);
  return HALI_OK;
}

HAL_OP(HAL_CHANNEL_SPLIT) {
  hali_hal_channel_t *ch = NULL;
  HALI_RETURN_IF_ERROR(hali_hal_channel_split(REF(hali_hal_channel_t, 1),
                                              I32(2), I32(3), &ch),
                       "hal.channel.split");
  set_ref(refs, d->reg[0], ch);
  return HALI_OK;
}

HAL_OP(HAL_CHANNEL_RANK) {
  regs[d->reg[0]].i32 = hali_hal_channel_rank(REF(hali_hal_channel_t, 1));
  return HALI_OK;
}

HAL_OP(HAL_CHANNEL_COUNT) {
  regs[d->reg[0]].i32 = hali_hal_channel_count(REF(hali_hal_channel_t, 1));
  return HALI_OK;
}

HAL_OP(HAL_COMMAND_BUFFER_COLLECTIVE) {
  hali_hal_collective_t op = {
      .kind = (hali_hal_collective_kind_t)U32(2),
      .reduction = (hali_hal_collective_reduction_t)U32(3),
      .element_type = U32(4),
      .param = I32(5),
  };
  if (I64(6) < 0)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "hal.command_buffer.collective: element count "
                            "%lld is negative",
                            (long long)I64(6));
  op.count = (uint64_t)I64(6);
  hali_hal_device_size_t so = 0, sl = 0, ro = 0, rl = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(8), "send offset", &so));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(9), "send length", &sl));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(11), "receive offset", &ro));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(12), "receive length", &rl));
  return hali_hal_command_buffer_collective(
      REF(hali_hal_command_buffer_t, 0), REF(hali_hal_channel_t, 1), &op,
      REF(hali_hal_buffer_t, 7), so, sl, REF(hali_hal_buffer_t, 10), ro, rl);
}

/* ---- binding tables (format 1.6, vm/ops_hal_flow.def; hal/binding_table.h) */

/* A slot or constant-slot number from an i32 register. */
static hali_status_t slot_arg(int32_t v, const char *what, uint32_t *out) {
  if (v < 0 || v >= HALI_HAL_MAX_SLOTS)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s %d is outside [0, %d)", what, v,
                            HALI_HAL_MAX_SLOTS);
  *out = (uint32_t)v;
  return HALI_OK;
}

HAL_OP(HAL_BUFFER_SLOT) {
  uint32_t slot = 0;
  hali_hal_device_size_t len = 0;
  HALI_RETURN_IF_ERROR(slot_arg(I32(1), "binding slot", &slot),
                       "hal.buffer.slot");
  HALI_RETURN_IF_ERROR(offset_arg(I64(2), "slot length", &len),
                       "hal.buffer.slot");
  hali_hal_buffer_params_t params = {U32(3), U32(4)};
  hali_hal_buffer_t *b = NULL;
  HALI_RETURN_IF_ERROR(hali_hal_buffer_create_slot(slot, params, len, &b),
                       "hal.buffer.slot");
  set_ref(refs, d->reg[0], b);
  return HALI_OK;
}

HAL_OP(HAL_COMMAND_BUFFER_PUSH_CONSTANT_SLOTS) {
  label_command(st, d, REF(hali_hal_command_buffer_t, 0));
  uint32_t slots[HALI_HAL_MAX_PUSH_CONSTANTS];
  if (d->tail_count > HALI_HAL_MAX_PUSH_CONSTANTS)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "hal.command_buffer.push_constant_slots: %u "
                            "slots; at most %d",
                            d->tail_count, HALI_HAL_MAX_PUSH_CONSTANTS);
  for (uint32_t i = 0; i < d->tail_count; ++i)
    HALI_RETURN_IF_ERROR(slot_arg(regs[d->tail[i]].i32, "constant slot",
                                  &slots[i]),
                         "hal.command_buffer.push_constant_slots: value %u",
                         i);
  if (I32(1) < 0)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "push constant offset %d is negative", I32(1));
  return hali_hal_command_buffer_push_constant_slots(
      REF(hali_hal_command_buffer_t, 0), U32(1), slots, d->tail_count);
}

HAL_OP(HAL_COMMAND_BUFFER_FILL_SLOT) {
  label_command(st, d, REF(hali_hal_command_buffer_t, 0));
  hali_hal_device_size_t off = 0, len = 0;
  uint32_t slot = 0;
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(2), "fill offset", &off));
  HALI_RETURN_IF_ERROR_PLAIN(offset_arg(I64(3), "fill length", &len));
  HALI_RETURN_IF_ERROR(slot_arg(I32(4), "constant slot", &slot),
                       "hal.command_buffer.fill_slot");
  return hali_hal_command_buffer_fill_slot(REF(hali_hal_command_buffer_t, 0),
                                           REF(hali_hal_buffer_t, 1), off, len,
                                           slot, U32(5));
}

HAL_OP(HAL_COMMAND_BUFFER_BIND) {
  hali_hal_binding_table_entry_t entries[256];
  if (d->tail_count > 256)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "hal.command_buffer.bind: %u buffers; at most 256",
                            d->tail_count);
  for (uint32_t i = 0; i < d->tail_count; ++i)
    entries[i] = (hali_hal_binding_table_entry_t){
        (hali_hal_buffer_t *)refs[d->tail[i]], 0, HALI_HAL_WHOLE_BUFFER};
  if (!REF(hali_hal_command_buffer_t, 1)) /* a cache global not set yet */
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "hal.command_buffer.bind: the recording is null "
                            "(its initializer has not run)");
  hali_hal_command_buffer_t *cb = NULL;
  HALI_RETURN_IF_ERROR(
      hali_hal_command_buffer_bind(REF(hali_hal_command_buffer_t, 1), entries,
                                   d->tail_count, &cb),
      "hal.command_buffer.bind");
  set_ref(refs, d->reg[0], cb);
  return HALI_OK;
}

HAL_OP(HAL_COMMAND_BUFFER_BIND_CONSTANTS) {
  uint32_t values[256];
  if (d->tail_count > 256)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "hal.command_buffer.bind_constants: %u values; at "
                            "most 256",
                            d->tail_count);
  for (uint32_t i = 0; i < d->tail_count; ++i) values[i] = regs[d->tail[i]].u32;
  HALI_RETURN_IF_ERROR(
      hali_hal_command_buffer_bind_constants(REF(hali_hal_command_buffer_t, 0),
                                             values, d->tail_count),
      "hal.command_buffer.bind_constants");
  return HALI_OK;
}

/* ---- the table: one row per vm/ops_hal.def row, in opcode order. */

typedef hali_status_t (*hal_op_fn_t)(hali_vm_stack_t *st, const decoded_t *d,
                                     hali_slot_t *regs, hali_ref_t **refs);

/* Indexed by opcode: the rows of vm/ops_hal.def (format 1.0) and of the
 * later runs at the end of the op table (vm/ops_hal_channel.def,
 * vm/ops_hal_flow.def; format 1.5).  Other opcodes hold NULL. */
static const hal_op_fn_t hal_op_table[HALI_OP_COUNT] = {
#define OP(e, n, f, s, y) [HALI_OP_##e] = op_##e,
#include "vm/ops_hal.def"
#include "vm/ops_hal_channel.def"
#include "vm/ops_hal_flow.def"
#undef OP
};

/* Per opcode, for the HAL rows (hal_op_table's non-NULL entries). */
static hal_layout_t hal_layouts[HALI_OP_COUNT];
static atomic_bool hal_layouts_ready;
static pthread_once_t hal_layouts_once = PTHREAD_ONCE_INIT;

static hal_layout_t layout_of(uint32_t op) {
  const hali_op_info_t *info = hali_op_info(op);
  uint32_t nregs = info->reg_count;
  hal_layout_t l;
  l.x_at = (uint8_t)(1 + (nregs > 3 ? HALI_CELLS_FOR_SLOTS(nregs - 3) : 0));
  l.tail_at = (uint8_t)(l.x_at + info->operand_count - nregs);
  l.tail = info->tail != 0;
  /* hali_code_cells is the one definition of an instruction's size. */
  l.fixed_cells = (uint8_t)(hali_code_cells(op, 0) -
                            (l.tail ? 1 + HALI_CELLS_FOR_SLOTS(0) : 0));
  return l;
}

static void hal_layouts_init(void) {
  for (uint32_t op = 0; op < (uint32_t)HALI_OP_COUNT; ++op)
    if (hal_op_table[op]) hal_layouts[op] = layout_of(op);
  atomic_store_explicit(&hal_layouts_ready, true, memory_order_release);
}

/* |pc|'s operands through its op's layout |l|. */
static inline void decode(const hali_cell_t *pc, const hal_layout_t *l,
                          decoded_t *d) {
  d->reg = hali_cell_slots(pc) + 1;
  d->x = pc + l->x_at;
  if (l->tail) {
    d->tail_count = (uint32_t)pc[l->tail_at].imm;
    d->tail = hali_cell_slots(&pc[l->tail_at + 1]);
    d->next = pc + l->fixed_cells + 1 + HALI_CELLS_FOR_SLOTS(d->tail_count);
  } else {
    d->tail_count = 0;
    d->tail = NULL;
    d->next = pc + l->fixed_cells;
  }
  d->pc = pc;
#ifdef HALI_DEBUG
  if (d->next != pc + hali_code_cells(pc->i.op, d->tail_count)) {
    fprintf(stderr, "hali: debug assertion failed: HAL op %u's layout\n",
            pc->i.op);
    abort();
  }
#endif
}

hali_status_t hali_vm_hal_op(hali_vm_stack_t *st, const hali_cell_t **ppc,
                             hali_slot_t *regs, hali_ref_t **refs) {
  const hali_cell_t *pc = *ppc;
  /* Only the interpreter calls this, from the case labels it makes of the
   * same vm/ops_hal.def rows: |k| is in range (asserted in debug builds). */
  const uint32_t op = pc->i.op;
#ifdef HALI_DEBUG
  if (op >= (uint32_t)HALI_OP_COUNT || !hal_op_table[op]) {
    fprintf(stderr, "hali: debug assertion failed: op %u is not a HAL op\n",
            pc->i.op);
    abort();
  }
#endif
  if (HALI_UNLIKELY(!atomic_load_explicit(&hal_layouts_ready,
                                          memory_order_acquire)))
    pthread_once(&hal_layouts_once, hal_layouts_init);
  decoded_t d;
  decode(pc, &hal_layouts[op], &d);
  /* The ops a program runs most (what it records per dispatch) are called
   * from here, inlined; the rest through the table. */
  hali_status_t s;
  switch (op) {
#define HOT(e)                                                                 \
  case HALI_OP_##e:                                                            \
    s = op_##e(st, &d, regs, refs);                                            \
    break;
    HOT_HAL_OPS(HOT)
#undef HOT
    default:
      s = hal_op_table[op](st, &d, regs, refs);
      break;
  }
  if (s) return s; /* pc stays at the instruction (backtrace, resume) */
  *ppc = d.next;
  return HALI_OK;
}
