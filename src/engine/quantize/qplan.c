/* What the quantizer quantizes (qplan.h). */
#include "engine/quantize/qplan.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static bool is_op(const Onnx__NodeProto *n, const char *op) {
  return (!n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx")) && !strcmp(n->op_type, op);
}

static const char *input(const Onnx__NodeProto *n, size_t k) {
  return k < n->n_input && n->input[k][0] ? n->input[k] : NULL;
}

/* The FLOAT constant `name` of rank in [lo, hi], or NULL. */
static const Onnx__TensorProto *float_const(const pr_qz_index_t *ix, const char *name, size_t lo,
                                            size_t hi) {
  const Onnx__TensorProto *t = name ? pr__qz_const_proto(ix, name) : NULL;
  if (!t || t->data_type != PR_DTYPE_FLOAT || t->n_dims < lo || t->n_dims > hi) return NULL;
  return t;
}

/* An activation: a value that is not constant. */
static bool is_act(const pr_qz_index_t *ix, const char *name) {
  int id = pr__qz_id(ix, name);
  return id >= 0 && !ix->is_const[id];
}

/* The only node reading value `name` when it has one and is no graph
 * output, else -1. */
static int only_reader(const pr_qz_index_t *ix, const char *name) {
  int id = pr__qz_id(ix, name);
  return id >= 0 && ix->uses[id] == 1 && !ix->is_output[id] ? ix->consumer[id] : -1;
}

/* The value where the folded kernel of node i ends (qplan.h), or NULL
 * when that is a graph output. */
static const char *kernel_end(const pr_qz_index_t *ix, int i, pr_qz_kind_t kind, int64_t n_cols) {
  const Onnx__NodeProto *n = ix->g->node[i];
  const char *o = n->output[0];
  int k = only_reader(ix, o);
  if (kind == PR_QZ_MATMUL && k >= 0 && is_op(ix->g->node[k], "Add")) {
    const Onnx__NodeProto *a = ix->g->node[k];
    const char *other = a->n_input == 2 ? a->input[strcmp(a->input[0], o) ? 0 : 1] : NULL;
    const Onnx__TensorProto *b = other ? float_const(ix, other, 0, 8) : NULL;
    int64_t numel = 1;
    for (size_t d = 0; b && d < b->n_dims; d++) numel *= b->dims[d];
    if (b && numel == n_cols && (!b->n_dims || b->dims[b->n_dims - 1] == n_cols)) {
      o = a->output[0];
      k = only_reader(ix, o);
    }
  }
  if (k >= 0 && is_op(ix->g->node[k], "Relu")) o = ix->g->node[k]->output[0];
  int id = pr__qz_id(ix, o);
  return id >= 0 && !ix->is_output[id] ? o : NULL;
}

/* The tensor entry of `name`, added when new; -1 when out of memory. */
static int tensor(pr_qz_plan_t *p, const pr_qz_index_t *ix, const char *name, int cap) {
  int e = pr__names_get(&p->by_name, name);
  if (e >= 0) return e;
  if (p->n_t == cap) return -1;
  pr_qz_tensor_t *t = &p->t[p->n_t];
  memset(t, 0, sizeof *t);
  if (!(t->name = strdup(name)) || pr__names_put(&p->by_name, t->name, p->n_t)) {
    free(t->name);
    return -1;
  }
  t->graph_input = ix->is_input[pr__qz_id(ix, name)];
  pr__qz_range_init(&t->range);
  return p->n_t++;
}

/* Fills op with node i's kind, weights and bias when the folding can take
 * it; false when it stays float. */
