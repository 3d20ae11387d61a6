/* Operators whose output shape depends on input values: Compress, Unique,
 * NonMaxSuppression and NonZero. A session has concrete shapes, so each
 * runs only when the inputs that decide its shape are constant at compile
 * time; otherwise infer asks for the session's dynamic path
 * (pr__need_values), where every value is known.
 *
 * Notes on the design:
 * - Compress needs only its condition constant: the kept slice indices are
 *   found once in prepare, the data may change from run to run.
 * - Unique and NonMaxSuppression need every input constant, so the node is
 *   always folded: infer computes the whole result into the node's state
 *   (it must, to know the shape), and run copies it out. The session frees
 *   that state with the node's like any other.
 * - Unique sorts with a stable merge sort, so the first of equal elements or
 *   slices is the one that occurs first: its index is the `indices` output.
 *   NaN compares equal to everything (not a total order): the result is
 *   then unspecified but memory-safe.
 * - NonMaxSuppression follows ONNX Runtime's CPU kernel: candidates whose
 *   score is above score_threshold, taken by decreasing score (the lower box
 *   index first among equal scores), each kept unless its IoU with a kept
 *   box of the same class exceeds iou_threshold; boxes of no area overlap
 *   nothing. Output rows are (batch, class, box) in batch, class, selection
 *   order. */
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"
#include "engine/ops/typed.h"
#include "engine/subgraph.h"

/* ---- shared: a stable merge sort of int64 keys through a comparator ---- */

typedef int (*cmp_fn)(const void *ctx, int64_t a, int64_t b);

/* Sorts v[0..n) (tmp: n scratch entries) so that cmp(ctx, v[i], v[i+1]) <= 0,
 * equal entries keeping their order. */
static void merge_sort(int64_t *v, int64_t *tmp, int64_t n, cmp_fn cmp, const void *ctx) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = cmp(ctx, v[j], v[i]) < 0 ? v[j++] : v[i++];
      while (i < mid) tmp[k++] = v[i++];
      while (j < hi) tmp[k++] = v[j++];
    }
    memcpy(v, tmp, sizeof *v * (size_t)n);
  }
}

/* ---- Compress ---- */

typedef struct {
  int64_t outer, len, inner; /* the input around the axis (flattened: 1, numel, 1) */
  int64_t kept;
  int64_t *keep; /* kept positions along the axis */
} compress_state_t;

static void destroy_compress(void *p) {
  compress_state_t *s = p;
  if (s) free(s->keep);
  free(s);
}

/* outer x len x inner around n's `axis` attribute (without one: a flat). */
static pr_status_t axis_blocks(pr_compile_t *c, pr_node_t *n, const pr_value_t *a, int64_t *outer,
                               int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  if (!pr__attr_find(n->m, "axis")) {
    *len = pr__value_numel(a);
    return PR_OK;
  }
  int axis = a->rank ? pr__axis(pr__attr_int(n->m, "axis", 0), a->rank) : -1;
  if (axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  for (int k = 0; k < a->rank; k++)
    if (k != axis) *(k < axis ? outer : inner) *= a->dims[k];
  *len = a->dims[axis];
  return PR_OK;
}

/* The geometry and the kept count; keep (when not NULL) gets the positions. */
static pr_status_t compress_params(pr_compile_t *c, pr_node_t *n, compress_state_t *s,
                                   int64_t *keep) {
  pr_value_t *a = pr__in(c, n, 0), *cv = pr__in(c, n, 1);
  if (!cv) return pr__fail(c, n, PR_ERR_INVALID, "needs a condition");
  if (cv->dtype != PR_DTYPE_BOOL || cv->rank != 1)
    return pr__fail(c, n, PR_ERR_INVALID, "condition must be a 1-D bool tensor");
  if (!cv->is_const)
    return pr__need_values(c, n, "condition decides the output shape: it must be constant");
  pr_status_t st = axis_blocks(c, n, a, &s->outer, &s->len, &s->inner);
  if (st) return st;
  /* a condition longer than the axis: numpy and ONNX Runtime refuse it */
  if (cv->dims[0] > s->len)
    return pr__fail(c, n, PR_ERR_INVALID, "condition has %lld entries for %lld",
                    (long long)cv->dims[0], (long long)s->len);
  const uint8_t *cond = cv->data;
  s->kept = 0;
  for (int64_t j = 0; j < cv->dims[0]; j++)
    if (cond[j]) {
      if (keep) keep[s->kept] = j;
      s->kept++;
    }
  return PR_OK;
}

static pr_status_t infer_compress(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  compress_state_t s = {0};
  pr_status_t st = compress_params(c, n, &s, NULL);
  if (st) return st;
  if (!pr__attr_find(n->m, "axis")) {
    pr__value_set_shape(pr__out(c, n, 0), a->dtype, 1, &s.kept);
    return PR_OK;
  }
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  int64_t d[PR_MAX_RANK];
  memcpy(d, a->dims, sizeof d);
  d[axis] = s.kept;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  return PR_OK;
}

static pr_status_t prepare_compress(pr_compile_t *c, pr_node_t *n) {
  compress_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_value_t *cv = pr__in(c, n, 1);
  s->keep = malloc(sizeof *s->keep * (size_t)(cv->dims[0] ? cv->dims[0] : 1));
  if (!s->keep) return PR_ERR_NOMEM;
  return compress_params(c, n, s, s->keep);
}

/* Rows idx[0..count) of each of the outer blocks of `len` rows of in (rows
 * of `bytes` bytes), one after another into out (Compress, Unique). */
static void gather_rows(char *out, const char *in, int64_t outer, int64_t len, const int64_t *idx,
                        int64_t count, int64_t bytes) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < count; j++)
      memcpy(out + (o * count + j) * bytes, in + (o * len + idx[j]) * bytes, (size_t)bytes);
}

