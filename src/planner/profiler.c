/* The profiler: latency[t][b] through the engine API.
 *
 * Each point runs on a fresh pinned worker (runtime/worker.h) on the first t
 * CPUs of the topology order (a new OpenMP master, so its team is pinned
 * too), compiles a
 * session for (t, b), warms up once, then repeats until its runs are stable
 * (profiler.h, "Measurement quality": the middle half of the runs within the
 * tolerance of their median, at least PR_PROFILE_MIN_RUNS runs, bounded by
 * the point's time budget and PR_PROFILE_MAX_RUNS).
 *
 * A machine that was busy during the first pass shows as suspicious points
 * (a p90 far above the median, runs that never settle, more threads slower
 * than fewer): those are measured once more, and a profile whose re-measure
 * does not reproduce the first pass is returned for use but marked not to be
 * cached (n_suspicious > 0), so that one bad moment does not drive the plans
 * of every later start. The decision is pr_profile_assess, a pure function.
 *
 * Instances running side by side slow each other down (shared caches and
 * memory bandwidth), so a plan built from isolated latencies is optimistic.
 * For every thread count t that fits at least twice in T, the profiler also
 * runs floor(T/t) instances of (t, b_ref) at once, in lock step, and scales
 * the points of t by the measured slowdown (at least 1); larger t (but < T)
 * take the slowdown of the largest measured t, and t = T none. Points keep
 * their isolated latency too.
 *
 * Saving, loading and the cache are in profile_store.c. */
#define _GNU_SOURCE
#include "packrat/profiler.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "runtime/worker.h"

#define MAX_RUNS PR_PROFILE_MAX_RUNS

int pr_profile_grid(int max_batch, const int *extra, int n_extra, int *out, int max) {
  int n = 0;
  for (int b = 1; b <= max_batch && n < max; b = b < 8 ? b + 1 : b * 2) out[n++] = b;
  if (max_batch > 8 && out[n - 1] != max_batch && n < max) out[n++] = max_batch;
  for (int i = 0; i < n_extra && n < max; i++) {
    bool have = false;
    for (int j = 0; j < n; j++) have |= out[j] == extra[i];
    if (!have && extra[i] >= 1) out[n++] = extra[i];
  }
  for (int i = 1; i < n; i++) /* insertion sort: small */
    for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
      int t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  return n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  double median, p90, spread;
} run_stats_t;

/* Median, p90 and the spread of the middle half (q1..q3 over the median) of
 * n >= 1 run times. */
