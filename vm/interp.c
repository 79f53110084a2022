/* hali — the interpreter loop.
 *
 * Trust what the verifier proved: no operand, type, range or definedness
 * checks happen here (an unknown opcode goes to one label the verifier
 * makes unreachable).  The only run-time checks are the ones the ISA
 * defines as failures (integer division by zero and overflow, fail,
 * assert) and resource limits (call depth, stack growth).
 *
 * One body serves two dispatch strategies: with labels-as-values each
 * vmbreak jumps straight to the next handler through a table indexed by
 * the next opcode; otherwise a portable switch in a loop.
 *
 * Register windows: a call places the callee's banks directly above the
 * caller's on the stack and copies arguments in; return copies results
 * back into the caller's result registers.  Nothing is allocated on a warm
 * call: the stack grows (rarely) only when a deeper window than ever
 * before is needed.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "hal/buffer.h"
#include "hal/buffer_impl.h"
#include "vm/fiber.h"
#include "vm/hal_ops.h"
#include "vm/trace.h"
#include "vm/vm.h"

#if defined(HALI_HAVE_COMPUTED_GOTO) && !defined(HALI_FORCE_SWITCH_DISPATCH)
#define HALI_DISPATCH_GOTO 1
#endif

/* ------------------------------------------------------------------------ */
/* Defined semantics for the edges (doc/isa.md). */

static inline uint32_t clz32(uint32_t x) {
  return x ? (uint32_t)__builtin_clz(x) : 32u;
}
static inline uint64_t clz64(uint64_t x) {
  return x ? (uint64_t)__builtin_clzll(x) : 64u;
}

/* IEEE 754-2019 minimum/maximum: nan if either is nan; -0 < +0. */
#define FMINMAX(name, T, less)                                                 \
  static inline T name(T x, T y) {                                             \
    if (x != x || y != y) return x + y;                                        \
    if (x == y) return less ? (signbit(x) ? x : y) : (signbit(x) ? y : x);     \
    return less ? (x < y ? x : y) : (x > y ? x : y);                           \
  }
FMINMAX(fmin32, float, 1)
FMINMAX(fmax32, float, 0)
FMINMAX(fmin64, double, 1)
FMINMAX(fmax64, double, 0)

/* Float -> int: toward zero, saturating at the target's range, nan -> 0. */
#define FTOI(name, F, I, lo, hi)                                               \
  static inline I name(F v) {                                                  \
    if (v != v) return 0;                                                      \
    if (v <= (F)(lo)) return (lo);                                             \
    if (v >= (F)(hi)) return (hi);                                             \
    return (I)v;                                                               \
  }
FTOI(f32_to_i32, float, int32_t, INT32_MIN, INT32_MAX)
FTOI(f64_to_i32, double, int32_t, INT32_MIN, INT32_MAX)
FTOI(f32_to_i64, float, int64_t, INT64_MIN, INT64_MAX)
FTOI(f64_to_i64, double, int64_t, INT64_MIN, INT64_MAX)
FTOI(f32_to_u32, float, uint32_t, 0, UINT32_MAX)
FTOI(f64_to_u32, double, uint32_t, 0, UINT32_MAX)
FTOI(f32_to_u64, float, uint64_t, 0, UINT64_MAX)
FTOI(f64_to_u64, double, uint64_t, 0, UINT64_MAX)

/* Sign extension of the low |bits| bits, without implementation-defined
 * narrowing conversions. */
static inline int64_t sext(uint64_t v, unsigned bits) {
  const uint64_t sign = 1ull << (bits - 1), mask = (sign << 1) - 1;
  return (int64_t)((v & mask) ^ sign) - (int64_t)sign;
}

/* Round half to even, independent of the host's rounding mode (nearbyint
 * and rint follow it).  A tie is exactly half-way, so r - x is exact; x / 2
 * is exact because a tie is at least 0.5 in magnitude. */
