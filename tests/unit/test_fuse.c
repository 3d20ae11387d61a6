/* Fusions (src/engine/fuse.c): each pattern is matched where it should be
 * (the fused kernel runs, the nodes it replaced are gone) and left alone
 * when one of its preconditions fails (an intermediate is a graph output or
 * has a second consumer, an operand that must be constant is not, a
 * constant has the wrong value); either way the answer is the unfused one.
 *
 * Each case builds a small model in memory, runs it with and without
 * fusion on the same random inputs, and checks the fused session's kernel
 * list (pr_engine_session_kernel) for an op that must or must not run. */
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

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) % 2000) / 1000.f - 1.f;
}

/* A float initializer of random values scale * [-1, 1) + offset. */
static void weights(mb_t *b, const char *name, int rank, const int64_t *dims, unsigned seed,
                    float scale, float offset) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= dims[k];
  float *w = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) w[i] = frand(&seed) * scale + offset;
  mb_init(b, name, PR_DTYPE_FLOAT, rank, dims, w, sizeof(float) * (size_t)n);
  free(w);
}

static void scalar(mb_t *b, const char *name, float v) {
  int64_t none[1] = {0};
  mb_init(b, name, PR_DTYPE_FLOAT, 0, none, &v, sizeof v);
}

/* ---- the harness ---- */

enum { MAX_IO = 4, MAX_ELEMS = 1 << 14 };

typedef struct {
  int n_out;
  float *out[MAX_IO];
  size_t len[MAX_IO];
  char ops[1024];   /* ",Conv,Relu," */
  char impls[2048]; /* ",Conv:brg:avx512_core,Concat:in place," */
} result_t;

static int g_precision = PR_PRECISION_FP32; /* of the sessions run() makes */

