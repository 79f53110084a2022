/* hali — the structural check (hali_ir_verify_structure).
 *
 * Runs on every module the reader or the assembler produces, before the
 * load-time passes; hali_ir_verify (vm/verify.c) proves types and dataflow
 * on their output.  vm/verify_int.h holds what the two share.
 */
#include <stdlib.h>
#include <string.h>

#include "hal/buffer_view.h"
#include "base/alloc.h"
#include "vm/strmap.h"
#include "vm/verify_int.h"

/* ------------------------------------------------------------------------ */
/* Structure: what the load-time passes rely on.
 *
 * The passes run before hali_ir_verify, on modules that may still hold
 * tensor-level code, so they may see anything a corrupted .hbc can carry.
 * This mode accepts tensor types and tensor ops but proves every index,
 * count and kind the passes (and the printer) dereference: operand indices
 * of every kind are in range; each tensor op has the operand layout of
 * its signature (vm/ops_tensor.def: fixed operands with their kinds and
 * register types, then counted lists); every tensor
 * register has a tensor shape; returns give one value per result; result
 * ties name tensor parameters; tied and copied tensors agree in element
 * type and rank.  Types of ordinary ops are left to hali_ir_verify, which
 * runs on the passes' output. */

static hali_status_t check_xtype(const vctx_t *v, const hali_ir_xtype_t *x,
                                 const char *what, uint32_t index) {
  if (x->type != HALI_TYPE_NONE) {
    if (!hali_type_is_valid(x->type) && x->type != HALI_TYPE_INDEX)
      return hali_verr(v, "%s %u has unknown type code %u", what, index,
                       x->type);
    return HALI_OK;
  }
  if (!hali_hal_element_type_is_known(x->element_type))
    return hali_verr(v, "%s %u has unknown element type 0x%08x", what, index,
                     x->element_type);
  if (x->rank > HALI_HAL_MAX_RANK)
    return hali_verr(v, "%s %u has rank %u (at most %d)", what, index, x->rank,
                     HALI_HAL_MAX_RANK);
  if (x->rank && !x->dims)
    return hali_verr(v, "%s %u has no dimensions", what, index);
  /* Byte sizes are computed in 64 bits by the passes: keep the static
   * part well inside. */
  uint64_t bytes = (hali_hal_element_type_bit_count(x->element_type) + 7) / 8;
  if (!bytes) bytes = 1;
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (x->dims[d] < -1)
      return hali_verr(v, "%s %u: dimension %u is %lld", what, index, d,
                       (long long)x->dims[d]);
    if (x->dims[d] > 0 && bytes > (UINT64_C(1) << 48) / (uint64_t)x->dims[d])
      return hali_verr(v,
                       "%s %u: the static dimensions make more than 2^48 bytes",
                       what, index);
    if (x->dims[d] > 0) bytes *= (uint64_t)x->dims[d];
  }
  return HALI_OK;
}

/* check_reg for tensor-level code, where an index register stands for an
 * i64 on the host (dims, workloads). */
static hali_status_t s_reg(const vctx_t *v, uint32_t i, hali_type_t want) {
  const hali_ir_operand_t *o = &v->insn->operands[i];
  if (want == HALI_TYPE_I64 && o->kind == HALI_IR_REG &&
      o->v < v->f->reg_count && v->f->reg_types[o->v] == HALI_TYPE_INDEX)
    return HALI_OK;
  return hali_verify_check_reg(v, i, want);
}

static hali_status_t s_imm(const vctx_t *v, uint32_t i, int64_t lo, int64_t hi,
                           const char *what) {
  const hali_ir_operand_t *o = &v->insn->operands[i];
  if (o->kind != HALI_IR_IMM)
    return hali_verr(v, "operand %u (%s) must be an immediate", i, what);
  const int64_t x = hali_ir_imm(v->m, o);
  if (x < lo || x > hi)
    return hali_verr(v, "operand %u: %s %lld is out of range [%lld, %lld]", i,
                     what, (long long)x, (long long)lo, (long long)hi);
  return HALI_OK;
}

static const hali_ir_xtype_t *s_shape(const vctx_t *v, uint32_t i) {
  return &v->f->reg_xtypes[v->insn->operands[i].v];
}

