/* hali — tensor values across blocks: the analysis and renaming in front of
 * stream-to-hal's lowering (passes/tensor_cfg.h, doc/passes.md "Control
 * flow").
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "passes/pass_util.h"
#include "passes/tensor_cfg.h"

#define PASS "stream-to-hal"

typedef uint64_t word_t;

typedef struct {
  const hali_ir_module_t *m;
  hali_ir_func_t *f;
  uint32_t nb, nr, words; /* blocks, registers (before renaming), words per set */
  uint32_t *succ_at, *succ; /* successors of block b: [succ_at[b], succ_at[b+1]) */
  word_t *use, *def, *live_in, *live_out, *reach;
} cfg_t;

static word_t *set_of(word_t *v, uint32_t words, uint32_t b) {
  return v + (size_t)b * words;
}
static bool has(const word_t *s, uint32_t r) {
  return (s[r / 64] >> (r % 64)) & 1;
}
static void put(word_t *s, uint32_t r) { s[r / 64] |= (word_t)1 << (r % 64); }

static bool is_tensor_reg(const cfg_t *c, const hali_ir_operand_t *o) {
  return o->kind == HALI_IR_REG && o->v < c->nr &&
         c->f->reg_types[o->v] == HALI_TYPE_TENSOR;
}

static uint32_t block_succs(const hali_ir_block_t *blk, uint32_t *out) {
  uint32_t n = 0;
  if (!blk->insn_count) return 0;
  const hali_ir_insn_t *t = &blk->insns[blk->insn_count - 1];
  for (uint32_t k = 0; k < t->operand_count; ++k)
    if (t->operands[k].kind == HALI_IR_BLOCK) {
      bool dup = false;
      for (uint32_t j = 0; j < n && !dup; ++j) dup = out[j] == t->operands[k].v;
      if (!dup && out) out[n] = t->operands[k].v;
      if (!dup) n++;
    }
  return n;
}

static hali_status_t build_succs(cfg_t *c) {
  hali_ir_func_t *f = c->f;
  uint32_t total = 0;
  c->succ_at = hali_calloc(c->nb + 1, sizeof(uint32_t));
  if (!c->succ_at) return hali_status_oom();
  for (uint32_t b = 0; b < c->nb; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    const hali_ir_insn_t *t =
        blk->insn_count ? &blk->insns[blk->insn_count - 1] : NULL;
    c->succ_at[b] = total;
    if (t) total += t->operand_count; /* an upper bound */
  }
  c->succ_at[c->nb] = total;
  c->succ = hali_malloc(((size_t)total + 1) * sizeof(uint32_t));
  if (!c->succ) return hali_status_oom();
  uint32_t at = 0;
  for (uint32_t b = 0; b < c->nb; ++b) {
    uint32_t n = block_succs(&f->blocks[b], c->succ + at);
    c->succ_at[b] = at;
    at += n;
  }
  c->succ_at[c->nb] = at;
  return HALI_OK;
}

/* use: tensor registers a block reads before it writes them; def: those it
 * writes. */
static void use_def(cfg_t *c) {
  for (uint32_t b = 0; b < c->nb; ++b) {
    const hali_ir_block_t *blk = &c->f->blocks[b];
    word_t *u = set_of(c->use, c->words, b), *d = set_of(c->def, c->words, b);
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (!is_tensor_reg(c, o) || hali_ir_operand_is_write(insn, k)) continue;
        if (!has(d, o->v)) put(u, o->v);
      }
      for (uint32_t k = 0; k < insn->operand_count; ++k)
        if (is_tensor_reg(c, &insn->operands[k]) &&
            hali_ir_operand_is_write(insn, k))
          put(d, insn->operands[k].v);
    }
  }
}

/* live_in = use | (live_out & ~def); live_out = union of successors'
 * live_in.  Backwards to a fixed point. */
static void liveness(cfg_t *c) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (uint32_t bb = c->nb; bb-- > 0;) {
      word_t *out = set_of(c->live_out, c->words, bb),
             *in = set_of(c->live_in, c->words, bb);
      const word_t *u = set_of(c->use, c->words, bb),
                   *d = set_of(c->def, c->words, bb);
      for (uint32_t s = c->succ_at[bb]; s < c->succ_at[bb + 1]; ++s) {
        const word_t *si = set_of(c->live_in, c->words, c->succ[s]);
        for (uint32_t w = 0; w < c->words; ++w) out[w] |= si[w];
      }
      for (uint32_t w = 0; w < c->words; ++w) {
        word_t n = u[w] | (out[w] & ~d[w]);
        if (n != in[w]) {
          in[w] = n;
          changed = true;
        }
      }
    }
  }
}

