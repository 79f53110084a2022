/* C baseline for examples/loop.hasm: sum over i in [0, n) of (i mod 7)^2,
 * in int64_t.
 *   usage: loop N     prints the sum
 * The empty asm makes i opaque to the optimizer on every iteration, so the
 * loop can be neither vectorized nor replaced by a closed form: one scalar
 * iteration per i, like the interpreters do.  It emits no instruction. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s N\n", argv[0]);
    return 2;
  }
  int64_t n = strtoll(argv[1], NULL, 10);
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    __asm__("" : "+r"(i));
    int64_t m = i % 7;
    sum += m * m;
  }
  printf("%" PRId64 "\n", sum);
  return 0;
}
