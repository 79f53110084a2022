/* Plain C functions for the ffi loader in tests/check_loaders.c.  Nothing
 * here knows about hali: parameters arrive as the module's export
 * signatures lay them out (tensor arguments as pointers, scalars by value,
 * tensor results as trailing pointers, then the workgroup id and count when
 * the export says workgroup_info).  The library has no
 * hali_kernel_library_query, so it is also the "not a native library"
 * case. */
#include <stdint.h>

#include "test_kernels.h"

void affine_ffi(const float *in, float a, int32_t n, float *out, uint32_t x,
                uint32_t y, uint32_t z, uint32_t count_x, uint32_t count_y,
                uint32_t count_z);
int fail_ffi(const int32_t *in, int32_t bad, int32_t *out, uint32_t x,
             uint32_t y, uint32_t z, uint32_t count_x, uint32_t count_y,
             uint32_t count_z);
void mixed_ffi(const double *in, double d, int64_t k, float f, int32_t i,
               double *out);

void affine_ffi(const float *in, float a, int32_t n, float *out, uint32_t x,
                uint32_t y, uint32_t z, uint32_t count_x, uint32_t count_y,
                uint32_t count_z) {
  (void)count_z;
  test_affine(in, a, n, out, test_linear_id(x, y, z, count_x, count_y));
}

int fail_ffi(const int32_t *in, int32_t bad, int32_t *out, uint32_t x,
             uint32_t y, uint32_t z, uint32_t count_x, uint32_t count_y,
             uint32_t count_z) {
  (void)count_z;
  return test_fail(in, bad, out, test_linear_id(x, y, z, count_x, count_y));
}

/* Every scalar type, in an order that would scramble if any were passed in
 * the wrong slot or width: out = [in[0] * d, k, f, i]. */
void mixed_ffi(const double *in, double d, int64_t k, float f, int32_t i,
               double *out) {
  out[0] = in[0] * d;
  out[1] = (double)k;
  out[2] = (double)f;
  out[3] = (double)i;
}
