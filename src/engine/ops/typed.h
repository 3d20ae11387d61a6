/* Type dispatch for kernels that compare or combine elements (ArgMax, TopK,
 * Hardmax, Unique, the Scatter reductions): one instance of a kernel per
 * element type, generated from an X-macro list.
 *
 * Notes on the design:
 * - Each type has a storage type T and a key type K in which it is compared
 *   and combined: float16 is stored as uint16_t and computed as float, every
 *   other type is its own key. pr_key_<sfx> and pr_unkey_<sfx> convert.
 * - Integer sums and products wrap in two's complement: they are computed
 *   in uint64_t and converted back (GCC and Clang define the narrowing to a
 *   signed type as reduction modulo 2^N, see intmath.h), so no type can hit
 *   signed-overflow undefined behaviour, and uint16_t * uint16_t does not go
 *   through int. Bool sums are OR, products AND (as ONNX Runtime).
 * - Only what a kernel needs is here; byte-moving kernels (Gather*, Tile,
 *   DepthToSpace...) dispatch on the element size instead. */
#ifndef PR_ENGINE_OPS_TYPED_H
#define PR_ENGINE_OPS_TYPED_H

#include <stdbool.h>
#include <stdint.h>

#include "base/fp16.h"
#include "packrat/engine.h"

/* X(DTYPE, sfx, T, K) for every numeric type (bool excluded). */
// clang-format off
#define PR_TYPES_NUMERIC(X)              \
  X(FLOAT, f32, float, float)            \
  X(DOUBLE, f64, double, double)         \
  X(FLOAT16, f16, uint16_t, float)       \
  X(INT8, i8, int8_t, int8_t)            \
  X(INT16, i16, int16_t, int16_t)        \
  X(INT32, i32, int32_t, int32_t)        \
  X(INT64, i64, int64_t, int64_t)        \
  X(UINT8, u8, uint8_t, uint8_t)         \
  X(UINT16, u16, uint16_t, uint16_t)     \
  X(UINT32, u32, uint32_t, uint32_t)     \
  X(UINT64, u64, uint64_t, uint64_t)
// clang-format on

/* The numeric types and bool. */
#define PR_TYPES_ALL(X) PR_TYPES_NUMERIC(X) X(BOOL, b8, uint8_t, uint8_t)

static inline float pr__key_f16(uint16_t v) {
  return pr__half_to_float(v);
}
static inline uint16_t pr__unkey_f16(float v) {
  return pr__float_to_half(v);
}
#define PR_TYPED_IDENTITY(sfx, T)        \
  static inline T pr__key_##sfx(T v) {   \
    return v;                            \
  }                                      \
  static inline T pr__unkey_##sfx(T v) { \
    return v;                            \
  }
PR_TYPED_IDENTITY(f32, float)
PR_TYPED_IDENTITY(f64, double)
PR_TYPED_IDENTITY(i8, int8_t)
PR_TYPED_IDENTITY(i16, int16_t)
PR_TYPED_IDENTITY(i32, int32_t)
PR_TYPED_IDENTITY(i64, int64_t)
PR_TYPED_IDENTITY(u8, uint8_t)
PR_TYPED_IDENTITY(u16, uint16_t)
PR_TYPED_IDENTITY(u32, uint32_t)
PR_TYPED_IDENTITY(u64, uint64_t)
PR_TYPED_IDENTITY(b8, uint8_t)
#undef PR_TYPED_IDENTITY

/* Sum and product in the key type: floats as they are, integers wrapped. */
#define PR_TYPED_FLOAT_ARITH(sfx, K)         \
  static inline K pr__tadd_##sfx(K a, K b) { \
    return a + b;                            \
  }                                          \
  static inline K pr__tmul_##sfx(K a, K b) { \
    return a * b;                            \
  }
#define PR_TYPED_INT_ARITH(sfx, K)           \
  static inline K pr__tadd_##sfx(K a, K b) { \
    return (K)((uint64_t)a + (uint64_t)b);   \
  }                                          \
  static inline K pr__tmul_##sfx(K a, K b) { \
    return (K)((uint64_t)a * (uint64_t)b);   \
  }
PR_TYPED_FLOAT_ARITH(f32, float)
PR_TYPED_FLOAT_ARITH(f64, double)
PR_TYPED_FLOAT_ARITH(f16, float)
PR_TYPED_INT_ARITH(i8, int8_t)
PR_TYPED_INT_ARITH(i16, int16_t)
PR_TYPED_INT_ARITH(i32, int32_t)
PR_TYPED_INT_ARITH(i64, int64_t)
PR_TYPED_INT_ARITH(u8, uint8_t)
PR_TYPED_INT_ARITH(u16, uint16_t)
PR_TYPED_INT_ARITH(u32, uint32_t)
PR_TYPED_INT_ARITH(u64, uint64_t)
#undef PR_TYPED_FLOAT_ARITH
#undef PR_TYPED_INT_ARITH
static inline uint8_t pr__tadd_b8(uint8_t a, uint8_t b) {
  return a || b;
}
static inline uint8_t pr__tmul_b8(uint8_t a, uint8_t b) {
  return a && b;
}

/* Whether t is in PR_TYPES_ALL. */
static inline bool pr__typed_supported(int t) {
  switch (t) {
#define PR_TYPED_CASE(D, sfx, T, K) case PR_DTYPE_##D:
    PR_TYPES_ALL(PR_TYPED_CASE)
#undef PR_TYPED_CASE
    return true;
    default: return false;
  }
}

#endif
