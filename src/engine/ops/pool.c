/* MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool on oneDNN pooling;
 * any input layout, the output in the kernel's preferred layout. A MaxPool
 * with the Indices output runs a plain loop instead (row-major, the flat
 * index of each maximum; storage_order 1 numbers the spatial positions
 * column-major), as does a MaxPool of doubles (no oneDNN kernel takes
 * them), and MaxUnpool scatters values back to those indices. */
#include <math.h>
#include <string.h>

#include "engine/ops/dnnl_util.h"

pr_status_t pr__window_geom(pr_compile_t *c, pr_node_t *n, const int64_t *in_sp, int sp,
                            const int64_t *kernel, bool ceil_mode, int64_t *stride, int64_t *dil,
                            int64_t *pad_l, int64_t *pad_r, int64_t *out_sp);

typedef struct {
  int sp;
  bool global;
  int64_t kernel[3], stride[3], dil[3], pad_l[3], pad_r[3], out[3];
  /* the end pads the model gave (pad_r may be larger: ceil mode's last
   * window can run past them, and oneDNN wants that as padding) */
  int64_t pad_r_given[3];
} pool_geom_t;

static pr_status_t pool_geom(pr_compile_t *c, pr_node_t *n, pool_geom_t *g) {
  pr_value_t *x = pr__in(c, n, 0);
  g->sp = x->rank - 2;
  if (g->global) {
    for (int k = 0; k < g->sp; k++) {
      g->kernel[k] = x->dims[k + 2];
      g->stride[k] = 1, g->dil[k] = 1, g->pad_l[k] = g->pad_r[k] = 0, g->out[k] = 1;
    }
    return PR_OK;
  }
  const int64_t *ks;
  int cnt = pr__attr_ints(n->m, "kernel_shape", &ks);
  if (cnt != g->sp) return pr__fail(c, n, PR_ERR_INVALID, "kernel_shape needs %d entries", g->sp);
  for (int k = 0; k < g->sp; k++) g->kernel[k] = ks[k];
  bool ceil_mode = pr__attr_int(n->m, "ceil_mode", 0) != 0;
  pr_status_t st = pr__window_geom(c, n, x->dims + 2, g->sp, g->kernel, false, g->stride, g->dil,
                                   g->pad_l, g->pad_r, g->out);
  if (st) return st;
  memcpy(g->pad_r_given, g->pad_r, sizeof g->pad_r);
  if (!ceil_mode) return PR_OK;
  return pr__window_geom(c, n, x->dims + 2, g->sp, g->kernel, true, g->stride, g->dil, g->pad_l,
                         g->pad_r, g->out);
}

/* Whether ceil mode's last window runs past the end pads the model gave. */
static bool past_given_pads(const pool_geom_t *g) {
  for (int k = 0; k < g->sp; k++)
    if (g->pad_r[k] > g->pad_r_given[k]) return true;
  return false;
}

static pr_status_t infer_pool_common(pr_compile_t *c, pr_node_t *n, bool global, bool is_max) {
  pr_value_t *x = pr__in(c, n, 0);
  if (!x) return pr__fail(c, n, PR_ERR_INVALID, "missing input");
  bool loop_types = x->dtype == PR_DTYPE_UINT8 || x->dtype == PR_DTYPE_INT8 ||
                    (x->dtype == PR_DTYPE_DOUBLE && !global);
  if (x->dtype != PR_DTYPE_FLOAT && !(is_max && loop_types))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(x->dtype));
  if (x->rank < 3 || x->rank > 5)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "1 to 3 spatial dimensions");
  pool_geom_t g = {.global = global};
  pr_status_t st = pool_geom(c, n, &g);
  if (st) return st;
  int64_t d[5] = {x->dims[0], x->dims[1]};
  for (int k = 0; k < g.sp; k++) d[k + 2] = g.out[k];
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, d);
  if (pr__out(c, n, 1)) pr__value_set_shape(pr__out(c, n, 1), PR_DTYPE_INT64, x->rank, d);
  return PR_OK;
}

