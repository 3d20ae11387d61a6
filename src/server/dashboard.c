/* The dashboard's embedded files and its state document. See dashboard.h
 * for the design; the page itself is src/server/dashboard/. */
#define _GNU_SOURCE
#include "server/dashboard.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/lock.h"
#include "base/text.h"
#include "base/topology.h"
#include "base/util.h"
#include "packrat/profiler.h"

/* made by embed.cmake from src/server/dashboard/ at build time */
extern const unsigned char *const pr__dash_page_html;
extern const size_t pr__dash_page_html_len;
extern const unsigned char *const pr__dash_app_js;
extern const size_t pr__dash_app_js_len;
extern const unsigned char *const pr__dash_style_css;
extern const size_t pr__dash_style_css_len;

const char *const pr__dash_headers[][2] = {
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' "
     "data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"X-Frame-Options", "DENY"},
    {NULL, NULL},
};

pr_dash_asset_t pr__dash_asset(pr_dash_asset_id_t id) {
  assert(id >= 0 && id < PR_DASH_N_ASSETS);
  switch (id) {
    case PR_DASH_SCRIPT:
      return (pr_dash_asset_t){pr__dash_app_js, pr__dash_app_js_len,
                               "text/javascript; charset=utf-8"};
    case PR_DASH_STYLE:
      return (pr_dash_asset_t){pr__dash_style_css, pr__dash_style_css_len,
                               "text/css; charset=utf-8"};
    default:
      return (pr_dash_asset_t){pr__dash_page_html, pr__dash_page_html_len,
                               "text/html; charset=utf-8"};
  }
}

/* ---- encoding helpers: each records a failure (out of memory) in *ok ---- */

/* Untrusted or engine-made text: valid UTF-8 (cut at 1 KiB), escaped by
 * jansson when dumped. */
static json_t *text(const char *s) {
  char buf[1024];
  return json_string(pr__utf8_sanitize(s ? s : "", buf, sizeof buf));
}

/* A measured or predicted value: null when unknown (<= 0, NaN, infinite). */
static json_t *value_or_null(double v) {
  return v > 0 && isfinite(v) ? json_real(v) : json_null();
}

static void put(json_t *o, const char *key, json_t *v, bool *ok) {
  if (!v || json_object_set_new(o, key, v)) *ok = false;
}

static void push(json_t *a, json_t *v, bool *ok) {
  if (!v || json_array_append_new(a, v)) *ok = false;
}

/* Unix milliseconds of a monotonic time t. */
static json_t *unix_ms(double t, double now_mono, double now_wall) {
  return json_integer((json_int_t)floor((now_wall - (now_mono - t)) * 1e3));
}

/* ---- the parts of a model ---- */

static json_t *instances_json(const pr_dash_model_t *v, bool *ok) {
  json_t *arr = json_array();
  const pr_plan_t *p = v->plan;
  for (int k = 0; arr && p && k < p->n_instances; k++) {
    const pr_plan_instance_t *in = &p->instances[k];
    json_t *o = json_object(), *cores = json_array();
    for (int j = 0; cores && j < in->threads; j++)
      if (in->first_core + j >= 0 && in->first_core + j < v->n_cpus)
        push(cores, json_integer(v->cpus[in->first_core + j]), ok);
    const pr_sched_instance_t *m = k < v->n_measured ? &v->measured[k] : NULL;
    if (!o) {
      json_decref(cores);
      *ok = false;
      continue;
    }
    put(o, "instance", json_integer(k), ok);
    put(o, "threads", json_integer(in->threads), ok);
    put(o, "batch", json_integer(in->batch), ok);
    put(o, "cores", cores, ok);
    put(o, "predicted_ms", value_or_null(in->latency_ms), ok);
    put(o, "measured_ms", value_or_null(m ? m->full_ms : 0), ok);
    put(o, "measured_any_ms", value_or_null(m ? m->any_ms : 0), ok);
    put(o, "runs", json_integer(m ? (json_int_t)m->runs : 0), ok);
    put(o, "mean_rows", value_or_null(m && m->runs ? (double)m->rows / (double)m->runs : 0), ok);
    push(arr, o, ok);
  }
  if (!arr) *ok = false;
  return arr;
}

