/* hali — the op descriptions, built once from vm/ops.def. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "vm/ops.h"
#include "vm/strmap.h"

static hali_op_info_t hali_ops[HALI_OP_COUNT] = {
#define OP(e, n, f, s, y) {n, f, s, y, 0, 0, 0, 0, {{0, 0}}, 0, {{0, 0, 0}}},
#include "vm/ops.def"
#undef OP
};

static pthread_once_t hali_ops_once = PTHREAD_ONCE_INIT;
/* Op name -> opcode, built once with the descriptions (hali_op_lookup).
 * Its table is static, sized so that it never grows: the library holds no
 * heap memory between calls (hali_host_allocations_live can reach 0, and
 * the host allocator can change).  Should an insert still fail, the lookup
 * scans the op table. */
#define HALI_OP_NAME_SLOTS 2048u
_Static_assert(HALI_OP_COUNT * 2u < HALI_OP_NAME_SLOTS,
               "the op-name table must stay under half full");
static hali_strmap_slot_t hali_op_name_slots[HALI_OP_NAME_SLOTS];
static hali_strmap_t hali_op_names = {hali_op_name_slots, HALI_OP_NAME_SLOTS,
                                      0, 0};
static bool hali_op_names_ok;
/* Set (release) once hali_ops_init has run. */
static atomic_bool hali_ops_ready;

static const struct {
  char letter;
  hali_type_t type;
  const char *name;
} hali_type_table[] = {
    {'i', HALI_TYPE_I32, "i32"},
    {'l', HALI_TYPE_I64, "i64"},
    {'f', HALI_TYPE_F32, "f32"},
    {'d', HALI_TYPE_F64, "f64"},
    {'D', HALI_TYPE_DEVICE, "!hal.device"},
    {'A', HALI_TYPE_ALLOCATOR, "!hal.allocator"},
    {'B', HALI_TYPE_BUFFER, "!hal.buffer"},
    {'V', HALI_TYPE_BUFFER_VIEW, "!hal.buffer_view"},
    {'C', HALI_TYPE_COMMAND_BUFFER, "!hal.command_buffer"},
    {'E', HALI_TYPE_FENCE, "!hal.fence"},
    {'X', HALI_TYPE_EXECUTABLE, "!hal.executable"},
    {'H', HALI_TYPE_CHANNEL, "!hal.channel"},
    {'R', HALI_TYPE_ANY_REF, "!ref"},
    {'t', HALI_TYPE_TENSOR, "tensor"},
    {'x', HALI_TYPE_INDEX, "index"},
};
#define HALI_TYPE_TABLE_N (sizeof(hali_type_table) / sizeof(hali_type_table[0]))

const char *hali_type_name(hali_type_t t) {
  for (size_t i = 0; i < HALI_TYPE_TABLE_N; ++i)
    if (hali_type_table[i].type == t) return hali_type_table[i].name;
  return "?";
}

hali_type_t hali_type_parse(const char *s, size_t len) {
  for (size_t i = 0; i < HALI_TYPE_TABLE_N; ++i) {
    const char *n = hali_type_table[i].name;
    if (hali_type_table[i].type != HALI_TYPE_ANY_REF && strlen(n) == len &&
        memcmp(n, s, len) == 0)
      return hali_type_table[i].type;
  }
  return HALI_TYPE_NONE;
}

hali_type_t hali_type_from_letter(char c) {
  for (size_t i = 0; i < HALI_TYPE_TABLE_N; ++i)
    if (hali_type_table[i].letter == c) return hali_type_table[i].type;
  return HALI_TYPE_NONE;
}

/* Signatures are checked by tests/check_ops.c (every row parses, roles and
 * types are known); here a malformed one would only yield fewer operands. */
