/* Element-wise unary operators: activations (Relu, LeakyRelu, Sigmoid,
 * Tanh, HardSigmoid, HardSwish, Elu, Selu, Celu, ThresholdedRelu, Shrink,
 * Softplus, Softsign, Mish, Gelu and the GELU kernels the fuser makes), math
 * functions (Sqrt, Erf, Exp, Log, Neg, Abs, Reciprocal, the trigonometric
 * and hyperbolic functions and their inverses, Floor, Ceil, Round, Sign)
 * and Clip.
 *
 * Every op takes float, double and float16; Neg, Relu also the signed
 * integers, Abs, Sign and Shrink every integer type. float runs vector
 * loops over fastmath.h; float16 goes through those in blocks; double calls
 * libm.
 *
 * Unary ops whose f(0) is finite run on any layout: they treat an opaque
 * (blocked) buffer as a flat array, padding included. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "engine/ops/fastmath.h"
#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

/* ---- unary: float (vector loops), double, float16 (through float) and
 * the integer types of Neg, Abs, Sign, Relu and Shrink ---- */

/* Every unary kind, one per line: the float, float16 and double kernels
 * each get one loop per kind from this list. */
// clang-format off
#define UNARY_KINDS(X) \
  X(U_RELU)            \
  X(U_LEAKY)           \
  X(U_SIGMOID)         \
  X(U_TANH)            \
  X(U_HSIGMOID)        \
  X(U_HSWISH)          \
  X(U_CLIP)            \
  X(U_SQRT)            \
  X(U_ERF)             \
  X(U_EXP)             \
  X(U_LOG)             \
  X(U_NEG)             \
  X(U_ABS)             \
  X(U_RECIP)           \
  X(U_GELU_ERF)        \
  X(U_GELU_TANH)       \
  X(U_SILU)            \
  X(U_SIN)             \
  X(U_COS)             \
  X(U_TAN)             \
  X(U_ASIN)            \
  X(U_ACOS)            \
  X(U_ATAN)            \
  X(U_SINH)            \
  X(U_COSH)            \
  X(U_ASINH)           \
  X(U_ACOSH)           \
  X(U_ATANH)           \
  X(U_FLOOR)           \
  X(U_CEIL)            \
  X(U_ROUND)           \
  X(U_SIGN)            \
  X(U_ELU)             \
  X(U_SELU)            \
  X(U_CELU)            \
  X(U_THRELU)          \
  X(U_SHRINK)          \
  X(U_SOFTPLUS)        \
  X(U_SOFTSIGN)        \
  X(U_MISH)
// clang-format on

typedef enum {
#define UNARY_ENUM(K) K,
  UNARY_KINDS(UNARY_ENUM)
#undef UNARY_ENUM
} unary_kind_t;

/* alpha, beta: LeakyRelu, HardSigmoid, Clip, Elu, Celu and ThresholdedRelu
 * alpha; Selu alpha and gamma; Shrink lambd and bias */
typedef struct {
  unary_kind_t kind;
  double alpha, beta; /* double: a double Clip's bounds are exact */
} unary_state_t;

/* Element types an op takes: the floats, plus the signed integers, plus
 * the unsigned ones. */
typedef enum { TYPES_REAL, TYPES_SIGNED, TYPES_NUMERIC } unary_types_t;

static bool unary_type_ok(pr_dtype_t t, unary_types_t set) {
  switch (t) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_FLOAT16: return true;
    case PR_DTYPE_INT8:
    case PR_DTYPE_INT16:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64: return set != TYPES_REAL;
    case PR_DTYPE_UINT8:
    case PR_DTYPE_UINT16:
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64: return set == TYPES_NUMERIC;
    default: return false;
  }
}

static pr_status_t infer_unary_types(pr_compile_t *c, pr_node_t *n, unary_types_t set) {
  pr_value_t *a = pr__in(c, n, 0);
  pr_dtype_t t = a ? a->dtype : PR_DTYPE_UNDEFINED;
  if (!unary_type_ok(t, set))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(t));
  return pr__shape_same(c, n);
}
static pr_status_t infer_real_same(pr_compile_t *c, pr_node_t *n) {
  return infer_unary_types(c, n, TYPES_REAL);
}
static pr_status_t infer_signed_same(pr_compile_t *c, pr_node_t *n) {
  return infer_unary_types(c, n, TYPES_SIGNED);
}
static pr_status_t infer_numeric_same(pr_compile_t *c, pr_node_t *n) {
  return infer_unary_types(c, n, TYPES_NUMERIC);
}

