/* Generators: tensors made from constants, Range and ConstantOfShape. */
#include <math.h>
#include <string.h>

#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

/* ---- Range: folded (its length depends on the values) ---- */

/* Elements of an int64 Range, counted exactly (a double rounds values near
 * the ends, and the count it gave could run past the limit and overflow). */
static int64_t range_len_i64(int64_t start, int64_t limit, int64_t delta) {
  if (delta > 0 ? limit <= start : limit >= start) return 0;
  uint64_t span = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
  uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
  uint64_t len = (span - 1) / step + 1;
  return len > INT64_MAX ? INT64_MAX : (int64_t)len;
}

static pr_status_t infer_range(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *s = pr__in(c, n, 0), *l = pr__in(c, n, 1), *d = pr__in(c, n, 2);
  if (!s || !l || !d || !s->is_const || !l->is_const || !d->is_const)
    return pr__need_values(c, n, "start, limit and delta must be known when the session is made");
  if (s->dtype != l->dtype || s->dtype != d->dtype || pr__value_numel(s) != 1 ||
      pr__value_numel(l) != 1 || pr__value_numel(d) != 1)
    return pr__fail(c, n, PR_ERR_INVALID, "start, limit and delta must be scalars of one type");
  int64_t len;
  if (s->dtype == PR_DTYPE_INT64) {
    int64_t delta = *(const int64_t *)d->data;
    if (delta == 0) return pr__fail(c, n, PR_ERR_INVALID, "delta is zero");
    len = range_len_i64(*(const int64_t *)s->data, *(const int64_t *)l->data, delta);
  } else {
    switch (s->dtype) {
      case PR_DTYPE_FLOAT:
      case PR_DTYPE_DOUBLE:
      case PR_DTYPE_INT32:
      case PR_DTYPE_INT16: break;
      default: return pr__fail(c, n, PR_ERR_UNSUPPORTED, "Range of %s", pr_dtype_name(s->dtype));
    }
    double start = pr__load_double(s->data, s->dtype, 0),
           limit = pr__load_double(l->data, l->dtype, 0),
           delta = pr__load_double(d->data, d->dtype, 0);
    if (delta == 0) return pr__fail(c, n, PR_ERR_INVALID, "delta is zero");
    double cnt = ceil((limit - start) / delta); /* exact for 32-bit integers */
    len = !(cnt > 0) ? 0 : cnt > (1 << 28) ? INT64_MAX : (int64_t)cnt; /* NaN: 0 */
  }
  if (len > (1 << 28)) return pr__fail(c, n, PR_ERR_INVALID, "range too long");
  pr__value_set_shape(pr__out(c, n, 0), s->dtype, 1, &len);
  return PR_OK;
}

static void run_range(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *s = &x->v[n->in[0]], *d = &x->v[n->in[2]], *o = &x->v[n->out[0]];
  int64_t len = o->dims[0];
  for (int64_t i = 0; i < len; i++) switch (o->dtype) {
      case PR_DTYPE_INT64: /* start + i * delta stays in range; wrapping keeps it defined */
        ((int64_t *)o->ptr)[i] =
            pr__i64_add(*(const int64_t *)s->ptr, pr__i64_mul(i, *(const int64_t *)d->ptr));
        break;
      case PR_DTYPE_INT32:
        ((int32_t *)o->ptr)[i] = (int32_t)(*(const int32_t *)s->ptr + i * *(const int32_t *)d->ptr);
        break;
      case PR_DTYPE_INT16:
        ((int16_t *)o->ptr)[i] = (int16_t)(*(const int16_t *)s->ptr + i * *(const int16_t *)d->ptr);
        break;
      case PR_DTYPE_FLOAT:
        ((float *)o->ptr)[i] = *(const float *)s->ptr + (float)i * *(const float *)d->ptr;
        break;
      default:
        ((double *)o->ptr)[i] = *(const double *)s->ptr + (double)i * *(const double *)d->ptr;
        break;
    }
}

const pr_op_t pr__op_range = {.name = "Range",
                              .attrs = "",
                              .min_opset = 11,
                              .max_inputs = 3,
                              .infer = infer_range,
                              .run = run_range};

/* ---- ConstantOfShape(shape) ---- */

static pr_status_t infer_constant_of_shape(pr_compile_t *c, pr_node_t *n) {
  int64_t shape[PR_MAX_RANK];
  pr_value_t *sv = pr__in(c, n, 0);
  int ns = sv && pr__value_numel(sv) == 0 ? 0 : pr__const_ints(sv, shape, PR_MAX_RANK);
  if (ns < 0) return pr__need_values(c, n, "shape must be a constant 1-D int64 tensor");
  for (int k = 0; k < ns; k++)
    if (shape[k] < 0) return pr__fail(c, n, PR_ERR_INVALID, "negative dimension");
  const pr_attr_t *v = pr__attr_find(n->m, "value");
  pr_dtype_t dt = PR_DTYPE_FLOAT;
  if (v) {
    if (v->type != PR_ATTR_TENSOR || pr_tensor_numel(v->t) != 1 || !pr_dtype_size(v->t->dtype))
      return pr__fail(c, n, PR_ERR_INVALID, "value must be a one-element tensor");
    dt = v->t->dtype;
  }
  pr__value_set_shape(pr__out(c, n, 0), dt, ns, shape);
  return PR_OK;
}

static void run_constant_of_shape(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *o = &x->v[n->out[0]];
  const pr_attr_t *v = pr__attr_find(n->m, "value");
  size_t es = pr_dtype_size(o->dtype);
  int64_t len = pr__value_numel(o);
  if (!v) {
    memset(o->ptr, 0, o->nbytes);
    return;
  }
  for (int64_t i = 0; i < len; i++) memcpy((char *)o->ptr + i * (int64_t)es, v->t->data, es);
}

const pr_op_t pr__op_constant_of_shape = {.name = "ConstantOfShape",
                                          .attrs = "value",
                                          .min_opset = 9,
                                          .max_inputs = 1,
                                          .infer = infer_constant_of_shape,
                                          .run = run_constant_of_shape};
