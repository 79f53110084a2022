/* hali HAL — command buffer replay: the queue's hot loop.
 *
 * Recording proved every range, usage bit and dispatch interface; what can
 * still fail here is storage that is not committed (queue_alloca not yet
 * executed, or queue_dealloca already executed) and kernels.  Finalize
 * checks every dispatch again against the push state a replay will have
 * (hali_hal_command_list_check_dispatches), so a corrupt recording never
 * reaches a kernel, and replays skip the checks.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "hal/binding_table.h"
#include "hal/buffer_impl.h"
#include "hal/command_list.h"
#include "hal/validate.h"

/* Fills at memset speed for every pattern (a fill's offset and length are
 * multiples of the pattern's length, hal/command_buffer.c):
 *   - a pattern whose bytes are all equal is a memset;
 *   - any other is widened to a 32-byte chunk (the pattern repeated, 32
 *     being a multiple of 1, 2 and 4); on x86-64 it is stored with `rep
 *     stosq` below HALI_FILL_STREAM_MIN and with non-temporal AVX2 stores
 *     past it when the CPU has AVX2 (checked at run time, so the build
 *     needs no -mavx2), as memset does: both write whole lines without
 *     reading them first.  Elsewhere, a plain 32-byte loop.
 * Byte k of the fill is byte (k mod pattern_length) of the pattern, in
 * little-endian order (pattern & 0xFF first) on every host. */
enum { HALI_FILL_STREAM_MIN = 4u << 20 }; /* bytes; beyond a typical L2 */

/* |chunk| = the pattern from its byte |phase| on, repeated to 32 bytes:
 * chunk[i] = b[(i + phase) % pattern_length].  4 being a multiple of
 * every pattern length, that is 8 copies of its first 4 bytes (one
 * division in all, not one per byte: a 4 KiB fill made the chunk twice,
 * and 64 divisions were a third of its cost). */
static void hali_hal_fill_chunk(uint8_t chunk[32], const uint8_t b[4],
                                uint32_t pattern_length, uint32_t phase) {
  uint8_t w[4];
  uint32_t k = phase % pattern_length;
  for (uint32_t i = 0; i < 4; ++i) {
    w[i] = b[k];
    if (++k == pattern_length) k = 0;
  }
  for (uint32_t i = 0; i < 32; i += 4) memcpy(chunk + i, w, 4);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HALI_FILL_X86 1
/* |length| rounded down to 128 bytes of |chunk| from a 32-byte aligned
 * |p|, with non-temporal stores; returns the bytes written (a multiple of
 * 128, so the chunk's phase is unchanged after them). */
__attribute__((target("avx2"))) static uint64_t hali_hal_fill_stream_avx2(
    uint8_t *p, uint64_t length, const uint8_t chunk[32]) {
  const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)chunk);
  const uint64_t n = length & ~(uint64_t)127;
  for (uint64_t done = 0; done < n; done += 128) {
    __m256i *q = (__m256i *)(void *)(p + done);
    _mm256_stream_si256(q, v);
    _mm256_stream_si256(q + 1, v);
    _mm256_stream_si256(q + 2, v);
    _mm256_stream_si256(q + 3, v);
  }
  _mm_sfence();
  return n;
}

/* `rep stosq` of the chunk's first 8 bytes (8 is a multiple of every
 * pattern length): what memset does at these sizes, and it writes whole
 * lines without reading them first.  Returns the bytes written. */
static uint64_t hali_hal_fill_stosq(uint8_t *p, uint64_t length,
                                    const uint8_t chunk[32]) {
  uint64_t v, n = length / 8;
  memcpy(&v, chunk, 8);
  __asm__ volatile("rep stosq" : "+D"(p), "+c"(n) : "a"(v) : "memory");
  return length & ~(uint64_t)7;
}

static bool hali_hal_fill_has_avx2(void) {
  /* A benign race: every thread computes the same value. */
  static _Atomic int has = -1;
  int h = atomic_load_explicit(&has, memory_order_relaxed);
  if (h < 0) {
    h = __builtin_cpu_supports("avx2") ? 1 : 0;
    atomic_store_explicit(&has, h, memory_order_relaxed);
  }
  return h;
}
#endif

static void hali_hal_fill_bytes(uint8_t *p, uint64_t length, uint32_t pattern,
                                uint32_t pattern_length) {
  const uint8_t b[4] = {(uint8_t)pattern, (uint8_t)(pattern >> 8),
                        (uint8_t)(pattern >> 16), (uint8_t)(pattern >> 24)};
  bool same = true;
  for (uint32_t i = 1; i < pattern_length; ++i) same = same && b[i] == b[0];
  if (same) {
    memset(p, b[0], (size_t)length);
    return;
  }
  uint8_t chunk[32];
  hali_hal_fill_chunk(chunk, b, pattern_length, 0);
  uint64_t done = 0;
#ifdef HALI_FILL_X86
  if (length >= 256) {
    /* Up to a 32-byte boundary with plain stores, then the chunk from the
     * pattern byte the fill has reached. */
    done = (32u - ((uintptr_t)p & 31u)) & 31u;
    memcpy(p, chunk, (size_t)done);
    hali_hal_fill_chunk(chunk, b, pattern_length,
                        (uint32_t)(done % pattern_length));
    if (length >= HALI_FILL_STREAM_MIN && hali_hal_fill_has_avx2())
      done += hali_hal_fill_stream_avx2(p + done, length - done, chunk);
    else
      done += hali_hal_fill_stosq(p + done, length - done, chunk);
  }
#endif
  /* The rest (all of it off x86-64): 32 bytes at a time, then the tail,
   * from the chunk at the phase |done| is at. */
  for (; length - done >= 32; done += 32) memcpy(p + done, chunk, 32);
  memcpy(p + done, chunk, (size_t)(length - done));
}

