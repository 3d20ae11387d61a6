/* Data-movement operators: Concat, Split, Transpose, Gather, Slice, Pad,
 * Expand and Trilu. They work on any element type by element size. */
#include <string.h>

#include "base/util.h"
#include "engine/ops/dnnl_util.h"

/* ---- Concat ---- */

typedef struct {
  int64_t outer, inner_out; /* bytes per outer row of the output */
  int64_t *inner_in;        /* bytes per outer row of each input */
  pr_dnnl_prim_t *prim;     /* channel concat of blocked (opaque) inputs */
  size_t *slice_off;        /* inputs as byte ranges of the output (node.slice_off) */
} concat_state_t;

static pr_status_t infer_concat(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (!a) return pr__fail(c, n, PR_ERR_INVALID, "needs inputs");
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  if (axis < 0 || !pr__attr_find(n->m, "axis"))
    return pr__fail(c, n, PR_ERR_INVALID, "axis missing or out of range");
  int64_t d[PR_MAX_RANK];
  memcpy(d, a->dims, sizeof d);
  d[axis] = 0;
  for (int k = 0; k < n->n_in; k++) {
    pr_value_t *b = pr__in(c, n, k);
    if (!b || b->rank != a->rank || b->dtype != a->dtype)
      return pr__fail(c, n, PR_ERR_INVALID, "input %d rank or type differs", k);
    for (int j = 0; j < a->rank; j++)
      if (j != axis && b->dims[j] != a->dims[j])
        return pr__fail(c, n, PR_ERR_INVALID, "input %d shape differs off the axis", k);
    d[axis] += b->dims[axis];
  }
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  return PR_OK;
}

static void destroy_concat(void *p) {
  concat_state_t *s = p;
  if (s && s->prim) pr__dnnl_prim_destroy(s->prim), free(s->prim);
  if (s) free(s->inner_in), free(s->slice_off);
  free(s);
}

/* The format tag (of a few blocked/plain candidates) that describes md, or 0. */
static dnnl_format_tag_t tag_of(const pr_value_t *v) {
  static const dnnl_format_tag_t tags[] = {dnnl_aBcd16b,  dnnl_aBcd8b,  dnnl_acdb,  dnnl_abcd,
                                           dnnl_aBcde16b, dnnl_aBcde8b, dnnl_acdeb, dnnl_abcde};
  dnnl_dims_t d;
  for (int k = 0; k < v->rank; k++) d[k] = v->dims[k];
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
    dnnl_memory_desc_t md;
    if (dnnl_memory_desc_init_by_tag(&md, v->rank, d, dnnl_f32, tags[i]) == dnnl_success &&
        dnnl_memory_desc_equal(&md, &v->md))
      return tags[i];
  }
  return (dnnl_format_tag_t)0;
}

static pr_status_t concat_blocked_prim(pr_compile_t *c, pr_node_t *n, concat_state_t *s,
                                       dnnl_format_tag_t tag, dnnl_memory_desc_t *mds);

/* Blocked inputs concatenated on channels stay blocked: one oneDNN concat. */
static pr_status_t prepare_concat_blocked(pr_compile_t *c, pr_node_t *n, concat_state_t *s) {
  dnnl_format_tag_t tag = 0;
  for (int k = 0; k < n->n_in && !tag; k++)
    if (pr__in(c, n, k)->opaque) tag = tag_of(pr__in(c, n, k));
  if (!tag) return PR_ERR_UNSUPPORTED;
  dnnl_memory_desc_t *mds = calloc((size_t)n->n_in, sizeof *mds);
  if (!mds) return PR_ERR_NOMEM;
  pr_status_t st = concat_blocked_prim(c, n, s, tag, mds);
  free(mds);
  return st;
}

