/* ConvTranspose on oneDNN's deconvolution: 1 to 3 spatial dimensions,
 * groups, dilations, output_padding, output_shape and auto_pad as ONNX
 * defines them (opset 1 onwards). The kernel picks the activation layout;
 * constant weights are reordered once and shared through the model's weight
 * cache, others are reordered on each run. */
#include <string.h>

#include "base/util.h"
#include "engine/ops/dnnl_util.h"

typedef struct {
  int sp; /* spatial rank */
  int64_t group;
  int64_t kernel[3], stride[3], dil[3], pad_l[3], pad_r[3], out_pad[3], out[3];
} deconv_geom_t;

typedef struct {
  pr_dnnl_prim_t prim;
  pr_dnnl_prim_t w_reorder; /* non-constant weights */
  void *w_buf;
  pr_model_t *w_cache;
  bool w_dynamic;
} deconv_state_t;

static void destroy_deconv(void *p) {
  deconv_state_t *s = p;
  pr__dnnl_prim_destroy(&s->prim);
  pr__dnnl_prim_destroy(&s->w_reorder);
  if (s->w_dynamic)
    pr__free(s->w_buf);
  else
    pr__dnnl_weights_release(s->w_buf, s->w_cache);
  free(s);
}

/* An optional ints attribute of exactly `want` entries into out (else def). */
static pr_status_t attr_spatial(pr_compile_t *c, pr_node_t *n, const char *name, int want,
                                int64_t def, int64_t *out) {
  const int64_t *v;
  int cnt = pr__attr_ints(n->m, name, &v);
  if (cnt && cnt != want) return pr__fail(c, n, PR_ERR_INVALID, "%s needs %d entries", name, want);
  for (int k = 0; k < want; k++) out[k] = cnt ? v[k] : def;
  return PR_OK;
}

/* Output size and pads, ONNX's rules: output_shape (when given) decides the
 * pads; SAME_* gives in x stride; otherwise the pads give the size. */
