/* The profiler: latency[t][b] through the engine API.
 *
 * Each point runs in a fresh thread pinned to the first t CPUs of the
 * topology order (a new OpenMP master, so its team is pinned too), compiles a
 * session for (t, b), warms up once, then repeats until the median settles
 * (3 runs at least, then until it moves by less than 1% or the time budget
 * of the point is spent, 25 runs at most).
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
#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"

#define MAX_IO 64
#define MAX_RUNS 25

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

typedef struct {
  pr_model_t *model;
  const pr_session_options_t *base;
  const int *cpus;
  int threads, batch;
  double max_s;
  double median, p90;
  pr_status_t status;
  char err[512];
} point_job_t;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median_of(const double *t, int n) {
  double s[MAX_RUNS];
  memcpy(s, t, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* On the calling thread, pinned to its CPUs: a session for (threads, batch)
 * and inputs for it (small values: valid float data, and zeros are valid
 * indices). Frees nothing on failure: the caller's cleanup does. */
static pr_status_t pinned_session(pr_model_t *model, const pr_session_options_t *base,
                                  const int *cpus, int threads, int batch, pr_session_t **s,
                                  pr_tensor_t *in, int *n_in, char *err, size_t err_len) {
  pr_topology_pin(cpus, threads);
  omp_set_num_threads(threads);
  pr_session_options_t opt = *base;
  opt.threads = threads;
  opt.batch = batch;
  opt.input_shapes = NULL;
  *n_in = pr_engine_model_num_inputs(model);
  if (*n_in > MAX_IO) *n_in = MAX_IO;
  pr_status_t st = pr_engine_session_create(model, &opt, s, err, err_len);
  for (int i = 0; !st && i < *n_in; i++) {
    pr_tensor_info_t info;
    pr_engine_session_input(*s, i, &info);
    in[i].dtype = info.dtype;
    in[i].rank = info.rank;
    memcpy(in[i].dims, info.dims, sizeof info.dims);
    int64_t numel = pr_tensor_numel(&in[i]);
    if (!(in[i].data = pr_aligned_calloc((size_t)numel * pr_dtype_size(info.dtype))))
      st = PR_ERR_NOMEM;
    else if (info.dtype == PR_DTYPE_FLOAT)
      for (int64_t e = 0; e < numel; e++)
        ((float *)in[i].data)[e] = (float)(e % 17) * 0.01f - 0.08f;
  }
  return st;
}

static void *measure_point(void *arg) {
  point_job_t *j = arg;
  pr_session_t *s = NULL;
  pr_tensor_t in[MAX_IO] = {0};
  int n_in = 0;
  if ((j->status = pinned_session(j->model, j->base, j->cpus, j->threads, j->batch, &s, in, &n_in,
                                  j->err, sizeof j->err)))
    goto out;
  double times[MAX_RUNS];
  int n = 0;
  if ((j->status = pr_engine_session_run(s, in, n_in, NULL, 0, j->err, sizeof j->err))) goto out;
  double start = pr_now(), prev = 0;
  while (n < MAX_RUNS) {
    double t0 = pr_now();
    if ((j->status = pr_engine_session_run(s, in, n_in, NULL, 0, j->err, sizeof j->err))) goto out;
    times[n++] = (pr_now() - t0) * 1e3;
    if (n < 3) continue;
    double med = median_of(times, n);
    if (n >= 5 && fabs(med - prev) < 0.01 * med) break;
    if (pr_now() - start > j->max_s) break;
    prev = med;
  }
  j->median = median_of(times, n);
  qsort(times, (size_t)n, sizeof *times, cmp_double);
  j->p90 = times[(int)ceil(0.9 * n) - 1];
out:
  for (int i = 0; i < MAX_IO; i++) pr_free(in[i].data);
  pr_engine_session_destroy(s);
  return NULL;
}

/* ---- co-running instances ---- */

#define CORUN_RUNS 5

typedef struct {
  pr_model_t *model;
  const pr_session_options_t *base;
  const int *cpus;
  int threads, batch;
  pthread_barrier_t *barrier;
  pthread_mutex_t *go_lock;
  pthread_cond_t *go_cond;
  int *go; /* 0 wait, 1 run, -1 quit (not every instance thread started) */
  double times[CORUN_RUNS + 1];
  pr_status_t status;
  char err[512];
} corun_job_t;

static void *corun_main(void *arg) {
  corun_job_t *j = arg;
  pthread_mutex_lock(j->go_lock);
  while (*j->go == 0) pthread_cond_wait(j->go_cond, j->go_lock);
  int go = *j->go;
  pthread_mutex_unlock(j->go_lock);
  if (go < 0) return NULL;
  pr_session_t *s = NULL;
  pr_tensor_t in[MAX_IO] = {0};
  int n_in = 0;
  j->status = pinned_session(j->model, j->base, j->cpus, j->threads, j->batch, &s, in, &n_in,
                             j->err, sizeof j->err);
  /* every thread takes part in every barrier, even after a failure */
  for (int r = 0; r <= CORUN_RUNS; r++) {
    pthread_barrier_wait(j->barrier);
    double t0 = pr_now();
    if (!j->status) j->status = pr_engine_session_run(s, in, n_in, NULL, 0, j->err, sizeof j->err);
    j->times[r] = (pr_now() - t0) * 1e3;
  }
  for (int i = 0; i < MAX_IO; i++) pr_free(in[i].data);
  pr_engine_session_destroy(s);
  return NULL;
}

