/* hali run — host tensors (see tools/tensor.h), over the public API. */
#include "tools/tensor.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tool_tensor_free(tool_tensor_t *t) {
  free(t->data);
  t->data = NULL;
  t->size = 0;
}

static hali_status_t oom(void) {
  return hali_status_oom();
}

hali_status_t tool_read_file(const char *path, uint8_t **out,
                                  size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  FILE *f = fopen(path, "rb");
  if (!f && errno == ENOMEM)
    return hali_status_annotate(hali_status_oom(), "opening %s", path);
  if (!f)
    return hali_status_make(HALI_STATUS_NOT_FOUND, "%s: cannot open: %s", path,
                            strerror(errno));
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap + 1);
  while (buf) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap) break;
    cap *= 2;
    uint8_t *grown = realloc(buf, cap + 1);
    if (!grown) free(buf);
    buf = grown;
  }
  int err = ferror(f);
  fclose(f);
  if (!buf)
    return hali_status_annotate(hali_status_oom(), "reading %s", path);
  if (err) {
    free(buf);
    return hali_status_make(HALI_STATUS_DATA_LOSS, "%s: read error", path);
  }
  buf[len] = 0;
  *out = buf;
  *out_size = len;
  return HALI_OK;
}

/* Element types by their documented encoding (hali/hali.h):
 * (numerical type << 24) | bits. */
static bool is_float(hali_element_type_t t) {
  return (t >> 24) == 0x21 || (t >> 24) == 0x22;
}

/* ------------------------------------------------------------------------ */
/* Parsing. */

/* The element count and byte size of |t|'s shape. */
static hali_status_t element_count(const tool_tensor_t *t, uint64_t *count,
                                   size_t *bytes) {
  uint64_t size = 0;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_buffer_view_compute_size(t->type, t->rank, t->shape, &size));
  if (size > SIZE_MAX)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%" PRIu64 " bytes do not fit in memory", size);
  size_t es = hali_element_type_byte_size(t->type);
  *count = es ? size / es : 0;
  *bytes = (size_t)size;
  return HALI_OK;
}

/* "2x3xf32" -> shape and type. */
static hali_status_t parse_type(const char *s, size_t len, const char *what,
                                tool_tensor_t *t) {
  t->rank = 0;
  size_t start = 0;
  for (size_t i = 0; i <= len; ++i) {
    if (i < len && s[i] != 'x') continue;
    const char *part = s + start;
    size_t plen = i - start;
    bool digits = plen > 0;
    for (size_t k = 0; k < plen; ++k)
      if (!isdigit((unsigned char)part[k])) digits = false;
    if (i == len || !digits) {
      /* The element type is the rest ("i32", or a type containing 'x'
       * would not exist). */
      size_t rest = len - start;
      hali_status_t s2 = hali_element_type_parse(part, rest, &t->type);
      if (s2)
        return hali_status_annotate(s2, "%s: in '%.*s'", what, (int)len, s);
      return HALI_OK;
    }
    if (t->rank == TOOL_TENSOR_MAX_RANK)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s: rank above %d in '%.*s'", what,
                              TOOL_TENSOR_MAX_RANK, (int)len, s);
    errno = 0;
    char *end;
    unsigned long long d = strtoull(part, &end, 10);
    if (errno || d > INT64_MAX)
      return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                              "%s: dimension '%.*s' is too large", what,
                              (int)plen, part);
    t->shape[t->rank++] = (int64_t)d;
    start = i + 1;
  }
  return HALI_OK;
}

static hali_status_t read_raw(const char *path, const char *what,
                              tool_tensor_t *t) {
  uint64_t count;
  size_t bytes;
  HALI_RETURN_IF_ERROR(element_count(t, &count, &bytes), "%s", what);
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR(tool_read_file(path, &data, &size), "%s", what);
  if (size != bytes) {
    free(data);
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: %s has %zu bytes but the shape needs %zu",
                            what, path, size, bytes);
  }
  t->data = data;
  t->size = size;
  return HALI_OK;
}

