/* The RPCs of the gRPC front end: one handler per method, each the
 * protobuf face of an operation of service.h (the same ones the HTTP
 * routes call), dispatched through one table. See grpc.h. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "grpc_service.pb-c.h"
#include "health.pb-c.h"
#include "packrat/profiler.h"
#include "server/grpc_call.h"
#include "server/grpc_codec.h"

/* At most this many load/unload calls run at once; more get UNAVAILABLE. */
#define MAX_ADMIN_THREADS 32

static _Atomic int admin_threads;

/* ---- health and metadata ---- */

static void rpc_live(pr_grpc_call_t *c, ProtobufCMessage *req) {
  Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
  r.live = 1;
  pr__grpc_reply_message(c, &r.base);
}

static bool serving(pr_grpc_call_t *c) {
  return !atomic_load(&c->svc->stopping) && pr__service_ready(c->svc);
}

static void rpc_ready(pr_grpc_call_t *c, ProtobufCMessage *req) {
  Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
  r.ready = serving(c);
  pr__grpc_reply_message(c, &r.base);
}

static void rpc_health(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  const Grpc__Health__V1__HealthCheckRequest *req = (void *)msg;
  if (req->service[0] && strcmp(req->service, "inference.GRPCInferenceService")) {
    pr__grpc_reply(c, PR_ERR_NOT_FOUND, "unknown service", NULL, 0);
    return;
  }
  Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
  r.status = serving(c) ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                        : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
  pr__grpc_reply_message(c, &r.base);
}

static void rpc_model_ready(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  const Inference__ModelReadyRequest *req = (void *)msg;
  pr_status_t st;
  char why[1024];
  pr_served_t *m = pr__service_model(c->svc, req->name, req->version, &st, why, sizeof why);
  if (!m && st == PR_ERR_NOT_FOUND) {
    pr__grpc_reply(c, st, why, NULL, 0);
    return;
  }
  Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
  r.ready = m != NULL; /* known but not ready: false */
  if (m) pr__models_put(m);
  pr__grpc_reply_message(c, &r.base);
}

static void rpc_server_meta(pr_grpc_call_t *c, ProtobufCMessage *req) {
  Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
  r.name = "packrat";
  r.version = PR_VERSION;
  r.n_extensions = (size_t)pr__service_n_extensions;
  r.extensions = (char **)pr__service_extensions;
  pr__grpc_reply_message(c, &r.base);
}

/* The ready model a request names, or NULL after answering the error. */
static pr_served_t *model_of(pr_grpc_call_t *c, const char *name, const char *version) {
  pr_status_t st;
  char why[1024];
  pr_served_t *m = pr__service_model(c->svc, name, version, &st, why, sizeof why);
  if (!m) pr__grpc_reply(c, st, why, NULL, 0);
  return m;
}

static void tensor_meta(const pr_tensor_info_t *t, int n,
                        Inference__ModelMetadataResponse__TensorMetadata *out,
                        Inference__ModelMetadataResponse__TensorMetadata **list) {
  for (int i = 0; i < n; i++) {
    inference__model_metadata_response__tensor_metadata__init(&out[i]);
    out[i].name = (char *)t[i].name;
    out[i].datatype = (char *)pr__proto_datatype(t[i].dtype);
    out[i].n_shape = (size_t)t[i].rank;
    out[i].shape = (int64_t *)t[i].dims;
    list[i] = &out[i];
  }
}

static void rpc_model_meta(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  const Inference__ModelMetadataRequest *req = (void *)msg;
  pr_served_t *m = model_of(c, req->name, req->version);
  if (!m) return;
  Inference__ModelMetadataResponse__TensorMetadata ins[PR_SCHED_MAX_IO], outs[PR_SCHED_MAX_IO];
  Inference__ModelMetadataResponse__TensorMetadata *in_list[PR_SCHED_MAX_IO],
      *out_list[PR_SCHED_MAX_IO];
  tensor_meta(m->proto.inputs, m->proto.n_inputs, ins, in_list);
  tensor_meta(m->proto.outputs, m->proto.n_outputs, outs, out_list);
  Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
  pr_version_name_t names[PR_REPO_MAX_VERSIONS];
  char *versions[PR_REPO_MAX_VERSIONS];
  int n = pr__service_versions(c->svc, m->entry.name, names, PR_REPO_MAX_VERSIONS);
  for (int i = 0; i < n; i++) versions[i] = names[i];
  r.name = m->entry.name;
  r.n_versions = (size_t)n;
  r.versions = versions;
  r.platform = "onnx";
  r.n_inputs = (size_t)m->proto.n_inputs;
  r.inputs = in_list;
  r.n_outputs = (size_t)m->proto.n_outputs;
  r.outputs = out_list;
  pr__grpc_reply_message(c, &r.base);
  pr__models_put(m);
}

