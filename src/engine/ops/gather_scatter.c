/* Element-indexed reads and writes: GatherElements, GatherND, Scatter,
 * ScatterElements and ScatterND, on every element type (by element size;
 * the reductions of the Scatters by type, typed.h).
 *
 * Notes on the design:
 * - Indices are int32 or int64; a negative index counts from the end of its
 *   axis. An index still out of range is invalid ONNX, which ONNX Runtime
 *   refuses at run time. Here constant indices are checked when the session
 *   is compiled, indices that arrive with a run before the kernel reads or
 *   writes anything (pr__run_indices_ok): either way the error names the
 *   node and the index, PR_ERR_INVALID (a request error, 400, in the
 *   server). The loops still skip an index out of range (never a read or
 *   write outside a buffer), which only a broken check could let through.
 * - The Scatters copy data to the output, then apply the updates in index
 *   order, one after the other: with duplicate indices the last update wins
 *   (reduction none) or every one is combined (add, mul, max, min), as in
 *   ONNX's reference. They run on one thread for that reason.
 * - Offsets are products of dimensions of tensors that exist (their byte
 *   counts were checked against size_t when their shapes were inferred), so
 *   they fit an int64_t. */
#include <string.h>

#include "engine/ops/ops.h"
#include "engine/ops/typed.h"

static bool index_type(pr_dtype_t t) {
  return t == PR_DTYPE_INT64 || t == PR_DTYPE_INT32;
}

static inline int64_t load_index(const void *p, pr_dtype_t t, int64_t i) {
  return t == PR_DTYPE_INT64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* The index as a position in [0, len), or -1 when out of range. */
static inline int64_t fix_index(int64_t j, int64_t len) {
  if (j < 0) j += len;
  return j >= 0 && j < len ? j : -1;
}

static inline void copy_elem(char *dst, const char *src, size_t es) {
  switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
  }
}

static void strides_of(const pr_value_t *v, int64_t *st) {
  int64_t e = 1;
  for (int k = v->rank - 1; k >= 0; k--) st[k] = e, e *= v->dims[k];
}

/* A constant index tensor with an index out of [-len, len): the failure to
 * report, naming the node (len is that of the last axis of the index tuple
 * for the ND forms: lens[i % n_lens]). */
static pr_status_t check_const_indices(pr_compile_t *c, pr_node_t *n, const pr_value_t *iv,
                                       const int64_t *lens, int n_lens) {
  if (!iv->is_const || !iv->data) return PR_OK;
  int64_t cnt = pr__value_numel(iv);
  for (int64_t i = 0; i < cnt; i++) {
    int64_t j = load_index(iv->data, iv->dtype, i), len = lens[i % n_lens];
    if (fix_index(j, len) < 0)
      return pr__fail(c, n, PR_ERR_INVALID, "index %lld out of range [%lld, %lld]", (long long)j,
                      (long long)-len, (long long)(len - 1));
  }
  return PR_OK;
}

/* ---- GatherElements / ScatterElements / Scatter: the shared geometry ---- */

/* data (rank r) and indices of the same rank; for the Scatters, updates of
 * the indices' shape. Every non-axis dimension of indices is at most data's. */