/* Tensors |a| and |b| (operands) may hold the same value: same element
 * type and rank, and equal where both dimensions are static. */
static hali_status_t s_same_shape(const vctx_t *v, uint32_t a, uint32_t b,
                                  const char *what) {
  const hali_ir_xtype_t *x = s_shape(v, a), *y = s_shape(v, b);
  bool ok = x->element_type == y->element_type && x->rank == y->rank;
  for (uint32_t d = 0; ok && d < x->rank; ++d)
    ok = x->dims[d] < 0 || y->dims[d] < 0 || x->dims[d] == y->dims[d];
  if (!ok) {
    hali_strbuf_t sa = {0}, sb = {0};
    hali_ir_xtype_print(&sa, x);
    hali_ir_xtype_print(&sb, y);
    char *ta = hali_strbuf_take(&sa), *tb = hali_strbuf_take(&sb);
    hali_status_t s = hali_verr(v, "%s: operand %u is %s but operand %u is %s",
                                what, a, ta ? ta : "?", b, tb ? tb : "?");
    hali_free(ta);
    hali_free(tb);
    return s;
  }
  return HALI_OK;
}

/* Operands [first, first + n) are the i64 registers giving the dynamic
 * dimensions of the tensor in operand |t|: exactly that many. */
static hali_status_t s_dyn_dims(const vctx_t *v, uint32_t t, uint32_t first,
                                uint64_t have) {
  uint32_t want = hali_ir_xtype_dynamic_dims(s_shape(v, t));
  if (have != want)
    return hali_verr(v,
                     "operand %u has %u dynamic dimension(s) but %llu are "
                     "given",
                     t, want, (unsigned long long)have);
  for (uint32_t k = 0; k < want; ++k)
    HALI_RETURN_IF_ERROR_PLAIN(s_reg(v, first + k, HALI_TYPE_I64));
  return HALI_OK;
}

static hali_status_t s_count(const vctx_t *v, uint32_t n) {
  if (v->insn->operand_count != n)
    return hali_verr(v, "has %u operand(s), expected %u",
                     v->insn->operand_count, n);
  return HALI_OK;
}

