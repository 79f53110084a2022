/* hali — the pluggable executable loader (DESIGN §5).
 *
 * A registry holds executable loaders in registration order.  Loading a
 * module's executable asks each loader whether it supports the executable's
 * format and lets the first that does load it; if none does, the error
 * lists the formats that are available.  Four loaders are built in:
 *
 *   native    a shared library exporting hali_kernel_library_query
 *   ffi       plain C functions in a shared library, called through libffi
 *   static    kernel tables the host registered by name (no dlopen)
 *   bytecode  kernel functions in the module itself, run by the interpreter
 *
 * Hosts add their own loaders with hali_executable_registry_register.
 * Registries are built once and then only read: loading is thread-safe.
 */
#ifndef HALI_LOADER_EXECUTABLES_H
#define HALI_LOADER_EXECUTABLES_H

#include "hal/executable.h"
#include "hali/kernel.h"
#include "vm/vm.h"

/* What a loader is given to load one executable. */
typedef struct hali_executable_load_params_s {
  const hali_ir_executable_t *executable; /* the module's declaration */
  /* Its module (bytecode kernels), immutable: an executable that keeps it
   * retains it (there is no way back from a module to its executables). */
  hali_vm_module_t *module;
  /* Where relative library paths are looked up, in order: the module's
   * directory, then these directories. */
  const char *module_dir;                 /* may be NULL */
  const char *const *search_paths;
  size_t search_path_count;
  /* The device kind the executable is for ("local-sync", "local-task"):
   * what `if device "K"` conditions of variants are checked against; NULL
   * = unknown (such variants are refused). */
  const char *device_kind;
  /* Where the variant choice is reported ("[hal] executable @e: ..."),
   * may be NULL. */
  const hali_hal_tracer_t *tracer;
} hali_executable_load_params_t;

typedef struct hali_executable_loader_vtable_s {
  /* Frees |self| when the registry is destroyed (may be NULL). */
  void (*destroy)(void *self);
  /* Whether this loader handles |format|. */
  bool (*supports)(void *self, const char *format);
  /* Loads |params->executable|; the caller owns |*out|.  Errors name the
   * executable, and the export or symbol at fault. */
  hali_status_t (*load)(void *self, const hali_executable_load_params_t *params,
                        hali_hal_executable_t **out);
  /* The format(s) it loads, for messages ("native"). */
  const char *formats;
} hali_executable_loader_vtable_t;

typedef struct hali_executable_registry_s hali_executable_registry_t;

/* A registry with the four built-in loaders. */
HALI_MUST_USE hali_status_t
hali_executable_registry_create(hali_executable_registry_t **out);
void hali_executable_registry_free(hali_executable_registry_t *r);

/* Appends a loader (tried after those already registered).  The registry
 * calls |vtable->destroy(self)| when it is freed. */
HALI_MUST_USE hali_status_t hali_executable_registry_register(
    hali_executable_registry_t *r, const hali_executable_loader_vtable_t *vtable,
    void *self);

/* Registers a kernel table for the static format under |library->name|;
 * |library| must outlive the registry. */
HALI_MUST_USE hali_status_t hali_executable_registry_register_static(
    hali_executable_registry_t *r, const hali_kernel_library_t *library);

/* Builds an executable for |params->executable| from a kernel table, as
 * the static and native loaders do: exports matched by symbol, binding
 * and constant counts checked against the declarations.  |library| must
 * outlive the executable; |format| labels it.  For loaders that produce
 * kernel tables (the public API's host loaders). */
HALI_MUST_USE hali_status_t hali_executable_create_from_table(
    const hali_executable_load_params_t *params,
    const hali_kernel_library_t *library, const char *format,
    hali_hal_executable_t **out);

/* Loads one executable with the first loader that supports its format.
 * An executable with variants (doc/asm.md) is loaded with its first
 * variant whose conditions hold, that a loader supports and that loads;
 * when none does, the error lists every variant and why it was refused.
 * |*out_variant| (may be NULL) is the index of the one used. */
HALI_MUST_USE hali_status_t hali_executable_registry_load_variant(
    const hali_executable_registry_t *r,
    const hali_executable_load_params_t *params, hali_hal_executable_t **out,
    uint32_t *out_variant);
/* hali_executable_registry_load_variant without the index. */
HALI_MUST_USE hali_status_t hali_executable_registry_load(
    const hali_executable_registry_t *r,
    const hali_executable_load_params_t *params, hali_hal_executable_t **out);

/* Loads every executable of |link|'s module into link->executables (the
 * link keeps them until hali_vm_link_free; recorded work may retain them
 * longer, and a bytecode executable keeps the module alive on its own).
 * |module_path| (may be NULL) is the module's file, whose directory is
 * searched first; HALI_EXECUTABLE_PATH (a colon-separated list) is searched
 * after |search_paths|.  FAILED_PRECONDITION if |link| already has them. */
HALI_MUST_USE hali_status_t hali_executable_registry_load_link(
    const hali_executable_registry_t *r, hali_vm_link_t *link,
    const char *module_path, const char *const *search_paths,
    size_t search_path_count);
/* hali_executable_registry_load_link for a device of kind |device_kind|
 * (variant conditions; NULL = unknown), reporting each variant choice to
 * |tracer| (may be NULL). */
HALI_MUST_USE hali_status_t hali_executable_registry_load_link_on(
    const hali_executable_registry_t *r, hali_vm_link_t *link,
    const char *module_path, const char *const *search_paths,
    size_t search_path_count, const char *device_kind,
    const hali_hal_tracer_t *tracer);

#endif /* HALI_LOADER_EXECUTABLES_H */
