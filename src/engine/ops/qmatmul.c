/* QLinearMatMul and MatMulInteger: 8-bit matrix products (numpy matmul
 * shapes, batch broadcasting).
 *
 *   MatMulInteger: y(int32) = (a - a_zp)(b - b_zp)
 *   QLinearMatMul: y = saturate(round((acc + bias) * a_scale * b_scale /
 *                               y_scale) + y_zp)
 *
 * a_zp per tensor, b_scale and b_zp per tensor or per column. Two kernels,
 * as in qconv.c: oneDNN's int8 matmul over the stacked rows of a when b is
 * a constant matrix, the parameters are constant and b - b_zp fits an int8
 * (requantization scales, zero points and fused activations as attributes);
 * else a plain int32 loop, exact. MatMulInteger takes the oneDNN kernel
 * too (int32 out, no scales) with a's zero point set at run time, so that
 * the dynamic form (DynamicQuantizeLinear -> MatMulInteger, whose zero
 * point is computed per run) runs on it. A ninth input, a bias in accumulator
 * units (INT32 or FLOAT), is the QDQ fuser's (fuse_qdq.c): a folded Gemm or
 * MatMul with its bias Add. */
#include <string.h>

#include "base/util.h"
#include "engine/ops/dnnl_util.h"
#include "engine/ops/matmul_shape.h"
#include "engine/ops/quant_util.h"

typedef struct {
  int a, sa, za, b, sb, zb, sy, zy, bias;
} qmm_io_t;

static const qmm_io_t QLINEAR_IO = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const qmm_io_t INTEGER_IO = {0, -1, 2, 1, -1, 3, -1, -1, -1};

typedef struct {
  qmm_io_t io;
  pr_mm_shape_t mm; /* the product's geometry */
  int64_t n_sb, n_zb;
  bool dnnl;
  pr_dnnl_prim_t prim;
  void *w_buf;
  pr_model_t *w_cache;
  float *bias;
  bool za_runtime; /* MatMulInteger on oneDNN with an a zero point: */
  int32_t za;      /* its value, set before each run */
} qmm_state_t;

static void destroy_qmm(void *p) {
  qmm_state_t *s = p;
  pr__dnnl_prim_destroy(&s->prim);
  if (s->w_buf) pr__dnnl_weights_release(s->w_buf, s->w_cache);
  pr__free(s->bias);
  free(s);
}

static pr_value_t *param(pr_compile_t *c, const pr_node_t *n, int k) {
  return k >= 0 ? pr__in(c, n, k) : NULL;
}

/* numpy matmul shapes of a [.., M, K] and b [.., K, N] (1-D promoted). */
static pr_status_t qmm_shape(pr_compile_t *c, pr_node_t *n, qmm_state_t *s, int *ro, int64_t *od) {
  pr_value_t *a = pr__in(c, n, s->io.a), *b = pr__in(c, n, s->io.b);
  if (!a || !b) return pr__fail(c, n, PR_ERR_INVALID, "needs A and B");
  if (!pr__is_q8(a->dtype) || !pr__is_q8(b->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "A and B of types UINT8 or INT8");
  return pr__mm_shape(c, n, a, b, &s->mm, ro, od);
}

static pr_status_t check_params(pr_compile_t *c, pr_node_t *n, qmm_state_t *s, pr_dtype_t *out) {
  const qmm_io_t *io = &s->io;
  pr_value_t *a = pr__in(c, n, io->a), *b = pr__in(c, n, io->b), *bias = param(c, n, io->bias);
  int64_t one;
  bool ql = io->sa >= 0;
  int64_t cols = pr__in(c, n, io->b)->rank >= 2 ? s->mm.N : 0;
  pr_status_t st = pr__quant_param(c, n, io->za, true, a->dtype, 0, false, &one);
  if (!st) st = pr__quant_param(c, n, io->zb, true, b->dtype, cols, false, &s->n_zb);
  if (!st && ql) st = pr__quant_param(c, n, io->sa, false, 0, 0, true, &one);
  if (!st && ql) st = pr__quant_param(c, n, io->sb, false, 0, cols, true, &s->n_sb);
  if (!st && ql) st = pr__quant_param(c, n, io->sy, false, 0, 0, true, &one);
  if (!st && ql) st = pr__quant_param(c, n, io->zy, true, 0, 0, false, &one);
  if (st) return st;
  if (bias && ((bias->dtype != PR_DTYPE_INT32 && bias->dtype != PR_DTYPE_FLOAT) ||
               pr__value_numel(bias) != s->mm.N))
    return pr__fail(c, n, PR_ERR_INVALID, "bias of %lld elements", (long long)s->mm.N);
  pr_value_t *zy = param(c, n, io->zy);
  *out = !ql ? PR_DTYPE_INT32 : zy ? zy->dtype : PR_DTYPE_UINT8;
  return PR_OK;
}

static const qmm_io_t *io_of(const pr_node_t *n) {
  return strcmp(n->op->name, "MatMulInteger") ? &QLINEAR_IO : &INTEGER_IO;
}

static pr_status_t infer_qmm(pr_compile_t *c, pr_node_t *n) {
  qmm_state_t s = {.io = *io_of(n)};
  int r = 0;
  int64_t d[PR_MAX_RANK + 2];
  pr_dtype_t t = PR_DTYPE_FLOAT;
  pr_status_t st = qmm_shape(c, n, &s, &r, d);
  if (!st) st = check_params(c, n, &s, &t);
  if (st) return st;
  pr__value_set_shape(pr__out(c, n, 0), t, r, d);
  n->flops = 2.0 * (double)s.mm.batch * (double)s.mm.M * (double)s.mm.N * (double)s.mm.K;
  return PR_OK;
}

/* ---- the oneDNN kernel ---- */

static bool dnnl_fits(pr_compile_t *c, const pr_node_t *n, const qmm_state_t *s) {
  const qmm_io_t *io = &s->io;
  bool integer = io->sa < 0; /* MatMulInteger: a's zero point may be computed */
  const int ks[] = {io->sa, integer ? -1 : io->za, io->b, io->sb, io->zb, io->sy, io->zy, io->bias};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    const pr_value_t *v = param(c, n, ks[i]);
    if (v && !v->is_const) return false;
  }
  return pr__in(c, n, io->b)->rank == 2 && pr__in(c, n, io->a)->rank >= 2 && s->mm.K > 0 &&
         s->mm.N > 0 && pr__value_numel(pr__in(c, n, io->a)) > 0;
}

