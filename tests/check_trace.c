/* Tracing and diagnostics (DESIGN §7, doc/tracing.md).
 *
 * - The text trace of a small program, golden: instruction lines with
 *   register values, "->" result lines, HAL lines for allocation,
 *   recording, submission and await ("#N" ids and durations normalized).
 * - --trace-filter, --trace-values, --trace-out, a trace to a callback.
 * - The Chrome trace parsed as JSON (a small strict parser below; python3's
 *   json module double-checks when it is installed) and checked for the
 *   required events, their fields and their nesting.
 * - Backtraces (nested call, failing kernel, stripped module), the
 *   deadlock report, fuel exhaustion.
 * - A --disable-tracing build: --trace fails clearly, fuel still works.
 *   Tests that need a trace return early in such a build.
 *
 * `hali` runs through the shell, in a temporary directory per test case,
 * with modules named relatively so that "file:line" is stable. */
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hal/hal.h"
#include "tests/testutil.h"
#include "vm/fiber.h"
#include "vm/trace.h"

/* ------------------------------------------------------------------------ */
/* Fixture: a temporary directory per test case. */

static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/hali-trace-XXXXXX");
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

static const char *tmp(const char *name) {
  static char bufs[4][512];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, name);
  return b;
}

static void write_file(const char *name, const char *text) {
  FILE *f = fopen(tmp(name), "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_ge(fputs(text, f), 0);
  ck_assert_int_eq(fclose(f), 0);
}

/* The whole of file |path| (malloc'ed), or NULL. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (buf) buf[n] = 0;
  fclose(f);
  return buf;
}

/* One run of the tool, from inside the test's directory. */
typedef struct {
  int rc;
  char *out;
  char *err;
} run_t;

static run_t run;

static void run_free(void) {
  free(run.out);
  free(run.err);
  run.out = run.err = NULL;
}

static void hali(const char *fmt, ...) HALI_PRINTF(1, 2);
static void hali(const char *fmt, ...) {
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s", tmpdir, HALI_TOOL, args);
  run_free();
  run.rc = hali_test_shell(cmd, &run.out, &run.err);
  if (!run.out) run.out = strdup("");
  if (!run.err) run.err = strdup("");
}

/* Copies |s| replacing every "#<digits>" by "#N" and the number in
 * "after <digits> us" / "took <digits> us" by "N" (malloc'ed). */
static char *normalize(const char *s) {
  char *out = malloc(strlen(s) + 1), *o = out;
  ck_assert_ptr_nonnull(out);
  while (*s) {
    if (*s == '#' && isdigit((unsigned char)s[1])) {
      *o++ = '#';
      *o++ = 'N';
      for (++s; isdigit((unsigned char)*s); ++s) {
      }
      continue;
    }
    /* Object ids inside JSON arguments ("signal_fence":7). */
    if (*s == '"' && (strncmp(s, "\"wait_fence\":", 13) == 0 ||
                      strncmp(s, "\"signal_fence\":", 15) == 0)) {
      const char *colon = strchr(s, ':');
      memcpy(o, s, (size_t)(colon + 1 - s));
      o += colon + 1 - s;
      s = colon + 1;
      if (isdigit((unsigned char)*s)) {
        *o++ = 'N';
        while (isdigit((unsigned char)*s)) ++s;
      }
      continue;
    }
    const char *words[] = {"after ", "took "};
    bool done = false;
    for (int w = 0; w < 2 && !done; ++w) {
      size_t n = strlen(words[w]);
      if (strncmp(s, words[w], n) == 0 && isdigit((unsigned char)s[n])) {
        const char *p = s + n;
        while (isdigit((unsigned char)*p)) ++p;
        if (strncmp(p, " us", 3) == 0) {
          memcpy(o, words[w], n);
          o += n;
          *o++ = 'N';
          s = p;
          done = true;
        }
      }
    }
    if (!done) *o++ = *s++;
  }
  *o = 0;
  return out;
}

/* Asserts |have| == |want| showing the first differing line. */
#define ck_assert_text(have, want)                                             \
  assert_text((have), (want), __FILE__, __LINE__)
static void assert_text(const char *have, const char *want, const char *file,
                        int line) {
  if (strcmp(have, want) == 0) return;
  size_t i = 0, ln = 1, start = 0;
  for (; have[i] && have[i] == want[i]; ++i)
    if (have[i] == '\n') {
      ++ln;
      start = i + 1;
    }
  ck_abort_msg("%s:%d: text differs at line %zu:\n  have: %.*s\n  want: %.*s\n"
               "whole text:\n%s",
               file, line, ln, (int)strcspn(have + start, "\n"), have + start,
               (int)strcspn(want + start, "\n"), want + start, have);
}

/* Tests that need tracing compiled in stop here in a --disable-tracing
 * build (the "compiled_out" case covers it). */
#define NEEDS_TRACING()                                                        \
  do {                                                                         \
    if (!HALI_TRACING) return;                                                 \
  } while (0)

/* ------------------------------------------------------------------------ */
/* The programs. */

/* Allocate, record a fill, submit, await, read back, call. */
static const char small_text[] =
    "module @small\n"                                                  /*  1 */
    "\n"                                                               /*  2 */
    "func @main(%n: i32) -> i32 {\n"                                   /*  3 */
    "  %device = hal.device.get\n"                                     /*  4 */
    "  %allocator = hal.device.allocator %device\n"                    /*  5 */
    "  %memory = const.i32 19\n"                                       /*  6 */
    "  %usage = const.i32 7\n"                                         /*  7 */
    "  %size = const.i64 16\n"                                         /*  8 */
    "  %b = hal.allocator.allocate %allocator, %memory, %usage, %size\n" /* 9 */
    "  %one = const.i32 1\n"                                           /* 10 */
    "  %three = const.i32 3\n"                                         /* 11 */
    "  %cmd = hal.command_buffer.create %device, %one, %three\n"       /* 12 */
    "  %zero = const.i64 0\n"                                          /* 13 */
    "  %four = const.i32 4\n"                                          /* 14 */
    "  hal.command_buffer.fill %cmd, %b, %zero, %size, %n, %four\n"    /* 15 */
    "  hal.command_buffer.finalize %cmd\n"                             /* 16 */
    "  %wait = hal.fence.null\n"                                       /* 17 */
    "  %done = hal.fence.create %device\n"                             /* 18 */
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"       /* 19 */
    "  %forever = const.i64 -1\n"                                      /* 20 */
    "  %st = hal.fence.await %done, %forever\n"                        /* 21 */
    "  %at = const.i64 8\n"                                            /* 22 */
    "  %v = hal.buffer.load.i32 %b, %at\n"                             /* 23 */
    "  %small = lt.s.i32 %v, %n\n"                                     /* 24 */
    "  cond_br %small, ^out, ^twice\n"                                 /* 25 */
    "^twice:\n"                                                        /* 26 */
    "  %r = call @twice(%v)\n"                                         /* 27 */
    "  return %r\n"                                                    /* 28 */
    "^out:\n"                                                          /* 29 */
    "  return %v\n"                                                    /* 30 */
    "}\n"                                                              /* 31 */
    "\n"                                                               /* 32 */
    "func @twice(%x: i32) -> i32 {\n"                                  /* 33 */
    "  %y = add.i32 %x, %x\n"                                          /* 34 */
    "  return %y\n"                                                    /* 35 */
    "}\n";                                                             /* 36 */

/* --trace=all of small.hasm on local-sync, normalized. */
static const char small_golden[] =
    "[fiber] 1 start @main\n"
    "[vm] enter @main (small.hasm)\n"
    "[vm] @main@0 (line 4) %device = hal.device.get\n"
    "[vm]   -> %device=!hal.device#N\n"
    "[vm] @main@1 (line 5) %allocator = hal.device.allocator %device  "
    "; %device=!hal.device#N\n"
    "[vm]   -> %allocator=!hal.allocator#N\n"
    "[vm] @main@2 (line 6) %memory = const.i32 19\n"
    "[vm]   -> %memory=19\n"
    "[vm] @main@3 (line 7) %usage = const.i32 7\n"
    "[vm]   -> %usage=7\n"
    "[vm] @main@4 (line 8) %size = const.i64 16\n"
    "[vm]   -> %size=16\n"
    "[vm] @main@5 (line 9) %b = hal.allocator.allocate %allocator, "
    "%memory, %usage, %size  ; %allocator=!hal.allocator#N %memory=19 "
    "%usage=7 %size=16\n"
    "[hal] allocate 16 bytes memory=DEVICE_LOCAL|HOST_VISIBLE|DEVICE_VISIBLE "
    "usage=TRANSFER|DISPATCH|MAPPING -> !hal.buffer#N\n"
    "[vm]   -> %b=!hal.buffer#N\n"
    "[vm] @main@6 (line 10) %one = const.i32 1\n"
    "[vm]   -> %one=1\n"
    "[vm] @main@7 (line 11) %three = const.i32 3\n"
    "[vm]   -> %three=3\n"
    "[vm] @main@8 (line 12) %cmd = hal.command_buffer.create %device, "
    "%one, %three  ; %device=!hal.device#N %one=1 %three=3\n"
    "[hal] command_buffer.create mode=1 categories=3 -> "
    "!hal.command_buffer#N\n"
    "[vm]   -> %cmd=!hal.command_buffer#N\n"
    "[vm] @main@9 (line 13) %zero = const.i64 0\n"
    "[vm]   -> %zero=0\n"
    "[vm] @main@10 (line 14) %four = const.i32 4\n"
    "[vm]   -> %four=4\n"
    "[vm] @main@11 (line 15) hal.command_buffer.fill %cmd, %b, %zero, "
    "%size, %n, %four  ; %cmd=!hal.command_buffer#N %b=!hal.buffer#N "
    "%zero=0 %size=16 %n=21 %four=4\n"
    "[hal] command_buffer#N fill !hal.buffer#N [0, +16) pattern=0x15/4\n"
    "[vm] @main@12 (line 16) hal.command_buffer.finalize %cmd  ; "
    "%cmd=!hal.command_buffer#N\n"
    "[hal] command_buffer#N finalize\n"
    "[vm] @main@13 (line 17) %wait = hal.fence.null\n"
    "[vm]   -> %wait=!hal.fence#N\n"
    "[vm] @main@14 (line 18) %done = hal.fence.create %device  ; "
    "%device=!hal.device#N\n"
    "[hal] fence.create -> !hal.fence#N\n"
    "[vm]   -> %done=!hal.fence#N\n"
    "[vm] @main@15 (line 19) hal.device.queue.execute %device, %wait, "
    "%done, [%cmd]  ; %device=!hal.device#N %wait=!hal.fence#N "
    "%done=!hal.fence#N %cmd=!hal.command_buffer#N\n"
    /* local-sync runs the submission inside the call: its spans come
     * before the line the op prints when it returns. */
    "[hal] command_buffer command buffer #N on thread 0 took N us "
    "{\"submission\":1,\"commands\":1}\n"
    "[hal] queue submission 1 (execute) on thread 0 took N us "
    "{\"wait_fence\":N,\"signal_fence\":N,\"status\":\"OK\"}\n"
    "[hal] queue.execute wait=!hal.fence#N signal=!hal.fence#N "
    "command_buffers=[#N]\n"
    "[vm] @main@16 (line 20) %forever = const.i64 -1\n"
    "[vm]   -> %forever=-1\n"
    "[vm] @main@17 (line 21) %st = hal.fence.await %done, %forever  ; "
    "%done=!hal.fence#N %forever=-1\n"
    "[hal] fence.await !hal.fence#N -> OK after N us\n"
    "[vm]   -> %st=0\n"
    "[vm] @main@18 (line 22) %at = const.i64 8\n"
    "[vm]   -> %at=8\n"
    "[vm] @main@19 (line 23) %v = hal.buffer.load.i32 %b, %at  ; "
    "%b=!hal.buffer#N %at=8\n"
    "[vm]   -> %v=21\n"
    /* A compare fused with its cond_br: both lines, then the compare's
     * result. */
    "[vm] @main@20 (line 24) %small = lt.s.i32 %v, %n  ; %v=21 %n=21\n"
    "[vm] @main@21 (line 25) cond_br %small, ^out, ^twice\n"
    "[vm]   -> %small=0\n"
    "[vm] @main@22 (line 27) %r = call @twice(%v)  ; %v=21\n"
    /* A call: the callee's lines are indented by its depth, and its entry
     * names the file once. */
    "[vm]   enter @twice (small.hasm)\n"
    "[vm]   @twice@0 (line 34) %y = add.i32 %x, %x  ; %x=21 %x=21\n"
    "[vm]     -> %y=42\n"
    "[vm]   @twice@1 (line 35) return %y  ; %y=42\n"
    "[vm]   -> %r=42\n"
    "[vm] @main@23 (line 28) return %r  ; %r=42\n"
    "[fiber] 1 done\n";

static const char views_text[] =
    "func @show(%v: !hal.buffer_view) -> i64 {\n"
    "  hal.buffer_view.trace %v, \"input\"\n"
    "  %zero = const.i32 0\n"
    "  %n = hal.buffer_view.dim %v, %zero\n"
    "  return %n\n"
    "}\n";

/* Three nested calls, the innermost fails. */
static const char nested_text[] =
    "module @nested\n"                          /*  1 */
    "func @inner(%a: i32, %b: i32) -> i32 {\n"  /*  2 */
    "  %q = div.s.i32 %a, %b\n"                 /*  3 */
    "  return %q\n"                             /*  4 */
    "}\n"                                       /*  5 */
    "func @middle(%a: i32) -> i32 {\n"          /*  6 */
    "  %zero = const.i32 0\n"                   /*  7 */
    "  %r = call @inner(%a, %zero)\n"           /*  8 */
    "  return %r\n"                             /*  9 */
    "}\n"                                       /* 10 */
    "func @main(%a: i32) -> i32 {\n"            /* 11 */
    "  %one = const.i32 1\n"                    /* 12 */
    "  %b = add.i32 %a, %one\n"                 /* 13 */
    "  %r = call @middle(%b)\n"                 /* 14 */
    "  return %r\n"                             /* 15 */
    "}\n";                                      /* 16 */

/* A bytecode kernel whose workgroup |bad| (x) fails, dispatched over 4x1x1
 * from @run, called from @main. */
static const char kfail_text[] =
    "module @kfail\n"                                                    /*  1 */
    "executable @k format \"bytecode\" {\n"                              /*  2 */
    "  export @boom(tensor<?xi32>, i32) -> (tensor<?xi32>) function "
    "@boom_kernel\n"                                                     /*  3 */
    "}\n"                                                                /*  4 */
    "func @boom_kernel(%in: !hal.buffer, %bad: i32, %out: !hal.buffer, "
    "%x: i32, %y: i32, %z: i32, %cx: i32, %cy: i32, %cz: i32) {\n"       /*  5 */
    "  %ok = ne.i32 %x, %bad\n"                                          /*  6 */
    "  assert %ok, \"workgroup asked to fail\"\n"                        /*  7 */
    "  return\n"                                                         /*  8 */
    "}\n"                                                                /*  9 */
    "func @run(%bad: i32) -> i32 {\n"                                    /* 10 */
    "  %device = hal.device.get\n"                                       /* 11 */
    "  %allocator = hal.device.allocator %device\n"                      /* 12 */
    "  %memory = const.i32 19\n"                                         /* 13 */
    "  %usage = const.i32 7\n"                                           /* 14 */
    "  %size = const.i64 16\n"                                           /* 15 */
    "  %b = hal.allocator.allocate %allocator, %memory, %usage, %size\n" /* 16 */
    "  %one = const.i32 1\n"                                             /* 17 */
    "  %two = const.i32 2\n"                                             /* 18 */
    "  %cmd = hal.command_buffer.create %device, %one, %two\n"           /* 19 */
    "  %zero = const.i32 0\n"                                            /* 20 */
    "  hal.command_buffer.push_constants %cmd, %zero, [%bad]\n"          /* 21 */
    "  %at = const.i64 0\n"                                              /* 22 */
    "  hal.command_buffer.push_descriptor_set %cmd, %zero, %b, %at, "
    "%size\n"                                                            /* 23 */
    "  hal.command_buffer.push_descriptor_set %cmd, %one, %b, %at, "
    "%size\n"                                                            /* 24 */
    "  %exe = hal.executable.get @k\n"                                   /* 25 */
    "  %four = const.i32 4\n"                                            /* 26 */
    "  hal.command_buffer.dispatch %cmd, %exe, %zero, %four, %one, %one\n" /* 27 */
    "  hal.command_buffer.finalize %cmd\n"                               /* 28 */
    "  %wait = hal.fence.null\n"                                         /* 29 */
    "  %done = hal.fence.create %device\n"                               /* 30 */
    "  hal.device.queue.execute %device, %wait, %done, [%cmd]\n"         /* 31 */
    "  %forever = const.i64 -1\n"                                        /* 32 */
    "  %st = hal.fence.await %done, %forever\n"                          /* 33 */
    "  return %st\n"                                                     /* 34 */
    "}\n"                                                                /* 35 */
    "func @main(%bad: i32) -> i32 {\n"                                   /* 36 */
    "  %r = call @run(%bad)\n"                                           /* 37 */
    "  return %r\n"                                                      /* 38 */
    "}\n";                                                               /* 39 */

/* Deadlocks: one fiber awaiting its own fence; two fibers, the main one
 * awaiting a child that awaits a fence nobody signals. */
static const char deadlock_text[] =
    "func @alone() -> i32 {\n"                                   /*  1 */
    "  %device = hal.device.get\n"                               /*  2 */
    "  %f = hal.fence.create %device\n"                          /*  3 */
    "  %forever = const.i64 -1\n"                                /*  4 */
    "  %st = hal.fence.await %f, %forever\n"                     /*  5 */
    "  return %st\n"                                             /*  6 */
    "}\n"                                                        /*  7 */
    "func @child(%f: !hal.fence) {\n"                            /*  8 */
    "  %forever = const.i64 -1\n"                                /*  9 */
    "  %st = hal.fence.await %f, %forever\n"                     /* 10 */
    "  return\n"                                                 /* 11 */
    "}\n"                                                        /* 12 */
    "func @parent() -> i32 {\n"                                  /* 13 */
    "  %device = hal.device.get\n"                               /* 14 */
    "  %f = hal.fence.create %device\n"                          /* 15 */
    "  %c = fiber.spawn @child(%f)\n"                            /* 16 */
    "  %forever = const.i64 -1\n"                                /* 17 */
    "  %st = hal.fence.await %c, %forever\n"                     /* 18 */
    "  return %st\n"                                             /* 19 */
    "}\n";                                                       /* 20 */

/* ------------------------------------------------------------------------ */
/* Text traces. */

START_TEST(text_trace_golden) {
  NEEDS_TRACING();
  write_file("small.hasm", small_text);
  hali("run small.hasm --input=21 --trace=all");
  ck_assert_msg(run.rc == 0, "exit %d: %s", run.rc, run.err);
  ck_assert_str_eq(run.out, "result[0]: i32=42\n");
  char *norm = normalize(run.err);
  ck_assert_text(norm, small_golden);
  free(norm);
  /* --trace=hal: exactly the [hal] and [fiber] lines of the same trace. */
  hali("run small.hasm --input=21 --trace=hal");
  ck_assert_int_eq(run.rc, 0);
  char want[sizeof(small_golden)], *w = want;
  for (const char *l = small_golden; *l;) {
    size_t n = strcspn(l, "\n") + 1;
    if (strncmp(l, "[vm]", 4) != 0) {
      memcpy(w, l, n);
      w += n;
    }
    l += n;
  }
  *w = 0;
  norm = normalize(run.err);
  ck_assert_text(norm, want);
  free(norm);
  /* --trace=vm: no [hal] lines. */
  hali("run small.hasm --input=21 --trace=vm");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_null(strstr(run.err, "[hal]"));
  ck_assert_ptr_nonnull(strstr(run.err, "[vm]   @twice@1 (line 35)"));
  /* Stripped: no file on the entry, no line on the instructions. */
  hali("asm --strip small.hasm -o small.hbc");
  ck_assert_int_eq(run.rc, 0);
  hali("run small.hbc --input=21 --trace=vm");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_msg(strstr(run.err, "[fiber] 1 start @main\n[vm] enter @main\n"
                                "[vm] @main@0 %r1 = hal.device.get\n") != NULL,
                "%s", run.err);
  ck_assert_ptr_nonnull(strstr(run.err, "\n[vm]   enter @twice\n"));
  ck_assert_ptr_null(strstr(run.err, "(line "));
  run_free();
}
END_TEST

START_TEST(text_trace_filter) {
  NEEDS_TRACING();
  write_file("small.hasm", small_text);
  hali("run small.hasm --input=21 --trace=vm --trace-filter='tw*'");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_text(run.err,
                 "[fiber] 1 start @main\n"
                 "[vm]   enter @twice (small.hasm)\n"
                 "[vm]   @twice@0 (line 34) %y = add.i32 %x, %x  ; "
                 "%x=21 %x=21\n"
                 "[vm]     -> %y=42\n"
                 "[vm]   @twice@1 (line 35) return %y  ; %y=42\n"
                 "[fiber] 1 done\n");
  /* The filter limits VM lines only: HAL lines stay. */
  hali("run small.hasm --input=21 --trace=all --trace-filter=nothing");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_null(strstr(run.err, "[vm]"));
  ck_assert_ptr_nonnull(strstr(run.err, "[hal] fence.await"));
  /* An exact name. */
  hali("run small.hasm --input=21 --trace=vm --trace-filter=main");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_ptr_nonnull(strstr(run.err, "[vm] @main@23"));
  ck_assert_ptr_null(strstr(run.err, "@twice@"));
  run_free();
}
END_TEST

/* Indentation follows the call depth; past 32 levels the depth is
 * written out instead of more spaces. */
START_TEST(text_trace_depth) {
  NEEDS_TRACING();
  write_file("deep.hasm",
             "func @down(%n: i32) -> i32 {\n"
             "  %zero = const.i32 0\n"
             "  %done = le.s.i32 %n, %zero\n"
             "  cond_br %done, ^out, ^more\n"
             "^out:\n"
             "  return %n\n"
             "^more:\n"
             "  %one = const.i32 1\n"
             "  %m = sub.i32 %n, %one\n"
             "  %r = call @down(%m)\n"
             "  return %r\n"
             "}\n");
  hali("run deep.hasm --function=down --input=40 --trace=vm");
  ck_assert_int_eq(run.rc, 0);
  char spaces[80];
  memset(spaces, ' ', 64);
  spaces[64] = 0;
  char want[160];
  /* Depth 1 and 32: spaces only; depth 33 and 40: the number too. */
  snprintf(want, sizeof want, "\n[vm]   enter @down (deep.hasm)\n");
  ck_assert_ptr_nonnull(strstr(run.err, want));
  snprintf(want, sizeof want, "\n[vm] %s@down@0 (line 2)", spaces);
  ck_assert_ptr_nonnull(strstr(run.err, want));
  snprintf(want, sizeof want, "\n[vm] %s[depth 33] enter @down (deep.hasm)\n",
           spaces);
  ck_assert_ptr_nonnull(strstr(run.err, want));
  snprintf(want, sizeof want,
           "\n[vm] %s[depth 40] @down@3 (line 6) return %%n  ; %%n=0\n",
           spaces);
  ck_assert_ptr_nonnull(strstr(run.err, want));
  snprintf(want, sizeof want, "[depth 41]");
  ck_assert_ptr_null(strstr(run.err, want));
  /* Once per entry: 41 frames, 41 entries. */
  size_t entries = 0;
  for (const char *q = run.err; (q = strstr(q, "enter @down")); ++q) entries++;
  ck_assert_uint_eq(entries, 41);
  run_free();
}
END_TEST

START_TEST(text_trace_values) {
  NEEDS_TRACING();
  write_file("views.hasm", views_text);
  /* At most N elements of a buffer view, in the VM lines and in the
   * hal.buffer_view.trace op's line. */
  hali("run views.hasm --function=show --input='10xi32=1 2 3 4 5 6 7 8 9 10'"
       " --trace=all --trace-values=3");
  ck_assert_int_eq(run.rc, 0);
  char *norm = normalize(run.err);
  ck_assert_text(norm,
                 "[fiber] 1 start @show\n"
                 "[vm] enter @show (views.hasm)\n"
                 "[vm] @show@0 (line 2) hal.buffer_view.trace %v, "
                 "\"input\"  ; %v=!hal.buffer_view#N<10xi32>=[1 2 3 ...]\n"
                 "[trace] input: !hal.buffer_view#N<10xi32>=[1 2 3 ...]\n"
                 "[vm] @show@1 (line 3) %zero = const.i32 0\n"
                 "[vm]   -> %zero=0\n"
                 "[vm] @show@2 (line 4) %n = hal.buffer_view.dim %v, "
                 "%zero  ; %v=!hal.buffer_view#N<10xi32>=[1 2 3 ...] %zero=0\n"
                 "[vm]   -> %n=10\n"
                 "[vm] @show@3 (line 5) return %n  ; %n=10\n"
                 "[fiber] 1 done\n");
  free(norm);
  /* The default is 8; a view that fits prints no "...". */
  hali("run views.hasm --function=show --input='10xi32=1 2 3 4 5 6 7 8 9 10'"
       " --trace=hal");
  ck_assert_ptr_nonnull(
      strstr(run.err, "<10xi32>=[1 2 3 4 5 6 7 8 ...]\n"));
  hali("run views.hasm --function=show --input='2x2xf32=1.5 -2 0.25 1e10'"
       " --trace=hal --trace-values=4");
  ck_assert_ptr_nonnull(strstr(run.err, "<2x2xf32>=[1.5 -2 0.25 1e+10]\n"));
  hali("run views.hasm --function=show --input='3xi32=1 2 3' --trace=hal"
       " --trace-values=0");
  ck_assert_int_eq(run.rc, 2);
  ck_assert_ptr_nonnull(strstr(run.err, "is not a count"));
  run_free();
}
END_TEST

/* A mul fused with the add of its product (vm/code.h, MUL_ADD_*) traces
 * as the two IR instructions, then both results; fuel charges it what the
 * two cost apart (2). */
START_TEST(text_trace_mul_add) {
  NEEDS_TRACING();
  write_file("muladd.hasm", "func @f(%a: i64, %b: i64) -> i64 {\n"
                            "  %p = mul.i64 %a, %b\n"
                            "  %s = add.i64 %p, %a\n"
                            "  return %s\n"
                            "}\n");
  hali("run muladd.hasm --function=f --input=i64=6 --input=i64=7"
       " --trace=vm");
  ck_assert_int_eq(run.rc, 0);
  char *norm = normalize(run.err);
  ck_assert_text(norm,
                 "[fiber] 1 start @f\n"
                 "[vm] enter @f (muladd.hasm)\n"
                 "[vm] @f@0 (line 2) %p = mul.i64 %a, %b  ; %a=6 %b=7\n"
                 "[vm] @f@1 (line 3) %s = add.i64 %p, %a\n"
                 "[vm]   -> %p=42 %s=48\n"
                 "[vm] @f@2 (line 4) return %s  ; %s=48\n"
                 "[fiber] 1 done\n");
  free(norm);
  run_free();
  hali_vm_module_t *m = hali_test_module("func @f(%a: i64, %b: i64) -> i64 {\n"
                                         "  %p = mul.i64 %a, %b\n"
                                         "  %s = add.i64 %p, %a\n"
                                         "  return %s\n"
                                         "}\n");
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->fuel_enabled = true;
  st->fuel = 100;
  hali_value_t args[2] = {{.type = HALI_TYPE_I64, .i64 = 6},
                          {.type = HALI_TYPE_I64, .i64 = 7}};
  hali_value_t res = {.type = HALI_TYPE_I64};
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "f"), args, 2,
                              &res, 1));
  ck_assert_int_eq(res.i64, 48);
  ck_assert_uint_eq(st->fuel_used, 3); /* mul, add, return */
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

