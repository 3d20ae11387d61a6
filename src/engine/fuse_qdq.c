/* QDQ folding: a quantized model written as float operators between
 * DequantizeLinear and QuantizeLinear nodes (ONNX Runtime's QDQ format)
 * becomes int8 kernels.
 *
 *   x_q -> DequantizeLinear -> Conv(DequantizeLinear(W_q), B) [-> Relu]
 *       -> QuantizeLinear -> y_q
 * becomes one QLinearConv (qconv.c) reading x_q and writing y_q, with the
 * requantization as oneDNN output scales and zero points and the Relu as a
 * post-op; MatMul (constant 2-D weights, with a bias Add) and Gemm (transA
 * 0, alpha 1) become a QLinearMatMul (qmatmul.c) with a bias input.
 *
 * Notes on the design:
 * - Constant folding has already turned DequantizeLinear(W_q) into a float
 *   constant; its node is dead but still in the list, so the int8 weights,
 *   scale and zero point are found through the constant's producer.
 * - A bias that is DequantizeLinear(int32) with zero points 0 and scale
 *   x_scale * w_scale (as exporters write it) is taken as its int32 values
 *   (ONNX Runtime's MatMul + Add fusion takes one so whatever its scale); any
 *   other becomes float values in accumulator units, b / (x_scale *
 *   w_scale). Either is one value per output column or channel: a bias
 *   that broadcasts otherwise (a Gemm's C of [M, 1]) is not fused.
 * - Matched only when the float intermediates (the Conv's output, the
 *   Relu's) have their single consumer inside the pattern and are not graph
 *   outputs, the parameters are constant, x_scale, x_zp, y_scale and y_zp
 *   are per tensor, and the weights' scale is per tensor or per output
 *   channel. Anything else stays as it is, which computes the same values
 *   in float (tests/unit/test_fuse_qdq.c). */
#include "engine/fuse.h"

#include <string.h>

#include "engine/compile.h"
#include "engine/ops/ops.h"
#include "engine/ops/quant_util.h"

/* The parameters of a DequantizeLinear: its input, scale, zero point. */
typedef struct {
  int q, scale, zp;
  int64_t count; /* elements of the scale */
  int axis;      /* normalized axis of a per-channel scale */
} qdq_t;

static bool is_op(const pr_node_t *n, const char *op) {
  return !strcmp(n->op->name, op);
}

static bool const_or_absent(pr_compile_t *c, int v) {
  return v < 0 || c->v[v].is_const;
}

/* DequantizeLinear node k's parameters, when they are constant (its input
 * too when want_const_input). */
static bool dq_params(pr_compile_t *c, int k, bool want_const_input, qdq_t *d) {
  const pr_node_t *n = &c->nodes[k];
  if (!is_op(n, "DequantizeLinear")) return false;
  d->q = n->in[0];
  d->scale = n->in[1];
  d->zp = n->n_in > 2 ? n->in[2] : -1;
  if (!c->v[d->scale].is_const || !const_or_absent(c, d->zp)) return false;
  if (want_const_input && !c->v[d->q].is_const) return false;
  d->count = pr__value_numel(&c->v[d->scale]);
  const pr_value_t *q = &c->v[d->q];
  d->axis = d->count > 1 ? pr__axis(pr__attr_int(n->m, "axis", 1), q->rank) : -1;
  return true;
}

/* The live DequantizeLinear producing activation `value` (per tensor, of
 * an 8-bit type), or false. */
static bool act_dq(pr_compile_t *c, int value, qdq_t *d) {
  int p = c->v[value].producer;
  if (p < 0 || p >= c->n_nodes || c->nodes[p].dead || !dq_params(c, p, false, d)) return false;
  return d->count == 1 && pr__is_q8(c->v[d->q].dtype);
}

/* The folded DequantizeLinear of constant `value` (the weights or bias). */
static bool const_dq(pr_compile_t *c, int value, qdq_t *d) {
  int p = c->v[value].producer;
  return value >= 0 && c->v[value].is_const && p >= 0 && p < c->n_nodes && c->nodes[p].dead &&
         dq_params(c, p, true, d);
}

/* The QuantizeLinear that ends the pattern from `value` (through one Relu,
 * appended to relu): its index, or -1. */