static pr_status_t concat_blocked_prim(pr_compile_t *c, pr_node_t *n, concat_state_t *s,
                                       dnnl_format_tag_t tag, dnnl_memory_desc_t *mds) {
  pr_status_t st;
  for (int k = 0; k < n->n_in; k++) {
    pr_value_t *v = pr__in(c, n, k);
    dnnl_dims_t d;
    for (int j = 0; j < v->rank; j++) d[j] = v->dims[j];
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&mds[k], v->rank, d, dnnl_f32, tag));
    if ((st = pr__require_md(c, n, k, &mds[k]))) return st;
  }
  pr_value_t *o = pr__out(c, n, 0);
  dnnl_dims_t od;
  dnnl_memory_desc_t omd;
  for (int j = 0; j < o->rank; j++) od[j] = o->dims[j];
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&omd, o->rank, od, dnnl_f32, tag));
  dnnl_primitive_desc_t pd;
  PR_DNNL(c, n, dnnl_concat_primitive_desc_create(&pd, &omd, n->n_in, 1, mds, NULL, c->engine));
  s->prim = calloc(1, sizeof *s->prim);
  if (!s->prim) {
    dnnl_primitive_desc_destroy(pd);
    return PR_ERR_NOMEM;
  }
  if ((st = pr__dnnl_prim_init(c, n, s->prim, pd)) ||
      (st = pr__dnnl_prim_reserve(s->prim, n->n_in + 1)))
    return st;
  for (int k = 0; k < n->n_in; k++)
    pr__dnnl_prim_add_arg(s->prim, DNNL_ARG_MULTIPLE_SRC + k, n->in[k], NULL, &mds[k]);
  pr__dnnl_prim_add_arg(s->prim, DNNL_ARG_DST, n->out[0], NULL, &omd);
  o->md = omd;
  o->opaque = tag != dnnl_abcd && tag != dnnl_abcde;
  o->nbytes = dnnl_memory_desc_get_size(&omd);
  return PR_OK;
}

/* The channel block of a blocked tag, 1 for a plain one, 0 for others. */
static int64_t tag_block(dnnl_format_tag_t tag) {
  switch (tag) {
    case dnnl_aBcd16b:
    case dnnl_aBcde16b: return 16;
    case dnnl_aBcd8b:
    case dnnl_aBcde8b: return 8;
    case dnnl_abcd:
    case dnnl_abcde: return 1;
    default: return 0;
  }
}

/* When every input is one run of the output's bytes (a single outer row:
 * batch 1 on the channel axis, whole channel blocks), their offsets in it,
 * for the memory plan to lay the inputs there (node.slice_off). */
static pr_status_t concat_slices(pr_compile_t *c, pr_node_t *n, concat_state_t *s, int axis) {
  pr_value_t *o = pr__out(c, n, 0);
  int64_t outer = 1;
  for (int k = 0; k < axis; k++) outer *= o->dims[k];
  if (outer != 1) return PR_OK;
  if (o->opaque) {
    int64_t blk = tag_block(tag_of(o));
    if (!blk || axis != 1) return PR_OK;
    for (int k = 0; k < n->n_in; k++)
      if (pr__in(c, n, k)->dims[1] % blk || tag_of(pr__in(c, n, k)) != tag_of(o)) return PR_OK;
  }
  if (!(s->slice_off = malloc(sizeof(size_t) * (size_t)n->n_in))) return PR_ERR_NOMEM;
  size_t off = 0;
  for (int k = 0; k < n->n_in; k++) {
    s->slice_off[k] = off;
    off += pr__in(c, n, k)->nbytes;
  }
  if (off != o->nbytes) {
    free(s->slice_off);
    s->slice_off = NULL;
    return PR_OK;
  }
  n->slice_off = s->slice_off;
  return PR_OK;
}

static pr_status_t prepare_concat(pr_compile_t *c, pr_node_t *n) {
  concat_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_value_t *o = pr__out(c, n, 0);
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), o->rank);
  bool any_opaque = false;
  for (int k = 0; k < n->n_in; k++) any_opaque |= pr__in(c, n, k)->opaque;
  if (any_opaque && axis == 1 && o->dtype == PR_DTYPE_FLOAT) {
    pr_status_t st = prepare_concat_blocked(c, n, s);
    if (st != PR_ERR_UNSUPPORTED) return st ? st : concat_slices(c, n, s, axis);
  }
  for (int k = 0; k < n->n_in; k++) {
    pr_status_t st = pr__require_plain(c, n, k);
    if (st) return st;
  }
  o = pr__out(c, n, 0);
  size_t es = pr_dtype_size(o->dtype);
  s->outer = 1;
  for (int k = 0; k < axis; k++) s->outer *= o->dims[k];
  int64_t inner = (int64_t)es;
  for (int k = axis + 1; k < o->rank; k++) inner *= o->dims[k];
  s->inner_out = inner * o->dims[axis];
  if (!(s->inner_in = malloc(sizeof(int64_t) * (size_t)n->n_in))) return PR_ERR_NOMEM;
  for (int k = 0; k < n->n_in; k++) s->inner_in[k] = inner * pr__in(c, n, k)->dims[axis];
  return concat_slices(c, n, s, axis);
}

