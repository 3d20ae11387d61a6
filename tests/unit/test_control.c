/* Control flow and run-time shapes: If with branches of different shapes,
 * Loop with loop-carried values and scan outputs, subgraphs nested two deep
 * reading outer-scope values, NonZero feeding the rest of the graph, fusion
 * next to a subgraph, and malformed subgraphs refused at load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_builder.h"
#include "packrat/engine.h"

#define FLOAT 1
#define INT64 7
#define BOOL 9

static const char *const *L(const char *a, const char *b, const char *c) {
  static const char *v[4][4];
  static int k;
  k = (k + 1) % 4;
  v[k][0] = a, v[k][1] = b, v[k][2] = c, v[k][3] = NULL;
  return v[k];
}

/* Runs a one-thread session of m on inputs; outputs copied into out (each
 * buffer at least `room` floats/int64s), their shapes into shapes. */
static pr_session_t *run(pr_model_t *m, const pr_tensor_t *in, int n_in, pr_tensor_t *out,
                         int n_out, int fusion) {
  pr_session_options_t opt = pr_session_options_default();
  pr_tensor_info_t info[4];
  memset(info, 0, sizeof info);
  for (int i = 0; i < n_in; i++) {
    info[i].dtype = in[i].dtype;
    info[i].rank = in[i].rank;
    memcpy(info[i].dims, in[i].dims, sizeof info[i].dims);
  }
  opt.input_shapes = info;
  opt.disable_fusion = !fusion;
  pr_session_t *s = NULL;
  char err[512] = "";
  assert_int_equal(pr_engine_session_create(m, &opt, &s, err, sizeof err), PR_OK);
  if (pr_engine_session_run(s, in, n_in, out, n_out, err, sizeof err)) fail_msg("run: %s", err);
  return s;
}

/* If(cond) -> then: x [3], else: Concat(x, x) [6]; z = y * y downstream. */
static pr_model_t *if_model(void) {
  mb_t *b = mb_new(13);
  int64_t d3[] = {3};
  mb_input(b, "cond", BOOL, 0, NULL);
  mb_input(b, "x", FLOAT, 1, d3);
  mb_t *t = mb_new(13), *e = mb_new(13);
  mb_node(t, "Identity", "t", L("x", 0, 0), L("tx", 0, 0));
  mb_output(t, "tx");
  int cat = mb_node(e, "Concat", "e", L("x", "x", 0), L("ex", 0, 0));
  mb_attr_int(e, cat, "axis", 0);
  mb_output(e, "ex");
  int n = mb_node(b, "If", "if", L("cond", 0, 0), L("y", 0, 0));
  mb_attr_graph(b, n, "then_branch", t);
  mb_attr_graph(b, n, "else_branch", e);
  mb_node(b, "Mul", "sq", L("y", "y", 0), L("z", 0, 0));
  mb_output(b, "z");
  char err[512] = "";
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  return m;
}

static void test_if_branches_of_different_shapes(void **state) {
  (void)state;
  pr_model_t *m = if_model();
  float x[3] = {1, 2, 3};
  for (int c = 1; c >= 0; c--) {
    uint8_t cond = (uint8_t)c;
    pr_tensor_t in[2] = {{.dtype = PR_DTYPE_BOOL, .rank = 0, .data = &cond},
                         {.dtype = PR_DTYPE_FLOAT, .rank = 1, .dims = {3}, .data = x}};
    pr_tensor_t out;
    pr_session_t *s = run(m, in, 2, &out, 1, 1);
    assert_true(pr_engine_session_is_dynamic(s));
    assert_int_equal(out.rank, 1);
    assert_int_equal(out.dims[0], c ? 3 : 6);
    pr_tensor_info_t info;
    assert_int_equal(pr_engine_session_output(s, 0, &info), PR_OK);
    assert_int_equal(info.dims[0], c ? 3 : 6);
    for (int i = 0; i < out.dims[0]; i++)
      assert_float_equal(((float *)out.data)[i], x[i % 3] * x[i % 3], 0);
    pr_engine_session_destroy(s);
  }
  pr_engine_model_destroy(m);
}

