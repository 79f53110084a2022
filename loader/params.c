/* hali loader — parameter archives (see loader/params.h). */
#include "loader/params.h"
#include "base/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/checked.h"
#include "hal/buffer_view.h"
#include "loader/npy.h"
#include "vm/strmap.h"

/* A header longer than this is corrupt rather than large: the reference
 * reader's limit (100 MB of JSON describes millions of tensors). */
#define SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u)

/* ------------------------------------------------------------------------ */
/* Files: one mapping and its index, shared by the set and every buffer
 * that aliases it. */

typedef struct {
  char *key;
  char dtype[16];
  hali_hal_element_type_t type; /* 0: none in hali */
  uint32_t rank;
  int64_t *shape;
  uint64_t offset, length; /* in the file */
  char *read_only;         /* what a write to an aliasing buffer quotes */
} entry_t;

typedef struct {
  atomic_uint_fast32_t count;
  char *path;
  uint8_t *map; /* NULL when the file is empty */
  size_t size;
  entry_t *entries;
  size_t entry_count;
} file_t;

static void file_release(void *user) {
  file_t *f = user;
  if (!f || atomic_fetch_sub(&f->count, 1) != 1) return;
  for (size_t i = 0; i < f->entry_count; ++i) {
    hali_free(f->entries[i].key);
    hali_free(f->entries[i].shape);
    hali_free(f->entries[i].read_only);
  }
  hali_free(f->entries);
  if (f->map) munmap(f->map, f->size);
  hali_free(f->path);
  hali_free(f);
}

