/* hali run: load a module, turn --input values into arguments (scalars or
 * buffer views, by the function's signature), invoke, print or write the
 * results, and optionally compare them with --expected_output. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "loader/executables.h"
#include "loader/loader.h"
#include "passes/pipeline.h"
#include "tools/tensor.h"
#include "vm/fiber.h"
#include "vm/trace.h"
#include "tools/tools.h"
#include "vm/vm.h"

typedef struct {
  const char *path;
  const char *function;
  uint32_t max_depth;
  const char **inputs, **outputs, **expected, **exec_paths;
  size_t ninputs, noutputs, nexpected, nexec_paths;
  double f32_threshold, f64_threshold;
  size_t print_max;
  hali_hal_device_params_t device;
  hali_trace_options_t trace;
  const char *trace_out;
  hali_pass_options_t passes; /* --passes=, --no-passes */
} run_options_t;


/* Parses a scalar "42" (i32) or "TYPE=VALUE" of the expected |type|. */
static hali_status_t parse_scalar(const char *text, const char *what,
                                  const char *arg, hali_type_t want,
                                  hali_value_t *out) {
  const char *eq = strchr(text, '=');
  hali_type_t type = HALI_TYPE_I32;
  const char *v = text;
  if (eq) {
    type = hali_type_parse(text, (size_t)(eq - text));
    if (type == HALI_TYPE_NONE || hali_type_is_ref(type))
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s '%s': unknown type '%.*s' (expected i32, "
                              "i64, f32 or f64)",
                              what, text, (int)(eq - text), text);
    v = eq + 1;
  }
  if (type != want)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: expected %s, got %s (%s '%s')", arg,
                            hali_type_name(want), hali_type_name(type), what,
                            text);
  char *end;
  errno = 0;
  out->type = type;
  switch (type) {
  case HALI_TYPE_I32:
  case HALI_TYPE_I64: {
    /* Signed or unsigned spellings of the same bits: -1 or 0xffffffff. */
    bool neg;
    uint64_t mag;
    uint64_t umax = type == HALI_TYPE_I32 ? UINT32_MAX : UINT64_MAX;
    uint64_t smin = type == HALI_TYPE_I32 ? 0x80000000ull : 1ull << 63;
    if (!hali_parse_integer(v, &neg, &mag) || (neg ? mag > smin : mag > umax))
      goto bad;
    uint64_t bits = neg ? 0 - mag : mag;
    if (type == HALI_TYPE_I32) out->i32 = (int32_t)(uint32_t)bits;
    else out->i64 = (int64_t)bits;
    break;
  }
  case HALI_TYPE_F32:
    out->f32 = strtof(v, &end);
    if (*v == 0 || *end) goto bad;
    break;
  default:
    out->f64 = strtod(v, &end);
    if (*v == 0 || *end) goto bad;
    break;
  }
  return HALI_OK;
bad:
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "%s '%s': '%s' is not a valid %s", what, text, v,
                          hali_type_name(type));
}


static void format_scalar(const hali_value_t *v, char *buf, size_t n) {
  switch (v->type) {
  case HALI_TYPE_I32: snprintf(buf, n, "%d", v->i32); break;
  case HALI_TYPE_I64: snprintf(buf, n, "%lld", (long long)v->i64); break;
  case HALI_TYPE_F32:
    hali_format_float(buf, n, v->f32, HALI_FLOAT_F32, false);
    break;
  default:
    hali_format_float(buf, n, v->f64, HALI_FLOAT_F64, false);
    break;
  }
}

