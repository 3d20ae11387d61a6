/* Operators that move elements to new positions without looking at them:
 * Tile, DepthToSpace, SpaceToDepth and ReverseSequence, on every element
 * type (by element size).
 *
 * Notes on the design:
 * - Tile's repeats (opset 6 on) or tiles and axis (opset 1) decide the
 *   output shape: they must be constant when the session is compiled, and a
 *   message with "constant" says so otherwise.
 * - ReverseSequence's sequence lengths are data: a length outside [0, T] is
 *   invalid ONNX, refused at compile time when the lengths are constant and
 *   at run time otherwise (the run fails naming the node, as in ONNX
 *   Runtime), before anything is read or written. */
#include <string.h>

#include "engine/ops/ops.h"

static inline void copy_elem(char *dst, const char *src, size_t es) {
  switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
  }
}

/* ---- Tile ---- */

static pr_status_t tile_repeats(pr_compile_t *c, pr_node_t *n, int64_t *rep) {
  pr_value_t *a = pr__in(c, n, 0);
  for (int k = 0; k < a->rank; k++) rep[k] = 1;
  if (c->opset < 6) {
    pr_value_t *tiles = pr__in(c, n, 1), *axis = pr__in(c, n, 2);
    int64_t t, ax;
    if (!tiles || !axis) return pr__fail(c, n, PR_ERR_INVALID, "needs tiles and axis");
    if (pr__const_ints(tiles, &t, 1) != 1 || pr__const_ints(axis, &ax, 1) != 1)
      return pr__need_values(c, n, "tiles and axis must be constant integer scalars");
    int k = pr__axis(ax, a->rank);
    if (k < 0 || a->rank == 0) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
    rep[k] = t;
  } else {
    pr_value_t *r = pr__in(c, n, 1);
    if (!r) return pr__fail(c, n, PR_ERR_INVALID, "needs repeats");
    if (r->dtype != PR_DTYPE_INT64 || r->rank != 1)
      return pr__fail(c, n, PR_ERR_INVALID, "repeats must be a 1-D int64 tensor");
    if (r->dims[0] != a->rank)
      return pr__fail(c, n, PR_ERR_INVALID, "repeats has %lld entries for rank %d",
                      (long long)r->dims[0], a->rank);
    if (pr__const_ints(r, rep, PR_MAX_RANK) != a->rank)
      return pr__need_values(c, n, "repeats decides the output shape: it must be constant");
  }
  for (int k = 0; k < a->rank; k++)
    if (rep[k] < 0) return pr__fail(c, n, PR_ERR_INVALID, "negative repeat on axis %d", k);
  return PR_OK;
}

static pr_status_t infer_tile(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  int64_t rep[PR_MAX_RANK], d[PR_MAX_RANK];
  pr_status_t st = tile_repeats(c, n, rep);
  if (st) return st;
  for (int k = 0; k < a->rank; k++)
    if (__builtin_mul_overflow(a->dims[k], rep[k], &d[k]))
      return pr__fail(c, n, PR_ERR_INVALID, "output too large");
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, d);
  return PR_OK;
}

/* Each output row (the last axis) is the input row it maps to, repeated. */
static void run_tile(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t es = (int64_t)pr_dtype_size(a->dtype), numel = pr__value_numel(o);
  char *out = o->ptr;
  const char *in = a->ptr;
  if (numel == 0) return;
  if (a->rank == 0) {
    memcpy(out, in, (size_t)es);
    return;
  }
  int r = a->rank;
  int64_t in_st[PR_MAX_RANK], e = 1;
  for (int k = r - 1; k >= 0; k--) in_st[k] = e, e *= a->dims[k];
  int64_t in_row = a->dims[r - 1], out_row = o->dims[r - 1], rows = numel / out_row;
#pragma omp parallel for num_threads(x->threads) if (numel > 65536)
  for (int64_t i = 0; i < rows; i++) {
    int64_t rem = i, off = 0;
    for (int k = r - 2; k >= 0; k--) {
      off += (rem % o->dims[k]) % a->dims[k] * in_st[k];
      rem /= o->dims[k];
    }
    char *dst = out + i * out_row * es;
    for (int64_t j = 0; j < out_row; j += in_row)
      memcpy(dst + j * es, in + off * es, (size_t)(in_row * es));
  }
}

const pr_op_t pr__op_tile = {
    .name = "Tile", .min_opset = 1, .max_inputs = 3, .infer = infer_tile, .run = run_tile};

