/* hali run — host tensors (see tools/tensor.h). */
#include "tools/tensor.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loader.h"

void hali_tensor_free(hali_tensor_t *t) {
  free(t->data);
  t->data = NULL;
  t->size = 0;
}

/* ------------------------------------------------------------------------ */
/* Elements. */

typedef enum { EK_SIGNED, EK_UNSIGNED, EK_BOOL, EK_FLOAT } elem_kind_t;

static elem_kind_t elem_kind(hali_hal_element_type_t t) {
  switch (hali_hal_element_type_numerical_type(t)) {
  case HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED: return EK_UNSIGNED;
  case HALI_HAL_NUMERICAL_TYPE_BOOLEAN: return EK_BOOL;
  case HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE:
  case HALI_HAL_NUMERICAL_TYPE_FLOAT_BRAIN: return EK_FLOAT;
  default: return EK_SIGNED;
  }
}

static uint64_t load_bits(const uint8_t *p, uint32_t size) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < size; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void store_bits(uint8_t *p, uint32_t size, uint64_t v) {
  for (uint32_t i = 0; i < size; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

static double elem_to_double(hali_hal_element_type_t t, const uint8_t *p) {
  uint32_t size = hali_hal_element_type_byte_size(t);
  uint64_t bits = load_bits(p, size);
  switch (t) {
  case HALI_HAL_ELEMENT_TYPE_FLOAT_16: return hali_f16_to_f32((uint16_t)bits);
  case HALI_HAL_ELEMENT_TYPE_BFLOAT_16: return hali_bf16_to_f32((uint16_t)bits);
  case HALI_HAL_ELEMENT_TYPE_FLOAT_32: {
    float f;
    uint32_t u = (uint32_t)bits;
    memcpy(&f, &u, 4);
    return f;
  }
  case HALI_HAL_ELEMENT_TYPE_FLOAT_64: {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  default:
    break;
  }
  return NAN;
}

/* Integers as int64 (signed, signless) or uint64 (unsigned, bool). */
static int64_t elem_to_int(hali_hal_element_type_t t, const uint8_t *p) {
  uint32_t size = hali_hal_element_type_byte_size(t);
  uint64_t bits = load_bits(p, size);
  if (elem_kind(t) != EK_SIGNED || size == 8) return (int64_t)bits;
  uint32_t shift = 64 - 8 * size;
  return (int64_t)(bits << shift) >> shift;
}

static void format_elem(hali_hal_element_type_t t, const uint8_t *p, char *buf,
                        size_t n) {
  switch (elem_kind(t)) {
  case EK_FLOAT:
    hali_format_float(buf, n, elem_to_double(t, p),
                      t == HALI_HAL_ELEMENT_TYPE_FLOAT_16    ? HALI_FLOAT_F16
                      : t == HALI_HAL_ELEMENT_TYPE_BFLOAT_16 ? HALI_FLOAT_BF16
                      : t == HALI_HAL_ELEMENT_TYPE_FLOAT_32  ? HALI_FLOAT_F32
                                                             : HALI_FLOAT_F64,
                      false);
    break;
  case EK_UNSIGNED:
  case EK_BOOL:
    snprintf(buf, n, "%" PRIu64, (uint64_t)elem_to_int(t, p));
    break;
  default:
    snprintf(buf, n, "%" PRId64, elem_to_int(t, p));
  }
}

/* Parses one element from |text| (|len| bytes) into |p|. */
static bool parse_elem(hali_hal_element_type_t t, const char *text, size_t len,
                       uint8_t *p) {
  char buf[96];
  if (len == 0 || len >= sizeof(buf)) return false;
  memcpy(buf, text, len);
  buf[len] = 0;
  uint32_t size = hali_hal_element_type_byte_size(t);
  uint32_t bits = hali_hal_element_type_bit_count(t);
  char *end;
  errno = 0;
  switch (elem_kind(t)) {
  case EK_FLOAT: {
    double d = strtod(buf, &end);
    if (*end) return false;
    uint64_t out;
    if (t == HALI_HAL_ELEMENT_TYPE_FLOAT_16) out = hali_f32_to_f16((float)d);
    else if (t == HALI_HAL_ELEMENT_TYPE_BFLOAT_16) out = hali_f32_to_bf16((float)d);
    else if (t == HALI_HAL_ELEMENT_TYPE_FLOAT_32) {
      float f = (float)d;
      uint32_t u;
      memcpy(&u, &f, 4);
      out = u;
    } else {
      memcpy(&out, &d, 8);
    }
    store_bits(p, size, out);
    return true;
  }
  case EK_BOOL:
  case EK_UNSIGNED: {
    uint64_t v;
    bool neg;
    if (strcmp(buf, "true") == 0) v = 1;
    else if (strcmp(buf, "false") == 0) v = 0;
    else if (!hali_parse_integer(buf, &neg, &v) || (neg && v)) return false;
    if (bits < 64 && v >> bits) return false;
    store_bits(p, size, v);
    return true;
  }
  default: {
    bool neg;
    uint64_t mag;
    if (!hali_parse_integer(buf, &neg, &mag)) return false;
    if (neg ? mag > (1ull << 63) : false) return false;
    /* Signless integers also accept unsigned spellings (0xffffffff). */
    int64_t v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    if (!neg && mag > INT64_MAX && bits < 64) return false;
    if (bits < 64) {
      int64_t lo = -((int64_t)1 << (bits - 1));
      int64_t hi = (int64_t)((1ull << bits) - 1); /* signless: unsigned max */
      if (hali_hal_element_type_numerical_type(t) ==
          HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED)
        hi = ((int64_t)1 << (bits - 1)) - 1;
      if (v < lo || v > hi) return false;
    }
    store_bits(p, size, (uint64_t)v);
    return true;
  }
  }
}

/* ------------------------------------------------------------------------ */
/* Parsing. */

static hali_status_t element_count(const hali_tensor_t *t, uint64_t *count,
                                   size_t *bytes) {
  hali_hal_device_size_t size = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_compute_view_size(
      t->rank, t->shape, t->type, HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
      &size));
  uint32_t es = hali_hal_element_type_byte_size(t->type);
  *count = es ? size / es : 0;
  *bytes = (size_t)size;
  return HALI_OK;
}

/* "2x3xf32" -> shape and type. */
static hali_status_t parse_type(const char *s, size_t len, const char *what,
                                hali_tensor_t *t) {
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
      hali_status_t s2 = hali_hal_element_type_parse(part, rest, &t->type);
      if (s2)
        return hali_status_annotate(s2, "%s: in '%.*s'", what, (int)len, s);
      return HALI_OK;
    }
    if (t->rank == HALI_HAL_MAX_RANK)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s: rank above %d in '%.*s'", what,
                              HALI_HAL_MAX_RANK, (int)len, s);
    errno = 0;
    char *end;
    unsigned long long d = strtoull(part, &end, 10);
    if (errno || d > INT64_MAX)
      return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                              "%s: dimension '%.*s' is too large", what,
                              (int)plen, part);
    t->shape[t->rank++] = (hali_hal_dim_t)d;
    start = i + 1;
  }
  return HALI_OK;
}

