/* The HTTP server: routes of the Open Inference Protocol, the repository
 * extension, stats, plan and Prometheus metrics, over libmicrohttpd with one
 * thread per connection (an infer call blocks its connection's thread until
 * the scheduler answers).
 *
 * Ownership and locks: `lock` (a rwlock) guards the models array; a handler
 * takes a reference on the model it serves (atomic refs) under the read lock,
 * so unload can wait for in-flight requests before freeing. Load and unload
 * hold `admin` so only one runs at a time. Lock order: admin, lock. */
#define _GNU_SOURCE
#include "server/server.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "packrat/profiler.h"
#include "server/protocol.h"
#include "server/repository.h"
#include "server/scheduler.h"

#define MAX_MODELS 64

typedef enum { M_UNAVAILABLE = 0, M_LOADING, M_READY } model_state_t;

typedef struct {
  pr_repo_entry_t entry;
  pr_model_config_t cfg;
  model_state_t state;
  char reason[512];
  pr_model_t *model;
  pr_sched_t *sched;
  pr_proto_model_t proto;
  _Atomic int refs;
} served_t;

struct pr_server {
  pr_server_config_t cfg;
  char repository[4096];
  int cpus[4096], n_cpus;
  struct MHD_Daemon *daemon;
  int port;
  pthread_rwlock_t lock;
  pthread_mutex_t admin;
  served_t *models[MAX_MODELS];
  int n_models;
  _Atomic uint64_t http_requests, http_errors;
  _Atomic int in_progress; /* requests received and not yet answered */
};

void pr_server_config_default(pr_server_config_t *c) {
  memset(c, 0, sizeof *c);
  c->host = "127.0.0.1";
  c->port = 8000;
  c->max_batch = 8;
  c->max_queue_delay_us = 2000;
  c->queue_capacity = 256;
  c->request_timeout_s = 30;
  c->max_body_bytes = (size_t)64 << 20;
  c->load_all = true;
}

/* ---- loading ---- */

static void unload_locked(pr_server_t *s, served_t *m) {
  /* wait for in-flight handlers, then stop the instances (they finish the queue) */
  while (atomic_load(&m->refs) > 0) usleep(1000);
  pr_sched_destroy(m->sched);
  m->sched = NULL;
  pr_engine_model_destroy(m->model);
  m->model = NULL;
}

