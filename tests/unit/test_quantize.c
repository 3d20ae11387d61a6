/* The quantizer (src/engine/quantize, packrat/quantize.h): calibration
 * statistics and parameters, and whole small models quantized through the
 * public API: the written QDQ model loads, folds into int8 kernels (each
 * quantized Conv a QLinearConv, an Add of two quantized activations a
 * QLinearAdd), answers within a few quantization steps of the float model,
 * an opset-9 model is raised to 13 with the same answers, and every
 * refusal (nothing to quantize, an unknown --exclude name, a wrong input
 * shape, writing before calibrating) comes with its message. */
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
#include <sys/stat.h>
#include <unistd.h>

#include "engine/ops/quant_util.h"
#include "engine/quantize/calib.h"
#include "model_builder.h"
#include "onnx.pb-c.h"
#include "packrat/engine.h"
#include "packrat/quantize.h"

#define IN(...) ((const char *const[]){__VA_ARGS__, NULL})
#define OUT(...) ((const char *const[]){__VA_ARGS__, NULL})

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) % 2000) / 1000.f - 1.f;
}

/* ---- calibration statistics and parameters ---- */

static void test_act_params(void **state) {
  (void)state;
  float s;
  int32_t z;
  pr__qz_act_params(0.f, 2.55f, PR_DTYPE_UINT8, &s, &z);
  assert_float_equal(s, 0.01f, 1e-7);
  assert_int_equal(z, 0);
  pr__qz_act_params(-1.f, 1.f, PR_DTYPE_UINT8, &s, &z);
  assert_float_equal(s, 2.f / 255.f, 1e-7);
  assert_true(z == 127 || z == 128); /* 127.5, give or take a float rounding */
  pr__qz_act_params(-1.f, 1.f, PR_DTYPE_INT8, &s, &z);
  assert_true(z == -1 || z == 0);
  pr__qz_act_params(1.f, 2.f, PR_DTYPE_UINT8, &s, &z); /* widened to hold 0 */
  assert_float_equal(s, 2.f / 255.f, 1e-7);
  assert_int_equal(z, 0);
  pr__qz_act_params(-3.f, -1.f, PR_DTYPE_INT8, &s, &z);
  assert_int_equal(z, 127);
  pr__qz_act_params(0.f, 0.f, PR_DTYPE_UINT8, &s, &z); /* never seen: scale 1 */
  assert_float_equal(s, 1.f, 0);
}

static void test_range_minmax_and_percentile(void **state) {
  (void)state;
  enum { N = 100000 };
  float *x = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) x[i] = (float)i / N; /* [0, 1) */
  x[7] = 100.f, x[8] = -50.f, x[9] = NAN;          /* two outliers, one NaN skipped */
  pr_qz_range_t r;
  pr__qz_range_init(&r);
  pr__qz_range_add(&r, x, N / 2);
  pr__qz_range_add(&r, x + N / 2, N - N / 2);
  float lo, hi;
  pr__qz_range_get(&r, 100, &lo, &hi);
  assert_float_equal(lo, -50.f, 0);
  assert_float_equal(hi, 100.f, 0);
  assert_int_equal(r.count, N - 1);
  assert_int_equal(pr__qz_range_hist_begin(&r), PR_OK);
  pr__qz_range_hist_add(&r, x, N);
  pr__qz_range_get(&r, 99.99, &lo, &hi); /* 10 values may lie outside */
  float bin = 150.f / PR_QZ_BINS;
  assert_true(hi >= 1.f - bin && hi <= 1.f + bin);
  assert_true(lo <= 0.f && lo >= -bin);
  pr__qz_range_get(&r, 100, &lo, &hi);
  assert_float_equal(hi, 100.f, 0);
  pr__qz_range_free(&r);
  pr__qz_range_init(&r);
  pr__qz_range_get(&r, 99.9, &lo, &hi); /* nothing seen */
  assert_true(lo == 0.f && hi == 0.f);
  free(x);
}

/* Entropy: a Gaussian's threshold lies above its bulk and far below the
 * outliers' max; a uniform distribution (nothing to clip) keeps most of
 * its range; the range is [-T, T] cut to [min, max]. */
