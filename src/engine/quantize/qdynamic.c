/* Dynamic quantization (qwrite.h, pr__qz_write_dynamic): MatMuls with
 * constant weights in the QOperator form of ONNX Runtime's
 * quantize_dynamic, activations quantized at run time.
 *
 *   x -> DynamicQuantizeLinear -> x_q (u8), x_scale, x_zero_point  (once per x)
 *   MatMulInteger(x_q, W_q (int8 per column), x_zero_point, 0) -> int32
 *   Cast(FLOAT) -> Mul(., x_scale * W_scale[column]) -> y
 *
 * Notes on the design:
 * - Weights are symmetric int8 per column (zero point 0, so one scalar
 *   zero point serves every column); their scales ride in the float Mul,
 *   which both engines take per column.
 * - The new nodes take the MatMul's place in the node list; the
 *   DynamicQuantizeLinear of x goes before the first MatMul that reads x,
 *   after x's producer. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/quantize/qwrite.h"
#include "engine/tensor.h"

typedef struct {
  Onnx__GraphProto *g;
  const pr_qz_plan_t *plan;
  const char *base_dir;
  int w_max; /* weights in [-w_max, w_max] */
  pr_qz_index_t ix;
  Onnx__NodeProto **out; /* the new node list */
  size_t n_out, cap;
  bool *done; /* per plan tensor: its DynamicQuantizeLinear emitted */
  int n_dynamic;
  char *err;
  size_t err_len;
} dyn_t;

/* Appends n to the new list; PR_ERR_NOMEM leaves n the caller's. */
static pr_status_t append(dyn_t *d, Onnx__NodeProto *n) {
  return pr__qz_list_push(&d->out, &d->n_out, &d->cap, n);
}

/* A new node op(in...) -> out... appended to the list. */
static pr_status_t emit_new(dyn_t *d, const char *op, const char *name, int n_in,
                            const char *const *in, int n_out, const char *const *out) {
  Onnx__NodeProto *n = pr__qz_node_new(op, name, n_in, in, n_out, out);
  if (!n) return PR_ERR_NOMEM;
  pr_status_t st = append(d, n);
  if (st) onnx__node_proto__free_unpacked(n, NULL);
  return st;
}

/* The names "<base>_dq_quantized", "_dq_scale", "_dq_zero_point" of x. */
static void x_names(const char *x, char **q, char **s, char **z) {
  *q = pr__qz_name(x, "_dq_quantized");
  *s = pr__qz_name(x, "_dq_scale");
  *z = pr__qz_name(x, "_dq_zero_point");
}

/* Op's weights as "<y>_W_quantized" (int8), "<y>_W_scale" ([N] float) and
 * "<y>_W_zero_point" (int8 0) initializers. */
static pr_status_t weights(dyn_t *d, const pr_qz_op_t *op, const char *y) {
  const Onnx__NodeProto *n = d->g->node[op->node];
  pr_tensor_t *t = NULL;
  pr_status_t st =
      pr__qz_const_float(&d->ix, n->input[op->w_input], d->base_dir, &t, d->err, d->err_len);
  if (st) return st;
  int64_t k = t->dims[0], cols = t->dims[1];
  int8_t *q = malloc((size_t)(k * cols) + 1), zero = 0;
  float *scale = malloc(sizeof(float) * (size_t)cols + 1);
  char *qn = pr__qz_name(y, "_W_quantized"), *sn = pr__qz_name(y, "_W_scale");
  char *zn = pr__qz_name(y, "_W_zero_point");
  Onnx__TensorProto *tq = NULL, *ts = NULL, *tz = NULL;
  st = PR_ERR_NOMEM;
  if (q && scale && qn && sn && zn) {
    pr__qz_weights_s8(t->data, k, cols, 1, d->w_max, q, scale); /* per column: axis 1 of [K, N] */
    tq = pr__qz_tensor_new(qn, PR_DTYPE_INT8, 2, t->dims, q, (size_t)(k * cols));
    ts = pr__qz_tensor_new(sn, PR_DTYPE_FLOAT, 1, &cols, scale, sizeof(float) * (size_t)cols);
    tz = pr__qz_tensor_new(zn, PR_DTYPE_INT8, 0, NULL, &zero, 1);
    st = tq && ts && tz ? PR_OK : PR_ERR_NOMEM;
    if (!st && !(st = pr__qz_add_init(d->g, tq)) && !(st = pr__qz_add_init(d->g, ts)))
      st = pr__qz_add_init(d->g, tz);
    else if (st) {
      if (tq) onnx__tensor_proto__free_unpacked(tq, NULL);
      if (ts) onnx__tensor_proto__free_unpacked(ts, NULL);
      if (tz) onnx__tensor_proto__free_unpacked(tz, NULL);
    }
  }
  free(q), free(scale), free(qn), free(sn), free(zn);
  pr_engine_tensor_free(t);
  free(t);
  return st;
}

