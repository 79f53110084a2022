/* hali run: load modules, turn --input values into arguments (scalars or
 * buffer views, typed by the function's signature), invoke, wait for the
 * work it queued, print or write the results, and optionally compare them
 * with --expected_output.  The session (load, link, call) is shared with
 * hali benchmark (tools/benchmark.c).
 *
 * A client of the public API (hali/hali.h) and nothing else: instance,
 * device, module, context, function, invoke — what any host program does
 * (tests/layers.test checks that this file uses no internal symbol). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hali/hali.h"
#include "tools/tensor.h"
#include "tools/tools.h"

static hali_status_t oom(void) {
  return hali_status_oom();
}

const char *tool_strlist_push(tool_strlist_t *l, const char *s) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    const char **n = realloc(l->v, cap * sizeof(*n));
    if (!n) return tool_flag_oom;
    l->v = n;
    l->cap = cap;
  }
  l->v[l->n++] = s;
  return NULL;
}

/* ---- Flags -------------------------------------------------------------- */

#define O ((run_options_t *)opts)

static const char *flag_module(void *opts, const char *v) {
  if (!*v) return "expected a module file, or - for stdin";
  return tool_strlist_push(&O->modules, v);
}
static const char *flag_function(void *opts, const char *v) {
  if (*v == '@') ++v;
  if (!*v) return "expected a function name";
  O->function = v;
  return NULL;
}
static const char *flag_input(void *opts, const char *v) {
  return tool_strlist_push(&O->inputs, v);
}
static const char *flag_output(void *opts, const char *v) {
  if (*v && strcmp(v, "-") != 0 && (v[0] != '@' || !v[1]))
    return "expected '-' (print), '' (ignore), @FILE.npy or @FILE.bin";
  return tool_strlist_push(&O->outputs, v);
}
static const char *flag_expected(void *opts, const char *v) {
  return tool_strlist_push(&O->expected, v);
}
static const char *threshold(const char *v, double *out) {
  char *end;
  double t = strtod(v, &end);
  if (!*v || *end || !(t >= 0)) return "expected a threshold >= 0";
  *out = t;
  return NULL;
}
static const char *flag_f32_threshold(void *opts, const char *v) {
  return threshold(v, &O->f32_threshold);
}
static const char *flag_f64_threshold(void *opts, const char *v) {
  return threshold(v, &O->f64_threshold);
}
static const char *flag_print_max(void *opts, const char *v) {
  uint64_t n;
  const char *e = tool_parse_u64(v, 0, SIZE_MAX, &n);
  if (!e) O->print_max = (size_t)n;
  return e;
}
static const char *flag_device(void *opts, const char *v) {
  hali_status_t s = hali_device_kind_parse(v, &O->device.kind);
  if (!s) return NULL;
  const char *e = tool_flag_error("%s", hali_status_message(s));
  hali_status_free(s);
  return e;
}
static const char *flag_workers(void *opts, const char *v) {
  uint64_t n;
  const char *e = tool_parse_u64(v, 1, 1024, &n);
  if (!e) O->device.worker_count = (uint32_t)n;
  return e;
}
static const char *flag_validate(void *opts, const char *v) {
  hali_status_t s = hali_validation_parse(v ? v : "fail", &O->device.validation);
  if (!s) return NULL;
  const char *e = tool_flag_error("%s", hali_status_message(s));
  hali_status_free(s);
  return e;
}
static const char *flag_list_devices(void *opts, const char *v) {
  (void)v;
  O->list_devices = true;
  return NULL;
}
static const char *need_tracing(void) {
  /* Compiled out (configure --disable-tracing): say so, rather than run
   * silently without the trace that was asked for. */
  return hali_trace_available()
             ? NULL
             : "tracing is not available: this hali was configured with "
               "--disable-tracing";
}
static const char *flag_trace(void *opts, const char *v) {
  const char *e = need_tracing();
  if (e) return e;
  if (strcmp(v, "vm") == 0) O->trace_bits |= HALI_TRACE_BITS_VM;
  else if (strcmp(v, "hal") == 0) O->trace_bits |= HALI_TRACE_BITS_HAL;
  else if (strcmp(v, "all") == 0)
    O->trace_bits |= HALI_TRACE_BITS_VM | HALI_TRACE_BITS_HAL;
  else return "expected vm, hal or all";
  return NULL;
}
static const char *flag_trace_format(void *opts, const char *v) {
  const char *e = need_tracing();
  if (e) return e;
  if (strcmp(v, "chrome") == 0) O->trace_format = HALI_TRACE_FORMAT_CHROME;
  else if (strcmp(v, "text") == 0) O->trace_format = HALI_TRACE_FORMAT_TEXT;
  else return "expected text or chrome";
  return NULL;
}
static const char *flag_trace_filter(void *opts, const char *v) {
  const char *e = need_tracing();
  if (!e) O->trace_filter = v;
  return e;
}
static const char *flag_trace_out(void *opts, const char *v) {
  const char *e = need_tracing();
  if (!e && !*v) e = "expected a file name";
  if (!e) O->trace_out = v;
  return e;
}
static const char *flag_trace_values(void *opts, const char *v) {
  const char *e = need_tracing();
  uint64_t n;
  if (!e) e = tool_parse_u64(v, 1, SIZE_MAX, &n);
  if (!e) O->trace_values = (size_t)n;
  return e;
}
static const char *flag_exec_path(void *opts, const char *v) {
  return tool_strlist_push(&O->exec_paths, v);
}
static const char *flag_parameters(void *opts, const char *v) {
  if (!*v) return "expected [SCOPE=]FILE (a .safetensors or .npy file)";
  return tool_strlist_push(&O->params, v);
}
static const char *flag_passes(void *opts, const char *v) {
  O->load.passes = v;
  return NULL;
}
static const char *flag_no_passes(void *opts, const char *v) {
  (void)v;
  O->load.no_passes = true;
  return NULL;
}
static const char *flag_max_depth(void *opts, const char *v) {
  uint64_t n;
  const char *e = tool_parse_u64(v, 1, 1000000, &n);
  if (!e) O->max_depth = (uint32_t)n;
  return e;
}
static const char *flag_fiber_threads(void *opts, const char *v) {
  uint64_t n;
  const char *e = tool_parse_u64(v, 1, 64, &n);
  if (!e) O->fiber_threads = (uint32_t)n;
  return e;
}
static const char *flag_fuel(void *opts, const char *v) {
  return tool_parse_u64(v, 1, UINT64_MAX, &O->fuel);
}
static const char *flag_max_memory(void *opts, const char *v) {
  return tool_parse_bytes(v, &O->max_memory);
}
static const char *flag_timeout(void *opts, const char *v) {
  const char *e = tool_parse_duration(v, &O->timeout_ns);
  if (!e && O->timeout_ns <= 0) e = "expected a duration above 0";
  return e;
}
static const char *flag_collective_timeout(void *opts, const char *v) {
  const char *e = tool_parse_duration(v, &O->device.collective_timeout_ns);
  if (!e && O->device.collective_timeout_ns <= 0)
    e = "expected a duration above 0";
  return e;
}
static const char *flag_all_ranks(void *opts, const char *v) {
  (void)v;
  O->all_ranks = true;
  return NULL;
}
#undef O

