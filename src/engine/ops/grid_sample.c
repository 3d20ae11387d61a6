/* GridSample (opset 16; opset 20's mode names linear and cubic accepted
 * from 20): output[n, c, h, w] = input[n, c] sampled at the location
 * grid[n, h, w] = (x, y), normalized to [-1, 1].
 *
 * Notes on the design:
 * - 4-D input only (opset 20's volumetric form is refused); FLOAT, DOUBLE
 *   and FLOAT16, computed in double.
 * - The coordinate rules are PyTorch's grid_sample, which ONNX follows:
 *   unnormalize (align_corners: -1 and 1 are the centres of the corner
 *   pixels; else their outer edges), then border clamps and reflection
 *   mirrors the coordinate for nearest and bilinear; bicubic applies the
 *   padding to each of its 16 taps instead. Pixels outside read as zero. */
#include <math.h>
#include <string.h>

#include "engine/ops/ops.h"

typedef enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC } gs_mode_t;
typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad_t;

typedef struct {
  gs_mode_t mode;
  gs_pad_t pad;
  bool align;
} gs_params_t;

static pr_status_t gs_params(pr_compile_t *c, pr_node_t *n, gs_params_t *p) {
  const char *mode = pr__attr_string(n->m, "mode", c->opset >= 20 ? "linear" : "bilinear");
  const char *pad = pr__attr_string(n->m, "padding_mode", "zeros");
  bool new_names = c->opset >= 20;
  if (!strcmp(mode, new_names ? "linear" : "bilinear"))
    p->mode = GS_BILINEAR;
  else if (!strcmp(mode, "nearest"))
    p->mode = GS_NEAREST;
  else if (!strcmp(mode, new_names ? "cubic" : "bicubic"))
    p->mode = GS_BICUBIC;
  else
    return pr__fail(c, n, PR_ERR_INVALID, "mode '%s'", mode);
  if (!strcmp(pad, "zeros"))
    p->pad = GS_ZEROS;
  else if (!strcmp(pad, "border"))
    p->pad = GS_BORDER;
  else if (!strcmp(pad, "reflection"))
    p->pad = GS_REFLECTION;
  else
    return pr__fail(c, n, PR_ERR_INVALID, "padding_mode '%s'", pad);
  p->align = pr__attr_int(n->m, "align_corners", 0) != 0;
  return PR_OK;
}

static pr_status_t infer_grid_sample(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *g = pr__in(c, n, 1);
  gs_params_t p;
  pr_status_t st = gs_params(c, n, &p);
  if (st) return st;
  if (!x || !g || !pr__is_real(x->dtype) || !pr__is_real(g->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "X and grid of FLOAT, DOUBLE or FLOAT16");
  if (x->rank != 4 || g->rank != 4 || g->dims[0] != x->dims[0] || g->dims[3] != 2)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "X (N, C, H, W) and grid (N, H_out, W_out, 2)");
  int64_t d[4] = {x->dims[0], x->dims[1], g->dims[1], g->dims[2]};
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, 4, d);
  return PR_OK;
}

/* Mirror x into [lo2 / 2, hi2 / 2] (bounds given doubled). */
static double reflect(double x, double lo2, double hi2) {
  if (lo2 == hi2) return 0;
  double lo = lo2 / 2, span = (hi2 - lo2) / 2;
  x = fabs(x - lo);
  double extra = fmod(x, span), flips = floor(x / span);
  return fmod(flips, 2) == 0 ? extra + lo : span - extra + lo;
}

/* Border and reflection padding of a coordinate along an axis of size len. */
static double pad_coord(const gs_params_t *p, double x, int64_t len) {
  double hi = (double)(len - 1);
  if (p->pad == GS_BORDER) return x < 0 ? 0 : x > hi ? hi : x;
  if (p->pad == GS_REFLECTION) {
    x = p->align ? reflect(x, 0, 2 * hi) : reflect(x, -1, 2 * (double)len - 1);
    return x < 0 ? 0 : x > hi ? hi : x;
  }
  return x;
}

static double unnormalize(const gs_params_t *p, double x, int64_t len) {
  return p->align ? (x + 1) / 2 * (double)(len - 1) : ((x + 1) * (double)len - 1) / 2;
}

/* Pixel (y, x) (integral values, as doubles: a grid may hold any float)
 * of one channel plane; zero outside. */
