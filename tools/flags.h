/* hali — command-line flags: one table entry (name, aliases, value, help,
 * handler) per flag, parsed with getopt_long, so that every command
 * accepts `--flag=value` and `--flag value`, unique prefixes, `--` to end
 * the options and -h/--help anywhere, and an unknown flag is answered
 * with the nearest known one.  --flagfile=FILE is expanded before
 * parsing (one argument per line).
 *
 * Exit codes (doc/hali.1): 0 success, 1 a failed run or mismatch, 2 a
 * usage error. */
#ifndef HALI_TOOLS_FLAGS_H
#define HALI_TOOLS_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOOL_EXIT_OK 0
#define TOOL_EXIT_FAILURE 1
#define TOOL_EXIT_USAGE 2

/* A flag's handler: |value| is NULL for a flag without a value.  Returns
 * NULL when accepted, else a message (static or from tool_flag_error)
 * saying what was expected; the parser prints it after the command and
 * flag, and exits 2. */
typedef const char *(*tool_flag_handler_t)(void *options, const char *value);

typedef struct tool_flag_s {
  const char *name;    /* "--function" (snake_case, as IREE spells it) */
  const char *aliases; /* NULL, or "--trace-out" (space-separated) */
  char short_name;     /* 'o', or 0 */
  const char *metavar; /* "NAME"; NULL for a flag without a value */
  const char *help;
  tool_flag_handler_t handle;
} tool_flag_t;

/* A command's flags: NULL-terminated list of tables (shared groups). */
typedef struct tool_command_s {
  const char *name;    /* "run" */
  const char *synopsis; /* "MODULE [--function=NAME] [--input=VALUE]..." */
  const char *summary;  /* one line */
  const tool_flag_t *const *tables; /* each ends with a {NULL} entry */
} tool_command_t;

/* What a handler returns when it ran out of memory: the parser reports
 * RESOURCE_EXHAUSTED and exits 1. */
extern const char tool_flag_oom[];

/* Formats a handler's message into a static buffer. */
const char *tool_flag_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Parses argv[1..argc) of |cmd| (argv[0] is the command's name): every
 * flag goes to its handler with |options|; the rest (positional
 * arguments, in order) are stored in |*out_args| / |*out_nargs| (owned by
 * the parser's storage; valid until tool_flags_free).  Returns -1 when
 * the command should go on, or the exit code to stop with (0 after
 * printing --help, 2 after a usage error). */
int tool_flags_parse(const tool_command_t *cmd, int argc, char **argv,
                     void *options, char ***out_args, size_t *out_nargs);

/* Prints |cmd|'s help (every flag, with aliases) to stdout. */
void tool_flags_help(const tool_command_t *cmd);

/* Releases what parsing allocated (expanded flag files, argument
 * vectors). */
void tool_flags_free(void);

/* Value parsers for handlers: NULL on success, else a message. */
const char *tool_parse_u64(const char *v, uint64_t min, uint64_t max,
                           uint64_t *out);
/* Bytes with an optional K/M/G/T suffix (powers of 1024; "KiB", "k", "kb"
 * also accepted). */
const char *tool_parse_bytes(const char *v, uint64_t *out);
/* A duration: a number with a unit (ns, us, ms, s, m, h); a bare number
 * is seconds.  |*out_ns| in nanoseconds. */
const char *tool_parse_duration(const char *v, int64_t *out_ns);

/* The Levenshtein distance between |a| (|na| bytes) and |b|, capped at
 * 255: the unknown-flag suggestion uses it. */
unsigned tool_edit_distance(const char *a, size_t na, const char *b);

#endif /* HALI_TOOLS_FLAGS_H */