/* reach[b]: the blocks some path of one edge or more leads to from b (a
 * block is on a loop when it reaches itself). */
static void reachability(cfg_t *c) {
  uint32_t bw = (c->nb + 63) / 64;
  bool changed = true;
  while (changed) {
    changed = false;
    for (uint32_t b = c->nb; b-- > 0;) {
      word_t *r = set_of(c->reach, bw, b);
      for (uint32_t s = c->succ_at[b]; s < c->succ_at[b + 1]; ++s) {
        uint32_t t = c->succ[s];
        const word_t *rt = set_of(c->reach, bw, t);
        if (!has(r, t)) {
          put(r, t);
          changed = true;
        }
        for (uint32_t w = 0; w < bw; ++w)
          if ((r[w] | rt[w]) != r[w]) {
            r[w] |= rt[w];
            changed = true;
          }
      }
    }
  }
}

/* Reverse post-order from the entry (iterative), then unreachable blocks. */
static hali_status_t rpo(cfg_t *c, uint32_t *order) {
  uint32_t *stack = hali_malloc(((size_t)c->nb + 1) * sizeof(uint32_t) * 2);
  uint8_t *seen = hali_calloc(c->nb + 1, 1);
  if (!stack || !seen) {
    hali_free(stack);
    hali_free(seen);
    return hali_status_oom();
  }
  uint32_t sp = 0, n = c->nb;
  stack[sp++] = 0;
  stack[sp++] = c->succ_at[0];
  seen[0] = 1;
  while (sp) {
    uint32_t b = stack[sp - 2], *next = &stack[sp - 1];
    if (*next < c->succ_at[b + 1]) {
      uint32_t s = c->succ[(*next)++];
      if (!seen[s]) {
        seen[s] = 1;
        stack[sp++] = s;
        stack[sp++] = c->succ_at[s];
      }
      continue;
    }
    order[--n] = b;
    sp -= 2;
  }
  /* Reached blocks fill order[n..nb); unreachable ones go after them. */
  uint32_t reached = c->nb - n;
  memmove(order, order + n, reached * sizeof(uint32_t));
  for (uint32_t b = 0; b < c->nb; ++b)
    if (!seen[b]) order[reached++] = b;
  hali_free(stack);
  hali_free(seen);
  return HALI_OK;
}

/* Definite assignment: a tensor read that some path from the entry
 * reaches before any write of the register. */
static hali_status_t assigned(cfg_t *c, const uint32_t *order) {
  size_t bytes = (size_t)c->nb * c->words * sizeof(word_t);
  word_t *in = hali_malloc(bytes ? bytes : 1), *cur = NULL;
  cur = hali_malloc((size_t)c->words * sizeof(word_t) + 1);
  uint32_t *preds_n = hali_calloc(c->nb + 1, sizeof(uint32_t));
  if (!in || !cur || !preds_n) {
    hali_free(in);
    hali_free(cur);
    hali_free(preds_n);
    return hali_status_oom();
  }
  memset(in, 0xff, bytes);
  memset(in, 0, (size_t)c->words * sizeof(word_t)); /* the entry: nothing */
  bool changed = true;
  while (changed) {
    changed = false;
    for (uint32_t oi = 0; oi < c->nb; ++oi) {
      uint32_t b = order[oi];
      const word_t *ib = set_of(in, c->words, b),
                   *d = set_of(c->def, c->words, b);
      for (uint32_t s = c->succ_at[b]; s < c->succ_at[b + 1]; ++s) {
        uint32_t t = c->succ[s];
        if (t == 0) continue; /* the entry is never a target (checked) */
        word_t *it = set_of(in, c->words, t);
        for (uint32_t w = 0; w < c->words; ++w) {
          word_t n = it[w] & (ib[w] | d[w]);
          if (n != it[w]) {
            it[w] = n;
            changed = true;
          }
        }
      }
    }
  }
  hali_status_t s = HALI_OK;
  /* Only blocks reached from the entry are checked (order holds them
   * first; an unreachable block never runs). */
  uint8_t *reached = (uint8_t *)preds_n;
  reached[0] = 1;
  for (uint32_t oi = 0; oi < c->nb; ++oi)
    if (reached[order[oi]])
      for (uint32_t k = c->succ_at[order[oi]]; k < c->succ_at[order[oi] + 1]; ++k)
        reached[c->succ[k]] = 1;
  for (uint32_t oi = 0; oi < c->nb && !s; ++oi) {
    uint32_t b = order[oi];
    if (!reached[b]) continue;
    const hali_ir_block_t *blk = &c->f->blocks[b];
    memcpy(cur, set_of(in, c->words, b), (size_t)c->words * sizeof(word_t));
    for (uint32_t i = 0; i < blk->insn_count && !s; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      for (uint32_t k = 0; k < insn->operand_count && !s; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (!is_tensor_reg(c, o) || hali_ir_operand_is_write(insn, k) ||
            has(cur, o->v))
          continue;
        char rn[64];
        s = hali_pass_error(PASS, c->m, c->f, insn, i,
                            "tensor %s is read before it is written on some "
                            "path to this block (write it on every path "
                            "that reaches here)",
                            hali_ir_reg_name(c->f, o->v, rn, sizeof(rn)));
      }
      for (uint32_t k = 0; k < insn->operand_count; ++k)
        if (is_tensor_reg(c, &insn->operands[k]) &&
            hali_ir_operand_is_write(insn, k))
          put(cur, insn->operands[k].v);
    }
  }
  hali_free(in);
  hali_free(cur);
  hali_free(preds_n);
  return s;
}

