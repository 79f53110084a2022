/* hali — stream-to-hal: the tensor level becomes HAL ops (doc/passes.md).
 *
 * Within a function, consecutive tensor ops (or an explicit `execute {}`)
 * form an execution region, recorded into one one-shot command buffer
 * whose categories follow its contents; serial regions get an execution
 * barrier between ops, `concurrent {}` groups none inside.  Regions are
 * submitted with queue.execute, each waiting on the previous one's fence
 * (the first on the tensor.wait fence) — chained, never awaited on the
 * host; tensor.barrier makes the last region signal the given fence.
 * Every tensor gets storage by lifetime: imported (the caller's buffer,
 * asserted), constant, returned (exported), aliased (a tied dispatch
 * result or a value overwritten into a mutable argument) or transient;
 * the static-size transients local to a region share one slab, packed by
 * liveness interval (schedule-execution, see hali_s2h_pack()).
 * A tensor register becomes the !hal.buffer register holding its storage.
 *
 * This file emits (regions, command buffers, fences, dispatches); the
 * analysis it runs first (lifetimes, liveness, sizes, storage and slab
 * packing) is passes/schedule.c, sharing passes/stream_to_hal_int.h.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pipeline.h"
#include "passes/stream_to_hal_int.h"

/* The HAL's most workgroups per dimension (HALI_HAL_MAX_WORKGROUP_COUNT). */
#define MAX_WORKGROUP_COUNT INT32_MAX

static uint32_t cached(lw_t *w, hali_type_t t, int64_t v) {
  for (uint32_t i = 0; i < w->nconst; ++i)
    if (w->consts[i].type == t && w->consts[i].v == v) return w->consts[i].reg;
  return UINT32_MAX;
}
static void remember(lw_t *w, hali_type_t t, int64_t v, uint32_t r) {
  if (w->nconst == 256) return;
  w->consts[w->nconst].type = t;
  w->consts[w->nconst].v = v;
  w->consts[w->nconst++].reg = r;
}

uint32_t hali_s2h_c32(lw_t *w, int64_t v) {
  uint32_t r = cached(w, HALI_TYPE_I32, v);
  if (r != UINT32_MAX) return r;
  r = hali_pass_reg(w->f, HALI_TYPE_I32, "c%lld", (long long)v);
  hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I32, 2, hali_pr(r), hali_pk(v));
  remember(w, HALI_TYPE_I32, v, r);
  return r;
}
uint32_t hali_s2h_c64(lw_t *w, int64_t v) {
  uint32_t r = cached(w, HALI_TYPE_I64, v);
  if (r != UINT32_MAX) return r;
  r = hali_pass_reg(w->f, HALI_TYPE_I64, "c%lld_i64", (long long)v);
  hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2, hali_pr(r), hali_pk(v));
  remember(w, HALI_TYPE_I64, v, r);
  return r;
}

const char *hali_s2h_rname(const lw_t *w, uint32_t r) {
  return w->f->reg_names && w->f->reg_names[r] ? w->f->reg_names[r] : "t";
}

/* Emits `cond_fail %cond, OUT_OF_RANGE, "@f: message"`. */
void hali_s2h_fail_if(lw_t *w, uint32_t cond, const char *fmt, ...) {
  char msg[400];
  int n = snprintf(msg, sizeof(msg), "@%s: ", w->f->name);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(msg)) vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
  va_end(ap);
  uint32_t code = hali_s2h_c32(w, HALI_STATUS_OUT_OF_RANGE);
  hali_pass_emit(&w->pre, w->line, HALI_OP_COND_FAIL, 3, hali_pr(cond), hali_pr(code),
                 hali_pref(HALI_IR_STRING, hali_ir_module_intern(w->m, msg, strlen(msg))));
}

static uint32_t fence_now(lw_t *w) {
  if (w->cur == UINT32_MAX) {
    w->cur = hali_pass_reg(w->f, HALI_TYPE_FENCE, "ready");
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_FENCE_NULL, 1, hali_pr(w->cur));
  }
  return w->cur;
}