static void run(pr_model_t *m, bool fuse, result_t *r) {
  pr_session_options_t opt = pr_session_options_default();
  opt.disable_fusion = !fuse;
  opt.precision = g_precision;
  pr_session_t *s;
  char err[256];
  if (pr_engine_session_create(m, &opt, &s, err, sizeof err)) fail_msg("session: %s", err);
  int n_in = pr_engine_model_num_inputs(m);
  assert_true(n_in <= MAX_IO);
  pr_tensor_t in[MAX_IO], out[MAX_IO];
  unsigned seed = 7;
  for (int i = 0; i < n_in; i++) {
    pr_tensor_info_t info;
    assert_int_equal(pr_engine_session_input(s, i, &info), PR_OK);
    memset(&in[i], 0, sizeof in[i]);
    in[i].dtype = PR_DTYPE_FLOAT;
    in[i].rank = info.rank;
    int64_t n = 1;
    for (int k = 0; k < info.rank; k++) n *= in[i].dims[k] = info.dims[k];
    assert_true(n <= MAX_ELEMS);
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    /* scalars (epsilons, scales) positive, tensors in [-2, 2) */
    for (int64_t j = 0; j < n; j++) x[j] = info.rank ? frand(&seed) * 2 : 1.5f + frand(&seed);
    in[i].data = x;
  }
  r->n_out = pr_engine_model_num_outputs(m);
  assert_true(r->n_out <= MAX_IO);
  assert_int_equal(pr_engine_session_run(s, in, n_in, out, r->n_out, err, sizeof err), PR_OK);
  for (int i = 0; i < r->n_out; i++) {
    size_t n = 1;
    for (int k = 0; k < out[i].rank; k++) n *= (size_t)out[i].dims[k];
    r->len[i] = n;
    r->out[i] = malloc(sizeof(float) * (n ? n : 1));
    memcpy(r->out[i], out[i].data, sizeof(float) * n);
  }
  strcpy(r->ops, ",");
  strcpy(r->impls, ",");
  for (int i = 0; i < pr_engine_session_num_kernels(s); i++) {
    pr_kernel_info_t info;
    assert_int_equal(pr_engine_session_kernel(s, i, &info), PR_OK);
    size_t len = strlen(r->impls);
    snprintf(r->impls + len, sizeof r->impls - len, "%s:%s,", info.op, info.impl ? info.impl : "");
    assert_true(strlen(r->ops) + strlen(info.op) + 2 < sizeof r->ops);
    strcat(r->ops, info.op);
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

/* Loads the model of b and runs it unfused (r[0]) and fused (r[1]). */
static pr_model_t *run_both(mb_t *b, result_t r[2]) {
  char err[256];
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  run(m, false, &r[0]);
  run(m, true, &r[1]);
  return m;
}

/* Runs the model of b fused and unfused: the answers agree, the fused
 * session runs `want` (when given) and not `gone` (when given), which the
 * unfused one does run. */
static void check(mb_t *b, const char *want, const char *gone) {
  result_t r[2];
  pr_model_t *m = run_both(b, r);
  if (getenv("PR_TEST_VERBOSE")) printf("unfused %s\nfused   %s\n", r[0].ops, r[1].ops);
  if (want) {
    assert_true(has_op(&r[1], want));
    assert_false(has_op(&r[0], want));
  }
  if (gone) {
    assert_true(has_op(&r[0], gone));
    assert_false(has_op(&r[1], gone));
  }
  assert_int_equal(r[0].n_out, r[1].n_out);
  for (int i = 0; i < r[0].n_out; i++) {
    assert_int_equal(r[0].len[i], r[1].len[i]);
    double max_ref = 0, max_diff = 0;
    for (size_t j = 0; j < r[0].len[i]; j++) {
      max_ref = fmax(max_ref, fabs(r[0].out[i][j]));
      max_diff = fmax(max_diff, fabs(r[0].out[i][j] - r[1].out[i][j]));
    }
    assert_true(max_ref > 1e-3); /* the model computes something */
    if (max_diff > 1e-4 * max_ref + 1e-5)
      fail_msg("output %d: fused and unfused differ by %g (max %g)", i, max_diff, max_ref);
    free(r[0].out[i]), free(r[1].out[i]);
  }
  pr_engine_model_destroy(m);
}

/* Runs the model of b and checks that `op` still runs when fused (a pattern
 * not matched), with the unfused answer. */
static void check_kept(mb_t *b, const char *op) {
  result_t r[2];
  pr_model_t *m = run_both(b, r);
  if (getenv("PR_TEST_VERBOSE")) printf("unfused %s\nfused   %s\n", r[0].ops, r[1].ops);
  for (int i = 0; i < r[0].n_out; i++) {
    for (size_t j = 0; j < r[0].len[i]; j++)
      assert_true(fabs(r[0].out[i][j] - r[1].out[i][j]) <= 1e-4 * (1 + fabs(r[0].out[i][j])));
    free(r[0].out[i]), free(r[1].out[i]);
  }
  assert_true(has_op(&r[1], op)); /* after the answers: a wrong one says more */
  pr_engine_model_destroy(m);
}

/* ---- Conv: BatchNormalization, activations, residual Add, Pad ---- */

enum { CC = 8, CH = 6, CW = 6 };

/* x[1,8,6,6] -> Conv(w, b, pads 1) -> "c" */
static mb_t *conv_model(void) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {1, CC, CH, CW}, wd[4] = {CC, CC, 3, 3}, cd[1] = {CC};
  const int64_t pads[4] = {1, 1, 1, 1};
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  weights(b, "w", 4, wd, 1, 0.3f, 0);
  weights(b, "bias", 1, cd, 2, 0.1f, 0);
  int n = mb_node(b, "Conv", "conv", IN("x", "w", "bias"), OUT("c"));
  mb_attr_ints(b, n, "pads", 4, pads);
  return b;
}

/* BatchNormalization(c) -> "y"; the mean from a graph input when
 * mean_is_input (not constant) */
static void add_bn(mb_t *b, bool mean_is_input) {
  int64_t cd[1] = {CC};
  weights(b, "scale", 1, cd, 3, 0.5f, 1);
  weights(b, "shift", 1, cd, 4, 0.5f, 0);
  weights(b, "var", 1, cd, 6, 0.4f, 1);
  if (mean_is_input)
    mb_input(b, "mean", PR_DTYPE_FLOAT, 1, cd);
  else
    weights(b, "mean", 1, cd, 5, 0.5f, 0);
  mb_node(b, "BatchNormalization", "bn", IN("c", "scale", "shift", "mean", "var"), OUT("y"));
}

static void test_conv_bn_folded(void **state) {
  mb_t *b = conv_model();
  add_bn(b, false);
  mb_output(b, "y");
  check(b, NULL, "BatchNormalization");
}

static void test_conv_bn_kept_when_not_constant(void **state) {
  mb_t *b = conv_model();
  add_bn(b, true);
  mb_output(b, "y");
  check_kept(b, "BatchNormalization");
}

static void test_conv_bn_kept_when_conv_output_is_graph_output(void **state) {
  mb_t *b = conv_model();
  add_bn(b, false);
  mb_output(b, "y");
  mb_output(b, "c");
  check_kept(b, "BatchNormalization");
}

static void test_conv_relu_fused(void **state) {
  mb_t *b = conv_model();
  mb_node(b, "Relu", "relu", IN("c"), OUT("y"));
  mb_output(b, "y");
  check(b, NULL, "Relu");
}

static void test_conv_activation_kept_with_second_consumer(void **state) {
  mb_t *b = conv_model();
  mb_node(b, "Relu", "relu", IN("c"), OUT("y"));
  mb_node(b, "Sigmoid", "sig", IN("c"), OUT("z"));
  mb_output(b, "y");
  mb_output(b, "z");
  check_kept(b, "Relu");
}

static void test_conv_clip_fused(void **state) {
  mb_t *b = conv_model();
  scalar(b, "lo", -0.2f);
  scalar(b, "hi", 0.3f);
  mb_node(b, "Clip", "clip", IN("c", "lo", "hi"), OUT("y"));
  mb_output(b, "y");
  check(b, NULL, "Clip");
}

/* HardSigmoid takes two post-ops (linear, clip); a conv holds PR_MAX_POST (4) */
static void test_conv_activation_kept_when_post_ops_full(void **state) {
  mb_t *b = conv_model();
  mb_node(b, "HardSigmoid", "hs1", IN("c"), OUT("h1"));
  mb_node(b, "HardSigmoid", "hs2", IN("h1"), OUT("h2"));
  mb_node(b, "Relu", "relu", IN("h2"), OUT("y"));
  mb_output(b, "y");
  check_kept(b, "Relu");
}

/* Post-ops of one algorithm with different parameters: oneDNN 2.6's jit
 * kernels ran every one of them with the first one's alpha and beta (its
 * post-op injectors are keyed by the algorithm); found by randgraph. */

/* Mul by a scalar, then HardSigmoid: two linear post-ops, now one */
static void test_conv_scale_then_hardsigmoid(void **state) {
  mb_t *b = conv_model();
  scalar(b, "s", 1.5f);
  mb_node(b, "Mul", "scale", IN("s", "c"), OUT("cs"));
  int n = mb_node(b, "HardSigmoid", "hs", IN("cs"), OUT("y"));
  mb_attr_float(b, n, "alpha", 0.25f);
  mb_attr_float(b, n, "beta", 0.4f);
  mb_output(b, "y");
  check(b, NULL, "HardSigmoid");
}

/* LeakyRelu then Relu: two relu post-ops of different slopes */
static void test_conv_relu_kept_after_leaky_relu(void **state) {
  mb_t *b = conv_model();
  int n = mb_node(b, "LeakyRelu", "leaky", IN("c"), OUT("l"));
  mb_attr_float(b, n, "alpha", 0.1f);
  mb_node(b, "Relu", "relu", IN("l"), OUT("y"));
  mb_output(b, "y");
  check_kept(b, "Relu");
}

/* two Clips with other bounds */
static void test_conv_second_clip_kept(void **state) {
  mb_t *b = conv_model();
  scalar(b, "lo", -0.5f), scalar(b, "hi", 2.f), scalar(b, "hi2", 0.5f);
  mb_node(b, "Clip", "clip1", IN("c", "lo", "hi"), OUT("k"));
  mb_node(b, "Clip", "clip2", IN("k", "lo", "hi2"), OUT("y"));
  mb_output(b, "y");
  check_kept(b, "Clip");
}

/* Mul, residual Add, Mul by another scalar: linear, sum, linear */
static void test_conv_scale_after_residual_kept(void **state) {
  mb_t *b = conv_model();
  scalar(b, "s1", 1.5f), scalar(b, "s2", 2.f);
  mb_node(b, "Mul", "scale1", IN("c", "s1"), OUT("c1"));
  mb_node(b, "Add", "add", IN("c1", "x"), OUT("r"));
  mb_node(b, "Mul", "scale2", IN("r", "s2"), OUT("y"));
  mb_output(b, "y");
  check_kept(b, "Mul");
}

/* A conv whose output position reads only padding (a 2x2 window, dilation
 * 2, pads 1, on a 1x1 input) keeps its residual Add: oneDNN 2.6's brgconv
 * kernel left the bias out there with a sum post-op (and crashed with a
 * Relu too); found by randgraph. */
static void test_conv_residual_kept_when_window_in_padding(void **state) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {1, 17, 1, 1}, wd[4] = {17, 17, 2, 2}, cd[1] = {17};
  const int64_t pads[4] = {1, 1, 1, 1}, two[2] = {2, 2};
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  weights(b, "w", 4, wd, 1, 0.3f, 0);
  weights(b, "bias", 1, cd, 2, 0.2f, 0.3f);
  mb_node(b, "Sigmoid", "sig", IN("x"), OUT("s"));
  int n = mb_node(b, "Conv", "conv", IN("x", "w", "bias"), OUT("c"));
  mb_attr_ints(b, n, "pads", 4, pads);
  mb_attr_ints(b, n, "dilations", 2, two);
  mb_attr_ints(b, n, "strides", 2, two);
  mb_node(b, "Add", "add", IN("s", "c"), OUT("y"));
  mb_output(b, "y");
  check_kept(b, "Add");
}

