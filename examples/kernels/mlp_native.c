/* The dense kernel of examples/mlp_native.hasm, in the native kernel ABI
 * (<hali/kernel.h>): one workgroup computes one output row,
 *
 *   y[r] = b[r] + sum_k W[r * n + k] * x[k],  then max(y[r], 0) if relu
 *
 * Bindings: W (row-major [rows x n]), x [n], b [rows], y [rows];
 * push constants: n, relu.  The summation order is the bytecode kernel's
 * (examples/mlp.hasm), so both give the same logits. */
#include <stddef.h>

#include "hali/kernel.h"

static int dense(const hali_kernel_dispatch_state_t *d,
                 const hali_kernel_workgroup_state_t *wg) {
  const uint32_t n = d->constants[0], relu = d->constants[1];
  const uint32_t r = wg->workgroup_id_x;
  const float *w = d->binding_ptrs[0], *x = d->binding_ptrs[1],
              *b = d->binding_ptrs[2];
  float *y = d->binding_ptrs[3];
  /* The ranges were validated against their buffers, not against n: a
   * module that binds too little gets an error, not a stray read. */
  if (((size_t)r + 1) * n * sizeof(float) > d->binding_lengths[0] ||
      (size_t)n * sizeof(float) > d->binding_lengths[1] ||
      ((size_t)r + 1) * sizeof(float) > d->binding_lengths[2] ||
      ((size_t)r + 1) * sizeof(float) > d->binding_lengths[3])
    return 1;
  const float *row = w + (size_t)r * n;
  float acc = 0.0f;
  for (uint32_t k = 0; k < n; ++k) acc += row[k] * x[k];
  acc += b[r];
  if (relu && !(acc > 0.0f)) acc = 0.0f;
  y[r] = acc;
  return 0;
}

static const hali_kernel_export_t exports[] = {
    {"dense", dense, 4, 2, {1, 1, 1}, 0},
};

static const hali_kernel_library_t library = {HALI_KERNEL_ABI_VERSION,
                                              "mlp_native", 1, exports};

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version);

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version) {
  return max_version >= HALI_KERNEL_ABI_VERSION ? &library : NULL;
}
