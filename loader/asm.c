/* hali — the .hasm assembler (grammar in doc/asm.md).
 *
 * The text is tokenised once into an array.  A first pass reads every
 * function header (so calls may name functions defined later); a second
 * pass reads each body, after pre-scanning its labels (so branches may name
 * blocks defined later).  The first error stops the parse and is reported
 * as file:line:column with what was expected and what was found.
 *
 * This file holds the module-level grammar and the HAL-level instructions;
 * the lexer and literals are loader/asm_lex.c, the tensor-level syntax
 * loader/asm_tensor.c, and loader/asm_int.h what the three share.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/asm_int.h"
#include "base/alloc.h"
#include "base/hal_names.h"
#include "base/checked.h"

/* A register type in a function header or locals: a scalar, a !hal type,
 * or (tensor level) tensor<...>, whose shape goes to |x|. */
static hali_type_t parse_value_type(parser_t *p, hali_ir_xtype_t *x) {
  tok_t *t = peek(p);
  memset(x, 0, sizeof(*x));
  if (t->kind == T_TYPE && t->len > 8 && memcmp(t->text, "tensor<", 7) == 0)
    return hali_asm_parse_xtype(p, x) ? HALI_TYPE_TENSOR : HALI_TYPE_NONE;
  return hali_asm_parse_type(p);
}

/* ------------------------------------------------------------------------ */
/* Function bodies. */

/* The register the `%name` token |t| names in the function being read
 * (p->regs), or -1. */
int32_t hali_asm_find_reg(parser_t *p, const tok_t *t) {
  uint32_t r = t->kind == T_REG ? hali_strmap_find_hashed(&p->regs, t->text + 1,
                                                         t->len - 1, t->hash)
                                 : hali_strmap_find(&p->regs, t->text + 1,
                                                    t->len - 1);
  return r == HALI_STRMAP_NONE ? -1 : (int32_t)r;
}

/* Adds register `%name` (token |t|) of |type| to |f| and to p->regs;
 * UINT32_MAX (with an error) on OOM. */
/* Function |f| (of p->m) is the one whose room p->blocks_cap counts; its
 * blocks array is exactly as long as its count when it becomes so.
 * (Registers need no such room: hali_ir_func_add_reg grows the register
 * arrays geometrically itself, vm/ir.h reg_capacity.) */
static void cap_for(parser_t *p, const hali_ir_func_t *f) {
  uint32_t fi = (uint32_t)(f - p->m->funcs);
  if (p->cap_func == fi) return;
  p->cap_func = fi;
  p->blocks_cap = f->block_count;
}

/* Grows |*a| (of |size|-byte entries, room for |*cap|) to hold |need|. */
static bool grow(void **a, uint32_t *cap, uint32_t need, size_t size) {
  if (need <= *cap) return true;
  uint64_t n = *cap < 8 ? 8 : 2 * (uint64_t)*cap;
  if (n < need) n = need;
  if (n > UINT32_MAX) n = UINT32_MAX;
  uint64_t bytes;
  if (hali_mul_overflows_u64(n, size, &bytes) || bytes > SIZE_MAX) return false;
  void *q = hali_realloc(*a, (size_t)bytes);
  if (!q) return false;
  *a = q;
  *cap = (uint32_t)n;
  return true;
}

/* hali_ir_func_add_block, in the room the assembler keeps. */
static hali_ir_block_t *func_add_block(parser_t *p, hali_ir_func_t *f,
                                       const char *name, size_t len) {
  cap_for(p, f);
  if (f->block_count == UINT32_MAX ||
      !grow((void **)&f->blocks, &p->blocks_cap, f->block_count + 1,
            sizeof(hali_ir_block_t))) {
    p->cap_func = UINT32_MAX;
    return NULL;
  }
  hali_ir_block_t *b = &f->blocks[f->block_count];
  memset(b, 0, sizeof(*b));
  if (!(b->name = hali_malloc(len + 1))) return NULL;
  memcpy(b->name, name, len);
  b->name[len] = 0;
  f->block_count++;
  return b;
}

static uint32_t add_reg(parser_t *p, hali_ir_func_t *f, hali_type_t type,
                        const tok_t *t) {
  uint32_t r = hali_ir_func_add_reg(f, type, t->text + 1, t->len - 1);
  if (r == UINT32_MAX ||
      (t->kind == T_REG
           ? hali_strmap_insert_hashed(&p->regs, f->reg_names[r], t->len - 1,
                                       t->hash, r)
           : hali_strmap_insert(&p->regs, f->reg_names[r], t->len - 1, r)) !=
          r) {
    hali_asm_oom(p, t);
    return UINT32_MAX;
  }
  return r;
}

/* Makes p->regs index the named registers |f| has so far. */
static bool index_regs(parser_t *p, const hali_ir_func_t *f) {
  hali_strmap_clear(&p->regs);
  if (!f->reg_names) return true;
  for (uint32_t r = 0; r < f->reg_count; ++r)
    if (f->reg_names[r] &&
        hali_strmap_insert(&p->regs, f->reg_names[r],
                           strlen(f->reg_names[r]), r) == HALI_STRMAP_NONE)
      return false;
  return true;
}

/* A register operand of |type|.  Writes define new registers; reads must
 * name a register already defined (parameters or an earlier write). */
bool hali_asm_parse_reg(body_t *b, const tok_t *t, hali_type_t type, bool write,
                        hali_ir_operand_t *out) {
  parser_t *p = b->p;
  if (t->kind != T_REG) {
    hali_asm_error(p, t, "expected a register (%s)", hali_type_name(type));
    return false;
  }
  int32_t r = hali_asm_find_reg(p, t);
  if (r < 0) {
    if (!write) {
      hali_asm_error(p, t, "use of undefined register");
      return false;
    }
    uint32_t nr = add_reg(p, b->f, type, t);
    if (nr == UINT32_MAX) return false;
    r = (int32_t)nr;
  } else if (type == HALI_TYPE_I64 && b->f->reg_types[r] == HALI_TYPE_INDEX) {
    /* Tensor level: an index is a 64-bit integer on the host. */
  } else if (type != HALI_TYPE_ANY_REF && b->f->reg_types[r] != type) {
    hali_asm_error(p, t, "register is %s but this operand must be %s",
                   hali_type_name(b->f->reg_types[r]), hali_type_name(type));
    return false;
  } else if (type == HALI_TYPE_ANY_REF && !hali_type_is_ref(b->f->reg_types[r])) {
    hali_asm_error(p, t, "register is %s but this operand must be a ref",
                   hali_type_name(b->f->reg_types[r]));
    return false;
  }
  out->kind = HALI_IR_REG;
  out->v = (uint32_t)r;
  return true;
}

static bool parse_block_ref(body_t *b, hali_ir_operand_t *out) {
  tok_t *t = peek(b->p);
  if (t->kind != T_LABEL) {
    hali_asm_error(b->p, t, "expected a block label (^name)");
    return false;
  }
  uint32_t i = hali_strmap_find(&b->p->blocks, t->text + 1, t->len - 1);
  if (i == HALI_STRMAP_NONE) {
    hali_asm_error(b->p, t, "undefined block label");
    return false;
  }
  next(b->p);
  out->kind = HALI_IR_BLOCK;
  out->v = i;
  return true;
}

/* The function the `@name` token |t| names, or -1. */
static int32_t find_func(parser_t *p, const tok_t *t) {
  uint32_t i = t->kind == T_SYM ? hali_strmap_find_hashed(&p->funcs, t->text + 1,
                                                         t->len - 1, t->hash)
                                : hali_strmap_find(&p->funcs, t->text + 1,
                                                   t->len - 1);
  return i == HALI_STRMAP_NONE ? -1 : (int32_t)i;
}

/* The executable the name |s| (|len| bytes) names, or -1. */
int32_t hali_asm_find_exe(parser_t *p, const char *s, size_t len) {
  uint32_t i = hali_strmap_find(&p->exes, s, len);
  return i == HALI_STRMAP_NONE ? -1 : (int32_t)i;
}

/* The index of string constant |str| (|len| bytes, malloc'ed, taken) in
 * the module, added if new; UINT32_MAX on OOM.  Like
 * hali_ir_module_intern, but through p->strings, and the string array
 * grows geometrically. */
