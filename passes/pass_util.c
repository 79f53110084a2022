/* hali — helpers shared by the passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hal_bits.h"
#include "base/alloc.h"
#include "vm/strmap.h"
#include "passes/pass_util.h"

/* A register, string, block ... index of UINT32_MAX is what the IR's
 * builders (hali_pass_reg, hali_ir_module_intern) return when they run out
 * of memory, and so is an immediate's pool index (hali_ir_set_imm). */
static bool bad_reg(hali_ir_operand_t o) {
  return o.v == UINT32_MAX &&
         (o.kind != HALI_IR_IMM || o.imm_form == HALI_IR_IMM_POOL);
}

static hali_ir_insn_t *emitv(hali_insn_list_t *l, uint32_t line, uint16_t op,
                             uint32_t total, uint32_t n, va_list ap) {
  if (l->oom) return NULL;
  hali_ir_insn_t *insn = hali_ir_block_add_insn(&l->b, op, total);
  if (!insn) {
    l->oom = true;
    return NULL;
  }
  insn->line = line;
  for (uint32_t i = 0; i < n && i < total; ++i) {
    insn->operands[i] = va_arg(ap, hali_ir_operand_t);
    if (bad_reg(insn->operands[i])) l->oom = true;
  }
  return l->oom ? NULL : insn;
}

hali_ir_insn_t *hali_pass_emit(hali_insn_list_t *l, uint32_t line, uint16_t op,
                               uint32_t n, ...) {
  va_list ap;
  va_start(ap, n);
  hali_ir_insn_t *insn = emitv(l, line, op, n, n, ap);
  va_end(ap);
  return insn;
}

hali_ir_insn_t *hali_pass_emit_open(hali_insn_list_t *l, uint32_t line,
                                    uint16_t op, uint32_t total, uint32_t n,
                                    ...) {
  va_list ap;
  va_start(ap, n);
  hali_ir_insn_t *insn = emitv(l, line, op, total, n, ap);
  va_end(ap);
  return insn;
}

void hali_pass_set_operand(hali_insn_list_t *l, hali_ir_insn_t *insn,
                           uint32_t k, hali_ir_operand_t o) {
  if (!insn || k >= insn->operand_count) return;
  insn->operands[k] = o;
  if (bad_reg(o)) l->oom = true;
}

hali_ir_insn_t *hali_pass_copy_insn(hali_insn_list_t *l,
                                    const hali_ir_insn_t *src,
                                    const uint32_t *map) {
  if (l->oom) return NULL;
  hali_ir_insn_t *insn =
      hali_ir_block_add_insn(&l->b, src->op, src->operand_count);
  if (!insn) {
    l->oom = true;
    return NULL;
  }
  insn->aux = src->aux;
  insn->line = src->line;
  for (uint32_t i = 0; i < src->operand_count; ++i) {
    insn->operands[i] = src->operands[i];
    if (map && src->operands[i].kind == HALI_IR_REG)
      insn->operands[i].v = map[src->operands[i].v];
    if (bad_reg(insn->operands[i])) l->oom = true;
  }
  return l->oom ? NULL : insn;
}

void hali_pass_splice(hali_insn_list_t *l, hali_insn_list_t *src) {
  if (!l->oom && !hali_ir_block_append(&l->b, &src->b)) l->oom = true;
  l->oom |= src->oom;
  hali_pass_list_free(src);
}

void hali_pass_list_free(hali_insn_list_t *l) {
  hali_ir_block_clear(&l->b);
  memset(&l->b, 0, sizeof(l->b));
}

/* Brings |f|'s register-name index up to date (the registers added since
 * it was last used: registers are only ever appended).  False when it
 * could not (out of memory): the caller scans instead. */
