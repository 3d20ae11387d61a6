/* The scheduler of one model version: a bounded request queue and the
 * instances of the current plan. Each instance (a thread pinned to its cores)
 * takes up to its planned batch of requests from the queue, waiting at most
 * the max queue delay once it holds one, never splitting a request;
 * concatenates their inputs, runs, and scatters the outputs back.
 *
 * Reconfiguration: the scheduler holds several instance sets ("configs", one
 * per plan, each prepared up front: threads started, sessions compiled,
 * weights shared) and one of them is active. A switch flips the active index
 * between batches: workers of the old set finish the batch they hold and
 * park; workers of the new set take the queue at once. No request is lost,
 * failed or answered twice, since the queue is the only hand-off.
 * An optional autoscaler thread samples the queue and arrivals every window,
 * asks the estimator for a target batch and switches to that batch's plan.
 *
 * Prepared configs are bounded (pr_sched_config_t.max_plans): a plan pinned
 * beyond the bound evicts the least recently used pinned config that is not
 * active, once the new one runs; the autoscaler's planned configs stay.
 * An instance prepares sessions (runtime/worker.h) for powers of two up to
 * its planned batch and that batch before its config can go live; no
 * session is ever compiled on a request's path. A batch of fewer rows runs
 * padded on the next prepared size; a request with more rows than the
 * instance's batch (it runs alone) runs in chunks of the largest prepared
 * size, the last one on the smallest size that holds it: at most
 * log2(batch) + 2 sessions an instance.
 *
 * Threads and locks: `admin` serializes everything that adds, evicts or
 * retires configs and starts or stops the autoscaler (plan posts from any
 * number of clients, destroy); `qlock` guards the queue, the active index,
 * the configs' flags and the stop flags; each request has its own lock/cond
 * for its completion. Clients submit from any thread; instance threads own
 * their sessions. Lock order: admin, qlock, a request's; a request's
 * on_done never runs under qlock (the front ends take qlock, to cancel,
 * under the locks their on_done takes). The autoscaler
 * thread takes qlock only, so admin may join it. With a timeout, a reaper
 * thread (qlock only) fails the requests whose deadline passes in the
 * queue, so a request times out with nobody waiting on it (the HTTP front
 * end suspends its connection instead of blocking a thread). The model's
 * history (history.h: per-second samples, reconfigurations, for the
 * dashboard) has its own lock, a leaf taken under qlock or none. Each
 * instance's measured latencies are atomics its worker alone writes. */
#ifndef PR_SCHED_SCHEDULER_H
#define PR_SCHED_SCHEDULER_H

#include <pthread.h>
#include <stdbool.h>

#include "packrat/buckets.h"
#include "packrat/engine.h"
#include "packrat/planner.h"
#include "runtime/shape_cache.h"
#include "sched/history.h"
#include "sched/metrics.h"
#include "sched/request.h"

/* A dim of the model's inputs that requests may size (the config's range
 * or list): its name and where it first appears (input, axis >= 1). */
#define PR_SCHED_MAX_DYN 8
#define PR_SCHED_MAX_AHEAD 64
typedef struct {
  char name[64];
  int input, axis;
} pr_sched_dim_t;

typedef struct {
  /* what its log lines begin with, e.g. "model resnet50 v1: " ("": nothing) */
  char who[160];
  int max_batch;      /* largest rows of one request */
  int queue_capacity; /* requests */
  double max_queue_delay_s;
  double timeout_s;     /* per request, 0: none */
  int max_plans;        /* prepared configs kept (2..PR_SCHED_MAX_CONFIGS; 0: the maximum) */
  int priority_levels;  /* 1..levels; a request's priority beyond them is refused */
  int default_priority; /* the level of a request that names none */
  /* dynamic dims (0: every request has the prepared shape, today's path):
   * requests are batched with requests of their own shape only, and an
   * instance runs a shape other than its prepared one on a session of its
   * cache (at most cache_sessions sessions and cache_bytes bytes) */
  int n_dyn;
  pr_sched_dim_t dyn[PR_SCHED_MAX_DYN];
  int cache_sessions;
  size_t cache_bytes;
  /* shapes compiled ahead into each instance's cache (the sizes a config
   * lists), before its plan goes live, at every rows the instance runs, as
   * many as the cache holds (an instance skips the set it is prepared
   * at): n_ahead sets of the dyn dims' values; dyn_of:
   * every input axis a dyn dim sizes (1 + its index, 0: none) */
  unsigned char dyn_of[PR_SCHED_MAX_IO][PR_MAX_RANK];
  int n_ahead;
  int64_t ahead[PR_SCHED_MAX_AHEAD][PR_SCHED_MAX_DYN];
  /* shape buckets (n_buckets 0: none, every config at the prepared shape):
   * the representative sizes of dyn dim bucket_dim, ascending
   * (packrat/buckets.h). A planned config of bucket k is prepared at the
   * prepared shape with that dim at bucket_sizes[k]; the autoscaler counts
   * each request's bucket and switches to the plan of the bucket its
   * controller picks, at the target batch. */
  int n_buckets, bucket_dim;
  long long bucket_sizes[PR_BUCKETS_MAX];
} pr_sched_config_t;

