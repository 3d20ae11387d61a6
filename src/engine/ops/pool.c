/* MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool on oneDNN pooling;
 * any input layout, the output in the kernel's preferred layout. */
#include <string.h>

#include "engine/ops/dnnl_util.h"

pr_status_t pr_window_geom(pr_compile_t *c, pr_node_t *n, const int64_t *in_sp, int sp,
                           const int64_t *kernel, bool ceil_mode, int64_t *stride, int64_t *dil,
                           int64_t *pad_l, int64_t *pad_r, int64_t *out_sp);

typedef struct {
  int sp;
  bool global;
  int64_t kernel[3], stride[3], dil[3], pad_l[3], pad_r[3], out[3];
} pool_geom_t;

static pr_status_t pool_geom(pr_compile_t *c, pr_node_t *n, pool_geom_t *g) {
  pr_value_t *x = pr_in(c, n, 0);
  g->sp = x->rank - 2;
  if (g->global) {
    for (int k = 0; k < g->sp; k++) {
      g->kernel[k] = x->dims[k + 2];
      g->stride[k] = 1, g->dil[k] = 1, g->pad_l[k] = g->pad_r[k] = 0, g->out[k] = 1;
    }
    return PR_OK;
  }
  const int64_t *ks;
  int cnt = pr_attr_ints(n->m, "kernel_shape", &ks);
  if (cnt != g->sp) return pr_fail(c, n, PR_ERR_INVALID, "kernel_shape needs %d entries", g->sp);
  for (int k = 0; k < g->sp; k++) g->kernel[k] = ks[k];
  bool ceil_mode = pr_attr_int(n->m, "ceil_mode", 0) != 0;
  return pr_window_geom(c, n, x->dims + 2, g->sp, g->kernel, ceil_mode, g->stride, g->dil, g->pad_l,
                        g->pad_r, g->out);
}

static pr_status_t infer_pool_common(pr_compile_t *c, pr_node_t *n, bool global, bool is_max) {
  pr_value_t *x = pr_in(c, n, 0);
  if (!x) return pr_fail(c, n, PR_ERR_INVALID, "missing input");
  if (x->dtype != PR_DTYPE_FLOAT &&
      !(is_max && (x->dtype == PR_DTYPE_UINT8 || x->dtype == PR_DTYPE_INT8)))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(x->dtype));
  if (x->rank < 3 || x->rank > 5)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "1 to 3 spatial dimensions");
  if (n->n_out > 1 && n->out[1] >= 0)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "the Indices output");
  if (pr_attr_int(n->m, "storage_order", 0) != 0)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "storage_order 1");
  pool_geom_t g = {.global = global};
  pr_status_t st = pool_geom(c, n, &g);
  if (st) return st;
  int64_t d[5] = {x->dims[0], x->dims[1]};
  for (int k = 0; k < g.sp; k++) d[k + 2] = g.out[k];
  pr_value_set_shape(pr_out(c, n, 0), x->dtype, x->rank, d);
  return PR_OK;
}

static pr_status_t prepare_pool_common(pr_compile_t *c, pr_node_t *n, bool global,
                                       dnnl_alg_kind_t alg) {
  pr_dnnl_prim_t *p = calloc(1, sizeof *p);
  if (!p) return PR_ERR_NOMEM;
  n->state = p;
  pr_value_t *x = pr_in(c, n, 0), *o = pr_out(c, n, 0);
  pool_geom_t g = {.global = global};
  pr_status_t st = pool_geom(c, n, &g);
  if (st) return st;
  dnnl_dims_t od, strides, kernel, dil, pl, pr_;
  for (int k = 0; k < o->rank; k++) od[k] = o->dims[k];
  for (int k = 0; k < g.sp; k++) {
    strides[k] = g.stride[k], kernel[k] = g.kernel[k], dil[k] = g.dil[k] - 1;
    pl[k] = g.pad_l[k], pr_[k] = g.pad_r[k];
  }
  dnnl_memory_desc_t o_any;
  dnnl_data_type_t dt = x->dtype == PR_DTYPE_FLOAT   ? dnnl_f32
                        : x->dtype == PR_DTYPE_UINT8 ? dnnl_u8
                                                     : dnnl_s8;
  if (x->dtype != PR_DTYPE_FLOAT) pr_plain_md(x, &x->md), pr_plain_md(o, &o->md);
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&o_any, o->rank, od, dt, dnnl_format_tag_any));
  dnnl_pooling_v2_desc_t pdesc;
  PR_DNNL(c, n,
          dnnl_pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference, alg, &x->md, &o_any,
                                            strides, kernel, dil, pl, pr_));
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, &pdesc, NULL, c->engine, NULL) != dnnl_success)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "no oneDNN pooling kernel");
  dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if ((st = pr_dnnl_prim_init(c, n, p, pd))) return st;
  dnnl_memory_desc_t plain;
  o->md = dst_md;
  if (pr_plain_md(o, &plain) == PR_OK) o->opaque = !dnnl_memory_desc_equal(&dst_md, &plain);
  o->nbytes = dnnl_memory_desc_get_size(&dst_md);
  pr_dnnl_prim_add_arg(p, DNNL_ARG_SRC, n->in[0], NULL, &x->md);
  pr_dnnl_prim_add_arg(p, DNNL_ARG_DST, n->out[0], NULL, &dst_md);
  return PR_OK;
}