static hali_status_t read_raw(const char *path, const char *what,
                              hali_tensor_t *t) {
  uint64_t count;
  size_t bytes;
  HALI_RETURN_IF_ERROR(element_count(t, &count, &bytes), "%s", what);
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR(hali_read_file(path, &data, &size), "%s", what);
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

hali_status_t hali_tensor_parse(const char *spec, const char *what,
                                hali_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  if (spec[0] == '@') return hali_tensor_read_npy(spec + 1, out);
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
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "%s: out of memory for %zu bytes", what, bytes);
  out->size = bytes;
  uint32_t es = hali_hal_element_type_byte_size(out->type);
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
      hali_tensor_free(out);
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s: more than the %" PRIu64
                              " values the shape holds",
                              what, count);
    }
    if (!parse_elem(out->type, start, (size_t)(p - start),
                    out->data + n * es)) {
      hali_hal_element_type_t type = out->type;
      hali_tensor_free(out);
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "%s: value %" PRIu64 " '%.*s' is not a valid %s",
                              what, n, (int)(p - start), start,
                              hali_hal_element_type_name(type));
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
    hali_tensor_free(out);
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: %" PRIu64 " value(s) given, the shape holds %"
                            PRIu64,
                            what, n, count);
  }
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* .npy */

static const struct {
  const char *descr;
  hali_hal_element_type_t type;
} npy_types[] = {
    {"b1", HALI_HAL_ELEMENT_TYPE_BOOL_8},   {"i1", HALI_HAL_ELEMENT_TYPE_INT_8},
    {"i2", HALI_HAL_ELEMENT_TYPE_INT_16},   {"i4", HALI_HAL_ELEMENT_TYPE_INT_32},
    {"i8", HALI_HAL_ELEMENT_TYPE_INT_64},   {"u1", HALI_HAL_ELEMENT_TYPE_UINT_8},
    {"u2", HALI_HAL_ELEMENT_TYPE_UINT_16},  {"u4", HALI_HAL_ELEMENT_TYPE_UINT_32},
    {"u8", HALI_HAL_ELEMENT_TYPE_UINT_64},  {"f2", HALI_HAL_ELEMENT_TYPE_FLOAT_16},
    {"f4", HALI_HAL_ELEMENT_TYPE_FLOAT_32}, {"f8", HALI_HAL_ELEMENT_TYPE_FLOAT_64},
    {"V2", HALI_HAL_ELEMENT_TYPE_BFLOAT_16},
};
#define NPY_TYPES (sizeof(npy_types) / sizeof(npy_types[0]))

