/* Helpers of the quantized operators (see quant_util.h): parameter checks,
 * requantization scales, int8 weights, oneDNN attributes. */
#include "engine/ops/quant_util.h"

#include <string.h>

#include "engine/ops/dnnl_util.h"

dnnl_data_type_t pr__dnnl_type(pr_dtype_t t) {
  switch (t) {
    case PR_DTYPE_FLOAT: return dnnl_f32;
    case PR_DTYPE_INT32: return dnnl_s32;
    case PR_DTYPE_INT8: return dnnl_s8;
    case PR_DTYPE_UINT8: return dnnl_u8;
    default: return dnnl_data_type_undef;
  }
}

bool pr__q8_dnnl_exact(void) {
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
  return (isa & (unsigned)dnnl_cpu_isa_avx512_core_vnni) ==
             (unsigned)dnnl_cpu_isa_avx512_core_vnni ||
         (isa & (unsigned)dnnl_cpu_isa_avx2_vnni) == (unsigned)dnnl_cpu_isa_avx2_vnni;
}

bool pr__q8_dnnl_exact_for(pr_dtype_t src, const int8_t *w, int64_t n) {
  if (pr__q8_dnnl_exact()) return true;
  if (src != PR_DTYPE_UINT8) return false;
  for (int64_t i = 0; i < n; i++)
    if (w[i] < -64 || w[i] > 64) return false;
  return true;
}

pr_status_t pr__quant_param(pr_compile_t *c, pr_node_t *n, int k, bool want_zp, pr_dtype_t zp_type,
                            int64_t channels, bool required, int64_t *count) {
  const pr_value_t *p = pr__in(c, n, k);
  *count = 1;
  if (!p) return required ? pr__fail(c, n, PR_ERR_INVALID, "input %d is required", k) : PR_OK;
  const char *what = want_zp ? "zero point" : "scale";
  if (!want_zp && p->dtype != PR_DTYPE_FLOAT)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "%s (input %d) of type %s, FLOAT expected", what, k,
                    pr_dtype_name(p->dtype));
  if (want_zp && (zp_type ? p->dtype != zp_type : !pr__is_q8(p->dtype)))
    return pr__fail(c, n, PR_ERR_INVALID, "%s (input %d) of type %s", what, k,
                    pr_dtype_name(p->dtype));
  int64_t numel = pr__value_numel(p);
  if (numel == 1) return PR_OK;
  if (channels <= 0 || p->rank != 1 || numel != channels)
    return pr__fail(c, n, PR_ERR_INVALID, "%s (input %d) must hold 1%s elements", what, k,
                    channels > 0 ? " or one per channel" : "");
  *count = numel;
  return PR_OK;
}

void pr__requant_scales(float sx, const float *sw, int64_t count, const float *sy, float *out) {
  for (int64_t m = 0; m < count; m++) {
    float s = sx * sw[m];
    out[m] = sy ? s / *sy : s;
  }
}

bool pr__weights_to_s8(const void *w, pr_dtype_t t, int64_t numel, const void *zp, pr_dtype_t zt,
                       int64_t zp_count, int64_t per, int8_t *out) {
  for (int64_t i = 0; i < numel; i++) {
    int32_t v = t == PR_DTYPE_UINT8 ? ((const uint8_t *)w)[i] : ((const int8_t *)w)[i];
    v -= pr__zp_at(zp, zt, zp_count > 1 ? i / per : 0);
    if (v < -128 || v > 127) return false;
    out[i] = (int8_t)v;
  }
  return true;
}

static pr_status_t set_zero_point(pr_compile_t *c, pr_node_t *n, dnnl_primitive_attr_t attr,
                                  int arg, int32_t zp) {
  if (!zp) return PR_OK;
  dnnl_status_t st = dnnl_primitive_attr_set_zero_points(attr, arg, 1, 0, &zp);
  return st == dnnl_success ? PR_OK
                            : pr__fail(c, n, PR_ERR_UNSUPPORTED, "oneDNN zero point (%d)", st);
}

pr_status_t pr__q8_attr(pr_compile_t *c, pr_node_t *n, const float *scales, int64_t count, int dim,
                        int32_t zx, int32_t zy, dnnl_primitive_attr_t *attr) {
  /* oneDNN adds the destination zero point before its final rounding:
   * round(v + zy), which differs from ONNX's round(v) + zy where v is
   * halfway between two integers and zy is odd (12.5 + 1 gives 14, not
   * 13), or where v + zy loses v's last bits. So v is rounded first. */
  pr_status_t st = pr__dnnl_post_attr_round(c, n, zy != 0, attr);
  if (st) return st;
  dnnl_status_t ds =
      dnnl_primitive_attr_set_output_scales(*attr, count, count > 1 ? 1 << dim : 0, scales);
  if (ds != dnnl_success) st = pr__fail(c, n, PR_ERR_UNSUPPORTED, "oneDNN output scales (%d)", ds);
  if (!st) st = set_zero_point(c, n, *attr, DNNL_ARG_SRC, zx);
  if (!st) st = set_zero_point(c, n, *attr, DNNL_ARG_DST, zy);
  if (st) dnnl_primitive_attr_destroy(*attr);
  return st;
}