static void test_range_entropy(void **state) {
  (void)state;
  enum { N = 200000 };
  float *x = malloc(sizeof(float) * N);
  unsigned seed = 11;
  for (int i = 0; i < N; i += 2) { /* Box-Muller: N(0, 1) */
    double u1 = (frand(&seed) + 1.0) / 2.0 + 1e-9, u2 = (frand(&seed) + 1.0) / 2.0;
    double r = sqrt(-2.0 * log(u1));
    x[i] = (float)(r * cos(6.283185307179586 * u2));
    x[i + 1] = (float)(r * sin(6.283185307179586 * u2));
  }
  for (int i = 0; i < 20; i++) x[i * 997] = i % 2 ? 50.f : -40.f; /* outliers */
  pr_qz_range_t r;
  pr__qz_range_init(&r);
  pr__qz_range_add(&r, x, N);
  assert_int_equal(pr__qz_range_hist_begin_abs(&r), PR_OK);
  pr__qz_range_hist_add(&r, x, N);
  float lo, hi;
  pr__qz_range_get(&r, 100, &lo, &hi); /* before the search: min-max */
  assert_float_equal(hi, 50.f, 0);
  pr__qz_range_entropy(&r);
  pr__qz_range_get(&r, 100, &lo, &hi);
  if (!(hi > 3.f && hi < 12.f))
    fail_msg(
        "threshold %g: want the bulk (|x| < 3) kept, the "
        "outliers (40, 50) clipped",
        hi);
  assert_float_equal(lo, -hi, 0);
  pr__qz_range_free(&r);
  /* uniform on [0, 1): its threshold keeps nearly all of it */
  for (int i = 0; i < N; i++) x[i] = (float)i / N;
  pr__qz_range_init(&r);
  pr__qz_range_add(&r, x, N);
  pr__qz_range_hist_begin_abs(&r);
  pr__qz_range_hist_add(&r, x, N);
  pr__qz_range_entropy(&r);
  pr__qz_range_get(&r, 100, &lo, &hi);
  if (!(hi > 0.9f && hi <= 1.f)) fail_msg("uniform: threshold %g", hi);
  assert_float_equal(lo, 0.f, 0); /* cut to min */
  pr__qz_range_free(&r);
  /* a histogram with nothing in it: the whole width */
  int64_t empty[PR_QZ_KL_BINS] = {0};
  assert_float_equal(pr__qz_kl_threshold(empty, PR_QZ_KL_BINS, 0.5), PR_QZ_KL_BINS * 0.5, 1e-9);
  free(x);
}

static void test_weights_and_bias(void **state) {
  (void)state;
  /* [2 outer, 3 channels, 2 inner]: channel 1 all zero */
  const float w[12] = {0.5f, -1.f, 0, 0, 2.f, 0.25f, -0.5f, 0.3f, 0, 0, -4.f, 1.f};
  int8_t q[12];
  float s[3];
  pr__qz_weights_s8(w, 2, 3, 2, 127, q, s);
  assert_float_equal(s[0], 1.f / 127, 1e-9);
  assert_float_equal(s[1], 1.f, 0);
  assert_float_equal(s[2], 4.f / 127, 1e-9);
  assert_int_equal(q[1], -127);
  assert_int_equal(q[0], 64); /* 63.5 to even */
  assert_int_equal(q[2], 0);
  assert_int_equal(q[10], -127);
  assert_int_equal(q[4], 64);
  /* 7 bits (reduce_range): [-64, 64] */
  pr__qz_weights_s8(w, 2, 3, 2, 64, q, s);
  assert_float_equal(s[2], 4.f / 64, 1e-9);
  assert_int_equal(q[1], -64);
  assert_int_equal(q[0], 32);
  assert_int_equal(q[10], -64);
  assert_int_equal(q[11], 16);
  const float b[3] = {1.f, -1e9f, 1e9f}, sw[3] = {0.5f, 1e-3f, 1e-3f};
  int32_t bq[3];
  pr__qz_bias_s32(b, 3, 0.1f, sw, 3, bq);
  assert_int_equal(bq[0], 20);
  assert_int_equal(bq[1], INT32_MIN);
  assert_int_equal(bq[2], INT32_MAX);
}

/* ---- whole models ---- */

static const int64_t X_DIMS[4] = {1, 3, 8, 8};

static void init_random(mb_t *b, const char *name, int rank, const int64_t *dims, float scale,
                        unsigned seed) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= dims[k];
  float *v = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = frand(&seed) * scale;
  mb_init(b, name, PR_DTYPE_FLOAT, rank, dims, v, sizeof(float) * (size_t)n);
  free(v);
}

/* conv "name": in -> Conv(W [m, c, k, k], B) -> out */
static void conv(mb_t *b, const char *name, const char *in, const char *out, int64_t m, int64_t c,
                 int64_t k, unsigned seed) {
  char w[64], bias[64];
  snprintf(w, sizeof w, "%s_W", name);
  snprintf(bias, sizeof bias, "%s_B", name);
  int64_t wd[4] = {m, c, k, k};
  init_random(b, w, 4, wd, 0.5f, seed);
  init_random(b, bias, 1, &m, 0.2f, seed + 1);
  int n = mb_node(b, "Conv", name, IN(in, w, bias), OUT(out));
  int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2};
  mb_attr_ints(b, n, "pads", 4, pads);
}

