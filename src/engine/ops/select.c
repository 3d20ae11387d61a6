/* Operators that pick elements by comparing them along one axis: ArgMax,
 * ArgMin, Hardmax and TopK, for every numeric type (typed.h).
 *
 * Notes on the design:
 * - Every kernel sees its input as (outer, len, inner) around the axis;
 *   Hardmax before opset 13 coerces the input to 2-D at the axis, which is
 *   the same view with inner = 1 and len the product of the trailing dims.
 * - Ties: ArgMax/ArgMin/Hardmax take the first extreme (the last with
 *   select_last_index); TopK puts the lower index first among equal values,
 *   as ONNX specifies and ONNX Runtime does.
 * - TopK selects with a heap of k entries that lives in the indices output
 *   itself (row of stride inner), so it needs no scratch memory; it always
 *   returns the k elements sorted, which sorted = 0 permits.
 * - NaN compares false with everything: the kernels stay memory-safe on it,
 *   the position they report is not specified. */
#include <string.h>

#include "engine/ops/ops.h"
#include "engine/ops/typed.h"

typedef struct {
  int64_t outer, len, inner;
} axis_view_t;

static axis_view_t axis_view(const pr_value_t *v, int axis) {
  axis_view_t g = {1, v->dims[axis], 1};
  for (int k = 0; k < axis; k++) g.outer *= v->dims[k];
  for (int k = axis + 1; k < v->rank; k++) g.inner *= v->dims[k];
  return g;
}

static bool numeric(pr_dtype_t t) {
  return t != PR_DTYPE_BOOL && pr__typed_supported(t);
}

/* ---- ArgMax / ArgMin ---- */

static pr_status_t arg_axis(pr_compile_t *c, pr_node_t *n, int *axis) {
  pr_value_t *a = pr__in(c, n, 0);
  if (!numeric(a->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  if (a->rank == 0) return pr__fail(c, n, PR_ERR_INVALID, "input is a scalar");
  *axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  if (*axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  if (a->dims[*axis] == 0) return pr__fail(c, n, PR_ERR_INVALID, "empty axis");
  return PR_OK;
}

static pr_status_t infer_arg(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int axis = 0;
  pr_status_t st = arg_axis(c, n, &axis);
  if (st) return st;
  bool keep = pr__attr_int(n->m, "keepdims", 1) != 0;
  int64_t d[PR_MAX_RANK];
  int r = 0;
  for (int k = 0; k < a->rank; k++)
    if (k != axis)
      d[r++] = a->dims[k];
    else if (keep)
      d[r++] = 1;
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_INT64, r, d);
  return PR_OK;
}

/* Index along the axis of the extreme element of each (outer, inner) line:
 * BETTER(v, best) says v replaces best; it is strict for the first extreme,
 * non-strict for the last. */
#define ARG_T(D, sfx, T, K)                                                                   \
  static void arg_##sfx(const T *x, int64_t *o, axis_view_t g, bool max, bool last, int th) { \
    _Pragma("omp parallel for num_threads(th) if (g.outer * g.len * g.inner > 65536)") for (  \
        int64_t r = 0; r < g.outer; r++) for (int64_t i = 0; i < g.inner; i++) {              \
      const T *p = x + r * g.len * g.inner + i;                                               \
      K best = pr__key_##sfx(p[0]);                                                           \
      int64_t at = 0;                                                                         \
      for (int64_t j = 1; j < g.len; j++) {                                                   \
        K v = pr__key_##sfx(p[j * g.inner]);                                                  \
        bool better = max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);    \
        if (better) best = v, at = j;                                                         \
      }                                                                                       \
      o[r * g.inner + i] = at;                                                                \
    }                                                                                         \
  }
PR_TYPES_NUMERIC(ARG_T)
#undef ARG_T

static void run_arg(pr_exec_t *x, pr_node_t *n, bool max) {
  const pr_value_t *a = &x->v[n->in[0]];
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  bool last = pr__attr_int(n->m, "select_last_index", 0) != 0;
  axis_view_t g = axis_view(a, axis);
  int64_t *o = pr__xout(x, n, 0);
  switch (a->dtype) {
#define CASE(D, sfx, T, K) \
  case PR_DTYPE_##D: arg_##sfx(a->ptr, o, g, max, last, x->threads); break;
    PR_TYPES_NUMERIC(CASE)
#undef CASE
    default: break;
  }
}

static void run_argmax(pr_exec_t *x, pr_node_t *n) {
  run_arg(x, n, true);
}
static void run_argmin(pr_exec_t *x, pr_node_t *n) {
  run_arg(x, n, false);
}

const pr_op_t pr__op_argmax = {.name = "ArgMax",
                               .attrs = "axis,keepdims,select_last_index",
                               .min_opset = 1,
                               .max_inputs = 1,
                               .infer = infer_arg,
                               .run = run_argmax};