/* p: the op's state (n->state), zeroed. */
static pr_status_t prepare_pool_common(pr_compile_t *c, pr_node_t *n, bool global,
                                       dnnl_alg_kind_t alg, pr_dnnl_prim_t *p) {
  pr_value_t *x = pr__in(c, n, 0), *o = pr__out(c, n, 0);
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
  if (x->dtype != PR_DTYPE_FLOAT) pr__plain_md(x, &x->md), pr__plain_md(o, &o->md);
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&o_any, o->rank, od, dt, dnnl_format_tag_any));
  dnnl_pooling_v2_desc_t pdesc;
  PR_DNNL(c, n,
          dnnl_pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference, alg, &x->md, &o_any,
                                            strides, kernel, dil, pl, pr_));
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, &pdesc, NULL, c->engine, NULL) != dnnl_success)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "no oneDNN pooling kernel");
  dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if ((st = pr__dnnl_prim_init(c, n, p, pd))) return st;
  dnnl_memory_desc_t plain;
  o->md = dst_md;
  if (pr__plain_md(o, &plain) == PR_OK) o->opaque = !dnnl_memory_desc_equal(&dst_md, &plain);
  o->nbytes = dnnl_memory_desc_get_size(&dst_md);
  pr__dnnl_prim_add_arg(p, DNNL_ARG_SRC, n->in[0], NULL, &x->md);
  pr__dnnl_prim_add_arg(p, DNNL_ARG_DST, n->out[0], NULL, &dst_md);
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

/* MaxPool's state: the oneDNN kernel first (pr__dnnl_destroy_state frees
 * the whole), or the geometry of the loop that writes Indices. */
typedef struct {
  pr_dnnl_prim_t prim;
  bool loop;
  pool_geom_t g;
} max_state_t;

static pr_dnnl_prim_t *new_prim(pr_node_t *n) {
  pr_dnnl_prim_t *p = calloc(1, sizeof *p);
  n->state = p;
  return p;
}

static pr_status_t prepare_max(pr_compile_t *c, pr_node_t *n) {
  max_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  bool indices = n->n_out > 1 && n->out[1] >= 0;
  if (!indices && pr__in(c, n, 0)->dtype != PR_DTYPE_DOUBLE)
    return prepare_pool_common(c, n, false, dnnl_pooling_max, &s->prim);
  s->loop = true;
  pr_status_t st = pr__require_plain(c, n, 0);
  if (st) return st;
  return pool_geom(c, n, &s->g);
}

/* MaxPool with Indices (or of doubles): one output element at a time over
 * its window. */
/* The position of output element oi per spatial axis. */
static void out_pos(const pool_geom_t *g, int64_t oi, int64_t *opos) {
  for (int k = g->sp - 1; k >= 0; k--) opos[k] = oi % g->out[k], oi /= g->out[k];
}

/* Element w of the window of the output at opos: its input position per
 * spatial axis (pos); whether it lies inside the input (dims: spatial). */
static bool window_pos(const pool_geom_t *g, const int64_t *dims, const int64_t *opos, int64_t w,
                       int64_t *pos) {
  bool inside = true;
  for (int k = g->sp - 1; k >= 0; k--) {
    pos[k] = opos[k] * g->stride[k] - g->pad_l[k] + (w % g->kernel[k]) * g->dil[k];
    w /= g->kernel[k];
    inside &= pos[k] >= 0 && pos[k] < dims[k];
  }
  return inside;
}

static void run_max_loop(pr_exec_t *x, pr_node_t *n, const pool_geom_t *g) {
  const pr_value_t *a = &x->v[n->in[0]];
  int64_t *ind = n->n_out > 1 && n->out[1] >= 0 ? pr__xout(x, n, 1) : NULL;
  void *o = pr__xout(x, n, 0);
  bool col = pr__attr_int(n->m, "storage_order", 0) != 0;
  int sp = g->sp;
  size_t es = pr_dtype_size(a->dtype);
  int64_t planes = a->dims[0] * a->dims[1], in_sp = 1, out_sp = 1;
  for (int k = 0; k < sp; k++) in_sp *= a->dims[k + 2], out_sp *= g->out[k];
#pragma omp parallel for num_threads(x->threads) if (planes * out_sp > 4096)
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t oi = 0; oi < out_sp; oi++) {
      int64_t opos[3], win = 1, best = -1;
      out_pos(g, oi, opos);
      for (int k = 0; k < sp; k++) win *= g->kernel[k];
      double bv = -INFINITY;
      int64_t best_row = -1; /* the winner's row-major offset in the plane */
      for (int64_t w = 0; w < win; w++) {
        int64_t flat = 0, cflat = 0, cmul = 1, pos[3];
        if (!window_pos(g, a->dims + 2, opos, w, pos)) continue;
        for (int k = 0; k < sp; k++) flat = flat * a->dims[k + 2] + pos[k];
        for (int k = 0; k < sp; k++) cflat += pos[k] * cmul, cmul *= a->dims[k + 2];
        double v = pr__load_double(a->ptr, a->dtype, pl * in_sp + flat);
        if (best < 0 || v > bv) bv = v, best = pl * in_sp + (col ? cflat : flat), best_row = flat;
      }
      char *po = (char *)o + (size_t)(pl * out_sp + oi) * es;
      if (ind) ind[pl * out_sp + oi] = best < 0 ? 0 : best;
      if (best_row >= 0)
        memcpy(po, (const char *)a->ptr + (size_t)(pl * in_sp + best_row) * es, es);
      else
        memset(po, 0, es);
    }
}

