/* hali — the reference-counted object header's id counter (base/ref.h). */
#include <stdatomic.h>

#include "base/ref.h"

static atomic_uint_fast32_t hali_ref_ids;

uint32_t hali_ref_next_id(void) {
  return (uint32_t)atomic_fetch_add_explicit(&hali_ref_ids, 1,
                                             memory_order_relaxed) + 1;
}
