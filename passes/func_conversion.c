/* hali — func-conversion: the coarse-fences ABI (doc/passes.md).
 *
 * Every tensor-level function f becomes
 *   f$async(args..., %wait: !hal.fence, %signal: !hal.fence)
 * whose tensor arguments arrive as buffer views imported after %wait and
 * whose results are exported behind a barrier that signals %signal, plus a
 * synchronous wrapper f(args...) that calls f$async with a null wait fence
 * and awaits the signal fence.  Functions not at the tensor level, already
 * converted (f$async exists, or the name ends in $async) or marked with the
 * "external" attribute are left alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hal_bits.h"
#include "base/alloc.h"
#include "passes/pass_util.h"
#include "passes/pipeline.h"

#define PASS "func-conversion"

/* The ABI type of a value of |t| at the function boundary: scalars widen
 * (integers to i64, floats to f64), tensors travel as buffer views. */
static hali_type_t abi_type(hali_type_t t) { return hali_ir_abi_type(t); }

/* The index of |f|'s f$async when it exists (-1 if not); |*out_stub|:
 * whether it is the assembler's placeholder (HALI_FUNC_ASYNC_STUB), which
 * this pass builds f$async into. */
static int32_t find_async(const hali_ir_module_t *m, const hali_ir_func_t *f,
                          bool *out_stub) {
  char name[512];
  snprintf(name, sizeof(name), "%s$async", f->name);
  int32_t k = hali_ir_module_find_func(m, name);
  *out_stub = k >= 0 && (m->funcs[k].flags & HALI_FUNC_ASYNC_STUB);
  return k;
}

static bool has_attr(const hali_ir_func_t *f, const char *a) {
  for (uint32_t i = 0; i < f->attr_count; ++i)
    if (strcmp(f->attrs[i], a) == 0) return true;
  return false;
}

static bool skipped(const hali_ir_module_t *m, const hali_ir_func_t *f) {
  if (!hali_ir_func_is_tensor_level(f)) return true;
  if (has_attr(f, "external")) return true;
  size_t n = strlen(f->name);
  if (n > 6 && strcmp(f->name + n - 6, "$async") == 0) return true;
  bool stub;
  return find_async(m, f, &stub) >= 0 && !stub;
}

/* Is parameter |p| of |f| read only by the return (an argument returned
 * unchanged, which passes through without an import or a barrier)? */
static bool only_returned(const hali_ir_func_t *f, uint32_t p) {
  bool returned = false;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        if (insn->operands[k].kind != HALI_IR_REG || insn->operands[k].v != p)
          continue;
        if (insn->op != HALI_OP_RETURN) return false;
        returned = true;
      }
    }
  return returned;
}

static bool is_mutable(const hali_ir_func_t *f, uint32_t p) {
  return p < f->param_count && f->param_flags &&
         (f->param_flags[p] & HALI_PARAM_MUTABLE);
}

static char *fmt_xtype(const hali_ir_xtype_t *x) {
  hali_strbuf_t sb = {0};
  hali_ir_xtype_print(&sb, x);
  return hali_strbuf_take(&sb);
}

/* A call between tensor-level functions passes tensors whose element
 * type and rank are the parameter's, and whose static dims agree with the
 * parameter's static dims (a dynamic one on either side is checked when
 * the callee imports the view). */
static hali_status_t check_call_types(const hali_ir_module_t *m,
                                      const hali_ir_func_t *f,
                                      const hali_ir_insn_t *insn,
                                      uint32_t index) {
  const hali_ir_func_t *c = &m->funcs[insn->operands[0].v];
  for (uint32_t k = 0; k < insn->aux && k < c->param_count; ++k) {
    uint32_t a = insn->operands[1 + k].v;
    if (f->reg_types[a] != HALI_TYPE_TENSOR || c->reg_types[k] != HALI_TYPE_TENSOR)
      continue;
    const hali_ir_xtype_t *xa = &f->reg_xtypes[a], *xp = &c->reg_xtypes[k];
    bool ok = xa->element_type == xp->element_type && xa->rank == xp->rank;
    for (uint32_t d = 0; ok && d < xa->rank; ++d)
      ok = xa->dims[d] < 0 || xp->dims[d] < 0 || xa->dims[d] == xp->dims[d];
    if (ok) continue;
    char *ta = fmt_xtype(xa), *tp = fmt_xtype(xp), rn[64], pn[64];
    hali_status_t e = hali_pass_error(
        PASS, m, f, insn, index,
        "argument %u of @%s: %s is %s, but parameter %s is %s", k, c->name,
        hali_ir_reg_name(f, a, rn, sizeof(rn)), ta ? ta : "?",
        hali_ir_reg_name(c, k, pn, sizeof(pn)), tp ? tp : "?");
    hali_free(ta);
    hali_free(tp);
    return e;
  }
  return HALI_OK;
}

