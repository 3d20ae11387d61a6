#include "server/prometheus.h"

#include <stddef.h>
#include <stdlib.h>

#include "packrat/estimator.h"
#include "sched/metrics.h"

typedef struct {
  pr_served_t **list;
  int n, cap;
} ready_t;

static void take_ready(pr_served_t *m, void *ctx) {
  ready_t *r = ctx;
  if (m->state != PR_MODEL_READY || r->n == r->cap) return;
  atomic_fetch_add(&m->refs, 1);
  r->list[r->n++] = m;
}

static void count_known(pr_served_t *m, void *ctx) {
  (void)m;
  ++*(int *)ctx;
}

static void family(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ---- per-model families, one table each ---- */

/* A family whose value is a field at `off` (of the model's stats or of a
 * plan instance). */
typedef struct {
  const char *name, *help;
  size_t off;
} field_family_t;

#define STATS_AT(m, off) ((const char *)pr__sched_stats((m)->sched) + (off))

static void write_requests(FILE *f, const ready_t *r) {
  static const struct {
    const char *outcome;
    size_t off;
  } outcomes[] = {{"success", offsetof(pr_sched_stats_t, success)},
                  {"failure", offsetof(pr_sched_stats_t, failed)},
                  {"rejected", offsetof(pr_sched_stats_t, rejected)},
                  {"rejected_queue_full", offsetof(pr_sched_stats_t, rejected_full)},
                  {"rejected_over_timeout", offsetof(pr_sched_stats_t, rejected_late)},
                  {"timeout", offsetof(pr_sched_stats_t, timed_out)},
                  {"cancelled", offsetof(pr_sched_stats_t, cancelled)}};
  family(f, "packrat_requests_total", "counter",
         "Inference requests by outcome (rejected: refused at submit, of which "
         "rejected_queue_full and rejected_over_timeout: a backlog it could not wait out; "
         "cancelled: taken out of the queue unrun, its client gone).");
  for (int i = 0; i < r->n; i++)
    for (size_t k = 0; k < sizeof outcomes / sizeof outcomes[0]; k++)
      fprintf(f, "packrat_requests_total{model=\"%s\",version=\"%s\",outcome=\"%s\"} %llu\n",
              r->list[i]->entry.name, r->list[i]->entry.version, outcomes[k].outcome,
              (unsigned long long)atomic_load(
                  (_Atomic uint64_t *)STATS_AT(r->list[i], outcomes[k].off)));
}

static const field_family_t histograms[] = {
    {"packrat_request_duration_seconds", "Time from enqueue to answer.",
     offsetof(pr_sched_stats_t, request_s)},
    {"packrat_queue_duration_seconds", "Time a request waited in the queue.",
     offsetof(pr_sched_stats_t, queue_s)},
    {"packrat_compute_duration_seconds", "Time of one batched execution.",
     offsetof(pr_sched_stats_t, compute_s)},
    {"packrat_batch_size", "Rows per batched execution.", offsetof(pr_sched_stats_t, batch)},
    {"packrat_reconfiguration_duration_seconds", "Time a plan switch took.",
     offsetof(pr_sched_stats_t, switch_s)},
    {"packrat_session_compile_seconds",
     "Time an instance took to compile a session for a request shape it had none for.",
     offsetof(pr_sched_stats_t, compile_s)}};

static void write_histograms(FILE *f, const ready_t *r) {
  for (size_t h = 0; h < sizeof histograms / sizeof histograms[0]; h++) {
    family(f, histograms[h].name, "histogram", histograms[h].help);
    for (int i = 0; i < r->n; i++) {
      char labels[200];
      snprintf(labels, sizeof labels, "model=\"%s\",version=\"%s\"", r->list[i]->entry.name,
               r->list[i]->entry.version);
      pr__hist_write((const pr_hist_t *)STATS_AT(r->list[i], histograms[h].off), f,
                     histograms[h].name, labels);
    }
  }
}

static void write_stages(FILE *f, const ready_t *r) {
  family(f, "packrat_request_stage_seconds", "histogram",
         "Where a request's time goes: parse, queue, assemble, compute, scatter (per batched "
         "execution), resume, encode, send.");
  for (int i = 0; i < r->n; i++)
    for (int k = 0; k < PR_STAGE_COUNT; k++) {
      char labels[200];
      snprintf(labels, sizeof labels, "model=\"%s\",version=\"%s\",stage=\"%s\"",
               r->list[i]->entry.name, r->list[i]->entry.version, pr__stage_names[k]);
      pr__hist_write(&pr__sched_stats(r->list[i]->sched)->stage[k], f,
                     "packrat_request_stage_seconds", labels);
    }
}

static void write_overhead(FILE *f, const ready_t *r) {
  family(f, "packrat_request_overhead_seconds", "histogram",
         "Per answered infer request: its time in the server (parse to sent) outside its batch's "
         "compute.");
  for (int i = 0; i < r->n; i++) {
    char labels[200];
    snprintf(labels, sizeof labels, "model=\"%s\",version=\"%s\"", r->list[i]->entry.name,
             r->list[i]->entry.version);
    pr__hist_write(&pr__sched_stats(r->list[i]->sched)->overhead_s, f,
                   "packrat_request_overhead_seconds", labels);
  }
}

/* The autoscaler's inputs and decisions (its last window). */
static void write_autoscaler(FILE *f, const ready_t *r) {
  static const struct {
    const char *name, *help;
    size_t off;
    double scale;
  } gauges[] = {{"packrat_autoscaler_target_batch", "The batch the autoscaler plans for.",
                 offsetof(pr_sched_stats_t, auto_target), 1},
                {"packrat_autoscaler_target_capacity",
                 "Requests per second the target batch's plan serves, planned (0: unknown).",
                 offsetof(pr_sched_stats_t, auto_capacity_milli), 1e-3},
                {"packrat_autoscaler_arrival_rate", "Requests per second in its last window.",
                 offsetof(pr_sched_stats_t, auto_rate_milli), 1e-3},
                {"packrat_autoscaler_backlog_start", "Requests queued at its last window's start.",
                 offsetof(pr_sched_stats_t, auto_backlog_start), 1},
                {"packrat_autoscaler_backlog", "Requests queued at its last window's end.",
                 offsetof(pr_sched_stats_t, auto_backlog), 1},
                {"packrat_autoscaler_bucket_size",
                 "The shape bucket (its representative size) it plans for; 0: no buckets.",
                 offsetof(pr_sched_stats_t, auto_bucket_size), 1},
                {"packrat_autoscaler_oldest_wait_seconds",
                 "Age of the oldest queued request at its last window's end.",
                 offsetof(pr_sched_stats_t, auto_oldest_us), 1e-6}};
  for (size_t g = 0; g < sizeof gauges / sizeof gauges[0]; g++) {
    family(f, gauges[g].name, "gauge", gauges[g].help);
    for (int i = 0; i < r->n; i++)
      fprintf(f, "%s{model=\"%s\",version=\"%s\"} %g\n", gauges[g].name, r->list[i]->entry.name,
              r->list[i]->entry.version,
              (double)atomic_load((_Atomic uint64_t *)STATS_AT(r->list[i], gauges[g].off)) *
                  gauges[g].scale);
  }
  static const char *const reasons[] = {"estimate", "held_by_backlog", "raised_by_backlog",
                                        "held_by_rate"};
  _Static_assert(sizeof reasons / sizeof reasons[0] == PR_EST_REASONS, "one name a reason");
  family(f, "packrat_autoscaler_decisions_total", "counter",
         "Autoscaler windows by what decided the target: the estimate, the backlog (held or "
         "raised), or the window's arrival rate (held).");
  for (int i = 0; i < r->n; i++)
    for (int k = 0; k < PR_EST_REASONS; k++)
      fprintf(
          f, "packrat_autoscaler_decisions_total{model=\"%s\",version=\"%s\",reason=\"%s\"} %llu\n",
          r->list[i]->entry.name, r->list[i]->entry.version, reasons[k],
          (unsigned long long)atomic_load(&pr__sched_stats(r->list[i]->sched)->auto_decisions[k]));
  family(f, "packrat_bucket_requests_total", "counter",
         "Requests submitted per shape bucket (its representative size), of models with buckets.");
  for (int i = 0; i < r->n; i++) {
    const pr_sched_dim_t *dim;
    const long long *sizes;
    int n = pr__sched_buckets(r->list[i]->sched, &dim, &sizes);
    for (int k = 0; k < n; k++)
      fprintf(
          f, "packrat_bucket_requests_total{model=\"%s\",version=\"%s\",bucket=\"%lld\"} %llu\n",
          r->list[i]->entry.name, r->list[i]->entry.version, sizes[k],
          (unsigned long long)atomic_load(&pr__sched_stats(r->list[i]->sched)->bucket_arrivals[k]));
  }
}

static const field_family_t counters[] = {
    {"packrat_reconfigurations_total", "Plan switches.",
     offsetof(pr_sched_stats_t, reconfigurations)},
    {"packrat_prepared_plans_evicted_total",
     "Prepared plans evicted (least recently used) to stay within the limit.",
     offsetof(pr_sched_stats_t, plans_evicted)},
    {"packrat_session_cache_hits_total",
     "Batches of a request shape other than the prepared one that found their session cached.",
     offsetof(pr_sched_stats_t, cache.hits)},
    {"packrat_session_cache_misses_total",
     "Batches of a request shape other than the prepared one that compiled their session.",
     offsetof(pr_sched_stats_t, cache.misses)},
    {"packrat_session_cache_evictions_total",
     "Sessions evicted from the instances' caches (least recently used; count and byte bounds).",
     offsetof(pr_sched_stats_t, cache.evictions)}};

static void write_counters(FILE *f, const ready_t *r) {
  for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
    family(f, counters[c].name, "counter", counters[c].help);
    for (int i = 0; i < r->n; i++)
      fprintf(f, "%s{model=\"%s\",version=\"%s\"} %llu\n", counters[c].name, r->list[i]->entry.name,
              r->list[i]->entry.version,
              (unsigned long long)atomic_load(
                  (_Atomic uint64_t *)STATS_AT(r->list[i], counters[c].off)));
  }
}