const tool_flag_t tool_run_flags[] = {
    {"--module", NULL, 0, "FILE",
     "a module (.hasm or .hbc; - reads stdin); repeatable: the modules are "
     "linked into one context in order",
     flag_module},
    {"--function", NULL, 0, "NAME",
     "the function to call (default main); NAME$async gets a signalled wait "
     "fence and a signal fence the tool awaits",
     flag_function},
    {"--input", NULL, 0, "VALUE",
     "one per argument, in order: 4 (typed by the signature), i64=4, "
     "f32=1.5, '2x2xi32=1 2 3 4', @file.npy, 4xf32=@raw.bin",
     flag_input},
    {"--output", NULL, 0, "SPEC",
     "where result i goes: - (print), '' (ignore), @FILE.npy, @FILE.bin",
     flag_output},
    {"--expected_output", "--expected-output", 0, "VALUE",
     "compare result i (syntax of --input); exit 1 on a mismatch",
     flag_expected},
    {"--expected_f32_threshold", "--expected-f32-threshold", 0, "T",
     "f32 comparison tolerance (default 0.0001)", flag_f32_threshold},
    {"--expected_f64_threshold", "--expected-f64-threshold", 0, "T",
     "f64 comparison tolerance (default 0.0001)", flag_f64_threshold},
    {"--output_max_element_count",
     "--print_max_elements --print-max-elements --print_max_element_count", 0,
     "N", "elide printed tensors after N elements (default 1024)",
     flag_print_max},
    {"--device", NULL, 0, "KIND", "local-sync (default) or local-task",
     flag_device},
    {"--workers", NULL, 0, "N", "local-task worker threads (1..1024)",
     flag_workers},
    {"--validate", NULL, 0, "[=MODE]",
     "check barriers, fence waits, host access, kernel bounds and "
     "unwritten reads (doc/validation.md); MODE fail (default) or warn "
     "(print and go on)",
     flag_validate},
    {"--list_devices", "--list-devices", 0, NULL,
     "list the device kinds and exit", flag_list_devices},
    {"--executable_path", "--executable-path", 0, "DIR",
     "where kernel libraries are looked up (also $HALI_EXECUTABLE_PATH)",
     flag_exec_path},
    {"--parameters", NULL, 0, "[SCOPE=]FILE",
     "weights for `parameter \"SCOPE\"::\"KEY\"` globals: a .safetensors or "
     ".npy file (repeatable; no SCOPE: the scope \"\")",
     flag_parameters},
    {"--passes", NULL, 0, "a,b", "run only these load-time passes",
     flag_passes},
    {"--no_passes", "--no-passes", 0, NULL,
     "run no load-time pass (tensor-level modules then fail verification)",
     flag_no_passes},
    {"--max_depth", "--max-depth", 0, "N",
     "call depth limit (default 4096)", flag_max_depth},
    {"--fiber_threads", "--fiber-threads", 0, "N",
     "threads running fibers (1..64, default one per core)", flag_fiber_threads},
    {"--fuel", NULL, 0, "N",
     "instruction budget of the invocation (RESOURCE_EXHAUSTED beyond)",
     flag_fuel},
    {"--max_memory", "--max-memory", 0, "BYTES",
     "device memory the program may hold at once (64M, 1G...)",
     flag_max_memory},
    {"--timeout", NULL, 0, "DURATION",
     "deadline of each call (500ms, 2s...; DEADLINE_EXCEEDED beyond)",
     flag_timeout},
    {"--collective_timeout", "--collective-timeout", 0, "DURATION",
     "how long a collective waits for every rank (default 10s; "
     "doc/collectives.md)",
     flag_collective_timeout},
    {"--all_ranks", "--all-ranks", 0, NULL,
     "under mpirun, every rank prints its results (default: rank 0 only)",
     flag_all_ranks},
    {"--trace", NULL, 0, "vm|hal|all",
     "trace every instruction / HAL operation (doc/tracing.md)", flag_trace},
    {"--trace_format", "--trace-format", 0, "text|chrome",
     "chrome: trace-event JSON (Perfetto)", flag_trace_format},
    {"--trace_filter", "--trace-filter", 0, "GLOB",
     "instruction lines of matching functions only", flag_trace_filter},
    {"--trace_out", "--trace-out", 0, "FILE", "the trace goes there, not to "
     "stderr", flag_trace_out},
    {"--trace_values", "--trace-values", 0, "N",
     "tensor elements shown in trace lines (default 8)", flag_trace_values},
    {NULL, NULL, 0, NULL, NULL, NULL},
};