/* MatMulInteger's attributes: a's zero point at run time (when it has
 * one), no scales. */
static pr_status_t integer_attr(pr_compile_t *c, pr_node_t *n, qmm_state_t *s,
                                dnnl_primitive_attr_t *attr) {
  if (dnnl_primitive_attr_create(attr) != dnnl_success) return PR_ERR_NOMEM;
  s->za_runtime = param(c, n, s->io.za) != NULL;
  if (s->za_runtime && dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_SRC, 1, 0,
                                                           &DNNL_RUNTIME_S32_VAL) != dnnl_success) {
    dnnl_primitive_attr_destroy(*attr);
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "oneDNN run-time zero point");
  }
  return PR_OK;
}

static pr_status_t qmm_pd(pr_compile_t *c, pr_node_t *n, qmm_state_t *s, dnnl_memory_desc_t *mds,
                          dnnl_primitive_desc_t *pd) {
  const qmm_io_t *io = &s->io;
  const pr_value_t *a = pr__in(c, n, io->a), *za = param(c, n, io->za), *o = pr__out(c, n, 0);
  const pr_value_t *zy = param(c, n, io->zy), *sb = param(c, n, io->sb);
  int64_t rows = pr__value_numel(a) / s->mm.K;
  dnnl_dims_t ad = {rows, s->mm.K}, wd = {s->mm.K, s->mm.N}, od = {rows, s->mm.N},
              bd = {1, s->mm.N};
  /* mds: src, weights (any), weights plain, dst, bias */
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&mds[0], 2, ad, pr__dnnl_type(a->dtype), dnnl_ab));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&mds[1], 2, wd, dnnl_s8, dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&mds[2], 2, wd, dnnl_s8, dnnl_ab));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&mds[3], 2, od, pr__dnnl_type(o->dtype), dnnl_ab));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&mds[4], 2, bd, dnnl_f32, dnnl_ab));
  dnnl_matmul_desc_t md;
  PR_DNNL(c, n, dnnl_matmul_desc_init(&md, &mds[0], &mds[1], s->bias ? &mds[4] : NULL, &mds[3]));
  dnnl_primitive_attr_t attr;
  pr_status_t st = PR_OK;
  if (io->sa < 0) {
    st = integer_attr(c, n, s, &attr);
  } else {
    float *scales = malloc(sizeof(float) * (size_t)s->n_sb);
    if (!scales) return PR_ERR_NOMEM;
    pr__requant_scales(*(const float *)param(c, n, io->sa)->data, sb->data, s->n_sb,
                       param(c, n, io->sy)->data, scales);
    st = pr__q8_attr(c, n, scales, s->n_sb, 1, pr__zp_at(za ? za->data : NULL, a->dtype, 0),
                     pr__zp_at(zy ? zy->data : NULL, zy ? zy->dtype : PR_DTYPE_UINT8, 0), &attr);
    free(scales);
  }
  if (st) return st;
  *pd = pr__dnnl_pd_first(&md, attr, c->engine, NULL, NULL);
  dnnl_primitive_attr_destroy(attr);
  return PR_OK;
}

