/* Reductions along axes: ReduceMean, ReduceSum, ReduceMax, and the running
 * sum CumSum. */
#include <math.h>
#include <string.h>

#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

/* ---- ReduceMean / ReduceSum / ReduceMax ---- */

typedef enum { R_MEAN, R_SUM, R_MAX } reduce_kind_t;

typedef struct {
  reduce_kind_t kind;
  bool reduce[PR_MAX_RANK];
  int64_t ostride[PR_MAX_RANK]; /* output element stride of each input axis (0: reduced) */
  /* contiguous block fast path: outer x red x inner */
  bool block;
  int64_t outer, red, inner;
} reduce_state_t;

static pr_status_t reduce_axes(pr_compile_t *c, pr_node_t *n, const pr_value_t *a, bool *reduce) {
  int64_t axes[PR_MAX_RANK];
  int na = -1;
  bool from_input = !strcmp(n->op->name, "ReduceSum") ? c->opset >= 13 : c->opset >= 18;
  if (from_input) {
    pr_value_t *av = pr_in(c, n, 1);
    if (!av || pr_value_numel(av) == 0)
      na = 0;
    else if ((na = pr_const_ints(av, axes, PR_MAX_RANK)) < 0)
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "axes must be constant");
  } else {
    const int64_t *v;
    na = pr_attr_ints(n->m, "axes", &v);
    if (na > PR_MAX_RANK) return pr_fail(c, n, PR_ERR_INVALID, "too many axes");
    for (int i = 0; i < na; i++) axes[i] = v[i];
  }
  for (int k = 0; k < a->rank; k++) reduce[k] = false;
  if (na == 0) {
    bool noop = pr_attr_int(n->m, "noop_with_empty_axes", 0) != 0;
    for (int k = 0; k < a->rank; k++) reduce[k] = !noop;
    return PR_OK;
  }
  for (int i = 0; i < na; i++) {
    int ax = pr_axis(axes[i], a->rank);
    if (ax < 0) return pr_fail(c, n, PR_ERR_INVALID, "axis %lld out of range", (long long)axes[i]);
    reduce[ax] = true;
  }
  return PR_OK;
}

static pr_status_t infer_reduce(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_INT32 && a->dtype != PR_DTYPE_INT64)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s (FLOAT, INT32, INT64 are)",
                   pr_dtype_name(a->dtype));
  bool reduce[PR_MAX_RANK];
  pr_status_t st = reduce_axes(c, n, a, reduce);
  if (st) return st;
  bool keep = pr_attr_int(n->m, "keepdims", 1) != 0;
  int64_t d[PR_MAX_RANK];
  int r = 0;
  for (int k = 0; k < a->rank; k++) {
    if (!reduce[k])
      d[r++] = a->dims[k];
    else if (keep)
      d[r++] = 1;
  }
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static pr_status_t prepare_reduce(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  reduce_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->kind = !strcmp(n->op->name, "ReduceMean")  ? R_MEAN
            : !strcmp(n->op->name, "ReduceSum") ? R_SUM
                                                : R_MAX;
  pr_status_t st = reduce_axes(c, n, a, s->reduce);
  if (st) return st;
  int first = -1, last = -1;
  for (int k = 0; k < a->rank; k++)
    if (s->reduce[k] && a->dims[k] != 1) {
      if (first < 0) first = k;
      last = k;
    }
  int64_t e = 1;
  for (int k = a->rank - 1; k >= 0; k--) {
    s->ostride[k] = s->reduce[k] ? 0 : e;
    if (!s->reduce[k]) e *= a->dims[k];
  }
  s->block = true;
  for (int k = first; first >= 0 && k <= last; k++) s->block &= s->reduce[k] || a->dims[k] == 1;
  s->outer = s->red = s->inner = 1;
  for (int k = 0; k < a->rank; k++) {
    if (first < 0 || k < first)
      s->outer *= a->dims[k];
    else if (k <= last)
      s->red *= a->dims[k];
    else
      s->inner *= a->dims[k];
  }
  return PR_OK;
}

/* Integer reductions, accumulated in the element type (as numpy's sum of
 * that type) and wrapping on overflow (intmath.h); the mean is that sum
 * divided by the count, truncated toward zero. */
// clang-format off
#define REDUCE_INT(T, ADD)                                                                        \
  static void reduce_##T(const reduce_state_t *s, const pr_value_t *a, const pr_value_t *o) {    \
    const T *in = a->ptr;                                                                         \
    T *out = o->ptr;                                                                              \
    int64_t on = pr_value_numel(o), len = pr_value_numel(a), count = len / (on ? on : 1);         \
    for (int64_t i = 0; i < on; i++) out[i] = 0;                                                  \
    for (int64_t i = 0; i < len; i++) {                                                           \
      int64_t rem = i, off = 0, first = 1;                                                        \
      for (int k = a->rank - 1; k >= 0; k--) {                                                    \
        int64_t idx = rem % a->dims[k];                                                           \
        off += idx * s->ostride[k];                                                               \
        if (s->reduce[k] && idx) first = 0;                                                       \
        rem /= a->dims[k];                                                                        \
      }                                                                                           \
      if (s->kind == R_MAX) /* the first value of each output starts its max */                  \
        out[off] = first || in[i] > out[off] ? in[i] : out[off];                                  \
      else                                                                                        \
        out[off] = ADD(out[off], in[i]);                                                          \
    }                                                                                             \
    if (s->kind == R_MEAN && count)                                                               \
      for (int64_t i = 0; i < on; i++) out[i] = (T)((int64_t)out[i] / count);                     \
  }