static uint32_t intern(parser_t *p, char *str, size_t len) {
  hali_ir_module_t *m = p->m;
  uint32_t i = hali_strmap_find(&p->strings, str, len);
  if (i != HALI_STRMAP_NONE || len > UINT32_MAX / 2) {
    hali_free(str);
    return i;
  }
  if (m->string_count == p->strings_cap) {
    uint32_t cap = p->strings_cap ? p->strings_cap * 2 : 16;
    char **strings = cap > UINT32_MAX / 2 ? NULL
                                          : hali_realloc(m->strings, (size_t)cap *
                                                                    sizeof(char *));
    if (strings) m->strings = strings;
    uint32_t *lengths =
        strings ? hali_realloc(m->string_lengths, (size_t)cap * sizeof(uint32_t))
                : NULL;
    if (lengths) m->string_lengths = lengths;
    if (!strings || !lengths) {
      hali_free(str);
      return UINT32_MAX;
    }
    p->strings_cap = cap;
  }
  str[len] = 0; /* decode_string leaves room: the token has 2 quotes */
  i = m->string_count;
  if (hali_strmap_insert(&p->strings, str, len, i) != i) {
    hali_free(str);
    return UINT32_MAX;
  }
  m->strings[i] = str;
  m->string_lengths[i] = (uint32_t)len;
  m->string_count++;
  return i;
}

/* For the tensor-level syntax (loader/asm_tensor.c): interns |str|
 * (taking it), UINT32_MAX when out of memory. */
uint32_t hali_asm_intern(parser_t *p, char *str, size_t len) {
  return intern(p, str, len);
}

/* The index of the rodata blob the `@name` token |s| names, or -1. */
static int32_t find_rodata(parser_t *p, const tok_t *s) {
  uint32_t k = hali_strmap_find(&p->rodata, s->text + 1, s->len - 1);
  return k == HALI_STRMAP_NONE ? -1 : (int32_t)k;
}

/* `@name` naming a rodata blob declared earlier in the module. */
bool hali_asm_parse_rodata_ref(parser_t *p, hali_ir_operand_t *o) {
  tok_t *s;
  if (!hali_asm_expect_kind(p, T_SYM, "a rodata name (@name)", &s))
    return false;
  int32_t k = find_rodata(p, s);
  if (k < 0) {
    hali_asm_error(p, s, "undefined rodata");
    return false;
  }
  o->kind = HALI_IR_RODATA;
  o->v = (uint32_t)k;
  return true;
}

/* The index of the global the `@name` token |s| names, or -1. */
static int32_t find_global(parser_t *p, const tok_t *s) {
  if (s->kind != T_SYM) return -1;
  uint32_t k = hali_strmap_find(&p->globals, s->text + 1, s->len - 1);
  return k == HALI_STRMAP_NONE ? -1 : (int32_t)k;
}

bool hali_asm_parse_global_ref(parser_t *p, const hali_op_info_t *info,
                               hali_type_t want, hali_ir_operand_t *o) {
  tok_t *s;
  if (!hali_asm_expect_kind(p, T_SYM, "a global name (@name)", &s))
    return false;
  int32_t k = find_global(p, s);
  if (k < 0) {
    hali_asm_error(p, s, "undefined global");
    return false;
  }
  const hali_ir_global_t *g = &p->m->globals[k];
  bool ok = want == HALI_TYPE_ANY_REF ? hali_type_is_ref(g->type)
                                      : g->type == want;
  if (!ok) {
    hali_asm_error(p, s, "global @%s is %s but %s takes %s", g->name,
                   g->type == HALI_TYPE_TENSOR ? "a tensor"
                                               : hali_type_name(g->type),
                   info->name,
                   want == HALI_TYPE_ANY_REF ? "a ref global"
                                             : hali_type_name(want));
    return false;
  }
  o->kind = HALI_IR_GLOBAL;
  o->v = (uint32_t)k;
  return true;
}

static bool same_line(const tok_t *a, const tok_t *b) {
  return a->kind != T_EOF && a->line == b->line;
}

/* The next operand slot of the instruction being parsed, or NULL (with an
 * error) when there are too many or memory runs out. */
hali_ir_operand_t *hali_asm_push_op(parser_t *p, uint32_t *n) {
  if (*n >= MAX_OPERANDS) {
    hali_asm_error(p, peek(p), "too many operands (at most %u)", MAX_OPERANDS);
    return NULL;
  }
  if (*n == p->ops_cap) {
    size_t cap = p->ops_cap ? p->ops_cap * 2 : 16;
    hali_ir_operand_t *o = hali_realloc(p->ops, cap * sizeof(*o));
    if (!o) {
      hali_asm_oom(p, peek(p));
      return NULL;
    }
    p->ops = o;
    p->ops_cap = cap;
  }
  memset(&p->ops[*n], 0, sizeof(p->ops[0]));
  return &p->ops[(*n)++];
}

/* Reads `%a, %b, ... =` (the written registers) if present, into p->defs. */
static size_t parse_defs(body_t *b) {
  parser_t *p = b->p;
  size_t n = 0;
  size_t save = p->pos;
  while (peek(p)->kind == T_REG && n < MAX_OPERANDS) {
    if (n == p->defs_cap) {
      size_t cap = p->defs_cap ? p->defs_cap * 2 : 16;
      tok_t **d = hali_realloc(p->defs, cap * sizeof(*d));
      if (!d) {
        hali_asm_oom(p, peek(p));
        break;
      }
      p->defs = d;
      p->defs_cap = cap;
    }
    p->defs[n++] = next(p);
    if (accept(p, "=")) return n;
    if (!accept(p, ",")) break;
  }
  p->pos = save;
  return 0;
}

/* An integer immediate: a literal, or a named HAL constant
 * (`memory(device_local|host_visible)`, `status(internal)`; the kinds and
 * names are base/hal_names.c's, listed in doc/asm.md).  A bit set takes
 * names joined by '|'; the others exactly one name. */
static bool parse_int_or_named(parser_t *p, int bits, int64_t *out) {
  tok_t *kw = peek(p);
  if (kw->kind != T_IDENT || !tok_is(peek_at(p, p->pos + 1), T_PUNCT, "("))
    return hali_asm_parse_int(p, next(p), bits, out);
  hali_hal_const_kind_t kind = hali_hal_const_kind_lookup(kw->text, kw->len);
  hali_strbuf_t sb = {0};
  if (kind == HALI_HAL_CONST_NONE) {
    hali_hal_const_list_kinds(&sb);
    char *list = hali_strbuf_take(&sb);
    hali_asm_error(p, kw, "unknown constant kind '%.*s': expected an i%d "
                   "literal or one of %s", (int)kw->len, kw->text, bits,
                   list ? list : "?");
    hali_free(list);
    return false;
  }
  const hali_hal_const_kind_info_t *k = hali_hal_const_kind_info(kind);
  next(p);
  next(p); /* ( */
  uint32_t value = 0;
  do {
    tok_t *t = next(p);
    uint32_t v;
    if (t->kind != T_IDENT ||
        !hali_hal_const_name_lookup(kind, t->text, t->len, &v)) {
      hali_hal_const_list_names(kind, &sb);
      char *list = hali_strbuf_take(&sb);
      if (t->kind == T_IDENT)
        hali_asm_error(p, t, "unknown %s '%.*s' in %s(...): expected %s%s",
                       k->what, (int)t->len, t->text, k->keyword,
                       k->bits ? "names joined by '|' of " : "one of ",
                       list ? list : "?");
      else
        hali_asm_error(p, t, "expected a %s name in %s(...): %s", k->what,
                       k->keyword, list ? list : "?");
      hali_free(list);
      return false;
    }
    value |= v;
    if (!k->bits) break;
  } while (accept(p, "|"));
  if (!hali_asm_expect(p, ")", k->bits ? "after the names (joined by '|')"
                                        : "after the name"))
    return false;
  *out = bits == 32 ? (int64_t)(int32_t)value : (int64_t)value;
  return true;
}
static bool async_stub(parser_t *p, const tok_t *callee, int32_t *out_index,
                       hali_ir_func_t **out_func);

