/* Graph fusions. CNNs: BatchNormalization folded into Conv weights,
 * activations and the residual Add as oneDNN post-ops of the Conv, a zero
 * Pad taken over by the Conv or AveragePool. Transformers: decomposed
 * LayerNorm and GELU subgraphs and scaled-dot-product attention into single
 * kernels, and bias Add, activation and residual Add into the linear MatMul.
 *
 * Notes on the design: a pattern is fused only when every intermediate has
 * its single consumer inside the pattern and is not a graph output
 * (only_consumer), and the operands that become kernel parameters are
 * constants; otherwise the nodes stay as they are (tests/unit/test_fuse.c). */
#include "engine/fuse.h"
#include "engine/compile.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"

static bool all_const(pr_compile_t *c, const pr_node_t *n, int from, int to) {
  for (int k = from; k < to; k++)
    if (k >= n->n_in || n->in[k] < 0 || !c->v[n->in[k]].is_const) return false;
  return true;
}

/* Conv(W, B) -> BN(scale, bias, mean, var): the conv folds the BN into its
 * weights and bias when it prepares them (once per model, shared). */
static pr_status_t fold_bn(pr_compile_t *c, pr_node_t *conv, pr_node_t *bn) {
  if (!all_const(c, conv, 1, conv->n_in) || !all_const(c, bn, 1, 5)) return PR_OK;
  if (pr__attr_int(bn->m, "training_mode", 0)) return PR_OK; /* batch statistics */
  conv->bn = bn->m;
  for (int k = 0; k < 4; k++) conv->bn_in[k] = bn->in[k + 1];
  conv->out[0] = bn->out[0];
  bn->dead = true;
  return PR_OK;
}

/* A float Clip's constant bounds (attributes before opset 11, inputs from
 * 11); false when a bound is not constant, or when lo > hi (Clip gives hi
 * there; oneDNN's clip_v2 post-op gives lo where x < lo). */
static bool clip_bounds(pr_compile_t *c, const pr_node_t *clip, float *lo, float *hi) {
  *lo = -INFINITY, *hi = INFINITY;
  if (c->opset < 11) {
    *lo = pr__attr_float(clip->m, "min", -3.402823e+38f);
    *hi = pr__attr_float(clip->m, "max", 3.402823e+38f);
    return *lo <= *hi;
  }
  for (int k = 1; k < clip->n_in; k++) {
    if (clip->in[k] < 0) continue;
    const pr_value_t *b = &c->v[clip->in[k]];
    if (!b->is_const || b->dtype != PR_DTYPE_FLOAT || pr__value_numel(b) != 1) return false;
    *(k == 1 ? lo : hi) = *(const float *)b->data;
  }
  return *lo <= *hi;
}

static int other_input(const pr_node_t *n, int value);

/* n applied to x is a*x + b with a constant float scalar (Mul, Add, Sub, or
 * Div with x the numerator): PaddleOCR's learnable scale and bias layers. */
static bool scalar_linear(pr_compile_t *c, const pr_node_t *n, int x, float *a, float *b) {
  const char *op = n->op->name;
  float s;
  if (n->n_in != 2 || c->v[x].dtype != PR_DTYPE_FLOAT ||
      !pr__fuse_scalar_const(c, other_input(n, x), &s))
    return false;
  bool first = n->in[0] == x;
  if (!strcmp(op, "Mul"))
    *a = s, *b = 0;
  else if (!strcmp(op, "Add"))
    *a = 1, *b = s;
  else if (!strcmp(op, "Sub"))
    *a = first ? 1.f : -1.f, *b = first ? -s : s;
  else if (!strcmp(op, "Div") && first && s != 0.f)
    *a = 1.f / s, *b = 0;
  else
    return false;
  return true;
}

/* Appends eltwise post-ops alg/alpha/beta[0..cnt) to p; false, p as it
 * was, when they cannot join. A linear one right after a linear one (no sum
 * between) folds into it: a2 (a1 x + b1) + b2. oneDNN 2.6's jit kernels
 * keep one eltwise injector per algorithm (jit_uni_postops_injector's map
 * is keyed by the algorithm), so a second post-op of an algorithm already
 * there runs with the first one's alpha and beta: a Mul by a scalar then a
 * HardSigmoid (two linear), LeakyRelu then Relu, two Clips with other
 * bounds answered wrong. Such a post-op is refused unless its parameters
 * are the same. */
static bool append_post(pr_post_t *p, const dnnl_alg_kind_t *alg, const float *alpha,
                        const float *beta, int cnt) {
  pr_post_t q = *p;
  for (int i = 0; i < cnt; i++) {
    int last = q.n_eltwise - 1, at = q.n_eltwise;
    float a = alpha[i], b = beta[i];
    if (alg[i] == dnnl_eltwise_linear && last >= 0 && q.alg[last] == dnnl_eltwise_linear &&
        !(q.sum && q.sum_before > last)) {
      at = last;
      b = a * q.beta[last] + b;
      a *= q.alpha[last];
    } else if (q.n_eltwise == PR_MAX_POST) {
      return false;
    }
    for (int k = 0; k < q.n_eltwise; k++)
      if (k != at && q.alg[k] == alg[i] && (q.alpha[k] != a || q.beta[k] != b)) return false;
    q.alg[at] = alg[i], q.alpha[at] = a, q.beta[at] = b;
    if (at == q.n_eltwise) q.n_eltwise++;
  }
  *p = q;
  return true;
}

