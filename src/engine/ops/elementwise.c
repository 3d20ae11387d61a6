/* Element-wise unary operators: activations (Relu, LeakyRelu, Sigmoid,
 * Tanh, HardSigmoid, HardSwish, the GELU kernels the fuser makes), math
 * functions (Sqrt, Erf, Exp, Log, Neg, Abs, Reciprocal) and Clip.
 *
 * Unary ops whose f(0) is finite run on any layout: they treat an opaque
 * (blocked) buffer as a flat array, padding included. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "engine/ops/fastmath.h"
#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

/* ---- unary float ---- */

typedef enum {
  U_RELU,
  U_LEAKY,
  U_SIGMOID,
  U_TANH,
  U_HSIGMOID,
  U_HSWISH,
  U_CLIP,
  U_SQRT,
  U_ERF,
  U_EXP,
  U_LOG,
  U_NEG,
  U_ABS,
  U_RECIP,
  U_GELU_ERF,
  U_GELU_TANH
} unary_kind_t;

typedef struct {
  unary_kind_t kind;
  float alpha, beta;
} unary_state_t;

static pr_status_t infer_float_same(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  if (!a || a->dtype != PR_DTYPE_FLOAT)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "input must be FLOAT");
  return pr_infer_same(c, n);
}

static inline float apply_unary(unary_kind_t k, float x, float alpha, float beta) {
  switch (k) {
    case U_RELU: return x > 0 ? x : 0;
    case U_LEAKY: return x >= 0 ? x : alpha * x;
    case U_SIGMOID: return pr_sigmoidf(x);
    case U_TANH: return pr_tanhf(x);
    case U_HSIGMOID: {
      float y = alpha * x + beta;
      return y < 0.f ? 0.f : y > 1.f ? 1.f : y;
    }
    case U_HSWISH: {
      float y = x / 6.f + 0.5f;
      return x * (y < 0.f ? 0.f : y > 1.f ? 1.f : y);
    }
    case U_CLIP: return x < alpha ? alpha : x > beta ? beta : x;
    case U_SQRT: return sqrtf(x);
    case U_ERF: return pr_erff(x);
    case U_EXP: return pr_expf(x);
    case U_LOG: return logf(x);
    case U_NEG: return -x;
    case U_ABS: return fabsf(x);
    case U_RECIP: return 1.f / x;
    case U_GELU_ERF: return 0.5f * x * (1.f + pr_erff(x * 0.70710678118654752f));
    case U_GELU_TANH:
      return 0.5f * x * (1.f + pr_tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  }
  return x;
}

/* Neg and Abs of integers wrap: both map INT_MIN to itself (intmath.h) */
#define NEG_D(x) (-(x))
#define ABS_D(x) ((x) < 0 ? -(x) : (x))
// clang-format off
#define UNARY_TYPED(T, NEG, ABS)                                                  \
  static void unary_##T(unary_kind_t k, const T *a, T *o, int64_t len) {          \
    if (k == U_NEG)                                                               \
      for (int64_t i = 0; i < len; i++) o[i] = NEG(a[i]);                         \
    else                                                                          \
      for (int64_t i = 0; i < len; i++) o[i] = ABS(a[i]);                         \
  }
UNARY_TYPED(double, NEG_D, ABS_D)
UNARY_TYPED(int8_t, pr_i8_neg, pr_i8_abs)
UNARY_TYPED(int16_t, pr_i16_neg, pr_i16_abs)
UNARY_TYPED(int32_t, pr_i32_neg, pr_i32_abs)
UNARY_TYPED(int64_t, pr_i64_neg, pr_i64_abs)
// clang-format on

/* Neg and Abs of the other element types */
static void run_unary_typed(unary_kind_t k, const pr_value_t *in, void *o) {
  int64_t len = pr_value_numel(in);
  switch (in->dtype) {
    case PR_DTYPE_DOUBLE: unary_double(k, in->ptr, o, len); break;
    case PR_DTYPE_INT8: unary_int8_t(k, in->ptr, o, len); break;
    case PR_DTYPE_INT16: unary_int16_t(k, in->ptr, o, len); break;
    case PR_DTYPE_INT32: unary_int32_t(k, in->ptr, o, len); break;
    case PR_DTYPE_INT64: unary_int64_t(k, in->ptr, o, len); break;
    default: break;
  }
}

