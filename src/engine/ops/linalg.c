/* Gemm (oneDNN sgemm), BatchNormalization (inference) and Softmax. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "engine/ops/fastmath.h"
#include "engine/ops/ops.h"

static void destroy_free(void *p) {
  free(p);
}

/* ---- Gemm: Y = alpha * A' B' + beta * C ---- */

static pr_status_t infer_gemm(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0), *b = pr_in(c, n, 1), *cc = pr_in(c, n, 2);
  if (!a || !b) return pr_fail(c, n, PR_ERR_INVALID, "needs A and B");
  if (a->dtype != PR_DTYPE_FLOAT || b->dtype != PR_DTYPE_FLOAT ||
      (cc && cc->dtype != PR_DTYPE_FLOAT))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT");
  if (a->rank != 2 || b->rank != 2) return pr_fail(c, n, PR_ERR_INVALID, "A and B must be 2-D");
  bool ta = pr_attr_int(n->m, "transA", 0), tb = pr_attr_int(n->m, "transB", 0);
  int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
  int64_t K2 = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
  if (K != K2)
    return pr_fail(c, n, PR_ERR_INVALID, "inner dimensions differ (%lld, %lld)", (long long)K,
                   (long long)K2);
  int64_t d[2] = {M, N};
  if (cc) {
    int r;
    int64_t bd[PR_MAX_RANK];
    if (cc->rank > 2 || pr_broadcast_shape(2, d, cc->rank, cc->dims, &r, bd) < 0 || bd[0] != M ||
        bd[1] != N)
      return pr_fail(c, n, PR_ERR_INVALID, "C does not broadcast to [M, N]");
  }
  pr_value_set_shape(pr_out(c, n, 0), PR_DTYPE_FLOAT, 2, d);
  n->flops = 2.0 * (double)M * (double)N * (double)K;
  return PR_OK;
}

static void run_gemm(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  const pr_value_t *cc = n->n_in > 2 && n->in[2] >= 0 ? &x->v[n->in[2]] : NULL;
  bool ta = pr_attr_int(n->m, "transA", 0), tb = pr_attr_int(n->m, "transB", 0);
  float alpha = pr_attr_float(n->m, "alpha", 1.f), beta = pr_attr_float(n->m, "beta", 1.f);
  int64_t M = o->dims[0], N = o->dims[1], K = ta ? a->dims[0] : a->dims[1];
  float *y = o->ptr;
  float b2 = 0.f;
  if (cc && beta != 0.f) {
    const float *pc = cc->ptr;
    int64_t cm = cc->rank == 2 ? cc->dims[0] : 1, cn = cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) y[i * N + j] = pc[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
    b2 = beta;
  }
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a->ptr, a->dims[1], b->ptr, b->dims[1],
             b2, y, N);
}

const pr_op_t pr_op_gemm = {.name = "Gemm",
                            .attrs = "alpha,beta,transA,transB",
                            .min_opset = 7,
                            .max_inputs = 3,
                            .infer = infer_gemm,
                            .run = run_gemm};

/* ---- BatchNormalization (inference) ---- */

static pr_status_t check_bn(const pr_mnode_t *m, int opset, char *err, size_t len) {
  if (pr_attr_int(m, "training_mode", 0) || m->n_out > 1 || pr_attr_int(m, "spatial", 1) != 1) {
    snprintf(err, len, "node '%s' (BatchNormalization): training mode is not supported",
             pr_mnode_name(m));
    return PR_ERR_UNSUPPORTED;
  }
  return PR_OK;
}

static pr_status_t infer_bn(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr_in(c, n, 0);
  if (!x || x->dtype != PR_DTYPE_FLOAT || x->rank < 2)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "input must be FLOAT of rank >= 2");
  for (int k = 1; k < 5; k++) {
    pr_value_t *p = pr_in(c, n, k);
    if (!p || p->dtype != PR_DTYPE_FLOAT || pr_value_numel(p) != x->dims[1])
      return pr_fail(c, n, PR_ERR_INVALID, "input %d must hold %lld floats", k,
                     (long long)x->dims[1]);
  }
  pr_value_set_shape(pr_out(c, n, 0), x->dtype, x->rank, x->dims);
  return PR_OK;
}

