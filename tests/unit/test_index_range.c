/* Indices that arrive with a run and lie outside their axis: ONNX leaves the
 * result undefined and ONNX Runtime fails the run; so does packrat, with
 * PR_ERR_INVALID and a message naming the node and the index (the server
 * answers 400 with it). Before, Gather and the GatherND/Elements family
 * wrote zeros, the Scatters skipped the update, the losses gave NaN,
 * RoiAlign a region of zeros, ReverseSequence clamped: a 200 with a
 * plausible wrong answer. Each op: a valid run, an invalid one, a valid one
 * again on the same session (a refused run leaves it usable).
 *
 * `test_index_range NAME` runs only the tests whose name matches NAME. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_builder.h"
#include "packrat/engine.h"

#define MAX_IN 4

/* One op under test: its model (inputs in0..in<n-1>, one output y) and the
 * inputs of a run. */
typedef struct {
  pr_model_t *m;
  pr_session_t *s;
  pr_tensor_t in[MAX_IN];
  int n_in;
} op_case_t;

static void case_open(op_case_t *c, mb_t *b) {
  char err[512];
  memset(c, 0, sizeof *c);
  c->m = mb_load(b, err, sizeof err);
  if (!c->m) fail_msg("load: %s", err);
  pr_session_options_t opt = pr_session_options_default();
  if (pr_engine_session_create(c->m, &opt, &c->s, err, sizeof err)) fail_msg("session: %s", err);
  c->n_in = pr_engine_model_num_inputs(c->m);
}

static void case_close(op_case_t *c) {
  pr_engine_session_destroy(c->s);
  pr_engine_model_destroy(c->m);
}

static void set_in(op_case_t *c, int i, pr_dtype_t t, int rank, const int64_t *dims, void *data) {
  assert_true(i < MAX_IN);
  c->in[i] = (pr_tensor_t){.dtype = t, .rank = rank, .data = data};
  for (int k = 0; k < rank; k++) c->in[i].dims[k] = dims[k];
}

/* Runs c; PR_OK or the status, the message in err. */
static pr_status_t case_run(op_case_t *c, char *err, size_t err_len) {
  pr_tensor_t out[2];
  err[0] = 0;
  return pr_engine_session_run(c->s, c->in, c->n_in, out, 0, err, err_len);
}

static void expect_ok(op_case_t *c) {
  char err[512];
  if (case_run(c, err, sizeof err)) fail_msg("valid run refused: %s", err);
}

static void expect_refused(op_case_t *c, const char *message) {
  char err[512];
  pr_status_t st = case_run(c, err, sizeof err);
  if (st != PR_ERR_INVALID || strcmp(err, message))
    fail_msg("status %d, message '%s'; expected '%s'", st, err, message);
}

static mb_t *one_node(int opset, const char *op, const char *name, int n_in) {
  mb_t *b = mb_new(opset);
  static const char *names[] = {"in0", "in1", "in2", "in3"};
  const char *in[MAX_IN + 1] = {0};
  for (int i = 0; i < n_in; i++) in[i] = names[i];
  mb_node(b, op, name, in, (const char *[]){"y", NULL});
  return b;
}

static void test_gather(void **state) {
  (void)state;
  int64_t dd[2] = {5, 3}, di[1] = {2};
  for (int t = 0; t < 2; t++) {
    pr_dtype_t it = t ? PR_DTYPE_INT32 : PR_DTYPE_INT64;
    mb_t *b = mb_new(13);
    mb_input(b, "in0", PR_DTYPE_FLOAT, 2, dd);
    mb_input(b, "in1", it, 1, di);
    mb_node(b, "Gather", "Gather_3", (const char *[]){"in0", "in1", NULL},
            (const char *[]){"y", NULL});
    mb_output(b, "y");
    op_case_t c;
    case_open(&c, b);
    float data[15] = {0};
    int64_t i64[2] = {4, -5};
    int32_t i32[2] = {4, -5};
    void *idx = t ? (void *)i32 : (void *)i64;
    set_in(&c, 0, PR_DTYPE_FLOAT, 2, dd, data);
    set_in(&c, 1, it, 1, di, idx);
    expect_ok(&c);
    i64[1] = i32[1] = 70000;
    expect_refused(&c, "node 'Gather_3' (Gather): index 70000 out of range [-5, 4]");
    i64[1] = i32[1] = -6;
    expect_refused(&c, "node 'Gather_3' (Gather): index -6 out of range [-5, 4]");
    i64[1] = i32[1] = 0;
    expect_ok(&c);
    case_close(&c);
  }
}

