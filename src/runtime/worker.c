/* The pinned worker (worker.h): its thread, its OpenMP team, its sessions. */
#define _GNU_SOURCE
#include "runtime/worker.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/omp_team.h"
#include "base/topology.h"
#include "base/util.h"

size_t pr__worker_row_bytes(const pr_tensor_t *t) {
  size_t n = pr_dtype_size(t->dtype);
  for (int k = 1; k < t->rank; k++) n *= (size_t)t->dims[k];
  return n;
}

pr_status_t pr__worker_init(pr_worker_t *w, int index, pr_model_t *model, const int *cpus,
                            int threads, const pr_session_options_t *base, char *err,
                            size_t err_len) {
  memset(w, 0, sizeof *w);
  int n_in = pr_engine_model_num_inputs(model);
  if (threads < 1 || threads > PR_WORKER_MAX_THREADS || n_in > PR_WORKER_MAX_IO) {
    pr__errf(err, err_len, "an instance has %d threads (1..%d) and %d inputs (at most %d)", threads,
             PR_WORKER_MAX_THREADS, n_in, PR_WORKER_MAX_IO);
    return PR_ERR_INVALID;
  }
  w->index = index;
  w->threads = threads;
  memcpy(w->cpus, cpus, sizeof(int) * (size_t)threads);
  w->model = model;
  w->base = base ? *base : pr_session_options_default();
  w->n_in = n_in;
  return PR_OK;
}

/* Pins w's thread to w's cores and starts its team there: pinned before
 * the team's threads exist, so they inherit the mask, then each thread of
 * the team to one core of its own, this one (the team's thread 0) to the
 * first (one thread: pinned there at once): the server's HTTP thread that
 * hands it a request moves there (pr__sched_home_cpu), so that the hand-off
 * and the answer wake a thread on the waker's own core. */
static void bind_team(pr_worker_t *w) {
  if (pr__topology_pin(w->cpus, w->threads) < 0)
    pr__log(PR_LOG_WARN, "instance %d: could not pin to its cores", w->index);
#ifndef PR_SERIAL_OMP
  if (w->threads > 1) {
#pragma omp parallel num_threads(w->threads)
    pr__topology_pin(&w->cpus[omp_get_thread_num()], 1);
  }
#endif
}

static void *worker_thread(void *arg) {
  pr_worker_t *w = arg;
  pr__omp_team(w->threads);
  bind_team(w);
  w->main(w, w->ctx);
  return NULL;
}

void pr__worker_park(pr_worker_t *w) {
  if (w->parked) return;
  if (w->threads > 1) pr__omp_release();
  w->parked = true;
}

void pr__worker_unpark(pr_worker_t *w) {
  if (!w->parked) return;
  if (w->threads > 1) bind_team(w); /* (one thread: still pinned to its core) */
  w->parked = false;
}

pr_status_t pr__worker_start(pr_worker_t *w, void (*main)(pr_worker_t *w, void *ctx), void *ctx) {
  assert(!w->running && w->threads >= 1);
  w->main = main;
  w->ctx = ctx;
  if (pthread_create(&w->thread, NULL, worker_thread, w)) return PR_ERR_INTERNAL;
  w->running = true;
  return PR_OK;
}

static void free_session(pr_worker_t *w, pr_worker_session_t *z) {
  pr_engine_session_destroy(z->session);
  if (z->in)
    for (int i = 0; i < w->n_in; i++) pr__free(z->in[i].data);
  free(z->in);
  memset(z, 0, sizeof *z);
}

void pr__worker_join(pr_worker_t *w) {
  if (w->running) pthread_join(w->thread, NULL);
  w->running = false;
  for (int i = 0; i < w->n_sizes; i++) free_session(w, &w->sizes[i]);
  w->n_sizes = 0;
}

pr_worker_session_t *pr__worker_session(pr_worker_t *w, int rows) {
  for (int i = 0; i < w->n_sizes; i++)
    if (w->sizes[i].rows >= rows) return &w->sizes[i];
  return NULL;
}

