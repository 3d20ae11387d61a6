/* The HTTP server: the route handlers of the Open Inference Protocol, the
 * repository extension, stats, plan and metrics; start and drain. The
 * libmicrohttpd callbacks (headers, bodies, replies, suspended requests)
 * live in http.c, the state both share in server_internal.h. Models and
 * their lifecycle live in models.c, the routes in router.c, the metrics
 * text in prometheus.c.
 *
 * Notes on the design:
 * - libmicrohttpd serves every connection from a fixed pool of threads
 *   (epoll; `http_threads`), at most `max_connections` at once
 *   (`max_connections_per_client` from one address), closing a connection
 *   silent for `idle_timeout_s`. No handler blocks: an infer request
 *   suspends its connection until the scheduler answers, and the slow
 *   admin calls run on threads of their own (http.c, "suspended requests").
 * - Draining (pr__server_stop): new connections are refused, every answer
 *   carries Connection: close, requests that reached the server are
 *   answered, then idle connections close; bounded by
 *   `shutdown_timeout_s`.
 * - Limits are decided from the headers, before any body byte is read: a
 *   Content-Length over the route's body limit is answered at once
 *   (PR_ERR_TOO_LARGE, 413); the bytes a request will hold are reserved
 *   against `max_inflight_bytes` (PR_ERR_BUSY, 503, beyond it) and released
 *   when it is answered. Bodies without a length are counted as they arrive.
 *   Conflicting Content-Length headers are refused (PR_ERR_INVALID, 400).
 * - Every answer's HTTP status comes from a pr_status_t through
 *   pr__proto_http_status (in reply and reply_static); no handler writes an
 *   HTTP code.
 * - Every counter is atomic; handlers share no other state but the model
 *   registry, which has its own locks.
 * - What the gRPC front end (grpc.h) shares with this one is in s->svc
 *   (service.h: the registry, tokens, the in-flight bytes, the operations
 *   behind the routes); it listens once HTTP does and drains beside it. */
#define _GNU_SOURCE
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/filter.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "packrat/profiler.h"
#include "server/auth.h"
#include "server/dashboard.h"
#include "server/grpc.h"
#include "server/listener.h"
#include "server/model_json.h"
#include "server/models.h"
#include "server/prometheus.h"
#include "server/protocol.h"
#include "server/router.h"
#include "server/server_internal.h"
#include "server/service.h"
#include "server/tls.h"

void pr__server_config_default(pr_server_config_t *c) {
  memset(c, 0, sizeof *c);
  c->host = "127.0.0.1";
  c->port = 8000;
  c->grpc_port = -1;
  c->grpc_threads = 4;
  c->grpc_stream_max_pending = PR_GRPC_STREAM_MAX_PENDING;
  c->max_batch = 8;
  c->max_queue_delay_us = 2000;
  c->queue_capacity = 0; /* max_connections: a connection's request waits, not refused */
  c->request_timeout_s = 30;
  c->max_body_bytes = (size_t)64 << 20;
  c->max_inflight_bytes = (size_t)1 << 30;
  c->max_models = 64;
  c->max_prepared_plans = 16;
  c->balance_window_s = 1;
  c->max_connections = 4096;
  c->max_connections_per_client = 0;
  c->http_threads = 4;
  c->http_colocate = true;
  c->idle_timeout_s = 30;
  c->shutdown_timeout_s = 30;
  c->load_all = true;
  c->strict_readiness = true;
}

/* ---- handlers ---- */

static enum MHD_Result h_metrics(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return pr_http__reply_error(cn, PR_ERR_NOMEM, "out of memory");
  pr_prom_server_t srv = {.http_requests = atomic_load(&s->http_requests),
                          .http_errors = atomic_load(&s->http_errors),
                          .http_refused = atomic_load(&s->http_refused),
                          .inflight_bytes = atomic_load(&s->svc.inflight),
                          .inflight_limit = s->cfg.max_inflight_bytes,
                          .answer_bytes = atomic_load(&s->svc.answer_bytes),
                          .answers_refused = atomic_load(&s->svc.answers_refused),
                          .connections = atomic_load(&s->connections),
                          .connections_limit = s->cfg.max_connections,
                          .models_limit = s->cfg.max_models};
  srv.grpc = pr__grpc_counts(s->grpc);
  pr__prom_write(s->svc.models, &srv, f);
  fclose(f);
  return pr_http__reply(cn, PR_OK, text, len, "text/plain; version=0.0.4", 0);
}

static enum MHD_Result h_server_meta(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  json_t *ext = json_array();
  for (int i = 0; i < pr__service_n_extensions; i++)
    json_array_append_new(ext, json_string(pr__service_extensions[i]));
  return pr_http__reply_json(
      cn, PR_OK,
      json_pack("{s:s, s:s, s:o}", "name", "packrat", "version", PR_VERSION, "extensions", ext));
}

static enum MHD_Result h_live(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  return pr_http__reply_json(cn, PR_OK, json_pack("{s:b}", "live", 1));
}

