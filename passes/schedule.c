/* hali — schedule-execution, the analysis half of stream-to-hal
 * (doc/passes.md): each tensor's lifetime (imported, constant, returned,
 * aliased or transient), its liveness interval, its size, and its storage:
 * own buffers by lifetime, and one slab per region for the static-size
 * transients, packed by liveness interval (pack).  passes/stream_to_hal.c
 * emits the regions, command buffers and fences around it;
 * passes/stream_to_hal_int.h holds what the two share.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "passes/stream_to_hal_int.h"
#include "base/alloc.h"

uint32_t hali_s2h_root(const lw_t *w, uint32_t r) {
  for (int guard = 0; w->t[r].lifetime == LT_ALIAS && guard < 64; ++guard)
    r = w->t[r].alias;
  return r;
}

uint32_t hali_s2h_base_root(const lw_t *w, uint32_t r) {
  r = hali_s2h_root(w, r);
  for (int guard = 0; w->t[r].lifetime == LT_VIEW && guard < 64; ++guard)
    r = hali_s2h_root(w, w->t[r].alias);
  return r;
}

/* Records tensor |r|'s dims (|dyn| the dynamic ones in order) and size.
 * The size is checked: static parts at load (an error in w->err), dynamic
 * dims at run time when |check_dims| (negative, or a byte size past
 * 2^63-1, fail with OUT_OF_RANGE naming the tensor and the dimension; an
 * import's dims need none: the buffer view's creation checked them). */
void hali_s2h_set_shape(lw_t *w, uint32_t r, const hali_ir_operand_t *dyn,
                        bool check_dims) {
  /* A copy: adding registers below may move reg_xtypes. */
  hali_ir_xtype_t xs = w->f->reg_xtypes[r];
  int64_t dims[HALI_HAL_MAX_RANK];
  if (xs.rank > HALI_HAL_MAX_RANK) xs.rank = HALI_HAL_MAX_RANK;
  if (xs.rank) memcpy(dims, xs.dims, xs.rank * sizeof(int64_t));
  xs.dims = dims;
  const hali_ir_xtype_t *x = &xs;
  tinfo_t *t = &w->t[r];
  uint32_t k = 0;
  bool all_static = true;
  char *ts = NULL;
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (x->dims[d] >= 0) {
      t->dims[d] = hali_s2h_c64(w, x->dims[d]);
    } else {
      t->dims[d] = dyn[k++].v;
      all_static = false;
    }
  }
  /* The structural check rejects types past 2^64 bytes; sizes are i64. */
  uint64_t sb64 = 0;
  uint32_t at = 0;
  if (!hali_ir_xtype_static_bytes(x, &sb64, &at) || sb64 > INT64_MAX) {
    hali_strbuf_t sb = {0};
    hali_ir_xtype_print(&sb, x);
    ts = hali_strbuf_take(&sb);
    char rn[64];
    w->err = hali_status_make(
        HALI_STATUS_OUT_OF_RANGE,
        PASS ": @%s: %s (%s) is larger than 2^63-1 bytes", w->f->name,
        hali_ir_reg_name(w->f, r, rn, sizeof(rn)), ts ? ts : "?");
    hali_free(ts);
    return;
  }
  int64_t static_bytes = (int64_t)sb64;
  t->static_bytes = all_static ? static_bytes : -1;
  t->size = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.size", hali_s2h_rname(w, r));
  if (all_static) {
    hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2, hali_pr(t->size),
                   hali_pk(w->m, static_bytes));
    return;
  }
  hali_strbuf_t sb = {0};
  hali_ir_xtype_print(&sb, x);
  ts = hali_strbuf_take(&sb);
  /* static_bytes is the element size times the static dims; each dynamic
   * dim D must be >= 0 and keep acc * D <= INT64_MAX, i.e. acc <=
   * INT64_MAX / max(D, 1). */
  uint32_t acc = hali_s2h_c64(w, static_bytes);
  uint32_t zero = hali_s2h_c64(w, 0), one = hali_s2h_c64(w, 1),
           max = hali_s2h_c64(w, INT64_MAX);
  const char *n = hali_s2h_rname(w, r);
  char rn[64]; /* |r| in messages */
  hali_ir_reg_name(w->f, r, rn, sizeof(rn));
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (x->dims[d] >= 0) continue;
    uint32_t dim = t->dims[d];
    if (!check_dims) {
      hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(t->size),
                     hali_pr(acc), hali_pr(dim));
      acc = t->size;
      continue;
    }
    uint32_t neg = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.dim%u_negative", n, d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_LT_S_I64, 3, hali_pr(neg), hali_pr(dim),
                   hali_pr(zero));
    hali_s2h_fail_if(w, neg, "%s (%s): dimension %u is negative", rn,
                     ts ? ts : "?", d);
    uint32_t div = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.dim%u_limit", n, d);
    uint32_t big = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.dim%u_overflows", n, d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_MAX_U_I64, 3, hali_pr(div), hali_pr(dim),
                   hali_pr(one));
    hali_pass_emit(&w->pre, w->line, HALI_OP_DIV_U_I64, 3, hali_pr(div), hali_pr(max),
                   hali_pr(div));
    hali_pass_emit(&w->pre, w->line, HALI_OP_GT_U_I64, 3, hali_pr(big), hali_pr(acc),
                   hali_pr(div));
    hali_s2h_fail_if(w, big,
                     "%s (%s) is larger than 2^63-1 bytes (at dimension %u)",
                     rn, ts ? ts : "?", d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(t->size),
                   hali_pr(acc), hali_pr(dim));
    acc = t->size;
  }
  hali_free(ts);
}

