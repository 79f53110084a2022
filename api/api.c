/* hali — the public C API (include/hali/hali.h): instances, devices,
 * modules, contexts, invocations, buffer views and fences, as thin
 * wrappers over the VM, the loader and the HAL.
 *
 * Public entry points validate their arguments once, then call the
 * internal interfaces, which do not validate again.
 *
 * Modules are immutable and shared, but import bindings and loaded
 * executables live on a hali_vm_module_t: each context therefore loads
 * its own hali_vm_module_t from the module's bytes when it links.
 */
#include "hali/hali.h"

#include <dlfcn.h>
#include <errno.h>
#include <ffi.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "loader/executables.h"
#include "loader/loader.h"
#include "passes/pipeline.h"
#include "vm/fiber.h"
#include "vm/trace.h"
#include "vm/vm.h"

/* Imports and calls pass at most this many values (the interpreter's own
 * limit for imports). */
#define API_MAX_VALUES 64

static hali_status_t null_arg(const char *fn, const char *what) {
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                          what);
}
#define CHECK_ARG(x)                                                           \
  do {                                                                         \
    if (HALI_UNLIKELY(!(x))) return null_arg(__func__, #x);                    \
  } while (0)

static hali_status_t oom(void) {
  return hali_status_oom();
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

const char *hali_version(void) { return HALI_VERSION_STRING; }

bool hali_trace_available(void) { return HALI_TRACING != 0; }

/* ------------------------------------------------------------------------ */
/* Variants <-> VM values. */

void hali_variant_release(hali_variant_t *v) {
  if (!v) return;
  if (v->type >= HALI_VARIANT_DEVICE && v->u.ref)
    hali_ref_release((hali_ref_t *)v->u.ref);
  memset(v, 0, sizeof(*v));
}

const char *hali_variant_type_name(hali_variant_type_t type) {
  if (type < 0 || type > 255 || !hali_type_is_valid((hali_type_t)type))
    return "?";
  return hali_type_name((hali_type_t)type);
}

static void value_to_variant(const hali_value_t *v, hali_variant_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = (hali_variant_type_t)v->type;
  switch (v->type) {
  case HALI_TYPE_I32: out->u.i32 = v->i32; break;
  case HALI_TYPE_I64: out->u.i64 = v->i64; break;
  case HALI_TYPE_F32: out->u.f32 = v->f32; break;
  case HALI_TYPE_F64: out->u.f64 = v->f64; break;
  default: out->u.ref = v->ref; break;
  }
}

/* Checks |args| against |f|'s parameters and converts them (refs
 * borrowed). */
static hali_status_t variants_to_values(const hali_ir_func_t *f,
                                        const hali_variant_t *args,
                                        size_t count, hali_value_t *out) {
  if (count != f->param_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s takes %u argument(s), %zu given", f->name,
                            f->param_count, count);
  if (count && !args)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s: the argument array is NULL", f->name);
  for (size_t i = 0; i < count; ++i) {
    hali_type_t want = f->reg_types[i];
    if ((int)args[i].type != (int)want)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "@%s argument %zu: expected %s, got %s", f->name,
                              i, hali_type_name(want),
                              hali_variant_type_name(args[i].type));
    memset(&out[i], 0, sizeof(out[i]));
    out[i].type = want;
    switch (want) {
    case HALI_TYPE_I32: out[i].i32 = args[i].u.i32; break;
    case HALI_TYPE_I64: out[i].i64 = args[i].u.i64; break;
    case HALI_TYPE_F32: out[i].f32 = args[i].u.f32; break;
    case HALI_TYPE_F64: out[i].f64 = args[i].u.f64; break;
    default: {
      hali_ref_t *ref = args[i].u.ref;
      if (!ref)
        return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "@%s argument %zu: NULL %s", f->name, i,
                                hali_type_name(want));
      /* The object's own tag, not the host's label, decides. */
      if (ref->type != want)
        return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "@%s argument %zu: labelled %s but the object "
                                "is a %s",
                                f->name, i, hali_type_name(want),
                                hali_type_name(ref->type));
      out[i].ref = ref;
    }
    }
  }
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* Import signatures: "(i32, i32) -> i32". */

typedef struct {
  uint32_t param_count, result_count;
  hali_type_t types[2 * API_MAX_VALUES]; /* params, then results */
} signature_t;

static const char *skip_ws(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\n') ++s;
  return s;
}

/* Parses a comma-separated type list up to ')' (consumed). */
static bool parse_types(const char **ps, signature_t *sig, uint32_t base,
                        uint32_t *count) {
  const char *s = skip_ws(*ps);
  *count = 0;
  if (*s == ')') {
    *ps = s + 1;
    return true;
  }
  for (;;) {
    s = skip_ws(s);
    const char *start = s;
    while (*s && !strchr(",() \t\n", *s)) ++s;
    hali_type_t t = hali_type_parse(start, (size_t)(s - start));
    if (t == HALI_TYPE_NONE || !hali_type_is_valid(t)) return false;
    uint32_t at = base + *count;
    if (at >= 2 * API_MAX_VALUES || *count >= API_MAX_VALUES) return false;
    sig->types[at] = t;
    ++*count;
    s = skip_ws(s);
    if (*s == ',') {
      ++s;
      continue;
    }
    if (*s == ')') {
      *ps = s + 1;
      return true;
    }
    return false;
  }
}

static bool signature_parse(const char *text, signature_t *sig) {
  memset(sig, 0, sizeof(*sig));
  const char *s = skip_ws(text);
  if (*s++ != '(') return false;
  if (!parse_types(&s, sig, 0, &sig->param_count)) return false;
  s = skip_ws(s);
  if (!*s) return true;
  if (s[0] != '-' || s[1] != '>') return false;
  s = skip_ws(s + 2);
  if (*s == '(') {
    ++s;
    if (!parse_types(&s, sig, sig->param_count, &sig->result_count))
      return false;
  } else {
    const char *start = s;
    while (*s && !strchr(",() \t\n", *s)) ++s;
    hali_type_t t = hali_type_parse(start, (size_t)(s - start));
    if (t == HALI_TYPE_NONE || !hali_type_is_valid(t)) return false;
    sig->types[sig->param_count] = t;
    sig->result_count = 1;
  }
  return *skip_ws(s) == 0;
}

static void func_signature(const hali_ir_func_t *f, signature_t *sig) {
  memset(sig, 0, sizeof(*sig));
  sig->param_count = f->param_count < API_MAX_VALUES ? f->param_count
                                                      : API_MAX_VALUES;
  sig->result_count = f->result_count < API_MAX_VALUES ? f->result_count
                                                        : API_MAX_VALUES;
  if (sig->param_count) memcpy(sig->types, f->reg_types, sig->param_count);
  if (sig->result_count)
    memcpy(sig->types + sig->param_count, f->results, sig->result_count);
}

static bool signature_equal(const signature_t *a, const signature_t *b) {
  return a->param_count == b->param_count &&
         a->result_count == b->result_count &&
         memcmp(a->types, b->types, a->param_count + a->result_count) == 0;
}

static void signature_format(const signature_t *sig, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "(");
  for (uint32_t i = 0; i < sig->param_count && at < n; ++i)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "",
                           hali_type_name(sig->types[i]));
  if (at < n) at += (size_t)snprintf(buf + at, n - at, ")");
  if (sig->result_count && at < n) {
    at += (size_t)snprintf(buf + at, n - at, " -> (");
    for (uint32_t i = 0; i < sig->result_count && at < n; ++i)
      at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "",
                             hali_type_name(sig->types[sig->param_count + i]));
    if (at < n) snprintf(buf + at, n - at, ")");
  }
}

/* ------------------------------------------------------------------------ */
/* Instances. */

typedef struct {
  char *name;
  bool checked;
  signature_t sig;
  hali_import_callback_t callback;
  void *user;
} host_function_t;

typedef struct {
  char *name;
  host_function_t *functions;
  size_t count;
} host_module_t;

typedef struct {
  char *name;
  char *path;
} ffi_library_t;

struct hali_instance_s {
  atomic_uint_fast32_t count;
  atomic_bool frozen; /* a context was created: registries are read-only */
  hali_executable_registry_t *registry;
  char **paths;
  size_t path_count;
  host_module_t *hosts;
  size_t host_count;
  ffi_library_t *ffis;
  size_t ffi_count;
  hali_context_params_t defaults;
  char *default_filter;
  hali_allocator_hooks_t allocator;
};

