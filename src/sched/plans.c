/* Prepared configs (one instance set per plan): adding, evicting and
 * retiring them, switching the active one, pinning a plan by hand. See
 * scheduler.h for the locking rules. */
#define _GNU_SOURCE
#include <assert.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/lock.h"
#include "base/log.h"
#include "base/util.h"
#include "sched/internal.h"

/* Retires config c: its workers leave (after the batch they hold), are
 * joined, and their sessions freed; the slot becomes free. admin held, and c
 * is not active (the caller made it unswitchable under qlock: ok false). */
static void retire_config(pr_sched_t *s, int c) {
  assert(pr__lock_held(&s->admin) && c >= 0 && c < PR_SCHED_MAX_CONFIGS);
  config_t *cfg = &s->configs[c];
  pr__lock(&s->qlock);
  assert(s->active != c);
  cfg->retire = true;
  cfg->ok = false;
  pr_sched__wake(s, c);
  pr__unlock(&s->qlock);
  for (int k = 0; k < cfg->n_workers; k++) pr__worker_join(&cfg->workers[k].w);
  free(cfg->workers);
  pr__lock(&s->qlock);
  memset(cfg, 0, sizeof *cfg);
  pr__unlock(&s->qlock);
  /* the sessions' arenas were large: give the freed pages back, so that
   * plans coming and going do not grow the resident size */
  malloc_trim(0);
}

static bool same_plan(const pr_plan_t *p, const pr_plan_t *q) {
  bool same = pr_plan_same_instances(p, q);
  for (int k = 0; same && k < p->n_instances; k++)
    same = p->instances[k].batch == q->instances[k].batch;
  return same;
}

/* Makes the least recently used hand-pinned config (not active, not keep)
 * unswitchable and retires it; false when there is none. admin held. */
static bool evict_one(pr_sched_t *s, int keep) {
  int lru = -1;
  pr__lock(&s->qlock);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) {
    config_t *cfg = &s->configs[c];
    if (!cfg->ok || cfg->planned || c == s->active || c == keep) continue;
    if (lru < 0 || cfg->last_used < s->configs[lru].last_used) lru = c;
  }
  if (lru >= 0) s->configs[lru].ok = false; /* no switch to it from here on */
  pr__unlock(&s->qlock);
  if (lru < 0) return false;
  char a[256];
  pr_plan_format(&s->configs[lru].plan, a, sizeof a);
  pr__log(PR_LOG_INFO, "%sevicting prepared plan %s (least recently used; %d plans at most)",
          s->cfg.who, a, s->cfg.max_plans);
  retire_config(s, lru);
  atomic_fetch_add(&s->stats.plans_evicted, 1);
  return true;
}

/* The prepared config with plan's instances at bucket's shape, or -1;
 * free_slot receives the first free slot (-1 when none). qlock held. */
static int find_config(pr_sched_t *s, const pr_plan_t *plan, int bucket, int *free_slot) {
  assert(pr__lock_held(&s->qlock));
  *free_slot = -1;
  int used = 0;
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) {
    config_t *cfg = &s->configs[c];
    if (!cfg->used) {
      if (*free_slot < 0) *free_slot = c;
      continue;
    }
    used++;
    if (cfg->ok && cfg->bucket == bucket && same_plan(&cfg->plan, plan)) return c;
  }
  assert(*free_slot >= 0 && used <= s->cfg.max_plans);
  return -1;
}

static bool plan_fits(const pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len) {
  int need = 0;
  for (int k = 0; k < plan->n_instances; k++) {
    const pr_plan_instance_t *pi = &plan->instances[k];
    if (pi->threads > PR_WORKER_MAX_THREADS) {
      pr__errf(err, err_len, "an instance has %d threads, at most %d", pi->threads,
               PR_WORKER_MAX_THREADS);
      return false;
    }
    if (pi->first_core + pi->threads > need) need = pi->first_core + pi->threads;
  }
  if (need > s->n_cpus || plan->n_instances < 1) {
    pr__errf(err, err_len, "plan needs %d cores, %d available", need, s->n_cpus);
    return false;
  }
  return true;
}