static const char *npy_descr(hali_hal_element_type_t t) {
  switch (t) {
  case HALI_HAL_ELEMENT_TYPE_SINT_8: return "i1";
  case HALI_HAL_ELEMENT_TYPE_SINT_16: return "i2";
  case HALI_HAL_ELEMENT_TYPE_SINT_32: return "i4";
  case HALI_HAL_ELEMENT_TYPE_SINT_64: return "i8";
  case HALI_HAL_ELEMENT_TYPE_INT_1: return "b1";
  /* numpy has no bfloat16: 2-byte void, as ml_dtypes writes it. */
  case HALI_HAL_ELEMENT_TYPE_BFLOAT_16: return "V2";
  default: break;
  }
  for (size_t i = 0; i < NPY_TYPES; ++i)
    if (npy_types[i].type == t) return npy_types[i].descr;
  return NULL;
}

/* Finds 'key': in the header dict and returns the text after the colon. */
static const char *npy_find(const char *h, const char *key) {
  char pat[32];
  snprintf(pat, sizeof(pat), "'%s'", key);
  const char *k = strstr(h, pat);
  if (!k) return NULL;
  k += strlen(pat);
  while (*k == ' ') ++k;
  if (*k != ':') return NULL;
  ++k;
  while (*k == ' ') ++k;
  return k;
}

static hali_status_t npy_error(const char *path, const char *why) {
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "%s: not a valid .npy file: %s", path, why);
}