void hali_context_params_initialize(hali_context_params_t *out) {
  if (out) memset(out, 0, sizeof(*out));
}

void hali_instance_options_initialize(hali_instance_options_t *out) {
  if (!out) return;
  memset(out, 0, sizeof(*out));
  hali_context_params_initialize(&out->default_context_params);
}

static void instance_free(hali_instance_t *in) {
  hali_executable_registry_free(in->registry);
  for (size_t i = 0; i < in->path_count; ++i) free(in->paths[i]);
  free(in->paths);
  for (size_t i = 0; i < in->host_count; ++i) {
    for (size_t j = 0; j < in->hosts[i].count; ++j)
      free(in->hosts[i].functions[j].name);
    free(in->hosts[i].functions);
    free(in->hosts[i].name);
  }
  free(in->hosts);
  for (size_t i = 0; i < in->ffi_count; ++i) {
    free(in->ffis[i].name);
    free(in->ffis[i].path);
  }
  free(in->ffis);
  free(in->default_filter);
  free(in);
}

hali_status_t hali_instance_create(const hali_instance_options_t *options,
                                   hali_instance_t **out_instance) {
  CHECK_ARG(out_instance);
  *out_instance = NULL;
  hali_instance_t *in = calloc(1, sizeof(*in));
  if (!in) return oom();
  atomic_init(&in->count, 1);
  atomic_init(&in->frozen, false);
  hali_status_t s = hali_executable_registry_create(&in->registry);
  if (!s && options) {
    if (options->executable_path_count && !options->executable_paths)
      s = null_arg(__func__, "options->executable_paths");
    if (!s && options->executable_path_count) {
      in->paths = calloc(options->executable_path_count, sizeof(char *));
      if (!in->paths) s = oom();
      for (size_t i = 0; !s && i < options->executable_path_count; ++i) {
        const char *p = options->executable_paths[i];
        in->paths[i] = p ? strdup(p) : NULL;
        if (!in->paths[i]) s = p ? oom() : null_arg(__func__, "a search path");
        else in->path_count = i + 1;
      }
    }
    in->defaults = options->default_context_params;
    if ((options->allocator.alloc != NULL) != (options->allocator.free != NULL))
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "allocator hooks need both alloc and free");
    in->allocator = options->allocator;
    in->defaults.trace_filter = NULL;
    if (!s && options->default_context_params.trace_filter) {
      in->default_filter = strdup(options->default_context_params.trace_filter);
      if (!in->default_filter) s = oom();
      in->defaults.trace_filter = in->default_filter;
    }
  }
  if (s) {
    instance_free(in);
    return s;
  }
  *out_instance = in;
  return HALI_OK;
}

void hali_instance_retain(hali_instance_t *instance) {
  if (instance) atomic_fetch_add(&instance->count, 1);
}

void hali_instance_release(hali_instance_t *instance) {
  if (instance && atomic_fetch_sub(&instance->count, 1) == 1)
    instance_free(instance);
}

static hali_status_t check_unfrozen(const hali_instance_t *in,
                                    const char *fn) {
  if (atomic_load(&in->frozen))
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "%s: the instance already has a context; "
                            "register everything before creating contexts",
                            fn);
  return HALI_OK;
}

hali_status_t hali_instance_register_static_library(
    hali_instance_t *instance, const hali_kernel_library_t *library) {
  CHECK_ARG(instance);
  CHECK_ARG(library);
  HALI_RETURN_IF_ERROR_PLAIN(check_unfrozen(instance, __func__));
  if (library->abi_version != HALI_KERNEL_ABI_VERSION)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "static kernel library '%s' has ABI version %u; "
                            "this runtime supports %d",
                            library->name ? library->name : "?",
                            library->abi_version, HALI_KERNEL_ABI_VERSION);
  return hali_executable_registry_register_static(instance->registry, library);
}

/* A host loader behind the registry's loader interface. */
typedef struct {
  hali_executable_loader_vtable_t vtable; /* what the registry calls */
  hali_executable_loader_t host;
  void *self;
  char *formats;
} host_loader_t;

static void host_loader_destroy(void *p) {
  host_loader_t *l = p;
  if (l->host.destroy) l->host.destroy(l->self);
  free(l->formats);
  free(l);
}

static bool host_loader_supports(void *p, const char *format) {
  host_loader_t *l = p;
  return l->host.supports(l->self, format);
}

static hali_status_t host_loader_load(void *p,
                                      const hali_executable_load_params_t *lp,
                                      hali_hal_executable_t **out) {
  host_loader_t *l = p;
  *out = NULL;
  hali_executable_request_t req = {
      .name = lp->executable->name,
      .format = lp->executable->format,
      .library = lp->executable->library,
      .module_dir = lp->module_dir,
  };
  const hali_kernel_library_t *lib = NULL;
  HALI_RETURN_IF_ERROR(l->host.load(l->self, &req, &lib),
                       "in the host loader for \"%s\"", l->formats);
  return hali_executable_create_from_table(lp, lib, lp->executable->format,
                                           out);
}

hali_status_t hali_instance_register_executable_loader(
    hali_instance_t *instance, const hali_executable_loader_t *loader,
    void *self) {
  CHECK_ARG(instance);
  CHECK_ARG(loader);
  if (!loader->supports || !loader->load)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: the loader needs supports and load", __func__);
  HALI_RETURN_IF_ERROR_PLAIN(check_unfrozen(instance, __func__));
  host_loader_t *l = calloc(1, sizeof(*l));
  if (!l) return oom();
  l->host = *loader;
  l->self = self;
  l->formats = strdup(loader->formats ? loader->formats : "(host loader)");
  if (!l->formats) {
    free(l);
    return oom();
  }
  l->vtable.destroy = host_loader_destroy;
  l->vtable.supports = host_loader_supports;
  l->vtable.load = host_loader_load;
  l->vtable.formats = l->formats;
  hali_status_t s =
      hali_executable_registry_register(instance->registry, &l->vtable, l);
  if (s) {
    free(l->formats);
    free(l);
  }
  return s;
}

static bool import_module_taken(const hali_instance_t *in, const char *name) {
  for (size_t i = 0; i < in->host_count; ++i)
    if (strcmp(in->hosts[i].name, name) == 0) return true;
  for (size_t i = 0; i < in->ffi_count; ++i)
    if (strcmp(in->ffis[i].name, name) == 0) return true;
  return false;
}

hali_status_t hali_instance_register_import_module(
    hali_instance_t *instance, const char *module_name,
    const hali_import_function_t *functions, size_t count) {
  CHECK_ARG(instance);
  CHECK_ARG(module_name);
  if (count) CHECK_ARG(functions);
  HALI_RETURN_IF_ERROR_PLAIN(check_unfrozen(instance, __func__));
  if (!module_name[0] || strchr(module_name, '.'))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "import module name '%s' must be non-empty and "
                            "without '.'",
                            module_name);
  if (import_module_taken(instance, module_name))
    return hali_status_make(HALI_STATUS_ALREADY_EXISTS,
                            "import module '%s' is already registered",
                            module_name);
  host_function_t *fns = calloc(count ? count : 1, sizeof(*fns));
  if (!fns) return oom();
  hali_status_t s = HALI_OK;
  size_t n = 0;
  for (; !s && n < count; ++n) {
    const hali_import_function_t *f = &functions[n];
    if (!f->name || !f->callback) {
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "import module '%s' function %zu: needs a name and "
                           "a callback",
                           module_name, n);
      break;
    }
    if (f->signature) {
      fns[n].checked = true;
      if (!signature_parse(f->signature, &fns[n].sig)) {
        s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                             "import @%s.%s: cannot parse signature \"%s\" "
                             "(expected e.g. \"(i32, f32) -> i32\")",
                             module_name, f->name, f->signature);
        break;
      }
    }
    fns[n].callback = f->callback;
    fns[n].user = f->user;
    fns[n].name = strdup(f->name);
    if (!fns[n].name) s = oom();
  }
  host_module_t *grown =
      s ? NULL
        : realloc(instance->hosts, (instance->host_count + 1) * sizeof(*grown));
  char *name = grown ? strdup(module_name) : NULL;
  if (!s && (!grown || !name)) s = oom();
  if (grown) instance->hosts = grown;
  if (s) {
    for (size_t i = 0; i < count; ++i) free(fns[i].name);
    free(fns);
    free(name);
    return s;
  }
  instance->hosts[instance->host_count++] =
      (host_module_t){.name = name, .functions = fns, .count = count};
  return HALI_OK;
}

