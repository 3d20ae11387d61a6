/* Instance threads for a plan: create, split/gather runs, destroy.
 *
 * Ownership and locking: the executor owns its instance threads, sessions and
 * output buffers. `lock` guards every instance's `job` and `done` fields and
 * the `ready` count; instance threads touch their session only while they
 * hold a job, the caller only between jobs. */
#define _GNU_SOURCE
#include "server/instances.h"

#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/omp_team.h"
#include "base/topology.h"
#include "base/util.h"

#define MAX_IO 64

typedef struct {
  struct pr_instances *x;
  int index, threads, batch, row_start;
  int cpus[1024];
  pthread_t thread;
  pr_session_t *session;
  pr_status_t status; /* of create, then of the last job */
  char err[512];
  bool job, quit;
} instance_t;

struct pr_instances {
  pr_model_t *model;
  int n, batch, n_in, n_out;
  instance_t *inst;
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  int pending, started;
  pr_session_options_t base;
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
  pr_tensor_t sub[MAX_IO], outs[MAX_IO];
  for (int i = 0; i < x->n_in; i++) {
    sub[i] = x->inputs[i];
    sub[i].dims[0] = in->batch;
    sub[i].data = (char *)x->inputs[i].data + row_bytes(&x->in_info[i]) * (size_t)in->row_start;
  }
  in->status =
      pr_engine_session_run(in->session, sub, x->n_in, outs, x->n_out, in->err, sizeof in->err);
  if (in->status) return;
  for (int o = 0; o < x->n_out; o++) {
    size_t rb = row_bytes(&x->out_info[o]);
    memcpy((char *)x->out_buf[o] + rb * (size_t)in->row_start, outs[o].data,
           rb * (size_t)in->batch);
  }
}

static void *instance_main(void *arg) {
  instance_t *in = arg;
  struct pr_instances *x = in->x;
  /* pinned before any OpenMP region, so this thread's team inherits the mask */
  if (pr_topology_pin(in->cpus, in->threads) < 0)
    pr_log(PR_LOG_WARN, "instance %d: could not pin to its cores", in->index);
  pr_omp_team(in->threads);
  pr_session_options_t opt = x->base;
  pr_tensor_info_t shapes[MAX_IO];
  if (x->base.input_shapes) {
    for (int i = 0; i < x->n_in; i++) {
      shapes[i] = x->base.input_shapes[i];
      if (shapes[i].rank > 0) shapes[i].dims[0] = in->batch;
    }
    opt.input_shapes = shapes;
  }
  opt.threads = in->threads;
  opt.batch = in->batch;
  in->status = pr_engine_session_create(x->model, &opt, &in->session, in->err, sizeof in->err);
  pthread_mutex_lock(&x->lock);
  x->started++;
  pthread_cond_broadcast(&x->done);
  while (!in->status) {
    while (!in->job && !in->quit) pthread_cond_wait(&x->wake, &x->lock);
    if (in->quit) break;
    pthread_mutex_unlock(&x->lock);
    run_job(in);
    pthread_mutex_lock(&x->lock);
    in->job = false;
    if (--x->pending == 0) pthread_cond_broadcast(&x->done);
  }
  pthread_mutex_unlock(&x->lock);
  return NULL;
}