static bool parse_insn(body_t *b, hali_ir_block_t *blk) {
  parser_t *p = b->p;
  tok_t *first = peek(p);
  size_t ndefs = parse_defs(b);
  tok_t **defs = p->defs;
  tok_t *opt = peek(p);
  if (opt->kind != T_IDENT) {
    hali_asm_error(p, opt, "expected an instruction");
    return false;
  }
  int op = hali_op_lookup(opt->text, opt->len);
  if (op < 0) {
    hali_asm_error(p, opt, "unknown op");
    return false;
  }
  next(p);
  const hali_op_info_t *info = hali_op_info((unsigned)op);
  hali_ir_operand_t *o;
  uint32_t nops = 0;
  uint16_t aux = 0;

  if (hali_op_is_call((uint16_t)op)) {
    tok_t *callee;
    if (!hali_asm_expect_kind(p, T_SYM, "a function (@name) to call", &callee))
      return false;
    int32_t fi = find_func(p, callee);
    hali_ir_func_t *cf = NULL;
    if (fi < 0) {
      /* @f$async of a tensor-level @f: known before func-conversion. */
      if (!async_stub(p, callee, &fi, &cf)) {
        if (!p->error) hali_asm_error(p, callee, "call to undefined function");
        return false;
      }
    } else {
      cf = &p->m->funcs[fi];
    }
    if (!(o = hali_asm_push_op(p, &nops))) return false;
    o->kind = HALI_IR_FUNC;
    o->v = (uint32_t)fi;
    if (!hali_asm_expect(p, "(", "before call arguments")) return false;
    const hali_type_t *ptypes;
    uint32_t nparams = hali_ir_call_params((uint16_t)op, cf, &ptypes);
    const bool join = op == HALI_OP_FIBER_JOIN;
    uint32_t nargs = 0;
    if (!accept(p, ")")) {
      do {
        tok_t *a = next(p);
        if (nargs >= nparams) {
          if (join)
            hali_asm_error(p, a, "too many arguments: fiber.join @%s takes "
                           "one !hal.fence (the spawned fiber's)", cf->name);
          else
            hali_asm_error(p, a, "too many arguments: @%s takes %u",
                           cf->name, nparams);
          return false;
        }
        if (!(o = hali_asm_push_op(p, &nops)) ||
            !hali_asm_parse_reg(b, a, ptypes[nargs], false, o))
          return false;
        nargs++;
      } while (accept(p, ","));
      if (!hali_asm_expect(p, ")", "after call arguments")) return false;
    }
    if (nargs != nparams) {
      if (join)
        hali_asm_error(p, callee, "fiber.join @%s takes one !hal.fence (the "
                       "spawned fiber's), %u given", cf->name, nargs);
      else
        hali_asm_error(p, callee, "@%s takes %u argument(s), %u given",
                       cf->name, nparams, nargs);
      return false;
    }
    const hali_type_t *rtypes;
    uint32_t nres = hali_ir_call_results((uint16_t)op, cf, &rtypes);
    if (ndefs != nres) {
      if (op == HALI_OP_CALL || join)
        hali_asm_error(p, callee, "@%s returns %u value(s), %zu assigned",
                       cf->name, nres, ndefs);
      else
        hali_asm_error(p, callee,
                       "fiber.spawn gives one !hal.fence, %zu assigned", ndefs);
      return false;
    }
    for (size_t i = 0; i < ndefs; ++i) {
      if (!(o = hali_asm_push_op(p, &nops))) return false;
      /* A tensor result takes the callee's declared shape. */
      if (rtypes[i] == HALI_TYPE_TENSOR && op != HALI_OP_FIBER_SPAWN &&
          cf->result_xtypes) {
        if (!hali_asm_def_tensor(b, defs[i], &cf->result_xtypes[i], o))
          return false;
      } else if (!hali_asm_parse_reg(b, defs[i], rtypes[i], true, o)) {
        return false;
      }
    }
    aux = (uint16_t)nargs;
  } else if (info->flags & HALI_OPF_TENSOR) {
    if (!hali_asm_parse_tensor_op(b, op, opt, defs, ndefs, &nops)) return false;
  } else if (op == HALI_OP_RETURN) {
    if (ndefs) {
      hali_asm_error(p, first, "return does not define registers");
      return false;
    }
    while (peek(p)->kind == T_REG && same_line(peek(p), opt)) {
      tok_t *r = next(p);
      if (nops >= b->f->result_count) {
        hali_asm_error(p, r, "too many return values: @%s returns %u",
                       b->f->name, b->f->result_count);
        return false;
      }
      uint32_t k = nops;
      if (!(o = hali_asm_push_op(p, &nops)) ||
          !hali_asm_parse_reg(b, r, b->f->results[k], false, o))
        return false;
      if (!(tok_is(peek(p), T_PUNCT, ",") && same_line(peek(p), opt))) break;
      next(p);
    }
    if (nops != b->f->result_count) {
      hali_asm_error(p, opt, "@%s returns %u value(s), return gives %u",
                     b->f->name, b->f->result_count, nops);
      return false;
    }
  } else {
    size_t ndef_used = 0;
    bool first_use = true;
    for (uint32_t i = 0; i < info->operand_count; ++i) {
      const hali_operand_desc_t *d = &info->operands[i];
      if (!(o = hali_asm_push_op(p, &nops))) return false;
      if (d->role == HALI_ROLE_WRITE) {
        if (ndef_used >= ndefs) {
          hali_asm_error(p, opt,
                         "'%s' defines a register: expected '%%name = %s'",
                         info->name, info->name);
          return false;
        }
        /* global.load.ref: the register takes the global's ref type. */
        hali_type_t wt = d->type;
        if (op == HALI_OP_GLOBAL_LOAD_REF) {
          int32_t gi = find_global(p, peek(p));
          if (gi >= 0 && hali_type_is_ref(p->m->globals[gi].type))
            wt = p->m->globals[gi].type;
        }
        /* mov.ref: the register takes the moved register's type. */
        if (op == HALI_OP_MOV_REF) {
          int32_t ri = hali_asm_find_reg(p, peek(p));
          if (ri >= 0 && hali_type_is_ref(b->f->reg_types[ri]))
            wt = b->f->reg_types[ri];
        }
        if (!hali_asm_parse_reg(b, defs[ndef_used++], wt, true, o))
          return false;
        continue;
      }
      if (!first_use && !hali_asm_expect(p, ",", "between operands"))
        return false;
      first_use = false;
      switch (d->role) {
      case HALI_ROLE_READ:
        if (!hali_asm_parse_reg(b, next(p), d->type, false, o)) return false;
        break;
      case HALI_ROLE_IMM: {
        int64_t x;
        if (d->type == HALI_TYPE_I32 || d->type == HALI_TYPE_I64) {
          if (!parse_int_or_named(p, d->type == HALI_TYPE_I32 ? 32 : 64, &x))
            return false;
        } else if (!hali_asm_parse_float(p, d->type == HALI_TYPE_F32 ? 32 : 64,
                                         &x)) {
          return false;
        }
        if (!hali_ir_set_imm(p->m, o, x)) return hali_asm_oom(p, peek(p));
        break;
      }
      case HALI_ROLE_BLOCK:
        if (!parse_block_ref(b, o)) return false;
        break;
      case HALI_ROLE_STRING: {
        tok_t *s;
        if (!hali_asm_expect_kind(p, T_STRING, "a string", &s)) return false;
        size_t len;
        char *str = hali_asm_decode_string(p, s, &len);
        if (!str) {
          hali_asm_error(p, s, "bad string");
          return false;
        }
        o->kind = HALI_IR_STRING;
        if ((o->v = intern(p, str, len)) == UINT32_MAX) {
          hali_asm_oom(p, s);
          return false;
        }
        break;
      }
      case HALI_ROLE_EXECUTABLE: {
        tok_t *s;
        if (!hali_asm_expect_kind(p, T_SYM, "an executable name (@name)", &s))
          return false;
        int32_t xi = hali_asm_find_exe(p, s->text + 1, s->len - 1);
        if (xi < 0) {
          hali_asm_error(p, s, "undefined executable");
          return false;
        }
        o->kind = HALI_IR_EXECUTABLE;
        o->v = (uint32_t)xi;
        break;
      }
      case HALI_ROLE_RODATA: {
        if (!hali_asm_parse_rodata_ref(p, o)) return false;
        break;
      }
      case HALI_ROLE_GLOBAL:
        if (!hali_asm_parse_global_ref(p, info, d->type, o)) return false;
        break;
      default:
        hali_asm_error(p, opt, "internal: unsupported operand role");
        return false;
      }
    }
    if (ndef_used != ndefs) {
      hali_asm_error(p, first, "'%s' defines %zu register(s), %zu given",
                     info->name, ndef_used, ndefs);
      return false;
    }
    if (info->tail) {
      /* The variadic tail: `, [x, y, ...]` of blocks or registers. */
      if ((info->operand_count > ndef_used &&
           !hali_asm_expect(p, ",", "before the bracketed list")) ||
          !hali_asm_expect(p, "[", "to open the bracketed list"))
        return false;
      if (!accept(p, "]")) {
        do {
          if (!(o = hali_asm_push_op(p, &nops))) return false;
          if (info->tail == 'b') {
            if (!parse_block_ref(b, o)) return false;
          } else if (!hali_asm_parse_reg(b, next(p), info->tail_type, false,
                                         o)) {
            return false;
          }
        } while (accept(p, ","));
        if (!hali_asm_expect(p, "]", "to close the bracketed list"))
          return false;
      }
    }
  }

  uint32_t line = first->line;
  if (tok_is(peek(p), T_IDENT, "loc") && same_line(peek(p), opt)) {
    next(p);
    int64_t l;
    if (!hali_asm_expect(p, "(", "after loc") ||
        !hali_asm_parse_int(p, next(p), 32, &l) ||
        !hali_asm_expect(p, ")", "after the line number"))
      return false;
    line = (uint32_t)l;
  }
  hali_ir_insn_t *insn = hali_ir_block_add_insn(blk, (uint16_t)op, nops);
  if (!insn) {
    hali_asm_oom(p, opt);
    return false;
  }
  if (nops) memcpy(insn->operands, p->ops, nops * sizeof(p->ops[0]));
  insn->aux = aux;
  insn->line = line;
  return true;
}

