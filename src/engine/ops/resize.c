/* Resize (opset 10+): nearest and linear, every coordinate transformation
 * mode, as separable 1-D passes over the axes that change. */
#include <math.h>
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"

typedef enum {
  CT_HALF_PIXEL,
  CT_PYTORCH_HALF_PIXEL,
  CT_ALIGN_CORNERS,
  CT_ASYMMETRIC,
  CT_TF_HALF_PIXEL_NN,
  CT_TF_CROP
} coord_t;
typedef enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL } nearest_t;

typedef struct {
  bool linear;
  coord_t ct;
  nearest_t nm;
  float extrapolation;
  int rank;
  double scale[PR_MAX_RANK];
  float roi_start[PR_MAX_RANK], roi_end[PR_MAX_RANK];
  int64_t out[PR_MAX_RANK];
  float *tmp[2];
} resize_state_t;

static void destroy_resize(void *p) {
  resize_state_t *s = p;
  if (!s) return;
  pr_free(s->tmp[0]);
  pr_free(s->tmp[1]);
  free(s);
}

static pr_status_t resize_params(pr_compile_t *c, pr_node_t *n, resize_state_t *s) {
  pr_value_t *x = pr_in(c, n, 0);
  if (!x || x->dtype != PR_DTYPE_FLOAT) return pr_fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT");
  const char *mode = pr_attr_string(n->m, "mode", "nearest");
  if (!strcmp(mode, "linear"))
    s->linear = true;
  else if (strcmp(mode, "nearest"))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "mode '%s'", mode);
  const char *ct = pr_attr_string(n->m, "coordinate_transformation_mode", "half_pixel");
  if (c->opset < 11) ct = "asymmetric";
  static const char *cts[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                              "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  s->ct = (coord_t)-1;
  for (int i = 0; i < 6; i++)
    if (!strcmp(ct, cts[i])) s->ct = (coord_t)i;
  if ((int)s->ct < 0) return pr_fail(c, n, PR_ERR_UNSUPPORTED, "coordinate mode '%s'", ct);
  const char *nm =
      pr_attr_string(n->m, "nearest_mode", c->opset < 11 ? "floor" : "round_prefer_floor");
  static const char *nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  s->nm = (nearest_t)-1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(nm, nms[i])) s->nm = (nearest_t)i;
  if ((int)s->nm < 0) return pr_fail(c, n, PR_ERR_UNSUPPORTED, "nearest_mode '%s'", nm);
  s->extrapolation = pr_attr_float(n->m, "extrapolation_value", 0.f);
  s->rank = x->rank;
  pr_value_t *roi = NULL, *scales, *sizes = NULL;
  if (c->opset < 11) {
    scales = pr_in(c, n, 1);
  } else {
    roi = pr_in(c, n, 1);
    scales = pr_in(c, n, 2);
    sizes = pr_in(c, n, 3);
  }
  if (scales && pr_value_numel(scales) == 0) scales = NULL;
  if (sizes && pr_value_numel(sizes) == 0) sizes = NULL;
  if (!!scales == !!sizes) return pr_fail(c, n, PR_ERR_INVALID, "exactly one of scales and sizes");
  if ((scales && !scales->is_const) || (sizes && !sizes->is_const) || (roi && !roi->is_const))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "scales, sizes and roi must be constant");
  if (scales) {
    if (scales->dtype != PR_DTYPE_FLOAT || pr_value_numel(scales) != x->rank)
      return pr_fail(c, n, PR_ERR_INVALID, "scales needs %d floats", x->rank);
    for (int k = 0; k < x->rank; k++) {
      s->scale[k] = ((const float *)scales->data)[k];
      if (!(s->scale[k] > 0)) return pr_fail(c, n, PR_ERR_INVALID, "scales must be positive");
      s->out[k] = (int64_t)floor((double)x->dims[k] * s->scale[k]);
    }
  } else {
    int64_t sz[PR_MAX_RANK];
    if (pr_const_ints(sizes, sz, PR_MAX_RANK) != x->rank)
      return pr_fail(c, n, PR_ERR_INVALID, "sizes needs %d int64", x->rank);
    for (int k = 0; k < x->rank; k++) {
      if (sz[k] < 1 || x->dims[k] < 1)
        return pr_fail(c, n, PR_ERR_INVALID, "sizes must be positive");
      s->out[k] = sz[k];
      s->scale[k] = (double)sz[k] / (double)x->dims[k];
    }
  }
  for (int k = 0; k < x->rank; k++) s->roi_start[k] = 0, s->roi_end[k] = 1;
  if (s->ct == CT_TF_CROP) {
    if (!roi || roi->dtype != PR_DTYPE_FLOAT || pr_value_numel(roi) != 2 * x->rank)
      return pr_fail(c, n, PR_ERR_INVALID, "tf_crop_and_resize needs roi of %d floats",
                     2 * x->rank);
    for (int k = 0; k < x->rank; k++) {
      s->roi_start[k] = ((const float *)roi->data)[k];
      s->roi_end[k] = ((const float *)roi->data)[k + x->rank];
    }
  }
  return PR_OK;
}

static pr_status_t infer_resize(pr_compile_t *c, pr_node_t *n) {
  resize_state_t s;
  pr_status_t st = resize_params(c, n, &s);
  if (st) return st;
  pr_value_set_shape(pr_out(c, n, 0), PR_DTYPE_FLOAT, s.rank, s.out);
  return PR_OK;
}

