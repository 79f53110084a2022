/* Tests for the .hasm assembler (loader/asm.c) and the disassembler
 * (vm/ir_print.c): every syntax error names file:line:column and what was
 * expected; everything the grammar in doc/asm.md allows assembles to the IR
 * it describes; the disassembly of a small module is checked against golden
 * text.
 *
 * Tests in the "known_bugs" case assert the behaviour doc/asm.md promises
 * and currently fail; each names the bug it pins down. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/asm_int.h"
#include "tests/testutil.h"

/* True when Check runs the tests in its own process (CK_FORK=no, as under
 * valgrind): a test that still crashes because of a known bug is skipped
 * then, so that it cannot take the rest of the suite down with it. */
static bool no_fork(void) {
  const char *f = getenv("CK_FORK");
  return f && strcmp(f, "no") == 0;
}

/* ------------------------------------------------------------------------ */
/* Helpers. */

/* Assembles and verifies |text| as "test.hasm". */
static hali_status_t load_text(const char *text, hali_ir_module_t **out) {
  return hali_load_bytes((const uint8_t *)text, strlen(text), "test.hasm",
                         out);
}

/* Asserts that |text| is rejected with INVALID_ARGUMENT and that the error
 * text contains every string of the NULL-terminated |needles|.  The status
 * is freed before any assertion fires so that a failure does not leak. */
static void expect_reject(int line, const char *text,
                          const char *const *needles) {
  hali_ir_module_t *m = NULL;
  hali_status_t s = load_text(text, &m);
  if (!s) {
    hali_ir_module_free(m);
    ck_abort_msg("line %d: the module was accepted:\n%s", line, text);
  }
  char report[2048];
  char *msg = hali_status_to_string(s);
  hali_status_code_t code = hali_status_code(s);
  hali_status_free(s);
  snprintf(report, sizeof(report), "%s", msg ? msg : "(null)");
  free(msg);
  ck_assert_msg(code == HALI_STATUS_INVALID_ARGUMENT,
                "line %d: expected INVALID_ARGUMENT, got %s", line, report);
  for (const char *const *n = needles; *n; ++n)
    ck_assert_msg(strstr(report, *n) != NULL,
                  "line %d: error does not contain \"%s\": %s", line, *n,
                  report);
}
#define REJECT(text, ...)                                                      \
  expect_reject(__LINE__, (text), (const char *const[]){__VA_ARGS__, NULL})

/* Like ck_assert_ok, but frees the status before failing so that a failing
 * test stays leak-free under valgrind. */
#define expect_ok(s) expect_ok_at((s), __LINE__)
static void expect_ok_at(hali_status_t s, int line) {
  if (!s) return;
  char report[2048];
  char *msg = hali_status_to_string(s);
  hali_status_free(s);
  snprintf(report, sizeof(report), "%s", msg ? msg : "(null)");
  free(msg);
  ck_abort_msg("line %d: expected OK, got %s", line, report);
}

/* Assembles + verifies |text|, failing the test on error. */
static hali_ir_module_t *must_load(const char *text) {
  hali_ir_module_t *m = NULL;
  hali_status_t s = load_text(text, &m);
  if (s) {
    char report[2048];
    char *msg = hali_status_to_string(s);
    hali_status_free(s);
    snprintf(report, sizeof(report), "%s", msg ? msg : "(null)");
    free(msg);
    ck_abort_msg("module rejected: %s", report);
  }
  return m;
}

static int32_t call_i32(const char *text, const char *fn, int32_t arg,
                        bool has_arg) {
  hali_value_t a = hali_value_i32(arg), r = {0};
  ck_assert_ok(hali_test_call(text, fn, &a, has_arg ? 1 : 0, &r, 1));
  ck_assert_int_eq(r.type, HALI_TYPE_I32);
  return r.i32;
}

/* ------------------------------------------------------------------------ */
/* Malformed text: one table row per distinct error.  Each names the place
 * (test.hasm:line:column) and what was expected or found. */

typedef struct {
  const char *what;
  const char *text;
  const char *needles[4];
} bad_text_t;