#define ROUND_EVEN(name, T, SFX)                                               \
  static inline T name(T x) {                                                  \
    T r = round##SFX(x);                                                       \
    if (fabs##SFX(r - x) == (T)0.5) r = (T)2 * round##SFX(x * (T)0.5);         \
    return r;                                                                  \
  }
ROUND_EVEN(round_even32, float, f)
ROUND_EVEN(round_even64, double, )

static inline int32_t abs32(int32_t v) {
  return v < 0 ? (int32_t)(0u - (uint32_t)v) : v;
}
static inline int64_t abs64(int64_t v) {
  return v < 0 ? (int64_t)(0ull - (uint64_t)v) : v;
}

/* ------------------------------------------------------------------------ */
/* --enable-debug (HALI_DEBUG): before every instruction, assert what the
 * verifier and the encoder promise the loop, which a release build trusts
 * (the loop does no such checks, vm/interp_loop.h):
 *   - pc lies inside the running function's code and at the start of an
 *     instruction (the encoder's map, fn->insn_offset);
 *   - an instruction that does not jump, call or return was |cells| long:
 *     the next one executed is the next in the map (a handler's "pc += n"
 *     agrees with the encoder);
 *   - every branch target of the instruction is in range, at the start of
 *     an instruction;
 *   - every register operand is a slot of the frame's bank for its type:
 *     ref slots < fn->ref_count, scalar slots < fn->scalar_count.
 * A failure prints what broke, where, and aborts: it is a bug in the
 * verifier, the encoder or the loop, never a program error. */
#ifdef HALI_DEBUG
#include <stdio.h>
#include <stdlib.h>

typedef struct hali_vm_debug_s {
  const hali_vm_func_t *fn; /* the previous instruction's function */
  const hali_cell_t *pc;    /* and the instruction (NULL at entry) */
} hali_vm_debug_t;

__attribute__((noreturn)) static void debug_fail(const hali_vm_func_t *fn,
                                                 const hali_cell_t *pc,
                                                 const char *what,
                                                 unsigned long a,
                                                 unsigned long b) {
  fprintf(stderr,
          "hali: debug assertion failed in @%s at cell %ld: %s (%lu, %lu)\n",
          fn->ir->name, (long)(pc - fn->code), what, a, b);
  abort();
}

/* Index of the instruction starting at |pc| in |fn|, or UINT32_MAX. */
static uint32_t debug_insn_at(const hali_vm_func_t *fn, const hali_cell_t *pc) {
  if (pc < fn->code || pc >= fn->code + fn->code_size) return UINT32_MAX;
  uint32_t at = (uint32_t)(pc - fn->code), lo = 0, hi = fn->insn_count;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (fn->insn_offset[mid] < at) lo = mid + 1;
    else hi = mid;
  }
  return lo < fn->insn_count && fn->insn_offset[lo] == at ? lo : UINT32_MAX;
}

static void debug_target(const hali_vm_func_t *fn, const hali_cell_t *pc,
                         const hali_cell_t *target) {
  if (debug_insn_at(fn, target) == UINT32_MAX)
    debug_fail(fn, pc, "branch target is not an instruction of the function",
               (unsigned long)(target - fn->code), fn->code_size);
}

static void debug_slot(const hali_vm_func_t *fn, const hali_cell_t *pc,
                       hali_type_t type, uint16_t slot) {
  if (hali_type_is_ref(type)) {
    if (slot >= fn->ref_count)
      debug_fail(fn, pc, "ref slot outside the frame's ref bank", slot,
                 fn->ref_count);
  } else if (slot >= fn->scalar_count) {
    debug_fail(fn, pc, "scalar slot outside the frame's scalar bank", slot,
               fn->scalar_count);
  }
}

/* The slots of a call's (or spawn's) arguments and results, typed by the
 * callee's signature. */
