/* QLinearConv and ConvInteger: 8-bit convolutions.
 *
 *   ConvInteger: y(int32) = conv(x - x_zp, w - w_zp)
 *   QLinearConv: y = saturate(round((acc + B) * x_scale * w_scale / y_scale)
 *                             + y_zp),  acc = conv(x - x_zp, w - w_zp)
 *
 * x_zp per tensor, w_scale and w_zp per tensor or per output channel; the
 * padding holds x_zp (a real zero). Two kernels:
 * - oneDNN's int8 convolution, when the weights, scales and zero points are
 *   constant and w - w_zp fits an int8 (always so for INT8 weights with a
 *   zero w_zp, the usual case): w - w_zp as its s8 weights, the source and
 *   destination zero points and the per-channel requantization scales as
 *   attributes, B (in accumulator units) as an f32 bias, activations in the
 *   kernel's layout; fused activations (the QDQ fuser's) as post-ops.
 * - a plain loop in int32 for everything else (weights or parameters known
 *   only at run time, UINT8 weights whose w - w_zp leave the int8 range,
 *   ConvInteger), exact.
 * B may also be FLOAT in accumulator units: the QDQ fuser (fuse_qdq.c)
 * gives a folded float bias that way. */
#include <string.h>

#include "base/util.h"
#include "engine/ops/dnnl_util.h"
#include "engine/ops/quant_util.h"

pr_status_t pr__window_geom(pr_compile_t *c, pr_node_t *n, const int64_t *in_sp, int sp,
                            const int64_t *kernel, bool ceil_mode, int64_t *stride, int64_t *dil,
                            int64_t *pad_l, int64_t *pad_r, int64_t *out_sp);

/* Input indices of the parameters (-1: the op has none). */
typedef struct {
  int x, sx, zx, w, sw, zw, sy, zy, b;
} qconv_io_t;

static const qconv_io_t QLINEAR_IO = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const qconv_io_t INTEGER_IO = {0, -1, 2, 1, -1, 3, -1, -1, -1};

/* Geometry in three spatial dims (the missing ones of size 1). */
typedef struct {
  int sp;
  int64_t N, C, M, group, in[3], out[3], k[3], stride[3], dil[3], pad_l[3], pad_r[3];
} qgeom_t;

typedef struct {
  qconv_io_t io;
  qgeom_t g;
  int64_t n_sw, n_zw; /* per-tensor 1, or M */
  /* oneDNN kernel */
  bool dnnl;
  pr_dnnl_prim_t prim;
  void *w_buf;
  pr_model_t *w_cache;
  float *bias;
} qconv_state_t;

static void destroy_qconv(void *p) {
  qconv_state_t *s = p;
  pr__dnnl_prim_destroy(&s->prim);
  if (s->w_buf) pr__dnnl_weights_release(s->w_buf, s->w_cache);
  pr__free(s->bias);
  free(s);
}

static const qconv_io_t *io_of(const pr_node_t *n) {
  return strcmp(n->op->name, "ConvInteger") ? &QLINEAR_IO : &INTEGER_IO;
}

static pr_value_t *param(pr_compile_t *c, const pr_node_t *n, int k) {
  return k >= 0 ? pr__in(c, n, k) : NULL;
}