/* |status| of workgroup |wg| of a dispatch, annotated with where. */
static hali_status_t hali_hal_dispatch_failed(
    const hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_kernel_workgroup_state_t *wg, hali_status_t status) {
  return hali_status_annotate(
      status, "in dispatch of executable '%s' export %u '%s' at workgroup "
              "(%u,%u,%u) of (%u,%u,%u)",
      hali_hal_executable_name(executable), ordinal,
      hali_hal_executable_export(executable, ordinal)->name,
      wg->workgroup_id_x, wg->workgroup_id_y, wg->workgroup_id_z,
      dispatch->workgroup_count_x, dispatch->workgroup_count_y,
      dispatch->workgroup_count_z);
}

hali_status_t hali_hal_dispatch_run_workgroups(
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, uint64_t begin, uint64_t end,
    uint32_t worker_id, void *scratch, size_t scratch_size,
    hali_hal_stop_t *stop) {
  const uint64_t cx = dispatch->workgroup_count_x;
  const uint64_t cxy = cx * dispatch->workgroup_count_y;
  hali_kernel_workgroup_state_t wg = {
      .worker_id = worker_id,
      .scratch = scratch,
      .scratch_size = scratch_size,
  };
  /* Validation (hal/validate.h): while a guarded dispatch runs, each
   * workgroup runs under the fault handler; read once per chunk. */
  const bool guarded = HALI_UNLIKELY(atomic_load_explicit(
      &hali_hal_validate_guards_active, memory_order_relaxed) != 0);
  /* A C kernel is called here directly (one call per workgroup instead of
   * three); guarded runs keep their own path. */
  const hali_kernel_fn_t fn =
      guarded ? NULL : hali_hal_executable_direct_kernel(executable, ordinal);
  /* The first workgroup's id by division, then stepped: x runs fastest,
   * then y, then z (the order workgroup index i = x + cx * (y + cy * z)
   * gives). */
  const uint32_t cxu = dispatch->workgroup_count_x;
  const uint32_t cyu = dispatch->workgroup_count_y;
  if (begin < end && begin != 0) { /* (0: all ids 0, no division) */
    wg.workgroup_id_z = (uint32_t)(begin / cxy);
    wg.workgroup_id_y = (uint32_t)((begin % cxy) / cx);
    wg.workgroup_id_x = (uint32_t)(begin % cx);
  }
  for (uint64_t i = begin; i < end; ++i) {
    if (i != begin && ++wg.workgroup_id_x == cxu) {
      wg.workgroup_id_x = 0;
      if (++wg.workgroup_id_y == cyu) {
        wg.workgroup_id_y = 0;
        ++wg.workgroup_id_z;
      }
    }
    /* The workgroup boundary is where a native kernel can be stopped: one
     * relaxed load per workgroup (plus the clock with a deadline). */
    hali_status_code_t stopped = hali_hal_stop_check(stop);
    int code = 0;
    hali_status_t status =
        HALI_UNLIKELY(stopped != HALI_STATUS_OK)
            ? hali_status_annotate(hali_hal_stop_status(stopped),
                                   "abandoned before its next workgroup")
        : HALI_LIKELY(fn != NULL)
            ? (HALI_LIKELY((code = fn(dispatch, &wg)) == 0)
                   ? HALI_OK
                   : hali_hal_executable_kernel_error(executable, ordinal,
                                                      code, &wg))
        : HALI_UNLIKELY(guarded)
            ? hali_hal_validate_guarded_workgroup(executable, ordinal,
                                                  dispatch, &wg, stop)
            : hali_hal_executable_run_workgroup(executable, ordinal, dispatch,
                                                &wg, stop);
    if (HALI_UNLIKELY(status != NULL))
      return hali_hal_dispatch_failed(executable, ordinal, dispatch, &wg,
                                      status);
  }
  return HALI_OK;
}

/* hali_hal_buffer_resolve, or for a binding-slot placeholder its table
 * entry's bytes (hal/binding_table.h): the plain case inline. */
static inline hali_status_t resolve_in(const hali_hal_binding_table_t *table,
                                       hali_hal_buffer_t *buffer,
                                       hali_hal_device_size_t offset,
                                       hali_hal_device_size_t length,
                                       uint8_t **out_ptr) {
  if (HALI_LIKELY(!buffer->allocated->slot))
    return hali_hal_buffer_resolve(buffer, offset, length, out_ptr);
  return hali_hal_binding_table_resolve(table, buffer, offset, length, out_ptr);
}

/* Replay state: what push_constants/push_descriptor_set have set so far. */
typedef struct hali_hal_replay_state_t {
  uint64_t constants_set;
  uint64_t constant_slots; /* bit i: constants[i] is a constant slot */
  uint32_t bindings_set;
  uint32_t constants[HALI_HAL_MAX_PUSH_CONSTANTS];
  hali_hal_command_binding_t bindings[HALI_HAL_MAX_BINDINGS];
} hali_hal_replay_state_t;

static void trace_dispatch_line(const hali_hal_tracer_t *t,
                                const hali_hal_command_dispatch_t *cmd,
                                const hali_kernel_dispatch_state_t *d);

/* The checks of a dispatch against the replay state |state|. */
static hali_status_t hali_hal_replay_check_dispatch(
    const hali_hal_replay_state_t *state,
    const hali_hal_command_dispatch_t *cmd) {
  hali_hal_dispatch_bindings_t check = {
      .constants_set = state->constants_set,
      .bindings_set = state->bindings_set,
      .bindings = state->bindings,
  };
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_dispatch_validate(cmd->executable, cmd->ordinal, &check));
  return hali_hal_dispatch_validate_workgroup_count(
      cmd->executable, cmd->ordinal, cmd->workgroup_count[0],
      cmd->workgroup_count[1], cmd->workgroup_count[2]);
}

/* What push_constants / push_descriptor_set leave in the replay state
 * (|values|: also copy the constants' values, which checks do not need). */
