/* hali — parameters: weight files bound to contexts (include/hali/hali.h
 * "Parameters"; the readers are loader/params.c and loader/npy.c). */
#include "api/api_int.h"
#include "base/alloc.h"

#include "loader/npy.h"

hali_status_t hali_parameters_create(hali_parameters_t **out_parameters) {
  CHECK_ARG(out_parameters);
  *out_parameters = NULL;
  hali_parameters_t *p = hali_calloc(1, sizeof(*p));
  if (!p) return oom();
  atomic_init(&p->count, 1);
  atomic_init(&p->frozen, false);
  hali_status_t s = hali_param_set_create(&p->set);
  if (s) {
    hali_free(p);
    return s;
  }
  *out_parameters = p;
  return HALI_OK;
}

void hali_parameters_retain(hali_parameters_t *parameters) {
  if (parameters) atomic_fetch_add(&parameters->count, 1);
}

void hali_parameters_release(hali_parameters_t *parameters) {
  if (!parameters || atomic_fetch_sub(&parameters->count, 1) != 1) return;
  hali_param_set_release(parameters->set);
  hali_free(parameters);
}

hali_status_t hali_parameters_add_file(hali_parameters_t *parameters,
                                       const char *scope, const char *path) {
  CHECK_ARG(parameters);
  CHECK_ARG(scope);
  CHECK_ARG(path);
  if (atomic_load(&parameters->frozen))
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "%s: cannot add %s to scope '%s': a context was "
                            "created with these parameters (add every file "
                            "first)",
                            __func__, path, scope);
  return hali_param_set_add_file(parameters->set, scope, path);
}

size_t hali_parameters_file_count(const hali_parameters_t *parameters) {
  return parameters ? hali_param_set_file_count(parameters->set) : 0;
}

hali_status_t hali_npy_parse(const void *data, size_t size, const char *name,
                             hali_npy_info_t *out_info) {
  CHECK_ARG(out_info);
  memset(out_info, 0, sizeof(*out_info));
  if (size) CHECK_ARG(data);
  hali_npy_header_t h;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_npy_parse_header(data, size, name ? name : "(.npy)", &h));
  _Static_assert(sizeof(out_info->shape) == sizeof(h.shape),
                 "hali_npy_info_t holds the reader's rank limit");
  out_info->element_type = h.element_type;
  out_info->rank = h.rank;
  memcpy(out_info->shape, h.shape, sizeof(h.shape));
  out_info->data_offset = h.data_offset;
  out_info->data_length = h.data_length;
  return HALI_OK;
}

const char *hali_npy_descr(uint32_t type) { return hali_npy_type_descr(type); }