static void run_max(pr_exec_t *x, pr_node_t *n) {
  max_state_t *s = n->state;
  if (s->loop)
    run_max_loop(x, n, &s->g);
  else
    pr__dnnl_prim_run(x, &s->prim);
}
/* AveragePool counting the pads, in ceil mode with a last window past the
 * given end pads: ONNX (and ONNX Runtime) divide by the part of the window
 * inside the padded input, oneDNN by the whole window. One output element
 * at a time: the sum over the input, over that count. */
static void run_avg_loop(pr_exec_t *x, pr_node_t *n, const pool_geom_t *g) {
  const pr_value_t *a = &x->v[n->in[0]];
  const float *in = a->ptr;
  float *o = pr__xout(x, n, 0);
  int sp = g->sp;
  int64_t planes = a->dims[0] * a->dims[1], in_sp = 1, out_sp = 1, win = 1;
  for (int k = 0; k < sp; k++) in_sp *= a->dims[k + 2], out_sp *= g->out[k], win *= g->kernel[k];
#pragma omp parallel for num_threads(x->threads) if (planes * out_sp > 4096)
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t oi = 0; oi < out_sp; oi++) {
      int64_t opos[3], count = 0;
      out_pos(g, oi, opos);
      double sum = 0;
      for (int64_t w = 0; w < win; w++) {
        int64_t flat = 0, pos[3];
        bool inside = window_pos(g, a->dims + 2, opos, w, pos), counted = true;
        for (int k = 0; k < sp; k++) counted &= pos[k] < a->dims[k + 2] + g->pad_r_given[k];
        count += counted;
        if (!inside) continue;
        for (int k = 0; k < sp; k++) flat = flat * a->dims[k + 2] + pos[k];
        sum += in[pl * in_sp + flat];
      }
      o[pl * out_sp + oi] = count ? (float)(sum / (double)count) : 0.f;
    }
}

static pr_status_t prepare_avg(pr_compile_t *c, pr_node_t *n) {
  /* zeros from a fused Pad count in the average, as they did before fusion */
  bool include = pr__attr_int(n->m, "count_include_pad", 0) != 0 || n->pad_fused;
  max_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_status_t st = pool_geom(c, n, &s->g);
  if (st) return st;
  if (include && past_given_pads(&s->g)) {
    s->loop = true;
    return pr__require_plain(c, n, 0);
  }
  return prepare_pool_common(
      c, n, false, include ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding,
      &s->prim);
}

static void run_avg(pr_exec_t *x, pr_node_t *n) {
  max_state_t *s = n->state;
  if (s->loop)
    run_avg_loop(x, n, &s->g);
  else
    pr__dnnl_prim_run(x, &s->prim);
}
static pr_status_t prepare_gavg(pr_compile_t *c, pr_node_t *n) {
  pr_dnnl_prim_t *p = new_prim(n);
  if (!p) return PR_ERR_NOMEM;
  return prepare_pool_common(c, n, true, dnnl_pooling_avg_exclude_padding, p);
}
static pr_status_t prepare_gmax(pr_compile_t *c, pr_node_t *n) {
  pr_dnnl_prim_t *p = new_prim(n);
  if (!p) return PR_ERR_NOMEM;
  return prepare_pool_common(c, n, true, dnnl_pooling_max, p);
}

static pr_status_t check_avg(const pr_mnode_t *m, int opset, char *err, size_t len) {
  const int64_t *d;
  int cnt = pr__attr_ints(m, "dilations", &d);
  for (int i = 0; i < cnt; i++)
    if (d[i] != 1) {
      snprintf(err, len, "node '%s' (AveragePool): dilations not supported", pr__mnode_name(m));
      return PR_ERR_UNSUPPORTED;
    }
  return PR_OK;
}

const pr_op_t pr__op_max_pool = {
    .name = "MaxPool",
    .attrs = "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides",
    .min_opset = 1,
    .max_inputs = 1,
    .infer = infer_max,
    .prepare = prepare_max,
    .run = run_max,
    .destroy = pr__dnnl_destroy_state,
    .accepts_opaque = true};
const pr_op_t pr__op_average_pool = {
    .name = "AveragePool",
    .attrs = "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,strides",
    .min_opset = 1,
    .max_inputs = 1,
    .check = check_avg,
    .infer = infer_avg,
    .prepare = prepare_avg,
    .run = run_avg,
    .destroy = pr__dnnl_destroy_state,
    .accepts_opaque = true};
