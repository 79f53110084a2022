/* hali — helpers shared by the passes: building instructions, naming new
 * registers, reporting errors with function, instruction and line. */
#ifndef HALI_PASSES_PASS_UTIL_H
#define HALI_PASSES_PASS_UTIL_H

#include <stdarg.h>
#include <stdbool.h>

#include "hali/base.h"
#include "vm/ir.h"

/* Operand constructors for hali_pass_emit. */
static inline hali_ir_operand_t hali_pr(uint32_t r) {
  hali_ir_operand_t o = {.kind = HALI_IR_REG, .v = r};
  return o;
}
/* An immediate of |m| (one that needs its pool and could not get it names
 * index UINT32_MAX: OOM, as below). */
static inline hali_ir_operand_t hali_pk(hali_ir_module_t *m, int64_t v) {
  return hali_ir_imm_operand(m, v);
}
static inline hali_ir_operand_t hali_pref(uint8_t kind, uint32_t v) {
  hali_ir_operand_t o = {.kind = kind, .v = v};
  return o;
}

/* A growable instruction list: a block being rebuilt.  Errors are sticky
 * (|oom|), checked once at the end. */
typedef struct hali_insn_list_s {
  hali_ir_block_t b; /* its instructions and operand chunks (no name) */
  bool oom;
} hali_insn_list_t;

/* Appends |op| with |n| operands (exactly |n| hali_ir_operand_t varargs);
 * returns the instruction (or NULL on OOM, recorded in |l|).  An operand
 * naming index UINT32_MAX (what hali_pass_reg and hali_ir_module_intern
 * return when they run out of memory) is treated as OOM too, so no
 * instruction holds one. */
hali_ir_insn_t *hali_pass_emit(hali_insn_list_t *l, uint32_t line, uint16_t op,
                               uint32_t n, ...);
/* The same with |total| operands of which the first |n| come from the
 * varargs; the caller fills the rest (a variadic tail) through the
 * returned instruction, with hali_pass_set_operand. */
hali_ir_insn_t *hali_pass_emit_open(hali_insn_list_t *l, uint32_t line,
                                    uint16_t op, uint32_t total, uint32_t n,
                                    ...);
/* insn->operands[k] = |o|, with emit's check on registers; a NULL |insn|
 * (an emit that failed) is ignored. */
void hali_pass_set_operand(hali_insn_list_t *l, hali_ir_insn_t *insn,
                           uint32_t k, hali_ir_operand_t o);
/* Appends a copy of |insn|, operands remapped through |map| when non-NULL. */
hali_ir_insn_t *hali_pass_copy_insn(hali_insn_list_t *l,
                                    const hali_ir_insn_t *insn,
                                    const uint32_t *map);
/* Appends every instruction of |src| (moving them) and empties |src|. */
void hali_pass_splice(hali_insn_list_t *l, hali_insn_list_t *src);
void hali_pass_list_free(hali_insn_list_t *l);

/* Adds a register of |type| named |base| (made unique with .1, .2 ...). */
uint32_t hali_pass_reg(hali_ir_func_t *f, hali_type_t type, const char *fmt,
                       ...) HALI_PRINTF(3, 4);

/* "PASS: @f, block ^b, instruction N (op), file:line: message"
 * (vm/ir.h hali_ir_print_place), |index| being |insn|'s position in its
 * block; the block is named when |insn| is that instruction of one of
 * |f|'s blocks.  Without |insn|, "PASS: @f, file:line: message" (the
 * function's line); without |f|, "PASS: module @m: message". */
hali_status_t hali_pass_error(const char *pass, const hali_ir_module_t *m,
                              const hali_ir_func_t *f,
                              const hali_ir_insn_t *insn, uint32_t index,
                              const char *fmt, ...) HALI_PRINTF(6, 7);

/* Byte size of one element of HAL element type |et| (0 if not whole bytes). */
uint32_t hali_pass_element_size(uint32_t et);

/* Frees everything |f| owns except its name and line, and zeroes it. */
void hali_pass_func_reset(hali_ir_func_t *f);

/* Is |insn| a call between tensor-level functions, as func-conversion
 * leaves it: `call @c$async(args...)` with the callee's arguments only
 * (the two fences missing), for stream-to-hal to complete? */
bool hali_pass_is_tensor_call(const hali_ir_module_t *m,
                              const hali_ir_insn_t *insn);

#endif /* HALI_PASSES_PASS_UTIL_H */
