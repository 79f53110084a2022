/* hali — what the two verifiers share (private to vm/verify*.c): the
 * context naming where a check stands, the error builder and the register
 * check.  vm/verify_structure.c checks what the reader and the assembler
 * produce, before the passes; vm/verify.c proves types and dataflow after
 * them. */
#ifndef HALI_VM_VERIFY_INT_H
#define HALI_VM_VERIFY_INT_H

#include "vm/ir.h"
#include "vm/strmap.h"

typedef struct {
  const hali_ir_module_t *m;
  const hali_ir_func_t *f;
  uint32_t block, index;
  const hali_ir_insn_t *insn;
  const char *mode; /* "verify" or "verify structure" */
  /* Scratch index for the uniqueness checks (names of one function, then
   * of the module's functions), so that they are linear. */
  hali_strmap_t *names;
  /* Scratch reused by every function's definite-assignment check (so that
   * a module of many small functions does not allocate per function). */
  struct verify_scratch_s *scratch;
} vctx_t;

/* An INVALID_ARGUMENT status "<mode>: <where>: <message>", where names the
 * function, block, instruction and source line |v| stands at. */
HALI_MUST_USE hali_status_t hali_verr(const vctx_t *v, const char *fmt, ...)
    HALI_PRINTF(2, 3);

/* Operand |i| is a register in range whose type is |want|: any ref for
 * HALI_TYPE_ANY_REF, any type at all for HALI_TYPE_NONE. */
HALI_MUST_USE hali_status_t hali_verify_check_reg(const vctx_t *v, uint32_t i,
                                                  hali_type_t want);

/* The module's globals: names valid and unique, types, flags and initial
 * values consistent; tensor globals only when |tensor_ok| (before the
 * passes).  Functions marked as initializers take and return nothing. */
HALI_MUST_USE hali_status_t hali_verify_globals(const vctx_t *v,
                                                bool tensor_ok);

/* Parts of the structural check (vm/verify_structure.c), for
 * hali_ir_verify_fused: what it proves of the module outside functions;
 * of |v->f| outside its body (its register names too when |names|); and
 * of block |b| of |v->f|.  hali_ir_verify_structure is these in turn. */
HALI_MUST_USE hali_status_t hali_verify_s_module(vctx_t *v);
HALI_MUST_USE hali_status_t hali_verify_s_header(vctx_t *v, bool names);
HALI_MUST_USE hali_status_t hali_verify_s_block(vctx_t *v, uint32_t b);

#endif /* HALI_VM_VERIFY_INT_H */
