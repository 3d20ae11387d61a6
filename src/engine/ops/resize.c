/* Resize (opset 10+): nearest, linear and cubic, every coordinate
 * transformation mode, as separable 1-D passes over the axes that change.
 * Opset 18's axes and keep_aspect_ratio_policy and opset 19's
 * half_pixel_symmetric are understood; antialias is refused. Upsample
 * (opsets 7 and 9, deprecated) is Resize with scales, asymmetric
 * coordinates and floor rounding; Resize-10 is the same except that nearest
 * rounds up on an axis that shrinks (ONNX's test_resize_downsample_nearest
 * of opset 10: 4 -> 2 at scale 0.6 takes elements 0 and 2). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"

typedef enum {
  CT_HALF_PIXEL,
  CT_HALF_PIXEL_SYMMETRIC,
  CT_PYTORCH_HALF_PIXEL,
  CT_ALIGN_CORNERS,
  CT_ASYMMETRIC,
  CT_TF_HALF_PIXEL_NN,
  CT_TF_CROP
} coord_t;
typedef enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL } nearest_t;

typedef enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC } mode_t_;

/* Where output position o of a pass reads: up to 4 source indices and
 * their weights (nearest: 1, linear: 2, cubic: 4), or the extrapolation
 * value. */
typedef struct tap {
  int64_t idx[4];
  float w[4];
  int n;
  bool extrap;
} tap_t;

typedef struct {
  mode_t_ mode;
  double cubic_a;
  bool exclude_outside;
  coord_t ct;
  nearest_t nm;
  bool ceil_shrinking; /* Resize-10: nearest rounds up where scale < 1 */
  float extrapolation;
  int rank;
  double scale[PR_MAX_RANK];
  float roi_start[PR_MAX_RANK], roi_end[PR_MAX_RANK];
  int64_t out[PR_MAX_RANK];
  float *tmp[2];
  tap_t *taps; /* one per output position of the longest axis (pass) */
} resize_state_t;

static void destroy_resize(void *p) {
  resize_state_t *s = p;
  if (!s) return;
  pr__free(s->tmp[0]);
  pr__free(s->tmp[1]);
  free(s->taps);
  free(s);
}

/* Modes of a Resize or Upsample node: interpolation, coordinate transform,
 * nearest rounding. */
static pr_status_t resize_modes(pr_compile_t *c, pr_node_t *n, resize_state_t *s, bool upsample) {
  const char *mode = pr__attr_string(n->m, "mode", "nearest");
  if (!strcmp(mode, "linear") || (upsample && !strcmp(mode, "bilinear")))
    s->mode = MODE_LINEAR;
  else if (!strcmp(mode, "cubic") && !upsample)
    s->mode = MODE_CUBIC;
  else if (!strcmp(mode, "nearest"))
    s->mode = MODE_NEAREST;
  else
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "mode '%s'", mode);
  s->cubic_a = pr__attr_float(n->m, "cubic_coeff_a", -0.75f);
  s->exclude_outside = pr__attr_int(n->m, "exclude_outside", 0) != 0;
  if (pr__attr_int(n->m, "antialias", 0)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "antialias");
  const char *ct = pr__attr_string(n->m, "coordinate_transformation_mode", "half_pixel");
  if (c->opset < 11 || upsample) ct = "asymmetric";
  static const char *cts[] = {"half_pixel",        "half_pixel_symmetric", "pytorch_half_pixel",
                              "align_corners",     "asymmetric",           "tf_half_pixel_for_nn",
                              "tf_crop_and_resize"};
  s->ct = (coord_t)-1;
  for (int i = 0; i < 7; i++)
    if (!strcmp(ct, cts[i])) s->ct = (coord_t)i;
  if ((int)s->ct < 0 || (s->ct == CT_HALF_PIXEL_SYMMETRIC && c->opset < 19))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "coordinate mode '%s'", ct);
  const char *nm = pr__attr_string(n->m, "nearest_mode",
                                   c->opset < 11 || upsample ? "floor" : "round_prefer_floor");
  static const char *nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  s->nm = (nearest_t)-1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(nm, nms[i])) s->nm = (nearest_t)i;
  if ((int)s->nm < 0) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "nearest_mode '%s'", nm);
  s->ceil_shrinking = c->opset < 11 && !upsample;
  s->extrapolation = pr__attr_float(n->m, "extrapolation_value", 0.f);
  return PR_OK;
}