/* The shape config cfg's sessions are prepared at: the scheduler's, with
 * the bucket dim's axes at its bucket's size. */
static void bucket_shape(const pr_sched_t *s, config_t *cfg) {
  memcpy(cfg->in_info, s->in_info, sizeof cfg->in_info);
  cfg->base = s->base;
  cfg->base.input_shapes = cfg->in_info;
  if (cfg->bucket < 0) return;
  assert(cfg->bucket < s->cfg.n_buckets && s->cfg.bucket_dim < s->cfg.n_dyn);
  for (int k = 0; k < s->n_in; k++)
    for (int d = 1; d < cfg->in_info[k].rank; d++)
      if (s->cfg.dyn_of[k][d] == s->cfg.bucket_dim + 1)
        cfg->in_info[k].dims[d] = s->cfg.bucket_sizes[cfg->bucket];
}

/* Starts the workers of config idx (its slot claimed) and waits until each
 * prepared its sessions; false with err when one could not. admin held. */
static bool start_config(pr_sched_t *s, int idx, char *err, size_t err_len) {
  assert(pr__lock_held(&s->admin));
  config_t *cfg = &s->configs[idx];
  const pr_plan_t *plan = &cfg->plan;
  pr__lock(&s->qlock);
  int started_before = s->started;
  pr__unlock(&s->qlock);
  pr_status_t st = PR_OK;
  for (int k = 0; k < plan->n_instances && !st; k++) {
    worker_t *w = &cfg->workers[k];
    const pr_plan_instance_t *pi = &plan->instances[k];
    w->s = s;
    w->config = idx;
    w->batch = pi->batch;
    st = pr__worker_init(&w->w, k, s->model, s->cpus + pi->first_core, pi->threads, &cfg->base, err,
                         err_len);
    if (!st && (st = pr__worker_start(&w->w, pr_sched__worker_main, w)))
      pr__errf(err, err_len, "cannot start an instance thread");
    if (!st) cfg->n_workers++;
  }
  pr__lock(&s->qlock);
  while (s->started < started_before + cfg->n_workers) pr__lock_wait(&s->qlock, &s->qcond);
  pr__unlock(&s->qlock);
  for (int k = 0; k < cfg->n_workers && !st; k++)
    if ((st = cfg->workers[k].w.status))
      pr__errf(err, err_len, "instance %d: %s", k, cfg->workers[k].w.err);
  return !st;
}

/* add_plan with admin held. The new plan starts in a free slot first (one is
 * always free: at most max_plans < PR_SCHED_MAX_CONFIGS are kept), so a plan
 * that fails to start changes nothing; only once it runs is the least
 * recently used hand-pinned plan evicted when over the bound. Planned configs
 * (the autoscaler's) are never evicted. Every session the plan's instances
 * will run is compiled here, before the config can be switched to. */
int pr_sched__add_plan_locked(pr_sched_t *s, const pr_plan_t *plan, int bucket, char *err,
                              size_t err_len) {
  assert(pr__lock_held(&s->admin) && bucket >= -1 && bucket < s->cfg.n_buckets);
  if (!plan_fits(s, plan, err, err_len)) return -1;
  int idx;
  pr__lock(&s->qlock);
  int have = find_config(s, plan, bucket, &idx);
  if (have >= 0) s->configs[have].last_used = pr__now();
  pr__unlock(&s->qlock);
  if (have >= 0) return have;
  worker_t *ws = calloc((size_t)plan->n_instances, sizeof *ws);
  if (!ws) {
    pr__errf(err, err_len, "out of memory");
    return -1;
  }
  config_t *cfg = &s->configs[idx];
  pr__lock(&s->qlock);
  cfg->plan = *plan;
  cfg->workers = ws;
  cfg->n_workers = 0;
  cfg->used = true; /* workers check `active`, which is never idx yet */
  cfg->planned = plan->latency_ms > 0;
  cfg->last_used = pr__now();
  cfg->bucket = bucket;
  bucket_shape(s, cfg);
  pr__unlock(&s->qlock);
  if (!start_config(s, idx, err, err_len)) {
    retire_config(s, idx);
    return -1;
  }
  pr__lock(&s->qlock);
  cfg->ok = true;
  pr__unlock(&s->qlock);
  return idx;
}

