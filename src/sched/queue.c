/* The request queue: submit (in priority order, past admission),
 * cancel, wait and time out, the reaper that fails what waited past its
 * deadline, and putting a batch's tail back at the front. See scheduler.h
 * for the locking rules. */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/lock.h"
#include "base/log.h"
#include "base/util.h"
#include "packrat/planner.h"
#include "runtime/worker.h"
#include "sched/history.h"
#include "sched/internal.h"

/* Completes r, out of the queue and never run, with st (counted in *count). */
static void complete_unrun(pr_sched_t *s, pr_request_t *r, _Atomic uint64_t *count, pr_status_t st,
                           const char *msg) {
  atomic_fetch_add(count, 1);
  double now = pr__now();
  pr__history_done(s->history, now, now - r->t_enqueue, false);
  pr_sched__complete(r, st, msg);
}

void pr_sched__time_out(pr_sched_t *s, pr_request_t *r) {
  complete_unrun(s, r, &s->stats.timed_out, PR_ERR_TIMEOUT, "request timed out in the queue");
}

/* Unlinks r from the queue if it waits there (qlock held); whether it did. */
static bool unqueue_locked(pr_sched_t *s, pr_request_t *r) {
  assert(pr__lock_held(&s->qlock));
  for (pr_request_t **at = &s->head, *prev = NULL; *at; prev = *at, at = &(*at)->next) {
    if (*at != r) continue;
    *at = r->next;
    if (s->tail == r) s->tail = prev;
    pr_sched__unqueued(s, r);
    pr__history_queue(s->history, pr__now(), s->depth);
    return true;
  }
  return false;
}

bool pr__sched_unqueue(pr_sched_t *s, pr_request_t *r) {
  pr__lock(&s->qlock);
  bool queued = unqueue_locked(s, r);
  pr__unlock(&s->qlock);
  return queued;
}

bool pr__sched_drop(pr_sched_t *s, pr_request_t *r) {
  if (pr__sched_unqueue(s, r)) return true;
  atomic_store(&r->gone, true);
  return false;
}

void pr__sched_cancel(pr_sched_t *s, pr_request_t *r) {
  complete_unrun(s, r, &s->stats.cancelled, PR_ERR_CANCELLED,
                 "the client went away before the request ran");
}

void pr__sched_wait(pr_sched_t *s, pr_request_t *r) {
  if (r->deadline > 0 && !pr_sched__wait_until(r, r->deadline) && pr__sched_unqueue(s, r))
    pr_sched__time_out(s, r);
  pr__request_wait(r);
}

/* Puts reqs[0..n) back, in order, at the front of their priority levels
 * (qlock held): they were at the queue's head when taken. */
void pr_sched__requeue_front(pr_sched_t *s, pr_request_t **reqs, int n) {
  assert(pr__lock_held(&s->qlock));
  for (int i = n - 1; i >= 0; i--) {
    pr_request_t *r = reqs[i], **at = &s->head;
    while (*at && (*at)->priority < r->priority) at = &(*at)->next;
    r->next = *at;
    *at = r;
    if (!r->next) s->tail = r;
    s->depth++;
    s->level_rows[r->priority] += r->rows;
    /* the reaper may have looked while it was out of the queue */
    if (r->deadline > 0 && (s->reap_due == 0 || r->deadline < s->reap_due))
      pthread_cond_signal(&s->reap_cond);
  }
}

/* The earliest deadline in the queue (0: none). Deadlines differ per request
 * and the queue is in priority order, so the whole queue is looked at; it
 * is bounded by the queue capacity and looked at once a wake-up. */
static double earliest_deadline(pr_sched_t *s) {
  assert(pr__lock_held(&s->qlock));
  double due = 0;
  for (const pr_request_t *r = s->head; r; r = r->next)
    if (r->deadline > 0 && (due == 0 || r->deadline < due)) due = r->deadline;
  return due;
}

