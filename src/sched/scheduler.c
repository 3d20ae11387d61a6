/* A scheduler's life: create (checks, the first plans, the reaper),
 * destroy, and what it tells of itself (cores, stats, instances). See
 * scheduler.h for the locking rules; internal.h for how the scheduler's
 * files share its state, in one order: request.c, admit.c, shapes.c,
 * queue.c, worker.c, plans.c, autoscale.c, scheduler.c, each calling only
 * those before it. */
#define _GNU_SOURCE
#include "sched/scheduler.h"
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

/* The shape buckets of cfg and each plan's bucket. */
static pr_status_t check_buckets(const pr_sched_config_t *cfg, const int *buckets, int n_plans,
                                 char *err, size_t err_len) {
  if (cfg->n_buckets < 0 || cfg->n_buckets > PR_BUCKETS_MAX ||
      (cfg->n_buckets && (cfg->bucket_dim < 0 || cfg->bucket_dim >= cfg->n_dyn))) {
    pr__errf(err, err_len, "%d shape buckets of dynamic dim %d", cfg->n_buckets, cfg->bucket_dim);
    return PR_ERR_INVALID;
  }
  for (int k = 0; k < cfg->n_buckets; k++)
    if (cfg->bucket_sizes[k] < 1 || (k && cfg->bucket_sizes[k] <= cfg->bucket_sizes[k - 1])) {
      pr__errf(err, err_len, "shape bucket sizes must be positive and ascending");
      return PR_ERR_INVALID;
    }
  for (int i = 0; buckets && i < n_plans; i++)
    if (buckets[i] < -1 || buckets[i] >= cfg->n_buckets) {
      pr__errf(err, err_len, "plan %d: no shape bucket %d", i, buckets[i]);
      return PR_ERR_INVALID;
    }
  return PR_OK;
}