static void run_concat(pr_exec_t *x, pr_node_t *n) {
  const concat_state_t *s = n->state;
  if (s->slice_off) { /* copies only the inputs that are not laid in place */
    char *o = pr__xout(x, n, 0);
    const pr_value_t *ov = &x->v[n->out[0]];
    for (int k = 0; k < n->n_in; k++) {
      const void *src = pr__xin(x, n, k);
      size_t end = k + 1 < n->n_in ? s->slice_off[k + 1] : ov->nbytes;
      if (src != o + s->slice_off[k])
        pr__copy(o + s->slice_off[k], src, end - s->slice_off[k], x->threads);
    }
    return;
  }
  if (s->prim) {
    pr__dnnl_prim_run(x, s->prim);
    return;
  }
  char *o = pr__xout(x, n, 0);
#pragma omp parallel for num_threads(x->threads) if (s->outer * s->inner_out > (1 << 16))
  for (int64_t r = 0; r < s->outer; r++) {
    int64_t off = r * s->inner_out;
    for (int k = 0; k < n->n_in; k++) {
      memcpy(o + off, (const char *)pr__xin(x, n, k) + r * s->inner_in[k], (size_t)s->inner_in[k]);
      off += s->inner_in[k];
    }
  }
}

const pr_op_t pr__op_concat = {.name = "Concat",
                               .attrs = "axis",
                               .min_opset = 4,
                               .infer = infer_concat,
                               .prepare = prepare_concat,
                               .run = run_concat,
                               .destroy = destroy_concat,
                               .accepts_opaque = true};

/* ---- Split ---- */

static pr_status_t split_sizes(pr_compile_t *c, pr_node_t *n, int axis, int64_t *sizes) {
  pr_value_t *a = pr__in(c, n, 0);
  int64_t given[16];
  int ng = -1;
  if (c->opset < 13) {
    const int64_t *v;
    int cnt = pr__attr_ints(n->m, "split", &v);
    if (pr__attr_find(n->m, "split")) {
      if (cnt > 16) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "too many splits");
      for (int i = 0; i < cnt; i++) given[i] = v[i];
      ng = cnt;
    }
  } else if (pr__in(c, n, 1)) {
    if (c->opset >= 18 && pr__attr_find(n->m, "num_outputs"))
      return pr__fail(c, n, PR_ERR_INVALID, "both split and num_outputs");
    ng = pr__const_ints(pr__in(c, n, 1), given, 16);
    if (ng < 0) return pr__need_values(c, n, "split must be constant");
  }
  if (ng >= 0) {
    if (ng != n->n_out)
      return pr__fail(c, n, PR_ERR_INVALID, "split has %d entries for %d outputs", ng, n->n_out);
    int64_t total = 0;
    for (int i = 0; i < ng; i++) {
      if (given[i] < 0 || given[i] > a->dims[axis])
        return pr__fail(c, n, PR_ERR_INVALID, "split %lld out of range", (long long)given[i]);
      sizes[i] = given[i];
      total += given[i]; /* at most 16 entries of at most dims[axis] each: no overflow */
    }
    if (total != a->dims[axis]) return pr__fail(c, n, PR_ERR_INVALID, "splits do not add up");
    return PR_OK;
  }
  /* opset 18: num_outputs parts of ceil(len / num_outputs), the last smaller */
  if (c->opset >= 18 && pr__attr_find(n->m, "num_outputs") &&
      pr__attr_int(n->m, "num_outputs", 0) != n->n_out)
    return pr__fail(c, n, PR_ERR_INVALID, "num_outputs differs from the outputs");
  if (c->opset >= 18 && !pr__attr_find(n->m, "num_outputs"))
    return pr__fail(c, n, PR_ERR_INVALID, "split or num_outputs is required");
  int64_t len = a->dims[axis], per = (len + n->n_out - 1) / n->n_out;
  for (int i = 0; i < n->n_out; i++) {
    sizes[i] = len >= per ? per : len;
    len -= sizes[i];
  }
  if (a->dims[axis] % n->n_out && c->opset < 18)
    return pr__fail(c, n, PR_ERR_INVALID, "axis length not divisible by the number of outputs");
  return PR_OK;
}

static pr_status_t infer_split(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  if (axis < 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  if (n->n_out < 1 || n->n_out > 16) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "1..16 outputs");
  int64_t sizes[16];
  pr_status_t st = split_sizes(c, n, axis, sizes);
  if (st) return st;
  for (int i = 0; i < n->n_out; i++) {
    pr_value_t *o = pr__out(c, n, i);
    if (!o) continue;
    int64_t d[PR_MAX_RANK];
    memcpy(d, a->dims, sizeof d);
    d[axis] = sizes[i];
    pr__value_set_shape(o, a->dtype, a->rank, d);
  }
  return PR_OK;
}