/* Activation consumer -> eltwise post-ops; returns true when fused. */
static bool fuse_act(pr_compile_t *c, pr_node_t *conv, pr_node_t *act) {
  pr_post_t *p = &conv->post;
  const char *op = act->op->name;
  dnnl_alg_kind_t alg[2];
  float alpha[2] = {0, 0}, beta[2] = {0, 0};
  int cnt = 1;
  if (!strcmp(op, "Relu"))
    alg[0] = dnnl_eltwise_relu;
  else if (!strcmp(op, "LeakyRelu"))
    alg[0] = dnnl_eltwise_relu, alpha[0] = pr__attr_float(act->m, "alpha", 0.01f);
  else if (!strcmp(op, "Sigmoid"))
    alg[0] = dnnl_eltwise_logistic;
  else if (!strcmp(op, "Tanh"))
    alg[0] = dnnl_eltwise_tanh;
  else if (!strcmp(op, "HardSwish"))
    alg[0] = dnnl_eltwise_hardswish;
  else if (!strcmp(op, "GeluErf"))
    alg[0] = dnnl_eltwise_gelu_erf;
  else if (!strcmp(op, "GeluTanh"))
    alg[0] = dnnl_eltwise_gelu_tanh;
  else if (!strcmp(op, "SiLU"))
    alg[0] = dnnl_eltwise_swish, alpha[0] = 1.f;
  else if (!strcmp(op, "HardSigmoid")) {
    alg[0] = dnnl_eltwise_linear, alpha[0] = pr__attr_float(act->m, "alpha", 0.2f);
    beta[0] = pr__attr_float(act->m, "beta", 0.5f);
    alg[1] = dnnl_eltwise_clip_v2, alpha[1] = 0.f, beta[1] = 1.f;
    cnt = 2;
  } else if (!strcmp(op, "Clip") && c->v[act->in[0]].dtype == PR_DTYPE_FLOAT) {
    float lo, hi;
    if (!clip_bounds(c, act, &lo, &hi)) return false;
    alg[0] = dnnl_eltwise_clip_v2, alpha[0] = lo, beta[0] = hi;
  } else if (scalar_linear(c, act, conv->out[0], &alpha[0], &beta[0])) {
    /* first, or after a linear post-op (folded into it): oneDNN 2.6's
     * depthwise kernels answer wrong for a linear post-op after another
     * kind (seen with HardSwish then linear) */
    int last = p->n_eltwise - 1;
    if (last >= 0 && p->alg[last] != dnnl_eltwise_linear) return false;
    alg[0] = dnnl_eltwise_linear;
  } else {
    return false;
  }
  if (!append_post(p, alg, alpha, beta, cnt)) return false;
  conv->out[0] = act->out[0];
  act->dead = true;
  return true;
}

static int other_input(const pr_node_t *n, int value);

static bool same_shape(const pr_value_t *a, const pr_value_t *b) {
  if (a->rank != b->rank || a->dtype != b->dtype) return false;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return false;
  return true;
}

/* Add(conv_out, other) -> conv with a sum post-op; the conv moves to the Add's
 * place when `other` is computed after it. Returns the conv's new index. */
static int fuse_add(pr_compile_t *c, int ci, int ai) {
  pr_node_t *conv = &c->nodes[ci], *add = &c->nodes[ai];
  if (conv->post.sum || conv->n_in > 3) return ci; /* X, W[, B]: room for B and the addend */
  if (!strcmp(conv->op->name, "Conv") && pr__conv_window_in_padding(c, conv)) return ci;
  int mine = conv->out[0];
  int other = add->in[0] == mine ? add->in[1] : add->in[0];
  if (other == mine || !same_shape(&c->v[other], &c->v[mine])) return ci;
  conv->post.sum = true;
  conv->post.sum_before = conv->post.n_eltwise;
  if (conv->n_in < 3) conv->in[2] = -1, conv->n_in = 3;
  assert(conv->n_in <= 3 + PR_NODE_SPARE_IN - 2);
  conv->in[conv->n_in++] = other;
  conv->out[0] = add->out[0];
  pr_node_t moved = *conv;
  conv->dead = true;
  conv->state = NULL;
  *add = moved;
  return ai;
}

/* Add(matmul_out, constant of N values along the last axis) -> the linear
 * MatMul's bias; only before any other post-op. Returns true when fused. */
