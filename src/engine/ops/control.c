/* Control flow: If, Loop and Scan. Their bodies are subgraphs (loaded as
 * models of their own, run by subgraph.c); the node runs its body when its
 * inputs are known, in infer, and keeps the whole result as its state
 * (pr_results_t), which sets the output shapes: branches of different
 * shapes, scan outputs as long as the loop ran.
 *
 * Notes on the design:
 * - A node whose inputs (the values its bodies read from outer scopes
 *   included: its implicit inputs) are not all constant asks for the
 *   session's dynamic path (pr__need_values), where every value is known and
 *   the node folds like any other: control flow never runs on the static
 *   path, so fusion and memory planning never see into a body, and a value
 *   a body reads is an input of the node (it stays alive and unfused past
 *   the node's position).
 * - Everything the file gives is checked at load (check_*): body input and
 *   output counts against the node's. A Loop runs at most LOOP_MAX_ITERS
 *   iterations, and the scan outputs it accumulates are bounded by the
 *   session's max_bytes.
 * - Scan-8 (a batch axis first, optional sequence_lens) runs as Scan-9 per
 *   batch row, its outputs stacked; sequence_lens shorter than the
 *   sequence are not supported. */
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "engine/ops/ops.h"
#include "engine/subgraph.h"

#define LOOP_MAX_ITERS (1 << 20)

static pr_model_t *graph_attr(const pr_mnode_t *m, const char *name) {
  const pr_attr_t *a = pr__attr_find(m, name);
  return a && a->type == PR_ATTR_GRAPH ? a->g : NULL;
}

/* The node's own inputs, before the implicit (outer-scope) ones. */
static int formal_inputs(const pr_mnode_t *m) {
  return m->n_in - m->n_implicit;
}

static pr_status_t need_all_const(pr_compile_t *c, pr_node_t *n) {
  for (int k = 0; k < n->n_in; k++) {
    pr_value_t *v = pr__in(c, n, k);
    if (v && !v->is_const)
      return pr__need_values(c, n, "input %d is known only at run time, so is what the body gives",
                             k);
  }
  return PR_OK;
}

static pr_status_t bad(char *err, size_t len, const pr_mnode_t *m, const char *what) {
  pr__errf(err, len, "node '%s' (%s): %s", pr__mnode_name(m), m->op_type, what);
  return PR_ERR_INVALID;
}

/* Scalar truth of a one-element tensor (bool or number). */
static bool truth(const pr_tensor_t *t) {
  if (t->dtype == PR_DTYPE_BOOL) return *(const uint8_t *)t->data != 0;
  return pr__load_double(t->data, t->dtype, 0) != 0;
}

/* ---- If ---- */

static pr_status_t check_if(const pr_mnode_t *m, int opset, char *err, size_t len) {
  (void)opset;
  const pr_model_t *t = graph_attr(m, "then_branch"), *e = graph_attr(m, "else_branch");
  if (!t || !e) return bad(err, len, m, "needs then_branch and else_branch graphs");
  if (t->n_formal || e->n_formal) return bad(err, len, m, "a branch takes no inputs");
  if (t->n_outputs != m->n_out || e->n_outputs != m->n_out)
    return bad(err, len, m, "each branch gives one value per output");
  if (formal_inputs(m) != 1) return bad(err, len, m, "needs one condition input");
  return PR_OK;
}

static pr_status_t infer_if(pr_compile_t *c, pr_node_t *n) {
  pr_status_t st = need_all_const(c, n);
  if (st) return st;
  pr_value_t *cv = pr__in(c, n, 0);
  if (pr__value_numel(cv) != 1 || !pr_dtype_size(cv->dtype))
    return pr__fail(c, n, PR_ERR_INVALID, "the condition must have one element");
  pr_tensor_t ct = pr__value_tensor(cv);
  pr_model_t *body = graph_attr(n->m, truth(&ct) ? "then_branch" : "else_branch");
  pr_results_t *r = pr__results_new(n->n_out);
  pr_tensor_t *in = calloc((size_t)body->n_inputs + 1, sizeof *in);
  if (!r || !in) {
    pr__results_destroy(r);
    free(in);
    return PR_ERR_NOMEM;
  }
  n->state = r;
  pr__subgraph_outer(c, n, body, in);
  st = pr__subgraph_run(c, n, body, in, r->t);
  free(in);
  if (!st) pr__results_shapes(c, n, r);
  return st;
}

