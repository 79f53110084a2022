/* hali — the command-line tool: asm, dis, verify, run, isa.  Like every
 * file of the tool, a client of the public API (hali/hali.h) only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"
#include "tools/tools.h"

static const char usage[] =
    "usage: hali <command> [flags]\n"
    "\n"
    "commands:\n"
    "  run MODULE... [--function=NAME] [--input=VALUE]...\n"
    "                        call a function (default @main) of .hasm or .hbc\n"
    "                        modules and print its results\n"
    "  benchmark MODULE... [--function=NAME] [--input=VALUE]...\n"
    "                        time repeated calls (--benchmark_format=json)\n"
    "  dump MODULE [--json]  name, functions and signatures, executables,\n"
    "                        rodata of a module\n"
    "  asm IN.hasm -o OUT.hbc [--strip]\n"
    "                        assemble text into a binary module\n"
    "  dis IN.hbc|IN.hasm [--no_locs] [--after=PASS|all] [--device=KIND]\n"
    "                        print a module as text that reassembles to it\n"
    "  verify IN.hbc|IN.hasm check a module without running it\n"
    "  isa                   print the instruction set reference (markdown)\n"
    "\n"
    "run inputs (one --input per parameter, in order; scalars are typed by\n"
    "the function's signature, or explicitly):\n"
    "  --input=42  --input=i32=42  --input=i64=-5  --input=f32=1.5\n"
    "  --input='2x3xf32=1 2 3 4 5 6'  --input='2x2xi32=[1 2][3 4]'\n"
    "  --input=@file.npy  --input=4xf32=@raw.bin\n"
    "  --function=NAME (default main; NAME$async: the tool adds the fences)\n"
    "\n"
    "hali COMMAND --help lists a command's flags; --help, --version.\n"
    "Flags take --flag=VALUE or --flag VALUE; quote values with blanks:\n"
    "  hali run m.hasm --input='4xf32=1 2 3 4'\n"
    "exit status: 0 success, 1 a failed run or mismatch, 2 a usage error\n";

int tool_report(hali_status_t s) {
  /* Printed piece by piece, so that a report needs no memory (the error
   * may be that there is none left). */
  fprintf(stderr, "hali: error: %s: %s\n",
          hali_status_code_name(hali_status_code(s)), hali_status_message(s));
  for (size_t i = 0; i < hali_status_annotation_count(s); ++i)
    fprintf(stderr, "  %s\n", hali_status_annotation(s, i));
  hali_status_free(s);
  return 1;
}

static hali_status_t oom(void) {
  return hali_status_oom();
}

/* Loads |path| as `hali run` would (passes, verifier). */
static hali_status_t load(const char *path, hali_instance_t **out_instance,
                          hali_module_t **out_module) {
  *out_module = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_instance_create(NULL, out_instance));
  return hali_module_load_file(*out_instance, path, out_module);
}

/* Assembles |in| into |*out_data|: the module as written, checked by
 * loading it and then loading the bytes back, the way `hali run` will. */
static hali_status_t assemble(const char *in, bool strip, void **out_data,
                              size_t *out_size) {
  hali_instance_t *instance = NULL;
  hali_module_t *m = NULL, *check = NULL;
  hali_status_t s = load(in, &instance, &m);
  if (!s) s = hali_module_write_binary(m, strip, out_data, out_size);
  if (!s) s = hali_module_load_bytes(instance, *out_data, *out_size, in, &check);
  hali_module_release(check);
  hali_module_release(m);
  hali_instance_release(instance);
  if (s) {
    hali_free(*out_data);
    *out_data = NULL;
  }
  return s;
}

typedef struct {
  const char *out;
  bool strip, json;
  hali_module_print_options_t po;
  const char *link_device; /* dis --device=KIND: also show variant choices */
} misc_options_t;

