/* hali — the interpreter loop body, included twice by vm/interp.c:
 * once plain (HALI_INTERP_INSTRUMENTED 0, the fast path) and once with
 * every dispatch going through hali_vm_instrument (fuel, tracing).  Two
 * copies mean tracing compiled in costs nothing while it is off: the
 * plain copy has no hook and no flag test.  Define HALI_INTERP_NAME and
 * HALI_INTERP_INSTRUMENTED before including. */
static hali_status_t HALI_INTERP_NAME(hali_vm_stack_t *st, hali_value_t *results) {
#ifdef HALI_DISPATCH_GOTO
  static const void *const table[HALI_OP_INTERNAL_END] = {
#define OP(e, n, f, s, y) [HALI_OP_##e] = &&L_##e,
  /* Tensor-level ops never reach the interpreter (the verifier rejects
   * them after the passes). */
#define OP_TENSOR(e, n, f, s, y) [HALI_OP_##e] = &&L_unhandled,
#include "vm/ops.def"
#undef OP_TENSOR
#undef OP
#define HALI_X(name, base)                                                     \
  [HALI_OP_##name] = &&L_##name, [HALI_OP_##name##_NS] = &&L_##name##_NS,   \
  [HALI_OP_##name##_NSF] = &&L_##name##_NSF,
      HALI_FUSED_OPS(HALI_X)
#undef HALI_X
      [HALI_OP_CALL_IMPORT] = &&L_CALL_IMPORT,
      [HALI_OP_CALL_S] = &&L_CALL_S, [HALI_OP_RETURN_PLAIN] = &&L_RETURN_PLAIN,
      [HALI_OP_CALL_P] = &&L_CALL_P, [HALI_OP_CALL_P1] = &&L_CALL_P1,
      [HALI_OP_RETURN_PLAIN1] = &&L_RETURN_PLAIN1,
#define HALI_X(name, base) [HALI_OP_##name] = &&L_##name,
      HALI_DIVK_OPS(HALI_X)
#undef HALI_X
#define HALI_X(name, base) [HALI_OP_ADD_##name] = &&L_ADD_##name,
      HALI_FUSED_OPS(HALI_X)
#undef HALI_X
#define HALI_X(name, mul, add) [HALI_OP_##name] = &&L_##name,
      HALI_MUL_ADD_OPS(HALI_X)
#undef HALI_X
  };
#if HALI_INTERP_INSTRUMENTED
  /* Every op goes through L_instrumented first (fuel, tracing). */
#define vmdispatch() goto L_instrumented;
#define vmbreak goto L_instrumented
#else
  /* HALI_DEBUG_STEP: --enable-debug's checks (vm/interp.c); nothing
   * otherwise. */
#define vmdispatch()                                                           \
  HALI_DEBUG_STEP();                                                           \
  goto *table[pc->i.op];
#define vmbreak                                                                \
  do {                                                                         \
    HALI_DEBUG_STEP();                                                         \
    goto *table[pc->i.op];                                                     \
  } while (0)
#endif
#define vmcase(name) L_##name:
#define vmdefault L_unhandled: __attribute__((unused));
#else
#if HALI_INTERP_INSTRUMENTED
#define vmdispatch()                                                           \
  HALI_DEBUG_STEP();                                                           \
  status = hali_vm_instrument(st, pc);                                         \
  if (status) goto fail;                                                       \
  switch (pc->i.op)
#else
#define vmdispatch()                                                           \
  HALI_DEBUG_STEP();                                                           \
  switch (pc->i.op)
#endif
#define vmcase(name) case HALI_OP_##name:
#define vmbreak break
#define vmdefault default:
#endif

  hali_vm_frame_t *frame = &st->frames[st->depth - 1];
  const hali_cell_t *pc = frame->pc; /* the start, or where it suspended */
  hali_slot_t *regs = st->scalars + frame->scalar_base;
  hali_ref_t **refs = st->refs + frame->ref_base;
  /* The running frame's link table.  Calls stay inside their module, so
   * every frame this loop pushes has the same one. */
  const hali_vm_link_t *const link = frame->link;
  /* Calls from frames below this one need no room checks (CALL_BODY). */
  const hali_vm_frame_t *call_limit = hali_vm_call_limit(st, link->module);
  hali_status_t status = NULL;
#ifdef HALI_DEBUG
  hali_vm_debug_t hali_debug_prev = {NULL, NULL}; /* vm/interp.c */
#endif

#define A (pc->i.a)
#define B (pc->i.b)
#define C (pc->i.c)
#define D (pc[1].r[0])

/* Stores |v| in field F of slot |dst|; an integer field with one 8-byte
 * store (a 4-byte one zero-extended).  A whole-slot copy later (a call's
 * argument, a return value, select, mov) loads 8 bytes; after a 4-byte
 * store to the same slot the CPU cannot forward that store to the load
 * and waits for it to reach the cache (about a dozen cycles on each call
 * and return of fib).  The upper half of a 4-byte value's slot is never
 * read.  An f32 is stored as 4 bytes still: widening it would move it
 * through an integer register, which costs more on a chain of float ops
 * (f32 mul-add chain: +2 instructions and +17 % time per step) than the
 * rarer whole-slot copy of an f32 gains. */
#define SLOT_PUT(dst, F, v)                                                    \
  do {                                                                         \
    if (_Generic((dst).F, float: 1, default: 0)) {                             \
      (dst).F = (v);                                                           \
    } else {                                                                   \
      hali_slot_t put_;                                                        \
      put_.u64 = 0;                                                            \
      put_.F = (v);                                                            \
      (dst) = put_;                                                            \
    }                                                                          \
  } while (0)

/* r[A].F = EXPR over x = r[B], y = r[C]; one cell. */
#define BIN(name, F, EXPR)                                                     \
  vmcase(name) {                                                               \
    const hali_slot_t x = regs[B], y = regs[C];                                \
    SLOT_PUT(regs[A], F, (EXPR));                                              \
    pc += HALI_CODE_CELLS_FIXED(3, 0);                                         \
    vmbreak;                                                                   \
  }
#define UN(name, F, EXPR)                                                      \
  vmcase(name) {                                                               \
    const hali_slot_t x = regs[B];                                             \
    SLOT_PUT(regs[A], F, (EXPR));                                              \
    pc += HALI_CODE_CELLS_FIXED(2, 0);                                         \
    vmbreak;                                                                   \
  }
/* Division and remainder: the two failures the ISA defines. */
#define DIVOP(name, F, ZERO_CHECK, OVF_CHECK, EXPR)                            \
  vmcase(name) {                                                               \
    const hali_slot_t x = regs[B], y = regs[C];                                \
    if (HALI_UNLIKELY(ZERO_CHECK)) goto div_by_zero;                           \
    if (HALI_UNLIKELY(OVF_CHECK)) goto div_overflow;                           \
    SLOT_PUT(regs[A], F, (EXPR));                                              \
    pc += HALI_CODE_CELLS_FIXED(3, 0);                                         \
    vmbreak;                                                                   \
  }
/* Jumps to |target|, polling for an interrupt (cancellation): every loop
 * branches, so none can spin forever, and the poll is one compare. */
#define JUMP(target)                                                           \
  do {                                                                         \
    if (HALI_UNLIKELY(                                                         \
            atomic_load_explicit(&st->interrupt, memory_order_relaxed)))       \
      goto interrupted;                                                        \
    pc = (target);                                                             \
  } while (0)
/* A compare fused with the cond_br that consumes it. */
#define FUSED_BR_STORE(name, F, EXPR)                                          \
  vmcase(name) {                                                               \
    const hali_slot_t x = regs[B], y = regs[C];                                \
    const int32_t t = (EXPR);                                                  \
    SLOT_PUT(regs[A], i32, t);                                                 \
    JUMP(t ? pc[1].target : pc[2].target);                                     \
    vmbreak;                                                                   \
  }
/* The same when nothing but the branch reads the compare's result
 * (vm/encode.c proves it): no store.  The instrumented copy stores
 * anyway, so that a trace shows the result. */
#if HALI_INTERP_INSTRUMENTED
#define FUSED_BR_NOSTORE(name, F, EXPR) FUSED_BR_STORE(name, F, EXPR)
#else
#define FUSED_BR_NOSTORE(name, F, EXPR)                                        \
  vmcase(name) {                                                               \
    const hali_slot_t x = regs[B], y = regs[C];                                \
    JUMP((EXPR) ? pc[1].target : pc[2].target);                                \
    vmbreak;                                                                   \
  }
#endif
/* An add and the fused compare-and-branch after it (vm/code.h): |AF| the
 * add's field.  The compare reads the registers after the add wrote. */
#if HALI_INTERP_INSTRUMENTED
#define ADD_BR_STORE_RESULT(t) (regs[pc[1].r[2]].i32 = (t))
#else
#define ADD_BR_STORE_RESULT(t) ((void)0)
#endif
/* The interrupt is polled before the add: a yield resumes by running the
 * instruction again, which must not add twice.  The compare's first
 * operand is the sum (vm/encode.c swaps the compare when the IR has it
 * second), so it is compared from a machine register, not reloaded. */
#define ADD_FUSED_BR(name, AF, EXPR)                                           \
  vmcase(ADD_##name) {                                                         \
    if (HALI_UNLIKELY(                                                         \
            atomic_load_explicit(&st->interrupt, memory_order_relaxed)))       \
      goto interrupted;                                                        \
    hali_slot_t x;                                                             \
    x.AF = regs[B].AF + regs[C].AF;                                            \
    SLOT_PUT(regs[A], AF, x.AF);                                               \
    const hali_slot_t y = regs[pc[1].r[1]];                                    \
    const int32_t t = (EXPR);                                                  \
    ADD_BR_STORE_RESULT(t);                                                    \
    pc = t ? pc[2].target : pc[3].target;                                      \
    vmbreak;                                                                   \
  }
/* The no-store form whose targets both lie ahead (vm/encode.c): no poll.
 * The instrumented copy stores and polls, as the store form does. */
#if HALI_INTERP_INSTRUMENTED
#define FUSED_BR_FORWARD(name, F, EXPR) FUSED_BR_STORE(name, F, EXPR)
#else
#define FUSED_BR_FORWARD(name, F, EXPR)                                        \
  vmcase(name) {                                                               \
    const hali_slot_t x = regs[B], y = regs[C];                                \
    pc = (EXPR) ? pc[1].target : pc[2].target;                                 \
    vmbreak;                                                                   \
  }
#endif
#define FUSED_BR(name, F, EXPR, AF)                                            \
  FUSED_BR_STORE(name, F, EXPR) FUSED_BR_NOSTORE(name##_NS, F, EXPR)           \
  FUSED_BR_FORWARD(name##_NSF, F, EXPR)                                        \
  ADD_FUSED_BR(name, AF, EXPR)

#define INT_OPS(T, S, U, BITS, MIN)                                            \
  BIN(ADD_##T, U, x.U + y.U)                                                   \
  BIN(SUB_##T, U, x.U - y.U)                                                   \
  BIN(MUL_##T, U, x.U * y.U)                                                   \
  DIVOP(DIV_S_##T, S, y.S == 0, x.S == MIN && y.S == -1, x.S / y.S)            \
  DIVOP(DIV_U_##T, U, y.U == 0, 0, x.U / y.U)                                  \
  DIVOP(REM_S_##T, S, y.S == 0, x.S == MIN && y.S == -1, x.S % y.S)            \
  DIVOP(REM_U_##T, U, y.U == 0, 0, x.U % y.U)                                  \
  UN(NEG_##T, U, 0 - x.U)                                                      \
  UN(ABS_##T, S, abs##BITS(x.S))                                               \
  BIN(MIN_S_##T, S, x.S < y.S ? x.S : y.S)                                     \
  BIN(MIN_U_##T, U, x.U < y.U ? x.U : y.U)                                     \
  BIN(MAX_S_##T, S, x.S > y.S ? x.S : y.S)                                     \
  BIN(MAX_U_##T, U, x.U > y.U ? x.U : y.U)                                     \
  BIN(AND_##T, U, x.U & y.U)                                                   \
  BIN(OR_##T, U, x.U | y.U)                                                    \
  BIN(XOR_##T, U, x.U ^ y.U)                                                   \
  UN(NOT_##T, U, ~x.U)                                                         \
  BIN(SHL_##T, U, x.U << (y.U & (BITS - 1)))                                   \
  BIN(SHR_S_##T, S, x.S >> (y.U & (BITS - 1)))                                 \
  BIN(SHR_U_##T, U, x.U >> (y.U & (BITS - 1)))                                 \
  UN(CTLZ_##T, U, clz##BITS(x.U))                                              \
  BIN(EQ_##T, i32, x.U == y.U)                                                 \
  BIN(NE_##T, i32, x.U != y.U)                                                 \
  BIN(LT_S_##T, i32, x.S < y.S)                                                \
  BIN(LE_S_##T, i32, x.S <= y.S)                                               \
  BIN(GT_S_##T, i32, x.S > y.S)                                                \
  BIN(GE_S_##T, i32, x.S >= y.S)                                               \
  BIN(LT_U_##T, i32, x.U < y.U)                                                \
  BIN(LE_U_##T, i32, x.U <= y.U)                                               \
  BIN(GT_U_##T, i32, x.U > y.U)                                                \
  BIN(GE_U_##T, i32, x.U >= y.U)                                               \
  FUSED_BR(BR_EQ_##T, U, x.U == y.U, U)                                        \
  FUSED_BR(BR_NE_##T, U, x.U != y.U, U)                                        \
  FUSED_BR(BR_LT_S_##T, S, x.S < y.S, U)                                       \
  FUSED_BR(BR_LE_S_##T, S, x.S <= y.S, U)                                      \
  FUSED_BR(BR_GT_S_##T, S, x.S > y.S, U)                                       \
  FUSED_BR(BR_GE_S_##T, S, x.S >= y.S, U)                                      \
  FUSED_BR(BR_LT_U_##T, U, x.U < y.U, U)                                       \
  FUSED_BR(BR_LE_U_##T, U, x.U <= y.U, U)                                      \
  FUSED_BR(BR_GT_U_##T, U, x.U > y.U, U)                                       \
  FUSED_BR(BR_GE_U_##T, U, x.U >= y.U, U)                                      \
  vmcase(SELECT_##T) {                                                         \
    regs[A] = regs[B].i32 ? regs[C] : regs[D];                                 \
    pc += HALI_CODE_CELLS_FIXED(4, 0);                                         \
    vmbreak;                                                                   \
  }

#define FLOAT_OPS(T, F, SFX, MIN, MAX)                                         \
  BIN(ADD_##T, F, x.F + y.F)                                                   \
  BIN(SUB_##T, F, x.F - y.F)                                                   \
  BIN(MUL_##T, F, x.F * y.F)                                                   \
  BIN(DIV_##T, F, x.F / y.F)                                                   \
  UN(NEG_##T, F, -x.F)                                                         \
  UN(ABS_##T, F, fabs##SFX(x.F))                                               \
  BIN(MIN_##T, F, MIN(x.F, y.F))                                               \
  BIN(MAX_##T, F, MAX(x.F, y.F))                                               \
  UN(SQRT_##T, F, sqrt##SFX(x.F))                                              \
  UN(FLOOR_##T, F, floor##SFX(x.F))                                            \
  UN(CEIL_##T, F, ceil##SFX(x.F))                                              \
  vmcase(FMA_##T) {                                                            \
    SLOT_PUT(regs[A], F, fma##SFX(regs[B].F, regs[C].F, regs[D].F));           \
    pc += HALI_CODE_CELLS_FIXED(4, 0);                                         \
    vmbreak;                                                                   \
  }                                                                            \
  BIN(EQ_##T, i32, x.F == y.F)                                                 \
  BIN(NE_##T, i32, x.F != y.F)                                                 \
  BIN(LT_##T, i32, x.F < y.F)                                                  \
  BIN(LE_##T, i32, x.F <= y.F)                                                 \
  BIN(GT_##T, i32, x.F > y.F)                                                  \
  BIN(GE_##T, i32, x.F >= y.F)                                                 \
  vmcase(SELECT_##T) {                                                         \
    regs[A] = regs[B].i32 ? regs[C] : regs[D];                                 \
    pc += HALI_CODE_CELLS_FIXED(4, 0);                                         \
    vmbreak;                                                                   \
  }

/* The float ops of format 1.2 (vm/ops.def). */
#define FLOAT_OPS_1_2(T, F, SFX, ROUND_EVEN)                                   \
  BIN(REM_##T, F, fmod##SFX(x.F, y.F))                                         \
  UN(ROUND_##T, F, round##SFX(x.F))                                            \
  UN(ROUND_EVEN_##T, F, ROUND_EVEN(x.F))                                       \
  UN(ISNAN_##T, i32, x.F != x.F)                                               \
  BIN(NE_O_##T, i32, x.F < y.F || x.F > y.F)                                   \
  BIN(EQ_U_##T, i32, !(x.F < y.F || x.F > y.F))                                \
  BIN(LT_U_##T, i32, !(x.F >= y.F))                                            \
  BIN(LE_U_##T, i32, !(x.F > y.F))                                             \
  BIN(GT_U_##T, i32, !(x.F <= y.F))                                            \
  BIN(GE_U_##T, i32, !(x.F < y.F))                                             \
  UN(EXP_##T, F, exp##SFX(x.F))                                                \
  UN(EXP2_##T, F, exp2##SFX(x.F))                                              \
  UN(EXPM1_##T, F, expm1##SFX(x.F))                                            \
  UN(LOG_##T, F, log##SFX(x.F))                                                \
  UN(LOG10_##T, F, log10##SFX(x.F))                                            \
  UN(LOG1P_##T, F, log1p##SFX(x.F))                                            \
  UN(LOG2_##T, F, log2##SFX(x.F))                                              \
  BIN(POW_##T, F, pow##SFX(x.F, y.F))                                          \
  UN(RSQRT_##T, F, 1 / sqrt##SFX(x.F))                                         \
  UN(TANH_##T, F, tanh##SFX(x.F))                                              \
  UN(ATAN_##T, F, atan##SFX(x.F))                                              \
  BIN(ATAN2_##T, F, atan2##SFX(x.F, y.F))                                      \
  UN(SIN_##T, F, sin##SFX(x.F))                                                \
  UN(COS_##T, F, cos##SFX(x.F))                                                \
  UN(ERF_##T, F, erf##SFX(x.F))

#ifdef HALI_DISPATCH_GOTO
  vmdispatch();
  {
#else
  for (;;) {
    vmdispatch() {
#endif
    vmcase(CONST_I32) {
      SLOT_PUT(regs[A], i32, (int32_t)pc[1].imm);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(CONST_I64) {
      regs[A].i64 = pc[1].imm;
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(CONST_F32) {
      SLOT_PUT(regs[A], u32, (uint32_t)pc[1].imm);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(CONST_F64) {
      regs[A].i64 = pc[1].imm;
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(MOV_I32)
    vmcase(MOV_I64)
    vmcase(MOV_F32)
    vmcase(MOV_F64) {
      regs[A] = regs[B];
      pc += HALI_CODE_CELLS_FIXED(2, 0);
      vmbreak;
    }

    INT_OPS(I32, i32, u32, 32, INT32_MIN)
    INT_OPS(I64, i64, u64, 64, INT64_MIN)
    /* By a constant the encoder proved is neither 0 nor -1. */
    BIN(DIV_S_I32_K, i32, x.i32 / y.i32)
    BIN(DIV_U_I32_K, u32, x.u32 / y.u32)
    BIN(REM_S_I32_K, i32, x.i32 % y.i32)
    BIN(REM_U_I32_K, u32, x.u32 % y.u32)
    BIN(DIV_S_I64_K, i64, x.i64 / y.i64)
    BIN(DIV_U_I64_K, u64, x.u64 / y.u64)
    BIN(REM_S_I64_K, i64, x.i64 % y.i64)
    BIN(REM_U_I64_K, u64, x.u64 % y.u64)
    FLOAT_OPS(F32, f32, f, fmin32, fmax32)
    FLOAT_OPS(F64, f64, , fmin64, fmax64)

    /* A mul and the add that reads its product (vm/code.h): the product
     * is stored, then added from a register to the other operand, read
     * after the store (it may be the product's register).  The store
     * keeps the product a separate rounding: no fma contraction. */
#define MUL_ADD(name, F)                                                       \
  vmcase(name) {                                                               \
    hali_slot_t m;                                                             \
    m.F = regs[B].F * regs[C].F;                                               \
    SLOT_PUT(regs[A], F, m.F);                                                 \
    SLOT_PUT(regs[pc[1].r[0]], F, m.F + regs[pc[1].r[1]].F);                   \
    pc += 2;                                                                   \
    vmbreak;                                                                   \
  }
    MUL_ADD(MUL_ADD_I32, u32)
    MUL_ADD(MUL_ADD_I64, u64)
    MUL_ADD(MUL_ADD_F32, f32)
    MUL_ADD(MUL_ADD_F64, f64)
#undef MUL_ADD

    UN(TRUNC_I64_I32, u32, (uint32_t)x.u64)
    UN(EXT_S_I32_I64, i64, (int64_t)x.i32)
    UN(EXT_U_I32_I64, u64, (uint64_t)x.u32)
    UN(SITOFP_I32_F32, f32, (float)x.i32)
    UN(UITOFP_I32_F32, f32, (float)x.u32)
    UN(SITOFP_I32_F64, f64, (double)x.i32)
    UN(UITOFP_I32_F64, f64, (double)x.u32)
    UN(SITOFP_I64_F32, f32, (float)x.i64)
    UN(UITOFP_I64_F32, f32, (float)x.u64)
    UN(SITOFP_I64_F64, f64, (double)x.i64)
    UN(UITOFP_I64_F64, f64, (double)x.u64)
    UN(FPTOSI_F32_I32, i32, f32_to_i32(x.f32))
    UN(FPTOUI_F32_I32, u32, f32_to_u32(x.f32))
    UN(FPTOSI_F32_I64, i64, f32_to_i64(x.f32))
    UN(FPTOUI_F32_I64, u64, f32_to_u64(x.f32))
    UN(FPTOSI_F64_I32, i32, f64_to_i32(x.f64))
    UN(FPTOUI_F64_I32, u32, f64_to_u32(x.f64))
    UN(FPTOSI_F64_I64, i64, f64_to_i64(x.f64))
    UN(FPTOUI_F64_I64, u64, f64_to_u64(x.f64))
    UN(FPEXT_F32_F64, f64, (double)x.f32)
    UN(FPTRUNC_F64_F32, f32, (float)x.f64)
    /* Bitcasts: the slot already holds the bits. */
    UN(BITCAST_I32_F32, u32, x.u32)
    UN(BITCAST_F32_I32, u32, x.u32)
    UN(BITCAST_I64_F64, u64, x.u64)
    UN(BITCAST_F64_I64, u64, x.u64)

    /* Format 1.2. */
    vmcase(FMA_I32) {
      SLOT_PUT(regs[A], u32, regs[B].u32 * regs[C].u32 + regs[D].u32);
      pc += HALI_CODE_CELLS_FIXED(4, 0);
      vmbreak;
    }
    vmcase(FMA_I64) {
      regs[A].u64 = regs[B].u64 * regs[C].u64 + regs[D].u64;
      pc += HALI_CODE_CELLS_FIXED(4, 0);
      vmbreak;
    }
    UN(NZ_I32, i32, x.u32 != 0)
    UN(NZ_I64, i32, x.u64 != 0)
    UN(TRUNC_I32_I8, u32, x.u32 & 0xffu)
    UN(TRUNC_I32_I16, u32, x.u32 & 0xffffu)
    UN(TRUNC_I64_I8, u32, (uint32_t)(x.u64 & 0xffu))
    UN(TRUNC_I64_I16, u32, (uint32_t)(x.u64 & 0xffffu))
    UN(EXT_S_I8_I32, i32, (int32_t)sext(x.u32, 8))
    UN(EXT_U_I8_I32, u32, x.u32 & 0xffu)
    UN(EXT_S_I16_I32, i32, (int32_t)sext(x.u32, 16))
    UN(EXT_U_I16_I32, u32, x.u32 & 0xffffu)
    UN(EXT_S_I8_I64, i64, sext(x.u32, 8))
    UN(EXT_U_I8_I64, u64, x.u32 & 0xffu)
    UN(EXT_S_I16_I64, i64, sext(x.u32, 16))
    UN(EXT_U_I16_I64, u64, x.u32 & 0xffffu)
    FLOAT_OPS_1_2(F32, f32, f, round_even32)
    FLOAT_OPS_1_2(F64, f64, , round_even64)

    vmcase(BR) {
      JUMP(pc[1].target);
      vmbreak;
    }
    vmcase(COND_BR) {
      JUMP(regs[A].i32 ? pc[1].target : pc[2].target);
      vmbreak;
    }
    vmcase(SWITCH) {
      const uint32_t index = regs[A].u32;
      JUMP(index < B ? pc[2 + index].target : pc[1].target);
      vmbreak;
    }

    /* Calls.  Below |call_limit| the stack has room for the callee's
     * frame and banks (hali_vm_call_limit, vm/interp.c): one compare.  At
     * it, hali_vm_call_room makes room or fails (depth limit, memory). */
/* SCALARS: the parameters are scalars; PLAIN: the callee never reads a ref
 * window (vm/code.h, call.p), so the loop's stays the caller's; ONE: one
 * argument. */
#define CALL_BODY(SCALARS, PLAIN, ONE)                                         \
  {                                                                            \
    if (HALI_UNLIKELY(                                                         \
            atomic_load_explicit(&st->interrupt, memory_order_relaxed)))       \
      goto interrupted;                                                        \
    const hali_vm_func_t *callee = pc[1].ptr;                                  \
    const uint16_t *list = hali_cell_slots(&pc[2]);                            \
    if (HALI_UNLIKELY(frame >= call_limit)) {                                  \
      status = hali_vm_call_room(st, link->module, callee, &call_limit);       \
      if (status) goto fail;                                                   \
      /* The frames and the banks may have moved. */                           \
      frame = &st->frames[st->depth - 1];                                      \
      regs = st->scalars + frame->scalar_base;                                 \
      refs = st->refs + frame->ref_base;                                       \
    }                                                                          \
    frame->pc = pc;                                                            \
    /* The callee's banks start at this frame's tops. */                       \
    const uint64_t bases = frame->tops;                                        \
    ++frame; /* frames[depth]: the callee's */                                 \
    frame->fn = callee;                                                        \
    frame->bases = bases;                                                      \
    /* Two plain 64-bit stores: without the barrier GCC packs them into  \
     * one SSE store, four instructions longer. */                             \
    __asm__ volatile("" ::: "memory");                                         \
    frame->tops = bases + callee->bank_sizes;                                  \
    CALL_TRACE_RESET();                                                        \
    hali_slot_t *nregs = st->scalars + frame->scalar_base;                     \
    if (ONE) {                                                                 \
      nregs[0] = regs[list[0]];                                                \
    } else if (SCALARS) {                                                      \
      const uint32_t nargs = B;                                                \
      for (uint32_t i = 0; i < nargs; ++i) nregs[i] = regs[list[i]];           \
    } else {                                                                   \
      const uint32_t nargs = B;                                                \
      hali_ref_t **nrefs = st->refs + frame->ref_base;                         \
      const hali_type_t *types = callee->ir->reg_types;                        \
      for (uint32_t i = 0; i < nargs; ++i) {                                   \
        const uint16_t s = callee->slot[i];                                    \
        if (hali_type_is_ref(types[i])) {                                      \
          hali_ref_retain(refs[list[i]]);                                      \
          nrefs[s] = refs[list[i]];                                            \
        } else {                                                               \
          nregs[s] = regs[list[i]];                                            \
        }                                                                      \
      }                                                                        \
    }                                                                          \
    if (!PLAIN) refs = st->refs + frame->ref_base;                             \
    st->depth++;                                                               \
    regs = nregs;                                                              \
    pc = callee->code;                                                         \
    vmbreak;                                                                   \
  }
#if HALI_INTERP_INSTRUMENTED
#define CALL_TRACE_RESET() (frame->trace_pending = NULL)
#else
#define CALL_TRACE_RESET() ((void)0) /* only the tracing copy reads it */
#endif
    /* The parameters' slots are 0..nargs-1 of the scalar bank when every
     * one is a scalar (vm/encode.c numbers each bank in register order). */
    vmcase(CALL_P1) CALL_BODY(1, 1, 1)
    vmcase(CALL_P) CALL_BODY(1, 1, 0)
    vmcase(CALL_S) CALL_BODY(1, 0, 0)
    vmcase(CALL) CALL_BODY(0, 0, 0)
#undef CALL_BODY
#undef CALL_TRACE_RESET

    vmcase(CALL_IMPORT) {
      if (HALI_UNLIKELY(
              atomic_load_explicit(&st->interrupt, memory_order_relaxed)))
        goto interrupted;
      status = hali_vm_call_import(link, pc, regs, refs);
      if (HALI_UNLIKELY(status)) goto fail;
      pc += hali_code_cells(HALI_OP_CALL_IMPORT, (uint32_t)B + C);
      vmbreak;
    }

    vmcase(FIBER_SPAWN) {
      status = hali_vm_fiber_spawn_op(st, pc, regs, refs);
      if (HALI_UNLIKELY(status)) goto fail;
      pc += hali_code_cells(HALI_OP_FIBER_SPAWN, (uint32_t)B + C);
      vmbreak;
    }

    vmcase(FIBER_JOIN) {
      status = hali_vm_fiber_join_op(st, pc, regs, refs);
      if (HALI_UNLIKELY(status)) {
        if (!hali_status_is_deferred(status)) goto fail;
        /* DEFERRED: suspended in the await; resuming re-runs the join. */
        frame->pc = pc;
        st->suspended = true;
        return HALI_OK;
      }
      pc += hali_code_cells(HALI_OP_FIBER_JOIN, (uint32_t)B + C);
      vmbreak;
    }

    /* Returns.  The caller's frame is a call (only calls push frames):
     * its results go to the call's result slots, and the caller resumes
     * after the call (its length is cell0's a, vm/encode.c). */
    /* A plain function's (vm/encode.c): scalar results, no ref slots,
     * called by call.p (the loop's ref window is still the caller's). */
#define RETURN_PLAIN_BODY(ONE)                                                 \
  {                                                                            \
    if (HALI_UNLIKELY(frame == st->frames)) goto return_to_host;               \
    const uint16_t *list = hali_cell_slots(&pc[1]);                            \
    hali_vm_frame_t *caller = frame - 1;                                       \
    const hali_cell_t *call = caller->pc;                                      \
    const uint16_t *out = hali_cell_slots(&call[2]) + call->i.b;               \
    hali_slot_t *cregs = st->scalars + caller->scalar_base;                    \
    if (ONE) {                                                                 \
      cregs[out[0]] = regs[list[0]];                                           \
    } else {                                                                   \
      const uint32_t n = B;                                                    \
      for (uint32_t i = 0; i < n; ++i) cregs[out[i]] = regs[list[i]];          \
    }                                                                          \
    st->depth--;                                                               \
    frame = caller;                                                            \
    regs = cregs;                                                              \
    pc = call + call->i.a;                                                     \
    vmbreak;                                                                   \
  }
    vmcase(RETURN_PLAIN1) RETURN_PLAIN_BODY(1)
    vmcase(RETURN_PLAIN) RETURN_PLAIN_BODY(0)
#undef RETURN_PLAIN_BODY

    vmcase(RETURN) {
      if (HALI_UNLIKELY(st->depth == 1)) goto return_to_host;
      const hali_vm_func_t *fn = frame->fn;
      const uint16_t *list = hali_cell_slots(&pc[1]);
      const uint32_t n = B;
      hali_vm_frame_t *caller = frame - 1;
      const hali_cell_t *call = caller->pc;
      const uint16_t *out = hali_cell_slots(&call[2]) + call->i.b;
      hali_slot_t *cregs = st->scalars + caller->scalar_base;
      hali_ref_t **crefs = st->refs + caller->ref_base;
      if (HALI_LIKELY(fn->scalar_results_only)) {
        for (uint32_t i = 0; i < n; ++i) cregs[out[i]] = regs[list[i]];
      } else {
        const hali_type_t *types = fn->ir->results;
        for (uint32_t i = 0; i < n; ++i) {
          if (hali_type_is_ref(types[i])) {
            hali_ref_t *r = refs[list[i]];
            hali_ref_retain(r);
            hali_ref_release(crefs[out[i]]);
            crefs[out[i]] = r;
          } else {
            cregs[out[i]] = regs[list[i]];
          }
        }
      }
      for (uint32_t i = 0; i < fn->ref_count; ++i) {
        hali_ref_release(refs[i]);
        refs[i] = NULL;
      }
      st->depth--;
      frame = caller;
      regs = cregs;
      refs = crefs;
      pc = call + call->i.a;
      vmbreak;
    }

    vmcase(FAIL) {
      const hali_vm_string_t *msg = pc[1].ptr;
      int32_t code = regs[A].i32;
      if (code <= 0 || code >= HALI_STATUS_CODE_COUNT) code = HALI_STATUS_UNKNOWN;
      status = hali_status_make((hali_status_code_t)code, "%.*s",
                                (int)msg->length, msg->data);
      goto fail;
    }
    vmcase(ASSERT) {
      if (HALI_UNLIKELY(regs[A].i32 == 0)) {
        const hali_vm_string_t *msg = pc[1].ptr;
        status = hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                                  "assertion failed: %.*s", (int)msg->length,
                                  msg->data);
        goto fail;
      }
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }

    vmcase(COND_FAIL) {
      if (HALI_UNLIKELY(regs[A].i32 != 0)) {
        const hali_vm_string_t *msg = pc[1].ptr;
        int32_t code = regs[B].i32;
        if (code <= 0 || code >= HALI_STATUS_CODE_COUNT) code = HALI_STATUS_UNKNOWN;
        status = hali_status_make((hali_status_code_t)code, "%.*s",
                                  (int)msg->length, msg->data);
        goto fail;
      }
      pc += HALI_CODE_CELLS_FIXED(2, 1);
      vmbreak;
    }

    /* Globals: this context's storage (the link's), atomic per access. */
    vmcase(GLOBAL_LOAD_I32)
    vmcase(GLOBAL_LOAD_I64)
    vmcase(GLOBAL_LOAD_F32)
    vmcase(GLOBAL_LOAD_F64) {
      regs[A].u64 = atomic_load_explicit(&link->globals->bits[pc[1].imm],
                                         memory_order_relaxed);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(GLOBAL_STORE_I32) {
      atomic_store_explicit(&link->globals->bits[pc[1].imm],
                            (uint64_t)(int64_t)regs[A].i32,
                            memory_order_relaxed);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(GLOBAL_STORE_F32) {
      atomic_store_explicit(&link->globals->bits[pc[1].imm],
                            (uint64_t)regs[A].u32, memory_order_relaxed);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(GLOBAL_STORE_I64)
    vmcase(GLOBAL_STORE_F64) {
      atomic_store_explicit(&link->globals->bits[pc[1].imm], regs[A].u64,
                            memory_order_relaxed);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(GLOBAL_LOAD_REF) {
      hali_vm_globals_t *g = link->globals;
      pthread_mutex_lock(&g->lock);
      hali_ref_t *r = g->refs[pc[1].imm];
      hali_ref_retain(r);
      pthread_mutex_unlock(&g->lock);
      if (HALI_UNLIKELY(!r)) {
        /* Registers never hold null: a ref global is stored before it is
         * loaded (an initializer's job). */
        status = hali_status_make(
            HALI_STATUS_FAILED_PRECONDITION,
            "global.load.ref: global @%s holds no ref yet (store it first; "
            "the context's initializers set up tensor globals and constants)",
            link->module->ir->globals[pc[1].imm].name);
        goto fail;
      }
      hali_ref_t *old = refs[A];
      refs[A] = r;
      hali_ref_release(old);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }
    vmcase(MOV_REF) {
      hali_ref_t *r = refs[B], *old = refs[A];
      hali_ref_retain(r);
      refs[A] = r;
      hali_ref_release(old);
      pc += HALI_CODE_CELLS_FIXED(2, 0);
      vmbreak;
    }
    vmcase(GLOBAL_STORE_REF) {
      hali_vm_globals_t *g = link->globals;
      hali_ref_t *r = refs[A];
      if (HALI_UNLIKELY(link == link->module->unlinked)) {
        /* The module's own globals would hold refs that may hold the
         * module (buffers over its rodata): a cycle nothing breaks. */
        status = hali_status_make(
            HALI_STATUS_FAILED_PRECONDITION,
            "global.store.ref: module @%s runs unlinked (hali_vm_invoke): "
            "ref globals need a link of their own (hali_vm_link_create, or a "
            "context)",
            link->module->ir->name);
        goto fail;
      }
      hali_ref_retain(r);
      pthread_mutex_lock(&g->lock);
      hali_ref_t *old = g->refs[pc[1].imm];
      g->refs[pc[1].imm] = r;
      pthread_mutex_unlock(&g->lock);
      hali_ref_release(old);
      pc += HALI_CODE_CELLS_FIXED(1, 1);
      vmbreak;
    }

    /* Scalar buffer access: bounds, permissions and commitment checked
     * inline against the buffer's fields (hal/buffer_impl.h). */
    /* Inline checks not passed: the HAL's checks say why, or (a buffer
     * under validation) the HAL reports the access and it is made there. */
#define SCALAR_SLOW()                                                          \
  {                                                                            \
    status = hali_vm_scalar_access_slow(pc, regs, refs);                       \
    if (HALI_UNLIKELY(status)) goto scalar_access_failed;                      \
    pc += HALI_CODE_CELLS_FIXED(3, 0);                                         \
    vmbreak;                                                                   \
  }
#define LOAD(name, T, F)                                                       \
  vmcase(name) {                                                               \
    const uint8_t *p = hali_hal_buffer_scalar_fast(                            \
        (const hali_hal_buffer_t *)refs[B], regs[C].i64, sizeof(T),            \
        HALI_HAL_SCALAR_LOAD);                                                 \
    if (HALI_UNLIKELY(!p)) SCALAR_SLOW();                                      \
    T v;                                                                       \
    memcpy(&v, p, sizeof(T));                                                  \
    SLOT_PUT(regs[A], F, v);                                                   \
    pc += HALI_CODE_CELLS_FIXED(3, 0);                                         \
    vmbreak;                                                                   \
  }
#define STORE(name, T, F)                                                      \
  vmcase(name) {                                                               \
    uint8_t *p = hali_hal_buffer_scalar_fast(                                  \
        (const hali_hal_buffer_t *)refs[A], regs[B].i64, sizeof(T),            \
        HALI_HAL_SCALAR_STORE);                                                \
    if (HALI_UNLIKELY(!p)) SCALAR_SLOW();                                      \
    const T v = (T)regs[C].F;                                                  \
    memcpy(p, &v, sizeof(T));                                                  \
    pc += HALI_CODE_CELLS_FIXED(3, 0);                                         \
    vmbreak;                                                                   \
  }
    LOAD(HAL_BUFFER_LOAD_I8_S, int8_t, i32)
    LOAD(HAL_BUFFER_LOAD_I8_U, uint8_t, i32)
    LOAD(HAL_BUFFER_LOAD_I16_S, int16_t, i32)
    LOAD(HAL_BUFFER_LOAD_I16_U, uint16_t, i32)
    LOAD(HAL_BUFFER_LOAD_I32, int32_t, i32)
    LOAD(HAL_BUFFER_LOAD_I64, int64_t, i64)
    LOAD(HAL_BUFFER_LOAD_F32, float, f32)
    LOAD(HAL_BUFFER_LOAD_F64, double, f64)
    STORE(HAL_BUFFER_STORE_I8, uint8_t, u32)
    STORE(HAL_BUFFER_STORE_I16, uint16_t, u32)
    STORE(HAL_BUFFER_STORE_I32, uint32_t, u32)
    STORE(HAL_BUFFER_STORE_I64, uint64_t, u64)
    STORE(HAL_BUFFER_STORE_F32, float, f32)
    STORE(HAL_BUFFER_STORE_F64, double, f64)
#undef LOAD
#undef STORE
#undef SCALAR_SLOW

    /* The HAL family: one out-of-line handler.  It advances pc itself (the
     * length of these instructions varies) and leaves pc at the instruction
     * when it fails, for the backtrace. */
#define OP(e, n, f, sig, syn) vmcase(e)
#include "vm/ops_hal.def"
#include "vm/ops_hal_channel.def"
#include "vm/ops_hal_flow.def"
#undef OP
    {
      /* Through a copy: taking pc's address would keep it in memory for
       * the whole loop (one store and one load per instruction). */
      const hali_cell_t *next = pc;
      status = hali_vm_hal_op(st, &next, regs, refs);
      pc = next;
      if (HALI_UNLIKELY(status)) {
        if (!hali_status_is_deferred(status)) goto fail;
        /* DEFERRED: suspend (the static status needs no freeing); resuming
         * re-executes this instruction.  It never leaves the interpreter. */
        frame->pc = pc;
        st->suspended = true;
        return HALI_OK;
      }
      vmbreak;
    }

    vmdefault {
      /* Unreachable: the verifier admits only known opcodes. */
      status = hali_status_make(HALI_STATUS_INTERNAL,
                                "unhandled opcode %u (verifier bug)",
                                pc->i.op);
      goto fail;
    }
#ifndef HALI_DISPATCH_GOTO
    }
#endif
  }

#if defined(HALI_DISPATCH_GOTO) && HALI_INTERP_INSTRUMENTED
L_instrumented:
  HALI_DEBUG_STEP();
  status = hali_vm_instrument(st, pc);
  if (HALI_UNLIKELY(status)) goto fail;
  goto *table[pc->i.op];
#endif
interrupted:
  {
    /* The flag was read relaxed: this acquire pairs with the canceller's
     * stores (code first, then the flag). */
    hali_status_code_t code =
        atomic_load_explicit(&st->interrupt_code, memory_order_acquire);
    if (code == HALI_VM_INTERRUPT_YIELD) {
      /* Preempted at a call or branch that has not happened yet: resuming
       * runs it. */
      atomic_store_explicit(&st->interrupt_code, HALI_STATUS_OK,
                            memory_order_relaxed);
      atomic_store_explicit(&st->interrupt, false, memory_order_relaxed);
      frame->pc = pc;
      st->suspended = true;
      st->yielded = true;
      return HALI_OK;
    }
    status = hali_status_make(code ? code : HALI_STATUS_CANCELLED,
                              "invocation %s",
                              code == HALI_STATUS_DEADLINE_EXCEEDED
                                  ? "exceeded its deadline"
                                  : "cancelled");
  }
  goto fail;

return_to_host:
  {
    /* The invocation's own frame (either return op): results go to the
     * host. */
    const hali_vm_func_t *fn = frame->fn;
    const uint16_t *list = hali_cell_slots(&pc[1]);
    const uint32_t n = B;
    for (uint32_t i = 0; i < n; ++i) {
      hali_value_t *v = &results[i];
      switch (v->type) {
      case HALI_TYPE_I32: v->i32 = regs[list[i]].i32; break;
      case HALI_TYPE_I64: v->i64 = regs[list[i]].i64; break;
      case HALI_TYPE_F32: v->f32 = regs[list[i]].f32; break;
      case HALI_TYPE_F64: v->f64 = regs[list[i]].f64; break;
      default:
        v->ref = refs[list[i]];
        hali_ref_retain(v->ref);
      }
    }
    for (uint32_t i = 0; i < fn->ref_count; ++i) {
      hali_ref_release(refs[i]);
      refs[i] = NULL;
    }
    st->depth = 0;
    return HALI_OK;
  }

scalar_access_failed:
  /* An inline load or store's checks did not pass and the HAL's did not
   * either: the status says which failed. */
  goto fail;
div_by_zero:
  status = hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: integer division by zero",
                            hali_op_info(pc->i.op)->name);
  goto fail;
div_overflow:
  status = hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: signed overflow (INT_MIN divided by -1)",
                            hali_op_info(pc->i.op)->name);
  goto fail;
fail:
  return hali_vm_fail_at(st, pc, status);
}

#undef vmdispatch
#undef vmcase
#undef vmbreak
#undef vmdefault
#undef A
#undef B
#undef C
#undef D
#undef BIN
#undef UN
#undef DIVOP
#undef FUSED_BR
#undef FUSED_BR_STORE
#undef FUSED_BR_NOSTORE
#undef FUSED_BR_FORWARD
#undef ADD_FUSED_BR
#undef ADD_BR_STORE_RESULT
#undef JUMP
#undef SLOT_PUT
#undef INT_OPS
#undef FLOAT_OPS
#undef FLOAT_OPS_1_2

