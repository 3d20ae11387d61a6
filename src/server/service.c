/* The operations both front ends share (see service.h). */
#include "server/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"

const char *const pr__service_extensions[] = {"binary_tensor_data", "model_repository",
                                              "statistics", "model_configuration", "plan"};
const int pr__service_n_extensions =
    (int)(sizeof pr__service_extensions / sizeof pr__service_extensions[0]);

bool pr__service_reserve(pr_service_t *svc, size_t n) {
  uint64_t was = atomic_fetch_add(&svc->inflight, n);
  if (was + n > svc->max_inflight_bytes) {
    atomic_fetch_sub(&svc->inflight, n);
    return false;
  }
  return true;
}

void pr__service_release(pr_service_t *svc, size_t n) {
  atomic_fetch_sub(&svc->inflight, n);
}

bool pr__service_answer_hold(pr_service_t *svc, size_t n) {
  if (!pr__service_reserve(svc, n)) {
    atomic_fetch_add(&svc->answers_refused, 1);
    return false;
  }
  atomic_fetch_add(&svc->answer_bytes, n);
  return true;
}

void pr__service_answer_gone(pr_service_t *svc, size_t n) {
  atomic_fetch_sub(&svc->answer_bytes, n);
  pr__service_release(svc, n);
}

static void ready_one(pr_served_t *m, void *ctx) {
  /* a model unloaded on purpose does not make the server unready */
  *(bool *)ctx &= m->state == PR_MODEL_READY || !strcmp(m->reason, "unloaded");
}

bool pr__service_ready(pr_service_t *svc) {
  bool ready = true;
  if (svc->strict_readiness) pr__models_each(svc->models, ready_one, &ready);
  return ready;
}

pr_served_t *pr__service_model(pr_service_t *svc, const char *name, const char *version,
                               pr_status_t *st, char *msg, size_t msg_len) {
  if (version && !version[0]) version = NULL;
  pr_served_t *m = pr__models_get(svc->models, name, version, st, msg, msg_len);
  if (!m && *st == PR_ERR_NOT_FOUND) snprintf(msg, msg_len, "unknown model or version");
  return m;
}

typedef struct {
  pr_version_name_t *out;
  int n, max;
} versions_ctx_t;

static void ready_version(pr_served_t *m, void *ctx) {
  versions_ctx_t *v = ctx;
  if (m && m->state == PR_MODEL_READY && v->n < v->max)
    snprintf(v->out[v->n++], sizeof v->out[0], "%s", m->entry.version);
}

int pr__service_versions(pr_service_t *svc, const char *name, pr_version_name_t *out, int max) {
  versions_ctx_t v = {out, 0, max};
  pr__models_with(svc->models, name, ready_version, &v);
  return v.n;
}

typedef struct {
  const pr_repo_entry_t *e;
  pr_index_fn fn;
  void *ctx;
} index_ctx_t;

static void index_one(pr_served_t *m, void *ctx) {
  index_ctx_t *x = ctx;
  const char *state = !m                             ? "UNAVAILABLE"
                      : m->state == PR_MODEL_READY   ? "READY"
                      : m->state == PR_MODEL_LOADING ? "LOADING"
                                                     : "UNAVAILABLE";
  const char *reason = m ? m->reason : x->e->problem[0] ? x->e->problem : "not loaded";
  x->fn(x->e->name, m ? m->entry.version : x->e->version, state, reason, x->ctx);
}

pr_status_t pr__service_index(pr_service_t *svc, pr_index_fn fn, void *ctx) {
  int cap = svc->max_models + 64, total = 0;
  pr_repo_entry_t *entries = calloc((size_t)cap, sizeof *entries);
  int n = entries ? pr__repo_scan(svc->repository, entries, cap, &total) : -1;
  if (n < 0) {
    free(entries);
    return PR_ERR_IO;
  }
  for (int i = 0; i < n; i++) {
    index_ctx_t x = {&entries[i], fn, ctx};
    pr__models_with(svc->models, entries[i].name, index_one, &x);
  }
  free(entries);
  if (total > n) pr__log(PR_LOG_WARN, "repository index: %d models, %d listed", total, n);
  return PR_OK;
}

pr_status_t pr__service_load(pr_service_t *svc, const char *name, char *err, size_t err_len) {
  pr_status_t st = pr__models_load(svc->models, name, err, err_len);
  /* a model that cannot be read or run is the repository's fault */
  return st == PR_ERR_UNSUPPORTED || st == PR_ERR_IO ? PR_ERR_INVALID : st;
}

pr_status_t pr__service_unload(pr_service_t *svc, const char *name, char *err, size_t err_len) {
  pr_status_t st = pr__models_unload(svc->models, name);
  if (st) snprintf(err, err_len, "no such loaded model");
  return st;
}

/* ---- statistics ---- */

static pr_duration_t hist_duration(const pr_hist_t *h) {
  return (pr_duration_t){atomic_load(&h->count), atomic_load(&h->sum_us) * 1000};
}