static inline float clamp01f(float y) {
  return y < 0.f ? 0.f : y > 1.f ? 1.f : y;
}

/* x * tanh(softplus(x)) = x * n / (n + 2) with n = e^x (e^x + 2); past
 * x = 15 the ratio is 1 in float */
static inline float mishf(float x) {
  float e = pr__expf(x), nn = e * (e + 2.f);
  return x > 15.f ? x : x * nn / (nn + 2.f);
}

/* Clip is max(x, lo) then min(., hi): bounds with lo > hi give hi, as in
 * ONNX Runtime; a NaN x stays NaN */
static inline float clip_max_min(float x, float lo, float hi) {
  float t = x < lo ? lo : x;
  return t > hi ? hi : t;
}
static inline double clip_max_min_d(double x, double lo, double hi) {
  double t = x < lo ? lo : x;
  return t > hi ? hi : t;
}

static inline __attribute__((always_inline)) float apply_unary(unary_kind_t k, float x, float alpha,
                                                               float beta) {
  switch (k) {
    case U_RELU: return x > 0 ? x : 0;
    case U_LEAKY: return x >= 0 ? x : alpha * x;
    case U_SIGMOID: return pr__sigmoidf(x);
    case U_SILU: return x * pr__sigmoidf(x);
    case U_TANH: return pr__tanhf(x);
    case U_HSIGMOID: return clamp01f(alpha * x + beta);
    case U_HSWISH: return x * clamp01f(x / 6.f + 0.5f);
    case U_CLIP: return clip_max_min(x, alpha, beta);
    case U_SQRT: return sqrtf(x);
    case U_ERF: return pr__erff(x);
    case U_EXP: return pr__expf(x);
    case U_LOG: return logf(x);
    case U_NEG: return -x;
    case U_ABS: return fabsf(x);
    case U_RECIP: return 1.f / x;
    case U_GELU_ERF: return 0.5f * x * (1.f + pr__erff(x * 0.70710678118654752f));
    case U_GELU_TANH:
      return 0.5f * x * (1.f + pr__tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case U_SIN: return sinf(x);
    case U_COS: return cosf(x);
    case U_TAN: return tanf(x);
    case U_ASIN: return asinf(x);
    case U_ACOS: return acosf(x);
    case U_ATAN: return atanf(x);
    case U_SINH: return sinhf(x);
    case U_COSH: return coshf(x);
    case U_ASINH: return asinhf(x);
    case U_ACOSH: return acoshf(x);
    case U_ATANH: return atanhf(x);
    case U_FLOOR: return floorf(x);
    case U_CEIL: return ceilf(x);
    case U_ROUND: return rintf(x); /* the default rounding mode: half to even */
    case U_SIGN: return x > 0 ? 1.f : x < 0 ? -1.f : x; /* 0 and NaN stay */
    case U_ELU: return x >= 0 ? x : alpha * pr__expm1f(x);
    case U_SELU: return x > 0 ? beta * x : beta * alpha * pr__expm1f(x);
    case U_CELU: return x > 0 ? x : alpha * pr__expm1f(x / alpha);
    case U_THRELU: return x > alpha ? x : 0.f;
    case U_SHRINK: return x < -alpha ? x + beta : x > alpha ? x - beta : 0.f;
    case U_SOFTPLUS: return (x > 0 ? x : 0.f) + log1pf(pr__expf(-fabsf(x)));
    case U_SOFTSIGN: return x / (1.f + fabsf(x));
    case U_MISH: return mishf(x);
  }
  return x;
}

static inline double clamp01(double y) {
  return y < 0 ? 0 : y > 1 ? 1 : y;
}

/* the double kernels: libm throughout */
static inline double apply_unary_d(unary_kind_t k, double x, double alpha, double beta) {
  switch (k) {
    case U_RELU: return x > 0 ? x : 0;
    case U_LEAKY: return x >= 0 ? x : alpha * x;
    case U_SIGMOID: return 1 / (1 + exp(-x));
    case U_SILU: return x / (1 + exp(-x));
    case U_TANH: return tanh(x);
    case U_HSIGMOID: return clamp01(alpha * x + beta);
    case U_HSWISH: return x * clamp01(x / 6 + 0.5);
    case U_CLIP: return clip_max_min_d(x, alpha, beta);
    case U_SQRT: return sqrt(x);
    case U_ERF: return erf(x);
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_NEG: return -x;
    case U_ABS: return fabs(x);
    case U_RECIP: return 1 / x;
    case U_GELU_ERF: return 0.5 * x * (1 + erf(x * 0.70710678118654752));
    case U_GELU_TANH: return 0.5 * x * (1 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    case U_SIN: return sin(x);
    case U_COS: return cos(x);
    case U_TAN: return tan(x);
    case U_ASIN: return asin(x);
    case U_ACOS: return acos(x);
    case U_ATAN: return atan(x);
    case U_SINH: return sinh(x);
    case U_COSH: return cosh(x);
    case U_ASINH: return asinh(x);
    case U_ACOSH: return acosh(x);
    case U_ATANH: return atanh(x);
    case U_FLOOR: return floor(x);
    case U_CEIL: return ceil(x);
    case U_ROUND: return rint(x);
    case U_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;
    case U_ELU: return x >= 0 ? x : alpha * expm1(x);
    case U_SELU: return x > 0 ? beta * x : beta * alpha * expm1(x);
    case U_CELU: return x > 0 ? x : alpha * expm1(x / alpha);
    case U_THRELU: return x > alpha ? x : 0;
    case U_SHRINK: return x < -alpha ? x + beta : x > alpha ? x - beta : 0;
    case U_SOFTPLUS: return (x > 0 ? x : 0) + log1p(exp(-fabs(x)));
    case U_SOFTSIGN: return x / (1 + fabs(x));
    case U_MISH: return x * tanh((x > 0 ? x : 0) + log1p(exp(-fabs(x))));
  }
  return x;
}

/* Integer kinds. Neg and Abs wrap (intmath.h: both map INT_MIN to itself);
 * Shrink computes in double and saturates to T (lambd and bias are floats). */
#define SIGN_I(x) ((x) > 0 ? 1 : (x) < 0 ? -1 : 0)
#define SIGN_U(x) ((x) > 0)
#define ABS_U(x) (x)
#define NEG_U(x) (x) /* never runs: Neg takes no unsigned type */
// clang-format off
#define UNARY_INT(sfx, T, NEG, ABS, SIGN, SAT)                                               \
  static void unary_##sfx(const unary_state_t *s, const T *a, T *o, int64_t len) {     \
    double l = s->alpha, b = s->beta;                                                  \
    switch (s->kind) {                                                                 \
      case U_NEG: for (int64_t i = 0; i < len; i++) o[i] = NEG(a[i]); break;           \
      case U_ABS: for (int64_t i = 0; i < len; i++) o[i] = ABS(a[i]); break;           \
      case U_SIGN: for (int64_t i = 0; i < len; i++) o[i] = (T)SIGN(a[i]); break;    \
      case U_RELU: for (int64_t i = 0; i < len; i++) o[i] = a[i] > 0 ? a[i] : 0; break; \
      case U_SHRINK:                                                                   \
        for (int64_t i = 0; i < len; i++) {                                            \
          double v = (double)a[i];                                                     \
          o[i] = v < -l ? (T)SAT(v + b) : v > l ? (T)SAT(v - b) : 0;                   \
        }                                                                              \
        break;                                                                         \
      default: break;                                                                  \
    }                                                                                  \
  }
#define SAT_I8(d) pr__sat_int(d, INT8_MIN, INT8_MAX)
#define SAT_I16(d) pr__sat_int(d, INT16_MIN, INT16_MAX)
#define SAT_I32(d) pr__sat_int(d, INT32_MIN, INT32_MAX)
#define SAT_U8(d) pr__sat_int(d, 0, UINT8_MAX)
#define SAT_U16(d) pr__sat_int(d, 0, UINT16_MAX)
#define SAT_U32(d) pr__sat_int(d, 0, UINT32_MAX)
UNARY_INT(i8, int8_t, pr__i8_neg, pr__i8_abs, SIGN_I, SAT_I8)
UNARY_INT(i16, int16_t, pr__i16_neg, pr__i16_abs, SIGN_I, SAT_I16)
UNARY_INT(i32, int32_t, pr__i32_neg, pr__i32_abs, SIGN_I, SAT_I32)
UNARY_INT(i64, int64_t, pr__i64_neg, pr__i64_abs, SIGN_I, pr__sat_i64)
UNARY_INT(u8, uint8_t, NEG_U, ABS_U, SIGN_U, SAT_U8)
UNARY_INT(u16, uint16_t, NEG_U, ABS_U, SIGN_U, SAT_U16)
UNARY_INT(u32, uint32_t, NEG_U, ABS_U, SIGN_U, SAT_U32)
UNARY_INT(u64, uint64_t, NEG_U, ABS_U, SIGN_U, pr__sat_u64)
// clang-format on

/* float kernel over a span (no threads): the float16 path's inner loop */
static void unary_f32_span(const unary_state_t *s, const float *a, float *o, int64_t len) {
  float alpha = (float)s->alpha, beta = (float)s->beta;
  switch (s->kind) {
#define UNARY_SPAN(K)                                            \
  case K:                                                        \
    _Pragma("omp simd") for (int64_t i = 0; i < len; i++) o[i] = \
        apply_unary(K, a[i], alpha, beta);                       \
    break;
    UNARY_KINDS(UNARY_SPAN)
#undef UNARY_SPAN
  }
}

/* float16: blocks of 256 converted to float, computed, converted back */
static void run_unary_f16(const unary_state_t *s, const uint16_t *a, uint16_t *o, int64_t len,
                          int threads) {
  int64_t blocks = (len + 255) / 256;
#pragma omp parallel for num_threads(threads) if (len >= PR_PAR_MIN) schedule(static)
  for (int64_t b = 0; b < blocks; b++) {
    float buf[256];
    int64_t off = b * 256, m = len - off < 256 ? len - off : 256;
    for (int64_t i = 0; i < m; i++) buf[i] = pr__half_to_float(a[off + i]);
    unary_f32_span(s, buf, buf, m);
    for (int64_t i = 0; i < m; i++) o[off + i] = pr__float_to_half(buf[i]);
  }
}

static void run_unary_f64(const unary_state_t *s, const double *a, double *o, int64_t len,
                          int threads) {
  double alpha = s->alpha, beta = s->beta;
  switch (s->kind) {
    // clang-format off
#define UNARY_LOOP_D(K)                                                                          \
  case K:                                                                                        \
    _Pragma("omp parallel for simd num_threads(threads) if (len >= PR_PAR_MIN) schedule(static)") \
    for (int64_t i = 0; i < len; i++) o[i] = apply_unary_d(K, a[i], alpha, beta);                \
    break;
    UNARY_KINDS(UNARY_LOOP_D)
#undef UNARY_LOOP_D
    // clang-format on
  }
}

/* every type but float */
static void run_unary_typed(const unary_state_t *s, const pr_value_t *in, void *o, int threads) {
  int64_t len = pr__value_numel(in);
  switch (in->dtype) {
    case PR_DTYPE_DOUBLE: run_unary_f64(s, in->ptr, o, len, threads); break;
    case PR_DTYPE_FLOAT16: run_unary_f16(s, in->ptr, o, len, threads); break;
    case PR_DTYPE_INT8: unary_i8(s, in->ptr, o, len); break;
    case PR_DTYPE_INT16: unary_i16(s, in->ptr, o, len); break;
    case PR_DTYPE_INT32: unary_i32(s, in->ptr, o, len); break;
    case PR_DTYPE_INT64: unary_i64(s, in->ptr, o, len); break;
    case PR_DTYPE_UINT8: unary_u8(s, in->ptr, o, len); break;
    case PR_DTYPE_UINT16: unary_u16(s, in->ptr, o, len); break;
    case PR_DTYPE_UINT32: unary_u32(s, in->ptr, o, len); break;
    case PR_DTYPE_UINT64: unary_u64(s, in->ptr, o, len); break;
    default: break;
  }
}

static void run_unary_state(pr_exec_t *x, pr_node_t *n, const unary_state_t *s) {
  const pr_value_t *in = &x->v[n->in[0]];
  if (in->dtype != PR_DTYPE_FLOAT) {
    run_unary_typed(s, in, pr__xout(x, n, 0), x->threads);
    return;
  }
  const float *a = in->ptr;
  float *o = pr__xout(x, n, 0);
  int64_t len = (int64_t)(in->nbytes / sizeof(float));
  float alpha = (float)s->alpha, beta = (float)s->beta;
  /* one loop per kind, so each is a plain SIMD loop (_Pragma needs its
   * string in one literal, hence the long line) */
  switch (s->kind) {
    // clang-format off
#define UNARY_LOOP(K)                                                                              \
  case K:                                                                                          \
    _Pragma("omp parallel for simd num_threads(x->threads) if (len >= PR_PAR_MIN) schedule(static)") \
    for (int64_t i = 0; i < len; i++) o[i] = apply_unary(K, a[i], alpha, beta);                     \
    break;
    UNARY_KINDS(UNARY_LOOP)
#undef UNARY_LOOP
    // clang-format on
  }
}

static void run_unary(pr_exec_t *x, pr_node_t *n) {
  run_unary_state(x, n, n->state);
}

/* output 0 in input 0's layout */
static void unary_out_like_in(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *in = pr__in(c, n, 0), *out = pr__out(c, n, 0);
  out->opaque = in->opaque;
  out->md = in->md;
  out->nbytes = in->nbytes;
}

static pr_status_t prepare_unary_kind(pr_compile_t *c, pr_node_t *n, unary_kind_t k, float alpha,
                                      float beta) {
  unary_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->kind = k;
  s->alpha = alpha;
  s->beta = beta;
  n->state = s;
  unary_out_like_in(c, n);
  return PR_OK;
}

/* opaque: f(0) is finite, so the padding of a blocked layout may go through f */
/* Every unary op of the float kernels: symbol, ONNX name, kind, attributes,
 * alpha and beta (expressions of node n), whether it takes an opaque layout
 * (f(0) finite, so the padding of a blocked layout may go through f), its
 * shape function, first opset. Expanded twice: the ops, and the table
 * pr__unary_eval reads. Relu, Neg and Abs take integers too; Gelu, Clip
 * below. */
#define ALPHA(def) pr__attr_float(n->m, "alpha", def)
// clang-format off
#define UNARY_OPS(X) \
  X(relu, "Relu", U_RELU, "", 0, 0, true, infer_signed_same, 1) \
  X(leaky_relu, "LeakyRelu", U_LEAKY, "alpha", ALPHA(0.01f), 0, true, infer_real_same, 1) \
  X(sigmoid, "Sigmoid", U_SIGMOID, "", 0, 0, true, infer_real_same, 1) \
  X(tanh, "Tanh", U_TANH, "", 0, 0, true, infer_real_same, 1) \
  X(hard_sigmoid, "HardSigmoid", U_HSIGMOID, "alpha,beta", ALPHA(0.2f), pr__attr_float(n->m, "beta", 0.5f), true, infer_real_same, 1) \
  X(hard_swish, "HardSwish", U_HSWISH, "", 0, 0, true, infer_real_same, 1) \
  X(sqrt, "Sqrt", U_SQRT, "", 0, 0, true, infer_real_same, 1) \
  X(erf, "Erf", U_ERF, "", 0, 0, true, infer_real_same, 1) \
  X(exp, "Exp", U_EXP, "", 0, 0, true, infer_real_same, 1) \
  X(log, "Log", U_LOG, "", 0, 0, false, infer_real_same, 1) \
  X(neg, "Neg", U_NEG, "", 0, 0, true, infer_signed_same, 1) \
  X(abs, "Abs", U_ABS, "", 0, 0, true, infer_numeric_same, 1) \
  X(reciprocal, "Reciprocal", U_RECIP, "", 0, 0, false, infer_real_same, 1) \
  X(gelu_erf, "GeluErf", U_GELU_ERF, "", 0, 0, true, infer_real_same, 1) \
  X(gelu_tanh, "GeluTanh", U_GELU_TANH, "", 0, 0, true, infer_real_same, 1) \
  X(silu, "SiLU", U_SILU, "", 0, 0, true, infer_real_same, 1) \
  X(sin, "Sin", U_SIN, "", 0, 0, false, infer_real_same, 7) \
  X(cos, "Cos", U_COS, "", 0, 0, false, infer_real_same, 7) \
  X(tan, "Tan", U_TAN, "", 0, 0, false, infer_real_same, 7) \
  X(asin, "Asin", U_ASIN, "", 0, 0, false, infer_real_same, 7) \
  X(acos, "Acos", U_ACOS, "", 0, 0, false, infer_real_same, 7) \
  X(atan, "Atan", U_ATAN, "", 0, 0, false, infer_real_same, 7) \
  X(sinh, "Sinh", U_SINH, "", 0, 0, false, infer_real_same, 9) \
  X(cosh, "Cosh", U_COSH, "", 0, 0, false, infer_real_same, 9) \
  X(asinh, "Asinh", U_ASINH, "", 0, 0, false, infer_real_same, 9) \
  X(acosh, "Acosh", U_ACOSH, "", 0, 0, false, infer_real_same, 9) \
  X(atanh, "Atanh", U_ATANH, "", 0, 0, false, infer_real_same, 9) \
  X(floor, "Floor", U_FLOOR, "", 0, 0, false, infer_real_same, 1) \
  X(ceil, "Ceil", U_CEIL, "", 0, 0, false, infer_real_same, 1) \
  X(round, "Round", U_ROUND, "", 0, 0, false, infer_real_same, 11) \
  X(sign, "Sign", U_SIGN, "", 0, 0, false, infer_numeric_same, 9) \
  X(elu, "Elu", U_ELU, "alpha", ALPHA(1.f), 0, true, infer_real_same, 1) \
  X(selu, "Selu", U_SELU, "alpha,gamma", ALPHA(1.67326319217681884765625f), pr__attr_float(n->m, "gamma", 1.05070102214813232421875f), true, infer_real_same, 1) \
  X(celu, "Celu", U_CELU, "alpha", ALPHA(1.f), 0, true, infer_real_same, 12) \
  X(thresholded_relu, "ThresholdedRelu", U_THRELU, "alpha", ALPHA(1.f), 0, true, infer_real_same, 10) \
  X(shrink, "Shrink", U_SHRINK, "lambd,bias", pr__attr_float(n->m, "lambd", 0.5f), pr__attr_float(n->m, "bias", 0.f), true, infer_numeric_same, 9) \
  X(softplus, "Softplus", U_SOFTPLUS, "", 0, 0, true, infer_real_same, 1) \
  X(softsign, "Softsign", U_SOFTSIGN, "", 0, 0, true, infer_real_same, 1) \
  X(mish, "Mish", U_MISH, "", 0, 0, true, infer_real_same, 18)
// clang-format on

/* params_SYM gives alpha and beta from node n's attributes */
#define UNARY_DEFINE(sym, oname, kind, attr_list, alpha_expr, beta_expr, opaque, infer_fn, minv) \
  static void params_##sym(const pr_node_t *n, float *alpha, float *beta) {                      \
    (void)n;                                                                                     \
    *alpha = alpha_expr;                                                                         \
    *beta = beta_expr;                                                                           \
  }                                                                                              \
  static pr_status_t prepare_##sym(pr_compile_t *c, pr_node_t *n) {                              \
    float alpha, beta;                                                                           \
    params_##sym(n, &alpha, &beta);                                                              \
    return prepare_unary_kind(c, n, kind, alpha, beta);                                          \
  }                                                                                              \
  const pr_op_t pr__op_##sym = {.name = oname,                                                   \
                                .attrs = attr_list,                                              \
                                .min_opset = minv,                                               \
                                .max_inputs = 1,                                                 \
                                .infer = infer_fn,                                               \
                                .prepare = prepare_##sym,                                        \
                                .run = run_unary,                                                \
                                .destroy = free,                                                 \
                                .accepts_opaque = opaque,                                        \
                                .inplace = true};