pr_status_t pr_instances_create(pr_model_t *model, const pr_plan_t *plan, const int *cpus,
                                int n_cpus, const pr_session_options_t *base, pr_instances_t **out,
                                char *err, size_t err_len) {
  *out = NULL;
  int n_in = pr_engine_model_num_inputs(model), n_out = pr_engine_model_num_outputs(model);
  if (n_in > MAX_IO || n_out > MAX_IO || plan->n_instances < 1) {
    pr_errf(err, err_len, "plan or model not supported (%d inputs, %d instances)", n_in,
            plan->n_instances);
    return PR_ERR_INVALID;
  }
  int need = 0;
  for (int k = 0; k < plan->n_instances; k++) {
    const pr_plan_instance_t *pi = &plan->instances[k];
    if (pi->threads < 1 || pi->threads > 1024 || pi->batch < 1 || pi->first_core < 0) {
      pr_errf(err, err_len, "instance %d: bad threads or batch", k);
      return PR_ERR_INVALID;
    }
    if (pi->first_core + pi->threads > need) need = pi->first_core + pi->threads;
  }
  if (need > n_cpus) {
    pr_errf(err, err_len, "plan needs %d cores, %d available", need, n_cpus);
    return PR_ERR_INVALID;
  }
  pr_instances_t *x = calloc(1, sizeof *x);
  if (!x) return PR_ERR_NOMEM;
  x->model = model;
  x->n = plan->n_instances;
  x->n_in = n_in;
  x->n_out = n_out;
  x->base = base ? *base : pr_session_options_default();
  pthread_mutex_init(&x->lock, NULL);
  pthread_cond_init(&x->wake, NULL);
  pthread_cond_init(&x->done, NULL);
  pr_status_t st = PR_OK;
  x->batch = plan->batch;
  x->inst = calloc((size_t)x->n, sizeof *x->inst);
  if (!x->inst) {
    st = PR_ERR_NOMEM;
    goto fail;
  }
  int row = 0;
  for (int k = 0; k < x->n; k++) {
    instance_t *in = &x->inst[k];
    const pr_plan_instance_t *pi = &plan->instances[k];
    in->x = x;
    in->index = k;
    in->threads = pi->threads;
    in->batch = pi->batch;
    in->row_start = row;
    row += pi->batch;
    memcpy(in->cpus, cpus + pi->first_core, sizeof(int) * (size_t)pi->threads);
    if (pthread_create(&in->thread, NULL, instance_main, in) != 0) {
      pr_errf(err, err_len, "cannot start instance thread");
      st = PR_ERR_INTERNAL;
      x->n = k;
      goto fail;
    }
  }
  if (row != plan->batch) {
    pr_errf(err, err_len, "plan batches add up to %d, not %d", row, plan->batch);
    st = PR_ERR_INVALID;
  }
  pthread_mutex_lock(&x->lock);
  while (x->started < x->n) pthread_cond_wait(&x->done, &x->lock);
  pthread_mutex_unlock(&x->lock);
  for (int k = 0; k < x->n && !st; k++)
    if (x->inst[k].status) {
      pr_errf(err, err_len, "instance %d: %s", k, x->inst[k].err);
      st = x->inst[k].status;
    }
  if (st) goto fail;
  /* the whole batch's shapes: instance 0's, with axis 0 the sum of the
   * sub-batches; every instance must agree off axis 0 */
  for (int k = 0; k < x->n && !st; k++) {
    instance_t *in = &x->inst[k];
    for (int i = 0; i < n_in + n_out && !st; i++) {
      pr_tensor_info_t info;
      if (i < n_in)
        pr_engine_session_input(in->session, i, &info);
      else
        pr_engine_session_output(in->session, i - n_in, &info);
      pr_tensor_info_t *whole = i < n_in ? &x->in_info[i] : &x->out_info[i - n_in];
      if (info.rank < 1 || info.dims[0] != in->batch) {
        pr_errf(err, err_len, "%s '%s' has no batch axis to split", i < n_in ? "input" : "output",
                info.name);
        st = PR_ERR_UNSUPPORTED;
        break;
      }
      info.dims[0] = plan->batch;
      if (k == 0) {
        *whole = info;
      } else {
        bool same = info.rank == whole->rank && info.dtype == whole->dtype;
        for (int d = 1; same && d < info.rank; d++) same = info.dims[d] == whole->dims[d];
        if (!same) {
          pr_errf(err, err_len, "instances disagree on the shape of '%s'", info.name);
          st = PR_ERR_UNSUPPORTED;
        }
      }
    }
  }
  for (int o = 0; o < n_out && !st; o++)
    if (!(x->out_buf[o] = pr_aligned_alloc(row_bytes(&x->out_info[o]) * (size_t)plan->batch)))
      st = PR_ERR_NOMEM;
  if (st) goto fail;
  *out = x;
  return PR_OK;
fail:
  pr_instances_destroy(x);
  return st;
}

pr_status_t pr_instances_input(const pr_instances_t *x, int i, pr_tensor_info_t *info) {
  if (!x || i < 0 || i >= x->n_in) return PR_ERR_INVALID;
  *info = x->in_info[i];
  return PR_OK;
}

pr_status_t pr_instances_run(pr_instances_t *x, const pr_tensor_t *inputs, int n_inputs,
                             pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len) {
  if (n_inputs != x->n_in || (n_outputs && n_outputs != x->n_out)) {
    pr_errf(err, err_len, "expected %d inputs and %d outputs", x->n_in, x->n_out);
    return PR_ERR_INVALID;
  }
  for (int i = 0; i < n_inputs; i++)
    if (inputs[i].rank < 1 || inputs[i].dims[0] != x->batch) {
      pr_errf(err, err_len, "input %d: batch must be %d", i, x->batch);
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
    if (x->inst[k].status) {
      pr_errf(err, err_len, "instance %d: %s", k, x->inst[k].err);
      return x->inst[k].status;
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

void pr_instances_destroy(pr_instances_t *x) {
  if (!x) return;
  if (x->inst) {
    pthread_mutex_lock(&x->lock);
    for (int k = 0; k < x->n; k++) x->inst[k].quit = true;
    pthread_cond_broadcast(&x->wake);
    pthread_mutex_unlock(&x->lock);
    for (int k = 0; k < x->n; k++) {
      pthread_join(x->inst[k].thread, NULL);
      pr_engine_session_destroy(x->inst[k].session);
    }
  }
  for (int o = 0; o < MAX_IO; o++) pr_free(x->out_buf[o]);
  free(x->inst);
  pthread_mutex_destroy(&x->lock);
  pthread_cond_destroy(&x->wake);
  pthread_cond_destroy(&x->done);
  free(x);
}