START_TEST(text_trace_out_and_usage) {
  NEEDS_TRACING();
  write_file("small.hasm", small_text);
  hali("run small.hasm --input=21 --trace=vm --trace-out=t.txt");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_str_eq(run.err, "");
  char *text = read_file(tmp("t.txt"));
  ck_assert_ptr_nonnull(text);
  ck_assert_msg(strncmp(text, "[fiber] 1 start @main\n[vm] enter @main "
                        "(small.hasm)\n[vm] @main@0", 58) == 0,
                "%s", text);
  free(text);
  hali("run small.hasm --input=21 --trace=bogus");
  ck_assert_int_eq(run.rc, 2);
  ck_assert_ptr_nonnull(strstr(run.err, "expected vm, hal or all"));
  hali("run small.hasm --input=21 --trace=vm --trace-format=xml");
  ck_assert_int_eq(run.rc, 2);
  ck_assert_ptr_nonnull(strstr(run.err, "expected text or chrome"));
  hali("run small.hasm --input=21 --trace=vm --trace-out=no/such/dir/t.txt");
  ck_assert_int_eq(run.rc, 1);
  ck_assert_ptr_nonnull(strstr(run.err, "--trace-out no/such/dir/t.txt"));
  run_free();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A trace to a callback (the embedding API). */

typedef struct {
  char *text;
  size_t len, cap;
  int lines;
} sink_t;

static void sink_line(void *user, const char *line) {
  sink_t *s = user;
  size_t n = strlen(line);
  if (s->len + n + 2 > s->cap) {
    s->cap = (s->len + n + 2) * 2;
    s->text = realloc(s->text, s->cap);
    ck_assert_ptr_nonnull(s->text);
  }
  memcpy(s->text + s->len, line, n);
  s->len += n;
  s->text[s->len++] = '\n';
  s->text[s->len] = 0;
  s->lines++;
}

START_TEST(callback_trace) {
  NEEDS_TRACING();
  hali_vm_module_t *m = hali_test_module(
      "func @f(%a: i32) -> i32 {\n"
      "  %one = const.i32 1\n"
      "  %b = add.i32 %a, %one\n"
      "  return %b\n"
      "}\n");
  sink_t sink = {0};
  hali_trace_options_t o = {.flags = HALI_TRACE_VM, .callback = sink_line,
                            .user = &sink};
  hali_trace_t *t = NULL;
  ck_assert_ok(hali_trace_create(&o, &t));
  ck_assert_uint_eq(hali_trace_flags(t), HALI_TRACE_VM);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->trace = t;
  hali_value_t arg = {.type = HALI_TYPE_I32, .i32 = 41};
  hali_value_t res = {.type = HALI_TYPE_I32};
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "f"), &arg, 1,
                              &res, 1));
  ck_assert_int_eq(res.i32, 42);
  /* One call per line, no newline inside. */
  ck_assert_int_eq(sink.lines, 6);
  ck_assert_text(sink.text,
                 "[vm] enter @f (test.hasm)\n"
                 "[vm] @f@0 (line 2) %one = const.i32 1\n"
                 "[vm]   -> %one=1\n"
                 "[vm] @f@1 (line 3) %b = add.i32 %a, %one  ; %a=41 "
                 "%one=1\n"
                 "[vm]   -> %b=42\n"
                 "[vm] @f@2 (line 4) return %b  ; %b=42\n");
  /* Switched off again: the plain loop, nothing more. */
  st->trace = NULL;
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "f"), &arg, 1,
                              &res, 1));
  ck_assert_int_eq(sink.lines, 6);
  hali_trace_free(t);
  /* Chrome to a callback: one JSON object per call, no array around. */
  sink.len = 0;
  sink.lines = 0;
  o.format = HALI_TRACE_CHROME;
  o.flags = HALI_TRACE_ALL;
  ck_assert_ok(hali_trace_create(&o, &t));
  /* No per-instruction events in Chrome traces: no instrumented loop. */
  ck_assert_uint_eq(hali_trace_flags(t), HALI_TRACE_HAL);
  hali_trace_slice(t, "x\"y", "cat", 3, 1500, 2001, "{\"k\":1}");
  hali_trace_printf(t, "text lines are dropped in chrome format");
  hali_trace_slice(t, "z", "cat", 3, 4000, 1, NULL);
  hali_trace_free(t);
  /* Thread 3 (worker 1) is named once, before its first slice. */
  ck_assert_int_eq(sink.lines, 3);
  ck_assert_str_eq(sink.text,
                   "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,"
                   "\"tid\":3,\"args\":{\"name\":\"worker 1\"}}\n"
                   "{\"name\":\"x\\\"y\",\"cat\":\"cat\",\"ph\":\"X\","
                   "\"pid\":1,\"tid\":3,\"ts\":1.500,\"dur\":2.001,"
                   "\"args\":{\"k\":1}}\n"
                   "{\"name\":\"z\",\"cat\":\"cat\",\"ph\":\"X\","
                   "\"pid\":1,\"tid\":3,\"ts\":4.000,\"dur\":0.001}\n");
  free(sink.text);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A small strict JSON parser (RFC 8259), enough to check Chrome traces. */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } json_kind_t;

