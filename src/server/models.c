/* Model registry and lifecycle. See models.h for the locking rules; the
 * asserts (active in Debug builds) check them: `admin` held by whoever loads
 * or unloads, `lock` held to read the array or an entry's state and held for
 * writing to change them, never held while waiting for references. */
#define _GNU_SOURCE
#include "server/models.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/lock.h"
#include "base/log.h"
#include "base/text.h"
#include "base/topology.h"
#include "base/util.h"
#include "packrat/buckets.h"
#include "packrat/policy.h"
#include "packrat/profiler.h"
#include "server/models_internal.h"

pr_status_t pr__models_create(const pr_models_config_t *cfg, pr_models_t **out) {
  *out = NULL;
  pr_models_t *ms = calloc(1, sizeof *ms);
  if (!ms) return PR_ERR_NOMEM;
  ms->cfg = *cfg;
  ms->models = calloc((size_t)(cfg->max_models > 0 ? cfg->max_models : 1), sizeof *ms->models);
  if (!ms->models) {
    free(ms);
    return PR_ERR_NOMEM;
  }
  snprintf(ms->repository, sizeof ms->repository, "%s", cfg->repository);
  ms->cfg.repository = ms->repository;
  ms->n_cpus = cfg->n_cpus < 4096 ? cfg->n_cpus : 4096;
  memcpy(ms->cpus, cfg->cpus, sizeof(int) * (size_t)ms->n_cpus);
  ms->cfg.cpus = ms->cpus;
  pr__rwlock_init(&ms->lock);
  pr__lock_init(&ms->admin);
  pr_models__balance_start(ms, cfg->balance_window_s);
  *out = ms;
  return PR_OK;
}

/* Waits for the requests in flight, then stops the instances (they finish the
 * queue) and frees the model. admin held; the state already keeps new
 * requests out. */
static void unload_locked(pr_models_t *ms, pr_served_t *m) {
  assert(pr__lock_held(&ms->admin));
  /* waiting for the references while holding `lock` for writing would stall
   * every lookup (only admin holders take it for writing, so reading its
   * writer here is race-free) */
  assert(!pr__rwlock_write_held(&ms->lock));
  while (atomic_load(&m->refs) > 0) usleep(1000);
  assert(atomic_load(&m->refs) == 0);
  pr__sched_destroy(m->sched);
  m->sched = NULL;
  pr_engine_model_destroy(m->model);
  m->model = NULL;
  pr_profile_free(&m->profile);
  for (int k = 0; k < PR_BUCKETS_MAX; k++) pr_profile_free(&m->bucket_profiles[k]);
}

/* Checks that the protocol can carry every input and output of the model:
 * names in UTF-8, datatypes it encodes, a batch axis (dims[0] == batch at the
 * probe's batch). */
static pr_status_t check_io(pr_session_t *probe, int batch, pr_proto_model_t *p, char *err,
                            size_t err_len) {
  for (int io = 0; io < 2; io++) {
    int n = io ? p->n_outputs : p->n_inputs;
    for (int i = 0; i < n; i++) {
      pr_tensor_info_t t;
      if (io)
        pr_engine_session_output(probe, i, &t);
      else
        pr_engine_session_input(probe, i, &t);
      const char *kind = io ? "output" : "input";
      if (!pr__utf8_valid(t.name, strlen(t.name))) {
        pr__errf(err, err_len, "%s %d: its name is not valid UTF-8", kind, i);
        return PR_ERR_UNSUPPORTED;
      }
      if (pr__proto_dtype(pr__proto_datatype(t.dtype)) != t.dtype) {
        pr__errf(err, err_len, "%s '%s': datatype %s cannot be served", kind, t.name,
                 pr_dtype_name(t.dtype));
        return PR_ERR_UNSUPPORTED;
      }
      if (t.rank < 1 || t.dims[0] != batch) {
        pr__errf(err, err_len,
                 "%s '%s' has no batch axis (at batch %d its shape starts with %lld): only models "
                 "whose every input and output has the batch as axis 0 are served",
                 kind, t.name, batch, t.rank ? (long long)t.dims[0] : 0LL);
        return PR_ERR_UNSUPPORTED;
      }
    }
  }
  return PR_OK;
}

/* The protocol's view (shapes at batch 1, axis 0 marked as the batch), after
 * checking the model at batch 1 and, when it batches, 2. */
static pr_status_t describe_io(pr_served_t *m, const pr_session_options_t *base, char *err,
                               size_t err_len) {
  pr_proto_model_t *p = &m->proto;
  p->n_inputs = pr_engine_model_num_inputs(m->model);
  p->n_outputs = pr_engine_model_num_outputs(m->model);
  p->max_batch = m->cfg.max_batch;
  if (p->n_inputs < 1 || p->n_inputs > PR_SCHED_MAX_IO || p->n_outputs > PR_SCHED_MAX_IO) {
    pr__errf(err, err_len, "models with 1 to %d inputs and outputs are served", PR_SCHED_MAX_IO);
    return PR_ERR_UNSUPPORTED;
  }
  for (int batch = 2; batch >= 1; batch--) {
    if (batch > m->cfg.max_batch) continue;
    pr_session_options_t o = *base;
    o.batch = batch;
    pr_session_t *probe;
    pr_status_t st = pr_engine_session_create(m->model, &o, &probe, err, err_len);
    if (!st && pr_engine_session_is_dynamic(probe)) {
      /* its output shapes are known only after a run: rows cannot be
       * scattered back by a shape fixed in advance */
      pr__errf(err, err_len,
               "the model's shapes depend on values known only at run time (control flow or "
               "data-dependent shapes): `packrat run` runs it, serving it is not supported yet");
      st = PR_ERR_UNSUPPORTED;
    }
    if (!st) st = check_io(probe, batch, p, err, err_len);
    if (!st && batch == 1) {
      for (int i = 0; i < p->n_inputs; i++) {
        pr_engine_session_input(probe, i, &p->inputs[i]);
        p->inputs[i].dims[0] = -1;
      }
      for (int i = 0; i < p->n_outputs; i++) {
        pr_engine_session_output(probe, i, &p->outputs[i]);
        p->outputs[i].dims[0] = -1;
      }
    }
    pr_engine_session_destroy(probe);
    if (st) return st;
  }
  return PR_OK;
}

