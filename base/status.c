/* hali — status objects (see include/hali/base.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/alloc.h"
#include "hali/base.h"

struct hali_status_s {
  hali_status_code_t code;
  char *message;
  size_t annotation_count;
  char **annotations;
  size_t dropped; /* lines left out of the middle (see annotate) */
};

/* At most this many lines of context: the first HEAD (where it failed),
 * one line counting what is left out, and the last ones (where it
 * surfaced).  A failure passed up through a chain of N awaited fibers
 * annotates it 2N times; unbounded, each clone along the way copied them
 * all (quadratic) and the report grew without end. */
enum { MAX_ANNOTATIONS = 64, HEAD_ANNOTATIONS = 48 };

/* The one out-of-memory message (hali_status_oom). */
#define HALI_OOM_MESSAGE "out of memory"

/* Allocation failure while building a status must still produce a status:
 * this static one is returned (and never freed) in that case. */
static char hali_status_oom_message[] = HALI_OOM_MESSAGE;
static struct hali_status_s hali_status_oom_object = {
    HALI_STATUS_RESOURCE_EXHAUSTED, hali_status_oom_message, 0, NULL, 0};

/* The one DEFERRED status (base/status.h): shared, so never mutated. */
static char hali_status_deferred_message[] =
    "deferred: the operation resumes later (internal; never returned to "
    "API callers)";
static struct hali_status_s hali_status_deferred_object = {
    HALI_STATUS_DEFERRED, hali_status_deferred_message, 0, NULL, 0};

hali_status_t hali_status_deferred(void) {
  return &hali_status_deferred_object;
}

/* The static statuses: shared by every caller, never freed or annotated. */
static int hali_status_is_static(hali_status_t s) {
  return s == &hali_status_oom_object || s == &hali_status_deferred_object;
}

__attribute__((format(printf, 1, 0))) static char *hali_vformat(
    const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0) n = 0;
  char *s = hali_malloc((size_t)n + 1);
  if (!s) return NULL;
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

hali_status_t hali_status_makev(hali_status_code_t code, const char *fmt,
                                va_list ap) {
  if (code == HALI_STATUS_OK) code = HALI_STATUS_UNKNOWN;
  struct hali_status_s *s = hali_calloc(1, sizeof(*s));
  if (!s) return &hali_status_oom_object;
  s->code = code;
  s->message = hali_vformat(fmt, ap);
  if (!s->message) {
    hali_free(s);
    return &hali_status_oom_object;
  }
  return s;
}

hali_status_t hali_status_make(hali_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hali_status_t s = hali_status_makev(code, fmt, ap);
  va_end(ap);
  return s;
}

hali_status_t hali_status_oom(void) {
  return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, HALI_OOM_MESSAGE);
}

static char *hali_format(const char *fmt, ...) HALI_PRINTF(1, 2);
static char *hali_format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = hali_vformat(fmt, ap);
  va_end(ap);
  return out;
}

hali_status_t hali_status_annotate(hali_status_t s, const char *fmt, ...) {
  if (!s || hali_status_is_static(s)) return s;
  va_list ap;
  va_start(ap, fmt);
  char *line = hali_vformat(fmt, ap);
  va_end(ap);
  if (!line) return s;
  if (!line[0]) {
    hali_free(line);
    return s;
  }
  if (s->annotation_count == MAX_ANNOTATIONS) {
    /* Full: the line after the head counts what is dropped, and the tail
     * rolls (its oldest line goes). */
    char **a = s->annotations;
    if (!s->dropped) {
      hali_free(a[HEAD_ANNOTATIONS]);
      a[HEAD_ANNOTATIONS] = NULL;
      s->dropped = 1;
    }
    hali_free(a[HEAD_ANNOTATIONS + 1]);
    memmove(&a[HEAD_ANNOTATIONS + 1], &a[HEAD_ANNOTATIONS + 2],
            (MAX_ANNOTATIONS - HEAD_ANNOTATIONS - 2) * sizeof(*a));
    a[MAX_ANNOTATIONS - 1] = line;
    s->dropped++;
    char *count = hali_format("... %zu more lines of context not shown",
                              s->dropped);
    if (count) {
      hali_free(a[HEAD_ANNOTATIONS]);
      a[HEAD_ANNOTATIONS] = count;
    } else if (!a[HEAD_ANNOTATIONS]) {
      a[HEAD_ANNOTATIONS] = hali_format("...");
    }
    return s;
  }
  char **grown = hali_realloc(s->annotations,
                         (s->annotation_count + 1) * sizeof(*grown));
  if (!grown) {
    hali_free(line);
    return s;
  }
  s->annotations = grown;
  s->annotations[s->annotation_count++] = line;
  return s;
}

hali_status_t hali_status_clone(hali_status_t s) {
  if (!s) return NULL;
  if (hali_status_is_static(s)) return s;
  hali_status_t c = hali_status_make(s->code, "%s", s->message);
  for (size_t i = 0; i < s->annotation_count; ++i)
    c = hali_status_annotate(c, "%s", s->annotations[i] ? s->annotations[i] : "...");
  if (!hali_status_is_static(c)) c->dropped = s->dropped;
  return c;
}

hali_status_code_t hali_status_code(hali_status_t s) {
  return s ? s->code : HALI_STATUS_OK;
}

const char *hali_status_message(hali_status_t s) {
  return s ? s->message : "";
}

size_t hali_status_annotation_count(hali_status_t s) {
  return s ? s->annotation_count : 0;
}

const char *hali_status_annotation(hali_status_t s, size_t i) {
  return (s && i < s->annotation_count) ? s->annotations[i] : NULL;
}

const char *hali_status_code_name(hali_status_code_t code) {
  switch (code) {
#define HALI_X(name, value)                                                    \
  case HALI_STATUS_##name:                                                     \
    return #name;
    HALI_STATUS_CODES(HALI_X)
#undef HALI_X
  case HALI_STATUS_DEFERRED:
    return "DEFERRED";
  default:
    return "UNKNOWN_CODE";
  }
}

char *hali_status_to_string(hali_status_t s) {
  const char *name = hali_status_code_name(hali_status_code(s));
  const char *msg = hali_status_message(s);
  size_t len = strlen(name) + 2 + strlen(msg) + 1;
  for (size_t i = 0; i < hali_status_annotation_count(s); ++i)
    len += 3 + strlen(s->annotations[i]);
  char *out = hali_malloc(len);
  if (!out) return NULL;
  char *p = out;
  p += sprintf(p, "%s: %s", name, msg);
  for (size_t i = 0; i < hali_status_annotation_count(s); ++i)
    p += sprintf(p, "\n  %s", s->annotations[i]);
  return out;
}

void hali_status_free(hali_status_t s) {
  if (!s || hali_status_is_static(s)) return;
  for (size_t i = 0; i < s->annotation_count; ++i) hali_free(s->annotations[i]);
  hali_free(s->annotations);
  hali_free(s->message);
  hali_free(s);
}

int hali_status_consume_code(hali_status_t s, hali_status_code_t code) {
  int ok = hali_status_code(s) == code;
  hali_status_free(s);
  return ok;
}
