/* Arithmetic with numpy broadcasting: Add, Sub, Mul, Div and Pow of two
 * inputs, Sum, Min and Max of any number. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

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
      return pr_infer_broadcast(c, n, a, b, a->dtype);
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
  return pr_infer_broadcast(c, n, a, b, a->dtype);
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
  if (pr_same_shape(a, b) && (a->opaque || b->opaque) && kind != B_DIV && kind != B_POW) {
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
                               .destroy = free,                     \
                               .accepts_opaque = true};

BINARY_OP(add, "Add", B_ADD)
BINARY_OP(sub, "Sub", B_SUB)
BINARY_OP(mul, "Mul", B_MUL)
BINARY_OP(div, "Div", B_DIV)
BINARY_OP(pow, "Pow", B_POW)

/* ---- Sum: float, any number of broadcast inputs ---- */

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

/* ---- Min / Max: any number of broadcast inputs ---- */

static pr_status_t infer_minmax(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_INT32 && a->dtype != PR_DTYPE_INT64 &&
      a->dtype != PR_DTYPE_DOUBLE)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  int r;
  int64_t d[PR_MAX_RANK];
  pr_status_t st = pr_broadcast_inputs(c, n, 0, &r, d);
  if (st) return st;
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static void run_minmax(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *o = &x->v[n->out[0]];
  bool is_max = !strcmp(n->op->name, "Max");
  int64_t len = pr_value_numel(o), st[PR_MAX_RANK];
  for (int k = 0; k < n->n_in; k++) {
    const pr_value_t *a = &x->v[n->in[k]];
    pr_bcast_strides(a, o->rank, o->dims, st);
    for (int64_t i = 0; i < len; i++) {
      int64_t off = pr_bcast_offset(i, o->rank, o->dims, st);
#define MINMAX(T)                                                                 \
  {                                                                               \
    T v = ((const T *)a->ptr)[off], *po = &((T *)o->ptr)[i];                      \
    if (k == 0 || (is_max ? v > *po : v < *po) || v != v) *po = v; /* NaN wins */ \
  }
      switch (o->dtype) {
        case PR_DTYPE_FLOAT: MINMAX(float) break;
        case PR_DTYPE_DOUBLE: MINMAX(double) break;
        case PR_DTYPE_INT32: MINMAX(int32_t) break;
        default: MINMAX(int64_t) break;
      }
#undef MINMAX
    }
  }
}

const pr_op_t pr_op_min = {
    .name = "Min", .attrs = "", .min_opset = 8, .infer = infer_minmax, .run = run_minmax};
const pr_op_t pr_op_max = {
    .name = "Max", .attrs = "", .min_opset = 8, .infer = infer_minmax, .run = run_minmax};
