/* QDQ folding (src/engine/fuse_qdq.c): DequantizeLinear -> Conv / MatMul
 * (+ bias Add) / Gemm [-> Relu] -> QuantizeLinear becomes one QLinearConv or
 * QLinearMatMul, DequantizeLinear(a) + DequantizeLinear(b) [-> Relu] ->
 * QuantizeLinear one QLinearAdd, DequantizeLinear -> element-wise float
 * nodes -> QuantizeLinear one QLookup, where it should, and stays as it is when a precondition
 * fails (an intermediate is a graph output, a parameter is not constant, a
 * scale is per channel on the wrong axis, an activation is quantized per
 * channel).
 *
 * Each case builds a model with float input and output (QuantizeLinear at
 * the input, DequantizeLinear at the output), runs it with and without
 * fusion on the same inputs and checks the answers agree within one
 * quantization step of the output (the fused kernel rounds the int32
 * accumulator once, the float path rounds the float sum: they may differ by
 * one step) and which kernels the fused session runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_builder.h"
#include "packrat/engine.h"

#define IN(...) ((const char *const[]){__VA_ARGS__, NULL})
#define OUT(...) ((const char *const[]){__VA_ARGS__, NULL})

static const int64_t SCALAR[1] = {0};
static const float Y_SCALE = 0.05f; /* the output's quantization step */

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) % 2000) / 1000.f - 1.f;
}

static void scalar_f(mb_t *b, const char *name, float v) {
  mb_init(b, name, PR_DTYPE_FLOAT, 0, SCALAR, &v, sizeof v);
}

static void scalar_q(mb_t *b, const char *name, int type, int v) {
  uint8_t byte = (uint8_t)v;
  mb_init(b, name, type, 0, SCALAR, &byte, 1);
}

/* Random 8-bit weights "<name>_q" of dims in [lo, hi], scale(s) and zero
 * point(s) (per channel of axis when channels > 0), dequantized into name. */
static void weights(mb_t *b, const char *name, int type, int rank, const int64_t *dims,
                    int channels, int axis, int zp, unsigned seed) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= dims[k];
  uint8_t *w = malloc((size_t)n);
  for (int64_t i = 0; i < n; i++) {
    int v = (int)lrintf(frand(&seed) * 100);
    w[i] = (uint8_t)(type == PR_DTYPE_UINT8 ? v + 120 : v);
  }
  char q[64], s[64], z[64];
  snprintf(q, sizeof q, "%s_q", name);
  snprintf(s, sizeof s, "%s_s", name);
  snprintf(z, sizeof z, "%s_z", name);
  mb_init(b, q, type, rank, dims, w, (size_t)n);
  free(w);
  int cnt = channels > 0 ? channels : 1;
  float sc[64];
  uint8_t zps[64];
  for (int k = 0; k < cnt; k++) sc[k] = 0.004f + 0.001f * (float)(k % 5), zps[k] = (uint8_t)zp;
  int64_t cd[1] = {cnt};
  mb_init(b, s, PR_DTYPE_FLOAT, channels > 0, channels > 0 ? cd : SCALAR, sc,
          sizeof(float) * (size_t)cnt);
  mb_init(b, z, type, channels > 0, channels > 0 ? cd : SCALAR, zps, (size_t)cnt);
  int node = mb_node(b, "DequantizeLinear", name, IN(q, s, z), OUT(name));
  if (channels > 0) mb_attr_int(b, node, "axis", axis);
}

/* x -> QuantizeLinear (type, x_scale 0.02, zp) -> DequantizeLinear -> "xd" */
static void quant_input(mb_t *b, int rank, const int64_t *dims, int type, int zp) {
  mb_input(b, "x", PR_DTYPE_FLOAT, rank, dims);
  scalar_f(b, "xs", 0.02f);
  scalar_q(b, "xz", type, zp);
  mb_node(b, "QuantizeLinear", "qx", IN("x", "xs", "xz"), OUT("xq"));
  mb_node(b, "DequantizeLinear", "dqx", IN("xq", "xs", "xz"), OUT("xd"));
}

