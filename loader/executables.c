/* hali — the executable loader registry and the four built-in loaders
 * (see loader/executables.h). */
#include "loader/executables.h"

#include <dlfcn.h>
#include <ffi.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/buffer.h"

typedef struct {
  const hali_executable_loader_vtable_t *vtable;
  void *self;
} loader_entry_t;

struct hali_executable_registry_s {
  loader_entry_t *loaders;
  size_t loader_count;
  const hali_kernel_library_t **statics;
  size_t static_count;
};

hali_status_t hali_executable_registry_register(
    hali_executable_registry_t *r, const hali_executable_loader_vtable_t *vtable,
    void *self) {
  loader_entry_t *l =
      realloc(r->loaders, (r->loader_count + 1) * sizeof(loader_entry_t));
  if (!l) return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
  r->loaders = l;
  r->loaders[r->loader_count++] = (loader_entry_t){vtable, self};
  return HALI_OK;
}

hali_status_t hali_executable_registry_register_static(
    hali_executable_registry_t *r, const hali_kernel_library_t *library) {
  if (!library || !library->name)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "a static kernel library needs a name");
  for (size_t i = 0; i < r->static_count; ++i)
    if (strcmp(r->statics[i]->name, library->name) == 0)
      return hali_status_make(HALI_STATUS_ALREADY_EXISTS,
                              "static kernel library '%s' is already "
                              "registered",
                              library->name);
  const hali_kernel_library_t **s =
      realloc(r->statics, (r->static_count + 1) * sizeof(*s));
  if (!s) return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
  r->statics = s;
  r->statics[r->static_count++] = library;
  return HALI_OK;
}

void hali_executable_registry_free(hali_executable_registry_t *r) {
  if (!r) return;
  for (size_t i = 0; i < r->loader_count; ++i)
    if (r->loaders[i].vtable->destroy)
      r->loaders[i].vtable->destroy(r->loaders[i].self);
  free(r->loaders);
  free(r->statics);
  free(r);
}

hali_status_t hali_executable_registry_load(
    const hali_executable_registry_t *r,
    const hali_executable_load_params_t *params, hali_hal_executable_t **out) {
  *out = NULL;
  const hali_ir_executable_t *e = params->executable;
  for (size_t i = 0; i < r->loader_count; ++i)
    if (r->loaders[i].vtable->supports(r->loaders[i].self, e->format))
      return hali_status_annotate(
          r->loaders[i].vtable->load(r->loaders[i].self, params, out),
          "loading executable @%s (format \"%s\")", e->name, e->format);
  char formats[512] = "";
  size_t n = 0;
  for (size_t i = 0; i < r->loader_count && n < sizeof(formats) - 1; ++i)
    n += (size_t)snprintf(formats + n, sizeof(formats) - n, "%s%s",
                          i ? ", " : "", r->loaders[i].vtable->formats);
  return hali_status_make(HALI_STATUS_UNIMPLEMENTED,
                          "executable @%s has format \"%s\", which no loader "
                          "supports; available formats: %s",
                          e->name, e->format, n ? formats : "(none)");
}

/* ------------------------------------------------------------------------ */
/* Shared helpers. */

/* The export's symbol (its name unless it declares one). */
static const char *export_symbol(const hali_ir_export_t *x) {
  return x->symbol ? x->symbol : x->name;
}

/* HAL export metadata from the module's declarations. */
static hali_hal_executable_export_t *exports_from_ir(
    const hali_ir_executable_t *e) {
  hali_hal_executable_export_t *out =
      calloc(e->export_count ? e->export_count : 1, sizeof(*out));
  if (!out) return NULL;
  for (uint32_t i = 0; i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    out[i].name = x->name;
    hali_ir_export_interface(x, &out[i].binding_count, &out[i].constant_count);
    memcpy(out[i].workgroup_size, x->workgroup_size, sizeof(x->workgroup_size));
  }
  return out;
}

/* Finds |e->library| relative to the module, then on the search path, and
 * dlopens it.  Errors list every place tried with dlerror() text. */
static hali_status_t open_library(const hali_executable_load_params_t *p,
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
  free(t->exports);
  if (t->dl) dlclose(t->dl);
  free(t);
}

/* Builds an executable whose exports follow the module's declarations,
 * matched by symbol in |lib|, with counts checked against the signature. */
