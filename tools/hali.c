/* hali — the command-line tool: asm, dis, verify, run, isa.  Like every
 * file of the tool, a client of the public API (hali/hali.h) only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"
#include "tools/tools.h"

static const char usage[] =
    "usage: hali <command> [options]\n"
    "\n"
    "commands:\n"
    "  run MODULE [--function=NAME] [--input=VALUE]...\n"
    "                        run a function (default @main) of a .hasm or\n"
    "                        .hbc module and print its results\n"
    "  asm IN.hasm -o OUT.hbc [--strip]\n"
    "                        assemble text into a binary module (--strip\n"
    "                        leaves out names and source lines)\n"
    "  dis IN.hbc|IN.hasm [--no-locs]\n"
    "                        print a module as text that reassembles to it\n"
    "  verify IN.hbc|IN.hasm check a module without running it\n"
    "  isa                   print the instruction set reference (markdown)\n"
    "\n"
    "  --help, --version\n"
    "\n"
    "run inputs (one --input per parameter, in order):\n"
    "  --input=42  --input=i32=42  --input=i64=-5  --input=f32=1.5\n"
    "  --input=f64=2.25\n"
    "  --input='2x3xf32=1 2 3 4 5 6'  --input='2x2xi32=[1 2][3 4]'\n"
    "  --input=@file.npy  --input=4xf32=@raw.bin\n"
    "run options:\n"
    "  --output=-|@FILE.npy|@FILE.bin   where result i goes (one per result)\n"
    "  --expected_output=VALUE          compare result i (same syntax as input)\n"
    "  --expected_f32_threshold=T  --expected_f64_threshold=T  (default 0.0001)\n"
    "  --print_max_elements=N           elide printed tensors after N (1024)\n"
    "  --device=local-sync|local-task   --workers=N (local-task threads)\n"
    "  --executable-path=DIR            where kernel libraries are looked up\n"
    "                                   (also $HALI_EXECUTABLE_PATH)\n"
    "  --max-depth=N                    call depth limit (default 4096)\n"
    "  --fiber-threads=N                threads running fibers (default 1)\n"
    "  --parameters=[SCOPE=]FILE        weights for `parameter \"SCOPE\"::\"KEY\"`\n"
    "                                   globals: a .safetensors or .npy file\n"
    "                                   (repeatable; no SCOPE: the scope \"\")\n"
    "passes (run, dis):\n"
    "  --passes=a,b                     run only these load-time passes\n"
    "  --no-passes                      run none (tensor-level modules then\n"
    "                                   fail verification)\n"
    "tracing (run; doc/tracing.md):\n"
    "  --trace=vm|hal|all               every instruction / HAL operation\n"
    "  --trace-format=text|chrome       chrome: trace-event JSON (Perfetto)\n"
    "  --trace-filter=GLOB              instruction lines of matching functions\n"
    "  --trace-out=FILE                 instead of stderr\n"
    "  --trace-values=N                 tensor elements shown (default 8)\n";

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

static int cmd_asm(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  bool strip = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) out = argv[++i];
    else if (strncmp(argv[i], "-o", 2) == 0 && argv[i][2]) out = argv[i] + 2;
    else if (strcmp(argv[i], "--strip") == 0) strip = true;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "hali asm: unknown option '%s'\n", argv[i]);
      return 2;
    } else if (!in) in = argv[i];
    else {
      fprintf(stderr, "hali asm: more than one input ('%s')\n", argv[i]);
      return 2;
    }
  }
  if (!in || !out) {
    fprintf(stderr, "usage: hali asm IN.hasm -o OUT.hbc [--strip]\n");
    return 2;
  }
  void *data = NULL;
  size_t size = 0;
  hali_status_t s = assemble(in, strip, &data, &size);
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

static int cmd_dis(int argc, char **argv) {
  const char *in = NULL;
  hali_module_print_options_t po = {0};
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--no-locs") == 0) po.no_locs = true;
    else if (strncmp(argv[i], "--after=", 8) == 0) po.after = argv[i] + 8;
    else if (strncmp(argv[i], "--passes=", 9) == 0) po.passes = argv[i] + 9;
    else if (strcmp(argv[i], "--no-passes") == 0) po.no_passes = true;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "hali dis: unknown option '%s'\n", argv[i]);
      return 2;
    } else in = argv[i];
  }
  if (!in) {
    fprintf(stderr, "usage: hali dis IN.hbc|IN.hasm [--no-locs] "
                    "[--after=PASS|all] [--passes=a,b] [--no-passes]\n");
    return 2;
  }
  char *text = NULL;
  hali_status_t s = hali_module_print_file(in, &po, &text);
  if (s) return tool_report(s);
  fputs(text, stdout);
  hali_free(text);
  return 0;
}

static int cmd_verify(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: hali verify IN.hbc|IN.hasm\n");
    return 2;
  }
  hali_instance_t *instance = NULL;
  hali_module_t *m = NULL;
  hali_status_t s = load(argv[1], &instance, &m);
  if (!s) {
    size_t n = hali_module_function_count(m);
    printf("%s: ok (%zu function%s)\n", argv[1], n, n == 1 ? "" : "s");
  }
  hali_module_release(m);
  hali_instance_release(instance);
  return s ? tool_report(s) : 0;
}

static int cmd_isa(void) {
  char *md = hali_instruction_set_markdown();
  if (!md) return tool_report(oom());
  fputs(md, stdout);
  hali_free(md);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("hali %s\n", HALI_VERSION_STRING);
    return 0;
  }
  for (int i = 2; i < argc; ++i)
    if (strcmp(argv[i], "--help") == 0) {
      fputs(usage, stdout);
      return 0;
    }
  if (strcmp(cmd, "run") == 0) return tool_run(argc - 1, argv + 1);
  if (strcmp(cmd, "asm") == 0) return cmd_asm(argc - 1, argv + 1);
  if (strcmp(cmd, "dis") == 0) return cmd_dis(argc - 1, argv + 1);
  if (strcmp(cmd, "verify") == 0) return cmd_verify(argc - 1, argv + 1);
  if (strcmp(cmd, "isa") == 0) return cmd_isa();
  fprintf(stderr, "hali: unknown command '%s' (try hali --help)\n", cmd);
  return 2;
}