static enum MHD_Result h_ready(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  bool ready = pr__service_ready(&s->svc);
  return pr_http__reply_json(cn, ready ? PR_OK : PR_ERR_BUSY, json_pack("{s:b}", "ready", ready));
}

static void index_one(const char *name, const char *version, const char *state, const char *reason,
                      void *ctx) {
  json_array_append_new(ctx, json_pack("{s:s, s:s, s:s, s:s}", "name", name, "version", version,
                                       "state", state, "reason", reason));
}

static enum MHD_Result h_repo_index(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  json_t *arr = json_array();
  if (pr__service_index(&s->svc, index_one, arr)) {
    json_decref(arr);
    return pr_http__reply_error(cn, PR_ERR_IO, "cannot read the model repository");
  }
  return pr_http__reply_json(cn, PR_OK, arr);
}

static enum MHD_Result h_repo_load(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  char err[1024];
  pr_status_t st = pr__service_load(&s->svc, cn->route.model, err, sizeof err);
  if (st) return pr_http__reply_error(cn, st, err);
  return pr_http__reply_json(cn, PR_OK, json_object());
}

static enum MHD_Result h_repo_unload(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  char err[128];
  pr_status_t st = pr__service_unload(&s->svc, cn->route.model, err, sizeof err);
  if (st) return pr_http__reply_error(cn, st, err);
  return pr_http__reply_json(cn, PR_OK, json_object());
}

/* Runs fn on the route's ready model with a reference held; errors for an
 * unknown or unready one. */
static enum MHD_Result with_model(pr_server_t *s, struct MHD_Connection *c, conn_t *cn,
                                  enum MHD_Result (*fn)(pr_server_t *, struct MHD_Connection *,
                                                        conn_t *, pr_served_t *)) {
  pr_status_t st;
  char msg[1024];
  pr_served_t *m =
      pr__service_model(&s->svc, cn->route.model, cn->route.version, &st, msg, sizeof msg);
  if (!m) return pr_http__reply_error(cn, st, msg);
  enum MHD_Result ret = fn(s, c, cn, m);
  if (!cn->model_owned) pr__models_put(m); /* else completed() puts it */
  return ret;
}

static json_t *tensor_meta(const pr_tensor_info_t *t) {
  json_t *shape = json_array();
  for (int d = 0; d < t->rank; d++) json_array_append_new(shape, json_integer(t->dims[d]));
  return json_pack("{s:s, s:s, s:o}", "name", t->name, "datatype", pr__proto_datatype(t->dtype),
                   "shape", shape);
}

static enum MHD_Result model_meta(pr_server_t *s, struct MHD_Connection *c, conn_t *cn,
                                  pr_served_t *m) {
  json_t *ins = json_array(), *outs = json_array(), *versions = json_array();
  pr_version_name_t names[PR_REPO_MAX_VERSIONS];
  int n = pr__service_versions(&s->svc, m->entry.name, names, PR_REPO_MAX_VERSIONS);
  for (int i = 0; i < n; i++) json_array_append_new(versions, json_string(names[i]));
  for (int i = 0; i < m->proto.n_inputs; i++)
    json_array_append_new(ins, tensor_meta(&m->proto.inputs[i]));
  for (int i = 0; i < m->proto.n_outputs; i++)
    json_array_append_new(outs, tensor_meta(&m->proto.outputs[i]));
  return pr_http__reply_json(
      cn, PR_OK,
      json_pack("{s:s, s:o, s:s, s:o, s:o, s:{s:i}}", "name", m->entry.name, "versions", versions,
                "platform", "onnx", "inputs", ins, "outputs", outs, "parameters", "max_batch_size",
                m->cfg.max_batch));
}

static enum MHD_Result h_model_meta(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  return with_model(s, c, cn, model_meta);
}

static enum MHD_Result h_model_ready(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  pr_status_t st;
  char why[1024];
  pr_served_t *m =
      pr__models_get(s->svc.models, cn->route.model, cn->route.version, &st, why, sizeof why);
  if (m) {
    enum MHD_Result ret =
        pr_http__reply_json(cn, PR_OK, json_pack("{s:s, s:b}", "name", m->entry.name, "ready", 1));
    pr__models_put(m);
    return ret;
  }
  if (st == PR_ERR_NOT_FOUND) return pr_http__reply_error(cn, st, "unknown model or version");
  /* known but not ready (loading: 503 with Retry-After; failed or
   * unloaded: 503 without, and why): the name is a repository name, valid
   * text, and the reason was made UTF-8 safe when it was stored */
  return pr_http__reply_json(
      cn, st, json_pack("{s:s, s:b, s:s}", "name", cn->route.model, "ready", 0, "reason", why));
}

static enum MHD_Result h_infer(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  return with_model(s, c, cn, pr_http__infer);
}

/* Statistics in the extension's schema: {"model_stats": [...]}. */
static enum MHD_Result stats(pr_server_t *s, struct MHD_Connection *c, conn_t *cn, pr_served_t *m) {
  json_t *one = pr__model_stats_json(m);
  return pr_http__reply_json(cn, PR_OK, one ? json_pack("{s:[o]}", "model_stats", one) : NULL);
}

