/* The batch-size estimators: steady loads hold still, steps are followed
 * within a bounded number of windows, noise at a boundary does not flap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "packrat/estimator.h"

static unsigned rng = 5;
static double urand(void) {
  rng = rng * 1103515245u + 12345u;
  return (double)((rng >> 8) & 0xffff) / 65536.0;
}

/* one window whose queue lengths hover around q (+-jitter) */
static int feed_queue(pr_estimator_t *e, double q, double jitter) {
  int samples[20];
  for (int i = 0; i < 20; i++) {
    double v = q + jitter * (2 * urand() - 1);
    samples[i] = v < 0 ? 0 : (int)(v + 0.5);
  }
  pr_est_window_t w = {samples, 20, 0, 0};
  return pr_estimator_update(e, &w);
}

static int feed_rate(pr_estimator_t *e, double rate) {
  pr_est_window_t w = {NULL, 0, rate, 0};
  return pr_estimator_update(e, &w);
}

static int changes(const int *t, int n) {
  int c = 0;
  for (int i = 1; i < n; i++) c += t[i] != t[i - 1];
  return c;
}

static void test_paper_steady_and_steps(void **s) {
  pr_estimator_t e;
  pr_estimator_init(&e, PR_EST_PAPER, 1, 64);
  int t[200];
  for (int i = 0; i < 60; i++) t[i] = feed_queue(&e, 11, 1);
  assert_int_equal(t[59], 8);
  assert_true(changes(t + 40, 20) == 0); /* steady */
  /* step up to a queue of 40: target 32 within 40 windows (EWMA 0.1, then the mode) */
  int up = -1;
  for (int i = 0; i < 60; i++)
    if ((t[60 + i] = feed_queue(&e, 40, 2)) == 32 && up < 0) up = i;
  assert_true(up >= 0 && up < 40);
  int down = -1;
  for (int i = 0; i < 80; i++)
    if ((t[120 + i] = feed_queue(&e, 2, 0.5)) == 2 && down < 0) down = i;
  assert_true(down >= 0 && down < 60);
}

static void test_paper_noise(void **s) {
  pr_estimator_t e;
  pr_estimator_init(&e, PR_EST_PAPER, 1, 64);
  int t[200];
  for (int i = 0; i < 200; i++) t[i] = feed_queue(&e, 12, 6); /* samples 6..18 */
  assert_int_equal(t[199], 8);
  assert_int_equal(changes(t + 50, 150), 0);
}

static pr_estimator_t rate_estimator(void) {
  pr_estimator_t e;
  pr_estimator_init(&e, PR_EST_RATE, 1, 32);
  /* latency of batch 2^k: 20 ms + 10 ms per request */
  for (int k = 0; k <= 5; k++) e.latency_s[k] = 0.020 + 0.010 * (1 << k);
  return e;
}

static void test_rate_steady_and_steps(void **s) {
  pr_estimator_t e = rate_estimator();
  int t[100];
  /* 60 req/s: B=1 needs 1.8 > 1, B=2 2.4 > 2, B=4 3.6 <= 4 */
  for (int i = 0; i < 20; i++) t[i] = feed_rate(&e, 60 * (1 + 0.05 * (2 * urand() - 1)));
  assert_int_equal(t[19], 4);
  assert_true(changes(t + 5, 15) == 0);
  /* up to 200 req/s: nothing keeps up, so the largest batch, within 2 windows */
  for (int i = 0; i < 10; i++) t[20 + i] = feed_rate(&e, 200);
  assert_int_equal(t[21], 32);
  /* down to 10 req/s: B=1 (0.3 <= 0.8); not in the first 5 windows, within 15 */
  for (int i = 0; i < 20; i++) t[30 + i] = feed_rate(&e, 10);
  for (int i = 0; i < 5; i++) assert_int_equal(t[30 + i], 32);
  assert_int_equal(t[44], 1);
  assert_true(changes(t + 30, 20) <= 2);
}

static void test_rate_noise_at_boundary(void **s) {
  pr_estimator_t e = rate_estimator();
  int t[200];
  /* B=4 keeps up to 66.7 req/s: noise across that boundary */
  for (int i = 0; i < 200; i++) t[i] = feed_rate(&e, 66.7 * (1 + 0.08 * (2 * urand() - 1)));
  assert_true(changes(t + 10, 190) <= 1);
}