/* Where a request's time goes (packrat_request_stage_seconds): parse (its
 * body into tensors), queue (enqueue to an instance taking it), assemble
 * (copying a batch's rows into the session's inputs, per execution),
 * compute (the session runs, per execution), scatter (outputs back to the
 * requests, per execution), resume (answered to the HTTP thread taking it
 * up), encode (the response body), send (queued to sent). */
#define PR_STAGES(X) X(parse) X(queue) X(assemble) X(compute) X(scatter) X(resume) X(encode) X(send)
typedef enum {
#define PR_STAGE_ENUM(name) PR_STAGE_##name,
  PR_STAGES(PR_STAGE_ENUM)
#undef PR_STAGE_ENUM
      PR_STAGE_COUNT
} pr_stage_t;
extern const char *const pr__stage_names[PR_STAGE_COUNT];

/* Executions of one batch size (rows of a session run): how many, and the
 * nanoseconds spent copying inputs in, running, copying outputs out. */
typedef struct {
  _Atomic uint64_t count, input_ns, infer_ns, output_ns;
} pr_batch_stats_t;

typedef struct {
  /* rejected: refused at submit, the queue full (rejected_full) or its
   * backlog past the request's timeout (rejected_late, see pr__sched_submit) */
  _Atomic uint64_t success, failed, rejected, rejected_full, rejected_late, timed_out;
  /* taken out of the queue unrun: the client went away (pr__sched_cancel) */
  _Atomic uint64_t cancelled;
  /* admission (admit.c): the last submit's estimate of its wait in
   * the queue (us) */
  _Atomic uint64_t admit_wait_us;
  _Atomic uint64_t success_ns, failed_ns; /* enqueue to answer, summed */
  _Atomic uint64_t last_inference_ms;     /* wall clock of the last answer (0: none) */
  pr_batch_stats_t *by_batch;             /* [0..max_batch]: index = rows of the run */
  int max_batch;
  _Atomic uint64_t executions, rows_executed;
  _Atomic uint64_t queue_us, compute_us; /* sums */
  _Atomic uint64_t arrivals, reconfigurations, plans_evicted;
  pr_hist_t request_s, queue_s, compute_s, batch, switch_s;
  pr_hist_t stage[PR_STAGE_COUNT];
  /* per answered request: its time in the server (body parsed to response
   * sent) minus its batch's compute: the server's own cost plus waiting */
  pr_hist_t overhead_s;
  /* the autoscaler's last window: target batch and its plan's planned
   * requests per 1000 s, arrivals (per 1000 s), queue depth at its start
   * and end, oldest wait (us) at its end; decisions by reason
   * (pr_est_reason_t: the estimate, held by the backlog, raised by it,
   * held by the arrival rate) */
  _Atomic uint64_t auto_target, auto_capacity_milli, auto_rate_milli;
  _Atomic uint64_t auto_backlog_start, auto_backlog, auto_oldest_us;
  _Atomic uint64_t auto_decisions[4];
  /* shape buckets: the representative size the live plan is made for (0:
   * no buckets) and requests submitted per bucket */
  _Atomic uint64_t auto_bucket_size;
  _Atomic uint64_t bucket_arrivals[PR_BUCKETS_MAX];
  /* the instances' session caches (shapes other than the prepared one) and
   * their compile times */
  pr_shape_cache_stats_t cache;
  pr_hist_t compile_s;
} pr_sched_stats_t;

/* A request shape served (dynamic dims only): the dyn dims' values in
 * pr_sched_config_t.dyn order, requests and rows answered in it, batches
 * taken of it (each batch holds one shape). */
