#include "engine/names.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void pr__names_init(pr_names_t *t) {
  memset(t, 0, sizeof *t);
}

void pr__names_free(pr_names_t *t) {
  free(t->keys);
  free(t->vals);
  memset(t, 0, sizeof *t);
}

int pr__names_get(const pr_names_t *t, const char *key) {
  if (!t->cap) return -1;
  for (size_t i = hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    if (!t->keys[i]) return -1;
    if (!strcmp(t->keys[i], key)) return t->vals[i];
  }
}

static int grow(pr_names_t *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  const char **keys = calloc(cap, sizeof *keys);
  int *vals = calloc(cap, sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return -1;
  }
  for (size_t j = 0; j < t->cap; j++) {
    if (!t->keys[j]) continue;
    size_t i = hash(t->keys[j]) & (cap - 1);
    while (keys[i]) i = (i + 1) & (cap - 1);
    keys[i] = t->keys[j];
    vals[i] = t->vals[j];
  }
  free(t->keys);
  free(t->vals);
  t->keys = keys;
  t->vals = vals;
  t->cap = cap;
  return 0;
}

int pr__names_put(pr_names_t *t, const char *key, int val) {
  if ((t->len + 1) * 2 > t->cap && grow(t) < 0) return -1;
  size_t i = hash(key) & (t->cap - 1);
  while (t->keys[i] && strcmp(t->keys[i], key)) i = (i + 1) & (t->cap - 1);
  if (!t->keys[i]) t->len++;
  t->keys[i] = key;
  t->vals[i] = val;
  return 0;
}