static run_stats_t run_stats(const double *times, int n) {
  double s[MAX_RUNS];
  memcpy(s, times, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  run_stats_t r;
  r.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  r.p90 = s[(int)ceil(0.9 * n) - 1];
  int lo = n / 4, hi = n - 1 - n / 4;
  r.spread = r.median > 0 ? (s[hi] - s[lo]) / r.median : 0;
  return r;
}

/* True when two latencies (ms) differ by more than the tolerance allows:
 * tolerance x ref, or PR_PROFILE_FLOOR_MS when that is larger. */
static bool beyond(double diff, double ref, double tolerance) {
  double allowed = tolerance * ref;
  return diff > (allowed > PR_PROFILE_FLOOR_MS ? allowed : PR_PROFILE_FLOOR_MS);
}

/* ---- one point ---- */

typedef struct {
  const pr_profile_options_t *opt;
  int threads, batch, pass;
  double max_s, tolerance;
  pr_profile_point_t point; /* the result */
  pr_status_t status;
  char err[512];
} point_job_t;

/* One timed run: the test hook's latency, or the engine's. */
static pr_status_t timed_run(point_job_t *j, pr_worker_t *w, int run, double *ms) {
  const pr_profile_options_t *o = j->opt;
  if (o->measure_run) {
    *ms = o->measure_run(o->measure_ctx, j->threads, j->batch, j->pass, run);
    if (*ms >= 0 && isfinite(*ms)) return PR_OK;
    pr__errf(j->err, sizeof j->err, "the measure hook failed");
    return PR_ERR_INTERNAL;
  }
  pr_worker_session_t *z = &w->sizes[0];
  double t0 = pr__now();
  pr_status_t st =
      pr_engine_session_run(z->session, z->in, w->n_in, NULL, 0, j->err, sizeof j->err);
  *ms = (pr__now() - t0) * 1e3;
  return st;
}

/* On a worker's thread (w NULL with the test hook): the session for
 * (threads, batch) with inputs, a warm-up run, then timed runs until stable. */
static void measure_point(point_job_t *j, pr_worker_t *w) {
  if (w) {
    if ((j->status = pr__worker_prepare(w, j->batch, true))) {
      snprintf(j->err, sizeof j->err, "%s", w->err);
      return;
    }
    pr__worker_fill_inputs(w, &w->sizes[0]);
    pr_worker_session_t *z = &w->sizes[0];
    if ((j->status =
             pr_engine_session_run(z->session, z->in, w->n_in, NULL, 0, j->err, sizeof j->err)))
      return; /* the warm-up run failed */
  }
  double times[MAX_RUNS], spent_s = 0;
  int n = 0;
  while (n < MAX_RUNS) {
    if ((j->status = timed_run(j, w, n, &times[n]))) return;
    spent_s += times[n++] * 1e-3;
    if (n < 3) continue;
    if (spent_s >= j->max_s) break;
    if (n < PR_PROFILE_MIN_RUNS) continue;
    run_stats_t now = run_stats(times, n);
    if (!beyond(now.spread * now.median, now.median, j->tolerance)) break; /* stable */
  }
  run_stats_t r = run_stats(times, n);
  j->point = (pr_profile_point_t){.threads = j->threads,
                                  .batch = j->batch,
                                  .latency_ms = r.median,
                                  .p90_ms = r.p90,
                                  .isolated_ms = r.median,
                                  .runs = n,
                                  .spread = r.spread};
}

static void measure_point_main(pr_worker_t *w, void *ctx) {
  measure_point(ctx, w);
}

typedef struct {
  pr_model_t *model;
  const pr_session_options_t *base; /* input_shapes NULL: the model's own */
  const pr_profile_options_t *opt;
  double tolerance;
} profiler_t;

/* Measures (t, b) on a pinned worker (a fresh OpenMP master) into *point;
 * the test hook runs on the calling thread. */
static pr_status_t measure_one(const profiler_t *pf, int t, int b, int pass,
                               pr_profile_point_t *point, char *err, size_t err_len) {
  point_job_t job = {.opt = pf->opt,
                     .threads = t,
                     .batch = b,
                     .pass = pass,
                     .max_s = pf->opt->max_point_s > 0 ? pf->opt->max_point_s : 3.0,
                     .tolerance = pf->tolerance};
  if (pf->opt->measure_run) {
    measure_point(&job, NULL);
  } else {
    pr_worker_t *w = malloc(sizeof *w);
    if (!w) return PR_ERR_NOMEM;
    job.status =
        pr__worker_init(w, 0, pf->model, pf->opt->cpus, t, pf->base, job.err, sizeof job.err);
    if (!job.status && pr__worker_start(w, measure_point_main, &job)) {
      free(w);
      pr__errf(err, err_len, "cannot start a profiling thread");
      return PR_ERR_INTERNAL;
    }
    pr__worker_join(w);
    free(w);
  }
  if (job.status) {
    pr__errf(err, err_len, "threads %d batch %d: %s", t, b, job.err);
    return job.status;
  }
  *point = job.point;
  return PR_OK;
}

/* ---- co-running instances ---- */

#define CORUN_RUNS 5

typedef struct {
  int batch;
  pthread_barrier_t *barrier;
  pthread_mutex_t *go_lock;
  pthread_cond_t *go_cond;
  int *go; /* 0 wait, 1 run, -1 quit (not every instance thread started) */
  double times[CORUN_RUNS + 1];
} corun_job_t;

static void corun_main(pr_worker_t *w, void *arg) {
  corun_job_t *j = arg;
  pthread_mutex_lock(j->go_lock);
  while (*j->go == 0) pthread_cond_wait(j->go_cond, j->go_lock);
  int go = *j->go;
  pthread_mutex_unlock(j->go_lock);
  if (go < 0) return;
  w->status = pr__worker_prepare(w, j->batch, true);
  pr_worker_session_t *z = w->status ? NULL : &w->sizes[0];
  if (z) pr__worker_fill_inputs(w, z);
  /* every thread takes part in every barrier, even after a failure */
  for (int r = 0; r <= CORUN_RUNS; r++) {
    pthread_barrier_wait(j->barrier);
    double t0 = pr__now();
    if (!w->status)
      w->status = pr_engine_session_run(z->session, z->in, w->n_in, NULL, 0, w->err, sizeof w->err);
    j->times[r] = (pr__now() - t0) * 1e3;
  }
}

/* Median latency of k lock-step instances of (t, b); < 0 on failure. */
static double corun_latency(pr_model_t *model, const pr_session_options_t *base, const int *cpus,
                            int t, int b, int k, char *err, size_t err_len) {
  corun_job_t *jobs = calloc((size_t)k, sizeof *jobs);
  pr_worker_t *ws = calloc((size_t)k, sizeof *ws);
  pthread_barrier_t barrier;
  pthread_mutex_t go_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t go_cond = PTHREAD_COND_INITIALIZER;
  int go = 0;
  double result = -1;
  if (!jobs || !ws) goto out;
  pthread_barrier_init(&barrier, NULL, (unsigned)k);
  int started = 0;
  for (int i = 0; i < k; i++) {
    jobs[i] = (corun_job_t){
        .batch = b, .barrier = &barrier, .go_lock = &go_lock, .go_cond = &go_cond, .go = &go};
    if (pr__worker_init(&ws[i], i, model, cpus + i * t, t, base, err, err_len) ||
        pr__worker_start(&ws[i], corun_main, &jobs[i]))
      break;
    started++;
  }
  pthread_mutex_lock(&go_lock);
  go = started == k ? 1 : -1; /* the barrier needs all k, or none may start */
  pthread_cond_broadcast(&go_cond);
  pthread_mutex_unlock(&go_lock);
  double all[64 * CORUN_RUNS];
  int n = 0;
  for (int i = 0; i < started; i++) {
    pr__worker_join(&ws[i]);
    if (ws[i].status && result == -1) {
      pr__errf(err, err_len, "%s", ws[i].err);
      result = -2;
    }
    for (int r = 1; r <= CORUN_RUNS && n < 64 * CORUN_RUNS; r++) all[n++] = jobs[i].times[r];
  }
  pthread_barrier_destroy(&barrier);
  if (started < k) {
    pr__errf(err, err_len, "cannot start co-running instances");
    goto out;
  }
  if (result == -2) {
    result = -1;
    goto out;
  }
  qsort(all, (size_t)n, sizeof *all, cmp_double);
  result = n % 2 ? all[n / 2] : 0.5 * (all[n / 2 - 1] + all[n / 2]);
out:
  free(jobs);
  free(ws);
  return result;
}

/* ---- quality ---- */

static int point_index(const pr_profile_t *p, int threads, int batch) {
  for (int i = 0; i < p->n_points; i++)
    if (p->points[i].threads == threads && p->points[i].batch == batch) return i;
  return -1;
}

static double tolerance_of(const pr_profile_t *p, double tolerance) {
  if (tolerance > 0) return tolerance;
  return p && p->tolerance > 0 ? p->tolerance : PR_PROFILE_TOLERANCE;
}

int pr_profile_assess(const pr_profile_t *p, double tolerance, pr_profile_issue_t *issues,
                      int max) {
  double tol = tolerance_of(p, tolerance);
  int n = 0;
  for (int i = 0; i < p->n_points; i++) {
    const pr_profile_point_t *q = &p->points[i];
    if (q->remeasured > 0) continue; /* reproduced: real */
    double median = q->isolated_ms;
    /* p90_ms carries the co-running factor of latency_ms: undo it */
    double p90 = q->latency_ms > 0 ? q->p90_ms * (median / q->latency_ms) : q->p90_ms;
    pr_profile_issue_t is = {.threads = q->threads,
                             .batch = q->batch,
                             .median_ms = median,
                             .p90_ms = p90,
                             .spread = q->spread};
    if (q->remeasured < 0) is.why |= PR_PROFILE_NOT_REPRODUCED;
    if (beyond(p90 - median, median, PR_PROFILE_P90_LIMIT - 1)) is.why |= PR_PROFILE_NOISY;
    if (beyond(q->spread * median, median, tol)) is.why |= PR_PROFILE_UNSTABLE;
    const pr_profile_point_t *fewer = NULL; /* the fastest with fewer threads */
    for (int k = 0; k < p->n_points; k++) {
      const pr_profile_point_t *f = &p->points[k];
      if (f->batch == q->batch && f->threads < q->threads &&
          (!fewer || f->isolated_ms < fewer->isolated_ms))
        fewer = f;
    }
    if (fewer && beyond(median - fewer->isolated_ms, fewer->isolated_ms, tol)) {
      is.why |= PR_PROFILE_INVERTED;
      is.fewer_threads = fewer->threads;
      is.fewer_ms = fewer->isolated_ms;
    }
    if (!is.why) continue;
    if (issues && n < max) issues[n] = is;
    n++;
  }
  return n;
}

void pr_profile_issue_text(const pr_profile_issue_t *is, double tolerance, char *buf, size_t len) {
  if (!buf || !len) return;
  double tol = tolerance > 0 ? tolerance : PR_PROFILE_TOLERANCE;
  size_t off = 0;
  buf[0] = 0;
#define APPEND(...)                                                              \
  do {                                                                           \
    if (off < len) {                                                             \
      if (off) off += (size_t)snprintf(buf + off, len - off, "; ");              \
      if (off < len) off += (size_t)snprintf(buf + off, len - off, __VA_ARGS__); \
    }                                                                            \
  } while (0)
  if (is->why & PR_PROFILE_NOISY)
    APPEND("p90 %.1fx the median (limit %.1fx)", is->median_ms > 0 ? is->p90_ms / is->median_ms : 0,
           PR_PROFILE_P90_LIMIT);
  if (is->why & PR_PROFILE_UNSTABLE)
    APPEND("middle runs spread %.0f%% (tolerance %.0f%%)", 100 * is->spread, 100 * tol);
  if (is->why & PR_PROFILE_INVERTED)
    APPEND("slower than %d thread%s (%.3f ms) by %.0f%%", is->fewer_threads,
           is->fewer_threads == 1 ? "" : "s", is->fewer_ms,
           is->fewer_ms > 0 ? 100 * (is->median_ms / is->fewer_ms - 1) : 0);
  if (is->why & PR_PROFILE_NOT_REPRODUCED) APPEND("not reproduced on re-measure");
#undef APPEND
}

/* Logs how many points of p are suspicious, the first 3 with their reasons. */
static void log_issues(pr_log_level_t level, const pr_profile_t *p, double tol, const char *what) {
  pr_profile_issue_t is[3];
  int n = pr_profile_assess(p, tol, is, 3);
  char text[800] = "";
  size_t off = 0;
  for (int i = 0; i < n && i < 3 && off < sizeof text; i++) {
    char why[256];
    pr_profile_issue_text(&is[i], tol, why, sizeof why);
    off += (size_t)snprintf(text + off, sizeof text - off, "%sthreads %d batch %d: %s",
                            i ? "; " : "", is[i].threads, is[i].batch, why);
  }
  pr__log(level, "profile of %s: %d of %d points suspicious (%s%s), %s", p->model, n, p->n_points,
          text, n > 3 ? "; ..." : "", what);
}

/* The re-measure policy: measures the suspicious points of p (and the
 * fewer-thread point each inversion is measured against) again, keeps the new
 * values, and marks each suspicious point reproduced or not (profiler.h). */
static pr_status_t remeasure_suspicious(const profiler_t *pf, pr_profile_t *p, char *err,
                                        size_t err_len) {
  double tol = pf->tolerance;
  int n = pr_profile_assess(p, tol, NULL, 0);
  if (!n) return PR_OK;
  log_issues(PR_LOG_INFO, p, tol, "measuring them again");
  pr_profile_issue_t *issues = calloc((size_t)n, sizeof *issues);
  double *first = calloc((size_t)p->n_points, sizeof *first);
  bool *again = calloc((size_t)p->n_points, sizeof *again);
  pr_status_t st = PR_ERR_NOMEM;
  if (!issues || !first || !again) goto out;
  pr_profile_assess(p, tol, issues, n);
  for (int k = 0; k < n; k++) {
    again[point_index(p, issues[k].threads, issues[k].batch)] = true;
    if (issues[k].why & PR_PROFILE_INVERTED)
      again[point_index(p, issues[k].fewer_threads, issues[k].batch)] = true;
  }
  st = PR_OK;
  int n_again = 0, done = 0;
  for (int i = 0; i < p->n_points; i++) n_again += again[i];
  for (int i = 0; i < p->n_points && !st; i++) {
    first[i] = p->points[i].isolated_ms;
    if (!again[i]) continue;
    /* a point takes as long as its first measure: say which, so that a
     * long re-measure is not a silent one */
    pr__log(PR_LOG_INFO, "profile of %s: measuring again %d of %d: %d threads, batch %d (%.3g ms)",
            p->model, ++done, n_again, p->points[i].threads, p->points[i].batch, first[i]);
    st = measure_one(pf, p->points[i].threads, p->points[i].batch, 1, &p->points[i], err, err_len);
  }
  for (int k = 0; k < n && !st; k++) {
    int i = point_index(p, issues[k].threads, issues[k].batch);
    double m0 = first[i], m1 = p->points[i].isolated_ms;
    bool same = true;
    if (issues[k].why & (PR_PROFILE_NOISY | PR_PROFILE_UNSTABLE))
      same &= !beyond(fabs(m1 - m0), m0, tol); /* the median stands */
    if (issues[k].why & PR_PROFILE_INVERTED) {
      int f = point_index(p, issues[k].fewer_threads, issues[k].batch);
      double fewer = p->points[f].isolated_ms; /* more threads still not faster: */
      same &= !beyond(fewer - m1, fewer, tol);
    }
    p->points[i].remeasured = same ? 1 : -1;
  }
out:
  free(issues);
  free(first);
  free(again);
  return st;
}

/* The batch sizes to measure: opt's explicit list, else the grid; -1 with
 * a message when the list holds a batch < 1. */
static int batch_list(const pr_profile_options_t *o, int grid[64], char *err, size_t err_len) {
  if (o->n_batches <= 0)
    return pr_profile_grid(o->max_batch, o->extra_batches, o->n_extra, grid, 64);
  int n = 0;
  for (int i = 0; i < o->n_batches && i < 64; i++) {
    if (o->batches[i] < 1) {
      pr__errf(err, err_len, "profile batch sizes must be >= 1");
      return -1;
    }
    grid[n++] = o->batches[i];
  }
  return n;
}

pr_status_t pr_profile_measure(pr_model_t *model, const char *model_name,
                               const pr_session_options_t *base, const pr_profile_options_t *o,
                               pr_profile_t *out, char *err, size_t err_len) {
  memset(out, 0, sizeof *out);
  if (o->max_threads < 1 || o->max_threads > o->n_cpus || o->max_batch < 1 ||
      (!model && !o->measure_run)) {
    pr__errf(err, err_len, "profile needs a model, 1 <= threads <= %d CPUs and a batch >= 1",
             o->n_cpus);
    return PR_ERR_INVALID;
  }
  int grid[64], n_grid = batch_list(o, grid, err, err_len);
  if (n_grid < 0) return PR_ERR_INVALID;
  int total = n_grid * o->max_threads;
  out->points = calloc((size_t)total, sizeof *out->points);
  if (!out->points) return PR_ERR_NOMEM;
  snprintf(out->model, sizeof out->model, "%s", model_name ? model_name : "");
  snprintf(out->model_sha256, sizeof out->model_sha256, "%s",
           model ? pr_engine_model_sha256(model) : "");
  snprintf(out->cpu, sizeof out->cpu, "%s", pr__topology_cpu_name());
  snprintf(out->isa, sizeof out->isa, "%s", pr_engine_isa());
  out->cores = o->max_threads;
  pr_session_options_t b = base ? *base : pr_session_options_default();
  const char *prec = pr_precision_name(b.precision);
  snprintf(out->precision, sizeof out->precision, "%s", prec ? prec : "fp32");
  b.input_shapes = NULL;
  profiler_t pf = {.model = model,
                   .base = &b,
                   .opt = o,
                   .tolerance = o->tolerance > 0 ? o->tolerance : PR_PROFILE_TOLERANCE};
  out->tolerance = pf.tolerance;
  pr_status_t st = PR_OK;
  for (int t = 1; t <= o->max_threads && !st; t++)
    for (int g = 0; g < n_grid && !st; g++) {
      pr_profile_point_t *p = &out->points[out->n_points];
      if ((st = measure_one(&pf, t, grid[g], 0, p, err, err_len))) break;
      out->n_points++;
      if (o->progress) o->progress(o->ctx, out->n_points, total, p);
    }
  if (!st) st = remeasure_suspicious(&pf, out, err, err_len);
  if (st) {
    pr_profile_free(out);
    return st;
  }
  if ((out->n_suspicious = pr_profile_assess(out, pf.tolerance, NULL, 0)))
    log_issues(PR_LOG_WARN, out, pf.tolerance,
               "not confirmed by measuring them again (was the machine busy?): "
               "using it, not caching it");
  if (o->no_corun || o->measure_run) return PR_OK;
  /* slowdown with neighbours busy, measured at a mid-grid batch */
  int b_ref = grid[n_grid - 1] < 4 ? grid[n_grid - 1] : 4;
  if (o->max_threads >= 2)
    pr__log(PR_LOG_INFO, "profile of %s: measuring the slowdown of co-running instances",
            out->model);
  double factor = 1.0;
  for (int t = 1; t <= o->max_threads / 2 && t <= 64; t++) {
    int k = o->max_threads / t;
    double iso = pr_profile_latency(out, t, b_ref);
    double co = corun_latency(model, &b, o->cpus, t, b_ref, k, err, err_len);
    if (co < 0 || iso <= 0) {
      pr_profile_free(out);
      return PR_ERR_INTERNAL;
    }
    factor = co / iso > 1.0 ? co / iso : 1.0;
    pr__log(PR_LOG_DEBUG, "profile: %d instances of %d threads co-running: %.1f%% slower", k, t,
            100 * (factor - 1));
    for (int i = 0; i < out->n_points; i++)
      if (out->points[i].threads == t) {
        out->points[i].latency_ms = out->points[i].isolated_ms * factor;
        out->points[i].p90_ms *= factor;
      }
  }
  for (int i = 0; i < out->n_points; i++) {
    int t = out->points[i].threads;
    if (t > o->max_threads / 2 && t < o->max_threads) {
      out->points[i].latency_ms = out->points[i].isolated_ms * factor;
      out->points[i].p90_ms *= factor;
    }
  }
  return PR_OK;
}