/* Output sizes given (sz, for the na axes listed): the scales, or opset
 * 18's one scale for every listed axis, the largest that fits
 * (not_larger) or the smallest that covers (not_smaller). */
static pr_status_t sizes_to_scales(pr_compile_t *c, pr_node_t *n, const pr_value_t *x,
                                   const int64_t *sz, const int *axes, int na, resize_state_t *s) {
  const char *policy = pr__attr_string(n->m, "keep_aspect_ratio_policy", "stretch");
  if (c->opset < 18) policy = "stretch";
  bool fit = !strcmp(policy, "not_larger"), cover = !strcmp(policy, "not_smaller");
  if (!fit && !cover && strcmp(policy, "stretch"))
    return pr__fail(c, n, PR_ERR_INVALID, "keep_aspect_ratio_policy '%s'", policy);
  double common = fit ? INFINITY : 0;
  for (int i = 0; i < na; i++) {
    int k = axes[i];
    if (sz[i] < 1 || x->dims[k] < 1)
      return pr__fail(c, n, PR_ERR_INVALID, "sizes must be positive");
    double r = (double)sz[i] / (double)x->dims[k];
    common = fit ? fmin(common, r) : fmax(common, r);
    s->out[k] = sz[i];
    s->scale[k] = r;
  }
  for (int i = 0; (fit || cover) && i < na; i++) {
    int k = axes[i];
    s->scale[k] = common;
    s->out[k] = (int64_t)floor(common * (double)x->dims[k] + 0.5);
  }
  return PR_OK;
}