/* What convert() needs of m->funcs[fi].  Run on every function before
 * any is converted: a converted callee is no longer at the tensor level,
 * and a call to it must still be rejected. */
static hali_status_t check(const hali_ir_module_t *m, uint32_t fi) {
  const hali_ir_func_t *f0 = &m->funcs[fi];
  uint32_t nret = 0;
  for (uint32_t b = 0; b < f0->block_count; ++b)
    for (uint32_t i = 0; i < f0->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f0->blocks[b].insns[i];
      if (insn->op == HALI_OP_RETURN && ++nret > 1)
        return hali_pass_error(
            PASS, m, f0, insn, i,
            "a tensor-level function must have exactly one return (this is "
            "return %u): merge the exits so that the results pass one "
            "barrier",
            nret);
      if (insn->op == HALI_OP_CALL && insn->operands[0].v < m->func_count &&
          hali_ir_func_is_tensor_level(&m->funcs[insn->operands[0].v]) &&
          skipped(m, &m->funcs[insn->operands[0].v]))
        return hali_pass_error(PASS, m, f0, insn, i,
                               "a call to @%s, a tensor-level function that "
                               "is not converted (external, or with an "
                               "@%s$async of its own): only calls to the "
                               "module's converted tensor functions chain by "
                               "fences",
                               m->funcs[insn->operands[0].v].name,
                               m->funcs[insn->operands[0].v].name);
      if (insn->op == HALI_OP_CALL && insn->operands[0].v < m->func_count &&
          hali_ir_func_is_tensor_level(&m->funcs[insn->operands[0].v]))
        HALI_RETURN_IF_ERROR_PLAIN(check_call_types(m, f0, insn, i));
      if (insn->op == HALI_OP_TENSOR_OVERWRITE && insn->operand_count == 2 &&
          !is_mutable(f0, insn->operands[1].v)) {
        char rn[64];
        hali_ir_reg_name(f0, insn->operands[1].v, rn, sizeof(rn));
        return hali_pass_error(
            PASS, m, f0, insn, i,
            "tensor.overwrite into %s, which is not a mutable parameter: "
            "an immutable argument is the caller's read-only value (declare "
            "it `%s: mutable tensor<...>`)",
            rn, rn);
      }
      if (insn->op == HALI_OP_TENSOR_IMPORT || insn->op == HALI_OP_TENSOR_EXPORT ||
          insn->op == HALI_OP_TENSOR_WAIT || insn->op == HALI_OP_TENSOR_BARRIER)
        return hali_pass_error(PASS, m, f0, insn, i,
                               "%s is written by func-conversion, not by hand",
                               hali_op_info(insn->op)->name);
    }
  if (nret == 0)
    return hali_pass_error(PASS, m, f0, NULL, 0, "function never returns");
  for (uint32_t k = 0; f0->result_ties && k < f0->result_count; ++k) {
    int32_t tie = f0->result_ties[k];
    if (tie >= 0 && !is_mutable(f0, (uint32_t)tie)) {
      char rn[64];
      hali_ir_reg_name(f0, (uint32_t)tie, rn, sizeof(rn));
      return hali_pass_error(
          PASS, m, f0, NULL, 0,
          "result %u is tied to parameter %s, which is not mutable: a tie "
          "writes the caller's buffer, so the parameter must be declared "
          "`%s: mutable tensor<...>`",
          k, rn, rn);
    }
  }
  if (f0->result_count > 64)
    return hali_pass_error(PASS, m, f0, NULL, 0,
                           "%u results: a tensor-level function returns at "
                           "most 64",
                           f0->result_count);
  for (uint32_t k = 0; k < f0->result_count; ++k)
    if (f0->results[k] != HALI_TYPE_TENSOR &&
        f0->results[k] != HALI_TYPE_I32 && f0->results[k] != HALI_TYPE_I64 &&
        f0->results[k] != HALI_TYPE_INDEX &&
        f0->results[k] != HALI_TYPE_F32 && f0->results[k] != HALI_TYPE_F64)
      return hali_pass_error(PASS, m, f0, NULL, 0,
                             "result %u is %s: tensor-level functions return "
                             "tensors and scalars",
                             k, hali_type_name(f0->results[k]));
  return HALI_OK;
}

