/* hali — overflow-checked arithmetic on sizes, offsets, counts and
 * timeline values.
 *
 * Every sum or product of such values that the HAL (and the VM's HAL ops)
 * computes from caller-supplied numbers goes through one of these, so that
 * "it wrapped" is always an explicit branch that names what overflowed and
 * never a silently small number (a wrapped workgroup product of 0 would
 * mean "run nothing and succeed"; a wrapped timeline value would make an
 * unsignalled point read as reached).
 *
 * Each returns true when the exact result does NOT fit (the convention of
 * __builtin_*_overflow), and otherwise stores it in |*out|.  Depends on
 * nothing but <stdbool.h> and <stdint.h>, so any layer may include it.
 */
#ifndef HALI_BASE_CHECKED_H
#define HALI_BASE_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* |a| + |b| > UINT64_MAX? */
static inline bool hali_add_overflows_u64(uint64_t a, uint64_t b,
                                          uint64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

/* |a| * |b| > UINT64_MAX? */
static inline bool hali_mul_overflows_u64(uint64_t a, uint64_t b,
                                          uint64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

/* |a| * |b| * |c| > UINT64_MAX?  (A zero factor never overflows: the exact
 * product is 0, whatever the other two are.) */
static inline bool hali_mul3_overflows_u64(uint64_t a, uint64_t b, uint64_t c,
                                           uint64_t *out) {
  uint64_t ab;
  if (a == 0 || b == 0 || c == 0) {
    *out = 0;
    return false;
  }
  return __builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, out);
}

#endif /* HALI_BASE_CHECKED_H */