typedef struct json_s {
  json_kind_t kind;
  double num;
  bool b;
  char *str;
  size_t n;
  char **keys;            /* J_OBJ */
  struct json_s **items;  /* J_ARR, J_OBJ */
} json_t;

typedef struct {
  const char *p;
  const char *err;
} json_parser_t;

static void json_free(json_t *j) {
  if (!j) return;
  for (size_t i = 0; i < j->n; ++i) {
    if (j->keys) free(j->keys[i]);
    json_free(j->items[i]);
  }
  free(j->keys);
  free(j->items);
  free(j->str);
  free(j);
}

static void json_ws(json_parser_t *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
    ps->p++;
}

static json_t *json_value(json_parser_t *ps, int depth);

static char *json_string(json_parser_t *ps) {
  if (*ps->p != '"') {
    ps->err = "expected a string";
    return NULL;
  }
  ps->p++;
  size_t cap = 16, len = 0;
  char *s = malloc(cap);
  for (;;) {
    unsigned char c = (unsigned char)*ps->p++;
    if (c == '"') break;
    if (c < 0x20) {
      ps->err = c ? "control character in a string" : "unterminated string";
      free(s);
      return NULL;
    }
    if (c == '\\') {
      char e = *ps->p++;
      switch (e) {
      case '"': case '\\': case '/': c = (unsigned char)e; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u':
        for (int i = 0; i < 4; ++i)
          if (!isxdigit((unsigned char)ps->p[i])) {
            ps->err = "bad \\u escape";
            free(s);
            return NULL;
          }
        c = '?'; /* the code point itself does not matter here */
        ps->p += 4;
        break;
      default:
        ps->err = "bad escape";
        free(s);
        return NULL;
      }
    }
    if (len + 2 > cap) s = realloc(s, cap *= 2);
    s[len++] = (char)c;
  }
  s[len] = 0;
  return s;
}

