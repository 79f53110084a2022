/* hali run: load a module, turn --input values into arguments (scalars or
 * buffer views, by the function's signature), invoke, print or write the
 * results, and optionally compare them with --expected_output.
 *
 * A client of the public API (hali/hali.h) and nothing else: instance,
 * device, module, context, function, invoke — what any host program does
 * (tests/exports.test checks that this file uses no internal symbol). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"
#include "tools/tensor.h"
#include "tools/tools.h"

typedef struct {
  const char *path;
  const char *function;
  uint32_t max_depth;
  uint32_t fiber_threads;
  const char **inputs, **outputs, **expected, **exec_paths, **params;
  size_t ninputs, noutputs, nexpected, nexec_paths, nparams;
  double f32_threshold, f64_threshold;
  size_t print_max;
  hali_device_params_t device;
  uint32_t trace_bits; /* hali_trace_bits_t */
  hali_trace_output_format_t trace_format;
  const char *trace_filter;
  size_t trace_values;
  const char *trace_out;
  hali_module_load_options_t load; /* --passes=, --no-passes */
} run_options_t;

static hali_status_t oom(void) {
  return hali_status_oom();
}

/* The scalar types a --input may name. */
static hali_variant_type_t scalar_type_parse(const char *text, size_t len) {
  static const hali_variant_type_t types[] = {
      HALI_VARIANT_I32, HALI_VARIANT_I64, HALI_VARIANT_F32, HALI_VARIANT_F64};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
    const char *name = hali_variant_type_name(types[i]);
    if (strlen(name) == len && memcmp(name, text, len) == 0) return types[i];
  }
  return HALI_VARIANT_NONE;
}

/* Parses a scalar "42" (i32) or "TYPE=VALUE" of the expected |type|. */
static hali_status_t parse_scalar(const char *text, const char *what,
                                  const char *arg, hali_variant_type_t want,
                                  hali_variant_t *out) {
  const char *eq = strchr(text, '=');
  hali_variant_type_t type = HALI_VARIANT_I32;
  const char *v = text;
  if (eq) {
    type = scalar_type_parse(text, (size_t)(eq - text));
    if (type == HALI_VARIANT_NONE)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s '%s': unknown type '%.*s' (expected i32, "
                              "i64, f32 or f64)",
                              what, text, (int)(eq - text), text);
    v = eq + 1;
  }
  if (type != want)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: expected %s, got %s (%s '%s')", arg,
                            hali_variant_type_name(want),
                            hali_variant_type_name(type), what, text);
  memset(out, 0, sizeof(*out));
  out->type = type;
  char *end;
  bool ok;
  switch (type) {
  case HALI_VARIANT_I32:
  case HALI_VARIANT_I64: {
    /* Signed or unsigned spellings of the same bits: -1 or 0xffffffff, as
     * for a tensor element of the signless integer type. */
    hali_element_type_t et = type == HALI_VARIANT_I32 ? HALI_ELEMENT_TYPE_I32
                                                      : HALI_ELEMENT_TYPE_I64;
    hali_status_t s = hali_element_parse(et, v, strlen(v), &out->u);
    ok = s == HALI_OK;
    hali_status_free(s);
    break;
  }
  case HALI_VARIANT_F32:
    out->u.f32 = strtof(v, &end);
    ok = *v && !*end;
    break;
  default:
    out->u.f64 = strtod(v, &end);
    ok = *v && !*end;
    break;
  }
  if (ok) return HALI_OK;
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "%s '%s': '%s' is not a valid %s", what, text, v,
                          hali_variant_type_name(type));
}

static void format_scalar(const hali_variant_t *v, char *buf, size_t n) {
  hali_element_type_t et = v->type == HALI_VARIANT_I32   ? HALI_ELEMENT_TYPE_I32
                           : v->type == HALI_VARIANT_I64 ? HALI_ELEMENT_TYPE_I64
                           : v->type == HALI_VARIANT_F32 ? HALI_ELEMENT_TYPE_F32
                                                         : HALI_ELEMENT_TYPE_F64;
  hali_element_format(et, &v->u, buf, n);
}

