/* hali — number text shared by every part (base layer): integer literals,
 * the shortest float printer, f16 and bf16 conversions. */
#ifndef HALI_BASE_NUMBER_H
#define HALI_BASE_NUMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Integer literals everywhere in hali (assembler, --input values, tensor
 * elements): decimal, or hexadecimal after 0x; never octal, so 010 is
 * ten.  hali_parse_digits reads an unsigned magnitude like strtoull (sets
 * errno on overflow, |*end| after the digits).  hali_parse_integer reads a
 * whole string with an optional sign; false if anything is left over, it
 * has no digits, or the magnitude overflows 64 bits. */
unsigned long long hali_parse_digits(const char *s, char **end);
bool hali_parse_integer(const char *s, bool *out_negative,
                        uint64_t *out_magnitude);

/* Floats print in the shortest decimal text that reads back to the same
 * value of |kind|; nan, inf and -inf by name (a nan's payload is not kept:
 * `hali dis` prints non-canonical nans as bits(0x...)).  With |literal|,
 * integral values get ".0" so that they read as float literals. */
typedef enum hali_float_kind_e {
  HALI_FLOAT_F64,
  HALI_FLOAT_F32,
  HALI_FLOAT_F16,
  HALI_FLOAT_BF16,
} hali_float_kind_t;
void hali_format_float(char *out, size_t n, double v, hali_float_kind_t kind,
                       bool literal);

/* f16 / bf16 <-> f32 (round to nearest even). */
float hali_f16_to_f32(uint16_t h);
uint16_t hali_f32_to_f16(float f);
float hali_bf16_to_f32(uint16_t h);
uint16_t hali_f32_to_bf16(float f);

#endif /* HALI_BASE_NUMBER_H */
