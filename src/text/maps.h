/* The text layer's hash tables: token strings to ids, and merge pairs
 * (left id, right id) to their rank and the merged token's id. Open
 * addressing, power-of-two sizes, never more than half full. */
#ifndef PR_TEXT_MAPS_H
#define PR_TEXT_MAPS_H

#include <stddef.h>
#include <stdint.h>

#include "packrat/engine.h"

/* Strings (borrowed: the caller keeps them alive and in place) to ids. */
typedef struct {
  struct pr_text__str_slot *slots;
  size_t cap, n;
} pr_text__strmap_t;

pr_status_t pr_text__strmap_init(pr_text__strmap_t *m, size_t expected);
void pr_text__strmap_free(pr_text__strmap_t *m);
/* Sets key -> id (replacing an earlier id for the same key).
 * PR_ERR_TOO_LARGE when the key collides with too many others (maps.c). */
pr_status_t pr_text__strmap_put(pr_text__strmap_t *m, const char *key, uint32_t len, int32_t id);
/* The id of key, or -1. */
int32_t pr_text__strmap_get(const pr_text__strmap_t *m, const char *key, size_t len);

/* (left, right) -> (rank, merged id). */
typedef struct {
  struct pr_text__pair_slot *slots;
  size_t cap, n;
} pr_text__pairmap_t;

pr_status_t pr_text__pairmap_init(pr_text__pairmap_t *m, size_t expected);
void pr_text__pairmap_free(pr_text__pairmap_t *m);
/* Sets the pair's rank and merged id (a later merge of the same pair
 * replaces an earlier one, as the reference's map does). PR_ERR_TOO_LARGE
 * as for strings. */
pr_status_t pr_text__pairmap_put(pr_text__pairmap_t *m, int32_t left, int32_t right, uint32_t rank,
                                 int32_t merged);
/* 0 and the rank and merged id of the pair, or -1 when it does not merge. */
int pr_text__pairmap_get(const pr_text__pairmap_t *m, int32_t left, int32_t right, uint32_t *rank,
                         int32_t *merged);

/* FNV-1a over bytes: the hash of strings here and of the word cache. */
static inline uint64_t pr_text__hash(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

#endif