/* Triton's DataType of a dtype: TYPE_ and the v2 datatype name. */
static Inference__DataType data_type(pr_dtype_t dt) {
  char name[32];
  snprintf(name, sizeof name, "TYPE_%s", pr__proto_datatype(dt));
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value_by_name(&inference__data_type__descriptor, name);
  return v ? (Inference__DataType)v->value : INFERENCE__DATA_TYPE__TYPE_INVALID;
}

static void rpc_model_config(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  const Inference__ModelConfigRequest *req = (void *)msg;
  pr_served_t *m = model_of(c, req->name, req->version);
  if (!m) return;
  Inference__ModelInput ins[PR_SCHED_MAX_IO], *in_list[PR_SCHED_MAX_IO];
  Inference__ModelOutput outs[PR_SCHED_MAX_IO], *out_list[PR_SCHED_MAX_IO];
  for (int i = 0; i < m->proto.n_inputs; i++) { /* dims without the batch axis */
    const pr_tensor_info_t *t = &m->proto.inputs[i];
    inference__model_input__init(&ins[i]);
    ins[i] = (Inference__ModelInput){ins[i].base, (char *)t->name, data_type(t->dtype),
                                     (size_t)t->rank - 1, (int64_t *)t->dims + 1};
    in_list[i] = &ins[i];
  }
  for (int i = 0; i < m->proto.n_outputs; i++) {
    const pr_tensor_info_t *t = &m->proto.outputs[i];
    inference__model_output__init(&outs[i]);
    outs[i] = (Inference__ModelOutput){outs[i].base, (char *)t->name, data_type(t->dtype),
                                       (size_t)t->rank - 1, (int64_t *)t->dims + 1};
    out_list[i] = &outs[i];
  }
  Inference__ModelConfig cfg = INFERENCE__MODEL_CONFIG__INIT;
  cfg.name = m->entry.name;
  cfg.platform = "onnx";
  cfg.backend = "packrat";
  cfg.max_batch_size = m->cfg.max_batch;
  cfg.n_input = (size_t)m->proto.n_inputs;
  cfg.input = in_list;
  cfg.n_output = (size_t)m->proto.n_outputs;
  cfg.output = out_list;
  Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
  r.config = &cfg;
  pr__grpc_reply_message(c, &r.base);
  pr__models_put(m);
}

/* ---- inference ---- */

typedef struct {
  const Inference__ModelInferRequest *req;
  bool *raw;
} decode_arg_t;

static pr_status_t decode_pb(const pr_proto_model_t *m, void *arg, size_t max_bytes,
                             pr_request_t *r, pr_proto_infer_t *q, char *err, size_t err_len) {
  decode_arg_t *d = arg;
  return pr__grpc_decode_infer(m, d->req, max_bytes, r, q, d->raw, err, err_len);
}

typedef struct {
  bool raw;
  uint8_t *buf;
  size_t len;
} encoded_t;

static pr_status_t encode_pb(pr_infer_t *x, void *arg) {
  encoded_t *e = arg;
  const pr_served_t *m = x->model;
  return pr__grpc_encode_infer(&m->proto, m->entry.name, m->entry.version, x->req, &x->q, e->raw,
                               &e->buf, &e->len);
}

/* The scheduler's completion callback (a worker's or the reaper's thread):
 * packs the answer and starts its send; the queue threads are not needed. */
static void infer_done(void *ctx) {
  pr_grpc_call_t *c = ctx;
  pr__grpc_infer_over(c);
  encoded_t e = {.raw = c->raw};
  const char *why;
  double t_encoded;
  pr_status_t st = pr__infer_answer(&c->inf, encode_pb, &e, &why, &t_encoded);
  pr__grpc_reply(c, st, st ? why : NULL, e.buf, e.len);
  if (st == PR_OK) /* the server's own time (gRPC sends the answer on its own threads) */
    pr__hist_observe(&pr__sched_stats(c->inf.model->sched)->overhead_s,
                     pr__now() - c->inf.t_parse - c->inf.req->compute_s);
  pr__infer_release(&c->inf, true);
  pr__models_put(c->inf.model);
  pr__grpc_call_unref(c); /* the request's reference */
}

