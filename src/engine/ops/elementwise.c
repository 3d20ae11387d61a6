/* Element-wise operators: unary activations, Clip, numpy-broadcast binary
 * arithmetic, Sum, and the pass-through ops Identity and Dropout.
 *
 * Unary ops whose f(0) is finite run on any layout: they treat an opaque
 * (blocked) buffer as a flat array, padding included. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "engine/ops/fastmath.h"
#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

#define PAR_MIN 16384 /* below this many elements one thread is faster */

void pr_copy(void *dst, const void *src, size_t n, int threads) {
  if (dst == src || !n) return;
  if (n < (1 << 20) || threads <= 1) {
    memcpy(dst, src, n);
    return;
  }
  size_t chunk = (n + (size_t)threads - 1) / (size_t)threads;
#pragma omp parallel for num_threads(threads)
  for (int t = 0; t < threads; t++) {
    size_t off = (size_t)t * chunk;
    if (off < n)
      memcpy((char *)dst + off, (const char *)src + off, off + chunk > n ? n - off : chunk);
  }
}

int pr_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o) {
  int r = ra > rb ? ra : rb;
  int64_t d[PR_MAX_RANK]; /* o may be a or b (accumulating over inputs) */
  if (r > PR_MAX_RANK) return -1;
  for (int k = 0; k < r; k++) {
    int64_t da = k - (r - ra) >= 0 ? a[k - (r - ra)] : 1;
    int64_t db = k - (r - rb) >= 0 ? b[k - (r - rb)] : 1;
    if (da == db || db == 1)
      d[k] = da;
    else if (da == 1)
      d[k] = db;
    else
      return -1;
  }
  for (int k = 0; k < r; k++) o[k] = d[k];
  *ro = r;
  return 0;
}

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

