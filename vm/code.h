/* hali — the interpreter's internal code (what the encoder produces).
 *
 * Pre-decoded, in 8-byte cells.  The in-memory form is private and free to
 * change for speed; the stable form is .hbc.
 *
 *   cell 0:  | op:16 | a:16 | b:16 | c:16 |   opcode + first 3 registers
 *   cell 1:  | r0:16 | r1:16 | r2:16 | r3:16 | only if the op has > 3
 *                                               register operands
 *   then one cell per non-register operand, in signature order:
 *            immediate (i32 sign-extended, f32 bits in the low half),
 *            block target (pointer to the target's first cell),
 *            string (pointer to a hali_vm_string_t),
 *            function (pointer to a hali_vm_func_t)
 *
 * Register fields hold slot numbers in the register's bank (scalars or
 * refs), not IR register numbers.  Variadic ops:
 *
 *   switch:  cell0 {op, index, n}; cell1 default; cells 2..n+1 targets
 *   call:    cell0 {op, cells, nargs, nresults}; cell1 callee;
 *            (cells: the instruction's length, for return; call.import,
 *            fiber.spawn and fiber.join leave it 0)
 *            then the argument slots and result slots, 4 per cell
 *   return:  cell0 {op, -, nvalues}; then the value slots, 4 per cell
 *   others with a register tail: the generic cells, then one cell holding
 *            the tail's length, then its slots, 4 per cell
 *
 * Internal ops (fused compare-and-branch, see vm/encode.c) follow the
 * generic layout of the compare they replace plus two block cells.
 */
#ifndef HALI_VM_CODE_H
#define HALI_VM_CODE_H

#include <stdbool.h>
#include <stdint.h>

typedef union hali_cell_u {
  struct {
    uint16_t op, a, b, c;
  } i;
  uint16_t r[4];
  int64_t imm;
  const union hali_cell_u *target;
  const void *ptr;
} hali_cell_t;

_Static_assert(sizeof(hali_cell_t) == 8, "cells are 8 bytes");

/* The register slots that start at cell |c| and run on through the cells
 * after it (4 per cell): a list longer than one cell's r[4], reached
 * without indexing past that array. */
static inline const uint16_t *hali_cell_slots(const hali_cell_t *c) {
  return (const uint16_t *)(const void *)c;
}

/* A scalar register slot: every scalar type in 64 bits, narrow types in
 * the low bytes. */
typedef union hali_slot_u {
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f32;
  double f64;
} hali_slot_t;

_Static_assert(sizeof(hali_slot_t) == 8, "slots are 8 bytes");

typedef struct hali_vm_string_s {
  uint32_t length;
  const char *data;
} hali_vm_string_t;

/* Fused compare-and-branch ops: the encoder replaces `%c = CMP %a, %b`
 * directly followed by `cond_br %c, ^t, ^f` with one internal op that
 * writes %c and branches (cell0 {op, c, a, b}; cell1 ^t; cell2 ^f).
 * FUSED(internal name, the compare it fuses) */
#define HALI_FUSED_OPS(FUSED)                                                  \
  FUSED(BR_EQ_I32, EQ_I32) FUSED(BR_NE_I32, NE_I32)                            \
  FUSED(BR_LT_S_I32, LT_S_I32) FUSED(BR_LE_S_I32, LE_S_I32)                    \
  FUSED(BR_GT_S_I32, GT_S_I32) FUSED(BR_GE_S_I32, GE_S_I32)                    \
  FUSED(BR_LT_U_I32, LT_U_I32) FUSED(BR_LE_U_I32, LE_U_I32)                    \
  FUSED(BR_GT_U_I32, GT_U_I32) FUSED(BR_GE_U_I32, GE_U_I32)                    \
  FUSED(BR_EQ_I64, EQ_I64) FUSED(BR_NE_I64, NE_I64)                            \
  FUSED(BR_LT_S_I64, LT_S_I64) FUSED(BR_LE_S_I64, LE_S_I64)                    \
  FUSED(BR_GT_S_I64, GT_S_I64) FUSED(BR_GE_S_I64, GE_S_I64)                    \
  FUSED(BR_LT_U_I64, LT_U_I64) FUSED(BR_LE_U_I64, LE_U_I64)                    \
  FUSED(BR_GT_U_I64, GT_U_I64) FUSED(BR_GE_U_I64, GE_U_I64)

