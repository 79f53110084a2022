/* Tests for the hali command (tools/hali.c, tools/run.c), run through the
 * shell: exact output of `hali run`, asm/dis/verify, and the error report
 * (`hali: error: CODE: message` plus `  at @fn@pc (file:line)` lines, exit
 * status 1; usage errors exit 2).  Temporary files live in a directory
 * made by mkdtemp for each test case and removed after it (an unchecked
 * fixture, so that the directory goes away even when a test fails).
 *
 * Tests in the "known_bugs" case are regression tests: each was written
 * against a bug (named in its comment) and passes since the fix. */
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

/* Exit 2 (usage) with an error report: a malformed --input or an
 * argument that does not fit the signature is the user's mistake. */
#define EXPECT_USAGE_ERROR(needle)                                             \
  do {                                                                         \
    ck_assert_msg(run.rc == 2, "exit %d, expected 2; stderr: %s", run.rc,      \
                  run.err);                                                    \
    ck_assert_str_eq(run.out, "");                                             \
    ck_assert_msg(strncmp(run.err, "hali: error: ", 13) == 0,                  \
                  "stderr does not start with 'hali: error: ': %s", run.err);  \
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
  const char *const helps[] = {"--help", "-h", "help"};
  for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); ++i) {
    hali("%s", helps[i]);
    ck_assert_msg(run.rc == 0, "hali %s: exit %d", helps[i], run.rc);
    ck_assert_str_eq(run.err, "");
    ck_assert(strncmp(run.out, "usage: hali <command>", 21) == 0);
    const char *const subs[] = {"\n  run MODULE", "\n  asm IN", "\n  dis IN",
                                "\n  verify IN", "\n  isa ", "--version",
                                "--input=i64=", "--function=NAME",
                                "\n  benchmark MODULE", "\n  dump MODULE"};
    for (size_t k = 0; k < sizeof(subs) / sizeof(subs[0]); ++k)
      ck_assert_msg(strstr(run.out, subs[k]) != NULL,
                    "hali %s does not mention \"%s\"", helps[i], subs[k]);
  }
  /* After a command (or as help COMMAND): that command's flags, exit 0,
   * wherever the flag stands. */
  const char *const command_helps[][3] = {
      {"run --help", "usage: hali run MODULE", "  --function=NAME"},
      {"run x.hasm -h --bogus", "usage: hali run MODULE", "  --input=VALUE"},
      {"help run", "usage: hali run MODULE", "(alias: --trace-out)"},
      {"benchmark --help", "usage: hali benchmark",
       "  --benchmark_repetitions=N"},
      {"dump -h", "usage: hali dump MODULE", "  --json"},
      {"asm --help", "usage: hali asm IN.hasm", "  -o, --output=OUT.hbc"},
      {"dis --help", "usage: hali dis", "(alias: --no-locs)"},
      {"verify --help", "usage: hali verify", "  --flagfile=FILE"},
      {"isa --help", "usage: hali isa", "  -h, --help"},
  };
  for (size_t i = 0; i < sizeof(command_helps) / sizeof(command_helps[0]);
       ++i) {
    hali("%s", command_helps[i][0]);
    ck_assert_msg(run.rc == 0, "hali %s: exit %d", command_helps[i][0],
                  run.rc);
    ck_assert_str_eq(run.err, "");
    ck_assert_msg(strncmp(run.out, command_helps[i][1],
                          strlen(command_helps[i][1])) == 0,
                  "hali %s: %s", command_helps[i][0], run.out);
    ck_assert_msg(strstr(run.out, command_helps[i][2]) != NULL,
                  "hali %s does not mention \"%s\": %s", command_helps[i][0],
                  command_helps[i][2], run.out);
  }
  hali("isa");
  ck_assert_int_eq(run.rc, 0);
  ck_assert(strncmp(run.out, "# hali instruction set\n", 23) == 0);
  ck_assert_ptr_nonnull(strstr(run.out, "add.i32"));
}
END_TEST

/* The EXAMPLES section of doc/hali.1 runs as written when pasted into a
 * shell (an unquoted tensor value used to split into several arguments):
 * the block is turned back from roff into shell text and run with `hali`
 * standing for the built tool, in a scratch folder that sees examples/. */
START_TEST(cli_manpage_examples_run) {
  uint8_t *man = NULL;
  size_t n = 0;
  ck_assert_ok(hali_read_file(HALI_SRCDIR "/doc/hali.1", &man, &n));
  char *text = (char *)man;
  text[n - 1] = '\0'; /* the file ends with a newline */
  char *start = strstr(text, "\n.SH EXAMPLES\n.nf\n");
  ck_assert_ptr_nonnull(start);
  start += strlen("\n.SH EXAMPLES\n.nf\n");
  char *end = strstr(start, "\n.fi\n");
  ck_assert_ptr_nonnull(end);
  FILE *f = fopen(tmp("examples.sh"), "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "set -e\n"
          "hali() { '%s' \"$@\"; }\n"
          "cd '%s'\n"
          "ln -s '%s/examples' examples\n"
          "export HALI_EXECUTABLE_PATH='%s/examples'\n",
          HALI_TOOL, tmpdir, HALI_SRCDIR, HALI_BUILDDIR);
  int commands = 0;
  for (const char *p = start; p < end; ++p) {
    if (p[0] == '\\' && p[1] == '-') { /* \- is a hyphen */
      fputc('-', f);
      ++p;
    } else if (p[0] == '\\' && p[1] == 'e') { /* \e is a backslash */
      fputc('\\', f);
      ++p;
    } else {
      if ((p == start || p[-1] == '\n') && strncmp(p, "hali ", 5) == 0)
        ++commands;
      fputc(*p, f);
    }
  }
  fputs("\necho all examples ran\n", f);
  ck_assert_int_eq(fclose(f), 0);
  free(man);
  ck_assert_int_ge(commands, 4);
  char cmd[600], *out = NULL, *err = NULL;
  snprintf(cmd, sizeof(cmd), "sh '%s'", tmp("examples.sh"));
  int rc = hali_test_shell(cmd, &out, &err);
  size_t elen = err ? strlen(err) : 0;
  ck_assert_msg(rc == 0, "the man page's examples failed (exit %d): %.600s",
                rc, err && elen > 600 ? err + elen - 600 : err ? err : "");
  ck_assert_ptr_nonnull(strstr(out, "4xf32=12 24 36 48\n")); /* saxpy */
  ck_assert_ptr_nonnull(strstr(out, "all examples ran\n"));
  free(out);
  free(err);
  unlink(tmp("fib.hbc"));
}
END_TEST

/* The tensor inputs shown by --help work when pasted into a shell. */
START_TEST(cli_help_inputs_paste) {
  hali("--help");
  ck_assert_int_eq(run.rc, 0);
  const char *line = strstr(run.out, "2x3xf32=");
  ck_assert_ptr_nonnull(line);
  while (line > run.out && line[-1] != '\n') --line; /* the whole line */
  const char *eol = strchr(line, '\n');
  write_file(tmp("two.hasm"),
             "func @two(%a: !hal.buffer_view, %b: !hal.buffer_view) -> "
             "(!hal.buffer_view, !hal.buffer_view) {\n"
             "  return %a, %b\n"
             "}\n");
  hali("run '%s' --function=two %.*s", tmp("two.hasm"), (int)(eol - line),
       line);
  EXPECT_RUN(0,
             "result[0]: hal.buffer_view\n2x3xf32=[1 2 3][4 5 6]\n"
             "result[1]: hal.buffer_view\n2x2xi32=[1 2][3 4]\n",
             "");
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
  EXPECT_USAGE_ERROR("hali: error: NOT_FOUND: ");
  ck_assert_ptr_nonnull(
      strstr(run.err, "no function @nope in module @fib (it has @fib @main)\n"));
}
END_TEST

START_TEST(cli_wrong_number_of_inputs) {
  hali("run '%s' --function=fib", example("fib.hasm"));
  EXPECT_USAGE_ERROR("hali: error: INVALID_ARGUMENT: @fib takes 1 argument(s), "
                     "0 --input given; its signature is @fib(i32) -> (i32)\n");
  hali("run '%s' --function=fib --input=1 --input=2", example("fib.hasm"));
  EXPECT_USAGE_ERROR("@fib takes 1 argument(s), 2 --input given");
  hali("run '%s' --input=1", example("fib.hasm"));
  EXPECT_USAGE_ERROR("@main takes 0 argument(s), 1 --input given; its "
                     "signature is @main() -> (i32)\n");
  /* The right count of the wrong type. */
  hali("run '%s' --function=fib --input=i64=3", example("fib.hasm"));
  EXPECT_USAGE_ERROR("@fib argument 0: expected i32, got i64");
}
END_TEST

START_TEST(cli_bad_input_value) {
  const char *fib = example("fib.hasm");
  hali("run '%s' --function=fib --input=abc", fib);
  EXPECT_USAGE_ERROR("hali: error: INVALID_ARGUMENT: --input #0 'abc': 'abc' "
                     "is not a valid i32 (@fib argument 0)\n");
  hali("run '%s' --function=fib --input=99999999999", fib);
  EXPECT_USAGE_ERROR("'99999999999' is not a valid i32");
  hali("run '%s' --function=fib --input=", fib);
  EXPECT_USAGE_ERROR("'' is not a valid i32");
  hali("run '%s' --function=loop --input=i64=1.5", example("loop.hasm"));
  EXPECT_USAGE_ERROR("--input #0 'i64=1.5': '1.5' is not a valid i64");
  hali("run '%s' --function=float_chain --input=i64=99999999999999999999",
       example("float.hasm"));
  EXPECT_USAGE_ERROR("is not a valid i64");
  write_file(tmp("f.hasm"), "func @f(%x: f32, %y: f64) {\n  return\n}\n");
  hali("run '%s' --function=f --input=f32=1.5 --input=f64=2x", tmp("f.hasm"));
  EXPECT_USAGE_ERROR("--input #1 'f64=2x': '2x' is not a valid f64");
  hali("run '%s' --function=f --input=f32=pi --input=f64=2", tmp("f.hasm"));
  EXPECT_USAGE_ERROR("--input #0 'f32=pi': 'pi' is not a valid f32");
}
END_TEST

START_TEST(cli_unknown_input_type) {
  hali("run '%s' --function=fib --input=i33=4", example("fib.hasm"));
  EXPECT_USAGE_ERROR("hali: error: INVALID_ARGUMENT: --input #0 'i33=4': "
                     "unknown type 'i33' (expected i32, i64, f32 or f64)\n");
  hali("run '%s' --function=fib --input='!hal.buffer=4'", example("fib.hasm"));
  EXPECT_USAGE_ERROR("unknown type '!hal.buffer'");
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
  /* --fiber-threads: a tree of spawned fibers joined with fiber.join. */
  write_file(tmp("tree.hasm"),
             "func @tree(%depth: i32) -> i32 {\n"
             "^entry:\n"
             "  %one = const.i32 1\n"
             "  %zero = const.i32 0\n"
             "  %leaf = le.s.i32 %depth, %zero\n"
             "  cond_br %leaf, ^leaf, ^inner\n"
             "^leaf:\n"
             "  return %one\n"
             "^inner:\n"
             "  %d = sub.i32 %depth, %one\n"
             "  %a = fiber.spawn @tree(%d)\n"
             "  %b = fiber.spawn @tree(%d)\n"
             "  %x = fiber.join @tree(%a)\n"
             "  %y = fiber.join @tree(%b)\n"
             "  %s = add.i32 %x, %y\n"
             "  %t = add.i32 %s, %one\n"
             "  return %t\n"
             "}\n");
  hali("run '%s' --function=tree --input=9 --fiber-threads=3", tmp("tree.hasm"));
  EXPECT_RUN(0, "result[0]: i32=1023\n", "");
  hali("run '%s' --function=tree --input=9 --fiber-threads=0", tmp("tree.hasm"));
  EXPECT_RUN(2, "", "hali run: --fiber-threads=0: expected an integer in "
                    "1..64\n");
}
END_TEST

