/* hali — the verifier.
 *
 * Runs on every load, after the passes and before encoding; there is no way
 * to skip it.  What it proves the interpreter never checks again:
 *   - every opcode is known and has the operand count its signature (or,
 *     for variadic ops, its callee or function signature) demands;
 *   - every register operand is in range and has the type the op needs;
 *   - every block target, string and function index is in range;
 *   - calls match the callee's parameter and result types; returns match
 *     the function's result types; switch tables are non-empty-safe;
 *   - every block is non-empty and ends in its only terminator;
 *   - every register is written before it is read on every path
 *     (definite assignment), so frames need no zeroing of scalar slots;
 *   - counts fit the encodings (at most 65535 registers and blocks).
 * Every rejection names the function, block, instruction and source line.
 * The structural check that runs before the passes is
 * vm/verify_structure.c; vm/verify_int.h holds what the two share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/verify_int.h"
#include "base/alloc.h"
#include "base/checked.h"

hali_status_t hali_verr(const vctx_t *v, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  hali_strbuf_t sb = {0};
  hali_ir_print_place(&sb, v->m, v->f, v->insn ? v->block : HALI_IR_NO_BLOCK,
                      v->insn, v->index, v->insn ? v->insn->line : 0);
  char *where = hali_strbuf_take(&sb);
  hali_status_t s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                     "%s: %s: %s", v->mode ? v->mode : "verify",
                                     where ? where : "?", msg);
  hali_free(where);
  return s;
}

hali_status_t hali_verify_check_reg(const vctx_t *v, uint32_t i,
                                    hali_type_t want) {
  const hali_ir_operand_t *o = &v->insn->operands[i];
  if (o->kind != HALI_IR_REG)
    return hali_verr(v, "operand %u must be a register", i);
  if (o->v >= v->f->reg_count)
    return hali_verr(v,
                     "operand %u: register %u out of range (function has %u)",
                     i, o->v, v->f->reg_count);
  hali_type_t have = v->f->reg_types[o->v];
  bool ok = want == HALI_TYPE_NONE      ? true
            : want == HALI_TYPE_ANY_REF ? hali_type_is_ref(have)
                                        : have == want;
  if (!ok) {
    char buf[64];
    return hali_verr(
        v, "operand %u: register %s is %s, expected %s", i,
        hali_ir_reg_name(v->f, o->v, buf, sizeof(buf)), hali_type_name(have),
        want == HALI_TYPE_ANY_REF ? "a ref" : hali_type_name(want));
  }
  return HALI_OK;
}

/* hali_verify_check_reg's common case inline (a register in range of the
 * type asked for, or any type): the verifier asks it of nearly every
 * operand, and only a mismatch needs the call (which also words the
 * message). */
static inline hali_status_t check_reg(const vctx_t *v, uint32_t i,
                                      hali_type_t want) {
  const hali_ir_operand_t *o = &v->insn->operands[i];
  if (__builtin_expect(o->kind == HALI_IR_REG && o->v < v->f->reg_count &&
                           (want == HALI_TYPE_NONE ||
                            v->f->reg_types[o->v] == want),
                       1))
    return HALI_OK;
  return hali_verify_check_reg(v, i, want);
}

static hali_status_t check_block(const vctx_t *v, uint32_t i) {
  const hali_ir_operand_t *o = &v->insn->operands[i];
  if (o->kind != HALI_IR_BLOCK)
    return hali_verr(v, "operand %u must be a block", i);
  if (o->v >= v->f->block_count)
    return hali_verr(v, "operand %u: block %u out of range (function has %u)",
                     i, o->v, v->f->block_count);
  return HALI_OK;
}

/* Operand |i| of a global.load / global.store names a global of the op's
 * type (a ref op: of the register's type); a store names a mutable global
 * or stands in an initializer. */
static hali_status_t check_global(const vctx_t *v, const hali_op_info_t *info,
                                  uint32_t i) {
  const hali_ir_operand_t *o = &v->insn->operands[i];
  const hali_ir_module_t *m = v->m;
  if (o->kind != HALI_IR_GLOBAL || o->v >= m->global_count)
    return hali_verr(v, "operand %u: global %u out of range (module has %u)",
                     i, o->v, m->global_count);
  const hali_ir_global_t *g = &m->globals[o->v];
  hali_type_t want = info->operands[i].type;
  /* The register operand: the other one (proven a register above or
   * below; read its type only when it is one in range). */
  uint32_t ri = i == 0 ? 1 : 0;
  const hali_ir_operand_t *ro = &v->insn->operands[ri];
  hali_type_t rt = ro->kind == HALI_IR_REG && ro->v < v->f->reg_count
                       ? v->f->reg_types[ro->v]
                       : HALI_TYPE_NONE;
  if (want == HALI_TYPE_ANY_REF ? g->type != rt || !hali_type_is_ref(rt)
                                : g->type != want)
    return hali_verr(v, "global @%s is %s, but %s %s %s", g->name,
                     hali_type_name(g->type), info->name,
                     want == HALI_TYPE_ANY_REF ? "moves" : "takes",
                     want == HALI_TYPE_ANY_REF ? hali_type_name(rt)
                                               : hali_type_name(want));
  bool store = info->operands[0].role == HALI_ROLE_GLOBAL;
  if (store && !(g->flags & HALI_GLOBAL_MUTABLE) &&
      !hali_ir_func_has_attr(v->f, HALI_ATTR_INITIALIZER))
    return hali_verr(v,
                     "stores immutable global @%s: only an initializer "
                     "(attributes [\"initializer\"]) may store it; declare "
                     "it 'mutable' to store it elsewhere",
                     g->name);
  return HALI_OK;
}