static hali_status_t s_dispatch(const vctx_t *v) {
  const hali_ir_insn_t *insn = v->insn;
  const hali_ir_operand_t *o = insn->operands;
  uint32_t n = insn->operand_count;
  if (n < HALI_TD_HEADER)
    return hali_verr(v, "has %u operand(s), a dispatch has at least %u", n,
                     HALI_TD_HEADER);
  if (o[HALI_TD_EXE].kind != HALI_IR_EXECUTABLE ||
      o[HALI_TD_EXE].v >= v->m->executable_count)
    return hali_verr(v, "operand 0 must be an executable of the module's %u",
                     v->m->executable_count);
  const hali_ir_executable_t *e = &v->m->executables[o[HALI_TD_EXE].v];
  if (!e->export_count)
    return hali_verr(v, "executable @%s has no exports", e->name);
  HALI_RETURN_IF_ERROR_PLAIN(
      s_imm(v, HALI_TD_EXPORT, 0, (int64_t)e->export_count - 1, "export"));
  HALI_RETURN_IF_ERROR_PLAIN(
      s_imm(v, HALI_TD_NWORKLOAD, 0, HALI_HAL_MAX_RANK, "workload count"));
  HALI_RETURN_IF_ERROR_PLAIN(s_imm(v, HALI_TD_NOPERANDS, 0, n, "operand count"));
  HALI_RETURN_IF_ERROR_PLAIN(s_imm(v, HALI_TD_NRESULTS, 0, n, "result count"));
  HALI_RETURN_IF_ERROR_PLAIN(s_imm(v, HALI_TD_BINDINGS, -1, UINT32_MAX, "bindings"));
  HALI_RETURN_IF_ERROR_PLAIN(s_imm(v, HALI_TD_CONSTANTS, -1, UINT32_MAX, "constants"));
  /* `interface(bindings N, constants M)` declares both or neither (the
   * text can say nothing else: a half-declared one would print as none). */
  const int64_t nb = hali_ir_imm(v->m, &o[HALI_TD_BINDINGS]),
                nc = hali_ir_imm(v->m, &o[HALI_TD_CONSTANTS]);
  if ((nb < 0) != (nc < 0))
    return hali_verr(v,
                     "declares %s of its interface (bindings %lld, constants "
                     "%lld): an interface declares both counts or neither",
                     nb < 0 ? "only the constants" : "only the bindings",
                     (long long)nb, (long long)nc);
  /* The counts are in range, so the lists are filled even when they do
   * not fit (dl.dims says how many operands they need; only past 2^32
   * operands, which no memory holds, would it stay 0). */
  hali_ir_dispatch_t dl = {0};
  bool fits = hali_ir_dispatch_lists(insn, &dl);
  uint32_t nw = dl.nworkload, na = dl.noperands, nr = dl.nresults;
  uint64_t d0 = dl.dims;
  if (!fits)
    return hali_verr(v,
                     "has %u operand(s) but its counts (%u workload, %u "
                     "operands, %u results) need %llu",
                     n, nw, na, nr, (unsigned long long)d0);
  uint32_t a0 = dl.operands, r0 = dl.results, t0 = dl.ties;
  for (uint32_t k = dl.workload; k < a0; ++k)
    if (o[k].kind == HALI_IR_IMM)
      HALI_RETURN_IF_ERROR_PLAIN(s_imm(v, k, 0, UINT32_MAX, "workload"));
    else
      HALI_RETURN_IF_ERROR_PLAIN(s_reg(v, k, HALI_TYPE_I64));
  for (uint32_t k = a0; k < r0; ++k)
    HALI_RETURN_IF_ERROR_PLAIN(s_reg(v, k, HALI_TYPE_NONE));
  uint64_t ndyn = 0;
  for (uint32_t k = r0; k < t0; ++k) {
    HALI_RETURN_IF_ERROR_PLAIN(s_reg(v, k, HALI_TYPE_TENSOR));
    ndyn += hali_ir_xtype_dynamic_dims(s_shape(v, k));
  }
  if (d0 + ndyn != n)
    return hali_verr(v,
                     "has %u operand(s); its layout needs %llu (%llu dynamic "
                     "result dimension(s))",
                     n, (unsigned long long)(d0 + ndyn),
                     (unsigned long long)ndyn);
  for (uint32_t k = 0; k < nr; ++k) {
    HALI_RETURN_IF_ERROR_PLAIN(s_imm(v, t0 + k, -1, (int64_t)na - 1, "tie"));
    int64_t tie = hali_ir_imm(v->m, &o[t0 + k]);
    if (tie < 0) continue;
    HALI_RETURN_IF_ERROR_PLAIN(s_reg(v, a0 + (uint32_t)tie, HALI_TYPE_TENSOR));
    HALI_RETURN_IF_ERROR_PLAIN(
        s_same_shape(v, r0 + k, a0 + (uint32_t)tie, "a tied result"));
  }
  uint32_t d = (uint32_t)d0;
  for (uint32_t k = r0; k < t0; ++k) {
    uint32_t nd = hali_ir_xtype_dynamic_dims(s_shape(v, k));
    HALI_RETURN_IF_ERROR_PLAIN(s_dyn_dims(v, k, d, nd));
    d += nd;
  }
  return HALI_OK;
}

/* The fixed operands of a tensor op other than dispatch, from its
 * signature (vm/ops_tensor.def): their number (exactly, or at least when
 * lists follow), then each one's kind and register type in order. */
