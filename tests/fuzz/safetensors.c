/* Fuzz target: parameter archives (loader/params.c).  The input is a
 * .safetensors file; it is written to a temporary file and added to a
 * parameter set as hali_parameters_add_file does (mmap, the JSON header
 * through Jansson, every range check).  A file that is accepted must be
 * consistent: every tensor loads with its own type and shape, its bytes
 * lie inside the file and the buffer holds exactly them; the in-memory
 * checker agrees with the file reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/hal.h"
#include "loader/params.h"
#include "tests/fuzz/fuzz.h"

static void check_clean(hali_status_t s) {
  if (!s) return;
  const char *m = hali_status_message(s);
  if (!m || !*m) abort();
  hali_status_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t mem_count = 0;
  hali_status_t mem =
      hali_param_check_safetensors(data, size, "fuzz.safetensors", &mem_count);
  bool mem_ok = mem == NULL;
  check_clean(mem);

  char path[] = "/tmp/hali-fuzz-XXXXXX.safetensors";
  int fd = mkstemps(path, 12);
  if (fd < 0) abort();
  if (size && write(fd, data, size) != (ssize_t)size) abort();
  close(fd);
  hali_param_set_t *set = NULL;
  hali_hal_allocator_t *allocator = NULL;
  if (hali_param_set_create(&set) || hali_hal_allocator_create(NULL, &allocator))
    abort();
  hali_status_t s = hali_param_set_add_file(set, "f", path);
  unlink(path); /* the mapping stays */
  /* Both readers decide alike. */
  if ((s == NULL) != mem_ok) abort();
  check_clean(s);
  for (size_t i = 0; mem_ok; ++i) {
    hali_param_info_t info;
    hali_status_t e = hali_param_set_entry(set, "f", i, &info);
    if (e) {
      if (i != mem_count) abort();
      hali_status_free(e);
      break;
    }
    if (info.offset > size || info.length > size - info.offset) abort();
    if (!info.element_type) continue;
    hali_ir_xtype_t t = {HALI_TYPE_NONE, info.element_type, info.rank,
                         (int64_t *)(uintptr_t)info.shape};
    hali_hal_buffer_t *b = NULL;
    hali_status_t l =
        hali_param_set_load(set, "f", info.key, &t, allocator, &b);
    if (l) abort(); /* its own type and shape always match */
    if (hali_hal_buffer_length(b) != info.length) abort();
    uint8_t *got = malloc(info.length ? info.length : 1);
    if (!got || hali_hal_buffer_read(b, 0, got, info.length)) abort();
    if (memcmp(got, data + info.offset, info.length) != 0) abort();
    free(got);
    hali_hal_buffer_release(b);
  }
  hali_param_set_release(set);
  hali_hal_allocator_release(allocator);
  return 0;
}
