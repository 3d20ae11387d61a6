/* Integer kernels on hostile values: every input has a defined result (the
 * semantics are in src/engine/ops/intmath.h and docs/engine.md): overflow wraps
 * in two's complement, x / 0 is 0, INT_MIN / -1 is INT_MIN, a float cast to
 * an integer truncates and wraps as ONNX Runtime's does, and a model whose constants fold to such
 * values loads. Before these were defined, the runs below died of SIGFPE or
 * of a UBSan abort, or gave wrong answers.
 *
 * `test_int_ops NAME` runs only the tests whose name matches NAME. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model_builder.h"
#include "packrat/engine.h"

static pr_model_t *load_mb(mb_t *b) {
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *m;
  char err[256];
  pr_status_t st = pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err);
  free(data);
  if (st) fail_msg("load: %s", err);
  return m;
}

static pr_session_t *session(pr_model_t *m) {
  pr_session_options_t opt = pr_session_options_default();
  pr_session_t *s;
  char err[256];
  if (pr_engine_session_create(m, &opt, &s, err, sizeof err)) fail_msg("session: %s", err);
  return s;
}

static void run(pr_session_t *s, const pr_tensor_t *in, int n_in, pr_tensor_t *out, int n_out) {
  char err[256];
  if (pr_engine_session_run(s, in, n_in, out, n_out, err, sizeof err)) fail_msg("run: %s", err);
}

#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define N_BIN 6

/* a, b [N_BIN] of elem -> Add, Sub, Mul, Div, Neg(a), Abs(a), ReduceSum(b),
 * CumSum(b) */
static pr_model_t *arith_model(int elem) {
  mb_t *b = mb_new(13);
  int64_t d[1] = {N_BIN}, one[1] = {1}, axis = 0;
  mb_input(b, "a", elem, 1, d);
  mb_input(b, "b", elem, 1, d);
  mb_init(b, "axis", PR_DTYPE_INT64, 0, one, &axis, 8);
  const char *ops[] = {"Add", "Sub", "Mul", "Div"};
  for (int k = 0; k < 4; k++)
    mb_node(b, ops[k], ops[k], (const char *[]){"a", "b", NULL}, (const char *[]){ops[k], NULL});
  mb_node(b, "Neg", "neg", (const char *[]){"a", NULL}, (const char *[]){"Neg", NULL});
  mb_node(b, "Abs", "abs", (const char *[]){"a", NULL}, (const char *[]){"Abs", NULL});
  int n = mb_node(b, "ReduceSum", "rsum", (const char *[]){"b", NULL},
                  (const char *[]){"ReduceSum", NULL});
  mb_attr_int(b, n, "keepdims", 0);
  mb_node(b, "CumSum", "csum", (const char *[]){"b", "axis", NULL},
          (const char *[]){"CumSum", NULL});
  const char *outs[] = {"Add", "Sub", "Mul", "Div", "Neg", "Abs", "ReduceSum", "CumSum"};
  for (int k = 0; k < ARRAY_LEN(outs); k++) mb_output(b, outs[k]);
  return load_mb(b);
}

