/* The QDQ rewrite (qwrite.h): QuantizeLinear/DequantizeLinear pairs around
 * the planned activations, int8 weights and int32 biases behind
 * DequantizeLinear, unused constants pruned. */
#include "engine/quantize/qwrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/tensor.h"

typedef struct {
  Onnx__GraphProto *g;
  const pr_qz_plan_t *plan;
  const pr_qz_write_options_t *o;
  pr_qz_index_t ix;
  Onnx__NodeProto **out; /* the new node list */
  size_t n_out, cap;
  float *scale; /* per plan tensor */
  int32_t *zp;
  char *err;
  size_t err_len;
} writer_t;

/* Appends n to the new node list (n stays the caller's on failure). */
static pr_status_t emit(writer_t *w, Onnx__NodeProto *n) {
  if (!n) return PR_ERR_NOMEM;
  return pr__qz_list_push(&w->out, &w->n_out, &w->cap, n);
}

/* Adds an initializer "<base><suffix>"; PR_ERR_NOMEM. */
static pr_status_t add_init(writer_t *w, const char *base, const char *suffix, pr_dtype_t t,
                            int rank, const int64_t *dims, const void *data, size_t nbytes) {
  char *name = pr__qz_name(base, suffix);
  Onnx__TensorProto *tp = name ? pr__qz_tensor_new(name, t, rank, dims, data, nbytes) : NULL;
  free(name);
  return tp ? pr__qz_add_init(w->g, tp) : PR_ERR_NOMEM;
}

/* A DequantizeLinear (op "DequantizeLinear") or QuantizeLinear of
 * "<base><in_suffix>" with "<base>_scale" and "<base>_zero_point" (when
 * with_zp) into "<base><out_suffix>"; axis >= 0 sets the axis. */
static pr_status_t qdq_node(writer_t *w, const char *op, const char *base, const char *in_suffix,
                            const char *out_suffix, bool with_zp, int axis) {
  char *in = pr__qz_name(base, in_suffix), *out = pr__qz_name(base, out_suffix);
  char *scale = pr__qz_name(base, "_scale"), *zp = pr__qz_name(base, "_zero_point");
  char *name = pr__qz_name(out ? out : "", "_node");
  pr_status_t st = PR_ERR_NOMEM;
  if (in && out && scale && zp && name) {
    const char *ins[3] = {in, scale, zp};
    Onnx__NodeProto *n = pr__qz_node_new(op, name, with_zp ? 3 : 2, ins, 1, (const char **)&out);
    if (n && axis >= 0 && pr__qz_node_set_int(n, "axis", axis)) {
      onnx__node_proto__free_unpacked(n, NULL);
      n = NULL;
    }
    if ((st = emit(w, n)) && n) onnx__node_proto__free_unpacked(n, NULL);
  }
  free(in), free(out), free(scale), free(zp), free(name);
  return st;
}

/* ---- activations ---- */

static const int64_t NO_DIMS[1] = {0};

/* Q and DQ of plan tensor e after its producer; its scale and zero point
 * initializers. */
static pr_status_t act_qdq(writer_t *w, int e) {
  const char *t = w->plan->t[e].name;
  uint8_t zp = (uint8_t)w->zp[e]; /* the byte of a u8 or an s8 */
  pr_status_t st = add_init(w, t, "_scale", PR_DTYPE_FLOAT, 0, NO_DIMS, &w->scale[e], 4);
  if (!st) st = add_init(w, t, "_zero_point", w->o->act_type, 0, NO_DIMS, &zp, 1);
  if (!st) st = qdq_node(w, "QuantizeLinear", t, "", "_quantized", true, -1);
  if (!st) st = qdq_node(w, "DequantizeLinear", t, "_quantized", "_dequantized", true, -1);
  return st;
}

static bool quantized(const writer_t *w, int e) {
  return e >= 0 && w->plan->t[e].refs > 0;
}

/* ---- weights and bias ---- */

/* The base name of op's weights (or bias): the value's name, with the
 * node index when other nodes read it too. */
