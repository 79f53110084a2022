/* Tensor-level modules on the full load path (loader/load.c): a corrupted
 * .hbc holding tensor-level code must end, every time, in a clean error
 * or a module that loads — read, structural check
 * (vm/verify_structure.c hali_ir_verify_structure), the load-time passes, the verifier, encoding
 * — never in a crash or a leak (run under valgrind: CK_FORK=no valgrind
 * --leak-check=full --error-exitcode=1 tests/check_tensor_load).
 *
 * Inputs: examples/mlp_tensor.hasm (its weights left alone),
 * tests/passes/sh_mlp_tiny.hasm and tests/passes/sh_every_op.hasm (every
 * tensor op), written as .hbc *before* the passes (the TENSOR section and
 * the tensor ops' (kind, value) operand lists), then cut at every length
 * and flipped at every byte, with the checksum ignored so the corruption
 * reaches the section readers; plus direct IR mutations of each tensor op
 * operand that the structural check must name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader/hbc.h"
#include "passes/pass_util.h"
#include "passes/pipeline.h"
#include "tests/testutil.h"

typedef struct {
  uint8_t *d;
  size_t n;
} bytes_t;

typedef struct {
  unsigned read_err, structure_err, pass_err, verify_err, ok;
} outcome_t;

static char *status_text(hali_status_t s) {
  char *t = hali_status_to_string(s);
  hali_status_free(s);
  return t;
}

/* The module as written (no passes), as .hbc bytes. */
static bytes_t unlowered_hbc(const char *rel) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", HALI_SRCDIR, rel);
  uint8_t *text = NULL;
  size_t len = 0;
  ck_assert_ok(hali_read_file(path, &text, &len));
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_read_module(text, len, rel, &m));
  free(text);
  ck_assert(hali_ir_module_is_tensor_level(m));
  bytes_t b = {0};
  ck_assert_ok(hali_hbc_write(m, NULL, &b.d, &b.n));
  hali_ir_module_free(m);
  return b;
}

/* Printing 38 KB of weights as shortest round-trip floats thousands of
 * times would dominate the run: the flagship is fuzzed without printing
 * (the small modules cover the printer). */
static bool print_text = true;

/* Read (checksum ignored), then the rest of the load; a loaded module is
 * printed and encoded. Any failure must be a clean, named error. */