/* x -> conv1 -> Relu -> conv2 -> Tanh -> y */
static mb_t *chain_model(int opset) {
  mb_t *b = mb_new(opset);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, X_DIMS);
  conv(b, "conv1", "x", "c1", 4, 3, 3, 5);
  mb_node(b, "Relu", "relu1", IN("c1"), OUT("r1"));
  conv(b, "conv2", "r1", "c2", 2, 4, 1, 9);
  mb_node(b, "Tanh", "tanh", IN("c2"), OUT("y"));
  mb_output(b, "y");
  return b;
}

/* The chain, each Conv reading one of its constants through an Identity (as
 * PyTorch exports share equal biases): conv1's bias, conv2's weight. */
static mb_t *identity_model(void) {
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, X_DIMS);
  int64_t w1[4] = {4, 3, 3, 3}, w2[4] = {2, 4, 1, 1}, four = 4, two = 2;
  init_random(b, "W1", 4, w1, 0.5f, 5);
  init_random(b, "B1", 1, &four, 0.2f, 6);
  init_random(b, "W2", 4, w2, 0.5f, 9);
  init_random(b, "B2", 1, &two, 0.2f, 10);
  mb_node(b, "Identity", "id_b1", IN("B1"), OUT("B1_shared"));
  mb_node(b, "Identity", "id_w2", IN("W2"), OUT("W2_shared"));
  int n = mb_node(b, "Conv", "conv1", IN("x", "W1", "B1_shared"), OUT("c1"));
  int64_t pads[4] = {1, 1, 1, 1};
  mb_attr_ints(b, n, "pads", 4, pads);
  mb_node(b, "Relu", "relu1", IN("c1"), OUT("r1"));
  mb_node(b, "Conv", "conv2", IN("r1", "W2_shared", "B2"), OUT("c2"));
  mb_node(b, "Tanh", "tanh", IN("c2"), OUT("y"));
  mb_output(b, "y");
  return b;
}

/* x -> conv1 -> a; x -> conv2 -> c; a + c -> Tanh -> y */
static mb_t *add_model(void) {
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, X_DIMS);
  conv(b, "conv1", "x", "a", 4, 3, 3, 5);
  conv(b, "conv2", "x", "c", 4, 3, 1, 7);
  mb_node(b, "Add", "add", IN("a", "c"), OUT("s"));
  mb_node(b, "Tanh", "tanh", IN("s"), OUT("y"));
  mb_output(b, "y");
  return b;
}

/* x -> Conv -> Clip (min 0, max 1 as attributes: opset 9) -> Softmax(axis 3) -> y */
static mb_t *opset9_model(void) {
  mb_t *b = mb_new(9);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, X_DIMS);
  conv(b, "conv1", "x", "c1", 4, 3, 3, 5);
  int n = mb_node(b, "Clip", "clip", IN("c1"), OUT("k"));
  mb_attr_float(b, n, "min", 0.f);
  mb_attr_float(b, n, "max", 1.f);
  conv(b, "conv2", "k", "c2", 2, 4, 1, 9);
  n = mb_node(b, "Softmax", "softmax", IN("c2"), OUT("y"));
  mb_attr_int(b, n, "axis", 3);
  mb_output(b, "y");
  return b;
}

static void save_model(mb_t *b, const char *path) {
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
  free(data);
}

static void random_input(pr_tensor_t *t, float *buf, unsigned seed) {
  *t = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = 4, .data = buf};
  memcpy(t->dims, X_DIMS, sizeof X_DIMS);
  for (int i = 0; i < 3 * 8 * 8; i++) buf[i] = frand(&seed) * 2.f;
}

/* Quantizes path into qpath on 8 random samples (and 4 held out, with an
 * accuracy target); the report (its float_nodes gone with the quantizer). */
