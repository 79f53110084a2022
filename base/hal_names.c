/* hali — the names of the HAL's constants (see base/hal_names.h). */
#include "base/hal_names.h"

#include <string.h>

#include "base/hal_bits.h"
#include "hali/base.h"

/* In each bit-set table the names of single bits come in bit order (the
 * printer writes them in table order); a name with value 0 prints an
 * empty set; names of several bits ("any") are accepted but never
 * printed. */
static const hali_hal_const_name_t memory_names[] = {
    {"none", HALI_HAL_MEMORY_TYPE_NONE},
    {"device_local", HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL},
    {"host_visible", HALI_HAL_MEMORY_TYPE_HOST_VISIBLE},
    {"host_coherent", HALI_HAL_MEMORY_TYPE_HOST_COHERENT},
    {"host_cached", HALI_HAL_MEMORY_TYPE_HOST_CACHED},
    {"device_visible", HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE},
    {"transient", HALI_HAL_MEMORY_TYPE_TRANSIENT},
};
static const hali_hal_const_name_t usage_names[] = {
    {"none", HALI_HAL_BUFFER_USAGE_NONE},
    {"transfer", HALI_HAL_BUFFER_USAGE_TRANSFER},
    {"dispatch", HALI_HAL_BUFFER_USAGE_DISPATCH},
    {"mapping", HALI_HAL_BUFFER_USAGE_MAPPING},
    {"constant", HALI_HAL_BUFFER_USAGE_CONSTANT},
};
static const hali_hal_const_name_t mode_names[] = {
    {"reusable", HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE},
    {"one_shot", HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT},
};
static const hali_hal_const_name_t category_names[] = {
    {"none", 0},
    {"transfer", HALI_HAL_COMMAND_CATEGORY_TRANSFER},
    {"dispatch", HALI_HAL_COMMAND_CATEGORY_DISPATCH},
    {"any", HALI_HAL_COMMAND_CATEGORY_ANY},
};
static const hali_hal_const_name_t element_names[] = {
#define HALI_X(name, id, nt, bits) {name, HALI_HAL_ELEMENT_TYPE_##id},
    HALI_HAL_ELEMENT_TYPES(HALI_X)
#undef HALI_X
};
static const hali_hal_const_name_t encoding_names[] = {
    {"opaque", HALI_HAL_ENCODING_TYPE_OPAQUE},
    {"dense_row_major", HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR},
};
static const hali_hal_const_name_t status_names[] = {
    {"ok", 0},
    {"cancelled", 1},
    {"unknown", 2},
    {"invalid_argument", 3},
    {"deadline_exceeded", 4},
    {"not_found", 5},
    {"already_exists", 6},
    {"permission_denied", 7},
    {"resource_exhausted", 8},
    {"failed_precondition", 9},
    {"aborted", 10},
    {"out_of_range", 11},
    {"unimplemented", 12},
    {"internal", 13},
    {"unavailable", 14},
    {"data_loss", 15},
    {"unauthenticated", 16},
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) ==
                   HALI_STATUS_CODE_COUNT,
               "a status code without a name");

#define N(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))
static const hali_hal_const_kind_info_t kinds[HALI_HAL_CONST_KIND_COUNT] = {
    [HALI_HAL_CONST_MEMORY] = {"memory", "memory type", true, memory_names,
                               N(memory_names)},
    [HALI_HAL_CONST_USAGE] = {"usage", "buffer usage", true, usage_names,
                              N(usage_names)},
    [HALI_HAL_CONST_MODE] = {"mode", "command buffer mode", true, mode_names,
                             N(mode_names)},
    [HALI_HAL_CONST_CATEGORY] = {"category", "command category", true,
                                 category_names, N(category_names)},
    [HALI_HAL_CONST_ELEMENT_TYPE] = {"element_type", "element type", false,
                                     element_names, N(element_names)},
    [HALI_HAL_CONST_ENCODING] = {"encoding", "encoding", false,
                                 encoding_names, N(encoding_names)},
    [HALI_HAL_CONST_STATUS] = {"status", "status code", false, status_names,
                               N(status_names)},
};
#undef N

const hali_hal_const_kind_info_t *hali_hal_const_kind_info(unsigned kind) {
  return kind > HALI_HAL_CONST_NONE && kind < HALI_HAL_CONST_KIND_COUNT
             ? &kinds[kind]
             : NULL;
}

static bool same(const char *name, const char *s, size_t len) {
  return strlen(name) == len && memcmp(name, s, len) == 0;
}

hali_hal_const_kind_t hali_hal_const_kind_lookup(const char *s, size_t len) {
  for (unsigned k = 1; k < HALI_HAL_CONST_KIND_COUNT; ++k)
    if (same(kinds[k].keyword, s, len)) return (hali_hal_const_kind_t)k;
  return HALI_HAL_CONST_NONE;
}

bool hali_hal_const_name_lookup(hali_hal_const_kind_t kind, const char *s,
                                size_t len, uint32_t *out_value) {
  const hali_hal_const_kind_info_t *k = hali_hal_const_kind_info(kind);
  if (!k) return false;
  for (uint32_t i = 0; i < k->name_count; ++i)
    if (same(k->names[i].name, s, len)) {
      *out_value = k->names[i].value;
      return true;
    }
  return false;
}

static bool single_bit(uint32_t v) { return v && !(v & (v - 1)); }

bool hali_hal_const_format(hali_hal_const_kind_t kind, uint32_t value,
                           hali_strbuf_t *sb) {
  const hali_hal_const_kind_info_t *k = hali_hal_const_kind_info(kind);
  if (!k) return false;
  if (!k->bits || value == 0) {
    for (uint32_t i = 0; i < k->name_count; ++i)
      if (k->names[i].value == value) {
        hali_strbuf_printf(sb, "%s(%s)", k->keyword, k->names[i].name);
        return true;
      }
    return false;
  }
  uint32_t known = 0;
  for (uint32_t i = 0; i < k->name_count; ++i)
    if (single_bit(k->names[i].value)) known |= k->names[i].value;
  if (value & ~known) return false;
  hali_strbuf_printf(sb, "%s(", k->keyword);
  bool first = true;
  for (uint32_t i = 0; i < k->name_count; ++i)
    if (single_bit(k->names[i].value) && (value & k->names[i].value)) {
      hali_strbuf_printf(sb, "%s%s", first ? "" : "|", k->names[i].name);
      first = false;
    }
  hali_strbuf_append(sb, ")", 1);
  return true;
}

void hali_hal_const_list_names(hali_hal_const_kind_t kind, hali_strbuf_t *sb) {
  const hali_hal_const_kind_info_t *k = hali_hal_const_kind_info(kind);
  for (uint32_t i = 0; k && i < k->name_count; ++i)
    hali_strbuf_printf(sb, "%s%s", i ? ", " : "", k->names[i].name);
}

void hali_hal_const_list_kinds(hali_strbuf_t *sb) {
  for (unsigned k = 1; k < HALI_HAL_CONST_KIND_COUNT; ++k)
    hali_strbuf_printf(sb, "%s%s(...)", k > 1 ? ", " : "", kinds[k].keyword);
}