static void try_load(const uint8_t *d, size_t n, outcome_t *o) {
  hali_hbc_read_options_t ro = {.ignore_checksum = true};
  hali_ir_module_t *m = NULL;
  hali_status_t s = hali_hbc_read(d, n, &ro, &m);
  if (s) {
    ck_assert_ptr_null(m);
    ck_assert(hali_status_message(s)[0] != 0);
    hali_status_free(s);
    o->read_err++;
    return;
  }
  /* What `hali dis --no-passes` does: the structural check, then print. */
  s = hali_ir_verify_structure(m);
  if (!s && print_text) {
    char *text = hali_ir_print(m, true);
    ck_assert_ptr_nonnull(text);
    free(text);
  } else {
    hali_status_free(s);
  }
  hali_ir_module_t *loaded = NULL;
  s = hali_load_module(m, "fuzz", NULL, &loaded);
  if (s) {
    ck_assert_ptr_null(loaded);
    const char *msg = hali_status_message(s);
    /* A bad module is INVALID_ARGUMENT; a static size or workload that
     * overflows is OUT_OF_RANGE, from stream-to-hal (doc/passes.md). */
    if (hali_status_code(s) == HALI_STATUS_OUT_OF_RANGE)
      ck_assert_msg(strncmp(msg, "stream-to-hal: ", 15) == 0, "%s", msg);
    else
      ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
    if (strncmp(msg, "verify structure: ", 18) == 0) o->structure_err++;
    else if (strncmp(msg, "verify: ", 8) == 0) o->verify_err++;
    else o->pass_err++;
    hali_status_free(s);
    return;
  }
  if (print_text) {
    char *text = hali_ir_print(loaded, true);
    ck_assert_ptr_nonnull(text);
    free(text);
  }
  hali_vm_module_t *vm = NULL;
  s = hali_vm_module_create(loaded, &vm); /* takes |loaded| */
  if (s) {
    char *t = status_text(s);
    ck_abort_msg("a verified module failed to encode: %s", t);
  }
  hali_vm_module_release(vm);
  o->ok++;
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

/* Is byte |at| deep inside the RODATA section (past its first 64 bytes)?
 * Those are weights: the passes never look at them, and skipping them
 * keeps the flagship's 38 KB of floats from dominating the run. */
static bool in_weights(const bytes_t *b, size_t at) {
  size_t p = HALI_HBC_HEADER_SIZE;
  while (p + 8 <= b->n) {
    size_t end = p + 8 + rd32(b->d + p + 4);
    if (rd32(b->d + p) == HALI_HBC_SECTION_RODATA)
      return at >= p + 8 + 64 && at < end;
    p = end;
  }
  return false;
}

static void fuzz(const char *rel) {
  bytes_t b = unlowered_hbc(rel);
  print_text = b.n < 16384;
  /* The clean bytes load. */
  outcome_t clean = {0};
  try_load(b.d, b.n, &clean);
  ck_assert_uint_eq(clean.ok, 1);
  uint8_t *d = malloc(b.n);
  ck_assert_ptr_nonnull(d);
  outcome_t cut = {0}, flip = {0};
  size_t cuts = 0, flips = 0;
  for (size_t len = 0; len < b.n; ++len) {
    if (in_weights(&b, len)) continue;
    memcpy(d, b.d, len);
    try_load(d, len, &cut);
    cuts++;
  }
  static const uint8_t masks[] = {0xff, 0x01};
  for (size_t i = HALI_HBC_HEADER_SIZE; i < b.n; ++i)
    for (int k = 0; k < 2 && !in_weights(&b, i); ++k, ++flips) {
      memcpy(d, b.d, b.n);
      d[i] ^= masks[k];
      try_load(d, b.n, &flip);
    }
  ck_assert_uint_eq(cut.read_err + cut.structure_err + cut.pass_err +
                        cut.verify_err + cut.ok,
                    cuts);
  ck_assert_uint_eq(flip.read_err + flip.structure_err + flip.pass_err +
                        flip.verify_err + flip.ok,
                    flips);
  /* Every stage was reached. */
  ck_assert_uint_gt(flip.read_err, 0);
  ck_assert_uint_gt(flip.structure_err, 0);
  ck_assert_uint_gt(flip.pass_err, 0);
  ck_assert_uint_gt(flip.ok, 0);
  free(d);
  free(b.d);
}

START_TEST(fuzz_mlp_tensor) { fuzz("examples/mlp_tensor.hasm"); }
END_TEST
START_TEST(fuzz_every_op) { fuzz("tests/passes/sh_every_op.hasm"); }
END_TEST
START_TEST(fuzz_mlp_tiny) { fuzz("tests/passes/sh_mlp_tiny.hasm"); }

/* The binary of p08 holds the @double$async placeholder (a body-less
 * function the reader recognises by name): corruptions of it end cleanly
 * too. */
START_TEST(fuzz_async_call) { fuzz("tests/passes/fc_async_call.hasm"); }

/* The seed audit's p08, as written there: HAL-level @chain calls the
 * generated @double$async twice, the second waiting on the first one's
 * signal fence.  It assembles, runs on both devices from text and from
 * the binary `hali asm` writes, and gives 4x (checked against a C loop);
 * misuse is named at the call. */
START_TEST(p08_hal_code_calls_async) {
  char dir[] = "/tmp/hali_p08_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char cmd[1024], hbc[128];
  snprintf(hbc, sizeof(hbc), "%s/p08.hbc", dir);
  snprintf(cmd, sizeof(cmd),
           "'%s' asm '%s/tests/passes/fc_async_call.hasm' -o '%s'", HALI_TOOL,
           HALI_SRCDIR, hbc);
  char *out = NULL, *err = NULL;
  ck_assert_msg(hali_test_shell(cmd, NULL, &err) == 0, "%s", err);
  free(err);
  const float in[6] = {1, 2, 3, 4, -0.5f, 1e30f};
  char srcpath[256];
  snprintf(srcpath, sizeof(srcpath), "%s/tests/passes/fc_async_call.hasm",
           HALI_SRCDIR);
  const char *const files[2] = {srcpath, hbc};
  const char *const devices[2] = {"local-sync", "local-task"};
  for (int f = 0; f < 2; ++f)
    for (int d = 0; d < 2; ++d) {
      snprintf(cmd, sizeof(cmd),
               "'%s' run '%s' --function=chain --device=%s "
               "--input='6xf32=1 2 3 4 -0.5 1e30'",
               HALI_TOOL, files[f], devices[d]);
      int rc = hali_test_shell(cmd, &out, &err);
      ck_assert_msg(rc == 0, "%s: %s%s", cmd, out, err);
      const char *p = strstr(out, "6xf32=");
      ck_assert_msg(p, "%s", out);
      p += 6;
      for (int i = 0; i < 6; ++i) {
        char *end = NULL;
        double v = strtod(p, &end);
        double want = (double)(in[i] * 2.0f * 2.0f);
        ck_assert_msg(end != p && v >= want - 1e-3 * (want < 0 ? -want : want)
                                    && v <= want + 1e-3 * (want < 0 ? -want : want),
                      "%s: element %d is %g, expected %g", cmd, i, v, want);
        p = end;
      }
      free(out);
      free(err);
    }
  unlink(hbc);
  rmdir(dir);
  /* Misuse, at the call. */
  static const char *const head =
      "executable @k format \"bytecode\" {\n"
      "  export @scale(tensor<?xf32>, f32) -> (tensor<?xf32>) function "
      "@scale_kernel\n}\n"
      "func @double(%x: tensor<?xf32>) -> tensor<?xf32> "
      ;
  static const char *const tail =
      "{\n"
      "  %n = tensor.dim %x, 0\n  %two = const.f32 2\n"
      "  %y = tensor.dispatch @k::@scale[%n](%x, %two) -> tensor<?xf32>{%n}\n"
      "  return %y\n}\n"
      "func @scale_kernel(%in: !hal.buffer, %s: f32, %out: !hal.buffer, %x: "
      "i32, %y: i32, %z: i32, %cx: i32, %cy: i32, %cz: i32) {\n  return\n}\n"
      "func @bad(%v: !hal.buffer_view, %w: !hal.fence) -> !hal.buffer_view "
      "{\n  %r = call ";
  static const char *const end = "\n  return %r\n}\n";
  const struct {
    const char *attrs, *call, *message;
  } cases[] = {
      {"", "@double$async(%v)",
       "@double$async takes 3 argument(s), 1 given"},
      {"", "@double$async(%v, %v, %w)",
       "register is !hal.buffer_view but this operand must be !hal.fence"},
      {"", "@scale_kernel$async(%v, %w, %w)",
       "call to undefined function: func-conversion makes "
       "@scale_kernel$async only for a tensor-level function"},
      {"attributes [\"external\"] ", "@double$async(%v, %w, %w)",
       "and @double is not one"},
      {"", "@nothere$async(%v, %w, %w)", "call to undefined function"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char text[2048];
    /* Plain concatenation: the text is full of '%'. */
    text[0] = 0;
    strcat(text, head);
    strcat(text, cases[i].attrs);
    strcat(text, tail);
    strcat(text, cases[i].call);
    strcat(text, end);
    ck_assert_uint_lt(strlen(text), sizeof(text));
    hali_status_t s = hali_test_try_module(text, NULL);
    char *msg = hali_status_to_string(s);
    ck_assert_msg(msg && strstr(msg, cases[i].message) &&
                      strstr(msg, "test.hasm:14:"),
                  "case %zu: %s", i, msg ? msg : "(OK)");
    free(msg);
    hali_status_free(s);
  }
}
END_TEST
END_TEST
/* tensor.slice (views and copies), tensor.update and a dispatch. */
START_TEST(fuzz_slice_update) { fuzz("tests/passes/sh_slice_view.hasm"); }
END_TEST
START_TEST(fuzz_trace) { fuzz("tests/passes/sh_trace.hasm"); }
END_TEST

/* ------------------------------------------------------------------------ */
/* Direct mutations: each operand of each tensor op, made wrong, is named
 * by the structural check (and nothing reaches the passes). */

static hali_ir_module_t *every_op(void) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/tests/passes/sh_every_op.hasm",
           HALI_SRCDIR);
  uint8_t *text = NULL;
  size_t len = 0;
  ck_assert_ok(hali_read_file(path, &text, &len));
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_read_module(text, len, "every_op.hasm", &m));
  free(text);
  return m;
}

