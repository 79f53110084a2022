/* hali — the IR printer: a module back to .hasm text (what hali dis prints,
 * what the verifier, the tracer and the passes quote).
 *
 * The output reassembles to the same module: registers and blocks keep
 * their names (or get %rN / ^bbN when the module was stripped), and with
 * |with_locs| every instruction carries its source line as loc(N), so
 * .hasm -> .hbc -> dis -> .hasm -> .hbc gives identical bytes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hal_names.h"
#include "hal/buffer_view.h"
#include "vm/ir.h"

/* ---- Names and places (vm/ir.h). */

/* The name register |r| has in |f|, or NULL (printed %rN). */
static const char *reg_name_of(const hali_ir_func_t *f, uint32_t r) {
  return f->reg_names && r < f->reg_count ? f->reg_names[r] : NULL;
}

void hali_ir_print_reg(hali_strbuf_t *sb, const hali_ir_func_t *f, uint32_t r) {
  const char *name = reg_name_of(f, r);
  if (name)
    hali_strbuf_printf(sb, "%%%s", name);
  else
    hali_strbuf_printf(sb, "%%r%u", r);
}

const char *hali_ir_reg_name(const hali_ir_func_t *f, uint32_t r, char *buf,
                             size_t n) {
  const char *name = reg_name_of(f, r);
  if (name)
    snprintf(buf, n, "%%%s", name);
  else
    snprintf(buf, n, "%%r%u", r);
  return buf;
}

void hali_ir_print_block(hali_strbuf_t *sb, const hali_ir_func_t *f,
                         uint32_t b) {
  if (b < f->block_count && f->blocks[b].name)
    hali_strbuf_printf(sb, "^%s", f->blocks[b].name);
  else
    hali_strbuf_printf(sb, "^bb%u", b);
}

void hali_ir_print_place(hali_strbuf_t *sb, const hali_ir_module_t *m,
                         const hali_ir_func_t *f, uint32_t block,
                         const hali_ir_insn_t *insn, uint32_t index,
                         uint32_t line) {
  if (!f) {
    hali_strbuf_printf(sb, "module @%s", m->name ? m->name : "?");
    return;
  }
  hali_strbuf_printf(sb, "@%s", f->name ? f->name : "?");
  if (block != HALI_IR_NO_BLOCK) {
    hali_strbuf_append(sb, ", block ", 8);
    hali_ir_print_block(sb, f, block);
  }
  if (insn) {
    const hali_op_info_t *info = hali_op_info(insn->op);
    hali_strbuf_printf(sb, ", instruction %u (%s)", index,
                       info ? info->name : "?");
  }
  if (line)
    hali_strbuf_printf(sb, ", %s:%u", m->source ? m->source : "line", line);
}

static void print_string(hali_strbuf_t *sb, const char *s, uint32_t len) {
  hali_strbuf_append(sb, "\"", 1);
  for (uint32_t i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '\n': hali_strbuf_append(sb, "\\n", 2); break;
    case '\t': hali_strbuf_append(sb, "\\t", 2); break;
    case '\r': hali_strbuf_append(sb, "\\r", 2); break;
    case '\\': hali_strbuf_append(sb, "\\\\", 2); break;
    case '"': hali_strbuf_append(sb, "\\\"", 2); break;
    default:
      if (c < 0x20 || c >= 0x7f)
        hali_strbuf_printf(sb, "\\x%02x", c);
      else
        hali_strbuf_append(sb, (const char *)&c, 1);
    }
  }
  hali_strbuf_append(sb, "\"", 1);
}

/* Prints an immediate so that it parses back to the same bits. */
static void print_imm(hali_strbuf_t *sb, hali_type_t type, int64_t imm) {
  char buf[64];
  switch (type) {
  case HALI_TYPE_I32:
  case HALI_TYPE_I64:
    hali_strbuf_printf(sb, "%" PRId64, imm);
    return;
  case HALI_TYPE_F32: {
    uint32_t u = (uint32_t)imm;
    float f;
    memcpy(&f, &u, 4);
    if (f != f && u != 0x7fc00000u && u != 0xffc00000u) {
      hali_strbuf_printf(sb, "bits(0x%08" PRIx32 ")", u);
      return;
    }
    hali_format_float(buf, sizeof(buf), f, HALI_FLOAT_F32, true);
    if (f != f && (u >> 31)) memmove(buf + 1, buf, strlen(buf) + 1), buf[0] = '-';
    hali_strbuf_printf(sb, "%s", buf);
    return;
  }
  case HALI_TYPE_F64: {
    uint64_t u = (uint64_t)imm;
    double d;
    memcpy(&d, &u, 8);
    if (d != d && u != 0x7ff8000000000000ull && u != 0xfff8000000000000ull) {
      hali_strbuf_printf(sb, "bits(0x%016" PRIx64 ")", u);
      return;
    }
    hali_format_float(buf, sizeof(buf), d, HALI_FLOAT_F64, true);
    if (d != d && (u >> 63)) memmove(buf + 1, buf, strlen(buf) + 1), buf[0] = '-';
    hali_strbuf_printf(sb, "%s", buf);
    return;
  }
  default:
    hali_strbuf_printf(sb, "%" PRId64, imm);
  }
}

