/* The joint optimizer: many models, one budget of cores.
 *
 * Each model m has a profile, a batch B_m to plan for, a weight w_m, core
 * bounds [lo_m, hi_m] and a reference latency ref_m (its latency target, or
 * its best plan's latency alone on all the cores). With c cores its best
 * plan serves B_m in f_m(c) (pr_plan_latency_by_cores, non-increasing in c);
 * its score is s_m(c) = w_m f_m(c) / ref_m, its slowdown against what it
 * could have alone (1 = as fast as alone on the whole host).
 *
 * Objective, in order: the largest score over the models (the worst-served
 * model, as a plan's latency is its slowest instance); then the sum of the
 * scores (among divisions equally fair to the worst, the one that serves the
 * others best); then the fewest cores. Exact:
 *  1. R* is the smallest score value at which every model fits: with
 *     need_m(R) = min{c in [lo_m, hi_m] : s_m(c) <= R}, feasible iff
 *     sum need_m(R) <= T, monotone in R, so a binary search over the sorted
 *     distinct score values.
 *  2. Under R*, a knapsack over models and cores minimizes (sum, cores):
 *     g[j][c] = min over c_j of g[j-1][c - c_j] + s_j(c_j), where c_j runs
 *     only over the step starts of f_j at or above need_j(R*) (a core that
 *     does not lower f_j never helps the sum), O(M T steps).
 * The cores no model's batch needs are then given out, in proportion to the
 * shares, within each model's bound: they lower no score at its batch (the
 * knapsack would have used them) but let its plans for other batches use
 * more cores. Each model gets a contiguous range, in the models' order. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "packrat/planner.h"

/* Sums equal within this relative margin are a tie (they add the same
 * scores in another order only in the brute-force reference). */
#define TIE 1e-9

typedef struct {
  double *f; /* [0..T] */
  int lo, hi;
  double ref, w;
} model_t;

static double score(const model_t *m, int c) {
  return m->w * m->f[c] / m->ref;
}

#define NONE (1 << 28) /* need() when no share serves: over any core count */

