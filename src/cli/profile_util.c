/* Shared by packrat profile / plan / run (profile_util.h): the planner
 * logs where the profile comes from and the progress of a measurement. */
#include "cli/profile_util.h"

#include <stdio.h>

#include "base/topology.h"

int pr__cli_get_profile(pr_model_t *model, const char *model_path, const pr_cli_profile_opts_t *o,
                        pr_profile_t *out, char *cache_path, size_t cache_len) {
  int cpus[4096];
  int n_cpus = pr__topology_cpu_order(cpus, 4096);
  int cores = o->cores > 0 ? o->cores : pr__topology_num_cores();
  pr_session_options_t base = pr_session_options_default();
  if (o->dims) pr__cli_dims_apply(o->dims, &base);
  base.precision = o->precision;
  pr_profile_source_t src = {.model_name = model_path,
                             .cores = cores,
                             .max_batch = o->max_batch,
                             .extra = o->extra,
                             .n_extra = o->n_extra,
                             .cpus = cpus,
                             .n_cpus = n_cpus,
                             .batches = o->batches,
                             .n_batches = o->n_batches,
                             .read_cache = o->read_cache,
                             .write_cache = o->write_cache,
                             .max_point_s = o->point_s};
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