static void debug_call(const hali_vm_func_t *fn, const hali_cell_t *pc) {
  const hali_vm_func_t *callee = pc[1].ptr;
  const uint16_t *list = hali_cell_slots(&pc[2]);
  const uint32_t nargs = pc->i.b, nresults = pc->i.c;
  const hali_type_t *ptypes;
  const uint32_t nparams = hali_ir_call_params(pc->i.op, callee->ir, &ptypes);
  if (nargs != nparams)
    debug_fail(fn, pc, "call passes the wrong number of arguments", nargs,
               nparams);
  for (uint32_t i = 0; i < nargs; ++i)
    debug_slot(fn, pc, ptypes[i], list[i]);
  if (pc->i.op == HALI_OP_FIBER_SPAWN) { /* one result: the fence */
    debug_slot(fn, pc, HALI_TYPE_FENCE, list[nargs]);
    return;
  }
  for (uint32_t i = 0; i < nresults; ++i)
    debug_slot(fn, pc, callee->ir->results[i], list[nargs + i]);
}

static bool debug_is_fused(unsigned op) {
  switch (op) {
#define HALI_X(name, base)                                                     \
  case HALI_OP_##name: case HALI_OP_##name##_NS: case HALI_OP_##name##_NSF:
    HALI_FUSED_OPS(HALI_X)
#undef HALI_X
    return true;
  default:
    return false;
  }
}

static void hali_vm_debug_step(const hali_vm_stack_t *st,
                               const hali_vm_func_t *fn, const hali_cell_t *pc,
                               hali_vm_debug_t *prev) {
  if (st->depth == 0 || st->frames[st->depth - 1].fn != fn)
    debug_fail(fn, pc, "the running function is not the top frame's",
               st->depth, 0);
  const uint32_t index = debug_insn_at(fn, pc);
  if (index == UINT32_MAX)
    debug_fail(fn, pc, "pc is not at the start of an instruction",
               (unsigned long)(pc - fn->code), fn->code_size);
  if (prev->pc && prev->fn == fn) {
    /* Straight-line code: the previous handler advanced pc by exactly the
     * cells the encoder gave its instruction. */
    /* The forms of call and return count as call and return. */
    const unsigned op = hali_code_same_layout_op(prev->pc->i.op);
    const bool moves = op == HALI_OP_CALL || debug_is_fused(op) ||
                       hali_code_is_add_br(op) ||
                       (op < HALI_OP_COUNT &&
                        (hali_op_info(op)->flags & HALI_OPF_TERM));
    const uint32_t was = debug_insn_at(fn, prev->pc);
    if (!moves && index != was + 1)
      debug_fail(fn, pc, "the previous instruction's length disagrees with "
                 "the encoder's", was, index);
  }
  prev->fn = fn;
  prev->pc = pc;

  /* A DIVK op is checked as the op it stands for (the same layout). */
  const unsigned op = hali_code_same_layout_op(pc->i.op);
  if (hali_code_is_add_br(op)) { /* {op, d, x, y}, {p, q, c}, ^t, ^f */
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.a);
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.b);
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.c);
    for (int k = 0; k < 3; ++k) debug_slot(fn, pc, HALI_TYPE_I64, pc[1].r[k]);
    debug_target(fn, pc, pc[2].target);
    debug_target(fn, pc, pc[3].target);
    return;
  }
  if (hali_code_is_mul_add(op)) { /* {op, t, a, b}, {d, o}: all scalars */
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.a);
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.b);
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.c);
    for (int k = 0; k < 2; ++k) debug_slot(fn, pc, HALI_TYPE_I64, pc[1].r[k]);
    return;
  }
  if (debug_is_fused(op)) { /* {op, c, a, b}, ^t, ^f: all scalars */
    debug_slot(fn, pc, HALI_TYPE_I32, pc->i.a);
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.b);
    debug_slot(fn, pc, HALI_TYPE_I64, pc->i.c);
    debug_target(fn, pc, pc[1].target);
    debug_target(fn, pc, pc[2].target);
    return;
  }
  switch (op) {
  case HALI_OP_CALL:
  case HALI_OP_CALL_IMPORT:
  case HALI_OP_FIBER_SPAWN:
  case HALI_OP_FIBER_JOIN:
    debug_call(fn, pc);
    return;
  case HALI_OP_RETURN: {
    const uint16_t *list = hali_cell_slots(&pc[1]);
    if (pc->i.b != fn->ir->result_count)
      debug_fail(fn, pc, "return passes the wrong number of results",
                 pc->i.b, fn->ir->result_count);
    for (uint32_t i = 0; i < pc->i.b; ++i)
      debug_slot(fn, pc, fn->ir->results[i], list[i]);
    return;
  }
  case HALI_OP_SWITCH:
    debug_slot(fn, pc, HALI_TYPE_I32, pc->i.a);
    for (uint32_t i = 0; i < 1u + pc->i.b; ++i)
      debug_target(fn, pc, pc[1 + i].target);
    return;
  default:
    break;
  }
  if (op >= HALI_OP_COUNT)
    debug_fail(fn, pc, "opcode outside the table", op, HALI_OP_COUNT);
  /* The generic layout (vm/code.h): registers in order from the slot after
   * the opcode, then one cell per other operand, then the tail. */
  const hali_op_info_t *info = hali_op_info(op);
  if (info->flags & HALI_OPF_TENSOR)
    debug_fail(fn, pc, "tensor-level op reached the interpreter", op, 0);
  const uint16_t *regs = hali_cell_slots(pc) + 1;
  uint32_t nregs = info->reg_count, r = 0;
  const hali_cell_t *x =
      pc + 1 + (nregs > 3 ? HALI_CELLS_FOR_SLOTS(nregs - 3) : 0);
  for (uint32_t k = 0; k < info->operand_count; ++k) {
    const hali_operand_desc_t *d = &info->operands[k];
    if (d->role == HALI_ROLE_READ || d->role == HALI_ROLE_WRITE)
      debug_slot(fn, pc, d->type, regs[r++]);
    else if (d->role == HALI_ROLE_BLOCK)
      debug_target(fn, pc, x++->target);
    else
      x++;
  }
  if (info->tail && info->tail != 'b' && info->tail != '_') {
    const uint32_t n = (uint32_t)x->imm;
    const uint16_t *tail = hali_cell_slots(x + 1);
    for (uint32_t i = 0; i < n; ++i)
      debug_slot(fn, pc, info->tail_type, tail[i]);
  }
}
#define HALI_DEBUG_STEP()                                                      \
  hali_vm_debug_step(st, frame->fn, pc, &hali_debug_prev)