/* Evicts least recently used hand-pinned configs (never the active one, nor
 * keep) until at most max_plans are kept; false when that is not possible.
 * admin held. */
static bool trim_locked(pr_sched_t *s, int keep) {
  for (;;) {
    int used = 0;
    pr__lock(&s->qlock);
    for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) used += s->configs[c].used;
    pr__unlock(&s->qlock);
    if (used <= s->cfg.max_plans) return true;
    if (!evict_one(s, keep)) return false;
  }
}

/* Undoes add_plan_locked of a config that never became active. */
static void drop_new(pr_sched_t *s, int idx, char *err, size_t err_len) {
  pr__lock(&s->qlock);
  s->configs[idx].ok = false;
  pr__unlock(&s->qlock);
  retire_config(s, idx);
  pr__errf(err, err_len,
           "%d plans are prepared, the most kept (--max-prepared-plans), and none can be evicted "
           "(the autoscaler's plans and the active one stay)",
           s->cfg.max_plans);
}

int pr__sched_add_plan(pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len) {
  pr__lock(&s->admin);
  int idx = pr_sched__add_plan_locked(s, plan, -1, err, err_len);
  if (idx >= 0 && idx != pr__sched_active(s) && !trim_locked(s, idx)) {
    drop_new(s, idx, err, err_len);
    idx = -1;
  }
  pr__unlock(&s->admin);
  return idx;
}

int pr__sched_snapshot(pr_sched_t *s, pr_plan_t *plans, long long *sizes, int max, int *active) {
  int n = 0;
  *active = -1;
  pr__lock(&s->qlock);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS && n < max; c++) {
    const config_t *cfg = &s->configs[c];
    if (!cfg->ok) continue;
    if (c == s->active) *active = n;
    if (sizes) sizes[n] = cfg->bucket >= 0 ? s->cfg.bucket_sizes[cfg->bucket] : 0;
    plans[n++] = cfg->plan;
  }
  pr__unlock(&s->qlock);
  return n;
}

void pr__sched_current_plan(pr_sched_t *s, pr_plan_t *out) {
  pr__lock(&s->qlock);
  *out = s->configs[s->active].plan;
  pr__unlock(&s->qlock);
}

int pr__sched_active(pr_sched_t *s) {
  pr__lock(&s->qlock);
  int a = s->active;
  pr__unlock(&s->qlock);
  return a;
}

int pr__sched_num_configs(pr_sched_t *s) {
  int n = 0;
  pr__lock(&s->qlock);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) n += s->configs[c].ok;
  pr__unlock(&s->qlock);
  return n;
}

pr_status_t pr__sched_switch(pr_sched_t *s, int index, const char *why) {
  double t0 = pr__now();
  pr__lock(&s->qlock);
  if (index < 0 || index >= PR_SCHED_MAX_CONFIGS || !s->configs[index].ok) {
    pr__unlock(&s->qlock);
    return PR_ERR_INVALID;
  }
  int old = s->active;
  s->active = index;
  s->configs[index].last_used = t0;
  pr_sched__wake(s, index);
  pr_sched__wake(s, old); /* a batch being filled there is closed */
  char a[256] = "", b[256] = "";
  if (old != index) {
    pr_plan_format(&s->configs[old].plan, a, sizeof a);
    pr_plan_format(&s->configs[index].plan, b, sizeof b);
  }
  pr__unlock(&s->qlock);
  double dt = pr__now() - t0;
  if (old != index) {
    atomic_fetch_add(&s->stats.reconfigurations, 1);
    pr__hist_observe(&s->stats.switch_s, dt);
    pr__history_switch(s->history, t0, a, b, why, dt * 1e3);
    pr__log(PR_LOG_INFO, "%sreconfigured %s -> %s (%s) in %.3f ms", s->cfg.who, a, b,
            why ? why : "", dt * 1e3);
  }
  return PR_OK;
}