/* |info| is hali_op_info(v->insn->op), the caller's. */
static hali_status_t verify_insn(const vctx_t *v, const hali_op_info_t *info) {
  const hali_ir_insn_t *insn = v->insn;
  if (!info) return hali_verr(v, "unknown opcode %u", insn->op);
  if (info->flags & HALI_OPF_TENSOR)
    return hali_verr(v,
                     "tensor-level op '%s' remains: the load-time passes lower "
                     "the tensor level to HAL ops before a module runs",
                     info->name);
  if (hali_op_is_call(insn->op)) {
    if (insn->operand_count < 1 || insn->operands[0].kind != HALI_IR_FUNC)
      return hali_verr(v, "%s needs a callee", info->name);
    uint32_t ci = insn->operands[0].v;
    if (ci >= v->m->func_count)
      return hali_verr(v, "callee %u out of range (module has %u functions)",
                       ci, v->m->func_count);
    const hali_ir_func_t *cf = &v->m->funcs[ci];
    const hali_type_t *rtypes, *ptypes;
    uint32_t nres = hali_ir_call_results(insn->op, cf, &rtypes);
    uint32_t nparams = hali_ir_call_params(insn->op, cf, &ptypes);
    if (insn->aux != nparams || insn->operand_count != 1u + nparams + nres)
      return hali_verr(
          v,
          "%s to @%s passes %u argument(s) and takes %u result(s); "
          "it has %u parameter(s) and %u result(s)",
          info->name, cf->name, insn->aux,
          insn->operand_count - 1 -
              (insn->aux < insn->operand_count ? insn->aux : 0),
          nparams, nres);
    for (uint32_t i = 0; i < nparams; ++i)
      HALI_RETURN_IF_ERROR_PLAIN(check_reg(v, 1 + i, ptypes[i]));
    for (uint32_t i = 0; i < nres; ++i)
      HALI_RETURN_IF_ERROR_PLAIN(
          check_reg(v, 1 + nparams + i, rtypes[i]));
    return HALI_OK;
  }
  if (insn->op == HALI_OP_RETURN) {
    if (insn->operand_count != v->f->result_count)
      return hali_verr(v, "returns %u value(s), function returns %u",
                       insn->operand_count, v->f->result_count);
    for (uint32_t i = 0; i < insn->operand_count; ++i)
      HALI_RETURN_IF_ERROR_PLAIN(check_reg(v, i, v->f->results[i]));
    return HALI_OK;
  }
  bool variadic = (info->flags & HALI_OPF_VARIADIC) != 0;
  if (variadic ? insn->operand_count < info->operand_count
               : insn->operand_count != info->operand_count)
    return hali_verr(v, "has %u operand(s), expected %s%u", insn->operand_count,
                     variadic ? "at least " : "", info->operand_count);
  for (uint32_t i = 0; i < info->operand_count; ++i) {
    const hali_operand_desc_t *d = &info->operands[i];
    const hali_ir_operand_t *o = &insn->operands[i];
    switch (d->role) {
    case HALI_ROLE_READ:
    case HALI_ROLE_WRITE:
      HALI_RETURN_IF_ERROR_PLAIN(check_reg(v, i, d->type));
      break;
    case HALI_ROLE_BLOCK:
      HALI_RETURN_IF_ERROR_PLAIN(check_block(v, i));
      break;
    case HALI_ROLE_IMM: {
      if (o->kind != HALI_IR_IMM)
        return hali_verr(v, "operand %u must be an immediate", i);
      const int64_t x = hali_ir_imm(v->m, o);
      if (d->type == HALI_TYPE_I32 && x != (int32_t)x)
        return hali_verr(v, "operand %u: immediate does not fit in i32", i);
      if (d->type == HALI_TYPE_F32 && (uint64_t)x >> 32)
        return hali_verr(v, "operand %u: f32 immediate has high bits set", i);
      break;
    }
    case HALI_ROLE_STRING:
      if (o->kind != HALI_IR_STRING || o->v >= v->m->string_count)
        return hali_verr(v,
                         "operand %u: string %u out of range (module has %u)",
                         i, o->v, v->m->string_count);
      break;
    case HALI_ROLE_FUNC:
      if (o->kind != HALI_IR_FUNC || o->v >= v->m->func_count)
        return hali_verr(v, "operand %u: function %u out of range", i, o->v);
      break;
    case HALI_ROLE_EXECUTABLE:
      if (o->kind != HALI_IR_EXECUTABLE || o->v >= v->m->executable_count)
        return hali_verr(v,
                         "operand %u: executable %u out of range (module has "
                         "%u)",
                         i, o->v, v->m->executable_count);
      break;
    case HALI_ROLE_RODATA:
      if (o->kind != HALI_IR_RODATA || o->v >= v->m->rodata_count)
        return hali_verr(v,
                         "operand %u: rodata %u out of range (module has %u)",
                         i, o->v, v->m->rodata_count);
      break;
    case HALI_ROLE_GLOBAL:
      HALI_RETURN_IF_ERROR_PLAIN(check_global(v, info, i));
      break;
    default: return hali_verr(v, "internal: bad operand role '%c'", d->role);
    }
  }
  if (insn->op == HALI_OP_MOV_REF &&
      v->f->reg_types[insn->operands[0].v] !=
          v->f->reg_types[insn->operands[1].v]) {
    char a[64], b[64];
    return hali_verr(v, "mov.ref moves %s (%s) into %s (%s): the types differ",
                     hali_ir_reg_name(v->f, insn->operands[1].v, b, sizeof(b)),
                     hali_type_name(v->f->reg_types[insn->operands[1].v]),
                     hali_ir_reg_name(v->f, insn->operands[0].v, a, sizeof(a)),
                     hali_type_name(v->f->reg_types[insn->operands[0].v]));
  }
  if (info->tail) {
    if (insn->operand_count - info->operand_count > 0xfffe)
      return hali_verr(v, "list of %u entries is too long",
                       insn->operand_count - info->operand_count);
    for (uint32_t i = info->operand_count; i < insn->operand_count; ++i)
      HALI_RETURN_IF_ERROR_PLAIN(
          info->tail == 'b' ? check_block(v, i)
                            : check_reg(v, i, info->tail_type));
  }
  return HALI_OK;
}