#define PR_SCHED_MAX_SHAPES 64
typedef struct {
  int64_t values[PR_SCHED_MAX_DYN];
  uint64_t requests, rows, batches;
} pr_sched_shape_t;

#define PR_SCHED_MAX_CONFIGS 64

typedef struct pr_sched pr_sched_t;

/* Prepares one instance set per plan (pinned to cpus in order, sessions for
 * the batch sizes each instance can run) and activates plans[active].
 * base: shapes of dims other than the batch. buckets (may be NULL: every
 * plan at base's shapes, -1): each plan's shape bucket, an index into
 * cfg->bucket_sizes (planned plans only) or -1. */
pr_status_t pr__sched_create(pr_model_t *model, const pr_plan_t *plans, const int *buckets,
                             int n_plans, int active, const int *cpus, int n_cpus,
                             const pr_session_options_t *base, const pr_sched_config_t *cfg,
                             pr_sched_t **out, char *err, size_t err_len);

/* Prepares another instance set at the prepared shape (or finds an
 * identical prepared one), evicting the least recently used inactive one
 * when at the bound; returns its index, or < 0 with err (a failed plan
 * leaves nothing behind). */
int pr__sched_add_plan(pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len);
/* Replaces the planned configs (the autoscaler's) by plans[0..n) (each with
 * a planned latency; buckets as in create, may be NULL), as one admin step:
 * the parked old ones are retired, the new ones prepared (an identical one
 * stays), the live config switches to the new plan of its batch and bucket
 * (else plans[active]) and then retires, the autoscaler goes on as it was.
 * A plan set by hand (POST .../plan) stays live. Fewer than max_plans
 * plans. PR_ERR_INVALID for bad plans, or when one cannot be prepared (err;
 * the live plan serves on, with the new plans prepared so far). */
pr_status_t pr__sched_replan(pr_sched_t *s, const pr_plan_t *plans, const int *buckets, int n,
                             int active, const char *why, char *err, size_t err_len);
/* Makes config `index` active. Counted and logged when it changes anything.
 * PR_ERR_INVALID for an index that is not a prepared config. */
pr_status_t pr__sched_switch(pr_sched_t *s, int index, const char *why);
/* Pins a plan by hand, as one admin step: prepares it (as add_plan), stops
 * the autoscaler, switches to it. */
pr_status_t pr__sched_pin(pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len);
int pr__sched_active(pr_sched_t *s);
int pr__sched_num_configs(pr_sched_t *s);
/* Copies of the prepared configs' plans (at most max, by index) into plans
 * and, when sizes is not NULL, the representative size of each one's shape
 * bucket (0: the prepared shape, no bucket) into sizes; returns how many,
 * *active: the position of the active one among them. */
int pr__sched_snapshot(pr_sched_t *s, pr_plan_t *plans, long long *sizes, int max, int *active);
/* A copy of the active config's plan. */
void pr__sched_current_plan(pr_sched_t *s, pr_plan_t *out);

/* Starts the autoscaler: every window_s, the estimator picks a target batch
 * among the configs' planned batches and the scheduler switches to the
 * config planned for it. estimator: 0 paper rule, 1 arrival-rate rule.
 * Stopped by pr__sched_set_auto(s, false) or destroy. Turning it on needs
 * two planned configs (from the optimizer): PR_ERR_INVALID otherwise. */
pr_status_t pr__sched_set_auto(pr_sched_t *s, bool on, int estimator, double window_s);
bool pr__sched_auto(pr_sched_t *s);
/* Stops taking requests, finishes every queued one, joins the instances. */
void pr__sched_destroy(pr_sched_t *s);

/* Queues r (inputs filled, rows set) behind the requests of its priority
 * level and of every level before it. Returns PR_OK, PR_ERR_INVALID for a
 * priority beyond the levels, or PR_ERR_BUSY (r->err says why,
 * r->retry_after_s when to retry) when the scheduler stops, the queue
 * holds cfg.queue_capacity requests, or r has a timeout and cannot be
 * taken from the queue within it: the rows queued ahead of it (its level
 * and the ones before) at the live plan's rate take longer than
 * PR_SCHED_ADMIT_SHARE of its timeout (the batches running are not
 * counted). The rate is each instance's planned batch over its measured
 * pass at that batch (assembly, run, scatter; a slow average), over its
 * planned latency until it has run one; with neither known, only the
 * capacity bounds the queue. On an error r is untouched but for err and
 * retry_after_s, the caller still owns it. */
