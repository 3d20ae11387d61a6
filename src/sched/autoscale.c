/* The autoscaler: a thread per scheduler that samples the queue every
 * window, asks the estimator for a target batch and switches to the plan
 * prepared for it. With shape buckets (pr_sched_config_t.n_buckets), it
 * also counts each window's arrivals per bucket, asks the bucket controller
 * (packrat/buckets.h) which bucket to plan for, gives the estimator that
 * bucket's planned latencies, and switches to the plan of that bucket at
 * the target batch: a change of bucket is one more reason for the same
 * switch. See scheduler.h for the locking rules. */
#define _GNU_SOURCE
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/lock.h"
#include "base/log.h"
#include "base/util.h"
#include "packrat/estimator.h"
#include "sched/history.h"
#include "sched/internal.h"

/* ---- autoscaler ---- */

_Static_assert(sizeof(((pr_sched_stats_t *)0)->auto_decisions) / sizeof(uint64_t) == PR_EST_REASONS,
               "a decision counter a reason");

/* The autoscaler thread's state between windows. */
typedef struct {
  pr_estimator_t e;
  pr_bucket_ctl_t ctl;               /* with buckets */
  uint64_t arrivals[PR_BUCKETS_MAX]; /* stats.bucket_arrivals at the last window's end */
} auto_state_t;

/* Whether config c is the autoscaler's for bucket (-1: no buckets).
 * qlock held. */
static bool planned_for(pr_sched_t *s, int c, int bucket) {
  assert(pr__lock_held(&s->qlock));
  const config_t *cfg = &s->configs[c];
  return cfg->ok && cfg->planned && cfg->bucket == bucket;
}

/* Whether every instance of config c has a measured pass. */
static bool measured(const config_t *cfg) {
  for (int i = 0; i < cfg->n_workers; i++)
    if (atomic_load(&cfg->workers[i].pass_ms) <= 0) return false;
  return cfg->n_workers > 0;
}

/* Config c's latency for a batch: measured once every instance has passed
 * a whole planned batch (its slowest instance's EWMA of assembly, run and
 * scatter, co-running with the others as under load), else planned. The
 * profile times each instance alone: instances sharing caches and memory
 * run slower, by a different share per plan (ResNet-50 on two cores: 1.2x
 * to 1.6x), so capacities compared by plan alone can rank plans wrong.
 * qlock held. */
static double config_latency_s(const config_t *cfg) {
  if (!measured(cfg)) return cfg->plan.latency_ms * 1e-3;
  double worst = 0;
  for (int i = 0; i < cfg->n_workers; i++) {
    double ms = atomic_load(&cfg->workers[i].pass_ms);
    worst = ms > worst ? ms : worst;
  }
  return worst * 1e-3;
}

/* The estimator's latency of each batch: bucket's plans' measured where
 * known; a plan not measured yet is planned times the mean measured /
 * planned of the bucket's measured plans (the slowdown of co-running
 * instances the profile does not see is of a kind across plans: a planned
 * capacity against measured ones would look higher than it is). qlock
 * held. */
static void load_latencies(pr_sched_t *s, pr_estimator_t *e, int bucket) {
  double ratio = 0;
  int n = 0;
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
    if (planned_for(s, c, bucket) && measured(&s->configs[c]) &&
        s->configs[c].plan.latency_ms > 0) {
      ratio += config_latency_s(&s->configs[c]) / (s->configs[c].plan.latency_ms * 1e-3);
      n++;
    }
  ratio = n ? ratio / n : 1;
  int of[PR_EST_MAX_SIZES]; /* the config of each batch (-1: none) */
  for (int k = 0; k < PR_EST_MAX_SIZES; k++) {
    e->latency_s[k] = 0;
    e->layout[k] = 0;
    of[k] = -1;
    for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
      if (planned_for(s, c, bucket) && s->configs[c].plan.batch == (1 << k)) {
        e->latency_s[k] = config_latency_s(&s->configs[c]) * (measured(&s->configs[c]) ? 1 : ratio);
        of[k] = c;
      }
    /* the layout: 1 + the first batch whose plan runs the same instances */
    for (int j = 0; of[k] >= 0 && !e->layout[k]; j++)
      if (of[j] >= 0 && pr_plan_same_instances(&s->configs[of[j]].plan, &s->configs[of[k]].plan))
        e->layout[k] = j + 1;
  }
}

