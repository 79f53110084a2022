/* hali — the encoder: verified IR -> the interpreter's internal code
 * (layout in vm/code.h).  Runs once per module load. */
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"
#include "base/alloc.h"

static int fused_op_for(uint16_t cmp) {
  switch (cmp) {
#define HALI_X(name, base)                                                     \
  case HALI_OP_##base:                                                         \
    return HALI_OP_##name;
    HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  default:
    return -1;
  }
}

/* Does instruction |i| of |blk| fuse with the cond_br after it? */
static bool fuses(const hali_ir_block_t *blk, uint32_t i) {
  if (i + 1 >= blk->insn_count) return false;
  const hali_ir_insn_t *cmp = &blk->insns[i], *br = &blk->insns[i + 1];
  return br->op == HALI_OP_COND_BR && fused_op_for(cmp->op) >= 0 &&
         br->operands[0].v == cmp->operands[0].v;
}

/* What the encoder proves about each register of |f| (f->reg_count
 * entries each):
 *   dead[r]: every read of r is a cond_br fused with the compare before
 *     it, so its value is never observed (the verifier's definite
 *     assignment means no read precedes a write) and the fused op need not
 *     store it;
 *   divisor[r]: r is written exactly once, by a const that is neither 0
 *     nor -1, so every read of it (after that write, by definite
 *     assignment) sees that constant and a division by it cannot fail.
 * Parameters are excluded from both (the host writes them); any register
 * operand that is not a write counts as a read. */
static void analyze_regs(const hali_ir_func_t *f, uint32_t *count,
                         bool *dead, bool *divisor) {
  /* |count|: 3 * reg_count counters, zeroed here. */
  memset(count, 0, 3 * sizeof(uint32_t) * (size_t)f->reg_count);
  uint32_t *reads = count, *fused = count + f->reg_count,
           *writes = count + 2u * f->reg_count;
  for (uint32_t r = 0; r < f->reg_count; ++r) divisor[r] = false;
  for (uint32_t b = 0; b < f->block_count; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (o->kind != HALI_IR_REG || o->v >= f->reg_count) continue;
        if (hali_ir_operand_is_write(insn, k)) writes[o->v]++;
        else reads[o->v]++;
      }
      if (fuses(blk, i)) fused[insn->operands[0].v]++;
      if ((insn->op == HALI_OP_CONST_I32 || insn->op == HALI_OP_CONST_I64) &&
          insn->operand_count == 2 && insn->operands[0].kind == HALI_IR_REG &&
          insn->operands[0].v < f->reg_count) {
        /* const.i32 immediates are stored sign-extended (vm/ir.h); one
         * in the module's pool (INT64_MIN here) is neither 0 nor -1. */
        const int64_t v = hali_ir_imm_small(&insn->operands[1]);
        divisor[insn->operands[0].v] = v != 0 && v != -1;
      }
    }
  }
  for (uint32_t r = 0; r < f->reg_count; ++r) {
    dead[r] = r >= f->param_count && reads[r] == fused[r];
    divisor[r] = divisor[r] && r >= f->param_count && writes[r] == 1;
  }
}

/* The check-free form of a division or remainder (code.h), or -1. */
static int divk_op_for(uint16_t op) {
  switch (op) {
#define HALI_X(name, base)                                                     \
  case HALI_OP_##base:                                                         \
    return HALI_OP_##name;
    HALI_DIVK_OPS(HALI_X)
#undef HALI_X
  default:
    return -1;
  }
}

static int fused_nostore_op(int fused) {
  switch (fused) {
#define HALI_X(name, base)                                                     \
  case HALI_OP_##name:                                                         \
    return HALI_OP_##name##_NS;
    HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  default:
    return fused;
  }
}

/* The integer compare that gives the same result with its operands
 * swapped (a < b is b > a). */
static uint16_t swapped_compare(uint16_t cmp) {
  switch (cmp) {
#define HALI_SWAP(T)                                                           \
  case HALI_OP_LT_S_##T: return HALI_OP_GT_S_##T;                              \
  case HALI_OP_GT_S_##T: return HALI_OP_LT_S_##T;                              \
  case HALI_OP_LE_S_##T: return HALI_OP_GE_S_##T;                              \
  case HALI_OP_GE_S_##T: return HALI_OP_LE_S_##T;                              \
  case HALI_OP_LT_U_##T: return HALI_OP_GT_U_##T;                              \
  case HALI_OP_GT_U_##T: return HALI_OP_LT_U_##T;                              \
  case HALI_OP_LE_U_##T: return HALI_OP_GE_U_##T;                              \
  case HALI_OP_GE_U_##T: return HALI_OP_LE_U_##T;
    HALI_SWAP(I32)
    HALI_SWAP(I64)
#undef HALI_SWAP
  default: /* eq, ne */
    return cmp;
  }
}