static void rpc_infer(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  const Inference__ModelInferRequest *req = (void *)msg;
  pr_served_t *m = model_of(c, req->model_name, req->model_version);
  if (!m) return;
  decode_arg_t d = {req, &c->raw};
  char err[512];
  pr__grpc_call_ref(c); /* infer_done's; it may run before the submit returns */
  pr_status_t st =
      pr__infer_submit(c->svc, m, decode_pb, &d, infer_done, c, &c->inf, err, sizeof err);
  if (st == PR_OK) {
    pr__grpc_infer_live(c);
    return;
  }
  pr__models_put(m);
  pr__grpc_reply(c, st, err, NULL, 0);
  pr__grpc_call_unref(c);
}

/* ---- statistics ---- */

/* One model's statistics message and everything it points to. */
typedef struct {
  Inference__ModelStatistics ms;
  Inference__InferStatistics is;
  Inference__StatisticDuration d[8];
  Inference__InferBatchStatistics *batch, **batch_list;
  Inference__StatisticDuration *batch_d;
  size_t n_batch, cap_batch;
} stats_msg_t;

static Inference__StatisticDuration *duration(Inference__StatisticDuration *d, pr_duration_t v) {
  inference__statistic_duration__init(d);
  d->count = v.count;
  d->ns = v.ns;
  return d;
}

static void batch_one(int batch, pr_duration_t input, pr_duration_t infer, pr_duration_t output,
                      void *ctx) {
  stats_msg_t *x = ctx;
  if (x->n_batch == x->cap_batch) return;
  Inference__InferBatchStatistics *b = &x->batch[x->n_batch];
  Inference__StatisticDuration *d = &x->batch_d[3 * x->n_batch];
  inference__infer_batch_statistics__init(b);
  b->batch_size = (uint64_t)batch;
  b->compute_input = duration(&d[0], input);
  b->compute_infer = duration(&d[1], infer);
  b->compute_output = duration(&d[2], output);
  x->batch_list[x->n_batch++] = b;
}

/* Fills x for m; false when out of memory. */
static bool stats_msg(pr_served_t *m, stats_msg_t *x) {
  pr_model_stats_t s;
  pr__service_stats(m, &s);
  size_t cap = (size_t)m->cfg.max_batch + 1;
  x->batch = calloc(cap, sizeof *x->batch);
  x->batch_list = calloc(cap, sizeof *x->batch_list);
  x->batch_d = calloc(3 * cap, sizeof *x->batch_d);
  if (!x->batch || !x->batch_list || !x->batch_d) return false;
  x->cap_batch = cap;
  pr__service_batch_stats(m, batch_one, x);
  inference__infer_statistics__init(&x->is);
  pr_duration_t none = {0, 0};
  x->is.success = duration(&x->d[0], s.success);
  x->is.fail = duration(&x->d[1], s.fail);
  x->is.queue = duration(&x->d[2], s.queue);
  x->is.compute_input = duration(&x->d[3], s.compute_input);
  x->is.compute_infer = duration(&x->d[4], s.compute_infer);
  x->is.compute_output = duration(&x->d[5], s.compute_output);
  x->is.cache_hit = duration(&x->d[6], none);
  x->is.cache_miss = duration(&x->d[7], none);
  inference__model_statistics__init(&x->ms);
  x->ms.name = m->entry.name;
  x->ms.version = m->entry.version;
  x->ms.last_inference = s.last_inference_ms;
  x->ms.inference_count = s.inference_count;
  x->ms.execution_count = s.execution_count;
  x->ms.inference_stats = &x->is;
  x->ms.n_batch_stats = x->n_batch;
  x->ms.batch_stats = x->batch_list;
  return true;
}

typedef struct {
  pr_served_t **list;
  int n, cap;
} ready_list_t;

static void take_ready(pr_served_t *m, void *ctx) {
  ready_list_t *r = ctx;
  if (m->state != PR_MODEL_READY || r->n == r->cap) return;
  atomic_fetch_add(&m->refs, 1); /* under the registry's read lock */
  r->list[r->n++] = m;
}