/* ---- DepthToSpace / SpaceToDepth ---- */

/* [N, C, H, W] with blocks of b x b: the depth side has C = c * b * b
 * channels, the space side c channels of H * b x W * b. `crd`: the depth
 * channel of (c, i, j) is c * b * b + i * b + j, otherwise (DCR, and every
 * SpaceToDepth) (i * b + j) * c + c. */
typedef struct {
  int64_t b, n, c, h, w; /* h, w: the depth side's */
  bool crd;
} d2s_state_t;

static pr_status_t d2s_params(pr_compile_t *c, pr_node_t *n, bool to_space, d2s_state_t *s) {
  pr_value_t *a = pr__in(c, n, 0);
  if (a->rank != 4) return pr__fail(c, n, PR_ERR_INVALID, "input must be 4-D");
  s->b = pr__attr_int(n->m, "blocksize", 0);
  if (s->b < 1) return pr__fail(c, n, PR_ERR_INVALID, "blocksize must be positive");
  const char *mode = pr__attr_string(n->m, "mode", "DCR");
  if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
    return pr__fail(c, n, PR_ERR_INVALID, "mode '%s'", mode);
  s->crd = to_space && !strcmp(mode, "CRD");
  int64_t bb;
  if (__builtin_mul_overflow(s->b, s->b, &bb))
    return pr__fail(c, n, PR_ERR_INVALID, "blocksize too large");
  s->n = a->dims[0];
  if (to_space) {
    if (a->dims[1] % bb)
      return pr__fail(c, n, PR_ERR_INVALID, "channels not divisible by blocksize^2");
    s->c = a->dims[1] / bb, s->h = a->dims[2], s->w = a->dims[3];
  } else {
    int64_t out_c;
    if (a->dims[2] % s->b || a->dims[3] % s->b || __builtin_mul_overflow(a->dims[1], bb, &out_c))
      return pr__fail(c, n, PR_ERR_INVALID, "height or width not divisible by blocksize");
    s->c = a->dims[1], s->h = a->dims[2] / s->b, s->w = a->dims[3] / s->b;
  }
  return PR_OK;
}

static pr_status_t infer_d2s_common(pr_compile_t *c, pr_node_t *n, bool to_space) {
  pr_value_t *a = pr__in(c, n, 0);
  d2s_state_t s = {0};
  pr_status_t st = d2s_params(c, n, to_space, &s);
  if (st) return st;
  int64_t d[4] = {s.n, s.c, s.h * s.b, s.w * s.b};
  if (!to_space) d[1] = s.c * s.b * s.b, d[2] = s.h, d[3] = s.w;
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, 4, d);
  return PR_OK;
}

static pr_status_t infer_d2s(pr_compile_t *c, pr_node_t *n) {
  return infer_d2s_common(c, n, true);
}
static pr_status_t infer_s2d(pr_compile_t *c, pr_node_t *n) {
  return infer_d2s_common(c, n, false);
}

static pr_status_t prepare_d2s_common(pr_compile_t *c, pr_node_t *n, bool to_space) {
  d2s_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  return d2s_params(c, n, to_space, s);
}
static pr_status_t prepare_d2s(pr_compile_t *c, pr_node_t *n) {
  return prepare_d2s_common(c, n, true);
}
static pr_status_t prepare_s2d(pr_compile_t *c, pr_node_t *n) {
  return prepare_d2s_common(c, n, false);
}

/* One row (n, c, y) of the space side at a time: its W * b elements come
 * from row y / b of b depth channels. */
static void run_d2s_common(pr_exec_t *x, pr_node_t *n, bool to_space) {
  const d2s_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]];
  size_t es = pr_dtype_size(a->dtype);
  const char *in = a->ptr;
  char *out = pr__xout(x, n, 0);
  int64_t b = s->b, C = s->c, H = s->h, W = s->w, Ws = W * b;
  int64_t rows = s->n * C * H * b, plane = H * W;
