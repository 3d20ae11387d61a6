/* Batch-size estimator: from what the queue and the arrivals show, the batch
 * size the server should plan for. Pure: observations in, target out.
 *
 * PR_EST_PAPER (Packrat's rule): each window (1 s), an EWMA (alpha 0.1) of the
 * queue lengths seen, rounded down to a power of two, then the mode of the
 * last 10 such estimates.
 * PR_EST_RATE: from an EWMA (0.3) of the arrival rate and the window's own
 * rate, up (2 windows in a row; 1 when the window's rate is over the
 * current plan's capacity) when the current plan would be busy over
 * 85% of the time at either, to the smallest power of two B busy at most
 * 85% (rate x latency(B) <= 0.85 B), or when none is to the smallest
 * batch within 5% of the most any plan serves, if it serves 5% more, and
 * by any margin to a larger batch (that fits, or that serves the most) on
 * other instances than the live plan's: a
 * move to a smaller batch needs the 5% (in an overload, the average 5% over every plan's capacity,
 * the largest batch within 5% of the most, as Packrat's queue rule would); down (5 windows in a
 * row) to the smallest B busy at most 70% at both rates (hysteresis), or rather, of the
 * batches whose plans run B's instances (layout), to the smallest whose plan serves within 5%
 * of the most any of them serves, if that is below the live one: a light load runs alike on
 * them all, and a smaller batch that serves less only costs the next rise.
 *
 * Both read the backlog too, and compare plans by capacity: the requests
 * per second a batch's plan serves (batch / its planned latency; by the
 * batch when a latency is unknown), since a larger batch is not always a
 * faster plan. A target of lower capacity than the current one is refused
 * while the backlog grows (the window's queue rises, or its second half
 * is above its first with requests still queued at its end, or the
 * queue's peak of a second rose over its last two seconds), while the
 * oldest waiting request has waited more than one batch of the current
 * plan, or while the window's own arrival rate exceeds 80% of the lower
 * plan's capacity (the rate rule's average lags a rising rate): an
 * arrival rate that reads low while requests pile up, e.g. a burst that
 * ended, must not shrink capacity. When the backlog grows and its oldest
 * request has waited more than twice the target's planned latency, the
 * target goes up to the larger batch whose plan serves the most, if that
 * serves more. */
#ifndef PACKRAT_ESTIMATOR_H
#define PACKRAT_ESTIMATOR_H

#include <stdbool.h>

#pragma GCC visibility push(default) /* the public API: exported */

typedef enum { PR_EST_PAPER = 0, PR_EST_RATE = 1 } pr_estimator_kind_t;

#define PR_EST_MAX_HISTORY 64
/* PR_EST_RATE: up when the live plan would be busy over PR_EST_UP_LOAD of
 * the time, down to a plan busy at most PR_EST_DOWN_LOAD; a plan serves
 * more than another only by PR_EST_GAIN (measured capacities are that
 * noisy). */
#define PR_EST_UP_LOAD 0.85
#define PR_EST_DOWN_LOAD 0.7
#define PR_EST_GAIN 1.05
#define PR_EST_MAX_SIZES 24

/* Why the last update chose its target (for logs and metrics). */
typedef enum {
  PR_EST_STEADY = 0, /* the estimate itself */
  PR_EST_HELD,       /* a lower estimate held back: the backlog grows */
  PR_EST_BACKLOG_UP, /* raised: the backlog grows and its oldest request is stale */
  PR_EST_HELD_RATE,  /* a lower estimate held back: the window's rate needs the capacity */
  PR_EST_REASONS
} pr_est_reason_t;

typedef struct {
  pr_estimator_kind_t kind;
  double alpha;                 /* EWMA weight of the newest window */
  int history;                  /* estimates the mode is taken over */
  int min_batch, max_batch;     /* powers of two */
  int up_windows, down_windows; /* hysteresis of PR_EST_RATE */
  /* planned latency (s) of a batch of 2^k, k = 0..: for PR_EST_RATE */
  double latency_s[PR_EST_MAX_SIZES];
  /* which instances the plan for 2^k runs: plans with the same nonzero
   * layout differ in their batches only (0: unknown, like no other) */
  int layout[PR_EST_MAX_SIZES];
  /* state */
  double ewma;
  bool started;
  int hist[PR_EST_MAX_HISTORY], n_hist, pos;
  int target;
  int pending, pending_count;
  bool overload;          /* PR_EST_RATE: the average arrival rate 5% over every plan's capacity */
  pr_est_reason_t reason; /* of the last update */
} pr_estimator_t;

typedef struct {
  const int *queue_lengths; /* sampled during the window, in order */
  int n_samples;
  double arrivals_per_s;
  double oldest_wait_s; /* age of the oldest waiting request at the window's end (0: none) */
  bool queue_rose;      /* the queue's peak of a second rose over the window's last seconds */
} pr_est_window_t;

/* Defaults: alpha 0.1, history 10, up 2, down 5; target starts at min_batch. */
void pr_estimator_init(pr_estimator_t *e, pr_estimator_kind_t kind, int min_batch, int max_batch);
/* Feeds one window; returns the target batch (a power of two in range).
 * e->reason says what decided it. */
int pr_estimator_update(pr_estimator_t *e, const pr_est_window_t *w);

/* Whether a window under way (w: its samples so far, its rate and oldest
 * wait now; `arrived` requests in it) shows the live plan (the target)
 * overrun, so that the window ends there (PR_EST_RATE only, and only while
 * another plan serves more): at least 5 samples of 20 in, 8 arrivals at a
 * rate over the target's capacity, the queue above its first sample and its
 * oldest request waiting over twice the target's latency.
 * A rise to more than the plan serves would otherwise queue for the rest
 * of the window (bench/adaptive.py: 2 s on batch 1 at 0.9x of batch 8's
 * capacity, p99 1.30x the static plan's). */
bool pr_estimator_overrun(const pr_estimator_t *e, const pr_est_window_t *w, unsigned long arrived);

#pragma GCC visibility pop

#endif