REDUCE_INT(int32_t, pr_i32_add)
REDUCE_INT(int64_t, pr_i64_add)
// clang-format on

static void run_reduce(pr_exec_t *x, pr_node_t *n) {
  const reduce_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  if (a->dtype != PR_DTYPE_FLOAT) {
    if (a->dtype == PR_DTYPE_INT32)
      reduce_int32_t(s, a, o);
    else
      reduce_int64_t(s, a, o);
    return;
  }
  const float *in = a->ptr;
  float *out = o->ptr;
  if (s->block) {
    int64_t outer = s->outer, red = s->red, inner = s->inner;
#pragma omp parallel for num_threads(x->threads) if (outer * red * inner > 16384)
    for (int64_t i = 0; i < outer; i++) {
      float *po = out + i * inner;
      const float *pi = in + i * red * inner;
      for (int64_t j = 0; j < inner; j++) po[j] = s->kind == R_MAX ? -INFINITY : 0.f;
      for (int64_t r = 0; r < red; r++)
        for (int64_t j = 0; j < inner; j++) {
          float v = pi[r * inner + j];
          po[j] = s->kind == R_MAX ? (v > po[j] ? v : po[j]) : po[j] + v;
        }
      if (s->kind == R_MEAN)
        for (int64_t j = 0; j < inner; j++) po[j] /= (float)red;
    }
    return;
  }
  /* general axes: every input element lands in its output element */
  int64_t on = pr_value_numel(o), count = pr_value_numel(a) / (on ? on : 1);
  for (int64_t i = 0; i < on; i++) out[i] = s->kind == R_MAX ? -INFINITY : 0.f;
  int64_t len = pr_value_numel(a);
  for (int64_t i = 0; i < len; i++) {
    int64_t rem = i, off = 0;
    for (int k = a->rank - 1; k >= 0; k--) {
      off += (rem % a->dims[k]) * s->ostride[k];
      rem /= a->dims[k];
    }
    out[off] = s->kind == R_MAX ? fmaxf(out[off], in[i]) : out[off] + in[i];
  }
  if (s->kind == R_MEAN)
    for (int64_t i = 0; i < on; i++) out[i] /= (float)count;
}

#define REDUCE_OP(sym, oname)                                                 \
  const pr_op_t pr_op_##sym = {.name = oname,                                 \
                               .attrs = "axes,keepdims,noop_with_empty_axes", \
                               .min_opset = 1,                                \
                               .max_inputs = 2,                               \
                               .infer = infer_reduce,                         \
                               .prepare = prepare_reduce,                     \
                               .run = run_reduce,                             \
                               .destroy = free};
REDUCE_OP(reduce_mean, "ReduceMean")
REDUCE_OP(reduce_sum, "ReduceSum")
REDUCE_OP(reduce_max, "ReduceMax")

/* ---- CumSum(x, axis) ---- */

static pr_status_t infer_cumsum(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  int64_t axis;
  if (pr_const_ints(pr_in(c, n, 1), &axis, 1) != 1)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "axis must be a constant scalar");
  if (pr_axis(axis, a->rank) < 0) return pr_fail(c, n, PR_ERR_INVALID, "axis out of range");
  if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_DOUBLE && a->dtype != PR_DTYPE_INT32 &&
      a->dtype != PR_DTYPE_INT64)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static void run_cumsum(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]], *av = &x->v[n->in[1]];
  int64_t axis_v =
      av->dtype == PR_DTYPE_INT64 ? *(const int64_t *)av->ptr : *(const int32_t *)av->ptr;
  int axis = pr_axis(axis_v, a->rank);
  bool excl = pr_attr_int(n->m, "exclusive", 0) != 0, rev = pr_attr_int(n->m, "reverse", 0) != 0;
  int64_t outer = 1, len = a->dims[axis], inner = 1;
  for (int k = 0; k < axis; k++) outer *= a->dims[k];
  for (int k = axis + 1; k < a->rank; k++) inner *= a->dims[k];
  for (int64_t i = 0; i < outer; i++)
    for (int64_t j = 0; j < inner; j++) {
      double acc = 0;
      uint64_t iacc = 0; /* integers wrap in two's complement (as intmath.h) */
      for (int64_t s = 0; s < len; s++) {
        int64_t p = rev ? len - 1 - s : s, off = (i * len + p) * inner + j;
        switch (a->dtype) {
#define CUM(T, ACC, ACC_T)                          \
  {                                                 \
    T v = ((const T *)a->ptr)[off];                 \
    if (excl)                                       \
      ((T *)o->ptr)[off] = (T)ACC, ACC += (ACC_T)v; \
    else                                            \
      ACC += (ACC_T)v, ((T *)o->ptr)[off] = (T)ACC; \
  }
          case PR_DTYPE_FLOAT: CUM(float, acc, double) break;
          case PR_DTYPE_DOUBLE: CUM(double, acc, double) break;
          case PR_DTYPE_INT32: CUM(int32_t, iacc, uint64_t) break;
          default: CUM(int64_t, iacc, uint64_t) break;
#undef CUM
        }
      }
    }
}

const pr_op_t pr_op_cumsum = {.name = "CumSum",
                              .attrs = "exclusive,reverse",
                              .min_opset = 11,
                              .max_inputs = 2,
                              .infer = infer_cumsum,
                              .run = run_cumsum};