static int end_q(pr_compile_t *c, int value, int from, int *relu) {
  *relu = -1;
  int k = pr__fuse_only_consumer(c, value, from);
  if (k >= 0 && is_op(&c->nodes[k], "Relu")) {
    *relu = k;
    k = pr__fuse_only_consumer(c, c->nodes[k].out[0], k);
  }
  if (k < 0 || !is_op(&c->nodes[k], "QuantizeLinear")) return -1;
  const pr_node_t *q = &c->nodes[k];
  int zp = q->n_in > 2 ? q->in[2] : -1;
  if (!c->v[q->in[1]].is_const || pr__value_numel(&c->v[q->in[1]]) != 1 || !const_or_absent(c, zp))
    return -1;
  return k;
}

/* A new constant of dtype and shape, its data copied from data (NULL:
 * zeros); its index or -1. */
static int new_const(pr_compile_t *c, pr_dtype_t t, int rank, const int64_t *dims,
                     const void *data) {
  int idx = pr__compile_add_value(c);
  if (idx < 0) return -1;
  pr_value_t *v = &c->v[idx];
  pr__value_set_shape(v, t, rank, dims);
  v->nbytes = (size_t)pr__value_numel(v) * pr_dtype_size(t);
  if (!(v->data = calloc(1, v->nbytes ? v->nbytes : 1))) return -1;
  if (data) memcpy(v->data, data, v->nbytes);
  v->is_const = v->owns_data = true;
  v->kind = PR_VAL_CONST;
  return idx;
}

/* Whether constant `b` of N values is a folded DequantizeLinear of int32
 * values that are the bias in accumulator units: zero points 0 and scale
 * sx * sw[j] (as the float product: what exporters write, and what ONNX
 * Runtime's QDQ fusion assumes without checking); *q its int32 value. */
static bool int32_bias(pr_compile_t *c, int b, int64_t N, float sx, int sw, int *q) {
  qdq_t d;
  if (!const_dq(c, b, &d) || c->v[d.q].dtype != PR_DTYPE_INT32 || c->v[d.q].rank != 1 ||
      c->v[d.q].dims[0] != N)
    return false;
  const float *bs = c->v[d.scale].data, *swf = c->v[sw].data;
  int64_t nsw = pr__value_numel(&c->v[sw]);
  for (int64_t j = 0; j < N; j++) {
    if (d.zp >= 0 && pr__zp_at(c->v[d.zp].data, PR_DTYPE_INT32, d.count > 1 ? j : 0)) return false;
    if (bs[d.count > 1 ? j : 0] != sx * swf[nsw > 1 ? j : 0]) return false;
  }
  *q = d.q;
  return true;
}

/* The bias input of the fused kernel from constant `b` of N values along
 * its last axis, one per output column or channel (-1: none): the int32
 * of a folded DequantizeLinear (int32_bias), else b / (sx * sw[j]) as
 * float, times beta (Gemm's). Returns -2 on failure, and for a b that
 * broadcasts otherwise (a Gemm's C of [M, 1] with M == N is per row). */
static int fused_bias(pr_compile_t *c, int b, int64_t N, float sx, int sw, float beta) {
  if (b < 0) return -1;
  const pr_value_t *bv = &c->v[b];
  if (pr__value_numel(bv) != N || (bv->rank && bv->dims[bv->rank - 1] != N)) return -2;
  int q;
  if (beta == 1.f && int32_bias(c, b, N, sx, sw, &q)) return q;
  if (bv->dtype != PR_DTYPE_FLOAT) return -2;
  int idx = new_const(c, PR_DTYPE_FLOAT, 1, &N, NULL);
  if (idx < 0) return -2;
  const float *bf = c->v[b].data, *swf = c->v[sw].data;
  int64_t nsw = pr__value_numel(&c->v[sw]);
  float *out = c->v[idx].data;
  for (int64_t j = 0; j < N; j++) out[j] = beta * bf[j] / (sx * swf[nsw > 1 ? j : 0]);
  return idx;
}

/* Replaces node q (the QuantizeLinear) by the fused kernel op with inputs
 * ins[0..8] and the model node m (attributes, weight cache); the nodes in
 * dead[] go. */
static pr_status_t replace(pr_compile_t *c, int qi, const pr_op_t *op, const pr_mnode_t *m,
                           const int *ins, int relu, const int *dead, int n_dead) {
  pr_node_t fused = {.op = op, .m = m};
  int out = c->nodes[qi].out[0];
  if (pr__node_io(c, &fused, 9, ins, 1, &out)) return PR_ERR_NOMEM;
  if (relu >= 0) {
    fused.post.n_eltwise = 1;
    fused.post.alg[0] = dnnl_eltwise_relu;
  }
  for (int k = 0; k < n_dead; k++)
    if (dead[k] >= 0) c->nodes[dead[k]].dead = true;
  c->nodes[qi] = fused;
  c->v[out].producer = qi;
  return PR_OK;
}