hali_status_t hali_instance_register_ffi_library(hali_instance_t *instance,
                                                 const char *module_name,
                                                 const char *library_path) {
  CHECK_ARG(instance);
  CHECK_ARG(module_name);
  CHECK_ARG(library_path);
  HALI_RETURN_IF_ERROR_PLAIN(check_unfrozen(instance, __func__));
  if (!module_name[0] || strchr(module_name, '.'))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "import module name '%s' must be non-empty and "
                            "without '.'",
                            module_name);
  if (import_module_taken(instance, module_name))
    return hali_status_make(HALI_STATUS_ALREADY_EXISTS,
                            "import module '%s' is already registered",
                            module_name);
  ffi_library_t *grown =
      realloc(instance->ffis, (instance->ffi_count + 1) * sizeof(*grown));
  if (!grown) return oom();
  instance->ffis = grown;
  ffi_library_t l = {strdup(module_name), strdup(library_path)};
  if (!l.name || !l.path) {
    free(l.name);
    free(l.path);
    return oom();
  }
  instance->ffis[instance->ffi_count++] = l;
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* Devices. */

struct hali_device_s {
  atomic_uint_fast32_t count;
  hali_device_params_t params;
  hali_allocator_hooks_t allocator; /* the instance's, copied */
  hali_hal_device_t *hal;
};

void hali_device_params_initialize(hali_device_params_t *out) {
  if (!out) return;
  memset(out, 0, sizeof(*out));
  out->kind = HALI_DEVICE_LOCAL_SYNC;
}

hali_status_t hali_device_kind_parse(const char *name,
                                     hali_device_kind_t *out_kind) {
  CHECK_ARG(out_kind);
  *out_kind = HALI_DEVICE_LOCAL_SYNC;
  CHECK_ARG(name);
  hali_hal_device_kind_t k;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_device_kind_parse(name, &k));
  *out_kind = k == HALI_HAL_DEVICE_LOCAL_TASK ? HALI_DEVICE_LOCAL_TASK
                                              : HALI_DEVICE_LOCAL_SYNC;
  return HALI_OK;
}

static hali_status_t make_hal_device(const hali_device_params_t *p,
                                     const hali_allocator_hooks_t *hooks,
                                     uint64_t max_bytes,
                                     hali_hal_device_t **out) {
  hali_hal_device_params_t hp;
  hali_hal_device_params_initialize(&hp);
  hp.hooks.alloc = hooks->alloc;
  hp.hooks.free = hooks->free;
  hp.hooks.user = hooks->user;
  hp.kind = p->kind == HALI_DEVICE_LOCAL_TASK ? HALI_HAL_DEVICE_LOCAL_TASK
                                              : HALI_HAL_DEVICE_LOCAL_SYNC;
  hp.worker_count = p->worker_count;
  hp.max_bytes = max_bytes;
  return hali_hal_device_create(&hp, out);
}

hali_status_t hali_device_create(hali_instance_t *instance,
                                 const hali_device_params_t *params,
                                 hali_device_t **out_device) {
  CHECK_ARG(out_device);
  *out_device = NULL;
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  if (params) p = *params;
  if (p.kind != HALI_DEVICE_LOCAL_SYNC && p.kind != HALI_DEVICE_LOCAL_TASK)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown device kind %d (expected "
                            "HALI_DEVICE_LOCAL_SYNC or HALI_DEVICE_LOCAL_TASK)",
                            (int)p.kind);
  hali_device_t *d = calloc(1, sizeof(*d));
  if (!d) return oom();
  atomic_init(&d->count, 1);
  d->params = p;
  if (instance) d->allocator = instance->allocator;
  hali_status_t s =
      make_hal_device(&p, &d->allocator, p.max_memory_bytes, &d->hal);
  if (s) {
    free(d);
    return s;
  }
  *out_device = d;
  return HALI_OK;
}

void hali_device_retain(hali_device_t *device) {
  if (device) atomic_fetch_add(&device->count, 1);
}

void hali_device_release(hali_device_t *device) {
  if (device && atomic_fetch_sub(&device->count, 1) == 1) {
    hali_hal_device_release(device->hal);
    free(device);
  }
}

void hali_device_abandon(hali_device_t *device) {
  if (device) hali_hal_device_abandon(device->hal);
}

/* ------------------------------------------------------------------------ */
/* Modules. */

/* Read, lowered, verified and encoded once, at load; immutable afterwards,
 * so contexts on any thread share it.  What a context loads and binds for
 * it lives in the context's link table (hali_vm_link_t), not here. */
struct hali_module_s {
  atomic_uint_fast32_t count;
  uint8_t *data; /* the bytes as written, for hali_module_write_binary */
  size_t size;
  char *name;    /* for errors: the path or the caller's name */
  char *path;    /* NULL when loaded from memory; where executables are */
  hali_vm_module_t *vm; /* the encoded module; one reference */
  const hali_ir_module_t *ir; /* vm->ir: verified, lowered; for names */
};

void hali_module_load_options_initialize(hali_module_load_options_t *out) {
  if (out) memset(out, 0, sizeof(*out));
}

static void module_free(hali_module_t *m) {
  hali_vm_module_release(m->vm);
  free(m->data);
  free(m->name);
  free(m->path);
  free(m);
}

static hali_status_t module_create(uint8_t *data, size_t size,
                                   const char *name, const char *path,
                                   const hali_module_load_options_t *options,
                                   hali_module_t **out) {
  hali_module_t *m = calloc(1, sizeof(*m));
  if (!m) {
    free(data);
    return oom();
  }
  atomic_init(&m->count, 1);
  m->data = data;
  m->size = size;
  m->name = strdup(name);
  m->path = dup_or_null(path);
  hali_status_t s = !m->name || (path && !m->path) ? oom() : HALI_OK;
  hali_pass_options_t passes = {0};
  if (options) {
    passes.none = options->no_passes;
    passes.only = options->passes;
  }
  /* The one load: text or binary -> passes -> verify -> encode.  Unknown
   * pass names are reported by it, naming the module. */
  hali_load_options_t lo = {&passes, false};
  hali_ir_module_t *ir = NULL;
  if (!s) s = hali_load_bytes_ex(data, size, name, &lo, &ir);
  if (!s) s = hali_vm_module_create(ir, &m->vm); /* takes |ir| */
  if (s) {
    module_free(m);
    return s;
  }
  m->ir = m->vm->ir;
  *out = m;
  return HALI_OK;
}

hali_status_t hali_module_load_file(hali_instance_t *instance,
                                    const char *path,
                                    hali_module_t **out_module) {
  CHECK_ARG(out_module);
  *out_module = NULL;
  CHECK_ARG(instance);
  CHECK_ARG(path);
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR_PLAIN(hali_read_file(path, &data, &size));
  return module_create(data, size, path, path, NULL, out_module);
}

hali_status_t hali_module_load_file_ex(
    hali_instance_t *instance, const char *path,
    const hali_module_load_options_t *options, hali_module_t **out_module) {
  CHECK_ARG(out_module);
  *out_module = NULL;
  CHECK_ARG(instance);
  CHECK_ARG(path);
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR_PLAIN(hali_read_file(path, &data, &size));
  return module_create(data, size, path, path, options, out_module);
}

hali_status_t hali_module_load_bytes(hali_instance_t *instance,
                                     const void *data, size_t size,
                                     const char *name,
                                     hali_module_t **out_module) {
  CHECK_ARG(out_module);
  *out_module = NULL;
  CHECK_ARG(instance);
  CHECK_ARG(data);
  uint8_t *copy = malloc(size + 1);
  if (!copy) return oom();
  memcpy(copy, data, size);
  copy[size] = 0;
  return module_create(copy, size, name ? name : "(memory)", NULL, NULL,
                       out_module);
}

void hali_module_retain(hali_module_t *module) {
  if (module) atomic_fetch_add(&module->count, 1);
}

void hali_module_release(hali_module_t *module) {
  if (module && atomic_fetch_sub(&module->count, 1) == 1) module_free(module);
}

const char *hali_module_name(const hali_module_t *module) {
  return module ? module->ir->name : NULL;
}

size_t hali_module_function_count(const hali_module_t *module) {
  return module ? module->ir->func_count : 0;
}

const char *hali_module_function_name(const hali_module_t *module, size_t i) {
  if (!module || i >= module->ir->func_count) return NULL;
  return module->ir->funcs[i].name;
}