static void test_conv_residual_add_fused(void **state) {
  mb_t *b = conv_model();
  mb_node(b, "Relu", "relu", IN("c"), OUT("r"));
  mb_node(b, "Add", "add", IN("r", "x"), OUT("y"));
  mb_output(b, "y");
  check(b, NULL, "Add");
}

static void test_conv_add_kept_when_addend_broadcasts(void **state) {
  mb_t *b = conv_model();
  int64_t sd[4] = {1, CC, 1, 1};
  weights(b, "per_channel", 4, sd, 9, 1, 0);
  mb_node(b, "Add", "add", IN("c", "per_channel"), OUT("y"));
  mb_output(b, "y");
  check_kept(b, "Add");
}

/* x -> Pad(pads, [value]) -> Conv(no pads) -> "y" */
static mb_t *pad_conv_model(float value, const int64_t *pads) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {1, CC, CH, CW}, wd[4] = {CC, CC, 3, 3}, pd[1] = {8};
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  weights(b, "w", 4, wd, 1, 0.3f, 0);
  mb_init(b, "pads", PR_DTYPE_INT64, 1, pd, pads, sizeof(int64_t) * 8);
  scalar(b, "value", value);
  mb_node(b, "Pad", "pad", IN("x", "pads", "value"), OUT("p"));
  mb_node(b, "Conv", "conv", IN("p", "w"), OUT("y"));
  mb_output(b, "y");
  return b;
}