static double pixel(const void *a, pr_dtype_t t, int64_t base, int64_t H, int64_t W, double y,
                    double x) {
  if (!(y >= 0 && y < (double)H && x >= 0 && x < (double)W)) return 0; /* NaN too */
  return pr__load_double(a, t, base + (int64_t)y * W + (int64_t)x);
}

static void cubic_weights(double t, double *w) {
  const double A = -0.75;
  double d[4] = {1 + t, t, 1 - t, 2 - t};
  for (int i = 0; i < 4; i++) {
    double z = d[i];
    w[i] = z <= 1 ? ((A + 2) * z - (A + 3)) * z * z + 1 : ((A * z - 5 * A) * z + 8 * A) * z - 4 * A;
  }
}

static double sample(const gs_params_t *p, const void *a, pr_dtype_t t, int64_t base, int64_t H,
                     int64_t W, double gx, double gy) {
  double x = unnormalize(p, gx, W), y = unnormalize(p, gy, H);
  if (p->mode == GS_BICUBIC) {
    double x0 = floor(x), y0 = floor(y), wx[4], wy[4], v = 0;
    cubic_weights(x - x0, wx);
    cubic_weights(y - y0, wy);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) {
        /* padding per tap; a tap that stays outside reads zero */
        double ty = pad_coord(p, y0 - 1 + i, H), tx = pad_coord(p, x0 - 1 + j, W);
        v += wy[i] * wx[j] * pixel(a, t, base, H, W, ty, tx);
      }
    return v;
  }
  x = pad_coord(p, x, W), y = pad_coord(p, y, H);
  if (p->mode == GS_NEAREST) return pixel(a, t, base, H, W, nearbyint(y), nearbyint(x));
  double x0 = floor(x), y0 = floor(y), fx = x - x0, fy = y - y0;
  double ix = x0, iy = y0;
  return (1 - fy) * ((1 - fx) * pixel(a, t, base, H, W, iy, ix) +
                     fx * pixel(a, t, base, H, W, iy, ix + 1)) +
         fy * ((1 - fx) * pixel(a, t, base, H, W, iy + 1, ix) +
               fx * pixel(a, t, base, H, W, iy + 1, ix + 1));
}

static void run_grid_sample(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *g = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  gs_params_t p = {.mode = GS_BILINEAR};
  /* the names were checked at compile time; the opset is not kept, so the
   * new names are matched here too */
  const char *mode = pr__attr_string(n->m, "mode", "bilinear");
  if (!strcmp(mode, "nearest"))
    p.mode = GS_NEAREST;
  else if (!strcmp(mode, "bicubic") || !strcmp(mode, "cubic"))
    p.mode = GS_BICUBIC;
  const char *pad = pr__attr_string(n->m, "padding_mode", "zeros");
  p.pad = !strcmp(pad, "border")       ? GS_BORDER
          : !strcmp(pad, "reflection") ? GS_REFLECTION
                                       : GS_ZEROS;
  p.align = pr__attr_int(n->m, "align_corners", 0) != 0;
  int64_t N = a->dims[0], C = a->dims[1], H = a->dims[2], W = a->dims[3];
  int64_t Ho = g->dims[1], Wo = g->dims[2];
#pragma omp parallel for collapse(2) num_threads(x->threads) if (N * C * Ho * Wo > 4096)
  for (int64_t i = 0; i < N; i++)
    for (int64_t ch = 0; ch < C; ch++)
      for (int64_t k = 0; k < Ho * Wo; k++) {
        int64_t gi = (i * Ho * Wo + k) * 2;
        double gx = pr__load_double(g->ptr, g->dtype, gi),
               gy = pr__load_double(g->ptr, g->dtype, gi + 1);
        double v = sample(&p, a->ptr, a->dtype, (i * C + ch) * H * W, H, W, gx, gy);
        int64_t oi = (i * C + ch) * Ho * Wo + k;
        if (o->dtype == PR_DTYPE_FLOAT)
          ((float *)o->ptr)[oi] = (float)v;
        else if (o->dtype == PR_DTYPE_DOUBLE)
          ((double *)o->ptr)[oi] = v;
        else
          ((uint16_t *)o->ptr)[oi] = pr__float_to_half((float)v);
      }
}

const pr_op_t pr__op_grid_sample = {.name = "GridSample",
                                    .attrs = "align_corners,mode,padding_mode",
                                    .min_opset = 16,
                                    .max_inputs = 2,
                                    .infer = infer_grid_sample,
                                    .run = run_grid_sample};