static pr_status_t resize_params(pr_compile_t *c, pr_node_t *n, resize_state_t *s) {
  pr_value_t *x = pr__in(c, n, 0);
  if (!x || x->dtype != PR_DTYPE_FLOAT) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT");
  bool upsample = !strcmp(n->op->name, "Upsample");
  pr_status_t st = resize_modes(c, n, s, upsample);
  if (st) return st;
  s->rank = x->rank;
  pr_value_t *roi = NULL, *scales = NULL, *sizes = NULL;
  const float *attr_scales = NULL;
  int n_attr_scales = 0;
  if (upsample && c->opset < 9) {
    n_attr_scales = pr__attr_floats(n->m, "scales", &attr_scales);
    if (n_attr_scales != x->rank)
      return pr__fail(c, n, PR_ERR_INVALID, "scales needs %d floats", x->rank);
  } else if (upsample || c->opset < 11) {
    scales = pr__in(c, n, 1);
  } else {
    roi = pr__in(c, n, 1);
    scales = pr__in(c, n, 2);
    sizes = pr__in(c, n, 3);
  }
  if (scales && pr__value_numel(scales) == 0) scales = NULL;
  if (sizes && pr__value_numel(sizes) == 0) sizes = NULL;
  if (!attr_scales && !!scales == !!sizes)
    return pr__fail(c, n, PR_ERR_INVALID, "exactly one of scales and sizes");
  if ((scales && !scales->is_const) || (sizes && !sizes->is_const) || (roi && !roi->is_const))
    return pr__need_values(c, n, "scales, sizes and roi must be constant");
  /* opset 18: scales or sizes of the axes listed (default every axis) */
  int axes[PR_MAX_RANK], na = x->rank;
  const int64_t *av;
  int nav = c->opset >= 18 ? pr__attr_ints(n->m, "axes", &av) : 0;
  if (nav > x->rank) return pr__fail(c, n, PR_ERR_INVALID, "too many axes");
  for (int k = 0; k < x->rank; k++) axes[k] = k;
  if (nav) {
    na = nav;
    for (int i = 0; i < na; i++)
      if ((axes[i] = pr__axis(av[i], x->rank)) < 0)
        return pr__fail(c, n, PR_ERR_INVALID, "axis %lld out of range", (long long)av[i]);
  }
  for (int k = 0; k < x->rank; k++) s->scale[k] = 1, s->out[k] = x->dims[k];
  if (scales || attr_scales) {
    if (scales && (scales->dtype != PR_DTYPE_FLOAT || pr__value_numel(scales) != na))
      return pr__fail(c, n, PR_ERR_INVALID, "scales needs %d floats", na);
    for (int i = 0; i < na; i++) {
      int k = axes[i];
      s->scale[k] = attr_scales ? attr_scales[i] : ((const float *)scales->data)[i];
      if (!(s->scale[k] > 0)) return pr__fail(c, n, PR_ERR_INVALID, "scales must be positive");
      double len = floor((double)x->dims[k] * s->scale[k]);
      if (!(len < 4.6e18)) return pr__fail(c, n, PR_ERR_INVALID, "scales too large");
      s->out[k] = (int64_t)len;
    }
  } else {
    int64_t sz[PR_MAX_RANK];
    if (pr__const_ints(sizes, sz, PR_MAX_RANK) != na)
      return pr__fail(c, n, PR_ERR_INVALID, "sizes needs %d int64", na);
    if ((st = sizes_to_scales(c, n, x, sz, axes, na, s))) return st;
  }
  for (int k = 0; k < x->rank; k++) s->roi_start[k] = 0, s->roi_end[k] = 1;
  if (s->ct == CT_TF_CROP) {
    if (!roi || roi->dtype != PR_DTYPE_FLOAT || pr__value_numel(roi) != 2 * na)
      return pr__fail(c, n, PR_ERR_INVALID, "tf_crop_and_resize needs roi of %d floats", 2 * na);
    for (int i = 0; i < na; i++) {
      s->roi_start[axes[i]] = ((const float *)roi->data)[i];
      s->roi_end[axes[i]] = ((const float *)roi->data)[i + na];
    }
  }
  return PR_OK;
}

static pr_status_t infer_resize(pr_compile_t *c, pr_node_t *n) {
  resize_state_t s;
  pr_status_t st = resize_params(c, n, &s);
  if (st) return st;
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_FLOAT, s.rank, s.out);
  return PR_OK;
}

static pr_status_t prepare_resize(pr_compile_t *c, pr_node_t *n) {
  resize_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_status_t st = resize_params(c, n, s);
  if (st) return st;
  /* scratch for the passes: at most the largest intermediate shape */
  pr_value_t *x = pr__in(c, n, 0);
  int64_t cur[PR_MAX_RANK], big = pr__value_numel(x);
  memcpy(cur, x->dims, sizeof cur);
  for (int k = 0; k < s->rank; k++) {
    cur[k] = s->out[k];
    int64_t e = 1;
    for (int j = 0; j < s->rank; j++) e *= cur[j];
    if (e > big) big = e;
  }
  for (int i = 0; i < 2; i++)
    if (!(s->tmp[i] = pr__aligned_alloc((size_t)big * sizeof(float)))) return PR_ERR_NOMEM;
  int64_t longest = 1;
  for (int k = 0; k < s->rank; k++) longest = s->out[k] > longest ? s->out[k] : longest;
  if (!(s->taps = calloc((size_t)longest, sizeof *s->taps))) return PR_ERR_NOMEM;
  return PR_OK;
}