/* `execute { loc(N)` and `} loc(N)`: the line of a group marker. */
static bool parse_group_loc(parser_t *p, const tok_t *at, hali_ir_insn_t *g) {
  if (!(tok_is(peek(p), T_IDENT, "loc") && same_line(peek(p), at))) return true;
  next(p);
  int64_t l;
  if (!hali_asm_expect(p, "(", "after loc") ||
      !hali_asm_parse_int(p, next(p), 32, &l) ||
      !hali_asm_expect(p, ")", "after the line number"))
    return false;
  g->line = (uint32_t)l;
  return true;
}

static bool parse_body(parser_t *p, hali_ir_func_t *f,
                       const func_header_t *headers, uint32_t fidx) {
  body_t b = {p, f, fidx, headers};
  hali_asm_seek(p, &headers[fidx].body);
  next(p); /* '{' */
  /* The labels pass 1 found, so that branches may refer forward. */
  const func_header_t *h = &headers[fidx];
  bool implicit_entry = !(peek(p)->kind == T_LABEL &&
                          tok_is(peek_at(p, p->pos + 1), T_PUNCT, ":"));
  hali_strmap_clear(&p->blocks);
  if (!index_regs(p, f) ||
      (implicit_entry &&
       (!func_add_block(p, f, "entry", 5) ||
        hali_strmap_insert(&p->blocks, f->blocks[0].name, 5, 0) != 0)))
    return hali_asm_oom(p, peek(p)); /* keeps index_regs' own error */
  for (size_t i = 0; i < h->nlabels; ++i) {
    const tok_t *t = &p->labels[h->label0 + i];
    uint32_t k = f->block_count;
    /* The key is the label in the source: the block's name is a copy. */
    uint32_t got = hali_strmap_insert(&p->blocks, t->text + 1, t->len - 1, k);
    if (got == HALI_STRMAP_NONE) return hali_asm_oom(p, t);
    if (got != k) {
      hali_asm_error(p, t, "block label defined twice");
      return false;
    }
    if (!func_add_block(p, f, t->text + 1, t->len - 1))
      return hali_asm_oom(p, t);
  }
  int32_t cur = implicit_entry ? 0 : -1;
  uint32_t groups = 0; /* open execute / concurrent groups */
  while (!p->error) {
    hali_asm_release(p);
    tok_t *t = peek(p);
    if ((tok_is(t, T_IDENT, "execute") || tok_is(t, T_IDENT, "concurrent")) &&
        tok_is(peek_at(p, p->pos + 1), T_PUNCT, "{") && cur >= 0) {
      hali_ir_insn_t *g = hali_ir_block_add_insn(
          &f->blocks[cur],
          tok_is(t, T_IDENT, "execute") ? HALI_OP_TENSOR_EXECUTE
                                        : HALI_OP_TENSOR_CONCURRENT,
          0);
      if (!g) return hali_asm_oom(p, t);
      g->line = t->line;
      p->pos += 2;
      if (!parse_group_loc(p, t, g)) return false;
      groups++;
      continue;
    }
    if (groups && tok_is(t, T_PUNCT, "}")) {
      hali_ir_insn_t *g =
          hali_ir_block_add_insn(&f->blocks[cur], HALI_OP_TENSOR_END, 0);
      if (!g) return hali_asm_oom(p, t);
      g->line = t->line;
      p->pos++;
      if (!parse_group_loc(p, t, g)) return false;
      groups--;
      continue;
    }
    if (accept(p, "}")) return true;
    if (t->kind == T_EOF) {
      hali_asm_error(p, t, "expected '}' to close @%s", f->name);
      return false;
    }
    if (t->kind == T_LABEL && tok_is(peek_at(p, p->pos + 1), T_PUNCT, ":")) {
      p->pos += 2;
      cur++;
      continue;
    }
    if (!parse_insn(&b, &f->blocks[cur])) return false;
  }
  return false;
}

/* rodata @name = bytes "..."  |  rodata @name = KIND[v, v, ...] */
static bool parse_rodata(parser_t *p) {
  tok_t *name;
  if (!hali_asm_expect_kind(p, T_SYM, "a rodata name (@name)", &name))
    return false;
  if (find_rodata(p, name) >= 0) {
    hali_asm_error(p, name, "rodata defined twice");
    return false;
  }
  if (!hali_asm_expect(p, "=", "after the rodata name")) return false;
  tok_t *kt = peek(p);
  uint8_t kind = HALI_RODATA_KIND_COUNT;
  for (uint8_t k = 0; k < HALI_RODATA_KIND_COUNT; ++k)
    if (tok_is(kt, T_IDENT, hali_rodata_kind_name(k))) kind = k;
  if (kind == HALI_RODATA_KIND_COUNT) {
    hali_asm_error(p, kt, "expected bytes, i8, i16, i32, i64, f32 or f64");
    return false;
  }
  next(p);
  if (kind == HALI_RODATA_BYTES) {
    tok_t *s;
    if (!hali_asm_expect_kind(p, T_STRING, "a string of bytes", &s))
      return false;
    size_t len;
    char *bytes = hali_asm_decode_string(p, s, &len);
    if (!bytes) return false;
    bool ok = hali_ir_module_add_rodata(p->m, name->text + 1, name->len - 1,
                                        kind, bytes, len) != NULL;
    hali_free(bytes);
    if (!ok) hali_asm_oom(p, s);
    return ok;
  }
  if (!hali_asm_expect(p, "[", "to open the values")) return false;
  uint32_t esize = hali_rodata_kind_size(kind);
  size_t cap = 64, n = 0;
  uint8_t *buf = hali_malloc(cap * esize);
  bool ok = buf != NULL || hali_asm_oom(p, name);
  if (ok && !accept(p, "]")) {
    do {
      int64_t v;
      if (kind == HALI_RODATA_F32 || kind == HALI_RODATA_F64)
        ok = hali_asm_parse_float(p, kind == HALI_RODATA_F32 ? 32 : 64, &v);
      else
        ok = hali_asm_parse_int(p, next(p), (int)esize * 8, &v);
      if (!ok) break;
      if (n == cap) {
        uint8_t *g = hali_realloc(buf, (cap *= 2) * esize);
        if (!g) {
          ok = hali_asm_oom(p, name);
          break;
        }
        buf = g;
      }
      /* Little-endian, the low |esize| bytes of the value's bits. */
      for (uint32_t b = 0; b < esize; ++b)
        buf[n * esize + b] = (uint8_t)((uint64_t)v >> (8 * b));
      n++;
    } while (accept(p, ","));
    ok = ok && hali_asm_expect(p, "]", "to close the values");
  }
  if (ok && !hali_ir_module_add_rodata(p->m, name->text + 1, name->len - 1,
                                       kind, buf, (uint64_t)n * esize)) {
    hali_asm_oom(p, name);
    ok = false;
  }
  hali_free(buf);
  return ok;
}

/* global @name : TYPE [mutable] [= LITERAL]
 * global @name : tensor<...> [mutable]
 * global @name : tensor<...> = parameter "scope" :: "key"          */
