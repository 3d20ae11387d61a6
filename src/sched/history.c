/* Per-second samples and reconfigurations of one model. See history.h for
 * the design and the locking (one leaf mutex). */
#include "sched/history.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"

#define BUCKET_BASE_US 10.0
#define BUCKETS_PER_DOUBLING 4

static int64_t second_of(double now) {
  return now > 0 ? (int64_t)floor(now) : 0;
}

pr_history_t *pr__history_create(double now) {
  pr_history_t *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->first_second = second_of(now);
  pr__lock_init(&h->lock);
  for (int i = 0; i < PR_HISTORY_SECONDS; i++) h->seconds[i].second = -1;
  return h;
}

void pr__history_destroy(pr_history_t *h) {
  if (!h) return;
  pr__lock_destroy(&h->lock);
  free(h);
}

int pr__history_bucket(double latency_s) {
  double us = latency_s * 1e6;
  if (!(us > BUCKET_BASE_US)) return 0; /* NaN and negatives too */
  double b = floor(BUCKETS_PER_DOUBLING * log2(us / BUCKET_BASE_US));
  return b >= PR_HISTORY_BUCKETS - 1 ? PR_HISTORY_BUCKETS - 1 : (int)b;
}

double pr__history_bucket_ms(int bucket) {
  assert(bucket >= 0 && bucket < PR_HISTORY_BUCKETS);
  return BUCKET_BASE_US * 1e-3 * exp2((bucket + 0.5) / BUCKETS_PER_DOUBLING);
}

static int slot_index(int64_t second) {
  return (int)(second % PR_HISTORY_SECONDS);
}

/* The sample of the second `now` falls in, cleared when its slot held an
 * older second; NULL for a time older than the slot's (a late caller whose
 * second has left the ring). lock held. */
static pr_history_second_t *sample(pr_history_t *h, double now) {
  assert(pr__lock_held(&h->lock));
  int64_t sec = second_of(now);
  pr_history_second_t *x = &h->seconds[slot_index(sec)];
  if (x->second > sec) return NULL;
  if (x->second != sec) {
    memset(x, 0, sizeof *x);
    x->second = sec;
    /* a second starts with the depth the last event left */
    x->queue_max = x->queue_last = h->last_queue;
  }
  return x;
}

static void set_queue(pr_history_t *h, pr_history_second_t *x, int depth) {
  uint32_t d = depth > 0 ? (uint32_t)depth : 0;
  h->last_queue = d;
  if (!x) return;
  x->queue_last = d;
  if (d > x->queue_max) x->queue_max = d;
}

void pr__history_arrival(pr_history_t *h, double now, int depth) {
  pr__lock(&h->lock);
  pr_history_second_t *x = sample(h, now);
  if (x) x->arrivals++;
  set_queue(h, x, depth);
  pr__unlock(&h->lock);
}

void pr__history_rejected(pr_history_t *h, double now) {
  pr__lock(&h->lock);
  pr_history_second_t *x = sample(h, now);
  if (x) x->rejected++;
  pr__unlock(&h->lock);
}

void pr__history_queue(pr_history_t *h, double now, int depth) {
  pr__lock(&h->lock);
  set_queue(h, sample(h, now), depth);
  pr__unlock(&h->lock);
}

void pr__history_done(pr_history_t *h, double now, double latency_s, bool ok) {
  int b = pr__history_bucket(latency_s);
  pr__lock(&h->lock);
  pr_history_second_t *x = sample(h, now);
  if (x) {
    x->completed++;
    if (!ok) x->failed++;
    x->latency[b]++;
  }
  pr__unlock(&h->lock);
}

void pr__history_switch(pr_history_t *h, double now, const char *from, const char *to,
                        const char *why, double duration_ms) {
  pr__lock(&h->lock);
  pr_history_switch_t *e = &h->switches[h->n_switches % PR_HISTORY_SWITCHES];
  e->t = now;
  pr__utf8_sanitize(from ? from : "", e->from, sizeof e->from);
  pr__utf8_sanitize(to ? to : "", e->to, sizeof e->to);
  pr__utf8_sanitize(why ? why : "", e->why, sizeof e->why);
  e->duration_ms = duration_ms;
  h->n_switches++;
  pr__unlock(&h->lock);
}