static pr_status_t infer_same(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  if (!a) return pr_fail(c, n, PR_ERR_INVALID, "missing input");
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static pr_status_t infer_float_same(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  if (!a || a->dtype != PR_DTYPE_FLOAT)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "input must be FLOAT");
  return infer_same(c, n);
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
  /* one loop per kind, so each is a plain SIMD loop */
  switch (s->kind) {
/* _Pragma needs its string in one literal */
// clang-format off
#define UNARY_LOOP(K)                                                                              \
  case K:                                                                                          \
    _Pragma("omp parallel for simd num_threads(x->threads) if (len >= PAR_MIN) schedule(static)") \
    for (int64_t i = 0; i < len; i++) o[i] = apply_unary(K, a[i], alpha, beta);                     \
    break;
    UNARY_LOOP(U_RELU) UNARY_LOOP(U_LEAKY) UNARY_LOOP(U_SIGMOID) UNARY_LOOP(U_TANH)
    UNARY_LOOP(U_HSIGMOID) UNARY_LOOP(U_HSWISH) UNARY_LOOP(U_CLIP) UNARY_LOOP(U_SQRT)
    UNARY_LOOP(U_ERF) UNARY_LOOP(U_EXP) UNARY_LOOP(U_LOG) UNARY_LOOP(U_NEG) UNARY_LOOP(U_ABS)
    UNARY_LOOP(U_RECIP) UNARY_LOOP(U_GELU_ERF) UNARY_LOOP(U_GELU_TANH)
    // clang-format on
#undef UNARY_LOOP
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
    case PR_DTYPE_INT64: return infer_same(c, n);
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
  return infer_same(c, n);
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

static void destroy_free(void *p) {
  free(p);
}

const pr_op_t pr_op_clip = {.name = "Clip",
                            .attrs = "min,max",
                            .min_opset = 1,
                            .max_inputs = 3,
                            .infer = infer_clip,
                            .prepare = prepare_clip,
                            .run = run_clip,
                            .destroy = destroy_free,
                            .accepts_opaque = false,
                            .inplace = true};

/* ---- binary arithmetic with numpy broadcasting ---- */

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW } binary_kind_t;

typedef struct {
  binary_kind_t kind;
  int rank; /* after coalescing */
  int64_t dims[PR_MAX_RANK];
  int64_t sa[PR_MAX_RANK], sb[PR_MAX_RANK]; /* element strides, 0 = broadcast */
  int64_t outer, inner;
  bool flat;  /* same shape (or same opaque layout): one flat loop */
  bool mixed; /* Pow of other than float by float: element by element in double */
} binary_state_t;

static pr_status_t infer_binary(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0), *b = pr_in(c, n, 1);
  if (!a || !b) return pr_fail(c, n, PR_ERR_INVALID, "needs two inputs");
  if (!strcmp(n->op->name, "Pow")) {
    /* Pow: base FLOAT, DOUBLE, INT32 or INT64; the exponent of any numeric
     * type. A float base with a float (or constant integer) exponent takes
     * the vector path; other pairs compute in double (prepare_binary). */
    if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_DOUBLE && a->dtype != PR_DTYPE_INT32 &&
        a->dtype != PR_DTYPE_INT64)
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "Pow of %s", pr_dtype_name(a->dtype));
    if (b->dtype == PR_DTYPE_BOOL || b->dtype == PR_DTYPE_STRING || !pr_dtype_size(b->dtype))
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "Pow exponent of type %s", pr_dtype_name(b->dtype));
    if (a->dtype == PR_DTYPE_FLOAT && b->dtype != PR_DTYPE_FLOAT && b->is_const &&
        (b->dtype == PR_DTYPE_INT64 || b->dtype == PR_DTYPE_INT32 || b->dtype == PR_DTYPE_DOUBLE)) {
      int idx = pr_compile_add_value(c);
      if (idx < 0) return PR_ERR_NOMEM;
      b = pr_in(c, n, 1), a = pr_in(c, n, 0);
      pr_value_t *f = &c->v[idx];
      pr_value_set_shape(f, PR_DTYPE_FLOAT, b->rank, b->dims);
      int64_t cnt = pr_value_numel(b);
      f->data = malloc(sizeof(float) * (size_t)(cnt + 1));
      if (!f->data) return PR_ERR_NOMEM;
      for (int64_t i = 0; i < cnt; i++)
        ((float *)f->data)[i] = (float)pr_load_double(b->data, b->dtype, i);
      f->is_const = f->owns_data = true;
      f->kind = PR_VAL_CONST;
      f->nbytes = sizeof(float) * (size_t)cnt;
      n->in[1] = idx;
      b = f;
    }
    if (a->dtype != b->dtype || a->dtype != PR_DTYPE_FLOAT) {
      int r;
      int64_t d[PR_MAX_RANK];
      if (pr_broadcast_shape(a->rank, a->dims, b->rank, b->dims, &r, d) < 0)
        return pr_fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
      pr_value_set_shape(pr_out(c, n, 0), a->dtype, r, d);
      return PR_OK;
    }
  }
  if (a->dtype != b->dtype)
    return pr_fail(c, n, PR_ERR_INVALID, "input types differ (%s, %s)", pr_dtype_name(a->dtype),
                   pr_dtype_name(b->dtype));
  switch (a->dtype) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64:
    case PR_DTYPE_UINT8:
    case PR_DTYPE_INT8: break;
    default: return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  }
  int r;
  int64_t d[PR_MAX_RANK];
  if (pr_broadcast_shape(a->rank, a->dims, b->rank, b->dims, &r, d) < 0)
    return pr_fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static bool same_shape(const pr_value_t *a, const pr_value_t *b) {
  if (a->rank != b->rank) return false;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return false;
  return true;
}