static void own_buffer(lw_t *w, uint32_t r, uint32_t mem, uint32_t use);

/* Gives tensor |r| storage according to its lifetime. */
void hali_s2h_allocate(lw_t *w, uint32_t r) {
  tinfo_t *t = &w->t[r];
  t->defined = true;
  uint32_t mem, use;
  switch (t->lifetime) {
  case LT_ALIAS:
  case LT_VIEW: /* a subspan, made by the slice's lowering */
  case LT_GLOBAL: /* the global's storage (tensor.global.load) */
    return;
  case LT_CONSTANT:
    /* A constant's storage is a fresh buffer per invocation, filled by
     * command_buffer.update from rodata.  No kernel writes it (a tie to a
     * constant writes a copy: copy_on_write.c), so it is DEVICE_LOCAL with
     * CONSTANT usage, unless it is returned to the caller, who maps it:
     * then it gets the returned bits. */
    if (t->const_returned) {
      mem = HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE | HALI_HAL_MEMORY_TYPE_HOST_VISIBLE;
      use = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_MAPPING;
    } else {
      mem = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL;
      use = HALI_HAL_BUFFER_USAGE_CONSTANT | HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH;
    }
    break;
  case LT_RETURNED:
    mem = HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE | HALI_HAL_MEMORY_TYPE_HOST_VISIBLE;
    use = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_MAPPING;
    break;
  case LT_CARRY:
    /* The variable's spare buffer when it fits, else a fresh one. */
    hali_s2h_reuse(w, r, w->spare[t->carry], t->size);
    return;
  default:
    /* Static-size transients wait for the region's slab (pack). */
    if (t->static_bytes >= 0) {
      w->pending[w->npending++] = r;
      return;
    }
    mem = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_TRANSIENT;
    use = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH;
    break;
  }
  own_buffer(w, r, mem, use);
}

/* Buffer register |r| = |spare| when it is exactly |size| bytes, else a
 * fresh buffer: the storage of a variable (memory the caller may map). */
void hali_s2h_reuse(lw_t *w, uint32_t r, uint32_t spare, uint32_t size) {
  uint32_t cm = hali_s2h_c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE |
                                    HALI_HAL_MEMORY_TYPE_HOST_VISIBLE),
           cu = hali_s2h_c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER |
                                    HALI_HAL_BUFFER_USAGE_DISPATCH |
                                    HALI_HAL_BUFFER_USAGE_MAPPING);
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_REUSE, 6, hali_pr(r),
                 hali_pr(w->allocator), hali_pr(spare), hali_pr(cm),
                 hali_pr(cu), hali_pr(size));
}

