/* Profile from cache or measure (pr_profile_get): the one path the server
 * and the command line take to a model's profile.
 *
 * Notes on the design:
 * - A cached profile that covers what the caller needs (threads 1..cores,
 *   every batch of its grid and extras) is reused as it is. One that covers
 *   part of it is completed: only the batch columns it lacks are measured
 *   (alone, then scaled by the co-running slowdown the cached profile
 *   measured) and merged into it (profile_merge.c).
 * - A cached profile is never replaced by one that covers less: whatever is
 *   measured (a completion, or a full measurement when the caller does not
 *   read the cache, e.g. `--reprofile`) is merged into the cached profile
 *   before it is saved, new points replacing old ones at the same
 *   (threads, batch). A cached profile that does not load or is judged
 *   suspicious is no base: it is replaced. The cached profile is read again
 *   just before the save, under an exclusive flock on the cache folder, so
 *   that two processes profiling one model at once keep each other's points
 *   (the lock is on the folder: no lock file is left behind).
 * - Progress: without a caller's callback, the measurement logs points
 *   done/total, the time spent and an estimate of the time left, at most
 *   every PROGRESS_EVERY_S seconds or every tenth of the points (and at the
 *   end). The estimate is linear in points: each point's runs are bounded
 *   by the same time budget, so points cost roughly alike. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "packrat/profiler.h"

#define PROGRESS_EVERY_S 10.0
/* the longest wait for another process's lock on the cache folder: past
 * it the profile is used but not cached (a warning says who to look for) */
#define CACHE_LOCK_WAIT_S 10.0

typedef struct {
  const char *model_name;
  double start_s, last_s;
  int last_tenth;
} progress_log_t;

static void log_progress(void *ctx, int done, int total, const pr_profile_point_t *p) {
  progress_log_t *pl = ctx;
  double now = pr__now(), spent = now - pl->start_s;
  int tenth = total > 0 ? done * 10 / total : 10;
  if (done < total && tenth == pl->last_tenth && now - pl->last_s < PROGRESS_EVERY_S) return;
  pl->last_tenth = tenth;
  pl->last_s = now;
  double left = done > 0 ? spent / done * (total - done) : 0;
  pr__log(PR_LOG_INFO,
          "model %s: profiled %d/%d points (%d%%), %.1f s elapsed, about %.0f s left "
          "(last: threads %d batch %d: %.3f ms)",
          pl->model_name, done, total, total > 0 ? 100 * done / total : 100, spent, left,
          p->threads, p->batch, p->latency_ms);
}

/* The cached profile at path when it is this model's on this machine and
 * cores and good (coverage not checked); false else. */
static bool load_cached(const char *path, const char *sha, int cores, pr_profile_t *out) {
  char err[512];
  if (!path[0] || access(path, R_OK) != 0 || pr_profile_load(path, out, err, sizeof err))
    return false;
  /* grid of 1: any batch coverage; a suspicious profile does not match */
  bool ok = pr_profile_matches(out, sha, pr__topology_cpu_name(), cores, 0);
  if (!ok) pr_profile_free(out);
  return ok;
}

static void announce(const pr_profile_source_t *src, const char *path) {
  if (src->announce) src->announce(src->ctx, path);
}

/* "1,2,16" into buf */
static void batch_text(const int *b, int n, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = 0;
  for (int i = 0; i < n && off < len; i++)
    off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "", b[i]);
}

/* Measures the batches (all of src's grid when n_batches is 0) on threads
 * 1..cores, and the co-running slowdown when asked; with progress logged
 * unless src has a callback. */
static pr_status_t measure(pr_model_t *model, const pr_session_options_t *base,
                           const pr_profile_source_t *src, const int *batches, int n_batches,
                           bool corun, pr_profile_t *out, char *err, size_t err_len) {
  progress_log_t pl = {.model_name = src->model_name, .start_s = pr__now(), .last_tenth = 0};
  pl.last_s = pl.start_s;
  pr_profile_options_t po = {.max_threads = src->cores,
                             .max_batch = src->max_batch,
                             .extra_batches = src->extra,
                             .n_extra = src->n_extra,
                             .batches = batches,
                             .n_batches = n_batches,
                             .cpus = src->cpus,
                             .n_cpus = src->n_cpus,
                             .max_point_s = src->max_point_s > 0 ? src->max_point_s : 3.0,
                             .no_corun = !corun,
                             .progress = src->progress ? src->progress : log_progress,
                             .ctx = src->progress ? src->ctx : &pl};
  return pr_profile_measure(model, src->model_name, base, &po, out, err, err_len);
}

