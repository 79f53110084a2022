/* hali — the tensor-level syntax of the .hasm assembler (doc/asm.md,
 * "Tensor level"): dispatch, splat, import/export, constant, clone,
 * overwrite, wait and barrier, each read into the operand layout of
 * vm/ir.h.  The printer's counterpart is vm/ir_print.c, the checker's
 * vm/verify_structure.c.
 */
#include <stdlib.h>
#include <string.h>

#include "loader/asm_int.h"
#include "base/alloc.h"

static int32_t find_reg_tok(body_t *b, const tok_t *t) {
  if (t->kind != T_REG) {
    hali_asm_error(b->p, t, "expected a register");
    return -1;
  }
  int32_t r = hali_asm_find_reg(b->p, t);
  if (r < 0) hali_asm_error(b->p, t, "use of undefined register");
  return r;
}

/* Defines (or redefines, with the same shape) tensor register |t|. */
bool hali_asm_def_tensor(body_t *b, const tok_t *t, const hali_ir_xtype_t *x,
                         hali_ir_operand_t *o) {
  uint32_t before = b->f->reg_count;
  if (!hali_asm_parse_reg(b, t, HALI_TYPE_TENSOR, true, o)) return false;
  if (o->v >= before) {
    if (!hali_ir_func_set_reg_xtype(b->f, o->v, x)) {
      hali_asm_oom(b->p, t);
      return false;
    }
    return true;
  }
  if (!hali_ir_xtype_equal(&b->f->reg_xtypes[o->v], x)) {
    hali_asm_error(b->p, t,
                   "tensor register written again with another shape or "
                   "element type");
    return false;
  }
  return true;
}

static bool parse_tensor_type(parser_t *p, hali_ir_xtype_t *x) {
  tok_t *t = peek(p);
  memset(x, 0, sizeof(*x));
  if (!(t->kind == T_TYPE && t->len > 8 && memcmp(t->text, "tensor<", 7) == 0)) {
    hali_asm_error(p, t, "expected a tensor type (tensor<4x?xf32>)");
    return false;
  }
  return hali_asm_parse_xtype(p, x);
}

/* `{%d0, %d1}`: the i64 registers giving |x|'s dynamic dimensions. */
static bool parse_dyn_dims(body_t *b, const hali_ir_xtype_t *x,
                           uint32_t *nops) {
  parser_t *p = b->p;
  uint32_t want = hali_ir_xtype_dynamic_dims(x), got = 0;
  tok_t *at = peek(p);
  if (accept(p, "{") && !accept(p, "}")) {
    do {
      hali_ir_operand_t *o = hali_asm_push_op(p, nops);
      if (!o || !hali_asm_parse_reg(b, next(p), HALI_TYPE_I64, false, o))
        return false;
      got++;
    } while (accept(p, ","));
    if (!hali_asm_expect(p, "}", "to close the dynamic dimensions"))
      return false;
  }
  if (got != want) {
    hali_asm_error(p, at,
                   "the tensor type has %u dynamic dimension(s) but %u "
                   "value(s) are given in {...}",
                   want, got);
    return false;
  }
  return true;
}

static bool expect_tensor_reg(body_t *b, const tok_t *t, hali_ir_operand_t *o) {
  return hali_asm_parse_reg(b, t, HALI_TYPE_TENSOR, false, o);
}

typedef struct {
  int32_t tie;
  hali_ir_xtype_t x;
  uint32_t dims_at, ndims; /* in the scratch operand list */
} dresult_t;

/* `[o0, o1, ...]`: one offset per dimension of a tensor of rank |rank|,
 * each an integer (>= 0) or an i64 register. */