static bool fuse_bias(pr_compile_t *c, pr_node_t *mm, pr_node_t *add) {
  if (mm->n_in > 2 || mm->post.n_eltwise || mm->post.sum) return false;
  int mine = mm->out[0], other = other_input(add, mine);
  const pr_value_t *b = &c->v[other], *o = &c->v[mine];
  int64_t N = o->dims[o->rank - 1];
  if (other == mine || !b->is_const || b->dtype != PR_DTYPE_FLOAT || pr__value_numel(b) != N ||
      b->rank > o->rank || (b->rank && b->dims[b->rank - 1] != N) ||
      !same_shape(&c->v[add->out[0]], o))
    return false;
  mm->in[2] = other;
  mm->n_in = 3;
  mm->out[0] = add->out[0];
  add->dead = true;
  return true;
}

/* Pad(constant 0, spatial dims only) -> Conv or AveragePool: the kernel pads. */
static void fuse_pad(pr_compile_t *c, int pi) {
  pr_node_t *pad = &c->nodes[pi];
  pr_value_t *x = &c->v[pad->in[0]];
  int rank = x->rank, sp = rank - 2;
  if (sp < 1 || sp > 3 || x->dtype != PR_DTYPE_FLOAT) return;
  if (strcmp(pr__attr_string(pad->m, "mode", "constant"), "constant")) return;
  int64_t pads[2 * PR_MAX_RANK];
  if (c->opset < 11) {
    const int64_t *p;
    if (pr__attr_ints(pad->m, "pads", &p) != 2 * rank ||
        pr__attr_float(pad->m, "value", 0.f) != 0.f)
      return;
    memcpy(pads, p, sizeof(int64_t) * (size_t)(2 * rank));
  } else {
    if (pad->n_in > 3 && pad->in[3] >= 0) return;
    if (pr__const_ints(pr__in(c, pad, 1), pads, 2 * PR_MAX_RANK) != 2 * rank) return;
    pr_value_t *cv = pr__in(c, pad, 2);
    if (cv && (!cv->is_const || cv->dtype != PR_DTYPE_FLOAT || *(const float *)cv->data != 0.f))
      return;
  }
  for (int k = 0; k < 2 * rank; k++)
    if (pads[k] < 0 || ((k % rank) < 2 && pads[k])) return;
  int ci = pr__fuse_only_consumer(c, pad->out[0], pi);
  if (ci < 0) return;
  pr_node_t *cons = &c->nodes[ci];
  if (cons->in[0] != pad->out[0] || cons->pad_fused) return;
  const char *op = cons->op->name;
  if (!strcmp(op, "AveragePool")) {
    /* ceil mode: a last window may start in the Pad's zeros, which it may
     * not in padding, and the average would count the part past the end */
    if (pr__attr_int(cons->m, "ceil_mode", 0)) return;
    /* its own pads must be zero unless they already count in the average */
    const int64_t *own;
    int cnt = pr__attr_ints(cons->m, "pads", &own);
    bool own_zero = true;
    for (int k = 0; k < cnt; k++) own_zero &= own[k] == 0;
    if (!own_zero && !pr__attr_int(cons->m, "count_include_pad", 0)) return;
  } else if (strcmp(op, "Conv")) {
    return;
  }
  if (strcmp(pr__attr_string(cons->m, "auto_pad", "NOTSET"), "NOTSET")) return;
  for (int k = 0; k < sp; k++) {
    cons->pad_add[k] = pads[k + 2];
    cons->pad_add[k + sp] = pads[k + 2 + rank];
  }
  cons->pad_fused = true;
  cons->in[0] = pad->in[0];
  pad->dead = true;
}

/* ---- decomposed LayerNorm -> one LayerNormalization kernel ----
 * mean = ReduceMean(x, last axis); d = Sub(x, mean); v = ReduceMean(Pow(d, 2));
 * y = Div(d, Sqrt(Add(v, eps))) [ * gamma ] [ + beta ] */

static int consumer_of(pr_compile_t *c, int value, int from, const char *op) {
  int k = pr__fuse_only_consumer(c, value, from);
  return k >= 0 && !strcmp(c->nodes[k].op->name, op) ? k : -1;
}

/* reduces exactly the last axis, keeping it */
static bool last_axis_mean(pr_compile_t *c, pr_node_t *n) {
  if (strcmp(n->op->name, "ReduceMean") || pr__attr_int(n->m, "keepdims", 1) != 1) return false;
  int rank = c->v[n->in[0]].rank;
  int64_t axes[PR_MAX_RANK];
  int na;
  if (c->opset >= 18) {
    na = n->n_in > 1 && n->in[1] >= 0 ? pr__const_ints(&c->v[n->in[1]], axes, PR_MAX_RANK) : -1;
  } else {
    const int64_t *v;
    na = pr__attr_ints(n->m, "axes", &v);
    for (int i = 0; i < na && i < PR_MAX_RANK; i++) axes[i] = v[i];
  }
  return na == 1 && pr__axis(axes[0], rank) == rank - 1;
}

/* the operand of a binary node that is not `value` */
static int other_input(const pr_node_t *n, int value) {
  return n->in[0] == value ? n->in[1] : n->in[0];
}

