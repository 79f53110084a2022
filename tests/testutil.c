/* hali — helpers shared by the Check suites. */
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

hali_status_t hali_test_try_module(const char *text, hali_vm_module_t **out) {
  if (out) *out = NULL;
  hali_ir_module_t *ir = NULL;
  hali_status_t s = hali_load_bytes((const uint8_t *)text, strlen(text),
                                    "test.hasm", &ir);
  if (s) return s;
  hali_vm_module_t *m = NULL;
  s = hali_vm_module_create(ir, &m);
  if (s) return s;
  if (out) *out = m;
  else hali_vm_module_release(m);
  return HALI_OK;
}

hali_vm_module_t *hali_test_module(const char *text) {
  hali_vm_module_t *m = NULL;
  hali_status_t s = hali_test_try_module(text, &m);
  if (s) {
    char *msg = hali_status_to_string(s);
    hali_status_free(s);
    ck_abort_msg("module failed to load: %s", msg);
  }
  return m;
}

hali_status_t hali_test_call(const char *text, const char *fn,
                             const hali_value_t *args, size_t nargs,
                             hali_value_t *results, size_t nresults) {
  hali_vm_module_t *m = NULL;
  hali_status_t s = hali_test_try_module(text, &m);
  if (s) return s;
  const hali_vm_func_t *f = hali_vm_module_lookup(m, fn);
  if (!f) {
    hali_vm_module_release(m);
    return hali_status_make(HALI_STATUS_NOT_FOUND, "no @%s", fn);
  }
  hali_vm_stack_t *st = NULL;
  s = hali_vm_stack_create(0, &st);
  if (!s) s = hali_vm_invoke(st, m, f, args, nargs, results, nresults);
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
  return s;
}

void hali_test_assert_status(hali_status_t s, hali_status_code_t code,
                             const char *needle, const char *file, int line) {
  char *text = hali_status_to_string(s);
  hali_status_code_t have = hali_status_code(s);
  hali_status_free(s);
  if (have != code) {
    ck_abort_msg("%s:%d: expected %s, got %s (%s)", file, line,
                 hali_status_code_name(code), hali_status_code_name(have),
                 text ? text : "");
  }
  if (needle && (!text || !strstr(text, needle))) {
    ck_abort_msg("%s:%d: error text does not contain \"%s\": %s", file, line,
                 needle, text ? text : "");
  }
  free(text);
}

void hali_test_assert_ok(hali_status_t s, const char *file, int line) {
  if (!s) return;
  char *text = hali_status_to_string(s);
  hali_status_free(s);
  ck_abort_msg("%s:%d: expected OK, got %s", file, line, text ? text : "");
}

static char *slurp(FILE *f) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 2) {
      cap *= 2;
      char *g = realloc(buf, cap);
      if (!g) {
        free(buf);
        return NULL;
      }
      buf = g;
    }
  }
  if (buf) buf[len] = 0;
  return buf;
}

int hali_test_shell(const char *cmd, char **out_stdout, char **out_stderr) {
  char errpath[] = "/tmp/hali-test-stderr-XXXXXX";
  int fd = mkstemp(errpath);
  ck_assert_int_ge(fd, 0);
  close(fd);
  size_t len = strlen(cmd) + strlen(errpath) + 16;
  char *full = malloc(len);
  snprintf(full, len, "%s 2>%s", cmd, errpath);
  FILE *p = popen(full, "r");
  free(full);
  ck_assert_ptr_nonnull(p);
  char *out = slurp(p);
  int status = pclose(p);
  FILE *e = fopen(errpath, "r");
  char *err = e ? slurp(e) : NULL;
  if (e) fclose(e);
  unlink(errpath);
  if (out_stdout) *out_stdout = out;
  else free(out);
  if (out_stderr) *out_stderr = err;
  else free(err);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int hali_test_main(Suite *suite) {
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
