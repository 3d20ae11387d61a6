/* Admission: whether a request may join the queue (pr__sched_submit's
 * contract in scheduler.h). The queue's bound is its capacity, which
 * defaults to the server's connection limit, so that a connection's request
 * waits rather than being refused; what bounds the wait is the estimate
 * made here: the rows queued ahead of the request (its level and the ones
 * before; s->level_rows) at the live plan's rate (its instances' measured
 * passes). A request whose own timeout that estimate passes (with a
 * margin: PR_SCHED_ADMIT_SHARE) is refused at once, with a Retry-After of
 * the seconds it is over or half the estimate, whichever is longer,
 * instead of waiting only to time out.
 *
 * Runs under qlock (scheduler.h's locking rules); reads the active
 * config's workers' latency averages, atomics their threads write. */
#define _GNU_SOURCE
#include <assert.h>
#include <math.h>
#include <stdio.h>

#include "base/lock.h"
#include "sched/internal.h"

/* The active config's rows per second: each instance's batch over its
 * measured pass at that batch (pass_ms), else over its planned latency; 0
 * when an instance has neither. qlock held. */
static double service_rate_locked(pr_sched_t *s) {
  assert(pr__lock_held(&s->qlock));
  const config_t *cfg = &s->configs[s->active];
  double rate = 0;
  for (int k = 0; k < cfg->n_workers; k++) {
    worker_t *w = &cfg->workers[k];
    double ms = atomic_load(&w->pass_ms);
    if (ms <= 0 && k < cfg->plan.n_instances) ms = cfg->plan.instances[k].latency_ms;
    if (ms <= 0) return 0;
    rate += w->batch / (ms * 1e-3);
  }
  return rate;
}

double pr__sched_service_rate(pr_sched_t *s) {
  pr__lock(&s->qlock);
  double rate = service_rate_locked(s);
  pr__unlock(&s->qlock);
  return rate;
}

pr_status_t pr_sched__admit_locked(pr_sched_t *s, pr_request_t *r, double timeout) {
  assert(pr__lock_held(&s->qlock));
  double rate = service_rate_locked(s);
  /* the rows ahead must be taken before r is: its wait in the queue (the
   * batches running now are not counted: at most one batch more) */
  long long ahead = 0;
  for (int level = 1; level <= r->priority; level++) ahead += s->level_rows[level];
  double wait = rate > 0 ? (double)ahead / rate : 0;
  atomic_store(&s->stats.admit_wait_us, (uint64_t)(wait * 1e6));
  if (s->stop) {
    snprintf(r->err, sizeof r->err, "the model is unloading");
    r->retry_after_s = 1;
    return PR_ERR_BUSY;
  }
  if (s->depth >= s->cfg.queue_capacity) {
    /* a retry may get in once about half the queue is served */
    r->retry_after_s = rate > 0 ? 0.5 * wait : 1;
    snprintf(r->err, sizeof r->err,
             "the model's queue is full (%d requests: queue_capacity); retry later", s->depth);
    atomic_fetch_add(&s->stats.rejected_full, 1);
    return PR_ERR_BUSY;
  }
  if (timeout > 0 && wait > PR_SCHED_ADMIT_SHARE * timeout) {
    /* the seconds over are how long the rows ahead take to shrink enough
     * if nothing else comes; under a sustained overload others keep the
     * queue full, and a client sent back after a second or two is refused
     * again, its body read each time (1000 closed-loop connections on
     * ResNet-50: 340 refusals a second cost 5% of the capacity): at least
     * until about half the queue is served, as when it is full */
    r->retry_after_s = fmax(wait - PR_SCHED_ADMIT_SHARE * timeout, 0.5 * wait);
    snprintf(r->err, sizeof r->err,
             "the model's queue holds about %.3g s of work (%lld rows ahead at %.1f rows/s), "
             "more than this request's timeout of %.3g s; retry in %.0f s",
             wait, ahead, rate, timeout, ceil(r->retry_after_s));
    atomic_fetch_add(&s->stats.rejected_late, 1);
    return PR_ERR_BUSY;
  }
  return PR_OK;
}
