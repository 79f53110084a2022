/* hali — the executable loader registry (see loader/executables.h); the
 * four built-in loaders are loader/loader_{native,static,ffi,bytecode}.c. */
#include "loader/executables.h"
#include "base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "loader/loaders.h"

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
      hali_realloc(r->loaders, (r->loader_count + 1) * sizeof(loader_entry_t));
  if (!l) return hali_status_oom();
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
      hali_realloc(r->statics, (r->static_count + 1) * sizeof(*s));
  if (!s) return hali_status_oom();
  r->statics = s;
  r->statics[r->static_count++] = library;
  return HALI_OK;
}

void hali_executable_registry_free(hali_executable_registry_t *r) {
  if (!r) return;
  for (size_t i = 0; i < r->loader_count; ++i)
    if (r->loaders[i].vtable->destroy)
      r->loaders[i].vtable->destroy(r->loaders[i].self);
  hali_free(r->loaders);
  hali_free(r->statics);
  hali_free(r);
}

static const loader_entry_t *find_loader(const hali_executable_registry_t *r,
                                         const char *format) {
  for (size_t i = 0; i < r->loader_count; ++i)
    if (r->loaders[i].vtable->supports(r->loaders[i].self, format))
      return &r->loaders[i];
  return NULL;
}

/* Appends `variant K (format "F" [library "L"] [if ...])` to |sb|. */
static void describe_variant(hali_strbuf_t *sb, uint32_t k,
                             const hali_ir_variant_t *v) {
  hali_strbuf_printf(sb, "variant %u (format \"%s\"", k, v->format);
  if (v->library) hali_strbuf_printf(sb, " library \"%s\"", v->library);
  if (v->if_device) hali_strbuf_printf(sb, " if device \"%s\"", v->if_device);
  if (v->if_loader) hali_strbuf_printf(sb, " if loader \"%s\"", v->if_loader);
  hali_strbuf_append(sb, ")", 1);
}

hali_status_t hali_executable_registry_load_variant(
    const hali_executable_registry_t *r,
    const hali_executable_load_params_t *params, hali_hal_executable_t **out,
    uint32_t *out_variant) {
  *out = NULL;
  if (out_variant) *out_variant = 0;
  const hali_ir_executable_t *e = params->executable;
  if (!e->variant_count && !e->if_device && !e->if_loader)
    return hali_executable_registry_load(r, params, out);
  /* Why each variant was refused, for the trace and the final error. */
  hali_strbuf_t why = {0};
  const char *device = params->device_kind;
  for (uint32_t k = 0; k <= e->variant_count; ++k) {
    hali_ir_variant_t v = hali_ir_executable_variant(e, k);
    size_t before = why.len;
    hali_strbuf_append(&why, k ? "; " : "", k ? 2 : 0);
    describe_variant(&why, k, &v);
    hali_strbuf_append(&why, ": ", 2);
    if (v.if_device && (!device || strcmp(device, v.if_device) != 0)) {
      if (device)
        hali_strbuf_printf(&why, "the device is %s", device);
      else
        hali_strbuf_printf(&why, "the device kind is not known");
      continue;
    }
    if (v.if_loader && !find_loader(r, v.if_loader)) {
      hali_strbuf_printf(&why, "no loader supports format \"%s\"",
                         v.if_loader);
      continue;
    }
    const loader_entry_t *l = find_loader(r, v.format);
    if (!l) {
      hali_strbuf_printf(&why, "no loader supports format \"%s\"", v.format);
      continue;
    }
    /* The loaders read format and library from the declaration: give them
     * this variant's (exports are shared). */
    hali_ir_executable_t view = *e;
    view.format = v.format;
    view.library = v.library;
    hali_executable_load_params_t p = *params;
    p.executable = &view;
    hali_status_t s = l->vtable->load(l->self, &p, out);
    if (s) {
      *out = NULL;
      hali_strbuf_printf(&why, "%s", hali_status_message(s));
      for (size_t a = 0; a < hali_status_annotation_count(s); ++a)
        hali_strbuf_printf(&why, ", %s", hali_status_annotation(s, a));
      hali_status_free(s);
      continue;
    }
    if (params->tracer) {
      hali_strbuf_t used = {0};
      describe_variant(&used, k, &v);
      hali_hal_tracer_printf(
          params->tracer, "[hal] executable @%s on %s: %s chosen%s%.*s",
          e->name, device ? device : "an unknown device",
          used.data ? used.data : "?", k ? "; refused before it: " : "",
          why.data ? (int)before : 0, why.data ? why.data : "");
      hali_free(used.data);
    }
    hali_free(why.data);
    if (out_variant) *out_variant = k;
    return HALI_OK;
  }
  char formats[512] = "";
  size_t n = 0;
  for (size_t i = 0; i < r->loader_count && n < sizeof(formats) - 1; ++i)
    n += (size_t)snprintf(formats + n, sizeof(formats) - n, "%s%s",
                          i ? ", " : "", r->loaders[i].vtable->formats);
  hali_status_t s = hali_status_make(
      HALI_STATUS_UNIMPLEMENTED,
      "executable @%s: none of its %u variants can be loaded on %s "
      "(available formats: %s): %s",
      e->name, e->variant_count + 1, device ? device : "this device",
      n ? formats : "(none)", why.data ? why.data : "out of memory");
  hali_free(why.data);
  return s;
}