#define M ((misc_options_t *)opts)
static const char *flag_asm_out(void *opts, const char *v) {
  if (!*v) return "expected a file name (- for stdout)";
  M->out = v;
  return NULL;
}
static const char *flag_strip(void *opts, const char *v) {
  (void)v;
  M->strip = true;
  return NULL;
}
static const char *flag_no_locs(void *opts, const char *v) {
  (void)v;
  M->po.no_locs = true;
  return NULL;
}
static const char *flag_after(void *opts, const char *v) {
  M->po.after = v;
  return NULL;
}
static const char *flag_dis_passes(void *opts, const char *v) {
  M->po.passes = v;
  return NULL;
}
static const char *flag_dis_no_passes(void *opts, const char *v) {
  (void)v;
  M->po.no_passes = true;
  return NULL;
}
static const char *flag_dis_device(void *opts, const char *v) {
  hali_device_kind_t kind;
  hali_status_t s = hali_device_kind_parse(v, &kind);
  if (s) {
    hali_status_free(s);
    return "expected local-sync or local-task";
  }
  M->link_device = v;
  return NULL;
}
static const char *flag_json(void *opts, const char *v) {
  (void)v;
  M->json = true;
  return NULL;
}
#undef M

static const tool_flag_t asm_flags[] = {
    {"--output", NULL, 'o', "OUT.hbc", "the binary module (- for stdout)",
     flag_asm_out},
    {"--strip", NULL, 0, NULL,
     "leave out names and source lines (errors then show positions only)",
     flag_strip},
    {NULL, NULL, 0, NULL, NULL, NULL},
};
static const tool_flag_t dis_flags[] = {
    {"--no_locs", "--no-locs", 0, NULL,
     "leave out loc(...) annotations and the source string", flag_no_locs},
    {"--after", NULL, 0, "PASS|all",
     "print the IR after the load-time passes up to PASS (all: after "
     "each pass in turn)", flag_after},
    {"--passes", NULL, 0, "a,b", "run only these load-time passes",
     flag_dis_passes},
    {"--no_passes", "--no-passes", 0, NULL, "run no load-time pass",
     flag_dis_no_passes},
    {"--device", NULL, 0, "KIND",
     "also link on a KIND device and show, as comments, which variant of "
     "each executable with variants was chosen",
     flag_dis_device},
    {NULL, NULL, 0, NULL, NULL, NULL},
};
static const tool_flag_t dump_flags[] = {
    {"--json", NULL, 0, NULL, "one JSON object (hali_module_describe)",
     flag_json},
    {NULL, NULL, 0, NULL, NULL, NULL},
};
static const tool_flag_t no_flags[] = {{NULL, NULL, 0, NULL, NULL, NULL}};

static const tool_flag_t *const asm_tables[] = {asm_flags, NULL};
static const tool_flag_t *const dis_tables[] = {dis_flags, NULL};
static const tool_flag_t *const dump_tables[] = {dump_flags, NULL};
static const tool_flag_t *const no_tables[] = {no_flags, NULL};
static const tool_command_t asm_command = {
    "asm", "IN.hasm -o OUT.hbc [--strip]",
    "assemble text into a binary module (checked by loading it back)",
    asm_tables};
static const tool_command_t dis_command = {
    "dis", "IN.hbc|IN.hasm [--no_locs] [--after=PASS|all] [--device=KIND]",
    "print a module as text that reassembles to it", dis_tables};
static const tool_command_t verify_command = {
    "verify", "IN.hbc|IN.hasm",
    "check a module (load-time passes and verifier) without running it",
    no_tables};
static const tool_command_t dump_command = {
    "dump", "MODULE [--json]",
    "describe a module: name, format, functions and signatures (as written "
    "and after the passes), imports, executables, rodata",
    dump_tables};
static const tool_command_t isa_command = {
    "isa", "", "print the instruction set reference (markdown)", no_tables};

/* Parses |cmd|'s flags into |o| and takes exactly one positional
 * argument into |*in|; -1 to go on, else the exit code. */
static int parse_one(const tool_command_t *cmd, int argc, char **argv,
                     misc_options_t *o, const char **in) {
  char **args;
  size_t nargs;
  int rc = tool_flags_parse(cmd, argc, argv, o, &args, &nargs);
  if (rc >= 0) return rc;
  if (nargs != 1) {
    if (nargs > 1)
      fprintf(stderr, "hali %s: more than one input ('%s'); quote values "
                      "with blanks\n", cmd->name, args[1]);
    fprintf(stderr, "usage: hali %s %s\n", cmd->name, cmd->synopsis);
    return TOOL_EXIT_USAGE;
  }
  *in = args[0];
  return -1;
}

