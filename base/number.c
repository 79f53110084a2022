/* hali — number text: integer literals, shortest floats, f16/bf16
 * (base/number.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/number.h"

unsigned long long hali_parse_digits(const char *s, char **end) {
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    if (!isxdigit((unsigned char)s[2])) {
      *end = (char *)(uintptr_t)s; /* no digits: nothing consumed */
      return 0;
    }
    return strtoull(s + 2, end, 16);
  }
  if (!isdigit((unsigned char)s[0])) {
    *end = (char *)(uintptr_t)s;
    return 0;
  }
  return strtoull(s, end, 10);
}

bool hali_parse_integer(const char *s, bool *out_negative,
                        uint64_t *out_magnitude) {
  bool neg = s[0] == '-';
  if (s[0] == '-' || s[0] == '+') ++s;
  char *end;
  errno = 0;
  unsigned long long v = hali_parse_digits(s, &end);
  if (end == s || *end || errno) return false;
  *out_negative = neg;
  *out_magnitude = v;
  return true;
}

/* Half precision, round to nearest even. */
float hali_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: renormalize */
      int e = -1;
      do {
        man <<= 1;
        e++;
      } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t hali_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
  if (e <= 0) {
    if (e < -10) return sign; /* underflow -> 0 */
    man |= 0x800000;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1),
             mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
  return (uint16_t)(sign | half);
}

float hali_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t hali_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* Does |text| read back as |v| once rounded to |kind|? */
static bool reads_back(const char *text, double v, hali_float_kind_t kind) {
  double p = strtod(text, NULL);
  switch (kind) {
  case HALI_FLOAT_F16:
    return hali_f32_to_f16((float)p) == hali_f32_to_f16((float)v);
  case HALI_FLOAT_BF16:
    return hali_f32_to_bf16((float)p) == hali_f32_to_bf16((float)v);
  case HALI_FLOAT_F32:
    return strtof(text, NULL) == (float)v;
  default:
    return p == v;
  }
}

/* The one float printer: the assembler's literals, dis, hali run results,
 * tensors and traces all print floats this way. */
void hali_format_float(char *out, size_t n, double v, hali_float_kind_t kind,
                       bool literal) {
  if (isnan(v)) {
    snprintf(out, n, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(out, n, v < 0 ? "-inf" : "inf");
    return;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(out, n, "%.*g", prec, v);
    if (reads_back(out, v, kind)) break;
  }
  /* A literal must read as a float, not an integer. */
  if (literal && !strpbrk(out, ".eE")) {
    size_t l = strlen(out);
    if (l + 2 < n) memcpy(out + l, ".0", 3);
  }
}