/* Structural rules of tensor code across blocks: the entry is no branch
 * target (its tensor.wait starts the function's work once), and an
 * `execute {` or `concurrent {` closes in its own block. */
static hali_status_t structure(cfg_t *c) {
  for (uint32_t s = 0; s < c->succ_at[c->nb]; ++s)
    if (c->succ[s] == 0) {
      for (uint32_t b = 0; b < c->nb; ++b)
        for (uint32_t k = c->succ_at[b]; k < c->succ_at[b + 1]; ++k)
          if (c->succ[k] == 0) {
            const hali_ir_block_t *blk = &c->f->blocks[b];
            return hali_pass_error(
                PASS, c->m, c->f, &blk->insns[blk->insn_count - 1],
                blk->insn_count - 1,
                "branches to the entry block: in a tensor-level function the "
                "entry runs once (start the loop in a block of its own)");
          }
    }
  for (uint32_t b = 0; b < c->nb; ++b) {
    const hali_ir_block_t *blk = &c->f->blocks[b];
    int depth = 0;
    uint32_t at = 0;
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      uint16_t op = blk->insns[i].op;
      if (op == HALI_OP_TENSOR_EXECUTE || op == HALI_OP_TENSOR_CONCURRENT) {
        if (!depth) at = i;
        depth++;
      } else if (op == HALI_OP_TENSOR_END && depth) {
        depth--;
      }
    }
    if (depth)
      return hali_pass_error(PASS, c->m, c->f, &blk->insns[at], at,
                             "this group is not closed in its block: `}` "
                             "must come before the block's terminator");
  }
  return HALI_OK;
}