static char *param_base(writer_t *w, const pr_qz_op_t *op, const char *name) {
  int id = pr__qz_id(&w->ix, name);
  if (id >= 0 && w->ix.uses[id] <= 1) return strdup(name);
  char suffix[32];
  snprintf(suffix, sizeof suffix, "_n%d", op->node);
  return pr__qz_name(name, suffix);
}

/* int8 weights per channel and their DequantizeLinear; the node reads the
 * dequantized weights; their scales into *sw (malloc'd). */
static pr_status_t weights(writer_t *w, const pr_qz_op_t *op, float **sw, int64_t *n_sw) {
  Onnx__NodeProto *n = w->g->node[op->node];
  const char *name = n->input[op->w_input];
  pr_tensor_t *t = NULL;
  pr_status_t st = pr__qz_const_float(&w->ix, name, w->o->base_dir, &t, w->err, w->err_len);
  if (st) return st;
  int64_t outer = 1, inner = 1, ch = t->dims[op->w_axis], numel = pr_tensor_numel(t);
  for (int k = 0; k < t->rank; k++)
    if (k < op->w_axis)
      outer *= t->dims[k];
    else if (k > op->w_axis)
      inner *= t->dims[k];
  int8_t *q = malloc((size_t)numel + 1), *zeros = calloc((size_t)ch + 1, 1);
  char *base = param_base(w, op, name), *dq = base ? pr__qz_name(base, "_dequantized") : NULL;
  *sw = malloc(sizeof(float) * ((size_t)ch + 1));
  *n_sw = ch;
  st = PR_ERR_NOMEM;
  if (q && zeros && base && dq && *sw) {
    pr__qz_weights_s8(t->data, outer, ch, inner, w->o->w_max, q, *sw);
    st = add_init(w, base, "_quantized", PR_DTYPE_INT8, t->rank, t->dims, q, (size_t)numel);
    if (!st) st = add_init(w, base, "_scale", PR_DTYPE_FLOAT, 1, &ch, *sw, sizeof(float) * ch);
    if (!st) st = add_init(w, base, "_zero_point", PR_DTYPE_INT8, 1, &ch, zeros, (size_t)ch);
    if (!st)
      st = qdq_node(w, "DequantizeLinear", base, "_quantized", "_dequantized", true, op->w_axis);
    if (!st) st = pr__qz_node_set_input(n, op->w_input, dq);
  }
  free(q), free(zeros), free(base), free(dq);
  pr_engine_tensor_free(t);
  free(t);
  return st;
}

/* An int32 bias in accumulator units, b / (sx * sw[c]), behind a
 * DequantizeLinear of scale sx * sw[c] (the folding reads the int32). */
static pr_status_t bias(writer_t *w, const pr_qz_op_t *op, const float *sw, int64_t n_sw) {
  Onnx__NodeProto *n = w->g->node[op->node];
  const char *name = n->input[op->bias_input];
  pr_tensor_t *t = NULL;
  pr_status_t st = pr__qz_const_float(&w->ix, name, w->o->base_dir, &t, w->err, w->err_len);
  if (st) return st;
  int64_t count = pr_tensor_numel(t);
  float sx = w->scale[op->act[0]];
  int32_t *q = malloc(sizeof(int32_t) * ((size_t)count + 1));
  float *scale = malloc(sizeof(float) * ((size_t)count + 1));
  char *base = param_base(w, op, name), *dq = base ? pr__qz_name(base, "_dequantized") : NULL;
  st = PR_ERR_NOMEM;
  if (q && scale && base && dq && (n_sw == 1 || n_sw == count)) {
    pr__qz_bias_s32(t->data, count, sx, sw, n_sw, q);
    for (int64_t c = 0; c < count; c++) scale[c] = sx * sw[n_sw > 1 ? c : 0];
    st = add_init(w, base, "_quantized", PR_DTYPE_INT32, 1, &count, q, sizeof(int32_t) * count);
    if (!st) st = add_init(w, base, "_scale", PR_DTYPE_FLOAT, 1, &count, scale, 4 * count);
    if (!st) st = qdq_node(w, "DequantizeLinear", base, "_quantized", "_dequantized", false, 0);
    if (!st) st = pr__qz_node_set_input(n, op->bias_input, dq);
  }
  free(q), free(scale), free(base), free(dq);
  pr_engine_tensor_free(t);
  free(t);
  return st;
}