static bool classify(const pr_qz_index_t *ix, int i, unsigned kinds, pr_qz_op_t *op,
                     int64_t *n_cols) {
  const Onnx__NodeProto *n = ix->g->node[i];
  const Onnx__TensorProto *w = NULL;
  *op = (pr_qz_op_t){.node = i, .act = {-1, -1}, .w_input = 1, .bias_input = -1, .out = -1};
  if (is_op(n, "Conv")) {
    op->kind = PR_QZ_CONV;
    if (!(w = float_const(ix, input(n, 1), 3, 5))) return false;
    const Onnx__TensorProto *b = float_const(ix, input(n, 2), 1, 1);
    if (input(n, 2) && !b) return false;
    op->bias_input = b ? 2 : -1;
    *n_cols = w->dims[0];
  } else if (is_op(n, "MatMul")) {
    op->kind = PR_QZ_MATMUL, op->w_axis = 1;
    if (!(w = float_const(ix, input(n, 1), 2, 2))) return false;
    *n_cols = w->dims[1];
  } else if (is_op(n, "Gemm")) {
    op->kind = PR_QZ_GEMM;
    bool trans = pr__qz_attr_int(n, "transB", 0);
    if (pr__qz_attr_int(n, "transA", 0) || pr__qz_attr_float(n, "alpha", 1.f) != 1.f ||
        !(w = float_const(ix, input(n, 1), 2, 2)))
      return false;
    op->w_axis = trans ? 0 : 1;
    *n_cols = w->dims[op->w_axis];
    const Onnx__TensorProto *b = input(n, 2) ? float_const(ix, input(n, 2), 0, 2) : NULL;
    if (input(n, 2) && !b) return false;
    if (b && b->n_dims == 1 && b->dims[0] == *n_cols && pr__qz_attr_float(n, "beta", 1.f) == 1.f)
      op->bias_input = 2;
  } else if (is_op(n, "Add")) {
    op->kind = PR_QZ_ADD, op->w_input = -1;
    if (n->n_input != 2 || !strcmp(n->input[0], n->input[1]) || !is_act(ix, n->input[1]))
      return false;
  } else {
    return false;
  }
  return (kinds >> op->kind & 1) && input(n, 0) && is_act(ix, n->input[0]);
}

static bool excluded(const pr_qz_plan_options_t *opt, const Onnx__NodeProto *n) {
  for (int k = 0; k < opt->n_exclude; k++)
    if (!strcmp(opt->exclude[k], pr__qz_node_name(n))) return true;
  return false;
}

/* Each name of --exclude names a node; false (with a message) otherwise. */
static bool exclusions_exist(const pr_qz_index_t *ix, const pr_qz_plan_options_t *opt, char *err,
                             size_t err_len) {
  for (int k = 0; k < opt->n_exclude; k++) {
    size_t i = 0;
    while (i < ix->g->n_node && strcmp(opt->exclude[k], pr__qz_node_name(ix->g->node[i]))) i++;
    if (i == ix->g->n_node) {
      pr__errf(err, err_len, "no node named '%.200s' to exclude", opt->exclude[k]);
      return false;
    }
  }
  return true;
}

/* Node i's op into the plan when it is quantized; PR_ERR_NOMEM. */
static pr_status_t add_op(pr_qz_plan_t *p, const pr_qz_index_t *ix, const pr_qz_plan_options_t *opt,
                          int i, int cap) {
  const Onnx__NodeProto *n = ix->g->node[i];
  pr_qz_op_t op;
  int64_t n_cols = 0;
  if (excluded(opt, n) || !classify(ix, i, opt->kinds, &op, &n_cols)) return PR_OK;
  /* dynamic: no kernel to fold the output into, the output is not quantized */
  const char *end = opt->dynamic ? n->output[0] : kernel_end(ix, i, op.kind, n_cols);
  if (!end) return PR_OK; /* nothing to fold into an int8 kernel */
  for (int k = 0; k < (op.kind == PR_QZ_ADD ? 2 : 1); k++)
    if ((op.act[k] = tensor(p, ix, n->input[k], cap)) < 0) return PR_ERR_NOMEM;
  if ((op.out = tensor(p, ix, end, cap)) < 0) return PR_ERR_NOMEM;
  p->t[op.act[0]].refs++, p->t[op.out].refs++;
  if (op.act[1] >= 0) p->t[op.act[1]].refs++;
  p->ops[p->n_ops++] = op;
  return PR_OK;
}