static void stats_one(pr_served_t *m, void *ctx) {
  if (m->state == PR_MODEL_READY) json_array_append_new(ctx, pr__model_stats_json(m));
}

static enum MHD_Result h_stats_all(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  json_t *arr = json_array();
  pr__models_each(s->svc.models, stats_one, arr);
  return pr_http__reply_json(cn, PR_OK, json_pack("{s:o}", "model_stats", arr));
}

static enum MHD_Result config(pr_server_t *s, struct MHD_Connection *c, conn_t *cn,
                              pr_served_t *m) {
  return pr_http__reply_json(cn, PR_OK, pr__model_config_json(m));
}

static enum MHD_Result h_config(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  return with_model(s, c, cn, config);
}

static enum MHD_Result h_stats(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  return with_model(s, c, cn, stats);
}

/* The plan's shape bucket: {"dim": NAME, "size": N} (size 0: the
 * prepared shape, a plan pinned by hand), or null without buckets. */
static json_t *bucket_json(pr_served_t *m, long long size) {
  const pr_sched_dim_t *dim;
  const long long *sizes;
  if (!pr__sched_buckets(m->sched, &dim, &sizes)) return json_null();
  return json_pack("{s:s, s:I}", "dim", dim->name, "size", (json_int_t)size);
}

/* The cores [first, first + n) of the server's order, as cpu ids. */
static json_t *cores_json(const int *cpus, int first, int n) {
  json_t *a = json_array();
  for (int k = first; k < first + n; k++) json_array_append_new(a, json_integer(cpus[k]));
  return a;
}

/* m's share of the cores: {"divided": B, "cores": [...], "planned_batch":
 * its max batch, "predicted_latency_ms", "reference_ms", "score"}. */
static json_t *share_json(pr_served_t *m, bool divided, const pr_joint_share_t *sh) {
  const int *cpus = pr__sched_cpus(m->sched);
  return json_pack("{s:b, s:o, s:i, s:f, s:f, s:f}", "divided", divided, "cores",
                   cores_json(cpus, sh->first_core, sh->cores), "planned_batch",
                   m->share_batch > 0 ? m->share_batch : m->cfg.max_batch, "predicted_latency_ms",
                   divided ? sh->latency_ms : 0.0, "reference_ms", divided ? sh->reference_ms : 0.0,
                   "score", divided ? sh->score : 0.0);
}

static json_t *plan_json(pr_served_t *m, bool divided, const pr_joint_share_t *share) {
  pr_plan_t *plans = calloc(PR_SCHED_MAX_CONFIGS, sizeof *plans);
  long long sizes[PR_SCHED_MAX_CONFIGS];
  if (!plans) return NULL;
  int active;
  int n = pr__sched_snapshot(m->sched, plans, sizes, PR_SCHED_MAX_CONFIGS, &active);
  const int *cpus = pr__sched_cpus(m->sched);
  const pr_plan_t *p = &plans[active >= 0 ? active : 0];
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
  for (int c = 0; c < n; c++) {
    char spec[512];
    pr_plan_format(&plans[c], spec, sizeof spec);
    json_array_append_new(
        prepared,
        json_pack("{s:i, s:s, s:f, s:o}", "batch", plans[c].batch, "plan", spec,
                  "predicted_latency_ms", plans[c].latency_ms, "bucket", bucket_json(m, sizes[c])));
  }
  json_t *o =
      json_pack("{s:s, s:s, s:s, s:i, s:f, s:b, s:o, s:o, s:o, s:o}", "name", m->entry.name,
                "version", m->entry.version, "precision", pr_precision_name(m->cfg.precision),
                "batch", p->batch, "predicted_latency_ms", p->latency_ms, "autoscale",
                pr__sched_auto(m->sched), "bucket", bucket_json(m, sizes[active >= 0 ? active : 0]),
                "instances", insts, "prepared", prepared, "share", share_json(m, divided, share));
  free(plans);
  return o;
}

/* m's plan, its share read under the registry's lock. */
static json_t *model_plan_json(pr_server_t *s, pr_served_t *m) {
  bool divided;
  pr_joint_share_t share;
  pr__models_share(s->svc.models, m, &divided, &share);
  return plan_json(m, divided, &share);
}

static enum MHD_Result plan_get(pr_server_t *s, struct MHD_Connection *c, conn_t *cn,
                                pr_served_t *m) {
  return pr_http__reply_json(cn, PR_OK, model_plan_json(s, m));
}

typedef struct {
  json_t *models;
  bool *used; /* the cores a divided model owns */
  int n;
} host_ctx_t;

static void host_one(pr_served_t *m, void *ctx) {
  host_ctx_t *h = ctx;
  if (m->state != PR_MODEL_READY) return;
  json_array_append_new(h->models, plan_json(m, m->divided, &m->share)); /* under the lock */
  for (int k = m->share.first_core; m->divided && k < m->share.first_core + m->share.cores; k++)
    if (k >= 0 && k < h->n) h->used[k] = true;
}

/* GET /v2/plan: the whole host's plan, {"cores": [...], "models": [each
 * ready model's plan and share], "unassigned_cores": [cores no divided
 * model owns]}. */