static inline __attribute__((always_inline)) void hali_hal_replay_push(
    hali_hal_replay_state_t *state, const hali_hal_command_header_t *h,
    bool values) {
  if (h->type == HALI_HAL_COMMAND_PUSH_CONSTANTS ||
      h->type == HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS) {
    const hali_hal_command_push_constants_t *cmd = (const void *)h;
    /* Recording proved offset + count <= HALI_HAL_MAX_PUSH_CONSTANTS (64). */
    if (values)
      for (uint32_t i = 0; i < cmd->count; ++i)
        state->constants[cmd->offset + i] = cmd->values[i];
    if (cmd->count) {
      const uint64_t bits = (cmd->count >= 64 ? ~(uint64_t)0
                                              : (((uint64_t)1 << cmd->count) - 1))
                            << cmd->offset;
      state->constants_set |= bits;
      if (HALI_UNLIKELY(h->type == HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS))
        state->constant_slots |= bits;
      else
        state->constant_slots &= ~bits;
    }
  } else {
    const hali_hal_command_push_descriptor_set_t *cmd = (const void *)h;
    if (HALI_LIKELY(cmd->count == 1)) { /* what the VM records */
      const hali_hal_command_binding_t *b = &cmd->bindings[0];
      state->bindings[b->ordinal] = *b;
      state->bindings_set |= 1u << b->ordinal;
      return;
    }
    for (uint32_t i = 0; i < cmd->count; ++i) {
      const hali_hal_command_binding_t *b = &cmd->bindings[i];
      state->bindings[b->ordinal] = *b;
      state->bindings_set |= 1u << b->ordinal;
    }
  }
}

hali_status_t hali_hal_command_list_check_dispatches(
    const hali_hal_command_buffer_t *cb) {
  hali_hal_replay_state_t state;
  state.constants_set = 0;
  state.constant_slots = 0;
  state.bindings_set = 0;
  size_t index = 0;
  for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb); h;
       h = hali_hal_command_list_next(cb, h), ++index) {
    switch ((hali_hal_command_type_t)h->type) {
      case HALI_HAL_COMMAND_PUSH_CONSTANTS:
      case HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS:
      case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET:
        hali_hal_replay_push(&state, h, false);
        break;
      case HALI_HAL_COMMAND_DISPATCH:
        HALI_RETURN_IF_ERROR(
            hali_hal_replay_check_dispatch(
                &state, (const hali_hal_command_dispatch_t *)(const void *)h),
            "command %zu of %zu", index, cb->command_count);
        break;
      default:
        break;
    }
  }
  return HALI_OK;
}

/* Runs dispatch |cmd| of export |e| with its resolved bindings: the
 * record walk and the replay program both end here.  An empty grid (an
 * exact product of 0, never a wrapped one: the count was validated at
 * record time) runs nothing. */
static inline hali_status_t launch(const hali_hal_command_dispatch_t *cmd,
                                   const hali_hal_executable_export_t *e,
                                   const uint32_t *constants, void **ptrs,
                                   size_t *lengths,
                                   hali_hal_dispatch_runner_t run_dispatch,
                                   void *runner_self,
                                   const hali_hal_tracer_t *tracer,
                                   hali_hal_stop_t *stop) {
  if (!cmd->workgroup_count[0] || !cmd->workgroup_count[1] ||
      !cmd->workgroup_count[2])
    return HALI_OK;
  hali_kernel_dispatch_state_t dispatch = {
      .workgroup_count_x = cmd->workgroup_count[0],
      .workgroup_count_y = cmd->workgroup_count[1],
      .workgroup_count_z = cmd->workgroup_count[2],
      .workgroup_size_x = e->workgroup_size[0],
      .workgroup_size_y = e->workgroup_size[1],
      .workgroup_size_z = e->workgroup_size[2],
      .constant_count = e->constant_count,
      .constants = constants,
      .binding_count = e->binding_count,
      .binding_ptrs = ptrs,
      .binding_lengths = lengths,
  };
  if (tracer && tracer->line) trace_dispatch_line(tracer, cmd, &dispatch);
  return run_dispatch(runner_self, cmd->executable, cmd->ordinal, &dispatch,
                      stop);
}

/* The constants a dispatch sees when some are constant slots (|mask|):
 * |constants| with those replaced by the table's values, in |out|. */
static const uint32_t *hali_hal_slot_constants(
    const hali_hal_binding_table_t *table, const uint32_t *constants,
    uint32_t count, uint64_t mask, uint32_t *out) {
  for (uint32_t i = 0; i < count; ++i)
    out[i] = (mask >> i) & 1u ? table->constants[constants[i]] : constants[i];
  return out;
}

static hali_status_t hali_hal_replay_dispatch(
    hali_hal_replay_state_t *state, const hali_hal_command_dispatch_t *cmd,
    bool checked, const hali_hal_binding_table_t *table,
    hali_hal_dispatch_runner_t run_dispatch, void *runner_self,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop) {
  /* Finalize checked every dispatch against this same state already. */
  if (HALI_UNLIKELY(!checked))
    HALI_RETURN_IF_ERROR_PLAIN(hali_hal_replay_check_dispatch(state, cmd));
  const hali_hal_executable_export_t *e =
      hali_hal_executable_export(cmd->executable, cmd->ordinal);
  void *ptrs[HALI_HAL_MAX_BINDINGS];
  size_t lengths[HALI_HAL_MAX_BINDINGS];
  for (uint32_t i = 0; i < e->binding_count; ++i) {
    const hali_hal_command_binding_t *b = &state->bindings[i];
    /* The common case inline: committed storage (the range was proven at
     * record time and checked again at finalize). */
    const hali_hal_buffer_t *buffer = b->buffer;
    uint8_t *storage = atomic_load_explicit(&buffer->allocated->storage,
                                            memory_order_acquire);
    if (HALI_LIKELY(storage != NULL &&
                    hali_hal_range_fits(buffer->length, b->offset,
                                        b->length))) {
      ptrs[i] = storage + buffer->offset + b->offset;
      lengths[i] = (size_t)b->length;
      continue;
    }
    uint8_t *p = NULL;
    HALI_RETURN_IF_ERROR(
        resolve_in(table, b->buffer, b->offset, b->length,
                                       &p),
        "binding %u of dispatch of executable '%s' export %u '%s'", i,
        hali_hal_executable_name(cmd->executable), cmd->ordinal, e->name);
    ptrs[i] = p;
    lengths[i] = (size_t)b->length;
  }
  uint32_t slotted[HALI_HAL_MAX_PUSH_CONSTANTS];
  const uint64_t mask =
      state->constant_slots &
      (e->constant_count >= 64 ? ~(uint64_t)0
                               : ((uint64_t)1 << e->constant_count) - 1);
  return launch(cmd, e,
                HALI_UNLIKELY(mask != 0)
                    ? hali_hal_slot_constants(table, state->constants,
                                              e->constant_count, mask, slotted)
                    : state->constants,
                ptrs, lengths, run_dispatch, runner_self, tracer, stop);
}

