/* What the module targets share: load through the public API, then run
 * what can be run, bounded (tests/fuzz/fuzz.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"
#include "tests/fuzz/fuzz.h"

static void fail_unless_clean(hali_status_t s) {
  if (!s) return;
  /* A status must carry a code and a message: a crash or a leak is what
   * the fuzzer (ASan, LeakSanitizer) reports. */
  if (hali_status_code(s) == HALI_STATUS_OK || !hali_status_message(s)) abort();
  hali_status_free(s);
}

void hali_fuzz_load_and_run(const uint8_t *data, size_t size) {
  hali_instance_t *in = NULL;
  if (hali_instance_create(NULL, &in)) abort();
  hali_module_t *m = NULL;
  hali_status_t s = hali_module_load_bytes(in, data, size, "fuzz", &m);
  if (s) {
    fail_unless_clean(s);
    hali_instance_release(in);
    return;
  }
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  hali_device_t *dev = NULL;
  if (hali_device_create(in, &dp, &dev)) abort();
  hali_context_params_t cp;
  memset(&cp, 0, sizeof(cp));
  cp.max_memory_bytes = 1 << 20;
  cp.max_call_depth = 64;
  cp.fuel = 20000;
  /* A program may legitimately wait: `hal.fence.await` with a long
   * timeout on a fence only it could have signalled is not a hang of
   * hali's, but it must not stall the fuzzer (its timeout is 10 s). */
  cp.max_duration_ns = 500000000;
  hali_context_t *c = NULL;
  s = hali_context_create(in, dev, &m, 1, &cp, &c);
  if (!s) {
    size_t n = hali_module_function_count(m);
    for (size_t i = 0; i < n && i < 64; ++i) {
      hali_function_t *f = NULL;
      const char *name = hali_module_function_name(m, i);
      if (!name || hali_context_lookup_function(c, name, &f)) {
        /* imports and the like may not be callable by name */
        hali_status_t e = hali_context_lookup_function(c, name ? name : "", &f);
        fail_unless_clean(e);
        continue;
      }
      size_t na = hali_function_argument_count(f);
      size_t nr = hali_function_result_count(f);
      if (na > 16 || nr > 16) continue;
      hali_variant_t args[16], res[16];
      bool scalar = true;
      for (size_t a = 0; a < na && scalar; ++a) {
        switch (hali_function_argument_type(f, a)) {
        case HALI_VARIANT_I32: args[a] = hali_variant_i32(3); break;
        case HALI_VARIANT_I64: args[a] = hali_variant_i64(3); break;
        case HALI_VARIANT_F32: args[a] = hali_variant_f32(1.5f); break;
        case HALI_VARIANT_F64: args[a] = hali_variant_f64(1.5); break;
        default: scalar = false; break;
        }
      }
      if (!scalar) continue;
      s = hali_context_invoke(c, f, args, na, res, nr);
      if (!s)
        for (size_t r = 0; r < nr; ++r) hali_variant_release(&res[r]);
      fail_unless_clean(s);
    }
    hali_context_release(c);
  } else {
    fail_unless_clean(s);
  }
  hali_module_release(m);
  hali_device_release(dev);
  hali_instance_release(in);
}
