/* The scheduler's internals, shared by its files: scheduler.c (the queue,
 * requests, instance workers, the reaper, create and destroy),
 * admit.c (admission: the queue's bound and the wait estimate),
 * plans.c (prepared configs: add, evict, retire, switch, pin),
 * shapes.c (batches of one shape, the shape cache) and autoscale.c
 * (the autoscaler thread). Nothing outside them includes this; the locking
 * rules are in scheduler.h. */
#ifndef PR_SCHED_INTERNAL_H
#define PR_SCHED_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <time.h>

#include "base/lock.h"
#include "base/util.h"
#include "packrat/estimator.h"
#include "runtime/shape_cache.h"
#include "runtime/worker.h"
#include "sched/history.h"
#include "sched/scheduler.h"

/* Requests one instance takes for one batch, at most. */
#define PR_SCHED_MAX_BATCH_REQUESTS 1024

typedef struct {
  struct pr_sched *s;
  int config, batch; /* batch: the instance's planned batch */
  pr_worker_t w;     /* its thread, cores, team and prepared sessions */
  /* sessions of other request shapes (dynamic dims only; NULL: none), the
   * worker thread's own */
  pr_shape_cache_t *cache;
  /* measured by the worker's thread only, read by any (pr__sched_instances) */
  /* EWMA of session runs of the planned batch, its session's first run
   * aside (0: none yet) */
  _Atomic double full_ms;
  _Atomic double any_ms; /* EWMA of every session run */
  /* EWMA (0.05: steady, one slow pass must not make the queue refuse) of
   * the whole pass of a planned batch (assembly, run, scatter): the rate
   * admission estimates with */
  _Atomic double pass_ms;
  _Atomic uint64_t runs, rows;
  /* the worker thread's own: EWMA of the runs of each prepared session
   * (w.sizes[i]; 0: none timed yet), and how many of its runs were seen
   * (the first is not timed: it touches the session's memory) */
  double size_ms[PR_WORKER_MAX_SIZES];
  int size_runs[PR_WORKER_MAX_SIZES];
  bool idle; /* qlock: asleep for work or for more of its batch (pr__sched_home_cpu) */
  /* qlock: requests a take found past their deadline (linked by next),
   * timed out by the worker once it has let qlock go: a completion
   * callback (on_done) never runs under qlock, since the front ends take
   * qlock under the locks it takes (pr__sched_unqueue) */
  pr_request_t *expired;
} worker_t;

typedef struct {
  pr_plan_t plan;
  worker_t *workers;
  int n_workers;
  bool used;    /* the slot holds a config (its workers may still be starting) */
  bool ok;      /* every worker started with its sessions: may be switched to */
  bool retire;  /* its workers leave (eviction or a failed start) */
  bool planned; /* made by the optimizer (latency known): the autoscaler's, never evicted */
  double last_used;
  /* the shape its sessions are prepared at: the scheduler's (bucket -1) or
   * that with the bucket dim at cfg.bucket_sizes[bucket]; written under
   * admin before its workers start, read by them */
  int bucket;
  pr_tensor_info_t in_info[PR_SCHED_MAX_IO];
  pr_session_options_t base; /* the scheduler's, input_shapes = in_info */
} config_t;

struct pr_sched {
  pr_model_t *model;
  pr_sched_config_t cfg;
  pr_session_options_t base;
  char dim_names[8][64]; /* base's named dims, owned here */
  const char *dim_name_ptrs[8];
  int64_t dim_values[8];
  pr_tensor_info_t in_info[PR_SCHED_MAX_IO];
  int n_in, n_out;
  int cpus[4096], n_cpus;
  pr_lock_t admin;
  config_t configs[PR_SCHED_MAX_CONFIGS];
  int active;
  pr_lock_t qlock;
  pthread_cond_t qcond;                      /* a worker started (s->started) */
  pthread_cond_t work[PR_SCHED_MAX_CONFIGS]; /* config c's workers: work, a switch, leave */
  pr_request_t *head, *tail;
  int depth, started;
  /* rows queued per priority level (1..cfg.priority_levels; qlock) */
  long long *level_rows;
  bool stop;
  /* the reaper: fails queued requests past their deadline (reap_cond,
   * qlock); reap_due: when it wakes next (0: when told) */
  pthread_t reaper;
  bool reaper_running;
  double reap_due;
  pthread_cond_t reap_cond;
  /* autoscaler */
  pthread_t auto_thread;
  bool auto_on, auto_running, auto_stop;
  int estimator;
  double window_s;
  pr_sched_stats_t stats;
  pr_history_t *history; /* its own leaf lock: recorded under qlock too */
  /* the shapes served (dynamic dims only; qlock) */
  pr_sched_shape_t shapes[PR_SCHED_MAX_SHAPES];
  int n_shapes;
  uint64_t shapes_other;
};

/* Wakes config c's workers (qlock held): a request for them, a switch to
 * or from c, its retirement. Only the active config's workers take
 * requests, so a request wakes them alone, not every prepared config's. */
static inline void pr_sched__wake(pr_sched_t *s, int c) {
  if (c >= 0 && c < PR_SCHED_MAX_CONFIGS) pthread_cond_broadcast(&s->work[c]);
}

/* Puts r (unlinked, past its deadline) on w's list to time out after
 * qlock (held). */
static inline void pr_sched__expired(worker_t *w, pr_request_t *r) {
  r->next = w->expired;
  w->expired = r;
}

