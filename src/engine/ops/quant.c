/* QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: the
 * element-wise conversions between float and 8-bit integers (rounding and
 * parameters in quant_util.h).
 *
 *   QuantizeLinear:   y = saturate(round_half_even(x / scale) + zp)
 *   DequantizeLinear: y = (x - zp) * scale
 *
 * with scale and zp per tensor or per channel of `axis` (opset 13; before
 * it, per tensor only). A QuantizeLinear without a zero point gives UINT8. */
#include <assert.h>
#include <float.h>
#include <immintrin.h>
#include <string.h>

#include "engine/ops/quant_util.h"

/* Elements one task of the parallel loops converts (at most). */
#define CHUNK PR_PAR_MIN

/* Outer, channel and inner extents of x around its quantization axis. */
typedef struct {
  int64_t outer, channels, inner;
} qsplit_t;

static qsplit_t split_axis(const pr_value_t *x, int axis, int64_t count) {
  qsplit_t q = {1, 1, 1};
  if (count == 1) {
    q.inner = pr__value_numel(x);
    return q;
  }
  for (int k = 0; k < axis; k++) q.outer *= x->dims[k];
  q.channels = x->dims[axis];
  for (int k = axis + 1; k < x->rank; k++) q.inner *= x->dims[k];
  return q;
}

/* The channel count per-channel parameters must have (0: per tensor only),
 * and the axis; fails for an axis outside x. */
static pr_status_t quant_axis(pr_compile_t *c, pr_node_t *n, const pr_value_t *x, int *axis,
                              int64_t *channels) {
  *axis = 0;
  *channels = 0;
  if (c->opset < 13) return PR_OK;
  if (pr__attr_int(n->m, "block_size", 0))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "blocked quantization (block_size)");
  *axis = pr__axis(pr__attr_int(n->m, "axis", 1), x->rank);
  if (*axis < 0) {
    /* a per-tensor scale needs no axis: ONNX Runtime ignores it then */
    *axis = 0;
    *channels = 0;
    return PR_OK;
  }
  *channels = x->dims[*axis];
  return PR_OK;
}

/* ---- QuantizeLinear ---- */

static pr_status_t infer_quantize(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *zp = pr__in(c, n, 2);
  if (x->dtype != PR_DTYPE_FLOAT && x->dtype != PR_DTYPE_INT32)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "input of type %s", pr_dtype_name(x->dtype));
  int axis;
  int64_t channels, ns, nz;
  pr_dtype_t out = zp ? zp->dtype : PR_DTYPE_UINT8;
  int64_t od = pr__attr_int(n->m, "output_dtype", 0);
  if (od && (od != (zp ? (int64_t)zp->dtype : od) || !pr__is_q8((pr_dtype_t)od)))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "output_dtype %lld", (long long)od);
  if (od) out = (pr_dtype_t)od;
  if (!pr__is_q8(out)) /* a 16-bit zero point (opset 21) */
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "output of type %s", pr_dtype_name(out));
  pr_status_t st = quant_axis(c, n, x, &axis, &channels);
  if (!st) st = pr__quant_param(c, n, 1, false, 0, channels, true, &ns);
  if (!st) st = pr__quant_param(c, n, 2, true, out, channels, false, &nz);
  if (st) return st;
  if (zp && nz != ns)
    return pr__fail(c, n, PR_ERR_INVALID, "scale and zero point of different sizes");
  pr__value_set_shape(pr__out(c, n, 0), out, x->rank, x->dims);
  return PR_OK;
}

/* One channel's run of len elements: x / scale, rounded, + zp, saturated
 * (INT32 x, which opsets 10 to 18 take, through float as ONNX Runtime). */
#define QUANTIZE_LOOP(OT, load)                                                               \
  do {                                                                                        \
    OT *o = y;                                                                                \
    for (int64_t i = 0; i < len; i++) o[i] = (OT)(int)pr__quantize(load / scale, zp, lo, hi); \
  } while (0)
static void quantize_run(const void *x, pr_dtype_t xt, float scale, float zp, pr_dtype_t t, void *y,
                         int64_t len) {
  float lo, hi;
  pr__q8_range(t, &lo, &hi);
  const float *f = x;
  const int32_t *d = x;
  if (xt == PR_DTYPE_FLOAT && t == PR_DTYPE_UINT8)
    QUANTIZE_LOOP(uint8_t, f[i]);
  else if (xt == PR_DTYPE_FLOAT)
    QUANTIZE_LOOP(int8_t, f[i]);
  else if (t == PR_DTYPE_UINT8)
    QUANTIZE_LOOP(uint8_t, (float)d[i]);
  else
    QUANTIZE_LOOP(int8_t, (float)d[i]);
}
#undef QUANTIZE_LOOP

