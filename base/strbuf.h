/* hali — a growable string used by printers and messages (base layer). */
#ifndef HALI_BASE_STRBUF_H
#define HALI_BASE_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "hali/base.h"

/* A growable string used by printers. */
typedef struct hali_strbuf_s {
  char *data;
  size_t len, cap;
  bool oom;
} hali_strbuf_t;
void hali_strbuf_printf(hali_strbuf_t *sb, const char *fmt, ...)
    HALI_PRINTF(2, 3);
void hali_strbuf_vprintf(hali_strbuf_t *sb, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void hali_strbuf_append(hali_strbuf_t *sb, const char *s, size_t len);
/* Hands the string to the caller (NULL on OOM) and resets |sb|. */
char *hali_strbuf_take(hali_strbuf_t *sb);

#endif /* HALI_BASE_STRBUF_H */