static int cmd_asm(int argc, char **argv) {
  misc_options_t o = {0};
  const char *in = NULL;
  int rc = parse_one(&asm_command, argc, argv, &o, &in);
  if (rc < 0 && !o.out) {
    fprintf(stderr, "usage: hali asm %s\n", asm_command.synopsis);
    rc = TOOL_EXIT_USAGE;
  }
  if (rc >= 0) return rc;
  const char *out = o.out;
  void *data = NULL;
  size_t size = 0;
  hali_status_t s = tool_check_module_file(in);
  if (!s) s = assemble(in, o.strip, &data, &size);
  if (s) return tool_report(s);
  FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb");
  if (!f) {
    hali_free(data);
    return tool_report(hali_status_make(HALI_STATUS_NOT_FOUND,
                                        "%s: cannot open for writing", out));
  }
  size_t n = fwrite(data, 1, size, f);
  hali_free(data);
  if ((f != stdout && fclose(f) != 0) || n != size)
    return tool_report(
        hali_status_make(HALI_STATUS_DATA_LOSS, "%s: write failed", out));
  return 0;
}

/* Collects the "[hal] executable @E on D: ..." lines of a link. */
static void dis_variant_line(void *user, const char *line) {
  FILE *out = user;
  if (strncmp(line, "[hal] executable @", 18) != 0) return;
  /* One comment line: a refusal's reason may span lines. */
  fputs("# ", out);
  for (const char *c = line + 6; *c; ++c) fputc(*c == '\n' ? ' ' : *c, out);
  fputc('\n', out);
}

/* dis --device=KIND: links the module on a KIND device (as `hali run`
 * would) and prints each variant choice as a comment, so the text still
 * reassembles. */
static hali_status_t dis_link(const char *in, const char *kind_name) {
  hali_instance_t *instance = NULL;
  hali_module_t *m = NULL;
  hali_device_t *device = NULL;
  hali_context_t *context = NULL;
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  hali_status_t s = hali_device_kind_parse(kind_name, &dp.kind);
  if (!s) s = load(in, &instance, &m);
  if (!s) s = hali_device_create(instance, &dp, &device);
  printf("\n# linked on %s:\n", kind_name);
  fflush(stdout);
  if (!s) {
    hali_context_params_t cp;
    hali_context_params_initialize(&cp);
    cp.trace_bits = HALI_TRACE_BITS_HAL;
    cp.trace_callback = dis_variant_line;
    cp.trace_user = stdout;
    s = hali_context_create(instance, device, &m, 1, &cp, &context);
  }
  hali_context_release(context);
  hali_device_release(device);
  hali_module_release(m);
  hali_instance_release(instance);
  return s;
}

static int cmd_dis(int argc, char **argv) {
  misc_options_t o = {0};
  const char *in = NULL;
  int rc = parse_one(&dis_command, argc, argv, &o, &in);
  if (rc >= 0) return rc;
  hali_status_t s = tool_check_module_file(in);
  char *text = NULL;
  if (!s) s = hali_module_print_file(in, &o.po, &text);
  if (s) return tool_report(s);
  fputs(text, stdout);
  hali_free(text);
  if (o.link_device) {
    s = dis_link(in, o.link_device);
    if (s) return tool_report(s);
  }
  return 0;
}

