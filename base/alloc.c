/* hali — host memory (see base/alloc.h).
 *
 * With no host allocator set, each function is its C library namesake
 * behind one predictable branch.  With one set, every call becomes one call
 * of the host's function, Lua-style: (NULL, n) allocates, (p, n) resizes,
 * (p, 0) frees.  Aligned blocks are then carved out of a larger block whose
 * start is kept in the word before the aligned address.
 *
 * The allocator may only change while no memory it handed out is live, so
 * that nothing is ever freed by an allocator that did not allocate it: a
 * relaxed atomic count of live blocks enforces that (and lets a test see a
 * leak without valgrind).
 */
#include "base/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

static hali_host_realloc_fn_t host_fn;
static void *host_user;
static size_t live;

static inline void count(long delta) {
  __atomic_add_fetch(&live, (size_t)delta, __ATOMIC_RELAXED);
}

hali_status_t hali_set_host_allocator(hali_host_realloc_fn_t fn, void *user) {
  size_t n = __atomic_load_n(&live, __ATOMIC_RELAXED);
  if (n != 0)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "hali_set_host_allocator: %zu block%s of hali "
                            "memory still live (set the allocator before "
                            "creating anything, or after releasing all)",
                            n, n == 1 ? "" : "s");
  host_fn = fn;
  host_user = user;
  return HALI_OK;
}

size_t hali_host_allocations_live(void) {
  return __atomic_load_n(&live, __ATOMIC_RELAXED);
}

void *hali_malloc(size_t size) {
  void *p = host_fn ? host_fn(host_user, NULL, size ? size : 1)
                    : malloc(size ? size : 1);
  if (p) count(1);
  return p;
}

void *hali_calloc(size_t count_, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count_, size, &n)) return NULL;
  if (!host_fn) {
    void *p = calloc(n ? count_ : 1, n ? size : 1);
    if (p) count(1);
    return p;
  }
  void *p = hali_malloc(n);
  if (p) memset(p, 0, n);
  return p;
}

void *hali_realloc(void *ptr, size_t size) {
  if (!ptr) return hali_malloc(size);
  if (!size) size = 1;
  return host_fn ? host_fn(host_user, ptr, size) : realloc(ptr, size);
}

void hali_free(void *ptr) {
  if (!ptr) return;
  count(-1);
  if (host_fn)
    (void)host_fn(host_user, ptr, 0);
  else
    free(ptr);
}

char *hali_strndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *d = hali_malloc(len + 1);
  if (!d) return NULL;
  memcpy(d, s, len);
  d[len] = '\0';
  return d;
}

char *hali_strdup(const char *s) { return hali_strndup(s, strlen(s)); }

void *hali_aligned_alloc(size_t alignment, size_t size) {
  if (alignment < sizeof(void *) || (alignment & (alignment - 1))) return NULL;
  if (!host_fn) {
    void *p = NULL;
    if (posix_memalign(&p, alignment, size ? size : 1) != 0) return NULL;
    count(1);
    return p;
  }
  size_t total;
  if (__builtin_add_overflow(size, alignment + sizeof(void *), &total))
    return NULL;
  char *raw = hali_malloc(total);
  if (!raw) return NULL;
  uintptr_t a = ((uintptr_t)raw + sizeof(void *) + alignment - 1) &
                ~(uintptr_t)(alignment - 1);
  ((void **)a)[-1] = raw;
  return (void *)a;
}

void hali_aligned_free(void *ptr) {
  if (!ptr) return;
  if (host_fn)
    hali_free(((void **)ptr)[-1]);
  else
    hali_free(ptr);
}
