/* Plain C functions that tests/check_api.c binds to module imports through
 * libffi (hali_instance_register_ffi_library): one per scalar type. */
#include <stdint.h>

int32_t imp_add3(int32_t a, int32_t b, int32_t c);
int64_t imp_mul64(int64_t a, int64_t b);
double imp_mix(double a, float b);
float imp_half(float x);
void imp_bump(int32_t by);
int32_t imp_counter(void);

int32_t imp_add3(int32_t a, int32_t b, int32_t c) { return a + b + c; }
int64_t imp_mul64(int64_t a, int64_t b) { return a * b; }
double imp_mix(double a, float b) { return a * 2.0 + (double)b; }
float imp_half(float x) { return x / 2.0f; }

static int32_t counter;
void imp_bump(int32_t by) { counter += by; }
int32_t imp_counter(void) { return counter; }