UNARY_OPS(UNARY_DEFINE)
#undef UNARY_DEFINE

typedef struct {
  const pr_op_t *op;
  unary_kind_t kind;
  void (*params)(const pr_node_t *n, float *alpha, float *beta);
} unary_entry_t;
#define UNARY_ENTRY(sym, oname, kind, ...) {&pr__op_##sym, kind, params_##sym},
static const unary_entry_t unary_table[] = {UNARY_OPS(UNARY_ENTRY)};
#undef UNARY_ENTRY
#undef ALPHA

/* Gelu (opset 20): approximate "none" (erf) or "tanh", the fuser's kernels */
static pr_status_t check_gelu(const pr_mnode_t *m, int opset, char *err, size_t len) {
  (void)opset;
  const char *a = pr__attr_string(m, "approximate", "none");
  if (strcmp(a, "none") && strcmp(a, "tanh")) {
    snprintf(err, len, "node '%s' (Gelu): approximate must be none or tanh", pr__mnode_name(m));
    return PR_ERR_INVALID;
  }
  return PR_OK;
}
static pr_status_t prepare_gelu(pr_compile_t *c, pr_node_t *n) {
  bool tanh_form = !strcmp(pr__attr_string(n->m, "approximate", "none"), "tanh");
  return prepare_unary_kind(c, n, tanh_form ? U_GELU_TANH : U_GELU_ERF, 0, 0);
}
const pr_op_t pr__op_gelu = {.name = "Gelu",
                             .attrs = "approximate",
                             .min_opset = 20,
                             .max_inputs = 1,
                             .check = check_gelu,
                             .infer = infer_real_same,
                             .prepare = prepare_gelu,
                             .run = run_unary,
                             .destroy = free,
                             .accepts_opaque = true,
                             .inplace = true};