/* The first instruction of @|fn| with opcode |op|. */
static hali_ir_insn_t *find_insn(hali_ir_module_t *m, const char *fn,
                                 uint16_t op) {
  int32_t fi = hali_ir_module_find_func(m, fn);
  ck_assert_int_ge(fi, 0);
  hali_ir_func_t *f = &m->funcs[fi];
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i)
      if (f->blocks[b].insns[i].op == op) return &f->blocks[b].insns[i];
  ck_abort_msg("no such op in @%s", fn);
  return NULL;
}

/* The block of |m| that holds |insn| (its operands' owner). */
static hali_ir_block_t *block_of_insn(hali_ir_module_t *m,
                                      const hali_ir_insn_t *insn) {
  for (uint32_t fi = 0; fi < m->func_count; ++fi)
    for (uint32_t b = 0; b < m->funcs[fi].block_count; ++b) {
      hali_ir_block_t *blk = &m->funcs[fi].blocks[b];
      if (insn >= blk->insns && insn < blk->insns + blk->insn_count) return blk;
    }
  ck_abort_msg("instruction not in the module");
  return NULL;
}

/* Loads |m| (taken) and expects a structural error containing |needle|. */
static void expect_structure_error(hali_ir_module_t *m, const char *needle) {
  hali_ir_module_t *out = NULL;
  hali_status_t s = hali_load_module(m, "every_op.hasm", NULL, &out);
  ck_assert_ptr_null(out);
  ck_assert_msg(s != NULL, "accepted (wanted \"%s\")", needle);
  char *t = status_text(s);
  bool ok = strstr(t, "verify structure: ") && strstr(t, needle);
  if (!ok) {
    char copy[1024];
    snprintf(copy, sizeof(copy), "%s", t);
    free(t);
    ck_abort_msg("wanted \"%s\", got: %s", needle, copy);
  }
  free(t);
}

typedef struct {
  const char *fn;
  uint16_t op;
  uint32_t operand; /* NONE: change the operand count by |delta| instead */
  uint8_t kind;
  uint32_t v;
  int64_t imm;
  int delta;
  const char *needle;
} mutation_t;
#define NONE UINT32_MAX

/* In @f (parameters %x, %acc, %s: f32, %n: i64) the first dispatch is
 *   %w = tensor.dispatch @ex::@scale[%n](%z, %s) -> tensor<?xf32>{%n}
 * operands: 7 header, 7 %n, 8 %z, 9 %s, 10 %w, 11 tie, 12 %n. */