static pr_status_t infer_max(pr_compile_t *c, pr_node_t *n) {
  return infer_pool_common(c, n, false, true);
}
static pr_status_t infer_avg(pr_compile_t *c, pr_node_t *n) {
  return infer_pool_common(c, n, false, false);
}
static pr_status_t infer_gavg(pr_compile_t *c, pr_node_t *n) {
  return infer_pool_common(c, n, true, false);
}
static pr_status_t infer_gmax(pr_compile_t *c, pr_node_t *n) {
  return infer_pool_common(c, n, true, true);
}

static pr_status_t prepare_max(pr_compile_t *c, pr_node_t *n) {
  return prepare_pool_common(c, n, false, dnnl_pooling_max);
}
static pr_status_t prepare_avg(pr_compile_t *c, pr_node_t *n) {
  /* zeros from a fused Pad count in the average, as they did before fusion */
  bool include = pr_attr_int(n->m, "count_include_pad", 0) != 0 || n->pad_fused;
  return prepare_pool_common(
      c, n, false, include ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding);
}
static pr_status_t prepare_gavg(pr_compile_t *c, pr_node_t *n) {
  return prepare_pool_common(c, n, true, dnnl_pooling_avg_exclude_padding);
}
static pr_status_t prepare_gmax(pr_compile_t *c, pr_node_t *n) {
  return prepare_pool_common(c, n, true, dnnl_pooling_max);
}

static pr_status_t check_avg(const pr_mnode_t *m, int opset, char *err, size_t len) {
  const int64_t *d;
  int cnt = pr_attr_ints(m, "dilations", &d);
  for (int i = 0; i < cnt; i++)
    if (d[i] != 1) {
      snprintf(err, len, "node '%s' (AveragePool): dilations not supported", pr_mnode_name(m));
      return PR_ERR_UNSUPPORTED;
    }
  return PR_OK;
}

const pr_op_t pr_op_max_pool = {
    .name = "MaxPool",
    .attrs = "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides",
    .min_opset = 1,
    .max_inputs = 1,
    .infer = infer_max,
    .prepare = prepare_max,
    .run = pr_dnnl_run_state,
    .destroy = pr_dnnl_destroy_state,
    .accepts_opaque = true};
const pr_op_t pr_op_average_pool = {
    .name = "AveragePool",
    .attrs = "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,strides",
    .min_opset = 1,
    .max_inputs = 1,
    .check = check_avg,
    .infer = infer_avg,
    .prepare = prepare_avg,
    .run = pr_dnnl_run_state,
    .destroy = pr_dnnl_destroy_state,
    .accepts_opaque = true};
const pr_op_t pr_op_global_average_pool = {.name = "GlobalAveragePool",
                                           .attrs = "",
                                           .min_opset = 1,
                                           .max_inputs = 1,
                                           .infer = infer_gavg,
                                           .prepare = prepare_gavg,
                                           .run = pr_dnnl_run_state,
                                           .destroy = pr_dnnl_destroy_state,
                                           .accepts_opaque = true};
const pr_op_t pr_op_global_max_pool = {.name = "GlobalMaxPool",
                                       .attrs = "",
                                       .min_opset = 1,
                                       .max_inputs = 1,
                                       .infer = infer_gmax,
                                       .prepare = prepare_gmax,
                                       .run = pr_dnnl_run_state,
                                       .destroy = pr_dnnl_destroy_state,
                                       .accepts_opaque = true};