/* The bucket to plan for after this window's arrivals (-1: no buckets);
 * a change is logged and gives the estimator the bucket's latencies. */
static int bucket_step(pr_sched_t *s, auto_state_t *a) {
  int n = s->cfg.n_buckets;
  if (!n) return -1;
  uint64_t counts[PR_BUCKETS_MAX], total = 0;
  for (int k = 0; k < n; k++) {
    uint64_t now = atomic_load(&s->stats.bucket_arrivals[k]);
    counts[k] = now - a->arrivals[k];
    a->arrivals[k] = now;
    total += counts[k];
  }
  int before = a->ctl.current, b = pr_bucket_ctl_update(&a->ctl, counts);
  const long long *size = s->cfg.bucket_sizes;
  atomic_store(&s->stats.auto_bucket_size, (uint64_t)size[b]);
  if (b == before) return b;
  uint64_t within = 0;
  for (int k = 0; k <= b; k++) within += counts[k];
  pr__log(PR_LOG_INFO,
          "%sautoscaler: shape bucket %s <= %lld (was <= %lld): %llu of the window's %llu requests "
          "are within it",
          s->cfg.who, s->cfg.dyn[s->cfg.bucket_dim].name, size[b], size[before],
          (unsigned long long)within, (unsigned long long)total);
  pr__lock(&s->qlock);
  load_latencies(s, &a->e, b);
  pr__unlock(&s->qlock);
  return b;
}

/* Where the next window's arrival rate counts from. */
typedef struct {
  double t;
  uint64_t arrivals;
} mark_t;

/* One window of queue samples, one every window/20 s, into w (its rate:
 * the arrivals since the mark, which moves to the window's end; its
 * oldest request's wait at its end), ended early when it shows the live
 * plan overrun (pr_estimator_overrun). True when the autoscaler is to
 * stop. */
static bool sample_window(pr_sched_t *s, double window, const pr_estimator_t *e, mark_t *mark,
                          int *samples, pr_est_window_t *w) {
  w->queue_lengths = samples;
  w->n_samples = 0;
  for (int i = 0; i < 20; i++) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(window / 20 * 1e9)};
    nanosleep(&ts, NULL);
    pr__lock(&s->qlock);
    bool stop = s->auto_stop;
    samples[i] = s->depth;
    /* priorities reorder the queue: the oldest may be anywhere (looked for
     * at the end, and while the queue is up: the overrun test's) */
    double first = 0;
    for (const pr_request_t *r = s->head; r && (i == 19 || samples[i] > samples[0]); r = r->next)
      if (first == 0 || r->t_enqueue < first) first = r->t_enqueue;
    pr__unlock(&s->qlock);
    if (stop) return true;
    double now = pr__now(), elapsed = now - mark->t;
    w->oldest_wait_s = first > 0 ? now - first : 0;
    w->n_samples = i + 1;
    uint64_t arrived = atomic_load(&s->stats.arrivals) - mark->arrivals;
    w->arrivals_per_s = elapsed > 0 ? (double)arrived / elapsed : 0;
    if (i == 19 || pr_estimator_overrun(e, w, arrived)) {
      *mark = (mark_t){now, mark->arrivals + arrived};
      break;
    }
  }
  return false;
}

/* Whether the queue's peak of a second rose over the last two whole
 * seconds or in the second under way (the history records every change
 * of depth; the window's samples can miss a short peak). */
static bool queue_rose(pr_sched_t *s) {
  pr_history_point_t p[3];
  int n = pr__history_series(s->history, pr__now(), 3, p);
  for (int i = 1; i < n; i++)
    if (p[i].queue_max > p[i - 1].queue_max) return true;
  return false;
}

/* The requests per second of the estimator's plan for batch b (0:
 * unknown): measured where known (load_latencies). */