/* ---- Clip: bounds from attributes (opset < 11) or inputs 1, 2; an input
 * bound may be computed at run time (torchaudio's AmplitudeToDB clips at
 * max(x) - top_db): it is read when the node runs ---- */

typedef struct {
  unary_state_t u;   /* the float types: U_CLIP, alpha = lo, beta = hi */
  int64_t lo, hi;    /* integer inputs: compared in int64 (a double rounds INT64_MAX up to 2^63) */
  uint64_t ulo, uhi; /* UINT64 inputs */
  bool at_run[3];    /* input k (1: lo, 2: hi) is read when the node runs */
} clip_state_t;

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
  v = v < lo ? lo : v; /* max then min, as clip_max_min */
  return v > hi ? hi : v;
}

static pr_status_t infer_clip(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  switch (a->dtype) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_FLOAT16:
    case PR_DTYPE_INT8:
    case PR_DTYPE_UINT8:
    case PR_DTYPE_INT16:
    case PR_DTYPE_UINT16:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64:
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64: break;
    default: return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  }
  for (int k = 1; k < 3; k++) {
    pr_value_t *b = pr__in(c, n, k);
    if (b && (b->dtype != a->dtype || pr__value_numel(b) != 1))
      return pr__fail(c, n, PR_ERR_INVALID, "bound %d must be a scalar of the input's type", k);
  }
  return pr__shape_same(c, n);
}