#pragma omp parallel for num_threads(x->threads) if (rows * Ws > 65536)
  for (int64_t r = 0; r < rows; r++) {
    int64_t y = r % (H * b), ch = r / (H * b) % C, bn = r / (H * b * C);
    int64_t i = y % b, hy = y / b;
    for (int64_t xs = 0; xs < Ws; xs++) {
      int64_t j = xs % b, wx = xs / b;
      int64_t dc = s->crd ? ch * b * b + i * b + j : (i * b + j) * C + ch;
      int64_t depth_off = (bn * C * b * b + dc) * plane + hy * W + wx;
      int64_t space_off = r * Ws + xs;
      if (to_space)
        copy_elem(out + space_off * (int64_t)es, in + depth_off * (int64_t)es, es);
      else
        copy_elem(out + depth_off * (int64_t)es, in + space_off * (int64_t)es, es);
    }
  }
}

static void run_d2s(pr_exec_t *x, pr_node_t *n) {
  run_d2s_common(x, n, true);
}
static void run_s2d(pr_exec_t *x, pr_node_t *n) {
  run_d2s_common(x, n, false);
}

const pr_op_t pr__op_depth_to_space = {.name = "DepthToSpace",
                                       .attrs = "blocksize,mode",
                                       .min_opset = 1,
                                       .max_inputs = 1,
                                       .infer = infer_d2s,
                                       .prepare = prepare_d2s,
                                       .run = run_d2s,
                                       .destroy = free};
const pr_op_t pr__op_space_to_depth = {.name = "SpaceToDepth",
                                       .attrs = "blocksize",
                                       .min_opset = 1,
                                       .max_inputs = 1,
                                       .infer = infer_s2d,
                                       .prepare = prepare_s2d,
                                       .run = run_s2d,
                                       .destroy = free};

/* ---- ReverseSequence ---- */

static pr_status_t infer_reverse_sequence(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *lens = pr__in(c, n, 1);
  if (!lens) return pr__fail(c, n, PR_ERR_INVALID, "needs sequence_lens");
  if (a->rank < 2) return pr__fail(c, n, PR_ERR_INVALID, "input rank under 2");
  int64_t ba = pr__attr_int(n->m, "batch_axis", 1), ta = pr__attr_int(n->m, "time_axis", 0);
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return pr__fail(c, n, PR_ERR_INVALID, "batch_axis and time_axis must be 0 and 1");
  if (lens->dtype != PR_DTYPE_INT64 || lens->rank != 1 || lens->dims[0] != a->dims[ba])
    return pr__fail(c, n, PR_ERR_INVALID, "sequence_lens must be int64 of the batch size");
  if (lens->is_const)
    for (int64_t i = 0; i < lens->dims[0]; i++) {
      int64_t l = ((const int64_t *)lens->data)[i];
      if (l < 0 || l > a->dims[ta])
        return pr__fail(c, n, PR_ERR_INVALID, "sequence length %lld out of range [0, %lld]",
                        (long long)l, (long long)a->dims[ta]);
    }
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

static void run_reverse_sequence(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *lv = &x->v[n->in[1]];
  int ba = (int)pr__attr_int(n->m, "batch_axis", 1), ta = 1 - ba;
  int64_t inner = (int64_t)pr_dtype_size(a->dtype);
  for (int k = 2; k < a->rank; k++) inner *= a->dims[k];
  int64_t T = a->dims[ta], B = a->dims[ba];
  /* byte stride of one step along each axis */
  int64_t st_t = ta == 0 ? B * inner : inner, st_b = ba == 0 ? T * inner : inner;
  const int64_t *lens = lv->ptr;
  for (int64_t bi = 0; bi < B; bi++)
    if (lens[bi] < 0 || lens[bi] > T) {
      pr__run_fail(x, n, PR_ERR_INVALID, "sequence length %lld out of range [0, %lld]",
                   (long long)lens[bi], (long long)T);
      return;
    }
  const char *in = a->ptr;
  char *out = pr__xout(x, n, 0);
#pragma omp parallel for num_threads(x->threads) if (T * B * inner > 65536)
  for (int64_t bi = 0; bi < B; bi++) {
    int64_t len = lens[bi] < 0 ? 0 : lens[bi] > T ? T : lens[bi];
    for (int64_t t = 0; t < T; t++) {
      int64_t src = t < len ? len - 1 - t : t;
      memcpy(out + bi * st_b + t * st_t, in + bi * st_b + src * st_t, (size_t)inner);
    }
  }
}

const pr_op_t pr__op_reverse_sequence = {.name = "ReverseSequence",
                                         .attrs = "batch_axis,time_axis",
                                         .min_opset = 10,
                                         .max_inputs = 2,
                                         .infer = infer_reverse_sequence,
                                         .run = run_reverse_sequence};
