/* hali — copy-on-write for tied dispatch results (doc/passes.md, "Value
 * semantics").
 *
 * A dispatch result tied to an operand (`-> %x as T`) is written in the
 * operand's storage.  That is only right when the function owns that
 * storage and nothing reads the operand's value again: otherwise the
 * kernel would change a caller's read-only argument, a module constant, or
 * a value a later op still reads.  For each such tie this rewrite inserts
 * `%x.copy = tensor.clone %x` and ties the result to the copy instead, so
 * the kernel writes fresh storage; stream-to-hal then lowers the clone to a
 * copy_buffer like any other.  Owned and dead operands keep the in-place
 * write.
 *
 * Storage classes: an imported argument, a constant and every fresh value
 * (dispatch result, splat, clone) start a class; a tied result joins its
 * operand's class.  A tie needs a copy when its operand's class is an
 * immutable argument or a constant, or when a value of the class (other
 * than the result) is read after the dispatch, by another operand of the
 * dispatch, or anywhere in the same `concurrent {}` group (those ops run
 * together).  A `tensor.overwrite %v, %a` whose %v is not already in %a's
 * class writes %a's storage (from %v's definition on, when stream-to-hal
 * produces a fresh %v there): if a value of that class other than %a is
 * read after that, the tie that put the value there is forced to copy and
 * the block is analysed again (each round forces one more tie, so this
 * ends).
 *
 * A tensor global's loaded value (tensor.global.load) is in the global's
 * storage, shared with every later load: a tie to it copies, unless the
 * result is the next value the block stores to that same global (and
 * nothing reads the old value after the dispatch), which then updates the
 * global in place without a copy.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_util.h"
#include "base/alloc.h"
#include "passes/pipeline.h"
#include "passes/tensor_cfg.h"

#define PASS "stream-to-hal"

enum { CLASS_OWNED = 0, CLASS_ARGUMENT, CLASS_CONSTANT, CLASS_GLOBAL };

typedef struct {
  const hali_ir_module_t *m;
  hali_ir_func_t *f;
  uint32_t n;        /* registers covered by the arrays below */
  uint32_t *root;    /* storage class (its first register); UINT32_MAX */
  uint32_t *last;    /* last position that reads the register (+1; 0 none) */
  uint32_t *def;     /* position of the definition */
  uint8_t *origin;   /* per root: CLASS_* */
  uint32_t *maxread; /* per root: latest read (+1) of a member other than the root */
  uint32_t *maxby;   /* per root: the member with that read */
  uint8_t *force;    /* per register: its tie must copy */
  uint32_t *global;  /* per root of CLASS_GLOBAL: the global loaded */
  const hali_tcfg_t *cfg; /* across blocks: what enters and outlives each */
} cow_t;

/* Is |r|, the result of the dispatch at |i|, the value the block next
 * stores to global |g| (`tensor.global.store @g, %r`), with no load of
 * |g| in between?  Then a tie to |g|'s loaded value may write the
 * global's storage in place: the old value is not read again here. */
static bool stored_back(const hali_ir_block_t *blk, uint32_t i, uint32_t r,
                        uint32_t g) {
  for (uint32_t j = i + 1; j < blk->insn_count; ++j) {
    const hali_ir_insn_t *insn = &blk->insns[j];
    if (insn->op == HALI_OP_TENSOR_GLOBAL_LOAD && insn->operands[1].v == g)
      return false;
    if (insn->op == HALI_OP_TENSOR_GLOBAL_STORE && insn->operands[0].v == g)
      return insn->operands[1].kind == HALI_IR_REG && insn->operands[1].v == r;
  }
  return false;
}

static bool is_tensor(const cow_t *c, const hali_ir_operand_t *o) {
  return o->kind == HALI_IR_REG && o->v < c->n &&
         c->f->reg_types[o->v] == HALI_TYPE_TENSOR;
}

/* Does operand |k| of |insn| read a tensor value?  Its role in the op's
 * signature says: the target of an overwrite (role 'm') is written in
 * place, not read. */
static bool reads(const cow_t *c, const hali_ir_insn_t *insn, uint32_t k) {
  return is_tensor(c, &insn->operands[k]) &&
         hali_ir_operand_role(insn, k) == HALI_ROLE_READ;
}