static json_t *plan_json(const pr_plan_t *p, bool *ok) {
  if (!p) return json_null();
  char spec[4096];
  pr_plan_format(p, spec, sizeof spec);
  json_t *o = json_object();
  if (!o) return NULL;
  put(o, "spec", text(spec), ok);
  put(o, "batch", json_integer(p->batch), ok);
  put(o, "instances", json_integer(p->n_instances), ok);
  put(o, "predicted_ms", value_or_null(p->latency_ms), ok);
  return o;
}

static json_t *prepared_json(const pr_dash_model_t *v, bool *ok) {
  json_t *arr = json_array();
  for (int c = 0; arr && c < v->n_prepared; c++) {
    json_t *o = plan_json(&v->prepared[c], ok);
    if (o) put(o, "active", json_boolean(c == v->active), ok);
    /* the same plan may be prepared for several shape buckets */
    if (o && v->prepared_bucket && v->prepared_bucket[c] > 0)
      put(o, "bucket", json_integer((json_int_t)v->prepared_bucket[c]), ok);
    push(arr, o, ok);
  }
  return arr;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The distinct values of the points' field (threads or batch), ascending,
 * into vals (n_points room); returns how many. */
static int distinct(const pr_profile_t *p, bool threads, int *vals) {
  for (int i = 0; i < p->n_points; i++)
    vals[i] = threads ? p->points[i].threads : p->points[i].batch;
  qsort(vals, (size_t)p->n_points, sizeof *vals, cmp_int);
  int n = 0;
  for (int i = 0; i < p->n_points; i++)
    if (n == 0 || vals[n - 1] != vals[i]) vals[n++] = vals[i];
  return n;
}

static json_t *int_array(const int *vals, int n, bool *ok) {
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) push(a, json_integer(vals[i]), ok);
  return a;
}

/* Index of v in the ascending vals[0..n) (present by construction). */
static int index_of(const int *vals, int n, int v) {
  const int *at = bsearch(&v, vals, (size_t)n, sizeof *vals, cmp_int);
  assert(at);
  return (int)(at - vals);
}

/* Rows of the matrix, by thread count; null where the profile has no point. */
static json_t *profile_rows(const double *cells, int nt, int nb, bool *ok) {
  json_t *rows = json_array();
  for (int i = 0; rows && i < nt; i++) {
    json_t *row = json_array();
    for (int j = 0; row && j < nb; j++) push(row, value_or_null(cells[(size_t)i * nb + j]), ok);
    push(rows, row, ok);
  }
  return rows;
}

/* latency[t][b] as a matrix: rows by thread count, columns by batch. A
 * profile is a grid (thread counts times batch sizes); one too sparse to
 * draw as a matrix (over PROFILE_MAX_CELLS) is left out (null). */
#define PROFILE_MAX_CELLS (1 << 20)
static json_t *profile_json(const pr_profile_t *p, bool *ok) {
  if (!p || p->n_points <= 0) return json_null();
  int *ts = malloc(sizeof(int) * (size_t)p->n_points);
  int *bs = malloc(sizeof(int) * (size_t)p->n_points);
  if (!ts || !bs) {
    free(ts), free(bs);
    return NULL;
  }
  int nt = distinct(p, true, ts), nb = distinct(p, false, bs);
  size_t n_cells = (size_t)nt * (size_t)nb;
  double *cells = n_cells <= PROFILE_MAX_CELLS ? malloc(sizeof(double) * n_cells) : NULL;
  json_t *o = cells ? json_object() : NULL;
  if (o) {
    for (size_t c = 0; c < n_cells; c++) cells[c] = -1;
    for (int k = 0; k < p->n_points; k++) {
      const pr_profile_point_t *pt = &p->points[k];
      cells[(size_t)index_of(ts, nt, pt->threads) * nb + index_of(bs, nb, pt->batch)] =
          pt->latency_ms;
    }
    put(o, "threads", int_array(ts, nt, ok), ok);
    put(o, "batches", int_array(bs, nb, ok), ok);
    put(o, "latency_ms", profile_rows(cells, nt, nb, ok), ok);
    put(o, "cpu", text(p->cpu), ok);
    put(o, "cores", json_integer(p->cores), ok);
  }
  free(cells);
  free(ts);
  free(bs);
  return o ? o : n_cells > PROFILE_MAX_CELLS ? json_null() : NULL;
}