/* The tensor-level function that the call |insn| of a tensor-level
 * function names and func-conversion converts, or UINT32_MAX. */
static uint32_t tensor_callee(const hali_ir_module_t *m,
                              const hali_ir_insn_t *insn) {
  if (insn->op != HALI_OP_CALL || insn->operands[0].v >= m->func_count)
    return UINT32_MAX;
  const hali_ir_func_t *c = &m->funcs[insn->operands[0].v];
  return hali_ir_func_is_tensor_level(c) && !skipped(m, c)
             ? insn->operands[0].v
             : UINT32_MAX;
}

/* Recursion between tensor-level functions is a load error: each call
 * waits for its callee's fences within one straight block, so a cycle
 * could never end.  A depth-first walk from |fi| (|state|: 0 new, 1 on the
 * path, 2 done; |path| the functions on it). */
static hali_status_t no_cycle(const hali_ir_module_t *m, uint32_t fi,
                              uint8_t *state, uint32_t *path,
                              uint32_t depth) {
  state[fi] = 1;
  path[depth] = fi;
  const hali_ir_func_t *f = &m->funcs[fi];
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      uint32_t c = tensor_callee(m, insn);
      if (c == UINT32_MAX || state[c] == 2) continue;
      if (state[c] == 1) {
        hali_strbuf_t sb = {0};
        uint32_t from = 0;
        while (path[from] != c) ++from;
        for (uint32_t k = from; k <= depth; ++k)
          hali_strbuf_printf(&sb, "@%s -> ", m->funcs[path[k]].name);
        hali_strbuf_printf(&sb, "@%s", m->funcs[c].name);
        char *cyc = hali_strbuf_take(&sb);
        hali_status_t e = hali_pass_error(
            PASS, m, f, insn, i,
            "recursive call (%s): tensor-level functions may call each other "
            "but not recursively (a call records the callee's work when it "
            "is reached, with no host wait, so a recursion could not decide "
            "when to stop; write it as a loop, or as host code around "
            "@%s$async)",
            cyc ? cyc : "?", m->funcs[c].name);
        hali_free(cyc);
        return e;
      }
      HALI_RETURN_IF_ERROR_PLAIN(no_cycle(m, c, state, path, depth + 1));
    }
  state[fi] = 2;
  return HALI_OK;
}

/* Builds f$async (appended to |m|) from m->funcs[fi] (check()ed); a call
 * to another converted function |c| becomes a call to c$async, at index
 * |async_of|[c] (stream-to-hal adds the fences and the views). */
