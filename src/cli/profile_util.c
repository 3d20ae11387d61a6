#include "cli/profile_util.h"

#include <stdio.h>
#include <unistd.h>

#include "base/topology.h"

typedef struct {
  bool tty, quiet;
  const char *model_path;
  int cores, max_batch;
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

static void announce(void *ctx, const char *path) {
  progress_t *pg = ctx;
  if (pg->quiet) return;
  if (path)
    fprintf(stderr, "packrat: using cached profile %s\n", path);
  else
    fprintf(stderr, "packrat: profiling %s on %d cores, batches up to %d\n", pg->model_path,
            pg->cores, pg->max_batch);
}

int pr_cli_get_profile(pr_model_t *model, const char *model_path, const pr_cli_profile_opts_t *o,
                       pr_profile_t *out, char *cache_path, size_t cache_len) {
  int cpus[4096];
  int n_cpus = pr_topology_cpu_order(cpus, 4096);
  int cores = o->cores > 0 ? o->cores : pr_topology_num_cores();
  pr_session_options_t base = pr_session_options_default();
  if (o->dims) pr_cli_dims_apply(o->dims, &base);
  progress_t pg = {.tty = isatty(2),
                   .quiet = o->quiet,
                   .model_path = model_path,
                   .cores = cores,
                   .max_batch = o->max_batch};
  pr_profile_source_t src = {.model_name = model_path,
                             .cores = cores,
                             .max_batch = o->max_batch,
                             .extra = o->extra,
                             .n_extra = o->n_extra,
                             .cpus = cpus,
                             .n_cpus = n_cpus,
                             .read_cache = o->read_cache,
                             .write_cache = o->write_cache,
                             .progress = progress,
                             .announce = announce,
                             .ctx = &pg};
  char err[1024];
  pr_status_t st = pr_profile_get(model, &base, &src, out, cache_path, cache_len, err, sizeof err);
  if (st == PR_ERR_INVALID && cores > n_cpus) {
    fprintf(stderr, "packrat: %s\n", err);
    return -1;
  }
  if (st) {
    fprintf(stderr, "packrat: profiling failed: %s\n", err);
    return -1;
  }
  return 0;
}