static const struct {
  const char *name, *help;
  int (*value)(pr_sched_t *s);
} model_gauges[] = {
    {"packrat_queue_depth", "Requests waiting.", pr__sched_queue_depth},
    {"packrat_prepared_plans", "Plans prepared (instances started).", pr__sched_num_configs},
};

/* The queue's bounds: the capacity, and the admission estimate (the live
 * plan's rate, the last request's estimated wait, and the requests that
 * rate serves within the model's timeout: the queue a request of the
 * default level may join). */
static void write_admission(FILE *f, const ready_t *r) {
  static const char *const names[] = {"packrat_queue_capacity", "packrat_queue_service_rate",
                                      "packrat_queue_wait_estimate_seconds",
                                      "packrat_queue_admission_limit"};
  static const char *const helps[] = {
      "Requests the queue holds at most.",
      "Rows per second the live plan serves (measured per instance, planned until measured; "
      "0: unknown).",
      "Estimated queue wait of the last submitted request (rows ahead at the rate).",
      "Rows the rate serves within 90% of the model's request timeout: beyond them a request "
      "is refused with 503 and Retry-After (0: no bound but the capacity)."};
  for (int g = 0; g < 4; g++) {
    family(f, names[g], "gauge", helps[g]);
    for (int i = 0; i < r->n; i++) {
      const pr_served_t *m = r->list[i];
      pr_sched_stats_t *st = pr__sched_stats(m->sched);
      double rate = pr__sched_service_rate(m->sched), v;
      double limit = rate * PR_SCHED_ADMIT_SHARE * m->cfg.request_timeout_s;
      v = g == 0   ? m->cfg.queue_capacity
          : g == 1 ? rate
          : g == 2 ? atomic_load(&st->admit_wait_us) * 1e-6
                   : limit;
      fprintf(f, "%s{model=\"%s\",version=\"%s\"} %g\n", names[g], m->entry.name, m->entry.version,
              v);
    }
  }
}

