/* Tests for the hali command (tools/hali.c, tools/run.c), run through the
 * shell: exact output of `hali run`, asm/dis/verify, and the error report
 * (`hali: error: CODE: message` plus `  at @fn@pc (file:line)` lines, exit
 * status 1; usage errors exit 2).  Temporary files live in a directory
 * made by mkdtemp for each test case and removed after it (an unchecked
 * fixture, so that the directory goes away even when a test fails).
 *
 * Tests in the "known_bugs" case assert the expected behaviour and fail
 * today; each names the bug it pins down. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hali/hali.h"
#include "loader/hbc.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------------------ */
/* Fixture: a temporary directory per test case. */

static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/hali-cli-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (!d) return;
  struct dirent *e;
  char path[512];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(tmpdir);
}

/* Path of |name| inside the test's directory (a static buffer per slot). */
static const char *tmp(const char *name) {
  static char bufs[4][512];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, name);
  return b;
}

static const char *example(const char *name) {
  static char bufs[4][512];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, sizeof(bufs[0]), "%s/examples/%s", HALI_SRCDIR, name);
  return b;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fputs(text, f) >= 0, 1);
  ck_assert_int_eq(fclose(f), 0);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* One run of the tool: exit status, stdout and stderr. */
typedef struct {
  int rc;
  char out[8192];
  char err[8192];
} run_t;

static run_t run;

/* Runs `hali ARGS` (|fmt| formats ARGS) and fills |run|.  Output is copied
 * into fixed buffers so that failing assertions leak nothing. */
static void hali(const char *fmt, ...) HALI_PRINTF(1, 2);
static void hali(const char *fmt, ...) {
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "'%s' %s", HALI_TOOL, args);
  char *out = NULL, *err = NULL;
  run.rc = hali_test_shell(cmd, &out, &err);
  snprintf(run.out, sizeof(run.out), "%s", out ? out : "");
  snprintf(run.err, sizeof(run.err), "%s", err ? err : "");
  free(out);
  free(err);
}

#define EXPECT_RUN(rc_, out_, err_)                                            \
  do {                                                                         \
    ck_assert_msg(run.rc == (rc_), "exit %d, expected %d; stderr: %s", run.rc, \
                  (rc_), run.err);                                             \
    ck_assert_str_eq(run.out, (out_));                                         \
    ck_assert_str_eq(run.err, (err_));                                         \
  } while (0)

/* Exit 1 with nothing on stdout and |needle| in the error report. */
#define EXPECT_ERROR(needle)                                                   \
  do {                                                                         \
    ck_assert_msg(run.rc == 1, "exit %d, expected 1; stderr: %s", run.rc,      \
                  run.err);                                                    \
    ck_assert_str_eq(run.out, "");                                             \
    ck_assert_msg(strncmp(run.err, "hali: error: ", 13) == 0,                  \
                  "stderr does not start with 'hali: error: ': %s", run.err);  \
    ck_assert_msg(strstr(run.err, (needle)) != NULL,                           \
                  "stderr does not contain \"%s\": %s", (needle), run.err);    \
  } while (0)

/* Exit 2 (usage) with |needle| on stderr. */
#define EXPECT_USAGE(needle)                                                   \
  do {                                                                         \
    ck_assert_msg(run.rc == 2, "exit %d, expected 2; stderr: %s", run.rc,      \
                  run.err);                                                    \
    ck_assert_str_eq(run.out, "");                                             \
    ck_assert_msg(strstr(run.err, (needle)) != NULL,                           \
                  "stderr does not contain \"%s\": %s", (needle), run.err);    \
  } while (0)

static const char div_text[] = "module @dz\n"                         /*  1 */
                               "\n"                                   /*  2 */
                               "func @div(%a: i32, %b: i32) -> i32 {\n" /* 3 */
                               "  %q = div.s.i32 %a, %b\n"            /*  4 */
                               "  return %q\n"                        /*  5 */
                               "}\n"                                  /*  6 */
                               "\n"                                   /*  7 */
                               "func @main(%x: i32) -> i32 {\n"       /*  8 */
                               "  %zero = const.i32 0\n"              /*  9 */
                               "  %r = call @div(%x, %zero)\n"        /* 10 */
                               "  return %r\n"                        /* 11 */
                               "}\n";                                 /* 12 */

/* ------------------------------------------------------------------------ */
/* hali run. */