static void test_pad_conv_fused(void **state) {
  const int64_t pads[8] = {0, 0, 1, 2, 0, 0, 2, 1};
  check(pad_conv_model(0.f, pads), NULL, "Pad");
}

static void test_pad_conv_kept_when_value_not_zero(void **state) {
  const int64_t pads[8] = {0, 0, 1, 2, 0, 0, 2, 1};
  check_kept(pad_conv_model(0.5f, pads), "Pad");
}

static void test_pad_conv_kept_when_channels_padded(void **state) {
  const int64_t pads[8] = {0, 1, 1, 1, 0, 0, 1, 1}; /* one channel more */
  mb_t *b = mb_new(13);
  int64_t xd[4] = {1, CC - 1, CH, CW}, wd[4] = {CC, CC, 3, 3}, pd[1] = {8};
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  weights(b, "w", 4, wd, 1, 0.3f, 0);
  mb_init(b, "pads", PR_DTYPE_INT64, 1, pd, pads, sizeof pads);
  mb_node(b, "Pad", "pad", IN("x", "pads"), OUT("p"));
  mb_node(b, "Conv", "conv", IN("p", "w"), OUT("y"));
  mb_output(b, "y");
  check_kept(b, "Pad");
}

/* A Pad before an AveragePool in ceil mode stays: its last window may start
 * in the Pad's zeros (here the fifth row of five), which it may not in
 * padding, so the fused pool had another output size and oneDNN refused
 * it (found by randgraph). */
static void test_pad_pool_kept_in_ceil_mode(void **state) {
  const int64_t pads[8] = {0, 0, 0, 0, 0, 0, 1, 0};
  mb_t *b = mb_new(13);
  int64_t xd[4] = {1, CC, 4, 4}, pd[1] = {8}, k[2] = {2, 2};
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  mb_init(b, "pads", PR_DTYPE_INT64, 1, pd, pads, sizeof pads);
  mb_node(b, "Pad", "pad", IN("x", "pads"), OUT("p"));
  int n = mb_node(b, "AveragePool", "pool", IN("p"), OUT("y"));
  mb_attr_ints(b, n, "kernel_shape", 2, k);
  mb_attr_ints(b, n, "strides", 2, k);
  mb_attr_int(b, n, "ceil_mode", 1);
  mb_output(b, "y");
  check_kept(b, "Pad");
}

