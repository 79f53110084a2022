/* hali — base definitions shared by every public header.
 *
 * Status values: every fallible function returns a hali_status_t.  NULL means
 * success; anything else is an owned object holding a code, a message and a
 * list of annotations (context added on the way up the call stack).  The
 * caller owns a returned status and must consume it with hali_status_free()
 * or pass it on.
 */
#ifndef HALI_BASE_H
#define HALI_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HALI_API __attribute__((visibility("default")))
#define HALI_MUST_USE __attribute__((warn_unused_result))
#define HALI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define HALI_LIKELY(x) __builtin_expect(!!(x), 1)
#define HALI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HALI_API
#define HALI_MUST_USE
#define HALI_PRINTF(f, a)
#define HALI_LIKELY(x) (x)
#define HALI_UNLIKELY(x) (x)
#endif

/* Status codes; the numbering follows the widely used canonical codes so
 * that values printed by hali mean the same thing as in other runtimes. */
#define HALI_STATUS_CODES(X)                                                   \
  X(OK, 0)                                                                     \
  X(CANCELLED, 1)                                                              \
  X(UNKNOWN, 2)                                                                \
  X(INVALID_ARGUMENT, 3)                                                       \
  X(DEADLINE_EXCEEDED, 4)                                                      \
  X(NOT_FOUND, 5)                                                              \
  X(ALREADY_EXISTS, 6)                                                         \
  X(PERMISSION_DENIED, 7)                                                      \
  X(RESOURCE_EXHAUSTED, 8)                                                     \
  X(FAILED_PRECONDITION, 9)                                                    \
  X(ABORTED, 10)                                                               \
  X(OUT_OF_RANGE, 11)                                                          \
  X(UNIMPLEMENTED, 12)                                                         \
  X(INTERNAL, 13)                                                              \
  X(UNAVAILABLE, 14)                                                           \
  X(DATA_LOSS, 15)                                                             \
  X(UNAUTHENTICATED, 16)

typedef enum hali_status_code_e {
#define HALI_X(name, value) HALI_STATUS_##name = value,
  HALI_STATUS_CODES(HALI_X)
#undef HALI_X
  HALI_STATUS_CODE_COUNT
} hali_status_code_t;

typedef struct hali_status_s *hali_status_t;
#define HALI_OK ((hali_status_t)NULL)

/* Creates a status with |code| (never HALI_STATUS_OK) and a printf message. */
HALI_API hali_status_t hali_status_make(hali_status_code_t code,
                                        const char *fmt, ...)
    HALI_PRINTF(2, 3);
HALI_API hali_status_t hali_status_makev(hali_status_code_t code,
                                         const char *fmt, va_list ap)
    HALI_PRINTF(2, 0);
/* The status for a failed allocation: RESOURCE_EXHAUSTED with the message
 * "out of memory", the same everywhere; say what was being done with
 * hali_status_annotate.  Never NULL: when even this status cannot be
 * allocated, a static one with the same code and message is returned
 * (annotating it is a no-op and freeing it does nothing). */
HALI_API hali_status_t hali_status_oom(void);
/* Appends a line of context to |status| (which it consumes and returns).
 * Annotating HALI_OK returns HALI_OK. */
HALI_API hali_status_t hali_status_annotate(hali_status_t status,
                                            const char *fmt, ...)
    HALI_PRINTF(2, 3);
/* Returns a new status with the same code, message and annotations. */
HALI_API hali_status_t hali_status_clone(hali_status_t status);
HALI_API hali_status_code_t hali_status_code(hali_status_t status);
/* The primary message (without annotations); "" for HALI_OK.  Borrowed:
 * valid until the status is freed or annotated. */
HALI_API const char *hali_status_message(hali_status_t status);
/* Number of annotations and the i-th one (oldest first, i.e. innermost
 * context first). */
HALI_API size_t hali_status_annotation_count(hali_status_t status);
HALI_API const char *hali_status_annotation(hali_status_t status, size_t i);
/* "CODE_NAME: message" followed by "\n  annotation" lines.  Returns a
 * string the caller releases with hali_free() (NULL when out of memory). */
HALI_API char *hali_status_to_string(hali_status_t status);
HALI_API const char *hali_status_code_name(hali_status_code_t code);
/* Frees |status|; NULL is fine. */
HALI_API void hali_status_free(hali_status_t status);
/* Frees |status| and reports whether it had |code|. Handy in tests. */
HALI_API int hali_status_consume_code(hali_status_t status,
                                      hali_status_code_t code);

/* Host memory.  Every allocation the library makes -- modules, statuses,
 * fibers, command buffers, strings it returns -- goes through one
 * function that a host may replace, as Lua's lua_Alloc does:
 * |fn|(user, NULL, n) allocates n bytes (n > 0), |fn|(user, p, n) resizes
 * p to n bytes keeping its contents (NULL on failure, p untouched), and
 * |fn|(user, p, 0) frees p (the result is ignored).  Blocks must be
 * aligned as malloc's are.  |fn| is called from any thread that allocates,
 * so it must be thread-safe.  NULL restores the C library.
 *
 * The allocator can change only while no block it handed out is live
 * (FAILED_PRECONDITION otherwise): set it before creating anything. Device
 * buffers come from the instance's allocator hooks instead
 * (hali_instance_options_t). */
typedef void *(*hali_host_realloc_fn_t)(void *user, void *ptr, size_t size);
HALI_API HALI_MUST_USE hali_status_t
hali_set_host_allocator(hali_host_realloc_fn_t fn, void *user);
/* Blocks of host memory the library holds right now (0 once everything
 * is released: a leak check that needs no tool). */
HALI_API size_t hali_host_allocations_live(void);
/* Frees memory the API hands out malloc-style (hali_status_to_string,
 * hali_module_write_binary, hali_module_print_file, ...).  NULL is fine. */
HALI_API void hali_free(void *ptr);

#define HALI_RETURN_IF_ERROR(expr, ...)                                        \
  do {                                                                         \
    hali_status_t hali_rie_s_ = (expr);                                        \
    if (HALI_UNLIKELY(hali_rie_s_ != NULL))                                    \
      return hali_status_annotate(hali_rie_s_, __VA_ARGS__);                   \
  } while (0)

#define HALI_RETURN_IF_ERROR_PLAIN(expr)                                       \
  do {                                                                         \
    hali_status_t hali_rie_s_ = (expr);                                        \
    if (HALI_UNLIKELY(hali_rie_s_ != NULL)) return hali_rie_s_;                \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* HALI_BASE_H */