#else
#define HALI_DEBUG_STEP() ((void)0)
#endif

/* ------------------------------------------------------------------------ */

/* The scalar load or store at |pc| whose inline checks (hal/buffer_impl.h)
 * did not pass: through hali_hal_buffer_scalar_ptr, which makes the same
 * checks and names the one that failed, or succeeds for a buffer under
 * validation (its accesses are reported there, hal/validate.h); then the
 * access itself.  Out of line: only errors and validated buffers come
 * here. */
static hali_status_t __attribute__((noinline, cold))
hali_vm_scalar_access_slow(const hali_cell_t *pc, hali_slot_t *regs,
                           hali_ref_t *const *refs) {
  uint32_t size = 0;
  bool store = false;
  switch (pc->i.op) {
  case HALI_OP_HAL_BUFFER_LOAD_I8_S: case HALI_OP_HAL_BUFFER_LOAD_I8_U:
    size = 1; break;
  case HALI_OP_HAL_BUFFER_LOAD_I16_S: case HALI_OP_HAL_BUFFER_LOAD_I16_U:
    size = 2; break;
  case HALI_OP_HAL_BUFFER_LOAD_I32: case HALI_OP_HAL_BUFFER_LOAD_F32:
    size = 4; break;
  case HALI_OP_HAL_BUFFER_LOAD_I64: case HALI_OP_HAL_BUFFER_LOAD_F64:
    size = 8; break;
  case HALI_OP_HAL_BUFFER_STORE_I8: size = 1, store = true; break;
  case HALI_OP_HAL_BUFFER_STORE_I16: size = 2, store = true; break;
  case HALI_OP_HAL_BUFFER_STORE_I32: case HALI_OP_HAL_BUFFER_STORE_F32:
    size = 4, store = true; break;
  case HALI_OP_HAL_BUFFER_STORE_I64: case HALI_OP_HAL_BUFFER_STORE_F64:
    size = 8, store = true; break;
  default:
    return hali_status_make(HALI_STATUS_INTERNAL,
                            "%s is not a scalar buffer access",
                            hali_op_info(pc->i.op)->name);
  }
  /* load: {op, result, buffer, offset}; store: {op, buffer, offset, value} */
  hali_hal_buffer_t *b = (hali_hal_buffer_t *)refs[store ? pc->i.a : pc->i.b];
  int64_t offset = regs[store ? pc->i.b : pc->i.c].i64;
  uint8_t *p = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_buffer_scalar_ptr(b, offset, size, store, &p));
  if (store) {
    const hali_slot_t v = regs[pc->i.c];
    switch (pc->i.op) {
    case HALI_OP_HAL_BUFFER_STORE_I8: { uint8_t x = (uint8_t)v.u32; memcpy(p, &x, 1); break; }
    case HALI_OP_HAL_BUFFER_STORE_I16: { uint16_t x = (uint16_t)v.u32; memcpy(p, &x, 2); break; }
    case HALI_OP_HAL_BUFFER_STORE_I32: memcpy(p, &v.u32, 4); break;
    case HALI_OP_HAL_BUFFER_STORE_F32: memcpy(p, &v.f32, 4); break;
    case HALI_OP_HAL_BUFFER_STORE_I64: memcpy(p, &v.u64, 8); break;
    default: memcpy(p, &v.f64, 8); break; /* F64 */
    }
    return HALI_OK;
  }
  hali_slot_t *r = &regs[pc->i.a];
  switch (pc->i.op) {
  case HALI_OP_HAL_BUFFER_LOAD_I8_S: { int8_t x; memcpy(&x, p, 1); r->i32 = x; break; }
  case HALI_OP_HAL_BUFFER_LOAD_I8_U: { uint8_t x; memcpy(&x, p, 1); r->i32 = x; break; }
  case HALI_OP_HAL_BUFFER_LOAD_I16_S: { int16_t x; memcpy(&x, p, 2); r->i32 = x; break; }
  case HALI_OP_HAL_BUFFER_LOAD_I16_U: { uint16_t x; memcpy(&x, p, 2); r->i32 = x; break; }
  case HALI_OP_HAL_BUFFER_LOAD_I32: { int32_t x; memcpy(&x, p, 4); r->i32 = x; break; }
  case HALI_OP_HAL_BUFFER_LOAD_F32: { float x; memcpy(&x, p, 4); r->f32 = x; break; }
  case HALI_OP_HAL_BUFFER_LOAD_I64: { int64_t x; memcpy(&x, p, 8); r->i64 = x; break; }
  default: { double x; memcpy(&x, p, 8); r->f64 = x; break; } /* F64 */
  }
  return HALI_OK;
}