hali_status_t hali_verify_globals(const vctx_t *vp, bool tensor_ok) {
  vctx_t v = *vp;
  v.f = NULL;
  v.insn = NULL;
  const hali_ir_module_t *m = v.m;
  hali_strmap_clear(v.names);
  for (uint32_t i = 0; i < m->global_count; ++i) {
    const hali_ir_global_t *g = &m->globals[i];
    if (!g->name || !hali_name_valid(g->name))
      return hali_verr(&v, "global %u has the name \"%s\", which is not a "
                           "valid name", i, g->name ? g->name : "");
    uint32_t k = hali_strmap_insert(v.names, g->name, strlen(g->name), i);
    if (k == HALI_STRMAP_NONE)
      return hali_status_annotate(hali_status_oom(), "verifying the module");
    if (k != i) return hali_verr(&v, "global @%s defined twice", g->name);
    if (g->flags & ~(uint32_t)HALI_GLOBAL_FLAGS_ALL)
      return hali_verr(&v, "global @%s has unknown flags 0x%x", g->name,
                       g->flags);
    if (g->type == HALI_TYPE_TENSOR) {
      if (!tensor_ok)
        return hali_verr(&v,
                         "global @%s is a tensor: tensor globals are lowered "
                         "by the load-time passes before a module runs",
                         g->name);
      if (g->flags & HALI_GLOBAL_INIT)
        return hali_verr(&v, "tensor global @%s has a scalar initial value",
                         g->name);
      if (hali_ir_xtype_dynamic_dims(&g->xtype))
        return hali_verr(&v, "tensor global @%s must have a static shape",
                         g->name);
      if ((g->flags & HALI_GLOBAL_PARAMETER) &&
          ((g->flags & HALI_GLOBAL_MUTABLE) || !g->param_scope ||
           !g->param_key))
        return hali_verr(&v,
                         "parameter global @%s must be immutable and name a "
                         "scope and a key",
                         g->name);
      continue;
    }
    if (!hali_type_is_valid(g->type))
      return hali_verr(&v, "global @%s has unknown type code %u", g->name,
                       g->type);
    /* Lowered, a parameter global is the !hal.buffer the context fills
     * from its parameters (stream-to-hal keeps its shape for the check). */
    if ((g->flags & HALI_GLOBAL_PARAMETER) &&
        (g->type != HALI_TYPE_BUFFER || (g->flags & HALI_GLOBAL_MUTABLE) ||
         !g->param_scope || !g->param_key || g->xtype.type != HALI_TYPE_NONE ||
         !g->xtype.element_type || hali_ir_xtype_dynamic_dims(&g->xtype)))
      return hali_verr(&v,
                       "global @%s: only a tensor global (or, lowered, an "
                       "immutable !hal.buffer with its shape) is a parameter",
                       g->name);
    if ((g->flags & HALI_GLOBAL_INIT) && hali_type_is_ref(g->type))
      return hali_verr(&v, "ref global @%s cannot have an initial value",
                       g->name);
    if (!(g->flags & HALI_GLOBAL_INIT) && g->init)
      return hali_verr(&v, "global @%s has an initial value but no INIT flag",
                       g->name);
    if (g->type == HALI_TYPE_I32 && g->init != (int32_t)g->init)
      return hali_verr(&v, "global @%s: initial value does not fit in i32",
                       g->name);
    if (g->type == HALI_TYPE_F32 && (uint64_t)g->init >> 32)
      return hali_verr(&v, "global @%s: f32 initial value has high bits set",
                       g->name);
  }
  for (uint32_t i = 0; i < m->func_count; ++i) {
    const hali_ir_func_t *f = &m->funcs[i];
    if (!hali_ir_func_has_attr(f, HALI_ATTR_INITIALIZER)) continue;
    v.f = f;
    if (f->flags & HALI_FUNC_IMPORT)
      return hali_verr(&v, "an initializer cannot be an import");
    if (f->param_count || f->result_count)
      return hali_verr(&v,
                       "an initializer takes no arguments and returns "
                       "nothing (this one takes %u and returns %u)",
                       f->param_count, f->result_count);
  }
  return HALI_OK;
}

/* The registers |insn| reads and writes: calls |fn| on each. */
static inline void for_each_reg(const hali_ir_insn_t *insn,
                                const hali_op_info_t *info, bool writes,
                                void (*fn)(void *, uint32_t, uint32_t),
                                void *u) {
  if (hali_op_is_call(insn->op)) {
    uint32_t nargs = insn->aux;
    for (uint32_t i = 1; i < insn->operand_count; ++i)
      if ((i > nargs) == writes) fn(u, insn->operands[i].v, i);
    return;
  }
  if (insn->op == HALI_OP_RETURN) {
    if (!writes)
      for (uint32_t i = 0; i < insn->operand_count; ++i)
        fn(u, insn->operands[i].v, i);
    return;
  }
  for (uint32_t i = 0; i < info->operand_count; ++i)
    if (info->operands[i].role == (writes ? HALI_ROLE_WRITE : HALI_ROLE_READ))
      fn(u, insn->operands[i].v, i);
  if (!writes && info->tail && info->tail != 'b')
    for (uint32_t i = info->operand_count; i < insn->operand_count; ++i)
      fn(u, insn->operands[i].v, i);
}

/* Successor blocks of a terminator. */
static uint32_t successors(const hali_ir_insn_t *insn, const uint32_t **out,
                           uint32_t *buf) {
  switch (insn->op) {
  case HALI_OP_BR:
    buf[0] = insn->operands[0].v;
    *out = buf;
    return 1;
  case HALI_OP_COND_BR:
    buf[0] = insn->operands[1].v;
    buf[1] = insn->operands[2].v;
    *out = buf;
    return 2;
  case HALI_OP_SWITCH: {
    uint32_t n = 0;
    for (uint32_t i = 1; i < insn->operand_count; ++i)
      buf[n++] = insn->operands[i].v;
    *out = buf;
    return n;
  }
  default:
    return 0;
  }
}