static pr_status_t op_params(writer_t *w, const pr_qz_op_t *op) {
  if (op->kind == PR_QZ_ADD) return PR_OK;
  float *sw = NULL;
  int64_t n_sw = 0;
  pr_status_t st = weights(w, op, &sw, &n_sw);
  if (!st && op->bias_input >= 0) st = bias(w, op, sw, n_sw);
  free(sw);
  return st;
}

/* ---- the node list ---- */

/* Node i with its inputs read through the DequantizeLinear of each
 * quantized tensor, its op's weights before it, the Q/DQ of its quantized
 * outputs after it. */
static pr_status_t rewrite_node(writer_t *w, int i, const pr_qz_op_t *op) {
  Onnx__NodeProto *n = w->g->node[i];
  pr_status_t st = PR_OK;
  for (size_t k = 0; k < n->n_input && !st; k++) {
    int e = n->input[k][0] ? pr__qz_plan_find(w->plan, n->input[k]) : -1;
    if (!quantized(w, e)) continue;
    char *dq = pr__qz_name(w->plan->t[e].name, "_dequantized");
    st = dq ? pr__qz_node_set_input(n, (int)k, dq) : PR_ERR_NOMEM;
    free(dq);
  }
  if (!st && op && pr__qz_op_live(op)) st = op_params(w, op);
  if (!st) st = emit(w, n);
  if (st) return st;
  for (size_t k = 0; k < n->n_output && !st; k++) {
    int e = n->output[k][0] ? pr__qz_plan_find(w->plan, n->output[k]) : -1;
    if (quantized(w, e)) st = act_qdq(w, e);
  }
  return st;
}

static pr_status_t rewrite_graph(writer_t *w) {
  const pr_qz_plan_t *p = w->plan;
  const pr_qz_op_t **op_of = calloc(w->g->n_node + 1, sizeof *op_of);
  if (!op_of) return PR_ERR_NOMEM;
  for (int k = 0; k < p->n_ops; k++) op_of[p->ops[k].node] = &p->ops[k];
  pr_status_t st = PR_OK;
  for (int e = 0; e < p->n_t && !st; e++)
    if (quantized(w, e) && p->t[e].graph_input) st = act_qdq(w, e);
  size_t i;
  for (i = 0; i < w->g->n_node && !st; i++) st = rewrite_node(w, (int)i, op_of[i]);
  free(op_of);
  if (st) return st;
  free(w->g->node); /* every node is in the new list */
  w->g->node = w->out, w->g->n_node = w->n_out;
  w->out = NULL, w->n_out = 0;
  return PR_OK;
}

pr_status_t pr__qz_prune(Onnx__GraphProto *g) {
  pr_qz_index_t ix;
  bool *drop_node = calloc(g->n_node + 1, sizeof(bool));
  bool *drop_init = calloc(g->n_initializer + 1, sizeof(bool));
  if (!drop_node || !drop_init || pr__qz_index_build(&ix, g)) {
    free(drop_node), free(drop_init);
    return PR_ERR_NOMEM;
  }
  /* decided first, freed after: the index borrows the names */
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    int id = n->n_output == 1 ? pr__qz_id(&ix, n->output[0]) : -1;
    drop_node[i] = !strcmp(n->op_type, "Constant") && id >= 0 && !ix.uses[id] && !ix.is_output[id];
  }
  for (size_t i = 0; i < g->n_initializer; i++) {
    const char *name = g->initializer[i]->name;
    int id = pr__qz_id(&ix, name);
    bool listed = false; /* an initializer that is also a graph input stays */
    for (size_t k = 0; k < g->n_input && !listed; k++) listed = !strcmp(g->input[k]->name, name);
    drop_init[i] = id >= 0 && !ix.uses[id] && !ix.is_output[id] && !listed;
  }
  pr__qz_index_free(&ix);
  size_t kept = 0;
  for (size_t i = 0; i < g->n_node; i++)
    if (drop_node[i])
      onnx__node_proto__free_unpacked(g->node[i], NULL);
    else
      g->node[kept++] = g->node[i];
  g->n_node = kept;
  kept = 0;
  for (size_t i = 0; i < g->n_initializer; i++)
    if (drop_init[i])
      onnx__tensor_proto__free_unpacked(g->initializer[i], NULL);
    else
      g->initializer[kept++] = g->initializer[i];
  g->n_initializer = kept;
  free(drop_node), free(drop_init);
  return PR_OK;
}