static void write_model_gauges(FILE *f, const ready_t *r) {
  for (size_t g = 0; g < sizeof model_gauges / sizeof model_gauges[0]; g++) {
    family(f, model_gauges[g].name, "gauge", model_gauges[g].help);
    for (int i = 0; i < r->n; i++)
      fprintf(f, "%s{model=\"%s\",version=\"%s\"} %d\n", model_gauges[g].name,
              r->list[i]->entry.name, r->list[i]->entry.version,
              model_gauges[g].value(r->list[i]->sched));
  }
}

static const field_family_t instance_gauges[] = {
    {"packrat_plan_instance_threads", "Threads of each instance of the current plan.",
     offsetof(pr_plan_instance_t, threads)},
    {"packrat_plan_instance_batch", "Planned batch of each instance.",
     offsetof(pr_plan_instance_t, batch)},
};

/* The current plans' gauges, from one snapshot of each model's plan. */
static void write_plan_gauges(FILE *f, const ready_t *r) {
  pr_plan_t *plans = r->n ? malloc(sizeof *plans * (size_t)r->n) : NULL;
  for (int i = 0; plans && i < r->n; i++) pr__sched_current_plan(r->list[i]->sched, &plans[i]);
  family(f, "packrat_plan_instances", "gauge", "Instances of the current plan.");
  for (int i = 0; plans && i < r->n; i++)
    fprintf(f, "packrat_plan_instances{model=\"%s\",version=\"%s\"} %d\n", r->list[i]->entry.name,
            r->list[i]->entry.version, plans[i].n_instances);
  for (size_t g = 0; g < sizeof instance_gauges / sizeof instance_gauges[0]; g++) {
    family(f, instance_gauges[g].name, "gauge", instance_gauges[g].help);
    for (int i = 0; plans && i < r->n; i++)
      for (int k = 0; k < plans[i].n_instances; k++)
        fprintf(f, "%s{model=\"%s\",version=\"%s\",instance=\"%d\"} %d\n", instance_gauges[g].name,
                r->list[i]->entry.name, r->list[i]->entry.version, k,
                *(const int *)((const char *)&plans[i].instances[k] + instance_gauges[g].off));
  }
  free(plans);
}