static void run_split(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]];
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  size_t es = pr_dtype_size(a->dtype);
  int64_t outer = 1, inner = (int64_t)es;
  for (int k = 0; k < axis; k++) outer *= a->dims[k];
  for (int k = axis + 1; k < a->rank; k++) inner *= a->dims[k];
  const char *in = a->ptr;
  int64_t row = inner * a->dims[axis];
  int64_t off = 0;
  for (int i = 0; i < n->n_out; i++) {
    int64_t len;
    if (n->out[i] < 0) continue;
    const pr_value_t *o = &x->v[n->out[i]];
    len = inner * o->dims[axis];
    char *po = o->ptr;
    for (int64_t r = 0; r < outer; r++) memcpy(po + r * len, in + r * row + off, (size_t)len);
    off += len;
  }
}

const pr_op_t pr__op_split = {.name = "Split",
                              .attrs = "axis,split,num_outputs",
                              .min_opset = 2,
                              .max_inputs = 2,
                              .infer = infer_split,
                              .run = run_split};

/* ---- Transpose ---- */

typedef struct {
  int rank;
  int64_t dims[PR_MAX_RANK];    /* output dims */
  int64_t strides[PR_MAX_RANK]; /* input stride (elements) of each output axis */
  size_t es;
} transpose_state_t;

static pr_status_t get_perm(pr_compile_t *c, pr_node_t *n, int rank, int *perm) {
  const int64_t *p;
  int cnt = pr__attr_ints(n->m, "perm", &p);
  if (!pr__attr_find(n->m, "perm")) {
    for (int k = 0; k < rank; k++) perm[k] = rank - 1 - k;
    return PR_OK;
  }
  if (cnt != rank)
    return pr__fail(c, n, PR_ERR_INVALID, "perm has %d entries for rank %d", cnt, rank);
  bool seen[PR_MAX_RANK] = {0};
  for (int k = 0; k < rank; k++) {
    int ax = pr__axis(p[k], rank);
    if (ax < 0 || seen[ax]) return pr__fail(c, n, PR_ERR_INVALID, "perm is not a permutation");
    seen[ax] = true;
    perm[k] = ax;
  }
  return PR_OK;
}

static pr_status_t infer_transpose(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int perm[PR_MAX_RANK];
  pr_status_t st = get_perm(c, n, a->rank, perm);
  if (st) return st;
  int64_t d[PR_MAX_RANK];
  for (int k = 0; k < a->rank; k++) d[k] = a->dims[perm[k]];
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  return PR_OK;
}

static pr_status_t prepare_transpose(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  transpose_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  int perm[PR_MAX_RANK];
  get_perm(c, n, a->rank, perm);
  int64_t in_stride[PR_MAX_RANK], e = 1;
  for (int k = a->rank - 1; k >= 0; k--) in_stride[k] = e, e *= a->dims[k];
  /* drop size-1 axes, merge output axes that are consecutive in the input */
  int r = 0;
  for (int k = 0; k < a->rank; k++) {
    int64_t d = a->dims[perm[k]], st = in_stride[perm[k]];
    if (d == 1) continue;
    if (r > 0 && s->strides[r - 1] == st * d) {
      s->dims[r - 1] *= d;
      s->strides[r - 1] = st;
    } else {
      s->dims[r] = d;
      s->strides[r] = st;
      r++;
    }
  }
  if (!r) s->dims[0] = 1, s->strides[0] = 1, r = 1;
  s->rank = r;
  s->es = pr_dtype_size(a->dtype);
  return PR_OK;
}

#define TRANSPOSE_T(T)                                                                            \
  static void transpose_##T(const transpose_state_t *s, T *o, const T *in, int th) {              \
    int r = s->rank;                                                                              \
    int64_t inner = s->dims[r - 1], inner_st = s->strides[r - 1], outer = 1;                      \
    for (int k = 0; k < r - 1; k++) outer *= s->dims[k];                                          \
    _Pragma("omp parallel for num_threads(th) if (outer * inner > 65536)") for (int64_t i = 0;    \
                                                                                i < outer; i++) { \
      int64_t rem = i, off = 0;                                                                   \
      for (int k = r - 2; k >= 0; k--) {                                                          \
        off += (rem % s->dims[k]) * s->strides[k];                                                \
        rem /= s->dims[k];                                                                        \
      }                                                                                           \
      T *po = o + i * inner;                                                                      \
      const T *pi = in + off;                                                                     \
      for (int64_t j = 0; j < inner; j++) po[j] = pi[j * inner_st];                               \
    }                                                                                             \
  }
TRANSPOSE_T(uint8_t)
TRANSPOSE_T(uint16_t)
TRANSPOSE_T(uint32_t)
TRANSPOSE_T(uint64_t)