hali_status_t hali_module_write_binary(const hali_module_t *module, bool strip,
                                       void **out_data, size_t *out_size) {
  CHECK_ARG(out_data);
  *out_data = NULL;
  CHECK_ARG(out_size);
  *out_size = 0;
  CHECK_ARG(module);
  /* The bytes hold the module as written; the loader lowers it when it is
   * loaded. */
  hali_ir_module_t *m = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_read_module(module->data, module->size, module->name, &m));
  hali_hbc_write_options_t wo = {.strip = strip};
  uint8_t *data = NULL;
  hali_status_t s = hali_hbc_write(m, &wo, &data, out_size);
  hali_ir_module_free(m);
  *out_data = data;
  return s;
}

hali_status_t hali_module_print_file(const char *path,
                                     const hali_module_print_options_t *options,
                                     char **out_text) {
  CHECK_ARG(out_text);
  *out_text = NULL;
  CHECK_ARG(path);
  hali_module_print_options_t o = {0};
  if (options) o = *options;
  hali_pass_options_t po = {.only = o.passes, .none = o.no_passes,
                            .after = o.after};
  HALI_RETURN_IF_ERROR_PLAIN(hali_pass_options_check(&po));
  bool lowered = o.passes || o.after;
  hali_ir_module_t *m = NULL;
  hali_status_t s;
  if (lowered) {
    /* After some passes the IR may not be runnable yet: verify only when
     * the whole pipeline ran. */
    bool all = !po.only && (!po.after || strcmp(po.after, "all") == 0);
    hali_load_options_t lo = {&po, !all};
    s = hali_load_file_ex(path, &lo, &m);
  } else {
    /* As written; but only a module that loads is printed. */
    uint8_t *data;
    size_t size;
    s = hali_read_file(path, &data, &size);
    if (!s) {
      hali_load_options_t lo = {&po, po.none};
      s = hali_load_bytes_ex(data, size, path, &lo, &m);
      hali_ir_module_free(s ? NULL : m);
      if (!s) s = hali_read_module(data, size, path, &m);
      free(data);
    }
  }
  if (s) return s;
  char *text = hali_ir_print_ex(m, !o.no_locs, lowered);
  hali_ir_module_free(m);
  if (!text) return oom();
  *out_text = text;
  return HALI_OK;
}

char *hali_instruction_set_markdown(void) { return hali_isa_markdown(); }

/* ------------------------------------------------------------------------ */
/* Contexts. */

typedef enum { BIND_HOST, BIND_FFI, BIND_MODULE } binding_kind_t;

/* What an import of a context's module is bound to; owned by the
 * context. */
typedef struct binding_s {
  struct binding_s *next;
  binding_kind_t kind;
  hali_context_t *context;
  const hali_ir_func_t *decl;
  /* BIND_HOST */
  hali_import_callback_t callback;
  void *user;
  /* BIND_FFI */
  void *dl;
  void (*fn)(void);
  ffi_cif cif;
  ffi_type *arg_types[API_MAX_VALUES];
  /* BIND_MODULE: the other module's link table in the same context */
  const hali_vm_link_t *target_link;
  const hali_vm_func_t *target;
  /* A register stack kept for the next call (NULL while one is running
   * it: a recursive call makes its own), so warm calls allocate nothing. */
  _Atomic(hali_vm_stack_t *) stack;
} binding_t;

struct hali_function_s {
  hali_context_t *context;
  const hali_vm_link_t *link; /* its module's, in |context| */
  const hali_vm_func_t *fn;
};

/* One module of a context: the shared module and this context's link table
 * for it (its executables and bound imports). */
typedef struct {
  hali_module_t *module; /* retained */
  hali_vm_module_t *vm;  /* module->vm, shared */
  hali_vm_link_t *link;  /* owned */
  hali_function_t *functions;
} context_module_t;

struct hali_invocation_s {
  hali_context_t *context; /* retained (async invocations) */
  hali_vm_fiber_t *fiber;
  const hali_function_t *function;
  struct hali_invocation_s *prev, *next; /* the context's live list */
};

struct hali_context_s {
  atomic_uint_fast32_t count;
  hali_instance_t *instance;
  hali_device_t *device;
  hali_hal_device_t *hal; /* the device's, or a private one */
  bool private_device;
  context_module_t *modules;
  size_t module_count;
  binding_t *bindings;
  hali_trace_t *trace;
  char *trace_filter;
  hali_vm_scheduler_t *scheduler;
  /* Guards |live| (cancellation comes from other threads). */
  pthread_mutex_t mutex;
  hali_invocation_t *live;
};

static hali_status_t host_import_call(void *user, const hali_value_t *args,
                                      size_t n, hali_value_t *results,
                                      size_t m) {
  binding_t *b = user;
  hali_variant_t vargs[API_MAX_VALUES], vres[API_MAX_VALUES];
  for (size_t i = 0; i < n; ++i) value_to_variant(&args[i], &vargs[i]);
  for (size_t i = 0; i < m; ++i) {
    memset(&vres[i], 0, sizeof(vres[i]));
    vres[i].type = (hali_variant_type_t)results[i].type;
  }
  hali_status_t s = b->callback(b->user, vargs, n, vres, m);
  for (size_t i = 0; i < m; ++i) {
    switch (results[i].type) {
    case HALI_TYPE_I32: results[i].i32 = vres[i].u.i32; break;
    case HALI_TYPE_I64: results[i].i64 = vres[i].u.i64; break;
    case HALI_TYPE_F32: results[i].f32 = vres[i].u.f32; break;
    case HALI_TYPE_F64: results[i].f64 = vres[i].u.f64; break;
    default:
      /* Handed over even on failure so that nothing leaks: the VM
       * releases ref results it does not take. */
      if (s) hali_ref_release((hali_ref_t *)vres[i].u.ref);
      else results[i].ref = (hali_ref_t *)vres[i].u.ref;
    }
  }
  return s;
}

static hali_status_t ffi_import_call(void *user, const hali_value_t *args,
                                     size_t n, hali_value_t *results,
                                     size_t m) {
  binding_t *b = user;
  void *values[API_MAX_VALUES];
  uint64_t slots[API_MAX_VALUES];
  /* A byte copy of each value's union: every scalar starts at offset 0. */
  for (size_t i = 0; i < n; ++i) {
    memcpy(&slots[i], &args[i].i64, sizeof(slots[i]));
    values[i] = &slots[i];
  }
  union {
    ffi_arg word;
    int64_t i64;
    float f32;
    double f64;
  } rv;
  memset(&rv, 0, sizeof(rv));
  ffi_call(&b->cif, b->fn, &rv, values);
  if (m) {
    switch (results[0].type) {
    case HALI_TYPE_I32: results[0].i32 = (int32_t)rv.word; break;
    case HALI_TYPE_I64: results[0].i64 = rv.i64; break;
    case HALI_TYPE_F32: results[0].f32 = rv.f32; break;
    default: results[0].f64 = rv.f64; break;
    }
  }
  return HALI_OK;
}

/* A call into another module of the context: a nested invocation under
 * that module's link table, on a stack of its own (it blocks in awaits
 * rather than suspending).  The binding keeps one stack between calls; a
 * call that finds it taken (recursion through the import) makes another,
 * and frees it if the slot was refilled meanwhile. */
static hali_status_t module_import_call(void *user, const hali_value_t *args,
                                        size_t n, hali_value_t *results,
                                        size_t m) {
  binding_t *b = user;
  hali_vm_stack_t *st = atomic_exchange(&b->stack, NULL);
  if (!st) HALI_RETURN_IF_ERROR_PLAIN(hali_vm_stack_create(0, &st));
  st->device = b->context->hal;
  hali_status_t s =
      hali_vm_link_invoke(st, b->target_link, b->target, args, n, results, m);
  /* A failed invocation has unwound already; the stack is reusable. */
  hali_vm_stack_t *empty = NULL;
  if (!atomic_compare_exchange_strong(&b->stack, &empty, st))
    hali_vm_stack_free(st);
  return s;
}

static ffi_type *ffi_type_of(hali_type_t t) {
  switch (t) {
  case HALI_TYPE_I32: return &ffi_type_sint32;
  case HALI_TYPE_I64: return &ffi_type_sint64;
  case HALI_TYPE_F32: return &ffi_type_float;
  case HALI_TYPE_F64: return &ffi_type_double;
  default: return NULL;
  }
}