static bool parse_offsets(body_t *b, uint32_t rank, const char *op,
                          uint32_t *nops) {
  parser_t *p = b->p;
  tok_t *at = peek(p);
  uint32_t got = 0;
  if (!hali_asm_expect(p, "[", "to open the offsets")) return false;
  if (!accept(p, "]")) {
    do {
      hali_ir_operand_t *o = hali_asm_push_op(p, nops);
      if (!o) return false;
      tok_t *t = next(p);
      if (t->kind == T_NUMBER) {
        int64_t x;
        if (!hali_asm_parse_int(p, t, 64, &x)) return false;
        if (!hali_ir_set_imm(p->m, o, x)) return hali_asm_oom(p, t);
        if (x < 0) {
          hali_asm_error(p, t, "%s: an offset is at least 0", op);
          return false;
        }
      } else if (!hali_asm_parse_reg(b, t, HALI_TYPE_I64, false, o)) {
        return false;
      }
      got++;
    } while (accept(p, ","));
    if (!hali_asm_expect(p, "]", "to close the offsets")) return false;
  }
  if (got != rank) {
    hali_asm_error(p, at,
                   "%s of a tensor of rank %u takes %u offset(s), %u given", op,
                   rank, rank, got);
    return false;
  }
  return true;
}

/* |a| and |b| must agree in element type and rank (|what| names the op). */
static bool same_kind(parser_t *p, const tok_t *t, const hali_ir_xtype_t *a,
                      const hali_ir_xtype_t *b, const char *what) {
  if (a->element_type == b->element_type && a->rank == b->rank) return true;
  hali_strbuf_t sb = {0};
  hali_ir_xtype_print(&sb, a);
  hali_strbuf_append(&sb, " and ", 5);
  hali_ir_xtype_print(&sb, b);
  char *ts = hali_strbuf_take(&sb);
  hali_asm_error(p, t, "%s: %s differ in element type or rank", what,
                 ts ? ts : "?");
  hali_free(ts);
  return false;
}

