/* C baseline for examples/fib.hasm: recursive Fibonacci on int32_t.
 *   usage: fib N      prints fib(N)
 * n comes from argv and the result is printed, so nothing can be folded at
 * compile time; noinline keeps fib a real function (the compiler may still
 * turn one of the two recursive calls into a loop, as optimizing compilers
 * do -- this is the "native ceiling", not a call-for-call model of hali). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int32_t fib(int32_t n) {
  if (n < 2) return n;
  return fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s N\n", argv[0]);
    return 2;
  }
  int32_t n = (int32_t)strtol(argv[1], NULL, 10);
  printf("%d\n", fib(n));
  return 0;
}
