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
#include "base/alloc.h"
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
  hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I32, 2,
                 hali_pr(r), hali_pk(w->m, v));
  remember(w, HALI_TYPE_I32, v, r);
  return r;
}
uint32_t hali_s2h_c64(lw_t *w, int64_t v) {
  uint32_t r = cached(w, HALI_TYPE_I64, v);
  if (r != UINT32_MAX) return r;
  r = hali_pass_reg(w->f, HALI_TYPE_I64, "c%lld_i64", (long long)v);
  hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2,
                 hali_pr(r), hali_pk(w->m, v));
  remember(w, HALI_TYPE_I64, v, r);
  return r;
}

const char *hali_s2h_rname(const lw_t *w, uint32_t r) {
  /* |r| may be UINT32_MAX: a register that could not be added (out of
   * memory; the emission that uses it marks the list). */
  return r < w->f->reg_count && w->f->reg_names && w->f->reg_names[r]
             ? w->f->reg_names[r]
             : "t";
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

/* ---- Fence wiring: which regions a region waits for. ---- */

static void pairs_push(lw_t *w, hali_u32_pairs_t *p, uint32_t a, uint32_t b) {
  if (p->n == p->cap) {
    uint32_t cap = p->cap ? 2 * p->cap : 16;
    void *v = hali_realloc(p->v, (size_t)cap * sizeof(*p->v));
    if (!v) {
      w->pre.oom = true;
      return;
    }
    p->v = v;
    p->cap = cap;
  }
  p->v[p->n][0] = a;
  p->v[p->n][1] = b;
  p->n++;
}
/* Drops the pairs whose element |which| is |x|. */
static void pairs_drop(hali_u32_pairs_t *p, uint32_t which, uint32_t x) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < p->n; ++k)
    if (p->v[k][which] != x) {
      p->v[n][0] = p->v[k][0];
      p->v[n][1] = p->v[k][1];
      n++;
    }
  p->n = n;
}

/* The fence everything in the function waits for: the last tensor.wait
 * fence, or a null fence made here. */
static uint32_t base_fence(lw_t *w) {
  if (w->base == UINT32_MAX) {
    w->base = hali_pass_reg(w->f, HALI_TYPE_FENCE, "ready");
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_FENCE_NULL, 1, hali_pr(w->base));
  }
  return w->base;
}

/* The storage key of tensor |r| (see lw_t). */
static uint32_t skey(const lw_t *w, uint32_t r) {
  uint32_t root = hali_s2h_base_root(w, r);
  if (root < w->nregs && w->t[root].lifetime == LT_GLOBAL)
    return w->nregs + w->t[root].global;
  return root;
}
/* The open region reads (|write| false) or writes the storage of |key|. */
static void touch_key(lw_t *w, uint32_t key, bool write) {
  if (key >= w->nkeys) return;
  if (!w->accw[key]) w->acc[w->nacc++] = key;
  w->accw[key] |= write ? 2 : 1;
}
static void touch(lw_t *w, uint32_t r, bool write) {
  touch_key(w, skey(w, r), write);
}

static void add_unique(uint32_t *v, uint32_t *n, uint32_t x) {
  for (uint32_t k = 0; k < *n; ++k)
    if (v[k] == x) return;
  v[(*n)++] = x;
}

/* One fence signalled when all of |v| are: joins emitted into w->pre. */
static uint32_t join_fences(lw_t *w, const uint32_t *v, uint32_t n) {
  if (!n) return base_fence(w);
  uint32_t j = v[0];
  for (uint32_t k = 1; k < n; ++k) {
    uint32_t r = hali_pass_reg(w->f, HALI_TYPE_FENCE, "join");
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_FENCE_JOIN, 3, hali_pr(r),
                   hali_pr(j), hali_pr(v[k]));
    j = r;
  }
  return j;
}

/* The fences the open region must wait for, into |deps| (room for
 * nacc + rd.n + 1): the last writer of every storage it touches (RAW,
 * WAW), every region that read what it writes since (WAR), and the base
 * fence unless one of those already waited for it.  Returns the count. */
static uint32_t region_deps(lw_t *w, uint32_t *deps) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < w->nacc; ++k) {
    uint32_t key = w->acc[k];
    if (w->wf[key] != UINT32_MAX) add_unique(deps, &n, w->wf[key]);
    if (w->accw[key] & 2)
      for (uint32_t j = 0; j < w->rd.n; ++j)
        if (w->rd.v[j][0] == key) add_unique(deps, &n, w->rd.v[j][1]);
  }
  bool covered = false;
  for (uint32_t k = 0; k < n && !covered; ++k)
    for (uint32_t j = 0; j < w->fb.n; ++j)
      if (w->fb.v[j][0] == deps[k] && w->fb.v[j][1] == w->base) {
        covered = true;
        break;
      }
  /* Without a tensor.wait the base is a null fence: nothing to add.  The
   * base comes first (the join reads `%wait, ...`). */
  if (!covered && !(w->base == UINT32_MAX && n)) {
    uint32_t b = base_fence(w);
    bool have = false;
    for (uint32_t k = 0; k < n && !have; ++k) have = deps[k] == b;
    if (!have) {
      memmove(deps + 1, deps, n * sizeof(uint32_t));
      deps[0] = b;
      n++;
    }
  }
  return n;
}

/* After the region signalling |fence| was submitted waiting on |deps|. */
static void region_done(lw_t *w, uint32_t fence, const uint32_t *deps,
                        uint32_t ndeps) {
  for (uint32_t k = 0; k < w->nacc; ++k) {
    uint32_t key = w->acc[k];
    if (w->accw[key] & 2) {
      pairs_drop(&w->rd, 0, key);
      w->wf[key] = fence;
    } else {
      pairs_push(w, &w->rd, key, fence);
    }
    w->accw[key] = 0;
  }
  w->nacc = 0;
  for (uint32_t k = 0; k < ndeps; ++k) pairs_drop(&w->tips, 0, deps[k]);
  if (w->base != UINT32_MAX) pairs_drop(&w->tips, 0, w->base);
  pairs_push(w, &w->tips, fence, 0);
  pairs_push(w, &w->fb, fence, w->base);
  w->cur = fence;
}

/* Before recording a command of category |cat|. */
static void close_region(lw_t *w, uint32_t signal);