bool hali_asm_parse_tensor_op(body_t *b, int op, tok_t *opt, tok_t **defs,
                              size_t ndefs, uint32_t *nops) {
  parser_t *p = b->p;
  hali_ir_operand_t *o;
  hali_ir_xtype_t x = {0};
  bool ok = false;
#define NEED_DEFS(n)                                                           \
  if (ndefs != (n)) {                                                          \
    hali_asm_error(p, opt, "'%.*s' defines %d register(s), %zu given",         \
                   (int)opt->len, opt->text, (n), ndefs);                      \
    return false;                                                              \
  }
  switch (op) {
  case HALI_OP_TENSOR_DISPATCH: {
    tok_t *sym;
    if (!hali_asm_expect_kind(p, T_SYM, "@executable::@export", &sym))
      return false;
    /* The lexer reads `@exe::` and `@export` as two tokens. */
    if (!(sym->len > 3 && sym->text[sym->len - 1] == ':' &&
          sym->text[sym->len - 2] == ':') ||
        peek(p)->kind != T_SYM) {
      hali_asm_error(p, sym, "expected @executable::@export");
      return false;
    }
    tok_t *xsym = next(p);
    size_t elen = sym->len - 3;
    const char *xname = xsym->text + 1;
    size_t xlen = xsym->len - 1;
    int32_t ei = hali_asm_find_exe(p, sym->text + 1, elen);
    if (ei < 0) {
      hali_asm_error(p, sym, "undefined executable");
      return false;
    }
    hali_ir_executable_t *e = &p->m->executables[ei];
    uint32_t xk = hali_strmap_find(&p->exports[ei], xname, xlen);
    int32_t xi = xk == HALI_STRMAP_NONE ? -1 : (int32_t)xk;
    if (xi < 0) {
      hali_asm_error(p, sym, "@%s has no such export", e->name);
      return false;
    }
    for (int k = 0; k < HALI_TD_HEADER; ++k) {
      if (!(o = hali_asm_push_op(p, nops))) return false;
      o->kind = HALI_IR_IMM;
      hali_ir_set_imm(p->m, o, -1);
    }
    p->ops[HALI_TD_EXE].kind = HALI_IR_EXECUTABLE;
    p->ops[HALI_TD_EXE].v = (uint32_t)ei;
    hali_ir_set_imm(p->m, &p->ops[HALI_TD_EXPORT], xi);
    /* Workload: registers (i64) or literals. */
    uint32_t nw = 0;
    if (!hali_asm_expect(p, "[", "to open the workload")) return false;
    if (!accept(p, "]")) {
      do {
        if (!(o = hali_asm_push_op(p, nops))) return false;
        tok_t *t = next(p);
        if (t->kind == T_NUMBER) {
          int64_t w;
          if (!hali_asm_parse_int(p, t, 64, &w)) return false;
          if (!hali_ir_set_imm(p->m, o, w)) return hali_asm_oom(p, t);
        } else if (!hali_asm_parse_reg(b, t, HALI_TYPE_I64, false, o)) {
          return false;
        }
        nw++;
      } while (accept(p, ","));
      if (!hali_asm_expect(p, "]", "to close the workload")) return false;
    }
    if (nw > HALI_HAL_MAX_RANK) {
      /* More than 3 are folded into the Z count (doc/passes.md). */
      hali_asm_error(p, sym, "a workload has at most %u dimensions, %u given",
                     HALI_HAL_MAX_RANK, nw);
      return false;
    }
    uint32_t first_operand = *nops, nargs = 0;
    if (!hali_asm_expect(p, "(", "to open the operands")) return false;
    if (!accept(p, ")")) {
      do {
        tok_t *t = next(p);
        int32_t r = find_reg_tok(b, t);
        if (r < 0) return false;
        if (hali_type_is_ref(b->f->reg_types[r])) {
          hali_asm_error(p, t,
                         "dispatch operands are tensors and scalars, not refs");
          return false;
        }
        if (!(o = hali_asm_push_op(p, nops))) return false;
        o->kind = HALI_IR_REG;
        o->v = (uint32_t)r;
        nargs++;
      } while (accept(p, ","));
      if (!hali_asm_expect(p, ")", "to close the operands")) return false;
    }
    /* Results: [%operand as] tensor<...>[{dims}] */
    dresult_t res[16];
    uint32_t nres = 0;
    if (accept(p, "->")) {
      bool paren = accept(p, "(");
      do {
        if (nres == 16) {
          hali_asm_error(p, peek(p), "too many results");
          goto fail;
        }
        dresult_t *d = &res[nres];
        d->tie = -1;
        if (peek(p)->kind == T_REG) {
          tok_t *t = next(p);
          int32_t r = find_reg_tok(b, t);
          if (r < 0) goto fail;
          for (uint32_t k = 0; k < nargs; ++k)
            if (p->ops[first_operand + k].v == (uint32_t)r) d->tie = (int32_t)k;
          if (d->tie < 0) {
            hali_asm_error(
                p, t, "a tied result names one of the dispatch's operands");
            goto fail;
          }
          if (!tok_is(peek(p), T_IDENT, "as")) {
            hali_asm_error(p, peek(p), "expected 'as' after the tied operand");
            goto fail;
          }
          next(p);
        }
        if (!parse_tensor_type(p, &d->x)) goto fail;
        nres++;
        d->dims_at = *nops;
        if (!parse_dyn_dims(b, &d->x, nops)) goto fail;
        d->ndims = *nops - d->dims_at;
      } while (paren && accept(p, ","));
      if (paren && !hali_asm_expect(p, ")", "to close the results")) goto fail;
    }
    if (nres != ndefs) {
      hali_asm_error(p, opt,
                     "the dispatch has %u result type(s) but %zu register(s) "
                     "are assigned",
                     nres, ndefs);
      goto fail;
    }
    /* Move the dims (parsed inline) behind the results and ties. */
    uint32_t dims_start = nres ? res[0].dims_at : *nops;
    uint32_t ndim_total = *nops - dims_start;
    hali_ir_operand_t dimbuf[64];
    if (ndim_total > 64) {
      hali_asm_error(p, opt, "too many dynamic dimensions");
      goto fail;
    }
    memcpy(dimbuf, p->ops + dims_start, ndim_total * sizeof(dimbuf[0]));
    *nops = dims_start;
    for (uint32_t k = 0; k < nres; ++k) {
      if (!(o = hali_asm_push_op(p, nops)) ||
          !hali_asm_def_tensor(b, defs[k], &res[k].x, o))
        goto fail;
    }
    for (uint32_t k = 0; k < nres; ++k) {
      if (!(o = hali_asm_push_op(p, nops))) goto fail;
      o->kind = HALI_IR_IMM;
      hali_ir_set_imm(p->m, o, res[k].tie);
    }
    for (uint32_t k = 0; k < ndim_total; ++k) {
      if (!(o = hali_asm_push_op(p, nops))) goto fail;
      *o = dimbuf[k];
    }
    hali_ir_set_imm(p->m, &p->ops[HALI_TD_NWORKLOAD], nw);
    hali_ir_set_imm(p->m, &p->ops[HALI_TD_NOPERANDS], nargs);
    hali_ir_set_imm(p->m, &p->ops[HALI_TD_NRESULTS], nres);
    if (tok_is(peek(p), T_IDENT, "interface")) {
      next(p);
      int64_t nb, nc;
      if (!hali_asm_expect(p, "(", "after interface") ||
          !tok_is(peek(p), T_IDENT, "bindings")) {
        hali_asm_error(p, peek(p),
                       "expected interface(bindings N, constants M)");
        goto fail;
      }
      next(p);
      if (!hali_asm_parse_int(p, next(p), 32, &nb) ||
          !hali_asm_expect(p, ",", "") ||
          !tok_is(peek(p), T_IDENT, "constants")) {
        hali_asm_error(p, peek(p),
                       "expected interface(bindings N, constants M)");
        goto fail;
      }
      next(p);
      if (!hali_asm_parse_int(p, next(p), 32, &nc) ||
          !hali_asm_expect(p, ")", ""))
        goto fail;
      hali_ir_set_imm(p->m, &p->ops[HALI_TD_BINDINGS], nb);
      hali_ir_set_imm(p->m, &p->ops[HALI_TD_CONSTANTS], nc);
    }
    for (uint32_t k = 0; k < nres; ++k) hali_free(res[k].x.dims);
    return true;
  fail:
    for (uint32_t k = 0; k < nres; ++k) hali_free(res[k].x.dims);
    return false;
  }
  case HALI_OP_TENSOR_SPLAT:
  case HALI_OP_TENSOR_IMPORT: {
    NEED_DEFS(1);
    hali_ir_operand_t *r0 = hali_asm_push_op(p, nops);
    if (!r0) return false;
    uint32_t vi = *nops;
    if (!(o = hali_asm_push_op(p, nops))) return false;
    tok_t *src = next(p);
    if (op == HALI_OP_TENSOR_IMPORT) {
      if (!hali_asm_parse_reg(b, src, HALI_TYPE_BUFFER_VIEW, false, o))
        return false;
    } else {
      int32_t r = find_reg_tok(b, src);
      if (r < 0) return false;
      hali_type_t t = b->f->reg_types[r];
      if (t != HALI_TYPE_I32 && t != HALI_TYPE_I64 && t != HALI_TYPE_F32 &&
          t != HALI_TYPE_F64) {
        hali_asm_error(p, src,
                       "tensor.splat takes a scalar register (i32, i64, f32 "
                       "or f64; not %s)",
                       hali_type_name(t));
        return false;
      }
      o->kind = HALI_IR_REG;
      o->v = (uint32_t)r;
    }
    (void)vi;
    if (!hali_asm_expect(p, ":", "before the tensor type") ||
        !parse_tensor_type(p, &x))
      return false;
    ok = parse_dyn_dims(b, &x, nops) &&
         hali_asm_def_tensor(b, defs[0], &x, &p->ops[0]);
    hali_free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_CONSTANT: {
    NEED_DEFS(1);
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)))
      return false;
    if (!hali_asm_parse_rodata_ref(p, o)) return false;
    if (!hali_asm_expect(p, ":", "before the tensor type") ||
        !parse_tensor_type(p, &x))
      return false;
    if (hali_ir_xtype_dynamic_dims(&x)) {
      hali_asm_error(p, peek_at(p, p->pos - 1), "a constant has a static shape");
      hali_free(x.dims);
      return false;
    }
    ok = hali_asm_def_tensor(b, defs[0], &x, &p->ops[0]);
    hali_free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_CLONE: {
    NEED_DEFS(1);
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)))
      return false;
    if (!expect_tensor_reg(b, next(p), o)) return false;
    hali_ir_xtype_t src;
    if (!hali_ir_xtype_copy(&src, &b->f->reg_xtypes[p->ops[1].v]))
      return hali_asm_oom(p, defs[0]);
    ok = hali_asm_def_tensor(b, defs[0], &src, &p->ops[0]);
    hali_free(src.dims);
    return ok;
  }
  case HALI_OP_TENSOR_OVERWRITE: {
    NEED_DEFS(0);
    if (!(o = hali_asm_push_op(p, nops)) || !expect_tensor_reg(b, next(p), o) ||
        !hali_asm_expect(p, ",",
                         "between the value and the mutable argument") ||
        !(o = hali_asm_push_op(p, nops)))
      return false;
    tok_t *t = next(p);
    if (!expect_tensor_reg(b, t, o)) return false;
    if (o->v >= b->f->param_count) {
      hali_asm_error(p, t, "tensor.overwrite writes into a parameter");
      return false;
    }
    return true;
  }
  case HALI_OP_TENSOR_EXPORT: {
    NEED_DEFS(1);
    if (!(o = hali_asm_push_op(p, nops)) ||
        !hali_asm_parse_reg(b, defs[0], HALI_TYPE_BUFFER_VIEW, true, o) ||
        !(o = hali_asm_push_op(p, nops)))
      return false;
    return expect_tensor_reg(b, next(p), o);
  }
  case HALI_OP_TENSOR_GLOBAL_LOAD: {
    /* %t = tensor.global.load @g: %t takes the global's type. */
    NEED_DEFS(1);
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)))
      return false;
    if (!hali_asm_parse_global_ref(p, hali_op_info((unsigned)op),
                                   HALI_TYPE_TENSOR, o))
      return false;
    uint32_t gi = o->v;
    hali_ir_xtype_t gx;
    if (!hali_ir_xtype_copy(&gx, &p->m->globals[gi].xtype))
      return hali_asm_oom(p, defs[0]);
    ok = hali_asm_def_tensor(b, defs[0], &gx, &p->ops[0]);
    hali_free(gx.dims);
    return ok;
  }
  case HALI_OP_TENSOR_GLOBAL_STORE: {
    /* tensor.global.store @g, %t: %t has the global's type. */
    NEED_DEFS(0);
    if (!(o = hali_asm_push_op(p, nops))) return false;
    if (!hali_asm_parse_global_ref(p, hali_op_info((unsigned)op),
                                   HALI_TYPE_TENSOR, o))
      return false;
    uint32_t gi = o->v;
    if (!hali_asm_expect(p, ",", "between the global and the value") ||
        !(o = hali_asm_push_op(p, nops)))
      return false;
    tok_t *t = next(p);
    if (!expect_tensor_reg(b, t, o)) return false;
    if (!hali_ir_xtype_equal(&b->f->reg_xtypes[o->v],
                             &p->m->globals[gi].xtype)) {
      hali_strbuf_t sb = {0};
      hali_ir_xtype_print(&sb, &b->f->reg_xtypes[o->v]);
      hali_strbuf_append(&sb, " into ", 6);
      hali_ir_xtype_print(&sb, &p->m->globals[gi].xtype);
      char *ts = hali_strbuf_take(&sb);
      hali_asm_error(p, t, "tensor.global.store of %s @%s: the types differ",
                     ts ? ts : "?", p->m->globals[gi].name);
      hali_free(ts);
      return false;
    }
    return true;
  }
  case HALI_OP_TENSOR_DIM:
  case HALI_OP_TENSOR_NUMEL: {
    /* %n = tensor.dim %t, 1   /   %n = tensor.numel %t */
    NEED_DEFS(1);
    if (!(o = hali_asm_push_op(p, nops)) ||
        !hali_asm_parse_reg(b, defs[0], HALI_TYPE_I64, true, o) ||
        !(o = hali_asm_push_op(p, nops)) || !expect_tensor_reg(b, next(p), o))
      return false;
    if (op == HALI_OP_TENSOR_NUMEL) return true;
    uint32_t rank = b->f->reg_xtypes[o->v].rank;
    if (!hali_asm_expect(p, ",", "between the tensor and the dimension") ||
        !(o = hali_asm_push_op(p, nops)))
      return false;
    tok_t *t = peek(p);
    int64_t d;
    if (!hali_asm_parse_int(p, next(p), 32, &d)) return false;
    (void)hali_ir_set_imm(p->m, o, d); /* 32 bits: held in |o| */
    if (d < 0 || (uint64_t)d >= rank) {
      hali_asm_error(p, t, "tensor.dim %lld of a tensor of rank %u",
                     (long long)d, rank);
      return false;
    }
    return true;
  }
  case HALI_OP_TENSOR_RESHAPE: {
    /* %r = tensor.reshape %t : tensor<...>{dims} */
    NEED_DEFS(1);
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)))
      return false;
    if (!expect_tensor_reg(b, next(p), o)) return false;
    uint32_t src = o->v;
    tok_t *tt = peek(p);
    if (!hali_asm_expect(p, ":", "before the tensor type")) return false;
    tt = peek(p);
    if (!parse_tensor_type(p, &x)) return false;
    const hali_ir_xtype_t *sx = &b->f->reg_xtypes[src];
    if (sx->element_type != x.element_type) {
      hali_strbuf_t sb = {0};
      hali_ir_xtype_print(&sb, sx);
      hali_strbuf_append(&sb, " into ", 6);
      hali_ir_xtype_print(&sb, &x);
      char *ts = hali_strbuf_take(&sb);
      hali_asm_error(p, tt,
                     "tensor.reshape of %s: the element types differ (a "
                     "reshape keeps the bytes)",
                     ts ? ts : "?");
      hali_free(ts);
      hali_free(x.dims);
      return false;
    }
    uint64_t a = 0, c = 0;
    uint32_t at;
    if (!hali_ir_xtype_dynamic_dims(sx) && !hali_ir_xtype_dynamic_dims(&x) &&
        hali_ir_xtype_static_bytes(sx, &a, &at) &&
        hali_ir_xtype_static_bytes(&x, &c, &at) && a != c) {
      hali_strbuf_t sb = {0};
      hali_ir_xtype_print(&sb, sx);
      hali_strbuf_append(&sb, " into ", 6);
      hali_ir_xtype_print(&sb, &x);
      char *ts = hali_strbuf_take(&sb);
      hali_asm_error(p, tt,
                     "tensor.reshape of %s: the element counts differ",
                     ts ? ts : "?");
      hali_free(ts);
      hali_free(x.dims);
      return false;
    }
    (void)tt;
    ok = parse_dyn_dims(b, &x, nops) &&
         hali_asm_def_tensor(b, defs[0], &x, &p->ops[0]);
    hali_free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_SLICE: {
    /* %s = tensor.slice %t[o0, o1] : tensor<...>{dims} */
    NEED_DEFS(1);
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)))
      return false;
    if (!expect_tensor_reg(b, next(p), o)) return false;
    uint32_t src = o->v;
    if (!parse_offsets(b, b->f->reg_xtypes[src].rank, "tensor.slice", nops))
      return false;
    if (!hali_asm_expect(p, ":", "before the tensor type")) return false;
    tok_t *tt = peek(p);
    if (!parse_tensor_type(p, &x)) return false;
    ok = same_kind(p, tt, &b->f->reg_xtypes[src], &x, "tensor.slice") &&
         parse_dyn_dims(b, &x, nops) &&
         hali_asm_def_tensor(b, defs[0], &x, &p->ops[0]);
    hali_free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_UPDATE: {
    /* %r = tensor.update %v, %t[o0, o1]: %r has %t's type */
    NEED_DEFS(1);
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)))
      return false;
    if (!expect_tensor_reg(b, next(p), o) ||
        !hali_asm_expect(p, ",", "between the value and the target") ||
        !(o = hali_asm_push_op(p, nops)))
      return false;
    tok_t *tt = peek(p);
    if (!expect_tensor_reg(b, next(p), o)) return false;
    uint32_t val = p->ops[1].v, dst = o->v;
    if (!same_kind(p, tt, &b->f->reg_xtypes[val], &b->f->reg_xtypes[dst],
                   "tensor.update") ||
        !parse_offsets(b, b->f->reg_xtypes[dst].rank, "tensor.update", nops))
      return false;
    hali_ir_xtype_t dx;
    if (!hali_ir_xtype_copy(&dx, &b->f->reg_xtypes[dst]))
      return hali_asm_oom(p, defs[0]);
    ok = hali_asm_def_tensor(b, defs[0], &dx, &p->ops[0]);
    hali_free(dx.dims);
    return ok;
  }
  case HALI_OP_TENSOR_TRACE: {
    /* tensor.trace "label", %t */
    NEED_DEFS(0);
    tok_t *st;
    if (!(o = hali_asm_push_op(p, nops)) ||
        !hali_asm_expect_kind(p, T_STRING, "a label string", &st))
      return false;
    size_t len;
    char *str = hali_asm_decode_string(p, st, &len);
    if (!str) {
      hali_asm_error(p, st, "bad string");
      return false;
    }
    o->kind = HALI_IR_STRING;
    if ((o->v = hali_asm_intern(p, str, len)) == UINT32_MAX)
      return hali_asm_oom(p, st);
    if (!hali_asm_expect(p, ",", "between the label and the tensor") ||
        !(o = hali_asm_push_op(p, nops)))
      return false;
    return expect_tensor_reg(b, next(p), o);
  }
  case HALI_OP_TENSOR_ALL_REDUCE:
  case HALI_OP_TENSOR_REDUCE_SCATTER:
  case HALI_OP_TENSOR_ALL_GATHER:
  case HALI_OP_TENSOR_ALL_TO_ALL: {
    /* %r = tensor.all_reduce %t, sum
     * %r = tensor.reduce_scatter %t, sum : tensor<?x4xf32>
     * %r = tensor.all_gather %t : tensor<?x4xf32>
     * %r = tensor.all_to_all %t
     * (doc/collectives.md, "At the tensor level") */
    NEED_DEFS(1);
    bool reduces = op == HALI_OP_TENSOR_ALL_REDUCE ||
                   op == HALI_OP_TENSOR_REDUCE_SCATTER;
    bool typed = op == HALI_OP_TENSOR_ALL_GATHER ||
                 op == HALI_OP_TENSOR_REDUCE_SCATTER;
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)))
      return false;
    if (!expect_tensor_reg(b, next(p), o)) return false;
    uint32_t src = o->v;
    if (reduces) {
      static const char *const names[] = {"sum", "product", "min", "max",
                                          "average"};
      if (!hali_asm_expect(p, ",", "between the tensor and the reduction") ||
          !(o = hali_asm_push_op(p, nops)))
        return false;
      tok_t *t = next(p);
      o->kind = HALI_IR_IMM;
      hali_ir_set_imm(p->m, o, 0);
      for (int k = 0; k < 5; ++k)
        if (tok_is(t, T_IDENT, names[k])) hali_ir_set_imm(p->m, o, k + 1);
      if (!hali_ir_imm(p->m, o)) {
        hali_asm_error(p, t,
                       "expected a reduction: sum, product, min, max or "
                       "average");
        return false;
      }
    }
    const hali_ir_xtype_t *sx = &b->f->reg_xtypes[src];
    if (!typed) {
      if (!hali_ir_xtype_copy(&x, sx)) return hali_asm_oom(p, defs[0]);
    } else {
      tok_t *tt;
      if (!hali_asm_expect(p, ":", "before the result's tensor type"))
        return false;
      tt = peek(p);
      if (!parse_tensor_type(p, &x)) return false;
      bool same = x.element_type == sx->element_type && x.rank == sx->rank &&
                  x.rank > 0;
      for (uint32_t d = 1; same && d < x.rank; ++d)
        same = x.dims[d] == sx->dims[d];
      if (!same) {
        hali_strbuf_t sb = {0};
        hali_ir_xtype_print(&sb, sx);
        hali_strbuf_append(&sb, " into ", 6);
        hali_ir_xtype_print(&sb, &x);
        char *ts = hali_strbuf_take(&sb);
        hali_asm_error(p, tt,
                       "%.*s of %s: the result keeps the element type, the "
                       "rank (at least 1) and every dimension but the first",
                       (int)opt->len, opt->text, ts ? ts : "?");
        hali_free(ts);
        hali_free(x.dims);
        return false;
      }
    }
    if ((op == HALI_OP_TENSOR_ALL_TO_ALL) && x.rank == 0) {
      hali_asm_error(p, opt, "tensor.all_to_all splits dimension 0: the "
                             "tensor needs a rank of at least 1");
      hali_free(x.dims);
      return false;
    }
    ok = hali_asm_def_tensor(b, defs[0], &x, &p->ops[0]);
    hali_free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_SEND: {
    /* tensor.send %t, %peer */
    NEED_DEFS(0);
    if (!(o = hali_asm_push_op(p, nops)) || !expect_tensor_reg(b, next(p), o) ||
        !hali_asm_expect(p, ",", "between the tensor and the peer rank") ||
        !(o = hali_asm_push_op(p, nops)))
      return false;
    return hali_asm_parse_reg(b, next(p), HALI_TYPE_I32, false, o);
  }
  case HALI_OP_TENSOR_RECV: {
    /* %r = tensor.recv %peer : tensor<?x4xf32>{%n} */
    NEED_DEFS(1);
    if (!hali_asm_push_op(p, nops) || !(o = hali_asm_push_op(p, nops)) ||
        !hali_asm_parse_reg(b, next(p), HALI_TYPE_I32, false, o) ||
        !hali_asm_expect(p, ":", "before the tensor type") ||
        !parse_tensor_type(p, &x))
      return false;
    ok = parse_dyn_dims(b, &x, nops) &&
         hali_asm_def_tensor(b, defs[0], &x, &p->ops[0]);
    hali_free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_WAIT:
  case HALI_OP_TENSOR_BARRIER:
    NEED_DEFS(0);
    if (!(o = hali_asm_push_op(p, nops))) return false;
    return hali_asm_parse_reg(b, next(p), HALI_TYPE_FENCE, false, o);
  default:
    hali_asm_error(p, opt,
                   "write groups as `execute {`, `concurrent {` and `}`");
    return false;
  }
#undef NEED_DEFS
}