static double src_coord(const resize_state_t *s, int k, int64_t o, int64_t in_len) {
  /* the resized length is in_len * scale, unrounded, as ONNX's tests take
   * it; but scales are floats, and a length just above the output's length
   * (its floor) by the float's rounding is that length, as the scale meant
   * (5 x 0.6f is 3.0000001: align_corners would read the last of 3 outputs
   * at 3.9999998 of 5, and nearest's floor take element 3). One just below
   * the next whole number stays as it is: the output is a shorter one
   * (10 x 0.7f is 6.9999999, 6 outputs, read as ONNX's reference reads
   * them) */
  double sc = s->scale[k], out_len = sc * (double)in_len, whole = nearbyint(out_len);
  if (whole == (double)s->out[k] && fabs(out_len - whole) <= 4 * FLT_EPSILON * out_len)
    out_len = whole;
  switch (s->ct) {
    case CT_HALF_PIXEL: return ((double)o + 0.5) / sc - 0.5;
    case CT_HALF_PIXEL_SYMMETRIC: {
      /* centred: the rounding of the output length shared by both ends */
      double adjust = (double)s->out[k] / out_len, centre = (double)in_len / 2;
      return centre * (1 - adjust) + ((double)o + 0.5) / sc - 0.5;
    }
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

/* The 4 source indices (clamped to the edges) and weights of a cubic tap
 * at coordinate x: Keys' kernel with parameter a at distances 1 + t, t,
 * 1 - t, 2 - t; exclude_outside drops the taps outside and renormalizes. */
static void cubic_taps(const resize_state_t *s, double x, int64_t in_len, int64_t *idx, float *w) {
  /* far outside, every tap is on the edge either way; the bound keeps the
   * index conversion defined */
  double lim = (double)in_len + 8;
  x = !(x >= -8) ? -8 : x > lim ? lim : x; /* NaN (a NaN roi) to -8 */
  double A = s->cubic_a, f = floor(x), t = x - f, sum = 0, cw[4];
  double d[4] = {1 + t, t, 1 - t, 2 - t};
  for (int i = 0; i < 4; i++) {
    double z = d[i];
    cw[i] =
        z <= 1 ? ((A + 2) * z - (A + 3)) * z * z + 1 : ((A * z - 5 * A) * z + 8 * A) * z - 4 * A;
    int64_t p = (int64_t)f - 1 + i;
    if (s->exclude_outside && (p < 0 || p >= in_len)) cw[i] = 0;
    sum += cw[i];
    idx[i] = p < 0 ? 0 : p >= in_len ? in_len - 1 : p;
  }
  for (int i = 0; i < 4; i++) w[i] = (float)(s->exclude_outside && sum != 0 ? cw[i] / sum : cw[i]);
}

static void tap_of(const resize_state_t *s, int k, int64_t o, int64_t in_len, tap_t *t) {
  double x = src_coord(s, k, o, in_len);
  t->extrap = s->ct == CT_TF_CROP && (x < 0 || x > (double)(in_len - 1));
  if (s->mode == MODE_CUBIC) {
    cubic_taps(s, x, in_len, t->idx, t->w);
    t->n = 4;
    return;
  }
  if (s->mode == MODE_LINEAR) {
    double xc = !(x >= 0) ? 0 : x > (double)(in_len - 1) ? (double)(in_len - 1) : x;
    int64_t i0 = (int64_t)floor(xc);
    float w = (float)(xc - (double)i0);
    t->idx[0] = i0, t->idx[1] = i0 + 1 < in_len ? i0 + 1 : in_len - 1;
    t->w[0] = 1.f - w, t->w[1] = w;
    t->n = 2;
    return;
  }
  /* bounded first: the conversions below stay defined */
  x = !(x >= -1) ? -1 : x > (double)in_len ? (double)in_len : x;
  double f = floor(x), frac = x - f;
  int64_t i0;
  switch (s->ceil_shrinking && s->scale[k] < 1 ? NM_CEIL : s->nm) {
    case NM_ROUND_FLOOR: i0 = (int64_t)(frac == 0.5 ? f : round(x)); break;
    case NM_ROUND_CEIL: i0 = (int64_t)(frac == 0.5 ? f + 1 : round(x)); break;
    case NM_FLOOR: i0 = (int64_t)f; break;
    default: i0 = (int64_t)ceil(x); break;
  }
  t->idx[0] = i0 < 0 ? 0 : i0 >= in_len ? in_len - 1 : i0;
  t->w[0] = 1.f;
  t->n = 1;
}

static inline float tap_value(const tap_t *t, const float *p, int64_t stride, float extrapolation) {
  if (t->extrap) return extrapolation;
  switch (t->n) {
    case 1: return p[t->idx[0] * stride];
    case 2: {
      float a = p[t->idx[0] * stride], b = p[t->idx[1] * stride];
      return a + t->w[1] * (b - a);
    }
    default:
      return t->w[0] * p[t->idx[0] * stride] + t->w[1] * p[t->idx[1] * stride] +
             t->w[2] * p[t->idx[2] * stride] + t->w[3] * p[t->idx[3] * stride];
  }
}

/* One pass along axis k: in has dims d (d[k] = in_len), out has d[k] =
 * out_len. The last axis (inner 1) walks each row once, reading through the
 * taps; others copy or blend whole inner rows. */
static void pass(const resize_state_t *s, int k, const int64_t *d, const float *in, float *out,
                 tap_t *taps, int threads) {
  int64_t outer = 1, inner = 1, in_len = d[k], out_len = s->out[k];
  for (int j = 0; j < k; j++) outer *= d[j];
  for (int j = k + 1; j < s->rank; j++) inner *= d[j];
  for (int64_t o = 0; o < out_len; o++) tap_of(s, k, o, in_len, &taps[o]);
  float ex = s->extrapolation;
  if (inner == 1) {
#pragma omp parallel for num_threads(threads) if (outer * out_len > 16384)
    for (int64_t a = 0; a < outer; a++) {
      const float *pa = in + a * in_len;
      float *po = out + a * out_len;
      for (int64_t o = 0; o < out_len; o++) po[o] = tap_value(&taps[o], pa, 1, ex);
    }
    return;
  }
#pragma omp parallel for num_threads(threads) if (outer * out_len * inner > 16384)
  for (int64_t o = 0; o < out_len; o++) {
    const tap_t *t = &taps[o];
    for (int64_t a = 0; a < outer; a++) {
      const float *pa = in + a * in_len * inner;
      float *po = out + (a * out_len + o) * inner;
      if (t->extrap)
        for (int64_t j = 0; j < inner; j++) po[j] = ex;
      else if (t->n == 1)
        memcpy(po, pa + t->idx[0] * inner, (size_t)inner * sizeof(float));
      else
        for (int64_t j = 0; j < inner; j++) po[j] = tap_value(t, pa + j, inner, ex);
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
    pr__copy(o->ptr, in->ptr, o->nbytes, x->threads);
    return;
  }
  const float *src = in->ptr;
  int t = 0;
  for (int k = 0; k <= last; k++) {
    if (!(s->out[k] != in->dims[k] || s->ct == CT_TF_CROP || s->scale[k] != 1.0)) continue;
    float *dst = k == last ? (float *)o->ptr : s->tmp[t];
    pass(s, k, d, src, dst, s->taps, x->threads);
    d[k] = s->out[k];
    src = dst;
    t ^= 1;
  }
}

const pr_op_t pr__op_upsample = {.name = "Upsample",
                                 .attrs = "mode,scales",
                                 .min_opset = 7,
                                 .max_inputs = 2,
                                 .infer = infer_resize,
                                 .prepare = prepare_resize,
                                 .run = run_resize,
                                 .destroy = destroy_resize};

const pr_op_t pr__op_resize = {
    .name = "Resize",
    .attrs =
        "mode,coordinate_transformation_mode,nearest_mode,"
        "extrapolation_value,cubic_coeff_a,exclude_outside,antialias,axes,"
        "keep_aspect_ratio_policy",
    .min_opset = 10,
    .max_inputs = 4,
    .infer = infer_resize,
    .prepare = prepare_resize,
    .run = run_resize,
    .destroy = destroy_resize};
