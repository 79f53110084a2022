/* hali — status codes and helpers internal to the library (the public
 * status API is include/hali/base.h).
 *
 * HALI_STATUS_DEFERRED: "not yet, and that is not an error" — an operation
 * that cannot finish now and will be resumed (today: an await on a fence
 * that is not ready, on a fiber that may suspend).  It is a status code of
 * its own, outside the public range 0..HALI_STATUS_CODE_COUNT-1, so no
 * program (fail, hal.fence.fail) and no host can produce it, and it is
 * never returned to an API caller: the interpreter turns it into a
 * suspended fiber (vm/interp_loop.h) and the scheduler resumes it.  As in
 * IREE, where IREE_STATUS_DEFERRED plays the same part.
 */
#ifndef HALI_BASE_STATUS_H
#define HALI_BASE_STATUS_H

#include "hali/base.h"

#define HALI_STATUS_DEFERRED ((hali_status_code_t)17)
_Static_assert(HALI_STATUS_DEFERRED >= HALI_STATUS_CODE_COUNT,
               "DEFERRED lies outside the public status codes");

/* The DEFERRED status: one static object (no allocation, cannot fail) that
 * every status function accepts; freeing it does nothing and annotating it
 * returns it unchanged.  Test for it by code, hali_status_is_deferred. */
hali_status_t hali_status_deferred(void);

static inline int hali_status_is_deferred(hali_status_t s) {
  return s != NULL && hali_status_code(s) == HALI_STATUS_DEFERRED;
}

#endif /* HALI_BASE_STATUS_H */
