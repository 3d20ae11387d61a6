/* The per-second history behind the dashboard: latency buckets and
 * percentiles, the series (gaps, queue depth carried over, the ring reused
 * after PR_HISTORY_SECONDS), the bounded switch timeline and its text. The
 * clock is passed in, so nothing here depends on time passing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "sched/history.h"

static pr_history_t *h;

static int setup(void **state) {
  h = pr__history_create(1000.25);
  return h ? 0 : -1;
}

static int teardown(void **state) {
  pr__history_destroy(h);
  pr__history_destroy(NULL); /* a no-op */
  return 0;
}

static void assert_near(double got, double want, double rel) {
  if (fabs(got - want) > rel * want) fail_msg("%g is not within %g of %g", got, rel, want);
}

static void test_buckets(void **state) {
  assert_int_equal(pr__history_bucket(0), 0);
  assert_int_equal(pr__history_bucket(-1), 0);
  assert_int_equal(pr__history_bucket(NAN), 0);
  assert_int_equal(pr__history_bucket(5e-6), 0);
  assert_int_equal(pr__history_bucket(1e6), PR_HISTORY_BUCKETS - 1);
  int prev = 0;
  /* monotonic, and each bucket's value within 9% of what fell in it */
  for (double s = 1.2e-5; s < 30; s *= 1.07) {
    int b = pr__history_bucket(s);
    assert_true(b >= prev);
    assert_true(b < PR_HISTORY_BUCKETS - 1);
    assert_near(pr__history_bucket_ms(b), s * 1e3, 0.095);
    prev = b;
  }
}

static void test_series_and_percentiles(void **state) {
  /* second 1001: 100 requests, 98 of 1 ms and 2 of 100 ms; second 1003: 1 */
  for (int i = 0; i < 100; i++) {
    pr__history_arrival(h, 1001.0 + i * 0.005, 1);
    pr__history_done(h, 1001.5 + i * 0.004, i < 98 ? 0.001 : 0.1, i != 0);
  }
  pr__history_rejected(h, 1001.9);
  pr__history_arrival(h, 1003.1, 1);
  pr__history_done(h, 1003.2, 0.002, true);
  pr_history_point_t p[PR_HISTORY_SECONDS];
  /* asked for 10 seconds, but the history began at 1000 */
  int n = pr__history_series(h, 1004.7, 10, p);
  assert_int_equal(n, 5);
  assert_int_equal(p[0].second, 1000);
  assert_int_equal(p[4].second, 1004);
  assert_true(p[0].arrivals == 0 && p[0].p50_ms < 0 && p[0].p99_ms < 0);
  assert_true(p[1].arrivals == 100 && p[1].completed == 100);
  assert_true(p[1].failed == 1 && p[1].rejected == 1);
  assert_near(p[1].p50_ms, 1.0, 0.09);
  assert_near(p[1].p99_ms, 100.0, 0.09);
  assert_true(p[2].completed == 0 && p[2].p50_ms < 0);
  assert_true(p[3].arrivals == 1);
  assert_near(p[3].p50_ms, 2.0, 0.09);
  assert_near(pr__history_percentile(h, 1004.7, 60, 0.5), 1.0, 0.09);
  assert_near(pr__history_percentile(h, 1004.7, 60, 0.99), 100.0, 0.09);
  assert_true(pr__history_percentile(h, 1004.7, 1, 0.5) < 0); /* nothing in second 1004 */
  assert_near(pr__history_percentile(h, 1003.7, 1, 0.5), 2.0, 0.09);
  assert_int_equal(pr__history_series(h, 1004.7, 0, p), 0);
}