static hali_status_t corrupt(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static hali_status_t corrupt(const char *path, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  return hali_status_make(HALI_STATUS_DATA_LOSS,
                          "%s: not a valid .safetensors file: %s", path, why);
}

/* safetensors dtypes -> hali element types (0: known, but not in hali). */
static const struct {
  const char *name;
  hali_hal_element_type_t type;
} dtypes[] = {
    {"BOOL", HALI_HAL_ELEMENT_TYPE_BOOL_8},
    {"U8", HALI_HAL_ELEMENT_TYPE_UINT_8},
    {"I8", HALI_HAL_ELEMENT_TYPE_SINT_8},
    {"U16", HALI_HAL_ELEMENT_TYPE_UINT_16},
    {"I16", HALI_HAL_ELEMENT_TYPE_SINT_16},
    {"U32", HALI_HAL_ELEMENT_TYPE_UINT_32},
    {"I32", HALI_HAL_ELEMENT_TYPE_SINT_32},
    {"U64", HALI_HAL_ELEMENT_TYPE_UINT_64},
    {"I64", HALI_HAL_ELEMENT_TYPE_SINT_64},
    {"F16", HALI_HAL_ELEMENT_TYPE_FLOAT_16},
    {"BF16", HALI_HAL_ELEMENT_TYPE_BFLOAT_16},
    {"F32", HALI_HAL_ELEMENT_TYPE_FLOAT_32},
    {"F64", HALI_HAL_ELEMENT_TYPE_FLOAT_64},
    {"F8_E4M3", 0},
    {"F8_E5M2", 0},
};

/* Reads a non-negative JSON integer. */
static bool json_u64(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
  *out = (uint64_t)json_integer_value(v);
  return true;
}

typedef struct {
  uint64_t begin, end;
  size_t index;
} span_t;

static int span_cmp(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : (x->end > y->end);
}

/* One tensor's entry of the JSON header into |e|. */
static hali_status_t parse_entry(const char *path, uint64_t data_start,
                                 uint64_t size, const char *key,
                                 const json_t *v, entry_t *e) {
  if (!json_is_object(v))
    return corrupt(path, "entry '%s' is not an object", key);
  const json_t *dtype = json_object_get(v, "dtype");
  const json_t *shape = json_object_get(v, "shape");
  const json_t *offsets = json_object_get(v, "data_offsets");
  if (!json_is_string(dtype))
    return corrupt(path, "entry '%s' has no \"dtype\" string", key);
  if (!json_is_array(shape))
    return corrupt(path, "entry '%s' has no \"shape\" array", key);
  if (!json_is_array(offsets) || json_array_size(offsets) != 2)
    return corrupt(path,
                   "entry '%s' has no \"data_offsets\" pair [BEGIN, END]",
                   key);
  const char *dt = json_string_value(dtype);
  bool known = false;
  for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); ++i)
    if (strcmp(dt, dtypes[i].name) == 0) {
      e->type = dtypes[i].type;
      known = true;
    }
  if (!known)
    return corrupt(path, "entry '%s' has the unknown dtype \"%.32s\"", key,
                   dt);
  snprintf(e->dtype, sizeof(e->dtype), "%s", dt);
  size_t rank = json_array_size(shape);
  if (rank > HALI_HAL_MAX_RANK)
    return corrupt(path, "entry '%s' has rank %zu (at most %d)", key, rank,
                   HALI_HAL_MAX_RANK);
  e->rank = (uint32_t)rank;
  e->shape = hali_calloc(rank ? rank : 1, sizeof(int64_t));
  if (!e->shape) return hali_status_oom();
  for (size_t d = 0; d < rank; ++d) {
    uint64_t dim;
    if (!json_u64(json_array_get(shape, d), &dim))
      return corrupt(path,
                     "entry '%s': shape[%zu] is not a non-negative integer",
                     key, d);
    e->shape[d] = (int64_t)dim; /* json_int_t is signed 64 bits */
  }
  uint64_t begin, end;
  if (!json_u64(json_array_get(offsets, 0), &begin) ||
      !json_u64(json_array_get(offsets, 1), &end))
    return corrupt(path,
                   "entry '%s': data_offsets are not non-negative integers",
                   key);
  if (end < begin)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: entry '%s': data_offsets [%" PRIu64
                            ", %" PRIu64 "] end before they begin",
                            path, key, begin, end);
  uint64_t abs_end;
  if (hali_add_overflows_u64(data_start, end, &abs_end) || abs_end > size)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: entry '%s': data_offsets [%" PRIu64
                            ", %" PRIu64 "] lie outside the file (%" PRIu64
                            " data bytes after the header)",
                            path, key, begin, end, size - data_start);
  e->offset = data_start + begin;
  e->length = end - begin;
  if (e->type) {
    hali_hal_device_size_t bytes = 0;
    hali_status_t s = hali_hal_buffer_compute_view_size(
        rank, e->shape, e->type, HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
        &bytes);
    if (s) {
      hali_status_free(s);
      return corrupt(path, "entry '%s': the shape's byte size overflows",
                     key);
    }
    if (bytes != e->length)
      return corrupt(path,
                     "entry '%s' holds %" PRIu64 " bytes but %s of its "
                     "shape needs %" PRIu64,
                     key, e->length, dt, (uint64_t)bytes);
  }
  return HALI_OK;
}