/* Builds argument |i| from its --input text. */
static hali_status_t make_arg(const run_options_t *o, hali_hal_device_t *dev,
                              const hali_ir_func_t *f, size_t i,
                              hali_value_t *out) {
  char what[48], arg[160];
  snprintf(what, sizeof(what), "--input #%zu", i);
  snprintf(arg, sizeof(arg), "@%s argument %zu", f->name, i);
  hali_type_t want = f->reg_types[i];
  if (!hali_type_is_ref(want))
    return parse_scalar(o->inputs[i], what, arg, want, out);
  if (want != HALI_TYPE_BUFFER_VIEW)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: @%s takes %s, which cannot be given on the "
                            "command line",
                            what, f->name, hali_type_name(want));
  hali_tensor_t t;
  HALI_RETURN_IF_ERROR_PLAIN(hali_tensor_parse(o->inputs[i], what, &t));
  hali_hal_buffer_view_t *view = NULL;
  hali_status_t s =
      hali_tensor_to_view(&t, hali_hal_device_allocator(dev), &view);
  hali_tensor_free(&t);
  if (s) return hali_status_annotate(s, "%s", what);
  out->type = HALI_TYPE_BUFFER_VIEW;
  out->ref = (hali_ref_t *)view;
  return HALI_OK;
}

/* Writes result |i| to "-" (stdout, as text), "@file.npy" or "@file.bin". */
static hali_status_t write_output(const char *spec, const hali_tensor_t *t,
                                  size_t max) {
  if (strcmp(spec, "-") == 0) {
    hali_strbuf_t sb = {0};
    hali_tensor_format(t, max, &sb);
    char *text = hali_strbuf_take(&sb);
    printf("%s\n", text ? text : "");
    free(text);
    return HALI_OK;
  }
  if (spec[0] != '@')
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "--output '%s': expected '-', @FILE.npy or "
                            "@FILE.bin",
                            spec);
  const char *path = spec + 1;
  FILE *f = fopen(path, "wb");
  if (!f)
    return hali_status_make(HALI_STATUS_NOT_FOUND, "--output %s: %s", path,
                            strerror(errno));
  size_t len = strlen(path);
  hali_status_t s = HALI_OK;
  if (len > 4 && strcmp(path + len - 4, ".npy") == 0)
    s = hali_tensor_write_npy(t, f);
  else if (fwrite(t->data, 1, t->size, f) != t->size)
    s = hali_status_make(HALI_STATUS_DATA_LOSS, "--output %s: write failed",
                         path);
  if (fclose(f) != 0 && !s)
    s = hali_status_make(HALI_STATUS_DATA_LOSS, "--output %s: close failed",
                         path);
  return s;
}

/* Compares result |i| with its --expected_output; appends a line to |sb|
 * and returns false on mismatch. */
static bool check_expected(const run_options_t *o, size_t i,
                           const hali_value_t *v, const hali_tensor_t *t,
                           hali_strbuf_t *sb) {
  char what[48], res[48];
  snprintf(what, sizeof(what), "--expected_output #%zu", i);
  snprintf(res, sizeof(res), "result %zu", i);
  hali_status_t s;
  if (t) {
    hali_tensor_t x;
    s = hali_tensor_parse(o->expected[i], what, &x);
    if (!s) {
      s = hali_tensor_compare(t, &x, o->f32_threshold, o->f64_threshold);
      hali_tensor_free(&x);
    }
  } else {
    hali_value_t x;
    s = parse_scalar(o->expected[i], what, res, v->type, &x);
    if (!s) {
      bool match;
      if (v->type == HALI_TYPE_F32)
        match = x.f32 == v->f32 || (isnan(x.f32) && isnan(v->f32)) ||
                fabs((double)x.f32 - v->f32) <= o->f32_threshold;
      else if (v->type == HALI_TYPE_F64)
        match = x.f64 == v->f64 || (isnan(x.f64) && isnan(v->f64)) ||
                fabs(x.f64 - v->f64) <= o->f64_threshold;
      else if (v->type == HALI_TYPE_I32)
        match = x.i32 == v->i32;
      else
        match = x.i64 == v->i64;
      if (!match) {
        char have[64], want[64];
        format_scalar(v, have, sizeof(have));
        format_scalar(&x, want, sizeof(want));
        s = hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                             "%s (%s) does not match the expected (%s)",
                             hali_type_name(v->type), have, want);
      }
    }
  }
  if (!s) return true;
  hali_strbuf_printf(sb, "[FAILED] result[%zu]: %s\n", i,
                     hali_status_message(s));
  hali_status_free(s);
  return false;
}