static hali_status_t executable_from_table(
    const hali_executable_load_params_t *p, const hali_kernel_library_t *lib,
    const char *format, void *dl, hali_hal_executable_t **out) {
  const hali_ir_executable_t *e = p->executable;
  kernel_table_t *t = calloc(1, sizeof(*t));
  if (!t) return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
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
  t->exports = calloc(e->export_count ? e->export_count : 1,
                      sizeof(hali_kernel_export_t));
  if (!t->exports) {
    s = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
    goto fail;
  }
  for (uint32_t i = 0; i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    const char *sym = export_symbol(x);
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
  if (!s) return HALI_OK;
  t->dl = NULL; /* the caller closes it */
fail:
  free(t->exports);
  free(t);
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
  return executable_from_table(params, library, format, NULL, out);
}

/* ------------------------------------------------------------------------ */
/* native */

static bool native_supports(void *self, const char *f) {
  return strcmp(f, "native") == 0;
}

static hali_status_t native_load(void *self,
                                 const hali_executable_load_params_t *p,
                                 hali_hal_executable_t **out) {
  void *dl;
  HALI_RETURN_IF_ERROR_PLAIN(open_library(p, &dl));
  dlerror();
  hali_kernel_library_query_fn_t query = (hali_kernel_library_query_fn_t)(
      uintptr_t)dlsym(dl, HALI_KERNEL_LIBRARY_QUERY_SYMBOL);
  if (!query) {
    const char *why = dlerror();
    hali_status_t s = hali_status_make(
        HALI_STATUS_NOT_FOUND, "library \"%s\" does not export %s: %s",
        p->executable->library, HALI_KERNEL_LIBRARY_QUERY_SYMBOL,
        why ? why : "symbol not found");
    dlclose(dl);
    return s;
  }
  const hali_kernel_library_t *lib = query(HALI_KERNEL_ABI_VERSION);
  if (!lib) {
    dlclose(dl);
    return hali_status_make(HALI_STATUS_UNIMPLEMENTED,
                            "library \"%s\" does not support kernel ABI "
                            "version %d",
                            p->executable->library, HALI_KERNEL_ABI_VERSION);
  }
  hali_status_t s = executable_from_table(p, lib, "native", dl, out);
  if (s) dlclose(dl);
  return s;
}

static const hali_executable_loader_vtable_t native_loader = {
    NULL, native_supports, native_load, "native"};

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
  for (size_t i = 0; i < r->static_count; ++i)
    if (strcmp(r->statics[i]->name, want) == 0)
      return executable_from_table(p, r->statics[i], "static", NULL, out);
  return hali_status_make(HALI_STATUS_NOT_FOUND,
                          "no static kernel library named '%s' is registered "
                          "(%zu registered)",
                          want, r->static_count);
}

static const hali_executable_loader_vtable_t static_loader = {
    NULL, static_supports, static_load, "static"};

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
    free(e->exports[i].arg_types);
    free(e->exports[i].params);
  }
  free(e->exports);
  hali_hal_executable_deinitialize(&e->base);
  if (e->dl) dlclose(e->dl);
  free(e);
}

/* Arguments in signature order: tensor arguments as pointers to their
 * bindings, scalars by value from the push constants, tensor results as
 * trailing pointers, then optionally the workgroup id and count. */
static hali_status_t ffi_run_workgroup(
    hali_hal_executable_t *base, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *d,
    const hali_kernel_workgroup_state_t *w) {
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
  fx->arg_types = calloc(n ? n : 1, sizeof(ffi_type *));
  fx->params = calloc(x->param_count ? x->param_count : 1, sizeof(hali_type_t));
  if (!fx->arg_types || !fx->params)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
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
  ffi_executable_t *fe = calloc(1, sizeof(*fe));
  if (!fe) return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
  fe->exports = calloc(e->export_count ? e->export_count : 1, sizeof(ffi_export_t));
  hali_hal_executable_export_t *meta = exports_from_ir(e);
  hali_status_t s = (!fe->exports || !meta)
                        ? hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom")
                        : open_library(p, &fe->dl);
  for (uint32_t i = 0; !s && i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    fe->export_count = i + 1;
    s = ffi_prepare(&fe->exports[i], x);
    if (s) break;
    dlerror();
    void *sym = dlsym(fe->dl, export_symbol(x));
    if (!sym) {
      const char *why = dlerror();
      s = hali_status_make(HALI_STATUS_NOT_FOUND,
                           "export @%s: symbol '%s' not found in \"%s\": %s",
                           x->name, export_symbol(x), e->library,
                           why ? why : "missing");
      break;
    }
    fe->exports[i].fn = (void (*)(void))(uintptr_t)sym;
  }
  if (!s)
    s = hali_hal_executable_initialize(&fe->base, &ffi_executable_vtable,
                                       e->name, "ffi", meta, e->export_count);
  free(meta);
  if (s) {
    for (uint32_t i = 0; i < fe->export_count; ++i) {
      free(fe->exports[i].arg_types);
      free(fe->exports[i].params);
    }
    free(fe->exports);
    if (fe->dl) dlclose(fe->dl);
    free(fe);
    return s;
  }
  *out = &fe->base;
  return HALI_OK;
}

static const hali_executable_loader_vtable_t ffi_loader = {
    NULL, ffi_supports, ffi_load, "ffi"};

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
  hali_vm_module_t *module; /* retained; see hali_vm_module_free */
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
      free(e->input_labels[i][k]);
    free(e->input_labels[i]);
  }
  free(e->input_labels);
  free(e->fns);
  free(e->decls);
  hali_hal_executable_deinitialize(&e->base);
  hali_vm_module_release(e->module);
  free(e);
}

static hali_status_t bytecode_run_workgroup(
    hali_hal_executable_t *base, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *d,
    const hali_kernel_workgroup_state_t *w) {
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
    s = hali_vm_invoke(st, e->module, fn, args, a, NULL, 0);
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
      free(labels[i][k]);
    free(labels[i]);
  }
  free(labels);
}