static void run_compress(pr_exec_t *x, pr_node_t *n) {
  const compress_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]];
  gather_rows(pr__xout(x, n, 0), a->ptr, s->outer, s->len, s->keep, s->kept,
              s->inner * (int64_t)pr_dtype_size(a->dtype));
}

const pr_op_t pr__op_compress = {.name = "Compress",
                                 .attrs = "axis",
                                 .min_opset = 9,
                                 .max_inputs = 2,
                                 .infer = infer_compress,
                                 .prepare = prepare_compress,
                                 .run = run_compress,
                                 .destroy = destroy_compress};

/* ---- Unique ---- */

typedef struct {
  int64_t outer, len, inner; /* items: the len slices (o, j, i) of j */
  int64_t count;             /* unique items */
  int64_t *first;            /* [count] first occurrence of each, output order */
  int64_t *counts;           /* [count] */
  int64_t *inverse;          /* [len] output position of each item */
} unique_state_t;

typedef struct {
  const void *x;
  int64_t outer, len, inner;
} unique_ctx_t;

static void destroy_unique(void *p) {
  unique_state_t *s = p;
  if (!s) return;
  free(s->first);
  free(s->counts);
  free(s->inverse);
  free(s);
}

/* Items a and b compared lexicographically, slice elements in row-major order. */
#define UNIQUE_CMP_T(D, sfx, T, K)                                     \
  static int unique_cmp_##sfx(const void *ctx, int64_t a, int64_t b) { \
    const unique_ctx_t *u = ctx;                                       \
    const T *x = u->x;                                                 \
    for (int64_t o = 0; o < u->outer; o++)                             \
      for (int64_t i = 0; i < u->inner; i++) {                         \
        K va = pr__key_##sfx(x[(o * u->len + a) * u->inner + i]);      \
        K vb = pr__key_##sfx(x[(o * u->len + b) * u->inner + i]);      \
        if (va < vb) return -1;                                        \
        if (va > vb) return 1;                                         \
      }                                                                \
    return 0;                                                          \
  }
PR_TYPES_ALL(UNIQUE_CMP_T)
#undef UNIQUE_CMP_T

static cmp_fn unique_cmp_of(pr_dtype_t t) {
  switch (t) {
#define CASE(D, sfx, T, K) \
  case PR_DTYPE_##D: return unique_cmp_##sfx;
    PR_TYPES_ALL(CASE)
#undef CASE
    default: return NULL;
  }
}