static json_t *json_new(json_kind_t kind) {
  json_t *j = calloc(1, sizeof(*j));
  ck_assert_ptr_nonnull(j);
  j->kind = kind;
  return j;
}

static void json_push(json_t *j, char *key, json_t *item) {
  j->items = realloc(j->items, (j->n + 1) * sizeof(*j->items));
  if (j->kind == J_OBJ) {
    j->keys = realloc(j->keys, (j->n + 1) * sizeof(*j->keys));
    j->keys[j->n] = key;
  }
  j->items[j->n++] = item;
}

static json_t *json_value(json_parser_t *ps, int depth) {
  json_ws(ps);
  if (depth > 64) {
    ps->err = "nested too deeply";
    return NULL;
  }
  const char *p = ps->p;
  if (*p == '{' || *p == '[') {
    bool obj = *p == '{';
    json_t *j = json_new(obj ? J_OBJ : J_ARR);
    ps->p++;
    json_ws(ps);
    if (*ps->p == (obj ? '}' : ']')) {
      ps->p++;
      return j;
    }
    for (;;) {
      char *key = NULL;
      if (obj) {
        json_ws(ps);
        key = json_string(ps);
        if (!key) break;
        json_ws(ps);
        if (*ps->p++ != ':') {
          ps->err = "expected ':'";
          free(key);
          break;
        }
      }
      json_t *item = json_value(ps, depth + 1);
      if (!item) {
        free(key);
        break;
      }
      json_push(j, key, item);
      json_ws(ps);
      if (*ps->p == ',') {
        ps->p++;
        continue;
      }
      if (*ps->p == (obj ? '}' : ']')) {
        ps->p++;
        return j;
      }
      ps->err = obj ? "expected ',' or '}'" : "expected ',' or ']'";
      break;
    }
    json_free(j);
    return NULL;
  }
  if (*p == '"') {
    char *s = json_string(ps);
    if (!s) return NULL;
    json_t *j = json_new(J_STR);
    j->str = s;
    return j;
  }
  if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
    json_t *j = json_new(J_BOOL);
    j->b = *p == 't';
    ps->p += j->b ? 4 : 5;
    return j;
  }
  if (strncmp(p, "null", 4) == 0) {
    ps->p += 4;
    return json_new(J_NULL);
  }
  /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
  const char *q = p;
  if (*q == '-') ++q;
  if (*q == '0') ++q;
  else if (*q >= '1' && *q <= '9') while (isdigit((unsigned char)*q)) ++q;
  else {
    ps->err = "expected a value";
    return NULL;
  }
  if (*q == '.') {
    ++q;
    if (!isdigit((unsigned char)*q)) {
      ps->err = "bad fraction";
      return NULL;
    }
    while (isdigit((unsigned char)*q)) ++q;
  }
  if (*q == 'e' || *q == 'E') {
    ++q;
    if (*q == '+' || *q == '-') ++q;
    if (!isdigit((unsigned char)*q)) {
      ps->err = "bad exponent";
      return NULL;
    }
    while (isdigit((unsigned char)*q)) ++q;
  }
  json_t *j = json_new(J_NUM);
  j->num = strtod(p, NULL);
  ps->p = q;
  return j;
}