static pr_quantize_report_t quantize(const char *path, const char *qpath,
                                     const pr_quantize_options_t *opt) {
  char err[512];
  pr_quantizer_t *q;
  if (pr_engine_quantizer_create(path, opt, &q, err, sizeof err)) fail_msg("create: %s", err);
  assert_int_equal(pr_engine_quantizer_num_inputs(q), 1);
  float buf[3 * 8 * 8];
  pr_tensor_t in;
  for (int pass = 0; pass < pr_engine_quantizer_passes(q); pass++)
    for (unsigned k = 0; k < 8; k++) {
      random_input(&in, buf, 100 + k);
      if (pr_engine_quantizer_observe(q, pass, &in, 1, err, sizeof err)) fail_msg("%s", err);
    }
  for (unsigned k = 0; opt->accuracy > 0 && k < 4; k++) {
    random_input(&in, buf, 300 + k);
    if (pr_engine_quantizer_hold_out(q, &in, 1, err, sizeof err)) fail_msg("%s", err);
  }
  pr_quantize_report_t rep;
  if (pr_engine_quantizer_write(q, qpath, &rep, err, sizeof err)) fail_msg("write: %s", err);
  pr_engine_quantizer_destroy(q);
  return rep;
}

/* Runs path on a new random input: the output (malloc'd, n values) and the
 * kernels' op names as ",op,op,". */
static float *run_model(const char *path, int64_t *n, char *ops, size_t ops_len) {
  char err[512];
  pr_model_t *m;
  pr_session_t *s;
  if (pr_engine_model_load_file(path, &m, err, sizeof err)) fail_msg("load: %s", err);
  pr_session_options_t opt = pr_session_options_default();
  if (pr_engine_session_create(m, &opt, &s, err, sizeof err)) fail_msg("session: %s", err);
  float buf[3 * 8 * 8];
  pr_tensor_t in, out;
  random_input(&in, buf, 999);
  assert_int_equal(pr_engine_session_run(s, &in, 1, &out, 1, err, sizeof err), PR_OK);
  *n = pr_tensor_numel(&out);
  float *y = malloc(sizeof(float) * (size_t)*n);
  memcpy(y, out.data, sizeof(float) * (size_t)*n);
  snprintf(ops, ops_len, ",");
  for (int i = 0; i < pr_engine_session_num_kernels(s); i++) {
    pr_kernel_info_t k;
    pr_engine_session_kernel(s, i, &k);
    strncat(ops, k.op, ops_len - strlen(ops) - 2);
    strcat(ops, ",");
  }
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
  return y;
}

/* Both models' answers within tol; the quantized one runs `want`. */
static void check_close(const char *path, const char *qpath, float tol, const char *want) {
  int64_t n32, n8;
  char ops32[2048], ops8[2048];
  float *y32 = run_model(path, &n32, ops32, sizeof ops32);
  float *y8 = run_model(qpath, &n8, ops8, sizeof ops8);
  assert_int_equal(n32, n8);
  float worst = 0;
  for (int64_t i = 0; i < n32; i++) worst = fmaxf(worst, fabsf(y32[i] - y8[i]));
  if (worst > tol) fail_msg("max |fp32 - int8| %g > %g", worst, tol);
  assert_true(worst > 0); /* it did quantize */
  if (want && !strstr(ops8, want)) fail_msg("no %s among %s", want, ops8);
  free(y32), free(y8);
}

/* The written model's opset and its QuantizeLinear nodes. */
static void inspect(const char *qpath, int *opset, int *n_quantize) {
  void *data;
  size_t len;
  FILE *f = fopen(qpath, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  len = (size_t)ftell(f);
  rewind(f);
  data = malloc(len);
  assert_int_equal(fread(data, 1, len, f), len);
  fclose(f);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
  assert_non_null(mp);
  *opset = (int)mp->opset_import[0]->version;
  *n_quantize = 0;
  for (size_t i = 0; i < mp->graph->n_node; i++)
    *n_quantize += !strcmp(mp->graph->node[i]->op_type, "QuantizeLinear");
  onnx__model_proto__free_unpacked(mp, NULL);
  free(data);
}

static char dir[] = "/tmp/pr_test_quantize_XXXXXX";

static void paths(const char *name, char *path, char *qpath) {
  snprintf(path, 512, "%s/%s.onnx", dir, name);
  snprintf(qpath, 512, "%s/%s.int8.onnx", dir, name);
}

static void test_chain_u8_and_s8(void **state) {
  (void)state;
  char path[512], qpath[512];
  paths("chain", path, qpath);
  save_model(chain_model(13), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  pr_quantize_report_t rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.ops[0], 2);
  assert_int_equal(rep.tensors, 3); /* x, the Relu's output, conv2's output */
  assert_int_equal(rep.samples, 8);
  int opset, n_q;
  inspect(qpath, &opset, &n_q);
  assert_int_equal(opset, 13);
  assert_int_equal(n_q, 3);
  check_close(path, qpath, 0.08f, ",QLinearConv,");
  opt.activation_type = PR_DTYPE_INT8;
  opt.method = PR_CALIB_PERCENTILE;
  opt.percentile = 99.99;
  quantize(path, qpath, &opt);
  check_close(path, qpath, 0.08f, ",QLinearConv,");
  /* entropy: on these 8 small samples (1536 values of the Relu's output in
   * 2048 bins) it clips r1 to 2.6 of its 6.0 and c2 too, as KL thresholds
   * do on sparse histograms: further from fp32, but an answer */
  opt.method = PR_CALIB_ENTROPY;
  rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.ops[0], 2);
  check_close(path, qpath, 0.75f, ",QLinearConv,");
}