pr_status_t pr_sched__pin_locked(pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len) {
  assert(pr__lock_held(&s->admin));
  int old = pr__sched_active(s);
  int idx = pr_sched__add_plan_locked(s, plan, -1, err, err_len);
  pr_status_t st =
      idx >= 0 ? pr__sched_switch(s, idx, "plan set by hand (POST .../plan)") : PR_ERR_INVALID;
  /* over the bound: the least recently used pinned plan goes (the one just
   * left included); when none can, the pin is undone */
  if (!st && !trim_locked(s, idx)) {
    /* trim fails only with nothing to evict, so `old` is still prepared */
    if (pr__sched_switch(s, old, "pin undone: no prepared plan could make room") == PR_OK)
      drop_new(s, idx, err, err_len);
    st = PR_ERR_BUSY;
  }
  return st;
}

/* Whether config c (planned) is among plans[0..n) at its bucket. */
static int in_set(const config_t *cfg, const pr_plan_t *plans, const int *buckets, int n) {
  for (int i = 0; i < n; i++)
    if (cfg->bucket == (buckets ? buckets[i] : -1) && same_plan(&cfg->plan, &plans[i])) return i;
  return -1;
}

pr_status_t pr_sched__replan_check(pr_sched_t *s, const pr_plan_t *plans, int n, int active,
                                   char *err, size_t err_len) {
  if (n < 1 || n >= s->cfg.max_plans || active < 0 || active >= n) {
    pr__errf(err, err_len, "1 to %d plans, the active one among them", s->cfg.max_plans - 1);
    return PR_ERR_INVALID;
  }
  for (int i = 0; i < n; i++)
    if (!(plans[i].latency_ms > 0) || !plan_fits(s, &plans[i], err, err_len)) {
      if (!(plans[i].latency_ms > 0)) pr__errf(err, err_len, "plan %d has no planned latency", i);
      return PR_ERR_INVALID;
    }
  return PR_OK;
}

pr_status_t pr_sched__replan_locked(pr_sched_t *s, const pr_plan_t *plans, const int *buckets,
                                    int n, int active, const char *why, bool *pinned_out, char *err,
                                    size_t err_len) {
  assert(pr__lock_held(&s->admin));
  pr__lock(&s->qlock);
  const config_t *live = &s->configs[s->active];
  bool pinned = *pinned_out = !live->planned; /* a plan set by hand stays live */
  for (int i = 0; i < n && !pinned; i++)      /* the new set's plan for the live one's batch */
    if (plans[i].batch == live->plan.batch && (buckets ? buckets[i] : -1) == live->bucket)
      active = i;
  /* the old planned configs that leave: unswitchable from here on */
  bool leave[PR_SCHED_MAX_CONFIGS] = {false};
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) {
    config_t *cfg = &s->configs[c];
    if (cfg->ok && cfg->planned && in_set(cfg, plans, buckets, n) < 0) {
      leave[c] = true;
      if (c != s->active) cfg->ok = false;
    }
  }
  int old = s->active;
  pr__unlock(&s->qlock);
  /* parked ones go first, so that the new set fits the bound beside the
   * live one (and the hand-pinned ones, least recently used first) */
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
    if (leave[c] && c != old) retire_config(s, c);
  pr_status_t st = PR_OK;
  for (;;) {
    int used = 0;
    pr__lock(&s->qlock);
    for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) used += s->configs[c].used;
    pr__unlock(&s->qlock);
    if (used + n <= s->cfg.max_plans || !evict_one(s, old)) break;
  }
  int idx[PR_SCHED_MAX_CONFIGS];
  for (int i = 0; i < n && !st; i++)
    if ((idx[i] =
             pr_sched__add_plan_locked(s, &plans[i], buckets ? buckets[i] : -1, err, err_len)) < 0)
      st = PR_ERR_INVALID;
  if (!st && !pinned) st = pr__sched_switch(s, idx[active], why);
  if (!st && leave[old] && !pinned) retire_config(s, old);
  if (st)
    pr__log(PR_LOG_ERROR, "%sthe new plans could not all be prepared (%s); the live plan serves on",
            s->cfg.who, err);
  else if (pinned)
    pr__log(PR_LOG_INFO, "%splans re-made (%s); the plan set by hand stays live", s->cfg.who, why);
  return st;
}