/* Parses all of |text| or fails the test, naming the offset. */
static json_t *json_parse(const char *text) {
  json_parser_t ps = {text, NULL};
  json_t *j = json_value(&ps, 0);
  if (j) {
    json_ws(&ps);
    if (*ps.p) {
      ps.err = "trailing characters";
      json_free(j);
      j = NULL;
    }
  }
  ck_assert_msg(j != NULL, "invalid JSON at offset %td: %s: %.60s",
                ps.p - text, ps.err ? ps.err : "?", ps.p);
  return j;
}

static const json_t *json_get(const json_t *j, const char *key) {
  if (!j || j->kind != J_OBJ) return NULL;
  for (size_t i = 0; i < j->n; ++i)
    if (strcmp(j->keys[i], key) == 0) return j->items[i];
  return NULL;
}

/* json_get that fails the test when |key| is missing or not |kind|. */
static const json_t *json_req(const json_t *j, const char *key,
                              json_kind_t kind) {
  static char empty[1];
  static json_t none = {.kind = J_NULL, .str = empty};
  const json_t *v = json_get(j, key);
  if (!v || v->kind != kind) {
    ck_abort_msg("no '%s' of the expected kind", key);
    return &none;
  }
  return v;
}

START_TEST(json_parser_self_test) {
  json_t *j = json_parse(" {\"a\": [1, -2.5e3, true, null, \"x\\n\\u00e9\"],"
                         " \"b\": {}} ");
  ck_assert_int_eq(json_get(j, "a")->n, 5);
  ck_assert(json_get(j, "a")->items[1]->num == -2500);
  ck_assert_str_eq(json_get(j, "a")->items[4]->str, "x\n?");
  ck_assert_int_eq(json_get(j, "b")->kind, J_OBJ);
  json_free(j);
  const char *bad[] = {"[1,]", "{\"a\" 1}", "[01]", "\"a", "[1] x",
                       "{\"a\":1,}", "[.5]", "[\"\t\"]", "nul"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    json_parser_t ps = {bad[i], NULL};
    json_t *v = json_value(&ps, 0);
    if (v) {
      json_ws(&ps);
      ck_assert_msg(*ps.p != 0, "accepted invalid JSON %s", bad[i]);
      json_free(v);
    }
  }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Chrome traces. */

typedef struct {
  const char *name, *cat;
  int tid;
  int64_t start, end; /* ns */
  const json_t *args;
} slice_t;

static int64_t us_to_ns(double us) { return (int64_t)llround(us * 1000.0); }

/* Thread names from the trace's thread_name metadata events, by tid. */
enum { NAMED_TIDS = 2048 };
static const char *thread_names[NAMED_TIDS];

/* The name doc/tracing.md's thread table gives |tid|. */
static void expected_thread_name(int tid, char *buf, size_t n) {
  if (tid == 0) snprintf(buf, n, "vm");
  else if (tid == 1) snprintf(buf, n, "queue");
  else if (tid < 1000) snprintf(buf, n, "worker %d", tid - 2);
  else snprintf(buf, n, "fiber %d awaits", tid - 1000);
}

/* Checks the trace's shape and every event's fields; fills |out| (up to
 * |cap|) with the slices and returns their count.  Metadata events
 * ("ph":"M") must be thread_name events that name each thread once,
 * before its first slice, as the table in doc/tracing.md does. */
static size_t chrome_events(const json_t *root, slice_t *out, size_t cap) {
  ck_assert_int_eq(root->kind, J_OBJ);
  const json_t *unit = json_get(root, "displayTimeUnit");
  ck_assert_ptr_nonnull(unit);
  ck_assert_str_eq(unit->str, "ns");
  const json_t *ev = json_get(root, "traceEvents");
  ck_assert_ptr_nonnull(ev);
  ck_assert_int_eq(ev->kind, J_ARR);
  ck_assert_uint_le(ev->n, cap);
  memset(thread_names, 0, sizeof(thread_names));
  size_t nslices = 0;
  for (size_t i = 0; i < ev->n; ++i) {
    const json_t *e = ev->items[i];
    ck_assert_int_eq(e->kind, J_OBJ);
    if (strcmp(json_req(e, "ph", J_STR)->str, "M") == 0) {
      ck_assert_str_eq(json_req(e, "name", J_STR)->str, "thread_name");
      ck_assert(json_req(e, "pid", J_NUM)->num == 1);
      double tid = json_req(e, "tid", J_NUM)->num;
      ck_assert(tid >= 0 && tid < NAMED_TIDS);
      const json_t *a = json_req(e, "args", J_OBJ);
      const char *tn = json_req(a, "name", J_STR)->str;
      char want[48];
      expected_thread_name((int)tid, want, sizeof want);
      ck_assert_str_eq(tn, want);
      ck_assert_msg(!thread_names[(int)tid], "thread %d named twice",
                    (int)tid);
      thread_names[(int)tid] = tn;
      continue;
    }
    slice_t *s = &out[nslices++];
    s->name = json_req(e, "name", J_STR)->str;
    s->cat = json_req(e, "cat", J_STR)->str;
    ck_assert_str_eq(json_req(e, "ph", J_STR)->str, "X");
    ck_assert(json_req(e, "pid", J_NUM)->num == 1);
    double tid = json_req(e, "tid", J_NUM)->num;
    double ts = json_req(e, "ts", J_NUM)->num;
    double dur = json_req(e, "dur", J_NUM)->num;
    ck_assert_msg(tid >= 0 && ts >= 0 && dur >= 0, "event %zu: negative", i);
    const json_t *args = json_get(e, "args");
    if (args) ck_assert_int_eq(args->kind, J_OBJ);
    s->tid = (int)tid;
    ck_assert_msg(s->tid < NAMED_TIDS && thread_names[s->tid],
                  "'%s' on thread %d, which no thread_name event named "
                  "before it", s->name, s->tid);
    s->start = us_to_ns(ts);
    s->end = s->start + us_to_ns(dur);
    s->args = args;
  }
  return nslices;
}

static bool within(const slice_t *in, const slice_t *out) {
  return in->start >= out->start && in->end <= out->end;
}

static double arg_num(const slice_t *s, const char *key) {
  const json_t *v = json_get(s->args, key);
  ck_assert_msg(v && v->kind == J_NUM, "%s '%s': no numeric arg '%s'", s->cat,
                s->name, key);
  return v->num;
}

/* Runs |module| through `hali run ... --trace=all --trace-format=chrome`
 * with |args|, parses the result and checks the events: queue submissions
 * holding their command buffers, dispatch slices (per worker on local-task)
 * with workgroup ranges covering the grid of |groups| workgroups once,
 * fence awaits, fiber slices; on one thread, slices nest or are disjoint. */
static void check_chrome(const char *device_args, int workers,
                         uint64_t groups) {
  hali("run '%s/examples/saxpy_bytecode.hasm' --function=saxpy "
       "--input=f32=2 --input='%" PRIu64 "xf32=1' --input='%" PRIu64
       "xf32=10' %s --trace=all --trace-format=chrome --trace-out=t.json",
       HALI_SRCDIR, groups * 64, groups * 64, device_args);
  ck_assert_msg(run.rc == 0, "exit %d: %s", run.rc, run.err);
  ck_assert_str_eq(run.err, "");
  char *text = read_file(tmp("t.json"));
  ck_assert_ptr_nonnull(text);
  /* python3's json module agrees, when there is one. */
  if (hali_test_shell("command -v python3 >/dev/null", NULL, NULL) == 0) {
    char cmd[700];
    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "
             "'%s'",
             tmp("t.json"));
    char *err = NULL;
    int rc = hali_test_shell(cmd, NULL, &err);
    ck_assert_msg(rc == 0, "python3 rejects the trace: %s", err ? err : "");
    free(err);
  }
  json_t *root = json_parse(text);
  enum { CAP = 4096 };
  slice_t *ev = calloc(CAP, sizeof(*ev));
  size_t n = chrome_events(root, ev, CAP);
  bool local_task = workers > 0;
  size_t queues = 0, cbs = 0, dispatches = 0, awaits = 0, fibers = 0;
  uint64_t covered = 0;
  uint8_t *seen = calloc(groups, 1);
  for (size_t i = 0; i < n; ++i) {
    const slice_t *s = &ev[i];
    if (strcmp(s->cat, "queue") == 0) {
      ++queues;
      ck_assert_str_eq(s->name, "submission 1 (execute)");
      ck_assert_int_eq(s->tid, local_task ? 1 : 0);
      ck_assert(arg_num(s, "signal_fence") > 0);
      (void)arg_num(s, "wait_fence");
      const json_t *status = json_get(s->args, "status");
      ck_assert_ptr_nonnull(status);
      ck_assert_str_eq(status->str, "OK");
    } else if (strcmp(s->cat, "command_buffer") == 0) {
      ++cbs;
      ck_assert_msg(strncmp(s->name, "command buffer #", 16) == 0, "%s",
                    s->name);
      ck_assert_int_eq(s->tid, local_task ? 1 : 0);
      ck_assert(arg_num(s, "submission") == 1);
      ck_assert(arg_num(s, "commands") == 5);
    } else if (strcmp(s->cat, "dispatch") == 0) {
      ++dispatches;
      ck_assert_str_eq(s->name, "kernels::saxpy");
      const json_t *wg = json_get(s->args, "workgroups");
      ck_assert_msg(wg && wg->kind == J_ARR && wg->n == 2,
                    "dispatch without a workgroup range");
      uint64_t b = (uint64_t)wg->items[0]->num, e = (uint64_t)wg->items[1]->num;
      ck_assert_uint_lt(b, e);
      ck_assert_uint_le(e, groups);
      for (uint64_t g = b; g < e; ++g) {
        ck_assert_msg(!seen[g], "workgroup %" PRIu64 " traced twice", g);
        seen[g] = 1;
      }
      covered += e - b;
      int worker = (int)arg_num(s, "worker");
      if (local_task) {
        /* On the thread of the worker that ran it. */
        ck_assert_int_ge(worker, 0);
        ck_assert_int_lt(worker, workers);
        ck_assert_int_eq(s->tid, 2 + worker);
      } else {
        ck_assert_int_eq(s->tid, 0);
      }
    } else if (strcmp(s->cat, "fence") == 0) {
      ++awaits;
      ck_assert_msg(strncmp(s->name, "await fence#", 12) == 0, "%s", s->name);
      /* Awaits have a track per fiber (1000 + fiber id): they span the
       * fiber's suspension, which the fiber slices on track 0 do not. */
      ck_assert_int_eq(s->tid, 1001);
    } else if (strcmp(s->cat, "fiber") == 0) {
      ++fibers;
      ck_assert_str_eq(s->name, "fiber 1 @saxpy");
      ck_assert_int_eq(s->tid, 0);
    } else {
      ck_abort_msg("unexpected event category '%s'", s->cat);
    }
  }
  ck_assert_uint_eq(queues, 1);
  ck_assert_uint_eq(cbs, 1);
  ck_assert_uint_ge(dispatches, 1);
  ck_assert_uint_eq(covered, groups);
  ck_assert_uint_eq(awaits, 1);
  /* The fiber runs until it awaits; local-task resumes it afterwards. */
  ck_assert_uint_ge(fibers, 1);
  /* Nesting. */
  const slice_t *queue = NULL, *cb = NULL;
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(ev[i].cat, "queue") == 0) queue = &ev[i];
    if (strcmp(ev[i].cat, "command_buffer") == 0) cb = &ev[i];
  }
  if (!queue || !cb) ck_abort_msg("no submission or no command buffer");
  ck_assert_msg(within(cb, queue), "command buffer [%lld, %lld] outside its "
                "submission [%lld, %lld]", (long long)cb->start,
                (long long)cb->end, (long long)queue->start,
                (long long)queue->end);
  for (size_t i = 0; i < n; ++i) {
    const slice_t *s = &ev[i];
    if (strcmp(s->cat, "dispatch") == 0)
      ck_assert_msg(within(s, cb), "dispatch [%lld, %lld] on thread %d "
                    "outside its command buffer [%lld, %lld]",
                    (long long)s->start, (long long)s->end, s->tid,
                    (long long)cb->start, (long long)cb->end);
    if (strcmp(s->cat, "fence") == 0)
      ck_assert_msg(within(queue, s) || s->end >= queue->end,
                    "the await ends before the submission it waits for");
    /* Same thread: nested or disjoint (awaits have tracks of their own,
     * so they never straddle fiber slices). */
    for (size_t k = 0; k < n; ++k) {
      const slice_t *o = &ev[k];
      if (k == i || o->tid != s->tid) continue;
      bool disjoint = s->end <= o->start || o->end <= s->start;
      ck_assert_msg(disjoint || within(s, o) || within(o, s),
                    "'%s' and '%s' overlap on thread %d without nesting",
                    s->name, o->name, s->tid);
    }
  }
  /* Fiber slices never overlap each other. */
  for (size_t i = 0; i < n; ++i)
    for (size_t k = i + 1; k < n; ++k)
      if (strcmp(ev[i].cat, "fiber") == 0 && strcmp(ev[k].cat, "fiber") == 0)
        ck_assert(ev[i].end <= ev[k].start || ev[k].end <= ev[i].start);
  free(seen);
  free(ev);
  json_free(root);
  free(text);
}

