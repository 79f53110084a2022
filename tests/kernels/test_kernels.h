/* The kernels tests/check_loaders.c runs through every loader, as plain C
 * bodies shared by the native library (test_native.c), the ffi library
 * (test_ffi.c) and the static kernels linked into the test itself; the
 * bytecode versions are written in hali bytecode in the test.
 *
 *   affine  out[i] = a * in[i] + L  for i in [4L, 4L + 4) and i < n, where
 *           L = (z * count_y + y) * count_x + x is the workgroup's linear
 *           id: every element records which workgroup wrote it, so a grid
 *           split wrongly among workers shows up as a different result.
 *   fail    out[L] = in[L] + 1, and workgroup L == bad returns error 42
 *           (after writing).
 *
 * Only <stdint.h>: kernels need nothing from hali but <hali/kernel.h>. */
#ifndef HALI_TESTS_KERNELS_TEST_KERNELS_H
#define HALI_TESTS_KERNELS_TEST_KERNELS_H

#include <stdint.h>

#define TEST_AFFINE_WORKGROUP_SIZE 4
#define TEST_FAIL_CODE 42

static inline uint32_t test_linear_id(uint32_t x, uint32_t y, uint32_t z,
                                      uint32_t count_x, uint32_t count_y) {
  return (z * count_y + y) * count_x + x;
}

static inline void test_affine(const float *in, float a, int32_t n, float *out,
                               uint32_t l) {
  int64_t begin = (int64_t)l * TEST_AFFINE_WORKGROUP_SIZE;
  int64_t end = begin + TEST_AFFINE_WORKGROUP_SIZE;
  if (end > n) end = n;
  for (int64_t i = begin; i < end; ++i) out[i] = a * in[i] + (float)l;
}

static inline int test_fail(const int32_t *in, int32_t bad, int32_t *out,
                            uint32_t l) {
  out[l] = in[l] + 1;
  return (int32_t)l == bad ? TEST_FAIL_CODE : 0;
}

#endif /* HALI_TESTS_KERNELS_TEST_KERNELS_H */