/* The read-only labels of every tensor parameter's binding (B5: a store
 * into an input binding names the export and the binding, not "module
 * constant data"). */
static hali_status_t bytecode_input_labels(const hali_ir_executable_t *e,
                                           char ****out) {
  *out = NULL;
  char ***labels = calloc(e->export_count ? e->export_count : 1,
                          sizeof(*labels));
  bool ok = labels != NULL;
  for (uint32_t i = 0; ok && i < e->export_count; ++i) {
    const hali_ir_export_t *x = &e->exports[i];
    labels[i] = calloc(x->param_count ? x->param_count : 1,
                       sizeof(*labels[i]));
    ok = labels[i] != NULL;
    uint32_t binding = 0;
    for (uint32_t k = 0; ok && k < x->param_count; ++k) {
      if (x->params[k].type != HALI_TYPE_NONE) continue;
      char text[256];
      snprintf(text, sizeof(text),
               "export @%s binding %u, a read-only input binding", x->name,
               binding++);
      labels[i][k] = strdup(text);
      ok = labels[i][k] != NULL;
    }
  }
  if (!ok) {
    bytecode_free_labels(e, labels);
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "out of host memory loading executable @%s",
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
  bytecode_executable_t *be = calloc(1, sizeof(*be));
  hali_hal_executable_export_t *meta = exports_from_ir(e);
  if (be) {
    be->fns = calloc(e->export_count ? e->export_count : 1, sizeof(*be->fns));
    be->decls = calloc(e->export_count ? e->export_count : 1,
                       sizeof(*be->decls));
  }
  hali_status_t s = (!be || !meta || !be->fns || !be->decls)
                        ? hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom")
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
  free(meta);
  if (s) {
    bytecode_free_labels(e, labels);
    if (be) {
      free(be->fns);
      free(be->decls);
    }
    free(be);
    return s;
  }
  be->input_labels = labels;
  be->module = p->module;
  hali_vm_module_retain(p->module);
  *out = &be->base;
  return HALI_OK;
}

static const hali_executable_loader_vtable_t bytecode_loader = {
    NULL, bytecode_supports, bytecode_load, "bytecode"};

/* ------------------------------------------------------------------------ */

hali_status_t hali_executable_registry_create(hali_executable_registry_t **out) {
  *out = NULL;
  hali_executable_registry_t *r = calloc(1, sizeof(*r));
  if (!r) return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
  hali_status_t s = hali_executable_registry_register(r, &native_loader, NULL);
  if (!s) s = hali_executable_registry_register(r, &ffi_loader, NULL);
  if (!s) s = hali_executable_registry_register(r, &static_loader, r);
  if (!s) s = hali_executable_registry_register(r, &bytecode_loader, NULL);
  if (s) {
    hali_executable_registry_free(r);
    return s;
  }
  *out = r;
  return HALI_OK;
}

hali_status_t hali_vm_module_load_executables(
    hali_vm_module_t *m, const hali_executable_registry_t *r,
    const char *module_path, const char *const *search_paths,
    size_t search_path_count) {
  uint32_t n = m->ir->executable_count;
  if (!n) return HALI_OK;
  /* The search path: the given directories, then $HALI_EXECUTABLE_PATH. */
  char *env = getenv("HALI_EXECUTABLE_PATH")
                  ? strdup(getenv("HALI_EXECUTABLE_PATH"))
                  : NULL;
  size_t env_count = 0;
  for (char *c = env; c && *c; ++c) env_count += *c == ':';
  if (env) env_count++;
  const char **paths = calloc(search_path_count + env_count + 1, sizeof(char *));
  char *dir = module_path ? strdup(module_path) : NULL;
  hali_executable_load_params_t p = {0};
  hali_hal_executable_t **loaded = calloc(n, sizeof(*loaded));
  hali_status_t s = HALI_OK;
  if (!paths || !loaded || (module_path && !dir) ||
      (getenv("HALI_EXECUTABLE_PATH") && !env)) {
    s = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
    goto done;
  }
  size_t np = 0;
  for (size_t i = 0; i < search_path_count; ++i) paths[np++] = search_paths[i];
  char *save = NULL;
  for (char *tok = env ? strtok_r(env, ":", &save) : NULL; tok;
       tok = strtok_r(NULL, ":", &save))
    paths[np++] = tok;
  if (dir) {
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
  }
  p.module = m;
  p.module_dir = dir;
  p.search_paths = paths;
  p.search_path_count = np;
  for (uint32_t i = 0; !s && i < n; ++i) {
    p.executable = &m->ir->executables[i];
    s = hali_executable_registry_load(r, &p, &loaded[i]);
  }
  if (!s) {
    if (m->executables) {
      s = hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                           "the module's executables are already loaded");
    } else {
      m->executables = loaded;
      loaded = NULL;
    }
  }
done:
  if (loaded) {
    for (uint32_t i = 0; i < n; ++i) hali_ref_release((hali_ref_t *)loaded[i]);
    free(loaded);
  }
  free(paths);
  free(env);
  free(dir);
  return s;
}