/* What definite assignment needs from a function's instructions, collected
 * in the one walk that verifies them (verify_func), so that the dataflow
 * below never walks the instructions again: per block, the registers it
 * writes (|gen|, each once) and the registers it reads before writing them
 * (|exposed|: where, for the message; the first read of each only).  A
 * register's stamp is the block that last wrote (or exposed-read) it, plus
 * one, so moving to the next block resets nothing. */
typedef struct {
  uint32_t reg, index, operand;
} da_read_t;

typedef struct {
  uint32_t block; /* the block being collected */
  uint32_t index; /* the instruction being collected */
  /* Stamps are |base| + block + 1; |base| moves past each function's
   * blocks, so the stamps of earlier functions never match. */
  uint32_t base;
  uint32_t *wstamp, *rstamp; /* per register */
  uint32_t reg_cap, block_cap;
  uint32_t *gen;             /* registers written, block by block */
  size_t ngen, gen_cap;
  uint32_t *gen_start;       /* block b's are gen[gen_start[b] ..
                                gen_start[b + 1]) */
  da_read_t *exposed;
  size_t nexposed, exposed_cap;
  uint32_t *exposed_start;
  bool oom;
} da_lists_t;

static bool da_push(void **p, size_t *n, size_t *cap, size_t size) {
  if (*n < *cap) return true;
  size_t c = *cap ? 2 * *cap : 256;
  void *q = hali_realloc(*p, c * size);
  if (!q) return false;
  *p = q;
  *cap = c;
  return true;
}

static void da_collect_read(void *u, uint32_t r, uint32_t i) {
  da_lists_t *l = u;
  uint32_t stamp = l->base + l->block + 1;
  if (l->wstamp[r] == stamp || l->rstamp[r] == stamp) return;
  l->rstamp[r] = stamp;
  if (!da_push((void **)&l->exposed, &l->nexposed, &l->exposed_cap,
               sizeof(da_read_t))) {
    l->oom = true;
    return;
  }
  l->exposed[l->nexposed++] = (da_read_t){r, l->index, i};
}

static void da_collect_write(void *u, uint32_t r, uint32_t i) {
  (void)i;
  da_lists_t *l = u;
  uint32_t stamp = l->base + l->block + 1;
  if (l->wstamp[r] == stamp) return;
  l->wstamp[r] = stamp;
  if (!da_push((void **)&l->gen, &l->ngen, &l->gen_cap, sizeof(uint32_t))) {
    l->oom = true;
    return;
  }
  l->gen[l->ngen++] = r;
}

/* Readies |l| (kept from the previous function) for |f|. */
static bool da_lists_begin(da_lists_t *l, const hali_ir_func_t *f) {
  l->ngen = l->nexposed = 0;
  l->oom = false;
  bool wrap = (uint64_t)l->base + f->block_count + 1 > UINT32_MAX;
  if (f->reg_count > l->reg_cap || wrap) {
    uint32_t cap = f->reg_count > l->reg_cap ? f->reg_count : l->reg_cap;
    uint32_t *w = hali_realloc(l->wstamp, (cap ? cap : 1) * sizeof(uint32_t));
    if (w) l->wstamp = w;
    uint32_t *r = w ? hali_realloc(l->rstamp, (cap ? cap : 1) * sizeof(uint32_t))
                    : NULL;
    if (r) l->rstamp = r;
    if (!w || !r) return false;
    /* Zero is below every stamp. */
    memset(l->wstamp, 0, (cap ? cap : 1) * sizeof(uint32_t));
    memset(l->rstamp, 0, (cap ? cap : 1) * sizeof(uint32_t));
    l->reg_cap = cap;
    l->base = 0;
  }
  if (f->block_count + 1 > l->block_cap) {
    uint32_t cap = f->block_count + 1;
    uint32_t *g = hali_realloc(l->gen_start, cap * sizeof(uint32_t));
    if (g) l->gen_start = g;
    uint32_t *e = g ? hali_realloc(l->exposed_start, cap * sizeof(uint32_t)) : NULL;
    if (e) l->exposed_start = e;
    if (!g || !e) return false;
    l->block_cap = cap;
  }
  return true;
}

/* The function is done: its stamps must not match the next one's. */
static void da_lists_end(da_lists_t *l, const hali_ir_func_t *f) {
  l->base += f->block_count + 1;
}

static void da_lists_free(da_lists_t *l) {
  hali_free(l->wstamp);
  hali_free(l->rstamp);
  hali_free(l->gen);
  hali_free(l->gen_start);
  hali_free(l->exposed);
  hali_free(l->exposed_start);
}

typedef struct verify_scratch_s {
  da_lists_t lists;
  void *buf; /* the dataflow's arrays, carved by verify_assignment */
  size_t cap;
} verify_scratch_t;

static void verify_scratch_free(verify_scratch_t *sc) {
  da_lists_free(&sc->lists);
  hali_free(sc->buf);
}

/* Definite assignment: a forward "must" dataflow over blocks.  in[entry] =
 * parameters; in[b] = intersection of out[p] over predecessors.  A
 * worklist seeded in reverse post-order converges in a few passes for
 * structured code; sets only shrink, so it always terminates.  Functions
 * whose sets would need more than HALI_VERIFY_MAX_BITSET_BYTES are rejected
 * rather than verified slowly (a bound that untrusted input cannot exceed).
 *
 * Only a register that some block reads before writing it (an exposed
 * read) and that is not a parameter (those are written on entry and stay
 * so) can fail the check, so the sets hold those registers alone,
 * renumbered 0..nu-1 by |uni|.  In a large function that is far fewer
 * than its registers (bench/load's huge function: about one a block, of
 * 16384), and the sets, a block's worth each, stay small: they are what
 * grows with blocks x registers. */
