/* Profiling a model: latency of one instance for every thread count and a
 * grid of batch sizes, each measured on its own pinned cores; profiles are
 * saved as JSON and cached by model hash, CPU, core count and version. */
#ifndef PACKRAT_PROFILER_H
#define PACKRAT_PROFILER_H

#include <stdbool.h>

#include "packrat/planner.h"

#pragma GCC visibility push(default) /* the public API: exported */

/* Part of the profile cache key: a release whose engine speed changes gets a
 * new one, so that cached profiles from an older engine are not reused. */
#define PR_VERSION "0.2.0"

typedef struct {
  int max_threads;          /* T: thread counts 1..T */
  int max_batch;            /* grid: every b <= 8, then powers of two up to max_batch */
  const int *extra_batches; /* also measured (batch sizes a plan needs) */
  int n_extra;
  /* when n_batches > 0: exactly these batch sizes (ascending, at most 64),
   * instead of the grid of max_batch and the extras */
  const int *batches;
  int n_batches;
  const int *cpus; /* CPU order (topology); first T used */
  int n_cpus;
  double max_point_s; /* time budget of one point: its runs' sum (0: 3 s; >= 3 runs) */
  double tolerance;   /* 0: PR_PROFILE_TOLERANCE */
  bool no_corun;      /* skip measuring the slowdown of co-running instances */
  /* called after each point of the first pass (may be NULL) */
  void (*progress)(void *ctx, int done, int total, const pr_profile_point_t *point);
  void *ctx;
  /* Test hook (NULL: the real engine). When set, it is called for every timed
   * run instead of the engine (no session, no warm-up, no pinning, no
   * co-running; model may be NULL) and returns that run's latency in ms
   * (< 0: the run failed). pass is 0 for the first pass, 1 for the
   * re-measure of suspicious points; run counts from 0 within a point. */
  double (*measure_run)(void *ctx, int threads, int batch, int pass, int run);
  void *measure_ctx;
} pr_profile_options_t;

/* Measurement quality.
 *
 * The tolerance: two latencies agree when they differ by at most
 * PR_PROFILE_TOLERANCE (5%) of the reference, or by PR_PROFILE_FLOOR_MS
 * (10 us) when that is larger (below it, differences are timer and
 * scheduler noise that no plan depends on).
 *
 * Each point is run once to warm up, then timed until its runs are stable:
 * the middle half of the runs (first to third quartile) agrees with their
 * median, after at least PR_PROFILE_MIN_RUNS runs. The point's time budget
 * (max_point_s, the sum of its run times) ends it earlier, but never before 3
 * runs; PR_PROFILE_MAX_RUNS ends it always. The point records the median (its
 * latency), the p90, the number of runs and the spread of the middle half.
 *
 * A point is suspicious (pr_profile_assess) when
 * - noisy: its p90 is above PR_PROFILE_P90_LIMIT times its median (and
 *   above it by more than the floor);
 * - unstable: its middle runs never agreed (the budget ran out first);
 * - inverted: its median is above that of the fastest point with fewer
 *   threads at the same batch beyond the tolerance.
 * After the first pass the profiler measures every suspicious point again
 * (and, for an inversion, the fewer-thread point it is compared with). The
 * point is reproduced, and real, when the re-measure agrees with the first
 * pass: noisy/unstable: the new median agrees with the first; inverted: more
 * threads are still not faster beyond the tolerance (a small model where
 * more threads really are slower is reproduced and kept). The re-measured
 * values replace the first ones, and the point is marked (remeasured = 1, or
 * -1 when not reproduced). The profile is good, and may be cached, when no
 * point is suspicious afterwards (n_suspicious == 0); otherwise it is
 * returned for use, with a warning in the log, and must not be cached. */
#define PR_PROFILE_TOLERANCE 0.05
#define PR_PROFILE_FLOOR_MS 0.01
#define PR_PROFILE_P90_LIMIT 1.5
#define PR_PROFILE_MIN_RUNS 10
#define PR_PROFILE_MAX_RUNS 50