/* Constants read through an Identity are constants: both Convs quantized. */
static void test_identity_of_constants(void **state) {
  (void)state;
  char path[512], qpath[512];
  paths("identity", path, qpath);
  save_model(identity_model(), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  pr_quantize_report_t rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.ops[0], 2);
  check_close(path, qpath, 0.08f, ",QLinearConv,");
}

static void test_add_folds(void **state) {
  (void)state;
  char path[512], qpath[512];
  paths("add", path, qpath);
  save_model(add_model(), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  pr_quantize_report_t rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.ops[0], 2);
  assert_int_equal(rep.ops[3], 1);
  check_close(path, qpath, 0.1f, ",QLinearAdd,");
  opt.ops = PR_QUANT_CONV; /* Add left float */
  rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.ops[3], 0);
  check_close(path, qpath, 0.1f, ",QLinearConv,");
}

static void test_exclude(void **state) {
  (void)state;
  char path[512], qpath[512];
  paths("exclude", path, qpath);
  save_model(chain_model(13), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  const char *ex[] = {"conv2"};
  opt.exclude = ex, opt.n_exclude = 1;
  pr_quantize_report_t rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.ops[0], 1);
  assert_int_equal(rep.tensors, 2);
}

/* x -> conv1 -> BatchNormalization -> Tanh -> y */
static mb_t *bn_model(void) {
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, X_DIMS);
  conv(b, "conv1", "x", "c1", 4, 3, 3, 5);
  const float scale[4] = {0.5f, 2.f, 1.f, 4.f}, bias[4] = {0.1f, -0.2f, 0.f, 0.3f};
  const float mean[4] = {0.1f, 0.f, -0.3f, 0.2f}, var[4] = {0.5f, 2.f, 0.1f, 1.f};
  int64_t four = 4;
  mb_init(b, "s", PR_DTYPE_FLOAT, 1, &four, scale, sizeof scale);
  mb_init(b, "b", PR_DTYPE_FLOAT, 1, &four, bias, sizeof bias);
  mb_init(b, "m", PR_DTYPE_FLOAT, 1, &four, mean, sizeof mean);
  mb_init(b, "v", PR_DTYPE_FLOAT, 1, &four, var, sizeof var);
  mb_node(b, "BatchNormalization", "bn", IN("c1", "s", "b", "m", "v"), OUT("n"));
  mb_node(b, "Tanh", "tanh", IN("n"), OUT("y"));
  mb_output(b, "y");
  return b;
}

static void test_batchnorm_folded(void **state) {
  (void)state;
  char path[512], qpath[512];
  paths("bn", path, qpath);
  save_model(bn_model(), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  pr_quantize_report_t rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.folded_bn, 0); /* off by default: the Conv's output quantized before it */
  assert_int_equal(rep.tensors, 2);
  /* the Conv's output quantized before the normalization's scales (up to
   * 4 / sqrt(0.5)): its steps grow with them */
  check_close(path, qpath, 0.15f, ",QLinearConv,");
  opt.fold_batchnorm = true;
  rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.folded_bn, 1);
  assert_int_equal(rep.ops[0], 1);
  assert_int_equal(rep.tensors, 2); /* x and the normalized output */
  check_close(path, qpath, 0.1f, ",QLinearConv,");
}

/* chain_model's weights of conv1 and a Mul's constant in a data file next
 * to the model; the quantized model, written to another folder, carries
 * its data inline. */