/* Calls from frames below the one this returns need no check of the
 * stack's room (vm/interp_loop.h, CALL_BODY): with the top frame at depth
 * d, its banks ending at T and frames of at most S scalar (R ref) slots in
 * the running module, k more frames fit when d + k <= frame_limit (the
 * frames exist and carry the link, vm/vm.h) and T + k * S fits the scalar
 * bank (the same for refs).  A call from frame d + j (j < k) pushes a
 * frame ending at most at T + (j + 1) * S; a call from a frame below the
 * top one ends lower.  So the first k frames from the top one call
 * without checks, and the one after them calls hali_vm_call_room. */
static inline const hali_vm_frame_t *hali_vm_call_limit(
    const hali_vm_stack_t *st, const hali_vm_module_t *m) {
  const hali_vm_frame_t *fr = &st->frames[st->depth - 1];
  uint32_t k = st->frame_limit > st->depth ? st->frame_limit - st->depth : 0;
  if (m->max_scalar_count) {
    const uint32_t room = st->scalar_capacity > fr->scalar_top
                              ? (st->scalar_capacity - fr->scalar_top) /
                                    m->max_scalar_count
                              : 0;
    if (room < k) k = room;
  }
  if (m->max_ref_count) {
    const uint32_t room =
        st->ref_capacity > fr->ref_top
            ? (st->ref_capacity - fr->ref_top) / m->max_ref_count
            : 0;
    if (room < k) k = room;
  }
  return fr + k;
}