/* ---- linear MatMul: bias, activation ---- */

enum { LM = 4, LK = 16, LN = 8 };

/* x[4,16] -> MatMul(w const) -> Add(bias) -> "y"; the bias from a graph
 * input when bias_is_input */
static mb_t *linear_model(bool bias_is_input) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {LM, LK}, wd[2] = {LK, LN}, bd[1] = {LN};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, xd);
  weights(b, "w", 2, wd, 11, 0.5f, 0);
  if (bias_is_input)
    mb_input(b, "bias", PR_DTYPE_FLOAT, 1, bd);
  else
    weights(b, "bias", 1, bd, 12, 0.5f, 0);
  mb_node(b, "MatMul", "mm", IN("x", "w"), OUT("h"));
  mb_node(b, "Add", "add", IN("h", "bias"), OUT("y"));
  return b;
}

static void test_linear_bias_fused(void **state) {
  mb_t *b = linear_model(false);
  mb_node(b, "Relu", "relu", IN("y"), OUT("z"));
  mb_output(b, "z");
  check(b, NULL, "Add");
}

static void test_linear_bias_kept_when_not_constant(void **state) {
  mb_t *b = linear_model(true);
  mb_output(b, "y");
  check_kept(b, "Add");
}

/* ---- decomposed LayerNorm ---- */

enum { LR = 6, LC = 16 };

/* x[6,16]: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul
 * gamma, Add beta -> "y"; eps from a graph input when eps_is_input */
static mb_t *layer_norm_model(bool eps_is_input) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {LR, LC}, gd[1] = {LC}, none[1] = {0};
  const int64_t axes[1] = {-1};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, xd);
  scalar(b, "two", 2.f);
  if (eps_is_input)
    mb_input(b, "eps", PR_DTYPE_FLOAT, 0, none);
  else
    scalar(b, "eps", 1e-5f);
  weights(b, "gamma", 1, gd, 13, 0.5f, 1);
  weights(b, "beta", 1, gd, 14, 0.5f, 0);
  int n = mb_node(b, "ReduceMean", "mean", IN("x"), OUT("m"));
  mb_attr_ints(b, n, "axes", 1, axes);
  mb_node(b, "Sub", "sub", IN("x", "m"), OUT("d"));
  mb_node(b, "Pow", "pow", IN("d", "two"), OUT("d2"));
  n = mb_node(b, "ReduceMean", "var", IN("d2"), OUT("v"));
  mb_attr_ints(b, n, "axes", 1, axes);
  mb_node(b, "Add", "addeps", IN("v", "eps"), OUT("ve"));
  mb_node(b, "Sqrt", "sqrt", IN("ve"), OUT("sd"));
  mb_node(b, "Div", "div", IN("d", "sd"), OUT("nrm"));
  mb_node(b, "Mul", "gamma", IN("nrm", "gamma"), OUT("g"));
  mb_node(b, "Add", "beta", IN("g", "beta"), OUT("y"));
  mb_output(b, "y");
  return b;
}

static void test_layer_norm_fused(void **state) {
  check(layer_norm_model(false), "LayerNorm", "ReduceMean");
}

static void test_layer_norm_kept_when_eps_not_constant(void **state) {
  check_kept(layer_norm_model(true), "ReduceMean");
}

static void test_layer_norm_kept_when_intermediate_is_output(void **state) {
  mb_t *b = layer_norm_model(false);
  mb_output(b, "d"); /* x - mean, read outside the pattern */
  check_kept(b, "ReduceMean");
}

/* ---- GELU ---- */

/* x[4,32] -> Div(sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul half -> "y" */
static mb_t *gelu_model(float half) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {4, 32};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, xd);
  scalar(b, "sqrt2", 1.4142135f);
  scalar(b, "one", 1.f);
  scalar(b, "half", half);
  mb_node(b, "Div", "div", IN("x", "sqrt2"), OUT("t0"));
  mb_node(b, "Erf", "erf", IN("t0"), OUT("t1"));
  mb_node(b, "Add", "plus1", IN("t1", "one"), OUT("t2"));
  mb_node(b, "Mul", "timesx", IN("x", "t2"), OUT("t3"));
  mb_node(b, "Mul", "half", IN("t3", "half"), OUT("y"));
  mb_output(b, "y");
  return b;
}