static pr_status_t prepare_binary(pr_compile_t *c, pr_node_t *n, binary_kind_t kind) {
  binary_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->kind = kind;
  pr_value_t *a = pr_in(c, n, 0), *b = pr_in(c, n, 1), *o = pr_out(c, n, 0);
  pr_status_t st;
  if (kind == B_POW && (a->dtype != PR_DTYPE_FLOAT || b->dtype != PR_DTYPE_FLOAT)) {
    s->mixed = true;
    return PR_OK; /* integer and double tensors are never opaque */
  }
  /* same shape, one side blocked: bring the other into that layout (not for
   * Div, whose 0/0 in the padding would be NaN) */
  if (same_shape(a, b) && (a->opaque || b->opaque) && kind != B_DIV && kind != B_POW) {
    int k = a->opaque ? 1 : 0;
    if ((st = pr_require_md(c, n, k, a->opaque ? &a->md : &b->md))) return st;
    a = pr_in(c, n, 0), b = pr_in(c, n, 1), o = pr_out(c, n, 0);
    o->opaque = true;
    o->md = a->opaque ? a->md : b->md;
    o->nbytes = dnnl_memory_desc_get_size(&o->md);
    s->flat = true;
    s->inner = (int64_t)(o->nbytes / sizeof(float));
    s->outer = 1;
    return PR_OK;
  }
  if ((st = pr_require_plain(c, n, 0)) || (st = pr_require_plain(c, n, 1))) return st;
  a = pr_in(c, n, 0), b = pr_in(c, n, 1), o = pr_out(c, n, 0);
  int r = o->rank;
  int64_t sa[PR_MAX_RANK], sb[PR_MAX_RANK];
  int64_t ea = 1, eb = 1;
  for (int k = r - 1; k >= 0; k--) {
    int ka = k - (r - a->rank), kb = k - (r - b->rank);
    int64_t da = ka >= 0 ? a->dims[ka] : 1, db = kb >= 0 ? b->dims[kb] : 1;
    sa[k] = da == 1 && o->dims[k] != 1 ? 0 : ea;
    sb[k] = db == 1 && o->dims[k] != 1 ? 0 : eb;
    ea *= da;
    eb *= db;
  }
  /* coalesce: merge dim k into k+1 when each input is broadcast in both or in neither */
  int rr = 0;
  int64_t dims[PR_MAX_RANK], ca[PR_MAX_RANK], cb[PR_MAX_RANK];
  for (int k = 0; k < r; k++) {
    if (o->dims[k] == 1) continue;
    if (rr > 0 && (ca[rr - 1] == 0) == (sa[k] == 0) && (cb[rr - 1] == 0) == (sb[k] == 0)) {
      dims[rr - 1] *= o->dims[k];
      ca[rr - 1] = sa[k];
      cb[rr - 1] = sb[k];
    } else {
      dims[rr] = o->dims[k];
      ca[rr] = sa[k];
      cb[rr] = sb[k];
      rr++;
    }
  }
  if (rr == 0) {
    dims[0] = 1, ca[0] = 1, cb[0] = 1, rr = 1;
  }
  s->rank = rr;
  for (int k = 0; k < rr; k++) s->dims[k] = dims[k], s->sa[k] = ca[k], s->sb[k] = cb[k];
  s->inner = dims[rr - 1];
  s->outer = 1;
  for (int k = 0; k < rr - 1; k++) s->outer *= dims[k];
  s->flat = rr == 1 && ca[0] && cb[0];
  return PR_OK;
}

/* One row loop per (type, op); EXPR is the element operation. The integer
 * types use the wrapping operations of intmath.h (every input defined); the
 * float ones the plain operators. Pow rows exist only for float: other Pow
 * pairs take run_pow_mixed. */
// clang-format off
#define BIN_LOOP(T, NAME, EXPR)                                                                 \
  static void bin_##T##_##NAME##_row(T *o, const T *a, const T *b, int64_t n, int sa, int sb) { \
    if (sa && sb)                                                                               \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[i], b[i]);                                  \
    else if (sa)                                                                                \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[i], b[0]);                                  \
    else if (sb)                                                                                \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[0], b[i]);                                  \
    else                                                                                        \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[0], b[0]);                                  \
  }