static bool parse_global(parser_t *p, const tok_t *kw) {
  tok_t *name;
  if (!hali_asm_expect_kind(p, T_SYM, "a global name (@name)", &name))
    return false;
  if (find_global(p, name) >= 0) {
    hali_asm_error(p, name, "global defined twice");
    return false;
  }
  if (!hali_asm_expect(p, ":", "after the global name")) return false;
  hali_ir_xtype_t x;
  tok_t *tt = peek(p);
  hali_type_t type = parse_value_type(p, &x);
  if (type == HALI_TYPE_NONE) return false;
  if (!hali_type_is_valid(type) && type != HALI_TYPE_TENSOR) {
    hali_free(x.dims);
    hali_asm_error(p, tt, "a global holds i32, i64, f32, f64, a !hal ref or "
                          "a tensor");
    return false;
  }
  hali_ir_global_t *g =
      hali_ir_module_add_global(p->m, name->text + 1, name->len - 1);
  if (!g) {
    hali_free(x.dims);
    return hali_asm_oom(p, name);
  }
  g->type = type;
  g->line = kw->line;
  if (type == HALI_TYPE_TENSOR) g->xtype = x;
  else hali_free(x.dims);
  if (hali_strmap_insert(&p->globals, g->name, name->len - 1,
                         p->m->global_count - 1) != p->m->global_count - 1)
    return hali_asm_oom(p, name);
  if (tok_is(peek(p), T_IDENT, "mutable")) {
    next(p);
    g->flags |= HALI_GLOBAL_MUTABLE;
  }
  if (!accept(p, "=")) return true;
  tok_t *v = peek(p);
  bool lowered_param = type == HALI_TYPE_BUFFER && tok_is(v, T_IDENT, "parameter");
  if (type == HALI_TYPE_TENSOR || lowered_param) {
    if (!tok_is(v, T_IDENT, "parameter")) {
      hali_asm_error(p, v, "a tensor global's initial value is "
                           "'parameter \"scope\" :: \"key\"'");
      return false;
    }
    if (g->flags & HALI_GLOBAL_MUTABLE) {
      hali_asm_error(p, v, "a parameter global is immutable: drop 'mutable'");
      return false;
    }
    next(p);
    tok_t *sc, *key;
    size_t len;
    if (!hali_asm_expect_kind(p, T_STRING, "a parameter scope string", &sc))
      return false;
    if (!(g->param_scope = hali_asm_decode_string(p, sc, &len))) return false;
    g->param_scope[len] = 0;
    if (!hali_asm_expect(p, ":", "'::' between scope and key") ||
        !hali_asm_expect(p, ":", "'::' between scope and key") ||
        !hali_asm_expect_kind(p, T_STRING, "a parameter key string", &key))
      return false;
    if (!(g->param_key = hali_asm_decode_string(p, key, &len))) return false;
    g->param_key[len] = 0;
    g->flags |= HALI_GLOBAL_PARAMETER;
    /* Lowered by stream-to-hal (hali dis --after): the buffer the context
     * fills from the parameter, with the tensor type it is checked
     * against: `global @w : !hal.buffer = parameter "s" :: "k" :
     * tensor<4xf32>`. */
    if (lowered_param) {
      tok_t *tt2 = peek(p);
      if (!hali_asm_expect(p, ":", "before the parameter's tensor type"))
        return false;
      hali_ir_xtype_t px;
      if (parse_value_type(p, &px) != HALI_TYPE_TENSOR) {
        hali_free(px.dims);
        hali_asm_error(p, tt2, "expected the parameter's tensor type");
        return false;
      }
      g->xtype = px;
    }
    return true;
  }
  if (hali_type_is_ref(type)) {
    hali_asm_error(p, v, "a ref global starts null and takes no initial "
                         "value (store one in an initializer)");
    return false;
  }
  bool ok = type == HALI_TYPE_I32 || type == HALI_TYPE_I64
                ? hali_asm_parse_int(p, next(p), type == HALI_TYPE_I32 ? 32 : 64,
                                     &g->init)
                : hali_asm_parse_float(p, type == HALI_TYPE_F32 ? 32 : 64,
                                       &g->init);
  if (ok) g->flags |= HALI_GLOBAL_INIT;
  return ok;
}

static bool parse_xtype_text(parser_t *p, hali_ir_xtype_t *x);

/* A signature value: i32 | i64 | f32 | f64 | tensor<4x?xf32>.  A rejected
 * type leaves no dims behind (a fuzz target found the leak). */
bool hali_asm_parse_xtype(parser_t *p, hali_ir_xtype_t *x) {
  if (parse_xtype_text(p, x)) return true;
  hali_free(x->dims);
  x->dims = NULL;
  x->rank = 0;
  return false;
}

static bool parse_xtype_text(parser_t *p, hali_ir_xtype_t *x) {
  tok_t *t = peek(p);
  if (t->kind == T_TYPE && t->len > 8 && memcmp(t->text, "tensor<", 7) == 0) {
    const char *s = t->text + 7, *end = t->text + t->len - 1;
    while (s < end) {
      const char *part = s;
      while (s < end && *s != 'x') ++s;
      size_t len = (size_t)(s - part);
      if (s == end) { /* the element type */
        hali_hal_element_type_t et;
        hali_status_t st = hali_hal_element_type_parse(part, len, &et);
        if (st) {
          hali_status_free(st);
          hali_asm_error(p, t, "unknown element type '%.*s' in tensor type",
                         (int)len, part);
          return false;
        }
        x->type = HALI_TYPE_NONE;
        x->element_type = et;
        uint64_t bytes;
        uint32_t at;
        if (!hali_ir_xtype_static_bytes(x, &bytes, &at)) {
          if (at < x->rank)
            hali_asm_error(
                p, t,
                "tensor type too large: the product of its "
                "dimensions overflows 64 bits at dimension %u (%lld)",
                at, (long long)x->dims[at]);
          else
            hali_asm_error(p, t,
                           "tensor type too large: its element count times "
                           "the %u-byte element size (%.*s) overflows 64 bits",
                           hali_hal_element_type_byte_size(et), (int)len, part);
          return false;
        }
        next(p);
        return true;
      }
      int64_t dim = -1;
      if (!(len == 1 && part[0] == '?')) {
        char buf[24];
        char *e;
        if (len == 0 || len >= sizeof(buf) || !isdigit((unsigned char)part[0])) {
          hali_asm_error(p, t, "bad dimension '%.*s' in tensor type", (int)len,
                         part);
          return false;
        }
        memcpy(buf, part, len);
        buf[len] = 0;
        errno = 0;
        dim = (int64_t)strtoll(buf, &e, 10);
        if (*e || errno || dim < 0) {
          hali_asm_error(p, t, "bad dimension '%.*s' in tensor type", (int)len,
                         part);
          return false;
        }
      }
      int64_t *dims = hali_realloc(x->dims, (x->rank + 1) * sizeof(int64_t));
      if (!dims) return hali_asm_oom(p, t);
      x->dims = dims;
      x->dims[x->rank++] = dim;
      ++s; /* 'x' */
    }
    hali_asm_error(p, t, "tensor type without an element type");
    return false;
  }
  hali_type_t type = hali_asm_parse_type(p);
  if (type == HALI_TYPE_NONE) return false;
  /* Refs parse here so that materialize-interfaces can reject them with
   * the export and argument named (doc/passes.md). */
  x->type = type;
  return true;
}

static bool parse_xtypes(parser_t *p, hali_ir_xtype_t **v, uint32_t *n,
                         bool parens_required) {
  bool paren = accept(p, "(");
  if (parens_required && !paren) {
    hali_asm_error(p, peek(p), "expected '(' to open the signature");
    return false;
  }
  if (paren && accept(p, ")")) return true;
  do {
    hali_ir_xtype_t *x = hali_ir_xtype_append(v, n);
    if (!x) return hali_asm_oom(p, peek(p));
    if (!hali_asm_parse_xtype(p, x)) return false;
  } while (paren && accept(p, ","));
  return !paren || hali_asm_expect(p, ")", "to close the signature");
}

static bool parse_string_attr(parser_t *p, char **out) {
  tok_t *s;
  size_t len;
  if (!hali_asm_expect_kind(p, T_STRING, "a string", &s)) return false;
  char *str = hali_asm_decode_string(p, s, &len);
  if (!str) return false;
  if (memchr(str, 0, len)) {
    hali_free(str);
    hali_asm_error(p, s, "names may not contain NUL");
    return false;
  }
  str[len] = 0; /* decode_string leaves room: the token has 2 quotes */
  hali_free(*out);
  *out = str;
  return true;
}

/* After `format`: "F" [library "L"] [if device "K"] [if loader "F2"]. */
static bool parse_variant_rest(parser_t *p, char **format, char **library,
                               char **if_device, char **if_loader) {
  if (!parse_string_attr(p, format)) return false;
  if (tok_is(peek(p), T_IDENT, "library")) {
    next(p);
    if (!parse_string_attr(p, library)) return false;
  }
  while (tok_is(peek(p), T_IDENT, "if")) {
    next(p);
    tok_t *what = peek(p);
    char **slot = tok_is(what, T_IDENT, "device")   ? if_device
                  : tok_is(what, T_IDENT, "loader") ? if_loader
                                                    : NULL;
    if (!slot) {
      hali_asm_error(p, what,
                     "expected 'device \"KIND\"' or 'loader \"FORMAT\"' "
                     "after 'if' (a variant's condition)");
      return false;
    }
    if (*slot) {
      hali_asm_error(p, what, "this variant already has an 'if %s' condition",
                     slot == if_device ? "device" : "loader");
      return false;
    }
    next(p);
    tok_t *val = peek(p);
    if (!parse_string_attr(p, slot)) return false;
    if (slot == if_device && strcmp(*slot, "local-sync") != 0 &&
        strcmp(*slot, "local-task") != 0) {
      hali_asm_error(p, val,
                     "unknown device kind \"%s\" (known: local-sync, "
                     "local-task)",
                     *slot);
      return false;
    }
  }
  return true;
}

