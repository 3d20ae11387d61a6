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

/* pr_plan_latency_by_cores against one optimize per core count */
static void test_latency_by_cores(void **s) {
  pr_plan_t *plan = malloc(sizeof *plan);
  double f[16];
  for (int iter = 0; iter < 200; iter++) {
    pr_profile_t p = {0};
    int T = 1 + (int)(urand() * 8), maxb = 1 + (int)(urand() * 6);
    random_profile(&p, T, maxb, iter % 2, iter % 3 ? 0.3 : 0);
    for (int B = 1; B <= 9; B++) {
      assert_int_equal(pr_plan_latency_by_cores(&p, B, T, f), PR_OK);
      assert_true(isinf(f[0]));
      for (int c = 1; c <= T; c++) {
        pr_status_t st = pr_plan_optimize(&p, B, c, plan);
        if (st == PR_ERR_NOT_FOUND)
          assert_true(isinf(f[c]));
        else
          assert_true(st == PR_OK && f[c] == plan->latency_ms);
      }
    }
    pr_profile_free(&p);
  }
  pr_profile_t empty = {0};
  assert_int_equal(pr_plan_latency_by_cores(&empty, 1, 4, f), PR_OK);
  assert_true(isinf(f[4]));
  assert_int_equal(pr_plan_latency_by_cores(&empty, 0, 4, f), PR_ERR_INVALID);
  free(plan);
}

/* ---- the joint optimizer against every division of the cores ---- */

typedef struct {
  double max, sum;
  int cores;
} objective_t;

#define MAXM 4
#define MAXT 9

/* f[k][c]: model k's optimal latency on c cores, by pr_plan_optimize */
static double jf[MAXM][MAXT + 1];

static void brute_joint(const pr_joint_model_t *ms, const double *ref, int n, int T, int k,
                        int used, objective_t cur, objective_t *best) {
  if (k == n) {
    double margin = 1e-9 * fmax(cur.sum, best->sum);
    bool b = cur.max < best->max ||
             (cur.max == best->max && (cur.sum < best->sum - margin ||
                                       (cur.sum <= best->sum + margin && cur.cores < best->cores)));
    if (b) *best = cur;
    return;
  }
  if (k >= MAXM || T > MAXT) return; /* check_joint's bounds: never */
  int lo = ms[k].min_cores > 1 ? ms[k].min_cores : 1;
  int hi = ms[k].max_cores && ms[k].max_cores < T ? ms[k].max_cores : T;
  for (int c = lo; c <= hi && used + c <= T; c++) {
    if (isinf(jf[k][c])) continue;
    double w = ms[k].weight > 0 ? ms[k].weight : 1, sc = w * jf[k][c] / ref[k];
    brute_joint(ms, ref, n, T, k + 1, used + c,
                (objective_t){fmax(cur.max, sc), cur.sum + sc, cur.cores + c}, best);
  }
}