static void run_transpose(pr_exec_t *x, pr_node_t *n) {
  const transpose_state_t *s = n->state;
  void *o = pr__xout(x, n, 0);
  const void *in = pr__xin(x, n, 0);
  switch (s->es) {
    case 1: transpose_uint8_t(s, o, in, x->threads); break;
    case 2: transpose_uint16_t(s, o, in, x->threads); break;
    case 4: transpose_uint32_t(s, o, in, x->threads); break;
    default: transpose_uint64_t(s, o, in, x->threads); break;
  }
}

const pr_op_t pr__op_transpose = {.name = "Transpose",
                                  .attrs = "perm",
                                  .min_opset = 1,
                                  .max_inputs = 1,
                                  .infer = infer_transpose,
                                  .prepare = prepare_transpose,
                                  .run = run_transpose,
                                  .destroy = free};

/* ---- Gather ---- */

static pr_status_t infer_gather(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *idx = pr__in(c, n, 1);
  if (!a || !idx) return pr__fail(c, n, PR_ERR_INVALID, "needs data and indices");
  if (idx->dtype != PR_DTYPE_INT64 && idx->dtype != PR_DTYPE_INT32)
    return pr__fail(c, n, PR_ERR_INVALID, "indices must be int32 or int64");
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  if (axis < 0 || a->rank == 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  int r = a->rank - 1 + idx->rank;
  if (r > PR_MAX_RANK) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "rank over %d", PR_MAX_RANK);
  int64_t d[PR_MAX_RANK];
  int j = 0;
  for (int k = 0; k < axis; k++) d[j++] = a->dims[k];
  for (int k = 0; k < idx->rank; k++) d[j++] = idx->dims[k];
  for (int k = axis + 1; k < a->rank; k++) d[j++] = a->dims[k];
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static void run_gather(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *iv = &x->v[n->in[1]];
  int axis = pr__axis(pr__attr_int(n->m, "axis", 0), a->rank);
  size_t es = pr_dtype_size(a->dtype);
  int64_t outer = 1, inner = (int64_t)es, len = a->dims[axis], ni = pr__value_numel(iv);
  for (int k = 0; k < axis; k++) outer *= a->dims[k];
  for (int k = axis + 1; k < a->rank; k++) inner *= a->dims[k];
  /* an index out of range (ONNX leaves it undefined) fails the run, as in
   * ONNX Runtime: ids past an embedding table are a client's error */
  if (!pr__run_indices_ok(x, n, iv->ptr, iv->dtype, ni, &len, 1)) return;
  const char *in = a->ptr;
  char *o = pr__xout(x, n, 0);
#pragma omp parallel for num_threads(x->threads) if (outer * ni * inner > 65536)
  for (int64_t r = 0; r < outer; r++)
    for (int64_t i = 0; i < ni; i++) {
      int64_t j = iv->dtype == PR_DTYPE_INT64 ? ((const int64_t *)iv->ptr)[i]
                                              : ((const int32_t *)iv->ptr)[i];
      if (j < 0) j += len;
      char *dst = o + (r * ni + i) * inner;
      /* checked above: never a read outside a */
      if (j < 0 || j >= len)
        memset(dst, 0, (size_t)inner);
      else
        memcpy(dst, in + (r * len + j) * inner, (size_t)inner);
    }
}

const pr_op_t pr__op_gather = {.name = "Gather",
                               .attrs = "axis",
                               .min_opset = 1,
                               .max_inputs = 2,
                               .infer = infer_gather,
                               .run = run_gather};

/* ---- Pad ---- */

/* Opset 18 adds the axes input (pads then name only those axes), 19 the
 * wrap mode (the tensor repeated periodically). Negative pads crop. */
typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode_t;

typedef struct {
  pad_mode_t mode;
  int64_t pads[2 * PR_MAX_RANK];
  uint64_t value; /* constant's bytes */
} pad_state_t;

static pr_status_t pad_params(pr_compile_t *c, pr_node_t *n, pad_state_t *s) {
  pr_value_t *a = pr__in(c, n, 0);
  const char *mode = pr__attr_string(n->m, "mode", "constant");
  if (!strcmp(mode, "constant"))
    s->mode = PAD_CONSTANT;
  else if (!strcmp(mode, "reflect"))
    s->mode = PAD_REFLECT;
  else if (!strcmp(mode, "edge"))
    s->mode = PAD_EDGE;
  else if (!strcmp(mode, "wrap") && c->opset >= 19)
    s->mode = PAD_WRAP;
  else
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "mode '%s'", mode);
  int np;
  s->value = 0;
  if (c->opset < 11) {
    const int64_t *p;
    np = pr__attr_ints(n->m, "pads", &p);
    if (np != 2 * a->rank)
      return pr__fail(c, n, PR_ERR_INVALID, "pads needs %d entries", 2 * a->rank);
    if (np) memcpy(s->pads, p, sizeof(int64_t) * (size_t)np);
    float v = pr__attr_float(n->m, "value", 0.f);
    if (a->dtype != PR_DTYPE_FLOAT && v != 0.f)
      return pr__fail(c, n, PR_ERR_UNSUPPORTED, "value for a non-float tensor");
    memcpy(&s->value, &v, sizeof v);
  } else {
    int64_t given[2 * PR_MAX_RANK], axes[PR_MAX_RANK];
    np = pr__const_ints(pr__in(c, n, 1), given, 2 * PR_MAX_RANK);
    if (np < 0) return pr__need_values(c, n, "pads must be constant");
    int na = a->rank;
    for (int k = 0; k < a->rank; k++) axes[k] = k;
    if (pr__in(c, n, 3)) {
      if (c->opset < 18) return pr__fail(c, n, PR_ERR_INVALID, "axes input before opset 18");
      if ((na = pr__const_ints(pr__in(c, n, 3), axes, PR_MAX_RANK)) < 0)
        return pr__need_values(c, n, "axes must be constant");
    }
    if (np != 2 * na) return pr__fail(c, n, PR_ERR_INVALID, "pads needs %d entries", 2 * na);
    memset(s->pads, 0, sizeof s->pads);
    for (int i = 0; i < na; i++) {
      int ax = pr__axis(axes[i], a->rank);
      if (ax < 0)
        return pr__fail(c, n, PR_ERR_INVALID, "axis %lld out of range", (long long)axes[i]);
      s->pads[ax] = given[i], s->pads[ax + a->rank] = given[i + na];
    }
    pr_value_t *cv = pr__in(c, n, 2);
    if (cv) {
      if (!cv->is_const || cv->dtype != a->dtype || pr__value_numel(cv) != 1)
        return pr__need_values(c, n, "constant_value must be a constant scalar");
      memcpy(&s->value, cv->data, pr_dtype_size(a->dtype));
    }
  }
  for (int k = 0; k < a->rank; k++) {
    int64_t both; /* both ends at least -dims: the sum cannot wrap below */
    if (s->pads[k] < -a->dims[k] || s->pads[k + a->rank] < -a->dims[k] ||
        (!__builtin_add_overflow(s->pads[k], s->pads[k + a->rank], &both) && both < -a->dims[k]))
      return pr__fail(c, n, PR_ERR_INVALID, "pads crop more than axis %d holds", k);
    if (s->mode == PAD_REFLECT && (s->pads[k] >= a->dims[k] || s->pads[k + a->rank] >= a->dims[k]))
      return pr__fail(c, n, PR_ERR_INVALID, "reflect pad larger than the dimension");
    if (s->mode != PAD_CONSTANT && a->dims[k] == 0 && (s->pads[k] || s->pads[k + a->rank]))
      return pr__fail(c, n, PR_ERR_INVALID, "edge/reflect pad of an empty dimension");
  }
  return PR_OK;
}