static void run_quantize(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *s = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  const pr_value_t *z = n->n_in > 2 && n->in[2] >= 0 ? &x->v[n->in[2]] : NULL;
  int64_t count = pr__value_numel(s);
  int axis = count > 1 ? pr__axis(pr__attr_int(n->m, "axis", 1), a->rank) : 0;
  qsplit_t q = split_axis(a, axis, count);
  const float *scale = s->ptr;
  size_t osz = pr_dtype_size(o->dtype), isz = pr_dtype_size(a->dtype);
  int64_t chunks = (q.inner + CHUNK - 1) / CHUNK, tasks = q.outer * q.channels * chunks;
#pragma omp parallel for num_threads(x->threads) if (tasks > 1)
  for (int64_t t = 0; t < tasks; t++) {
    int64_t r = t / chunks, from = (t % chunks) * CHUNK, ch = r % q.channels;
    int64_t at = r * q.inner + from, len = q.inner - from < CHUNK ? q.inner - from : CHUNK;
    float zp = (float)pr__zp_at(z ? z->ptr : NULL, o->dtype, ch);
    quantize_run((const char *)a->ptr + at * isz, a->dtype, scale[ch], zp, o->dtype,
                 (char *)o->ptr + at * osz, len);
  }
}

const pr_op_t pr__op_quantize_linear = {.name = "QuantizeLinear",
                                        .attrs = "axis,saturate,block_size,output_dtype",
                                        .min_opset = 10,
                                        .max_inputs = 3,
                                        .infer = infer_quantize,
                                        .run = run_quantize};

/* ---- DequantizeLinear ---- */

static pr_status_t infer_dequantize(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *zp = pr__in(c, n, 2);
  if (!pr__is_q8(x->dtype) && x->dtype != PR_DTYPE_INT32)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "input of type %s", pr_dtype_name(x->dtype));
  int axis;
  int64_t channels, ns, nz;
  pr_status_t st = quant_axis(c, n, x, &axis, &channels);
  if (!st) st = pr__quant_param(c, n, 1, false, 0, channels, true, &ns);
  if (!st) st = pr__quant_param(c, n, 2, true, x->dtype, channels, false, &nz);
  if (st) return st;
  if (zp && nz != ns)
    return pr__fail(c, n, PR_ERR_INVALID, "scale and zero point of different sizes");
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_FLOAT, x->rank, x->dims);
  return PR_OK;
}

static void dequantize_run(const void *x, pr_dtype_t t, float scale, int32_t zp, float *y,
                           int64_t len) {
  if (t == PR_DTYPE_UINT8)
    for (int64_t i = 0; i < len; i++) y[i] = (float)(((const uint8_t *)x)[i] - zp) * scale;
  else if (t == PR_DTYPE_INT8)
    for (int64_t i = 0; i < len; i++) y[i] = (float)(((const int8_t *)x)[i] - zp) * scale;
  else /* INT32: ONNX Runtime subtracts in int32 too (wrapping) */
    for (int64_t i = 0; i < len; i++)
      y[i] = (float)(int32_t)((uint32_t)((const int32_t *)x)[i] - (uint32_t)zp) * scale;
}

static void run_dequantize(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *s = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  const pr_value_t *z = n->n_in > 2 && n->in[2] >= 0 ? &x->v[n->in[2]] : NULL;
  int64_t count = pr__value_numel(s);
  int axis = count > 1 ? pr__axis(pr__attr_int(n->m, "axis", 1), a->rank) : 0;
  qsplit_t q = split_axis(a, axis, count);
  const float *scale = s->ptr;
  size_t esz = pr_dtype_size(a->dtype);
  int64_t chunks = (q.inner + CHUNK - 1) / CHUNK, tasks = q.outer * q.channels * chunks;
#pragma omp parallel for num_threads(x->threads) if (tasks > 1)
  for (int64_t t = 0; t < tasks; t++) {
    int64_t r = t / chunks, from = (t % chunks) * CHUNK, ch = r % q.channels;
    int64_t at = r * q.inner + from, len = q.inner - from < CHUNK ? q.inner - from : CHUNK;
    int32_t zp = pr__zp_at(z ? z->ptr : NULL, a->dtype, ch);
    dequantize_run((const char *)a->ptr + at * esz, a->dtype, scale[ch], zp, (float *)o->ptr + at,
                   len);
  }
}

const pr_op_t pr__op_dequantize_linear = {.name = "DequantizeLinear",
                                          .attrs = "axis,block_size",
                                          .min_opset = 10,
                                          .max_inputs = 3,
                                          .infer = infer_dequantize,
                                          .run = run_dequantize};

/* ---- DynamicQuantizeLinear: x -> UINT8 y, scale and zero point from x's
 * range (widened to include 0), as ONNX Runtime computes them ---- */

