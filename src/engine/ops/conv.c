/* Conv on oneDNN: the kernel picks the activation layout (format any), the
 * weights are reordered once at prepare (or each run when they are not
 * constant), and fused activations / residual sum run as post-ops. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "base/util.h"
#include "engine/ops/dnnl_util.h"

typedef struct {
  int sp; /* spatial rank */
  int64_t kernel[3], stride[3], dil[3], pad_l[3], pad_r[3];
  int64_t group;
} conv_geom_t;

typedef struct {
  pr_dnnl_prim_t conv;
  pr_dnnl_prim_t w_reorder; /* for non-constant weights */
  void *w_buf;
  pr_model_t *w_cache; /* w_buf belongs to this model's weight cache (NULL: private) */
  float *bias;         /* bias with a folded BatchNormalization */
  bool w_dynamic;
  int sum_in; /* input index of the residual addend, -1 */
} conv_state_t;

static void destroy_conv(void *p) {
  conv_state_t *s = p;
  pr__dnnl_prim_destroy(&s->conv);
  pr__dnnl_prim_destroy(&s->w_reorder);
  pr__dnnl_weights_release(s->w_buf, s->w_cache);
  pr__free(s->bias);
  free(s);
}

/* Folded BatchNormalization: per output channel scale, and the new bias. */
static pr_status_t bn_fold(pr_compile_t *c, pr_node_t *n, int64_t M, float *scale_out,
                           float *bias_out) {
  const float *g = c->v[n->bn_in[0]].data, *beta = c->v[n->bn_in[1]].data,
              *mean = c->v[n->bn_in[2]].data, *var = c->v[n->bn_in[3]].data;
  /* inputs: X, W[, B][, addend of a fused sum, always at index 3] */
  const pr_value_t *b =
      n->n_in > 2 && n->in[2] >= 0 && (!n->post.sum || n->n_in > 3) ? &c->v[n->in[2]] : NULL;
  float eps = pr__attr_float(n->bn, "epsilon", 1e-5f);
  for (int64_t m = 0; m < M; m++) {
    float s = g[m] / sqrtf(var[m] + eps);
    if (scale_out) scale_out[m] = s;
    if (bias_out) bias_out[m] = ((b ? ((const float *)b->data)[m] : 0.f) - mean[m]) * s + beta[m];
  }
  return PR_OK;
}

/* Constant weights in the kernel's layout (BatchNormalization folded in). */
static pr_status_t prepare_weights(pr_compile_t *c, pr_node_t *n, conv_state_t *s,
                                   const dnnl_memory_desc_t *w_plain,
                                   const dnnl_memory_desc_t *w_md) {
  const pr_value_t *w = &c->v[n->in[1]];
  int variant = n->bn != NULL;
  if ((s->w_buf = pr__dnnl_weights_cached(c, n, variant, w_md, &s->w_cache))) return PR_OK;
  const void *src = w->data;
  float *folded = NULL;
  if (n->bn) {
    int64_t M = w->dims[0], per = pr__value_numel(w) / M;
    float *scale = malloc(sizeof(float) * (size_t)M);
    folded = pr__aligned_alloc(w->nbytes);
    if (!scale || !folded) {
      free(scale), pr__free(folded);
      return PR_ERR_NOMEM;
    }
    bn_fold(c, n, M, scale, NULL);
    const float *wd = w->data;
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = 0; j < per; j++) folded[m * per + j] = wd[m * per + j] * scale[m];
    free(scale);
    src = folded;
  }
  pr_status_t st = pr__dnnl_weights_make(c, n, variant, src, w_plain, w_md, &s->w_buf, &s->w_cache);
  pr__free(folded);
  return st;
}