static void run_unary(pr_exec_t *x, pr_node_t *n) {
  const unary_state_t *s = n->state;
  const pr_value_t *in = &x->v[n->in[0]];
  if (in->dtype != PR_DTYPE_FLOAT) {
    run_unary_typed(s->kind, in, pr_xout(x, n, 0));
    return;
  }
  const float *a = in->ptr;
  float *o = pr_xout(x, n, 0);
  int64_t len = (int64_t)(in->nbytes / sizeof(float));
  float alpha = s->alpha, beta = s->beta;
  /* one loop per kind, so each is a plain SIMD loop (_Pragma needs its
   * string in one literal, hence the long line) */
  switch (s->kind) {
    // clang-format off
#define UNARY_LOOP(K)                                                                              \
  case K:                                                                                          \
    _Pragma("omp parallel for simd num_threads(x->threads) if (len >= PR_PAR_MIN) schedule(static)") \
    for (int64_t i = 0; i < len; i++) o[i] = apply_unary(K, a[i], alpha, beta);                     \
    break;
    UNARY_LOOP(U_RELU)
    UNARY_LOOP(U_LEAKY)
    UNARY_LOOP(U_SIGMOID)
    UNARY_LOOP(U_TANH)
    UNARY_LOOP(U_HSIGMOID)
    UNARY_LOOP(U_HSWISH)
    UNARY_LOOP(U_CLIP)
    UNARY_LOOP(U_SQRT)
    UNARY_LOOP(U_ERF)
    UNARY_LOOP(U_EXP)
    UNARY_LOOP(U_LOG)
    UNARY_LOOP(U_NEG)
    UNARY_LOOP(U_ABS)
    UNARY_LOOP(U_RECIP)
    UNARY_LOOP(U_GELU_ERF)
    UNARY_LOOP(U_GELU_TANH)
#undef UNARY_LOOP
    // clang-format on
  }
}

static pr_status_t prepare_unary_kind(pr_compile_t *c, pr_node_t *n, unary_kind_t k, float alpha,
                                      float beta) {
  unary_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->kind = k;
  s->alpha = alpha;
  s->beta = beta;
  n->state = s;
  pr_value_t *in = pr_in(c, n, 0), *out = pr_out(c, n, 0);
  out->opaque = in->opaque;
  out->md = in->md;
  out->nbytes = in->nbytes;
  return PR_OK;
}

/* opaque: f(0) is finite, so the padding of a blocked layout may go through f */
#define UNARY_OP_EX(sym, oname, kind, attr_list, alpha_expr, beta_expr, opaque, infer_fn) \
  static pr_status_t prepare_##sym(pr_compile_t *c, pr_node_t *n) {                       \
    return prepare_unary_kind(c, n, kind, alpha_expr, beta_expr);                         \
  }                                                                                       \
  const pr_op_t pr_op_##sym = {.name = oname,                                             \
                               .attrs = attr_list,                                        \
                               .min_opset = 1,                                            \
                               .max_inputs = 1,                                           \
                               .infer = infer_fn,                                         \
                               .prepare = prepare_##sym,                                  \
                               .run = run_unary,                                          \
                               .destroy = free,                                           \
                               .accepts_opaque = opaque,                                  \
                               .inplace = true};
#define UNARY_OP(sym, oname, kind, attr_list, alpha_expr, beta_expr) \
  UNARY_OP_EX(sym, oname, kind, attr_list, alpha_expr, beta_expr, true, infer_float_same)

UNARY_OP(relu, "Relu", U_RELU, "", 0, 0)
UNARY_OP(leaky_relu, "LeakyRelu", U_LEAKY, "alpha", pr_attr_float(n->m, "alpha", 0.01f), 0)
UNARY_OP(sigmoid, "Sigmoid", U_SIGMOID, "", 0, 0)
UNARY_OP(tanh, "Tanh", U_TANH, "", 0, 0)
UNARY_OP(hard_sigmoid, "HardSigmoid", U_HSIGMOID, "alpha,beta", pr_attr_float(n->m, "alpha", 0.2f),
         pr_attr_float(n->m, "beta", 0.5f))