/* Buffer register |r| = |size| (an i64 register) bytes of |mem| / |use|.
 * A transient made in a block after the entry (which may run many times:
 * a loop body) reuses the buffer its site made last time when the size is
 * the same: every region of such a block waits for %timeline, all the
 * work before it, so the last use of that buffer is done (doc/passes.md,
 * "Control flow").  The site's register starts empty, at the entry's end. */
static void alloc_buffer(lw_t *w, uint32_t r, uint32_t mem, uint32_t use,
                         uint32_t size) {
  uint32_t cm = hali_s2h_c32(w, mem), cu = hali_s2h_c32(w, use);
  if (!(mem & HALI_HAL_MEMORY_TYPE_TRANSIENT) || !w->cfg || !w->cfg->multi ||
      w->block == 0) {
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5,
                   hali_pr(r), hali_pr(w->allocator), hali_pr(cm), hali_pr(cu),
                   hali_pr(size));
    return;
  }
  uint32_t keep = hali_pass_reg(w->f, HALI_TYPE_BUFFER, "%s.kept",
                                hali_s2h_rname(w, r));
  uint32_t im = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.kept_memory",
                              hali_s2h_rname(w, r)),
           iu = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.kept_usage",
                              hali_s2h_rname(w, r)),
           iz = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.kept_size",
                              hali_s2h_rname(w, r));
  hali_pass_emit(&w->init, w->line, HALI_OP_CONST_I32, 2, hali_pr(im),
                 hali_pk(w->m, mem));
  hali_pass_emit(&w->init, w->line, HALI_OP_CONST_I32, 2, hali_pr(iu),
                 hali_pk(w->m, use));
  hali_pass_emit(&w->init, w->line, HALI_OP_CONST_I64, 2, hali_pr(iz),
                 hali_pk(w->m, 0));
  hali_pass_emit(&w->init, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5,
                 hali_pr(keep), hali_pr(w->allocator), hali_pr(im),
                 hali_pr(iu), hali_pr(iz));
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_REUSE, 6, hali_pr(r),
                 hali_pr(w->allocator), hali_pr(keep), hali_pr(cm), hali_pr(cu),
                 hali_pr(size));
  hali_pass_emit(&w->pre, w->line, HALI_OP_MOV_REF, 2, hali_pr(keep),
                 hali_pr(r));
}

static void own_buffer(lw_t *w, uint32_t r, uint32_t mem, uint32_t use) {
  alloc_buffer(w, r, mem, use, w->t[r].size);
}

static bool intervals_overlap(const tinfo_t *a, const tinfo_t *b) {
  return a->def <= b->last && b->def <= a->last;
}

/* Storage for the transients of the region being closed at w->index.
 * Those whose last use is inside the region (before w->index) share one
 * slab: each gets the lowest 64-aligned offset whose bytes no value with
 * an overlapping liveness interval uses (largest first, then in order of
 * definition), and becomes a subspan of the slab.  A transient still read
 * after the region gets its own buffer. */