/* The dynamic dims' names of the model's inputs, for a message. */
static void symbolic_names(const pr_model_t *model, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = 0;
  for (int k = 0; k < pr_engine_model_num_inputs(model) && off < len; k++) {
    pr_tensor_info_t t;
    pr_engine_model_input(model, k, &t);
    for (int a = 1; a < t.rank && off < len; a++)
      if (t.dims[a] < 0 && t.dim_names[a])
        off += (size_t)snprintf(buf + off, len - off, "%s'%s'", off ? ", " : "", t.dim_names[a]);
  }
  if (!off) snprintf(buf, len, "none");
}

/* Dim d of the config (a range or a list) as dynamic dim j: where it
 * appears in the inputs (past axis 0, at least once). */
static pr_status_t place_dyn(pr_served_t *m, int j, pr_sched_dim_t *sd, char *err, size_t err_len) {
  pr_proto_model_t *p = &m->proto;
  const char *name = p->dyn[j].name;
  snprintf(sd->name, sizeof sd->name, "%s", name);
  sd->input = -1;
  int n_in = pr_engine_model_num_inputs(m->model);
  for (int k = 0; k < n_in && k < PR_SCHED_MAX_IO; k++) {
    pr_tensor_info_t t;
    pr_engine_model_input(m->model, k, &t);
    for (int a = 0; a < t.rank; a++) {
      if (t.dims[a] >= 0 || !t.dim_names[a] || strcmp(t.dim_names[a], name)) continue;
      if (a == 0) {
        pr__errf(err, err_len,
                 "dims: '%s' is the batch axis of input '%s', not a dim requests size", name,
                 t.name);
        return PR_ERR_INVALID;
      }
      p->dyn_of[k][a] = (unsigned char)(j + 1);
      if (sd->input < 0) sd->input = k, sd->axis = a;
    }
  }
  if (sd->input >= 0) return PR_OK;
  char names[512];
  symbolic_names(m->model, names, sizeof names);
  pr__errf(err, err_len,
           "dims: '%s' is not a symbolic dimension of the model's inputs (past the batch axis they "
           "have: %s)",
           name, names);
  return PR_ERR_INVALID;
}

/* A fixed dim that names no symbolic dim of the inputs is ignored, as it
 * always was (a config that names one never failed to load), with a
 * warning. */
static void warn_unknown_fixed(const pr_served_t *m, const char *name) {
  for (int k = 0; k < pr_engine_model_num_inputs(m->model); k++) {
    pr_tensor_info_t t;
    pr_engine_model_input(m->model, k, &t);
    for (int a = 0; a < t.rank; a++)
      if (t.dims[a] < 0 && t.dim_names[a] && !strcmp(t.dim_names[a], name)) return;
  }
  pr__log(PR_LOG_WARN, "model %s: dims: '%s' names no symbolic dimension of its inputs; ignored",
          m->entry.name, name);
}

/* The sets of the dynamic dims' sizes to compile ahead: every combination
 * of the listed sizes (a range stays at its planned size), at most
 * PR_SCHED_MAX_AHEAD; each instance skips the set it is prepared at (its
 * plan's shape bucket's, or the planned set). */
static void ahead_sizes(const pr_model_config_t *c, pr_sched_config_t *sc) {
  int idx[PR_DIMS_MAX] = {0}, dims[PR_SCHED_MAX_DYN], n = 0;
  bool any = false;
  for (int i = 0; i < c->n_dims; i++)
    if (c->dim_kind[i] != PR_DIM_FIXED) any |= c->dim_kind[i] == PR_DIM_LIST, dims[n++] = i;
  assert(n == sc->n_dyn);
  sc->n_ahead = 0;
  while (any && sc->n_ahead < PR_SCHED_MAX_AHEAD) {
    for (int j = 0; j < n; j++) {
      int i = dims[j];
      long long v = c->dim_kind[i] == PR_DIM_LIST ? c->dim_list[i][idx[j]] : c->dim_values[i];
      sc->ahead[sc->n_ahead][j] = v;
    }
    sc->n_ahead++;
    int j = 0; /* the next combination: a mixed-radix count over the lists */
    for (; j < n; j++) {
      int i = dims[j];
      if (c->dim_kind[i] == PR_DIM_LIST && ++idx[j] < c->dim_n_list[i]) break;
      idx[j] = 0;
    }
    if (j == n) break;
  }
}

/* The config's ranges and lists as the protocol's and the scheduler's
 * dynamic dims, each checked to be a symbolic dim of the inputs. */
static pr_status_t dynamic_dims(pr_served_t *m, pr_sched_config_t *sc, char *err, size_t err_len) {
  const pr_model_config_t *c = &m->cfg;
  pr_proto_model_t *p = &m->proto;
  p->n_dyn = sc->n_dyn = 0;
  memset(p->dyn_of, 0, sizeof p->dyn_of);
  for (int i = 0; i < c->n_dims; i++) {
    if (c->dim_kind[i] == PR_DIM_FIXED) {
      warn_unknown_fixed(m, c->dim_names[i]);
      continue;
    }
    int j = p->n_dyn++;
    pr_proto_dim_t *d = &p->dyn[j];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", c->dim_names[i]);
    d->min = c->dim_min[i], d->max = c->dim_max[i];
    d->n_list = c->dim_kind[i] == PR_DIM_LIST ? c->dim_n_list[i] : 0;
    memcpy(d->list, c->dim_list[i], sizeof(long long) * (size_t)d->n_list);
    pr_status_t st = place_dyn(m, j, &sc->dyn[j], err, err_len);
    if (st) return st;
    sc->n_dyn = p->n_dyn;
  }
  memcpy(sc->dyn_of, p->dyn_of, sizeof sc->dyn_of);
  ahead_sizes(c, sc);
  return PR_OK;
}

/* -1 for the dynamic dims' axes in the metadata: the inputs', and, when
 * the model has dynamic dims, every symbolic axis of the outputs (an
 * exporter may name an output's axis apart from the input dim it follows,
 * e.g. a recognizer's time steps from its width). After describe_io. */
