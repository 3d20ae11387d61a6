/* Normalizations by statistics over groups of elements:
 * InstanceNormalization (per sample and channel), GroupNormalization (per
 * sample and group of channels), MeanVarianceNormalization (over given
 * axes), and LRN (across neighbouring channels).
 *
 * Notes on the design:
 * - FLOAT, DOUBLE and FLOAT16, computed in double (these ops are off the
 *   hot paths of the models packrat serves; LayerNormalization and
 *   BatchNormalization have their float kernels in normalization.c).
 * - The variance is the population one, two passes (mean, then squared
 *   deviations), as ONNX's references.
 * - GroupNormalization: opset 18 scales and shifts per group (scale and
 *   bias of num_groups values), opset 21 per channel (C values), and its
 *   stash_type only names the precision of the statistics, which is double
 *   here either way. */
#include <math.h>
#include <string.h>

#include "engine/ops/ops.h"

/* Mean and population variance of n elements of a starting at off. */
static void stats(const void *a, pr_dtype_t t, int64_t off, int64_t n, double *mean, double *var) {
  double sum = 0, sq = 0;
  for (int64_t j = 0; j < n; j++) sum += pr__load_double(a, t, off + j);
  double m = n ? sum / (double)n : 0;
  for (int64_t j = 0; j < n; j++) {
    double d = pr__load_double(a, t, off + j) - m;
    sq += d * d;
  }
  *mean = m, *var = n ? sq / (double)n : 0;
}

/* ---- InstanceNormalization / GroupNormalization ---- */

static bool is_group_norm(const pr_node_t *n) {
  return !strcmp(n->op->name, "GroupNormalization");
}

static pr_status_t infer_channel_norm(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *scale = pr__in(c, n, 1), *b = pr__in(c, n, 2);
  if (!x || !pr__is_real(x->dtype)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type");
  if (x->rank < 2) return pr__fail(c, n, PR_ERR_INVALID, "input of rank >= 2");
  int64_t C = x->dims[1], want = C;
  if (is_group_norm(n)) {
    int64_t g = pr__attr_int(n->m, "num_groups", 0);
    if (g < 1 || C % g) return pr__fail(c, n, PR_ERR_INVALID, "num_groups must divide C");
    if (c->opset < 21) want = g;
  }
  if (!scale || !b || scale->dtype != x->dtype || b->dtype != x->dtype ||
      pr__value_numel(scale) != want || pr__value_numel(b) != want)
    return pr__fail(c, n, PR_ERR_INVALID, "scale and B must hold %lld values of X's type",
                    (long long)want);
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, x->dims);
  return PR_OK;
}

static void run_channel_norm(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]], *sv = &x->v[n->in[1]], *bv = &x->v[n->in[2]];
  pr_dtype_t t = in->dtype;
  float eps = pr__attr_float(n->m, "epsilon", 1e-5f);
  int64_t N = in->dims[0], C = in->dims[1], inner = 1, groups = C;
  for (int k = 2; k < in->rank; k++) inner *= in->dims[k];
  bool per_group = false;
  if (is_group_norm(n)) {
    groups = pr__attr_int(n->m, "num_groups", 1);
    per_group = pr__value_numel(sv) == groups && groups != C;
  }
  if (groups < 1) return; /* no channels */
  int64_t cpg = C / groups, len = cpg * inner;
  void *o = pr__xout(x, n, 0);
#pragma omp parallel for collapse(2) num_threads(x->threads) if (N * C * inner > 16384)
  for (int64_t i = 0; i < N; i++)
    for (int64_t g = 0; g < groups; g++) {
      int64_t off = (i * groups + g) * len;
      double m, v;
      stats(in->ptr, t, off, len, &m, &v);
      double inv = 1 / sqrt(v + eps);
      for (int64_t ch = 0; ch < cpg; ch++) {
        int64_t p = per_group ? g : g * cpg + ch;
        double s = pr__load_double(sv->ptr, t, p) * inv, b = pr__load_double(bv->ptr, t, p);
        for (int64_t j = 0; j < inner; j++) {
          int64_t e = off + ch * inner + j;
          pr__store_real(o, t, e, (pr__load_double(in->ptr, t, e) - m) * s + b);
        }
      }
    }
}

const pr_op_t pr__op_instance_norm = {.name = "InstanceNormalization",
                                      .attrs = "epsilon,consumed_inputs",
                                      .min_opset = 1,
                                      .max_inputs = 3,
                                      .infer = infer_channel_norm,
                                      .run = run_channel_norm,
                                      .inplace = true};

const pr_op_t pr__op_group_norm = {.name = "GroupNormalization",
                                   .attrs = "epsilon,num_groups,stash_type",
                                   .min_opset = 18,
                                   .max_inputs = 3,
                                   .infer = infer_channel_norm,
                                   .run = run_channel_norm,
                                   .inplace = true};

/* ---- MeanVarianceNormalization: (X - mean) / (std + 1e-9) over axes ---- */

typedef struct {
  int64_t gstride[PR_MAX_RANK]; /* group stride of each axis (0: normalized over) */
  int64_t groups, count;
  double *acc; /* sum and sum of squares of each group */
} mvn_state_t;

