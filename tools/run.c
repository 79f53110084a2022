/* hali run: load a module, parse --input values, invoke, print results. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loader.h"
#include "tools/tools.h"
#include "vm/vm.h"

static int report(hali_status_t s) {
  char *text = hali_status_to_string(s);
  fprintf(stderr, "hali: error: %s\n", text ? text : "(out of memory)");
  free(text);
  hali_status_free(s);
  return 1;
}

/* Parses one scalar --input: "42" (i32) or "TYPE=VALUE". */
static hali_status_t parse_scalar(const char *text, int index,
                                  hali_value_t *out) {
  const char *eq = strchr(text, '=');
  hali_type_t type = HALI_TYPE_I32;
  const char *v = text;
  if (eq) {
    type = hali_type_parse(text, (size_t)(eq - text));
    if (type == HALI_TYPE_NONE || hali_type_is_ref(type))
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "--input #%d '%s': unknown type '%.*s' (expected "
                              "i32, i64, f32 or f64)",
                              index, text, (int)(eq - text), text);
    v = eq + 1;
  }
  char *end;
  errno = 0;
  out->type = type;
  switch (type) {
  case HALI_TYPE_I32: {
    long long x = strtoll(v, &end, 0);
    if (*v == 0 || *end || errno || x < INT32_MIN || x > UINT32_MAX)
      goto bad;
    out->i32 = (int32_t)(uint32_t)x;
    break;
  }
  case HALI_TYPE_I64: {
    long long x = strtoll(v, &end, 0);
    if (*v == 0 || *end || errno) goto bad;
    out->i64 = x;
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
                          "--input #%d '%s': '%s' is not a valid %s", index,
                          text, v, hali_type_name(type));
}

/* Shortest text that reads back as the same float. */
static void print_float(double v, bool single) {
  char buf[64];
  if (isnan(v)) {
    printf("%snan", signbit(v) ? "-" : "");
    return;
  }
  if (isinf(v)) {
    printf("%sinf", v < 0 ? "-" : "");
    return;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
  }
  fputs(buf, stdout);
}

int hali_tool_run(int argc, char **argv) {
  const char *path = NULL, *function = "main";
  uint32_t max_depth = 0;
  hali_value_t *args = calloc((size_t)argc, sizeof(hali_value_t));
  size_t nargs = 0;
  int rc = 2;
  if (!args) return report(hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom"));
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strncmp(a, "--function=", 11) == 0) {
      function = a + 11;
      if (*function == '@') function++;
    } else if (strncmp(a, "--input=", 8) == 0) {
      hali_status_t s = parse_scalar(a + 8, (int)nargs, &args[nargs]);
      if (s) {
        rc = report(s);
        goto done;
      }
      nargs++;
    } else if (strncmp(a, "--max-depth=", 12) == 0) {
      max_depth = (uint32_t)strtoul(a + 12, NULL, 10);
    } else if (a[0] == '-') {
      fprintf(stderr, "hali run: unknown option '%s'\n", a);
      goto done;
    } else if (!path) {
      path = a;
    } else {
      fprintf(stderr, "hali run: more than one module ('%s')\n", a);
      goto done;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: hali run MODULE [--function=NAME] [--input=...]\n");
    goto done;
  }
  hali_ir_module_t *ir;
  hali_status_t s = hali_load_file(path, &ir);
  if (s) {
    rc = report(s);
    goto done;
  }
  hali_vm_module_t *m;
  s = hali_vm_module_create(ir, &m);
  if (s) {
    rc = report(s);
    goto done;
  }
  const hali_vm_func_t *fn = hali_vm_module_lookup(m, function);
  hali_vm_stack_t *st = NULL;
  hali_value_t *results = NULL;
  if (!fn) {
    s = hali_status_make(HALI_STATUS_NOT_FOUND,
                         "%s: no function @%s in module @%s", path, function,
                         m->ir->name);
  } else {
    results = calloc(fn->ir->result_count + 1, sizeof(hali_value_t));
    s = hali_vm_stack_create(max_depth, &st);
    if (!s)
      s = hali_vm_invoke(st, m, fn, args, nargs, results,
                         fn->ir->result_count);
  }
  if (s) {
    rc = report(s);
  } else {
    for (uint32_t i = 0; i < fn->ir->result_count; ++i) {
      hali_value_t *v = &results[i];
      printf("result[%u]: %s=", i, hali_type_name(v->type));
      switch (v->type) {
      case HALI_TYPE_I32: printf("%d", v->i32); break;
      case HALI_TYPE_I64: printf("%lld", (long long)v->i64); break;
      case HALI_TYPE_F32: print_float(v->f32, true); break;
      case HALI_TYPE_F64: print_float(v->f64, false); break;
      default: printf("<ref>"); break;
      }
      putchar('\n');
      hali_value_release(v);
    }
    rc = 0;
  }
  free(results);
  hali_vm_stack_free(st);
  hali_vm_module_free(m);
done:
  free(args);
  return rc;
}