static void hali_ops_init(void) {
  hali_op_names_ok = true;
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op)
    if (hali_strmap_insert(&hali_op_names, hali_ops[op].name,
                           strlen(hali_ops[op].name), op) != op)
      hali_op_names_ok = false;
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op) {
    hali_op_info_t *info = &hali_ops[op];
    const char *p = info->signature;
    while (*p) {
      while (*p == ' ') ++p;
      if (!p[0] || !p[1]) break;
      if (p[0] == '[') { /* a counted list: [rt#4] or [rl*] */
        if (!p[1] || !p[2] || info->list_count == HALI_OP_MAX_LISTS) break;
        hali_list_desc_t *l = &info->lists[info->list_count++];
        l->role = (uint8_t)p[1];
        l->type = p[2] == '_' ? HALI_TYPE_NONE : hali_type_from_letter(p[2]);
        l->count = HALI_LIST_REST;
        p += 3;
        if (*p == '#') {
          unsigned k = 0;
          while (*++p >= '0' && *p <= '9') k = k * 10 + (unsigned)(*p - '0');
          l->count = (uint8_t)(k < HALI_LIST_REST ? k : HALI_LIST_REST - 1);
        } else if (*p == '*') {
          ++p;
        }
        if (*p == ']') ++p;
        continue;
      }
      if (p[0] == HALI_ROLE_VARIADIC) { /* always last */
        info->tail = p[1];
        info->tail_type = hali_type_from_letter(p[1]);
        break;
      }
      if (info->operand_count == HALI_OP_MAX_OPERANDS) break;
      hali_operand_desc_t *d = &info->operands[info->operand_count++];
      d->role = (uint8_t)p[0];
      d->type = p[1] == '_' ? HALI_TYPE_NONE : hali_type_from_letter(p[1]);
      if (d->role == HALI_ROLE_READ || d->role == HALI_ROLE_WRITE)
        info->reg_count++;
      p += 2;
    }
  }
  atomic_store_explicit(&hali_ops_ready, true, memory_order_release);
}

const hali_op_info_t *hali_op_info(unsigned op) {
  if (op >= HALI_OP_COUNT) return NULL;
  /* Called several times per instruction at load: the flag spares the
   * pthread_once call once the table is built. */
  if (!atomic_load_explicit(&hali_ops_ready, memory_order_acquire))
    pthread_once(&hali_ops_once, hali_ops_init);
  return &hali_ops[op];
}

int hali_op_lookup(const char *name, size_t len) {
  pthread_once(&hali_ops_once, hali_ops_init);
  if (hali_op_names_ok) {
    uint32_t op = hali_strmap_find(&hali_op_names, name, len);
    return op == HALI_STRMAP_NONE ? -1 : (int)op;
  }
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op)
    if (strlen(hali_ops[op].name) == len &&
        memcmp(hali_ops[op].name, name, len) == 0)
      return (int)op;
  return -1;
}

/* The ISA reference, generated from the op table (doc/isa.md). */
#include "vm/ir.h"

