/* What models.c and balance.c share: the registry's state and the steps of
 * dividing the cores. Not for any other file. */
#ifndef PR_SERVER_MODELS_INTERNAL_H
#define PR_SERVER_MODELS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/lock.h"
#include "server/models.h"

struct pr_models {
  pr_models_config_t cfg;
  char repository[4096];
  int cpus[4096], n_cpus;
  pr_rwlock_t lock;
  pr_lock_t admin;
  pr_served_t **models; /* max_models slots */
  int n_models;
  /* the balancer (balance.c): its thread, its stop flag and wake-up (under
   * bal_lock), and its state between windows (its thread's alone) */
  pthread_t balancer;
  bool balancing, bal_stop;
  pthread_mutex_t bal_lock;
  pthread_cond_t bal_cond;
  pr_balance_t bal;            /* its hysteresis (the planner's) */
  _Atomic uint64_t core_moves; /* re-divisions the balancer made */
};

/* The cores plans may use: the server's, at most one thread a core. */
int pr_models__cores(const pr_models_t *ms);
/* The models taking part in a division: the ready ones that follow the
 * load, and join (NULL: none; a ready copy of its version it replaces
 * stays out), into part with their joint-plan inputs in jm (batch: the one
 * each was last planned for). Returns how many. admin held. */
int pr_models__collect(pr_models_t *ms, pr_served_t *join, pr_served_t **part,
                       pr_joint_model_t *jm);
/* Writes each part[k]'s share and batch, and re-plans the ready ones whose
 * share moved (why: the reason logged with each switch). admin held. */
void pr_models__apply(pr_models_t *ms, pr_served_t **part, const pr_joint_model_t *jm,
                      const pr_joint_share_t *shares, int n, const pr_served_t *join,
                      const char *why);

/* The balancer: every window_s, each divided model's autoscaler target
 * batch is its expected batch; the joint plan for those batches replaces
 * the current division as pr_balance_step says (packrat/planner.h). */
void pr_models__balance_start(pr_models_t *ms, double window_s);
void pr_models__balance_stop(pr_models_t *ms);

#endif