static pr_status_t load_model(pr_server_t *s, served_t *m, char *err, size_t err_len) {
  pr_model_config_t *c = &m->cfg;
  memset(c, 0, sizeof *c);
  c->max_batch = s->cfg.max_batch;
  c->max_queue_delay_us = s->cfg.max_queue_delay_us;
  c->queue_capacity = s->cfg.queue_capacity;
  c->request_timeout_s = s->cfg.request_timeout_s;
  snprintf(c->plan, sizeof c->plan, "auto");
  c->autoscale = true;
  c->estimator = 1;
  if (m->entry.config[0] && pr_repo_read_config(m->entry.config, c, err, err_len))
    return PR_ERR_INVALID;
  pr_status_t st = pr_engine_model_load_file(m->entry.path, &m->model, err, err_len);
  if (st) return st;
  pr_session_options_t base = pr_session_options_default();
  const char *names[8];
  int64_t values[8];
  for (int i = 0; i < c->n_dims; i++) names[i] = c->dim_names[i], values[i] = c->dim_values[i];
  base.n_dims = c->n_dims;
  base.dim_names = names;
  base.dim_values = values;
  /* the protocol's view: shapes at batch 1 with axis 0 marked as the batch */
  pr_session_t *probe;
  base.batch = 1;
  if ((st = pr_engine_session_create(m->model, &base, &probe, err, err_len))) return st;
  pr_proto_model_t *p = &m->proto;
  p->n_inputs = pr_engine_model_num_inputs(m->model);
  p->n_outputs = pr_engine_model_num_outputs(m->model);
  p->max_batch = c->max_batch;
  for (int i = 0; i < p->n_inputs && i < PR_SCHED_MAX_IO; i++) {
    pr_engine_session_input(probe, i, &p->inputs[i]);
    p->inputs[i].dims[0] = -1;
  }
  for (int i = 0; i < p->n_outputs && i < PR_SCHED_MAX_IO; i++) {
    pr_engine_session_output(probe, i, &p->outputs[i]);
    p->outputs[i].dims[0] = -1;
  }
  pr_engine_session_destroy(probe);
  /* plans: the fixed one, or one per power-of-two batch up to the max (and
   * the max itself) when following the load, else the max batch's */
  pr_plan_t *plans = calloc(PR_SCHED_MAX_CONFIGS, sizeof *plans);
  int n_plans = 0, active = 0;
  if (!plans) return PR_ERR_NOMEM;
  if (strcmp(c->plan, "auto")) {
    st = pr_plan_parse(c->plan, NULL, &plans[0], err, err_len);
    n_plans = 1;
  } else {
    /* profile (cached) on the server's cores */
    pr_profile_t prof;
    char cache[4096];
    int grid_max = c->max_batch;
    pr_profile_options_t po = {
        .max_threads = s->n_cpus < pr_topology_num_cores() ? s->n_cpus : pr_topology_num_cores(),
        .max_batch = grid_max,
        .cpus = s->cpus,
        .n_cpus = s->n_cpus,
        .max_point_s = 3.0};
    const char *sha = pr_engine_model_sha256(m->model);
    const char *cpu = pr_topology_cpu_name();
    bool have = false;
    if (pr_profile_cache_path(sha, cpu, po.max_threads, &base, cache, sizeof cache) == PR_OK &&
        pr_profile_load(cache, &prof, err, err_len) == PR_OK) {
      have = pr_profile_matches(&prof, sha, cpu, po.max_threads, grid_max);
      if (!have) pr_profile_free(&prof);
    }
    if (have) {
      pr_log(PR_LOG_INFO, "model %s: cached profile %s", m->entry.name, cache);
    } else {
      pr_log(PR_LOG_INFO, "model %s: profiling on %d cores up to batch %d", m->entry.name,
             po.max_threads, grid_max);
      if ((st = pr_profile_measure(m->model, m->entry.name, &base, &po, &prof, err, err_len))) {
        free(plans);
        return st;
      }
      char e2[256];
      if (pr_profile_save(&prof, cache, e2, sizeof e2)) pr_log(PR_LOG_WARN, "%s", e2);
    }
    int lo = c->autoscale ? (c->min_batch > 0 ? c->min_batch : 1) : c->max_batch;
    for (int b = lo;
         !st && n_plans<PR_SCHED_MAX_CONFIGS; b = b * 2> c->max_batch && b < c->max_batch
             ? c->max_batch
             : b * 2) {
      if (b > c->max_batch) break;
      st = pr_plan_optimize(&prof, b, po.max_threads, &plans[n_plans]);
      if (st)
        pr_errf(err, err_len, "no plan for batch %d", b);
      else
        active = n_plans++;
    }
    pr_profile_free(&prof);
  }
  if (!st) {
    pr_sched_config_t sc = {.max_batch = c->max_batch,
                            .queue_capacity = c->queue_capacity,
                            .max_queue_delay_s = c->max_queue_delay_us * 1e-6,
                            .timeout_s = c->request_timeout_s};
    base.batch = 1;
    st = pr_sched_create(m->model, plans, n_plans, active, s->cpus, s->n_cpus, &base, &sc,
                         &m->sched, err, err_len);
    if (!st && n_plans > 1) pr_sched_set_auto(m->sched, true, c->estimator, 1.0);
  }
  free(plans);
  return st;
}

static served_t *find_locked(pr_server_t *s, const char *name) {
  for (int i = 0; i < s->n_models; i++)
    if (!strcmp(s->models[i]->entry.name, name)) return s->models[i];
  return NULL;
}

/* Loads (or reloads) a model by name from the repository. */
static pr_status_t load_by_name(pr_server_t *s, const char *name, char *err, size_t err_len) {
  pr_repo_entry_t *entries = calloc(MAX_MODELS, sizeof *entries);
  if (!entries) return PR_ERR_NOMEM;
  int n = pr_repo_scan(s->repository, entries, MAX_MODELS);
  int k = -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(entries[i].name, name)) k = i;
  if (k < 0) {
    free(entries);
    pr_errf(err, err_len, "no model '%s' in the repository", name);
    return PR_ERR_NOT_FOUND;
  }
  pthread_mutex_lock(&s->admin);
  pthread_rwlock_wrlock(&s->lock);
  served_t *m = find_locked(s, name);
  if (!m && s->n_models < MAX_MODELS) {
    m = calloc(1, sizeof *m);
    if (m) s->models[s->n_models++] = m;
  }
  if (!m) {
    pthread_rwlock_unlock(&s->lock);
    pthread_mutex_unlock(&s->admin);
    free(entries);
    return PR_ERR_NOMEM;
  }
  bool was_loaded = m->state == M_READY;
  m->state = M_LOADING;
  pthread_rwlock_unlock(&s->lock);
  if (was_loaded) unload_locked(s, m);
  m->entry = entries[k];
  free(entries);
  pr_status_t st = load_model(s, m, err, err_len);
  pthread_rwlock_wrlock(&s->lock);
  if (st) {
    pr_sched_destroy(m->sched);
    m->sched = NULL;
    pr_engine_model_destroy(m->model);
    m->model = NULL;
    m->state = M_UNAVAILABLE;
    snprintf(m->reason, sizeof m->reason, "%s", err);
  } else {
    m->state = M_READY;
    m->reason[0] = 0;
  }
  pthread_rwlock_unlock(&s->lock);
  pthread_mutex_unlock(&s->admin);
  return st;
}