static hali_status_t bind_ffi(binding_t *b, const ffi_library_t *lib,
                              const char *symbol) {
  const hali_ir_func_t *f = b->decl;
  if (f->param_count > API_MAX_VALUES || f->result_count > 1)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "import @%s: a C function takes at most %d "
                            "arguments and returns at most one value",
                            f->name, API_MAX_VALUES);
  for (uint32_t i = 0; i < f->param_count; ++i)
    if (!(b->arg_types[i] = ffi_type_of(f->reg_types[i])))
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "import @%s: parameter %u is %s; C functions "
                              "take i32, i64, f32 or f64",
                              f->name, i, hali_type_name(f->reg_types[i]));
  ffi_type *ret = &ffi_type_void;
  if (f->result_count && !(ret = ffi_type_of(f->results[0])))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "import @%s: the result is %s; C functions "
                            "return i32, i64, f32 or f64",
                            f->name, hali_type_name(f->results[0]));
  b->dl = dlopen(lib->path, RTLD_NOW | RTLD_LOCAL);
  if (!b->dl) {
    const char *why = dlerror();
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "import @%s: cannot load library \"%s\": %s",
                            f->name, lib->path, why ? why : "?");
  }
  dlerror();
  void *sym = dlsym(b->dl, symbol);
  if (!sym)
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "import @%s: no symbol '%s' in \"%s\"", f->name,
                            symbol, lib->path);
  b->fn = (void (*)(void))(uintptr_t)sym;
  if (ffi_prep_cif(&b->cif, FFI_DEFAULT_ABI, f->param_count, ret,
                   b->arg_types) != FFI_OK)
    return hali_status_make(HALI_STATUS_INTERNAL,
                            "import @%s: libffi cannot prepare the call",
                            f->name);
  return HALI_OK;
}

/* Binds import |f| (index |index|) of context module |mi|, if something
 * provides it. */
static hali_status_t link_import(hali_context_t *c, size_t mi, uint32_t index) {
  const hali_vm_module_t *vm = c->modules[mi].vm;
  const hali_ir_func_t *f = &vm->ir->funcs[index];
  const char *dot = strchr(f->name, '.');
  if (!dot) return HALI_OK;
  size_t mlen = (size_t)(dot - f->name);
  const char *fname = dot + 1;
  const hali_instance_t *in = c->instance;
  binding_t *b = calloc(1, sizeof(*b));
  if (!b) return oom();
  b->context = c;
  b->decl = f;
  hali_vm_import_fn_t fn = NULL;
  hali_status_t s = HALI_OK;
  signature_t have;
  func_signature(f, &have);
  for (size_t i = 0; !fn && i < in->host_count; ++i) {
    const host_module_t *hm = &in->hosts[i];
    if (strlen(hm->name) != mlen || memcmp(hm->name, f->name, mlen)) continue;
    for (size_t j = 0; j < hm->count; ++j) {
      const host_function_t *hf = &hm->functions[j];
      if (strcmp(hf->name, fname) != 0) continue;
      if (hf->checked && !signature_equal(&hf->sig, &have)) {
        char a[256], h[256];
        signature_format(&have, a, sizeof(a));
        signature_format(&hf->sig, h, sizeof(h));
        s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                             "import @%s: module @%s declares %s but the "
                             "host registered %s",
                             f->name, vm->ir->name, a, h);
        break;
      }
      b->kind = BIND_HOST;
      b->callback = hf->callback;
      b->user = hf->user;
      fn = host_import_call;
      break;
    }
    break;
  }
  for (size_t i = 0; !s && !fn && i < in->ffi_count; ++i) {
    const ffi_library_t *lib = &in->ffis[i];
    if (strlen(lib->name) != mlen || memcmp(lib->name, f->name, mlen)) continue;
    b->kind = BIND_FFI;
    s = bind_ffi(b, lib, fname);
    if (!s) fn = ffi_import_call;
  }
  for (size_t i = 0; !s && !fn && i < c->module_count; ++i) {
    const hali_vm_module_t *other = c->modules[i].vm;
    if (i == mi || strlen(other->ir->name) != mlen ||
        memcmp(other->ir->name, f->name, mlen))
      continue;
    const hali_vm_func_t *target = hali_vm_module_lookup(other, fname);
    if (!target || (target->ir->flags & HALI_FUNC_IMPORT)) continue;
    signature_t want;
    func_signature(target->ir, &want);
    if (!signature_equal(&want, &have)) {
      char a[256], h[256];
      signature_format(&have, a, sizeof(a));
      signature_format(&want, h, sizeof(h));
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "import @%s: module @%s declares %s but module "
                           "@%s defines %s",
                           f->name, vm->ir->name, a, other->ir->name, h);
      break;
    }
    b->kind = BIND_MODULE;
    b->target_link = c->modules[i].link;
    b->target = target;
    fn = module_import_call;
  }
  if (!s && fn) s = hali_vm_link_bind_import(c->modules[mi].link, f->name, fn, b);
  if (s || !fn) {
    if (b->dl) dlclose(b->dl);
    free(b);
    return s;
  }
  b->next = c->bindings;
  c->bindings = b;
  return HALI_OK;
}

static void context_free(hali_context_t *c) {
  /* Cancels and frees fibers still pending. */
  hali_vm_scheduler_free(c->scheduler);
  for (size_t i = 0; i < c->module_count; ++i) {
    /* After the scheduler: no fiber runs through the link any more.
     * Recorded work keeps the executables (and they their module). */
    hali_vm_link_free(c->modules[i].link);
    hali_module_release(c->modules[i].module);
    free(c->modules[i].functions);
  }
  free(c->modules);
  while (c->bindings) {
    binding_t *b = c->bindings;
    c->bindings = b->next;
    if (b->dl) dlclose(b->dl);
    hali_vm_stack_free(atomic_load(&b->stack));
    free(b);
  }
  if (c->hal) {
    /* A private device may hold work waiting on fences nobody will signal
     * any more: give it up instead of waiting in the release. */
    if (c->private_device) hali_hal_device_abandon(c->hal);
    hali_hal_device_release(c->hal);
  }
  hali_trace_free(c->trace);
  free(c->trace_filter);
  hali_device_release(c->device);
  hali_instance_release(c->instance);
  pthread_mutex_destroy(&c->mutex);
  free(c);
}

static hali_status_t context_link(hali_context_t *c,
                                  const hali_context_params_t *p) {
  const hali_device_params_t *dp = &c->device->params;
  uint64_t limit = p->max_memory_bytes;
  if (dp->max_memory_bytes && (!limit || dp->max_memory_bytes < limit))
    limit = dp->max_memory_bytes;
  /* A Chrome trace times the device's work, whatever the bits say. */
  bool chrome = p->trace_bits && p->trace_format == HALI_TRACE_FORMAT_CHROME;
  bool hal_tracer = (p->trace_bits & HALI_TRACE_BITS_HAL) || chrome;
  if (p->max_memory_bytes || hal_tracer) {
    c->private_device = true;
    HALI_RETURN_IF_ERROR(make_hal_device(dp, &c->device->allocator, limit,
                                         &c->hal),
                         "creating the context's device");
  } else {
    c->hal = c->device->hal;
    hali_hal_device_retain(c->hal);
  }
  if (p->trace_bits) {
    hali_trace_options_t to = {0};
    if (p->trace_bits & HALI_TRACE_BITS_VM) to.flags |= HALI_TRACE_VM;
    if (p->trace_bits & HALI_TRACE_BITS_HAL) to.flags |= HALI_TRACE_HAL;
    to.format = chrome ? HALI_TRACE_CHROME : HALI_TRACE_TEXT;
    to.out = p->trace_file;
    to.callback = p->trace_callback;
    to.user = p->trace_user;
    to.max_values = p->trace_max_values;
    if (p->trace_filter) {
      c->trace_filter = strdup(p->trace_filter);
      if (!c->trace_filter) return oom();
      to.filter = c->trace_filter;
    }
    HALI_RETURN_IF_ERROR_PLAIN(hali_trace_create(&to, &c->trace));
    if (hal_tracer) {
      hali_hal_tracer_t ht = hali_trace_hal_tracer(c->trace);
      hali_hal_device_set_tracer(c->hal, &ht);
    }
  }
  const hali_instance_t *in = c->instance;
  for (size_t i = 0; i < c->module_count; ++i) {
    context_module_t *cm = &c->modules[i];
    /* The module was read, lowered, verified and encoded at load: linking
     * only loads its executables and, below, binds its imports. */
    HALI_RETURN_IF_ERROR_PLAIN(hali_vm_link_create(cm->vm, &cm->link));
    HALI_RETURN_IF_ERROR(
        hali_executable_registry_load_link(in->registry, cm->link,
                                           cm->module->path,
                                           (const char *const *)in->paths,
                                           in->path_count),
        "linking module @%s", cm->vm->ir->name);
    cm->functions = calloc(cm->vm->func_count ? cm->vm->func_count : 1,
                           sizeof(hali_function_t));
    if (!cm->functions) return oom();
    for (uint32_t f = 0; f < cm->vm->func_count; ++f)
      cm->functions[f] =
          (hali_function_t){c, cm->link, &cm->vm->funcs[f]};
  }
  /* Imports, once every module is loaded (modules may import each
   * other). */
  for (size_t i = 0; i < c->module_count; ++i) {
    const hali_vm_module_t *vm = c->modules[i].vm;
    for (uint32_t f = 0; f < vm->func_count; ++f)
      if (vm->ir->funcs[f].flags & HALI_FUNC_IMPORT)
        HALI_RETURN_IF_ERROR(link_import(c, i, f), "linking module @%s",
                             vm->ir->name);
    HALI_RETURN_IF_ERROR_PLAIN(hali_vm_link_check_imports(c->modules[i].link));
  }
  hali_vm_scheduler_options_t so = {
      .max_depth = p->max_call_depth,
      .fuel_enabled = p->fuel != 0,
      .fuel = p->fuel,
      .trace = c->trace,
  };
  return hali_vm_scheduler_create(c->hal, &so, &c->scheduler);
}