/* ---- Conv ---- */

static pr_status_t fold_conv(pr_compile_t *c, int ci) {
  pr_node_t *conv = &c->nodes[ci];
  qdq_t x, w;
  if (!act_dq(c, conv->in[0], &x) || !const_dq(c, conv->in[1], &w)) return PR_OK;
  const pr_value_t *wq = &c->v[w.q];
  if (!pr__is_q8(wq->dtype) || (w.count > 1 && (w.axis != 0 || w.count != wq->dims[0])))
    return PR_OK;
  int relu, qi = end_q(c, conv->out[0], ci, &relu);
  if (qi < 0) return PR_OK;
  const pr_node_t *q = &c->nodes[qi];
  int64_t M = wq->dims[0];
  float sx = *(const float *)c->v[x.scale].data;
  int b = conv->n_in > 2 ? conv->in[2] : -1;
  int bias = fused_bias(c, b, M, sx, w.scale, 1.f);
  if (bias == -2) return PR_OK;
  conv = &c->nodes[ci]; /* fused_bias may have moved nothing, but re-read */
  int ins[9] = {x.q, x.scale, x.zp, w.q, w.scale, w.zp, q->in[1], q->n_in > 2 ? q->in[2] : -1,
                bias};
  int dead[] = {ci, relu};
  return replace(c, qi, &pr__op_qlinear_conv, conv->m, ins, relu, dead, 2);
}

/* ---- MatMul and Gemm ---- */

/* Constant weights w [K, N] (transposed from [N, K] when trans) as an
 * 8-bit value of [K, N], scale per tensor or per column; the value's index
 * in *wq, or false. */
static bool matmul_weights(pr_compile_t *c, int value, bool trans, qdq_t *w, int *wq) {
  if (!const_dq(c, value, w)) return false;
  const pr_value_t *v = &c->v[w->q];
  if (!pr__is_q8(v->dtype) || v->rank != 2) return false;
  int n_axis = trans ? 0 : 1;
  if (w->count > 1 && (w->axis != n_axis || w->count != v->dims[n_axis])) return false;
  *wq = w->q;
  if (!trans) return true;
  int64_t N = v->dims[0], K = v->dims[1], d[2] = {K, N};
  int idx = new_const(c, v->dtype, 2, d, NULL);
  if (idx < 0) return false;
  const uint8_t *src = c->v[w->q].data;
  uint8_t *dst = c->v[idx].data;
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < N; j++) dst[k * N + j] = src[j * K + k];
  *wq = idx;
  return true;
}

/* After a MatMul: an Add of a constant of N values (the bias); its node
 * index and the constant, or -1. */
static int bias_add(pr_compile_t *c, int mi, int64_t N, int *b) {
  int out = c->nodes[mi].out[0], k = pr__fuse_only_consumer(c, out, mi);
  if (k < 0 || !is_op(&c->nodes[k], "Add")) return -1;
  const pr_node_t *a = &c->nodes[k];
  int other = a->in[0] == out ? a->in[1] : a->in[0];
  const pr_value_t *v = &c->v[other], *o = &c->v[out];
  if (other == out || !v->is_const || pr__value_numel(v) != N || v->rank > o->rank ||
      (v->rank && v->dims[v->rank - 1] != N))
    return -1;
  *b = other;
  return k;
}

static pr_status_t fold_matmul(pr_compile_t *c, int mi) {
  const pr_node_t *mm = &c->nodes[mi];
  bool gemm = is_op(mm, "Gemm");
  bool trans = gemm && pr__attr_int(mm->m, "transB", 0);
  float beta = gemm ? pr__attr_float(mm->m, "beta", 1.f) : 1.f;
  if (gemm && (pr__attr_int(mm->m, "transA", 0) || pr__attr_float(mm->m, "alpha", 1.f) != 1.f))
    return PR_OK;
  qdq_t a, w;
  int wq, b = gemm && mm->n_in > 2 ? mm->in[2] : -1, ai = -1;
  if (!act_dq(c, mm->in[0], &a) || c->v[a.q].rank < 2) return PR_OK;
  if (!matmul_weights(c, mm->in[1], trans, &w, &wq)) return PR_OK;
  int64_t N = c->v[wq].dims[1];
  if (b >= 0 && !c->v[b].is_const) return PR_OK;
  int last = mi;
  if (!gemm && (ai = bias_add(c, mi, N, &b)) >= 0) last = ai;
  int relu, qi = end_q(c, c->nodes[last].out[0], last, &relu);
  if (qi < 0) return PR_OK;
  float sx = *(const float *)c->v[a.scale].data;
  int bias = fused_bias(c, b, N, sx, w.scale, beta);
  if (bias == -2) return PR_OK;
  const pr_node_t *q = &c->nodes[qi];
  int ins[9] = {a.q, a.scale, a.zp, wq, w.scale, w.zp, q->in[1], q->n_in > 2 ? q->in[2] : -1, bias};
  int dead[] = {mi, ai, relu};
  return replace(c, qi, &pr__op_qlinear_matmul, c->nodes[mi].m, ins, relu, dead, 3);
}