/* Why a point is suspicious (bits of pr_profile_issue_t.why). */
enum {
  PR_PROFILE_NOISY = 1,          /* p90 above PR_PROFILE_P90_LIMIT x median */
  PR_PROFILE_UNSTABLE = 2,       /* middle runs spread wider than the tolerance */
  PR_PROFILE_INVERTED = 4,       /* slower than fewer threads at the same batch */
  PR_PROFILE_NOT_REPRODUCED = 8, /* re-measured, and the re-measure disagreed */
};

typedef struct {
  int threads, batch;
  double median_ms, p90_ms; /* alone on the machine (isolated) */
  double spread;            /* of the middle half of the runs, over the median */
  int why;                  /* PR_PROFILE_* bits */
  int fewer_threads;        /* inverted: the fastest point with fewer threads */
  double fewer_ms;          /* its median */
} pr_profile_issue_t;

/* Pure: the suspicious points of p at tolerance (<= 0: p->tolerance, else
 * PR_PROFILE_TOLERANCE). Points re-measured and reproduced (remeasured = 1)
 * are not suspicious; points not reproduced (-1) always are. Writes the first
 * max issues (issues may be NULL with max 0) in the order of p's points and
 * returns how many points are suspicious (0: good). */
int pr_profile_assess(const pr_profile_t *p, double tolerance, pr_profile_issue_t *issues, int max);

/* "p90 5.0x the median; slower than 1 thread (2.90 ms) by 41%": the reasons
 * of an issue as text, into buf (always terminated). */
void pr_profile_issue_text(const pr_profile_issue_t *issue, double tolerance, char *buf,
                           size_t len);

/* The batch grid for max_batch (plus extras), ascending, deduplicated;
 * returns the count written into out (at most max). */
int pr_profile_grid(int max_batch, const int *extra, int n_extra, int *out, int max);

/* Measures every point (see "Measurement quality"), re-measures suspicious
 * ones, then the co-running slowdown; base supplies dims other than the
 * batch. The model name in the profile is taken from model_name. On success
 * out->n_suspicious says whether out may be cached (0) or only used (> 0,
 * already warned about in the log). Fails (PR_ERR_*, message in err) only
 * when a point cannot be measured; out is then empty. */
pr_status_t pr_profile_measure(pr_model_t *model, const char *model_name,
                               const pr_session_options_t *base, const pr_profile_options_t *opt,
                               pr_profile_t *out, char *err, size_t err_len);

/* JSON: {"model", "model_sha256", "cpu", "cores", "version", "tolerance",
 * "suspicious", "points": [{"threads", "batch", "latency_ms", "p90_ms",
 * "isolated_ms", "runs", "spread", "remeasured"}]}. Save writes a temporary
 * file next to path and renames it over path (PR_ERR_IO when it cannot;
 * PR_ERR_INVALID for an empty path): path is either the old file or the
 * whole new one, and nothing else is left behind. Load recomputes
 * n_suspicious with pr_profile_assess (the quality fields are optional: a
 * profile without them is judged on its p90s and its thread scaling). */
pr_status_t pr_profile_save(const pr_profile_t *p, const char *path, char *err, size_t err_len);
pr_status_t pr_profile_load(const char *path, pr_profile_t *p, char *err, size_t err_len);

/* Path of the cache file for (model hash, CPU, this machine's kernel ISA
 * (pr_engine_isa), cores, values of the named symbolic dims in base (may be
 * NULL), version): under $PACKRAT_CACHE, else
 * $XDG_CACHE_HOME/packrat, else ~/.cache/packrat. Creates the folder. On any
 * failure (the folder cannot be made or is not a folder, sha256 is not hex,
 * path would not fit in len) returns PR_ERR_IO or PR_ERR_INVALID and leaves
 * path empty (path[0] = 0 when len > 0): a failed call never yields a path. */
pr_status_t pr_profile_cache_path(const char *sha256, const char *cpu, int cores,
                                  const pr_session_options_t *base, char *path, size_t len);