void hali_ir_print_insn(hali_strbuf_t *sb, const hali_ir_module_t *m,
                        const hali_ir_func_t *f, const hali_ir_insn_t *insn);

void hali_ir_xtype_print(hali_strbuf_t *sb, const hali_ir_xtype_t *x) {
  if (x->type != HALI_TYPE_NONE) {
    hali_strbuf_printf(sb, "%s", hali_type_name(x->type));
    return;
  }
  hali_strbuf_append(sb, "tensor<", 7);
  for (uint32_t d = 0; d < x->rank; ++d)
    if (x->dims[d] < 0) hali_strbuf_append(sb, "?x", 2);
    else hali_strbuf_printf(sb, "%" PRId64 "x", x->dims[d]);
  const char *et = hali_hal_element_type_name(x->element_type);
  hali_strbuf_printf(sb, "%s>", et ? et : "?");
}

/* A register's type: its tensor shape at the tensor level. */
static void print_reg_type(hali_strbuf_t *sb, const hali_ir_func_t *f,
                           uint32_t r) {
  if (f->reg_types[r] == HALI_TYPE_TENSOR && f->reg_xtypes)
    hali_ir_xtype_print(sb, &f->reg_xtypes[r]);
  else
    hali_strbuf_printf(sb, "%s", hali_type_name(f->reg_types[r]));
}

static void print_dims(hali_strbuf_t *sb, const hali_ir_func_t *f,
                       const hali_ir_insn_t *insn, uint32_t at, uint32_t n) {
  if (!n) return;
  hali_strbuf_append(sb, "{", 1);
  for (uint32_t k = 0; k < n && at + k < insn->operand_count; ++k) {
    if (k) hali_strbuf_append(sb, ", ", 2);
    hali_ir_print_reg(sb, f, insn->operands[at + k].v);
  }
  hali_strbuf_append(sb, "}", 1);
}

static const hali_ir_xtype_t *reg_xtype(const hali_ir_func_t *f, uint32_t r) {
  static const hali_ir_xtype_t none = {0};
  return f->reg_xtypes && r < f->reg_count ? &f->reg_xtypes[r] : &none;
}