START_TEST(cli_run_fib) {
  hali("run '%s' --function=fib --input=20", example("fib.hasm"));
  EXPECT_RUN(0, "result[0]: i32=6765\n", "");
  /* @name is accepted too, and i32= is the default type spelled out. */
  hali("run '%s' --function=@fib --input=i32=10", example("fib.hasm"));
  EXPECT_RUN(0, "result[0]: i32=55\n", "");
}
END_TEST

START_TEST(cli_run_default_main) {
  hali("run '%s'", example("fib.hasm"));
  EXPECT_RUN(0, "result[0]: i32=6765\n", "");
}
END_TEST

START_TEST(cli_run_loop_i64) {
  hali("run '%s' --function=loop --input=i64=100", example("loop.hasm"));
  EXPECT_RUN(0, "result[0]: i64=1275\n", "");
  hali("run '%s' --function=loop --input=i64=0", example("loop.hasm"));
  EXPECT_RUN(0, "result[0]: i64=0\n", "");
}
END_TEST

/* The same shortest-round-trip formatting the tool documents. */
static void shortest(char *buf, size_t n, double v) {
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(buf, n, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

START_TEST(cli_run_float_chain) {
  /* x = x * 1.0000001 + 0.5, 1000 times, one rounding per operation (the
   * volatile keeps the compiler from fusing them into an fma). */
  double x = 0.0;
  for (int i = 0; i < 1000; ++i) {
    volatile double t = x * 1.0000001;
    x = t + 0.5;
  }
  char num[64], want[128];
  shortest(num, sizeof(num), x);
  snprintf(want, sizeof(want), "result[0]: f64=%s\n", num);
  hali("run '%s' --function=float_chain --input=i64=1000",
       example("float.hasm"));
  EXPECT_RUN(0, want, "");
  /* What that is today, for the record (C's double result). */
  ck_assert_str_eq(want, "result[0]: f64=500.02497583086995\n");
}
END_TEST

START_TEST(cli_run_every_input_type) {
  write_file(tmp("mix.hasm"),
             "func @mix(%a: i32, %b: i64, %c: f32, %d: f64) -> "
             "(i32, i64, f32, f64) {\n"
             "  %one = const.i32 1\n"
             "  %a2 = add.i32 %a, %one\n"
             "  %b2 = add.i64 %b, %b\n"
             "  %d2 = add.f64 %d, %d\n"
             "  return %a2, %b2, %c, %d2\n"
             "}\n");
  hali("run '%s' --function=mix --input=42 --input=i64=-5 --input=f32=1.5 "
       "--input=f64=2.25",
       tmp("mix.hasm"));
  EXPECT_RUN(0,
             "result[0]: i32=43\n"
             "result[1]: i64=-10\n"
             "result[2]: f32=1.5\n"
             "result[3]: f64=4.5\n",
             "");
  hali("run '%s' --function=mix --input=0x7fffffff --input=i64=-0x10 "
       "--input=f32=0.1 --input=f64=-inf",
       tmp("mix.hasm"));
  EXPECT_RUN(0,
             "result[0]: i32=-2147483648\n"
             "result[1]: i64=-32\n"
             "result[2]: f32=0.1\n"
             "result[3]: f64=-inf\n",
             "");
}
END_TEST

START_TEST(cli_run_binary_module) {
  hali("asm '%s' -o '%s'", example("fib.hasm"), tmp("fib.hbc"));
  EXPECT_RUN(0, "", "");
  FILE *f = fopen(tmp("fib.hbc"), "rb");
  ck_assert_ptr_nonnull(f);
  char magic[HALI_HBC_MAGIC_SIZE];
  ck_assert_uint_eq(fread(magic, 1, sizeof(magic), f), sizeof(magic));
  fclose(f);
  ck_assert_mem_eq(magic, HALI_HBC_MAGIC, HALI_HBC_MAGIC_SIZE);
  hali("run '%s' --function=fib --input=20", tmp("fib.hbc"));
  EXPECT_RUN(0, "result[0]: i32=6765\n", "");
  /* -oFILE and --strip. */
  hali("asm --strip '%s' '-o%s'", example("loop.hasm"), tmp("loop.hbc"));
  EXPECT_RUN(0, "", "");
  hali("run '%s' --function=loop --input=i64=100", tmp("loop.hbc"));
  EXPECT_RUN(0, "result[0]: i64=1275\n", "");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* asm, dis, verify, isa, --version, --help. */

START_TEST(cli_dis) {
  hali("dis '%s'", example("fib.hasm"));
  ck_assert_int_eq(run.rc, 0);
  ck_assert_str_eq(run.err, "");
  char from_text[8192];
  snprintf(from_text, sizeof(from_text), "%s", run.out);
  ck_assert_msg(strncmp(from_text, "module @fib source \"", 20) == 0, "%s",
                from_text);
  ck_assert_ptr_nonnull(strstr(from_text, "\nfunc @fib(%n: i32) -> (i32) {\n"
                                          "^entry:\n"
                                          "  %two = const.i32 2 loc(7)\n"));
  /* The binary disassembles to the same text... */
  hali("asm '%s' -o '%s'", example("fib.hasm"), tmp("fib.hbc"));
  EXPECT_RUN(0, "", "");
  hali("dis '%s'", tmp("fib.hbc"));
  EXPECT_RUN(0, from_text, "");
  /* ...which assembles back to the same bytes. */
  write_file(tmp("again.hasm"), from_text);
  hali("asm '%s' -o '%s'", tmp("again.hasm"), tmp("again.hbc"));
  EXPECT_RUN(0, "", "");
  uint8_t *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  ck_assert_ok(hali_read_file(tmp("fib.hbc"), &a, &na));
  ck_assert_ok(hali_read_file(tmp("again.hbc"), &b, &nb));
  bool same = na == nb && memcmp(a, b, na) == 0;
  free(a);
  free(b);
  ck_assert_msg(same, "asm(dis(fib.hbc)) differs from fib.hbc");
  /* --no-locs drops the lines and the source. */
  hali("dis --no-locs '%s'", tmp("fib.hbc"));
  ck_assert_int_eq(run.rc, 0);
  ck_assert_msg(strncmp(run.out, "module @fib\n", 12) == 0, "%s", run.out);
  ck_assert_ptr_null(strstr(run.out, "loc("));
  /* A stripped module prints positional names. */
  hali("asm --strip '%s' -o '%s'", example("fib.hasm"), tmp("s.hbc"));
  EXPECT_RUN(0, "", "");
  hali("dis '%s'", tmp("s.hbc"));
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_nonnull(
      strstr(run.out, "func @fib(%r0: i32) -> (i32) {\n^bb0:\n"));
}
END_TEST

START_TEST(cli_verify) {
  hali("verify '%s'", example("fib.hasm"));
  char want[1024];
  snprintf(want, sizeof(want), "%s: ok (2 functions)\n", example("fib.hasm"));
  EXPECT_RUN(0, want, "");
  hali("asm '%s' -o '%s'", example("loop.hasm"), tmp("loop.hbc"));
  hali("verify '%s'", tmp("loop.hbc"));
  snprintf(want, sizeof(want), "%s: ok (1 function)\n", tmp("loop.hbc"));
  EXPECT_RUN(0, want, "");

  write_file(tmp("bad.hasm"), "func @f(%a: i32) -> i32 {\n"
                              "  cond_br %a, ^one, ^two\n"
                              "^one:\n"
                              "  %x = const.i32 1\n"
                              "  br ^two\n"
                              "^two:\n"
                              "  return %x\n"
                              "}\n");
  hali("verify '%s'", tmp("bad.hasm"));
  EXPECT_ERROR("hali: error: INVALID_ARGUMENT: verify: @f, block ^two, "
               "instruction 0 (return)");
  ck_assert_ptr_nonnull(strstr(run.err, "bad.hasm:7: operand 0: register %x "
                                        "may be read before it is written\n"));
  ck_assert_ptr_nonnull(strstr(run.err, "\n  while loading "));
  /* A syntax error names file:line:column. */
  write_file(tmp("syntax.hasm"), "func @f() {\n  retrun\n}\n");
  hali("verify '%s'", tmp("syntax.hasm"));
  char where[600];
  snprintf(where, sizeof(where), "%s:2:3: unknown op, found 'retrun'",
           tmp("syntax.hasm"));
  EXPECT_ERROR(where);
}
END_TEST

START_TEST(cli_corrupt_binary) {
  hali("asm '%s' -o '%s'", example("fib.hasm"), tmp("fib.hbc"));
  EXPECT_RUN(0, "", "");
  uint8_t *d = NULL;
  size_t n = 0;
  ck_assert_ok(hali_read_file(tmp("fib.hbc"), &d, &n));
  d[n - 3] ^= 0x40;
  FILE *f = fopen(tmp("fib.hbc"), "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(d, 1, n, f), n);
  fclose(f);
  free(d);
  hali("run '%s' --function=fib --input=3", tmp("fib.hbc"));
  EXPECT_ERROR("hali: error: DATA_LOSS: malformed module: checksum mismatch");
  hali("verify '%s'", tmp("fib.hbc"));
  EXPECT_ERROR("checksum mismatch");
  hali("dis '%s'", tmp("fib.hbc"));
  EXPECT_ERROR("checksum mismatch");
}
END_TEST

START_TEST(cli_version_and_help) {
  hali("--version");
  EXPECT_RUN(0, "hali " HALI_VERSION_STRING "\n", "");
  const char *const helps[] = {"--help", "-h", "help", "run --help",
                               "asm --help"};
  for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); ++i) {
    hali("%s", helps[i]);
    ck_assert_msg(run.rc == 0, "hali %s: exit %d", helps[i], run.rc);
    ck_assert_str_eq(run.err, "");
    ck_assert(strncmp(run.out, "usage: hali <command>", 21) == 0);
    const char *const subs[] = {"\n  run MODULE", "\n  asm IN", "\n  dis IN",
                                "\n  verify IN", "\n  isa ", "--version",
                                "--input=i64=", "--function=NAME"};
    for (size_t k = 0; k < sizeof(subs) / sizeof(subs[0]); ++k)
      ck_assert_msg(strstr(run.out, subs[k]) != NULL,
                    "hali %s does not mention \"%s\"", helps[i], subs[k]);
  }
  hali("isa");
  ck_assert_int_eq(run.rc, 0);
  ck_assert(strncmp(run.out, "# hali instruction set\n", 23) == 0);
  ck_assert_ptr_nonnull(strstr(run.out, "add.i32"));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Errors. */

START_TEST(cli_missing_module_file) {
  const char *missing = tmp("no-such-module.hasm");
  char want[700];
  snprintf(want, sizeof(want),
           "hali: error: NOT_FOUND: %s: cannot open: No such file or directory",
           missing);
  hali("run '%s'", missing);
  EXPECT_ERROR(want);
  hali("verify '%s'", missing);
  EXPECT_ERROR(want);
  hali("dis '%s'", missing);
  EXPECT_ERROR(want);
  hali("asm '%s' -o '%s'", missing, tmp("out.hbc"));
  EXPECT_ERROR(want);
  ck_assert(!exists(tmp("out.hbc")));
  /* A directory is not a module either; the report names it. */
  hali("run '%s'", tmpdir);
  EXPECT_ERROR(tmpdir);
}
END_TEST

START_TEST(cli_unknown_function) {
  hali("run '%s' --function=nope", example("fib.hasm"));
  EXPECT_ERROR("hali: error: NOT_FOUND: ");
  ck_assert_ptr_nonnull(strstr(run.err, "no function @nope in module @fib\n"));
}
END_TEST

START_TEST(cli_wrong_number_of_inputs) {
  hali("run '%s' --function=fib", example("fib.hasm"));
  EXPECT_ERROR("hali: error: INVALID_ARGUMENT: @fib takes 1 argument(s), 0 "
               "given\n");
  hali("run '%s' --function=fib --input=1 --input=2", example("fib.hasm"));
  EXPECT_ERROR("@fib takes 1 argument(s), 2 given");
  hali("run '%s' --input=1", example("fib.hasm"));
  EXPECT_ERROR("@main takes 0 argument(s), 1 given");
  /* The right count of the wrong type. */
  hali("run '%s' --function=fib --input=i64=3", example("fib.hasm"));
  EXPECT_ERROR("@fib argument 0: expected i32, got i64");
}
END_TEST

START_TEST(cli_bad_input_value) {
  const char *fib = example("fib.hasm");
  hali("run '%s' --function=fib --input=abc", fib);
  EXPECT_ERROR("hali: error: INVALID_ARGUMENT: --input #0 'abc': 'abc' is not "
               "a valid i32\n");
  hali("run '%s' --function=fib --input=99999999999", fib);
  EXPECT_ERROR("'99999999999' is not a valid i32");
  hali("run '%s' --function=fib --input=", fib);
  EXPECT_ERROR("'' is not a valid i32");
  hali("run '%s' --function=loop --input=i64=1.5", example("loop.hasm"));
  EXPECT_ERROR("--input #0 'i64=1.5': '1.5' is not a valid i64");
  hali("run '%s' --function=float_chain --input=i64=99999999999999999999",
       example("float.hasm"));
  EXPECT_ERROR("is not a valid i64");
  write_file(tmp("f.hasm"), "func @f(%x: f32, %y: f64) {\n  return\n}\n");
  hali("run '%s' --function=f --input=f32=1.5 --input=f64=2x", tmp("f.hasm"));
  EXPECT_ERROR("--input #1 'f64=2x': '2x' is not a valid f64");
  hali("run '%s' --function=f --input=f32=pi --input=f64=2", tmp("f.hasm"));
  EXPECT_ERROR("--input #0 'f32=pi': 'pi' is not a valid f32");
}
END_TEST

START_TEST(cli_unknown_input_type) {
  hali("run '%s' --function=fib --input=i33=4", example("fib.hasm"));
  EXPECT_ERROR("hali: error: INVALID_ARGUMENT: --input #0 'i33=4': unknown "
               "type 'i33' (expected i32, i64, f32 or f64)\n");
  hali("run '%s' --function=fib --input='!hal.buffer=4'", example("fib.hasm"));
  EXPECT_ERROR("unknown type '!hal.buffer'");
}
END_TEST

START_TEST(cli_runtime_failure_backtrace) {
  const char *path = tmp("dz.hasm");
  write_file(path, div_text);
  hali("run '%s' --input=5", path);
  char want[2048];
  snprintf(want, sizeof(want),
           "hali: error: OUT_OF_RANGE: div.s.i32: integer division by zero\n"
           "  at @div@0 (%s:4)\n"
           "  at @main@1 (%s:10)\n",
           path, path);
  EXPECT_RUN(1, "", want);
  /* From the binary: the same report, the source named as assembled. */
  hali("asm '%s' -o '%s'", path, tmp("dz.hbc"));
  EXPECT_RUN(0, "", "");
  hali("run '%s' --input=5", tmp("dz.hbc"));
  EXPECT_RUN(1, "", want);
  /* fail: the status code comes from the register. */
  write_file(tmp("fail.hasm"), "func @main() {\n"
                               "  %code = const.i32 9\n"
                               "  fail %code, \"not ready\"\n"
                               "}\n");
  hali("run '%s'", tmp("fail.hasm"));
  snprintf(want, sizeof(want),
           "hali: error: FAILED_PRECONDITION: not ready\n"
           "  at @main@1 (%s:3)\n",
           tmp("fail.hasm"));
  EXPECT_RUN(1, "", want);
  /* The call depth limit. */
  hali("run '%s' --function=fib --input=30 --max-depth=5", example("fib.hasm"));
  EXPECT_ERROR("hali: error: RESOURCE_EXHAUSTED: call depth limit of 5 "
               "exceeded\n  at @fib@");
}
END_TEST

/* A stripped module still names function and pc, without file:line. */
START_TEST(cli_stripped_runtime_failure) {
  write_file(tmp("dz.hasm"), div_text);
  hali("asm --strip '%s' -o '%s'", tmp("dz.hasm"), tmp("dz.hbc"));
  EXPECT_RUN(0, "", "");
  hali("run '%s' --input=7", tmp("dz.hbc"));
  EXPECT_RUN(1, "",
             "hali: error: OUT_OF_RANGE: div.s.i32: integer division by zero\n"
             "  at @div@0\n"
             "  at @main@1\n");
}
END_TEST

START_TEST(cli_asm_errors) {
  write_file(tmp("bad.hasm"), "func @f() {\n  %x = frob.i32 1\n}\n");
  hali("asm '%s' -o '%s'", tmp("bad.hasm"), tmp("bad.hbc"));
  char want[700];
  snprintf(want, sizeof(want),
           "hali: error: INVALID_ARGUMENT: %s:2:8: unknown op, found "
           "'frob.i32'\n",
           tmp("bad.hasm"));
  EXPECT_RUN(1, "", want);
  ck_assert(!exists(tmp("bad.hbc")));
  /* An output that cannot be created. */
  hali("asm '%s' -o '%s'", example("fib.hasm"), tmp("no/such/dir/x.hbc"));
  EXPECT_ERROR("cannot open for writing");
}
END_TEST

START_TEST(cli_usage_errors) {
  hali("%s", "");
  ck_assert_int_eq(run.rc, 2);
  ck_assert_str_eq(run.out, "");
  ck_assert(strncmp(run.err, "usage: hali <command>", 21) == 0);
  hali("frobnicate");
  EXPECT_USAGE("hali: unknown command 'frobnicate'");
  hali("run '%s' --bogus", example("fib.hasm"));
  EXPECT_USAGE("hali run: unknown option '--bogus'");
  hali("run");
  EXPECT_USAGE("usage: hali run MODULE");
  hali("run '%s' '%s'", example("fib.hasm"), example("loop.hasm"));
  EXPECT_USAGE("hali run: more than one module");
  hali("asm '%s'", example("fib.hasm"));
  EXPECT_USAGE("usage: hali asm IN.hasm -o OUT.hbc");
  hali("asm '%s' -o '%s' --fast", example("fib.hasm"), tmp("x.hbc"));
  EXPECT_USAGE("hali asm: unknown option '--fast'");
  ck_assert(!exists(tmp("x.hbc")));
  hali("dis");
  EXPECT_USAGE("usage: hali dis");
  hali("dis --bogus '%s'", example("fib.hasm"));
  EXPECT_USAGE("hali dis: unknown option '--bogus'");
  hali("verify");
  EXPECT_USAGE("usage: hali verify");
  hali("verify '%s' '%s'", example("fib.hasm"), example("loop.hasm"));
  EXPECT_USAGE("usage: hali verify");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Known bugs. */

/* BUG (tools/run.c, parse_scalar): strtoll(v, &end, 0) reads a leading 0
 * as octal, so `--input=010` passes 8 (fib(8) = 21); the usage text shows
 * decimal inputs and doc/asm.md defines literals as "decimal or 0x hex".
 * Expected: 10 (fib(10) = 55), or a rejection. */
START_TEST(bug_input_leading_zero_is_not_octal) {
  hali("run '%s' --function=fib --input=010", example("fib.hasm"));
  if (run.rc == 1) return; /* rejecting it would be fine too */
  EXPECT_RUN(0, "result[0]: i32=55\n", "");
}
END_TEST

/* BUG (tools/run.c): --max-depth=VALUE is parsed with strtoul and no
 * check, so `--max-depth=abc` (or `=-1`, `=10x`) is silently taken as
 * 0 = the default limit.  Expected: a usage error (exit 2) naming the
 * option. */
START_TEST(bug_max_depth_value_is_checked) {
  hali("run '%s' --function=fib --input=3 --max-depth=abc", example("fib.hasm"));
  EXPECT_USAGE("--max-depth");
}
END_TEST

static Suite *suite_cli(void) {
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("run");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, cli_run_fib);
  tcase_add_test(tc, cli_run_default_main);
  tcase_add_test(tc, cli_run_loop_i64);
  tcase_add_test(tc, cli_run_float_chain);
  tcase_add_test(tc, cli_run_every_input_type);
  tcase_add_test(tc, cli_run_binary_module);
  suite_add_tcase(s, tc);

  tc = tcase_create("tools");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, cli_dis);
  tcase_add_test(tc, cli_verify);
  tcase_add_test(tc, cli_corrupt_binary);
  tcase_add_test(tc, cli_version_and_help);
  suite_add_tcase(s, tc);

  tc = tcase_create("errors");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, cli_missing_module_file);
  tcase_add_test(tc, cli_unknown_function);
  tcase_add_test(tc, cli_wrong_number_of_inputs);
  tcase_add_test(tc, cli_bad_input_value);
  tcase_add_test(tc, cli_unknown_input_type);
  tcase_add_test(tc, cli_runtime_failure_backtrace);
  tcase_add_test(tc, cli_stripped_runtime_failure);
  tcase_add_test(tc, cli_asm_errors);
  tcase_add_test(tc, cli_usage_errors);
  suite_add_tcase(s, tc);

  tc = tcase_create("known_bugs");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_add_test(tc, bug_input_leading_zero_is_not_octal);
  tcase_add_test(tc, bug_max_depth_value_is_checked);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite_cli()); }