static const char hali_isa_preamble[] =
    "# hali instruction set\n"
    "\n"
    "<!-- Generated by `hali isa` from vm/ops.def; do not edit. "
    "`make isa-doc` regenerates it and `make check` fails when it is "
    "stale. -->\n"
    "\n"
    "Registers are typed: scalars (`i32`, `i64`, `f32`, `f64`) live in a "
    "bank of 64-bit slots, refs (`!hal.*`) in a bank of reference-counted "
    "pointers. Operands in the synopses are named A, B, C, D in the order "
    "they are written; `A = ...` means the first operand is the register "
    "written.\n"
    "\n"
    "## Semantics at the edges\n"
    "\n"
    "- **Integer arithmetic** wraps (two's complement). `div.s`/`rem.s` "
    "truncate toward zero; `rem.s` has the sign of the dividend.\n"
    "- **Division or remainder by zero**, and **INT_MIN / -1** or "
    "**INT_MIN % -1** (signed), fail the invocation with `OUT_OF_RANGE` "
    "and a message naming the op (never a signal or a crash).\n"
    "- **Shifts** use the amount modulo the width (`& 31` or `& 63`), "
    "so an amount of 32 (or 64) shifts by 0 and a negative amount is "
    "taken as unsigned (-1 shifts by 31 or 63); `shr.s` is arithmetic, "
    "`shr.u` logical.\n"
    "- **ctlz** of 0 is the width (32 or 64). **abs** of INT_MIN is INT_MIN.\n"
    "- **Float comparisons** follow IEEE 754: `eq lt le gt ge` and "
    "`ne.o` are ordered (false when either operand is nan), `ne` and "
    "`eq.u lt.u le.u gt.u ge.u` are unordered (true when either is nan); "
    "-0 equals +0. Results are i32 0 or 1, as are those of `nz` (B != "
    "0).\n"
    "- **Float min/max** return nan when either operand is nan and order "
    "-0 below +0 (IEEE 754-2019 minimum/maximum).\n"
    "- **Float to int** (`fptosi`, `fptoui`) rounds toward zero and "
    "saturates: values below the target's range give its minimum, above "
    "give its maximum, nan gives 0 (negative values give 0 for unsigned).\n"
    "- **Int to float** rounds to nearest, ties to even (once, also for "
    "i64 to f32). **fptrunc.f64.f32** rounds to nearest even: values "
    "that round past the largest f32 become ±inf, values of at most half "
    "the smallest subnormal in magnitude become ±0, and nan stays nan; "
    "**fpext** is exact.\n"
    "- **fma** rounds once. `sqrt` of a negative number is nan.\n"
    "- **Integer fma** (`fma.i32`, `fma.i64`) is `mul` then `add`, both "
    "wrapping: the low bits of the exact B * C + D, the same for signed "
    "and unsigned operands.\n"
    "- **Narrow integers** live in i32 (or i64) registers. `trunc.*.i8` "
    "and `trunc.*.i16` keep the low 8 or 16 bits and zero the rest; "
    "`ext.s.i8.*`/`ext.s.i16.*` sign-extend the low 8 or 16 bits of their "
    "i32 operand and `ext.u.*` zero-extend them, ignoring the higher bits "
    "(so `ext.s.i8.i32` of 0x17f is 127).\n"
    "- **rem.f32/f64** is C `fmod`, computed exactly: the result has the "
    "sign of B and is smaller than C in magnitude; nan when C is ±0, B is "
    "infinite or either is nan; B when C is infinite and B finite.\n"
    "- **round** rounds half-way cases away from zero, **round.even** to "
    "even, both regardless of the host's rounding mode; `floor`, `ceil`, "
    "`round` and `round.even` keep the sign of zero (`round(-0.4)` is "
    "-0), and return infinities and nan unchanged.\n"
    "- **exp exp2 expm1 log log10 log1p log2 pow tanh atan atan2 sin cos "
    "erf** are the host C library's functions: their special values are "
    "those of C Annex F / IEEE 754 (e.g. `log(±0)` = -inf, `log(x < 0)` = "
    "nan, `pow(x, ±0)` = 1 even for nan, `atan2(±0, -0)` = ±pi, `sin(inf)` "
    "= nan, overflow gives inf), their other results are within a few ulp "
    "and may differ in the last bits between hosts. **rsqrt** is `1 / "
    "sqrt(B)`, two correctly rounded steps (so exact where both are).\n"
    "- **isnan** is 1 for every nan, quiet or signalling, of either sign.\n"
    "- **select** and **cond_br** treat any non-zero i32 as true; "
    "**switch** treats its index as unsigned, so negative indices take "
    "the default.\n"
    "- **fail** returns the status code in its register (a canonical code "
    "1-16; anything else becomes UNKNOWN) with the message. **assert** "
    "fails with `FAILED_PRECONDITION` when its operand is 0.\n"
    "- Every register must be written before it is read on every path "
    "(the verifier rejects the module otherwise).\n"
    "- **Opcodes** are stable: codes 205 and up are new in binary format "
    "1.2 (doc/format.md, \"Versions\"); older modules keep their codes.\n"
    "\n"
    "## Operand signatures\n"
    "\n"
    "Each operand is a role and a type: `w` written register, `r` read "
    "register, `k` immediate, `b` block, `s` string, `f` function, `d` "
    "rodata, `e` executable, `m` register whose storage is written in "
    "place, `v` variadic tail; types `i` i32, `l` i64, "
    "`f` f32, `d` f64, `D A B V C E X` device, allocator, buffer, buffer "
    "view, command buffer, fence, executable, `R` any ref, `t` tensor, `_` "
    "any register (or none). Tensor ops end with counted lists: `[rt#4]` is "
    "a list of tensor registers read whose length is the immediate operand "
    "4 (counting from 0), `[rl*]` the operands left after the other lists "
    "(their number is derived, e.g. from the dynamic dimensions of the "
    "tensors written); in a list, role `a` is a register read or an "
    "immediate.\n"
    "\n"
    "Flags: **T** terminator, **F** may fail at run time, **S** side "
    "effects, **V** variadic, **Y** may suspend the fiber.\n"
    "\n"
    "## Opcodes\n"
    "\n"
    "| code | name | signature | flags | synopsis |\n"
    "|---:|---|---|---|---|\n";

char *hali_isa_markdown(void) {
  hali_strbuf_t sb = {0};
  hali_strbuf_append(&sb, hali_isa_preamble, sizeof(hali_isa_preamble) - 1);
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op) {
    const hali_op_info_t *info = hali_op_info(op);
    char flags[8] = "", *p = flags;
    if (info->flags & HALI_OPF_TERM) *p++ = 'T';
    if (info->flags & HALI_OPF_FAILS) *p++ = 'F';
    if (info->flags & HALI_OPF_SIDE) *p++ = 'S';
    if (info->flags & HALI_OPF_VARIADIC) *p++ = 'V';
    if (info->flags & HALI_OPF_SUSPEND) *p++ = 'Y';
    *p = 0;
    /* An op without operands gets an empty cell, not an empty code span. */
    hali_strbuf_printf(&sb, "| %u | `%s` | %s%s%s | %s | %s |\n", op,
                       info->name, *info->signature ? "`" : "",
                       info->signature, *info->signature ? "`" : "", flags,
                       info->synopsis);
  }
  return hali_strbuf_take(&sb);
}
