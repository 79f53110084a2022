/* hali — the C API: contexts (modules linked to a device and the
 * instance's imports) and invocations (sync and async). */
#include "api/api_int.h"
#include "base/alloc.h"

/* ---- The direct invoke.
 *
 * A synchronous invoke of a function that can neither suspend nor start
 * other fibers, made while the context has no live fiber, has nothing to
 * schedule: it runs the function on the caller's thread, on a register
 * stack the context keeps between calls, without a fiber record, without
 * a lock and without allocating (once the stack has grown to the
 * function's needs).  It gives the same results and failures as the
 * scheduler's path: the same interpreter runs the same code, with the
 * context's fuel and call depth; hali_context_cancel interrupts it
 * (polled at calls and backward branches, as on a fiber).
 *
 * Which functions qualify is decided once, when the context is made
 * (mark_direct): no instruction that may suspend (awaits, fiber.join),
 * no fiber.spawn, no device queue operation (its submission would carry
 * the invocation's stop request, which only a fiber has), no call of an
 * import (a host callback or another module may do any of those), and
 * the same for every function it calls, transitively.  Contexts that
 * trace or have a max_duration_ns (the watchdog needs a fiber) never take
 * the path; neither does a call made while another thread holds the
 * stack, or while any fiber is live (the scheduler's path would run the
 * other fibers too).
 *
 * |direct_stack| is NULL until the first direct call makes the stack,
 * DIRECT_TAKEN while a call holds it, else the stack. */
#define DIRECT_TAKEN ((hali_vm_stack_t *)(uintptr_t)1)

static bool op_allows_direct(unsigned op) {
  const hali_op_info_t *info = hali_op_info(op);
  if (!info || (info->flags & HALI_OPF_SUSPEND)) return false;
  switch (op) {
  case HALI_OP_FIBER_SPAWN:
  case HALI_OP_HAL_DEVICE_QUEUE_EXECUTE:
  case HALI_OP_HAL_DEVICE_QUEUE_ALLOCA:
  case HALI_OP_HAL_DEVICE_QUEUE_DEALLOCA:
    return false;
  default:
    return true;
  }
}

/* Sets functions[f].direct for each function of |cm| that qualifies:
 * locally (its own instructions), then a function that calls one that
 * does not is marked too, through the reversed call graph (linear in the
 * module's size).  Out of memory: no function is marked (every invoke
 * takes the scheduler's path; nothing fails). */
static void mark_direct(context_module_t *cm) {
  const hali_ir_module_t *ir = cm->vm->ir;
  uint32_t n = ir->func_count;
  if (!n || n != cm->vm->func_count) return;
  uint8_t *bad = hali_calloc(n, 1);
  uint32_t *first = hali_calloc((size_t)n + 1, sizeof(uint32_t));
  uint32_t *work = hali_malloc((size_t)n * sizeof(uint32_t));
  uint32_t *callers = NULL;
  size_t edges = 0;
  if (!bad || !first || !work) goto done;
  for (uint32_t f = 0; f < n; ++f) {
    const hali_ir_func_t *fn = &ir->funcs[f];
    if (fn->flags & (HALI_FUNC_IMPORT | HALI_FUNC_ASYNC_STUB)) {
      bad[f] = 1;
      continue;
    }
    /* Every call is counted (the fill below walks them all). */
    for (uint32_t b = 0; b < fn->block_count; ++b)
      for (uint32_t i = 0; i < fn->blocks[b].insn_count; ++i) {
        const hali_ir_insn_t *insn = &fn->blocks[b].insns[i];
        if (!op_allows_direct(insn->op)) bad[f] = 1;
        if (insn->op != HALI_OP_CALL) continue;
        if (!insn->operand_count || insn->operands[0].kind != HALI_IR_FUNC ||
            insn->operands[0].v >= n) {
          bad[f] = 1;
          continue;
        }
        first[insn->operands[0].v + 1]++;
        edges++;
      }
  }
  /* callers[first[g] .. first[g + 1]): the functions that call g. */
  for (uint32_t g = 0; g < n; ++g) first[g + 1] += first[g];
  callers = hali_malloc((edges ? edges : 1) * sizeof(uint32_t));
  if (!callers) goto done;
  for (uint32_t g = 0; g < n; ++g) work[g] = first[g]; /* fill cursors */
  for (uint32_t f = 0; f < n; ++f) {
    const hali_ir_func_t *fn = &ir->funcs[f];
    if (fn->flags & (HALI_FUNC_IMPORT | HALI_FUNC_ASYNC_STUB)) continue;
    for (uint32_t b = 0; b < fn->block_count; ++b)
      for (uint32_t i = 0; i < fn->blocks[b].insn_count; ++i) {
        const hali_ir_insn_t *insn = &fn->blocks[b].insns[i];
        if (insn->op == HALI_OP_CALL && insn->operand_count &&
            insn->operands[0].kind == HALI_IR_FUNC && insn->operands[0].v < n)
          callers[work[insn->operands[0].v]++] = f;
      }
  }
  /* Spread badness to callers: each function enters the list once. */
  size_t top = 0;
  for (uint32_t f = 0; f < n; ++f)
    if (bad[f]) work[top++] = f;
  while (top) {
    uint32_t g = work[--top];
    for (uint32_t k = first[g]; k < first[g + 1]; ++k)
      if (!bad[callers[k]]) {
        bad[callers[k]] = 1;
        work[top++] = callers[k];
      }
  }
  for (uint32_t f = 0; f < n; ++f) cm->functions[f].direct = !bad[f];
done:
  hali_free(bad);
  hali_free(first);
  hali_free(work);
  hali_free(callers);
}