/* A recursion that hits the depth limit prints one line per run of
 * repeated frames, not one per frame (doc/tracing.md, "Backtraces"). */
START_TEST(cli_deep_recursion_backtrace) {
  char want[1024];
  /* A million frames of @fib at its first call: one line.  Read in full
   * (not through |run|'s fixed buffer) to bound the whole report. */
  char cmd[1024], *out = NULL, *err = NULL;
  snprintf(cmd, sizeof(cmd),
           "'%s' run '%s' --function=fib --input=2000000 --max-depth=1000000",
           HALI_TOOL, example("fib.hasm"));
  int rc = hali_test_shell(cmd, &out, &err);
  snprintf(want, sizeof(want),
           "hali: error: RESOURCE_EXHAUSTED: call depth limit of 1000000 "
           "exceeded\n"
           "  at @fib@6 (%s:15) × 1000000\n",
           example("fib.hasm"));
  ck_assert_int_eq(rc, 1);
  ck_assert_str_eq(out, "");
  ck_assert_str_eq(err, want);
  ck_assert_uint_lt(strlen(err), 512);
  free(out);
  free(err);
  /* @main's frame stays visible below the run. */
  hali("run '%s' --function=main --max-depth=5", example("fib.hasm"));
  snprintf(want, sizeof(want),
           "hali: error: RESOURCE_EXHAUSTED: call depth limit of 5 exceeded\n"
           "  at @fib@6 (%1$s:15) × 4\n"
           "  at @main@1 (%1$s:24)\n",
           example("fib.hasm"));
  EXPECT_RUN(1, "", want);
  /* Mutual recursion: the pair is one line. */
  write_file(tmp("pp.hasm"), "func @ping(%n: i32) -> i32 {\n" /*  1 */
                             "  %r = call @pong(%n)\n"        /*  2 */
                             "  return %r\n"                  /*  3 */
                             "}\n"                            /*  4 */
                             "func @pong(%n: i32) -> i32 {\n" /*  5 */
                             "  %r = call @ping(%n)\n"        /*  6 */
                             "  return %r\n"                  /*  7 */
                             "}\n"                            /*  8 */
                             "func @main(%n: i32) -> i32 {\n" /*  9 */
                             "  %r = call @ping(%n)\n"        /* 10 */
                             "  return %r\n"                  /* 11 */
                             "}\n");                          /* 12 */
  hali("run '%s' --function=main --input=1 --max-depth=10", tmp("pp.hasm"));
  snprintf(want, sizeof(want),
           "hali: error: RESOURCE_EXHAUSTED: call depth limit of 10 exceeded\n"
           "  at [@ping@0 (%1$s:2), @pong@0 (%1$s:6)] × 4\n"
           "  at @ping@0 (%1$s:2)\n"
           "  at @main@0 (%1$s:10)\n",
           tmp("pp.hasm"));
  EXPECT_RUN(1, "", want);
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
  EXPECT_USAGE("hali run: unknown flag '--bogus' (hali run --help lists the "
               "flags)\n");
  hali("run");
  EXPECT_USAGE("usage: hali run MODULE");
  hali("run '%s' '%s'", example("fib.hasm"), example("loop.hasm"));
  EXPECT_USAGE("hali run: more than one module");
  hali("asm '%s'", example("fib.hasm"));
  EXPECT_USAGE("usage: hali asm IN.hasm -o OUT.hbc");
  hali("asm '%s' -o '%s' --fast", example("fib.hasm"), tmp("x.hbc"));
  EXPECT_USAGE("hali asm: unknown flag '--fast'");
  ck_assert(!exists(tmp("x.hbc")));
  hali("dis");
  EXPECT_USAGE("usage: hali dis");
  hali("dis --bogus '%s'", example("fib.hasm"));
  EXPECT_USAGE("hali dis: unknown flag '--bogus'");
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

/* ------------------------------------------------------------------------ */
/* hali run with tensors: inputs, outputs, expected outputs, devices. */

static const char id_text[] =
    "func @id(%x: !hal.buffer_view) -> !hal.buffer_view {\n"
    "  return %x\n"
    "}\n"
    "func @two(%x: !hal.buffer_view, %y: f32) -> (!hal.buffer_view, f32) {\n"
    "  return %x, %y\n"
    "}\n";

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

/* Reads |path| into |buf| (at most |cap| bytes); returns the size. */
static size_t read_bytes(const char *path, uint8_t *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  size_t n = fread(buf, 1, cap, f);
  ck_assert_int_eq(fgetc(f), EOF);
  fclose(f);
  return n;
}

static void expect_same_file(const char *a, const char *b) {
  static uint8_t x[8192], y[8192];
  size_t nx = read_bytes(a, x, sizeof x), ny = read_bytes(b, y, sizeof y);
  ck_assert_msg(nx == ny && memcmp(x, y, nx) == 0, "%s and %s differ", a, b);
}

/* Writes a version 1.0 .npy with |header| (padded) and |data_len| bytes of
 * |data| (NULL: 0, 1, 2, ...). */
static void write_npy(const char *path, const char *header, const void *data,
                      size_t data_len) {
  uint8_t buf[512] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  size_t hl = strlen(header), total = 10 + hl + 1;
  size_t pad = (64 - total % 64) % 64;
  buf[8] = (uint8_t)(hl + pad + 1);
  buf[9] = 0;
  memcpy(buf + 10, header, hl);
  memset(buf + 10 + hl, ' ', pad);
  buf[10 + hl + pad] = '\n';
  size_t start = total + pad;
  for (size_t i = 0; i < data_len; ++i)
    buf[start + i] = data ? ((const uint8_t *)data)[i] : (uint8_t)i;
  write_bytes(path, buf, start + data_len);
}

START_TEST(cli_tensor_input_forms) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  hali("run '%s' --function=id '--input=2x3xf32=1 2 3 4 5 6'", m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x3xf32=[1 2 3][4 5 6]\n", "");
  /* Brackets (and commas) only group. */
  hali("run '%s' --function=id '--input=2x2xi32=[1 2][3 4]'", m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x2xi32=[1 2][3 4]\n", "");
  hali("run '%s' --function=id '--input=2x2xi32=[[1, 2], [3, 4]]'", m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x2xi32=[1 2][3 4]\n", "");
  /* Rank 0. */
  hali("run '%s' --function=id --input=f32=1.5", m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\nf32=1.5\n", "");
  /* One value splats over the shape. */
  hali("run '%s' --function=id --input=2x3xi8=-5", m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x3xi8=[-5 -5 -5][-5 -5 -5]\n",
             "");
  /* Empty tensors. */
  hali("run '%s' --function=id --input=0xf32=", m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n0xf32=\n", "");
  /* Raw bytes with the shape given. */
  const float raw[4] = {1.5f, -2.0f, 0.25f, 8.0f};
  write_bytes(tmp("x.bin"), raw, sizeof raw);
  hali("run '%s' --function=id '--input=4xf32=@%s'", m, tmp("x.bin"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xf32=1.5 -2 0.25 8\n", "");
  hali("run '%s' --function=id '--input=2x2xf32=@%s'", m, tmp("x.bin"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x2xf32=[1.5 -2][0.25 8]\n", "");
  /* A .npy file as numpy writes it (version 1.0, '<i4', shape (2, 2)). */
  const int32_t vals[4] = {1, -2, 3, 2147483647};
  write_npy(tmp("x.npy"),
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }",
            vals, sizeof vals);
  hali("run '%s' --function=id '--input=@%s'", m, tmp("x.npy"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x2xi32=[1 -2][3 2147483647]\n",
             "");
  /* A tensor and a scalar together. */
  hali("run '%s' --function=two '--input=2xi64=-1 0x10' --input=f32=0.5", m);
  EXPECT_RUN(0,
             "result[0]: hal.buffer_view\n2xi64=-1 16\nresult[1]: f32=0.5\n",
             "");
}
END_TEST

START_TEST(cli_tensor_output_forms) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  hali("run '%s' --function=id '--input=2x2xi16=1 -2 3 -4' --output=-", m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x2xi16=[1 -2][3 -4]\n", "");
  /* To a file: nothing on stdout. */
  hali("run '%s' --function=id '--input=2x2xi16=1 -2 3 -4' '--output=@%s'", m,
       tmp("o.bin"));
  EXPECT_RUN(0, "", "");
  uint8_t buf[256];
  ck_assert_uint_eq(read_bytes(tmp("o.bin"), buf, sizeof buf), 8);
  static const uint8_t want_bin[8] = {1, 0, 0xfe, 0xff, 3, 0, 0xfc, 0xff};
  ck_assert_mem_eq(buf, want_bin, 8);
  hali("run '%s' --function=id '--input=2x2xi16=1 -2 3 -4' '--output=@%s'", m,
       tmp("o.npy"));
  EXPECT_RUN(0, "", "");
  /* A valid .npy: magic, version 1.0, the header padded with spaces and a
   * newline so that the data starts at a multiple of 64. */
  size_t n = read_bytes(tmp("o.npy"), buf, sizeof buf);
  ck_assert_mem_eq(buf, "\x93NUMPY\x01\x00", 8);
  size_t start = 10 + (size_t)(buf[8] | buf[9] << 8);
  ck_assert_uint_eq(start, 128);
  ck_assert_uint_eq(n, start + 8);
  ck_assert_int_eq(buf[start - 1], '\n');
  static const char hdr[] =
      "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }";
  ck_assert_mem_eq(buf + 10, hdr, sizeof hdr - 1);
  for (size_t i = 10 + sizeof hdr - 1; i < start - 1; ++i)
    ck_assert_int_eq(buf[i], ' ');
  ck_assert_mem_eq(buf + start, want_bin, 8);
  /* Outputs apply in order; results without one print. */
  hali("run '%s' --function=two '--input=2xi32=7 8' --input=f32=2 "
       "'--output=@%s'",
       m, tmp("t.npy"));
  EXPECT_RUN(0, "result[1]: f32=2\n", "");
  hali("run '%s' --function=id '--input=@%s'", m, tmp("t.npy"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2xi32=7 8\n", "");
  hali("run '%s' --function=id --input=2xi32=1 --output=foo", m);
  EXPECT_USAGE("hali run: --output=foo: expected '-' (print), '' (ignore), "
               "@FILE.npy or @FILE.bin\n");
}
END_TEST

START_TEST(cli_expected_output) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  hali("run '%s' --function=id '--input=4xf32=1 2 3 7.5' "
       "'--expected_output=4xf32=1 2 3 7.5'",
       m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xf32=1 2 3 7.5\n[SUCCESS]\n",
             "");
  hali("run '%s' --function=id '--input=4xf32=1 2 3 7.5' "
       "'--expected_output=4xf32=1 2 3 8'",
       m);
  EXPECT_RUN(1,
             "result[0]: hal.buffer_view\n4xf32=1 2 3 7.5\n"
             "[FAILED] result[0]: element at index 3 (7.5) does not match "
             "the expected (8)\n",
             "");
  /* Within the default threshold (0.0001). */
  hali("run '%s' --function=id '--input=2xf32=1 2.00005' "
       "'--expected_output=2xf32=1 2'",
       m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2xf32=1 2.00005\n[SUCCESS]\n",
             "");
  hali("run '%s' --function=id '--input=2xf64=1 2.001' "
       "'--expected_output=2xf64=1 2' --expected_f64_threshold=0.01",
       m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2xf64=1 2.001\n[SUCCESS]\n", "");
  hali("run '%s' --function=id '--input=2xf64=1 2.001' "
       "'--expected_output=2xf64=1 2'",
       m);
  EXPECT_RUN(1,
             "result[0]: hal.buffer_view\n2xf64=1 2.001\n"
             "[FAILED] result[0]: element at index 1 (2.001) does not match "
             "the expected (2)\n",
             "");
  /* Integers compare exactly; shapes and types must match. */
  hali("run '%s' --function=id '--input=2xi32=1 2' "
       "'--expected_output=3xi32=1 2 3'",
       m);
  EXPECT_RUN(1,
             "result[0]: hal.buffer_view\n2xi32=1 2\n"
             "[FAILED] result[0]: metadata 2xi32 does not match the expected "
             "3xi32\n",
             "");
  /* Scalars too, one line per mismatching result. */
  hali("run '%s' --function=two '--input=2xi32=1 2' --input=f32=1.5 "
       "'--expected_output=2xi32=1 2' --expected_output=f32=1.25",
       m);
  EXPECT_RUN(1,
             "result[0]: hal.buffer_view\n2xi32=1 2\nresult[1]: f32=1.5\n"
             "[FAILED] result[1]: f32 (1.5) does not match the expected "
             "(1.25)\n",
             "");
  hali("run '%s' --function=id --input=2xi32=1 --expected_f32_threshold=-1",
       m);
  EXPECT_USAGE("hali run: --expected_f32_threshold=-1: expected a threshold "
               ">= 0\n");
}
END_TEST

START_TEST(cli_print_max_elements) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  hali("run '%s' --function=id '--input=10xi32=1 2 3 4 5 6 7 8 9 10' "
       "--print_max_elements=3",
       m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n10xi32=1 2 3...\n", "");
  hali("run '%s' --function=id '--input=2x3xi32=[1 2 3][4 5 6]' "
       "--print_max_elements=4",
       m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2x3xi32=[1 2 3][4...\n", "");
  /* Exactly the limit: no ellipsis. */
  hali("run '%s' --function=id '--input=3xi32=1 2 3' --print_max_elements=3",
       m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n3xi32=1 2 3\n", "");
  /* The default is 1024. */
  hali("run '%s' --function=id --input=1025xi8=1", m);
  ck_assert_int_eq(run.rc, 0);
  ck_assert_msg(strlen(run.out) == strlen("result[0]: hal.buffer_view\n") +
                                       strlen("1025xi8=") + 1024 * 2 - 1 +
                                       3 + 1,
                "output: %s", run.out);
  ck_assert_msg(strstr(run.out, " 1 1...\n") != NULL, "%s", run.out);
  hali("run '%s' --function=id --input=2xi32=1 --print_max_elements=x", m);
  EXPECT_USAGE("hali run: --print_max_elements=x: is not a count\n");
}
END_TEST

START_TEST(cli_devices_and_workers) {
  for (int w = 1; w <= 3; ++w) {
    hali("run '%s' --function=fill --input=i64=5 --input=7 "
         "--device=local-task --workers=%d",
         example("fill.hasm"), w);
    EXPECT_RUN(0, "result[0]: hal.buffer_view\n5xi32=7 7 7 7 7\n", "");
    hali("run '%s' --function=saxpy --input=f32=2 "
         "'--input=100xf32=1' '--input=100xf32=10' --device=local-task "
         "--workers=%d '--expected_output=100xf32=12'",
         example("saxpy_bytecode.hasm"), w);
    ck_assert_msg(run.rc == 0 && strstr(run.out, "[SUCCESS]\n"), "%s%s",
                  run.out, run.err);
  }
  hali("run '%s' --function=fill --input=i64=2 --input=7 --device=local-sync",
       example("fill.hasm"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2xi32=7 7\n", "");
  hali("run '%s' --function=fill --input=i64=2 --input=7 --device=gpu",
       example("fill.hasm"));
  EXPECT_USAGE("hali run: --device=gpu: unknown device 'gpu' (known: "
               "local-sync, local-task)\n");
  hali("run '%s' --function=fill --input=i64=2 --input=7 --workers=0",
       example("fill.hasm"));
  EXPECT_USAGE("hali run: --workers=0: expected an integer in 1..1024\n");
}
END_TEST

START_TEST(cli_tensor_input_errors) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  hali("run '%s' --function=id '--input=2x3xf32=1 2 3'", m);
  EXPECT_USAGE_ERROR("--input #0: 3 value(s) given, the shape holds 6");
  hali("run '%s' --function=id '--input=2xf32=1 2 3'", m);
  EXPECT_USAGE_ERROR("--input #0: more than the 2 values the shape holds");
  hali("run '%s' --function=id '--input=2xq32=1 2'", m);
  EXPECT_USAGE_ERROR("unknown element type 'q32'");
  ck_assert_msg(strstr(run.err, "--input #0: in '2xq32'"), "%s", run.err);
  hali("run '%s' --function=id '--input=2xf32=1 x'", m);
  EXPECT_USAGE_ERROR("--input #0: value 1 'x' is not a valid f32");
  hali("run '%s' --function=id --input=2xi8=300", m);
  EXPECT_USAGE_ERROR("--input #0: value 0 '300' is not a valid i8");
  hali("run '%s' --function=id --input=2xu8=-1", m);
  EXPECT_USAGE_ERROR("--input #0: value 0 '-1' is not a valid u8");
  hali("run '%s' --function=id --input=2xf32", m);
  EXPECT_USAGE_ERROR("--input #0: '2xf32' is not SHAPExTYPE=VALUES");
  /* A raw file of the wrong size, or none. */
  write_bytes(tmp("w.bin"), "abcdefgh", 8);
  hali("run '%s' --function=id '--input=4xf32=@%s'", m, tmp("w.bin"));
  EXPECT_USAGE_ERROR("has 8 bytes but the shape needs 16");
  hali("run '%s' --function=id '--input=4xf32=@%s'", m, tmp("none.bin"));
  EXPECT_USAGE_ERROR("cannot open");
  hali("run '%s' --function=id '--input=@%s'", m, tmp("none.npy"));
  EXPECT_USAGE_ERROR("cannot open");
}
END_TEST

START_TEST(cli_malformed_npy) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  char p[512];
  snprintf(p, sizeof p, "%s", tmp("bad.npy"));
  write_bytes(p, "\x93NUMPZ\x01\x00\x10\x00{}", 12);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: bad magic (expected \\x93NUMPY)");
  write_bytes(p, "\x93NUM", 4);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: bad magic");
  /* The header length runs past the end of the file. */
  write_bytes(p, "\x93NUMPY\x01\x00\x76\x00{'descr'", 17);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: header runs past the end of the file");
  /* Version 2 needs a 4-byte header length. */
  write_bytes(p, "\x93NUMPY\x02\x00\x10\x00", 10);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: truncated header");
  write_bytes(p, "\x93NUMPY\x09\x00\x10\x00", 10);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: unsupported format version");
  write_npy(p, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
            NULL, 8);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: big-endian data is not supported");
  /* A single byte has no byte order: '>i1' is fine. */
  write_npy(p, "{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }",
            NULL, 2);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n2xi8=0 1\n", "");
  write_npy(p, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
            NULL, 16);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: only C order (fortran_order: False) "
               "is supported");
  write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
            NULL, 12);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR(".npy data is 12 bytes but the shape needs 16");
  write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
            NULL, 20);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR(".npy data is 20 bytes but the shape needs 16");
  write_npy(p, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
            NULL, 16);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("unsupported .npy element type");
  write_npy(p, "{'fortran_order': False, 'shape': (2,), }", NULL, 8);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: no 'descr' in the header");
  write_npy(p, "{'descr': '<f4', 'fortran_order': False, }", NULL, 8);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: no 'shape' tuple in the header");
  write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }",
            NULL, 8);
  hali("run '%s' --function=id '--input=@%s'", m, p);
  EXPECT_USAGE_ERROR("not a valid .npy file: bad shape");
}
END_TEST

/* Every element type through .npy and raw files: what --output writes,
 * --input reads back, byte for byte. */
static const struct {
  const char *type;
  const char *values; /* four values */
  const char *printed; /* as hali prints them */
  uint8_t bytes[32];   /* little-endian */
  size_t size;
  bool npy_keeps_type; /* .npy has an exact descr for it */
} k_types[] = {
    {"i1", "0 1 1 0", "0 1 1 0", {0, 1, 1, 0}, 4, false},
    {"i8", "-128 127 -1 0", "-128 127 -1 0", {0x80, 0x7f, 0xff, 0}, 4, true},
    {"i16", "-32768 32767 -1 0", "-32768 32767 -1 0",
     {0, 0x80, 0xff, 0x7f, 0xff, 0xff, 0, 0}, 8, true},
    {"i32", "-2147483648 2147483647 -1 0", "-2147483648 2147483647 -1 0",
     {0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff},
     16, true},
    {"i64", "-9223372036854775808 9223372036854775807 -1 0",
     "-9223372036854775808 9223372036854775807 -1 0",
     {0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
     32, true},
    {"si8", "-128 127 -1 0", "-128 127 -1 0", {0x80, 0x7f, 0xff, 0}, 4, false},
    {"si16", "-32768 32767 -1 0", "-32768 32767 -1 0",
     {0, 0x80, 0xff, 0x7f, 0xff, 0xff, 0, 0}, 8, false},
    {"si32", "-2147483648 2147483647 -1 0", "-2147483648 2147483647 -1 0",
     {0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff},
     16, false},
    {"si64", "-9223372036854775808 9223372036854775807 -1 0",
     "-9223372036854775808 9223372036854775807 -1 0",
     {0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
     32, false},
    {"u8", "0 255 1 0", "0 255 1 0", {0, 0xff, 1, 0}, 4, true},
    {"u16", "0 65535 1 0", "0 65535 1 0", {0, 0, 0xff, 0xff, 1, 0, 0, 0}, 8,
     true},
    {"u32", "0 4294967295 1 0", "0 4294967295 1 0",
     {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0}, 16, true},
    {"u64", "0 18446744073709551615 1 0", "0 18446744073709551615 1 0",
     {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      1},
     32, true},
    {"bool", "0 1 1 0", "0 1 1 0", {0, 1, 1, 0}, 4, true},
    {"f16", "65504 -0.5 0.000061035156 -0", "6.55e+04 -0.5 6.104e-05 -0",
     {0xff, 0x7b, 0x00, 0xb8, 0x00, 0x04, 0x00, 0x80}, 8, true},
    {"bf16", "3.140625 -1e38 0.5 -0", "3.14 -1e+38 0.5 -0",
     {0x49, 0x40, 0x96, 0xfe, 0x00, 0x3f, 0x00, 0x80}, 8, true},
    {"f32", "3.4028235e+38 -1.5 1e-45 -0", "3.4028235e+38 -1.5 1e-45 -0",
     {0xff, 0xff, 0x7f, 0x7f, 0, 0, 0xc0, 0xbf, 1, 0, 0, 0, 0, 0, 0, 0x80},
     16, true},
    {"f64", "1.7976931348623157e+308 -1.5 5e-324 -0",
     "1.7976931348623157e+308 -1.5 5e-324 -0",
     {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xef, 0x7f, 0, 0, 0, 0, 0, 0, 0xf8,
      0xbf, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80},
     32, true},
};

START_TEST(cli_raw_round_trip_every_type) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; ++i) {
    const char *t = k_types[i].type;
    char want[256];
    snprintf(want, sizeof want, "result[0]: hal.buffer_view\n4x%s=%s\n", t,
             k_types[i].printed);
    hali("run '%s' --function=id '--input=4x%s=%s'", m, t, k_types[i].values);
    EXPECT_RUN(0, want, "");
    hali("run '%s' --function=id '--input=4x%s=%s' '--output=@%s'", m, t,
         k_types[i].values, tmp("a.bin"));
    EXPECT_RUN(0, "", "");
    uint8_t buf[64];
    size_t n = read_bytes(tmp("a.bin"), buf, sizeof buf);
    ck_assert_msg(n == k_types[i].size &&
                      memcmp(buf, k_types[i].bytes, n) == 0,
                  "%s: raw output bytes differ", t);
    hali("run '%s' --function=id '--input=4x%s=@%s' '--output=@%s'", m, t,
         tmp("a.bin"), tmp("b.bin"));
    EXPECT_RUN(0, "", "");
    expect_same_file(tmp("a.bin"), tmp("b.bin"));
    /* The printed values read back as the same bits. */
    hali("run '%s' --function=id '--input=4x%s=%s' '--output=@%s'", m, t,
         k_types[i].printed, tmp("c.bin"));
    EXPECT_RUN(0, "", "");
    expect_same_file(tmp("a.bin"), tmp("c.bin"));
  }
}
END_TEST

START_TEST(cli_npy_round_trip_every_type) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; ++i) {
    const char *t = k_types[i].type;
    if (strcmp(t, "bf16") == 0) continue; /* known_bugs: bug_bf16_npy */
    hali("run '%s' --function=id '--input=4x%s=%s' '--output=@%s'", m, t,
         k_types[i].values, tmp("a.npy"));
    EXPECT_RUN(0, "", "");
    uint8_t buf[256];
    size_t n = read_bytes(tmp("a.npy"), buf, sizeof buf);
    size_t start = 10 + (size_t)(buf[8] | buf[9] << 8);
    ck_assert_uint_eq(start % 64, 0);
    ck_assert_msg(n == start + k_types[i].size &&
                      memcmp(buf + start, k_types[i].bytes,
                             k_types[i].size) == 0,
                  "%s: .npy data bytes differ", t);
    hali("run '%s' --function=id '--input=@%s' '--output=@%s'", m,
         tmp("a.npy"), tmp("b.npy"));
    EXPECT_RUN(0, "", "");
    expect_same_file(tmp("a.npy"), tmp("b.npy"));
    hali("run '%s' --function=id '--input=@%s'", m, tmp("a.npy"));
    ck_assert_int_eq(run.rc, 0);
    char want[256];
    snprintf(want, sizeof want, "=%s\n", k_types[i].printed);
    ck_assert_msg(strstr(run.out, want) != NULL, "%s: %s", t, run.out);
    if (k_types[i].npy_keeps_type) {
      snprintf(want, sizeof want, "result[0]: hal.buffer_view\n4x%s=%s\n", t,
               k_types[i].printed);
      ck_assert_str_eq(run.out, want);
    }
  }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The HAL examples. */

START_TEST(cli_example_fill) {
  hali("run '%s' --function=fill --input=i64=5 --input=7",
       example("fill.hasm"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n5xi32=7 7 7 7 7\n", "");
  hali("run '%s' --function=fill --input=i64=0 --input=7",
       example("fill.hasm"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n0xi32=\n", "");
  hali("run '%s' --function=fill --input=i64=3 --input=-1 "
       "'--expected_output=3xi32=-1 -1 -1'",
       example("fill.hasm"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n3xi32=-1 -1 -1\n[SUCCESS]\n", "");
}
END_TEST

START_TEST(cli_example_sieve) {
  static const struct {
    const char *n, *count;
  } k[] = {{"100", "25"}, {"2", "0"},  {"1000000", "78498"}, {"0", "0"},
           {"1", "0"},    {"3", "1"},  {"4", "2"},           {"-5", "0"}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    hali("run '%s' --function=sieve --input=i64=%s", example("sieve.hasm"),
         k[i].n);
    char want[64];
    snprintf(want, sizeof want, "result[0]: i64=%s\n", k[i].count);
    EXPECT_RUN(0, want, "");
  }
}
END_TEST

START_TEST(cli_example_saxpy) {
  static const char *const forms[] = {"bytecode", "native", "ffi"};
  for (size_t i = 0; i < 3; ++i) {
    char name[64];
    snprintf(name, sizeof name, "saxpy_%s.hasm", forms[i]);
    hali("run '%s' --function=saxpy --input=f32=2 '--input=4xf32=1 2 3 4' "
         "'--input=4xf32=10 20 30 40' '--executable-path=%s/examples'",
         example(name), HALI_BUILDDIR);
    EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xf32=12 24 36 48\n", "");
    hali("run '%s' --function=saxpy --input=f32=2 '--input=4xf32=1 2 3 4' "
         "'--input=3xf32=10 20 30' '--executable-path=%s/examples'",
         example(name), HALI_BUILDDIR);
    EXPECT_ERROR("y must be an f32 vector as long as x: view is 3xf32, "
                 "expected 4xf32");
  }
}
END_TEST

/* BUG (tools/run.c, hali_tool_run): --expected_f32_threshold is told
 * apart from --expected_f64_threshold by `a[13] == '3'`, but a[13] is the
 * '2' of "f32" (a[12] is the '3'), so --expected_f32_threshold=T sets the
 * f64 threshold and the f32 one stays 0.0001.  Expected: 7.5 vs 8 passes
 * with an f32 threshold of 0.5, and the f32 flag leaves f64 alone. */
START_TEST(bug_expected_f32_threshold_sets_f32) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  hali("run '%s' --function=id '--input=4xf32=1 2 3 7.5' "
       "'--expected_output=4xf32=1 2 3 8' --expected_f32_threshold=0.5",
       m);
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xf32=1 2 3 7.5\n[SUCCESS]\n",
             "");
  hali("run '%s' --function=id '--input=2xf64=1 2.5' "
       "'--expected_output=2xf64=1 2' --expected_f32_threshold=1",
       m);
  EXPECT_RUN(1,
             "result[0]: hal.buffer_view\n2xf64=1 2.5\n"
             "[FAILED] result[0]: element at index 1 (2.5) does not match "
             "the expected (2)\n",
             "");
}
END_TEST

/* BUG (tools/tensor.c, hali_tensor_write_npy): a bf16 result cannot be
 * written as .npy ("bf16 has no .npy equivalent"), and tools/run.c has
 * already created (and leaves behind) an empty file by then.  The HAL
 * issue asks every npy round trip to read back exactly what was written,
 * for every supported element type.  Expected: the file is written in a
 * form hali reads back as the same 4xbf16 (numpy has no bf16 descr, so
 * this needs a documented convention), and a failed --output leaves no
 * empty file behind. */
START_TEST(bug_bf16_npy_round_trip) {
  write_file(tmp("id.hasm"), id_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("id.hasm"));
  hali("run '%s' --function=id '--input=4xbf16=3.140625 -1e38 0.5 -0' "
       "'--output=@%s'",
       m, tmp("a.npy"));
  EXPECT_RUN(0, "", "");
  hali("run '%s' --function=id '--input=@%s'", m, tmp("a.npy"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xbf16=3.14 -1e+38 0.5 -0\n",
             "");
}
END_TEST

/* Runs `timeout 3 hali ARGS` (for programs that may hang). */
static void hali_timeout(const char *fmt, ...) HALI_PRINTF(1, 2);
static void hali_timeout(const char *fmt, ...) {
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "timeout 3 '%s' %s", HALI_TOOL, args);
  char *out = NULL, *err = NULL;
  run.rc = hali_test_shell(cmd, &out, &err);
  snprintf(run.out, sizeof(run.out), "%s", out ? out : "");
  snprintf(run.err, sizeof(run.err), "%s", err ? err : "");
  free(out);
  free(err);
}

static const char pending_text[] =
    "func @fails_with_pending_work() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %go = hal.fence.create %device\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %go, %done, []\n"
    "  %code = const.i32 3\n"
    "  fail %code, \"early exit\"\n"
    "}\n"
    "func @awaits_itself() -> i32 {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  %forever = const.i64 -1\n"
    "  %st = hal.fence.await %f, %forever\n"
    "  return %st\n"
    "}\n";

/* BUG (tools/run.c with hal/device.c): a function that fails while a
 * queue submission still waits on a fence only that function could have
 * signalled makes `hali run` hang forever, silently: run() releases the
 * device (which drains the queue, waiting for the parked submission)
 * before it reports the error.  Expected: "INVALID_ARGUMENT: early exit"
 * on stderr and exit 1 (the orphaned submission failed or abandoned, or
 * at least the error printed first), on both devices. */
START_TEST(bug_failure_with_pending_queue_work_hangs) {
  write_file(tmp("pending.hasm"), pending_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("pending.hasm"));
  hali_timeout("run '%s' --function=fails_with_pending_work", m);
  EXPECT_ERROR("INVALID_ARGUMENT: early exit");
  hali_timeout("run '%s' --function=fails_with_pending_work "
               "--device=local-task",
               m);
  EXPECT_ERROR("INVALID_ARGUMENT: early exit");
}
END_TEST

/* BUG (vm/hal_ops.c, hal.fence.await): awaiting forever a fence that
 * nothing can signal (here: the program's own, never signalled) blocks
 * the thread for ever.  DESIGN §4: "Nothing hangs silently: when every
 * fiber waits and no queue work can make progress, the context reports a
 * deadlock naming what each fiber waits on."  Expected: exit 1 with an
 * error that says deadlock. */
START_TEST(bug_await_on_unsignallable_fence_hangs) {
  write_file(tmp("pending.hasm"), pending_text);
  char m[512];
  snprintf(m, sizeof m, "%s", tmp("pending.hasm"));
  hali_timeout("run '%s' --function=awaits_itself", m);
  EXPECT_ERROR("deadlock");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Load-time pass options of run and dis, and arguments the command line
 * cannot give (the tool goes through the public API for all of them). */

START_TEST(cli_run_pass_options) {
  const char *t = example("mlp_tensor_rodata.hasm");
  hali("run '%s'", t);
  ck_assert_int_eq(run.rc, 0);
  char want[sizeof(run.out)];
  snprintf(want, sizeof(want), "%s", run.out);
  ck_assert_ptr_nonnull(strstr(want, "result[0]: hal.buffer_view\n"));
  /* The whole pipeline, named: the same result. */
  hali("run '%s' --passes=func-conversion,materialize-interfaces,"
       "stream-to-hal",
       t);
  EXPECT_RUN(0, want, "");
  /* Not all of it: the tensor level is left and does not verify. */
  hali("run '%s' --passes=func-conversion", t);
  EXPECT_ERROR("is a tensor: tensor-level functions are lowered by the "
               "load-time passes before a module runs");
  hali("run '%s' --no-passes", t);
  EXPECT_ERROR("verify: @main: register 0 is a tensor");
  char where[700];
  snprintf(where, sizeof(where), "\n  while loading %s\n", t);
  hali("run '%s' --passes=bogus", t);
  EXPECT_ERROR("hali: error: INVALID_ARGUMENT: unknown pass 'bogus' "
               "(passes: func-conversion, materialize-interfaces, "
               "stream-to-hal; or all)");
  ck_assert_msg(strstr(run.err, where) != NULL, "%s", run.err);
  /* A HAL-level module needs no pass. */
  hali("run '%s' --function=fib --input=10 --no-passes", example("fib.hasm"));
  EXPECT_RUN(0, "result[0]: i32=55\n", "");
}
END_TEST

START_TEST(cli_dis_pass_options) {
  char t[600];
  snprintf(t, sizeof(t), "%s/tests/passes/fc_scalars.hasm", HALI_SRCDIR);
  /* As written: the tensor level, printed once it loads. */
  hali("dis --no-locs '%s'", t);
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "tensor<"));
  ck_assert_ptr_null(strstr(run.out, "@f$async"));
  /* --no-passes skips the verifier of that check. */
  hali("dis --no-locs --no-passes '%s'", t);
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "tensor<"));
  /* --passes prints the IR after them, unverified unless all ran. */
  hali("dis --no-locs --passes=func-conversion '%s'", t);
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "func @f$async("));
  hali("dis --no-locs --passes=nope '%s'", t);
  EXPECT_ERROR("unknown pass 'nope'");
  hali("verify '%s'", t);
  char want[700];
  snprintf(want, sizeof(want),
           "%s: ok (1 function written; the load-time passes added 1: "
           "@f$async)\n",
           t);
  EXPECT_RUN(0, want, "");
  hali("verify '%s'", example("mlp_tensor_rodata.hasm"));
  snprintf(want, sizeof(want),
           "%s: ok (3 functions written; the load-time passes added 3: "
           "@globals$storage @main$async @mlp$async)\n",
           example("mlp_tensor_rodata.hasm"));
  EXPECT_RUN(0, want, "");
  /* --after=all: every pass in order, each headed; the last copy is what
   * --after=stream-to-hal prints. */
  hali("dis --no-locs --after=stream-to-hal '%s'", t);
  ck_assert_int_eq(run.rc, 0);
  char *last = strdup(run.out);
  hali("dis --no-locs --after=all '%s'", t);
  ck_assert_int_eq(run.rc, 0);
  const char *h1 = strstr(run.out, "# after pass 1 of 3: func-conversion\n");
  const char *h2 =
      strstr(run.out, "\n# after pass 2 of 3: materialize-interfaces\n");
  const char *h3 = strstr(run.out, "\n# after pass 3 of 3: stream-to-hal\n");
  ck_assert(h1 == run.out && h2 > h1 && h3 > h2);
  ck_assert_str_eq(h3 + strlen("\n# after pass 3 of 3: stream-to-hal\n"),
                   last);
  free(last);
}
END_TEST

/* Named HAL constants from the command line: dis prints names, bad names
 * are errors at their line naming the valid ones. */
START_TEST(cli_named_constants) {
  hali("dis --no-locs '%s'", example("fill.hasm"));
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_nonnull(strstr(
      run.out, "%memory = const.i32 memory(device_local|host_visible|"
               "device_visible)\n"));
  ck_assert_ptr_nonnull(strstr(run.out, "%one_shot = const.i32 mode(one_shot)\n"));
  write_file(tmp("bad.hasm"), "func @f() {\n"
                              "  %u = const.i32 usage(transfer|mapings)\n"
                              "  return\n"
                              "}\n");
  hali("asm '%s' -o '%s'", tmp("bad.hasm"), tmp("bad.hbc"));
  EXPECT_ERROR("bad.hasm:2:33: unknown buffer usage 'mapings' in usage(...): "
               "expected names joined by '|' of none, transfer, dispatch, "
               "mapping, constant");
}
END_TEST

START_TEST(cli_run_argument_not_on_command_line) {
  write_file(tmp("fence.hasm"), "func @f(%x: !hal.fence) {\n"
                                "  return\n"
                                "}\n");
  hali("run '%s' --function=f --input=1", tmp("fence.hasm"));
  EXPECT_USAGE_ERROR("hali: error: INVALID_ARGUMENT: --input #0: @f takes "
                     "!hal.fence, which cannot be given on the command "
                     "line\n");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Flags (tools/flags.c): getopt_long forms, aliases, suggestions, flag
 * files; inputs typed by the signature; several modules and stdin;
 * f$async; limits; files that are not modules; benchmark; dump. */

/* A file holding |text| in the test's directory; returns its path in a
 * static buffer of its own (|slot| 0..3). */
static const char *put(int slot, const char *name, const char *text) {
  static char bufs[4][512];
  snprintf(bufs[slot], sizeof(bufs[0]), "%s", tmp(name));
  write_file(bufs[slot], text);
  return bufs[slot];
}

START_TEST(cli_flag_forms) {
  const char *fib = example("fib.hasm");
  const char *const forms[] = {
      "run '%s' --function=fib --input=10",
      "run '%s' --function fib --input 10",
      "run --function fib '%s' --input=10",     /* flags around the module */
      "run '%s' --func=fib --inp=10",           /* unique prefixes */
      "run '%s' --function=@fib --input=i32=10",
      "run --function=fib --input=10 -- '%s'",  /* -- ends the flags */
  };
  for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); ++i) {
    char args[1024], *at = strstr(forms[i], "%s");
    snprintf(args, sizeof(args), "%.*s%s%s", (int)(at - forms[i]), forms[i],
             fib, at + 2);
    hali("%s", args);
    ck_assert_msg(run.rc == 0 && strcmp(run.out, "result[0]: i32=55\n") == 0,
                  "%s: exit %d, %s%s", forms[i], run.rc, run.out, run.err);
  }
  /* Flags after the module even where getopt would stop at it. */
  hali("run '%s' --function=fib --input=10 2>&1 | grep -q 55 && "
       "POSIXLY_CORRECT=1 '%s' run '%s' --function=fib --input=10",
       fib, HALI_TOOL, fib);
  EXPECT_RUN(0, "result[0]: i32=55\n", "");
  /* After --, a flag-like word is a module name. */
  hali("run '%s' --function=fib --input=10 -- --input=3", fib);
  EXPECT_USAGE("more than one module ('--input=3')");
  /* Aliases: the kebab-case names and IREE's older spelling. */
  write_file(tmp("id.hasm"), "func @id(%x: !hal.buffer_view) -> "
                             "!hal.buffer_view {\n  return %x\n}\n");
  const char *const limits[] = {"--output_max_element_count=2",
                                "--print_max_elements=2",
                                "--print-max-elements 2",
                                "--print_max_element_count=2"};
  for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); ++i) {
    hali("run '%s' --function=id '--input=4xi32=1 2 3 4' %s", tmp("id.hasm"),
         limits[i]);
    EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xi32=1 2...\n", "");
  }
  hali("run '%s' --function=fib --input=3 --max-depth 5 --trace-values=3",
       fib);
  EXPECT_RUN(0, "result[0]: i32=2\n", "");
  hali("dis --no-locs '%s'", fib);
  ck_assert_int_eq(run.rc, 0);
  char with_alias[sizeof(run.out)];
  snprintf(with_alias, sizeof(with_alias), "%s", run.out);
  hali("dis '%s' --no_locs", fib);
  ck_assert_int_eq(run.rc, 0);
  ck_assert_str_eq(run.out, with_alias);
  ck_assert_ptr_null(strstr(run.out, "loc("));
  /* asm: -o FILE, -oFILE and --output=FILE. */
  const char *const outs[] = {"-o '%s'", "'-o%s'", "--output='%s'",
                              "--output '%s'"};
  for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); ++i) {
    char flag[600], *at = strstr(outs[i], "%s");
    snprintf(flag, sizeof(flag), "%.*s%s%s", (int)(at - outs[i]), outs[i],
             tmp("f.hbc"), at + 2);
    unlink(tmp("f.hbc"));
    hali("asm '%s' %s", fib, flag);
    EXPECT_RUN(0, "", "");
    ck_assert_msg(exists(tmp("f.hbc")), "%s", flag);
  }
  hali("run '%s' --function=fib --input=6", tmp("f.hbc"));
  EXPECT_RUN(0, "result[0]: i32=8\n", "");
}
END_TEST

START_TEST(cli_flag_errors) {
  const char *fib = example("fib.hasm");
  hali("run '%s' --fucntion=fib --input=1", fib);
  EXPECT_USAGE("hali run: unknown flag '--fucntion'; did you mean "
               "--function? (hali run --help lists the flags)\n");
  hali("run '%s' --expected-ouptut=1", fib);
  EXPECT_USAGE("did you mean --expected_output?");
  hali("run '%s' --trace-otu=x", fib);
  EXPECT_USAGE("did you mean --trace_out?");
  hali("run '%s' --zzzzzzzz", fib);
  EXPECT_USAGE("hali run: unknown flag '--zzzzzzzz' (hali run --help");
  hali("run '%s' --trace_", fib);
  EXPECT_USAGE("hali run: '--trace_' is ambiguous; it could be "
               "--trace_format --trace_filter --trace_out --trace_values\n");
  hali("run '%s' --function", fib);
  EXPECT_USAGE("hali run: --function requires a value (--function=NAME)\n");
  hali("run '%s' --no_passes=1", fib);
  EXPECT_USAGE("hali run: --no_passes takes no value ('--no_passes=1')\n");
  hali("run '%s' -x", fib);
  EXPECT_USAGE("hali run: unknown flag '-x'");
  hali("asm '%s' -o", fib);
  EXPECT_USAGE("hali asm: --output requires a value (--output=OUT.hbc)\n");
  /* Values are checked where they are parsed, naming the flag as spelt. */
  hali("run '%s' --max-depth=abc", fib);
  EXPECT_USAGE("hali run: --max-depth=abc: expected an integer in "
               "1..1000000\n");
  hali("run '%s' --fuel=0", fib);
  EXPECT_USAGE("hali run: --fuel=0: is not a count above 0\n");
  hali("run '%s' --fuel=-3", fib);
  EXPECT_USAGE("hali run: --fuel=-3: is not a count above 0\n");
  hali("run '%s' --max_memory=12Q", fib);
  EXPECT_USAGE("hali run: --max_memory=12Q: expected a size in bytes");
  hali("run '%s' --max_memory=99999999999T", fib);
  EXPECT_USAGE("hali run: --max_memory=99999999999T: the size overflows");
  hali("run '%s' --timeout=soon", fib);
  EXPECT_USAGE("hali run: --timeout=soon: expected a duration");
  hali("run '%s' --timeout=0", fib);
  EXPECT_USAGE("hali run: --timeout=0: expected a duration above 0\n");
  hali("run '%s' --output=x.npy", fib);
  EXPECT_USAGE("hali run: --output=x.npy: expected '-' (print), '' (ignore)");
  hali("run '%s' --module=", fib);
  EXPECT_USAGE("hali run: --module=: expected a module file");
  hali("dump");
  EXPECT_USAGE("usage: hali dump MODULE");
  hali("benchmark");
  EXPECT_USAGE("usage: hali benchmark MODULE");
  hali("benchmark '%s' --benchmark_repetitions=0", fib);
  EXPECT_USAGE("--benchmark_repetitions=0: expected an integer in");
  hali("benchmark '%s' --benchmark_format=xml", fib);
  EXPECT_USAGE("--benchmark_format=xml: expected console or json\n");
  hali("benchmark '%s' --function=fib --input=1 --output=-", fib);
  EXPECT_USAGE("--output and --expected_output are hali run's");
  hali("rnu");
  EXPECT_USAGE("hali: unknown command 'rnu'; did you mean run?");
  hali("--input=3 run");
  EXPECT_USAGE("hali: '--input=3' before the command: flags go after it");
  /* The man page's unquoted example: the stray words are named. */
  hali("run '%s' --function=id --input=4xf32=1 2 3 4", fib);
  EXPECT_USAGE("more than one module ('2'): give each further one with "
               "--module=FILE, and quote values with blanks");
}
END_TEST

START_TEST(cli_flagfile) {
  const char *fib = example("fib.hasm");
  /* One argument per line, no quoting; blanks around and comments go. */
  write_file(tmp("id.hasm"), "func @id(%x: !hal.buffer_view) -> "
                             "!hal.buffer_view {\n  return %x\n}\n");
  char text[1024];
  snprintf(text, sizeof(text),
           "# the identity\n"
           "\n"
           "  %s  \n"
           "--function=id\r\n"
           "--input=4xf32=1 2 3 4\n"
           "--flagfile=%s\n",
           tmp("id.hasm"), tmp("more.flags"));
  write_file(tmp("run.flags"), text);
  write_file(tmp("more.flags"), "--output_max_element_count\n3\n");
  hali("run --flagfile='%s'", tmp("run.flags"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xf32=1 2 3...\n", "");
  hali("run --flagfile '%s' --output_max_element_count=9", tmp("run.flags"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\n4xf32=1 2 3 4\n", "");
  hali("run --flagfile='%s'", tmp("missing.flags"));
  EXPECT_USAGE("hali run: --flagfile=");
  ck_assert_ptr_nonnull(strstr(run.err, "missing.flags: cannot open: No such "
                                        "file or directory\n"));
  hali("run '%s' --flagfile", fib);
  EXPECT_USAGE("hali run: --flagfile requires a value (--flagfile=FILE)\n");
  snprintf(text, sizeof(text), "--flagfile=%s\n", tmp("loop.flags"));
  write_file(tmp("loop.flags"), text);
  hali("run '%s' --flagfile='%s'", fib, tmp("loop.flags"));
  EXPECT_USAGE("flag files nest deeper than 8 (does one include itself?)\n");
  write_file(tmp("bad.flags"), "--bogus\n");
  hali("run '%s' --flagfile='%s'", fib, tmp("bad.flags"));
  EXPECT_USAGE("hali run: unknown flag '--bogus'");
  /* After --, --flagfile is a word like any other. */
  hali("verify -- --flagfile=x");
  EXPECT_ERROR("--flagfile=x: cannot open");
}
END_TEST

static const char typed_text[] =
    "func @f(%a: i64, %b: f32, %c: f64, %d: i32) -> (i64, f32, f64, i32) {\n"
    "  return %a, %b, %c, %d\n"
    "}\n";

START_TEST(cli_scalars_typed_by_signature) {
  const char *m = put(0, "typed.hasm", typed_text);
  hali("run '%s' --function=f --input=4 --input=4 --input=4 --input=4", m);
  EXPECT_RUN(0, "result[0]: i64=4\nresult[1]: f32=4\nresult[2]: f64=4\n"
                "result[3]: i32=4\n", "");
  hali("run '%s' --function=f --input=-0x10 --input=2.5 --input=1e300 "
       "--input=0xffffffff", m);
  EXPECT_RUN(0, "result[0]: i64=-16\nresult[1]: f32=2.5\n"
                "result[2]: f64=1e+300\nresult[3]: i32=-1\n", "");
  /* An explicit type must agree; the error names the parameter and both
   * types. */
  hali("run '%s' --function=f --input=i32=4 --input=4 --input=4 --input=4", m);
  EXPECT_USAGE_ERROR("hali: error: INVALID_ARGUMENT: @f argument 0: expected "
                     "i64, got i32 (--input #0 'i32=4')\n");
  hali("run '%s' --function=f --input=4 --input=f64=4 --input=4 --input=4", m);
  EXPECT_USAGE_ERROR("@f argument 1: expected f32, got f64");
  /* A float into an integer parameter, a tensor or a file for a scalar. */
  hali("run '%s' --function=f --input=1.5 --input=4 --input=4 --input=4", m);
  EXPECT_USAGE_ERROR("--input #0 '1.5': '1.5' is not a valid i64 (@f "
                     "argument 0)\n");
  hali("run '%s' --function=f '--input=2xi64=1 2' --input=4 --input=4 "
       "--input=4", m);
  EXPECT_USAGE_ERROR("@f argument 0 is i64, a scalar; --input #0 '2xi64=1 2' "
                     "is a tensor\n");
  hali("run '%s' --function=f --input=@x.npy --input=4 --input=4 --input=4",
       m);
  EXPECT_USAGE_ERROR("@f argument 0 is i64, a scalar; --input #0 '@x.npy' "
                     "names a file\n");
  /* Expected outputs are typed the same way. */
  hali("run '%s' --function=f --input=4 --input=4 --input=4 --input=4 "
       "--expected_output=4 --expected_output=4 --expected_output=4.00001 "
       "--expected_output=4", m);
  EXPECT_RUN(0, "result[0]: i64=4\nresult[1]: f32=4\nresult[2]: f64=4\n"
                "result[3]: i32=4\n[SUCCESS]\n", "");
}
END_TEST

START_TEST(cli_scalar_outputs_to_files) {
  const char *m = put(0, "typed.hasm", typed_text);
  hali("run '%s' --function=f --input=7 --input=1.5 --input=2.25 --input=-2 "
       "'--output=@%s' '--output=@%s' --output= --output=-",
       m, tmp("a.npy"), tmp("b.bin"));
  EXPECT_RUN(0, "result[3]: i32=-2\n", "");
  /* A rank-0 .npy: numpy's header for shape (), then the 8 bytes. */
  uint8_t *d = NULL;
  size_t n = 0;
  ck_assert_ok(hali_read_file(tmp("a.npy"), &d, &n));
  ck_assert_uint_ge(n, 10);
  ck_assert_int_eq(memcmp(d, "\x93NUMPY\x01\x00", 8), 0);
  size_t data_at = 10 + (size_t)d[8] + 256 * (size_t)d[9];
  ck_assert_uint_eq(data_at % 64, 0);
  ck_assert_uint_eq(n, data_at + 8);
  ck_assert_ptr_nonnull(strstr((char *)d + 10, "'descr': '<i8'"));
  ck_assert_ptr_nonnull(strstr((char *)d + 10, "'shape': ()"));
  int64_t v;
  memcpy(&v, d + data_at, 8);
  ck_assert_int_eq(v, 7);
  free(d);
  ck_assert_ok(hali_read_file(tmp("b.bin"), &d, &n));
  ck_assert_uint_eq(n, 4);
  float f;
  memcpy(&f, d, 4);
  ck_assert(f == 1.5f);
  free(d);
  /* The .npy reads back as a rank-0 tensor; as an i64 scalar input it is
   * refused by name (a scalar parameter takes a number). */
  write_file(tmp("id0.hasm"), "func @id(%x: !hal.buffer_view) -> "
                              "!hal.buffer_view {\n  return %x\n}\n");
  hali("run '%s' --function=id '--input=@%s'", tmp("id0.hasm"), tmp("a.npy"));
  EXPECT_RUN(0, "result[0]: hal.buffer_view\ni64=7\n", "");
}
END_TEST

START_TEST(cli_modules_linked_and_stdin) {
  const char *a = put(0, "a.hasm",
                      "module @a\n"
                      "func @twice(%x: i32) -> i32 {\n"
                      "  %y = add.i32 %x, %x\n"
                      "  return %y\n"
                      "}\n");
  const char *b = put(1, "b.hasm",
                      "module @b\n"
                      "func @a.twice(%x: i32) -> i32 import\n"
                      "func @main(%x: i32) -> i32 {\n"
                      "  %y = call @a.twice(%x)\n"
                      "  %z = call @a.twice(%y)\n"
                      "  return %z\n"
                      "}\n");
  hali("run --module='%s' --module='%s' --input=5", a, b);
  EXPECT_RUN(0, "result[0]: i32=20\n", "");
  /* The positional module comes after the --module ones. */
  hali("run '%s' --module='%s' --input=5", b, a);
  EXPECT_RUN(0, "result[0]: i32=20\n", "");
  hali("run --module='%s' --module='%s' --function=a.twice --input=5", a, b);
  EXPECT_RUN(0, "result[0]: i32=10\n", "");
  /* Alone, the import is unbound. */
  hali("run '%s' --input=5", b);
  EXPECT_ERROR("a.twice");
  /* - reads a module from stdin. */
  hali("run - --function=fib --input=7 < '%s'", example("fib.hasm"));
  EXPECT_RUN(0, "result[0]: i32=13\n", "");
  hali("asm '%s' -o '%s'", example("fib.hasm"), tmp("fib.hbc"));
  EXPECT_RUN(0, "", "");
  hali("run --module=- --function=fib --input=8 < '%s'", tmp("fib.hbc"));
  EXPECT_RUN(0, "result[0]: i32=21\n", "");
  hali("run --module='%s' - --input=5 < '%s'", a, b);
  EXPECT_RUN(0, "result[0]: i32=20\n", "");
  hali("run - --module=- < '%s'", a);
  EXPECT_USAGE("hali run: '-' (stdin) can be given as a module once\n");
  hali("run - --no_passes < '%s'", a);
  EXPECT_USAGE("--passes and --no_passes cannot be used with a module read "
               "from stdin (-)\n");
  hali("run - < /dev/null");
  EXPECT_USAGE_ERROR("no function @main in module @_stdin_ (it has no "
                     "functions)\n");
  hali("run - < '%s'", HALI_BUILDDIR "/.libs/libhali.so");
  EXPECT_ERROR("<stdin>: not a hali module (looks like an ELF program or "
               "shared library)\n");
}
END_TEST

START_TEST(cli_async_functions) {
  const char *t = example("mlp_tensor_rodata.hasm");
  hali("run '%s'", t);
  ck_assert_int_eq(run.rc, 0);
  char want[sizeof(run.out)];
  snprintf(want, sizeof(want), "%s", run.out);
  const char *const devices[] = {"local-sync", "local-task"};
  for (size_t i = 0; i < 2; ++i) {
    hali("run '%s' '--function=main$async' --device=%s", t, devices[i]);
    EXPECT_RUN(0, want, "");
  }
  /* With an input: the fences go after it. */
  hali("run '%s' --function=mlp '--input=64xf32=1'", t);
  ck_assert_int_eq(run.rc, 0);
  snprintf(want, sizeof(want), "%s", run.out);
  hali("run '%s' '--function=mlp$async' '--input=64xf32=1' "
       "--device=local-task", t);
  EXPECT_RUN(0, want, "");
  hali("run '%s' '--function=mlp$async'", t);
  EXPECT_USAGE_ERROR("@mlp$async takes 1 argument(s) (the tool adds the 2 "
                     "fences), 0 --input given; its signature is "
                     "@mlp$async(!hal.buffer_view, !hal.fence, !hal.fence) "
                     "-> (!hal.buffer_view)\n");
  /* A hand-written function ending in two fences is called the same way;
   * a failing signal fence fails the run. */
  const char *m = put(0, "fences.hasm",
                      "func @f(%x: i32, %wait: !hal.fence, "
                      "%signal: !hal.fence) -> i32 {\n"
                      "  %forever = const.i64 -1\n"
                      "  %st = hal.fence.await %wait, %forever\n"
                      "  hal.fence.signal %signal\n"
                      "  return %x\n"
                      "}\n");
  hali("run '%s' --function=f --input=3", m);
  EXPECT_RUN(0, "result[0]: i32=3\n", "");
}
END_TEST

/* A HAL program that returns a view of a buffer its queued copy still
 * writes (no await): hali run waits for the queue before printing. */
static const char no_await_text[] =
    "func @main(%v: i32) -> !hal.buffer_view {\n"
    "  %device = hal.device.get\n"
    "  %alloc = hal.device.allocator %device\n"
    "  %mem = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %len = const.i64 4096\n"
    "  %a = hal.allocator.allocate %alloc, %mem, %usage, %len\n"
    "  %mode = const.i32 1\n"
    "  %cat = const.i32 1\n"
    "  %cmd = hal.command_buffer.create %device, %mode, %cat\n"
    "  %zero = const.i64 0\n"
    "  %four = const.i32 4\n"
    "  hal.command_buffer.fill %cmd, %a, %zero, %len, %v, %four\n"
    "  hal.command_buffer.finalize %cmd\n"
    "  %wait = hal.fence.null\n"
    "  %done = hal.fence.create %device\n"
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"
    "  %i32 = const.i32 0x10000020\n"
    "  %dense = const.i32 1\n"
    "  %n = const.i64 1024\n"
    "  %view = hal.buffer_view.create %a, %i32, %dense, [%n]\n"
    "  return %view\n"
    "}\n";

START_TEST(cli_results_wait_for_queue_work) {
  const char *m = put(0, "noawait.hasm", no_await_text);
  for (int i = 0; i < 8; ++i) {
    hali("run '%s' --input=7 --device=local-task --output='@%s'", m,
         tmp("o.bin"));
    EXPECT_RUN(0, "", "");
    uint8_t *d = NULL;
    size_t n = 0;
    ck_assert_ok(hali_read_file(tmp("o.bin"), &d, &n));
    ck_assert_uint_eq(n, 4096);
    for (size_t k = 0; k < 1024; ++k) {
      int32_t x;
      memcpy(&x, d + 4 * k, 4);
      ck_assert_msg(x == 7, "run %d: element %zu is %d", i, k, x);
    }
    free(d);
  }
}
END_TEST

static const char spin_text[] = "func @spin() -> i32 {\n"
                                "^entry:\n"
                                "  br ^loop\n"
                                "^loop:\n"
                                "  br ^loop\n"
                                "}\n";

START_TEST(cli_limits) {
  const char *loop = example("loop.hasm");
  hali("run '%s' --function=loop --input=100000 --fuel=1000", loop);
  EXPECT_ERROR("RESOURCE_EXHAUSTED: instruction budget (fuel) of 1000 "
               "exhausted");
  hali("run '%s' --function=loop --input=10 --fuel=1000", loop);
  EXPECT_RUN(0, "result[0]: i64=96\n", ""); /* 0+1+4+9+16+25+36+0+1+4 */
  hali("run '%s' --function=fib --input=20 --max_depth=5",
       example("fib.hasm"));
  EXPECT_ERROR("RESOURCE_EXHAUSTED: call depth limit of 5 exceeded");
  const char *m = put(0, "noawait.hasm", no_await_text);
  hali("run '%s' --input=7 --max_memory=1K", m);
  EXPECT_ERROR("RESOURCE_EXHAUSTED");
  hali("run '%s' --input=7 --max_memory=4KiB --output=", m);
  EXPECT_RUN(0, "", "");
  const char *spin = put(1, "spin.hasm", spin_text);
  hali_timeout("run '%s' --function=spin --timeout=200ms", spin);
  EXPECT_ERROR("DEADLINE_EXCEEDED: --timeout: @spin did not finish within "
               "0.200 s (the invocation was cancelled)\n");
  hali_timeout("run '%s' --function=spin --timeout=0.1 --device=local-task",
               spin);
  EXPECT_ERROR("DEADLINE_EXCEEDED");
  hali("run '%s' --function=fib --input=10 --timeout=10s",
       example("fib.hasm"));
  EXPECT_RUN(0, "result[0]: i32=55\n", "");
}
END_TEST

/* Runs |spin| with a Chrome trace into t.json, sends |sig| after 0.3 s;
 * returns the exit status, stderr into run.err. */
static int interrupted_run(const char *spin, const char *sig) {
  char script[2048];
  snprintf(script, sizeof(script),
           "'%s' run '%s' --function=spin --trace=hal --trace_format=chrome "
           "--trace_out='%s' 2>'%s' &\n"
           "pid=$!\nsleep 0.3\nkill -%s $pid\nwait $pid\n",
           HALI_TOOL, spin, tmp("t.json"), tmp("err.txt"), sig);
  write_file(tmp("int.sh"), script);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "sh '%s'", tmp("int.sh"));
  int rc = hali_test_shell(cmd, NULL, NULL);
  uint8_t *e = NULL;
  size_t n = 0;
  ck_assert_ok(hali_read_file(tmp("err.txt"), &e, &n));
  snprintf(run.err, sizeof(run.err), "%s", (char *)e);
  free(e);
  return rc;
}

/* Whether t.json is a whole trace: the envelope opened and closed. */
static bool complete_trace(void) {
  uint8_t *d = NULL;
  size_t n = 0;
  ck_assert_ok(hali_read_file(tmp("t.json"), &d, &n));
  static const char tail[] = "],\"displayTimeUnit\":\"ns\"}\n";
  bool ok = n > 40 && strncmp((char *)d, "{\"traceEvents\":[", 16) == 0 &&
            strcmp((char *)d + n - strlen(tail), tail) == 0;
  free(d);
  return ok;
}

START_TEST(cli_interrupt_completes_chrome_trace) {
  if (!hali_trace_available()) return;
  const char *spin = put(0, "spin.hasm", spin_text);
  int rc = interrupted_run(spin, "INT");
  ck_assert_msg(rc == 130, "exit %d: %s", rc, run.err);
  ck_assert_msg(strncmp(run.err, "hali: error: CANCELLED", 22) == 0, "%s",
                run.err);
  ck_assert(complete_trace());
  rc = interrupted_run(spin, "TERM");
  ck_assert_msg(rc == 143, "exit %d: %s", rc, run.err);
  ck_assert(complete_trace());
  /* A failing run completes its trace too. */
  hali("run '%s' --function=spin --timeout=50ms --trace_format=chrome "
       "--trace=hal --trace_out='%s'", spin, tmp("t.json"));
  EXPECT_ERROR("DEADLINE_EXCEEDED");
  ck_assert(complete_trace());
}
END_TEST

START_TEST(cli_not_a_module) {
  const char *so = HALI_BUILDDIR "/.libs/libhali.so";
  const char *const cmds[] = {"run", "verify", "dis", "dump"};
  for (size_t i = 0; i < 4; ++i) {
    hali("%s '%s'", cmds[i], so);
    EXPECT_ERROR("libhali.so: not a hali module (looks like an ELF program "
                 "or shared library)\n");
  }
  hali("asm '%s' -o '%s'", so, tmp("x.hbc"));
  EXPECT_ERROR("not a hali module (looks like an ELF program");
  write_bytes(tmp("x.npy"), "\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}", 26);
  hali("run '%s'", tmp("x.npy"));
  EXPECT_ERROR("x.npy: not a hali module (looks like a .npy array; pass it "
               "with --input=@FILE)\n");
  write_bytes(tmp("junk"), "func \x01\x02\x03 garbage", 16);
  hali("verify '%s'", tmp("junk"));
  EXPECT_ERROR("junk: not a hali module (looks like binary data)\n");
  /* A text file that is not a module is still a syntax error with a
   * place. */
  write_file(tmp("t.txt"), "hello world\n");
  hali("run '%s'", tmp("t.txt"));
  EXPECT_ERROR("t.txt:1:1:");
}
END_TEST

START_TEST(cli_list_devices) {
  hali("run --list_devices");
  ck_assert_int_eq(run.rc, 0);
  ck_assert(strncmp(run.out, "local-sync   no threads", 23) == 0);
  ck_assert_ptr_nonnull(strstr(run.out, "\nlocal-task   a queue thread"));
  hali("benchmark --list-devices");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "local-task"));
}
END_TEST

/* Occurrences of |needle| in |s|. */
static size_t count(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    ++n;
  return n;
}

/* Whether |path| parses as JSON by Python's json module (an independent
 * parser); true when python3 is missing (the field checks still run). */
static bool python_json_ok(const char *path) {
  if (system("command -v python3 >/dev/null 2>&1") != 0) return true;
  char cmd[700];
  snprintf(cmd, sizeof(cmd),
           "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '%s'",
           path);
  return system(cmd) == 0;
}

START_TEST(cli_benchmark) {
  const char *loop = example("loop.hasm");
  hali("benchmark '%s' --function=loop --input=100 "
       "--benchmark_repetitions=7 --benchmark_format=json", loop);
  ck_assert_msg(run.rc == 0, "exit %d: %s", run.rc, run.err);
  ck_assert_str_eq(run.err, "");
  const char *j = run.out;
  ck_assert(strncmp(j, "{\n  \"context\": {\n", 17) == 0);
  ck_assert_ptr_nonnull(strstr(j, "\"executable\": \"hali benchmark\""));
  ck_assert_ptr_nonnull(strstr(j, "\"num_cpus\": "));
  ck_assert_ptr_nonnull(strstr(j, "\"device\": \"local-sync\""));
  ck_assert_ptr_nonnull(strstr(j, "\"benchmarks\": [\n"));
  /* One iteration entry and five aggregates, each over the 7 calls. */
  ck_assert_uint_eq(count(j, "\"run_type\": \"iteration\""), 1);
  ck_assert_uint_eq(count(j, "\"run_type\": \"aggregate\""), 5);
  ck_assert_uint_eq(count(j, "\"iterations\": 7,"), 6);
  ck_assert_uint_eq(count(j, "\"repetitions\": 7,"), 6);
  ck_assert_uint_eq(count(j, "\"time_unit\": \"ns\""), 6);
  ck_assert_uint_eq(count(j, "\"items_per_second\": "), 5); /* not stddev */
  const char *const aggs[] = {"mean", "median", "stddev", "min", "max"};
  for (size_t i = 0; i < 5; ++i) {
    char want[128];
    snprintf(want, sizeof(want),
             "\"name\": \"BM_loop/process_time/real_time_%s\"", aggs[i]);
    ck_assert_msg(strstr(j, want) != NULL, "no %s", want);
    snprintf(want, sizeof(want), "\"aggregate_name\": \"%s\"", aggs[i]);
    ck_assert_msg(strstr(j, want) != NULL, "no %s", want);
  }
  /* min <= median <= max, all positive. */
  double v[5];
  for (size_t i = 0; i < 5; ++i) {
    char key[128];
    snprintf(key, sizeof(key), "real_time_%s\",", aggs[i]);
    const char *p = strstr(j, key);
    ck_assert_ptr_nonnull(p);
    p = strstr(p, "\"real_time\": ");
    ck_assert_ptr_nonnull(p);
    v[i] = strtod(p + 13, NULL);
  }
  ck_assert(v[3] > 0 && v[3] <= v[1] && v[1] <= v[4] && v[3] <= v[0] &&
            v[0] <= v[4] && v[2] >= 0);
  ck_assert(j[strlen(j) - 2] == '}');
  write_file(tmp("bench.json"), j);
  ck_assert_msg(python_json_ok(tmp("bench.json")), "not JSON: %s", j);
  /* Repetitions and warm-up are honoured: count the calls in a VM trace
   * (each call executes the entry's first instruction once). */
  if (hali_trace_available()) {
    hali("benchmark '%s' --function=loop --input=3 --benchmark_repetitions=5 "
         "--benchmark_warmup=2 --trace=vm --trace_out='%s'",
         loop, tmp("vm.txt"));
    ck_assert_msg(run.rc == 0, "%s", run.err);
    ck_assert_ptr_nonnull(strstr(run.out, "benchmark @loop: 5 calls in "));
    ck_assert_ptr_nonnull(strstr(run.out, "(after 2 warm-up)\n"));
    uint8_t *d = NULL;
    size_t n = 0;
    ck_assert_ok(hali_read_file(tmp("vm.txt"), &d, &n));
    ck_assert_uint_eq(count((char *)d, "@loop@0 "), 7);
    free(d);
  }
  /* The console table; a time budget without a count; --benchmark_out. */
  hali("benchmark '%s' --function=loop --input=10 --benchmark_min_time=20ms "
       "--benchmark_out='%s'", loop, tmp("b.txt"));
  EXPECT_RUN(0, "", "");
  uint8_t *d = NULL;
  size_t n = 0;
  ck_assert_ok(hali_read_file(tmp("b.txt"), &d, &n));
  ck_assert_ptr_nonnull(strstr((char *)d, "\nper call "));
  ck_assert_ptr_nonnull(strstr((char *)d, "\nwall ("));
  ck_assert_ptr_nonnull(strstr((char *)d, "\ncpu ("));
  ck_assert_ptr_nonnull(strstr((char *)d, "\nitems/s "));
  free(d);
  /* Failures are run's: a failing call is exit 1. */
  hali("benchmark '%s' --function=loop --input=100000 --fuel=100 "
       "--benchmark_repetitions=3", loop);
  EXPECT_ERROR("RESOURCE_EXHAUSTED: instruction budget (fuel) of 100");
  hali("benchmark '%s' --function=loop", loop);
  EXPECT_USAGE_ERROR("@loop takes 1 argument(s), 0 --input given");
}
END_TEST

START_TEST(cli_dump) {
  const char *t = example("mlp_tensor_rodata.hasm");
  hali("dump '%s'", t);
  ck_assert_msg(run.rc == 0, "%s", run.err);
  const char *const want[] = {
      "module @mlp_tensor_rodata\n",
      "  debug info: yes (names, source lines)",
      "functions as written:\n  @main() -> (tensor<10xf32>)\n"
      "  @mlp(%x: tensor<64xf32>) -> (tensor<10xf32>)\n",
      "functions after the load-time passes:\n",
      "  @mlp(%x: !hal.buffer_view) -> (!hal.buffer_view)\n",
      "  @main$async(%wait: !hal.fence, %signal: !hal.fence) -> "
      "(!hal.buffer_view)\n",
      "executables:\n  @mlp_kernels format \"bytecode\" (1 export)\n"
      "    export @dense(tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, i32, "
      "i32) -> (tensor<?xf32>)\n"
      "      workgroup size [1, 1, 1], layout(constants 2, bindings 4)\n",
      "rodata:\n  @w1 f32, 32768 bytes\n",
      "  total 38696 bytes\n"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); ++i)
    ck_assert_msg(strstr(run.out, want[i]) != NULL, "no \"%s\" in %s",
                  want[i], run.out);
  ck_assert_ptr_null(strstr(run.out, "\nimports:"));
  /* A stripped binary: no names, no debug info; the format version. */
  hali("asm '%s' -o '%s' --strip", example("fib.hasm"), tmp("s.hbc"));
  EXPECT_RUN(0, "", "");
  hali("dump '%s'", tmp("s.hbc"));
  ck_assert_msg(run.rc == 0, "%s", run.err);
  ck_assert_ptr_nonnull(strstr(run.out, "(binary .hbc, format 1."));
  ck_assert_ptr_nonnull(strstr(run.out, "  debug info: no (stripped)\n"));
  ck_assert_ptr_nonnull(strstr(run.out, "  @fib(i32) -> (i32)\n"));
  /* Imports. */
  const char *b = put(0, "b.hasm",
                      "module @b\n"
                      "func @env.f(%x: i32) -> i32 import\n"
                      "func @env.g() import optional\n"
                      "func @main(%x: i32) -> i32 {\n"
                      "  %y = call @env.f(%x)\n"
                      "  return %y\n"
                      "}\n");
  hali("dump '%s'", b);
  ck_assert_msg(run.rc == 0, "%s", run.err);
  ck_assert_ptr_nonnull(strstr(run.out, "imports:\n  @env.f(%x: i32) -> (i32)\n"
                                        "  @env.g() -> () (optional)\n"));
  /* JSON. */
  hali("dump --json '%s'", t);
  ck_assert_msg(run.rc == 0, "%s", run.err);
  const char *const keys[] = {
      "{\n  \"module\": \"mlp_tensor_rodata\",\n",
      "\"format\": \"hasm\", \"format_version\": null",
      "\"debug_info\": true",
      "\"functions_as_written\": [\n    {\"name\": \"main\", \"signature\": "
      "\"() -> (tensor<10xf32>)\", \"arguments\": 0, \"results\": 1, "
      "\"tensor_level\": true}",
      "{\"name\": \"mlp$async\", \"signature\": \"(%x.view: "
      "!hal.buffer_view, %wait: !hal.fence, %signal: !hal.fence) -> "
      "(!hal.buffer_view)\", \"arguments\": 3, \"results\": 1",
      "\"imports\": []",
      "\"exports\": [{\"name\": \"dense\", \"signature\": \"(tensor<?xf32>, "
      "tensor<?xf32>, tensor<?xf32>, i32, i32) -> (tensor<?xf32>)\", "
      "\"symbol\": \"dense\", \"workgroup_size\": [1, 1, 1], \"bindings\": "
      "4, \"constants\": 2}]",
      "{\"name\": \"b2\", \"kind\": \"f32\", \"bytes\": 40}",
      "\"rodata_bytes\": 38696\n}\n"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); ++i)
    ck_assert_msg(strstr(run.out, keys[i]) != NULL, "no \"%s\" in %s",
                  keys[i], run.out);
  write_file(tmp("dump.json"), run.out);
  ck_assert_msg(python_json_ok(tmp("dump.json")), "not JSON: %s", run.out);
  hali("dump --json '%s'", b);
  ck_assert_msg(run.rc == 0, "%s", run.err);
  write_file(tmp("dump.json"), run.out);
  ck_assert_msg(python_json_ok(tmp("dump.json")), "not JSON: %s", run.out);
  /* Globals and the parameter references of the flagship (no weights
   * are needed to describe it). */
  hali("dump '%s'", example("mlp_tensor.hasm"));
  ck_assert_msg(run.rc == 0, "%s", run.err);
  ck_assert_ptr_nonnull(strstr(run.out,
                               "globals:\n  @w1 : tensor<8192xf32> = "
                               "parameter \"model\" :: \"w1\", 32768 bytes\n"));
  ck_assert_ptr_nonnull(strstr(run.out, "  parameters total 38696 bytes\n"));
  hali("dump '%s'", tmp("missing.hasm"));
  EXPECT_ERROR("missing.hasm");
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
  tcase_add_test(tc, cli_help_inputs_paste);
  tcase_add_test(tc, cli_manpage_examples_run);
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
  tcase_add_test(tc, cli_deep_recursion_backtrace);
  tcase_add_test(tc, cli_asm_errors);
  tcase_add_test(tc, cli_usage_errors);
  suite_add_tcase(s, tc);

  tc = tcase_create("tensors");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, cli_tensor_input_forms);
  tcase_add_test(tc, cli_tensor_output_forms);
  tcase_add_test(tc, cli_expected_output);
  tcase_add_test(tc, cli_print_max_elements);
  tcase_add_test(tc, cli_devices_and_workers);
  tcase_add_test(tc, cli_tensor_input_errors);
  tcase_add_test(tc, cli_malformed_npy);
  tcase_add_test(tc, cli_raw_round_trip_every_type);
  tcase_add_test(tc, cli_npy_round_trip_every_type);
  suite_add_tcase(s, tc);

  tc = tcase_create("hal_examples");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, cli_example_fill);
  tcase_add_test(tc, cli_example_sieve);
  tcase_add_test(tc, cli_example_saxpy);
  suite_add_tcase(s, tc);

  tc = tcase_create("pass_options");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, cli_run_pass_options);
  tcase_add_test(tc, cli_dis_pass_options);
  tcase_add_test(tc, cli_named_constants);
  tcase_add_test(tc, cli_run_argument_not_on_command_line);
  suite_add_tcase(s, tc);

  tc = tcase_create("flags");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, cli_flag_forms);
  tcase_add_test(tc, cli_flag_errors);
  tcase_add_test(tc, cli_flagfile);
  tcase_add_test(tc, cli_scalars_typed_by_signature);
  tcase_add_test(tc, cli_scalar_outputs_to_files);
  tcase_add_test(tc, cli_modules_linked_and_stdin);
  tcase_add_test(tc, cli_async_functions);
  tcase_add_test(tc, cli_results_wait_for_queue_work);
  tcase_add_test(tc, cli_limits);
  tcase_add_test(tc, cli_interrupt_completes_chrome_trace);
  tcase_add_test(tc, cli_not_a_module);
  tcase_add_test(tc, cli_list_devices);
  tcase_add_test(tc, cli_benchmark);
  tcase_add_test(tc, cli_dump);
  suite_add_tcase(s, tc);

  tc = tcase_create("known_bugs");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_add_test(tc, bug_input_leading_zero_is_not_octal);
  tcase_add_test(tc, bug_max_depth_value_is_checked);
  tcase_add_test(tc, bug_expected_f32_threshold_sets_f32);
  tcase_add_test(tc, bug_bf16_npy_round_trip);
  tcase_add_test(tc, bug_failure_with_pending_queue_work_hangs);
  tcase_add_test(tc, bug_await_on_unsignallable_fence_hangs);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite_cli()); }