/* Loop(M, "", acc0): acc += x (outer scope); scan = acc * i. */
static pr_model_t *loop_model(void) {
  mb_t *b = mb_new(13);
  int64_t d2[] = {2};
  float zero[2] = {0, 0};
  mb_input(b, "M", INT64, 0, NULL);
  mb_input(b, "x", FLOAT, 1, d2);
  mb_init(b, "acc0", FLOAT, 1, d2, zero, sizeof zero);
  mb_t *body = mb_new(13);
  mb_input(body, "i", INT64, 0, NULL);
  mb_input(body, "cond_in", BOOL, 0, NULL);
  mb_input(body, "acc", FLOAT, -1, NULL);
  mb_node(body, "Add", "add", L("acc", "x", 0), L("acc_out", 0, 0));
  mb_node(body, "Identity", "c", L("cond_in", 0, 0), L("cond_out", 0, 0));
  int cast = mb_node(body, "Cast", "cast", L("i", 0, 0), L("fi", 0, 0));
  mb_attr_int(body, cast, "to", FLOAT);
  mb_node(body, "Mul", "mul", L("acc_out", "fi", 0), L("scan", 0, 0));
  mb_output(body, "cond_out");
  mb_output(body, "acc_out");
  mb_output(body, "scan");
  int n = mb_node(b, "Loop", "loop", L("M", "", "acc0"), L("final", "scans", 0));
  mb_attr_graph(b, n, "body", body);
  mb_output(b, "final");
  mb_output(b, "scans");
  char err[512] = "";
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  return m;
}

static void test_loop_carried_and_scan_outputs(void **state) {
  (void)state;
  pr_model_t *m = loop_model();
  float x[2] = {1, -2};
  for (int64_t trips = 0; trips <= 5; trips += 5) {
    pr_tensor_t in[2] = {{.dtype = PR_DTYPE_INT64, .rank = 0, .data = &trips},
                         {.dtype = PR_DTYPE_FLOAT, .rank = 1, .dims = {2}, .data = x}};
    pr_tensor_t out[2];
    pr_session_t *s = run(m, in, 2, out, 2, 1);
    assert_int_equal(out[0].rank, 1);
    for (int k = 0; k < 2; k++) assert_float_equal(((float *)out[0].data)[k], trips * x[k], 1e-6);
    if (trips) {
      assert_int_equal(out[1].rank, 2);
      assert_int_equal(out[1].dims[0], trips);
      assert_int_equal(out[1].dims[1], 2);
      for (int64_t i = 0; i < trips; i++)
        for (int k = 0; k < 2; k++)
          assert_float_equal(((float *)out[1].data)[i * 2 + k], (float)((i + 1) * i) * x[k], 1e-5);
    } else {
      assert_int_equal(pr_tensor_numel(&out[1]), 0);
    }
    pr_engine_session_destroy(s);
  }
  pr_engine_model_destroy(m);
}

/* Loop (2 trips) whose body holds an If; the branches read x and s, two
 * scopes up: i = 0 takes else (acc - x), i = 1 then (acc + s). */
static pr_model_t *nested_model(void) {
  mb_t *b = mb_new(13);
  int64_t d2[] = {2}, two = 2;
  float s10[2] = {10, 20};
  mb_input(b, "x", FLOAT, 1, d2);
  mb_init(b, "s", FLOAT, 1, d2, s10, sizeof s10);
  mb_init(b, "M", INT64, 0, NULL, &two, sizeof two);
  mb_init(b, "zero", INT64, 0, NULL, (int64_t[]){0}, sizeof(int64_t));
  mb_t *t = mb_new(13), *e = mb_new(13), *body = mb_new(13);
  mb_node(t, "Add", "t", L("acc", "s", 0), L("tv", 0, 0));
  mb_output(t, "tv");
  mb_node(e, "Sub", "e", L("acc", "x", 0), L("ev", 0, 0));
  mb_output(e, "ev");
  mb_input(body, "i", INT64, 0, NULL);
  mb_input(body, "cond_in", BOOL, 0, NULL);
  mb_input(body, "acc", FLOAT, -1, NULL);
  mb_node(body, "Greater", "gt", L("i", "zero", 0), L("pos", 0, 0));
  int nif = mb_node(body, "If", "if", L("pos", 0, 0), L("acc_out", 0, 0));
  mb_attr_graph(body, nif, "then_branch", t);
  mb_attr_graph(body, nif, "else_branch", e);
  mb_node(body, "Identity", "c", L("cond_in", 0, 0), L("cond_out", 0, 0));
  mb_output(body, "cond_out");
  mb_output(body, "acc_out");
  int n = mb_node(b, "Loop", "loop", L("M", "", "x"), L("final", 0, 0));
  mb_attr_graph(b, n, "body", body);
  mb_output(b, "final");
  char err[512] = "";
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  return m;
}