/* Division and remainder by a register the encoder proved holds one
 * constant that is neither 0 nor -1 (written once, by a const; see
 * vm/encode.c): the same layout as the op, without its two checks.
 * DIVK(internal name, the op it replaces) */
#define HALI_DIVK_OPS(DIVK)                                                    \
  DIVK(DIV_S_I32_K, DIV_S_I32) DIVK(DIV_U_I32_K, DIV_U_I32)                    \
  DIVK(REM_S_I32_K, REM_S_I32) DIVK(REM_U_I32_K, REM_U_I32)                    \
  DIVK(DIV_S_I64_K, DIV_S_I64) DIVK(DIV_U_I64_K, DIV_U_I64)                    \
  DIVK(REM_S_I64_K, REM_S_I64) DIVK(REM_U_I64_K, REM_U_I64)

/* Multiply-add: `%t = mul %a, %b` directly followed by `%d = add %p, %q`
 * that reads the product first (%p is %t; for integers, whose add
 * commutes, %q may be %t instead and %p is then the other operand), as
 * one op: cell0 {op, t, a, b}; cell1 {d, o} (o the add's other operand).
 * Both results are stored (%t may be read later); the add takes the
 * product from a machine register.  The float ones round twice, as the
 * mul and the add do apart (not an fma).
 * MULADD(internal name, the mul, the add) */
#define HALI_MUL_ADD_OPS(MULADD)                                               \
  MULADD(MUL_ADD_I32, MUL_I32, ADD_I32) MULADD(MUL_ADD_I64, MUL_I64, ADD_I64)  \
  MULADD(MUL_ADD_F32, MUL_F32, ADD_F32) MULADD(MUL_ADD_F64, MUL_F64, ADD_F64)

#include "vm/ops.h"

enum {
  HALI_OP_INTERNAL_FIRST_ = HALI_OP_COUNT - 1,
#define HALI_X(name, base) HALI_OP_##name,
  HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  /* A call whose callee is a host import (same layout as call). */
  HALI_OP_CALL_IMPORT,
  /* The fused compare-and-branch ops again, for a compare whose result
   * nothing but its branch reads: the same layout, no store (cell0's
   * register a is kept for the tracing copy of the loop, which stores). */
#define HALI_X(name, base) HALI_OP_##name##_NS,
  HALI_FUSED_OPS(HALI_X)
#undef HALI_X
#define HALI_X(name, base) HALI_OP_##name,
  HALI_DIVK_OPS(HALI_X)
#undef HALI_X
  /* Counted loops: `%d = add %x, %y` directly followed by a fused compare-
   * and-branch whose result only the branch reads, as one op:
   * cell0 {op, d, x, y}; cell1 {p, q, c} (the compare's operands and its
   * result, which only the tracing copy of the loop stores); cell2 ^t;
   * cell3 ^f.  The add's width is the compare's, and p is d: the compare
   * reads the sum first (the encoder swaps a compare that reads it
   * second, and fuses no add whose sum the compare does not read). */
#define HALI_X(name, base) HALI_OP_ADD_##name,
  HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  /* A multiply and the add that reads its product (HALI_MUL_ADD_OPS). */
#define HALI_X(name, mul, add) HALI_OP_##name,
  HALI_MUL_ADD_OPS(HALI_X)
#undef HALI_X
  /* A call of a bytecode function whose parameters are all scalars: the
   * layout of call, and no test of the parameters' kinds. */
  HALI_OP_CALL_S,
  /* The return of a function with scalar results only and no ref slots
   * (hali_vm_func_t.plain_return): the layout of return, and nothing to
   * release or test.  Such a function ("plain") never reads its frame's
   * ref bank, so the calls into it (call.p) leave the loop's ref window
   * at the caller's and its returns do not restore it. */
  HALI_OP_RETURN_PLAIN,
  /* A call of a plain function (above): call.s without a ref window. */
  HALI_OP_CALL_P,
  /* call.p and return.plain with exactly one argument / one result. */
  HALI_OP_CALL_P1,
  HALI_OP_RETURN_PLAIN1,
  /* The no-store fused compare-and-branch ops again, for a branch whose
   * two targets both lie after it: no interrupt poll (only a backward
   * branch or a call can repeat code, and those poll). */
#define HALI_X(name, base) HALI_OP_##name##_NSF,
  HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  HALI_OP_INTERNAL_END
};

