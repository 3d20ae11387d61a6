/* Normalizations along axes: LayerNormalization (and the kernel the fuser
 * makes from a decomposed one), BatchNormalization (inference) and Softmax.
 *
 * LayerNormalization (opset 17): each row (the axes from `axis` on) scaled
 * to zero mean and unit variance, then by Scale and B. Optional Mean and
 * InvStdDev outputs. */
#include <math.h>
#include <string.h>

#include "engine/ops/fastmath.h"
#include "engine/ops/ops.h"

/* ---- LayerNormalization ---- */

static pr_status_t infer_layer_norm(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *scale = pr__in(c, n, 1), *b = pr__in(c, n, 2);
  if ((x->dtype != PR_DTYPE_FLOAT && x->dtype != PR_DTYPE_DOUBLE) || !scale ||
      scale->dtype != x->dtype || (b && b->dtype != x->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "X, Scale and B of one type, FLOAT or DOUBLE");
  int axis = pr__axis(pr__attr_int(n->m, "axis", -1), x->rank);
  if (axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  int64_t row = 1;
  for (int k = axis; k < x->rank; k++) row *= x->dims[k];
  if (pr__value_numel(scale) != row || (b && pr__value_numel(b) != row))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED,
                    "Scale and B must cover the normalized axes (%lld values)", (long long)row);
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, x->dims);
  int64_t d[PR_MAX_RANK];
  for (int k = 0; k < x->rank; k++) d[k] = k < axis ? x->dims[k] : 1;
  for (int k = 1; k < 3; k++)
    if (pr__out(c, n, k)) pr__value_set_shape(pr__out(c, n, k), PR_DTYPE_FLOAT, x->rank, d);
  return PR_OK;
}

/* A LayerNorm's rows (the normalized axes flattened) and epsilon. The fused
 * kernel (from a decomposed LayerNorm) has no model node: last axis,
 * epsilon in post.alpha[0]. */
static void ln_rows(const pr_value_t *in, const pr_node_t *n, int64_t *rows, int64_t *len,
                    float *eps) {
  int axis = pr__axis(n->m ? pr__attr_int(n->m, "axis", -1) : -1, in->rank);
  *eps = n->m ? pr__attr_float(n->m, "epsilon", 1e-5f) : n->post.alpha[0];
  *len = 1;
  for (int k = axis; k < in->rank; k++) *len *= in->dims[k];
  *rows = pr__value_numel(in) / (*len ? *len : 1);
}

/* LayerNormalization of doubles: the same two passes, in double; Mean and
 * InvStdDev stay float (stash_type). */
static void run_layer_norm_f64(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]];
  int64_t len, rows;
  float eps;
  ln_rows(in, n, &rows, &len, &eps);
  const double *a = in->ptr, *scale = pr__xin(x, n, 1);
  const double *bias = n->n_in > 2 && n->in[2] >= 0 ? pr__xin(x, n, 2) : NULL;
  double *o = pr__xout(x, n, 0);
  float *mean_out = n->n_out > 1 && n->out[1] >= 0 ? pr__xout(x, n, 1) : NULL;
  float *inv_out = n->n_out > 2 && n->out[2] >= 0 ? pr__xout(x, n, 2) : NULL;
  for (int64_t r = 0; r < rows; r++) {
    const double *pa = a + r * len;
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < len; j++) sum += pa[j];
    double m = sum / (double)len;
    for (int64_t j = 0; j < len; j++) sq += (pa[j] - m) * (pa[j] - m);
    double inv = 1 / sqrt(sq / (double)len + eps);
    for (int64_t j = 0; j < len; j++)
      o[r * len + j] = (pa[j] - m) * inv * scale[j] + (bias ? bias[j] : 0);
    if (mean_out) mean_out[r] = (float)m;
    if (inv_out) inv_out[r] = (float)inv;
  }
}

static void run_layer_norm(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]];
  if (in->dtype == PR_DTYPE_DOUBLE) {
    run_layer_norm_f64(x, n);
    return;
  }
  int64_t len, rows;
  float eps;
  ln_rows(in, n, &rows, &len, &eps);
  const float *a = in->ptr, *scale = pr__xin(x, n, 1);
  const float *bias = n->n_in > 2 && n->in[2] >= 0 ? pr__xin(x, n, 2) : NULL;
  float *o = pr__xout(x, n, 0);
  float *mean_out = n->n_out > 1 && n->out[1] >= 0 ? pr__xout(x, n, 1) : NULL;
  float *inv_out = n->n_out > 2 && n->out[2] >= 0 ? pr__xout(x, n, 2) : NULL;
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

const pr_op_t pr__op_layer_norm = {.name = "LayerNormalization",
                                   .attrs = "axis,epsilon,stash_type",
                                   .min_opset = 17,
                                   .max_inputs = 3,
                                   .infer = infer_layer_norm,
                                   .run = run_layer_norm,
                                   .inplace = true};

const pr_op_t pr__op_layer_norm_fused = {
    .name = "LayerNorm", .run = run_layer_norm, .inplace = true};

/* ---- BatchNormalization (inference) ---- */