static void test_nested_subgraphs_read_outer_scopes(void **state) {
  (void)state;
  pr_model_t *m = nested_model();
  float x[2] = {3, 4};
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 1, .dims = {2}, .data = x};
  pr_tensor_t out;
  pr_session_t *s = run(m, &in, 1, &out, 1, 1);
  assert_float_equal(((float *)out.data)[0], 10, 0);
  assert_float_equal(((float *)out.data)[1], 20, 0);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* NonZero's indices (a run-time length) through Cast and Add. */
static void test_nonzero_feeds_the_graph(void **state) {
  (void)state;
  mb_t *b = mb_new(13);
  int64_t d5[] = {5};
  float one = 1;
  mb_input(b, "x", FLOAT, 1, d5);
  mb_init(b, "one", FLOAT, 0, NULL, &one, sizeof one);
  mb_node(b, "NonZero", "nz", L("x", 0, 0), L("idx", 0, 0));
  int cast = mb_node(b, "Cast", "cast", L("idx", 0, 0), L("f", 0, 0));
  mb_attr_int(b, cast, "to", FLOAT);
  mb_node(b, "Add", "add", L("f", "one", 0), L("y", 0, 0));
  mb_output(b, "y");
  char err[512] = "";
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  float x[5] = {0, 2, 0, -1, 0.5f};
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 1, .dims = {5}, .data = x};
  pr_tensor_t out;
  pr_session_t *s = run(m, &in, 1, &out, 1, 1);
  assert_int_equal(out.rank, 2);
  assert_int_equal(out.dims[0], 1);
  assert_int_equal(out.dims[1], 3);
  const float want[3] = {2, 4, 5};
  for (int i = 0; i < 3; i++) assert_float_equal(((float *)out.data)[i], want[i], 0);
  x[0] = 7; /* the next run: another length */
  assert_int_equal(pr_engine_session_run(s, &in, 1, &out, 1, err, sizeof err), PR_OK);
  assert_int_equal(out.dims[1], 4);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* A Conv + Relu (fusable) whose output an If's branch also reads: fused and
 * unfused sessions agree; a model without run-time shapes stays static. */
static void test_fusion_next_to_a_subgraph(void **state) {
  (void)state;
  mb_t *b = mb_new(13);
  int64_t dx[] = {1, 2, 3, 3}, dw[] = {2, 2, 1, 1};
  float w[4] = {0.5f, -1, 2, 0.25f};
  mb_input(b, "x", FLOAT, 4, dx);
  mb_input(b, "cond", BOOL, 0, NULL);
  mb_init(b, "w", FLOAT, 4, dw, w, sizeof w);
  mb_node(b, "Conv", "conv", L("x", "w", 0), L("c", 0, 0));
  mb_node(b, "Relu", "relu", L("c", 0, 0), L("r", 0, 0));
  mb_t *t = mb_new(13), *e = mb_new(13);
  mb_node(t, "Add", "t", L("r", "x", 0), L("tv", 0, 0));
  mb_output(t, "tv");
  mb_node(e, "Mul", "e", L("r", "r", 0), L("ev", 0, 0));
  mb_output(e, "ev");
  int n = mb_node(b, "If", "if", L("cond", 0, 0), L("y", 0, 0));
  mb_attr_graph(b, n, "then_branch", t);
  mb_attr_graph(b, n, "else_branch", e);
  mb_output(b, "y");
  mb_output(b, "r");
  char err[512] = "";
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("load: %s", err);
  float x[18];
  for (int i = 0; i < 18; i++) x[i] = (float)((i * 7) % 5) - 2;
  for (int c = 0; c < 2; c++) {
    uint8_t cond = (uint8_t)c;
    pr_tensor_t in[2] = {{.dtype = PR_DTYPE_FLOAT, .rank = 4, .dims = {1, 2, 3, 3}, .data = x},
                         {.dtype = PR_DTYPE_BOOL, .rank = 0, .data = &cond}};
    pr_tensor_t fused[2], plain[2];
    pr_session_t *s1 = run(m, in, 2, fused, 2, 1), *s2 = run(m, in, 2, plain, 2, 0);
    for (int k = 0; k < 2; k++)
      assert_memory_equal(fused[k].data, plain[k].data, sizeof(float) * 18);
    float r0 = ((float *)plain[1].data)[0];
    float want = c ? r0 + x[0] : r0 * r0;
    assert_float_equal(((float *)plain[0].data)[0], want, 1e-6);
    pr_engine_session_destroy(s1);
    pr_engine_session_destroy(s2);
  }
  pr_engine_model_destroy(m);
  /* the same graph without the If: the static path */
  b = mb_new(13);
  mb_input(b, "x", FLOAT, 4, dx);
  mb_init(b, "w", FLOAT, 4, dw, w, sizeof w);
  mb_node(b, "Conv", "conv", L("x", "w", 0), L("c", 0, 0));
  mb_node(b, "Relu", "relu", L("c", 0, 0), L("r", 0, 0));
  mb_output(b, "r");
  m = mb_load(b, err, sizeof err);
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 4, .dims = {1, 2, 3, 3}, .data = x}, out;
  pr_session_t *s = run(m, &in, 1, &out, 1, 1);
  assert_false(pr_engine_session_is_dynamic(s));
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* A load that must fail with st and a message containing `want`. */
static void expect_refused(mb_t *b, pr_status_t st, const char *want) {
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *m = NULL;
  char err[512] = "";
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err), st);
  if (!strstr(err, want)) fail_msg("'%s' lacks '%s'", err, want);
  assert_null(m);
  free(data);
}