#define ADD(x, y) ((x) + (y))
#define SUB(x, y) ((x) - (y))
#define MUL(x, y) ((x) * (y))
#define DIVF(x, y) ((x) / (y))
/* Pow: x*x for the common square, powf otherwise */
#define POWF(x, y) ((y) == 2.f ? (x) * (x) : powf((x), (y)))
#define POW_NONE(x, y) ((x)*0 + (y)*0) /* never used: see above */
#define BIN_TYPE(T, ADD_E, SUB_E, MUL_E, DIV_E, POW_E)                                           \
  BIN_LOOP(T, ADD, ADD_E)                                                                        \
  BIN_LOOP(T, SUB, SUB_E)                                                                        \
  BIN_LOOP(T, MUL, MUL_E)                                                                        \
  BIN_LOOP(T, DIV, DIV_E)                                                                        \
  BIN_LOOP(T, POW, POW_E)                                                                        \
  static void bin_rows_##T(const binary_state_t *s, T *o, const T *a, const T *b, int th) {      \
    int64_t inner = s->inner;                                                                    \
    int ia = s->sa[s->rank - 1] != 0, ib = s->sb[s->rank - 1] != 0;                              \
    _Pragma("omp parallel for num_threads(th) if (s->outer * inner >= PAR_MIN)")                 \
    for (int64_t r = 0; r < s->outer; r++) {                                                     \
      int64_t rem = r, oa = 0, ob = 0;                                                           \
      for (int k = s->rank - 2; k >= 0; k--) {                                                   \
        int64_t idx = rem % s->dims[k];                                                          \
        rem /= s->dims[k];                                                                       \
        oa += idx * s->sa[k];                                                                    \
        ob += idx * s->sb[k];                                                                    \
      }                                                                                          \
      T *orow = o + r * inner;                                                                   \
      switch (s->kind) {                                                                         \
        case B_ADD: bin_##T##_ADD_row(orow, a + oa, b + ob, inner, ia, ib); break;               \
        case B_SUB: bin_##T##_SUB_row(orow, a + oa, b + ob, inner, ia, ib); break;               \
        case B_MUL: bin_##T##_MUL_row(orow, a + oa, b + ob, inner, ia, ib); break;               \
        case B_DIV: bin_##T##_DIV_row(orow, a + oa, b + ob, inner, ia, ib); break;               \
        case B_POW: bin_##T##_POW_row(orow, a + oa, b + ob, inner, ia, ib); break;               \
      }                                                                                          \
    }                                                                                            \
  }

BIN_TYPE(float, ADD, SUB, MUL, DIVF, POWF)
BIN_TYPE(double, ADD, SUB, MUL, DIVF, POWF)
BIN_TYPE(int32_t, pr_i32_add, pr_i32_sub, pr_i32_mul, pr_i32_div, POW_NONE)
BIN_TYPE(int64_t, pr_i64_add, pr_i64_sub, pr_i64_mul, pr_i64_div, POW_NONE)
BIN_TYPE(uint8_t, pr_u8_add, pr_u8_sub, pr_u8_mul, pr_u8_div, POW_NONE)
BIN_TYPE(int8_t, pr_i8_add, pr_i8_sub, pr_i8_mul, pr_i8_div, POW_NONE)
// clang-format on

static bool is_integer(pr_dtype_t t) {
  switch (t) {
    case PR_DTYPE_INT8:
    case PR_DTYPE_INT16:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64:
    case PR_DTYPE_UINT8:
    case PR_DTYPE_UINT16:
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64: return true;
    default: return false;
  }
}

/* Pow with an integer or double base, or an exponent of another type. An
 * integer base to an integer exponent is exact and wraps (intmath.h); the
 * other pairs are numpy's power computed in double and stored in the base's
 * type (an integer base saturates, NaN gives 0, as Cast). */