static enum MHD_Result h_host_plan(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  int T = pr__models_cores(s->svc.models);
  host_ctx_t h = {.models = json_array(), .used = calloc((size_t)T + 1, sizeof(bool)), .n = T};
  if (!h.used) {
    json_decref(h.models);
    return pr_http__reply_error(cn, PR_ERR_NOMEM, "out of memory");
  }
  pr__models_each(s->svc.models, host_one, &h);
  json_t *idle = json_array();
  for (int k = 0; k < T; k++)
    if (!h.used[k]) json_array_append_new(idle, json_integer(s->cpus[k]));
  free(h.used);
  return pr_http__reply_json(cn, PR_OK,
                             json_pack("{s:o, s:o, s:o}", "cores", cores_json(s->cpus, 0, T),
                                       "models", h.models, "unassigned_cores", idle));
}

static enum MHD_Result h_plan_get(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  return with_model(s, c, cn, plan_get);
}

/* POST .../plan {"plan": "THREADSxBATCH,..."} pins a plan by hand (prepared
 * first if new); {"plan": "auto"} hands control back to the autoscaler. */
static enum MHD_Result plan_post(pr_server_t *s, struct MHD_Connection *c, conn_t *cn,
                                 pr_served_t *m) {
  json_error_t je;
  json_t *root = cn->body ? json_loadb(cn->body, cn->len, JSON_REJECT_DUPLICATES, &je) : NULL;
  const char *spec = root ? json_string_value(json_object_get(root, "plan")) : NULL;
  char err[512];
  enum MHD_Result ret;
  if (!spec) {
    ret = pr_http__reply_error(
        cn, PR_ERR_INVALID, "expected {\"plan\": \"auto\"} or {\"plan\": \"THREADSxBATCH,...\"}");
  } else if (!strcmp(spec, "auto")) {
    if (pr__sched_set_auto(m->sched, true, m->cfg.estimator, 1.0))
      ret = pr_http__reply_error(
          cn, PR_ERR_INVALID,
          "this model has no plans from a profile to follow the load with (its "
          "config fixes the plan, or autoscale is off)");
    else
      ret = pr_http__reply_json(cn, PR_OK, model_plan_json(s, m));
  } else {
    pr_plan_t *plan = malloc(sizeof *plan);
    pr_status_t st = PR_ERR_NOMEM;
    snprintf(err, sizeof err, "out of memory");
    if (plan && (st = pr_plan_parse(spec, NULL, plan, err, sizeof err)) == PR_OK) {
      if (plan->batch > m->cfg.max_batch) {
        snprintf(err, sizeof err, "the plan's batches add up to %d, over the max batch %d",
                 plan->batch, m->cfg.max_batch);
        st = PR_ERR_INVALID;
      } else {
        /* a model with a share of the cores pins its plan on its share */
        bool divided;
        pr_joint_share_t share;
        pr__models_share(s->svc.models, m, &divided, &share);
        if (divided && plan->cores > share.cores) {
          snprintf(err, sizeof err,
                   "the plan needs %d cores, the model's share is %d (cores %d..%d of the "
                   "joint plan, GET /v2/plan; \"cores\" in its config.json sets its bounds)",
                   plan->cores, share.cores, share.first_core, share.first_core + share.cores - 1);
          st = PR_ERR_INVALID;
        } else {
          if (divided) pr_plan_offset(plan, share.first_core);
          st = pr__sched_pin(m->sched, plan, err, sizeof err);
        }
      }
    }
    free(plan);
    ret = st ? pr_http__reply_error(cn, st == PR_ERR_NOMEM ? st : PR_ERR_INVALID, err)
             : pr_http__reply_json(cn, PR_OK, model_plan_json(s, m));
  }
  json_decref(root);
  return ret;
}

static enum MHD_Result h_plan_post(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  return with_model(s, c, cn, plan_post);
}

/* ---- the dashboard (dashboard.h): its files and its state ---- */

static enum MHD_Result reply_dash(conn_t *cn, struct MHD_Response *r, const char *type,
                                  const char *cache) {
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "Cache-Control", cache);
  for (int i = 0; pr__dash_headers[i][0]; i++)
    MHD_add_response_header(r, pr__dash_headers[i][0], pr__dash_headers[i][1]);
  return pr_http__deliver(cn, PR_OK, r);
}

static enum MHD_Result h_dash_file(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  pr_dash_asset_t a = pr__dash_asset(cn->route.id == PR_ROUTE_DASH_SCRIPT  ? PR_DASH_SCRIPT
                                     : cn->route.id == PR_ROUTE_DASH_STYLE ? PR_DASH_STYLE
                                                                           : PR_DASH_PAGE);
  return reply_dash(cn,
                    MHD_create_response_from_buffer(a.len, (void *)a.data, MHD_RESPMEM_PERSISTENT),
                    a.content_type, PR_DASH_CACHE_ASSET);
}