static pr_status_t infer_pad(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  pad_state_t s;
  pr_status_t st = pad_params(c, n, &s);
  if (st) return st;
  int64_t d[PR_MAX_RANK];
  for (int k = 0; k < a->rank; k++)
    if (__builtin_add_overflow(a->dims[k], s.pads[k], &d[k]) ||
        __builtin_add_overflow(d[k], s.pads[k + a->rank], &d[k]))
      return pr__fail(c, n, PR_ERR_INVALID, "pads too large for axis %d", k);
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  return PR_OK;
}

static pr_status_t prepare_pad(pr_compile_t *c, pr_node_t *n) {
  pad_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  return pad_params(c, n, s);
}

static void run_pad(pr_exec_t *x, pr_node_t *n) {
  const pad_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int r = a->rank;
  size_t es = pr_dtype_size(a->dtype);
  int64_t numel = pr__value_numel(o);
  int64_t in_st[PR_MAX_RANK], e = 1;
  for (int k = r - 1; k >= 0; k--) in_st[k] = e, e *= a->dims[k];
  const char *in = a->ptr;
  char *out = o->ptr;
#pragma omp parallel for num_threads(x->threads) if (numel > 65536)
  for (int64_t i = 0; i < numel; i++) {
    int64_t rem = i, off = 0;
    bool outside = false;
    for (int k = r - 1; k >= 0; k--) {
      int64_t idx = rem % o->dims[k] - s->pads[k];
      rem /= o->dims[k];
      int64_t len = a->dims[k];
      if (idx < 0 || idx >= len) {
        if (s->mode == PAD_CONSTANT) {
          outside = true;
          break;
        }
        if (s->mode == PAD_EDGE)
          idx = idx < 0 ? 0 : len - 1;
        else if (s->mode == PAD_WRAP)
          idx = ((idx % len) + len) % len;
        else
          idx = idx < 0 ? -idx : 2 * (len - 1) - idx;
      }
      off += idx * in_st[k];
    }
    if (outside)
      memcpy(out + i * (int64_t)es, &s->value, es);
    else
      memcpy(out + i * (int64_t)es, in + off * (int64_t)es, es);
  }
}

