/* hali — the clock (base layer): monotonic nanoseconds, the one time base
 * of deadlines, timeouts and traces. */
#ifndef HALI_BASE_CLOCK_H
#define HALI_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t hali_clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif /* HALI_BASE_CLOCK_H */