static void test_gelu_fused(void **state) {
  check(gelu_model(0.5f), "GeluErf", "Erf");
}

static void test_gelu_kept_when_constant_differs(void **state) {
  check_kept(gelu_model(0.6f), "Erf");
}

static void test_gelu_kept_with_second_consumer(void **state) {
  mb_t *b = gelu_model(0.5f);
  mb_output(b, "t1"); /* erf(x / sqrt 2) itself is an output */
  check_kept(b, "Erf");
}

/* ---- attention ---- */

enum { AB = 1, AH = 2, AS = 5, AD = 4 };

/* q, k'[1,2,4,5], v[1,2,5,4] -> MatMul -> Mul scale -> Softmax -> MatMul
 * -> "y"; the scale from a graph input when scale_is_input */
static mb_t *attention_model(bool scale_is_input) {
  mb_t *b = mb_new(13);
  int64_t qd[4] = {AB, AH, AS, AD}, kd[4] = {AB, AH, AD, AS}, none[1] = {0};
  mb_input(b, "q", PR_DTYPE_FLOAT, 4, qd);
  mb_input(b, "k", PR_DTYPE_FLOAT, 4, kd);
  mb_input(b, "v", PR_DTYPE_FLOAT, 4, qd);
  if (scale_is_input)
    mb_input(b, "scale", PR_DTYPE_FLOAT, 0, none);
  else
    scalar(b, "scale", 0.5f);
  mb_node(b, "MatMul", "qk", IN("q", "k"), OUT("s"));
  mb_node(b, "Mul", "scale", IN("s", "scale"), OUT("ss"));
  int n = mb_node(b, "Softmax", "softmax", IN("ss"), OUT("p"));
  mb_attr_int(b, n, "axis", -1);
  mb_node(b, "MatMul", "pv", IN("p", "v"), OUT("y"));
  mb_output(b, "y");
  return b;
}

static void test_attention_fused(void **state) {
  check(attention_model(false), "Attention", "Softmax");
}

static void test_attention_kept_when_scale_not_constant(void **state) {
  check_kept(attention_model(true), "Softmax");
}

static void test_attention_kept_when_probabilities_are_output(void **state) {
  mb_t *b = attention_model(false);
  mb_output(b, "p");
  check_kept(b, "Softmax");
}

/* ---- HardSwish written out; scalar scale and bias layers ---- */

/* c -> [Mul(c, s) -> Add(., t) ->] Mul(h, Clip(Add(h, 3), 0, 6)) -> Div 6
 * -> "y" (h: the scaled c, or c); depthwise: the conv groups every channel */