static void mark_dynamic(pr_served_t *m) {
  pr_proto_model_t *p = &m->proto;
  for (int k = 0; k < p->n_inputs; k++)
    for (int a = 1; a < p->inputs[k].rank; a++)
      if (p->dyn_of[k][a]) p->inputs[k].dims[a] = -1;
  for (int o = 0; o < p->n_outputs; o++) {
    pr_tensor_info_t t;
    pr_engine_model_output(m->model, o, &t);
    for (int a = 1; p->n_dyn && a < t.rank && a < p->outputs[o].rank; a++)
      if (t.dims[a] < 0) p->outputs[o].dims[a] = -1;
  }
}

/* m's plan policy (packrat/policy.h); dim: room for its dynamic dim. */
static pr_policy_t policy_of(const pr_models_t *ms, const pr_served_t *m, int n_dyn,
                             pr_bucket_dim_t *dim) {
  const pr_model_config_t *c = &m->cfg;
  pr_policy_t p = {.fixed_plan = strcmp(c->plan, "auto") ? c->plan : NULL,
                   .follow_load = c->autoscale,
                   .min_batch = c->min_batch,
                   .max_batch = c->max_batch,
                   .max_plans = ms->cfg.max_plans};
  if (n_dyn == 1) {
    int i = 0;
    while (c->dim_kind[i] == PR_DIM_FIXED) i++; /* the dynamic one */
    *dim = (pr_bucket_dim_t){.min = c->dim_min[i],
                             .max = c->dim_max[i],
                             .profile_at = c->dim_values[i],
                             .list = c->dim_list[i],
                             .n_list = c->dim_kind[i] == PR_DIM_LIST ? c->dim_n_list[i] : 0};
    p.dynamic_dim = dim;
  }
  return p;
}

/* The model's profile on the server's cores at base's dims: the cached
 * one, or measured (and cached when the profiler judges it sound); coarse:
 * only at the batches the policy plans with. */
static pr_status_t get_profile(pr_models_t *ms, pr_served_t *m, const pr_session_options_t *base,
                               const pr_policy_t *policy, bool coarse, pr_profile_t *prof,
                               char *err, size_t err_len) {
  int batches[64];
  int n = coarse ? pr_policy_profile_batches(policy, batches, 64) : 0;
  pr_profile_source_t src = {.model_name = m->entry.name,
                             .cores = pr_models__cores(ms),
                             .max_batch = m->cfg.max_batch,
                             .batches = batches,
                             .n_batches = n,
                             .cpus = ms->cpus,
                             .n_cpus = ms->n_cpus,
                             .read_cache = true,
                             .write_cache = true};
  return pr_profile_get(m->model, base, &src, prof, NULL, 0, err, err_len);
}

int pr_models__cores(const pr_models_t *ms) {
  int cores = pr__topology_num_cores();
  return ms->n_cpus < cores ? ms->n_cpus : cores;
}

/* The profiles plans are made from: one per shape bucket when the policy
 * gives buckets (the profile_at bucket's on the full grid, in m->profile,
 * the others' on the batches plans use, in m->bucket_profiles), else one
 * at base's shapes; none with a fixed plan. Sets sc's buckets. PR_OK, or
 * an error with err. */
static pr_status_t get_profiles(pr_models_t *ms, pr_served_t *m, const pr_session_options_t *base,
                                pr_sched_config_t *sc, char *err, size_t err_len) {
  pr_model_config_t *c = &m->cfg;
  m->n_buckets = m->at_bucket = 0;
  sc->n_buckets = 0;
  pr_bucket_dim_t dyn;
  pr_policy_t policy = policy_of(ms, m, sc->n_dyn, &dyn);
  if (policy.fixed_plan) return PR_OK;
  pr_status_t st = pr_policy_check(&policy, err, err_len);
  if (st) return st;
  sc->n_buckets = pr_policy_buckets(&policy, sc->bucket_sizes);
  sc->bucket_dim = 0;
  int n_sets = sc->n_buckets ? sc->n_buckets : 1, dim = 0;
  int64_t values[8];
  memcpy(values, base->dim_values, sizeof(int64_t) * (size_t)base->n_dims);
  pr_session_options_t opts = *base;
  opts.dim_values = values;
  if (sc->n_buckets) {
    while (c->dim_kind[dim] == PR_DIM_FIXED) dim++;
    m->at_bucket = pr_bucket_of(sc->bucket_sizes, sc->n_buckets, c->dim_values[dim]);
    pr__log(PR_LOG_INFO, "model %s: %d shape buckets of '%s', planned at sizes %lld..%lld",
            m->entry.name, sc->n_buckets, c->dim_names[dim], sc->bucket_sizes[0],
            sc->bucket_sizes[sc->n_buckets - 1]);
  }
  m->n_buckets = sc->n_buckets;
  for (int k = 0; k < n_sets; k++) {
    bool at = k == m->at_bucket;
    if (sc->n_buckets) {
      values[dim] = sc->bucket_sizes[k];
      pr__log(PR_LOG_INFO, "model %s: shape bucket %s <= %lld: its profile (%s)", m->entry.name,
              c->dim_names[dim], sc->bucket_sizes[k],
              at ? "profile_at: the full grid" : "the planned batches");
    }
    st = get_profile(ms, m, &opts, &policy, !at, at ? &m->profile : &m->bucket_profiles[k], err,
                     err_len);
    if (st) return st;
  }
  return PR_OK;
}

/* The plans to prepare on m's share (pr_policy_plans: buckets[i] is
 * plans[i]'s bucket, *active the one to start on) into plans[0..cap).
 * Returns how many, or -1 with err. */
static int make_plans(const pr_models_t *ms, const pr_served_t *m, pr_plan_t *plans, int *buckets,
                      int cap, int *active, char *err, size_t err_len) {
  const pr_profile_t *profiles[PR_BUCKETS_MAX];
  int n = m->n_buckets ? m->n_buckets : 1;
  for (int k = 0; k < n; k++)
    profiles[k] = k == m->at_bucket ? &m->profile : &m->bucket_profiles[k];
  pr_bucket_dim_t dyn; /* buckets are chosen already: not needed here */
  pr_policy_t policy = policy_of(ms, m, 0, &dyn);
  return pr_policy_plans(&policy, profiles, n, m->at_bucket, m->share.first_core, m->share.cores,
                         plans, buckets, cap, active, err, err_len);
}