/* Before recording a command of category |cat|. */
static void begin_cmd(lw_t *w, uint32_t cat) {
  if (!w->open) {
    w->open = true;
    w->cats = 0;
    w->any_cmd = false;
    w->pending_barrier = false;
    w->cmd = hali_pass_reg(w->f, HALI_TYPE_COMMAND_BUFFER, "cmd");
  }
  if (w->pending_barrier)
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_EXECUTION_BARRIER,
                   1, hali_pr(w->cmd));
  w->pending_barrier = false;
  w->cats |= cat;
}
static void end_cmd(lw_t *w) {
  w->any_cmd = true;
  if (!w->concurrent) w->pending_barrier = true;
}

/* Emits the pending setup, then the region (if any) signalling |signal|
 * (UINT32_MAX: a fresh fence). */
static void close_region(lw_t *w, uint32_t signal) {
  hali_s2h_pack(w);
  if (w->open || signal != UINT32_MAX) fence_now(w);
  hali_pass_splice(&w->out, &w->pre);
  if (!w->open) {
    if (signal != UINT32_MAX) {
      /* Nothing recorded: a submission without command buffers orders the
       * signal after everything before it. */
      hali_pass_emit(&w->out, w->line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 3,
                     hali_pr(w->device), hali_pr(w->cur), hali_pr(signal));
      w->cur = signal;
    }
    return;
  }
  uint32_t mode = hali_s2h_c32(w, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT),
           cats = hali_s2h_c32(w, w->cats);
  hali_pass_splice(&w->out, &w->pre);
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_CREATE, 4,
                 hali_pr(w->cmd), hali_pr(w->device), hali_pr(mode),
                 hali_pr(cats));
  hali_pass_splice(&w->out, &w->cmds);
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_FINALIZE, 1,
                 hali_pr(w->cmd));
  if (signal == UINT32_MAX) {
    signal = hali_pass_reg(w->f, HALI_TYPE_FENCE, "timepoint");
    hali_pass_emit(&w->out, w->line, HALI_OP_HAL_FENCE_CREATE, 2,
                   hali_pr(signal), hali_pr(w->device));
  }
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 4,
                 hali_pr(w->device), hali_pr(w->cur), hali_pr(signal),
                 hali_pr(w->cmd));
  w->cur = signal;
  w->open = false;
}

static void bind(lw_t *w, uint32_t slot, uint32_t r, uint32_t zero) {
  uint32_t s = hali_s2h_c32(w, slot);
  hali_pass_emit(&w->cmds, w->line,
                 HALI_OP_HAL_COMMAND_BUFFER_PUSH_DESCRIPTOR_SET, 5,
                 hali_pr(w->cmd), hali_pr(s), hali_pr(hali_s2h_root(w, r)),
                 hali_pr(zero), hali_pr(w->t[r].size));
}

