/* hali — the C API: contexts (modules linked to a device and the
 * instance's imports) and invocations (sync and async). */
#include "api/api_int.h"
#include "base/alloc.h"

static void context_free(hali_context_t *c) {
  /* Cancels and frees fibers still pending. */
  hali_vm_scheduler_free(c->scheduler);
  for (size_t i = 0; i < c->module_count; ++i) {
    /* After the scheduler: no fiber runs through the link any more.
     * Recorded work keeps the executables (and they their module). */
    hali_vm_link_free(c->modules[i].link);
    hali_module_release(c->modules[i].module);
    hali_free(c->modules[i].functions);
  }
  hali_free(c->modules);
  hali_param_set_release(c->params);
  while (c->bindings) {
    binding_t *b = c->bindings;
    c->bindings = b->next;
    if (b->dl) dlclose(b->dl);
    hali_vm_stack_free(atomic_load(&b->stack));
    hali_free(b);
  }
  if (c->hal) {
    /* A private device may hold work waiting on fences nobody will signal
     * any more: give it up instead of waiting in the release. */
    if (c->private_device) hali_hal_device_abandon(c->hal);
    /* Buffers and fences that outlive the context read its device's
     * tracer (through the allocator): they must not reach the trace freed
     * below.  (After abandon the wait is for running work only; the
     * release below would wait for it anyway.) */
    if (c->private_device) {
      hali_status_free(hali_hal_device_wait_idle(c->hal, HALI_INFINITE));
      hali_hal_device_set_tracer(c->hal, NULL);
    }
    hali_hal_device_release(c->hal);
  }
  hali_trace_free(c->trace);
  if (c->trace_out) fclose(c->trace_out);
  hali_free(c->trace_filter);
  hali_device_release(c->device);
  hali_instance_release(c->instance);
  pthread_mutex_destroy(&c->mutex);
  hali_free(c);
}

/* Parameter globals (`= parameter "scope" :: "key"`, lowered by
 * stream-to-hal to an immutable !hal.buffer global that keeps its tensor
 * type): each is filled from the context's parameter set before any
 * initializer runs.  hali_param_set_load checks the key, the element type
 * and the shape (the file's index was checked when it was added), and
 * returns a read-only buffer aliasing the file's mapping when the tensor is
 * 64-byte aligned there, else a copy made once, now, with the context's
 * allocator (its memory limit applies).  Errors name the global and the
 * module besides the scope, key and file. */
static hali_status_t bind_parameters(hali_context_t *c) {
  hali_hal_allocator_t *allocator = hali_hal_device_allocator(c->hal);
  for (size_t i = 0; i < c->module_count; ++i) {
    const hali_ir_module_t *ir = c->modules[i].vm->ir;
    hali_vm_globals_t *storage = c->modules[i].link->globals;
    for (uint32_t g = 0; g < ir->global_count; ++g) {
      const hali_ir_global_t *gl = &ir->globals[g];
      if (!(gl->flags & HALI_GLOBAL_PARAMETER)) continue;
      if (!hali_param_set_has_scope(c->params, gl->param_scope))
        return hali_status_make(
            HALI_STATUS_NOT_FOUND,
            "no parameters bound for scope '%s' (global @%s = parameter "
            "\"%s\" :: \"%s\" of module @%s)",
            gl->param_scope, gl->name, gl->param_scope, gl->param_key,
            ir->name);
      hali_hal_buffer_t *buffer = NULL;
      HALI_RETURN_IF_ERROR(
          hali_param_set_load(c->params, gl->param_scope, gl->param_key,
                              &gl->xtype, allocator, &buffer),
          "global @%s = parameter \"%s\" :: \"%s\" of module @%s", gl->name,
          gl->param_scope, gl->param_key, ir->name);
      /* Nothing runs yet, but stores take the lock everywhere else. */
      pthread_mutex_lock(&storage->lock);
      hali_ref_t *old = storage->refs[g];
      storage->refs[g] = (hali_ref_t *)buffer;
      pthread_mutex_unlock(&storage->lock);
      hali_ref_release(old);
    }
  }
  return HALI_OK;
}

/* Runs every function marked ["initializer"] once, module by module and
 * in each module's order, to completion (it may await fences: the
 * scheduler runs it like any invocation).  The first failure fails the
 * context's creation with the initializer's status and backtrace. */
