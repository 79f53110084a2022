/* Helpers the C benchmarks share: a failed call ends the run with the
 * status text, a monotonic clock in nanoseconds, and a comparison for
 * qsort-ing samples (medians).  Define BENCH_NAME (the program's name for
 * messages) before including. */
#ifndef HALI_BENCH_UTIL_H
#define HALI_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hali/base.h"

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench/bench_util.h"
#endif

/* Returns 0 when |s| is OK; otherwise prints "NAME: what: status" and
 * exits 1 (a benchmark that cannot run has nothing to report). */
static inline int bench_check(hali_status_t s, const char *what) {
  if (!s) return 0;
  char *text = hali_status_to_string(s);
  fprintf(stderr, "%s: %s: %s\n", BENCH_NAME, what, text ? text : "?");
  free(text);
  hali_status_free(s);
  exit(1);
}

static inline double bench_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif /* HALI_BENCH_UTIL_H */