static pr_status_t make_bias(pr_compile_t *c, pr_node_t *n, qmm_state_t *s) {
  const pr_value_t *b = param(c, n, s->io.bias);
  if (!b) return PR_OK;
  if (!(s->bias = pr__aligned_alloc(sizeof(float) * (size_t)s->mm.N))) return PR_ERR_NOMEM;
  for (int64_t j = 0; j < s->mm.N; j++)
    s->bias[j] = b->dtype == PR_DTYPE_FLOAT ? ((const float *)b->data)[j]
                                            : (float)((const int32_t *)b->data)[j];
  return PR_OK;
}

/* b - b_zp (per column: zp of element i is zp[i % N]) as s8 in layout
 * w_md; *fits false when a difference leaves the int8 range. */
static pr_status_t make_weights(pr_compile_t *c, pr_node_t *n, qmm_state_t *s,
                                const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *w_md,
                                bool *fits) {
  const pr_value_t *b = pr__in(c, n, s->io.b), *zb = param(c, n, s->io.zb);
  *fits = true;
  if ((s->w_buf = pr__dnnl_weights_cached(c, n, 2, w_md, &s->w_cache))) return PR_OK;
  int64_t numel = s->mm.K * s->mm.N;
  int8_t *w8 = pr__aligned_alloc((size_t)numel);
  if (!w8) return PR_ERR_NOMEM;
  /* per column: transpose the test (row k of N elements, zp j) */
  for (int64_t k = 0; k < s->mm.K && *fits; k++)
    for (int64_t j = 0; j < s->mm.N && *fits; j++) {
      int64_t i = k * s->mm.N + j;
      const void *zp = zb ? (const char *)zb->data + (s->n_zb > 1 ? j : 0) : NULL;
      *fits = pr__weights_to_s8((const char *)b->data + i, b->dtype, 1, zp,
                                zb ? zb->dtype : b->dtype, 1, 1, w8 + i);
    }
  *fits = *fits && pr__q8_dnnl_exact_for(pr__in(c, n, s->io.a)->dtype, w8, numel);
  pr_status_t st = PR_OK;
  if (*fits) st = pr__dnnl_weights_make(c, n, 2, w8, plain, w_md, &s->w_buf, &s->w_cache);
  pr__free(w8);
  return st;
}

static pr_status_t prepare_dnnl(pr_compile_t *c, pr_node_t *n, qmm_state_t *s) {
  if (!dnnl_fits(c, n, s)) return PR_OK;
  dnnl_memory_desc_t mds[5];
  dnnl_primitive_desc_t pd = NULL;
  pr_status_t st = make_bias(c, n, s);
  if (!st) st = qmm_pd(c, n, s, mds, &pd);
  if (st || !pd) return st;
  dnnl_memory_desc_t w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  bool fits;
  if ((st = make_weights(c, n, s, &mds[2], &w_md, &fits)) || !fits) {
    dnnl_primitive_desc_destroy(pd);
    return st;
  }
  if ((st = pr__dnnl_prim_init(c, n, &s->prim, pd))) return st;
  if ((st = pr__require_plain(c, n, s->io.a))) return st;
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_SRC, n->in[s->io.a], NULL, &mds[0]);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_WEIGHTS, -1, s->w_buf, &w_md);
  if (s->bias) pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_BIAS, -1, s->bias, &mds[4]);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_DST, n->out[0], NULL, &mds[3]);
  if (s->za_runtime) {
    dnnl_memory_desc_t zmd;
    dnnl_dims_t one = {1};
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&zmd, 1, one, dnnl_s32, dnnl_a));
    pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, -1, &s->za, &zmd);
  }
  s->dnnl = true;
  return PR_OK;
}

static pr_status_t prepare_qmm(pr_compile_t *c, pr_node_t *n) {
  qmm_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->io = *io_of(n);
  int r;
  int64_t d[PR_MAX_RANK + 2];
  pr_dtype_t t;
  pr_status_t st = qmm_shape(c, n, s, &r, d);
  if (!st) st = check_params(c, n, s, &t);
  if (!st) st = prepare_dnnl(c, n, s);
  if (st || s->dnnl) return st;
  if (!pr__q8_post_relu_only(n))
    return pr__fail(c, n, PR_ERR_INTERNAL, "fused operations on the plain int8 matmul");
  return PR_OK;
}

