/* ffi kernels for tests/check_validate.c: the new-user trial's broken
 * kernels (../shared/reviews/2026-12-01-new-user-trial.md, friction 1) and
 * their corrected forms. */
#include <math.h>
#include <stdint.h>

void fill_overrun(const float *x, float *out);
void fill_exact(const float *x, float *out);
void softmax_ffi(const float *x, int32_t n, float *out);
void scribble(float *x, float *out);

/* Writes 26 floats into a 10-float (40-byte) result: 64 bytes too many. */
void fill_overrun(const float *x, float *out) {
  for (int i = 0; i < 26; ++i) out[i] = x[0] + (float)i;
}
/* The same, writing exactly its 10 floats. */
void fill_exact(const float *x, float *out) {
  for (int i = 0; i < 10; ++i) out[i] = x[0] + (float)i;
}
/* Softmax over |n| floats, trusting |n| (the trial's kernel). */
void softmax_ffi(const float *x, int32_t n, float *out) {
  float max = x[0], sum = 0;
  for (int32_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  for (int32_t i = 0; i < n; ++i) sum += (out[i] = expf(x[i] - max));
  for (int32_t i = 0; i < n; ++i) out[i] /= sum;
}
/* Writes into its input. */
void scribble(float *x, float *out) {
  x[0] = 1;
  out[0] = 2;
}

/* The same two as a native kernel table (the kernel ABI). */
#include "hali/kernel.h"

static int native_fill(const hali_kernel_dispatch_state_t *d,
                       const hali_kernel_workgroup_state_t *w, int count) {
  (void)w;
  const float *x = d->binding_ptrs[0];
  float *out = d->binding_ptrs[1];
  for (int i = 0; i < count; ++i) out[i] = x[0] + (float)i;
  return 0;
}
static int native_overrun(const hali_kernel_dispatch_state_t *d,
                          const hali_kernel_workgroup_state_t *w) {
  return native_fill(d, w, 26);
}
static int native_exact(const hali_kernel_dispatch_state_t *d,
                        const hali_kernel_workgroup_state_t *w) {
  return native_fill(d, w, 10);
}

static const hali_kernel_export_t native_exports[] = {
    {"fill_overrun", native_overrun, 2, 0, {1, 1, 1}, 0},
    {"fill_exact", native_exact, 2, 0, {1, 1, 1}, 0},
};
static const hali_kernel_library_t native_library = {
    HALI_KERNEL_ABI_VERSION, "test_validate", 2, native_exports};

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version);
const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version) {
  return max_version >= HALI_KERNEL_ABI_VERSION ? &native_library : 0;
}
