/* Calibration statistics and quantization parameters (calib.h). */
#include "engine/quantize/calib.h"

#include <math.h>
#include <stdlib.h>

void pr_qz_range_init(pr_qz_range_t *r) {
  *r = (pr_qz_range_t){.min = INFINITY, .max = -INFINITY};
}

void pr_qz_range_free(pr_qz_range_t *r) {
  free(r->hist);
  r->hist = NULL;
}

void pr_qz_range_add(pr_qz_range_t *r, const float *x, int64_t n) {
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

pr_status_t pr_qz_range_hist_begin(pr_qz_range_t *r) {
  free(r->hist);
  r->hist = calloc(PR_QZ_BINS, sizeof *r->hist);
  r->hist_count = 0;
  return r->hist ? PR_OK : PR_ERR_NOMEM;
}

void pr_qz_range_hist_add(pr_qz_range_t *r, const float *x, int64_t n) {
  if (!r->hist || !(r->max > r->min)) return;
  double width = ((double)r->max - r->min) / PR_QZ_BINS;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) continue;
    double b = ((double)x[i] - r->min) / width;
    int64_t k = b < 0 ? 0 : b >= PR_QZ_BINS ? PR_QZ_BINS - 1 : (int64_t)b;
    r->hist[k]++;
    r->hist_count++;
  }
}

void pr_qz_range_get(const pr_qz_range_t *r, double pct, float *lo, float *hi) {
  if (!(r->max >= r->min)) {
    *lo = *hi = 0;
    return;
  }
  *lo = r->min, *hi = r->max;
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

void pr_qz_act_params(float lo, float hi, pr_dtype_t t, float *scale, int32_t *zp) {
  float qmin = t == PR_DTYPE_INT8 ? -128.f : 0.f, qmax = qmin + 255.f;
  lo = lo < 0 ? lo : 0;
  hi = hi > 0 ? hi : 0;
  *scale = hi > lo ? (hi - lo) / 255.f : 1.f;
  float z = rintf(qmin - lo / *scale);
  *zp = (int32_t)(z < qmin ? qmin : z > qmax ? qmax : z);
}

void pr_qz_weights_s8(const float *w, int64_t outer, int64_t channels, int64_t inner, int8_t *q,
                      float *scale) {
  for (int64_t c = 0; c < channels; c++) {
    float m = 0;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        float a = fabsf(w[(o * channels + c) * inner + i]);
        m = a > m ? a : m;
      }
    scale[c] = m > 0 && isfinite(m) ? m / 127.f : 1.f;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < channels; c++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t k = (o * channels + c) * inner + i;
        float v = rintf(w[k] / scale[c]);
        q[k] = (int8_t)(v < -127.f ? -127 : v > 127.f ? 127 : (int)v);
      }
}

void pr_qz_bias_s32(const float *b, int64_t n, float sx, const float *sw, int64_t n_sw,
                    int32_t *q) {
  for (int64_t c = 0; c < n; c++) {
    double v = rint((double)b[c] / ((double)sx * sw[n_sw > 1 ? c : 0]));
    q[c] = v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
  }
}