hali_status_t hali_tensor_read_npy(const char *path, hali_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR_PLAIN(hali_read_file(path, &data, &size));
  hali_status_t s = HALI_OK;
  char *header = NULL;
  if (size < 10 || memcmp(data, "\x93NUMPY", 6) != 0) {
    s = npy_error(path, "bad magic (expected \\x93NUMPY)");
    goto done;
  }
  uint8_t major = data[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)data[8] | ((size_t)data[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      s = npy_error(path, "truncated header");
      goto done;
    }
    hlen = load_bits(data + 8, 4);
    hstart = 12;
  } else {
    s = npy_error(path, "unsupported format version");
    goto done;
  }
  if (hlen > size - hstart) {
    s = npy_error(path, "header runs past the end of the file");
    goto done;
  }
  header = malloc(hlen + 1);
  if (!header) {
    s = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
    goto done;
  }
  memcpy(header, data + hstart, hlen);
  header[hlen] = 0;
  const char *d = npy_find(header, "descr");
  if (!d || (d[0] != '\'' && d[0] != '"') || strlen(d) < 4) {
    s = npy_error(path, "no 'descr' in the header");
    goto done;
  }
  char endian = d[1];
  if (endian == '>' && !(d[3] == '1' && d[4] == d[0])) {
    s = npy_error(path, "big-endian data is not supported");
    goto done;
  }
  const char *code = (endian == '<' || endian == '|' || endian == '=' ||
                      endian == '>')
                         ? d + 2
                         : d + 1;
  bool found = false;
  for (size_t i = 0; i < NPY_TYPES; ++i)
    if (strncmp(code, npy_types[i].descr, 2) == 0 && code[2] == d[0]) {
      out->type = npy_types[i].type;
      found = true;
    }
  if (!found) {
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "%s: unsupported .npy element type %.8s", path, d);
    goto done;
  }
  const char *fo = npy_find(header, "fortran_order");
  if (!fo || strncmp(fo, "False", 5) != 0) {
    s = npy_error(path, "only C order (fortran_order: False) is supported");
    goto done;
  }
  const char *sh = npy_find(header, "shape");
  if (!sh || *sh != '(') {
    s = npy_error(path, "no 'shape' tuple in the header");
    goto done;
  }
  ++sh;
  while (*sh && *sh != ')') {
    while (*sh == ' ' || *sh == ',') ++sh;
    if (*sh == ')') break;
    if (!isdigit((unsigned char)*sh) || out->rank == HALI_HAL_MAX_RANK) {
      s = npy_error(path, "bad shape");
      goto done;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(sh, &end, 10);
    if (errno || v > INT64_MAX) {
      s = npy_error(path, "dimension too large");
      goto done;
    }
    out->shape[out->rank++] = (hali_hal_dim_t)v;
    sh = end;
  }
  if (*sh != ')') {
    s = npy_error(path, "unterminated shape");
    goto done;
  }
  uint64_t count;
  size_t bytes;
  s = element_count(out, &count, &bytes);
  if (s) goto done;
  if (size - hstart - hlen != bytes) {
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "%s: .npy data is %zu bytes but the shape needs %zu",
                         path, size - hstart - hlen, bytes);
    goto done;
  }
  out->data = malloc(bytes ? bytes : 1);
  if (!out->data) {
    s = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
    goto done;
  }
  memcpy(out->data, data + hstart + hlen, bytes);
  out->size = bytes;
done:
  free(header);
  free(data);
  return s;
}

hali_status_t hali_tensor_write_npy(const hali_tensor_t *t, FILE *f) {
  const char *descr = npy_descr(t->type);
  if (!descr)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s has no .npy equivalent",
                            hali_hal_element_type_name(t->type));
  char shape[HALI_HAL_MAX_RANK * 24 + 4] = "";
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

void hali_tensor_format(const hali_tensor_t *t, size_t max_elements,
                        hali_strbuf_t *sb) {
  for (size_t i = 0; i < t->rank; ++i)
    hali_strbuf_printf(sb, "%" PRId64 "x", t->shape[i]);
  hali_strbuf_printf(sb, "%s=", hali_hal_element_type_name(t->type));
  uint32_t es = hali_hal_element_type_byte_size(t->type);
  uint64_t count = es ? t->size / es : 0;
  /* Row-major strides in elements, for brackets. */
  uint64_t stride[HALI_HAL_MAX_RANK];
  uint64_t acc = 1;
  for (size_t i = t->rank; i-- > 0;) {
    stride[i] = acc;
    acc *= (uint64_t)t->shape[i];
  }
  char buf[64];
  for (uint64_t e = 0; e < count; ++e) {
    if (e == max_elements) {
      hali_strbuf_append(sb, "...", 3);
      return;
    }
    /* Dims 0..rank-2 get brackets (rank 1 prints a flat list). */
    size_t opens = 0;
    for (size_t d = 0; d + 1 < t->rank; ++d)
      if (e % stride[d] == 0) opens++;
    for (size_t k = 0; k < opens; ++k) hali_strbuf_append(sb, "[", 1);
    if (e && !opens) hali_strbuf_append(sb, " ", 1);
    format_elem(t->type, t->data + e * es, buf, sizeof(buf));
    hali_strbuf_printf(sb, "%s", buf);
    for (size_t d = 0; d + 1 < t->rank; ++d)
      if ((e + 1) % stride[d] == 0) hali_strbuf_append(sb, "]", 1);
  }
}