/* Training mode (opset 14: training_mode=1, outputs Y, running mean and
 * running variance) normalizes by the batch's statistics; the older
 * training outputs (saved mean and variance, opsets 7 and 9) and
 * spatial=0 are refused. */
static pr_status_t check_bn(const pr_mnode_t *m, int opset, char *err, size_t len) {
  bool training = pr__attr_int(m, "training_mode", 0) != 0;
  if ((training && (opset < 14 || m->n_out > 3)) || (!training && m->n_out > 1) ||
      pr__attr_int(m, "spatial", 1) != 1) {
    snprintf(err, len, "node '%s' (BatchNormalization): training mode is not supported",
             pr__mnode_name(m));
    return PR_ERR_UNSUPPORTED;
  }
  return PR_OK;
}

static pr_status_t infer_bn(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0);
  if (!x || (x->dtype != PR_DTYPE_FLOAT && x->dtype != PR_DTYPE_DOUBLE) || x->rank < 2)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "input must be FLOAT or DOUBLE of rank >= 2");
  if (x->dtype == PR_DTYPE_DOUBLE && pr__attr_int(n->m, "training_mode", 0))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "training mode of DOUBLE");
  for (int k = 1; k < 5; k++) {
    pr_value_t *p = pr__in(c, n, k);
    if (!p || p->dtype != x->dtype || pr__value_numel(p) != x->dims[1])
      return pr__fail(c, n, PR_ERR_INVALID, "input %d must hold %lld values of X's type", k,
                      (long long)x->dims[1]);
  }
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, x->dims);
  for (int k = 1; k < 3; k++)
    if (pr__out(c, n, k)) pr__value_set_shape(pr__out(c, n, k), PR_DTYPE_FLOAT, 1, x->dims + 1);
  return PR_OK;
}

/* Training mode: per channel, the batch's mean and (population) variance
 * normalize X; the running statistics are the inputs' moved toward them by
 * 1 - momentum. */
static void run_bn_training(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]];
  const float *scale = pr__xin(x, n, 1), *bias = pr__xin(x, n, 2), *mean = pr__xin(x, n, 3),
              *var = pr__xin(x, n, 4);
  float eps = pr__attr_float(n->m, "epsilon", 1e-5f),
        momentum = pr__attr_float(n->m, "momentum", 0.9f);
  float *rmean = n->n_out > 1 && n->out[1] >= 0 ? pr__xout(x, n, 1) : NULL;
  float *rvar = n->n_out > 2 && n->out[2] >= 0 ? pr__xout(x, n, 2) : NULL;
  int64_t N = in->dims[0], C = in->dims[1], inner = 1;
  for (int k = 2; k < in->rank; k++) inner *= in->dims[k];
  const float *a = in->ptr;
  float *o = pr__xout(x, n, 0);
  for (int64_t ch = 0; ch < C; ch++) {
    double sum = 0, sq = 0, cnt = (double)(N * inner);
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < inner; j++) sum += a[(i * C + ch) * inner + j];
    double m = cnt ? sum / cnt : 0;
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < inner; j++) {
        double d = a[(i * C + ch) * inner + j] - m;
        sq += d * d;
      }
    double v = cnt ? sq / cnt : 0, s = scale[ch] / sqrt(v + eps);
    /* the running statistics first: Y may share a buffer with X */
    if (rmean) rmean[ch] = (float)(mean[ch] * momentum + m * (1 - momentum));
    if (rvar) rvar[ch] = (float)(var[ch] * momentum + v * (1 - momentum));
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < inner; j++) {
        int64_t off = (i * C + ch) * inner + j;
        o[off] = (float)((a[off] - m) * s + bias[ch]);
      }
  }
}

/* Inference BatchNormalization of doubles, in double. */
static void run_bn_f64(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]];
  const double *scale = pr__xin(x, n, 1), *bias = pr__xin(x, n, 2), *mean = pr__xin(x, n, 3),
               *var = pr__xin(x, n, 4), *a = in->ptr;
  double eps = pr__attr_float(n->m, "epsilon", 1e-5f), *o = pr__xout(x, n, 0);
  int64_t N = in->dims[0], C = in->dims[1], inner = 1;
  for (int k = 2; k < in->rank; k++) inner *= in->dims[k];
  for (int64_t i = 0; i < N; i++)
    for (int64_t ch = 0; ch < C; ch++) {
      double s = scale[ch] / sqrt(var[ch] + eps), t = bias[ch] - mean[ch] * s;
      for (int64_t j = 0; j < inner; j++)
        o[(i * C + ch) * inner + j] = a[(i * C + ch) * inner + j] * s + t;
    }
}