const pr_op_t pr__op_if = {.name = "If",
                           .attrs = "then_branch,else_branch",
                           .min_opset = 1,
                           .check = check_if,
                           .infer = infer_if,
                           .run = pr__results_run,
                           .destroy = pr__results_destroy};

/* ---- stacking slices (Loop's and Scan's scan outputs) ---- */

/* Bytes of one tensor. */
static size_t tensor_bytes(const pr_tensor_t *t) {
  return (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
}

/* out = the count slices sl[0..count) (equal shapes) stacked along a new
 * axis `axis` (0..rank), slice i at position pos[i]. */
static pr_status_t stack_slices(const pr_tensor_t *sl, const int64_t *pos, int64_t count, int axis,
                                pr_tensor_t *out) {
  const pr_tensor_t *f = &sl[0];
  memset(out, 0, sizeof *out);
  out->dtype = f->dtype;
  out->rank = f->rank + 1;
  int64_t outer = 1, inner = (int64_t)pr_dtype_size(f->dtype);
  for (int k = 0, d = 0; k < out->rank; k++) {
    if (k == axis) {
      out->dims[k] = count;
      continue;
    }
    out->dims[k] = f->dims[d];
    *(k < axis ? &outer : &inner) *= f->dims[d++];
  }
  out->data = pr__aligned_alloc(tensor_bytes(out));
  if (!out->data) return PR_ERR_NOMEM;
  for (int64_t i = 0; i < count; i++)
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)out->data + (o * count + pos[i]) * inner, (const char *)sl[i].data + o * inner,
             (size_t)inner);
  return PR_OK;
}

static bool same_shape(const pr_tensor_t *a, const pr_tensor_t *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return false;
  return true;
}

/* Slices gathered over iterations: hist[i * k_count + k] is scan output k
 * of iteration i. */
typedef struct {
  int n_carried, n_scan;
  pr_tensor_t *carried; /* [n_carried], owned */
  pr_tensor_t *hist;    /* [iters * n_scan], owned */
  int64_t iters;
  size_t bytes; /* of hist, against max_bytes */
} iter_t;

static void iter_free(iter_t *it) {
  for (int j = 0; j < it->n_carried; j++) pr_engine_tensor_free(&it->carried[j]);
  for (int64_t i = 0; i < it->iters * it->n_scan; i++) pr_engine_tensor_free(&it->hist[i]);
  free(it->carried);
  free(it->hist);
}

/* Takes an iteration's body outputs from out[first...]: the carried values
 * replace the old ones, the scan slices join hist (owned by it from now). */
static pr_status_t iter_take(pr_compile_t *c, pr_node_t *n, iter_t *it, pr_tensor_t *out) {
  pr_tensor_t *h = realloc(it->hist, sizeof *h * (size_t)((it->iters + 1) * it->n_scan + 1));
  if (!h) return PR_ERR_NOMEM;
  it->hist = h;
  for (int k = 0; k < it->n_scan; k++) {
    pr_tensor_t *s = &out[it->n_carried + k];
    if (it->iters && !same_shape(s, &h[k]))
      return pr__fail(c, n, PR_ERR_INVALID, "scan output %d changes shape between iterations", k);
    it->bytes += tensor_bytes(s);
  }
  if (it->bytes > c->max_bytes)
    return pr__fail(c, n, PR_ERR_NOMEM, "scan outputs over the session's limit of %zu bytes",
                    c->max_bytes);
  for (int j = 0; j < it->n_carried; j++) {
    pr_engine_tensor_free(&it->carried[j]);
    it->carried[j] = out[j];
    memset(&out[j], 0, sizeof out[j]);
  }
  for (int k = 0; k < it->n_scan; k++) {
    h[it->iters * it->n_scan + k] = out[it->n_carried + k];
    memset(&out[it->n_carried + k], 0, sizeof out[0]);
  }
  it->iters++;
  return PR_OK;
}

