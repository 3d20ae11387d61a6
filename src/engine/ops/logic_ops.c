/* Comparisons, logic, Where, Min/Max, Expand, ConstantOfShape, Trilu and
 * CumSum. These mostly run on small tensors (masks, shapes), so they use one
 * general broadcasting loop rather than specialised kernels. */
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"

static bool numeric(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE || t == PR_DTYPE_INT64 ||
         t == PR_DTYPE_INT32 || t == PR_DTYPE_INT8 || t == PR_DTYPE_UINT8 || t == PR_DTYPE_BOOL;
}

/* ---- comparisons and logic: two broadcast inputs, bool output ---- */

static pr_status_t infer_compare(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0), *b = pr_in(c, n, 1);
  if (!b || a->dtype != b->dtype || !numeric(a->dtype))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "inputs of one numeric type");
  bool logic =
      !strcmp(n->op->name, "And") || !strcmp(n->op->name, "Or") || !strcmp(n->op->name, "Xor");
  if (logic && a->dtype != PR_DTYPE_BOOL)
    return pr_fail(c, n, PR_ERR_INVALID, "inputs must be BOOL");
  int r;
  int64_t d[PR_MAX_RANK];
  if (pr_broadcast_shape(a->rank, a->dims, b->rank, b->dims, &r, d) < 0)
    return pr_fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
  pr_value_set_shape(pr_out(c, n, 0), PR_DTYPE_BOOL, r, d);
  return PR_OK;
}

static void run_compare(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  int64_t sa[PR_MAX_RANK], sb[PR_MAX_RANK], len = pr_value_numel(o);
  pr_bcast_strides(a, o->rank, o->dims, sa);
  pr_bcast_strides(b, o->rank, o->dims, sb);
  const char *op = n->op->name;
  int kind = !strcmp(op, "Equal")            ? 0
             : !strcmp(op, "Less")           ? 1
             : !strcmp(op, "Greater")        ? 2
             : !strcmp(op, "LessOrEqual")    ? 3
             : !strcmp(op, "GreaterOrEqual") ? 4
             : !strcmp(op, "And")            ? 5
             : !strcmp(op, "Or")             ? 6
                                             : 7;
  uint8_t *out = o->ptr;
  bool i64 = a->dtype == PR_DTYPE_INT64;
  for (int64_t i = 0; i < len; i++) {
    int64_t ia = pr_bcast_offset(i, o->rank, o->dims, sa),
            ib = pr_bcast_offset(i, o->rank, o->dims, sb);
    bool r;
    if (i64) { /* exact for values beyond 2^53 */
      int64_t p = ((const int64_t *)a->ptr)[ia], q = ((const int64_t *)b->ptr)[ib];
      r = kind == 0 ? p == q : kind == 1 ? p < q : kind == 2 ? p > q : kind == 3 ? p <= q : p >= q;
    } else {
      double p = pr_load_double(a->ptr, a->dtype, ia), q = pr_load_double(b->ptr, b->dtype, ib);
      switch (kind) {
        case 0: r = p == q; break;
        case 1: r = p < q; break;
        case 2: r = p > q; break;
        case 3: r = p <= q; break;
        case 4: r = p >= q; break;
        case 5: r = p && q; break;
        case 6: r = p || q; break;
        default: r = (p != 0) != (q != 0); break;
      }
    }
    out[i] = r;
  }
}

#define COMPARE_OP(sym, oname)                         \
  const pr_op_t pr_op_##sym = {.name = oname,          \
                               .attrs = "",            \
                               .min_opset = 7,         \
                               .max_inputs = 2,        \
                               .infer = infer_compare, \
                               .run = run_compare};
COMPARE_OP(equal, "Equal")
COMPARE_OP(less, "Less")
COMPARE_OP(greater, "Greater")
COMPARE_OP(less_or_equal, "LessOrEqual")
COMPARE_OP(greater_or_equal, "GreaterOrEqual")
COMPARE_OP(and, "And")
COMPARE_OP(or, "Or")
COMPARE_OP(xor, "Xor")

