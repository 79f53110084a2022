/* hali benchmark: the session of hali run (tools/run.c), called after a
 * warm-up either --benchmark_repetitions=N times or until a time budget
 * (--benchmark_min_time, 0.5 s by default), timing each call's wall and
 * CPU time; prints min/median/mean/max/stddev and calls per second, or
 * the same as JSON shaped like Google Benchmark's (as
 * iree-benchmark-module's output is). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hali/hali.h"
#include "tools/tools.h"

#define O ((run_options_t *)opts)

static const char *flag_repetitions(void *opts, const char *v) {
  return tool_parse_u64(v, 1, 100000000, &O->bench_repetitions);
}
static const char *flag_min_time(void *opts, const char *v) {
  /* Google Benchmark writes "0.5s" or "0.5"; both are seconds here. */
  const char *e = tool_parse_duration(v, &O->bench_min_time_ns);
  if (!e && O->bench_min_time_ns <= 0) e = "expected a duration above 0";
  return e;
}
static const char *flag_warmup(void *opts, const char *v) {
  return tool_parse_u64(v, 0, 1000000, &O->bench_warmup);
}
static const char *flag_format(void *opts, const char *v) {
  if (strcmp(v, "json") == 0) O->bench_json = true;
  else if (strcmp(v, "console") == 0) O->bench_json = false;
  else return "expected console or json";
  return NULL;
}
static const char *flag_out(void *opts, const char *v) {
  if (!*v) return "expected a file name";
  O->bench_out = v;
  return NULL;
}
#undef O

static const tool_flag_t bench_flags[] = {
    {"--benchmark_repetitions", "--benchmark-repetitions", 0, "N",
     "time exactly N calls (default: as many as fit in "
     "--benchmark_min_time)",
     flag_repetitions},
    {"--benchmark_min_time", "--benchmark-min-time", 0, "DURATION",
     "the time budget when no repetition count is given (default 0.5s)",
     flag_min_time},
    {"--benchmark_warmup", "--benchmark-warmup", 0, "N",
     "untimed calls first (default 1)", flag_warmup},
    {"--benchmark_format", "--benchmark-format", 0, "console|json",
     "json: Google Benchmark's shape", flag_format},
    {"--benchmark_out", "--benchmark-out", 0, "FILE",
     "write the report there instead of stdout", flag_out},
    {NULL, NULL, 0, NULL, NULL, NULL},
};

static const tool_flag_t *const bench_tables[] = {tool_run_flags, bench_flags,
                                                  NULL};
static const tool_command_t bench_command = {
    "benchmark", "MODULE... [--function=NAME] [--input=VALUE]...",
    "time repeated calls of a function (after a warm-up) and print "
    "statistics",
    bench_tables};

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct {
  double min, median, mean, max, stddev;
} stats_t;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sorts |v| (|n| >= 1 values). */
static stats_t stats(double *v, size_t n) {
  stats_t s;
  qsort(v, n, sizeof(*v), cmp_double);
  s.min = v[0];
  s.max = v[n - 1];
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += v[i];
  s.mean = sum / (double)n;
  double sq = 0;
  for (size_t i = 0; i < n; ++i) sq += (v[i] - s.mean) * (v[i] - s.mean);
  /* The sample standard deviation, as Google Benchmark reports it. */
  s.stddev = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
  return s;
}

static void json_entry(FILE *f, const char *name, const char *run_name,
                       const char *run_type, const char *aggregate, size_t n,
                       double real_ns, double cpu_ns, double items,
                       bool last) {
  fprintf(f, "    {\n      \"name\": \"%s\",\n      \"run_name\": \"%s\",\n"
             "      \"run_type\": \"%s\",\n",
          name, run_name, run_type);
  if (aggregate)
    fprintf(f, "      \"aggregate_name\": \"%s\",\n", aggregate);
  fprintf(f,
          "      \"repetitions\": %zu,\n      \"threads\": 1,\n"
          "      \"iterations\": %zu,\n      \"real_time\": %.17g,\n"
          "      \"cpu_time\": %.17g,\n      \"time_unit\": \"ns\"",
          n, n, real_ns, cpu_ns);
  if (items >= 0) fprintf(f, ",\n      \"items_per_second\": %.17g", items);
  fprintf(f, "\n    }%s\n", last ? "" : ",");
}

