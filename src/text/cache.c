/* The word cache: a word's ids, kept so that the words a text repeats are
 * merged once. Bounded: at most PR_TEXT__CACHE_WORDS words of at most
 * PR_TEXT__CACHE_MAX_WORD bytes, and emptied when full (a simpler bound
 * than the reference's LRU; it changes speed, never an id).
 *
 * The words come from the text, so from whoever sends it, and the hash is
 * not keyed: a text of words that collide could make every lookup walk a
 * long chain. A probe therefore stops after MAX_PROBE slots and counts as
 * a miss (the word is merged again, not cached): a lookup costs at most
 * MAX_PROBE comparisons whatever the text. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

#define SLOTS 32768 /* a power of two, over twice PR_TEXT__CACHE_WORDS */
#define MAX_PROBE 16
_Static_assert(SLOTS >= 2 * PR_TEXT__CACHE_WORDS, "the cache's table stays half empty");

void pr_text__cache_free(pr_text__cache_t *c) {
  free(c->hash);
  free(c->key_off);
  free(c->key_len);
  free(c->ids_off);
  free(c->ids_n);
  free(c->keys);
  free(c->ids);
  *c = (pr_text__cache_t){0};
}

static size_t find(const pr_text__cache_t *c, uint64_t h, const char *w, size_t len) {
  size_t i = (size_t)h & (SLOTS - 1);
  for (; c->hash[i]; i = (i + 1) & (SLOTS - 1))
    if (c->hash[i] == h && c->key_len[i] == len && !memcmp(c->keys + c->key_off[i], w, len)) break;
  return i;
}

static inline uint64_t word_hash(const char *w, size_t len) {
  uint64_t h = pr_text__hash(w, len);
  return h ? h : 1;
}

const int32_t *pr_text__cache_get(const pr_text__cache_t *c, const char *w, size_t len, size_t *n) {
  if (!c->hash || len > PR_TEXT__CACHE_MAX_WORD) return NULL;
  size_t i = find(c, word_hash(w, len), w, len);
  if (i == SIZE_MAX || !c->hash[i]) return NULL;
  *n = c->ids_n[i];
  return c->ids + c->ids_off[i];
}

void pr_text__cache_put(pr_text__cache_t *c, const char *w, size_t len, const int32_t *ids,
                        size_t n) {
  if (len > PR_TEXT__CACHE_MAX_WORD || n > PR_TEXT__CACHE_MAX_WORD) return;
  if (!c->hash) {
    c->hash = calloc(SLOTS, sizeof *c->hash);
    c->key_off = malloc(SLOTS * sizeof *c->key_off);
    c->key_len = malloc(SLOTS * sizeof *c->key_len);
    c->ids_off = malloc(SLOTS * sizeof *c->ids_off);
    c->ids_n = malloc(SLOTS * sizeof *c->ids_n);
    c->keys_cap = (size_t)PR_TEXT__CACHE_WORDS * 16;
    c->ids_cap = (size_t)PR_TEXT__CACHE_WORDS * 4;
    c->keys = malloc(c->keys_cap);
    c->ids = malloc(c->ids_cap * sizeof *c->ids);
    if (!c->hash || !c->key_off || !c->key_len || !c->ids_off || !c->ids_n || !c->keys || !c->ids) {
      pr_text__cache_free(c); /* no cache: slower, not wrong */
      return;
    }
  }
  if (c->n >= PR_TEXT__CACHE_WORDS || c->keys_len + len > c->keys_cap ||
      c->ids_len + n > c->ids_cap) {
    memset(c->hash, 0, SLOTS * sizeof *c->hash);
    c->n = c->keys_len = c->ids_len = 0;
  }
  uint64_t h = word_hash(w, len);
  size_t i = find(c, h, w, len);
  if (i == SIZE_MAX || c->hash[i]) return;
  c->hash[i] = h;
  c->key_off[i] = (uint32_t)c->keys_len;
  c->key_len[i] = (uint32_t)len;
  c->ids_off[i] = (uint32_t)c->ids_len;
  c->ids_n[i] = (uint32_t)n;
  memcpy(c->keys + c->keys_len, w, len);
  memcpy(c->ids + c->ids_len, ids, n * sizeof *ids);
  c->keys_len += len;
  c->ids_len += n;
  c->n++;
}