/* Fills |f|'s index from its safetensors header. */
static hali_status_t index_safetensors(file_t *f) {
  const char *path = f->path;
  const uint8_t *p = f->map;
  size_t size = f->size;
  if (size < 8)
    return corrupt(path, "%zu bytes, shorter than the 8-byte header length",
                   size);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= (uint64_t)p[i] << (8 * i);
  if (n > size - 8)
    return corrupt(path,
                   "the header length %" PRIu64 " runs past the end of the "
                   "file (%zu bytes)",
                   n, size);
  if (n > SAFETENSORS_MAX_HEADER)
    return corrupt(path, "the header length %" PRIu64 " is above %u", n,
                   SAFETENSORS_MAX_HEADER);
  if (n < 2 || p[8] != '{')
    return corrupt(path, "the header does not start with '{'");
  json_error_t err;
  json_t *root = json_loadb((const char *)p + 8, (size_t)n,
                            JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    if (json_error_code(&err) == json_error_out_of_memory)
      return hali_status_annotate(hali_status_oom(), "%s: JSON header",
                                  path);
    return corrupt(path, "bad JSON header at line %d, column %d: %s",
                   err.line, err.column, err.text);
  }
  hali_status_t s = HALI_OK;
  span_t *spans = NULL;
  if (!json_is_object(root)) {
    s = corrupt(path, "the header is not a JSON object");
    goto done;
  }
  size_t count = json_object_size(root);
  json_t *meta = json_object_get(root, "__metadata__");
  if (meta) {
    if (!json_is_object(meta)) {
      s = corrupt(path, "\"__metadata__\" is not an object");
      goto done;
    }
    const char *mk;
    json_t *mv;
    json_object_foreach(meta, mk, mv) {
      if (!json_is_string(mv)) {
        s = corrupt(path, "\"__metadata__\" value '%s' is not a string", mk);
        goto done;
      }
    }
    count--;
  }
  f->entries = hali_calloc(count ? count : 1, sizeof(entry_t));
  spans = hali_calloc(count ? count : 1, sizeof(span_t));
  if (!f->entries || !spans) {
    s = hali_status_oom();
    goto done;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (strcmp(key, "__metadata__") == 0) continue;
    entry_t *e = &f->entries[f->entry_count];
    e->key = hali_strdup(key);
    f->entry_count++;
    if (!e->key) {
      s = hali_status_oom();
      goto done;
    }
    s = parse_entry(path, 8 + n, size, key, v, e);
    if (s) goto done;
    spans[f->entry_count - 1] =
        (span_t){e->offset, e->offset + e->length, f->entry_count - 1};
  }
  /* Entries may come in any order and leave gaps (alignment padding), but
   * no two share a byte: sorted by where they begin, each non-empty one
   * starts at or after the end of the non-empty one before (an empty
   * tensor has no bytes to share). */
  qsort(spans, f->entry_count, sizeof(span_t), span_cmp);
  const span_t *last = NULL;
  for (size_t i = 0; i < f->entry_count; ++i) {
    const span_t *at = &spans[i];
    if (at->begin == at->end) continue;
    if (last && at->begin < last->end) {
      s = corrupt(path,
                  "entries '%s' and '%s' overlap (bytes [%" PRIu64 ", %" PRIu64
                  ") and [%" PRIu64 ", %" PRIu64 ") of the data)",
                  f->entries[last->index].key, f->entries[at->index].key,
                  last->begin - 8 - n, last->end - 8 - n, at->begin - 8 - n,
                  at->end - 8 - n);
      goto done;
    }
    last = at;
  }
done:
  hali_free(spans);
  json_decref(root);
  return s;
}

/* The key of a .npy file: its name without directory and extension. */
static hali_status_t index_npy(file_t *f) {
  hali_npy_header_t h;
  hali_status_t s = hali_npy_parse_header(f->map, f->size, f->path, &h);
  if (s) {
    /* A file we cannot read as .npy is corrupt, whatever the reader's
     * code for it (the tool's --input reports INVALID_ARGUMENT). */
    if (hali_status_code(s) == HALI_STATUS_INVALID_ARGUMENT) {
      hali_status_t d =
          hali_status_make(HALI_STATUS_DATA_LOSS, "%s", hali_status_message(s));
      hali_status_free(s);
      return d;
    }
    return s;
  }
  f->entries = hali_calloc(1, sizeof(entry_t));
  if (!f->entries) return hali_status_oom();
  entry_t *e = &f->entries[0];
  f->entry_count = 1;
  const char *base = strrchr(f->path, '/');
  base = base ? base + 1 : f->path;
  const char *dot = strrchr(base, '.');
  e->key = hali_strndup(base, (size_t)(dot - base));
  e->shape = hali_calloc(h.rank ? h.rank : 1, sizeof(int64_t));
  if (!e->key || !e->shape) return hali_status_oom();
  memcpy(e->shape, h.shape, h.rank * sizeof(int64_t));
  e->rank = (uint32_t)h.rank;
  e->type = h.element_type;
  /* The descr as written ("<f4"). */
  const char *descr = hali_npy_type_descr(h.element_type);
  snprintf(e->dtype, sizeof(e->dtype), "%s%s",
           hali_hal_element_type_byte_size(h.element_type) == 1 ? "|" : "<",
           descr ? descr : "?");
  e->offset = h.data_offset;
  e->length = h.data_length;
  return HALI_OK;
}

