/* hali — tensor values across blocks (doc/passes.md, "Control flow"): the
 * control-flow analysis stream-to-hal runs before it lowers a tensor-level
 * function with more than one block.
 *
 * A tensor register that is written more than once, or read in a block
 * other than the one that writes it, is a *variable*: its value crosses
 * block edges in fixed registers (its buffer, a spare buffer, its dims and
 * size).  Inside a block every write of a variable gets a register of its
 * own (a *version*), so the single-block lowering sees single-assignment
 * values; at the end of a block whose successors read the variable, the
 * last version becomes the variable's value (hali_tcfg_t.fin).  Imports
 * and constants written once in a block that no loop passes through keep
 * their storage and are read across blocks as they are.
 */
#ifndef HALI_PASSES_TENSOR_CFG_H
#define HALI_PASSES_TENSOR_CFG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "vm/ir.h"

typedef struct hali_tcfg_s {
  bool multi;        /* more than one block: the machinery below is on */
  uint32_t nblocks;
  uint32_t nregs;    /* registers after renaming (arrays below) */
  uint32_t *order;   /* blocks in reverse post-order, unreachable ones last */
  uint8_t *is_var;   /* per register: a variable (its canonical register) */
  /* Per register: the op that wrote it, when written once (imports,
   * constants and global loads tell copy-on-write their storage class),
   * and that op's parameter or global operand. */
  uint16_t *def_op;
  uint32_t *def_arg;
  /* Per block b, [at[b], at[b + 1]) of the lists: */
  uint32_t *fin_at;
  uint32_t (*fin)[2]; /* (variable, its last version in b), read later */
  uint32_t *in_at, *in;   /* tensor registers read in b before b writes them */
  uint32_t *end_at, *end; /* tensor registers whose value outlives b */
} hali_tcfg_t;

/* Analyses tensor-level function |f| (after func-conversion): successors,
 * liveness and definite assignment of tensor registers (a read that some
 * path reaches before any write is an error naming the register, the
 * block and the instruction), then renames the writes of variables.  A
 * function of one block is left as it is (|out->multi| false). */
HALI_MUST_USE hali_status_t hali_tcfg_build(const hali_ir_module_t *m,
                                            hali_ir_func_t *f,
                                            hali_tcfg_t *out);
void hali_tcfg_free(hali_tcfg_t *cfg);

#endif /* HALI_PASSES_TENSOR_CFG_H */
