/* Fusions that pay off on CNNs: BatchNormalization folded into Conv weights,
 * activations and the residual Add run as oneDNN post-ops of the Conv. */
#include "engine/fuse.h"

#include <math.h>
#include <string.h>

#include "base/util.h"

static int only_consumer(pr_compile_t *c, int value, int from) {
  if (c->v[value].n_uses != 1 || c->v[value].is_graph_output) return -1;
  for (int i = from + 1; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] == value) return i;
  }
  return -1;
}

static bool all_const(pr_compile_t *c, const pr_node_t *n, int from, int to) {
  for (int k = from; k < to; k++)
    if (k >= n->n_in || n->in[k] < 0 || !c->v[n->in[k]].is_const) return false;
  return true;
}

/* Conv(W, B) -> BN(scale, bias, mean, var): the conv folds the BN into its
 * weights and bias when it prepares them (once per model, shared). */
static pr_status_t fold_bn(pr_compile_t *c, pr_node_t *conv, pr_node_t *bn) {
  if (!all_const(c, conv, 1, conv->n_in) || !all_const(c, bn, 1, 5)) return PR_OK;
  conv->bn = bn->m;
  for (int k = 0; k < 4; k++) conv->bn_in[k] = bn->in[k + 1];
  conv->out[0] = bn->out[0];
  bn->dead = true;
  return PR_OK;
}

/* Activation consumer -> eltwise post-ops; returns true when fused. */
static bool fuse_act(pr_compile_t *c, pr_node_t *conv, pr_node_t *act) {
  pr_post_t *p = &conv->post;
  const char *op = act->op->name;
  dnnl_alg_kind_t alg[2];
  float alpha[2] = {0, 0}, beta[2] = {0, 0};
  int cnt = 1;
  if (!strcmp(op, "Relu")) alg[0] = dnnl_eltwise_relu;
  else if (!strcmp(op, "LeakyRelu")) alg[0] = dnnl_eltwise_relu, alpha[0] = pr_attr_float(act->m, "alpha", 0.01f);
  else if (!strcmp(op, "Sigmoid")) alg[0] = dnnl_eltwise_logistic;
  else if (!strcmp(op, "Tanh")) alg[0] = dnnl_eltwise_tanh;
  else if (!strcmp(op, "HardSwish")) alg[0] = dnnl_eltwise_hardswish;
  else if (!strcmp(op, "HardSigmoid")) {
    alg[0] = dnnl_eltwise_linear, alpha[0] = pr_attr_float(act->m, "alpha", 0.2f);
    beta[0] = pr_attr_float(act->m, "beta", 0.5f);
    alg[1] = dnnl_eltwise_clip_v2, alpha[1] = 0.f, beta[1] = 1.f;
    cnt = 2;
  } else if (!strcmp(op, "Clip") && c->v[act->in[0]].dtype == PR_DTYPE_FLOAT) {
    float lo = -INFINITY, hi = INFINITY;
    if (c->opset < 11) {
      lo = pr_attr_float(act->m, "min", -3.402823e+38f);
      hi = pr_attr_float(act->m, "max", 3.402823e+38f);
    } else {
      for (int k = 1; k < act->n_in; k++) {
        if (act->in[k] < 0) continue;
        if (!c->v[act->in[k]].is_const) return false;
        float v = *(const float *)c->v[act->in[k]].data;
        if (k == 1) lo = v;
        else hi = v;
      }
    }
    alg[0] = dnnl_eltwise_clip_v2, alpha[0] = lo, beta[0] = hi;
  } else {
    return false;
  }
  if (p->n_eltwise + cnt > PR_MAX_POST) return false;
  for (int i = 0; i < cnt; i++) {
    p->alg[p->n_eltwise] = alg[i];
    p->alpha[p->n_eltwise] = alpha[i];
    p->beta[p->n_eltwise] = beta[i];
    p->n_eltwise++;
  }
  conv->out[0] = act->out[0];
  act->dead = true;
  return true;
}

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
  if (conv->post.sum || conv->n_in >= 16) return ci;
  int mine = conv->out[0];
  int other = add->in[0] == mine ? add->in[1] : add->in[0];
  if (other == mine || !same_shape(&c->v[other], &c->v[mine])) return ci;
  conv->post.sum = true;
  conv->post.sum_before = conv->post.n_eltwise;
  if (conv->n_in < 3) conv->in[2] = -1, conv->n_in = 3;
  conv->in[conv->n_in++] = other;
  conv->out[0] = add->out[0];
  pr_node_t moved = *conv;
  conv->dead = true;
  conv->state = NULL;
  *add = moved;
  return ai;
}