static int new_ln_const(pr_compile_t *c, int64_t len, float fill) {
  int idx = pr__compile_add_value(c);
  if (idx < 0) return -1;
  pr_value_t *v = &c->v[idx];
  pr__value_set_shape(v, PR_DTYPE_FLOAT, 1, &len);
  v->data = malloc(sizeof(float) * (size_t)len);
  if (!v->data) return -1;
  for (int64_t i = 0; i < len; i++) ((float *)v->data)[i] = fill;
  v->is_const = v->owns_data = true;
  v->kind = PR_VAL_CONST;
  v->nbytes = sizeof(float) * (size_t)len;
  return idx;
}

/* True when `value` is a constant holding one value per element of the last axis. */
static bool per_channel_const(pr_compile_t *c, int value, int64_t len) {
  pr_value_t *v = &c->v[value];
  if (!v->is_const || v->dtype != PR_DTYPE_FLOAT) return false;
  int64_t n = pr__value_numel(v);
  return n == len && v->rank >= 1 && v->dims[v->rank - 1] == len;
}

static pr_status_t fuse_layer_norm(pr_compile_t *c, int i1) {
  pr_node_t *m1 = &c->nodes[i1];
  if (!last_axis_mean(c, m1)) return PR_OK;
  int x = m1->in[0];
  pr_value_t *xv = &c->v[x];
  if (xv->dtype != PR_DTYPE_FLOAT || xv->rank < 1) return PR_OK;
  int64_t len = xv->dims[xv->rank - 1];
  int is = consumer_of(c, m1->out[0], i1, "Sub");
  if (is < 0 || c->nodes[is].in[0] != x || c->nodes[is].in[1] != m1->out[0]) return PR_OK;
  int d = c->nodes[is].out[0];
  /* d feeds Pow and Div: two uses */
  if (c->v[d].n_uses != 2 || c->v[d].is_graph_output) return PR_OK;
  int ip = -1, idiv = -1;
  for (int k = is + 1; k < c->n_nodes; k++) {
    pr_node_t *n = &c->nodes[k];
    if (n->dead) continue;
    if (!strcmp(n->op->name, "Pow") && n->in[0] == d) ip = k;
    if (!strcmp(n->op->name, "Div") && n->in[0] == d) idiv = k;
  }
  float two, eps;
  if (ip < 0 || idiv < 0 || !pr__fuse_scalar_const(c, c->nodes[ip].in[1], &two) || two != 2.f)
    return PR_OK;
  int i2 = pr__fuse_only_consumer(c, c->nodes[ip].out[0], ip);
  if (i2 < 0 || !last_axis_mean(c, &c->nodes[i2])) return PR_OK;
  int ia = consumer_of(c, c->nodes[i2].out[0], i2, "Add");
  if (ia < 0 || !pr__fuse_scalar_const(c, other_input(&c->nodes[ia], c->nodes[i2].out[0]), &eps))
    return PR_OK;
  int isq = consumer_of(c, c->nodes[ia].out[0], ia, "Sqrt");
  if (isq < 0 || c->nodes[idiv].in[1] != c->nodes[isq].out[0] ||
      c->v[c->nodes[isq].out[0]].n_uses != 1)
    return PR_OK;
  /* optional affine tail */
  int last = idiv, gamma = -1, beta = -1, used_mul = -1;
  int im = pr__fuse_only_consumer(c, c->nodes[idiv].out[0], idiv);
  if (im >= 0 && !strcmp(c->nodes[im].op->name, "Mul") &&
      per_channel_const(c, other_input(&c->nodes[im], c->nodes[idiv].out[0]), len)) {
    gamma = other_input(&c->nodes[im], c->nodes[idiv].out[0]);
    last = used_mul = im;
    int ib = pr__fuse_only_consumer(c, c->nodes[im].out[0], im);
    if (ib >= 0 && !strcmp(c->nodes[ib].op->name, "Add") &&
        per_channel_const(c, other_input(&c->nodes[ib], c->nodes[im].out[0]), len)) {
      beta = other_input(&c->nodes[ib], c->nodes[im].out[0]);
      last = ib;
    }
  }
  if (gamma < 0 && (gamma = new_ln_const(c, len, 1.f)) < 0) return PR_ERR_NOMEM;
  if (beta < 0 && (beta = new_ln_const(c, len, 0.f)) < 0) return PR_ERR_NOMEM;
  /* the kernel replaces the last node of the pattern; the rest die */
  pr_node_t *out = &c->nodes[last];
  int y = out->out[0];
  int dead[] = {i1, is, ip, i2, ia, isq, idiv, used_mul, last};
  for (size_t k = 0; k < sizeof dead / sizeof dead[0]; k++)
    if (dead[k] >= 0) c->nodes[dead[k]].dead = true;
  *out = (pr_node_t){.op = &pr__op_layer_norm_fused};
  if (pr__node_io(c, out, 3, (const int[]){x, gamma, beta}, 1, &y)) return PR_ERR_NOMEM;
  out->post.alpha[0] = eps; /* the fused kernel reads epsilon here (no model node) */
  out->dead = false;
  return PR_OK;
}