static enum MHD_Result h_dash_state(pr_server_t *s, struct MHD_Connection *c, conn_t *cn) {
  pr_dash_machine_t mach = {.cpu_name = pr__topology_cpu_name(),
                            .physical_cores = pr__topology_num_cores(),
                            .cpus = s->cpus,
                            .n_cpus = s->n_cpus,
                            .uptime_s = pr__now() - s->started};
  char *text = pr__dash_state(s->dash, s->svc.models, &mach);
  if (!text) return pr_http__reply_error(cn, PR_ERR_NOMEM, "cannot encode the dashboard state");
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!r) free(text);
  return reply_dash(cn, r, "application/json", PR_DASH_CACHE_STATE);
}

/* One row per route (router.h): the access check (http.c, grpc.c), the
 * body limit, whether it runs off the HTTP threads, HEAD, and the handler
 * are read from here and nowhere else. */
#define R(id, method, pattern, access, flags, handler) \
  [id] = {method, pattern, PR_ACCESS_##access, flags, handler}
#define GET PR_ROUTE_HEAD
const pr_route_row_t pr__http_routes[PR_ROUTE_COUNT] = {
    R(PR_ROUTE_METRICS, "GET", "/metrics", READ, GET, h_metrics),
    R(PR_ROUTE_SERVER_META, "GET", "/v2", READ, GET, h_server_meta),
    R(PR_ROUTE_LIVE, "GET", "/v2/health/live", OPEN, GET, h_live),
    R(PR_ROUTE_READY, "GET", "/v2/health/ready", OPEN, GET, h_ready),
    R(PR_ROUTE_REPO_INDEX, "POST", "/v2/repository/index", READ, 0, h_repo_index),
    R(PR_ROUTE_REPO_LOAD, "POST", "/v2/repository/models/{m}/load", ADMIN, PR_ROUTE_SLOW,
      h_repo_load),
    R(PR_ROUTE_REPO_UNLOAD, "POST", "/v2/repository/models/{m}/unload", ADMIN, PR_ROUTE_SLOW,
      h_repo_unload),
    R(PR_ROUTE_MODEL_META, "GET", "/v2/models/{m}[/versions/{v}]", READ, GET, h_model_meta),
    R(PR_ROUTE_MODEL_READY, "GET", "/v2/models/{m}[/versions/{v}]/ready", OPEN, GET, h_model_ready),
    R(PR_ROUTE_INFER, "POST", "/v2/models/{m}[/versions/{v}]/infer", READ, PR_ROUTE_TENSORS,
      h_infer),
    R(PR_ROUTE_STATS, "GET", "/v2/models/{m}[/versions/{v}]/stats", READ, GET, h_stats),
    R(PR_ROUTE_STATS_ALL, "GET", "/v2/models/stats", READ, GET, h_stats_all),
    R(PR_ROUTE_MODEL_CONFIG, "GET", "/v2/models/{m}[/versions/{v}]/config", READ, GET, h_config),
    R(PR_ROUTE_PLAN_GET, "GET", "/v2/models/{m}/plan", READ, GET, h_plan_get),
    R(PR_ROUTE_PLAN_POST, "POST", "/v2/models/{m}/plan", ADMIN, PR_ROUTE_SLOW, h_plan_post),
    R(PR_ROUTE_HOST_PLAN, "GET", "/v2/plan", READ, GET, h_host_plan),
    R(PR_ROUTE_DASH_PAGE, "GET", "/", OPEN, GET, h_dash_file),
    R(PR_ROUTE_DASH_SCRIPT, "GET", "/dashboard/app.js", OPEN, GET, h_dash_file),
    R(PR_ROUTE_DASH_STYLE, "GET", "/dashboard/style.css", OPEN, GET, h_dash_file),
    R(PR_ROUTE_DASH_STATE, "GET", "/dashboard/state", READ, GET, h_dash_state),
};
#undef GET
#undef R

/* cfg's host (an IPv4 or IPv6 address) and port as a socket address. */
static pr_status_t parse_host(pr_server_t *s, const pr_server_config_t *cfg, char *err,
                              size_t err_len) {
  memset(&s->addr, 0, sizeof s->addr);
  struct sockaddr_in *a4 = (struct sockaddr_in *)&s->addr;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&s->addr;
  if (inet_pton(AF_INET, cfg->host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)cfg->port);
  } else if (inet_pton(AF_INET6, cfg->host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)cfg->port);
  } else {
    pr__errf(err, err_len,
             "--host must be an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::1, ::), got '%s'",
             cfg->host);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

/* An accepted connection, to libmicrohttpd (which closes it when it cannot
 * take it: the limit per client, out of memory). */
static void add_connection(void *ctx, int fd, const struct sockaddr *a, socklen_t len) {
  pr_server_t *s = ctx;
  /* counted until libmicrohttpd starts it (pr_http__on_connection): its
   * thread takes it in later, and a drain that did not wait for it would
   * stop the daemon under its request */
  atomic_fetch_add(&s->handed, 1);
  if (MHD_add_connection(s->daemon, fd, a, len) != MHD_YES) atomic_fetch_sub(&s->handed, 1);
}

static bool at_connection_limit(void *ctx) {
  pr_server_t *s = ctx;
  /* the ones handed over and not started yet count: libmicrohttpd would
   * close those over its limit instead of leaving them in the backlog */
  return atomic_load(&s->connections) + atomic_load(&s->handed) >= s->cfg.max_connections;
}

/* Binds the HTTP port (and the gRPC one) before any model loads, so that a
 * port in use fails the start at once rather than after minutes of
 * profiling; connections wait in the backlog until listen_on serves them. */
static pr_status_t bind_ports(pr_server_t *s, const pr_server_config_t *cfg, char *err,
                              size_t err_len) {
  char why[256];
  if (pr__listener_open(&s->addr, &s->listener, &s->port, why, sizeof why)) {
    pr__errf(err, err_len, "cannot listen on %s port %d: %s", cfg->host, cfg->port, why);
    return PR_ERR_IO;
  }
  if (cfg->grpc_port < 0) return PR_OK;
  pr_grpc_config_t g = {.host = cfg->host,
                        .port = cfg->grpc_port,
                        .threads = cfg->grpc_threads > 0 ? cfg->grpc_threads : 1,
                        .max_calls = cfg->max_connections,
                        .stream_max_pending = cfg->grpc_stream_max_pending > 0
                                                  ? cfg->grpc_stream_max_pending
                                                  : PR_GRPC_STREAM_MAX_PENDING,
                        .stream_max_bytes = cfg->max_body_bytes,
                        .answer_timeout_s = cfg->idle_timeout_s};
  pr__tls_pem(s->tls, &g.tls_cert, &g.tls_key, &g.tls_client_ca);
  return pr__grpc_open(&s->svc, &g, &s->grpc, err, err_len);
}

/* Starts libmicrohttpd (epoll on a fixed pool of threads, so a connection
 * costs no thread) and the listener on s->addr that accepts for it. */
static pr_status_t listen_on(pr_server_t *s, const pr_server_config_t *cfg, char *err,
                             size_t err_len) {
  if (cfg->before_listen) cfg->before_listen(cfg->before_listen_ctx);
  /* the limit on connections is the listener's (at_connection_limit):
   * libmicrohttpd splits its own among its threads, and a thread over its
   * share closes a connection it was handed without starting it, which
   * `handed` would count for good (the listener then waits at the limit
   * forever); so each of its threads may hold them all */
  unsigned mhd_limit =
      (unsigned)cfg->max_connections * (unsigned)(cfg->http_threads > 1 ? cfg->http_threads : 1);
  pr_status_t st =
      pr__hangup_start(pr_http__hangup_take, pr_http__hangup_finish, &s->hangup, err, err_len);
  if (st) return st;
  struct MHD_OptionItem tls_opts[5];
  tls_opts[pr__tls_options(s->tls, tls_opts)] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  s->daemon = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
          MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG | pr__tls_flags(s->tls),
      0, NULL, NULL, pr_http__access, s, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_THREAD_POOL_SIZE,
      (unsigned)cfg->http_threads, MHD_OPTION_URI_LOG_CALLBACK, pr_http__uri_log, s,
      MHD_OPTION_NOTIFY_COMPLETED, pr_http__completed, s, MHD_OPTION_NOTIFY_CONNECTION,
      pr_http__on_connection, s, MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_client,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout_s, MHD_OPTION_END);
  if (!s->daemon || pr__listener_start(s->listener, add_connection, at_connection_limit, s)) {
    pr__errf(err, err_len, "cannot start the HTTP server on %s port %d", cfg->host, cfg->port);
    return PR_ERR_IO;
  }
  return PR_OK;
}