static pr_status_t unload_by_name(pr_server_t *s, const char *name) {
  pthread_mutex_lock(&s->admin);
  pthread_rwlock_wrlock(&s->lock);
  served_t *m = find_locked(s, name);
  if (!m || m->state != M_READY) {
    pthread_rwlock_unlock(&s->lock);
    pthread_mutex_unlock(&s->admin);
    return PR_ERR_NOT_FOUND;
  }
  m->state = M_UNAVAILABLE;
  snprintf(m->reason, sizeof m->reason, "unloaded");
  pthread_rwlock_unlock(&s->lock);
  unload_locked(s, m);
  pthread_mutex_unlock(&s->admin);
  return PR_OK;
}

/* A ready model with a reference taken (release with put_model), or NULL. */
static served_t *get_model(pr_server_t *s, const char *name, const char *version, int *status) {
  pthread_rwlock_rdlock(&s->lock);
  served_t *m = find_locked(s, name);
  *status = 404;
  if (m && version && strcmp(version, m->entry.version))
    m = NULL;
  else if (m && m->state != M_READY)
    *status = 503, m = NULL;
  if (m) atomic_fetch_add(&m->refs, 1), *status = 200;
  pthread_rwlock_unlock(&s->lock);
  return m;
}

static void put_model(served_t *m) {
  atomic_fetch_sub(&m->refs, 1);
}

/* ---- HTTP ---- */

typedef struct {
  char *body;
  size_t len, cap;
  bool too_large;
} conn_t;

static enum MHD_Result reply(struct MHD_Connection *c, int status, char *body, size_t len,
                             const char *type, size_t json_len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  MHD_add_response_header(r, "Content-Type", type);
  if (json_len) {
    char h[32];
    snprintf(h, sizeof h, "%zu", json_len);
    MHD_add_response_header(r, "Inference-Header-Content-Length", h);
  }
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_static(struct MHD_Connection *c, int status, const char *body) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

/* o may be NULL (a json_pack that failed): 500. */
static enum MHD_Result reply_json(struct MHD_Connection *c, int status, json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!s) return reply_static(c, 500, "{\"error\":\"cannot encode the response\"}");
  return reply(c, status, s, strlen(s), "application/json", 0);
}

static enum MHD_Result reply_error(pr_server_t *s, struct MHD_Connection *c, int status,
                                   const char *msg) {
  atomic_fetch_add(&s->http_errors, 1);
  char *b = pr_proto_error(msg);
  if (!b) return reply_static(c, status, "{\"error\":\"out of memory\"}");
  return reply(c, status, b, strlen(b), "application/json", 0);
}

static json_t *tensor_meta(const pr_tensor_info_t *t) {
  json_t *shape = json_array();
  for (int d = 0; d < t->rank; d++) json_array_append_new(shape, json_integer(t->dims[d]));
  return json_pack("{s:s, s:s, s:o}", "name", t->name, "datatype", pr_proto_datatype(t->dtype),
                   "shape", shape);
}

static json_t *plan_json(served_t *m) {
  const pr_plan_t *p = pr_sched_plan(m->sched);
  const int *cpus = pr_sched_cpus(m->sched);
  json_t *insts = json_array();
  for (int i = 0; i < p->n_instances; i++) {
    const pr_plan_instance_t *in = &p->instances[i];
    json_t *cl = json_array();
    for (int k = 0; k < in->threads; k++)
      json_array_append_new(cl, json_integer(cpus[in->first_core + k]));
    json_array_append_new(
        insts, json_pack("{s:i, s:i, s:i, s:o, s:f}", "instance", i, "threads", in->threads,
                         "batch", in->batch, "cores", cl, "predicted_latency_ms", in->latency_ms));
  }
  json_t *prepared = json_array();
  for (int c = 0; c < pr_sched_num_configs(m->sched); c++) {
    const pr_plan_t *q = pr_sched_config_plan(m->sched, c);
    char spec[512] = "";
    size_t off = 0;
    for (int k = 0; k < q->n_instances && off < sizeof spec; k++)
      off += (size_t)snprintf(spec + off, sizeof spec - off, "%s%dx%d", k ? "," : "",
                              q->instances[k].threads, q->instances[k].batch);
    json_array_append_new(prepared, json_pack("{s:i, s:s, s:f}", "batch", q->batch, "plan", spec,
                                              "predicted_latency_ms", q->latency_ms));
  }
  return json_pack("{s:s, s:s, s:i, s:f, s:b, s:o, s:o}", "name", m->entry.name, "version",
                   m->entry.version, "batch", p->batch, "predicted_latency_ms", p->latency_ms,
                   "autoscale", pr_sched_auto(m->sched), "instances", insts, "prepared", prepared);
}