static void join(cow_t *c, uint32_t r, uint32_t root, uint32_t pos) {
  c->root[r] = root;
  c->def[r] = pos;
  if (r != root && c->last[r] > c->maxread[root]) {
    c->maxread[root] = c->last[r];
    c->maxby[root] = r;
  }
}

/* Is a value of |root|'s class, other than |result|, read by another
 * operand of the dispatch at |i|, or by another op of its concurrent
 * group [g0, g1)? */
static bool read_nearby(const cow_t *c, const hali_ir_block_t *blk, uint32_t i,
                        uint32_t tie_slot, uint32_t root, uint32_t g0,
                        uint32_t g1) {
  const hali_ir_insn_t *d = &blk->insns[i];
  for (uint32_t k = 0; k < d->operand_count; ++k)
    if (k != tie_slot && reads(c, d, k) &&
        c->root[d->operands[k].v] == root)
      return true;
  for (uint32_t j = g0; j < g1; ++j) {
    if (j == i) continue;
    const hali_ir_insn_t *insn = &blk->insns[j];
    for (uint32_t k = 0; k < insn->operand_count; ++k)
      if (reads(c, insn, k) && c->root[insn->operands[k].v] == root)
        return true;
  }
  return false;
}

/* One forward walk over |blk| deciding which ties copy (|copy|, per
 * register).  Returns true when an overwrite forced another tie to copy
 * (walk again). */