hali_status_t hali_param_check_safetensors(const uint8_t *data, size_t size,
                                           const char *path,
                                           size_t *out_count) {
  *out_count = 0;
  file_t f = {0};
  f.path = (char *)(uintptr_t)path;
  f.map = (uint8_t *)(uintptr_t)data;
  f.size = size;
  hali_status_t s = index_safetensors(&f);
  if (!s) *out_count = f.entry_count;
  for (size_t i = 0; i < f.entry_count; ++i) {
    hali_free(f.entries[i].key);
    hali_free(f.entries[i].shape);
  }
  hali_free(f.entries);
  return s;
}

/* ------------------------------------------------------------------------ */
/* Sets. */

typedef struct {
  uint32_t file, entry;
} where_t;

typedef struct {
  char *name;
  file_t **files;
  size_t file_count;
  hali_strmap_t keys; /* key -> index into |where| */
  where_t *where;
  size_t where_count;
} scope_t;

struct hali_param_set_s {
  atomic_uint_fast32_t count;
  scope_t *scopes;
  size_t scope_count;
};

hali_status_t hali_param_set_create(hali_param_set_t **out_set) {
  *out_set = hali_calloc(1, sizeof(**out_set));
  if (!*out_set) return hali_status_oom();
  atomic_init(&(*out_set)->count, 1);
  return HALI_OK;
}

void hali_param_set_retain(hali_param_set_t *set) {
  if (set) atomic_fetch_add(&set->count, 1);
}

void hali_param_set_release(hali_param_set_t *set) {
  if (!set || atomic_fetch_sub(&set->count, 1) != 1) return;
  for (size_t i = 0; i < set->scope_count; ++i) {
    scope_t *sc = &set->scopes[i];
    for (size_t k = 0; k < sc->file_count; ++k) file_release(sc->files[k]);
    hali_free(sc->files);
    hali_strmap_free(&sc->keys);
    hali_free(sc->where);
    hali_free(sc->name);
  }
  hali_free(set->scopes);
  hali_free(set);
}

size_t hali_param_set_file_count(const hali_param_set_t *set) {
  size_t n = 0;
  for (size_t i = 0; i < set->scope_count; ++i)
    n += set->scopes[i].file_count;
  return n;
}

static scope_t *find_scope(const hali_param_set_t *set,
                                 const char *scope) {
  for (size_t i = 0; i < set->scope_count; ++i)
    if (strcmp(set->scopes[i].name, scope) == 0) return &set->scopes[i];
  return NULL;
}

bool hali_param_set_has_scope(const hali_param_set_t *set,
                              const char *scope) {
  return set && find_scope(set, scope) != NULL;
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Opens, maps and indexes |path|. */
static hali_status_t file_open(const char *path, file_t **out) {
  *out = NULL;
  bool st = has_suffix(path, ".safetensors"), npy = has_suffix(path, ".npy");
  if (!st && !npy)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: unknown parameter file format (expected a "
                            ".safetensors or .npy file)",
                            path);
  /* O_NONBLOCK: a FIFO or device given by mistake must not hang the open
   * (it is rejected below as not a regular file). */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return hali_status_make(errno == ENOMEM ? HALI_STATUS_RESOURCE_EXHAUSTED
                                            : HALI_STATUS_NOT_FOUND,
                            "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: not a regular file", path);
  }
  if ((uint64_t)sb.st_size > SIZE_MAX) {
    close(fd);
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: %jd bytes do not fit in the address space",
                            path, (intmax_t)sb.st_size);
  }
  file_t *f = hali_calloc(1, sizeof(*f));
  if (!f || !(f->path = hali_strdup(path))) {
    hali_free(f);
    close(fd);
    return hali_status_oom();
  }
  atomic_init(&f->count, 1);
  f->size = (size_t)sb.st_size;
  if (f->size) {
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      close(fd);
      file_release(f);
      return hali_status_make(e == ENOMEM ? HALI_STATUS_RESOURCE_EXHAUSTED
                                          : HALI_STATUS_DATA_LOSS,
                              "%s: cannot map: %s", path, strerror(e));
    }
    f->map = m;
  }
  close(fd);
  hali_status_t s = st ? index_safetensors(f) : index_npy(f);
  if (s) {
    file_release(f);
    return s;
  }
  *out = f;
  return HALI_OK;
}

