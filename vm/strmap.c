/* hali — a map from strings to 32-bit values (see vm/strmap.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vm/strmap.h"
#include "base/alloc.h"

/* FNV-1a over the bytes, then a final mix so that the low bits (the slot
 * index) depend on every byte: names such as %r1 ... %r99999 differ only
 * in their last characters. */
uint32_t hali_strmap_hash(const char *key, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; ++i) {
    h ^= (unsigned char)key[i];
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return (uint32_t)h;
}

void hali_strmap_free(hali_strmap_t *m) {
  hali_free(m->slots);
  memset(m, 0, sizeof(*m));
}

void hali_strmap_clear(hali_strmap_t *m) {
  /* Clearing costs the table's size, not the count: a table much larger
   * than what it held (one big function, then many small ones) is dropped
   * instead, so that a clear is paid for by the inserts before it. */
  if (m->capacity > 64 && m->count < m->capacity / 8) {
    uint64_t probes = m->probes;
    hali_strmap_free(m);
    m->probes = probes;
    return;
  }
  if (m->slots) memset(m->slots, 0, m->capacity * sizeof(m->slots[0]));
  m->count = 0;
}

/* Does slot |s| (not empty) hold |key|? */
static inline bool slot_holds(const hali_strmap_slot_t *s, const char *key,
                              uint32_t len, uint32_t hash) {
  if (s->hash != hash || s->len1 != len + 1) return false;
  const char *k = len <= HALI_STRMAP_INLINE ? s->k.bytes : s->k.key;
  return len == 0 || memcmp(k, key, len) == 0;
}

/* The slot holding |key|, or the empty slot where it would go; adds the
 * slots it examined to |*probes|. */
static hali_strmap_slot_t *strmap_slot(const hali_strmap_t *m, const char *key,
                                       uint32_t len, uint32_t hash,
                                       uint64_t *probes) {
  uint32_t mask = m->capacity - 1;
  for (uint32_t i = hash & mask;; i = (i + 1) & mask) {
    hali_strmap_slot_t *s = &m->slots[i];
    ++*probes;
    if (!s->len1 || slot_holds(s, key, len, hash)) return s;
  }
}

/* The empty slot where a key of |hash| goes (rehashing: keys are
 * distinct, so none is compared). */
static hali_strmap_slot_t *strmap_free_slot(const hali_strmap_t *m,
                                            uint32_t hash, uint64_t *probes) {
  uint32_t mask = m->capacity - 1;
  for (uint32_t i = hash & mask;; i = (i + 1) & mask) {
    ++*probes;
    if (!m->slots[i].len1) return &m->slots[i];
  }
}

bool hali_strmap_reserve(hali_strmap_t *m, uint32_t n) {
  if (n > UINT32_MAX / 4) return false;
  uint32_t cap = m->capacity ? m->capacity : 16;
  while (cap < 2 * n) cap *= 2; /* at most half full */
  if (cap == m->capacity) return true;
  hali_strmap_slot_t *old = m->slots;
  uint32_t old_cap = m->capacity;
  m->slots = hali_calloc(cap, sizeof(m->slots[0]));
  if (!m->slots) {
    m->slots = old;
    return false;
  }
  m->capacity = cap;
  for (uint32_t i = 0; i < old_cap; ++i)
    if (old[i].len1) *strmap_free_slot(m, old[i].hash, &m->probes) = old[i];
  hali_free(old);
  return true;
}

uint32_t hali_strmap_find_hashed(const hali_strmap_t *m, const char *key,
                                 size_t len, uint32_t hash) {
  if (!m->count || len >= UINT32_MAX) return HALI_STRMAP_NONE;
  uint64_t probes = 0; /* not recorded: a const map may be shared */
  hali_strmap_slot_t *s = strmap_slot(m, key, (uint32_t)len, hash, &probes);
  return s->len1 ? s->value : HALI_STRMAP_NONE;
}

uint32_t hali_strmap_find(const hali_strmap_t *m, const char *key,
                          size_t len) {
  if (!m->count || len >= UINT32_MAX) return HALI_STRMAP_NONE;
  return hali_strmap_find_hashed(m, key, len, hali_strmap_hash(key, len));
}

uint32_t hali_strmap_insert_hashed(hali_strmap_t *m, const char *key,
                                   size_t len, uint32_t hash, uint32_t value) {
  if (len >= UINT32_MAX || value == HALI_STRMAP_NONE) return HALI_STRMAP_NONE;
  if (!hali_strmap_reserve(m, m->count + 1)) return HALI_STRMAP_NONE;
  hali_strmap_slot_t *s = strmap_slot(m, key, (uint32_t)len, hash, &m->probes);
  if (s->len1) return s->value;
  if (len <= HALI_STRMAP_INLINE) {
    memset(s->k.bytes, 0, sizeof(s->k.bytes));
    if (len) memcpy(s->k.bytes, key, len);
  } else {
    s->k.key = key;
  }
  s->len1 = (uint32_t)len + 1;
  s->hash = hash;
  s->value = value;
  m->count++;
  return value;
}

uint32_t hali_strmap_insert(hali_strmap_t *m, const char *key, size_t len,
                            uint32_t value) {
  if (len >= UINT32_MAX || value == HALI_STRMAP_NONE) return HALI_STRMAP_NONE;
  return hali_strmap_insert_hashed(m, key, len, hali_strmap_hash(key, len),
                                   value);
}
