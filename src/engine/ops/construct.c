/* Operators that build a tensor of mostly one value: OneHot and EyeLike.
 *
 * Notes on the design:
 * - OneHot's depth decides the output shape: it must be constant when the
 *   session is compiled ("constant" in the message otherwise, so a caller
 *   can fix it). Indices may be of any numeric type (floats truncate toward
 *   zero, as ONNX Runtime casts them); one outside [-depth, depth) gives a
 *   row of off values, as ONNX specifies. The values are moved as bytes, so
 *   any element type works.
 * - EyeLike writes its ones in the output type (typed.h's conversions). */
#include <math.h>
#include <string.h>

#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"
#include "engine/ops/typed.h"

/* ---- OneHot ---- */

typedef struct {
  int64_t depth, outer, inner;
} onehot_state_t;

static bool is_float(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE || t == PR_DTYPE_FLOAT16;
}

/* Element i of a numeric tensor as an integer: floats truncated. */
static int64_t load_integer(const void *p, pr_dtype_t t, int64_t i) {
  return is_float(t) ? pr__sat_i64(trunc(pr__load_double(p, t, i))) : pr__load_int64(p, t, i);
}

static pr_status_t onehot_params(pr_compile_t *c, pr_node_t *n, onehot_state_t *s, int *axis) {
  pr_value_t *iv = pr__in(c, n, 0), *dv = pr__in(c, n, 1), *vv = pr__in(c, n, 2);
  if (!dv || !vv) return pr__fail(c, n, PR_ERR_INVALID, "needs indices, depth and values");
  if (!pr__typed_supported(iv->dtype) || iv->dtype == PR_DTYPE_BOOL ||
      !pr__typed_supported(dv->dtype) || dv->dtype == PR_DTYPE_BOOL)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "indices and depth must be numeric");
  if (pr__value_numel(dv) != 1 || dv->rank > 1)
    return pr__fail(c, n, PR_ERR_INVALID, "depth must be a scalar or one element");
  if (vv->rank != 1 || vv->dims[0] != 2)
    return pr__fail(c, n, PR_ERR_INVALID, "values must be [off_value, on_value]");
  if (!dv->is_const)
    return pr__need_values(c, n, "depth decides the output shape: it must be constant");
  s->depth = load_integer(dv->data, dv->dtype, 0);
  if (s->depth < 0) return pr__fail(c, n, PR_ERR_INVALID, "negative depth");
  int r = iv->rank + 1;
  if (r > PR_MAX_RANK) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "rank over %d", PR_MAX_RANK);
  *axis = pr__axis(pr__attr_int(n->m, "axis", -1), r);
  if (*axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  s->outer = s->inner = 1;
  for (int k = 0; k < iv->rank; k++) *(k < *axis ? &s->outer : &s->inner) *= iv->dims[k];
  return PR_OK;
}

static pr_status_t infer_onehot(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *iv = pr__in(c, n, 0);
  onehot_state_t s = {0};
  int axis = 0;
  pr_status_t st = onehot_params(c, n, &s, &axis);
  if (st) return st;
  int64_t d[PR_MAX_RANK];
  for (int k = 0, j = 0; k <= iv->rank; k++) d[k] = k == axis ? s.depth : iv->dims[j++];
  pr__value_set_shape(pr__out(c, n, 0), pr__in(c, n, 2)->dtype, iv->rank + 1, d);
  return PR_OK;
}

static pr_status_t prepare_onehot(pr_compile_t *c, pr_node_t *n) {
  onehot_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  int axis;
  return onehot_params(c, n, s, &axis);
}

static void run_onehot(pr_exec_t *x, pr_node_t *n) {
  const onehot_state_t *s = n->state;
  const pr_value_t *iv = &x->v[n->in[0]], *vv = &x->v[n->in[2]];
  int64_t es = (int64_t)pr_dtype_size(vv->dtype), depth = s->depth, inner = s->inner;
  const char *off = vv->ptr, *on = off + es;
  char *out = pr__xout(x, n, 0);
#pragma omp parallel for num_threads(x->threads) if (s->outer * depth * inner > 65536)
  for (int64_t o = 0; o < s->outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t j = load_integer(iv->ptr, iv->dtype, o * inner + i);
      if (j < 0 && j >= -depth) j += depth;
      for (int64_t d = 0; d < depth; d++)
        memcpy(out + ((o * depth + d) * inner + i) * es, d == j ? on : off, (size_t)es);
    }
}

const pr_op_t pr__op_one_hot = {.name = "OneHot",
                                .attrs = "axis",
                                .min_opset = 9,
                                .max_inputs = 3,
                                .infer = infer_onehot,
                                .prepare = prepare_onehot,
                                .run = run_onehot,
                                .destroy = free};

/* ---- EyeLike ---- */

static pr_status_t infer_eyelike(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  pr_dtype_t t = (pr_dtype_t)pr__attr_int(n->m, "dtype", a->dtype);
  if (a->rank != 2) return pr__fail(c, n, PR_ERR_INVALID, "input must be 2-D");
  if (!pr__typed_supported(t))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(t));
  pr__value_set_shape(pr__out(c, n, 0), t, 2, a->dims);
  return PR_OK;
}

static void run_eyelike(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *o = &x->v[n->out[0]];
  int64_t k = pr__attr_int(n->m, "k", 0), rows = o->dims[0], cols = o->dims[1];
  memset(o->ptr, 0, o->nbytes);
  /* the diagonal (i, i + k) inside the matrix: i in [max(0, -k), min(rows, cols - k)) */
  if (k >= cols || k <= -rows) return;
  int64_t from = k < 0 ? -k : 0, to = cols - k < rows ? cols - k : rows;
  for (int64_t i = from; i < to; i++) {
    int64_t at = i * cols + i + k;
    switch (o->dtype) {
#define CASE(D, sfx, T, K) \
  case PR_DTYPE_##D: ((T *)o->ptr)[at] = pr__unkey_##sfx((K)1); break;
      PR_TYPES_ALL(CASE)
#undef CASE
      default: break;
    }
  }
}

const pr_op_t pr__op_eye_like = {.name = "EyeLike",
                                 .attrs = "dtype,k",
                                 .min_opset = 9,
                                 .max_inputs = 1,
                                 .infer = infer_eyelike,
                                 .run = run_eyelike};