/* Shared by Conv and the pooling ops: output size and pads from ONNX attributes. */
pr_status_t pr__window_geom(pr_compile_t *c, pr_node_t *n, const int64_t *in_sp, int sp,
                            const int64_t *kernel, bool ceil_mode, int64_t *stride, int64_t *dil,
                            int64_t *pad_l, int64_t *pad_r, int64_t *out_sp) {
  const int64_t *v;
  int cnt;
  for (int k = 0; k < sp; k++) stride[k] = 1, dil[k] = 1, pad_l[k] = 0, pad_r[k] = 0;
  if ((cnt = pr__attr_ints(n->m, "strides", &v))) {
    if (cnt != sp) return pr__fail(c, n, PR_ERR_INVALID, "strides needs %d entries", sp);
    for (int k = 0; k < sp; k++) stride[k] = v[k];
  }
  if ((cnt = pr__attr_ints(n->m, "dilations", &v))) {
    if (cnt != sp) return pr__fail(c, n, PR_ERR_INVALID, "dilations needs %d entries", sp);
    for (int k = 0; k < sp; k++) dil[k] = v[k];
  }
  const char *ap = pr__attr_string(n->m, "auto_pad", "NOTSET");
  bool explicit_pads = false;
  if ((cnt = pr__attr_ints(n->m, "pads", &v))) {
    if (cnt != 2 * sp) return pr__fail(c, n, PR_ERR_INVALID, "pads needs %d entries", 2 * sp);
    for (int k = 0; k < sp; k++) pad_l[k] = v[k], pad_r[k] = v[k + sp];
    explicit_pads = true;
  }
  if (n->pad_fused)
    for (int k = 0; k < sp; k++) pad_l[k] += n->pad_add[k], pad_r[k] += n->pad_add[k + sp];
  for (int k = 0; k < sp; k++) {
    if (stride[k] < 1 || dil[k] < 1 || kernel[k] < 1 || pad_l[k] < 0 || pad_r[k] < 0)
      return pr__fail(c, n, PR_ERR_INVALID, "bad kernel, stride, dilation or pad");
    int64_t ext = (kernel[k] - 1) * dil[k] + 1;
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
      int64_t out = (in_sp[k] + stride[k] - 1) / stride[k];
      int64_t total = (out - 1) * stride[k] + ext - in_sp[k];
      if (total < 0) total = 0;
      if (ap[5] == 'U')
        pad_l[k] = total / 2, pad_r[k] = total - total / 2;
      else
        pad_r[k] = total / 2, pad_l[k] = total - total / 2;
      out_sp[k] = out;
      continue;
    }
    if (!strcmp(ap, "VALID")) {
      pad_l[k] = pad_r[k] = 0;
    } else if (strcmp(ap, "NOTSET")) {
      return pr__fail(c, n, PR_ERR_INVALID, "auto_pad '%s'", ap);
    }
    (void)explicit_pads;
    int64_t span = in_sp[k] + pad_l[k] + pad_r[k] - ext;
    if (span < 0) return pr__fail(c, n, PR_ERR_INVALID, "window larger than the padded input");
    int64_t out = (ceil_mode ? (span + stride[k] - 1) / stride[k] : span / stride[k]) + 1;
    /* ceil mode: the last window must start inside the input or left pad */
    if (ceil_mode && (out - 1) * stride[k] >= in_sp[k] + pad_l[k]) out--;
    /* oneDNN wants pads that produce exactly this size */
    int64_t need = (out - 1) * stride[k] + ext - in_sp[k] - pad_l[k];
    if (need > pad_r[k]) pad_r[k] = need;
    out_sp[k] = out;
  }
  return PR_OK;
}