void hali_hal_trace_dispatch(const hali_hal_tracer_t *t,
                             hali_hal_executable_t *executable,
                             uint32_t ordinal, uint32_t tid, uint64_t begin,
                             uint64_t end, int64_t t0) {
  char name[160], args[96];
  snprintf(name, sizeof(name), "%s::%s", hali_hal_executable_name(executable),
           hali_hal_executable_export(executable, ordinal)->name);
  snprintf(args, sizeof(args),
           "{\"workgroups\":[%" PRIu64 ",%" PRIu64 "],\"worker\":%d}", begin,
           end, tid >= 2 ? (int)tid - 2 : 0);
  t->span(t->user, "dispatch", name, tid, t0, t->now(t->user), args);
}

/* One line per dispatch: executable, export, grid, bindings, constants. */
static void trace_dispatch_line(const hali_hal_tracer_t *t,
                                const hali_hal_command_dispatch_t *cmd,
                                const hali_kernel_dispatch_state_t *d) {
  const hali_hal_executable_export_t *e =
      hali_hal_executable_export(cmd->executable, cmd->ordinal);
  char line[2048];
  size_t n = (size_t)snprintf(
      line, sizeof(line), "[hal] dispatch %s::%s workgroups %ux%ux%u",
      hali_hal_executable_name(cmd->executable), e->name, d->workgroup_count_x,
      d->workgroup_count_y, d->workgroup_count_z);
  for (uint32_t i = 0; i < d->binding_count && n < sizeof(line) - 64; ++i)
    n += (size_t)snprintf(line + n, sizeof(line) - n,
                          " binding[%u]=%zu bytes", i, d->binding_lengths[i]);
  if (d->constant_count && n < sizeof(line) - 32)
    n += (size_t)snprintf(line + n, sizeof(line) - n, " constants=[");
  for (uint32_t i = 0; i < d->constant_count && n < sizeof(line) - 16; ++i)
    n += (size_t)snprintf(line + n, sizeof(line) - n, "%s0x%x", i ? " " : "",
                          d->constants[i]);
  if (d->constant_count && n < sizeof(line) - 2)
    snprintf(line + n, sizeof(line) - n, "]");
  t->line(t->user, line);
}

/* The commands that need no push state (fill, copy, update, collective);
 * others are the caller's. */
static hali_status_t hali_hal_run_plain_command(
    const hali_hal_command_header_t *h, const hali_hal_binding_table_t *table,
    hali_hal_stop_t *stop) {
  hali_status_t status = HALI_OK;
  switch ((hali_hal_command_type_t)h->type) {
    case HALI_HAL_COMMAND_FILL: {
      const hali_hal_command_fill_t *cmd = (const void *)h;
      uint8_t *p = NULL;
      status = resolve_in(table, cmd->target, cmd->offset,
                                              cmd->length, &p);
      uint32_t pattern = cmd->pattern;
      if (HALI_UNLIKELY(cmd->pattern_slot != 0)) {
        /* The table has the slot (checked at submit). */
        pattern = table->constants[cmd->pattern_slot - 1];
        if (cmd->pattern_length < 4)
          pattern &= (1u << (8 * cmd->pattern_length)) - 1;
      }
      if (!status)
        hali_hal_fill_bytes(p, cmd->length, pattern, cmd->pattern_length);
      break;
    }
    case HALI_HAL_COMMAND_COPY: {
      const hali_hal_command_copy_t *cmd = (const void *)h;
      uint8_t *src = NULL, *dst = NULL;
      status = resolve_in(
          table, cmd->source, cmd->source_offset, cmd->length, &src);
      if (!status)
        status = resolve_in(
            table, cmd->target, cmd->target_offset, cmd->length, &dst);
      /* Recording refused overlapping ranges of one allocation; slots
       * resolve only now. */
      if (!status && HALI_UNLIKELY(cmd->source->allocated->slot |
                                   cmd->target->allocated->slot) &&
          cmd->length && src < dst + cmd->length && dst < src + cmd->length)
        status = hali_status_make(
            HALI_STATUS_INVALID_ARGUMENT,
            "copy of %" PRIu64 " bytes from %s %u to %s %u: the binding "
            "table makes the ranges overlap",
            cmd->length,
            hali_hal_buffer_slot(cmd->source) ? "binding slot" : "buffer",
            hali_hal_buffer_slot(cmd->source)
                ? hali_hal_buffer_slot(cmd->source) - 1
                : hali_hal_trace_id(cmd->source),
            hali_hal_buffer_slot(cmd->target) ? "binding slot" : "buffer",
            hali_hal_buffer_slot(cmd->target)
                ? hali_hal_buffer_slot(cmd->target) - 1
                : hali_hal_trace_id(cmd->target));
      if (!status && cmd->length) memcpy(dst, src, (size_t)cmd->length);
      break;
    }
    case HALI_HAL_COMMAND_UPDATE: {
      const hali_hal_command_update_t *cmd = (const void *)h;
      uint8_t *p = NULL;
      status = resolve_in(table, cmd->target, cmd->offset,
                                              cmd->length, &p);
      if (!status && cmd->length) memcpy(p, cmd->data, (size_t)cmd->length);
      break;
    }
    case HALI_HAL_COMMAND_BARRIER:
      /* Commands already run one after another. */
      break;
    case HALI_HAL_COMMAND_COLLECTIVE: {
      const hali_hal_command_collective_t *cmd = (const void *)h;
      uint8_t *src = NULL, *dst = NULL;
      if (cmd->send)
        status = resolve_in(
            table, cmd->send, cmd->send_offset, cmd->send_length, &src);
      if (!status && cmd->recv)
        status = resolve_in(
            table, cmd->recv, cmd->recv_offset, cmd->recv_length, &dst);
      if (!status)
        status = hali_hal_channel_run(cmd->channel, &cmd->op, src, dst, stop);
      else
        hali_hal_channel_abort(cmd->channel, &cmd->op, status);
      break;
    }
    default:
      status = hali_status_make(HALI_STATUS_INTERNAL,
                                "corrupt command list: unknown command "
                                "type %u",
                                h->type);
      break;
  }
  return status;
}

