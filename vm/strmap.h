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
 * slot keeps its key's hash and length, and a key of up to 8 bytes is
 * kept in the slot itself, so that a probe reads one slot and, for short
 * names (most registers and labels), never the key's own memory, which in
 * a large module lies anywhere (a cache miss per lookup).  Bytes are
 * compared only when the hashes agree.  A zeroed map is empty and valid;
 * not thread-safe.
 */
#ifndef HALI_VM_STRMAP_H
#define HALI_VM_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What find returns for a key the map does not hold, and what insert
 * returns when it runs out of memory. */
#define HALI_STRMAP_NONE UINT32_MAX

/* Keys of at most this many bytes are copied into their slot. */
#define HALI_STRMAP_INLINE 8

typedef struct hali_strmap_slot_s {
  union {
    const char *key;                /* len > HALI_STRMAP_INLINE */
    char bytes[HALI_STRMAP_INLINE]; /* len <= HALI_STRMAP_INLINE */
  } k;
  uint32_t len1; /* the key's length + 1; 0: empty */
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
 * key of UINT32_MAX bytes or more, or when |value| is HALI_STRMAP_NONE. */
uint32_t hali_strmap_insert(hali_strmap_t *m, const char *key, size_t len,
                            uint32_t value);

/* The hash the map gives |key|, and find and insert given it: a caller
 * that hashes a key early (the assembler, as it lexes a register name)
 * can prefetch its slot, so that lookups do not wait for memory one after
 * the other. */
uint32_t hali_strmap_hash(const char *key, size_t len);
uint32_t hali_strmap_find_hashed(const hali_strmap_t *m, const char *key,
                                 size_t len, uint32_t hash);
uint32_t hali_strmap_insert_hashed(hali_strmap_t *m, const char *key,
                                   size_t len, uint32_t hash, uint32_t value);
/* A hint: the slot where a key of |hash| starts its probe will be read. */
static inline void hali_strmap_prefetch(const hali_strmap_t *m,
                                        uint32_t hash) {
  if (m->capacity) __builtin_prefetch(&m->slots[hash & (m->capacity - 1)]);
}

#endif /* HALI_VM_STRMAP_H */