/* The per-second series as parallel arrays, the first point starting at
 * start_unix_ms, one a second. */
static json_t *series_json(const pr_dash_model_t *v, double now_mono, double now_wall, bool *ok) {
  static const char *const keys[] = {"rate",   "completed", "failed", "rejected",
                                     "p50_ms", "p99_ms",    "queue"};
  enum { N_KEYS = sizeof keys / sizeof keys[0] };
  json_t *o = json_object(), *a[N_KEYS];
  if (!o) return NULL;
  for (int k = 0; k < N_KEYS; k++) put(o, keys[k], a[k] = json_array(), ok);
  if (!*ok) return o;
  for (int i = 0; i < v->n_series; i++) {
    const pr_history_point_t *p = &v->series[i];
    push(a[0], json_integer((json_int_t)p->arrivals), ok);
    push(a[1], json_integer((json_int_t)p->completed), ok);
    push(a[2], json_integer((json_int_t)p->failed), ok);
    push(a[3], json_integer((json_int_t)p->rejected), ok);
    push(a[4], value_or_null(p->p50_ms), ok);
    push(a[5], value_or_null(p->p99_ms), ok);
    push(a[6], json_integer((json_int_t)p->queue_max), ok);
  }
  double start = v->n_series ? (double)v->series[0].second : now_mono;
  put(o, "start_unix_ms", unix_ms(start, now_mono, now_wall), ok);
  put(o, "interval_s", json_integer(1), ok);
  put(o, "summary_p50_ms", value_or_null(v->p50_ms), ok);
  put(o, "summary_p99_ms", value_or_null(v->p99_ms), ok);
  put(o, "summary_s", json_integer(PR_DASH_SUMMARY_S), ok);
  return o;
}

static json_t *switches_json(const pr_dash_model_t *v, double now_mono, double now_wall, bool *ok) {
  json_t *arr = json_array();
  for (int i = 0; arr && i < v->n_switches; i++) {
    const pr_history_switch_t *e = &v->switches[i];
    json_t *o = json_object();
    if (!o) {
      *ok = false;
      break;
    }
    put(o, "unix_ms", unix_ms(e->t, now_mono, now_wall), ok);
    put(o, "ago_s", json_real(now_mono - e->t), ok);
    put(o, "from", text(e->from), ok);
    put(o, "to", text(e->to), ok);
    put(o, "why", text(e->why), ok);
    put(o, "duration_ms", json_real(e->duration_ms), ok);
    push(arr, o, ok);
  }
  return arr;
}

json_t *pr__dash_model_json(const pr_dash_model_t *v, double now_mono, double now_wall) {
  bool ok = true;
  json_t *o = json_object();
  if (!o) return NULL;
  put(o, "name", text(v->name), &ok);
  put(o, "version", text(v->version), &ok);
  put(o, "state", text(v->state), &ok);
  put(o, "reason", text(v->reason), &ok);
  put(o, "max_batch", json_integer(v->max_batch), &ok);
  put(o, "autoscale", json_boolean(v->autoscale), &ok);
  put(o, "precision", text(v->precision ? v->precision : "fp32"), &ok);
  put(o, "queue_depth", json_integer(v->queue_depth), &ok);
  put(o, "queue_capacity", json_integer(v->queue_capacity), &ok);
  put(o, "plan", plan_json(v->plan, &ok), &ok);
  put(o, "instances", instances_json(v, &ok), &ok);
  put(o, "prepared", prepared_json(v, &ok), &ok);
  put(o, "profile", profile_json(v->profile, &ok), &ok);
  put(o, "series", series_json(v, now_mono, now_wall, &ok), &ok);
  put(o, "switches", switches_json(v, now_mono, now_wall, &ok), &ok);
  put(o, "switches_total", json_integer((json_int_t)v->switches_total), &ok);
  json_t *share = json_array();
  for (int k = v->share_first; share && k < v->share_first + v->share_cores; k++)
    if (k >= 0 && k < v->n_cpus) push(share, json_integer(v->cpus[k]), &ok);
  put(o, "share", json_pack("{s:b, s:o*}", "divided", v->divided, "cores", share), &ok);
  if (ok) return o;
  json_decref(o);
  return NULL;
}

