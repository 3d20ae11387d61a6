#include "sched/metrics.h"

#include <math.h>

const double pr__latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                     0.5,   1,      2.5,   5,    10,    30,   60};
const int pr__latency_n_bounds = 15;
/* fine around 0.1 ms, the server's own time per request outside compute */
const double pr__stage_bounds[] = {0.00001, 0.000025, 0.00005, 0.000075, 0.0001, 0.00015,
                                   0.0002,  0.00025,  0.0005,  0.001,    0.0025, 0.005,
                                   0.01,    0.025,    0.1,     1};
const int pr__stage_n_bounds = 16;
const double pr__batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
const int pr__batch_n_bounds = 11;

void pr__hist_init(pr_hist_t *h, const double *bounds, int n_bounds) {
  h->bounds = bounds;
  h->n_bounds = n_bounds > PR_HIST_BUCKETS ? PR_HIST_BUCKETS : n_bounds;
  for (int i = 0; i <= PR_HIST_BUCKETS; i++) atomic_init(&h->counts[i], 0);
  atomic_init(&h->count, 0);
  atomic_init(&h->sum_us, 0);
}

void pr__hist_observe(pr_hist_t *h, double v) {
  int i = 0;
  while (i < h->n_bounds && v > h->bounds[i]) i++;
  atomic_fetch_add(&h->counts[i], 1);
  atomic_fetch_add(&h->count, 1);
  atomic_fetch_add(&h->sum_us, (uint64_t)llround(v * 1e6));
}

void pr__hist_write(const pr_hist_t *h, FILE *f, const char *name, const char *labels) {
  uint64_t cum = 0;
  const char *sep = labels && *labels ? "," : "";
  for (int i = 0; i < h->n_bounds; i++) {
    cum += atomic_load(&h->counts[i]);
    fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, h->bounds[i],
            (unsigned long long)cum);
  }
  cum += atomic_load(&h->counts[h->n_bounds]);
  fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
  fprintf(f, "%s_sum{%s} %.6f\n", name, labels, (double)atomic_load(&h->sum_us) / 1e6);
  fprintf(f, "%s_count{%s} %llu\n", name, labels, (unsigned long long)atomic_load(&h->count));
}