hali_status_t hali_context_create(hali_instance_t *instance,
                                  hali_device_t *device,
                                  hali_module_t *const *modules,
                                  size_t module_count,
                                  const hali_context_params_t *params,
                                  hali_context_t **out_context) {
  CHECK_ARG(out_context);
  *out_context = NULL;
  CHECK_ARG(instance);
  CHECK_ARG(device);
  CHECK_ARG(modules);
  if (!module_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: a context needs at least one module",
                            __func__);
  for (size_t i = 0; i < module_count; ++i)
    if (!modules[i])
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s: module %zu is NULL", __func__, i);
  const hali_context_params_t *p = params ? params : &instance->defaults;
  if (p->trace_format != HALI_TRACE_FORMAT_TEXT &&
      p->trace_format != HALI_TRACE_FORMAT_CHROME)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: unknown trace format %d (expected "
                            "HALI_TRACE_FORMAT_TEXT or "
                            "HALI_TRACE_FORMAT_CHROME)",
                            __func__, (int)p->trace_format);
  hali_context_t *c = calloc(1, sizeof(*c));
  if (!c) return oom();
  c->modules = calloc(module_count, sizeof(context_module_t));
  if (!c->modules) {
    free(c);
    return oom();
  }
  atomic_init(&c->count, 1);
  pthread_mutex_init(&c->mutex, NULL);
  atomic_store(&instance->frozen, true);
  c->instance = instance;
  hali_instance_retain(instance);
  c->device = device;
  hali_device_retain(device);
  c->module_count = module_count;
  for (size_t i = 0; i < module_count; ++i) {
    c->modules[i].module = modules[i];
    c->modules[i].vm = modules[i]->vm;
    hali_module_retain(modules[i]);
  }
  hali_status_t s = context_link(c, p);
  if (s) {
    context_free(c);
    return s;
  }
  *out_context = c;
  return HALI_OK;
}

void hali_context_retain(hali_context_t *context) {
  if (context) atomic_fetch_add(&context->count, 1);
}

void hali_context_release(hali_context_t *context) {
  if (context && atomic_fetch_sub(&context->count, 1) == 1)
    context_free(context);
}

hali_status_t hali_context_lookup_function(hali_context_t *context,
                                           const char *name,
                                           hali_function_t **out_function) {
  CHECK_ARG(out_function);
  *out_function = NULL;
  CHECK_ARG(context);
  CHECK_ARG(name);
  if (name[0] == '@') ++name;
  const char *dot = strchr(name, '.');
  const char *import_of = NULL; /* a module that only imports |name| */
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < context->module_count; ++i) {
      context_module_t *cm = &context->modules[i];
      const char *local = name;
      if (pass == 1) {
        /* "module.function" */
        size_t mlen = dot ? (size_t)(dot - name) : 0;
        if (!dot || strlen(cm->vm->ir->name) != mlen ||
            memcmp(cm->vm->ir->name, name, mlen))
          continue;
        local = dot + 1;
      }
      int32_t f = hali_ir_module_find_func(cm->vm->ir, local);
      if (f < 0) continue;
      if (cm->vm->ir->funcs[f].flags & HALI_FUNC_IMPORT) {
        if (!import_of) import_of = cm->vm->ir->name;
        continue;
      }
      *out_function = &cm->functions[f];
      return HALI_OK;
    }
  }
  if (import_of)
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "@%s is an import of module @%s, not a function "
                            "it defines",
                            name, import_of);
  return hali_status_make(HALI_STATUS_NOT_FOUND,
                          "no function @%s in the context's %zu module(s) "
                          "(first: @%s)",
                          name, context->module_count,
                          context->modules[0].vm->ir->name);
}

const char *hali_function_name(const hali_function_t *function) {
  return function ? function->fn->ir->name : NULL;
}
size_t hali_function_argument_count(const hali_function_t *function) {
  return function ? function->fn->ir->param_count : 0;
}
size_t hali_function_result_count(const hali_function_t *function) {
  return function ? function->fn->ir->result_count : 0;
}
hali_variant_type_t hali_function_argument_type(const hali_function_t *function,
                                                size_t i) {
  if (!function || i >= function->fn->ir->param_count) return HALI_VARIANT_NONE;
  return (hali_variant_type_t)function->fn->ir->reg_types[i];
}
hali_variant_type_t hali_function_result_type(const hali_function_t *function,
                                              size_t i) {
  if (!function || i >= function->fn->ir->result_count)
    return HALI_VARIANT_NONE;
  return (hali_variant_type_t)function->fn->ir->results[i];
}

/* Validates and starts |function| on a new fiber. */
static hali_status_t start(hali_context_t *c, const hali_function_t *function,
                           const hali_variant_t *args, size_t arg_count,
                           hali_vm_fiber_t **out) {
  if (function->context != c)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s was looked up in another context",
                            function->fn->ir->name);
  hali_value_t values[API_MAX_VALUES];
  hali_value_t *v = values;
  if (arg_count > API_MAX_VALUES) {
    v = calloc(arg_count, sizeof(*v));
    if (!v) return oom();
  }
  hali_status_t s = variants_to_values(function->fn->ir, args, arg_count, v);
  /* The fiber retains the refs it keeps. */
  if (!s)
    s = hali_vm_scheduler_start_link(c->scheduler, function->link,
                                     function->fn, v, arg_count, out);
  if (v != values) free(v);
  return s;
}

static void link_live(hali_context_t *c, hali_invocation_t *inv) {
  pthread_mutex_lock(&c->mutex);
  inv->prev = NULL;
  inv->next = c->live;
  if (c->live) c->live->prev = inv;
  c->live = inv;
  pthread_mutex_unlock(&c->mutex);
}

static void unlink_live(hali_context_t *c, hali_invocation_t *inv) {
  pthread_mutex_lock(&c->mutex);
  if (inv->prev) inv->prev->next = inv->next;
  else if (c->live == inv) c->live = inv->next;
  if (inv->next) inv->next->prev = inv->prev;
  inv->prev = inv->next = NULL;
  pthread_mutex_unlock(&c->mutex);
}

static hali_status_t copy_results(const hali_vm_fiber_t *fiber,
                                  hali_variant_t *results,
                                  size_t result_count) {
  size_t n;
  const hali_value_t *r = hali_vm_fiber_results(fiber, &n);
  if (result_count != n)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "the function returns %zu result(s), room for %zu "
                            "given",
                            n, result_count);
  if (n && !results)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "the result array is NULL");
  for (size_t i = 0; i < n; ++i) {
    value_to_variant(&r[i], &results[i]);
    if (hali_type_is_ref(r[i].type)) hali_ref_retain(r[i].ref);
  }
  return HALI_OK;
}

