/* hali HAL — executables (see hal/executable.h). */
#include <stdlib.h>
#include <string.h>

#include "hal/executable.h"
#include "base/alloc.h"

static char *hali_strdup_or_empty(const char *s) {
  if (!s) s = "";
  size_t n = strlen(s) + 1;
  char *copy = hali_malloc(n);
  if (copy) memcpy(copy, s, n);
  return copy;
}

hali_status_t hali_hal_executable_initialize(
    hali_hal_executable_t *executable,
    const hali_hal_executable_vtable_t *vtable, const char *name,
    const char *format, const hali_hal_executable_export_t *exports,
    uint32_t export_count) {
  memset(executable, 0, sizeof(*executable));
  for (uint32_t i = 0; i < export_count; ++i) {
    const hali_hal_executable_export_t *e = &exports[i];
    const char *export_name = e->name ? e->name : "";
    if (e->binding_count > HALI_HAL_MAX_BINDINGS)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "executable '%s' export %u '%s' declares %u "
                              "bindings (max %d)",
                              name, i, export_name, e->binding_count,
                              HALI_HAL_MAX_BINDINGS);
    if (e->constant_count > HALI_HAL_MAX_PUSH_CONSTANTS)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "executable '%s' export %u '%s' declares %u "
                              "push constants (max %d)",
                              name, i, export_name, e->constant_count,
                              HALI_HAL_MAX_PUSH_CONSTANTS);
    if (!e->workgroup_size[0] || !e->workgroup_size[1] || !e->workgroup_size[2])
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "executable '%s' export %u '%s' has workgroup "
                              "size %ux%ux%u (each must be >= 1)",
                              name, i, export_name, e->workgroup_size[0],
                              e->workgroup_size[1], e->workgroup_size[2]);
  }
  hali_ref_init(&executable->ref, HALI_TYPE_EXECUTABLE, &vtable->base);
  executable->name = hali_strdup_or_empty(name);
  executable->format = hali_strdup_or_empty(format);
  executable->exports =
      export_count ? hali_calloc(export_count, sizeof(*executable->exports)) : NULL;
  bool ok = executable->name && executable->format &&
            (executable->exports || export_count == 0);
  for (uint32_t i = 0; ok && i < export_count; ++i) {
    executable->exports[i] = exports[i];
    executable->exports[i].name = hali_strdup_or_empty(exports[i].name);
    executable->export_count = i + 1;
    ok = executable->exports[i].name != NULL;
  }
  if (!ok) {
    hali_hal_executable_deinitialize(executable);
    return hali_status_annotate(hali_status_oom(),
                                "creating executable '%s'",
                                name);
  }
  executable->export_count = export_count;
  return HALI_OK;
}

void hali_hal_executable_deinitialize(hali_hal_executable_t *executable) {
  for (uint32_t i = 0; i < executable->export_count; ++i)
    hali_free((char *)(uintptr_t)executable->exports[i].name);
  hali_free(executable->exports);
  hali_free(executable->format);
  hali_free(executable->name);
  executable->exports = NULL;
  executable->export_count = 0;
  executable->name = executable->format = NULL;
}

void hali_hal_executable_retain(hali_hal_executable_t *executable) {
  if (executable) hali_ref_retain(&executable->ref);
}

void hali_hal_executable_release(hali_hal_executable_t *executable) {
  if (executable) hali_ref_release(&executable->ref);
}

const char *hali_hal_executable_name(const hali_hal_executable_t *executable) {
  return executable->name;
}

const char *hali_hal_executable_format(
    const hali_hal_executable_t *executable) {
  return executable->format;
}

uint32_t hali_hal_executable_export_count(
    const hali_hal_executable_t *executable) {
  return executable->export_count;
}

const hali_hal_executable_export_t *hali_hal_executable_export(
    const hali_hal_executable_t *executable, uint32_t ordinal) {
  return ordinal < executable->export_count ? &executable->exports[ordinal]
                                            : NULL;
}

hali_status_t hali_hal_executable_lookup_export(
    const hali_hal_executable_t *executable, const char *name,
    uint32_t *out_ordinal) {
  for (uint32_t i = 0; i < executable->export_count; ++i) {
    if (strcmp(executable->exports[i].name, name) == 0) {
      *out_ordinal = i;
      return HALI_OK;
    }
  }
  *out_ordinal = 0;
  return hali_status_make(HALI_STATUS_NOT_FOUND,
                          "executable '%s' has no export named '%s'",
                          executable->name, name);
}

hali_status_t hali_hal_executable_run_workgroup(
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_kernel_workgroup_state_t *workgroup, hali_hal_stop_t *stop) {
  const hali_hal_executable_vtable_t *vtable =
      (const hali_hal_executable_vtable_t *)executable->ref.vtable;
  return vtable->run_workgroup(executable, ordinal, dispatch, workgroup, stop);
}

/* ---- Executables made from a table of C kernels. ---- */