static bool index_regs(hali_ir_func_t *f) {
  if (!f->reg_index) {
    f->reg_index = hali_calloc(1, sizeof(hali_strmap_t));
    if (!f->reg_index) return false;
    f->reg_index_count = 0;
  }
  if (f->reg_index_count > f->reg_count) {
    hali_strmap_clear(f->reg_index);
    f->reg_index_count = 0;
  }
  for (uint32_t r = f->reg_index_count; r < f->reg_count; ++r) {
    const char *n = f->reg_names[r];
    if (n && hali_strmap_insert(f->reg_index, n, strlen(n), r) ==
                 HALI_STRMAP_NONE) {
      hali_strmap_clear(f->reg_index);
      f->reg_index_count = 0;
      return false;
    }
    f->reg_index_count = r + 1;
  }
  return true;
}

/* Is a register of |f| named |n|?  Through the index (linear in the
 * registers over a pass, not per new register), else by a scan. */
static bool reg_named(hali_ir_func_t *f, const char *n) {
  if (index_regs(f))
    return hali_strmap_find(f->reg_index, n, strlen(n)) != HALI_STRMAP_NONE;
  for (uint32_t r = 0; r < f->reg_count; ++r)
    if (f->reg_names[r] && strcmp(f->reg_names[r], n) == 0) return true;
  return false;
}

uint32_t hali_pass_reg(hali_ir_func_t *f, hali_type_t type, const char *fmt,
                       ...) {
  if (!f->reg_names && f->reg_count) {
    /* A stripped module: keep it stripped (unnamed registers). */
    return hali_ir_func_add_reg(f, type, NULL, 0);
  }
  char base[96], name[112];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(base, sizeof(base), fmt, ap);
  va_end(ap);
  snprintf(name, sizeof(name), "%s", base);
  for (unsigned k = 1; f->reg_names && reg_named(f, name); ++k)
    snprintf(name, sizeof(name), "%s.%u", base, k);
  uint32_t r = hali_ir_func_add_reg(f, type, name, strlen(name));
  if (r != UINT32_MAX && f->reg_names) (void)index_regs(f);
  return r;
}

/* The block of |f| whose instruction |index| is |insn|, or
 * HALI_IR_NO_BLOCK (an instruction the pass is building). */
static uint32_t block_of(const hali_ir_func_t *f, const hali_ir_insn_t *insn,
                         uint32_t index) {
  for (uint32_t b = 0; b < f->block_count; ++b)
    if (index < f->blocks[b].insn_count && &f->blocks[b].insns[index] == insn)
      return b;
  return HALI_IR_NO_BLOCK;
}

hali_status_t hali_pass_error(const char *pass, const hali_ir_module_t *m,
                              const hali_ir_func_t *f,
                              const hali_ir_insn_t *insn, uint32_t index,
                              const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  hali_strbuf_t sb = {0};
  hali_ir_print_place(&sb, m, f, f && insn ? block_of(f, insn, index)
                                           : HALI_IR_NO_BLOCK,
                      insn, index, !f ? 0 : insn ? insn->line : f->line);
  char *where = hali_strbuf_take(&sb);
  hali_status_t s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                     "%s: %s: %s", pass, where ? where : "?",
                                     msg);
  hali_free(where);
  return s;
}

uint32_t hali_pass_element_size(uint32_t et) {
  uint32_t bits = hali_hal_element_type_bit_count(et);
  return bits % 8 ? 0 : bits / 8;
}

void hali_pass_func_reset(hali_ir_func_t *f) { hali_ir_func_clear(f); }

bool hali_pass_is_tensor_call(const hali_ir_module_t *m,
                              const hali_ir_insn_t *insn) {
  if (insn->op != HALI_OP_CALL || !insn->operand_count ||
      insn->operands[0].v >= m->func_count)
    return false;
  const hali_ir_func_t *c = &m->funcs[insn->operands[0].v];
  size_t n = strlen(c->name);
  return n > 6 && strcmp(c->name + n - 6, "$async") == 0 &&
         c->param_count == (uint32_t)insn->aux + 2;
}