void tool_run_options_init(run_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->function = "main";
  o->f32_threshold = 0.0001;
  o->f64_threshold = 0.0001;
  o->print_max = 1024;
  hali_device_params_initialize(&o->device);
  o->bench_min_time_ns = 500000000; /* 0.5 s, as Google Benchmark's */
  o->bench_warmup = 1;
}

void tool_run_options_free(run_options_t *o) {
  free(o->modules.v);
  free(o->inputs.v);
  free(o->outputs.v);
  free(o->expected.v);
  free(o->exec_paths.v);
  free(o->params.v);
}

static void list_devices(void) {
  static const char *const kinds[] = {"local-sync", "local-task"};
  static const char *const what[] = {
      "no threads: work runs inline on the calling thread",
      "a queue thread plus worker threads (--workers=N, default one per "
      "core)"};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
    hali_device_kind_t k;
    hali_status_t s = hali_device_kind_parse(kinds[i], &k);
    if (!s) printf("%-12s %s\n", kinds[i], what[i]);
    hali_status_free(s);
  }
}

int tool_run_options_finish(const char *cmd, run_options_t *o, char **args,
                            size_t nargs) {
  if (o->list_devices) {
    list_devices();
    return TOOL_EXIT_OK;
  }
  /* One positional module (more go in --module=FILE): a second word is
   * most often an unquoted value's piece (--input=4xf32=1 2 3 4). */
  if (nargs > 1) {
    fprintf(stderr,
            "hali %s: more than one module ('%s'): give each further one "
            "with --module=FILE, and quote values with blanks "
            "(--input='4xf32=1 2 3 4')\n",
            cmd, args[1]);
    return TOOL_EXIT_USAGE;
  }
  for (size_t i = 0; i < nargs; ++i)
    if (tool_strlist_push(&o->modules, args[i]))
      return tool_report(hali_status_oom());
  if (!o->modules.n) {
    fprintf(stderr,
            "usage: hali %s MODULE [--function=NAME] [--input=VALUE]... "
            "(hali %s --help lists the flags)\n",
            cmd, cmd);
    return TOOL_EXIT_USAGE;
  }
  size_t stdin_count = 0;
  for (size_t i = 0; i < o->modules.n; ++i)
    stdin_count += strcmp(o->modules.v[i], "-") == 0;
  if (stdin_count > 1) {
    fprintf(stderr, "hali %s: '-' (stdin) can be given as a module once\n",
            cmd);
    return TOOL_EXIT_USAGE;
  }
  if (stdin_count && (o->load.passes || o->load.no_passes)) {
    fprintf(stderr, "hali %s: --passes and --no_passes cannot be used with a "
                    "module read from stdin (-)\n", cmd);
    return TOOL_EXIT_USAGE;
  }
  /* Under mpirun: which rank this is (MPI starts up here, on every rank). */
  hali_status_t s = hali_world_rank(&o->rank, &o->ranks);
  if (s) return tool_report(s);
  return -1;
}

