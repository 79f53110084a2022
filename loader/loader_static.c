/* hali — the static executable loader: kernel tables the host links in and
 * registers by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loaders.h"

/* ------------------------------------------------------------------------ */
/* static */

static bool static_supports(void *self, const char *f) {
  return strcmp(f, "static") == 0;
}

static hali_status_t static_load(void *self,
                                 const hali_executable_load_params_t *p,
                                 hali_hal_executable_t **out) {
  const hali_executable_registry_t *r = self;
  const char *want = p->executable->library ? p->executable->library
                                            : p->executable->name;
  size_t count = 0;
  const hali_kernel_library_t *lib = hali_executable_registry_find_static(r, want, &count);
  if (lib) return hali_loader_executable_from_table(p, lib, "static", NULL, out);
  return hali_status_make(HALI_STATUS_NOT_FOUND,
                          "no static kernel library named '%s' is registered "
                          "(%zu registered)",
                          want, count);
}

const hali_executable_loader_vtable_t hali_loader_static = {
    NULL, static_supports, static_load, "static"};
