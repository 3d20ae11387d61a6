/* The optimizer against brute-force enumeration and the paper's DP. */
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

#include "packrat/planner.h"

typedef struct {
  double lat;
  int threads, instances;
} best_t;

/* every multiset of points (index >= from) with batches summing to B, threads <= T */
static void brute(const pr_profile_t *p, int from, int B, int T, double cur, int threads, int inst,
                  best_t *best) {
  if (B == 0) {
    bool better = cur < best->lat ||
                  (cur == best->lat && (threads < best->threads ||
                                        (threads == best->threads && inst < best->instances)));
    if (better) *best = (best_t){cur, threads, inst};
    return;
  }
  for (int i = from; i < p->n_points; i++) {
    const pr_profile_point_t *q = &p->points[i];
    if (q->batch > B || q->threads > T) continue;
    brute(p, i, B - q->batch, T - q->threads, fmax(cur, q->latency_ms), threads + q->threads,
          inst + 1, best);
  }
}

static unsigned rng = 12345;
static double urand(void) {
  rng = rng * 1103515245u + 12345u;
  return (double)((rng >> 8) & 0xffff) / 65536.0;
}

static void random_profile(pr_profile_t *p, int T, int maxb, bool monotone, double missing) {
  p->points = calloc((size_t)(T * maxb + 1), sizeof *p->points);
  p->n_points = 0;
  p->cores = T;
  for (int t = 1; t <= T; t++)
    for (int b = 1; b <= maxb; b++) {
      if (urand() < missing) continue;
      double lat = monotone ? (10.0 * b) / pow(t, 0.7) * (1 + 0.05 * urand()) : 1 + 100 * urand();
      lat = round(lat * 8) / 8; /* coarse values make ties common */
      p->points[p->n_points++] = (pr_profile_point_t){
          .threads = t, .batch = b, .latency_ms = lat, .p90_ms = lat, .isolated_ms = lat};
    }
}

static void check_case(const pr_profile_t *p, int B, int T) {
  best_t best = {INFINITY, 0, 0};
  brute(p, 0, B, T, 0, 0, 0, &best);
  pr_plan_t *plan = malloc(sizeof *plan);
  pr_status_t st = pr_plan_optimize(p, B, T, plan);
  double dp = pr_plan_paper_dp(p, B, T);
  if (isinf(best.lat)) {
    assert_int_equal(st, PR_ERR_NOT_FOUND);
    assert_true(dp < 0);
  } else {
    assert_int_equal(st, PR_OK);
    assert_true(fabs(plan->latency_ms - best.lat) < 1e-12);
    assert_true(fabs(dp - best.lat) < 1e-12);
    int threads = 0, batch = 0;
    double mx = 0;
    for (int i = 0; i < plan->n_instances; i++) {
      const pr_plan_instance_t *in = &plan->instances[i];
      assert_true(pr_profile_latency(p, in->threads, in->batch) == in->latency_ms);
      assert_int_equal(in->first_core, threads);
      threads += in->threads;
      batch += in->batch;
      mx = fmax(mx, in->latency_ms);
    }
    assert_int_equal(batch, B);
    assert_true(threads <= T);
    assert_true(mx == plan->latency_ms);
    assert_int_equal(threads, best.threads);
    assert_int_equal(plan->n_instances, best.instances);
  }
  free(plan);
}

static void test_random_monotone(void **s) {
  for (int iter = 0; iter < 150; iter++) {
    pr_profile_t p = {0};
    int T = 1 + (int)(urand() * 6), maxb = 1 + (int)(urand() * 8);
    random_profile(&p, T, maxb, true, 0.0);
    for (int B = 1; B <= 12; B++) check_case(&p, B, T);
    pr_profile_free(&p);
  }
}

static void test_random_non_monotone_with_holes(void **s) {
  for (int iter = 0; iter < 150; iter++) {
    pr_profile_t p = {0};
    int T = 1 + (int)(urand() * 6), maxb = 1 + (int)(urand() * 8);
    random_profile(&p, T, maxb, false, 0.3);
    for (int B = 1; B <= 12; B++) check_case(&p, B, T);
    pr_profile_free(&p);
  }
}

static void test_batch_smaller_than_cores(void **s) {
  pr_profile_t p = {0};
  random_profile(&p, 6, 4, true, 0);
  check_case(&p, 1, 6);
  check_case(&p, 2, 6);
  pr_profile_free(&p);
}

static void test_one_core(void **s) {
  pr_profile_t p = {0};
  random_profile(&p, 1, 8, true, 0);
  for (int B = 1; B <= 12; B++) check_case(&p, B, 1);
  pr_plan_t *plan = malloc(sizeof *plan);
  assert_int_equal(pr_plan_optimize(&p, 8, 1, plan), PR_OK);
  assert_int_equal(plan->n_instances, 1);
  assert_int_equal(plan->instances[0].threads, 1);
  free(plan);
  pr_profile_free(&p);
}

static void test_infeasible_and_invalid(void **s) {
  pr_profile_point_t pts[] = {
      {.threads = 1, .batch = 2, .latency_ms = 5, .p90_ms = 5, .isolated_ms = 5},
      {.threads = 2, .batch = 4, .latency_ms = 6, .p90_ms = 6, .isolated_ms = 6}};
  pr_profile_t p = {.n_points = 2, .points = pts, .cores = 2};
  pr_plan_t *plan = malloc(sizeof *plan);
  assert_int_equal(pr_plan_optimize(&p, 3, 2, plan), PR_ERR_NOT_FOUND); /* only even batches */
  assert_int_equal(pr_plan_optimize(&p, 4, 2, plan), PR_OK);
  assert_int_equal(pr_plan_optimize(&p, 0, 2, plan), PR_ERR_INVALID);
  assert_int_equal(pr_plan_optimize(&p, 4, 0, plan), PR_ERR_INVALID);
  free(plan);
}

static void test_parse(void **s) {
  pr_plan_t *plan = malloc(sizeof *plan);
  char err[128];
  assert_int_equal(pr_plan_parse("2x4,1x2", NULL, plan, err, sizeof err), PR_OK);
  assert_int_equal(plan->n_instances, 2);
  assert_int_equal(plan->batch, 6);
  assert_int_equal(plan->cores, 3);
  assert_int_equal(plan->instances[1].first_core, 2);
  assert_int_equal(pr_plan_parse("2x", NULL, plan, err, sizeof err), PR_ERR_INVALID);
  assert_int_equal(pr_plan_parse("", NULL, plan, err, sizeof err), PR_ERR_INVALID);
  assert_int_equal(pr_plan_parse("0x4", NULL, plan, err, sizeof err), PR_ERR_INVALID);
  assert_int_equal(pr_plan_parse("1x4;", NULL, plan, err, sizeof err), PR_ERR_INVALID);
  free(plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_monotone),
      cmocka_unit_test(test_random_non_monotone_with_holes),
      cmocka_unit_test(test_batch_smaller_than_cores),
      cmocka_unit_test(test_one_core),
      cmocka_unit_test(test_infeasible_and_invalid),
      cmocka_unit_test(test_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
