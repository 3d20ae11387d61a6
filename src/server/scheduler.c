/* Request queue and instance workers. See scheduler.h for the locking rules. */
#define _GNU_SOURCE
#include "server/scheduler.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "packrat/estimator.h"

#define MAX_SIZES 24

typedef struct {
  int rows;
  pr_session_t *session;
  pr_tensor_t in[PR_SCHED_MAX_IO]; /* staging buffers of `rows` rows */
} sized_session_t;

typedef struct {
  struct pr_sched *s;
  int config, index, threads, batch;
  int cpus[1024];
  pthread_t thread;
  sized_session_t sizes[MAX_SIZES];
  int n_sizes;
  pr_status_t status;
  char err[512];
  bool started;
} worker_t;

struct pr_sched {
  pr_model_t *model;
  pr_sched_config_t cfg;
  pr_session_options_t base;
  pr_tensor_info_t in_info[PR_SCHED_MAX_IO];
  int n_in, n_out;
  int cpus[4096], n_cpus;
  struct {
    pr_plan_t plan;
    worker_t *workers;
    int n_workers;
    bool ok; /* every worker started with its sessions */
  } configs[PR_SCHED_MAX_CONFIGS];
  int n_configs, active;
  pthread_mutex_t qlock;
  pthread_cond_t qcond;
  pr_request_t *head, *tail;
  int depth, started;
  bool stop;
  /* autoscaler */
  pthread_t auto_thread;
  bool auto_on, auto_running, auto_stop;
  int estimator;
  double window_s;
  pr_sched_stats_t stats;
};

static size_t row_bytes_t(const pr_tensor_t *t) {
  size_t n = pr_dtype_size(t->dtype);
  for (int k = 1; k < t->rank; k++) n *= (size_t)t->dims[k];
  return n;
}

pr_request_t *pr_request_new(void) {
  pr_request_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->cond, NULL);
  return r;
}

void pr_request_free(pr_request_t *r) {
  if (!r) return;
  for (int i = 0; i < PR_SCHED_MAX_IO; i++) pr_free(r->inputs[i].data), pr_free(r->outputs[i].data);
  pthread_mutex_destroy(&r->lock);
  pthread_cond_destroy(&r->cond);
  free(r);
}

static void complete(pr_request_t *r, pr_status_t st, int http, const char *msg) {
  pthread_mutex_lock(&r->lock);
  r->status = st;
  r->http_status = http;
  if (msg) snprintf(r->err, sizeof r->err, "%s", msg);
  r->t_end = pr_now();
  r->done = true;
  pthread_cond_signal(&r->cond);
  pthread_mutex_unlock(&r->lock);
}

void pr_request_wait(pr_request_t *r) {
  pthread_mutex_lock(&r->lock);
  while (!r->done) pthread_cond_wait(&r->cond, &r->lock);
  pthread_mutex_unlock(&r->lock);
}

/* Session of the smallest prepared size >= rows; made now if none. */
static sized_session_t *session_for(worker_t *w, int rows) {
  for (int i = 0; i < w->n_sizes; i++)
    if (w->sizes[i].rows >= rows) return &w->sizes[i];
  return NULL;
}

static pr_status_t add_size(worker_t *w, int rows) {
  struct pr_sched *s = w->s;
  if (w->n_sizes == MAX_SIZES) return PR_ERR_INVALID;
  sized_session_t *z = &w->sizes[w->n_sizes];
  memset(z, 0, sizeof *z);
  z->rows = rows;
  pr_session_options_t opt = s->base;
  pr_tensor_info_t shapes[PR_SCHED_MAX_IO];
  for (int i = 0; i < s->n_in; i++) {
    shapes[i] = s->in_info[i];
    shapes[i].dims[0] = rows;
  }
  opt.threads = w->threads;
  opt.batch = rows;
  opt.input_shapes = shapes;
  pr_status_t st = pr_engine_session_create(s->model, &opt, &z->session, w->err, sizeof w->err);
  if (st) return st;
  for (int i = 0; i < s->n_in; i++) {
    pr_tensor_t *t = &z->in[i];
    t->dtype = shapes[i].dtype;
    t->rank = shapes[i].rank;
    memcpy(t->dims, shapes[i].dims, sizeof t->dims);
    t->data = pr_aligned_calloc(row_bytes_t(t) * (size_t)rows);
    if (!t->data) return PR_ERR_NOMEM;
  }
  w->n_sizes++;
  /* keep sizes ascending */
  for (int i = w->n_sizes - 1; i > 0 && w->sizes[i - 1].rows > w->sizes[i].rows; i--) {
    sized_session_t tmp = w->sizes[i];
    w->sizes[i] = w->sizes[i - 1];
    w->sizes[i - 1] = tmp;
  }
  return PR_OK;
}