static pr_status_t qconv_geom(pr_compile_t *c, pr_node_t *n, qgeom_t *g) {
  const qconv_io_t *io = io_of(n);
  pr_value_t *x = pr__in(c, n, io->x), *w = pr__in(c, n, io->w);
  if (!x || !w) return pr__fail(c, n, PR_ERR_INVALID, "needs X and W");
  if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "1 to 3 spatial dimensions, W of the same rank");
  memset(g, 0, sizeof *g);
  g->sp = x->rank - 2;
  g->N = x->dims[0], g->C = x->dims[1], g->M = w->dims[0];
  g->group = pr__attr_int(n->m, "group", 1);
  if (g->C < 1 || g->M < 1) return pr__fail(c, n, PR_ERR_INVALID, "no channels");
  if (g->group < 1 || g->C % g->group || g->M % g->group || w->dims[1] != g->C / g->group)
    return pr__fail(c, n, PR_ERR_INVALID, "channels do not match group %lld", (long long)g->group);
  const int64_t *ks;
  int cnt = pr__attr_ints(n->m, "kernel_shape", &ks);
  if (cnt && cnt != g->sp) return pr__fail(c, n, PR_ERR_INVALID, "kernel_shape size");
  for (int k = 0; k < 3; k++) {
    bool on = k < g->sp;
    g->k[k] = on ? w->dims[k + 2] : 1;
    if (cnt && on && ks[k] != g->k[k])
      return pr__fail(c, n, PR_ERR_INVALID, "kernel_shape differs from W");
    g->in[k] = on ? x->dims[k + 2] : 1;
    g->out[k] = g->stride[k] = g->dil[k] = 1;
  }
  return pr__window_geom(c, n, x->dims + 2, g->sp, g->k, false, g->stride, g->dil, g->pad_l,
                         g->pad_r, g->out);
}

/* Types and sizes of every input; *out_type the output's. */
static pr_status_t check_inputs(pr_compile_t *c, pr_node_t *n, const qgeom_t *g, qconv_state_t *s,
                                pr_dtype_t *out_type) {
  const qconv_io_t *io = io_of(n);
  pr_value_t *x = pr__in(c, n, io->x), *w = pr__in(c, n, io->w), *b = param(c, n, io->b);
  if (!pr__is_q8(x->dtype) || !pr__is_q8(w->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "X and W of types UINT8 or INT8");
  int64_t one;
  bool ql = io->sx >= 0;
  pr_status_t st = pr__quant_param(c, n, io->zx, true, x->dtype, 0, false, &one);
  if (!st) st = pr__quant_param(c, n, io->zw, true, w->dtype, g->M, false, &s->n_zw);
  if (!st && ql) st = pr__quant_param(c, n, io->sx, false, 0, 0, true, &one);
  if (!st && ql) st = pr__quant_param(c, n, io->sw, false, 0, g->M, true, &s->n_sw);
  if (!st && ql) st = pr__quant_param(c, n, io->sy, false, 0, 0, true, &one);
  if (!st && ql) st = pr__quant_param(c, n, io->zy, true, 0, 0, false, &one);
  if (st) return st;
  if (b && ((b->dtype != PR_DTYPE_INT32 && b->dtype != PR_DTYPE_FLOAT) || b->rank != 1 ||
            b->dims[0] != g->M))
    return pr__fail(c, n, PR_ERR_INVALID, "B must be INT32 of %lld elements", (long long)g->M);
  pr_value_t *zy = param(c, n, io->zy);
  *out_type = !ql ? PR_DTYPE_INT32 : zy ? zy->dtype : PR_DTYPE_UINT8;
  return PR_OK;
}

static pr_status_t infer_qconv(pr_compile_t *c, pr_node_t *n) {
  qgeom_t g;
  qconv_state_t s = {0};
  pr_dtype_t t;
  pr_status_t st = qconv_geom(c, n, &g);
  if (!st) st = check_inputs(c, n, &g, &s, &t);
  if (st) return st;
  int64_t d[5] = {g.N, g.M};
  for (int k = 0; k < g.sp; k++) d[k + 2] = g.out[k];
  pr__value_set_shape(pr__out(c, n, 0), t, g.sp + 2, d);
  double macs = (double)pr__value_numel(pr__out(c, n, 0)) * (double)(g.C / g.group);
  for (int k = 0; k < 3; k++) macs *= (double)g.k[k];
  n->flops = 2 * macs;
  return PR_OK;
}

/* ---- the oneDNN kernel ---- */

static bool all_const(pr_compile_t *c, const pr_node_t *n) {
  const qconv_io_t *io = io_of(n);
  const int ks[] = {io->sx, io->zx, io->w, io->sw, io->zw, io->sy, io->zy, io->b};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    const pr_value_t *v = param(c, n, ks[i]);
    if (v && !v->is_const) return false;
  }
  return true;
}

/* Constant weights as s8 w - w_zp in the kernel's layout w_md (false: some
 * do not fit, no kernel). */