/* The node's results from it: the carried values, then each scan output
 * stacked along out_axes[k] (0 without), reversed where out_rev[k]. */
static pr_status_t iter_results(pr_compile_t *c, pr_node_t *n, iter_t *it, const int64_t *out_axes,
                                const int64_t *out_rev, pr_model_t *body) {
  pr_results_t *r = pr__results_new(it->n_carried + it->n_scan);
  int64_t *pos = malloc(sizeof *pos * (size_t)(it->iters + 1));
  pr_tensor_t *sl = malloc(sizeof *sl * (size_t)(it->iters + 1));
  pr_status_t st = r && pos && sl ? PR_OK : PR_ERR_NOMEM;
  if (st) pr__results_destroy(r), r = NULL;
  for (int j = 0; !st && j < it->n_carried; j++) {
    r->t[j] = it->carried[j];
    memset(&it->carried[j], 0, sizeof it->carried[j]);
  }
  for (int k = 0; !st && k < it->n_scan; k++) {
    pr_tensor_t *o = &r->t[it->n_carried + k];
    if (!it->iters) { /* no iteration: an empty [0] of the body's type */
      o->dtype = body->values[body->outputs[body->n_outputs - it->n_scan + k]].dtype;
      o->dtype = pr_dtype_size(o->dtype) ? o->dtype : PR_DTYPE_FLOAT;
      o->rank = 1;
      if (!(o->data = pr__aligned_alloc(0))) st = PR_ERR_NOMEM;
      continue;
    }
    int axis = out_axes ? pr__axis(out_axes[k], it->hist[k].rank + 1) : 0;
    if (axis < 0) st = pr__fail(c, n, PR_ERR_INVALID, "scan output axis out of range");
    for (int64_t i = 0; i < it->iters; i++) {
      sl[i] = it->hist[i * it->n_scan + k];
      pos[i] = out_rev && out_rev[k] ? it->iters - 1 - i : i;
    }
    if (!st) st = stack_slices(sl, pos, it->iters, axis, o);
  }
  free(pos);
  free(sl);
  if (r) n->state = r;
  if (!st) pr__results_shapes(c, n, r);
  return st;
}

/* ---- Loop ---- */

static pr_status_t check_loop(const pr_mnode_t *m, int opset, char *err, size_t len) {
  (void)opset;
  const pr_model_t *b = graph_attr(m, "body");
  int nf = formal_inputs(m);
  if (!b) return bad(err, len, m, "needs a body graph");
  if (nf < 2) return bad(err, len, m, "needs M and cond inputs (they may be empty)");
  if (b->n_formal != nf || b->n_outputs < nf - 1 || m->n_out != b->n_outputs - 1)
    return bad(err, len, m, "body inputs and outputs do not match the node's");
  return PR_OK;
}