/* Before recording a command of category |cat|. */
static void begin_cmd(lw_t *w, uint32_t cat) {
  if (w->sealed) close_region(w, UINT32_MAX);
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
 * (UINT32_MAX: a fresh fence).  The region waits for the join of its
 * dependencies (region_deps); a |signal| (tensor.barrier) is signalled
 * once every region of the function is done: by the region itself when
 * every earlier one is behind it, else by an empty submission waiting on
 * the join of the fences nothing waits for yet. */
static void close_region(lw_t *w, uint32_t signal) {
  /* The region's commands go out below: what they read stops mattering
   * to the host code after them (rewrites_recorded). */
  w->cmd_epoch++;
  w->cmd_scanned = 0;
  hali_s2h_pack(w);
  w->sealed = false;
  if (!w->open) {
    if (signal != UINT32_MAX) {
      uint32_t n = w->tips.n, j;
      uint32_t *tips = hali_malloc(((size_t)n + 1) * sizeof(uint32_t));
      if (!tips) {
        w->pre.oom = true;
        return;
      }
      for (uint32_t k = 0; k < n; ++k) tips[k] = w->tips.v[k][0];
      j = join_fences(w, tips, n);
      hali_free(tips);
      hali_pass_splice(&w->out, &w->pre);
      hali_pass_emit(&w->out, w->line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 3,
                     hali_pr(w->device), hali_pr(j), hali_pr(signal));
      w->tips.n = 0;
      pairs_push(w, &w->tips, signal, 0);
      w->base = signal;
      w->cur = signal;
    }
    hali_pass_splice(&w->out, &w->pre);
    return;
  }
  uint32_t *deps = hali_malloc(((size_t)w->nacc + w->rd.n + 2) * sizeof(uint32_t));
  if (!deps) {
    w->pre.oom = true;
    w->open = false;
    return;
  }
  uint32_t ndeps = region_deps(w, deps);
  uint32_t wait = join_fences(w, deps, ndeps);
  /* Would this region be the only fence left for the signal to cover? */
  bool last = true;
  for (uint32_t k = 0; k < w->tips.n && last; ++k) {
    uint32_t t = w->tips.v[k][0];
    bool waited = t == w->base;
    for (uint32_t j = 0; j < ndeps && !waited; ++j) waited = deps[j] == t;
    last = waited;
  }
  if (w->record_once) {
    /* Recorded once in the storage initializer, bound here (record_once.c);
     * else recorded below as usual. */
    hali_pass_splice(&w->out, &w->pre);
  }
  if (!w->record_once || !hali_s2h_record_once(w)) {
    uint32_t mode = hali_s2h_c32(w, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT),
             cats = hali_s2h_c32(w, w->cats);
    hali_pass_splice(&w->out, &w->pre);
    hali_pass_emit(&w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_CREATE, 4,
                   hali_pr(w->cmd), hali_pr(w->device), hali_pr(mode),
                   hali_pr(cats));
    hali_pass_splice(&w->out, &w->cmds);
    hali_pass_emit(&w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_FINALIZE, 1,
                   hali_pr(w->cmd));
  }
  uint32_t fence = signal;
  if (signal == UINT32_MAX || !last) {
    fence = hali_pass_reg(w->f, HALI_TYPE_FENCE, "timepoint");
    hali_pass_emit(&w->out, w->line, HALI_OP_HAL_FENCE_CREATE, 2,
                   hali_pr(fence), hali_pr(w->device));
  }
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 4,
                 hali_pr(w->device), hali_pr(wait), hali_pr(fence),
                 hali_pr(w->cmd));
  region_done(w, fence, deps, ndeps);
  hali_free(deps);
  w->open = false;
  if (signal != UINT32_MAX) {
    if (fence != signal) close_region(w, signal); /* joins the tips */
    w->tips.n = 0;
    pairs_push(w, &w->tips, signal, 0);
    w->base = signal;
    w->cur = signal;
  }
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
  uint32_t xi = (uint32_t)hali_ir_imm(w->m, &o[HALI_TD_EXPORT]);
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
    if (w->f->reg_types[o[a0 + k].v] == HALI_TYPE_TENSOR) {
      bind(w, slot++, o[a0 + k].v, zero);
      touch(w, o[a0 + k].v, false);
    }
  for (uint32_t k = 0; k < nr; ++k) {
    bind(w, slot++, o[r0 + k].v, zero);
    touch(w, o[r0 + k].v, true);
  }
  /* Workgroup count: ceil(workload / workgroup size) per dimension,
   * missing dimensions 1.  A count is an i32 register, and the HAL takes at
   * most 2^31-1 per dimension (HALI_HAL_MAX_WORKGROUP_COUNT, doc/hal.md): a
   * workload that is negative or needs more is an error (at load when
   * static, OUT_OF_RANGE at run time when dynamic), never a truncation.
   * The product x*y*z is the HAL's to check. */
  uint32_t count[3];
  if (x->count_function != UINT32_MAX) {
    /* `workgroups @f`: the export's own count function, called on the
     * host with the workload (the seed's count region); each count it
     * returns must be 0 to 2^31-1 (OUT_OF_RANGE naming the function). */
    const hali_ir_func_t *cf = &w->m->funcs[x->count_function];
    if (cf->param_count != nw)
      return hali_status_make(
          HALI_STATUS_INVALID_ARGUMENT,
          PASS ": @%s, dispatch of @%s::@%s: a workload of %u dimension(s), "
          "but its workgroup-count function @%s takes %u",
          w->f->name, e->name, x->name, nw, cf->name, cf->param_count);
    const char *cfn = cf->name; /* adding registers does not move funcs */
    hali_insn_list_t *pl = &w->pre;
    hali_ir_insn_t *call =
        hali_pass_emit_open(pl, w->line, HALI_OP_CALL, 1 + nw + 3, 1,
                            hali_pref(HALI_IR_FUNC, x->count_function));
    if (call) call->aux = (uint16_t)nw;
    for (uint32_t k = 0; k < nw; ++k) {
      uint32_t wk = o[w0 + k].kind == HALI_IR_IMM
                        ? hali_s2h_c64(w, hali_ir_imm(w->m, &o[w0 + k]))
                        : o[w0 + k].v;
      hali_pass_set_operand(pl, call, 1 + k, hali_pr(wk));
    }
    uint32_t c64[3];
    for (uint32_t k = 0; k < 3; ++k) {
      c64[k] = hali_pass_reg(w->f, HALI_TYPE_I64, "workgroups%u.i64", k);
      hali_pass_set_operand(pl, call, 1 + nw + k, hali_pr(c64[k]));
    }
    uint32_t limit = hali_s2h_c64(w, MAX_WORKGROUP_COUNT);
    for (uint32_t k = 0; k < 3; ++k) {
      uint32_t bad = hali_pass_reg(w->f, HALI_TYPE_I32, "workgroups%u_bad", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_GT_U_I64, 3, hali_pr(bad),
                     hali_pr(c64[k]), hali_pr(limit));
      hali_s2h_fail_if(w, bad,
                       "dispatch of @%s::@%s: workgroup-count function @%s "
                       "returned a count for dimension %u that is negative "
                       "or more than 2^31-1 (the HAL's limit per dimension)",
                       e->name, x->name, cfn, k);
      count[k] = hali_pass_reg(w->f, HALI_TYPE_I32, "workgroups%u", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2,
                     hali_pr(count[k]), hali_pr(c64[k]));
    }
    goto dispatch;
  }
  /* A workload of more than 3 dimensions: dimensions 2, 3, ... fold into
   * one (their product, each one and the product at most 2^31-1), which
   * the Z count then covers; the kernel recovers them from its Z id with
   * the extents it is given (unlike the seed's remapping, which the seed
   * itself marks as wrong, this keeps X and Y as they are). */
  hali_ir_operand_t z = nw > 2 ? o[w0 + 2] : hali_pk(w->m, 1);
  if (nw > 3) {
    bool all_static = true;
    for (uint32_t k = 2; k < nw; ++k) all_static &= o[w0 + k].kind == HALI_IR_IMM;
    if (all_static) {
      int64_t prod = 1;
      for (uint32_t k = 2; k < nw; ++k) {
        int64_t v = hali_ir_imm(w->m, &o[w0 + k]);
        if (v < 0 || (v && prod > MAX_WORKGROUP_COUNT / v))
          return hali_status_make(
              HALI_STATUS_OUT_OF_RANGE,
              PASS ": @%s, dispatch of @%s::@%s: workload dimensions 2-%u "
              "%s",
              w->f->name, e->name, x->name, nw - 1,
              v < 0 ? "include a negative one"
                    : "fold into more than 2^31-1 (the HAL's limit per "
                      "dimension)");
        prod *= v;
      }
      z = hali_pk(w->m, prod);
    } else {
      uint32_t zr = hali_pass_reg(w->f, HALI_TYPE_I64, "workload.folded");
      uint32_t limit = hali_s2h_c64(w, MAX_WORKGROUP_COUNT);
      hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2,
                     hali_pr(zr), hali_pk(w->m, 1));
      for (uint32_t k = 2; k < nw; ++k) {
        uint32_t wk = o[w0 + k].kind == HALI_IR_IMM
                          ? hali_s2h_c64(w, hali_ir_imm(w->m, &o[w0 + k]))
                          : o[w0 + k].v;
        uint32_t bad = hali_pass_reg(w->f, HALI_TYPE_I32, "workload%u_bad", k);
        uint32_t big = hali_pass_reg(w->f, HALI_TYPE_I32, "workload%u_big", k);
        hali_pass_emit(&w->pre, w->line, HALI_OP_LT_S_I64, 3, hali_pr(bad),
                       hali_pr(wk), hali_pr(zero));
        hali_s2h_fail_if(w, bad,
                         "dispatch of @%s::@%s: workload in dimension %u is "
                         "negative",
                         e->name, x->name, k);
        hali_pass_emit(&w->pre, w->line, HALI_OP_GT_S_I64, 3, hali_pr(big),
                       hali_pr(wk), hali_pr(limit));
        hali_s2h_fail_if(w, big,
                         "dispatch of @%s::@%s: workload in dimension %u "
                         "is more than 2^31-1",
                         e->name, x->name, k);
        /* Both factors <= 2^31-1: the product fits in 63 bits. */
        hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(zr),
                       hali_pr(zr), hali_pr(wk));
        uint32_t over = hali_pass_reg(w->f, HALI_TYPE_I32, "workload%u_folded_big", k);
        hali_pass_emit(&w->pre, w->line, HALI_OP_GT_S_I64, 3, hali_pr(over),
                       hali_pr(zr), hali_pr(limit));
        hali_s2h_fail_if(w, over,
                         "dispatch of @%s::@%s: the product of workload "
                         "dimensions 2 to %u is more than 2^31-1 (the HAL's "
                         "limit per dimension)",
                         e->name, x->name, k);
      }
      z = hali_pr(zr);
    }
  }
  for (uint32_t k = 0; k < 3; ++k) {
    uint32_t ws = x->workgroup_size[k] ? x->workgroup_size[k] : 1;
    hali_ir_operand_t wo = k == 2 ? z : k < nw ? o[w0 + k] : hali_pk(w->m, 1);
    if (k >= nw) {
      count[k] = hali_s2h_c32(w, 1);
    } else if (wo.kind == HALI_IR_IMM) {
      int64_t v = hali_ir_imm(w->m, &wo);
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
      uint32_t wl = wo.v;
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
dispatch:;
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
/* ---- Slices and updates (doc/passes.md, "Slices, updates and traces"). */

/* The most copy commands one slice or update records (each a contiguous
 * run of bytes). */
#define MAX_RANGE_RUNS 4096

/* Appends "[a, %b, ...]" naming the offsets |offs| or the dims of |r|. */
static void print_range(lw_t *w, hali_strbuf_t *sb,
                        const hali_ir_operand_t *offs, uint32_t r,
                        uint32_t rank) {
  char rn[64];
  hali_strbuf_append(sb, "[", 1);
  for (uint32_t d = 0; d < rank; ++d) {
    if (d) hali_strbuf_append(sb, ", ", 2);
    if (offs) {
      if (offs[d].kind == HALI_IR_IMM)
        hali_strbuf_printf(sb, "%lld", (long long)hali_ir_imm(w->m, &offs[d]));
      else
        hali_strbuf_printf(sb, "%s",
                           hali_ir_reg_name(w->f, offs[d].v, rn, sizeof(rn)));
    } else {
      int64_t s = w->f->reg_xtypes[r].dims[d];
      if (s >= 0)
        hali_strbuf_printf(sb, "%lld", (long long)s);
      else
        hali_strbuf_printf(sb, "%s", hali_ir_reg_name(w->f, w->t[r].dims[d],
                                                      rn, sizeof(rn)));
    }
  }
  hali_strbuf_append(sb, "]", 1);
}

static uint32_t off_reg(lw_t *w, const hali_ir_operand_t *o) {
  return o->kind == HALI_IR_IMM ? hali_s2h_c64(w, hali_ir_imm(w->m, o)) : o->v;
}

/* A slice (|slice|: |small| = the part of |big| at |offs|) or an update
 * (|big|'s storage gets |small| at |offs|): checks the range (a load error
 * when static, OUT_OF_RANGE at run time otherwise, before anything is
 * submitted), then records one copy per contiguous run of bytes. */
static hali_status_t lower_range(lw_t *w, const hali_ir_insn_t *insn,
                                 uint32_t index, bool slice, uint32_t big,
                                 uint32_t small, const hali_ir_operand_t *offs,
                                 uint32_t named, uint32_t *view_off) {
  hali_ir_func_t *f = w->f;
  const char *opn = slice ? "tensor.slice" : "tensor.update";
  uint32_t rank = f->reg_xtypes[big].rank;
  int64_t bd[HALI_HAL_MAX_RANK], sd[HALI_HAL_MAX_RANK];
  for (uint32_t d = 0; d < rank; ++d) {
    bd[d] = f->reg_xtypes[big].dims[d];
    sd[d] = f->reg_xtypes[small].dims[d];
  }
  uint32_t es = hali_pass_element_size(f->reg_xtypes[big].element_type);
  char bn[64];
  hali_ir_reg_name(f, named, bn, sizeof(bn));
  hali_strbuf_t sb = {0};
  hali_strbuf_printf(&sb, "%s of %s (", opn, bn);
  hali_ir_xtype_print(&sb, &f->reg_xtypes[big]);
  hali_strbuf_append(&sb, "): the range ", 13);
  print_range(w, &sb, offs, small, rank);
  hali_strbuf_append(&sb, " + ", 3);
  print_range(w, &sb, NULL, small, rank);
  char *what = hali_strbuf_take(&sb);
  if (!what) return hali_status_oom();
  hali_status_t err = HALI_OK;
  uint32_t zero = hali_s2h_c64(w, 0);
  /* The range: 0 <= offset and offset + size <= dim, per dimension (the
   * sizes are >= 0: checked when the slice's shape was set, or the
   * value's when it was made). */
  for (uint32_t d = 0; d < rank && !err; ++d) {
    if (offs[d].kind == HALI_IR_IMM && bd[d] >= 0 && sd[d] >= 0) {
      if (hali_ir_imm(w->m, &offs[d]) > bd[d] - sd[d])
        err = hali_pass_error(PASS, w->m, f, insn, index,
                              "%s is outside it (dimension %u: %lld + %lld > "
                              "%lld)",
                              what, d, (long long)hali_ir_imm(w->m, &offs[d]),
                              (long long)sd[d], (long long)bd[d]);
      continue;
    }
    const char *n = hali_s2h_rname(w, small);
    uint32_t room = hali_pass_reg(f, HALI_TYPE_I64, "%s.room%u", n, d);
    uint32_t bad = hali_pass_reg(f, HALI_TYPE_I32, "%s.outside%u", n, d);
    uint32_t off = off_reg(w, &offs[d]);
    hali_pass_emit(&w->pre, w->line, HALI_OP_SUB_I64, 3, hali_pr(room),
                   hali_pr(w->t[big].dims[d]), hali_pr(w->t[small].dims[d]));
    hali_pass_emit(&w->pre, w->line, HALI_OP_GT_S_I64, 3, hali_pr(bad),
                   hali_pr(off), hali_pr(room));
    if (offs[d].kind != HALI_IR_IMM) {
      uint32_t neg = hali_pass_reg(f, HALI_TYPE_I32, "%s.negative%u", n, d);
      hali_pass_emit(&w->pre, w->line, HALI_OP_LT_S_I64, 3, hali_pr(neg),
                     hali_pr(off), hali_pr(zero));
      hali_pass_emit(&w->pre, w->line, HALI_OP_OR_I32, 3, hali_pr(bad),
                     hali_pr(bad), hali_pr(neg));
    }
    hali_s2h_fail_if(w, bad, "%s is outside it (dimension %u)", what, d);
  }
  /* Runs: the dimensions after |k| are whole (offset 0, the full dim), so
   * dims k.. of one index of dims 0..k-1 are one contiguous run. */
  uint32_t k = rank ? rank - 1 : 0;
  while (k > 0 && offs[k].kind == HALI_IR_IMM &&
         hali_ir_imm_small(&offs[k]) == 0 &&
         ((bd[k] >= 0 && bd[k] == sd[k]) ||
          w->t[big].dims[k] == w->t[small].dims[k]))
    --k;
  uint64_t nruns = 1;
  for (uint32_t d = 0; d < k && !err; ++d) {
    if (sd[d] < 0)
      err = hali_pass_error(PASS, w->m, f, insn, index,
                            "%s is not contiguous and its size in dimension "
                            "%u is dynamic: only the first non-whole "
                            "dimension's size may be dynamic",
                            what, d);
    else if ((nruns *= (uint64_t)sd[d]) > MAX_RANGE_RUNS)
      err = hali_pass_error(PASS, w->m, f, insn, index,
                            "%s needs more than %u copies (contiguous runs)",
                            what, MAX_RANGE_RUNS);
  }
  hali_free(what);
  if (err) return err;
  if (!rank && view_off) {
    *view_off = zero;
    return HALI_OK;
  }
  if (!rank) {
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                   hali_pr(w->cmd),
                   hali_pr(hali_s2h_root(w, slice ? big : small)),
                   hali_pr(zero),
                   hali_pr(hali_s2h_root(w, slice ? small : big)),
                   hali_pr(zero), hali_pr(w->t[small].size));
    end_cmd(w);
    return HALI_OK;
  }
  const char *n = hali_s2h_rname(w, small);
  /* The arithmetic below folds what is static (sv: the value, or -1 for
   * a register computed at run time); the values fit in an i64: the range
   * lies inside |big|, whose byte size was checked. */
  int64_t rv = es;
  for (uint32_t d = k; d < rank && rv >= 0; ++d)
    rv = sd[d] >= 0 ? rv * sd[d] : -1;
  uint32_t run = zero;
  if (view_off) {
    /* A view records no copy. */
  } else if (rv >= 0) {
    run = hali_s2h_c64(w, rv);
  } else {
    run = hali_pass_reg(f, HALI_TYPE_I64, "%s.run", n);
    hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(run),
                   hali_pr(hali_s2h_c64(w, es)), hali_pr(w->t[small].dims[k]));
    for (uint32_t d = k + 1; d < rank; ++d)
      hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(run),
                     hali_pr(run), hali_pr(w->t[small].dims[d]));
  }
  /* Byte strides of the big tensor. */
  uint32_t stride[HALI_HAL_MAX_RANK];
  int64_t sv[HALI_HAL_MAX_RANK];
  uint32_t acc = hali_s2h_c64(w, es);
  int64_t accv = es;
  for (uint32_t d = rank; d-- > 0;) {
    stride[d] = acc;
    sv[d] = accv;
    if (!d) break;
    if (accv >= 0 && bd[d] >= 0) {
      accv *= bd[d];
      acc = hali_s2h_c64(w, accv);
    } else {
      uint32_t s2 = hali_pass_reg(f, HALI_TYPE_I64, "%s.stride%u", n, d - 1);
      hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(s2),
                     hali_pr(acc), hali_pr(w->t[big].dims[d]));
      acc = s2;
      accv = -1;
    }
  }
  /* The byte offset of the range's first element: a constant part and
   * the registers' products. */
  int64_t basev = 0;
  uint32_t base = UINT32_MAX;
  for (uint32_t d = 0; d <= k; ++d) {
    if (offs[d].kind == HALI_IR_IMM && sv[d] >= 0) {
      basev += hali_ir_imm(w->m, &offs[d]) * sv[d];
      continue;
    }
    uint32_t t = hali_pass_reg(f, HALI_TYPE_I64, "%s.at%u", n, d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(t),
                   hali_pr(off_reg(w, &offs[d])), hali_pr(stride[d]));
    if (base == UINT32_MAX) {
      base = t;
    } else {
      hali_pass_emit(&w->pre, w->line, HALI_OP_ADD_I64, 3, hali_pr(base),
                     hali_pr(base), hali_pr(t));
    }
  }
  uint32_t broot = hali_s2h_root(w, big), sroot = hali_s2h_root(w, small);
  if (view_off) {
    /* A view: one run (schedule.c, slice_is_view), no command. */
    if (base == UINT32_MAX) {
      *view_off = hali_s2h_c64(w, basev);
    } else if (!basev) {
      *view_off = base;
    } else {
      *view_off = hali_pass_reg(f, HALI_TYPE_I64, "%s.at", n);
      hali_pass_emit(&w->pre, w->line, HALI_OP_ADD_I64, 3, hali_pr(*view_off),
                     hali_pr(base), hali_pr(hali_s2h_c64(w, basev)));
    }
    return HALI_OK;
  }
  begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
  int64_t idx[HALI_HAL_MAX_RANK] = {0};
  for (uint64_t q = 0; q < nruns; ++q) {
    /* Run q: outer index idx[0..k-1] (row-major); the outer dims' strides
     * are static unless a dim after them is dynamic. */
    int64_t cv = basev;
    uint32_t dyn = base;
    for (uint32_t d = 0; d < k; ++d) {
      if (!idx[d]) continue;
      if (sv[d] >= 0) {
        cv += idx[d] * sv[d];
        continue;
      }
      uint32_t t = hali_pass_reg(f, HALI_TYPE_I64, "%s.step", n);
      hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(t),
                     hali_pr(stride[d]), hali_pr(hali_s2h_c64(w, idx[d])));
      if (dyn == UINT32_MAX) {
        dyn = t;
      } else {
        uint32_t u = hali_pass_reg(f, HALI_TYPE_I64, "%s.at", n);
        hali_pass_emit(&w->pre, w->line, HALI_OP_ADD_I64, 3, hali_pr(u),
                       hali_pr(dyn), hali_pr(t));
        dyn = u;
      }
    }
    uint32_t boff;
    if (dyn == UINT32_MAX) {
      boff = hali_s2h_c64(w, cv);
    } else if (!cv) {
      boff = dyn;
    } else {
      boff = hali_pass_reg(f, HALI_TYPE_I64, "%s.at", n);
      hali_pass_emit(&w->pre, w->line, HALI_OP_ADD_I64, 3, hali_pr(boff),
                     hali_pr(dyn), hali_pr(hali_s2h_c64(w, cv)));
    }
    uint32_t soff = zero;
    if (q && rv >= 0) {
      soff = hali_s2h_c64(w, rv * (int64_t)q);
    } else if (q) {
      soff = hali_pass_reg(f, HALI_TYPE_I64, "%s.from", n);
      hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(soff),
                     hali_pr(run), hali_pr(hali_s2h_c64(w, (int64_t)q)));
    }
    if (slice)
      hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                     hali_pr(w->cmd), hali_pr(broot), hali_pr(boff),
                     hali_pr(sroot), hali_pr(soff), hali_pr(run));
    else
      hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                     hali_pr(w->cmd), hali_pr(sroot), hali_pr(soff),
                     hali_pr(broot), hali_pr(boff), hali_pr(run));
    for (uint32_t d = k; d-- > 0;) {
      if (++idx[d] < sd[d]) break;
      idx[d] = 0;
    }
  }
  end_cmd(w);
  return HALI_OK;
}