static void run_batch(worker_t *w, pr_request_t **reqs, int n, int rows) {
  struct pr_sched *s = w->s;
  sized_session_t *z = session_for(w, rows);
  if (!z) {
    if (add_size(w, rows) != PR_OK) {
      for (int i = 0; i < n; i++) complete(reqs[i], PR_ERR_INTERNAL, 500, w->err);
      atomic_fetch_add(&s->stats.failed, (uint64_t)n);
      return;
    }
    z = session_for(w, rows);
  }
  double t0 = pr_now();
  for (int k = 0; k < s->n_in; k++) {
    size_t rb = row_bytes_t(&z->in[k]), off = 0;
    for (int i = 0; i < n; i++) {
      memcpy((char *)z->in[k].data + off, reqs[i]->inputs[k].data, rb * (size_t)reqs[i]->rows);
      off += rb * (size_t)reqs[i]->rows;
    }
    if (rows < z->rows) memset((char *)z->in[k].data + off, 0, rb * (size_t)(z->rows - rows));
  }
  pr_tensor_t outs[PR_SCHED_MAX_IO];
  char err[512];
  pr_status_t st =
      pr_engine_session_run(z->session, z->in, s->n_in, outs, s->n_out, err, sizeof err);
  double t1 = pr_now();
  atomic_fetch_add(&s->stats.executions, 1);
  atomic_fetch_add(&s->stats.rows_executed, (uint64_t)rows);
  pr_hist_observe(&s->stats.batch, rows);
  pr_hist_observe(&s->stats.compute_s, t1 - t0);
  atomic_fetch_add(&s->stats.compute_us, (uint64_t)((t1 - t0) * 1e6) * (uint64_t)n);
  size_t off[PR_SCHED_MAX_IO] = {0};
  for (int i = 0; i < n; i++) {
    pr_request_t *r = reqs[i];
    pr_status_t rs = st;
    for (int o = 0; o < s->n_out && !rs; o++) {
      pr_tensor_t *t = &r->outputs[o];
      *t = outs[o];
      t->dims[0] = r->rows;
      size_t rb = row_bytes_t(&outs[o]), len = rb * (size_t)r->rows;
      if (!(t->data = pr_aligned_alloc(len))) {
        rs = PR_ERR_NOMEM;
        break;
      }
      memcpy(t->data, (char *)outs[o].data + off[o], len);
      off[o] += len;
    }
    pr_hist_observe(&s->stats.request_s, pr_now() - r->t_enqueue);
    if (rs)
      atomic_fetch_add(&s->stats.failed, 1);
    else
      atomic_fetch_add(&s->stats.success, 1);
    complete(r, rs, rs ? 500 : 200, rs ? (st ? err : "out of memory") : NULL);
  }
}