/* bound k (1: lo, 2: hi) of s from data, one element of type t */
static void clip_set_bound(clip_state_t *s, int k, const void *data, pr_dtype_t t) {
  double d = pr__load_double(data, t, 0);
  int64_t i = t == PR_DTYPE_UINT64 ? 0 : pr__load_int64(data, t, 0);
  uint64_t u = t == PR_DTYPE_UINT64 ? *(const uint64_t *)data : 0;
  if (k == 1)
    s->u.alpha = d, s->lo = i, s->ulo = u;
  else
    s->u.beta = d, s->hi = i, s->uhi = u;
}

static pr_status_t prepare_clip(pr_compile_t *c, pr_node_t *n) {
  clip_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  double lo = -INFINITY, hi = INFINITY;
  if (c->opset < 11) {
    lo = pr__attr_float(n->m, "min", -3.402823e+38f);
    hi = pr__attr_float(n->m, "max", 3.402823e+38f);
  }
  s->u = (unary_state_t){.kind = U_CLIP, .alpha = lo, .beta = hi};
  s->lo = pr__sat_i64(lo), s->hi = pr__sat_i64(hi);
  s->ulo = 0, s->uhi = UINT64_MAX;
  for (int k = 1; k < 3 && c->opset >= 11; k++) {
    const pr_value_t *b = pr__in(c, n, k);
    if (b && b->is_const) clip_set_bound(s, k, b->data, b->dtype);
    s->at_run[k] = b && !b->is_const;
  }
  if (unary_type_ok(pr__in(c, n, 0)->dtype, TYPES_REAL)) unary_out_like_in(c, n);
  return PR_OK;
}