/* ---- Modules that are not modules --------------------------------------- */

const char *tool_sniff_not_module(const uint8_t *d, size_t n) {
  static const uint8_t hbc[8] = {0x7f, 'H', 'B', 'C', '\r', '\n', 0x1a, '\n'};
  if (n >= 8 && memcmp(d, hbc, 8) == 0) return NULL;
  static const struct {
    const char *magic;
    size_t len;
    const char *what;
  } known[] = {
      {"\x7f" "ELF", 4, "an ELF program or shared library"},
      {"\x93NUMPY", 6, "a .npy array; pass it with --input=@FILE"},
      {"PK\x03\x04", 4, "a zip archive (.npz?)"},
      {"\x1f\x8b", 2, "gzip data"},
      {"\x89PNG", 4, "a PNG image"},
      {"%PDF", 4, "a PDF document"},
      {"\xcf\xfa\xed\xfe", 4, "a Mach-O file"},
      {"MZ", 2, "a Windows executable"},
      {"\x7f" "HBC", 4, "a damaged .hbc header"},
      {"IREE", 4, "an IREE module (.vmfb)"},
  };
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); ++i)
    if (n >= known[i].len && memcmp(d, known[i].magic, known[i].len) == 0)
      return known[i].what;
  /* .hasm is text: control bytes other than blanks mean binary data. */
  size_t check = n < 4096 ? n : 4096;
  for (size_t i = 0; i < check; ++i) {
    uint8_t c = d[i];
    if (c == 0 || c == 0x7f || (c < 0x20 && c != '\t' && c != '\n' &&
                                c != '\r' && c != '\f' && c != '\v'))
      return "binary data";
  }
  return NULL;
}

hali_status_t tool_check_module_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return HALI_OK; /* the loader names the failure */
  uint8_t buf[4096];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  const char *what = tool_sniff_not_module(buf, n);
  if (!what) return HALI_OK;
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "%s: not a hali module (looks like %s)", path, what);
}

/* ---- Arguments ---------------------------------------------------------- */

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

static hali_element_type_t scalar_element_type(hali_variant_type_t t) {
  return t == HALI_VARIANT_I32   ? HALI_ELEMENT_TYPE_I32
         : t == HALI_VARIANT_I64 ? HALI_ELEMENT_TYPE_I64
         : t == HALI_VARIANT_F32 ? HALI_ELEMENT_TYPE_F32
                                 : HALI_ELEMENT_TYPE_F64;
}

/* Parses a scalar "42" (typed |want|, as the signature says) or
 * "TYPE=VALUE", whose TYPE must be |want|. */
static hali_status_t parse_scalar(const char *text, const char *what,
                                  const char *arg, hali_variant_type_t want,
                                  hali_variant_t *out) {
  const char *eq = strchr(text, '=');
  hali_variant_type_t type = want;
  const char *v = text;
  if (eq) {
    type = scalar_type_parse(text, (size_t)(eq - text));
    if (type == HALI_VARIANT_NONE) {
      /* A tensor (2xf32=...) or a type name that is no scalar's. */
      if (strchr(text, 'x') && strchr(text, 'x') < eq)
        return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "%s is %s, a scalar; %s '%s' is a tensor",
                                arg, hali_variant_type_name(want), what, text);
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s '%s': unknown type '%.*s' (expected i32, "
                              "i64, f32 or f64)",
                              what, text, (int)(eq - text), text);
    }
    v = eq + 1;
  }
  if (type != want)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: expected %s, got %s (%s '%s')", arg,
                            hali_variant_type_name(want),
                            hali_variant_type_name(type), what, text);
  if (!eq && *v == '@')
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s is %s, a scalar; %s '%s' names a file", arg,
                            hali_variant_type_name(want), what, text);
  memset(out, 0, sizeof(*out));
  out->type = type;
  /* Integers: signed or unsigned spellings of the same bits (-1 or
   * 0xffffffff), as for a tensor element; floats as strtod reads them. */
  hali_status_t s = hali_element_parse(scalar_element_type(type), v, strlen(v),
                                       &out->u);
  if (!s) return HALI_OK;
  hali_status_free(s);
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "%s '%s': '%s' is not a valid %s (%s)", what, text,
                          v, hali_variant_type_name(type), arg);
}

static void format_scalar(const hali_variant_t *v, char *buf, size_t n) {
  hali_element_format(scalar_element_type(v->type), &v->u, buf, n);
}

