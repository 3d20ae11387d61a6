/* The plan policy: the batches planned and profiled, the prepared-plan
 * limit, the shape buckets, and the plans on a share of the cores (one
 * per batch and bucket, moved to the share, the active one at profile_at's
 * max batch; a fixed plan as written). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "packrat/policy.h"

/* latency = batch * (1 + 1 / threads) ms, threads 1..4, batches 1..16 */
static pr_profile_t grid(void) {
  static pr_profile_point_t pts[4 * 16];
  int n = 0;
  for (int t = 1; t <= 4; t++)
    for (int b = 1; b <= 16; b++)
      pts[n++] = (pr_profile_point_t){.threads = t, .batch = b, .latency_ms = b * (1 + 1.0 / t)};
  return (pr_profile_t){.cores = 4, .n_points = n, .points = pts};
}

static void test_batches(void **state) {
  (void)state;
  pr_policy_t p = {.follow_load = true, .max_batch = 12, .max_plans = 16};
  assert_int_equal(pr_policy_lowest_batch(&p), 1);
  assert_int_equal(pr_policy_n_batches(&p), 5); /* 1 2 4 8 12 */
  p.min_batch = 3;
  assert_int_equal(pr_policy_n_batches(&p), 3); /* 3 6 12 */
  p.min_batch = 99;                             /* clamped to the max */
  assert_int_equal(pr_policy_lowest_batch(&p), 12);
  assert_int_equal(pr_policy_n_batches(&p), 1);
  p.follow_load = false;
  p.min_batch = 3;
  assert_int_equal(pr_policy_lowest_batch(&p), 12);
  assert_int_equal(pr_policy_n_batches(&p), 1);
}

static void test_profile_batches(void **state) {
  (void)state;
  pr_policy_t p = {.follow_load = true, .min_batch = 3, .max_batch = 12, .max_plans = 16};
  int b[64];
  int n = pr_policy_profile_batches(&p, b, 64);
  int want[] = {1, 2, 3, 4, 6, 8, 12}; /* powers of two to the max, and 3 6 12 */
  assert_int_equal(n, 7);
  for (int i = 0; i < n; i++) assert_int_equal(b[i], want[i]);
  assert_int_equal(pr_policy_profile_batches(&p, b, 3), 3); /* the cap holds */
  p.max_batch = 1 << 20;
  p.min_batch = 3;
  n = pr_policy_profile_batches(&p, b, 64);
  assert_true(n <= 64 && b[n - 1] == 1 << 20);
  for (int i = 1; i < n; i++) assert_true(b[i] > b[i - 1]);
}

static void test_limit(void **state) {
  (void)state;
  char err[256] = "";
  pr_policy_t p = {.follow_load = true, .max_batch = 16, .max_plans = 6}; /* 1..16: 5 + 1 */
  assert_int_equal(pr_policy_check(&p, err, sizeof err), PR_OK);
  p.max_plans = 5;
  assert_int_equal(pr_policy_check(&p, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "--max-prepared-plans"));
  assert_non_null(strstr(err, "min_batch_size"));
  p.fixed_plan = "1x16"; /* a fixed plan needs one slot */
  assert_int_equal(pr_policy_check(&p, err, sizeof err), PR_OK);
}

static void test_buckets(void **state) {
  (void)state;
  long long sizes[PR_BUCKETS_MAX];
  pr_bucket_dim_t d = {.min = 16, .max = 128, .profile_at = 128};
  /* batches 1 2 4: room for (13 - 1) / 3 = 4 buckets, 16..128 gives 3 */
  pr_policy_t p = {.follow_load = true, .max_batch = 4, .max_plans = 13, .dynamic_dim = &d};
  assert_int_equal(pr_policy_buckets(&p, sizes), 3);
  assert_true(sizes[0] == 32 && sizes[1] == 64 && sizes[2] == 128);
  p.max_plans = 7; /* room for 2 */
  assert_int_equal(pr_policy_buckets(&p, sizes), 2);
  p.max_plans = 6; /* room for 1: no buckets */
  assert_int_equal(pr_policy_buckets(&p, sizes), 0);
  p.max_plans = 13;
  p.follow_load = false; /* the max batch's plan only: no buckets */
  assert_int_equal(pr_policy_buckets(&p, sizes), 0);
  p.follow_load = true;
  p.fixed_plan = "1x4";
  assert_int_equal(pr_policy_buckets(&p, sizes), 0);
  p.fixed_plan = NULL;
  p.dynamic_dim = NULL;
  assert_int_equal(pr_policy_buckets(&p, sizes), 0);
}