/* Answers the statistics of the n models of list (references released). */
static void reply_stats(pr_grpc_call_t *c, pr_served_t **list, int n) {
  stats_msg_t *x = calloc((size_t)n + 1, sizeof *x);
  Inference__ModelStatistics **ms = calloc((size_t)n + 1, sizeof *ms);
  bool ok = x && ms;
  for (int i = 0; ok && i < n; i++) ok = stats_msg(list[i], &x[i]), ms[i] = &x[i].ms;
  Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
  r.n_model_stats = (size_t)n;
  r.model_stats = ms;
  if (ok)
    pr__grpc_reply_message(c, &r.base);
  else
    pr__grpc_reply(c, PR_ERR_NOMEM, "out of memory", NULL, 0);
  for (int i = 0; x && i < n; i++) {
    free(x[i].batch), free(x[i].batch_list), free(x[i].batch_d);
    pr__models_put(list[i]);
  }
  free(x);
  free(ms);
}

static void rpc_stats(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  const Inference__ModelStatisticsRequest *req = (void *)msg;
  if (req->name[0]) { /* one model */
    pr_served_t *m = model_of(c, req->name, req->version);
    if (m) reply_stats(c, &m, 1);
    return;
  }
  ready_list_t r = {calloc((size_t)c->svc->max_models + 1, sizeof *r.list), 0,
                    c->svc->max_models + 1};
  if (!r.list) {
    pr__grpc_reply(c, PR_ERR_NOMEM, "out of memory", NULL, 0);
    return;
  }
  pr__models_each(c->svc->models, take_ready, &r);
  reply_stats(c, r.list, r.n);
  free(r.list);
}

/* ---- the repository ---- */

typedef struct {
  Inference__RepositoryIndexResponse__ModelIndex *items, **list;
  char **text; /* the strings, copied: four per item */
  size_t n, cap;
  bool ready_only, nomem;
} index_msg_t;

static void index_one(const char *name, const char *version, const char *state, const char *reason,
                      void *ctx) {
  index_msg_t *x = ctx;
  if (x->ready_only && strcmp(state, "READY")) return;
  if (x->n == x->cap) {
    size_t cap = x->cap ? 2 * x->cap : 16;
    void *a = realloc(x->items, cap * sizeof *x->items);
    if (a) x->items = a;
    void *b = a ? realloc(x->text, 4 * cap * sizeof *x->text) : NULL;
    if (b) x->text = b;
    if (!a || !b) return (void)(x->nomem = true);
    x->cap = cap;
  }
  Inference__RepositoryIndexResponse__ModelIndex *it = &x->items[x->n];
  inference__repository_index_response__model_index__init(it);
  char **t = &x->text[4 * x->n++];
  it->name = t[0] = strdup(name), it->version = t[1] = strdup(version);
  it->state = t[2] = strdup(state), it->reason = t[3] = strdup(reason);
  x->nomem |= !t[0] || !t[1] || !t[2] || !t[3];
}

static void rpc_index(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  const Inference__RepositoryIndexRequest *req = (void *)msg;
  index_msg_t x = {.ready_only = req->ready};
  pr_status_t st = pr__service_index(c->svc, index_one, &x);
  x.list = calloc(x.n + 1, sizeof *x.list);
  for (size_t i = 0; x.list && i < x.n; i++) x.list[i] = &x.items[i];
  Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
  r.n_models = x.n;
  r.models = x.list;
  if (st)
    pr__grpc_reply(c, st, "cannot read the model repository", NULL, 0);
  else if (x.nomem || !x.list)
    pr__grpc_reply(c, PR_ERR_NOMEM, "out of memory", NULL, 0);
  else
    pr__grpc_reply_message(c, &r.base);
  for (size_t i = 0; i < 4 * x.n; i++) free(x.text[i]);
  free(x.text), free(x.items), free(x.list);
}

