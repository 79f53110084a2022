/* hali — the C API: variants <-> VM values, buffer view elements as text
 * and numbers, buffer views, fences (api/api_int.h). */
#include "hal/validate.h"
#include "api/api_int.h"

/* ------------------------------------------------------------------------ */
/* Variants <-> VM values. */

void hali_variant_release(hali_variant_t *v) {
  if (!v) return;
  if (v->type >= HALI_VARIANT_DEVICE && v->u.ref)
    hali_ref_release((hali_ref_t *)v->u.ref);
  memset(v, 0, sizeof(*v));
}

const char *hali_variant_type_name(hali_variant_type_t type) {
  if (type < 0 || type > 255 || !hali_type_is_valid((hali_type_t)type))
    return "?";
  return hali_type_name((hali_type_t)type);
}

void hali_api_value_to_variant(const hali_value_t *v, hali_variant_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = (hali_variant_type_t)v->type;
  switch (v->type) {
  case HALI_TYPE_I32: out->u.i32 = v->i32; break;
  case HALI_TYPE_I64: out->u.i64 = v->i64; break;
  case HALI_TYPE_F32: out->u.f32 = v->f32; break;
  case HALI_TYPE_F64: out->u.f64 = v->f64; break;
  default:
    out->u.ref = v->ref;
    /* A fence the host holds is one it may signal (deadlock detection,
     * hal/semaphore.h). */
    if (v->type == HALI_TYPE_FENCE)
      hali_hal_fence_mark_host_visible((hali_hal_fence_t *)v->ref);
    break;
  }
}

/* Checks |args| against |f|'s parameters and converts them (refs
 * borrowed). */
hali_status_t hali_api_variants_to_values(const hali_ir_func_t *f,
                                        const hali_variant_t *args,
                                        size_t count, hali_value_t *out) {
  if (count != f->param_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s takes %u argument(s), %zu given", f->name,
                            f->param_count, count);
  if (count && !args)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s: the argument array is NULL", f->name);
  for (size_t i = 0; i < count; ++i) {
    hali_type_t want = f->reg_types[i];
    if ((int)args[i].type != (int)want)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "@%s argument %zu: expected %s, got %s", f->name,
                              i, hali_type_name(want),
                              hali_variant_type_name(args[i].type));
    memset(&out[i], 0, sizeof(out[i]));
    out[i].type = want;
    switch (want) {
    case HALI_TYPE_I32: out[i].i32 = args[i].u.i32; break;
    case HALI_TYPE_I64: out[i].i64 = args[i].u.i64; break;
    case HALI_TYPE_F32: out[i].f32 = args[i].u.f32; break;
    case HALI_TYPE_F64: out[i].f64 = args[i].u.f64; break;
    default: {
      hali_ref_t *ref = args[i].u.ref;
      if (!ref)
        return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "@%s argument %zu: NULL %s", f->name, i,
                                hali_type_name(want));
      /* The object's own tag, not the host's label, decides. */
      if (ref->type != want)
        return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "@%s argument %zu: labelled %s but the object "
                                "is a %s",
                                f->name, i, hali_type_name(want),
                                hali_type_name(ref->type));
      /* A mutable tensor parameter gets the function's result written
       * into its storage (doc/passes.md, "Value semantics"): never into
       * a read-only import, a constant or a parameter mapping. */
      if (want == HALI_TYPE_BUFFER_VIEW && f->param_flags &&
          (f->param_flags[i] & HALI_PARAM_MUTABLE)) {
        hali_status_t w = hali_hal_buffer_check_writable(
            hali_hal_buffer_view_buffer((hali_hal_buffer_view_t *)ref));
        if (w) {
          char rn[64];
          return hali_status_annotate(
              w, "@%s argument %zu (%s) is a mutable parameter: the function "
                 "writes into its storage",
              f->name, i, hali_ir_reg_name(f, (uint32_t)i, rn, sizeof(rn)));
        }
      }
      out[i].ref = ref;
      /* The host passed it in: it may signal it (hal/semaphore.h). */
      if (want == HALI_TYPE_FENCE)
        hali_hal_fence_mark_host_visible((hali_hal_fence_t *)ref);
    }
    }
  }
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* Elements: one value of a buffer view, as text and as a number. */