/* The fewest cores in [lo, hi] with a score at most R; NONE when none. */
static int need(const model_t *m, double R) {
  int lo = m->lo, hi = m->hi, ans = NONE;
  while (lo <= hi) { /* score is non-increasing in c */
    int mid = lo + (hi - lo) / 2;
    if (score(m, mid) <= R)
      ans = mid, hi = mid - 1;
    else
      lo = mid + 1;
  }
  return ans;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static bool better(double sum, int cores, double best_sum, int best_cores) {
  if (isinf(best_sum)) return isfinite(sum);
  double margin = TIE * fmax(fabs(sum), fabs(best_sum));
  if (sum < best_sum - margin) return true;
  return sum <= best_sum + margin && cores < best_cores;
}

/* Validates the models into ms (every model's arguments first, then the
 * tables from their profiles); PR_OK, or an error with err. */
static pr_status_t prepare(const pr_joint_model_t *models, int n, int T, model_t *ms, char *err,
                           size_t err_len) {
  for (int k = 0; k < n; k++) {
    const pr_joint_model_t *in = &models[k];
    model_t *m = &ms[k];
    if (!in->profile || in->batch < 1 || in->batch > (1 << 20) || !(in->weight >= 0) ||
        !isfinite(in->weight) || in->min_cores < 0 || in->max_cores < 0 || !(in->target_ms >= 0) ||
        !isfinite(in->target_ms)) {
      pr__errf(err, err_len,
               "model %d: a batch of at least 1, a weight, bounds and a target of at "
               "least 0 are required",
               k);
      return PR_ERR_INVALID;
    }
    m->lo = in->min_cores > 1 ? in->min_cores : 1;
    m->hi = in->max_cores && in->max_cores < T ? in->max_cores : T;
    m->w = in->weight > 0 ? in->weight : 1;
    if (m->lo > m->hi) {
      pr__errf(err, err_len, "model %d: min cores %d over its max %d (the server has %d)", k, m->lo,
               m->hi, T);
      return PR_ERR_INVALID;
    }
  }
  for (int k = 0; k < n; k++) {
    model_t *m = &ms[k];
    m->f = malloc(sizeof(double) * (size_t)(T + 1));
    if (!m->f) return PR_ERR_NOMEM;
    pr_status_t st = pr_plan_latency_by_cores(models[k].profile, models[k].batch, T, m->f);
    if (st) return st;
    if (!isfinite(m->f[m->hi])) {
      pr__errf(err, err_len, "model %d: no plan for batch %d on %d cores (its profile)", k,
               models[k].batch, m->hi);
      return PR_ERR_NOT_FOUND;
    }
    m->ref = models[k].target_ms > 0 ? models[k].target_ms : m->f[T];
    if (!(m->ref > 0)) m->ref = 1e-9; /* a profile of zero latencies: every score 0 */
  }
  return PR_OK;
}

/* R*: the smallest score value at which every model fits T cores; -1 when
 * none does (err says how many cores the models need). */
static double min_max_score(const model_t *ms, int n, int T, char *err, size_t err_len) {
  size_t count = 0;
  for (int k = 0; k < n; k++) count += (size_t)(ms[k].hi - ms[k].lo + 1);
  double *cand = malloc(sizeof(double) * count);
  if (!cand) {
    pr__errf(err, err_len, "out of memory");
    return -1;
  }
  size_t m = 0;
  for (int k = 0; k < n; k++)
    for (int c = ms[k].lo; c <= ms[k].hi; c++)
      if (isfinite(ms[k].f[c])) cand[m++] = score(&ms[k], c);
  qsort(cand, m, sizeof *cand, cmp_double);
  long lo = 0, hi = (long)m - 1;
  double best = -1;
  while (lo <= hi) {
    long mid = lo + (hi - lo) / 2;
    long total = 0;
    for (int k = 0; k < n && total <= T; k++) total += need(&ms[k], cand[mid]);
    if (total <= T)
      best = cand[mid], hi = mid - 1;
    else
      lo = mid + 1;
  }
  free(cand);
  if (best < 0) {
    long total = 0;
    for (int k = 0; k < n; k++) total += need(&ms[k], INFINITY);
    pr__errf(err, err_len,
             "the models need %ld cores at least (each its batch's smallest plan and "
             "its min cores), the server has %d",
             total, T);
  }
  return best;
}

/* The knapsack under R*: c[k] for each model; false on out of memory. */
static bool min_sum(const model_t *ms, int n, int T, double R, int *c) {
  size_t W = (size_t)T + 1;
  double *g = malloc(sizeof(double) * W * (size_t)(n + 1));
  int *arg = malloc(sizeof(int) * W * (size_t)(n + 1));
  int *steps = malloc(sizeof(int) * W);
  bool ok = g && arg && steps;
  if (!ok) goto out;
  for (size_t i = 0; i < W; i++) g[i] = INFINITY;
  g[0] = 0;
  for (int j = 1; j <= n; j++) {
    const model_t *m = &ms[j - 1];
    double *prev = g + (size_t)(j - 1) * W, *cur = g + (size_t)j * W;
    int *a = arg + (size_t)j * W, n_steps = 0, first = need(m, R);
    for (int c = first; c <= m->hi; c++)
      if (c == first || m->f[c] < m->f[c - 1]) steps[n_steps++] = c;
    assert(n_steps > 0);
    for (int c = 0; c <= T; c++) {
      cur[c] = INFINITY;
      a[c] = 0;
      for (int s = 0; s < n_steps && steps[s] <= c; s++) {
        double v = prev[c - steps[s]] + score(m, steps[s]);
        /* exactly c cores here: the fewest-cores tie-break is the final
         * choice of c below */
        if (isfinite(prev[c - steps[s]]) && (isinf(cur[c]) || v < cur[c]))
          cur[c] = v, a[c] = steps[s];
      }
    }
  }
  const double *last = g + (size_t)n * W;
  int best = -1;
  for (int c = 0; c <= T; c++)
    if (isfinite(last[c]) && (best < 0 || better(last[c], c, last[best], best))) best = c;
  assert(best >= 0);
  for (int j = n; j >= 1; j--) {
    c[j - 1] = arg[(size_t)j * W + (size_t)best];
    best -= c[j - 1];
  }
  assert(best == 0);
out:
  free(g);
  free(arg);
  free(steps);
  return ok;
}

pr_status_t pr_plan_joint(const pr_joint_model_t *models, int n, int T, pr_joint_share_t *shares,
                          char *err, size_t err_len) {
  if (err_len) err[0] = 0;
  if (!models || !shares || n < 1 || n > PR_JOINT_MAX_MODELS || T < 1 || T > 65536) {
    pr__errf(err, err_len, "1 to %d models and 1 to 65536 cores", PR_JOINT_MAX_MODELS);
    return PR_ERR_INVALID;
  }
  model_t *ms = calloc((size_t)n, sizeof *ms);
  int *c = calloc((size_t)n, sizeof *c), *c0 = calloc((size_t)n, sizeof *c0);
  pr_status_t st = PR_ERR_NOMEM;
  if (!ms || !c || !c0) goto out;
  if ((st = prepare(models, n, T, ms, err, err_len))) goto out;
  double R = min_max_score(ms, n, T, err, err_len);
  st = PR_ERR_NOT_FOUND;
  if (R < 0) goto out;
  st = PR_ERR_NOMEM;
  if (!min_sum(ms, n, T, R, c)) goto out;
  int used = 0;
  for (int k = 0; k < n; k++) used += c0[k] = c[k];
  /* the spare cores, one at a time, to the model whose share grew least */
  for (; used < T; used++) {
    int pick = -1;
    for (int k = 0; k < n; k++)
      if (c[k] < ms[k].hi &&
          (pick < 0 || (double)(c[k] + 1) / c0[k] < (double)(c[pick] + 1) / c0[pick]))
        pick = k;
    if (pick < 0) break;
    c[pick]++;
  }
  for (int k = 0, core = 0; k < n; k++) {
    assert(c[k] >= ms[k].lo && c[k] <= ms[k].hi && isfinite(ms[k].f[c[k]]));
    assert(score(&ms[k], c[k]) <= R);
    shares[k] = (pr_joint_share_t){.first_core = core,
                                   .cores = c[k],
                                   .latency_ms = ms[k].f[c[k]],
                                   .reference_ms = ms[k].ref,
                                   .score = score(&ms[k], c[k])};
    core += c[k];
  }
  st = PR_OK;
out:
  for (int k = 0; ms && k < n; k++) free(ms[k].f);
  free(ms);
  free(c);
  free(c0);
  return st;
}

pr_status_t pr_plan_joint_score(const pr_joint_model_t *models, int n, int T, const int *cores,
                                double *worst, double *sum) {
  *worst = *sum = 0;
  if (!models || !cores || n < 1 || n > PR_JOINT_MAX_MODELS || T < 1 || T > 65536)
    return PR_ERR_INVALID;
  double *f = malloc(sizeof(double) * (size_t)(T + 1));
  if (!f) return PR_ERR_NOMEM;
  pr_status_t st = PR_OK;
  for (int k = 0; k < n && !st; k++) {
    if (cores[k] < 1 || cores[k] > T) {
      st = PR_ERR_INVALID;
      break;
    }
    if ((st = pr_plan_latency_by_cores(models[k].profile, models[k].batch, T, f))) break;
    if (!isfinite(f[cores[k]])) {
      st = PR_ERR_NOT_FOUND;
      break;
    }
    double ref = models[k].target_ms > 0 ? models[k].target_ms : f[T];
    double w = models[k].weight > 0 ? models[k].weight : 1;
    double s = w * f[cores[k]] / (ref > 0 ? ref : 1e-9);
    *worst = fmax(*worst, s);
    *sum += s;
  }
  free(f);
  return st;
}

bool pr_balance_step(pr_balance_t *b, double now, bool same, double worst, double sum,
                     double new_worst, double new_sum) {
  bool better = !same && (new_worst * (1 + PR_BALANCE_GAIN) <= worst ||
                          (new_worst <= worst && new_sum * (1 + PR_BALANCE_GAIN) <= sum));
  b->streak = better ? b->streak + 1 : 0;
  if (b->streak < PR_BALANCE_WINDOWS || now - b->last_move < PR_BALANCE_MIN_S) return false;
  b->streak = 0;
  b->last_move = now;
  return true;
}

void pr_plan_offset(pr_plan_t *plan, int first_core) {
  for (int k = 0; k < plan->n_instances; k++) plan->instances[k].first_core += first_core;
}
