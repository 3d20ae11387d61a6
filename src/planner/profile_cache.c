/* Profile from cache or measure (pr_profile_get): the one path the server
 * and the command line take to a model's profile. */
#include <stdio.h>
#include <unistd.h>

#include "base/log.h"
#include "base/topology.h"
#include "packrat/profiler.h"

/* The cached profile at path when it fits src (and is good); false else. */
static bool load_cached(const char *path, const char *sha, const pr_profile_source_t *src,
                        pr_profile_t *out) {
  char err[512];
  if (!path[0] || access(path, R_OK) != 0 || pr_profile_load(path, out, err, sizeof err))
    return false;
  /* a suspicious profile does not match: it is measured again */
  bool ok = pr_profile_matches(out, sha, pr_topology_cpu_name(), src->cores, src->max_batch);
  for (int i = 0; ok && i < src->n_extra; i++)
    for (int t = 1; ok && t <= src->cores; t++) ok = pr_profile_latency(out, t, src->extra[i]) >= 0;
  if (!ok) pr_profile_free(out);
  return ok;
}

static void announce(const pr_profile_source_t *src, const char *path) {
  if (src->announce)
    src->announce(src->ctx, path);
  else if (path)
    pr_log(PR_LOG_INFO, "model %s: cached profile %s", src->model_name, path);
  else
    pr_log(PR_LOG_INFO, "model %s: profiling on %d cores up to batch %d", src->model_name,
           src->cores, src->max_batch);
}

pr_status_t pr_profile_get(pr_model_t *model, const pr_session_options_t *base,
                           const pr_profile_source_t *src, pr_profile_t *out, char *cache_path,
                           size_t cache_len, char *err, size_t err_len) {
  char dummy[1];
  if (!cache_path || !cache_len) cache_path = dummy, cache_len = sizeof dummy;
  cache_path[0] = 0;
  if (src->cores < 1 || src->cores > src->n_cpus) {
    pr_errf(err, err_len, "%d cores requested, %d available", src->cores, src->n_cpus);
    return PR_ERR_INVALID;
  }
  const char *sha = pr_engine_model_sha256(model);
  /* a cache path that cannot be made is "" (never a stale buffer) */
  char cached[4096] = "";
  if (src->read_cache && pr_profile_cache_path(sha, pr_topology_cpu_name(), src->cores, base,
                                               cached, sizeof cached) != PR_OK)
    pr_log(PR_LOG_WARN, "model %s: no profile cache directory; profiles are not kept",
           src->model_name);
  if (src->read_cache && load_cached(cached, sha, src, out)) {
    announce(src, cached);
    snprintf(cache_path, cache_len, "%s", cached);
    return PR_OK;
  }
  announce(src, NULL);
  pr_profile_options_t po = {.max_threads = src->cores,
                             .max_batch = src->max_batch,
                             .extra_batches = src->extra,
                             .n_extra = src->n_extra,
                             .cpus = src->cpus,
                             .n_cpus = src->n_cpus,
                             .max_point_s = 3.0,
                             .progress = src->progress,
                             .ctx = src->ctx};
  pr_status_t st = pr_profile_measure(model, src->model_name, base, &po, out, err, err_len);
  if (st) return st;
  /* cached only when sound (no suspicious point); a suspicious profile or a
   * cache that cannot be written is a warning (logged), never a failure */
  if (src->write_cache) pr_profile_cache_save(out, base, cache_path, cache_len);
  return PR_OK;
}