/* Whether m takes part in the division of the cores. */
static bool divided(const pr_served_t *m) {
  return !strcmp(m->cfg.plan, "auto") && !m->cfg.share_cores && m->profile.n_points > 0;
}

/* Re-plans ready model m on its (new) share: plans for every batch there,
 * switched to without a pause. admin held. */
static void replan(const pr_models_t *ms, pr_served_t *m, const char *why) {
  int max_plans = PR_SCHED_MAX_CONFIGS, active;
  pr_plan_t *plans = calloc((size_t)max_plans, sizeof *plans);
  int *buckets = calloc((size_t)max_plans, sizeof *buckets);
  char err[512] = "out of memory";
  int n = plans && buckets ? make_plans(ms, m, plans, buckets, max_plans, &active, err, sizeof err)
                           : -1;
  if (n < 0 || pr__sched_replan(m->sched, plans, buckets, n, active, why, err, sizeof err))
    pr__log(PR_LOG_ERROR, "model %s v%s: no plans on cores %d..%d (%s); it serves on as it was",
            m->entry.name, m->entry.version, m->share.first_core,
            m->share.first_core + m->share.cores - 1, err);
  free(plans);
  free(buckets);
}

int pr_models__collect(pr_models_t *ms, pr_served_t *join, pr_served_t **part,
                       pr_joint_model_t *jm) {
  assert(pr__lock_held(&ms->admin));
  int n = 0;
  bool joined = false;
  pr__rwlock_rdlock(&ms->lock);
  /* in the registry's order, join in its place (a reload's new copy, not
   * listed yet, last): the same models give the same division whichever
   * of them joins (pr__models_load_all) */
  for (int i = 0; i < ms->n_models && n < PR_JOINT_MAX_MODELS - 1; i++) {
    pr_served_t *x = ms->models[i];
    bool replaced = join && x != join && !strcmp(x->entry.name, join->entry.name) &&
                    !strcmp(x->entry.version, join->entry.version);
    bool in = x->state == PR_MODEL_READY || (x->state == PR_MODEL_LOADING && x->prepared);
    if (x == join) {
      part[n++] = join;
      joined = true;
    } else if (in && divided(x) && !replaced) {
      part[n++] = x;
    }
  }
  pr__rwlock_unlock(&ms->lock);
  if (join && !joined) part[n++] = join;
  for (int k = 0; k < n; k++) {
    const pr_model_config_t *c = &part[k]->cfg;
    int b = part[k] != join && part[k]->share_batch > 0 ? part[k]->share_batch : c->max_batch;
    jm[k] = (pr_joint_model_t){.profile = &part[k]->profile,
                               .batch = b,
                               .weight = c->core_weight,
                               .min_cores = c->min_cores,
                               .max_cores = c->max_cores,
                               .target_ms = c->latency_target_ms};
  }
  return n;
}

void pr_models__apply(pr_models_t *ms, pr_served_t **part, const pr_joint_model_t *jm,
                      const pr_joint_share_t *shares, int n, const pr_served_t *join,
                      const char *why) {
  assert(pr__lock_held(&ms->admin));
  for (int k = 0; k < n; k++) {
    pr_served_t *x = part[k];
    bool moved = !x->divided || x->share.first_core != shares[k].first_core ||
                 x->share.cores != shares[k].cores;
    pr__rwlock_wrlock(&ms->lock);
    x->divided = true;
    x->share = shares[k];
    x->share_batch = jm[k].batch;
    pr__rwlock_unlock(&ms->lock);
    pr__log(moved ? PR_LOG_INFO : PR_LOG_DEBUG,
            "model %s v%s: cores %d..%d of %d (predicted %.3g ms at batch %d, %.2fx "
            "its %s)%s",
            x->entry.name, x->entry.version, shares[k].first_core,
            shares[k].first_core + shares[k].cores - 1, pr_models__cores(ms), shares[k].latency_ms,
            jm[k].batch, shares[k].score, x->cfg.latency_target_ms > 0 ? "target" : "best alone",
            moved && x != join && x->sched ? ": moving" : "");
    if (moved && x != join && x->sched) replan(ms, x, why); /* not one still to be planned */
  }
}

/* Whether join's latency target can be met at all: its best plan for its
 * max batch on every core; PR_ERR_INVALID with err when not. */
static pr_status_t check_target(pr_models_t *ms, pr_served_t *join, char *err, size_t err_len) {
  double target = join->cfg.latency_target_ms;
  if (!(target > 0)) return PR_OK;
  pr_plan_t *plan = malloc(sizeof *plan);
  if (!plan) return PR_ERR_NOMEM;
  pr_status_t st = PR_OK;
  int T = pr_models__cores(ms);
  if (pr_plan_optimize(&join->profile, join->cfg.max_batch, T, plan) == PR_OK &&
      plan->latency_ms > target) {
    pr__errf(err, err_len,
             "\"cores\": \"latency_target_ms\" %g cannot be met: the best plan for batch %d on "
             "all %d cores takes %.3g ms (its profile)",
             target, join->cfg.max_batch, T, plan->latency_ms);
    st = PR_ERR_INVALID;
  }
  free(plan);
  return st;
}

/* Divides the cores among the ready models that take part and `join` (the
 * one loading, or NULL), each planned for the batch it was last planned
 * for (join: its max batch); writes each one's share, and re-plans the
 * ready ones whose share moved. A model that takes no part gets every
 * core; one the cores cannot hold apart beside the others shares them.
 * PR_OK, or an error with err (nothing changed). admin held. */
