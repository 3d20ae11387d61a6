/* Arithmetic with numpy broadcasting: Add, Sub, Mul, Div, Pow, Mod,
 * BitShift and PRelu of two inputs, Sum, Mean, Min and Max of any number.
 * Add..Pow have vector kernels per type; the others one row function per
 * (op, type) on the same broadcast walk. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"
#include "engine/ops/typed.h"

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
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1);
  if (!a || !b) return pr__fail(c, n, PR_ERR_INVALID, "needs two inputs");
  if (!strcmp(n->op->name, "Pow")) {
    /* Pow: base FLOAT, DOUBLE, FLOAT16, INT32 or INT64; the exponent of any numeric
     * type. A float base with a float (or constant integer) exponent takes
     * the vector path; other pairs compute in double (prepare_binary). */
    if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_DOUBLE && a->dtype != PR_DTYPE_INT32 &&
        a->dtype != PR_DTYPE_INT64 && a->dtype != PR_DTYPE_FLOAT16)
      return pr__fail(c, n, PR_ERR_UNSUPPORTED, "Pow of %s", pr_dtype_name(a->dtype));
    if (b->dtype == PR_DTYPE_BOOL || b->dtype == PR_DTYPE_STRING || !pr_dtype_size(b->dtype))
      return pr__fail(c, n, PR_ERR_UNSUPPORTED, "Pow exponent of type %s", pr_dtype_name(b->dtype));
    if (a->dtype == PR_DTYPE_FLOAT && b->dtype != PR_DTYPE_FLOAT && b->is_const &&
        (b->dtype == PR_DTYPE_INT64 || b->dtype == PR_DTYPE_INT32 || b->dtype == PR_DTYPE_DOUBLE)) {
      int idx = pr__compile_add_value(c);
      if (idx < 0) return PR_ERR_NOMEM;
      b = pr__in(c, n, 1), a = pr__in(c, n, 0);
      pr_value_t *f = &c->v[idx];
      pr__value_set_shape(f, PR_DTYPE_FLOAT, b->rank, b->dims);
      int64_t cnt = pr__value_numel(b);
      f->data = malloc(sizeof(float) * (size_t)(cnt + 1));
      if (!f->data) return PR_ERR_NOMEM;
      for (int64_t i = 0; i < cnt; i++)
        ((float *)f->data)[i] = (float)pr__load_double(b->data, b->dtype, i);
      f->is_const = f->owns_data = true;
      f->kind = PR_VAL_CONST;
      f->nbytes = sizeof(float) * (size_t)cnt;
      n->in[1] = idx;
      b = f;
    }
    if (a->dtype != b->dtype || a->dtype != PR_DTYPE_FLOAT) {
      return pr__shape_broadcast(c, n, a, b, a->dtype);
    }
  }
  if (a->dtype != b->dtype)
    return pr__fail(c, n, PR_ERR_INVALID, "input types differ (%s, %s)", pr_dtype_name(a->dtype),
                    pr_dtype_name(b->dtype));
  switch (a->dtype) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64:
    case PR_DTYPE_UINT8:
    case PR_DTYPE_INT8:
    case PR_DTYPE_INT16:
    case PR_DTYPE_UINT16:
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64: break;
    default: return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  }
  return pr__shape_broadcast(c, n, a, b, a->dtype);
}

/* Inputs 0 and 1 of n made row-major, and the walk over the output: strides
 * of each input (0 on broadcast axes), axes merged where both inputs agree. */
static pr_status_t binary_walk(pr_compile_t *c, pr_node_t *n, binary_state_t *s) {
  pr_status_t st;
  if ((st = pr__require_plain(c, n, 0)) || (st = pr__require_plain(c, n, 1))) return st;
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1), *o = pr__out(c, n, 0);
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