START_TEST(mutations_are_named) {
  static const mutation_t cases[] = {
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_EXE, HALI_IR_EXECUTABLE, 7, 0, 0,
       "@f, block ^entry, instruction 5 (tensor.dispatch), every_op.hasm:22: "
       "operand 0 must be an executable"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_EXPORT, HALI_IR_IMM, 0, 2, 0,
       "export 2 is out of range [0, 1]"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_NWORKLOAD, HALI_IR_IMM, 0, 65, 0,
       "workload count 65 is out of range"},
      /* 4 dimensions are fine (folded into Z), but then the lists do not
       * fit this dispatch's operands. */
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_NWORKLOAD, HALI_IR_IMM, 0, 4, 0,
       "counts (4 workload, 2 operands, 1 results) need"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_NOPERANDS, HALI_IR_IMM, 0, 5, 0,
       "counts (1 workload, 5 operands, 1 results) need 15"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_NRESULTS, HALI_IR_IMM, 0, -1, 0,
       "result count -1 is out of range"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_HEADER, HALI_IR_REG, 999, 0, 0,
       "operand 7: register 999 out of range"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_HEADER + 1, HALI_IR_IMM, 0, 0, 0,
       "operand 8 must be a register"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_HEADER + 3, HALI_IR_REG, 2, 0, 0,
       "operand 10: register %s is f32, expected tensor"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_HEADER + 4, HALI_IR_IMM, 0, 2, 0,
       "tie 2 is out of range [-1, 1]"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_HEADER + 4, HALI_IR_IMM, 0, 1, 0,
       "operand 9: register %s is f32, expected tensor"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_HEADER + 5, HALI_IR_REG, 2, 0, 0,
       "operand 12: register %s is f32, expected i64"},
      {"f", HALI_OP_TENSOR_DISPATCH, NONE, 0, 0, 0, -1,
       "has 12 operand(s); its layout needs 13"},
      /* Half an interface declaration (found by the round-trip fuzz check:
       * it printed as none, so dis | asm changed the bytes). */
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_CONSTANTS, HALI_IR_IMM, 0, 0, 0,
       "declares only the constants of its interface (bindings -1, "
       "constants 0): an interface declares both counts or neither"},
      {"f", HALI_OP_TENSOR_DISPATCH, HALI_TD_BINDINGS, HALI_IR_IMM, 0, 3, 0,
       "declares only the bindings of its interface (bindings 3, constants "
       "-1)"},
      {"f", HALI_OP_TENSOR_SPLAT, 0, HALI_IR_REG, 2, 0, 0,
       "operand 0: register %s is f32, expected tensor"},
      {"f", HALI_OP_TENSOR_SPLAT, NONE, 0, 0, 0, -1,
       "operand 0 has 1 dynamic dimension(s) but 0 are given"},
      {"f", HALI_OP_TENSOR_CONSTANT, 1, HALI_IR_RODATA, 5, 0, 0,
       "operand 1 must be rodata of the module's 1"},
      {"f", HALI_OP_TENSOR_CONSTANT, 1, HALI_IR_REG, 0, 0, 0,
       "operand 1 must be rodata"},
      {"f", HALI_OP_TENSOR_CLONE, 1, HALI_IR_REG, 3, 0, 0,
       "operand 1: register %n is i64, expected tensor"},
      {"f", HALI_OP_TENSOR_OVERWRITE, 0, HALI_IR_REG, 2, 0, 0,
       "operand 0: register %s is f32, expected tensor"},
      {"f", HALI_OP_TENSOR_OVERWRITE, NONE, 0, 0, 0, -1,
       "has 1 operand(s), expected 2"},
      {"f", HALI_OP_TENSOR_EXECUTE, NONE, 0, 0, 0, 1,
       "has 1 operand(s), expected 0"},
      {"g$async", HALI_OP_TENSOR_WAIT, 0, HALI_IR_REG, 0, 0, 0,
       "operand 0: register %v is !hal.buffer_view, expected !hal.fence"},
      {"g$async", HALI_OP_TENSOR_IMPORT, 1, HALI_IR_REG, 1, 0, 0,
       "operand 1: register %wait is !hal.fence, expected !hal.buffer_view"},
      {"g$async", HALI_OP_TENSOR_IMPORT, NONE, 0, 0, 0, 1,
       "operand 0 has 0 dynamic dimension(s) but 1 are given"},
      {"g$async", HALI_OP_TENSOR_EXPORT, 1, HALI_IR_BLOCK, 0, 0, 0,
       "operand 1 must be a register"},
      {"g$async", HALI_OP_TENSOR_BARRIER, 0, HALI_IR_REG, 70000, 0, 0,
       "register 70000 out of range"},
      {"g$async", HALI_OP_RETURN, NONE, 0, 0, 0, 1,
       "returns 2 value(s), function returns 1"},
      {"g$async", HALI_OP_RETURN, 0, HALI_IR_STRING, 99, 0, 0,
       "operand 0: string 99 out of range"},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
    const mutation_t *k = &cases[c];
    hali_ir_module_t *m = every_op();
    hali_ir_insn_t *insn = find_insn(m, k->fn, k->op);
    if (k->operand == NONE && k->delta < 0) {
      insn->operand_count--;
    } else if (k->operand == NONE) {
      ck_assert(hali_ir_insn_resize(block_of_insn(m, insn), insn,
                                    insn->operand_count + 1));
      hali_ir_operand_t *ops = insn->operands;
      hali_ir_operand_t imm = hali_ir_imm_operand(m, 0);
      ops[insn->operand_count - 1] =
          insn->operand_count > 1 ? ops[insn->operand_count - 2] : imm;
    } else {
      ck_assert_uint_lt(k->operand, insn->operand_count);
      hali_ir_operand_t *o = &insn->operands[k->operand];
      o->kind = k->kind;
      if (k->kind == HALI_IR_IMM) ck_assert(hali_ir_set_imm(m, o, k->imm));
      else o->v = k->v;
    }
    expect_structure_error(m, k->needle);
  }
}
END_TEST

