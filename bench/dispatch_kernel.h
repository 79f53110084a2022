/* The kernel bench/dispatch_bench times through every loader: as trivial
 * as a kernel gets while still doing observable work, so that what is
 * measured is the cost of getting to it.  out[0] += c. */
#ifndef HALI_BENCH_DISPATCH_KERNEL_H
#define HALI_BENCH_DISPATCH_KERNEL_H

#include <stdint.h>
#include <string.h>

#include "hali/kernel.h"

static inline int bench_bump(const hali_kernel_dispatch_state_t *d,
                             const hali_kernel_workgroup_state_t *w) {
  (void)w;
  int32_t *out = d->binding_ptrs[0];
  out[0] += (int32_t)d->constants[0];
  return 0;
}

#endif /* HALI_BENCH_DISPATCH_KERNEL_H */