static pr_status_t elements_check(pr_compile_t *c, pr_node_t *n, bool scatter, int *axis) {
  pr_value_t *a = pr__in(c, n, 0), *iv = pr__in(c, n, 1), *u = scatter ? pr__in(c, n, 2) : NULL;
  if (!iv || (scatter && !u)) return pr__fail(c, n, PR_ERR_INVALID, "an input is missing");
  if (!index_type(iv->dtype)) return pr__fail(c, n, PR_ERR_INVALID, "indices must be int32/int64");
  if (a->rank < 1 || iv->rank != a->rank)
    return pr__fail(c, n, PR_ERR_INVALID, "indices must have data's rank (%d, not %d)", a->rank,
                    iv->rank);
  *axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  if (*axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  for (int k = 0; k < a->rank; k++)
    if (k != *axis && iv->dims[k] > a->dims[k])
      return pr__fail(c, n, PR_ERR_INVALID, "indices dimension %d (%lld) exceeds data's (%lld)", k,
                      (long long)iv->dims[k], (long long)a->dims[k]);
  if (scatter) {
    if (u->dtype != a->dtype) return pr__fail(c, n, PR_ERR_INVALID, "updates type differs");
    if (u->rank != iv->rank || memcmp(u->dims, iv->dims, sizeof(int64_t) * (size_t)iv->rank))
      return pr__fail(c, n, PR_ERR_INVALID, "updates must have the shape of indices");
  }
  return check_const_indices(c, n, iv, &a->dims[*axis], 1);
}

/* Data offset of every indices element: calls VISIT(i, off) with off = -1
 * for an out-of-range index; i runs over indices row-major. */
#define FOR_EACH_ELEMENT(a, iv, axis, VISIT)                                 \
  do {                                                                       \
    int64_t dst_[PR_MAX_RANK], coord_[PR_MAX_RANK] = {0};                    \
    strides_of((a), dst_);                                                   \
    int r_ = (a)->rank;                                                      \
    int64_t cnt_ = pr__value_numel(iv), base_ = 0, len_ = (a)->dims[axis];   \
    for (int64_t i = 0; i < cnt_; i++) {                                     \
      int64_t j_ = fix_index(load_index((iv)->ptr, (iv)->dtype, i), len_);   \
      int64_t off = j_ < 0 ? -1 : base_ + j_ * dst_[axis];                   \
      VISIT;                                                                 \
      /* next coordinate of indices; base_ = its data offset off the axis */ \
      for (int k_ = r_ - 1; k_ >= 0; k_--) {                                 \
        if (k_ != (axis)) base_ += dst_[k_];                                 \
        if (++coord_[k_] < (iv)->dims[k_]) break;                            \
        if (k_ != (axis)) base_ -= coord_[k_] * dst_[k_];                    \
        coord_[k_] = 0;                                                      \
      }                                                                      \
    }                                                                        \
  } while (0)

/* ---- GatherElements ---- */

static pr_status_t infer_gather_elements(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *iv = pr__in(c, n, 1);
  int axis = 0;
  pr_status_t st = elements_check(c, n, false, &axis);
  if (st) return st;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, iv->rank, iv->dims);
  return PR_OK;
}

static void run_gather_elements(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *iv = &x->v[n->in[1]];
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  if (!pr__run_indices_ok(x, n, iv->ptr, iv->dtype, pr__value_numel(iv), &a->dims[axis], 1)) return;
  size_t es = pr_dtype_size(a->dtype);
  const char *in = a->ptr;
  char *o = pr__xout(x, n, 0);
  FOR_EACH_ELEMENT(a, iv, axis, {
    if (off < 0)
      memset(o + i * (int64_t)es, 0, es);
    else
      copy_elem(o + i * (int64_t)es, in + off * (int64_t)es, es);
  });
}

const pr_op_t pr__op_gather_elements = {.name = "GatherElements",
                                        .attrs = "axis",
                                        .min_opset = 11,
                                        .max_inputs = 2,
                                        .infer = infer_gather_elements,
                                        .run = run_gather_elements};

/* ---- Scatter reductions ---- */

typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction_t;