static pr_status_t deconv_geom(pr_compile_t *c, pr_node_t *n, deconv_geom_t *g) {
  const pr_value_t *x = pr__in(c, n, 0), *w = pr__in(c, n, 1);
  int sp = g->sp = x->rank - 2;
  g->group = pr__attr_int(n->m, "group", 1);
  int64_t pads[6], shape[3];
  pr_status_t st;
  if ((st = attr_spatial(c, n, "kernel_shape", sp, 0, g->kernel)) ||
      (st = attr_spatial(c, n, "strides", sp, 1, g->stride)) ||
      (st = attr_spatial(c, n, "dilations", sp, 1, g->dil)) ||
      (st = attr_spatial(c, n, "output_padding", sp, 0, g->out_pad)) ||
      (st = attr_spatial(c, n, "pads", 2 * sp, 0, pads)))
    return st;
  for (int k = 0; k < sp; k++) {
    if (g->kernel[k] && g->kernel[k] != w->dims[k + 2])
      return pr__fail(c, n, PR_ERR_INVALID, "kernel_shape differs from W");
    g->kernel[k] = w->dims[k + 2];
  }
  const int64_t *os;
  int n_os = pr__attr_ints(n->m, "output_shape", &os);
  if (n_os && n_os != sp && n_os != sp + 2)
    return pr__fail(c, n, PR_ERR_INVALID, "output_shape needs %d entries", sp);
  for (int k = 0; k < sp; k++) shape[k] = n_os ? os[n_os - sp + k] : -1;
  const char *ap = pr__attr_string(n->m, "auto_pad", "NOTSET");
  bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
  if (!same && strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
    return pr__fail(c, n, PR_ERR_INVALID, "auto_pad '%s'", ap);
  for (int k = 0; k < sp; k++) {
    int64_t in = x->dims[k + 2], s = g->stride[k], d = g->dil[k], op = g->out_pad[k];
    if (s < 1 || d < 1 || op < 0 || (op >= s && op >= d))
      return pr__fail(c, n, PR_ERR_INVALID, "bad stride, dilation or output_padding");
    int64_t full = s * (in - 1) + op + (g->kernel[k] - 1) * d + 1; /* before pads */
    if (shape[k] >= 0 || same) {
      /* a larger output_shape than the input reaches gives negative pads:
       * rows that only the bias reaches (halves rounded down, as ONNX's
       * reference does) */
      int64_t out = shape[k] >= 0 ? shape[k] : in * s, total = full - out;
      int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      bool upper = !strcmp(ap, "SAME_UPPER");
      g->pad_l[k] = upper ? half : total - half;
      g->pad_r[k] = total - g->pad_l[k];
    } else if (!strcmp(ap, "VALID")) {
      g->pad_l[k] = g->pad_r[k] = 0;
    } else {
      g->pad_l[k] = pads[k], g->pad_r[k] = pads[k + sp];
    }
    if ((g->pad_l[k] < 0 || g->pad_r[k] < 0) && shape[k] < 0 && !same)
      return pr__fail(c, n, PR_ERR_INVALID, "negative pads");
    /* oneDNN takes a negative pad at the end only */
    if (g->pad_l[k] < 0)
      return pr__fail(c, n, PR_ERR_UNSUPPORTED,
                      "an output of %lld past the %lld the input reaches on spatial axis %d, "
                      "grown at the start",
                      (long long)(full - g->pad_l[k] - g->pad_r[k]), (long long)full, k);
    g->out[k] = full - g->pad_l[k] - g->pad_r[k];
    if (g->out[k] < 1) return pr__fail(c, n, PR_ERR_INVALID, "empty output");
  }
  return PR_OK;
}

static pr_status_t infer_deconv(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *w = pr__in(c, n, 1), *b = pr__in(c, n, 2);
  if (!x || !w) return pr__fail(c, n, PR_ERR_INVALID, "needs X and W");
  if (x->dtype != PR_DTYPE_FLOAT || w->dtype != PR_DTYPE_FLOAT || (b && b->dtype != PR_DTYPE_FLOAT))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT ConvTranspose");
  if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "1 to 3 spatial dimensions, W of the same rank");
  deconv_geom_t g;
  pr_status_t st = deconv_geom(c, n, &g);
  if (st) return st;
  int64_t C = x->dims[1], M = w->dims[1] * g.group;
  if (g.group < 1 || C % g.group || w->dims[0] != C)
    return pr__fail(c, n, PR_ERR_INVALID, "channels (%lld in, W %lldx%lld) do not match group %lld",
                    (long long)C, (long long)w->dims[0], (long long)w->dims[1], (long long)g.group);
  if (b && (b->rank != 1 || b->dims[0] != M))
    return pr__fail(c, n, PR_ERR_INVALID, "B must have %lld elements", (long long)M);
  int64_t d[5] = {x->dims[0], M};
  for (int k = 0; k < g.sp; k++) d[k + 2] = g.out[k];
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_FLOAT, x->rank, d);
  return PR_OK;
}

/* oneDNN's weights: (OC, IC, k...) or grouped (G, OC/G, IC/G, k...); ONNX
 * stores (IC, OC/G, k...), which these tags describe in place. */
static void weight_desc(const pr_value_t *w, int64_t group, dnnl_dims_t wd, int *wrank,
                        dnnl_format_tag_t *tag) {
  int rank = w->rank;
  if (group == 1) {
    static const dnnl_format_tag_t t[] = {0, 0, 0, dnnl_bac, dnnl_bacd, dnnl_bacde};
    wd[0] = w->dims[1], wd[1] = w->dims[0];
    for (int k = 2; k < rank; k++) wd[k] = w->dims[k];
    *wrank = rank, *tag = t[rank];
  } else {
    static const dnnl_format_tag_t t[] = {0, 0, 0, dnnl_acbd, dnnl_acbde, dnnl_acbdef};
    wd[0] = group, wd[1] = w->dims[1], wd[2] = w->dims[0] / group;
    for (int k = 2; k < rank; k++) wd[k + 1] = w->dims[k];
    *wrank = rank + 1, *tag = t[rank];
  }
}