/* Unlinks every queued request past its deadline into a list (qlock held). */
static pr_request_t *take_expired(pr_sched_t *s, double now) {
  assert(pr__lock_held(&s->qlock));
  pr_request_t *expired = NULL, *prev = NULL;
  for (pr_request_t **at = &s->head; *at;) {
    pr_request_t *r = *at;
    if (r->deadline <= 0 || now < r->deadline) {
      prev = r;
      at = &r->next;
      continue;
    }
    *at = r->next;
    if (s->tail == r) s->tail = prev;
    pr_sched__unqueued(s, r);
    r->next = expired;
    expired = r;
  }
  assert(s->depth >= 0);
  return expired;
}

/* The reaper: sleeps until the earliest deadline in the queue (a submit with
 * an earlier one wakes it), then fails what has expired. */
void *pr_sched__reaper_main(void *arg) {
  pr_sched_t *s = arg;
  pr__lock(&s->qlock);
  while (!s->stop) {
    double due = earliest_deadline(s);
    s->reap_due = due;
    if (due == 0) {
      pr__lock_wait(&s->qlock, &s->reap_cond);
      continue;
    }
    if (pr__now() < due) {
      struct timespec ts;
      pr_sched__timespec_at(&ts, due);
      pr__lock_timedwait(&s->qlock, &s->reap_cond, &ts);
      continue;
    }
    pr_request_t *expired = take_expired(s, pr__now());
    if (expired) pr__history_queue(s->history, pr__now(), s->depth);
    pr__unlock(&s->qlock);
    for (pr_request_t *r = expired, *next; r; r = next) {
      next = r->next;
      pr_sched__time_out(s, r);
    }
    pr__lock(&s->qlock);
  }
  pr__unlock(&s->qlock);
  return NULL;
}

/* Links r in after every request of its level or a level before it (qlock
 * held): the common case, a level no later than the tail's, appends. */
static void enqueue_locked(pr_sched_t *s, pr_request_t *r) {
  assert(pr__lock_held(&s->qlock));
  r->next = NULL;
  if (!s->tail || s->tail->priority <= r->priority) {
    if (s->tail)
      s->tail->next = r;
    else
      s->head = r;
    s->tail = r;
    return;
  }
  pr_request_t **at = &s->head;
  while ((*at)->priority <= r->priority) at = &(*at)->next;
  assert(*at); /* the tail's level is later than r's */
  r->next = *at;
  *at = r;
}

pr_status_t pr__sched_submit(pr_sched_t *s, pr_request_t *r) {
  if (r->priority < 0 || r->priority > s->cfg.priority_levels) return PR_ERR_INVALID;
  if (r->priority == 0) r->priority = s->cfg.default_priority;
  r->t_enqueue = pr__now();
  double timeout = s->cfg.timeout_s;
  if (r->timeout_s > 0 && (timeout <= 0 || r->timeout_s < timeout)) timeout = r->timeout_s;
  r->deadline = timeout > 0 ? r->t_enqueue + timeout : 0;
  pr__lock(&s->qlock);
  pr_status_t st = pr_sched__admit_locked(s, r, timeout);
  if (st) {
    pr__unlock(&s->qlock);
    atomic_fetch_add(&s->stats.rejected, 1);
    pr__history_rejected(s->history, r->t_enqueue);
    return st;
  }
  enqueue_locked(s, r);
  s->depth++;
  s->level_rows[r->priority] += r->rows;
  if (r->deadline > 0 && (s->reap_due == 0 || r->deadline < s->reap_due))
    pthread_cond_signal(&s->reap_cond);
  atomic_fetch_add(&s->stats.arrivals, 1);
  if (s->cfg.n_buckets) atomic_fetch_add(&s->stats.bucket_arrivals[pr_sched__bucket_of(s, r)], 1);
  pr__history_arrival(s->history, r->t_enqueue, s->depth);
  pr_sched__wake(s, s->active);
  pr__unlock(&s->qlock);
  return PR_OK;
}
