#include "cli/profile_util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/topology.h"

typedef struct {
  bool tty, quiet;
} progress_t;

static void progress(void *ctx, int done, int total, const pr_profile_point_t *p) {
  progress_t *pg = ctx;
  if (pg->quiet) return;
  if (pg->tty) {
    int width = 30, fill = done * width / total;
    fprintf(stderr, "\r[%.*s%*s] %3d/%d  threads %2d batch %4d: %9.2f ms", fill,
            "##############################", width - fill, "", done, total, p->threads, p->batch,
            p->latency_ms);
    if (done == total) fprintf(stderr, "\n");
  } else {
    fprintf(stderr, "profile %d/%d: threads %d batch %d: %.2f ms (p90 %.2f)\n", done, total,
            p->threads, p->batch, p->latency_ms, p->p90_ms);
  }
}

int pr_cli_get_profile(pr_model_t *model, const char *model_path, const pr_cli_profile_opts_t *o,
                       pr_profile_t *out, char *cache_path, size_t cache_len) {
  int cpus[4096];
  int n_cpus = pr_topology_cpu_order(cpus, 4096);
  int cores = o->cores > 0 ? o->cores : pr_topology_num_cores();
  char err[1024];
  if (cache_len) cache_path[0] = 0;
  if (cores > n_cpus) {
    fprintf(stderr, "packrat: %d cores requested, %d available\n", cores, n_cpus);
    return -1;
  }
  const char *sha = pr_engine_model_sha256(model);
  pr_session_options_t base = pr_session_options_default();
  if (o->dims) pr_cli_dims_apply(o->dims, &base);
  /* a cache path that cannot be made is "" (never a stale buffer) */
  char cached[4096] = "";
  if (o->read_cache)
    pr_profile_cache_path(sha, pr_topology_cpu_name(), cores, &base, cached, sizeof cached);
  if (cached[0] && access(cached, R_OK) == 0) {
    if (pr_profile_load(cached, out, err, sizeof err) == PR_OK) {
      /* a suspicious profile does not match: it is measured again */
      bool ok = pr_profile_matches(out, sha, pr_topology_cpu_name(), cores, o->max_batch);
      for (int i = 0; ok && i < o->n_extra; i++)
        for (int t = 1; ok && t <= cores; t++) ok = pr_profile_latency(out, t, o->extra[i]) >= 0;
      if (ok) {
        if (!o->quiet) fprintf(stderr, "packrat: using cached profile %s\n", cached);
        snprintf(cache_path, cache_len, "%s", cached);
        return 0;
      }
      pr_profile_free(out);
    }
  }
  progress_t pg = {.tty = isatty(2), .quiet = o->quiet};
  pr_profile_options_t po = {.max_threads = cores,
                             .max_batch = o->max_batch,
                             .extra_batches = o->extra,
                             .n_extra = o->n_extra,
                             .cpus = cpus,
                             .n_cpus = n_cpus,
                             .max_point_s = 3.0,
                             .progress = progress,
                             .ctx = &pg};
  if (!o->quiet)
    fprintf(stderr, "packrat: profiling %s on %d cores, batches up to %d\n", model_path, cores,
            o->max_batch);
  if (pr_profile_measure(model, model_path, &base, &po, out, err, sizeof err)) {
    fprintf(stderr, "packrat: profiling failed: %s\n", err);
    return -1;
  }
  /* a suspicious profile or a cache that cannot be written is a warning
   * (logged), never a failure of the profile */
  if (o->write_cache) pr_profile_cache_save(out, &base, cache_path, cache_len);
  return 0;
}