#define HALI_VERIFY_MAX_BITSET_BYTES (64u << 20)

/* |sc|'s buffer with room for |bytes| (its contents kept); false on OOM. */
static bool scratch_reserve(verify_scratch_t *sc, size_t bytes) {
  if (bytes <= sc->cap) return true;
  void *buf = hali_realloc(sc->buf, bytes);
  if (!buf) return false;
  sc->buf = buf;
  sc->cap = bytes;
  return true;
}

static hali_status_t verify_assignment(vctx_t *v, const da_lists_t *l) {
  const hali_ir_func_t *f = v->f;
  size_t words = (f->reg_count + 63) / 64;
  if (!words) return HALI_OK;
  uint32_t nb = f->block_count;
  if (nb == 1) {
    /* One block (most small functions): it starts with the parameters
     * written and nothing else, so a read before a write must read one. */
    for (uint32_t k = l->exposed_start[0]; k < l->exposed_start[1]; ++k) {
      const da_read_t *x = &l->exposed[k];
      if (x->reg < f->param_count) continue;
      v->block = 0;
      v->index = x->index;
      v->insn = &f->blocks[0].insns[x->index];
      char buf[64];
      return hali_verr(v,
                       "operand %u: register %s may be read before it is "
                       "written",
                       x->operand, hali_ir_reg_name(f, x->reg, buf, sizeof(buf)));
    }
    return HALI_OK;
  }
  /* |uni| first in the scratch buffer, an even count so that the bitsets
   * after it stay 8-byte aligned. */
  verify_scratch_t *sc = v->scratch;
  const size_t nuni = ((size_t)f->reg_count + 1) & ~(size_t)1;
  if (!scratch_reserve(sc, nuni * sizeof(uint32_t)))
    return hali_status_annotate(hali_status_oom(), "verifying the module");
  uint32_t *uni = sc->buf;
  memset(uni, 0xff, nuni * sizeof(uint32_t));
  uint32_t nu = 0;
  for (size_t k = 0; k < l->nexposed; ++k) {
    uint32_t r = l->exposed[k].reg;
    if (r >= f->param_count && uni[r] == UINT32_MAX) uni[r] = nu++;
  }
  /* Every read before a write reads a parameter. */
  if (nu == 0) return HALI_OK;
  words = (nu + 63) / 64;
  if ((uint64_t)nb * words * sizeof(uint64_t) > HALI_VERIFY_MAX_BITSET_BYTES)
    return hali_verr(v,
                     "%u blocks x %u registers (those a block reads before "
                     "writing them) is too large to verify (limit %u MiB of "
                     "dataflow state); split the function",
                     nb, nu, HALI_VERIFY_MAX_BITSET_BYTES >> 20);
  uint32_t max_targets = 2;
  for (uint32_t b = 0; b < nb; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    uint32_t n = blk->insns[blk->insn_count - 1].operand_count;
    if (n > max_targets) max_targets = n;
  }
  /* All arrays in one scratch buffer, kept for the next function: |uni|,
   * the bitsets (8-byte aligned), then the block arrays. */
  size_t n64 = ((size_t)nb + 1) * words; /* in[nb] and cur */
  size_t n32 = 4 * (size_t)nb + max_targets;
  size_t need = nuni * 4 + n64 * 8 + n32 * 4 + 2 * (size_t)nb;
  if (!scratch_reserve(sc, need))
    return hali_status_annotate(hali_status_oom(), "verifying the module");
  uni = sc->buf;
  uint64_t *in = (uint64_t *)(uni + nuni);
  uint64_t *cur = in + (size_t)nb * words;
  uint32_t *order = (uint32_t *)(in + n64);           /* reverse post-order */
  uint32_t *queue = order + nb;                       /* ring of blocks */
  uint32_t *stack = queue + nb;                       /* DFS: block */
  uint32_t *edge = stack + nb;                        /* DFS: next successor */
  uint32_t *succ = edge + nb;
  bool *reached = (bool *)(succ + max_targets);
  bool *queued = reached + nb;
  memset(reached, 0, 2 * (size_t)nb);
  hali_status_t st = HALI_OK;
  /* Reverse post-order of the blocks reachable from the entry. */
  bool *seen = queued; /* reused: all false again after the DFS */
  uint32_t sp = 0, post = nb;
  stack[sp] = 0;
  edge[sp++] = 0;
  seen[0] = true;
  while (sp) {
    uint32_t b = stack[sp - 1];
    const hali_ir_block_t *blk = &f->blocks[b];
    const uint32_t *targets;
    uint32_t n = successors(&blk->insns[blk->insn_count - 1], &targets, succ);
    if (edge[sp - 1] < n) {
      uint32_t t = targets[edge[sp - 1]++];
      if (!seen[t]) {
        seen[t] = true;
        stack[sp] = t;
        edge[sp++] = 0;
      }
      continue;
    }
    order[--post] = b;
    sp--;
  }
  uint32_t first = post, count = nb - post;
  memset(seen, 0, nb);
  /* in[entry]: the parameters, none of which is in the sets. */
  memset(in, 0, words * sizeof(uint64_t));
  reached[0] = true;
  /* The queue starts with every reachable block in reverse post-order. */
  uint32_t head = 0, size = 0;
  for (uint32_t k = 0; k < count; ++k) {
    queue[size++] = order[first + k];
    queued[order[first + k]] = true;
  }
  while (size) {
    uint32_t b = queue[head];
    head = (head + 1) % nb;
    size--;
    queued[b] = false;
    if (!reached[b]) continue;
    memcpy(cur, in + (size_t)b * words, words * sizeof(uint64_t));
    const hali_ir_block_t *blk = &f->blocks[b];
    for (uint32_t k = l->gen_start[b]; k < l->gen_start[b + 1]; ++k) {
      const uint32_t u = uni[l->gen[k]];
      if (u != UINT32_MAX) cur[u / 64] |= 1ull << (u % 64);
    }
    const uint32_t *targets;
    uint32_t n = successors(&blk->insns[blk->insn_count - 1], &targets, succ);
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t s = targets[k];
      uint64_t *t = in + (size_t)s * words;
      bool changed = false;
      if (!reached[s]) {
        reached[s] = true;
        memcpy(t, cur, words * sizeof(uint64_t));
        changed = true;
      } else {
        for (size_t w = 0; w < words; ++w) {
          uint64_t x = t[w] & cur[w];
          changed |= x != t[w];
          t[w] = x;
        }
      }
      if (changed && !queued[s]) {
        queued[s] = true;
        queue[(head + size) % nb] = s;
        size++;
      }
    }
  }
  /* Only the reads a block makes before writing the register can miss;
   * they are in instruction order, so the first one found is the first
   * in the block. */
  for (uint32_t b = 0; b < nb && !st; ++b) {
    if (!reached[b]) continue;
    const uint64_t *set = in + (size_t)b * words;
    for (uint32_t k = l->exposed_start[b]; k < l->exposed_start[b + 1]; ++k) {
      const da_read_t *x = &l->exposed[k];
      if (x->reg < f->param_count) continue;
      const uint32_t u = uni[x->reg];
      if (set[u / 64] & (1ull << (u % 64))) continue;
      v->block = b;
      v->index = x->index;
      v->insn = &f->blocks[b].insns[x->index];
      char buf[64];
      st = hali_verr(v,
                     "operand %u: register %s may be read before it is written",
                     x->operand, hali_ir_reg_name(f, x->reg, buf, sizeof(buf)));
      break;
    }
  }
  return st;
}