void hali_s2h_pack(lw_t *w) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < w->npending; ++k) {
    uint32_t r = w->pending[k];
    if (w->t[r].last < w->index)
      w->pending[n++] = r;
    else
      own_buffer(w, r, HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_TRANSIENT,
                 HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH);
  }
  w->npending = 0;
  if (!n) return;
  /* Placement order: size descending, then definition (stable). */
  uint32_t *order = w->pending + n; /* room: pending holds nregs + 1 twice */
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t j = k;
    while (j > 0) {
      const tinfo_t *a = &w->t[order[j - 1]], *b = &w->t[w->pending[k]];
      if (a->static_bytes > b->static_bytes ||
          (a->static_bytes == b->static_bytes && a->def <= b->def))
        break;
      order[j] = order[j - 1];
      --j;
    }
    order[j] = w->pending[k];
  }
  int64_t *off = hali_malloc(n * sizeof(int64_t));
  if (!off) {
    w->pre.oom = true;
    return;
  }
  int64_t total = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const tinfo_t *t = &w->t[order[k]];
    int64_t o = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (uint32_t j = 0; j < k; ++j) {
        const tinfo_t *u = &w->t[order[j]];
        if (!intervals_overlap(t, u)) continue;
        /* Sizes are < 2^48 (the structural check), offsets are checked
         * below, so these sums do not wrap. */
        if (o < off[j] + u->static_bytes && off[j] < o + t->static_bytes) {
          o = (off[j] + u->static_bytes + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN;
          moved = true;
        }
      }
    }
    off[k] = o;
    int64_t end;
    if (__builtin_add_overflow(o, t->static_bytes, &end) || end > INT64_MAX / 2) {
      if (!w->err)
        w->err = hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                                  PASS ": @%s: the transients of one region need "
                                  "more than 2^62 bytes",
                                  w->f->name);
      hali_free(off);
      return;
    }
    if (end > total) total = end;
  }
  uint32_t slab = hali_pass_reg(w->f, HALI_TYPE_BUFFER, "slab");
  uint32_t cm = hali_s2h_c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL |
                                    HALI_HAL_MEMORY_TYPE_TRANSIENT);
  uint32_t cu = hali_s2h_c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER |
                                    HALI_HAL_BUFFER_USAGE_DISPATCH);
  uint32_t size = hali_s2h_c64(w, total);
  (void)cm;
  (void)cu;
  alloc_buffer(w, slab,
               HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_TRANSIENT,
               HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH,
               size);
  /* Subspans in order of definition (pending order). */
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t r = w->pending[k], j = 0;
    while (order[j] != r) ++j;
    uint32_t o = hali_s2h_c64(w, off[j]);
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_SUBSPAN, 4, hali_pr(r),
                   hali_pr(slab), hali_pr(o), hali_pr(w->t[r].size));
  }
  hali_free(off);
}

/* Is tensor |a| read by a tensor op at or after the one that writes |v|
 * (other than the overwrite of |v| into |a|)?  Then |v| cannot be produced
 * in |a|'s storage: the reader (or the producer itself, e.g. a matmul
 * reading |a|) would see it half-written. */
static bool read_after_def(const hali_ir_func_t *f, uint32_t v, uint32_t a) {
  bool after = false;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      if (!(hali_op_info(insn->op)->flags & HALI_OPF_TENSOR)) continue;
      for (uint32_t k = 0; k < insn->operand_count && !after; ++k)
        after = insn->operands[k].kind == HALI_IR_REG &&
                insn->operands[k].v == v && hali_ir_operand_is_write(insn, k);
      if (!after || (insn->op == HALI_OP_TENSOR_OVERWRITE &&
                     insn->operands[0].v == v))
        continue;
      for (uint32_t k = 0; k < insn->operand_count; ++k)
        if (insn->operands[k].kind == HALI_IR_REG &&
            insn->operands[k].v == a && !hali_ir_operand_is_write(insn, k))
          return true;
    }
  return false;
}

/* Can the slice at |i| of |blk| be a view of its source's storage, with
 * no copy?  When it is one contiguous run (decided from static shapes),
 * its result is only read (not returned, not given to a call or stored to
 * a global: those keep a copy of their own), and its source's storage is
 * not a transient (a slab's subspans are made when the region closes,
 * after this op), is not overwritten or given to a call (a callee or an
 * overwrite could write it while the view is read), and, for a global's,
 * is not stored after the slice. */