/* A call at the limit above: room for a frame of the module's largest
 * size above the top frame (so the new limit is above it, and the next
 * calls are checked once again only past it), or the failure: the depth
 * limit (hali_vm_stack_push_frame), memory, or banks past 2^31 slots.
 * |*limit| is the new limit. */
/* Not cold: GCC would move the call's slow path out of the loop's body,
 * and callgrind would then charge the loop to that part (bench/hotspots). */
static hali_status_t __attribute__((noinline))
hali_vm_call_room(hali_vm_stack_t *st, const hali_vm_module_t *m,
                  const hali_vm_func_t *callee,
                  const hali_vm_frame_t **limit) {
  const hali_vm_frame_t *fr = &st->frames[st->depth - 1];
  const uint32_t ms = m->max_scalar_count > callee->scalar_count
                          ? m->max_scalar_count
                          : callee->scalar_count;
  const uint32_t mr =
      m->max_ref_count > callee->ref_count ? m->max_ref_count
                                           : callee->ref_count;
  const uint64_t stop = (uint64_t)fr->scalar_top + ms;
  const uint64_t rtop = (uint64_t)fr->ref_top + mr;
  if (stop > UINT32_MAX / 2 || rtop > UINT32_MAX / 2)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "call of @%s: the register stack would pass "
                            "2^31 slots",
                            callee->ir->name);
  if (stop > st->scalar_capacity || rtop > st->ref_capacity)
    HALI_RETURN_IF_ERROR_PLAIN(
        hali_vm_stack_reserve(st, (uint32_t)stop, (uint32_t)rtop));
  if (st->depth >= st->frame_limit) {
    /* Makes frames[depth] (and carries the link into it); the call
     * itself pushes it. */
    HALI_RETURN_IF_ERROR_PLAIN(hali_vm_stack_push_frame(st));
    st->depth--;
  }
  *limit = hali_vm_call_limit(st, m);
  return HALI_OK;
}

/* The two copies of the loop (see vm/interp_loop.h). */
#define HALI_INTERP_NAME hali_vm_interpret_plain
#define HALI_INTERP_INSTRUMENTED 0
/* Cache-line aligned, so that builds differing elsewhere (tracing compiled
 * in or out) time the same loop the same way. */
static hali_status_t HALI_INTERP_NAME(hali_vm_stack_t *st,
                                      hali_value_t *results)
    __attribute__((aligned(64)));
#include "vm/interp_loop.h"
#undef HALI_INTERP_NAME
#undef HALI_INTERP_INSTRUMENTED

#define HALI_INTERP_NAME hali_vm_interpret_instrumented
#define HALI_INTERP_INSTRUMENTED 1
static hali_status_t HALI_INTERP_NAME(hali_vm_stack_t *st,
                                      hali_value_t *results);
#include "vm/interp_loop.h"
#undef HALI_INTERP_NAME
#undef HALI_INTERP_INSTRUMENTED

/* With --disable-tracing hali_trace_flags is the constant 0 (vm/trace.h):
 * the test below is fuel alone and the instrumented copy serves only fuel. */
hali_status_t hali_vm_interpret(hali_vm_stack_t *st, hali_value_t *results) {
  if (st->fuel_enabled || (hali_trace_flags(st->trace) & HALI_TRACE_VM))
    return hali_vm_interpret_instrumented(st, results);
  return hali_vm_interpret_plain(st, results);
}