/* The tensor level's own syntax (loader/asm.c parse_tensor_op). */
static void print_tensor_insn(hali_strbuf_t *sb, const hali_ir_module_t *m,
                              const hali_ir_func_t *f,
                              const hali_ir_insn_t *insn) {
  const hali_ir_operand_t *o = insn->operands;
  uint32_t n = insn->operand_count;
  switch (insn->op) {
  case HALI_OP_TENSOR_DISPATCH: {
    hali_ir_dispatch_t dl;
    if (!hali_ir_dispatch_lists(insn, &dl)) break;
    uint32_t nw = dl.nworkload, na = dl.noperands, nr = dl.nresults;
    uint32_t w0 = dl.workload, a0 = dl.operands, r0 = dl.results,
             t0 = dl.ties, d0 = dl.dims;
    for (uint32_t k = 0; k < nr; ++k) {
      if (k) hali_strbuf_append(sb, ", ", 2);
      hali_ir_print_reg(sb, f, o[r0 + k].v);
    }
    if (nr) hali_strbuf_append(sb, " = ", 3);
    const hali_ir_executable_t *e =
        o[HALI_TD_EXE].v < m->executable_count ? &m->executables[o[HALI_TD_EXE].v]
                                               : NULL;
    uint32_t xi = (uint32_t)hali_ir_imm(m, &o[HALI_TD_EXPORT]);
    hali_strbuf_printf(sb, "tensor.dispatch @%s::@%s[", e ? e->name : "?",
                       e && xi < e->export_count ? e->exports[xi].name : "?");
    for (uint32_t k = 0; k < nw; ++k) {
      if (k) hali_strbuf_append(sb, ", ", 2);
      if (o[w0 + k].kind == HALI_IR_IMM)
        hali_strbuf_printf(sb, "%" PRId64, hali_ir_imm(m, &o[w0 + k]));
      else
        hali_ir_print_reg(sb, f, o[w0 + k].v);
    }
    hali_strbuf_append(sb, "](", 2);
    for (uint32_t k = 0; k < na; ++k) {
      if (k) hali_strbuf_append(sb, ", ", 2);
      hali_ir_print_reg(sb, f, o[a0 + k].v);
    }
    hali_strbuf_append(sb, ")", 1);
    if (nr) {
      hali_strbuf_append(sb, nr > 1 ? " -> (" : " -> ", nr > 1 ? 5 : 4);
      uint32_t d = d0;
      for (uint32_t k = 0; k < nr; ++k) {
        if (k) hali_strbuf_append(sb, ", ", 2);
        int64_t tie = hali_ir_imm(m, &o[t0 + k]);
        if (tie >= 0 && (uint64_t)tie < na) {
          hali_ir_print_reg(sb, f, o[a0 + tie].v);
          hali_strbuf_append(sb, " as ", 4);
        }
        const hali_ir_xtype_t *x = reg_xtype(f, o[r0 + k].v);
        hali_ir_xtype_print(sb, x);
        uint32_t nd = hali_ir_xtype_dynamic_dims(x);
        print_dims(sb, f, insn, d, nd);
        d += nd;
      }
      if (nr > 1) hali_strbuf_append(sb, ")", 1);
    }
    const int64_t nb = hali_ir_imm(m, &o[HALI_TD_BINDINGS]);
    if (nb >= 0)
      hali_strbuf_printf(sb, " interface(bindings %" PRId64 ", constants %" PRId64 ")",
                         nb, hali_ir_imm(m, &o[HALI_TD_CONSTANTS]));
    return;
  }
  case HALI_OP_TENSOR_SPLAT:
  case HALI_OP_TENSOR_IMPORT:
    if (n < HALI_TS_DIMS) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_printf(sb, " = %s ", insn->op == HALI_OP_TENSOR_SPLAT
                                         ? "tensor.splat" : "tensor.import");
    hali_ir_print_reg(sb, f, o[1].v);
    hali_strbuf_append(sb, " : ", 3);
    hali_ir_xtype_print(sb, reg_xtype(f, o[0].v));
    print_dims(sb, f, insn, HALI_TS_DIMS, n - HALI_TS_DIMS);
    return;
  case HALI_OP_TENSOR_CONSTANT:
    if (n < 2) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_printf(sb, " = tensor.constant @%s : ",
                       o[1].v < m->rodata_count ? m->rodata[o[1].v].name : "?");
    hali_ir_xtype_print(sb, reg_xtype(f, o[0].v));
    return;
  case HALI_OP_TENSOR_CLONE:
  case HALI_OP_TENSOR_EXPORT:
    if (n < 2) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_printf(sb, " = %s ", insn->op == HALI_OP_TENSOR_CLONE
                                         ? "tensor.clone" : "tensor.export");
    hali_ir_print_reg(sb, f, o[1].v);
    return;
  case HALI_OP_TENSOR_OVERWRITE:
    if (n < 2) break;
    hali_strbuf_append(sb, "tensor.overwrite ", 17);
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_append(sb, ", ", 2);
    hali_ir_print_reg(sb, f, o[1].v);
    return;
  case HALI_OP_TENSOR_WAIT:
  case HALI_OP_TENSOR_BARRIER:
    if (n < 1) break;
    hali_strbuf_printf(sb, "%s ", insn->op == HALI_OP_TENSOR_WAIT
                                      ? "tensor.wait" : "tensor.barrier");
    hali_ir_print_reg(sb, f, o[0].v);
    return;
  case HALI_OP_TENSOR_GLOBAL_LOAD:
    if (n < 2) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_printf(sb, " = tensor.global.load @%s",
                       o[1].v < m->global_count ? m->globals[o[1].v].name
                                                : "?");
    return;
  case HALI_OP_TENSOR_GLOBAL_STORE:
    if (n < 2) break;
    hali_strbuf_printf(sb, "tensor.global.store @%s, ",
                       o[0].v < m->global_count ? m->globals[o[0].v].name
                                                : "?");
    hali_ir_print_reg(sb, f, o[1].v);
    return;
  case HALI_OP_TENSOR_DIM:
  case HALI_OP_TENSOR_NUMEL:
    if (n < (insn->op == HALI_OP_TENSOR_DIM ? 3u : 2u)) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_printf(sb, " = %s ", insn->op == HALI_OP_TENSOR_DIM
                                         ? "tensor.dim" : "tensor.numel");
    hali_ir_print_reg(sb, f, o[1].v);
    if (insn->op == HALI_OP_TENSOR_DIM)
      hali_strbuf_printf(sb, ", %" PRId64, hali_ir_imm(m, &o[2]));
    return;
  case HALI_OP_TENSOR_RESHAPE:
    if (n < 2) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_append(sb, " = tensor.reshape ", 18);
    hali_ir_print_reg(sb, f, o[1].v);
    hali_strbuf_append(sb, " : ", 3);
    hali_ir_xtype_print(sb, reg_xtype(f, o[0].v));
    print_dims(sb, f, insn, 2, n - 2);
    return;
  case HALI_OP_TENSOR_SLICE:
  case HALI_OP_TENSOR_UPDATE: {
    /* %s = tensor.slice %t[offsets] : T{dims} / %r = tensor.update %v, %t[offsets] */
    bool slice = insn->op == HALI_OP_TENSOR_SLICE;
    uint32_t t = slice ? 1 : 2;
    if (n < t + 1) break;
    uint32_t rank = reg_xtype(f, o[t].v)->rank;
    if (n < t + 1 + rank) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_append(sb, slice ? " = tensor.slice " : " = tensor.update ",
                       slice ? 16 : 17);
    if (!slice) {
      hali_ir_print_reg(sb, f, o[1].v);
      hali_strbuf_append(sb, ", ", 2);
    }
    hali_ir_print_reg(sb, f, o[t].v);
    hali_strbuf_append(sb, "[", 1);
    for (uint32_t k = 0; k < rank; ++k) {
      const hali_ir_operand_t *x = &o[t + 1 + k];
      if (k) hali_strbuf_append(sb, ", ", 2);
      if (x->kind == HALI_IR_IMM)
        hali_strbuf_printf(sb, "%" PRId64, hali_ir_imm(m, x));
      else
        hali_ir_print_reg(sb, f, x->v);
    }
    hali_strbuf_append(sb, "]", 1);
    if (slice) {
      hali_strbuf_append(sb, " : ", 3);
      hali_ir_xtype_print(sb, reg_xtype(f, o[0].v));
      print_dims(sb, f, insn, t + 1 + rank, n - (t + 1 + rank));
    }
    return;
  }
  case HALI_OP_TENSOR_TRACE:
    if (n < 2) break;
    hali_strbuf_append(sb, "tensor.trace ", 13);
    if (o[0].kind == HALI_IR_STRING && o[0].v < m->string_count)
      print_string(sb, m->strings[o[0].v], m->string_lengths[o[0].v]);
    else
      hali_strbuf_append(sb, "\"?\"", 3);
    hali_strbuf_append(sb, ", ", 2);
    hali_ir_print_reg(sb, f, o[1].v);
    return;
  case HALI_OP_TENSOR_ALL_REDUCE:
  case HALI_OP_TENSOR_REDUCE_SCATTER:
  case HALI_OP_TENSOR_ALL_GATHER:
  case HALI_OP_TENSOR_ALL_TO_ALL: {
    static const char *const reductions[] = {"?",   "sum", "product",
                                             "min", "max", "average"};
    bool reduces = insn->op == HALI_OP_TENSOR_ALL_REDUCE ||
                   insn->op == HALI_OP_TENSOR_REDUCE_SCATTER;
    if (n < (reduces ? 3u : 2u)) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_printf(sb, " = %s ", hali_op_info(insn->op)->name);
    hali_ir_print_reg(sb, f, o[1].v);
    const int64_t red = reduces ? hali_ir_imm_small(&o[2]) : 0;
    if (reduces)
      hali_strbuf_printf(sb, ", %s",
                         red >= 1 && red <= 5 ? reductions[red] : "?");
    if (insn->op == HALI_OP_TENSOR_ALL_GATHER ||
        insn->op == HALI_OP_TENSOR_REDUCE_SCATTER) {
      hali_strbuf_append(sb, " : ", 3);
      hali_ir_xtype_print(sb, reg_xtype(f, o[0].v));
    }
    return;
  }
  case HALI_OP_TENSOR_SEND:
    if (n < 2) break;
    hali_strbuf_append(sb, "tensor.send ", 12);
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_append(sb, ", ", 2);
    hali_ir_print_reg(sb, f, o[1].v);
    return;
  case HALI_OP_TENSOR_RECV:
    if (n < 2) break;
    hali_ir_print_reg(sb, f, o[0].v);
    hali_strbuf_append(sb, " = tensor.recv ", 15);
    hali_ir_print_reg(sb, f, o[1].v);
    hali_strbuf_append(sb, " : ", 3);
    hali_ir_xtype_print(sb, reg_xtype(f, o[0].v));
    print_dims(sb, f, insn, 2, n - 2);
    return;
  case HALI_OP_TENSOR_EXECUTE:
    hali_strbuf_append(sb, "execute {", 9);
    return;
  case HALI_OP_TENSOR_CONCURRENT:
    hali_strbuf_append(sb, "concurrent {", 12);
    return;
  case HALI_OP_TENSOR_END:
    hali_strbuf_append(sb, "}", 1);
    return;
  default:
    break;
  }
  hali_strbuf_printf(sb, "<malformed %s>", hali_op_info(insn->op)->name);
}