static void test_bounds(void **s) {
  pr_estimator_t e;
  pr_estimator_init(&e, PR_EST_PAPER, 3, 100); /* rounded to powers of two: 2..64 */
  for (int i = 0; i < 50; i++) feed_queue(&e, 1000, 0);
  assert_int_equal(e.target, 64);
  for (int i = 0; i < 100; i++) feed_queue(&e, 0, 0);
  assert_int_equal(e.target, 2);
}

/* one window: arrivals at `rate`, the queue growing from q0 to q1, the
 * oldest request `oldest` seconds old at its end */
static int feed_backlog(pr_estimator_t *e, double rate, int q0, int q1, double oldest) {
  int samples[20];
  for (int i = 0; i < 20; i++) samples[i] = q0 + (q1 - q0) * i / 19;
  pr_est_window_t w = {samples, 20, rate, oldest};
  return pr_estimator_update(e, &w);
}

static void rate_with_latencies(pr_estimator_t *e) {
  pr_estimator_init(e, PR_EST_RATE, 1, 16);
  for (int k = 0; k <= 4; k++) e->latency_s[k] = 0.01 + 0.005 * (1 << k); /* sub-linear */
}

/* The arrival rate reads 0 while requests pile up (the server was reported
 * switching to batch 1 with 45 requests queued): the target must not go down. */
static void test_backlog_holds_target(void **s) {
  pr_estimator_t e;
  rate_with_latencies(&e);
  for (int i = 0; i < 10; i++) feed_rate(&e, 150); /* needs batch 8 */
  assert_int_equal(e.target, 8);
  int held = 0;
  for (int i = 0; i < 30; i++) {
    int q = 5 + i;
    feed_backlog(&e, 0, q, q + 1, 0.01);
    assert_int_equal(e.target, 8);
    held += e.reason == PR_EST_HELD;
  }
  assert_true(held >= 1); /* the rate alone would have gone down */
  /* the backlog drained and the load gone: down after the hysteresis */
  for (int i = 0; i < 10; i++) feed_backlog(&e, 0, 0, 0, 0);
  assert_true(e.target < 8);
  assert_int_equal(e.reason, PR_EST_STEADY);
}

/* A growing backlog whose oldest request waited over twice the planned
 * latency raises the target a power of two a window, up to the max. */
static void test_backlog_stale_raises(void **s) {
  pr_estimator_t e;
  rate_with_latencies(&e);
  assert_int_equal(feed_backlog(&e, 10, 3, 6, 0.5), 2);
  assert_int_equal(e.reason, PR_EST_BACKLOG_UP);
  assert_int_equal(feed_backlog(&e, 10, 6, 9, 0.6), 4);
  assert_int_equal(feed_backlog(&e, 10, 9, 12, 0.7), 8);
  assert_int_equal(feed_backlog(&e, 10, 12, 15, 0.8), 16);
  assert_int_equal(feed_backlog(&e, 10, 15, 18, 0.9), 16); /* the max */
  /* stale but shrinking: no push up */
  pr_estimator_t f;
  rate_with_latencies(&f);
  assert_int_equal(feed_backlog(&f, 10, 9, 3, 0.5), 1);
  /* the paper's estimator is held the same way */
  pr_estimator_t g;
  pr_estimator_init(&g, PR_EST_PAPER, 1, 16);
  for (int i = 0; i < 30; i++) feed_queue(&g, 8, 0);
  assert_int_equal(g.target, 8);
  for (int i = 0; i < 30; i++) {
    int samples[20];
    for (int k = 0; k < 20; k++) samples[k] = k < 19 ? 0 : 1; /* mostly empty, yet growing */
    pr_est_window_t w = {samples, 20, 0, 0.001};
    assert_int_equal(pr_estimator_update(&g, &w), 8);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paper_steady_and_steps),
      cmocka_unit_test(test_paper_noise),
      cmocka_unit_test(test_rate_steady_and_steps),
      cmocka_unit_test(test_rate_noise_at_boundary),
      cmocka_unit_test(test_bounds),
      cmocka_unit_test(test_backlog_holds_target),
      cmocka_unit_test(test_backlog_stale_raises),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
