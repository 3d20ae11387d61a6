/* Integer arithmetic with a defined result for every input, for the kernels
 * that compute on client data (and for constant folding, which runs them).
 *
 * Notes on the design:
 * - ONNX leaves integer overflow and division by zero undefined; C makes
 *   signed overflow, INT_MIN / -1 and x / 0 undefined behaviour (x86 traps
 *   with SIGFPE on the last two). packrat defines them instead:
 *   Add, Sub, Mul, Neg, Abs, Pow and the integer sums wrap in two's
 *   complement (computed in the unsigned type of at least the same width);
 *   x / 0 is 0, INT_MIN / -1 is INT_MIN (the wrapped quotient).
 * - Converting an out-of-range unsigned value back to the signed type is
 *   implementation-defined in C11; GCC and Clang define it as reduction
 *   modulo 2^N, which is the two's complement wrap wanted here.
 * - A float Cast to an integer converts as ONNX Runtime does on x86 (and
 *   numpy, and PyTorch there): truncation toward zero into int32 for the
 *   types of up to 32 bits (int64 for uint32), into int64 for the 64-bit
 *   ones, then the low bits; a value the intermediate cannot hold, and NaN,
 *   give its "integer indefinite" INT32_MIN / INT64_MIN (so -1.5 to uint8 is
 *   255, 300.0 to uint8 is 44). C makes all of that undefined; here it is
 *   written out, the same on every host. Elsewhere (Pow with a float
 *   exponent, the real reductions of integers) a float result saturates to
 *   the type's range, NaN giving 0.
 * - Types narrower than 32 bits compute through uint32_t so that the usual
 *   promotion to int cannot overflow (65535 * 65535 does not fit an int). */
#ifndef PR_ENGINE_OPS_INTMATH_H
#define PR_ENGINE_OPS_INTMATH_H

#include <stdint.h>

// clang-format off
#define PR_INT_WRAP_FNS(sfx, T, UT)                                                          \
  static inline T pr__##sfx##_add(T a, T b) { return (T)((UT)a + (UT)b); }                  \
  static inline T pr__##sfx##_sub(T a, T b) { return (T)((UT)a - (UT)b); }                  \
  static inline T pr__##sfx##_mul(T a, T b) { return (T)((UT)a * (UT)b); }                  \
  static inline T pr__##sfx##_neg(T a) { return (T)((UT)0 - (UT)a); }                       \
  static inline T pr__##sfx##_abs(T a) { return a < 0 ? pr__##sfx##_neg(a) : a; }            \
  /* x / 0 = 0; MIN / -1 = MIN (a / -1 is the wrapped negation) */                          \
  static inline T pr__##sfx##_div(T a, T b) {                                                \
    return b == 0 ? 0 : b == -1 ? pr__##sfx##_neg(a) : (T)(a / b);                          \
  }
#define PR_UINT_WRAP_FNS(sfx, T, UT)                                                         \
  static inline T pr__##sfx##_add(T a, T b) { return (T)((UT)a + (UT)b); }                  \
  static inline T pr__##sfx##_sub(T a, T b) { return (T)((UT)a - (UT)b); }                  \
  static inline T pr__##sfx##_mul(T a, T b) { return (T)((UT)a * (UT)b); }                  \
  static inline T pr__##sfx##_div(T a, T b) { return b == 0 ? 0 : (T)(a / b); }
PR_INT_WRAP_FNS(i8, int8_t, uint32_t)
PR_INT_WRAP_FNS(i16, int16_t, uint32_t)
PR_INT_WRAP_FNS(i32, int32_t, uint32_t)
PR_INT_WRAP_FNS(i64, int64_t, uint64_t)
PR_UINT_WRAP_FNS(u8, uint8_t, uint32_t)
PR_UINT_WRAP_FNS(u16, uint16_t, uint32_t)
PR_UINT_WRAP_FNS(u32, uint32_t, uint32_t)
PR_UINT_WRAP_FNS(u64, uint64_t, uint64_t)
// clang-format on
#undef PR_INT_WRAP_FNS
#undef PR_UINT_WRAP_FNS

/* base^e modulo 2^64 (square and multiply); the low bits are those of the
 * exact power, so a narrower type takes its wrapped result from this one. */
static inline uint64_t pr__u64_pow(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  for (; e; e >>= 1, base *= base)
    if (e & 1) r *= base;
  return r;
}

/* Integer base^e, wrapped: a negative exponent gives the truncated 1 / base^-e
 * (1 for base 1, +-1 for base -1, else 0, base 0 included as for x / 0). */
static inline int64_t pr__i64_pow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  return (int64_t)pr__u64_pow((uint64_t)base, (uint64_t)e);
}

/* float to integer as a Cast (the notes above): int32, int64 and uint64 */
static inline int32_t pr__cast_i32(double d) {
  return d >= -2147483648.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN; /* NaN fails both */
}
static inline int64_t pr__cast_i64(double d) {
  return d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? (int64_t)d : INT64_MIN;
}
static inline uint64_t pr__cast_u64(double d) {
  if (d >= 9223372036854775808.0 && d < 18446744073709551616.0) return (uint64_t)d;
  return (uint64_t)pr__cast_i64(d);
}

/* float to integer: saturate to [lo, hi], NaN to 0 (lo and hi exact in a
 * double, so types up to 32 bits) */
static inline int64_t pr__sat_int(double d, int64_t lo, int64_t hi) {
  if (d != d) return 0;
  if (d <= (double)lo) return lo;
  if (d >= (double)hi) return hi;
  return (int64_t)d;
}
static inline int64_t pr__sat_i64(double d) {
  if (d != d) return 0;
  if (d >= 9223372036854775808.0) return INT64_MAX; /* 2^63 */
  if (d <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)d;
}
static inline uint64_t pr__sat_u64(double d) {
  if (!(d > 0)) return 0;                             /* NaN and negatives */
  if (d >= 18446744073709551616.0) return UINT64_MAX; /* 2^64 */
  return (uint64_t)d;
}

#endif
