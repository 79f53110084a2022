/* hali HAL — buffer views and element types (see hal/buffer_view.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/buffer_view.h"
#include "base/alloc.h"

struct hali_hal_buffer_view_t {
  hali_ref_t ref;
  hali_hal_buffer_t *buffer; /* retained */
  hali_hal_element_type_t element_type;
  hali_hal_encoding_type_t encoding_type;
  uint64_t element_count;
  hali_hal_device_size_t byte_length;
  size_t rank;
  hali_hal_dim_t shape[]; /* |rank| dims */
};

static const struct {
  const char *name;
  hali_hal_element_type_t type;
} hali_hal_element_type_table[] = {
#define HALI_X(name, id, nt, bits) {name, HALI_HAL_ELEMENT_TYPE_##id},
    HALI_HAL_ELEMENT_TYPES(HALI_X)
#undef HALI_X
};
#define HALI_HAL_ELEMENT_TYPE_TABLE_SIZE                                       \
  (sizeof(hali_hal_element_type_table) / sizeof(hali_hal_element_type_table[0]))

bool hali_hal_element_type_is_known(hali_hal_element_type_t type) {
  return hali_hal_element_type_name(type) != NULL;
}

const char *hali_hal_element_type_name(hali_hal_element_type_t type) {
  for (size_t i = 0; i < HALI_HAL_ELEMENT_TYPE_TABLE_SIZE; ++i)
    if (hali_hal_element_type_table[i].type == type)
      return hali_hal_element_type_table[i].name;
  return NULL;
}

hali_status_t hali_hal_element_type_parse(const char *text, size_t length,
                                          hali_hal_element_type_t *out_type) {
  *out_type = HALI_HAL_ELEMENT_TYPE_NONE;
  const char *name = text;
  size_t name_length = length;
  char alias[8];
  /* "ui8" is the MLIR spelling of "u8". */
  if (length >= 3 && length < sizeof(alias) && text[0] == 'u' &&
      text[1] == 'i') {
    alias[0] = 'u';
    memcpy(alias + 1, text + 2, length - 2);
    name = alias;
    name_length = length - 1;
  }
  for (size_t i = 0; i < HALI_HAL_ELEMENT_TYPE_TABLE_SIZE; ++i) {
    const char *candidate = hali_hal_element_type_table[i].name;
    if (strlen(candidate) == name_length &&
        memcmp(candidate, name, name_length) == 0) {
      *out_type = hali_hal_element_type_table[i].type;
      return HALI_OK;
    }
  }
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "unknown element type '%.*s'", (int)length, text);
}

hali_status_t hali_hal_buffer_compute_view_size(
    size_t rank, const hali_hal_dim_t *shape,
    hali_hal_element_type_t element_type,
    hali_hal_encoding_type_t encoding_type,
    hali_hal_device_size_t *out_byte_length) {
  *out_byte_length = 0;
  if (!hali_hal_element_type_is_known(element_type))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown element type 0x%08x", element_type);
  if (encoding_type != HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unsupported encoding type %u (only dense "
                            "row-major, %u, has a computable size)",
                            encoding_type,
                            (unsigned)HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR);
  if (rank > HALI_HAL_MAX_RANK)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "rank %zu exceeds the maximum of %d", rank,
                            HALI_HAL_MAX_RANK);
  uint64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "dim %zu is negative (%" PRId64 ")", i, shape[i]);
    uint64_t next;
    if (__builtin_mul_overflow(count, (uint64_t)shape[i], &next))
      return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                              "element count overflows 64 bits at dim %zu "
                              "(%" PRIu64 " x %" PRId64 ")",
                              i, count, shape[i]);
    count = next;
  }
  uint64_t bytes;
  uint32_t element_size = hali_hal_element_type_byte_size(element_type);
  if (__builtin_mul_overflow(count, (uint64_t)element_size, &bytes))
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "byte size overflows 64 bits (%" PRIu64
                            " elements of %u bytes)",
                            count, element_size);
  *out_byte_length = bytes;
  return HALI_OK;
}

static void hali_hal_buffer_view_destroy(hali_ref_t *ref) {
  hali_hal_buffer_view_t *view = (hali_hal_buffer_view_t *)ref;
  hali_hal_buffer_release(view->buffer);
  hali_free(view);
}

static const hali_ref_vtable_t hali_hal_buffer_view_vtable = {
    .destroy = hali_hal_buffer_view_destroy,
};

