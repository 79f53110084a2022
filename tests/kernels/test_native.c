/* A native kernel library for tests/check_loaders.c: the kernel ABI of
 * <hali/kernel.h> around the bodies in test_kernels.h. */
#include <string.h>

#include "hali/kernel.h"
#include "test_kernels.h"

static uint32_t linear_id(const hali_kernel_dispatch_state_t *d,
                          const hali_kernel_workgroup_state_t *w) {
  return test_linear_id(w->workgroup_id_x, w->workgroup_id_y,
                        w->workgroup_id_z, d->workgroup_count_x,
                        d->workgroup_count_y);
}

static int affine(const hali_kernel_dispatch_state_t *d,
                  const hali_kernel_workgroup_state_t *w) {
  float a;
  memcpy(&a, &d->constants[0], sizeof(a));
  test_affine(d->binding_ptrs[0], a, (int32_t)d->constants[1],
              d->binding_ptrs[1], linear_id(d, w));
  return 0;
}

static int fail(const hali_kernel_dispatch_state_t *d,
                const hali_kernel_workgroup_state_t *w) {
  return test_fail(d->binding_ptrs[0], (int32_t)d->constants[0],
                   d->binding_ptrs[1], linear_id(d, w));
}

static const hali_kernel_export_t exports[] = {
    {"affine", affine, 2, 2, {TEST_AFFINE_WORKGROUP_SIZE, 1, 1}, 0},
    {"fail", fail, 2, 1, {1, 1, 1}, 0},
};

static const hali_kernel_library_t library = {HALI_KERNEL_ABI_VERSION,
                                              "test_native", 2, exports};

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version);

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version) {
  return max_version >= HALI_KERNEL_ABI_VERSION ? &library : NULL;
}