static pr_status_t prepare_binary(pr_compile_t *c, pr_node_t *n, binary_kind_t kind) {
  binary_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->kind = kind;
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1), *o = pr__out(c, n, 0);
  pr_status_t st;
  if (kind == B_POW && (a->dtype != PR_DTYPE_FLOAT || b->dtype != PR_DTYPE_FLOAT)) {
    s->mixed = true;
    return PR_OK; /* integer and double tensors are never opaque */
  }
  /* same shape, one side blocked: bring the other into that layout (not for
   * Div, whose 0/0 in the padding would be NaN) */
  if (pr__same_shape(a, b) && (a->opaque || b->opaque) && kind != B_DIV && kind != B_POW) {
    int k = a->opaque ? 1 : 0;
    if ((st = pr__require_md(c, n, k, a->opaque ? &a->md : &b->md))) return st;
    a = pr__in(c, n, 0), b = pr__in(c, n, 1), o = pr__out(c, n, 0);
    o->opaque = true;
    o->md = a->opaque ? a->md : b->md;
    o->nbytes = dnnl_memory_desc_get_size(&o->md);
    s->flat = true;
    s->inner = (int64_t)(o->nbytes / sizeof(float));
    s->outer = 1;
    return PR_OK;
  }
  return binary_walk(c, n, s);
}

/* One row loop per (type, op); EXPR is the element operation. The integer
 * types use the wrapping operations of intmath.h (every input defined); the
 * float ones the plain operators. Only float by float Pow runs here
 * (prepare_binary sends every other pair to run_pow_mixed), so the other
 * types get POW_NONE rows. */
// clang-format off
#define BIN_LOOP(T, NAME, EXPR)                                                                    \
  static void bin_##T##_##NAME##_row(T *o, const T *a, const T *b, int64_t n, int sa, int sb) {    \
    if (sa && sb)                                                                                  \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[i], b[i]);                                     \
    else if (sa)                                                                                   \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[i], b[0]);                                     \
    else if (sb)                                                                                   \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[0], b[i]);                                     \
    else                                                                                           \
      for (int64_t i = 0; i < n; i++) o[i] = EXPR(a[0], b[0]);                                     \
  }
#define ADD(x, y) ((x) + (y))
#define SUB(x, y) ((x) - (y))
#define MUL(x, y) ((x) * (y))
#define DIVF(x, y) ((x) / (y))
/* Pow: x*x for the common square, powf otherwise */
#define POWF(x, y) ((y) == 2.f ? (x) * (x) : powf((x), (y)))
#define POW_NONE(x, y) ((x) * 0 + (y) * 0) /* never runs: see above */
#define BIN_TYPE(T, ADD_E, SUB_E, MUL_E, DIV_E, POW_E)                                             \
  BIN_LOOP(T, ADD, ADD_E)                                                                          \
  BIN_LOOP(T, SUB, SUB_E)                                                                          \
  BIN_LOOP(T, MUL, MUL_E)                                                                          \
  BIN_LOOP(T, DIV, DIV_E)                                                                          \
  BIN_LOOP(T, POW, POW_E)                                                                          \
  static void bin_rows_##T(const binary_state_t *s, T *o, const T *a, const T *b, int th) {        \
    int64_t inner = s->inner;                                                                      \
    int ia = s->sa[s->rank - 1] != 0, ib = s->sb[s->rank - 1] != 0;                                \
    _Pragma("omp parallel for num_threads(th) if (s->outer * inner >= PR_PAR_MIN)")                \
    for (int64_t r = 0; r < s->outer; r++) {                                                       \
      int64_t rem = r, oa = 0, ob = 0;                                                             \
      for (int k = s->rank - 2; k >= 0; k--) {                                                     \
        int64_t idx = rem % s->dims[k];                                                            \
        rem /= s->dims[k];                                                                         \
        oa += idx * s->sa[k];                                                                      \
        ob += idx * s->sb[k];                                                                      \
      }                                                                                            \
      T *orow = o + r * inner;                                                                     \
      switch (s->kind) {                                                                           \
        case B_ADD: bin_##T##_ADD_row(orow, a + oa, b + ob, inner, ia, ib); break;                 \
        case B_SUB: bin_##T##_SUB_row(orow, a + oa, b + ob, inner, ia, ib); break;                 \
        case B_MUL: bin_##T##_MUL_row(orow, a + oa, b + ob, inner, ia, ib); break;                 \
        case B_DIV: bin_##T##_DIV_row(orow, a + oa, b + ob, inner, ia, ib); break;                 \
        case B_POW: bin_##T##_POW_row(orow, a + oa, b + ob, inner, ia, ib); break;                 \
      }                                                                                            \
    }                                                                                              \
  }