static hali_status_t lower_dispatch(lw_t *w, const hali_ir_insn_t *insn) {
  const hali_ir_operand_t *o = insn->operands;
  const hali_ir_executable_t *e = &w->m->executables[o[HALI_TD_EXE].v];
  uint32_t xi = (uint32_t)o[HALI_TD_EXPORT].imm;
  const hali_ir_export_t *x = &e->exports[xi];
  hali_ir_dispatch_t dl = hali_ir_dispatch(insn);
  uint32_t nw = dl.nworkload, na = dl.noperands, nr = dl.nresults;
  uint32_t w0 = dl.workload, a0 = dl.operands, r0 = dl.results, d0 = dl.dims;
  uint32_t d = d0;
  for (uint32_t k = 0; k < nr; ++k) {
    uint32_t r = o[r0 + k].v;
    SET_SHAPE(w, r, &o[d], true);
    d += hali_ir_xtype_dynamic_dims(&w->f->reg_xtypes[r]);
    hali_s2h_allocate(w, r);
  }
  begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_DISPATCH);
  /* Push constants: scalar operands in order, 64-bit ones as two words. */
  uint32_t words[64], nwords = 0;
  for (uint32_t k = 0; k < na && nwords + 2 <= 64; ++k) {
    uint32_t r = o[a0 + k].v;
    hali_type_t t = w->f->reg_types[r];
    if (t == HALI_TYPE_I32) {
      words[nwords++] = r;
    } else if (t == HALI_TYPE_INDEX) {
      /* One 32-bit word (materialize-interfaces made the export's slot i32). */
      uint32_t lo =
          hali_pass_reg(w->f, HALI_TYPE_I32, "%s.i32", hali_s2h_rname(w, r));
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(lo),
                     hali_pr(r));
      words[nwords++] = lo;
    } else if (t == HALI_TYPE_F32) {
      uint32_t b =
          hali_pass_reg(w->f, HALI_TYPE_I32, "%s.bits", hali_s2h_rname(w, r));
      hali_pass_emit(&w->pre, w->line, HALI_OP_BITCAST_F32_I32, 2, hali_pr(b),
                     hali_pr(r));
      words[nwords++] = b;
    } else if (t == HALI_TYPE_I64 || t == HALI_TYPE_F64) {
      uint32_t v = r;
      if (t == HALI_TYPE_F64) {
        v = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.bits", hali_s2h_rname(w, r));
        hali_pass_emit(&w->pre, w->line, HALI_OP_BITCAST_F64_I64, 2, hali_pr(v),
                       hali_pr(r));
      }
      uint32_t lo =
          hali_pass_reg(w->f, HALI_TYPE_I32, "%s.lo", hali_s2h_rname(w, r));
      uint32_t hi =
          hali_pass_reg(w->f, HALI_TYPE_I32, "%s.hi", hali_s2h_rname(w, r));
      uint32_t sh =
          hali_pass_reg(w->f, HALI_TYPE_I64, "%s.high", hali_s2h_rname(w, r));
      uint32_t k32 = hali_s2h_c64(w, 32);
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(lo), hali_pr(v));
      hali_pass_emit(&w->pre, w->line, HALI_OP_SHR_U_I64, 3, hali_pr(sh), hali_pr(v),
                     hali_pr(k32));
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(hi), hali_pr(sh));
      words[nwords++] = lo;
      words[nwords++] = hi;
    }
  }
  if (nwords) {
    uint32_t first = hali_s2h_c32(w, 0);
    hali_ir_insn_t *pc = hali_pass_emit_open(
        &w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_PUSH_CONSTANTS, 2 + nwords, 2,
        hali_pr(w->cmd), hali_pr(first));
    for (uint32_t k = 0; k < nwords; ++k)
      hali_pass_set_operand(&w->cmds, pc, 2 + k, hali_pr(words[k]));
  }
  /* Bindings: tensor operands, then results. */
  uint32_t zero = hali_s2h_c64(w, 0), slot = 0;
  for (uint32_t k = 0; k < na; ++k)
    if (w->f->reg_types[o[a0 + k].v] == HALI_TYPE_TENSOR)
      bind(w, slot++, o[a0 + k].v, zero);
  for (uint32_t k = 0; k < nr; ++k) bind(w, slot++, o[r0 + k].v, zero);
  /* Workgroup count: ceil(workload / workgroup size) per dimension,
   * missing dimensions 1.  A count is an i32 register, and the HAL takes at
   * most 2^31-1 per dimension (HALI_HAL_MAX_WORKGROUP_COUNT, doc/hal.md): a
   * workload that is negative or needs more is an error (at load when
   * static, OUT_OF_RANGE at run time when dynamic), never a truncation.
   * The product x*y*z is the HAL's to check. */
  uint32_t count[3];
  for (uint32_t k = 0; k < 3; ++k) {
    uint32_t ws = x->workgroup_size[k] ? x->workgroup_size[k] : 1;
    if (k >= nw) {
      count[k] = hali_s2h_c32(w, 1);
    } else if (o[w0 + k].kind == HALI_IR_IMM) {
      int64_t v = o[w0 + k].imm;
      uint64_t g = v < 0 ? 0 : ((uint64_t)v + ws - 1) / ws;
      if (v < 0 || g > MAX_WORKGROUP_COUNT)
        return hali_status_make(
            HALI_STATUS_OUT_OF_RANGE,
            PASS ": @%s, dispatch of @%s::@%s: workload %lld in dimension %u "
            "%s",
            w->f->name, e->name, x->name, (long long)v, k,
            v < 0 ? "is negative"
                  : "needs more than 2^31-1 workgroups (the HAL's limit per "
                    "dimension)");
      count[k] = hali_s2h_c32(w, (int64_t)g);
    } else {
      uint32_t wl = o[w0 + k].v;
      uint32_t add = hali_s2h_c64(w, ws - 1), div = hali_s2h_c64(w, ws);
      uint32_t limit = hali_s2h_c64(w, MAX_WORKGROUP_COUNT);
      uint32_t neg = hali_pass_reg(w->f, HALI_TYPE_I32, "workload%u_negative", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_LT_S_I64, 3, hali_pr(neg),
                     hali_pr(wl), hali_pr(zero));
      hali_s2h_fail_if(
          w, neg, "dispatch of @%s::@%s: workload in dimension %u is negative",
          e->name, x->name, k);
      /* workload <= 2^63-1 and ws - 1 < 2^32: the unsigned sum fits. */
      uint32_t g64 = hali_pass_reg(w->f, HALI_TYPE_I64, "workgroups%u.i64", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_ADD_I64, 3, hali_pr(g64),
                     hali_pr(wl), hali_pr(add));
      hali_pass_emit(&w->pre, w->line, HALI_OP_DIV_U_I64, 3, hali_pr(g64),
                     hali_pr(g64), hali_pr(div));
      uint32_t big = hali_pass_reg(w->f, HALI_TYPE_I32, "workgroups%u_overflow", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_GT_U_I64, 3, hali_pr(big),
                     hali_pr(g64), hali_pr(limit));
      hali_s2h_fail_if(
          w, big,
          "dispatch of @%s::@%s: the workload in dimension %u needs more "
          "than 2^31-1 workgroups (the HAL's limit per dimension)",
          e->name, x->name, k);
      count[k] = hali_pass_reg(w->f, HALI_TYPE_I32, "workgroups%u", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(count[k]),
                     hali_pr(g64));
    }
  }
  uint32_t ord = hali_s2h_c32(w, xi);
  hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_DISPATCH, 6,
                 hali_pr(w->cmd), hali_pr(w->exes[o[HALI_TD_EXE].v]), hali_pr(ord),
                 hali_pr(count[0]), hali_pr(count[1]), hali_pr(count[2]));
  end_cmd(w);
  return HALI_OK;
}