static void test_external_data(void **state) {
  (void)state;
  char path[512], qpath[512], data[600];
  snprintf(path, sizeof path, "%s/ext.onnx", dir);
  snprintf(qpath, sizeof qpath, "%s/elsewhere", dir);
  mkdir(qpath, 0755);
  snprintf(qpath, sizeof qpath, "%s/elsewhere/ext.int8.onnx", dir);
  snprintf(data, sizeof data, "%s/ext.bin", dir);
  float w[4 * 3 * 3 * 3], k[4];
  unsigned seed = 3;
  for (size_t i = 0; i < sizeof w / sizeof *w; i++) w[i] = frand(&seed) * 0.5f;
  for (int i = 0; i < 4; i++) k[i] = 0.5f + 0.25f * (float)i;
  FILE *f = fopen(data, "wb");
  assert_non_null(f);
  fwrite(w, 1, sizeof w, f);
  fwrite(k, 1, sizeof k, f);
  fclose(f);
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, X_DIMS);
  int64_t wd[4] = {4, 3, 3, 3}, kd[4] = {1, 4, 1, 1};
  mb_init_external(b, "W", PR_DTYPE_FLOAT, 4, wd, "ext.bin", 0, (long)sizeof w);
  mb_init_external(b, "K", PR_DTYPE_FLOAT, 4, kd, "ext.bin", (long)sizeof w, (long)sizeof k);
  int n = mb_node(b, "Conv", "conv1", IN("x", "W"), OUT("c1"));
  int64_t pads[4] = {1, 1, 1, 1};
  mb_attr_ints(b, n, "pads", 4, pads);
  mb_node(b, "Mul", "mul", IN("c1", "K"), OUT("m"));
  mb_node(b, "Tanh", "tanh", IN("m"), OUT("y"));
  mb_output(b, "y");
  save_model(b, path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  pr_quantize_report_t rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.ops[0], 1);
  check_close(path, qpath, 0.08f, ",QLinearConv,");
}

static void test_opset9_raised(void **state) {
  (void)state;
  char path[512], qpath[512];
  paths("opset9", path, qpath);
  save_model(opset9_model(), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  pr_quantize_report_t rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.from_opset, 9);
  assert_int_equal(rep.opset, 13);
  int opset, n_q;
  inspect(qpath, &opset, &n_q);
  assert_int_equal(opset, 13);
  /* the Clip's bounds and the Softmax's axis kept their meaning */
  check_close(path, qpath, 0.05f, ",QLinearConv,");
}

static void test_refusals(void **state) {
  (void)state;
  char path[512], qpath[512], err[512];
  pr_quantizer_t *q;
  pr_quantize_options_t opt = pr_quantize_options_default();
  /* nothing to quantize */
  paths("neg", path, qpath);
  int64_t d[2] = {2, 3};
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, d);
  mb_node(b, "Neg", "neg", IN("x"), OUT("y"));
  mb_output(b, "y");
  save_model(b, path);
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "nothing to quantize"));
  /* not a model, not a file */
  assert_int_equal(pr_engine_quantizer_create("/nonexistent.onnx", &opt, &q, err, sizeof err),
                   PR_ERR_IO);
  FILE *f = fopen(path, "wb");
  fputs("not a model", f);
  fclose(f);
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_INVALID);
  /* an excluded name that names no node; bad options */
  paths("chain", path, qpath);
  save_model(chain_model(13), path);
  const char *ex[] = {"no_such_node"};
  opt.exclude = ex, opt.n_exclude = 1;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_NOT_FOUND);
  assert_non_null(strstr(err, "no_such_node"));
  opt = pr_quantize_options_default();
  opt.activation_type = PR_DTYPE_INT32;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_INVALID);
  /* a wrong shape and type; writing before a sample */
  opt = pr_quantize_options_default();
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_quantizer_write(q, qpath, NULL, err, sizeof err), PR_ERR_INVALID);
  float buf[4 * 8 * 8] = {0};
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 4, .dims = {1, 4, 8, 8}, .data = buf};
  assert_int_equal(pr_engine_quantizer_observe(q, 0, &in, 1, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "the model takes FLOAT [1, 3, 8, 8]"));
  in.dims[1] = 3, in.dtype = PR_DTYPE_INT32;
  assert_int_equal(pr_engine_quantizer_observe(q, 0, &in, 1, err, sizeof err), PR_ERR_INVALID);
  in.dtype = PR_DTYPE_FLOAT;
  assert_int_equal(pr_engine_quantizer_observe(q, 1, &in, 1, err, sizeof err), PR_ERR_INVALID);
  assert_int_equal(pr_engine_quantizer_observe(q, 0, &in, 1, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_quantizer_write(q, "/nonexistent/dir/q.onnx", NULL, err, sizeof err),
                   PR_ERR_IO);
  pr_engine_quantizer_destroy(q);
  pr_engine_quantizer_destroy(NULL);
}

/* ---- the accuracy search ---- */

static const int64_t S_DIMS[4] = {1, 2, 6, 6};

/* x [1, 2, 6, 6] -> "bad" (1x1 Conv, weights {1000, 1}) -> c -> "good"
 * (3x3 Conv) -> Tanh -> y. The samples' channel 0 is zero, so the 1000
 * only sets bad's int8 weight scale (1000 / 127), and its weight 1 rounds
 * to 0: bad in int8 answers 0 where fp32 answers x[1]. */
