/* hali — a growable string (base/strbuf.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/alloc.h"

void hali_strbuf_append(hali_strbuf_t *sb, const char *s, size_t len) {
  if (sb->oom) return;
  if (sb->len + len + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + len + 1) cap *= 2;
    char *d = hali_realloc(sb->data, cap);
    if (!d) {
      sb->oom = true;
      return;
    }
    sb->data = d;
    sb->cap = cap;
  }
  memcpy(sb->data + sb->len, s, len);
  sb->len += len;
  sb->data[sb->len] = 0;
}

void hali_strbuf_vprintf(hali_strbuf_t *sb, const char *fmt, va_list ap) {
  char small[256];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof(small), fmt, ap);
  if (n >= 0 && (size_t)n < sizeof(small)) {
    hali_strbuf_append(sb, small, (size_t)n);
  } else if (n >= 0) {
    char *big = hali_malloc((size_t)n + 1);
    if (big) {
      vsnprintf(big, (size_t)n + 1, fmt, again);
      hali_strbuf_append(sb, big, (size_t)n);
      hali_free(big);
    } else {
      sb->oom = true;
    }
  }
  va_end(again);
}

void hali_strbuf_printf(hali_strbuf_t *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hali_strbuf_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *hali_strbuf_take(hali_strbuf_t *sb) {
  char *d = sb->oom ? NULL : sb->data;
  if (sb->oom) hali_free(sb->data);
  if (d == NULL && !sb->oom) d = hali_calloc(1, 1);
  memset(sb, 0, sizeof(*sb));
  return d;
}