/* The tensors |insn| reads (the lowering uses their storage, size and
 * dims registers, which exist once the tensor is written): its tensor
 * register operands that it does not write (hali_ir_operand_is_write
 * reads the roles of each tensor op's signature, vm/ops_tensor.def; an
 * overwrite's in-place target counts as read here: its storage is used). */
static hali_status_t check_reads(lw_t *w, const hali_ir_insn_t *insn,
                                 uint32_t index) {
  const hali_ir_operand_t *o = insn->operands;
  for (uint32_t k = 0; k < insn->operand_count; ++k) {
    if (o[k].kind != HALI_IR_REG || hali_ir_operand_is_write(insn, k))
      continue;
    uint32_t r = o[k].v;
    char rn[64];
    if (w->f->reg_types[r] == HALI_TYPE_TENSOR && !w->t[r].defined)
      return hali_pass_error(PASS, w->m, w->f, insn, index,
                             "tensor %s is read before it is written",
                             hali_ir_reg_name(w->f, r, rn, sizeof(rn)));
  }
  return HALI_OK;
}

static hali_status_t lower_insn(lw_t *w, const hali_ir_insn_t *insn,
                                uint32_t index) {
  const hali_ir_operand_t *o = insn->operands;
  hali_ir_func_t *f = w->f;
  w->line = insn->line;
  HALI_RETURN_IF_ERROR_PLAIN(check_reads(w, insn, index));
  switch (insn->op) {
  case HALI_OP_TENSOR_WAIT:
    close_region(w, UINT32_MAX);
    w->cur = o[0].v;
    return HALI_OK;
  case HALI_OP_TENSOR_BARRIER:
    close_region(w, o[0].v);
    return HALI_OK;
  case HALI_OP_TENSOR_EXECUTE:
    close_region(w, UINT32_MAX);
    return HALI_OK;
  case HALI_OP_TENSOR_CONCURRENT:
    if (w->concurrent)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "concurrent groups do not nest");
    w->concurrent = true;
    return HALI_OK;
  case HALI_OP_TENSOR_END:
    if (w->concurrent) {
      w->concurrent = false;
      w->pending_barrier = w->open && w->any_cmd;
    } else {
      close_region(w, UINT32_MAX);
    }
    return HALI_OK;
  case HALI_OP_TENSOR_IMPORT: {
    uint32_t r = o[0].v;
    SET_SHAPE(w, r, &o[HALI_TS_DIMS], false);
    w->t[r].defined = true;
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_VIEW_BUFFER, 2,
                   hali_pr(r), hali_pr(o[1].v));
    char msg[300], rn[64];
    snprintf(msg, sizeof(msg), "@%s: the storage of %s", f->name,
             hali_ir_reg_name(f, r, rn, sizeof(rn)));
    uint32_t cm = hali_s2h_c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE),
             cu = hali_s2h_c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER |
                                      HALI_HAL_BUFFER_USAGE_DISPATCH);
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_ASSERT, 5, hali_pr(r),
                   hali_pr(w->t[r].size), hali_pr(cm), hali_pr(cu),
                   hali_pref(HALI_IR_STRING,
                             hali_ir_module_intern(w->m, msg, strlen(msg))));
    return HALI_OK;
  }
  case HALI_OP_TENSOR_EXPORT: {
    uint32_t r = o[1].v;
    uint32_t rank = f->reg_xtypes[r].rank;
    uint32_t et = hali_s2h_c32(w, (int32_t)f->reg_xtypes[r].element_type),
             enc = hali_s2h_c32(w, 1);
    hali_ir_insn_t *vc = hali_pass_emit_open(
        &w->pre, w->line, HALI_OP_HAL_BUFFER_VIEW_CREATE, 4 + rank, 4,
        hali_pr(o[0].v), hali_pr(hali_s2h_root(w, r)), hali_pr(et),
        hali_pr(enc));
    for (uint32_t d = 0; d < rank; ++d)
      hali_pass_set_operand(&w->pre, vc, 4 + d, hali_pr(w->t[r].dims[d]));
    return HALI_OK;
  }
  case HALI_OP_TENSOR_CONSTANT: {
    uint32_t r = o[0].v;
    const hali_ir_rodata_t *rd = &w->m->rodata[o[1].v];
    SET_SHAPE(w, r, NULL, true);
    const hali_ir_xtype_t *x = &f->reg_xtypes[r];
    uint64_t bytes = hali_pass_element_size(x->element_type);
    for (uint32_t d = 0; d < x->rank; ++d) bytes *= (uint64_t)x->dims[d];
    if (rd->size != bytes)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "rodata @%s has %llu bytes but the tensor needs %llu",
                             rd->name, (unsigned long long)rd->size,
                             (unsigned long long)bytes);
    hali_s2h_allocate(w, r);
    uint32_t zero = hali_s2h_c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_UPDATE, 6,
                   hali_pr(w->cmd), hali_pref(HALI_IR_RODATA, o[1].v),
                   hali_pr(zero), hali_pr(hali_s2h_root(w, r)), hali_pr(zero),
                   hali_pr(w->t[r].size));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_SPLAT: {
    uint32_t r = o[0].v, v = o[1].v;
    uint32_t es = hali_pass_element_size(f->reg_xtypes[r].element_type);
    hali_type_t vt = f->reg_types[v];
    if (!((vt == HALI_TYPE_F32 && es == 4) ||
          (vt == HALI_TYPE_I32 && (es == 1 || es == 2 || es == 4))))
    {
      hali_strbuf_t sb = {0};
      hali_ir_xtype_print(&sb, &f->reg_xtypes[r]);
      char *ts = hali_strbuf_take(&sb);
      hali_status_t e = hali_pass_error(
          PASS, w->m, f, insn, index,
          "a splat of %s into %s is not supported: fills take a pattern of 1, "
          "2 or 4 bytes, so %u-byte elements take %s",
          hali_type_name(vt), ts ? ts : "?", es,
          es == 4   ? "an i32 or f32 value"
          : es <= 2 ? "an i32 value (its low bytes are the pattern)"
                    : "no scalar (8-byte patterns are not supported: write a kernel "
                      "or use a constant)");
      free(ts);
      return e;
    }
    SET_SHAPE(w, r, &o[HALI_TS_DIMS], true);
    hali_s2h_allocate(w, r);
    uint32_t pat = v;
    if (vt == HALI_TYPE_F32) {
      pat = hali_pass_reg(f, HALI_TYPE_I32, "%s.pattern", hali_s2h_rname(w, r));
      hali_pass_emit(&w->pre, w->line, HALI_OP_BITCAST_F32_I32, 2, hali_pr(pat),
                     hali_pr(v));
    }
    uint32_t zero = hali_s2h_c64(w, 0), plen = hali_s2h_c32(w, es);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_FILL, 6,
                   hali_pr(w->cmd), hali_pr(hali_s2h_root(w, r)), hali_pr(zero),
                   hali_pr(w->t[r].size), hali_pr(pat), hali_pr(plen));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_CLONE: {
    uint32_t r = o[0].v, s = o[1].v;
    const hali_ir_xtype_t *x = &f->reg_xtypes[r];
    hali_ir_operand_t dyn[HALI_HAL_MAX_RANK];
    uint32_t k = 0;
    for (uint32_t d = 0; d < x->rank; ++d)
      if (x->dims[d] < 0) dyn[k++] = hali_pr(w->t[s].dims[d]);
    SET_SHAPE(w, r, dyn, true);
    hali_s2h_allocate(w, r);
    uint32_t zero = hali_s2h_c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                   hali_pr(w->cmd), hali_pr(hali_s2h_root(w, s)), hali_pr(zero),
                   hali_pr(hali_s2h_root(w, r)), hali_pr(zero),
                   hali_pr(w->t[r].size));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_OVERWRITE: {
    uint32_t v = o[0].v, a = o[1].v;
    if (hali_s2h_root(w, v) == hali_s2h_root(w, a))
      return HALI_OK; /* written in place */
    uint32_t zero = hali_s2h_c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                   hali_pr(w->cmd), hali_pr(hali_s2h_root(w, v)), hali_pr(zero),
                   hali_pr(hali_s2h_root(w, a)), hali_pr(zero),
                   hali_pr(w->t[v].size));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_DISPATCH:
    if (o[HALI_TD_BINDINGS].imm < 0)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "dispatch site without an interface: run "
                             "materialize-interfaces first");
    return lower_dispatch(w, insn);
  default:
    return hali_pass_error(PASS, w->m, f, insn, index, "unexpected op");
  }
}