/* tensor.trace "label", %t: a host-visible copy of %t, the region
 * submitted, a host wait for it, then hal.buffer_view.trace. */
static hali_status_t lower_trace(lw_t *w, const hali_ir_insn_t *insn) {
  hali_ir_func_t *f = w->f;
  const hali_ir_operand_t *o = insn->operands;
  uint32_t r = o[1].v, rank = f->reg_xtypes[r].rank;
  uint32_t cm = hali_s2h_c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE |
                                    HALI_HAL_MEMORY_TYPE_HOST_VISIBLE),
           cu = hali_s2h_c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER |
                                    HALI_HAL_BUFFER_USAGE_MAPPING),
           zero = hali_s2h_c64(w, 0);
  uint32_t st = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s.traced",
                              hali_s2h_rname(w, r));
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5,
                 hali_pr(st), hali_pr(w->allocator), hali_pr(cm), hali_pr(cu),
                 hali_pr(w->t[r].size));
  begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
  hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                 hali_pr(w->cmd), hali_pr(hali_s2h_root(w, r)), hali_pr(zero),
                 hali_pr(st), hali_pr(zero), hali_pr(w->t[r].size));
  touch(w, r, false);
  end_cmd(w);
  close_region(w, UINT32_MAX);
  hali_pass_splice(&w->out, &w->pre);
  uint32_t rc = hali_pass_reg(f, HALI_TYPE_I32, "%s.trace_wait",
                              hali_s2h_rname(w, r));
  uint32_t forever = hali_pass_reg(f, HALI_TYPE_I64, "forever");
  hali_pass_emit(&w->out, w->line, HALI_OP_CONST_I64, 2, hali_pr(forever),
                 hali_pk(w->m, -1));
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_FENCE_AWAIT, 3, hali_pr(rc),
                 hali_pr(w->cur), hali_pr(forever));
  uint32_t et = hali_s2h_c32(w, (int32_t)f->reg_xtypes[r].element_type),
           enc = hali_s2h_c32(w, 1);
  uint32_t view = hali_pass_reg(f, HALI_TYPE_BUFFER_VIEW, "%s.traced_view",
                                hali_s2h_rname(w, r));
  hali_pass_splice(&w->out, &w->pre);
  hali_ir_insn_t *vc = hali_pass_emit_open(
      &w->out, w->line, HALI_OP_HAL_BUFFER_VIEW_CREATE, 4 + rank, 4,
      hali_pr(view), hali_pr(st), hali_pr(et), hali_pr(enc));
  for (uint32_t d = 0; d < rank; ++d)
    hali_pass_set_operand(&w->out, vc, 4 + d, hali_pr(w->t[r].dims[d]));
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_BUFFER_VIEW_TRACE, 2,
                 hali_pr(view), o[0]);
  return HALI_OK;
}

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

/* ---- Collectives (doc/collectives.md, "At the tensor level"). ---- */

/* The product of tensor |t|'s dims, as an i64 register emitted into the
 * region's setup. */
static uint32_t numel_reg(lw_t *w, uint32_t t) {
  hali_ir_func_t *f = w->f;
  uint32_t rank = f->reg_xtypes[t].rank;
  if (!rank) return hali_s2h_c64(w, 1);
  uint32_t n = hali_pass_reg(f, HALI_TYPE_I64, "%s.numel", hali_s2h_rname(w, t));
  hali_pass_emit(&w->pre, w->line, HALI_OP_MOV_I64, 2, hali_pr(n),
                 hali_pr(w->t[t].dims[0]));
  for (uint32_t k = 1; k < rank; ++k)
    hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(n), hali_pr(n),
                   hali_pr(w->t[t].dims[k]));
  return n;
}

/* Emits the run-time check that |dim| (an i64 register) splits evenly over
 * |ranks|: OUT_OF_RANGE "@f: OP of T: dimension 0 does not split evenly
 * over the ranks" otherwise. */
static void check_splits(lw_t *w, uint32_t dim, uint32_t ranks,
                         const char *op, uint32_t t) {
  hali_ir_func_t *f = w->f;
  uint32_t rem = hali_pass_reg(f, HALI_TYPE_I64, "rem");
  uint32_t zero = hali_s2h_c64(w, 0);
  uint32_t bad = hali_pass_reg(f, HALI_TYPE_I32, "uneven");
  hali_pass_emit(&w->pre, w->line, HALI_OP_REM_S_I64, 3, hali_pr(rem),
                 hali_pr(dim), hali_pr(ranks));
  hali_pass_emit(&w->pre, w->line, HALI_OP_NE_I64, 3, hali_pr(bad),
                 hali_pr(rem), hali_pr(zero));
  hali_s2h_fail_if(w, bad,
                   "%s of %s: dimension 0 does not split evenly over the "
                   "ranks",
                   op, hali_s2h_rname(w, t));
}

/* A tensor collective: the default channel (one per op: the device caches
 * it, so every op gets the same one), the result's shape from the
 * operand's and the rank count, then one collective command in the open
 * region. */