/* Loads or unloads c->model on a thread of its own (see rpc_admin). */
static void *admin_main(void *arg) {
  pr_grpc_call_t *c = arg;
  char err[1024];
  bool load = c->rpc->route == PR_ROUTE_REPO_LOAD;
  pr_status_t st = load ? pr__service_load(c->svc, c->model, err, sizeof err)
                        : pr__service_unload(c->svc, c->model, err, sizeof err);
  if (st) {
    pr__grpc_reply(c, st, err, NULL, 0);
  } else if (load) {
    Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
    pr__grpc_reply_message(c, &r.base);
  } else {
    Inference__RepositoryModelUnloadResponse r = INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
    pr__grpc_reply_message(c, &r.base);
  }
  atomic_fetch_sub(&admin_threads, 1);
  pr__grpc_call_unref(c);
  return NULL;
}

/* Load and unload take long (a load profiles and prepares plans): they run
 * on a detached thread holding a reference to the call. */
static void rpc_admin(pr_grpc_call_t *c, const char *model) {
  if (strlen(model) >= sizeof c->model) {
    pr__grpc_reply(c, PR_ERR_NOT_FOUND, "no such model", NULL, 0);
    return;
  }
  if (atomic_fetch_add(&admin_threads, 1) >= MAX_ADMIN_THREADS) {
    atomic_fetch_sub(&admin_threads, 1);
    pr__grpc_reply(c, PR_ERR_BUSY, "too many repository calls at once; retry later", NULL, 0);
    return;
  }
  snprintf(c->model, sizeof c->model, "%s", model);
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pr__grpc_call_ref(c);
  if (pthread_create(&t, &attr, admin_main, c)) {
    atomic_fetch_sub(&admin_threads, 1);
    pr__grpc_reply(c, PR_ERR_NOMEM, "cannot start a thread for the call", NULL, 0);
    pr__grpc_call_unref(c);
  }
  pthread_attr_destroy(&attr);
}

static void rpc_load(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  rpc_admin(c, ((const Inference__RepositoryModelLoadRequest *)(void *)msg)->model_name);
}

static void rpc_unload(pr_grpc_call_t *c, ProtobufCMessage *msg) {
  rpc_admin(c, ((const Inference__RepositoryModelUnloadRequest *)(void *)msg)->model_name);
}

/* ---- dispatch ---- */

#define RPC(method, route_id, type, fn)                                   \
  {                                                                       \
    .path = "/inference.GRPCInferenceService/" method, .route = route_id, \
    .request = &inference__##type##__descriptor, .run = fn                \
  }

static const pr_grpc_rpc_t rpcs[] = {
    RPC("ServerLive", PR_ROUTE_LIVE, server_live_request, rpc_live),
    RPC("ServerReady", PR_ROUTE_READY, server_ready_request, rpc_ready),
    RPC("ModelReady", PR_ROUTE_MODEL_READY, model_ready_request, rpc_model_ready),
    RPC("ServerMetadata", PR_ROUTE_SERVER_META, server_metadata_request, rpc_server_meta),
    RPC("ModelMetadata", PR_ROUTE_MODEL_META, model_metadata_request, rpc_model_meta),
    RPC("ModelInfer", PR_ROUTE_INFER, model_infer_request, rpc_infer),
    {.path = "/inference.GRPCInferenceService/ModelStreamInfer",
     .route = PR_ROUTE_INFER,
     .request = &inference__model_infer_request__descriptor,
     .each = "/inference.GRPCInferenceService/ModelInfer"},
    RPC("ModelConfig", PR_ROUTE_MODEL_CONFIG, model_config_request, rpc_model_config),
    RPC("ModelStatistics", PR_ROUTE_STATS, model_statistics_request, rpc_stats),
    RPC("RepositoryIndex", PR_ROUTE_REPO_INDEX, repository_index_request, rpc_index),
    RPC("RepositoryModelLoad", PR_ROUTE_REPO_LOAD, repository_model_load_request, rpc_load),
    RPC("RepositoryModelUnload", PR_ROUTE_REPO_UNLOAD, repository_model_unload_request, rpc_unload),
    {.path = "/grpc.health.v1.Health/Check",
     .route = PR_ROUTE_READY,
     .request = &grpc__health__v1__health_check_request__descriptor,
     .run = rpc_health},
};

pr_status_t pr__grpc_open(pr_service_t *svc, const pr_grpc_config_t *cfg, pr_grpc_t **out,
                          char *err, size_t err_len) {
  return pr_grpc__open(svc, cfg, rpcs, (int)(sizeof rpcs / sizeof rpcs[0]), out, err, err_len);
}
