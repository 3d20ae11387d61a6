/* Shape buckets and the controller that picks one (packrat/buckets.h has
 * the rules and why). Pure: no threads, no I/O. */
#include "packrat/buckets.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>

/* The smallest listed size >= v (v <= the list's max). */
static long long snap_up(const pr_bucket_dim_t *d, long long v) {
  for (int i = 0; i < d->n_list; i++)
    if (d->list[i] >= v) return d->list[i];
  return d->list[d->n_list - 1];
}

/* Inserts v into the ascending reps[0..n) unless there; the new n. */
static int insert_sorted(long long *reps, int n, long long v) {
  int i = 0;
  while (i < n && reps[i] < v) i++;
  if (i < n && reps[i] == v) return n;
  for (int j = n; j > i; j--) reps[j] = reps[j - 1];
  reps[i] = v;
  return n + 1;
}

/* Removes the representative nearest to `at` in ratio, neither `at` nor
 * `keep` (the max); the new n. */
static int drop_nearest(long long *reps, int n, long long at, long long keep) {
  int worst = -1;
  double best = 0;
  for (int i = 0; i < n; i++) {
    if (reps[i] == at || reps[i] == keep) continue;
    double dist = fabs(log((double)reps[i] / (double)at));
    if (worst < 0 || dist < best) worst = i, best = dist;
  }
  assert(worst >= 0);
  for (int i = worst; i + 1 < n; i++) reps[i] = reps[i + 1];
  return n - 1;
}

int pr_buckets_choose(const pr_bucket_dim_t *d, int cap, long long *out) {
  cap = cap < 1 ? 1 : cap > PR_BUCKETS_MAX ? PR_BUCKETS_MAX : cap;
  long long lo = d->min < 1 ? 1 : d->min, hi = d->max < lo ? lo : d->max;
  long long at = d->profile_at >= lo && d->profile_at <= hi ? d->profile_at : hi;
  if (d->n_list > 0 && d->n_list <= cap) {
    for (int i = 0; i < d->n_list; i++) out[i] = d->list[i];
    return d->n_list;
  }
  if (cap == 1) {
    out[0] = at;
    return 1;
  }
  double ratio = (double)hi / (double)lo;
  int k = (int)floor(log2(ratio) + 1e-9);
  k = k < 1 ? 1 : k > cap ? cap : k;
  double r = pow(ratio, 1.0 / k);
  long long reps[PR_BUCKETS_MAX + 1];
  int n = 0;
  for (int i = 1; i <= k; i++) {
    long long v = i == k ? hi : (long long)ceil((double)lo * pow(r, i) - 1e-9);
    if (d->n_list > 0) v = snap_up(d, v);
    if (n == 0 || v > reps[n - 1]) reps[n++] = v;
  }
  n = insert_sorted(reps, n, at);
  if (n > cap) n = drop_nearest(reps, n, at, hi);
  for (int i = 0; i < n; i++) out[i] = reps[i];
  return n;
}

int pr_bucket_of(const long long *sizes, int n, long long v) {
  assert(n >= 1);
  for (int k = 0; k < n; k++)
    if (sizes[k] >= v) return k;
  return n - 1;
}

void pr_bucket_ctl_init(pr_bucket_ctl_t *c, int n, int current) {
  c->n = n < 1 ? 1 : n > PR_BUCKETS_MAX ? PR_BUCKETS_MAX : n;
  c->quantile = PR_BUCKET_QUANTILE;
  c->down_windows = PR_BUCKET_DOWN_WINDOWS;
  c->current = current < 0 ? 0 : current >= c->n ? c->n - 1 : current;
  c->pending = c->pending_count = 0;
}

int pr_bucket_wanted(const pr_bucket_ctl_t *c, const uint64_t *counts) {
  uint64_t total = 0, sum = 0;
  for (int k = 0; k < c->n; k++) total += counts[k];
  if (total == 0) return -1;
  for (int k = 0; k < c->n; k++) {
    sum += counts[k];
    if ((double)sum >= c->quantile * (double)total) return k;
  }
  return c->n - 1; /* rounding: the sum is the total at the last bucket */
}

int pr_bucket_ctl_update(pr_bucket_ctl_t *c, const uint64_t *counts) {
  int want = pr_bucket_wanted(c, counts);
  if (want < 0) return c->current; /* nothing arrived: nothing to go by */
  if (want >= c->current) {
    c->current = want;
    c->pending_count = 0;
    return c->current;
  }
  c->pending = c->pending_count == 0 || want > c->pending ? want : c->pending;
  if (++c->pending_count >= c->down_windows) {
    c->current = c->pending;
    c->pending_count = 0;
  }
  return c->current;
}
