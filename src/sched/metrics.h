/* Counters and histograms for Prometheus, lock-free (C11 atomics): any thread
 * may observe, the /metrics handler reads. */
#ifndef PR_SCHED_METRICS_H
#define PR_SCHED_METRICS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define PR_HIST_BUCKETS 16

typedef struct {
  const double *bounds; /* PR_HIST_BUCKETS upper bounds, ascending (last may be +Inf) */
  int n_bounds;
  _Atomic uint64_t counts[PR_HIST_BUCKETS + 1];
  _Atomic uint64_t count;
  _Atomic uint64_t sum_us; /* sum of observed values in micro-units */
} pr_hist_t;

void pr__hist_init(pr_hist_t *h, const double *bounds, int n_bounds);
void pr__hist_observe(pr_hist_t *h, double value);
/* Writes the histogram's _bucket/_sum/_count lines with the given labels. */
void pr__hist_write(const pr_hist_t *h, FILE *f, const char *name, const char *labels);

/* Bucket bounds in seconds for request latencies, for the stages of a
 * request (10 us up), and for batch sizes. */
extern const double pr__latency_bounds[];
extern const int pr__latency_n_bounds;
extern const double pr__stage_bounds[];
extern const int pr__stage_n_bounds;
extern const double pr__batch_bounds[];
extern const int pr__batch_n_bounds;

#endif
