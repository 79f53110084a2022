/* Kernel library for bench/dispatch_bench: the same trivial kernel twice,
 * as a native table (hali_kernel_library_query) and as a plain C function
 * for the ffi loader. */
#include "dispatch_kernel.h"

static const hali_kernel_export_t exports[] = {
    {"bump", bench_bump, 1, 1, {1, 1, 1}, 0},
};
static const hali_kernel_library_t library = {HALI_KERNEL_ABI_VERSION,
                                              "bench_native", 1, exports};

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version);
const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version) {
  return max_version >= HALI_KERNEL_ABI_VERSION ? &library : NULL;
}

void bump_ffi(int32_t c, int32_t *out);
void bump_ffi(int32_t c, int32_t *out) { out[0] += c; }
