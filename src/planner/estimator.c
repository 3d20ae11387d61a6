#include "packrat/estimator.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

static int floor_pow2(double x, int lo, int hi) {
  int p = lo;
  while (p * 2 <= hi && (double)(p * 2) <= x) p *= 2;
  return p;
}

static int log2i(int x) {
  int k = 0;
  while (k < 30 && (1 << (k + 1)) <= x) k++; /* 1 << 31 would overflow */
  return k;
}

void pr_estimator_init(pr_estimator_t *e, pr_estimator_kind_t kind, int min_batch, int max_batch) {
  memset(e, 0, sizeof *e);
  e->kind = kind;
  e->alpha = 0.1;
  e->history = 10;
  e->up_windows = 2;
  e->down_windows = 5;
  e->min_batch = min_batch < 1 ? 1 : 1 << log2i(min_batch);
  e->max_batch = max_batch < e->min_batch ? e->min_batch : 1 << log2i(max_batch);
  e->target = e->min_batch;
}

static int paper_update(pr_estimator_t *e, const pr_est_window_t *w) {
  if (w->n_samples > 0) {
    double mean = 0;
    for (int i = 0; i < w->n_samples; i++) mean += w->queue_lengths[i];
    mean /= w->n_samples;
    e->ewma = e->started ? e->alpha * mean + (1 - e->alpha) * e->ewma : mean;
    e->started = true;
  }
  int est = floor_pow2(e->ewma, e->min_batch, e->max_batch);
  int h = e->history < PR_EST_MAX_HISTORY ? e->history : PR_EST_MAX_HISTORY;
  e->hist[e->pos] = est;
  e->pos = (e->pos + 1) % h;
  if (e->n_hist < h) e->n_hist++;
  /* mode of the history; a tie keeps the current target when it is among the tied */
  int best = e->target, best_count = 0;
  for (int i = 0; i < e->n_hist; i++) {
    int v = e->hist[i], count = 0;
    for (int j = 0; j < e->n_hist; j++) count += e->hist[j] == v;
    if (count > best_count || (count == best_count && v == e->target)) best = v, best_count = count;
  }
  assert(e->n_hist >= 1 && e->n_hist <= h && e->pos >= 0 && e->pos < h);
  e->target = best;
  return e->target;
}

/* Requests per second the plan for batch b serves: b over its latency
 * (latency_s: measured or planned, as the caller gave it; 0: unknown). */
static double capacity_of(const pr_estimator_t *e, int b) {
  double lat = e->latency_s[log2i(b)];
  return lat > 0 ? b / lat : 0;
}

/* The instances the plan for batch b runs (e->layout; 0: unknown). */
static int layout_of(const pr_estimator_t *e, int b) {
  return e->layout[log2i(b)];
}

/* Whether the plan for batch a serves fewer requests per second than the
 * plan for b by more than `margin` (1: any): by their throughputs when
 * both are known (a larger batch is not always a faster plan), by the
 * batches otherwise. */
static bool lower_by(const pr_estimator_t *e, int a, int b, double margin) {
  double ca = capacity_of(e, a), cb = capacity_of(e, b);
  return ca > 0 && cb > 0 ? ca * margin < cb : a < b;
}

/* A move from b to a lowers capacity: by any amount, or in an overload
 * (every plan's queue grows) by more than PR_EST_GAIN. */
static bool lower_capacity(const pr_estimator_t *e, int a, int b) {
  return lower_by(e, a, b, e->overload ? PR_EST_GAIN : 1.0);
}

/* Whether the plan for batch b serves `rate` while busy at most `load` of
 * the time (rate x latency(b) <= load x b; false when b's latency is
 * unknown). */
static bool fits(const pr_estimator_t *e, int b, double rate, double load) {
  double lat = e->latency_s[log2i(b)];
  return lat > 0 && rate * lat <= load * b;
}

/* Smallest power of two in range whose plan fits both rates at `load`;
 * 0 when none does. */
static int smallest_fit(const pr_estimator_t *e, double r1, double r2, double load) {
  for (int b = e->min_batch; b <= e->max_batch; b *= 2)
    if (fits(e, b, r1, load) && fits(e, b, r2, load)) return b;
  return 0;
}

/* The batch whose plan serves the most (0: no latency known), and what it
 * serves. */
static int top_batch(const pr_estimator_t *e) {
  int pick = 0;
  for (int b = e->min_batch; b <= e->max_batch; b *= 2)
    if (capacity_of(e, b) > 0 && (!pick || capacity_of(e, b) > capacity_of(e, pick))) pick = b;
  return pick;
}

static double top_capacity(const pr_estimator_t *e) {
  int b = top_batch(e);
  return b ? capacity_of(e, b) : 0;
}

/* The plan that serves the most: of those within PR_EST_GAIN of the
 * highest capacity, the smallest batch (the lowest latency) or the
 * largest; max_batch when no latency is known. */
