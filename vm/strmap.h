/* hali — a map from strings to 32-bit values (open addressing).
 *
 * Every name lookup at load time goes through one of these (the
 * assembler's registers, blocks, functions, rodata and strings; the
 * verifier's uniqueness checks; the binary writer's string table; the op
 * names), so that loading stays linear in the size of the module.
 *
 * The map does not copy its keys: a key must stay valid, unchanged, for as
 * long as the map holds it (source text, or names owned by the IR).  Slots
 * are linearly probed in a power-of-two table kept at most half full; each
 * slot keeps its key's hash, so a probe compares bytes only when the hashes
 * agree.  A zeroed map is empty and valid; not thread-safe.
 */
#ifndef HALI_VM_STRMAP_H
#define HALI_VM_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What find returns for a key the map does not hold, and what insert
 * returns when it runs out of memory. */
#define HALI_STRMAP_NONE UINT32_MAX

typedef struct hali_strmap_slot_s {
  const char *key; /* NULL: empty */
  uint32_t len;
  uint32_t hash;
  uint32_t value;
} hali_strmap_slot_t;

typedef struct hali_strmap_s {
  hali_strmap_slot_t *slots;
  uint32_t capacity; /* 0 or a power of two */
  uint32_t count;
  /* Slots examined by every insert so far (rehashes included): the tests
   * assert that it grows linearly with the number of keys.  A find probes
   * the same chains but is not counted, so that a built map is read-only
   * and may be shared between threads. */
  uint64_t probes;
} hali_strmap_t;

/* Frees the table and empties |m| (the keys are the caller's). */
void hali_strmap_free(hali_strmap_t *m);
/* Empties |m|, keeping its table for reuse. */
void hali_strmap_clear(hali_strmap_t *m);
/* Makes room for |n| keys in all, so that inserting them does not
 * rehash; false on OOM. */
bool hali_strmap_reserve(hali_strmap_t *m, uint32_t n);
/* The value of |key| (|len| bytes, any bytes), or HALI_STRMAP_NONE.  Does
 * not modify |m|: safe from any number of threads while nobody inserts. */
uint32_t hali_strmap_find(const hali_strmap_t *m, const char *key, size_t len);
/* Maps |key| to |value| unless it is already there.  Returns the value the
 * key now has — |value|, or the earlier one, so a caller tells a duplicate
 * by the result differing from |value| — or HALI_STRMAP_NONE on OOM, on a
 * key longer than UINT32_MAX bytes, or when |value| is HALI_STRMAP_NONE. */
uint32_t hali_strmap_insert(hali_strmap_t *m, const char *key, size_t len,
                            uint32_t value);

#endif /* HALI_VM_STRMAP_H */