static mb_t *hardswish_model(bool scaled, float six, bool depthwise) {
  mb_t *b = mb_new(13);
  int64_t xd[4] = {1, 16, CH, CW}, wd[4] = {16, depthwise ? 1 : 16, 3, 3};
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  weights(b, "w", 4, wd, 11, 0.4f, 0);
  int n = mb_node(b, "Conv", "conv", IN("x", "w"), OUT("c"));
  mb_attr_ints(b, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
  if (depthwise) mb_attr_int(b, n, "group", 16);
  const char *h = "c";
  if (scaled) {
    scalar(b, "s", 1.4f), scalar(b, "t", 0.6f);
    mb_node(b, "Mul", "scale", IN("s", "c"), OUT("cs"));
    mb_node(b, "Add", "shift", IN("cs", "t"), OUT("h"));
    h = "h";
  }
  scalar(b, "three", 3.f), scalar(b, "zero", 0.f), scalar(b, "sixc", 6.f), scalar(b, "six", six);
  mb_node(b, "Add", "plus3", IN(h, "three"), OUT("p"));
  mb_node(b, "Clip", "relu6", IN("p", "zero", "sixc"), OUT("r"));
  mb_node(b, "Mul", "times", IN(h, "r"), OUT("m"));
  mb_node(b, "Div", "over6", IN("m", "six"), OUT("y"));
  mb_output(b, "y");
  return b;
}

static void test_hardswish_fused(void **state) {
  check(hardswish_model(false, 6.f, false), NULL, "Clip");
}

static void test_hardswish_kept_when_constant_differs(void **state) {
  check_kept(hardswish_model(false, 5.f, false), "Clip");
}

static void test_scalar_scale_and_bias_fused(void **state) {
  check(hardswish_model(true, 6.f, false), NULL, "Mul");
  check(hardswish_model(true, 6.f, true), NULL, "Mul"); /* depthwise kernels too */
}

/* A scalar Mul after a HardSwish post-op stays a kernel of its own. */
static void test_scalar_scale_after_activation_kept(void **state) {
  mb_t *b = hardswish_model(false, 6.f, true);
  scalar(b, "g", 0.2f);
  mb_node(b, "Mul", "gain", IN("y", "g"), OUT("z"));
  mb_output(b, "z");
  check_kept(b, "Mul");
}

/* c -> Mul(c, Sigmoid(c)) -> "y": SiLU, then a post-op of the conv */
static mb_t *silu_model(bool second_consumer) {
  mb_t *b = conv_model();
  mb_node(b, "Sigmoid", "sig", IN("c"), OUT("s"));
  mb_node(b, "Mul", "swish", IN("c", "s"), OUT("y"));
  mb_output(b, "y");
  if (second_consumer) mb_output(b, "s");
  return b;
}

static void test_silu_fused(void **state) {
  check(silu_model(false), NULL, "Sigmoid");
}

static void test_silu_kept_when_sigmoid_is_output(void **state) {
  check_kept(silu_model(true), "Sigmoid");
}

/* ---- bf16 ---- */

/* Conv -> Relu -> Conv of conv_model and a linear MatMul: bf16 sessions
 * answer within bf16's rounding of fp32 (and not bit-identically: bf16 did
 * run) where the CPU has native bf16; elsewhere session creation refuses
 * bf16 with a clear error. */
static void check_bf16(mb_t *b) {
  char err[256];
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  if (!pr_engine_bf16_native()) {
    pr_session_options_t opt = pr_session_options_default();
    opt.precision = PR_PRECISION_BF16;
    pr_session_t *s = NULL;
    assert_int_equal(pr_engine_session_create(m, &opt, &s, err, sizeof err), PR_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "bf16"));
    assert_null(s);
    pr_engine_model_destroy(m);
    return;
  }
  result_t r[2];
  run(m, true, &r[0]);
  g_precision = PR_PRECISION_BF16;
  run(m, true, &r[1]);
  g_precision = PR_PRECISION_FP32;
  for (int i = 0; i < r[0].n_out; i++) {
    double max_ref = 0, max_diff = 0;
    for (size_t j = 0; j < r[0].len[i]; j++) {
      max_ref = fmax(max_ref, fabs(r[0].out[i][j]));
      max_diff = fmax(max_diff, fabs(r[0].out[i][j] - r[1].out[i][j]));
    }
    if (!(max_diff > 0 && max_diff <= 2e-2 * max_ref))
      fail_msg("output %d: bf16 differs from fp32 by %g (max %g)", i, max_diff, max_ref);
    free(r[0].out[i]), free(r[1].out[i]);
  }
  pr_engine_model_destroy(m);
}

static void test_bf16_conv(void **state) {
  mb_t *b = conv_model();
  int64_t wd[4] = {CC, CC, 3, 3};
  const int64_t pads[4] = {1, 1, 1, 1};
  weights(b, "w2", 4, wd, 9, 0.3f, 0);
  mb_node(b, "Relu", "relu", IN("c"), OUT("r"));
  int n = mb_node(b, "Conv", "conv2", IN("r", "w2"), OUT("y"));
  mb_attr_ints(b, n, "pads", 4, pads);
  mb_output(b, "y");
  check_bf16(b);
}

static void test_bf16_linear(void **state) {
  mb_t *b = linear_model(false);
  mb_output(b, "y");
  check_bf16(b);
}

/* ---- Concat laid in place ---- */

/* x[rows,4,16] -> Relu, Sigmoid, Tanh -> Concat(axis 1) -> Neg -> "y" (a
 * graph output is not in the arena: the Concat's output is not one); with
 * reread, Relu's output is also read after the Concat (Add -> "z") */
static mb_t *concat_model(int64_t rows, bool reread) {
  mb_t *b = mb_new(13);
  int64_t xd[3] = {rows, 4, 16};
  mb_input(b, "x", PR_DTYPE_FLOAT, 3, xd);
  mb_node(b, "Relu", "relu", IN("x"), OUT("a"));
  mb_node(b, "Sigmoid", "sig", IN("x"), OUT("s"));
  mb_node(b, "Tanh", "tanh", IN("x"), OUT("t"));
  int n = mb_node(b, "Concat", "cat", IN("a", "s", "t"), OUT("c"));
  mb_attr_int(b, n, "axis", 1);
  mb_node(b, "Neg", "neg", IN("c"), OUT("y"));
  mb_output(b, "y");
  if (reread) {
    mb_node(b, "Add", "add", IN("a", "a"), OUT("z"));
    mb_output(b, "z");
  }
  return b;
}