/* value -> QuantizeLinear (type, Y_SCALE, zp) -> DequantizeLinear -> "y" */
static void quant_output(mb_t *b, const char *value, int type, int zp) {
  scalar_f(b, "ys", Y_SCALE);
  scalar_q(b, "yz", type, zp);
  mb_node(b, "QuantizeLinear", "qy", IN(value, "ys", "yz"), OUT("yq"));
  mb_node(b, "DequantizeLinear", "dqy", IN("yq", "ys", "yz"), OUT("y"));
  mb_output(b, "y");
}

/* int32 bias of n values behind a DequantizeLinear of scale 0.02 * 0.004 */
static void bias(mb_t *b, int64_t n) {
  int32_t v[64];
  for (int64_t i = 0; i < n; i++) v[i] = (int32_t)(i * 37 % 200) - 100;
  mb_init(b, "bq", PR_DTYPE_INT32, 1, &n, v, sizeof(int32_t) * (size_t)n);
  scalar_f(b, "bs", 0.02f * 0.004f);
  mb_node(b, "DequantizeLinear", "dqb", IN("bq", "bs"), OUT("B"));
}

/* ---- the harness ---- */

enum { MAX_OUT = 4, MAX_ELEMS = 1 << 14 };

typedef struct {
  int n_out;
  float *out[MAX_OUT];
  size_t len[MAX_OUT];
  char ops[1024];
} result_t;

static void run(pr_model_t *m, bool fuse, result_t *r) {
  pr_session_options_t opt = pr_session_options_default();
  opt.disable_fusion = !fuse;
  opt.threads = 2;
  pr_session_t *s;
  char err[256];
  if (pr_engine_session_create(m, &opt, &s, err, sizeof err)) fail_msg("session: %s", err);
  int n_in = pr_engine_model_num_inputs(m);
  assert_true(n_in <= MAX_OUT);
  pr_tensor_t in[MAX_OUT], out[MAX_OUT];
  unsigned seed = 11;
  for (int i = 0; i < n_in; i++) {
    pr_tensor_info_t info;
    assert_int_equal(pr_engine_session_input(s, i, &info), PR_OK);
    in[i] = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = info.rank};
    int64_t n = 1;
    for (int k = 0; k < info.rank; k++) n *= in[i].dims[k] = info.dims[k];
    assert_true(n <= MAX_ELEMS);
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t j = 0; j < n; j++) x[j] = frand(&seed) * 2.f;
    in[i].data = x;
  }
  r->n_out = pr_engine_model_num_outputs(m);
  assert_true(r->n_out <= MAX_OUT);
  assert_int_equal(pr_engine_session_run(s, in, n_in, out, r->n_out, err, sizeof err), PR_OK);
  for (int i = 0; i < r->n_out; i++) {
    size_t len = 1;
    for (int k = 0; k < out[i].rank; k++) len *= (size_t)out[i].dims[k];
    r->len[i] = len;
    r->out[i] = malloc(sizeof(float) * (len ? len : 1));
    memcpy(r->out[i], out[i].data, sizeof(float) * len);
  }
  strcpy(r->ops, ",");
  for (int i = 0; i < pr_engine_session_num_kernels(s); i++) {
    pr_kernel_info_t k;
    assert_int_equal(pr_engine_session_kernel(s, i, &k), PR_OK);
    assert_true(strlen(r->ops) + strlen(k.op) + 2 < sizeof r->ops);
    strcat(r->ops, k.op);
    strcat(r->ops, ",");
  }
  for (int i = 0; i < n_in; i++) free(in[i].data);
  pr_engine_session_destroy(s);
}

static bool has_op(const result_t *r, const char *op) {
  char key[64];
  snprintf(key, sizeof key, ",%s,", op);
  return strstr(r->ops, key) != NULL;
}

/* Fused and unfused agree within one step; the fused session runs `want`
 * and not `gone` when matched, else still runs `gone`. */
