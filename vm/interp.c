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
