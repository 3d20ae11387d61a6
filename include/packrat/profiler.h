/* Profiling a model: latency of one instance for every thread count and a
 * grid of batch sizes, each measured on its own pinned cores; profiles are
 * saved as JSON and cached by model hash, CPU, core count and version. */
#ifndef PACKRAT_PROFILER_H
#define PACKRAT_PROFILER_H

#include <stdbool.h>

#include "packrat/planner.h"

/* Part of the profile cache key: a release whose engine speed changes gets a
 * new one, so that cached profiles from an older engine are not reused. */
#define PR_VERSION "0.2.0"

typedef struct {
  int max_threads;          /* T: thread counts 1..T */
  int max_batch;            /* grid: every b <= 8, then powers of two up to max_batch */
  const int *extra_batches; /* also measured (batch sizes a plan needs) */
  int n_extra;
  const int *cpus; /* CPU order (topology); first T used */
  int n_cpus;
  double max_point_s; /* stop repeating a point after this long (>= 3 runs) */
  bool no_corun;      /* skip measuring the slowdown of co-running instances */
  /* called after each point (may be NULL) */
  void (*progress)(void *ctx, int done, int total, const pr_profile_point_t *point);
  void *ctx;
} pr_profile_options_t;

/* The batch grid for max_batch (plus extras), ascending, deduplicated;
 * returns the count written into out (at most max). */
int pr_profile_grid(int max_batch, const int *extra, int n_extra, int *out, int max);

/* Measures every point; base supplies dims other than the batch. The model
 * name in the profile is taken from model_name. */
pr_status_t pr_profile_measure(pr_model_t *model, const char *model_name,
                               const pr_session_options_t *base, const pr_profile_options_t *opt,
                               pr_profile_t *out, char *err, size_t err_len);

/* JSON: {"model", "model_sha256", "cpu", "cores", "version", "points": [...]}.
 * Save writes a temporary file next to path and renames it over path
 * (PR_ERR_IO when it cannot; PR_ERR_INVALID for an empty path): path is
 * either the old file or the whole new one, and nothing else is left behind. */
pr_status_t pr_profile_save(const pr_profile_t *p, const char *path, char *err, size_t err_len);
pr_status_t pr_profile_load(const char *path, pr_profile_t *p, char *err, size_t err_len);

/* Path of the cache file for (model hash, CPU, cores, values of the named
 * symbolic dims in base (may be NULL), version): under $PACKRAT_CACHE, else
 * $XDG_CACHE_HOME/packrat, else ~/.cache/packrat. Creates the folder. On any
 * failure (the folder cannot be made or is not a folder, sha256 is not hex,
 * path would not fit in len) returns PR_ERR_IO or PR_ERR_INVALID and leaves
 * path empty (path[0] = 0 when len > 0): a failed call never yields a path. */
pr_status_t pr_profile_cache_path(const char *sha256, const char *cpu, int cores,
                                  const pr_session_options_t *base, char *path, size_t len);

/* Stores p in the cache (pr_profile_cache_path of p's model hash, CPU and
 * cores and base's dims), atomically (pr_profile_save). Meant to be called
 * and not checked: every cache failure is logged as a warning and returned,
 * and nothing but the cache file is ever written. path (may be NULL) receives the file written, ""
 * when none. */
pr_status_t pr_profile_cache_save(const pr_profile_t *p, const pr_session_options_t *base,
                                  char *path, size_t len);

/* True when p was made for this model, CPU, core count and version, and
 * covers threads 1..cores and every batch in the grid for max_batch. */
int pr_profile_matches(const pr_profile_t *p, const char *sha256, const char *cpu, int cores,
                       int max_batch);

#endif