static int run(const run_options_t *o) {
  hali_ir_module_t *ir;
  hali_load_options_t lo = {&o->passes, false};
  hali_status_t s = hali_load_file_ex(o->path, &lo, &ir);
  if (s) return hali_tool_report(s);
  hali_vm_module_t *m;
  s = hali_vm_module_create(ir, &m);
  if (s) return hali_tool_report(s);
  hali_executable_registry_t *registry = NULL;
  s = hali_executable_registry_create(&registry);
  if (!s)
    s = hali_vm_module_load_executables(m, registry, o->path, o->exec_paths,
                                        o->nexec_paths);
  hali_executable_registry_free(registry);
  /* hali run binds no host functions: modules needing some cannot run. */
  if (!s) s = hali_vm_module_check_imports(m);
  if (s) {
    hali_vm_module_free(m);
    return hali_tool_report(s);
  }
  const hali_vm_func_t *fn = hali_vm_module_lookup(m, o->function);
  if (!fn) {
    s = hali_status_make(HALI_STATUS_NOT_FOUND,
                         "%s: no function @%s in module @%s", o->path,
                         o->function, m->ir->name);
    hali_vm_module_free(m);
    return hali_tool_report(s);
  }
  const hali_ir_func_t *f = fn->ir;
  if (o->ninputs != f->param_count) {
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "@%s takes %u argument(s), %zu given",
                         f->name, f->param_count, o->ninputs);
    hali_vm_module_free(m);
    return hali_tool_report(s);
  }
  if (o->nexpected && o->nexpected != f->result_count) {
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "@%s returns %u result(s), %zu --expected_output "
                         "given",
                         f->name, f->result_count, o->nexpected);
    hali_vm_module_free(m);
    return hali_tool_report(s);
  }
  hali_hal_device_t *dev = NULL;
  hali_vm_stack_t *st = NULL;
  FILE *trace_file = NULL;
  hali_trace_t *trace = NULL;
  hali_vm_scheduler_t *sched = NULL;
  hali_value_t *args = calloc(o->ninputs + 1, sizeof(hali_value_t));
  hali_value_t *results = calloc(f->result_count + 1, sizeof(hali_value_t));
  int rc = 1;
  if (!args || !results) {
    s = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
    goto done;
  }
  s = hali_hal_device_create(&o->device, &dev);
  if (!s) s = hali_vm_stack_create(o->max_depth, &st);
  if (!s && o->trace.flags) {
    hali_trace_options_t to = o->trace;
    if (o->trace_out) {
      trace_file = fopen(o->trace_out, "w");
      if (!trace_file)
        s = hali_status_make(HALI_STATUS_NOT_FOUND, "--trace-out %s: %s",
                             o->trace_out, strerror(errno));
      to.out = trace_file;
    }
    if (!s) s = hali_trace_create(&to, &trace);
    if (!s && ((to.flags & HALI_TRACE_HAL) || to.format == HALI_TRACE_CHROME)) {
      hali_hal_tracer_t ht = hali_trace_hal_tracer(trace);
      hali_hal_device_set_tracer(dev, &ht);
    }
  }
  for (size_t i = 0; !s && i < o->ninputs; ++i)
    s = make_arg(o, dev, f, i, &args[i]);
  if (s) goto done;
  /* The invocation runs as a fiber: awaits suspend, fiber.spawn works,
   * deadlocks are reported instead of hanging. */
  hali_vm_scheduler_options_t so = {.max_depth = o->max_depth, .trace = trace};
  s = hali_vm_scheduler_create(dev, &so, &sched);
  hali_vm_fiber_t *fiber = NULL;
  if (!s) s = hali_vm_scheduler_start(sched, m, fn, args, o->ninputs, &fiber);
  if (!s) s = hali_vm_scheduler_run(sched, fiber);
  if (!s && hali_vm_fiber_status(fiber))
    s = hali_status_clone(hali_vm_fiber_status(fiber));
  if (!s) {
    size_t n;
    const hali_value_t *r = hali_vm_fiber_results(fiber, &n);
    for (size_t i = 0; i < n; ++i) {
      results[i] = r[i];
      if (hali_type_is_ref(r[i].type)) hali_ref_retain(r[i].ref);
    }
  }
  if (fiber) hali_vm_fiber_release(fiber);
  if (s) goto done;
  hali_strbuf_t failures = {0};
  bool all_match = true;
  for (uint32_t i = 0; !s && i < f->result_count; ++i) {
    hali_value_t *v = &results[i];
    hali_tensor_t t = {0};
    bool is_view = v->type == HALI_TYPE_BUFFER_VIEW;
    if (is_view) {
      s = hali_tensor_from_view((hali_hal_buffer_view_t *)v->ref, &t);
      if (s) break;
    }
    const char *out = i < o->noutputs ? o->outputs[i] : "-";
    if (is_view && strcmp(out, "-") != 0) {
      s = write_output(out, &t, o->print_max);
    } else if (is_view) {
      printf("result[%u]: hal.buffer_view\n", i);
      s = write_output("-", &t, o->print_max);
    } else if (hali_type_is_ref(v->type)) {
      printf("result[%u]: %s\n", i, hali_type_name(v->type));
    } else {
      char buf[64];
      format_scalar(v, buf, sizeof(buf));
      printf("result[%u]: %s=%s\n", i, hali_type_name(v->type), buf);
    }
    if (!s && o->nexpected && (is_view || !hali_type_is_ref(v->type)) &&
        !check_expected(o, i, v, is_view ? &t : NULL, &failures))
      all_match = false;
    hali_tensor_free(&t);
  }
  char *text = hali_strbuf_take(&failures);
  if (!s && o->nexpected) {
    if (all_match) printf("[SUCCESS]\n");
    else fputs(text ? text : "[FAILED]\n", stdout);
  }
  free(text);
  rc = s ? 1 : (all_match ? 0 : 1);