static void check_joint(pr_joint_model_t *ms, int n, int T) {
  pr_plan_t *plan = malloc(sizeof *plan);
  double ref[MAXM];
  if (n > MAXM || T > MAXT) fail_msg("at most %d models on %d cores", MAXM, MAXT);
  for (int k = 0; k < n; k++) {
    for (int c = 0; c <= T; c++)
      jf[k][c] = c && pr_plan_optimize(ms[k].profile, ms[k].batch, c, plan) == PR_OK
                     ? plan->latency_ms
                     : INFINITY;
    ref[k] = ms[k].target_ms > 0 ? ms[k].target_ms : jf[k][T];
  }
  objective_t best = {INFINITY, INFINITY, 0};
  bool all_plannable = true;
  for (int k = 0; k < n; k++) all_plannable &= isfinite(ref[k]);
  if (all_plannable) brute_joint(ms, ref, n, T, 0, 0, (objective_t){0, 0, 0}, &best);
  pr_joint_share_t sh[MAXM];
  char err[256];
  pr_status_t st = pr_plan_joint(ms, n, T, sh, err, sizeof err);
  bool bounds_ok = true; /* a min over the max (or the server's cores) is refused as invalid */
  for (int k = 0; k < n; k++)
    bounds_ok &= ms[k].min_cores <= (ms[k].max_cores && ms[k].max_cores < T ? ms[k].max_cores : T);
  if (!bounds_ok) {
    assert_int_equal(st, PR_ERR_INVALID);
    assert_non_null(strstr(err, "over its max"));
  } else if (isinf(best.max)) {
    assert_int_equal(st, PR_ERR_NOT_FOUND);
    assert_true(err[0]);
  } else {
    assert_int_equal(st, PR_OK);
    objective_t got = {0, 0, 0};
    int core = 0;
    for (int k = 0; k < n; k++) {
      int lo = ms[k].min_cores > 1 ? ms[k].min_cores : 1;
      int hi = ms[k].max_cores && ms[k].max_cores < T ? ms[k].max_cores : T;
      assert_int_equal(sh[k].first_core, core);
      assert_true(sh[k].cores >= lo && sh[k].cores <= hi);
      core += sh[k].cores;
      assert_true(sh[k].latency_ms == jf[k][sh[k].cores]);
      assert_true(sh[k].reference_ms == ref[k]);
      double w = ms[k].weight > 0 ? ms[k].weight : 1;
      assert_true(fabs(sh[k].score - w * jf[k][sh[k].cores] / ref[k]) < 1e-12);
      got.max = fmax(got.max, sh[k].score);
      got.sum += sh[k].score;
    }
    assert_true(core <= T);
    assert_true(got.max == best.max);
    assert_true(fabs(got.sum - best.sum) <= 1e-9 * fmax(1, best.sum));
    /* the spare cores are all given out, within the bounds */
    if (core < T)
      for (int k = 0; k < n; k++)
        assert_int_equal(sh[k].cores, ms[k].max_cores && ms[k].max_cores < T ? ms[k].max_cores : T);
  }
  free(plan);
}

static void test_joint_random(void **s) {
  pr_profile_t p[MAXM] = {0};
  for (int iter = 0; iter < 400; iter++) {
    int n = 1 + (int)(urand() * MAXM), T = 1 + (int)(urand() * MAXT);
    pr_joint_model_t ms[MAXM];
    for (int k = 0; k < n; k++) {
      /* monotone, gappy and non-monotone profiles, some over fewer cores */
      int pt = 1 + (int)(urand() * T), maxb = 1 + (int)(urand() * 5);
      random_profile(&p[k], pt, maxb, urand() < 0.5, urand() < 0.5 ? 0.3 : 0);
      ms[k] = (pr_joint_model_t){.profile = &p[k], .batch = 1 + (int)(urand() * 6)};
      double r = urand();
      ms[k].weight = r < 0.2 ? 2 : r < 0.4 ? 0.5 : r < 0.5 ? 0 : 1;
      if (urand() < 0.3) ms[k].min_cores = 1 + (int)(urand() * 3);
      if (urand() < 0.3) ms[k].max_cores = 1 + (int)(urand() * T);
      if (ms[k].max_cores && ms[k].min_cores > ms[k].max_cores) ms[k].min_cores = 0;
      if (urand() < 0.2) ms[k].target_ms = 1 + 50 * urand();
    }
    check_joint(ms, n, T);
    for (int k = 0; k < n; k++) pr_profile_free(&p[k]);
  }
}

/* two models of one profile that scales perfectly (100 ms / t at batch 1),
 * equal weights: an even split; a weight of 2 on the second: 3 and 5 cores
 * (scores 8/3 and 16/5 against 4 and 8/3 for 2 and 6) */