static void timespec_at(struct timespec *ts, double t_mono) {
  /* condition variables here use CLOCK_MONOTONIC */
  ts->tv_sec = (time_t)t_mono;
  ts->tv_nsec = (long)((t_mono - (double)ts->tv_sec) * 1e9);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  struct pr_sched *s = w->s;
  if (pr_topology_pin(w->cpus, w->threads) < 0)
    pr_log(PR_LOG_WARN, "instance %d: could not pin to its cores", w->index);
  omp_set_num_threads(w->threads);
  /* sessions for 1, 2, 4, ... up to the planned batch, and the batch itself */
  for (int b = 1; !w->status && b < w->batch; b *= 2) w->status = add_size(w, b);
  if (!w->status) w->status = add_size(w, w->batch);
  pthread_mutex_lock(&s->qlock);
  s->started++;
  pthread_cond_broadcast(&s->qcond);
  pr_request_t *batch[1024];
  while (!w->status) {
    /* parked while another config is active; on stop, the active config
     * drains the queue and every other worker leaves at once */
    while (!s->stop && !(s->head && s->active == w->config))
      pthread_cond_wait(&s->qcond, &s->qlock);
    if (s->stop && (!s->head || s->active != w->config)) break;
    int n = 0, rows = 0;
    double first_t = s->head->t_enqueue;
    for (;;) {
      /* take what fits, oldest first; a request larger than the batch runs alone */
      while (s->head && n < 1024 && (n == 0 || rows + s->head->rows <= w->batch)) {
        pr_request_t *r = s->head;
        s->head = r->next;
        if (!s->head) s->tail = NULL;
        s->depth--;
        if (r->deadline > 0 && pr_now() > r->deadline) {
          atomic_fetch_add(&s->stats.timed_out, 1);
          complete(r, PR_ERR_INVALID, 504, "request timed out in the queue");
          continue;
        }
        batch[n++] = r;
        rows += r->rows;
      }
      if (n == 0 || rows >= w->batch || s->stop || s->active != w->config) break;
      double until = first_t + s->cfg.max_queue_delay_s;
      if (pr_now() >= until) break;
      struct timespec ts;
      timespec_at(&ts, until);
      pthread_cond_timedwait(&s->qcond, &s->qlock, &ts);
      if (s->head && rows + s->head->rows > w->batch) break;
    }
    if (!n) continue;
    if (s->head) pthread_cond_broadcast(&s->qcond); /* more work for another instance */
    pthread_mutex_unlock(&s->qlock);
    double now = pr_now();
    for (int i = 0; i < n; i++) {
      batch[i]->t_start = now;
      pr_hist_observe(&s->stats.queue_s, now - batch[i]->t_enqueue);
      atomic_fetch_add(&s->stats.queue_us, (uint64_t)((now - batch[i]->t_enqueue) * 1e6));
    }
    run_batch(w, batch, n, rows);
    pthread_mutex_lock(&s->qlock);
  }
  pthread_mutex_unlock(&s->qlock);
  return NULL;
}

/* Starts the workers of a new config; qlock not held. */
int pr_sched_add_plan(pr_sched_t *s, const pr_plan_t *plan, char *err, size_t err_len) {
  pthread_mutex_lock(&s->qlock);
  for (int c = 0; c < s->n_configs; c++) {
    const pr_plan_t *p = &s->configs[c].plan;
    bool same = p->n_instances == plan->n_instances;
    for (int k = 0; same && k < p->n_instances; k++)
      same = p->instances[k].threads == plan->instances[k].threads &&
             p->instances[k].batch == plan->instances[k].batch &&
             p->instances[k].first_core == plan->instances[k].first_core;
    if (same) {
      pthread_mutex_unlock(&s->qlock);
      return c;
    }
  }
  int idx = s->n_configs;
  pthread_mutex_unlock(&s->qlock);
  int need = 0;
  for (int k = 0; k < plan->n_instances; k++)
    if (plan->instances[k].first_core + plan->instances[k].threads > need)
      need = plan->instances[k].first_core + plan->instances[k].threads;
  if (idx == PR_SCHED_MAX_CONFIGS || need > s->n_cpus || plan->n_instances < 1) {
    pr_errf(err, err_len, "plan needs %d cores, %d available (or too many plans)", need, s->n_cpus);
    return -1;
  }
  worker_t *ws = calloc((size_t)plan->n_instances, sizeof *ws);
  if (!ws) return -1;
  s->configs[idx].plan = *plan;
  s->configs[idx].workers = ws;
  s->configs[idx].n_workers = 0;
  int started_before;
  pthread_mutex_lock(&s->qlock);
  started_before = s->started;
  s->n_configs = idx + 1; /* workers check `active`, which is never idx yet */
  pthread_mutex_unlock(&s->qlock);
  for (int k = 0; k < plan->n_instances; k++) {
    worker_t *w = &ws[k];
    w->s = s;
    w->config = idx;
    w->index = k;
    w->threads = plan->instances[k].threads;
    w->batch = plan->instances[k].batch;
    memcpy(w->cpus, s->cpus + plan->instances[k].first_core, sizeof(int) * (size_t)w->threads);
    if (pthread_create(&w->thread, NULL, worker_main, w)) break;
    w->started = true;
    s->configs[idx].n_workers++;
  }
  pthread_mutex_lock(&s->qlock);
  while (s->started < started_before + s->configs[idx].n_workers)
    pthread_cond_wait(&s->qcond, &s->qlock);
  pthread_mutex_unlock(&s->qlock);
  for (int k = 0; k < s->configs[idx].n_workers; k++)
    if (ws[k].status) {
      pr_errf(err, err_len, "instance %d: %s", k, ws[k].err);
      return -1;
    }
  if (s->configs[idx].n_workers < plan->n_instances) {
    pr_errf(err, err_len, "cannot start an instance thread");
    return -1;
  }
  pthread_mutex_lock(&s->qlock);
  s->configs[idx].ok = true;
  pthread_mutex_unlock(&s->qlock);
  return idx;
}

