/* hali — the command-line tool: asm, dis, verify, run, isa. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"
#include "loader/loader.h"
#include "passes/pipeline.h"
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

int hali_tool_report(hali_status_t s) {
  char *text = hali_status_to_string(s);
  fprintf(stderr, "hali: error: %s\n", text ? text : "(out of memory)");
  free(text);
  hali_status_free(s);
  return 1;
}

static int cmd_asm(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  hali_hbc_write_options_t opts = {0};
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) out = argv[++i];
    else if (strncmp(argv[i], "-o", 2) == 0 && argv[i][2]) out = argv[i] + 2;
    else if (strcmp(argv[i], "--strip") == 0) opts.strip = true;
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
  /* The binary holds the module as written (the loader lowers it when it
   * is loaded); it is checked here by loading it the way `hali run` will. */
  uint8_t *text;
  size_t text_size;
  hali_status_t s = hali_read_file(in, &text, &text_size);
  if (s) return hali_tool_report(s);
  hali_ir_module_t *m;
  s = hali_read_module(text, text_size, in, &m);
  free(text);
  if (s) return hali_tool_report(s);
  uint8_t *data;
  size_t size;
  s = hali_hbc_write(m, &opts, &data, &size);
  hali_ir_module_free(m);
  if (s) return hali_tool_report(s);
  hali_ir_module_t *check;
  s = hali_load_bytes(data, size, in, &check);
  hali_ir_module_free(check);
  if (s) {
    free(data);
    return hali_tool_report(s);
  }
  FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb");
  if (!f) {
    free(data);
    return hali_tool_report(hali_status_make(HALI_STATUS_NOT_FOUND,
                                   "%s: cannot open for writing", out));
  }
  size_t n = fwrite(data, 1, size, f);
  free(data);
  if ((f != stdout && fclose(f) != 0) || n != size)
    return hali_tool_report(
        hali_status_make(HALI_STATUS_DATA_LOSS, "%s: write failed", out));
  return 0;
}

static int cmd_dis(int argc, char **argv) {
  const char *in = NULL;
  bool locs = true;
  hali_pass_options_t po = {0};
  bool after = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--no-locs") == 0) locs = false;
    else if (strncmp(argv[i], "--after=", 8) == 0) {
      po.after = argv[i] + 8;
      after = true;
    } else if (strncmp(argv[i], "--passes=", 9) == 0) {
      po.only = argv[i] + 9;
      after = true;
    } else if (strcmp(argv[i], "--no-passes") == 0) {
      po.none = true;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "hali dis: unknown option '%s'\n", argv[i]);
      return 2;
    } else in = argv[i];
  }
  if (!in) {
    fprintf(stderr, "usage: hali dis IN.hbc|IN.hasm [--no-locs] "
                    "[--after=PASS|all] [--passes=a,b] [--no-passes]\n");
    return 2;
  }
  hali_status_t s = hali_pass_options_check(&po);
  if (s) return hali_tool_report(s);
  hali_ir_module_t *m;
  if (after) {
    /* After some passes the IR may not be runnable yet: verify only when
     * the whole pipeline ran. */
    bool all = !po.only && (!po.after || strcmp(po.after, "all") == 0);
    hali_load_options_t lo = {&po, !all};
    s = hali_load_file_ex(in, &lo, &m);
  } else {
    /* As written; but only a module that loads is printed. */
    uint8_t *data;
    size_t size;
    s = hali_read_file(in, &data, &size);
    if (!s) {
      hali_load_options_t lo = {&po, po.none};
      s = hali_load_bytes_ex(data, size, in, &lo, &m);
      hali_ir_module_free(s ? NULL : m);
      if (!s) s = hali_read_module(data, size, in, &m);
      free(data);
    }
  }
  if (s) return hali_tool_report(s);
  char *text = hali_ir_print_ex(m, locs, after);
  hali_ir_module_free(m);
  if (!text)
    return hali_tool_report(hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom"));
  fputs(text, stdout);
  free(text);
  return 0;
}

static int cmd_verify(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: hali verify IN.hbc|IN.hasm\n");
    return 2;
  }
  hali_ir_module_t *m;
  hali_status_t s = hali_load_file(argv[1], &m);
  if (s) return hali_tool_report(s);
  printf("%s: ok (%u function%s)\n", argv[1], m->func_count,
         m->func_count == 1 ? "" : "s");
  hali_ir_module_free(m);
  return 0;
}

static int cmd_isa(void) {
  char *md = hali_isa_markdown();
  if (!md) return hali_tool_report(hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom"));
  fputs(md, stdout);
  free(md);
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
  if (strcmp(cmd, "run") == 0) return hali_tool_run(argc - 1, argv + 1);
  if (strcmp(cmd, "asm") == 0) return cmd_asm(argc - 1, argv + 1);
  if (strcmp(cmd, "dis") == 0) return cmd_dis(argc - 1, argv + 1);
  if (strcmp(cmd, "verify") == 0) return cmd_verify(argc - 1, argv + 1);
  if (strcmp(cmd, "isa") == 0) return cmd_isa();
  fprintf(stderr, "hali: unknown command '%s' (try hali --help)\n", cmd);
  return 2;
}