START_TEST(chrome_trace_local_task) {
  NEEDS_TRACING();
  check_chrome("--device=local-task --workers=2", 2, 16);
  run_free();
}
END_TEST

START_TEST(chrome_trace_local_sync) {
  NEEDS_TRACING();
  check_chrome("", 0, 5);
  run_free();
}
END_TEST

/* A run that fails in a kernel (a queue submission fails, its await
 * fails the fiber) still writes a complete, valid trace whose threads are
 * all named. */
START_TEST(chrome_trace_failed_run) {
  NEEDS_TRACING();
  write_file("kfail.hasm", kfail_text);
  hali("run kfail.hasm --input=2 --device=local-task --workers=2 "
       "--trace=hal --trace-format=chrome --trace-out=f.json");
  ck_assert_int_eq(run.rc, 1);
  ck_assert_ptr_nonnull(strstr(run.err, "workgroup asked to fail"));
  char *text = read_file(tmp("f.json"));
  ck_assert_ptr_nonnull(text);
  json_t *root = json_parse(text);
  enum { CAP = 4096 };
  slice_t *ev = calloc(CAP, sizeof(*ev));
  size_t n = chrome_events(root, ev, CAP);
  bool failed_submission = false, fiber = false;
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(ev[i].cat, "queue") == 0) {
      const json_t *st = json_get(ev[i].args, "status");
      ck_assert_ptr_nonnull(st);
      failed_submission |= strcmp(st->str, "FAILED_PRECONDITION") == 0;
      ck_assert_int_eq(ev[i].tid, 1);
    }
    fiber |= strcmp(ev[i].cat, "fiber") == 0;
  }
  ck_assert(failed_submission);
  ck_assert(fiber);
  ck_assert_str_eq(thread_names[0], "vm");
  ck_assert_str_eq(thread_names[1], "queue");
  free(ev);
  json_free(root);
  free(text);
  run_free();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Diagnostics. */

