/* saxpy as a native kernel: the kernel ABI of <hali/kernel.h>, in a shared
 * library that exports hali_kernel_library_query.  Bindings: x, y, out;
 * push constants: a (f32 bits), n.  Each workgroup does 64 elements. */
#include <string.h>

#include "hali/kernel.h"

static int saxpy(const hali_kernel_dispatch_state_t *d,
                 const hali_kernel_workgroup_state_t *w) {
  float a;
  memcpy(&a, &d->constants[0], sizeof(a));
  int32_t n = (int32_t)d->constants[1];
  const float *x = d->binding_ptrs[0], *y = d->binding_ptrs[1];
  float *out = d->binding_ptrs[2];
  int32_t begin = (int32_t)w->workgroup_id_x * 64, end = begin + 64;
  if (end > n) end = n;
  if ((size_t)n * sizeof(float) > d->binding_lengths[2]) return 1;
  for (int32_t i = begin; i < end; ++i) out[i] = a * x[i] + y[i];
  return 0;
}

static const hali_kernel_export_t exports[] = {
    {"saxpy", saxpy, 3, 2, {64, 1, 1}, 0},
};

static const hali_kernel_library_t library = {
    HALI_KERNEL_ABI_VERSION, "saxpy_native", 1, exports};

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version);

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version) {
  return max_version >= HALI_KERNEL_ABI_VERSION ? &library : NULL;
}