static pr_status_t divide(pr_models_t *ms, pr_served_t *join, const char *why, char *err,
                          size_t err_len) {
  assert(pr__lock_held(&ms->admin));
  int T = pr_models__cores(ms);
  pr_status_t st = PR_OK;
  if (join && (!divided(join) || (st = check_target(ms, join, err, err_len)))) {
    if (divided(join)) return st;
    pr__rwlock_wrlock(&ms->lock);
    join->divided = false;
    join->share = (pr_joint_share_t){.first_core = 0, .cores = T};
    pr__rwlock_unlock(&ms->lock);
    return PR_OK;
  }
  pr_served_t *part[PR_JOINT_MAX_MODELS];
  pr_joint_model_t jm[PR_JOINT_MAX_MODELS];
  int n = pr_models__collect(ms, join, part, jm);
  if (!n) return PR_OK;
  pr_joint_share_t shares[PR_JOINT_MAX_MODELS];
  char e[512];
  st = pr_plan_joint(jm, n, T, shares, e, sizeof e);
  if (st) {
    /* name the model, not the index */
    char named[768];
    snprintf(named, sizeof named, "%s", e);
    for (int k = 0; k < n; k++) {
      char tag[16];
      snprintf(tag, sizeof tag, "model %d:", k);
      if (!strncmp(e, tag, strlen(tag)))
        snprintf(named, sizeof named, "model %s v%s:%s (its \"cores\" setting)",
                 part[k]->entry.name, part[k]->entry.version, e + strlen(tag));
    }
    if (st != PR_ERR_NOT_FOUND) {
      pr__errf(err, err_len, "dividing the cores: %s", named);
      return st;
    }
    /* more models than the cores hold apart: the one loading shares every
     * core (as a model with "share": true), the others stay as they are */
    if (join) {
      pr__log(PR_LOG_WARN,
              "model %s v%s: the cores cannot be divided among %d models (%s); it shares every "
              "core with the others, which slow each other (fewer models, or \"cores\" bounds, "
              "divide them)",
              join->entry.name, join->entry.version, n, named);
      pr__rwlock_wrlock(&ms->lock);
      join->divided = false;
      join->share = (pr_joint_share_t){.first_core = 0, .cores = T};
      pr__rwlock_unlock(&ms->lock);
    } else {
      pr__log(PR_LOG_INFO, "the cores stay as they are: %s", named);
    }
    return PR_OK;
  }
  pr_models__apply(ms, part, jm, shares, n, join, why);
  return PR_OK;
}

/* Re-divides the cores after a model left (or failed to load). admin held. */
static void redivide(pr_models_t *ms, const char *name, const char *what) {
  char why[600], err[1024];
  snprintf(why, sizeof why, "cores re-divided: model %s %s", name, what);
  if (divide(ms, NULL, why, err, sizeof err))
    pr__log(PR_LOG_ERROR, "after model %s %s: %s", name, what, err);
}

/* A load between its profiles and its scheduler: what the scheduler is
 * made with. */
typedef struct {
  pr_session_options_t base;
  pr_sched_config_t sc;
  const char *names[8];
  int64_t values[8];
} load_t;

/* A load's first part: its config, engine model, inputs and profiles.
 * admin held. */
static pr_status_t load_prepare(pr_models_t *ms, pr_served_t *m, load_t *x, char *err,
                                size_t err_len) {
  assert(pr__lock_held(&ms->admin));
  pr_model_config_t *c = &m->cfg;
  *c = ms->cfg.defaults;
  snprintf(c->plan, sizeof c->plan, "auto");
  c->autoscale = true;
  c->estimator = 1;
  c->n_dims = 0;
  if (m->entry.config[0] && pr__repo_read_config(m->entry.config, c, err, err_len))
    return PR_ERR_INVALID;
  if (c->cache_sessions < 1) c->cache_sessions = PR_CACHE_SESSIONS_DEFAULT;
  if (c->cache_bytes < 1) c->cache_bytes = PR_CACHE_MB_DEFAULT << 20;
  if (c->priority_levels < 1) c->priority_levels = 1;
  if (c->default_priority < 1) c->default_priority = (c->priority_levels + 1) / 2; /* the middle */
  pr_status_t st = pr_engine_model_load_file(m->entry.path, &m->model, err, err_len);
  if (st) return st;
  pr_session_options_t *base = &x->base;
  *base = pr_session_options_default();
  base->precision = c->precision;
  for (int i = 0; i < c->n_dims; i++)
    x->names[i] = c->dim_names[i], x->values[i] = c->dim_values[i];
  base->n_dims = c->n_dims;
  base->dim_names = x->names;
  base->dim_values = x->values;
  x->sc = (pr_sched_config_t){.max_batch = c->max_batch,
                              .queue_capacity = c->queue_capacity,
                              .max_queue_delay_s = c->max_queue_delay_us * 1e-6,
                              .timeout_s = c->request_timeout_s,
                              .max_plans = ms->cfg.max_plans,
                              .priority_levels = c->priority_levels,
                              .default_priority = c->default_priority,
                              .cache_sessions = c->cache_sessions,
                              .cache_bytes = (size_t)c->cache_bytes};
  pr_sched_config_t *sc = &x->sc;
  snprintf(sc->who, sizeof sc->who, "model %s v%s: ", m->entry.name, m->entry.version);
  if ((st = dynamic_dims(m, sc, err, err_len)) || (st = describe_io(m, base, err, err_len)))
    return st;
  mark_dynamic(m);
  return get_profiles(ms, m, base, sc, err, err_len);
}

/* A load's second part: its share of the cores, its plans, its scheduler.
 * admin held. */
static pr_status_t load_finish(pr_models_t *ms, pr_served_t *m, load_t *x, char *err,
                               size_t err_len) {
  assert(pr__lock_held(&ms->admin));
  int max_plans = ms->cfg.max_plans;
  pr_plan_t *plans = calloc((size_t)max_plans, sizeof *plans);
  int *buckets = calloc((size_t)max_plans, sizeof *buckets);
  if (!plans || !buckets) {
    free(plans);
    free(buckets);
    return PR_ERR_NOMEM;
  }
  int active, n_plans = -1;
  char why[600];
  snprintf(why, sizeof why, "cores re-divided: model %s v%s loads", m->entry.name,
           m->entry.version);
  pr_status_t st = divide(ms, m, why, err, err_len);
  if (!st) n_plans = make_plans(ms, m, plans, buckets, max_plans, &active, err, err_len);
  if (n_plans < 0) {
    free(plans);
    free(buckets);
    return st ? st : PR_ERR_INVALID;
  }
  x->base.batch = 1;
  st = pr__sched_create(m->model, plans, buckets, n_plans, active, ms->cpus, ms->n_cpus, &x->base,
                        &x->sc, &m->sched, err, err_len);
  free(buckets);
  if (!st && n_plans > 1) pr__sched_set_auto(m->sched, true, m->cfg.estimator, 1.0);
  free(plans);
  return st;
}