const char *hali_element_type_name(hali_element_type_t type) {
  return hali_hal_element_type_name(type);
}

hali_status_t hali_element_type_parse(const char *text, size_t length,
                                      hali_element_type_t *out_type) {
  CHECK_ARG(out_type);
  *out_type = 0;
  if (length) CHECK_ARG(text);
  return hali_hal_element_type_parse(text ? text : "", length, out_type);
}

typedef enum { EK_SIGNED, EK_UNSIGNED, EK_BOOL, EK_FLOAT } elem_kind_t;

static elem_kind_t elem_kind(hali_element_type_t t) {
  switch (hali_hal_element_type_numerical_type(t)) {
  case HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED: return EK_UNSIGNED;
  case HALI_HAL_NUMERICAL_TYPE_BOOLEAN: return EK_BOOL;
  case HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE:
  case HALI_HAL_NUMERICAL_TYPE_FLOAT_BRAIN: return EK_FLOAT;
  default: return EK_SIGNED; /* signless and signed integers */
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

static double float_elem(hali_element_type_t t, const uint8_t *p) {
  uint64_t bits = load_bits(p, hali_hal_element_type_byte_size(t));
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
  default: return NAN;
  }
}

/* Integers as int64 (signed, signless) or uint64 bits (unsigned, bool). */
static int64_t int_elem(hali_element_type_t t, const uint8_t *p) {
  uint32_t size = hali_hal_element_type_byte_size(t);
  uint64_t bits = load_bits(p, size);
  if (elem_kind(t) != EK_SIGNED || size == 8) return (int64_t)bits;
  uint32_t shift = 64 - 8 * size;
  return (int64_t)(bits << shift) >> shift;
}

void hali_element_format(hali_element_type_t type, const void *element,
                         char *buffer, size_t capacity) {
  if (!buffer || !capacity) return;
  if (!element || !hali_hal_element_type_is_known(type)) {
    snprintf(buffer, capacity, "?");
    return;
  }
  const uint8_t *p = element;
  switch (elem_kind(type)) {
  case EK_FLOAT:
    hali_format_float(buffer, capacity, float_elem(type, p),
                      type == HALI_HAL_ELEMENT_TYPE_FLOAT_16    ? HALI_FLOAT_F16
                      : type == HALI_HAL_ELEMENT_TYPE_BFLOAT_16 ? HALI_FLOAT_BF16
                      : type == HALI_HAL_ELEMENT_TYPE_FLOAT_32  ? HALI_FLOAT_F32
                                                                : HALI_FLOAT_F64,
                      false);
    break;
  case EK_UNSIGNED:
  case EK_BOOL:
    snprintf(buffer, capacity, "%" PRIu64, (uint64_t)int_elem(type, p));
    break;
  default:
    snprintf(buffer, capacity, "%" PRId64, int_elem(type, p));
  }
}

double hali_element_to_f64(hali_element_type_t type, const void *element) {
  if (!element || !hali_hal_element_type_is_known(type)) return NAN;
  switch (elem_kind(type)) {
  case EK_FLOAT: return float_elem(type, element);
  case EK_UNSIGNED:
  case EK_BOOL: return (double)(uint64_t)int_elem(type, element);
  default: return (double)int_elem(type, element);
  }
}

/* Parses NUL-terminated |buf| as an element of |t| into |p|. */
static bool parse_elem(hali_element_type_t t, const char *buf, uint8_t *p) {
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
    if (neg && mag > (1ull << 63)) return false;
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

hali_status_t hali_element_parse(hali_element_type_t type, const char *text,
                                 size_t length, void *out_element) {
  CHECK_ARG(out_element);
  if (length) CHECK_ARG(text);
  const char *name = hali_hal_element_type_name(type);
  if (!name)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown element type 0x%08x", type);
  /* No number needs more; longer text is not a valid element. */
  char buf[96];
  bool ok = length > 0 && length < sizeof(buf);
  if (ok) {
    memcpy(buf, text, length);
    buf[length] = 0;
    ok = parse_elem(type, buf, out_element);
  }
  if (ok) return HALI_OK;
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "'%.*s' is not a valid %s", (int)length,
                          text ? text : "", name);
}

/* ------------------------------------------------------------------------ */
/* Buffer views. */

hali_status_t hali_buffer_view_compute_size(hali_element_type_t element_type,
                                            size_t rank, const int64_t *shape,
                                            uint64_t *out_byte_length) {
  CHECK_ARG(out_byte_length);
  *out_byte_length = 0;
  if (rank) CHECK_ARG(shape);
  hali_hal_device_size_t bytes = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_compute_view_size(
      rank, shape, element_type, HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
      &bytes));
  *out_byte_length = bytes;
  return HALI_OK;
}