static bool slice_is_view(const lw_t *w, const hali_ir_block_t *blk,
                          uint32_t i) {
  const hali_ir_func_t *f = w->f;
  const hali_ir_operand_t *o = blk->insns[i].operands;
  uint32_t r = o[0].v, src = o[1].v;
  if (w->t[r].lifetime != LT_TRANSIENT) return false;
  const hali_ir_xtype_t *bx = &f->reg_xtypes[src], *sx = &f->reg_xtypes[r];
  uint32_t rank = bx->rank;
  if (blk->insns[i].operand_count < 2 + rank) return false;
  /* The first dimension that is not whole, and one run before it. */
  uint32_t k = rank ? rank - 1 : 0;
  while (k > 0 && o[2 + k].kind == HALI_IR_IMM &&
         hali_ir_imm_small(&o[2 + k]) == 0 &&
         bx->dims[k] >= 0 && bx->dims[k] == sx->dims[k])
    --k;
  for (uint32_t d = 0; d < k; ++d)
    if (sx->dims[d] != 1) return false;
  uint32_t root = hali_s2h_base_root(w, src);
  uint8_t lt = w->t[root].lifetime;
  if (lt != LT_IMPORTED && lt != LT_CONSTANT && lt != LT_GLOBAL &&
      lt != LT_RETURNED)
    return false;
  for (uint32_t j = 0; j < blk->insn_count; ++j) {
    const hali_ir_insn_t *u = &blk->insns[j];
    const hali_ir_operand_t *q = u->operands;
    if (hali_pass_is_tensor_call(w->m, u)) {
      for (uint32_t a = 1; a < u->operand_count; ++a)
        if (q[a].kind == HALI_IR_REG && q[a].v < w->nregs &&
            f->reg_types[q[a].v] == HALI_TYPE_TENSOR &&
            (hali_s2h_base_root(w, q[a].v) == root ||
             hali_s2h_root(w, q[a].v) == r))
          return false;
      continue;
    }
    switch (u->op) {
    case HALI_OP_TENSOR_OVERWRITE:
      /* (One whose value is already in the target's storage writes
       * nothing.) */
      if (hali_s2h_root(w, q[0].v) == hali_s2h_root(w, q[1].v)) break;
      if (hali_s2h_base_root(w, q[1].v) == root || hali_s2h_root(w, q[0].v) == r)
        return false;
      break;
    case HALI_OP_TENSOR_GLOBAL_STORE:
      if (hali_s2h_root(w, q[1].v) == r) return false;
      if (j > i && lt == LT_GLOBAL && w->t[root].global == q[0].v) return false;
      break;
    case HALI_OP_TENSOR_EXPORT:
    case HALI_OP_TENSOR_TRACE:
      break; /* an export of a view made it LT_RETURNED already */
    default:
      break;
    }
  }
  return true;
}

/* How each block's last version of a variable becomes its value: in place
 * (the version lives in the variable's buffer already), carried (a fresh
 * value of the block, made in the spare buffer instead), or a copy into
 * the spare buffer (any other storage: an import, a constant, a view, a
 * call's result, another variable's buffer). */
static void decide_fins(lw_t *w) {
  const hali_tcfg_t *g = w->cfg;
  for (uint32_t b = 0; b < g->nblocks; ++b)
    for (uint32_t k = g->fin_at[b]; k < g->fin_at[b + 1]; ++k) {
      uint32_t v = g->fin[k][0], last = g->fin[k][1];
      uint32_t root = hali_s2h_root(w, last);
      tinfo_t *t = &w->t[root];
      if (root == v) {
        w->fin_kind[k] = FIN_IN_PLACE;
      } else if (root >= g->nregs || g->is_var[root] ||
                 (t->lifetime != LT_TRANSIENT && t->lifetime != LT_RETURNED)) {
        w->fin_kind[k] = FIN_COPY;
      } else {
        t->lifetime = LT_CARRY;
        t->carry = v;
        w->fin_kind[k] = FIN_CARRY;
      }
    }
}

/* Lifetimes and single assignment (variables were renamed into versions
 * by passes/tensor_cfg.c). */