static pr_status_t unique_compute(pr_compile_t *c, pr_node_t *n, unique_state_t *s) {
  pr_value_t *a = pr__in(c, n, 0);
  cmp_fn cmp = unique_cmp_of(a->dtype);
  if (!cmp) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  if (!a->is_const) return pr__need_values(c, n, "X decides the output shape: it must be constant");
  pr_status_t st = axis_blocks(c, n, a, &s->outer, &s->len, &s->inner);
  if (st) return st;
  int64_t len = s->len;
  size_t cells = (size_t)(len ? len : 1);
  int64_t *order = malloc(sizeof *order * cells), *tmp = malloc(sizeof *tmp * cells);
  int64_t *group = malloc(sizeof *group * cells), *pos = malloc(sizeof *pos * cells);
  s->first = malloc(sizeof *s->first * cells);
  s->counts = calloc(cells, sizeof *s->counts);
  s->inverse = malloc(sizeof *s->inverse * cells);
  st = PR_OK;
  if (!order || !tmp || !group || !pos || !s->first || !s->counts || !s->inverse) {
    st = PR_ERR_NOMEM;
    goto done;
  }
  unique_ctx_t u = {a->data, s->outer, len, s->inner};
  for (int64_t j = 0; j < len; j++) order[j] = j;
  merge_sort(order, tmp, len, cmp, &u);
  /* groups of equal items in sorted order; the first of each occurs first */
  int64_t groups = 0;
  for (int64_t k = 0; k < len; k++) {
    if (k == 0 || cmp(&u, order[k - 1], order[k]) != 0) groups++;
    group[order[k]] = groups - 1;
  }
  bool sorted = pr__attr_int(n->m, "sorted", 1) != 0;
  if (sorted) {
    for (int64_t g = 0; g < groups; g++) pos[g] = g;
  } else { /* by first occurrence */
    for (int64_t g = 0; g < groups; g++) pos[g] = -1;
    for (int64_t j = 0, next = 0; j < len; j++)
      if (pos[group[j]] < 0) pos[group[j]] = next++;
  }
  for (int64_t g = 0; g < groups; g++) s->first[g] = -1;
  for (int64_t j = 0; j < len; j++) {
    int64_t p = pos[group[j]];
    if (s->first[p] < 0) s->first[p] = j;
    s->counts[p]++;
    s->inverse[j] = p;
  }
  s->count = groups;
done:
  free(order);
  free(tmp);
  free(group);
  free(pos);
  return st;
}

static pr_status_t infer_unique(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  unique_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  pr_status_t st = unique_compute(c, n, s);
  if (st) {
    destroy_unique(s);
    return st;
  }
  destroy_unique(n->state);
  n->state = s;
  if (pr__attr_find(n->m, "axis")) {
    int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
    int64_t d[PR_MAX_RANK];
    memcpy(d, a->dims, sizeof d);
    d[axis] = s->count;
    pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  } else {
    pr__value_set_shape(pr__out(c, n, 0), a->dtype, 1, &s->count);
  }
  if (pr__out(c, n, 1)) pr__value_set_shape(pr__out(c, n, 1), PR_DTYPE_INT64, 1, &s->count);
  if (pr__out(c, n, 2)) pr__value_set_shape(pr__out(c, n, 2), PR_DTYPE_INT64, 1, &s->len);
  if (pr__out(c, n, 3)) pr__value_set_shape(pr__out(c, n, 3), PR_DTYPE_INT64, 1, &s->count);
  return PR_OK;
}

static void run_unique(pr_exec_t *x, pr_node_t *n) {
  const unique_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]];
  gather_rows(pr__xout(x, n, 0), a->ptr, s->outer, s->len, s->first, s->count,
              s->inner * (int64_t)pr_dtype_size(a->dtype));
  size_t cnt = sizeof(int64_t) * (size_t)s->count;
  if (n->n_out > 1 && n->out[1] >= 0 && cnt) memcpy(pr__xout(x, n, 1), s->first, cnt);
  if (n->n_out > 2 && n->out[2] >= 0 && s->len)
    memcpy(pr__xout(x, n, 2), s->inverse, sizeof(int64_t) * (size_t)s->len);
  if (n->n_out > 3 && n->out[3] >= 0 && cnt) memcpy(pr__xout(x, n, 3), s->counts, cnt);
}

const pr_op_t pr__op_unique = {.name = "Unique",
                               .attrs = "axis,sorted",
                               .min_opset = 11,
                               .max_inputs = 1,
                               .infer = infer_unique,
                               .run = run_unique,
                               .destroy = destroy_unique};

/* ---- NonMaxSuppression ---- */

typedef struct {
  int64_t count;
  int64_t *rows; /* [count][3] */
} nms_state_t;

typedef struct {
  const float *scores;
} nms_ctx_t;

static void destroy_nms(void *p) {
  nms_state_t *s = p;
  if (s) free(s->rows);
  free(s);
}

/* decreasing score, the lower index first among equals (stable sort) */
static int nms_cmp(const void *ctx, int64_t a, int64_t b) {
  const float *sc = ((const nms_ctx_t *)ctx)->scores;
  return sc[a] > sc[b] ? -1 : sc[a] < sc[b] ? 1 : 0;
}

