/* Instances for one batch: create, split/gather runs, destroy.
 *
 * Ownership and locking: the executor owns its workers (threads, sessions)
 * and output buffers. `lock` guards every instance's `job` and `quit` flags
 * and the `pending` and `started` counts; instance threads touch their
 * session only while they hold a job, the caller only between jobs. */
#define _GNU_SOURCE
#include "runtime/instances.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "runtime/worker.h"

#define MAX_IO PR_WORKER_MAX_IO

typedef struct {
  struct pr_instances *x;
  pr_worker_t w;
  int batch, row_start;
  bool job, quit;
} instance_t;

struct pr_instances {
  int n, batch, n_in, n_out;
  instance_t *inst;
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  int pending, started;
  pr_tensor_info_t in_info[MAX_IO], out_info[MAX_IO];
  const pr_tensor_t *inputs; /* of the current run */
  void *out_buf[MAX_IO];
};

static size_t row_bytes(const pr_tensor_info_t *t) {
  size_t n = pr_dtype_size(t->dtype);
  for (int k = 1; k < t->rank; k++) n *= (size_t)t->dims[k];
  return n;
}

static void run_job(instance_t *in) {
  struct pr_instances *x = in->x;
  pr_session_t *session = in->w.sizes[0].session;
  pr_tensor_t sub[MAX_IO], outs[MAX_IO];
  for (int i = 0; i < x->n_in; i++) {
    sub[i] = x->inputs[i];
    sub[i].dims[0] = in->batch;
    sub[i].data = (char *)x->inputs[i].data + row_bytes(&x->in_info[i]) * (size_t)in->row_start;
  }
  in->w.status =
      pr_engine_session_run(session, sub, x->n_in, outs, x->n_out, in->w.err, sizeof in->w.err);
  if (in->w.status) return;
  for (int o = 0; o < x->n_out; o++) {
    size_t rb = row_bytes(&x->out_info[o]);
    memcpy((char *)x->out_buf[o] + rb * (size_t)in->row_start, outs[o].data,
           rb * (size_t)in->batch);
  }
}

static void instance_main(pr_worker_t *w, void *ctx) {
  instance_t *in = ctx;
  struct pr_instances *x = in->x;
  w->status = pr__worker_prepare(w, in->batch, false);
  pthread_mutex_lock(&x->lock);
  x->started++;
  pthread_cond_broadcast(&x->done);
  while (!w->status) {
    while (!in->job && !in->quit) pthread_cond_wait(&x->wake, &x->lock);
    if (in->quit) break;
    pthread_mutex_unlock(&x->lock);
    run_job(in);
    pthread_mutex_lock(&x->lock);
    in->job = false;
    assert(x->pending > 0);
    if (--x->pending == 0) pthread_cond_broadcast(&x->done);
  }
  pthread_mutex_unlock(&x->lock);
}