static void test_queue_carried_over(void **state) {
  pr__history_arrival(h, 1010.1, 3);
  pr__history_arrival(h, 1010.2, 5);
  pr__history_queue(h, 1010.3, 4);
  pr__history_queue(h, 1013.5, 0);
  pr_history_point_t p[6];
  int n = pr__history_series(h, 1014.0, 6, p); /* seconds 1009..1014 */
  assert_int_equal(n, 6);
  assert_true(p[0].queue_max == 0);
  assert_true(p[1].queue_max == 5 && p[1].queue_last == 4);
  assert_true(p[2].queue_max == 4 && p[3].queue_max == 4);  /* stuck: still 4 */
  assert_true(p[4].queue_max == 4 && p[4].queue_last == 0); /* started at 4, drained */
  assert_true(p[5].queue_max == 0);
  /* the window starting after the last event reads the depth it left */
  n = pr__history_series(h, 1012.0, 1, p);
  assert_true(n == 1 && p[0].queue_max == 4);
}

static void test_ring_reused(void **state) {
  pr__history_arrival(h, 1001.5, 0);
  pr__history_arrival(h, 1001.5 + PR_HISTORY_SECONDS, 0); /* the same slot */
  pr_history_point_t p[PR_HISTORY_SECONDS];
  int n = pr__history_series(h, 1001.5 + PR_HISTORY_SECONDS, PR_HISTORY_SECONDS + 50, p);
  assert_int_equal(n, PR_HISTORY_SECONDS); /* bounded */
  double total = 0;
  for (int i = 0; i < n; i++) total += p[i].arrivals;
  assert_true(total == 1);
  assert_true(p[n - 1].arrivals == 1 && p[n - 1].second == 1001 + PR_HISTORY_SECONDS);
  /* a late caller whose second left the ring changes nothing */
  pr__history_done(h, 1001.5, 0.001, true);
  n = pr__history_series(h, 1001.5 + PR_HISTORY_SECONDS, 1, p);
  assert_true(n == 1 && p[0].completed == 0);
}

static void test_switches_bounded(void **state) {
  pr_history_switch_t out[PR_HISTORY_SWITCHES];
  uint64_t total = 99;
  assert_int_equal(pr__history_switches(h, out, PR_HISTORY_SWITCHES, &total), 0);
  assert_true(total == 0);
  pr__history_switch(h, 1000.5, NULL, "2x4", "first plan", 0);
  for (int i = 1; i < PR_HISTORY_SWITCHES + 6; i++) {
    char why[32];
    snprintf(why, sizeof why, "switch %d", i);
    pr__history_switch(h, 1000.5 + i, "2x4", "1x2,1x2", why, 0.25);
  }
  int n = pr__history_switches(h, out, PR_HISTORY_SWITCHES, &total);
  assert_int_equal(n, PR_HISTORY_SWITCHES);
  assert_true(total == PR_HISTORY_SWITCHES + 6);
  assert_string_equal(out[0].why, "switch 6"); /* oldest kept first */
  assert_string_equal(out[n - 1].why, "switch 69");
  assert_true(out[n - 1].t == 1000.5 + 69 && out[n - 1].duration_ms == 0.25);
  n = pr__history_switches(h, out, 2, NULL); /* the newest two */
  assert_int_equal(n, 2);
  assert_string_equal(out[1].why, "switch 69");
}

static void test_switch_text_untrusted(void **state) {
  char why[600];
  memset(why, 'a', sizeof why);
  memcpy(why + 100, "\xff\xfe\xc3", 3);
  memcpy(why + PR_HISTORY_WHY_LEN - 3, "\xe2\x82\xac", 3); /* a euro sign across the cut */
  why[sizeof why - 1] = 0;
  pr__history_switch(h, 1000.5, "", "\x80x", why, 0);
  pr_history_switch_t out[1];
  assert_int_equal(pr__history_switches(h, out, 1, NULL), 1);
  assert_true(strlen(out[0].why) < PR_HISTORY_WHY_LEN);
  assert_true(pr__utf8_valid(out[0].why, strlen(out[0].why)));
  assert_true(pr__utf8_valid(out[0].to, strlen(out[0].to)));
  assert_string_equal(out[0].from, "");
  assert_null(memchr(out[0].why, 0xff, strlen(out[0].why)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_buckets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_series_and_percentiles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_queue_carried_over, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_reused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_switches_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_switch_text_untrusted, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
