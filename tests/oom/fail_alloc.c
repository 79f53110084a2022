/* An LD_PRELOAD shim that fails the k-th heap allocation of a process
 * (HALI_FAIL_ALLOC=k), as SQLite's tests fail the k-th malloc: every
 * allocation failure hali can meet, one run each (tests/oom/oom.test).
 * HALI_FAIL_ALLOC_FROM=k fails the k-th and every one after it: memory
 * that stays short, where a retry would spin.
 * HALI_COUNT_ALLOCS=1 prints the count at exit.  glibc only (__libc_*). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static long fail_at = -2, fail_from = -1, count;

static int fails(void) {
  if (fail_at == -2) {
    const char *e = getenv("HALI_FAIL_ALLOC");
    const char *f = getenv("HALI_FAIL_ALLOC_FROM");
    fail_at = e ? atol(e) : -1;
    fail_from = f ? atol(f) : -1;
  }
  long n = __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
  if (n != fail_at && (fail_from < 0 || n < fail_from)) return 0;
  errno = ENOMEM; /* as malloc does (glibc's own callers assert it) */
  return 1;
}

void *malloc(size_t n) { return fails() ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return fails() ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return fails() ? NULL : __libc_realloc(p, n); }
int posix_memalign(void **out, size_t align, size_t n) {
  if (fails()) return ENOMEM;
  void *p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void *aligned_alloc(size_t align, size_t n) {
  return fails() ? NULL : __libc_memalign(align, n);
}

__attribute__((destructor)) static void report(void) {
  if (getenv("HALI_COUNT_ALLOCS"))
    fprintf(stderr, "allocations: %ld\n", count);
}