static pr_status_t infer_not(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  if (a->dtype != PR_DTYPE_BOOL) return pr_fail(c, n, PR_ERR_INVALID, "input must be BOOL");
  pr_value_set_shape(pr_out(c, n, 0), PR_DTYPE_BOOL, a->rank, a->dims);
  return PR_OK;
}

static void run_not(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]];
  const uint8_t *in = a->ptr;
  uint8_t *out = pr_xout(x, n, 0);
  for (int64_t i = 0; i < pr_value_numel(a); i++) out[i] = !in[i];
}

const pr_op_t pr_op_not = {.name = "Not",
                           .attrs = "",
                           .min_opset = 1,
                           .max_inputs = 1,
                           .infer = infer_not,
                           .run = run_not};

/* ---- Where(cond, X, Y) ---- */

static pr_status_t infer_where(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *cd = pr_in(c, n, 0), *a = pr_in(c, n, 1), *b = pr_in(c, n, 2);
  if (!a || !b || cd->dtype != PR_DTYPE_BOOL || a->dtype != b->dtype || !pr_dtype_size(a->dtype))
    return pr_fail(c, n, PR_ERR_INVALID, "needs a BOOL condition and two inputs of one type");
  int r;
  int64_t d[PR_MAX_RANK];
  if (pr_broadcast_shape(cd->rank, cd->dims, a->rank, a->dims, &r, d) < 0 ||
      pr_broadcast_shape(r, d, b->rank, b->dims, &r, d) < 0)
    return pr_fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static void run_where(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *cd = &x->v[n->in[0]], *a = &x->v[n->in[1]], *b = &x->v[n->in[2]],
                   *o = &x->v[n->out[0]];
  int64_t sc[PR_MAX_RANK], sa[PR_MAX_RANK], sb[PR_MAX_RANK], len = pr_value_numel(o);
  pr_bcast_strides(cd, o->rank, o->dims, sc);
  pr_bcast_strides(a, o->rank, o->dims, sa);
  pr_bcast_strides(b, o->rank, o->dims, sb);
  size_t es = pr_dtype_size(o->dtype);
  const uint8_t *cond = cd->ptr;
  for (int64_t i = 0; i < len; i++) {
    bool t = cond[pr_bcast_offset(i, o->rank, o->dims, sc)];
    const pr_value_t *src = t ? a : b;
    int64_t off = pr_bcast_offset(i, o->rank, o->dims, t ? sa : sb);
    memcpy((char *)o->ptr + i * (int64_t)es, (const char *)src->ptr + off * (int64_t)es, es);
  }
}

const pr_op_t pr_op_where = {.name = "Where",
                             .attrs = "",
                             .min_opset = 9,
                             .max_inputs = 3,
                             .infer = infer_where,
                             .run = run_where};

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

const pr_op_t pr_op_min = {.name = "Min",
                           .attrs = "",
                           .min_opset = 8,
                           .max_inputs = 16,
                           .infer = infer_minmax,
                           .run = run_minmax};
const pr_op_t pr_op_max = {.name = "Max",
                           .attrs = "",
                           .min_opset = 8,
                           .max_inputs = 16,
                           .infer = infer_minmax,
                           .run = run_minmax};

/* ---- Expand(input, shape) ---- */

static pr_status_t infer_expand(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  int64_t shape[PR_MAX_RANK];
  int ns = pr_const_ints(pr_in(c, n, 1), shape, PR_MAX_RANK);
  if (ns < 0) return pr_fail(c, n, PR_ERR_UNSUPPORTED, "shape must be constant");
  int r;
  int64_t d[PR_MAX_RANK];
  if (pr_broadcast_shape(a->rank, a->dims, ns, shape, &r, d) < 0)
    return pr_fail(c, n, PR_ERR_INVALID, "shape does not broadcast");
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static void run_expand(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t st[PR_MAX_RANK], len = pr_value_numel(o);
  size_t es = pr_dtype_size(o->dtype);
  pr_bcast_strides(a, o->rank, o->dims, st);
  for (int64_t i = 0; i < len; i++)
    memcpy((char *)o->ptr + i * (int64_t)es,
           (const char *)a->ptr + pr_bcast_offset(i, o->rank, o->dims, st) * (int64_t)es, es);
}

const pr_op_t pr_op_expand = {.name = "Expand",
                              .attrs = "",
                              .min_opset = 8,
                              .max_inputs = 2,
                              .infer = infer_expand,
                              .run = run_expand};

/* ---- ConstantOfShape(shape) ---- */

static pr_status_t infer_constant_of_shape(pr_compile_t *c, pr_node_t *n) {
  int64_t shape[PR_MAX_RANK];
  pr_value_t *sv = pr_in(c, n, 0);
  int ns = sv && pr_value_numel(sv) == 0 ? 0 : pr_const_ints(sv, shape, PR_MAX_RANK);
  if (ns < 0) return pr_fail(c, n, PR_ERR_UNSUPPORTED, "shape must be a constant 1-D int64 tensor");
  for (int k = 0; k < ns; k++)
    if (shape[k] < 0) return pr_fail(c, n, PR_ERR_INVALID, "negative dimension");
  const pr_attr_t *v = pr_attr_find(n->m, "value");
  pr_dtype_t dt = PR_DTYPE_FLOAT;
  if (v) {
    if (v->type != PR_ATTR_TENSOR || pr_tensor_numel(v->t) != 1 || !pr_dtype_size(v->t->dtype))
      return pr_fail(c, n, PR_ERR_INVALID, "value must be a one-element tensor");
    dt = v->t->dtype;
  }
  pr_value_set_shape(pr_out(c, n, 0), dt, ns, shape);
  return PR_OK;
}

static void run_constant_of_shape(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *o = &x->v[n->out[0]];
  const pr_attr_t *v = pr_attr_find(n->m, "value");
  size_t es = pr_dtype_size(o->dtype);
  int64_t len = pr_value_numel(o);
  if (!v) {
    memset(o->ptr, 0, o->nbytes);
    return;
  }
  for (int64_t i = 0; i < len; i++) memcpy((char *)o->ptr + i * (int64_t)es, v->t->data, es);
}

const pr_op_t pr_op_constant_of_shape = {.name = "ConstantOfShape",
                                         .attrs = "value",
                                         .min_opset = 9,
                                         .max_inputs = 1,
                                         .infer = infer_constant_of_shape,
                                         .run = run_constant_of_shape};

/* ---- Trilu(input, k) ---- */

static pr_status_t infer_trilu(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0), *k = pr_in(c, n, 1);
  int64_t kv;
  if (a->rank < 2) return pr_fail(c, n, PR_ERR_INVALID, "input needs rank >= 2");
  if (k && pr_const_ints(k, &kv, 1) != 1)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "k must be a constant scalar");
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static void run_trilu(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t k = 0;
  if (n->n_in > 1 && n->in[1] >= 0) {
    const pr_value_t *kv = &x->v[n->in[1]];
    k = kv->dtype == PR_DTYPE_INT64 ? *(const int64_t *)kv->ptr : *(const int32_t *)kv->ptr;
  }
  bool upper = pr_attr_int(n->m, "upper", 1) != 0;
  int64_t rows = a->dims[a->rank - 2], cols = a->dims[a->rank - 1];
  int64_t plane = rows * cols, mats = plane > 0 ? pr_value_numel(a) / plane : 0;
  size_t es = pr_dtype_size(a->dtype);
  for (int64_t m = 0; m < mats; m++)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) {
        int64_t off = ((m * rows + i) * cols + j) * (int64_t)es;
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep)
          memcpy((char *)o->ptr + off, (const char *)a->ptr + off, es);
        else
          memset((char *)o->ptr + off, 0, es);
      }
}

const pr_op_t pr_op_trilu = {.name = "Trilu",
                             .attrs = "upper",
                             .min_opset = 14,
                             .max_inputs = 2,
                             .infer = infer_trilu,
                             .run = run_trilu};

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
