#include "server/prometheus.h"

#include <stddef.h>
#include <stdlib.h>

#include "server/metrics.h"

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

void pr_prom_write(pr_models_t *ms, const pr_prom_server_t *srv, FILE *f) {
  int known = 0;
  pr_models_each(ms, count_known, &known);
  ready_t r = {calloc((size_t)(known ? known : 1), sizeof(pr_served_t *)), 0, known};
  if (r.list) pr_models_each(ms, take_ready, &r);
  family(f, "packrat_requests_total", "counter", "Inference requests by outcome.");
  for (int i = 0; i < r.n; i++) {
    pr_sched_stats_t *st = pr_sched_stats(r.list[i]->sched);
    const char *n = r.list[i]->entry.name;
    const struct {
      const char *outcome;
      _Atomic uint64_t *v;
    } o[] = {{"success", &st->success},
             {"failure", &st->failed},
             {"rejected", &st->rejected},
             {"timeout", &st->timed_out}};
    for (size_t k = 0; k < sizeof o / sizeof o[0]; k++)
      fprintf(f, "packrat_requests_total{model=\"%s\",outcome=\"%s\"} %llu\n", n, o[k].outcome,
              (unsigned long long)atomic_load(o[k].v));
  }
  const struct {
    const char *name, *help;
    size_t off;
  } hs[] = {
      {"packrat_request_duration_seconds", "Time from enqueue to answer.",
       offsetof(pr_sched_stats_t, request_s)},
      {"packrat_queue_duration_seconds", "Time a request waited in the queue.",
       offsetof(pr_sched_stats_t, queue_s)},
      {"packrat_compute_duration_seconds", "Time of one batched execution.",
       offsetof(pr_sched_stats_t, compute_s)},
      {"packrat_batch_size", "Rows per batched execution.", offsetof(pr_sched_stats_t, batch)},
      {"packrat_reconfiguration_duration_seconds", "Time a plan switch took.",
       offsetof(pr_sched_stats_t, switch_s)}};
  for (size_t h = 0; h < sizeof hs / sizeof hs[0]; h++) {
    family(f, hs[h].name, "histogram", hs[h].help);
    for (int i = 0; i < r.n; i++) {
      char labels[200];
      snprintf(labels, sizeof labels, "model=\"%s\"", r.list[i]->entry.name);
      pr_hist_write((const pr_hist_t *)((const char *)pr_sched_stats(r.list[i]->sched) + hs[h].off),
                    f, hs[h].name, labels);
    }
  }
  const struct {
    const char *name, *help;
    size_t off;
  } cs[] = {{"packrat_reconfigurations_total", "Plan switches.",
             offsetof(pr_sched_stats_t, reconfigurations)},
            {"packrat_prepared_plans_evicted_total",
             "Prepared plans evicted (least recently used) to stay within the limit.",
             offsetof(pr_sched_stats_t, plans_evicted)}};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    family(f, cs[c].name, "counter", cs[c].help);
    for (int i = 0; i < r.n; i++)
      fprintf(f, "%s{model=\"%s\"} %llu\n", cs[c].name, r.list[i]->entry.name,
              (unsigned long long)atomic_load(
                  (_Atomic uint64_t *)((char *)pr_sched_stats(r.list[i]->sched) + cs[c].off)));
  }
  family(f, "packrat_queue_depth", "gauge", "Requests waiting.");
  for (int i = 0; i < r.n; i++)
    fprintf(f, "packrat_queue_depth{model=\"%s\"} %d\n", r.list[i]->entry.name,
            pr_sched_queue_depth(r.list[i]->sched));
  family(f, "packrat_prepared_plans", "gauge", "Plans prepared (instances started).");
  for (int i = 0; i < r.n; i++)
    fprintf(f, "packrat_prepared_plans{model=\"%s\"} %d\n", r.list[i]->entry.name,
            pr_sched_num_configs(r.list[i]->sched));
  pr_plan_t *plans = r.n ? malloc(sizeof *plans * (size_t)r.n) : NULL;
  for (int i = 0; plans && i < r.n; i++) pr_sched_current_plan(r.list[i]->sched, &plans[i]);
  family(f, "packrat_plan_instances", "gauge", "Instances of the current plan.");
  for (int i = 0; plans && i < r.n; i++)
    fprintf(f, "packrat_plan_instances{model=\"%s\"} %d\n", r.list[i]->entry.name,
            plans[i].n_instances);
  family(f, "packrat_plan_instance_threads", "gauge",
         "Threads of each instance of the current plan.");
  for (int i = 0; plans && i < r.n; i++)
    for (int k = 0; k < plans[i].n_instances; k++)
      fprintf(f, "packrat_plan_instance_threads{model=\"%s\",instance=\"%d\"} %d\n",
              r.list[i]->entry.name, k, plans[i].instances[k].threads);
  family(f, "packrat_plan_instance_batch", "gauge", "Planned batch of each instance.");
  for (int i = 0; plans && i < r.n; i++)
    for (int k = 0; k < plans[i].n_instances; k++)
      fprintf(f, "packrat_plan_instance_batch{model=\"%s\",instance=\"%d\"} %d\n",
              r.list[i]->entry.name, k, plans[i].instances[k].batch);
  free(plans);
  for (int i = 0; i < r.n; i++) pr_models_put(r.list[i]);
  free(r.list);
  family(f, "packrat_models", "gauge", "Models known to the server (any state).");
  fprintf(f, "packrat_models %d\n", known);
  family(f, "packrat_models_limit", "gauge", "Most models the server holds (--max-models).");
  fprintf(f, "packrat_models_limit %d\n", srv->models_limit);
  family(f, "packrat_http_requests_total", "counter", "HTTP requests received.");
  fprintf(f, "packrat_http_requests_total %llu\n", (unsigned long long)srv->http_requests);
  family(f, "packrat_http_errors_total", "counter", "HTTP requests answered with an error.");
  fprintf(f, "packrat_http_errors_total %llu\n", (unsigned long long)srv->http_errors);
  family(f, "packrat_http_refused_total", "counter",
         "HTTP requests refused from their headers (body over a limit, bytes in flight).");
  fprintf(f, "packrat_http_refused_total %llu\n", (unsigned long long)srv->http_refused);
  family(f, "packrat_http_connections", "gauge", "Open HTTP connections.");
  fprintf(f, "packrat_http_connections %d\n", srv->connections);
  family(f, "packrat_http_connections_limit", "gauge",
         "Most open HTTP connections (--max-connections); more are refused.");
  fprintf(f, "packrat_http_connections_limit %d\n", srv->connections_limit);
  family(f, "packrat_inflight_bytes", "gauge", "Bytes held by requests being received or served.");
  fprintf(f, "packrat_inflight_bytes %llu\n", (unsigned long long)srv->inflight_bytes);
  family(f, "packrat_inflight_bytes_limit", "gauge", "Most bytes requests may hold at once.");
  fprintf(f, "packrat_inflight_bytes_limit %llu\n", (unsigned long long)srv->inflight_limit);
}