static hali_status_t run_initializers(hali_context_t *c) {
  for (size_t i = 0; i < c->module_count; ++i) {
    context_module_t *cm = &c->modules[i];
    for (uint32_t f = 0; f < cm->vm->func_count; ++f) {
      const hali_ir_func_t *fir = &cm->vm->ir->funcs[f];
      if (!hali_ir_func_has_attr(fir, HALI_ATTR_INITIALIZER)) continue;
      hali_vm_fiber_t *fiber = NULL;
      hali_status_t s = hali_vm_scheduler_start_link(
          c->scheduler, cm->link, &cm->vm->funcs[f], NULL, 0, &fiber);
      if (!s) {
        s = hali_vm_scheduler_run(c->scheduler, fiber);
        if (s) {
          hali_vm_fiber_cancel(fiber);
          hali_status_free(hali_vm_scheduler_run(c->scheduler, fiber));
        } else if (hali_vm_fiber_status(fiber)) {
          s = hali_status_clone(hali_vm_fiber_status(fiber));
        }
      }
      hali_vm_fiber_release(fiber);
      if (s)
        return hali_status_annotate(s, "initializer @%s of module @%s",
                                    fir->name, cm->vm->ir->name);
    }
  }
  return HALI_OK;
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
    HALI_RETURN_IF_ERROR(hali_api_make_hal_device(dp, &c->device->allocator, limit,
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
    if (p->trace_path && !p->trace_file && !p->trace_callback) {
      c->trace_out = fopen(p->trace_path, "w");
      if (!c->trace_out)
        return hali_status_make(HALI_STATUS_NOT_FOUND,
                                "trace_path '%s': cannot create it: %s",
                                p->trace_path, strerror(errno));
      to.out = c->trace_out;
    }
    to.callback = p->trace_callback;
    to.user = p->trace_user;
    to.max_values = p->trace_max_values;
    if (p->trace_filter) {
      c->trace_filter = hali_strdup(p->trace_filter);
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
        hali_executable_registry_load_link_on(
            in->registry, cm->link, cm->module->path,
            (const char *const *)in->paths, in->path_count,
            hali_hal_device_kind_name(hali_hal_device_kind(c->hal)),
            hali_hal_device_tracer(c->hal)),
        "linking module @%s", cm->vm->ir->name);
    cm->functions = hali_calloc(cm->vm->func_count ? cm->vm->func_count : 1,
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
        HALI_RETURN_IF_ERROR(hali_api_link_import(c, i, f), "linking module @%s",
                             vm->ir->name);
    HALI_RETURN_IF_ERROR_PLAIN(hali_vm_link_check_imports(c->modules[i].link));
  }
  hali_vm_scheduler_options_t so = {
      .max_depth = p->max_call_depth,
      .fuel_enabled = p->fuel != 0,
      .fuel = p->fuel,
      .max_duration_ns = p->max_duration_ns,
      .trace = c->trace,
      .threads = p->fiber_threads,
  };
  HALI_RETURN_IF_ERROR_PLAIN(hali_vm_scheduler_create(c->hal, &so, &c->scheduler));
  HALI_RETURN_IF_ERROR(bind_parameters(c), "creating the context");
  return run_initializers(c);
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
  if (p->trace_path && p->trace_file)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: trace_path and trace_file are both set "
                            "(give one place for the trace)",
                            __func__);
  hali_context_t *c = hali_calloc(1, sizeof(*c));
  if (!c) return oom();
  c->modules = hali_calloc(module_count, sizeof(context_module_t));
  if (!c->modules) {
    hali_free(c);
    return oom();
  }
  atomic_init(&c->count, 1);
  pthread_mutex_init(&c->mutex, NULL);
  atomic_store(&instance->frozen, true);
  c->instance = instance;
  hali_instance_retain(instance);
  c->device = device;
  hali_device_retain(device);
  if (p->parameters) {
    /* Frozen from now on: the set is read without locks by every context
     * created with it. */
    atomic_store(&p->parameters->frozen, true);
    c->params = p->parameters->set;
    hali_param_set_retain(c->params);
  }
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
    v = hali_calloc(arg_count, sizeof(*v));
    if (!v) return oom();
  }
  hali_status_t s = hali_api_variants_to_values(function->fn->ir, args, arg_count, v);
  /* The fiber retains the refs it keeps. */
  if (!s)
    s = hali_vm_scheduler_start_link(c->scheduler, function->link,
                                     function->fn, v, arg_count, out);
  if (v != values) hali_free(v);
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
    hali_api_value_to_variant(&r[i], &results[i]);
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
    return hali_api_null_arg(__func__, "results");
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
  hali_invocation_t *inv = hali_calloc(1, sizeof(*inv));
  if (!inv) return oom();
  hali_status_t s = start(context, function, args, arg_count, &inv->fiber);
  if (s) {
    hali_free(inv);
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
  hali_fence_t *fence =
      invocation ? hali_vm_fiber_fence(invocation->fiber) : NULL;
  hali_hal_fence_mark_host_visible(fence); /* the host may fail it */
  return fence;
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
  hali_free(invocation);
  hali_context_release(c);
}