START_TEST(backtrace_nested_call) {
  write_file("nested.hasm", nested_text);
  hali("run nested.hasm --input=6");
  ck_assert_int_eq(run.rc, 1);
  ck_assert_str_eq(run.out, "");
  ck_assert_text(run.err,
                 "hali: error: OUT_OF_RANGE: div.s.i32: integer division by "
                 "zero\n"
                 "  at @inner@0 (nested.hasm:3)\n"
                 "  at @middle@1 (nested.hasm:8)\n"
                 "  at @main@2 (nested.hasm:14)\n");
  /* Stripped: function and pc, no file:line. */
  hali("asm --strip nested.hasm -o nested.hbc");
  ck_assert_int_eq(run.rc, 0);
  hali("run nested.hbc --input=6");
  ck_assert_int_eq(run.rc, 1);
  ck_assert_text(run.err,
                 "hali: error: OUT_OF_RANGE: div.s.i32: integer division by "
                 "zero\n"
                 "  at @inner@0\n"
                 "  at @middle@1\n"
                 "  at @main@2\n");
  run_free();
}
END_TEST

START_TEST(backtrace_failing_kernel) {
  write_file("kfail.hasm", kfail_text);
  static const char *const devices[] = {"", "--device=local-task --workers=2"};
  for (int d = 0; d < 2; ++d) {
    hali("run kfail.hasm --input=2 %s", devices[d]);
    ck_assert_int_eq(run.rc, 1);
    char want[2048];
    snprintf(want, sizeof(want),
             "hali: error: FAILED_PRECONDITION: assertion failed: workgroup "
             "asked to fail\n"
             "  at @boom_kernel@1 (kfail.hasm:7)\n"
             "  in bytecode kernel: executable 'k' export 0 'boom' workgroup "
             "(2,0,0)\n"
             "  in dispatch of executable 'k' export 0 'boom' at workgroup "
             "(2,0,0) of (4,1,1)\n"
             "  executing command 3 of 4\n"
             "  in command buffer 0 of 1\n"
             "  queue submission 1 on %s\n"
             "  awaited fence #N\n"
             "  at @run@22 (kfail.hasm:33)\n"
             "  at @main@0 (kfail.hasm:37)\n",
             d ? "local-task" : "local-sync");
    char *norm = normalize(run.err);
    ck_assert_text(norm, want);
    free(norm);
  }
  /* No failing workgroup: it runs. */
  hali("run kfail.hasm --input=9");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_str_eq(run.out, "result[0]: i32=0\n");
  /* Stripped: the kernel and VM frames keep their names and pcs. */
  hali("asm --strip kfail.hasm -o kfail.hbc");
  ck_assert_int_eq(run.rc, 0);
  hali("run kfail.hbc --input=0");
  ck_assert_int_eq(run.rc, 1);
  char *norm = normalize(run.err);
  ck_assert_text(norm,
                 "hali: error: FAILED_PRECONDITION: assertion failed: "
                 "workgroup asked to fail\n"
                 "  at @boom_kernel@1\n"
                 "  in bytecode kernel: executable 'k' export 0 'boom' "
                 "workgroup (0,0,0)\n"
                 "  in dispatch of executable 'k' export 0 'boom' at "
                 "workgroup (0,0,0) of (4,1,1)\n"
                 "  executing command 3 of 4\n"
                 "  in command buffer 0 of 1\n"
                 "  queue submission 1 on local-sync\n"
                 "  awaited fence #N\n"
                 "  at @run@22\n"
                 "  at @main@0\n");
  free(norm);
  run_free();
}
END_TEST

