/* Reductions along axes: ReduceMean, ReduceSum, ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
 * ReduceSumSquare, and the running sum CumSum.
 *
 * Notes on the design:
 * - The axes are an attribute before opset 18 (ReduceSum: 13) and an
 *   optional constant input from then on; no axes reduce every axis unless
 *   noop_with_empty_axes, where each element is reduced on its own (the sum
 *   of squares of one value is its square: the same rule as any axes).
 * - FLOAT ReduceMean/Sum/Max keep their own kernel (the BERT and ResNet
 *   paths): contiguous blocks in parallel with float accumulators. Every
 *   other kind and type goes through the generic kernel: floating types and
 *   the L2/log kinds of integers accumulate in double; integer sums,
 *   products, L1, sum of squares and mean wrap in two's complement
 *   (intmath.h; the mean is the wrapped sum divided by the count,
 *   truncated), integer min and max compare exactly (unsigned as unsigned).
 * - An empty reduction gives the identity of the kind: 0 for the sums, 1
 *   for the product, -inf for the log kinds, the type's largest (Min) or
 *   lowest (Max) value, NaN for a floating mean and 0 for an integer one. */
#include <math.h>
#include <string.h>

#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"
#include "engine/ops/typed.h"

/* ---- the Reduce* operators ---- */

typedef enum {
  R_MEAN,
  R_SUM,
  R_MAX,
  R_MIN,
  R_PROD,
  R_L1,
  R_L2,
  R_LOG_SUM,
  R_LOG_SUM_EXP,
  R_SUM_SQUARE
} reduce_kind_t;

static const struct {
  const char *name;
  reduce_kind_t kind;
} reduce_kinds[] = {
    {"ReduceMean", R_MEAN},
    {"ReduceSum", R_SUM},
    {"ReduceMax", R_MAX},
    {"ReduceMin", R_MIN},
    {"ReduceProd", R_PROD},
    {"ReduceL1", R_L1},
    {"ReduceL2", R_L2},
    {"ReduceLogSum", R_LOG_SUM},
    {"ReduceLogSumExp", R_LOG_SUM_EXP},
    {"ReduceSumSquare", R_SUM_SQUARE},
};

typedef struct {
  reduce_kind_t kind;
  bool reduce[PR_MAX_RANK];
  int64_t ostride[PR_MAX_RANK]; /* output element stride of each input axis (0: reduced) */
  int64_t count;                /* input elements per output element */
  /* contiguous block fast path: outer x red x inner */
  bool block;
  int64_t outer, red, inner;
  /* generic kernel: 2 accumulators per output element (doubles or uint64) */
  void *acc;
} reduce_state_t;

static void destroy_reduce(void *p) {
  reduce_state_t *s = p;
  if (!s) return;
  free(s->acc);
  free(s);
}

static reduce_kind_t reduce_kind(const pr_node_t *n) {
  for (size_t i = 0; i < sizeof reduce_kinds / sizeof reduce_kinds[0]; i++)
    if (!strcmp(n->op->name, reduce_kinds[i].name)) return reduce_kinds[i].kind;
  assert(0 && "not a Reduce op");
  return R_SUM;
}

static bool is_float_type(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE || t == PR_DTYPE_FLOAT16;
}
static bool is_unsigned_type(pr_dtype_t t) {
  return t == PR_DTYPE_UINT8 || t == PR_DTYPE_UINT16 || t == PR_DTYPE_UINT32 ||
         t == PR_DTYPE_UINT64 || t == PR_DTYPE_BOOL;
}