hali_status_t hali_buffer_view_create(hali_device_t *device,
                                      hali_element_type_t element_type,
                                      size_t rank, const int64_t *shape,
                                      const void *data, size_t data_size,
                                      hali_buffer_view_t **out_view) {
  CHECK_ARG(out_view);
  *out_view = NULL;
  CHECK_ARG(device);
  if (rank) CHECK_ARG(shape);
  if (!hali_hal_element_type_is_known(element_type))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown element type 0x%08x", element_type);
  hali_hal_device_size_t bytes = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_buffer_compute_view_size(
      rank, shape, element_type, HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
      &bytes));
  if (data && data_size != bytes)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "a view of that shape and element type holds "
                            "%llu bytes; %zu given",
                            (unsigned long long)bytes, data_size);
  hali_hal_buffer_params_t params = hali_hal_host_tensor_params();
  hali_hal_buffer_t *buffer = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_allocator_allocate_buffer(
      hali_hal_device_allocator(device->hal), params, bytes, &buffer));
  hali_status_t s = data && bytes
                        ? hali_hal_buffer_write(buffer, 0, data, (size_t)bytes)
                        : HALI_OK;
  if (!s)
    s = hali_hal_buffer_view_create_untraced(
        buffer, rank, shape, element_type,
        HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, out_view);
  hali_hal_buffer_release(buffer);
  return s;
}

void hali_buffer_view_retain(hali_buffer_view_t *view) {
  if (view) hali_hal_buffer_view_retain(view);
}
void hali_buffer_view_release(hali_buffer_view_t *view) {
  if (view) hali_hal_buffer_view_release(view);
}
size_t hali_buffer_view_rank(const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_rank(view) : 0;
}
int64_t hali_buffer_view_dim(const hali_buffer_view_t *view, size_t i) {
  return view ? hali_hal_buffer_view_dim(view, i) : 0;
}
hali_element_type_t hali_buffer_view_element_type(
    const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_element_type(view) : 0;
}
uint64_t hali_buffer_view_element_count(const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_element_count(view) : 0;
}
uint64_t hali_buffer_view_byte_length(const hali_buffer_view_t *view) {
  return view ? hali_hal_buffer_view_byte_length(view) : 0;
}

hali_status_t hali_buffer_view_read(const hali_buffer_view_t *view,
                                    void *target, size_t target_size) {
  CHECK_ARG(view);
  uint64_t bytes = hali_hal_buffer_view_byte_length(view);
  if (bytes) CHECK_ARG(target);
  if (target_size < bytes)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "the view holds %llu bytes; the target has room "
                            "for %zu",
                            (unsigned long long)bytes, target_size);
  if (!bytes) return HALI_OK;
  return hali_hal_buffer_read(hali_hal_buffer_view_buffer(view), 0, target,
                              (size_t)bytes);
}

/* ------------------------------------------------------------------------ */
/* Fences. */

hali_status_t hali_fence_create(hali_fence_t **out_fence) {
  CHECK_ARG(out_fence);
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_fence_create_pending(out_fence));
  hali_hal_fence_mark_host_visible(*out_fence);
  return HALI_OK;
}
void hali_fence_retain(hali_fence_t *fence) {
  if (fence) hali_hal_fence_retain(fence);
}
void hali_fence_release(hali_fence_t *fence) {
  if (fence) hali_hal_fence_release(fence);
}
hali_status_t hali_fence_signal(hali_fence_t *fence) {
  CHECK_ARG(fence);
  return hali_hal_fence_signal_untraced(fence);
}
void hali_fence_fail(hali_fence_t *fence, hali_status_t status) {
  if (!fence) {
    hali_status_free(status);
    return;
  }
  if (!status)
    status = hali_status_make(HALI_STATUS_UNKNOWN, "failed by the host");
  hali_hal_fence_fail_untraced(fence, status);
}
hali_status_t hali_fence_query(hali_fence_t *fence, bool *out_ready) {
  CHECK_ARG(out_ready);
  *out_ready = false;
  CHECK_ARG(fence);
  hali_status_t s = hali_hal_fence_query_untraced(fence, out_ready);
  if (!s && *out_ready) hali_hal_validate_observe_fence(fence);
  return s;
}
hali_status_t hali_fence_await(hali_fence_t *fence, int64_t timeout_ns) {
  CHECK_ARG(fence);
  hali_status_t s = hali_hal_fence_await_untraced(fence, timeout_ns);
  if (!s) hali_hal_validate_observe_fence(fence);
  return s;
}

