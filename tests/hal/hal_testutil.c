/* Helpers shared by the HAL test suites. */
#include "tests/hal/hal_testutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void hali_test_check_ok(hali_status_t status, const char *expr,
                        const char *file, int line) {
  if (!status) return;
  char *text = hali_status_to_string(status);
  hali_status_free(status);
  ck_abort_msg("%s:%d: %s failed: %s", file, line, expr, text);
  free(text);
}

void hali_test_check_status(hali_status_t status, hali_status_code_t code,
                            const char *expr, const char *file, int line,
                            const char *const *needles) {
  ck_assert_msg(status != NULL, "%s:%d: %s succeeded; expected %s", file, line,
                expr, hali_status_code_name(code));
  char *text = hali_status_to_string(status);
  hali_status_code_t actual = hali_status_code(status);
  hali_status_free(status);
  ck_assert_msg(actual == code, "%s:%d: %s: expected %s, got %s", file, line,
                expr, hali_status_code_name(code), text);
  for (const char *const *n = needles; *n; ++n)
    ck_assert_msg(strstr(text, *n) != NULL,
                  "%s:%d: %s: message lacks \"%s\": %s", file, line, expr, *n,
                  text);
  free(text);
}

hali_hal_buffer_params_t hali_test_host_params(void) {
  hali_hal_buffer_params_t params = {
      .memory_types = HALI_HAL_MEMORY_TYPE_HOST_VISIBLE |
                      HALI_HAL_MEMORY_TYPE_HOST_COHERENT |
                      HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      .usage = HALI_HAL_BUFFER_USAGE_ALL,
  };
  return params;
}

hali_hal_buffer_t *hali_test_allocate(hali_hal_allocator_t *allocator,
                                      hali_hal_device_size_t size) {
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(hali_hal_allocator_allocate_buffer(
      allocator, hali_test_host_params(), size, &buffer));
  return buffer;
}

uint8_t hali_test_byte(hali_hal_buffer_t *buffer,
                       hali_hal_device_size_t offset) {
  uint8_t b = 0;
  HALI_CK_OK(hali_hal_buffer_read(buffer, offset, &b, 1));
  return b;
}

int64_t hali_test_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void hali_test_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}