static bool decide(cow_t *c, uint32_t b, const hali_ir_block_t *blk,
                   uint8_t *copy) {
  const hali_ir_func_t *f = c->f;
  for (uint32_t r = 0; r < c->n; ++r) {
    c->root[r] = UINT32_MAX;
    c->maxread[r] = 0;
    c->maxby[r] = UINT32_MAX;
    c->origin[r] = CLASS_OWNED;
    copy[r] = 0;
  }
  /* Tensors written in an earlier block start their own class here: a
   * variable's buffers are the function's own; an import or a constant
   * keeps its class. */
  const hali_tcfg_t *g = c->cfg;
  for (uint32_t k = g && g->multi ? g->in_at[b] : 0;
       g && g->multi && k < g->in_at[b + 1]; ++k) {
    uint32_t r = g->in[k];
    if (r >= c->n) continue;
    join(c, r, r, 0);
    if (g->is_var[r]) continue;
    if (g->def_op[r] == HALI_OP_TENSOR_CONSTANT) {
      c->origin[r] = CLASS_CONSTANT;
    } else if (g->def_op[r] == HALI_OP_TENSOR_IMPORT) {
      uint32_t p = g->def_arg[r];
      bool mut = p < f->param_count && f->param_flags &&
                 (f->param_flags[p] & HALI_PARAM_MUTABLE);
      c->origin[r] = mut ? CLASS_OWNED : CLASS_ARGUMENT;
    }
  }
  uint32_t g0 = 0, g1 = 0; /* the concurrent group around i, if any */
  for (uint32_t i = 0; i < blk->insn_count; ++i) {
    const hali_ir_insn_t *insn = &blk->insns[i];
    const hali_ir_operand_t *o = insn->operands;
    if (insn->op == HALI_OP_TENSOR_CONCURRENT) {
      g0 = i;
      for (g1 = i + 1; g1 < blk->insn_count; ++g1)
        if (blk->insns[g1].op == HALI_OP_TENSOR_END) break;
      continue;
    }
    if (i >= g1) g0 = g1 = 0;
    switch (insn->op) {
    case HALI_OP_TENSOR_IMPORT: {
      uint32_t r = o[0].v, p = o[1].v;
      bool mut = p < f->param_count && f->param_flags &&
                 (f->param_flags[p] & HALI_PARAM_MUTABLE);
      join(c, r, r, i);
      c->origin[r] = mut ? CLASS_OWNED : CLASS_ARGUMENT;
      break;
    }
    case HALI_OP_TENSOR_CONSTANT:
      join(c, o[0].v, o[0].v, i);
      c->origin[o[0].v] = CLASS_CONSTANT;
      break;
    case HALI_OP_TENSOR_GLOBAL_LOAD:
      if (o[0].v >= c->n) break;
      join(c, o[0].v, o[0].v, i);
      c->origin[o[0].v] = CLASS_GLOBAL;
      c->global[o[0].v] = o[1].v;
      break;
    case HALI_OP_TENSOR_SPLAT:
    case HALI_OP_TENSOR_CLONE:
    case HALI_OP_TENSOR_ALL_REDUCE: /* collectives write fresh storage */
    case HALI_OP_TENSOR_ALL_GATHER:
    case HALI_OP_TENSOR_REDUCE_SCATTER:
    case HALI_OP_TENSOR_ALL_TO_ALL:
    case HALI_OP_TENSOR_RECV:
      join(c, o[0].v, o[0].v, i);
      break;
    case HALI_OP_TENSOR_SLICE: /* may be a view of its source's storage */
    case HALI_OP_TENSOR_RESHAPE: /* the same storage */
      if (o[0].v < c->n && o[1].v < c->n && c->root[o[1].v] != UINT32_MAX)
        join(c, o[0].v, c->root[o[1].v], i);
      break;
    case HALI_OP_CALL: {
      /* A tensor call's results: the callee's returned storage, which may
       * be an argument passed through, so read-only here (a tie to one
       * copies); a result tied to a mutable parameter is the argument's
       * storage. */
      if (!hali_pass_is_tensor_call(c->m, insn)) break;
      const hali_ir_func_t *callee = &c->m->funcs[o[0].v];
      for (uint32_t k = 1 + insn->aux; k < insn->operand_count; ++k) {
        uint32_t r = o[k].v, res = k - 1 - insn->aux;
        if (!is_tensor(c, &o[k])) continue;
        int32_t tie = callee->result_ties && res < callee->result_count
                          ? callee->result_ties[res]
                          : -1;
        uint32_t a = tie >= 0 && (uint32_t)tie < insn->aux ? o[1 + tie].v
                                                           : UINT32_MAX;
        if (a < c->n && c->root[a] != UINT32_MAX) {
          join(c, r, c->root[a], i);
        } else {
          join(c, r, r, i);
          c->origin[r] = CLASS_ARGUMENT;
        }
      }
      break;
    }
    case HALI_OP_TENSOR_OVERWRITE: {
      uint32_t v = o[0].v, a = o[1].v;
      if (v >= c->n || a >= c->n || c->root[a] == UINT32_MAX) break;
      uint32_t ra = c->root[a];
      if (c->root[v] == ra) break; /* in place: nothing else is written */
      /* stream-to-hal may produce a fresh %v in %a's storage from its
       * definition on (analyse), so the window starts there. */
      uint32_t from = c->root[v] == v && c->origin[v] == CLASS_OWNED ? c->def[v] : i;
      if (c->maxread[ra] > from + 1 && c->maxby[ra] != UINT32_MAX &&
          !c->force[c->maxby[ra]]) {
        c->force[c->maxby[ra]] = 1;
        return true;
      }
      break;
    }
    case HALI_OP_TENSOR_UPDATE: {
      /* %r = tensor.update %v, %t[...]: %r is tied to %t, as a dispatch
       * result tied to an operand. */
      uint32_t r = o[0].v, u = o[2].v;
      if (r >= c->n || u >= c->n || c->root[u] == UINT32_MAX) break;
      uint32_t ru = c->root[u];
      bool owned = c->origin[ru] == CLASS_OWNED ||
                   (c->origin[ru] == CLASS_GLOBAL &&
                    stored_back(blk, i, r, c->global[ru]));
      bool need = c->force[r] || !owned || c->maxread[ru] > i + 1 ||
                  c->last[ru] > i + 1 ||
                  read_nearby(c, blk, i, 2, ru, g0, g1);
      if (need) {
        copy[r] = 1;
        join(c, r, r, i);
      } else {
        join(c, r, ru, i);
      }
      break;
    }
    case HALI_OP_TENSOR_DISPATCH: {
      hali_ir_dispatch_t dl = hali_ir_dispatch(insn);
      uint32_t nr = dl.nresults, a0 = dl.operands;
      for (uint32_t k = 0; k < nr; ++k) {
        uint32_t r = o[dl.results + k].v;
        int64_t tie = hali_ir_imm_small(&o[dl.ties + k]);
        if (r >= c->n) continue;
        if (tie < 0 || o[a0 + tie].v >= c->n ||
            c->root[o[a0 + tie].v] == UINT32_MAX) {
          join(c, r, r, i);
          continue;
        }
        uint32_t ru = c->root[o[a0 + tie].v];
        /* A global's loaded value is the global's storage: written in
         * place only when the result goes straight back to that global. */
        bool owned = c->origin[ru] == CLASS_OWNED ||
                     (c->origin[ru] == CLASS_GLOBAL &&
                      stored_back(blk, i, r, c->global[ru]));
        bool need = c->force[r] || !owned ||
                    c->maxread[ru] > i + 1 || c->last[ru] > i + 1 ||
                    read_nearby(c, blk, i, a0 + (uint32_t)tie, ru, g0, g1);
        /* maxread covers members other than the root; the root's own
         * reads are c->last[ru]. */
        if (need) {
          copy[r] = 1;
          join(c, r, r, i);
        } else {
          join(c, r, ru, i);
        }
      }
      break;
    }
    default:
      break;
    }
  }
  return false;
}