json_t *pr__dash_machine_json(const pr_dash_machine_t *m) {
  bool ok = true;
  json_t *o = json_object(), *cpus = json_array();
  if (!o || !cpus) {
    json_decref(o);
    json_decref(cpus);
    return NULL;
  }
  json_t *cores = json_array(), *threads = json_array();
  for (int i = 0; i < m->n_cpus; i++) {
    int thread, core = pr__topology_core_of(m->cpus[i], &thread);
    push(cpus, json_integer(m->cpus[i]), &ok);
    if (cores) push(cores, core >= 0 ? json_integer(core) : json_null(), &ok);
    if (threads) push(threads, thread >= 0 ? json_integer(thread) : json_null(), &ok);
  }
  put(o, "core_of", cores, &ok); /* each CPU's physical core, hardware thread */
  put(o, "thread_of", threads, &ok);
  put(o, "cpu", text(m->cpu_name), &ok);
  put(o, "physical_cores", json_integer(m->physical_cores), &ok);
  put(o, "cpus", cpus, &ok);
  put(o, "uptime_s", json_real(m->uptime_s), &ok);
  if (ok) return o;
  json_decref(o);
  return NULL;
}

/* ---- collecting the views ---- */

/* Room for one model's copies (reused model after model). */
typedef struct {
  pr_plan_t plan;
  pr_plan_t prepared[PR_SCHED_MAX_CONFIGS];
  long long prepared_bucket[PR_SCHED_MAX_CONFIGS];
  pr_sched_instance_t measured[PR_PLAN_MAX_INSTANCES];
  pr_history_point_t series[PR_HISTORY_SECONDS];
  pr_history_switch_t switches[PR_HISTORY_SWITCHES];
} scratch_t;

struct pr_dash {
  pr_lock_t lock; /* one state at a time: guards x and the last state */
  scratch_t x;
  char *last; /* the last state made, at last_at (pr__now) */
  size_t last_len;
  double last_at;
};

pr_dash_t *pr__dash_create(void) {
  pr_dash_t *d = malloc(sizeof *d);
  if (!d) return NULL;
  pr__lock_init(&d->lock);
  d->last = NULL;
  d->last_len = 0;
  d->last_at = 0;
  return d;
}

void pr__dash_destroy(pr_dash_t *d) {
  if (!d) return;
  pr__lock_destroy(&d->lock);
  free(d->last);
  free(d);
}

typedef struct {
  scratch_t *x;
  json_t *models;
  double now_mono, now_wall;
  bool ok;
} state_ctx_t;

static const char *state_name(pr_model_state_t st) {
  return st == PR_MODEL_READY ? "READY" : st == PR_MODEL_LOADING ? "LOADING" : "UNAVAILABLE";
}

/* A plan pinned by hand carries no latencies: read them off the profile
 * (the instance's thread count and batch), when it has the point. */
static void predict(pr_plan_t *p, const pr_profile_t *prof) {
  if (p->latency_ms > 0 || prof->n_points <= 0) return;
  for (int k = 0; k < p->n_instances; k++) {
    pr_plan_instance_t *in = &p->instances[k];
    if (in->latency_ms <= 0) in->latency_ms = pr_profile_latency(prof, in->threads, in->batch);
    if (in->latency_ms > p->latency_ms) p->latency_ms = in->latency_ms;
  }
}

