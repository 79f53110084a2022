/* hali — the ffi executable loader: plain C functions in a shared library,
 * called through libffi. */
#include <dlfcn.h>
#include <ffi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loaders.h"
#include "base/alloc.h"

/* ------------------------------------------------------------------------ */
/* ffi: plain C functions through libffi.  Each export's call interface is
 * prepared once at load; a workgroup is one ffi_call. */

/* What a call needs from the export's declaration, copied at load: the
 * executable may outlive its module (a command buffer retains it). */
typedef struct {
  void (*fn)(void);
  ffi_cif cif;
  ffi_type **arg_types;
  uint32_t arg_count;
  uint32_t flags;        /* HALI_EXPORT_* */
  uint32_t param_count;  /* then result_count tensor results */
  uint32_t result_count;
  hali_type_t *params;   /* owned: each parameter's type (NONE = tensor) */
} ffi_export_t;

typedef struct {
  hali_hal_executable_t base;
  void *dl;
  ffi_export_t *exports;
  uint32_t export_count;
} ffi_executable_t;

static void ffi_executable_destroy(hali_ref_t *ref) {
  ffi_executable_t *e = (ffi_executable_t *)ref;
  for (uint32_t i = 0; i < e->export_count; ++i) {
    hali_free(e->exports[i].arg_types);
    hali_free(e->exports[i].params);
  }
  hali_free(e->exports);
  hali_hal_executable_deinitialize(&e->base);
  if (e->dl) dlclose(e->dl);
  hali_free(e);
}

/* Arguments in signature order: tensor arguments as pointers to their
 * bindings, scalars by value from the push constants, tensor results as
 * trailing pointers, then optionally the workgroup id and count. */
static hali_status_t ffi_run_workgroup(
    hali_hal_executable_t *base, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *d,
    const hali_kernel_workgroup_state_t *w, hali_hal_stop_t *stop) {
  (void)stop; /* a C call cannot be stopped inside a workgroup */
  ffi_executable_t *e = (ffi_executable_t *)base;
  ffi_export_t *x = &e->exports[ordinal]; /* ffi_call takes a non-const cif */
  /* Storage for every argument value (8 bytes each) and pointers to it. */
  uint64_t storage[HALI_HAL_MAX_BINDINGS + HALI_HAL_MAX_PUSH_CONSTANTS + 6];
  void *values[HALI_HAL_MAX_BINDINGS + HALI_HAL_MAX_PUSH_CONSTANTS + 6];
  uint32_t a = 0, binding = 0, constant = 0;
  for (uint32_t i = 0; i < x->param_count; ++i, ++a) {
    hali_type_t t = x->params[i];
    if (t == HALI_TYPE_NONE) {
      void *ptr = d->binding_ptrs[binding++];
      memcpy(&storage[a], &ptr, sizeof(ptr));
    } else if (t == HALI_TYPE_I64 || t == HALI_TYPE_F64) {
      uint64_t v = (uint64_t)d->constants[constant] |
                   ((uint64_t)d->constants[constant + 1] << 32);
      constant += 2;
      storage[a] = v;
    } else {
      uint32_t v = d->constants[constant++];
      memcpy(&storage[a], &v, 4); /* little-endian: the low bytes */
    }
    values[a] = &storage[a];
  }
  for (uint32_t i = 0; i < x->result_count; ++i, ++a) {
    void *ptr = d->binding_ptrs[binding++];
    memcpy(&storage[a], &ptr, sizeof(ptr));
    values[a] = &storage[a];
  }
  if (x->flags & HALI_EXPORT_WORKGROUP_INFO) {
    uint32_t info[6] = {w->workgroup_id_x,    w->workgroup_id_y,
                        w->workgroup_id_z,    d->workgroup_count_x,
                        d->workgroup_count_y, d->workgroup_count_z};
    for (int k = 0; k < 6; ++k, ++a) {
      memcpy(&storage[a], &info[k], 4);
      values[a] = &storage[a];
    }
  }
  ffi_arg rc = 0;
  ffi_call(&x->cif, x->fn, &rc, values);
  int code = (x->flags & HALI_EXPORT_RETURNS_STATUS) ? (int)(int32_t)rc : 0;
  if (HALI_LIKELY(code == 0)) return HALI_OK;
  return hali_status_make(HALI_STATUS_INTERNAL,
                          "kernel returned error code %d: executable '%s' "
                          "export %u '%s' workgroup (%u,%u,%u)",
                          code, base->name, ordinal,
                          base->exports[ordinal].name,
                          w->workgroup_id_x, w->workgroup_id_y,
                          w->workgroup_id_z);
}

static const hali_hal_executable_vtable_t ffi_executable_vtable = {
    .base = {.destroy = ffi_executable_destroy},
    .run_workgroup = ffi_run_workgroup,
};