static pr_status_t conv_geom(pr_compile_t *c, pr_node_t *n, conv_geom_t *g, int64_t *out_sp) {
  pr_value_t *x = pr__in(c, n, 0), *w = pr__in(c, n, 1);
  g->sp = x->rank - 2;
  g->group = pr__attr_int(n->m, "group", 1);
  const int64_t *ks;
  int cnt = pr__attr_ints(n->m, "kernel_shape", &ks);
  for (int k = 0; k < g->sp; k++) g->kernel[k] = w->dims[k + 2];
  if (cnt) {
    if (cnt != g->sp) return pr__fail(c, n, PR_ERR_INVALID, "kernel_shape needs %d entries", g->sp);
    for (int k = 0; k < g->sp; k++)
      if (ks[k] != g->kernel[k])
        return pr__fail(c, n, PR_ERR_INVALID, "kernel_shape differs from W");
  }
  return pr__window_geom(c, n, x->dims + 2, g->sp, g->kernel, false, g->stride, g->dil, g->pad_l,
                         g->pad_r, out_sp);
}

bool pr__conv_window_in_padding(pr_compile_t *c, pr_node_t *n) {
  conv_geom_t g;
  int64_t out_sp[3];
  if (conv_geom(c, n, &g, out_sp)) return true; /* infer took it: cannot happen */
  const pr_value_t *x = pr__in(c, n, 0);
  for (int k = 0; k < g.sp; k++)
    for (int64_t o = 0; o < out_sp[k]; o++) {
      bool reads_input = false;
      for (int64_t t = 0; t < g.kernel[k] && !reads_input; t++) {
        int64_t pos = o * g.stride[k] - g.pad_l[k] + t * g.dil[k];
        reads_input = pos >= 0 && pos < x->dims[k + 2];
      }
      if (!reads_input) return true;
    }
  return false;
}

static pr_status_t infer_conv(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *w = pr__in(c, n, 1), *b = pr__in(c, n, 2);
  if (!x || !w) return pr__fail(c, n, PR_ERR_INVALID, "needs X and W");
  if (x->dtype != PR_DTYPE_FLOAT || w->dtype != PR_DTYPE_FLOAT || (b && b->dtype != PR_DTYPE_FLOAT))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT convolution");
  if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "1 to 3 spatial dimensions, W of the same rank");
  conv_geom_t g;
  int64_t out_sp[3];
  pr_status_t st = conv_geom(c, n, &g, out_sp);
  if (st) return st;
  int64_t C = x->dims[1], M = w->dims[0];
  if (g.group < 1 || C % g.group || M % g.group || w->dims[1] != C / g.group)
    return pr__fail(c, n, PR_ERR_INVALID, "channels (%lld in, W %lldx%lld) do not match group %lld",
                    (long long)C, (long long)M, (long long)w->dims[1], (long long)g.group);
  if (b && (b->rank != 1 || b->dims[0] != M))
    return pr__fail(c, n, PR_ERR_INVALID, "B must have %lld elements", (long long)M);
  int64_t d[5] = {x->dims[0], M};
  for (int k = 0; k < g.sp; k++) d[k + 2] = out_sp[k];
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_FLOAT, x->rank, d);
  return PR_OK;
}

static void dims_of(const pr_value_t *v, dnnl_dims_t d) {
  for (int k = 0; k < v->rank; k++) d[k] = v->dims[k];
}

/* Activation layout of a 2-D conv: channel-blocked (nChw16c / nChw8c) when
 * the session asks for it (block: c->conv_block, see session.c) and the
 * channels fill whole blocks, else the kernel's own choice. */
static dnnl_format_tag_t act_tag(int block, int rank, int64_t channels) {
  if (rank != 4 || !block || channels % block) return dnnl_format_tag_any;
  return block == 16 ? dnnl_nChw16c : dnnl_nChw8c;
}

/* create_conv_pd with the activations blocked by `block` (0: the kernel's
 * choice). */