static pr_status_t check_specs(const pr_instance_spec_t *specs, int n, int n_cpus, char *err,
                               size_t err_len) {
  if (n < 1) {
    pr__errf(err, err_len, "no instances");
    return PR_ERR_INVALID;
  }
  int need = 0;
  for (int k = 0; k < n; k++) {
    const pr_instance_spec_t *pi = &specs[k];
    if (pi->threads < 1 || pi->threads > PR_WORKER_MAX_THREADS || pi->batch < 1 ||
        pi->first_core < 0) {
      pr__errf(err, err_len, "instance %d: bad threads or batch", k);
      return PR_ERR_INVALID;
    }
    if (pi->first_core + pi->threads > need) need = pi->first_core + pi->threads;
  }
  if (need > n_cpus) {
    pr__errf(err, err_len, "plan needs %d cores, %d available", need, n_cpus);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

/* Starts every instance's worker and waits until each compiled its session. */
static pr_status_t start_all(pr_instances_t *x, pr_model_t *model, const pr_instance_spec_t *specs,
                             const int *cpus, const pr_session_options_t *base, char *err,
                             size_t err_len) {
  pr_status_t st = PR_OK;
  int row = 0, n = x->n;
  x->n = 0; /* the instances started so far */
  for (int k = 0; k < n && !st; k++) {
    instance_t *in = &x->inst[k];
    in->x = x;
    in->batch = specs[k].batch;
    in->row_start = row;
    row += specs[k].batch;
    st = pr__worker_init(&in->w, k, model, cpus + specs[k].first_core, specs[k].threads, base, err,
                         err_len);
    if (!st && (st = pr__worker_start(&in->w, instance_main, in)))
      pr__errf(err, err_len, "cannot start instance thread");
    if (!st) x->n++;
  }
  x->batch = row;
  pthread_mutex_lock(&x->lock);
  while (x->started < x->n) pthread_cond_wait(&x->done, &x->lock);
  pthread_mutex_unlock(&x->lock);
  for (int k = 0; k < x->n && !st; k++)
    if (x->inst[k].w.status) {
      pr__errf(err, err_len, "instance %d: %s", k, x->inst[k].w.err);
      st = x->inst[k].w.status;
    }
  return st;
}

/* The whole batch's shapes: instance 0's, with axis 0 the sum of the
 * sub-batches; every instance must agree off axis 0. */
static pr_status_t whole_shapes(pr_instances_t *x, char *err, size_t err_len) {
  for (int k = 0; k < x->n; k++) {
    instance_t *in = &x->inst[k];
    for (int i = 0; i < x->n_in + x->n_out; i++) {
      pr_tensor_info_t info;
      pr_session_t *session = in->w.sizes[0].session;
      if (i < x->n_in)
        pr_engine_session_input(session, i, &info);
      else
        pr_engine_session_output(session, i - x->n_in, &info);
      pr_tensor_info_t *whole = i < x->n_in ? &x->in_info[i] : &x->out_info[i - x->n_in];
      if (info.rank < 1 || info.dims[0] != in->batch) {
        pr__errf(err, err_len, "%s '%s' has no batch axis to split",
                 i < x->n_in ? "input" : "output", info.name);
        return PR_ERR_UNSUPPORTED;
      }
      info.dims[0] = x->batch;
      if (k == 0) {
        *whole = info;
        continue;
      }
      bool same = info.rank == whole->rank && info.dtype == whole->dtype;
      for (int d = 1; same && d < info.rank; d++) same = info.dims[d] == whole->dims[d];
      if (!same) {
        pr__errf(err, err_len, "instances disagree on the shape of '%s'", info.name);
        return PR_ERR_UNSUPPORTED;
      }
    }
  }
  return PR_OK;
}

pr_status_t pr__instances_create(pr_model_t *model, const pr_instance_spec_t *specs, int n,
                                 const int *cpus, int n_cpus, const pr_session_options_t *base,
                                 pr_instances_t **out, char *err, size_t err_len) {
  *out = NULL;
  int n_in = pr_engine_model_num_inputs(model), n_out = pr_engine_model_num_outputs(model);
  if (n_in > MAX_IO || n_out > MAX_IO) {
    pr__errf(err, err_len, "model not supported (%d inputs, %d outputs)", n_in, n_out);
    return PR_ERR_INVALID;
  }
  pr_status_t st = check_specs(specs, n, n_cpus, err, err_len);
  if (st) return st;
  pr_instances_t *x = calloc(1, sizeof *x);
  if (!x) return PR_ERR_NOMEM;
  x->n = n;
  x->n_in = n_in;
  x->n_out = n_out;
  pthread_mutex_init(&x->lock, NULL);
  pthread_cond_init(&x->wake, NULL);
  pthread_cond_init(&x->done, NULL);
  if (!(x->inst = calloc((size_t)n, sizeof *x->inst))) {
    x->n = 0;
    st = PR_ERR_NOMEM;
  }
  if (!st) st = start_all(x, model, specs, cpus, base, err, err_len);
  if (!st) st = whole_shapes(x, err, err_len);
  for (int o = 0; o < n_out && !st; o++)
    if (!(x->out_buf[o] = pr__aligned_alloc(row_bytes(&x->out_info[o]) * (size_t)x->batch)))
      st = PR_ERR_NOMEM;
  if (st) {
    pr__instances_destroy(x);
    return st;
  }
  *out = x;
  return PR_OK;
}

pr_status_t pr__instances_input(const pr_instances_t *x, int i, pr_tensor_info_t *info) {
  if (!x || i < 0 || i >= x->n_in) return PR_ERR_INVALID;
  *info = x->in_info[i];
  return PR_OK;
}

pr_status_t pr__instances_run(pr_instances_t *x, const pr_tensor_t *inputs, int n_inputs,
                              pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len) {
  if (n_inputs != x->n_in || (n_outputs && n_outputs != x->n_out)) {
    pr__errf(err, err_len, "expected %d inputs and %d outputs", x->n_in, x->n_out);
    return PR_ERR_INVALID;
  }
  for (int i = 0; i < n_inputs; i++)
    if (inputs[i].rank < 1 || inputs[i].dims[0] != x->batch) {
      pr__errf(err, err_len, "input %d: batch must be %d", i, x->batch);
      return PR_ERR_INVALID;
    }
  pthread_mutex_lock(&x->lock);
  x->inputs = inputs;
  x->pending = x->n;
  for (int k = 0; k < x->n; k++) x->inst[k].job = true;
  pthread_cond_broadcast(&x->wake);
  while (x->pending > 0) pthread_cond_wait(&x->done, &x->lock);
  pthread_mutex_unlock(&x->lock);
  for (int k = 0; k < x->n; k++)
    if (x->inst[k].w.status) {
      pr__errf(err, err_len, "instance %d: %s", k, x->inst[k].w.err);
      return x->inst[k].w.status;
    }
  for (int o = 0; o < n_outputs; o++) {
    pr_tensor_t *t = &outputs[o];
    memset(t, 0, sizeof *t);
    t->dtype = x->out_info[o].dtype;
    t->rank = x->out_info[o].rank;
    memcpy(t->dims, x->out_info[o].dims, sizeof t->dims);
    t->data = x->out_buf[o];
  }
  return PR_OK;
}

void pr__instances_destroy(pr_instances_t *x) {
  if (!x) return;
  pthread_mutex_lock(&x->lock);
  for (int k = 0; k < x->n; k++) x->inst[k].quit = true;
  pthread_cond_broadcast(&x->wake);
  pthread_mutex_unlock(&x->lock);
  for (int k = 0; k < x->n; k++) pr__worker_join(&x->inst[k].w);
  for (int o = 0; o < MAX_IO; o++) pr__free(x->out_buf[o]);
  free(x->inst);
  pthread_mutex_destroy(&x->lock);
  pthread_cond_destroy(&x->wake);
  pthread_cond_destroy(&x->done);
  free(x);
}
