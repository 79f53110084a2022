/* Helpers shared by the HAL test suites. */
#ifndef HALI_TESTS_HAL_TESTUTIL_H
#define HALI_TESTS_HAL_TESTUTIL_H

#include <check.h>

#include "hal/hal.h"

/* Fails the test with the status text unless |expr| is OK. */
#define HALI_CK_OK(expr)                                                       \
  hali_test_check_ok((expr), #expr, __FILE__, __LINE__)

/* Checks that |expr| failed with |code| and that its full text (message and
 * annotations) contains every following string; frees the status. */
#define HALI_CK_STATUS(expr, code, ...)                                        \
  hali_test_check_status((expr), (code), #expr, __FILE__, __LINE__,            \
                         (const char *const[]){__VA_ARGS__, NULL})

void hali_test_check_ok(hali_status_t status, const char *expr,
                        const char *file, int line);
void hali_test_check_status(hali_status_t status, hali_status_code_t code,
                            const char *expr, const char *file, int line,
                            const char *const *needles);

/* Buffer parameters used by most tests: host-visible, every usage. */
hali_hal_buffer_params_t hali_test_host_params(void);
/* Allocates |size| bytes with hali_test_host_params from |allocator|. */
hali_hal_buffer_t *hali_test_allocate(hali_hal_allocator_t *allocator,
                                      hali_hal_device_size_t size);
/* Reads the byte at |offset|. */
uint8_t hali_test_byte(hali_hal_buffer_t *buffer, hali_hal_device_size_t offset);
/* Nanoseconds on the monotonic clock. */
int64_t hali_test_now_ns(void);
/* Sleeps |ms| milliseconds. */
void hali_test_sleep_ms(int ms);

#endif /* HALI_TESTS_HAL_TESTUTIL_H */
