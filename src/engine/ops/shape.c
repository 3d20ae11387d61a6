/* Operators that change or read only the shape: Reshape, Flatten, Squeeze,
 * Unsqueeze and Shape, and the pass-through Identity and Dropout. All but
 * Shape are views: the output is the input's bytes (memplan.c shares the
 * buffer; the copy runs only when it could not). */
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"

/* ---- Reshape ---- */

static pr_status_t infer_reshape(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *sh = pr__in(c, n, 1);
  if (!a || !sh) return pr__fail(c, n, PR_ERR_INVALID, "needs data and shape");
  int64_t want[PR_MAX_RANK + 1];
  int r = pr__const_ints(sh, want, PR_MAX_RANK + 1);
  if (r < 0) return pr__need_values(c, n, "shape must be a constant 1-D int64 tensor");
  if (r > PR_MAX_RANK) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "rank over %d", PR_MAX_RANK);
  bool allowzero = pr__attr_int(n->m, "allowzero", 0) != 0;
  int64_t total = pr__value_numel(a), known = 1;
  int infer_at = -1;
  for (int k = 0; k < r; k++) {
    if (want[k] == 0 && !allowzero) {
      if (k >= a->rank) return pr__fail(c, n, PR_ERR_INVALID, "0 at axis %d beyond input rank", k);
      want[k] = a->dims[k];
    }
    if (want[k] == -1) {
      if (infer_at >= 0) return pr__fail(c, n, PR_ERR_INVALID, "more than one -1");
      infer_at = k;
      continue;
    }
    if (want[k] < 0) return pr__fail(c, n, PR_ERR_INVALID, "negative dimension");
    if (__builtin_mul_overflow(known, want[k], &known))
      return pr__fail(c, n, PR_ERR_INVALID, "shape too large");
  }
  if (infer_at >= 0) {
    if (known == 0 || total % known) return pr__fail(c, n, PR_ERR_INVALID, "cannot infer -1");
    want[infer_at] = total / known;
  } else if (known != total) {
    return pr__fail(c, n, PR_ERR_INVALID, "element count %lld does not match %lld",
                    (long long)known, (long long)total);
  }
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, want);
  return PR_OK;
}

const pr_op_t pr__op_reshape = {.name = "Reshape",
                                .attrs = "allowzero",
                                .min_opset = 5,
                                .max_inputs = 2,
                                .infer = infer_reshape,
                                .run = pr__run_copy,
                                .view = true};

/* ---- Flatten ---- */

static pr_status_t infer_flatten(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int axis = (int)pr__attr_int(n->m, "axis", 1);
  if (axis < 0) axis += a->rank;
  if (axis < 0 || axis > a->rank) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  int64_t d[2] = {1, 1};
  for (int k = 0; k < a->rank; k++) d[k >= axis] *= a->dims[k];
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, 2, d);
  return PR_OK;
}

const pr_op_t pr__op_flatten = {.name = "Flatten",
                                .attrs = "axis",
                                .min_opset = 1,
                                .max_inputs = 1,
                                .infer = infer_flatten,
                                .run = pr__run_copy,
                                .view = true};

/* ---- Squeeze / Unsqueeze: axes from attribute (opset < 13) or input 1 ---- */

static int get_axes(pr_compile_t *c, pr_node_t *n, int64_t *axes, bool *given) {
  *given = true;
  if (c->opset < 13) {
    const int64_t *a;
    int cnt = pr__attr_ints(n->m, "axes", &a);
    if (!pr__attr_find(n->m, "axes")) *given = false;
    for (int i = 0; i < cnt && i < PR_MAX_RANK; i++) axes[i] = a[i];
    return cnt > PR_MAX_RANK ? -1 : cnt;
  }
  pr_value_t *v = pr__in(c, n, 1);
  if (!v) {
    *given = false;
    return 0;
  }
  return pr__const_ints(v, axes, PR_MAX_RANK);
}