static int most_capacity(const pr_estimator_t *e, bool largest) {
  double top = top_capacity(e);
  int pick = 0;
  for (int b = e->min_batch; top > 0 && b <= e->max_batch; b *= 2)
    if (capacity_of(e, b) * PR_EST_GAIN >= top && (!pick || largest)) pick = b;
  return pick ? pick : e->max_batch;
}

/* Of the batches whose plans run the instances `layout`, the smallest
 * whose plan serves within PR_EST_GAIN of the most any of them serves (0:
 * none known). On the same instances a light load runs alike whatever the
 * batch (a request at a time; an instance runs what it holds in parts when
 * that is faster: pr_plan_next_chunk), and a smaller batch only shortens
 * the wait for a batch under a heavier one, where the capacity it gives up
 * costs more than it gains (bench/adaptive.py: 2x8 -> 2x1 at 0.2x of the
 * capacity, 2x1 serving 18% less than 2x4, overrun when the load rose to
 * 0.8x). */
static int family_pick(const pr_estimator_t *e, int layout) {
  double top = 0;
  for (int b = e->min_batch; b <= e->max_batch; b *= 2)
    if (layout_of(e, b) == layout && capacity_of(e, b) > top) top = capacity_of(e, b);
  for (int b = e->min_batch; top > 0 && b <= e->max_batch; b *= 2)
    if (layout_of(e, b) == layout && capacity_of(e, b) * PR_EST_GAIN >= top) return b;
  return 0;
}

/* Windows a move to batch `want` must be wanted in a row: few up (more
 * capacity), one when the window's own rate `r` is over what the live
 * plan serves (its queue grows now: a bench run's rise from 0.38x to 0.9x
 * of the top capacity queued for the extra window), more down. */
static int windows_for(const pr_estimator_t *e, int want, double r) {
  if (!e->overload && !lower_capacity(e, e->target, want)) return e->down_windows;
  double now = capacity_of(e, e->target);
  return now > 0 && r > now && capacity_of(e, want) > now ? 1 : e->up_windows;
}

static int rate_update(pr_estimator_t *e, const pr_est_window_t *w) {
  e->ewma = e->started ? 0.3 * w->arrivals_per_s + 0.7 * e->ewma : w->arrivals_per_s;
  e->started = true;
  /* up when the live plan would be busy over PR_EST_UP_LOAD of the time
   * at the average or at the window's own rate (a rise shows in the
   * window before the average catches up), to the smallest batch that
   * fits, or to the plan that serves the most when none does, if that
   * serves PR_EST_GAIN more; failing that, to the one that fits, or to the
   * one that serves the most, by any margin if it batches more (near
   * capacity the queue is steep in the spare capacity: a bench run held
   * 2x4 at 94% busy, 4.6% under 2x8, for 46 s while the queue grew to 36;
   * a larger batch is the way Packrat's queue rule goes, and moves to
   * smaller batches keep the margin, so the two cannot flap), but not to a
   * larger batch on the live plan's instances: there the larger batch only
   * lengthens the batches a load near capacity runs (bench/adaptive.py,
   * an adaptive server held at 2x8, which served 2% less than 2x4: p99
   * 1.18x static 2x4's at 0.79x of the capacity, 1.06x at 0.9x), and a
   * growing, stale backlog still raises it (backlog_guard); down only to
   * a plan busy at most PR_EST_DOWN_LOAD at both rates: the band between
   * is hysteresis. In an overload (the average PR_EST_GAIN over every
   * plan's capacity: the queue grows whatever runs; the margin keeps a
   * noisy average near capacity out) the largest batch within PR_EST_GAIN
   * of the most, as Packrat's queue rule would (batching serves more under
   * load), unless the live plan serves more than that by PR_EST_GAIN. */
  double r = w->arrivals_per_s;
  int want = e->target;
  double top = top_capacity(e);
  e->overload = top <= 0 || e->ewma > PR_EST_GAIN * top;
  if (!fits(e, e->target, e->ewma, PR_EST_UP_LOAD) || !fits(e, e->target, r, PR_EST_UP_LOAD)) {
    if (e->overload) {
      int up = most_capacity(e, true);
      if (!lower_capacity(e, up, e->target)) want = up;
    } else {
      int fit = smallest_fit(e, e->ewma, r, PR_EST_UP_LOAD);
      int up = fit ? fit : most_capacity(e, false);
      double now = capacity_of(e, e->target);
      int larger = fit ? fit : top_batch(e);
      int at = layout_of(e, e->target);
      if (now <= 0 || capacity_of(e, up) > PR_EST_GAIN * now)
        want = up;
      else if (larger > e->target && capacity_of(e, larger) > now &&
               (!at || layout_of(e, larger) != at))
        want = larger;
    }
  } else {
    int down = smallest_fit(e, e->ewma, r, PR_EST_DOWN_LOAD);
    if (down && layout_of(e, down)) down = family_pick(e, layout_of(e, down));
    if (down && down < e->target) want = down;
  }
  if (want == e->target) {
    e->pending_count = 0;
    return e->target;
  }
  if (want != e->pending) e->pending = want, e->pending_count = 0;
  if (++e->pending_count >= windows_for(e, want, r)) {
    e->target = want;
    e->pending_count = 0;
  }
  return e->target;
}

