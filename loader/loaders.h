/* hali — what the built-in executable loaders share (private to loader/):
 * the kernel-table helpers of loader_table.c and each loader's vtable, one
 * file per loader. */
#ifndef HALI_LOADER_LOADERS_H
#define HALI_LOADER_LOADERS_H

#include "hal/buffer.h"
#include "loader/executables.h"

/* The export's symbol (its name unless it declares one). */
const char *hali_loader_export_symbol(const hali_ir_export_t *x);
/* HAL export metadata from the module's declarations (NULL on OOM). */
hali_hal_executable_export_t *hali_loader_exports_from_ir(
    const hali_ir_executable_t *e);
/* Finds the executable's library relative to the module, then on the
 * search path, and dlopens it; errors list every place tried. */
HALI_MUST_USE hali_status_t hali_loader_open_library(
    const hali_executable_load_params_t *p, void **out_handle);
/* An executable over a kernel table (native and static formats); |dl|, if
 * any, is closed with it. */
HALI_MUST_USE hali_status_t hali_loader_executable_from_table(
    const hali_executable_load_params_t *p, const hali_kernel_library_t *lib,
    const char *format, void *dl, hali_hal_executable_t **out);

/* The static format's libraries: the one named |name| (NULL if none);
 * |*out_count| the number registered. */
const hali_kernel_library_t *hali_executable_registry_find_static(
    const hali_executable_registry_t *r, const char *name, size_t *out_count);

extern const hali_executable_loader_vtable_t hali_loader_native;
extern const hali_executable_loader_vtable_t hali_loader_static;
extern const hali_executable_loader_vtable_t hali_loader_ffi;
extern const hali_executable_loader_vtable_t hali_loader_bytecode;

#endif /* HALI_LOADER_LOADERS_H */