hali_status_t hali_hal_buffer_view_create_untraced(
    hali_hal_buffer_t *buffer, size_t rank, const hali_hal_dim_t *shape,
    hali_hal_element_type_t element_type,
    hali_hal_encoding_type_t encoding_type, hali_hal_buffer_view_t **out_view) {
  *out_view = NULL;
  hali_hal_device_size_t byte_length = 0;
  HALI_RETURN_IF_ERROR(hali_hal_buffer_compute_view_size(
                           rank, shape, element_type, encoding_type,
                           &byte_length),
                       "creating a buffer view");
  if (byte_length > hali_hal_buffer_length(buffer))
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "buffer view needs %" PRIu64
                            " bytes but the buffer has %" PRIu64,
                            byte_length, hali_hal_buffer_length(buffer));
  hali_hal_buffer_view_t *view =
      hali_calloc(1, sizeof(*view) + rank * sizeof(hali_hal_dim_t));
  if (!view)
    return hali_status_annotate(hali_status_oom(), "creating a buffer view");
  hali_ref_init(&view->ref, HALI_TYPE_BUFFER_VIEW,
                &hali_hal_buffer_view_vtable);
  view->buffer = buffer;
  hali_hal_buffer_retain(buffer);
  view->element_type = element_type;
  view->encoding_type = encoding_type;
  view->byte_length = byte_length;
  view->rank = rank;
  view->element_count = 1;
  for (size_t i = 0; i < rank; ++i) {
    view->shape[i] = shape[i];
    view->element_count *= (uint64_t)shape[i]; /* proven not to overflow */
  }
  *out_view = view;
  return HALI_OK;
}

hali_status_t hali_hal_buffer_view_create(
    hali_hal_buffer_t *buffer, size_t rank, const hali_hal_dim_t *shape,
    hali_hal_element_type_t element_type,
    hali_hal_encoding_type_t encoding_type, hali_hal_buffer_view_t **out_view) {
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_view_create_untraced(
      buffer, rank, shape, element_type, encoding_type, out_view));
  const hali_hal_tracer_t *t = hali_hal_buffer_tracer(buffer);
  if (HALI_UNLIKELY(t != NULL)) {
    char type[HALI_HAL_MAX_RANK * 21 + 16];
    hali_hal_tracer_printf(
        t, "[hal] buffer_view.create !hal.buffer#%u %s -> !hal.buffer_view#%u",
        hali_hal_trace_id(buffer),
        hali_hal_buffer_view_format_type(*out_view, type, sizeof(type)),
        hali_hal_trace_id(*out_view));
  }
  return HALI_OK;
}

void hali_hal_buffer_view_retain(hali_hal_buffer_view_t *view) {
  if (view) hali_ref_retain(&view->ref);
}

void hali_hal_buffer_view_release(hali_hal_buffer_view_t *view) {
  if (view) hali_ref_release(&view->ref);
}

hali_hal_buffer_t *hali_hal_buffer_view_buffer(
    const hali_hal_buffer_view_t *view) {
  return view->buffer;
}

size_t hali_hal_buffer_view_rank(const hali_hal_buffer_view_t *view) {
  return view->rank;
}

hali_hal_dim_t hali_hal_buffer_view_dim(const hali_hal_buffer_view_t *view,
                                        size_t i) {
  return i < view->rank ? view->shape[i] : 0;
}

const hali_hal_dim_t *hali_hal_buffer_view_shape(
    const hali_hal_buffer_view_t *view) {
  return view->shape;
}

hali_hal_element_type_t hali_hal_buffer_view_element_type(
    const hali_hal_buffer_view_t *view) {
  return view->element_type;
}

hali_hal_encoding_type_t hali_hal_buffer_view_encoding_type(
    const hali_hal_buffer_view_t *view) {
  return view->encoding_type;
}

uint64_t hali_hal_buffer_view_element_count(
    const hali_hal_buffer_view_t *view) {
  return view->element_count;
}

hali_hal_device_size_t hali_hal_buffer_view_byte_length(
    const hali_hal_buffer_view_t *view) {
  return view->byte_length;
}

const char *hali_hal_buffer_view_format_type(const hali_hal_buffer_view_t *view,
                                             char *buf, size_t cap) {
  size_t used = 0;
  if (cap == 0) return buf;
  buf[0] = 0;
  for (size_t i = 0; i < view->rank && used < cap; ++i) {
    int n = snprintf(buf + used, cap - used, "%" PRId64 "x", view->shape[i]);
    if (n < 0) return buf;
    used += (size_t)n;
  }
  if (used < cap) {
    const char *name = hali_hal_element_type_name(view->element_type);
    if (name)
      snprintf(buf + used, cap - used, "%s", name);
    else
      snprintf(buf + used, cap - used, "0x%08x", view->element_type);
  }
  return buf;
}