static int cmd_verify(int argc, char **argv) {
  misc_options_t o = {0};
  const char *in = NULL;
  int rc = parse_one(&verify_command, argc, argv, &o, &in);
  if (rc >= 0) return rc;
  hali_instance_t *instance = NULL;
  hali_module_t *m = NULL;
  hali_status_t s = tool_check_module_file(in);
  if (!s) s = load(in, &instance, &m);
  size_t n = hali_module_function_count(m);
  bool *generated = NULL;
  if (!s && n) {
    generated = calloc(n, sizeof(*generated));
    if (!generated) s = oom();
  }
  if (!s) s = hali_module_generated_functions(m, generated, n);
  if (!s) {
    /* What was checked: the functions as written, and those the passes
     * added (verified as well). */
    size_t added = 0;
    for (size_t i = 0; i < n; ++i) added += generated[i];
    if (!added) {
      printf("%s: ok (%zu function%s)\n", in, n, n == 1 ? "" : "s");
    } else {
      printf("%s: ok (%zu function%s written; the load-time passes added "
             "%zu:",
             in, n - added, n - added == 1 ? "" : "s", added);
      for (size_t i = 0; i < n; ++i)
        if (generated[i]) printf(" @%s", hali_module_function_name(m, i));
      printf(")\n");
    }
  }
  free(generated);
  hali_module_release(m);
  hali_instance_release(instance);
  return s ? tool_report(s) : 0;
}

int tool_dump(int argc, char **argv) {
  misc_options_t o = {0};
  const char *in = NULL;
  int rc = parse_one(&dump_command, argc, argv, &o, &in);
  if (rc >= 0) return rc;
  hali_instance_t *instance = NULL;
  hali_module_t *m = NULL;
  char *text = NULL;
  hali_status_t s = tool_check_module_file(in);
  if (!s) s = load(in, &instance, &m);
  if (!s)
    s = hali_module_describe(m, o.json ? HALI_DESCRIBE_JSON : HALI_DESCRIBE_TEXT,
                             &text);
  if (!s) fputs(text, stdout);
  hali_free(text);
  hali_module_release(m);
  hali_instance_release(instance);
  return s ? tool_report(s) : 0;
}

static int cmd_isa(int argc, char **argv) {
  misc_options_t o = {0};
  char **args;
  size_t nargs;
  int rc = tool_flags_parse(&isa_command, argc, argv, &o, &args, &nargs);
  if (rc >= 0) return rc;
  if (nargs) {
    fprintf(stderr, "usage: hali isa (no arguments)\n");
    return TOOL_EXIT_USAGE;
  }
  char *md = hali_instruction_set_markdown();
  if (!md) return tool_report(oom());
  fputs(md, stdout);
  hali_free(md);
  return 0;
}

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
} command_t;

static const command_t commands[] = {
    {"run", tool_run},       {"benchmark", tool_benchmark},
    {"dump", tool_dump},     {"asm", cmd_asm},
    {"dis", cmd_dis},        {"verify", cmd_verify},
    {"isa", cmd_isa},
};

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return TOOL_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    /* "hali help run" is "hali run --help". */
    if (argc > 2 && strcmp(cmd, "help") == 0) {
      char help[] = "--help";
      char *help_argv[] = {argv[2], help, NULL};
      for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); ++i)
        if (strcmp(argv[2], commands[i].name) == 0)
          return commands[i].fn(2, help_argv);
      fprintf(stderr, "hali: unknown command '%s' (try hali --help)\n",
              argv[2]);
      return TOOL_EXIT_USAGE;
    }
    fputs(usage, stdout);
    return TOOL_EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("hali %s\n", HALI_VERSION_STRING);
    return TOOL_EXIT_OK;
  }
  const char *best = NULL;
  unsigned best_d = 255;
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); ++i) {
    if (strcmp(cmd, commands[i].name) == 0)
      return commands[i].fn(argc - 1, argv + 1);
    unsigned d = tool_edit_distance(cmd, strlen(cmd), commands[i].name);
    if (d < best_d) {
      best_d = d;
      best = commands[i].name;
    }
  }
  if (cmd[0] == '-')
    fprintf(stderr, "hali: '%s' before the command: flags go after it "
                    "(hali COMMAND %s ...)\n", cmd, cmd);
  else if (best && best_d <= 2)
    fprintf(stderr, "hali: unknown command '%s'; did you mean %s? (try hali "
                    "--help)\n", cmd, best);
  else
    fprintf(stderr, "hali: unknown command '%s' (try hali --help)\n", cmd);
  return TOOL_EXIT_USAGE;
}