static double planned_capacity(const pr_estimator_t *e, int b) {
  int k = 0;
  while (k + 1 < PR_EST_MAX_SIZES && (1 << (k + 1)) <= b) k++;
  return e->latency_s[k] > 0 ? b / e->latency_s[k] : 0;
}

/* Publishes a window's inputs and the estimator's decision (metrics; the
 * log when the backlog or the rate held or raised it). */
static void publish_step(pr_sched_t *s, const pr_estimator_t *e, const pr_est_window_t *w,
                         int before) {
  pr_sched_stats_t *st = &s->stats;
  int n = w->n_samples, queued = n ? w->queue_lengths[n - 1] : 0;
  double capacity = planned_capacity(e, e->target);
  atomic_store(&st->auto_target, (uint64_t)e->target);
  atomic_store(&st->auto_capacity_milli, (uint64_t)(capacity * 1e3));
  atomic_store(&st->auto_rate_milli, (uint64_t)(w->arrivals_per_s * 1e3));
  atomic_store(&st->auto_backlog_start, (uint64_t)(n ? w->queue_lengths[0] : 0));
  atomic_store(&st->auto_backlog, (uint64_t)queued);
  atomic_store(&st->auto_oldest_us, (uint64_t)(w->oldest_wait_s * 1e6));
  atomic_fetch_add(&st->auto_decisions[e->reason], 1);
  if (e->reason != PR_EST_STEADY)
    pr__log(e->target != before ? PR_LOG_INFO : PR_LOG_DEBUG,
            "%sautoscaler: target batch %d, %.1f requests/s capacity (%s; %.1f requests/s, queue "
            "%d -> %d, oldest %.0f ms)",
            s->cfg.who, e->target, capacity, pr_sched__auto_why[e->reason], w->arrivals_per_s,
            n ? w->queue_lengths[0] : 0, queued, w->oldest_wait_s * 1e3);
}

const char *const pr_sched__auto_why[PR_EST_REASONS] = {
    "", "held: the backlog grows or waits", "raised: the backlog grows",
    "held: the arrival rate needs the capacity"};

/* Feeds the window to the estimator, publishes its inputs and decision,
 * and switches to the plan of bucket (-1: no buckets) at the target
 * batch. */
static void autoscale_step(pr_sched_t *s, pr_estimator_t *e, const pr_est_window_t *w, int bucket) {
  pr__lock(&s->qlock);
  load_latencies(s, e, bucket); /* this window's measurements */
  pr__unlock(&s->qlock);
  int before = e->target, target = pr_estimator_update(e, w);
  publish_step(s, e, w, before);
  int best = -1;
  pr__lock(&s->qlock);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS && best < 0; c++)
    if (planned_for(s, c, bucket) && s->configs[c].plan.batch == target) best = c;
  bool on = s->auto_on, change = best >= 0 && best != s->active;
  pr__unlock(&s->qlock);
  if (on && change) {
    char why[400], shape[96] = "";
    if (bucket >= 0)
      snprintf(shape, sizeof shape, ", shape bucket %.64s <= %lld",
               s->cfg.dyn[s->cfg.bucket_dim].name, s->cfg.bucket_sizes[bucket]);
    snprintf(why, sizeof why,
             "autoscaler: target batch %d%s (%.1f requests/s capacity) at %.1f requests/s, %d "
             "queued, oldest %.0f ms%s%s%s",
             target, shape, planned_capacity(e, target), w->arrivals_per_s,
             w->queue_lengths[w->n_samples - 1], w->oldest_wait_s * 1e3, e->reason ? "; " : "",
             pr_sched__auto_why[e->reason],
             w->n_samples < 20 ? "; the window cut short: the live plan is overrun" : "");
    pr__sched_switch(s, best, why);
  }
}