/* executable @name format "ffi" [library "path"] [if device "K"]
 *     [if loader "F"] [or format ... (more variants)] {
 *   export @k(SIG...) -> (SIG...) [symbol "s"] [function @f]
 *          [workgroup_size [x, y, z]] [workgroup_info] [returns_status]
 * } */
static bool parse_executable(parser_t *p) {
  tok_t *name;
  if (!hali_asm_expect_kind(p, T_SYM, "an executable name (@name)", &name))
    return false;
  uint32_t ei = p->m->executable_count;
  uint32_t got = hali_strmap_insert(&p->exes, name->text + 1, name->len - 1, ei);
  if (got != ei) {
    if (got == HALI_STRMAP_NONE)
      hali_asm_oom(p, name);
    else
      hali_asm_error(p, name, "executable defined twice");
    return false;
  }
  hali_strmap_t *maps = hali_realloc(p->exports, (ei + 1) * sizeof(*maps));
  if (!maps) return hali_asm_oom(p, name);
  p->exports = maps;
  memset(&maps[ei], 0, sizeof(maps[ei]));
  hali_ir_executable_t *e =
      hali_ir_module_add_executable(p->m, name->text + 1, name->len - 1);
  if (!e) return hali_asm_oom(p, name);
  if (!tok_is(peek(p), T_IDENT, "format")) {
    hali_asm_error(p, peek(p),
                   "expected 'format \"NAME\"' after the executable name");
    return false;
  }
  next(p);
  if (!parse_variant_rest(p, &e->format, &e->library, &e->if_device,
                          &e->if_loader))
    return false;
  /* Fallback variants: `or format "F" [library "L"] [if ...]`. */
  while (tok_is(peek(p), T_IDENT, "or")) {
    next(p);
    if (!tok_is(peek(p), T_IDENT, "format")) {
      hali_asm_error(p, peek(p),
                     "expected 'format \"NAME\"' after 'or' (the next "
                     "variant of @%s)",
                     e->name);
      return false;
    }
    tok_t *at = next(p);
    if (e->variant_count >= 63) {
      hali_asm_error(p, at, "@%s has more than 64 variants", e->name);
      return false;
    }
    hali_ir_variant_t *v = hali_ir_executable_add_variant(e);
    if (!v) return hali_asm_oom(p, at);
    if (!parse_variant_rest(p, &v->format, &v->library, &v->if_device,
                            &v->if_loader))
      return false;
  }
  if (!hali_asm_expect(p, "{", "to open the executable")) return false;
  while (!accept(p, "}")) {
    if (!tok_is(peek(p), T_IDENT, "export")) {
      hali_asm_error(p, peek(p), "expected 'export' or '}'");
      return false;
    }
    next(p);
    tok_t *xn;
    if (!hali_asm_expect_kind(p, T_SYM, "an export name (@name)", &xn))
      return false;
    uint32_t xk = e->export_count;
    uint32_t had = hali_strmap_insert(&p->exports[ei], xn->text + 1,
                                      xn->len - 1, xk);
    if (had != xk) {
      if (had == HALI_STRMAP_NONE)
        hali_asm_oom(p, xn);
      else
        hali_asm_error(p, xn, "export defined twice in @%s", e->name);
      return false;
    }
    hali_ir_export_t *x =
        hali_ir_executable_add_export(e, xn->text + 1, xn->len - 1);
    if (!x) return hali_asm_oom(p, xn);
    if (!parse_xtypes(p, &x->params, &x->param_count, true)) return false;
    if (accept(p, "->") &&
        !parse_xtypes(p, &x->results, &x->result_count, false))
      return false;
    for (;;) {
      tok_t *a = peek(p);
      if (tok_is(a, T_IDENT, "symbol")) {
        next(p);
        if (!parse_string_attr(p, &x->symbol)) return false;
      } else if (tok_is(a, T_IDENT, "function")) {
        next(p);
        tok_t *f;
        if (!hali_asm_expect_kind(p, T_SYM, "a kernel function (@name)", &f))
          return false;
        int32_t fi = find_func(p, f);
        x->function = fi < 0 ? UINT32_MAX : (uint32_t)fi;
        if (x->function == UINT32_MAX) {
          hali_asm_error(p, f, "undefined kernel function");
          return false;
        }
      } else if (tok_is(a, T_IDENT, "workgroups")) {
        /* workgroups @f: the workgroup-count function. */
        next(p);
        tok_t *f;
        if (!hali_asm_expect_kind(p, T_SYM, "a workgroup-count function (@name)",
                                  &f))
          return false;
        int32_t fi = find_func(p, f);
        if (fi < 0) {
          hali_asm_error(p, f, "undefined workgroup-count function");
          return false;
        }
        x->count_function = (uint32_t)fi;
        x->flags |= HALI_EXPORT_COUNT_FUNCTION;
      } else if (tok_is(a, T_IDENT, "workgroup_size")) {
        next(p);
        if (!hali_asm_expect(p, "[", "to open the workgroup size"))
          return false;
        for (int k = 0; k < 3; ++k) {
          int64_t v;
          if ((k && !hali_asm_expect(p, ",", "between workgroup sizes")) ||
              !hali_asm_parse_int(p, next(p), 32, &v))
            return false;
          if (v <= 0) {
            hali_asm_error(p, peek_at(p, p->pos - 1),
                           "workgroup sizes must be >= 1");
            return false;
          }
          x->workgroup_size[k] = (uint32_t)v;
        }
        if (!hali_asm_expect(p, "]", "to close the workgroup size"))
          return false;
      } else if (tok_is(a, T_IDENT, "layout")) {
        /* layout(constants N, bindings M): a declared interface, checked
         * against the signature by materialize-interfaces. */
        next(p);
        int64_t nc, nb;
        if (!hali_asm_expect(p, "(", "after layout") ||
            !tok_is(peek(p), T_IDENT, "constants")) {
          hali_asm_error(p, peek(p),
                         "expected layout(constants N, bindings M)");
          return false;
        }
        next(p);
        tok_t *nct = next(p);
        if (!hali_asm_parse_int(p, nct, 32, &nc) ||
            !hali_asm_expect(p, ",", "in layout(constants N, bindings M)") ||
            !tok_is(peek(p), T_IDENT, "bindings")) {
          hali_asm_error(p, peek(p),
                         "expected layout(constants N, bindings M)");
          return false;
        }
        next(p);
        tok_t *nbt = next(p);
        if (!hali_asm_parse_int(p, nbt, 32, &nb) ||
            !hali_asm_expect(p, ")", "to close the layout"))
          return false;
        /* parse_int sign-extends: 4294967295 reads as -1. */
        if (nc < 0 || nb < 0) {
          hali_asm_error(p, nc < 0 ? nct : nbt,
                         "layout counts are between 0 and 2147483647");
          return false;
        }
        x->layout_declared = true;
        x->layout_constants = (uint32_t)nc;
        x->layout_bindings = (uint32_t)nb;
      } else if (tok_is(a, T_IDENT, "workgroup_info")) {
        next(p);
        x->flags |= HALI_EXPORT_WORKGROUP_INFO;
      } else if (tok_is(a, T_IDENT, "returns_status")) {
        next(p);
        x->flags |= HALI_EXPORT_RETURNS_STATUS;
      } else {
        break;
      }
    }
  }
  return true;
}

/* A call to @f$async where @f is a tensor-level function (a tensor or
 * index in its signature) that does not say "external" and has no @f$async
 * of its own: func-conversion will make @f$async with the ABI signature
 * (vm/ir.h, HALI_FUNC_ASYNC_STUB), so the call is checked against that
 * now and names a placeholder the pass fills in.  False (no error set)
 * when |callee| is no such name; false with an error on OOM. */