pr_status_t pr__qz_plan_make(const pr_qz_index_t *ix, const pr_qz_plan_options_t *opt,
                             pr_qz_plan_t *plan, char *err, size_t err_len) {
  memset(plan, 0, sizeof *plan);
  pr__names_init(&plan->by_name);
  if (!exclusions_exist(ix, opt, err, err_len)) return PR_ERR_NOT_FOUND;
  size_t n_node = ix->g->n_node;
  int cap = (int)(3 * n_node + 1);
  plan->ops = calloc(n_node + 1, sizeof *plan->ops);
  plan->t = calloc((size_t)cap, sizeof *plan->t);
  if (!plan->ops || !plan->t) return PR_ERR_NOMEM;
  for (size_t i = 0; i < n_node; i++) {
    pr_status_t st = add_op(plan, ix, opt, (int)i, cap);
    if (st) return st;
    const Onnx__NodeProto *n = ix->g->node[i];
    if (opt->want_softmax_ranks && n->n_input && is_act(ix, n->input[0]) &&
        (is_op(n, "Softmax") || is_op(n, "LogSoftmax") || is_op(n, "Hardmax"))) {
      int e = tensor(plan, ix, n->input[0], cap);
      if (e < 0) return PR_ERR_NOMEM;
      plan->t[e].observe = true;
    }
  }
  if (!plan->n_ops) {
    pr__errf(err, err_len,
             "nothing to quantize: no Conv, MatMul or Gemm with constant float weights (nor an "
             "Add of two activations) whose output could stay in int8");
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

void pr__qz_plan_free(pr_qz_plan_t *plan) {
  for (int i = 0; plan->t && i < plan->n_t; i++) {
    pr__qz_range_free(&plan->t[i].range);
    free(plan->t[i].name);
  }
  free(plan->ops);
  free(plan->t);
  pr__names_free(&plan->by_name);
  memset(plan, 0, sizeof *plan);
}

int pr__qz_plan_find(const pr_qz_plan_t *plan, const char *name) {
  return pr__names_get(&plan->by_name, name);
}

static bool same_shape(const pr_qz_tensor_t *a, const pr_qz_tensor_t *b) {
  return a->seen && b->seen && a->rank == b->rank &&
         !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}

void pr__qz_plan_recount(pr_qz_plan_t *plan) {
  for (int e = 0; e < plan->n_t; e++) plan->t[e].refs = 0;
  for (int i = 0; i < plan->n_ops; i++) {
    const pr_qz_op_t *op = &plan->ops[i];
    if (!pr__qz_op_live(op)) continue;
    plan->t[op->act[0]].refs++, plan->t[op->out].refs++;
    if (op->act[1] >= 0) plan->t[op->act[1]].refs++;
  }
}

int pr__qz_plan_settle(pr_qz_plan_t *plan) {
  int left = 0;
  for (int i = 0; i < plan->n_ops; i++) {
    pr_qz_op_t *op = &plan->ops[i];
    const pr_qz_tensor_t *a = &plan->t[op->act[0]];
    if (op->kind == PR_QZ_ADD)
      op->dropped = !same_shape(a, &plan->t[op->act[1]]) || !same_shape(a, &plan->t[op->out]);
    else if (op->kind != PR_QZ_CONV)
      op->dropped = !a->seen || a->rank < 2;
    left += pr__qz_op_live(op);
  }
  pr__qz_plan_recount(plan);
  return left;
}

void pr__qz_plan_counts(const pr_qz_plan_t *plan, int *counts) {
  memset(counts, 0, sizeof(int) * PR_QZ_KINDS);
  for (int i = 0; i < plan->n_ops; i++)
    if (pr__qz_op_live(&plan->ops[i])) counts[plan->ops[i].kind]++;
}