void pr__service_stats(pr_served_t *m, pr_model_stats_t *out) {
  pr_sched_stats_t *st = pr__sched_stats(m->sched);
  out->last_inference_ms = atomic_load(&st->last_inference_ms);
  out->inference_count = atomic_load(&st->rows_executed);
  out->execution_count = atomic_load(&st->executions);
  out->success = (pr_duration_t){atomic_load(&st->success), atomic_load(&st->success_ns)};
  out->fail = (pr_duration_t){atomic_load(&st->failed), atomic_load(&st->failed_ns)};
  out->queue = hist_duration(&st->stage[PR_STAGE_queue]);
  out->compute_input = hist_duration(&st->stage[PR_STAGE_assemble]);
  out->compute_infer = hist_duration(&st->stage[PR_STAGE_compute]);
  out->compute_output = hist_duration(&st->stage[PR_STAGE_scatter]);
}

void pr__service_batch_stats(pr_served_t *m,
                             void (*fn)(int batch, pr_duration_t input, pr_duration_t infer,
                                        pr_duration_t output, void *ctx),
                             void *ctx) {
  const pr_sched_stats_t *st = pr__sched_stats(m->sched);
  for (int b = 1; b <= st->max_batch; b++) {
    const pr_batch_stats_t *x = &st->by_batch[b];
    uint64_t n = atomic_load(&x->count);
    if (n)
      fn(b, (pr_duration_t){n, atomic_load(&x->input_ns)},
         (pr_duration_t){n, atomic_load(&x->infer_ns)},
         (pr_duration_t){n, atomic_load(&x->output_ns)}, ctx);
  }
}

/* ---- inference ---- */

static size_t tensors_bytes(const pr_proto_model_t *m, const pr_request_t *r) {
  size_t n = 0;
  for (int i = 0; i < m->n_inputs; i++) /* views into a body add nothing */
    if (!(r->borrowed & 1u << i))
      n += (size_t)pr_tensor_numel(&r->inputs[i]) * pr_dtype_size(r->inputs[i].dtype);
  return n;
}

pr_status_t pr__infer_submit(pr_service_t *svc, pr_served_t *m, pr_infer_decode_fn decode,
                             void *arg, void (*on_done)(void *), void *ctx, pr_infer_t *x,
                             char *err, size_t err_len) {
  memset(x, 0, sizeof *x);
  pr_request_t *r = pr__request_new();
  if (!r) return pr__errf(err, err_len, "out of memory"), PR_ERR_NOMEM;
  /* the tensors may take what is left of the in-flight bound */
  uint64_t held = atomic_load(&svc->inflight);
  size_t room = held < svc->max_inflight_bytes ? svc->max_inflight_bytes - held : 1;
  pr_proto_infer_t q;
  double t0 = pr__now();
  pr_status_t st = decode(&m->proto, arg, room, r, &q, err, err_len);
  pr__hist_observe(&pr__sched_stats(m->sched)->stage[PR_STAGE_parse], pr__now() - t0);
  size_t bytes = st == PR_OK ? tensors_bytes(&m->proto, r) : 0;
  /* the decoded tensors count against the in-flight bytes as well */
  if (st == PR_OK && !pr__service_reserve(svc, bytes)) {
    st = PR_ERR_BUSY;
    pr__errf(err, err_len, "the server holds too many request bytes; retry later");
  }
  if (st != PR_OK) {
    pr__proto_infer_clear(&q);
    pr__request_free(r);
    return st;
  }
  r->on_done = on_done;
  r->on_done_ctx = ctx;
  r->priority = q.priority;
  r->timeout_s = (double)q.timeout_us * 1e-6;
  /* complete before the submit: on_done may run before it returns */
  *x = (pr_infer_t){.svc = svc, .model = m, .req = r, .q = q, .reserved = bytes, .t_parse = t0};
  if ((st = pr__sched_submit(m->sched, r)) != PR_OK) {
    pr__service_release(svc, bytes);
    if (st == PR_ERR_INVALID)
      pr__errf(err, err_len, "'priority' must be 0 (the model's default level) to %d",
               m->cfg.priority_levels);
    else
      pr__errf(err, err_len, "%s", r->err);
    double retry = r->retry_after_s;
    pr__proto_infer_clear(&q);
    pr__request_free(r);
    memset(x, 0, sizeof *x);
    x->retry_after_s = retry;
    return st;
  }
  return PR_OK;
}

pr_status_t pr__infer_answer(pr_infer_t *x, pr_status_t (*encode)(pr_infer_t *x, void *arg),
                             void *arg, const char **msg, double *t_encoded) {
  pr_request_t *r = x->req;
  pr_sched_stats_t *stats = pr__sched_stats(x->model->sched);
  double t0 = pr__now();
  pr__hist_observe(&stats->stage[PR_STAGE_resume], t0 - r->t_end);
  *t_encoded = t0;
  if (r->status) {
    *msg = r->err;
    return r->status;
  }
  pr_status_t st = encode(x, arg);
  *t_encoded = pr__now();
  pr__hist_observe(&stats->stage[PR_STAGE_encode], *t_encoded - t0);
  *msg = "cannot encode the response";
  return st;
}

void pr__infer_release(pr_infer_t *x, bool answered) {
  if (!x->req) return;
  if (!answered) pr__request_wait(x->req); /* only if the client went away first */
  pr__proto_infer_clear(&x->q);
  pr__request_free(x->req);
  x->req = NULL;
  pr__service_release(x->svc, x->reserved);
  x->reserved = 0;
}