/* the integer types: bounds brought into T's range first, so every result
 * fits T */
static void run_clip_int(pr_exec_t *x, pr_node_t *n, const clip_state_t *s) {
  const pr_value_t *in = &x->v[n->in[0]];
  int64_t len = pr__value_numel(in);
#define CLIP_T(T, TMIN, TMAX)                                                     \
  {                                                                               \
    const T *a = in->ptr;                                                         \
    T *o = pr__xout(x, n, 0);                                                     \
    int64_t lo = clamp_i64(s->lo, TMIN, TMAX), hi = clamp_i64(s->hi, TMIN, TMAX); \
    for (int64_t i = 0; i < len; i++) o[i] = (T)clamp_i64(a[i], lo, hi);          \
  }
  switch (in->dtype) {
    case PR_DTYPE_INT8: CLIP_T(int8_t, INT8_MIN, INT8_MAX) break;
    case PR_DTYPE_UINT8: CLIP_T(uint8_t, 0, UINT8_MAX) break;
    case PR_DTYPE_INT16: CLIP_T(int16_t, INT16_MIN, INT16_MAX) break;
    case PR_DTYPE_UINT16: CLIP_T(uint16_t, 0, UINT16_MAX) break;
    case PR_DTYPE_INT32: CLIP_T(int32_t, INT32_MIN, INT32_MAX) break;
    case PR_DTYPE_UINT32: CLIP_T(uint32_t, 0, UINT32_MAX) break;
    case PR_DTYPE_UINT64: {
      const uint64_t *a = in->ptr;
      uint64_t *o = pr__xout(x, n, 0), lo = s->ulo, hi = s->uhi;
      for (int64_t i = 0; i < len; i++) {
        uint64_t t = a[i] < lo ? lo : a[i];
        o[i] = t > hi ? hi : t;
      }
      break;
    }
    default: CLIP_T(int64_t, INT64_MIN, INT64_MAX) break;
  }
#undef CLIP_T
}