START_TEST(functions_are_checked) {
  /* A tensor register without a shape (a TENSOR section left out). */
  hali_ir_module_t *m = every_op();
  int32_t fi = hali_ir_module_find_func(m, "f");
  hali_ir_func_t *f = &m->funcs[fi];
  f->reg_xtypes[0].type = HALI_TYPE_I32;
  expect_structure_error(m, "@f: tensor register 0 has no tensor shape");
  /* A result tied to a scalar parameter. */
  m = every_op();
  f = &m->funcs[hali_ir_module_find_func(m, "f")];
  ck_assert_ptr_nonnull(f->result_ties);
  f->result_ties[1] = 2;
  expect_structure_error(m, "@f: result 1 is tied to parameter 2");
  /* A shape beyond any size the passes can compute. */
  m = every_op();
  f = &m->funcs[hali_ir_module_find_func(m, "f")];
  f->reg_xtypes[0].dims[0] = INT64_C(1) << 60;
  expect_structure_error(m, "register 0: the static dimensions make more "
                            "than 2^48 bytes");
  /* A group left open. */
  m = every_op();
  hali_ir_insn_t *end = find_insn(m, "f", HALI_OP_TENSOR_END);
  end->op = HALI_OP_TENSOR_EXECUTE;
  expect_structure_error(m, "leaves 2 execute/concurrent group(s) open");
}
END_TEST

/* An export argument no kernel can take (a ref: only a binary module can
 * say so) is rejected by materialize-interfaces, naming export, index and
 * type. */
START_TEST(export_argument_type) {
  hali_ir_module_t *m = every_op();
  m->executables[0].exports[0].params[1].type = HALI_TYPE_BUFFER;
  hali_ir_module_t *out = NULL;
  hali_status_t s = hali_load_module(m, "every_op.hasm", NULL, &out);
  ck_assert_ptr_null(out);
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT,
                   "materialize-interfaces: export @ex::@scale: argument 1 "
                   "has type !hal.buffer, which cannot be passed to a kernel");
}
END_TEST

/* Removes every register and block name, as a stripped binary has none. */
static void strip(hali_ir_module_t *m) {
  for (uint32_t fi = 0; fi < m->func_count; ++fi)
    hali_ir_func_strip_names(&m->funcs[fi]);
}

static hali_ir_module_t *stripped(const char *text) {
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(text, strlen(text), "s.hasm", &m));
  strip(m);
  return m;
}

/* The passes name registers as the verifier and the printer do (vm/ir.h
 * hali_ir_reg_name): in a stripped module %rN, the register the printer
 * shows, not a made-up stem. */
START_TEST(stripped_registers_are_named) {
  hali_ir_module_t *out = NULL;
  hali_status_t s = hali_load_module(
      stripped("executable @k format \"ffi\" library \"k.so\" {\n"
               "  export @inc(tensor<4xf32>) -> (tensor<4xf32>)\n"
               "}\n"
               "func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> "
               "tensor<4xf32> {\n"
               "  %a = tensor.dispatch @k::@inc[4](%x) -> tensor<4xf32>\n"
               "  tensor.overwrite %a, %y\n"
               "  return %a\n"
               "}\n"),
      "s.hasm", NULL, &out);
  ck_assert_ptr_null(out);
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT,
                   "tensor.overwrite into %r1, which is not a mutable "
                   "parameter: an immutable argument is the caller's "
                   "read-only value (declare it `%r1: mutable tensor<...>`)");
  /* Run-time messages too: the storage assert of a mutable argument names
   * the buffer register holding it (%a in the named module). */
  ck_assert_ok(hali_load_module(
      stripped("func @f(%a: mutable tensor<4xi32>, %v: i32) {\n"
               "  %t = tensor.splat %v : tensor<4xi32>\n"
               "  tensor.overwrite %t, %a\n"
               "  return\n"
               "}\n"),
      "s.hasm", NULL, &out));
  char *text = hali_ir_print(out, false);
  ck_assert_ptr_nonnull(text);
  bool named = strstr(text, "\"@f$async: the storage of %r4\"") != NULL;
  bool stem = strstr(text, "the storage of %t\"") != NULL;
  free(text);
  hali_ir_module_free(out);
  ck_assert_msg(named && !stem, "the storage assert does not name %%r4");
}
END_TEST

