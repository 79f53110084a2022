/* hali — the command-line tool's internal interfaces. */
#ifndef HALI_TOOLS_TOOLS_H
#define HALI_TOOLS_TOOLS_H

#include "hali/hali.h"
#include "tools/flags.h"

/* A growable list of borrowed strings (flag values). */
typedef struct tool_strlist_s {
  const char **v;
  size_t n, cap;
} tool_strlist_t;
/* NULL, or tool_flag_oom (a flag handler's message). */
const char *tool_strlist_push(tool_strlist_t *l, const char *s);

/* What `hali run` and `hali benchmark` are told. */
typedef struct run_options_s {
  tool_strlist_t modules; /* --module and the positional one, in order */
  const char *function;
  tool_strlist_t inputs, outputs, expected, exec_paths;
  tool_strlist_t params; /* --parameters=[SCOPE=]FILE */
  double f32_threshold, f64_threshold;
  size_t print_max;
  hali_device_params_t device;
  uint32_t trace_bits; /* hali_trace_bits_t */
  hali_trace_output_format_t trace_format;
  const char *trace_filter;
  size_t trace_values;
  const char *trace_out;
  hali_module_load_options_t load; /* --passes=, --no-passes */
  /* Context limits (0 = none). */
  uint32_t max_depth;
  uint32_t fiber_threads; /* 0: the default (one per core) */
  uint64_t fuel, max_memory;
  int64_t timeout_ns;
  bool list_devices;
  /* Collectives: every rank prints (--all_ranks); this process's rank in
   * the MPI world and the world's size (0 and 1 without mpirun). */
  bool all_ranks;
  int32_t rank, ranks;
  /* hali benchmark */
  uint64_t bench_repetitions; /* 0: until the time budget */
  int64_t bench_min_time_ns;
  uint64_t bench_warmup;
  bool bench_json;
  const char *bench_out;
} run_options_t;

/* The flags run and benchmark share (tools/run.c). */
extern const tool_flag_t tool_run_flags[];
void tool_run_options_init(run_options_t *o);
void tool_run_options_free(run_options_t *o);
/* Checks positional arguments (modules) and completes |o|; returns -1 to
 * go on, or an exit code. */
int tool_run_options_finish(const char *cmd, run_options_t *o, char **args,
                            size_t nargs);

/* An opened run: modules linked into a context, the function, arguments
 * built from --input (fences appended for f$async). */
typedef struct tool_session_s {
  hali_instance_t *instance;
  hali_device_t *device;
  hali_module_t **modules;
  size_t nmodules;
  hali_context_t *context;
  hali_parameters_t *params; /* NULL without --parameters */
  hali_function_t *fn;
  hali_variant_t *args; /* nargs entries; the last two fences if async */
  size_t nargs, nresults;
  bool async;
  FILE *trace_file;
  uint8_t *stdin_data;
  /* The failure was the user's (bad --input, unknown function...): exit
   * 2, not 1. */
  bool usage_error;
} tool_session_t;

HALI_MUST_USE hali_status_t tool_session_open(const run_options_t *o,
                                              tool_session_t *s);
/* One call: invoke, await its fences (f$async), then every queue
 * submission it made; the results (nresults) are the caller's. */
HALI_MUST_USE hali_status_t tool_session_call(const run_options_t *o,
                                              tool_session_t *s,
                                              hali_variant_t *results);
void tool_session_close(tool_session_t *s, bool failed);
/* Closes |s| after a call that ended with |st| (consumed: reported on
 * stderr) and returns the exit code: |rc| when all went well, 2 after a
 * usage error, 1 after another failure, 128 + N after signal N. */
int tool_session_end(tool_session_t *s, hali_status_t st, int rc);
/* "@main(i32, !hal.buffer_view) -> (i32)" into |buf|. */
void tool_function_signature(const hali_function_t *fn, char *buf, size_t n);

/* Subcommands. */
int tool_run(int argc, char **argv);
int tool_benchmark(int argc, char **argv);
int tool_dump(int argc, char **argv);
/* Prints |s| (consumed) as "hali: error: ..." on stderr; returns 1. */
int tool_report(hali_status_t s);

/* Reads the first bytes of |data| and says what a file that is not a hali
 * module looks like ("an ELF file", "a .npy array"); NULL when it may be
 * a module (.hbc magic, or text). */
const char *tool_sniff_not_module(const uint8_t *data, size_t size);
/* NOT_FOUND / INVALID_ARGUMENT when |path| cannot be read or is plainly
 * not a hali module ("PATH: not a hali module (looks like an ELF
 * file)"); OK otherwise. */
HALI_MUST_USE hali_status_t tool_check_module_file(const char *path);

/* Installs SIGINT/SIGTERM handling for a run of |context|: the first
 * signal cancels its invocations (so that the run fails, the context is
 * released and a Chrome trace is completed); a second one ends the
 * process at once.  tool_signals_release restores the defaults and
 * returns the signal received (0 = none). */
void tool_signals_watch(hali_context_t *context);
int tool_signals_release(void);

#endif /* HALI_TOOLS_TOOLS_H */