static bool is_scalar(hali_variant_type_t t) {
  return t == HALI_VARIANT_I32 || t == HALI_VARIANT_I64 ||
         t == HALI_VARIANT_F32 || t == HALI_VARIANT_F64;
}

/* Builds argument |i| of |f| from its --input text. */
static hali_status_t make_arg(const run_options_t *o, hali_device_t *dev,
                              const hali_function_t *f, size_t i,
                              hali_variant_t *out) {
  char what[48], arg[160];
  const char *name = hali_function_name(f);
  snprintf(what, sizeof(what), "--input #%zu", i);
  snprintf(arg, sizeof(arg), "@%s argument %zu", name, i);
  hali_variant_type_t want = hali_function_argument_type(f, i);
  if (is_scalar(want)) return parse_scalar(o->inputs[i], what, arg, want, out);
  if (want != HALI_VARIANT_BUFFER_VIEW)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: @%s takes %s, which cannot be given on the "
                            "command line",
                            what, name, hali_variant_type_name(want));
  tool_tensor_t t;
  HALI_RETURN_IF_ERROR_PLAIN(tool_tensor_parse(o->inputs[i], what, &t));
  hali_buffer_view_t *view = NULL;
  hali_status_t s = tool_tensor_to_view(&t, dev, &view);
  tool_tensor_free(&t);
  if (s) return hali_status_annotate(s, "%s", what);
  *out = hali_variant_view(view); /* owned: released with the arguments */
  return HALI_OK;
}

/* Writes result |i| to "-" (stdout, as text), "@file.npy" or "@file.bin". */
static hali_status_t write_output(const char *spec, const tool_tensor_t *t,
                                  size_t max) {
  if (strcmp(spec, "-") == 0) {
    tool_tensor_print(t, max, stdout);
    putchar('\n');
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
    s = tool_tensor_write_npy(t, f);
  else if (fwrite(t->data, 1, t->size, f) != t->size)
    s = hali_status_make(HALI_STATUS_DATA_LOSS, "--output %s: write failed",
                         path);
  if (fclose(f) != 0 && !s)
    s = hali_status_make(HALI_STATUS_DATA_LOSS, "--output %s: close failed",
                         path);
  return s;
}

/* Compares result |i| with its --expected_output; appends a line to
 * |failures| and returns false on mismatch. */
static bool check_expected(const run_options_t *o, size_t i,
                           const hali_variant_t *v, const tool_tensor_t *t,
                           FILE *failures) {
  char what[48], res[48];
  snprintf(what, sizeof(what), "--expected_output #%zu", i);
  snprintf(res, sizeof(res), "result %zu", i);
  hali_status_t s;
  if (t) {
    tool_tensor_t x;
    s = tool_tensor_parse(o->expected[i], what, &x);
    if (!s) {
      s = tool_tensor_compare(t, &x, o->f32_threshold, o->f64_threshold);
      tool_tensor_free(&x);
    }
  } else {
    hali_variant_t x;
    s = parse_scalar(o->expected[i], what, res, v->type, &x);
    if (!s) {
      bool match;
      if (v->type == HALI_VARIANT_F32)
        match = x.u.f32 == v->u.f32 || (isnan(x.u.f32) && isnan(v->u.f32)) ||
                fabs((double)x.u.f32 - v->u.f32) <= o->f32_threshold;
      else if (v->type == HALI_VARIANT_F64)
        match = x.u.f64 == v->u.f64 || (isnan(x.u.f64) && isnan(v->u.f64)) ||
                fabs(x.u.f64 - v->u.f64) <= o->f64_threshold;
      else if (v->type == HALI_VARIANT_I32)
        match = x.u.i32 == v->u.i32;
      else
        match = x.u.i64 == v->u.i64;
      if (!match) {
        char have[64], want[64];
        format_scalar(v, have, sizeof(have));
        format_scalar(&x, want, sizeof(want));
        s = hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                             "%s (%s) does not match the expected (%s)",
                             hali_variant_type_name(v->type), have, want);
      }
    }
  }
  if (!s) return true;
  fprintf(failures, "[FAILED] result[%zu]: %s\n", i, hali_status_message(s));
  hali_status_free(s);
  return false;
}