static pr_status_t make_weights(pr_compile_t *c, pr_node_t *n, qconv_state_t *s,
                                const dnnl_memory_desc_t *w_plain, const dnnl_memory_desc_t *w_md,
                                bool *fits) {
  const pr_value_t *w = pr__in(c, n, s->io.w), *zw = param(c, n, s->io.zw);
  *fits = true;
  if ((s->w_buf = pr__dnnl_weights_cached(c, n, 1, w_md, &s->w_cache))) return PR_OK;
  int64_t numel = pr__value_numel(w);
  int8_t *w8 = pr__aligned_alloc((size_t)numel);
  if (!w8) return PR_ERR_NOMEM;
  *fits = pr__weights_to_s8(w->data, w->dtype, numel, zw ? zw->data : NULL,
                            zw ? zw->dtype : w->dtype, s->n_zw, numel / s->g.M, w8) &&
          pr__q8_dnnl_exact_for(pr__in(c, n, s->io.x)->dtype, w8, numel);
  pr_status_t st = PR_OK;
  if (*fits) st = pr__dnnl_weights_make(c, n, 1, w8, w_plain, w_md, &s->w_buf, &s->w_cache);
  pr__free(w8);
  return st;
}

/* Weight dims: [M, C/g, k...] or grouped [g, M/g, C/g, k...]. */
static int weight_dims(const qgeom_t *g, dnnl_dims_t wd) {
  int r = 0;
  if (g->group > 1) wd[r++] = g->group;
  wd[r++] = g->M / g->group;
  wd[r++] = g->C / g->group;
  for (int k = 0; k < g->sp; k++) wd[r++] = g->k[k];
  return r;
}

