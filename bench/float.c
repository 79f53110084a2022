/* C baseline for examples/float.hasm: n steps of x = x * 1.0000001 + 0.5
 * from x = 0.0, in double.
 *   usage: float N    prints x
 * Compile with -ffp-contract=off: a fused multiply-add would round once
 * instead of twice and the result would no longer match hali (and Lua) bit
 * for bit.  The chain is serial (each step needs the last), so it cannot be
 * vectorized; without -ffast-math it cannot be reassociated either.
 * x is printed like `hali run` prints an f64: the shortest %g form that
 * reads back as the same double. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void print_shortest(double v) {
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  puts(buf);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s N\n", argv[0]);
    return 2;
  }
  int64_t n = strtoll(argv[1], NULL, 10);
  double x = 0.0;
  for (int64_t i = 0; i < n; ++i) x = x * 1.0000001 + 0.5;
  print_shortest(x);
  return 0;
}