static pr_status_t load_model(pr_models_t *ms, pr_served_t *m, char *err, size_t err_len) {
  load_t *x = calloc(1, sizeof *x);
  if (!x) return PR_ERR_NOMEM;
  pr_status_t st = load_prepare(ms, m, x, err, err_len);
  if (!st) st = load_finish(ms, m, x, err, err_len);
  free(x);
  return st;
}

static pr_served_t *find_locked(pr_models_t *ms, const char *name, const char *version) {
  assert(pr__rwlock_held(&ms->lock));
  assert(ms->n_models >= 0 && ms->n_models <= ms->cfg.max_models);
  for (int i = 0; i < ms->n_models; i++)
    if (!strcmp(ms->models[i]->entry.name, name) && !strcmp(ms->models[i]->entry.version, version))
      return ms->models[i];
  return NULL;
}

/* A reload: the new copy loads beside the ready one m, which serves on
 * until the new one is ready (and stays when the new one fails). admin
 * held, lock not. */
static pr_status_t reload_locked(pr_models_t *ms, pr_served_t *m, const pr_repo_entry_t *entry,
                                 char *err, size_t err_len) {
  assert(pr__lock_held(&ms->admin) && !pr__rwlock_write_held(&ms->lock));
  pr__rwlock_rdlock(&ms->lock);
  int slot = 0;
  while (ms->models[slot] != m) {
    slot++;
    assert(slot < ms->n_models); /* m came from the array */
  }
  pr__rwlock_unlock(&ms->lock);
  pr_served_t *n = calloc(1, sizeof *n);
  pr_status_t st = n ? PR_OK : PR_ERR_NOMEM;
  if (n) n->entry = *entry;
  if (!st) st = load_model(ms, n, err, err_len);
  if (st) {
    bool was_divided = n && n->divided;
    if (n) unload_locked(ms, n);
    free(n);
    pr__log(PR_LOG_WARN, "model %s version %s: the reload failed, the loaded copy serves on: %s",
            entry->name, entry->version, err);
    if (was_divided) redivide(ms, entry->name, "failed to reload");
    return st;
  }
  pr__rwlock_wrlock(&ms->lock);
  assert(ms->models[slot] == m); /* admin held: nobody moved it */
  n->state = PR_MODEL_READY;
  ms->models[slot] = n; /* lookups find the new one from here */
  pr__rwlock_unlock(&ms->lock);
  unload_locked(ms, m); /* after the requests that hold the old one */
  free(m);
  return PR_OK;
}

/* The slot for a version not known yet (lock held for writing): a new one,
 * or, at the limit, one unloaded or failed and no longer referenced; NULL
 * with err when there is none. */
static pr_served_t *new_slot_locked(pr_models_t *ms, pr_status_t *st, char *err, size_t err_len) {
  assert(pr__rwlock_write_held(&ms->lock));
  *st = PR_ERR_BUSY;
  pr_served_t *m = NULL;
  for (int i = 0; !m && ms->n_models == ms->cfg.max_models && i < ms->n_models; i++) {
    pr_served_t *x = ms->models[i];
    if (x->state == PR_MODEL_UNAVAILABLE && atomic_load(&x->refs) == 0) {
      memset(x, 0, sizeof *x);
      m = x;
    }
  }
  if (!m && ms->n_models == ms->cfg.max_models) {
    pr__errf(err, err_len, "the server holds %d model versions, the most it may (--max-models)",
             ms->cfg.max_models);
    return NULL;
  }
  if (!m && (m = calloc(1, sizeof *m))) ms->models[ms->n_models++] = m;
  if (!m) *st = PR_ERR_NOMEM, pr__errf(err, err_len, "out of memory");
  return m;
}

/* The end of a load (m LOADING): ready, or, on an error, what was made of
 * it freed (no request holds it), unavailable with err (any bytes), and
 * the others re-divided where they had shrunk for it. admin held. */
static void load_settle(pr_models_t *ms, pr_served_t *m, pr_status_t st, const char *err) {
  assert(pr__lock_held(&ms->admin));
  if (st) unload_locked(ms, m);
  pr__rwlock_wrlock(&ms->lock);
  assert(m->state == PR_MODEL_LOADING);
  m->state = st ? PR_MODEL_UNAVAILABLE : PR_MODEL_READY;
  m->prepared = false;
  pr__utf8_sanitize(st ? err : "", m->reason, sizeof m->reason);
  bool was_divided = m->divided;
  if (st) m->divided = false;
  pr__rwlock_unlock(&ms->lock);
  if (st && was_divided) redivide(ms, m->entry.name, "failed to load");
}

/* The slot a load of `entry` takes (*out): the known version's, LOADING
 * from here, or, when that one is ready, it (*ready: a reload is due); or
 * a new one; an error (logged) when there is no room. admin held. */
static pr_status_t begin_load(pr_models_t *ms, const pr_repo_entry_t *entry, pr_served_t **out,
                              bool *ready, char *err, size_t err_len) {
  assert(pr__lock_held(&ms->admin));
  *out = NULL;
  *ready = false;
  pr__rwlock_wrlock(&ms->lock);
  pr_served_t *m = find_locked(ms, entry->name, entry->version);
  pr_status_t st = PR_OK;
  if (!m && !(m = new_slot_locked(ms, &st, err, err_len))) {
    pr__rwlock_unlock(&ms->lock);
    pr__log(PR_LOG_WARN, "model %s version %s not loaded: %s", entry->name, entry->version, err);
    return st;
  }
  *out = m;
  *ready = m->state == PR_MODEL_READY;
  if (!*ready) {
    assert(atomic_load(&m->refs) == 0); /* not ready: no request holds it */
    m->state = PR_MODEL_LOADING;
    m->entry = *entry; /* lookups read it under the lock; no request holds m */
  }
  pr__rwlock_unlock(&ms->lock);
  return PR_OK;
}

/* Loads (or reloads) one version. admin held. */
static pr_status_t load_version(pr_models_t *ms, const pr_repo_entry_t *entry, char *err,
                                size_t err_len) {
  pr_served_t *m;
  bool ready;
  pr_status_t st = begin_load(ms, entry, &m, &ready, err, err_len);
  if (st || ready) return st ? st : reload_locked(ms, m, entry, err, err_len);
  st = load_model(ms, m, err, err_len);
  load_settle(ms, m, st, err);
  return st;
}