done:
  for (size_t i = 0; args && i < o->ninputs; ++i) hali_value_release(&args[i]);
  for (uint32_t i = 0; results && i < f->result_count; ++i)
    hali_value_release(&results[i]);
  free(args);
  free(results);
  hali_vm_stack_free(st);
  hali_vm_scheduler_free(sched);
  hali_vm_module_free(m);
  /* After a failure, queued work may wait on fences nobody will signal:
   * give it up rather than wait forever in the release's drain. */
  if (dev && s) hali_hal_device_abandon(dev);
  if (dev) hali_hal_device_release(dev); /* drains the queue first */
  hali_trace_free(trace);
  if (trace_file) fclose(trace_file);
  if (s) return hali_tool_report(s);
  return rc;
}

int hali_tool_run(int argc, char **argv) {
  run_options_t o = {0};
  o.function = "main";
  o.f32_threshold = 0.0001;
  o.f64_threshold = 0.0001;
  o.print_max = 1024;
  hali_hal_device_params_initialize(&o.device);
  const char **lists = calloc((size_t)argc * 4 + 4, sizeof(char *));
  if (!lists) return hali_tool_report(hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom"));
  o.inputs = lists;
  o.outputs = lists + argc + 1;
  o.expected = lists + 2 * argc + 2;
  o.exec_paths = lists + 3 * argc + 3;
  int rc = 2;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    char *end;
#define VALUE(flag) (strncmp(a, flag "=", sizeof(flag)) == 0 ? a + sizeof(flag) : NULL)
    const char *v;
    if ((v = VALUE("--function"))) {
      o.function = *v == '@' ? v + 1 : v;
    } else if ((v = VALUE("--input"))) {
      o.inputs[o.ninputs++] = v;
    } else if ((v = VALUE("--output"))) {
      o.outputs[o.noutputs++] = v;
    } else if ((v = VALUE("--expected_output"))) {
      o.expected[o.nexpected++] = v;
    } else if ((v = VALUE("--expected_f32_threshold")) ||
               (v = VALUE("--expected_f64_threshold"))) {
      double t = strtod(v, &end);
      if (!*v || *end || t < 0) {
        fprintf(stderr, "hali run: '%s' is not a threshold >= 0\n", a);
        goto done;
      }
      if (strncmp(a, "--expected_f32_threshold=", 25) == 0) o.f32_threshold = t;
      else o.f64_threshold = t;
    } else if ((v = VALUE("--print_max_elements"))) {
      o.print_max = (size_t)strtoull(v, &end, 10);
      if (!*v || *end) {
        fprintf(stderr, "hali run: '%s' is not a count\n", a);
        goto done;
      }
    } else if ((v = VALUE("--device"))) {
      hali_status_t s = hali_hal_device_kind_parse(v, &o.device.kind);
      if (s) {
        rc = hali_tool_report(s);
        goto done;
      }
    } else if ((v = VALUE("--workers"))) {
      unsigned long n = strtoul(v, &end, 10);
      if (!*v || *end || n == 0 || n > 1024) {
        fprintf(stderr, "hali run: '%s': workers must be 1..1024\n", a);
        goto done;
      }
      o.device.worker_count = (uint32_t)n;
    } else if (!HALI_TRACING && (strncmp(a, "--trace=", 8) == 0 ||
                                 strncmp(a, "--trace-", 8) == 0)) {
      /* Compiled out (configure --disable-tracing): say so, rather than
       * run silently without the trace that was asked for. */
      fprintf(stderr,
              "hali run: '%s': tracing is not available: this hali was "
              "configured with --disable-tracing\n",
              a);
      goto done;
    } else if ((v = VALUE("--trace"))) {
      if (strcmp(v, "vm") == 0) o.trace.flags |= HALI_TRACE_VM;
      else if (strcmp(v, "hal") == 0) o.trace.flags |= HALI_TRACE_HAL;
      else if (strcmp(v, "all") == 0) o.trace.flags |= HALI_TRACE_ALL;
      else {
        fprintf(stderr, "hali run: '%s': expected vm, hal or all\n", a);
        goto done;
      }
    } else if ((v = VALUE("--trace-format"))) {
      if (strcmp(v, "chrome") == 0) o.trace.format = HALI_TRACE_CHROME;
      else if (strcmp(v, "text") == 0) o.trace.format = HALI_TRACE_TEXT;
      else {
        fprintf(stderr, "hali run: '%s': expected text or chrome\n", a);
        goto done;
      }
    } else if ((v = VALUE("--trace-filter"))) {
      o.trace.filter = v;
    } else if ((v = VALUE("--trace-out"))) {
      o.trace_out = v;
    } else if ((v = VALUE("--trace-values"))) {
      unsigned long n = strtoul(v, &end, 10);
      if (!*v || *end || n == 0) {
        fprintf(stderr, "hali run: '%s' is not a count\n", a);
        goto done;
      }
      o.trace.max_values = n;
    } else if ((v = VALUE("--executable-path"))) {
      o.exec_paths[o.nexec_paths++] = v;
    } else if ((v = VALUE("--passes"))) {
      o.passes.only = v;
    } else if (strcmp(a, "--no-passes") == 0) {
      o.passes.none = true;
    } else if ((v = VALUE("--max-depth"))) {
      unsigned long n = strtoul(v, &end, 10);
      if (!*v || *end || n == 0 || n > 1000000) {
        fprintf(stderr, "hali run: '%s': the depth must be 1..1000000\n", a);
        goto done;
      }
      o.max_depth = (uint32_t)n;
    } else if (a[0] == '-') {
      fprintf(stderr, "hali run: unknown option '%s'\n", a);
      goto done;
    } else if (!o.path) {
      o.path = a;
    } else {
      fprintf(stderr, "hali run: more than one module ('%s')\n", a);
      goto done;
    }
#undef VALUE
  }
  if (!o.path) {
    fprintf(stderr, "usage: hali run MODULE [--function=NAME] [--input=...]\n");
    goto done;
  }
  rc = run(&o);
done:
  free(lists);
  return rc;
}