/* ---- the plain kernel ---- */

static inline int32_t ld8(const void *p, bool is_signed, int64_t i) {
  return is_signed ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

static const void *xptr(pr_exec_t *x, const pr_node_t *n, int k) {
  return k >= 0 && k < n->n_in && n->in[k] >= 0 ? x->v[n->in[k]].ptr : NULL;
}

static void run_plain(pr_exec_t *x, pr_node_t *n, const qmm_state_t *s) {
  const qmm_io_t *io = &s->io;
  const pr_value_t *av = &x->v[n->in[io->a]], *bv = &x->v[n->in[io->b]], *o = &x->v[n->out[0]];
  const pr_value_t *biv = xptr(x, n, io->bias) ? &x->v[n->in[io->bias]] : NULL;
  const float *sa = xptr(x, n, io->sa), *sb = xptr(x, n, io->sb), *sy = xptr(x, n, io->sy);
  bool as = av->dtype == PR_DTYPE_INT8, bs = bv->dtype == PR_DTYPE_INT8;
  int32_t za = pr__zp_at(xptr(x, n, io->za), av->dtype, 0);
  const void *zb = xptr(x, n, io->zb);
  float lo = 0, hi = 0, zy = (float)pr__zp_at(xptr(x, n, io->zy), o->dtype, 0);
  if (sa) pr__q8_range(o->dtype, &lo, &hi);
  float floor_v = n->post.n_eltwise ? 0.f : -INFINITY; /* a fused Relu */
  int64_t M = s->mm.M, N = s->mm.N, K = s->mm.K;
#pragma omp parallel for num_threads(x->threads) if (s->mm.batch * M > 1)
  for (int64_t bm = 0; bm < s->mm.batch * M; bm++) {
    int64_t i = bm / M, m = bm % M;
    int64_t oa = pr__bcast_offset(i, s->mm.rank, s->mm.bdims, s->mm.sa) + m * K;
    int64_t ob = pr__bcast_offset(i, s->mm.rank, s->mm.bdims, s->mm.sb);
    for (int64_t j = 0; j < N; j++) {
      int32_t zbj = pr__zp_at(zb, bv->dtype, s->n_zb > 1 ? j : 0);
      int64_t sum = 0; /* wrapped to int32 below, as ONNX Runtime's accumulator */
      for (int64_t k = 0; k < K; k++)
        sum += (ld8(av->ptr, as, oa + k) - za) * (ld8(bv->ptr, bs, ob + k * N + j) - zbj);
      int32_t acc = (int32_t)(uint32_t)sum;
      int64_t at = bm * N + j;
      if (!sa) {
        ((int32_t *)o->ptr)[at] = acc;
        continue;
      }
      float bias = 0.f;
      if (biv && biv->dtype == PR_DTYPE_INT32)
        acc = (int32_t)((uint32_t)acc + (uint32_t)((const int32_t *)biv->ptr)[j]);
      else if (biv)
        bias = ((const float *)biv->ptr)[j];
      float scale = (sa[0] * sb[s->n_sb > 1 ? j : 0]) / sy[0];
      pr__q8_store(o->ptr, o->dtype, at,
                   pr__quantize(fmaxf(((float)acc + bias) * scale, floor_v), zy, lo, hi));
    }
  }
}

static void run_qmm(pr_exec_t *x, pr_node_t *n) {
  qmm_state_t *s = n->state;
  if (s->za_runtime) s->za = pr__zp_at(xptr(x, n, s->io.za), x->v[n->in[s->io.a]].dtype, 0);
  if (s->dnnl)
    pr__dnnl_prim_run(x, &s->prim);
  else
    run_plain(x, n, s);
}

const pr_op_t pr__op_qlinear_matmul = {.name = "QLinearMatMul",
                                       .attrs = "",
                                       .min_opset = 10,
                                       .max_inputs = 8,
                                       .infer = infer_qmm,
                                       .prepare = prepare_qmm,
                                       .run = run_qmm,
                                       .destroy = destroy_qmm};

const pr_op_t pr__op_matmul_integer = {.name = "MatMulInteger",
                                       .attrs = "",
                                       .min_opset = 10,
                                       .max_inputs = 4,
                                       .infer = infer_qmm,
                                       .prepare = prepare_qmm,
                                       .run = run_qmm,
                                       .destroy = destroy_qmm};