static void test_malformed_subgraphs_refused(void **state) {
  (void)state;
  /* If without an else branch */
  mb_t *b = mb_new(13), *t = mb_new(13);
  mb_input(b, "cond", BOOL, 0, NULL);
  mb_node(t, "Identity", "t", L("cond", 0, 0), L("tv", 0, 0));
  mb_output(t, "tv");
  int n = mb_node(b, "If", "if", L("cond", 0, 0), L("y", 0, 0));
  mb_attr_graph(b, n, "then_branch", t);
  mb_output(b, "y");
  expect_refused(b, PR_ERR_INVALID, "else_branch");
  /* a branch reading a name no scope defines, and one reading the If's own
   * output */
  for (int own = 0; own < 2; own++) {
    b = mb_new(13), t = mb_new(13);
    mb_t *e = mb_new(13);
    mb_input(b, "cond", BOOL, 0, NULL);
    mb_node(t, "Identity", "t", L(own ? "y" : "nowhere", 0, 0), L("tv", 0, 0));
    mb_output(t, "tv");
    mb_node(e, "Identity", "e", L("cond", 0, 0), L("ev", 0, 0));
    mb_output(e, "ev");
    n = mb_node(b, "If", "if", L("cond", 0, 0), L("y", 0, 0));
    mb_attr_graph(b, n, "then_branch", t);
    mb_attr_graph(b, n, "else_branch", e);
    mb_output(b, "y");
    expect_refused(b, PR_ERR_INVALID, "not defined");
  }
  /* a Loop body with one output too few */
  b = mb_new(13);
  mb_t *body = mb_new(13);
  mb_input(b, "M", INT64, 0, NULL);
  mb_input(body, "i", INT64, 0, NULL);
  mb_input(body, "c", BOOL, 0, NULL);
  mb_input(body, "v", FLOAT, -1, NULL);
  mb_node(body, "Identity", "c", L("c", 0, 0), L("co", 0, 0));
  mb_output(body, "co");
  n = mb_node(b, "Loop", "loop", L("M", "", "M"), L("out", 0, 0));
  mb_attr_graph(b, n, "body", body);
  mb_output(b, "out");
  expect_refused(b, PR_ERR_INVALID, "do not match");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_if_branches_of_different_shapes),
      cmocka_unit_test(test_loop_carried_and_scan_outputs),
      cmocka_unit_test(test_nested_subgraphs_read_outer_scopes),
      cmocka_unit_test(test_nonzero_feeds_the_graph),
      cmocka_unit_test(test_fusion_next_to_a_subgraph),
      cmocka_unit_test(test_malformed_subgraphs_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