BIN_TYPE(float, ADD, SUB, MUL, DIVF, POWF)
BIN_TYPE(double, ADD, SUB, MUL, DIVF, POW_NONE)
BIN_TYPE(int32_t, pr__i32_add, pr__i32_sub, pr__i32_mul, pr__i32_div, POW_NONE)
BIN_TYPE(int64_t, pr__i64_add, pr__i64_sub, pr__i64_mul, pr__i64_div, POW_NONE)
BIN_TYPE(uint8_t, pr__u8_add, pr__u8_sub, pr__u8_mul, pr__u8_div, POW_NONE)
BIN_TYPE(int8_t, pr__i8_add, pr__i8_sub, pr__i8_mul, pr__i8_div, POW_NONE)
BIN_TYPE(int16_t, pr__i16_add, pr__i16_sub, pr__i16_mul, pr__i16_div, POW_NONE)
BIN_TYPE(uint16_t, pr__u16_add, pr__u16_sub, pr__u16_mul, pr__u16_div, POW_NONE)
BIN_TYPE(uint32_t, pr__u32_add, pr__u32_sub, pr__u32_mul, pr__u32_div, POW_NONE)
BIN_TYPE(uint64_t, pr__u64_add, pr__u64_sub, pr__u64_mul, pr__u64_div, POW_NONE)
// clang-format on

/* Pow with an integer or double base, or an exponent of another type. An
 * integer base to an integer exponent is exact and wraps (intmath.h); the
 * other pairs are numpy's power computed in double and stored in the base's
 * type (an integer base saturates, NaN gives 0, as Cast). */
