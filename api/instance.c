/* hali — the C API: instances (registries of executable loaders, host
 * import modules, ffi libraries, allocator hooks), devices and modules. */
#include "api/api_int.h"
#include "base/alloc.h"

hali_status_t hali_api_null_arg(const char *fn, const char *what) {
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                          what);
}

const char *hali_version(void) { return HALI_VERSION_STRING; }

bool hali_trace_available(void) { return HALI_TRACING != 0; }


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
  for (size_t i = 0; i < in->path_count; ++i) hali_free(in->paths[i]);
  hali_free(in->paths);
  for (size_t i = 0; i < in->host_count; ++i) {
    for (size_t j = 0; j < in->hosts[i].count; ++j)
      hali_free(in->hosts[i].functions[j].name);
    hali_free(in->hosts[i].functions);
    hali_free(in->hosts[i].name);
  }
  hali_free(in->hosts);
  for (size_t i = 0; i < in->ffi_count; ++i) {
    hali_free(in->ffis[i].name);
    hali_free(in->ffis[i].path);
  }
  hali_free(in->ffis);
  hali_free(in->default_filter);
  hali_parameters_release(in->defaults.parameters);
  hali_free(in);
}

hali_status_t hali_instance_create(const hali_instance_options_t *options,
                                   hali_instance_t **out_instance) {
  CHECK_ARG(out_instance);
  *out_instance = NULL;
  hali_instance_t *in = hali_calloc(1, sizeof(*in));
  if (!in) return oom();
  atomic_init(&in->count, 1);
  atomic_init(&in->frozen, false);
  hali_status_t s = hali_executable_registry_create(&in->registry);
  if (!s && options) {
    if (options->executable_path_count && !options->executable_paths)
      s = hali_api_null_arg(__func__, "options->executable_paths");
    if (!s && options->executable_path_count) {
      in->paths = hali_calloc(options->executable_path_count, sizeof(char *));
      if (!in->paths) s = oom();
      for (size_t i = 0; !s && i < options->executable_path_count; ++i) {
        const char *p = options->executable_paths[i];
        in->paths[i] = p ? hali_strdup(p) : NULL;
        if (!in->paths[i]) s = p ? oom() : hali_api_null_arg(__func__, "a search path");
        else in->path_count = i + 1;
      }
    }
    in->defaults = options->default_context_params;
    if ((options->allocator.alloc != NULL) != (options->allocator.free != NULL))
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "allocator hooks need both alloc and free");
    in->allocator = options->allocator;
    if ((unsigned)options->validation > HALI_VALIDATION_WARN && !s)
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "options->validation is %d (expected "
                           "HALI_VALIDATION_OFF, _FAIL or _WARN)",
                           (int)options->validation);
    in->validation = options->validation;
    in->defaults.trace_filter = NULL;
    hali_parameters_retain(in->defaults.parameters);
    if (!s && options->default_context_params.trace_filter) {
      in->default_filter = hali_strdup(options->default_context_params.trace_filter);
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
  hali_free(l->formats);
  hali_free(l);
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
  host_loader_t *l = hali_calloc(1, sizeof(*l));
  if (!l) return oom();
  l->host = *loader;
  l->self = self;
  l->formats = hali_strdup(loader->formats ? loader->formats : "(host loader)");
  if (!l->formats) {
    hali_free(l);
    return oom();
  }
  l->vtable.destroy = host_loader_destroy;
  l->vtable.supports = host_loader_supports;
  l->vtable.load = host_loader_load;
  l->vtable.formats = l->formats;
  hali_status_t s =
      hali_executable_registry_register(instance->registry, &l->vtable, l);
  if (s) {
    hali_free(l->formats);
    hali_free(l);
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
  host_function_t *fns = hali_calloc(count ? count : 1, sizeof(*fns));
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
      if (!hali_api_signature_parse(f->signature, &fns[n].sig)) {
        s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                             "import @%s.%s: cannot parse signature \"%s\" "
                             "(expected e.g. \"(i32, f32) -> i32\")",
                             module_name, f->name, f->signature);
        break;
      }
    }
    fns[n].callback = f->callback;
    fns[n].user = f->user;
    fns[n].name = hali_strdup(f->name);
    if (!fns[n].name) s = oom();
  }
  host_module_t *grown =
      s ? NULL
        : hali_realloc(instance->hosts, (instance->host_count + 1) * sizeof(*grown));
  char *name = grown ? hali_strdup(module_name) : NULL;
  if (!s && (!grown || !name)) s = oom();
  if (grown) instance->hosts = grown;
  if (s) {
    for (size_t i = 0; i < count; ++i) hali_free(fns[i].name);
    hali_free(fns);
    hali_free(name);
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
      hali_realloc(instance->ffis, (instance->ffi_count + 1) * sizeof(*grown));
  if (!grown) return oom();
  instance->ffis = grown;
  ffi_library_t l = {hali_strdup(module_name), hali_strdup(library_path)};
  if (!l.name || !l.path) {
    hali_free(l.name);
    hali_free(l.path);
    return oom();
  }
  instance->ffis[instance->ffi_count++] = l;
  return HALI_OK;
}


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

hali_status_t hali_api_make_hal_device(const hali_device_params_t *p,
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
  hp.collective_timeout_ns = p->collective_timeout_ns;
  hp.validate = (uint32_t)p->validation;
  if (p->mpi_comm)
    HALI_RETURN_IF_ERROR(
        hali_hal_channel_create_from_mpi(p->mpi_comm, p->collective_timeout_ns
                                                          ? p->collective_timeout_ns
                                                          : 10 * 1000000000LL,
                                         &hp.channel),
        "the device's MPI communicator");
  hali_status_t s = hali_hal_device_create(&hp, out);
  hali_hal_channel_release(hp.channel);
  return s;
}