/* ---- The replay program (command_list.h).
 *
 * Compiling walks the list once with the push state a replay has, and for
 * each dispatch keeps its export and pointers to the constants and
 * bindings it sees: copies made when the state changed since the last
 * dispatch that needed as many, else shared with it (a command buffer
 * that pushes once and dispatches N times holds one copy).  A binding
 * keeps its offset into its root buffer's storage, so a replay only loads
 * the storage pointer (NULL while uncommitted: then the bound buffer is
 * resolved as the walk does, for the same error).  The checks the walk
 * skips after finalize (hali_hal_command_list_check_dispatches) hold for
 * the program too: it is made from the same list after they passed. */

/* Sizes the program (|prog| NULL) or fills it. */
static void hali_hal_compile_walk(const hali_hal_command_buffer_t *cb,
                                  hali_hal_replay_program_t *prog,
                                  size_t *out_bindings,
                                  size_t *out_constants,
                                  size_t *out_commands) {
  hali_hal_replay_state_t state;
  state.constants_set = 0;
  state.constant_slots = 0;
  state.bindings_set = 0;
  size_t nb = 0, nc = 0, index = 0;
  /* The last copies made, shared while no push changed the state. */
  const hali_hal_replay_binding_t *last_b = NULL;
  const uint32_t *last_c = NULL;
  uint32_t last_b_count = 0, last_c_count = 0;
  bool b_dirty = true, c_dirty = true;
  for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb); h;
       h = hali_hal_command_list_next(cb, h), ++index) {
    hali_hal_replay_step_t *step = prog ? &prog->steps[index] : NULL;
    if (step) *step = (hali_hal_replay_step_t){.record = h};
    switch ((hali_hal_command_type_t)h->type) {
      case HALI_HAL_COMMAND_PUSH_CONSTANTS:
      case HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS:
        hali_hal_replay_push(&state, h, true);
        c_dirty = true;
        break;
      case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET:
        hali_hal_replay_push(&state, h, false);
        b_dirty = true;
        break;
      case HALI_HAL_COMMAND_DISPATCH: {
        const hali_hal_command_dispatch_t *cmd = (const void *)h;
        const hali_hal_executable_export_t *e =
            hali_hal_executable_export(cmd->executable, cmd->ordinal);
        if (b_dirty || e->binding_count > last_b_count) {
          if (prog) {
            hali_hal_replay_binding_t *b = &prog->bindings[nb];
            for (uint32_t i = 0; i < e->binding_count; ++i) {
              const hali_hal_command_binding_t *sb = &state.bindings[i];
              b[i] = (hali_hal_replay_binding_t){
                  .buffer = sb->buffer,
                  .offset = sb->offset,
                  .base = sb->buffer->offset + sb->offset,
                  .length = (size_t)sb->length,
              };
            }
            last_b = b;
          }
          nb += e->binding_count;
          last_b_count = e->binding_count;
          b_dirty = false;
        }
        if (c_dirty || e->constant_count > last_c_count) {
          if (prog) {
            uint32_t *c = &prog->constants[nc];
            memcpy(c, state.constants, e->constant_count * sizeof(uint32_t));
            last_c = c;
          }
          nc += e->constant_count;
          last_c_count = e->constant_count;
          c_dirty = false;
        }
        if (step) {
          step->e = e;
          step->bindings = last_b;
          step->constants = last_c;
          step->constant_slots =
              state.constant_slots &
              (e->constant_count >= 64
                   ? ~(uint64_t)0
                   : ((uint64_t)1 << e->constant_count) - 1);
        }
        break;
      }
      default:
        break;
    }
  }
  *out_bindings = nb;
  *out_constants = nc;
  *out_commands = index;
}

/* ---- The op loop (command_list.h, hali_hal_replay_op_t).
 *
 * Made from the steps: one op per command that does something, each
 * dispatch with its kernel dispatch state, shared with the previous
 * dispatch when it is the same (same export, grid, constants and
 * bindings: a command buffer that pushes once and dispatches N times has
 * one state).  The states point at the program's |ptrs|, resolved per
 * replay (below), and |lengths|, fixed here. */