/* One iteration i: the body on (i, cond, carried..., outer...). */
static pr_status_t loop_step(pr_compile_t *c, pr_node_t *n, pr_model_t *body, iter_t *it, int64_t i,
                             bool *cond) {
  uint8_t cb = *cond;
  pr_tensor_t *in = calloc((size_t)body->n_inputs + 1, sizeof *in);
  pr_tensor_t *out = calloc((size_t)body->n_outputs + 1, sizeof *out);
  pr_status_t st = in && out ? PR_OK : PR_ERR_NOMEM;
  if (!st) {
    in[0] = (pr_tensor_t){.dtype = PR_DTYPE_INT64, .rank = 0, .data = &i};
    in[1] = (pr_tensor_t){.dtype = PR_DTYPE_BOOL, .rank = 0, .data = &cb};
    for (int j = 0; j < it->n_carried; j++) in[2 + j] = it->carried[j];
    pr__subgraph_outer(c, n, body, in);
    st = pr__subgraph_run(c, n, body, in, out);
  }
  if (!st && pr_tensor_numel(&out[0]) != 1)
    st = pr__fail(c, n, PR_ERR_INVALID, "the body's condition must have one element");
  if (!st) {
    *cond = truth(&out[0]);
    st = iter_take(c, n, it, out + 1);
  }
  for (int k = 0; out && k < body->n_outputs; k++) pr_engine_tensor_free(&out[k]);
  free(in);
  free(out);
  return st;
}

static pr_status_t infer_loop(pr_compile_t *c, pr_node_t *n) {
  pr_status_t st = need_all_const(c, n);
  if (st) return st;
  pr_model_t *body = graph_attr(n->m, "body");
  pr_value_t *mv = pr__in(c, n, 0), *cv = pr__in(c, n, 1);
  int64_t max = INT64_MAX;
  bool cond = true;
  if (mv && (pr__value_numel(mv) != 1 || mv->dtype != PR_DTYPE_INT64))
    return pr__fail(c, n, PR_ERR_INVALID, "M must be one int64");
  if (mv) max = *(const int64_t *)mv->data;
  if (cv && (pr__value_numel(cv) != 1 || !pr_dtype_size(cv->dtype)))
    return pr__fail(c, n, PR_ERR_INVALID, "cond must have one element");
  pr_tensor_t ct = cv ? pr__value_tensor(cv) : (pr_tensor_t){0};
  if (cv) cond = truth(&ct);
  iter_t it = {.n_carried = formal_inputs(n->m) - 2};
  it.n_scan = n->n_out - it.n_carried;
  it.carried = calloc((size_t)it.n_carried + 1, sizeof *it.carried);
  if (!it.carried) return PR_ERR_NOMEM;
  for (int j = 0; !st && j < it.n_carried; j++) {
    pr_value_t *v = pr__in(c, n, 2 + j);
    if (!v) st = pr__fail(c, n, PR_ERR_INVALID, "loop-carried input %d is missing", j);
    pr_tensor_t t = v ? pr__value_tensor(v) : (pr_tensor_t){0};
    if (!st) st = pr__tensor_copy(&t, &it.carried[j]);
  }
  for (int64_t i = 0; !st && i < max && cond; i++) {
    if (i >= LOOP_MAX_ITERS)
      st = pr__fail(c, n, PR_ERR_UNSUPPORTED, "over %d iterations", LOOP_MAX_ITERS);
    else
      st = loop_step(c, n, body, &it, i, &cond);
  }
  if (!st) st = iter_results(c, n, &it, NULL, NULL, body);
  iter_free(&it);
  return st;
}

const pr_op_t pr__op_loop = {.name = "Loop",
                             .attrs = "body",
                             .min_opset = 1,
                             .check = check_loop,
                             .first_optional = true,
                             .infer = infer_loop,
                             .run = pr__results_run,
                             .destroy = pr__results_destroy};

/* ---- Scan ---- */

/* What a Scan-9 core run takes: the states, the scanned inputs with their
 * axes and directions, the output axes and directions (NULL: defaults). */
typedef struct {
  int n_state, n_in, n_scan_out;
  const pr_tensor_t *state, *in;
  const int64_t *in_axes, *in_rev, *out_axes, *out_rev;
} scan_args_t;

