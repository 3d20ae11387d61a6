/* Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logic
 * (And, Or, Xor, Not), the predicates IsInf and IsNaN, and Where. These mostly run on small tensors
 * (masks, shapes), so they use one general broadcasting loop rather than specialised kernels. */
#include <math.h>
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"

static bool numeric(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE || t == PR_DTYPE_BOOL || pr__is_integer(t);
}

/* ---- comparisons and logic: two broadcast inputs, bool output ---- */

static pr_status_t infer_compare(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1);
  if (!b || a->dtype != b->dtype || !numeric(a->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "inputs of one numeric type");
  bool logic =
      !strcmp(n->op->name, "And") || !strcmp(n->op->name, "Or") || !strcmp(n->op->name, "Xor");
  if (logic && a->dtype != PR_DTYPE_BOOL)
    return pr__fail(c, n, PR_ERR_INVALID, "inputs must be BOOL");
  return pr__shape_broadcast(c, n, a, b, PR_DTYPE_BOOL);
}

static void run_compare(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  int64_t sa[PR_MAX_RANK], sb[PR_MAX_RANK], len = pr__value_numel(o);
  pr__bcast_strides(a, o->rank, o->dims, sa);
  pr__bcast_strides(b, o->rank, o->dims, sb);
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
  bool i64 = a->dtype == PR_DTYPE_INT64, u64 = a->dtype == PR_DTYPE_UINT64;
  for (int64_t i = 0; i < len; i++) {
    int64_t ia = pr__bcast_offset(i, o->rank, o->dims, sa),
            ib = pr__bcast_offset(i, o->rank, o->dims, sb);
    bool r;
    if (i64) { /* exact for values beyond 2^53 */
      int64_t p = ((const int64_t *)a->ptr)[ia], q = ((const int64_t *)b->ptr)[ib];
      r = kind == 0 ? p == q : kind == 1 ? p < q : kind == 2 ? p > q : kind == 3 ? p <= q : p >= q;
    } else if (u64) {
      uint64_t p = ((const uint64_t *)a->ptr)[ia], q = ((const uint64_t *)b->ptr)[ib];
      r = kind == 0 ? p == q : kind == 1 ? p < q : kind == 2 ? p > q : kind == 3 ? p <= q : p >= q;
    } else {
      double p = pr__load_double(a->ptr, a->dtype, ia), q = pr__load_double(b->ptr, b->dtype, ib);
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

#define COMPARE_OP(sym, oname)                          \
  const pr_op_t pr__op_##sym = {.name = oname,          \
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
  pr_value_t *a = pr__in(c, n, 0);
  if (a->dtype != PR_DTYPE_BOOL) return pr__fail(c, n, PR_ERR_INVALID, "input must be BOOL");
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_BOOL, a->rank, a->dims);
  return PR_OK;
}

static void run_not(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]];
  const uint8_t *in = a->ptr;
  uint8_t *out = pr__xout(x, n, 0);
  for (int64_t i = 0; i < pr__value_numel(a); i++) out[i] = !in[i];
}

const pr_op_t pr__op_not = {.name = "Not",
                            .attrs = "",
                            .min_opset = 1,
                            .max_inputs = 1,
                            .infer = infer_not,
                            .run = run_not};

/* ---- IsInf, IsNaN: float, double, float16 to bool ---- */

static pr_status_t infer_is_class(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_DOUBLE && a->dtype != PR_DTYPE_FLOAT16)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_BOOL, a->rank, a->dims);
  return PR_OK;
}

static void run_is_class(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]];
  uint8_t *out = pr__xout(x, n, 0);
  int64_t len = pr__value_numel(a);
  bool nan = !strcmp(n->op->name, "IsNaN");
  bool neg = pr__attr_int(n->m, "detect_negative", 1),
       pos = pr__attr_int(n->m, "detect_positive", 1);
  for (int64_t i = 0; i < len; i++) {
    double v = pr__load_double(a->ptr, a->dtype, i); /* exact for every input type */
    out[i] = nan ? v != v : (pos && v == INFINITY) || (neg && v == -INFINITY);
  }
}

const pr_op_t pr__op_is_inf = {.name = "IsInf",
                               .attrs = "detect_negative,detect_positive",
                               .min_opset = 10,
                               .max_inputs = 1,
                               .infer = infer_is_class,
                               .run = run_is_class};
const pr_op_t pr__op_is_nan = {.name = "IsNaN",
                               .attrs = "",
                               .min_opset = 9,
                               .max_inputs = 1,
                               .infer = infer_is_class,
                               .run = run_is_class};

/* ---- Where(cond, X, Y) ---- */

static pr_status_t infer_where(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *cd = pr__in(c, n, 0), *a = pr__in(c, n, 1), *b = pr__in(c, n, 2);
  if (!a || !b || cd->dtype != PR_DTYPE_BOOL || a->dtype != b->dtype || !pr_dtype_size(a->dtype))
    return pr__fail(c, n, PR_ERR_INVALID, "needs a BOOL condition and two inputs of one type");
  int r;
  int64_t d[PR_MAX_RANK];
  if (pr__broadcast_shape(cd->rank, cd->dims, a->rank, a->dims, &r, d) < 0 ||
      pr__broadcast_shape(r, d, b->rank, b->dims, &r, d) < 0)
    return pr__fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static void run_where(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *cd = &x->v[n->in[0]], *a = &x->v[n->in[1]], *b = &x->v[n->in[2]],
                   *o = &x->v[n->out[0]];
  int64_t sc[PR_MAX_RANK], sa[PR_MAX_RANK], sb[PR_MAX_RANK], len = pr__value_numel(o);
  pr__bcast_strides(cd, o->rank, o->dims, sc);
  pr__bcast_strides(a, o->rank, o->dims, sa);
  pr__bcast_strides(b, o->rank, o->dims, sb);
  size_t es = pr_dtype_size(o->dtype);
  const uint8_t *cond = cd->ptr;
  for (int64_t i = 0; i < len; i++) {
    bool t = cond[pr__bcast_offset(i, o->rank, o->dims, sc)];
    const pr_value_t *src = t ? a : b;
    int64_t off = pr__bcast_offset(i, o->rank, o->dims, t ? sa : sb);
    memcpy((char *)o->ptr + i * (int64_t)es, (const char *)src->ptr + off * (int64_t)es, es);
  }
}

const pr_op_t pr__op_where = {.name = "Where",
                              .attrs = "",
                              .min_opset = 9,
                              .max_inputs = 3,
                              .infer = infer_where,
                              .run = run_where};