/* Box corners (ymin, xmin, ymax, xmax) of box i. */
static void nms_corners(const float *b, bool center, float *q) {
  if (center) {
    float xc = b[0], yc = b[1], w = b[2], h = b[3];
    q[0] = yc - h / 2, q[1] = xc - w / 2, q[2] = yc + h / 2, q[3] = xc + w / 2;
  } else {
    q[0] = b[0] < b[2] ? b[0] : b[2], q[2] = b[0] < b[2] ? b[2] : b[0];
    q[1] = b[1] < b[3] ? b[1] : b[3], q[3] = b[1] < b[3] ? b[3] : b[1];
  }
}

static bool nms_suppress(const float *p, const float *q, float iou_threshold) {
  float ymin = p[0] > q[0] ? p[0] : q[0], xmin = p[1] > q[1] ? p[1] : q[1];
  float ymax = p[2] < q[2] ? p[2] : q[2], xmax = p[3] < q[3] ? p[3] : q[3];
  float inter = (xmax > xmin ? xmax - xmin : 0.f) * (ymax > ymin ? ymax - ymin : 0.f);
  if (inter <= 0.f) return false;
  float a1 = (p[2] - p[0]) * (p[3] - p[1]), a2 = (q[2] - q[0]) * (q[3] - q[1]);
  float uni = a1 + a2 - inter;
  if (a1 <= 0.f || a2 <= 0.f || uni <= 0.f) return false;
  return inter / uni > iou_threshold;
}

/* A scalar or one-element input k of type t, or NULL when absent. */
static pr_status_t nms_scalar(pr_compile_t *c, pr_node_t *n, int k, pr_dtype_t t,
                              const void **out) {
  pr_value_t *v = pr__in(c, n, k);
  *out = NULL;
  if (!v) return PR_OK;
  if (v->dtype != t || v->rank > 1 || pr__value_numel(v) != 1)
    return pr__fail(c, n, PR_ERR_INVALID, "input %d must be one %s", k, pr_dtype_name(t));
  *out = v->data;
  return PR_OK;
}

static pr_status_t nms_compute(pr_compile_t *c, pr_node_t *n, nms_state_t *s) {
  pr_value_t *bv = pr__in(c, n, 0), *sv = pr__in(c, n, 1);
  if (!sv) return pr__fail(c, n, PR_ERR_INVALID, "needs boxes and scores");
  if (bv->dtype != PR_DTYPE_FLOAT || sv->dtype != PR_DTYPE_FLOAT)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "boxes and scores must be float");
  if (bv->rank != 3 || bv->dims[2] != 4 || sv->rank != 3 || sv->dims[0] != bv->dims[0] ||
      sv->dims[2] != bv->dims[1])
    return pr__fail(c, n, PR_ERR_INVALID, "boxes must be [B, N, 4] and scores [B, C, N]");
  for (int k = 0; k < n->n_in; k++)
    if (pr__in(c, n, k) && !pr__in(c, n, k)->is_const)
      return pr__need_values(c, n, "the inputs decide the output shape: they must be constant");
  const void *maxp, *iou, *score;
  pr_status_t st;
  if ((st = nms_scalar(c, n, 2, PR_DTYPE_INT64, &maxp)) ||
      (st = nms_scalar(c, n, 3, PR_DTYPE_FLOAT, &iou)) ||
      (st = nms_scalar(c, n, 4, PR_DTYPE_FLOAT, &score)))
    return st;
  int64_t max_per_class = maxp ? *(const int64_t *)maxp : 0;
  float iou_threshold = iou ? *(const float *)iou : 0.f;
  int64_t center = pr__attr_int(n->m, "center_point_box", 0);
  if (center != 0 && center != 1)
    return pr__fail(c, n, PR_ERR_INVALID, "center_point_box must be 0 or 1");
  if (iou_threshold < 0.f || iou_threshold > 1.f)
    return pr__fail(c, n, PR_ERR_INVALID, "iou_threshold must be in [0, 1]");
  int64_t B = bv->dims[0], N = bv->dims[1], C = sv->dims[1];
  if (max_per_class < 0) max_per_class = 0;
  if (max_per_class > N) max_per_class = N;
  /* at most B * C * min(max, N) rows, each of 3 */
  size_t cap, cells = (size_t)(N ? N : 1);
  if (pr__mul_size((size_t)B, (size_t)C, &cap) || pr__mul_size(cap, (size_t)max_per_class, &cap) ||
      pr__mul_size(cap ? cap : 1, 3 * sizeof(int64_t), &cap))
    return pr__fail(c, n, PR_ERR_INVALID, "output too large");
  s->rows = malloc(cap);
  int64_t *order = malloc(sizeof *order * cells), *tmp = malloc(sizeof *tmp * cells);
  int64_t *kept = malloc(sizeof *kept * cells);
  if (!s->rows || !order || !tmp || !kept) {
    st = PR_ERR_NOMEM;
    goto done;
  }
  const float *boxes = bv->data, *scores = sv->data;
  for (int64_t b = 0; b < B; b++)
    for (int64_t cl = 0; cl < C && max_per_class; cl++) {
      const float *sc = scores + (b * C + cl) * N;
      int64_t cand = 0, nk = 0;
      for (int64_t i = 0; i < N; i++)
        if (!score || sc[i] > *(const float *)score) order[cand++] = i;
      nms_ctx_t ctx = {sc};
      merge_sort(order, tmp, cand, nms_cmp, &ctx);
      for (int64_t k = 0; k < cand && nk < max_per_class; k++) {
        float p[4], q[4];
        nms_corners(boxes + (b * N + order[k]) * 4, center, p);
        bool drop = false;
        for (int64_t j = 0; j < nk && !drop; j++) {
          nms_corners(boxes + (b * N + kept[j]) * 4, center, q);
          drop = nms_suppress(p, q, iou_threshold);
        }
        if (drop) continue;
        kept[nk++] = order[k];
        int64_t *row = s->rows + 3 * s->count++;
        row[0] = b, row[1] = cl, row[2] = order[k];
      }
    }