static int fused_forward_op(int fused) {
  switch (fused) {
#define HALI_X(name, base)                                                     \
  case HALI_OP_##name:                                                         \
    return HALI_OP_##name##_NSF;
    HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  default:
    return fused;
  }
}

/* Does instruction |i| of |blk| (an add) fuse with the compare-and-branch
 * after it?  The compare's result must be one only its branch reads
 * (|dead|), the add of the compare's width, and the sum one of the
 * compare's operands (the op compares it from a machine register). */
static bool adds_then_branches(const hali_ir_block_t *blk, uint32_t i,
                               const bool *dead) {
  if (i + 2 >= blk->insn_count || !fuses(blk, i + 1)) return false;
  const hali_ir_insn_t *add = &blk->insns[i], *cmp = &blk->insns[i + 1];
  if (add->op != HALI_OP_ADD_I32 && add->op != HALI_OP_ADD_I64) return false;
  if (!dead[cmp->operands[0].v]) return false;
  if (cmp->operands[1].v != add->operands[0].v &&
      cmp->operands[2].v != add->operands[0].v)
    return false;
  const hali_type_t want =
      add->op == HALI_OP_ADD_I32 ? HALI_TYPE_I32 : HALI_TYPE_I64;
  return hali_op_info(cmp->op)->operands[1].type == want;
}

/* The add-compare-branch op for the fused compare-and-branch |fused|. */
static int add_fused_op(int fused) {
  switch (fused) {
#define HALI_X(name, base)                                                     \
  case HALI_OP_##name:                                                         \
    return HALI_OP_ADD_##name;
    HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  default:
    return -1;
  }
}

/* The multiply-add op (vm/code.h) for instruction |i| of |blk| and the
 * add after it, or -1; |*other| the add's operand that is not the
 * product.  Not when the add begins an add-compare-branch (that fuses
 * three instructions). */
static int mul_add_op(const hali_ir_block_t *blk, uint32_t i, const bool *dead,
                      uint32_t *other) {
  if (i + 1 >= blk->insn_count) return -1;
  const hali_ir_insn_t *mul = &blk->insns[i], *add = &blk->insns[i + 1];
  int op = -1;
  uint16_t want = 0;
  bool commutes = true;
  switch (mul->op) {
#define HALI_X(name, m, a)                                                     \
  case HALI_OP_##m:                                                            \
    op = HALI_OP_##name, want = HALI_OP_##a;                                   \
    break;
    HALI_MUL_ADD_OPS(HALI_X)
#undef HALI_X
  default:
    return -1;
  }
  if (mul->op == HALI_OP_MUL_F32 || mul->op == HALI_OP_MUL_F64)
    commutes = false; /* keep the float add's operand order */
  if (add->op != want || mul->operand_count != 3 || add->operand_count != 3)
    return -1;
  const uint32_t t = mul->operands[0].v;
  if (add->operands[1].v == t) *other = add->operands[2].v;
  else if (commutes && add->operands[2].v == t) *other = add->operands[1].v;
  else return -1;
  if (adds_then_branches(blk, i + 1, dead)) return -1;
  return op;
}

/* Is |f| plain (vm/code.h, return.plain): scalar results, no ref
 * registers?  What encode_func records as plain_return, from the IR, for
 * a callee not encoded yet. */
static bool ir_func_plain(const hali_ir_func_t *f) {
  for (uint32_t i = 0; i < f->result_count; ++i)
    if (hali_type_is_ref(f->results[i])) return false;
  for (uint32_t r = 0; r < f->reg_count; ++r)
    if (hali_type_is_ref(f->reg_types[r])) return false;
  return true;
}

static uint32_t insn_cells(const hali_ir_insn_t *insn) {
  return hali_code_cells(insn->op, insn->operand_count -
                                       hali_op_info(insn->op)->operand_count);
}

static void put_slots(hali_cell_t *cells, uint32_t *k, uint16_t v) {
  cells[*k / 4].r[*k % 4] = v;
  (*k)++;
}