hali_status_t hali_context_invoke(hali_context_t *context,
                                  const hali_function_t *function,
                                  const hali_variant_t *args, size_t arg_count,
                                  hali_variant_t *results,
                                  size_t result_count) {
  CHECK_ARG(context);
  CHECK_ARG(function);
  const hali_ir_func_t *f = function->fn->ir;
  if (result_count != f->result_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s returns %u result(s), room for %zu given",
                            f->name, f->result_count, result_count);
  if (result_count && !results)
    return null_arg(__func__, "results");
  for (size_t i = 0; i < result_count; ++i)
    memset(&results[i], 0, sizeof(results[i]));
  hali_vm_scheduler_allow_external_signals(context->scheduler, false);
  hali_invocation_t inv = {.context = context, .function = function};
  HALI_RETURN_IF_ERROR_PLAIN(
      start(context, function, args, arg_count, &inv.fiber));
  link_live(context, &inv);
  hali_status_t s = hali_vm_scheduler_run(context->scheduler, inv.fiber);
  if (s) {
    /* A deadlock report: stop the fiber rather than leave it suspended. */
    hali_vm_fiber_cancel(inv.fiber);
    hali_status_free(hali_vm_scheduler_run(context->scheduler, inv.fiber));
  }
  unlink_live(context, &inv);
  if (!s && hali_vm_fiber_status(inv.fiber))
    s = hali_status_clone(hali_vm_fiber_status(inv.fiber));
  if (!s) s = copy_results(inv.fiber, results, result_count);
  hali_vm_fiber_release(inv.fiber);
  return s;
}

hali_status_t hali_context_invoke_async(hali_context_t *context,
                                        const hali_function_t *function,
                                        const hali_variant_t *args,
                                        size_t arg_count,
                                        hali_invocation_t **out_invocation) {
  CHECK_ARG(out_invocation);
  *out_invocation = NULL;
  CHECK_ARG(context);
  CHECK_ARG(function);
  hali_invocation_t *inv = calloc(1, sizeof(*inv));
  if (!inv) return oom();
  hali_status_t s = start(context, function, args, arg_count, &inv->fiber);
  if (s) {
    free(inv);
    return s;
  }
  inv->context = context;
  inv->function = function;
  hali_context_retain(context);
  link_live(context, inv);
  *out_invocation = inv;
  return HALI_OK;
}

hali_status_t hali_context_run(hali_context_t *context) {
  CHECK_ARG(context);
  hali_vm_scheduler_allow_external_signals(context->scheduler, true);
  return hali_vm_scheduler_run(context->scheduler, NULL);
}

void hali_context_cancel(hali_context_t *context) {
  if (!context) return;
  pthread_mutex_lock(&context->mutex);
  for (hali_invocation_t *inv = context->live; inv; inv = inv->next)
    hali_vm_fiber_cancel(inv->fiber);
  pthread_mutex_unlock(&context->mutex);
}

hali_status_t hali_invocation_await(hali_invocation_t *invocation) {
  return hali_invocation_await_for(invocation, HALI_TIMEOUT_INFINITE);
}

hali_status_t hali_invocation_await_for(hali_invocation_t *invocation,
                                        int64_t timeout_ns) {
  CHECK_ARG(invocation);
  hali_context_t *c = invocation->context;
  int64_t deadline = INT64_MAX;
  if (timeout_ns >= 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    deadline = timeout_ns < INT64_MAX - now ? now + timeout_ns : INT64_MAX - 1;
  }
  hali_vm_scheduler_allow_external_signals(c->scheduler, true);
  return hali_vm_scheduler_run_until(c->scheduler, invocation->fiber,
                                     deadline);
}

bool hali_invocation_is_done(const hali_invocation_t *invocation) {
  return invocation && hali_vm_fiber_done(invocation->fiber);
}

hali_status_t hali_invocation_status(const hali_invocation_t *invocation) {
  CHECK_ARG(invocation);
  if (!hali_vm_fiber_done(invocation->fiber))
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "the invocation of @%s has not finished",
                            invocation->function->fn->ir->name);
  hali_status_t s = hali_vm_fiber_status(invocation->fiber);
  return s ? hali_status_clone(s) : HALI_OK;
}

hali_status_t hali_invocation_results(const hali_invocation_t *invocation,
                                      hali_variant_t *results,
                                      size_t result_count) {
  CHECK_ARG(invocation);
  HALI_RETURN_IF_ERROR_PLAIN(hali_invocation_status(invocation));
  return hali_status_annotate(
      copy_results(invocation->fiber, results, result_count),
      "results of @%s", invocation->function->fn->ir->name);
}

hali_fence_t *hali_invocation_fence(const hali_invocation_t *invocation) {
  return invocation ? hali_vm_fiber_fence(invocation->fiber) : NULL;
}

void hali_invocation_cancel(hali_invocation_t *invocation) {
  if (!invocation) return;
  hali_context_t *c = invocation->context;
  pthread_mutex_lock(&c->mutex);
  hali_vm_fiber_cancel(invocation->fiber);
  pthread_mutex_unlock(&c->mutex);
}

void hali_invocation_release(hali_invocation_t *invocation) {
  if (!invocation) return;
  hali_context_t *c = invocation->context;
  unlink_live(c, invocation);
  hali_vm_fiber_release(invocation->fiber);
  free(invocation);
  hali_context_release(c);
}

/* ------------------------------------------------------------------------ */
/* Elements: one value of a buffer view, as text and as a number. */

const char *hali_element_type_name(hali_element_type_t type) {
  return hali_hal_element_type_name(type);
}

hali_status_t hali_element_type_parse(const char *text, size_t length,
                                      hali_element_type_t *out_type) {
  CHECK_ARG(out_type);
  *out_type = 0;
  if (length) CHECK_ARG(text);
  return hali_hal_element_type_parse(text ? text : "", length, out_type);
}

typedef enum { EK_SIGNED, EK_UNSIGNED, EK_BOOL, EK_FLOAT } elem_kind_t;

static elem_kind_t elem_kind(hali_element_type_t t) {
  switch (hali_hal_element_type_numerical_type(t)) {
  case HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED: return EK_UNSIGNED;
  case HALI_HAL_NUMERICAL_TYPE_BOOLEAN: return EK_BOOL;
  case HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE:
  case HALI_HAL_NUMERICAL_TYPE_FLOAT_BRAIN: return EK_FLOAT;
  default: return EK_SIGNED; /* signless and signed integers */
  }
}