static bool async_stub(parser_t *p, const tok_t *callee, int32_t *out_index,
                       hali_ir_func_t **out_func) {
  const char *name = callee->text + 1;
  size_t len = callee->len - 1;
  if (len <= 6 || memcmp(name + len - 6, "$async", 6) != 0) return false;
  uint32_t k = hali_strmap_find(&p->stub_names, name, len);
  if (k != HALI_STRMAP_NONE) {
    *out_index = (int32_t)(p->m->func_count + k);
    *out_func = p->stubs[k];
    return true;
  }
  uint32_t xi = hali_strmap_find(&p->funcs, name, len - 6);
  if (xi == HALI_STRMAP_NONE) return false;
  const hali_ir_func_t *x = &p->m->funcs[xi];
  bool tensor = false, external = (x->flags & HALI_FUNC_IMPORT) != 0;
  for (uint32_t i = 0; i < x->param_count; ++i)
    tensor |= x->reg_types[i] == HALI_TYPE_TENSOR ||
              x->reg_types[i] == HALI_TYPE_INDEX;
  for (uint32_t i = 0; i < x->result_count; ++i)
    tensor |= x->results[i] == HALI_TYPE_TENSOR ||
              x->results[i] == HALI_TYPE_INDEX;
  for (uint32_t i = 0; i < x->attr_count; ++i)
    external |= strcmp(x->attrs[i], "external") == 0;
  if (!tensor || external) {
    hali_asm_error(p, callee,
                   "call to undefined function: func-conversion makes "
                   "@%s$async only for a tensor-level function (a tensor or "
                   "index in its signature, not \"external\" nor an "
                   "import), and @%s is not one",
                   x->name, x->name);
    return false;
  }
  if (p->m->func_count + p->nstubs >= INT32_MAX) return false;
  hali_ir_func_t *s = hali_calloc(1, sizeof(*s));
  hali_ir_func_t **grown =
      hali_realloc(p->stubs, (p->nstubs + 1) * sizeof(*grown));
  if (grown) p->stubs = grown;
  bool ok = s && grown && (s->name = hali_strndup(name, len)) != NULL;
  for (uint32_t i = 0; ok && i < x->param_count + 2; ++i)
    ok = hali_ir_func_add_reg(s, i < x->param_count
                                     ? hali_ir_abi_type(x->reg_types[i])
                                     : HALI_TYPE_FENCE,
                              NULL, 0) != UINT32_MAX;
  if (ok) {
    s->param_count = x->param_count + 2;
    s->result_count = x->result_count;
    s->results = hali_malloc(x->result_count + 1);
    ok = s->results != NULL;
  }
  for (uint32_t i = 0; ok && i < x->result_count; ++i)
    s->results[i] = hali_ir_abi_type(x->results[i]);
  if (ok) {
    s->flags = HALI_FUNC_ASYNC_STUB;
    s->line = callee->line;
    k = p->nstubs;
    ok = hali_strmap_insert(&p->stub_names, s->name, len, k) == k;
  }
  if (!ok) {
    if (s) hali_ir_func_free(s);
    hali_free(s);
    hali_asm_oom(p, callee);
    return false;
  }
  p->stubs[p->nstubs++] = s;
  *out_index = (int32_t)(p->m->func_count + k);
  *out_func = s;
  return true;
}

/* After pass 2: the placeholders join the module, in the order their
 * indices were handed out (or are freed, on error). */
static void append_stubs(parser_t *p) {
  for (uint32_t k = 0; k < p->nstubs; ++k) {
    hali_ir_func_t *s = p->stubs[k];
    hali_ir_func_t *slot =
        p->error ? NULL : hali_ir_module_add_func(p->m, "", 0);
    if (!slot) {
      if (!p->error) hali_asm_oom(p, peek(p));
      hali_ir_func_free(s);
    } else {
      hali_free(slot->name);
      *slot = *s;
    }
    hali_free(s);
  }
  hali_free(p->stubs);
  p->stubs = NULL;
  p->nstubs = 0;
}

/* func @name(%a: T, ...) -> T | -> (T, ...) { */
static bool parse_header(parser_t *p, func_header_t *h) {
  tok_t *name;
  if (!hali_asm_expect_kind(p, T_SYM, "a function name (@name)", &name))
    return false;
  uint32_t fi = p->m->func_count;
  uint32_t got = hali_strmap_insert_hashed(&p->funcs, name->text + 1,
                                           name->len - 1, name->hash, fi);
  if (got != fi) {
    if (got == HALI_STRMAP_NONE)
      hali_asm_oom(p, name);
    else
      hali_asm_error(p, name, "function defined twice");
    return false;
  }
  hali_strmap_clear(&p->regs);
  /* hali_ir_module_add_func, in the room the assembler keeps (|funcs_cap|;
   * p->m->funcs moves, so p->cap_func is an index). */
  hali_ir_func_t *f = NULL;
  if (fi < UINT32_MAX &&
      grow((void **)&p->m->funcs, &p->funcs_cap, fi + 1,
           sizeof(hali_ir_func_t))) {
    f = &p->m->funcs[fi];
    memset(f, 0, sizeof(*f));
    if ((f->name = hali_malloc(name->len))) {
      memcpy(f->name, name->text + 1, name->len - 1);
      f->name[name->len - 1] = 0;
      p->m->func_count++;
    } else {
      f = NULL;
    }
  }
  if (!f) {
    hali_asm_oom(p, name);
    return false;
  }
  f->line = name->line;
  h->name = name->text + 1;
  h->len = name->len - 1;
  if (!hali_asm_expect(p, "(", "to open the parameter list")) return false;
  if (!accept(p, ")")) {
    do {
      tok_t *r;
      if (!hali_asm_expect_kind(p, T_REG, "a parameter (%name: type)", &r))
        return false;
      if (hali_asm_find_reg(p, r) >= 0) {
        hali_asm_error(p, r, "parameter named twice");
        return false;
      }
      if (!hali_asm_expect(p, ":", "after the parameter name")) return false;
      bool mut = false;
      if (tok_is(peek(p), T_IDENT, "mutable")) {
        next(p);
        mut = true;
      }
      hali_ir_xtype_t x;
      hali_type_t type = parse_value_type(p, &x);
      if (type == HALI_TYPE_NONE) return false;
      if (mut && type != HALI_TYPE_TENSOR && type != HALI_TYPE_BUFFER_VIEW) {
        hali_free(x.dims);
        hali_asm_error(
            p, r, "only tensor (or buffer view) parameters may be mutable");
        return false;
      }
      uint32_t reg = add_reg(p, f, type, r);
      bool okx = reg != UINT32_MAX &&
                 (type != HALI_TYPE_TENSOR || hali_ir_func_set_reg_xtype(f, reg, &x));
      hali_free(x.dims);
      if (!okx) return hali_asm_oom(p, r); /* add_reg's own error is kept */
      if (mut || f->param_flags) {
        uint8_t *pf = hali_realloc(f->param_flags, f->param_count + 1);
        if (!pf) return hali_asm_oom(p, r);
        if (!f->param_flags) memset(pf, 0, f->param_count + 1);
        f->param_flags = pf;
        pf[f->param_count] = mut ? HALI_PARAM_MUTABLE : 0;
      }
      f->param_count++;
    } while (accept(p, ","));
    if (!hali_asm_expect(p, ")", "to close the parameter list")) return false;
  }
  if (accept(p, "->")) {
    bool paren = accept(p, "(");
    if (!(paren && accept(p, ")"))) {
      do {
        int32_t tie = -1;
        if (peek(p)->kind == T_REG) {
          tok_t *r = next(p);
          int32_t reg = hali_asm_find_reg(p, r);
          if (reg < 0 || (uint32_t)reg >= f->param_count) {
            hali_asm_error(p, r, "a tied result names a parameter");
            return false;
          }
          if (!tok_is(peek(p), T_IDENT, "as")) {
            hali_asm_error(p, peek(p),
                           "expected 'as' after the tied parameter");
            return false;
          }
          next(p);
          tie = reg;
        }
        hali_ir_xtype_t x;
        hali_type_t type = parse_value_type(p, &x);
        if (type == HALI_TYPE_NONE) return false;
        if (type != HALI_TYPE_TENSOR) x.type = type;
        hali_type_t *rs = hali_realloc(f->results, f->result_count + 1);
        if (!rs) {
          hali_free(x.dims);
          return hali_asm_oom(p, peek(p));
        }
        f->results = rs;
        if ((type == HALI_TYPE_TENSOR || tie >= 0) && !f->result_xtypes) {
          f->result_xtypes = hali_calloc(f->result_count + 17, sizeof(hali_ir_xtype_t));
          f->result_ties = hali_malloc((f->result_count + 17) * sizeof(int32_t));
          if (!f->result_xtypes || !f->result_ties) {
            hali_free(x.dims);
            return hali_asm_oom(p, peek(p));
          }
          for (uint32_t k = 0; k < f->result_count + 17; ++k) f->result_ties[k] = -1;
          for (uint32_t k = 0; k < f->result_count; ++k)
            f->result_xtypes[k].type = f->results[k];
        }
        if (f->result_xtypes) {
          if (f->result_count >= 16) {
            hali_free(x.dims);
            hali_asm_error(p, peek(p),
                           "at most 16 results at the tensor level");
            return false;
          }
          f->result_xtypes[f->result_count] = x;
          f->result_ties[f->result_count] = tie;
        } else {
          hali_free(x.dims);
        }
        f->results[f->result_count++] = type;
      } while (paren && accept(p, ","));
      if (paren && !hali_asm_expect(p, ")", "to close the result list"))
        return false;
    }
  }
  /* attributes ["text", ...]: metadata carried over by the passes. */
  if (tok_is(peek(p), T_IDENT, "attributes")) {
    next(p);
    if (!hali_asm_expect(p, "[", "after attributes")) return false;
    if (!accept(p, "]")) {
      do {
        tok_t *s;
        size_t slen;
        if (!hali_asm_expect_kind(p, T_STRING, "an attribute string", &s))
          return false;
        char *str = hali_asm_decode_string(p, s, &slen);
        if (!str) return false;
        bool ok = hali_ir_func_add_attr(f, str, slen);
        hali_free(str);
        if (!ok) return hali_asm_oom(p, s);
      } while (accept(p, ","));
      if (!hali_asm_expect(p, "]", "to close the attributes")) return false;
    }
  }
  /* locals(%x: T, ...) declares registers up front, in this order (hali dis
   * writes it when first writes in text order would number registers
   * differently, or a read comes textually before its write). */
  if (tok_is(peek(p), T_IDENT, "locals")) {
    next(p);
    if (!hali_asm_expect(p, "(", "after locals")) return false;
    if (!accept(p, ")")) {
      do {
        tok_t *r;
        if (!hali_asm_expect_kind(p, T_REG, "a register (%name: type)", &r))
          return false;
        if (hali_asm_find_reg(p, r) >= 0) {
          hali_asm_error(p, r, "register declared twice");
          return false;
        }
        if (!hali_asm_expect(p, ":", "after the register name")) return false;
        hali_ir_xtype_t x;
        hali_type_t type = parse_value_type(p, &x);
        if (type == HALI_TYPE_NONE) return false;
        uint32_t reg = add_reg(p, f, type, r);
        bool okx = reg != UINT32_MAX &&
                   (type != HALI_TYPE_TENSOR ||
                    hali_ir_func_set_reg_xtype(f, reg, &x));
        hali_free(x.dims);
        if (!okx) return false;
      } while (accept(p, ","));
      if (!hali_asm_expect(p, ")", "to close locals")) return false;
    }
  }
  /* func @host.f(...) -> T import [optional]: no body. */
  if (tok_is(peek(p), T_IDENT, "import")) {
    next(p);
    f->flags |= HALI_FUNC_IMPORT;
    if (tok_is(peek(p), T_IDENT, "optional")) {
      next(p);
      f->flags |= HALI_FUNC_OPTIONAL;
    }
    h->has_body = false;
    return true;
  }
  if (!tok_is(peek(p), T_PUNCT, "{")) {
    hali_asm_error(p, peek(p),
                   "expected '{' to open the body of @%s (or 'import')",
                   f->name);
    return false;
  }
  h->has_body = true;
  h->body = *peek(p);
  /* Skip the body (noting its labels); it is parsed once every header is
   * known. */
  tok_t end;
  if (!hali_asm_skip_body(p, &h->label0, &h->nlabels, &end)) {
    hali_asm_error(p, &end, "expected '}' to close @%s", f->name);
    return false;
  }
  return true;
}

