/* hali — the public C API (umbrella header).
 *
 * See doc/embedding.md.  Every fallible call returns hali_status_t: NULL on
 * success, otherwise an owned status (include/hali/base.h).
 */
#ifndef HALI_HALI_H
#define HALI_HALI_H

#include "hali/base.h"

#define HALI_VERSION_STRING "0.1.0"

#endif /* HALI_HALI_H */