static bool is_scalar(hali_variant_type_t t) {
  return t == HALI_VARIANT_I32 || t == HALI_VARIANT_I64 ||
         t == HALI_VARIANT_F32 || t == HALI_VARIANT_F64;
}

void tool_function_signature(const hali_function_t *fn, char *buf, size_t n) {
  size_t at = 0;
#define PUT(...)                                                               \
  do {                                                                         \
    int k = snprintf(buf + at, at < n ? n - at : 0, __VA_ARGS__);              \
    if (k > 0) at += (size_t)k;                                                \
  } while (0)
  PUT("@%s(", hali_function_name(fn));
  for (size_t i = 0; i < hali_function_argument_count(fn); ++i)
    PUT("%s%s", i ? ", " : "",
        hali_variant_type_name(hali_function_argument_type(fn, i)));
  PUT(") -> (");
  for (size_t i = 0; i < hali_function_result_count(fn); ++i)
    PUT("%s%s", i ? ", " : "",
        hali_variant_type_name(hali_function_result_type(fn, i)));
  PUT(")");
#undef PUT
}

/* Builds argument |i| of |f| from its --input text. */
static hali_status_t make_arg(const run_options_t *o, hali_device_t *dev,
                              const hali_function_t *f, size_t i,
                              hali_variant_t *out) {
  char what[48], arg[200];
  const char *name = hali_function_name(f);
  snprintf(what, sizeof(what), "--input #%zu", i);
  snprintf(arg, sizeof(arg), "@%s argument %zu", name, i);
  hali_variant_type_t want = hali_function_argument_type(f, i);
  if (is_scalar(want))
    return parse_scalar(o->inputs.v[i], what, arg, want, out);
  if (want != HALI_VARIANT_BUFFER_VIEW)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: @%s takes %s, which cannot be given on the "
                            "command line",
                            what, name, hali_variant_type_name(want));
  tool_tensor_t t;
  HALI_RETURN_IF_ERROR_PLAIN(tool_tensor_parse(o->inputs.v[i], what, &t));
  hali_buffer_view_t *view = NULL;
  hali_status_t s = tool_tensor_to_view(&t, dev, &view);
  tool_tensor_free(&t);
  if (s) return hali_status_annotate(s, "%s", what);
  *out = hali_variant_view(view); /* owned: released with the arguments */
  return HALI_OK;
}

/* ---- The session -------------------------------------------------------- */

/* The files of every --parameters=[SCOPE=]FILE (no SCOPE: the scope "";
 * text before the first '=' is a scope only when it has no '/', so a path
 * may contain '=') in a new set; NULL when there are none. */