/* Prints (or writes) every result and checks the expected ones; |*rc| is
 * 0 when all match, 1 when one does not. */
static hali_status_t report_results(const run_options_t *o,
                                    const hali_variant_t *results, size_t n,
                                    int *rc) {
  /* Mismatches are listed after every result has been printed. */
  char *text = NULL;
  size_t text_size = 0;
  FILE *failures = open_memstream(&text, &text_size);
  if (!failures) return oom();
  hali_status_t s = HALI_OK;
  bool all_match = true;
  for (size_t i = 0; !s && i < n; ++i) {
    const hali_variant_t *v = &results[i];
    tool_tensor_t t = {0};
    bool is_view = v->type == HALI_VARIANT_BUFFER_VIEW;
    if (is_view) {
      s = tool_tensor_from_view(v->u.view, &t);
      if (s) break;
    }
    const char *out = i < o->noutputs ? o->outputs[i] : "-";
    if (is_view && strcmp(out, "-") != 0) {
      s = write_output(out, &t, o->print_max);
    } else if (is_view) {
      printf("result[%zu]: hal.buffer_view\n", i);
      s = write_output("-", &t, o->print_max);
    } else if (!is_scalar(v->type)) {
      printf("result[%zu]: %s\n", i, hali_variant_type_name(v->type));
    } else {
      char buf[64];
      format_scalar(v, buf, sizeof(buf));
      printf("result[%zu]: %s=%s\n", i, hali_variant_type_name(v->type), buf);
    }
    if (!s && o->nexpected && (is_view || is_scalar(v->type)) &&
        !check_expected(o, i, v, is_view ? &t : NULL, failures))
      all_match = false;
    tool_tensor_free(&t);
  }
  bool written = fclose(failures) == 0;
  if (!s && !written) s = oom();
  if (!s && o->nexpected) {
    if (all_match) printf("[SUCCESS]\n");
    else fputs(text && text_size ? text : "[FAILED]\n", stdout);
  }
  free(text);
  *rc = all_match ? 0 : 1;
  return s;
}

/* The files of every --parameters=[SCOPE=]FILE (no SCOPE: the scope "";
 * text before the first '=' is a scope only when it has no '/', so a path
 * may contain '=') in a new set; NULL when there are none. */
static hali_status_t make_parameters(const run_options_t *o,
                                     hali_parameters_t **out) {
  *out = NULL;
  if (!o->nparams) return HALI_OK;
  HALI_RETURN_IF_ERROR_PLAIN(hali_parameters_create(out));
  for (size_t i = 0; i < o->nparams; ++i) {
    const char *spec = o->params[i];
    const char *eq = strchr(spec, '=');
    const char *slash = strchr(spec, '/');
    char scope[256] = "";
    const char *path = spec;
    if (eq && (!slash || slash > eq)) {
      size_t n = (size_t)(eq - spec);
      if (n >= sizeof(scope)) {
        hali_parameters_release(*out);
        *out = NULL;
        return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "--parameters=%s: the scope is longer than "
                                "%zu bytes",
                                spec, sizeof(scope) - 1);
      }
      memcpy(scope, spec, n);
      scope[n] = 0;
      path = eq + 1;
    }
    hali_status_t s = hali_parameters_add_file(*out, scope, path);
    if (s) {
      hali_parameters_release(*out);
      *out = NULL;
      return hali_status_annotate(s, "--parameters=%s", spec);
    }
  }
  return HALI_OK;
}

/* The run itself; every handle it creates is released on the way out.
 * |*rc| is the exit code when it returns OK. */