static pr_status_t conv_pd_with(pr_compile_t *c, pr_node_t *n, const conv_geom_t *g,
                                const dnnl_memory_desc_t *b_md, dnnl_memory_desc_t *w_plain,
                                dnnl_primitive_desc_t *pd, int block) {
  pr_value_t *x = pr__in(c, n, 0), *w = pr__in(c, n, 1), *o = pr__out(c, n, 0);
  int rank = x->rank;
  dnnl_dims_t xd, od, wd, strides, dil, pl, pr_;
  dims_of(x, xd);
  dims_of(o, od);
  for (int k = 0; k < g->sp; k++) {
    strides[k] = g->stride[k];
    dil[k] = g->dil[k] - 1;
    pl[k] = g->pad_l[k];
    pr_[k] = g->pad_r[k];
  }
  /* weights: [M, C/g, k...] or grouped [g, M/g, C/g, k...] */
  int wrank = g->group > 1 ? rank + 1 : rank;
  if (g->group > 1) {
    wd[0] = g->group;
    wd[1] = w->dims[0] / g->group;
    for (int k = 1; k < rank; k++) wd[k + 1] = w->dims[k];
  } else {
    dims_of(w, wd);
  }
  static const dnnl_format_tag_t plain_tags[] = {0,         0,          0,          dnnl_abc,
                                                 dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  assert(wrank >= 3 && wrank <= 6);
  dnnl_memory_desc_t x_any, w_any, o_any;
  /* few input channels (image inputs): the kernels take row-major directly */
  bool x_plain = !x->opaque && x->dims[1] <= 4;
  /* bf16: activations and weights (reordered to it), fp32 accumulation and output */
  dnnl_data_type_t xt = c->bf16 ? dnnl_bf16 : dnnl_f32;
  if (x_plain && !c->bf16)
    x_any = x->md;
  else if (x_plain)
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&x_any, rank, xd, xt, plain_tags[rank]));
  else
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&x_any, rank, xd, xt, act_tag(block, rank, xd[1])));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&w_any, wrank, wd, xt, dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(w_plain, wrank, wd, dnnl_f32, plain_tags[wrank]));
  PR_DNNL(c, n,
          dnnl_memory_desc_init_by_tag(&o_any, rank, od, dnnl_f32, act_tag(block, rank, od[1])));
  dnnl_convolution_desc_t cd;
  PR_DNNL(c, n,
          dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                     dnnl_convolution_direct, &x_any, &w_any, b_md,
                                                     &o_any, strides, dil, pl, pr_));
  dnnl_primitive_attr_t attr;
  pr_status_t st = pr__dnnl_post_attr(c, n, &attr);
  if (st) return st;
  dnnl_status_t ds = dnnl_primitive_desc_create(pd, &cd, attr, c->engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (ds != dnnl_success) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "no oneDNN kernel (%d)", ds);
  return PR_OK;
}

/* The convolution's primitive descriptor: activations in the layout
 * act_tag chooses (or row-major for image inputs), weights and output in
 * the kernel's choice, n's post-ops. w_plain: the row-major weights. When
 * only oneDNN's reference kernel takes the blocked layout (a grouped conv
 * whose groups do not fill blocks: RegNet's ran 60x slower), the kernel's
 * own layout instead. */
static pr_status_t create_conv_pd(pr_compile_t *c, pr_node_t *n, const conv_geom_t *g,
                                  const dnnl_memory_desc_t *b_md, dnnl_memory_desc_t *w_plain,
                                  dnnl_primitive_desc_t *pd) {
  pr_status_t st = conv_pd_with(c, n, g, b_md, w_plain, pd, c->conv_block);
  if (st || !c->conv_block) return st;
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
      strncmp(impl, "ref", 3))
    return PR_OK;
  dnnl_primitive_desc_destroy(*pd);
  *pd = NULL;
  return conv_pd_with(c, n, g, b_md, w_plain, pd, 0);
}

/* Weights in the kernel's layout w_md: once now when they are constant,
 * else by a reorder before each run. */
static pr_status_t prepare_conv_weights(pr_compile_t *c, pr_node_t *n, conv_state_t *s,
                                        const dnnl_memory_desc_t *w_plain,
                                        const dnnl_memory_desc_t *w_md) {
  if (pr__in(c, n, 1)->is_const) return prepare_weights(c, n, s, w_plain, w_md);
  if (n->bn)
    return pr__fail(c, n, PR_ERR_INTERNAL, "BatchNormalization folded into dynamic weights");
  s->w_dynamic = true;
  return pr__dnnl_weights_dynamic(c, n, 1, w_plain, w_md, &s->w_reorder, &s->w_buf);
}

