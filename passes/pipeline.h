/* hali — the load-time pass pipeline (doc/passes.md).
 *
 * An ordered list of IR -> IR passes that the loader runs on every module
 * before verification.  Each pass leaves modules it has nothing to do for
 * unchanged (a HAL-level module goes through untouched), so running the
 * pipeline twice is the same as running it once.
 */
#ifndef HALI_PASSES_PIPELINE_H
#define HALI_PASSES_PIPELINE_H

#include <stdbool.h>

#include "hali/base.h"
#include "vm/ir.h"

typedef hali_status_t (*hali_pass_fn_t)(hali_ir_module_t *m);

typedef struct hali_pass_s {
  const char *name;
  const char *summary;
  hali_pass_fn_t run;
} hali_pass_t;

/* The pipeline in order; |*out_count| passes. */
const hali_pass_t *hali_passes(uint32_t *out_count);

typedef struct hali_pass_options_s {
  /* Comma-separated pass names to run (in pipeline order); NULL = all. */
  const char *only;
  /* Run none (--no-passes). */
  bool none;
  /* Stop after this pass (hali dis --after=PASS); NULL or "all" = run to
   * the end. */
  const char *after;
} hali_pass_options_t;

/* Checks |o| names known passes; the error lists them. */
HALI_MUST_USE hali_status_t hali_pass_options_check(const hali_pass_options_t *o);

/* Runs the pipeline over |m| in place.  On error |m| is in an unspecified
 * (but freeable) state and must not be run. */
HALI_MUST_USE hali_status_t hali_passes_run(hali_ir_module_t *m,
                                            const hali_pass_options_t *o);

/* hali_passes_run for a module known to hold no tensor-level function
 * (hali_ir_module_is_tensor_level is false; hali_ir_verify_fused proves
 * it): the same, without the walk over every instruction that finds out. */
HALI_MUST_USE hali_status_t hali_passes_run_hal_level(
    hali_ir_module_t *m, const hali_pass_options_t *o);

/* The passes (one file each under passes/). */
HALI_MUST_USE hali_status_t hali_pass_func_conversion(hali_ir_module_t *m);
HALI_MUST_USE hali_status_t hali_pass_materialize_interfaces(hali_ir_module_t *m);
/* materialize-interfaces for a module with no tensor-level code: the
 * exports' layouts only (there are no dispatch sites to annotate). */
HALI_MUST_USE hali_status_t hali_pass_materialize_exports(hali_ir_module_t *m);
HALI_MUST_USE hali_status_t hali_pass_stream_to_hal(hali_ir_module_t *m);

/* Part of stream-to-hal (passes/copy_on_write.c): ties that would write
 * storage |f| does not own, or a value still read, get a tensor.clone to
 * write instead.  |cfg| (passes/tensor_cfg.h; NULL or one block: none)
 * says which tensors enter each block and which outlive it. */
struct hali_tcfg_s;
HALI_MUST_USE hali_status_t hali_pass_copy_on_write(
    hali_ir_module_t *m, hali_ir_func_t *f, const struct hali_tcfg_s *cfg);

#endif /* HALI_PASSES_PIPELINE_H */