static pr_status_t check_create(pr_model_t *model, int n_plans, int *max_plans,
                                const pr_sched_config_t *cfg, char *err, size_t err_len) {
  int n_in = pr_engine_model_num_inputs(model), n_out = pr_engine_model_num_outputs(model);
  if (n_in > PR_SCHED_MAX_IO || n_out > PR_SCHED_MAX_IO || n_in < 1) {
    pr__errf(err, err_len, "models with 1 to %d inputs and outputs are served", PR_SCHED_MAX_IO);
    return PR_ERR_UNSUPPORTED;
  }
  *max_plans = cfg->max_plans > 0 ? cfg->max_plans : PR_SCHED_MAX_CONFIGS - 1;
  if (*max_plans < 2 || *max_plans >= PR_SCHED_MAX_CONFIGS) {
    pr__errf(err, err_len, "max prepared plans must be 2..%d", PR_SCHED_MAX_CONFIGS - 1);
    return PR_ERR_INVALID;
  }
  for (int j = 0; j < cfg->n_dyn && j < PR_SCHED_MAX_DYN; j++)
    if (cfg->dyn[j].input < 0 || cfg->dyn[j].input >= n_in || cfg->dyn[j].axis < 1 ||
        cfg->dyn[j].axis >= PR_MAX_RANK) {
      pr__errf(err, err_len, "dynamic dim %d: no input %d axis %d", j, cfg->dyn[j].input,
               cfg->dyn[j].axis);
      return PR_ERR_INVALID;
    }
  for (int k = 0; k < PR_SCHED_MAX_IO; k++)
    for (int d = 0; d < PR_MAX_RANK; d++)
      if (cfg->dyn_of[k][d] > cfg->n_dyn || (cfg->dyn_of[k][d] && (k >= n_in || d == 0))) {
        pr__errf(err, err_len, "input %d axis %d: no dynamic dim %d", k, d, cfg->dyn_of[k][d]);
        return PR_ERR_INVALID;
      }
  if (n_plans < 1 || n_plans > *max_plans) {
    pr__errf(err, err_len, "%d plans to prepare, between 1 and the limit of %d expected", n_plans,
             *max_plans);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

/* Copies the session options (and the named dims they point to, which are
 * the caller's) into s. */
static void keep_base(pr_sched_t *s, const pr_session_options_t *base) {
  s->base = base ? *base : pr_session_options_default();
  s->base.n_dims = s->base.n_dims < 8 ? s->base.n_dims : 8;
  for (int i = 0; i < s->base.n_dims; i++) {
    snprintf(s->dim_names[i], sizeof s->dim_names[i], "%s", base->dim_names[i]);
    s->dim_name_ptrs[i] = s->dim_names[i];
    s->dim_values[i] = base->dim_values[i];
  }
  s->base.dim_names = s->dim_name_ptrs;
  s->base.dim_values = s->dim_values;
}

/* Input shapes at batch 1 tell every dim but the batch: they become the
 * shapes every instance's sessions are compiled for (axis 0 replaced). */
static pr_status_t probe_inputs(pr_sched_t *s, char *err, size_t err_len) {
  pr_session_options_t probe = s->base;
  probe.batch = 1;
  pr_session_t *ps;
  pr_status_t st = pr_engine_session_create(s->model, &probe, &ps, err, err_len);
  if (st) return st;
  for (int i = 0; i < s->n_in; i++) {
    pr_engine_session_input(ps, i, &s->in_info[i]);
    if (s->in_info[i].rank < 1) st = PR_ERR_UNSUPPORTED;
  }
  pr_engine_session_destroy(ps);
  if (st) {
    pr__errf(err, err_len, "every input needs a batch axis");
    return st;
  }
  s->base.input_shapes = s->in_info;
  return PR_OK;
}

const char *const pr__stage_names[PR_STAGE_COUNT] = {
#define PR_STAGE_NAME(name) #name,
    PR_STAGES(PR_STAGE_NAME)
#undef PR_STAGE_NAME
};

static void init_stats(pr_sched_stats_t *st) {
  for (int k = 0; k < PR_STAGE_COUNT; k++)
    pr__hist_init(&st->stage[k], pr__stage_bounds, pr__stage_n_bounds);
  pr__hist_init(&st->overhead_s, pr__stage_bounds, pr__stage_n_bounds);
  pr__hist_init(&st->request_s, pr__latency_bounds, pr__latency_n_bounds);
  pr__hist_init(&st->queue_s, pr__latency_bounds, pr__latency_n_bounds);
  pr__hist_init(&st->compute_s, pr__latency_bounds, pr__latency_n_bounds);
  pr__hist_init(&st->batch, pr__batch_bounds, pr__batch_n_bounds);
  pr__hist_init(&st->switch_s, pr__latency_bounds, pr__latency_n_bounds);
  pr__hist_init(&st->compile_s, pr__latency_bounds, pr__latency_n_bounds);
}

pr_status_t pr__sched_create(pr_model_t *model, const pr_plan_t *plans, const int *buckets,
                             int n_plans, int active, const int *cpus, int n_cpus,
                             const pr_session_options_t *base, const pr_sched_config_t *cfg,
                             pr_sched_t **out, char *err, size_t err_len) {
  *out = NULL;
  int max_plans;
  pr_status_t st = check_create(model, n_plans, &max_plans, cfg, err, err_len);
  if (!st) st = check_buckets(cfg, buckets, n_plans, err, err_len);
  if (st) return st;
  pr_sched_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->model = model;
  s->cfg = *cfg;
  s->cfg.max_plans = max_plans;
  s->cfg.n_dyn = cfg->n_dyn < 0 ? 0 : cfg->n_dyn < PR_SCHED_MAX_DYN ? cfg->n_dyn : PR_SCHED_MAX_DYN;
  s->cfg.n_ahead = cfg->n_ahead < 0                    ? 0
                   : cfg->n_ahead < PR_SCHED_MAX_AHEAD ? cfg->n_ahead
                                                       : PR_SCHED_MAX_AHEAD;
  if (s->cfg.cache_sessions < 1) s->cfg.cache_sessions = 8;
  if (s->cfg.cache_bytes < 1) s->cfg.cache_bytes = (size_t)1 << 30;
  if (s->cfg.priority_levels < 1) s->cfg.priority_levels = 1; /* one FIFO */
  if (s->cfg.default_priority < 1 || s->cfg.default_priority > s->cfg.priority_levels)
    s->cfg.default_priority = (s->cfg.priority_levels + 1) / 2;
  keep_base(s, base);
  s->n_in = pr_engine_model_num_inputs(model);
  s->n_out = pr_engine_model_num_outputs(model);
  s->n_cpus = n_cpus < 4096 ? n_cpus : 4096;
  memcpy(s->cpus, cpus, sizeof(int) * (size_t)s->n_cpus);
  pr__lock_init(&s->admin);
  pr__lock_init(&s->qlock);
  pr_sched__cond_init_monotonic(&s->qcond);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) pr_sched__cond_init_monotonic(&s->work[c]);
  pr_sched__cond_init_monotonic(&s->reap_cond);
  s->active = -1;
  init_stats(&s->stats);
  s->stats.max_batch = cfg->max_batch > 0 ? cfg->max_batch : 1;
  if (!(s->stats.by_batch = calloc((size_t)s->stats.max_batch + 1, sizeof *s->stats.by_batch))) {
    pr__sched_destroy(s);
    return PR_ERR_NOMEM;
  }
  s->level_rows = calloc((size_t)s->cfg.priority_levels + 1, sizeof *s->level_rows);
  if (!s->level_rows || !(s->history = pr__history_create(pr__now()))) {
    pr__sched_destroy(s);
    return PR_ERR_NOMEM;
  }
  if ((st = probe_inputs(s, err, err_len))) {
    pr__sched_destroy(s);
    return st;
  }
  int first = -1;
  for (int i = 0; i < n_plans; i++) {
    pr__lock(&s->admin);
    int idx = pr_sched__add_plan_locked(s, &plans[i], buckets ? buckets[i] : -1, err, err_len);
    pr__unlock(&s->admin);
    if (idx < 0) {
      pr__sched_destroy(s);
      return PR_ERR_INVALID;
    }
    if (i == active || first < 0) first = idx;
  }
  pr__lock(&s->qlock);
  s->active = first;
  char spec[PR_HISTORY_PLAN_LEN];
  pr_plan_format(&s->configs[first].plan, spec, sizeof spec);
  pr__unlock(&s->qlock);
  pr__history_switch(s->history, pr__now(), NULL, spec, "first plan, at load", 0);
  /* always: a request may carry its own timeout */
  if (pthread_create(&s->reaper, NULL, pr_sched__reaper_main, s) != 0) {
    pr__errf(err, err_len, "cannot start the scheduler's timeout thread");
    pr__sched_destroy(s);
    return PR_ERR_NOMEM;
  }
  s->reaper_running = true;
  *out = s;
  return PR_OK;
}

void pr__sched_destroy(pr_sched_t *s) {
  if (!s) return;
  pr__lock(&s->admin);
  pr_sched__set_auto_locked(s, false, 0, 0);
  pr__lock(&s->qlock);
  s->stop = true;
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) pr_sched__wake(s, c);
  pthread_cond_broadcast(&s->reap_cond);
  pr__unlock(&s->qlock);
  if (s->reaper_running) pthread_join(s->reaper, NULL);
  /* the active config drains the queue, the others leave at once */
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
    for (int k = 0; k < s->configs[c].n_workers; k++) pr__worker_join(&s->configs[c].workers[k].w);
  /* instances that failed to start leave requests behind: fail them */
  for (pr_request_t *r = s->head, *next; r; r = next) {
    next = r->next;
    pr_sched__complete(r, PR_ERR_BUSY, "model unloaded");
  }
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) free(s->configs[c].workers);
  pr__unlock(&s->admin);
  pr__lock_destroy(&s->admin);
  pr__lock_destroy(&s->qlock);
  pthread_cond_destroy(&s->qcond);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) pthread_cond_destroy(&s->work[c]);
  pthread_cond_destroy(&s->reap_cond);
  pr__history_destroy(s->history);
  free(s->stats.by_batch);
  free(s->level_rows);
  free(s);
}