static pr_status_t qconv_desc(pr_compile_t *c, pr_node_t *n, qconv_state_t *s,
                              dnnl_convolution_desc_t *cd, dnnl_memory_desc_t *w_plain) {
  const qgeom_t *g = &s->g;
  pr_value_t *x = pr__in(c, n, s->io.x), *o = pr__out(c, n, 0);
  static const dnnl_format_tag_t plain_tags[] = {0,         0,          0,          dnnl_abc,
                                                 dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  dnnl_dims_t xd, od, wd, strides, dil, pl, pr_, bd = {g->M};
  int rank = x->rank, wrank = weight_dims(g, wd);
  for (int k = 0; k < rank; k++) xd[k] = x->dims[k], od[k] = o->dims[k];
  for (int k = 0; k < g->sp; k++) {
    strides[k] = g->stride[k], dil[k] = g->dil[k] - 1;
    pl[k] = g->pad_l[k], pr_[k] = g->pad_r[k];
  }
  dnnl_memory_desc_t x_any, w_any, o_any, b_md;
  PR_DNNL(
      c, n,
      dnnl_memory_desc_init_by_tag(&x_any, rank, xd, pr__dnnl_type(x->dtype), dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&w_any, wrank, wd, dnnl_s8, dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(w_plain, wrank, wd, dnnl_s8, plain_tags[wrank]));
  PR_DNNL(
      c, n,
      dnnl_memory_desc_init_by_tag(&o_any, rank, od, pr__dnnl_type(o->dtype), dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
  PR_DNNL(c, n,
          dnnl_dilated_convolution_forward_desc_init(
              cd, dnnl_forward_inference, dnnl_convolution_direct, &x_any, &w_any,
              s->bias ? &b_md : NULL, &o_any, strides, dil, pl, pr_));
  return PR_OK;
}

/* The bias in accumulator units as floats (INT32 B converted; FLOAT B as is). */
static pr_status_t make_bias(pr_compile_t *c, pr_node_t *n, qconv_state_t *s) {
  const pr_value_t *b = param(c, n, s->io.b);
  if (!b) return PR_OK;
  if (!(s->bias = pr__aligned_alloc(sizeof(float) * (size_t)s->g.M))) return PR_ERR_NOMEM;
  for (int64_t m = 0; m < s->g.M; m++)
    s->bias[m] = b->dtype == PR_DTYPE_FLOAT ? ((const float *)b->data)[m]
                                            : (float)((const int32_t *)b->data)[m];
  return PR_OK;
}

/* The implementations of oneDNN 2.6 whose sums are wrong for n, found by
 * tests/conformance/quant_sweep.py (off by many steps from ONNX Runtime
 * and numpy; the next implementation runs n instead):
 * - the AMX convolution (jit:avx512_core_amx_int8) of three spatial
 *   dimensions with padding and a source zero point (9 of 42 such random
 *   draws; none of 81 unpadded or 62 2-D ones);
 * - the GEMM convolution (x64:gemm_s8s8s32:jit, x64:gemm_s8u8s32:jit)
 *   with 8 output channels of 8 weights each (in groups: 4 of 2 channels
 *   with a 2x2x2 kernel, 2 of 4 with 8 input channels...), zero point or
 *   not: 11 of 24 such draws, and none of over 3000 of other sizes (a
 *   grid of 10 output by 16 weight counts, and random ones). */
typedef struct {
  bool eight_by_eight, zp_padded_3d;
} wrong_impls_t;

static bool skip_impl(const_dnnl_primitive_desc_t pd, const void *ctx) {
  const wrong_impls_t *w = ctx;
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
    return false;
  return (w->zp_padded_3d && !strcmp(impl, "jit:avx512_core_amx_int8")) ||
         (w->eight_by_eight && !strncmp(impl, "x64:gemm_", 9));
}

/* The primitive descriptor with the requantization attributes; *pd NULL
 * when oneDNN has no kernel for it. */
static pr_status_t qconv_pd(pr_compile_t *c, pr_node_t *n, qconv_state_t *s,
                            dnnl_memory_desc_t *w_plain, dnnl_primitive_desc_t *pd) {
  const qconv_io_t *io = &s->io;
  const pr_value_t *sw = param(c, n, io->sw), *zx = param(c, n, io->zx), *x = pr__in(c, n, io->x);
  const pr_value_t *zy = param(c, n, io->zy), *sy = param(c, n, io->sy);
  dnnl_convolution_desc_t cd;
  pr_status_t st = qconv_desc(c, n, s, &cd, w_plain);
  if (st) return st;
  float *scales = malloc(sizeof(float) * (size_t)s->n_sw);
  if (!scales) return PR_ERR_NOMEM;
  pr__requant_scales(*(const float *)param(c, n, io->sx)->data, sw->data, s->n_sw, sy->data,
                     scales);
  dnnl_primitive_attr_t attr;
  int32_t src_zp = pr__zp_at(zx ? zx->data : NULL, x->dtype, 0);
  st = pr__q8_attr(c, n, scales, s->n_sw, 1, src_zp,
                   pr__zp_at(zy ? zy->data : NULL, zy ? zy->dtype : PR_DTYPE_UINT8, 0), &attr);
  free(scales);
  if (st) return st;
  const qgeom_t *g = &s->g;
  bool padded = false;
  for (int k = 0; k < g->sp; k++) padded = padded || g->pad_l[k] || g->pad_r[k];
  wrong_impls_t wrong = {
      .eight_by_eight = g->M == 8 && g->C / g->group * g->k[0] * g->k[1] * g->k[2] == 8,
      .zp_padded_3d = g->sp == 3 && src_zp && padded};
  *pd = pr__dnnl_pd_first(&cd, attr, c->engine, skip_impl, &wrong);
  dnnl_primitive_attr_destroy(attr);
  return PR_OK;
}

/* The oneDNN kernel when it can run n (s->dnnl set), else nothing. */
static pr_status_t prepare_dnnl(pr_compile_t *c, pr_node_t *n, qconv_state_t *s) {
  if (s->io.sx < 0 || !all_const(c, n)) return PR_OK; /* exactness: make_weights */
  pr_status_t st = make_bias(c, n, s);
  dnnl_memory_desc_t w_plain;
  dnnl_primitive_desc_t pd = NULL;
  if (!st) st = qconv_pd(c, n, s, &w_plain, &pd);
  if (st || !pd) return st;
  dnnl_memory_desc_t src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  dnnl_memory_desc_t w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  bool fits;
  if ((st = make_weights(c, n, s, &w_plain, &w_md, &fits)) || !fits) {
    dnnl_primitive_desc_destroy(pd);
    return st;
  }
  if ((st = pr__dnnl_prim_init(c, n, &s->prim, pd))) return st;
  pr_value_t *o = pr__out(c, n, 0);
  if ((st = pr__require_md(c, n, s->io.x, &src_md))) return st;
  dnnl_memory_desc_t plain;
  o->md = dst_md;
  pr__plain_md(o, &plain);
  o->opaque = !dnnl_memory_desc_equal(&dst_md, &plain);
  o->nbytes = dnnl_memory_desc_get_size(&dst_md);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_SRC, n->in[s->io.x], NULL, &src_md);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_WEIGHTS, -1, s->w_buf, &w_md);
  if (s->bias) {
    dnnl_dims_t bd = {s->g.M};
    dnnl_memory_desc_t b_md;
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
    pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_BIAS, -1, s->bias, &b_md);
  }
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_DST, n->out[0], NULL, &dst_md);
  s->dnnl = true;
  return PR_OK;
}