static void run_bn(pr_exec_t *x, pr_node_t *n) {
  if (pr__attr_int(n->m, "training_mode", 0)) {
    run_bn_training(x, n);
    return;
  }
  const pr_value_t *in = &x->v[n->in[0]];
  if (in->dtype == PR_DTYPE_DOUBLE) {
    run_bn_f64(x, n);
    return;
  }
  const float *scale = pr__xin(x, n, 1), *bias = pr__xin(x, n, 2), *mean = pr__xin(x, n, 3),
              *var = pr__xin(x, n, 4);
  float eps = pr__attr_float(n->m, "epsilon", 1e-5f);
  int64_t N = in->dims[0], C = in->dims[1], inner = 1;
  for (int k = 2; k < in->rank; k++) inner *= in->dims[k];
  const float *a = in->ptr;
  float *o = pr__xout(x, n, 0);
#pragma omp parallel for collapse(2) num_threads(x->threads) if (N * C * inner > 16384)
  for (int64_t i = 0; i < N; i++)
    for (int64_t ch = 0; ch < C; ch++) {
      float s = scale[ch] / sqrtf(var[ch] + eps), t = bias[ch] - mean[ch] * s;
      const float *pa = a + (i * C + ch) * inner;
      float *po = o + (i * C + ch) * inner;
      for (int64_t j = 0; j < inner; j++) po[j] = pa[j] * s + t;
    }
}

const pr_op_t pr__op_batch_norm = {.name = "BatchNormalization",
                                   .attrs = "epsilon,momentum,training_mode,spatial,is_test",
                                   .min_opset = 7,
                                   .max_inputs = 5,
                                   .check = check_bn,
                                   .infer = infer_bn,
                                   .run = run_bn,
                                   .inplace = true};

/* ---- Softmax ---- */

static pr_status_t infer_softmax(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0);
  if (!x || !pr__is_real(x->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "FLOAT, DOUBLE or FLOAT16 only");
  int axis = pr__axis(pr__attr_int(n->m, "axis", c->opset >= 13 ? -1 : 1), x->rank);
  if (axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, x->dims);
  return PR_OK;
}

typedef struct {
  int64_t outer, len, inner; /* rows, the softmax axis, the stride between its elements */
  bool log;                  /* LogSoftmax */
} softmax_state_t;

static pr_status_t prepare_softmax(pr_compile_t *c, pr_node_t *n) {
  /* opset >= 13: along one axis (default -1); before: everything from the
   * axis on (default 1) is one flat row */
  pr_value_t *x = pr__in(c, n, 0);
  bool coerce = c->opset < 13;
  int axis = pr__axis(pr__attr_int(n->m, "axis", coerce ? 1 : -1), x->rank);
  softmax_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->log = !strcmp(n->op->name, "LogSoftmax");
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

/* LogSoftmax, and Softmax of DOUBLE and FLOAT16: in double. */
static void softmax_generic(const softmax_state_t *s, const pr_value_t *a, const pr_value_t *o,
                            int threads) {
  int64_t outer = s->outer, len = s->len, inner = s->inner;
  pr_dtype_t t = a->dtype;
#pragma omp parallel for collapse(2) num_threads(threads) if (outer * inner * len > 16384)
  for (int64_t i = 0; i < outer; i++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = i * len * inner + j;
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < len; k++) {
        double v = pr__load_double(a->ptr, t, base + k * inner);
        mx = v > mx ? v : mx;
      }
      for (int64_t k = 0; k < len; k++)
        sum += exp(pr__load_double(a->ptr, t, base + k * inner) - mx);
      double lse = log(sum);
      for (int64_t k = 0; k < len; k++) {
        double v = pr__load_double(a->ptr, t, base + k * inner) - mx;
        pr__store_real(o->ptr, t, base + k * inner, s->log ? v - lse : exp(v) / sum);
      }
    }
}

static void run_softmax(pr_exec_t *x, pr_node_t *n) {
  const softmax_state_t *s = n->state;
  int64_t outer = s->outer, len = s->len, inner = s->inner;
  const pr_value_t *av = &x->v[n->in[0]];
  if (s->log || av->dtype != PR_DTYPE_FLOAT) {
    softmax_generic(s, av, &x->v[n->out[0]], x->threads);
    return;
  }
  const float *a = pr__xin(x, n, 0);
  float *o = pr__xout(x, n, 0);
  if (inner == 1) { /* contiguous rows: SIMD reductions */
#pragma omp parallel for num_threads(x->threads) if (outer * len > 16384)
    for (int64_t i = 0; i < outer; i++) pr__softmax_row(a + i * len, o + i * len, len);
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
      for (int64_t k = 0; k < len; k++) sum += (po[k * inner] = pr__expf(pa[k * inner] - mx));
      float inv = 1.f / sum;
      for (int64_t k = 0; k < len; k++) po[k * inner] *= inv;
    }
}

const pr_op_t pr__op_softmax = {.name = "Softmax",
                                .attrs = "axis",
                                .min_opset = 1,
                                .max_inputs = 1,
                                .infer = infer_softmax,
                                .prepare = prepare_softmax,
                                .run = run_softmax,
                                .destroy = free};

const pr_op_t pr__op_log_softmax = {.name = "LogSoftmax",
                                    .attrs = "axis",
                                    .min_opset = 1,
                                    .max_inputs = 1,
                                    .infer = infer_softmax,
                                    .prepare = prepare_softmax,
                                    .run = run_softmax,
                                    .destroy = free};
