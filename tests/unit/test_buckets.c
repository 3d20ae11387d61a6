/* Shape buckets: the representative sizes of ranges and lists (the max and
 * profile_at always among them, the cap kept), the bucket of a size, and
 * the controller (quantile, up at once, down after windows in a row,
 * empty windows ignored). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "packrat/buckets.h"

static int choose(long long min, long long max, long long at, int cap, long long *out) {
  pr_bucket_dim_t d = {.min = min, .max = max, .profile_at = at};
  return pr_buckets_choose(&d, cap, out);
}

static void test_range_geometric(void **state) {
  (void)state;
  long long r[PR_BUCKETS_MAX];
  /* 8..256: log2(32) = 5, capped at 4 buckets, ratio 32^(1/4) = 2.38 */
  assert_int_equal(choose(8, 256, 256, 4, r), 4);
  assert_true(r[0] == 20 && r[1] == 46 && r[2] == 108 && r[3] == 256);
  /* 16..128: 3 buckets of ratio 2 */
  assert_int_equal(choose(16, 128, 0, 4, r), 3);
  assert_true(r[0] == 32 && r[1] == 64 && r[2] == 128);
  /* a range under 4x: one bucket, the max */
  assert_int_equal(choose(100, 300, 300, 4, r), 1);
  assert_true(r[0] == 300);
  assert_int_equal(choose(64, 64, 64, 4, r), 1);
  assert_true(r[0] == 64);
}

static void test_profile_at_kept(void **state) {
  (void)state;
  long long r[PR_BUCKETS_MAX];
  /* 16..128 at 48: 32, 48, 64, 128 (four fit) */
  assert_int_equal(choose(16, 128, 48, 4, r), 4);
  assert_true(r[0] == 32 && r[1] == 48 && r[2] == 64 && r[3] == 128);
  /* 8..256 at 100: one too many; 108, the nearest to 100, gives way */
  assert_int_equal(choose(8, 256, 100, 4, r), 4);
  assert_true(r[0] == 20 && r[1] == 46 && r[2] == 100 && r[3] == 256);
  /* a cap of 2 keeps the max and profile_at */
  assert_int_equal(choose(8, 256, 30, 2, r), 2);
  assert_true(r[0] == 30 && r[1] == 256);
  /* a cap of 1: profile_at alone, as without buckets; out of range: max */
  assert_int_equal(choose(8, 256, 30, 1, r), 1);
  assert_true(r[0] == 30);
  assert_int_equal(choose(8, 256, 999, 1, r), 1);
  assert_true(r[0] == 256);
  /* caps clamp to 1..PR_BUCKETS_MAX */
  assert_int_equal(choose(1, 1 << 20, 0, 99, r), PR_BUCKETS_MAX);
  assert_int_equal(choose(1, 1 << 20, 0, 0, r), 1);
}

static void test_list(void **state) {
  (void)state;
  long long r[PR_BUCKETS_MAX];
  long long few[] = {320, 640, 960};
  pr_bucket_dim_t d = {.min = 320, .max = 960, .profile_at = 960, .list = few, .n_list = 3};
  assert_int_equal(pr_buckets_choose(&d, 4, r), 3);
  assert_true(r[0] == 320 && r[1] == 640 && r[2] == 960);
  /* more sizes than the cap: the range's split snapped up to listed sizes */
  long long many[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
  pr_bucket_dim_t m = {.min = 8, .max = 256, .profile_at = 256, .list = many, .n_list = 11};
  assert_int_equal(pr_buckets_choose(&m, 4, r), 4);
  assert_true(r[0] == 24 && r[1] == 48 && r[2] == 128 && r[3] == 256);
  /* two splits that snap to one size count once */
  long long gap[] = {8, 250, 256};
  pr_bucket_dim_t g = {.min = 8, .max = 256, .profile_at = 256, .list = gap, .n_list = 3};
  assert_int_equal(pr_buckets_choose(&g, 2, r), 2);
  assert_true(r[0] == 250 && r[1] == 256);
}

static void test_bucket_of(void **state) {
  (void)state;
  long long s[] = {32, 64, 128};
  assert_int_equal(pr_bucket_of(s, 3, 1), 0);
  assert_int_equal(pr_bucket_of(s, 3, 32), 0);
  assert_int_equal(pr_bucket_of(s, 3, 33), 1);
  assert_int_equal(pr_bucket_of(s, 3, 128), 2);
  assert_int_equal(pr_bucket_of(s, 3, 500), 2);
}

static void test_ctl_quantile(void **state) {
  (void)state;
  pr_bucket_ctl_t c;
  pr_bucket_ctl_init(&c, 3, 2);
  uint64_t mostly_short[] = {91, 5, 4}, tail[] = {85, 10, 5}, none[] = {0, 0, 0};
  assert_int_equal(pr_bucket_wanted(&c, mostly_short), 0); /* 91% <= bucket 0 */
  assert_int_equal(pr_bucket_wanted(&c, tail), 1);         /* 85% is short of 90% */
  assert_int_equal(pr_bucket_wanted(&c, none), -1);
  uint64_t one_long[] = {0, 0, 1};
  assert_int_equal(pr_bucket_wanted(&c, one_long), 2);
}

static void test_ctl_up_at_once_down_slowly(void **state) {
  (void)state;
  pr_bucket_ctl_t c;
  pr_bucket_ctl_init(&c, 3, 2);
  uint64_t shrt[] = {50, 0, 0}, mid[] = {10, 40, 0}, lng[] = {0, 0, 30}, none[] = {0, 0, 0};
  /* down: only in the third window in a row, to the largest wanted */
  assert_int_equal(pr_bucket_ctl_update(&c, shrt), 2);
  assert_int_equal(pr_bucket_ctl_update(&c, mid), 2);
  assert_int_equal(pr_bucket_ctl_update(&c, none), 2); /* an empty window counts for nothing */
  assert_int_equal(pr_bucket_ctl_update(&c, shrt), 1);
  /* a window at the current bucket breaks the run of lower ones */
  pr_bucket_ctl_init(&c, 3, 2);
  pr_bucket_ctl_update(&c, shrt);
  pr_bucket_ctl_update(&c, shrt);
  assert_int_equal(pr_bucket_ctl_update(&c, lng), 2);
  assert_int_equal(pr_bucket_ctl_update(&c, shrt), 2);
  assert_int_equal(pr_bucket_ctl_update(&c, shrt), 2);
  assert_int_equal(pr_bucket_ctl_update(&c, shrt), 0);
  /* up: at once */
  assert_int_equal(pr_bucket_ctl_update(&c, lng), 2);
  pr_bucket_ctl_init(&c, 3, 0);
  assert_int_equal(pr_bucket_ctl_update(&c, mid), 1);
}

static void test_ctl_init_clamps(void **state) {
  (void)state;
  pr_bucket_ctl_t c;
  pr_bucket_ctl_init(&c, 9, 7);
  assert_int_equal(c.n, PR_BUCKETS_MAX);
  assert_int_equal(c.current, PR_BUCKETS_MAX - 1);
  pr_bucket_ctl_init(&c, 0, -3);
  assert_int_equal(c.n, 1);
  assert_int_equal(c.current, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_range_geometric),
      cmocka_unit_test(test_profile_at_kept),
      cmocka_unit_test(test_list),
      cmocka_unit_test(test_bucket_of),
      cmocka_unit_test(test_ctl_quantile),
      cmocka_unit_test(test_ctl_up_at_once_down_slowly),
      cmocka_unit_test(test_ctl_init_clamps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
