/* RoiAlign (opsets 10 and 16): each region of interest of X, given by its
 * corners (x1, y1, x2, y2) and a batch index, pooled into an
 * output_height x output_width grid of bins, each the average (or max) of
 * bilinear samples.
 *
 * Notes on the design:
 * - Opset 16's coordinate_transformation_mode: half_pixel (its default)
 *   shifts the scaled corners by -0.5; output_half_pixel (opset 10's only
 *   behaviour) does not and makes every region at least 1 x 1.
 * - sampling_ratio 0: ceil(region size / bins) samples per bin and axis.
 * - A sample more than one pixel outside X contributes zero; max mode takes,
 *   per sample, the largest of the four weighted neighbours (as ONNX
 *   Runtime and ONNX's reference).
 * - FLOAT, DOUBLE and FLOAT16, computed in double. A batch index outside X
 *   (undefined in ONNX) fails the run, naming the node, as in ONNX
 *   Runtime. */
#include <math.h>
#include <string.h>

#include "engine/ops/ops.h"

static pr_status_t infer_roi_align(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *rois = pr__in(c, n, 1), *bi = pr__in(c, n, 2);
  if (!x || !rois || !bi || !pr__is_real(x->dtype) || rois->dtype != x->dtype)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "X and rois of one type: FLOAT, DOUBLE, FLOAT16");
  if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 ||
      bi->dims[0] != rois->dims[0] || (bi->dtype != PR_DTYPE_INT64 && bi->dtype != PR_DTYPE_INT32))
    return pr__fail(c, n, PR_ERR_INVALID, "X (N, C, H, W), rois (R, 4), batch_indices (R)");
  const char *mode = pr__attr_string(n->m, "mode", "avg");
  if (strcmp(mode, "avg") && strcmp(mode, "max"))
    return pr__fail(c, n, PR_ERR_INVALID, "mode '%s'", mode);
  const char *ct = pr__attr_string(n->m, "coordinate_transformation_mode", "half_pixel");
  if (c->opset >= 16 && strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel"))
    return pr__fail(c, n, PR_ERR_INVALID, "coordinate_transformation_mode '%s'", ct);
  int64_t oh = pr__attr_int(n->m, "output_height", 1), ow = pr__attr_int(n->m, "output_width", 1);
  if (oh < 1 || ow < 1 || pr__attr_int(n->m, "sampling_ratio", 0) < 0)
    return pr__fail(c, n, PR_ERR_INVALID, "output size and sampling_ratio");
  int64_t d[4] = {rois->dims[0], x->dims[1], oh, ow};
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, 4, d);
  return PR_OK;
}

/* State: the corner offset, which depends on the opset. */
static pr_status_t prepare_roi_align(pr_compile_t *c, pr_node_t *n) {
  double *offset = malloc(sizeof *offset);
  if (!offset) return PR_ERR_NOMEM;
  n->state = offset;
  const char *ct = pr__attr_string(n->m, "coordinate_transformation_mode", "half_pixel");
  *offset = c->opset >= 16 && !strcmp(ct, "half_pixel") ? 0.5 : 0;
  return PR_OK;
}

typedef struct {
  int64_t H, W;
  const void *x;
  pr_dtype_t t;
  int64_t base;
} plane_t;

/* One bilinear sample at (y, x): the four weighted neighbours in v[]; false
 * when the sample lies more than a pixel outside. */
static bool sample4(const plane_t *p, double y, double x, double *v) {
  if (p->H < 1 || p->W < 1) return false;
  if (!(y >= -1.0 && y <= (double)p->H && x >= -1.0 && x <= (double)p->W)) return false; /* NaN */
  y = y <= 0 ? 0 : y, x = x <= 0 ? 0 : x;
  int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
  if (y0 >= p->H - 1)
    y1 = y0 = p->H - 1, y = (double)y0;
  else
    y1 = y0 + 1;
  if (x0 >= p->W - 1)
    x1 = x0 = p->W - 1, x = (double)x0;
  else
    x1 = x0 + 1;
  double ly = y - (double)y0, lx = x - (double)x0, hy = 1 - ly, hx = 1 - lx;
  v[0] = hy * hx * pr__load_double(p->x, p->t, p->base + y0 * p->W + x0);
  v[1] = hy * lx * pr__load_double(p->x, p->t, p->base + y0 * p->W + x1);
  v[2] = ly * hx * pr__load_double(p->x, p->t, p->base + y1 * p->W + x0);
  v[3] = ly * lx * pr__load_double(p->x, p->t, p->base + y1 * p->W + x1);
  return true;
}