/* Stores p in the cache (pr_profile_cache_path of p's model hash, CPU and
 * cores and base's dims) when p is good (n_suspicious == 0), atomically
 * (pr_profile_save). Meant to be called and not checked: a suspicious
 * profile is skipped (logged at info, PR_ERR_INVALID), every cache failure is
 * logged as a warning and returned, and nothing but the cache file is ever
 * written. path (may be NULL) receives the file written, "" when none. */
pr_status_t pr_profile_cache_save(const pr_profile_t *p, const pr_session_options_t *base,
                                  char *path, size_t len);

/* True when p was made for this model, CPU, kernel ISA (pr_engine_isa: a
 * profile measured with oneDNN capped to another ISA is not reused), core
 * count and version, covers
 * threads 1..cores and every batch in the grid for max_batch, and is good
 * (n_suspicious == 0: a suspicious profile is measured again). */
int pr_profile_matches(const pr_profile_t *p, const char *sha256, const char *cpu, int cores,
                       int max_batch);

/* Coverage (pure): the batch sizes of need[] at which p (may be NULL: none
 * covered) lacks a point for some thread count 1..cores, each once, in
 * need's order. Writes the first max into missing (may be NULL with max 0)
 * and returns how many there are (0: p covers need). */
int pr_profile_missing(const pr_profile_t *p, int cores, const int *need, int n_need, int *missing,
                       int max);

/* Union (pure): out = base's points (base may be NULL) plus add's, a point
 * of add replacing base's at the same (threads, batch); model, hash, CPU and
 * tolerance from add, cores the larger; n_suspicious recomputed
 * (pr_profile_assess). out is new (free with pr_profile_free); PR_ERR_NOMEM. */
pr_status_t pr_profile_merge(const pr_profile_t *base, const pr_profile_t *add, pr_profile_t *out);

/* Co-running slowdown (pure): scales each point of p (measured alone:
 * latency_ms == isolated_ms) by the slowdown ref measured at the same thread
 * count (ref's latency_ms over isolated_ms; 1 when ref has none). */
void pr_profile_apply_corun(const pr_profile_t *ref, pr_profile_t *p);

/* What pr_profile_get needs: the cores (threads 1..cores on cpus in order),
 * the grid (max_batch, plus extra batches that must be covered at every
 * thread count), whether the cache is read and written, and how to report. */
typedef struct {
  const char *model_name; /* in the profile and the messages */
  int cores;
  int max_batch;
  const int *extra;
  int n_extra;
  /* when n_batches > 0: exactly these batch sizes are needed (ascending, at
   * most 64), instead of max_batch's grid and the extras (a coarser grid:
   * the server's extra shape buckets) */
  const int *batches;
  int n_batches;
  const int *cpus;
  int n_cpus;
  bool read_cache;    /* use a cached profile when one fits */
  bool write_cache;   /* store a measured profile when it is good */
  double max_point_s; /* time budget of one point, as pr_profile_options_t's (0: 3 s) */
  /* progress of the measurement (may be NULL), as pr_profile_options_t's */
  void (*progress)(void *ctx, int done, int total, const pr_profile_point_t *point);
  /* told where the profile comes from (may be NULL: logged at info): the
   * cache (path) or a measurement about to start (path NULL) */
  void (*announce)(void *ctx, const char *path);
  void *ctx;
} pr_profile_source_t;

/* "Profile from cache or measure": the cached profile of model (for base's
 * dims) when it matches (pr_profile_matches, every extra batch present),
 * else measured (src's max_point_s, 0: 3 s) and cached when good and write_cache.
 * cache_path (may be NULL) receives the cache file the profile came from or
 * went to, "" when none (no cache folder, a suspicious profile, a cache that
 * cannot be written: warnings in the log, never failures). Fails only when
 * the profile cannot be measured (PR_ERR_*, message in err). */
pr_status_t pr_profile_get(pr_model_t *model, const pr_session_options_t *base,
                           const pr_profile_source_t *src, pr_profile_t *out, char *cache_path,
                           size_t cache_len, char *err, size_t err_len);

#pragma GCC visibility pop

#endif