hali_status_t tool_tensor_parse(const char *spec, const char *what,
                                tool_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  if (spec[0] == '@') return tool_tensor_read_npy(spec + 1, out);
  const char *eq = strchr(spec, '=');
  if (!eq)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' is not SHAPExTYPE=VALUES (e.g. "
                            "2x2xf32=1 2 3 4)",
                            what, spec);
  HALI_RETURN_IF_ERROR_PLAIN(parse_type(spec, (size_t)(eq - spec), what, out));
  const char *v = eq + 1;
  if (v[0] == '@') return read_raw(v + 1, what, out);
  uint64_t count;
  size_t bytes;
  HALI_RETURN_IF_ERROR(element_count(out, &count, &bytes), "%s", what);
  out->data = calloc(bytes ? bytes : 1, 1);
  if (!out->data)
    return hali_status_annotate(
        hali_status_oom(), "%s: %zu bytes", what, bytes);
  out->size = bytes;
  uint32_t es = hali_element_type_byte_size(out->type);
  uint64_t n = 0;
  const char *p = v;
  while (*p) {
    /* Brackets and commas only group values; whitespace separates. */
    if (isspace((unsigned char)*p) || *p == '[' || *p == ']' || *p == ',') {
      ++p;
      continue;
    }
    const char *start = p;
    while (*p && !isspace((unsigned char)*p) && *p != '[' && *p != ']' &&
           *p != ',')
      ++p;
    if (n >= count) {
      tool_tensor_free(out);
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s: more than the %" PRIu64
                              " values the shape holds",
                              what, count);
    }
    hali_status_t bad = hali_element_parse(out->type, start,
                                           (size_t)(p - start),
                                           out->data + n * es);
    if (bad) {
      tool_tensor_free(out);
      hali_status_t s = hali_status_make(
          HALI_STATUS_INVALID_ARGUMENT, "%s: value %" PRIu64 " %s", what, n,
          hali_status_message(bad));
      hali_status_free(bad);
      return s;
    }
    n++;
  }
  /* A single value fills (splats) the whole tensor, as in iree-run-module. */
  if (n == 1 && count > 1) {
    for (uint64_t i = 1; i < count; ++i)
      memcpy(out->data + i * es, out->data, es);
    n = count;
  }
  if (n != count) {
    tool_tensor_free(out);
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: %" PRIu64 " value(s) given, the shape holds %"
                            PRIu64,
                            what, n, count);
  }
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* .npy: the library's reader (hali_npy_parse) says where the data is. */

hali_status_t tool_tensor_read_npy(const char *path, tool_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR_PLAIN(tool_read_file(path, &data, &size));
  hali_status_t s = tool_tensor_parse_npy(data, size, path, out);
  free(data);
  return s;
}

hali_status_t tool_tensor_parse_npy(const uint8_t *data, size_t size,
                                    const char *path, tool_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  hali_npy_info_t info;
  HALI_RETURN_IF_ERROR_PLAIN(hali_npy_parse(data, size, path, &info));
  _Static_assert(sizeof(info.shape) == sizeof(out->shape),
                 "the tool's rank limit is the reader's");
  out->type = info.element_type;
  out->rank = info.rank;
  memcpy(out->shape, info.shape, sizeof(out->shape));
  out->data = malloc(info.data_length ? info.data_length : 1);
  if (!out->data) return oom();
  memcpy(out->data, data + info.data_offset, info.data_length);
  out->size = info.data_length;
  return HALI_OK;
}

hali_status_t tool_tensor_write_npy(const tool_tensor_t *t, FILE *f) {
  const char *descr = hali_npy_descr(t->type);
  if (!descr)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s has no .npy equivalent",
                            hali_element_type_name(t->type));
  char shape[TOOL_TENSOR_MAX_RANK * 24 + 4] = "";
  size_t n = 0;
  for (size_t i = 0; i < t->rank; ++i)
    n += (size_t)snprintf(shape + n, sizeof(shape) - n, "%" PRId64 ",%s",
                          t->shape[i], i + 1 < t->rank ? " " : "");
  if (t->rank > 1) shape[n - 1] = 0; /* "(2, 3)" but "(4,)" */
  char header[sizeof(shape) + 128];
  int hl = snprintf(header, sizeof(header),
                    "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                    descr[0] == 'b' || descr[1] == '1' ? '|' : '<', descr,
                    shape);
  /* Pad with spaces so that the data starts at a multiple of 64. */
  size_t total = 10 + (size_t)hl + 1;
  size_t pad = (64 - total % 64) % 64;
  uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                     (uint8_t)((hl + pad + 1) & 0xff),
                     (uint8_t)((hl + pad + 1) >> 8)};
  bool ok = fwrite(pre, 1, 10, f) == 10 &&
            fwrite(header, 1, (size_t)hl, f) == (size_t)hl;
  for (size_t i = 0; ok && i < pad; ++i) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF &&
       fwrite(t->data, 1, t->size, f) == t->size;
  return ok ? HALI_OK
            : hali_status_make(HALI_STATUS_DATA_LOSS, "writing .npy failed");
}

/* ------------------------------------------------------------------------ */
/* Printing and comparing. */