static void run_clip(pr_exec_t *x, pr_node_t *n) {
  clip_state_t s = *(const clip_state_t *)n->state;
  for (int k = 1; k < 3; k++)
    if (s.at_run[k]) clip_set_bound(&s, k, pr__xin(x, n, k), x->v[n->in[k]].dtype);
  if (unary_type_ok(x->v[n->in[0]].dtype, TYPES_REAL))
    run_unary_state(x, n, &s.u);
  else
    run_clip_int(x, n, &s);
}

const pr_op_t pr__op_clip = {.name = "Clip",
                             .attrs = "min,max",
                             .min_opset = 1,
                             .max_inputs = 3,
                             .infer = infer_clip,
                             .prepare = prepare_clip,
                             .run = run_clip,
                             .destroy = free,
                             .accepts_opaque = false,
                             .inplace = true};

/* ---- one node's float function on a few values (fuse_qdq.c's lookup
 * tables): the kernels' own scalar code, so a table holds what the node
 * would have computed ---- */

bool pr__unary_eval(pr_compile_t *c, const pr_node_t *n, float *v, int64_t len) {
  unary_kind_t kind;
  float alpha = 0.f, beta = 0.f;
  if (n->op == &pr__op_clip) {
    kind = U_CLIP;
    alpha = -INFINITY, beta = INFINITY;
    if (c->opset < 11) {
      alpha = pr__attr_float(n->m, "min", -3.402823e+38f);
      beta = pr__attr_float(n->m, "max", 3.402823e+38f);
    }
    for (int k = 1; k < 3 && c->opset >= 11; k++) {
      const pr_value_t *b = pr__in(c, n, k);
      if (!b) continue;
      if (!b->is_const || b->dtype != PR_DTYPE_FLOAT) return false;
      *(k == 1 ? &alpha : &beta) = *(const float *)b->data;
    }
  } else if (n->op == &pr__op_gelu) {
    kind = strcmp(pr__attr_string(n->m, "approximate", "none"), "tanh") ? U_GELU_ERF : U_GELU_TANH;
  } else {
    size_t k = 0, count = sizeof unary_table / sizeof unary_table[0];
    while (k < count && unary_table[k].op != n->op) k++;
    if (k == count) return false;
    kind = unary_table[k].kind;
    unary_table[k].params(n, &alpha, &beta);
  }
  if (pr__in(c, n, 0)->dtype != PR_DTYPE_FLOAT) return false;
  for (int64_t i = 0; i < len; i++) v[i] = apply_unary(kind, v[i], alpha, beta);
  return true;
}
