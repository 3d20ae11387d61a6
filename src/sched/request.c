/* Requests: made, freed, completed, waited for; and the monotonic clock
 * the scheduler's condition variables wait on. The bottom of the
 * scheduler's files (internal.h). */
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

void pr_sched__timespec_at(struct timespec *ts, double t_mono) {
  /* condition variables here use CLOCK_MONOTONIC */
  ts->tv_sec = (time_t)t_mono;
  ts->tv_nsec = (long)((t_mono - (double)ts->tv_sec) * 1e9);
}

void pr_sched__cond_init_monotonic(pthread_cond_t *c) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(c, &ca);
  pthread_condattr_destroy(&ca);
}

pr_request_t *pr__request_new(void) {
  pr_request_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  pthread_mutex_init(&r->lock, NULL);
  pr_sched__cond_init_monotonic(&r->cond);
  return r;
}

void pr__request_free(pr_request_t *r) {
  if (!r) return;
  for (int i = 0; i < PR_SCHED_MAX_IO; i++) {
    if (!(r->borrowed & 1u << i)) pr__free(r->inputs[i].data);
    pr__free(r->outputs[i].data);
  }
  pthread_mutex_destroy(&r->lock);
  pthread_cond_destroy(&r->cond);
  free(r);
}

void pr_sched__complete(pr_request_t *r, pr_status_t st, const char *msg) {
  pthread_mutex_lock(&r->lock);
  r->status = st;
  if (msg) snprintf(r->err, sizeof r->err, "%s", msg);
  r->t_end = pr__now();
  r->done = true;
  void (*cb)(void *) = r->on_done;
  void *ctx = r->on_done_ctx;
  pthread_cond_signal(&r->cond);
  pthread_mutex_unlock(&r->lock);
  /* r may be freed as soon as the callback runs (or a waiter wakes) */
  if (cb) cb(ctx);
}

void pr__request_wait(pr_request_t *r) {
  pthread_mutex_lock(&r->lock);
  while (!r->done) pthread_cond_wait(&r->cond, &r->lock);
  pthread_mutex_unlock(&r->lock);
}

/* Waits until r is done or the monotonic time `until`; returns done. */
bool pr_sched__wait_until(pr_request_t *r, double until) {
  struct timespec ts;
  pr_sched__timespec_at(&ts, until);
  pthread_mutex_lock(&r->lock);
  while (!r->done && pthread_cond_timedwait(&r->cond, &r->lock, &ts) != ETIMEDOUT) {
  }
  bool done = r->done;
  pthread_mutex_unlock(&r->lock);
  return done;
}
