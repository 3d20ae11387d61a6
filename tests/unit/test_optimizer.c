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

/* pr_plan_next_chunk: ResNet-50's two-thread times (batch 1, 2, 4, 8: 25,
 * 47, 91, 175 ms) make 5 rows a run of 4 then 1 (116 ms, not 175 padded),
 * 3 rows 2 + 1, 6 rows 4 + 2; 7 rows stay one run of 8 (4 + 2 + 1 = 163 ms
 * is within PR_CHUNK_GAIN of 175), as do 8 (two 4s: 182 ms) and every size
 * held exactly. A model that batches for free (a run of 8 as fast as one
 * of 1) pads. Rows over the largest size go in its runs, the cheapest
 * cover; unknown times or bad sizes give one run. */
static void test_next_chunk(void **state) {
  (void)state;
  const int sizes[] = {1, 2, 4, 8};
  const double resnet[] = {25, 47, 91, 175}, flat[] = {10, 10.2, 10.5, 11};
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 5), 4);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 1), 1);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 3), 2);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 6), 4);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 7), 7);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 8), 8);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 4), 4);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 20), 8);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 13), 8); /* 8 + 4 + 1 */
  for (int r = 1; r <= 8; r++) assert_int_equal(pr_plan_next_chunk(sizes, flat, 4, r), r);
  assert_int_equal(pr_plan_next_chunk(sizes, flat, 4, 19), 8); /* 8 + 8 + 4 (padded) */
  /* every run of the cheapest cover, followed down: the rows add up */
  for (int r = 1; r <= 40; r++) {
    int left = r, runs = 0;
    while (left > 0) {
      int c = pr_plan_next_chunk(sizes, resnet, 4, left);
      assert_true(c >= 1 && c <= left && c <= 8);
      left -= c, runs++;
    }
    assert_true(runs <= r);
  }
  const double unknown[] = {25, 0, 91, 175};
  assert_int_equal(pr_plan_next_chunk(sizes, unknown, 4, 5), 5);
  const int unsorted[] = {1, 4, 2, 8};
  assert_int_equal(pr_plan_next_chunk(unsorted, resnet, 4, 5), 5);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 1, 5), 1);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, PR_CHUNK_MAX_ROWS + 1), 8);
  assert_int_equal(pr_plan_next_chunk(sizes, resnet, 4, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_monotone),
      cmocka_unit_test(test_random_non_monotone_with_holes),
      cmocka_unit_test(test_batch_smaller_than_cores),
      cmocka_unit_test(test_one_core),
      cmocka_unit_test(test_infeasible_and_invalid),
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_next_chunk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