/* The division of the cores: each model's share, and the balancer's moves. */
static void write_cores(FILE *f, pr_models_t *ms, const ready_t *r) {
  family(f, "packrat_model_cores", "gauge",
         "Cores the model owns in the joint plan (every core when it shares them).");
  for (int i = 0; i < r->n; i++) {
    bool divided;
    pr_joint_share_t share;
    pr__models_share(ms, r->list[i], &divided, &share);
    fprintf(f, "packrat_model_cores{model=\"%s\",version=\"%s\",divided=\"%s\"} %d\n",
            r->list[i]->entry.name, r->list[i]->entry.version, divided ? "true" : "false",
            share.cores);
  }
  family(f, "packrat_core_moves_total", "counter",
         "Re-divisions of the cores the balancer made as the loads moved.");
  fprintf(f, "packrat_core_moves_total %llu\n", (unsigned long long)pr__models_core_moves(ms));
}

/* The weights each model's instances share: one copy in the kernels'
 * layouts, however many instances run (engine.h). */
static void write_weights(FILE *f, const ready_t *r) {
  family(f, "packrat_model_shared_weight_bytes", "gauge",
         "Bytes of weights in the kernels' layouts that the model's instances share (one copy).");
  for (int i = 0; i < r->n; i++)
    fprintf(f, "packrat_model_shared_weight_bytes{model=\"%s\",version=\"%s\"} %zu\n",
            r->list[i]->entry.name, r->list[i]->entry.version,
            pr_engine_model_shared_weight_bytes(r->list[i]->model));
}

