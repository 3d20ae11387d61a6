/* LayerNormalization (opset 17): each row (the axes from `axis` on) scaled
 * to zero mean and unit variance, then by Scale and B. Optional Mean and
 * InvStdDev outputs. */
#include <math.h>

#include "engine/ops/ops.h"

static pr_status_t infer_layer_norm(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr_in(c, n, 0), *scale = pr_in(c, n, 1), *b = pr_in(c, n, 2);
  if (x->dtype != PR_DTYPE_FLOAT || !scale || scale->dtype != PR_DTYPE_FLOAT ||
      (b && b->dtype != PR_DTYPE_FLOAT))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT");
  int axis = pr_axis(pr_attr_int(n->m, "axis", -1), x->rank);
  if (axis < 0) return pr_fail(c, n, PR_ERR_INVALID, "axis out of range");
  int64_t row = 1;
  for (int k = axis; k < x->rank; k++) row *= x->dims[k];
  if (pr_value_numel(scale) != row || (b && pr_value_numel(b) != row))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED,
                   "Scale and B must cover the normalized axes (%lld values)", (long long)row);
  pr_value_set_shape(pr_out(c, n, 0), x->dtype, x->rank, x->dims);
  int64_t d[PR_MAX_RANK];
  for (int k = 0; k < x->rank; k++) d[k] = k < axis ? x->dims[k] : 1;
  for (int k = 1; k < 3; k++)
    if (pr_out(c, n, k)) pr_value_set_shape(pr_out(c, n, k), PR_DTYPE_FLOAT, x->rank, d);
  return PR_OK;
}

static void run_layer_norm(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]];
  /* the fused kernel (from a decomposed LayerNorm) has no model node: last
   * axis, epsilon in post.alpha[0] */
  int axis = pr_axis(n->m ? pr_attr_int(n->m, "axis", -1) : -1, in->rank);
  float eps = n->m ? pr_attr_float(n->m, "epsilon", 1e-5f) : n->post.alpha[0];
  int64_t len = 1, rows;
  for (int k = axis; k < in->rank; k++) len *= in->dims[k];
  rows = pr_value_numel(in) / (len ? len : 1);
  const float *a = in->ptr, *scale = pr_xin(x, n, 1);
  const float *bias = n->n_in > 2 && n->in[2] >= 0 ? pr_xin(x, n, 2) : NULL;
  float *o = pr_xout(x, n, 0);
  float *mean_out = n->n_out > 1 && n->out[1] >= 0 ? pr_xout(x, n, 1) : NULL;
  float *inv_out = n->n_out > 2 && n->out[2] >= 0 ? pr_xout(x, n, 2) : NULL;
#pragma omp parallel for num_threads(x->threads) if (rows * len > 16384)
  for (int64_t r = 0; r < rows; r++) {
    const float *pa = a + r * len;
    float *po = o + r * len;
    /* two passes in float with SIMD partial sums: exact enough (one row is
     * at most a few thousand values) and vectorized */
    float sum = 0.f, sq = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < len; j++) sum += pa[j];
    float m = sum / (float)len;
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < len; j++) sq += (pa[j] - m) * (pa[j] - m);
    float inv = 1.f / sqrtf(sq / (float)len + eps);
    if (bias) {
#pragma omp simd
      for (int64_t j = 0; j < len; j++) po[j] = (pa[j] - m) * inv * scale[j] + bias[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < len; j++) po[j] = (pa[j] - m) * inv * scale[j];
    }
    if (mean_out) mean_out[r] = m;
    if (inv_out) inv_out[r] = inv;
  }
}

const pr_op_t pr_op_layer_norm = {.name = "LayerNormalization",
                                  .attrs = "axis,epsilon,stash_type",
                                  .min_opset = 17,
                                  .max_inputs = 3,
                                  .infer = infer_layer_norm,
                                  .run = run_layer_norm,
                                  .inplace = true};

const pr_op_t pr_op_layer_norm_fused = {
    .name = "LayerNorm", .run = run_layer_norm, .inplace = true};