static pr_status_t deconv_weights(pr_compile_t *c, pr_node_t *n, deconv_state_t *s,
                                  const dnnl_memory_desc_t *w_plain,
                                  const dnnl_memory_desc_t *w_md) {
  const pr_value_t *w = pr__in(c, n, 1);
  if (w->is_const) {
    if ((s->w_buf = pr__dnnl_weights_cached(c, n, 0, w_md, &s->w_cache))) return PR_OK;
    return pr__dnnl_weights_make(c, n, 0, w->data, w_plain, w_md, &s->w_buf, &s->w_cache);
  }
  s->w_dynamic = true;
  return pr__dnnl_weights_dynamic(c, n, 1, w_plain, w_md, &s->w_reorder, &s->w_buf);
}

static pr_status_t prepare_deconv(pr_compile_t *c, pr_node_t *n) {
  deconv_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  deconv_geom_t g;
  pr_status_t st = deconv_geom(c, n, &g);
  if (st) return st;
  const pr_value_t *x = pr__in(c, n, 0), *w = pr__in(c, n, 1), *b = pr__in(c, n, 2);
  int rank = x->rank, wrank;
  dnnl_dims_t xd, od, wd, strides, dil, pl, pr_;
  dnnl_format_tag_t wtag;
  const pr_value_t *o = pr__out(c, n, 0);
  for (int k = 0; k < rank; k++) xd[k] = x->dims[k], od[k] = o->dims[k];
  /* oneDNN's right pad is what makes its size formula give the output:
   * output_padding comes off it (and may take it below zero) */
  for (int k = 0; k < g.sp; k++) {
    strides[k] = g.stride[k], dil[k] = g.dil[k] - 1, pl[k] = g.pad_l[k];
    pr_[k] = g.pad_r[k] - g.out_pad[k];
  }
  weight_desc(w, g.group, wd, &wrank, &wtag);
  dnnl_memory_desc_t x_any, w_any, w_plain, o_any, b_md;
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&x_any, rank, xd, dnnl_f32, dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&w_any, wrank, wd, dnnl_f32, dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&w_plain, wrank, wd, dnnl_f32, wtag));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&o_any, rank, od, dnnl_f32, dnnl_format_tag_any));
  if (b) {
    dnnl_dims_t bd = {o->dims[1]};
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
  }
  dnnl_deconvolution_desc_t dd;
  PR_DNNL(c, n,
          dnnl_dilated_deconvolution_forward_desc_init(
              &dd, dnnl_forward_inference, dnnl_deconvolution_direct, &x_any, &w_any,
              b ? &b_md : NULL, &o_any, strides, dil, pl, pr_));
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, &dd, NULL, c->engine, NULL) != dnnl_success)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "no oneDNN deconvolution kernel for this shape");
  dnnl_memory_desc_t src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  dnnl_memory_desc_t w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if ((st = pr__dnnl_prim_init(c, n, &s->prim, pd))) return st;
  if ((st = pr__require_md(c, n, 0, &src_md))) return st;
  pr_value_t *out = pr__out(c, n, 0); /* pointers stay valid across the reorder (graph.h) */
  dnnl_memory_desc_t plain;
  out->md = dst_md;
  pr__plain_md(out, &plain);
  out->opaque = !dnnl_memory_desc_equal(&dst_md, &plain);
  out->nbytes = dnnl_memory_desc_get_size(&dst_md);
  if ((st = deconv_weights(c, n, s, &w_plain, &w_md))) return st;
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_SRC, n->in[0], NULL, &src_md);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_WEIGHTS, -1, s->w_buf, &w_md);
  if (b) pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_BIAS, n->in[2], NULL, &b_md);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_DST, n->out[0], NULL, &dst_md);
  double macs = (double)pr__value_numel(pr__in(c, n, 0)) * (double)(out->dims[1] / g.group);
  for (int k = 0; k < g.sp; k++) macs *= (double)g.kernel[k];
  n->flops = 2 * macs;
  return PR_OK;
}

static void run_deconv(pr_exec_t *x, pr_node_t *n) {
  deconv_state_t *s = n->state;
  if (s->w_dynamic) pr__dnnl_prim_run(x, &s->w_reorder);
  pr__dnnl_prim_run(x, &s->prim);
}

const pr_op_t pr__op_conv_transpose = {
    .name = "ConvTranspose",
    .attrs = "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides",
    .min_opset = 1,
    .max_inputs = 3,
    .infer = infer_deconv,
    .prepare = prepare_deconv,
    .run = run_deconv,
    .destroy = destroy_deconv,
    .accepts_opaque = true};