/* The text a write to a buffer aliasing |e| quotes. */
static hali_status_t label_entries(const char *scope, file_t *f) {
  for (size_t i = 0; i < f->entry_count; ++i) {
    entry_t *e = &f->entries[i];
    size_t n = strlen(scope) + strlen(e->key) + strlen(f->path) + 64;
    e->read_only = hali_malloc(n);
    if (!e->read_only) return hali_status_oom();
    snprintf(e->read_only, n, "parameter '%s'::'%s' (read-only mapping of %s)",
             scope, e->key, f->path);
  }
  return HALI_OK;
}

/* Undoes the scope an add_file that failed had just made. */
static void drop_last_scope(hali_param_set_t *set) {
  scope_t *sc = &set->scopes[--set->scope_count];
  hali_free(sc->files);
  hali_strmap_free(&sc->keys);
  hali_free(sc->where);
  hali_free(sc->name);
}

hali_status_t hali_param_set_add_file(hali_param_set_t *set,
                                      const char *scope, const char *path) {
  file_t *f = NULL;
  HALI_RETURN_IF_ERROR(file_open(path, &f), "scope '%s'", scope);
  if (!f) return hali_status_oom(); /* (file_open sets it when it is OK) */
  hali_status_t s = label_entries(scope, f);
  if (s) {
    file_release(f);
    return s;
  }
  scope_t *sc = find_scope(set, scope);
  bool new_scope = sc == NULL;
  if (new_scope) {
    scope_t *grown =
        hali_realloc(set->scopes, (set->scope_count + 1) * sizeof(scope_t));
    if (!grown) {
      file_release(f);
      return hali_status_oom();
    }
    set->scopes = grown;
    sc = &set->scopes[set->scope_count];
    memset(sc, 0, sizeof(*sc));
    if (!(sc->name = hali_strdup(scope))) {
      file_release(f);
      return hali_status_oom();
    }
    set->scope_count++;
  }
  /* Keys first (a duplicate leaves the scope as it was), then the file. */
  file_t **files = hali_realloc(sc->files, (sc->file_count + 1) * sizeof(file_t *));
  if (files) sc->files = files;
  where_t *where =
      hali_realloc(sc->where, (sc->where_count + f->entry_count) * sizeof(where_t));
  if (where) sc->where = where;
  if (!files || !where ||
      !hali_strmap_reserve(&sc->keys,
                           (uint32_t)(sc->where_count + f->entry_count))) {
    file_release(f);
    if (new_scope) drop_last_scope(set);
    return hali_status_oom();
  }
  size_t i = 0;
  for (; i < f->entry_count; ++i) {
    const char *key = f->entries[i].key;
    uint32_t index = (uint32_t)(sc->where_count + i);
    uint32_t got = hali_strmap_insert(&sc->keys, key, strlen(key), index);
    if (got == index) {
      sc->where[index] = (where_t){(uint32_t)sc->file_count, (uint32_t)i};
      continue;
    }
    if (got == HALI_STRMAP_NONE) {
      s = hali_status_oom();
    } else {
      const char *other = sc->files[sc->where[got].file]->path;
      if (sc->where[got].file == sc->file_count) other = f->path;
      s = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                           "%s: parameter '%s'::'%s' is already in %s", path,
                           scope, key, other);
    }
    break;
  }
  if (s) {
    /* Take back the keys this file added: rebuild the map from the
     * earlier files (which keep their indices). */
    hali_strmap_clear(&sc->keys);
    for (size_t w = 0; w < sc->where_count; ++w) {
      const where_t *at = &sc->where[w];
      const char *k = sc->files[at->file]->entries[at->entry].key;
      (void)hali_strmap_insert(&sc->keys, k, strlen(k), (uint32_t)w);
    }
    file_release(f);
    if (new_scope) drop_last_scope(set);
    return s;
  }
  sc->where_count += f->entry_count;
  sc->files[sc->file_count++] = f;
  return HALI_OK;
}