/* The public op an internal op stands for when their layouts agree (a
 * DIVK op, the call and return forms), else |op| itself. */
static inline uint32_t hali_code_same_layout_op(uint32_t op) {
  switch (op) {
  case HALI_OP_CALL_S:
  case HALI_OP_CALL_P:
  case HALI_OP_CALL_P1:
    return HALI_OP_CALL;
  case HALI_OP_RETURN_PLAIN:
  case HALI_OP_RETURN_PLAIN1:
    return HALI_OP_RETURN;
#define HALI_X(name, base)                                                     \
  case HALI_OP_##name:                                                         \
    return HALI_OP_##base;
    HALI_DIVK_OPS(HALI_X)
#undef HALI_X
  default:
    return op;
  }
}

/* Is |op| an add fused with a compare-and-branch (HALI_OP_ADD_BR_*)? */
static inline bool hali_code_is_add_br(uint32_t op) {
  return op >= HALI_OP_ADD_BR_EQ_I32 && op <= HALI_OP_ADD_BR_GE_U_I64;
}

/* Is |op| a multiply fused with the add after it (HALI_OP_MUL_ADD_*)? */
static inline bool hali_code_is_mul_add(uint32_t op) {
  return op >= HALI_OP_MUL_ADD_I32 && op <= HALI_OP_MUL_ADD_F64;
}

/* Number of cells for |n| packed 16-bit slots. */
#define HALI_CELLS_FOR_SLOTS(n) (((n) + 3u) / 4u)

/* The cells of an instruction with |regs| register operands (packed from
 * cell 0), |other| one-cell operands and no tail: a constant expression,
 * for code that knows its op's signature at compile time (the
 * interpreter's fixed-size ops).  hali_code_cells uses it for every op
 * without a special layout. */
#define HALI_CODE_CELLS_FIXED(regs, other)                                     \
  (1u + ((regs) > 3u ? HALI_CELLS_FOR_SLOTS((regs) - 3u) : 0u) + (other))

/* The number of cells an instruction of |op| takes, |tail| being the
 * number of its operands past the op's fixed signature (switch targets,
 * call / fiber.spawn arguments and results, return values, a register
 * tail; 0 for the rest): the one place that computes it from the layouts
 * drawn above.  The encoder sizes and lays out code with it; the
 * interpreter's decoders step over an instruction with it.  |op| may be
 * an internal op (a fused compare-and-branch, call.import). */
static inline uint32_t hali_code_cells(uint32_t op, uint32_t tail) {
  switch (op) {
  case HALI_OP_SWITCH: /* cell0, default, one cell per target */
    return 2 + tail;
  case HALI_OP_CALL:
  case HALI_OP_CALL_S:
  case HALI_OP_CALL_P:
  case HALI_OP_CALL_P1:
  case HALI_OP_CALL_IMPORT:
  case HALI_OP_FIBER_SPAWN: /* cell0, callee, argument and result slots */
  case HALI_OP_FIBER_JOIN:
    return 2 + HALI_CELLS_FOR_SLOTS(tail);
  case HALI_OP_RETURN: /* cell0, value slots */
  case HALI_OP_RETURN_PLAIN:
  case HALI_OP_RETURN_PLAIN1:
    return 1 + HALI_CELLS_FOR_SLOTS(tail);
  default:
    break;
  }
  op = hali_code_same_layout_op(op);
  if (hali_code_is_add_br(op)) /* the add, the compare's slots, targets */
    return 4;
  if (hali_code_is_mul_add(op)) /* the mul, the add's slots */
    return 2;
  if (op >= HALI_OP_COUNT) /* fused: the compare's cell and two targets */
    return 3;
  const hali_op_info_t *info = hali_op_info(op);
  uint32_t n = HALI_CODE_CELLS_FIXED((uint32_t)info->reg_count,
                                     (uint32_t)info->operand_count -
                                         info->reg_count);
  if (info->tail) /* count cell + packed slots */
    n += 1 + HALI_CELLS_FOR_SLOTS(tail);
  return n;
}

#endif /* HALI_VM_CODE_H */