/* The direct invoke of |function| (it qualifies, the context allows it,
 * the counts were checked) on the stack |st| the caller holds.  Results
 * are written only on success; |results| is zeroed already. */
static hali_status_t invoke_direct(hali_context_t *c, hali_vm_stack_t *st,
                                   const hali_function_t *function,
                                   const hali_variant_t *args,
                                   size_t arg_count, hali_variant_t *results,
                                   size_t result_count) {
  hali_value_t values[API_MAX_VALUES];
  hali_value_t out[API_MAX_VALUES];
  const hali_ir_func_t *f = function->fn->ir;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_api_variants_to_values(f, args, arg_count, values));
  /* Fences the host passes in are fences it may signal (as a fiber's
   * start marks them). */
  for (size_t i = 0; i < arg_count; ++i)
    if (values[i].type == HALI_TYPE_FENCE)
      hali_hal_fence_mark_host_visible((hali_hal_fence_t *)values[i].ref);
  memset(out, 0, result_count * sizeof(out[0]));
  st->device = c->hal;
  st->fuel_enabled = c->direct_fuel != 0;
  st->fuel = c->direct_fuel;
  st->fuel_used = 0;
  /* A cancel of an earlier call that came after it ended is dropped; one
   * that sees this call in |direct_running| lands (its stores come after
   * these in the flags' order). */
  atomic_store_explicit(&st->interrupt_code, HALI_STATUS_OK,
                        memory_order_relaxed);
  atomic_store_explicit(&st->interrupt, false, memory_order_relaxed);
  atomic_store_explicit(&c->direct_running, st, memory_order_release);
  hali_status_t s = hali_vm_link_invoke(st, function->link, function->fn,
                                        values, arg_count, out, result_count);
  atomic_store_explicit(&c->direct_running, NULL, memory_order_release);
  if (s) return s;
  /* The results' references move to the host. */
  for (size_t i = 0; i < result_count; ++i)
    hali_api_value_to_variant(&out[i], &results[i]);
  return HALI_OK;
}

static void context_free(hali_context_t *c) {
  /* Cancels and frees fibers still pending. */
  hali_vm_scheduler_free(c->scheduler);
  hali_vm_stack_t *direct = atomic_load(&c->direct_stack);
  if (direct != DIRECT_TAKEN) hali_vm_stack_free(direct);
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
          (hali_function_t){c, cm->link, &cm->vm->funcs[f], false};
    mark_direct(cm);
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
  c->direct_ok = !c->trace && !p->max_duration_ns;
  c->direct_max_depth = p->max_call_depth;
  c->direct_fuel = p->fuel;
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
  if (function->direct && context->direct_ok && function->context == context &&
      arg_count <= API_MAX_VALUES && result_count <= API_MAX_VALUES &&
      hali_vm_scheduler_live_hint(context->scheduler) == 0) {
    hali_vm_stack_t *st = atomic_exchange_explicit(
        &context->direct_stack, DIRECT_TAKEN, memory_order_acquire);
    if (st != DIRECT_TAKEN) {
      hali_status_t made =
          st ? HALI_OK : hali_vm_stack_create(context->direct_max_depth, &st);
      if (!made) {
        hali_status_t s = invoke_direct(context, st, function, args,
                                        arg_count, results, result_count);
        /* A failed invocation has unwound already: the stack is
         * reusable. */
        atomic_store_explicit(&context->direct_stack, st,
                              memory_order_release);
        return s;
      }
      /* Out of memory for the stack: the scheduler's path may still run. */
      hali_status_free(made);
      atomic_store_explicit(&context->direct_stack, NULL,
                            memory_order_release);
    }
  }
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
  /* A direct invoke running now stops at its next call or branch. */
  hali_vm_stack_t *st =
      atomic_load_explicit(&context->direct_running, memory_order_acquire);
  if (st) {
    atomic_store_explicit(&st->interrupt_code, HALI_STATUS_CANCELLED,
                          memory_order_release);
    atomic_store_explicit(&st->interrupt, true, memory_order_release);
  }
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