/* ---- GELU subgraphs -> one element-wise kernel ----
 * erf:  Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)
 * tanh: Mul(Mul(x, Add(Tanh(Mul(Add(x, Mul(Mul(x, Mul(x, x)), 0.044715)), sqrt(2/pi))), 1)), 0.5)
 * (constants on either side of commutative ops) */

static bool near(float a, float b) {
  return fabsf(a - b) <= 1e-4f * fabsf(b);
}

/* Binary node k (op) with one constant scalar operand equal to want: returns
 * the other operand, or -1. */
static int with_const(pr_compile_t *c, int k, const char *op, float want) {
  if (k < 0 || strcmp(c->nodes[k].op->name, op)) return -1;
  pr_node_t *n = &c->nodes[k];
  float v;
  if (pr__fuse_scalar_const(c, n->in[1], &v) && near(v, want)) return n->in[0];
  if (strcmp(op, "Div") && pr__fuse_scalar_const(c, n->in[0], &v) && near(v, want)) return n->in[1];
  return -1;
}

static int producer_node(pr_compile_t *c, int value) {
  int p = c->v[value].producer;
  return p >= 0 && p < c->n_nodes && !c->nodes[p].dead ? p : -1;
}

static void fuse_gelu(pr_compile_t *c, int ie) {
  bool is_erf = !strcmp(c->nodes[ie].op->name, "Erf");
  int x, chain[10], n_chain = 0;
  int in = c->nodes[ie].in[0], pin = producer_node(c, in);
  if (c->v[in].n_uses != 1 || pin < 0) return;
  if (is_erf) {
    if ((x = with_const(c, pin, "Div", 1.41421356f)) < 0 &&
        (x = with_const(c, pin, "Mul", 0.70710678f)) < 0)
      return;
    chain[n_chain++] = pin;
  } else {
    /* Tanh(Mul(Add(x, Mul(cube, 0.044715)), sqrt(2/pi))) */
    int a = with_const(c, pin, "Mul", 0.79788456f), ia = a >= 0 ? producer_node(c, a) : -1;
    if (ia < 0 || strcmp(c->nodes[ia].op->name, "Add") || c->v[a].n_uses != 1) return;
    chain[n_chain++] = pin;
    chain[n_chain++] = ia;
    bool found = false;
    for (int side = 0; side < 2 && !found; side++) {
      x = c->nodes[ia].in[side];
      int t = c->nodes[ia].in[1 - side], it = producer_node(c, t);
      int cube = it >= 0 ? with_const(c, it, "Mul", 0.044715f) : -1,
          ic = cube >= 0 ? producer_node(c, cube) : -1;
      if (ic < 0 || c->v[t].n_uses != 1 || c->v[cube].n_uses != 1) continue;
      pr_node_t *cn = &c->nodes[ic];
      if (!strcmp(cn->op->name, "Pow")) {
        float three;
        found = cn->in[0] == x && pr__fuse_scalar_const(c, cn->in[1], &three) && three == 3.f;
        if (found) chain[n_chain++] = it, chain[n_chain++] = ic;
      } else if (!strcmp(cn->op->name, "Mul")) {
        int sq = cn->in[0] == x ? cn->in[1] : cn->in[1] == x ? cn->in[0] : -1;
        int is = sq >= 0 ? producer_node(c, sq) : -1;
        found = is >= 0 && c->v[sq].n_uses == 1 && !strcmp(c->nodes[is].op->name, "Mul") &&
                c->nodes[is].in[0] == x && c->nodes[is].in[1] == x;
        if (found) chain[n_chain++] = it, chain[n_chain++] = ic, chain[n_chain++] = is;
      }
    }
    if (!found) return;
  }
  /* Add(., 1) -> Mul(x, .) -> Mul(., 0.5) */
  int out = c->nodes[ie].out[0];
  int i1 = pr__fuse_only_consumer(c, out, ie);
  if (with_const(c, i1, "Add", 1.f) != out) return;
  int o1 = c->nodes[i1].out[0], i2 = pr__fuse_only_consumer(c, o1, i1);
  if (i2 < 0 || strcmp(c->nodes[i2].op->name, "Mul") || other_input(&c->nodes[i2], o1) != x) return;
  int o2 = c->nodes[i2].out[0], i3 = pr__fuse_only_consumer(c, o2, i2);
  if (with_const(c, i3, "Mul", 0.5f) != o2) return;
  if (c->v[x].dtype != PR_DTYPE_FLOAT) return;
  assert(n_chain <= (int)(sizeof chain / sizeof chain[0]));
  for (int k = 0; k < n_chain; k++) c->nodes[chain[k]].dead = true;
  c->nodes[ie].dead = c->nodes[i1].dead = c->nodes[i2].dead = true;
  int y = c->nodes[i3].out[0];
  pr_node_t *g = &c->nodes[i3];
  int *ins = g->in, *outs = g->out; /* the Mul's arrays: room for X */
  *g = (pr_node_t){.op = is_erf ? &pr__op_gelu_erf : &pr__op_gelu_tanh, .in = ins, .out = outs};
  g->n_in = g->n_out = 1;
  g->in[0] = x;
  g->out[0] = y;
}