static hali_status_t make_parameters(const run_options_t *o,
                                     hali_parameters_t **out) {
  *out = NULL;
  if (!o->params.n) return HALI_OK;
  HALI_RETURN_IF_ERROR_PLAIN(hali_parameters_create(out));
  for (size_t i = 0; i < o->params.n; ++i) {
    const char *spec = o->params.v[i];
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


static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static hali_status_t load_module(const run_options_t *o, tool_session_t *s,
                                 const char *path, hali_module_t **out) {
  if (strcmp(path, "-") == 0) {
    size_t size = 0;
    HALI_RETURN_IF_ERROR_PLAIN(
        tool_read_file("/dev/stdin", &s->stdin_data, &size));
    const char *what = tool_sniff_not_module(s->stdin_data, size);
    if (what)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "<stdin>: not a hali module (looks like %s)",
                              what);
    return hali_module_load_bytes(s->instance, s->stdin_data, size, "<stdin>",
                                  out);
  }
  HALI_RETURN_IF_ERROR_PLAIN(tool_check_module_file(path));
  return hali_module_load_file_ex(s->instance, path, &o->load, out);
}

hali_status_t tool_session_open(const run_options_t *o, tool_session_t *s) {
  memset(s, 0, sizeof(*s));
  hali_instance_options_t io;
  hali_instance_options_initialize(&io);
  io.executable_paths = o->exec_paths.v;
  io.executable_path_count = o->exec_paths.n;
  HALI_RETURN_IF_ERROR_PLAIN(hali_instance_create(&io, &s->instance));
  s->modules = calloc(o->modules.n, sizeof(*s->modules));
  if (!s->modules) return oom();
  for (size_t i = 0; i < o->modules.n; ++i) {
    HALI_RETURN_IF_ERROR_PLAIN(
        load_module(o, s, o->modules.v[i], &s->modules[i]));
    ++s->nmodules;
  }
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_device_create(s->instance, &o->device, &s->device));
  HALI_RETURN_IF_ERROR_PLAIN(make_parameters(o, &s->params));
  if (o->trace_bits && o->trace_out) {
    s->trace_file = fopen(o->trace_out, "w");
    if (!s->trace_file)
      return hali_status_make(HALI_STATUS_NOT_FOUND, "--trace-out %s: %s",
                              o->trace_out, strerror(errno));
  }
  /* hali run binds no host functions: modules needing some cannot run. */
  hali_context_params_t cp;
  hali_context_params_initialize(&cp);
  cp.max_call_depth = o->max_depth;
  cp.fiber_threads = o->fiber_threads;
  cp.fuel = o->fuel;
  cp.max_memory_bytes = o->max_memory;
  cp.trace_bits = o->trace_bits;
  cp.trace_format = o->trace_format;
  cp.trace_filter = o->trace_filter;
  cp.trace_max_values = o->trace_values;
  cp.trace_file = s->trace_file;
  cp.parameters = s->params;
  HALI_RETURN_IF_ERROR_PLAIN(hali_context_create(
      s->instance, s->device, s->modules, s->nmodules, &cp, &s->context));
  tool_signals_watch(s->context);

  hali_status_t st = hali_context_lookup_function(s->context, o->function,
                                                  &s->fn);
  if (hali_status_code(st) == HALI_STATUS_NOT_FOUND) {
    hali_status_free(st);
    s->usage_error = true;
    char names[512] = "";
    size_t at = 0;
    for (size_t m = 0; m < s->nmodules; ++m)
      for (size_t i = 0; i < hali_module_function_count(s->modules[m]); ++i) {
        const char *n = hali_module_function_name(s->modules[m], i);
        if (strchr(n, '.')) continue; /* an import */
        int k = snprintf(names + at, at < sizeof(names) ? sizeof(names) - at
                                                        : 0,
                         "%s@%s", at ? " " : "", n);
        if (k > 0) at += (size_t)k;
      }
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "--function=%s: no function @%s in module @%s "
                            "(it has %s)",
                            o->function, o->function,
                            hali_module_name(s->modules[0]),
                            at ? names : "no functions");
  }
  if (st) return st;

  size_t argc = hali_function_argument_count(s->fn);
  /* f$async (or any function whose last two parameters are fences): the
   * tool passes a signalled wait fence and a signal fence. */
  s->async = argc >= 2 &&
             hali_function_argument_type(s->fn, argc - 2) ==
                 HALI_VARIANT_FENCE &&
             hali_function_argument_type(s->fn, argc - 1) ==
                 HALI_VARIANT_FENCE &&
             (ends_with(hali_function_name(s->fn), "$async") ||
              o->inputs.n == argc - 2);
  size_t want = s->async ? argc - 2 : argc;
  if (o->inputs.n != want) {
    char sig[512];
    tool_function_signature(s->fn, sig, sizeof(sig));
    s->usage_error = true;
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s takes %zu argument(s)%s, %zu --input "
                            "given; its signature is %s",
                            hali_function_name(s->fn), want,
                            s->async ? " (the tool adds the 2 fences)" : "",
                            o->inputs.n, sig);
  }
  s->nresults = hali_function_result_count(s->fn);
  if (o->expected.n && o->expected.n != s->nresults) {
    s->usage_error = true;
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s returns %zu result(s), %zu "
                            "--expected_output given",
                            hali_function_name(s->fn), s->nresults,
                            o->expected.n);
  }
  s->nargs = argc;
  s->args = calloc(argc + 1, sizeof(*s->args));
  if (!s->args) return oom();
  for (size_t i = 0; i < o->inputs.n; ++i) {
    hali_status_t e = make_arg(o, s->device, s->fn, i, &s->args[i]);
    if (e) {
      s->usage_error = hali_status_code(e) == HALI_STATUS_INVALID_ARGUMENT ||
                       hali_status_code(e) == HALI_STATUS_NOT_FOUND;
      return e;
    }
  }
  return HALI_OK;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What is left of |deadline| (INT64_MAX = none) as a timeout. */
static int64_t remaining(int64_t deadline) {
  if (deadline == INT64_MAX) return HALI_TIMEOUT_INFINITE;
  int64_t left = deadline - now_ns();
  return left > 0 ? left : 0;
}

static hali_status_t deadline_exceeded(const run_options_t *o,
                                       const char *fn, const char *what) {
  return hali_status_make(HALI_STATUS_DEADLINE_EXCEEDED,
                          "--timeout: @%s did not finish within %.3f s (%s)",
                          fn, (double)o->timeout_ns / 1e9, what);
}