static void test_joint_split_and_weight(void **s) {
  pr_profile_point_t pts[8];
  for (int t = 1; t <= 8; t++)
    pts[t - 1] = (pr_profile_point_t){.threads = t, .batch = 1, .latency_ms = 100.0 / t};
  pr_profile_t p = {.n_points = 8, .points = pts, .cores = 8};
  pr_joint_model_t ms[2] = {{.profile = &p, .batch = 1}, {.profile = &p, .batch = 1}};
  pr_joint_share_t sh[2];
  char err[256];
  assert_int_equal(pr_plan_joint(ms, 2, 8, sh, err, sizeof err), PR_OK);
  assert_int_equal(sh[0].cores, 4);
  assert_int_equal(sh[1].cores, 4);
  assert_int_equal(sh[1].first_core, 4);
  assert_true(fabs(sh[0].score - 2) < 1e-12);
  ms[1].weight = 2;
  assert_int_equal(pr_plan_joint(ms, 2, 8, sh, err, sizeof err), PR_OK);
  assert_int_equal(sh[0].cores, 3);
  assert_int_equal(sh[1].cores, 5);
  check_joint(ms, 2, 8);
  /* a latency target the model meets on 2 cores: it gets 2, the other 6 */
  ms[1] = (pr_joint_model_t){.profile = &p, .batch = 1, .target_ms = 50};
  assert_int_equal(pr_plan_joint(ms, 2, 8, sh, err, sizeof err), PR_OK);
  assert_true(sh[1].cores >= 2 && sh[1].latency_ms <= 50);
  check_joint(ms, 2, 8);
  /* one model alone gets every core, at its best */
  assert_int_equal(pr_plan_joint(ms, 1, 8, sh, err, sizeof err), PR_OK);
  assert_int_equal(sh[0].cores, 8);
  assert_true(fabs(sh[0].score - 1) < 1e-12);
}

static void test_joint_errors(void **s) {
  pr_profile_t p = {0};
  random_profile(&p, 4, 2, true, 0);
  pr_joint_model_t ms[3] = {
      {.profile = &p, .batch = 2}, {.profile = &p, .batch = 2}, {.profile = &p, .batch = 2}};
  pr_joint_share_t sh[3];
  char err[256];
  assert_int_equal(pr_plan_joint(ms, 3, 2, sh, err, sizeof err), PR_ERR_NOT_FOUND);
  assert_non_null(strstr(err, "need 3 cores at least"));
  assert_non_null(strstr(err, "the server has 2"));
  ms[0].min_cores = 3;
  ms[0].max_cores = 2;
  assert_int_equal(pr_plan_joint(ms, 1, 4, sh, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "min cores 3 over its max 2"));
  ms[0] = (pr_joint_model_t){.profile = &p, .batch = 2, .weight = -1};
  assert_int_equal(pr_plan_joint(ms, 1, 4, sh, err, sizeof err), PR_ERR_INVALID);
  ms[0] = (pr_joint_model_t){.profile = &p, .batch = 0};
  assert_int_equal(pr_plan_joint(ms, 1, 4, sh, err, sizeof err), PR_ERR_INVALID);
  ms[0] = (pr_joint_model_t){.profile = &p, .batch = 2, .target_ms = NAN};
  assert_int_equal(pr_plan_joint(ms, 1, 4, sh, err, sizeof err), PR_ERR_INVALID);
  ms[0] = (pr_joint_model_t){.profile = &p, .batch = 2};
  assert_int_equal(pr_plan_joint(ms, 0, 4, sh, err, sizeof err), PR_ERR_INVALID);
  assert_int_equal(pr_plan_joint(ms, 1, 0, sh, err, sizeof err), PR_ERR_INVALID);
  /* a batch the profile cannot make */
  pr_profile_point_t pts[] = {{.threads = 1, .batch = 2, .latency_ms = 5}};
  pr_profile_t even = {.n_points = 1, .points = pts, .cores = 1};
  ms[0] = (pr_joint_model_t){.profile = &even, .batch = 3};
  assert_int_equal(pr_plan_joint(ms, 1, 4, sh, err, sizeof err), PR_ERR_NOT_FOUND);
  assert_non_null(strstr(err, "no plan for batch 3"));
  pr_profile_free(&p);
}

