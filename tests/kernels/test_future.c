/* A kernel library built for a kernel ABI newer than this hali's: its
 * query declines every version hali can ask for, and the native loader
 * must fail the load naming the library and the version (check_loaders). */
#include "hali/kernel.h"

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version);

const hali_kernel_library_t *hali_kernel_library_query(uint32_t max_version) {
  static const hali_kernel_library_t library = {HALI_KERNEL_ABI_VERSION + 1,
                                                "test_future", 0, NULL};
  return max_version >= library.abi_version ? &library : NULL;
}