/* Counts the ops and states (|fill| false) or fills them. */
static void hali_hal_compile_ops_walk(hali_hal_command_buffer_t *cb,
                                      hali_hal_replay_program_t *prog,
                                      bool fill, size_t *out_ops,
                                      size_t *out_states, size_t *out_slotted,
                                      size_t *out_values) {
  size_t n_ops = 0, n_states = 0, n_slotted = 0, n_values = 0;
  uint32_t max_scratch = 0;
  /* The last state made, by what it was made from. */
  const hali_hal_executable_export_t *last_e = NULL;
  const uint32_t *last_constants = NULL;
  size_t last_bidx = 0;
  uint32_t last_count[3] = {0, 0, 0};
  for (size_t i = 0; i < cb->command_count; ++i) {
    const hali_hal_replay_step_t *step = &prog->steps[i];
    const hali_hal_command_header_t *h = step->record;
    hali_hal_replay_op_t op = {.record = h, .index = (uint32_t)i};
    switch ((hali_hal_command_type_t)h->type) {
      case HALI_HAL_COMMAND_PUSH_CONSTANTS:
      case HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS:
      case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET:
      case HALI_HAL_COMMAND_BARRIER:
        continue; /* (the steps' state already holds what they did) */
      case HALI_HAL_COMMAND_DISPATCH: {
        const hali_hal_command_dispatch_t *cmd = (const void *)h;
        const uint32_t *count = cmd->workgroup_count;
        if (!count[0] || !count[1] || !count[2]) continue; /* runs nothing */
        const hali_hal_executable_export_t *e = step->e;
        size_t bidx = step->bindings ? (size_t)(step->bindings - prog->bindings)
                                     : 0;
        if (e != last_e || step->constants != last_constants ||
            bidx != last_bidx || memcmp(count, last_count, sizeof(last_count))) {
          if (fill)
            prog->states[n_states] = (hali_kernel_dispatch_state_t){
                .workgroup_count_x = count[0],
                .workgroup_count_y = count[1],
                .workgroup_count_z = count[2],
                .workgroup_size_x = e->workgroup_size[0],
                .workgroup_size_y = e->workgroup_size[1],
                .workgroup_size_z = e->workgroup_size[2],
                .constant_count = e->constant_count,
                .constants = step->constants,
                .binding_count = e->binding_count,
                .binding_ptrs = prog->ptrs + bidx,
                .binding_lengths = prog->lengths + bidx,
            };
          if (HALI_UNLIKELY(step->constant_slots != 0)) {
            /* Constants from the binding table: the state reads values
             * each replay fills in (hali_hal_program_resolve). */
            if (fill) {
              uint32_t *values = prog->slot_values + n_values;
              prog->states[n_states].constants = values;
              prog->slotted[n_slotted] = (hali_hal_replay_slotted_t){
                  .values = values,
                  .source = step->constants,
                  .mask = step->constant_slots,
                  .count = e->constant_count,
              };
            }
            ++n_slotted;
            n_values += e->constant_count;
          }
          ++n_states;
          last_e = e;
          last_constants = step->constants;
          last_bidx = bidx;
          memcpy(last_count, count, sizeof(last_count));
        }
        if (fill) op.state = &prog->states[n_states - 1];
        if ((uint64_t)count[0] * count[1] * count[2] == 1) {
          op.single = 1;
          op.fn = hali_hal_executable_direct_kernel(cmd->executable,
                                                    cmd->ordinal);
        }
        op.scratch_size = e->scratch_size;
        if (e->scratch_size > max_scratch) max_scratch = e->scratch_size;
        break;
      }
      default: /* fill, copy, update, collective */
        break;
    }
    if (fill) prog->ops[n_ops] = op;
    ++n_ops;
  }
  if (fill) prog->max_scratch = max_scratch;
  *out_ops = n_ops;
  *out_states = n_states;
  *out_slotted = n_slotted;
  *out_values = n_values;
}

/* Adds the op loop to |prog| (left without one when out of memory). */
static void hali_hal_compile_ops(hali_hal_command_buffer_t *cb,
                                 hali_hal_replay_program_t *prog) {
  if (cb->command_count > INT32_MAX) return; /* (op indices are 31-bit) */
  size_t n_ops = 0, n_states = 0, n_slotted = 0, n_values = 0;
  hali_hal_compile_ops_walk(cb, prog, false, &n_ops, &n_states, &n_slotted,
                            &n_values);
  const size_t nb = prog->binding_count ? prog->binding_count : 1;
  hali_hal_replay_op_t *ops =
      hali_malloc((n_ops ? n_ops : 1) * sizeof(*ops));
  hali_kernel_dispatch_state_t *states =
      hali_malloc((n_states ? n_states : 1) * sizeof(*states));
  void **ptrs = hali_calloc(nb, sizeof(*ptrs));
  size_t *lengths = hali_malloc(nb * sizeof(*lengths));
  /* (Counts bounded by the list's records: no overflow.) */
  hali_hal_replay_slotted_t *slotted =
      n_slotted ? hali_malloc(n_slotted * sizeof(*slotted)) : NULL;
  uint32_t *slot_values =
      n_values ? hali_malloc(n_values * sizeof(*slot_values)) : NULL;
  if (!ops || !states || !ptrs || !lengths || (n_slotted && !slotted) ||
      (n_values && !slot_values)) {
    hali_free(ops);
    hali_free(states);
    hali_free(ptrs);
    hali_free(lengths);
    hali_free(slotted);
    hali_free(slot_values);
    return;
  }
  prog->slotted = slotted;
  prog->slotted_count = n_slotted;
  prog->slot_values = slot_values;
  for (size_t j = 0; j < prog->binding_count; ++j)
    lengths[j] = prog->bindings[j].length;
  prog->ops = ops;
  prog->states = states;
  prog->ptrs = ptrs;
  prog->lengths = lengths;
  hali_hal_compile_ops_walk(cb, prog, true, &n_ops, &n_states, &n_slotted,
                            &n_values);
  prog->op_count = n_ops;
  atomic_init(&prog->claimed, false);
}

void hali_hal_command_list_program_free(hali_hal_replay_program_t *prog) {
  if (!prog) return;
  hali_free(prog->steps);
  hali_free(prog->bindings);
  hali_free(prog->constants);
  hali_free(prog->ops);
  hali_free(prog->states);
  hali_free(prog->ptrs);
  hali_free(prog->lengths);
  hali_free(prog->slotted);
  hali_free(prog->slot_values);
  hali_free(prog);
}

void hali_hal_command_list_compile(hali_hal_command_buffer_t *cb) {
  if (!cb->dispatches_checked || !cb->command_count) return;
  size_t nb = 0, nc = 0, n = 0;
  hali_hal_compile_walk(cb, NULL, &nb, &nc, &n);
  if (n != cb->command_count) return; /* (one step per record) */
  hali_hal_replay_program_t *prog = hali_calloc(1, sizeof(*prog));
  if (!prog) return;
  prog->steps = hali_malloc(cb->command_count * sizeof(*prog->steps));
  prog->bindings = hali_malloc((nb ? nb : 1) * sizeof(*prog->bindings));
  prog->constants = hali_malloc((nc ? nc : 1) * sizeof(*prog->constants));
  if (!prog->steps || !prog->bindings || !prog->constants) {
    hali_hal_command_list_program_free(prog);
    return;
  }
  hali_hal_compile_walk(cb, prog, &nb, &nc, &n);
  prog->binding_count = nb;
  hali_hal_compile_ops(cb, prog);
  cb->program = prog;
}

