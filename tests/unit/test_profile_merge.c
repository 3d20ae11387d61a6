/* Profile coverage and merging (profile_merge.c): which batches a cached
 * profile lacks, the union that keeps every cached point, and the
 * co-running slowdown carried over to points measured alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packrat/profiler.h"

#define SHA "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* threads 1..T at the n batches of bs, latency 0.2 + scale * b / t */
static pr_profile_t make(int T, const int *bs, int n, double scale) {
  pr_profile_t p = {.cores = T, .tolerance = 0.05};
  p.points = calloc((size_t)(T * n), sizeof *p.points);
  assert_non_null(p.points);
  snprintf(p.model, sizeof p.model, "m");
  snprintf(p.model_sha256, sizeof p.model_sha256, "%s", SHA);
  snprintf(p.cpu, sizeof p.cpu, "cpu");
  for (int t = 1; t <= T; t++)
    for (int i = 0; i < n; i++) {
      double ms = 0.2 + scale * bs[i] / t;
      p.points[p.n_points++] = (pr_profile_point_t){.threads = t,
                                                    .batch = bs[i],
                                                    .latency_ms = ms,
                                                    .p90_ms = ms * 1.02,
                                                    .isolated_ms = ms,
                                                    .runs = 10,
                                                    .spread = 0.01};
    }
  return p;
}

static void test_missing(void **state) {
  (void)state;
  const int have[] = {1, 2, 4}, need[] = {1, 2, 3, 4, 8, 3};
  pr_profile_t p = make(2, have, 3, 1.0);
  int missing[8];
  /* 3 (listed twice, reported once) and 8 */
  assert_int_equal(pr_profile_missing(&p, 2, need, 6, missing, 8), 2);
  assert_int_equal(missing[0], 3);
  assert_int_equal(missing[1], 8);
  assert_int_equal(pr_profile_missing(&p, 2, have, 3, missing, 8), 0);
  /* a thread count the profile lacks: every batch is missing */
  assert_int_equal(pr_profile_missing(&p, 3, have, 3, missing, 8), 3);
  /* a batch with a point at one thread count only is not covered */
  p.n_points--; /* drops (2 threads, batch 4) */
  assert_int_equal(pr_profile_missing(&p, 2, have, 3, missing, 8), 1);
  assert_int_equal(missing[0], 4);
  /* no profile: all; a short out list still counts all */
  assert_int_equal(pr_profile_missing(NULL, 2, need, 5, missing, 1), 5);
  assert_int_equal(missing[0], 1);
  assert_int_equal(pr_profile_missing(NULL, 2, need, 5, NULL, 0), 5);
  pr_profile_free(&p);
}

/* A narrower new profile merged into a wider cached one keeps every cached
 * point; points of the new one replace the cached ones where both have them. */
static void test_merge_never_narrower(void **state) {
  (void)state;
  const int wide_b[] = {1, 2, 3, 4, 8, 16}, narrow_b[] = {1, 2};
  pr_profile_t wide = make(2, wide_b, 6, 1.0), narrow = make(2, narrow_b, 2, 1.01), out;
  assert_int_equal(pr_profile_merge(&wide, &narrow, &out), PR_OK);
  assert_int_equal(out.n_points, 12);
  assert_int_equal(out.cores, 2);
  assert_int_equal(pr_profile_missing(&out, 2, wide_b, 6, NULL, 0), 0);
  assert_true(pr_profile_latency(&out, 1, 2) == pr_profile_latency(&narrow, 1, 2));
  assert_true(pr_profile_latency(&out, 1, 16) == pr_profile_latency(&wide, 1, 16));
  assert_int_equal(out.n_suspicious, 0);
  assert_string_equal(out.model_sha256, SHA);
  /* each (threads, batch) once */
  for (int i = 0; i < out.n_points; i++)
    for (int k = i + 1; k < out.n_points; k++)
      assert_false(out.points[i].threads == out.points[k].threads &&
                   out.points[i].batch == out.points[k].batch);
  pr_profile_free(&out);
  /* no base: a copy */
  assert_int_equal(pr_profile_merge(NULL, &narrow, &out), PR_OK);
  assert_int_equal(out.n_points, narrow.n_points);
  pr_profile_free(&out);
  pr_profile_free(&wide);
  pr_profile_free(&narrow);
}

/* The verdict is recomputed on the union: a suspicious new point makes the
 * merge suspicious (so it is not cached over the good one). */
static void test_merge_recomputes_quality(void **state) {
  (void)state;
  const int b1[] = {1, 2}, b2[] = {4};
  pr_profile_t cached = make(2, b1, 2, 1.0), part = make(2, b2, 1, 1.0), out;
  part.points[1].isolated_ms = part.points[1].latency_ms = 50; /* 2 threads far slower */
  assert_int_equal(pr_profile_merge(&cached, &part, &out), PR_OK);
  assert_int_equal(out.n_suspicious, 1);
  pr_profile_free(&out);
  pr_profile_free(&cached);
  pr_profile_free(&part);
}

static void test_apply_corun(void **state) {
  (void)state;
  const int b1[] = {1, 2}, b2[] = {4};
  pr_profile_t ref = make(3, b1, 2, 1.0), p = make(3, b2, 1, 1.0);
  for (int i = 0; i < ref.n_points; i++)
    if (ref.points[i].threads == 1) ref.points[i].latency_ms = 1.1 * ref.points[i].isolated_ms;
  ref.n_points -= 2; /* ref has no 3-thread point: factor 1 */
  pr_profile_apply_corun(&ref, &p);
  for (int i = 0; i < p.n_points; i++) {
    const pr_profile_point_t *q = &p.points[i];
    double want = q->threads == 1 ? 1.1 : 1.0;
    assert_float_equal(q->latency_ms, want * q->isolated_ms, 1e-9);
    assert_float_equal(q->p90_ms, want * 1.02 * q->isolated_ms, 1e-9);
  }
  pr_profile_free(&ref);
  pr_profile_free(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing),
      cmocka_unit_test(test_merge_never_narrower),
      cmocka_unit_test(test_merge_recomputes_quality),
      cmocka_unit_test(test_apply_corun),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
