/* hali HAL — executables: named sets of exported kernels.
 *
 * An executable is a reference-counted object with a vtable: destroy, and
 * run_workgroup, which runs ONE workgroup of export |ordinal|.  Executable
 * loaders (native, ffi, static, bytecode) each provide a vtable; the queue
 * only ever calls run_workgroup, after it has validated the dispatch
 * against the export metadata (binding count, constant count, binding
 * ranges), so implementations never repeat those checks.
 *
 * Thread-safety: immutable after creation; run_workgroup is called from
 * several worker threads at once.
 */
#ifndef HALI_HAL_EXECUTABLE_H
#define HALI_HAL_EXECUTABLE_H

#include "hal/common.h"
#include "hal/stop.h"
#include "hali/kernel.h"

/* Limits of the dispatch interface. */
#define HALI_HAL_MAX_BINDINGS 32
#define HALI_HAL_MAX_PUSH_CONSTANTS 64
/* Workgroup counts both CPU devices accept (checked when a dispatch is
 * recorded, and again before it runs):
 *  - each dimension at most HALI_HAL_MAX_WORKGROUP_COUNT (2^31 - 1): what
 *    every kernel can be told.  The kernel ABI's counts and ids are uint32,
 *    but the VM's registers and a bytecode kernel's six workgroup
 *    parameters are i32, so a larger count would reach them negative;
 *  - x * y * z at most HALI_HAL_MAX_WORKGROUPS (2^32 - 1), computed without
 *    wrapping.  Every workgroup is one kernel call, so a grid beyond that is
 *    a mistake rather than work a CPU finishes, and the bound keeps the
 *    local-task workers' 64-bit chunk counter (which ends at most one
 *    chunk per worker past the total) far from wrapping.
 * A zero in any dimension is an empty grid: nothing runs, and that is not
 * an error (it is the exact product, not a wrapped one). */
#define HALI_HAL_MAX_WORKGROUP_COUNT 0x7FFFFFFFu
#define HALI_HAL_MAX_WORKGROUPS 0xFFFFFFFFu

typedef struct hali_hal_executable_export_t {
  const char *name;
  uint32_t binding_count;
  uint32_t constant_count;
  uint32_t workgroup_size[3];
  uint32_t scratch_size; /* bytes of per-workgroup scratch */
  /* Bit i: binding i is only read (a tensor parameter).  0 = unknown:
   * every binding may be written.  Used by validation (hal/validate.h). */
  uint32_t read_only_bindings;
} hali_hal_executable_export_t;

typedef struct hali_hal_executable_vtable_t {
  hali_ref_vtable_t base; /* destroy: release everything, free the object */
  /* Runs workgroup |workgroup| of export |ordinal| (< export_count).
   * Returns OK or a status describing the failure; the queue annotates it
   * with the executable, export and workgroup.  |stop| (NULL: none) is
   * the submitter's stop request (hal/stop.h): the queue checks it before
   * every workgroup; an implementation that can stop inside one (the
   * bytecode interpreter, at its next branch) watches it too. */
  hali_status_t (*run_workgroup)(hali_hal_executable_t *executable,
                                 uint32_t ordinal,
                                 const hali_kernel_dispatch_state_t *dispatch,
                                 const hali_kernel_workgroup_state_t *workgroup,
                                 hali_hal_stop_t *stop);
} hali_hal_executable_vtable_t;

/* The common part; implementations embed it first. */
struct hali_hal_executable_t {
  hali_ref_t ref;
  char *name;   /* owned */
  char *format; /* owned: "native", "static", ... */
  uint32_t export_count;
  hali_hal_executable_export_t *exports; /* owned, names owned */
};

/* For implementations: fills the common part, copying |name|, |format| and
 * the |export_count| |exports| (and their names).  Validates the metadata
 * (INVALID_ARGUMENT naming the export when a count exceeds the limits above
 * or a workgroup size is 0).  On error nothing needs deinitializing. */
HALI_MUST_USE hali_status_t hali_hal_executable_initialize(
    hali_hal_executable_t *executable,
    const hali_hal_executable_vtable_t *vtable, const char *name,
    const char *format, const hali_hal_executable_export_t *exports,
    uint32_t export_count);
/* For implementations' destroy: frees what initialize allocated. */
void hali_hal_executable_deinitialize(hali_hal_executable_t *executable);

void hali_hal_executable_retain(hali_hal_executable_t *executable);
void hali_hal_executable_release(hali_hal_executable_t *executable);

const char *hali_hal_executable_name(const hali_hal_executable_t *executable);
const char *hali_hal_executable_format(const hali_hal_executable_t *executable);
uint32_t hali_hal_executable_export_count(
    const hali_hal_executable_t *executable);
/* Export |ordinal| (< export_count), borrowed; NULL when out of range. */
const hali_hal_executable_export_t *hali_hal_executable_export(
    const hali_hal_executable_t *executable, uint32_t ordinal);
/* Looks an export up by name; NOT_FOUND naming the export and the
 * executable. */
HALI_MUST_USE hali_status_t hali_hal_executable_lookup_export(
    const hali_hal_executable_t *executable, const char *name,
    uint32_t *out_ordinal);

/* Calls the vtable's run_workgroup (no validation: the queue's job). */
HALI_MUST_USE hali_status_t hali_hal_executable_run_workgroup(
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_kernel_workgroup_state_t *workgroup, hali_hal_stop_t *stop);
/* The C function behind export |ordinal| of an executable made from a
 * table of C kernels (below), else NULL: the queue calls it itself, the
 * call run_workgroup would make, and turns a non-zero return into
 * hali_hal_executable_kernel_error's status (run_workgroup's). */
hali_kernel_fn_t hali_hal_executable_direct_kernel(
    const hali_hal_executable_t *executable, uint32_t ordinal);
HALI_MUST_USE hali_status_t hali_hal_executable_kernel_error(
    const hali_hal_executable_t *executable, uint32_t ordinal, int code,
    const hali_kernel_workgroup_state_t *workgroup);

/* Makes an executable from a table of C kernels (kernel ABI): the helper
 * behind the "static" and "native" formats.  |library| (and the kernel
 * functions) must outlive the executable; names and metadata are copied.
 * |format| labels the executable ("static" if NULL).  INVALID_ARGUMENT for
 * an ABI version other than HALI_KERNEL_ABI_VERSION, a NULL kernel or
 * invalid metadata.  A kernel returning non-zero fails its dispatch with
 * INTERNAL naming the executable, export, workgroup id and the code. */
HALI_MUST_USE hali_status_t hali_hal_executable_create_from_library(
    const hali_kernel_library_t *library, const char *format,
    hali_hal_executable_t **out_executable);

/* Same, but |release(user)| runs when the executable is destroyed (not on
 * failure), so |library| may be memory the caller frees there (a table
 * built at load time, a dlopen handle). */
HALI_MUST_USE hali_status_t hali_hal_executable_create_from_library_owned(
    const hali_kernel_library_t *library, const char *format,
    void (*release)(void *user), void *user,
    hali_hal_executable_t **out_executable);

#endif /* HALI_HAL_EXECUTABLE_H */