/* What callers rely on: run for every function before any body, so that a
 * call is never checked against a malformed callee. */
static hali_status_t verify_header(vctx_t *v) {
  const hali_ir_func_t *f = v->f;
  if (!f->name || !f->name[0]) return hali_verr(v, "function has no name");
  if (!hali_name_valid(f->name))
    return hali_verr(v,
                     "function name \"%s\" is not a valid name (letters, "
                     "digits, _ . $)",
                     f->name ? f->name : "");
  if (f->param_count > f->reg_count)
    return hali_verr(v, "%u parameters but only %u registers", f->param_count,
                     f->reg_count);
  if (f->reg_count > 0xffff)
    return hali_verr(v, "%u registers; at most 65535 are supported",
                     f->reg_count);
  if (f->flags & HALI_FUNC_IMPORT) {
    if (f->block_count)
      return hali_verr(v,
                       "an imported function has no body, but this one has "
                       "%u block(s)",
                       f->block_count);
  } else if (f->block_count == 0) {
    return hali_verr(v, "function has no blocks");
  }
  if (f->block_count > 0xffff)
    return hali_verr(v, "%u blocks; at most 65535 are supported",
                     f->block_count);
  for (uint32_t r = 0; r < f->reg_count; ++r)
    if (f->reg_types[r] == HALI_TYPE_TENSOR)
      return hali_verr(v,
                       "register %u is a tensor: tensor-level functions are "
                       "lowered by the load-time passes before a module runs",
                       r);
    else if (f->reg_types[r] == HALI_TYPE_INDEX)
      return hali_verr(v,
                       "register %u is an index: index scalars are tensor "
                       "level, lowered by the load-time passes",
                       r);
    else if (!hali_type_is_valid(f->reg_types[r]))
      return hali_verr(v, "register %u has unknown type code %u", r,
                       f->reg_types[r]);
  for (uint32_t r = 0; r < f->result_count; ++r)
    if (!hali_type_is_valid(f->results[r]))
      return hali_verr(v, "result %u has unknown type code %u", r,
                       f->results[r]);
  return HALI_OK;
}

/* Up to this many names (of registers, or of blocks) are checked for
 * repeats against each other, without the hash table: for a small
 * function (the common case in a module of many) that is cheaper than
 * the table, and bounded (at most 120 comparisons of lengths and
 * digests; the bytes only when both agree). */
#define VERIFY_NAMES_PAIRWISE 16

/* Debug names must be names, and unique per function, so that the text
 * form (hali dis) reassembles to the same module.  |names| holds |n|
 * names (entries may be NULL); |what| is "register" or "block", |sigil|
 * '%' or '^'.  The first repeat in index order is reported, with the
 * first holder of its name. */
static hali_status_t verify_name_list(vctx_t *v, char *const *names,
                                      const hali_ir_block_t *blocks, uint32_t n,
                                      const char *what, char sigil) {
  size_t lens[VERIFY_NAMES_PAIRWISE];
  uint32_t sums[VERIFY_NAMES_PAIRWISE];
  const bool pairwise = n <= VERIFY_NAMES_PAIRWISE;
  if (!pairwise) hali_strmap_clear(v->names);
  for (uint32_t r = 0; r < n; ++r) {
    const char *nm = names ? names[r] : blocks[r].name;
    if (!nm) {
      if (pairwise) lens[r] = 0;
      continue;
    }
    /* hali_name_length, and a digest of the bytes for the comparisons. */
    size_t len = 0;
    uint32_t sum = 0;
    for (const char *q = nm; *q; ++q, ++len) {
      if (!hali_name_char(*q)) {
        len = 0;
        break;
      }
      sum = sum * 31u + (uint8_t)*q;
    }
    if (!len)
      return hali_verr(v, "%s %u has the name \"%s\", which is not a valid "
                          "name",
                       what, r, nm);
    uint32_t k = r;
    if (pairwise) {
      lens[r] = len;
      sums[r] = sum;
      for (uint32_t j = 0; j < r; ++j) {
        if (lens[j] != len || sums[j] != sum) continue;
        const char *o = names ? names[j] : blocks[j].name;
        if (memcmp(o, nm, len) == 0) {
          k = j;
          break;
        }
      }
    } else {
      k = hali_strmap_insert(v->names, nm, len, r);
      if (k == HALI_STRMAP_NONE)
        return hali_status_annotate(hali_status_oom(), "verifying the module");
    }
    if (k != r)
      return hali_verr(v, "%ss %u and %u are both named %c%s", what, k, r,
                       sigil, nm);
  }
  return HALI_OK;
}

