/* bench/load — loading cost against module size (issue 11: linear time).
 *
 *   make bench-load                      (or: make bench/load && bench/load)
 *   bench/load [--sizes=10000,100000,1000000] [--min-time=0.3]
 *              [--only=SHAPE] [--stages] [--cold-allocator] [--smoke]
 *
 * Generates modules of N instructions in memory, in two shapes:
 *
 *   huge    one function of N instructions over min(N/4, 16384) registers
 *           (the first N/4 instructions each define a new one; a function
 *           holds at most 65535), a block every 256 instructions ending in
 *           `br` to the next, an `assert` with its own message per block
 *           (N/256 blocks, as many distinct strings)
 *   many    N/16 functions of 16 instructions; each calls the one before
 *           it, asserts with its own message and returns
 *
 * and three forms of each: `.hasm` text, `.hbc` with the debug section
 * (register and block names, lines) and `.hbc` stripped.  Each is loaded
 * the way `hali run` loads a file (tools/run.c): read (assembler or binary
 * reader), structural check, load-time passes, verifier, encoder, executable
 * linking and the import check — only the file read is left out.  A case is
 * timed until |min-time| seconds have passed (at least 8 loads; 3 in the
 * smoke run) and the fastest load counts.
 *
 * It prints instructions loaded per second per case, the ratio of the
 * figure at the largest size to the one at the smallest, and PASS/FAIL
 * against the goals: ratio >= 0.80 (linear within 20 %) for every case,
 * and >= 10 M instructions/s for the binary forms at every size.
 * The exit status is 0 when every goal is met.
 *
 * Times are CPU time, fastest of N, so that other processes on a shared
 * machine do not count.  The allocator is warmed the same way for every
 * size (see main: glibc's trim and mmap thresholds are fixed, so that no
 * size pays for pages the previous load gave back); --cold-allocator
 * leaves glibc's defaults.  --stages prints, instead of the goals, the
 * fastest time of each stage (read, check = structural check, passes and
 * verifier, encode, link, unload) in ns per instruction.
 *
 * --smoke is the regression test make check runs (tests/load_linear.test):
 * sizes 2000 and 32000 only, each case timed for 20 ms (at least 3 loads),
 * and one generous goal, last/1st >= 0.50 for every case; speed itself is
 * not judged.  A timed test, but one with a wide margin on both sides:
 * linear loading gives 0.75-0.99 here even on a busy machine, while the
 * quadratic lookups issue 11 removed gave 0.07 (huge function, text), 0.13
 * (huge function, binary with names) and 0.44-0.47 (many functions).  A
 * count of probes through a hook would only see the lookups that use the
 * hook; this sees any step that grows faster than the module.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader/executables.h"
#include "loader/loader.h"
#include "vm/vm.h"

#define BENCH_MAX_SIZES 8
#define BLOCK_LEN 256   /* instructions per block in the huge function */
#define MAX_REGS 16384  /* registers of the huge function */
#define FUNC_LEN 16  /* instructions per function in the many shape */

typedef enum { SHAPE_HUGE, SHAPE_MANY, SHAPE_COUNT } shape_t;
typedef enum { FORM_TEXT, FORM_HBC, FORM_HBC_STRIP, FORM_COUNT } form_t;

static const char *const shape_names[SHAPE_COUNT] = {"huge", "many"};
static const char *const form_names[FORM_COUNT] = {"text", "hbc+debug",
                                                   "hbc-stripped"};

/* CPU time of the process: loading is single-threaded, and CPU time does
 * not count the time other processes on a shared machine take the core. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, hali_status_t s) {
  fprintf(stderr, "bench/load: %s: %s\n", what,
          s ? hali_status_message(s) : "failed");
  hali_status_free(s);
  exit(2);
}

/* The .hasm text of a module of about |n| instructions in |shape|;
 * |*out_insns| is the exact count. */
