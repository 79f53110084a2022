/* hali — the kernel ABI.
 *
 * This header is all a kernel author needs: it includes nothing but
 * <stdint.h> and <stddef.h> and declares no functions, so kernels can be
 * compiled without linking against hali at all.
 *
 * A kernel runs ONE workgroup of a dispatch.  The runtime calls it once per
 * workgroup id in [0, count_x) x [0, count_y) x [0, count_z), possibly from
 * several worker threads at once and in any order, so a kernel must only
 * write the parts of its bindings that belong to its workgroup.
 *
 *   int my_kernel(const hali_kernel_dispatch_state_t *dispatch,
 *                 const hali_kernel_workgroup_state_t *workgroup);
 *
 * It returns 0 on success or a non-zero error code of its choosing; a
 * non-zero return fails the dispatch: the submission's signal fence fails
 * with a status naming the executable, the export, the workgroup id and the
 * code.  Binding ranges have been validated against their buffers before any
 * workgroup runs: binding_ptrs[i] points at binding_lengths[i] valid bytes.
 *
 * Both states are read-only for the kernel and valid only during the call.
 */
#ifndef HALI_KERNEL_H
#define HALI_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a struct below changes layout.  Libraries report the
 * version they were compiled against (hali_kernel_library_t.abi_version)
 * and the runtime refuses versions it does not know. */
#define HALI_KERNEL_ABI_VERSION 1

/* Per-dispatch state, shared by every workgroup of one dispatch. */
typedef struct hali_kernel_dispatch_state_t {
  /* Number of workgroups in each dimension (each >= 1).  The devices
   * accept at most 2^31 - 1 per dimension and 2^32 - 1 in all (x * y * z,
   * never wrapped), so the linear workgroup index
   * (z * count_y + y) * count_x + x fits in a uint32_t. */
  uint32_t workgroup_count_x;
  uint32_t workgroup_count_y;
  uint32_t workgroup_count_z;
  /* The export's declared workgroup size (invocations per workgroup). */
  uint32_t workgroup_size_x;
  uint32_t workgroup_size_y;
  uint32_t workgroup_size_z;
  /* Push constants: 32-bit values, exactly the export's declared count. */
  uint32_t constant_count;
  const uint32_t *constants;
  /* Bindings: exactly the export's declared count, in binding order.
   * binding_ptrs[i] is the first byte of binding i, binding_lengths[i] its
   * length in bytes. */
  uint32_t binding_count;
  void *const *binding_ptrs;
  const size_t *binding_lengths;
} hali_kernel_dispatch_state_t;

/* Per-workgroup state. */
typedef struct hali_kernel_workgroup_state_t {
  uint32_t workgroup_id_x;
  uint32_t workgroup_id_y;
  uint32_t workgroup_id_z;
  /* Index of the worker thread running this workgroup, in [0, workers). */
  uint32_t worker_id;
  /* Scratch memory private to this call: at least the export's declared
   * scratch size, 64-byte aligned, contents undefined.  NULL when 0. */
  void *scratch;
  size_t scratch_size;
} hali_kernel_workgroup_state_t;

typedef int (*hali_kernel_fn_t)(const hali_kernel_dispatch_state_t *dispatch,
                                const hali_kernel_workgroup_state_t *workgroup);

/* One exported kernel and its interface. */
typedef struct hali_kernel_export_t {
  const char *name;
  hali_kernel_fn_t fn;
  uint32_t binding_count;   /* bindings the kernel reads/writes */
  uint32_t constant_count;  /* 32-bit push constants it reads */
  uint32_t workgroup_size[3];
  uint32_t scratch_size;    /* bytes of per-workgroup scratch it needs */
} hali_kernel_export_t;

/* A table of kernels: what a "native" shared library returns from its query
 * function and what a host application registers for the "static" format. */
typedef struct hali_kernel_library_t {
  uint32_t abi_version;  /* HALI_KERNEL_ABI_VERSION at compile time */
  const char *name;
  uint32_t export_count;
  const hali_kernel_export_t *exports;
} hali_kernel_library_t;

/* A native library exports a function with this name and type.  It returns
 * its table if it supports |max_abi_version| (or older), else NULL. */
#define HALI_KERNEL_LIBRARY_QUERY_SYMBOL "hali_kernel_library_query"
typedef const hali_kernel_library_t *(*hali_kernel_library_query_fn_t)(
    uint32_t max_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* HALI_KERNEL_H */