/* ------------------------------------------------------------------------ */
/* Host memory without copies. */

/* What a write into a read-only import quotes (hal/buffer.h). */
static const char import_label[] =
    "host memory imported read-only (hali_buffer_view_import)";

/* The host's release callback, armed once the import succeeded: a failed
 * import leaves the memory the caller's without calling it. */
typedef struct {
  hali_release_callback_t release;
  void *user;
  bool armed;
} import_owner_t;

static void import_release(void *user) {
  import_owner_t *o = user;
  if (o->armed && o->release) o->release(o->user);
  hali_free(o);
}

hali_status_t hali_buffer_view_import(
    hali_element_type_t element_type, size_t rank, const int64_t *shape,
    void *data, size_t data_size, hali_import_access_t access,
    hali_release_callback_t release, void *user,
    hali_buffer_view_t **out_view) {
  CHECK_ARG(out_view);
  *out_view = NULL;
  if (rank) CHECK_ARG(shape);
  if (access != HALI_IMPORT_READ_ONLY && access != HALI_IMPORT_READ_WRITE)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: unknown access %d (expected "
                            "HALI_IMPORT_READ_ONLY or HALI_IMPORT_READ_WRITE)",
                            __func__, (int)access);
  if (!hali_hal_element_type_is_known(element_type))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: unknown element type 0x%08x", __func__,
                            element_type);
  hali_hal_device_size_t bytes = 0;
  HALI_RETURN_IF_ERROR(hali_hal_buffer_compute_view_size(
                           rank, shape, element_type,
                           HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &bytes),
                       "%s", __func__);
  if (bytes > SIZE_MAX || data_size != (size_t)bytes)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: a dense view of that shape and element type "
                            "holds %llu bytes; %zu given",
                            __func__, (unsigned long long)bytes, data_size);
  if (bytes) CHECK_ARG(data);
  /* Natural alignment: every element is then a valid object of its C
   * type for kernels and the interpreter's loads. */
  size_t align = hali_hal_element_type_byte_size(element_type);
  if (align & (align - 1)) align = 1;
  if ((uintptr_t)data % align)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: data at %p is not aligned to the %zu bytes "
                            "of a %s element",
                            __func__, data, align,
                            hali_hal_element_type_name(element_type));
  import_owner_t *owner = hali_calloc(1, sizeof(*owner));
  if (!owner) return oom();
  owner->release = release;
  owner->user = user;
  hali_hal_buffer_t *buffer = NULL;
  hali_status_t s = hali_hal_buffer_wrap_host(
      hali_hal_host_tensor_params(), data, bytes,
      access == HALI_IMPORT_READ_ONLY ? import_label : NULL, import_release,
      owner, &buffer);
  if (s) {
    hali_free(owner);
    return s;
  }
  s = hali_hal_buffer_view_create_untraced(
      buffer, rank, shape, element_type,
      HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, out_view);
  /* From here on the last reference calls |release|; before, the view's
   * failure frees the buffer without it. */
  if (!s) owner->armed = true;
  hali_hal_buffer_release(buffer);
  return s;
}

bool hali_buffer_view_is_writable(const hali_buffer_view_t *view) {
  if (!view) return false;
  hali_status_t s =
      hali_hal_buffer_check_writable(hali_hal_buffer_view_buffer(view));
  bool writable = s == HALI_OK;
  hali_status_free(s);
  return writable;
}