static hali_status_t s_fixed(const vctx_t *v, const hali_op_info_t *info) {
  const hali_ir_insn_t *insn = v->insn;
  uint32_t n = insn->operand_count;
  if (!info->list_count)
    HALI_RETURN_IF_ERROR_PLAIN(s_count(v, info->operand_count));
  else if (n < info->operand_count)
    return hali_verr(v, "has %u operand(s), expected at least %u", n,
                     (unsigned)info->operand_count);
  for (uint32_t i = 0; i < info->operand_count; ++i) {
    const hali_operand_desc_t *d = &info->operands[i];
    switch (d->role) {
    case HALI_ROLE_WRITE:
    case HALI_ROLE_READ:
    case HALI_ROLE_IN_PLACE:
      HALI_RETURN_IF_ERROR_PLAIN(s_reg(v, i, d->type));
      break;
    case HALI_ROLE_IMM: /* tensor.dim's dimension: its range is checked below */
      if (insn->operands[i].kind != HALI_IR_IMM)
        return hali_verr(v, "operand %u must be an immediate", i);
      break;
    case HALI_ROLE_RODATA:
      if (insn->operands[i].kind != HALI_IR_RODATA ||
          insn->operands[i].v >= v->m->rodata_count)
        return hali_verr(v, "operand %u must be rodata of the module's %u", i,
                         v->m->rodata_count);
      break;
    case HALI_ROLE_STRING: /* tensor.trace's label */
      if (insn->operands[i].kind != HALI_IR_STRING ||
          insn->operands[i].v >= v->m->string_count)
        return hali_verr(v, "operand %u must be a string of the module's %u",
                         i, v->m->string_count);
      break;
    case HALI_ROLE_GLOBAL:
      if (insn->operands[i].kind != HALI_IR_GLOBAL ||
          insn->operands[i].v >= v->m->global_count ||
          v->m->globals[insn->operands[i].v].type != HALI_TYPE_TENSOR)
        return hali_verr(v, "operand %u must be a tensor global of the "
                            "module's %u globals",
                         i, v->m->global_count);
      break;
    default:
      return hali_verr(v, "internal: operand %u of role '%c'", i, d->role);
    }
  }
  return HALI_OK;
}

/* Operands [first, first + rank): a slice's or update's offsets, each an
 * immediate >= 0 or an i64 register. */
static hali_status_t s_offsets(const vctx_t *v, uint32_t first, uint32_t rank) {
  for (uint32_t k = 0; k < rank; ++k) {
    if (v->insn->operands[first + k].kind == HALI_IR_IMM)
      HALI_RETURN_IF_ERROR_PLAIN(s_imm(v, first + k, 0, INT64_MAX, "offset"));
    else
      HALI_RETURN_IF_ERROR_PLAIN(s_reg(v, first + k, HALI_TYPE_I64));
  }
  return HALI_OK;
}

/* A tensor op: its layout from the table (s_fixed; dispatch has its own
 * messages for its header and lists), then what the signature cannot say:
 * shapes that must agree and the number of dynamic dimensions. */
