/* Shared by packrat profile / plan / run: get a model's profile from a file,
 * the cache, or by measuring it (the planner logs its progress on stderr). */
#ifndef PR_CLI_PROFILE_UTIL_H
#define PR_CLI_PROFILE_UTIL_H

#include <stdbool.h>

#include "cli/args.h"
#include "packrat/profiler.h"

typedef struct {
  int cores;     /* T (0: every physical core) */
  int max_batch; /* grid up to this batch */
  const int *extra;
  int n_extra;
  bool read_cache;           /* use a cached profile when one fits */
  bool write_cache;          /* store a measured profile in the cache */
  const pr_cli_dims_t *dims; /* --dim values (may be NULL) */
  int precision;             /* of the measured sessions (PR_PRECISION_...) */
  /* when n_batches > 0: exactly these batch sizes (ascending), not the grid */
  const int *batches;
  int n_batches;
  double point_s; /* time budget of one point (0: the profiler's 3 s) */
} pr_cli_profile_opts_t;

/* Loads the cached profile when it matches (and is good), else measures it
 * and caches it when it is good (out->n_suspicious == 0). cache_path receives
 * the cache file the profile came from or went to, "" when none (no cache,
 * a suspicious profile, a cache that cannot be written: warnings, not
 * errors). Returns 0, or -1 when the profile could not be had (message on
 * stderr). */
int pr__cli_get_profile(pr_model_t *model, const char *model_path, const pr_cli_profile_opts_t *o,
                        pr_profile_t *out, char *cache_path, size_t cache_len);

#endif