START_TEST(deadlock_report) {
  write_file("dl.hasm", deadlock_text);
  hali("run dl.hasm --function=alone");
  ck_assert_int_eq(run.rc, 1);
  char *norm = normalize(run.err);
  ck_assert_text(norm,
                 "hali: error: FAILED_PRECONDITION: deadlock: all 1 fiber(s) "
                 "are suspended and neither queue work nor a deadline can "
                 "wake them\n"
                 "  fiber 1 (@alone) awaits fence #N at @alone@3 "
                 "(dl.hasm:5)\n");
  free(norm);
  /* Two fibers: each named with what it awaits and where. */
  hali("run dl.hasm --function=parent --device=local-task");
  ck_assert_int_eq(run.rc, 1);
  ck_assert_msg(strncmp(run.err,
                        "hali: error: FAILED_PRECONDITION: deadlock: all 2 "
                        "fiber(s) are suspended",
                        70) == 0,
                "%s", run.err);
  norm = normalize(run.err);
  ck_assert_msg(strstr(norm, "\n  fiber 1 (@parent) awaits fence #N at "
                             "@parent@4 (dl.hasm:18)") != NULL,
                "%s", norm);
  ck_assert_msg(strstr(norm, "\n  fiber 2 (@child) awaits fence #N at "
                             "@child@1 (dl.hasm:10)") != NULL,
                "%s", norm);
  free(norm);
  /* The fence ids are the real ones: the child's fence is the parent's %f,
   * the parent's is the child's completion fence. */
  run_free();
}
END_TEST

START_TEST(fuel_exhaustion) {
  /* Fuel is a limit, not tracing: it works in every build. */
  hali_vm_module_t *m = hali_test_module(
      "func @spin(%n: i32) -> i32 {\n"
      "^entry:\n"
      "  %i = const.i32 0\n"
      "  %one = const.i32 1\n"
      "  br ^loop\n"
      "^loop:\n"
      "  %i = add.i32 %i, %one\n"
      "  %more = lt.s.i32 %i, %n\n"
      "  cond_br %more, ^loop, ^done\n"
      "^done:\n"
      "  return %i\n"
      "}\n"
      "func @main(%n: i32) -> i32 {\n"
      "  %r = call @spin(%n)\n"
      "  return %r\n"
      "}\n");
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  st->fuel_enabled = true;
  st->fuel = 50;
  hali_value_t arg = {.type = HALI_TYPE_I32, .i32 = 1000000};
  hali_value_t res = {.type = HALI_TYPE_I32};
  hali_status_t s = hali_vm_invoke(st, m, hali_vm_module_lookup(m, "main"),
                                   &arg, 1, &res, 1);
  /* 50 dispatches: call, const, const, br, then 23 times add and the
   * fused lt+cond_br; the next add finds the tank empty. */
  ck_assert_status(s, HALI_STATUS_RESOURCE_EXHAUSTED,
                   "instruction budget (fuel) of 50 exhausted\n"
                   "  at @spin@3 (test.hasm:7)\n"
                   "  at @main@0 (test.hasm:14)");
  ck_assert_uint_eq(st->fuel, 0);
  ck_assert_uint_eq(st->fuel_used, 50);
  /* Enough fuel: the same call completes, and what it used is counted. */
  st->fuel = 1000;
  st->fuel_used = 0;
  arg.i32 = 10;
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "main"), &arg,
                              1, &res, 1));
  ck_assert_int_eq(res.i32, 10);
  ck_assert_uint_gt(st->fuel_used, 20);
  ck_assert_uint_eq(st->fuel + st->fuel_used, 1000);
  hali_vm_stack_free(st);
  /* Through the scheduler (per fiber). */
  hali_vm_scheduler_options_t so = {.fuel_enabled = true, .fuel = 30};
  hali_vm_scheduler_t *sched = NULL;
  ck_assert_ok(hali_vm_scheduler_create(NULL, &so, &sched));
  hali_vm_fiber_t *f = NULL;
  arg.i32 = 1000000;
  ck_assert_ok(hali_vm_scheduler_start(sched, m,
                                       hali_vm_module_lookup(m, "main"), &arg,
                                       1, &f));
  ck_assert_ok(hali_vm_scheduler_run(sched, f));
  ck_assert_status(hali_status_clone(hali_vm_fiber_status(f)),
                   HALI_STATUS_RESOURCE_EXHAUSTED,
                   "instruction budget (fuel) of 30 exhausted");
  hali_vm_fiber_release(f);
  hali_vm_scheduler_free(sched);
  hali_vm_module_release(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* configure --disable-tracing. */

START_TEST(compiled_out) {
  write_file("small.hasm", small_text);
  hali_trace_options_t o = {.flags = HALI_TRACE_ALL};
  hali_trace_t *t = NULL;
  hali_status_t s = hali_trace_create(&o, &t);
  if (HALI_TRACING) {
    ck_assert_ok(s);
    hali_trace_free(t);
    hali("run small.hasm --input=21 --trace=vm --trace-out=/dev/null");
    ck_assert_int_eq(run.rc, 0);
    run_free();
    return;
  }
  ck_assert_status(s, HALI_STATUS_UNIMPLEMENTED, "--disable-tracing");
  ck_assert_ptr_null(t);
  ck_assert_uint_eq(hali_trace_flags(NULL), 0);
  static const char *const opts[] = {"--trace=vm", "--trace=all",
                                     "--trace-format=chrome",
                                     "--trace-filter=main",
                                     "--trace-out=t.txt", "--trace-values=3"};
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); ++i) {
    hali("run small.hasm --input=21 %s", opts[i]);
    char want[256];
    snprintf(want, sizeof(want),
             "hali run: '%s': tracing is not available: this hali was "
             "configured with --disable-tracing\n",
             opts[i]);
    ck_assert_int_eq(run.rc, 2);
    ck_assert_str_eq(run.out, "");
    ck_assert_str_eq(run.err, want);
  }
  /* Without tracing options it runs as usual. */
  hali("run small.hasm --input=21");
  ck_assert_int_eq(run.rc, 0);
  ck_assert_str_eq(run.out, "result[0]: i32=42\n");
  run_free();
}
END_TEST

static Suite *suite_trace(void) {
  Suite *s = suite_create("trace");
  TCase *tc = tcase_create("text");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, text_trace_golden);
  tcase_add_test(tc, text_trace_filter);
  tcase_add_test(tc, text_trace_depth);
  tcase_add_test(tc, text_trace_values);
  tcase_add_test(tc, text_trace_mul_add);
  tcase_add_test(tc, text_trace_out_and_usage);
  suite_add_tcase(s, tc);

  tc = tcase_create("callback");
  tcase_add_test(tc, callback_trace);
  suite_add_tcase(s, tc);

  tc = tcase_create("chrome");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, json_parser_self_test);
  tcase_add_test(tc, chrome_trace_local_task);
  tcase_add_test(tc, chrome_trace_local_sync);
  tcase_add_test(tc, chrome_trace_failed_run);
  suite_add_tcase(s, tc);

  tc = tcase_create("diagnostics");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, backtrace_nested_call);
  tcase_add_test(tc, backtrace_failing_kernel);
  tcase_add_test(tc, deadlock_report);
  tcase_add_test(tc, fuel_exhaustion);
  suite_add_tcase(s, tc);

  tc = tcase_create("compiled_out");
  tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
  tcase_add_test(tc, compiled_out);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite_trace()); }