/* Slice t of scan input x along axis into *s (a copy). */
static pr_status_t take_slice(const pr_tensor_t *x, int axis, int64_t t, pr_tensor_t *s) {
  int64_t outer = 1, inner = (int64_t)pr_dtype_size(x->dtype), len = x->dims[axis];
  memset(s, 0, sizeof *s);
  s->dtype = x->dtype;
  s->rank = x->rank - 1;
  for (int k = 0, d = 0; k < x->rank; k++) {
    if (k == axis) continue;
    s->dims[d++] = x->dims[k];
    *(k < axis ? &outer : &inner) *= x->dims[k];
  }
  s->data = pr__aligned_alloc(tensor_bytes(s));
  if (!s->data) return PR_ERR_NOMEM;
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)s->data + o * inner, (const char *)x->data + (o * len + t) * inner,
           (size_t)inner);
  return PR_OK;
}

/* The sequence length of the scanned inputs (all equal), their axes. */
static pr_status_t scan_length(pr_compile_t *c, pr_node_t *n, const scan_args_t *a, int *axes,
                               int64_t *len) {
  *len = -1;
  for (int j = 0; j < a->n_in; j++) {
    const pr_tensor_t *x = &a->in[j];
    axes[j] = x->rank ? pr__axis(a->in_axes ? a->in_axes[j] : 0, x->rank) : -1;
    if (axes[j] < 0) return pr__fail(c, n, PR_ERR_INVALID, "scan input %d: axis out of range", j);
    if (*len >= 0 && x->dims[axes[j]] != *len)
      return pr__fail(c, n, PR_ERR_INVALID, "scan inputs of different lengths");
    *len = x->dims[axes[j]];
  }
  if (*len > LOOP_MAX_ITERS) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "sequence too long");
  return PR_OK;
}

/* One step t: the body on (states..., slices..., outer...). */
static pr_status_t scan_step(pr_compile_t *c, pr_node_t *n, pr_model_t *body, const scan_args_t *a,
                             const int *axes, int64_t len, iter_t *it) {
  int64_t t = it->iters;
  pr_tensor_t *in = calloc((size_t)body->n_inputs + 1, sizeof *in);
  pr_tensor_t *out = calloc((size_t)body->n_outputs + 1, sizeof *out);
  pr_status_t st = in && out ? PR_OK : PR_ERR_NOMEM;
  for (int j = 0; !st && j < a->n_state; j++) in[j] = it->carried[j];
  for (int j = 0; !st && j < a->n_in; j++) {
    int64_t pos = a->in_rev && a->in_rev[j] ? len - 1 - t : t;
    st = take_slice(&a->in[j], axes[j], pos, &in[a->n_state + j]);
  }
  if (!st) {
    pr__subgraph_outer(c, n, body, in);
    st = pr__subgraph_run(c, n, body, in, out);
  }
  if (!st) st = iter_take(c, n, it, out);
  for (int j = 0; in && j < a->n_in; j++) pr_engine_tensor_free(&in[a->n_state + j]);
  for (int k = 0; out && k < body->n_outputs; k++) pr_engine_tensor_free(&out[k]);
  free(in);
  free(out);
  return st;
}

/* Scan-9 semantics on a: n->state gets the results. */
static pr_status_t scan_core(pr_compile_t *c, pr_node_t *n, const scan_args_t *a) {
  pr_model_t *body = graph_attr(n->m, "body");
  int *axes = calloc((size_t)a->n_in + 1, sizeof *axes);
  iter_t it = {.n_carried = a->n_state, .n_scan = a->n_scan_out};
  it.carried = calloc((size_t)a->n_state + 1, sizeof *it.carried);
  pr_status_t st = axes && it.carried ? PR_OK : PR_ERR_NOMEM;
  int64_t len = 0;
  if (!st) st = scan_length(c, n, a, axes, &len);
  for (int j = 0; !st && j < a->n_state; j++) st = pr__tensor_copy(&a->state[j], &it.carried[j]);
  while (!st && it.iters < len) st = scan_step(c, n, body, a, axes, len, &it);
  if (!st) st = iter_results(c, n, &it, a->out_axes, a->out_rev, body);
  iter_free(&it);
  free(axes);
  return st;
}

