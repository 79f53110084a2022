/* hali — the bytecode executable loader: kernels written in hali bytecode in
 * the module itself, one interpreter call per workgroup. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loaders.h"
#include "base/alloc.h"

/* ------------------------------------------------------------------------ */
/* bytecode: kernel functions of the module, one interpreter call per
 * workgroup:
 *
 *   func @k(<each parameter: tensors as !hal.buffer, scalars as is>,
 *           <each result: !hal.buffer>,
 *           %wg_x: i32, %wg_y: i32, %wg_z: i32,
 *           %count_x: i32, %count_y: i32, %count_z: i32)
 *
 * Tensor arguments arrive as read-only buffers over their bindings, results
 * as writable ones.
 *
 * Register stacks are cached in slots indexed by worker id.  A workgroup
 * takes its slot's stack by atomic exchange and puts it back afterwards, so
 * one executable can serve several devices at once (two local-task devices
 * both have a worker 0): whoever finds the slot empty makes a stack of its
 * own and frees it if the slot has been refilled meanwhile. */

#define BYTECODE_STACKS 256

typedef struct {
  hali_hal_executable_t base;
  /* Retained: the module is immutable and knows nothing of its
   * executables, so this is no cycle, and work recorded with this
   * executable (a command buffer) may outlive the context that loaded it.
   * Kernels run the module unlinked (no imports, no executables). */
  hali_vm_module_t *module;
  const hali_vm_func_t **fns;
  const hali_ir_export_t **decls; /* into module->ir, which we keep alive */
  /* Per export, per parameter: what a store into that input binding is told
   * ("export @k binding 0, a read-only input binding"); NULL for scalar
   * parameters.  Built once at load, borrowed by the wrapped buffers. */
  char ***input_labels;
  _Atomic(hali_vm_stack_t *) stacks[BYTECODE_STACKS];
} bytecode_executable_t;

static void bytecode_destroy(hali_ref_t *ref) {
  bytecode_executable_t *e = (bytecode_executable_t *)ref;
  for (int i = 0; i < BYTECODE_STACKS; ++i)
    hali_vm_stack_free(atomic_load(&e->stacks[i]));
  for (uint32_t i = 0; e->input_labels && i < e->base.export_count; ++i) {
    for (uint32_t k = 0; e->input_labels[i] && k < e->decls[i]->param_count;
         ++k)
      hali_free(e->input_labels[i][k]);
    hali_free(e->input_labels[i]);
  }
  hali_free(e->input_labels);
  hali_free(e->fns);
  hali_free(e->decls);
  hali_hal_executable_deinitialize(&e->base);
  hali_vm_module_release(e->module);
  hali_free(e);
}