hali_status_t hali_tensor_compare(const hali_tensor_t *a,
                                  const hali_tensor_t *x, double f32_threshold,
                                  double f64_threshold) {
  bool same_shape = a->rank == x->rank && a->type == x->type;
  for (size_t i = 0; same_shape && i < a->rank; ++i)
    same_shape = a->shape[i] == x->shape[i];
  if (!same_shape) {
    hali_strbuf_t sa = {0}, sx = {0};
    hali_tensor_t ta = *a, tx = *x;
    ta.size = tx.size = 0; /* print only the type */
    hali_tensor_format(&ta, 0, &sa);
    hali_tensor_format(&tx, 0, &sx);
    char *pa = hali_strbuf_take(&sa), *px = hali_strbuf_take(&sx);
    hali_status_t s = hali_status_make(
        HALI_STATUS_FAILED_PRECONDITION,
        "metadata %.*s does not match the expected %.*s",
        pa ? (int)strlen(pa) - 1 : 0, pa ? pa : "",
        px ? (int)strlen(px) - 1 : 0, px ? px : "");
    free(pa);
    free(px);
    return s;
  }
  uint32_t es = hali_hal_element_type_byte_size(a->type);
  uint64_t count = es ? a->size / es : 0;
  bool single = a->type != HALI_HAL_ELEMENT_TYPE_FLOAT_64;
  double threshold = single ? f32_threshold : f64_threshold;
  for (uint64_t e = 0; e < count; ++e) {
    const uint8_t *pa = a->data + e * es, *px = x->data + e * es;
    bool match;
    if (elem_kind(a->type) == EK_FLOAT) {
      double va = elem_to_double(a->type, pa), vx = elem_to_double(a->type, px);
      match = (isnan(va) && isnan(vx)) || va == vx ||
              fabs(va - vx) <= threshold;
    } else {
      match = memcmp(pa, px, es) == 0;
    }
    if (!match) {
      char ba[64], bx[64];
      format_elem(a->type, pa, ba, sizeof(ba));
      format_elem(a->type, px, bx, sizeof(bx));
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

hali_status_t hali_tensor_to_view(const hali_tensor_t *t,
                                  hali_hal_allocator_t *allocator,
                                  hali_hal_buffer_view_t **out) {
  *out = NULL;
  hali_hal_buffer_params_t params = hali_hal_host_tensor_params();
  hali_hal_buffer_t *buffer = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_allocator_allocate_buffer(allocator, params, t->size, &buffer));
  hali_status_t s = t->size ? hali_hal_buffer_write(buffer, 0, t->data, t->size)
                            : HALI_OK;
  if (!s)
    s = hali_hal_buffer_view_create(buffer, t->rank, t->shape, t->type,
                                    HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                                    out);
  hali_hal_buffer_release(buffer);
  return s;
}

hali_status_t hali_tensor_from_view(hali_hal_buffer_view_t *v,
                                    hali_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = hali_hal_buffer_view_element_type(v);
  out->rank = hali_hal_buffer_view_rank(v);
  if (out->rank > HALI_HAL_MAX_RANK)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE, "rank %zu", out->rank);
  memcpy(out->shape, hali_hal_buffer_view_shape(v),
         out->rank * sizeof(hali_hal_dim_t));
  size_t bytes = (size_t)hali_hal_buffer_view_byte_length(v);
  out->data = malloc(bytes ? bytes : 1);
  if (!out->data) return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED, "oom");
  out->size = bytes;
  hali_status_t s =
      bytes ? hali_hal_buffer_read(hali_hal_buffer_view_buffer(v), 0, out->data,
                                   bytes)
            : HALI_OK;
  if (s) hali_tensor_free(out);
  return s;
}