/* A folder of the repository named as a model whose layout is not one
 * (top->problem): known from here as a load that failed, so that the
 * index, readiness and its routes say why; a version of it that is ready
 * serves on. admin held. */
static void record_problem(pr_models_t *ms, const pr_repo_entry_t *top) {
  pr_served_t *m;
  bool ready;
  char e[1024];
  if (!begin_load(ms, top, &m, &ready, e, sizeof e) && !ready)
    load_settle(ms, m, PR_ERR_INVALID, top->problem);
}

/* Unloads version m (ready). admin held, lock not. */
static void unload_version(pr_models_t *ms, pr_served_t *m, const char *why) {
  assert(pr__lock_held(&ms->admin));
  pr__rwlock_wrlock(&ms->lock);
  assert(m->state == PR_MODEL_READY);
  m->state = PR_MODEL_UNAVAILABLE;
  snprintf(m->reason, sizeof m->reason, "%s", why);
  m->divided = false;
  pr__rwlock_unlock(&ms->lock);
  unload_locked(ms, m);
}

/* The ready versions of `name` that are not among keep[0..n_keep), into
 * out (at most max; admin held: the set does not change under the caller). */
#define MAX_READY (PR_REPO_MAX_VERSIONS * 4)
static int ready_except(pr_models_t *ms, const char *name, const pr_repo_entry_t *keep, int n_keep,
                        pr_served_t *out[MAX_READY]) {
  assert(pr__lock_held(&ms->admin));
  int n = 0;
  pr__rwlock_rdlock(&ms->lock);
  for (int i = 0; i < ms->n_models; i++) {
    pr_served_t *m = ms->models[i];
    bool kept = false;
    for (int k = 0; k < n_keep; k++) kept |= !strcmp(keep[k].version, m->entry.version);
    if (!strcmp(m->entry.name, name) && m->state == PR_MODEL_READY && !kept && n < MAX_READY)
      out[n++] = m;
  }
  pr__rwlock_unlock(&ms->lock);
  return n;
}

/* The versions to serve: those the model's version policy selects. A config
 * that does not parse (*policy_ok false) selects the highest version, whose
 * load then fails with the config's error as any load error does (a
 * version that was ready serves on) and the others stay as they are. */
static int wanted_versions(pr_models_t *ms, const pr_repo_entry_t *top, pr_repo_entry_t *want,
                           bool *policy_ok, char *err, size_t err_len) {
  pr_model_config_t c = ms->cfg.defaults;
  char ignored[256];
  *policy_ok = !top->config[0] || !pr__repo_read_config(top->config, &c, ignored, sizeof ignored);
  if (!*policy_ok) {
    want[0] = *top;
    return 1;
  }
  int n = pr__repo_versions(ms->repository, top->name, &c.policy, want, PR_REPO_MAX_VERSIONS);
  if (n <= 0)
    pr__errf(err, err_len, "the version policy of '%s' selects no version in the repository",
             top->name);
  return n;
}

pr_status_t pr__models_load(pr_models_t *ms, const char *name, char *err, size_t err_len) {
  pr_repo_entry_t top, want[PR_REPO_MAX_VERSIONS];
  if (pr__repo_find(ms->repository, name, &top)) {
    pr__errf(err, err_len, "no model '%s' in the repository", name);
    return PR_ERR_NOT_FOUND;
  }
  pr__lock(&ms->admin);
  if (top.problem[0]) {
    record_problem(ms, &top);
    pr__unlock(&ms->admin);
    pr__errf(err, err_len, "%s", top.problem);
    return PR_ERR_INVALID;
  }
  bool policy_ok;
  int n = wanted_versions(ms, &top, want, &policy_ok, err, err_len);
  pr_status_t first = n > 0 ? PR_OK : PR_ERR_INVALID;
  for (int i = 0; i < n; i++) {
    char e[1024];
    pr_status_t st = load_version(ms, &want[i], e, sizeof e);
    if (st && !first) first = st, pr__errf(err, err_len, "version %s: %s", want[i].version, e);
  }
  if (n > 0 && policy_ok) { /* versions the policy no longer selects leave */
    pr_served_t *old[MAX_READY];
    int k = ready_except(ms, name, want, n, old);
    for (int i = 0; i < k; i++) unload_version(ms, old[i], "unloaded: not in the version policy");
    if (k) redivide(ms, name, "versions left (version policy)");
  }
  pr__unlock(&ms->admin);
  return first;
}

void pr__models_load_all(pr_models_t *ms, const char *const *names, int n) {
  enum { MAX_PENDING = 256 };
  struct {
    pr_served_t *m;
    load_t *x;
  } pending[MAX_PENDING];
  int n_pending = 0;
  pr__lock(&ms->admin);
  /* every version's profiles first (each takes part in the division from
   * then on), then each one's plans on the division of them all */
  for (int i = 0; i < n; i++) {
    pr_repo_entry_t top, want[PR_REPO_MAX_VERSIONS];
    char e[1024];
    bool policy_ok;
    bool found = !pr__repo_find(ms->repository, names[i], &top);
    if (found && top.problem[0]) { /* the repository scan logged it */
      record_problem(ms, &top);
      continue;
    }
    int k = found ? wanted_versions(ms, &top, want, &policy_ok, e, sizeof e)
                  : (pr__errf(e, sizeof e, "no model '%s' in the repository", names[i]), -1);
    if (k <= 0) pr__log(PR_LOG_ERROR, "model %s: %s", names[i], e);
    for (int v = 0; v < k; v++) {
      if (n_pending == MAX_PENDING) { /* a full list: alone */
        if (load_version(ms, &want[v], e, sizeof e))
          pr__log(PR_LOG_ERROR, "model %s: version %s: %s", want[v].name, want[v].version, e);
        continue;
      }
      pr_served_t *m = NULL;
      bool ready = false;
      pr_status_t st = begin_load(ms, &want[v], &m, &ready, e, sizeof e);
      if (!st && ready)
        st = reload_locked(ms, m, &want[v], e, sizeof e); /* loaded already: alone */
      if (st) pr__log(PR_LOG_ERROR, "model %s: version %s: %s", want[v].name, want[v].version, e);
      if (st || ready) continue;
      pr__log(PR_LOG_INFO, "loading model %s version %s from %s", want[v].name, want[v].version,
              want[v].path);
      load_t *x = calloc(1, sizeof *x);
      st = x ? load_prepare(ms, m, x, e, sizeof e) : PR_ERR_NOMEM;
      if (st) {
        load_settle(ms, m, st, x ? e : "out of memory");
        free(x);
        pr__log(PR_LOG_ERROR, "model %s: version %s: %s", m->entry.name, m->entry.version,
                m->reason);
        continue;
      }
      pr__rwlock_wrlock(&ms->lock);
      m->prepared = true;
      pr__rwlock_unlock(&ms->lock);
      pending[n_pending].m = m;
      pending[n_pending++].x = x;
    }
  }
  for (int i = 0; i < n_pending; i++) {
    char e[1024] = "";
    pr_status_t st = load_finish(ms, pending[i].m, pending[i].x, e, sizeof e);
    free(pending[i].x);
    load_settle(ms, pending[i].m, st, e);
    if (st)
      pr__log(PR_LOG_ERROR, "model %s: version %s: %s", pending[i].m->entry.name,
              pending[i].m->entry.version, pending[i].m->reason);
  }
  pr__unlock(&ms->admin);
}