/* tp's external data read into raw_data: the written model lives in
 * another folder, where the model's data files are not. */
static pr_status_t inline_external(Onnx__TensorProto *tp, const char *base_dir, char *err,
                                   size_t err_len) {
  if (!tp->has_data_location || tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return PR_OK;
  pr_tensor_t *t;
  pr_status_t st = pr__tensor_from_proto(tp, base_dir, &t, err, err_len);
  if (st) return st;
  size_t nbytes = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
  uint8_t *raw = malloc(nbytes ? nbytes : 1);
  if (raw) {
    memcpy(raw, t->data, nbytes);
    for (size_t k = 0; k < tp->n_external_data; k++)
      onnx__string_string_entry_proto__free_unpacked(tp->external_data[k], NULL);
    free(tp->external_data);
    tp->external_data = NULL, tp->n_external_data = 0;
    tp->has_data_location = 0, tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    free(tp->raw_data.data);
    tp->has_raw_data = 1, tp->raw_data.data = raw, tp->raw_data.len = nbytes;
  }
  pr_engine_tensor_free(t);
  free(t);
  return raw ? PR_OK : PR_ERR_NOMEM;
}

pr_status_t pr__qz_inline_all(Onnx__GraphProto *g, const char *base_dir, char *err,
                              size_t err_len) {
  pr_status_t st = PR_OK;
  for (size_t i = 0; i < g->n_initializer && !st; i++)
    st = inline_external(g->initializer[i], base_dir, err, err_len);
  for (size_t i = 0; i < g->n_node && !st; i++) {
    const Onnx__AttributeProto *a = pr__qz_attr(g->node[i], "value");
    if (a && a->t && !strcmp(g->node[i]->op_type, "Constant"))
      st = inline_external(a->t, base_dir, err, err_len);
  }
  return st;
}

pr_status_t pr__qz_write_qdq(Onnx__ModelProto *mp, const pr_qz_plan_t *plan,
                             const pr_qz_write_options_t *o, char *err, size_t err_len) {
  writer_t w = {.g = mp->graph, .plan = plan, .o = o, .err = err, .err_len = err_len};
  if (pr__qz_index_build(&w.ix, w.g)) return PR_ERR_NOMEM;
  w.scale = calloc((size_t)plan->n_t + 1, sizeof *w.scale);
  w.zp = calloc((size_t)plan->n_t + 1, sizeof *w.zp);
  pr_status_t st = w.scale && w.zp ? PR_OK : PR_ERR_NOMEM;
  for (int e = 0; e < plan->n_t && !st; e++) {
    float lo, hi;
    pr__qz_range_get(&plan->t[e].range, o->percentile, &lo, &hi);
    pr__qz_act_params(lo, hi, o->act_type, &w.scale[e], &w.zp[e]);
    if (plan->t[e].refs > 0)
      pr__log(PR_LOG_DEBUG, "quantize: %s in [%g, %g] (measured [%g, %g]): scale %g, zero point %d",
              plan->t[e].name, lo, hi, plan->t[e].range.min, plan->t[e].range.max, w.scale[e],
              (int)w.zp[e]);
  }
  if (!st) st = rewrite_graph(&w);
  if (st) { /* the graph keeps its own nodes; the new ones go */
    for (size_t k = 0; k < w.n_out; k++) {
      bool original = false;
      for (size_t i = 0; i < w.g->n_node && !original; i++) original = w.g->node[i] == w.out[k];
      if (!original) onnx__node_proto__free_unpacked(w.out[k], NULL);
    }
  }
  free(w.out), free(w.scale), free(w.zp);
  pr__qz_index_free(&w.ix);
  if (!st) st = pr__qz_prune(mp->graph);
  if (!st) st = pr__qz_inline_all(mp->graph, o->base_dir, err, err_len);
  if (st == PR_ERR_NOMEM) pr__errf(err, err_len, "out of memory writing the quantized model");
  return st;
}