static void check(mb_t *b, bool matched, const char *want, const char *gone) {
  char err[256];
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  result_t r[2];
  run(m, false, &r[0]);
  run(m, true, &r[1]);
  if (getenv("PR_TEST_VERBOSE")) printf("unfused %s\nfused   %s\n", r[0].ops, r[1].ops);
  for (int i = 0; i < r[0].n_out; i++) {
    assert_int_equal(r[0].len[i], r[1].len[i]);
    double max_ref = 0, max_diff = 0;
    for (size_t j = 0; j < r[0].len[i]; j++) {
      max_ref = fmax(max_ref, fabs(r[0].out[i][j]));
      max_diff = fmax(max_diff, fabs(r[0].out[i][j] - r[1].out[i][j]));
    }
    assert_true(max_ref > 10 * Y_SCALE); /* the model computes something */
    if (max_diff > Y_SCALE * 1.0001)
      fail_msg("output %d: fused and unfused differ by %g (step %g)", i, max_diff, Y_SCALE);
    free(r[0].out[i]), free(r[1].out[i]);
  }
  assert_true(has_op(&r[0], gone));
  assert_false(has_op(&r[0], want));
  assert_true(has_op(&r[1], want) == matched);
  assert_true(has_op(&r[1], gone) == !matched);
  pr_engine_model_destroy(m);
}

/* ---- Conv ---- */

enum { C = 8, M = 16, H = 6 };

typedef struct {
  int act, wtype, wzp, channels, waxis;
  bool relu, conv_out_is_output, y_scale_input;
} conv_case_t;

static mb_t *conv_model(const conv_case_t *k) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {2, C, H, H}, wd[4] = {M, C, 3, 3};
  const int64_t pads[4] = {1, 1, 1, 1};
  quant_input(b, 4, xd, k->act, k->act == PR_DTYPE_UINT8 ? 128 : 3);
  weights(b, "W", k->wtype, 4, wd, k->channels, k->waxis, k->wzp, 5);
  bias(b, M);
  int n = mb_node(b, "Conv", "conv", IN("xd", "W", "B"), OUT("c"));
  mb_attr_ints(b, n, "pads", 4, pads);
  if (k->relu) mb_node(b, "Relu", "relu", IN("c"), OUT("r"));
  quant_output(b, k->relu ? "r" : "c", k->act, k->act == PR_DTYPE_UINT8 ? 100 : -5);
  if (k->conv_out_is_output) mb_output(b, "c");
  return b;
}

static void test_conv_u8_per_tensor(void **state) {
  conv_case_t k = {.act = PR_DTYPE_UINT8, .wtype = PR_DTYPE_INT8};
  check(conv_model(&k), true, "QLinearConv", "Conv");
}

static void test_conv_s8_per_channel_relu(void **state) {
  conv_case_t k = {.act = PR_DTYPE_INT8, .wtype = PR_DTYPE_INT8, .channels = M, .relu = true};
  check(conv_model(&k), true, "QLinearConv", "Conv");
}

/* u8 weights with zero point 10: w - 10 leaves the int8 range, so the
 * fused QLinearConv runs its plain kernel (the Relu applied there) */
static void test_conv_u8_weights_plain_kernel(void **state) {
  conv_case_t k = {.act = PR_DTYPE_UINT8, .wtype = PR_DTYPE_UINT8, .wzp = 10, .relu = true};
  check(conv_model(&k), true, "QLinearConv", "Conv");
}

static void test_conv_kept_when_output_is_graph_output(void **state) {
  conv_case_t k = {.act = PR_DTYPE_UINT8, .wtype = PR_DTYPE_INT8, .conv_out_is_output = true};
  check(conv_model(&k), false, "QLinearConv", "Conv");
}

/* per-channel weight scales along the input channels: no output scale */
static void test_conv_kept_when_weight_axis_is_not_output_channels(void **state) {
  conv_case_t k = {.act = PR_DTYPE_UINT8, .wtype = PR_DTYPE_INT8, .channels = C, .waxis = 1};
  check(conv_model(&k), false, "QLinearConv", "Conv");
}