static hali_status_t run_module(const run_options_t *o, int *rc) {
  hali_instance_t *instance = NULL;
  hali_device_t *device = NULL;
  hali_module_t *module = NULL;
  hali_context_t *context = NULL;
  hali_parameters_t *params = NULL;
  FILE *trace_file = NULL;
  hali_variant_t *args = NULL, *results = NULL;
  size_t nresults = 0;

  hali_instance_options_t io;
  hali_instance_options_initialize(&io);
  io.executable_paths = o->exec_paths;
  io.executable_path_count = o->nexec_paths;
  hali_status_t s = hali_instance_create(&io, &instance);
  if (!s) s = hali_module_load_file_ex(instance, o->path, &o->load, &module);
  if (!s) s = hali_device_create(instance, &o->device, &device);
  if (!s) s = make_parameters(o, &params);
  if (!s && o->trace_bits && o->trace_out) {
    trace_file = fopen(o->trace_out, "w");
    if (!trace_file)
      s = hali_status_make(HALI_STATUS_NOT_FOUND, "--trace-out %s: %s",
                           o->trace_out, strerror(errno));
  }
  if (!s) {
    /* hali run binds no host functions: modules needing some cannot run. */
    hali_context_params_t cp;
    hali_context_params_initialize(&cp);
    cp.max_call_depth = o->max_depth;
    cp.fiber_threads = o->fiber_threads;
    cp.trace_bits = o->trace_bits;
    cp.trace_format = o->trace_format;
    cp.trace_filter = o->trace_filter;
    cp.trace_max_values = o->trace_values;
    cp.trace_file = trace_file;
    cp.parameters = params;
    s = hali_context_create(instance, device, &module, 1, &cp, &context);
  }
  hali_function_t *fn = NULL;
  if (!s) {
    s = hali_context_lookup_function(context, o->function, &fn);
    if (hali_status_code(s) == HALI_STATUS_NOT_FOUND) {
      hali_status_free(s);
      s = hali_status_make(HALI_STATUS_NOT_FOUND,
                           "%s: no function @%s in module @%s", o->path,
                           o->function, hali_module_name(module));
    }
  }
  if (!s && o->ninputs != hali_function_argument_count(fn))
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "@%s takes %zu argument(s), %zu given",
                         hali_function_name(fn),
                         hali_function_argument_count(fn), o->ninputs);
  if (!s) nresults = hali_function_result_count(fn);
  if (!s && o->nexpected && o->nexpected != nresults)
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "@%s returns %zu result(s), %zu --expected_output "
                         "given",
                         hali_function_name(fn), nresults, o->nexpected);
  if (!s) {
    args = calloc(o->ninputs + 1, sizeof(*args));
    results = calloc(nresults + 1, sizeof(*results));
    if (!args || !results) s = oom();
  }
  for (size_t i = 0; !s && i < o->ninputs; ++i)
    s = make_arg(o, device, fn, i, &args[i]);
  if (!s)
    s = hali_context_invoke(context, fn, args, o->ninputs, results, nresults);
  if (!s) s = report_results(o, results, nresults, rc);

  for (size_t i = 0; args && i < o->ninputs; ++i)
    hali_variant_release(&args[i]);
  for (size_t i = 0; results && i < nresults; ++i)
    hali_variant_release(&results[i]);
  free(args);
  free(results);
  /* Releasing the context finishes its trace (a Chrome trace's JSON). */
  hali_context_release(context);
  hali_parameters_release(params);
  /* After a failure, queued work may wait on fences nobody will signal:
   * give it up rather than wait forever in the release's drain. */
  if (s) hali_device_abandon(device);
  hali_device_release(device); /* drains the queue first */
  hali_module_release(module);
  hali_instance_release(instance);
  if (trace_file) fclose(trace_file);
  return s;
}

static int run(const run_options_t *o) {
  int rc = 1;
  hali_status_t s = run_module(o, &rc);
  if (s) return tool_report(s);
  return rc;
}