/* The rewrite of one block: a clone before each tie that copies (before
 * the concurrent group holding it when the operand is defined earlier). */
static hali_status_t rewrite(cow_t *c, hali_ir_block_t *blk, const uint8_t *copy) {
  hali_ir_func_t *f = c->f;
  hali_insn_list_t out = {0}, grp = {0};
  bool in_group = false;
  uint32_t g0 = 0;
  bool bad_reg = false;
  for (uint32_t i = 0; i < blk->insn_count; ++i) {
    const hali_ir_insn_t *insn = &blk->insns[i];
    if (insn->op == HALI_OP_TENSOR_CONCURRENT) {
      in_group = true;
      g0 = i;
      hali_pass_copy_insn(&grp, insn, NULL);
      continue;
    }
    if (insn->op == HALI_OP_TENSOR_DISPATCH) {
      const hali_ir_operand_t *o = insn->operands;
      hali_ir_dispatch_t dl = hali_ir_dispatch(insn);
      uint32_t nr = dl.nresults, a0 = dl.operands;
      uint32_t clones[64];
      uint32_t nclone = 0;
      for (uint32_t k = 0; k < nr && k < 64; ++k) {
        uint32_t r = o[dl.results + k].v;
        int64_t tie = hali_ir_imm_small(&o[dl.ties + k]);
        clones[k] = UINT32_MAX;
        if (tie < 0 || r >= c->n || !copy[r]) continue;
        uint32_t u = o[a0 + tie].v;
        const char *un = f->reg_names && f->reg_names[u] ? f->reg_names[u] : "t";
        uint32_t cr = hali_pass_reg(f, HALI_TYPE_TENSOR, "%s.copy", un);
        if (cr == UINT32_MAX) {
          bad_reg = true;
          break;
        }
        /* A copy: setting the xtype may move reg_xtypes. */
        hali_ir_xtype_t x;
        if (!hali_ir_xtype_copy(&x, &f->reg_xtypes[u])) {
          bad_reg = true;
          break;
        }
        bool ok = hali_ir_func_set_reg_xtype(f, cr, &x);
        hali_free(x.dims);
        if (!ok) {
          bad_reg = true;
          break;
        }
        hali_insn_list_t *to = in_group && c->def[u] < g0 ? &out : in_group ? &grp : &out;
        hali_pass_emit(to, insn->line, HALI_OP_TENSOR_CLONE, 2, hali_pr(cr),
                       hali_pr(u));
        clones[k] = cr;
        ++nclone;
      }
      if (bad_reg) break;
      hali_ir_insn_t *d = hali_pass_copy_insn(in_group ? &grp : &out, insn, NULL);
      for (uint32_t k = 0; d && nclone && k < nr && k < 64; ++k)
        if (clones[k] != UINT32_MAX)
          d->operands[a0 + hali_ir_imm_small(&d->operands[dl.ties + k])] =
              hali_pr(clones[k]);
      continue;
    }
    if (insn->op == HALI_OP_TENSOR_UPDATE && insn->operands[0].v < c->n &&
        copy[insn->operands[0].v]) {
      uint32_t u = insn->operands[2].v;
      const char *un = f->reg_names && f->reg_names[u] ? f->reg_names[u] : "t";
      uint32_t cr = hali_pass_reg(f, HALI_TYPE_TENSOR, "%s.copy", un);
      hali_ir_xtype_t x;
      if (cr == UINT32_MAX || !hali_ir_xtype_copy(&x, &f->reg_xtypes[u])) {
        bad_reg = true;
        break;
      }
      bool ok = hali_ir_func_set_reg_xtype(f, cr, &x);
      hali_free(x.dims);
      if (!ok) {
        bad_reg = true;
        break;
      }
      hali_insn_list_t *to = in_group && c->def[u] < g0 ? &out : in_group ? &grp : &out;
      hali_pass_emit(to, insn->line, HALI_OP_TENSOR_CLONE, 2, hali_pr(cr),
                     hali_pr(u));
      hali_ir_insn_t *d = hali_pass_copy_insn(in_group ? &grp : &out, insn, NULL);
      if (d) d->operands[2] = hali_pr(cr);
      continue;
    }
    hali_pass_copy_insn(in_group ? &grp : &out, insn, NULL);
    if (insn->op == HALI_OP_TENSOR_END && in_group) {
      in_group = false;
      hali_pass_splice(&out, &grp);
    }
  }
  if (in_group) hali_pass_splice(&out, &grp);
  bool oom = out.oom || grp.oom || bad_reg;
  hali_pass_list_free(&grp);
  if (oom) {
    hali_pass_list_free(&out);
    return hali_status_annotate(
        hali_status_oom(), PASS ": @%s: inserting copies", f->name);
  }
  hali_ir_block_take(blk, &out.b);
  return HALI_OK;
}

