/* packrat's AVX2 matrix product (sgemm.c) against a double-precision
 * reference: shapes across every tail (rows not a multiple of the 6-row
 * strip or of the row block, columns not a multiple of the 16-column panel,
 * K across several slices), one and two threads (split by columns, and by
 * rows when the panels are fewer than the threads), the bias, the
 * accumulation into C, and every activation of the epilogue. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "base/util.h"
#include "engine/ops/sgemm.h"

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 32768.f - 1.f;
}

static double act_ref(dnnl_alg_kind_t alg, double x, double al, double be) {
  switch (alg) {
    case dnnl_eltwise_relu: return x > 0 ? x : al * x;
    case dnnl_eltwise_linear: return al * x + be;
    case dnnl_eltwise_logistic: return 1 / (1 + exp(-x));
    case dnnl_eltwise_tanh: return tanh(x);
    case dnnl_eltwise_gelu_erf: return 0.5 * x * (1 + erf(x / sqrt(2)));
    case dnnl_eltwise_gelu_tanh:
      return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case dnnl_eltwise_swish: return x / (1 + exp(-al * x));
    default: return NAN;
  }
}

/* One product checked: C = A B (+ C0) (+ bias), then the activations;
 * the tolerance scales with sqrt(K) (float sums of K products of ~1). */
static void check(int64_t M, int64_t N, int64_t K, bool bias, bool acc, int threads,
                  const pr_sgemm_epi_t *acts) {
  unsigned seed = (unsigned)(M * 7919 + N * 131 + K);
  float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
  float *c = malloc(sizeof(float) * (size_t)(M * N)), *bv = malloc(sizeof(float) * (size_t)N);
  double *ref = malloc(sizeof(double) * (size_t)(M * N));
  float *pb = pr__aligned_calloc(pr__sgemm_packed_size(K, N));
  assert_non_null(a), assert_non_null(b), assert_non_null(c), assert_non_null(pb);
  for (int64_t i = 0; i < M * K; i++) a[i] = frand(&seed);
  for (int64_t i = 0; i < K * N; i++) b[i] = frand(&seed);
  for (int64_t i = 0; i < N; i++) bv[i] = frand(&seed);
  for (int64_t i = 0; i < M * N; i++)
    c[i] = acc ? frand(&seed) : NAN; /* NAN: must be overwritten */
  pr_sgemm_epi_t e = acts ? *acts : (pr_sgemm_epi_t){0};
  e.bias = bias ? bv : NULL;
  e.accumulate = acc;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = (acc ? c[i * N + j] : 0) + (bias ? bv[j] : 0);
      for (int64_t k = 0; k < K; k++) s += (double)a[i * K + k] * b[k * N + j];
      for (int q = 0; q < e.n_act; q++) s = act_ref(e.alg[q], s, e.alpha[q], e.beta[q]);
      ref[i * N + j] = s;
    }
  pr__sgemm_pack_b(b, K, N, pb);
  pr__sgemm_packed(M, N, K, a, K, pb, c, N, &e, threads);
  double tol = 1e-5 * sqrt((double)K) + 2e-6;
  for (int64_t i = 0; i < M * N; i++)
    if (!(fabs(c[i] - ref[i]) <= tol * (1 + fabs(ref[i]))))
      fail_msg("M %lld N %lld K %lld threads %d: C[%lld] = %g, expected %g", (long long)M,
               (long long)N, (long long)K, threads, (long long)i, c[i], ref[i]);
  free(a), free(b), free(c), free(bv), free(ref), pr__free(pb);
}

static void test_shapes(void **state) {
  (void)state;
  static const int64_t ms[] = {1, 2, 5, 6, 7, 13, PR_SGEMM_MC - 1, PR_SGEMM_MC + 7};
  static const int64_t ns[] = {1, 8, 16, 17, 40, 100};
  static const int64_t ks[] = {1, 3, PR_SGEMM_KC, PR_SGEMM_KC + 1, 2 * PR_SGEMM_KC + 37};
  for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
    for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
      for (size_t k = 0; k < sizeof ks / sizeof *ks; k++)
        for (int t = 1; t <= 2; t++) check(ms[i], ns[j], ks[k], (i + j) % 2, false, t, NULL);
}

static void test_bias_and_accumulate(void **state) {
  (void)state;
  for (int t = 1; t <= 2; t++) {
    check(37, 50, 300, true, true, t, NULL);
    check(37, 50, 300, false, true, t, NULL);
    check(12, 16, 600, true, false, t, NULL);
  }
}

static void test_activations(void **state) {
  (void)state;
  static const dnnl_alg_kind_t algs[] = {
      dnnl_eltwise_relu,     dnnl_eltwise_linear,    dnnl_eltwise_logistic, dnnl_eltwise_tanh,
      dnnl_eltwise_gelu_erf, dnnl_eltwise_gelu_tanh, dnnl_eltwise_swish};
  for (size_t i = 0; i < sizeof algs / sizeof *algs; i++) {
    assert_true(pr__sgemm_act_supported(algs[i]));
    pr_sgemm_epi_t e = {.n_act = 1, .alg = {algs[i]}, .alpha = {0.3f}, .beta = {-0.25f}};
    check(19, 33, PR_SGEMM_KC + 5, true, false, 1, &e);
    check(19, 33, 40, true, true, 2, &e);
  }
  /* a chain: the residual sum first, then linear and ReLU in order */
  pr_sgemm_epi_t chain = {.n_act = 2,
                          .alg = {dnnl_eltwise_linear, dnnl_eltwise_relu},
                          .alpha = {2.f, 0.f},
                          .beta = {0.5f, 0.f}};
  check(8, 24, 70, true, true, 2, &chain);
  assert_false(pr__sgemm_act_supported(dnnl_eltwise_hardswish));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_bias_and_accumulate),
      cmocka_unit_test(test_activations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