/* ---- Named constants (doc/asm.md, "Symbolic constants").
 *
 * The bytes hold numbers; the text names them where the number is a
 * memory type, a usage, ...: a `const.i32` prints as `memory(...)` when
 * every read of the register it writes is an operand of that kind below.
 * A register also read anywhere else (an add, a compare, a call) keeps its
 * number, as does a value no name spells.  Either text assembles to the
 * same bytes. */
static const struct {
  uint16_t op;
  uint8_t index; /* in insn->operands */
  uint8_t kind;  /* hali_hal_const_kind_t */
} named_operands[] = {
    {HALI_OP_HAL_ALLOCATOR_ALLOCATE, 2, HALI_HAL_CONST_MEMORY},
    {HALI_OP_HAL_ALLOCATOR_ALLOCATE, 3, HALI_HAL_CONST_USAGE},
    {HALI_OP_HAL_ALLOCATOR_REUSE, 3, HALI_HAL_CONST_MEMORY},
    {HALI_OP_HAL_ALLOCATOR_REUSE, 4, HALI_HAL_CONST_USAGE},
    {HALI_OP_HAL_BUFFER_SLOT, 3, HALI_HAL_CONST_MEMORY},
    {HALI_OP_HAL_BUFFER_SLOT, 4, HALI_HAL_CONST_USAGE},
    {HALI_OP_HAL_BUFFER_ASSERT, 2, HALI_HAL_CONST_MEMORY},
    {HALI_OP_HAL_BUFFER_ASSERT, 3, HALI_HAL_CONST_USAGE},
    {HALI_OP_HAL_BUFFER_VIEW_CREATE, 2, HALI_HAL_CONST_ELEMENT_TYPE},
    {HALI_OP_HAL_BUFFER_VIEW_CREATE, 3, HALI_HAL_CONST_ENCODING},
    {HALI_OP_HAL_BUFFER_VIEW_ASSERT, 1, HALI_HAL_CONST_ELEMENT_TYPE},
    {HALI_OP_HAL_BUFFER_VIEW_ASSERT, 2, HALI_HAL_CONST_ENCODING},
    {HALI_OP_HAL_COMMAND_BUFFER_CREATE, 2, HALI_HAL_CONST_MODE},
    {HALI_OP_HAL_COMMAND_BUFFER_CREATE, 3, HALI_HAL_CONST_CATEGORY},
    {HALI_OP_HAL_DEVICE_QUEUE_ALLOCA, 4, HALI_HAL_CONST_MEMORY},
    {HALI_OP_HAL_DEVICE_QUEUE_ALLOCA, 5, HALI_HAL_CONST_USAGE},
    {HALI_OP_HAL_FENCE_FAIL, 1, HALI_HAL_CONST_STATUS},
    {HALI_OP_FAIL, 0, HALI_HAL_CONST_STATUS},
    {HALI_OP_COND_FAIL, 1, HALI_HAL_CONST_STATUS},
};
enum { KIND_MIXED = 0xff };