hali_status_t hali_executable_registry_load(
    const hali_executable_registry_t *r,
    const hali_executable_load_params_t *params, hali_hal_executable_t **out) {
  *out = NULL;
  const hali_ir_executable_t *e = params->executable;
  if (e->variant_count || e->if_device || e->if_loader)
    return hali_executable_registry_load_variant(r, params, out, NULL);
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

const hali_kernel_library_t *hali_executable_registry_find_static(
    const hali_executable_registry_t *r, const char *name, size_t *out_count) {
  *out_count = r->static_count;
  for (size_t i = 0; i < r->static_count; ++i)
    if (strcmp(r->statics[i]->name, name) == 0) return r->statics[i];
  return NULL;
}

/* ------------------------------------------------------------------------ */

hali_status_t hali_executable_registry_create(hali_executable_registry_t **out) {
  *out = NULL;
  hali_executable_registry_t *r = hali_calloc(1, sizeof(*r));
  if (!r) return hali_status_oom();
  hali_status_t s = hali_executable_registry_register(r, &hali_loader_native, NULL);
  if (!s) s = hali_executable_registry_register(r, &hali_loader_ffi, NULL);
  if (!s) s = hali_executable_registry_register(r, &hali_loader_static, r);
  if (!s) s = hali_executable_registry_register(r, &hali_loader_bytecode, NULL);
  if (s) {
    hali_executable_registry_free(r);
    return s;
  }
  *out = r;
  return HALI_OK;
}

hali_status_t hali_executable_registry_load_link(
    const hali_executable_registry_t *r, hali_vm_link_t *link,
    const char *module_path, const char *const *search_paths,
    size_t search_path_count) {
  return hali_executable_registry_load_link_on(
      r, link, module_path, search_paths, search_path_count, NULL, NULL);
}

hali_status_t hali_executable_registry_load_link_on(
    const hali_executable_registry_t *r, hali_vm_link_t *link,
    const char *module_path, const char *const *search_paths,
    size_t search_path_count, const char *device_kind,
    const hali_hal_tracer_t *tracer) {
  hali_vm_module_t *m = link->module;
  uint32_t n = m->ir->executable_count;
  if (!n) return HALI_OK;
  /* The search path: the given directories, then $HALI_EXECUTABLE_PATH. */
  char *env = getenv("HALI_EXECUTABLE_PATH")
                  ? hali_strdup(getenv("HALI_EXECUTABLE_PATH"))
                  : NULL;
  size_t env_count = 0;
  for (char *c = env; c && *c; ++c) env_count += *c == ':';
  if (env) env_count++;
  const char **paths = hali_calloc(search_path_count + env_count + 1, sizeof(char *));
  char *dir = module_path ? hali_strdup(module_path) : NULL;
  hali_executable_load_params_t p = {0};
  hali_hal_executable_t **loaded = hali_calloc(n, sizeof(*loaded));
  hali_status_t s = HALI_OK;
  if (!paths || !loaded || (module_path && !dir) ||
      (getenv("HALI_EXECUTABLE_PATH") && !env)) {
    s = hali_status_oom();
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
  p.device_kind = device_kind;
  p.tracer = tracer;
  for (uint32_t i = 0; !s && i < n; ++i) {
    p.executable = &m->ir->executables[i];
    s = hali_executable_registry_load(r, &p, &loaded[i]);
  }
  if (!s) {
    if (!link->executables || link->executables[0]) {
      s = hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                           "the module's executables are already loaded");
    } else {
      memcpy(link->executables, loaded, n * sizeof(*loaded));
      hali_free(loaded);
      loaded = NULL;
    }
  }
done:
  if (loaded) {
    for (uint32_t i = 0; i < n; ++i) hali_ref_release((hali_ref_t *)loaded[i]);
    hali_free(loaded);
  }
  hali_free(paths);
  hali_free(env);
  hali_free(dir);
  return s;
}