typedef struct hali_hal_library_executable_t {
  hali_hal_executable_t base;
  const hali_kernel_library_t *library; /* not owned; outlives us */
  void (*release)(void *user);           /* run on destroy, may be NULL */
  void *release_user;
} hali_hal_library_executable_t;

static void hali_hal_library_executable_destroy(hali_ref_t *ref) {
  hali_hal_library_executable_t *executable =
      (hali_hal_library_executable_t *)ref;
  hali_hal_executable_deinitialize(&executable->base);
  if (executable->release) executable->release(executable->release_user);
  hali_free(executable);
}

static hali_status_t hali_hal_library_executable_run_workgroup(
    hali_hal_executable_t *base, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_kernel_workgroup_state_t *workgroup, hali_hal_stop_t *stop) {
  (void)stop; /* a C kernel cannot be stopped inside a workgroup */
  hali_hal_library_executable_t *executable =
      (hali_hal_library_executable_t *)base;
  const hali_kernel_export_t *e = &executable->library->exports[ordinal];
  int code = e->fn(dispatch, workgroup);
  if (HALI_LIKELY(code == 0)) return HALI_OK;
  return hali_hal_executable_kernel_error(base, ordinal, code, workgroup);
}

hali_status_t hali_hal_executable_kernel_error(
    const hali_hal_executable_t *executable, uint32_t ordinal, int code,
    const hali_kernel_workgroup_state_t *workgroup) {
  return hali_status_make(HALI_STATUS_INTERNAL,
                          "kernel returned error code %d: executable '%s' "
                          "export %u '%s' workgroup (%u,%u,%u)",
                          code, executable->name, ordinal,
                          executable->exports[ordinal].name,
                          workgroup->workgroup_id_x, workgroup->workgroup_id_y,
                          workgroup->workgroup_id_z);
}

static const hali_hal_executable_vtable_t hali_hal_library_executable_vtable = {
    .base = {.destroy = hali_hal_library_executable_destroy},
    .run_workgroup = hali_hal_library_executable_run_workgroup,
};

hali_kernel_fn_t hali_hal_executable_direct_kernel(
    const hali_hal_executable_t *executable, uint32_t ordinal) {
  if (executable->ref.vtable != &hali_hal_library_executable_vtable.base ||
      ordinal >= executable->export_count)
    return NULL;
  return ((const hali_hal_library_executable_t *)executable)
      ->library->exports[ordinal]
      .fn;
}

hali_status_t hali_hal_executable_create_from_library(
    const hali_kernel_library_t *library, const char *format,
    hali_hal_executable_t **out_executable) {
  return hali_hal_executable_create_from_library_owned(library, format, NULL,
                                                       NULL, out_executable);
}

hali_status_t hali_hal_executable_create_from_library_owned(
    const hali_kernel_library_t *library, const char *format,
    void (*release)(void *user), void *user,
    hali_hal_executable_t **out_executable) {
  *out_executable = NULL;
  const char *name = library->name ? library->name : "";
  if (library->abi_version != HALI_KERNEL_ABI_VERSION)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "kernel library '%s' has ABI version %u; this "
                            "runtime supports %d",
                            name, library->abi_version,
                            HALI_KERNEL_ABI_VERSION);
  if (library->export_count && !library->exports)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "kernel library '%s' declares %u exports but no "
                            "table",
                            name, library->export_count);
  hali_hal_executable_export_t *exports =
      hali_calloc(library->export_count ? library->export_count : 1,
             sizeof(*exports));
  if (!exports)
    return hali_status_annotate(hali_status_oom(),
                                "loading kernel library '%s'",
                                name);
  for (uint32_t i = 0; i < library->export_count; ++i) {
    const hali_kernel_export_t *k = &library->exports[i];
    if (!k->fn) {
      hali_free(exports);
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "kernel library '%s' export %u '%s' has no "
                              "function",
                              name, i, k->name ? k->name : "");
    }
    exports[i].name = k->name;
    exports[i].binding_count = k->binding_count;
    exports[i].constant_count = k->constant_count;
    memcpy(exports[i].workgroup_size, k->workgroup_size,
           sizeof(exports[i].workgroup_size));
    exports[i].scratch_size = k->scratch_size;
  }
  hali_hal_library_executable_t *executable = hali_calloc(1, sizeof(*executable));
  if (!executable) {
    hali_free(exports);
    return hali_status_annotate(hali_status_oom(),
                                "loading kernel library '%s'",
                                name);
  }
  hali_status_t status = hali_hal_executable_initialize(
      &executable->base, &hali_hal_library_executable_vtable, name,
      format ? format : "static", exports, library->export_count);
  hali_free(exports);
  if (status) {
    hali_free(executable);
    return status;
  }
  executable->library = library;
  executable->release = release;
  executable->release_user = user;
  *out_executable = &executable->base;
  return HALI_OK;
}