static void run_pow_mixed(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  int64_t sa[PR_MAX_RANK], sb[PR_MAX_RANK], len = pr__value_numel(o);
  pr__bcast_strides(a, o->rank, o->dims, sa);
  pr__bcast_strides(b, o->rank, o->dims, sb);
  bool exact = pr__is_integer(a->dtype) && pr__is_integer(b->dtype);
  for (int64_t i = 0; i < len; i++) {
    int64_t ia = pr__bcast_offset(i, o->rank, o->dims, sa),
            ib = pr__bcast_offset(i, o->rank, o->dims, sb);
    if (exact) {
      int64_t base = pr__load_int64(a->ptr, a->dtype, ia), p;
      if (b->dtype == PR_DTYPE_UINT64) /* exponents of 2^63 and more stay positive */
        p = (int64_t)pr__u64_pow((uint64_t)base, ((const uint64_t *)b->ptr)[ib]);
      else
        p = pr__i64_pow(base, pr__load_int64(b->ptr, b->dtype, ib));
      if (o->dtype == PR_DTYPE_INT32)
        ((int32_t *)o->ptr)[i] = (int32_t)p; /* the low 32 bits of the wrapped power */
      else
        ((int64_t *)o->ptr)[i] = p;
      continue;
    }
    double v = pow(pr__load_double(a->ptr, a->dtype, ia), pr__load_double(b->ptr, b->dtype, ib));
    switch (o->dtype) {
      case PR_DTYPE_FLOAT: ((float *)o->ptr)[i] = (float)v; break;
      case PR_DTYPE_DOUBLE: ((double *)o->ptr)[i] = v; break;
      case PR_DTYPE_FLOAT16: ((uint16_t *)o->ptr)[i] = pr__float_to_half((float)v); break;
      case PR_DTYPE_INT32:
        ((int32_t *)o->ptr)[i] = (int32_t)pr__sat_int(v, INT32_MIN, INT32_MAX);
        break;
      case PR_DTYPE_INT64: ((int64_t *)o->ptr)[i] = pr__sat_i64(v); break;
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
  const void *pa = pr__xin(x, n, 0), *pb = pr__xin(x, n, 1);
  if (s->flat && o->dtype == PR_DTYPE_FLOAT) {
    /* flat float loop, parallel by blocks */
    float *of = po;
    const float *a = pa, *b = pb;
    int64_t len = s->inner;
    switch (s->kind) {
      // clang-format off
#define FLAT(K, E)                                                           \
  case K:                                                                    \
    _Pragma("omp parallel for num_threads(x->threads) if (len >= PR_PAR_MIN)") \
    for (int64_t i = 0; i < len; i++) of[i] = E(a[i], b[i]);                 \
    break;
      FLAT(B_ADD, ADD)
      FLAT(B_SUB, SUB)
      FLAT(B_MUL, MUL)
      FLAT(B_DIV, DIVF)
      FLAT(B_POW, POWF)
#undef FLAT
      // clang-format on
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
    case PR_DTYPE_INT16: bin_rows_int16_t(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_UINT16: bin_rows_uint16_t(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_UINT32: bin_rows_uint32_t(s, po, pa, pb, x->threads); break;
    case PR_DTYPE_UINT64: bin_rows_uint64_t(s, po, pa, pb, x->threads); break;
    default: break;
  }
}

#define BINARY_OP(sym, oname, kind)                                 \
  static pr_status_t prepare_##sym(pr_compile_t *c, pr_node_t *n) { \
    return prepare_binary(c, n, kind);                              \
  }                                                                 \
  const pr_op_t pr__op_##sym = {.name = oname,                      \
                                .attrs = "",                        \
                                .min_opset = 7,                     \
                                .max_inputs = 2,                    \
                                .infer = infer_binary,              \
                                .prepare = prepare_##sym,           \
                                .run = run_binary,                  \
                                .destroy = free,                    \
                                .accepts_opaque = true};

BINARY_OP(add, "Add", B_ADD)
BINARY_OP(sub, "Sub", B_SUB)
BINARY_OP(mul, "Mul", B_MUL)
BINARY_OP(div, "Div", B_DIV)
BINARY_OP(pow, "Pow", B_POW)

/* ---- typed rows: Mod, BitShift, PRelu and the variadic ops ----
 *
 * One row function per (op, element type): o[i] = f(a[i], b[i]) over a row
 * of n, where ia / ib say whether a / b advance (0: one element repeated).
 * Elements are computed in their key type (typed.h: float16 as float). */

typedef void (*row_fn_t)(void *o, const void *a, const void *b, int64_t n, int ia, int ib);

// clang-format off
#define ROW_DEF(NAME, sfx, T, K, EXPR)                                                      \
  static void row_##NAME##_##sfx(void *o_, const void *a_, const void *b_, int64_t n,        \
                                 int ia, int ib) {                                          \
    T *o = o_;                                                                              \
    const T *a = a_, *b = b_;                                                               \
    ROW_LOOP(sfx, K, EXPR, ia && ib, i, i)                                                  \
    else ROW_LOOP(sfx, K, EXPR, ia, i, 0)                                                   \
    else ROW_LOOP(sfx, K, EXPR, ib, 0, i)                                                   \
    else ROW_LOOP(sfx, K, EXPR, 1, 0, 0)                                                    \
  }
#define ROW_LOOP(sfx, K, EXPR, COND, IA, IB)                                                \
  if (COND)                                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                       \
      K x = pr__key_##sfx(a[IA]), y = pr__key_##sfx(b[IB]);                                   \
      o[i] = pr__unkey_##sfx(EXPR);                                                          \
    }
// clang-format on

static inline bool nan_d(double v) {
  return v != v;
}
/* Max / Min: a NaN in either input wins (as ONNX Runtime) */
#define MAX_E (y > x || nan_d(y) ? y : x)
#define MIN_E (y < x || nan_d(y) ? y : x)
#define SUM_E(sfx) pr__tadd_##sfx(x, y)

/* Mod of signed integers, in int64: x mod 0 is 0 (as x / 0 in intmath.h),
 * and b = -1 is special-cased because INT64_MIN % -1 overflows */
static inline int64_t mod_trunc(int64_t a, int64_t b) {
  return b == 0 || b == -1 ? 0 : a % b;
}
/* fmod = 0: the sign of the divisor (Python's %) */
static inline int64_t mod_floor(int64_t a, int64_t b) {
  int64_t r = mod_trunc(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
#define MOD_U_E (y == 0 ? 0 : x % y)
#define MOD_F_E fmodf(x, y)
#define MOD_D_E fmod(x, y)
/* shifts by the type's width or more give 0 (C leaves them undefined) */
#define SHL_E(bits) (y >= (bits) ? 0 : (uint64_t)x << y)
#define SHR_E(bits) (y >= (bits) ? 0 : x >> y)
#define PRELU_E(sfx) (x < 0 ? pr__tmul_##sfx(x, y) : x)

#define DEF_MINMAX_SUM(D, sfx, T, K) \
  ROW_DEF(max, sfx, T, K, MAX_E)     \
  ROW_DEF(min, sfx, T, K, MIN_E)     \
  ROW_DEF(sum, sfx, T, K, SUM_E(sfx))
PR_TYPES_NUMERIC(DEF_MINMAX_SUM)
#define DEF_MOD_SIGNED(sfx, T)                \
  ROW_DEF(mod, sfx, T, T, (T)mod_floor(x, y)) \
  ROW_DEF(fmod, sfx, T, T, (T)mod_trunc(x, y))
DEF_MOD_SIGNED(i8, int8_t)
DEF_MOD_SIGNED(i16, int16_t)
DEF_MOD_SIGNED(i32, int32_t)
DEF_MOD_SIGNED(i64, int64_t)
#define DEF_UNSIGNED(sfx, T, BITS)        \
  ROW_DEF(mod, sfx, T, T, (T)MOD_U_E)     \
  ROW_DEF(shl, sfx, T, T, (T)SHL_E(BITS)) \
  ROW_DEF(shr, sfx, T, T, (T)SHR_E(BITS))
DEF_UNSIGNED(u8, uint8_t, 8)
DEF_UNSIGNED(u16, uint16_t, 16)
DEF_UNSIGNED(u32, uint32_t, 32)
DEF_UNSIGNED(u64, uint64_t, 64)
ROW_DEF(fmod, f32, float, float, MOD_F_E)
ROW_DEF(fmod, f16, uint16_t, float, MOD_F_E)
ROW_DEF(fmod, f64, double, double, MOD_D_E)
ROW_DEF(prelu, f32, float, float, PRELU_E(f32))
ROW_DEF(prelu, f16, uint16_t, float, PRELU_E(f16))
ROW_DEF(prelu, f64, double, double, PRELU_E(f64))
ROW_DEF(prelu, i32, int32_t, int32_t, PRELU_E(i32))
ROW_DEF(prelu, i64, int64_t, int64_t, PRELU_E(i64))
/* Mean: a sum, then each element divided by n */
#define DIV_E (x / y)
ROW_DEF(div, f32, float, float, DIV_E)
ROW_DEF(div, f16, uint16_t, float, DIV_E)
ROW_DEF(div, f64, double, double, DIV_E)

#define ROW_ENTRY(NAME, D, sfx) [PR_DTYPE_##D] = row_##NAME##_##sfx,
#define MAX_ENTRY(D, sfx, T, K) ROW_ENTRY(max, D, sfx)
#define MIN_ENTRY(D, sfx, T, K) ROW_ENTRY(min, D, sfx)
#define SUM_ENTRY(D, sfx, T, K) ROW_ENTRY(sum, D, sfx)
enum { ROW_TYPES = PR_DTYPE_UINT64 + 1 };
static const row_fn_t max_rows[ROW_TYPES] = {PR_TYPES_NUMERIC(MAX_ENTRY)};
static const row_fn_t min_rows[ROW_TYPES] = {PR_TYPES_NUMERIC(MIN_ENTRY)};
static const row_fn_t sum_rows[ROW_TYPES] = {PR_TYPES_NUMERIC(SUM_ENTRY)};
static const row_fn_t mean_rows[ROW_TYPES] = {
    ROW_ENTRY(sum, FLOAT, f32) ROW_ENTRY(sum, FLOAT16, f16) ROW_ENTRY(sum, DOUBLE, f64)};
/* fmod = 0 (floats: none, ONNX requires fmod = 1 for them) */
static const row_fn_t mod_rows[ROW_TYPES] = {
    ROW_ENTRY(mod, INT8, i8) ROW_ENTRY(mod, INT16, i16) ROW_ENTRY(mod, INT32, i32)
        ROW_ENTRY(mod, INT64, i64) ROW_ENTRY(mod, UINT8, u8) ROW_ENTRY(mod, UINT16, u16)
            ROW_ENTRY(mod, UINT32, u32) ROW_ENTRY(mod, UINT64, u64)};
static const row_fn_t fmod_rows[ROW_TYPES] = {
    ROW_ENTRY(fmod, INT8, i8) ROW_ENTRY(fmod, INT16, i16) ROW_ENTRY(fmod, INT32, i32)
        ROW_ENTRY(fmod, INT64, i64) ROW_ENTRY(mod, UINT8, u8) ROW_ENTRY(mod, UINT16, u16)
            ROW_ENTRY(mod, UINT32, u32) ROW_ENTRY(mod, UINT64, u64) ROW_ENTRY(fmod, FLOAT, f32)
                ROW_ENTRY(fmod, FLOAT16, f16) ROW_ENTRY(fmod, DOUBLE, f64)};
static const row_fn_t shl_rows[ROW_TYPES] = {ROW_ENTRY(shl, UINT8, u8) ROW_ENTRY(
    shl, UINT16, u16) ROW_ENTRY(shl, UINT32, u32) ROW_ENTRY(shl, UINT64, u64)};
static const row_fn_t shr_rows[ROW_TYPES] = {ROW_ENTRY(shr, UINT8, u8) ROW_ENTRY(
    shr, UINT16, u16) ROW_ENTRY(shr, UINT32, u32) ROW_ENTRY(shr, UINT64, u64)};
/* unsigned PRelu (opset 16) is the identity: see prepare_rows */
static const row_fn_t prelu_rows[ROW_TYPES] = {
    ROW_ENTRY(prelu, FLOAT, f32) ROW_ENTRY(prelu, FLOAT16, f16) ROW_ENTRY(prelu, DOUBLE, f64)
        ROW_ENTRY(prelu, INT32, i32) ROW_ENTRY(prelu, INT64, i64)};

static row_fn_t row_lookup(const row_fn_t *table, pr_dtype_t t) {
  return (int)t > 0 && (int)t < ROW_TYPES ? table[t] : NULL;
}

/* ---- Mod, BitShift, PRelu: two inputs of one type, broadcast ---- */

typedef struct {
  binary_state_t b; /* the broadcast walk of prepare_binary */
  row_fn_t fn;      /* NULL: output = input 0 (PRelu of unsigned) */
} rows_state_t;

/* the table of n's op for element type t (NULL when it takes no such type) */
static const row_fn_t *rows_table(const pr_node_t *n, pr_dtype_t t) {
  const char *op = n->op->name;
  if (!strcmp(op, "Mod")) return pr__attr_int(n->m, "fmod", 0) ? fmod_rows : mod_rows;
  if (!strcmp(op, "BitShift"))
    return !strcmp(pr__attr_string(n->m, "direction", ""), "LEFT") ? shl_rows : shr_rows;
  if (t == PR_DTYPE_UINT32 || t == PR_DTYPE_UINT64) return NULL; /* PRelu: identity */
  return prelu_rows;
}

static pr_status_t infer_rows(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1);
  if (!a || !b) return pr__fail(c, n, PR_ERR_INVALID, "needs two inputs");
  if (a->dtype != b->dtype)
    return pr__fail(c, n, PR_ERR_INVALID, "input types differ (%s, %s)", pr_dtype_name(a->dtype),
                    pr_dtype_name(b->dtype));
  bool prelu = !strcmp(n->op->name, "PRelu");
  bool unsigned_prelu = prelu && (a->dtype == PR_DTYPE_UINT32 || a->dtype == PR_DTYPE_UINT64);
  if (!unsigned_prelu && !row_lookup(rows_table(n, a->dtype), a->dtype)) {
    if (!strcmp(n->op->name, "Mod") && row_lookup(fmod_rows, a->dtype))
      return pr__fail(c, n, PR_ERR_INVALID, "Mod of %s needs fmod=1", pr_dtype_name(a->dtype));
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  }
  pr_status_t st = pr__shape_broadcast(c, n, a, b, a->dtype);
  if (st || !prelu) return st;
  /* PRelu: the slope broadcasts to X (unidirectional) */
  a = pr__in(c, n, 0);
  if (!pr__same_shape(a, pr__out(c, n, 0)))
    return pr__fail(c, n, PR_ERR_INVALID, "slope does not broadcast to the input's shape");
  return PR_OK;
}

static pr_status_t prepare_rows(pr_compile_t *c, pr_node_t *n) {
  rows_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_dtype_t t = pr__in(c, n, 0)->dtype;
  s->fn = row_lookup(rows_table(n, t), t);
  return binary_walk(c, n, &s->b);
}

static void run_rows(pr_exec_t *x, pr_node_t *n) {
  const rows_state_t *rs = n->state;
  const binary_state_t *s = &rs->b;
  const pr_value_t *o = &x->v[n->out[0]];
  size_t es = pr_dtype_size(o->dtype);
  if (!rs->fn) {
    pr__copy(o->ptr, pr__xin(x, n, 0), o->nbytes, x->threads);
    return;
  }
  char *po = o->ptr;
  const char *pa = pr__xin(x, n, 0), *pb = pr__xin(x, n, 1);
  int64_t inner = s->inner;
  int ia = s->sa[s->rank - 1] != 0, ib = s->sb[s->rank - 1] != 0;
#pragma omp parallel for num_threads(x->threads) if (s->outer * inner >= PR_PAR_MIN)
  for (int64_t r = 0; r < s->outer; r++) {
    /* the row's offsets in a and b, over every axis but the last */
    int64_t oa = pr__bcast_offset(r, s->rank - 1, s->dims, s->sa);
    int64_t ob = pr__bcast_offset(r, s->rank - 1, s->dims, s->sb);
    rs->fn(po + r * inner * (int64_t)es, pa + oa * (int64_t)es, pb + ob * (int64_t)es, inner, ia,
           ib);
  }
}

static pr_status_t check_rows(const pr_mnode_t *m, int opset, char *err, size_t len) {
  (void)opset;
  const char *dir = pr__attr_string(m, "direction", NULL);
  bool shift = !strcmp(m->op_type, "BitShift");
  if (shift && (!dir || (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT")))) {
    snprintf(err, len, "node '%s' (BitShift): direction must be LEFT or RIGHT", pr__mnode_name(m));
    return PR_ERR_INVALID;
  }
  int64_t fmod_attr = pr__attr_int(m, "fmod", 0);
  if (!shift && fmod_attr != 0 && fmod_attr != 1) {
    snprintf(err, len, "node '%s' (Mod): fmod must be 0 or 1", pr__mnode_name(m));
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

#define ROWS_OP(sym, oname, attr_list, minv)             \
  const pr_op_t pr__op_##sym = {.name = oname,           \
                                .attrs = attr_list,      \
                                .min_opset = minv,       \
                                .max_inputs = 2,         \
                                .check = check_rows,     \
                                .infer = infer_rows,     \
                                .prepare = prepare_rows, \
                                .run = run_rows,         \
                                .destroy = free};
ROWS_OP(mod, "Mod", "fmod", 10)
ROWS_OP(bit_shift, "BitShift", "direction", 11)
ROWS_OP(prelu, "PRelu", "", 7)

/* ---- Sum, Mean, Min, Max: any number of broadcast inputs ---- */

static const row_fn_t *variadic_table(const pr_node_t *n) {
  const char *op = n->op->name;
  return !strcmp(op, "Max")   ? max_rows
         : !strcmp(op, "Min") ? min_rows
         : !strcmp(op, "Sum") ? sum_rows
                              : mean_rows;
}

static pr_status_t infer_variadic(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (!a) return pr__fail(c, n, PR_ERR_INVALID, "needs an input");
  if (!row_lookup(variadic_table(n), a->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  int r;
  int64_t d[PR_MAX_RANK];
  pr_status_t st = pr__broadcast_inputs(c, n, 0, &r, d);
  if (st) return st;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

/* out = input 0 broadcast, then out = f(out, input k) row by row; Mean
 * divides by n at the end */
static void run_variadic(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *o = &x->v[n->out[0]];
  pr_dtype_t t = o->dtype;
  row_fn_t fn = row_lookup(variadic_table(n), t);
  int64_t len = pr__value_numel(o), inner = o->rank ? o->dims[o->rank - 1] : 1;
  if (len == 0) return;
  int64_t rows = len / inner, es = (int64_t)pr_dtype_size(t);
  char *po = o->ptr;
  for (int k = 0; k < n->n_in; k++) {
    const pr_value_t *a = &x->v[n->in[k]];
    const char *pa = a->ptr;
    int64_t st[PR_MAX_RANK];
    pr__bcast_strides(a, o->rank, o->dims, st);
    int ia = o->rank ? st[o->rank - 1] != 0 : 1;
#pragma omp parallel for num_threads(x->threads) if (len >= PR_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
      char *orow = po + r * inner * es;
      const char *arow = pa + pr__bcast_offset(r * inner, o->rank, o->dims, st) * es;
      if (k > 0)
        fn(orow, orow, arow, inner, 1, ia);
      else if (ia)
        memcpy(orow, arow, (size_t)(inner * es));
      else
        for (int64_t i = 0; i < inner; i++) memcpy(orow + i * es, arow, (size_t)es);
    }
  }
  if (strcmp(n->op->name, "Mean")) return;
  union {
    float f;
    double d;
    uint16_t h;
  } cnt;
  row_fn_t div = t == PR_DTYPE_DOUBLE    ? row_div_f64
                 : t == PR_DTYPE_FLOAT16 ? row_div_f16
                                         : row_div_f32;
  if (t == PR_DTYPE_DOUBLE)
    cnt.d = n->n_in;
  else if (t == PR_DTYPE_FLOAT16)
    cnt.h = pr__float_to_half((float)n->n_in);
  else
    cnt.f = (float)n->n_in;
  div(po, po, &cnt, len, 1, 0);
}

/* any number of inputs; opsets 1..7 (no broadcasting, consumed_inputs a
 * hint) are the same shape case */
#define VARIADIC_OP(sym, oname)  \
  const pr_op_t pr__op_##sym = { \
      .name = oname, .attrs = "", .min_opset = 1, .infer = infer_variadic, .run = run_variadic};
VARIADIC_OP(sum, "Sum")
VARIADIC_OP(mean, "Mean")
VARIADIC_OP(min, "Min")
VARIADIC_OP(max, "Max")
