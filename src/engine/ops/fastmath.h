/* Vectorizable float exp, tanh, erf and sigmoid: plain arithmetic (no libm
 * calls), so the compiler turns loops over them into SIMD code.
 * exp (and expm1 on top of it): Cephes-style range reduction and degree-6 polynomial, ~2 ulp.
 * erf: Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7.
 * Inputs are clamped; a NaN input gives a NaN or a finite value.
 * Also a softmax row on top of exp. */
#ifndef PR_ENGINE_FASTMATH_H
#define PR_ENGINE_FASTMATH_H

#include <math.h>
#include <stdint.h>

static inline float pr__expf(float x) {
  x = x < -87.0f ? -87.0f : x; /* ternaries, not fminf/fmaxf: those are libm calls */
  x = x > 88.3f ? 88.3f : x;
  float n = rintf(x * 1.44269504088896341f);
  float r = fmaf(n, -0.693359375f, x);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  float y = fmaf(p, r * r, r) + 1.0f;
  union {
    int32_t i;
    float f;
  } u = {.i = ((int32_t)(n == n ? n : 0.0f) + 127) << 23}; /* NaN: y carries it */
  return y * u.f;
}

/* e^x - 1 without the cancellation near 0: a Taylor polynomial below
 * |x| = 0.25 (error < 4e-10), pr__expf above */
static inline float pr__expm1f(float x) {
  float p = 1.f / 5040.f;
  p = fmaf(p, x, 1.f / 720.f);
  p = fmaf(p, x, 1.f / 120.f);
  p = fmaf(p, x, 1.f / 24.f);
  p = fmaf(p, x, 1.f / 6.f);
  p = fmaf(p, x, 0.5f);
  p = fmaf(p, x, 1.f) * x;
  return fabsf(x) < 0.25f ? p : pr__expf(x) - 1.0f;
}

static inline float pr__tanhf(float x) {
  float a = fabsf(x);
  float e = pr__expf(-2.0f * a);
  float t = (1.0f - e) / (1.0f + e);
  float small = x * (1.0f - x * x * (1.0f / 3.0f)); /* |x| < 0.01: no cancellation */
  return a < 0.01f ? small : copysignf(t, x);
}

static inline float pr__erff(float x) {
  float a = fabsf(x);
  float t = 1.0f / fmaf(0.3275911f, a, 1.0f);
  float p = fmaf(1.061405429f, t, -1.453152027f);
  p = fmaf(p, t, 1.421413741f);
  p = fmaf(p, t, -0.284496736f);
  p = fmaf(p, t, 0.254829592f);
  float y = 1.0f - p * t * pr__expf(-a * a);
  return copysignf(y, x);
}

static inline float pr__sigmoidf(float x) {
  return 1.0f / (1.0f + pr__expf(-x));
}

/* out = softmax(in) over one contiguous row (in may equal out). */
static inline void pr__softmax_row(const float *in, float *out, int64_t len) {
  float mx = -INFINITY, sum = 0.f;
#pragma omp simd reduction(max : mx)
  for (int64_t k = 0; k < len; k++) mx = in[k] > mx ? in[k] : mx;
#pragma omp simd reduction(+ : sum)
  for (int64_t k = 0; k < len; k++) sum += (out[k] = pr__expf(in[k] - mx));
  float inv = 1.f / sum;
#pragma omp simd
  for (int64_t k = 0; k < len; k++) out[k] *= inv;
}

#endif
