/* hali HAL — command buffer replay: the queue's hot loop.
 *
 * Recording proved every range, usage bit and dispatch interface; what can
 * still fail here is storage that is not committed (queue_alloca not yet
 * executed, or queue_dealloca already executed) and kernels.  Dispatches
 * are re-validated against the export before any workgroup runs: cheap,
 * and it keeps a corrupt recording from reaching a kernel.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hal/command_list.h"
#include "hal/validate.h"

static void hali_hal_fill_bytes(uint8_t *p, uint64_t length, uint32_t pattern,
                                uint32_t pattern_length) {
  switch (pattern_length) {
    case 1:
      memset(p, (int)(pattern & 0xFF), (size_t)length);
      break;
    case 2: {
      uint8_t b[2] = {(uint8_t)pattern, (uint8_t)(pattern >> 8)};
      for (uint64_t i = 0; i < length; i += 2) memcpy(p + i, b, 2);
      break;
    }
    default: {
      uint8_t b[4] = {(uint8_t)pattern, (uint8_t)(pattern >> 8),
                      (uint8_t)(pattern >> 16), (uint8_t)(pattern >> 24)};
      for (uint64_t i = 0; i < length; i += 4) memcpy(p + i, b, 4);
      break;
    }
  }
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
  for (uint64_t i = begin; i < end; ++i) {
    wg.workgroup_id_z = (uint32_t)(i / cxy);
    wg.workgroup_id_y = (uint32_t)((i % cxy) / cx);
    wg.workgroup_id_x = (uint32_t)(i % cx);
    /* The workgroup boundary is where a native kernel can be stopped: one
     * relaxed load per workgroup (plus the clock with a deadline). */
    hali_status_code_t stopped = hali_hal_stop_check(stop);
    hali_status_t status =
        HALI_UNLIKELY(stopped != HALI_STATUS_OK)
            ? hali_status_annotate(hali_hal_stop_status(stopped),
                                   "abandoned before its next workgroup")
        : HALI_UNLIKELY(guarded)
            ? hali_hal_validate_guarded_workgroup(executable, ordinal,
                                                  dispatch, &wg, stop)
            : hali_hal_executable_run_workgroup(executable, ordinal, dispatch,
                                                &wg, stop);
    if (HALI_UNLIKELY(status != NULL))
      return hali_status_annotate(
          status, "in dispatch of executable '%s' export %u '%s' at workgroup "
                  "(%u,%u,%u) of (%u,%u,%u)",
          hali_hal_executable_name(executable), ordinal,
          hali_hal_executable_export(executable, ordinal)->name,
          wg.workgroup_id_x, wg.workgroup_id_y, wg.workgroup_id_z,
          dispatch->workgroup_count_x, dispatch->workgroup_count_y,
          dispatch->workgroup_count_z);
  }
  return HALI_OK;
}

/* Replay state: what push_constants/push_descriptor_set have set so far. */
typedef struct hali_hal_replay_state_t {
  uint64_t constants_set;
  uint32_t bindings_set;
  uint32_t constants[HALI_HAL_MAX_PUSH_CONSTANTS];
  hali_hal_command_binding_t bindings[HALI_HAL_MAX_BINDINGS];
} hali_hal_replay_state_t;

static void trace_dispatch_line(const hali_hal_tracer_t *t,
                                const hali_hal_command_dispatch_t *cmd,
                                const hali_kernel_dispatch_state_t *d);

static hali_status_t hali_hal_replay_dispatch(
    hali_hal_replay_state_t *state, const hali_hal_command_dispatch_t *cmd,
    hali_hal_dispatch_runner_t run_dispatch, void *runner_self,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop) {
  hali_hal_dispatch_bindings_t check = {
      .constants_set = state->constants_set,
      .bindings_set = state->bindings_set,
      .bindings = state->bindings,
  };
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_dispatch_validate(cmd->executable, cmd->ordinal, &check));
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_dispatch_validate_workgroup_count(
      cmd->executable, cmd->ordinal, cmd->workgroup_count[0],
      cmd->workgroup_count[1], cmd->workgroup_count[2]));
  const hali_hal_executable_export_t *e =
      hali_hal_executable_export(cmd->executable, cmd->ordinal);
  void *ptrs[HALI_HAL_MAX_BINDINGS];
  size_t lengths[HALI_HAL_MAX_BINDINGS];
  for (uint32_t i = 0; i < e->binding_count; ++i) {
    const hali_hal_command_binding_t *b = &state->bindings[i];
    uint8_t *p = NULL;
    HALI_RETURN_IF_ERROR(
        hali_hal_buffer_resolve(b->buffer, b->offset, b->length, &p),
        "binding %u of dispatch of executable '%s' export %u '%s'", i,
        hali_hal_executable_name(cmd->executable), cmd->ordinal, e->name);
    ptrs[i] = p;
    lengths[i] = (size_t)b->length;
  }
  /* An empty grid (an exact product of 0, never a wrapped one: the count
   * was validated above) runs nothing. */
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
      .constants = state->constants,
      .binding_count = e->binding_count,
      .binding_ptrs = ptrs,
      .binding_lengths = lengths,
  };
  if (tracer && tracer->line) trace_dispatch_line(tracer, cmd, &dispatch);
  return run_dispatch(runner_self, cmd->executable, cmd->ordinal, &dispatch,
                      stop);
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