/* an activation quantized per channel has no single source zero point */
static void test_conv_kept_when_activation_per_channel(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {2, C, H, H}, wd[4] = {M, C, 3, 3}, cd[1] = {C};
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  float xs[C];
  uint8_t xz[C];
  for (int i = 0; i < C; i++) xs[i] = 0.02f + 0.002f * (float)i, xz[i] = 120;
  mb_init(b, "xs", PR_DTYPE_FLOAT, 1, cd, xs, sizeof xs);
  mb_init(b, "xz", PR_DTYPE_UINT8, 1, cd, xz, sizeof xz);
  mb_node(b, "QuantizeLinear", "qx", IN("x", "xs", "xz"), OUT("xq"));
  mb_node(b, "DequantizeLinear", "dqx", IN("xq", "xs", "xz"), OUT("xd"));
  weights(b, "W", PR_DTYPE_INT8, 4, wd, 0, 0, 0, 5);
  mb_node(b, "Conv", "conv", IN("xd", "W"), OUT("c"));
  quant_output(b, "c", PR_DTYPE_UINT8, 100);
  check(b, false, "QLinearConv", "Conv");
}

/* ---- MatMul and Gemm ---- */

enum { K = 24, N = 16 };

static void test_matmul_bias_relu_fused(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[3] = {2, 5, K}, wd[2] = {K, N};
  quant_input(b, 3, xd, PR_DTYPE_UINT8, 128);
  weights(b, "W", PR_DTYPE_INT8, 2, wd, N, 1, 0, 9);
  bias(b, N);
  mb_node(b, "MatMul", "mm", IN("xd", "W"), OUT("m"));
  mb_node(b, "Add", "add", IN("m", "B"), OUT("a"));
  mb_node(b, "Relu", "relu", IN("a"), OUT("r"));
  quant_output(b, "r", PR_DTYPE_UINT8, 0);
  check(b, true, "QLinearMatMul", "MatMul");
}

static void test_gemm_transb_fused(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {4, K}, wd[2] = {N, K};
  quant_input(b, 2, xd, PR_DTYPE_INT8, -2);
  weights(b, "W", PR_DTYPE_INT8, 2, wd, N, 0, 0, 9);
  bias(b, N);
  int n = mb_node(b, "Gemm", "gemm", IN("xd", "W", "B"), OUT("g"));
  mb_attr_int(b, n, "transB", 1);
  quant_output(b, "g", PR_DTYPE_INT8, 4);
  check(b, true, "QLinearMatMul", "Gemm");
}

static void test_gemm_kept_when_alpha_not_one(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {4, K}, wd[2] = {K, N};
  quant_input(b, 2, xd, PR_DTYPE_UINT8, 128);
  weights(b, "W", PR_DTYPE_INT8, 2, wd, 0, 0, 0, 9);
  int n = mb_node(b, "Gemm", "gemm", IN("xd", "W"), OUT("g"));
  mb_attr_float(b, n, "alpha", 0.5f);
  quant_output(b, "g", PR_DTYPE_UINT8, 128);
  check(b, false, "QLinearMatMul", "Gemm");
}

/* C of [M, 1] with M == N: one value per row (it has N values, but
 * broadcasts along the rows), so not a per-column bias */
static void test_gemm_kept_when_c_per_row(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {N, K}, wd[2] = {K, N}, cd[2] = {N, 1};
  quant_input(b, 2, xd, PR_DTYPE_UINT8, 128);
  weights(b, "W", PR_DTYPE_INT8, 2, wd, 0, 0, 0, 9);
  float c[N];
  unsigned seed = 3;
  for (int i = 0; i < N; i++) c[i] = frand(&seed) * 2.f;
  mb_init(b, "C", PR_DTYPE_FLOAT, 2, cd, c, sizeof c);
  mb_node(b, "Gemm", "gemm", IN("xd", "W", "C"), OUT("g"));
  quant_output(b, "g", PR_DTYPE_UINT8, 128);
  check(b, false, "QLinearMatMul", "Gemm");
}