static hali_status_t lower_collective(lw_t *w, const hali_ir_insn_t *insn) {
  const hali_ir_operand_t *o = insn->operands;
  hali_ir_func_t *f = w->f;
  const uint16_t op = insn->op;
  const char *name = hali_op_info(op)->name;
  uint32_t ch = hali_pass_reg(f, HALI_TYPE_CHANNEL, "channel");
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_CHANNEL_DEFAULT, 2, hali_pr(ch),
                 hali_pr(w->device));
  uint32_t ranks32 = hali_pass_reg(f, HALI_TYPE_I32, "ranks");
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_CHANNEL_COUNT, 2,
                 hali_pr(ranks32), hali_pr(ch));
  uint32_t ranks = hali_pass_reg(f, HALI_TYPE_I64, "ranks");
  hali_pass_emit(&w->pre, w->line, HALI_OP_EXT_S_I32_I64, 2, hali_pr(ranks),
                 hali_pr(ranks32));
  uint32_t kind = 0, red = 0, peer = hali_s2h_c32(w, 0);
  uint32_t r = UINT32_MAX, s = UINT32_MAX; /* result, operand */
  switch (op) {
  case HALI_OP_TENSOR_ALL_REDUCE:
    kind = 1, red = (uint32_t)hali_ir_imm_small(&o[2]);
    break;
  case HALI_OP_TENSOR_ALL_GATHER: kind = 0; break;
  case HALI_OP_TENSOR_REDUCE_SCATTER:
    kind = 5, red = (uint32_t)hali_ir_imm_small(&o[2]);
    break;
  case HALI_OP_TENSOR_ALL_TO_ALL: kind = 2; break;
  case HALI_OP_TENSOR_SEND: kind = 6, peer = o[1].v; break;
  default: kind = 7, peer = o[1].v; break; /* recv */
  }
  if (op == HALI_OP_TENSOR_SEND) {
    s = o[0].v;
  } else if (op == HALI_OP_TENSOR_RECV) {
    r = o[0].v;
    SET_SHAPE(w, r, &o[2], true);
  } else {
    r = o[0].v, s = o[1].v;
    /* The result's dims, copied: emitting registers (hali_pass_reg) may
     * move f->reg_xtypes. */
    const uint32_t xrank = f->reg_xtypes[r].rank;
    int64_t xdims[HALI_HAL_MAX_RANK];
    for (uint32_t d = 0; d < xrank && d < HALI_HAL_MAX_RANK; ++d)
      xdims[d] = f->reg_xtypes[r].dims[d];
    hali_ir_operand_t dyn[HALI_HAL_MAX_RANK];
    uint32_t k = 0;
    for (uint32_t d = 0; d < xrank && d < HALI_HAL_MAX_RANK; ++d) {
      if (d == 0 && (op == HALI_OP_TENSOR_ALL_GATHER ||
                     op == HALI_OP_TENSOR_REDUCE_SCATTER)) {
        /* Dimension 0: the operand's times (gather) or over (scatter) the
         * rank count; checked against a static result dimension. */
        uint32_t d0 = hali_pass_reg(f, HALI_TYPE_I64, "%s.dim0",
                                    hali_s2h_rname(w, r));
        uint32_t sd = w->t[s].dims[0];
        if (op == HALI_OP_TENSOR_ALL_GATHER) {
          /* d0 = sd * ranks, checked: d0 / ranks must give sd back. */
          hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(d0),
                         hali_pr(sd), hali_pr(ranks));
          uint32_t q = hali_pass_reg(f, HALI_TYPE_I64, "%s.dim0_check",
                                     hali_s2h_rname(w, r));
          uint32_t wraps = hali_pass_reg(f, HALI_TYPE_I32, "%s.dim0_wraps",
                                         hali_s2h_rname(w, r));
          hali_pass_emit(&w->pre, w->line, HALI_OP_DIV_U_I64, 3, hali_pr(q),
                         hali_pr(d0), hali_pr(ranks));
          hali_pass_emit(&w->pre, w->line, HALI_OP_NE_I64, 3, hali_pr(wraps),
                         hali_pr(q), hali_pr(sd));
          hali_s2h_fail_if(w, wraps,
                           "tensor.all_gather of %s: dimension 0 times the "
                           "rank count overflows",
                           hali_s2h_rname(w, s));
        } else {
          check_splits(w, sd, ranks, name, s);
          hali_pass_emit(&w->pre, w->line, HALI_OP_DIV_S_I64, 3, hali_pr(d0),
                         hali_pr(sd), hali_pr(ranks));
        }
        if (xdims[0] < 0) {
          dyn[k++] = hali_pr(d0);
        } else {
          uint32_t want = hali_s2h_c64(w, xdims[0]);
          uint32_t bad = hali_pass_reg(f, HALI_TYPE_I32, "mismatch");
          hali_pass_emit(&w->pre, w->line, HALI_OP_NE_I64, 3, hali_pr(bad),
                         hali_pr(d0), hali_pr(want));
          hali_s2h_fail_if(w, bad,
                           "%s of %s: the result's dimension 0 is %lld, which "
                           "is not what the rank count gives",
                           name, hali_s2h_rname(w, s),
                           (long long)xdims[0]);
        }
      } else if (xdims[d] < 0) {
        dyn[k++] = hali_pr(w->t[s].dims[d]);
      }
    }
    if (op == HALI_OP_TENSOR_ALL_TO_ALL)
      check_splits(w, w->t[s].dims[0], ranks, name, s);
    SET_SHAPE(w, r, dyn, true);
  }
  if (r != UINT32_MAX) hali_s2h_allocate(w, r);
  /* The element count: what each rank sends (the operand's) for gather,
   * reduce, all-to-all and send; what it receives for scatter and recv. */
  uint32_t count = numel_reg(w, op == HALI_OP_TENSOR_REDUCE_SCATTER ||
                                        op == HALI_OP_TENSOR_RECV
                                    ? r
                                    : s);
  uint32_t et = hali_s2h_c32(
      w, (int32_t)f->reg_xtypes[s != UINT32_MAX ? s : r].element_type);
  uint32_t zero = hali_s2h_c64(w, 0);
  uint32_t sb = s != UINT32_MAX ? hali_s2h_root(w, s) : hali_s2h_root(w, r);
  uint32_t rb = r != UINT32_MAX ? hali_s2h_root(w, r) : hali_s2h_root(w, s);
  uint32_t sl = s != UINT32_MAX ? w->t[s].size : zero;
  uint32_t rl = r != UINT32_MAX ? w->t[r].size : zero;
  /* One at a time: the order of a call's arguments is unspecified, and the
   * constants' registers must be made in the same order by every compiler. */
  uint32_t kind_reg = hali_s2h_c32(w, kind);
  uint32_t red_reg = hali_s2h_c32(w, red);
  begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
  hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COLLECTIVE, 13,
                 hali_pr(w->cmd), hali_pr(ch), hali_pr(kind_reg),
                 hali_pr(red_reg), hali_pr(et), hali_pr(peer),
                 hali_pr(count), hali_pr(sb), hali_pr(zero), hali_pr(sl),
                 hali_pr(rb), hali_pr(zero), hali_pr(rl));
  if (s != UINT32_MAX) touch(w, s, false);
  if (r != UINT32_MAX) touch(w, r, true);
  end_cmd(w);
  return HALI_OK;
}

static hali_status_t lower_insn(lw_t *w, const hali_ir_insn_t *insn,
                                uint32_t index) {
  const hali_ir_operand_t *o = insn->operands;
  hali_ir_func_t *f = w->f;
  w->line = insn->line;
  HALI_RETURN_IF_ERROR_PLAIN(check_reads(w, insn, index));
  /* A sealed `execute {}` region takes nothing more: closed before this
   * op allocates (its slab must not hold this op's transients), unless
   * the op records nothing (an export) or names the fence the region
   * can signal directly (a barrier). */
  if (w->sealed && insn->op != HALI_OP_TENSOR_BARRIER &&
      insn->op != HALI_OP_TENSOR_EXPORT)
    close_region(w, UINT32_MAX);
  switch (insn->op) {
  case HALI_OP_TENSOR_WAIT:
    close_region(w, UINT32_MAX);
    w->base = o[0].v;
    pairs_push(w, &w->tips, o[0].v, 0);
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
      w->sealed = w->open; /* closed by what comes next (close_region) */
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
    uint32_t storage = hali_s2h_root(w, r);
    if (w->t[storage].lifetime == LT_GLOBAL) {
      /* A global's value leaves as a copy: the caller's view must not
       * change with later stores, and global storage is device-local. */
      uint32_t out = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s.returned",
                                   hali_s2h_rname(w, r));
      uint32_t cm = hali_s2h_c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE |
                                        HALI_HAL_MEMORY_TYPE_HOST_VISIBLE),
               cu = hali_s2h_c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER |
                                        HALI_HAL_BUFFER_USAGE_DISPATCH |
                                        HALI_HAL_BUFFER_USAGE_MAPPING),
               zero = hali_s2h_c64(w, 0);
      hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5,
                     hali_pr(out), hali_pr(w->allocator), hali_pr(cm),
                     hali_pr(cu), hali_pr(w->t[storage].size));
      begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
      hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                     hali_pr(w->cmd), hali_pr(storage), hali_pr(zero),
                     hali_pr(out), hali_pr(zero),
                     hali_pr(w->t[storage].size));
      touch(w, storage, false);
      end_cmd(w);
      storage = out;
    }
    hali_ir_insn_t *vc = hali_pass_emit_open(
        &w->pre, w->line, HALI_OP_HAL_BUFFER_VIEW_CREATE, 4 + rank, 4,
        hali_pr(o[0].v), hali_pr(storage), hali_pr(et),
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
    if (!w->t[r].const_returned && w->pool_offset &&
        w->pool_offset[o[1].v] != UINT64_MAX) {
      /* A read-only subspan of the context's constant pool, uploaded once
       * by the storage initializer: the work after this waits for that
       * upload by fence, the first time in the function. */
      w->t[r].defined = true;
      if (w->pool == UINT32_MAX) {
        w->pool = hali_pass_reg(f, HALI_TYPE_BUFFER, "constants");
        hali_pass_emit(&w->pre, w->line, HALI_OP_GLOBAL_LOAD_REF, 2,
                       hali_pr(w->pool),
                       hali_pref(HALI_IR_GLOBAL, w->pool_global));
        w->pool_fence = hali_pass_reg(f, HALI_TYPE_FENCE, "constants.ready");
        hali_pass_emit(&w->pre, w->line, HALI_OP_GLOBAL_LOAD_REF, 2,
                       hali_pr(w->pool_fence),
                       hali_pref(HALI_IR_GLOBAL, w->pool_ready));
      }
      /* Its bytes are written by the pool's upload. */
      uint32_t key = skey(w, r);
      if (key < w->nkeys) w->wf[key] = w->pool_fence;
      uint32_t off = hali_s2h_c64(w, (int64_t)w->pool_offset[o[1].v]);
      hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_SUBSPAN, 4,
                     hali_pr(r), hali_pr(w->pool), hali_pr(off),
                     hali_pr(w->t[r].size));
      return HALI_OK;
    }
    hali_s2h_allocate(w, r);
    uint32_t zero = hali_s2h_c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_UPDATE, 6,
                   hali_pr(w->cmd), hali_pref(HALI_IR_RODATA, o[1].v),
                   hali_pr(zero), hali_pr(hali_s2h_root(w, r)), hali_pr(zero),
                   hali_pr(w->t[r].size));
    touch(w, r, true);
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
      hali_free(ts);
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
    touch(w, r, true);
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
    touch(w, s, false);
    touch(w, r, true);
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
    touch(w, v, false);
    touch(w, a, true);
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_GLOBAL_LOAD: {
    /* The variable lifetime: the value is the global's storage, and the
     * work after this point waits (through the queue, never the host) for
     * the timepoint of the global's last store. */
    uint32_t r = o[0].v, g = o[1].v;
    SET_SHAPE(w, r, NULL, false);
    w->t[r].defined = true;
    hali_pass_emit(&w->pre, w->line, HALI_OP_GLOBAL_LOAD_REF, 2, hali_pr(r),
                   hali_pref(HALI_IR_GLOBAL, g));
    /* A parameter global's bytes are the context's parameters, in place
     * before any function runs, and nothing stores it (it is immutable):
     * its timepoint is always the null fence, so nothing waits for it
     * (no load of it, no join per use: a step of examples/gpt loads 56). */
    if (w->m->globals[g].flags & HALI_GLOBAL_PARAMETER) return HALI_OK;
    uint32_t gf = hali_pass_reg(f, HALI_TYPE_FENCE, "%s.ready",
                                hali_s2h_rname(w, r));
    hali_pass_emit(&w->pre, w->line, HALI_OP_GLOBAL_LOAD_REF, 2, hali_pr(gf),
                   hali_pref(HALI_IR_GLOBAL, w->ready[g]));
    /* Its bytes are those of the global's last store. */
    w->wf[w->nregs + g] = gf;
    return HALI_OK;
  }
  case HALI_OP_TENSOR_GLOBAL_STORE: {
    /* Into the global's storage (a copy, unless the value already lives
     * there: a dispatch tied to the global's loaded value), then the
     * global's timepoint becomes the fence of the work that wrote it. */
    uint32_t g = o[0].v, v = o[1].v, rv = hali_s2h_root(w, v);
    /* A value loaded from |g| that is still read after this store keeps
     * the old bytes: it moves to a copy first (in its own region, so that
     * the work already recorded still reads the global's storage). */
    for (uint32_t r = 0; r < w->nregs; ++r) {
      tinfo_t *t = &w->t[r];
      if (r == rv || t->lifetime != LT_GLOBAL || t->global != g ||
          !t->defined || t->last <= w->index)
        continue;
      close_region(w, UINT32_MAX);
      uint32_t cm = hali_s2h_c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE |
                                        HALI_HAL_MEMORY_TYPE_HOST_VISIBLE),
               cu = hali_s2h_c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER |
                                        HALI_HAL_BUFFER_USAGE_DISPATCH |
                                        HALI_HAL_BUFFER_USAGE_MAPPING),
               zero = hali_s2h_c64(w, 0);
      uint32_t gb = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s.old",
                                  w->m->globals[g].name);
      hali_pass_emit(&w->pre, w->line, HALI_OP_GLOBAL_LOAD_REF, 2, hali_pr(gb),
                     hali_pref(HALI_IR_GLOBAL, g));
      hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5,
                     hali_pr(r), hali_pr(w->allocator), hali_pr(cm),
                     hali_pr(cu), hali_pr(t->size));
      begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
      hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                     hali_pr(w->cmd), hali_pr(gb), hali_pr(zero), hali_pr(r),
                     hali_pr(zero), hali_pr(t->size));
      touch_key(w, w->nregs + g, false);
      end_cmd(w);
      t->lifetime = LT_RETURNED;
      touch(w, r, true);
    }
    if (!(w->t[rv].lifetime == LT_GLOBAL && w->t[rv].global == g)) {
      uint32_t gb = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s.storage",
                                  w->m->globals[g].name);
      hali_pass_emit(&w->pre, w->line, HALI_OP_GLOBAL_LOAD_REF, 2, hali_pr(gb),
                     hali_pref(HALI_IR_GLOBAL, g));
      uint32_t zero = hali_s2h_c64(w, 0);
      begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
      hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                     hali_pr(w->cmd), hali_pr(rv), hali_pr(zero), hali_pr(gb),
                     hali_pr(zero), hali_pr(w->t[v].size));
      if (w->wf[w->nregs + g] == UINT32_MAX) {
        /* Not loaded here: the copy also waits for the last store's
         * work (of an earlier call). */
        uint32_t gf = hali_pass_reg(f, HALI_TYPE_FENCE, "%s.ready",
                                    w->m->globals[g].name);
        hali_pass_emit(&w->pre, w->line, HALI_OP_GLOBAL_LOAD_REF, 2,
                       hali_pr(gf), hali_pref(HALI_IR_GLOBAL, w->ready[g]));
        w->wf[w->nregs + g] = gf;
      }
      touch(w, v, false);
      touch_key(w, w->nregs + g, true);
      end_cmd(w);
    }
    close_region(w, UINT32_MAX);
    /* The global's timepoint: the work that last wrote its storage. */
    uint32_t ready = w->wf[w->nregs + g];
    if (ready == UINT32_MAX) ready = base_fence(w);
    hali_pass_splice(&w->out, &w->pre);
    hali_pass_emit(&w->out, w->line, HALI_OP_GLOBAL_STORE_REF, 2,
                   hali_pref(HALI_IR_GLOBAL, w->ready[g]), hali_pr(ready));
    return HALI_OK;
  }
  case HALI_OP_TENSOR_ALL_REDUCE:
  case HALI_OP_TENSOR_ALL_GATHER:
  case HALI_OP_TENSOR_REDUCE_SCATTER:
  case HALI_OP_TENSOR_ALL_TO_ALL:
  case HALI_OP_TENSOR_SEND:
  case HALI_OP_TENSOR_RECV:
    return lower_collective(w, insn);
  case HALI_OP_TENSOR_DIM:
  case HALI_OP_TENSOR_NUMEL: {
    /* Host arithmetic on the shape registers: into the open region's
     * setup, else straight into the output (host code after it reads it). */
    uint32_t d = o[0].v, t = o[1].v;
    hali_insn_list_t *to = &w->pre;
    if (!w->open) {
      hali_pass_splice(&w->out, &w->pre);
      to = &w->out;
    }
    if (insn->op == HALI_OP_TENSOR_DIM) {
      hali_pass_emit(to, w->line, HALI_OP_MOV_I64, 2, hali_pr(d),
                     hali_pr(w->t[t].dims[hali_ir_imm(w->m, &o[2])]));
      return HALI_OK;
    }
    /* The product of the dims (it fits: the byte size was checked). */
    uint32_t rank = f->reg_xtypes[t].rank;
    if (!rank) {
      uint32_t one = hali_s2h_c64(w, 1);
      if (!w->open) hali_pass_splice(&w->out, &w->pre);
      hali_pass_emit(to, w->line, HALI_OP_MOV_I64, 2, hali_pr(d), hali_pr(one));
      return HALI_OK;
    }
    hali_pass_emit(to, w->line, HALI_OP_MOV_I64, 2, hali_pr(d),
                   hali_pr(w->t[t].dims[0]));
    for (uint32_t k = 1; k < rank; ++k)
      hali_pass_emit(to, w->line, HALI_OP_MUL_I64, 3, hali_pr(d), hali_pr(d),
                     hali_pr(w->t[t].dims[k]));
    return HALI_OK;
  }
  case HALI_OP_TENSOR_RESHAPE: {
    /* No work: the result is the operand's storage in a new shape; the
     * byte sizes (same element type) must agree, checked at run time when
     * a shape is dynamic (the assembler checks static ones). */
    uint32_t r = o[0].v, src = o[1].v;
    SET_SHAPE(w, r, &o[2], true);
    w->t[r].defined = true;
    if (w->t[r].static_bytes >= 0 && w->t[src].static_bytes >= 0) {
      if (w->t[r].static_bytes != w->t[src].static_bytes)
        return hali_pass_error(PASS, w->m, f, insn, index,
                               "tensor.reshape: %lld bytes into %lld",
                               (long long)w->t[src].static_bytes,
                               (long long)w->t[r].static_bytes);
      return HALI_OK;
    }
    hali_strbuf_t sb = {0};
    char rn[64];
    hali_strbuf_printf(&sb, "tensor.reshape of %s (",
                       hali_ir_reg_name(f, src, rn, sizeof(rn)));
    hali_ir_xtype_print(&sb, &f->reg_xtypes[src]);
    hali_strbuf_append(&sb, ") into ", 7);
    hali_ir_xtype_print(&sb, &f->reg_xtypes[r]);
    char *ts = hali_strbuf_take(&sb);
    uint32_t ne = hali_pass_reg(f, HALI_TYPE_I32, "%s.reshape_mismatch",
                                hali_s2h_rname(w, r));
    hali_pass_emit(&w->pre, w->line, HALI_OP_NE_I64, 3, hali_pr(ne),
                   hali_pr(w->t[r].size), hali_pr(w->t[src].size));
    hali_s2h_fail_if(w, ne, "%s: the element counts differ",
                     ts ? ts : "tensor.reshape");
    hali_free(ts);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_SLICE: {
    uint32_t r = o[0].v, src = o[1].v, rank = f->reg_xtypes[src].rank;
    SET_SHAPE(w, r, &o[2 + rank], true);
    if (w->t[r].lifetime == LT_VIEW) {
      /* No copy: a subspan of the source's storage (its fences). */
      uint32_t at = UINT32_MAX;
      w->t[r].defined = true;
      HALI_RETURN_IF_ERROR_PLAIN(
          lower_range(w, insn, index, true, src, r, &o[2], src, &at));
      hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_SUBSPAN, 4,
                     hali_pr(r), hali_pr(hali_s2h_root(w, src)), hali_pr(at),
                     hali_pr(w->t[r].size));
      return HALI_OK;
    }
    hali_s2h_allocate(w, r);
    HALI_RETURN_IF_ERROR_PLAIN(
        lower_range(w, insn, index, true, src, r, &o[2], src, NULL));
    touch(w, src, false);
    touch(w, r, true);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_UPDATE: {
    uint32_t r = o[0].v, v = o[1].v, dst = o[2].v;
    const hali_ir_xtype_t *x = &f->reg_xtypes[r];
    hali_ir_operand_t dyn[HALI_HAL_MAX_RANK];
    uint32_t k = 0;
    for (uint32_t d = 0; d < x->rank; ++d)
      if (x->dims[d] < 0) dyn[k++] = hali_pr(w->t[dst].dims[d]);
    SET_SHAPE(w, r, dyn, false);
    w->t[r].defined = true;
    HALI_RETURN_IF_ERROR_PLAIN(lower_range(w, insn, index, false, r, v, &o[3], dst, NULL));
    touch(w, v, false);
    touch(w, r, true);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_TRACE:
    return lower_trace(w, insn);
  case HALI_OP_TENSOR_DISPATCH:
    if (hali_ir_imm(w->m, &o[HALI_TD_BINDINGS]) < 0)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "dispatch site without an interface: run "
                             "materialize-interfaces first");
    return lower_dispatch(w, insn);
  default:
    return hali_pass_error(PASS, w->m, f, insn, index, "unexpected op");
  }
}