hali_status_t hali_hal_command_buffer_execute(
    hali_hal_command_buffer_t *cb, hali_hal_dispatch_runner_t run_dispatch,
    void *runner_self, const hali_hal_tracer_t *tracer,
    hali_hal_stop_t *stop) {
  hali_hal_replay_state_t state;
  state.constants_set = 0;
  state.bindings_set = 0;
  size_t index = 0;
  for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb); h;
       h = hali_hal_command_list_next(cb, h), ++index) {
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
      case HALI_HAL_COMMAND_FILL: {
        const hali_hal_command_fill_t *cmd = (const void *)h;
        uint8_t *p = NULL;
        status = hali_hal_buffer_resolve(cmd->target, cmd->offset, cmd->length,
                                         &p);
        if (!status)
          hali_hal_fill_bytes(p, cmd->length, cmd->pattern,
                              cmd->pattern_length);
        break;
      }
      case HALI_HAL_COMMAND_COPY: {
        const hali_hal_command_copy_t *cmd = (const void *)h;
        uint8_t *src = NULL, *dst = NULL;
        status = hali_hal_buffer_resolve(cmd->source, cmd->source_offset,
                                         cmd->length, &src);
        if (!status)
          status = hali_hal_buffer_resolve(cmd->target, cmd->target_offset,
                                           cmd->length, &dst);
        if (!status && cmd->length) memcpy(dst, src, (size_t)cmd->length);
        break;
      }
      case HALI_HAL_COMMAND_UPDATE: {
        const hali_hal_command_update_t *cmd = (const void *)h;
        uint8_t *p = NULL;
        status = hali_hal_buffer_resolve(cmd->target, cmd->offset, cmd->length,
                                         &p);
        if (!status && cmd->length) memcpy(p, cmd->data, (size_t)cmd->length);
        break;
      }
      case HALI_HAL_COMMAND_PUSH_CONSTANTS: {
        const hali_hal_command_push_constants_t *cmd = (const void *)h;
        memcpy(&state.constants[cmd->offset], cmd->values,
               cmd->count * sizeof(uint32_t));
        for (uint32_t i = 0; i < cmd->count; ++i)
          state.constants_set |= (uint64_t)1 << (cmd->offset + i);
        break;
      }
      case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET: {
        const hali_hal_command_push_descriptor_set_t *cmd = (const void *)h;
        for (uint32_t i = 0; i < cmd->count; ++i) {
          const hali_hal_command_binding_t *b = &cmd->bindings[i];
          state.bindings[b->ordinal] = *b;
          state.bindings_set |= 1u << b->ordinal;
        }
        break;
      }
      case HALI_HAL_COMMAND_DISPATCH:
        status = hali_hal_replay_dispatch(
            &state, (const hali_hal_command_dispatch_t *)(const void *)h,
            run_dispatch, runner_self, tracer, stop);
        break;
      case HALI_HAL_COMMAND_BARRIER:
        /* Commands already run one after another. */
        break;
      case HALI_HAL_COMMAND_COLLECTIVE: {
        const hali_hal_command_collective_t *cmd = (const void *)h;
        uint8_t *src = NULL, *dst = NULL;
        if (cmd->send)
          status = hali_hal_buffer_resolve(cmd->send, cmd->send_offset,
                                           cmd->send_length, &src);
        if (!status && cmd->recv)
          status = hali_hal_buffer_resolve(cmd->recv, cmd->recv_offset,
                                           cmd->recv_length, &dst);
        if (!status)
          status = hali_hal_channel_run(cmd->channel, &cmd->op, src, dst,
                                        stop);
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
    if (HALI_UNLIKELY(status != NULL)) {
      /* Peers waiting in a later collective learn why this rank is not
       * coming (hal/channel.h). */
      hali_hal_command_buffer_abort_collectives(cb, index + 1, status);
      return hali_status_annotate(status, "executing command %zu of %zu",
                                  index, cb->command_count);
    }
  }
  return HALI_OK;
}
