/* hali — the C API: import signatures and import binding (host
 * callbacks, plain C functions through libffi, functions of another module
 * of the context). */
#include "api/api_int.h"
#include "base/alloc.h"

/* ------------------------------------------------------------------------ */
/* Import signatures: "(i32, i32) -> i32". */



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

bool hali_api_signature_parse(const char *text, signature_t *sig) {
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

void hali_api_func_signature(const hali_ir_func_t *f, signature_t *sig) {
  memset(sig, 0, sizeof(*sig));
  sig->param_count = f->param_count < API_MAX_VALUES ? f->param_count
                                                      : API_MAX_VALUES;
  sig->result_count = f->result_count < API_MAX_VALUES ? f->result_count
                                                        : API_MAX_VALUES;
  if (sig->param_count) memcpy(sig->types, f->reg_types, sig->param_count);
  if (sig->result_count)
    memcpy(sig->types + sig->param_count, f->results, sig->result_count);
}

bool hali_api_signature_equal(const signature_t *a, const signature_t *b) {
  return a->param_count == b->param_count &&
         a->result_count == b->result_count &&
         memcmp(a->types, b->types, a->param_count + a->result_count) == 0;
}

void hali_api_signature_format(const signature_t *sig, char *buf, size_t n) {
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


static hali_status_t host_import_call(void *user, const hali_value_t *args,
                                      size_t n, hali_value_t *results,
                                      size_t m) {
  binding_t *b = user;
  hali_variant_t vargs[API_MAX_VALUES], vres[API_MAX_VALUES];
  for (size_t i = 0; i < n; ++i) hali_api_value_to_variant(&args[i], &vargs[i]);
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
hali_status_t hali_api_link_import(hali_context_t *c, size_t mi, uint32_t index) {
  const hali_vm_module_t *vm = c->modules[mi].vm;
  const hali_ir_func_t *f = &vm->ir->funcs[index];
  const char *dot = strchr(f->name, '.');
  if (!dot) return HALI_OK;
  size_t mlen = (size_t)(dot - f->name);
  const char *fname = dot + 1;
  const hali_instance_t *in = c->instance;
  binding_t *b = hali_calloc(1, sizeof(*b));
  if (!b) return oom();
  b->context = c;
  b->decl = f;
  hali_vm_import_fn_t fn = NULL;
  hali_status_t s = HALI_OK;
  signature_t have;
  hali_api_func_signature(f, &have);
  for (size_t i = 0; !fn && i < in->host_count; ++i) {
    const host_module_t *hm = &in->hosts[i];
    if (strlen(hm->name) != mlen || memcmp(hm->name, f->name, mlen)) continue;
    for (size_t j = 0; j < hm->count; ++j) {
      const host_function_t *hf = &hm->functions[j];
      if (strcmp(hf->name, fname) != 0) continue;
      if (hf->checked && !hali_api_signature_equal(&hf->sig, &have)) {
        char a[256], h[256];
        hali_api_signature_format(&have, a, sizeof(a));
        hali_api_signature_format(&hf->sig, h, sizeof(h));
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
    hali_api_func_signature(target->ir, &want);
    if (!hali_api_signature_equal(&want, &have)) {
      char a[256], h[256];
      hali_api_signature_format(&have, a, sizeof(a));
      hali_api_signature_format(&want, h, sizeof(h));
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
    hali_free(b);
    return s;
  }
  b->next = c->bindings;
  c->bindings = b;
  return HALI_OK;
}