/* "a.safetensors, b.npy" for NOT_FOUND messages. */
static void file_list(const scope_t *sc, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (size_t i = 0; i < sc->file_count && at < n; ++i)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "",
                           sc->files[i]->path);
}

static hali_status_t lookup(const hali_param_set_t *set, const char *scope,
                            const char *key, const file_t **out_file,
                            const entry_t **out_entry) {
  const scope_t *sc = set ? find_scope(set, scope) : NULL;
  if (!sc)
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "no parameters bound for scope '%s' (looking "
                            "for '%s'::'%s')",
                            scope, scope, key);
  uint32_t w = hali_strmap_find(&sc->keys, key, strlen(key));
  if (w == HALI_STRMAP_NONE) {
    char files[512];
    file_list(sc, files, sizeof(files));
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "parameter '%s'::'%s' is not in %s", scope, key,
                            files);
  }
  *out_file = sc->files[sc->where[w].file];
  *out_entry = &(*out_file)->entries[sc->where[w].entry];
  return HALI_OK;
}

static void fill_info(const file_t *f, const entry_t *e,
                      hali_param_info_t *out) {
  out->key = e->key;
  out->path = f->path;
  out->data = f->map ? f->map + e->offset : NULL;
  out->length = e->length;
  out->offset = e->offset;
  out->mapping = f->map;
  out->mapping_size = f->size;
  out->dtype = e->dtype;
  out->element_type = e->type;
  out->rank = e->rank;
  out->shape = e->shape;
}

hali_status_t hali_param_set_find(const hali_param_set_t *set,
                                  const char *scope, const char *key,
                                  hali_param_info_t *out) {
  memset(out, 0, sizeof(*out));
  const file_t *f;
  const entry_t *e;
  HALI_RETURN_IF_ERROR_PLAIN(lookup(set, scope, key, &f, &e));
  fill_info(f, e, out);
  return HALI_OK;
}

hali_status_t hali_param_set_entry(const hali_param_set_t *set,
                                   const char *scope, size_t index,
                                   hali_param_info_t *out) {
  memset(out, 0, sizeof(*out));
  const scope_t *sc = set ? find_scope(set, scope) : NULL;
  if (!sc)
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "no parameters bound for scope '%s'", scope);
  if (index >= sc->where_count)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "scope '%s' holds %zu parameters, not %zu", scope,
                            sc->where_count, index + 1);
  const file_t *f = sc->files[sc->where[index].file];
  fill_info(f, &f->entries[sc->where[index].entry], out);
  return HALI_OK;
}

static bool is_integer(hali_hal_element_type_t t) {
  uint32_t nt = hali_hal_element_type_numerical_type(t);
  return nt == HALI_HAL_NUMERICAL_TYPE_INTEGER ||
         nt == HALI_HAL_NUMERICAL_TYPE_INTEGER_SIGNED ||
         nt == HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED;
}

static bool types_match(hali_hal_element_type_t declared,
                        hali_hal_element_type_t file) {
  if (declared == file) return true;
  if (declared == HALI_HAL_ELEMENT_TYPE_INT_1)
    return file == HALI_HAL_ELEMENT_TYPE_BOOL_8;
  if (!is_integer(declared) || !is_integer(file) ||
      hali_hal_element_type_bit_count(declared) !=
          hali_hal_element_type_bit_count(file))
    return false;
  return hali_hal_element_type_numerical_type(declared) ==
             HALI_HAL_NUMERICAL_TYPE_INTEGER ||
         hali_hal_element_type_numerical_type(file) ==
             HALI_HAL_NUMERICAL_TYPE_INTEGER;
}

/* "64x32xf32" (or "64x32xF8_E5M2") into |buf|. */
static void format_shape(uint32_t rank, const int64_t *dims, const char *type,
                         char *buf, size_t n) {
  size_t at = 0;
  for (uint32_t d = 0; d < rank && at < n; ++d)
    at += (size_t)snprintf(buf + at, n - at, "%" PRId64 "x", dims[d]);
  if (at < n) snprintf(buf + at, n - at, "%s", type);
}