static hali_status_t s_tensor_insn(const vctx_t *v,
                                   const hali_op_info_t *info) {
  const hali_ir_insn_t *insn = v->insn;
  uint32_t n = insn->operand_count;
  if (insn->op == HALI_OP_TENSOR_DISPATCH) return s_dispatch(v);
  HALI_RETURN_IF_ERROR_PLAIN(s_fixed(v, info));
  switch (insn->op) {
  case HALI_OP_TENSOR_SPLAT:
  case HALI_OP_TENSOR_IMPORT: /* [rl*]: the result's dynamic dimensions */
    return s_dyn_dims(v, 0, info->operand_count, n - info->operand_count);
  case HALI_OP_TENSOR_CONSTANT:
    if (hali_ir_xtype_dynamic_dims(s_shape(v, 0)))
      return hali_verr(v, "a constant's shape must be static");
    return HALI_OK;
  case HALI_OP_TENSOR_GLOBAL_LOAD:
  case HALI_OP_TENSOR_GLOBAL_STORE: {
    bool load = insn->op == HALI_OP_TENSOR_GLOBAL_LOAD;
    const hali_ir_global_t *g = &v->m->globals[insn->operands[load ? 1 : 0].v];
    if (!hali_ir_xtype_equal(s_shape(v, load ? 0 : 1), &g->xtype))
      return hali_verr(v, "the tensor's type is not global @%s's", g->name);
    if (!load && !(g->flags & HALI_GLOBAL_MUTABLE) &&
        !hali_ir_func_has_attr(v->f, HALI_ATTR_INITIALIZER))
      return hali_verr(v,
                       "stores immutable global @%s: only an initializer "
                       "(attributes [\"initializer\"]) may store it; "
                       "declare it 'mutable' to store it elsewhere",
                       g->name);
    if (!load && (g->flags & HALI_GLOBAL_PARAMETER))
      return hali_verr(v, "stores parameter global @%s (its value is the "
                          "archive's)", g->name);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_DIM: {
    const int64_t d = hali_ir_imm(v->m, &insn->operands[2]);
    if (d < 0 || (uint64_t)d >= s_shape(v, 1)->rank)
      return hali_verr(v, "dimension %lld of a tensor of rank %u",
                       (long long)d, s_shape(v, 1)->rank);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_NUMEL:
    return HALI_OK;
  case HALI_OP_TENSOR_RESHAPE:
    if (s_shape(v, 0)->element_type != s_shape(v, 1)->element_type)
      return hali_verr(v, "a reshape keeps the element type");
    return s_dyn_dims(v, 0, info->operand_count, n - info->operand_count);
  case HALI_OP_TENSOR_SLICE: {
    uint32_t rank = s_shape(v, 1)->rank;
    if (n < 2 + rank)
      return hali_verr(v, "has %u operand(s); a slice of a rank-%u tensor "
                          "needs %u offsets", n, rank, rank);
    if (s_shape(v, 0)->element_type != s_shape(v, 1)->element_type ||
        s_shape(v, 0)->rank != rank)
      return hali_verr(v, "a slice keeps the element type and rank");
    HALI_RETURN_IF_ERROR_PLAIN(s_offsets(v, 2, rank));
    return s_dyn_dims(v, 0, 2 + rank, n - 2 - rank);
  }
  case HALI_OP_TENSOR_UPDATE: {
    uint32_t rank = s_shape(v, 2)->rank;
    HALI_RETURN_IF_ERROR_PLAIN(s_count(v, 3 + rank));
    if (s_shape(v, 1)->element_type != s_shape(v, 2)->element_type ||
        s_shape(v, 1)->rank != rank)
      return hali_verr(v, "an update's value has its target's element type "
                          "and rank");
    HALI_RETURN_IF_ERROR_PLAIN(s_same_shape(v, 0, 2, "an update"));
    return s_offsets(v, 3, rank);
  }
  case HALI_OP_TENSOR_TRACE:
    return HALI_OK;
  case HALI_OP_TENSOR_ALL_REDUCE:
  case HALI_OP_TENSOR_REDUCE_SCATTER:
  case HALI_OP_TENSOR_ALL_GATHER:
  case HALI_OP_TENSOR_ALL_TO_ALL: {
    bool reduces = insn->op == HALI_OP_TENSOR_ALL_REDUCE ||
                   insn->op == HALI_OP_TENSOR_REDUCE_SCATTER;
    const int64_t red = reduces ? hali_ir_imm(v->m, &insn->operands[2]) : 1;
    if (red < 1 || red > 5)
      return hali_verr(v, "reduction %lld is not 1 (sum) to 5 (average)",
                       (long long)red);
    if (insn->op == HALI_OP_TENSOR_ALL_REDUCE)
      return s_same_shape(v, 0, 1, "an all_reduce");
    const hali_ir_xtype_t *a = s_shape(v, 0), *b = s_shape(v, 1);
    if (insn->op == HALI_OP_TENSOR_ALL_TO_ALL) {
      if (!a->rank) return hali_verr(v, "an all_to_all needs a rank >= 1");
      return s_same_shape(v, 0, 1, "an all_to_all");
    }
    bool same = a->element_type == b->element_type && a->rank == b->rank &&
                a->rank > 0;
    for (uint32_t d = 1; same && d < a->rank; ++d)
      same = a->dims[d] == b->dims[d];
    if (!same)
      return hali_verr(v, "the result keeps the element type, the rank (at "
                          "least 1) and every dimension but the first");
    return HALI_OK;
  }
  case HALI_OP_TENSOR_SEND:
    return HALI_OK;
  case HALI_OP_TENSOR_RECV:
    return s_dyn_dims(v, 0, info->operand_count, n - info->operand_count);
  case HALI_OP_TENSOR_CLONE:
  case HALI_OP_TENSOR_OVERWRITE:
    return s_same_shape(v, 0, 1,
                        insn->op == HALI_OP_TENSOR_CLONE ? "a clone"
                                                         : "an overwrite");
  default:
    if (info->list_count)
      return hali_verr(v, "internal: tensor op without a list check");
    return HALI_OK;
  }
}

/* Any other op: every operand's kind is known and its index in range;
 * calls name a function and returns give one value per result. */
static hali_status_t s_plain_insn(const vctx_t *v) {
  const hali_ir_insn_t *insn = v->insn;
  const hali_ir_module_t *m = v->m;
  for (uint32_t i = 0; i < insn->operand_count; ++i) {
    const hali_ir_operand_t *o = &insn->operands[i];
    uint32_t limit;
    const char *what;
    switch (o->kind) {
    case HALI_IR_IMM: continue;
    case HALI_IR_REG: limit = v->f->reg_count; what = "register"; break;
    case HALI_IR_BLOCK: limit = v->f->block_count; what = "block"; break;
    case HALI_IR_STRING: limit = m->string_count; what = "string"; break;
    case HALI_IR_FUNC: limit = m->func_count; what = "function"; break;
    case HALI_IR_RODATA: limit = m->rodata_count; what = "rodata"; break;
    case HALI_IR_GLOBAL: limit = m->global_count; what = "global"; break;
    case HALI_IR_EXECUTABLE:
      limit = m->executable_count;
      what = "executable";
      break;
    default: return hali_verr(v, "operand %u has unknown kind %u", i, o->kind);
    }
    if (o->v >= limit)
      return hali_verr(v, "operand %u: %s %u out of range (%u)", i, what, o->v,
                       limit);
  }
  if (hali_op_is_call(insn->op) &&
      (insn->operand_count < 1 || insn->operands[0].kind != HALI_IR_FUNC ||
       insn->aux >= insn->operand_count))
    return hali_verr(v, "a call needs a callee and at most %u argument(s)",
                     insn->operand_count ? insn->operand_count - 1 : 0);
  if (insn->op == HALI_OP_RETURN && insn->operand_count != v->f->result_count)
    return hali_verr(v, "returns %u value(s), function returns %u",
                     insn->operand_count, v->f->result_count);
  /* Tensor-level types are rewritten by the passes (index -> i64), after
   * which a mismatch would go unseen: the assembler's rule, here. */
  for (uint32_t k = 0; insn->op == HALI_OP_RETURN && k < insn->operand_count;
       ++k) {
    const hali_ir_operand_t *o = &insn->operands[k];
    hali_type_t want = v->f->results[k];
    hali_type_t got = o->kind == HALI_IR_REG ? v->f->reg_types[o->v]
                                             : HALI_TYPE_NONE;
    bool level = want == HALI_TYPE_INDEX || want == HALI_TYPE_TENSOR ||
                 got == HALI_TYPE_INDEX || got == HALI_TYPE_TENSOR;
    if (level && got != want)
      return hali_verr(v, "return value %u is %s, the function returns %s",
                       k, o->kind == HALI_IR_REG ? hali_type_name(got)
                                                 : "not a register",
                       hali_type_name(want));
  }
  return HALI_OK;
}

/* Register names unique per function, as written: the passes rename and
 * drop registers, so the verifier's own check (vm/verify.c) could miss two
 * registers of the text sharing a name, which dis would print as one. */
static hali_status_t s_reg_names(vctx_t *v) {
  const hali_ir_func_t *f = v->f;
  if (!f->reg_names) return HALI_OK;
  /* One map for every function of the module (hali_ir_verify_structure). */
  hali_strmap_clear(v->names);
  for (uint32_t r = 0; r < f->reg_count; ++r) {
    const char *n = f->reg_names[r];
    if (!n) continue;
    uint32_t k = hali_strmap_insert(v->names, n, strlen(n), r);
    if (k == HALI_STRMAP_NONE)
      return hali_status_annotate(hali_status_oom(), "checking register names");
    if (k != r)
      return hali_verr(v, "registers %u and %u are both named %%%s", k, r, n);
  }
  return HALI_OK;
}

hali_status_t hali_verify_s_header(vctx_t *v, bool names) {
  const hali_ir_func_t *f = v->f;
  if (!f->name || !f->name[0]) return hali_verr(v, "function has no name");
  if (names) HALI_RETURN_IF_ERROR_PLAIN(s_reg_names(v));
  if (f->param_count > f->reg_count)
    return hali_verr(v, "%u parameters but only %u registers", f->param_count,
                     f->reg_count);
  if (f->reg_count && !f->reg_types)
    return hali_verr(v, "registers have no types");
  if (f->result_count && !f->results)
    return hali_verr(v, "results have no types");
  for (uint32_t r = 0; r < f->reg_count; ++r) {
    if (!hali_type_is_valid_tensor_level(f->reg_types[r]))
      return hali_verr(v, "register %u has unknown type code %u", r,
                       f->reg_types[r]);
    if (f->reg_types[r] != HALI_TYPE_TENSOR) continue;
    if (!f->reg_xtypes || f->reg_xtypes[r].type != HALI_TYPE_NONE)
      return hali_verr(v, "tensor register %u has no tensor shape", r);
    HALI_RETURN_IF_ERROR_PLAIN(check_xtype(v, &f->reg_xtypes[r], "register", r));
  }
  for (uint32_t k = 0; k < f->result_count; ++k) {
    if (!hali_type_is_valid_tensor_level(f->results[k]))
      return hali_verr(v, "result %u has unknown type code %u", k,
                       f->results[k]);
    if (f->result_xtypes && f->results[k] == HALI_TYPE_TENSOR) {
      if (f->result_xtypes[k].type != HALI_TYPE_NONE)
        return hali_verr(v, "tensor result %u has no tensor shape", k);
      HALI_RETURN_IF_ERROR_PLAIN(
          check_xtype(v, &f->result_xtypes[k], "result", k));
    }
    int32_t tie = f->result_ties ? f->result_ties[k] : -1;
    if (tie == -1) continue;
    /* A tie joins a tensor result to a tensor parameter; after
     * func-conversion (f$async, which hali dis --after prints and which
     * must read back) a buffer view result to a buffer view parameter. */
    if (tie < 0 || (uint32_t)tie >= f->param_count ||
        !((f->reg_types[tie] == HALI_TYPE_TENSOR &&
           f->results[k] == HALI_TYPE_TENSOR) ||
          (f->reg_types[tie] == HALI_TYPE_BUFFER_VIEW &&
           f->results[k] == HALI_TYPE_BUFFER_VIEW)))
      return hali_verr(v,
                       "result %u is tied to parameter %d: ties join a tensor "
                       "result to one of the %u tensor parameters (or a "
                       "buffer view result to a buffer view parameter)",
                       k, tie, f->param_count);
  }
  if ((f->block_count && !f->blocks) ||
      ((f->flags & HALI_FUNC_IMPORT) && f->block_count))
    return hali_verr(v, "malformed body");
  return HALI_OK;
}

hali_status_t hali_verify_s_block(vctx_t *v, uint32_t b) {
  const hali_ir_block_t *blk = &v->f->blocks[b];
  v->block = b;
  uint32_t depth = 0;
  for (uint32_t i = 0; i < blk->insn_count; ++i) {
    v->index = i;
    v->insn = &blk->insns[i];
    const hali_op_info_t *info = hali_op_info(v->insn->op);
    if (!info) return hali_verr(v, "unknown opcode %u", v->insn->op);
    if (v->insn->operand_count && !v->insn->operands)
      return hali_verr(v, "operands missing");
    if (!(info->flags & HALI_OPF_TENSOR)) {
      HALI_RETURN_IF_ERROR_PLAIN(s_plain_insn(v));
      continue;
    }
    HALI_RETURN_IF_ERROR_PLAIN(s_tensor_insn(v, info));
    if (v->insn->op == HALI_OP_TENSOR_EXECUTE ||
        v->insn->op == HALI_OP_TENSOR_CONCURRENT)
      depth++;
    else if (v->insn->op == HALI_OP_TENSOR_END && depth-- == 0)
      return hali_verr(v, "`}` closes no execute or concurrent group");
  }
  v->insn = NULL;
  if (depth)
    return hali_verr(v, "block %u leaves %u execute/concurrent group(s) open",
                     b, depth);
  return HALI_OK;
}

static hali_status_t s_func(vctx_t *v) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_verify_s_header(v, true));
  for (uint32_t b = 0; b < v->f->block_count; ++b)
    HALI_RETURN_IF_ERROR_PLAIN(hali_verify_s_block(v, b));
  v->insn = NULL;
  return HALI_OK;
}