int tool_run(int argc, char **argv) {
  run_options_t o = {0};
  o.function = "main";
  o.f32_threshold = 0.0001;
  o.f64_threshold = 0.0001;
  o.print_max = 1024;
  hali_device_params_initialize(&o.device);
  const char **lists = calloc((size_t)argc * 5 + 5, sizeof(char *));
  if (!lists) return tool_report(oom());
  o.inputs = lists;
  o.outputs = lists + argc + 1;
  o.expected = lists + 2 * argc + 2;
  o.exec_paths = lists + 3 * argc + 3;
  o.params = lists + 4 * argc + 4;
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
      hali_status_t s = hali_device_kind_parse(v, &o.device.kind);
      if (s) {
        rc = tool_report(s);
        goto done;
      }
    } else if ((v = VALUE("--workers"))) {
      unsigned long n = strtoul(v, &end, 10);
      if (!*v || *end || n == 0 || n > 1024) {
        fprintf(stderr, "hali run: '%s': workers must be 1..1024\n", a);
        goto done;
      }
      o.device.worker_count = (uint32_t)n;
    } else if (!hali_trace_available() && (strncmp(a, "--trace=", 8) == 0 ||
                                 strncmp(a, "--trace-", 8) == 0)) {
      /* Compiled out (configure --disable-tracing): say so, rather than
       * run silently without the trace that was asked for. */
      fprintf(stderr,
              "hali run: '%s': tracing is not available: this hali was "
              "configured with --disable-tracing\n",
              a);
      goto done;
    } else if ((v = VALUE("--trace"))) {
      if (strcmp(v, "vm") == 0) o.trace_bits |= HALI_TRACE_BITS_VM;
      else if (strcmp(v, "hal") == 0) o.trace_bits |= HALI_TRACE_BITS_HAL;
      else if (strcmp(v, "all") == 0) o.trace_bits |= HALI_TRACE_BITS_VM | HALI_TRACE_BITS_HAL;
      else {
        fprintf(stderr, "hali run: '%s': expected vm, hal or all\n", a);
        goto done;
      }
    } else if ((v = VALUE("--trace-format"))) {
      if (strcmp(v, "chrome") == 0) o.trace_format = HALI_TRACE_FORMAT_CHROME;
      else if (strcmp(v, "text") == 0) o.trace_format = HALI_TRACE_FORMAT_TEXT;
      else {
        fprintf(stderr, "hali run: '%s': expected text or chrome\n", a);
        goto done;
      }
    } else if ((v = VALUE("--trace-filter"))) {
      o.trace_filter = v;
    } else if ((v = VALUE("--trace-out"))) {
      o.trace_out = v;
    } else if ((v = VALUE("--trace-values"))) {
      unsigned long n = strtoul(v, &end, 10);
      if (!*v || *end || n == 0) {
        fprintf(stderr, "hali run: '%s' is not a count\n", a);
        goto done;
      }
      o.trace_values = n;
    } else if ((v = VALUE("--executable-path"))) {
      o.exec_paths[o.nexec_paths++] = v;
    } else if ((v = VALUE("--parameters"))) {
      o.params[o.nparams++] = v;
    } else if ((v = VALUE("--passes"))) {
      o.load.passes = v;
    } else if (strcmp(a, "--no-passes") == 0) {
      o.load.no_passes = true;
    } else if ((v = VALUE("--max-depth"))) {
      unsigned long n = strtoul(v, &end, 10);
      if (!*v || *end || n == 0 || n > 1000000) {
        fprintf(stderr, "hali run: '%s': the depth must be 1..1000000\n", a);
        goto done;
      }
      o.max_depth = (uint32_t)n;
    } else if ((v = VALUE("--fiber-threads"))) {
      unsigned long n = strtoul(v, &end, 10);
      if (!*v || *end || n == 0 || n > 64) {
        fprintf(stderr, "hali run: '%s': the fiber threads must be 1..64\n",
                a);
        goto done;
      }
      o.fiber_threads = (uint32_t)n;
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