static pr_status_t get_reduction(pr_compile_t *c, pr_node_t *n, reduction_t *red) {
  const char *r = pr__attr_string(n->m, "reduction", "none");
  pr_value_t *a = pr__in(c, n, 0);
  if (!strcmp(r, "none"))
    *red = RED_NONE;
  else if (!strcmp(r, "add") && c->opset >= 16)
    *red = RED_ADD;
  else if (!strcmp(r, "mul") && c->opset >= 16)
    *red = RED_MUL;
  else if (!strcmp(r, "max") && c->opset >= 18)
    *red = RED_MAX;
  else if (!strcmp(r, "min") && c->opset >= 18)
    *red = RED_MIN;
  else
    return pr__fail(c, n, PR_ERR_INVALID, "reduction '%s' at opset %d", r, c->opset);
  if (*red != RED_NONE && !pr__typed_supported(a->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "reduction on %s", pr_dtype_name(a->dtype));
  return PR_OK;
}

/* The reduction attribute at run time (get_reduction checked it). */
static reduction_t reduction_of(const pr_node_t *n) {
  const char *r = pr__attr_string(n->m, "reduction", "none");
  return !strcmp(r, "add")   ? RED_ADD
         : !strcmp(r, "mul") ? RED_MUL
         : !strcmp(r, "max") ? RED_MAX
         : !strcmp(r, "min") ? RED_MIN
                             : RED_NONE;
}

/* dst[0..cnt) = dst op src, element by element, in type t. */
#define REDUCE_T(D, sfx, T, K)                                                   \
  static void reduce_##sfx(T *dst, const T *src, int64_t cnt, reduction_t red) { \
    for (int64_t i = 0; i < cnt; i++) {                                          \
      K a = pr__key_##sfx(dst[i]), b = pr__key_##sfx(src[i]), r;                 \
      switch (red) {                                                             \
        case RED_ADD: r = pr__tadd_##sfx(a, b); break;                           \
        case RED_MUL: r = pr__tmul_##sfx(a, b); break;                           \
        case RED_MAX: r = b > a ? b : a; break;                                  \
        case RED_MIN: r = b < a ? b : a; break;                                  \
        default: r = b; break;                                                   \
      }                                                                          \
      dst[i] = pr__unkey_##sfx(r);                                               \
    }                                                                            \
  }
PR_TYPES_ALL(REDUCE_T)
#undef REDUCE_T

static void reduce_into(void *dst, const void *src, int64_t cnt, pr_dtype_t t, reduction_t red) {
  if (red == RED_NONE) {
    memcpy(dst, src, (size_t)cnt * pr_dtype_size(t));
    return;
  }
  switch (t) {
#define CASE(D, sfx, T, K) \
  case PR_DTYPE_##D: reduce_##sfx(dst, src, cnt, red); break;
    PR_TYPES_ALL(CASE)
#undef CASE
    default: break;
  }
}

/* ---- ScatterElements / Scatter ---- */

