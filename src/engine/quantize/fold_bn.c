/* BatchNormalization folded into the Conv before it, before quantizing
 * (qwrite.h: pr__qz_fold_bn). The engine folds it too, but only after QDQ
 * folding: left in the model, a BatchNormalization would sit between the
 * Conv and its QuantizeLinear, so the Conv would neither run in int8 nor
 * have its output quantized where its scale is per tensor (after the
 * normalization's per-channel scaling, not before it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/quantize/qwrite.h"
#include "engine/tensor.h"

typedef struct {
  pr_tensor_t *w, *b, *scale, *bias, *mean, *var;
} bn_params_t;

static void params_free(bn_params_t *p) {
  pr_tensor_t *all[6] = {p->w, p->b, p->scale, p->bias, p->mean, p->var};
  for (int k = 0; k < 6; k++)
    if (all[k]) pr_engine_tensor_free(all[k]), free(all[k]);
}

/* The float constant input k of n (absent or not constant: NULL). */
static pr_tensor_t *param(const pr_qz_index_t *ix, const Onnx__NodeProto *n, size_t k,
                          const char *base_dir) {
  pr_tensor_t *t = NULL;
  char err[8];
  if (k >= n->n_input || !n->input[k][0] ||
      pr__qz_const_float(ix, n->input[k], base_dir, &t, err, sizeof err))
    return NULL;
  return t;
}

/* The parameters when conv ci and normalization bi fold: every one a float
 * constant of the right size. */
static bool gather(const pr_qz_index_t *ix, int ci, int bi, const char *base_dir, bn_params_t *p) {
  const Onnx__NodeProto *c = ix->g->node[ci], *b = ix->g->node[bi];
  memset(p, 0, sizeof *p);
  if (b->n_input != 5 || b->n_output != 1 || pr__qz_attr_int(b, "training_mode", 0)) return false;
  p->w = param(ix, c, 1, base_dir);
  p->b = c->n_input > 2 ? param(ix, c, 2, base_dir) : NULL;
  p->scale = param(ix, b, 1, base_dir), p->bias = param(ix, b, 2, base_dir);
  p->mean = param(ix, b, 3, base_dir), p->var = param(ix, b, 4, base_dir);
  if (!p->w || (c->n_input > 2 && c->input[2][0] && !p->b) || !p->scale || !p->bias || !p->mean ||
      !p->var || p->w->rank < 3)
    return false;
  int64_t m = p->w->dims[0];
  pr_tensor_t *vec[5] = {p->b, p->scale, p->bias, p->mean, p->var};
  for (int k = 0; k < 5; k++)
    if (vec[k] && pr_tensor_numel(vec[k]) != m) return false;
  return true;
}

/* An initializer "<base><suffix>" of dims and values v; its name. */
static char *add(Onnx__GraphProto *g, const char *base, const char *suffix, int rank,
                 const int64_t *dims, const float *v, int64_t n) {
  char *name = pr__qz_name(base, suffix);
  Onnx__TensorProto *t =
      name ? pr__qz_tensor_new(name, PR_DTYPE_FLOAT, rank, dims, v, sizeof(float) * n) : NULL;
  if (!t || pr__qz_add_init(g, t)) {
    free(name);
    return NULL;
  }
  return name;
}

/* Conv ci reads W' = W * f and B' = (B - mean) * f + beta (f = scale /
 * sqrt(var + eps)) and writes the normalization's output; bi goes. */
static pr_status_t fold(Onnx__GraphProto *g, int ci, int bi, const bn_params_t *p, float eps) {
  Onnx__NodeProto *c = g->node[ci], *b = g->node[bi];
  int64_t m = p->w->dims[0], numel = pr_tensor_numel(p->w), per = numel / m;
  float *w = malloc(sizeof(float) * (size_t)numel), *bias = malloc(sizeof(float) * (size_t)m);
  char *wn = NULL, *bn = NULL, *out = strdup(b->output[0]);
  if (w && bias && out) {
    const float *w0 = p->w->data, *s = p->scale->data, *beta = p->bias->data;
    const float *mean = p->mean->data, *var = p->var->data;
    for (int64_t o = 0; o < m; o++) {
      float f = s[o] / sqrtf(var[o] + eps);
      for (int64_t i = 0; i < per; i++) w[o * per + i] = w0[o * per + i] * f;
      bias[o] = ((p->b ? ((const float *)p->b->data)[o] : 0.f) - mean[o]) * f + beta[o];
    }
    wn = add(g, c->input[1], "_bn", p->w->rank, p->w->dims, w, numel);
    bn = wn ? add(g, c->input[1], "_bias_bn", 1, &m, bias, m) : NULL;
  }
  free(w), free(bias);
  pr_status_t st = wn && bn && out ? pr__qz_node_set_input(c, 1, wn) : PR_ERR_NOMEM;
  if (!st) st = c->n_input > 2 ? pr__qz_node_set_input(c, 2, bn) : pr__qz_node_add_input(c, bn);
  free(wn), free(bn);
  if (st) {
    free(out);
    return st;
  }
  free(c->output[0]);
  c->output[0] = out;
  onnx__node_proto__free_unpacked(b, NULL);
  memmove(&g->node[bi], &g->node[bi + 1], sizeof *g->node * (g->n_node - (size_t)bi - 1));
  g->n_node--;
  return PR_OK;
}

pr_status_t pr__qz_fold_bn(Onnx__GraphProto *g, const char *base_dir, int *folded) {
  *folded = 0;
  for (size_t i = 0; i < g->n_node; i++) {
    if (strcmp(g->node[i]->op_type, "Conv")) continue;
    pr_qz_index_t ix;
    if (pr__qz_index_build(&ix, g)) return PR_ERR_NOMEM;
    int id = pr__qz_id(&ix, g->node[i]->output[0]);
    int bi = id >= 0 && ix.uses[id] == 1 && !ix.is_output[id] ? ix.consumer[id] : -1;
    bn_params_t p = {0};
    bool ok = bi > (int)i && !strcmp(g->node[bi]->op_type, "BatchNormalization") &&
              gather(&ix, (int)i, bi, base_dir, &p);
    float eps = ok ? pr__qz_attr_float(g->node[bi], "epsilon", 1e-5f) : 0;
    pr__qz_index_free(&ix);
    pr_status_t st = ok ? fold(g, (int)i, bi, &p, eps) : PR_OK;
    params_free(&p);
    if (st) return st;
    *folded += ok;
  }
  return PR_OK;
}