static pr_status_t prepare_conv(pr_compile_t *c, pr_node_t *n) {
  conv_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->sum_in = n->post.sum ? n->n_in - 1 : -1;
  pr_value_t *w = pr__in(c, n, 1), *o = pr__out(c, n, 0);
  pr_value_t *b = n->n_in > 2 && s->sum_in != 2 ? pr__in(c, n, 2) : NULL;
  int64_t M = w->dims[0];
  if (n->bn) {
    if (!(s->bias = pr__aligned_alloc(sizeof(float) * (size_t)M))) return PR_ERR_NOMEM;
    bn_fold(c, n, M, NULL, s->bias);
  }
  conv_geom_t g;
  int64_t out_sp[3];
  pr_status_t st = conv_geom(c, n, &g, out_sp);
  if (st) return st;
  dnnl_memory_desc_t b_md, w_plain, plain;
  if (b || n->bn) {
    dnnl_dims_t bd = {M};
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
  }
  dnnl_primitive_desc_t pd;
  if ((st = create_conv_pd(c, n, &g, b || n->bn ? &b_md : NULL, &w_plain, &pd))) return st;
  dnnl_memory_desc_t src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  dnnl_memory_desc_t w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if ((st = pr__dnnl_prim_init(c, n, &s->conv, pd))) return st;
  /* o stays valid across the reorder: the value array does not move while
   * preparing (graph.h) */
  if ((st = pr__require_md(c, n, 0, &src_md))) return st;
  o->md = dst_md;
  pr__plain_md(o, &plain);
  o->opaque = !dnnl_memory_desc_equal(&dst_md, &plain);
  o->nbytes = dnnl_memory_desc_get_size(&dst_md);
  if (s->sum_in >= 0 && (st = pr__require_md(c, n, s->sum_in, &dst_md))) return st;
  if ((st = prepare_conv_weights(c, n, s, &w_plain, &w_md))) return st;
  pr__dnnl_prim_add_arg(&s->conv, DNNL_ARG_SRC, n->in[0], NULL, &src_md);
  pr__dnnl_prim_add_arg(&s->conv, DNNL_ARG_WEIGHTS, -1, s->w_buf, &w_md);
  if (n->bn)
    pr__dnnl_prim_add_arg(&s->conv, DNNL_ARG_BIAS, -1, s->bias, &b_md);
  else if (b)
    pr__dnnl_prim_add_arg(&s->conv, DNNL_ARG_BIAS, n->in[2], NULL, &b_md);
  pr__dnnl_prim_add_arg(&s->conv, DNNL_ARG_DST, n->out[0], NULL, &dst_md);
  /* the input (after the reorder: the same shape) */
  double macs = (double)pr__value_numel(o) * (double)(pr__in(c, n, 0)->dims[1] / g.group);
  for (int k = 0; k < g.sp; k++) macs *= (double)g.kernel[k];
  n->flops = 2 * macs;
  return PR_OK;
}

static void run_conv(pr_exec_t *x, pr_node_t *n) {
  conv_state_t *s = n->state;
  if (s->w_dynamic) pr__dnnl_prim_run(x, &s->w_reorder);
  if (s->sum_in >= 0) pr__dnnl_sum_addend(x, n, s->sum_in);
  pr__dnnl_prim_run(x, &s->conv);
}

const pr_op_t pr__op_conv = {.name = "Conv",
                             .attrs = "auto_pad,dilations,group,kernel_shape,pads,strides",
                             .min_opset = 1,
                             .max_inputs = 3,
                             .infer = infer_conv,
                             .prepare = prepare_conv,
                             .run = run_conv,
                             .destroy = destroy_conv,
                             .accepts_opaque = true};