hali_status_t hali_asm_parse(const char *text, size_t len,
                             const char *filename,
                             hali_ir_module_t **out_module) {
  return hali_asm_parse_measured(text, len, filename, out_module, NULL);
}

hali_status_t hali_asm_parse_measured(const char *text, size_t len,
                                      const char *filename,
                                      hali_ir_module_t **out_module,
                                      size_t *out_token_chunks) {
  *out_module = NULL;
  if (out_token_chunks) *out_token_chunks = 0;
  parser_t p = {0};
  p.cap_func = UINT32_MAX;
  p.file = filename ? filename : "<input>";
  p.src = text;
  p.src_len = len;
  p.m = hali_ir_module_create();
  if (!p.m)
    return hali_status_oom();
  p.m->has_debug = true;
  func_header_t *headers = NULL;
  hali_asm_lex_init(&p);
  if (!p.error && tok_is(peek(&p), T_IDENT, "module")) {
    next(&p);
    tok_t *name;
    if (hali_asm_expect_kind(&p, T_SYM, "a module name (@name)", &name))
      p.m->name = hali_strndup(name->text + 1, name->len - 1);
    if (tok_is(peek(&p), T_IDENT, "source")) {
      next(&p);
      tok_t *s;
      size_t slen;
      if (hali_asm_expect_kind(&p, T_STRING, "a source file name", &s))
        p.m->source = hali_asm_decode_string(&p, s, &slen);
      if (p.m->source) p.m->source[slen] = 0;
    }
  }
  if (!p.error && !p.m->name) {
    const char *base = strrchr(p.file, '/');
    base = base ? base + 1 : p.file;
    size_t n = strcspn(base, ".");
    p.m->name = hali_strndup(base, n ? n : strlen(base));
    /* A file name may hold characters a name cannot: my-mod -> my_mod. */
    for (char *c = p.m->name; c && *c; ++c)
      if (!hali_name_char(*c)) *c = '_';
  }
  if (!p.error && !p.m->source) p.m->source = hali_strdup(p.file);
  /* Pass 1: headers. */
  size_t nheaders = 0, headers_cap = 0, nexe = 0;
  tok_t *exe_starts = NULL;
  while (!p.error && peek(&p)->kind != T_EOF) {
    hali_asm_release(&p);
    tok_t *t = peek(&p);
    if (tok_is(t, T_IDENT, "rodata")) {
      next(&p);
      if (!parse_rodata(&p)) {
        hali_asm_error(&p, peek(&p), "bad rodata");
        break;
      }
      /* Indexed under the name the module owns. */
      uint32_t k = p.m->rodata_count - 1;
      if (hali_strmap_insert(&p.rodata, p.m->rodata[k].name,
                             strlen(p.m->rodata[k].name), k) != k)
        hali_asm_oom(&p, t);
      continue;
    }
    if (tok_is(t, T_IDENT, "global")) {
      next(&p);
      if (!parse_global(&p, t)) {
        hali_asm_error(&p, peek(&p), "bad global");
        break;
      }
      continue;
    }
    if (tok_is(t, T_IDENT, "executable")) {
      /* Kernel functions may be defined after the executable: parsed in
       * pass 1b, once every header is known. */
      next(&p);
      tok_t *ne = hali_realloc(exe_starts, (nexe + 1) * sizeof(tok_t));
      if (!ne) {
        hali_asm_oom(&p, t);
        break;
      }
      exe_starts = ne;
      exe_starts[nexe++] = *peek(&p);
      size_t depth = 0;
      while (peek(&p)->kind != T_EOF) {
        hali_asm_release(&p);
        tok_t *u = next(&p);
        if (tok_is(u, T_PUNCT, "{")) depth++;
        if (tok_is(u, T_PUNCT, "}") && --depth == 0) break;
      }
      continue;
    }
    if (!tok_is(t, T_IDENT, "func")) {
      hali_asm_error(&p, t,
                     "expected 'func', 'rodata', 'global' or 'executable' at "
                     "top level");
      break;
    }
    next(&p);
    if (nheaders == headers_cap) {
      headers_cap = headers_cap ? 2 * headers_cap : 16;
      func_header_t *h = hali_realloc(headers, headers_cap * sizeof(*h));
      if (!h) {
        hali_asm_oom(&p, t);
        break;
      }
      headers = h;
    }
    if (!parse_header(&p, &headers[nheaders])) {
      hali_asm_error(&p, peek(&p), "bad function header");
      break;
    }
    nheaders++;
  }
  /* Pass 1b: executables (they name kernel functions). */
  for (size_t i = 0; !p.error && i < nexe; ++i) {
    hali_asm_seek(&p, &exe_starts[i]);
    if (!parse_executable(&p)) hali_asm_error(&p, peek(&p), "bad executable");
  }
  hali_free(exe_starts);
  /* Pass 2: bodies. */
  p.lex_batch = true;
  for (uint32_t i = 0; !p.error && i < p.m->func_count; ++i)
    if (headers[i].has_body &&
        !parse_body(&p, &p.m->funcs[i], headers, i))
      hali_asm_error(&p, peek(&p), "bad function body");
  hali_free(headers);
  /* Stub keys point into the stubs, which append_stubs moves: drop the
   * map first. */
  hali_strmap_free(&p.stub_names);
  append_stubs(&p);
  hali_asm_lex_rest(&p);
  if (out_token_chunks) *out_token_chunks = p.nalloc;
  hali_asm_lex_free(&p);
  hali_free(p.ops);
  hali_free(p.defs);
  hali_strmap_free(&p.funcs);
  hali_strmap_free(&p.rodata);
  hali_strmap_free(&p.exes);
  hali_strmap_free(&p.globals);
  for (uint32_t i = 0; i < p.m->executable_count; ++i)
    hali_strmap_free(&p.exports[i]);
  hali_free(p.exports);
  hali_strmap_free(&p.strings);
  hali_strmap_free(&p.regs);
  hali_strmap_free(&p.blocks);
  if (p.error) {
    hali_ir_module_free(p.m);
    return p.error;
  }
  *out_module = p.m;
  return HALI_OK;
}