const pr_op_t pr__op_argmin = {.name = "ArgMin",
                               .attrs = "axis,keepdims,select_last_index",
                               .min_opset = 1,
                               .max_inputs = 1,
                               .infer = infer_arg,
                               .run = run_argmin};

/* ---- Hardmax ---- */

static pr_status_t hardmax_view(pr_compile_t *c, pr_node_t *n, const pr_value_t *a,
                                axis_view_t *g) {
  int opset = c->opset;
  int64_t axis = pr__attr_int(n->m, "axis", opset >= 13 ? -1 : 1);
  if (opset >= 13) {
    int ax = a->rank ? pr__axis(axis, a->rank) : -1;
    if (ax < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
    *g = axis_view(a, ax);
    return PR_OK;
  }
  /* coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])]; axis may be rank */
  if (axis < 0) axis += a->rank;
  if (axis < 0 || axis > a->rank) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  g->outer = g->len = 1;
  g->inner = 1;
  for (int k = 0; k < a->rank; k++) *(k < axis ? &g->outer : &g->len) *= a->dims[k];
  return PR_OK;
}

static pr_status_t infer_hardmax(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (!numeric(a->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  axis_view_t g;
  pr_status_t st = hardmax_view(c, n, a, &g);
  if (st) return st;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

typedef struct {
  axis_view_t g;
} hardmax_state_t;

static pr_status_t prepare_hardmax(pr_compile_t *c, pr_node_t *n) {
  hardmax_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  return hardmax_view(c, n, pr__in(c, n, 0), &s->g);
}

#define HARDMAX_T(D, sfx, T, K)                                                              \
  static void hardmax_##sfx(const T *x, T *o, axis_view_t g, int th) {                       \
    const T one = pr__unkey_##sfx((K)1), zero = pr__unkey_##sfx((K)0);                       \
    _Pragma("omp parallel for num_threads(th) if (g.outer * g.len * g.inner > 65536)") for ( \
        int64_t r = 0; r < g.outer; r++) for (int64_t i = 0; i < g.inner; i++) {             \
      int64_t base = r * g.len * g.inner + i;                                                \
      if (g.len == 0) continue;                                                              \
      K best = pr__key_##sfx(x[base]);                                                       \
      int64_t at = 0;                                                                        \
      for (int64_t j = 1; j < g.len; j++) {                                                  \
        K v = pr__key_##sfx(x[base + j * g.inner]);                                          \
        if (v > best) best = v, at = j;                                                      \
      }                                                                                      \
      for (int64_t j = 0; j < g.len; j++) o[base + j * g.inner] = j == at ? one : zero;      \
    }                                                                                        \
  }
PR_TYPES_NUMERIC(HARDMAX_T)
#undef HARDMAX_T

static void run_hardmax(pr_exec_t *x, pr_node_t *n) {
  const hardmax_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]];
  void *o = pr__xout(x, n, 0);
  switch (a->dtype) {
#define CASE(D, sfx, T, K) \
  case PR_DTYPE_##D: hardmax_##sfx(a->ptr, o, s->g, x->threads); break;
    PR_TYPES_NUMERIC(CASE)
#undef CASE
    default: break;
  }
}

const pr_op_t pr__op_hardmax = {.name = "Hardmax",
                                .attrs = "axis",
                                .min_opset = 1,
                                .max_inputs = 1,
                                .infer = infer_hardmax,
                                .prepare = prepare_hardmax,
                                .run = run_hardmax,
                                .destroy = free};

/* ---- TopK ---- */

typedef struct {
  axis_view_t g;
  int64_t k;
  bool largest;
} topk_state_t;

static pr_status_t topk_params(pr_compile_t *c, pr_node_t *n, topk_state_t *s) {
  pr_value_t *a = pr__in(c, n, 0);
  if (!numeric(a->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  if (a->rank == 0) return pr__fail(c, n, PR_ERR_INVALID, "input is a scalar");
  int axis = pr__axis(pr__attr_int(n->m, "axis", -1), a->rank);
  if (axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  if (c->opset < 10) {
    if (!pr__attr_find(n->m, "k")) return pr__fail(c, n, PR_ERR_INVALID, "attribute k missing");
    s->k = pr__attr_int(n->m, "k", 0);
  } else {
    pr_value_t *kv = pr__in(c, n, 1);
    if (!kv) return pr__fail(c, n, PR_ERR_INVALID, "input K missing");
    if (kv->dtype != PR_DTYPE_INT64 || pr__value_numel(kv) != 1)
      return pr__fail(c, n, PR_ERR_INVALID, "K must be one int64");
    if (!kv->is_const)
      return pr__need_values(c, n, "K decides the output shape: it must be constant");
    s->k = *(const int64_t *)kv->data;
  }
  s->g = axis_view(a, axis);
  if (s->k < 0 || s->k > s->g.len)
    return pr__fail(c, n, PR_ERR_INVALID, "k = %lld for an axis of %lld", (long long)s->k,
                    (long long)s->g.len);
  s->largest = c->opset < 11 || pr__attr_int(n->m, "largest", 1) != 0;
  if (!pr__out(c, n, 1)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "the Indices output is omitted");
  return PR_OK;
}

static pr_status_t infer_topk(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  topk_state_t s = {0};
  pr_status_t st = topk_params(c, n, &s);
  if (st) return st;
  int64_t d[PR_MAX_RANK];
  memcpy(d, a->dims, sizeof d);
  d[pr__axis(pr__attr_int(n->m, "axis", -1), a->rank)] = s.k;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  pr__value_set_shape(pr__out(c, n, 1), PR_DTYPE_INT64, a->rank, d);
  return PR_OK;
}

static pr_status_t prepare_topk(pr_compile_t *c, pr_node_t *n) {
  topk_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  return topk_params(c, n, s);
}

/* A heap of k indices h[0], h[st], ... (st = inner) of row p whose root is
 * the worst kept element: WORSE(i, j) says element i ranks after element j
 * (smaller for largest, larger otherwise, the higher index among equals).
 * Every other element enters when it ranks before the root; popping the
 * root k times then leaves the row sorted best first. */
#define TOPK_T(D, sfx, T, K)                                                                 \
  static bool topk_worse_##sfx(const T *p, int64_t st, int64_t i, int64_t j, bool largest) { \
    K a = pr__key_##sfx(p[i * st]), b = pr__key_##sfx(p[j * st]);                            \
    if (a != b) return largest ? a < b : a > b;                                              \
    return i > j;                                                                            \
  }                                                                                          \
  static void topk_sift_##sfx(const T *p, int64_t st, int64_t *h, int64_t m, int64_t at,     \
                              bool largest) {                                                \
    for (;;) {                                                                               \
      int64_t l = 2 * at + 1, r = l + 1, w = at;                                             \
      if (l < m && topk_worse_##sfx(p, st, h[l * st], h[w * st], largest)) w = l;            \
      if (r < m && topk_worse_##sfx(p, st, h[r * st], h[w * st], largest)) w = r;            \
      if (w == at) return;                                                                   \
      int64_t t = h[at * st];                                                                \
      h[at * st] = h[w * st], h[w * st] = t, at = w;                                         \
    }                                                                                        \
  }                                                                                          \
  static void topk_##sfx(const T *x, T *vo, int64_t *io, const topk_state_t *s, int th) {    \
    axis_view_t g = s->g;                                                                    \
    int64_t k = s->k;                                                                        \
    bool largest = s->largest;                                                               \
    _Pragma("omp parallel for num_threads(th) if (g.outer * g.len * g.inner > 65536)") for ( \
        int64_t r = 0; r < g.outer; r++) for (int64_t i = 0; i < g.inner; i++) {             \
      const T *p = x + r * g.len * g.inner + i;                                              \
      int64_t *h = io + r * k * g.inner + i, st = g.inner;                                   \
      T *v = vo + r * k * g.inner + i;                                                       \
      if (k == 0) continue;                                                                  \
      for (int64_t j = 0; j < k; j++) h[j * st] = j;                                         \
      for (int64_t j = k / 2; j-- > 0;) topk_sift_##sfx(p, st, h, k, j, largest);            \
      for (int64_t j = k; j < g.len; j++)                                                    \
        if (topk_worse_##sfx(p, st, h[0], j, largest)) {                                     \
          h[0] = j;                                                                          \
          topk_sift_##sfx(p, st, h, k, 0, largest);                                          \
        }                                                                                    \
      for (int64_t m = k; m > 1; m--) { /* the worst goes to the end */                      \
        int64_t t = h[0];                                                                    \
        h[0] = h[(m - 1) * st], h[(m - 1) * st] = t;                                         \
        topk_sift_##sfx(p, st, h, m - 1, 0, largest);                                        \
      }                                                                                      \
      for (int64_t j = 0; j < k; j++) v[j * st] = p[h[j * st] * st];                         \
    }                                                                                        \
  }
PR_TYPES_NUMERIC(TOPK_T)
#undef TOPK_T

static void run_topk(pr_exec_t *x, pr_node_t *n) {
  const topk_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]];
  void *vo = pr__xout(x, n, 0);
  int64_t *io = pr__xout(x, n, 1);
  switch (a->dtype) {
#define CASE(D, sfx, T, K) \
  case PR_DTYPE_##D: topk_##sfx(a->ptr, vo, io, s, x->threads); break;
    PR_TYPES_NUMERIC(CASE)
#undef CASE
    default: break;
  }
}

const pr_op_t pr__op_topk = {.name = "TopK",
                             .attrs = "axis,k,largest,sorted",
                             .min_opset = 1,
                             .max_inputs = 2,
                             .infer = infer_topk,
                             .prepare = prepare_topk,
                             .run = run_topk,
                             .destroy = free};