/* hali_pass_error names the place as the verifier does: the block when
 * the instruction is one of the function's, none for one being built. */
START_TEST(pass_errors_name_the_block) {
  static const char text[] = "func @f(%a: i32) -> i32 {\n"
                             "^entry:\n"
                             "  br ^next\n"
                             "^next:\n"
                             "  return %a\n"
                             "}\n";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(text, strlen(text), "p.hasm", &m));
  const hali_ir_func_t *f = &m->funcs[0];
  const hali_ir_insn_t *ret = &f->blocks[1].insns[0];
  ck_assert_status(hali_pass_error("a-pass", m, f, ret, 0, "no"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "a-pass: @f, block ^next, instruction 0 (return), "
                   "p.hasm:5: no");
  hali_ir_insn_t copy = *ret;
  ck_assert_status(hali_pass_error("a-pass", m, f, &copy, 0, "no"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "a-pass: @f, instruction 0 (return), p.hasm:5: no");
  ck_assert_status(hali_pass_error("a-pass", m, f, NULL, 0, "no"),
                   HALI_STATUS_INVALID_ARGUMENT, "a-pass: @f, p.hasm:1: no");
  hali_ir_module_free(m);
}
END_TEST

/* The dispatch lists are computed in one place (vm/ir.h); every reader
 * gets the same indices, and nothing past the operands. */
START_TEST(dispatch_lists) {
  static const char text[] =
      "executable @k format \"ffi\" library \"k.so\" {\n"
      "  export @e(tensor<?xf32>, i32) -> (tensor<?xf32>, tensor<4xf32>)\n"
      "}\n"
      "func @f(%x: tensor<?xf32>, %n: index, %s: i32) -> (tensor<?xf32>, "
      "tensor<4xf32>) {\n"
      "  %a, %b = tensor.dispatch @k::@e[%n, 4](%x, %s) -> "
      "(%x as tensor<?xf32>{%n}, tensor<4xf32>)\n"
      "  return %a, %b\n"
      "}\n";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(text, strlen(text), "d.hasm", &m));
  hali_ir_insn_t *insn = find_insn(m, "f", HALI_OP_TENSOR_DISPATCH);
  ck_assert_uint_eq(insn->operand_count, 16);
  hali_ir_dispatch_t dl;
  ck_assert(hali_ir_dispatch_lists(insn, &dl));
  ck_assert_uint_eq(dl.workload, HALI_TD_HEADER);
  ck_assert_uint_eq(dl.nworkload, 2);
  ck_assert_uint_eq(dl.operands, 9);
  ck_assert_uint_eq(dl.noperands, 2);
  ck_assert_uint_eq(dl.results, 11);
  ck_assert_uint_eq(dl.nresults, 2);
  ck_assert_uint_eq(dl.ties, 13);
  ck_assert_uint_eq(dl.dims, 15);
  ck_assert_int_eq(hali_ir_imm(m, &insn->operands[dl.ties]), 0); /* %x as ... */
  ck_assert(hali_ir_operand_is_write(insn, dl.results + 1));
  ck_assert(!hali_ir_operand_is_write(insn, dl.operands));
  ck_assert_uint_eq(hali_ir_dispatch(insn).dims, 15);
  /* Counts out of range or not immediates: nothing is read. */
  hali_ir_operand_t *nres = &insn->operands[HALI_TD_NRESULTS];
  hali_ir_set_imm_u32(nres, UINT32_MAX); /* -1 as i32 bits: zero-extended */
  ck_assert(!hali_ir_dispatch_lists(insn, &dl));
  ck_assert(hali_ir_set_imm(m, nres, -1));
  ck_assert(!hali_ir_dispatch_lists(insn, &dl));
  ck_assert(hali_ir_set_imm(m, nres, 17));
  ck_assert(!hali_ir_dispatch_lists(insn, &dl));
  ck_assert(!hali_ir_operand_is_write(insn, 11));
  /* A count from the module's immediate pool is out of range too. */
  ck_assert(hali_ir_set_imm(m, nres, (INT64_C(1) << 40) + 2));
  ck_assert_uint_eq(nres->imm_form, HALI_IR_IMM_POOL);
  ck_assert(!hali_ir_dispatch_lists(insn, &dl));
  ck_assert(hali_ir_set_imm(m, nres, 2));
  nres->kind = HALI_IR_REG;
  ck_assert(!hali_ir_dispatch_lists(insn, &dl));
  nres->kind = HALI_IR_IMM;
  /* Lists past the operands: filled (what they need), but false. */
  ck_assert(hali_ir_set_imm(m, nres, 5));
  ck_assert(!hali_ir_dispatch_lists(insn, &dl));
  ck_assert_uint_eq(dl.dims, 9 + 2 + 2 * 5);
  ck_assert(hali_ir_set_imm(m, nres, 2));
  uint32_t n = insn->operand_count;
  insn->operand_count = HALI_TD_HEADER - 1;
  ck_assert(!hali_ir_dispatch_lists(insn, &dl));
  insn->operand_count = n;
  hali_ir_module_free(m);
}
END_TEST