static enum MHD_Result do_infer(pr_server_t *s, struct MHD_Connection *c, served_t *m, conn_t *cn) {
  const char *hl =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
  size_t json_len = cn->len;
  if (hl) {
    char *end;
    long long v = strtoll(hl, &end, 10);
    if (*end || v < 0 || (size_t)v > cn->len)
      return reply_error(s, c, 400,
                         "Inference-Header-Content-Length must be a length within the body");
    json_len = (size_t)v;
  }
  pr_request_t *r = pr_request_new();
  if (!r) return reply_error(s, c, 500, "out of memory");
  pr_proto_infer_t q;
  char err[512];
  int status = pr_proto_parse_infer(&m->proto, cn->body ? cn->body : "", cn->len, json_len, r, &q,
                                    err, sizeof err);
  if (status != 200) {
    pr_proto_infer_clear(&q);
    pr_request_free(r);
    return reply_error(s, c, status, err);
  }
  if (pr_sched_submit(m->sched, r) != PR_OK) {
    pr_proto_infer_clear(&q);
    pr_request_free(r);
    return reply_error(s, c, 503, "the model's queue is full; retry later");
  }
  pr_request_wait(r);
  enum MHD_Result ret;
  if (r->status) {
    ret = reply_error(s, c, r->http_status ? r->http_status : 500, r->err);
  } else {
    char *body;
    size_t len, jl;
    status = pr_proto_infer_response(&m->proto, m->entry.name, m->entry.version, r, &q, &body, &len,
                                     &jl);
    if (status != 200)
      ret = reply_error(s, c, 500, "cannot encode the response");
    else
      ret = reply(c, 200, body, len, jl ? "application/octet-stream" : "application/json", jl);
  }
  pr_proto_infer_clear(&q);
  pr_request_free(r);
  return ret;
}

/* POST .../plan {"plan": "THREADSxBATCH,..."} pins a plan by hand (prepared
 * first if new); {"plan": "auto"} hands control back to the autoscaler. */
static enum MHD_Result set_plan(pr_server_t *s, struct MHD_Connection *c, served_t *m, conn_t *cn) {
  json_error_t je;
  json_t *root = cn->body ? json_loadb(cn->body, cn->len, 0, &je) : NULL;
  const char *spec = root ? json_string_value(json_object_get(root, "plan")) : NULL;
  char err[512];
  enum MHD_Result ret;
  if (!spec) {
    ret = reply_error(s, c, 400,
                      "expected {\"plan\": \"auto\"} or {\"plan\": \"THREADSxBATCH,...\"}");
  } else if (!strcmp(spec, "auto")) {
    if (pr_sched_num_configs(m->sched) < 2) {
      ret = reply_error(s, c, 400,
                        "this model has one prepared plan: nothing to follow the load with");
    } else {
      pr_sched_set_auto(m->sched, true, m->cfg.estimator, 1.0);
      ret = reply_json(c, 200, plan_json(m));
    }
  } else {
    pr_plan_t *plan = malloc(sizeof *plan);
    int idx = -1;
    if (plan && pr_plan_parse(spec, NULL, plan, err, sizeof err) == PR_OK) {
      if (plan->batch > m->cfg.max_batch)
        snprintf(err, sizeof err, "the plan's batches add up to %d, over the max batch %d",
                 plan->batch, m->cfg.max_batch);
      else
        idx = pr_sched_add_plan(m->sched, plan, err, sizeof err);
    }
    free(plan);
    if (idx < 0) {
      ret = reply_error(s, c, 400, err);
    } else {
      pr_sched_set_auto(m->sched, false, 0, 0);
      pr_sched_switch(m->sched, idx, "set by hand");
      ret = reply_json(c, 200, plan_json(m));
    }
  }
  json_decref(root);
  return ret;
}