static hali_status_t rename(cfg_t *c, hali_tcfg_t *out) {
  hali_ir_func_t *f = c->f;
  uint32_t nr = c->nr;
  uint32_t *nwrites = hali_calloc(nr + 1, sizeof(uint32_t));
  uint32_t *defblock = hali_calloc(nr + 1, sizeof(uint32_t));
  uint8_t *cross = hali_calloc(nr + 1, 1);
  uint32_t *cur = hali_malloc((nr + 1) * sizeof(uint32_t));
  uint32_t *touched = hali_malloc((nr + 1) * sizeof(uint32_t));
  uint32_t nb_bits = (c->nb + 63) / 64;
  hali_status_t s = HALI_OK;
  if (!nwrites || !defblock || !cross || !cur || !touched ||
      !(out->def_op = hali_calloc(nr + 1, sizeof(uint16_t))) ||
      !(out->def_arg = hali_calloc(nr + 1, sizeof(uint32_t)))) {
    s = hali_status_oom();
    goto done;
  }
  for (uint32_t b = 0; b < c->nb; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (!is_tensor_reg(c, o) || !hali_ir_operand_is_write(insn, k))
          continue;
        nwrites[o->v]++;
        defblock[o->v] = b;
        out->def_op[o->v] = insn->op;
        out->def_arg[o->v] = insn->operand_count > 1 ? insn->operands[1].v : 0;
      }
    }
  }
  for (uint32_t b = 0; b < c->nb; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (is_tensor_reg(c, o) && !hali_ir_operand_is_write(insn, k) &&
            nwrites[o->v] == 1 && defblock[o->v] != b)
          cross[o->v] = 1;
      }
    }
  }
  uint8_t *is_var = hali_calloc(nr + 1, 1);
  if (!is_var) {
    s = hali_status_oom();
    goto done;
  }
  out->is_var = is_var;
  for (uint32_t r = 0; r < nr; ++r) {
    if (f->reg_types[r] != HALI_TYPE_TENSOR) continue;
    uint16_t op = out->def_op[r];
    bool fixed = (op == HALI_OP_TENSOR_IMPORT || op == HALI_OP_TENSOR_CONSTANT) &&
                 !has(set_of(c->reach, nb_bits, defblock[r]), defblock[r]);
    is_var[r] = nwrites[r] > 1 || (cross[r] && !fixed);
    if (nwrites[r] != 1) out->def_op[r] = 0;
  }
  /* Rename block by block. */
  out->fin_at = hali_calloc(c->nb + 1, sizeof(uint32_t));
  size_t fcap = 16, fn = 0;
  out->fin = hali_malloc(fcap * sizeof(*out->fin));
  if (!out->fin_at || !out->fin) {
    s = hali_status_oom();
    goto done;
  }
  for (uint32_t r = 0; r <= nr; ++r) cur[r] = UINT32_MAX;
  for (uint32_t b = 0; b < c->nb && !s; ++b) {
    hali_ir_block_t *blk = &f->blocks[b];
    uint32_t nt = 0;
    out->fin_at[b] = (uint32_t)fn;
    for (uint32_t i = 0; i < blk->insn_count && !s; ++i) {
      hali_ir_insn_t *insn = &blk->insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        hali_ir_operand_t *o = &insn->operands[k];
        if (o->kind == HALI_IR_REG && o->v < nr && is_var[o->v] &&
            !hali_ir_operand_is_write(insn, k) && cur[o->v] != UINT32_MAX)
          o->v = cur[o->v];
      }
      for (uint32_t k = 0; k < insn->operand_count && !s; ++k) {
        hali_ir_operand_t *o = &insn->operands[k];
        if (o->kind != HALI_IR_REG || o->v >= nr || !is_var[o->v] ||
            !hali_ir_operand_is_write(insn, k))
          continue;
        uint32_t v = o->v;
        const char *vn = f->reg_names && f->reg_names[v] ? f->reg_names[v] : "t";
        uint32_t nv = hali_pass_reg(f, HALI_TYPE_TENSOR, "%s", vn);
        hali_ir_xtype_t x;
        if (nv == UINT32_MAX || !hali_ir_xtype_copy(&x, &f->reg_xtypes[v])) {
          s = hali_status_oom();
          break;
        }
        bool ok = hali_ir_func_set_reg_xtype(f, nv, &x);
        hali_free(x.dims);
        if (!ok) {
          s = hali_status_oom();
          break;
        }
        if (cur[v] == UINT32_MAX) touched[nt++] = v;
        cur[v] = nv;
        o->v = nv;
      }
    }
    for (uint32_t j = 0; j < nt && !s; ++j) {
      uint32_t v = touched[j];
      if (has(set_of(c->live_out, c->words, b), v)) {
        if (fn == fcap) {
          void *p = hali_realloc(out->fin, fcap * 2 * sizeof(*out->fin));
          if (!p) {
            s = hali_status_oom();
            break;
          }
          out->fin = p;
          fcap *= 2;
        }
        out->fin[fn][0] = v;
        out->fin[fn][1] = cur[v];
        fn++;
      }
      cur[v] = UINT32_MAX;
    }
  }
  if (!s) out->fin_at[c->nb] = (uint32_t)fn;
done:
  hali_free(nwrites);
  hali_free(defblock);
  hali_free(cross);
  hali_free(cur);
  hali_free(touched);
  return s;
}

/* The live-in and live-at-end lists copy-on-write reads, in registers
 * after renaming. */