pr_status_t pr__sched_submit(pr_sched_t *s, pr_request_t *r);
/* The share of a request's timeout its estimated wait may take: the
 * estimate is an average, and a request it puts at the deadline would wait
 * only to time out (504) where it could have been told to come back (503,
 * Retry-After). */
#define PR_SCHED_ADMIT_SHARE 0.9
/* The live plan's rows per second, as pr__sched_submit's estimate uses it
 * (0: unknown). */
double pr__sched_service_rate(pr_sched_t *s);
/* Waits for r until its deadline (none: forever); then, if r still waits in
 * the queue, takes it out and completes it with PR_ERR_TIMEOUT. A request an
 * instance already runs is waited for. Returns when r is complete. */
void pr__sched_wait(pr_sched_t *s, pr_request_t *r);

/* Cancellation, in two steps, so that a front end can hold the lock that
 * keeps r alive against its on_done across the first alone (on_done may
 * free r): pr__sched_unqueue takes r out of the queue if it still waits
 * there and returns whether it did (false: an instance has taken it, or
 * it is done; it runs to its end and is answered as usual); after a true,
 * r is the caller's, no instance will see it, and pr__sched_cancel
 * completes it with PR_ERR_CANCELLED (counted, on_done called) without
 * the scheduler's locks held. */
bool pr__sched_unqueue(pr_sched_t *s, pr_request_t *r);
void pr__sched_cancel(pr_sched_t *s, pr_request_t *r);

/* A front end's first step when r's client went away: pr__sched_unqueue,
 * and when an instance has taken r already, r is marked gone, so that an
 * instance still filling its batch (max_queue_delay) completes it
 * PR_ERR_CANCELLED without running it (counted, on_done called, as a
 * cancel); a batch that has begun runs r and answers it as usual. The
 * same lock as pr__sched_unqueue's keeps r alive across it. */
bool pr__sched_drop(pr_sched_t *s, pr_request_t *r);

/* The core of an instance of the active plan asleep for work (or for more
 * of its batch), the one on `cpu` (the caller's) when it is; -1 when every
 * instance is running.
 * Its thread is pinned there (runtime/worker.h): a thread that moves to it
 * before submitting wakes it, and is woken by its answer, on one core,
 * without the cross-core wake-ups that cost tens of microseconds under a
 * hypervisor (bench/wake_floor). */
int pr__sched_home_cpu(pr_sched_t *s, int cpu);
int pr__sched_queue_depth(pr_sched_t *s);

/* What the instances of the active plan measured (each run of its engine
 * session, timed by its own thread). */
typedef struct {
  double full_ms; /* moving average of the runs at the planned batch; 0: none yet */
  double any_ms;  /* moving average of every run (smaller batches run padded) */
  uint64_t runs, rows;
} pr_sched_instance_t;

/* A copy of the active plan into *plan and its instances' measurements (at
 * most max, in the plan's order) into out; returns how many. */
int pr__sched_instances(pr_sched_t *s, pr_plan_t *plan, pr_sched_instance_t *out, int max);
/* The model's recent history (per-second samples, reconfigurations); owned
 * by the scheduler, valid until pr__sched_destroy, thread-safe. */
pr_history_t *pr__sched_history(pr_sched_t *s);
const int *pr__sched_cpus(const pr_sched_t *s);
int pr__sched_num_cpus(const pr_sched_t *s);
pr_sched_stats_t *pr__sched_stats(pr_sched_t *s);
/* The shape buckets' dim (*dim, NULL when none) and representative sizes
 * (*sizes); returns how many (0: none). */
int pr__sched_buckets(pr_sched_t *s, const pr_sched_dim_t **dim, const long long **sizes);
/* The dynamic dims (pr_sched_config_t.dyn) into *dyn; returns how many. */
int pr__sched_dyn(pr_sched_t *s, const pr_sched_dim_t **dyn);
/* Copies of the shapes served (the first PR_SCHED_MAX_SHAPES distinct
 * ones; *others: requests of shapes beyond them) into out (at most max);
 * returns how many. */
int pr__sched_shapes(pr_sched_t *s, pr_sched_shape_t *out, int max, uint64_t *others);

#endif