pr_status_t pr__models_unload(pr_models_t *ms, const char *name) {
  pr__lock(&ms->admin);
  pr_served_t *ready[MAX_READY];
  int n = ready_except(ms, name, NULL, 0, ready);
  for (int i = 0; i < n; i++) unload_version(ms, ready[i], "unloaded");
  if (n) redivide(ms, name, "unloaded");
  /* versions whose load failed are unloaded too (as Triton does): an
   * operator clears a failure that way, and strict readiness follows */
  int failed = 0;
  pr__rwlock_wrlock(&ms->lock);
  for (int i = 0; i < ms->n_models; i++) {
    pr_served_t *m = ms->models[i];
    if (!strcmp(m->entry.name, name) && m->state == PR_MODEL_UNAVAILABLE &&
        strcmp(m->reason, "unloaded"))
      snprintf(m->reason, sizeof m->reason, "unloaded"), failed++;
  }
  pr__rwlock_unlock(&ms->lock);
  pr__unlock(&ms->admin);
  return n || failed ? PR_OK : PR_ERR_NOT_FOUND;
}

/* The version a request without one gets: the highest ready one, else any
 * known one (lock held). */
static pr_served_t *default_version_locked(pr_models_t *ms, const char *name) {
  pr_served_t *best = NULL;
  for (int i = 0; i < ms->n_models; i++) {
    pr_served_t *m = ms->models[i];
    if (strcmp(m->entry.name, name)) continue;
    bool ready = m->state == PR_MODEL_READY, best_ready = best && best->state == PR_MODEL_READY;
    if (!best || (ready && !best_ready) ||
        (ready == best_ready && atol(m->entry.version) > atol(best->entry.version)))
      best = m;
  }
  return best;
}

pr_served_t *pr__models_get(pr_models_t *ms, const char *name, const char *version, pr_status_t *st,
                            char *why, size_t why_len) {
  pr__rwlock_rdlock(&ms->lock);
  pr_served_t *m = version ? find_locked(ms, name, version) : default_version_locked(ms, name);
  *st = PR_ERR_NOT_FOUND;
  if (m && m->state == PR_MODEL_LOADING) {
    *st = PR_ERR_BUSY;
    if (why) snprintf(why, why_len, "model '%s' version %s is loading", name, m->entry.version);
    m = NULL;
  } else if (m && m->state != PR_MODEL_READY) {
    /* the reason is the load's error (quoted from files, already UTF-8
     * safe) or "unloaded": a client that retries gets the same answer */
    *st = PR_ERR_MODEL_UNAVAILABLE;
    if (why)
      snprintf(why, why_len, "model '%s' version %s is not available: %s", name, m->entry.version,
               m->reason);
    m = NULL;
  }
  if (m) atomic_fetch_add(&m->refs, 1), *st = PR_OK;
  assert(!m || m->state == PR_MODEL_READY);
  pr__rwlock_unlock(&ms->lock);
  return m;
}

void pr__models_put(pr_served_t *m) {
  int was = atomic_fetch_sub(&m->refs, 1);
  assert(was > 0);
  (void)was;
}

void pr__models_share(pr_models_t *ms, const pr_served_t *m, bool *divided,
                      pr_joint_share_t *share) {
  pr__rwlock_rdlock(&ms->lock);
  *divided = m->divided;
  *share = m->share;
  pr__rwlock_unlock(&ms->lock);
}

int pr__models_cores(const pr_models_t *ms) {
  return pr_models__cores(ms);
}

uint64_t pr__models_core_moves(pr_models_t *ms) {
  return atomic_load(&ms->core_moves);
}

void pr__models_each(pr_models_t *ms, void (*fn)(pr_served_t *m, void *ctx), void *ctx) {
  pr__rwlock_rdlock(&ms->lock);
  for (int i = 0; i < ms->n_models; i++) fn(ms->models[i], ctx);
  pr__rwlock_unlock(&ms->lock);
}

void pr__models_with(pr_models_t *ms, const char *name, void (*fn)(pr_served_t *m, void *ctx),
                     void *ctx) {
  pr__rwlock_rdlock(&ms->lock);
  int n = 0;
  for (int i = 0; i < ms->n_models; i++)
    if (!strcmp(ms->models[i]->entry.name, name)) fn(ms->models[i], ctx), n++;
  if (!n) fn(NULL, ctx);
  pr__rwlock_unlock(&ms->lock);
}

void pr__models_destroy(pr_models_t *ms) {
  if (!ms) return;
  pr_models__balance_stop(ms); /* before the models leave */
  pr__lock(&ms->admin);
  for (int i = 0; i < ms->n_models; i++) {
    pr_served_t *m = ms->models[i];
    if (m->state == PR_MODEL_READY) unload_locked(ms, m);
    assert(atomic_load(&m->refs) == 0); /* the server answered every request */
    free(m);
  }
  pr__unlock(&ms->admin);
  pr__rwlock_destroy(&ms->lock);
  pr__lock_destroy(&ms->admin);
  free(ms->models);
  free(ms);
}
