/* hali — helpers shared by the Check suites. */
#ifndef HALI_TESTS_TESTUTIL_H
#define HALI_TESTS_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hali/base.h"
#include "loader/loader.h"
#include "vm/vm.h"

/* Assembles + verifies + encodes |text|; fails the test on error. */
hali_vm_module_t *hali_test_module(const char *text);

/* Assembles, verifies and encodes |text|; returns the status (NULL on
 * success) and the module in |*out| (may be NULL to discard it). */
hali_status_t hali_test_try_module(const char *text, hali_vm_module_t **out);

/* Runs @|fn| of |text| with |args|; results in |results|. */
hali_status_t hali_test_call(const char *text, const char *fn,
                             const hali_value_t *args, size_t nargs,
                             hali_value_t *results, size_t nresults);

/* Asserts |s| is an error with |code| whose full text (message and
 * annotations) contains |needle|; frees |s|. */
#define ck_assert_status(s, code, needle)                                      \
  hali_test_assert_status((s), (code), (needle), __FILE__, __LINE__)
void hali_test_assert_status(hali_status_t s, hali_status_code_t code,
                             const char *needle, const char *file, int line);
/* Asserts |s| is OK, printing it otherwise. */
#define ck_assert_ok(s) hali_test_assert_ok((s), __FILE__, __LINE__)
void hali_test_assert_ok(hali_status_t s, const char *file, int line);

/* Runs a shell command, capturing stdout and stderr (malloc'ed) and the
 * exit status. */
int hali_test_shell(const char *cmd, char **out_stdout, char **out_stderr);

/* Path of the built hali tool and of the source tree. */
#define HALI_TOOL HALI_BUILDDIR "/tools/hali"

/* Runs |suite| with CK_NORMAL output and returns the exit status. */
int hali_test_main(Suite *suite);

#endif /* HALI_TESTS_TESTUTIL_H */