hali_status_t hali_s2h_analyse(lw_t *w) {
  hali_ir_func_t *f = w->f;
  for (uint32_t r = 0; w->cfg && w->cfg->multi && r < w->nregs &&
                       r < w->cfg->nregs; ++r)
    if (w->cfg->is_var[r]) w->t[r].lifetime = LT_VAR;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      const hali_op_info_t *info = hali_op_info(insn->op);
      bool tcall = hali_pass_is_tensor_call(w->m, insn);
      if (tcall) {
        /* A call of another tensor-level function: in the tensor block;
         * its tensor results are single-assignment values in the storage
         * the callee returns (imported), or, tied to a mutable parameter,
         * in the argument's storage. */
        const hali_ir_func_t *c = &w->m->funcs[insn->operands[0].v];
        for (uint32_t k = 1 + insn->aux; k < insn->operand_count; ++k) {
          uint32_t r = insn->operands[k].v;
          if (f->reg_types[r] != HALI_TYPE_TENSOR) continue;
          char rn[64];
          if (++w->t[r].writes > 1)
            return hali_pass_error(PASS, w->m, f, insn, i,
                                   "tensor register %s is written twice: "
                                   "tensor values are single-assignment",
                                   hali_ir_reg_name(f, r, rn, sizeof(rn)));
          uint32_t res = k - 1 - insn->aux;
          int32_t tie = c->result_ties && res < c->result_count
                            ? c->result_ties[res]
                            : -1;
          if (tie >= 0 && (uint32_t)tie < insn->aux) {
            w->t[r].lifetime = LT_ALIAS;
            w->t[r].alias = insn->operands[1 + tie].v;
          } else {
            w->t[r].lifetime = LT_IMPORTED;
          }
        }
        continue;
      }
      if (!(info->flags & HALI_OPF_TENSOR)) {
        for (uint32_t k = 0; k < insn->operand_count; ++k)
          if (insn->operands[k].kind == HALI_IR_REG &&
              f->reg_types[insn->operands[k].v] == HALI_TYPE_TENSOR)
            return hali_pass_error(PASS, w->m, f, insn, i,
                                   "%s cannot take a tensor (only tensor ops "
                                   "and the return of a tensor-level function)",
                                   info->name);
        continue;
      }
      const hali_ir_operand_t *o = insn->operands;
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        if (!hali_ir_operand_is_write(insn, k)) continue;
        uint32_t r = o[k].v;
        if (f->reg_types[r] != HALI_TYPE_TENSOR) continue;
        char rn[64];
        if (++w->t[r].writes > 1)
          return hali_pass_error(PASS, w->m, f, insn, i,
                                 "tensor register %s is written twice: "
                                 "tensor values are single-assignment",
                                 hali_ir_reg_name(f, r, rn, sizeof(rn)));
        w->t[r].lifetime = LT_TRANSIENT;
      }
      switch (insn->op) {
      case HALI_OP_TENSOR_IMPORT: w->t[o[0].v].lifetime = LT_IMPORTED; break;
      case HALI_OP_TENSOR_CONSTANT: w->t[o[0].v].lifetime = LT_CONSTANT; break;
      case HALI_OP_TENSOR_RESHAPE: /* the same bytes */
        w->t[o[0].v].lifetime = LT_ALIAS;
        w->t[o[0].v].alias = o[1].v;
        break;
      case HALI_OP_TENSOR_UPDATE: /* the target's storage (copy-on-write
                                     gave it a copy when it must keep its
                                     value) */
        w->t[o[0].v].lifetime = LT_ALIAS;
        w->t[o[0].v].alias = o[2].v;
        break;
      case HALI_OP_TENSOR_GLOBAL_LOAD:
        w->t[o[0].v].lifetime = LT_GLOBAL;
        w->t[o[0].v].global = o[1].v;
        break;
      case HALI_OP_TENSOR_DISPATCH: {
        hali_ir_dispatch_t dl = hali_ir_dispatch(insn);
        for (uint32_t k = 0; k < dl.nresults; ++k) {
          int64_t tie = hali_ir_imm(w->m, &o[dl.ties + k]);
          if (tie >= 0) {
            w->t[o[dl.results + k].v].lifetime = LT_ALIAS;
            w->t[o[dl.results + k].v].alias = o[dl.operands + tie].v;
          }
        }
        break;
      }
      default: break;
      }
    }
  /* Escapes: exported values are returned to the caller; a value
   * overwritten into a mutable argument is produced in its storage. */
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      const hali_ir_operand_t *o = insn->operands;
      if (hali_pass_is_tensor_call(w->m, insn)) {
        /* A tensor argument of a call is imported by the callee, which
         * asserts DEVICE_VISIBLE storage: a transient (device-local) gets
         * the returned bits instead. */
        for (uint32_t k = 1; k <= insn->aux && k < insn->operand_count; ++k) {
          if (o[k].kind != HALI_IR_REG || o[k].v >= w->nregs ||
              f->reg_types[o[k].v] != HALI_TYPE_TENSOR)
            continue;
          uint32_t r = hali_s2h_root(w, o[k].v);
          if (w->t[r].lifetime == LT_TRANSIENT) w->t[r].lifetime = LT_RETURNED;
        }
      } else if (insn->op == HALI_OP_TENSOR_EXPORT) {
        uint32_t r = hali_s2h_root(w, o[1].v);
        if (w->t[r].lifetime == LT_TRANSIENT) w->t[r].lifetime = LT_RETURNED;
        if (w->t[r].lifetime == LT_CONSTANT) w->t[r].const_returned = true;
      } else if (hali_pass_is_tensor_call(w->m, insn)) {
        /* A tensor argument of a call leaves as a view that the callee
         * imports, and an import asserts DEVICE_VISIBLE: a transient
         * argument gets the returned storage instead of the slab's
         * device-local memory (sh_call_transient). */
        for (uint32_t k = 0; k < insn->aux; ++k) {
          if (o[1 + k].kind != HALI_IR_REG ||
              f->reg_types[o[1 + k].v] != HALI_TYPE_TENSOR)
            continue;
          uint32_t r = hali_s2h_root(w, o[1 + k].v);
          if (w->t[r].lifetime == LT_TRANSIENT) w->t[r].lifetime = LT_RETURNED;
        }
      } else if (insn->op == HALI_OP_TENSOR_OVERWRITE) {
        uint32_t v = o[0].v;
        if (w->t[v].lifetime == LT_TRANSIENT && v != o[1].v &&
            !read_after_def(f, v, o[1].v)) {
          w->t[v].lifetime = LT_ALIAS;
          w->t[v].alias = o[1].v;
        }
      }
    }
  /* Slices that can be views (in order, so a slice of a view is one). */
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      if (insn->op == HALI_OP_TENSOR_SLICE && slice_is_view(w, &f->blocks[b], i)) {
        w->t[insn->operands[0].v].lifetime = LT_VIEW;
        w->t[insn->operands[0].v].alias = insn->operands[1].v;
      }
    }
  if (w->cfg && w->cfg->multi) decide_fins(w);
  return HALI_OK;
}

