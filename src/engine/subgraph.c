/* Subgraphs run by their node (If, Loop, Scan; ops/control.c), and the
 * results of nodes that compute their whole output in infer.
 *
 * Notes on the design:
 * - A body runs as a session of its own model (onnx_load.c loads a GRAPH
 *   attribute as one) with every input fixed: its own inputs and the
 *   outer-scope values it reads, which the loader made implicit inputs of
 *   the node, so the parent's liveness and ordering see them.
 * - Fixed inputs make every node of the body fold at compile time, nested
 *   If/Loop/Scan included: a body never needs a run-time path of its own.
 *   It is the slow path by design (a compile per branch taken or per
 *   iteration); the parent only takes it when its node's inputs are known,
 *   which session.c's dynamic path guarantees.
 * - Outputs are copied out before the body's session is destroyed. */
#include <string.h>

#include "base/util.h"
#include "engine/subgraph.h"

pr_results_t *pr__results_new(int n) {
  pr_results_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->t = calloc((size_t)n + 1, sizeof *r->t);
  if (!r->t) {
    free(r);
    return NULL;
  }
  r->n = n;
  return r;
}

void pr__results_destroy(void *state) {
  pr_results_t *r = state;
  if (!r) return;
  for (int k = 0; k < r->n; k++) pr_engine_tensor_free(&r->t[k]);
  free(r->t);
  free(r);
}

void pr__results_shapes(pr_compile_t *c, pr_node_t *n, const pr_results_t *r) {
  for (int k = 0; k < n->n_out && k < r->n; k++) {
    pr_value_t *o = pr__out(c, n, k);
    if (o) pr__value_set_shape(o, r->t[k].dtype, r->t[k].rank, r->t[k].dims);
  }
}

void pr__results_run(pr_exec_t *x, pr_node_t *n) {
  const pr_results_t *r = n->state;
  for (int k = 0; k < n->n_out && k < r->n; k++) {
    if (n->out[k] < 0) continue;
    const pr_value_t *o = &x->v[n->out[k]];
    if (o->nbytes) memcpy(o->ptr, r->t[k].data, o->nbytes);
  }
}

pr_tensor_t pr__value_tensor(const pr_value_t *v) {
  pr_tensor_t t = {.dtype = v->dtype, .rank = v->rank, .data = v->data};
  for (int k = 0; k < v->rank; k++) t.dims[k] = v->dims[k];
  return t;
}

pr_status_t pr__tensor_copy(const pr_tensor_t *t, pr_tensor_t *out) {
  size_t bytes = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
  *out = *t;
  out->data = pr__aligned_alloc(bytes);
  if (!out->data) return PR_ERR_NOMEM;
  if (bytes) memcpy(out->data, t->data, bytes);
  return PR_OK;
}

void pr__subgraph_outer(pr_compile_t *c, const pr_node_t *n, const pr_model_t *body,
                        pr_tensor_t *in) {
  int base = n->m->n_in - n->m->n_implicit;
  for (int j = 0; j < body->n_inputs - body->n_formal; j++) {
    int slot = body->outer_slot[j];
    assert(slot >= 0 && slot < n->m->n_implicit);
    in[body->n_formal + j] = pr__value_tensor(pr__in(c, n, base + slot));
  }
}

/* The body's session for inputs in (all fixed). */
static pr_status_t body_session(pr_compile_t *c, pr_model_t *body, const pr_tensor_t *in,
                                pr_session_t **s) {
  static const char empty[PR_MAX_RANK]; /* the data of an empty input */
  int n = body->n_inputs;
  pr_tensor_info_t *info = calloc((size_t)n + 1, sizeof *info);
  const void **vals = calloc((size_t)n + 1, sizeof *vals);
  pr_status_t st = info && vals ? PR_OK : PR_ERR_NOMEM;
  for (int i = 0; !st && i < n; i++) {
    info[i].dtype = in[i].dtype;
    info[i].rank = in[i].rank;
    memcpy(info[i].dims, in[i].dims, sizeof info[i].dims);
    vals[i] = in[i].data ? in[i].data : empty;
  }
  pr_session_options_t opt = pr_session_options_default();
  opt.threads = c->threads;
  opt.max_bytes = c->max_bytes;
  opt.input_shapes = info;
  opt.input_values = vals;
  if (!st) st = pr_engine_session_create(body, &opt, s, c->err, c->err_len);
  free(info);
  free(vals);
  return st;
}

pr_status_t pr__subgraph_run(pr_compile_t *c, const pr_node_t *n, pr_model_t *body,
                             const pr_tensor_t *in, pr_tensor_t *out) {
  pr_session_t *s = NULL;
  pr_tensor_t *got = calloc((size_t)body->n_outputs + 1, sizeof *got);
  if (!got) return PR_ERR_NOMEM;
  pr_status_t st = body_session(c, body, in, &s);
  if (!st)
    st = pr_engine_session_run(s, in, body->n_inputs, got, body->n_outputs, c->err, c->err_len);
  for (int k = 0; k < body->n_outputs; k++) memset(&out[k], 0, sizeof out[k]);
  for (int k = 0; !st && k < body->n_outputs; k++) st = pr__tensor_copy(&got[k], &out[k]);
  if (st) {
    for (int k = 0; k < body->n_outputs; k++) pr_engine_tensor_free(&out[k]);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", c->err ? c->err : "");
    st = pr__fail(c, n, st, "subgraph: %s", msg);
  }
  pr_engine_session_destroy(s);
  free(got);
  return st;
}