static mb_t *search_model(void) {
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, S_DIMS);
  const float wb[2] = {1000.f, 1.f};
  int64_t wd[4] = {1, 2, 1, 1};
  mb_init(b, "bad_W", PR_DTYPE_FLOAT, 4, wd, wb, sizeof wb);
  mb_node(b, "Conv", "bad", IN("x", "bad_W"), OUT("c"));
  conv(b, "good", "c", "g", 2, 1, 3, 7);
  mb_node(b, "Tanh", "tanh", IN("g"), OUT("y"));
  mb_output(b, "y");
  return b;
}

static void search_input(pr_tensor_t *t, float *buf, unsigned seed) {
  *t = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = 4, .data = buf};
  memcpy(t->dims, S_DIMS, sizeof S_DIMS);
  for (int i = 0; i < 36; i++) buf[i] = 0, buf[36 + i] = frand(&seed);
}

/* Quantizes path with 6 samples for ranges and 4 held out. */
static pr_status_t quantize_searched(const char *path, const char *qpath,
                                     const pr_quantize_options_t *opt, pr_quantize_report_t *rep,
                                     char *err, size_t err_len) {
  pr_quantizer_t *q;
  pr_status_t st = pr_engine_quantizer_create(path, opt, &q, err, err_len);
  if (st) return st;
  float buf[72];
  pr_tensor_t in;
  for (unsigned k = 0; k < 10 && !st; k++) {
    search_input(&in, buf, 200 + k);
    st = k < 6 ? pr_engine_quantizer_observe(q, 0, &in, 1, err, err_len)
               : pr_engine_quantizer_hold_out(q, &in, 1, err, err_len);
  }
  if (!st) st = pr_engine_quantizer_write(q, qpath, rep, err, err_len);
  if (!st && rep->n_float) assert_string_equal(rep->float_nodes[0], "bad"); /* still alive */
  pr_engine_quantizer_destroy(q);
  return st;
}

static void test_accuracy_search(void **state) {
  (void)state;
  char path[512], qpath[512], err[512];
  paths("search", path, qpath);
  save_model(search_model(), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  opt.accuracy = 100;
  pr_quantize_report_t rep;
  if (quantize_searched(path, qpath, &opt, &rep, err, sizeof err)) fail_msg("%s", err);
  /* every node int8 misses; bad alone float meets it, good stays int8 */
  assert_true(rep.agreement_all_int8 < 50);
  assert_int_equal(rep.n_float, 1);
  assert_float_equal(rep.agreement, 100, 0);
  assert_int_equal(rep.ops[0], 1);
  assert_int_equal(rep.held_out, 4);
  assert_true(rep.trials >= 3); /* all int8, then each alone in int8 */
  int opset, n_q;
  inspect(qpath, &opset, &n_q);
  assert_int_equal(n_q, 2); /* c and g: x, which only bad reads, stays float */
  /* a model that quantizes cleanly keeps nothing float, after one trial */
  paths("search_clean", path, qpath);
  save_model(chain_model(13), path);
  opt.tolerance = 0.1;
  rep = quantize(path, qpath, &opt);
  assert_int_equal(rep.n_float, 0);
  assert_int_equal(rep.trials, 1);
  assert_float_equal(rep.agreement, 100, 0);
  assert_int_equal(rep.ops[0], 2);
  /* no report of a search without one */
  opt.accuracy = 0;
  rep = quantize(path, qpath, &opt);
  assert_true(rep.agreement < 0 && rep.n_float == 0 && rep.held_out == 0);
}

static void test_accuracy_refusals(void **state) {
  (void)state;
  char path[512], qpath[512], err[512];
  paths("search", path, qpath);
  save_model(search_model(), path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  pr_quantizer_t *q;
  const double bad_accuracy[] = {-1, 100.5, NAN};
  for (int i = 0; i < 3; i++) {
    opt.accuracy = bad_accuracy[i];
    assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_INVALID);
  }
  opt.accuracy = 99, opt.tolerance = 0;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_INVALID);
  opt.tolerance = 0.02, opt.metric = (pr_quantize_metric_t)7;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_INVALID);
  /* nothing held out: write refuses */
  opt.metric = PR_QUANT_METRIC_RANGE;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_OK);
  float buf[72];
  pr_tensor_t in;
  search_input(&in, buf, 1);
  assert_int_equal(pr_engine_quantizer_observe(q, 0, &in, 1, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_quantizer_write(q, qpath, NULL, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "held-out"));
  pr_engine_quantizer_destroy(q);
  /* holding out without a search; a target only every node float meets */
  opt.accuracy = 0;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_quantizer_hold_out(q, &in, 1, err, sizeof err), PR_ERR_INVALID);
  pr_engine_quantizer_destroy(q);
  opt.accuracy = 100, opt.tolerance = 1e-9;
  unlink(qpath);
  pr_quantize_report_t rep;
  assert_int_equal(quantize_searched(path, qpath, &opt, &rep, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "no node in int8"));
  assert_int_equal(access(qpath, F_OK), -1); /* nothing written */
}