static hali_status_t bytecode_run_workgroup(
    hali_hal_executable_t *base, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *d,
    const hali_kernel_workgroup_state_t *w, hali_hal_stop_t *stop) {
  bytecode_executable_t *e = (bytecode_executable_t *)base;
  const hali_vm_func_t *fn = e->fns[ordinal];
  const hali_ir_export_t *decl = e->decls[ordinal];
  _Atomic(hali_vm_stack_t *) *slot = &e->stacks[w->worker_id % BYTECODE_STACKS];
  hali_vm_stack_t *st = atomic_exchange_explicit(slot, NULL,
                                                 memory_order_acquire);
  if (!st) HALI_RETURN_IF_ERROR_PLAIN(hali_vm_stack_create(0, &st));
  hali_value_t args[HALI_HAL_MAX_BINDINGS + HALI_HAL_MAX_PUSH_CONSTANTS + 6];
  uint32_t a = 0, binding = 0, constant = 0;
  hali_status_t s = HALI_OK;
  hali_hal_buffer_params_t params = {
      HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_HOST_VISIBLE |
          HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_MAPPING |
          HALI_HAL_BUFFER_USAGE_TRANSFER};
  uint32_t total = decl->param_count + decl->result_count;
  for (uint32_t i = 0; !s && i < total; ++i) {
    hali_type_t t = i < decl->param_count ? decl->params[i].type
                                          : HALI_TYPE_NONE;
    hali_value_t *v = &args[a++];
    if (t == HALI_TYPE_NONE) {
      hali_hal_buffer_t *b = NULL;
      s = hali_hal_buffer_wrap_host(
          params, d->binding_ptrs[binding], d->binding_lengths[binding],
          i < decl->param_count ? e->input_labels[ordinal][i] : NULL, NULL,
          NULL, &b);
      binding++;
      v->type = HALI_TYPE_BUFFER;
      v->ref = (hali_ref_t *)b;
      if (s) a--;
    } else if (t == HALI_TYPE_I64 || t == HALI_TYPE_F64) {
      uint64_t bits = (uint64_t)d->constants[constant] |
                      ((uint64_t)d->constants[constant + 1] << 32);
      constant += 2;
      v->type = t;
      memcpy(&v->i64, &bits, 8);
    } else {
      v->type = t;
      memcpy(&v->i32, &d->constants[constant++], 4);
    }
  }
  if (!s) {
    uint32_t info[6] = {w->workgroup_id_x,    w->workgroup_id_y,
                        w->workgroup_id_z,    d->workgroup_count_x,
                        d->workgroup_count_y, d->workgroup_count_z};
    for (int k = 0; k < 6; ++k) args[a++] = hali_value_i32((int32_t)info[k]);
    /* The submitter's stop interrupts the kernel at its next call or
     * branch (a cached stack may still carry an old stop: clear it), and
     * its fuel pool, if any, is this workgroup's budget. */
    atomic_store(&st->interrupt_code, HALI_STATUS_OK);
    atomic_store(&st->interrupt, false);
    st->fuel_enabled = hali_hal_stop_fuel_enabled(stop);
    st->fuel_pool = st->fuel_enabled ? stop : NULL;
    st->fuel = 0;
    st->fuel_used = 0;
    hali_hal_stop_watch_t watch = {.flag = &st->interrupt,
                                   .code = &st->interrupt_code};
    if (stop && !hali_hal_stop_watch(stop, &watch)) {
      s = hali_hal_stop_status(hali_hal_stop_check(stop));
    } else {
      s = hali_vm_invoke(st, e->module, fn, args, a, NULL, 0);
      if (stop) hali_hal_stop_unwatch(stop, &watch);
    }
    if (st->fuel_pool) hali_hal_stop_add_fuel(stop, st->fuel); /* unused */
    st->fuel_enabled = false;
    st->fuel_pool = NULL;
  }
  for (uint32_t i = 0; i < a; ++i) hali_value_release(&args[i]);
  hali_vm_stack_t *empty = NULL;
  if (!atomic_compare_exchange_strong_explicit(slot, &empty, st,
                                               memory_order_release,
                                               memory_order_relaxed))
    hali_vm_stack_free(st);
  if (s)
    s = hali_status_annotate(s, "in bytecode kernel: executable '%s' export "
                                "%u '%s' workgroup (%u,%u,%u)",
                             base->name, ordinal, decl->name,
                             w->workgroup_id_x, w->workgroup_id_y,
                             w->workgroup_id_z);
  return s;
}

static const hali_hal_executable_vtable_t bytecode_executable_vtable = {
    .base = {.destroy = bytecode_destroy},
    .run_workgroup = bytecode_run_workgroup,
};

static bool bytecode_supports(void *self, const char *f) {
  return strcmp(f, "bytecode") == 0;
}

/* Checks that kernel function |f| has the bytecode kernel signature for
 * export |x|. */
static hali_status_t bytecode_check(const hali_ir_export_t *x,
                                    const hali_ir_func_t *f) {
  uint32_t want = x->param_count + x->result_count + 6;
  if (f->param_count != want || f->result_count != 0)
    return hali_status_make(
        HALI_STATUS_INVALID_ARGUMENT,
        "export @%s: kernel function @%s takes %u parameter(s) and returns "
        "%u; a kernel for this signature takes %u (%u argument(s), %u "
        "result buffer(s), then 6 i32 workgroup ids and counts) and returns "
        "nothing",
        x->name, f->name, f->param_count, f->result_count, want,
        x->param_count, x->result_count);
  for (uint32_t i = 0; i < want; ++i) {
    hali_type_t expect =
        i < x->param_count
            ? (x->params[i].type == HALI_TYPE_NONE ? HALI_TYPE_BUFFER
                                                   : x->params[i].type)
        : i < x->param_count + x->result_count ? HALI_TYPE_BUFFER
                                               : HALI_TYPE_I32;
    if (f->reg_types[i] != expect)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "export @%s: parameter %u of kernel function @%s "
                              "is %s, expected %s",
                              x->name, i, f->name,
                              hali_type_name(f->reg_types[i]),
                              hali_type_name(expect));
  }
  return HALI_OK;
}

