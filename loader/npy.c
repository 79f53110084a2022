/* hali loader — the .npy header (see loader/npy.h). */
#include "loader/npy.h"
#include "base/alloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/buffer_view.h"

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

const char *hali_npy_type_descr(hali_hal_element_type_t t) {
  switch (t) {
  case HALI_HAL_ELEMENT_TYPE_SINT_8: return "i1";
  case HALI_HAL_ELEMENT_TYPE_SINT_16: return "i2";
  case HALI_HAL_ELEMENT_TYPE_SINT_32: return "i4";
  case HALI_HAL_ELEMENT_TYPE_SINT_64: return "i8";
  case HALI_HAL_ELEMENT_TYPE_INT_1: return "b1";
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

hali_status_t hali_npy_parse_header(const uint8_t *data, size_t size,
                                    const char *path, hali_npy_header_t *out) {
  memset(out, 0, sizeof(*out));
  if (size < 10 || memcmp(data, "\x93NUMPY", 6) != 0)
    return npy_error(path, "bad magic (expected \\x93NUMPY)");
  uint8_t major = data[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)data[8] | ((size_t)data[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return npy_error(path, "truncated header");
    hlen = (size_t)data[8] | ((size_t)data[9] << 8) |
           ((size_t)data[10] << 16) | ((size_t)data[11] << 24);
    hstart = 12;
  } else {
    return npy_error(path, "unsupported format version");
  }
  if (hlen > size - hstart)
    return npy_error(path, "header runs past the end of the file");
  /* The header as a C string (it may hold NULs; strstr stops there). */
  char *header = hali_malloc(hlen + 1);
  if (!header) return hali_status_annotate(hali_status_oom(), "%s", path);
  memcpy(header, data + hstart, hlen);
  header[hlen] = 0;
  hali_status_t s = HALI_OK;
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
      out->element_type = npy_types[i].type;
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
    if (!isdigit((unsigned char)*sh) || out->rank == HALI_NPY_MAX_RANK) {
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
    out->shape[out->rank++] = (int64_t)v;
    sh = end;
  }
  if (*sh != ')') {
    s = npy_error(path, "unterminated shape");
    goto done;
  }
  hali_hal_device_size_t bytes = 0;
  s = hali_hal_buffer_compute_view_size(out->rank, out->shape,
                                        out->element_type,
                                        HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                                        &bytes);
  if (s) {
    s = hali_status_annotate(s, "%s", path);
    goto done;
  }
  size_t have = size - hstart - hlen;
  if (have != bytes) {
    s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                         "%s: .npy data is %zu bytes but the shape needs "
                         "%llu",
                         path, have, (unsigned long long)bytes);
    goto done;
  }
  out->data_offset = hstart + hlen;
  out->data_length = have;
done:
  hali_free(header);
  if (s) memset(out, 0, sizeof(*out));
  return s;
}
