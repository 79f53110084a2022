/* C baseline for examples/sieve.hasm: the number of primes below n, by the
 * sieve of Eratosthenes over a zeroed byte array (0 = maybe prime,
 * 1 = composite), the same loops as the hali program.
 *   usage: sieve N     prints the count */
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
  int64_t count = 0;
  if (n > 2) {
    unsigned char *composite = calloc((size_t)n, 1);
    if (!composite) {
      perror("calloc");
      return 1;
    }
    for (int64_t i = 2; i < n; ++i) {
      if (composite[i]) continue;
      count++;
      for (int64_t j = i * i; j < n; j += i) composite[j] = 1;
    }
    free(composite);
  }
  printf("%" PRId64 "\n", count);
  return 0;
}