pr_status_t pr__server_start(const pr_server_config_t *cfg, pr_server_t **out, char *err,
                             size_t err_len) {
  *out = NULL;
  pr_server_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->cfg = *cfg;
  s->started = pr__now();
  if (cfg->n_cpus > 0) {
    s->n_cpus = cfg->n_cpus < 4096 ? cfg->n_cpus : 4096;
    memcpy(s->cpus, cfg->cpus, sizeof(int) * (size_t)s->n_cpus);
  } else {
    s->n_cpus = pr__topology_cpu_order(s->cpus, 4096);
  }
  /* what the machine is for this process: the log's first line says it */
  char cpus_line[512];
  pr__topology_describe(cpus_line, sizeof cpus_line);
  int budget = pr__topology_cpu_budget();
  if (s->n_cpus > budget) { /* --cores named more CPUs than the quota runs at once */
    pr__log(PR_LOG_WARN, "--cores names %d CPUs, more than the CPU budget: using the first %d",
            s->n_cpus, budget);
    s->n_cpus = budget;
  }
  pr__log(PR_LOG_INFO, "CPUs: %s", cpus_line);
  s->cfg.cpus = s->cpus;
  pr_models_config_t mc = {
      .repository = cfg->repository,
      .cpus = s->cpus,
      .n_cpus = s->n_cpus,
      .max_models = cfg->max_models,
      .max_plans = cfg->max_prepared_plans,
      .balance_window_s = cfg->balance_window_s,
      .defaults = {
          .max_batch = cfg->max_batch,
          .max_queue_delay_us = cfg->max_queue_delay_us,
          .queue_capacity = cfg->queue_capacity > 0 ? cfg->queue_capacity : cfg->max_connections,
          .request_timeout_s = cfg->request_timeout_s,
          .priority_levels = 10}};
  pr_status_t st = parse_host(s, cfg, err, err_len);
  if (!st) st = pr__auth_load(cfg->auth_token_file, cfg->admin_token_file, &s->auth, err, err_len);
  if (!st)
    st = pr__tls_load(cfg->tls_cert_file, cfg->tls_key_file, cfg->tls_client_ca_file, &s->tls, err,
                      err_len);
  if (st) {
    pr__server_stop(s);
    return st;
  }
  if (pr__models_create(&mc, &s->svc.models) || !(s->dash = pr__dash_create())) {
    pr__server_stop(s);
    return PR_ERR_NOMEM;
  }
  snprintf(s->repository, sizeof s->repository, "%s", cfg->repository);
  s->cfg.repository = s->repository;
  s->svc.auth = s->auth;
  s->svc.routes = pr__http_routes;
  s->svc.repository = s->repository;
  s->svc.max_models = cfg->max_models;
  s->svc.max_body_bytes = cfg->max_body_bytes;
  s->svc.max_inflight_bytes = cfg->max_inflight_bytes;
  s->svc.strict_readiness = cfg->strict_readiness;
  if ((st = bind_ports(s, cfg, err, err_len))) {
    pr__server_stop(s);
    return st;
  }
  int cap = cfg->max_models, total = 0;
  pr_repo_entry_t *entries = calloc((size_t)cap, sizeof *entries);
  int n = entries ? pr__repo_scan(cfg->repository, entries, cap, &total) : -1;
  if (n < 0) {
    free(entries);
    pr__errf(err, err_len, "cannot read the model repository %s", cfg->repository);
    pr__server_stop(s);
    return PR_ERR_IO;
  }
  if (total > n)
    pr__log(PR_LOG_ERROR,
            "the repository holds %d models; %d are served (--max-models), the rest are not", total,
            n);
  if (total == 0)
    pr__log(PR_LOG_WARN,
            "the model repository %s holds no model (expected " PR_REPO_LAYOUT
            ", or <repository>/<model>.onnx); load one with POST "
            "/v2/repository/models/<model>/load once it is there",
            cfg->repository);
  for (int i = 0; i < n; i++)
    if (entries[i].problem[0])
      pr__log(PR_LOG_WARN, "model %s: not served: %s", entries[i].name, entries[i].problem);
  pr__log(PR_LOG_INFO, "kernels: %s (%s), linear MatMul on %s", pr_engine_backend_version(),
          pr_engine_isa(), pr_engine_matmul_kernel());
  /* every model at once: the cores are divided once among them all */
  const char **names = cfg->load_all && n > 0 ? malloc(sizeof *names * (size_t)n) : NULL;
  for (int i = 0; names && i < n; i++) names[i] = entries[i].name;
  if (names) pr__models_load_all(s->svc.models, names, n);
  for (int i = 0; !names && i < n && cfg->load_all; i++) { /* out of memory: one at a time */
    char e[1024];
    if (pr__models_load(s->svc.models, entries[i].name, e, sizeof e))
      pr__log(PR_LOG_ERROR, "model %s: %s", entries[i].name, e);
  }
  free(names);
  free(entries);
  if ((st = listen_on(s, cfg, err, err_len)) ||
      (s->grpc && (st = pr__grpc_start(s->grpc, err, err_len)))) {
    pr__server_stop(s);
    return st;
  }
  *out = s;
  return PR_OK;
}