static char *generate(shape_t shape, uint64_t n, uint64_t *out_insns) {
  hali_strbuf_t sb = {0};
  uint64_t insns = 0;
  hali_strbuf_printf(&sb, "module @load_bench\n");
  if (shape == SHAPE_HUGE) {
    /* Blocks of BLOCK_LEN: const, assert, (BLOCK_LEN - 3) adds, br; the
     * last block ends in return instead. */
    uint64_t blocks = n / BLOCK_LEN ? n / BLOCK_LEN : 1;
    uint64_t r = 0, pool = n / 4 < MAX_REGS ? n / 4 : MAX_REGS;
    hali_strbuf_printf(&sb, "func @main(%%a: i64) -> i64 {\n");
    for (uint64_t b = 0; b < blocks; ++b) {
      hali_strbuf_printf(&sb, "^b%" PRIu64 ":\n", b);
      hali_strbuf_printf(&sb, "  %%c%" PRIu64 " = const.i32 1\n", b);
      hali_strbuf_printf(&sb, "  assert %%c%" PRIu64 ", \"block %" PRIu64
                              " holds\"\n", b, b);
      for (int k = 0; k < BLOCK_LEN - 3; ++k, ++r) {
        if (r == 0)
          hali_strbuf_printf(&sb, "  %%r0 = add.i64 %%a, %%a\n");
        else
          hali_strbuf_printf(&sb, "  %%r%" PRIu64 " = add.i64 %%r%" PRIu64
                                  ", %%a\n", r % pool, (r - 1) % pool);
      }
      if (b + 1 < blocks)
        hali_strbuf_printf(&sb, "  br ^b%" PRIu64 "\n", b + 1);
      else
        hali_strbuf_printf(&sb, "  return %%r%" PRIu64 "\n", (r - 1) % pool);
      insns += BLOCK_LEN;
    }
    hali_strbuf_printf(&sb, "}\n");
  } else {
    uint64_t funcs = n / FUNC_LEN ? n / FUNC_LEN : 1;
    for (uint64_t f = 0; f < funcs; ++f) {
      hali_strbuf_printf(&sb, "func @f%" PRIu64 "(%%a: i64) -> i64 {\n", f);
      if (f == 0)
        hali_strbuf_printf(&sb, "  %%x0 = const.i64 1\n");
      else
        hali_strbuf_printf(&sb, "  %%x0 = call @f%" PRIu64 "(%%a)\n", f - 1);
      hali_strbuf_printf(&sb, "  %%c = const.i32 1\n");
      hali_strbuf_printf(&sb, "  assert %%c, \"f%" PRIu64 " holds\"\n", f);
      int k = 1;
      for (; k < FUNC_LEN - 3; ++k)
        hali_strbuf_printf(&sb, "  %%x%d = add.i64 %%x%d, %%a\n", k, k - 1);
      hali_strbuf_printf(&sb, "  return %%x%d\n}\n", k - 1);
      insns += FUNC_LEN;
    }
  }
  char *text = hali_strbuf_take(&sb);
  if (!text) die("generating a module", NULL);
  *out_insns = insns;
  return text;
}

/* One load, as `hali run` does it after reading the file: the bytes to a
 * runnable module.  Releasing the module is unloading, timed apart. */
typedef struct {
  hali_vm_module_t *module;
  hali_vm_link_t *link;
} loaded_t;

static loaded_t load_once(const uint8_t *data, size_t size,
                          const hali_executable_registry_t *registry) {
  hali_ir_module_t *ir;
  hali_status_t s = hali_load_bytes(data, size, "load_bench", &ir);
  if (s) die("loading", s);
  hali_vm_module_t *m;
  if ((s = hali_vm_module_create(ir, &m))) die("encoding", s);
  hali_vm_link_t *l = NULL;
  s = hali_vm_link_create(m, &l);
  if (!s) s = hali_executable_registry_load_link(registry, l, NULL, NULL, 0);
  if (!s) s = hali_vm_link_check_imports(l);
  if (s) die("linking", s);
  return (loaded_t){m, l};
}

/* --stages: the fastest time of each stage of a load, summed over loads
 * of one case (read, check = structural check + passes + verifier,
 * encode, link, unload), in seconds. */
enum { ST_READ, ST_CHECK, ST_ENCODE, ST_LINK, ST_UNLOAD, ST_COUNT };
static const char *const stage_names[ST_COUNT] = {"read", "check", "encode",
                                                  "link", "unload"};

static void time_stages(const uint8_t *data, size_t size, double min_time,
                        int min_reps,
                        const hali_executable_registry_t *registry,
                        double best[ST_COUNT]) {
  for (int k = 0; k < ST_COUNT; ++k) best[k] = 1e30;
  double start = now();
  for (int reps = 0; reps < min_reps || now() - start < min_time; ++reps) {
    double t[ST_COUNT + 1];
    t[0] = now();
    hali_ir_module_t *ir;
    hali_status_t s = hali_read_module(data, size, "load_bench", &ir);
    if (s) die("reading", s);
    t[1] = now();
    if ((s = hali_load_module(ir, "load_bench", NULL, &ir))) die("loading", s);
    t[2] = now();
    hali_vm_module_t *m;
    if ((s = hali_vm_module_create(ir, &m))) die("encoding", s);
    t[3] = now();
    hali_vm_link_t *l = NULL;
    s = hali_vm_link_create(m, &l);
    if (!s) s = hali_executable_registry_load_link(registry, l, NULL, NULL, 0);
    if (!s) s = hali_vm_link_check_imports(l);
    if (s) die("linking", s);
    t[4] = now();
    hali_vm_link_free(l);
    hali_vm_module_release(m);
    t[5] = now();
    for (int k = 0; k < ST_COUNT; ++k)
      if (t[k + 1] - t[k] < best[k]) best[k] = t[k + 1] - t[k];
  }
}

