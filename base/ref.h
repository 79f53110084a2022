/* hali — the header every reference-counted object starts with.
 *
 * HAL objects (devices, buffers, views, command buffers, fences, ...) and
 * anything else a ref register can hold embed hali_ref_t as their FIRST
 * member.  The vtable's first entry is always destroy; the type tag lets the
 * VM print refs (tracing) and lets host-facing entry points check what they
 * were given without trusting the caller.
 *
 * Counting is atomic: refs cross threads (queue threads, workers, fibers).
 */
#ifndef HALI_BASE_REF_H
#define HALI_BASE_REF_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/types.h"

typedef struct hali_ref_s hali_ref_t;

typedef struct hali_ref_vtable_s {
  void (*destroy)(hali_ref_t *ref);
} hali_ref_vtable_t;

struct hali_ref_s {
  atomic_uint_fast32_t count;
  uint32_t id;                      /* short id for traces and reports */
  hali_type_t type;                 /* one of the HALI_TYPE_* ref types */
  const hali_ref_vtable_t *vtable;  /* points at the object's own vtable,
                                       whose first member is this one */
};

/* The next short id (process-wide, starting at 1). */
uint32_t hali_ref_next_id(void);

static inline void hali_ref_init(hali_ref_t *ref, hali_type_t type,
                                 const hali_ref_vtable_t *vtable) {
  atomic_init(&ref->count, 1);
  ref->id = hali_ref_next_id();
  ref->type = type;
  ref->vtable = vtable;
}

static inline void hali_ref_retain(hali_ref_t *ref) {
  if (ref) atomic_fetch_add_explicit(&ref->count, 1, memory_order_relaxed);
}

static inline void hali_ref_release(hali_ref_t *ref) {
  if (ref &&
      atomic_fetch_sub_explicit(&ref->count, 1, memory_order_acq_rel) == 1)
    ref->vtable->destroy(ref);
}

#endif /* HALI_BASE_REF_H */