static hali_status_t lists(cfg_t *c, hali_tcfg_t *out) {
  size_t nin = 0, nend = 0;
  for (uint32_t b = 0; b < c->nb; ++b)
    for (uint32_t r = 0; r < c->nr; ++r) {
      nin += has(set_of(c->live_in, c->words, b), r);
      nend += has(set_of(c->live_out, c->words, b), r);
    }
  out->in_at = hali_calloc(c->nb + 1, sizeof(uint32_t));
  out->end_at = hali_calloc(c->nb + 1, sizeof(uint32_t));
  out->in = hali_malloc((nin + 1) * sizeof(uint32_t));
  out->end = hali_malloc((nend + 1) * sizeof(uint32_t));
  if (!out->in_at || !out->end_at || !out->in || !out->end)
    return hali_status_oom();
  nin = nend = 0;
  for (uint32_t b = 0; b < c->nb; ++b) {
    out->in_at[b] = (uint32_t)nin;
    out->end_at[b] = (uint32_t)nend;
    for (uint32_t r = 0; r < c->nr; ++r) {
      if (has(set_of(c->live_in, c->words, b), r)) out->in[nin++] = r;
      if (!has(set_of(c->live_out, c->words, b), r)) continue;
      uint32_t v = r;
      for (uint32_t k = out->fin_at[b]; k < out->fin_at[b + 1]; ++k)
        if (out->fin[k][0] == r) v = out->fin[k][1];
      out->end[nend++] = v;
    }
  }
  out->in_at[c->nb] = (uint32_t)nin;
  out->end_at[c->nb] = (uint32_t)nend;
  return HALI_OK;
}

hali_status_t hali_tcfg_build(const hali_ir_module_t *m, hali_ir_func_t *f,
                              hali_tcfg_t *out) {
  memset(out, 0, sizeof(*out));
  out->nblocks = f->block_count;
  if (f->block_count <= 1) return HALI_OK;
  out->multi = true;
  cfg_t c = {.m = m, .f = f, .nb = f->block_count, .nr = f->reg_count};
  c.words = (c.nr + 63) / 64 + 1;
  size_t sets = (size_t)c.nb * c.words;
  uint32_t bw = (c.nb + 63) / 64;
  c.use = hali_calloc(sets, sizeof(word_t));
  c.def = hali_calloc(sets, sizeof(word_t));
  c.live_in = hali_calloc(sets, sizeof(word_t));
  c.live_out = hali_calloc(sets, sizeof(word_t));
  c.reach = hali_calloc((size_t)c.nb * bw + 1, sizeof(word_t));
  out->order = hali_malloc(((size_t)c.nb + 1) * sizeof(uint32_t));
  hali_status_t s = HALI_OK;
  if (!c.use || !c.def || !c.live_in || !c.live_out || !c.reach || !out->order)
    s = hali_status_oom();
  if (!s) s = build_succs(&c);
  if (!s) s = structure(&c);
  if (!s) {
    use_def(&c);
    liveness(&c);
    reachability(&c);
    s = rpo(&c, out->order);
  }
  if (!s) s = assigned(&c, out->order);
  if (!s) s = rename(&c, out);
  if (!s) s = lists(&c, out);
  if (!s) {
    /* Arrays per register cover the versions too. */
    out->nregs = f->reg_count;
    uint8_t *v = hali_realloc(out->is_var, (size_t)out->nregs + 1);
    uint16_t *op = hali_realloc(out->def_op, ((size_t)out->nregs + 1) * sizeof(uint16_t));
    if (v) out->is_var = v;
    if (op) out->def_op = op;
    uint32_t *arg = hali_realloc(out->def_arg, ((size_t)out->nregs + 1) * sizeof(uint32_t));
    if (arg) out->def_arg = arg;
    if (!v || !op || !arg) {
      s = hali_status_oom();
    } else {
      for (uint32_t r = c.nr; r < out->nregs; ++r) {
        out->is_var[r] = 0;
        out->def_op[r] = 0;
        out->def_arg[r] = 0;
      }
    }
  }
  hali_free(c.succ_at);
  hali_free(c.succ);
  hali_free(c.use);
  hali_free(c.def);
  hali_free(c.live_in);
  hali_free(c.live_out);
  hali_free(c.reach);
  if (s) hali_tcfg_free(out);
  return s;
}

void hali_tcfg_free(hali_tcfg_t *cfg) {
  hali_free(cfg->order);
  hali_free(cfg->is_var);
  hali_free(cfg->def_op);
  hali_free(cfg->def_arg);
  hali_free(cfg->fin_at);
  hali_free(cfg->fin);
  hali_free(cfg->in_at);
  hali_free(cfg->in);
  hali_free(cfg->end_at);
  hali_free(cfg->end);
  memset(cfg, 0, sizeof(*cfg));
}