/* ---- HardSwish written out -> one element-wise kernel ----
 * Mul(x, Clip(Add(x, 3), 0, 6)) then Div by 6 or Mul by 1/6 (exporters
 * without a HardSwish op, e.g. paddle2onnx); the HardSwish then fuses into
 * a Conv before it like any activation. */
static void fuse_hardswish(pr_compile_t *c, int ia) {
  int x = with_const(c, ia, "Add", 3.f);
  if (x < 0 || c->v[x].dtype != PR_DTYPE_FLOAT) return;
  int ic = consumer_of(c, c->nodes[ia].out[0], ia, "Clip");
  float lo, hi;
  if (ic < 0 || !clip_bounds(c, &c->nodes[ic], &lo, &hi) || lo != 0.f || hi != 6.f) return;
  int clipped = c->nodes[ic].out[0];
  int im = consumer_of(c, clipped, ic, "Mul");
  if (im < 0 || other_input(&c->nodes[im], clipped) != x) return;
  int prod = c->nodes[im].out[0], is = pr__fuse_only_consumer(c, prod, im);
  if (with_const(c, is, "Div", 6.f) != prod && with_const(c, is, "Mul", 1.f / 6.f) != prod) return;
  pr_node_t *h = &c->nodes[is];
  int y = h->out[0], *ins = h->in, *outs = h->out; /* room for X */
  c->nodes[ia].dead = c->nodes[ic].dead = c->nodes[im].dead = true;
  *h = (pr_node_t){.op = &pr__op_hard_swish, .in = ins, .out = outs, .m = NULL};
  h->n_in = h->n_out = 1;
  h->in[0] = x;
  h->out[0] = y;
}

/* ---- SiLU (Swish): Mul(x, Sigmoid(x)) -> one element-wise kernel, which
 * then joins its Conv as a post-op (EfficientNet, YOLO) ---- */
static void fuse_silu(pr_compile_t *c, int is) {
  pr_node_t *sg = &c->nodes[is];
  int x = sg->in[0], sv = sg->out[0];
  if (c->v[x].dtype != PR_DTYPE_FLOAT) return;
  int im = consumer_of(c, sv, is, "Mul");
  if (im < 0 || other_input(&c->nodes[im], sv) != x) return;
  pr_node_t *m = &c->nodes[im];
  int y = m->out[0], *ins = m->in, *outs = m->out; /* the Mul's arrays: room for X */
  sg->dead = true;
  *m = (pr_node_t){.op = &pr__op_silu, .in = ins, .out = outs};
  m->n_in = m->n_out = 1;
  m->in[0] = x;
  m->out[0] = y;
}

/* ---- scaled-dot-product attention -> one kernel ----
 * MatMul(Q', K') -> [Div or Mul by a scalar] -> [Add mask] -> Softmax(last)
 *   -> MatMul(., V') -> [Transpose(0,2,1,3)], all [batch, heads, rows, cols],
 * where Q', K', V' may be Transpose(Reshape(Split(X) or X)) of a [B, S, C] X:
 * the kernel reads X through strides. */

static void row_major_strides(const pr_value_t *v, int64_t *st) {
  int64_t e = 1;
  for (int k = v->rank - 1; k >= 0; k--) st[k] = e, e *= v->dims[k];
}

/* The value the 4-D `value` is a strided view of, with its offset and the
 * strides of value's 4 axes. */
static int trace_view(pr_compile_t *c, int value, int64_t *off, int64_t *st) {
  const pr_value_t *v = &c->v[value];
  *off = 0;
  row_major_strides(v, st);
  int it = producer_node(c, value);
  const int64_t *perm;
  if (it < 0 || strcmp(c->nodes[it].op->name, "Transpose") ||
      pr__attr_ints(c->nodes[it].m, "perm", &perm) != 4)
    return value;
  int u = c->nodes[it].in[0], ir = producer_node(c, u), src = u;
  int64_t ust[4], uoff = 0;
  row_major_strides(&c->v[u], ust);
  const pr_value_t *uv = &c->v[u];
  if (ir >= 0 && !strcmp(c->nodes[ir].op->name, "Reshape")) {
    int xi = c->nodes[ir].in[0];
    const pr_value_t *xv = &c->v[xi];
    if (xv->rank == 3 && xv->dims[0] == uv->dims[0] && xv->dims[1] == uv->dims[1] &&
        xv->dims[2] == uv->dims[2] * uv->dims[3]) {
      /* [X0, X1, H*D] seen as [X0, X1, H, D]; X may be one output of a
       * Split along the last axis */
      int64_t cx = xv->dims[2], coff = 0;
      src = xi;
      int is = producer_node(c, xi);
      const pr_node_t *sp = is >= 0 ? &c->nodes[is] : NULL;
      if (sp && !strcmp(sp->op->name, "Split") && c->v[sp->in[0]].rank == 3 &&
          pr__axis(pr__attr_int(sp->m, "axis", 0), 3) == 2) {
        int64_t acc = 0;
        for (int k = 0; k < sp->n_out; k++) {
          if (sp->out[k] == xi) {
            src = sp->in[0];
            coff = acc;
            cx = c->v[src].dims[2];
            break;
          }
          if (sp->out[k] >= 0) acc += c->v[sp->out[k]].dims[2];
        }
      }
      ust[0] = xv->dims[1] * cx, ust[1] = cx, ust[2] = uv->dims[3], ust[3] = 1;
      uoff = coff;
    }
  }
  for (int k = 0; k < 4; k++) {
    if (perm[k] < 0 || perm[k] > 3) return value;
    st[k] = ust[perm[k]];
  }
  *off = uoff;
  return src;
}

