/* hali — the native executable loader: a shared library exporting the
 * kernel-table query function (include/hali/kernel.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loaders.h"

/* ------------------------------------------------------------------------ */
/* native */

static bool native_supports(void *self, const char *f) {
  return strcmp(f, "native") == 0;
}

static hali_status_t native_load(void *self,
                                 const hali_executable_load_params_t *p,
                                 hali_hal_executable_t **out) {
  void *dl;
  HALI_RETURN_IF_ERROR_PLAIN(hali_loader_open_library(p, &dl));
  dlerror();
  hali_kernel_library_query_fn_t query = (hali_kernel_library_query_fn_t)(
      uintptr_t)dlsym(dl, HALI_KERNEL_LIBRARY_QUERY_SYMBOL);
  if (!query) {
    const char *why = dlerror();
    hali_status_t s = hali_status_make(
        HALI_STATUS_NOT_FOUND, "library \"%s\" does not export %s: %s",
        p->executable->library, HALI_KERNEL_LIBRARY_QUERY_SYMBOL,
        why ? why : "symbol not found");
    dlclose(dl);
    return s;
  }
  const hali_kernel_library_t *lib = query(HALI_KERNEL_ABI_VERSION);
  if (!lib) {
    dlclose(dl);
    return hali_status_make(HALI_STATUS_UNIMPLEMENTED,
                            "library \"%s\" does not support kernel ABI "
                            "version %d",
                            p->executable->library, HALI_KERNEL_ABI_VERSION);
  }
  hali_status_t s = hali_loader_executable_from_table(p, lib, "native", dl, out);
  if (s) dlclose(dl);
  return s;
}

const hali_executable_loader_vtable_t hali_loader_native = {
    NULL, native_supports, native_load, "native"};