/* The fused session's Concat is in place (its inputs are written in its
 * output) exactly when `in_place`; the unfused one copies; same answers. */
static void check_concat(mb_t *b, bool in_place) {
  result_t r[2];
  pr_model_t *m = run_both(b, r);
  if (getenv("PR_TEST_VERBOSE")) printf("unfused %s\nfused   %s\n", r[0].impls, r[1].impls);
  assert_null(strstr(r[0].impls, ",Concat:in place,"));
  assert_int_equal(strstr(r[1].impls, ",Concat:in place,") != NULL, in_place);
  for (int i = 0; i < r[0].n_out; i++) {
    assert_int_equal(r[0].len[i], r[1].len[i]);
    for (size_t j = 0; j < r[0].len[i]; j++)
      if (r[0].out[i][j] != r[1].out[i][j])
        fail_msg("output %d [%zu]: %g, unfused %g", i, j, r[1].out[i][j], r[0].out[i][j]);
    free(r[0].out[i]), free(r[1].out[i]);
  }
  pr_engine_model_destroy(m);
}

static void test_concat_in_place(void **state) {
  check_concat(concat_model(1, false), true);
}

static void test_concat_copied_when_not_one_run(void **state) {
  check_concat(concat_model(2, false), false); /* two outer rows: slices interleave */
}

static void test_concat_copied_when_input_read_after(void **state) {
  check_concat(concat_model(1, true), false); /* Relu's output copied, the rest in place */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_bn_folded),
      cmocka_unit_test(test_conv_bn_kept_when_not_constant),
      cmocka_unit_test(test_conv_bn_kept_when_conv_output_is_graph_output),
      cmocka_unit_test(test_conv_relu_fused),
      cmocka_unit_test(test_conv_activation_kept_with_second_consumer),
      cmocka_unit_test(test_conv_clip_fused),
      cmocka_unit_test(test_conv_activation_kept_when_post_ops_full),
      cmocka_unit_test(test_conv_scale_then_hardsigmoid),
      cmocka_unit_test(test_conv_relu_kept_after_leaky_relu),
      cmocka_unit_test(test_conv_second_clip_kept),
      cmocka_unit_test(test_conv_scale_after_residual_kept),
      cmocka_unit_test(test_conv_residual_kept_when_window_in_padding),
      cmocka_unit_test(test_conv_residual_add_fused),
      cmocka_unit_test(test_conv_add_kept_when_addend_broadcasts),
      cmocka_unit_test(test_pad_conv_fused),
      cmocka_unit_test(test_pad_conv_kept_when_value_not_zero),
      cmocka_unit_test(test_pad_conv_kept_when_channels_padded),
      cmocka_unit_test(test_pad_pool_kept_in_ceil_mode),
      cmocka_unit_test(test_linear_bias_fused),
      cmocka_unit_test(test_linear_bias_kept_when_not_constant),
      cmocka_unit_test(test_layer_norm_fused),
      cmocka_unit_test(test_layer_norm_kept_when_eps_not_constant),
      cmocka_unit_test(test_layer_norm_kept_when_intermediate_is_output),
      cmocka_unit_test(test_gelu_fused),
      cmocka_unit_test(test_gelu_kept_when_constant_differs),
      cmocka_unit_test(test_gelu_kept_with_second_consumer),
      cmocka_unit_test(test_hardswish_fused),
      cmocka_unit_test(test_hardswish_kept_when_constant_differs),
      cmocka_unit_test(test_scalar_scale_and_bias_fused),
      cmocka_unit_test(test_scalar_scale_after_activation_kept),
      cmocka_unit_test(test_silu_fused),
      cmocka_unit_test(test_silu_kept_when_sigmoid_is_output),
      cmocka_unit_test(test_attention_fused),
      cmocka_unit_test(test_attention_kept_when_scale_not_constant),
      cmocka_unit_test(test_attention_kept_when_probabilities_are_output),
      cmocka_unit_test(test_concat_in_place),
      cmocka_unit_test(test_bf16_conv),
      cmocka_unit_test(test_bf16_linear),
      cmocka_unit_test(test_concat_copied_when_not_one_run),
      cmocka_unit_test(test_concat_copied_when_input_read_after),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