static pr_status_t infer_squeeze(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int64_t axes[PR_MAX_RANK];
  bool given;
  int na = get_axes(c, n, axes, &given);
  if (na < 0) return pr__need_values(c, n, "axes must be constant");
  bool drop[PR_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    int ax = pr__axis(axes[i], a->rank);
    if (ax < 0 || a->dims[ax] != 1)
      return pr__fail(c, n, PR_ERR_INVALID, "axis %lld is not a dimension of size 1",
                      (long long)axes[i]);
    drop[ax] = true;
  }
  if (!given)
    for (int k = 0; k < a->rank; k++) drop[k] = a->dims[k] == 1;
  int64_t d[PR_MAX_RANK];
  int r = 0;
  for (int k = 0; k < a->rank; k++)
    if (!drop[k]) d[r++] = a->dims[k];
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static pr_status_t infer_unsqueeze(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int64_t axes[PR_MAX_RANK];
  bool given;
  int na = get_axes(c, n, axes, &given);
  if (na < 0 || !given) return pr__need_values(c, n, "axes must be given and constant");
  int r = a->rank + na;
  if (r > PR_MAX_RANK) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "rank over %d", PR_MAX_RANK);
  bool ins[PR_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    int ax = pr__axis(axes[i], r);
    if (ax < 0 || ins[ax]) return pr__fail(c, n, PR_ERR_INVALID, "bad or repeated axis");
    ins[ax] = true;
  }
  int64_t d[PR_MAX_RANK];
  for (int k = 0, j = 0; k < r; k++) d[k] = ins[k] ? 1 : a->dims[j++];
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

const pr_op_t pr__op_squeeze = {.name = "Squeeze",
                                .attrs = "axes",
                                .min_opset = 1,
                                .max_inputs = 2,
                                .infer = infer_squeeze,
                                .run = pr__run_copy,
                                .view = true};
const pr_op_t pr__op_unsqueeze = {.name = "Unsqueeze",
                                  .attrs = "axes",
                                  .min_opset = 1,
                                  .max_inputs = 2,
                                  .infer = infer_unsqueeze,
                                  .run = pr__run_copy,
                                  .view = true};

/* ---- Shape: folded at compile time (shapes are concrete in a session) ---- */

static pr_status_t infer_shape(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *o = pr__out(c, n, 0);
  int64_t start = pr__attr_int(n->m, "start", 0), end = pr__attr_int(n->m, "end", a->rank);
  if (start < 0) start += a->rank;
  if (end < 0) end += a->rank;
  if (start < 0) start = 0;
  if (end > a->rank) end = a->rank;
  int64_t len = end > start ? end - start : 0;
  pr__value_set_shape(o, PR_DTYPE_INT64, 1, &len);
  /* the result is known now, whatever the input's data */
  o->data = pr__aligned_alloc((size_t)(len ? len : 1) * 8);
  if (!o->data) return PR_ERR_NOMEM;
  for (int64_t k = 0; k < len; k++) ((int64_t *)o->data)[k] = a->dims[start + k];
  o->owns_data = true;
  o->is_const = true;
  o->kind = o->is_graph_output ? PR_VAL_OUTPUT : PR_VAL_CONST;
  o->nbytes = (size_t)len * 8;
  n->dead = true;
  return PR_OK;
}

static void run_nothing(pr_exec_t *x, pr_node_t *n) {}

const pr_op_t pr__op_shape = {.name = "Shape",
                              .attrs = "start,end",
                              .min_opset = 1,
                              .max_inputs = 1,
                              .infer = infer_shape,
                              .run = run_nothing};

/* ---- Identity and Dropout (inference): the input unchanged ---- */

const pr_op_t pr__op_identity = {.name = "Identity",
                                 .attrs = "",
                                 .min_opset = 1,
                                 .max_inputs = 1,
                                 .infer = pr__shape_same,
                                 .run = pr__run_copy,
                                 .view = true};

static pr_status_t infer_dropout(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *tm = pr__in(c, n, 2), *ratio = pr__in(c, n, 1);
  if (tm) {
    if (!tm->is_const || tm->dtype != PR_DTYPE_BOOL)
      return pr__fail(c, n, PR_ERR_UNSUPPORTED, "training_mode must be a constant bool");
    bool training = *(const uint8_t *)tm->data;
    float r = 0.5f;
    if (ratio) {
      if (!ratio->is_const || ratio->dtype != PR_DTYPE_FLOAT)
        return pr__fail(c, n, PR_ERR_UNSUPPORTED, "ratio must be a constant float");
      r = *(const float *)ratio->data;
    }
    if (training && r != 0.f)
      return pr__fail(c, n, PR_ERR_UNSUPPORTED, "training mode (random dropout) is not inference");
  }
  pr_status_t st = pr__shape_same(c, n);
  pr_value_t *mask = pr__out(c, n, 1);
  if (!st && mask)
    pr__value_set_shape(mask, PR_DTYPE_BOOL, pr__in(c, n, 0)->rank, pr__in(c, n, 0)->dims);
  return st;
}

static void run_dropout(pr_exec_t *x, pr_node_t *n) {
  pr__run_copy(x, n);
  if (n->n_out > 1 && n->out[1] >= 0) {
    const pr_value_t *m = &x->v[n->out[1]];
    memset(m->ptr, 1, m->nbytes);
  }
}

const pr_op_t pr__op_dropout = {.name = "Dropout",
                                .attrs = "seed,ratio,is_test",
                                .min_opset = 7,
                                .max_inputs = 3,
                                .infer = infer_dropout,
                                .run = run_dropout,
                                .view = true};
