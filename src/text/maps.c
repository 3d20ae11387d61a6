/* Open-addressing hash tables for the vocabulary and the merges. See
 * maps.h. Linear probing; the tables grow at half full, so a probe ends.
 *
 * The keys come from a tokenizer file and the hashes are not keyed, so a
 * crafted file could make its keys collide and its loading quadratic. An
 * insertion that probes more than MAX_PROBE slots is refused
 * (PR_ERR_TOO_LARGE): loading stays O(MAX_PROBE n), and a lookup walks at
 * most MAX_PROBE slots. Real vocabularies probe 25 slots at most (Llama 3,
 * Qwen3, GPT-4o, GPT-2: measured). */
#include "text/maps.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROBE 512

struct pr_text__str_slot {
  const char *key; /* NULL: empty */
  uint32_t len;
  int32_t id;
};

struct pr_text__pair_slot {
  uint64_t key; /* (left << 32 | right) + 1; 0: empty */
  uint32_t rank;
  int32_t merged;
};

static size_t table_size(size_t expected) {
  size_t cap = 16;
  while (cap < expected * 2 + 1) cap *= 2;
  return cap;
}

/* What both tables share: *slots holds cap slots of slot_size bytes, a
 * slot in use when used() says so; find() gives the slot for the key of
 * slot `of` in a table (NULL past MAX_PROBE). */
typedef bool (*slot_used_fn)(const void *slot);
typedef void *(*slot_find_fn)(void *slots, size_t cap, const void *of);

/* Doubles the table when one more key would fill it past half. */
static pr_status_t grow_for_one(void **slots, size_t *cap, size_t n, size_t slot_size,
                                slot_used_fn used, slot_find_fn find) {
  if ((n + 1) * 2 <= *cap) return PR_OK;
  size_t bigger = *cap * 2;
  char *to = calloc(bigger, slot_size), *from = *slots;
  if (!to) return PR_ERR_NOMEM;
  for (size_t i = 0; i < *cap; i++) {
    const void *slot = from + i * slot_size;
    if (!used(slot)) continue;
    void *at = find(to, bigger, slot);
    if (!at) {
      free(to);
      return PR_ERR_TOO_LARGE;
    }
    memcpy(at, slot, slot_size);
  }
  free(*slots);
  *slots = to;
  *cap = bigger;
  return PR_OK;
}

pr_status_t pr_text__strmap_init(pr_text__strmap_t *m, size_t expected) {
  m->n = 0;
  m->cap = table_size(expected);
  m->slots = calloc(m->cap, sizeof *m->slots);
  return m->slots ? PR_OK : PR_ERR_NOMEM;
}

void pr_text__strmap_free(pr_text__strmap_t *m) {
  free(m->slots);
  m->slots = NULL;
  m->cap = m->n = 0;
}

/* key's slot or the empty one where it would go; NULL past MAX_PROBE. */
static struct pr_text__str_slot *str_find(struct pr_text__str_slot *slots, size_t cap,
                                          const char *key, size_t len) {
  size_t i = (size_t)pr_text__hash(key, len) & (cap - 1);
  for (int probe = 0; probe <= MAX_PROBE; probe++, i = (i + 1) & (cap - 1)) {
    struct pr_text__str_slot *s = &slots[i];
    if (!s->key || (s->len == len && !memcmp(s->key, key, len))) return s;
  }
  return NULL;
}

static bool str_used(const void *slot) {
  return ((const struct pr_text__str_slot *)slot)->key != NULL;
}

static void *str_refind(void *slots, size_t cap, const void *of) {
  const struct pr_text__str_slot *o = of;
  return str_find(slots, cap, o->key, o->len);
}

pr_status_t pr_text__strmap_put(pr_text__strmap_t *m, const char *key, uint32_t len, int32_t id) {
  void *slots = m->slots;
  pr_status_t st = grow_for_one(&slots, &m->cap, m->n, sizeof *m->slots, str_used, str_refind);
  m->slots = slots;
  if (st) return st;
  struct pr_text__str_slot *s = str_find(m->slots, m->cap, key, len);
  if (!s) return PR_ERR_TOO_LARGE;
  if (!s->key) m->n++;
  s->key = key;
  s->len = len;
  s->id = id;
  return PR_OK;
}

int32_t pr_text__strmap_get(const pr_text__strmap_t *m, const char *key, size_t len) {
  if (!m->cap || len > UINT32_MAX) return -1;
  const struct pr_text__str_slot *s = str_find(m->slots, m->cap, key, len);
  return s && s->key ? s->id : -1;
}

pr_status_t pr_text__pairmap_init(pr_text__pairmap_t *m, size_t expected) {
  m->n = 0;
  m->cap = table_size(expected);
  m->slots = calloc(m->cap, sizeof *m->slots);
  return m->slots ? PR_OK : PR_ERR_NOMEM;
}

void pr_text__pairmap_free(pr_text__pairmap_t *m) {
  free(m->slots);
  m->slots = NULL;
  m->cap = m->n = 0;
}

static inline uint64_t pair_key(int32_t left, int32_t right) {
  return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
}

static struct pr_text__pair_slot *pair_find(struct pr_text__pair_slot *slots, size_t cap,
                                            uint64_t key) {
  /* a 64-bit mix (splitmix64's finalizer) spreads ids that differ in a few bits */
  uint64_t h = key;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  size_t i = (size_t)h & (cap - 1);
  for (int probe = 0; probe <= MAX_PROBE; probe++, i = (i + 1) & (cap - 1))
    if (!slots[i].key || slots[i].key == key) return &slots[i];
  return NULL;
}

static bool pair_used(const void *slot) {
  return ((const struct pr_text__pair_slot *)slot)->key != 0;
}

static void *pair_refind(void *slots, size_t cap, const void *of) {
  return pair_find(slots, cap, ((const struct pr_text__pair_slot *)of)->key);
}

pr_status_t pr_text__pairmap_put(pr_text__pairmap_t *m, int32_t left, int32_t right, uint32_t rank,
                                 int32_t merged) {
  void *slots = m->slots;
  pr_status_t st = grow_for_one(&slots, &m->cap, m->n, sizeof *m->slots, pair_used, pair_refind);
  m->slots = slots;
  if (st) return st;
  uint64_t key = pair_key(left, right);
  struct pr_text__pair_slot *s = pair_find(m->slots, m->cap, key);
  if (!s) return PR_ERR_TOO_LARGE;
  if (!s->key) m->n++;
  s->key = key;
  s->rank = rank;
  s->merged = merged;
  return PR_OK;
}

int pr_text__pairmap_get(const pr_text__pairmap_t *m, int32_t left, int32_t right, uint32_t *rank,
                         int32_t *merged) {
  if (!m->cap) return -1;
  const struct pr_text__pair_slot *s = pair_find(m->slots, m->cap, pair_key(left, right));
  if (!s || !s->key) return -1;
  *rank = s->rank;
  *merged = s->merged;
  return 0;
}