/* ---- server-wide families ---- */

static void write_server(FILE *f, const pr_prom_server_t *srv, int known) {
  const struct {
    const char *name, *type, *help;
    long long value;
  } scalars[] = {
      {"packrat_models", "gauge", "Models known to the server (any state).", known},
      {"packrat_models_limit", "gauge", "Most models the server holds (--max-models).",
       srv->models_limit},
      {"packrat_http_requests_total", "counter", "HTTP requests received.",
       (long long)srv->http_requests},
      {"packrat_http_errors_total", "counter", "HTTP requests answered with an error.",
       (long long)srv->http_errors},
      {"packrat_http_refused_total", "counter",
       "HTTP requests refused from their headers (body over a limit, bytes in flight).",
       (long long)srv->http_refused},
      {"packrat_grpc_requests_total", "counter", "gRPC calls received.",
       (long long)srv->grpc.calls},
      {"packrat_grpc_errors_total", "counter",
       "gRPC calls (and stream requests) answered with an error.", (long long)srv->grpc.errors},
      {"packrat_grpc_streams", "gauge", "ModelStreamInfer streams open.",
       (long long)srv->grpc.streams},
      {"packrat_grpc_stream_requests_total", "counter",
       "Requests received on ModelStreamInfer streams.", (long long)srv->grpc.stream_requests},
      {"packrat_http_connections", "gauge", "Open HTTP connections.", srv->connections},
      {"packrat_http_connections_limit", "gauge",
       "Most open HTTP connections (--max-connections); more are refused.", srv->connections_limit},
      {"packrat_inflight_bytes", "gauge",
       "Bytes held for clients: requests being received or served, answers not yet sent.",
       (long long)srv->inflight_bytes},
      {"packrat_inflight_bytes_limit", "gauge",
       "Most bytes held for clients at once (--max-inflight-mb).", (long long)srv->inflight_limit},
      {"packrat_answer_bytes", "gauge",
       "Of packrat_inflight_bytes, encoded infer answers not yet sent (HTTP and gRPC).",
       (long long)srv->answer_bytes},
      {"packrat_answers_refused_total", "counter",
       "Infer answers dropped for a 503 (UNAVAILABLE): no room in --max-inflight-mb.",
       (long long)srv->answers_refused},
  };
  for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; k++) {
    family(f, scalars[k].name, scalars[k].type, scalars[k].help);
    fprintf(f, "%s %lld\n", scalars[k].name, scalars[k].value);
  }
}

void pr__prom_write(pr_models_t *ms, const pr_prom_server_t *srv, FILE *f) {
  int known = 0;
  pr__models_each(ms, count_known, &known);
  ready_t r = {calloc((size_t)(known ? known : 1), sizeof(pr_served_t *)), 0, known};
  if (r.list) pr__models_each(ms, take_ready, &r);
  write_requests(f, &r);
  write_histograms(f, &r);
  write_stages(f, &r);
  write_overhead(f, &r);
  write_autoscaler(f, &r);
  write_counters(f, &r);
  write_model_gauges(f, &r);
  write_admission(f, &r);
  write_plan_gauges(f, &r);
  write_cores(f, ms, &r);
  write_weights(f, &r);
  for (int i = 0; i < r.n; i++) pr__models_put(r.list[i]);
  free(r.list);
  write_server(f, srv, known);
}
