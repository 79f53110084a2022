/* hali — for Check suites that read a device's memory statistics
 * (hali_device_query_memory_statistics) after a call. */
#ifndef HALI_TESTS_SETTLE_H
#define HALI_TESTS_SETTLE_H

#include <check.h>
#include <stdlib.h>
#include <unistd.h>

#include "hali/hali.h"

/* Aborts the test with |s|'s text when it is an error. */
#define MEM_OK(s)                                                              \
  do {                                                                         \
    hali_status_t s_ = (s);                                                    \
    if (s_) {                                                                  \
      char *t_ = hali_status_to_string(s_);                                    \
      ck_abort_msg("%s", t_);                                                  \
    }                                                                          \
  } while (0)

/* local-task's queue thread drops a submission's command buffer (and the
 * buffers it retains) just after signalling its fence, so the bytes of a
 * call come back shortly after the call returns: wait (at most 5 s) until
 * the live bytes are |base| again. */
static inline void hali_test_settle(hali_device_t *dev, uint64_t base) {
  hali_device_memory_statistics_t st;
  for (int k = 0; k < 5000; ++k) {
    MEM_OK(hali_device_query_memory_statistics(dev, &st));
    if (st.bytes_live == base) return;
    usleep(1000);
  }
  ck_abort_msg("%llu bytes live, %llu before the call",
               (unsigned long long)st.bytes_live, (unsigned long long)base);
}

#endif /* HALI_TESTS_SETTLE_H */