static void write_metrics(pr_server_t *s, FILE *f) {
  fprintf(f,
          "# HELP packrat_requests_total Inference requests by outcome.\n# TYPE "
          "packrat_requests_total counter\n");
  pthread_rwlock_rdlock(&s->lock);
  for (int i = 0; i < s->n_models; i++) {
    served_t *m = s->models[i];
    if (m->state != M_READY) continue;
    pr_sched_stats_t *st = pr_sched_stats(m->sched);
    const char *n = m->entry.name;
    fprintf(f, "packrat_requests_total{model=\"%s\",outcome=\"success\"} %llu\n", n,
            (unsigned long long)atomic_load(&st->success));
    fprintf(f, "packrat_requests_total{model=\"%s\",outcome=\"failure\"} %llu\n", n,
            (unsigned long long)atomic_load(&st->failed));
    fprintf(f, "packrat_requests_total{model=\"%s\",outcome=\"rejected\"} %llu\n", n,
            (unsigned long long)atomic_load(&st->rejected));
    fprintf(f, "packrat_requests_total{model=\"%s\",outcome=\"timeout\"} %llu\n", n,
            (unsigned long long)atomic_load(&st->timed_out));
  }
  struct {
    const char *name, *help;
    size_t off;
  } hs[] = {
      {"packrat_request_duration_seconds", "Time from enqueue to answer.",
       offsetof(pr_sched_stats_t, request_s)},
      {"packrat_queue_duration_seconds", "Time a request waited in the queue.",
       offsetof(pr_sched_stats_t, queue_s)},
      {"packrat_compute_duration_seconds", "Time of one batched execution.",
       offsetof(pr_sched_stats_t, compute_s)},
      {"packrat_batch_size", "Rows per batched execution.", offsetof(pr_sched_stats_t, batch)}};
  for (size_t h = 0; h < sizeof hs / sizeof hs[0]; h++) {
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", hs[h].name, hs[h].help, hs[h].name);
    for (int i = 0; i < s->n_models; i++) {
      served_t *m = s->models[i];
      if (m->state != M_READY) continue;
      char labels[200];
      snprintf(labels, sizeof labels, "model=\"%s\"", m->entry.name);
      pr_hist_write((const pr_hist_t *)((const char *)pr_sched_stats(m->sched) + hs[h].off), f,
                    hs[h].name, labels);
    }
  }
  fprintf(f,
          "# HELP packrat_reconfigurations_total Plan switches.\n# TYPE "
          "packrat_reconfigurations_total counter\n");
  for (int i = 0; i < s->n_models; i++)
    if (s->models[i]->state == M_READY)
      fprintf(
          f, "packrat_reconfigurations_total{model=\"%s\"} %llu\n", s->models[i]->entry.name,
          (unsigned long long)atomic_load(&pr_sched_stats(s->models[i]->sched)->reconfigurations));
  fprintf(f,
          "# HELP packrat_reconfiguration_duration_seconds Time a plan switch took.\n# TYPE "
          "packrat_reconfiguration_duration_seconds histogram\n");
  for (int i = 0; i < s->n_models; i++) {
    if (s->models[i]->state != M_READY) continue;
    char labels[200];
    snprintf(labels, sizeof labels, "model=\"%s\"", s->models[i]->entry.name);
    pr_hist_write(&pr_sched_stats(s->models[i]->sched)->switch_s, f,
                  "packrat_reconfiguration_duration_seconds", labels);
  }
  fprintf(f, "# HELP packrat_queue_depth Requests waiting.\n# TYPE packrat_queue_depth gauge\n");
  for (int i = 0; i < s->n_models; i++)
    if (s->models[i]->state == M_READY)
      fprintf(f, "packrat_queue_depth{model=\"%s\"} %d\n", s->models[i]->entry.name,
              pr_sched_queue_depth(s->models[i]->sched));
  fprintf(f,
          "# HELP packrat_plan_instances Instances of the current plan.\n# TYPE "
          "packrat_plan_instances gauge\n");
  for (int i = 0; i < s->n_models; i++)
    if (s->models[i]->state == M_READY)
      fprintf(f, "packrat_plan_instances{model=\"%s\"} %d\n", s->models[i]->entry.name,
              pr_sched_plan(s->models[i]->sched)->n_instances);
  fprintf(f,
          "# HELP packrat_plan_instance_threads Threads of each instance of the current plan.\n# "
          "TYPE packrat_plan_instance_threads gauge\n");
  for (int i = 0; i < s->n_models; i++) {
    if (s->models[i]->state != M_READY) continue;
    const pr_plan_t *p = pr_sched_plan(s->models[i]->sched);
    for (int k = 0; k < p->n_instances; k++)
      fprintf(f, "packrat_plan_instance_threads{model=\"%s\",instance=\"%d\"} %d\n",
              s->models[i]->entry.name, k, p->instances[k].threads);
  }
  fprintf(f,
          "# HELP packrat_plan_instance_batch Planned batch of each instance.\n# TYPE "
          "packrat_plan_instance_batch gauge\n");
  for (int i = 0; i < s->n_models; i++) {
    if (s->models[i]->state != M_READY) continue;
    const pr_plan_t *p = pr_sched_plan(s->models[i]->sched);
    for (int k = 0; k < p->n_instances; k++)
      fprintf(f, "packrat_plan_instance_batch{model=\"%s\",instance=\"%d\"} %d\n",
              s->models[i]->entry.name, k, p->instances[k].batch);
  }
  pthread_rwlock_unlock(&s->lock);
  fprintf(f,
          "# HELP packrat_http_requests_total HTTP requests received.\n# TYPE "
          "packrat_http_requests_total counter\n");
  fprintf(f, "packrat_http_requests_total %llu\n",
          (unsigned long long)atomic_load(&s->http_requests));
  fprintf(f,
          "# HELP packrat_http_errors_total HTTP requests answered with an error.\n# TYPE "
          "packrat_http_errors_total counter\n");
  fprintf(f, "packrat_http_errors_total %llu\n", (unsigned long long)atomic_load(&s->http_errors));
}