static uint8_t operand_kind(uint16_t op, uint32_t index) {
  for (size_t i = 0; i < sizeof(named_operands) / sizeof(named_operands[0]);
       ++i)
    if (named_operands[i].op == op && named_operands[i].index == index)
      return named_operands[i].kind;
  return KIND_MIXED;
}

/* Per register of |f|: the kind every read of it has, 0 when it is never
 * read, KIND_MIXED when reads differ (or are not named operands).  NULL
 * when out of memory (everything then prints as numbers). */
static uint8_t *register_kinds(const hali_ir_func_t *f) {
  if (!f->reg_count) return NULL;
  uint8_t *kinds = hali_calloc(f->reg_count, 1);
  if (!kinds) return NULL;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (o->kind != HALI_IR_REG || o->v >= f->reg_count ||
            hali_ir_operand_is_write(insn, k))
          continue;
        uint8_t want = operand_kind(insn->op, k);
        uint8_t *have = &kinds[o->v];
        if (!*have) *have = want;
        else if (*have != want) *have = KIND_MIXED;
      }
    }
  return kinds;
}

static void print_insn_named(hali_strbuf_t *sb, const hali_ir_module_t *m,
                             const hali_ir_func_t *f,
                             const hali_ir_insn_t *insn,
                             const uint8_t *kinds);

void hali_ir_print_insn(hali_strbuf_t *sb, const hali_ir_module_t *m,
                        const hali_ir_func_t *f, const hali_ir_insn_t *insn) {
  print_insn_named(sb, m, f, insn, NULL);
}