pr_status_t pr_sched_create(pr_model_t *model, const pr_plan_t *plans, int n_plans, int active,
                            const int *cpus, int n_cpus, const pr_session_options_t *base,
                            const pr_sched_config_t *cfg, pr_sched_t **out, char *err,
                            size_t err_len) {
  *out = NULL;
  int n_in = pr_engine_model_num_inputs(model), n_out = pr_engine_model_num_outputs(model);
  if (n_in > PR_SCHED_MAX_IO || n_out > PR_SCHED_MAX_IO || n_in < 1) {
    pr_errf(err, err_len, "models with 1 to %d inputs and outputs are served", PR_SCHED_MAX_IO);
    return PR_ERR_UNSUPPORTED;
  }
  if (n_plans < 1) {
    pr_errf(err, err_len, "no plan");
    return PR_ERR_INVALID;
  }
  pr_sched_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->model = model;
  s->cfg = *cfg;
  s->base = base ? *base : pr_session_options_default();
  s->n_in = n_in;
  s->n_out = n_out;
  s->n_cpus = n_cpus < 4096 ? n_cpus : 4096;
  memcpy(s->cpus, cpus, sizeof(int) * (size_t)s->n_cpus);
  pthread_mutex_init(&s->qlock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->qcond, &ca);
  pthread_condattr_destroy(&ca);
  pr_hist_init(&s->stats.request_s, pr_latency_bounds, pr_latency_n_bounds);
  pr_hist_init(&s->stats.queue_s, pr_latency_bounds, pr_latency_n_bounds);
  pr_hist_init(&s->stats.compute_s, pr_latency_bounds, pr_latency_n_bounds);
  pr_hist_init(&s->stats.batch, pr_batch_bounds, pr_batch_n_bounds);
  pr_hist_init(&s->stats.switch_s, pr_latency_bounds, pr_latency_n_bounds);
  /* input shapes at batch 1 tell every dim but the batch */
  for (int i = 0; i < n_in; i++) {
    pr_tensor_info_t info;
    pr_engine_model_input(model, i, &info);
    s->in_info[i] = info;
  }
  pr_session_options_t probe = s->base;
  probe.batch = 1;
  pr_session_t *ps;
  pr_status_t st = pr_engine_session_create(model, &probe, &ps, err, err_len);
  if (st) {
    pr_sched_destroy(s);
    return st;
  }
  for (int i = 0; i < n_in; i++) {
    pr_engine_session_input(ps, i, &s->in_info[i]);
    s->in_info[i].name = s->in_info[i].name;
    if (s->in_info[i].rank < 1) st = PR_ERR_UNSUPPORTED;
  }
  pr_engine_session_destroy(ps);
  if (st) {
    pr_errf(err, err_len, "every input needs a batch axis");
    pr_sched_destroy(s);
    return st;
  }
  for (int i = 0; i < n_plans; i++)
    if (pr_sched_add_plan(s, &plans[i], err, err_len) < 0) {
      pr_sched_destroy(s);
      return PR_ERR_INVALID;
    }
  s->active = active >= 0 && active < s->n_configs ? active : 0;
  *out = s;
  return PR_OK;
}