static hali_status_t convert(hali_ir_module_t *m, uint32_t fi,
                             const uint32_t *async_of, uint32_t fcount) {
  char name[512];
  snprintf(name, sizeof(name), "%s$async", m->funcs[fi].name);
  hali_ir_func_t *g;
  if (async_of[fi] < m->func_count) {
    /* The assembler's placeholder, called by module code: built in its
     * place (check_stub compares the signatures afterwards). */
    g = &m->funcs[async_of[fi]];
    hali_ir_func_clear(g);
  } else {
    g = hali_ir_module_add_func(m, name, strlen(name));
  }
  if (!g) return hali_status_oom();
  const hali_ir_func_t *f = &m->funcs[fi]; /* add_func moved it */
  g->line = f->line;
  bool oom = false;
  uint32_t np = f->param_count;
  /* Registers: the ABI parameters, %wait and %signal, then f's registers
   * (parameters whose type is already the ABI type map onto the ABI
   * parameter itself). */
  uint32_t *map = hali_calloc(f->reg_count + 1, sizeof(uint32_t));
  if (!map) return hali_status_oom();
  g->reg_names = NULL;
  for (uint32_t p = 0; p < np; ++p) {
    hali_type_t t = f->reg_types[p];
    const char *n = f->reg_names && f->reg_names[p] ? f->reg_names[p] : NULL;
    char buf[128];
    if (t == HALI_TYPE_TENSOR) snprintf(buf, sizeof(buf), "%s.view", n ? n : "arg");
    else if (abi_type(t) != t) snprintf(buf, sizeof(buf), "%s.abi", n ? n : "arg");
    else snprintf(buf, sizeof(buf), "%s", n ? n : "arg");
    if (n || !f->reg_names) {
      /* names: only when f has them */
    }
    if (f->reg_names)
      oom |= hali_pass_reg(g, abi_type(t), "%s", buf) == UINT32_MAX;
    else
      oom |= hali_ir_func_add_reg(g, abi_type(t), NULL, 0) == UINT32_MAX;
  }
  uint32_t wait = f->reg_names ? hali_pass_reg(g, HALI_TYPE_FENCE, "wait")
                               : hali_ir_func_add_reg(g, HALI_TYPE_FENCE, NULL, 0);
  uint32_t signal = f->reg_names
                        ? hali_pass_reg(g, HALI_TYPE_FENCE, "signal")
                        : hali_ir_func_add_reg(g, HALI_TYPE_FENCE, NULL, 0);
  g->param_count = np + 2;
  for (uint32_t r = 0; r < f->reg_count && !oom; ++r) {
    if (r < np && abi_type(f->reg_types[r]) == f->reg_types[r]) {
      map[r] = r;
      continue;
    }
    const char *n = f->reg_names ? f->reg_names[r] : NULL;
    map[r] = f->reg_names ? hali_pass_reg(g, f->reg_types[r], "%s", n ? n : "r")
                          : hali_ir_func_add_reg(g, f->reg_types[r], NULL, 0);
    if (map[r] == UINT32_MAX) oom = true;
    else if (f->reg_types[r] == HALI_TYPE_TENSOR)
      oom |= !hali_ir_func_set_reg_xtype(g, map[r], &f->reg_xtypes[r]);
  }
  /* Signature: ABI results, ties and attributes carried over. */
  g->result_count = f->result_count;
  g->results = hali_malloc(f->result_count + 1);
  oom |= !g->results;
  for (uint32_t k = 0; !oom && k < f->result_count; ++k)
    g->results[k] = abi_type(f->results[k]);
  if (f->result_ties) {
    g->result_ties = hali_malloc((f->result_count + 1) * sizeof(int32_t));
    g->result_xtypes = hali_calloc(f->result_count + 1, sizeof(hali_ir_xtype_t));
    oom |= !g->result_ties || !g->result_xtypes;
    for (uint32_t k = 0; !oom && k < f->result_count; ++k) {
      g->result_ties[k] = f->result_ties[k];
      g->result_xtypes[k].type = g->results[k];
    }
  }
  if (f->param_flags) {
    g->param_flags = hali_calloc(np + 3, 1);
    oom |= !g->param_flags;
    if (!oom) memcpy(g->param_flags, f->param_flags, np);
  }
  /* An initializer stays the wrapper (run once, with no arguments). */
  for (uint32_t i = 0; i < f->attr_count && !oom; ++i)
    if (strcmp(f->attrs[i], HALI_ATTR_INITIALIZER) != 0)
      oom |= !hali_ir_func_add_attr(g, f->attrs[i], strlen(f->attrs[i]));

  /* Prologue: wait, then import (asserting shape and element type), and
   * narrow scalars. */
  hali_insn_list_t pro = {0};
  uint32_t line = f->line;
  hali_pass_emit(&pro, line, HALI_OP_TENSOR_WAIT, 1, hali_pr(wait));
  uint32_t enc = UINT32_MAX;
  for (uint32_t p = 0; p < np && !oom; ++p) {
    hali_type_t t = f->reg_types[p];
    const char *pname = f->reg_names && f->reg_names[p] ? f->reg_names[p] : "arg";
    if (t == HALI_TYPE_TENSOR) {
      if (only_returned(f, p)) continue;
      const hali_ir_xtype_t *x = &f->reg_xtypes[p];
      uint32_t dims[HALI_HAL_MAX_RANK];
      uint32_t ndyn = 0, dyn[HALI_HAL_MAX_RANK];
      char *ts = fmt_xtype(x);
      char msg[512], rn[64];
      snprintf(msg, sizeof(msg), "@%s: argument %u (%s, %s)", f->name, p,
               hali_ir_reg_name(f, p, rn, sizeof(rn)), ts ? ts : "?");
      hali_free(ts);
      uint32_t smsg = hali_ir_module_intern(m, msg, strlen(msg));
      if (hali_ir_xtype_dynamic_dims(x)) {
        /* A wrong rank would make buffer_view.dim fail without naming the
         * argument: check it first. */
        uint32_t rank = hali_pass_reg(g, HALI_TYPE_I32, "%s.rank", pname);
        uint32_t want = hali_pass_reg(g, HALI_TYPE_I32, "%s.rank_expected", pname);
        uint32_t ok = hali_pass_reg(g, HALI_TYPE_I32, "%s.rank_ok", pname);
        char rmsg[600];
        snprintf(rmsg, sizeof(rmsg), "%s: expected rank %u", msg, x->rank);
        uint32_t srm = hali_ir_module_intern(m, rmsg, strlen(rmsg));
        hali_pass_emit(&pro, line, HALI_OP_HAL_BUFFER_VIEW_RANK, 2, hali_pr(rank),
                       hali_pr(p));
        hali_pass_emit(&pro, line, HALI_OP_CONST_I32, 2, hali_pr(want),
                       hali_pk(m, x->rank));
        hali_pass_emit(&pro, line, HALI_OP_EQ_I32, 3, hali_pr(ok), hali_pr(rank),
                       hali_pr(want));
        hali_pass_emit(&pro, line, HALI_OP_ASSERT, 2, hali_pr(ok),
                       hali_pref(HALI_IR_STRING, srm));
      }
      for (uint32_t d = 0; d < x->rank && d < HALI_HAL_MAX_RANK; ++d) {
        dims[d] = hali_pass_reg(g, HALI_TYPE_I64, "%s.dim%u", pname, d);
        if (x->dims[d] >= 0) {
          hali_pass_emit(&pro, line, HALI_OP_CONST_I64, 2, hali_pr(dims[d]),
                         hali_pk(m, x->dims[d]));
        } else {
          uint32_t di = hali_pass_reg(g, HALI_TYPE_I32, "%s.index%u", pname, d);
          hali_pass_emit(&pro, line, HALI_OP_CONST_I32, 2,
                         hali_pr(di), hali_pk(m, d));
          hali_pass_emit(&pro, line, HALI_OP_HAL_BUFFER_VIEW_DIM, 3,
                         hali_pr(dims[d]), hali_pr(p), hali_pr(di));
          dyn[ndyn++] = dims[d];
        }
      }
      uint32_t et = hali_pass_reg(g, HALI_TYPE_I32, "%s.element_type", pname);
      hali_pass_emit(&pro, line, HALI_OP_CONST_I32, 2, hali_pr(et),
                     hali_pk(m, (int32_t)x->element_type));
      if (enc == UINT32_MAX) {
        enc = hali_pass_reg(g, HALI_TYPE_I32, "dense");
        hali_pass_emit(&pro, line, HALI_OP_CONST_I32, 2,
                       hali_pr(enc), hali_pk(m, 1));
      }
      hali_ir_insn_t *a = hali_pass_emit_open(&pro, line, HALI_OP_HAL_BUFFER_VIEW_ASSERT,
                                              4 + x->rank, 4, hali_pr(p), hali_pr(et),
                                              hali_pr(enc),
                                              hali_pref(HALI_IR_STRING, smsg));
      for (uint32_t d = 0; d < x->rank; ++d)
        hali_pass_set_operand(&pro, a, 4 + d, hali_pr(dims[d]));
      hali_ir_insn_t *im = hali_pass_emit_open(&pro, line, HALI_OP_TENSOR_IMPORT,
                                               2 + ndyn, 2, hali_pr(map[p]), hali_pr(p));
      for (uint32_t d = 0; d < ndyn; ++d)
        hali_pass_set_operand(&pro, im, 2 + d, hali_pr(dyn[d]));
    } else if (abi_type(t) != t) {
      hali_pass_emit(&pro, line,
                     t == HALI_TYPE_I32     ? HALI_OP_TRUNC_I64_I32
                     : t == HALI_TYPE_INDEX ? HALI_OP_MOV_I64
                                            : HALI_OP_FPTRUNC_F64_F32,
                     2, hali_pr(map[p]), hali_pr(p));
    }
  }

  /* Body: copied with registers renumbered; the return becomes exports, a
   * barrier that signals %signal, and a return of views. */
  g->blocks = hali_calloc(f->block_count, sizeof(hali_ir_block_t));
  oom |= !g->blocks;
  for (uint32_t b = 0; b < f->block_count && !oom; ++b) {
    g->block_count++;
    hali_insn_list_t out = {0};
    if (b == 0) hali_pass_splice(&out, &pro);
    const hali_ir_block_t *src = &f->blocks[b];
    if (src->name) g->blocks[b].name = hali_strdup(src->name);
    for (uint32_t i = 0; i < src->insn_count; ++i) {
      const hali_ir_insn_t *insn = &src->insns[i];
      if (insn->op != HALI_OP_RETURN) {
        /* (The callee may already be converted: its index says.) */
        uint32_t c = insn->op == HALI_OP_CALL && insn->operands[0].v < fcount
                         ? async_of[insn->operands[0].v]
                         : UINT32_MAX;
        hali_ir_insn_t *copy = hali_pass_copy_insn(&out, insn, map);
        if (copy && c != UINT32_MAX) copy->operands[0].v = c;
        continue;
      }
      uint32_t rl = insn->line;
      uint32_t views[64];
      for (uint32_t k = 0; k < insn->operand_count && k < 64; ++k) {
        uint32_t r = insn->operands[k].v;
        hali_type_t t = f->reg_types[r];
        if (t == HALI_TYPE_TENSOR) {
          int32_t tie = f->result_ties ? f->result_ties[k] : -1;
          if (r < np && only_returned(f, r)) {
            views[k] = r; /* passthrough: the caller's view */
          } else if (tie >= 0) {
            if ((uint32_t)tie != r)
              hali_pass_emit(&out, rl, HALI_OP_TENSOR_OVERWRITE, 2,
                             hali_pr(map[r]), hali_pr(map[tie]));
            views[k] = (uint32_t)tie;
          } else {
            const char *n = f->reg_names && f->reg_names[r] ? f->reg_names[r] : "result";
            views[k] = hali_pass_reg(g, HALI_TYPE_BUFFER_VIEW, "%s.view", n);
            hali_pass_emit(&out, rl, HALI_OP_TENSOR_EXPORT, 2, hali_pr(views[k]),
                           hali_pr(map[r]));
          }
        } else if (abi_type(t) != t) {
          views[k] = hali_pass_reg(g, abi_type(t), "result%u", k);
          hali_pass_emit(&out, rl,
                         t == HALI_TYPE_I32     ? HALI_OP_EXT_S_I32_I64
                         : t == HALI_TYPE_INDEX ? HALI_OP_MOV_I64
                                                : HALI_OP_FPEXT_F32_F64,
                         2, hali_pr(views[k]), hali_pr(map[r]));
        } else {
          views[k] = map[r];
        }
      }
      hali_pass_emit(&out, rl, HALI_OP_TENSOR_BARRIER, 1, hali_pr(signal));
      hali_ir_insn_t *ret =
          hali_pass_emit_open(&out, rl, HALI_OP_RETURN, insn->operand_count, 0);
      for (uint32_t k = 0; k < insn->operand_count; ++k)
        hali_pass_set_operand(&out, ret, k, hali_pr(views[k]));
    }
    hali_ir_block_take(&g->blocks[b], &out.b);
    oom |= out.oom;
  }
  hali_pass_list_free(&pro);
  hali_free(map);
  if (oom) return hali_status_oom();
  return HALI_OK;
}