/* Fastest load of |data| in seconds (and the fastest unload, in
 * |*out_unload|). */
static double time_load(const uint8_t *data, size_t size, double min_time,
                        int min_reps,
                        const hali_executable_registry_t *registry,
                        double *out_unload) {
  double best = 1e30, best_unload = 1e30, start = now();
  for (int reps = 0; reps < min_reps || now() - start < min_time; ++reps) {
    double t0 = now();
    loaded_t m = load_once(data, size, registry);
    double t1 = now();
    hali_vm_link_free(m.link);
    hali_vm_module_release(m.module);
    double t2 = now();
    if (t1 - t0 < best) best = t1 - t0;
    if (t2 - t1 < best_unload) best_unload = t2 - t1;
  }
  *out_unload = best_unload;
  return best;
}

static size_t parse_sizes(const char *s, uint64_t *out) {
  size_t n = 0;
  while (*s && n < BENCH_MAX_SIZES) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || v < BLOCK_LEN) {
      fprintf(stderr, "bench/load: bad --sizes (numbers >= %d, comma "
                      "separated)\n", BLOCK_LEN);
      exit(2);
    }
    out[n++] = v;
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

int main(int argc, char **argv) {
  uint64_t sizes[BENCH_MAX_SIZES] = {10000, 100000, 1000000};
  size_t nsizes = 3;
  double min_time = 0.3;
  bool smoke = false;
  bool stages = false; /* per-stage ns/insn instead of the goals */
  bool cold_allocator = false;
  const char *only = NULL; /* a shape, or shape/form: profile one case */
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--sizes=", 8) == 0) {
      nsizes = parse_sizes(argv[i] + 8, sizes);
    } else if (strncmp(argv[i], "--min-time=", 11) == 0) {
      min_time = atof(argv[i] + 11);
    } else if (strncmp(argv[i], "--only=", 7) == 0) {
      only = argv[i] + 7;
    } else if (strcmp(argv[i], "--cold-allocator") == 0) {
      cold_allocator = true;
    } else if (strcmp(argv[i], "--stages") == 0) {
      stages = true;
    } else if (strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
    } else {
      fprintf(stderr, "usage: bench/load [--sizes=N,N,...] [--min-time=S] "
                      "[--only=huge|many[/text|hbc+debug|hbc-stripped]] "
                      "[--stages] [--cold-allocator] [--smoke]\n");
      return 2;
    }
  }
  if (smoke) {
    sizes[0] = 2000;
    sizes[1] = 32000;
    nsizes = 2;
    min_time = 0.02;
  }
  /* The allocator, warm the same way for every size: glibc maps a large
   * block (past its mmap threshold, which grows with the blocks freed) and
   * trims the top of the heap when a free leaves more than its trim
   * threshold, so a 10^6 module's 100 MB go back to the system after each
   * load and the next load takes a page fault per 4 KiB it touches, while
   * a 10^4 module reuses the pages the previous load freed.  With both
   * thresholds fixed high, every size reuses what the load before it
   * freed: the page faults a first load takes are a cost of the process
   * (and linear in the module), not a step of loading that grows with it.
   * --cold-allocator keeps glibc's defaults, to see that cost. */
  if (!cold_allocator) {
    (void)mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's maximum */
    (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  const double linear_goal = smoke ? 0.50 : 0.80;
  /* The fastest of at least this many loads counts, whatever the size: a
   * large module fills --min-time with a few loads where a small one gets
   * hundreds, and on a shared machine the fastest of 3 is much more likely
   * to have caught another process's burst than the fastest of 300. */
  const int min_reps = smoke ? 3 : 8;
  hali_executable_registry_t *registry;
  hali_status_t s = hali_executable_registry_create(&registry);
  if (s) die("creating the executable registry", s);

  double rate[SHAPE_COUNT][FORM_COUNT][BENCH_MAX_SIZES];
  printf("bench/load: instructions loaded per second (read, passes, verify, "
         "encode, link; releasing the module is timed apart, as unload)\n\n");
  printf("%-5s %-13s", "shape", "form");
  for (size_t k = 0; k < nsizes; ++k)
    printf(" %10" PRIu64, sizes[k]);
  printf("  %9s  %s\n", "last/1st", "goal");
  bool pass = true;
  for (int sh = 0; sh < SHAPE_COUNT; ++sh) {
    size_t shape_len = strlen(shape_names[sh]);
    if (only && (strncmp(only, shape_names[sh], shape_len) != 0 ||
                 (only[shape_len] && only[shape_len] != '/')))
      continue;
    char *texts[BENCH_MAX_SIZES];
    uint64_t insns[BENCH_MAX_SIZES];
    uint8_t *bins[FORM_COUNT][BENCH_MAX_SIZES] = {{0}};
    size_t bin_sizes[FORM_COUNT][BENCH_MAX_SIZES] = {{0}};
    for (size_t k = 0; k < nsizes; ++k) {
      texts[k] = generate((shape_t)sh, sizes[k], &insns[k]);
      hali_ir_module_t *ir;
      if ((s = hali_asm_parse(texts[k], strlen(texts[k]), "load_bench.hasm",
                              &ir)))
        die("assembling the generated module", s);
      for (int fo = FORM_HBC; fo < FORM_COUNT; ++fo) {
        hali_hbc_write_options_t wo = {fo == FORM_HBC_STRIP};
        if ((s = hali_hbc_write(ir, &wo, &bins[fo][k], &bin_sizes[fo][k])))
          die("writing the binary module", s);
      }
      hali_ir_module_free(ir);
    }
    for (int fo = 0; fo < FORM_COUNT; ++fo) {
      if (only && only[shape_len] == '/' &&
          strcmp(only + shape_len + 1, form_names[fo]) != 0)
        continue;
      if (stages) {
        double best[BENCH_MAX_SIZES][ST_COUNT];
        for (size_t k = 0; k < nsizes; ++k) {
          const uint8_t *data = fo == FORM_TEXT ? (const uint8_t *)texts[k]
                                                : bins[fo][k];
          size_t size = fo == FORM_TEXT ? strlen(texts[k]) : bin_sizes[fo][k];
          time_stages(data, size, min_time, min_reps, registry, best[k]);
        }
        for (int st = 0; st < ST_COUNT; ++st) {
          printf("%s%-5s %-13s %-7s", st ? "" : "\n", shape_names[sh],
                 form_names[fo], stage_names[st]);
          for (size_t k = 0; k < nsizes; ++k)
            printf(" %8.1fns", best[k][st] * 1e9 / (double)insns[k]);
          printf("\n");
        }
        continue;
      }
      printf("%-5s %-13s", shape_names[sh], form_names[fo]);
      fflush(stdout);
      double unload_ns[BENCH_MAX_SIZES];
      /* The smoke run measures a case again (up to three times in all) when
       * it misses its goal: on a shared machine one measurement can catch
       * another process's burst, while a quadratic step misses every time. */
      double ratio = 0;
      for (int attempt = 0; attempt < (smoke ? 3 : 1); ++attempt) {
        for (size_t k = 0; k < nsizes; ++k) {
          const uint8_t *data = fo == FORM_TEXT ? (const uint8_t *)texts[k]
                                                : bins[fo][k];
          size_t size = fo == FORM_TEXT ? strlen(texts[k]) : bin_sizes[fo][k];
          double unload;
          double t = time_load(data, size, min_time, min_reps, registry,
                               &unload);
          rate[sh][fo][k] = (double)insns[k] / t;
          unload_ns[k] = unload * 1e9 / (double)insns[k];
        }
        ratio = rate[sh][fo][nsizes - 1] / rate[sh][fo][0];
        if (ratio >= linear_goal) break;
      }
      for (size_t k = 0; k < nsizes; ++k) printf(" %9.2fM", rate[sh][fo][k] / 1e6);
      bool ok = ratio >= linear_goal;
      if (fo != FORM_TEXT && !smoke)
        for (size_t k = 0; k < nsizes; ++k) ok = ok && rate[sh][fo][k] >= 10e6;
      pass = pass && ok;
      printf("  %9.2f  %s   (unload %.0f -> %.0f ns/insn)\n", ratio,
             ok ? "PASS" : "FAIL", unload_ns[0], unload_ns[nsizes - 1]);
    }
    for (size_t k = 0; k < nsizes; ++k) {
      free(texts[k]);
      for (int fo = FORM_HBC; fo < FORM_COUNT; ++fo) free(bins[fo][k]);
    }
  }
  hali_executable_registry_free(registry);
  if (smoke)
    printf("\nsmoke goal: last/1st >= %.2f for every case (no quadratic "
           "step)\n", linear_goal);
  else
    printf("\ngoals: last/1st >= %.2f for every case (linear within 20 %%); "
           ">= 10.00M/s for hbc at every size\n", linear_goal);
  printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