static hali_status_t lower_func(hali_ir_module_t *m, uint32_t fi) {
  hali_ir_func_t *f = &m->funcs[fi];
  for (uint32_t p = 0; p < f->param_count; ++p)
    if (f->reg_types[p] == HALI_TYPE_TENSOR)
      return hali_pass_error(PASS, m, f, NULL, 0,
                             "parameter %u is a tensor: run func-conversion "
                             "first",
                             p);
  HALI_RETURN_IF_ERROR_PLAIN(hali_pass_copy_on_write(m, f));
  lw_t *wp = calloc(1, sizeof(lw_t));
  if (!wp) return hali_status_oom();
#define w (*wp)
  w.m = m;
  w.f = f;
  w.nregs = f->reg_count;
  w.cur = UINT32_MAX;
  w.t = calloc(f->reg_count + 1, sizeof(tinfo_t));
  w.exes = malloc((m->executable_count + 1) * sizeof(uint32_t));
  w.pending = malloc(2 * (f->reg_count + 1) * sizeof(uint32_t));
  if (!w.t || !w.exes || !w.pending) {
    free(w.t);
    free(w.exes);
    free(w.pending);
    free(wp);
    return hali_status_oom();
  }
  hali_status_t s = hali_s2h_analyse(&w);
  if (!s) hali_s2h_liveness(&w);
  /* Prologue: the device, its allocator and the executables used. */
  w.line = f->line;
  if (!s) {
    w.device = hali_pass_reg(f, HALI_TYPE_DEVICE, "device");
    w.allocator = hali_pass_reg(f, HALI_TYPE_ALLOCATOR, "allocator");
    hali_pass_emit(&w.pre, w.line, HALI_OP_HAL_DEVICE_GET, 1, hali_pr(w.device));
    hali_pass_emit(&w.pre, w.line, HALI_OP_HAL_DEVICE_ALLOCATOR, 2,
                   hali_pr(w.allocator), hali_pr(w.device));
    for (uint32_t e = 0; e < m->executable_count; ++e) {
      w.exes[e] = UINT32_MAX;
      for (uint32_t b = 0; b < f->block_count && w.exes[e] == UINT32_MAX; ++b)
        for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i)
          if (f->blocks[b].insns[i].op == HALI_OP_TENSOR_DISPATCH &&
              f->blocks[b].insns[i].operands[HALI_TD_EXE].v == e) {
            w.exes[e] = hali_pass_reg(f, HALI_TYPE_EXECUTABLE, "%s",
                                      m->executables[e].name);
            hali_pass_emit(&w.pre, w.line, HALI_OP_HAL_EXECUTABLE_GET, 2,
                           hali_pr(w.exes[e]),
                           hali_pref(HALI_IR_EXECUTABLE, e));
            break;
          }
    }
  }
  for (uint32_t b = 0; b < f->block_count && !s; ++b) {
    hali_ir_block_t *blk = &f->blocks[b];
    for (uint32_t i = 0; i < blk->insn_count && !s; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      w.index = i;
      if (hali_op_info(insn->op)->flags & HALI_OPF_TENSOR) {
        s = lower_insn(&w, insn, i);
        if (!s && w.err) {
          s = w.err;
          w.err = HALI_OK;
        }
        continue;
      }
      /* Host code that cannot suspend or leave the block joins the setup
       * of the open region instead of ending it (it does not depend on
       * the region's results: tensors are not visible to it). */
      uint32_t fl = hali_op_info(insn->op)->flags;
      if (w.open && !(fl & (HALI_OPF_TERM | HALI_OPF_SUSPEND)) &&
          insn->op != HALI_OP_CALL) {
        hali_pass_copy_insn(&w.pre, insn, NULL);
        continue;
      }
      close_region(&w, UINT32_MAX);
      hali_pass_copy_insn(&w.out, insn, NULL);
      if (w.err) {
        s = w.err;
        w.err = HALI_OK;
      }
    }
    if (!s) {
      /* Swap the rebuilt block in. */
      hali_ir_block_take(blk, &w.out.b);
    }
  }
  bool oom = w.out.oom || w.pre.oom || w.cmds.oom;
  hali_pass_list_free(&w.out);
  hali_pass_list_free(&w.pre);
  hali_pass_list_free(&w.cmds);
  if (!s && oom) s = hali_status_oom();
  if (!s) {
    /* Tensor registers now hold their storage. */
    for (uint32_t r = 0; r < w.nregs; ++r)
      if (f->reg_types[r] == HALI_TYPE_TENSOR) f->reg_types[r] = HALI_TYPE_BUFFER;
      else if (f->reg_types[r] == HALI_TYPE_INDEX) f->reg_types[r] = HALI_TYPE_I64;
    if (f->reg_xtypes) {
      for (uint32_t r = 0; r < f->reg_count; ++r) free(f->reg_xtypes[r].dims);
      free(f->reg_xtypes);
      f->reg_xtypes = NULL;
    }
  }
  hali_status_free(w.err); /* one found after another error */
  free(w.t);
  free(w.exes);
  free(w.pending);
#undef w
  free(wp);
  return s;
}

hali_status_t hali_pass_stream_to_hal(hali_ir_module_t *m) {
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    bool has = false;
    for (uint32_t b = 0; b < f->block_count && !has; ++b)
      for (uint32_t i = 0; i < f->blocks[b].insn_count && !has; ++i)
        has = (hali_op_info(f->blocks[b].insns[i].op)->flags & HALI_OPF_TENSOR) != 0;
    for (uint32_t r = 0; r < f->reg_count && !has; ++r)
      has = f->reg_types[r] == HALI_TYPE_TENSOR || f->reg_types[r] == HALI_TYPE_INDEX;
    if (has) HALI_RETURN_IF_ERROR_PLAIN(lower_func(m, fi));
  }
  return HALI_OK;
}
