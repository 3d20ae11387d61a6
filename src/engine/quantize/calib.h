/* Calibration statistics and quantization parameters (calib.c): the range
 * of an activation over the calibration set (min-max, or percentiles of a
 * histogram), the scale and zero point that cover a range, and int8
 * weights per output channel. Pure functions, no I/O.
 *
 * Notes on the design:
 * - Activations are asymmetric: [lo, hi] widened to hold 0 (a real zero,
 *   the padding value, must be exact), scale = (hi - lo) / 255, zero point
 *   round(qmin - lo / scale) clamped to the type.
 * - Weights are symmetric int8 in [-127, 127] per output channel (zero
 *   point 0): scale = max|w| / 127 (1 for an all-zero channel). -128 is
 *   left out so that w and -w quantize alike.
 * - Percentile: a histogram of PR_QZ_BINS bins over the min-max range of
 *   the first pass; lo and hi are the values below which (100 - p)% and p%
 *   of the samples lie, never wider than min and max.
 * - Entropy (TensorRT's calibration, as ONNX Runtime's calibrate.py also
 *   writes it): a histogram of |x| in PR_QZ_KL_BINS bins over [0, max |x|];
 *   for each candidate i >= PR_QZ_KL_LEVELS bins, P is the first i bins
 *   with every count beyond them added to the last, Q the same i bins
 *   (without the outliers) merged into PR_QZ_KL_LEVELS levels and spread
 *   back over the bins where P is not zero; both smoothed (a count of 1e-4
 *   where zero) and normalized; the threshold is the upper edge of the i
 *   with the least KL(P || Q). The range is [-T, T] cut to [min, max]. */
#ifndef PR_ENGINE_QUANTIZE_CALIB_H
#define PR_ENGINE_QUANTIZE_CALIB_H

#include <stdbool.h>
#include <stdint.h>

#include "packrat/engine.h"

#define PR_QZ_BINS 4096
#define PR_QZ_KL_BINS 2048  /* |x| bins of the entropy method */
#define PR_QZ_KL_LEVELS 128 /* levels Q is quantized to (int8's half range) */

typedef struct {
  float min, max; /* of the finite values seen; min > max: none yet */
  int64_t count;  /* finite values seen (first pass) */
  int64_t *hist;  /* PR_QZ_BINS bins over [min, max] (second pass), or NULL */
  int64_t hist_count;
  bool absolute;   /* hist: PR_QZ_KL_BINS bins of |x| over [0, max |x|] (entropy) */
  float threshold; /* entropy: T once pr__qz_range_entropy ran, else -1 */
} pr_qz_range_t;

void pr__qz_range_init(pr_qz_range_t *r);
void pr__qz_range_free(pr_qz_range_t *r);
/* First pass: widens r to the finite values of x[0..n). */
void pr__qz_range_add(pr_qz_range_t *r, const float *x, int64_t n);
/* Second pass: allocates the histogram over r's range; PR_ERR_NOMEM. */
pr_status_t pr__qz_range_hist_begin(pr_qz_range_t *r);
/* Second pass of the entropy method: the histogram of |x| instead. */
pr_status_t pr__qz_range_hist_begin_abs(pr_qz_range_t *r);
/* Second pass: counts x[0..n) into the histogram (values outside the range
 * in the end bins). */
void pr__qz_range_hist_add(pr_qz_range_t *r, const float *x, int64_t n);
/* After the second pass of the entropy method: the KL threshold into
 * r->threshold (from pr__qz_kl_threshold). */
void pr__qz_range_entropy(pr_qz_range_t *r);
/* The threshold (calib.h's notes) of a histogram of |x| in `bins` bins
 * (>= PR_QZ_KL_LEVELS) of `width`; the last bin's edge when it holds
 * nothing to choose from (empty). */
double pr__qz_kl_threshold(const int64_t *hist, int bins, double width);
/* The range to quantize: min-max; with a histogram the pct-th percentile
 * (e.g. 99.99) above and the (100 - pct)-th below; with an entropy
 * threshold T, [-T, T] cut to [min, max] (pct unused). A tensor never seen
 * gives [0, 0]. */
void pr__qz_range_get(const pr_qz_range_t *r, double pct, float *lo, float *hi);

/* Scale and zero point of an activation of type t (UINT8 or INT8) over
 * [lo, hi] (widened to hold 0; an empty range gets scale 1). */
void pr__qz_act_params(float lo, float hi, pr_dtype_t t, float *scale, int32_t *zp);

/* Symmetric int8 weights per channel: w is viewed as [outer, channels,
 * inner] (axis `channels` of its dims); scale[c] = max|w[., c, .]| / qmax
 * and q = round(w / scale) in [-qmax, qmax] (qmax 127, or 64: 7 bits). */
void pr__qz_weights_s8(const float *w, int64_t outer, int64_t channels, int64_t inner, int qmax,
                       int8_t *q, float *scale);

/* An int32 bias b / (sx * sw[c]) per channel (sw of n_sw = 1 or n
 * elements), rounded half to even and saturated. */
void pr__qz_bias_s32(const float *b, int64_t n, float sx, const float *sw, int64_t n_sw,
                     int32_t *q);

#endif