static bool ffi_supports(void *self, const char *f) {
  return strcmp(f, "ffi") == 0;
}

static hali_status_t ffi_prepare(ffi_export_t *fx, const hali_ir_export_t *x) {
  if (x->param_count + x->result_count + 6 >
      HALI_HAL_MAX_BINDINGS + HALI_HAL_MAX_PUSH_CONSTANTS)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "export @%s has too many parameters", x->name);
  for (uint32_t i = 0; i < x->result_count; ++i)
    if (x->results[i].type != HALI_TYPE_NONE)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "export @%s result %u is %s: ffi kernels return "
                              "tensors only (through trailing pointers)",
                              x->name, i, hali_type_name(x->results[i].type));
  uint32_t n = x->param_count + x->result_count +
               ((x->flags & HALI_EXPORT_WORKGROUP_INFO) ? 6 : 0);
  fx->arg_types = hali_calloc(n ? n : 1, sizeof(ffi_type *));
  fx->params = hali_calloc(x->param_count ? x->param_count : 1, sizeof(hali_type_t));
  if (!fx->arg_types || !fx->params)
    return hali_status_oom();
  uint32_t a = 0;
  for (uint32_t i = 0; i < x->param_count; ++i) {
    fx->params[i] = x->params[i].type;
    switch (x->params[i].type) {
    case HALI_TYPE_NONE: fx->arg_types[a++] = &ffi_type_pointer; break;
    case HALI_TYPE_I32: fx->arg_types[a++] = &ffi_type_sint32; break;
    case HALI_TYPE_I64: fx->arg_types[a++] = &ffi_type_sint64; break;
    case HALI_TYPE_F32: fx->arg_types[a++] = &ffi_type_float; break;
    case HALI_TYPE_F64: fx->arg_types[a++] = &ffi_type_double; break;
    default:
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "export @%s parameter %u has type %s, which ffi "
                              "kernels cannot take",
                              x->name, i, hali_type_name(x->params[i].type));
    }
  }
  for (uint32_t i = 0; i < x->result_count; ++i)
    fx->arg_types[a++] = &ffi_type_pointer;
  if (x->flags & HALI_EXPORT_WORKGROUP_INFO)
    for (int k = 0; k < 6; ++k) fx->arg_types[a++] = &ffi_type_uint32;
  fx->arg_count = a;
  ffi_type *ret = (x->flags & HALI_EXPORT_RETURNS_STATUS) ? &ffi_type_sint32
                                                          : &ffi_type_void;
  if (ffi_prep_cif(&fx->cif, FFI_DEFAULT_ABI, a, ret, fx->arg_types) != FFI_OK)
    return hali_status_make(HALI_STATUS_INTERNAL,
                            "libffi could not prepare the call interface of "
                            "export @%s",
                            x->name);
  fx->flags = x->flags;
  fx->param_count = x->param_count;
  fx->result_count = x->result_count;
  return HALI_OK;
}

static hali_status_t ffi_load(void *self, const hali_executable_load_params_t *p,
                              hali_hal_executable_t **out) {
  const hali_ir_executable_t *e = p->executable;
  ffi_executable_t *fe = hali_calloc(1, sizeof(*fe));
  if (!fe) return hali_status_oom();
  fe->exports = hali_calloc(e->export_count ? e->export_count : 1, sizeof(ffi_export_t));
  hali_hal_executable_export_t *meta = hali_loader_exports_from_ir(e);
  hali_status_t s = (!fe->exports || !meta)
                        ? hali_status_oom()
                        : hali_loader_open_library(p, &fe->dl);
  for (uint32_t i = 0; !s && i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    fe->export_count = i + 1;
    s = ffi_prepare(&fe->exports[i], x);
    if (s) break;
    dlerror();
    void *sym = dlsym(fe->dl, hali_loader_export_symbol(x));
    if (!sym) {
      const char *why = dlerror();
      s = hali_status_make(HALI_STATUS_NOT_FOUND,
                           "export @%s: symbol '%s' not found in \"%s\": %s",
                           x->name, hali_loader_export_symbol(x), e->library,
                           why ? why : "missing");
      break;
    }
    fe->exports[i].fn = (void (*)(void))(uintptr_t)sym;
  }
  if (!s)
    s = hali_hal_executable_initialize(&fe->base, &ffi_executable_vtable,
                                       e->name, "ffi", meta, e->export_count);
  hali_free(meta);
  if (s) {
    for (uint32_t i = 0; i < fe->export_count; ++i) {
      hali_free(fe->exports[i].arg_types);
      hali_free(fe->exports[i].params);
    }
    hali_free(fe->exports);
    if (fe->dl) dlclose(fe->dl);
    hali_free(fe);
    return s;
  }
  *out = &fe->base;
  return HALI_OK;
}

const hali_executable_loader_vtable_t hali_loader_ffi = {
    NULL, ffi_supports, ffi_load, "ffi"};
