/* hali — turning text and bytes into IR modules, and back. */
#ifndef HALI_LOADER_LOADER_H
#define HALI_LOADER_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hali/base.h"
#include "vm/ir.h"

/* Assembles .hasm |text| (|len| bytes). |filename| names the source in
 * errors and debug locations.  On success |*out_module| is owned by the
 * caller. Errors name file:line:column and what was expected. */
HALI_MUST_USE hali_status_t hali_asm_parse(const char *text, size_t len,
                                           const char *filename,
                                           hali_ir_module_t **out_module);

typedef struct hali_hbc_write_options_s {
  bool strip; /* omit the debug section (names and source lines) */
} hali_hbc_write_options_t;

/* Serialises |m| to .hbc bytes (malloc'ed, owned by the caller). */
HALI_MUST_USE hali_status_t hali_hbc_write(const hali_ir_module_t *m,
                                           const hali_hbc_write_options_t *o,
                                           uint8_t **out_data,
                                           size_t *out_size);

typedef struct hali_hbc_read_options_s {
  /* Skips the checksum so that corrupted contents reach the section
   * readers; used by the robustness tests, never by `hali run`. */
  bool ignore_checksum;
} hali_hbc_read_options_t;

/* Parses .hbc |data|.  Every count, offset and length is bounds-checked;
 * errors name the section and byte offset. */
HALI_MUST_USE hali_status_t hali_hbc_read(const uint8_t *data, size_t size,
                                          const hali_hbc_read_options_t *o,
                                          hali_ir_module_t **out_module);

/* True when |data| starts with the .hbc magic. */
bool hali_hbc_is_binary(const uint8_t *data, size_t size);

/* How the loader treats a module (hali_load_*_ex). */
typedef struct hali_load_options_s {
  /* Which passes run (passes/pipeline.h); NULL = the whole pipeline. */
  const struct hali_pass_options_s *passes;
  /* Skip the verifier (hali dis --after=PASS prints intermediate IR that
   * is not yet runnable). */
  bool no_verify;
} hali_load_options_t;

/* Reads a file (.hasm or .hbc, told apart by the magic) into IR, runs the
 * load-time passes (passes/pipeline.h) and verifies it. */
HALI_MUST_USE hali_status_t hali_load_file(const char *path,
                                           hali_ir_module_t **out_module);
/* Same for bytes already in memory. */
HALI_MUST_USE hali_status_t hali_load_bytes(const uint8_t *data, size_t size,
                                            const char *name,
                                            hali_ir_module_t **out_module);

HALI_MUST_USE hali_status_t hali_load_bytes_ex(const uint8_t *data, size_t size,
                                               const char *name,
                                               const hali_load_options_t *o,
                                               hali_ir_module_t **out_module);
HALI_MUST_USE hali_status_t hali_load_file_ex(const char *path,
                                              const hali_load_options_t *o,
                                              hali_ir_module_t **out_module);
/* The rest of a load, for a module already read (|m| is taken, and
 * freed on error): the structural check (hali_ir_verify_structure), the
 * passes, then the verifier (unless |o| says no_verify).  |name| names the
 * module in errors. */
HALI_MUST_USE hali_status_t hali_load_module(hali_ir_module_t *m,
                                             const char *name,
                                             const hali_load_options_t *o,
                                             hali_ir_module_t **out_module);
/* How many times hali_load_module has run in this process (any thread):
 * a test hook, so that tests can prove a module is lowered once however
 * many contexts link it. */
uint64_t hali_load_module_count(void);
/* Reads only (no passes, no verifier): the module as written. */
HALI_MUST_USE hali_status_t hali_read_module(const uint8_t *data, size_t size,
                                             const char *name,
                                             hali_ir_module_t **out_module);

/* Reads a whole file (malloc'ed, NUL-terminated). */
HALI_MUST_USE hali_status_t hali_read_file(const char *path, uint8_t **out,
                                           size_t *out_size);

#endif /* HALI_LOADER_LOADER_H */