/* One dispatch of the program. */
static hali_status_t hali_hal_program_dispatch(
    const hali_hal_replay_step_t *step, const hali_hal_binding_table_t *table,
    hali_hal_dispatch_runner_t run_dispatch, void *runner_self,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop) {
  const hali_hal_command_dispatch_t *cmd = (const void *)step->record;
  const hali_hal_executable_export_t *e = step->e;
  void *ptrs[HALI_HAL_MAX_BINDINGS];
  size_t lengths[HALI_HAL_MAX_BINDINGS];
  for (uint32_t i = 0; i < e->binding_count; ++i) {
    const hali_hal_replay_binding_t *b = &step->bindings[i];
    uint8_t *storage = atomic_load_explicit(&b->buffer->allocated->storage,
                                            memory_order_acquire);
    lengths[i] = b->length;
    if (HALI_LIKELY(storage != NULL)) {
      ptrs[i] = storage + b->base;
      continue;
    }
    /* Uncommitted (or committed since the load): as the walk does. */
    uint8_t *p = NULL;
    HALI_RETURN_IF_ERROR(
        resolve_in(table, b->buffer, b->offset, b->length,
                                       &p),
        "binding %u of dispatch of executable '%s' export %u '%s'", i,
        hali_hal_executable_name(cmd->executable), cmd->ordinal, e->name);
    ptrs[i] = p;
  }
  uint32_t slotted[HALI_HAL_MAX_PUSH_CONSTANTS];
  return launch(cmd, e,
                HALI_UNLIKELY(step->constant_slots != 0)
                    ? hali_hal_slot_constants(table, step->constants,
                                              e->constant_count,
                                              step->constant_slots, slotted)
                    : step->constants,
                ptrs, lengths, run_dispatch, runner_self, tracer, stop);
}

/* Resolves the binding pointers of |prog| for one replay (the caller
 * holds |claimed|): false when a binding's storage is not committed, and
 * then the replay takes the steps, which fail at that dispatch as the
 * walk does.  The storage of a buffer the command buffer binds cannot
 * change while it runs: only queue_alloca / queue_dealloca submissions
 * commit or decommit, and fences order them against this one.
 *
 * A binding that names a table slot (a placeholder, hal/binding_table.h)
 * is resolved from the table's entry; the states point at |ptrs| and need
 * nothing else.  The constants of a state with constant slots are filled
 * into the program's |slot_values| (its |slotted| list), which the state
 * points at. */
static bool hali_hal_program_resolve(const hali_hal_replay_program_t *prog,
                                     const hali_hal_binding_table_t *table) {
  const hali_hal_replay_binding_t *b = prog->bindings;
  void **ptrs = prog->ptrs;
  for (size_t j = 0; j < prog->binding_count; ++j) {
    const hali_hal_buffer_t *root = b[j].buffer;
    uint64_t at = b[j].base;
    const uint32_t slot = root->allocated->slot;
    if (HALI_UNLIKELY(slot != 0)) {
      /* A slot placeholder: the table's entry (checked at submit to hold
       * the placeholder's whole length) has the bytes. */
      if (!table || slot - 1 >= table->binding_count ||
          !table->bindings[slot - 1].buffer)
        return false; /* the steps fail at that dispatch, naming it */
      const hali_hal_binding_table_entry_t *e = &table->bindings[slot - 1];
      root = e->buffer;
      at += e->buffer->offset + e->offset;
    }
    uint8_t *storage = atomic_load_explicit(&root->allocated->storage,
                                            memory_order_acquire);
    if (HALI_UNLIKELY(storage == NULL)) return false;
    ptrs[j] = storage + at;
  }
  /* Dispatch states with constant slots: their constants from the
   * table, the rest as recorded. */
  for (size_t k = 0; k < prog->slotted_count; ++k) {
    const hali_hal_replay_slotted_t *sl = &prog->slotted[k];
    if (!table) return false;
    for (uint32_t i = 0; i < sl->count; ++i)
      sl->values[i] = (sl->mask >> i) & 1u ? table->constants[sl->source[i]]
                                           : sl->source[i];
  }
  return true;
}

/* The op loop: the replay of |cb|'s program when this replay holds its
 * |claimed| and resolved it.  Per dispatch: the stop check, and either
 * the kernel's own call with the prebuilt state (a one-workgroup grid —
 * a C kernel's function, another executable's run_workgroup — and a lent
 * worker with enough scratch, no guarded dispatch running) or the
 * device's runner with it. */