void pr_sched_destroy(pr_sched_t *s) {
  if (!s) return;
  pr_sched_set_auto(s, false, 0, 0);
  pthread_mutex_lock(&s->qlock);
  s->stop = true;
  pthread_cond_broadcast(&s->qcond);
  pthread_mutex_unlock(&s->qlock);
  for (int c = 0; c < s->n_configs; c++)
    for (int k = 0; k < s->configs[c].n_workers; k++)
      pthread_join(s->configs[c].workers[k].thread, NULL);
  /* instances that failed to start leave requests behind: fail them */
  for (pr_request_t *r = s->head, *next; r; r = next) {
    next = r->next;
    complete(r, PR_ERR_INTERNAL, 503, "model unloaded");
  }
  for (int c = 0; c < s->n_configs; c++) {
    for (int k = 0; k < s->configs[c].n_workers; k++) {
      worker_t *w = &s->configs[c].workers[k];
      for (int i = 0; i < w->n_sizes; i++) {
        pr_engine_session_destroy(w->sizes[i].session);
        for (int j = 0; j < PR_SCHED_MAX_IO; j++) pr_free(w->sizes[i].in[j].data);
      }
    }
    free(s->configs[c].workers);
  }
  pthread_mutex_destroy(&s->qlock);
  pthread_cond_destroy(&s->qcond);
  free(s);
}

pr_status_t pr_sched_submit(pr_sched_t *s, pr_request_t *r) {
  r->t_enqueue = pr_now();
  r->deadline = s->cfg.timeout_s > 0 ? r->t_enqueue + s->cfg.timeout_s : 0;
  r->next = NULL;
  pthread_mutex_lock(&s->qlock);
  if (s->stop || s->depth >= s->cfg.queue_capacity) {
    pthread_mutex_unlock(&s->qlock);
    atomic_fetch_add(&s->stats.rejected, 1);
    return PR_ERR_NOMEM;
  }
  if (s->tail)
    s->tail->next = r;
  else
    s->head = r;
  s->tail = r;
  s->depth++;
  atomic_fetch_add(&s->stats.arrivals, 1);
  /* broadcast: parked workers of other configs share the condition variable */
  pthread_cond_broadcast(&s->qcond);
  pthread_mutex_unlock(&s->qlock);
  return PR_OK;
}

int pr_sched_queue_depth(pr_sched_t *s) {
  pthread_mutex_lock(&s->qlock);
  int d = s->depth;
  pthread_mutex_unlock(&s->qlock);
  return d;
}

const pr_plan_t *pr_sched_plan(const pr_sched_t *s) {
  return &s->configs[s->active].plan;
}
const pr_plan_t *pr_sched_config_plan(const pr_sched_t *s, int i) {
  return &s->configs[i].plan;
}

int pr_sched_active(pr_sched_t *s) {
  pthread_mutex_lock(&s->qlock);
  int a = s->active;
  pthread_mutex_unlock(&s->qlock);
  return a;
}

int pr_sched_num_configs(pr_sched_t *s) {
  pthread_mutex_lock(&s->qlock);
  int n = s->n_configs;
  pthread_mutex_unlock(&s->qlock);
  return n;
}

static void plan_str(const pr_plan_t *p, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = 0;
  for (int k = 0; k < p->n_instances && off < len; k++)
    off += (size_t)snprintf(buf + off, len - off, "%s%dx%d", k ? "," : "", p->instances[k].threads,
                            p->instances[k].batch);
}

double pr_sched_switch(pr_sched_t *s, int index, const char *why) {
  double t0 = pr_now();
  pthread_mutex_lock(&s->qlock);
  if (index < 0 || index >= s->n_configs || !s->configs[index].ok) {
    pthread_mutex_unlock(&s->qlock);
    return -1;
  }
  int old = s->active;
  s->active = index;
  pthread_cond_broadcast(&s->qcond);
  pthread_mutex_unlock(&s->qlock);
  double dt = pr_now() - t0;
  if (old != index) {
    atomic_fetch_add(&s->stats.reconfigurations, 1);
    pr_hist_observe(&s->stats.switch_s, dt);
    char a[256], b[256];
    plan_str(&s->configs[old].plan, a, sizeof a);
    plan_str(&s->configs[index].plan, b, sizeof b);
    pr_log(PR_LOG_INFO, "reconfigured %s -> %s (%s) in %.3f ms", a, b, why ? why : "", dt * 1e3);
  }
  return dt;
}