hali_status_t tool_session_call(const run_options_t *o, tool_session_t *s,
                                hali_variant_t *results) {
  int64_t deadline = o->timeout_ns > 0 ? now_ns() + o->timeout_ns : INT64_MAX;
  hali_fence_t *wait = NULL, *signal = NULL;
  const char *name = hali_function_name(s->fn);
  hali_status_t st = HALI_OK;
  if (s->async) {
    st = hali_fence_create(&wait);
    if (!st) st = hali_fence_signal(wait);
    if (!st) st = hali_fence_create(&signal);
    if (st) goto done;
    s->args[s->nargs - 2] = hali_variant_fence(wait);
    s->args[s->nargs - 1] = hali_variant_fence(signal);
  }
  if (deadline == INT64_MAX) {
    st = hali_context_invoke(s->context, s->fn, s->args, s->nargs, results,
                             s->nresults);
  } else {
    hali_invocation_t *inv = NULL;
    st = hali_context_invoke_async(s->context, s->fn, s->args, s->nargs, &inv);
    if (!st) st = hali_invocation_await_for(inv, remaining(deadline));
    if (hali_status_code(st) == HALI_STATUS_DEADLINE_EXCEEDED) {
      hali_status_free(st);
      hali_invocation_cancel(inv);
      hali_status_free(hali_invocation_await(inv));
      st = deadline_exceeded(o, name, "the invocation was cancelled");
    } else if (!st) {
      st = hali_invocation_status(inv);
      if (!st) st = hali_invocation_results(inv, results, s->nresults);
    }
    hali_invocation_release(inv);
  }
  if (!st && signal) {
    st = hali_fence_await(signal, remaining(deadline));
    if (hali_status_code(st) == HALI_STATUS_DEADLINE_EXCEEDED) {
      hali_status_free(st);
      st = deadline_exceeded(o, name, "its signal fence was not reached");
    } else if (st) {
      st = hali_status_annotate(st, "the signal fence of @%s failed", name);
    }
  }
  /* Results may be views the queue is still writing (a program that
   * returns without awaiting): wait for every submission first.  Not
   * under --validate, which reports such a program when its result is
   * read (doc/validation.md, check 3). */
  if (!st && !o->device.validation) {
    st = hali_context_wait_idle(s->context, remaining(deadline));
    if (hali_status_code(st) == HALI_STATUS_DEADLINE_EXCEEDED) {
      hali_status_free(st);
      st = deadline_exceeded(o, name, "queued work was still running");
    }
  }
  if (st) {
    for (size_t i = 0; i < s->nresults; ++i) hali_variant_release(&results[i]);
  }
done:
  if (s->async) {
    s->args[s->nargs - 2] = hali_variant_fence(NULL);
    s->args[s->nargs - 1] = hali_variant_fence(NULL);
    s->args[s->nargs - 2].type = s->args[s->nargs - 1].type = HALI_VARIANT_NONE;
  }
  hali_fence_release(wait);
  hali_fence_release(signal);
  return st;
}

int tool_session_end(tool_session_t *s, hali_status_t st, int rc) {
  bool usage = s->usage_error;
  tool_session_close(s, st != HALI_OK);
  if (st) {
    tool_report(st);
    rc = usage ? TOOL_EXIT_USAGE : TOOL_EXIT_FAILURE;
  }
  int sig = tool_signals_release();
  return sig ? 128 + sig : rc;
}

void tool_session_close(tool_session_t *s, bool failed) {
  for (size_t i = 0; s->args && i < s->nargs; ++i)
    hali_variant_release(&s->args[i]);
  free(s->args);
  /* No cancel from a signal once the context goes; releasing it finishes
   * its trace (a Chrome trace's JSON). */
  tool_signals_release();
  hali_context_release(s->context);
  hali_parameters_release(s->params);
  /* After a failure, queued work may wait on fences nobody will signal:
   * give it up rather than wait forever in the release's drain. */
  if (failed) hali_device_abandon(s->device);
  hali_device_release(s->device); /* drains the queue first */
  for (size_t i = 0; i < s->nmodules; ++i) hali_module_release(s->modules[i]);
  free(s->modules);
  hali_instance_release(s->instance);
  if (s->trace_file) fclose(s->trace_file);
  free(s->stdin_data);
  memset(s, 0, sizeof(*s));
}

/* ---- Results ------------------------------------------------------------ */

/* Writes result |t| to "-" (stdout, as text), "@file.npy" or "@file.bin";
 * "" drops it. */
