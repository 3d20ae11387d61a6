/* Raising a model to opset 13 for QDQ (qwrite.h's notes): the operators
 * whose meaning changed between opsets 9 and 13 rewritten into their
 * opset-13 form. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/quantize/qwrite.h"

typedef struct {
  Onnx__GraphProto *g;
  const pr_qz_plan_t *plan;
  int from; /* the model's opset */
  char *err;
  size_t err_len;
} upgrade_t;

static bool default_domain(const char *d) {
  return !d || !d[0] || !strcmp(d, "ai.onnx");
}

int pr__qz_opset(const Onnx__ModelProto *mp) {
  for (size_t i = 0; i < mp->n_opset_import; i++)
    if (default_domain(mp->opset_import[i]->domain)) return (int)mp->opset_import[i]->version;
  return 0;
}

/* Attribute `attr` of n (INTS or FLOATS/FLOAT) as a new initializer that
 * becomes input k of n (inputs before k that n lacks become ""); the
 * attribute is dropped. An absent attribute adds nothing. */
static pr_status_t attr_to_input(upgrade_t *u, Onnx__NodeProto *n, const char *attr, size_t k) {
  const Onnx__AttributeProto *a = pr__qz_attr(n, attr);
  if (!a) return PR_OK;
  char *name = pr__qz_name(n->output[0], attr[0] == 'm' ? "_clip_" : "_attr_");
  char *full = name ? pr__qz_name(name, attr) : NULL;
  free(name);
  if (!full) return PR_ERR_NOMEM;
  Onnx__TensorProto *t;
  if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
    t = pr__qz_tensor_new(full, PR_DTYPE_FLOAT, 0, NULL, &a->f, sizeof a->f);
  } else if (!strcmp(attr, "k")) {
    int64_t one = 1;
    t = pr__qz_tensor_new(full, PR_DTYPE_INT64, 1, &one, &a->i, sizeof a->i);
  } else {
    int64_t count = (int64_t)a->n_ints;
    t = pr__qz_tensor_new(full, PR_DTYPE_INT64, 1, &count, a->ints, sizeof(int64_t) * a->n_ints);
  }
  pr_status_t st = t ? pr__qz_add_init(u->g, t) : PR_ERR_NOMEM;
  while (!st && n->n_input < k) st = pr__qz_node_add_input(n, "");
  if (!st)
    st = n->n_input == k ? pr__qz_node_add_input(n, full) : pr__qz_node_set_input(n, (int)k, full);
  free(full);
  if (!st) pr__qz_node_drop_attr(n, attr);
  return st;
}

/* Softmax, LogSoftmax, Hardmax before 13 flatten at their axis; at 13 they
 * work along it. The same when the axis is the last. */
static pr_status_t softmax(upgrade_t *u, Onnx__NodeProto *n) {
  int e = n->n_input ? pr__qz_plan_find(u->plan, n->input[0]) : -1;
  int rank = e >= 0 && u->plan->t[e].seen ? u->plan->t[e].rank : -1;
  int64_t axis = pr__qz_attr_int(n, "axis", 1);
  if (rank > 0 && axis < 0) axis += rank;
  if (rank < 0 || axis != rank - 1) {
    pr__errf(u->err, u->err_len,
             "node '%.200s' (%s, opset %d): its axis is not the last of its input (or its rank is "
             "unknown), so it has no opset-%d form; quantization needs opset %d",
             pr__qz_node_name(n), n->op_type, u->from, PR_QZ_OPSET, PR_QZ_OPSET);
    return PR_ERR_UNSUPPORTED;
  }
  return pr__qz_node_set_int(n, "axis", -1);
}

static pr_status_t upgrade_graph(upgrade_t *u, Onnx__GraphProto *g);

static pr_status_t upgrade_node(upgrade_t *u, Onnx__NodeProto *n) {
  const char *op = n->op_type;
  int v = u->from;
  pr_status_t st = PR_OK;
  for (size_t a = 0; a < n->n_attribute && !st; a++) { /* bodies of If, Loop, Scan */
    if (n->attribute[a]->g) st = upgrade_graph(u, n->attribute[a]->g);
    for (size_t k = 0; k < n->attribute[a]->n_graphs && !st; k++)
      st = upgrade_graph(u, n->attribute[a]->graphs[k]);
  }
  if (st || !default_domain(n->domain)) return st;
  if (!strcmp(op, "Upsample") || !strcmp(op, "Scatter") || (!strcmp(op, "Resize") && v < 11)) {
    pr__errf(u->err, u->err_len,
             "node '%.200s' (%s, opset %d) has no opset-%d form; quantization needs opset %d",
             pr__qz_node_name(n), op, v, PR_QZ_OPSET, PR_QZ_OPSET);
    return PR_ERR_UNSUPPORTED;
  }
  if (!strcmp(op, "Clip") && v < 11) {
    st = attr_to_input(u, n, "min", 1);
    if (!st) st = attr_to_input(u, n, "max", 2);
  } else if (!strcmp(op, "Slice") && v < 10) {
    st = attr_to_input(u, n, "starts", 1);
    if (!st) st = attr_to_input(u, n, "ends", 2);
    if (!st) st = attr_to_input(u, n, "axes", 3);
  } else if (!strcmp(op, "Pad") && v < 11) {
    st = attr_to_input(u, n, "pads", 1);
    if (!st) st = attr_to_input(u, n, "value", 2);
  } else if (!strcmp(op, "TopK") && v < 10) {
    st = attr_to_input(u, n, "k", 1);
  } else if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") || !strcmp(op, "ReduceSum")) {
    st = attr_to_input(u, n, "axes", 1);
  } else if (!strcmp(op, "Split")) {
    st = attr_to_input(u, n, "split", 1);
  } else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax") || !strcmp(op, "Hardmax")) {
    st = softmax(u, n);
  }
  return st;
}

static pr_status_t upgrade_graph(upgrade_t *u, Onnx__GraphProto *g) {
  Onnx__GraphProto *outer = u->g;
  u->g = g;
  pr_status_t st = PR_OK;
  for (size_t i = 0; i < g->n_node && !st; i++) st = upgrade_node(u, g->node[i]);
  u->g = outer;
  return st;
}

pr_status_t pr__qz_opset_upgrade(Onnx__ModelProto *mp, const pr_qz_plan_t *plan, char *err,
                                 size_t err_len) {
  int from = pr__qz_opset(mp);
  if (from >= PR_QZ_OPSET) return PR_OK;
  if (from < 9) {
    pr__errf(err, err_len, "the model imports opset %d: quantization takes opsets 9 to %d", from,
             PR_MAX_OPSET);
    return PR_ERR_UNSUPPORTED;
  }
  upgrade_t u = {.g = mp->graph, .plan = plan, .from = from, .err = err, .err_len = err_len};
  pr_status_t st = upgrade_graph(&u, mp->graph);
  if (st == PR_ERR_NOMEM) pr__errf(err, err_len, "out of memory raising the opset");
  if (st) return st;
  for (size_t i = 0; i < mp->n_opset_import; i++)
    if (default_domain(mp->opset_import[i]->domain)) mp->opset_import[i]->version = PR_QZ_OPSET;
  if (!mp->has_ir_version || mp->ir_version < 7) mp->has_ir_version = 1, mp->ir_version = 7;
  return PR_OK;
}
