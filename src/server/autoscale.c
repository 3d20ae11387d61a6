/* The autoscaler: a thread per scheduler that samples the queue every
 * window, asks the estimator for a target batch and switches to the plan
 * prepared for it. See scheduler.h for the locking rules. */
#define _GNU_SOURCE
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/lock.h"
#include "base/log.h"
#include "base/util.h"
#include "packrat/estimator.h"
#include "server/sched_internal.h"

/* ---- autoscaler ---- */

/* One window of queue samples (and the age of the oldest request at its
 * end); true when the autoscaler is to stop. */
static bool sample_window(pr_sched_t *s, double window, int *samples, double *oldest) {
  for (int i = 0; i < 20; i++) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(window / 20 * 1e9)};
    nanosleep(&ts, NULL);
    pr_lock(&s->qlock);
    bool stop = s->auto_stop;
    samples[i] = s->depth;
    if (i == 19) { /* priorities reorder the queue: the oldest may be anywhere */
      double first = 0;
      for (const pr_request_t *r = s->head; r; r = r->next)
        if (first == 0 || r->t_enqueue < first) first = r->t_enqueue;
      *oldest = first > 0 ? pr_now() - first : 0;
    }
    pr_unlock(&s->qlock);
    if (stop) return true;
  }
  return false;
}

/* Feeds the window to the estimator, publishes its inputs and decision
 * (metrics; the log when it holds, raises or switches), and switches. */
static void autoscale_step(pr_sched_t *s, pr_estimator_t *e, const pr_est_window_t *w) {
  int before = e->target, target = pr_estimator_update(e, w);
  pr_sched_stats_t *st = &s->stats;
  atomic_store(&st->auto_target, (uint64_t)target);
  atomic_store(&st->auto_rate_milli, (uint64_t)(w->arrivals_per_s * 1e3));
  atomic_store(&st->auto_backlog, (uint64_t)w->queue_lengths[w->n_samples - 1]);
  atomic_store(&st->auto_oldest_us, (uint64_t)(w->oldest_wait_s * 1e6));
  atomic_fetch_add(&st->auto_decisions[e->reason], 1);
  static const char *const why_text[] = {"", "held: the backlog grows",
                                         "raised: the backlog grows"};
  if (e->reason != PR_EST_STEADY)
    pr_log(target != before ? PR_LOG_INFO : PR_LOG_DEBUG,
           "autoscaler: target batch %d (%s; %.1f requests/s, %d queued, oldest %.0f ms)", target,
           why_text[e->reason], w->arrivals_per_s, w->queue_lengths[w->n_samples - 1],
           w->oldest_wait_s * 1e3);
  int best = -1;
  pr_lock(&s->qlock);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS && best < 0; c++)
    if (s->configs[c].ok && s->configs[c].planned && s->configs[c].plan.batch == target) best = c;
  bool on = s->auto_on, change = best >= 0 && best != s->active;
  pr_unlock(&s->qlock);
  if (on && change) {
    char why[160];
    snprintf(why, sizeof why,
             "autoscaler: target batch %d at %.1f requests/s, %d queued, oldest %.0f ms%s%s",
             target, w->arrivals_per_s, w->queue_lengths[w->n_samples - 1], w->oldest_wait_s * 1e3,
             e->reason ? "; " : "", why_text[e->reason]);
    pr_sched_switch(s, best, why);
  }
}

static void *auto_main(void *arg) {
  pr_sched_t *s = arg;
  pr_estimator_t e;
  /* the configs' planned batches, powers of two, ascending */
  int lo = 1 << 30, hi = 1;
  pr_lock(&s->qlock);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) {
    if (!s->configs[c].ok || !s->configs[c].planned) continue;
    int b = s->configs[c].plan.batch;
    if (b < lo) lo = b;
    if (b > hi) hi = b;
  }
  int est_kind = s->estimator;
  double window = s->window_s;
  pr_estimator_init(&e, est_kind ? PR_EST_RATE : PR_EST_PAPER, lo, hi);
  for (int k = 0; k < PR_EST_MAX_SIZES; k++) {
    e.latency_s[k] = 0;
    for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
      if (s->configs[c].ok && s->configs[c].planned && s->configs[c].plan.batch == (1 << k))
        e.latency_s[k] = s->configs[c].plan.latency_ms * 1e-3;
  }
  e.target = s->configs[s->active].plan.batch;
  pr_unlock(&s->qlock);
  uint64_t arrivals0 = atomic_load(&s->stats.arrivals);
  for (;;) {
    int samples[20];
    double oldest;
    if (sample_window(s, window, samples, &oldest)) return NULL;
    uint64_t arrivals = atomic_load(&s->stats.arrivals);
    pr_est_window_t w = {samples, 20, (double)(arrivals - arrivals0) / window, oldest};
    arrivals0 = arrivals;
    autoscale_step(s, &e, &w);
  }
}

/* set_auto with admin held. Following the load needs two planned configs
 * (made by the optimizer, their latencies known). */
pr_status_t pr_sched__set_auto_locked(pr_sched_t *s, bool on, int estimator, double window_s) {
  pr_lock(&s->qlock);
  int planned = 0;
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
    planned += s->configs[c].ok && s->configs[c].planned;
  if (on && planned < 2) {
    pr_unlock(&s->qlock);
    return PR_ERR_INVALID;
  }
  bool running = s->auto_running;
  s->auto_on = on;
  if (on && !running) {
    s->estimator = estimator;
    s->window_s = window_s > 0 ? window_s : 1.0;
    s->auto_stop = false;
    s->auto_running = pthread_create(&s->auto_thread, NULL, auto_main, s) == 0;
  }
  if (!on && running) s->auto_stop = true;
  pr_unlock(&s->qlock);
  if (!on && running) {
    pthread_join(s->auto_thread, NULL);
    pr_lock(&s->qlock);
    s->auto_running = false;
    pr_unlock(&s->qlock);
  }
  return PR_OK;
}

pr_status_t pr_sched_set_auto(pr_sched_t *s, bool on, int estimator, double window_s) {
  pr_lock(&s->admin);
  pr_status_t st = pr_sched__set_auto_locked(s, on, estimator, window_s);
  pr_unlock(&s->admin);
  return st;
}

bool pr_sched_auto(pr_sched_t *s) {
  pr_lock(&s->qlock);
  bool on = s->auto_on;
  pr_unlock(&s->qlock);
  return on;
}