static hali_status_t verify_names(vctx_t *v) {
  const hali_ir_func_t *f = v->f;
  if (f->reg_names)
    HALI_RETURN_IF_ERROR_PLAIN(verify_name_list(v, f->reg_names, NULL,
                                                f->reg_count, "register", '%'));
  return verify_name_list(v, NULL, f->blocks, f->block_count, "block", '^');
}

static hali_status_t verify_body(vctx_t *v, da_lists_t *l);

static hali_status_t verify_func(vctx_t *v) {
  const hali_ir_func_t *f = v->f;
  if (f->flags & HALI_FUNC_IMPORT) return verify_names(v); /* no body */
  HALI_RETURN_IF_ERROR_PLAIN(verify_names(v));
  da_lists_t *l = &v->scratch->lists;
  if (!da_lists_begin(l, f))
    return hali_status_annotate(hali_status_oom(), "verifying the module");
  hali_status_t s = verify_body(v, l);
  da_lists_end(l, f);
  return s;
}

/* The instructions of block |b| of |v->f|, collecting what definite
 * assignment needs into |l|. */
static hali_status_t verify_block(vctx_t *v, da_lists_t *l, uint32_t b) {
  const hali_ir_func_t *f = v->f;
  l->block = b;
  l->gen_start[b] = (uint32_t)l->ngen;
  l->exposed_start[b] = (uint32_t)l->nexposed;
  const hali_ir_block_t *blk = &f->blocks[b];
  v->block = b;
  v->insn = NULL;
  if (blk->insn_count == 0) {
    hali_strbuf_t sb = {0};
    hali_ir_print_block(&sb, f, b);
    char *bn = hali_strbuf_take(&sb);
    hali_status_t s = hali_verr(
        v,
        "block %s is empty: every block must end in a terminator (br, "
        "cond_br, switch, return or fail)",
        bn ? bn : "?");
    hali_free(bn);
    return s;
  }
  for (uint32_t i = 0; i < blk->insn_count; ++i) {
    v->index = i;
    v->insn = &blk->insns[i];
    const hali_op_info_t *info = hali_op_info(v->insn->op);
    HALI_RETURN_IF_ERROR_PLAIN(verify_insn(v, info));
    /* Operands are proven registers in range: collect (reads first, as
     * an instruction reads its operands before it writes). */
    l->index = i;
    for_each_reg(v->insn, info, false, da_collect_read, l);
    for_each_reg(v->insn, info, true, da_collect_write, l);
    bool term = (info->flags & HALI_OPF_TERM) != 0;
    bool last = i + 1 == blk->insn_count;
    if (term && !last)
      return hali_verr(v,
                       "terminator in the middle of a block (%u more "
                       "instruction(s) follow it)",
                       blk->insn_count - 1 - i);
    if (!term && last)
      return hali_verr(v, "block does not end in a terminator (br, cond_br, "
                          "switch, return or fail): execution would fall off "
                          "its end");
  }
  return HALI_OK;
}

/* After the last block: definite assignment over what |l| collected. */
static hali_status_t verify_body_end(vctx_t *v, da_lists_t *l) {
  const hali_ir_func_t *f = v->f;
  l->gen_start[f->block_count] = (uint32_t)l->ngen;
  l->exposed_start[f->block_count] = (uint32_t)l->nexposed;
  v->insn = NULL;
  if (l->oom || l->ngen > UINT32_MAX || l->nexposed > UINT32_MAX)
    return hali_status_annotate(hali_status_oom(), "verifying the module");
  return verify_assignment(v, l);
}

/* Every instruction of |v->f|, then definite assignment over what |l|
 * collected on the way. */
static hali_status_t verify_body(vctx_t *v, da_lists_t *l) {
  for (uint32_t b = 0; b < v->f->block_count; ++b)
    HALI_RETURN_IF_ERROR_PLAIN(verify_block(v, l, b));
  return verify_body_end(v, l);
}

static hali_status_t verify_module(vctx_t *v);

hali_status_t hali_ir_verify(const hali_ir_module_t *m) {
  hali_strmap_t names = {0};
  verify_scratch_t scratch = {0};
  vctx_t v = {m, NULL, 0, 0, NULL, "verify", &names, &scratch};
  hali_status_t s = verify_module(&v);
  hali_strmap_free(&names);
  verify_scratch_free(&scratch);
  return s;
}

/* The first function (in index order) whose name an earlier function
 * already has, in |*out| (UINT32_MAX when none); functions without a name
 * are left out (verify_header rejects them before their turn).  By
 * sorting (hali_ir_sort_name_keys): a hash table of 10^5 names takes a
 * cache miss per name.  False on OOM. */
