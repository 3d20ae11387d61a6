/* JSON views of a served model (see model_json.h). */
#include "server/model_json.h"

#include <stdatomic.h>

#include "server/protocol.h"
#include "server/service.h"

static json_t *count_ns(pr_duration_t d) {
  return json_pack("{s:I, s:I}", "count", (json_int_t)d.count, "ns", (json_int_t)d.ns);
}

static void batch_one(int batch, pr_duration_t input, pr_duration_t infer, pr_duration_t output,
                      void *ctx) {
  json_array_append_new(
      ctx, json_pack("{s:i, s:o, s:o, s:o}", "batch_size", batch, "compute_input", count_ns(input),
                     "compute_infer", count_ns(infer), "compute_output", count_ns(output)));
}

static json_t *packrat_counts(pr_served_t *m, pr_sched_stats_t *st);

/* The shapes served (dynamic dims only): [{"dims": {NAME: SIZE, ...},
 * "requests", "rows", "batches"}, ...]; requests of shapes past the table's
 * bound are under "other". */
static json_t *shapes_json(pr_served_t *m) {
  const pr_sched_dim_t *dyn;
  int n_dyn = pr__sched_dyn(m->sched, &dyn);
  pr_sched_shape_t shapes[PR_SCHED_MAX_SHAPES];
  uint64_t other;
  int n = pr__sched_shapes(m->sched, shapes, PR_SCHED_MAX_SHAPES, &other);
  json_t *arr = json_array();
  for (int i = 0; i < n; i++) {
    json_t *dims = json_object();
    for (int j = 0; j < n_dyn; j++)
      json_object_set_new(dims, dyn[j].name, json_integer((json_int_t)shapes[i].values[j]));
    json_array_append_new(
        arr,
        json_pack("{s:o, s:I, s:I, s:I}", "dims", dims, "requests", (json_int_t)shapes[i].requests,
                  "rows", (json_int_t)shapes[i].rows, "batches", (json_int_t)shapes[i].batches));
  }
  return json_pack("{s:o, s:I}", "served", arr, "other_requests", (json_int_t)other);
}

/* The session cache of the instances (shapes other than the prepared one). */
static json_t *cache_json(const pr_sched_stats_t *st) {
  return json_pack("{s:I, s:I, s:I, s:f}", "hits", (json_int_t)atomic_load(&st->cache.hits),
                   "misses", (json_int_t)atomic_load(&st->cache.misses), "evictions",
                   (json_int_t)atomic_load(&st->cache.evictions), "compile_seconds_total",
                   atomic_load(&st->cache.compile_ns) / 1e9);
}

static json_t *packrat_figures(pr_served_t *m, pr_sched_stats_t *st) {
  json_t *o = packrat_counts(m, st);
  if (o && (json_object_set_new(o, "shapes", shapes_json(m)) ||
            json_object_set_new(o, "session_cache", cache_json(st)))) {
    json_decref(o);
    o = NULL;
  }
  return o;
}

static json_t *packrat_counts(pr_served_t *m, pr_sched_stats_t *st) {
  return json_pack(
      "{s:I, s:I, s:I, s:f, s:f, s:i, s:I}", "rejected", (json_int_t)atomic_load(&st->rejected),
      "timeout", (json_int_t)atomic_load(&st->timed_out), "cancelled",
      (json_int_t)atomic_load(&st->cancelled), "queue_time_ms_total",
      atomic_load(&st->queue_us) / 1e3, "compute_time_ms_total", atomic_load(&st->compute_us) / 1e3,
      "queue_depth", pr__sched_queue_depth(m->sched), "prepared_plans_evicted",
      (json_int_t)atomic_load(&st->plans_evicted));
}

