/* Shape buckets of a dynamic dim: the representative sizes a model is
 * profiled and planned at, which bucket a request's size falls in, and the
 * controller that picks the bucket the live plan is made for from the sizes
 * requests arrive with. Pure: sizes and counts in, buckets out.
 *
 * Buckets. A bucket is named by its representative size, its upper end: a
 * size v falls in the bucket of the smallest representative >= v (the
 * largest bucket when v is above every one). Planning at the upper end
 * keeps docs/planning.md's rule for one plan (plan at the max: a batch that meets
 * its latency at the longest size meets it at every shorter one) within
 * each bucket.
 * - A range min..max: n = floor(log2(max / min)) buckets, 1 to the cap,
 *   whose edges split min..max geometrically (ratio r = (max/min)^(1/n) >=
 *   2): representatives ceil(min * r^k), k = 1..n, the last the max itself.
 *   Equal ratios bound how much any request's planned size overstates it
 *   (by r at most); a ratio of at least 2 keeps narrow ranges from buckets
 *   whose plans barely differ.
 * - A list: the same split over the list's extremes, each representative
 *   moved up to the smallest listed size that holds it (a request only has
 *   listed sizes, and the representative then runs on the fast path); a
 *   list of at most `cap` sizes is its own buckets.
 * - profile_at (the config's representative; the max by default) is always
 *   one: when it makes one too many, the representative nearest to it (in
 *   ratio; never the max) gives way. With a cap of 1, profile_at alone: one
 *   plan, as without buckets.
 *
 * The controller, once a window (the autoscaler's): the bucket to plan for
 * is the smallest whose representative holds PR_BUCKET_QUANTILE (90%) of
 * the window's arrivals, so the plan fits nearly all requests and the few
 * longer ones run on the same instances (slower than planned; the backlog
 * rule raises the batch when they pile up). Up at once (requests longer
 * than the plan's size break its latency), down only after
 * PR_BUCKET_DOWN_WINDOWS windows in a row want a smaller bucket, to the
 * largest of their choices (no flapping on a short lull of long requests).
 * A window with no arrivals changes nothing. */
#ifndef PACKRAT_BUCKETS_H
#define PACKRAT_BUCKETS_H

#include <stdint.h>

#pragma GCC visibility push(default) /* the public API: exported */

#define PR_BUCKETS_MAX 4
#define PR_BUCKET_QUANTILE 0.9
#define PR_BUCKET_DOWN_WINDOWS 3

/* A dynamic dim as the config gives it: a range (n_list 0) or a list
 * (ascending, distinct, n_list >= 1; min and max its extremes). */
typedef struct {
  long long min, max, profile_at;
  const long long *list;
  int n_list;
} pr_bucket_dim_t;

/* The buckets' representative sizes of d (at most cap, which is clamped to
 * 1..PR_BUCKETS_MAX), ascending, into out (PR_BUCKETS_MAX entries); returns
 * how many (>= 1). A profile_at outside min..max counts as the max. */
int pr_buckets_choose(const pr_bucket_dim_t *d, int cap, long long *out);

/* The bucket of size v among n ascending representatives: the first one >=
 * v, else the last (n >= 1). */
int pr_bucket_of(const long long *sizes, int n, long long v);

typedef struct {
  int n;            /* buckets */
  double quantile;  /* of the window's arrivals the chosen bucket holds */
  int down_windows; /* windows in a row that want a smaller bucket */
  /* state */
  int current;
  int pending, pending_count; /* the largest smaller bucket wanted, in how many windows */
} pr_bucket_ctl_t;

/* Defaults PR_BUCKET_QUANTILE and PR_BUCKET_DOWN_WINDOWS; current: the
 * bucket live at the start (clamped to 0..n-1). */
void pr_bucket_ctl_init(pr_bucket_ctl_t *c, int n, int current);

/* The bucket a window's arrivals want: the smallest whose cumulative count
 * reaches the quantile of their total (-1: no arrivals). counts: n
 * entries. */
int pr_bucket_wanted(const pr_bucket_ctl_t *c, const uint64_t *counts);

/* Feeds one window's arrivals per bucket (n entries); returns the bucket to
 * plan for (c->current). */
int pr_bucket_ctl_update(pr_bucket_ctl_t *c, const uint64_t *counts);

#pragma GCC visibility pop

#endif