static pr_status_t prepare_qconv(pr_compile_t *c, pr_node_t *n) {
  qconv_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->io = *io_of(n);
  pr_dtype_t t;
  pr_status_t st = qconv_geom(c, n, &s->g);
  if (!st) st = check_inputs(c, n, &s->g, s, &t);
  if (!st) st = prepare_dnnl(c, n, s);
  if (st || s->dnnl) return st;
  if (!pr__q8_post_relu_only(n))
    return pr__fail(c, n, PR_ERR_INTERNAL, "fused operations on the plain int8 convolution");
  pr__free(s->bias);
  s->bias = NULL;
  for (int k = 0; k < n->n_in && !st; k++) st = pr__require_plain(c, n, k);
  return st;
}

/* ---- the plain kernel ---- */

static inline int32_t ld8(const void *p, bool is_signed, int64_t i) {
  return is_signed ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

/* acc of output (b, m, od, oh, ow): sum over the window of (x - zx)(w - zw),
 * wrapped to int32 as ONNX Runtime's int32 accumulator (summed in int64:
 * no signed overflow in C). */
static int32_t window_sum(const qgeom_t *g, const void *x, bool xs, int32_t zx, const void *w,
                          bool ws, int32_t zw, int64_t b, int64_t m, const int64_t *o) {
  int64_t cg = g->C / g->group, c0 = (m / (g->M / g->group)) * cg;
  int64_t plane = g->in[0] * g->in[1] * g->in[2], wk = g->k[0] * g->k[1] * g->k[2];
  int64_t acc = 0;
  for (int64_t ci = 0; ci < cg; ci++) {
    int64_t xbase = (b * g->C + c0 + ci) * plane, wbase = (m * cg + ci) * wk;
    for (int64_t kd = 0; kd < g->k[0]; kd++) {
      int64_t id = o[0] * g->stride[0] - g->pad_l[0] + kd * g->dil[0];
      if (id < 0 || id >= g->in[0]) continue;
      for (int64_t kh = 0; kh < g->k[1]; kh++) {
        int64_t ih = o[1] * g->stride[1] - g->pad_l[1] + kh * g->dil[1];
        if (ih < 0 || ih >= g->in[1]) continue;
        for (int64_t kw = 0; kw < g->k[2]; kw++) {
          int64_t iw = o[2] * g->stride[2] - g->pad_l[2] + kw * g->dil[2];
          if (iw < 0 || iw >= g->in[2]) continue;
          int32_t xv = ld8(x, xs, xbase + (id * g->in[1] + ih) * g->in[2] + iw) - zx;
          int32_t wv = ld8(w, ws, wbase + (kd * g->k[1] + kh) * g->k[2] + kw) - zw;
          acc += xv * wv;
        }
      }
    }
  }
  return (int32_t)(uint32_t)acc;
}

static const void *xptr(pr_exec_t *x, const pr_node_t *n, int k) {
  return k >= 0 && k < n->n_in && n->in[k] >= 0 ? x->v[n->in[k]].ptr : NULL;
}

static void run_plain(pr_exec_t *x, pr_node_t *n, const qconv_state_t *s) {
  const qgeom_t *g = &s->g;
  const qconv_io_t *io = &s->io;
  const pr_value_t *xv = &x->v[n->in[io->x]], *wv = &x->v[n->in[io->w]], *o = &x->v[n->out[0]];
  const void *zxp = xptr(x, n, io->zx), *zwp = xptr(x, n, io->zw), *zyp = xptr(x, n, io->zy);
  const float *sx = xptr(x, n, io->sx), *sw = xptr(x, n, io->sw), *sy = xptr(x, n, io->sy);
  const pr_value_t *bv =
      io->b >= 0 && io->b < n->n_in && n->in[io->b] >= 0 ? &x->v[n->in[io->b]] : NULL;
  bool xs = xv->dtype == PR_DTYPE_INT8, ws = wv->dtype == PR_DTYPE_INT8;
  int32_t zx = pr__zp_at(zxp, xv->dtype, 0);
  float lo = 0, hi = 0, zy = (float)pr__zp_at(zyp, o->dtype, 0);
  if (io->sx >= 0) pr__q8_range(o->dtype, &lo, &hi);
  float floor_v = n->post.n_eltwise ? 0.f : -INFINITY; /* a fused Relu */
  int64_t per = g->out[0] * g->out[1] * g->out[2];
#pragma omp parallel for num_threads(x->threads) if (g->N * g->M > 1)
  for (int64_t bm = 0; bm < g->N * g->M; bm++) {
    int64_t b = bm / g->M, m = bm % g->M;
    int32_t zw = pr__zp_at(zwp, wv->dtype, s->n_zw > 1 ? m : 0);
    float scale = sx ? (sx[0] * sw[s->n_sw > 1 ? m : 0]) / sy[0] : 1.f;
    float bias = !bv ? 0.f : bv->dtype == PR_DTYPE_FLOAT ? ((const float *)bv->ptr)[m] : 0.f;
    int32_t ibias = bv && bv->dtype == PR_DTYPE_INT32 ? ((const int32_t *)bv->ptr)[m] : 0;
    for (int64_t p = 0; p < per; p++) {
      int64_t op[3] = {p / (g->out[1] * g->out[2]), (p / g->out[2]) % g->out[1], p % g->out[2]};
      int32_t acc = window_sum(g, xv->ptr, xs, zx, wv->ptr, ws, zw, b, m, op);
      if (!sx) {
        ((int32_t *)o->ptr)[bm * per + p] = acc;
        continue;
      }
      acc = (int32_t)((uint32_t)acc + (uint32_t)ibias);
      pr__q8_store(o->ptr, o->dtype, bm * per + p,
                   pr__quantize(fmaxf(((float)acc + bias) * scale, floor_v), zy, lo, hi));
    }
  }
}

static void run_qconv(pr_exec_t *x, pr_node_t *n) {
  qconv_state_t *s = n->state;
  if (s->dnnl)
    pr__dnnl_prim_run(x, &s->prim);
  else
    run_plain(x, n, s);
}

const pr_op_t pr__op_qlinear_conv = {.name = "QLinearConv",
                                     .attrs = "auto_pad,dilations,group,kernel_shape,pads,strides",
                                     .min_opset = 10,
                                     .max_inputs = 9,
                                     .infer = infer_qconv,
                                     .prepare = prepare_qconv,
                                     .run = run_qconv,
                                     .destroy = destroy_qconv,
                                     .accepts_opaque = true};

const pr_op_t pr__op_conv_integer = {.name = "ConvInteger",
                                     .attrs = "auto_pad,dilations,group,kernel_shape,pads,strides",
                                     .min_opset = 10,
                                     .max_inputs = 4,
                                     .infer = infer_qconv,
                                     .prepare = prepare_qconv,
                                     .run = run_qconv,
                                     .destroy = destroy_qconv,
                                     .accepts_opaque = true};