static pr_status_t check_scan(const pr_mnode_t *m, int opset, char *err, size_t len) {
  const pr_model_t *b = graph_attr(m, "body");
  int64_t n_in = pr__attr_int(m, "num_scan_inputs", 0);
  int nf = formal_inputs(m) - (opset < 9); /* Scan-8: sequence_lens first */
  if (!b) return bad(err, len, m, "needs a body graph");
  if (n_in < 1 || n_in > nf) return bad(err, len, m, "num_scan_inputs out of range");
  int n_state = nf - (int)n_in;
  if (b->n_formal != nf || b->n_outputs < n_state || m->n_out != b->n_outputs)
    return bad(err, len, m, "body inputs and outputs do not match the node's");
  const int64_t *v;
  int n_scan_out = b->n_outputs - n_state;
  if ((pr__attr_ints(m, "scan_input_axes", &v) &&
       pr__attr_ints(m, "scan_input_axes", &v) != n_in) ||
      (pr__attr_ints(m, "scan_input_directions", &v) &&
       pr__attr_ints(m, "scan_input_directions", &v) != n_in) ||
      (pr__attr_ints(m, "directions", &v) && pr__attr_ints(m, "directions", &v) != n_in) ||
      (pr__attr_ints(m, "scan_output_axes", &v) &&
       pr__attr_ints(m, "scan_output_axes", &v) != n_scan_out) ||
      (pr__attr_ints(m, "scan_output_directions", &v) &&
       pr__attr_ints(m, "scan_output_directions", &v) != n_scan_out))
    return bad(err, len, m, "an axes or directions attribute of the wrong length");
  return PR_OK;
}

/* The node's inputs from `first` on as tensors (views of constants). */
static pr_status_t input_tensors(pr_compile_t *c, pr_node_t *n, int first, int count,
                                 pr_tensor_t *t) {
  for (int j = 0; j < count; j++) {
    pr_value_t *v = pr__in(c, n, first + j);
    if (!v) return pr__fail(c, n, PR_ERR_INVALID, "input %d is missing", first + j);
    t[j] = pr__value_tensor(v);
  }
  return PR_OK;
}

static const int64_t *ints_or_null(const pr_mnode_t *m, const char *name) {
  const int64_t *v = NULL;
  return pr__attr_ints(m, name, &v) ? v : NULL;
}

/* Scan-8: per batch row, Scan-9 on the row's states and sequences (axis 0),
 * each output stacked over the rows. */
static pr_status_t scan8_rows(pr_compile_t *c, pr_node_t *n, scan_args_t *a, int64_t batch);

static pr_status_t infer_scan(pr_compile_t *c, pr_node_t *n) {
  pr_status_t st = need_all_const(c, n);
  if (st) return st;
  bool v8 = c->opset < 9;
  int n_in = (int)pr__attr_int(n->m, "num_scan_inputs", 0);
  int nf = formal_inputs(n->m) - v8;
  scan_args_t a = {.n_state = nf - n_in, .n_in = n_in, .n_scan_out = n->n_out - (nf - n_in)};
  pr_tensor_t *t = calloc((size_t)nf + 1, sizeof *t);
  if (!t) return PR_ERR_NOMEM;
  st = input_tensors(c, n, v8, nf, t);
  a.state = t;
  a.in = t + a.n_state;
  if (!st && !v8) {
    a.in_axes = ints_or_null(n->m, "scan_input_axes");
    a.in_rev = ints_or_null(n->m, "scan_input_directions");
    a.out_axes = ints_or_null(n->m, "scan_output_axes");
    a.out_rev = ints_or_null(n->m, "scan_output_directions");
    st = scan_core(c, n, &a);
  } else if (!st) {
    a.in_rev = ints_or_null(n->m, "directions");
    st = a.in[0].rank < 2 ? pr__fail(c, n, PR_ERR_INVALID, "scan inputs need a batch axis")
                          : scan8_rows(c, n, &a, a.in[0].dims[0]);
  }
  free(t);
  return st;
}