/* The tensor ops' layouts come from their signatures (vm/ops_tensor.def):
 * the parsed fixed operands and counted lists, and the names vm/ir.h gives
 * positions in them, agree. */
START_TEST(tensor_signatures) {
  const hali_op_info_t *d = hali_op_info(HALI_OP_TENSOR_DISPATCH);
  ck_assert_uint_eq(d->operand_count, HALI_TD_HEADER);
  ck_assert_uint_eq(d->operands[HALI_TD_EXE].role, HALI_ROLE_EXECUTABLE);
  for (unsigned k = HALI_TD_EXPORT; k < HALI_TD_HEADER; ++k)
    ck_assert_uint_eq(d->operands[k].role, HALI_ROLE_IMM);
  ck_assert_uint_eq(d->list_count, 5);
  static const struct {
    uint8_t role;
    hali_type_t type;
    uint8_t count;
  } lists[] = {
      {HALI_ROLE_READ_OR_IMM, HALI_TYPE_I64, HALI_TD_NWORKLOAD},
      {HALI_ROLE_READ, HALI_TYPE_NONE, HALI_TD_NOPERANDS},
      {HALI_ROLE_WRITE, HALI_TYPE_TENSOR, HALI_TD_NRESULTS},
      {HALI_ROLE_IMM, HALI_TYPE_I32, HALI_TD_NRESULTS},
      {HALI_ROLE_READ, HALI_TYPE_I64, HALI_LIST_REST},
  };
  for (unsigned i = 0; i < 5; ++i) {
    ck_assert_uint_eq(d->lists[i].role, lists[i].role);
    ck_assert_uint_eq(d->lists[i].type, lists[i].type);
    ck_assert_uint_eq(d->lists[i].count, lists[i].count);
  }
  const unsigned dims_ops[] = {HALI_OP_TENSOR_SPLAT, HALI_OP_TENSOR_IMPORT};
  for (unsigned i = 0; i < 2; ++i) {
    const hali_op_info_t *info = hali_op_info(dims_ops[i]);
    ck_assert_uint_eq(info->operand_count, HALI_TS_DIMS);
    ck_assert_uint_eq(info->operands[0].role, HALI_ROLE_WRITE);
    ck_assert_uint_eq(info->list_count, 1);
    ck_assert_uint_eq(info->lists[0].count, HALI_LIST_REST);
    ck_assert_uint_eq(info->lists[0].type, HALI_TYPE_I64);
  }
  /* Fixed layouts: no lists, operands as the structural check wants. */
  const hali_op_info_t *x = hali_op_info(HALI_OP_TENSOR_EXPORT);
  ck_assert_uint_eq(x->operand_count, 2);
  ck_assert_uint_eq(x->list_count, 0);
  ck_assert_uint_eq(x->operands[0].role, HALI_ROLE_WRITE);
  ck_assert_uint_eq(x->operands[0].type, HALI_TYPE_BUFFER_VIEW);
  ck_assert_uint_eq(x->operands[1].type, HALI_TYPE_TENSOR);
  ck_assert_uint_eq(hali_op_info(HALI_OP_TENSOR_CONSTANT)->operands[1].role,
                    HALI_ROLE_RODATA);
  ck_assert_uint_eq(hali_op_info(HALI_OP_TENSOR_END)->operand_count, 0);
  /* The overwrite's target is written in place: neither a register
   * written nor a value read (copy-on-write and liveness rely on it). */
  const hali_op_info_t *ow = hali_op_info(HALI_OP_TENSOR_OVERWRITE);
  ck_assert_uint_eq(ow->operands[0].role, HALI_ROLE_READ);
  ck_assert_uint_eq(ow->operands[1].role, HALI_ROLE_IN_PLACE);
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op) {
    const hali_op_info_t *info = hali_op_info(op);
    /* Every list's length operand is a fixed immediate; ops with lists
     * (and only those, among tensor ops) are variadic. */
    for (unsigned i = 0; i < info->list_count; ++i)
      if (info->lists[i].count != HALI_LIST_REST) {
        ck_assert_uint_lt(info->lists[i].count, info->operand_count);
        ck_assert_uint_eq(info->operands[info->lists[i].count].role,
                          HALI_ROLE_IMM);
      }
    if (info->flags & HALI_OPF_TENSOR)
      ck_assert_msg(!(info->flags & HALI_OPF_VARIADIC) == !info->list_count,
                    "%s", info->name);
  }
}
END_TEST

/* hali_ir_operand_is_write for the tensor ops reads the roles of their
 * signatures: fixed operands and list elements. */