/* From the scores S = MatMul node i1: [Div or Mul by a scalar] -> [Add
 * mask] -> Softmax over the last axis. Returns the Softmax node (appending
 * the nodes before it to dead), or -1; *scale and *mask (-1: none) set. */
static int attn_scores(pr_compile_t *c, int i1, float *scale, int *mask, int *dead, int *n_dead) {
  const pr_value_t *sv = &c->v[c->nodes[i1].out[0]];
  float k;
  int cur = c->nodes[i1].out[0], ni = pr__fuse_only_consumer(c, cur, i1);
  *scale = 1.f;
  *mask = -1;
  if (ni >= 0 && !strcmp(c->nodes[ni].op->name, "Div") && c->nodes[ni].in[0] == cur &&
      pr__fuse_scalar_const(c, c->nodes[ni].in[1], &k) && k != 0.f) {
    *scale = 1.f / k;
  } else if (ni >= 0 && !strcmp(c->nodes[ni].op->name, "Mul") &&
             pr__fuse_scalar_const(c, other_input(&c->nodes[ni], cur), &k)) {
    *scale = k;
  } else {
    ni = -2;
  }
  if (ni >= 0) {
    dead[(*n_dead)++] = ni;
    cur = c->nodes[ni].out[0];
    ni = pr__fuse_only_consumer(c, cur, ni);
  } else {
    ni = pr__fuse_only_consumer(c, cur, i1);
  }
  if (ni >= 0 && !strcmp(c->nodes[ni].op->name, "Add")) {
    int m = other_input(&c->nodes[ni], cur);
    const pr_value_t *mv = &c->v[m];
    if (m == cur || mv->dtype != PR_DTYPE_FLOAT || mv->rank > 4 ||
        !same_shape(&c->v[c->nodes[ni].out[0]], sv))
      return -1;
    for (int d = 0; d < mv->rank; d++)
      if (mv->dims[d] != 1 && mv->dims[d] != sv->dims[d + 4 - mv->rank]) return -1;
    *mask = m;
    dead[(*n_dead)++] = ni;
    cur = c->nodes[ni].out[0];
    ni = pr__fuse_only_consumer(c, cur, ni);
  }
  if (ni < 0 || strcmp(c->nodes[ni].op->name, "Softmax") ||
      pr__axis(pr__attr_int(c->nodes[ni].m, "axis", c->opset >= 13 ? -1 : 1), 4) != 3)
    return -1;
  return ni;
}

static void fuse_attention(pr_compile_t *c, int i1) {
  pr_node_t *m1 = &c->nodes[i1];
  const pr_value_t *qv = &c->v[m1->in[0]], *kv = &c->v[m1->in[1]], *sv = &c->v[m1->out[0]];
  if (qv->rank != 4 || kv->rank != 4 || kv->is_const || qv->dtype != PR_DTYPE_FLOAT) return;
  int64_t B = qv->dims[0], H = qv->dims[1], Sq = qv->dims[2], D = qv->dims[3], Sk = kv->dims[3];
  if (kv->dims[0] != B || kv->dims[1] != H || kv->dims[2] != D) return;
  float scale;
  int mask, dead[6], n_dead = 0;
  dead[n_dead++] = i1;
  int ni = attn_scores(c, i1, &scale, &mask, dead, &n_dead);
  if (ni < 0) return;
  dead[n_dead++] = ni;
  int cur = c->nodes[ni].out[0];
  int i2 = pr__fuse_only_consumer(c, cur, ni);
  if (i2 < 0 || strcmp(c->nodes[i2].op->name, "MatMul") || c->nodes[i2].in[0] != cur) return;
  const pr_value_t *vv = &c->v[c->nodes[i2].in[1]];
  if (vv->rank != 4 || vv->dims[0] != B || vv->dims[1] != H || vv->dims[2] != Sk) return;
  dead[n_dead++] = i2;
  int64_t Dv = vv->dims[3];
  pr_attn_t a = {.B = B, .H = H, .Sq = Sq, .Sk = Sk, .D = D, .Dv = Dv, .scale = scale};
  int out = c->nodes[i2].out[0], last = i2;
  row_major_strides(&c->v[out], a.st[4]);
  int it = pr__fuse_only_consumer(c, out, i2);
  const int64_t *perm;
  if (it >= 0 && !strcmp(c->nodes[it].op->name, "Transpose") &&
      pr__attr_ints(c->nodes[it].m, "perm", &perm) == 4 && perm[0] == 0 && perm[1] == 2 &&
      perm[2] == 1 && perm[3] == 3) {
    /* written straight as [B, Sq, H, Dv] */
    out = c->nodes[it].out[0];
    a.st[4][0] = Sq * H * Dv, a.st[4][1] = Dv, a.st[4][2] = H * Dv, a.st[4][3] = 1;
    dead[n_dead++] = last = it;
  }
  int src[3];
  for (int k = 0; k < 3; k++)
    src[k] = trace_view(c, k < 2 ? m1->in[k] : c->nodes[i2].in[1], &a.off[k], a.st[k]);
  if (mask >= 0) pr__bcast_strides(&c->v[mask], 4, sv->dims, a.st[3]);
  char t;
  int64_t ld;
  if (!pr__attn_operand(Sq, D, a.st[0][2], a.st[0][3], &t, &ld) ||
      !pr__attn_operand(D, Sk, a.st[1][2], a.st[1][3], &t, &ld) ||
      !pr__attn_operand(Sk, Dv, a.st[2][2], a.st[2][3], &t, &ld))
    return;
  pr_node_t fused = {.op = &pr__op_attention, .attn = a};
  if (pr__node_io(c, &fused, 4, (const int[]){src[0], src[1], src[2], mask}, 1, &out))
    return; /* no memory: the pattern stays unfused, which is still right */
  assert(n_dead <= (int)(sizeof dead / sizeof dead[0]));
  for (int d = 0; d < n_dead; d++) c->nodes[dead[d]].dead = true;
  c->nodes[last] = fused;
  c->v[out].producer = last;
}