done:
  free(order);
  free(tmp);
  free(kept);
  return st;
}

static pr_status_t infer_nms(pr_compile_t *c, pr_node_t *n) {
  nms_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  pr_status_t st = nms_compute(c, n, s);
  if (st) {
    destroy_nms(s);
    return st;
  }
  destroy_nms(n->state);
  n->state = s;
  int64_t d[2] = {s->count, 3};
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_INT64, 2, d);
  return PR_OK;
}

static void run_nms(pr_exec_t *x, pr_node_t *n) {
  const nms_state_t *s = n->state;
  if (s->count) memcpy(pr__xout(x, n, 0), s->rows, sizeof(int64_t) * 3 * (size_t)s->count);
}

const pr_op_t pr__op_non_max_suppression = {.name = "NonMaxSuppression",
                                            .attrs = "center_point_box",
                                            .min_opset = 10,
                                            .max_inputs = 5,
                                            .infer = infer_nms,
                                            .run = run_nms,
                                            .destroy = destroy_nms};

/* ---- NonZero: the indices of the non-zero elements, [rank, count] ---- */

static pr_status_t infer_non_zero(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (!pr_dtype_size(a->dtype) || a->dtype == PR_DTYPE_STRING)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  if (!a->is_const) return pr__need_values(c, n, "X decides the output shape: it must be constant");
  int64_t numel = pr__value_numel(a), count = 0;
  int rank = a->rank ? a->rank : 1; /* a scalar counts as one element of rank 1 */
  for (int64_t i = 0; i < numel; i++) count += pr__load_double(a->data, a->dtype, i) != 0;
  pr_results_t *r = pr__results_new(1);
  if (!r) return PR_ERR_NOMEM;
  n->state = r;
  pr_tensor_t *t = &r->t[0];
  t->dtype = PR_DTYPE_INT64;
  t->rank = 2;
  t->dims[0] = rank;
  t->dims[1] = count;
  int64_t *idx = t->data = pr__aligned_alloc(sizeof *idx * (size_t)(rank * count));
  if (!idx) return PR_ERR_NOMEM;
  for (int64_t i = 0, j = 0; i < numel; i++) {
    if (pr__load_double(a->data, a->dtype, i) == 0) continue;
    for (int64_t k = rank - 1, rest = i; k >= 0; k--) { /* row-major coordinates */
      int64_t d = a->rank ? a->dims[k] : 1;
      idx[k * count + j] = rest % d;
      rest /= d;
    }
    j++;
  }
  pr__results_shapes(c, n, r);
  return PR_OK;
}

const pr_op_t pr__op_non_zero = {.name = "NonZero",
                                 .attrs = "",
                                 .min_opset = 9,
                                 .max_inputs = 1,
                                 .infer = infer_non_zero,
                                 .run = pr__results_run,
                                 .destroy = pr__results_destroy};