static uint64_t load_bits(const uint8_t *p, uint32_t size) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < size; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void store_bits(uint8_t *p, uint32_t size, uint64_t v) {
  for (uint32_t i = 0; i < size; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

static double float_elem(hali_element_type_t t, const uint8_t *p) {
  uint64_t bits = load_bits(p, hali_hal_element_type_byte_size(t));
  switch (t) {
  case HALI_HAL_ELEMENT_TYPE_FLOAT_16: return hali_f16_to_f32((uint16_t)bits);
  case HALI_HAL_ELEMENT_TYPE_BFLOAT_16: return hali_bf16_to_f32((uint16_t)bits);
  case HALI_HAL_ELEMENT_TYPE_FLOAT_32: {
    float f;
    uint32_t u = (uint32_t)bits;
    memcpy(&f, &u, 4);
    return f;
  }
  case HALI_HAL_ELEMENT_TYPE_FLOAT_64: {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  default: return NAN;
  }
}

/* Integers as int64 (signed, signless) or uint64 bits (unsigned, bool). */
static int64_t int_elem(hali_element_type_t t, const uint8_t *p) {
  uint32_t size = hali_hal_element_type_byte_size(t);
  uint64_t bits = load_bits(p, size);
  if (elem_kind(t) != EK_SIGNED || size == 8) return (int64_t)bits;
  uint32_t shift = 64 - 8 * size;
  return (int64_t)(bits << shift) >> shift;
}

void hali_element_format(hali_element_type_t type, const void *element,
                         char *buffer, size_t capacity) {
  if (!buffer || !capacity) return;
  if (!element || !hali_hal_element_type_is_known(type)) {
    snprintf(buffer, capacity, "?");
    return;
  }
  const uint8_t *p = element;
  switch (elem_kind(type)) {
  case EK_FLOAT:
    hali_format_float(buffer, capacity, float_elem(type, p),
                      type == HALI_HAL_ELEMENT_TYPE_FLOAT_16    ? HALI_FLOAT_F16
                      : type == HALI_HAL_ELEMENT_TYPE_BFLOAT_16 ? HALI_FLOAT_BF16
                      : type == HALI_HAL_ELEMENT_TYPE_FLOAT_32  ? HALI_FLOAT_F32
                                                                : HALI_FLOAT_F64,
                      false);
    break;
  case EK_UNSIGNED:
  case EK_BOOL:
    snprintf(buffer, capacity, "%" PRIu64, (uint64_t)int_elem(type, p));
    break;
  default:
    snprintf(buffer, capacity, "%" PRId64, int_elem(type, p));
  }
}

double hali_element_to_f64(hali_element_type_t type, const void *element) {
  if (!element || !hali_hal_element_type_is_known(type)) return NAN;
  switch (elem_kind(type)) {
  case EK_FLOAT: return float_elem(type, element);
  case EK_UNSIGNED:
  case EK_BOOL: return (double)(uint64_t)int_elem(type, element);
  default: return (double)int_elem(type, element);
  }
}

/* Parses NUL-terminated |buf| as an element of |t| into |p|. */
static bool parse_elem(hali_element_type_t t, const char *buf, uint8_t *p) {
  uint32_t size = hali_hal_element_type_byte_size(t);
  uint32_t bits = hali_hal_element_type_bit_count(t);
  char *end;
  errno = 0;
  switch (elem_kind(t)) {
  case EK_FLOAT: {
    double d = strtod(buf, &end);
    if (*end) return false;
    uint64_t out;
    if (t == HALI_HAL_ELEMENT_TYPE_FLOAT_16) out = hali_f32_to_f16((float)d);
    else if (t == HALI_HAL_ELEMENT_TYPE_BFLOAT_16) out = hali_f32_to_bf16((float)d);
    else if (t == HALI_HAL_ELEMENT_TYPE_FLOAT_32) {
      float f = (float)d;
      uint32_t u;
      memcpy(&u, &f, 4);
      out = u;
    } else {
      memcpy(&out, &d, 8);
    }
    store_bits(p, size, out);
    return true;
  }
  case EK_BOOL:
  case EK_UNSIGNED: {
    uint64_t v;
    bool neg;
    if (strcmp(buf, "true") == 0) v = 1;
    else if (strcmp(buf, "false") == 0) v = 0;
    else if (!hali_parse_integer(buf, &neg, &v) || (neg && v)) return false;
    if (bits < 64 && v >> bits) return false;
    store_bits(p, size, v);
    return true;
  }
  default: {
    bool neg;
    uint64_t mag;
    if (!hali_parse_integer(buf, &neg, &mag)) return false;
    if (neg && mag > (1ull << 63)) return false;
    /* Signless integers also accept unsigned spellings (0xffffffff). */
    int64_t v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    if (!neg && mag > INT64_MAX && bits < 64) return false;
    if (bits < 64) {
      int64_t lo = -((int64_t)1 << (bits - 1));
      int64_t hi = (int64_t)((1ull << bits) - 1); /* signless: unsigned max */
      if (hali_hal_element_type_numerical_type(t) ==
          HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED)
        hi = ((int64_t)1 << (bits - 1)) - 1;
      if (v < lo || v > hi) return false;
    }
    store_bits(p, size, (uint64_t)v);
    return true;
  }
  }
}

hali_status_t hali_element_parse(hali_element_type_t type, const char *text,
                                 size_t length, void *out_element) {
  CHECK_ARG(out_element);
  if (length) CHECK_ARG(text);
  const char *name = hali_hal_element_type_name(type);
  if (!name)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown element type 0x%08x", type);
  /* No number needs more; longer text is not a valid element. */
  char buf[96];
  bool ok = length > 0 && length < sizeof(buf);
  if (ok) {
    memcpy(buf, text, length);
    buf[length] = 0;
    ok = parse_elem(type, buf, out_element);
  }
  if (ok) return HALI_OK;
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "'%.*s' is not a valid %s", (int)length,
                          text ? text : "", name);
}

/* ------------------------------------------------------------------------ */
/* Buffer views. */

hali_status_t hali_buffer_view_compute_size(hali_element_type_t element_type,
                                            size_t rank, const int64_t *shape,
                                            uint64_t *out_byte_length) {
  CHECK_ARG(out_byte_length);
  *out_byte_length = 0;
  if (rank) CHECK_ARG(shape);
  hali_hal_device_size_t bytes = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_compute_view_size(
      rank, shape, element_type, HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
      &bytes));
  *out_byte_length = bytes;
  return HALI_OK;
}

hali_status_t hali_buffer_view_create(hali_device_t *device,
                                      hali_element_type_t element_type,
                                      size_t rank, const int64_t *shape,
                                      const void *data, size_t data_size,
                                      hali_buffer_view_t **out_view) {
  CHECK_ARG(out_view);
  *out_view = NULL;
  CHECK_ARG(device);
  if (rank) CHECK_ARG(shape);
  if (!hali_hal_element_type_is_known(element_type))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown element type 0x%08x", element_type);
  hali_hal_device_size_t bytes = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_compute_view_size(
      rank, shape, element_type, HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
      &bytes));
  if (data && data_size != bytes)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "a view of that shape and element type holds "
                            "%llu bytes; %zu given",
                            (unsigned long long)bytes, data_size);
  hali_hal_buffer_params_t params = hali_hal_host_tensor_params();
  hali_hal_buffer_t *buffer = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_allocator_allocate_buffer(
      hali_hal_device_allocator(device->hal), params, bytes, &buffer));
  hali_status_t s = data && bytes
                        ? hali_hal_buffer_write(buffer, 0, data, (size_t)bytes)
                        : HALI_OK;
  if (!s)
    s = hali_hal_buffer_view_create(buffer, rank, shape, element_type,
                                    HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                                    out_view);
  hali_hal_buffer_release(buffer);
  return s;
}

void hali_buffer_view_retain(hali_buffer_view_t *view) {
  if (view) hali_hal_buffer_view_retain(view);
}
void hali_buffer_view_release(hali_buffer_view_t *view) {
  if (view) hali_hal_buffer_view_release(view);
}
size_t hali_buffer_view_rank(const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_rank(view) : 0;
}
int64_t hali_buffer_view_dim(const hali_buffer_view_t *view, size_t i) {
  return view ? hali_hal_buffer_view_dim(view, i) : 0;
}
hali_element_type_t hali_buffer_view_element_type(
    const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_element_type(view) : 0;
}
uint64_t hali_buffer_view_element_count(const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_element_count(view) : 0;
}
uint64_t hali_buffer_view_byte_length(const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_byte_length(view) : 0;
}

hali_status_t hali_buffer_view_read(const hali_buffer_view_t *view,
                                    void *target, size_t target_size) {
  CHECK_ARG(view);
  uint64_t bytes = hali_hal_buffer_view_byte_length(view);
  if (bytes) CHECK_ARG(target);
  if (target_size < bytes)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "the view holds %llu bytes; the target has room "
                            "for %zu",
                            (unsigned long long)bytes, target_size);
  if (!bytes) return HALI_OK;
  return hali_hal_buffer_read(hali_hal_buffer_view_buffer(view), 0, target,
                              (size_t)bytes);
}

/* ------------------------------------------------------------------------ */
/* Fences. */

hali_status_t hali_fence_create(hali_fence_t **out_fence) {
  CHECK_ARG(out_fence);
  return hali_hal_fence_create_pending(out_fence);
}
void hali_fence_retain(hali_fence_t *fence) {
  if (fence) hali_hal_fence_retain(fence);
}
void hali_fence_release(hali_fence_t *fence) {
  if (fence) hali_hal_fence_release(fence);
}
hali_status_t hali_fence_signal(hali_fence_t *fence) {
  CHECK_ARG(fence);
  return hali_hal_fence_signal(fence);
}
void hali_fence_fail(hali_fence_t *fence, hali_status_t status) {
  if (!fence) {
    hali_status_free(status);
    return;
  }
  if (!status)
    status = hali_status_make(HALI_STATUS_UNKNOWN, "failed by the host");
  hali_hal_fence_fail(fence, status);
}
hali_status_t hali_fence_query(hali_fence_t *fence, bool *out_ready) {
  CHECK_ARG(out_ready);
  *out_ready = false;
  CHECK_ARG(fence);
  return hali_hal_fence_query(fence, out_ready);
}
hali_status_t hali_fence_await(hali_fence_t *fence, int64_t timeout_ns) {
  CHECK_ARG(fence);
  return hali_hal_fence_await(fence, timeout_ns);
}