static void test_int64_arith_wraps(void **state) {
  pr_model_t *m = arith_model(PR_DTYPE_INT64);
  pr_session_t *s = session(m);
  int64_t a[N_BIN] = {INT64_MIN, INT64_MAX, 7, -7, INT64_MAX, INT64_MIN};
  int64_t b[N_BIN] = {-1, 1, 0, 2, INT64_MAX, 0};
  pr_tensor_t in[2] = {{.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {N_BIN}, .data = a},
                       {.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {N_BIN}, .data = b}},
              out[8];
  run(s, in, 2, out, 8);
  const int64_t want[6][N_BIN] = {
      {INT64_MAX, INT64_MIN, 7, -5, -2, INT64_MIN},          /* Add */
      {INT64_MIN + 1, INT64_MAX - 1, 7, -9, 0, INT64_MIN},   /* Sub */
      {INT64_MIN, INT64_MAX, 0, -14, 1, 0},                  /* Mul */
      {INT64_MIN, INT64_MAX, 0, -3, 1, 0},                   /* Div: x/0 = 0 */
      {INT64_MIN, -INT64_MAX, -7, 7, -INT64_MAX, INT64_MIN}, /* Neg */
      {INT64_MIN, INT64_MAX, 7, 7, INT64_MAX, INT64_MIN},    /* Abs */
  };
  for (int k = 0; k < 6; k++)
    for (int i = 0; i < N_BIN; i++)
      if (((const int64_t *)out[k].data)[i] != want[k][i])
        fail_msg("output %d [%d]: %lld, want %lld", k, i,
                 (long long)((const int64_t *)out[k].data)[i], (long long)want[k][i]);
  /* sums of b: -1, 0, 0, 2, INT64_MAX + 2 (wraps), + 0 */
  assert_int_equal(out[6].rank, 0);
  assert_true(*(const int64_t *)out[6].data == INT64_MIN + 1);
  const int64_t csum[N_BIN] = {-1, 0, 0, 2, INT64_MIN + 1, INT64_MIN + 1};
  for (int i = 0; i < N_BIN; i++) assert_true(((const int64_t *)out[7].data)[i] == csum[i]);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

static void test_int32_arith_wraps(void **state) {
  pr_model_t *m = arith_model(PR_DTYPE_INT32);
  pr_session_t *s = session(m);
  int32_t a[N_BIN] = {INT32_MIN, INT32_MAX, 7, -7, INT32_MAX, INT32_MIN};
  int32_t b[N_BIN] = {-1, 1, 0, 2, INT32_MAX, 0};
  pr_tensor_t in[2] = {{.dtype = PR_DTYPE_INT32, .rank = 1, .dims = {N_BIN}, .data = a},
                       {.dtype = PR_DTYPE_INT32, .rank = 1, .dims = {N_BIN}, .data = b}},
              out[8];
  run(s, in, 2, out, 8);
  const int32_t want[6][N_BIN] = {
      {INT32_MAX, INT32_MIN, 7, -5, -2, INT32_MIN},
      {INT32_MIN + 1, INT32_MAX - 1, 7, -9, 0, INT32_MIN},
      {INT32_MIN, INT32_MAX, 0, -14, 1, 0},
      {INT32_MIN, INT32_MAX, 0, -3, 1, 0},
      {INT32_MIN, -INT32_MAX, -7, 7, -INT32_MAX, INT32_MIN},
      {INT32_MIN, INT32_MAX, 7, 7, INT32_MAX, INT32_MIN},
  };
  for (int k = 0; k < 6; k++)
    for (int i = 0; i < N_BIN; i++)
      if (((const int32_t *)out[k].data)[i] != want[k][i])
        fail_msg("output %d [%d]: %d, want %d", k, i, ((const int32_t *)out[k].data)[i],
                 want[k][i]);
  assert_int_equal(*(const int32_t *)out[6].data, INT32_MIN + 1);
  const int32_t csum[N_BIN] = {-1, 0, 0, 2, INT32_MIN + 1, INT32_MIN + 1};
  for (int i = 0; i < N_BIN; i++) assert_int_equal(((const int32_t *)out[7].data)[i], csum[i]);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);

  /* the narrow types: same rules */
  mb_t *mb = mb_new(13);
  int64_t d[1] = {3};
  mb_input(mb, "a", PR_DTYPE_INT8, 1, d);
  mb_input(mb, "b", PR_DTYPE_INT8, 1, d);
  mb_node(mb, "Div", "div", (const char *[]){"a", "b", NULL}, (const char *[]){"q", NULL});
  mb_node(mb, "Mul", "mul", (const char *[]){"a", "b", NULL}, (const char *[]){"p", NULL});
  mb_output(mb, "q");
  mb_output(mb, "p");
  m = load_mb(mb);
  s = session(m);
  int8_t a8[3] = {INT8_MIN, 100, -7}, b8[3] = {-1, 0, 2};
  pr_tensor_t in8[2] = {{.dtype = PR_DTYPE_INT8, .rank = 1, .dims = {3}, .data = a8},
                        {.dtype = PR_DTYPE_INT8, .rank = 1, .dims = {3}, .data = b8}};
  run(s, in8, 2, out, 2);
  const int8_t *q = out[0].data, *p = out[1].data;
  assert_int_equal(q[0], INT8_MIN), assert_int_equal(q[1], 0), assert_int_equal(q[2], -3);
  assert_int_equal(p[0], INT8_MIN), assert_int_equal(p[1], 0), assert_int_equal(p[2], -14);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* y = a + Div(k, z): the Div of constants folds while the model loads */
static void test_folded_division_loads(void **state) {
  mb_t *b = mb_new(13);
  int64_t d[1] = {3};
  int64_t k64[3] = {INT64_MIN, 5, -9}, z64[3] = {-1, 0, 4};
  int32_t k32[3] = {INT32_MIN, 5, -9}, z32[3] = {-1, 0, 4};
  mb_input(b, "a", PR_DTYPE_INT64, 1, d);
  mb_input(b, "a32", PR_DTYPE_INT32, 1, d);
  mb_init(b, "k", PR_DTYPE_INT64, 1, d, k64, sizeof k64);
  mb_init(b, "z", PR_DTYPE_INT64, 1, d, z64, sizeof z64);
  mb_init(b, "k32", PR_DTYPE_INT32, 1, d, k32, sizeof k32);
  mb_init(b, "z32", PR_DTYPE_INT32, 1, d, z32, sizeof z32);
  mb_node(b, "Div", "div", (const char *[]){"k", "z", NULL}, (const char *[]){"q", NULL});
  mb_node(b, "Add", "add", (const char *[]){"a", "q", NULL}, (const char *[]){"y", NULL});
  mb_node(b, "Div", "div32", (const char *[]){"k32", "z32", NULL}, (const char *[]){"q32", NULL});
  mb_node(b, "Add", "add32", (const char *[]){"a32", "q32", NULL}, (const char *[]){"y32", NULL});
  mb_output(b, "y");
  mb_output(b, "y32");
  pr_model_t *m = load_mb(b);
  pr_session_t *s = session(m);
  int64_t a[3] = {0, 1, 1};
  int32_t a32[3] = {0, 1, 1};
  pr_tensor_t in[2] = {{.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {3}, .data = a},
                       {.dtype = PR_DTYPE_INT32, .rank = 1, .dims = {3}, .data = a32}},
              out[2];
  run(s, in, 2, out, 2);
  const int64_t *y = out[0].data;
  const int32_t *y32 = out[1].data;
  assert_true(y[0] == INT64_MIN), assert_true(y[1] == 1), assert_true(y[2] == -1);
  assert_int_equal(y32[0], INT32_MIN), assert_int_equal(y32[1], 1), assert_int_equal(y32[2], -1);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

static uint64_t ref_pow(uint64_t base, int e) {
  uint64_t r = 1;
  while (e--) r *= base;
  return r;
}

/* Pow of integers is exact and wraps; with a float exponent it saturates */
static void test_int_pow_exact(void **state) {
  mb_t *b = mb_new(13);
  int64_t d[1] = {9}, d2[1] = {3};
  mb_input(b, "a", PR_DTYPE_INT64, 1, d);
  mb_input(b, "e", PR_DTYPE_INT64, 1, d);
  mb_input(b, "a32", PR_DTYPE_INT32, 1, d2);
  mb_input(b, "e32", PR_DTYPE_INT32, 1, d2);
  mb_input(b, "ef", PR_DTYPE_FLOAT, 1, d2);
  mb_node(b, "Pow", "pow", (const char *[]){"a", "e", NULL}, (const char *[]){"p", NULL});
  mb_node(b, "Pow", "pow32", (const char *[]){"a32", "e32", NULL}, (const char *[]){"p32", NULL});
  mb_node(b, "Pow", "powf", (const char *[]){"a32", "ef", NULL}, (const char *[]){"pf", NULL});
  mb_output(b, "p");
  mb_output(b, "p32");
  mb_output(b, "pf");
  pr_model_t *m = load_mb(b);
  pr_session_t *s = session(m);
  int64_t a[9] = {2, 3, 3, 2, 1, -1, 0, 7, -3}, e[9] = {64, 41, 39, -1, -5, -3, -1, 0, 3};
  int32_t a32[3] = {3, -2, 10}, e32[3] = {21, 31, 2};
  float ef[3] = {0.5f, 2.f, 20.f};
  pr_tensor_t in[5] = {{.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {9}, .data = a},
                       {.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {9}, .data = e},
                       {.dtype = PR_DTYPE_INT32, .rank = 1, .dims = {3}, .data = a32},
                       {.dtype = PR_DTYPE_INT32, .rank = 1, .dims = {3}, .data = e32},
                       {.dtype = PR_DTYPE_FLOAT, .rank = 1, .dims = {3}, .data = ef}},
              out[3];
  run(s, in, 5, out, 3);
  const int64_t *p = out[0].data;
  const int64_t want[9] = {0, (int64_t)ref_pow(3, 41), 4052555153018976267LL, 0, 1, -1, 0, 1, -27};
  for (int i = 0; i < 9; i++)
    if (p[i] != want[i]) fail_msg("[%d]: %lld, want %lld", i, (long long)p[i], (long long)want[i]);
  const int32_t *p32 = out[1].data, *pf = out[2].data;
  assert_int_equal(p32[0], (int32_t)(uint32_t)ref_pow(3, 21)); /* 3^21 > 2^31: wraps */
  assert_int_equal(p32[1], INT32_MIN);                         /* (-2)^31 */
  assert_int_equal(p32[2], 100);
  assert_int_equal(pf[0], 1), assert_int_equal(pf[1], 4);
  assert_int_equal(pf[2], INT32_MAX); /* 10^20 saturates */
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* float -> integer Cast as ONNX Runtime on x86 (the values it gives for
 * these inputs): truncation, the low bits, "integer indefinite" beyond */
static void test_cast_float_to_int_as_ort(void **state) {
  const int to[5] = {PR_DTYPE_INT32, PR_DTYPE_INT64, PR_DTYPE_UINT8, PR_DTYPE_INT8,
                     PR_DTYPE_UINT64};
  mb_t *b = mb_new(13);
  int64_t d[1] = {8};
  mb_input(b, "f", PR_DTYPE_FLOAT, 1, d);
  for (int k = 0; k < 5; k++) {
    char name[8] = {'y', (char)('0' + k), 0};
    int n = mb_node(b, "Cast", name, (const char *[]){"f", NULL}, (const char *[]){name, NULL});
    mb_attr_int(b, n, "to", to[k]);
    mb_output(b, name);
  }
  pr_model_t *m = load_mb(b);
  pr_session_t *s = session(m);
  float f[8] = {NAN, 1e10f, -1e10f, -1.f, 300.f, 1e19f, -INFINITY, 2.9f};
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 1, .dims = {8}, .data = f}, out[5];
  run(s, &in, 1, out, 5);
  const int32_t w32[8] = {INT32_MIN, INT32_MIN, INT32_MIN, -1, 300, INT32_MIN, INT32_MIN, 2};
  const int64_t w64[8] = {INT64_MIN, 10000000000LL, -10000000000LL, -1,
                          300,       INT64_MIN,     INT64_MIN,      2};
  const uint8_t wu8[8] = {0, 0, 0, 255, 44, 0, 0, 2};
  const int8_t w8[8] = {0, 0, 0, -1, 44, 0, 0, 2};
  const uint64_t wu64[8] = {1ULL << 63,
                            10000000000ULL,
                            18446744063709551616ULL,
                            UINT64_MAX,
                            300,
                            9999999980506447872ULL,
                            1ULL << 63,
                            2};
  for (int i = 0; i < 8; i++) {
    assert_int_equal(((const int32_t *)out[0].data)[i], w32[i]);
    assert_true(((const int64_t *)out[1].data)[i] == w64[i]);
    assert_int_equal(((const uint8_t *)out[2].data)[i], wu8[i]);
    assert_int_equal(((const int8_t *)out[3].data)[i], w8[i]);
    assert_true(((const uint64_t *)out[4].data)[i] == wu64[i]);
  }
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* Clip of int64 compares in int64 (through double, INT64_MAX became 2^63) */
static void test_clip_int64_exact(void **state) {
  mb_t *b = mb_new(13);
  int64_t d[1] = {3}, none[1] = {0}, lo = -10, hi = INT64_MAX - 1;
  mb_input(b, "x", PR_DTYPE_INT64, 1, d);
  mb_init(b, "lo", PR_DTYPE_INT64, 0, none, &lo, 8);
  mb_init(b, "hi", PR_DTYPE_INT64, 0, none, &hi, 8);
  mb_node(b, "Clip", "c2", (const char *[]){"x", "lo", "hi", NULL}, (const char *[]){"y", NULL});
  mb_node(b, "Clip", "c1", (const char *[]){"x", "lo", NULL}, (const char *[]){"z", NULL});
  mb_output(b, "y");
  mb_output(b, "z");
  pr_model_t *m = load_mb(b);
  pr_session_t *s = session(m);
  int64_t x[3] = {INT64_MAX, INT64_MIN, 5};
  pr_tensor_t in = {.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {3}, .data = x}, out[2];
  run(s, &in, 1, out, 2);
  const int64_t *y = out[0].data, *z = out[1].data;
  assert_true(y[0] == INT64_MAX - 1), assert_true(y[1] == -10), assert_true(y[2] == 5);
  assert_true(z[0] == INT64_MAX), assert_true(z[1] == -10), assert_true(z[2] == 5);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* Range of int64 near the ends counts exactly (in double the count was off
 * and the extra elements overflowed) */
static void test_range_int64_exact(void **state) {
  const int64_t cases[3][4] = {/* start, limit, delta, length */
                               {INT64_MAX - 1000, INT64_MAX, 1, 1000},
                               {INT64_MIN + 1000, INT64_MIN, -1, 1000},
                               {-5, INT64_MAX, INT64_MAX, 2}};
  for (int c = 0; c < 3; c++) {
    mb_t *b = mb_new(13);
    int64_t none[1] = {0};
    mb_init(b, "s", PR_DTYPE_INT64, 0, none, &cases[c][0], 8);
    mb_init(b, "l", PR_DTYPE_INT64, 0, none, &cases[c][1], 8);
    mb_init(b, "d", PR_DTYPE_INT64, 0, none, &cases[c][2], 8);
    int64_t one[1] = {1};
    mb_input(b, "x", PR_DTYPE_INT64, 1, one);
    mb_node(b, "Range", "range", (const char *[]){"s", "l", "d", NULL},
            (const char *[]){"r", NULL});
    mb_node(b, "Add", "add", (const char *[]){"r", "x", NULL}, (const char *[]){"y", NULL});
    mb_output(b, "y");
    pr_model_t *m = load_mb(b);
    pr_session_t *s = session(m);
    int64_t x = 0;
    pr_tensor_t in = {.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {1}, .data = &x}, out;
    run(s, &in, 1, &out, 1);
    assert_int_equal(out.rank, 1);
    assert_int_equal(out.dims[0], cases[c][3]);
    const int64_t *y = out.data;
    for (int64_t i = 0; i < cases[c][3]; i++)
      assert_true(y[i] == (int64_t)((uint64_t)cases[c][0] + (uint64_t)i * (uint64_t)cases[c][2]));
    pr_engine_session_destroy(s);
    pr_engine_model_destroy(m);
  }
}

/* Slice with steps of INT64_MAX and INT64_MIN takes one element */
static void test_slice_extreme_steps(void **state) {
  mb_t *b = mb_new(13);
  int64_t d[1] = {5}, one[1] = {1};
  const int64_t st[2] = {0, -1}, en[2] = {10, INT64_MIN}, step[2] = {INT64_MAX, INT64_MIN}, ax = 0;
  mb_input(b, "x", PR_DTYPE_INT64, 1, d);
  mb_init(b, "ax", PR_DTYPE_INT64, 1, one, &ax, 8);
  for (int k = 0; k < 2; k++) {
    char s[3] = {'s', (char)('0' + k), 0}, e[3] = {'e', (char)('0' + k), 0},
         t[3] = {'t', (char)('0' + k), 0}, y[3] = {'y', (char)('0' + k), 0};
    mb_init(b, s, PR_DTYPE_INT64, 1, one, &st[k], 8);
    mb_init(b, e, PR_DTYPE_INT64, 1, one, &en[k], 8);
    mb_init(b, t, PR_DTYPE_INT64, 1, one, &step[k], 8);
    mb_node(b, "Slice", y, (const char *[]){"x", s, e, "ax", t, NULL}, (const char *[]){y, NULL});
    mb_output(b, y);
  }
  pr_model_t *m = load_mb(b);
  pr_session_t *s = session(m);
  int64_t x[5] = {10, 11, 12, 13, 14};
  pr_tensor_t in = {.dtype = PR_DTYPE_INT64, .rank = 1, .dims = {5}, .data = x}, out[2];
  run(s, &in, 1, out, 2);
  assert_int_equal(out[0].dims[0], 1), assert_int_equal(*(const int64_t *)out[0].data, 10);
  assert_int_equal(out[1].dims[0], 1), assert_int_equal(*(const int64_t *)out[1].data, 14);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

/* Pad amounts whose sum with the dimension overflows are refused */
static void test_pad_overflow_refused(void **state) {
  mb_t *b = mb_new(13);
  int64_t d[1] = {5}, two[1] = {2};
  const int64_t pads[2] = {INT64_MAX, 1};
  mb_input(b, "x", PR_DTYPE_INT64, 1, d);
  mb_init(b, "pads", PR_DTYPE_INT64, 1, two, pads, sizeof pads);
  mb_node(b, "Pad", "pad", (const char *[]){"x", "pads", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  pr_model_t *m = load_mb(b);
  pr_session_options_t opt = pr_session_options_default();
  pr_session_t *s = NULL;
  char err[256] = "";
  assert_int_not_equal(pr_engine_session_create(m, &opt, &s, err, sizeof err), PR_OK);
  assert_non_null(strstr(err, "pad"));
  pr_engine_model_destroy(m);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int64_arith_wraps),        cmocka_unit_test(test_int32_arith_wraps),
      cmocka_unit_test(test_folded_division_loads),    cmocka_unit_test(test_int_pow_exact),
      cmocka_unit_test(test_cast_float_to_int_as_ort), cmocka_unit_test(test_clip_int64_exact),
      cmocka_unit_test(test_range_int64_exact),        cmocka_unit_test(test_slice_extreme_steps),
      cmocka_unit_test(test_pad_overflow_refused),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