static hali_status_t hali_hal_program_run_ops(
    hali_hal_command_buffer_t *cb, const hali_hal_replay_program_t *prog,
    const hali_hal_binding_table_t *table,
    const hali_hal_replay_worker_t *worker,
    hali_hal_dispatch_runner_t run_dispatch, void *runner_self,
    hali_hal_stop_t *stop) {
  const hali_hal_replay_op_t *op = prog->ops, *end = op + prog->op_count;
  /* Scratch at most this large can be lent (-1: no worker lent). */
  const int64_t lent = worker ? (int64_t)worker->scratch_size : -1;
  for (; op != end; ++op) {
    hali_status_t status = HALI_OK;
    hali_status_code_t stopped = hali_hal_stop_check(stop);
    if (HALI_UNLIKELY(stopped != HALI_STATUS_OK)) {
      hali_status_t s = hali_status_annotate(
          hali_hal_stop_status(stopped), "abandoned before command %u of %zu",
          op->index, cb->command_count);
      hali_hal_command_buffer_abort_collectives(cb, op->index, s);
      return s;
    }
    const bool lend_ok =
        (int64_t)op->scratch_size <= lent &&
        atomic_load_explicit(&hali_hal_validate_guards_active,
                             memory_order_relaxed) == 0;
    if (HALI_LIKELY(op->fn != NULL && lend_ok)) {
      const hali_kernel_workgroup_state_t wg = {
          .worker_id = worker->worker_id,
          .scratch = op->scratch_size ? worker->scratch : NULL,
          .scratch_size = op->scratch_size,
      };
      int code = op->fn(op->state, &wg);
      if (HALI_LIKELY(code == 0)) continue;
      const hali_hal_command_dispatch_t *cmd = (const void *)op->record;
      status = hali_hal_dispatch_failed(
          cmd->executable, cmd->ordinal, op->state, &wg,
          hali_hal_executable_kernel_error(cmd->executable, cmd->ordinal,
                                           code, &wg));
    } else if (op->single && lend_ok) {
      /* Another executable (ffi, bytecode): its run_workgroup, the call
       * hali_hal_dispatch_run_workgroups would make for the one
       * workgroup. */
      const hali_kernel_workgroup_state_t wg = {
          .worker_id = worker->worker_id,
          .scratch = op->scratch_size ? worker->scratch : NULL,
          .scratch_size = op->scratch_size,
      };
      const hali_hal_command_dispatch_t *cmd = (const void *)op->record;
      status = hali_hal_executable_run_workgroup(cmd->executable,
                                                 cmd->ordinal, op->state,
                                                 &wg, stop);
      if (HALI_LIKELY(status == NULL)) continue;
      status = hali_hal_dispatch_failed(cmd->executable, cmd->ordinal,
                                        op->state, &wg, status);
    } else if (op->state) {
      const hali_hal_command_dispatch_t *cmd = (const void *)op->record;
      status = run_dispatch(runner_self, cmd->executable, cmd->ordinal,
                            op->state, stop);
    } else {
      status = hali_hal_run_plain_command(op->record, table, stop);
    }
    if (HALI_UNLIKELY(status != NULL)) {
      hali_hal_command_buffer_abort_collectives(cb, (size_t)op->index + 1,
                                                status);
      return hali_status_annotate(status, "executing command %u of %zu",
                                  op->index, cb->command_count);
    }
  }
  return HALI_OK;
}

hali_status_t hali_hal_command_buffer_execute(
    hali_hal_command_buffer_t *cb, hali_hal_dispatch_runner_t run_dispatch,
    void *runner_self, const hali_hal_tracer_t *tracer,
    hali_hal_stop_t *stop) {
  return hali_hal_command_buffer_execute_lent(cb, NULL, NULL, run_dispatch,
                                              runner_self, tracer, stop);
}

hali_status_t hali_hal_command_buffer_execute_lent(
    hali_hal_command_buffer_t *cb, const hali_hal_binding_table_t *table,
    const hali_hal_replay_worker_t *worker,
    hali_hal_dispatch_runner_t run_dispatch, void *runner_self,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop) {
  if (HALI_UNLIKELY((cb->slot_count || cb->constant_slot_count) && !table))
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "command buffer #%u has %u binding and %u "
                            "constant slots: it runs only with a binding "
                            "table (queue_execute_indirect)",
                            hali_hal_trace_id(cb), cb->slot_count,
                            cb->constant_slot_count);
  hali_hal_replay_program_t *ops_prog = cb->program;
  /* The op loop traces nothing: with a tracer, the steps. */
  if (ops_prog && ops_prog->ops && !tracer &&
      !atomic_exchange_explicit(&ops_prog->claimed, true,
                                memory_order_acquire)) {
    hali_status_t status = HALI_OK;
    bool resolved = hali_hal_program_resolve(ops_prog, table);
    if (HALI_LIKELY(resolved))
      status = hali_hal_program_run_ops(cb, ops_prog, table, worker,
                                        run_dispatch, runner_self, stop);
    atomic_store_explicit(&ops_prog->claimed, false, memory_order_release);
    if (HALI_LIKELY(resolved)) return status;
  }
  hali_hal_replay_state_t state;
  state.constants_set = 0;
  state.constant_slots = 0;
  state.bindings_set = 0;
  const hali_hal_replay_program_t *prog = cb->program;
  size_t index = 0;
  for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb); h;
       ++index) {
    hali_status_t status = HALI_OK;
    hali_status_code_t stopped = hali_hal_stop_check(stop);
    if (HALI_UNLIKELY(stopped != HALI_STATUS_OK)) {
      hali_status_t s = hali_status_annotate(
          hali_hal_stop_status(stopped), "abandoned before command %zu of %zu",
          index, cb->command_count);
      hali_hal_command_buffer_abort_collectives(cb, index, s);
      return s;
    }
    switch ((hali_hal_command_type_t)h->type) {
      case HALI_HAL_COMMAND_PUSH_CONSTANTS:
      case HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS:
      case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET:
        /* The program holds what each dispatch sees. */
        if (!prog) hali_hal_replay_push(&state, h, true);
        break;
      case HALI_HAL_COMMAND_DISPATCH:
        status =
            prog ? hali_hal_program_dispatch(&prog->steps[index], table,
                                             run_dispatch, runner_self, tracer,
                                             stop)
                 : hali_hal_replay_dispatch(
                       &state,
                       (const hali_hal_command_dispatch_t *)(const void *)h,
                       cb->dispatches_checked, table, run_dispatch,
                       runner_self, tracer, stop);
        break;
      default:
        status = hali_hal_run_plain_command(h, table, stop);
        break;
    }
    if (HALI_UNLIKELY(status != NULL)) {
      /* Peers waiting in a later collective learn why this rank is not
       * coming (hal/channel.h). */
      hali_hal_command_buffer_abort_collectives(cb, index + 1, status);
      return hali_status_annotate(status, "executing command %zu of %zu",
                                  index, cb->command_count);
    }
    h = prog ? (index + 1 < cb->command_count ? prog->steps[index + 1].record
                                              : NULL)
             : hali_hal_command_list_next(cb, h);
  }
  return HALI_OK;
}