/* ---- Add: DequantizeLinear(a) + DequantizeLinear(b) [-> Relu] ->
 * QuantizeLinear, a and b of one shape and 8-bit type ---- */

static pr_status_t fold_add(pr_compile_t *c, int ai) {
  const pr_node_t *add = &c->nodes[ai];
  qdq_t a, b;
  if (add->n_in != 2 || add->in[0] == add->in[1] || !act_dq(c, add->in[0], &a) ||
      !act_dq(c, add->in[1], &b))
    return PR_OK;
  const pr_value_t *va = &c->v[a.q], *vb = &c->v[b.q], *o = &c->v[add->out[0]];
  if (va->rank != o->rank || vb->rank != o->rank) return PR_OK;
  for (int k = 0; k < o->rank; k++)
    if (va->dims[k] != o->dims[k] || vb->dims[k] != o->dims[k]) return PR_OK;
  int relu, qi = end_q(c, add->out[0], ai, &relu);
  if (qi < 0) return PR_OK;
  const pr_node_t *q = &c->nodes[qi];
  pr_dtype_t t = c->v[q->out[0]].dtype;
  if (va->dtype != t || vb->dtype != t) return PR_OK; /* one type, one layout for all three */
  pr_node_t fused = {.op = &pr__op_qlinear_add, .m = add->m};
  int ins[8] = {a.q, a.scale, a.zp, b.q, b.scale, b.zp, q->in[1], q->n_in > 2 ? q->in[2] : -1};
  int out = q->out[0];
  if (pr__node_io(c, &fused, 8, ins, 1, &out)) return PR_ERR_NOMEM;
  if (relu >= 0) {
    fused.post.n_eltwise = 1;
    fused.post.alg[0] = dnnl_eltwise_relu;
    c->nodes[relu].dead = true;
  }
  c->nodes[ai].dead = true;
  c->nodes[qi] = fused;
  c->v[out].producer = qi;
  return PR_OK;
}

/* ---- DequantizeLinear -> element-wise float nodes -> QuantizeLinear:
 * one table lookup (QLookup, quant.c). An 8-bit input has 256 values, so
 * the chain's answer for each is computed here, once, with the nodes' own
 * float code (the dequantization and quantization as quant.c computes
 * them): the same bytes as running the nodes, in one pass over bytes in
 * any layout instead of a float pass (and reorders) per node. PaddleOCR's
 * scale, bias and written-out HardSwish between each pair of
 * convolutions. ---- */

#define LUT_MAX_CHAIN 16

/* n (Mul, Add, Sub or Div of x by a constant float scalar) on v[0..len) in
 * place, in the operands' order; false when n is not one. */
static bool eval_scalar_binary(pr_compile_t *c, const pr_node_t *n, int x, float *v, int64_t len) {
  float s;
  const char *op = n->op->name;
  if (n->n_in != 2 || n->in[0] == n->in[1] || c->v[x].dtype != PR_DTYPE_FLOAT) return false;
  bool first = n->in[0] == x;
  if (!pr__fuse_scalar_const(c, n->in[first ? 1 : 0], &s)) return false;
  if (!strcmp(op, "Mul"))
    for (int64_t i = 0; i < len; i++) v[i] = first ? v[i] * s : s * v[i];
  else if (!strcmp(op, "Add"))
    for (int64_t i = 0; i < len; i++) v[i] = first ? v[i] + s : s + v[i];
  else if (!strcmp(op, "Sub"))
    for (int64_t i = 0; i < len; i++) v[i] = first ? v[i] - s : s - v[i];
  else if (!strcmp(op, "Div"))
    for (int64_t i = 0; i < len; i++) v[i] = first ? v[i] / s : s / v[i];
  else
    return false;
  return true;
}

/* The input of chain node n that carries the activation: the one that is
 * not a constant. */
