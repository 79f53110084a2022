/* hali — the HAL op tests (tests/check_hal_ops.c), compiled into the
 * check_ops program so that its coverage case sees the HAL ops too. */
#ifndef HALI_TESTS_HAL_OPS_SUITE_H
#define HALI_TESTS_HAL_OPS_SUITE_H

#include "tests/testutil.h"

/* Defined by tests/check_ops.c: records the ops |m| was encoded into. */
void check_ops_note_module(const hali_vm_module_t *m);

/* Defined by tests/check_hal_ops.c: adds the HAL test cases to |s|. */
void check_hal_ops_add_tcases(Suite *s);

/* Defined by tests/check_calls.c: imports, fiber.spawn, fence offsets. */
void check_calls_add_tcases(Suite *s);

#endif /* HALI_TESTS_HAL_OPS_SUITE_H */
