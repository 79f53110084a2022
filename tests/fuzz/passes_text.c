/* Fuzz target: tensor-level text -> the load-time passes and the verifier;
 * a module that loads is printed (what hali dis --after=all shows), and
 * that text must load again: the passes' output is always a module the
 * text form can carry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loader.h"
#include "tests/fuzz/fuzz.h"
#include "vm/ir.h"

static void clean(hali_status_t s) {
  if (!s) return;
  if (hali_status_code(s) == HALI_STATUS_OK || !hali_status_message(s)) abort();
  hali_status_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  hali_ir_module_t *m = NULL;
  hali_status_t s = hali_read_module(data, size, "fuzz.hasm", &m);
  if (s) {
    clean(s);
    return 0;
  }
  hali_ir_module_t *loaded = NULL;
  s = hali_load_module(m, "fuzz.hasm", NULL, &loaded); /* takes |m| */
  if (s) {
    clean(s);
    return 0;
  }
  char *text = hali_ir_print(loaded, true);
  hali_ir_module_free(loaded);
  if (!text) return 0; /* out of memory */
  hali_ir_module_t *again = NULL;
  s = hali_read_module((const uint8_t *)text, strlen(text), "printed.hasm", &again);
  if (!s) {
    hali_ir_module_t *reloaded = NULL;
    s = hali_load_module(again, "printed.hasm", NULL, &reloaded);
    hali_ir_module_free(reloaded);
  }
  if (s) {
    fprintf(stderr, "the lowered module does not load again: %s\n%s\n",
            hali_status_message(s), text);
    abort();
  }
  free(text);
  return 0;
}
