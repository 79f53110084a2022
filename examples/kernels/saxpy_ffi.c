/* saxpy as a plain C function, called by hali's ffi loader through libffi.
 * The module declares
 *   export @saxpy(f32, tensor<?xf32>, tensor<?xf32>, i32) -> (tensor<?xf32>)
 *          symbol "saxpy_ffi" workgroup_info
 * so the parameters arrive in that order, the result buffer as a trailing
 * pointer, then the workgroup id and count.  Each workgroup does 64
 * elements. */
#include <stdint.h>

void saxpy_ffi(float a, const float *x, const float *y, int32_t n, float *out,
               uint32_t wg_x, uint32_t wg_y, uint32_t wg_z, uint32_t count_x,
               uint32_t count_y, uint32_t count_z);

void saxpy_ffi(float a, const float *x, const float *y, int32_t n, float *out,
               uint32_t wg_x, uint32_t wg_y, uint32_t wg_z, uint32_t count_x,
               uint32_t count_y, uint32_t count_z) {
  (void)wg_y, (void)wg_z, (void)count_x, (void)count_y, (void)count_z;
  int32_t begin = (int32_t)wg_x * 64, end = begin + 64;
  if (end > n) end = n;
  for (int32_t i = begin; i < end; ++i) out[i] = a * x[i] + y[i];
}