static const bad_text_t bad_texts[] = {
    {"unknown op",
     "func @f(%a: i32) -> i32 {\n"
     "  %b = frob.i32 %a\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:2:8: unknown op", "found 'frob.i32'"}},
    {"missing comma between operands",
     "func @f(%a: i32) -> i32 {\n"
     "  %b = add.i32 %a %a\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:2:19: expected ',' between operands", "found '%a'"}},
    {"op that defines a register written without '%r ='",
     "func @f(%a: i32) -> i32 {\n"
     "  add.i32 %a, %a\n"
     "  return %a\n"
     "}\n",
     {"test.hasm:2:3:", "'add.i32' defines a register",
      "expected '%name = add.i32'"}},
    {"missing '=' after the written register",
     "func @f(%a: i32) -> i32 {\n"
     "  %b add.i32 %a, %a\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:2:3: expected an instruction", "found '%b'"}},
    {"too many written registers",
     "func @f(%a: i32) -> i32 {\n"
     "  %b, %c = add.i32 %a, %a\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:2:3:", "'add.i32' defines 1 register(s), 2 given"}},
    {"unterminated string",
     "func @f() {\n"
     "  %c = const.i32 1\n"
     "  fail %c, \"abc\n"
     "}\n",
     {"test.hasm:3:12: unterminated string"}},
    {"unknown escape in a string",
     "func @f() {\n"
     "  %c = const.i32 1\n"
     "  fail %c, \"a\\qb\"\n"
     "}\n",
     {"test.hasm:3:12: unknown escape '\\q' in string"}},
    {"\\x escape without two hex digits",
     "func @f() {\n"
     "  %c = const.i32 1\n"
     "  fail %c, \"a\\x4\"\n"
     "}\n",
     {"test.hasm:3:12: expected two hex digits after \\x"}},
    {"unexpected character",
     "func @f() -> i32 {\n"
     "  %c = const.i32 1 ;\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:20: unexpected character"}},
    {"sigil without a name",
     "func @f() -> i32 {\n"
     "  % = const.i32 1\n"
     "}\n",
     {"test.hasm:2:3: expected a name after '%'"}},
    {"undefined register",
     "func @f(%a: i32) -> i32 {\n"
     "  %b = add.i32 %a, %zz\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:2:20: use of undefined register", "found '%zz'"}},
    {"read register of the wrong type (add.i32 on an i64)",
     "func @f(%a: i64) -> i32 {\n"
     "  %c = add.i32 %a, %a\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:16:", "register is i64", "must be i32", "found '%a'"}},
    {"written register of the wrong type",
     "func @f(%a: i32) -> i32 {\n"
     "  %a = const.i64 1\n"
     "  return %a\n"
     "}\n",
     {"test.hasm:2:3:", "register is i32 but this operand must be i64"}},
    {"i32 literal too large",
     "func @f() -> i32 {\n"
     "  %c = const.i32 4294967296\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:18: i32 literal out of range", "found '4294967296'"}},
    {"i32 literal too small",
     "func @f() -> i32 {\n"
     "  %c = const.i32 -2147483649\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:18: i32 literal out of range"}},
    {"i64 literal too small",
     "func @f() -> i64 {\n"
     "  %c = const.i64 -9223372036854775809\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:18: i64 literal out of range"}},
    {"i64 literal too large",
     "func @f() -> i64 {\n"
     "  %c = const.i64 18446744073709551616\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:18:", "i64 literal"}},
    {"not an integer",
     "func @f() -> i32 {\n"
     "  %c = const.i32 1.5\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:18: expected an i32 literal", "found '1.5'"}},
    {"not a float",
     "func @f() -> f64 {\n"
     "  %c = const.f64 1.5x\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:18: expected an f64 literal", "found '1.5x'"}},
    {"f32 bit pattern wider than 32 bits",
     "func @f() -> f32 {\n"
     "  %c = const.f32 bits(0x100000000)\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:23: i32 literal out of range"}},
    {"undefined block label",
     "func @f(%a: i32) -> i32 {\n"
     "  br ^nowhere\n"
     "}\n",
     {"test.hasm:2:6: undefined block label", "found '^nowhere'"}},
    {"block label defined twice",
     "func @f(%a: i32) -> i32 {\n"
     "^x:\n"
     "  return %a\n"
     "^x:\n"
     "  return %a\n"
     "}\n",
     {"test.hasm:4:1: block label defined twice", "found '^x'"}},
    {"undefined rodata",
     "func @f() -> tensor<2xf32> {\n"
     "  %c = tensor.constant @w : tensor<2xf32>\n"
     "  return %c\n"
     "}\n",
     {"test.hasm:2:24: undefined rodata", "found '@w'"}},
    {"negative layout count",
     "executable @e format \"ffi\" library \"k.so\" {\n"
     "  export @k(f32) -> () layout(constants -1, bindings 0)\n"
     "}\n",
     {"test.hasm:2:41: layout counts are between 0 and 2147483647",
      "found '-1'"}},
    {"layout count past 2^31 - 1",
     "executable @e format \"ffi\" library \"k.so\" {\n"
     "  export @k(f32) -> () layout(constants 1, bindings 2147483648)\n"
     "}\n",
     {"test.hasm:2:53: layout counts are between 0 and 2147483647",
      "found '2147483648'"}},
    {"layout count past 2^32 - 1",
     "executable @e format \"ffi\" library \"k.so\" {\n"
     "  export @k(f32) -> () layout(constants 4294967296, bindings 0)\n"
     "}\n",
     {"test.hasm:2:41: i32 literal out of range"}},
    {"rodata defined twice",
     "rodata @w = f32[1.0]\n"
     "rodata @w = i8[1]\n",
     {"test.hasm:2:8: rodata defined twice", "found '@w'"}},
    {"function defined twice",
     "func @f(%a: i32) -> i32 {\n"
     "  return %a\n"
     "}\n"
     "func @f() {\n"
     "  return\n"
     "}\n",
     {"test.hasm:4:6: function defined twice", "found '@f'"}},
    {"parameter named twice",
     "func @f(%a: i32, %a: i64) {\n"
     "  return\n"
     "}\n",
     {"test.hasm:1:18: parameter named twice"}},
    {"call to an undefined function",
     "func @f(%a: i32) -> i32 {\n"
     "  %b = call @g(%a)\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:2:13: call to undefined function", "found '@g'"}},
    {"call with too few arguments",
     "func @g(%a: i32, %b: i32) -> i32 {\n"
     "  return %a\n"
     "}\n"
     "func @f(%a: i32) -> i32 {\n"
     "  %b = call @g(%a)\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:5:13:", "@g takes 2 argument(s), 1 given"}},
    {"call with too many arguments",
     "func @g(%a: i32) -> i32 {\n"
     "  return %a\n"
     "}\n"
     "func @f(%a: i32) -> i32 {\n"
     "  %b = call @g(%a, %a)\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:5:20:", "too many arguments: @g takes 1"}},
    {"call assigning too many results",
     "func @g(%a: i32) -> i32 {\n"
     "  return %a\n"
     "}\n"
     "func @f(%a: i32) -> i32 {\n"
     "  %b, %c = call @g(%a)\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:5:17:", "@g returns 1 value(s), 2 assigned"}},
    {"call ignoring the result",
     "func @g(%a: i32) -> i32 {\n"
     "  return %a\n"
     "}\n"
     "func @f(%a: i32) -> i32 {\n"
     "  call @g(%a)\n"
     "  return %a\n"
     "}\n",
     {"test.hasm:5:8:", "@g returns 1 value(s), 0 assigned"}},
    {"call argument of the wrong type",
     "func @g(%a: i32) -> i32 {\n"
     "  return %a\n"
     "}\n"
     "func @f(%x: f64) -> i32 {\n"
     "  %b = call @g(%x)\n"
     "  return %b\n"
     "}\n",
     {"test.hasm:5:16:", "register is f64 but this operand must be i32"}},
    {"return without its value",
     "func @f(%a: i32) -> i32 {\n"
     "  return\n"
     "}\n",
     {"test.hasm:2:3:", "@f returns 1 value(s), return gives 0"}},
    {"return with too many values",
     "func @f(%a: i32) -> i32 {\n"
     "  return %a, %a\n"
     "}\n",
     {"test.hasm:2:14:", "too many return values: @f returns 1"}},
    {"return of the wrong type",
     "func @f(%a: i64) -> i32 {\n"
     "  return %a\n"
     "}\n",
     {"test.hasm:2:10:", "register is i64 but this operand must be i32"}},
    {"return defining registers",
     "func @f(%a: i32) -> i32 {\n"
     "  %b = return %a\n"
     "}\n",
     {"test.hasm:2:3: return does not define registers"}},
    {"unknown parameter type",
     "func @f(%a: i33) -> i32 {\n"
     "  return %a\n"
     "}\n",
     {"test.hasm:1:13: expected a type", "found 'i33'"}},
    {"unknown result type",
     "func @f(%a: i32) -> (i32, !hal.bogus) {\n"
     "  return %a\n"
     "}\n",
     {"test.hasm:1:27: expected a type", "found '!hal.bogus'"}},
    {"missing closing brace",
     "func @f() {\n"
     "  return\n",
     {"test.hasm:", "expected '}' to close @f", "end of file"}},
    {"missing parameter list",
     "func @f {\n"
     "  return\n"
     "}\n",
     {"test.hasm:1:9: expected '(' to open the parameter list", "found '{'"}},
    {"garbage at top level",
     "func @f() {\n"
     "  return\n"
     "}\n"
     "fnuc @g() {\n"
     "}\n",
     {"test.hasm:4:1: expected 'func'", "found 'fnuc'"}},
    {"switch table without brackets",
     "func @f(%a: i32) {\n"
     "  switch %a, ^entry, ^entry\n"
     "}\n",
     {"test.hasm:2:22: expected '['", "found '^entry'"}},
    {"string where a register is expected",
     "func @f(%a: i32) {\n"
     "  fail \"x\", %a\n"
     "}\n",
     {"test.hasm:2:8: expected a register (i32)", "found '\"x\"'"}},
    {"loc without a number",
     "func @f() {\n"
     "  return loc(x)\n"
     "}\n",
     {"test.hasm:2:14: expected an i32 literal", "found 'x'"}},
};
#define BAD_TEXT_COUNT ((int)(sizeof(bad_texts) / sizeof(bad_texts[0])))