/* Memory encode_func needs only while it encodes one function, kept
 * for the next (hali_vm_module_create): the per-register and per-block
 * tables of a module of many small functions then cost no allocation
 * each. */
typedef struct {
  void *buf;
  size_t size;
} enc_scratch_t;

/* |scratch|'s buffer with room for |bytes| (8-byte aligned); NULL on OOM. */
static void *scratch_get(enc_scratch_t *scratch, uint64_t bytes) {
  if (bytes <= scratch->size && scratch->buf) return scratch->buf;
  if (bytes > SIZE_MAX / 2) return NULL;
  size_t n = scratch->size ? 2 * scratch->size : 256;
  if (n < bytes) n = (size_t)bytes;
  void *q = hali_realloc(scratch->buf, n);
  if (!q) return NULL;
  scratch->buf = q;
  scratch->size = n;
  return q;
}

static hali_status_t encode_func(hali_vm_module_t *vm, hali_vm_func_t *out,
                                 const hali_ir_func_t *f,
                                 enc_scratch_t *scratch) {
  out->ir = f;
  /* The scratch tables: block_at[block_count], the counters of
   * analyze_regs (3 * reg_count), then dead[reg_count],
   * divisor[reg_count] and form[one per IR instruction].  Counts are
   * 32-bit, so none of this wraps. */
  const uint64_t nregs = f->reg_count, nblocks = f->block_count;
  uint64_t nir = 0;
  for (uint32_t b = 0; b < f->block_count; ++b) nir += f->blocks[b].insn_count;
  uint32_t *block_at =
      scratch_get(scratch, 4 * nblocks + 12 * nregs + 2 * nregs + nir);
  if (!block_at) goto oom;
  uint32_t *counters = block_at + nblocks;
  bool *dead = (bool *)(counters + 3 * nregs);
  const bool *divisor = dead + nregs;
  /* How pass 1 encodes each instruction that starts an encoded one, so
   * that pass 2 need not decide again. */
  enum { FORM_PLAIN, FORM_ADD_BR, FORM_FUSED, FORM_MUL_ADD };
  uint8_t *form = (uint8_t *)(dead + 2 * nregs);
  analyze_regs(f, counters, dead, dead + nregs);

  /* Pass 1: where each block and instruction starts. */
  uint32_t total = 0, ninsns = 0;
  for (uint32_t b = 0, g = 0; b < f->block_count; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    block_at[b] = total;
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      uint8_t *fm = &form[g + i];
      if (adds_then_branches(blk, i, dead)) {
        *fm = FORM_ADD_BR;
        total += hali_code_cells(HALI_OP_ADD_BR_EQ_I32, 0);
        i += 2;
      } else if (fuses(blk, i)) {
        *fm = FORM_FUSED;
        total += hali_code_cells((uint32_t)fused_op_for(blk->insns[i].op), 0);
        ++i;
      } else if (mul_add_op(blk, i, dead, &(uint32_t){0}) >= 0) {
        *fm = FORM_MUL_ADD;
        total += hali_code_cells(HALI_OP_MUL_ADD_I32, 0);
        ++i;
      } else {
        *fm = FORM_PLAIN;
        total += insn_cells(&blk->insns[i]);
      }
      ninsns++;
    }
    g += blk->insn_count;
  }
  /* One allocation for what the function keeps (freed with its code,
   * module_destroy): code[total] cells, then insn_ir[ninsns],
   * insn_offset[ninsns] and slot[reg_count], in falling alignment. */
  uint64_t code_bytes = (uint64_t)total * sizeof(hali_cell_t);
  uint64_t ir_at = code_bytes;
  uint64_t offset_at = ir_at + (uint64_t)ninsns * sizeof(*out->insn_ir);
  uint64_t slot_at = offset_at + (uint64_t)ninsns * sizeof(uint32_t);
  uint64_t bytes = slot_at + nregs * sizeof(uint16_t);
  if (bytes > SIZE_MAX) goto oom;
  uint8_t *keep = hali_malloc(bytes ? (size_t)bytes : 1);
  if (!keep) goto oom;
  memset(keep, 0, (size_t)code_bytes);
  out->code = (hali_cell_t *)keep;
  out->insn_ir = (const hali_ir_insn_t **)(keep + ir_at);
  out->insn_offset = (uint32_t *)(keep + offset_at);
  out->slot = (uint16_t *)(keep + slot_at);
  out->code_size = total;
  out->insn_count = ninsns;

  uint32_t ns = 0, nr = 0;
  for (uint32_t r = 0; r < f->reg_count; ++r)
    out->slot[r] = (uint16_t)(hali_type_is_ref(f->reg_types[r]) ? nr++ : ns++);
  out->scalar_count = (uint16_t)ns;
  out->ref_count = (uint16_t)nr;
  out->bank_scalars = ns;
  out->bank_refs = nr;
  if (ns > vm->max_scalar_count) vm->max_scalar_count = (uint16_t)ns;
  if (nr > vm->max_ref_count) vm->max_ref_count = (uint16_t)nr;
  out->scalar_params_only = true;
  for (uint32_t i = 0; i < f->param_count; ++i)
    if (hali_type_is_ref(f->reg_types[i])) out->scalar_params_only = false;
  for (uint32_t i = 0; i < f->attr_count; ++i)
    if (strcmp(f->attrs[i], "blocking") == 0) out->may_block = true;
  out->scalar_results_only = true;
  for (uint32_t i = 0; i < f->result_count; ++i)
    if (hali_type_is_ref(f->results[i])) out->scalar_results_only = false;
  out->plain_return = out->scalar_results_only && nr == 0;

  /* Pass 2: emit. */
  hali_cell_t *code = out->code;
  uint32_t at = 0, n = 0;
  for (uint32_t b = 0, g = 0; b < f->block_count; g += f->blocks[b].insn_count, ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      const hali_op_info_t *info = hali_op_info(insn->op);
      hali_cell_t *c = &code[at];
      out->insn_offset[n] = at;
      out->insn_ir[n++] = insn;
      const hali_ir_operand_t *o = insn->operands;
      const uint8_t fm = form[g + i];
      if (fm == FORM_ADD_BR) {
        const hali_ir_insn_t *cmp = &blk->insns[i + 1], *br = &blk->insns[i + 2];
        /* The sum first: `cmp %z, %sum` is `swapped-cmp %sum, %z`. */
        const bool first = cmp->operands[1].v == o[0].v;
        const uint16_t cop = first ? cmp->op : swapped_compare(cmp->op);
        c[0].i.op = (uint16_t)add_fused_op(fused_op_for(cop));
        c[0].i.a = out->slot[o[0].v];
        c[0].i.b = out->slot[o[1].v];
        c[0].i.c = out->slot[o[2].v];
        c[1].r[0] = out->slot[o[0].v];
        c[1].r[1] = out->slot[cmp->operands[first ? 2 : 1].v];
        c[1].r[2] = out->slot[cmp->operands[0].v];
        c[2].target = &code[block_at[br->operands[1].v]];
        c[3].target = &code[block_at[br->operands[2].v]];
        at += hali_code_cells(c[0].i.op, 0);
        i += 2;
        continue;
      }
      if (fm == FORM_FUSED) {
        const hali_ir_insn_t *br = &blk->insns[i + 1];
        const int fop = fused_op_for(insn->op);
        c[0].i.op = (uint16_t)(dead[o[0].v] ? fused_nostore_op(fop) : fop);
        /* Both targets after the branch: the form without the poll. */
        if (dead[o[0].v] && block_at[br->operands[1].v] > at &&
            block_at[br->operands[2].v] > at)
          c[0].i.op = (uint16_t)fused_forward_op(fop);
        c[0].i.a = out->slot[o[0].v];
        c[0].i.b = out->slot[o[1].v];
        c[0].i.c = out->slot[o[2].v];
        c[1].target = &code[block_at[br->operands[1].v]];
        c[2].target = &code[block_at[br->operands[2].v]];
        at += hali_code_cells(c[0].i.op, 0);
        ++i;
        continue;
      }
      uint32_t other = 0;
      const int mop = fm == FORM_MUL_ADD ? mul_add_op(blk, i, dead, &other) : -1;
      if (mop >= 0) {
        const hali_ir_insn_t *add = &blk->insns[i + 1];
        c[0].i.op = (uint16_t)mop;
        c[0].i.a = out->slot[o[0].v];
        c[0].i.b = out->slot[o[1].v];
        c[0].i.c = out->slot[o[2].v];
        c[1].r[0] = out->slot[add->operands[0].v];
        c[1].r[1] = out->slot[other];
        at += hali_code_cells(c[0].i.op, 0);
        ++i;
        continue;
      }
      c[0].i.op = insn->op;
      switch (insn->op) {
      case HALI_OP_SWITCH: {
        uint32_t nt = insn->operand_count - info->operand_count;
        c[0].i.a = out->slot[o[0].v];
        c[0].i.b = (uint16_t)nt;
        c[1].target = &code[block_at[o[1].v]];
        for (uint32_t t = 0; t < nt; ++t)
          c[2 + t].target = &code[block_at[o[2 + t].v]];
        break;
      }
      case HALI_OP_CALL:
      case HALI_OP_FIBER_SPAWN:
      case HALI_OP_FIBER_JOIN: {
        const hali_ir_func_t *cf = &vm->ir->funcs[o[0].v];
        const hali_type_t *ptypes;
        uint32_t nparams = hali_ir_call_params(insn->op, cf, &ptypes);
        c[0].i.b = (uint16_t)nparams;
        c[0].i.c = (uint16_t)(insn->operand_count - 1 - nparams);
        c[1].ptr = &vm->funcs[o[0].v];
        if (insn->op == HALI_OP_CALL && (cf->flags & HALI_FUNC_IMPORT))
          c[0].i.op = HALI_OP_CALL_IMPORT;
        /* call: cell0's a = the instruction's length in cells, so that a
         * return finds the next instruction with one add. */
        if (c[0].i.op == HALI_OP_CALL) {
          c[0].i.a = (uint16_t)insn_cells(insn);
          bool scalars = true;
          for (uint32_t p = 0; p < nparams; ++p)
            if (hali_type_is_ref(ptypes[p])) scalars = false;
          const hali_vm_func_t *callee = &vm->funcs[o[0].v];
          const bool plain =
              callee->code ? callee->plain_return : ir_func_plain(cf);
          if (plain) c[0].i.op = nparams == 1 ? HALI_OP_CALL_P1 : HALI_OP_CALL_P;
          else if (scalars) c[0].i.op = HALI_OP_CALL_S;
        }
        uint32_t k = 0;
        for (uint32_t a = 1; a < insn->operand_count; ++a)
          put_slots(&c[2], &k, out->slot[o[a].v]);
        break;
      }
      case HALI_OP_RETURN: {
        if (out->plain_return)
          c[0].i.op = insn->operand_count == 1 ? HALI_OP_RETURN_PLAIN1
                                               : HALI_OP_RETURN_PLAIN;
        c[0].i.b = (uint16_t)insn->operand_count;
        uint32_t k = 0;
        for (uint32_t a = 0; a < insn->operand_count; ++a)
          put_slots(&c[1], &k, out->slot[o[a].v]);
        break;
      }
      default: {
        /* A division by a proven constant divisor (operand 2). */
        const int divk = divk_op_for(insn->op);
        if (divk >= 0 && insn->operand_count == 3 &&
            o[2].kind == HALI_IR_REG && divisor[o[2].v])
          c[0].i.op = (uint16_t)divk;
        uint32_t regs = 0;
        uint32_t extra = 1 + (info->reg_count > 3
                                  ? HALI_CELLS_FOR_SLOTS(info->reg_count - 3u)
                                  : 0);
        for (uint32_t k = 0; k < info->operand_count; ++k) {
          const hali_operand_desc_t *d = &info->operands[k];
          if (d->role == HALI_ROLE_READ || d->role == HALI_ROLE_WRITE) {
            uint16_t s = out->slot[o[k].v];
            if (regs == 0) c[0].i.a = s;
            else if (regs == 1) c[0].i.b = s;
            else if (regs == 2) c[0].i.c = s;
            else c[1 + (regs - 3) / 4].r[(regs - 3) % 4] = s;
            regs++;
            continue;
          }
          hali_cell_t *x = &c[extra++];
          switch (d->role) {
          case HALI_ROLE_IMM: x->imm = hali_ir_imm(vm->ir, &o[k]); break;
          case HALI_ROLE_BLOCK: x->target = &code[block_at[o[k].v]]; break;
          case HALI_ROLE_STRING: x->ptr = &vm->strings[o[k].v]; break;
          case HALI_ROLE_FUNC: x->ptr = &vm->funcs[o[k].v]; break;
          case HALI_ROLE_RODATA: x->ptr = &vm->ir->rodata[o[k].v]; break;
          /* The index: storage is per context (hali_vm_link_t.globals). */
          case HALI_ROLE_GLOBAL: x->imm = o[k].v; break;
          /* The index: executables are loaded after encoding. */
          case HALI_ROLE_EXECUTABLE: x->imm = o[k].v; break;
          default: break;
          }
        }
        if (info->tail) {
          uint32_t nt = insn->operand_count - info->operand_count, t = 0;
          c[extra].imm = nt;
          for (uint32_t k = 0; k < nt; ++k)
            put_slots(&c[extra + 1], &t,
                      out->slot[o[info->operand_count + k].v]);
        }
      }
      }
      at += insn_cells(insn);
    }
  }
  return HALI_OK;