hali_status_t hali_world_rank(int32_t *out_rank, int32_t *out_count) {
  CHECK_ARG(out_rank);
  CHECK_ARG(out_count);
  return hali_hal_channel_world(out_rank, out_count);
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
  if ((unsigned)p.validation > HALI_VALIDATION_WARN)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "params->validation is %d (expected "
                            "HALI_VALIDATION_OFF, _FAIL or _WARN)",
                            (int)p.validation);
  if (!p.validation && instance) p.validation = instance->validation;
  hali_device_t *d = hali_calloc(1, sizeof(*d));
  if (!d) return oom();
  atomic_init(&d->count, 1);
  d->params = p;
  if (instance) d->allocator = instance->allocator;
  hali_status_t s =
      hali_api_make_hal_device(&p, &d->allocator, p.max_memory_bytes, &d->hal);
  if (s) {
    hali_free(d);
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
    hali_free(device);
  }
}

hali_status_t hali_device_query_memory_statistics(
    hali_device_t *device, hali_device_memory_statistics_t *out_statistics) {
  CHECK_ARG(device);
  CHECK_ARG(out_statistics);
  hali_hal_allocator_statistics_t st;
  hali_hal_allocator_query_statistics(hali_hal_device_allocator(device->hal),
                                      &st);
  out_statistics->bytes_live = st.bytes_live;
  out_statistics->bytes_peak = st.bytes_peak;
  out_statistics->allocation_count = st.allocation_count;
  out_statistics->allocations_live = st.allocations_live;
  return HALI_OK;
}

void hali_device_reset_memory_peak(hali_device_t *device) {
  if (device) hali_hal_allocator_reset_peak(hali_hal_device_allocator(device->hal));
}

void hali_device_abandon(hali_device_t *device) {
  if (device) hali_hal_device_abandon(device->hal);
}


void hali_module_load_options_initialize(hali_module_load_options_t *out) {
  if (out) memset(out, 0, sizeof(*out));
}

static void module_free(hali_module_t *m) {
  hali_vm_module_release(m->vm);
  hali_free(m->data);
  hali_free(m->name);
  hali_free(m->path);
  hali_free(m);
}

static hali_status_t module_create(uint8_t *data, size_t size,
                                   const char *name, const char *path,
                                   const hali_module_load_options_t *options,
                                   hali_module_t **out) {
  hali_module_t *m = hali_calloc(1, sizeof(*m));
  if (!m) {
    hali_free(data);
    return oom();
  }
  atomic_init(&m->count, 1);
  m->data = data;
  m->size = size;
  m->name = hali_strdup(name);
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
  uint8_t *copy = hali_malloc(size + 1);
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

/* Whether pass |name| is one of the comma-separated |only| (NULL: all). */
static bool pass_selected(const char *only, const char *name) {
  if (!only) return true;
  size_t n = strlen(name);
  for (const char *s = only; *s;) {
    size_t len = strcspn(s, ",");
    if (len == n && memcmp(s, name, n) == 0) return true;
    s += len;
    if (*s == ',') ++s;
  }
  return false;
}

/* --after=all: the module after each selected pass in pipeline order,
 * each headed by a comment line naming the pass ("# after pass 2 of 3:
 * materialize-interfaces"); only the last, after the whole pipeline, is
 * verified. */
static hali_status_t print_after_each_pass(
    const char *path, const hali_module_print_options_t *o, char **out_text) {
  uint32_t count;
  const hali_pass_t *passes = hali_passes(&count);
  uint32_t selected = 0;
  for (uint32_t i = 0; i < count; ++i)
    selected += pass_selected(o->passes, passes[i].name);
  hali_strbuf_t sb = {0};
  uint32_t k = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (!pass_selected(o->passes, passes[i].name)) continue;
    hali_pass_options_t po = {.only = o->passes, .after = passes[i].name};
    bool all = !o->passes && i + 1 == count;
    hali_load_options_t lo = {&po, !all};
    hali_ir_module_t *m = NULL;
    hali_status_t s = hali_load_file_ex(path, &lo, &m);
    if (s) {
      hali_free(hali_strbuf_take(&sb));
      return s;
    }
    char *text = hali_ir_print_ex(m, !o->no_locs, true);
    hali_ir_module_free(m);
    if (!text) {
      hali_free(hali_strbuf_take(&sb));
      return oom();
    }
    hali_strbuf_printf(&sb, "%s# after pass %u of %u: %s\n%s", k ? "\n" : "",
                       k + 1, selected, passes[i].name, text);
    hali_free(text);
    k++;
  }
  char *text = hali_strbuf_take(&sb);
  if (!text) return oom();
  *out_text = text;
  return HALI_OK;
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
  if (o.after && strcmp(o.after, "all") == 0 && !o.no_passes)
    return print_after_each_pass(path, &o, out_text);
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
      hali_free(data);
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

hali_status_t hali_validation_parse(const char *name,
                                    hali_validation_t *out_mode) {
  CHECK_ARG(out_mode);
  *out_mode = HALI_VALIDATION_OFF;
  CHECK_ARG(name);
  if (!strcmp(name, "fail") || !strcmp(name, "on") || !strcmp(name, "error"))
    *out_mode = HALI_VALIDATION_FAIL;
  else if (!strcmp(name, "warn"))
    *out_mode = HALI_VALIDATION_WARN;
  else if (strcmp(name, "off"))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown validation mode '%s' (expected fail, "
                            "warn or off)",
                            name);
  return HALI_OK;
}
