/* hali — materialize-interfaces (doc/passes.md).
 *
 * For every executable export, derive the interface its signature implies
 * — tensor arguments are read-only storage bindings and tensor results
 * write bindings, numbered in order in set 0; i32/f32 scalars are one
 * 32-bit push constant and i64/f64 two, in order — record it on the
 * export, reject a declared layout that disagrees, and annotate every
 * tensor.dispatch with the bindings and constants it will push, after
 * checking its operands and results against the signature.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_util.h"
#include "base/alloc.h"
#include "passes/pipeline.h"

#define PASS "materialize-interfaces"

static hali_status_t export_error(const hali_ir_module_t *m,
                                  const hali_ir_executable_t *e,
                                  const hali_ir_export_t *x, const char *what,
                                  uint32_t index, const hali_ir_xtype_t *t) {
  hali_strbuf_t sb = {0};
  hali_ir_xtype_print(&sb, t);
  char *ts = hali_strbuf_take(&sb);
  hali_status_t s = hali_status_make(
      HALI_STATUS_INVALID_ARGUMENT,
      "%s: export @%s::@%s: %s %u has type %s, %s", PASS, e->name, x->name,
      what, index, ts ? ts : "?",
      strcmp(what, "result") == 0
          ? "but kernel results are tensors (write bindings)"
          : "which cannot be passed to a kernel (tensors are bindings; "
            "i32, index, i64, f32 and f64 are push constants)");
  hali_free(ts);
  (void)m;
  return s;
}

static hali_status_t materialize_export(const hali_ir_module_t *m,
                                        const hali_ir_executable_t *e,
                                        hali_ir_export_t *x) {
  uint32_t bindings = 0, constants = 0;
  for (uint32_t i = 0; i < x->param_count; ++i) {
    const hali_ir_xtype_t *t = &x->params[i];
    switch (t->type) {
    case HALI_TYPE_NONE: bindings++; break;
    case HALI_TYPE_I32:
    case HALI_TYPE_INDEX:
    case HALI_TYPE_F32: constants += 1; break;
    case HALI_TYPE_I64:
    case HALI_TYPE_F64: constants += 2; break;
    default: return export_error(m, e, x, "argument", i, t);
    }
  }
  for (uint32_t i = 0; i < x->result_count; ++i) {
    if (x->results[i].type != HALI_TYPE_NONE)
      return export_error(m, e, x, "result", i, &x->results[i]);
    bindings++;
  }
  if (x->layout_declared &&
      (x->layout_bindings != bindings || x->layout_constants != constants))
    return hali_status_make(
        HALI_STATUS_INVALID_ARGUMENT,
        "%s: export @%s::@%s declares layout(constants %u, bindings %u) but "
        "its signature implies layout(constants %u, bindings %u)",
        PASS, e->name, x->name, x->layout_constants, x->layout_bindings,
        constants, bindings);
  x->layout_materialized = true;
  x->layout_bindings = bindings;
  x->layout_constants = constants;
  return HALI_OK;
}

/* Does a value of shape |have| fit a signature slot of shape |want|? */
static bool fits(const hali_ir_xtype_t *have, const hali_ir_xtype_t *want) {
  if (have->element_type != want->element_type || have->rank != want->rank)
    return false;
  for (uint32_t d = 0; d < have->rank; ++d)
    if (want->dims[d] >= 0 && have->dims[d] >= 0 && want->dims[d] != have->dims[d])
      return false;
  return true;
}

static char *fmt(const hali_ir_xtype_t *x) {
  hali_strbuf_t sb = {0};
  hali_ir_xtype_print(&sb, x);
  return hali_strbuf_take(&sb);
}