/* Completes cached (which lacks the batches missing) into out. */
static pr_status_t complete(pr_model_t *model, const pr_session_options_t *base,
                            const pr_profile_source_t *src, const pr_profile_t *cached,
                            const char *path, const int *missing, int n_missing, pr_profile_t *out,
                            char *err, size_t err_len) {
  char list[512];
  batch_text(missing, n_missing, list, sizeof list);
  pr__log(PR_LOG_INFO,
          "model %s: the cached profile %s lacks batch%s %s on threads 1..%d: measuring only "
          "those (%d points)",
          src->model_name, path, n_missing > 1 ? "es" : "", list, src->cores,
          n_missing * src->cores);
  pr_profile_t part;
  /* a completion takes the cached profile's slowdown */
  pr_status_t st = measure(model, base, src, missing, n_missing, false, &part, err, err_len);
  if (st) return st;
  pr_profile_apply_corun(cached, &part);
  st = pr_profile_merge(cached, &part, out);
  pr_profile_free(&part);
  return st;
}

/* Saves p to the cache, merged into what the cache holds now (read again
 * under a lock on the cache folder, so that a server and a command that
 * profile the same model at once cannot drop each other's points);
 * cache_path gets the file, "" when none. */
static void save(const pr_profile_source_t *src, const pr_session_options_t *base,
                 const pr_profile_t *p, const char *path, char *cache_path, size_t cache_len) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  int lock = path[0] && slash ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  /* a lock that another process holds for good (a stuck `packrat profile`,
   * a backup tool) must not hold up a load: polled, then given up */
  double until = pr__now() + CACHE_LOCK_WAIT_S;
  while (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) != 0) {
    if (pr__now() >= until) {
      pr__log(PR_LOG_WARN,
              "model %s: the profile cache folder %s is locked by another process (flock) "
              "for %.0f s; this profile is used but not cached",
              src->model_name, dir, CACHE_LOCK_WAIT_S);
      close(lock);
      return;
    }
    usleep(20000);
  }
  pr_profile_t now, merged;
  const pr_profile_t *keep = p;
  if (load_cached(path, p->model_sha256, src->cores, &now)) {
    if (pr_profile_merge(&now, p, &merged) == PR_OK) keep = &merged;
    pr_profile_free(&now);
  }
  char saved[4096];
  if (pr_profile_cache_save(keep, base, saved, sizeof saved) == PR_OK) {
    pr__log(PR_LOG_INFO, "model %s: profile cached in %s (%d points%s)", src->model_name, saved,
            keep->n_points, keep == p ? "" : ", merged with the points already cached");
    snprintf(cache_path, cache_len, "%s", saved);
  }
  if (keep != p) pr_profile_free(&merged);
  if (lock >= 0) close(lock); /* releases the lock */
}

pr_status_t pr_profile_get(pr_model_t *model, const pr_session_options_t *base,
                           const pr_profile_source_t *src, pr_profile_t *out, char *cache_path,
                           size_t cache_len, char *err, size_t err_len) {
  char dummy[1];
  if (!cache_path || !cache_len) cache_path = dummy, cache_len = sizeof dummy;
  cache_path[0] = 0;
  if (src->cores < 1 || src->cores > src->n_cpus) {
    pr__errf(err, err_len, "%d cores requested, %d available", src->cores, src->n_cpus);
    return PR_ERR_INVALID;
  }
  const char *sha = pr_engine_model_sha256(model);
  /* a cache path that cannot be made is "" (never a stale buffer) */
  char path[4096] = "";
  if ((src->read_cache || src->write_cache) &&
      pr_profile_cache_path(sha, pr__topology_cpu_name(), src->cores, base, path, sizeof path))
    pr__log(PR_LOG_WARN, "model %s: no profile cache directory; profiles are not kept",
            src->model_name);
  pr_profile_t cached;
  bool have = load_cached(path, sha, src->cores, &cached);
  int need[64], missing[64];
  int n_need =
      src->n_batches > 0 ? 0 : pr_profile_grid(src->max_batch, src->extra, src->n_extra, need, 64);
  for (int i = 0; i < src->n_batches && i < 64; i++) need[n_need++] = src->batches[i];
  int n_missing = have ? pr_profile_missing(&cached, src->cores, need, n_need, missing, 64) : 0;
  pr_status_t st;
  if (have && src->read_cache && n_missing == 0) {
    pr__log(PR_LOG_INFO, "model %s: reusing the cached profile %s (%d points, threads 1..%d)",
            src->model_name, path, cached.n_points, src->cores);
    announce(src, path);
    snprintf(cache_path, cache_len, "%s", path);
    *out = cached;
    return PR_OK;
  }
  announce(src, NULL);
  if (have && src->read_cache) {
    st = complete(model, base, src, &cached, path, missing, n_missing, out, err, err_len);
  } else {
    pr__log(PR_LOG_INFO, "model %s: profiling on %d cores, batches up to %d (%d points)%s",
            src->model_name, src->cores, need[n_need - 1], n_need * src->cores,
            have ? "; the cached points not measured again are kept" : "");
    st = measure(model, base, src, src->n_batches > 0 ? need : NULL,
                 src->n_batches > 0 ? n_need : 0, true, out, err, err_len);
  }
  /* cached only when sound (no suspicious point); a suspicious profile or a
   * cache that cannot be written is a warning (logged), never a failure */
  if (!st && src->write_cache) save(src, base, out, path, cache_path, cache_len);
  if (have) pr_profile_free(&cached);
  return st;
}