static void run_pow_mixed(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  int64_t sa[PR_MAX_RANK], sb[PR_MAX_RANK], len = pr_value_numel(o);
  pr_bcast_strides(a, o->rank, o->dims, sa);
  pr_bcast_strides(b, o->rank, o->dims, sb);
  bool exact = is_integer(a->dtype) && is_integer(b->dtype);
  for (int64_t i = 0; i < len; i++) {
    int64_t ia = pr_bcast_offset(i, o->rank, o->dims, sa),
            ib = pr_bcast_offset(i, o->rank, o->dims, sb);
    if (exact) {
      int64_t base = pr_load_int64(a->ptr, a->dtype, ia), p;
      if (b->dtype == PR_DTYPE_UINT64) /* exponents of 2^63 and more stay positive */
        p = (int64_t)pr_u64_pow((uint64_t)base, ((const uint64_t *)b->ptr)[ib]);
      else
        p = pr_i64_pow(base, pr_load_int64(b->ptr, b->dtype, ib));
      if (o->dtype == PR_DTYPE_INT32)
        ((int32_t *)o->ptr)[i] = (int32_t)p; /* the low 32 bits of the wrapped power */
      else
        ((int64_t *)o->ptr)[i] = p;
      continue;
    }
    double v = pow(pr_load_double(a->ptr, a->dtype, ia), pr_load_double(b->ptr, b->dtype, ib));
    switch (o->dtype) {
      case PR_DTYPE_FLOAT: ((float *)o->ptr)[i] = (float)v; break;
      case PR_DTYPE_DOUBLE: ((double *)o->ptr)[i] = v; break;
      case PR_DTYPE_INT32:
        ((int32_t *)o->ptr)[i] = (int32_t)pr_sat_int(v, INT32_MIN, INT32_MAX);
        break;
      case PR_DTYPE_INT64: ((int64_t *)o->ptr)[i] = pr_sat_i64(v); break;
      default: break;
    }
  }
}