static void run_bn(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]];
  const float *scale = pr_xin(x, n, 1), *bias = pr_xin(x, n, 2), *mean = pr_xin(x, n, 3),
              *var = pr_xin(x, n, 4);
  float eps = pr_attr_float(n->m, "epsilon", 1e-5f);
  int64_t N = in->dims[0], C = in->dims[1], inner = 1;
  for (int k = 2; k < in->rank; k++) inner *= in->dims[k];
  const float *a = in->ptr;
  float *o = pr_xout(x, n, 0);
#pragma omp parallel for collapse(2) num_threads(x->threads) if (N * C * inner > 16384)
  for (int64_t i = 0; i < N; i++)
    for (int64_t ch = 0; ch < C; ch++) {
      float s = scale[ch] / sqrtf(var[ch] + eps), t = bias[ch] - mean[ch] * s;
      const float *pa = a + (i * C + ch) * inner;
      float *po = o + (i * C + ch) * inner;
      for (int64_t j = 0; j < inner; j++) po[j] = pa[j] * s + t;
    }
}

const pr_op_t pr_op_batch_norm = {.name = "BatchNormalization",
                                  .attrs = "epsilon,momentum,training_mode,spatial,is_test",
                                  .min_opset = 7,
                                  .max_inputs = 5,
                                  .check = check_bn,
                                  .infer = infer_bn,
                                  .run = run_bn,
                                  .inplace = true};

/* ---- Softmax ---- */

static pr_status_t infer_softmax(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr_in(c, n, 0);
  if (!x || x->dtype != PR_DTYPE_FLOAT) return pr_fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT");
  int axis = pr_axis(pr_attr_int(n->m, "axis", c->opset >= 13 ? -1 : 1), x->rank);
  if (axis < 0) return pr_fail(c, n, PR_ERR_INVALID, "axis out of range");
  pr_value_set_shape(pr_out(c, n, 0), x->dtype, x->rank, x->dims);
  return PR_OK;
}

typedef struct {
  int64_t outer, len, inner; /* rows, the softmax axis, the stride between its elements */
} softmax_state_t;

static pr_status_t prepare_softmax(pr_compile_t *c, pr_node_t *n) {
  /* opset >= 13: along one axis (default -1); before: everything from the
   * axis on (default 1) is one flat row */
  pr_value_t *x = pr_in(c, n, 0);
  bool coerce = c->opset < 13;
  int axis = pr_axis(pr_attr_int(n->m, "axis", coerce ? 1 : -1), x->rank);
  softmax_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->outer = s->len = s->inner = 1;
  for (int k = 0; k < axis; k++) s->outer *= x->dims[k];
  if (coerce) {
    for (int k = axis; k < x->rank; k++) s->len *= x->dims[k];
  } else {
    s->len = x->dims[axis];
    for (int k = axis + 1; k < x->rank; k++) s->inner *= x->dims[k];
  }
  return PR_OK;
}

static void run_softmax(pr_exec_t *x, pr_node_t *n) {
  const softmax_state_t *s = n->state;
  int64_t outer = s->outer, len = s->len, inner = s->inner;
  const float *a = pr_xin(x, n, 0);
  float *o = pr_xout(x, n, 0);
  if (inner == 1) { /* contiguous rows: SIMD reductions */
#pragma omp parallel for num_threads(x->threads) if (outer * len > 16384)
    for (int64_t i = 0; i < outer; i++) pr_softmax_row(a + i * len, o + i * len, len);
    return;
  }
#pragma omp parallel for collapse(2) num_threads(x->threads) if (outer * inner * len > 16384)
  for (int64_t i = 0; i < outer; i++)
    for (int64_t j = 0; j < inner; j++) {
      const float *pa = a + i * len * inner + j;
      float *po = o + i * len * inner + j;
      float mx = -INFINITY;
      for (int64_t k = 0; k < len; k++) mx = pa[k * inner] > mx ? pa[k * inner] : mx;
      float sum = 0.f;
      for (int64_t k = 0; k < len; k++) sum += (po[k * inner] = pr_expf(pa[k * inner] - mx));
      float inv = 1.f / sum;
      for (int64_t k = 0; k < len; k++) po[k * inner] *= inv;
    }
}

const pr_op_t pr_op_softmax = {.name = "Softmax",
                               .attrs = "axis",
                               .min_opset = 1,
                               .max_inputs = 1,
                               .infer = infer_softmax,
                               .prepare = prepare_softmax,
                               .run = run_softmax,
                               .destroy = destroy_free};