int pr__server_port(const pr_server_t *s) {
  return s->port;
}

int pr__server_grpc_port(const pr_server_t *s) {
  return s->grpc ? pr__grpc_port(s->grpc) : -1;
}

typedef struct {
  char *buf;
  size_t len, off;
} describe_ctx_t;

static void describe_one(pr_served_t *m, void *ctx) {
  describe_ctx_t *d = ctx;
  if (d->off >= d->len) return;
  if (m->state != PR_MODEL_READY) {
    d->off += (size_t)snprintf(d->buf + d->off, d->len - d->off, "model %s: not loaded (%s)\n",
                               m->entry.name, m->reason);
    return;
  }
  pr_plan_t *p = malloc(sizeof *p);
  if (!p) return;
  pr__sched_current_plan(m->sched, p);
  char spec[512];
  pr_plan_format(p, spec, sizeof spec);
  int n = pr__sched_num_configs(m->sched);
  d->off += (size_t)snprintf(d->buf + d->off, d->len - d->off,
                             "model %s v%s: max batch %d, %d plan%s prepared%s, plan %s "
                             "(predicted %.1f ms per batch)\n",
                             m->entry.name, m->entry.version, m->cfg.max_batch, n, n > 1 ? "s" : "",
                             pr__sched_auto(m->sched) ? " (following the load)" : "", spec,
                             p->latency_ms);
  free(p);
}

void pr__server_describe(pr_server_t *s, char *buf, size_t len) {
  buf[0] = 0;
  describe_ctx_t d = {buf, len, 0};
  pr__models_each(s->svc.models, describe_one, &d);
}