static void run_binary(pr_exec_t *x, pr_node_t *n) {
  const binary_state_t *s = n->state;
  const pr_value_t *o = &x->v[n->out[0]];
  if (s->mixed) {
    run_pow_mixed(x, n);
    return;
  }
  void *po = o->ptr;
  const void *pa = pr_xin(x, n, 0), *pb = pr_xin(x, n, 1);
  if (s->flat && o->dtype == PR_DTYPE_FLOAT) {
    /* flat float loop, parallel by blocks */
    float *of = po;
    const float *a = pa, *b = pb;
    int64_t len = s->inner;
    switch (s->kind) {
// clang-format off
#define FLAT(K, E)                                                                              \
  case K:                                                                                       \
    _Pragma("omp parallel for num_threads(x->threads) if (len >= PAR_MIN)") for (int64_t i = 0; \
                                                                                 i < len; i++)  \
        of[i] = E(a[i], b[i]);                                                                  \
    break;
      FLAT(B_ADD, ADD) FLAT(B_SUB, SUB) FLAT(B_MUL, MUL) FLAT(B_DIV, DIVF) FLAT(B_POW, POWF)
// clang-format on
#undef FLAT
    }
    return;
  }
  switch (o->dtype) {
    case PR_DTYPE_FLOAT: bin_rows_float(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_DOUBLE: bin_rows_double(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_INT32: bin_rows_int32_t(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_INT64: bin_rows_int64_t(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_UINT8: bin_rows_uint8_t(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_INT8: bin_rows_int8_t(s, po, pa, pb, x->threads); break;
    default: break;
  }
}

#define BINARY_OP(sym, oname, kind)                                 \
  static pr_status_t prepare_##sym(pr_compile_t *c, pr_node_t *n) { \
    return prepare_binary(c, n, kind);                              \
  }                                                                 \
  const pr_op_t pr_op_##sym = {.name = oname,                       \
                               .attrs = "",                         \
                               .min_opset = 7,                      \
                               .max_inputs = 2,                     \
                               .infer = infer_binary,               \
                               .prepare = prepare_##sym,            \
                               .run = run_binary,                   \
                               .destroy = destroy_free,             \
                               .accepts_opaque = true};

BINARY_OP(add, "Add", B_ADD)
BINARY_OP(sub, "Sub", B_SUB)
BINARY_OP(mul, "Mul", B_MUL)
BINARY_OP(div, "Div", B_DIV)
BINARY_OP(pow, "Pow", B_POW)

/* ---- Sum: float, any number of broadcast inputs ---- */

pr_status_t pr_broadcast_inputs(pr_compile_t *c, pr_node_t *n, int from, int *ro, int64_t *od) {
  pr_value_t *a = pr_in(c, n, from);
  if (!a) return pr_fail(c, n, PR_ERR_INVALID, "needs inputs");
  *ro = a->rank;
  memcpy(od, a->dims, sizeof(int64_t) * PR_MAX_RANK);
  for (int k = from + 1; k < n->n_in; k++) {
    pr_value_t *b = pr_in(c, n, k);
    if (!b || b->dtype != a->dtype) return pr_fail(c, n, PR_ERR_INVALID, "inputs of one type");
    if (pr_broadcast_shape(*ro, od, b->rank, b->dims, ro, od) < 0)
      return pr_fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
  }
  return PR_OK;
}

static pr_status_t infer_sum(pr_compile_t *c, pr_node_t *n) {
  int r = 0;
  int64_t d[PR_MAX_RANK];
  if (n->n_in && pr_in(c, n, 0) && pr_in(c, n, 0)->dtype != PR_DTYPE_FLOAT)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "inputs must be FLOAT");
  pr_status_t st = pr_broadcast_inputs(c, n, 0, &r, d);
  if (st) return st;
  pr_value_set_shape(pr_out(c, n, 0), PR_DTYPE_FLOAT, r, d);
  return PR_OK;
}

static void run_sum(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *o = &x->v[n->out[0]];
  float *out = o->ptr;
  int64_t len = pr_value_numel(o);
  int r = o->rank;
  memset(out, 0, (size_t)len * sizeof(float));
  for (int k = 0; k < n->n_in; k++) {
    const pr_value_t *a = &x->v[n->in[k]];
    const float *pa = a->ptr;
    int64_t st[PR_MAX_RANK];
    pr_bcast_strides(a, r, o->dims, st);
    for (int64_t i = 0; i < len; i++) {
      int64_t off = pr_bcast_offset(i, r, o->dims, st);
      out[i] += pa[off];
    }
  }
}

const pr_op_t pr_op_sum = {
    .name = "Sum", .attrs = "", .min_opset = 8, .infer = infer_sum, .run = run_sum};

/* ---- Identity and Dropout (inference): the input unchanged ---- */

static void run_view_copy(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *in = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  pr_copy(o->ptr, in->ptr, o->nbytes, x->threads);
}

const pr_op_t pr_op_identity = {.name = "Identity",
                                .attrs = "",
                                .min_opset = 1,
                                .max_inputs = 1,
                                .infer = infer_same,
                                .run = run_view_copy,
                                .view = true};

static pr_status_t infer_dropout(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *tm = pr_in(c, n, 2), *ratio = pr_in(c, n, 1);
  if (tm) {
    if (!tm->is_const || tm->dtype != PR_DTYPE_BOOL)
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "training_mode must be a constant bool");
    bool training = *(const uint8_t *)tm->data;
    float r = 0.5f;
    if (ratio) {
      if (!ratio->is_const || ratio->dtype != PR_DTYPE_FLOAT)
        return pr_fail(c, n, PR_ERR_UNSUPPORTED, "ratio must be a constant float");
      r = *(const float *)ratio->data;
    }
    if (training && r != 0.f)
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "training mode (random dropout) is not inference");
  }
  pr_status_t st = infer_same(c, n);
  pr_value_t *mask = pr_out(c, n, 1);
  if (!st && mask)
    pr_value_set_shape(mask, PR_DTYPE_BOOL, pr_in(c, n, 0)->rank, pr_in(c, n, 0)->dims);
  return st;
}

static void run_dropout(pr_exec_t *x, pr_node_t *n) {
  run_view_copy(x, n);
  if (n->n_out > 1 && n->out[1] >= 0) {
    const pr_value_t *m = &x->v[n->out[1]];
    memset(m->ptr, 1, m->nbytes);
  }
}

const pr_op_t pr_op_dropout = {.name = "Dropout",
                               .attrs = "seed,ratio,is_test",
                               .min_opset = 7,
                               .max_inputs = 3,
                               .infer = infer_dropout,
                               .run = run_dropout,
                               .view = true};
