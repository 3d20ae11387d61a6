/* Calibration statistics and quantization parameters (calib.h). */
#include "engine/quantize/calib.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

void pr__qz_range_init(pr_qz_range_t *r) {
  *r = (pr_qz_range_t){.min = INFINITY, .max = -INFINITY, .threshold = -1};
}

void pr__qz_range_free(pr_qz_range_t *r) {
  free(r->hist);
  r->hist = NULL;
}

void pr__qz_range_add(pr_qz_range_t *r, const float *x, int64_t n) {
  float lo = r->min, hi = r->max;
  int64_t count = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (!isfinite(v)) continue;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    count++;
  }
  r->min = lo, r->max = hi, r->count += count;
}

pr_status_t pr__qz_range_hist_begin(pr_qz_range_t *r) {
  free(r->hist);
  r->hist = calloc(PR_QZ_BINS, sizeof *r->hist);
  r->hist_count = 0;
  return r->hist ? PR_OK : PR_ERR_NOMEM;
}

pr_status_t pr__qz_range_hist_begin_abs(pr_qz_range_t *r) {
  pr_status_t st = pr__qz_range_hist_begin(r);
  r->absolute = true;
  return st;
}

/* The largest |x| of the range. */
static double abs_max(const pr_qz_range_t *r) {
  return fmax(fabs((double)r->min), fabs((double)r->max));
}

void pr__qz_range_hist_add(pr_qz_range_t *r, const float *x, int64_t n) {
  if (!r->hist || !(r->max > r->min)) return;
  int bins = r->absolute ? PR_QZ_KL_BINS : PR_QZ_BINS;
  double origin = r->absolute ? 0 : r->min;
  double width = ((r->absolute ? abs_max(r) : r->max) - origin) / bins;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) continue;
    double b = ((r->absolute ? fabs((double)x[i]) : (double)x[i]) - origin) / width;
    int64_t k = b < 0 ? 0 : b >= bins ? bins - 1 : (int64_t)b;
    r->hist[k]++;
    r->hist_count++;
  }
}

void pr__qz_range_get(const pr_qz_range_t *r, double pct, float *lo, float *hi) {
  if (!(r->max >= r->min)) {
    *lo = *hi = 0;
    return;
  }
  *lo = r->min, *hi = r->max;
  if (r->absolute) {
    if (r->threshold >= 0) *lo = fmaxf(r->min, -r->threshold), *hi = fminf(r->max, r->threshold);
    return;
  }
  if (!r->hist || !r->hist_count || !(r->max > r->min) || pct >= 100) return;
  double width = ((double)r->max - r->min) / PR_QZ_BINS;
  double tail = (double)r->hist_count * (100 - pct) / 100;
  /* hi: the upper edge of the bin where more than `tail` samples lie above
   * its lower edge no longer holds; lo likewise from below */
  int64_t above = 0, below = 0;
  int k;
  for (k = PR_QZ_BINS - 1; k > 0 && (double)(above + r->hist[k]) <= tail; k--) above += r->hist[k];
  *hi = (float)(r->min + width * (k + 1));
  for (k = 0; k < PR_QZ_BINS - 1 && (double)(below + r->hist[k]) <= tail; k++) below += r->hist[k];
  *lo = (float)(r->min + width * k);
  if (*hi > r->max) *hi = r->max;
  if (*lo < r->min) *lo = r->min;
}

/* ---- entropy ---- */

/* ONNX Runtime's smooth_distribution: eps where v is zero, taken evenly
 * from the others; false when all are zero. */
static bool smooth(double *v, int n) {
  int zeros = 0;
  for (int k = 0; k < n; k++) zeros += v[k] == 0;
  if (zeros == n) return false;
  double eps = 1e-4, eps1 = eps * zeros / (n - zeros);
  for (int k = 0; k < n; k++) v[k] = v[k] == 0 ? eps : fmax(v[k] - eps1, eps * 1e-3);
  return true;
}