/* A Gather whose data and indices are both constant folds when the session
 * is compiled: an index out of range fails the compile, naming the node. */
static void test_gather_folded(void **state) {
  (void)state;
  mb_t *b = mb_new(13);
  int64_t dd[1] = {4}, di[1] = {1}, idx = 9;
  float data[4] = {1, 2, 3, 4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 1, di);
  mb_init(b, "table", PR_DTYPE_FLOAT, 1, dd, data, sizeof data);
  mb_init(b, "ids", PR_DTYPE_INT64, 1, di, &idx, sizeof idx);
  mb_node(b, "Gather", "lookup", (const char *[]){"table", "ids", NULL},
          (const char *[]){"g", NULL});
  mb_node(b, "Add", "add", (const char *[]){"x", "g", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  char err[512];
  pr_model_t *m = mb_load(b, err, sizeof err);
  assert_non_null(m);
  pr_session_options_t opt = pr_session_options_default();
  pr_session_t *s = NULL;
  assert_int_equal(pr_engine_session_create(m, &opt, &s, err, sizeof err), PR_ERR_INVALID);
  if (!strstr(err, "node 'lookup' (Gather): index 9 out of range [-4, 3]")) fail_msg("%s", err);
  pr_engine_model_destroy(m);
}

static void test_gather_elements(void **state) {
  (void)state;
  int64_t dd[2] = {2, 3}, di[2] = {2, 2};
  mb_t *b = one_node(13, "GatherElements", "ge", 2);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 2, dd);
  mb_input(b, "in1", PR_DTYPE_INT64, 2, di);
  mb_attr_int(b, 0, "axis", 1);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float data[6] = {0};
  int64_t idx[4] = {0, 2, -3, 1};
  set_in(&c, 0, PR_DTYPE_FLOAT, 2, dd, data);
  set_in(&c, 1, PR_DTYPE_INT64, 2, di, idx);
  expect_ok(&c);
  idx[2] = 3;
  expect_refused(&c, "node 'ge' (GatherElements): index 3 out of range [-3, 2]");
  idx[2] = -1;
  expect_ok(&c);
  case_close(&c);
}

static void test_gather_nd(void **state) {
  (void)state;
  int64_t dd[2] = {2, 3}, di[2] = {2, 2};
  mb_t *b = one_node(13, "GatherND", "gnd", 2);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 2, dd);
  mb_input(b, "in1", PR_DTYPE_INT64, 2, di);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float data[6] = {0};
  int64_t idx[4] = {1, 2, -2, -3};
  set_in(&c, 0, PR_DTYPE_FLOAT, 2, dd, data);
  set_in(&c, 1, PR_DTYPE_INT64, 2, di, idx);
  expect_ok(&c);
  idx[2] = 2; /* the tuple's first entry indexes an axis of 2 */
  expect_refused(&c, "node 'gnd' (GatherND): index 2 out of range [-2, 1]");
  idx[2] = 0, idx[3] = 3; /* its second, an axis of 3 */
  expect_refused(&c, "node 'gnd' (GatherND): index 3 out of range [-3, 2]");
  idx[3] = 2;
  expect_ok(&c);
  case_close(&c);
}

static void scatter_elements(int opset, const char *op) {
  int64_t dd[2] = {2, 3}, di[2] = {1, 2};
  mb_t *b = one_node(opset, op, "se", 3);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 2, dd);
  mb_input(b, "in1", PR_DTYPE_INT64, 2, di);
  mb_input(b, "in2", PR_DTYPE_FLOAT, 2, di);
  mb_attr_int(b, 0, "axis", 1);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float data[6] = {0}, upd[2] = {1, 2};
  int64_t idx[2] = {0, -3};
  set_in(&c, 0, PR_DTYPE_FLOAT, 2, dd, data);
  set_in(&c, 1, PR_DTYPE_INT64, 2, di, idx);
  set_in(&c, 2, PR_DTYPE_FLOAT, 2, di, upd);
  expect_ok(&c);
  idx[1] = -4;
  char want[128];
  snprintf(want, sizeof want, "node 'se' (%s): index -4 out of range [-3, 2]", op);
  expect_refused(&c, want);
  idx[1] = 2;
  expect_ok(&c);
  case_close(&c);
}