/* The nodes of one dynamic MatMul in the place of node op->node. */
static pr_status_t rewrite_op(dyn_t *d, const pr_qz_op_t *op) {
  const Onnx__NodeProto *n = d->g->node[op->node];
  const char *x = n->input[0], *y = n->output[0];
  char *xq, *xs, *xz, *names[6];
  x_names(x, &xq, &xs, &xz);
  const char *const suffix[6] = {"_W_quantized", "_W_zero_point", "_int32",
                                 "_float",       "_W_scale",      "_scale"};
  for (int k = 0; k < 6; k++) names[k] = pr__qz_name(y, suffix[k]);
  char *node_names[5];
  const char *const kinds[5] = {"_DynamicQuantizeLinear", "_MatMulInteger", "_Cast", "_Mul_scale",
                                "_Mul"};
  for (int k = 0; k < 5; k++) node_names[k] = pr__qz_name(y, kinds[k]);
  pr_status_t st = xq && xs && xz ? PR_OK : PR_ERR_NOMEM;
  for (int k = 0; k < 6; k++) st = names[k] ? st : PR_ERR_NOMEM;
  for (int k = 0; k < 5; k++) st = node_names[k] ? st : PR_ERR_NOMEM;
  if (!st && !d->done[op->act[0]]) {
    st = emit_new(d, "DynamicQuantizeLinear", node_names[0], 1, (const char *[]){x}, 3,
                  (const char *[]){xq, xs, xz});
    d->done[op->act[0]] = true, d->n_dynamic++;
  }
  if (!st) st = weights(d, op, y);
  if (!st)
    st = emit_new(d, "MatMulInteger", node_names[1], 4,
                  (const char *[]){xq, names[0], xz, names[1]}, 1, (const char *[]){names[2]});
  if (!st)
    st = emit_new(d, "Cast", node_names[2], 1, (const char *[]){names[2]}, 1,
                  (const char *[]){names[3]});
  if (!st) st = pr__qz_node_set_int(d->out[d->n_out - 1], "to", PR_DTYPE_FLOAT);
  if (!st)
    st = emit_new(d, "Mul", node_names[3], 2, (const char *[]){xs, names[4]}, 1,
                  (const char *[]){names[5]});
  if (!st)
    st = emit_new(d, "Mul", node_names[4], 2, (const char *[]){names[3], names[5]}, 1,
                  (const char *[]){y});
  free(xq), free(xs), free(xz);
  for (int k = 0; k < 6; k++) free(names[k]);
  for (int k = 0; k < 5; k++) free(node_names[k]);
  return st;
}

/* Every node into the new list, each live MatMul op as its dynamic nodes
 * (the MatMul itself freed). */
static pr_status_t rewrite(dyn_t *d) {
  const pr_qz_op_t **op_of = calloc(d->g->n_node + 1, sizeof *op_of);
  if (!op_of) return PR_ERR_NOMEM;
  for (int k = 0; k < d->plan->n_ops; k++)
    if (d->plan->ops[k].kind == PR_QZ_MATMUL && pr__qz_op_live(&d->plan->ops[k]))
      op_of[d->plan->ops[k].node] = &d->plan->ops[k];
  pr_status_t st = PR_OK;
  for (size_t i = 0; i < d->g->n_node && !st; i++) {
    if (op_of[i]) {
      st = rewrite_op(d, op_of[i]);
      continue;
    }
    if (!(st = append(d, d->g->node[i]))) d->g->node[i] = NULL; /* moved */
  }
  free(op_of);
  return st;
}

pr_status_t pr__qz_write_dynamic(Onnx__ModelProto *mp, const pr_qz_plan_t *plan,
                                 const char *base_dir, int w_max, int *n_dynamic, char *err,
                                 size_t err_len) {
  int opset = pr__qz_opset(mp);
  if (opset < 11) {
    pr__errf(err, err_len,
             "dynamic quantization needs opset 11 (DynamicQuantizeLinear); the model's is %d: "
             "quantize it statically, or export it at a newer opset",
             opset);
    return PR_ERR_UNSUPPORTED;
  }
  dyn_t d = {.g = mp->graph,
             .plan = plan,
             .base_dir = base_dir,
             .w_max = w_max,
             .err = err,
             .err_len = err_len};
  if (pr__qz_index_build(&d.ix, d.g)) return PR_ERR_NOMEM;
  d.done = calloc((size_t)plan->n_t + 1, sizeof *d.done);
  pr_status_t st = d.done ? rewrite(&d) : PR_ERR_NOMEM;
  pr__qz_index_free(&d.ix);
  /* every node, old (moved) or new, is in d.out; the old list holds the
   * MatMuls replaced and, after a failure, the nodes not reached */
  for (size_t i = 0; i < d.g->n_node; i++)
    if (d.g->node[i]) onnx__node_proto__free_unpacked(d.g->node[i], NULL);
  free(d.g->node);
  d.g->node = d.out, d.g->n_node = d.n_out;
  free(d.done);
  *n_dynamic = d.n_dynamic;
  if (!st) st = pr__qz_prune(d.g);
  if (!st) st = pr__qz_inline_all(d.g, base_dir, err, err_len);
  if (st == PR_ERR_NOMEM) pr__errf(err, err_len, "out of memory writing the quantized model");
  return st;
}
