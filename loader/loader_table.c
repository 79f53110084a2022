/* hali — kernel tables as executables (native and static formats), and
 * the helpers every built-in loader shares (loader/loaders.h). */
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loaders.h"
#include "base/alloc.h"

/* ------------------------------------------------------------------------ */
/* Shared helpers. */

/* The export's symbol (its name unless it declares one). */
const char *hali_loader_export_symbol(const hali_ir_export_t *x) {
  return x->symbol ? x->symbol : x->name;
}

/* The bindings an export only reads: its tensor parameters, which come
 * first (tensor arguments, then tensor results: hali_ir_export_interface).
 * Validation maps them read-only (hal/validate.h). */
static uint32_t read_only_bindings(const hali_ir_export_t *x) {
  uint32_t mask = 0, binding = 0;
  for (uint32_t i = 0; i < x->param_count && binding < 32; ++i)
    if (x->params[i].type == HALI_TYPE_NONE) mask |= 1u << binding++;
  return mask;
}

/* HAL export metadata from the module's declarations. */
hali_hal_executable_export_t *hali_loader_exports_from_ir(
    const hali_ir_executable_t *e) {
  hali_hal_executable_export_t *out =
      hali_calloc(e->export_count ? e->export_count : 1, sizeof(*out));
  if (!out) return NULL;
  for (uint32_t i = 0; i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    out[i].name = x->name;
    hali_ir_export_interface(x, &out[i].binding_count, &out[i].constant_count);
    out[i].read_only_bindings = read_only_bindings(x);
    memcpy(out[i].workgroup_size, x->workgroup_size, sizeof(x->workgroup_size));
  }
  return out;
}

/* Finds |e->library| relative to the module, then on the search path, and
 * dlopens it.  Errors list every place tried with dlerror() text. */
hali_status_t hali_loader_open_library(const hali_executable_load_params_t *p,
                                  void **out_handle) {
  const char *lib = p->executable->library;
  *out_handle = NULL;
  if (!lib || !lib[0])
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "no library given (library \"PATH\")");
  char tried[2048] = "";
  size_t n = 0;
  char path[PATH_MAX];
  size_t dirs = 1 + p->search_path_count;
  for (size_t i = 0; i <= dirs; ++i) {
    const char *dir = i == 0 ? NULL
                      : i == 1 ? p->module_dir
                               : p->search_paths[i - 2];
    if (i == 0 && lib[0] != '/') continue; /* absolute paths only as given */
    if (i > 0 && (lib[0] == '/' || !dir)) continue;
    if (i == 0) snprintf(path, sizeof(path), "%s", lib);
    else snprintf(path, sizeof(path), "%s/%s", dir, lib);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *out_handle = h;
      return HALI_OK;
    }
    const char *why = dlerror();
    if (n < sizeof(tried) - 1)
      n += (size_t)snprintf(tried + n, sizeof(tried) - n, "\n    %s: %s",
                            path, why ? why : "not found");
  }
  return hali_status_make(HALI_STATUS_NOT_FOUND,
                          "cannot load library \"%s\"; tried:%s", lib,
                          n ? tried : " (no search directories)");
}

/* Owned pieces of a native or static executable, freed on destroy. */
typedef struct {
  hali_kernel_library_t table;
  hali_kernel_export_t *exports;
  void *dl;
} kernel_table_t;

static void kernel_table_free(void *user) {
  kernel_table_t *t = user;
  hali_free(t->exports);
  if (t->dl) dlclose(t->dl);
  hali_free(t);
}

/* Builds an executable whose exports follow the module's declarations,
 * matched by symbol in |lib|, with counts checked against the signature. */
hali_status_t hali_loader_executable_from_table(
    const hali_executable_load_params_t *p, const hali_kernel_library_t *lib,
    const char *format, void *dl, hali_hal_executable_t **out) {
  const hali_ir_executable_t *e = p->executable;
  kernel_table_t *t = hali_calloc(1, sizeof(*t));
  if (!t) return hali_status_oom();
  t->dl = dl;
  hali_status_t s = HALI_OK;
  if (lib->abi_version != HALI_KERNEL_ABI_VERSION) {
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "kernel library '%s' has ABI version %u; this "
                         "runtime supports %d",
                         lib->name ? lib->name : "?", lib->abi_version,
                         HALI_KERNEL_ABI_VERSION);
    goto fail;
  }
  t->exports = hali_calloc(e->export_count ? e->export_count : 1,
                      sizeof(hali_kernel_export_t));
  if (!t->exports) {
    s = hali_status_oom();
    goto fail;
  }
  for (uint32_t i = 0; i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    const char *sym = hali_loader_export_symbol(x);
    const hali_kernel_export_t *k = NULL;
    for (uint32_t j = 0; j < lib->export_count && !k; ++j)
      if (lib->exports[j].name && strcmp(lib->exports[j].name, sym) == 0)
        k = &lib->exports[j];
    if (!k) {
      s = hali_status_make(HALI_STATUS_NOT_FOUND,
                           "export @%s: kernel '%s' not found in library '%s'",
                           x->name, sym, lib->name ? lib->name : "?");
      goto fail;
    }
    uint32_t bindings, constants;
    hali_ir_export_interface(x, &bindings, &constants);
    if (k->binding_count != bindings || k->constant_count != constants) {
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "export @%s: kernel '%s' takes %u binding(s) and %u "
                           "push constant(s) but the signature declares %u "
                           "and %u",
                           x->name, sym, k->binding_count, k->constant_count,
                           bindings, constants);
      goto fail;
    }
    t->exports[i] = *k;
    t->exports[i].name = x->name;
    /* The module's workgroup size wins when it declares one (anything but
     * the default [1, 1, 1], tested per dimension: a 32-bit product of the
     * three can wrap to 1). */
    if (x->workgroup_size[0] != 1 || x->workgroup_size[1] != 1 ||
        x->workgroup_size[2] != 1 || !k->workgroup_size[0])
      memcpy(t->exports[i].workgroup_size, x->workgroup_size,
             sizeof(x->workgroup_size));
  }
  t->table.abi_version = HALI_KERNEL_ABI_VERSION;
  t->table.name = e->name;
  t->table.export_count = e->export_count;
  t->table.exports = t->exports;
  s = hali_hal_executable_create_from_library_owned(&t->table, format,
                                                    kernel_table_free, t, out);
  if (!s) {
    for (uint32_t i = 0; i < e->export_count; ++i)
      (*out)->exports[i].read_only_bindings =
          read_only_bindings(&e->exports[i]);
    return HALI_OK;
  }
  t->dl = NULL; /* the caller closes it */
fail:
  hali_free(t->exports);
  hali_free(t);
  return s;
}

hali_status_t hali_executable_create_from_table(
    const hali_executable_load_params_t *params,
    const hali_kernel_library_t *library, const char *format,
    hali_hal_executable_t **out) {
  *out = NULL;
  if (!library)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "the loader returned no kernel table");
  return hali_loader_executable_from_table(params, library, format, NULL, out);
}