/* Does a tensor register other than the results of the call at |index|
 * whose storage is |root| get read after it? */
static bool root_read_after(const lw_t *w, const hali_ir_block_t *blk,
                            uint32_t index, uint32_t root) {
  for (uint32_t i = index + 1; i < blk->insn_count; ++i) {
    const hali_ir_insn_t *insn = &blk->insns[i];
    for (uint32_t k = 0; k < insn->operand_count; ++k) {
      const hali_ir_operand_t *o = &insn->operands[k];
      if (o->kind != HALI_IR_REG || o->v >= w->nregs ||
          w->f->reg_types[o->v] != HALI_TYPE_TENSOR ||
          hali_ir_operand_is_write(insn, k))
        continue;
      bool result = false;
      const hali_ir_insn_t *call = &blk->insns[index];
      for (uint32_t j = 1 + call->aux; j < call->operand_count && !result; ++j)
        result = call->operands[j].v == o->v;
      if (!result && hali_s2h_root(w, o->v) == root) return true;
    }
  }
  return false;
}

/* The parameter whose import defines tensor |r|, or UINT32_MAX. */
static uint32_t imported_param(const lw_t *w, const hali_ir_block_t *blk,
                               uint32_t r) {
  for (uint32_t i = 0; i < blk->insn_count; ++i)
    if (blk->insns[i].op == HALI_OP_TENSOR_IMPORT &&
        blk->insns[i].operands[0].v == r)
      return blk->insns[i].operands[1].v;
  return UINT32_MAX;
}

/* `call @c$async(args...)` between tensor-level functions (left so by
 * func-conversion): the pending region is submitted, each tensor argument
 * passes as a view of its storage, the call waits for the join of the
 * regions that wrote those arguments (and, for a mutable parameter, that
 * read it since) and signals a fresh fence, which the results' storage is
 * then written behind: no host wait.  Scalars widen to the ABI's types and
 * results narrow back. */