hali_status_t hali_pass_copy_on_write(hali_ir_module_t *m, hali_ir_func_t *f,
                                      const hali_tcfg_t *cfg) {
  cow_t c = {.m = m, .f = f, .n = f->reg_count, .cfg = cfg};
  size_t n = (size_t)c.n + 1;
  c.root = hali_malloc(n * sizeof(uint32_t));
  c.last = hali_malloc(n * sizeof(uint32_t));
  c.def = hali_calloc(n, sizeof(uint32_t));
  c.origin = hali_malloc(n);
  c.maxread = hali_malloc(n * sizeof(uint32_t));
  c.maxby = hali_malloc(n * sizeof(uint32_t));
  c.force = hali_calloc(n, 1);
  c.global = hali_calloc(n, sizeof(uint32_t));
  uint8_t *copy = hali_calloc(n, 1);
  hali_status_t s = HALI_OK;
  if (!c.root || !c.last || !c.def || !c.origin || !c.maxread || !c.maxby ||
      !c.force || !c.global || !copy)
    s = hali_status_annotate(hali_status_oom(), PASS ": @%s", f->name);
  for (uint32_t b = 0; b < f->block_count && !s; ++b) {
    hali_ir_block_t *blk = &f->blocks[b];
    bool any_tie = false;
    memset(c.last, 0, n * sizeof(uint32_t));
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k)
        if (reads(&c, insn, k)) c.last[insn->operands[k].v] = i + 1;
      if (insn->op == HALI_OP_TENSOR_DISPATCH) {
        const hali_ir_operand_t *o = insn->operands;
        hali_ir_dispatch_t dl = hali_ir_dispatch(insn);
        for (uint32_t k = 0; k < dl.nresults; ++k)
          any_tie |= hali_ir_imm_small(&o[dl.ties + k]) >= 0;
      }
      any_tie |= insn->op == HALI_OP_TENSOR_UPDATE;
    }
    /* A value a later block reads is read after every op of this one. */
    for (uint32_t k = cfg && cfg->multi ? cfg->end_at[b] : 0;
         cfg && cfg->multi && k < cfg->end_at[b + 1]; ++k)
      if (cfg->end[k] < c.n) c.last[cfg->end[k]] = blk->insn_count + 1;
    if (!any_tie) continue;
    memset(c.force, 0, n);
    while (decide(&c, b, blk, copy)) {
    }
    bool any_copy = false;
    for (uint32_t r = 0; r < c.n; ++r) any_copy |= copy[r] != 0;
    if (any_copy) s = rewrite(&c, blk, copy);
  }
  hali_free(c.root);
  hali_free(c.last);
  hali_free(c.def);
  hali_free(c.origin);
  hali_free(c.maxread);
  hali_free(c.maxby);
  hali_free(c.force);
  hali_free(c.global);
  hali_free(copy);
  return s;
}