/* ---- dynamic quantization ---- */

/* x [4, 16] -> MatMul (W [16, 8]) -> Tanh -> y: the MatMul dynamic, run on
 * oneDNN's int8 matmul where it is exact (VNNI), near the float answer. */
static void test_dynamic(void **state) {
  (void)state;
  char path[512], qpath[512], err[512];
  paths("dynamic", path, qpath);
  mb_t *b = mb_new(13);
  const int64_t xd[2] = {4, 16}, wd[2] = {16, 8};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, xd);
  init_random(b, "W", 2, wd, 0.5f, 3);
  mb_node(b, "MatMul", "mm", IN("x", "W"), OUT("m"));
  mb_node(b, "Tanh", "tanh", IN("m"), OUT("y"));
  mb_output(b, "y");
  save_model(b, path);
  pr_quantize_options_t opt = pr_quantize_options_default();
  opt.dynamic = true;
  pr_quantizer_t *q;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_quantizer_passes(q), 0);
  float buf[64];
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {4, 16}, .data = buf};
  unsigned seed = 5;
  for (int i = 0; i < 64; i++) buf[i] = frand(&seed) * 2.f;
  assert_int_equal(pr_engine_quantizer_observe(q, 0, &in, 1, err, sizeof err), PR_ERR_INVALID);
  pr_quantize_report_t rep;
  assert_int_equal(pr_engine_quantizer_write(q, qpath, &rep, err, sizeof err), PR_OK);
  pr_engine_quantizer_destroy(q);
  assert_int_equal(rep.ops[1], 1);
  assert_int_equal(rep.tensors, 1); /* one DynamicQuantizeLinear */
  float y[2][32];
  pr_model_t *m;
  pr_session_t *sess;
  pr_session_options_t so = pr_session_options_default();
  for (int k = 0; k < 2; k++) {
    if (pr_engine_model_load_file(k ? qpath : path, &m, err, sizeof err)) fail_msg("%s", err);
    if (pr_engine_session_create(m, &so, &sess, err, sizeof err)) fail_msg("%s", err);
    pr_tensor_t out;
    assert_int_equal(pr_engine_session_run(sess, &in, 1, &out, 1, err, sizeof err), PR_OK);
    memcpy(y[k], out.data, sizeof y[k]);
    for (int i = 0; k && i < pr_engine_session_num_kernels(sess); i++) {
      pr_kernel_info_t ki;
      pr_engine_session_kernel(sess, i, &ki);
      if (!strcmp(ki.op, "MatMulInteger") && pr__q8_dnnl_exact() && !ki.impl[0])
        fail_msg("MatMulInteger on the plain loop where oneDNN's int8 matmul is exact");
    }
    pr_engine_session_destroy(sess);
    pr_engine_model_destroy(m);
  }
  float worst = 0;
  for (int i = 0; i < 32; i++) worst = fmaxf(worst, fabsf(y[0][i] - y[1][i]));
  if (!(worst > 0 && worst < 0.05f)) fail_msg("max |fp32 - dynamic| %g", worst);
  /* dynamic takes no accuracy search */
  opt.accuracy = 99;
  assert_int_equal(pr_engine_quantizer_create(path, &opt, &q, err, sizeof err), PR_ERR_INVALID);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_act_params),       cmocka_unit_test(test_range_minmax_and_percentile),
      cmocka_unit_test(test_range_entropy),    cmocka_unit_test(test_weights_and_bias),
      cmocka_unit_test(test_chain_u8_and_s8),  cmocka_unit_test(test_identity_of_constants),
      cmocka_unit_test(test_add_folds),        cmocka_unit_test(test_exclude),
      cmocka_unit_test(test_opset9_raised),    cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_batchnorm_folded), cmocka_unit_test(test_external_data),
      cmocka_unit_test(test_accuracy_search),  cmocka_unit_test(test_accuracy_refusals),
      cmocka_unit_test(test_dynamic),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) rc = rc ? rc : 1;
  return rc;
}