static hali_status_t lower_call(lw_t *w, const hali_ir_block_t *blk,
                                const hali_ir_insn_t *insn, uint32_t index) {
  hali_ir_func_t *f = w->f;
  const hali_ir_operand_t *o = insn->operands;
  uint32_t ci = o[0].v;
  const hali_ir_func_t *c = &w->m->funcs[ci];
  uint32_t na = insn->aux, nr = insn->operand_count - 1 - na;
  char rn[64];
  w->line = insn->line;
  if (w->concurrent)
    return hali_pass_error(PASS, w->m, f, insn, index,
                           "a call of @%.*s inside concurrent {}: a call "
                           "is submitted on its own, after the ops before it",
                           (int)(strlen(c->name) - 6), c->name);
  for (uint32_t k = 0; k < na; ++k) {
    uint32_t a = o[1 + k].v;
    if (o[1 + k].kind != HALI_IR_REG || f->reg_types[a] != HALI_TYPE_TENSOR)
      continue;
    if (!w->t[a].defined)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "tensor %s is read before it is written",
                             hali_ir_reg_name(f, a, rn, sizeof(rn)));
    bool mut = c->param_flags && (c->param_flags[k] & HALI_PARAM_MUTABLE);
    if (!mut) continue;
    /* The callee writes a mutable argument in place: it must be this
     * function's to give away (value semantics). */
    uint32_t root = hali_s2h_root(w, a);
    const tinfo_t *t = &w->t[root];
    uint32_t p = t->lifetime == LT_IMPORTED ? imported_param(w, blk, root)
                                            : UINT32_MAX;
    bool owned = t->lifetime == LT_TRANSIENT || t->lifetime == LT_RETURNED ||
                 (p != UINT32_MAX && f->param_flags &&
                  (f->param_flags[p] & HALI_PARAM_MUTABLE));
    if (!owned || root_read_after(w, blk, index, root))
      return hali_pass_error(
          PASS, w->m, f, insn, index,
          "argument %u (%s) of @%.*s is a mutable parameter, which the "
          "callee writes in place, but %s is %s: pass a copy (tensor.clone)",
          k, hali_ir_reg_name(f, a, rn, sizeof(rn)),
          (int)(strlen(c->name) - 6), c->name, rn,
          !owned ? (t->lifetime == LT_CONSTANT ? "a constant"
                    : t->lifetime == LT_GLOBAL ? "a tensor global's value"
                    : p != UINT32_MAX          ? "an immutable argument"
                    : t->lifetime == LT_IMPORTED
                        ? "the result of a call (which may be an argument "
                          "passed through)"
                        : "not owned here")
                 : "read after the call");
  }
  close_region(w, UINT32_MAX);
  /* Arguments. */
  uint32_t *args = hali_malloc(((size_t)na + nr + 3) * sizeof(uint32_t));
  if (!args) return hali_status_oom();
  uint32_t enc = UINT32_MAX;
  for (uint32_t k = 0; k < na; ++k) {
    uint32_t a = o[1 + k].v;
    hali_type_t t = f->reg_types[a];
    if (t == HALI_TYPE_TENSOR) {
      bool mut = c->param_flags && (c->param_flags[k] & HALI_PARAM_MUTABLE);
      /* (Adding registers may move reg_xtypes: read it first.) */
      uint32_t rank = f->reg_xtypes[a].rank;
      int32_t etype = (int32_t)f->reg_xtypes[a].element_type;
      if (enc == UINT32_MAX) enc = hali_s2h_c32(w, 1);
      uint32_t et = hali_s2h_c32(w, etype);
      args[k] = hali_pass_reg(f, HALI_TYPE_BUFFER_VIEW, "%s.arg",
                              hali_s2h_rname(w, a));
      hali_ir_insn_t *vc = hali_pass_emit_open(
          &w->pre, w->line, HALI_OP_HAL_BUFFER_VIEW_CREATE, 4 + rank, 4,
          hali_pr(args[k]), hali_pr(hali_s2h_root(w, a)), hali_pr(et),
          hali_pr(enc));
      for (uint32_t d = 0; d < rank; ++d)
        hali_pass_set_operand(&w->pre, vc, 4 + d, hali_pr(w->t[a].dims[d]));
      touch(w, a, mut);
    } else if (t == HALI_TYPE_I32 || t == HALI_TYPE_F32) {
      args[k] = hali_pass_reg(f, t == HALI_TYPE_I32 ? HALI_TYPE_I64 : HALI_TYPE_F64,
                              "%s.abi", hali_s2h_rname(w, a));
      hali_pass_emit(&w->pre, w->line,
                     t == HALI_TYPE_I32 ? HALI_OP_EXT_S_I32_I64 : HALI_OP_FPEXT_F32_F64,
                     2, hali_pr(args[k]), hali_pr(a));
    } else {
      args[k] = a; /* index (i64 once lowered) and ABI-typed values */
    }
  }
  uint32_t *deps = hali_malloc(((size_t)w->nacc + w->rd.n + 2) * sizeof(uint32_t));
  if (!deps) {
    hali_free(args);
    return hali_status_oom();
  }
  /* The call reads (and may write) its arguments' storage: a region of
   * its own for the fence wiring. */
  uint32_t nd = region_deps(w, deps);
  uint32_t wait = join_fences(w, deps, nd);
  uint32_t signal = hali_pass_reg(f, HALI_TYPE_FENCE, "%s.done", c->name);
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_FENCE_CREATE, 2, hali_pr(signal),
                 hali_pr(w->device));
  hali_pass_splice(&w->out, &w->pre);
  /* Results: views for tensors, ABI types for scalars. */
  uint32_t *res = args + na;
  for (uint32_t k = 0; k < nr; ++k) {
    uint32_t r = o[1 + na + k].v;
    hali_type_t t = f->reg_types[r];
    if (t == HALI_TYPE_TENSOR)
      res[k] = hali_pass_reg(f, HALI_TYPE_BUFFER_VIEW, "%s.view",
                             hali_s2h_rname(w, r));
    else if (t == HALI_TYPE_I32 || t == HALI_TYPE_F32)
      res[k] = hali_pass_reg(f, t == HALI_TYPE_I32 ? HALI_TYPE_I64 : HALI_TYPE_F64,
                             "%s.abi", hali_s2h_rname(w, r));
    else
      res[k] = r;
  }
  hali_ir_insn_t *call = hali_pass_emit_open(
      &w->out, w->line, HALI_OP_CALL, 3 + na + nr, 1, hali_pref(HALI_IR_FUNC, ci));
  if (call) call->aux = (uint16_t)(na + 2);
  for (uint32_t k = 0; k < na; ++k)
    hali_pass_set_operand(&w->out, call, 1 + k, hali_pr(args[k]));
  hali_pass_set_operand(&w->out, call, 1 + na, hali_pr(wait));
  hali_pass_set_operand(&w->out, call, 2 + na, hali_pr(signal));
  for (uint32_t k = 0; k < nr; ++k)
    hali_pass_set_operand(&w->out, call, 3 + na + k, hali_pr(res[k]));
  hali_status_t s = HALI_OK;
  for (uint32_t k = 0; k < nr && !s; ++k) {
    uint32_t r = o[1 + na + k].v;
    hali_type_t t = f->reg_types[r];
    if (t == HALI_TYPE_I32 || t == HALI_TYPE_F32) {
      hali_pass_emit(&w->out, w->line,
                     t == HALI_TYPE_I32 ? HALI_OP_TRUNC_I64_I32 : HALI_OP_FPTRUNC_F64_F32,
                     2, hali_pr(r), hali_pr(res[k]));
      continue;
    }
    if (t != HALI_TYPE_TENSOR) continue;
    /* The static dims, copied (adding registers may move reg_xtypes). */
    uint32_t rank = f->reg_xtypes[r].rank;
    int64_t xd[HALI_HAL_MAX_RANK];
    for (uint32_t d = 0; d < rank && d < HALI_HAL_MAX_RANK; ++d)
      xd[d] = f->reg_xtypes[r].dims[d];
    if (rank > HALI_HAL_MAX_RANK) rank = HALI_HAL_MAX_RANK;
    hali_ir_operand_t dyn[HALI_HAL_MAX_RANK];
    uint32_t ndyn = 0;
    if (w->t[r].lifetime == LT_ALIAS) {
      /* Tied: the argument's storage and shape. */
      uint32_t a = w->t[r].alias;
      for (uint32_t d = 0; d < rank; ++d)
        if (xd[d] < 0) dyn[ndyn++] = hali_pr(w->t[a].dims[d]);
    } else {
      hali_pass_emit(&w->out, w->line, HALI_OP_HAL_BUFFER_VIEW_BUFFER, 2,
                     hali_pr(r), hali_pr(res[k]));
      for (uint32_t d = 0; d < rank; ++d) {
        if (xd[d] >= 0) continue;
        uint32_t dr = hali_pass_reg(f, HALI_TYPE_I64, "%s.dim%u",
                                    hali_s2h_rname(w, r), d);
        uint32_t di = hali_s2h_c32(w, d);
        hali_pass_splice(&w->out, &w->pre);
        hali_pass_emit(&w->out, w->line, HALI_OP_HAL_BUFFER_VIEW_DIM, 3,
                       hali_pr(dr), hali_pr(res[k]), hali_pr(di));
        dyn[ndyn++] = hali_pr(dr);
      }
    }
    hali_s2h_set_shape(w, r, dyn, false);
    if (w->err) {
      s = w->err;
      w->err = HALI_OK;
    }
    w->t[r].defined = true;
    touch(w, r, true);
  }
  region_done(w, signal, deps, nd);
  hali_free(deps);
  hali_free(args);
  return s;
}

typedef struct {
  const uint32_t *ready;
  const uint64_t *pool_offset; /* NULL: no pool */
  uint32_t pool_global, pool_ready;
  uint64_t pool_size;
  ro_state_t *ro; /* regions recorded once (record_once.c) */
} module_state_t;

/* Does |insn| write a register that a command recorded in |cmds| reads?
 * The region's commands are emitted after its setup, so host code joining
 * the setup must not change what they read (`%i = add.i32 %i, %one` after
 * a dispatch that pushes %i as a constant: the loop counter of a loop). */
static bool rewrites_recorded(lw_t *w, const hali_ir_insn_t *insn) {
  /* The commands recorded since the last check mark the registers they
   * read (stamped with the region's epoch), so each command is looked at
   * once per region, not once per host instruction.  Host code is the
   * function's own: it writes registers below w->nregs only. */
  for (uint32_t i = w->cmd_scanned; i < w->cmds.b.insn_count; ++i) {
    const hali_ir_insn_t *c = &w->cmds.b.insns[i];
    for (uint32_t j = 0; j < c->operand_count; ++j)
      if (c->operands[j].kind == HALI_IR_REG && c->operands[j].v < w->nregs)
        w->cmd_read[c->operands[j].v] = w->cmd_epoch;
  }
  w->cmd_scanned = w->cmds.b.insn_count;
  for (uint32_t k = 0; k < insn->operand_count; ++k)
    if (insn->operands[k].kind == HALI_IR_REG &&
        insn->operands[k].v < w->nregs && hali_ir_operand_is_write(insn, k) &&
        w->cmd_read[insn->operands[k].v] == w->cmd_epoch)
      return true;
  return false;
}

/* ---- Control flow (doc/passes.md, "Control flow"). */

static bool has_successor(const hali_ir_insn_t *insn) {
  for (uint32_t k = 0; k < insn->operand_count; ++k)
    if (insn->operands[k].kind == HALI_IR_BLOCK) return true;
  return false;
}

/* Variable |v|'s fixed registers, set in the entry block's setup: its
 * buffer and spare buffer (empty until a value needs them: the first
 * write allocates, later ones reuse), its dims and size. */
static void setup_var(lw_t *w, uint32_t v) {
  hali_ir_func_t *f = w->f;
  tinfo_t *t = &w->t[v];
  const char *n = hali_s2h_rname(w, v);
  hali_ir_xtype_t xs = f->reg_xtypes[v]; /* rank and dims only, read now */
  uint32_t rank = xs.rank > HALI_HAL_MAX_RANK ? HALI_HAL_MAX_RANK : xs.rank;
  bool all_static = true;
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t dim = f->reg_xtypes[v].dims[d];
    if (dim >= 0) {
      t->dims[d] = hali_s2h_c64(w, dim);
      continue;
    }
    all_static = false;
    t->dims[d] = hali_pass_reg(f, HALI_TYPE_I64, "%s.dim%u", n, d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2, hali_pr(t->dims[d]),
                   hali_pk(w->m, 0));
  }
  uint64_t sb = 0;
  uint32_t at = 0;
  if (!hali_ir_xtype_static_bytes(&f->reg_xtypes[v], &sb, &at) ||
      sb > INT64_MAX)
    sb = 0; /* the lowering of its first write reports the size */
  t->static_bytes = all_static ? (int64_t)sb : -1;
  t->size = hali_pass_reg(f, HALI_TYPE_I64, "%s.size", n);
  hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2, hali_pr(t->size),
                 hali_pk(w->m, all_static ? (int64_t)sb : 0));
  t->defined = true;
  uint32_t empty = hali_s2h_c64(w, 0);
  uint32_t cm = hali_s2h_c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE |
                                    HALI_HAL_MEMORY_TYPE_HOST_VISIBLE),
           cu = hali_s2h_c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER |
                                    HALI_HAL_BUFFER_USAGE_DISPATCH |
                                    HALI_HAL_BUFFER_USAGE_MAPPING);
  w->spare[v] = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s.spare", n);
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5, hali_pr(v),
                 hali_pr(w->allocator), hali_pr(cm), hali_pr(cu), hali_pr(empty));
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5,
                 hali_pr(w->spare[v]), hali_pr(w->allocator), hali_pr(cm),
                 hali_pr(cu), hali_pr(empty));
}

/* A block after the entry starts from %timeline: everything before it
 * (its regions wait for that; within the block they wait only for what
 * they read, as in one block). */
static void enter_block(lw_t *w) {
  for (uint32_t k = 0; k < w->nkeys; ++k) w->wf[k] = UINT32_MAX;
  w->rd.n = 0;
  w->tips.n = 0;
  w->fb.n = 0;
  pairs_push(w, &w->tips, w->tl, 0);
  w->base = w->tl;
  w->cur = w->tl;
  w->nconst = 0; /* constants made in another block may not have run */
  w->pool = UINT32_MAX;
  w->pool_fence = UINT32_MAX;
  w->sealed = false;
  for (uint32_t r = 0; r < w->nregs; ++r)
    if (w->t[r].lifetime == LT_GLOBAL) w->t[r].defined = false;
}

/* Before a branch: each variable the successors read takes its last
 * version's value (in place, carried in the spare buffer, or copied into
 * it), then %timeline joins every fence no later one waits on. */