pr_worker_session_t *pr__worker_largest(pr_worker_t *w) {
  return w->n_sizes ? &w->sizes[w->n_sizes - 1] : NULL;
}

/* Input buffers of z->rows rows in the session's input shapes. */
static pr_status_t alloc_inputs(pr_worker_t *w, pr_worker_session_t *z) {
  if (!(z->in = calloc((size_t)(w->n_in ? w->n_in : 1), sizeof *z->in))) return PR_ERR_NOMEM;
  for (int i = 0; i < w->n_in; i++) {
    pr_tensor_info_t info;
    pr_engine_session_input(z->session, i, &info);
    pr_tensor_t *t = &z->in[i];
    t->dtype = info.dtype;
    t->rank = info.rank;
    memcpy(t->dims, info.dims, sizeof t->dims);
    size_t len;
    if (pr__mul_size((size_t)pr_tensor_numel(t), pr_dtype_size(t->dtype), &len) ||
        !(t->data = pr__aligned_calloc(len)))
      return PR_ERR_NOMEM;
  }
  return PR_OK;
}

pr_status_t pr__worker_compile(pr_worker_t *w, const pr_tensor_info_t *shapes, int rows,
                               bool buffers, pr_worker_session_t *out) {
  memset(out, 0, sizeof *out);
  pr_session_options_t opt = w->base;
  pr_tensor_info_t at_rows[PR_WORKER_MAX_IO];
  if (!shapes) shapes = w->base.input_shapes;
  if (shapes) {
    for (int i = 0; i < w->n_in; i++) {
      at_rows[i] = shapes[i];
      if (at_rows[i].rank > 0) at_rows[i].dims[0] = rows;
    }
    opt.input_shapes = at_rows;
  }
  opt.threads = w->threads;
  opt.batch = rows;
  pr_worker_session_t z = {.rows = rows};
  pr_status_t st = pr_engine_session_create(w->model, &opt, &z.session, w->err, sizeof w->err);
  if (!st && buffers) st = alloc_inputs(w, &z);
  if (st) {
    if (st == PR_ERR_NOMEM) pr__errf(w->err, sizeof w->err, "out of memory");
    free_session(w, &z);
    return st;
  }
  *out = z;
  return PR_OK;
}

void pr__worker_session_free(pr_worker_t *w, pr_worker_session_t *z) {
  free_session(w, z);
}

pr_status_t pr__worker_prepare(pr_worker_t *w, int rows, bool buffers) {
  pr_worker_session_t *have = pr__worker_session(w, rows);
  if (have && have->rows == rows) return PR_OK;
  if (w->n_sizes == PR_WORKER_MAX_SIZES) {
    pr__errf(w->err, sizeof w->err, "instance %d holds %d batch sizes, the most it may", w->index,
             PR_WORKER_MAX_SIZES);
    return PR_ERR_BUSY;
  }
  pr_worker_session_t z;
  pr_status_t st = pr__worker_compile(w, NULL, rows, buffers, &z);
  if (st) return st;
  /* keep sizes ascending */
  int at = w->n_sizes++;
  for (; at > 0 && w->sizes[at - 1].rows > rows; at--) w->sizes[at] = w->sizes[at - 1];
  w->sizes[at] = z;
  return PR_OK;
}

pr_status_t pr__worker_prepare_up_to(pr_worker_t *w, int batch, bool buffers) {
  pr_status_t st = PR_OK;
  for (int b = 1; !st && b < batch; b *= 2) st = pr__worker_prepare(w, b, buffers);
  return st ? st : pr__worker_prepare(w, batch, buffers);
}

void pr__worker_fill_inputs(pr_worker_t *w, pr_worker_session_t *z) {
  for (int i = 0; z->in && i < w->n_in; i++) {
    pr_tensor_t *t = &z->in[i];
    if (t->dtype != PR_DTYPE_FLOAT) continue;
    int64_t numel = pr_tensor_numel(t);
    for (int64_t e = 0; e < numel; e++) ((float *)t->data)[e] = (float)(e % 17) * 0.01f - 0.08f;
  }
}