static void *auto_main(void *arg) {
  pr_sched_t *s = arg;
  auto_state_t a;
  pr_estimator_t *e = &a.e;
  /* the configs' planned batches, powers of two, ascending */
  int lo = 1 << 30, hi = 1;
  pr__lock(&s->qlock);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) {
    if (!s->configs[c].ok || !s->configs[c].planned) continue;
    int b = s->configs[c].plan.batch;
    if (b < lo) lo = b;
    if (b > hi) hi = b;
  }
  int est_kind = s->estimator;
  double window = s->window_s;
  pr_estimator_init(e, est_kind ? PR_EST_RATE : PR_EST_PAPER, lo, hi);
  /* the live plan's bucket (one pinned by hand has none: the largest) */
  int bucket = -1, n_buckets = s->cfg.n_buckets;
  if (n_buckets) {
    bucket = s->configs[s->active].bucket >= 0 ? s->configs[s->active].bucket : n_buckets - 1;
    pr_bucket_ctl_init(&a.ctl, n_buckets, bucket);
    for (int k = 0; k < n_buckets; k++) a.arrivals[k] = atomic_load(&s->stats.bucket_arrivals[k]);
    atomic_store(&s->stats.auto_bucket_size, (uint64_t)s->cfg.bucket_sizes[bucket]);
  }
  load_latencies(s, e, bucket);
  e->target = s->configs[s->active].plan.batch;
  pr__unlock(&s->qlock);
  mark_t mark = {pr__now(), atomic_load(&s->stats.arrivals)};
  for (;;) {
    int samples[20];
    pr_est_window_t w = {0};
    if (sample_window(s, window, e, &mark, samples, &w)) return NULL;
    w.queue_rose = queue_rose(s);
    autoscale_step(s, e, &w, bucket_step(s, &a));
  }
}

/* set_auto with admin held. Following the load needs two planned configs
 * (made by the optimizer, their latencies known). */
pr_status_t pr_sched__set_auto_locked(pr_sched_t *s, bool on, int estimator, double window_s) {
  pr__lock(&s->qlock);
  int planned = 0;
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
    planned += s->configs[c].ok && s->configs[c].planned;
  if (on && planned < 2) {
    pr__unlock(&s->qlock);
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
  pr__unlock(&s->qlock);
  if (!on && running) {
    pthread_join(s->auto_thread, NULL);
    pr__lock(&s->qlock);
    s->auto_running = false;
    pr__unlock(&s->qlock);
  }
  return PR_OK;
}

pr_status_t pr__sched_set_auto(pr_sched_t *s, bool on, int estimator, double window_s) {
  pr__lock(&s->admin);
  pr_status_t st = pr_sched__set_auto_locked(s, on, estimator, window_s);
  pr__unlock(&s->admin);
  return st;
}

bool pr__sched_auto(pr_sched_t *s) {
  pr__lock(&s->qlock);
  bool on = s->auto_on;
  pr__unlock(&s->qlock);
  return on;
}

/* ---- the hand controls, which stop the autoscaler while plans change ---- */

pr_status_t pr__sched_pin(pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len) {
  pr__lock(&s->admin);
  /* the autoscaler stops first, so it switches nowhere while plans change */
  bool was_auto = pr__sched_auto(s);
  pr_sched__set_auto_locked(s, false, 0, 0);
  pr_status_t st = pr_sched__pin_locked(s, plan, err, err_len);
  if (st && was_auto) pr_sched__set_auto_locked(s, true, s->estimator, s->window_s); /* as it was */
  pr__unlock(&s->admin);
  return st;
}

pr_status_t pr__sched_replan(pr_sched_t *s, const pr_plan_t *plans, const int *buckets, int n,
                             int active, const char *why, char *err, size_t err_len) {
  pr_status_t st = pr_sched__replan_check(s, plans, n, active, err, err_len);
  if (st) return st;
  pr__lock(&s->admin);
  bool was_auto = pr__sched_auto(s), pinned;
  pr_sched__set_auto_locked(s, false, 0, 0);
  st = pr_sched__replan_locked(s, plans, buckets, n, active, why, &pinned, err, err_len);
  if (was_auto && !pinned) pr_sched__set_auto_locked(s, true, s->estimator, s->window_s);
  pr__unlock(&s->admin);
  return st;
}