START_TEST(asm_rejects_malformed_text) {
  const bad_text_t *b = &bad_texts[_i];
  char report[2048];
  hali_ir_module_t *m = NULL;
  hali_status_t s = load_text(b->text, &m);
  if (!s) {
    hali_ir_module_free(m);
    ck_abort_msg("[%s] the module was accepted", b->what);
  }
  char *msg = hali_status_to_string(s);
  hali_status_code_t code = hali_status_code(s);
  hali_status_free(s);
  snprintf(report, sizeof(report), "%s", msg ? msg : "(null)");
  free(msg);
  ck_assert_msg(code == HALI_STATUS_INVALID_ARGUMENT,
                "[%s] expected INVALID_ARGUMENT: %s", b->what, report);
  for (int k = 0; k < 4 && b->needles[k]; ++k)
    ck_assert_msg(strstr(report, b->needles[k]) != NULL,
                  "[%s] error does not contain \"%s\": %s", b->what,
                  b->needles[k], report);
}
END_TEST

/* Errors name the file the caller gave, and columns count from 1. */
START_TEST(asm_error_names_the_given_file) {
  const char *text = "func @f() {\n\tbogus\n}\n";
  hali_ir_module_t *m = NULL;
  hali_status_t s = hali_asm_parse(text, strlen(text), "dir/x.hasm", &m);
  ck_assert_ptr_null(m);
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT,
                   "dir/x.hasm:2:2: unknown op, found 'bogus'");
  s = hali_asm_parse(text, strlen(text), NULL, &m);
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT, "<input>:2:2:");
}
END_TEST

/* Of several errors, the first in file order is the one reported. */
START_TEST(asm_reports_first_error) {
  REJECT("func @a() {\n"
         "  return\n"
         "}\n"
         "func @b() -> i32 {\n"
         "  %x = const.i32 99999999999\n"
         "  %y = nope.i32 %x\n"
         "  return %y\n"
         "}\n",
         "test.hasm:5:18: i32 literal out of range");
}
END_TEST

/* The assembler lexes on demand and pass 1 skips bodies by scanning their
 * text (loader/asm_lex.c), but errors read as when the whole file was
 * lexed first: the first lexical error in the file wins over any syntax
 * error, wherever each is. */
START_TEST(asm_first_lexical_error_wins) {
  /* A syntax error in one body, a lexical error in a later one. */
  REJECT("func @a() {\n"
         "  return 5 5\n"
         "}\n"
         "func @b() {\n"
         "  return\n"
         "  $\n"
         "}\n",
         "test.hasm:6:3: unexpected character, found '$'");
  /* A lexical error in a body pass 1 skips, a syntax error in a later
   * header. */
  REJECT("func @a() {\n"
         "  return\n"
         "  \"open\n"
         "}\n"
         "func @b( {\n"
         "}\n",
         "test.hasm:3:3: unterminated string, found '\"'");
  /* Two lexical errors: the first in the file, not the first met. */
  REJECT("func @a() {\n"
         "  %x = const.i32 1 ^\n"
         "}\n"
         "func @b() -> i32 ! {\n"
         "}\n",
         "test.hasm:2:20: expected a name after '^'");
  /* Braces inside a tensor type are part of it. */
  REJECT("func @a() {\n"
         "  return tensor<}{>\n"
         "}\n"
         "func @b() {\n"
         "  return\n"
         "}\n",
         "test.hasm:2:10: expected an instruction, found 'tensor<}{>'");
}
END_TEST

/* What hides a brace or a label from the body scan: strings, comments;
 * and a label is a label with a comment and a line break before its ':'. */
START_TEST(asm_body_scan_agrees_with_lexer) {
  hali_ir_module_t *m = must_load(
      "func @a() -> i32 {\n"
      "  %c = const.i32 1\n"
      "  assert %c, \"} ^s: {\"   # } ^c: {\n"
      "  // ^d: }\n"
      "  br ^next  // ^e: {\n"
      "^next   # a comment\n"
      "  :\n"
      "  return %c\n"
      "}\n"
      "func @b() -> i32 {\n"
      "  %x = call @a()\n"
      "  return %x\n"
      "}\n");
  ck_assert_uint_eq(m->func_count, 2);
  const hali_ir_func_t *a = &m->funcs[0];
  ck_assert_uint_eq(a->block_count, 2);
  ck_assert_str_eq(a->blocks[0].name, "entry");
  ck_assert_str_eq(a->blocks[1].name, "next");
  ck_assert_uint_eq(a->blocks[0].insn_count, 3);
  ck_assert_uint_eq(a->blocks[1].insn_count, 1);
  ck_assert_uint_eq(a->blocks[1].insns[0].line, 8);
  /* @b's lines count the lines of @a's body the scan skipped. */
  ck_assert_uint_eq(m->funcs[1].line, 10);
  ck_assert_uint_eq(m->funcs[1].blocks[0].insns[1].line, 12);
  ck_assert_str_eq(m->strings[m->funcs[0].blocks[0].insns[1].operands[1].v],
                   "} ^s: {");
  hali_ir_module_free(m);
}
END_TEST

/* The token window holds about one instruction, not the file: the number
 * of token chunks does not grow with the module, and an instruction longer
 * than a chunk is held whole (its tokens stay valid while it is read). */
static char *long_module(uint32_t insns, uint32_t switch_targets) {
  hali_strbuf_t sb = {0};
  hali_strbuf_printf(&sb, "func @g(%%a: i64) -> i64 {\n  return %%a\n}\n");
  hali_strbuf_printf(&sb, "func @f(%%a: i64, %%i: i32) -> i64 {\n"
                          "  %%r0 = add.i64 %%a, %%a\n");
  for (uint32_t k = 1; k < insns; ++k)
    hali_strbuf_printf(&sb, "  %%r%u = add.i64 %%r%u, %%a  # %u\n", k % 500,
                       (k - 1) % 500, k);
  hali_strbuf_printf(&sb, "  switch %%i, ^done, [");
  for (uint32_t k = 0; k < switch_targets; ++k)
    hali_strbuf_printf(&sb, "%s^done", k ? ", " : "");
  hali_strbuf_printf(&sb, "]\n^done:\n  %%x = call @g(%%r0)\n  return %%x\n}\n");
  return hali_strbuf_take(&sb);
}

START_TEST(asm_token_window_is_bounded) {
  size_t chunks[3];
  const uint32_t sizes[3][2] = {{2000, 0}, {40000, 0}, {2000, 3000}};
  for (int i = 0; i < 3; ++i) {
    char *text = long_module(sizes[i][0], sizes[i][1]);
    ck_assert_ptr_nonnull(text);
    hali_ir_module_t *m = NULL;
    hali_status_t s = hali_asm_parse_measured(text, strlen(text), "w.hasm", &m,
                                              &chunks[i]);
    free(text);
    expect_ok(s);
    /* Everything was read: the blocks after the long switch too. */
    ck_assert_uint_eq(m->func_count, 2);
    ck_assert_uint_eq(m->funcs[1].block_count, 2);
    ck_assert_uint_eq(m->funcs[1].blocks[0].insn_count, sizes[i][0] + 1);
    ck_assert_uint_eq(m->funcs[1].blocks[0].insns[sizes[i][0]].operand_count,
                      2 + sizes[i][1]);
    ck_assert_uint_eq(m->funcs[1].blocks[1].insn_count, 2);
    hali_ir_module_free(m);
  }
  /* 20 times the instructions, the same window (a few chunks); the old
   * token array would have been 40000 * 6 tokens. */
  ck_assert_uint_le(chunks[0], 4);
  ck_assert_uint_eq(chunks[1], chunks[0]);
  /* A switch of 3000 targets is ~6000 tokens: it is held whole. */
  ck_assert_uint_ge(chunks[2], 6000 / 256);
  ck_assert_uint_le(chunks[2], 6000 / 256 + 4);
}
END_TEST