static void test_plans(void **state) {
  (void)state;
  pr_profile_t prof = grid();
  const pr_profile_t *one[] = {&prof};
  pr_plan_t *plans = calloc(8, sizeof *plans);
  int buckets[8], active = -1;
  char err[256] = "";
  pr_policy_t p = {.follow_load = true, .max_batch = 6, .max_plans = 8};
  int n = pr_policy_plans(&p, one, 1, 0, 2, 2, plans, buckets, 8, &active, err, sizeof err);
  assert_int_equal(n, 4); /* 1 2 4 6 */
  int want[] = {1, 2, 4, 6};
  for (int i = 0; i < n; i++) {
    assert_int_equal(plans[i].batch, want[i]);
    assert_int_equal(buckets[i], -1);
    pr_plan_t alone;
    assert_int_equal(pr_plan_optimize(&prof, want[i], 2, &alone), PR_OK);
    assert_true(plans[i].latency_ms == alone.latency_ms);
    for (int j = 0; j < plans[i].n_instances; j++) /* moved to the share */
      assert_true(plans[i].instances[j].first_core >= 2 && plans[i].instances[j].first_core < 4);
  }
  assert_int_equal(active, 3);
  /* over the cap: an error, not a write past it */
  assert_int_equal(
      pr_policy_plans(&p, one, 1, 0, 0, 2, plans, buckets, 3, &active, err, sizeof err), -1);
  assert_non_null(strstr(err, "more than 3"));
  /* a batch the profile cannot make */
  p.max_batch = 1 << 10;
  p.follow_load = false;
  assert_int_equal(
      pr_policy_plans(&p, one, 1, 0, 0, 1, plans, buckets, 8, &active, err, sizeof err), -1);
  assert_non_null(strstr(err, "no plan for batch 1024"));
  free(plans);
}

static void test_bucket_plans(void **state) {
  (void)state;
  pr_profile_t a = grid(), b = grid();
  const pr_profile_t *two[] = {&a, &b};
  pr_plan_t *plans = calloc(8, sizeof *plans);
  int buckets[8], active = -1;
  char err[256] = "";
  pr_policy_t p = {.follow_load = true, .max_batch = 4, .max_plans = 8};
  int n = pr_policy_plans(&p, two, 2, 0, 0, 4, plans, buckets, 8, &active, err, sizeof err);
  assert_int_equal(n, 6); /* 1 2 4 per bucket */
  for (int i = 0; i < n; i++) assert_int_equal(buckets[i], i / 3);
  assert_int_equal(active, 2); /* bucket 0's max batch */
  n = pr_policy_plans(&p, two, 2, 1, 0, 4, plans, buckets, 8, &active, err, sizeof err);
  assert_int_equal(active, 5);
  free(plans);
}

static void test_fixed(void **state) {
  (void)state;
  pr_plan_t *plans = calloc(2, sizeof *plans);
  int buckets[2], active = -1;
  char err[256] = "";
  pr_policy_t p = {.fixed_plan = "2x3,1x1", .follow_load = true, .max_batch = 4, .max_plans = 8};
  assert_int_equal(
      pr_policy_plans(&p, NULL, 0, 0, 0, 4, plans, buckets, 2, &active, err, sizeof err), 1);
  assert_int_equal(plans[0].batch, 4);
  assert_int_equal(plans[0].n_instances, 2);
  assert_int_equal(buckets[0], -1);
  assert_int_equal(active, 0);
  p.fixed_plan = "2xq";
  assert_int_equal(
      pr_policy_plans(&p, NULL, 0, 0, 0, 4, plans, buckets, 2, &active, err, sizeof err), -1);
  assert_true(err[0] != 0);
  free(plans);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches), cmocka_unit_test(test_profile_batches),
      cmocka_unit_test(test_limit),   cmocka_unit_test(test_buckets),
      cmocka_unit_test(test_plans),   cmocka_unit_test(test_bucket_plans),
      cmocka_unit_test(test_fixed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