/* Row b of t (axis 0) as a view. */
static pr_tensor_t row_of(const pr_tensor_t *t, int64_t b) {
  pr_tensor_t r = {.dtype = t->dtype, .rank = t->rank - 1};
  for (int k = 1; k < t->rank; k++) r.dims[k - 1] = t->dims[k];
  r.data = (char *)t->data + b * (int64_t)tensor_bytes(&r);
  return r;
}

static pr_status_t scan8_check(pr_compile_t *c, pr_node_t *n, const scan_args_t *a, int64_t batch) {
  pr_value_t *sl = pr__in(c, n, 0);
  for (int j = 0; j < a->n_state + a->n_in; j++) {
    const pr_tensor_t *t = j < a->n_state ? &a->state[j] : &a->in[j - a->n_state];
    if (t->rank < 1 || t->dims[0] != batch)
      return pr__fail(c, n, PR_ERR_INVALID, "input %d lacks the batch axis", j + 1);
  }
  int64_t len = a->in[0].dims[1];
  for (int64_t b = 0; sl && b < pr__value_numel(sl); b++) {
    pr_tensor_t st = pr__value_tensor(sl);
    if (st.dtype != PR_DTYPE_INT64 || ((const int64_t *)st.data)[b] != len)
      return pr__fail(c, n, PR_ERR_UNSUPPORTED, "sequence_lens shorter than the sequence");
  }
  return PR_OK;
}

static pr_status_t scan8_rows(pr_compile_t *c, pr_node_t *n, scan_args_t *a, int64_t batch) {
  pr_status_t st = scan8_check(c, n, a, batch);
  int total = a->n_state + a->n_in, n_out = n->n_out;
  pr_tensor_t *rows = calloc((size_t)total + 1, sizeof *rows);
  pr_tensor_t *got = calloc((size_t)(batch * n_out) + 1, sizeof *got);
  int64_t *pos = malloc(sizeof *pos * (size_t)(batch + 1));
  if (!st && (!rows || !got || !pos)) st = PR_ERR_NOMEM;
  for (int64_t b = 0; !st && b < batch; b++) {
    for (int j = 0; j < total; j++)
      rows[j] = row_of(j < a->n_state ? &a->state[j] : &a->in[j - a->n_state], b);
    scan_args_t ra = *a;
    ra.state = rows;
    ra.in = rows + a->n_state;
    st = scan_core(c, n, &ra);
    pr_results_t *r = n->state;
    if (!st) { /* row b's outputs move to got */
      for (int k = 0; k < n_out; k++) got[b * n_out + k] = r->t[k];
      r->n = 0;
    }
    pr__results_destroy(n->state);
    n->state = NULL;
  }
  pr_results_t *r = st ? NULL : pr__results_new(n_out);
  pr_tensor_t *sl = calloc((size_t)batch + 1, sizeof *sl);
  if (!st && (!r || !sl)) st = PR_ERR_NOMEM;
  for (int64_t b = 0; !st && b < batch; b++) pos[b] = b;
  for (int k = 0; !st && k < n_out; k++) {
    for (int64_t b = 0; b < batch; b++) sl[b] = got[b * n_out + k];
    st = stack_slices(sl, pos, batch, 0, &r->t[k]);
  }
  n->state = r;
  if (!st) pr__results_shapes(c, n, r);
  for (int64_t i = 0; got && i < batch * n_out; i++) pr_engine_tensor_free(&got[i]);
  free(rows);
  free(got);
  free(pos);
  free(sl);
  return st;
}

const pr_op_t pr__op_scan = {.name = "Scan",
                             .attrs =
                                 "body,num_scan_inputs,scan_input_axes,scan_input_directions,"
                                 "scan_output_axes,scan_output_directions,directions",
                             .min_opset = 8,
                             .check = check_scan,
                             .first_optional = true,
                             .infer = infer_scan,
                             .run = pr__results_run,
                             .destroy = pr__results_destroy};