static void leave_block(lw_t *w, uint32_t b) {
  const hali_tcfg_t *g = w->cfg;
  hali_ir_func_t *f = w->f;
  uint32_t k0 = g->fin_at[b], nf = g->fin_at[b + 1] - k0;
  uint32_t *next = hali_calloc((size_t)nf + 1, sizeof(uint32_t));
  if (!next) {
    w->pre.oom = true;
    return;
  }
  for (uint32_t k = 0; k < nf; ++k) {
    if (w->fin_kind[k0 + k] != FIN_COPY) continue;
    uint32_t v = g->fin[k0 + k][0], last = g->fin[k0 + k][1];
    next[k] = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s.next", hali_s2h_rname(w, v));
    hali_s2h_reuse(w, next[k], w->spare[v], w->t[last].size);
    uint32_t zero = hali_s2h_c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                   hali_pr(w->cmd), hali_pr(hali_s2h_root(w, last)),
                   hali_pr(zero), hali_pr(next[k]), hali_pr(zero),
                   hali_pr(w->t[last].size));
    touch(w, last, false);
    end_cmd(w);
  }
  close_region(w, UINT32_MAX);
  for (uint32_t k = 0; k < nf; ++k) {
    uint32_t v = g->fin[k0 + k][0], last = g->fin[k0 + k][1];
    uint8_t kind = w->fin_kind[k0 + k];
    if (kind != FIN_IN_PLACE) {
      uint32_t from = kind == FIN_COPY ? next[k] : hali_s2h_root(w, last);
      hali_pass_emit(&w->out, w->line, HALI_OP_MOV_REF, 2, hali_pr(w->spare[v]),
                     hali_pr(v));
      hali_pass_emit(&w->out, w->line, HALI_OP_MOV_REF, 2, hali_pr(v),
                     hali_pr(from));
    }
    const hali_ir_xtype_t *x = &f->reg_xtypes[v];
    for (uint32_t d = 0; d < x->rank && d < HALI_HAL_MAX_RANK; ++d)
      if (x->dims[d] < 0 && w->t[v].dims[d] != w->t[last].dims[d])
        hali_pass_emit(&w->out, w->line, HALI_OP_MOV_I64, 2,
                       hali_pr(w->t[v].dims[d]), hali_pr(w->t[last].dims[d]));
    if (w->t[v].static_bytes < 0 && w->t[v].size != w->t[last].size)
      hali_pass_emit(&w->out, w->line, HALI_OP_MOV_I64, 2, hali_pr(w->t[v].size),
                     hali_pr(w->t[last].size));
  }
  hali_free(next);
  /* The fences no later one waits on, and every other fence a storage
   * waits for that is not a region's (the last store of a tensor global
   * loaded here, the constant pool's upload): a later block reads those
   * values after %timeline only. */
  uint32_t n = 0;
  uint32_t *fs = hali_malloc(((size_t)w->tips.n + w->nkeys + 1) *
                             sizeof(uint32_t));
  if (!fs) {
    w->pre.oom = true;
    return;
  }
  for (uint32_t k = 0; k < w->tips.n; ++k) add_unique(fs, &n, w->tips.v[k][0]);
  for (uint32_t key = 0; key < w->nkeys; ++key) {
    uint32_t wf = w->wf[key];
    bool region = wf == UINT32_MAX;
    for (uint32_t j = 0; j < w->fb.n && !region; ++j) region = w->fb.v[j][0] == wf;
    if (!region) add_unique(fs, &n, wf);
  }
  uint32_t j = join_fences(w, fs, n);
  hali_free(fs);
  hali_pass_splice(&w->out, &w->pre);
  if (j != w->tl)
    hali_pass_emit(&w->out, w->line, HALI_OP_MOV_REF, 2, hali_pr(w->tl),
                   hali_pr(j));
}

static hali_status_t lower_func(hali_ir_module_t *m, uint32_t fi,
                                const module_state_t *ms) {
  hali_ir_func_t *f = &m->funcs[fi];
  for (uint32_t p = 0; p < f->param_count; ++p)
    if (f->reg_types[p] == HALI_TYPE_TENSOR)
      return hali_pass_error(PASS, m, f, NULL, 0,
                             "parameter %u is a tensor: run func-conversion "
                             "first",
                             p);
  hali_tcfg_t cfg;
  HALI_RETURN_IF_ERROR_PLAIN(hali_tcfg_build(m, f, &cfg));
  hali_status_t cs = hali_pass_copy_on_write(m, f, &cfg);
  lw_t *wp = cs ? NULL : hali_calloc(1, sizeof(lw_t));
  if (!wp) {
    hali_tcfg_free(&cfg);
    return cs ? cs : hali_status_oom();
  }
#define w (*wp)
  w.cfg = &cfg;
  w.tl = UINT32_MAX;
  w.m = m;
  w.f = f;
  w.ro = ms->ro;
  w.record_once = hali_ir_func_has_attr(f, HALI_ATTR_RECORD_ONCE) &&
                  f->block_count == 1 && !cfg.multi;
  w.nregs = f->reg_count;
  w.cur = UINT32_MAX;
  w.ready = ms->ready;
  w.pool_offset = ms->pool_offset;
  w.pool_global = ms->pool_global;
  w.pool_ready = ms->pool_ready;
  w.pool = UINT32_MAX;
  w.t = hali_calloc(f->reg_count + 1, sizeof(tinfo_t));
  w.exes = hali_malloc((m->executable_count + 1) * sizeof(uint32_t));
  w.pending = hali_malloc(2 * (f->reg_count + 1) * sizeof(uint32_t));
  w.base = UINT32_MAX;
  w.pool_fence = UINT32_MAX;
  w.nkeys = f->reg_count + m->global_count;
  w.wf = hali_malloc(((size_t)w.nkeys + 1) * sizeof(uint32_t));
  w.acc = hali_malloc(((size_t)w.nkeys + 1) * sizeof(uint32_t));
  w.accw = hali_calloc((size_t)w.nkeys + 1, 1);
  w.spare = hali_malloc(((size_t)w.nregs + 1) * sizeof(uint32_t));
  w.fin_kind = hali_calloc(cfg.multi ? cfg.fin_at[cfg.nblocks] + 1 : 1, 1);
  w.cmd_read = hali_calloc((size_t)w.nregs + 1, sizeof(uint32_t));
  w.cmd_epoch = 1;
  if (!w.t || !w.exes || !w.pending || !w.wf || !w.acc || !w.accw ||
      !w.spare || !w.fin_kind || !w.cmd_read) {
    hali_free(w.cmd_read);
    hali_free(w.spare);
    hali_free(w.fin_kind);
    hali_tcfg_free(&cfg);
    hali_free(w.t);
    hali_free(w.exes);
    hali_free(w.pending);
    hali_free(w.wf);
    hali_free(w.acc);
    hali_free(w.accw);
    hali_free(wp);
    return hali_status_oom();
  }
  for (uint32_t k = 0; k < w.nkeys; ++k) w.wf[k] = UINT32_MAX;
  for (uint32_t r = 0; r <= w.nregs; ++r) w.spare[r] = UINT32_MAX;
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
  if (!s && cfg.multi) {
    w.tl = hali_pass_reg(f, HALI_TYPE_FENCE, "timeline");
    for (uint32_t r = 0; r < w.nregs && r < cfg.nregs; ++r)
      if (cfg.is_var[r]) setup_var(&w, r);
  }
  for (uint32_t oi = 0; oi < f->block_count && !s; ++oi) {
    uint32_t b = cfg.multi ? cfg.order[oi] : oi;
    hali_ir_block_t *blk = &f->blocks[b];
    w.block = b;
    if (cfg.multi && b != 0) enter_block(&w);
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
      if (hali_pass_is_tensor_call(m, insn)) {
        s = lower_call(&w, blk, insn, i);
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
          insn->op != HALI_OP_CALL && !rewrites_recorded(&w, insn)) {
        hali_pass_copy_insn(&w.pre, insn, NULL);
        continue;
      }
      if (cfg.multi && (fl & HALI_OPF_TERM) && has_successor(insn))
        leave_block(&w, b);
      else
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
  if (!s && w.init.b.insn_count && f->blocks[0].insn_count) {
    /* The entry's end (before its branch) starts the kept buffers. */
    hali_ir_block_t *e = &f->blocks[0];
    for (uint32_t i = 0; i + 1 < e->insn_count; ++i)
      hali_pass_copy_insn(&w.out, &e->insns[i], NULL);
    hali_pass_splice(&w.out, &w.init);
    hali_pass_copy_insn(&w.out, &e->insns[e->insn_count - 1], NULL);
    if (!w.out.oom) hali_ir_block_take(e, &w.out.b);
  }
  bool oom = w.out.oom || w.pre.oom || w.cmds.oom || w.init.oom;
  hali_pass_list_free(&w.init);
  hali_pass_list_free(&w.out);
  hali_pass_list_free(&w.pre);
  hali_pass_list_free(&w.cmds);
  if (!s && oom) s = hali_status_oom();
  /* What the bound regions left unread (their per-call subspans). */
  if (!s && w.regions) hali_s2h_drop_unused(f);
  if (!s) {
    /* Tensor registers now hold their storage. */
    for (uint32_t r = 0; r < w.nregs; ++r)
      if (f->reg_types[r] == HALI_TYPE_TENSOR) f->reg_types[r] = HALI_TYPE_BUFFER;
      else if (f->reg_types[r] == HALI_TYPE_INDEX) f->reg_types[r] = HALI_TYPE_I64;
    if (f->reg_xtypes) {
      for (uint32_t r = 0; r < f->reg_count; ++r) hali_free(f->reg_xtypes[r].dims);
      hali_free(f->reg_xtypes);
      f->reg_xtypes = NULL;
    }
  }
  hali_status_free(w.err); /* one found after another error */
  hali_free(w.t);
  hali_free(w.exes);
  hali_free(w.pending);
  hali_free(w.wf);
  hali_free(w.acc);
  hali_free(w.accw);
  hali_free(w.rd.v);
  hali_free(w.tips.v);
  hali_free(w.fb.v);
  hali_free(w.spare);
  hali_free(w.fin_kind);
  hali_free(w.cmd_read);
  hali_tcfg_free(&cfg);
#undef w
  hali_free(wp);
  return s;
}

/* The storage initializer, function 0 of the lowered module (so that it
 * runs before the module's own initializers): for each tensor global, a
 * device-local buffer of its size, zeroed on the queue, whose fence is the
 * global's first timepoint; a parameter global's buffer comes from the
 * context's parameters (api/context.c) and its timepoint is the null
 * fence.  Calls and exports naming functions move up by one. */
static hali_status_t add_storage_initializer(hali_ir_module_t *m,
                                             const module_state_t *ms,
                                             uint32_t nglobals) {
  const uint32_t *ready = ms->ready;
  hali_ir_func_t *f = hali_ir_module_add_func(m, "globals$storage", 15);
  if (!f || !hali_ir_func_add_attr(f, HALI_ATTR_INITIALIZER,
                                   strlen(HALI_ATTR_INITIALIZER)))
    return hali_status_oom();
  hali_insn_list_t l = {0};
  uint32_t line = 0;
  uint32_t device = hali_pass_reg(f, HALI_TYPE_DEVICE, "device");
  uint32_t alloc = hali_pass_reg(f, HALI_TYPE_ALLOCATOR, "allocator");
  hali_pass_emit(&l, line, HALI_OP_HAL_DEVICE_GET, 1, hali_pr(device));
  hali_pass_emit(&l, line, HALI_OP_HAL_DEVICE_ALLOCATOR, 2, hali_pr(alloc),
                 hali_pr(device));
  uint32_t mem = hali_pass_reg(f, HALI_TYPE_I32, "device_local");
  uint32_t use = hali_pass_reg(f, HALI_TYPE_I32, "usage");
  uint32_t zero = hali_pass_reg(f, HALI_TYPE_I64, "zero");
  uint32_t zero32 = hali_pass_reg(f, HALI_TYPE_I32, "zero.i32");
  uint32_t one = hali_pass_reg(f, HALI_TYPE_I32, "one");
  uint32_t four = hali_pass_reg(f, HALI_TYPE_I32, "four");
  uint32_t none = hali_pass_reg(f, HALI_TYPE_FENCE, "none");
  hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(mem),
                 hali_pk(m, HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL));
  hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(use),
                 hali_pk(m, HALI_HAL_BUFFER_USAGE_TRANSFER |
                         HALI_HAL_BUFFER_USAGE_DISPATCH));
  hali_pass_emit(&l, line, HALI_OP_CONST_I64, 2, hali_pr(zero), hali_pk(m, 0));
  hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2,
                 hali_pr(zero32), hali_pk(m, 0));
  hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(one), hali_pk(m, 1));
  hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(four), hali_pk(m, 4));
  hali_pass_emit(&l, line, HALI_OP_HAL_FENCE_NULL, 1, hali_pr(none));
  for (uint32_t g = 0; g < nglobals; ++g) {
    if (ready[g] == UINT32_MAX) continue;
    const hali_ir_global_t *gl = &m->globals[g];
    if (gl->flags & HALI_GLOBAL_PARAMETER) {
      hali_pass_emit(&l, line, HALI_OP_GLOBAL_STORE_REF, 2,
                     hali_pref(HALI_IR_GLOBAL, ready[g]), hali_pr(none));
      continue;
    }
    uint64_t bytes = 0;
    uint32_t at;
    (void)hali_ir_xtype_static_bytes(&gl->xtype, &bytes, &at);
    uint32_t size = hali_pass_reg(f, HALI_TYPE_I64, "%s.size", gl->name);
    uint32_t buf = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s", gl->name);
    uint32_t cmd = hali_pass_reg(f, HALI_TYPE_COMMAND_BUFFER, "%s.zero",
                                 gl->name);
    uint32_t done = hali_pass_reg(f, HALI_TYPE_FENCE, "%s.ready", gl->name);
    hali_pass_emit(&l, line, HALI_OP_CONST_I64, 2, hali_pr(size),
                   hali_pk(m, (int64_t)bytes));
    hali_pass_emit(&l, line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5, hali_pr(buf),
                   hali_pr(alloc), hali_pr(mem), hali_pr(use), hali_pr(size));
    hali_pass_emit(&l, line, HALI_OP_GLOBAL_STORE_REF, 2,
                   hali_pref(HALI_IR_GLOBAL, g), hali_pr(buf));
    if (bytes) {
      /* Zeroed on the queue: the first load waits for it by fence. */
      uint32_t mode = hali_pass_reg(f, HALI_TYPE_I32, "one_shot");
      uint32_t cats = hali_pass_reg(f, HALI_TYPE_I32, "transfer");
      hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(mode),
                     hali_pk(m, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT));
      hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(cats),
                     hali_pk(m, HALI_HAL_COMMAND_CATEGORY_TRANSFER));
      hali_pass_emit(&l, line, HALI_OP_HAL_COMMAND_BUFFER_CREATE, 4,
                     hali_pr(cmd), hali_pr(device), hali_pr(mode),
                     hali_pr(cats));
      hali_pass_emit(&l, line, HALI_OP_HAL_COMMAND_BUFFER_FILL, 6,
                     hali_pr(cmd), hali_pr(buf), hali_pr(zero), hali_pr(size),
                     hali_pr(zero32), hali_pr(one));
      hali_pass_emit(&l, line, HALI_OP_HAL_COMMAND_BUFFER_FINALIZE, 1,
                     hali_pr(cmd));
      hali_pass_emit(&l, line, HALI_OP_HAL_FENCE_CREATE, 2, hali_pr(done),
                     hali_pr(device));
      hali_pass_emit(&l, line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 4,
                     hali_pr(device), hali_pr(none), hali_pr(done),
                     hali_pr(cmd));
      hali_pass_emit(&l, line, HALI_OP_GLOBAL_STORE_REF, 2,
                     hali_pref(HALI_IR_GLOBAL, ready[g]), hali_pr(done));
    } else {
      hali_pass_emit(&l, line, HALI_OP_GLOBAL_STORE_REF, 2,
                     hali_pref(HALI_IR_GLOBAL, ready[g]), hali_pr(none));
    }
  }
  if (ms->pool_offset) {
    /* The constant pool: one allocation, each pooled rodata at its
     * 64-byte aligned offset, uploaded by one command buffer. */
    uint32_t pool = hali_pass_reg(f, HALI_TYPE_BUFFER, "constants");
    uint32_t psize = hali_pass_reg(f, HALI_TYPE_I64, "constants.size");
    uint32_t cmem = hali_pass_reg(f, HALI_TYPE_I32, "constant_memory");
    uint32_t cuse = hali_pass_reg(f, HALI_TYPE_I32, "constant_usage");
    uint32_t mode = hali_pass_reg(f, HALI_TYPE_I32, "one_shot");
    uint32_t cats = hali_pass_reg(f, HALI_TYPE_I32, "transfer");
    uint32_t cmd = hali_pass_reg(f, HALI_TYPE_COMMAND_BUFFER, "upload");
    uint32_t done = hali_pass_reg(f, HALI_TYPE_FENCE, "constants.ready");
    hali_pass_emit(&l, line, HALI_OP_CONST_I64, 2, hali_pr(psize),
                   hali_pk(m, (int64_t)ms->pool_size));
    hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(cmem),
                   hali_pk(m, HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL));
    hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(cuse),
                   hali_pk(m, HALI_HAL_BUFFER_USAGE_CONSTANT |
                           HALI_HAL_BUFFER_USAGE_TRANSFER |
                           HALI_HAL_BUFFER_USAGE_DISPATCH));
    hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(mode),
                   hali_pk(m, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT));
    hali_pass_emit(&l, line, HALI_OP_CONST_I32, 2, hali_pr(cats),
                   hali_pk(m, HALI_HAL_COMMAND_CATEGORY_TRANSFER));
    hali_pass_emit(&l, line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5, hali_pr(pool),
                   hali_pr(alloc), hali_pr(cmem), hali_pr(cuse),
                   hali_pr(psize));
    hali_pass_emit(&l, line, HALI_OP_HAL_COMMAND_BUFFER_CREATE, 4,
                   hali_pr(cmd), hali_pr(device), hali_pr(mode),
                   hali_pr(cats));
    for (uint32_t k = 0; k < m->rodata_count; ++k) {
      if (ms->pool_offset[k] == UINT64_MAX || !m->rodata[k].size) continue;
      uint32_t off = hali_pass_reg(f, HALI_TYPE_I64, "%s.offset",
                                   m->rodata[k].name);
      uint32_t len = hali_pass_reg(f, HALI_TYPE_I64, "%s.size",
                                   m->rodata[k].name);
      hali_pass_emit(&l, line, HALI_OP_CONST_I64, 2, hali_pr(off),
                     hali_pk(m, (int64_t)ms->pool_offset[k]));
      hali_pass_emit(&l, line, HALI_OP_CONST_I64, 2, hali_pr(len),
                     hali_pk(m, (int64_t)m->rodata[k].size));
      hali_pass_emit(&l, line, HALI_OP_HAL_COMMAND_BUFFER_UPDATE, 6,
                     hali_pr(cmd), hali_pref(HALI_IR_RODATA, k), hali_pr(zero),
                     hali_pr(pool), hali_pr(off), hali_pr(len));
    }
    hali_pass_emit(&l, line, HALI_OP_HAL_COMMAND_BUFFER_FINALIZE, 1,
                   hali_pr(cmd));
    hali_pass_emit(&l, line, HALI_OP_HAL_FENCE_CREATE, 2, hali_pr(done),
                   hali_pr(device));
    hali_pass_emit(&l, line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 4,
                   hali_pr(device), hali_pr(none), hali_pr(done),
                   hali_pr(cmd));
    hali_pass_emit(&l, line, HALI_OP_GLOBAL_STORE_REF, 2,
                   hali_pref(HALI_IR_GLOBAL, ms->pool_global), hali_pr(pool));
    hali_pass_emit(&l, line, HALI_OP_GLOBAL_STORE_REF, 2,
                   hali_pref(HALI_IR_GLOBAL, ms->pool_ready), hali_pr(done));
  }
  if (ms->ro && ms->ro->n)
    hali_s2h_emit_recordings(m, f, &l, device, ms->ro);
  hali_pass_emit(&l, line, HALI_OP_RETURN, 0);
  (void)four;
  hali_ir_block_t *blk = hali_ir_func_add_block(f, "entry", 5);
  if (l.oom || !blk) {
    hali_pass_list_free(&l);
    return hali_status_oom();
  }
  hali_ir_block_take(blk, &l.b); /* instructions and operand chunks */
  /* Move it to the front: function indices in calls and exports shift. */
  hali_ir_func_t mine = m->funcs[m->func_count - 1];
  memmove(&m->funcs[1], &m->funcs[0],
          (m->func_count - 1) * sizeof(hali_ir_func_t));
  m->funcs[0] = mine;
  for (uint32_t fi = 0; fi < m->func_count; ++fi)
    for (uint32_t b = 0; b < m->funcs[fi].block_count; ++b)
      for (uint32_t i = 0; i < m->funcs[fi].blocks[b].insn_count; ++i) {
        hali_ir_insn_t *insn = &m->funcs[fi].blocks[b].insns[i];
        for (uint32_t k = 0; k < insn->operand_count; ++k)
          if (insn->operands[k].kind == HALI_IR_FUNC) insn->operands[k].v++;
      }
  for (uint32_t e = 0; e < m->executable_count; ++e)
    for (uint32_t k = 0; k < m->executables[e].export_count; ++k) {
      hali_ir_export_t *x = &m->executables[e].exports[k];
      if (x->function != UINT32_MAX) x->function++;
      if (x->count_function != UINT32_MAX) x->count_function++;
    }
  return HALI_OK;
}