/* Fills v from a ready model's scheduler and history into x. */
static void collect_ready(pr_served_t *m, scratch_t *x, double now, pr_dash_model_t *v) {
  pr_sched_t *s = m->sched;
  v->n_measured = pr__sched_instances(s, &x->plan, x->measured, PR_PLAN_MAX_INSTANCES);
  v->plan = &x->plan;
  v->measured = x->measured;
  v->cpus = pr__sched_cpus(s);
  v->n_cpus = pr__sched_num_cpus(s);
  v->n_prepared =
      pr__sched_snapshot(s, x->prepared, x->prepared_bucket, PR_SCHED_MAX_CONFIGS, &v->active);
  v->prepared = x->prepared;
  v->prepared_bucket = x->prepared_bucket;
  predict(&x->plan, &m->profile);
  for (int c = 0; c < v->n_prepared; c++) predict(&x->prepared[c], &m->profile);
  v->autoscale = pr__sched_auto(s);
  v->queue_depth = pr__sched_queue_depth(s);
  v->profile = &m->profile;
  pr_history_t *h = pr__sched_history(s);
  /* complete seconds only: the one under way would read as a dip */
  v->n_series = pr__history_series(h, now - 1, PR_HISTORY_SECONDS, x->series);
  v->series = x->series;
  v->p50_ms = pr__history_percentile(h, now - 1, PR_DASH_SUMMARY_S, 0.50);
  v->p99_ms = pr__history_percentile(h, now - 1, PR_DASH_SUMMARY_S, 0.99);
  v->n_switches = pr__history_switches(h, x->switches, PR_HISTORY_SWITCHES, &v->switches_total);
  v->switches = x->switches;
  v->divided = m->divided; /* under the registry's read lock (model_one) */
  v->share_first = m->share.first_core;
  v->share_cores = m->share.cores;
}

/* Under the registry's read lock: a ready model's scheduler lives until
 * its state changes, which needs the write lock. */
static void model_one(pr_served_t *m, void *ctx) {
  state_ctx_t *c = ctx;
  pr_dash_model_t v = {.name = m->entry.name,
                       .version = m->entry.version,
                       .state = state_name(m->state),
                       .reason = m->reason,
                       .max_batch = m->cfg.max_batch,
                       .precision = pr_precision_name(m->cfg.precision),
                       .queue_capacity = m->cfg.queue_capacity,
                       .active = -1,
                       .p50_ms = -1,
                       .p99_ms = -1};
  if (m->state == PR_MODEL_READY && m->sched) collect_ready(m, c->x, c->now_mono, &v);
  json_t *o = pr__dash_model_json(&v, c->now_mono, c->now_wall);
  push(c->models, o, &c->ok);
}

/* Makes the state anew (d->lock held). */
static char *make_state(pr_dash_t *d, pr_models_t *ms, const pr_dash_machine_t *machine) {
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  state_ctx_t c = {.x = &d->x,
                   .models = json_array(),
                   .now_mono = pr__now(),
                   .now_wall = (double)wall.tv_sec + wall.tv_nsec * 1e-9,
                   .ok = true};
  json_t *root = json_object(), *server = json_object();
  if (!c.models || !root || !server) {
    json_decref(c.models), json_decref(root), json_decref(server);
    return NULL;
  }
  pr__models_each(ms, model_one, &c);
  put(server, "name", json_string("packrat"), &c.ok);
  put(server, "version", json_string(PR_VERSION), &c.ok);
  put(server, "unix_ms", unix_ms(c.now_mono, c.now_mono, c.now_wall), &c.ok);
  put(root, "server", server, &c.ok);
  put(root, "machine", pr__dash_machine_json(machine), &c.ok);
  put(root, "models", c.models, &c.ok);
  json_t *limits = json_pack("{s:i, s:i, s:i}", "series_s", PR_HISTORY_SECONDS, "switches",
                             PR_HISTORY_SWITCHES, "summary_s", PR_DASH_SUMMARY_S);
  put(root, "limits", limits, &c.ok);
  char *out = c.ok ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
  json_decref(root);
  return out;
}

char *pr__dash_state(pr_dash_t *d, pr_models_t *ms, const pr_dash_machine_t *machine) {
  pr__lock(&d->lock);
  double now = pr__now();
  if (!d->last || now - d->last_at >= PR_DASH_REUSE_S) {
    char *text = make_state(d, ms, machine);
    if (text) {
      free(d->last);
      d->last = text;
      d->last_len = strlen(text);
      d->last_at = now;
    }
  }
  char *out = d->last && now - d->last_at < PR_DASH_REUSE_S ? malloc(d->last_len + 1) : NULL;
  if (out) memcpy(out, d->last, d->last_len + 1);
  pr__unlock(&d->lock);
  return out;
}