static bool first_repeated_func_name(const hali_ir_module_t *m,
                                     uint32_t *out) {
  *out = UINT32_MAX;
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->func_count; ++i) n += m->funcs[i].name != NULL;
  if (n < 2) return true;
  uint64_t bytes;
  if (hali_mul_overflows_u64(2 * (uint64_t)n, sizeof(hali_ir_name_key_t),
                             &bytes) ||
      bytes > SIZE_MAX)
    return false;
  hali_ir_name_key_t *keys = hali_malloc((size_t)bytes);
  if (!keys) return false;
  for (uint32_t i = 0, k = 0; i < m->func_count; ++i) {
    /* Each name is its own allocation: ask for one well ahead, so that
     * the misses of 10^5 names overlap rather than follow each other. */
    if (i + 8 < m->func_count) __builtin_prefetch(m->funcs[i + 8].name);
    const char *name = m->funcs[i].name;
    if (!name) continue;
    size_t len = strlen(name);
    keys[k++] = (hali_ir_name_key_t){hali_strmap_hash(name, len), i, name, len};
  }
  hali_ir_sort_name_keys(keys, keys + n, n);
  /* Each key equal to the one before it repeats an earlier function's
   * name. */
  for (uint32_t k = 1; k < n; ++k)
    if (hali_ir_name_keys_equal(&keys[k], &keys[k - 1]) &&
        keys[k].index < *out)
      *out = keys[k].index;
  hali_free(keys);
  return true;
}

/* Everything verify_module checks before the functions' bodies. */
static hali_status_t verify_module_headers(vctx_t *vp) {
  vctx_t v = *vp;
  const hali_ir_module_t *m = v.m;
  for (uint32_t i = 0; i < m->executable_count; ++i) {
    const hali_ir_executable_t *e = &m->executables[i];
    for (uint32_t k = 0; k < e->export_count; ++k) {
      const hali_ir_export_t *x = &e->exports[k];
      for (uint32_t a = 0; a < x->param_count + x->result_count; ++a) {
        const hali_ir_xtype_t *t = a < x->param_count
                                       ? &x->params[a]
                                       : &x->results[a - x->param_count];
        if (hali_type_is_ref(t->type))
          return hali_verr(
              &v,
              "export @%s::@%s: %s %u is %s, which a kernel cannot "
              "take",
              e->name, x->name, a < x->param_count ? "argument" : "result",
              a < x->param_count ? a : a - x->param_count,
              hali_type_name(t->type));
      }
    }
    for (uint32_t k = 0; k < e->export_count; ++k)
      if (e->exports[k].function != UINT32_MAX &&
          e->exports[k].function >= m->func_count)
        return hali_verr(&v,
                         "export @%s::@%s names function %u but the module "
                         "has %u",
                         e->name, e->exports[k].name, e->exports[k].function,
                         m->func_count);
  }
  HALI_RETURN_IF_ERROR_PLAIN(hali_verify_globals(&v, false));
  uint32_t dup;
  if (!first_repeated_func_name(m, &dup))
    return hali_status_annotate(hali_status_oom(), "verifying the module");
  for (uint32_t i = 0; i < m->func_count; ++i) {
    if (i + 8 < m->func_count) { /* as above: the types it reads */
      __builtin_prefetch(m->funcs[i + 8].reg_types);
      __builtin_prefetch(m->funcs[i + 8].results);
    }
    v.f = &m->funcs[i];
    v.insn = NULL;
    HALI_RETURN_IF_ERROR_PLAIN(verify_header(&v));
    if (i == dup) return hali_verr(&v, "function defined twice");
  }
  return HALI_OK;
}

static hali_status_t verify_module(vctx_t *vp) {
  HALI_RETURN_IF_ERROR_PLAIN(verify_module_headers(vp));
  vctx_t v = *vp;
  const hali_ir_module_t *m = v.m;
  for (uint32_t i = 0; i < m->func_count; ++i) {
    v.f = &m->funcs[i];
    v.insn = NULL;
    HALI_RETURN_IF_ERROR_PLAIN(verify_func(&v));
  }
  return HALI_OK;
}

/* The structural check and the verifier in one walk (hali_ir_verify_fused
 * in vm/ir.h).  Both are read-only and deterministic, so the order in which
 * their checks run changes nothing when they all pass; when one fails, the
 * caller runs them again in the documented order for the message. */
static bool verify_fused(vctx_t *sv, vctx_t *v) {
  const hali_ir_module_t *m = v->m;
  hali_status_t s = hali_verify_s_module(sv);
  /* Headers first: verify_module_headers reads every function's types, and
   * the structural check proves them present.  Register names are left to
   * verify_names, whose check is the structural one and more. */
  for (uint32_t i = 0; !s && i < m->func_count; ++i) {
    if (i + 8 < m->func_count) __builtin_prefetch(m->funcs[i + 8].name);
    sv->f = &m->funcs[i];
    sv->insn = NULL;
    sv->block = 0;
    s = hali_verify_s_header(sv, false);
  }
  if (!s) s = verify_module_headers(v);
  da_lists_t *l = &v->scratch->lists;
  for (uint32_t i = 0; !s && i < m->func_count; ++i) {
    const hali_ir_func_t *f = &m->funcs[i];
    hali_ir_prefetch_func(m, i + 1);
    v->f = sv->f = f;
    v->insn = sv->insn = NULL;
    s = verify_names(v);
    if (s || (f->flags & HALI_FUNC_IMPORT)) continue;
    if (!da_lists_begin(l, f)) return false;
    /* A block at a time, while it is in cache. */
    for (uint32_t b = 0; !s && b < f->block_count; ++b) {
      if (b + 1 < f->block_count) hali_ir_prefetch_block(&f->blocks[b + 1]);
      s = hali_verify_s_block(sv, b);
      if (!s) s = verify_block(v, l, b);
    }
    if (!s) s = verify_body_end(v, l);
    da_lists_end(l, f);
  }
  hali_status_free(s);
  return !s;
}

bool hali_ir_verify_fused(const hali_ir_module_t *m) {
  hali_strmap_t names = {0};
  verify_scratch_t scratch = {0};
  vctx_t v = {m, NULL, 0, 0, NULL, "verify", &names, &scratch};
  vctx_t sv = {m, NULL, 0, 0, NULL, "verify structure", &names, NULL};
  bool ok = verify_fused(&sv, &v);
  hali_strmap_free(&names);
  verify_scratch_free(&scratch);
  return ok;
}