static pr_status_t infer_scatter_elements(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int axis = 0;
  reduction_t red;
  pr_status_t st;
  if ((st = elements_check(c, n, true, &axis)) || (st = get_reduction(c, n, &red))) return st;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static void run_scatter_elements(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *iv = &x->v[n->in[1]], *u = &x->v[n->in[2]];
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  if (!pr__run_indices_ok(x, n, iv->ptr, iv->dtype, pr__value_numel(iv), &a->dims[axis], 1)) return;
  reduction_t red = reduction_of(n);
  size_t es = pr_dtype_size(a->dtype);
  char *o = pr__xout(x, n, 0);
  const char *up = u->ptr;
  pr__copy(o, a->ptr, a->nbytes, x->threads);
  FOR_EACH_ELEMENT(a, iv, axis, {
    if (off >= 0) reduce_into(o + off * (int64_t)es, up + i * (int64_t)es, 1, a->dtype, red);
  });
}

const pr_op_t pr__op_scatter_elements = {.name = "ScatterElements",
                                         .attrs = "axis,reduction",
                                         .min_opset = 11,
                                         .max_inputs = 3,
                                         .infer = infer_scatter_elements,
                                         .run = run_scatter_elements};
const pr_op_t pr__op_scatter = {.name = "Scatter",
                                .attrs = "axis",
                                .min_opset = 9,
                                .max_inputs = 3,
                                .infer = infer_scatter_elements,
                                .run = run_scatter_elements};

/* ---- GatherND / ScatterND: the shared geometry ---- */

/* data [B..., D...], indices [B..., I..., m] with b batch dims: each index
 * tuple of m entries picks the slice data[b..., t0, ..., tm-1, :...] of
 * `slice` elements. */
typedef struct {
  int b, m;
  int64_t batches;          /* product of the batch dims */
  int64_t tuples;           /* index tuples per batch */
  int64_t slice;            /* elements per picked slice */
  int64_t data_batch;       /* elements of data per batch */
  int64_t st[PR_MAX_RANK];  /* data strides (elements) of the m indexed axes */
  int64_t len[PR_MAX_RANK]; /* their lengths */
} nd_geom_t;

static pr_status_t nd_geom(pr_compile_t *c, pr_node_t *n, int b, nd_geom_t *g) {
  pr_value_t *a = pr__in(c, n, 0), *iv = pr__in(c, n, 1);
  if (!iv) return pr__fail(c, n, PR_ERR_INVALID, "indices missing");
  if (!index_type(iv->dtype)) return pr__fail(c, n, PR_ERR_INVALID, "indices must be int32/int64");
  if (iv->rank < 1 || a->rank < 1)
    return pr__fail(c, n, PR_ERR_INVALID, "data or indices a scalar");
  if (b < 0 || b >= iv->rank || b >= a->rank)
    return pr__fail(c, n, PR_ERR_INVALID, "batch_dims %d for ranks %d and %d", b, a->rank,
                    iv->rank);
  int64_t m = iv->dims[iv->rank - 1];
  if (m < 1 || m > a->rank - b)
    return pr__fail(c, n, PR_ERR_INVALID, "index tuples of %lld for data of rank %d", (long long)m,
                    a->rank);
  g->b = b, g->m = (int)m;
  g->batches = 1;
  for (int k = 0; k < b; k++) {
    if (iv->dims[k] != a->dims[k])
      return pr__fail(c, n, PR_ERR_INVALID, "batch dimension %d differs", k);
    g->batches *= a->dims[k];
  }
  g->tuples = 1;
  for (int k = b; k < iv->rank - 1; k++) g->tuples *= iv->dims[k];
  g->slice = 1;
  for (int k = b + g->m; k < a->rank; k++) g->slice *= a->dims[k];
  int64_t st[PR_MAX_RANK];
  strides_of(a, st);
  g->data_batch = b ? st[b - 1] : pr__value_numel(a);
  for (int k = 0; k < g->m; k++) g->st[k] = st[b + k], g->len[k] = a->dims[b + k];
  return check_const_indices(c, n, iv, g->len, g->m);
}

/* Offset in data (elements) of tuple t of batch bi, or -1 when out of range. */
static int64_t nd_offset(const nd_geom_t *g, const pr_value_t *iv, int64_t bi, int64_t t) {
  int64_t at = (bi * g->tuples + t) * g->m, off = bi * g->data_batch;
  for (int k = 0; k < g->m; k++) {
    int64_t j = fix_index(load_index(iv->ptr, iv->dtype, at + k), g->len[k]);
    if (j < 0) return -1;
    off += j * g->st[k];
  }
  return off;
}

/* ---- GatherND ---- */

static pr_status_t infer_gather_nd(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *iv = pr__in(c, n, 1);
  nd_geom_t g;
  pr_status_t st = nd_geom(c, n, (int)pr__attr_int(n->m, "batch_dims", 0), &g);
  if (st) return st;
  int64_t d[PR_MAX_RANK];
  int r = 0;
  if (iv->rank - 1 + a->rank - g.b - g.m > PR_MAX_RANK)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "rank over %d", PR_MAX_RANK);
  for (int k = 0; k < iv->rank - 1; k++) d[r++] = iv->dims[k];
  for (int k = g.b + g.m; k < a->rank; k++) d[r++] = a->dims[k];
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static pr_status_t prepare_nd(pr_compile_t *c, pr_node_t *n) {
  nd_geom_t *g = calloc(1, sizeof *g);
  if (!g) return PR_ERR_NOMEM;
  n->state = g;
  return nd_geom(c, n, (int)pr__attr_int(n->m, "batch_dims", 0), g);
}

static void run_gather_nd(pr_exec_t *x, pr_node_t *n) {
  const nd_geom_t *g = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *iv = &x->v[n->in[1]];
  if (!pr__run_indices_ok(x, n, iv->ptr, iv->dtype, pr__value_numel(iv), g->len, g->m)) return;
  int64_t es = (int64_t)pr_dtype_size(a->dtype), bytes = g->slice * es;
  const char *in = a->ptr;
  char *o = pr__xout(x, n, 0);
  int64_t total = g->batches * g->tuples;
#pragma omp parallel for num_threads(x->threads) if (total * g->slice > 65536)
  for (int64_t i = 0; i < total; i++) {
    int64_t off = nd_offset(g, iv, i / g->tuples, i % g->tuples);
    if (off < 0)
      memset(o + i * bytes, 0, (size_t)bytes);
    else
      memcpy(o + i * bytes, in + off * es, (size_t)bytes);
  }
}

const pr_op_t pr__op_gather_nd = {.name = "GatherND",
                                  .attrs = "batch_dims",
                                  .min_opset = 11,
                                  .max_inputs = 2,
                                  .infer = infer_gather_nd,
                                  .prepare = prepare_nd,
                                  .run = run_gather_nd,
                                  .destroy = free};

/* ---- ScatterND ---- */

static pr_status_t infer_scatter_nd(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *iv = pr__in(c, n, 1), *u = pr__in(c, n, 2);
  nd_geom_t g;
  reduction_t red;
  pr_status_t st;
  if (!u) return pr__fail(c, n, PR_ERR_INVALID, "updates missing");
  if ((st = nd_geom(c, n, 0, &g)) || (st = get_reduction(c, n, &red))) return st;
  /* updates: indices.shape[:-1] + data.shape[m:] */
  int64_t d[2 * PR_MAX_RANK];
  int r = 0;
  for (int k = 0; k < iv->rank - 1; k++) d[r++] = iv->dims[k];
  for (int k = g.m; k < a->rank; k++) d[r++] = a->dims[k];
  if (u->dtype != a->dtype || u->rank != r || memcmp(u->dims, d, sizeof(int64_t) * (size_t)r))
    return pr__fail(c, n, PR_ERR_INVALID, "updates must be indices.shape[:-1] + data.shape[%d:]",
                    g.m);
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static pr_status_t prepare_scatter_nd(pr_compile_t *c, pr_node_t *n) {
  nd_geom_t *g = calloc(1, sizeof *g);
  if (!g) return PR_ERR_NOMEM;
  n->state = g;
  return nd_geom(c, n, 0, g);
}

static void run_scatter_nd(pr_exec_t *x, pr_node_t *n) {
  const nd_geom_t *g = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *iv = &x->v[n->in[1]], *u = &x->v[n->in[2]];
  if (!pr__run_indices_ok(x, n, iv->ptr, iv->dtype, pr__value_numel(iv), g->len, g->m)) return;
  reduction_t red = reduction_of(n);
  int64_t es = (int64_t)pr_dtype_size(a->dtype);
  char *o = pr__xout(x, n, 0);
  const char *up = u->ptr;
  pr__copy(o, a->ptr, a->nbytes, x->threads);
  for (int64_t t = 0; t < g->tuples; t++) {
    int64_t off = nd_offset(g, iv, 0, t);
    if (off >= 0) reduce_into(o + off * es, up + t * g->slice * es, g->slice, a->dtype, red);
  }
}

const pr_op_t pr__op_scatter_nd = {.name = "ScatterND",
                                   .attrs = "reduction",
                                   .min_opset = 11,
                                   .max_inputs = 3,
                                   .infer = infer_scatter_nd,
                                   .prepare = prepare_scatter_nd,
                                   .run = run_scatter_nd,
                                   .destroy = free};