/* ---- autoscaler ---- */

static void *auto_main(void *arg) {
  pr_sched_t *s = arg;
  pr_estimator_t e;
  /* the configs' planned batches, powers of two, ascending */
  int lo = 1 << 30, hi = 1;
  pthread_mutex_lock(&s->qlock);
  for (int c = 0; c < s->n_configs; c++) {
    int b = s->configs[c].plan.batch;
    if (b < lo) lo = b;
    if (b > hi) hi = b;
  }
  int est_kind = s->estimator;
  double window = s->window_s;
  pthread_mutex_unlock(&s->qlock);
  pr_estimator_init(&e, est_kind ? PR_EST_RATE : PR_EST_PAPER, lo, hi);
  pthread_mutex_lock(&s->qlock);
  for (int k = 0; k < PR_EST_MAX_SIZES; k++) {
    e.latency_s[k] = 0;
    for (int c = 0; c < s->n_configs; c++)
      if (s->configs[c].ok && s->configs[c].plan.batch == (1 << k))
        e.latency_s[k] = s->configs[c].plan.latency_ms * 1e-3;
  }
  e.target = s->configs[s->active].plan.batch;
  pthread_mutex_unlock(&s->qlock);
  uint64_t arrivals0 = atomic_load(&s->stats.arrivals);
  for (;;) {
    int samples[20];
    for (int i = 0; i < 20; i++) {
      struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(window / 20 * 1e9)};
      nanosleep(&ts, NULL);
      pthread_mutex_lock(&s->qlock);
      bool stop = s->auto_stop;
      samples[i] = s->depth;
      pthread_mutex_unlock(&s->qlock);
      if (stop) return NULL;
    }
    uint64_t arrivals = atomic_load(&s->stats.arrivals);
    pr_est_window_t w = {samples, 20, (double)(arrivals - arrivals0) / window};
    arrivals0 = arrivals;
    int target = pr_estimator_update(&e, &w);
    int best = -1;
    pthread_mutex_lock(&s->qlock);
    for (int c = 0; c < s->n_configs; c++)
      if (s->configs[c].ok && s->configs[c].plan.batch == target && best < 0) best = c;
    bool on = s->auto_on, change = best >= 0 && best != s->active;
    pthread_mutex_unlock(&s->qlock);
    if (on && change) {
      char why[96];
      snprintf(why, sizeof why, "target batch %d at %.1f requests/s", target, w.arrivals_per_s);
      pr_sched_switch(s, best, why);
    }
  }
}

void pr_sched_set_auto(pr_sched_t *s, bool on, int estimator, double window_s) {
  pthread_mutex_lock(&s->qlock);
  bool running = s->auto_running;
  s->auto_on = on;
  if (on && !running) {
    s->estimator = estimator;
    s->window_s = window_s > 0 ? window_s : 1.0;
    s->auto_stop = false;
    s->auto_running = pthread_create(&s->auto_thread, NULL, auto_main, s) == 0;
  }
  if (!on && running) s->auto_stop = true;
  pthread_mutex_unlock(&s->qlock);
  if (!on && running) {
    pthread_join(s->auto_thread, NULL);
    pthread_mutex_lock(&s->qlock);
    s->auto_running = false;
    pthread_mutex_unlock(&s->qlock);
  }
}

bool pr_sched_auto(pr_sched_t *s) {
  pthread_mutex_lock(&s->qlock);
  bool on = s->auto_on;
  pthread_mutex_unlock(&s->qlock);
  return on;
}
const int *pr_sched_cpus(const pr_sched_t *s) {
  return s->cpus;
}

pr_sched_stats_t *pr_sched_stats(pr_sched_t *s) {
  return &s->stats;
}