oom:
  return hali_status_annotate(hali_status_oom(), "encoding @%s", f->name);
}

void hali_vm_module_retain(hali_vm_module_t *m) {
  if (m) atomic_fetch_add_explicit(&m->count, 1, memory_order_relaxed);
}

static void module_destroy(hali_vm_module_t *m) {
  for (uint32_t i = 0; m->funcs && i < m->func_count; ++i) {
    hali_free(m->funcs[i].code); /* slot, insn_offset, insn_ir with it */
  }
  hali_free(m->funcs);
  hali_free(m->strings);
  if (m->unlinked) hali_vm_globals_free(m->unlinked->globals);
  hali_free(m->unlinked);
  hali_ir_module_free(m->ir);
  hali_free(m);
}

void hali_vm_module_release(hali_vm_module_t *m) {
  if (!m || atomic_fetch_sub_explicit(&m->count, 1, memory_order_acq_rel) != 1)
    return;
  module_destroy(m);
}

hali_status_t hali_vm_module_create(hali_ir_module_t *ir,
                                    hali_vm_module_t **out) {
  *out = NULL;
  hali_vm_module_t *m = hali_calloc(1, sizeof(*m));
  if (!m) {
    hali_ir_module_free(ir);
    return hali_status_oom();
  }
  atomic_init(&m->count, 1);
  m->ir = ir;
  m->func_count = ir->func_count;
  m->funcs = hali_calloc(ir->func_count ? ir->func_count : 1, sizeof(hali_vm_func_t));
  m->strings = hali_calloc(ir->string_count ? ir->string_count : 1,
                      sizeof(hali_vm_string_t));
  m->unlinked = hali_calloc(1, sizeof(*m->unlinked));
  if (m->unlinked) m->unlinked->globals = hali_vm_globals_create(ir);
  if (!m->funcs || !m->strings || !m->unlinked || !m->unlinked->globals) {
    module_destroy(m);
    return hali_status_oom();
  }
  /* No reference: the unlinked table lives and dies with the module. */
  m->unlinked->module = m;
  for (uint32_t i = 0; i < ir->string_count; ++i) {
    m->strings[i].length = ir->string_lengths[i];
    m->strings[i].data = ir->strings[i];
  }
  enc_scratch_t scratch = {NULL, 0};
  for (uint32_t i = 0; i < ir->func_count; ++i) {
    hali_ir_prefetch_func(ir, i + 1);
    m->funcs[i].index = i;
    hali_status_t s = encode_func(m, &m->funcs[i], &ir->funcs[i], &scratch);
    if (s) {
      hali_free(scratch.buf);
      module_destroy(m);
      return s;
    }
  }
  hali_free(scratch.buf);
  *out = m;
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* Link tables. */

hali_vm_globals_t *hali_vm_globals_create(const hali_ir_module_t *ir) {
  hali_vm_globals_t *g = hali_calloc(1, sizeof(*g));
  if (!g) return NULL;
  uint32_t n = ir->global_count;
  g->bits = hali_calloc(n ? n : 1, sizeof(*g->bits));
  g->refs = hali_calloc(n ? n : 1, sizeof(*g->refs));
  if (!g->bits || !g->refs) {
    hali_free(g->bits);
    hali_free(g->refs);
    hali_free(g);
    return NULL;
  }
  pthread_mutex_init(&g->lock, NULL);
  g->count = n;
  for (uint32_t i = 0; i < n; ++i) {
    const hali_ir_global_t *d = &ir->globals[i];
    uint64_t bits = 0;
    if (d->flags & HALI_GLOBAL_INIT) bits = (uint64_t)d->init;
    atomic_init(&g->bits[i], bits);
  }
  return g;
}

void hali_vm_globals_free(hali_vm_globals_t *g) {
  if (!g) return;
  for (uint32_t i = 0; i < g->count; ++i) hali_ref_release(g->refs[i]);
  pthread_mutex_destroy(&g->lock);
  hali_free(g->bits);
  hali_free(g->refs);
  hali_free(g);
}

hali_status_t hali_vm_link_create(hali_vm_module_t *m, hali_vm_link_t **out) {
  *out = NULL;
  hali_vm_link_t *l = hali_calloc(1, sizeof(*l));
  if (l) {
    l->imports = hali_calloc(m->func_count ? m->func_count : 1,
                        sizeof(hali_vm_import_t));
    l->executables = hali_calloc(m->ir->executable_count ? m->ir->executable_count
                                                    : 1,
                            sizeof(*l->executables));
    l->globals = hali_vm_globals_create(m->ir);
  }
  if (!l || !l->imports || !l->executables || !l->globals) {
    if (l) {
      hali_free(l->imports);
      hali_free(l->executables);
      hali_vm_globals_free(l->globals);
    }
    hali_free(l);
    return hali_status_annotate(
        hali_status_oom(), "linking module @%s", m->ir->name);
  }
  l->module = m;
  hali_vm_module_retain(m);
  *out = l;
  return HALI_OK;
}

void hali_vm_link_free(hali_vm_link_t *l) {
  if (!l) return;
  /* Executables first: recorded work may keep some alive, and each keeps
   * what it needs of the module on its own. */
  for (uint32_t i = 0; i < l->module->ir->executable_count; ++i)
    hali_ref_release((hali_ref_t *)l->executables[i]);
  hali_free(l->executables);
  hali_free(l->imports);
  /* Refs held by globals (buffers, fences) may belong to recorded work as
   * well: each keeps its own reference. */
  hali_vm_globals_free(l->globals);
  hali_vm_module_release(l->module);
  hali_free(l);
}

hali_status_t hali_vm_link_bind_import(hali_vm_link_t *l, const char *name,
                                       hali_vm_import_fn_t fn, void *user) {
  const hali_vm_module_t *m = l->module;
  int32_t i = hali_ir_module_find_func(m->ir, name);
  if (i < 0 || !(m->ir->funcs[i].flags & HALI_FUNC_IMPORT))
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "module @%s has no import @%s", m->ir->name, name);
  l->imports[i].fn = fn;
  l->imports[i].user = user;
  return HALI_OK;
}