static hali_status_t annotate(const hali_ir_module_t *m, const hali_ir_func_t *f,
                              hali_ir_insn_t *insn, uint32_t index) {
  hali_ir_operand_t *o = insn->operands;
  if (o[HALI_TD_EXE].v >= m->executable_count)
    return hali_pass_error(PASS, m, f, insn, index, "bad executable");
  const hali_ir_executable_t *e = &m->executables[o[HALI_TD_EXE].v];
  if ((uint64_t)hali_ir_imm(m, &o[HALI_TD_EXPORT]) >= e->export_count)
    return hali_pass_error(PASS, m, f, insn, index, "bad export");
  const hali_ir_export_t *x = &e->exports[hali_ir_imm(m, &o[HALI_TD_EXPORT])];
  hali_ir_dispatch_t dl = hali_ir_dispatch(insn);
  uint32_t na = dl.noperands, nr = dl.nresults, a0 = dl.operands;
  if (na != x->param_count || nr != x->result_count)
    return hali_pass_error(PASS, m, f, insn, index,
                           "@%s::@%s takes %u operand(s) and gives %u "
                           "result(s); the dispatch passes %u and takes %u",
                           e->name, x->name, x->param_count, x->result_count,
                           na, nr);
  for (uint32_t k = 0; k < na + nr; ++k) {
    uint32_t r = o[a0 + k].v;
    const hali_ir_xtype_t *want =
        k < na ? &x->params[k] : &x->results[k - na];
    hali_type_t t = f->reg_types[r];
    bool ok;
    hali_ir_xtype_t scalar = {t, 0, 0, NULL};
    const hali_ir_xtype_t *have = &scalar;
    if (t == HALI_TYPE_TENSOR) {
      have = &f->reg_xtypes[r];
      ok = want->type == HALI_TYPE_NONE && fits(have, want);
    } else {
      ok = want->type == t;
    }
    if (!ok) {
      char *hs = fmt(have), *ws = fmt(want);
      hali_status_t s = hali_pass_error(
          PASS, m, f, insn, index, "%s %u is %s but @%s::@%s expects %s",
          k < na ? "operand" : "result", k < na ? k : k - na, hs ? hs : "?",
          e->name, x->name, ws ? ws : "?");
      hali_free(hs);
      hali_free(ws);
      return s;
    }
  }
  hali_ir_set_imm_u32(&o[HALI_TD_BINDINGS], x->layout_bindings);
  hali_ir_set_imm_u32(&o[HALI_TD_CONSTANTS], x->layout_constants);
  return HALI_OK;
}

static hali_status_t materialize(hali_ir_module_t *m, bool sites) {
  for (uint32_t i = 0; i < m->executable_count; ++i)
    for (uint32_t k = 0; k < m->executables[i].export_count; ++k)
      HALI_RETURN_IF_ERROR_PLAIN(materialize_export(
          m, &m->executables[i], &m->executables[i].exports[k]));
  for (uint32_t fi = 0; sites && fi < m->func_count; ++fi) {
    hali_ir_func_t *f = &m->funcs[fi];
    for (uint32_t b = 0; b < f->block_count; ++b)
      for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i)
        if (f->blocks[b].insns[i].op == HALI_OP_TENSOR_DISPATCH)
          HALI_RETURN_IF_ERROR_PLAIN(annotate(m, f, &f->blocks[b].insns[i], i));
  }
  /* An index parameter is one 32-bit push constant: the kernel receives
   * it as an i32 (the sites were checked against `index` above). */
  for (uint32_t i = 0; i < m->executable_count; ++i)
    for (uint32_t k = 0; k < m->executables[i].export_count; ++k) {
      hali_ir_export_t *x = &m->executables[i].exports[k];
      for (uint32_t a = 0; a < x->param_count; ++a)
        if (x->params[a].type == HALI_TYPE_INDEX) x->params[a].type = HALI_TYPE_I32;
    }
  return HALI_OK;
}

hali_status_t hali_pass_materialize_interfaces(hali_ir_module_t *m) {
  return materialize(m, true);
}

hali_status_t hali_pass_materialize_exports(hali_ir_module_t *m) {
  return materialize(m, false);
}