/* The recorded sample of second sec, or NULL. lock held. */
static const pr_history_second_t *recorded(const pr_history_t *h, int64_t sec) {
  const pr_history_second_t *x = &h->seconds[slot_index(sec)];
  return sec >= 0 && x->second == sec ? x : NULL;
}

/* The queue depth left before second `first`: the last depth of the newest
 * recorded second before it (0 when none is left in the ring). lock held. */
static double queue_before(const pr_history_t *h, int64_t first) {
  const pr_history_second_t *best = NULL;
  for (int i = 0; i < PR_HISTORY_SECONDS; i++) {
    const pr_history_second_t *x = &h->seconds[i];
    if (x->second >= 0 && x->second < first && (!best || x->second > best->second)) best = x;
  }
  return best ? best->queue_last : 0;
}

/* The latency at quantile q of the histogram counts[] holding n values, in
 * ms; n > 0. */
static double quantile_ms(const uint32_t *counts, uint64_t n, double q) {
  uint64_t want = (uint64_t)ceil(q * (double)n), seen = 0;
  if (want < 1) want = 1;
  for (int b = 0; b < PR_HISTORY_BUCKETS; b++)
    if ((seen += counts[b]) >= want) return pr__history_bucket_ms(b);
  return pr__history_bucket_ms(PR_HISTORY_BUCKETS - 1);
}

int pr__history_series(pr_history_t *h, double now, int n, pr_history_point_t *out) {
  if (n > PR_HISTORY_SECONDS) n = PR_HISTORY_SECONDS;
  int64_t last = second_of(now);
  if (last - h->first_second + 1 < n) n = (int)(last - h->first_second + 1);
  if (n < 1) return 0;
  int64_t first = last - n + 1;
  pr__lock(&h->lock);
  double queue = queue_before(h, first);
  for (int i = 0; i < n; i++) {
    int64_t sec = first + i;
    const pr_history_second_t *x = recorded(h, sec);
    pr_history_point_t *p = &out[i];
    memset(p, 0, sizeof *p);
    p->second = sec;
    p->p50_ms = p->p99_ms = -1;
    p->queue_max = p->queue_last = queue;
    if (!x) continue;
    p->arrivals = x->arrivals;
    p->completed = x->completed;
    p->failed = x->failed;
    p->rejected = x->rejected;
    p->queue_max = x->queue_max;
    p->queue_last = queue = x->queue_last;
    if (x->completed) {
      p->p50_ms = quantile_ms(x->latency, x->completed, 0.50);
      p->p99_ms = quantile_ms(x->latency, x->completed, 0.99);
    }
  }
  pr__unlock(&h->lock);
  return n;
}

double pr__history_percentile(pr_history_t *h, double now, int n, double q) {
  if (n > PR_HISTORY_SECONDS) n = PR_HISTORY_SECONDS;
  uint32_t sum[PR_HISTORY_BUCKETS] = {0};
  uint64_t total = 0;
  int64_t last = second_of(now);
  pr__lock(&h->lock);
  for (int64_t sec = last - n + 1; sec <= last; sec++) {
    const pr_history_second_t *x = recorded(h, sec);
    if (!x) continue;
    for (int b = 0; b < PR_HISTORY_BUCKETS; b++) sum[b] += x->latency[b];
    total += x->completed;
  }
  pr__unlock(&h->lock);
  return total ? quantile_ms(sum, total, q) : -1;
}

int pr__history_switches(pr_history_t *h, pr_history_switch_t *out, int max, uint64_t *total) {
  pr__lock(&h->lock);
  uint64_t n = h->n_switches;
  uint64_t keep = n < PR_HISTORY_SWITCHES ? n : PR_HISTORY_SWITCHES;
  if (max < 0) max = 0;
  if (keep > (uint64_t)max) keep = (uint64_t)max;
  for (uint64_t i = 0; i < keep; i++) out[i] = h->switches[(n - keep + i) % PR_HISTORY_SWITCHES];
  pr__unlock(&h->lock);
  if (total) *total = n;
  return (int)keep;
}