hali_status_t hali_verify_s_module(vctx_t *vp) {
  vctx_t v = *vp;
  const hali_ir_module_t *m = v.m;
  if (m->string_count && (!m->strings || !m->string_lengths))
    return hali_verr(&v, "malformed string table");
  for (uint32_t i = 0; i < m->rodata_count; ++i)
    if (!m->rodata[i].name || (m->rodata[i].size && !m->rodata[i].data))
      return hali_verr(&v, "rodata %u is malformed", i);
  for (uint32_t i = 0; i < m->executable_count; ++i) {
    const hali_ir_executable_t *e = &m->executables[i];
    if (!e->name) return hali_verr(&v, "executable %u has no name", i);
    for (uint32_t k = 0; k < e->export_count; ++k) {
      const hali_ir_export_t *x = &e->exports[k];
      if (!x->name)
        return hali_verr(&v, "export %u of @%s has no name", k, e->name);
      if (x->function != UINT32_MAX && x->function >= m->func_count)
        return hali_verr(&v,
                         "export @%s::@%s names function %u but the module "
                         "has %u",
                         e->name, x->name, x->function, m->func_count);
      if ((x->count_function != UINT32_MAX) !=
          ((x->flags & HALI_EXPORT_COUNT_FUNCTION) != 0))
        return hali_verr(&v, "export @%s::@%s: the workgroup-count flag and "
                             "function disagree", e->name, x->name);
      if (x->count_function != UINT32_MAX) {
        if (x->count_function >= m->func_count)
          return hali_verr(&v,
                           "export @%s::@%s names workgroup-count function %u "
                           "but the module has %u",
                           e->name, x->name, x->count_function, m->func_count);
        const hali_ir_func_t *cf = &m->funcs[x->count_function];
        bool ok = cf->param_count >= 1 && cf->result_count == 3;
        for (uint32_t a = 0; ok && a < cf->param_count; ++a)
          ok = cf->reg_types[a] == HALI_TYPE_I64;
        for (uint32_t a = 0; ok && a < 3; ++a)
          ok = cf->results[a] == HALI_TYPE_I64;
        if (!ok)
          return hali_verr(&v,
                           "export @%s::@%s: workgroup-count function @%s "
                           "takes %u parameter(s) and returns %u result(s); "
                           "it must take the workload's dimensions (i64 "
                           "each, at least one) and return the counts x, y, "
                           "z (i64, i64, i64)",
                           e->name, x->name, cf->name, cf->param_count,
                           cf->result_count);
      }
      for (uint32_t a = 0; a < x->param_count + x->result_count; ++a) {
        bool arg = a < x->param_count;
        HALI_RETURN_IF_ERROR_PLAIN(check_xtype(
            &v, arg ? &x->params[a] : &x->results[a - x->param_count],
            arg ? "export argument" : "export result",
            arg ? a : a - x->param_count));
      }
    }
  }
  for (uint32_t i = 0; i < m->global_count; ++i) {
    const hali_ir_global_t *g = &m->globals[i];
    if (g->type == HALI_TYPE_TENSOR || (g->flags & HALI_GLOBAL_PARAMETER))
      HALI_RETURN_IF_ERROR_PLAIN(check_xtype(&v, &g->xtype, "global", i));
  }
  if (m->global_count) HALI_RETURN_IF_ERROR_PLAIN(hali_verify_globals(&v, true));
  return HALI_OK;
}

hali_status_t hali_ir_verify_structure(const hali_ir_module_t *m) {
  hali_strmap_t names = {0};
  vctx_t v = {m, NULL, 0, 0, NULL, "verify structure", &names, NULL};
  hali_status_t s = hali_verify_s_module(&v);
  for (uint32_t i = 0; !s && i < m->func_count; ++i) {
    v.f = &m->funcs[i];
    v.insn = NULL;
    v.block = 0;
    s = s_func(&v);
  }
  hali_strmap_free(&names);
  return s;
}
