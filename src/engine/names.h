/* String -> int map (open addressing) used to resolve value names while loading. */
#ifndef PR_ENGINE_NAMES_H
#define PR_ENGINE_NAMES_H

#include <stddef.h>

typedef struct {
  const char **keys; /* borrowed */
  int *vals;
  size_t cap, len;
} pr_names_t;

void pr__names_init(pr_names_t *t);
void pr__names_free(pr_names_t *t);
/* Returns the value for key or -1. */
int pr__names_get(const pr_names_t *t, const char *key);
/* Inserts (key must outlive the map); returns 0 or -1 on allocation failure. */
int pr__names_put(pr_names_t *t, const char *key, int val);

#endif