/* KL(P || Q) for the first i bins (calib.h's notes); p and q scratch of i
 * values; INFINITY when Q is empty. */
static double kl_at(const int64_t *hist, int i, int64_t outliers, double *p, double *q) {
  int merged = i / PR_QZ_KL_LEVELS;
  for (int k = 0; k < i; k++) p[k] = (double)hist[k], q[k] = 0;
  p[i - 1] += (double)outliers;
  for (int j = 0; j < PR_QZ_KL_LEVELS; j++) {
    int start = j * merged, end = j == PR_QZ_KL_LEVELS - 1 ? i : start + merged;
    double sum = 0;
    int nonzero = 0;
    for (int k = start; k < end; k++) sum += (double)hist[k], nonzero += p[k] != 0;
    for (int k = start; k < end && nonzero; k++) q[k] = p[k] != 0 ? sum / nonzero : 0;
  }
  if (!smooth(p, i) || !smooth(q, i)) return INFINITY;
  double sp = 0, sq = 0, kl = 0;
  for (int k = 0; k < i; k++) sp += p[k], sq += q[k];
  for (int k = 0; k < i; k++) kl += p[k] / sp * log((p[k] / sp) / (q[k] / sq));
  return kl;
}

double pr__qz_kl_threshold(const int64_t *hist, int bins, double width) {
  assert(bins >= PR_QZ_KL_LEVELS);
  double *p = malloc(sizeof(double) * (size_t)bins), *q = malloc(sizeof(double) * (size_t)bins);
  int64_t outliers = 0;
  double best = INFINITY;
  int best_i = bins;
  for (int k = PR_QZ_KL_LEVELS; k < bins; k++) outliers += hist[k];
  for (int i = PR_QZ_KL_LEVELS; p && q && i <= bins; i++) {
    double kl = kl_at(hist, i, outliers, p, q);
    if (kl < best) best = kl, best_i = i;
    if (i < bins) outliers -= hist[i];
  }
  free(p), free(q);
  return best_i * width;
}

void pr__qz_range_entropy(pr_qz_range_t *r) {
  if (!r->absolute || !r->hist || !r->hist_count || !(r->max > r->min)) return;
  r->threshold = (float)pr__qz_kl_threshold(r->hist, PR_QZ_KL_BINS, abs_max(r) / PR_QZ_KL_BINS);
}

void pr__qz_act_params(float lo, float hi, pr_dtype_t t, float *scale, int32_t *zp) {
  float qmin = t == PR_DTYPE_INT8 ? -128.f : 0.f, qmax = qmin + 255.f;
  lo = lo < 0 ? lo : 0;
  hi = hi > 0 ? hi : 0;
  *scale = hi > lo ? (hi - lo) / 255.f : 1.f;
  float z = rintf(qmin - lo / *scale);
  *zp = (int32_t)(z < qmin ? qmin : z > qmax ? qmax : z);
}

void pr__qz_weights_s8(const float *w, int64_t outer, int64_t channels, int64_t inner, int qmax,
                       int8_t *q, float *scale) {
  float top = (float)qmax;
  for (int64_t c = 0; c < channels; c++) {
    float m = 0;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        float a = fabsf(w[(o * channels + c) * inner + i]);
        m = a > m ? a : m;
      }
    scale[c] = m > 0 && isfinite(m) ? m / top : 1.f;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < channels; c++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t k = (o * channels + c) * inner + i;
        float v = rintf(w[k] / scale[c]);
        q[k] = (int8_t)(v < -top ? -qmax : v > top ? qmax : (int)v);
      }
}

void pr__qz_bias_s32(const float *b, int64_t n, float sx, const float *sw, int64_t n_sw,
                     int32_t *q) {
  for (int64_t c = 0; c < n; c++) {
    double v = rint((double)b[c] / ((double)sx * sw[n_sw > 1 ? c : 0]));
    q[c] = v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
  }
}