static void print_insn_named(hali_strbuf_t *sb, const hali_ir_module_t *m,
                             const hali_ir_func_t *f,
                             const hali_ir_insn_t *insn,
                             const uint8_t *kinds) {
  const hali_op_info_t *info = hali_op_info(insn->op);
  if (!info) {
    hali_strbuf_printf(sb, "<bad op %u>", insn->op);
    return;
  }
  if (hali_op_is_call(insn->op)) {
    uint32_t nargs = insn->aux;
    for (uint32_t i = 1 + nargs; i < insn->operand_count; ++i) {
      if (i > 1 + nargs) hali_strbuf_append(sb, ", ", 2);
      hali_ir_print_reg(sb, f, insn->operands[i].v);
    }
    if (insn->operand_count > 1 + nargs) hali_strbuf_append(sb, " = ", 3);
    uint32_t callee = insn->operand_count ? insn->operands[0].v : 0;
    hali_strbuf_printf(sb, "%s @%s(", info->name,
                       callee < m->func_count ? m->funcs[callee].name : "?");
    for (uint32_t i = 1; i <= nargs && i < insn->operand_count; ++i) {
      if (i > 1) hali_strbuf_append(sb, ", ", 2);
      hali_ir_print_reg(sb, f, insn->operands[i].v);
    }
    hali_strbuf_append(sb, ")", 1);
    return;
  }
  if (info->flags & HALI_OPF_TENSOR) {
    print_tensor_insn(sb, m, f, insn);
    return;
  }
  if (insn->op == HALI_OP_RETURN) {
    hali_strbuf_append(sb, "return", 6);
    for (uint32_t i = 0; i < insn->operand_count; ++i) {
      hali_strbuf_append(sb, i ? ", " : " ", i ? 2 : 1);
      hali_ir_print_reg(sb, f, insn->operands[i].v);
    }
    return;
  }
  /* Written registers first, then the rest in signature order. */
  bool any_def = false;
  for (uint32_t i = 0; i < info->operand_count && i < insn->operand_count; ++i)
    if (info->operands[i].role == HALI_ROLE_WRITE) {
      if (any_def) hali_strbuf_append(sb, ", ", 2);
      hali_ir_print_reg(sb, f, insn->operands[i].v);
      any_def = true;
    }
  if (any_def) hali_strbuf_append(sb, " = ", 3);
  hali_strbuf_printf(sb, "%s", info->name);
  bool first = true;
  for (uint32_t i = 0; i < info->operand_count && i < insn->operand_count;
       ++i) {
    const hali_operand_desc_t *d = &info->operands[i];
    const hali_ir_operand_t *o = &insn->operands[i];
    if (d->role == HALI_ROLE_WRITE) continue;
    hali_strbuf_append(sb, first ? " " : ", ", first ? 1 : 2);
    first = false;
    switch (d->role) {
    case HALI_ROLE_READ: hali_ir_print_reg(sb, f, o->v); break;
    case HALI_ROLE_IMM: {
      uint8_t kind = 0;
      if (kinds && insn->op == HALI_OP_CONST_I32 && insn->operand_count == 2 &&
          insn->operands[0].kind == HALI_IR_REG &&
          insn->operands[0].v < f->reg_count)
        kind = kinds[insn->operands[0].v];
      /* (Only a canonical i32: the name reassembles to exactly it.) */
      if (kind && kind != KIND_MIXED &&
          hali_ir_imm(m, o) == (int64_t)(int32_t)(uint32_t)hali_ir_imm(m, o) &&
          hali_hal_const_format((hali_hal_const_kind_t)kind,
                                (uint32_t)hali_ir_imm(m, o), sb))
        break;
      print_imm(sb, d->type, hali_ir_imm(m, o));
      break;
    }
    case HALI_ROLE_BLOCK: hali_ir_print_block(sb, f, o->v); break;
    case HALI_ROLE_EXECUTABLE:
      hali_strbuf_printf(sb, "@%s", o->v < m->executable_count
                                         ? m->executables[o->v].name
                                         : "?");
      break;
    case HALI_ROLE_RODATA:
      hali_strbuf_printf(sb, "@%s", o->v < m->rodata_count
                                         ? m->rodata[o->v].name
                                         : "?");
      break;
    case HALI_ROLE_GLOBAL:
      hali_strbuf_printf(sb, "@%s", o->v < m->global_count
                                         ? m->globals[o->v].name
                                         : "?");
      break;
    case HALI_ROLE_STRING:
      if (o->v < m->string_count)
        print_string(sb, m->strings[o->v], m->string_lengths[o->v]);
      else
        hali_strbuf_printf(sb, "<bad string %u>", o->v);
      break;
    default: hali_strbuf_append(sb, "?", 1); break;
    }
  }
  if (info->tail) {
    hali_strbuf_append(sb, first ? " [" : ", [", first ? 2 : 3);
    for (uint32_t i = info->operand_count; i < insn->operand_count; ++i) {
      if (i > info->operand_count) hali_strbuf_append(sb, ", ", 2);
      if (info->tail == 'b') hali_ir_print_block(sb, f, insn->operands[i].v);
      else hali_ir_print_reg(sb, f, insn->operands[i].v);
    }
    hali_strbuf_append(sb, "]", 1);
  }
}

static void print_xtypes(hali_strbuf_t *sb, const hali_ir_xtype_t *v,
                         uint32_t n) {
  hali_strbuf_append(sb, "(", 1);
  for (uint32_t i = 0; i < n; ++i) {
    if (i) hali_strbuf_append(sb, ", ", 2);
    hali_ir_xtype_print(sb, &v[i]);
  }
  hali_strbuf_append(sb, ")", 1);
}

static void print_executable(hali_strbuf_t *sb, const hali_ir_module_t *m,
                             const hali_ir_executable_t *e,
                             bool show_layouts) {
  hali_strbuf_printf(sb, "\nexecutable @%s ", e->name);
  for (uint32_t k = 0; k <= e->variant_count; ++k) {
    hali_ir_variant_t v = hali_ir_executable_variant(e, k);
    if (k) hali_strbuf_append(sb, "\n    or ", 8);
    hali_strbuf_append(sb, "format ", 7);
    print_string(sb, v.format ? v.format : "",
                 (uint32_t)strlen(v.format ? v.format : ""));
    if (v.library) {
      hali_strbuf_append(sb, " library ", 9);
      print_string(sb, v.library, (uint32_t)strlen(v.library));
    }
    if (v.if_device) {
      hali_strbuf_append(sb, " if device ", 11);
      print_string(sb, v.if_device, (uint32_t)strlen(v.if_device));
    }
    if (v.if_loader) {
      hali_strbuf_append(sb, " if loader ", 11);
      print_string(sb, v.if_loader, (uint32_t)strlen(v.if_loader));
    }
  }
  hali_strbuf_append(sb, " {\n", 3);
  for (uint32_t i = 0; i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    hali_strbuf_printf(sb, "  export @%s", x->name);
    print_xtypes(sb, x->params, x->param_count);
    if (x->result_count) {
      hali_strbuf_append(sb, " -> ", 4);
      print_xtypes(sb, x->results, x->result_count);
    }
    if (x->symbol) {
      hali_strbuf_append(sb, " symbol ", 8);
      print_string(sb, x->symbol, (uint32_t)strlen(x->symbol));
    }
    if (x->function != UINT32_MAX)
      hali_strbuf_printf(sb, " function @%s",
                         x->function < m->func_count ? m->funcs[x->function].name
                                                     : "?");
    if (x->workgroup_size[0] != 1 || x->workgroup_size[1] != 1 ||
        x->workgroup_size[2] != 1)
      hali_strbuf_printf(sb, " workgroup_size [%u, %u, %u]",
                         x->workgroup_size[0], x->workgroup_size[1],
                         x->workgroup_size[2]);
    if (x->count_function != UINT32_MAX)
      hali_strbuf_printf(sb, " workgroups @%s",
                         x->count_function < m->func_count
                             ? m->funcs[x->count_function].name
                             : "?");
    if (x->layout_declared || (show_layouts && x->layout_materialized))
      hali_strbuf_printf(sb, " layout(constants %u, bindings %u)",
                         x->layout_constants, x->layout_bindings);
    if (x->flags & HALI_EXPORT_WORKGROUP_INFO)
      hali_strbuf_append(sb, " workgroup_info", 15);
    if (x->flags & HALI_EXPORT_RETURNS_STATUS)
      hali_strbuf_append(sb, " returns_status", 15);
    hali_strbuf_append(sb, "\n", 1);
  }
  hali_strbuf_append(sb, "}\n", 2);
}

