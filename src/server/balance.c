/* The balancer: moves cores between the divided models as their loads move.
 *
 * Every window it reads each divided model's expected batch (its
 * autoscaler's target; a model without one keeps the batch it was planned
 * for), asks the joint optimizer for the division those batches want, and
 * scores the current division at the same batches. It moves only when the
 * new division lowers the worst slowdown, or at an equal worst the sum, by
 * PR_BALANCE_GAIN, in PR_BALANCE_WINDOWS windows in a row, and at most once
 * every PR_BALANCE_MIN_S: a target batch that flickers between two values
 * moves nothing. A move is a re-division (models.c): every model whose share
 * moved switches to plans on its new share with no pause. Threads: its own
 * thread; admin for each window (loads and unloads wait for it, and it for
 * them); bal_lock only for the stop flag and the wake-up. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/util.h"
#include "server/models_internal.h"

/* One window: a move when the loads have wanted another division long
 * enough. admin held. */
static void balance_step(pr_models_t *ms) {
  pr_served_t *part[PR_JOINT_MAX_MODELS];
  pr_joint_model_t jm[PR_JOINT_MAX_MODELS];
  int n = pr_models__collect(ms, NULL, part, jm), T = pr_models__cores(ms);
  int cur[PR_JOINT_MAX_MODELS];
  bool all_divided = n >= 2;
  char loads[512] = "";
  for (int k = 0; k < n; k++) {
    pr_served_t *x = part[k];
    all_divided &= x->divided;
    cur[k] = x->share.cores;
    uint64_t target = atomic_load(&pr__sched_stats(x->sched)->auto_target);
    if (pr__sched_auto(x->sched) && target >= 1 && target <= (uint64_t)x->cfg.max_batch)
      jm[k].batch = (int)target;
    size_t off = strlen(loads);
    snprintf(loads + off, sizeof loads - off, "%s%s v%s batch %d", k ? ", " : "", x->entry.name,
             x->entry.version, jm[k].batch);
  }
  if (!all_divided) { /* one model, or one sharing: a load or unload re-divides */
    ms->bal.streak = 0;
    return;
  }
  pr_joint_share_t shares[PR_JOINT_MAX_MODELS];
  char err[512];
  double worst, sum, new_worst = 0, new_sum = 0;
  if (pr_plan_joint(jm, n, T, shares, err, sizeof err) ||
      pr_plan_joint_score(jm, n, T, cur, &worst, &sum)) {
    ms->bal.streak = 0;
    return;
  }
  bool same = true;
  for (int k = 0; k < n; k++) {
    same &= shares[k].cores == cur[k];
    new_worst = fmax(new_worst, shares[k].score);
    new_sum += shares[k].score;
  }
  if (!pr_balance_step(&ms->bal, pr__now(), same, worst, sum, new_worst, new_sum)) return;
  char why[900];
  snprintf(why, sizeof why,
           "cores re-divided: the loads moved (%s); worst slowdown %.2fx -> %.2fx, sum %.2f -> "
           "%.2f",
           loads, worst, new_worst, sum, new_sum);
  pr__log(PR_LOG_INFO, "%s", why);
  pr_models__apply(ms, part, jm, shares, n, NULL, why);
  atomic_fetch_add(&ms->core_moves, 1);
}

typedef struct {
  pr_models_t *ms;
  double window_s;
} balance_arg_t;

static void *balance_main(void *arg) {
  balance_arg_t a = *(balance_arg_t *)arg;
  free(arg);
  pr_models_t *ms = a.ms;
  pthread_mutex_lock(&ms->bal_lock);
  while (!ms->bal_stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double at = ts.tv_sec + ts.tv_nsec * 1e-9 + a.window_s;
    ts.tv_sec = (time_t)at;
    ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&ms->bal_cond, &ms->bal_lock, &ts);
    if (ms->bal_stop) break;
    pthread_mutex_unlock(&ms->bal_lock);
    pr__lock(&ms->admin);
    balance_step(ms);
    pr__unlock(&ms->admin);
    pthread_mutex_lock(&ms->bal_lock);
  }
  pthread_mutex_unlock(&ms->bal_lock);
  return NULL;
}

void pr_models__balance_start(pr_models_t *ms, double window_s) {
  pthread_mutex_init(&ms->bal_lock, NULL);
  pthread_cond_init(&ms->bal_cond, NULL);
  ms->bal_stop = false;
  ms->bal = (pr_balance_t){.last_move = pr__now()};
  balance_arg_t *a = malloc(sizeof *a);
  if (window_s <= 0 || !a) {
    free(a);
    return;
  }
  *a = (balance_arg_t){ms, window_s};
  if (pthread_create(&ms->balancer, NULL, balance_main, a)) {
    free(a);
    pr__log(PR_LOG_ERROR, "cannot start the balancer thread: cores move on loads and unloads only");
    return;
  }
  ms->balancing = true;
}

void pr_models__balance_stop(pr_models_t *ms) {
  if (ms->balancing) {
    pthread_mutex_lock(&ms->bal_lock);
    ms->bal_stop = true;
    pthread_cond_signal(&ms->bal_cond);
    pthread_mutex_unlock(&ms->bal_lock);
    pthread_join(ms->balancer, NULL);
    ms->balancing = false;
  }
  pthread_mutex_destroy(&ms->bal_lock);
  pthread_cond_destroy(&ms->bal_cond);
}