/* Rebuilds m->funcs[fi] as the synchronous wrapper of m->funcs[gi]. */
static hali_status_t build_wrapper(hali_ir_module_t *m, uint32_t fi,
                                   uint32_t gi) {
  hali_ir_func_t *f = &m->funcs[fi];
  const hali_ir_func_t *g = &m->funcs[gi];
  uint32_t np = g->param_count - 2;
  /* Keep what survives: parameter names and flags, attributes. */
  char **names = hali_calloc(np + 1, sizeof(char *));
  char **attrs = f->attrs;
  uint32_t nattrs = f->attr_count;
  uint8_t *pflags = f->param_flags;
  bool named = f->reg_names != NULL;
  if (!names) return hali_status_oom();
  for (uint32_t p = 0; named && p < np; ++p)
    names[p] = f->reg_names[p] ? hali_strdup(f->reg_names[p]) : NULL;
  uint32_t fline = f->line;
  f->attrs = NULL;
  f->attr_count = 0;
  f->param_flags = NULL;
  hali_pass_func_reset(f);
  f->line = fline;
  f->attrs = attrs;
  f->attr_count = nattrs;
  f->param_flags = pflags;
  bool oom = false;
  for (uint32_t p = 0; p < np; ++p) {
    if (named) oom |= hali_pass_reg(f, g->reg_types[p], "%s", names[p] ? names[p] : "arg") == UINT32_MAX;
    else oom |= hali_ir_func_add_reg(f, g->reg_types[p], NULL, 0) == UINT32_MAX;
    hali_free(names[p]);
  }
  hali_free(names);
  f->param_count = np;
  f->result_count = g->result_count;
  f->results = hali_malloc(g->result_count + 1);
  if (oom || !f->results)
    return hali_status_oom();
  memcpy(f->results, g->results, g->result_count);
#define REG(t, n) (named ? hali_pass_reg(f, t, n) : hali_ir_func_add_reg(f, t, NULL, 0))
  uint32_t device = REG(HALI_TYPE_DEVICE, "device");
  uint32_t wait = REG(HALI_TYPE_FENCE, "wait");
  uint32_t signal = REG(HALI_TYPE_FENCE, "signal");
  uint32_t res[64];
  for (uint32_t k = 0; k < g->result_count && k < 64; ++k)
    res[k] = named ? hali_pass_reg(f, g->results[k], "result%u", k)
                   : hali_ir_func_add_reg(f, g->results[k], NULL, 0);
  uint32_t forever = REG(HALI_TYPE_I64, "forever");
  uint32_t status = REG(HALI_TYPE_I32, "status");
#undef REG
  /* Every instruction carries the line of the function it wraps, so its
   * frame in a backtrace names the source. */
  uint32_t line = f->line;
  hali_insn_list_t entry = {0};
  hali_pass_emit(&entry, line, HALI_OP_HAL_DEVICE_GET, 1, hali_pr(device));
  hali_pass_emit(&entry, line, HALI_OP_HAL_FENCE_NULL, 1, hali_pr(wait));
  hali_pass_emit(&entry, line, HALI_OP_HAL_FENCE_CREATE, 2, hali_pr(signal),
                 hali_pr(device));
  hali_ir_insn_t *call = hali_pass_emit_open(&entry, line, HALI_OP_CALL,
                                             1 + g->param_count + g->result_count,
                                             1, hali_pref(HALI_IR_FUNC, gi));
  if (call) call->aux = (uint16_t)g->param_count;
  for (uint32_t p = 0; p < np; ++p)
    hali_pass_set_operand(&entry, call, 1 + p, hali_pr(p));
  hali_pass_set_operand(&entry, call, 1 + np, hali_pr(wait));
  hali_pass_set_operand(&entry, call, 2 + np, hali_pr(signal));
  for (uint32_t k = 0; k < g->result_count; ++k)
    hali_pass_set_operand(&entry, call, 1 + g->param_count + k, hali_pr(res[k]));
  /* A failed signal fence fails the await, and so this function, with the
   * work's status; waiting forever never times out, so %status is 0 after
   * it and needs no test. */
  hali_pass_emit(&entry, line, HALI_OP_CONST_I64, 2,
                 hali_pr(forever), hali_pk(m, -1));
  hali_pass_emit(&entry, line, HALI_OP_HAL_FENCE_AWAIT, 3, hali_pr(status),
                 hali_pr(signal), hali_pr(forever));
  hali_ir_insn_t *ret =
      hali_pass_emit_open(&entry, line, HALI_OP_RETURN, g->result_count, 0);
  for (uint32_t k = 0; k < g->result_count; ++k)
    hali_pass_set_operand(&entry, ret, k, hali_pr(res[k]));
  f->blocks = hali_calloc(1, sizeof(hali_ir_block_t));
  oom |= !f->blocks || entry.oom;
  if (oom) {
    hali_pass_list_free(&entry);
  } else {
    f->blocks[0].name = hali_strdup("entry");
    hali_ir_block_take(&f->blocks[0], &entry.b);
    f->block_count = 1;
    oom |= !f->blocks[0].name;
  }
  if (oom) return hali_status_oom();
  return HALI_OK;
}

