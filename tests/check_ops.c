/* Tests for the instruction set: every op of vm/ops.def, at every type,
 * against the semantics in doc/isa.md ("Semantics at the edges").
 *
 * Most cases run a one-op function built from the op's row in the table,
 *
 *   func @f(%x1: T1, %x2: T2) -> R { %r = OP %x1, %x2  return %r }
 *
 * and compare the result exactly: integers by value, floats by bit pattern
 * (so -0 is not +0 and nan payloads count).  The one exception: an expected
 * value that is the default quiet nan (`NAN`) accepts any nan, because IEEE
 * leaves the payload of a generated nan open.
 *
 * Where a reference model is obvious (integer arithmetic, comparisons,
 * shifts) a sweep over boundary values backs up the hand-written cases;
 * every integer compare is also run fused with the cond_br that consumes it
 * (the encoder turns that pair into one internal op).
 *
 * The last test case checks that every op (each row of vm/ops.def and each
 * fused compare-and-branch) was encoded into some module this suite ran,
 * so an op added without a test fails the suite.
 */
#include <fenv.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests/hal_ops_suite.h"
#include "tests/testutil.h"
#include "vm/code.h"
#include "vm/ops.h"

/* Valgrind's CPU emulation rounds 64-bit int -> f32 conversions through
 * double and loses the sign of an exactly-zero f64 fma; the few cases that
 * depend on those are skipped under it (they run natively in make check). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HOST_FP_EXACT() (!RUNNING_ON_VALGRIND)
#endif
#endif
#ifndef HOST_FP_EXACT
#define HOST_FP_EXACT() 1
#endif

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* Values. */

/* Integer constructors take any integer and keep its low bits, so that
 * 0xffffffff and -1 mean the same i32. */
#define I32(v) hali_value_i32((int32_t)(uint32_t)(v))
#define I64(v) hali_value_i64((int64_t)(uint64_t)(v))
#define F32(v) hali_value_f32((float)(v))
#define F64(v) hali_value_f64((double)(v))
/* Floats given by bit pattern (nan payloads, -0, denormals). */
#define F32B(bits) f32_value_from_bits(bits)
#define F64B(bits) f64_value_from_bits(bits)

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static uint64_t f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}
static hali_value_t f32_value_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return hali_value_f32(f);
}
static hali_value_t f64_value_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return hali_value_f64(d);
}

/* The default quiet nans: as an expected value, "any nan". */
#define ANY_NAN32 0x7fc00000u
#define ANY_NAN64 0x7ff8000000000000ull

static bool same_value(hali_value_t got, hali_value_t want) {
  if (got.type != want.type) return false;
  switch (want.type) {
  case HALI_TYPE_I32:
    return got.i32 == want.i32;
  case HALI_TYPE_I64:
    return got.i64 == want.i64;
  case HALI_TYPE_F32:
    if (f32_bits(want.f32) == ANY_NAN32) return isnan(got.f32);
    return f32_bits(got.f32) == f32_bits(want.f32);
  case HALI_TYPE_F64:
    if (f64_bits(want.f64) == ANY_NAN64) return isnan(got.f64);
    return f64_bits(got.f64) == f64_bits(want.f64);
  default:
    return false;
  }
}

static void format_value(char *buf, size_t n, hali_value_t v) {
  switch (v.type) {
  case HALI_TYPE_I32:
    snprintf(buf, n, "i32 %" PRId32 " (0x%08" PRIx32 ")", v.i32,
             (uint32_t)v.i32);
    break;
  case HALI_TYPE_I64:
    snprintf(buf, n, "i64 %" PRId64 " (0x%016" PRIx64 ")", v.i64,
             (uint64_t)v.i64);
    break;
  case HALI_TYPE_F32:
    snprintf(buf, n, "f32 %a (0x%08" PRIx32 ")", (double)v.f32,
             f32_bits(v.f32));
    break;
  case HALI_TYPE_F64:
    snprintf(buf, n, "f64 %a (0x%016" PRIx64 ")", v.f64, f64_bits(v.f64));
    break;
  default:
    snprintf(buf, n, "<type %d>", (int)v.type);
  }
}

/* "add.i32(i32 1 (0x00000001), i32 2 (0x00000002))" */
static void format_call(char *buf, size_t n, const char *op,
                        const hali_value_t *args, size_t nargs) {
  size_t len = (size_t)snprintf(buf, n, "%s(", op);
  for (size_t i = 0; i < nargs && len < n; ++i) {
    char v[64];
    format_value(v, sizeof v, args[i]);
    len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", v);
  }
  if (len < n) snprintf(buf + len, n - len, ")");
}

/* ------------------------------------------------------------------------ */
/* Op coverage.
 *
 * Every module the suite loads goes through load(), which records the ops
 * the encoder emitted (so a compare fused with its cond_br counts as the
 * fused op, not as the plain compare).  The record lives in shared memory
 * so that it survives Check running each test in a forked child. */

static uint8_t *g_seen; /* [HALI_OP_INTERNAL_END] */

static void note_ops(const hali_vm_module_t *m) {
  if (!g_seen) return;
  for (uint32_t f = 0; f < m->func_count; ++f) {
    const hali_vm_func_t *fn = &m->funcs[f];
    for (uint32_t i = 0; i < fn->insn_count; ++i) {
      unsigned op = fn->code[fn->insn_offset[i]].i.op;
      if (op < HALI_OP_INTERNAL_END) g_seen[op] = 1;
    }
  }
}