void tool_tensor_print(const tool_tensor_t *t, size_t max_elements, FILE *f) {
  for (size_t i = 0; i < t->rank; ++i) fprintf(f, "%" PRId64 "x", t->shape[i]);
  const char *name = hali_element_type_name(t->type);
  fprintf(f, "%s=", name ? name : "?");
  size_t es = hali_element_type_byte_size(t->type);
  uint64_t count = es ? t->size / es : 0;
  /* Row-major strides in elements, for brackets. */
  uint64_t stride[TOOL_TENSOR_MAX_RANK];
  uint64_t acc = 1;
  for (size_t i = t->rank; i-- > 0;) {
    stride[i] = acc;
    acc *= (uint64_t)t->shape[i];
  }
  char buf[64];
  for (uint64_t e = 0; e < count; ++e) {
    if (e == max_elements) {
      fputs("...", f);
      return;
    }
    /* Dims 0..rank-2 get brackets (rank 1 prints a flat list). */
    size_t opens = 0;
    for (size_t d = 0; d + 1 < t->rank; ++d)
      if (e % stride[d] == 0) opens++;
    for (size_t k = 0; k < opens; ++k) fputc('[', f);
    if (e && !opens) fputc(' ', f);
    hali_element_format(t->type, t->data + e * es, buf, sizeof(buf));
    fputs(buf, f);
    for (size_t d = 0; d + 1 < t->rank; ++d)
      if ((e + 1) % stride[d] == 0) fputc(']', f);
  }
}

/* "2x3xf32" into |buf|. */
static void format_metadata(const tool_tensor_t *t, char *buf, size_t n) {
  size_t at = 0;
  for (size_t i = 0; i < t->rank && at < n; ++i)
    at += (size_t)snprintf(buf + at, n - at, "%" PRId64 "x", t->shape[i]);
  const char *name = hali_element_type_name(t->type);
  if (at < n) snprintf(buf + at, n - at, "%s", name ? name : "?");
}

hali_status_t tool_tensor_compare(const tool_tensor_t *a,
                                  const tool_tensor_t *x, double f32_threshold,
                                  double f64_threshold) {
  bool same_shape = a->rank == x->rank && a->type == x->type;
  for (size_t i = 0; same_shape && i < a->rank; ++i)
    same_shape = a->shape[i] == x->shape[i];
  if (!same_shape) {
    char ma[TOOL_TENSOR_MAX_RANK * 21 + 16], mx[sizeof(ma)];
    format_metadata(a, ma, sizeof(ma));
    format_metadata(x, mx, sizeof(mx));
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "metadata %s does not match the expected %s", ma,
                            mx);
  }
  size_t es = hali_element_type_byte_size(a->type);
  uint64_t count = es ? a->size / es : 0;
  bool single = a->type != HALI_ELEMENT_TYPE_F64;
  double threshold = single ? f32_threshold : f64_threshold;
  for (uint64_t e = 0; e < count; ++e) {
    const uint8_t *pa = a->data + e * es, *px = x->data + e * es;
    bool match;
    if (is_float(a->type)) {
      double va = hali_element_to_f64(a->type, pa);
      double vx = hali_element_to_f64(a->type, px);
      match = (isnan(va) && isnan(vx)) || va == vx ||
              fabs(va - vx) <= threshold;
    } else {
      match = memcmp(pa, px, es) == 0;
    }
    if (!match) {
      char ba[64], bx[64];
      hali_element_format(a->type, pa, ba, sizeof(ba));
      hali_element_format(a->type, px, bx, sizeof(bx));
      return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                              "element at index %" PRIu64
                              " (%s) does not match the expected (%s)",
                              e, ba, bx);
    }
  }
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* Buffer views. */

hali_status_t tool_tensor_to_view(const tool_tensor_t *t,
                                  hali_device_t *device,
                                  hali_buffer_view_t **out) {
  return hali_buffer_view_create(device, t->type, t->rank, t->shape, t->data,
                                 t->size, out);
}

hali_status_t tool_tensor_from_view(const hali_buffer_view_t *v,
                                    tool_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = hali_buffer_view_element_type(v);
  out->rank = hali_buffer_view_rank(v);
  if (out->rank > TOOL_TENSOR_MAX_RANK)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE, "rank %zu", out->rank);
  for (size_t i = 0; i < out->rank; ++i)
    out->shape[i] = hali_buffer_view_dim(v, i);
  size_t bytes = (size_t)hali_buffer_view_byte_length(v);
  out->data = malloc(bytes ? bytes : 1);
  if (!out->data) return oom();
  out->size = bytes;
  hali_status_t s = hali_buffer_view_read(v, out->data, bytes);
  if (s) tool_tensor_free(out);
  return s;
}