/* Length-limited input: bytes past |len| are never read. */
START_TEST(asm_respects_length) {
  const char *text = "func @f() -> i32 {\n  %c = const.i32 7\n  return %c\n}\n"
                     "GARBAGE";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(
      hali_asm_parse(text, strlen(text) - strlen("GARBAGE"), "t.hasm", &m));
  ck_assert_uint_eq(m->func_count, 1);
  hali_ir_module_free(m);
  /* A cut in the middle of a token is an error at that token, not a read
   * past the end. */
  char *cut = strndup(text, 30);
  ck_assert_ptr_nonnull(cut);
  hali_status_t s = hali_asm_parse(cut, 30, "t.hasm", &m);
  free(cut);
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT, "t.hasm:");
  /* Empty input is an empty module. */
  ck_assert_ok(hali_asm_parse("", 0, "empty.hasm", &m));
  ck_assert_uint_eq(m->func_count, 0);
  ck_assert_str_eq(m->name, "empty");
  hali_ir_module_free(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* What the grammar allows. */

START_TEST(asm_forward_references) {
  const char *text = "# calls and branches may name what comes later\n"
                     "func @main() -> i32 {\n"
                     "  %n = const.i32 5\n"
                     "  br ^later\n"
                     "^later:\n"
                     "  %r = call @twice(%n)\n"
                     "  return %r\n"
                     "}\n"
                     "func @twice(%x: i32) -> i32 {\n"
                     "  %y = add.i32 %x, %x  // comment\n"
                     "  return %y\n"
                     "}\n";
  ck_assert_int_eq(call_i32(text, "main", 0, false), 10);
}
END_TEST

START_TEST(asm_implicit_entry_block_and_names) {
  hali_ir_module_t *m = must_load("module @named source \"orig.hasm\"\n"
                                  "func @f(%a: i32) -> i32 {\n"
                                  "  %b = add.i32 %a, %a\n"
                                  "  br ^next\n"
                                  "^next:\n"
                                  "  return %b loc(42)\n"
                                  "}\n");
  ck_assert_str_eq(m->name, "named");
  ck_assert_str_eq(m->source, "orig.hasm");
  ck_assert(m->has_debug);
  const hali_ir_func_t *f = &m->funcs[0];
  ck_assert_str_eq(f->name, "f");
  ck_assert_uint_eq(f->param_count, 1);
  ck_assert_uint_eq(f->reg_count, 2);
  ck_assert_str_eq(f->reg_names[0], "a");
  ck_assert_str_eq(f->reg_names[1], "b");
  ck_assert_uint_eq(f->block_count, 2);
  ck_assert_str_eq(f->blocks[0].name, "entry");
  ck_assert_str_eq(f->blocks[1].name, "next");
  ck_assert_uint_eq(f->blocks[0].insns[0].line, 3);
  ck_assert_uint_eq(f->blocks[0].insns[1].line, 4);
  ck_assert_uint_eq(f->blocks[1].insns[0].line, 42);
  hali_ir_module_free(m);
  /* Without a module line the name is the file's base name up to the
   * first dot, and the source is the file name. */
  const char *text = "func @f() {\n  return\n}\n";
  ck_assert_ok(hali_asm_parse(text, strlen(text), "a/b/base.x.hasm", &m));
  ck_assert_str_eq(m->name, "base");
  ck_assert_str_eq(m->source, "a/b/base.x.hasm");
  hali_ir_module_free(m);
}
END_TEST

START_TEST(asm_integer_literals) {
  const char *text = "func @hex() -> i32 {\n"
                     "  %a = const.i32 0xffffffff\n"
                     "  return %a\n"
                     "}\n"
                     "func @neg() -> i32 {\n"
                     "  %a = const.i32 -2147483648\n"
                     "  return %a\n"
                     "}\n"
                     "func @plus() -> i32 {\n"
                     "  %a = const.i32 +17\n"
                     "  return %a\n"
                     "}\n"
                     "func @wide() -> i64 {\n"
                     "  %a = const.i64 0xffffffffffffffff\n"
                     "  %b = const.i64 -9223372036854775808\n"
                     "  %c = add.i64 %a, %b\n"
                     "  return %c\n"
                     "}\n";
  ck_assert_int_eq(call_i32(text, "hex", 0, false), -1);
  ck_assert_int_eq(call_i32(text, "neg", 0, false), INT32_MIN);
  ck_assert_int_eq(call_i32(text, "plus", 0, false), 17);
  hali_value_t r = {0};
  ck_assert_ok(hali_test_call(text, "wide", NULL, 0, &r, 1));
  ck_assert_int_eq(r.i64, INT64_MAX);
}
END_TEST

START_TEST(asm_float_literals) {
  hali_ir_module_t *m = must_load("func @f() {\n"
                                  "  %a = const.f64 1.5\n"
                                  "  %b = const.f64 -2e-3\n"
                                  "  %c = const.f64 0x1.8p1\n"
                                  "  %d = const.f64 -inf\n"
                                  "  %e = const.f32 nan\n"
                                  "  %g = const.f32 bits(0x7fc00001)\n"
                                  "  %h = const.f64 -0.0\n"
                                  "  %i = const.f32 -nan\n"
                                  "  return\n"
                                  "}\n");
  const hali_ir_insn_t *in = m->funcs[0].blocks[0].insns;
  double d;
  memcpy(&d, &(int64_t){hali_ir_imm(m, &in[0].operands[1])}, 8);
  ck_assert(d == 1.5);
  memcpy(&d, &(int64_t){hali_ir_imm(m, &in[1].operands[1])}, 8);
  ck_assert(d == -2e-3);
  memcpy(&d, &(int64_t){hali_ir_imm(m, &in[2].operands[1])}, 8);
  ck_assert(d == 3.0);
  memcpy(&d, &(int64_t){hali_ir_imm(m, &in[3].operands[1])}, 8);
  ck_assert(d < 0 && d * 0 != 0);
  ck_assert_uint_eq((uint64_t)hali_ir_imm(m, &in[4].operands[1]), 0x7fc00000u);
  ck_assert_uint_eq((uint64_t)hali_ir_imm(m, &in[5].operands[1]), 0x7fc00001u);
  ck_assert_uint_eq((uint64_t)hali_ir_imm(m, &in[6].operands[1]),
                    0x8000000000000000ull);
  ck_assert_uint_eq((uint64_t)hali_ir_imm(m, &in[7].operands[1]), 0xffc00000u);
  hali_ir_module_free(m);
}
END_TEST

START_TEST(asm_string_escapes) {
  hali_ir_module_t *m = must_load("func @f() {\n"
                                  "  %c = const.i32 3\n"
                                  "  assert %c, \"a\\n\\t\\r\\\\\\\"\\0\\x41\\xff\"\n"
                                  "  fail %c, \"plain # not a comment\"\n"
                                  "}\n");
  ck_assert_uint_eq(m->string_count, 2);
  static const char want[] = "a\n\t\r\\\"\0A\xff";
  ck_assert_uint_eq(m->string_lengths[0], sizeof(want) - 1);
  ck_assert_mem_eq(m->strings[0], want, sizeof(want) - 1);
  ck_assert_str_eq(m->strings[1], "plain # not a comment");
  hali_ir_module_free(m);
  /* The messages reach the status at run time. */
  ck_assert_status(hali_test_call("func @f() {\n"
                                  "  %c = const.i32 5\n"
                                  "  fail %c, \"no such \\\"thing\\\"\"\n"
                                  "}\n",
                                  "f", NULL, 0, NULL, 0),
                   HALI_STATUS_NOT_FOUND, "no such \"thing\"");
}
END_TEST

START_TEST(asm_multiple_results_switch_and_spanning_lines) {
  const char *text = "func @two(%x: i32) -> (i32, i64) {\n"
                     "  %y = ext.s.i32.i64 %x\n"
                     "  return %x, %y\n"
                     "}\n"
                     "func @pick(%i: i32) -> i32 {\n"
                     "  switch %i, ^other,\n"
                     "         [^zero, ^one]\n"
                     "^zero:\n"
                     "  %a, %b = call @two(%i)\n"
                     "  %r = const.i32 100\n"
                     "  return %r\n"
                     "^one:\n"
                     "  %s = const.i32 101\n"
                     "  return %s\n"
                     "^other:\n"
                     "  %t = const.i32 -1\n"
                     "  return %t\n"
                     "}\n";
  ck_assert_int_eq(call_i32(text, "pick", 0, true), 100);
  ck_assert_int_eq(call_i32(text, "pick", 1, true), 101);
  ck_assert_int_eq(call_i32(text, "pick", 2, true), -1);
  ck_assert_int_eq(call_i32(text, "pick", -7, true), -1);
  hali_value_t a = hali_value_i32(-3), r[2] = {{0}};
  ck_assert_ok(hali_test_call(text, "two", &a, 1, r, 2));
  ck_assert_int_eq(r[0].i32, -3);
  ck_assert_int_eq(r[1].i64, -3);
}
END_TEST

/* Wide calls and returns that still fit the assembler's limits. */
START_TEST(asm_many_arguments) {
  enum { N = 200 };
  hali_strbuf_t sb = {0};
  hali_strbuf_printf(&sb, "func @g(");
  for (int i = 0; i < N; ++i)
    hali_strbuf_printf(&sb, "%s%%p%d: i32", i ? ", " : "", i);
  hali_strbuf_printf(&sb, ") -> i32 {\n  return %%p%d\n}\n", N - 1);
  hali_strbuf_printf(&sb, "func @main() -> i32 {\n");
  for (int i = 0; i < N; ++i)
    hali_strbuf_printf(&sb, "  %%a%d = const.i32 %d\n", i, i * 3);
  hali_strbuf_printf(&sb, "  %%r = call @g(");
  for (int i = 0; i < N; ++i) hali_strbuf_printf(&sb, "%s%%a%d", i ? ", " : "", i);
  hali_strbuf_printf(&sb, ")\n  return %%r\n}\n");
  char *text = hali_strbuf_take(&sb);
  ck_assert_ptr_nonnull(text);
  hali_value_t r = {0};
  hali_status_t s = hali_test_call(text, "main", NULL, 0, &r, 1);
  free(text);
  ck_assert_ok(s);
  ck_assert_int_eq(r.i32, (N - 1) * 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Golden disassembly. */

static const char golden_src[] =
    "module @golden\n"
    "\n"
    "func @pick(%a: i32, %b: f64) -> (i32, f64) {\n"
    "  %one = const.i32 1\n"
    "  %c = add.i32 %a, %one\n"
    "  cond_br %c, ^big, ^small\n"
    "^big:\n"
    "  %h = const.f64 0.5\n"
    "  %d = mul.f64 %b, %h\n"
    "  %n = const.f32 bits(0x7fc00001)\n"
    "  %z = const.f64 -0.0\n"
    "  %w = const.i64 -9223372036854775808\n"
    "  %e, %f = call @pair(%c, %d)\n"
    "  return %e, %f\n"
    "^small:\n"
    "  switch %c, ^big, [^small, ^big]\n"
    "}\n"
    "\n"
    "func @pair(%x: i32, %y: f64) -> (i32, f64) {\n"
    "  %m = const.i32 9\n"
    "  assert %x, \"tab\\there \\\"q\\\"\\n\"\n"
    "  return %x, %y\n"
    "}\n"
    "\n"
    "func @boom() {\n"
    "  %m = const.i32 13\n"
    "  fail %m, \"\\x01\\xfe\"\n"
    "}\n";

static const char golden_dis[] =
    "module @golden\n"
    "\n"
    "func @pick(%a: i32, %b: f64) -> (i32, f64) {\n"
    "^entry:\n"
    "  %one = const.i32 1\n"
    "  %c = add.i32 %a, %one\n"
    "  cond_br %c, ^big, ^small\n"
    "^big:\n"
    "  %h = const.f64 0.5\n"
    "  %d = mul.f64 %b, %h\n"
    "  %n = const.f32 bits(0x7fc00001)\n"
    "  %z = const.f64 -0.0\n"
    "  %w = const.i64 -9223372036854775808\n"
    "  %e, %f = call @pair(%c, %d)\n"
    "  return %e, %f\n"
    "^small:\n"
    "  switch %c, ^big, [^small, ^big]\n"
    "}\n"
    "\n"
    "func @pair(%x: i32, %y: f64) -> (i32, f64) {\n"
    "^entry:\n"
    "  %m = const.i32 9\n"
    "  assert %x, \"tab\\there \\\"q\\\"\\n\"\n"
    "  return %x, %y\n"
    "}\n"
    "\n"
    "func @boom() {\n"
    "^entry:\n"
    "  %m = const.i32 status(internal)\n"
    "  fail %m, \"\\x01\\xfe\"\n"
    "}\n";

START_TEST(dis_golden) {
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_load_bytes((const uint8_t *)golden_src,
                               strlen(golden_src), "golden.hasm", &m));
  char *text = hali_ir_print(m, false);
  ck_assert_str_eq(text, golden_dis);
  free(text);
  /* With locations: the source file on the module line and every
   * instruction's line. */
  text = hali_ir_print(m, true);
  ck_assert_ptr_nonnull(strstr(text, "module @golden source \"golden.hasm\"\n"));
  ck_assert_ptr_nonnull(strstr(text, "  %c = add.i32 %a, %one loc(5)\n"));
  ck_assert_ptr_nonnull(strstr(text, "  switch %c, ^big, [^small, ^big] loc(16)\n"));
  ck_assert_ptr_nonnull(strstr(text, "  fail %m, \"\\x01\\xfe\" loc(27)\n"));
  free(text);
  hali_ir_module_free(m);
}
END_TEST

/* The golden text itself reassembles to the same module. */
START_TEST(dis_golden_reassembles) {
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_load_bytes((const uint8_t *)golden_dis,
                               strlen(golden_dis), "golden.hasm", &m));
  char *text = hali_ir_print(m, false);
  ck_assert_str_eq(text, golden_dis);
  free(text);
  hali_ir_module_free(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Named HAL constants (doc/asm.md, "Symbolic constants"). */

/* The immediate of the |i|-th instruction of @f's entry block. */
static int64_t imm_of(const hali_ir_module_t *m, uint32_t i) {
  return hali_ir_imm(m, &m->funcs[0].blocks[0].insns[i].operands[1]);
}

/* Every name of every kind parses to the value base/hal_bits.h gives it
 * (checked against the enums, not against the table itself). */
START_TEST(asm_named_constants_values) {
  static const struct {
    const char *text;
    int64_t value;
  } cases[] = {
      {"memory(none)", 0},
      {"memory(device_local)", HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL},
      {"memory(device_local|host_visible|device_visible)", 19},
      {"memory(host_coherent|host_cached|transient)",
       HALI_HAL_MEMORY_TYPE_HOST_COHERENT | HALI_HAL_MEMORY_TYPE_HOST_CACHED |
           HALI_HAL_MEMORY_TYPE_TRANSIENT},
      {"usage(transfer|dispatch|mapping)", 7},
      {"usage(constant)", HALI_HAL_BUFFER_USAGE_CONSTANT},
      {"usage(none)", 0},
      {"mode(one_shot)", 1},
      {"mode(reusable)", 0},
      {"category(transfer)", 1},
      {"category(dispatch)", 2},
      {"category(any)", 3},
      {"category(dispatch|transfer)", 3},
      {"element_type(f32)", 0x21000020},
      {"element_type(i32)", 0x10000020},
      {"element_type(bf16)", 0x22000010},
      {"element_type(bool)", 0x13000008},
      {"element_type(si8)", 0x11000008},
      {"encoding(opaque)", 0},
      {"encoding(dense_row_major)", 1},
      {"status(ok)", 0},
      {"status(deadline_exceeded)", HALI_STATUS_DEADLINE_EXCEEDED},
      {"status(unauthenticated)", HALI_STATUS_UNAUTHENTICATED},
      {"status(internal)", HALI_STATUS_INTERNAL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char text[256];
    snprintf(text, sizeof text,
             "func @f() -> i32 {\n  %%a = const.i32 %s\n"
             "  %%b = const.i64 %s\n  return %%a\n}\n",
             cases[i].text, cases[i].text);
    hali_ir_module_t *m = NULL;
    ck_assert_ok(hali_asm_parse(text, strlen(text), "t.hasm", &m));
    ck_assert_msg(imm_of(m, 0) == cases[i].value, "%s: %lld, expected %lld",
                  cases[i].text, (long long)imm_of(m, 0),
                  (long long)cases[i].value);
    ck_assert_msg(imm_of(m, 1) == cases[i].value, "%s as i64",
                  cases[i].text);
    hali_ir_module_free(m);
  }
}
END_TEST

/* Names and numbers give the same bytes; dis prints names where every read
 * of the register is an operand of that kind, numbers elsewhere. */
START_TEST(dis_named_constants) {
  static const char by_number[] =
      "module @n\n"
      "func @f(%n: i64) -> !hal.buffer_view {\n"
      "  %device = hal.device.get\n"
      "  %allocator = hal.device.allocator %device\n"
      "  %memory = const.i32 19\n"
      "  %usage = const.i32 7\n"
      "  %b = hal.allocator.allocate %allocator, %memory, %usage, %n\n"
      "  %mode = const.i32 1\n"
      "  %cat = const.i32 3\n"
      "  %cmd = hal.command_buffer.create %device, %mode, %cat\n"
      "  %odd = const.i32 64\n"
      "  hal.buffer.assert %b, %n, %odd, %usage, \"odd\"\n"
      "  %f32 = const.i32 0x21000020\n"
      "  %one = const.i32 1\n"
      "  %two = add.i32 %one, %one\n"
      "  %view = hal.buffer_view.create %b, %f32, %one, [%n]\n"
      "  %code = const.i32 13\n"
      "  cond_fail %two, %code, \"two\"\n"
      "  %slot = const.i32 0\n"
      "  %smem = const.i32 19\n"
      "  %susage = const.i32 3\n"
      "  %ph = hal.buffer.slot %slot, %n, %smem, %susage\n"
      "  return %view\n"
      "}\n";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(by_number, strlen(by_number), "n.hasm", &m));
  char *text = hali_ir_print(m, false);
  /* A memory type register also read as a memory type by
   * hal.buffer.assert keeps its name; 64 is no memory type: a number. */
  ck_assert_ptr_nonnull(strstr(
      text, "%memory = const.i32 memory(device_local|host_visible|"
            "device_visible)\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "%usage = const.i32 usage(transfer|dispatch|mapping)\n"));
  ck_assert_ptr_nonnull(strstr(text, "%mode = const.i32 mode(one_shot)\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "%cat = const.i32 category(transfer|dispatch)\n"));
  ck_assert_ptr_nonnull(strstr(text, "%odd = const.i32 64\n"));
  ck_assert_ptr_nonnull(strstr(text, "%f32 = const.i32 element_type(f32)\n"));
  /* Read by add.i32 and as an encoding: a number. */
  ck_assert_ptr_nonnull(strstr(text, "%one = const.i32 1\n"));
  ck_assert_ptr_nonnull(strstr(text, "%code = const.i32 status(internal)\n"));
  /* A binding slot's memory types and usage; its index is a number. */
  ck_assert_ptr_nonnull(strstr(
      text, "%smem = const.i32 memory(device_local|host_visible|"
            "device_visible)\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "%susage = const.i32 usage(transfer|dispatch)\n"));
  ck_assert_ptr_nonnull(strstr(text, "%slot = const.i32 0\n"));
  /* The printed text assembles to the same bytes as the numbers. */
  hali_ir_module_t *m2 = NULL;
  ck_assert_ok(hali_asm_parse(text, strlen(text), "n.hasm", &m2));
  hali_hbc_write_options_t wo = {.strip = true};
  uint8_t *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  ck_assert_ok(hali_hbc_write(m, &wo, &a, &na));
  ck_assert_ok(hali_hbc_write(m2, &wo, &b, &nb));
  ck_assert_uint_eq(na, nb);
  ck_assert(memcmp(a, b, na) == 0);
  free(a);
  free(b);
  char *text2 = hali_ir_print(m2, false);
  ck_assert_str_eq(text, text2);
  free(text2);
  free(text);
  hali_ir_module_free(m2);
  hali_ir_module_free(m);
}
END_TEST

START_TEST(asm_named_constants_errors) {
  REJECT("func @f() {\n  %a = const.i32 memory(device_locl)\n  return\n}\n",
         "test.hasm:2:25:", "unknown memory type 'device_locl' in memory(...)",
         "device_local, host_visible, host_coherent, host_cached, "
         "device_visible, transient");
  REJECT("func @f() {\n  %a = const.i32 memroy(device_local)\n  return\n}\n",
         "test.hasm:2:18:", "unknown constant kind 'memroy'",
         "memory(...), usage(...), mode(...), category(...), "
         "element_type(...), encoding(...), status(...)");
  /* An enum takes one name. */
  REJECT("func @f() {\n  %a = const.i32 element_type(f32|i32)\n  return\n}\n",
         "test.hasm:2:34:", "expected ')' after the name");
  REJECT("func @f() {\n  %a = const.i32 status(Internal)\n  return\n}\n",
         "unknown status code 'Internal' in status(...): expected one of ok, "
         "cancelled");
  REJECT("func @f() {\n  %a = const.i32 usage()\n  return\n}\n",
         "test.hasm:2:24:", "expected a buffer usage name in usage(...)");
  REJECT("func @f() {\n  %a = const.i32 usage(transfer|)\n  return\n}\n",
         "test.hasm:2:33:", "expected a buffer usage name");
  REJECT("func @f() {\n  %a = const.i32 mode(one_shot\n  return\n}\n",
         "test.hasm:3:3:", "after the names (joined by '|')");
  /* Only integer immediates take names. */
  REJECT("func @f() {\n  %a = const.f32 memory(device_local)\n  return\n}\n",
         "test.hasm:2:18:");
}
END_TEST

/* A stripped module prints registers as %rN and blocks as ^bbN. */
START_TEST(dis_stripped_names) {
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_load_bytes((const uint8_t *)golden_src,
                               strlen(golden_src), "golden.hasm", &m));
  uint8_t *data;
  size_t size;
  hali_hbc_write_options_t wo = {.strip = true};
  ck_assert_ok(hali_hbc_write(m, &wo, &data, &size));
  hali_ir_module_free(m);
  ck_assert_ok(hali_hbc_read(data, size, NULL, &m));
  free(data);
  char *text = hali_ir_print(m, true);
  ck_assert_ptr_nonnull(strstr(text, "module @golden\n\nfunc @pick(%r0: i32, "
                                     "%r1: f64) -> (i32, f64) {\n^bb0:\n"
                                     "  %r2 = const.i32 1\n"));
  ck_assert_ptr_nonnull(strstr(text, "  cond_br %r3, ^bb1, ^bb2\n"));
  ck_assert_ptr_null(strstr(text, "loc("));
  ck_assert_ptr_null(strstr(text, "source"));
  free(text);
  hali_ir_module_free(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Known bugs: these assert the documented behaviour and fail today. */

/* BUG (loader/asm.c, lex): on "unexpected character" and "unterminated
 * string" the lexer calls perr_at() before setting the token's kind, so
 * the message depends on uninitialised memory (valgrind: "Conditional jump
 * or move depends on uninitialised value(s)" in perr_at) and today reads
 * "..., found end of file" instead of naming the character. */
START_TEST(bug_lexer_error_names_the_character) {
  REJECT("func @f() -> i32 {\n"
         "  %c = const.i32 1 ;\n"
         "  return %c\n"
         "}\n",
         "test.hasm:2:20: unexpected character", "';'");
  hali_ir_module_t *m = NULL;
  const char *text = "func @f() {\n  %c = const.i32 1\n  fail %c, \"abc\n}\n";
  hali_status_t s = load_text(text, &m);
  char *msg = hali_status_to_string(s);
  bool says_eof = msg && strstr(msg, "end of file");
  free(msg);
  hali_status_free(s);
  ck_assert_msg(!says_eof, "an unterminated string in the middle of the "
                           "file is reported as 'found end of file'");
}
END_TEST

/* BUG (loader/asm.c, parse_int): doc/asm.md says integer literals are
 * "decimal or 0x hex", but strtoull(..., 0) reads a leading 0 as octal:
 * `const.i32 010` silently assembles to 8. */
START_TEST(bug_leading_zero_is_not_octal) {
  const char *text = "func @f() -> i32 {\n"
                     "  %a = const.i32 010\n"
                     "  return %a\n"
                     "}\n";
  hali_vm_module_t *vm = NULL;
  hali_status_t s = hali_test_try_module(text, &vm);
  if (s) { /* rejecting the literal would be fine too */
    ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT, "test.hasm:2:18");
    return;
  }
  hali_vm_module_release(vm);
  ck_assert_int_eq(call_i32(text, "f", 0, false), 10);
}
END_TEST

/* BUG (loader/asm.c, parse_insn): `hali_ir_operand_t ops[256]` is filled
 * with one operand per call argument, bounded only by the callee's
 * parameter count: a call with 256 or more arguments writes past the
 * array (stack buffer overflow; `hali run` segfaults on a 300-argument
 * call).  The binary format allows 65535 arguments; the assembler must
 * accept such a call or reject it with an error, never overflow. */
START_TEST(bug_call_with_300_arguments) {
  enum { N = 300 };
  if (no_fork()) return; /* crashes today; see above */
  hali_strbuf_t sb = {0};
  hali_strbuf_printf(&sb, "func @g(");
  for (int i = 0; i < N; ++i)
    hali_strbuf_printf(&sb, "%s%%p%d: i32", i ? ", " : "", i);
  hali_strbuf_printf(&sb, ") -> i32 {\n  return %%p%d\n}\n", N - 1);
  hali_strbuf_printf(&sb, "func @main() -> i32 {\n  %%a = const.i32 7\n");
  hali_strbuf_printf(&sb, "  %%r = call @g(");
  for (int i = 0; i < N; ++i) hali_strbuf_printf(&sb, "%s%%a", i ? ", " : "");
  hali_strbuf_printf(&sb, ")\n  return %%r\n}\n");
  char *text = hali_strbuf_take(&sb);
  ck_assert_ptr_nonnull(text);
  hali_value_t r = {0};
  hali_status_t s = hali_test_call(text, "main", NULL, 0, &r, 1);
  free(text);
  if (s) {
    ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT, "test.hasm:");
    return;
  }
  ck_assert_int_eq(r.i32, 7);
}
END_TEST

/* BUG (loader/asm.c, parse_defs / return): a call assigning more than 64
 * results is reported as "expected an instruction, found '%r0'", and a
 * return of more than 255 values as "return gives 255"; both are valid in
 * the binary format and the verifier, so `hali dis` output of such a
 * module cannot be reassembled (doc/asm.md: dis output "reassembles to
 * the same bytes"). */
START_TEST(bug_wide_results) {
  enum { N = 70 };
  hali_strbuf_t sb = {0};
  hali_strbuf_printf(&sb, "func @g() -> (");
  for (int i = 0; i < N; ++i) hali_strbuf_printf(&sb, "%si32", i ? ", " : "");
  hali_strbuf_printf(&sb, ") {\n  %%a = const.i32 3\n  return ");
  for (int i = 0; i < N; ++i) hali_strbuf_printf(&sb, "%s%%a", i ? ", " : "");
  hali_strbuf_printf(&sb, "\n}\nfunc @main() -> i32 {\n  ");
  for (int i = 0; i < N; ++i) hali_strbuf_printf(&sb, "%s%%r%d", i ? ", " : "", i);
  hali_strbuf_printf(&sb, " = call @g()\n  return %%r%d\n}\n", N - 1);
  char *text = hali_strbuf_take(&sb);
  hali_value_t r = {0};
  hali_status_t s = hali_test_call(text, "main", NULL, 0, &r, 1);
  free(text);
  expect_ok(s);
  ck_assert_int_eq(r.i32, 3);
}
END_TEST

/* BUG (loader/asm.c, default module name): without a `module` line the
 * name is taken from the file name unchecked, so "my-mod.hasm" gives
 * @my-mod, which `hali dis` prints as `module @my-mod` and the assembler
 * then rejects ("unexpected character").  dis output must reassemble. */
START_TEST(bug_module_name_from_file_name_reassembles) {
  const char *text = "func @main() -> i32 {\n"
                     "  %a = const.i32 1\n"
                     "  return %a\n"
                     "}\n";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_load_bytes((const uint8_t *)text, strlen(text),
                               "dir/my-mod.hasm", &m));
  char *dis = hali_ir_print(m, true);
  hali_ir_module_free(m);
  hali_status_t s = hali_load_bytes((const uint8_t *)dis, strlen(dis),
                                    "again.hasm", &m);
  free(dis);
  expect_ok(s);
  hali_ir_module_free(m);
}
END_TEST

/* Sizes the assembler computes are overflow-checked: a tensor type's
 * static size in bytes (the product of its dimensions times the element
 * size) must fit in 64 bits.  Boundary values for one f32 dimension (max =
 * (2^64 - 1) / 4 = 2^62 - 1) and for two i8 dimensions whose product is
 * exactly 2^64; NULL = accepted. */
static const struct {
  const char *type;
  const char *want;
} tensor_sizes[] = {
    {"tensor<0xf32>", NULL},
    {"tensor<1xf32>", NULL},
    {"tensor<4611686018427387902xf32>", NULL}, /* max - 1 */
    {"tensor<4611686018427387903xf32>", NULL}, /* max: 2^64 - 4 bytes */
    {"tensor<4611686018427387904xf32>", /* max + 1: exactly 2^64 bytes */
     "tensor type too large: its element count times the 4-byte element "
     "size (f32) overflows 64 bits"},
    {"tensor<9223372036854775807xf32>",
     "its element count times the 4-byte element size (f32) overflows"},
    {"tensor<9223372036854775808xf32>", "bad dimension '9223372036854775808'"},
    {"tensor<4294967296x4294967295xi8>", NULL},
    {"tensor<4294967296x4294967296xi8>", /* exactly 2^64 */
     "the product of its dimensions overflows 64 bits at dimension 1 "
     "(4294967296)"},
    {"tensor<4294967296x?x4294967296xi8>",
     "overflows 64 bits at dimension 2 (4294967296)"},
    {"tensor<0x4294967296x4294967296xi8>", NULL}, /* empty */
};
#define TENSOR_SIZES (sizeof(tensor_sizes) / sizeof(tensor_sizes[0]))

START_TEST(asm_tensor_size_boundaries) {
  char text[512];
  snprintf(text, sizeof(text),
           "executable @e format \"ffi\" library \"k.so\" {\n"
           "  export @k(%s) -> ()\n"
           "}\n",
           tensor_sizes[_i].type);
  hali_ir_module_t *m = NULL;
  hali_status_t s = hali_asm_parse(text, strlen(text), "test.hasm", &m);
  hali_ir_module_free(m);
  char report[2048] = "(accepted)";
  if (s) {
    char *msg = hali_status_to_string(s);
    snprintf(report, sizeof(report), "%s", msg ? msg : "(null)");
    free(msg);
    hali_status_free(s);
  }
  if (!tensor_sizes[_i].want)
    ck_assert_msg(!s, "%s: expected it to assemble, got %s",
                  tensor_sizes[_i].type, report);
  else
    ck_assert_msg(s && strstr(report, tensor_sizes[_i].want) &&
                      strstr(report, "test.hasm:2:13:"),
                  "%s: expected test.hasm:2:13: ... \"%s\", got %s",
                  tensor_sizes[_i].type, tensor_sizes[_i].want, report);
}
END_TEST

/* An instruction holds at most 65535 operands (16-bit counts in the
 * encodings): a switch with an index, a default and N targets has N + 2.
 * Boundaries 65533 (max - 2 targets: 65535 operands), 65534 and beyond. */
START_TEST(asm_operand_count_boundaries) {
  const struct {
    uint32_t targets;
    bool ok;
  } cases[] = {{0, true}, {1, true}, {65532, true}, {65533, true},
               {65534, false}, {70000, false}};
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); ++k) {
    hali_strbuf_t sb = {0};
    hali_strbuf_printf(&sb, "func @f(%%i: i32) {\n^entry:\n"
                            "  switch %%i, ^done, [");
    for (uint32_t t = 0; t < cases[k].targets; ++t)
      hali_strbuf_printf(&sb, "%s^done", t ? ", " : "");
    hali_strbuf_printf(&sb, "]\n^done:\n  return\n}\n");
    char *text = hali_strbuf_take(&sb);
    ck_assert_ptr_nonnull(text);
    hali_ir_module_t *m = NULL;
    hali_status_t s = hali_asm_parse(text, strlen(text), "test.hasm", &m);
    free(text);
    uint32_t n = m ? m->funcs[0].blocks[0].insns[0].operand_count : 0;
    hali_ir_module_free(m);
    char report[512] = "(accepted)";
    if (s) {
      snprintf(report, sizeof(report), "%s", hali_status_message(s));
      hali_status_free(s);
    }
    if (cases[k].ok) {
      ck_assert_msg(!s, "%u targets: %s", cases[k].targets, report);
      ck_assert_uint_eq(n, cases[k].targets + 2);
    } else {
      ck_assert_msg(strstr(report, "too many operands (at most 65535)"),
                    "%u targets: %s", cases[k].targets, report);
    }
  }
}
END_TEST

static Suite *suite_asm(void) {
  Suite *s = suite_create("asm");
  TCase *tc = tcase_create("errors");
  tcase_add_loop_test(tc, asm_rejects_malformed_text, 0, BAD_TEXT_COUNT);
  tcase_add_test(tc, asm_error_names_the_given_file);
  tcase_add_test(tc, asm_reports_first_error);
  tcase_add_test(tc, asm_respects_length);
  tcase_add_test(tc, asm_first_lexical_error_wins);
  tcase_add_test(tc, asm_body_scan_agrees_with_lexer);
  tcase_add_test(tc, asm_token_window_is_bounded);
  suite_add_tcase(s, tc);

  tc = tcase_create("grammar");
  tcase_add_test(tc, asm_forward_references);
  tcase_add_test(tc, asm_implicit_entry_block_and_names);
  tcase_add_test(tc, asm_integer_literals);
  tcase_add_test(tc, asm_float_literals);
  tcase_add_test(tc, asm_string_escapes);
  tcase_add_test(tc, asm_multiple_results_switch_and_spanning_lines);
  tcase_add_test(tc, asm_many_arguments);
  tcase_add_loop_test(tc, asm_tensor_size_boundaries, 0, TENSOR_SIZES);
  tcase_add_test(tc, asm_operand_count_boundaries);
  suite_add_tcase(s, tc);

  tc = tcase_create("dis");
  tcase_add_test(tc, dis_golden);
  tcase_add_test(tc, dis_golden_reassembles);
  tcase_add_test(tc, dis_stripped_names);
  tcase_add_test(tc, dis_named_constants);
  tcase_add_test(tc, asm_named_constants_values);
  tcase_add_test(tc, asm_named_constants_errors);
  suite_add_tcase(s, tc);

  tc = tcase_create("known_bugs");
  tcase_add_test(tc, bug_lexer_error_names_the_character);
  tcase_add_test(tc, bug_leading_zero_is_not_octal);
  tcase_add_test(tc, bug_call_with_300_arguments);
  tcase_add_test(tc, bug_wide_results);
  tcase_add_test(tc, bug_module_name_from_file_name_reassembles);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite_asm()); }