/* The name of an encoded op, internal ones included. */
static void op_display_name(unsigned op, char *buf, size_t n) {
  static const unsigned fused_base[HALI_OP_INTERNAL_END] = {
#define HALI_X(name, base)                                                     \
  [HALI_OP_##name] = HALI_OP_##base, [HALI_OP_##name##_NS] = HALI_OP_##base,  \
  [HALI_OP_##name##_NSF] = HALI_OP_##base,
      HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  };
  static const unsigned divk_base[HALI_OP_INTERNAL_END] = {
#define HALI_X(name, base) [HALI_OP_##name] = HALI_OP_##base,
      HALI_DIVK_OPS(HALI_X)
#undef HALI_X
  };
  static const unsigned add_base[HALI_OP_INTERNAL_END] = {
#define HALI_X(name, base) [HALI_OP_ADD_##name] = HALI_OP_##base,
      HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  };
  static const unsigned char nostore[HALI_OP_INTERNAL_END] = {
#define HALI_X(name, base)                                                     \
  [HALI_OP_##name##_NS] = 1, [HALI_OP_##name##_NSF] = 2,
      HALI_FUSED_OPS(HALI_X)
#undef HALI_X
  };
  static const unsigned mul_add_base[HALI_OP_INTERNAL_END] = {
#define HALI_X(name, mul, add) [HALI_OP_##name] = HALI_OP_##mul,
      HALI_MUL_ADD_OPS(HALI_X)
#undef HALI_X
  };
  static const char *const call_forms[HALI_OP_INTERNAL_END] = {
      [HALI_OP_CALL_S] = "call of a function with scalar parameters",
      [HALI_OP_CALL_P] = "call of a plain function",
      [HALI_OP_CALL_P1] = "call of a plain function with one argument",
      [HALI_OP_RETURN_PLAIN] = "return of a plain function",
      [HALI_OP_RETURN_PLAIN1] = "return of a plain function with one result",
  };
  if (op < HALI_OP_COUNT)
    snprintf(buf, n, "%s", hali_op_info(op)->name);
  else if (call_forms[op])
    snprintf(buf, n, "%s", call_forms[op]);
  else if (mul_add_base[op])
    snprintf(buf, n, "%s fused with the add of its product",
             hali_op_info(mul_add_base[op])->name);
  else if (op == HALI_OP_CALL_IMPORT)
    snprintf(buf, n, "call of a host import");
  else if (add_base[op])
    snprintf(buf, n, "add then %s fused with cond_br",
             hali_op_info(add_base[op])->name);
  else if (divk_base[op])
    snprintf(buf, n, "%s by a constant (neither 0 nor -1)",
             hali_op_info(divk_base[op])->name);
  else
    snprintf(buf, n, "%s fused with cond_br%s",
             hali_op_info(fused_base[op])->name,
             nostore[op] == 2 ? " (result read by the branch only, both "
                                "targets ahead)"
             : nostore[op]    ? " (result read by the branch only)"
                              : "");
}

/* ------------------------------------------------------------------------ */
/* Running code. */

void check_ops_note_module(const hali_vm_module_t *m) { note_ops(m); }

static hali_vm_module_t *load(const char *text) {
  hali_vm_module_t *m = hali_test_module(text);
  note_ops(m);
  return m;
}

static const hali_vm_func_t *lookup(const hali_vm_module_t *m,
                                    const char *fn) {
  const hali_vm_func_t *f = hali_vm_module_lookup(m, fn);
  ck_assert_msg(f != NULL, "no function @%s", fn);
  return f;
}

/* Runs @|fn| of |text| on a fresh stack. */
static hali_status_t run(const char *text, const char *fn,
                         const hali_value_t *args, size_t nargs,
                         hali_value_t *results, size_t nresults) {
  hali_vm_module_t *m = load(text);
  const hali_vm_func_t *f = lookup(m, fn);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_status_t s = hali_vm_invoke(st, m, f, args, nargs, results, nresults);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
  return s;
}

/* An argument array and its length, for the helpers below. */
#define ARGS(...)                                                              \
  (const hali_value_t[]){__VA_ARGS__},                                         \
      sizeof((const hali_value_t[]){__VA_ARGS__}) / sizeof(hali_value_t)

/* Fails the test with the text of |s| (which it frees first, so that a
 * failing test leaks nothing even without fork). */
static void abort_with_status(const char *file, int line, const char *call,
                              hali_status_t s) {
  char buf[512];
  char *t = hali_status_to_string(s);
  hali_status_free(s);
  snprintf(buf, sizeof buf, "%s", t ? t : "");
  free(t);
  ck_abort_msg("%s:%d: %s failed: %s", file, line, call, buf);
}

/* Runs @|fn| of |text| with one result and checks it. */
static void check_run(const char *file, int line, const char *text,
                      const char *fn, hali_value_t want,
                      const hali_value_t *args, size_t nargs) {
  hali_value_t got = {0};
  char call[512], g[64], w[64];
  format_call(call, sizeof call, fn, args, nargs);
  hali_status_t s = run(text, fn, args, nargs, &got, 1);
  if (s) abort_with_status(file, line, call, s);
  format_value(g, sizeof g, got);
  format_value(w, sizeof w, want);
  ck_assert_msg(same_value(got, want), "%s:%d: @%s = %s, expected %s", file,
                line, call, g, w);
}
#define EXPECT_RUN(text, fn, want, ...)                                        \
  check_run(__FILE__, __LINE__, text, fn, want, ARGS(__VA_ARGS__))

/* One-op programs, built from the op's signature and cached per op for
 * the length of a test (freed by the fixture).  Each has its own stack,
 * which is reused across calls, also after a failing call. */
typedef enum {
  PROG_PLAIN,  /* %r = OP ...; return %r */
  PROG_BRANCH, /* %r = OP ...; cond_br %r: returns (branch taken, %r) */
  /* %r = OP ...; cond_br %r: returns (branch taken, 7), so that only the
   * branch reads %r (the encoder's no-store form, vm/encode.c) */
  PROG_BRANCH_ONLY,
  PROG_KIND_COUNT
} prog_kind_t;

typedef struct {
  hali_vm_module_t *module;
  const hali_vm_func_t *fn;
  hali_vm_stack_t *stack;
} op_prog_t;

static op_prog_t g_progs[PROG_KIND_COUNT][HALI_OP_COUNT];

static void free_progs(void) {
  for (int k = 0; k < PROG_KIND_COUNT; ++k)
    for (int op = 0; op < HALI_OP_COUNT; ++op) {
      op_prog_t *p = &g_progs[k][op];
      hali_vm_stack_free(p->stack);
      hali_vm_module_release(p->module);
      memset(p, 0, sizeof *p);
    }
}

static const hali_op_info_t *op_named(const char *name) {
  int op = hali_op_lookup(name, strlen(name));
  ck_assert_msg(op >= 0, "no op named %s", name);
  return hali_op_info((unsigned)op);
}

static const op_prog_t *op_prog(const char *name, prog_kind_t kind) {
  int op = hali_op_lookup(name, strlen(name));
  ck_assert_msg(op >= 0, "no op named %s", name);
  op_prog_t *p = &g_progs[kind][op];
  if (p->module) return p;
  const hali_op_info_t *info = hali_op_info((unsigned)op);
  ck_assert_msg(info->operand_count >= 2 &&
                    info->operands[0].role == HALI_ROLE_WRITE,
                "%s does not write a register", name);
  char params[256], uses[128];
  size_t np = 0, nu = 0;
  params[0] = uses[0] = 0;
  for (unsigned i = 1; i < info->operand_count; ++i) {
    ck_assert_msg(info->operands[i].role == HALI_ROLE_READ,
                  "%s has a non-register operand", name);
    np += (size_t)snprintf(params + np, sizeof params - np, "%s%%x%u: %s",
                           i > 1 ? ", " : "", i,
                           hali_type_name(info->operands[i].type));
    nu += (size_t)snprintf(uses + nu, sizeof uses - nu, "%s%%x%u",
                           i > 1 ? ", " : "", i);
  }
  const char *rtype = hali_type_name(info->operands[0].type);
  char text[1024];
  if (kind == PROG_PLAIN) {
    snprintf(text, sizeof text,
             "func @f(%s) -> %s {\n"
             "  %%r = %s %s\n"
             "  return %%r\n"
             "}\n",
             params, rtype, name, uses);
  } else {
    ck_assert_int_eq(info->operands[0].type, HALI_TYPE_I32);
    const char *r = kind == PROG_BRANCH ? "%r" : "%seven";
    snprintf(text, sizeof text,
             "func @f(%s) -> (i32, i32) {\n"
             "  %%seven = const.i32 7\n"
             "  %%r = %s %s\n"
             "  cond_br %%r, ^yes, ^no\n"
             "^yes:\n"
             "  %%t = const.i32 1\n"
             "  return %%t, %s\n"
             "^no:\n"
             "  %%e = const.i32 0\n"
             "  return %%e, %s\n"
             "}\n",
             params, name, uses, r, r);
  }
  p->module = load(text);
  p->fn = lookup(p->module, "f");
  ck_assert_ok(hali_vm_stack_create(0, &p->stack));
  return p;
}

static hali_status_t op_try(const char *op, const hali_value_t *args,
                            size_t nargs, hali_value_t *out) {
  const op_prog_t *p = op_prog(op, PROG_PLAIN);
  return hali_vm_invoke(p->stack, p->module, p->fn, args, nargs, out, 1);
}

/* Checks that OP(args) == want. */
static void check_op(const char *file, int line, const char *op,
                     hali_value_t want, const hali_value_t *args,
                     size_t nargs) {
  hali_value_t got = {0};
  char call[512], g[64], w[64];
  format_call(call, sizeof call, op, args, nargs);
  hali_status_t s = op_try(op, args, nargs, &got);
  if (s) abort_with_status(file, line, call, s);
  format_value(g, sizeof g, got);
  format_value(w, sizeof w, want);
  ck_assert_msg(same_value(got, want), "%s:%d: %s = %s, expected %s", file,
                line, call, g, w);
}
#define EXPECT(op, want, ...)                                                  \
  check_op(__FILE__, __LINE__, op, want, ARGS(__VA_ARGS__))
/* A case that only an exact host FPU reproduces (see HOST_FP_EXACT). */
#define EXPECT_FP_EXACT(op, want, ...)                                         \
  do {                                                                         \
    if (HOST_FP_EXACT()) EXPECT(op, want, __VA_ARGS__);                        \
  } while (0)

/* Checks that OP(args) fails with |code| and a message containing |needle|
 * and the op's name, reported at @f@0 (the op is the first instruction). */
static void check_op_fails(const char *file, int line, const char *op,
                           hali_status_code_t code, const char *needle,
                           const hali_value_t *args, size_t nargs) {
  hali_value_t got = {0};
  char call[512], g[64];
  format_call(call, sizeof call, op, args, nargs);
  hali_status_t s = op_try(op, args, nargs, &got);
  format_value(g, sizeof g, got);
  ck_assert_msg(s != NULL, "%s:%d: %s = %s, expected %s", file, line, call, g,
                hali_status_code_name(code));
  ck_assert_msg(strstr(hali_status_message(s), op) != NULL,
                "%s:%d: %s: message \"%s\" does not name the op", file, line,
                call, hali_status_message(s));
  const char *where = hali_status_annotation(s, 0);
  ck_assert_msg(where && strstr(where, "@f@0"),
                "%s:%d: %s: backtrace \"%s\" does not name @f@0", file, line,
                call, where ? where : "(none)");
  hali_test_assert_status(s, code, needle, file, line);
}
#define EXPECT_FAIL(op, code, needle, ...)                                     \
  check_op_fails(__FILE__, __LINE__, op, code, needle, ARGS(__VA_ARGS__))

/* Checks the compare OP fused with cond_br: the branch taken and the value
 * written must both be |want|. */
static void check_branch(const char *file, int line, const char *op,
                         int32_t want, const hali_value_t *args,
                         size_t nargs) {
  const op_prog_t *p = op_prog(op, PROG_BRANCH);
  hali_value_t got[2] = {{0}, {0}};
  char call[512];
  format_call(call, sizeof call, op, args, nargs);
  hali_status_t s =
      hali_vm_invoke(p->stack, p->module, p->fn, args, nargs, got, 2);
  if (s) abort_with_status(file, line, call, s);
  ck_assert_msg(got[0].i32 == want && got[1].i32 == want,
                "%s:%d: %s; cond_br: took %s branch and wrote %d, expected %d",
                file, line, call, got[0].i32 ? "true" : "false", got[1].i32,
                want);
  /* The same compare when only the branch reads the result. */
  p = op_prog(op, PROG_BRANCH_ONLY);
  s = hali_vm_invoke(p->stack, p->module, p->fn, args, nargs, got, 2);
  if (s) abort_with_status(file, line, call, s);
  ck_assert_msg(got[0].i32 == want && got[1].i32 == 7,
                "%s:%d: %s; cond_br (result read by the branch only): took "
                "%s branch (expected %s), second result %d (expected 7)",
                file, line, call, got[0].i32 ? "true" : "false",
                want ? "true" : "false", got[1].i32);
}

/* Tables of cases.  Operands are narrowed to the types in the op's
 * signature: integers keep their low bits, floats are rounded from double
 * (every float written below is exact in its type). */
typedef struct {
  const char *op;
  uint64_t in[3];
  uint64_t want;
} icase_t;

typedef struct {
  const char *op;
  double in[3];
  double want;
} fcase_t;

static hali_value_t int_value(hali_type_t t, uint64_t v) {
  switch (t) {
  case HALI_TYPE_I32: return I32(v);
  case HALI_TYPE_I64: return I64(v);
  default: ck_abort_msg("not an integer type: %s", hali_type_name(t));
  }
  return I32(0);
}

static hali_value_t float_value(hali_type_t t, double v) {
  switch (t) {
  case HALI_TYPE_I32: return I32((int32_t)v);
  case HALI_TYPE_F32: return F32(v);
  case HALI_TYPE_F64: return F64(v);
  default: ck_abort_msg("unexpected type: %s", hali_type_name(t));
  }
  return I32(0);
}

static void run_icases(const char *file, int line, const icase_t *c,
                       size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const hali_op_info_t *info = op_named(c[i].op);
    hali_value_t args[3];
    size_t nargs = info->reg_count - 1u;
    for (size_t k = 0; k < nargs; ++k)
      args[k] = int_value(info->operands[k + 1].type, c[i].in[k]);
    check_op(file, line, c[i].op, int_value(info->operands[0].type, c[i].want),
             args, nargs);
  }
}

static void run_fcases(const char *file, int line, const fcase_t *c,
                       size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const hali_op_info_t *info = op_named(c[i].op);
    hali_value_t args[3];
    size_t nargs = info->reg_count - 1u;
    for (size_t k = 0; k < nargs; ++k)
      args[k] = float_value(info->operands[k + 1].type, c[i].in[k]);
    check_op(file, line, c[i].op,
             float_value(info->operands[0].type, c[i].want), args, nargs);
  }
}

#define RUN_CASES(runner, cases)                                               \
  runner(__FILE__, __LINE__, cases, COUNT_OF(cases))

/* ------------------------------------------------------------------------ */
/* Reference model of the binary integer ops (doc/isa.md), on |bits|-wide
 * values held in uint64_t.  Returns false when the op must fail. */

static bool ref_int_binary(const char *base, unsigned bits, uint64_t a,
                           uint64_t b, uint64_t *out) {
  const uint64_t mask = bits == 32 ? 0xffffffffu : UINT64_MAX;
  const int64_t min = bits == 32 ? INT32_MIN : INT64_MIN;
  a &= mask;
  b &= mask;
  const int64_t sa = bits == 32 ? (int64_t)(int32_t)(uint32_t)a : (int64_t)a;
  const int64_t sb = bits == 32 ? (int64_t)(int32_t)(uint32_t)b : (int64_t)b;
  const unsigned sh = (unsigned)(b & (bits - 1));
  uint64_t r;
  if (!strcmp(base, "add")) r = a + b;
  else if (!strcmp(base, "sub")) r = a - b;
  else if (!strcmp(base, "mul")) r = a * b;
  else if (!strcmp(base, "div.s") || !strcmp(base, "rem.s")) {
    if (sb == 0 || (sa == min && sb == -1)) return false;
    r = (uint64_t)(base[0] == 'd' ? sa / sb : sa % sb);
  } else if (!strcmp(base, "div.u") || !strcmp(base, "rem.u")) {
    if (b == 0) return false;
    r = base[0] == 'd' ? a / b : a % b;
  } else if (!strcmp(base, "min.s")) r = (uint64_t)(sa < sb ? sa : sb);
  else if (!strcmp(base, "max.s")) r = (uint64_t)(sa > sb ? sa : sb);
  else if (!strcmp(base, "min.u")) r = a < b ? a : b;
  else if (!strcmp(base, "max.u")) r = a > b ? a : b;
  else if (!strcmp(base, "and")) r = a & b;
  else if (!strcmp(base, "or")) r = a | b;
  else if (!strcmp(base, "xor")) r = a ^ b;
  else if (!strcmp(base, "shl")) r = a << sh;
  else if (!strcmp(base, "shr.u")) r = a >> sh;
  else if (!strcmp(base, "shr.s"))
    r = (uint64_t)(sa < 0 ? ~(~sa >> sh) : sa >> sh);
  else if (!strcmp(base, "eq")) r = a == b;
  else if (!strcmp(base, "ne")) r = a != b;
  else if (!strcmp(base, "lt.s")) r = sa < sb;
  else if (!strcmp(base, "le.s")) r = sa <= sb;
  else if (!strcmp(base, "gt.s")) r = sa > sb;
  else if (!strcmp(base, "ge.s")) r = sa >= sb;
  else if (!strcmp(base, "lt.u")) r = a < b;
  else if (!strcmp(base, "le.u")) r = a <= b;
  else if (!strcmp(base, "gt.u")) r = a > b;
  else if (!strcmp(base, "ge.u")) r = a >= b;
  else {
    ck_abort_msg("no reference for %s", base);
    return false;
  }
  *out = r & mask;
  return true;
}

static const uint64_t k_i32_values[] = {
    (uint64_t)INT32_MIN, (uint64_t)INT32_MIN + 1, (uint64_t)-7, (uint64_t)-2,
    (uint64_t)-1,        0, 1, 2, 3, 7, INT32_MAX - 1, INT32_MAX};
static const uint64_t k_i64_values[] = {
    (uint64_t)INT64_MIN, (uint64_t)INT64_MIN + 1, (uint64_t)-0x100000000ll,
    (uint64_t)INT32_MIN, (uint64_t)-7, (uint64_t)-1, 0, 1, 3, 7, 0x7fffffff,
    0x80000000, 0xffffffff, 0x100000000, INT64_MAX - 1, INT64_MAX};
static const uint64_t k_shift_amounts[] = {
    (uint64_t)-65, (uint64_t)-64, (uint64_t)-33, (uint64_t)-32,
    (uint64_t)-31, (uint64_t)-1,  0, 1, 7, 31, 32, 33, 63, 64, 65, 127,
    (uint64_t)INT32_MIN, INT32_MAX, (uint64_t)INT64_MIN, 0x100000000,
    0x100000001};

static const char *const k_int_compares[] = {
    "eq", "ne", "lt.s", "le.s", "gt.s", "ge.s", "lt.u", "le.u", "gt.u", "ge.u"};

/* Runs |base|.i|bits| over every pair of |as| x |bs| against the model. */
static void sweep_int(const char *base, unsigned bits, const uint64_t *as,
                      size_t na, const uint64_t *bs, size_t nb) {
  char op[32];
  snprintf(op, sizeof op, "%s.i%u", base, bits);
  const hali_op_info_t *info = op_named(op);
  bool is_compare = false;
  for (size_t i = 0; i < COUNT_OF(k_int_compares); ++i)
    is_compare |= !strcmp(base, k_int_compares[i]);
  for (size_t i = 0; i < na; ++i)
    for (size_t j = 0; j < nb; ++j) {
      hali_value_t args[2] = {int_value(info->operands[1].type, as[i]),
                              int_value(info->operands[2].type, bs[j])};
      uint64_t want;
      if (!ref_int_binary(base, bits, as[i], bs[j], &want)) {
        check_op_fails(__FILE__, __LINE__, op, HALI_STATUS_OUT_OF_RANGE, NULL,
                       args, 2);
        continue;
      }
      check_op(__FILE__, __LINE__, op,
               int_value(info->operands[0].type, want), args, 2);
      if (is_compare)
        check_branch(__FILE__, __LINE__, op, (int32_t)want, args, 2);
    }
}

static void sweep_int_both(const char *base) {
  sweep_int(base, 32, k_i32_values, COUNT_OF(k_i32_values), k_i32_values,
            COUNT_OF(k_i32_values));
  sweep_int(base, 64, k_i64_values, COUNT_OF(k_i64_values), k_i64_values,
            COUNT_OF(k_i64_values));
}

/* ------------------------------------------------------------------------ */
/* const and mov */

/* The value of `const.T LITERAL`; floats come back as their bits (through
 * bitcast, so no host float register touches a signalling nan). */
static uint64_t const_bits(const char *type, const char *literal) {
  char text[256];
  hali_value_t r = {0};
  if (!strcmp(type, "f32") || !strcmp(type, "f64")) {
    const bool f32 = type[1] == '3';
    snprintf(text, sizeof text,
             "func @f() -> %s {\n"
             "  %%x = const.%s %s\n"
             "  %%r = bitcast.%s.%s %%x\n"
             "  return %%r\n"
             "}\n",
             f32 ? "i32" : "i64", type, literal, type, f32 ? "i32" : "i64");
  } else {
    snprintf(text, sizeof text,
             "func @f() -> %s {\n"
             "  %%x = const.%s %s\n"
             "  return %%x\n"
             "}\n",
             type, type, literal);
  }
  hali_status_t s = run(text, "f", NULL, 0, &r, 1);
  if (s) abort_with_status(__FILE__, __LINE__, literal, s);
  return r.type == HALI_TYPE_I32 ? (uint32_t)r.i32 : (uint64_t)r.i64;
}

#define EXPECT_CONST(type, literal, want)                                      \
  ck_assert_msg(const_bits(type, literal) == (uint64_t)(want),                 \
                "const.%s %s = 0x%" PRIx64 ", expected 0x%" PRIx64, type,     \
                literal, const_bits(type, literal), (uint64_t)(want))

START_TEST(const_i32_literals) {
  EXPECT_CONST("i32", "0", 0);
  EXPECT_CONST("i32", "-0", 0);
  EXPECT_CONST("i32", "+5", 5);
  EXPECT_CONST("i32", "-1", 0xffffffffu);
  EXPECT_CONST("i32", "2147483647", 0x7fffffffu);
  EXPECT_CONST("i32", "-2147483648", 0x80000000u);
  EXPECT_CONST("i32", "0x7fffffff", 0x7fffffffu);
  EXPECT_CONST("i32", "0x80000000", 0x80000000u);
  EXPECT_CONST("i32", "-0x80000000", 0x80000000u);
  EXPECT_CONST("i32", "0xffffffff", 0xffffffffu);
  EXPECT_CONST("i32", "4294967295", 0xffffffffu);
  EXPECT_CONST("i32", "0xDeadBeef", 0xdeadbeefu);
  /* Out of range either way is a load error, not a silent wrap. */
  const char *bad[] = {"4294967296", "-2147483649", "0x100000000"};
  for (size_t i = 0; i < COUNT_OF(bad); ++i) {
    char text[128];
    snprintf(text, sizeof text,
             "func @f() -> i32 {\n  %%x = const.i32 %s\n  return %%x\n}\n",
             bad[i]);
    ck_assert_status(hali_test_try_module(text, NULL),
                     HALI_STATUS_INVALID_ARGUMENT, "out of range");
  }
}
END_TEST

START_TEST(const_i64_literals) {
  EXPECT_CONST("i64", "0", 0);
  EXPECT_CONST("i64", "-1", UINT64_MAX);
  EXPECT_CONST("i64", "9223372036854775807", INT64_MAX);
  EXPECT_CONST("i64", "-9223372036854775808", INT64_MIN);
  EXPECT_CONST("i64", "0x7fffffffffffffff", INT64_MAX);
  EXPECT_CONST("i64", "0x8000000000000000", INT64_MIN);
  EXPECT_CONST("i64", "0xffffffffffffffff", UINT64_MAX);
  EXPECT_CONST("i64", "18446744073709551615", UINT64_MAX);
  /* 32-bit-looking literals are not sign-extended from 32 bits. */
  EXPECT_CONST("i64", "0x80000000", 0x80000000u);
  EXPECT_CONST("i64", "0xffffffff", 0xffffffffu);
  EXPECT_CONST("i64", "4294967296", 0x100000000u);
  EXPECT_CONST("i64", "-2147483648", (uint64_t)(int64_t)INT32_MIN);
  EXPECT_CONST("i64", "0x123456789abcdef0", 0x123456789abcdef0u);
  ck_assert_status(
      hali_test_try_module("func @f() -> i64 {\n"
                           "  %x = const.i64 -9223372036854775809\n"
                           "  return %x\n"
                           "}\n",
                           NULL),
      HALI_STATUS_INVALID_ARGUMENT, "out of range");
}
END_TEST

START_TEST(const_f32_literals) {
  EXPECT_CONST("f32", "0.0", 0);
  EXPECT_CONST("f32", "-0.0", 0x80000000u);
  EXPECT_CONST("f32", "1.5", 0x3fc00000u);
  EXPECT_CONST("f32", "-2.5", 0xc0200000u);
  EXPECT_CONST("f32", "0.1", 0x3dcccccdu);
  EXPECT_CONST("f32", "1e-45", 0x00000001u); /* the smallest denormal */
  EXPECT_CONST("f32", "3.4028235e38", 0x7f7fffffu);
  EXPECT_CONST("f32", "inf", 0x7f800000u);
  EXPECT_CONST("f32", "+inf", 0x7f800000u);
  EXPECT_CONST("f32", "-inf", 0xff800000u);
  EXPECT_CONST("f32", "0x1.8p1", 0x40400000u);
  EXPECT_CONST("f32", "-0x1p-149", 0x80000001u);
  EXPECT_CONST("f32", "0x1.fffffep127", 0x7f7fffffu);
  EXPECT_CONST("f32", "bits(0x7fc00001)", 0x7fc00001u);
  EXPECT_CONST("f32", "bits(0x7f800001)", 0x7f800001u); /* signalling */
  EXPECT_CONST("f32", "bits(0xffffffff)", 0xffffffffu);
  EXPECT_CONST("f32", "bits(0x80000000)", 0x80000000u);
  EXPECT_CONST("f32", "bits(1065353216)", 0x3f800000u);
  uint32_t nan = (uint32_t)const_bits("f32", "nan");
  ck_assert_msg((nan & 0x7f800000u) == 0x7f800000u && (nan & 0x7fffffu),
                "const.f32 nan = 0x%08" PRIx32, nan);
  nan = (uint32_t)const_bits("f32", "-nan");
  ck_assert_msg((nan & 0x7f800000u) == 0x7f800000u && (nan & 0x7fffffu),
                "const.f32 -nan = 0x%08" PRIx32, nan);
}
END_TEST

START_TEST(const_f64_literals) {
  EXPECT_CONST("f64", "0.0", 0);
  EXPECT_CONST("f64", "-0.0", 0x8000000000000000u);
  EXPECT_CONST("f64", "0.1", 0x3fb999999999999au);
  EXPECT_CONST("f64", "-2.5", 0xc004000000000000u);
  EXPECT_CONST("f64", "4.9e-324", 1);
  EXPECT_CONST("f64", "1.7976931348623157e308", 0x7fefffffffffffffu);
  EXPECT_CONST("f64", "inf", 0x7ff0000000000000u);
  EXPECT_CONST("f64", "-inf", 0xfff0000000000000u);
  EXPECT_CONST("f64", "0x1.8p1", 0x4008000000000000u);
  EXPECT_CONST("f64", "0x1p-1074", 1);
  EXPECT_CONST("f64", "-0x1.fffffffffffffp1023", 0xffefffffffffffffu);
  EXPECT_CONST("f64", "bits(0x7ff0000000000001)", 0x7ff0000000000001u);
  EXPECT_CONST("f64", "bits(0xfff8000000000000)", 0xfff8000000000000u);
  EXPECT_CONST("f64", "bits(0x8000000000000000)", 0x8000000000000000u);
  EXPECT_CONST("f64", "bits(0xffffffffffffffff)", UINT64_MAX);
  uint64_t nan = const_bits("f64", "nan");
  ck_assert_msg((nan & 0x7ff0000000000000u) == 0x7ff0000000000000u &&
                    (nan & 0xfffffffffffffu),
                "const.f64 nan = 0x%016" PRIx64, nan);
}
END_TEST

START_TEST(mov_every_type) {
  EXPECT("mov.i32", I32(INT32_MIN), I32(INT32_MIN));
  EXPECT("mov.i32", I32(-1), I32(-1));
  EXPECT("mov.i64", I64(0x8000000000000001u), I64(0x8000000000000001u));
  EXPECT("mov.i64", I64(0xffffffff00000000u), I64(0xffffffff00000000u));
  EXPECT("mov.f32", F32(-0.0f), F32(-0.0f));
  EXPECT("mov.f32", F32B(0x7fc00123), F32B(0x7fc00123));
  EXPECT("mov.f32", F32B(0x00000001), F32B(0x00000001));
  EXPECT("mov.f64", F64(-0.0), F64(-0.0));
  EXPECT("mov.f64", F64B(0xfff8000000000123u), F64B(0xfff8000000000123u));
  EXPECT("mov.f64", F64(0x1p-1074), F64(0x1p-1074));
  /* mov copies: writing the source afterwards leaves the copy alone. */
  hali_value_t r[2];
  ck_assert_ok(run("func @f(%a: i64) -> (i64, i64) {\n"
                   "  %b = mov.i64 %a\n"
                   "  %a = add.i64 %a, %a\n"
                   "  return %a, %b\n"
                   "}\n",
                   "f", ARGS(I64(0x123456789)), r, 2));
  ck_assert_int_eq(r[0].i64, 2 * 0x123456789ll);
  ck_assert_int_eq(r[1].i64, 0x123456789ll);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Integer ops, i32 and i64. */

START_TEST(int_add_sub_mul_wrap) {
  static const icase_t cases[] = {
      {"add.i32", {INT32_MAX, 1}, (uint64_t)INT32_MIN},
      {"add.i32", {(uint64_t)INT32_MIN, (uint64_t)INT32_MIN}, 0},
      {"add.i32", {(uint64_t)-1, (uint64_t)-1}, (uint64_t)-2},
      {"add.i32", {0xffffffff, 1}, 0},
      {"add.i32", {(uint64_t)-5, 3}, (uint64_t)-2},
      {"sub.i32", {(uint64_t)INT32_MIN, 1}, INT32_MAX},
      {"sub.i32", {0, (uint64_t)INT32_MIN}, (uint64_t)INT32_MIN},
      {"sub.i32", {5, 7}, (uint64_t)-2},
      {"sub.i32", {INT32_MAX, (uint64_t)-1}, (uint64_t)INT32_MIN},
      {"mul.i32", {INT32_MAX, 2}, (uint64_t)-2},
      {"mul.i32", {(uint64_t)INT32_MIN, (uint64_t)-1}, (uint64_t)INT32_MIN},
      {"mul.i32", {0x10000, 0x10000}, 0},
      {"mul.i32", {65537, 65537}, 131073}, /* 0x1_0002_0001 */
      {"mul.i32", {(uint64_t)-3, 7}, (uint64_t)-21},
      {"mul.i32", {(uint64_t)-3, (uint64_t)-7}, 21},
      {"add.i64", {INT64_MAX, 1}, (uint64_t)INT64_MIN},
      {"add.i64", {0xffffffff, 1}, 0x100000000}, /* no 32-bit carry loss */
      {"add.i64", {(uint64_t)-1, 1}, 0},
      {"sub.i64", {(uint64_t)INT64_MIN, 1}, INT64_MAX},
      {"sub.i64", {0x100000000, 1}, 0xffffffff},
      {"sub.i64", {0, 1}, (uint64_t)-1},
      {"mul.i64", {INT64_MAX, 2}, (uint64_t)-2},
      {"mul.i64", {(uint64_t)INT64_MIN, (uint64_t)-1}, (uint64_t)INT64_MIN},
      {"mul.i64", {0x100000000, 0x100000000}, 0},
      {"mul.i64", {0x100000001, 0x100000001}, 0x200000001},
      {"mul.i64", {0xffffffff, 0xffffffff}, 0xfffffffe00000001},
      {"mul.i64", {(uint64_t)-3, 7}, (uint64_t)-21},
  };
  RUN_CASES(run_icases, cases);
  sweep_int_both("add");
  sweep_int_both("sub");
  sweep_int_both("mul");
}
END_TEST

START_TEST(int_div_rem) {
  static const icase_t cases[] = {
      /* Signed: truncation toward zero; the remainder has the dividend's
       * sign. */
      {"div.s.i32", {7, 2}, 3},
      {"div.s.i32", {(uint64_t)-7, 2}, (uint64_t)-3},
      {"div.s.i32", {7, (uint64_t)-2}, (uint64_t)-3},
      {"div.s.i32", {(uint64_t)-7, (uint64_t)-2}, 3},
      {"div.s.i32", {(uint64_t)-1, 2}, 0},
      {"div.s.i32", {0, (uint64_t)-5}, 0},
      {"div.s.i32", {(uint64_t)INT32_MIN, 1}, (uint64_t)INT32_MIN},
      {"div.s.i32", {(uint64_t)INT32_MIN, 2}, (uint64_t)-1073741824},
      {"div.s.i32", {(uint64_t)INT32_MIN, 3}, (uint64_t)-715827882},
      {"div.s.i32", {(uint64_t)INT32_MIN, (uint64_t)INT32_MIN}, 1},
      {"div.s.i32", {INT32_MAX, (uint64_t)-1}, (uint64_t)-INT32_MAX},
      {"div.s.i32", {(uint64_t)INT32_MIN + 1, (uint64_t)-1}, INT32_MAX},
      {"div.s.i32", {(uint64_t)-1, (uint64_t)INT32_MIN}, 0},
      {"rem.s.i32", {7, 3}, 1},
      {"rem.s.i32", {(uint64_t)-7, 3}, (uint64_t)-1},
      {"rem.s.i32", {7, (uint64_t)-3}, 1},
      {"rem.s.i32", {(uint64_t)-7, (uint64_t)-3}, (uint64_t)-1},
      {"rem.s.i32", {(uint64_t)-6, 3}, 0},
      {"rem.s.i32", {(uint64_t)INT32_MIN, 3}, (uint64_t)-2},
      {"rem.s.i32", {(uint64_t)INT32_MIN, 1}, 0},
      {"rem.s.i32", {(uint64_t)INT32_MIN, INT32_MAX}, (uint64_t)-1},
      {"rem.s.i32", {INT32_MAX, (uint64_t)INT32_MIN}, INT32_MAX},
      {"rem.s.i32", {(uint64_t)-1, (uint64_t)INT32_MIN}, (uint64_t)-1},
      /* Unsigned: negative operands are large. */
      {"div.u.i32", {(uint64_t)-1, 2}, 0x7fffffff},
      {"div.u.i32", {(uint64_t)-7, 10}, 429496728},
      {"div.u.i32", {7, (uint64_t)-1}, 0},
      {"div.u.i32", {(uint64_t)-1, (uint64_t)-1}, 1},
      {"div.u.i32", {(uint64_t)INT32_MIN, (uint64_t)-1}, 0}, /* no overflow */
      {"div.u.i32", {(uint64_t)INT32_MIN, 2}, 0x40000000},
      {"rem.u.i32", {(uint64_t)-1, 10}, 5},
      {"rem.u.i32", {(uint64_t)-7, 10}, 9},
      {"rem.u.i32", {7, (uint64_t)-1}, 7},
      {"rem.u.i32", {(uint64_t)INT32_MIN, (uint64_t)-1}, 0x80000000},
      {"div.s.i64", {(uint64_t)-7, 2}, (uint64_t)-3},
      {"div.s.i64", {7, (uint64_t)-2}, (uint64_t)-3},
      {"div.s.i64", {(uint64_t)-7, (uint64_t)-2}, 3},
      {"div.s.i64", {(uint64_t)INT64_MIN, 3}, (uint64_t)-3074457345618258602},
      {"div.s.i64", {(uint64_t)INT64_MIN, 0xffffffff}, (uint64_t)-2147483648},
      {"div.s.i64", {(uint64_t)INT32_MIN, (uint64_t)-1}, 0x80000000},
      {"div.s.i64", {INT64_MAX, (uint64_t)-1}, (uint64_t)-INT64_MAX},
      {"rem.s.i64", {(uint64_t)-7, 3}, (uint64_t)-1},
      {"rem.s.i64", {7, (uint64_t)-3}, 1},
      {"rem.s.i64", {(uint64_t)INT64_MIN, 3}, (uint64_t)-2},
      {"rem.s.i64", {(uint64_t)INT64_MIN, 0xffffffff}, (uint64_t)-2147483648},
      {"rem.s.i64", {(uint64_t)INT32_MIN, (uint64_t)-1}, 0},
      {"div.u.i64", {(uint64_t)-1, 10}, 1844674407370955161u},
      {"div.u.i64", {(uint64_t)INT64_MIN, (uint64_t)-1}, 0},
      {"div.u.i64", {(uint64_t)-1, 0x100000000}, 0xffffffff},
      {"rem.u.i64", {(uint64_t)-1, 10}, 5},
      {"rem.u.i64", {(uint64_t)INT64_MIN, (uint64_t)-1}, (uint64_t)INT64_MIN},
      {"rem.u.i64", {0x1ffffffff, 0x100000000}, 0xffffffff},
  };
  RUN_CASES(run_icases, cases);
  sweep_int_both("div.s");
  sweep_int_both("div.u");
  sweep_int_both("rem.s");
  sweep_int_both("rem.u");
}
END_TEST

START_TEST(int_div_rem_by_zero) {
  static const char *const ops[] = {"div.s.i32", "div.u.i32", "rem.s.i32",
                                    "rem.u.i32", "div.s.i64", "div.u.i64",
                                    "rem.s.i64", "rem.u.i64"};
  static const int64_t dividends[] = {0, 1, -1, INT32_MIN, INT64_MIN};
  for (size_t i = 0; i < COUNT_OF(ops); ++i) {
    const bool wide = strstr(ops[i], "i64") != NULL;
    for (size_t k = 0; k < COUNT_OF(dividends); ++k) {
      if (wide)
        EXPECT_FAIL(ops[i], HALI_STATUS_OUT_OF_RANGE, "division by zero",
                    I64(dividends[k]), I64(0));
      else
        EXPECT_FAIL(ops[i], HALI_STATUS_OUT_OF_RANGE, "division by zero",
                    I32(dividends[k]), I32(0));
    }
  }
  /* The divisor is tested at the op's width: 0x100000000 is not zero. */
  EXPECT("div.u.i64", I64(0), I64(5), I64(0x100000000));
  /* The backtrace names each frame with its pc and source line. */
  static const char text[] =
      "func @inner(%a: i32, %b: i32) -> i32 {\n" /* 1 */
      "  %one = const.i32 1\n"                   /* 2: pc 0 */
      "  %q = div.s.i32 %a, %b\n"                /* 3: pc 1 */
      "  %q = add.i32 %q, %one\n"
      "  return %q\n"
      "}\n"
      "func @outer(%a: i32) -> i32 {\n" /* 7 */
      "  %z = const.i32 0\n"            /* 8: pc 0 */
      "  %q = call @inner(%a, %z)\n"    /* 9: pc 1 */
      "  return %q\n"
      "}\n";
  hali_value_t r;
  hali_status_t s = run(text, "outer", ARGS(I32(7)), &r, 1);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(hali_status_message(s), "div.s.i32"));
  ck_assert_ptr_nonnull(strstr(hali_status_message(s), "division by zero"));
  ck_assert_uint_eq(hali_status_annotation_count(s), 2);
  ck_assert_str_eq(hali_status_annotation(s, 0), "at @inner@1 (test.hasm:3)");
  ck_assert_str_eq(hali_status_annotation(s, 1), "at @outer@1 (test.hasm:9)");
  hali_status_free(s);
}
END_TEST

START_TEST(int_div_rem_overflow) {
  EXPECT_FAIL("div.s.i32", HALI_STATUS_OUT_OF_RANGE, "overflow",
              I32(INT32_MIN), I32(-1));
  EXPECT_FAIL("rem.s.i32", HALI_STATUS_OUT_OF_RANGE, "overflow",
              I32(INT32_MIN), I32(-1));
  EXPECT_FAIL("div.s.i64", HALI_STATUS_OUT_OF_RANGE, "overflow",
              I64(INT64_MIN), I64(-1));
  EXPECT_FAIL("rem.s.i64", HALI_STATUS_OUT_OF_RANGE, "overflow",
              I64(INT64_MIN), I64(-1));
  /* Only that exact pair overflows. */
  EXPECT("div.s.i64", I64(-(int64_t)INT32_MIN), I64(INT32_MIN), I64(-1));
  EXPECT("div.s.i64", I64(INT64_MIN), I64(INT64_MIN), I64(1));
  EXPECT("rem.s.i64", I64(0), I64(INT64_MIN), I64(INT64_MIN));
  EXPECT("div.s.i64", I64(0xffffffff80000000u), I64(INT64_MIN),
         I64(0x100000000));
}
END_TEST

START_TEST(int_neg_abs_not) {
  static const icase_t cases[] = {
      {"neg.i32", {0}, 0},
      {"neg.i32", {1}, (uint64_t)-1},
      {"neg.i32", {(uint64_t)-1}, 1},
      {"neg.i32", {INT32_MAX}, (uint64_t)-INT32_MAX},
      {"neg.i32", {(uint64_t)INT32_MIN}, (uint64_t)INT32_MIN},
      {"neg.i64", {0}, 0},
      {"neg.i64", {1}, (uint64_t)-1},
      {"neg.i64", {0x80000000}, (uint64_t)-0x80000000ll},
      {"neg.i64", {(uint64_t)INT64_MIN}, (uint64_t)INT64_MIN},
      {"abs.i32", {0}, 0},
      {"abs.i32", {(uint64_t)-1}, 1},
      {"abs.i32", {5}, 5},
      {"abs.i32", {INT32_MAX}, INT32_MAX},
      {"abs.i32", {(uint64_t)-INT32_MAX}, INT32_MAX},
      {"abs.i32", {(uint64_t)INT32_MIN}, (uint64_t)INT32_MIN},
      {"abs.i64", {(uint64_t)-1}, 1},
      {"abs.i64", {(uint64_t)INT32_MIN}, 0x80000000},
      {"abs.i64", {(uint64_t)-INT64_MAX}, INT64_MAX},
      {"abs.i64", {(uint64_t)INT64_MIN}, (uint64_t)INT64_MIN},
      {"not.i32", {0}, (uint64_t)-1},
      {"not.i32", {(uint64_t)INT32_MIN}, INT32_MAX},
      {"not.i32", {0xf0f0f0f0}, 0x0f0f0f0f},
      {"not.i64", {0}, (uint64_t)-1},
      {"not.i64", {0xffffffff}, 0xffffffff00000000},
      {"not.i64", {(uint64_t)INT64_MIN}, INT64_MAX},
  };
  RUN_CASES(run_icases, cases);
}
END_TEST

START_TEST(int_min_max) {
  static const icase_t cases[] = {
      /* Signed and unsigned disagree whenever the signs differ. */
      {"min.s.i32", {(uint64_t)-1, 1}, (uint64_t)-1},
      {"min.u.i32", {(uint64_t)-1, 1}, 1},
      {"max.s.i32", {(uint64_t)-1, 1}, 1},
      {"max.u.i32", {(uint64_t)-1, 1}, (uint64_t)-1},
      {"min.s.i32", {(uint64_t)INT32_MIN, INT32_MAX}, (uint64_t)INT32_MIN},
      {"min.u.i32", {(uint64_t)INT32_MIN, INT32_MAX}, INT32_MAX},
      {"max.s.i32", {(uint64_t)INT32_MIN, INT32_MAX}, INT32_MAX},
      {"max.u.i32", {(uint64_t)INT32_MIN, INT32_MAX}, (uint64_t)INT32_MIN},
      {"min.s.i32", {(uint64_t)-3, (uint64_t)-2}, (uint64_t)-3},
      {"max.u.i32", {(uint64_t)-3, (uint64_t)-2}, (uint64_t)-2},
      {"min.s.i32", {4, 4}, 4},
      {"min.s.i64", {(uint64_t)-1, 1}, (uint64_t)-1},
      {"min.u.i64", {(uint64_t)-1, 1}, 1},
      {"max.s.i64", {(uint64_t)-1, 1}, 1},
      {"max.u.i64", {(uint64_t)-1, 1}, (uint64_t)-1},
      {"min.s.i64", {(uint64_t)INT64_MIN, INT64_MAX}, (uint64_t)INT64_MIN},
      {"max.u.i64", {(uint64_t)INT64_MIN, INT64_MAX}, (uint64_t)INT64_MIN},
      /* High halves matter at 64 bits. */
      {"max.s.i64", {0x100000000, 0xffffffff}, 0x100000000},
      {"min.u.i64", {0x100000000, 0xffffffff}, 0xffffffff},
  };
  RUN_CASES(run_icases, cases);
  sweep_int_both("min.s");
  sweep_int_both("min.u");
  sweep_int_both("max.s");
  sweep_int_both("max.u");
}
END_TEST

START_TEST(int_bitwise) {
  static const icase_t cases[] = {
      {"and.i32", {0xf0f0f0f0, 0xff00ff00}, 0xf000f000},
      {"or.i32", {0xf0f0f0f0, 0xff00ff00}, 0xfff0fff0},
      {"xor.i32", {0xf0f0f0f0, 0xff00ff00}, 0x0ff00ff0},
      {"and.i32", {(uint64_t)-1, (uint64_t)INT32_MIN}, (uint64_t)INT32_MIN},
      {"xor.i32", {(uint64_t)-1, (uint64_t)-1}, 0},
      {"and.i64", {0xffffffff00000000, 0x0000ffffffff0000},
       0x0000ffff00000000},
      {"or.i64", {0xffffffff00000000, 0x0000ffffffff0000}, 0xffffffffffff0000},
      {"xor.i64", {0xffffffff00000000, 0x0000ffffffff0000},
       0xffff0000ffff0000},
      {"or.i64", {(uint64_t)INT64_MIN, 1}, 0x8000000000000001},
  };
  RUN_CASES(run_icases, cases);
  sweep_int_both("and");
  sweep_int_both("or");
  sweep_int_both("xor");
}
END_TEST

START_TEST(int_shifts) {
  static const icase_t cases[] = {
      /* The amount is taken modulo the width, negative amounts too. */
      {"shl.i32", {1, 31}, (uint64_t)INT32_MIN},
      {"shl.i32", {1, 32}, 1},
      {"shl.i32", {1, 33}, 2},
      {"shl.i32", {1, (uint64_t)-1}, (uint64_t)INT32_MIN},
      {"shl.i32", {3, (uint64_t)-32}, 3},
      {"shl.i32", {0x12345678, 4}, 0x23456780},
      {"shl.i32", {(uint64_t)-1, 31}, (uint64_t)INT32_MIN},
      {"shr.s.i32", {(uint64_t)INT32_MIN, 31}, (uint64_t)-1},
      {"shr.s.i32", {(uint64_t)INT32_MIN, 32}, (uint64_t)INT32_MIN},
      {"shr.s.i32", {(uint64_t)INT32_MIN, 1}, 0xc0000000},
      {"shr.s.i32", {(uint64_t)-8, (uint64_t)-31}, (uint64_t)-4},
      {"shr.s.i32", {INT32_MAX, 30}, 1},
      {"shr.s.i32", {(uint64_t)-1, 100}, (uint64_t)-1},
      {"shr.u.i32", {(uint64_t)INT32_MIN, 31}, 1},
      {"shr.u.i32", {(uint64_t)INT32_MIN, 32}, (uint64_t)INT32_MIN},
      {"shr.u.i32", {(uint64_t)-1, 1}, INT32_MAX},
      {"shr.u.i32", {(uint64_t)-1, (uint64_t)-1}, 1},
      {"shl.i64", {1, 63}, (uint64_t)INT64_MIN},
      {"shl.i64", {1, 64}, 1},
      {"shl.i64", {1, 32}, 0x100000000},
      {"shl.i64", {1, (uint64_t)-1}, (uint64_t)INT64_MIN},
      {"shl.i64", {1, 0x100000000}, 1},
      {"shl.i64", {0xffffffff, 16}, 0xffffffff0000},
      {"shr.s.i64", {(uint64_t)INT64_MIN, 63}, (uint64_t)-1},
      {"shr.s.i64", {(uint64_t)INT64_MIN, 64}, (uint64_t)INT64_MIN},
      {"shr.s.i64", {(uint64_t)INT64_MIN, 32}, 0xffffffff80000000},
      {"shr.s.i64", {(uint64_t)-16, (uint64_t)-62}, (uint64_t)-4},
      {"shr.u.i64", {(uint64_t)INT64_MIN, 63}, 1},
      {"shr.u.i64", {(uint64_t)INT64_MIN, 32}, 0x80000000},
      {"shr.u.i64", {(uint64_t)-1, (uint64_t)-1}, 1},
      {"shr.u.i64", {(uint64_t)-1, 65}, INT64_MAX},
  };
  RUN_CASES(run_icases, cases);
  static const char *const kinds[] = {"shl", "shr.s", "shr.u"};
  for (size_t i = 0; i < COUNT_OF(kinds); ++i) {
    sweep_int(kinds[i], 32, k_i32_values, COUNT_OF(k_i32_values),
              k_shift_amounts, COUNT_OF(k_shift_amounts));
    sweep_int(kinds[i], 64, k_i64_values, COUNT_OF(k_i64_values),
              k_shift_amounts, COUNT_OF(k_shift_amounts));
  }
}
END_TEST

START_TEST(int_ctlz) {
  static const icase_t cases[] = {
      {"ctlz.i32", {0}, 32},
      {"ctlz.i32", {1}, 31},
      {"ctlz.i32", {(uint64_t)-1}, 0},
      {"ctlz.i32", {(uint64_t)INT32_MIN}, 0},
      {"ctlz.i32", {INT32_MAX}, 1},
      {"ctlz.i32", {0x0000ffff}, 16},
      {"ctlz.i64", {0}, 64},
      {"ctlz.i64", {1}, 63},
      {"ctlz.i64", {(uint64_t)-1}, 0},
      {"ctlz.i64", {(uint64_t)INT64_MIN}, 0},
      {"ctlz.i64", {INT64_MAX}, 1},
      {"ctlz.i64", {0xffffffff}, 32},
      {"ctlz.i64", {0x100000000}, 31},
  };
  RUN_CASES(run_icases, cases);
  for (unsigned k = 0; k < 64; ++k) {
    if (k < 32) {
      EXPECT("ctlz.i32", I32(31 - k), I32(1u << k));
      EXPECT("ctlz.i32", I32(31 - k), I32((1u << k) | 1u));
    }
    EXPECT("ctlz.i64", I64(63 - k), I64(1ull << k));
    EXPECT("ctlz.i64", I64(63 - k), I64((1ull << k) | 1u));
  }
}
END_TEST

START_TEST(int_compare) {
  static const icase_t cases[] = {
      {"eq.i32", {(uint64_t)-1, 0xffffffff}, 1},
      {"ne.i32", {(uint64_t)-1, 0xffffffff}, 0},
      {"lt.s.i32", {(uint64_t)-1, 1}, 1},
      {"lt.u.i32", {(uint64_t)-1, 1}, 0},
      {"le.s.i32", {(uint64_t)INT32_MIN, INT32_MAX}, 1},
      {"le.u.i32", {(uint64_t)INT32_MIN, INT32_MAX}, 0},
      {"gt.s.i32", {(uint64_t)INT32_MIN, INT32_MAX}, 0},
      {"gt.u.i32", {(uint64_t)INT32_MIN, INT32_MAX}, 1},
      {"ge.s.i32", {5, 5}, 1},
      {"ge.u.i32", {0, (uint64_t)-1}, 0},
      {"le.s.i32", {5, 5}, 1},
      {"lt.s.i32", {5, 5}, 0},
      /* i64 compares see all 64 bits. */
      {"eq.i64", {0x100000000, 0}, 0},
      {"ne.i64", {0x100000000, 0}, 1},
      {"eq.i64", {0x100000001, 1}, 0},
      {"lt.s.i64", {0xffffffff, 0x100000000}, 1},
      {"lt.s.i64", {(uint64_t)INT32_MIN, 0x80000000}, 1},
      {"lt.s.i64", {(uint64_t)-1, 1}, 1},
      {"lt.u.i64", {(uint64_t)-1, 1}, 0},
      {"gt.s.i64", {(uint64_t)INT64_MIN, INT64_MAX}, 0},
      {"gt.u.i64", {(uint64_t)INT64_MIN, INT64_MAX}, 1},
      {"ge.u.i64", {(uint64_t)-1, (uint64_t)-1}, 1},
      {"le.u.i64", {0x100000000, 0xffffffff}, 0},
  };
  RUN_CASES(run_icases, cases);
  for (size_t i = 0; i < COUNT_OF(k_int_compares); ++i)
    sweep_int_both(k_int_compares[i]);
}
END_TEST

START_TEST(int_select) {
  static const icase_t cases[] = {
      {"select.i32", {1, 10, 20}, 10},
      {"select.i32", {0, 10, 20}, 20},
      {"select.i32", {2, 10, 20}, 10},
      {"select.i32", {(uint64_t)-1, 10, 20}, 10},
      {"select.i32", {(uint64_t)INT32_MIN, 10, 20}, 10},
      {"select.i32", {0x100, (uint64_t)-5, INT32_MAX}, (uint64_t)-5},
      {"select.i32", {0, (uint64_t)-5, INT32_MAX}, INT32_MAX},
  };
  RUN_CASES(run_icases, cases);
  EXPECT("select.i64", I64(0x100000000), I32(1), I64(0x100000000), I64(-1));
  EXPECT("select.i64", I64(0x100000000), I32(INT32_MIN), I64(0x100000000),
         I64(-1));
  EXPECT("select.i64", I64(-1), I32(0), I64(0x100000000), I64(-1));
  EXPECT("select.i64", I64(INT64_MIN), I32(7), I64(INT64_MIN), I64(0));
  /* The condition is the i32: a zero low half of a wider value is false. */
  hali_value_t r;
  static const char text[] = "func @f(%x: i64, %a: i64, %b: i64) -> i64 {\n"
                             "  %c = trunc.i64.i32 %x\n"
                             "  %r = select.i64 %c, %a, %b\n"
                             "  return %r\n"
                             "}\n";
  ck_assert_ok(run(text, "f", ARGS(I64(0x100000000), I64(1), I64(2)), &r, 1));
  ck_assert_int_eq(r.i64, 2);
  ck_assert_ok(run(text, "f", ARGS(I64(0x100000001), I64(1), I64(2)), &r, 1));
  ck_assert_int_eq(r.i64, 1);
}
END_TEST

/* Narrow values share 64-bit slots with wider ones: stale upper halves
 * (from an earlier invocation on the same stack, or an earlier callee's
 * window) must not leak into i32/f32 results. */
START_TEST(narrow_values_ignore_stale_slot_bits) {
  static const char text[] =
      "func @dirty(%x: i64) -> i64 {\n"
      "  %a = mov.i64 %x\n"
      "  %b = mov.i64 %x\n"
      "  %c = mov.i64 %x\n"
      "  %d = mov.i64 %x\n"
      "  %e = mov.i64 %x\n"
      "  %f = mov.i64 %x\n"
      "  return %f\n"
      "}\n"
      "func @narrow(%a: i32, %f: f32) -> (i64, i64, i64, i32, f64, i64) {\n"
      "  %five = const.i32 5\n"
      "  %u = ext.u.i32.i64 %a\n"
      "  %s = ext.s.i32.i64 %five\n"
      "  %eq = eq.i32 %a, %five\n"
      "  %e = ext.u.i32.i64 %eq\n"
      "  %z = ctlz.i32 %a\n"
      "  %d = fpext.f32.f64 %f\n"
      "  %c = const.i32 -1\n"
      "  %cu = ext.u.i32.i64 %c\n"
      "  return %u, %s, %e, %z, %d, %cu\n"
      "}\n"
      "func @both(%a: i32, %f: f32) -> (i64, i64, i64, i32, f64, i64) {\n"
      "  %m = const.i64 -1\n"
      "  %x = call @dirty(%m)\n"
      "  %r0, %r1, %r2, %r3, %r4, %r5 = call @narrow(%a, %f)\n"
      "  return %r0, %r1, %r2, %r3, %r4, %r5\n"
      "}\n";
  hali_vm_module_t *m = load(text);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_value_t r[6], one;
  for (int round = 0; round < 2; ++round) {
    ck_assert_ok(hali_vm_invoke(st, m, lookup(m, "dirty"), ARGS(I64(-1)), &one,
                                1));
    ck_assert_ok(hali_vm_invoke(st, m, lookup(m, round ? "both" : "narrow"),
                                ARGS(I32(5), F32(1.5f)), r, 6));
    ck_assert_int_eq(r[0].i64, 5);
    ck_assert_int_eq(r[1].i64, 5);
    ck_assert_int_eq(r[2].i64, 1);
    ck_assert_int_eq(r[3].i32, 29);
    ck_assert(r[4].f64 == 1.5);
    ck_assert_int_eq(r[5].i64, 0xffffffff);
  }
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Float ops, f32 and f64. */

START_TEST(float_add_sub_mul_div) {
  static const fcase_t cases[] = {
      {"add.f32", {1, 2}, 3},
      {"add.f32", {1, 0x1p-24}, 1}, /* a tie: to even */
      {"add.f32", {1, 0x1.8p-23}, 0x1.000004p0},
      {"add.f32", {INFINITY, -INFINITY}, NAN},
      {"add.f32", {INFINITY, 1}, INFINITY},
      {"add.f32", {NAN, 1}, NAN},
      {"add.f32", {-0.0, -0.0}, -0.0},
      {"add.f32", {-0.0, 0.0}, 0.0},
      {"add.f32", {1, -1}, 0.0},
      {"add.f32", {0x1.fffffep127, 0x1p103}, INFINITY},
      {"add.f32", {0x1.fffffep127, 0x1p102}, 0x1.fffffep127},
      {"sub.f32", {1, 0x1p-25}, 1},
      {"sub.f32", {3, 5}, -2},
      {"sub.f32", {INFINITY, INFINITY}, NAN},
      {"sub.f32", {-INFINITY, INFINITY}, -INFINITY},
      {"sub.f32", {-0.0, 0.0}, -0.0},
      {"sub.f32", {0.0, 0.0}, 0.0},
      {"sub.f32", {-0.0, -0.0}, 0.0},
      {"mul.f32", {3, -7}, -21},
      {"mul.f32", {-0.0, 5}, -0.0},
      {"mul.f32", {0.0, -5}, -0.0},
      {"mul.f32", {INFINITY, 0}, NAN},
      {"mul.f32", {-2, INFINITY}, -INFINITY},
      {"mul.f32", {0x1p-149, 0.5}, 0.0},
      {"mul.f32", {-0x1p-149, 0.5}, -0.0},
      {"mul.f32", {0x1p-149, 1.5}, 0x1p-148},
      {"mul.f32", {0x1p127, 2}, INFINITY},
      {"mul.f32", {-0x1p127, 2}, -INFINITY},
      {"mul.f32", {0x1.000002p0, 0x1.000002p0}, 0x1.000004p0},
      {"mul.f32", {0x1.001p0, 0x1.001p0}, 0x1.002p0},
      {"div.f32", {1, 3}, 0x1.555556p-2},
      {"div.f32", {-6, 3}, -2},
      {"div.f32", {1, 0}, INFINITY},
      {"div.f32", {-1, 0}, -INFINITY},
      {"div.f32", {1, -0.0}, -INFINITY},
      {"div.f32", {0, 0}, NAN},
      {"div.f32", {INFINITY, INFINITY}, NAN},
      {"div.f32", {0, -5}, -0.0},
      {"div.f32", {-1, INFINITY}, -0.0},
      {"div.f32", {0x1p-149, 2}, 0.0},
      {"div.f32", {0x1.8p-148, 2}, 0x1p-148},
      {"add.f64", {0.1, 0.2}, 0x1.3333333333334p-2},
      {"add.f64", {1, 0x1p-53}, 1},
      {"add.f64", {1, 0x1.8p-52}, 0x1.0000000000002p0},
      {"add.f64", {INFINITY, -INFINITY}, NAN},
      {"add.f64", {-0.0, -0.0}, -0.0},
      {"add.f64", {-0.0, 0.0}, 0.0},
      {"add.f64", {DBL_MAX, 0x1p970}, INFINITY},
      {"add.f64", {DBL_MAX, 0x1p969}, DBL_MAX},
      {"sub.f64", {1, 0x1p-54}, 1},
      {"sub.f64", {0.3, 0.1}, 0x1.9999999999999p-3},
      {"sub.f64", {-0.0, 0.0}, -0.0},
      {"sub.f64", {0.0, 0.0}, 0.0},
      {"sub.f64", {INFINITY, INFINITY}, NAN},
      {"mul.f64", {-0.0, 5}, -0.0},
      {"mul.f64", {INFINITY, 0}, NAN},
      {"mul.f64", {0x1p-1074, 0.5}, 0.0},
      {"mul.f64", {0x1p-1074, 1.5}, 0x1p-1073},
      {"mul.f64", {0x1p1023, 2}, INFINITY},
      {"mul.f64", {0x1.0000000000001p0, 0x1.0000000000001p0},
       0x1.0000000000002p0},
      {"mul.f64", {0x1.00000004p0, 0x1.00000004p0}, 0x1.00000008p0},
      {"div.f64", {1, 3}, 0x1.5555555555555p-2},
      {"div.f64", {1, 0}, INFINITY},
      {"div.f64", {-1, 0}, -INFINITY},
      {"div.f64", {1, -0.0}, -INFINITY},
      {"div.f64", {0, 0}, NAN},
      {"div.f64", {INFINITY, -INFINITY}, NAN},
      {"div.f64", {0, -5}, -0.0},
      {"div.f64", {0x1p-1074, 2}, 0.0},
  };
  RUN_CASES(run_fcases, cases);
}
END_TEST

START_TEST(float_neg_abs) {
  static const fcase_t cases[] = {
      {"neg.f32", {0.0}, -0.0},          {"neg.f32", {-0.0}, 0.0},
      {"neg.f32", {1.5}, -1.5},          {"neg.f32", {-INFINITY}, INFINITY},
      {"abs.f32", {-0.0}, 0.0},          {"abs.f32", {-1.5}, 1.5},
      {"abs.f32", {1.5}, 1.5},           {"abs.f32", {-INFINITY}, INFINITY},
      {"abs.f32", {-0x1p-149}, 0x1p-149}, {"neg.f64", {0.0}, -0.0},
      {"neg.f64", {-0.0}, 0.0},          {"neg.f64", {INFINITY}, -INFINITY},
      {"abs.f64", {-0.0}, 0.0},          {"abs.f64", {-DBL_MAX}, DBL_MAX},
      {"abs.f64", {-0x1p-1074}, 0x1p-1074},
  };
  RUN_CASES(run_fcases, cases);
  /* Sign-bit operations: nan payloads pass through. */
  EXPECT("neg.f32", F32B(0xffc00001), F32B(0x7fc00001));
  EXPECT("neg.f32", F32B(0x7fc00002), F32B(0xffc00002));
  EXPECT("abs.f32", F32B(0x7fc00003), F32B(0xffc00003));
  EXPECT("abs.f32", F32B(0x7fc00004), F32B(0x7fc00004));
  EXPECT("neg.f64", F64B(0xfff8000000000005u), F64B(0x7ff8000000000005u));
  EXPECT("abs.f64", F64B(0x7ff8000000000006u), F64B(0xfff8000000000006u));
}
END_TEST

START_TEST(float_min_max) {
  static const fcase_t cases[] = {
      {"min.f32", {1, 2}, 1},
      {"min.f32", {2, 1}, 1},
      {"min.f32", {-1, -2}, -2},
      {"min.f32", {NAN, 1}, NAN},
      {"min.f32", {1, NAN}, NAN},
      {"min.f32", {NAN, NAN}, NAN},
      {"min.f32", {-INFINITY, NAN}, NAN},
      {"min.f32", {-0.0, 0.0}, -0.0},
      {"min.f32", {0.0, -0.0}, -0.0},
      {"min.f32", {-0.0, -0.0}, -0.0},
      {"min.f32", {INFINITY, -INFINITY}, -INFINITY},
      {"min.f32", {0x1p-149, 0}, 0},
      {"max.f32", {1, 2}, 2},
      {"max.f32", {-1, -2}, -1},
      {"max.f32", {NAN, 1}, NAN},
      {"max.f32", {1, NAN}, NAN},
      {"max.f32", {INFINITY, NAN}, NAN},
      {"max.f32", {-0.0, 0.0}, 0.0},
      {"max.f32", {0.0, -0.0}, 0.0},
      {"max.f32", {-0.0, -0.0}, -0.0},
      {"max.f32", {-INFINITY, INFINITY}, INFINITY},
      {"max.f32", {-0x1p-149, -0.0}, -0.0},
      {"min.f64", {1, 2}, 1},
      {"min.f64", {NAN, 1}, NAN},
      {"min.f64", {1, NAN}, NAN},
      {"min.f64", {-0.0, 0.0}, -0.0},
      {"min.f64", {0.0, -0.0}, -0.0},
      {"min.f64", {-INFINITY, -DBL_MAX}, -INFINITY},
      {"max.f64", {1, 2}, 2},
      {"max.f64", {NAN, 1}, NAN},
      {"max.f64", {1, NAN}, NAN},
      {"max.f64", {-0.0, 0.0}, 0.0},
      {"max.f64", {0.0, -0.0}, 0.0},
      {"max.f64", {DBL_MAX, INFINITY}, INFINITY},
  };
  RUN_CASES(run_fcases, cases);
}
END_TEST

START_TEST(float_sqrt_floor_ceil) {
  static const fcase_t cases[] = {
      {"sqrt.f32", {4}, 2},
      {"sqrt.f32", {2}, 0x1.6a09e6p0},
      {"sqrt.f32", {0x1p-148}, 0x1p-74},
      {"sqrt.f32", {0.0}, 0.0},
      {"sqrt.f32", {-0.0}, -0.0},
      {"sqrt.f32", {-1}, NAN},
      {"sqrt.f32", {-0x1p-149}, NAN},
      {"sqrt.f32", {INFINITY}, INFINITY},
      {"sqrt.f32", {-INFINITY}, NAN},
      {"sqrt.f32", {NAN}, NAN},
      {"sqrt.f64", {4}, 2},
      {"sqrt.f64", {2}, 0x1.6a09e667f3bcdp0},
      {"sqrt.f64", {0x1p-1074}, 0x1p-537},
      {"sqrt.f64", {-0.0}, -0.0},
      {"sqrt.f64", {-1}, NAN},
      {"sqrt.f64", {INFINITY}, INFINITY},
      {"sqrt.f64", {-INFINITY}, NAN},
      {"floor.f32", {1.5}, 1},
      {"floor.f32", {-1.5}, -2},
      {"floor.f32", {-2.5}, -3},
      {"floor.f32", {0.5}, 0.0},
      {"floor.f32", {-0.5}, -1},
      {"floor.f32", {-0.0}, -0.0},
      {"floor.f32", {0x1p-149}, 0.0},
      {"floor.f32", {-0x1p-149}, -1},
      {"floor.f32", {0x1.fffffep22}, 0x1.fffffcp22}, /* 8388607.5 */
      {"floor.f32", {0x1p30}, 0x1p30},
      {"floor.f32", {-INFINITY}, -INFINITY},
      {"floor.f32", {NAN}, NAN},
      {"ceil.f32", {1.5}, 2},
      {"ceil.f32", {-1.5}, -1},
      {"ceil.f32", {-0.5}, -0.0},
      {"ceil.f32", {0.5}, 1},
      {"ceil.f32", {0x1p-149}, 1},
      {"ceil.f32", {-0x1p-149}, -0.0},
      {"ceil.f32", {0x1.fffffep22}, 0x1p23},
      {"ceil.f32", {INFINITY}, INFINITY},
      {"ceil.f32", {NAN}, NAN},
      {"floor.f64", {-0.5}, -1},
      {"floor.f64", {-0.0}, -0.0},
      {"floor.f64", {2.5}, 2},
      {"floor.f64", {-2.5}, -3},
      {"floor.f64", {0x1.fffffffffffffp51}, 0x1.ffffffffffffep51},
      {"floor.f64", {-0x1p-1074}, -1},
      {"floor.f64", {INFINITY}, INFINITY},
      {"ceil.f64", {-0.5}, -0.0},
      {"ceil.f64", {2.5}, 3},
      {"ceil.f64", {-2.5}, -2},
      {"ceil.f64", {0x1.fffffffffffffp51}, 0x1p52},
      {"ceil.f64", {0x1p-1074}, 1},
      {"ceil.f64", {-INFINITY}, -INFINITY},
      {"ceil.f64", {NAN}, NAN},
  };
  RUN_CASES(run_fcases, cases);
}
END_TEST

START_TEST(float_fma_rounds_once) {
  static const fcase_t cases[] = {
      {"fma.f32", {2, 3, 4}, 10},
      /* x*x = 1 + 2^-12 + 2^-26 loses 2^-26 when rounded on its own. */
      {"fma.f32", {0x1.0008p0, 0x1.0008p0, -0x1.001p0}, 0x1p-26},
      /* x*x = 1 + 2^-11 + 2^-24 is a tie when rounded on its own (to
       * 1 + 2^-11); with the tiny addend the exact sum is above the tie.
       * Rounding through double would also give 1 + 2^-11. */
      {"fma.f32", {0x1.001p0, 0x1.001p0, 0x1p-80}, 0x1.002002p0},
      /* No overflow in the intermediate product. */
      {"fma.f32", {0x1.fffffep127, 2, -0x1.fffffep127}, 0x1.fffffep127},
      {"fma.f32", {-1, 0, -0.0}, -0.0},
      {"fma.f32", {-1, 0, 0.0}, 0.0},
      {"fma.f32", {INFINITY, 0, 1}, NAN},
      {"fma.f32", {INFINITY, 1, -INFINITY}, NAN},
      {"fma.f32", {1, 1, NAN}, NAN},
      {"fma.f64", {2, 3, 4}, 10},
      {"fma.f64", {0x1.00000004p0, 0x1.00000004p0, -0x1.00000008p0}, 0x1p-60},
      /* (1 + 2^-26)(1 + 2^-27) = 1 + 2^-26 + 2^-27 + 2^-53: a tie alone. */
      {"fma.f64", {0x1.0000004p0, 0x1.0000002p0, 0x1p-200},
       0x1.0000006000001p0},
      {"fma.f64", {DBL_MAX, 2, -DBL_MAX}, DBL_MAX},
      {"fma.f64", {INFINITY, 0, 1}, NAN},
  };
  RUN_CASES(run_fcases, cases);
  EXPECT_FP_EXACT("fma.f64", F64(-0.0), F64(-1), F64(0), F64(-0.0));
  EXPECT("fma.f64", F64(0.0), F64(-1), F64(0), F64(0.0));
  /* For contrast: the same inputs through mul + add. */
  EXPECT("mul.f32", F32(0x1.001p0f), F32(0x1.0008p0f), F32(0x1.0008p0f));
  EXPECT("mul.f32", F32(0x1.002p0f), F32(0x1.001p0f), F32(0x1.001p0f));
  EXPECT("mul.f64", F64(0x1.0000006p0), F64(0x1.0000004p0), F64(0x1.0000002p0));
}
END_TEST

static const char *const k_float_compares[] = {"eq", "ne", "lt",
                                               "le", "gt", "ge"};

static int ref_float_compare(const char *rel, double a, double b) {
  if (!strcmp(rel, "eq")) return a == b;
  if (!strcmp(rel, "ne")) return !(a == b); /* unordered: true with nan */
  if (!strcmp(rel, "lt")) return a < b;
  if (!strcmp(rel, "le")) return a <= b;
  if (!strcmp(rel, "gt")) return a > b;
  return a >= b;
}

START_TEST(float_compare) {
  static const fcase_t cases[] = {
      {"eq.f32", {-0.0, 0.0}, 1},      {"eq.f32", {NAN, NAN}, 0},
      {"eq.f32", {NAN, 1}, 0},         {"eq.f32", {INFINITY, INFINITY}, 1},
      {"ne.f32", {NAN, NAN}, 1},       {"ne.f32", {1, NAN}, 1},
      {"ne.f32", {-0.0, 0.0}, 0},      {"ne.f32", {1, 2}, 1},
      {"lt.f32", {-0.0, 0.0}, 0},      {"lt.f32", {NAN, 1}, 0},
      {"lt.f32", {1, NAN}, 0},         {"lt.f32", {-INFINITY, INFINITY}, 1},
      {"le.f32", {-0.0, 0.0}, 1},      {"le.f32", {NAN, NAN}, 0},
      {"gt.f32", {0.0, -0.0}, 0},      {"gt.f32", {NAN, 1}, 0},
      {"gt.f32", {INFINITY, 0x1.fffffep127}, 1},
      {"ge.f32", {0.0, -0.0}, 1},      {"ge.f32", {1, NAN}, 0},
      {"eq.f64", {-0.0, 0.0}, 1},      {"eq.f64", {NAN, NAN}, 0},
      {"ne.f64", {NAN, NAN}, 1},       {"ne.f64", {-0.0, 0.0}, 0},
      {"lt.f64", {NAN, 1}, 0},         {"lt.f64", {0x1p-1074, 0x1p-1073}, 1},
      {"le.f64", {NAN, 1}, 0},         {"gt.f64", {1, NAN}, 0},
      {"ge.f64", {NAN, NAN}, 0},       {"ge.f64", {-INFINITY, -INFINITY}, 1},
  };
  RUN_CASES(run_fcases, cases);
  /* Every pair of interesting values, compared directly and through a
   * cond_br on the result. */
  static const double values[] = {-INFINITY, -0x1p100, -1,       -0x1p-149,
                                  -0.0,      0.0,      0x1p-149, 1,
                                  0x1p100,   INFINITY, NAN};
  for (size_t r = 0; r < COUNT_OF(k_float_compares); ++r)
    for (int wide = 0; wide < 2; ++wide) {
      char op[16];
      snprintf(op, sizeof op, "%s.f%d", k_float_compares[r], wide ? 64 : 32);
      for (size_t i = 0; i < COUNT_OF(values); ++i)
        for (size_t j = 0; j < COUNT_OF(values); ++j) {
          hali_value_t a = wide ? F64(values[i]) : F32(values[i]);
          hali_value_t b = wide ? F64(values[j]) : F32(values[j]);
          double da = wide ? a.f64 : (double)a.f32;
          double db = wide ? b.f64 : (double)b.f32;
          int32_t want = ref_float_compare(k_float_compares[r], da, db);
          hali_value_t args[2] = {a, b};
          check_op(__FILE__, __LINE__, op, I32(want), args, 2);
          check_branch(__FILE__, __LINE__, op, want, args, 2);
        }
    }
}
END_TEST

START_TEST(float_select) {
  static const fcase_t cases[] = {
      {"select.f32", {1, 1.5, 2.5}, 1.5},
      {"select.f32", {0, 1.5, 2.5}, 2.5},
      {"select.f32", {-1, -0.0, 0.0}, -0.0},
      {"select.f32", {0, -0.0, 0.0}, 0.0},
      {"select.f32", {INT32_MIN, INFINITY, NAN}, INFINITY},
      {"select.f32", {0, INFINITY, NAN}, NAN},
      {"select.f64", {2, 1.5, 2.5}, 1.5},
      {"select.f64", {0, 1.5, 2.5}, 2.5},
      {"select.f64", {INT32_MIN, -0.0, 0.0}, -0.0},
      {"select.f64", {0, 0.0, -0.0}, -0.0},
  };
  RUN_CASES(run_fcases, cases);
  EXPECT("select.f32", F32B(0x7fc00123), I32(7), F32B(0x7fc00123), F32(0));
  EXPECT("select.f64", F64B(0xfff8000000000123u), I32(0), F64(0),
         F64B(0xfff8000000000123u));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Conversions. */

START_TEST(convert_trunc_ext) {
  static const icase_t cases[] = {
      {"trunc.i64.i32", {0x123456789}, 0x23456789},
      {"trunc.i64.i32", {(uint64_t)-1}, (uint64_t)-1},
      {"trunc.i64.i32", {0x80000000}, (uint64_t)INT32_MIN},
      {"trunc.i64.i32", {0x7fffffff}, INT32_MAX},
      {"trunc.i64.i32", {0xffffffff00000000}, 0},
      {"trunc.i64.i32", {(uint64_t)INT64_MIN}, 0},
      {"trunc.i64.i32", {0x1ffffffff}, (uint64_t)-1},
      {"ext.s.i32.i64", {(uint64_t)-1}, (uint64_t)-1},
      {"ext.s.i32.i64", {(uint64_t)INT32_MIN}, 0xffffffff80000000},
      {"ext.s.i32.i64", {INT32_MAX}, 0x7fffffff},
      {"ext.s.i32.i64", {0}, 0},
      {"ext.u.i32.i64", {(uint64_t)-1}, 0xffffffff},
      {"ext.u.i32.i64", {(uint64_t)INT32_MIN}, 0x80000000},
      {"ext.u.i32.i64", {(uint64_t)-5}, 0xfffffffb},
      {"ext.u.i32.i64", {5}, 5},
  };
  RUN_CASES(run_icases, cases);
}
END_TEST

START_TEST(convert_int_to_float) {
  /* Round to nearest, ties to even. */
  EXPECT("sitofp.i32.f32", F32(16777216.0f), I32(16777217));
  EXPECT("sitofp.i32.f32", F32(16777218.0f), I32(16777218));
  EXPECT("sitofp.i32.f32", F32(16777220.0f), I32(16777219));
  EXPECT("sitofp.i32.f32", F32(-16777216.0f), I32(-16777217));
  EXPECT("sitofp.i32.f32", F32(-0x1p31f), I32(INT32_MIN));
  EXPECT("sitofp.i32.f32", F32(0x1p31f), I32(INT32_MAX));
  EXPECT("sitofp.i32.f32", F32(2147483520.0f), I32(0x7fffffbf));
  EXPECT("sitofp.i32.f32", F32(0x1p31f), I32(0x7fffffc0));
  EXPECT("sitofp.i32.f32", F32(-1.0f), I32(-1));
  EXPECT("sitofp.i32.f32", F32(0.0f), I32(0));
  EXPECT("uitofp.i32.f32", F32(0x1p32f), I32(-1));
  EXPECT("uitofp.i32.f32", F32(0x1p31f), I32(INT32_MIN));
  EXPECT("uitofp.i32.f32", F32(0x1p31f), I32(0x80000080));
  EXPECT("uitofp.i32.f32", F32(0x1.000002p31f), I32(0x80000081));
  EXPECT("uitofp.i32.f32", F32(0x1.fffffep31f), I32(0xffffff7f));
  EXPECT("uitofp.i32.f32", F32(0x1p32f), I32(0xffffff80));
  EXPECT("uitofp.i32.f32", F32(16777216.0f), I32(16777217));
  EXPECT("uitofp.i32.f32", F32(0.0f), I32(0));
  EXPECT("sitofp.i32.f64", F64(-2147483648.0), I32(INT32_MIN));
  EXPECT("sitofp.i32.f64", F64(2147483647.0), I32(INT32_MAX));
  EXPECT("sitofp.i32.f64", F64(-1.0), I32(-1));
  EXPECT("sitofp.i32.f64", F64(0.0), I32(0));
  EXPECT("uitofp.i32.f64", F64(4294967295.0), I32(-1));
  EXPECT("uitofp.i32.f64", F64(2147483648.0), I32(INT32_MIN));
  EXPECT("uitofp.i32.f64", F64(2147483649.0), I32(0x80000001));
  /* i64 -> f32 must round once: through double, 2^60 + 2^36 + 1 would
   * first become the tie 2^60 + 2^36 and then round to even (2^60). */
  EXPECT_FP_EXACT("sitofp.i64.f32", F32(0x1.000002p60f),
                  I64(0x1000001000000001));
  EXPECT("sitofp.i64.f32", F32(0x1p60f), I64(0x1000001000000000));
  EXPECT_FP_EXACT("sitofp.i64.f32", F32(-0x1.000002p60f),
                  I64(-0x1000001000000001));
  EXPECT("sitofp.i64.f32", F32(-0x1p63f), I64(INT64_MIN));
  EXPECT("sitofp.i64.f32", F32(0x1p63f), I64(INT64_MAX));
  EXPECT("sitofp.i64.f32", F32(16777216.0f), I64(16777217));
  EXPECT("sitofp.i64.f32", F32(-1.0f), I64(-1));
  EXPECT("uitofp.i64.f32", F32(0x1p64f), I64(-1));
  EXPECT("uitofp.i64.f32", F32(0x1p63f), I64(INT64_MIN));
  EXPECT_FP_EXACT("uitofp.i64.f32", F32(0x1.000002p63f),
                  I64(0x8000008000000001));
  EXPECT("uitofp.i64.f32", F32(0x1p63f), I64(0x8000008000000000));
  EXPECT_FP_EXACT("uitofp.i64.f32", F32(0x1.fffffep63f),
                  I64(0xffffff7fffffffff));
  EXPECT("uitofp.i64.f32", F32(0x1p64f), I64(0xffffff8000000000));
  EXPECT("sitofp.i64.f64", F64(0x1p53), I64(0x20000000000001));
  EXPECT("sitofp.i64.f64", F64(0x1.0000000000002p53), I64(0x20000000000003));
  EXPECT("sitofp.i64.f64", F64(-0x1p53), I64(-0x20000000000001));
  EXPECT("sitofp.i64.f64", F64(-0x1p63), I64(INT64_MIN));
  EXPECT("sitofp.i64.f64", F64(0x1p63), I64(INT64_MAX));
  EXPECT("sitofp.i64.f64", F64(0.0), I64(0));
  EXPECT("uitofp.i64.f64", F64(0x1p64), I64(-1));
  EXPECT("uitofp.i64.f64", F64(0x1p63), I64(INT64_MIN));
  EXPECT("uitofp.i64.f64", F64(0x1p63), I64(0x8000000000000400));
  EXPECT("uitofp.i64.f64", F64(0x1.0000000000001p63), I64(0x8000000000000401));
  EXPECT("uitofp.i64.f64", F64(0x1.0000000000002p63), I64(0x8000000000000c00));
  EXPECT("uitofp.i64.f64", F64(4294967295.0), I64(0xffffffff));
}
END_TEST

START_TEST(convert_float_to_int_saturates) {
  /* f32 -> i32 */
  EXPECT("fptosi.f32.i32", I32(0), F32(NAN));
  EXPECT("fptosi.f32.i32", I32(0), F32B(0xffc00000));
  EXPECT("fptosi.f32.i32", I32(INT32_MAX), F32(INFINITY));
  EXPECT("fptosi.f32.i32", I32(INT32_MIN), F32(-INFINITY));
  EXPECT("fptosi.f32.i32", I32(INT32_MAX), F32(0x1p31f));
  EXPECT("fptosi.f32.i32", I32(2147483520), F32(0x1.fffffep30f));
  EXPECT("fptosi.f32.i32", I32(INT32_MIN), F32(-0x1p31f));
  EXPECT("fptosi.f32.i32", I32(INT32_MIN), F32(-0x1.000002p31f));
  EXPECT("fptosi.f32.i32", I32(INT32_MAX), F32(1e10f));
  EXPECT("fptosi.f32.i32", I32(INT32_MIN), F32(-1e10f));
  EXPECT("fptosi.f32.i32", I32(0), F32(-0.9f));
  EXPECT("fptosi.f32.i32", I32(0), F32(0.9f));
  EXPECT("fptosi.f32.i32", I32(0), F32(-0.0f));
  EXPECT("fptosi.f32.i32", I32(0), F32(0x1p-149f));
  EXPECT("fptosi.f32.i32", I32(-1), F32(-1.5f));
  EXPECT("fptosi.f32.i32", I32(-2), F32(-2.5f));
  EXPECT("fptosi.f32.i32", I32(1), F32(1.99f));
  EXPECT("fptoui.f32.i32", I32(0), F32(NAN));
  EXPECT("fptoui.f32.i32", I32(0xffffffff), F32(INFINITY));
  EXPECT("fptoui.f32.i32", I32(0), F32(-INFINITY));
  EXPECT("fptoui.f32.i32", I32(0), F32(-1.0f));
  EXPECT("fptoui.f32.i32", I32(0), F32(-0.9f));
  EXPECT("fptoui.f32.i32", I32(0), F32(-0x1p31f));
  EXPECT("fptoui.f32.i32", I32(0xffffffff), F32(0x1p32f));
  EXPECT("fptoui.f32.i32", I32(0xffffffff), F32(1e20f));
  EXPECT("fptoui.f32.i32", I32(0xffffff00), F32(0x1.fffffep31f));
  EXPECT("fptoui.f32.i32", I32(0x80000000), F32(0x1p31f));
  EXPECT("fptoui.f32.i32", I32(3), F32(3.7f));
  /* f32 -> i64 */
  EXPECT("fptosi.f32.i64", I64(0), F32(NAN));
  EXPECT("fptosi.f32.i64", I64(INT64_MAX), F32(INFINITY));
  EXPECT("fptosi.f32.i64", I64(INT64_MIN), F32(-INFINITY));
  EXPECT("fptosi.f32.i64", I64(INT64_MAX), F32(0x1p63f));
  EXPECT("fptosi.f32.i64", I64(INT64_MIN), F32(-0x1p63f));
  EXPECT("fptosi.f32.i64", I64(0x7fffff8000000000), F32(0x1.fffffep62f));
  EXPECT("fptosi.f32.i64", I64(INT64_MAX), F32(1e30f));
  EXPECT("fptosi.f32.i64", I64(INT64_MIN), F32(-1e30f));
  EXPECT("fptosi.f32.i64", I64(0x80000000), F32(0x1p31f));
  EXPECT("fptosi.f32.i64", I64(-1), F32(-1.5f));
  EXPECT("fptosi.f32.i64", I64(0), F32(-0.9f));
  EXPECT("fptoui.f32.i64", I64(0), F32(NAN));
  EXPECT("fptoui.f32.i64", I64(-1), F32(INFINITY));
  EXPECT("fptoui.f32.i64", I64(0), F32(-INFINITY));
  EXPECT("fptoui.f32.i64", I64(-1), F32(0x1p64f));
  EXPECT("fptoui.f32.i64", I64(-1), F32(1e30f));
  EXPECT("fptoui.f32.i64", I64(0xffffff0000000000), F32(0x1.fffffep63f));
  EXPECT("fptoui.f32.i64", I64(0x8000000000000000), F32(0x1p63f));
  EXPECT("fptoui.f32.i64", I64(0x100000000), F32(0x1p32f));
  EXPECT("fptoui.f32.i64", I64(0), F32(-1.0f));
  EXPECT("fptoui.f32.i64", I64(0), F32(-0.9f));
  /* f64 -> i32 */
  EXPECT("fptosi.f64.i32", I32(0), F64(NAN));
  EXPECT("fptosi.f64.i32", I32(0), F64B(0xfff8000000000000u));
  EXPECT("fptosi.f64.i32", I32(INT32_MAX), F64(INFINITY));
  EXPECT("fptosi.f64.i32", I32(INT32_MIN), F64(-INFINITY));
  EXPECT("fptosi.f64.i32", I32(INT32_MAX), F64(2147483647.9));
  EXPECT("fptosi.f64.i32", I32(INT32_MAX), F64(2147483648.0));
  EXPECT("fptosi.f64.i32", I32(2147483646), F64(2147483646.5));
  EXPECT("fptosi.f64.i32", I32(INT32_MIN), F64(-2147483648.9));
  EXPECT("fptosi.f64.i32", I32(INT32_MIN), F64(-2147483649.0));
  EXPECT("fptosi.f64.i32", I32(INT32_MAX), F64(1e300));
  EXPECT("fptosi.f64.i32", I32(INT32_MIN), F64(-1e300));
  EXPECT("fptosi.f64.i32", I32(0), F64(-0.9));
  EXPECT("fptosi.f64.i32", I32(0), F64(0x1p-1074));
  EXPECT("fptosi.f64.i32", I32(-2), F64(-2.5));
  EXPECT("fptoui.f64.i32", I32(0), F64(NAN));
  EXPECT("fptoui.f64.i32", I32(0xffffffff), F64(INFINITY));
  EXPECT("fptoui.f64.i32", I32(0), F64(-INFINITY));
  EXPECT("fptoui.f64.i32", I32(0xffffffff), F64(4294967295.5));
  EXPECT("fptoui.f64.i32", I32(0xffffffff), F64(4294967296.0));
  EXPECT("fptoui.f64.i32", I32(0xffffffff), F64(1e20));
  EXPECT("fptoui.f64.i32", I32(0xfffffffe), F64(4294967294.9));
  EXPECT("fptoui.f64.i32", I32(0x80000000), F64(2147483648.5));
  EXPECT("fptoui.f64.i32", I32(0), F64(-0.9));
  EXPECT("fptoui.f64.i32", I32(0), F64(-1e20));
  /* f64 -> i64 */
  EXPECT("fptosi.f64.i64", I64(0), F64(NAN));
  EXPECT("fptosi.f64.i64", I64(INT64_MAX), F64(INFINITY));
  EXPECT("fptosi.f64.i64", I64(INT64_MIN), F64(-INFINITY));
  EXPECT("fptosi.f64.i64", I64(INT64_MAX), F64(0x1p63));
  EXPECT("fptosi.f64.i64", I64(INT64_MAX), F64(1e19));
  EXPECT("fptosi.f64.i64", I64(0x7ffffffffffffc00), F64(0x1.fffffffffffffp62));
  EXPECT("fptosi.f64.i64", I64(INT64_MIN), F64(-0x1p63));
  EXPECT("fptosi.f64.i64", I64(INT64_MIN), F64(-0x1.0000000000001p63));
  EXPECT("fptosi.f64.i64", I64(-4503599627370495), F64(-4503599627370495.5));
  EXPECT("fptosi.f64.i64", I64(0), F64(-0.9));
  EXPECT("fptosi.f64.i64", I64(-2), F64(-2.5));
  EXPECT("fptoui.f64.i64", I64(0), F64(NAN));
  EXPECT("fptoui.f64.i64", I64(-1), F64(INFINITY));
  EXPECT("fptoui.f64.i64", I64(0), F64(-INFINITY));
  EXPECT("fptoui.f64.i64", I64(-1), F64(0x1p64));
  EXPECT("fptoui.f64.i64", I64(-1), F64(1e300));
  EXPECT("fptoui.f64.i64", I64(0xfffffffffffff800), F64(0x1.fffffffffffffp63));
  EXPECT("fptoui.f64.i64", I64(0xc000000000000000), F64(0x1.8p63));
  EXPECT("fptoui.f64.i64", I64(0x8000000000000000), F64(0x1p63));
  EXPECT("fptoui.f64.i64", I64(0), F64(-0.9));
  EXPECT("fptoui.f64.i64", I64(0), F64(-1.0));
}
END_TEST

START_TEST(convert_fpext_fptrunc) {
  EXPECT("fpext.f32.f64", F64B(0x3fb99999a0000000u), F32(0.1f));
  EXPECT("fpext.f32.f64", F64(-0.0), F32(-0.0f));
  EXPECT("fpext.f32.f64", F64(INFINITY), F32(INFINITY));
  EXPECT("fpext.f32.f64", F64(-INFINITY), F32(-INFINITY));
  EXPECT("fpext.f32.f64", F64(NAN), F32(NAN));
  EXPECT("fpext.f32.f64", F64(0x1p-149), F32(0x1p-149f));
  EXPECT("fpext.f32.f64", F64(0x1.fffffep127), F32(0x1.fffffep127f));
  EXPECT("fptrunc.f64.f32", F32B(0x3dcccccd), F64(0.1));
  EXPECT("fptrunc.f64.f32", F32(INFINITY), F64(1e39));
  EXPECT("fptrunc.f64.f32", F32(-INFINITY), F64(-1e39));
  EXPECT("fptrunc.f64.f32", F32(INFINITY), F64(DBL_MAX));
  EXPECT("fptrunc.f64.f32", F32(0x1.fffffep127f), F64(0x1.fffffefffffffp127));
  EXPECT("fptrunc.f64.f32", F32(INFINITY), F64(0x1.ffffffp127)); /* tie */
  EXPECT("fptrunc.f64.f32", F32(0.0f), F64(0x1p-150));             /* tie */
  EXPECT("fptrunc.f64.f32", F32(-0.0f), F64(-0x1p-150));
  EXPECT("fptrunc.f64.f32", F32(0x1p-149f), F64(0x1.8p-150));
  EXPECT("fptrunc.f64.f32", F32(0x1p-148f), F64(0x1.8p-149)); /* tie */
  EXPECT("fptrunc.f64.f32", F32(1.0f), F64(0x1.000001p0));    /* tie */
  EXPECT("fptrunc.f64.f32", F32(0x1.000002p0f), F64(0x1.0000010000001p0));
  EXPECT("fptrunc.f64.f32", F32(0x1.000004p0f), F64(0x1.000003p0)); /* tie */
  EXPECT("fptrunc.f64.f32", F32(-0.0f), F64(-0.0));
  EXPECT("fptrunc.f64.f32", F32(NAN), F64(NAN));
  EXPECT("fptrunc.f64.f32", F32(INFINITY), F64(INFINITY));
}
END_TEST

START_TEST(convert_bitcast) {
  EXPECT("bitcast.i32.f32", F32(1.0f), I32(0x3f800000));
  EXPECT("bitcast.i32.f32", F32(-0.0f), I32(0x80000000));
  EXPECT("bitcast.i32.f32", F32(0x1p-149f), I32(1));
  EXPECT("bitcast.i32.f32", F32B(0x7fc00001), I32(0x7fc00001));
  EXPECT("bitcast.i32.f32", F32B(0xffffffff), I32(-1));
  EXPECT("bitcast.f32.i32", I32(0x3f800000), F32(1.0f));
  EXPECT("bitcast.f32.i32", I32(INT32_MIN), F32(-0.0f));
  EXPECT("bitcast.f32.i32", I32(0xff800000), F32(-INFINITY));
  EXPECT("bitcast.f32.i32", I32(1), F32(0x1p-149f));
  EXPECT("bitcast.i64.f64", F64(1.0), I64(0x3ff0000000000000));
  EXPECT("bitcast.i64.f64", F64(-0.0), I64(INT64_MIN));
  EXPECT("bitcast.i64.f64", F64(0x1p-1074), I64(1));
  EXPECT("bitcast.i64.f64", F64B(0xfff8000000000001u), I64(0xfff8000000000001));
  EXPECT("bitcast.f64.i64", I64(0xc000000000000000), F64(-2.0));
  EXPECT("bitcast.f64.i64", I64(INT64_MIN), F64(-0.0));
  EXPECT("bitcast.f64.i64", I64(1), F64(0x1p-1074));
  /* Round trips inside the VM keep every bit, signalling nans included. */
  static const char text[] = "func @f(%a: i32, %b: i64) -> (i32, i64) {\n"
                             "  %x = bitcast.i32.f32 %a\n"
                             "  %y = bitcast.i64.f64 %b\n"
                             "  %c = bitcast.f32.i32 %x\n"
                             "  %d = bitcast.f64.i64 %y\n"
                             "  return %c, %d\n"
                             "}\n";
  static const uint64_t patterns[] = {
      0x7f800001ull, 0xff800001ull, 0x7fbfffffull, 0x80000000ull,
      0x7ff0000000000001ull, 0xfff4000000000000ull, 0x8000000000000000ull,
      0x0000000000000001ull};
  for (size_t i = 0; i < COUNT_OF(patterns); ++i) {
    hali_value_t r[2];
    ck_assert_ok(
        run(text, "f", ARGS(I32(patterns[i]), I64(patterns[i])), r, 2));
    ck_assert_uint_eq((uint32_t)r[0].i32, (uint32_t)patterns[i]);
    ck_assert_uint_eq((uint64_t)r[1].i64, patterns[i]);
  }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The ops of format 1.2 (vm/ops.def): integer fma, narrow conversions and
 * the rest of the float set. */

START_TEST(int_fma) {
  static const icase_t cases[] = {
      {"fma.i32", {2, 3, 4}, 10},
      {"fma.i32", {(uint64_t)-2, 3, 4}, (uint64_t)-2},
      {"fma.i32", {0x10000, 0x10000, 5}, 5}, /* 2^32 wraps to 0 */
      {"fma.i32", {INT32_MAX, 2, 2}, 0},
      {"fma.i32", {(uint64_t)INT32_MIN, (uint64_t)-1, 0}, (uint64_t)INT32_MIN},
      {"fma.i32", {(uint64_t)-1, (uint64_t)-1, (uint64_t)-1}, 0},
      {"fma.i32", {0xffffffff, 0xffffffff, 0xffffffff}, 0},
      {"fma.i64", {2, 3, 4}, 10},
      {"fma.i64", {0x100000000, 0x100000000, 7}, 7},
      {"fma.i64", {0x100000000, 3, 1}, 0x300000001},
      {"fma.i64", {INT64_MAX, 2, 2}, 0},
      {"fma.i64", {(uint64_t)INT64_MIN, (uint64_t)-1, 1}, (uint64_t)INT64_MIN + 1},
      {"fma.i64", {(uint64_t)-3, 5, 20}, 5},
  };
  RUN_CASES(run_icases, cases);
  /* Against the definition (mul then add, both wrapping) on boundary
   * values. */
  for (size_t i = 0; i < COUNT_OF(k_i32_values); ++i)
    for (size_t j = 0; j < COUNT_OF(k_i32_values); j += 3)
      for (size_t k = 0; k < COUNT_OF(k_i32_values); k += 5) {
        const uint32_t a = (uint32_t)k_i32_values[i],
                       b = (uint32_t)k_i32_values[j],
                       c = (uint32_t)k_i32_values[k];
        EXPECT("fma.i32", I32(a * b + c), I32(a), I32(b), I32(c));
      }
  for (size_t i = 0; i < COUNT_OF(k_i64_values); ++i)
    for (size_t j = 0; j < COUNT_OF(k_i64_values); j += 3)
      for (size_t k = 0; k < COUNT_OF(k_i64_values); k += 5) {
        const uint64_t a = k_i64_values[i], b = k_i64_values[j],
                       c = k_i64_values[k];
        EXPECT("fma.i64", I64(a * b + c), I64(a), I64(b), I64(c));
      }
}
END_TEST

START_TEST(int_nz) {
  static const icase_t cases[] = {
      {"nz.i32", {0}, 0},          {"nz.i32", {1}, 1},
      {"nz.i32", {(uint64_t)-1}, 1}, {"nz.i32", {(uint64_t)INT32_MIN}, 1},
      {"nz.i32", {0x100000000}, 0}, /* only the i32's bits count */
      {"nz.i64", {0}, 0},          {"nz.i64", {0x100000000}, 1},
      {"nz.i64", {(uint64_t)INT64_MIN}, 1}, {"nz.i64", {(uint64_t)-1}, 1},
  };
  RUN_CASES(run_icases, cases);
}
END_TEST

/* ne.o and the unordered compares (.u: true when either is nan), against
 * a model built on isnan and C's ordered relations, on every pair of the
 * values float_compare uses; directly and through a cond_br. */
static int ref_float_compare_ou(const char *rel, bool unordered, double a,
                                double b) {
  if (isnan(a) || isnan(b)) return unordered;
  if (!strcmp(rel, "ne")) return a != b;
  return ref_float_compare(rel, a, b);
}

START_TEST(float_compare_ordered_unordered) {
  static const fcase_t cases[] = {
      {"ne.o.f32", {NAN, 1}, 0},   {"ne.o.f32", {1, NAN}, 0},
      {"ne.o.f32", {NAN, NAN}, 0}, {"ne.o.f32", {-0.0, 0.0}, 0},
      {"ne.o.f32", {1, 2}, 1},     {"eq.u.f32", {NAN, 1}, 1},
      {"eq.u.f32", {-0.0, 0.0}, 1}, {"eq.u.f32", {1, 2}, 0},
      {"lt.u.f32", {NAN, 1}, 1},   {"lt.u.f32", {1, 1}, 0},
      {"lt.u.f32", {-0.0, 0.0}, 0}, {"le.u.f32", {1, NAN}, 1},
      {"le.u.f32", {2, 1}, 0},     {"gt.u.f32", {NAN, NAN}, 1},
      {"gt.u.f32", {0.0, -0.0}, 0}, {"ge.u.f32", {NAN, INFINITY}, 1},
      {"ge.u.f32", {-INFINITY, 1}, 0},
      {"ne.o.f64", {NAN, 1}, 0},   {"ne.o.f64", {0x1p-1074, 0.0}, 1},
      {"eq.u.f64", {1, NAN}, 1},   {"lt.u.f64", {NAN, NAN}, 1},
      {"le.u.f64", {1, 1}, 1},     {"gt.u.f64", {1, NAN}, 1},
      {"ge.u.f64", {0x1p-1074, 0x1p-1073}, 0},
  };
  RUN_CASES(run_fcases, cases);
  static const double values[] = {-INFINITY, -1, -0.0, 0.0, 0x1p-149, 1,
                                  INFINITY, NAN};
  static const char *const rels[] = {"ne.o", "eq.u", "lt.u",
                                     "le.u", "gt.u", "ge.u"};
  for (size_t r = 0; r < COUNT_OF(rels); ++r)
    for (int wide = 0; wide < 2; ++wide) {
      char op[16], rel[8];
      snprintf(op, sizeof op, "%s.f%d", rels[r], wide ? 64 : 32);
      snprintf(rel, sizeof rel, "%.2s", rels[r]);
      for (size_t i = 0; i < COUNT_OF(values); ++i)
        for (size_t j = 0; j < COUNT_OF(values); ++j) {
          hali_value_t a = wide ? F64(values[i]) : F32(values[i]);
          hali_value_t b = wide ? F64(values[j]) : F32(values[j]);
          int32_t want = ref_float_compare_ou(rel, rels[r][3] == 'u',
                                              values[i], values[j]);
          hali_value_t args[2] = {a, b};
          check_op(__FILE__, __LINE__, op, I32(want), args, 2);
          check_branch(__FILE__, __LINE__, op, want, args, 2);
        }
    }
}
END_TEST

/* Reference: the low |bits| bits of |v|, sign- or zero-extended. */
static uint64_t ref_extend(uint64_t v, unsigned bits, bool sign) {
  const uint64_t mask = (1ull << bits) - 1;
  v &= mask;
  if (sign && (v >> (bits - 1)) & 1) v |= ~mask;
  return v;
}

START_TEST(convert_narrow_trunc_ext) {
  static const icase_t cases[] = {
      {"trunc.i32.i8", {0x12345678}, 0x78},
      {"trunc.i32.i8", {0xffffff80}, 0x80}, /* zero-filled, not sign */
      {"trunc.i32.i8", {0x100}, 0},
      {"trunc.i32.i16", {0x12345678}, 0x5678},
      {"trunc.i32.i16", {(uint64_t)INT32_MIN}, 0},
      {"trunc.i32.i16", {0xffff8000}, 0x8000},
      {"trunc.i64.i8", {0x123456789abcdef0}, 0xf0},
      {"trunc.i64.i8", {(uint64_t)-1}, 0xff},
      {"trunc.i64.i16", {0x123456789abcdef0}, 0xdef0},
      {"trunc.i64.i16", {0xffffffff00010000}, 0},
      {"ext.s.i8.i32", {0x7f}, 0x7f},
      {"ext.s.i8.i32", {0x80}, (uint64_t)-128},
      {"ext.s.i8.i32", {0xff}, (uint64_t)-1},
      {"ext.s.i8.i32", {0x1234567f}, 0x7f}, /* higher bits ignored */
      {"ext.s.i8.i32", {0xffffff00}, 0},
      {"ext.u.i8.i32", {0x80}, 0x80},
      {"ext.u.i8.i32", {(uint64_t)-1}, 0xff},
      {"ext.s.i16.i32", {0x7fff}, 0x7fff},
      {"ext.s.i16.i32", {0x8000}, (uint64_t)-32768},
      {"ext.s.i16.i32", {0x12348001}, (uint64_t)-32767},
      {"ext.u.i16.i32", {0xffff8000}, 0x8000},
      {"ext.s.i8.i64", {0x80}, (uint64_t)-128},
      {"ext.s.i8.i64", {0x7f}, 0x7f},
      {"ext.u.i8.i64", {0xffffffff}, 0xff},
      {"ext.s.i16.i64", {0x8000}, 0xffffffffffff8000},
      {"ext.s.i16.i64", {0xabcd7fff}, 0x7fff},
      {"ext.u.i16.i64", {(uint64_t)-1}, 0xffff},
  };
  RUN_CASES(run_icases, cases);
  /* Every op against the reference, on every boundary value. */
  static const struct {
    const char *op;
    unsigned bits;
    bool sign;
  } ops[] = {
      {"trunc.i32.i8", 8, false},   {"trunc.i32.i16", 16, false},
      {"ext.s.i8.i32", 8, true},    {"ext.u.i8.i32", 8, false},
      {"ext.s.i16.i32", 16, true},  {"ext.u.i16.i32", 16, false},
      {"ext.s.i8.i64", 8, true},    {"ext.u.i8.i64", 8, false},
      {"ext.s.i16.i64", 16, true},  {"ext.u.i16.i64", 16, false},
      {"trunc.i64.i8", 8, false},   {"trunc.i64.i16", 16, false},
  };
  static const uint64_t values[] = {0,      1,      0x7f,   0x80,   0xff,
                                    0x100,  0x17f,  0x180,  0x7fff, 0x8000,
                                    0xffff, 0x10000, 0x18000, 0x7fffffff,
                                    0x80000000, 0xffffffff, 0x100000080,
                                    0xffffffffffff7f80};
  for (size_t o = 0; o < COUNT_OF(ops); ++o) {
    const hali_op_info_t *info = op_named(ops[o].op);
    for (size_t i = 0; i < COUNT_OF(values); ++i)
      check_op(__FILE__, __LINE__, ops[o].op,
               int_value(info->operands[0].type,
                         ref_extend(values[i], ops[o].bits, ops[o].sign)),
               ARGS(int_value(info->operands[1].type, values[i])));
  }
}
END_TEST

START_TEST(float_rem) {
  static const fcase_t cases[] = {
      {"rem.f32", {5.5, 2}, 1.5},
      {"rem.f32", {-5.5, 2}, -1.5}, /* the sign of the dividend */
      {"rem.f32", {5.5, -2}, 1.5},
      {"rem.f32", {-4, 2}, -0.0},
      {"rem.f32", {4, 2}, 0.0},
      {"rem.f32", {-0.0, 1}, -0.0},
      {"rem.f32", {1, 0.0}, NAN},
      {"rem.f32", {1, -0.0}, NAN},
      {"rem.f32", {0.0, 0.0}, NAN},
      {"rem.f32", {INFINITY, 2}, NAN},
      {"rem.f32", {3, INFINITY}, 3},
      {"rem.f32", {-3, -INFINITY}, -3},
      {"rem.f32", {NAN, 1}, NAN},
      {"rem.f32", {1, NAN}, NAN},
      /* Exact, with no intermediate quotient: 2^127 = 2 (mod 3). */
      {"rem.f32", {0x1p127, 3}, 2},
      {"rem.f32", {0x1p-149, 0x1p-148}, 0x1p-149},
      {"rem.f64", {5.5, 2}, 1.5},
      {"rem.f64", {-5.5, 2}, -1.5},
      {"rem.f64", {-4, 2}, -0.0},
      {"rem.f64", {1, 0.0}, NAN},
      {"rem.f64", {-INFINITY, 2}, NAN},
      {"rem.f64", {3, INFINITY}, 3},
      {"rem.f64", {0x1p1023, 3}, 2},
      {"rem.f64", {0.5, 0.25}, 0.0},
      {"rem.f64", {NAN, 1}, NAN},
  };
  RUN_CASES(run_fcases, cases);
}
END_TEST

START_TEST(float_round) {
  static const fcase_t cases[] = {
      {"round.f32", {0.5}, 1},
      {"round.f32", {1.5}, 2},
      {"round.f32", {2.5}, 3}, /* away from zero */
      {"round.f32", {-0.5}, -1},
      {"round.f32", {-2.5}, -3},
      {"round.f32", {0x1.fffffep-2}, 0.0}, /* 0.49999997: not a tie */
      {"round.f32", {-0.25}, -0.0},
      {"round.f32", {-0.0}, -0.0},
      {"round.f32", {0x1.fffffep22}, 0x1p23}, /* 8388607.5 */
      {"round.f32", {0x1p30}, 0x1p30},
      {"round.f32", {INFINITY}, INFINITY},
      {"round.f32", {-INFINITY}, -INFINITY},
      {"round.f32", {NAN}, NAN},
      {"round.f64", {2.5}, 3},
      {"round.f64", {-2.5}, -3},
      {"round.f64", {0x1.fffffffffffffp-2}, 0.0},
      {"round.f64", {-0.5}, -1},
      {"round.f64", {0x1.fffffffffffffp51}, 0x1p52},
      {"round.f64", {-0.0}, -0.0},
      {"round.f64", {NAN}, NAN},
      {"round.even.f32", {0.5}, 0.0},
      {"round.even.f32", {1.5}, 2},
      {"round.even.f32", {2.5}, 2},
      {"round.even.f32", {3.5}, 4},
      {"round.even.f32", {-0.5}, -0.0},
      {"round.even.f32", {-1.5}, -2},
      {"round.even.f32", {-2.5}, -2},
      {"round.even.f32", {2.75}, 3},
      {"round.even.f32", {-2.25}, -2},
      {"round.even.f32", {0x1.fffffep-2}, 0.0},
      {"round.even.f32", {0x1.fffffep22}, 0x1p23}, /* 8388607.5: to even */
      {"round.even.f32", {0x1.fffffap22}, 0x1.fffff8p22}, /* 8388606.5 */
      {"round.even.f32", {0x1p-149}, 0.0},
      {"round.even.f32", {-0x1p-149}, -0.0},
      {"round.even.f32", {0x1.fffffep127}, 0x1.fffffep127},
      {"round.even.f32", {INFINITY}, INFINITY},
      {"round.even.f32", {NAN}, NAN},
      {"round.even.f64", {0.5}, 0.0},
      {"round.even.f64", {2.5}, 2},
      {"round.even.f64", {-3.5}, -4},
      {"round.even.f64", {-0.5}, -0.0},
      {"round.even.f64", {0x1.fffffffffffffp51}, 0x1p52}, /* 2^52 - 0.5 */
      {"round.even.f64", {0x1.ffffffffffffdp51}, 0x1.ffffffffffffcp51},
      {"round.even.f64", {-INFINITY}, -INFINITY},
      {"round.even.f64", {NAN}, NAN},
  };
  RUN_CASES(run_fcases, cases);
}
END_TEST

/* round.even does not follow the host's rounding mode (rint would). */
START_TEST(float_round_even_ignores_rounding_mode) {
  static const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  for (size_t i = 0; i < COUNT_OF(modes); ++i) {
    ck_assert_int_eq(fesetround(modes[i]), 0);
    EXPECT("round.even.f32", F32(2.0f), F32(2.5f));
    EXPECT("round.even.f32", F32(-2.0f), F32(-2.5f));
    EXPECT("round.even.f32", F32(-0.0f), F32(-0.5f));
    EXPECT("round.even.f64", F64(4.0), F64(3.5));
    EXPECT("round.even.f64", F64(-4.0), F64(-3.5));
    EXPECT("round.even.f64", F64(1.0), F64(0.75));
    EXPECT("round.f64", F64(3.0), F64(2.5));
    fesetround(FE_TONEAREST);
  }
}
END_TEST

START_TEST(float_isnan) {
  static const fcase_t cases[] = {
      {"isnan.f32", {NAN}, 1},      {"isnan.f32", {-NAN}, 1},
      {"isnan.f32", {INFINITY}, 0}, {"isnan.f32", {-0.0}, 0},
      {"isnan.f32", {0x1p-149}, 0}, {"isnan.f64", {NAN}, 1},
      {"isnan.f64", {-INFINITY}, 0}, {"isnan.f64", {DBL_MAX}, 0},
  };
  RUN_CASES(run_fcases, cases);
  /* Signalling and payload-carrying nans too. */
  EXPECT("isnan.f32", I32(1), F32B(0x7f800001));
  EXPECT("isnan.f32", I32(1), F32B(0xffffffff));
  EXPECT("isnan.f32", I32(0), F32B(0x7f800000));
  EXPECT("isnan.f64", I32(1), F64B(0x7ff0000000000001ull));
  EXPECT("isnan.f64", I32(1), F64B(0xfff8000000000000ull));
  EXPECT("isnan.f64", I32(0), F64B(0xfff0000000000000ull));
}
END_TEST

/* Checks that OP(args) is within |ulps| units in the last place of |want|
 * (both finite, same sign): for the libm functions, whose last bit is the
 * library's. */
static void check_op_near(const char *file, int line, const char *op,
                          hali_value_t want, unsigned ulps,
                          const hali_value_t *args, size_t nargs) {
  hali_value_t got = {0};
  char call[512], g[64], w[64];
  format_call(call, sizeof call, op, args, nargs);
  hali_status_t s = op_try(op, args, nargs, &got);
  if (s) abort_with_status(file, line, call, s);
  format_value(g, sizeof g, got);
  format_value(w, sizeof w, want);
  ck_assert_msg(got.type == want.type, "%s:%d: %s = %s, expected %s", file,
                line, call, g, w);
  uint64_t a, b;
  if (want.type == HALI_TYPE_F32) {
    a = f32_bits(got.f32);
    b = f32_bits(want.f32);
  } else {
    a = f64_bits(got.f64);
    b = f64_bits(want.f64);
  }
  const uint64_t d = a > b ? a - b : b - a;
  ck_assert_msg(d <= ulps, "%s:%d: %s = %s, expected %s within %u ulp", file,
                line, call, g, w, ulps);
}
#define EXPECT_NEAR(op, want, ulps, ...)                                       \
  check_op_near(__FILE__, __LINE__, op, want, ulps, ARGS(__VA_ARGS__))

/* The special values are exact (C Annex F, IEEE 754); other values are
 * checked against known constants within a few ulp. */
START_TEST(float_exp_log) {
  static const fcase_t cases[] = {
      {"exp.f32", {0.0}, 1},          {"exp.f32", {-0.0}, 1},
      {"exp.f32", {-INFINITY}, 0.0},  {"exp.f32", {INFINITY}, INFINITY},
      {"exp.f32", {NAN}, NAN},        {"exp.f32", {89}, INFINITY},
      {"exp.f32", {-104}, 0.0},       {"exp.f64", {0.0}, 1},
      {"exp.f64", {-INFINITY}, 0.0},  {"exp.f64", {1000}, INFINITY},
      {"exp.f64", {-1000}, 0.0},      {"exp.f64", {NAN}, NAN},
      {"exp2.f32", {0.0}, 1},         {"exp2.f32", {-INFINITY}, 0.0},
      {"exp2.f32", {INFINITY}, INFINITY}, {"exp2.f32", {128}, INFINITY},
      {"exp2.f64", {-0.0}, 1},        {"exp2.f64", {-INFINITY}, 0.0},
      {"exp2.f64", {1024}, INFINITY}, {"exp2.f64", {NAN}, NAN},
      {"expm1.f32", {0.0}, 0.0},      {"expm1.f32", {-0.0}, -0.0},
      {"expm1.f32", {-INFINITY}, -1}, {"expm1.f32", {INFINITY}, INFINITY},
      {"expm1.f64", {-0.0}, -0.0},    {"expm1.f64", {-INFINITY}, -1},
      {"expm1.f64", {-1000}, -1},     {"expm1.f64", {NAN}, NAN},
      {"log.f32", {0.0}, -INFINITY},  {"log.f32", {-0.0}, -INFINITY},
      {"log.f32", {1}, 0.0},          {"log.f32", {-1}, NAN},
      {"log.f32", {-0x1p-149}, NAN},  {"log.f32", {INFINITY}, INFINITY},
      {"log.f32", {-INFINITY}, NAN},  {"log.f32", {NAN}, NAN},
      {"log.f64", {0.0}, -INFINITY},  {"log.f64", {1}, 0.0},
      {"log.f64", {-1}, NAN},         {"log.f64", {INFINITY}, INFINITY},
      {"log10.f32", {-0.0}, -INFINITY}, {"log10.f32", {1}, 0.0},
      {"log10.f32", {-2}, NAN},       {"log10.f32", {INFINITY}, INFINITY},
      {"log10.f64", {0.0}, -INFINITY}, {"log10.f64", {-1}, NAN},
      {"log2.f32", {0.0}, -INFINITY}, {"log2.f32", {1}, 0.0},
      {"log2.f32", {-1}, NAN},        {"log2.f64", {-0.0}, -INFINITY},
      {"log2.f64", {1}, 0.0},         {"log2.f64", {-INFINITY}, NAN},
      {"log1p.f32", {-1}, -INFINITY}, {"log1p.f32", {-2}, NAN},
      {"log1p.f32", {-0.0}, -0.0},    {"log1p.f32", {0.0}, 0.0},
      {"log1p.f32", {INFINITY}, INFINITY}, {"log1p.f64", {-1}, -INFINITY},
      {"log1p.f64", {-1.5}, NAN},     {"log1p.f64", {-0.0}, -0.0},
  };
  RUN_CASES(run_fcases, cases);
  EXPECT_NEAR("exp.f32", F32(0x1.5bf0a8p1f), 1, F32(1.0f)); /* e */
  EXPECT_NEAR("exp.f64", F64(0x1.5bf0a8b145769p1), 1, F64(1.0));
  EXPECT_NEAR("exp.f64", F64(0x1.78b56362cef38p-2), 1, F64(-1.0));
  EXPECT_NEAR("exp2.f32", F32(1024.0f), 1, F32(10.0f));
  EXPECT_NEAR("exp2.f64", F64(0x1p-1074), 1, F64(-1074.0));
  EXPECT_NEAR("exp2.f64", F64(0x1.6a09e667f3bcdp0), 1, F64(0.5)); /* sqrt 2 */
  EXPECT_NEAR("expm1.f32", F32(0x1.b7e152p0f), 1, F32(1.0f)); /* e - 1 */
  EXPECT_NEAR("expm1.f64", F64(0x1.b7e151628aed3p0), 1, F64(1.0));
  /* Near 0 expm1 keeps the digits that exp(x) - 1 loses. */
  EXPECT_NEAR("expm1.f64", F64(0x1.00000002p-30), 1, F64(0x1p-30));
  EXPECT_NEAR("expm1.f32", F32(0x1p-30f), 1, F32(0x1p-30f));
  EXPECT_NEAR("log.f64", F64(1.0), 1, F64(0x1.5bf0a8b145769p1));
  EXPECT_NEAR("log.f32", F32(0x1.62e430p-1f), 1, F32(2.0f)); /* ln 2 */
  EXPECT_NEAR("log.f64", F64(0x1.62e42fefa39efp-1), 1, F64(2.0));
  EXPECT_NEAR("log10.f32", F32(3.0f), 1, F32(1000.0f));
  EXPECT_NEAR("log10.f64", F64(-2.0), 1, F64(0.01));
  EXPECT_NEAR("log2.f32", F32(-149.0f), 1, F32(0x1p-149f));
  EXPECT_NEAR("log2.f64", F64(1023.0), 1, F64(0x1p1023));
  EXPECT_NEAR("log2.f64", F64(0x1.a934f0979a371p1), 1, F64(10.0));
  EXPECT_NEAR("log1p.f64", F64(0x1.fffffffcp-31), 1, F64(0x1p-30));
  EXPECT_NEAR("log1p.f32", F32(0x1.62e430p-1f), 1, F32(1.0f));
}
END_TEST

START_TEST(float_pow_rsqrt) {
  static const fcase_t cases[] = {
      /* x^+-0 = 1 and 1^y = 1, nan included. */
      {"pow.f32", {NAN, 0.0}, 1},       {"pow.f32", {NAN, -0.0}, 1},
      {"pow.f32", {1, NAN}, 1},         {"pow.f32", {-1, INFINITY}, 1},
      {"pow.f32", {2, 10}, 1024},       {"pow.f32", {-2, 3}, -8},
      {"pow.f32", {-2, 2}, 4},          {"pow.f32", {-8, 0x1.555556p-2}, NAN},
      {"pow.f32", {0.0, -1}, INFINITY}, {"pow.f32", {-0.0, -1}, -INFINITY},
      {"pow.f32", {-0.0, -2}, INFINITY}, {"pow.f32", {-0.0, 3}, -0.0},
      {"pow.f32", {0.0, 3}, 0.0},       {"pow.f32", {INFINITY, -1}, 0.0},
      {"pow.f32", {0.5, INFINITY}, 0.0}, {"pow.f32", {2, -INFINITY}, 0.0},
      {"pow.f32", {2, INFINITY}, INFINITY}, {"pow.f32", {NAN, 1}, NAN},
      {"pow.f32", {2, 128}, INFINITY},
      {"pow.f64", {NAN, 0.0}, 1},       {"pow.f64", {1, NAN}, 1},
      {"pow.f64", {2, -1074}, 0x1p-1074}, {"pow.f64", {-3, 3}, -27},
      {"pow.f64", {-1, 0.5}, NAN},      {"pow.f64", {-0.0, -3}, -INFINITY},
      {"pow.f64", {-INFINITY, 3}, -INFINITY}, {"pow.f64", {-INFINITY, 2}, INFINITY},
      {"pow.f64", {4, 0.5}, 2},
      {"rsqrt.f32", {4}, 0.5},          {"rsqrt.f32", {0.25}, 2},
      {"rsqrt.f32", {0.0}, INFINITY},   {"rsqrt.f32", {-0.0}, -INFINITY},
      {"rsqrt.f32", {-1}, NAN},         {"rsqrt.f32", {INFINITY}, 0.0},
      {"rsqrt.f32", {NAN}, NAN},        {"rsqrt.f64", {16}, 0.25},
      {"rsqrt.f64", {0.0}, INFINITY},   {"rsqrt.f64", {-0.0}, -INFINITY},
      {"rsqrt.f64", {-INFINITY}, NAN},  {"rsqrt.f64", {INFINITY}, 0.0},
  };
  RUN_CASES(run_fcases, cases);
  EXPECT_NEAR("pow.f64", F64(0x1.6a09e667f3bcdp0), 1, F64(2.0), F64(0.5));
  EXPECT_NEAR("pow.f32", F32(0x1.6a09e6p0f), 1, F32(2.0f), F32(0.5f));
  /* Two roundings (1 / the rounded root): within an ulp of 1/sqrt(2). */
  EXPECT_NEAR("rsqrt.f32", F32(0x1.6a09e6p-1f), 1, F32(2.0f));
  EXPECT_NEAR("rsqrt.f64", F64(0x1.6a09e667f3bcdp-1), 1, F64(2.0));
}
END_TEST

START_TEST(float_trig_tanh_erf) {
  static const fcase_t cases[] = {
      {"sin.f32", {0.0}, 0.0},         {"sin.f32", {-0.0}, -0.0},
      {"sin.f32", {INFINITY}, NAN},    {"sin.f32", {-INFINITY}, NAN},
      {"sin.f32", {NAN}, NAN},         {"sin.f64", {-0.0}, -0.0},
      {"sin.f64", {INFINITY}, NAN},    {"cos.f32", {0.0}, 1},
      {"cos.f32", {-0.0}, 1},          {"cos.f32", {INFINITY}, NAN},
      {"cos.f64", {-0.0}, 1},          {"cos.f64", {-INFINITY}, NAN},
      {"cos.f64", {NAN}, NAN},
      {"tanh.f32", {0.0}, 0.0},        {"tanh.f32", {-0.0}, -0.0},
      {"tanh.f32", {INFINITY}, 1},     {"tanh.f32", {-INFINITY}, -1},
      {"tanh.f32", {100}, 1},          {"tanh.f32", {NAN}, NAN},
      {"tanh.f64", {-0.0}, -0.0},      {"tanh.f64", {-INFINITY}, -1},
      {"tanh.f64", {-1000}, -1},
      {"atan.f32", {0.0}, 0.0},        {"atan.f32", {-0.0}, -0.0},
      {"atan.f32", {INFINITY}, 0x1.921fb6p0},
      {"atan.f32", {-INFINITY}, -0x1.921fb6p0}, {"atan.f32", {NAN}, NAN},
      {"atan.f64", {INFINITY}, 0x1.921fb54442d18p0},
      {"atan.f64", {-0.0}, -0.0},
      {"atan2.f32", {0.0, -0.0}, 0x1.921fb6p1},   /* +pi */
      {"atan2.f32", {-0.0, -0.0}, -0x1.921fb6p1}, /* -pi */
      {"atan2.f32", {0.0, 0.0}, 0.0},  {"atan2.f32", {-0.0, 0.0}, -0.0},
      {"atan2.f32", {0.0, -1}, 0x1.921fb6p1},
      {"atan2.f32", {-1, -INFINITY}, -0x1.921fb6p1},
      {"atan2.f32", {1, INFINITY}, 0.0}, {"atan2.f32", {1, 0.0}, 0x1.921fb6p0},
      {"atan2.f32", {-1, -0.0}, -0x1.921fb6p0},
      {"atan2.f32", {NAN, 1}, NAN},    {"atan2.f32", {1, NAN}, NAN},
      {"atan2.f64", {0.0, -0.0}, 0x1.921fb54442d18p1},
      {"atan2.f64", {-0.0, 0.0}, -0.0},
      {"atan2.f64", {INFINITY, INFINITY}, 0x1.921fb54442d18p-1},
      {"atan2.f64", {-INFINITY, -INFINITY}, -0x1.2d97c7f3321d2p1},
      {"erf.f32", {0.0}, 0.0},         {"erf.f32", {-0.0}, -0.0},
      {"erf.f32", {INFINITY}, 1},      {"erf.f32", {-INFINITY}, -1},
      {"erf.f32", {10}, 1},            {"erf.f32", {NAN}, NAN},
      {"erf.f64", {-0.0}, -0.0},       {"erf.f64", {-INFINITY}, -1},
      {"erf.f64", {10}, 1},
  };
  RUN_CASES(run_fcases, cases);
  EXPECT_NEAR("sin.f64", F64(0.5), 1, F64(0x1.0c152382d7366p-1)); /* pi/6 */
  EXPECT_NEAR("sin.f32", F32(1.0f), 1, F32(0x1.921fb6p0f));      /* pi/2 */
  EXPECT_NEAR("cos.f64", F64(0.5), 2, F64(0x1.0c152382d7366p0)); /* pi/3 */
  EXPECT_NEAR("cos.f32", F32(-1.0f), 1, F32(0x1.921fb6p1f));     /* pi */
  EXPECT_NEAR("tanh.f64", F64(0x1.d9353d7568af3p-2), 1, F64(0.5));
  EXPECT_NEAR("atan.f64", F64(0x1.921fb54442d18p-1), 1, F64(1.0)); /* pi/4 */
  EXPECT_NEAR("atan.f32", F32(0x1.921fb6p-1f), 1, F32(1.0f));
  EXPECT_NEAR("atan2.f64", F64(0x1.2d97c7f3321d2p1), 1, F64(1.0), F64(-1.0));
  EXPECT_NEAR("atan2.f32", F32(-0x1.921fb6p-1f), 1, F32(-1.0f), F32(1.0f));
  EXPECT_NEAR("erf.f64", F64(0x1.af767a741088bp-1), 1, F64(1.0));
  EXPECT_NEAR("erf.f32", F32(0x1.af767ap-1f), 1, F32(1.0f));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Control flow. */

START_TEST(control_br_loops) {
  /* ^head is reached forward from entry and backward from ^body. */
  static const char sum[] = "func @sum(%n: i32) -> i32 {\n"
                            "^entry:\n"
                            "  %i = const.i32 0\n"
                            "  %s = const.i32 0\n"
                            "  %one = const.i32 1\n"
                            "  br ^head\n"
                            "^head:\n"
                            "  %c = lt.s.i32 %i, %n\n"
                            "  cond_br %c, ^body, ^done\n"
                            "^body:\n"
                            "  %i = add.i32 %i, %one\n"
                            "  %s = add.i32 %s, %i\n"
                            "  br ^head\n"
                            "^done:\n"
                            "  return %s\n"
                            "}\n";
  EXPECT_RUN(sum, "sum", I32(55), I32(10));
  EXPECT_RUN(sum, "sum", I32(0), I32(0));
  EXPECT_RUN(sum, "sum", I32(0), I32(-5));
  EXPECT_RUN(sum, "sum", I32(5050), I32(100));
  /* Blocks out of order, reached only through br. */
  static const char hops[] = "func @hops(%x: i64) -> i64 {\n"
                             "  %one = const.i64 1\n"
                             "  br ^a\n"
                             "^c:\n"
                             "  %x = add.i64 %x, %one\n"
                             "  return %x\n"
                             "^b:\n"
                             "  %x = add.i64 %x, %x\n"
                             "  br ^c\n"
                             "^a:\n"
                             "  %x = add.i64 %x, %one\n"
                             "  br ^b\n"
                             "}\n";
  EXPECT_RUN(hops, "hops", I64(9), I64(3)); /* ((3 + 1) * 2) + 1 */
}
END_TEST

/* Division and remainder by a register written once by a const other than
 * 0 and -1 run in the encoder's check-free form (vm/code.h, DIVK): the
 * same results as C, for every op and width, over signed and unsigned
 * extremes; a divisor of 0 or -1, or a register written twice, keeps the
 * checked op, which still fails. */
static const hali_cell_t *first_op_cell(const hali_vm_func_t *f,
                                        unsigned op) {
  for (uint32_t i = 0; i < f->insn_count; ++i)
    if (f->code[f->insn_offset[i]].i.op == op)
      return &f->code[f->insn_offset[i]];
  return NULL;
}

START_TEST(division_by_proven_constant) {
  static const char *const names[4] = {"div.s", "div.u", "rem.s", "rem.u"};
  static const int64_t divisors[] = {7,         -7,        2,  1, -2,
                                     INT32_MAX, INT32_MIN, 3,  INT64_MAX,
                                     INT64_MIN, 65536,     -65537};
  static const int64_t dividends[] = {0,  1,         -1,        6,
                                      7,  -8,        100,       INT32_MIN,
                                      INT32_MAX, INT64_MIN, INT64_MAX, 12345678901};
  for (int wide = 0; wide < 2; ++wide)
    for (int k = 0; k < 4; ++k)
      for (size_t d = 0; d < COUNT_OF(divisors); ++d) {
        const int64_t dv = wide ? divisors[d] : (int64_t)(int32_t)divisors[d];
        if (dv == 0 || dv == -1) continue;
        const char *t = wide ? "i64" : "i32";
        char text[512];
        snprintf(text, sizeof text,
                 "func @f(%%x: %s) -> %s {\n"
                 "  %%k = const.%s %" PRId64 "\n"
                 "  %%r = %s.%s %%x, %%k\n"
                 "  return %%r\n"
                 "}\n",
                 t, t, t, dv, names[k], t);
        hali_vm_module_t *m = load(text);
        const hali_vm_func_t *f = lookup(m, "f");
        char opname[16];
        snprintf(opname, sizeof opname, "%s.%s", names[k], t);
        const int op = hali_op_lookup(opname, strlen(opname));
        ck_assert_int_ge(op, 0);
        ck_assert_msg(first_op_cell(f, (unsigned)op) == NULL,
                      "%s by const %" PRId64 " kept the checked op", opname,
                      dv);
        hali_vm_stack_t *st = NULL;
        ck_assert_ok(hali_vm_stack_create(0, &st));
        for (size_t x = 0; x < COUNT_OF(dividends); ++x) {
          int64_t want;
          const int64_t xv = dividends[x];
          if (wide) {
            if (k == 0) want = xv / dv;
            else if (k == 1) want = (int64_t)((uint64_t)xv / (uint64_t)dv);
            else if (k == 2) want = xv % dv;
            else want = (int64_t)((uint64_t)xv % (uint64_t)dv);
          } else {
            const int32_t a = (int32_t)xv, b = (int32_t)dv;
            if (k == 0) want = a / b;
            else if (k == 1) want = (int32_t)((uint32_t)a / (uint32_t)b);
            else if (k == 2) want = a % b;
            else want = (int32_t)((uint32_t)a % (uint32_t)b);
          }
          hali_value_t arg = wide ? I64(xv) : I32(xv), got = {0};
          hali_status_t s = hali_vm_invoke(st, m, f, &arg, 1, &got, 1);
          if (s) abort_with_status(__FILE__, __LINE__, opname, s);
          const int64_t g = wide ? got.i64 : got.i32;
          ck_assert_msg(g == want,
                        "%s %" PRId64 ", const %" PRId64 " = %" PRId64
                        ", expected %" PRId64,
                        opname, xv, dv, g, want);
        }
        hali_vm_stack_free(st);
        hali_vm_module_release(m);
      }
  /* 0 and -1, and a register written twice, keep the checks. */
  static const char *const kept[] = {
      "func @f(%x: i32) -> i32 {\n  %k = const.i32 0\n"
      "  %r = div.s.i32 %x, %k\n  return %r\n}\n",
      "func @f(%x: i32) -> i32 {\n  %k = const.i32 -1\n"
      "  %r = div.s.i32 %x, %k\n  return %r\n}\n",
      "func @f(%x: i32) -> i32 {\n  %k = const.i32 5\n  %k = const.i32 0\n"
      "  %r = div.s.i32 %x, %k\n  return %r\n}\n",
      "func @f(%x: i32, %k: i32) -> i32 {\n"
      "  %r = div.s.i32 %x, %k\n  return %r\n}\n",
  };
  static const char *const why[] = {"integer division by zero",
                                    "signed overflow",
                                    "integer division by zero",
                                    "integer division by zero"};
  for (size_t i = 0; i < COUNT_OF(kept); ++i) {
    hali_vm_module_t *m = load(kept[i]);
    const hali_vm_func_t *f = lookup(m, "f");
    ck_assert_msg(first_op_cell(f, HALI_OP_DIV_S_I32) != NULL,
                  "case %zu lost the checks", i);
    hali_vm_stack_t *st = NULL;
    ck_assert_ok(hali_vm_stack_create(0, &st));
    hali_value_t args[2] = {I32(INT32_MIN), I32(0)}, got = {0};
    hali_status_t s = hali_vm_invoke(st, m, f, args, i == 3 ? 2 : 1, &got, 1);
    ck_assert_msg(s != NULL, "case %zu did not fail", i);
    char *text = hali_status_to_string(s);
    ck_assert_msg(text && strstr(text, why[i]), "case %zu: %s", i,
                  text ? text : "");
    free(text);
    hali_status_free(s);
    hali_vm_stack_free(st);
    hali_vm_module_release(m);
  }
}
END_TEST

/* An add directly followed by a compare-and-branch whose result only the
 * branch reads is one internal op (vm/code.h, ADD_BR_*): for every compare
 * and width, the branch taken and the sum match C over boundary values
 * (the compare sees the wrapped sum), and the plain add is gone; when the
 * compare's result is read later the add stays separate. */
/* The same with the sum as the compare's second operand (`cmp %z, %s`):
 * the encoder fuses it as the swapped compare of the sum first (vm/code.h),
 * so for every compare and width the branch taken and the sum still match
 * C over boundary values; an add whose sum the compare does not read is
 * not fused with it, and the program's result is unchanged. */
START_TEST(add_compare_branch_fused_sum_second) {
  static const char *const cmps[] = {"eq",   "ne",   "lt.s", "le.s", "gt.s",
                                     "ge.s", "lt.u", "le.u", "gt.u", "ge.u"};
  static const int64_t vals[] = {0, 1, -1, 7, -7, INT32_MAX, INT32_MIN,
                                 INT64_MAX, INT64_MIN};
  for (int wide = 0; wide < 2; ++wide)
    for (size_t k = 0; k < COUNT_OF(cmps); ++k) {
      const char *t = wide ? "i64" : "i32";
      char text[768];
      snprintf(text, sizeof text,
               "func @f(%%x: %s, %%y: %s, %%z: %s) -> (i32, %s) {\n"
               "  %%s = add.%s %%x, %%y\n"
               "  %%c = %s.%s %%z, %%s\n"
               "  cond_br %%c, ^yes, ^no\n"
               "^yes:\n"
               "  %%t = const.i32 1\n"
               "  return %%t, %%s\n"
               "^no:\n"
               "  %%e = const.i32 0\n"
               "  return %%e, %%s\n"
               "}\n",
               t, t, t, t, t, cmps[k], t);
      hali_vm_module_t *m = load(text);
      const hali_vm_func_t *f = lookup(m, "f");
      ck_assert_msg(first_op_cell(f, wide ? HALI_OP_ADD_I64 : HALI_OP_ADD_I32)
                        == NULL,
                    "add + %s.%s (sum second) + cond_br was not fused",
                    cmps[k], t);
      hali_vm_stack_t *st = NULL;
      ck_assert_ok(hali_vm_stack_create(0, &st));
      for (size_t a = 0; a < COUNT_OF(vals); ++a)
        for (size_t b = 0; b < COUNT_OF(vals); ++b)
          for (size_t c = 0; c < COUNT_OF(vals); ++c) {
            /* The reference: the sum wraps in the type; z compares to it. */
            uint64_t us, uz;
            int64_t ss, sz;
            if (wide) {
              us = (uint64_t)vals[a] + (uint64_t)vals[b];
              uz = (uint64_t)vals[c];
              ss = (int64_t)us;
              sz = vals[c];
            } else {
              us = (uint32_t)((uint32_t)vals[a] + (uint32_t)vals[b]);
              uz = (uint32_t)vals[c];
              ss = (int32_t)(uint32_t)us;
              sz = (int32_t)(uint32_t)uz;
            }
            const bool want[] = {uz == us, uz != us, sz < ss,  sz <= ss,
                                 sz > ss,  sz >= ss, uz < us,  uz <= us,
                                 uz > us,  uz >= us};
            hali_value_t args[3], got[2] = {{0}, {0}};
            for (int i = 0; i < 3; ++i) {
              const int64_t v = vals[i == 0 ? a : i == 1 ? b : c];
              args[i] = wide ? I64(v) : I32(v);
            }
            got[1].type = wide ? HALI_TYPE_I64 : HALI_TYPE_I32;
            hali_status_t s = hali_vm_invoke(st, m, f, args, 3, got, 2);
            if (s) abort_with_status(__FILE__, __LINE__, cmps[k], s);
            const uint64_t sum = wide ? (uint64_t)got[1].i64
                                      : (uint32_t)got[1].i32;
            ck_assert_msg(got[0].i32 == (int32_t)want[k] && sum == us,
                          "add.%s %" PRId64 ", %" PRId64 " then %s.%s of "
                          "%" PRId64 " and the sum: took %d (expected %d), "
                          "sum %" PRIu64 " (expected %" PRIu64 ")",
                          t, vals[a], vals[b], cmps[k], t, vals[c],
                          got[0].i32, want[k], sum, us);
          }
      hali_vm_stack_free(st);
      hali_vm_module_release(m);
    }
  /* The compare does not read the sum: the add stays separate. */
  hali_vm_module_t *m = load("func @f(%x: i64, %y: i64) -> i64 {\n"
                             "  %s = add.i64 %x, %y\n"
                             "  %c = lt.s.i64 %x, %y\n"
                             "  cond_br %c, ^a, ^b\n"
                             "^a:\n"
                             "  return %s\n"
                             "^b:\n"
                             "  return %x\n"
                             "}\n");
  ck_assert_ptr_nonnull(first_op_cell(lookup(m, "f"), HALI_OP_ADD_I64));
  hali_value_t args[2] = {I64(-5), I64(3)}, got = {0};
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  ck_assert_ok(hali_vm_invoke(st, m, lookup(m, "f"), args, 2, &got, 1));
  ck_assert_int_eq(got.i64, -2); /* -5 < 3: the sum */
  args[0] = I64(5);
  ck_assert_ok(hali_vm_invoke(st, m, lookup(m, "f"), args, 2, &got, 1));
  ck_assert_int_eq(got.i64, 5);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* A mul directly followed by the add of its product is one internal op
 * (vm/code.h, MUL_ADD_*): for every width, the product and the sum match
 * C over boundary values (wrapping integers; floats rounded twice, not an
 * fma), with the product as the add's first or (integers) second operand
 * and with the registers aliased every way the op must survive: the add
 * of the product to itself, the sum into the product's or a factor's
 * register.  A float add with the product second keeps both ops. */
START_TEST(mul_add_fused) {
  static const char *const types[] = {"i32", "i64", "f32", "f64"};
  /* %p the product, %s the sum; the results are (%p, %s, %a). */
  static const char *const bodies[] = {
      "  %p = mul.T %a, %b\n  %s = add.T %p, %c\n",
      "  %p = mul.T %a, %b\n  %s = add.T %c, %p\n", /* ints only */
      "  %p = mul.T %a, %b\n  %s = add.T %p, %p\n",
      "  %p = mul.T %a, %b\n  %p = add.T %p, %c\n  %s = mov.T %p\n",
      "  %p = mul.T %a, %b\n  %a = add.T %p, %c\n  %s = mov.T %a\n",
  };
  static const int64_t ivals[] = {0, 1, -1, 3, INT32_MAX, INT32_MIN,
                                  INT64_MAX, INT64_MIN};
  static const double fvals[] = {0.0, -0.0, 1.0000001, 0.5, -3.25, 1e300,
                                 1e-30, 16777217.0};
  for (int ti = 0; ti < 4; ++ti)
    for (size_t bi = 0; bi < COUNT_OF(bodies); ++bi) {
      const char *t = types[ti];
      const bool fl = ti >= 2, wide = ti == 1 || ti == 3;
      if (fl && bi == 1) continue; /* checked below */
      char body[256], text[768];
      size_t k = 0;
      for (const char *c = bodies[bi]; *c && k + 4 < sizeof body; ++c) {
        if (*c == 'T') {
          memcpy(body + k, t, 3);
          k += 3;
        } else {
          body[k++] = *c;
        }
      }
      body[k] = 0;
      snprintf(text, sizeof text,
               "func @f(%%a: %s, %%b: %s, %%c: %s) -> (%s, %s, %s) {\n"
               "%s  return %%p, %%s, %%a\n}\n",
               t, t, t, t, t, t, body);
      hali_vm_module_t *m = load(text);
      const hali_vm_func_t *f = lookup(m, "f");
      const unsigned mul = ti == 0 ? HALI_OP_MUL_I32 : ti == 1 ? HALI_OP_MUL_I64
                           : ti == 2 ? HALI_OP_MUL_F32 : HALI_OP_MUL_F64;
      const unsigned fused = ti == 0   ? HALI_OP_MUL_ADD_I32
                             : ti == 1 ? HALI_OP_MUL_ADD_I64
                             : ti == 2 ? HALI_OP_MUL_ADD_F32
                                       : HALI_OP_MUL_ADD_F64;
      ck_assert_msg(first_op_cell(f, mul) == NULL &&
                        first_op_cell(f, fused) != NULL,
                    "mul.%s and add (body %zu) were not fused", t, bi);
      hali_vm_stack_t *st = NULL;
      ck_assert_ok(hali_vm_stack_create(0, &st));
      const size_t nv = fl ? COUNT_OF(fvals) : COUNT_OF(ivals);
      for (size_t x = 0; x < nv; ++x)
        for (size_t y = 0; y < nv; ++y)
          for (size_t z = 0; z < nv; ++z) {
            hali_value_t args[3], got[3];
            const size_t idx[3] = {x, y, z};
            for (int i = 0; i < 3; ++i) {
              if (ti == 0) args[i] = I32(ivals[idx[i]]);
              else if (ti == 1) args[i] = I64(ivals[idx[i]]);
              else if (ti == 2) args[i] = hali_value_f32((float)fvals[idx[i]]);
              else args[i] = hali_value_f64(fvals[idx[i]]);
              got[i] = (hali_value_t){.type = args[i].type};
            }
            hali_status_t s = hali_vm_invoke(st, m, f, args, 3, got, 3);
            if (s) abort_with_status(__FILE__, __LINE__, t, s);
            /* The reference, in C: a mul, then an add, each rounded. */
            bool ok;
            if (!fl) {
              const uint64_t mask = wide ? UINT64_MAX : UINT32_MAX;
              const uint64_t a = (uint64_t)ivals[x] & mask,
                             b = (uint64_t)ivals[y] & mask,
                             c = (uint64_t)ivals[z] & mask;
              const uint64_t p = (a * b) & mask;
              const uint64_t sum = (bi == 2 ? p + p : p + c) & mask;
              const uint64_t gp = wide ? (uint64_t)got[0].i64
                                       : (uint32_t)got[0].i32;
              const uint64_t gs = wide ? (uint64_t)got[1].i64
                                       : (uint32_t)got[1].i32;
              const uint64_t ga = wide ? (uint64_t)got[2].i64
                                       : (uint32_t)got[2].i32;
              const uint64_t want_p = bi == 3 ? sum : p;
              const uint64_t want_a = bi == 4 ? sum : a;
              ok = gp == want_p && gs == sum && ga == want_a;
            } else if (ti == 2) {
              volatile float a = (float)fvals[x], b = (float)fvals[y],
                             c = (float)fvals[z];
              volatile float p = a * b;
              volatile float vsum = bi == 2 ? p + p : p + c;
              const float sum = vsum;
              const float want_p = bi == 3 ? sum : p;
              const float want_a = bi == 4 ? sum : a;
              ok = memcmp(&got[0].f32, &want_p, 4) == 0 &&
                   memcmp(&got[1].f32, &sum, 4) == 0 &&
                   memcmp(&got[2].f32, &want_a, 4) == 0;
            } else {
              volatile double a = fvals[x], b = fvals[y], c = fvals[z];
              volatile double p = a * b;
              volatile double vsum = bi == 2 ? p + p : p + c;
              const double sum = vsum;
              const double want_p = bi == 3 ? sum : p;
              const double want_a = bi == 4 ? sum : a;
              ok = memcmp(&got[0].f64, &want_p, 8) == 0 &&
                   memcmp(&got[1].f64, &sum, 8) == 0 &&
                   memcmp(&got[2].f64, &want_a, 8) == 0;
            }
            ck_assert_msg(ok, "mul-add.%s body %zu, inputs %zu %zu %zu: "
                          "results differ from C", t, bi, x, y, z);
          }
      hali_vm_stack_free(st);
      hali_vm_module_release(m);
    }
  /* The float product as the add's second operand: not fused. */
  hali_vm_module_t *m = load("func @f(%a: f64, %b: f64, %c: f64) -> f64 {\n"
                             "  %p = mul.f64 %a, %b\n"
                             "  %s = add.f64 %c, %p\n"
                             "  return %s\n}\n");
  ck_assert_ptr_nonnull(first_op_cell(lookup(m, "f"), HALI_OP_MUL_F64));
  ck_assert_ptr_null(first_op_cell(lookup(m, "f"), HALI_OP_MUL_ADD_F64));
  hali_value_t args[3] = {hali_value_f64(1.5), hali_value_f64(2.0),
                          hali_value_f64(0.25)},
               got = {.type = HALI_TYPE_F64};
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  ck_assert_ok(hali_vm_invoke(st, m, lookup(m, "f"), args, 3, &got, 1));
  ck_assert(got.f64 == 3.25);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* A no-store fused compare-and-branch polls for an interrupt only when a
 * target lies behind it (vm/code.h, the _NSF forms have both ahead): for
 * every compare and width, a loop whose back edge is the compare's branch
 * (the polling form) goes back exactly when C's compare is true, a
 * branch with both targets ahead is the form without the poll, and an
 * interrupt raised before the run is reported. */
START_TEST(fused_branch_polls_only_backward) {
  static const char *const cmps[] = {"eq",   "ne",   "lt.s", "le.s", "gt.s",
                                     "ge.s", "lt.u", "le.u", "gt.u", "ge.u"};
  static const int64_t vals[] = {0, 1, -1, 7, INT32_MAX, INT32_MIN,
                                 INT64_MAX, INT64_MIN};
  for (int wide = 0; wide < 2; ++wide)
    for (size_t k = 0; k < COUNT_OF(cmps); ++k) {
      const char *t = wide ? "i64" : "i32";
      char text[768];
      snprintf(text, sizeof text,
               "func @f(%%x: %s, %%y: %s) -> i32 {\n"
               "^entry:\n"
               "  %%k = const.i32 0\n"
               "  %%zero = const.i32 0\n"
               "  %%one = const.i32 1\n"
               "  br ^loop\n"
               "^loop:\n"
               "  %%first = eq.i32 %%k, %%zero\n"
               "  cond_br %%first, ^test, ^done\n"
               "^test:\n"
               "  %%k = add.i32 %%k, %%one\n"
               "  %%again = %s.%s %%x, %%y\n"
               "  cond_br %%again, ^loop, ^out\n"
               "^out:\n"
               "  %%k = add.i32 %%k, %%one\n"
               "  br ^done\n"
               "^done:\n"
               "  return %%k\n"
               "}\n",
               t, t, cmps[k], t);
      hali_vm_module_t *m = load(text);
      const hali_vm_func_t *f = lookup(m, "f");
      /* The back edge polls (_NS), the forward branch does not (_NSF). */
      ck_assert_ptr_nonnull(first_op_cell(f, HALI_OP_BR_EQ_I32_NSF));
      const unsigned base = (unsigned)(wide ? HALI_OP_BR_EQ_I64_NS
                                            : HALI_OP_BR_EQ_I32_NS) +
                            (unsigned)k;
      ck_assert_ptr_nonnull(first_op_cell(f, base));
      hali_vm_stack_t *st = NULL;
      ck_assert_ok(hali_vm_stack_create(0, &st));
      for (size_t a = 0; a < COUNT_OF(vals); ++a)
        for (size_t b = 0; b < COUNT_OF(vals); ++b) {
          uint64_t ux, uy;
          int64_t sx, sy;
          if (wide) {
            ux = (uint64_t)vals[a], uy = (uint64_t)vals[b];
            sx = vals[a], sy = vals[b];
          } else {
            ux = (uint32_t)vals[a], uy = (uint32_t)vals[b];
            sx = (int32_t)(uint32_t)ux, sy = (int32_t)(uint32_t)uy;
          }
          const bool want[] = {ux == uy, ux != uy, sx < sy,  sx <= sy,
                               sx > sy,  sx >= sy, ux < uy,  ux <= uy,
                               ux > uy,  ux >= uy};
          hali_value_t args[2] = {wide ? I64(vals[a]) : I32(vals[a]),
                                  wide ? I64(vals[b]) : I32(vals[b])};
          hali_value_t res = {.type = HALI_TYPE_I32};
          hali_status_t s = hali_vm_invoke(st, m, f, args, 2, &res, 1);
          if (s) abort_with_status(__FILE__, __LINE__, cmps[k], s);
          /* True: back to ^loop, out with k = 1; false: k = 2. */
          ck_assert_msg(res.i32 == (want[k] ? 1 : 2),
                        "%s.%s %" PRId64 ", %" PRId64 ": k = %d, "
                        "expected %d",
                        cmps[k], t, vals[a], vals[b], res.i32,
                        want[k] ? 1 : 2);
        }
      /* Cancelled before the run: reported (a loop is cancellable). */
      {
        hali_value_t args[2] = {wide ? I64(7) : I32(7), wide ? I64(7) : I32(7)};
        hali_value_t res = {.type = HALI_TYPE_I32};
        ck_assert_ok(hali_vm_begin(st, m->unlinked, f, args, 2, &res, 1));
        atomic_store(&st->interrupt_code, HALI_STATUS_CANCELLED);
        atomic_store(&st->interrupt, true);
        hali_status_t s = hali_vm_interpret(st, &res);
        ck_assert_status(s, HALI_STATUS_CANCELLED, "cancelled");
        atomic_store(&st->interrupt, false);
        atomic_store(&st->interrupt_code, HALI_STATUS_OK);
      }
      hali_vm_stack_free(st);
      hali_vm_module_release(m);
    }
}
END_TEST

START_TEST(add_compare_branch_fused) {
  static const char *const cmps[] = {"eq",   "ne",   "lt.s", "le.s", "gt.s",
                                     "ge.s", "lt.u", "le.u", "gt.u", "ge.u"};
  static const int64_t vals[] = {0, 1, -1, 7, -7, INT32_MAX, INT32_MIN,
                                 INT64_MAX, INT64_MIN};
  for (int wide = 0; wide < 2; ++wide)
    for (size_t k = 0; k < COUNT_OF(cmps); ++k) {
      const char *t = wide ? "i64" : "i32";
      char text[768];
      snprintf(text, sizeof text,
               "func @f(%%x: %s, %%y: %s, %%z: %s) -> (i32, %s) {\n"
               "  %%s = add.%s %%x, %%y\n"
               "  %%c = %s.%s %%s, %%z\n"
               "  cond_br %%c, ^yes, ^no\n"
               "^yes:\n"
               "  %%t = const.i32 1\n"
               "  return %%t, %%s\n"
               "^no:\n"
               "  %%e = const.i32 0\n"
               "  return %%e, %%s\n"
               "}\n",
               t, t, t, t, t, cmps[k], t);
      hali_vm_module_t *m = load(text);
      const hali_vm_func_t *f = lookup(m, "f");
      ck_assert_msg(first_op_cell(f, wide ? HALI_OP_ADD_I64 : HALI_OP_ADD_I32)
                        == NULL,
                    "add + %s.%s + cond_br was not fused", cmps[k], t);
      hali_vm_stack_t *st = NULL;
      ck_assert_ok(hali_vm_stack_create(0, &st));
      for (size_t a = 0; a < COUNT_OF(vals); ++a)
        for (size_t b = 0; b < COUNT_OF(vals); ++b)
          for (size_t c = 0; c < COUNT_OF(vals); ++c) {
            /* The reference: the sum wraps in the type, then compares. */
            uint64_t us, uz;
            int64_t ss, sz;
            if (wide) {
              us = (uint64_t)vals[a] + (uint64_t)vals[b];
              uz = (uint64_t)vals[c];
              ss = (int64_t)us;
              sz = vals[c];
            } else {
              us = (uint32_t)((uint32_t)vals[a] + (uint32_t)vals[b]);
              uz = (uint32_t)vals[c];
              ss = (int32_t)(uint32_t)us;
              sz = (int32_t)(uint32_t)uz;
            }
            const bool want[] = {us == uz, us != uz, ss < sz,  ss <= sz,
                                 ss > sz,  ss >= sz, us < uz,  us <= uz,
                                 us > uz,  us >= uz};
            hali_value_t args[3], got[2] = {{0}, {0}};
            for (int i = 0; i < 3; ++i) {
              const int64_t v = vals[i == 0 ? a : i == 1 ? b : c];
              args[i] = wide ? I64(v) : I32(v);
            }
            got[1].type = wide ? HALI_TYPE_I64 : HALI_TYPE_I32;
            hali_status_t s = hali_vm_invoke(st, m, f, args, 3, got, 2);
            if (s) abort_with_status(__FILE__, __LINE__, cmps[k], s);
            const uint64_t sum = wide ? (uint64_t)got[1].i64
                                      : (uint32_t)got[1].i32;
            ck_assert_msg(got[0].i32 == (int32_t)want[k] && sum == us,
                          "add.%s %" PRId64 ", %" PRId64 " then %s.%s with "
                          "%" PRId64 ": took %d (expected %d), sum %" PRIu64
                          " (expected %" PRIu64 ")",
                          t, vals[a], vals[b], cmps[k], t, vals[c],
                          got[0].i32, want[k], sum, us);
          }
      hali_vm_stack_free(st);
      hali_vm_module_release(m);
    }
  /* The compare's result read after the branch: the add is not fused. */
  hali_vm_module_t *m = load("func @f(%x: i32, %y: i32) -> i32 {\n"
                             "  %s = add.i32 %x, %y\n"
                             "  %c = lt.s.i32 %s, %y\n"
                             "  cond_br %c, ^a, ^b\n"
                             "^a:\n"
                             "  return %c\n"
                             "^b:\n"
                             "  return %s\n"
                             "}\n");
  ck_assert_ptr_nonnull(first_op_cell(lookup(m, "f"), HALI_OP_ADD_I32));
  hali_value_t args[2] = {I32(-5), I32(3)}, got = {0};
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  ck_assert_ok(hali_vm_invoke(st, m, lookup(m, "f"), args, 2, &got, 1));
  ck_assert_int_eq(got.i32, 1); /* -2 < 3: the compare's stored result */
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* A time-slice yield at an add fused with its compare-and-branch resumes
 * by running the op again, so the op polls before it adds: the sum is
 * counted once.  The interrupt is raised before the run, so the first poll
 * (the fused op: consts do not poll) yields. */
START_TEST(add_compare_branch_yield_adds_once) {
  hali_vm_module_t *m = load("func @f(%n: i64) -> i64 {\n"
                             "^entry:\n"
                             "  %i = const.i64 0\n"
                             "  %one = const.i64 1\n"
                             "  %i = add.i64 %i, %one\n"
                             "  %more = lt.s.i64 %i, %n\n"
                             "  cond_br %more, ^a, ^b\n"
                             "^a:\n"
                             "  return %i\n"
                             "^b:\n"
                             "  return %i\n"
                             "}\n");
  const hali_vm_func_t *f = lookup(m, "f");
  ck_assert_ptr_null(first_op_cell(f, HALI_OP_ADD_I64)); /* it is fused */
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_value_t arg = I64(5), res = {0};
  ck_assert_ok(hali_vm_begin(st, m->unlinked, f, &arg, 1, &res, 1));
  atomic_store(&st->interrupt_code, HALI_VM_INTERRUPT_YIELD);
  atomic_store(&st->interrupt, true);
  ck_assert_ok(hali_vm_interpret(st, &res));
  ck_assert(st->suspended && st->yielded);
  st->suspended = false;
  st->yielded = false;
  ck_assert_ok(hali_vm_interpret(st, &res));
  ck_assert(!st->suspended);
  ck_assert_int_eq(res.i64, 1);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(control_cond_br) {
  static const char pick[] = "func @pick(%c: i32) -> i32 {\n"
                             "  cond_br %c, ^t, ^f\n"
                             "^t:\n"
                             "  %one = const.i32 1\n"
                             "  return %one\n"
                             "^f:\n"
                             "  %two = const.i32 2\n"
                             "  return %two\n"
                             "}\n";
  EXPECT_RUN(pick, "pick", I32(2), I32(0));
  EXPECT_RUN(pick, "pick", I32(1), I32(1));
  EXPECT_RUN(pick, "pick", I32(1), I32(2));
  EXPECT_RUN(pick, "pick", I32(1), I32(-1));
  EXPECT_RUN(pick, "pick", I32(1), I32(INT32_MIN));
  EXPECT_RUN(pick, "pick", I32(1), I32(0x100));
  /* The condition is the i32 alone. */
  static const char low[] = "func @low(%x: i64) -> i32 {\n"
                            "  %c = trunc.i64.i32 %x\n"
                            "  cond_br %c, ^t, ^f\n"
                            "^t:\n"
                            "  %one = const.i32 1\n"
                            "  return %one\n"
                            "^f:\n"
                            "  %two = const.i32 2\n"
                            "  return %two\n"
                            "}\n";
  EXPECT_RUN(low, "low", I32(2), I64(0x100000000));
  EXPECT_RUN(low, "low", I32(1), I64(0x100000001));
  /* Both targets the same block. */
  static const char same[] = "func @same(%c: i32) -> i32 {\n"
                             "  %k = const.i32 7\n"
                             "  cond_br %c, ^t, ^t\n"
                             "^t:\n"
                             "  return %k\n"
                             "}\n";
  EXPECT_RUN(same, "same", I32(7), I32(0));
  EXPECT_RUN(same, "same", I32(7), I32(1));
  /* A fused compare that overwrites its own operand. */
  static const char self[] = "func @self(%a: i32, %b: i32) -> i32 {\n"
                             "  %a = lt.s.i32 %a, %b\n"
                             "  cond_br %a, ^t, ^f\n"
                             "^t:\n"
                             "  return %a\n"
                             "^f:\n"
                             "  %m = const.i32 -1\n"
                             "  %a = add.i32 %a, %m\n"
                             "  return %a\n"
                             "}\n";
  EXPECT_RUN(self, "self", I32(1), I32(1), I32(2));
  EXPECT_RUN(self, "self", I32(-1), I32(2), I32(1));
  /* A compare next to a cond_br on another register is not fused. */
  static const char other[] =
      "func @other(%a: i32, %b: i32, %d: i32) -> i32 {\n"
      "  %c = eq.i32 %a, %b\n"
      "  cond_br %d, ^t, ^f\n"
      "^t:\n"
      "  return %c\n"
      "^f:\n"
      "  %k = const.i32 7\n"
      "  %c = add.i32 %c, %k\n"
      "  return %c\n"
      "}\n";
  EXPECT_RUN(other, "other", I32(8), I32(1), I32(1), I32(0));
  EXPECT_RUN(other, "other", I32(1), I32(1), I32(1), I32(5));
  EXPECT_RUN(other, "other", I32(0), I32(1), I32(2), I32(5));
}
END_TEST

START_TEST(control_switch) {
  static const char sw[] = "func @sw(%i: i32) -> i32 {\n"
                           "  switch %i, ^dflt, [^a, ^b, ^c]\n"
                           "^a:\n"
                           "  %ra = const.i32 10\n"
                           "  return %ra\n"
                           "^b:\n"
                           "  %rb = const.i32 11\n"
                           "  return %rb\n"
                           "^c:\n"
                           "  %rc = const.i32 12\n"
                           "  return %rc\n"
                           "^dflt:\n"
                           "  %rd = const.i32 99\n"
                           "  return %rd\n"
                           "}\n";
  EXPECT_RUN(sw, "sw", I32(10), I32(0));
  EXPECT_RUN(sw, "sw", I32(11), I32(1));
  EXPECT_RUN(sw, "sw", I32(12), I32(2));
  /* Out of range and negative indices (unsigned: huge) take the default. */
  static const int32_t dflt[] = {3, 4, 100, INT32_MAX, -1, -2, -3, INT32_MIN};
  for (size_t i = 0; i < COUNT_OF(dflt); ++i)
    EXPECT_RUN(sw, "sw", I32(99), I32(dflt[i]));
  /* An empty table always takes the default. */
  static const char empty[] = "func @empty(%i: i32) -> i32 {\n"
                              "  switch %i, ^d, []\n"
                              "^d:\n"
                              "  %r = const.i32 99\n"
                              "  return %r\n"
                              "}\n";
  EXPECT_RUN(empty, "empty", I32(99), I32(0));
  EXPECT_RUN(empty, "empty", I32(99), I32(1));
  EXPECT_RUN(empty, "empty", I32(99), I32(-1));
  /* Repeated targets, and the default inside the table. */
  static const char rep[] = "func @rep(%i: i32) -> i32 {\n"
                            "  switch %i, ^d, [^b, ^a, ^b, ^d]\n"
                            "^a:\n"
                            "  %ra = const.i32 10\n"
                            "  return %ra\n"
                            "^b:\n"
                            "  %rb = const.i32 11\n"
                            "  return %rb\n"
                            "^d:\n"
                            "  %rd = const.i32 99\n"
                            "  return %rd\n"
                            "}\n";
  EXPECT_RUN(rep, "rep", I32(11), I32(0));
  EXPECT_RUN(rep, "rep", I32(10), I32(1));
  EXPECT_RUN(rep, "rep", I32(11), I32(2));
  EXPECT_RUN(rep, "rep", I32(99), I32(3));
  EXPECT_RUN(rep, "rep", I32(99), I32(4));
}
END_TEST

START_TEST(control_switch_large_table) {
  /* 250 targets: ^tK returns 3K; the default returns -1. */
  enum { N = 250 };
  size_t cap = 64 * 1024, len = 0;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  len += (size_t)snprintf(text + len, cap - len,
                          "func @big(%%i: i32) -> i32 {\n  switch %%i, ^d, [");
  for (int k = 0; k < N; ++k)
    len += (size_t)snprintf(text + len, cap - len, "%s^t%d", k ? ", " : "", k);
  len += (size_t)snprintf(text + len, cap - len, "]\n");
  for (int k = 0; k < N; ++k)
    len += (size_t)snprintf(text + len, cap - len,
                            "^t%d:\n  %%r%d = const.i32 %d\n  return %%r%d\n",
                            k, k, 3 * k, k);
  len += (size_t)snprintf(text + len, cap - len,
                          "^d:\n  %%m = const.i32 -1\n  return %%m\n}\n");
  ck_assert_uint_lt(len, cap);
  hali_vm_module_t *m = load(text);
  free(text);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  static const int32_t idx[] = {0, 1, 2, 100, 248, N - 1, N, N + 1,
                                0x10000, 0x10000 + 5, -1, INT32_MIN};
  for (size_t i = 0; i < COUNT_OF(idx); ++i) {
    hali_value_t r;
    ck_assert_ok(hali_vm_invoke(st, m, lookup(m, "big"), ARGS(I32(idx[i])), &r,
                                1));
    const int32_t want = idx[i] >= 0 && idx[i] < N ? 3 * idx[i] : -1;
    ck_assert_msg(r.i32 == want, "switch index %d went to %d, expected %d",
                  idx[i], r.i32, want);
  }
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

static const char k_calls[] =
    "func @fib(%n: i32) -> i32 {\n"
    "  %two = const.i32 2\n"
    "  %small = lt.s.i32 %n, %two\n"
    "  cond_br %small, ^base, ^rec\n"
    "^base:\n"
    "  return %n\n"
    "^rec:\n"
    "  %one = const.i32 1\n"
    "  %n1 = sub.i32 %n, %one\n"
    "  %a = call @fib(%n1)\n"
    "  %n2 = sub.i32 %n, %two\n"
    "  %b = call @fib(%n2)\n"
    "  %s = add.i32 %a, %b\n"
    "  return %s\n"
    "}\n"
    "func @fact(%n: i64) -> i64 {\n"
    "  %one = const.i64 1\n"
    "  %done = le.s.i64 %n, %one\n"
    "  cond_br %done, ^base, ^rec\n"
    "^base:\n"
    "  return %one\n"
    "^rec:\n"
    "  %m = sub.i64 %n, %one\n"
    "  %r = call @fact(%m)\n"
    "  %r = mul.i64 %r, %n\n"
    "  return %r\n"
    "}\n"
    "func @even(%n: i32) -> i32 {\n"
    "  %zero = const.i32 0\n"
    "  %z = eq.i32 %n, %zero\n"
    "  cond_br %z, ^yes, ^no\n"
    "^yes:\n"
    "  %one = const.i32 1\n"
    "  return %one\n"
    "^no:\n"
    "  %k = const.i32 1\n"
    "  %m = sub.i32 %n, %k\n"
    "  %r = call @odd(%m)\n"
    "  return %r\n"
    "}\n"
    "func @odd(%n: i32) -> i32 {\n"
    "  %zero = const.i32 0\n"
    "  %z = eq.i32 %n, %zero\n"
    "  cond_br %z, ^yes, ^no\n"
    "^yes:\n"
    "  return %zero\n"
    "^no:\n"
    "  %k = const.i32 1\n"
    "  %m = sub.i32 %n, %k\n"
    "  %r = call @even(%m)\n"
    "  return %r\n"
    "}\n"
    "func @sub(%a: i32, %b: i32) -> i32 {\n"
    "  %r = sub.i32 %a, %b\n"
    "  return %r\n"
    "}\n"
    "func @both_ways(%x: i32, %y: i32) -> (i32, i32) {\n"
    "  %p = call @sub(%x, %y)\n"
    "  %q = call @sub(%y, %x)\n"
    "  return %p, %q\n"
    "}\n"
    "func @divmod(%a: i32, %b: i32) -> (i32, i32) {\n"
    "  %q = div.s.i32 %a, %b\n"
    "  %r = rem.s.i32 %a, %b\n"
    "  return %q, %r\n"
    "}\n"
    "func @divmod_twice(%a: i32, %b: i32) -> (i32, i32, i32, i32) {\n"
    "  %q, %r = call @divmod(%a, %b)\n"
    "  %q2, %r2 = call @divmod(%b, %a)\n"
    "  return %q, %r, %q2, %r2\n"
    "}\n"
    "func @rev(%a: i32, %b: i64, %c: f32, %d: f64) -> (f64, f32, i64, i32) {\n"
    "  return %d, %c, %b, %a\n"
    "}\n"
    "func @rev2(%a: i32, %b: i64, %c: f32, %d: f64) -> (i32, i64, f32, f64) {\n"
    "  %w, %x, %y, %z = call @rev(%a, %b, %c, %d)\n"
    "  return %z, %y, %x, %w\n"
    "}\n"
    "func @swap(%a: i32, %b: i32) -> (i32, i32) {\n"
    "  return %b, %a\n"
    "}\n"
    "func @swap_in_place(%a: i32, %b: i32) -> (i32, i32) {\n"
    "  %a, %b = call @swap(%a, %b)\n"
    "  %ten = const.i32 10\n"
    "  %a = mul.i32 %a, %ten\n"
    "  return %a, %b\n"
    "}\n"
    "func @nine(%a1: i32, %a2: i64, %a3: f32, %a4: f64, %a5: i32, %a6: i32,\n"
    "           %a7: i64, %a8: i32, %a9: i32)\n"
    "    -> (i32, i32, i32, i32, i32, i64, i64, f64, f32) {\n"
    "  return %a9, %a8, %a6, %a5, %a1, %a7, %a2, %a4, %a3\n"
    "}\n"
    "func @call_nine() -> (i32, i32, i32, i32, i32, i64, i64, f64, f32) {\n"
    "  %c1 = const.i32 1\n"
    "  %c2 = const.i64 2\n"
    "  %c3 = const.f32 3.0\n"
    "  %c4 = const.f64 4.0\n"
    "  %c5 = const.i32 5\n"
    "  %c6 = const.i32 6\n"
    "  %c7 = const.i64 7\n"
    "  %c8 = const.i32 8\n"
    "  %c9 = const.i32 9\n"
    "  %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9 =\n"
    "      call @nine(%c1, %c2, %c3, %c4, %c5, %c6, %c7, %c8, %c9)\n"
    "  return %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9\n"
    "}\n"
    "func @dup(%a: i64) -> (i64, i64) {\n"
    "  return %a, %a\n"
    "}\n"
    "func @clobber() {\n"
    "  %a = const.i64 -1\n"
    "  %b = const.i64 -1\n"
    "  %c = const.f64 nan\n"
    "  %d = const.i32 -1\n"
    "  return\n"
    "}\n"
    "func @keep(%x: i32, %y: i64, %z: f64) -> (i32, i64, f64) {\n"
    "  call @clobber()\n"
    "  return %x, %y, %z\n"
    "}\n";

START_TEST(control_call_recursion) {
  EXPECT_RUN(k_calls, "fib", I32(6765), I32(20));
  EXPECT_RUN(k_calls, "fib", I32(0), I32(0));
  EXPECT_RUN(k_calls, "fact", I64(2432902008176640000), I64(20));
  EXPECT_RUN(k_calls, "fact", I64(-4249290049419214848), I64(21)); /* wraps */
  EXPECT_RUN(k_calls, "even", I32(1), I32(10));
  EXPECT_RUN(k_calls, "even", I32(0), I32(7));
  EXPECT_RUN(k_calls, "odd", I32(1), I32(7));
}
END_TEST

START_TEST(control_call_results_and_argument_order) {
  hali_value_t r[4];
  ck_assert_ok(run(k_calls, "both_ways", ARGS(I32(10), I32(3)), r, 2));
  ck_assert_int_eq(r[0].i32, 7);
  ck_assert_int_eq(r[1].i32, -7);
  ck_assert_ok(run(k_calls, "divmod_twice", ARGS(I32(-17), I32(5)), r, 4));
  ck_assert_int_eq(r[0].i32, -3);
  ck_assert_int_eq(r[1].i32, -2);
  ck_assert_int_eq(r[2].i32, 0);
  ck_assert_int_eq(r[3].i32, 5);
  /* Mixed types, reversed by the callee; results typed for the host. */
  ck_assert_ok(run(k_calls, "rev",
                   ARGS(I32(-1), I64(0x100000000), F32(-0.0f), F64(2.5)), r,
                   4));
  ck_assert_int_eq(r[0].type, HALI_TYPE_F64);
  ck_assert_int_eq(r[1].type, HALI_TYPE_F32);
  ck_assert_int_eq(r[2].type, HALI_TYPE_I64);
  ck_assert_int_eq(r[3].type, HALI_TYPE_I32);
  ck_assert(r[0].f64 == 2.5);
  ck_assert_uint_eq(f32_bits(r[1].f32), 0x80000000u);
  ck_assert_int_eq(r[2].i64, 0x100000000);
  ck_assert_int_eq(r[3].i32, -1);
  ck_assert_ok(run(k_calls, "rev2",
                   ARGS(I32(7), I64(INT64_MIN), F32(1.5f), F64(-0.0)), r, 4));
  ck_assert_int_eq(r[0].i32, 7);
  ck_assert_int_eq(r[1].i64, INT64_MIN);
  ck_assert(r[2].f32 == 1.5f);
  ck_assert_uint_eq(f64_bits(r[3].f64), 0x8000000000000000u);
  /* Results written back into the argument registers. */
  ck_assert_ok(run(k_calls, "swap_in_place", ARGS(I32(1), I32(2)), r, 2));
  ck_assert_int_eq(r[0].i32, 20);
  ck_assert_int_eq(r[1].i32, 1);
  /* Nine arguments and nine results: several cells of packed slots. */
  hali_value_t r9[9];
  ck_assert_ok(run(k_calls, "call_nine", NULL, 0, r9, 9));
  ck_assert_int_eq(r9[0].i32, 9);
  ck_assert_int_eq(r9[1].i32, 8);
  ck_assert_int_eq(r9[2].i32, 6);
  ck_assert_int_eq(r9[3].i32, 5);
  ck_assert_int_eq(r9[4].i32, 1);
  ck_assert_int_eq(r9[5].i64, 7);
  ck_assert_int_eq(r9[6].i64, 2);
  ck_assert(r9[7].f64 == 4.0);
  ck_assert(r9[8].f32 == 3.0f);
  /* One register returned twice. */
  ck_assert_ok(run(k_calls, "dup", ARGS(I64(-5)), r, 2));
  ck_assert_int_eq(r[0].i64, -5);
  ck_assert_int_eq(r[1].i64, -5);
  /* A call with no arguments or results leaves the caller's registers. */
  ck_assert_ok(run(k_calls, "keep", ARGS(I32(3), I64(4), F64(0.5)), r, 3));
  ck_assert_int_eq(r[0].i32, 3);
  ck_assert_int_eq(r[1].i64, 4);
  ck_assert(r[2].f64 == 0.5);
  ck_assert_ok(run(k_calls, "clobber", NULL, 0, NULL, 0));
}
END_TEST

/* A recursion whose frames hold many registers, so that the register
 * stack grows (and moves) while values live across the calls. */
START_TEST(control_call_stack_growth) {
  static const char text[] =
      "func @deep(%n: i32) -> i64 {\n"
      "  %zero = const.i32 0\n"
      "  %done = eq.i32 %n, %zero\n"
      "  cond_br %done, ^base, ^rec\n"
      "^base:\n"
      "  %z = const.i64 0\n"
      "  return %z\n"
      "^rec:\n"
      "  %one = const.i32 1\n"
      "  %m = sub.i32 %n, %one\n"
      "  %w = ext.s.i32.i64 %n\n"
      "  %p0 = mul.i64 %w, %w\n"
      "  %p1 = add.i64 %p0, %w\n"
      "  %p2 = add.i64 %p1, %w\n"
      "  %p3 = add.i64 %p2, %w\n"
      "  %p4 = add.i64 %p3, %w\n"
      "  %p5 = add.i64 %p4, %w\n"
      "  %p6 = add.i64 %p5, %w\n"
      "  %p7 = add.i64 %p6, %w\n"
      "  %p8 = add.i64 %p7, %w\n"
      "  %p9 = add.i64 %p8, %w\n"
      "  %r = call @deep(%m)\n"
      "  %r = add.i64 %r, %w\n"
      "  %q = sub.i64 %p9, %p0\n" /* 9n, from values live across the call */
      "  %r = add.i64 %r, %q\n"
      "  %r = sub.i64 %r, %q\n"
      "  return %r\n"
      "}\n";
  hali_vm_module_t *m = load(text);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  static const int32_t depths[] = {0, 1, 10, 1000, 3000, 5};
  for (size_t i = 0; i < COUNT_OF(depths); ++i) {
    hali_value_t r;
    const int64_t n = depths[i];
    ck_assert_ok(
        hali_vm_invoke(st, m, lookup(m, "deep"), ARGS(I32(n)), &r, 1));
    ck_assert_int_eq(r.i64, n * (n + 1) / 2);
  }
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(control_return_values) {
  static const char text[] =
      "func @many(%a: i32) -> (i32, i64, f32, f64, i32) {\n"
      "  %b = ext.s.i32.i64 %a\n"
      "  %c = sitofp.i32.f32 %a\n"
      "  %d = sitofp.i32.f64 %a\n"
      "  %z = const.i32 0\n"
      "  %neg = lt.s.i32 %a, %z\n"
      "  cond_br %neg, ^n, ^p\n"
      "^n:\n"
      "  %m = const.i32 -1\n"
      "  return %a, %b, %c, %d, %m\n"
      "^p:\n"
      "  return %a, %b, %c, %d, %a\n"
      "}\n"
      "func @none() {\n"
      "  return\n"
      "}\n";
  hali_value_t r[5];
  ck_assert_ok(run(text, "many", ARGS(I32(-3)), r, 5));
  ck_assert_int_eq(r[0].i32, -3);
  ck_assert_int_eq(r[1].i64, -3);
  ck_assert(r[2].f32 == -3.0f);
  ck_assert(r[3].f64 == -3.0);
  ck_assert_int_eq(r[4].i32, -1);
  ck_assert_ok(run(text, "many", ARGS(I32(4)), r, 5));
  ck_assert_int_eq(r[4].i32, 4);
  ck_assert_ok(run(text, "none", NULL, 0, NULL, 0));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* fail and assert. */

START_TEST(fail_status_codes) {
  static const char text[] = "func @f(%code: i32) -> i32 {\n"
                             "  fail %code, \"custom failure\"\n"
                             "}\n";
  hali_vm_module_t *m = load(text);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  /* 1-16 are the canonical codes; anything else becomes UNKNOWN. */
  for (int32_t code = -2; code <= 20; ++code) {
    hali_value_t r;
    hali_status_t s =
        hali_vm_invoke(st, m, lookup(m, "f"), ARGS(I32(code)), &r, 1);
    const hali_status_code_t want =
        code >= 1 && code <= 16 ? (hali_status_code_t)code
                                : HALI_STATUS_UNKNOWN;
    ck_assert_msg(hali_status_code(s) == want, "fail %d gave %s, expected %s",
                  code, hali_status_code_name(hali_status_code(s)),
                  hali_status_code_name(want));
    ck_assert_str_eq(hali_status_message(s), "custom failure");
    ck_assert_str_eq(hali_status_annotation(s, 0), "at @f@0 (test.hasm:2)");
    hali_status_free(s);
  }
  static const int32_t odd[] = {99, INT32_MIN, INT32_MAX, 0x10001};
  for (size_t i = 0; i < COUNT_OF(odd); ++i) {
    hali_value_t r;
    ck_assert_status(
        hali_vm_invoke(st, m, lookup(m, "f"), ARGS(I32(odd[i])), &r, 1),
        HALI_STATUS_UNKNOWN, "custom failure");
  }
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(fail_message_and_backtrace) {
  static const char text[] =
      "func @check(%x: i32) -> i32 {\n"                 /* 1 */
      "  %zero = const.i32 0\n"                         /* 2: pc 0 */
      "  %ok = ge.s.i32 %x, %zero\n"                    /* 3: pc 1 */
      "  cond_br %ok, ^good, ^bad\n"                    /* 4: pc 2 */
      "^good:\n"
      "  return %x\n"                                   /* 6: pc 3 */
      "^bad:\n"
      "  %code = const.i32 11\n"                        /* 8: pc 4 */
      "  fail %code, \"negative: \\\"x\\\"\\tq\\x41\"\n" /* 9: pc 5 */
      "}\n"
      "func @main(%x: i32) -> i32 {\n" /* 11 */
      "  %one = const.i32 1\n"         /* 12: pc 0 */
      "  %y = call @check(%x)\n"       /* 13: pc 1 */
      "  %y = add.i32 %y, %one\n"
      "  return %y\n"
      "}\n";
  EXPECT_RUN(text, "main", I32(6), I32(5));
  hali_value_t r;
  hali_status_t s = run(text, "main", ARGS(I32(-5)), &r, 1);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_OUT_OF_RANGE);
  ck_assert_str_eq(hali_status_message(s), "negative: \"x\"\tqA");
  ck_assert_uint_eq(hali_status_annotation_count(s), 2);
  ck_assert_str_eq(hali_status_annotation(s, 0), "at @check@5 (test.hasm:9)");
  ck_assert_str_eq(hali_status_annotation(s, 1), "at @main@1 (test.hasm:13)");
  hali_status_free(s);
}
END_TEST

START_TEST(assert_op) {
  static const char text[] = "func @f(%c: i32, %v: i32) -> i32 {\n"
                             "  assert %c, \"c must be set\"\n"
                             "  return %v\n"
                             "}\n";
  static const int32_t truthy[] = {1, 2, -1, INT32_MIN, INT32_MAX, 0x100};
  for (size_t i = 0; i < COUNT_OF(truthy); ++i)
    EXPECT_RUN(text, "f", I32(42), I32(truthy[i]), I32(42));
  hali_value_t r;
  hali_status_t s = run(text, "f", ARGS(I32(0), I32(42)), &r, 1);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_FAILED_PRECONDITION);
  ck_assert_str_eq(hali_status_message(s), "assertion failed: c must be set");
  ck_assert_str_eq(hali_status_annotation(s, 0), "at @f@0 (test.hasm:2)");
  hali_status_free(s);
  /* The operand is the i32 alone. */
  static const char low[] = "func @g(%x: i64) -> i32 {\n"
                            "  %c = trunc.i64.i32 %x\n"
                            "  assert %c, \"low half\"\n"
                            "  return %c\n"
                            "}\n";
  ck_assert_status(run(low, "g", ARGS(I64(0x100000000)), &r, 1),
                   HALI_STATUS_FAILED_PRECONDITION,
                   "assertion failed: low half");
  EXPECT_RUN(low, "g", I32(1), I64(0x100000001));
}
END_TEST

START_TEST(cond_fail_op) {
  static const char text[] = "func @f(%c: i32, %code: i32) -> i32 {\n"
                             "  cond_fail %c, %code, \"c was set\"\n"
                             "  return %code\n"
                             "}\n";
  EXPECT_RUN(text, "f", I32(11), I32(0), I32(11));
  static const int32_t truthy[] = {1, -1, INT32_MIN, INT32_MAX, 0x100};
  hali_value_t r;
  for (size_t i = 0; i < COUNT_OF(truthy); ++i) {
    hali_status_t s = run(text, "f", ARGS(I32(truthy[i]), I32(11)), &r, 1);
    ck_assert_int_eq(hali_status_code(s), HALI_STATUS_OUT_OF_RANGE);
    ck_assert_str_eq(hali_status_message(s), "c was set");
    ck_assert_str_eq(hali_status_annotation(s, 0), "at @f@0 (test.hasm:2)");
    hali_status_free(s);
  }
  /* Codes outside the status codes (0 is OK, which is no failure) become
   * UNKNOWN, as for fail. */
  static const int32_t odd[] = {0, -3, HALI_STATUS_CODE_COUNT, INT32_MAX};
  for (size_t i = 0; i < COUNT_OF(odd); ++i)
    ck_assert_status(run(text, "f", ARGS(I32(1), I32(odd[i])), &r, 1),
                     HALI_STATUS_UNKNOWN, "c was set");
}
END_TEST

/* A failure after a fused compare-and-branch reports the IR pc, which
 * counts the compare and the cond_br as two instructions. */
START_TEST(failure_pc_counts_fused_instructions) {
  static const char text[] = "func @f(%a: i32, %b: i32) -> i32 {\n" /* 1 */
                             "  %z = const.i32 0\n"   /* 2: pc 0 */
                             "  %c = eq.i32 %a, %z\n" /* 3: pc 1 */
                             "  cond_br %c, ^x, ^y\n" /* 4: pc 2 */
                             "^x:\n"
                             "  %r = div.s.i32 %b, %a\n" /* 6: pc 3 */
                             "  return %r\n"             /* 7: pc 4 */
                             "^y:\n"
                             "  %q = rem.u.i32 %a, %b\n" /* 9: pc 5 */
                             "  return %q\n"
                             "}\n";
  hali_value_t r;
  hali_status_t s = run(text, "f", ARGS(I32(0), I32(1)), &r, 1);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_OUT_OF_RANGE);
  ck_assert_str_eq(hali_status_annotation(s, 0), "at @f@3 (test.hasm:6)");
  hali_status_free(s);
  s = run(text, "f", ARGS(I32(1), I32(0)), &r, 1);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(hali_status_message(s), "rem.u.i32"));
  ck_assert_str_eq(hali_status_annotation(s, 0), "at @f@5 (test.hasm:9)");
  hali_status_free(s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Invocation: call depth and host-side errors. */

static const char k_down[] = "func @down(%n: i32) -> i32 {\n"
                             "  %zero = const.i32 0\n"
                             "  %done = le.s.i32 %n, %zero\n"
                             "  cond_br %done, ^base, ^rec\n"
                             "^base:\n"
                             "  return %zero\n"
                             "^rec:\n"
                             "  %one = const.i32 1\n"
                             "  %m = sub.i32 %n, %one\n"
                             "  %r = call @down(%m)\n"
                             "  %r = add.i32 %r, %one\n"
                             "  return %r\n"
                             "}\n"
                             "func @forever(%n: i32) -> i32 {\n"
                             "  %r = call @forever(%n)\n"
                             "  return %r\n"
                             "}\n"
                             "func @leaf(%n: i32) -> i32 {\n"
                             "  return %n\n"
                             "}\n";

/* @down(n) needs n + 1 frames. */
static hali_status_t down(hali_vm_stack_t *st, hali_vm_module_t *m,
                          const char *fn, int32_t n, int32_t *out) {
  hali_value_t r = {0};
  hali_status_t s = hali_vm_invoke(st, m, lookup(m, fn), ARGS(I32(n)), &r, 1);
  *out = r.i32;
  return s;
}

/* Calls check the stack's room once per frame of the module's largest
 * size (vm/interp.c, hali_vm_call_limit): a small recursive function whose
 * innermost call is to one with 81 registers, and one that passes a ref
 * down and returns it (call and return of refs), run on one stack at
 * depths rising through every growth of the banks and the frames, then
 * falling, then rising again; every result matches C's, and the depth
 * limit still fails exactly one frame past it. */
static const char k_room[] =
"func @wide(%n: i32) -> i32 {\n"
"  %a0 = const.i32 1\n"
"  %a1 = const.i32 2\n"
"  %a2 = const.i32 3\n"
"  %a3 = const.i32 4\n"
"  %a4 = const.i32 5\n"
"  %a5 = const.i32 6\n"
"  %a6 = const.i32 7\n"
"  %a7 = const.i32 8\n"
"  %a8 = const.i32 9\n"
"  %a9 = const.i32 10\n"
"  %a10 = const.i32 11\n"
"  %a11 = const.i32 12\n"
"  %a12 = const.i32 13\n"
"  %a13 = const.i32 14\n"
"  %a14 = const.i32 15\n"
"  %a15 = const.i32 16\n"
"  %a16 = const.i32 17\n"
"  %a17 = const.i32 18\n"
"  %a18 = const.i32 19\n"
"  %a19 = const.i32 20\n"
"  %a20 = const.i32 21\n"
"  %a21 = const.i32 22\n"
"  %a22 = const.i32 23\n"
"  %a23 = const.i32 24\n"
"  %a24 = const.i32 25\n"
"  %a25 = const.i32 26\n"
"  %a26 = const.i32 27\n"
"  %a27 = const.i32 28\n"
"  %a28 = const.i32 29\n"
"  %a29 = const.i32 30\n"
"  %a30 = const.i32 31\n"
"  %a31 = const.i32 32\n"
"  %a32 = const.i32 33\n"
"  %a33 = const.i32 34\n"
"  %a34 = const.i32 35\n"
"  %a35 = const.i32 36\n"
"  %a36 = const.i32 37\n"
"  %a37 = const.i32 38\n"
"  %a38 = const.i32 39\n"
"  %a39 = const.i32 40\n"
"  %s0 = add.i32 %n, %a0\n"
"  %s1 = add.i32 %s0, %a1\n"
"  %s2 = add.i32 %s1, %a2\n"
"  %s3 = add.i32 %s2, %a3\n"
"  %s4 = add.i32 %s3, %a4\n"
"  %s5 = add.i32 %s4, %a5\n"
"  %s6 = add.i32 %s5, %a6\n"
"  %s7 = add.i32 %s6, %a7\n"
"  %s8 = add.i32 %s7, %a8\n"
"  %s9 = add.i32 %s8, %a9\n"
"  %s10 = add.i32 %s9, %a10\n"
"  %s11 = add.i32 %s10, %a11\n"
"  %s12 = add.i32 %s11, %a12\n"
"  %s13 = add.i32 %s12, %a13\n"
"  %s14 = add.i32 %s13, %a14\n"
"  %s15 = add.i32 %s14, %a15\n"
"  %s16 = add.i32 %s15, %a16\n"
"  %s17 = add.i32 %s16, %a17\n"
"  %s18 = add.i32 %s17, %a18\n"
"  %s19 = add.i32 %s18, %a19\n"
"  %s20 = add.i32 %s19, %a20\n"
"  %s21 = add.i32 %s20, %a21\n"
"  %s22 = add.i32 %s21, %a22\n"
"  %s23 = add.i32 %s22, %a23\n"
"  %s24 = add.i32 %s23, %a24\n"
"  %s25 = add.i32 %s24, %a25\n"
"  %s26 = add.i32 %s25, %a26\n"
"  %s27 = add.i32 %s26, %a27\n"
"  %s28 = add.i32 %s27, %a28\n"
"  %s29 = add.i32 %s28, %a29\n"
"  %s30 = add.i32 %s29, %a30\n"
"  %s31 = add.i32 %s30, %a31\n"
"  %s32 = add.i32 %s31, %a32\n"
"  %s33 = add.i32 %s32, %a33\n"
"  %s34 = add.i32 %s33, %a34\n"
"  %s35 = add.i32 %s34, %a35\n"
"  %s36 = add.i32 %s35, %a36\n"
"  %s37 = add.i32 %s36, %a37\n"
"  %s38 = add.i32 %s37, %a38\n"
"  %s39 = add.i32 %s38, %a39\n"
"  return %s39\n"
"}\n"
    "func @deep(%n: i32) -> i32 {\n"
    "  %zero = const.i32 0\n"
    "  %done = le.s.i32 %n, %zero\n"
    "  cond_br %done, ^leaf, ^more\n"
    "^leaf:\n"
    "  %r = call @wide(%n)\n"
    "  return %r\n"
    "^more:\n"
    "  %one = const.i32 1\n"
    "  %m = sub.i32 %n, %one\n"
    "  %x = call @deep(%m)\n"
    "  %y = add.i32 %x, %one\n"
    "  return %y\n"
    "}\n"
    "func @refs(%f: !hal.fence, %n: i32) -> (!hal.fence, i32) {\n"
    "  %zero = const.i32 0\n"
    "  %done = le.s.i32 %n, %zero\n"
    "  cond_br %done, ^leaf, ^more\n"
    "^leaf:\n"
    "  %w = call @wide(%n)\n"
    "  return %f, %w\n"
    "^more:\n"
    "  %one = const.i32 1\n"
    "  %m = sub.i32 %n, %one\n"
    "  %g, %x = call @refs(%f, %m)\n"
    "  %y = add.i32 %x, %one\n"
    "  return %g, %y\n"
    "}\n"
    "func @start(%n: i32) -> i32 {\n"
    "  %f = hal.fence.null\n"
    "  %g, %r = call @refs(%f, %n)\n"
    "  return %r\n"
    "}\n";

START_TEST(calls_check_room_per_largest_frame) {
  hali_vm_module_t *m = load(k_room);
  const int32_t wide0 = 40 * 41 / 2; /* @wide(0): 1 + 2 + ... + 40 */
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  static const int32_t order[] = {0, 1, 2, 3, 5, 8, 13, 31, 32, 33, 63, 64,
                                  65, 200, 511, 700, 64, 3, 0, 1000, 7};
  for (size_t i = 0; i < COUNT_OF(order); ++i)
    for (int which = 0; which < 2; ++which) {
      hali_value_t arg = I32(order[i]), res = {.type = HALI_TYPE_I32};
      ck_assert_ok(hali_vm_invoke(st, m, lookup(m, which ? "start" : "deep"),
                                  &arg, 1, &res, 1));
      ck_assert_msg(res.i32 == wide0 + order[i], "%s(%d) = %d, expected %d",
                    which ? "start" : "deep", order[i], res.i32,
                    wide0 + order[i]);
    }
  hali_vm_stack_free(st);
  /* The depth limit: @deep(n) takes n + 2 frames (n + 1 of @deep, one of
   * @wide); @start(n) n + 3. */
  enum { MAX_DEPTH = 40 };
  ck_assert_ok(hali_vm_stack_create(MAX_DEPTH, &st));
  for (int32_t n = MAX_DEPTH - 4; n <= MAX_DEPTH; ++n)
    for (int which = 0; which < 2; ++which) {
      hali_value_t arg = I32(n), res = {.type = HALI_TYPE_I32};
      hali_status_t s = hali_vm_invoke(
          st, m, lookup(m, which ? "start" : "deep"), &arg, 1, &res, 1);
      if (n + 2 + which <= MAX_DEPTH) {
        ck_assert_msg(s == HALI_OK, "depth %d of %d failed", n + 2 + which,
                      MAX_DEPTH);
        ck_assert_int_eq(res.i32, wide0 + n);
      } else {
        ck_assert_status(s, HALI_STATUS_RESOURCE_EXHAUSTED,
                         "call depth limit of 40 exceeded");
      }
    }
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* The encoder picks a call's and a return's form from the callee
 * (vm/code.h): call.p / call.p1 and return.plain / return.plain1 for a
 * plain function (scalar results, no ref registers), call.s for scalar
 * parameters, call for a ref parameter; every form passes its arguments
 * and results, and a caller's refs survive calls of plain functions that
 * leave the ref window alone (the fence is awaited after them). */
static const char k_call_forms[] =
    "func @p2(%a: i32, %b: i64) -> (i64, i32) {\n"
    "  %c = ext.s.i32.i64 %a\n"
    "  %d = sub.i64 %b, %c\n"
    "  %e = mul.i32 %a, %a\n"
    "  return %d, %e\n"
    "}\n"
    "func @p1(%a: i32) -> i32 {\n"
    "  %k = const.i32 3\n"
    "  %r = mul.i32 %a, %k\n"
    "  return %r\n"
    "}\n"
    "func @s(%a: i32) -> i32 {\n"
    "  %f = hal.fence.null\n"
    "  %r = call @p1(%a)\n"
    "  return %r\n"
    "}\n"
    "func @r(%f: !hal.fence, %a: i32) -> (!hal.fence, i32) {\n"
    "  %x = call @s(%a)\n"
    "  return %f, %x\n"
    "}\n"
    "func @main(%a: i32, %b: i64) -> (i64, i32, i32, i32) {\n"
    "  %f = hal.fence.null\n"
    "  %d, %e = call @p2(%a, %b)\n"
    "  %x = call @p1(%a)\n"
    "  %y = call @s(%a)\n"
    "  %g, %z = call @r(%f, %a)\n"
    "  %never = const.i64 0\n"
    "  %st = hal.fence.await %f, %never\n"
    "  %st2 = hal.fence.await %g, %never\n"
    "  %w = add.i32 %z, %st\n"
    "  %w2 = add.i32 %w, %st2\n"
    "  return %d, %e, %x, %w2\n"
    "}\n";

START_TEST(call_and_return_forms) {
  hali_vm_module_t *m = load(k_call_forms);
  const hali_vm_func_t *main_fn = lookup(m, "main");
  ck_assert_ptr_nonnull(first_op_cell(main_fn, HALI_OP_CALL_P));
  ck_assert_ptr_nonnull(first_op_cell(main_fn, HALI_OP_CALL_P1));
  ck_assert_ptr_nonnull(first_op_cell(main_fn, HALI_OP_CALL_S));
  ck_assert_ptr_nonnull(first_op_cell(main_fn, HALI_OP_CALL));
  ck_assert_ptr_nonnull(first_op_cell(lookup(m, "p2"), HALI_OP_RETURN_PLAIN));
  ck_assert_ptr_nonnull(first_op_cell(lookup(m, "p1"), HALI_OP_RETURN_PLAIN1));
  /* @s has a ref register: its return is the general one. */
  ck_assert_ptr_nonnull(first_op_cell(lookup(m, "s"), HALI_OP_RETURN));
  ck_assert_ptr_nonnull(first_op_cell(lookup(m, "r"), HALI_OP_RETURN));
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  static const int32_t as[] = {0, 1, -7, 46341, INT32_MIN};
  static const int64_t bs[] = {0, 5, -1, INT64_MAX};
  for (size_t i = 0; i < COUNT_OF(as); ++i)
    for (size_t j = 0; j < COUNT_OF(bs); ++j) {
      hali_value_t args[2] = {I32(as[i]), I64(bs[j])};
      hali_value_t got[4] = {{.type = HALI_TYPE_I64}, {.type = HALI_TYPE_I32},
                             {.type = HALI_TYPE_I32}, {.type = HALI_TYPE_I32}};
      ck_assert_ok(hali_vm_invoke(st, m, main_fn, args, 2, got, 4));
      const uint32_t ua = (uint32_t)as[i];
      ck_assert_int_eq(got[0].i64,
                       (int64_t)((uint64_t)bs[j] - (uint64_t)(int64_t)as[i]));
      ck_assert_int_eq(got[1].i32, (int32_t)(ua * ua));
      ck_assert_int_eq(got[2].i32, (int32_t)(ua * 3u));
      ck_assert_int_eq(got[3].i32, (int32_t)(ua * 3u)); /* both awaits 0 */
    }
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(invoke_call_depth_limit) {
  enum { MAX_DEPTH = 32 };
  hali_vm_module_t *m = load(k_down);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(MAX_DEPTH, &st));
  int32_t r;
  /* Exactly |MAX_DEPTH| frames fit. */
  ck_assert_ok(down(st, m, "down", MAX_DEPTH - 1, &r));
  ck_assert_int_eq(r, MAX_DEPTH - 1);
  hali_status_t s = down(st, m, "down", MAX_DEPTH, &r);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_ptr_nonnull(strstr(hali_status_message(s), "call depth"));
  /* All |MAX_DEPTH| frames wait at the same call: one backtrace line. */
  ck_assert_uint_eq(hali_status_annotation_count(s), 1);
  ck_assert_str_eq(hali_status_annotation(s, 0),
                   "at @down@6 (test.hasm:10) × 32");
  hali_status_free(s);
  /* The stack is reusable after the error, warm. */
  ck_assert_ok(down(st, m, "down", MAX_DEPTH - 1, &r));
  ck_assert_int_eq(r, MAX_DEPTH - 1);
  ck_assert_status(down(st, m, "forever", 1, &r),
                   HALI_STATUS_RESOURCE_EXHAUSTED, "call depth");
  ck_assert_ok(down(st, m, "down", 3, &r));
  ck_assert_int_eq(r, 3);
  hali_vm_stack_free(st);
  /* A depth of one allows no calls at all. */
  ck_assert_ok(hali_vm_stack_create(1, &st));
  ck_assert_ok(down(st, m, "leaf", 9, &r));
  ck_assert_int_eq(r, 9);
  ck_assert_ok(down(st, m, "down", 0, &r));
  ck_assert_status(down(st, m, "down", 1, &r), HALI_STATUS_RESOURCE_EXHAUSTED,
                   "call depth");
  ck_assert_ok(down(st, m, "leaf", 10, &r));
  ck_assert_int_eq(r, 10);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(invoke_unbounded_recursion_default_stack) {
  hali_vm_module_t *m = load(k_down);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  int32_t r;
  ck_assert_status(down(st, m, "forever", 0, &r),
                   HALI_STATUS_RESOURCE_EXHAUSTED, "call depth");
  ck_assert_status(down(st, m, "down", 1000000, &r),
                   HALI_STATUS_RESOURCE_EXHAUSTED, "call depth");
  ck_assert_ok(down(st, m, "down", HALI_VM_DEFAULT_MAX_DEPTH - 1, &r));
  ck_assert_int_eq(r, HALI_VM_DEFAULT_MAX_DEPTH - 1);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(invoke_argument_errors) {
  static const char text[] = "func @add(%a: i32, %b: i32) -> i32 {\n"
                             "  %r = add.i32 %a, %b\n"
                             "  return %r\n"
                             "}\n"
                             "func @half(%x: f64) -> f64 {\n"
                             "  %h = const.f64 0.5\n"
                             "  %r = mul.f64 %x, %h\n"
                             "  return %r\n"
                             "}\n";
  hali_vm_module_t *m = load(text);
  const hali_vm_func_t *add = lookup(m, "add"), *half = lookup(m, "half");
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_value_t r[2];
  ck_assert_status(hali_vm_invoke(st, m, add, ARGS(I32(1)), r, 1),
                   HALI_STATUS_INVALID_ARGUMENT, "@add");
  ck_assert_status(
      hali_vm_invoke(st, m, add, ARGS(I32(1), I32(2), I32(3)), r, 1),
      HALI_STATUS_INVALID_ARGUMENT, "@add takes 2");
  ck_assert_status(hali_vm_invoke(st, m, add, NULL, 0, r, 1),
                   HALI_STATUS_INVALID_ARGUMENT, "@add");
  ck_assert_status(hali_vm_invoke(st, m, add, ARGS(I32(1), I64(2)), r, 1),
                   HALI_STATUS_INVALID_ARGUMENT, "@add argument 1");
  ck_assert_status(hali_vm_invoke(st, m, add, ARGS(F32(1), I32(2)), r, 1),
                   HALI_STATUS_INVALID_ARGUMENT, "@add argument 0");
  ck_assert_status(hali_vm_invoke(st, m, half, ARGS(F32(1)), r, 1),
                   HALI_STATUS_INVALID_ARGUMENT, "@half");
  ck_assert_status(hali_vm_invoke(st, m, add, ARGS(I32(1), I32(2)), r, 2),
                   HALI_STATUS_INVALID_ARGUMENT, "@add");
  ck_assert_status(hali_vm_invoke(st, m, add, ARGS(I32(1), I32(2)), r, 0),
                   HALI_STATUS_INVALID_ARGUMENT, "@add");
  /* None of that disturbed the stack. */
  ck_assert_ok(hali_vm_invoke(st, m, add, ARGS(I32(1), I32(2)), r, 1));
  ck_assert_int_eq(r[0].type, HALI_TYPE_I32);
  ck_assert_int_eq(r[0].i32, 3);
  ck_assert_ok(hali_vm_invoke(st, m, half, ARGS(F64(3)), r, 1));
  ck_assert(r[0].f64 == 1.5);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* Globals (tests/check_globals.c has the rest): every load and store,
 * here so that the coverage case below sees them run. */
START_TEST(globals_load_and_store_every_type) {
  static const char text[] =
      "rodata @bytes = bytes \"abcd\"\n"
      "global @i : i32 mutable = 1\n"
      "global @l : i64 mutable = 2\n"
      "global @f : f32 mutable = 3.5\n"
      "global @d : f64 mutable = 4.25\n"
      "global @b : !hal.buffer mutable\n"
      "global @c : !hal.buffer mutable\n"
      "func @step() -> (i32, i64, f32, f64, !hal.buffer) {\n"
      "  %i = global.load.i32 @i\n"
      "  %l = global.load.i64 @l\n"
      "  %f = global.load.f32 @f\n"
      "  %d = global.load.f64 @d\n"
      "  %i2 = add.i32 %i, %i\n"
      "  %l2 = add.i64 %l, %l\n"
      "  %f2 = add.f32 %f, %f\n"
      "  %d2 = add.f64 %d, %d\n"
      "  global.store.i32 @i, %i2\n"
      "  global.store.i64 @l, %l2\n"
      "  global.store.f32 @f, %f2\n"
      "  global.store.f64 @d, %d2\n"
      "  %b = global.load.ref @b\n"
      "  global.store.ref @c, %b\n"
      "  return %i, %l, %f, %d, %b\n"
      "}\n"
      "func @scalars() -> (i32, i64, f32, f64) {\n"
      "  %i = global.load.i32 @i\n"
      "  %l = global.load.i64 @l\n"
      "  %f = global.load.f32 @f\n"
      "  %d = global.load.f64 @d\n"
      "  return %i, %l, %f, %d\n"
      "}\n"
      "func @set_b() {\n"
      "  %b = hal.buffer.constant @bytes\n"
      "  global.store.ref @b, %b\n"
      "  return\n"
      "}\n";
  hali_vm_module_t *m = load(text);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_value_t r[5];
  /* Unlinked, a module cannot hold refs in its globals (a buffer over its
   * rodata would keep it alive forever). */
  ck_assert_status(hali_vm_invoke(st, m, lookup(m, "set_b"), NULL, 0, NULL, 0),
                   HALI_STATUS_FAILED_PRECONDITION,
                   "global.store.ref: module @test runs unlinked");
  hali_vm_link_t *link = NULL;
  ck_assert_ok(hali_vm_link_create(m, &link));
  /* @b was never stored: loading it fails (registers never hold null)
   * after the scalar stores took effect. */
  for (int k = 0; k < 3; ++k)
    ck_assert_status(
        hali_vm_link_invoke(st, link, lookup(m, "step"), NULL, 0, r, 5),
        HALI_STATUS_FAILED_PRECONDITION,
        "global.load.ref: global @b holds no ref yet");
  ck_assert_ok(
      hali_vm_link_invoke(st, link, lookup(m, "scalars"), NULL, 0, r, 4));
  ck_assert_int_eq(r[0].i32, 1 << 3);
  ck_assert_int_eq(r[1].i64, 2LL << 3);
  ck_assert(r[2].f32 == 3.5f * 8);
  ck_assert(r[3].f64 == 4.25 * 8);
  /* Stored, the ref moves from global to global. */
  ck_assert_ok(
      hali_vm_link_invoke(st, link, lookup(m, "set_b"), NULL, 0, NULL, 0));
  ck_assert_ok(hali_vm_link_invoke(st, link, lookup(m, "step"), NULL, 0, r, 5));
  ck_assert_int_eq(r[0].i32, 1 << 3);
  ck_assert_ptr_nonnull(r[4].ref);
  hali_value_release(&r[4]);
  /* The unlinked globals are the module's own: untouched by the link. */
  ck_assert_ok(hali_vm_invoke(st, m, lookup(m, "scalars"), NULL, 0, r, 4));
  ck_assert_int_eq(r[0].i32, 1);
  hali_vm_link_free(link);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Coverage: must run after every other test case (see main). */

START_TEST(every_op_exercised) {
  char missing[4096] = "";
  size_t count = 0;
  for (unsigned op = 0; op < HALI_OP_INTERNAL_END; ++op) {
    if (g_seen[op]) continue;
    /* Tensor-level ops are never executed (the passes lower them;
     * tests/passes covers them). */
    if (op < HALI_OP_COUNT && (hali_op_info(op)->flags & HALI_OPF_TENSOR))
      continue;
    char name[128];
    op_display_name(op, name, sizeof name);
    const size_t len = strlen(missing);
    snprintf(missing + len, sizeof missing - len, "%s%s", count ? ", " : "",
             name);
    count++;
  }
  ck_assert_msg(count == 0, "%zu op(s) not exercised by any test: %s", count,
                missing);
}
END_TEST

/* The cells of an instruction, computed in one place (vm/code.h), follow
 * the layouts drawn there. */
START_TEST(code_cells_follow_the_layout) {
  ck_assert_uint_eq(hali_code_cells(HALI_OP_ADD_I32, 0), 1);   /* 3 regs */
  ck_assert_uint_eq(hali_code_cells(HALI_OP_CONST_I32, 0), 2); /* + imm */
  /* More than 3 registers: a second cell of 4 slots. */
  ck_assert_uint_eq(hali_code_cells(HALI_OP_HAL_BUFFER_SUBSPAN, 0), 2);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_HAL_COMMAND_BUFFER_DISPATCH, 0),
                    2);
  /* A register tail: its count cell, then 4 slots per cell. */
  ck_assert_uint_eq(hali_code_cells(HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 0), 2);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 4), 3);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 5), 4);
  /* switch: cell0, the default, one cell per target. */
  ck_assert_uint_eq(hali_code_cells(HALI_OP_SWITCH, 3), 5);
  /* call, call.import, fiber.spawn: cell0, the callee, 4 slots per cell. */
  ck_assert_uint_eq(hali_code_cells(HALI_OP_CALL, 0), 2);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_CALL, 5), 4);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_CALL_IMPORT, 5), 4);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_FIBER_SPAWN, 4), 3);
  /* return: cell0, 4 slots per cell. */
  ck_assert_uint_eq(hali_code_cells(HALI_OP_RETURN, 0), 1);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_RETURN, 4), 2);
  ck_assert_uint_eq(hali_code_cells(HALI_OP_RETURN, 5), 3);
  /* A fused compare-and-branch: the compare's cell and two targets. */
  ck_assert_uint_eq(hali_code_cells(HALI_OP_BR_LT_S_I64, 0), 3);
}
END_TEST

static Suite *suite_ops(bool with_coverage) {
  Suite *s = suite_create("ops");
  TCase *tc;

  tc = tcase_create("const");
  tcase_add_checked_fixture(tc, NULL, free_progs);
  tcase_add_test(tc, code_cells_follow_the_layout);
  tcase_add_test(tc, const_i32_literals);
  tcase_add_test(tc, const_i64_literals);
  tcase_add_test(tc, const_f32_literals);
  tcase_add_test(tc, const_f64_literals);
  tcase_add_test(tc, mov_every_type);
  suite_add_tcase(s, tc);

  tc = tcase_create("int");
  tcase_add_checked_fixture(tc, NULL, free_progs);
  tcase_add_test(tc, int_add_sub_mul_wrap);
  tcase_add_test(tc, int_div_rem);
  tcase_add_test(tc, int_div_rem_by_zero);
  tcase_add_test(tc, int_div_rem_overflow);
  tcase_add_test(tc, int_neg_abs_not);
  tcase_add_test(tc, int_min_max);
  tcase_add_test(tc, int_bitwise);
  tcase_add_test(tc, int_shifts);
  tcase_add_test(tc, int_ctlz);
  tcase_add_test(tc, int_compare);
  tcase_add_test(tc, int_select);
  tcase_add_test(tc, narrow_values_ignore_stale_slot_bits);
  suite_add_tcase(s, tc);

  tc = tcase_create("float");
  tcase_add_checked_fixture(tc, NULL, free_progs);
  tcase_add_test(tc, float_add_sub_mul_div);
  tcase_add_test(tc, float_neg_abs);
  tcase_add_test(tc, float_min_max);
  tcase_add_test(tc, float_sqrt_floor_ceil);
  tcase_add_test(tc, float_fma_rounds_once);
  tcase_add_test(tc, float_compare);
  tcase_add_test(tc, float_select);
  suite_add_tcase(s, tc);

  tc = tcase_create("convert");
  tcase_add_checked_fixture(tc, NULL, free_progs);
  tcase_add_test(tc, convert_trunc_ext);
  tcase_add_test(tc, convert_int_to_float);
  tcase_add_test(tc, convert_float_to_int_saturates);
  tcase_add_test(tc, convert_fpext_fptrunc);
  tcase_add_test(tc, convert_bitcast);
  tcase_add_test(tc, convert_narrow_trunc_ext);
  suite_add_tcase(s, tc);

  tc = tcase_create("format_1_2");
  tcase_add_checked_fixture(tc, NULL, free_progs);
  tcase_add_test(tc, int_fma);
  tcase_add_test(tc, int_nz);
  tcase_add_test(tc, float_compare_ordered_unordered);
  tcase_add_test(tc, float_rem);
  tcase_add_test(tc, float_round);
  tcase_add_test(tc, float_round_even_ignores_rounding_mode);
  tcase_add_test(tc, float_isnan);
  tcase_add_test(tc, float_exp_log);
  tcase_add_test(tc, float_pow_rsqrt);
  tcase_add_test(tc, float_trig_tanh_erf);
  suite_add_tcase(s, tc);

  tc = tcase_create("control");
  tcase_add_test(tc, control_br_loops);
  tcase_add_test(tc, control_cond_br);
  tcase_add_test(tc, division_by_proven_constant);
  tcase_add_test(tc, add_compare_branch_fused);
  tcase_add_test(tc, fused_branch_polls_only_backward);
  tcase_add_test(tc, mul_add_fused);
  tcase_add_test(tc, add_compare_branch_fused_sum_second);
  tcase_add_test(tc, add_compare_branch_yield_adds_once);
  tcase_add_test(tc, control_switch);
  tcase_add_test(tc, control_switch_large_table);
  tcase_add_test(tc, control_call_recursion);
  tcase_add_test(tc, control_call_results_and_argument_order);
  tcase_add_test(tc, control_call_stack_growth);
  tcase_add_test(tc, control_return_values);
  suite_add_tcase(s, tc);

  tc = tcase_create("failure");
  tcase_add_test(tc, fail_status_codes);
  tcase_add_test(tc, fail_message_and_backtrace);
  tcase_add_test(tc, assert_op);
  tcase_add_test(tc, cond_fail_op);
  tcase_add_test(tc, failure_pc_counts_fused_instructions);
  suite_add_tcase(s, tc);

  tc = tcase_create("invoke");
  tcase_add_test(tc, invoke_call_depth_limit);
  tcase_add_test(tc, call_and_return_forms);
  tcase_add_test(tc, calls_check_room_per_largest_frame);
  tcase_add_test(tc, invoke_unbounded_recursion_default_stack);
  tcase_add_test(tc, invoke_argument_errors);
  tcase_add_test(tc, globals_load_and_store_every_type);
  suite_add_tcase(s, tc);

  /* Every HAL op (tests/check_hal_ops.c). */
  check_hal_ops_add_tcases(s);
  check_calls_add_tcases(s);

  /* Check runs test cases in the order they were added, so this one sees
   * what all the others recorded. */
  if (with_coverage) {
    tc = tcase_create("coverage");
    tcase_add_test(tc, every_op_exercised);
    suite_add_tcase(s, tc);
  }
  return s;
}

int main(void) {
  /* The coverage check needs the whole suite: skip it when Check is told
   * to run only part of it. */
  const bool partial = getenv("CK_RUN_CASE") || getenv("CK_RUN_SUITE") ||
                       getenv("CK_INCLUDE_TAGS") || getenv("CK_EXCLUDE_TAGS");
  void *seen = mmap(NULL, HALI_OP_INTERNAL_END, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (seen == MAP_FAILED) {
    perror("mmap");
    return EXIT_FAILURE;
  }
  g_seen = seen;
  int rc = hali_test_main(suite_ops(!partial));
  munmap(seen, HALI_OP_INTERNAL_END);
  return rc;
}
