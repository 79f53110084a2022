/* hali — loading a module file: read (text or binary), then verify. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loader.h"
#include "base/alloc.h"
#include "passes/pipeline.h"

hali_status_t hali_read_file(const char *path, uint8_t **out, size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  FILE *f = fopen(path, "rb");
  if (!f && errno == ENOMEM)
    return hali_status_annotate(hali_status_oom(), "opening %s", path);
  if (!f)
    return hali_status_make(HALI_STATUS_NOT_FOUND, "%s: cannot open: %s", path,
                            strerror(errno));
  size_t cap = 4096, len = 0;
  uint8_t *buf = hali_malloc(cap + 1);
  while (buf) {
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (len < cap) break;
    cap *= 2;
    uint8_t *grown = hali_realloc(buf, cap + 1);
    if (!grown) {
      hali_free(buf);
      buf = NULL;
    } else {
      buf = grown;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf)
    return hali_status_annotate(hali_status_oom(), "reading %s", path);
  if (err) {
    hali_free(buf);
    return hali_status_make(HALI_STATUS_DATA_LOSS, "%s: read error", path);
  }
  buf[len] = 0;
  *out = buf;
  *out_size = len;
  return HALI_OK;
}

hali_status_t hali_read_module(const uint8_t *data, size_t size,
                              const char *name, hali_ir_module_t **out) {
  *out = NULL;
  if (hali_hbc_is_binary(data, size))
    HALI_RETURN_IF_ERROR(hali_hbc_read(data, size, NULL, out), "loading %s",
                         name);
  else
    HALI_RETURN_IF_ERROR_PLAIN(
        hali_asm_parse((const char *)data, size, name, out));
  return HALI_OK;
}

static atomic_uint_fast64_t load_module_count;

uint64_t hali_load_module_count(void) {
  return atomic_load_explicit(&load_module_count, memory_order_relaxed);
}

hali_status_t hali_load_module(hali_ir_module_t *m, const char *name,
                               const hali_load_options_t *o,
                               hali_ir_module_t **out) {
  *out = NULL;
  atomic_fetch_add_explicit(&load_module_count, 1, memory_order_relaxed);
  /* The passes lower the tensor level between reading and verifying;
   * nothing runs from a module a pass rejected.  They run on unverified
   * input, so its structure is proved first (vm/verify.c), whatever the
   * options: the printer relies on it too. */
  hali_status_t s;
  if (!(o && o->no_verify) && hali_ir_verify_fused(m)) {
    /* Both checks passed and nothing is at the tensor level: what the
     * passes do then (exports' layouts) leaves the verified functions as
     * they are.  Otherwise the usual order, which names the first error. */
    s = hali_passes_run_hal_level(m, o ? o->passes : NULL);
  } else {
    s = hali_ir_verify_structure(m);
    if (!s) s = hali_passes_run(m, o ? o->passes : NULL);
    if (!s && !(o && o->no_verify)) s = hali_ir_verify(m);
  }
  if (s) {
    hali_ir_module_free(m);
    return hali_status_annotate(s, "while loading %s", name);
  }
  *out = m;
  return HALI_OK;
}

hali_status_t hali_load_bytes_ex(const uint8_t *data, size_t size,
                                 const char *name, const hali_load_options_t *o,
                                 hali_ir_module_t **out) {
  *out = NULL;
  hali_ir_module_t *m = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(hali_read_module(data, size, name, &m));
  return hali_load_module(m, name, o, out);
}

hali_status_t hali_load_bytes(const uint8_t *data, size_t size,
                              const char *name, hali_ir_module_t **out) {
  return hali_load_bytes_ex(data, size, name, NULL, out);
}

hali_status_t hali_load_file_ex(const char *path, const hali_load_options_t *o,
                                hali_ir_module_t **out) {
  *out = NULL;
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR_PLAIN(hali_read_file(path, &data, &size));
  hali_status_t s = hali_load_bytes_ex(data, size, path, o, out);
  hali_free(data);
  return s;
}

hali_status_t hali_load_file(const char *path, hali_ir_module_t **out) {
  *out = NULL;
  uint8_t *data;
  size_t size;
  HALI_RETURN_IF_ERROR_PLAIN(hali_read_file(path, &data, &size));
  hali_status_t s = hali_load_bytes(data, size, path, out);
  hali_free(data);
  return s;
}