/* an int32 bias whose scale is 50 x_scale w_scale, not x_scale w_scale:
 * fused with its float values (not the int32 ones as accumulator units) */
static void test_matmul_bias_scale_not_x_times_w(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {4, K}, wd[2] = {K, N}, n = N;
  quant_input(b, 2, xd, PR_DTYPE_UINT8, 128);
  weights(b, "W", PR_DTYPE_INT8, 2, wd, 0, 0, 0, 9);
  int32_t v[N];
  for (int i = 0; i < N; i++) v[i] = i * 37 % 200 - 100;
  mb_init(b, "bq", PR_DTYPE_INT32, 1, &n, v, sizeof v);
  scalar_f(b, "bs", 0.02f * 0.004f * 50.f);
  mb_node(b, "DequantizeLinear", "dqb", IN("bq", "bs"), OUT("B"));
  mb_node(b, "MatMul", "mm", IN("xd", "W"), OUT("m"));
  mb_node(b, "Add", "add", IN("m", "B"), OUT("a"));
  quant_output(b, "a", PR_DTYPE_UINT8, 128);
  check(b, true, "QLinearMatMul", "MatMul");
}

/* B computed at run time (DequantizeLinear of a graph input): not weights */
static void test_matmul_kept_when_weights_not_constant(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {4, K}, wd[2] = {K, N};
  quant_input(b, 2, xd, PR_DTYPE_UINT8, 128);
  mb_node(b, "Transpose", "t", IN("xd"), OUT("xt")); /* [K, 4] */
  mb_node(b, "MatMul", "mm", IN("xd", "xt"), OUT("m"));
  (void)wd;
  quant_output(b, "m", PR_DTYPE_UINT8, 128);
  check(b, false, "QLinearMatMul", "MatMul");
}

/* ---- Add ---- */

/* x quantized twice (scales 0.02 and 0.03), the two dequantized and added
 * (b broadcast from [1, C, 1, 1] when broadcast), [Relu], quantized */
static mb_t *add_model(bool relu, bool broadcast) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {2, C, H, H}, bd[4] = {1, C, 1, 1};
  quant_input(b, 4, xd, PR_DTYPE_UINT8, 128);
  scalar_f(b, "s2", 0.03f);
  scalar_q(b, "z2", PR_DTYPE_UINT8, 100);
  const char *src = "x";
  if (broadcast) {
    mb_input(b, "x2", PR_DTYPE_FLOAT, 4, bd);
    src = "x2";
  }
  mb_node(b, "QuantizeLinear", "q2", IN(src, "s2", "z2"), OUT("x2q"));
  mb_node(b, "DequantizeLinear", "dq2", IN("x2q", "s2", "z2"), OUT("x2d"));
  mb_node(b, "Add", "add", IN("xd", "x2d"), OUT("a"));
  if (relu) mb_node(b, "Relu", "relu", IN("a"), OUT("r"));
  quant_output(b, relu ? "r" : "a", PR_DTYPE_UINT8, 128);
  return b;
}

static void test_add_relu_fused(void **state) {
  check(add_model(true, false), true, "QLinearAdd", "Add");
}

static void test_add_kept_when_broadcast(void **state) {
  check(add_model(false, true), false, "QLinearAdd", "Add");
}

/* ---- DequantizeLinear -> element-wise float nodes -> QuantizeLinear:
 * a table lookup ---- */

/* quantized conv output "c" (QLinearConv, in the kernel's layout) ->
 * Q/DQ -> scale, bias, HardSwish written out (paddle2onnx's), scale, bias
 * [-> Sigmoid] -> "t" (the end of the chain); out_value: a chain value
 * that is also a graph output, or NULL */