int pr__sched_home_cpu(pr_sched_t *s, int cpu) {
  pr__lock(&s->qlock);
  const config_t *cfg = &s->configs[s->active];
  int home = -1;
  for (int k = 0; k < cfg->n_workers; k++) {
    if (!cfg->workers[k].idle) continue;
    home = cfg->workers[k].w.cpus[0];
    if (home == cpu) break; /* the caller's own */
  }
  pr__unlock(&s->qlock);
  return home;
}

int pr__sched_queue_depth(pr_sched_t *s) {
  pr__lock(&s->qlock);
  int d = s->depth;
  pr__unlock(&s->qlock);
  return d;
}

const int *pr__sched_cpus(const pr_sched_t *s) {
  return s->cpus;
}

int pr__sched_num_cpus(const pr_sched_t *s) {
  return s->n_cpus;
}

pr_sched_stats_t *pr__sched_stats(pr_sched_t *s) {
  return &s->stats;
}

pr_history_t *pr__sched_history(pr_sched_t *s) {
  return s->history;
}

int pr__sched_instances(pr_sched_t *s, pr_plan_t *plan, pr_sched_instance_t *out, int max) {
  pr__lock(&s->qlock);
  assert(s->active >= 0 && s->active < PR_SCHED_MAX_CONFIGS); /* set before s is returned */
  const config_t *cfg = &s->configs[s->active];
  *plan = cfg->plan;
  int n = cfg->n_workers < max ? cfg->n_workers : max;
  for (int k = 0; k < n; k++) {
    worker_t *w = &cfg->workers[k];
    out[k].runs = atomic_load(&w->runs); /* before rows (measured) */
    out[k].rows = atomic_load(&w->rows);
    out[k].full_ms = atomic_load(&w->full_ms);
    out[k].any_ms = atomic_load(&w->any_ms);
  }
  pr__unlock(&s->qlock);
  return n;
}