START_TEST(tensor_writes_from_signature) {
  static const char text[] =
      "func @f(%t: tensor<?xf32>, %n: index, %s: f32) -> (tensor<?xf32>) {\n"
      "  %a = tensor.splat %s : tensor<?xf32>{%n}\n"
      "  %b = tensor.clone %a\n"
      "  return %b\n"
      "}\n";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(text, strlen(text), "w.hasm", &m));
  hali_ir_insn_t *sp = find_insn(m, "f", HALI_OP_TENSOR_SPLAT);
  ck_assert_uint_eq(sp->operand_count, 3);
  ck_assert(hali_ir_operand_is_write(sp, 0));
  ck_assert(!hali_ir_operand_is_write(sp, 1));
  ck_assert(!hali_ir_operand_is_write(sp, 2)); /* a dimension, read */
  ck_assert(!hali_ir_operand_is_write(sp, 3)); /* past the operands */
  ck_assert_uint_eq(hali_ir_operand_role(sp, 0), HALI_ROLE_WRITE);
  ck_assert_uint_eq(hali_ir_operand_role(sp, 2), HALI_ROLE_READ);
  ck_assert_uint_eq(hali_ir_operand_role(sp, 3), 0);
  hali_ir_lists_t l;
  ck_assert_int_eq(hali_ir_op_lists(sp, &l), HALI_IR_LISTS_FIT);
  ck_assert_uint_eq(l.count_total, 1);
  ck_assert_uint_eq(l.start[0], HALI_TS_DIMS);
  ck_assert_uint_eq(l.count[0], 1);
  hali_ir_insn_t *cl = find_insn(m, "f", HALI_OP_TENSOR_CLONE);
  ck_assert(hali_ir_operand_is_write(cl, 0));
  ck_assert(!hali_ir_operand_is_write(cl, 1));
  ck_assert_int_eq(hali_ir_op_lists(cl, &l), HALI_IR_LISTS_FIT);
  ck_assert_uint_eq(l.count_total, 0);
  /* Fewer operands than the fixed ones: no lists. */
  uint32_t n = sp->operand_count;
  sp->operand_count = 1;
  ck_assert_int_eq(hali_ir_op_lists(sp, &l), HALI_IR_LISTS_BAD);
  sp->operand_count = n;
  hali_ir_module_free(m);
}
END_TEST

/* stream-to-hal rejects a tensor read before any op writes it, whichever
 * tensor op reads it (its reads come from the op's layout). */
START_TEST(use_before_def_every_reader) {
  static const char *const readers[] = {
      "  %u = tensor.clone %t\n",
      "  %o = tensor.export %t\n",
      "  %u = tensor.dispatch @k::@e[4](%t) -> tensor<4xf32>\n",
  };
  static const char *const ops[] = {"tensor.clone", "tensor.export",
                                    "tensor.dispatch"};
  for (size_t i = 0; i < sizeof(readers) / sizeof(readers[0]); ++i) {
    char text[1024], want[256];
    snprintf(text, sizeof(text),
             "executable @k format \"ffi\" library \"k.so\" {\n"
             "  export @e(tensor<4xf32>) -> (tensor<4xf32>)\n"
             "}\n"
             "func @g$async(%%v: !hal.buffer_view, %%wait: !hal.fence, "
             "%%signal: !hal.fence) -> !hal.buffer_view locals(%%t: "
             "tensor<4xf32>, %%u: tensor<4xf32>, %%o: !hal.buffer_view) {\n"
             "  tensor.wait %%wait\n"
             "%s"
             "  tensor.barrier %%signal\n"
             "  return %%v\n"
             "}\n",
             readers[i]);
    snprintf(want, sizeof(want),
             "stream-to-hal: @g$async, block ^entry, instruction 1 (%s), "
             "u.hasm:6: tensor %%t is read before it is written",
             ops[i]);
    hali_ir_module_t *m = NULL, *out = NULL;
    ck_assert_ok(hali_asm_parse(text, strlen(text), "u.hasm", &m));
    ck_assert_status(hali_load_module(m, "u.hasm", NULL, &out),
                     HALI_STATUS_INVALID_ARGUMENT, want);
    ck_assert_ptr_null(out);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tensor_load");
  TCase *tc = tcase_create("fuzz");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, fuzz_mlp_tensor);
  tcase_add_test(tc, fuzz_every_op);
  tcase_add_test(tc, fuzz_mlp_tiny);
  tcase_add_test(tc, fuzz_async_call);
  tcase_add_test(tc, fuzz_slice_update);
  tcase_add_test(tc, fuzz_trace);
  suite_add_tcase(s, tc);
  tc = tcase_create("structure");
  tcase_add_test(tc, mutations_are_named);
  tcase_add_test(tc, functions_are_checked);
  tcase_add_test(tc, export_argument_type);
  tcase_add_test(tc, stripped_registers_are_named);
  tcase_add_test(tc, pass_errors_name_the_block);
  tcase_add_test(tc, dispatch_lists);
  tcase_add_test(tc, tensor_signatures);
  tcase_add_test(tc, tensor_writes_from_signature);
  tcase_add_test(tc, use_before_def_every_reader);
  tcase_add_test(tc, p08_hal_code_calls_async);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite()); }