static int chain_input(pr_compile_t *c, const pr_node_t *n) {
  if (n->n_in == 2 && n->in[0] >= 0 && c->v[n->in[0]].is_const) return n->in[1];
  return n->in[0];
}

static pr_status_t fold_lut(pr_compile_t *c, int qi) {
  const pr_node_t *q = &c->nodes[qi];
  int yzp = q->n_in > 2 ? q->in[2] : -1;
  pr_dtype_t yt = c->v[q->out[0]].dtype;
  if (!pr__is_q8(yt) || !c->v[q->in[1]].is_const || pr__value_numel(&c->v[q->in[1]]) != 1 ||
      !const_or_absent(c, yzp) || c->v[q->in[0]].dtype != PR_DTYPE_FLOAT)
    return PR_OK;
  /* from the QuantizeLinear back to a DequantizeLinear, each value read
   * only by the next node */
  int chain[LUT_MAX_CHAIN], n = 0, v = q->in[0], reader = qi;
  qdq_t x;
  while (!act_dq(c, v, &x)) {
    int p = c->v[v].producer;
    if (p < 0 || p >= c->n_nodes || c->nodes[p].dead || n == LUT_MAX_CHAIN ||
        pr__fuse_only_consumer(c, v, p) != reader)
      return PR_OK;
    chain[n++] = reader = p;
    v = chain_input(c, &c->nodes[p]);
    if (v < 0) return PR_OK;
  }
  int dq = c->v[v].producer;
  /* each 8-bit input through the chain */
  float vals[256], sx = *(const float *)c->v[x.scale].data;
  pr_dtype_t xt = c->v[x.q].dtype;
  int32_t xzp = pr__zp_at(x.zp >= 0 ? c->v[x.zp].data : NULL, xt, 0);
  for (int j = 0; j < 256; j++) {
    int32_t qv = xt == PR_DTYPE_UINT8 ? j : (int8_t)(uint8_t)j;
    vals[j] = (float)(qv - xzp) * sx;
  }
  for (int k = n - 1; k >= 0; k--) {
    const pr_node_t *e = &c->nodes[chain[k]];
    int in = k == n - 1 ? v : c->nodes[chain[k + 1]].out[0];
    if (e->n_out != 1 ||
        (!eval_scalar_binary(c, e, in, vals, 256) && !pr__unary_eval(c, e, vals, 256)))
      return PR_OK;
  }
  float sy = *(const float *)c->v[q->in[1]].data, lo, hi;
  float zy = (float)pr__zp_at(yzp >= 0 ? c->v[yzp].data : NULL, yt, 0);
  pr__q8_range(yt, &lo, &hi);
  uint8_t table[256];
  for (int j = 0; j < 256; j++) {
    int t = (int)pr__quantize(vals[j] / sy, zy, lo, hi);
    table[j] = yt == PR_DTYPE_UINT8 ? (uint8_t)t : (uint8_t)(int8_t)t;
  }
  int64_t dims = 256;
  int tbl = new_const(c, yt, 1, &dims, table);
  if (tbl < 0) return PR_ERR_NOMEM;
  pr_node_t fused = {.op = &pr__op_qlookup, .m = c->nodes[qi].m};
  int ins[2] = {x.q, tbl}, out = c->nodes[qi].out[0];
  if (pr__node_io(c, &fused, 2, ins, 1, &out)) return PR_ERR_NOMEM;
  for (int k = 0; k < n; k++) c->nodes[chain[k]].dead = true;
  if (c->v[v].n_uses == 1 && !c->v[v].is_graph_output) c->nodes[dq].dead = true;
  c->nodes[qi] = fused;
  c->v[out].producer = qi;
  return PR_OK;
}

pr_status_t pr__fuse_qdq(pr_compile_t *c) {
  pr_status_t st = PR_OK;
  for (int i = 0; i < c->n_nodes && !st; i++) {
    const pr_node_t *n = &c->nodes[i];
    if (n->dead) continue;
    if (is_op(n, "Conv") && !n->pad_fused)
      st = fold_conv(c, i);
    else if (is_op(n, "MatMul") || is_op(n, "Gemm"))
      st = fold_matmul(c, i);
    else if (is_op(n, "Add"))
      st = fold_add(c, i);
  }
  pr__compile_count_uses(c);
  /* then the QuantizeLinear nodes no int8 kernel took */
  for (int i = 0; i < c->n_nodes && !st; i++)
    if (!c->nodes[i].dead && is_op(&c->nodes[i], "QuantizeLinear")) st = fold_lut(c, i);
  pr__compile_count_uses(c);
  return st;
}