pr_status_t pr__fuse(pr_compile_t *c) {
  for (int i = 0; i < c->n_nodes; i++)
    if (!c->nodes[i].dead &&
        (!strcmp(c->nodes[i].op->name, "Erf") || !strcmp(c->nodes[i].op->name, "Tanh")))
      fuse_gelu(c, i);
  for (int i = 0; i < c->n_nodes; i++)
    if (!c->nodes[i].dead && !strcmp(c->nodes[i].op->name, "Add")) fuse_hardswish(c, i);
  for (int i = 0; i < c->n_nodes; i++)
    if (!c->nodes[i].dead && !strcmp(c->nodes[i].op->name, "Sigmoid")) fuse_silu(c, i);
  pr__compile_count_uses(c); /* a fused HardSwish's or SiLU's X lost its other reader */
  /* after those: a written-out activation between DequantizeLinear and
   * QuantizeLinear is one node by now (fewer nodes to tabulate) */
  pr_status_t qst = pr__fuse_qdq(c);
  if (qst) return qst;
  for (int i = 0; i < c->n_nodes; i++)
    if (!c->nodes[i].dead && !strcmp(c->nodes[i].op->name, "ReduceMean")) {
      pr_status_t st = fuse_layer_norm(c, i);
      if (st) return st;
    }
  for (int i = 0; i < c->n_nodes; i++)
    if (!c->nodes[i].dead && !strcmp(c->nodes[i].op->name, "MatMul")) fuse_attention(c, i);
  for (int i = 0; i < c->n_nodes; i++)
    if (!c->nodes[i].dead && !strcmp(c->nodes[i].op->name, "Pad")) fuse_pad(c, i);
  for (int i = 0; i < c->n_nodes; i++) {
    if (c->nodes[i].dead) continue;
    bool linear = pr__matmul_is_linear(c, &c->nodes[i]);
    if (!linear && strcmp(c->nodes[i].op->name, "Conv")) continue;
    int ci = i;
    for (;;) {
      pr_node_t *conv = &c->nodes[ci];
      int next = pr__fuse_only_consumer(c, conv->out[0], ci);
      if (next < 0) break;
      pr_node_t *cons = &c->nodes[next];
      const char *op = cons->op->name;
      if (linear && !strcmp(op, "Add") && fuse_bias(c, conv, cons)) {
        /* fused */
      } else if (!linear && !strcmp(op, "BatchNormalization") && cons->in[0] == conv->out[0] &&
                 !conv->post.n_eltwise && !conv->post.sum && !conv->bn) {
        pr_status_t st = fold_bn(c, conv, cons);
        if (st) return st;
        if (!cons->dead) break;
        c->v[conv->out[0]].producer = ci;
      } else if (!strcmp(op, "Add") &&
                 !scalar_linear(c, cons, conv->out[0], &(float){0}, &(float){0})) {
        int ni = fuse_add(c, ci, next);
        if (ni == ci) break;
        ci = ni;
      } else if (!fuse_act(c, conv, cons)) {
        break;
      }
      /* the conv's new output is the consumer's; recount its uses */
      int out = c->nodes[ci].out[0];
      c->v[out].producer = ci;
      c->v[out].n_uses = 0;
      for (int j = 0; j < c->n_nodes; j++) {
        if (c->nodes[j].dead) continue;
        for (int k = 0; k < c->nodes[j].n_in; k++) c->v[out].n_uses += c->nodes[j].in[k] == out;
      }
      if (c->v[out].is_graph_output) c->v[out].n_uses++;
    }
  }
  return PR_OK;
}