static void run_roi_align(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *rv = &x->v[n->in[1]], *bv = &x->v[n->in[2]];
  const pr_value_t *o = &x->v[n->out[0]];
  bool max_mode = !strcmp(pr__attr_string(n->m, "mode", "avg"), "max");
  double offset = *(const double *)n->state, scale = pr__attr_float(n->m, "spatial_scale", 1.f);
  int64_t sr = pr__attr_int(n->m, "sampling_ratio", 0);
  int64_t R = rv->dims[0], N = a->dims[0], C = a->dims[1], OH = o->dims[2], OW = o->dims[3];
  for (int64_t r = 0; r < R; r++) {
    int64_t b = pr__load_int64(bv->ptr, bv->dtype, r);
    if (b < 0 || b >= N) {
      pr__run_fail(x, n, PR_ERR_INVALID, "batch index %lld out of range [0, %lld]", (long long)b,
                   (long long)(N - 1));
      return;
    }
  }
#pragma omp parallel for collapse(2) num_threads(x->threads) if (R * C * OH * OW > 1024)
  for (int64_t r = 0; r < R; r++)
    for (int64_t ch = 0; ch < C; ch++) {
      int64_t b = pr__load_int64(bv->ptr, bv->dtype, r);
      plane_t p = {a->dims[2], a->dims[3], a->ptr, a->dtype,
                   (b * C + ch) * a->dims[2] * a->dims[3]};
      double x1 = pr__load_double(rv->ptr, rv->dtype, r * 4) * scale - offset,
             y1 = pr__load_double(rv->ptr, rv->dtype, r * 4 + 1) * scale - offset,
             x2 = pr__load_double(rv->ptr, rv->dtype, r * 4 + 2) * scale - offset,
             y2 = pr__load_double(rv->ptr, rv->dtype, r * 4 + 3) * scale - offset;
      double rw = x2 - x1, rh = y2 - y1;
      if (offset == 0) rw = fmax(rw, 1), rh = fmax(rh, 1);
      double bh = rh / (double)OH, bw = rw / (double)OW;
      /* sample counts: bounded so that a huge region cannot stall a run */
      double gh_d = sr > 0 ? (double)sr : ceil(rh / (double)OH),
             gw_d = sr > 0 ? (double)sr : ceil(rw / (double)OW);
      int64_t gh = !(gh_d > 0) ? 0 : gh_d > 4096 ? 4096 : (int64_t)gh_d;
      int64_t gw = !(gw_d > 0) ? 0 : gw_d > 4096 ? 4096 : (int64_t)gw_d;
      double count = gh * gw > 0 ? (double)(gh * gw) : 1;
      for (int64_t ph = 0; ph < OH; ph++)
        for (int64_t pw = 0; pw < OW; pw++) {
          double acc = 0, v[4];
          bool first = true;
          for (int64_t iy = 0; iy < gh; iy++) {
            double y = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
            for (int64_t ix = 0; ix < gw; ix++) {
              double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
              bool in = b >= 0 && b < N && sample4(&p, y, xx, v);
              if (!in) v[0] = v[1] = v[2] = v[3] = 0;
              if (max_mode) {
                double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
                acc = first || m > acc ? m : acc;
                first = false;
              } else {
                acc += v[0] + v[1] + v[2] + v[3];
              }
            }
          }
          double res = max_mode ? acc : acc / count;
          int64_t oi = ((r * C + ch) * OH + ph) * OW + pw;
          if (o->dtype == PR_DTYPE_FLOAT)
            ((float *)o->ptr)[oi] = (float)res;
          else if (o->dtype == PR_DTYPE_DOUBLE)
            ((double *)o->ptr)[oi] = res;
          else
            ((uint16_t *)o->ptr)[oi] = pr__float_to_half((float)res);
        }
    }
}

const pr_op_t pr__op_roi_align = {.name = "RoiAlign",
                                  .attrs =
                                      "coordinate_transformation_mode,mode,output_height,"
                                      "output_width,sampling_ratio,spatial_scale",
                                  .min_opset = 10,
                                  .max_inputs = 3,
                                  .infer = infer_roi_align,
                                  .prepare = prepare_roi_align,
                                  .run = run_roi_align,
                                  .destroy = free};