static pr_status_t infer_dynamic_quantize(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0);
  if (x->dtype != PR_DTYPE_FLOAT)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "input of type %s", pr_dtype_name(x->dtype));
  if (n->n_out != 3) return pr__fail(c, n, PR_ERR_INVALID, "needs three outputs");
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_UINT8, x->rank, x->dims);
  if (pr__out(c, n, 1)) pr__value_set_shape(pr__out(c, n, 1), PR_DTYPE_FLOAT, 0, NULL);
  if (pr__out(c, n, 2)) pr__value_set_shape(pr__out(c, n, 2), PR_DTYPE_UINT8, 0, NULL);
  return PR_OK;
}

static void run_dynamic_quantize(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]];
  const float *in = a->ptr;
  int64_t len = pr__value_numel(a);
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < len; i++) lo = fminf(lo, in[i]), hi = fmaxf(hi, in[i]);
  float scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  float zp = pr__quantize(fminf(fmaxf(0.f - lo / scale, 0.f), 255.f), 0.f, 0.f, 255.f);
  uint8_t *y = x->v[n->out[0]].ptr;
  for (int64_t i = 0; i < len; i++) y[i] = (uint8_t)(int)pr__quantize(in[i] / scale, zp, 0, 255);
  if (n->out[1] >= 0) *(float *)x->v[n->out[1]].ptr = scale;
  if (n->out[2] >= 0) *(uint8_t *)x->v[n->out[2]].ptr = (uint8_t)(int)zp;
}

const pr_op_t pr__op_dynamic_quantize_linear = {.name = "DynamicQuantizeLinear",
                                                .attrs = "",
                                                .min_opset = 11,
                                                .max_inputs = 1,
                                                .infer = infer_dynamic_quantize,
                                                .run = run_dynamic_quantize};

/* ---- QLinearAdd (fuser-made, fuse_qdq.c): DequantizeLinear(a) +
 * DequantizeLinear(b) [-> Relu] -> QuantizeLinear in one pass, with the
 * float operations of those nodes in their order (so the same answer):
 * inputs a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, all per tensor,
 * a, b and y of one shape and type. Both may stay in a oneDNN layout when it is the
 * same and has no padding (the output takes it). ---- */

static pr_status_t prepare_qadd(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 3), *o = pr__out(c, n, 0);
  bool same = a->opaque && b->opaque && dnnl_memory_desc_equal(&a->md, &b->md) &&
              dnnl_memory_desc_get_size(&a->md) == (size_t)pr__value_numel(a) &&
              a->dtype == o->dtype;
  if (same) {
    o->md = a->md;
    o->opaque = true;
    o->nbytes = dnnl_memory_desc_get_size(&a->md);
    return PR_OK;
  }
  pr_status_t st = PR_OK;
  for (int k = 0; k < n->n_in && !st; k++) st = pr__require_plain(c, n, k);
  return st;
}

/* One loop per type (a, b and y of one type, fuse_qdq.c): vectorized. */
#define QADD_LOOP(T)                                                                               \
  do {                                                                                             \
    const T *pa = a->ptr, *pb = b->ptr;                                                            \
    T *py = o->ptr;                                                                                \
    _Pragma("omp parallel for num_threads(x->threads) if (len >= PR_PAR_MIN)") for (int64_t i = 0; \
                                                                                    i < len;       \
                                                                                    i++) {         \
      float v = (float)(pa[i] - zpa) * sa + (float)(pb[i] - zpb) * sb;                             \
      v = v > floor_v ? v : floor_v; /* a fused Relu */                                            \
      py[i] = (T)(int)pr__quantize(v / sy, zpy, lo, hi);                                           \
    }                                                                                              \
  } while (0)

static void run_qadd(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[3]], *o = &x->v[n->out[0]];
  const void *za = n->in[2] >= 0 ? x->v[n->in[2]].ptr : NULL;
  const void *zb = n->in[5] >= 0 ? x->v[n->in[5]].ptr : NULL;
  const void *zy = n->in[7] >= 0 ? x->v[n->in[7]].ptr : NULL;
  float sa = *(const float *)pr__xin(x, n, 1), sb = *(const float *)pr__xin(x, n, 4);
  float sy = *(const float *)pr__xin(x, n, 6), lo, hi;
  int32_t zpa = pr__zp_at(za, a->dtype, 0), zpb = pr__zp_at(zb, b->dtype, 0);
  float zpy = (float)pr__zp_at(zy, o->dtype, 0), floor_v = n->post.n_eltwise ? 0.f : -INFINITY;
  pr__q8_range(o->dtype, &lo, &hi);
  int64_t len = pr__value_numel(o);
  assert(a->dtype == o->dtype && b->dtype == o->dtype);
  if (o->dtype == PR_DTYPE_UINT8)
    QADD_LOOP(uint8_t);
  else
    QADD_LOOP(int8_t);
}
#undef QADD_LOOP