static hali_status_t write_output(const char *spec, const tool_tensor_t *t,
                                  size_t max) {
  if (!*spec) return HALI_OK;
  if (strcmp(spec, "-") == 0) {
    tool_tensor_print(t, max, stdout);
    putchar('\n');
    return HALI_OK;
  }
  const char *path = spec + 1;
  FILE *f = fopen(path, "wb");
  if (!f)
    return hali_status_make(HALI_STATUS_NOT_FOUND, "--output %s: %s", path,
                            strerror(errno));
  hali_status_t s = HALI_OK;
  if (ends_with(path, ".npy"))
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
 * |failures| and returns false on mismatch.  |*usage| is set when the
 * expected value itself is malformed. */
static bool check_expected(const run_options_t *o, size_t i,
                           const hali_variant_t *v, const tool_tensor_t *t,
                           FILE *failures) {
  char what[48], res[48];
  snprintf(what, sizeof(what), "--expected_output #%zu", i);
  snprintf(res, sizeof(res), "result %zu", i);
  hali_status_t s;
  if (t) {
    tool_tensor_t x;
    s = tool_tensor_parse(o->expected.v[i], what, &x);
    if (!s) {
      s = tool_tensor_compare(t, &x, o->f32_threshold, o->f64_threshold);
      tool_tensor_free(&x);
    }
  } else {
    hali_variant_t x;
    s = parse_scalar(o->expected.v[i], what, res, v->type, &x);
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

/* A scalar result as a rank-0 host tensor (for @FILE.npy / @FILE.bin). */
static hali_status_t scalar_tensor(const hali_variant_t *v, tool_tensor_t *t) {
  memset(t, 0, sizeof(*t));
  t->type = scalar_element_type(v->type);
  t->size = hali_element_type_byte_size(t->type);
  t->data = malloc(t->size);
  if (!t->data) return oom();
  memcpy(t->data, &v->u, t->size);
  return HALI_OK;
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
  /* Under mpirun only rank 0 prints, unless --all_ranks. */
  const bool show = o->ranks <= 1 || o->rank == 0 || o->all_ranks;
  if (o->ranks > 1 && o->all_ranks) printf("rank %d of %d:\n", o->rank, o->ranks);
  for (size_t i = 0; !s && show && i < n; ++i) {
    const hali_variant_t *v = &results[i];
    tool_tensor_t t = {0};
    bool is_view = v->type == HALI_VARIANT_BUFFER_VIEW;
    const char *out = i < o->outputs.n ? o->outputs.v[i] : "-";
    if (is_view) {
      s = tool_tensor_from_view(v->u.view, &t);
      if (s) {
        s = hali_status_annotate(s, "reading result[%zu] to print it", i);
        break;
      }
    }
    if (is_view && strcmp(out, "-") != 0) {
      s = write_output(out, &t, o->print_max);
    } else if (is_view) {
      printf("result[%zu]: hal.buffer_view\n", i);
      s = write_output("-", &t, o->print_max);
    } else if (!is_scalar(v->type)) {
      printf("result[%zu]: %s\n", i, hali_variant_type_name(v->type));
    } else if (strcmp(out, "-") != 0) {
      tool_tensor_t st;
      s = scalar_tensor(v, &st); /* written as a shape-() array */
      if (!s) s = write_output(out, &st, o->print_max);
      tool_tensor_free(&st);
    } else {
      char buf[64];
      format_scalar(v, buf, sizeof(buf));
      printf("result[%zu]: %s=%s\n", i, hali_variant_type_name(v->type), buf);
    }
    if (!s && o->expected.n && (is_view || is_scalar(v->type)) &&
        !check_expected(o, i, v, is_view ? &t : NULL, failures))
      all_match = false;
    tool_tensor_free(&t);
  }
  bool written = fclose(failures) == 0;
  if (!s && !written) s = oom();
  if (!s && o->expected.n) {
    if (all_match) printf("[SUCCESS]\n");
    else fputs(text && text_size ? text : "[FAILED]\n", stdout);
  }
  free(text);
  *rc = all_match ? TOOL_EXIT_OK : TOOL_EXIT_FAILURE;
  return s;
}

/* ---- hali run ----------------------------------------------------------- */

static const tool_flag_t *const run_tables[] = {tool_run_flags, NULL};
static const tool_command_t run_command = {
    "run", "MODULE... [--function=NAME] [--input=VALUE]...",
    "call a function of a .hasm or .hbc module and print its results",
    run_tables};

int tool_run(int argc, char **argv) {
  run_options_t o;
  tool_run_options_init(&o);
  char **args;
  size_t nargs;
  int rc = tool_flags_parse(&run_command, argc, argv, &o, &args, &nargs);
  if (rc < 0) rc = tool_run_options_finish("run", &o, args, nargs);
  if (rc >= 0) goto done;
  tool_session_t s;
  hali_status_t st = tool_session_open(&o, &s);
  hali_variant_t *results = NULL;
  if (!st) {
    results = calloc(s.nresults + 1, sizeof(*results));
    if (!results) st = oom();
  }
  if (!st) st = tool_session_call(&o, &s, results);
  if (!st) st = report_results(&o, results, s.nresults, &rc);
  for (size_t i = 0; results && i < s.nresults; ++i)
    hali_variant_release(&results[i]);
  free(results);
  rc = tool_session_end(&s, st, rc);
done:
  tool_run_options_free(&o);
  tool_flags_free();
  return rc;
}