/* The score of a given division agrees with the joint plan's own; the
 * balancer's hysteresis moves on a lasting gain only. */
static void test_joint_score_and_balance(void **s) {
  pr_profile_point_t pts[8];
  for (int t = 1; t <= 8; t++)
    pts[t - 1] = (pr_profile_point_t){.threads = t, .batch = 1, .latency_ms = 100.0 / t};
  pr_profile_t p = {.n_points = 8, .points = pts, .cores = 8};
  pr_joint_model_t ms[2] = {{.profile = &p, .batch = 1}, {.profile = &p, .batch = 1, .weight = 2}};
  pr_joint_share_t sh[2];
  char err[256];
  assert_int_equal(pr_plan_joint(ms, 2, 8, sh, err, sizeof err), PR_OK);
  int got[2] = {sh[0].cores, sh[1].cores}, even[2] = {4, 4}, bad[2] = {0, 8};
  double worst, sum;
  assert_int_equal(pr_plan_joint_score(ms, 2, 8, got, &worst, &sum), PR_OK);
  assert_true(fabs(worst - fmax(sh[0].score, sh[1].score)) < 1e-12);
  assert_true(fabs(sum - (sh[0].score + sh[1].score)) < 1e-12);
  assert_int_equal(pr_plan_joint_score(ms, 2, 8, even, &worst, &sum), PR_OK);
  assert_true(fabs(worst - 4) < 1e-12); /* 2 x (100/4) / (100/8) */
  assert_int_equal(pr_plan_joint_score(ms, 2, 8, bad, &worst, &sum), PR_ERR_INVALID);
  /* a gain of 25% (4 -> 3.2) held 3 windows moves; not before, and not
   * again within PR_BALANCE_MIN_S */
  pr_balance_t b = {.last_move = -100};
  assert_false(pr_balance_step(&b, 0, false, 4, 6, 3.2, 5.9));
  assert_false(pr_balance_step(&b, 1, false, 4, 6, 3.2, 5.9));
  assert_true(pr_balance_step(&b, 2, false, 4, 6, 3.2, 5.9));
  assert_int_equal(b.streak, 0);
  for (int w = 3; w < 3 + PR_BALANCE_WINDOWS + 2; w++)
    assert_false(pr_balance_step(&b, w, false, 4, 6, 3.2, 5.9));
  assert_true(pr_balance_step(&b, 2 + PR_BALANCE_MIN_S, false, 4, 6, 3.2, 5.9));
  /* a flicker (a better window between two that are not) never moves */
  b = (pr_balance_t){.last_move = -100};
  for (int w = 0; w < 20; w++)
    assert_false(pr_balance_step(&b, w, false, 4, 6, w % 2 ? 3.2 : 3.9, 5.9));
  /* a gain under PR_BALANCE_GAIN, or the same division, never moves */
  for (int w = 0; w < 20; w++) {
    assert_false(pr_balance_step(&b, w, false, 4, 6, 4 / (1 + PR_BALANCE_GAIN / 2), 5.9));
    assert_false(pr_balance_step(&b, w, true, 4, 6, 1, 1));
  }
  /* at an equal worst, a sum 10% lower moves */
  b = (pr_balance_t){.last_move = -100};
  bool moved = false;
  for (int w = 0; w < PR_BALANCE_WINDOWS; w++) moved = pr_balance_step(&b, w, false, 4, 6, 4, 5);
  assert_true(moved);
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
      cmocka_unit_test(test_latency_by_cores),
      cmocka_unit_test(test_joint_random),
      cmocka_unit_test(test_joint_split_and_weight),
      cmocka_unit_test(test_joint_errors),
      cmocka_unit_test(test_joint_score_and_balance),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