const pr_op_t pr__op_qlinear_add = {
    .name = "QLinearAdd", .prepare = prepare_qadd, .run = run_qadd, .accepts_opaque = true};

/* ---- QLookup (fuser-made, fuse_qdq.c): an 8-bit tensor through a table
 * of 256 entries, y[i] = table[(uint8_t)x[i]]: DequantizeLinear, a chain
 * of element-wise float nodes and QuantizeLinear, whose values the fuser
 * computed once for each of the 256 inputs. Inputs x (UINT8 or INT8) and
 * the table (a constant of 256 of y's type). Any layout: the output takes
 * x's (a table maps each byte alone), padding included. ---- */

/* the widest table kernel the CPU and oneDNN's ISA cap allow (one setting
 * for every kernel: ONEDNN_MAX_CPU_ISA) */
typedef enum { LUT_AVX2, LUT_AVX512_VBMI } lut_isa_t;

static pr_status_t prepare_qlookup(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *o = pr__out(c, n, 0);
  lut_isa_t *isa = malloc(sizeof *isa);
  if (!isa) return PR_ERR_NOMEM;
  unsigned eff = (unsigned)dnnl_get_effective_cpu_isa(), z = (unsigned)dnnl_cpu_isa_avx512_core;
  *isa = (eff & z) == z && __builtin_cpu_supports("avx512vbmi") ? LUT_AVX512_VBMI : LUT_AVX2;
  n->state = isa;
  if (a->opaque) {
    o->opaque = true;
    o->md = a->md; /* the same bytes per element: only the type differs */
    o->md.data_type = o->dtype == PR_DTYPE_UINT8 ? dnnl_u8 : dnnl_s8;
    o->nbytes = a->nbytes;
  }
  return PR_OK;
}

/* 64 bytes a step: two 128-entry permutes (bit 7 of the index picks one) */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t lut_avx512(const uint8_t *in,
                                                                                 uint8_t *out,
                                                                                 int64_t len,
                                                                                 const uint8_t *t) {
  __m512i t0 = _mm512_loadu_si512(t), t1 = _mm512_loadu_si512(t + 64);
  __m512i t2 = _mm512_loadu_si512(t + 128), t3 = _mm512_loadu_si512(t + 192);
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    __m512i x = _mm512_loadu_si512(in + i);
    __m512i lo = _mm512_permutex2var_epi8(t0, x, t1), hi = _mm512_permutex2var_epi8(t2, x, t3);
    _mm512_storeu_si512(out + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi));
  }
  return i;
}

/* 32 bytes a step: the 16 rows of 16 entries, each looked up by the low
 * nibble and kept where the high nibble is the row */
static int64_t lut_avx2(const uint8_t *in, uint8_t *out, int64_t len, const uint8_t *t) {
  __m256i rows[16];
  for (int g = 0; g < 16; g++)
    rows[g] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(t + 16 * g)));
  const __m256i nib = _mm256_set1_epi8(0x0f);
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(in + i));
    __m256i lo = _mm256_and_si256(x, nib), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), nib);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 16; g++) {
      __m256i hit = _mm256_cmpeq_epi8(hi, _mm256_set1_epi8((char)g));
      acc = _mm256_or_si256(acc, _mm256_and_si256(hit, _mm256_shuffle_epi8(rows[g], lo)));
    }
    _mm256_storeu_si256((__m256i *)(out + i), acc);
  }
  return i;
}

static void run_qlookup(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]];
  const uint8_t *in = a->ptr, *t = pr__xin(x, n, 1);
  uint8_t *out = pr__xout(x, n, 0);
  int64_t len = (int64_t)a->nbytes, chunk = 16384;
  int64_t chunks = (len + chunk - 1) / chunk;
  bool wide = *(const lut_isa_t *)n->state == LUT_AVX512_VBMI;
#pragma omp parallel for num_threads(x->threads) if (chunks > 1) schedule(static)
  for (int64_t k = 0; k < chunks; k++) {
    int64_t from = k * chunk, m = len - from < chunk ? len - from : chunk;
    int64_t done =
        wide ? lut_avx512(in + from, out + from, m, t) : lut_avx2(in + from, out + from, m, t);
    for (int64_t i = done; i < m; i++) out[from + i] = t[in[from + i]];
  }
}

const pr_op_t pr__op_qlookup = {.name = "QLookup",
                                .prepare = prepare_qlookup,
                                .run = run_qlookup,
                                .destroy = free,
                                .accepts_opaque = true,
                                .inplace = true};