static pr_status_t reduce_axes(pr_compile_t *c, pr_node_t *n, const pr_value_t *a, bool *reduce) {
  int64_t axes[PR_MAX_RANK];
  int na = -1;
  bool from_input = !strcmp(n->op->name, "ReduceSum") ? c->opset >= 13 : c->opset >= 18;
  if (from_input) {
    pr_value_t *av = pr__in(c, n, 1);
    if (!av || pr__value_numel(av) == 0)
      na = 0;
    else if ((na = pr__const_ints(av, axes, PR_MAX_RANK)) < 0)
      return pr__need_values(c, n, "axes must be constant");
  } else {
    if (pr__in(c, n, 1))
      return pr__fail(c, n, PR_ERR_INVALID, "axes is an attribute in opset %d", c->opset);
    const int64_t *v;
    na = pr__attr_ints(n->m, "axes", &v);
    if (na > PR_MAX_RANK) return pr__fail(c, n, PR_ERR_INVALID, "too many axes");
    for (int i = 0; i < na; i++) axes[i] = v[i];
  }
  for (int k = 0; k < a->rank; k++) reduce[k] = false;
  if (na == 0) {
    bool noop = from_input && pr__attr_int(n->m, "noop_with_empty_axes", 0) != 0;
    for (int k = 0; k < a->rank; k++) reduce[k] = !noop;
    return PR_OK;
  }
  for (int i = 0; i < na; i++) {
    int ax = pr__axis(axes[i], a->rank);
    if (ax < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis %lld out of range", (long long)axes[i]);
    reduce[ax] = true;
  }
  return PR_OK;
}

static pr_status_t infer_reduce(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  reduce_kind_t kind = reduce_kind(n);
  bool bool_ok = kind == R_MIN || kind == R_MAX;
  if (!pr__typed_supported(a->dtype) || (a->dtype == PR_DTYPE_BOOL && !bool_ok))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  bool reduce[PR_MAX_RANK];
  pr_status_t st = reduce_axes(c, n, a, reduce);
  if (st) return st;
  bool keep = pr__attr_int(n->m, "keepdims", 1) != 0;
  int64_t d[PR_MAX_RANK];
  int r = 0;
  for (int k = 0; k < a->rank; k++) {
    if (!reduce[k])
      d[r++] = a->dims[k];
    else if (keep)
      d[r++] = 1;
  }
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

/* The FLOAT Mean/Sum/Max kernel of run_reduce (the rest: the generic one). */
static bool float_fast(reduce_kind_t kind, pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT && (kind == R_MEAN || kind == R_SUM || kind == R_MAX);
}

static pr_status_t prepare_reduce(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  reduce_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->kind = reduce_kind(n);
  pr_status_t st = reduce_axes(c, n, a, s->reduce);
  if (st) return st;
  int first = -1, last = -1;
  for (int k = 0; k < a->rank; k++)
    if (s->reduce[k] && a->dims[k] != 1) {
      if (first < 0) first = k;
      last = k;
    }
  int64_t e = 1;
  s->count = 1;
  for (int k = a->rank - 1; k >= 0; k--) {
    s->ostride[k] = s->reduce[k] ? 0 : e;
    if (!s->reduce[k]) e *= a->dims[k];
    if (s->reduce[k]) s->count *= a->dims[k];
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
  if (!float_fast(s->kind, a->dtype)) {
    int64_t on = pr__value_numel(pr__out(c, n, 0));
    if (!(s->acc = malloc(2 * (size_t)(on ? on : 1) * sizeof(double)))) return PR_ERR_NOMEM;
  }
  return PR_OK;
}

/* Advance the input position idx by one element (row-major); *off follows
 * it in the output. */
static inline void next_off(const pr_value_t *a, const reduce_state_t *s, int64_t *idx,
                            int64_t *off) {
  for (int k = a->rank - 1; k >= 0; k--) {
    *off += s->ostride[k];
    if (++idx[k] < a->dims[k]) return;
    *off -= idx[k] * s->ostride[k];
    idx[k] = 0;
  }
}

/* Integers truncated to the type (two's complement wrap). */
static void store_int(void *p, pr_dtype_t t, int64_t i, uint64_t v) {
  switch (t) {
    case PR_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case PR_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case PR_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case PR_DTYPE_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case PR_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case PR_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case PR_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case PR_DTYPE_UINT64: ((uint64_t *)p)[i] = v; break;
    case PR_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: assert(0 && "reduce: element type");
  }
}

/* Floating types, and the L2/log kinds of integers: double accumulators. */
static void reduce_real(const reduce_state_t *s, const pr_value_t *a, const pr_value_t *o) {
  int64_t on = pr__value_numel(o), len = pr__value_numel(a), idx[PR_MAX_RANK] = {0}, off = 0;
  reduce_kind_t kind = s->kind;
  double *acc = s->acc, *mx = acc + on;
  double init = kind == R_PROD ? 1 : kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : 0;
  bool int_sum = !pr__is_real(a->dtype);
  for (int64_t i = 0; i < on; i++) acc[i] = init, mx[i] = -INFINITY;
  if (kind == R_LOG_SUM_EXP) { /* shift by the largest value: exp cannot overflow */
    for (int64_t i = 0; i < len; i++, next_off(a, s, idx, &off)) {
      double v = pr__load_double(a->ptr, a->dtype, i);
      if (v > mx[off]) mx[off] = v;
    }
    for (int64_t i = 0; i < on; i++)
      if (!isfinite(mx[i])) mx[i] = 0;
    memset(idx, 0, sizeof idx), off = 0;
  }
  for (int64_t i = 0; i < len; i++, next_off(a, s, idx, &off)) {
    double v = pr__load_double(a->ptr, a->dtype, i), *p = &acc[off];
    switch (kind) {
      case R_MAX: *p = v > *p || v != v ? v : *p; break;
      case R_MIN: *p = v < *p || v != v ? v : *p; break;
      case R_PROD: *p *= v; break;
      case R_L1: *p += fabs(v); break;
      case R_L2:
      case R_SUM_SQUARE: *p += v * v; break;
      case R_LOG_SUM_EXP: /* integers: summed in the type, as ONNX Runtime */
        *p = int_sum ? trunc(*p + exp(v - mx[off])) : *p + exp(v - mx[off]);
        break;
      default: *p += v; break; /* sum, mean, log of the sum */
    }
  }
  for (int64_t i = 0; i < on; i++) {
    double v = acc[i];
    switch (kind) {
      case R_MEAN: v /= (double)s->count; break;
      case R_L2: v = sqrt(v); break;
      case R_LOG_SUM: v = log(v); break;
      case R_LOG_SUM_EXP: v = mx[i] + log(v); break;
      default: break;
    }
    pr__store_double(o->ptr, o->dtype, i, v);
  }
}

/* Integer sums, products, min, max and mean: exact, wrapping. */
static void reduce_int(const reduce_state_t *s, const pr_value_t *a, const pr_value_t *o) {
  int64_t on = pr__value_numel(o), len = pr__value_numel(a), idx[PR_MAX_RANK] = {0}, off = 0;
  reduce_kind_t kind = s->kind;
  uint64_t *acc = s->acc;
  bool uns = is_unsigned_type(a->dtype);
  int bits = 8 * (int)pr_dtype_size(a->dtype);
  uint64_t umax = a->dtype == PR_DTYPE_BOOL ? 1 : bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
  int64_t smax = (int64_t)(umax >> 1), smin = -smax - 1;
  uint64_t init = kind == R_PROD  ? 1
                  : kind == R_MIN ? (uns ? umax : (uint64_t)smax)
                  : kind == R_MAX ? (uns ? 0 : (uint64_t)smin)
                                  : 0;
  for (int64_t i = 0; i < on; i++) acc[i] = init;
  for (int64_t i = 0; i < len; i++, next_off(a, s, idx, &off)) {
    int64_t v = pr__load_int64(a->ptr, a->dtype, i);
    uint64_t u = (uint64_t)v, *p = &acc[off];
    switch (kind) {
      case R_MAX: *p = (uns ? u > *p : v > (int64_t)*p) ? u : *p; break;
      case R_MIN: *p = (uns ? u < *p : v < (int64_t)*p) ? u : *p; break;
      case R_PROD: *p *= u; break;
      case R_L1: *p += !uns && v < 0 ? 0 - u : u; break;
      case R_SUM_SQUARE: *p += u * u; break;
      default: *p += u; break; /* sum, mean */
    }
  }
  for (int64_t i = 0; i < on; i++) {
    store_int(o->ptr, o->dtype, i, acc[i]);
    if (kind == R_MEAN && s->count) {
      int64_t v = pr__load_int64(o->ptr, o->dtype, i); /* the wrapped sum */
      store_int(o->ptr, o->dtype, i,
                uns ? (uint64_t)v / (uint64_t)s->count : (uint64_t)(v / s->count));
    }
  }
}

static void run_reduce(pr_exec_t *x, pr_node_t *n) {
  const reduce_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  if (!float_fast(s->kind, a->dtype)) {
    if (is_float_type(a->dtype) || s->kind == R_L2 || s->kind == R_LOG_SUM ||
        s->kind == R_LOG_SUM_EXP)
      reduce_real(s, a, o);
    else
      reduce_int(s, a, o);
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
  int64_t on = pr__value_numel(o), count = s->count;
  for (int64_t i = 0; i < on; i++) out[i] = s->kind == R_MAX ? -INFINITY : 0.f;
  int64_t len = pr__value_numel(a);
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

#define REDUCE_OP(sym, oname)                                                  \
  const pr_op_t pr__op_##sym = {.name = oname,                                 \
                                .attrs = "axes,keepdims,noop_with_empty_axes", \
                                .min_opset = 1,                                \
                                .max_inputs = 2,                               \
                                .infer = infer_reduce,                         \
                                .prepare = prepare_reduce,                     \
                                .run = run_reduce,                             \
                                .destroy = destroy_reduce};
REDUCE_OP(reduce_mean, "ReduceMean")
REDUCE_OP(reduce_sum, "ReduceSum")
REDUCE_OP(reduce_max, "ReduceMax")
REDUCE_OP(reduce_min, "ReduceMin")
REDUCE_OP(reduce_prod, "ReduceProd")
REDUCE_OP(reduce_l1, "ReduceL1")
REDUCE_OP(reduce_l2, "ReduceL2")
REDUCE_OP(reduce_log_sum, "ReduceLogSum")
REDUCE_OP(reduce_log_sum_exp, "ReduceLogSumExp")
REDUCE_OP(reduce_sum_square, "ReduceSumSquare")

/* ---- CumSum(x, axis) ---- */

static pr_status_t infer_cumsum(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int64_t axis;
  if (pr__const_ints(pr__in(c, n, 1), &axis, 1) != 1)
    return pr__need_values(c, n, "axis must be a constant scalar");
  if (pr__axis(axis, a->rank) < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_DOUBLE && a->dtype != PR_DTYPE_INT32 &&
      a->dtype != PR_DTYPE_INT64)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static void run_cumsum(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]], *av = &x->v[n->in[1]];
  int64_t axis_v =
      av->dtype == PR_DTYPE_INT64 ? *(const int64_t *)av->ptr : *(const int32_t *)av->ptr;
  int axis = pr__axis(axis_v, a->rank);
  bool excl = pr__attr_int(n->m, "exclusive", 0) != 0, rev = pr__attr_int(n->m, "reverse", 0) != 0;
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

const pr_op_t pr__op_cumsum = {.name = "CumSum",
                               .attrs = "exclusive,reverse",
                               .min_opset = 11,
                               .max_inputs = 2,
                               .infer = infer_cumsum,
                               .run = run_cumsum};