static bool is_tensor_func(const hali_ir_func_t *f) {
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i)
      if (hali_op_info(f->blocks[b].insns[i].op)->flags & HALI_OPF_TENSOR)
        return true;
  for (uint32_t r = 0; r < f->reg_count; ++r)
    if (f->reg_types[r] == HALI_TYPE_TENSOR || f->reg_types[r] == HALI_TYPE_INDEX)
      return true;
  return false;
}

static hali_ir_global_t *add_global(hali_ir_module_t *m, const char *name,
                                    hali_type_t type, uint32_t flags) {
  hali_ir_global_t *g = hali_ir_module_add_global(m, name, strlen(name));
  if (g) {
    g->type = type;
    g->flags = flags;
  }
  return g;
}

hali_status_t hali_pass_stream_to_hal(hali_ir_module_t *m) {
  /* Tensor globals: each gets a !hal.fence global for the timepoint of its
   * last store; the global itself becomes the !hal.buffer of its storage
   * once every function is lowered. */
  uint32_t nglobals = m->global_count, ntensor = 0;
  module_state_t ms = {0};
  uint32_t *ready = hali_malloc((nglobals ? nglobals : 1) * sizeof(uint32_t));
  uint64_t *pool = hali_malloc((m->rodata_count ? m->rodata_count : 1) *
                          sizeof(uint64_t));
  hali_status_t s = HALI_OK;
  if (!ready || !pool) s = hali_status_oom();
  for (uint32_t g = 0; g < nglobals && !s; ++g) {
    ready[g] = UINT32_MAX;
    if (m->globals[g].type != HALI_TYPE_TENSOR) continue;
    char name[512];
    snprintf(name, sizeof(name), "%s$ready", m->globals[g].name);
    if (!add_global(m, name, HALI_TYPE_FENCE, HALI_GLOBAL_MUTABLE))
      s = hali_status_oom();
    ready[g] = m->global_count - 1;
    ntensor++;
  }
  /* The constant pool: every rodata a tensor-level function makes a
   * tensor.constant of, 64-byte aligned, in rodata order. */
  uint64_t at = 0;
  bool any = false;
  for (uint32_t k = 0; pool && k < m->rodata_count; ++k) pool[k] = UINT64_MAX;
  for (uint32_t fi = 0; fi < m->func_count && !s; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    for (uint32_t b = 0; b < f->block_count; ++b)
      for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
        const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
        if (insn->op == HALI_OP_TENSOR_CONSTANT)
          pool[insn->operands[1].v] = 0, any = true;
      }
  }
  for (uint32_t k = 0; any && !s && k < m->rodata_count; ++k) {
    if (pool[k] == UINT64_MAX) continue;
    at = (at + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN;
    pool[k] = at;
    if (m->rodata[k].size > INT64_MAX - at - SLAB_ALIGN)
      s = hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                           PASS ": module @%s: the constant pool passes "
                           "2^63-1 bytes at rodata @%s",
                           m->name, m->rodata[k].name);
    else
      at += m->rodata[k].size;
  }
  if (any && !s) {
    ms.pool_offset = pool;
    ms.pool_size = at ? at : 1;
    if (!add_global(m, "constants$pool", HALI_TYPE_BUFFER, 0) ||
        !add_global(m, "constants$ready", HALI_TYPE_FENCE, 0))
      s = hali_status_oom();
    ms.pool_global = m->global_count - 2;
    ms.pool_ready = m->global_count - 1;
  }
  ms.ready = ready;
  ro_state_t ro = {0};
  ro.first_global = m->global_count;
  ms.ro = &ro;
  for (uint32_t fi = 0; fi < m->func_count && !s; ++fi)
    if (is_tensor_func(&m->funcs[fi])) s = lower_func(m, fi, &ms);
  if (!s && ro.oom) s = hali_status_oom();
  /* The recordings' globals, at the indices their binds name. */
  for (uint32_t k = 0; k < ro.n && !s; ++k)
    if (m->global_count != ro.first_global + k ||
        !add_global(m, ro.names[k], HALI_TYPE_COMMAND_BUFFER,
                    HALI_GLOBAL_MUTABLE))
      s = m->global_count != ro.first_global + k
              ? hali_status_make(HALI_STATUS_INTERNAL,
                                 PASS ": a global was added while lowering")
              : hali_status_oom();
  if (!s && (ntensor || any || ro.n))
    s = add_storage_initializer(m, &ms, nglobals);
  hali_s2h_ro_free(&ro);
  if (!s)
    for (uint32_t g = 0; g < nglobals; ++g)
      if (ready[g] != UINT32_MAX) {
        /* The storage (the shape stays, for a parameter's check). */
        m->globals[g].type = HALI_TYPE_BUFFER;
        if (!(m->globals[g].flags & HALI_GLOBAL_PARAMETER)) {
          hali_free(m->globals[g].xtype.dims);
          memset(&m->globals[g].xtype, 0, sizeof(m->globals[g].xtype));
        }
      }
  hali_free(ready);
  hali_free(pool);
  return s;
}