/* Liveness intervals of storage roots, in positions of the tensor block:
 * an op is at its index, except that the ops of a `concurrent {}` group
 * run together, so they define at the group's start and use until its
 * end.  A root's interval runs from its definition to the last op that
 * reads or writes it or any alias of it. */
void hali_s2h_liveness(lw_t *w) {
  hali_ir_func_t *f = w->f;
  for (uint32_t b = 0; b < f->block_count; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    bool conc = false;
    uint32_t start = 0;
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      if (!(hali_op_info(insn->op)->flags & HALI_OPF_TENSOR) &&
          !hali_pass_is_tensor_call(w->m, insn))
        continue;
      if (insn->op == HALI_OP_TENSOR_CONCURRENT) {
        conc = true;
        start = i;
        continue;
      }
      uint32_t dpos = i, upos = i;
      if (insn->op == HALI_OP_TENSOR_END) {
        conc = false;
        continue;
      }
      if (conc) {
        dpos = start;
        for (uint32_t j = i + 1; j < blk->insn_count; ++j)
          if (blk->insns[j].op == HALI_OP_TENSOR_END) {
            upos = j;
            break;
          }
      }
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (o->kind != HALI_IR_REG || o->v >= w->nregs ||
            f->reg_types[o->v] != HALI_TYPE_TENSOR)
          continue;
        uint32_t r = hali_s2h_root(w, o->v);
        if (hali_ir_operand_is_write(insn, k) && r == o->v) w->t[r].def = dpos;
        if (upos > w->t[r].last) w->t[r].last = upos;
      }
    }
  }
}