/* Splits url into at most 8 segments (in place in buf). */
static int split_url(const char *url, char *buf, size_t len, char **seg) {
  snprintf(buf, len, "%s", url);
  int n = 0;
  char *save = NULL; /* strtok_r: handlers run on many threads at once */
  for (char *p = strtok_r(buf, "/", &save); p && n < 8; p = strtok_r(NULL, "/", &save))
    seg[n++] = p;
  return n;
}

static enum MHD_Result route(pr_server_t *s, struct MHD_Connection *c, const char *method,
                             const char *url, conn_t *cn) {
  char buf[2048], *seg[8];
  int n = split_url(url, buf, sizeof buf, seg);
  bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (n == 1 && !strcmp(seg[0], "metrics") && get) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    write_metrics(s, f);
    fclose(f);
    return reply(c, 200, text, len, "text/plain; version=0.0.4", 0);
  }
  if (n < 1 || strcmp(seg[0], "v2")) return reply_error(s, c, 404, "not found");
  if (n == 1 && get)
    return reply_json(
        c, 200,
        json_pack("{s:s, s:s, s:[s,s,s,s]}", "name", "packrat", "version", PR_VERSION, "extensions",
                  "binary_tensor_data", "model_repository", "statistics", "plan"));
  if (n == 3 && !strcmp(seg[1], "health") && get) {
    if (!strcmp(seg[2], "live")) return reply_json(c, 200, json_pack("{s:b}", "live", 1));
    if (!strcmp(seg[2], "ready")) {
      bool ready = true;
      pthread_rwlock_rdlock(&s->lock);
      for (int i = 0; i < s->n_models; i++)
        ready &= s->models[i]->state == M_READY || s->models[i]->reason[0] == 'u';
      pthread_rwlock_unlock(&s->lock);
      return reply_json(c, ready ? 200 : 503, json_pack("{s:b}", "ready", ready));
    }
  }
  if (n >= 2 && !strcmp(seg[1], "repository") && post) {
    if (n == 3 && !strcmp(seg[2], "index")) {
      pr_repo_entry_t *entries = calloc(MAX_MODELS, sizeof *entries);
      int cnt = entries ? pr_repo_scan(s->repository, entries, MAX_MODELS) : -1;
      json_t *arr = json_array();
      pthread_rwlock_rdlock(&s->lock);
      for (int i = 0; i < cnt; i++) {
        served_t *m = find_locked(s, entries[i].name);
        const char *state = !m                      ? "UNAVAILABLE"
                            : m->state == M_READY   ? "READY"
                            : m->state == M_LOADING ? "LOADING"
                                                    : "UNAVAILABLE";
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s}", "name", entries[i].name,
                                             "version", entries[i].version, "state", state,
                                             "reason", m ? m->reason : "not loaded"));
      }
      pthread_rwlock_unlock(&s->lock);
      free(entries);
      return reply_json(c, 200, arr);
    }
    if (n == 5 && !strcmp(seg[2], "models") &&
        (!strcmp(seg[4], "load") || !strcmp(seg[4], "unload"))) {
      char err[1024];
      if (!strcmp(seg[4], "load")) {
        pr_status_t st = load_by_name(s, seg[3], err, sizeof err);
        if (st) return reply_error(s, c, st == PR_ERR_NOT_FOUND ? 404 : 400, err);
      } else if (unload_by_name(s, seg[3])) {
        return reply_error(s, c, 404, "no such loaded model");
      }
      return reply_json(c, 200, json_object());
    }
  }
  if (n >= 3 && !strcmp(seg[1], "models")) {
    const char *name = seg[2], *version = NULL;
    int rest = 3;
    if (n >= 5 && !strcmp(seg[3], "versions")) version = seg[4], rest = 5;
    const char *action = n > rest ? seg[rest] : NULL;
    if (n > rest + 1) return reply_error(s, c, 404, "not found");
    if (action && !strcmp(action, "ready") && get) {
      int status;
      served_t *m = get_model(s, name, version, &status);
      if (m) put_model(m);
      if (status == 404) return reply_error(s, c, 404, "unknown model or version");
      return reply_json(c, m ? 200 : 503,
                        json_pack("{s:s, s:b}", "name", name, "ready", m != NULL));
    }
    int status;
    served_t *m = get_model(s, name, version, &status);
    if (!m)
      return reply_error(s, c, status,
                         status == 404 ? "unknown model or version" : "model not ready");
    enum MHD_Result ret;
    if (!action && get) {
      json_t *ins = json_array(), *outs = json_array();
      for (int i = 0; i < m->proto.n_inputs; i++)
        json_array_append_new(ins, tensor_meta(&m->proto.inputs[i]));
      for (int i = 0; i < m->proto.n_outputs; i++)
        json_array_append_new(outs, tensor_meta(&m->proto.outputs[i]));
      ret = reply_json(c, 200,
                       json_pack("{s:s, s:[s], s:s, s:o, s:o, s:{s:i}}", "name", name, "versions",
                                 m->entry.version, "platform", "onnx", "inputs", ins, "outputs",
                                 outs, "parameters", "max_batch_size", m->cfg.max_batch));
    } else if (action && !strcmp(action, "infer") && post) {
      ret = cn->too_large ? reply_error(s, c, 413, "request body over the limit")
                          : do_infer(s, c, m, cn);
    } else if (action && !strcmp(action, "stats") && get) {
      pr_sched_stats_t *st = pr_sched_stats(m->sched);
      uint64_t ok = atomic_load(&st->success);
      ret = reply_json(c, 200,
                       json_pack("{s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:I, s:I, s:f, s:f, s:i}",
                                 "name", name, "version", m->entry.version, "requests", "success",
                                 (json_int_t)ok, "failure", (json_int_t)atomic_load(&st->failed),
                                 "rejected", (json_int_t)atomic_load(&st->rejected), "timeout",
                                 (json_int_t)atomic_load(&st->timed_out), "executions",
                                 (json_int_t)atomic_load(&st->executions), "rows_executed",
                                 (json_int_t)atomic_load(&st->rows_executed), "queue_time_ms_total",
                                 atomic_load(&st->queue_us) / 1e3, "compute_time_ms_total",
                                 atomic_load(&st->compute_us) / 1e3, "queue_depth",
                                 pr_sched_queue_depth(m->sched)));
    } else if (action && !strcmp(action, "plan") && get) {
      ret = reply_json(c, 200, plan_json(m));
    } else if (action && !strcmp(action, "plan") && post) {
      ret = set_plan(s, c, m, cn);
    } else {
      ret = reply_error(s, c, 405, "method or endpoint not supported");
    }
    put_model(m);
    return ret;
  }
  return reply_error(s, c, 404, "not found");
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls) {
  pr_server_t *s = cls;
  conn_t *cn = *con_cls;
  if (!cn) {
    cn = calloc(1, sizeof *cn);
    if (!cn) return MHD_NO;
    *con_cls = cn;
    atomic_fetch_add(&s->http_requests, 1);
    atomic_fetch_add(&s->in_progress, 1);
    return MHD_YES;
  }
  if (*upload_size) {
    if (!cn->too_large && cn->len + *upload_size > s->cfg.max_body_bytes) {
      cn->too_large = true;
      free(cn->body);
      cn->body = NULL;
      cn->len = cn->cap = 0;
    }
    if (!cn->too_large) {
      if (cn->len + *upload_size + 1 > cn->cap) {
        size_t cap = (cn->len + *upload_size + 1) * 2;
        if (cap > s->cfg.max_body_bytes + 1) cap = s->cfg.max_body_bytes + 1;
        char *nb = realloc(cn->body, cap);
        if (!nb) return MHD_NO;
        cn->body = nb;
        cn->cap = cap;
      }
      memcpy(cn->body + cn->len, upload, *upload_size);
      cn->len += *upload_size;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  return route(s, c, method, url, cn);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode t) {
  pr_server_t *s = cls;
  conn_t *cn = *con_cls;
  if (cn) {
    free(cn->body);
    free(cn);
    atomic_fetch_sub(&s->in_progress, 1);
  }
  *con_cls = NULL;
}

pr_status_t pr_server_start(const pr_server_config_t *cfg, pr_server_t **out, char *err,
                            size_t err_len) {
  *out = NULL;
  pr_server_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->cfg = *cfg;
  snprintf(s->repository, sizeof s->repository, "%s", cfg->repository);
  pthread_rwlock_init(&s->lock, NULL);
  pthread_mutex_init(&s->admin, NULL);
  if (cfg->n_cpus > 0) {
    s->n_cpus = cfg->n_cpus < 4096 ? cfg->n_cpus : 4096;
    memcpy(s->cpus, cfg->cpus, sizeof(int) * (size_t)s->n_cpus);
  } else {
    s->n_cpus = pr_topology_cpu_order(s->cpus, 4096);
  }
  pr_repo_entry_t *entries = calloc(MAX_MODELS, sizeof *entries);
  int n = entries ? pr_repo_scan(cfg->repository, entries, MAX_MODELS) : -1;
  if (n < 0) {
    free(entries);
    pr_errf(err, err_len, "cannot read the model repository %s", cfg->repository);
    pr_server_stop(s);
    return PR_ERR_IO;
  }
  for (int i = 0; i < n && cfg->load_all; i++) {
    char e[1024];
    pr_log(PR_LOG_INFO, "loading model %s version %s from %s", entries[i].name, entries[i].version,
           entries[i].path);
    if (load_by_name(s, entries[i].name, e, sizeof e))
      pr_log(PR_LOG_ERROR, "model %s: %s", entries[i].name, e);
  }
  free(entries);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
  if (inet_pton(AF_INET, cfg->host, &addr.sin_addr) != 1) {
    pr_errf(err, err_len, "--host must be an IPv4 address, got '%s'", cfg->host);
    pr_server_stop(s);
    return PR_ERR_INVALID;
  }
  s->daemon = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
      (uint16_t)cfg->port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, &addr,
      MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_CONNECTION_LIMIT, 1024u,
      MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_END);
  if (!s->daemon) {
    pr_errf(err, err_len, "cannot listen on %s:%d", cfg->host, cfg->port);
    pr_server_stop(s);
    return PR_ERR_IO;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : cfg->port;
  *out = s;
  return PR_OK;
}

int pr_server_port(const pr_server_t *s) {
  return s->port;
}

void pr_server_describe(pr_server_t *s, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = 0;
  pthread_rwlock_rdlock(&s->lock);
  for (int i = 0; i < s->n_models && off < len; i++) {
    served_t *m = s->models[i];
    if (m->state != M_READY) {
      off += (size_t)snprintf(buf + off, len - off, "model %s: not loaded (%s)\n", m->entry.name,
                              m->reason);
      continue;
    }
    const pr_plan_t *p = pr_sched_plan(m->sched);
    off += (size_t)snprintf(buf + off, len - off,
                            "model %s v%s: max batch %d, %d plan%s prepared%s, plan", m->entry.name,
                            m->entry.version, m->cfg.max_batch, pr_sched_num_configs(m->sched),
                            pr_sched_num_configs(m->sched) > 1 ? "s" : "",
                            pr_sched_auto(m->sched) ? " (following the load)" : "");
    for (int k = 0; k < p->n_instances && off < len; k++)
      off += (size_t)snprintf(buf + off, len - off, "%s %dx%d", k ? "," : "",
                              p->instances[k].threads, p->instances[k].batch);
    if (off < len)
      off +=
          (size_t)snprintf(buf + off, len - off, " (predicted %.1f ms per batch)\n", p->latency_ms);
  }
  pthread_rwlock_unlock(&s->lock);
}

void pr_server_stop(pr_server_t *s) {
  if (!s) return;
  if (s->daemon) {
    /* stop accepting, let every request already received (or still
     * uploading) be answered, then close the connections */
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    for (int i = 0; i < 120000 && atomic_load(&s->in_progress) > 0; i++) usleep(1000);
    MHD_stop_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
  }
  for (int i = 0; i < s->n_models; i++) {
    served_t *m = s->models[i];
    if (m->state == M_READY) unload_locked(s, m);
    free(m);
  }
  pthread_rwlock_destroy(&s->lock);
  pthread_mutex_destroy(&s->admin);
  free(s);
}