/* Connections the kernel completed but no one accepted yet would be reset
 * by closing the listening socket, though their clients (a load balancer
 * among them) count them as sent; so would a handshake half done (the
 * client, which counts itself connected, sends its request into a socket
 * that is gone). So first a socket filter drops every SYN that opens a
 * connection (its client sends it again a second later, and is refused
 * then: to a balancer, a connection that failed, which it retries
 * elsewhere) and lets the rest of each handshake through; then every
 * connection that completes is accepted and handed to the daemon, which
 * serves it like any other (pr__server_stop waits for them), until none has
 * for DRAIN_SETTLE_MS: a handshake under way ends within a round trip. */
#define DRAIN_SETTLE_MS 50
static void adopt_backlog(pr_server_t *s, int fd) {
  /* the TCP header's flags (a socket filter reads from it): drop SYN
   * without ACK, keep everything else */
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),          BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x12),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x02, 0, 1), BPF_STMT(BPF_RET | BPF_K, 0),
      BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
  };
  struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog))
    pr__log(PR_LOG_WARN, "draining: cannot filter the listening socket: %s", strerror(errno));
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return;
  int n = 0;
  for (;;) {
    /* at the connection limit libmicrohttpd would close what it is handed
     * without starting it (and `handed` would never come down): those left
     * are reset */
    if (at_connection_limit(s)) break;
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    int c = accept4(fd, (struct sockaddr *)&a, &len, SOCK_CLOEXEC);
    if (c >= 0) {
      add_connection(s, c, (struct sockaddr *)&a, len);
      n++;
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) break; /* out of descriptors: reset */
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, DRAIN_SETTLE_MS) <= 0) break; /* settled */
  }
  if (n) pr__log(PR_LOG_INFO, "draining: %d connection%s from the backlog", n, n > 1 ? "s" : "");
}

void pr__server_stop(pr_server_t *s) {
  if (!s) return;
  if (s->daemon) {
    /* stop accepting (new connections are refused at once), answer every
     * request whose body is in, each answer closing its connection, give
     * uploads still arriving a grace period (and connections that have not
     * sent a request yet a shorter one), then close the connections (idle
     * keep-alive ones among them) */
    atomic_store(&s->stopping, true);
    atomic_store(&s->svc.stopping, true);
    pr__grpc_shutdown(s->grpc); /* no new gRPC calls; accepted ones go on */
    int fd = pr__listener_stop(s->listener);
    s->listener = NULL;
    if (fd >= 0) {
      adopt_backlog(s, fd);
      close(fd); /* new connections are refused from here on */
    }
    double t0 = pr__now(), limit = s->cfg.shutdown_timeout_s;
    for (;;) {
      /* a connection goes handed -> fresh -> in progress, counted in the
       * next before it leaves the one before: read in that order, it is
       * seen in one of them */
      int handed = atomic_load(&s->handed), fresh = atomic_load(&s->fresh);
      int in_progress = atomic_load(&s->in_progress), serving = atomic_load(&s->serving);
      double t = pr__now() - t0;
      if (t >= limit ||
          !(serving > 0 || ((in_progress > 0 || handed > 0) && t < SHUTDOWN_UPLOAD_GRACE_S) ||
            (fresh > 0 && t < SHUTDOWN_FRESH_GRACE_S)))
        break;
      usleep(1000);
    }
    /* from here no handler starts (a request just in gets 503): one that
     * suspended its connection after the wait above is answered first,
     * since libmicrohttpd aborts when stopped with a suspended connection */
    atomic_store(&s->closing, true);
    while (atomic_load(&s->entering) > 0) usleep(100);
    /* suspended too: an answer's thread counts its resume off after making it */
    while ((atomic_load(&s->serving) > 0 || atomic_load(&s->suspended) > 0) &&
           pr__now() - t0 < limit)
      usleep(1000);
    int waiting = atomic_load(&s->suspended) + atomic_load(&s->admin_threads);
    if (waiting) {
      /* a model stuck in a kernel: libmicrohttpd cannot stop with suspended
       * connections, nor can the models go while their workers run; the
       * process is exiting, so leave them */
      pr__log(PR_LOG_ERROR, "shutdown: %d request%s still running after %d s, not answered",
              waiting, waiting > 1 ? "s" : "", s->cfg.shutdown_timeout_s);
      return;
    }
    MHD_stop_daemon(s->daemon);
    double left = limit - (pr__now() - t0);
    if (!pr__grpc_stop(s->grpc, left > 0 ? left : 0)) return; /* calls stuck: exiting */
  }
  if (s->listener) close(pr__listener_stop(s->listener)); /* a start that failed */
  if (!s->daemon) pr__grpc_stop(s->grpc, 0);              /* bound, never served */
  pr__hangup_stop(s->hangup);                             /* no connection is suspended now */
  pr__models_destroy(s->svc.models);
  pr__auth_free(s->auth);
  pr__tls_free(s->tls);
  pr__dash_destroy(s->dash);
  free(s);
}