/* The report: |wall| and |cpu| (ns per call, |n| of them) are sorted. */
static void report(const run_options_t *o, const char *fn, double *wall,
                   double *cpu, size_t n, double total_s, FILE *f) {
  stats_t w = stats(wall, n), c = stats(cpu, n);
  double items = w.mean > 0 ? 1e9 / w.mean : 0;
  if (!o->bench_json) {
    fprintf(f, "benchmark @%s: %zu calls in %.3f %s (after %llu warm-up)\n",
            fn, n, total_s >= 1 ? total_s : total_s * 1e3,
            total_s >= 1 ? "s" : "ms", (unsigned long long)o->bench_warmup);
    fprintf(f, "%-10s %14s %14s %14s %14s %14s\n", "per call", "min",
            "median", "mean", "max", "stddev");
    const char *unit = w.median >= 1e6 ? "ms" : "us";
    double scale = w.median >= 1e6 ? 1e6 : 1e3;
    fprintf(f, "wall (%s)  %14.3f %14.3f %14.3f %14.3f %14.3f\n", unit,
            w.min / scale, w.median / scale, w.mean / scale, w.max / scale,
            w.stddev / scale);
    fprintf(f, "cpu (%s)   %14.3f %14.3f %14.3f %14.3f %14.3f\n", unit,
            c.min / scale, c.median / scale, c.mean / scale, c.max / scale,
            c.stddev / scale);
    fprintf(f, "items/s    %14.1f\n", items);
    return;
  }
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  time_t t = time(NULL);
  char date[64];
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S%z", localtime(&t));
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  char name[256], agg[300];
  snprintf(name, sizeof(name), "BM_%s/process_time/real_time", fn);
  fprintf(f,
          "{\n  \"context\": {\n    \"date\": \"%s\",\n"
          "    \"host_name\": \"%s\",\n    \"executable\": \"hali benchmark\",\n"
          "    \"num_cpus\": %ld,\n    \"library_version\": \"%s\",\n"
          "    \"device\": \"%s\",\n    \"warmup_calls\": %llu,\n"
          "    \"library_build_type\": \"release\"\n  },\n"
          "  \"benchmarks\": [\n",
          date, host, cpus, hali_version(),
          o->device.kind == HALI_DEVICE_LOCAL_TASK ? "local-task"
                                                   : "local-sync",
          (unsigned long long)o->bench_warmup);
  json_entry(f, name, name, "iteration", NULL, n, w.mean, c.mean, items,
             false);
  static const char *const names[] = {"mean", "median", "stddev", "min",
                                      "max"};
  double ws[] = {w.mean, w.median, w.stddev, w.min, w.max};
  double cs[] = {c.mean, c.median, c.stddev, c.min, c.max};
  for (size_t i = 0; i < 5; ++i) {
    snprintf(agg, sizeof(agg), "%s_%s", name, names[i]);
    json_entry(f, agg, name, "aggregate", names[i], n, ws[i], cs[i],
               i == 2 ? -1 : (ws[i] > 0 ? 1e9 / ws[i] : 0), i == 4);
  }
  fprintf(f, "  ]\n}\n");
}

int tool_benchmark(int argc, char **argv) {
  run_options_t o;
  tool_run_options_init(&o);
  char **args;
  size_t nargs;
  int rc = tool_flags_parse(&bench_command, argc, argv, &o, &args, &nargs);
  if (rc < 0) rc = tool_run_options_finish("benchmark", &o, args, nargs);
  if (rc >= 0) goto done;
  if (o.outputs.n || o.expected.n) {
    fprintf(stderr, "hali benchmark: --output and --expected_output are "
                    "hali run's (results are not kept)\n");
    rc = TOOL_EXIT_USAGE;
    goto done;
  }
  FILE *out = stdout;
  if (o.bench_out && !(out = fopen(o.bench_out, "w"))) {
    fprintf(stderr, "hali benchmark: --benchmark_out=%s: cannot open\n",
            o.bench_out);
    rc = TOOL_EXIT_USAGE;
    goto done;
  }
  tool_session_t s;
  hali_status_t st = tool_session_open(&o, &s);
  hali_variant_t *results = NULL;
  double *wall = NULL, *cpu = NULL;
  size_t n = 0, cap = 0;
  if (!st) {
    results = calloc(s.nresults + 1, sizeof(*results));
    if (!results) st = hali_status_oom();
  }
  for (uint64_t i = 0; !st && i < o.bench_warmup; ++i) {
    st = tool_session_call(&o, &s, results);
    for (size_t r = 0; r < s.nresults; ++r) hali_variant_release(&results[r]);
  }
  bool tty = isatty(2);
  bool progress = false;
  int64_t start = clock_ns(CLOCK_MONOTONIC), last_progress = start;
  while (!st) {
    if (o.bench_repetitions ? n == o.bench_repetitions
                            : n > 0 && clock_ns(CLOCK_MONOTONIC) - start >=
                                           o.bench_min_time_ns)
      break;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      double *w2 = realloc(wall, cap * sizeof(*w2));
      if (w2) wall = w2;
      double *c2 = w2 ? realloc(cpu, cap * sizeof(*c2)) : NULL;
      if (c2) cpu = c2;
      if (!w2 || !c2) {
        st = hali_status_oom();
        break;
      }
    }
    int64_t w0 = clock_ns(CLOCK_MONOTONIC);
    int64_t c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    st = tool_session_call(&o, &s, results);
    int64_t c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    int64_t w1 = clock_ns(CLOCK_MONOTONIC);
    for (size_t r = 0; r < s.nresults; ++r) hali_variant_release(&results[r]);
    wall[n] = (double)(w1 - w0);
    cpu[n] = (double)(c1 - c0);
    ++n;
    /* A progress line on a terminal, for runs longer than a second. */
    if (tty && w1 - start > 1000000000 && w1 - last_progress > 250000000) {
      fprintf(stderr, "\rhali benchmark: %zu calls, %.1f s", n,
              (double)(w1 - start) / 1e9);
      last_progress = w1;
      progress = true;
    }
  }
  if (progress) fprintf(stderr, "\r%60s\r", "");
  double total = (double)(clock_ns(CLOCK_MONOTONIC) - start) / 1e9;
  if (!st) report(&o, hali_function_name(s.fn), wall, cpu, n, total, out);
  free(wall);
  free(cpu);
  free(results);
  bool usage = s.usage_error;
  tool_session_close(&s, st != HALI_OK);
  if (out != stdout && fclose(out) != 0 && !st)
    st = hali_status_make(HALI_STATUS_DATA_LOSS,
                          "--benchmark_out=%s: write failed", o.bench_out);
  rc = TOOL_EXIT_OK;
  if (st) {
    tool_report(st);
    rc = usage ? TOOL_EXIT_USAGE : TOOL_EXIT_FAILURE;
  }
  int sig = tool_signals_release();
  if (sig) rc = 128 + sig;
done:
  tool_run_options_free(&o);
  tool_flags_free();
  return rc;
}