/* Counts r out of the queue (qlock held; r already unlinked). */
static inline void pr_sched__unqueued(pr_sched_t *s, const pr_request_t *r) {
  s->depth--;
  s->level_rows[r->priority] -= r->rows;
  assert(s->depth >= 0 && s->level_rows[r->priority] >= 0);
}

/* The files below call only the ones listed before them: request.c,
 * admit.c, shapes.c, queue.c, worker.c, plans.c, autoscale.c,
 * scheduler.c. */

/* request.c: an absolute CLOCK_MONOTONIC time for the condition variables
 * here, and such a variable. */
void pr_sched__timespec_at(struct timespec *ts, double t_mono);
void pr_sched__cond_init_monotonic(pthread_cond_t *c);
/* Completes r with st (message msg; NULL: none) and calls its on_done,
 * after which r may be gone. Never under qlock. */
void pr_sched__complete(pr_request_t *r, pr_status_t st, const char *msg);
/* Waits until r is done or the monotonic time `until`; returns done. */
bool pr_sched__wait_until(pr_request_t *r, double until);

/* The batch-fill wait of both takes (worker.c's take_batch, shapes.c's
 * take_shaped), qlock held: with n requests of `rows` rows held, the first
 * queued at first_t, the earliest deadline among them `deadline` (0:
 * none), whether w should wait for more of its batch; if so it has waited
 * (until the max queue delay after first_t, never past the deadline, or a
 * wake-up) and true is returned. The queue's depth is recorded first. */
static inline bool pr_sched__wait_for_more(worker_t *w, int n, int rows, double first_t,
                                           double deadline) {
  pr_sched_t *s = w->s;
  pr__history_queue(s->history, pr__now(), s->depth);
  if (n == 0 || rows >= w->batch || s->stop || s->active != w->config) return false;
  double until = first_t + s->cfg.max_queue_delay_s;
  if (deadline > 0 && deadline < until) until = deadline;
  if (pr__now() >= until) return false;
  struct timespec ts;
  pr_sched__timespec_at(&ts, until);
  w->idle = true; /* asleep for more of its batch: a hand-off may come to its core */
  pr__lock_timedwait(&s->qlock, &s->work[w->config], &ts);
  w->idle = false;
  return true;
}

/* admit.c: whether r, its deadline set from timeout (0: none), may
 * join the queue: PR_OK, or PR_ERR_BUSY with r->err and r->retry_after_s
 * (see pr__sched_submit). qlock held. */
pr_status_t pr_sched__admit_locked(pr_sched_t *s, pr_request_t *r, double timeout);

/* queue.c: completes r with PR_ERR_TIMEOUT (r out of the queue). */
void pr_sched__time_out(pr_sched_t *s, pr_request_t *r);
/* Puts reqs[0..n) back, in order, at the front of their priority levels
 * (qlock held): they were at the queue's head when taken. */
void pr_sched__requeue_front(pr_sched_t *s, pr_request_t **reqs, int n);
/* The reaper thread's body (arg: the scheduler). */
void *pr_sched__reaper_main(void *arg);
/* shapes.c: with dynamic dims, takes a batch of requests of one
 * shape, the queue head's (qlock held, the queue not empty); as
 * worker.c's take_batch. */
int pr_sched__take_shaped(worker_t *w, pr_request_t **reqs, int *rows_out);
/* Whether r's inputs have w's config's prepared shape past axis 0. */
bool pr_sched__prepared_shape(const worker_t *w, const pr_request_t *r);
/* The bucket of r's size (cfg.n_buckets > 0). */
int pr_sched__bucket_of(const pr_sched_t *s, const pr_request_t *r);
/* On w's thread, before its config goes live: compiles the shapes of
 * cfg.ahead into w's cache (as many as it holds). */
pr_status_t pr_sched__warm(worker_t *w);
/* On w's thread: the session for the next `rows` rows of a batch of r's
 * shape: the prepared one, or one of w's cache (compiled on a miss); NULL
 * with *st and a message in err when it cannot be had. */
pr_worker_session_t *pr_sched__session_for(worker_t *w, const pr_request_t *r, int rows,
                                           pr_status_t *st, char *err, size_t err_len);

/* worker.c: the worker thread's body (pr__worker_start's callback). */
void pr_sched__worker_main(pr_worker_t *pw, void *ctx);

/* plans.c: prepares a config for plan at bucket's shape (-1: the prepared
 * one; admin held); its index, or < 0 with err. */
int pr_sched__add_plan_locked(pr_sched_t *s, const pr_plan_t *plan, int bucket, char *err,
                              size_t err_len);
/* pr__sched_pin and pr__sched_replan (scheduler.h) with admin held and the
 * autoscaler stopped, which autoscale.c's public forms see to; replan
 * takes plans that replan_check accepted and tells in *pinned whether a
 * plan set by hand stays live (the autoscaler then stays off). */
pr_status_t pr_sched__replan_check(pr_sched_t *s, const pr_plan_t *plans, int n, int active,
                                   char *err, size_t err_len);
pr_status_t pr_sched__pin_locked(pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len);
pr_status_t pr_sched__replan_locked(pr_sched_t *s, const pr_plan_t *plans, const int *buckets,
                                    int n, int active, const char *why, bool *pinned, char *err,
                                    size_t err_len);

/* autoscale.c: why the autoscaler chose its target, by pr_est_reason_t
 * ("" for the estimate itself): in its log lines and switch reasons. */
extern const char *const pr_sched__auto_why[PR_EST_REASONS];
/* Starts or stops the autoscaler thread (admin held). */
pr_status_t pr_sched__set_auto_locked(pr_sched_t *s, bool on, int estimator, double window_s);

#endif