UNARY_OP(hard_swish, "HardSwish", U_HSWISH, "", 0, 0)
UNARY_OP(sqrt, "Sqrt", U_SQRT, "", 0, 0)
UNARY_OP(erf, "Erf", U_ERF, "", 0, 0)
UNARY_OP(exp, "Exp", U_EXP, "", 0, 0)
UNARY_OP_EX(log, "Log", U_LOG, "", 0, 0, false, infer_float_same)
/* Neg and Abs also take integers and double (run_unary_typed) */
static pr_status_t infer_signed_same(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  switch (a ? a->dtype : PR_DTYPE_UNDEFINED) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_INT8:
    case PR_DTYPE_INT16:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64: return pr_infer_same(c, n);
    default:
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s",
                     pr_dtype_name(a ? a->dtype : PR_DTYPE_UNDEFINED));
  }
}
UNARY_OP_EX(neg, "Neg", U_NEG, "", 0, 0, true, infer_signed_same)
UNARY_OP_EX(abs, "Abs", U_ABS, "", 0, 0, true, infer_signed_same)
UNARY_OP_EX(reciprocal, "Reciprocal", U_RECIP, "", 0, 0, false, infer_float_same)
/* made by the compiler from the GELU subgraphs PyTorch exports */
UNARY_OP(gelu_erf, "GeluErf", U_GELU_ERF, "", 0, 0)
UNARY_OP(gelu_tanh, "GeluTanh", U_GELU_TANH, "", 0, 0)

/* ---- Clip: bounds from attributes (opset < 11) or inputs 1, 2 ---- */

typedef struct {
  int64_t lo, hi; /* integer inputs: compared in int64 (a double rounds INT64_MAX up to 2^63) */
} clip_state_t;

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

static pr_status_t infer_clip(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  switch (a->dtype) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_INT8:
    case PR_DTYPE_UINT8:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64: break;
    default: return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  }
  for (int k = 1; k < 3; k++) {
    pr_value_t *b = pr_in(c, n, k);
    if (!b) continue;
    if (!b->is_const) return pr_fail(c, n, PR_ERR_UNSUPPORTED, "bounds must be constant");
    if (b->dtype != a->dtype || pr_value_numel(b) != 1)
      return pr_fail(c, n, PR_ERR_INVALID, "bound %d must be a scalar of the input's type", k);
  }
  return pr_infer_same(c, n);
}

static pr_status_t prepare_clip(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0), *lo_v = NULL, *hi_v = NULL;
  double lo = -INFINITY, hi = INFINITY;
  if (c->opset < 11) {
    lo = pr_attr_float(n->m, "min", -3.402823e+38f);
    hi = pr_attr_float(n->m, "max", 3.402823e+38f);
  } else {
    if ((lo_v = pr_in(c, n, 1))) lo = pr_load_double(lo_v->data, lo_v->dtype, 0);
    if ((hi_v = pr_in(c, n, 2))) hi = pr_load_double(hi_v->data, hi_v->dtype, 0);
  }
  if (a->dtype == PR_DTYPE_FLOAT) return prepare_unary_kind(c, n, U_CLIP, (float)lo, (float)hi);
  clip_state_t *s = malloc(sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->lo = lo_v ? pr_load_int64(lo_v->data, lo_v->dtype, 0) : pr_sat_i64(lo);
  s->hi = hi_v ? pr_load_int64(hi_v->data, hi_v->dtype, 0) : pr_sat_i64(hi);
  n->state = s;
  return PR_OK;
}

static void run_clip(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]];
  if (in->dtype == PR_DTYPE_FLOAT) {
    run_unary(x, n);
    return;
  }
  const clip_state_t *s = n->state;
  int64_t len = pr_value_numel(in);
/* bounds brought into T's range first, so every result fits T */
#define CLIP_T(T, TMIN, TMAX)                                                     \
  {                                                                               \
    const T *a = in->ptr;                                                         \
    T *o = pr_xout(x, n, 0);                                                      \
    int64_t lo = clamp_i64(s->lo, TMIN, TMAX), hi = clamp_i64(s->hi, TMIN, TMAX); \
    for (int64_t i = 0; i < len; i++) o[i] = (T)clamp_i64(a[i], lo, hi);          \
  }
  switch (in->dtype) {
    case PR_DTYPE_INT8: CLIP_T(int8_t, INT8_MIN, INT8_MAX) break;
    case PR_DTYPE_UINT8: CLIP_T(uint8_t, 0, UINT8_MAX) break;
    case PR_DTYPE_INT32: CLIP_T(int32_t, INT32_MIN, INT32_MAX) break;
    default: CLIP_T(int64_t, INT64_MIN, INT64_MAX) break;
  }
#undef CLIP_T
}

const pr_op_t pr_op_clip = {.name = "Clip",
                            .attrs = "min,max",
                            .min_opset = 1,
                            .max_inputs = 3,
                            .infer = infer_clip,
                            .prepare = prepare_clip,
                            .run = run_clip,
                            .destroy = free,
                            .accepts_opaque = false,
                            .inplace = true};