static mb_t *chain_model(int act, bool sigmoid, const char *out_value) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {2, C, H, H}, wd[4] = {M, C, 3, 3};
  const int64_t pads[4] = {1, 1, 1, 1};
  int zp = act == PR_DTYPE_UINT8 ? 128 : 3;
  quant_input(b, 4, xd, act, zp);
  weights(b, "W", PR_DTYPE_INT8, 4, wd, M, 0, 0, 5);
  bias(b, M);
  int n = mb_node(b, "Conv", "conv", IN("xd", "W", "B"), OUT("c"));
  mb_attr_ints(b, n, "pads", 4, pads);
  scalar_f(b, "cs", 0.04f);
  scalar_q(b, "cz", act, act == PR_DTYPE_UINT8 ? 120 : -8);
  mb_node(b, "QuantizeLinear", "qc", IN("c", "cs", "cz"), OUT("cq"));
  mb_node(b, "DequantizeLinear", "dqc", IN("cq", "cs", "cz"), OUT("cd"));
  scalar_f(b, "k1", 0.9f), scalar_f(b, "k2", -0.4f), scalar_f(b, "k3", 3.f);
  scalar_f(b, "k0", 0.f), scalar_f(b, "k6", 6.f), scalar_f(b, "k4", 0.7f), scalar_f(b, "k5", 0.2f);
  mb_node(b, "Mul", "m1", IN("k1", "cd"), OUT("a1"));
  mb_node(b, "Add", "a1n", IN("a1", "k2"), OUT("a2"));
  mb_node(b, "Add", "h1", IN("a2", "k3"), OUT("h1"));
  mb_node(b, "Clip", "h2", IN("h1", "k0", "k6"), OUT("h2"));
  mb_node(b, "Mul", "h3", IN("a2", "h2"), OUT("h3"));
  mb_node(b, "Div", "h4", IN("h3", "k6"), OUT("h4"));
  mb_node(b, "Mul", "m2", IN("k4", "h4"), OUT("a3"));
  mb_node(b, "Add", "a3n", IN("a3", "k5"), OUT("a4"));
  if (sigmoid) mb_node(b, "Sigmoid", "sg", IN("a4"), OUT("a5"));
  quant_output(b, sigmoid ? "a5" : "a4", act, act == PR_DTYPE_UINT8 ? 30 : -100);
  if (out_value) mb_output(b, out_value);
  return b;
}

static void test_lookup_u8_hardswish_chain(void **state) {
  check(chain_model(PR_DTYPE_UINT8, false, NULL), true, "QLookup", "Mul");
}

static void test_lookup_s8_with_sigmoid(void **state) {
  check(chain_model(PR_DTYPE_INT8, true, NULL), true, "QLookup", "Sigmoid");
}

/* a chain value read outside the chain (a graph output): no table */
static void test_lookup_kept_when_chain_value_is_output(void **state) {
  check(chain_model(PR_DTYPE_UINT8, true, "a3"), false, "QLookup", "Sigmoid");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_u8_per_tensor),
      cmocka_unit_test(test_conv_s8_per_channel_relu),
      cmocka_unit_test(test_conv_u8_weights_plain_kernel),
      cmocka_unit_test(test_conv_kept_when_output_is_graph_output),
      cmocka_unit_test(test_conv_kept_when_weight_axis_is_not_output_channels),
      cmocka_unit_test(test_conv_kept_when_activation_per_channel),
      cmocka_unit_test(test_matmul_bias_relu_fused),
      cmocka_unit_test(test_gemm_transb_fused),
      cmocka_unit_test(test_gemm_kept_when_alpha_not_one),
      cmocka_unit_test(test_gemm_kept_when_c_per_row),
      cmocka_unit_test(test_matmul_bias_scale_not_x_times_w),
      cmocka_unit_test(test_matmul_kept_when_weights_not_constant),
      cmocka_unit_test(test_add_relu_fused),
      cmocka_unit_test(test_add_kept_when_broadcast),
      cmocka_unit_test(test_lookup_u8_hardswish_chain),
      cmocka_unit_test(test_lookup_s8_with_sigmoid),
      cmocka_unit_test(test_lookup_kept_when_chain_value_is_output),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