hali_status_t hali_vm_link_check_imports(const hali_vm_link_t *l) {
  const hali_vm_module_t *m = l->module;
  hali_strbuf_t sb = {0};
  uint32_t missing = 0;
  for (uint32_t i = 0; i < m->func_count; ++i) {
    const hali_ir_func_t *f = &m->ir->funcs[i];
    if ((f->flags & HALI_FUNC_IMPORT) && !(f->flags & HALI_FUNC_OPTIONAL) &&
        !(l->imports && l->imports[i].fn))
      hali_strbuf_printf(&sb, "%s@%s", missing++ ? ", " : "", f->name);
  }
  char *list = hali_strbuf_take(&sb);
  hali_status_t s =
      missing ? hali_status_make(HALI_STATUS_NOT_FOUND,
                                 "module @%s: %u required import(s) not "
                                 "provided by the host: %s",
                                 m->ir->name, missing, list ? list : "")
              : HALI_OK;
  hali_free(list);
  return s;
}

const hali_vm_func_t *hali_vm_module_lookup(const hali_vm_module_t *m,
                                            const char *name) {
  int32_t i = hali_ir_module_find_func(m->ir, name);
  return i < 0 ? NULL : &m->funcs[i];
}

hali_status_t hali_vm_link_run_initializers(hali_vm_stack_t *st,
                                            const hali_vm_link_t *link) {
  const hali_vm_module_t *m = link->module;
  for (uint32_t i = 0; i < m->func_count; ++i) {
    if (!hali_ir_func_has_attr(&m->ir->funcs[i], HALI_ATTR_INITIALIZER))
      continue;
    hali_status_t s =
        hali_vm_link_invoke(st, link, &m->funcs[i], NULL, 0, NULL, 0);
    if (s)
      return hali_status_annotate(s, "initializer @%s of module @%s",
                                  m->ir->funcs[i].name, m->ir->name);
  }
  return HALI_OK;
}