/* Copies the types of placeholder |stub| into |out| (flags set to mark
 * it used). */
static hali_status_t save_signature(const hali_ir_func_t *stub,
                                    hali_ir_func_t *out) {
  out->flags = HALI_FUNC_ASYNC_STUB;
  out->param_count = stub->param_count;
  out->result_count = stub->result_count;
  out->reg_types = hali_malloc(stub->param_count + 1);
  out->results = hali_malloc(stub->result_count + 1);
  if (!out->reg_types || !out->results) return hali_status_oom();
  memcpy(out->reg_types, stub->reg_types, stub->param_count);
  memcpy(out->results, stub->results, stub->result_count);
  return HALI_OK;
}

/* The calls the assembler checked against the placeholder must fit what
 * was built (a binary module carries the placeholder's signature as
 * data, so a mismatch is bad input). */
static hali_status_t check_stub(const hali_ir_func_t *want,
                                const hali_ir_func_t *g) {
  bool same = want->param_count == g->param_count &&
              want->result_count == g->result_count;
  for (uint32_t i = 0; same && i < g->param_count; ++i)
    same = want->reg_types[i] == g->reg_types[i];
  for (uint32_t i = 0; same && i < g->result_count; ++i)
    same = want->results[i] == g->results[i];
  if (same) return HALI_OK;
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          PASS ": @%s: the module declares it (the "
                          "placeholder its callers were checked against) "
                          "with %u parameter(s) and %u result(s) of other "
                          "types than the %u and %u func-conversion makes",
                          g->name, want->param_count, want->result_count,
                          g->param_count, g->result_count);
}