static void test_scatter_elements(void **state) {
  (void)state;
  scatter_elements(13, "ScatterElements");
}

static void test_scatter(void **state) {
  (void)state;
  scatter_elements(9, "Scatter");
}

static void test_scatter_nd(void **state) {
  (void)state;
  int64_t dd[1] = {4}, di[2] = {1, 1}, du[1] = {1};
  mb_t *b = one_node(13, "ScatterND", "snd", 3);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 1, dd);
  mb_input(b, "in1", PR_DTYPE_INT64, 2, di);
  mb_input(b, "in2", PR_DTYPE_FLOAT, 1, du);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float data[4] = {0}, upd[1] = {1};
  int64_t idx[1] = {3};
  set_in(&c, 0, PR_DTYPE_FLOAT, 1, dd, data);
  set_in(&c, 1, PR_DTYPE_INT64, 2, di, idx);
  set_in(&c, 2, PR_DTYPE_FLOAT, 1, du, upd);
  expect_ok(&c);
  idx[0] = 4;
  expect_refused(&c, "node 'snd' (ScatterND): index 4 out of range [-4, 3]");
  idx[0] = -4;
  expect_ok(&c);
  case_close(&c);
}

static void test_max_unpool(void **state) {
  (void)state;
  int64_t dx[4] = {1, 1, 2, 2}, k[2] = {2, 2};
  mb_t *b = one_node(11, "MaxUnpool", "unpool", 2);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 4, dx);
  mb_input(b, "in1", PR_DTYPE_INT64, 4, dx);
  mb_attr_ints(b, 0, "kernel_shape", 2, k);
  mb_attr_ints(b, 0, "strides", 2, k);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float x[4] = {1, 2, 3, 4};
  int64_t idx[4] = {0, 3, 8, 15}; /* positions in the 4 x 4 output */
  set_in(&c, 0, PR_DTYPE_FLOAT, 4, dx, x);
  set_in(&c, 1, PR_DTYPE_INT64, 4, dx, idx);
  expect_ok(&c);
  idx[3] = 16;
  expect_refused(&c, "node 'unpool' (MaxUnpool): index 16 out of range [0, 15]");
  idx[3] = -1;
  expect_refused(&c, "node 'unpool' (MaxUnpool): index -1 out of range [0, 15]");
  idx[3] = 15;
  expect_ok(&c);
  case_close(&c);
}

static void loss(const char *op) {
  int64_t ds[2] = {2, 3}, dt[1] = {2};
  mb_t *b = one_node(13, op, "loss", 2);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 2, ds);
  mb_input(b, "in1", PR_DTYPE_INT64, 1, dt);
  mb_attr_int(b, 0, "ignore_index", 7);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float scores[6] = {-1, -2, -3, -1, -2, -3};
  int64_t labels[2] = {2, 7}; /* 7 is ignore_index: counts nothing, refused never */
  set_in(&c, 0, PR_DTYPE_FLOAT, 2, ds, scores);
  set_in(&c, 1, PR_DTYPE_INT64, 1, dt, labels);
  expect_ok(&c);
  labels[1] = 3;
  char want[128];
  snprintf(want, sizeof want, "node 'loss' (%s): label 3 out of range [0, 2]", op);
  expect_refused(&c, want);
  labels[1] = -1;
  snprintf(want, sizeof want, "node 'loss' (%s): label -1 out of range [0, 2]", op);
  expect_refused(&c, want);
  labels[1] = 0;
  expect_ok(&c);
  case_close(&c);
}

static void test_nll_loss(void **state) {
  (void)state;
  loss("NegativeLogLikelihoodLoss");
}

static void test_softmax_cross_entropy(void **state) {
  (void)state;
  loss("SoftmaxCrossEntropyLoss");
}