hali_status_t hali_param_set_load(const hali_param_set_t *set,
                                  const char *scope, const char *key,
                                  const hali_ir_xtype_t *type,
                                  hali_hal_allocator_t *allocator,
                                  hali_hal_buffer_t **out_buffer) {
  *out_buffer = NULL;
  const file_t *f;
  const entry_t *e;
  HALI_RETURN_IF_ERROR_PLAIN(lookup(set, scope, key, &f, &e));
  if (type->type != HALI_TYPE_NONE || !type->element_type)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "parameter '%s'::'%s' (%s): declared with a "
                            "scalar type; parameters are tensors",
                            scope, key, f->path);
  for (uint32_t d = 0; d < type->rank; ++d)
    if (type->dims[d] < 0)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "parameter '%s'::'%s' (%s): dimension %u of "
                              "the declaration is dynamic; parameters need "
                              "a static shape",
                              scope, key, f->path, d);
  bool same = types_match(type->element_type, e->type) &&
              type->rank == e->rank;
  for (uint32_t d = 0; same && d < e->rank; ++d)
    same = type->dims[d] == e->shape[d];
  if (!same) {
    const char *dn = hali_hal_element_type_name(type->element_type);
    const char *fn = e->type ? hali_hal_element_type_name(e->type) : NULL;
    char declared[HALI_HAL_MAX_RANK * 21 + 32], held[sizeof(declared)];
    format_shape(type->rank, type->dims, dn ? dn : "?", declared,
                 sizeof(declared));
    format_shape(e->rank, e->shape, fn ? fn : e->dtype, held, sizeof(held));
    const char *what =
        !types_match(type->element_type, e->type)
            ? (e->type ? "element type" : "element type (no hali type)")
            : type->rank != e->rank ? "rank"
                                    : "shape";
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "parameter '%s'::'%s' in %s: the %s differs: "
                            "declared tensor<%s>, the file holds %s (dtype "
                            "%s)",
                            scope, key, f->path, what, declared, held,
                            e->dtype);
  }
  hali_hal_buffer_params_t params = {
      HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_HOST_VISIBLE |
          HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_CONSTANT | HALI_HAL_BUFFER_USAGE_TRANSFER |
          HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_MAPPING};
  uint8_t *data = f->map ? f->map + e->offset : NULL;
  /* An empty tensor has no bytes to alias; any non-NULL pointer will do. */
  if (!data) data = (uint8_t *)(uintptr_t)e->read_only;
  if ((uintptr_t)data % HALI_PARAM_ALIGNMENT == 0 || e->length == 0) {
    char label[256] = "";
    if (allocator && hali_hal_allocator_line_tracer(allocator))
      snprintf(label, sizeof(label), "parameter %s::%s", scope, key);
    file_t *owner = (file_t *)(uintptr_t)f;
    atomic_fetch_add(&owner->count, 1);
    hali_status_t s = hali_hal_buffer_wrap_constant(
        allocator, label, params, data, e->length, e->read_only, file_release,
        owner, out_buffer);
    if (s) {
      file_release(owner);
      return hali_status_annotate(s, "parameter '%s'::'%s' (%s)", scope, key,
                                  f->path);
    }
    return HALI_OK;
  }
  if (!allocator)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "parameter '%s'::'%s' (%s): its data at offset "
                            "%" PRIu64 " is not %d-byte aligned and needs a "
                            "copy, but no allocator was given",
                            scope, key, f->path, e->offset,
                            HALI_PARAM_ALIGNMENT);
  hali_hal_buffer_t *b = NULL;
  HALI_RETURN_IF_ERROR(
      hali_hal_allocator_allocate_buffer(allocator, params, e->length, &b),
      "parameter '%s'::'%s' (%s): copying %" PRIu64 " unaligned bytes", scope,
      key, f->path, e->length);
  hali_status_t s = hali_hal_buffer_write(b, 0, data, (size_t)e->length);
  if (s) {
    hali_hal_buffer_release(b);
    return hali_status_annotate(s, "parameter '%s'::'%s' (%s)", scope, key,
                                f->path);
  }
  *out_buffer = b;
  return HALI_OK;
}