static pr_status_t prepare_resize(pr_compile_t *c, pr_node_t *n) {
  resize_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_status_t st = resize_params(c, n, s);
  if (st) return st;
  /* scratch for the passes: at most the largest intermediate shape */
  pr_value_t *x = pr_in(c, n, 0);
  int64_t cur[PR_MAX_RANK], big = pr_value_numel(x);
  memcpy(cur, x->dims, sizeof cur);
  for (int k = 0; k < s->rank; k++) {
    cur[k] = s->out[k];
    int64_t e = 1;
    for (int j = 0; j < s->rank; j++) e *= cur[j];
    if (e > big) big = e;
  }
  for (int i = 0; i < 2; i++)
    if (!(s->tmp[i] = pr_aligned_alloc((size_t)big * sizeof(float)))) return PR_ERR_NOMEM;
  return PR_OK;
}

static double src_coord(const resize_state_t *s, int k, int64_t o, int64_t in_len) {
  /* the resized length is in_len * scale, unrounded, as ONNX defines it */
  double sc = s->scale[k], out_len = sc * (double)in_len;
  switch (s->ct) {
    case CT_HALF_PIXEL: return ((double)o + 0.5) / sc - 0.5;
    case CT_PYTORCH_HALF_PIXEL: return out_len > 1 ? ((double)o + 0.5) / sc - 0.5 : 0;
    case CT_ALIGN_CORNERS:
      return out_len == 1 ? 0 : (double)o * (double)(in_len - 1) / (out_len - 1);
    case CT_ASYMMETRIC: return (double)o / sc;
    case CT_TF_HALF_PIXEL_NN: return ((double)o + 0.5) / sc;
    case CT_TF_CROP: {
      double a = s->roi_start[k], b = s->roi_end[k];
      return out_len > 1 ? a * (double)(in_len - 1) +
                               (double)o * (b - a) * (double)(in_len - 1) / (out_len - 1)
                         : 0.5 * (a + b) * (double)(in_len - 1);
    }
  }
  return 0;
}

/* One pass along axis k: in has dims d (d[k] = in_len), out has d[k] = out_len. */
static void pass(const resize_state_t *s, int k, const int64_t *d, const float *in, float *out,
                 int threads) {
  int64_t outer = 1, inner = 1, in_len = d[k], out_len = s->out[k];
  for (int j = 0; j < k; j++) outer *= d[j];
  for (int j = k + 1; j < s->rank; j++) inner *= d[j];
#pragma omp parallel for num_threads(threads) if (outer * out_len * inner > 16384)
  for (int64_t o = 0; o < out_len; o++) {
    double x = src_coord(s, k, o, in_len);
    bool extrap = s->ct == CT_TF_CROP && (x < 0 || x > (double)(in_len - 1));
    int64_t i0, i1;
    float w = 0.f;
    if (s->linear) {
      double xc = x < 0 ? 0 : x > (double)(in_len - 1) ? (double)(in_len - 1) : x;
      i0 = (int64_t)floor(xc);
      i1 = i0 + 1 < in_len ? i0 + 1 : in_len - 1;
      w = (float)(xc - (double)i0);
    } else {
      double f = floor(x), frac = x - f;
      switch (s->nm) {
        case NM_ROUND_FLOOR: i0 = (int64_t)(frac == 0.5 ? f : round(x)); break;
        case NM_ROUND_CEIL: i0 = (int64_t)(frac == 0.5 ? f + 1 : round(x)); break;
        case NM_FLOOR: i0 = (int64_t)f; break;
        default: i0 = (int64_t)ceil(x); break;
      }
      if (i0 < 0) i0 = 0;
      if (i0 >= in_len) i0 = in_len - 1;
      i1 = i0;
    }
    for (int64_t a = 0; a < outer; a++) {
      const float *p0 = in + (a * in_len + i0) * inner, *p1 = in + (a * in_len + i1) * inner;
      float *po = out + (a * out_len + o) * inner;
      if (extrap)
        for (int64_t j = 0; j < inner; j++) po[j] = s->extrapolation;
      else if (s->linear)
        for (int64_t j = 0; j < inner; j++) po[j] = p0[j] + w * (p1[j] - p0[j]);
      else
        memcpy(po, p0, (size_t)inner * sizeof(float));
    }
  }
}

static void run_resize(pr_exec_t *x, pr_node_t *n) {
  resize_state_t *s = n->state;
  const pr_value_t *in = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t d[PR_MAX_RANK];
  memcpy(d, in->dims, sizeof d);
  int last = -1;
  for (int k = 0; k < s->rank; k++)
    if (s->out[k] != in->dims[k] || s->ct == CT_TF_CROP || s->scale[k] != 1.0) last = k;
  if (last < 0) {
    pr_copy(o->ptr, in->ptr, o->nbytes, x->threads);
    return;
  }
  const float *src = in->ptr;
  int t = 0;
  for (int k = 0; k <= last; k++) {
    if (!(s->out[k] != in->dims[k] || s->ct == CT_TF_CROP || s->scale[k] != 1.0)) continue;
    float *dst = k == last ? (float *)o->ptr : s->tmp[t];
    pass(s, k, d, src, dst, x->threads);
    d[k] = s->out[k];
    src = dst;
    t ^= 1;
  }
}

const pr_op_t pr_op_resize = {.name = "Resize",
                              .attrs =
                                  "mode,coordinate_transformation_mode,nearest_mode,"
                                  "extrapolation_value,cubic_coeff_a,exclude_outside",
                              .min_opset = 10,
                              .max_inputs = 4,
                              .infer = infer_resize,
                              .prepare = prepare_resize,
                              .run = run_resize,
                              .destroy = destroy_resize};
