/* Helpers shared by the quantized operators (quant_util.c; quant.c: QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear; qconv.c: QLinearConv,
 * ConvInteger; qmatmul.c: QLinearMatMul, MatMulInteger; the kernels the QDQ
 * fuser makes): scale and zero-point checks, ONNX's rounding, the oneDNN
 * attributes of a requantizing int8 kernel.
 *
 * Notes on the design:
 * - Rounding is ONNX's: half to even (rintf under the default rounding
 *   mode, which nothing in the engine changes), then the zero point added
 *   and the result saturated to the type's range, as ONNX Runtime's MLAS
 *   does. A requantization computes (float)acc * scale with scale =
 *   (x_scale * w_scale) / y_scale in float, in that order, as ONNX Runtime
 *   does, so both round the same products.
 * - A scale or zero point is per tensor (one element, any rank) or per
 *   channel (1-D, one element per channel of the axis the op names). */
#ifndef PR_ENGINE_OPS_QUANT_UTIL_H
#define PR_ENGINE_OPS_QUANT_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/ops/ops.h"

/* UINT8 or INT8: the activation and weight types of the int8 kernels. */
static inline bool pr__is_q8(pr_dtype_t t) {
  return t == PR_DTYPE_UINT8 || t == PR_DTYPE_INT8;
}

/* The range of a quantized type (UINT8 or INT8). */
static inline void pr__q8_range(pr_dtype_t t, float *lo, float *hi) {
  *lo = t == PR_DTYPE_INT8 ? -128.f : 0.f;
  *hi = t == PR_DTYPE_INT8 ? 127.f : 255.f;
}

/* v rounded half to even, plus zp, saturated to [lo, hi] (NaN gives lo).
 * Compares, not fminf/fmaxf: GCC vectorizes these loops only so. */
static inline float pr__quantize(float v, float zp, float lo, float hi) {
  v = rintf(v) + zp;
  v = v > lo ? v : lo;
  return v < hi ? v : hi;
}

/* Stores q (integral, in the type's range) as element i of a UINT8 or INT8
 * tensor. */
static inline void pr__q8_store(void *p, pr_dtype_t t, int64_t i, float q) {
  if (t == PR_DTYPE_UINT8)
    ((uint8_t *)p)[i] = (uint8_t)(int)q;
  else
    ((int8_t *)p)[i] = (int8_t)(int)q;
}

/* Element k of a UINT8, INT8 or INT32 zero point (0 when p is NULL). */
static inline int32_t pr__zp_at(const void *p, pr_dtype_t t, int64_t k) {
  if (!p) return 0;
  return t == PR_DTYPE_UINT8  ? ((const uint8_t *)p)[k]
         : t == PR_DTYPE_INT8 ? ((const int8_t *)p)[k]
                              : ((const int32_t *)p)[k];
}

/* Checks input k of n as a scale (want_zp false: FLOAT) or a zero point
 * (want_zp: of type zp_type, or any of UINT8, INT8 when zp_type is 0) that
 * is per tensor, or per channel with `channels` elements when channels > 0.
 * *count: its element count (1, or channels). An absent input passes with
 * *count 1 unless required. */
pr_status_t pr__quant_param(pr_compile_t *c, pr_node_t *n, int k, bool want_zp, pr_dtype_t zp_type,
                            int64_t channels, bool required, int64_t *count);

/* The requantization scales of an int8 kernel: out[m] = (sx * sw[m or 0])
 * / sy for m < count (sy NULL: 1, an integer output). */
void pr__requant_scales(float sx, const float *sw, int64_t count, const float *sy, float *out);

/* A constant UINT8/INT8 weight tensor w with its zero point zp (per tensor,
 * or per slice of `per` elements of axis 0 when zp_count > 1) as INT8 w -
 * zp, in out; false when some difference does not fit an int8 (out then
 * unusable). */
bool pr__weights_to_s8(const void *w, pr_dtype_t t, int64_t numel, const void *zp, pr_dtype_t zt,
                       int64_t zp_count, int64_t per, int8_t *out);

/* oneDNN attributes of an int8 kernel: output scales (one, or per channel
 * on dimension `dim`), the source zero point zx and destination zero point
 * zy (0: none), and n's eltwise post-ops. */
pr_status_t pr__q8_attr(pr_compile_t *c, pr_node_t *n, const float *scales, int64_t count, int dim,
                        int32_t zx, int32_t zy, dnnl_primitive_attr_t *attr);

/* n's fused post-ops are none or one Relu (the QDQ fuser's), which the
 * plain kernels apply before rounding. */
static inline bool pr__q8_post_relu_only(const pr_node_t *n) {
  return !n->post.sum &&
         (!n->post.n_eltwise || (n->post.n_eltwise == 1 && n->post.alg[0] == dnnl_eltwise_relu &&
                                 n->post.alpha[0] == 0.f));
}

/* Whether oneDNN's int8 kernels compute exactly on this CPU: with VNNI
 * (AVX512_VNNI, AVX_VNNI, AMX) the products of u8 and s8 sum straight into
 * int32. Without it they pair products in saturating int16 (vpmaddubsw: a
 * u8 source with weights beyond 7 bits overflows) and halve s8s8 weights
 * (losing their last bit): measured with ONEDNN_MAX_CPU_ISA=AVX2, answers
 * off by many steps. There the int8 ops run their exact plain loops. */
bool pr__q8_dnnl_exact(void);
/* Whether oneDNN's int8 kernels compute exactly with a source of type src
 * and these s8 weights (n of them): with VNNI always; without, a u8 source
 * and 7-bit weights (|w| <= 64: two products of 255 * 64 sum within int16;
 * what `packrat quantize --reduce-range` writes, as ONNX Runtime's
 * reduce_range). */
bool pr__q8_dnnl_exact_for(pr_dtype_t src, const int8_t *w, int64_t n);

/* The oneDNN data type of an element type (s8, u8, s32, f32; undef else). */
dnnl_data_type_t pr__dnnl_type(pr_dtype_t t);

#endif