const pr_op_t pr__op_global_average_pool = {.name = "GlobalAveragePool",
                                            .attrs = "",
                                            .min_opset = 1,
                                            .max_inputs = 1,
                                            .infer = infer_gavg,
                                            .prepare = prepare_gavg,
                                            .run = pr__dnnl_run_state,
                                            .destroy = pr__dnnl_destroy_state,
                                            .accepts_opaque = true};
const pr_op_t pr__op_global_max_pool = {.name = "GlobalMaxPool",
                                        .attrs = "",
                                        .min_opset = 1,
                                        .max_inputs = 1,
                                        .infer = infer_gmax,
                                        .prepare = prepare_gmax,
                                        .run = pr__dnnl_run_state,
                                        .destroy = pr__dnnl_destroy_state,
                                        .accepts_opaque = true};

/* ---- MaxUnpool(X, I, output_shape?): zeros, X scattered to indices I ----
 * I numbers the elements of the shape MaxPool's input had (the default
 * output shape: from kernel, strides and pads); a given output_shape only
 * adds room, each value keeps its coordinates. */

static pr_status_t unpool_default_shape(const pr_mnode_t *m, const pr_value_t *x, int64_t *d) {
  int sp = x->rank - 2;
  const int64_t *ks, *st, *pads;
  if (pr__attr_ints(m, "kernel_shape", &ks) != sp) return PR_ERR_INVALID;
  int nst = pr__attr_ints(m, "strides", &st), np = pr__attr_ints(m, "pads", &pads);
  d[0] = x->dims[0], d[1] = x->dims[1];
  for (int k = 0; k < sp; k++) {
    int64_t s = nst == sp ? st[k] : 1, pb = np == 2 * sp ? pads[k] : 0,
            pe = np == 2 * sp ? pads[k + sp] : 0;
    d[k + 2] = (x->dims[k + 2] - 1) * s - pb - pe + ks[k];
    if (d[k + 2] < 0) return PR_ERR_INVALID;
  }
  return PR_OK;
}

static pr_status_t infer_max_unpool(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *ind = pr__in(c, n, 1), *shape = pr__in(c, n, 2);
  if (!x || !ind || ind->dtype != PR_DTYPE_INT64 || !pr__same_shape(x, ind))
    return pr__fail(c, n, PR_ERR_INVALID, "I must be INT64 of X's shape");
  if (x->rank < 3 || x->rank > 5 || !pr_dtype_size(x->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "1 to 3 spatial dimensions");
  int64_t d[5], def[5];
  if (unpool_default_shape(n->m, x, def))
    return pr__fail(c, n, PR_ERR_INVALID, "kernel_shape, strides and pads");
  memcpy(d, def, sizeof d);
  if (shape && pr__const_ints(shape, d, 5) != x->rank)
    return pr__need_values(c, n, "output_shape must be constant, of rank %d", x->rank);
  for (int k = 0; k < x->rank; k++)
    if (d[k] < def[k] || (k < 2 && d[k] != def[k]))
      return pr__fail(c, n, PR_ERR_INVALID, "output_shape smaller than the default");
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, d);
  return PR_OK;
}

static void run_max_unpool(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  const int64_t *ind = pr__xin(x, n, 1);
  size_t es = pr_dtype_size(a->dtype);
  int64_t def[5], len = pr__value_numel(a), dlen = 1;
  unpool_default_shape(n->m, a, def);
  for (int k = 0; k < a->rank; k++) dlen *= def[k];
  for (int64_t i = 0; i < len; i++)
    if (ind[i] < 0 || ind[i] >= dlen) { /* undefined in ONNX: refused, as in ONNX Runtime */
      pr__run_fail(x, n, PR_ERR_INVALID, "index %lld out of range [0, %lld]", (long long)ind[i],
                   (long long)(dlen - 1));
      return;
    }
  memset(o->ptr, 0, o->nbytes);
  for (int64_t i = 0; i < len; i++) {
    if (ind[i] < 0 || ind[i] >= dlen) continue; /* checked above */
    int64_t rem = ind[i], off = 0, mul = 1;
    for (int k = a->rank - 1; k >= 0; k--) {
      off += (rem % def[k]) * mul;
      mul *= o->dims[k];
      rem /= def[k];
    }
    memcpy((char *)o->ptr + (size_t)off * es, (const char *)a->ptr + (size_t)i * es, es);
  }
}

const pr_op_t pr__op_max_unpool = {.name = "MaxUnpool",
                                   .attrs = "kernel_shape,pads,strides",
                                   .min_opset = 9,
                                   .max_inputs = 3,
                                   .infer = infer_max_unpool,
                                   .run = run_max_unpool};