/* Median latency of k lock-step instances of (t, b); < 0 on failure. */
static double corun_latency(pr_model_t *model, const pr_session_options_t *base, const int *cpus,
                            int t, int b, int k, char *err, size_t err_len) {
  corun_job_t *jobs = calloc((size_t)k, sizeof *jobs);
  pthread_t *th = calloc((size_t)k, sizeof *th);
  pthread_barrier_t barrier;
  pthread_mutex_t go_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t go_cond = PTHREAD_COND_INITIALIZER;
  int go = 0;
  double result = -1;
  if (!jobs || !th) goto out;
  pthread_barrier_init(&barrier, NULL, (unsigned)k);
  int started = 0;
  for (int i = 0; i < k; i++) {
    jobs[i] = (corun_job_t){.model = model,
                            .base = base,
                            .cpus = cpus + i * t,
                            .threads = t,
                            .batch = b,
                            .barrier = &barrier,
                            .go_lock = &go_lock,
                            .go_cond = &go_cond,
                            .go = &go};
    if (pthread_create(&th[i], NULL, corun_main, &jobs[i])) break;
    started++;
  }
  pthread_mutex_lock(&go_lock);
  go = started == k ? 1 : -1; /* the barrier needs all k, or none may start */
  pthread_cond_broadcast(&go_cond);
  pthread_mutex_unlock(&go_lock);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&barrier);
  if (started < k) {
    pr_errf(err, err_len, "cannot start co-running instances");
    goto out;
  }
  double all[64 * CORUN_RUNS];
  int n = 0;
  for (int i = 0; i < k; i++) {
    if (jobs[i].status) {
      pr_errf(err, err_len, "%s", jobs[i].err);
      goto out;
    }
    for (int r = 1; r <= CORUN_RUNS && n < 64 * CORUN_RUNS; r++) all[n++] = jobs[i].times[r];
  }
  qsort(all, (size_t)n, sizeof *all, cmp_double);
  result = n % 2 ? all[n / 2] : 0.5 * (all[n / 2 - 1] + all[n / 2]);
out:
  free(jobs);
  free(th);
  return result;
}

pr_status_t pr_profile_measure(pr_model_t *model, const char *model_name,
                               const pr_session_options_t *base, const pr_profile_options_t *o,
                               pr_profile_t *out, char *err, size_t err_len) {
  memset(out, 0, sizeof *out);
  if (o->max_threads < 1 || o->max_threads > o->n_cpus || o->max_batch < 1) {
    pr_errf(err, err_len, "profile needs 1 <= threads <= %d CPUs and a batch >= 1", o->n_cpus);
    return PR_ERR_INVALID;
  }
  int grid[64];
  int n_grid = pr_profile_grid(o->max_batch, o->extra_batches, o->n_extra, grid, 64);
  int total = n_grid * o->max_threads;
  out->points = calloc((size_t)total, sizeof *out->points);
  if (!out->points) return PR_ERR_NOMEM;
  snprintf(out->model, sizeof out->model, "%s", model_name ? model_name : "");
  snprintf(out->model_sha256, sizeof out->model_sha256, "%s", pr_engine_model_sha256(model));
  snprintf(out->cpu, sizeof out->cpu, "%s", pr_topology_cpu_name());
  out->cores = o->max_threads;
  pr_session_options_t b = base ? *base : pr_session_options_default();
  for (int t = 1; t <= o->max_threads; t++)
    for (int g = 0; g < n_grid; g++) {
      point_job_t job = {.model = model,
                         .base = &b,
                         .cpus = o->cpus,
                         .threads = t,
                         .batch = grid[g],
                         .max_s = o->max_point_s > 0 ? o->max_point_s : 3.0};
      pthread_t th;
      if (pthread_create(&th, NULL, measure_point, &job) != 0) {
        pr_errf(err, err_len, "cannot start a profiling thread");
        pr_profile_free(out);
        return PR_ERR_INTERNAL;
      }
      pthread_join(th, NULL);
      if (job.status) {
        pr_errf(err, err_len, "threads %d batch %d: %s", t, grid[g], job.err);
        pr_profile_free(out);
        return job.status;
      }
      pr_profile_point_t *p = &out->points[out->n_points++];
      *p = (pr_profile_point_t){t, grid[g], job.median, job.p90, job.median};
      if (o->progress) o->progress(o->ctx, out->n_points, total, p);
    }
  if (o->no_corun) return PR_OK;
  /* slowdown with neighbours busy, measured at a mid-grid batch */
  int b_ref = grid[n_grid - 1] < 4 ? grid[n_grid - 1] : 4;
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
    pr_log(PR_LOG_DEBUG, "profile: %d instances of %d threads co-running: %.1f%% slower", k, t,
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