/* Would reassembling the body alone number |f|'s registers as they are?
 * The assembler numbers a register at its first write in text order and
 * rejects reads of registers not yet written, and it never makes a
 * register nothing writes; when any of that differs from |f|, dis
 * declares every register up front with locals(...). */
static bool needs_locals(const hali_ir_func_t *f) {
  uint32_t next = f->param_count;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      const hali_op_info_t *info = hali_op_info(insn->op);
      if (!info) return true;
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (o->kind != HALI_IR_REG) continue;
        bool write = hali_ir_operand_is_write(insn, k);
        if (o->v < next) continue;   /* already defined */
        if (!write || o->v != next) return true;
        next++;
      }
    }
  /* Registers nothing names (a binary module can hold them) would be
   * dropped by the text: declare them. */
  return next != f->reg_count;
}

char *hali_ir_print(const hali_ir_module_t *m, bool with_locs) {
  return hali_ir_print_ex(m, with_locs, false);
}

char *hali_ir_print_ex(const hali_ir_module_t *m, bool with_locs,
                       bool show_layouts) {
  with_locs = with_locs && m->has_debug;
  hali_strbuf_t sb = {0};
  hali_strbuf_printf(&sb, "module @%s", m->name ? m->name : "module");
  if (with_locs && m->source) {
    hali_strbuf_append(&sb, " source ", 8);
    print_string(&sb, m->source, (uint32_t)strlen(m->source));
  }
  hali_strbuf_append(&sb, "\n", 1);
  for (uint32_t i = 0; i < m->rodata_count; ++i) {
    const hali_ir_rodata_t *r = &m->rodata[i];
    hali_strbuf_printf(&sb, "\nrodata @%s = %s", r->name,
                       hali_rodata_kind_name(r->kind));
    if (r->kind == HALI_RODATA_BYTES) {
      hali_strbuf_append(&sb, " ", 1);
      print_string(&sb, (const char *)r->data, (uint32_t)r->size);
      hali_strbuf_append(&sb, "\n", 1);
      continue;
    }
    uint32_t es = hali_rodata_kind_size(r->kind);
    hali_strbuf_append(&sb, "[", 1);
    for (uint64_t k = 0; k * es < r->size; ++k) {
      uint64_t bits = 0;
      for (uint32_t b = 0; b < es; ++b)
        bits |= (uint64_t)r->data[k * es + b] << (8 * b);
      if (k) hali_strbuf_append(&sb, k % 8 ? ", " : ",\n  ", k % 8 ? 2 : 4);
      if (r->kind == HALI_RODATA_F32)
        print_imm(&sb, HALI_TYPE_F32, (int64_t)bits);
      else if (r->kind == HALI_RODATA_F64)
        print_imm(&sb, HALI_TYPE_F64, (int64_t)bits);
      else /* sign-extend for printing */
        hali_strbuf_printf(&sb, "%" PRId64,
                           es == 8 ? (int64_t)bits
                                   : (int64_t)(bits << (64 - 8 * es)) >>
                                         (64 - 8 * es));
    }
    hali_strbuf_append(&sb, "]\n", 2);
  }
  if (m->global_count) hali_strbuf_append(&sb, "\n", 1);
  for (uint32_t i = 0; i < m->global_count; ++i) {
    const hali_ir_global_t *g = &m->globals[i];
    hali_strbuf_printf(&sb, "global @%s : ", g->name);
    if (g->type == HALI_TYPE_TENSOR) hali_ir_xtype_print(&sb, &g->xtype);
    else hali_strbuf_printf(&sb, "%s", hali_type_name(g->type));
    if (g->flags & HALI_GLOBAL_MUTABLE) hali_strbuf_append(&sb, " mutable", 8);
    if (g->flags & HALI_GLOBAL_INIT) {
      hali_strbuf_append(&sb, " = ", 3);
      print_imm(&sb, g->type, g->init);
    } else if (g->flags & HALI_GLOBAL_PARAMETER) {
      hali_strbuf_append(&sb, " = parameter ", 13);
      print_string(&sb, g->param_scope ? g->param_scope : "",
                   (uint32_t)strlen(g->param_scope ? g->param_scope : ""));
      hali_strbuf_append(&sb, " :: ", 4);
      print_string(&sb, g->param_key ? g->param_key : "",
                   (uint32_t)strlen(g->param_key ? g->param_key : ""));
      if (g->type != HALI_TYPE_TENSOR) { /* lowered: the buffer's type */
        hali_strbuf_append(&sb, " : ", 3);
        hali_ir_xtype_print(&sb, &g->xtype);
      }
    }
    hali_strbuf_append(&sb, "\n", 1);
  }
  for (uint32_t i = 0; i < m->executable_count; ++i)
    print_executable(&sb, m, &m->executables[i], show_layouts);
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    /* An f$async placeholder (before func-conversion) is not text: the
     * assembler makes it again from the calls that name it. */
    if (f->flags & HALI_FUNC_ASYNC_STUB) continue;
    hali_strbuf_printf(&sb, "\nfunc @%s(", f->name);
    for (uint32_t i = 0; i < f->param_count; ++i) {
      if (i) hali_strbuf_append(&sb, ", ", 2);
      hali_ir_print_reg(&sb, f, i);
      hali_strbuf_append(&sb, ": ", 2);
      if (f->param_flags && (f->param_flags[i] & HALI_PARAM_MUTABLE))
        hali_strbuf_append(&sb, "mutable ", 8);
      print_reg_type(&sb, f, i);
    }
    hali_strbuf_append(&sb, ")", 1);
    if (f->result_count) {
      hali_strbuf_append(&sb, " -> (", 5);
      for (uint32_t i = 0; i < f->result_count; ++i) {
        if (i) hali_strbuf_append(&sb, ", ", 2);
        if (f->result_ties && f->result_ties[i] >= 0) {
          hali_ir_print_reg(&sb, f, (uint32_t)f->result_ties[i]);
          hali_strbuf_append(&sb, " as ", 4);
        }
        if (f->results[i] == HALI_TYPE_TENSOR && f->result_xtypes)
          hali_ir_xtype_print(&sb, &f->result_xtypes[i]);
        else
          hali_strbuf_printf(&sb, "%s", hali_type_name(f->results[i]));
      }
      hali_strbuf_append(&sb, ")", 1);
    }
    if (f->attr_count) {
      hali_strbuf_append(&sb, " attributes [", 13);
      for (uint32_t i = 0; i < f->attr_count; ++i) {
        if (i) hali_strbuf_append(&sb, ", ", 2);
        print_string(&sb, f->attrs[i], (uint32_t)strlen(f->attrs[i]));
      }
      hali_strbuf_append(&sb, "]", 1);
    }
    if (needs_locals(f)) {
      hali_strbuf_append(&sb, " locals(", 8);
      for (uint32_t r = f->param_count; r < f->reg_count; ++r) {
        if (r > f->param_count) hali_strbuf_append(&sb, ", ", 2);
        hali_ir_print_reg(&sb, f, r);
        hali_strbuf_append(&sb, ": ", 2);
        print_reg_type(&sb, f, r);
      }
      hali_strbuf_append(&sb, ")", 1);
    }
    if (f->flags & HALI_FUNC_IMPORT) {
      hali_strbuf_printf(&sb, " import%s\n",
                         (f->flags & HALI_FUNC_OPTIONAL) ? " optional" : "");
      continue;
    }
    hali_strbuf_append(&sb, " {\n", 3);
    uint8_t *kinds = register_kinds(f);
    for (uint32_t b = 0; b < f->block_count; ++b) {
      hali_ir_print_block(&sb, f, b);
      hali_strbuf_append(&sb, ":\n", 2);
      const hali_ir_block_t *blk = &f->blocks[b];
      uint32_t depth = 0; /* open execute / concurrent groups */
      for (uint32_t i = 0; i < blk->insn_count; ++i) {
        uint16_t op = blk->insns[i].op;
        if (op == HALI_OP_TENSOR_END && depth) depth--;
        hali_strbuf_append(&sb, "  ", 2);
        for (uint32_t d = 0; d < depth; ++d) hali_strbuf_append(&sb, "  ", 2);
        if (op == HALI_OP_TENSOR_EXECUTE || op == HALI_OP_TENSOR_CONCURRENT)
          depth++;
        print_insn_named(&sb, m, f, &blk->insns[i], kinds);
        if (with_locs)
          hali_strbuf_printf(&sb, " loc(%u)", blk->insns[i].line);
        hali_strbuf_append(&sb, "\n", 1);
      }
    }
    hali_free(kinds);
    hali_strbuf_append(&sb, "}\n", 2);
  }
  return hali_strbuf_take(&sb);
}