static void destroy_mvn(void *p) {
  mvn_state_t *s = p;
  if (!s) return;
  free(s->acc);
  free(s);
}

static pr_status_t infer_mvn(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0);
  if (!x || !pr__is_real(x->dtype)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type");
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, x->dims);
  return PR_OK;
}

static pr_status_t prepare_mvn(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0);
  mvn_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  static const int64_t def[] = {0, 2, 3};
  const int64_t *axes = def;
  int na = pr__attr_find(n->m, "axes") ? pr__attr_ints(n->m, "axes", &axes) : 3;
  bool over[PR_MAX_RANK] = {false};
  for (int i = 0; i < na; i++) {
    int ax = pr__axis(axes[i], x->rank);
    if (ax < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis %lld out of range", (long long)axes[i]);
    over[ax] = true;
  }
  s->groups = s->count = 1;
  for (int k = x->rank - 1; k >= 0; k--) {
    s->gstride[k] = over[k] ? 0 : s->groups;
    if (over[k])
      s->count *= x->dims[k];
    else
      s->groups *= x->dims[k];
  }
  if (!(s->acc = calloc(2 * (size_t)s->groups, sizeof(double)))) return PR_ERR_NOMEM;
  return PR_OK;
}

static int64_t group_of(const pr_value_t *a, const int64_t *gstride, int64_t i) {
  int64_t g = 0;
  for (int k = a->rank - 1; k >= 0; k--) {
    g += (i % a->dims[k]) * gstride[k];
    i /= a->dims[k];
  }
  return g;
}

static void run_mvn(pr_exec_t *x, pr_node_t *n) {
  mvn_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]];
  pr_dtype_t t = a->dtype;
  int64_t len = pr__value_numel(a);
  double *sum = s->acc, *sq = s->acc + s->groups;
  memset(s->acc, 0, 2 * (size_t)s->groups * sizeof(double));
  for (int64_t i = 0; i < len; i++)
    sum[group_of(a, s->gstride, i)] += pr__load_double(a->ptr, t, i);
  for (int64_t g = 0; g < s->groups; g++) sum[g] /= (double)s->count;
  for (int64_t i = 0; i < len; i++) {
    int64_t g = group_of(a, s->gstride, i);
    double d = pr__load_double(a->ptr, t, i) - sum[g];
    sq[g] += d * d;
  }
  for (int64_t g = 0; g < s->groups; g++) sq[g] = sqrt(sq[g] / (double)s->count) + 1e-9;
  void *o = pr__xout(x, n, 0);
  for (int64_t i = 0; i < len; i++) {
    int64_t g = group_of(a, s->gstride, i);
    pr__store_real(o, t, i, (pr__load_double(a->ptr, t, i) - sum[g]) / sq[g]);
  }
}

const pr_op_t pr__op_mvn = {.name = "MeanVarianceNormalization",
                            .attrs = "axes",
                            .min_opset = 9,
                            .max_inputs = 1,
                            .infer = infer_mvn,
                            .prepare = prepare_mvn,
                            .run = run_mvn,
                            .destroy = destroy_mvn,
                            .inplace = true};

/* ---- LRN: x / (bias + alpha / size * sum of x^2 over size channels)^beta ---- */

static pr_status_t infer_lrn(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0);
  if (!x || !pr__is_real(x->dtype)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type");
  if (x->rank < 2) return pr__fail(c, n, PR_ERR_INVALID, "input of rank >= 2");
  if (pr__attr_int(n->m, "size", 0) < 1) return pr__fail(c, n, PR_ERR_INVALID, "size must be >= 1");
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, x->dims);
  return PR_OK;
}

static void run_lrn(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]];
  pr_dtype_t t = a->dtype;
  int64_t size = pr__attr_int(n->m, "size", 1);
  double alpha = pr__attr_float(n->m, "alpha", 1e-4f), beta = pr__attr_float(n->m, "beta", 0.75f),
         bias = pr__attr_float(n->m, "bias", 1.f);
  int64_t N = a->dims[0], C = a->dims[1], inner = 1, lo = (size - 1) / 2, hi = size - 1 - lo;
  for (int k = 2; k < a->rank; k++) inner *= a->dims[k];
  void *o = pr__xout(x, n, 0);
#pragma omp parallel for collapse(2) num_threads(x->threads) if (N * C * inner > 16384)
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < inner; j++) {
      for (int64_t ch = 0; ch < C; ch++) {
        double sq = 0;
        for (int64_t k = ch - lo < 0 ? 0 : ch - lo; k <= ch + hi && k < C; k++) {
          double v = pr__load_double(a->ptr, t, (i * C + k) * inner + j);
          sq += v * v;
        }
        int64_t e = (i * C + ch) * inner + j;
        pr__store_real(o, t, e,
                       pr__load_double(a->ptr, t, e) / pow(bias + alpha / (double)size * sq, beta));
      }
    }
}

const pr_op_t pr__op_lrn = {.name = "LRN",
                            .attrs = "alpha,beta,bias,size",
                            .min_opset = 1,
                            .max_inputs = 1,
                            .infer = infer_lrn,
                            .run = run_lrn};