const pr_op_t pr__op_pad = {.name = "Pad",
                            .attrs = "mode,pads,value",
                            .min_opset = 2,
                            .max_inputs = 4,
                            .infer = infer_pad,
                            .prepare = prepare_pad,
                            .run = run_pad,
                            .destroy = free};

/* ---- Slice ---- */

typedef struct {
  int rank;
  int64_t start[PR_MAX_RANK], step[PR_MAX_RANK];
} slice_state_t;

static pr_status_t slice_params(pr_compile_t *c, pr_node_t *n, slice_state_t *s,
                                int64_t *out_dims) {
  pr_value_t *a = pr__in(c, n, 0);
  int64_t starts[PR_MAX_RANK], ends[PR_MAX_RANK], axes[PR_MAX_RANK], steps[PR_MAX_RANK];
  int ns, ne, na = -1, nt = -1;
  if (c->opset < 10) {
    const int64_t *v;
    ns = pr__attr_ints(n->m, "starts", &v);
    for (int i = 0; i < ns && i < PR_MAX_RANK; i++) starts[i] = v[i];
    ne = pr__attr_ints(n->m, "ends", &v);
    for (int i = 0; i < ne && i < PR_MAX_RANK; i++) ends[i] = v[i];
    if (pr__attr_find(n->m, "axes")) {
      na = pr__attr_ints(n->m, "axes", &v);
      for (int i = 0; i < na && i < PR_MAX_RANK; i++) axes[i] = v[i];
    }
  } else {
    ns = pr__const_ints(pr__in(c, n, 1), starts, PR_MAX_RANK);
    ne = pr__const_ints(pr__in(c, n, 2), ends, PR_MAX_RANK);
    if (pr__in(c, n, 3)) na = pr__const_ints(pr__in(c, n, 3), axes, PR_MAX_RANK);
    if (pr__in(c, n, 4)) nt = pr__const_ints(pr__in(c, n, 4), steps, PR_MAX_RANK);
    if (ns < 0 || ne < 0 || (pr__in(c, n, 3) && na < 0) || (pr__in(c, n, 4) && nt < 0))
      return pr__need_values(c, n, "starts, ends, axes and steps must be constant");
  }
  if (ns != ne || ns > a->rank || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return pr__fail(c, n, PR_ERR_INVALID, "starts, ends, axes and steps must have one length");
  s->rank = a->rank;
  for (int k = 0; k < a->rank; k++) s->start[k] = 0, s->step[k] = 1, out_dims[k] = a->dims[k];
  bool seen[PR_MAX_RANK] = {0};
  for (int i = 0; i < ns; i++) {
    int ax = na >= 0 ? pr__axis(axes[i], a->rank) : i;
    if (ax < 0 || seen[ax]) return pr__fail(c, n, PR_ERR_INVALID, "bad or repeated axis");
    seen[ax] = true;
    int64_t dim = a->dims[ax], step = nt >= 0 ? steps[i] : 1, st = starts[i], en = ends[i];
    if (step == 0) return pr__fail(c, n, PR_ERR_INVALID, "step is zero");
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    if (step > 0) {
      st = st < 0 ? 0 : st > dim ? dim : st;
      en = en < 0 ? 0 : en > dim ? dim : en;
      /* (n - 1) / step + 1 elements, in unsigned: a step near INT64_MAX must not overflow */
      out_dims[ax] = en > st ? (int64_t)((uint64_t)(en - st - 1) / (uint64_t)step + 1) : 0;
    } else {
      /* ONNX clamps a backward start into [0, dim - 1]: a start before the
       * first element takes the first element (numpy's x[-3::-1] on one
       * element is empty; ONNX's and ONNX Runtime's is that element) */
      st = st < 0 ? 0 : st > dim - 1 ? dim - 1 : st;
      en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
      out_dims[ax] = dim > 0 && st > en
                         ? (int64_t)((uint64_t)(st - en - 1) / ((uint64_t)0 - (uint64_t)step) + 1)
                         : 0;
    }
    s->start[ax] = st;
    s->step[ax] = step;
  }
  return PR_OK;
}

static pr_status_t infer_slice(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  slice_state_t s;
  int64_t d[PR_MAX_RANK];
  pr_status_t st = slice_params(c, n, &s, d);
  if (st) return st;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  return PR_OK;
}

static pr_status_t prepare_slice(pr_compile_t *c, pr_node_t *n) {
  slice_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  int64_t d[PR_MAX_RANK];
  return slice_params(c, n, s, d);
}

static void run_slice(pr_exec_t *x, pr_node_t *n) {
  const slice_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  size_t es = pr_dtype_size(a->dtype);
  int r = a->rank;
  if (!o->nbytes) return;
  int64_t in_st[PR_MAX_RANK], e = 1;
  for (int k = r - 1; k >= 0; k--) in_st[k] = e, e *= a->dims[k];
  int64_t inner = r ? o->dims[r - 1] : 1, rows = pr__value_numel(o) / (inner ? inner : 1);
  const char *in = a->ptr;
  char *out = o->ptr;
#pragma omp parallel for num_threads(x->threads) if (rows * inner > 65536)
  for (int64_t row = 0; row < rows; row++) {
    int64_t rem = row, off = 0;
    for (int k = r - 2; k >= 0; k--) {
      off += (s->start[k] + (rem % o->dims[k]) * s->step[k]) * in_st[k];
      rem /= o->dims[k];
    }
    char *po = out + row * inner * (int64_t)es;
    if (r == 0) {
      memcpy(po, in, es);
    } else if (s->step[r - 1] == 1) {
      memcpy(po, in + (off + s->start[r - 1]) * (int64_t)es, (size_t)inner * es);
    } else {
      for (int64_t j = 0; j < inner; j++)
        memcpy(po + j * (int64_t)es,
               in + (off + s->start[r - 1] + j * s->step[r - 1]) * (int64_t)es, es);
    }
  }
}

const pr_op_t pr__op_slice = {.name = "Slice",
                              .attrs = "starts,ends,axes",
                              .min_opset = 1,
                              .max_inputs = 5,
                              .infer = infer_slice,
                              .prepare = prepare_slice,
                              .run = run_slice,
                              .destroy = free};

/* ---- Expand(input, shape) ---- */

static pr_status_t infer_expand(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int64_t shape[PR_MAX_RANK];
  int ns = pr__const_ints(pr__in(c, n, 1), shape, PR_MAX_RANK);
  if (ns < 0) return pr__need_values(c, n, "shape must be constant");
  int r;
  int64_t d[PR_MAX_RANK];
  if (pr__broadcast_shape(a->rank, a->dims, ns, shape, &r, d) < 0)
    return pr__fail(c, n, PR_ERR_INVALID, "shape does not broadcast");
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static void run_expand(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t st[PR_MAX_RANK], len = pr__value_numel(o);
  size_t es = pr_dtype_size(o->dtype);
  pr__bcast_strides(a, o->rank, o->dims, st);
  for (int64_t i = 0; i < len; i++)
    memcpy((char *)o->ptr + i * (int64_t)es,
           (const char *)a->ptr + pr__bcast_offset(i, o->rank, o->dims, st) * (int64_t)es, es);
}

const pr_op_t pr__op_expand = {.name = "Expand",
                               .attrs = "",
                               .min_opset = 8,
                               .max_inputs = 2,
                               .infer = infer_expand,
                               .run = run_expand};

/* ---- Trilu(input, k) ---- */

static pr_status_t infer_trilu(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *k = pr__in(c, n, 1);
  int64_t kv;
  if (a->rank < 2) return pr__fail(c, n, PR_ERR_INVALID, "input needs rank >= 2");
  if (k && pr__const_ints(k, &kv, 1) != 1)
    return pr__need_values(c, n, "k must be a constant scalar");
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static void run_trilu(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t k = 0;
  if (n->n_in > 1 && n->in[1] >= 0) {
    const pr_value_t *kv = &x->v[n->in[1]];
    k = kv->dtype == PR_DTYPE_INT64 ? *(const int64_t *)kv->ptr : *(const int32_t *)kv->ptr;
  }
  bool upper = pr__attr_int(n->m, "upper", 1) != 0;
  int64_t rows = a->dims[a->rank - 2], cols = a->dims[a->rank - 1];
  int64_t plane = rows * cols, mats = plane > 0 ? pr__value_numel(a) / plane : 0;
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

const pr_op_t pr__op_trilu = {.name = "Trilu",
                              .attrs = "upper",
                              .min_opset = 14,
                              .max_inputs = 2,
                              .infer = infer_trilu,
                              .run = run_trilu};