json_t *pr__model_stats_json(pr_served_t *m) {
  pr_sched_stats_t *st = pr__sched_stats(m->sched);
  pr_model_stats_t x;
  pr__service_stats(m, &x);
  json_t *batches = json_array();
  pr__service_batch_stats(m, batch_one, batches);
  pr_duration_t none = {0, 0};
  json_t *inf = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "success",
                          count_ns(x.success), "fail", count_ns(x.fail), "queue", count_ns(x.queue),
                          "compute_input", count_ns(x.compute_input), "compute_infer",
                          count_ns(x.compute_infer), "compute_output", count_ns(x.compute_output),
                          "cache_hit", count_ns(none), "cache_miss", count_ns(none));
  return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:o}", "name", m->entry.name, "version",
                   m->entry.version, "last_inference", (json_int_t)x.last_inference_ms,
                   "inference_count", (json_int_t)x.inference_count, "execution_count",
                   (json_int_t)x.execution_count, "inference_stats", inf, "batch_stats", batches,
                   "packrat", packrat_figures(m, st));
}

static json_t *tensors(const pr_tensor_info_t *t, int n) {
  json_t *arr = json_array();
  for (int i = 0; i < n; i++) {
    json_t *shape = json_array();
    for (int d = 0; d < t[i].rank; d++) json_array_append_new(shape, json_integer(t[i].dims[d]));
    json_array_append_new(arr, json_pack("{s:s, s:s, s:o}", "name", t[i].name, "datatype",
                                         pr__proto_datatype(t[i].dtype), "shape", shape));
  }
  return arr;
}

/* Triton's version_policy form. */
static json_t *policy_json(const pr_version_policy_t *p) {
  if (p->kind == PR_VERSIONS_ALL) return json_pack("{s:{}}", "all");
  if (p->kind == PR_VERSIONS_LATEST)
    return json_pack("{s:{s:i}}", "latest", "num_versions", p->latest > 0 ? p->latest : 1);
  json_t *list = json_array();
  for (int i = 0; i < p->n_specific; i++) json_array_append_new(list, json_integer(p->specific[i]));
  return json_pack("{s:{s:o}}", "specific", "versions", list);
}

/* Dim i of c as config.json writes it: a size, a range or a list. */
static json_t *dim_json(const pr_model_config_t *c, int i) {
  if (c->dim_kind[i] == PR_DIM_RANGE)
    return json_pack("{s:I, s:I, s:I}", "min", (json_int_t)c->dim_min[i], "max",
                     (json_int_t)c->dim_max[i], "profile_at", (json_int_t)c->dim_values[i]);
  if (c->dim_kind[i] == PR_DIM_FIXED) return json_integer(c->dim_values[i]);
  json_t *list = json_array();
  for (int k = 0; k < c->dim_n_list[i]; k++)
    json_array_append_new(list, json_integer(c->dim_list[i][k]));
  return list;
}

json_t *pr__model_config_json(pr_served_t *m) {
  const pr_model_config_t *c = &m->cfg;
  /* unset (0) plans from batch 1, as the policy reads it (packrat/policy.h):
   * the route says the value in effect, as docs/model-repository.md does */
  int min_batch = c->min_batch > 0 ? c->min_batch : 1;
  json_t *dims = json_object();
  for (int i = 0; i < c->n_dims; i++) json_object_set_new(dims, c->dim_names[i], dim_json(c, i));
  json_t *o =
      json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:s, s:b, s:s, s:i, s:o, s:o, s:o}", "name",
                m->entry.name, "version", m->entry.version, "platform", "onnx", "max_batch_size",
                c->max_batch, "max_queue_delay_us", c->max_queue_delay_us, "queue_capacity",
                c->queue_capacity, "request_timeout_ms",
                (json_int_t)(c->request_timeout_s * 1000 + 0.5), "plan", c->plan, "autoscale",
                c->autoscale, "estimator", c->estimator ? "rate" : "paper", "min_batch_size",
                min_batch, "dims", dims, "inputs", tensors(m->proto.inputs, m->proto.n_inputs),
                "outputs", tensors(m->proto.outputs, m->proto.n_outputs));
  if (o && (json_object_set_new(o, "priority_levels", json_integer(c->priority_levels)) ||
            json_object_set_new(o, "default_priority_level", json_integer(c->default_priority)) ||
            json_object_set_new(o, "version_policy", policy_json(&c->policy)) ||
            json_object_set_new(o, "session_cache",
                                json_pack("{s:i, s:I}", "max_sessions", c->cache_sessions, "max_mb",
                                          (json_int_t)(c->cache_bytes >> 20))))) {
    json_decref(o);
    o = NULL;
  }
  return o;
}