/* Pad(constant 0, spatial dims only) -> Conv or AveragePool: the kernel pads. */
static void fuse_pad(pr_compile_t *c, int pi) {
  pr_node_t *pad = &c->nodes[pi];
  pr_value_t *x = &c->v[pad->in[0]];
  int rank = x->rank, sp = rank - 2;
  if (sp < 1 || sp > 3 || x->dtype != PR_DTYPE_FLOAT) return;
  if (strcmp(pr_attr_string(pad->m, "mode", "constant"), "constant")) return;
  int64_t pads[2 * PR_MAX_RANK];
  if (c->opset < 11) {
    const int64_t *p;
    if (pr_attr_ints(pad->m, "pads", &p) != 2 * rank || pr_attr_float(pad->m, "value", 0.f) != 0.f) return;
    memcpy(pads, p, sizeof(int64_t) * (size_t)(2 * rank));
  } else {
    if (pad->n_in > 3 && pad->in[3] >= 0) return;
    if (pr_const_ints(pr_in(c, pad, 1), pads, 2 * PR_MAX_RANK) != 2 * rank) return;
    pr_value_t *cv = pr_in(c, pad, 2);
    if (cv && (!cv->is_const || cv->dtype != PR_DTYPE_FLOAT || *(const float *)cv->data != 0.f)) return;
  }
  for (int k = 0; k < 2 * rank; k++)
    if (pads[k] < 0 || ((k % rank) < 2 && pads[k])) return;
  int ci = only_consumer(c, pad->out[0], pi);
  if (ci < 0) return;
  pr_node_t *cons = &c->nodes[ci];
  if (cons->in[0] != pad->out[0] || cons->pad_fused) return;
  const char *op = cons->op->name;
  if (!strcmp(op, "AveragePool")) {
    /* its own pads must be zero unless they already count in the average */
    const int64_t *own;
    int cnt = pr_attr_ints(cons->m, "pads", &own);
    bool own_zero = true;
    for (int k = 0; k < cnt; k++) own_zero &= own[k] == 0;
    if (!own_zero && !pr_attr_int(cons->m, "count_include_pad", 0)) return;
  } else if (strcmp(op, "Conv")) {
    return;
  }
  if (strcmp(pr_attr_string(cons->m, "auto_pad", "NOTSET"), "NOTSET")) return;
  for (int k = 0; k < sp; k++) {
    cons->pad_add[k] = pads[k + 2];
    cons->pad_add[k + sp] = pads[k + 2 + rank];
  }
  cons->pad_fused = true;
  cons->in[0] = pad->in[0];
  pad->dead = true;
}

pr_status_t pr_fuse(pr_compile_t *c) {
  for (int i = 0; i < c->n_nodes; i++)
    if (!c->nodes[i].dead && !strcmp(c->nodes[i].op->name, "Pad")) fuse_pad(c, i);
  for (int i = 0; i < c->n_nodes; i++) {
    if (c->nodes[i].dead || strcmp(c->nodes[i].op->name, "Conv")) continue;
    int ci = i;
    for (;;) {
      pr_node_t *conv = &c->nodes[ci];
      int next = only_consumer(c, conv->out[0], ci);
      if (next < 0) break;
      pr_node_t *cons = &c->nodes[next];
      const char *op = cons->op->name;
      if (!strcmp(op, "BatchNormalization") && cons->in[0] == conv->out[0] &&
          !conv->post.n_eltwise && !conv->post.sum && !conv->bn) {
        pr_status_t st = fold_bn(c, conv, cons);
        if (st) return st;
        if (!cons->dead) break;
        c->v[conv->out[0]].producer = ci;
      } else if (!strcmp(op, "Add")) {
        int ni = fuse_add(c, ci, next);
        if (ni == ci) break;
        ci = ni;
      } else if (!fuse_act(c, conv, cons)) {
        break;
      }
      /* the conv's new output is the consumer's; recount its uses */
      int out = c->nodes[ci].out[0];
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
