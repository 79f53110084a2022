/* hali — host memory: every allocation the library makes goes through
 * these functions, so that a host can route them (hali_set_host_allocator
 * in include/hali/base.h) and a test can fail the k-th one.
 *
 * They behave as their C library namesakes, with two differences: a size
 * of 0 still returns a unique pointer (or NULL on failure), and memory
 * from hali_aligned_alloc is released with hali_aligned_free.  Memory from
 * any of them must never reach the C library's free(), nor the other way
 * round.
 */
#ifndef HALI_BASE_ALLOC_H
#define HALI_BASE_ALLOC_H

#include <stddef.h>

#include "hali/base.h"

void *hali_malloc(size_t size);
/* Zeroed |count| * |size| bytes; NULL when the product overflows. */
void *hali_calloc(size_t count, size_t size);
/* NULL on failure, leaving |ptr| as it was. */
void *hali_realloc(void *ptr, size_t size);
/* hali_free is public (include/hali/base.h): what the API hands out
 * malloc-style is released with it. */
char *hali_strdup(const char *s);
/* At most |n| bytes of |s|, NUL-terminated. */
char *hali_strndup(const char *s, size_t n);
/* |size| bytes aligned to |alignment| (a power of two, at least
 * sizeof(void *)). */
void *hali_aligned_alloc(size_t alignment, size_t size);
void hali_aligned_free(void *ptr);

#endif /* HALI_BASE_ALLOC_H */