static void bytecode_free_labels(const hali_ir_executable_t *e,
                                 char ***labels) {
  for (uint32_t i = 0; labels && i < e->export_count; ++i) {
    for (uint32_t k = 0; labels[i] && k < e->exports[i].param_count; ++k)
      hali_free(labels[i][k]);
    hali_free(labels[i]);
  }
  hali_free(labels);
}

/* The read-only labels of every tensor parameter's binding (B5: a store
 * into an input binding names the export and the binding, not "module
 * constant data"). */
static hali_status_t bytecode_input_labels(const hali_ir_executable_t *e,
                                           char ****out) {
  *out = NULL;
  char ***labels = hali_calloc(e->export_count ? e->export_count : 1,
                          sizeof(*labels));
  bool ok = labels != NULL;
  for (uint32_t i = 0; ok && i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    labels[i] = hali_calloc(x->param_count ? x->param_count : 1,
                       sizeof(*labels[i]));
    ok = labels[i] != NULL;
    uint32_t binding = 0;
    for (uint32_t k = 0; ok && k < x->param_count; ++k) {
      if (x->params[k].type != HALI_TYPE_NONE) continue;
      char text[256];
      snprintf(text, sizeof(text),
               "export @%s binding %u, a read-only input binding", x->name,
               binding++);
      labels[i][k] = hali_strdup(text);
      ok = labels[i][k] != NULL;
    }
  }
  if (!ok) {
    bytecode_free_labels(e, labels);
    return hali_status_annotate(hali_status_oom(), "loading executable @%s",
                            e->name);
  }
  *out = labels;
  return HALI_OK;
}

static hali_status_t bytecode_load(void *self,
                                   const hali_executable_load_params_t *p,
                                   hali_hal_executable_t **out) {
  const hali_ir_executable_t *e = p->executable;
  if (!p->module)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "bytecode kernels need their module");
  bytecode_executable_t *be = hali_calloc(1, sizeof(*be));
  hali_hal_executable_export_t *meta = hali_loader_exports_from_ir(e);
  if (be) {
    be->fns = hali_calloc(e->export_count ? e->export_count : 1, sizeof(*be->fns));
    be->decls = hali_calloc(e->export_count ? e->export_count : 1,
                       sizeof(*be->decls));
  }
  hali_status_t s = (!be || !meta || !be->fns || !be->decls)
                        ? hali_status_oom()
                        : HALI_OK;
  for (uint32_t i = 0; !s && i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    if (x->function == UINT32_MAX) {
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "export @%s has no kernel function (function @f)",
                           x->name);
      break;
    }
    s = bytecode_check(x, &p->module->ir->funcs[x->function]);
    be->fns[i] = &p->module->funcs[x->function];
    be->decls[i] = x;
  }
  char ***labels = NULL;
  if (!s) s = bytecode_input_labels(e, &labels);
  if (!s)
    s = hali_hal_executable_initialize(&be->base, &bytecode_executable_vtable,
                                       e->name, "bytecode", meta,
                                       e->export_count);
  hali_free(meta);
  if (s) {
    bytecode_free_labels(e, labels);
    if (be) {
      hali_free(be->fns);
      hali_free(be->decls);
    }
    hali_free(be);
    return s;
  }
  be->input_labels = labels;
  be->module = p->module;
  hali_vm_module_retain(p->module);
  *out = &be->base;
  return HALI_OK;
}

const hali_executable_loader_vtable_t hali_loader_bytecode = {
    NULL, bytecode_supports, bytecode_load, "bytecode"};