hali_status_t hali_buffer_view_map(hali_buffer_view_t *view, bool writable,
                                   void **out_data, size_t *out_size) {
  CHECK_ARG(out_data);
  *out_data = NULL;
  CHECK_ARG(out_size);
  *out_size = 0;
  CHECK_ARG(view);
  hali_hal_buffer_t *buffer = hali_hal_buffer_view_buffer(view);
  uint64_t bytes = hali_hal_buffer_view_byte_length(view);
  if (bytes > SIZE_MAX)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: the view's %llu bytes do not fit in a size_t",
                            __func__, (unsigned long long)bytes);
  if (writable)
    HALI_RETURN_IF_ERROR(hali_hal_buffer_check_writable(buffer),
                         "%s: mapping for writing", __func__);
  void *p = NULL;
  HALI_RETURN_IF_ERROR(hali_hal_buffer_map_range(buffer, 0, bytes, &p),
                       "%s", __func__);
  *out_data = p;
  *out_size = (size_t)bytes;
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* The element types, enumerable. */

/* Every element type hali knows (base/hal_bits.h) has its public
 * HALI_ELEMENT_TYPE_* define, with the same value: the CLI, the text
 * format and the API share one list. */
#define HALI_X(name, id, nt, bits) +1
enum { KNOWN_ELEMENT_TYPES = 0 HALI_HAL_ELEMENT_TYPES(HALI_X) };
#undef HALI_X
_Static_assert(KNOWN_ELEMENT_TYPES == 18,
               "an element type without a public HALI_ELEMENT_TYPE_* define");
_Static_assert(HALI_ELEMENT_TYPE_I1 == HALI_HAL_ELEMENT_TYPE_INT_1 &&
                   HALI_ELEMENT_TYPE_I8 == HALI_HAL_ELEMENT_TYPE_INT_8 &&
                   HALI_ELEMENT_TYPE_I16 == HALI_HAL_ELEMENT_TYPE_INT_16 &&
                   HALI_ELEMENT_TYPE_I32 == HALI_HAL_ELEMENT_TYPE_INT_32 &&
                   HALI_ELEMENT_TYPE_I64 == HALI_HAL_ELEMENT_TYPE_INT_64 &&
                   HALI_ELEMENT_TYPE_SI8 == HALI_HAL_ELEMENT_TYPE_SINT_8 &&
                   HALI_ELEMENT_TYPE_SI16 == HALI_HAL_ELEMENT_TYPE_SINT_16 &&
                   HALI_ELEMENT_TYPE_SI32 == HALI_HAL_ELEMENT_TYPE_SINT_32 &&
                   HALI_ELEMENT_TYPE_SI64 == HALI_HAL_ELEMENT_TYPE_SINT_64 &&
                   HALI_ELEMENT_TYPE_U8 == HALI_HAL_ELEMENT_TYPE_UINT_8 &&
                   HALI_ELEMENT_TYPE_U16 == HALI_HAL_ELEMENT_TYPE_UINT_16 &&
                   HALI_ELEMENT_TYPE_U32 == HALI_HAL_ELEMENT_TYPE_UINT_32 &&
                   HALI_ELEMENT_TYPE_U64 == HALI_HAL_ELEMENT_TYPE_UINT_64 &&
                   HALI_ELEMENT_TYPE_BOOL == HALI_HAL_ELEMENT_TYPE_BOOL_8 &&
                   HALI_ELEMENT_TYPE_F16 == HALI_HAL_ELEMENT_TYPE_FLOAT_16 &&
                   HALI_ELEMENT_TYPE_F32 == HALI_HAL_ELEMENT_TYPE_FLOAT_32 &&
                   HALI_ELEMENT_TYPE_F64 == HALI_HAL_ELEMENT_TYPE_FLOAT_64 &&
                   HALI_ELEMENT_TYPE_BF16 == HALI_HAL_ELEMENT_TYPE_BFLOAT_16,
               "a public element type define differs from the HAL's code");

hali_element_type_t hali_element_type_at(size_t i) {
  static const hali_element_type_t all[] = {
#define HALI_X(name, id, nt, bits) HALI_HAL_ELEMENT_TYPE_##id,
      HALI_HAL_ELEMENT_TYPES(HALI_X)
#undef HALI_X
  };
  return i < sizeof(all) / sizeof(all[0]) ? all[i] : 0;
}