/* The plan up from batch b: of the larger batches in range, the one whose
 * plan serves the most, if that is more than b's (b: none is, or unknown
 * latencies): a stale, growing backlog drains fastest there, and a step at
 * a time queued for a window a step (bench/adaptive.py went 2x1 -> 2x2 ->
 * 2x8 over two windows at 0.8x of 2x8's capacity).
 * Never a smaller batch: b's throughput is read off its latest runs, and
 * the first runs after a switch to it can be slow enough to make a smaller
 * batch look faster (seen: 2x8 -> 2x2 under a growing queue, though 2x2
 * serves 8% less); batching more is what a backlog calls for (Packrat's
 * queue rule), and the rate rule moves to a smaller batch that serves more. */
static int next_capacity_up(const pr_estimator_t *e, int b) {
  int pick = b;
  for (int c = 2 * b; capacity_of(e, b) > 0 && c <= e->max_batch; c *= 2)
    if (capacity_of(e, c) > capacity_of(e, pick)) pick = c;
  return pick;
}

/* Whether the window's queue grows: its last sample above its first, or,
 * with requests still queued at its end, its second half's mean above its
 * first half's (a queue that rises and falls back a little while requests
 * keep waiting still grows), or the server saw its peak of a second rise
 * (queue_rose: the samples can miss a short peak). */
static bool backlog_grows(const pr_est_window_t *w) {
  int n = w->n_samples;
  if (n < 2) return w->queue_rose;
  const int *q = w->queue_lengths;
  if (w->queue_rose || q[n - 1] > q[0]) return true;
  if (q[n - 1] == 0) return false;
  long first = 0, second = 0;
  for (int i = 0; i < n / 2; i++) first += q[i], second += q[n - n / 2 + i];
  return second > first;
}

/* The backlog guard (see estimator.h) over the estimate `want`. */
static int backlog_guard(pr_estimator_t *e, const pr_est_window_t *w, int before, int want) {
  e->reason = PR_EST_STEADY;
  bool growing = backlog_grows(w);
  /* a request that waited more than a whole batch of the live plan: the
   * plan is behind, whatever the samples show */
  double lat_before = e->latency_s[log2i(before)];
  bool behind = lat_before > 0 && w->oldest_wait_s > lat_before;
  if (lower_capacity(e, want, before)) {
    double cap = capacity_of(e, want);
    if (growing || behind) {
      e->reason = PR_EST_HELD;
      want = before;
    } else if (cap > 0 && w->arrivals_per_s > 0.8 * cap) {
      /* the rate rule's average lags a rising rate: the window's own rate
       * must fit the lower plan with the same 20% to spare */
      e->reason = PR_EST_HELD_RATE;
      want = before;
    }
  }
  double lat = e->latency_s[log2i(want)];
  if (growing && lat > 0 && w->oldest_wait_s > 2 * lat) {
    int up = next_capacity_up(e, want);
    if (up != want) {
      want = up;
      e->reason = PR_EST_BACKLOG_UP;
    }
  }
  return want;
}

/* A batch the estimator may name: a power of two in [min_batch, max_batch]. */
static inline bool valid_batch(const pr_estimator_t *e, int b) {
  return b >= e->min_batch && b <= e->max_batch && (b & (b - 1)) == 0;
}

int pr_estimator_update(pr_estimator_t *e, const pr_est_window_t *w) {
  assert(e && w && w->n_samples >= 0);
  assert(valid_batch(e, e->min_batch) && valid_batch(e, e->max_batch));
  assert(valid_batch(e, e->target));
  int before = e->target;
  int want = e->kind == PR_EST_RATE ? rate_update(e, w) : paper_update(e, w);
  e->target = backlog_guard(e, w, before, want);
  if (e->target != want) {
    /* a move held back by the backlog is made at the first window that
     * does not hold it (the hysteresis it passed stands); a raise starts
     * the count again */
    bool held = e->reason == PR_EST_HELD || e->reason == PR_EST_HELD_RATE;
    e->pending = want;
    e->pending_count =
        held && e->kind == PR_EST_RATE ? windows_for(e, want, w->arrivals_per_s) - 1 : 0;
  }
  assert(valid_batch(e, want) && valid_batch(e, e->target));
  return e->target;
}

bool pr_estimator_overrun(const pr_estimator_t *e, const pr_est_window_t *w,
                          unsigned long arrived) {
  int n = w->n_samples;
  double lat = e->latency_s[log2i(e->target)];
  double live = capacity_of(e, e->target);
  return e->kind == PR_EST_RATE && n >= 5 && arrived >= 8 && live > 0 && top_capacity(e) > live &&
         w->arrivals_per_s > live && w->queue_lengths[n - 1] > w->queue_lengths[0] &&
         w->oldest_wait_s > 2 * lat;
}