static void test_roi_align(void **state) {
  (void)state;
  int64_t dx[4] = {2, 1, 4, 4}, dr[2] = {1, 4}, db[1] = {1};
  mb_t *b = one_node(16, "RoiAlign", "roi", 3);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 4, dx);
  mb_input(b, "in1", PR_DTYPE_FLOAT, 2, dr);
  mb_input(b, "in2", PR_DTYPE_INT64, 1, db);
  mb_attr_int(b, 0, "output_height", 2);
  mb_attr_int(b, 0, "output_width", 2);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float x[32] = {0}, rois[4] = {0, 0, 3, 3};
  int64_t bi[1] = {1};
  set_in(&c, 0, PR_DTYPE_FLOAT, 4, dx, x);
  set_in(&c, 1, PR_DTYPE_FLOAT, 2, dr, rois);
  set_in(&c, 2, PR_DTYPE_INT64, 1, db, bi);
  expect_ok(&c);
  bi[0] = 2;
  expect_refused(&c, "node 'roi' (RoiAlign): batch index 2 out of range [0, 1]");
  bi[0] = -1;
  expect_refused(&c, "node 'roi' (RoiAlign): batch index -1 out of range [0, 1]");
  bi[0] = 0;
  expect_ok(&c);
  case_close(&c);
}

static void test_reverse_sequence(void **state) {
  (void)state;
  int64_t dx[2] = {3, 2}, dl[1] = {2};
  mb_t *b = one_node(10, "ReverseSequence", "rev", 2);
  mb_input(b, "in0", PR_DTYPE_FLOAT, 2, dx);
  mb_input(b, "in1", PR_DTYPE_INT64, 1, dl);
  mb_attr_int(b, 0, "batch_axis", 1);
  mb_attr_int(b, 0, "time_axis", 0);
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t lens[2] = {3, 0};
  set_in(&c, 0, PR_DTYPE_FLOAT, 2, dx, x);
  set_in(&c, 1, PR_DTYPE_INT64, 1, dl, lens);
  expect_ok(&c);
  lens[1] = 4;
  expect_refused(&c, "node 'rev' (ReverseSequence): sequence length 4 out of range [0, 3]");
  lens[1] = -1;
  expect_refused(&c, "node 'rev' (ReverseSequence): sequence length -1 out of range [0, 3]");
  lens[1] = 1;
  expect_ok(&c);
  case_close(&c);
}

/* OneHot's spec defines an index out of range (a row of off values): it
 * stays an answer, not an error. */
static void test_one_hot_defined(void **state) {
  (void)state;
  int64_t di[1] = {2}, dd[1] = {1}, depth = 3, dv[1] = {2};
  mb_t *b = mb_new(11);
  float values[2] = {0, 1};
  mb_input(b, "in0", PR_DTYPE_INT64, 1, di);
  mb_init(b, "depth", PR_DTYPE_INT64, 1, dd, &depth, sizeof depth);
  mb_init(b, "values", PR_DTYPE_FLOAT, 1, dv, values, sizeof values);
  mb_node(b, "OneHot", "hot", (const char *[]){"in0", "depth", "values", NULL},
          (const char *[]){"y", NULL});
  mb_output(b, "y");
  op_case_t c;
  case_open(&c, b);
  int64_t idx[2] = {1, 9};
  set_in(&c, 0, PR_DTYPE_INT64, 1, di, idx);
  pr_tensor_t out;
  char err[256];
  assert_int_equal(pr_engine_session_run(c.s, c.in, 1, &out, 1, err, sizeof err), PR_OK);
  const float *y = out.data, want[6] = {0, 1, 0, 0, 0, 0};
  for (int i = 0; i < 6; i++) assert_float_equal(y[i], want[i], 0);
  case_close(&c);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather),           cmocka_unit_test(test_gather_folded),
      cmocka_unit_test(test_gather_elements),  cmocka_unit_test(test_gather_nd),
      cmocka_unit_test(test_scatter_elements), cmocka_unit_test(test_scatter),
      cmocka_unit_test(test_scatter_nd),       cmocka_unit_test(test_max_unpool),
      cmocka_unit_test(test_nll_loss),         cmocka_unit_test(test_softmax_cross_entropy),
      cmocka_unit_test(test_roi_align),        cmocka_unit_test(test_reverse_sequence),
      cmocka_unit_test(test_one_hot_defined),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