hali_status_t hali_pass_func_conversion(hali_ir_module_t *m) {
  uint32_t n = m->func_count;
  for (uint32_t fi = 0; fi < n; ++fi)
    if (!skipped(m, &m->funcs[fi])) HALI_RETURN_IF_ERROR_PLAIN(check(m, fi));
  /* Where each converted function's f$async will be (appended in order),
   * and no recursion among them. */
  uint32_t *async_of = hali_malloc(((size_t)n + 1) * sizeof(uint32_t));
  uint32_t *path = hali_malloc(((size_t)n + 1) * sizeof(uint32_t));
  uint8_t *state = hali_calloc((size_t)n + 1, 1);
  hali_status_t s = HALI_OK;
  if (!async_of || !path || !state) s = hali_status_oom();
  /* A placeholder's signature, to hold the built f$async to. */
  hali_ir_func_t *stubs = hali_calloc((size_t)n + 1, sizeof(*stubs));
  if (!stubs) s = hali_status_oom();
  for (uint32_t fi = 0, next = n; fi < n && !s; ++fi) {
    bool stub = false;
    int32_t k = skipped(m, &m->funcs[fi]) ? -1 : find_async(m, &m->funcs[fi], &stub);
    async_of[fi] = skipped(m, &m->funcs[fi]) ? UINT32_MAX
                   : stub                    ? (uint32_t)k
                                             : next++;
    if (stub) s = save_signature(&m->funcs[k], &stubs[fi]);
  }
  for (uint32_t fi = 0; fi < n && !s; ++fi)
    if (async_of[fi] != UINT32_MAX && !state[fi])
      s = no_cycle(m, fi, state, path, 0);
  for (uint32_t fi = 0; fi < n && !s; ++fi) {
    if (async_of[fi] == UINT32_MAX) continue;
    uint32_t gi = async_of[fi] < n ? async_of[fi] : m->func_count;
    s = convert(m, fi, async_of, n);
    if (!s && stubs[fi].flags)
      s = check_stub(&stubs[fi], &m->funcs[gi]);
    if (!s) s = build_wrapper(m, fi, gi);
  }
  /* A placeholder nothing was built into: its @f was not converted. */
  for (uint32_t k = 0; k < n && !s; ++k)
    if (m->funcs[k].flags & HALI_FUNC_ASYNC_STUB)
      s = hali_status_make(
          HALI_STATUS_INVALID_ARGUMENT,
          PASS ": @%s is called (line %u) but func-conversion makes no such "
          "function: its tensor function is not converted (an \"external\" "
          "one, or one that has an $async form of its own)",
          m->funcs[k].name, m->funcs[k].line);
  for (uint32_t k = 0; stubs && k < n; ++k) {
    hali_free(stubs[k].reg_types);
    hali_free(stubs[k].results);
  }
  hali_free(stubs);
  hali_free(async_of);
  hali_free(path);
  hali_free(state);
  return s;
}
