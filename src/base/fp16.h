/* IEEE 754 half precision <-> float, exact (float to half rounds to nearest
 * even; NaN stays NaN, overflow goes to infinity). */
#ifndef PR_BASE_FP16_H
#define PR_BASE_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float pr__half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (!man) {
      bits = sign;
    } else { /* subnormal: normalize */
      int e = -1;
      do {
        man <<= 1, e++;
      } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t pr__float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = (uint32_t)(e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
  return (uint16_t)(sign | half);
}

/* Double to half, rounded once: to float with round-to-odd (the sticky bit
 * kept in the last place), then to half to nearest even; float's 13 extra
 * bits make that exact (no double rounding). */
static inline uint16_t pr__double_to_half(double d) {
  float f = (float)d;
  if (f != f || f - f != 0) return pr__float_to_half(f); /* NaN, or beyond float */
  if ((double)f != d) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if (fabs((double)f) > fabs(d)) x--; /* toward zero: the truncated value */
    x |= 1;                             /* odd: not exact */
    memcpy(&f, &x, sizeof f);
  }
  return pr__float_to_half(f);
}

#endif
