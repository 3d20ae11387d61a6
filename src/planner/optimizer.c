/* The optimizer: profile in, plan out.
 *
 * For a latency bound L, an instance of batch b needs at least
 * c_L(b) = min{t : latency[t][b] <= L} threads (fewer threads never help:
 * replacing t by c_L(b) keeps the instance under L). So "can a batch of B be
 * served within L on T cores" is an unbounded knapsack over batch sizes:
 * f[j] = min threads to serve exactly j requests = min_b f[j-b] + c_L(b),
 * feasible when f[B] <= T. Feasibility grows with L, so the optimum L* is the
 * smallest profiled latency that is feasible. The candidates are searched by
 * selection (quickselect halves them per step) instead of sorting them: O(P)
 * for P points plus O(log P) knapsacks of O(B x columns), against the
 * paper's O(T^2 B^2). The final knapsack orders (threads, instances)
 * lexicographically, which gives the tie-breaks. */
#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "packrat/planner.h"

/* Points grouped by batch (CSR), thread counts ascending within a column,
 * latencies replaced by their prefix minimum over threads. */
typedef struct {
  int n_cols;
  int *col_b;     /* batch of column c */
  int *col_start; /* column c is entries [col_start[c], col_start[c+1]) */
  int *threads;
  double *pmin;
} index_t;

static void index_free(index_t *ix) {
  free(ix->col_b);
  free(ix->col_start);
  free(ix->threads);
  free(ix->pmin);
}

static int index_build(const pr_profile_t *p, int T, int B, index_t *ix) {
  memset(ix, 0, sizeof *ix);
  int n = 0;
  int *cnt_t = calloc((size_t)T + 2, sizeof(int)), *cnt_b = calloc((size_t)B + 2, sizeof(int));
  int *by_t = malloc(sizeof(int) * (size_t)(p->n_points + 1));
  int *order = malloc(sizeof(int) * (size_t)(p->n_points + 1));
  int rc = -1;
  if (!cnt_t || !cnt_b || !by_t || !order) goto out;
  /* stable counting sorts: by threads, then by batch */
  for (int i = 0; i < p->n_points; i++) {
    const pr_profile_point_t *q = &p->points[i];
    if (q->threads < 1 || q->threads > T || q->batch < 1 || q->batch > B ||
        !isfinite(q->latency_ms) || q->latency_ms < 0)
      continue;
    cnt_t[q->threads + 1]++;
    cnt_b[q->batch + 1]++;
    n++;
  }
  for (int t = 1; t <= T + 1; t++) cnt_t[t] += cnt_t[t - 1];
  for (int i = 0; i < p->n_points; i++) {
    const pr_profile_point_t *q = &p->points[i];
    if (q->threads < 1 || q->threads > T || q->batch < 1 || q->batch > B ||
        !isfinite(q->latency_ms) || q->latency_ms < 0)
      continue;
    by_t[cnt_t[q->threads]++] = i;
  }
  int n_cols = 0;
  for (int b = 1; b <= B + 1; b++) {
    n_cols += cnt_b[b] > 0;
    cnt_b[b] += cnt_b[b - 1];
  }
  for (int k = 0; k < n; k++) order[cnt_b[p->points[by_t[k]].batch]++] = by_t[k];
  ix->col_b = malloc(sizeof(int) * (size_t)(n_cols + 1));
  ix->col_start = malloc(sizeof(int) * (size_t)(n_cols + 2));
  ix->threads = malloc(sizeof(int) * (size_t)(n + 1));
  ix->pmin = malloc(sizeof(double) * (size_t)(n + 1));
  if (!ix->col_b || !ix->col_start || !ix->threads || !ix->pmin) goto out;
  int m = 0;
  for (int k = 0; k < n;) {
    int b = p->points[order[k]].batch;
    ix->col_b[ix->n_cols] = b;
    ix->col_start[ix->n_cols++] = m;
    double best = INFINITY;
    for (; k < n && p->points[order[k]].batch == b; k++) {
      const pr_profile_point_t *q = &p->points[order[k]];
      if (m > ix->col_start[ix->n_cols - 1] && ix->threads[m - 1] == q->threads) continue;
      best = fmin(best, q->latency_ms);
      ix->threads[m] = q->threads;
      ix->pmin[m++] = best;
    }
  }
  ix->col_start[ix->n_cols] = m;
  rc = 0;
out:
  free(cnt_t);
  free(cnt_b);
  free(by_t);
  free(order);
  return rc;
}

/* c_L for column c: fewest threads whose prefix-min latency is <= L, 0 if none. */
static int min_threads(const index_t *ix, int c, double L) {
  assert(c >= 0 && c < ix->n_cols && ix->col_start[c] < ix->col_start[c + 1]);
  int lo = ix->col_start[c], hi = ix->col_start[c + 1] - 1, ans = -1;
  while (lo <= hi) { /* pmin is non-increasing */
    int mid = (lo + hi) / 2;
    if (ix->pmin[mid] <= L)
      ans = mid, hi = mid - 1;
    else
      lo = mid + 1;
  }
  return ans < 0 ? 0 : ix->threads[ans];
}

#define INF32 (1 << 28)

typedef struct {
  int B;
  int *cost;   /* dense by batch: c_L(b), INF32 when infeasible; [0..B] */
  int *f;      /* min threads for exactly j requests */
  int64_t *g;  /* final pass: threads << 21 | instances */
  int *choice; /* final pass: batch of the last instance */
} knap_t;

static void set_costs(const index_t *ix, double L, knap_t *k) {
  for (int b = 0; b <= k->B; b++) k->cost[b] = INF32;
  for (int c = 0; c < ix->n_cols; c++) {
    assert(ix->col_b[c] >= 1 && ix->col_b[c] <= k->B && (!c || ix->col_b[c] > ix->col_b[c - 1]));
    int t = min_threads(ix, c, L);
    if (t) k->cost[ix->col_b[c]] = t;
  }
}

/* Feasibility: f[B] = min threads (vectorizable min-plus over dense costs, or
 * over the columns when they are few). */
static int min_total_threads(const index_t *ix, double L, knap_t *k) {
  set_costs(ix, L, k);
  int *f = k->f, *cost = k->cost;
  bool sparse = (int64_t)ix->n_cols * 8 < k->B;
  f[0] = 0;
  for (int j = 1; j <= k->B; j++) {
    int best = INF32;
    if (sparse) {
      for (int c = 0; c < ix->n_cols && ix->col_b[c] <= j; c++) {
        int v = f[j - ix->col_b[c]] + cost[ix->col_b[c]];
        best = v < best ? v : best;
      }
    } else {
      for (int b = 1; b <= j; b++) {
        int v = f[j - b] + cost[b];
        best = v < best ? v : best;
      }
    }
    f[j] = best > INF32 ? INF32 : best;
    assert(f[j] >= 1); /* j requests take an instance at least */
  }
  return f[k->B];
}

/* Final pass at the optimal L: lexicographic (threads, instances) with choices. */
static void final_pass(const index_t *ix, double L, knap_t *k) {
  set_costs(ix, L, k);
  const int64_t INF = INT64_MAX / 4;
  k->g[0] = 0;
  for (int j = 1; j <= k->B; j++) {
    int64_t best = INF;
    int arg = 0;
    for (int c = 0; c < ix->n_cols && ix->col_b[c] <= j; c++) {
      int b = ix->col_b[c];
      if (k->cost[b] >= INF32 || k->g[j - b] >= INF) continue;
      int64_t v = k->g[j - b] + ((int64_t)k->cost[b] << 21) + 1;
      if (v < best) best = v, arg = b;
    }
    k->g[j] = best;
    k->choice[j] = arg;
    assert(best >= INF || (arg >= 1 && arg <= j)); /* reachable: the last instance's batch */
  }
}

/* Partition a[lo..hi] around a[mid]'s value; returns its final index. */
static int partition(double *a, int lo, int hi) {
  int mid = lo + (hi - lo) / 2;
  double pivot = a[mid], tmp;
  tmp = a[mid], a[mid] = a[hi], a[hi] = tmp;
  int store = lo;
  for (int i = lo; i < hi; i++)
    if (a[i] < pivot) tmp = a[i], a[i] = a[store], a[store] = tmp, store++;
  tmp = a[store], a[store] = a[hi], a[hi] = tmp;
  return store;
}

double pr_profile_latency(const pr_profile_t *p, int threads, int batch) {
  for (int i = 0; i < p->n_points; i++)
    if (p->points[i].threads == threads && p->points[i].batch == batch)
      return p->points[i].latency_ms;
  return -1;
}

static int cmp_instance(const void *a, const void *b) {
  const pr_plan_instance_t *x = a, *y = b;
  if (x->threads != y->threads) return y->threads - x->threads;
  return y->batch - x->batch;
}

pr_status_t pr_plan_optimize(const pr_profile_t *p, int B, int T, pr_plan_t *plan) {
  if (!p || !plan || B < 1 || T < 1 || B > (1 << 20) || T > 65536) return PR_ERR_INVALID;
  memset(plan, 0, offsetof(pr_plan_t, instances));
  plan->batch = B;
  plan->cores = T;
  index_t ix;
  knap_t k = {.B = B};
  double *cand = NULL;
  pr_status_t st = PR_ERR_NOMEM;
  if (index_build(p, T, B, &ix) < 0) goto out;
  int n = ix.col_start[ix.n_cols];
  cand = malloc(sizeof(double) * (size_t)(n + 1));
  k.cost = malloc(sizeof(int) * (size_t)(B + 1));
  k.f = malloc(sizeof(int) * (size_t)(B + 1));
  k.g = malloc(sizeof(int64_t) * (size_t)(B + 1));
  k.choice = malloc(sizeof(int) * (size_t)(B + 1));
  if (!cand || !k.cost || !k.f || !k.g || !k.choice) goto out;
  memcpy(cand, ix.pmin, sizeof(double) * (size_t)n);
  /* smallest feasible candidate: each step tests the median of the range */
  int lo = 0, hi = n - 1;
  double best = -1;
  while (lo <= hi) {
    int m = partition(cand, lo, hi); /* cand[lo..m-1] < cand[m] <= cand[m+1..hi] */
    if (min_total_threads(&ix, cand[m], &k) <= T)
      best = cand[m], hi = m - 1;
    else
      lo = m + 1;
  }
  st = PR_ERR_NOT_FOUND;
  if (best < 0) goto out;
  final_pass(&ix, best, &k);
  assert(k.g[B] < INT64_MAX / 4 && (int)(k.g[B] >> 21) <= T); /* L was feasible */
  for (int j = B; j > 0; j -= k.choice[j]) {
    assert(k.choice[j] >= 1 && k.choice[j] <= j && k.cost[k.choice[j]] < INF32);
    if (plan->n_instances == PR_PLAN_MAX_INSTANCES) {
      st = PR_ERR_INVALID;
      goto out;
    }
    pr_plan_instance_t *in = &plan->instances[plan->n_instances++];
    in->threads = k.cost[k.choice[j]];
    in->batch = k.choice[j];
    in->latency_ms = pr_profile_latency(p, in->threads, in->batch);
    assert(in->latency_ms >= 0 && in->latency_ms <= best); /* a profiled point within L */
  }
  qsort(plan->instances, (size_t)plan->n_instances, sizeof plan->instances[0], cmp_instance);
  int core = 0;
  for (int i = 0; i < plan->n_instances; i++) {
    plan->instances[i].first_core = core;
    core += plan->instances[i].threads;
    plan->latency_ms = fmax(plan->latency_ms, plan->instances[i].latency_ms);
  }
  st = PR_OK;
out:
  free(cand);
  free(k.cost);
  free(k.f);
  free(k.g);
  free(k.choice);
  index_free(&ix);
  return st;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* need[i] = min_total_threads(cand[i]) for every i in (lo, hi), need[lo]
 * and need[hi] known: need is non-increasing in i, so a range whose ends
 * agree is constant and takes no knapsack. */
static void fill_need(const index_t *ix, const double *cand, int *need, int lo, int hi, knap_t *k) {
  if (hi - lo < 2) return;
  if (need[lo] == need[hi]) {
    for (int i = lo + 1; i < hi; i++) need[i] = need[lo];
    return;
  }
  int mid = lo + (hi - lo) / 2;
  need[mid] = min_total_threads(ix, cand[mid], k);
  assert(need[mid] <= need[lo] && need[mid] >= need[hi]);
  fill_need(ix, cand, need, lo, mid, k);
  fill_need(ix, cand, need, mid, hi, k);
}

pr_status_t pr_plan_latency_by_cores(const pr_profile_t *p, int B, int T, double *f) {
  if (!p || !f || B < 1 || T < 1 || B > (1 << 20) || T > 65536) return PR_ERR_INVALID;
  for (int c = 0; c <= T; c++) f[c] = INFINITY;
  index_t ix;
  knap_t k = {.B = B};
  double *cand = NULL;
  int *need = NULL;
  pr_status_t st = PR_ERR_NOMEM;
  if (index_build(p, T, B, &ix) < 0) goto out;
  int n = ix.col_start[ix.n_cols];
  cand = malloc(sizeof(double) * (size_t)(n + 1));
  need = malloc(sizeof(int) * (size_t)(n + 1));
  k.cost = malloc(sizeof(int) * (size_t)(B + 1));
  k.f = malloc(sizeof(int) * (size_t)(B + 1));
  if (!cand || !need || !k.cost || !k.f) goto out;
  st = PR_OK;
  if (!n) goto out;
  memcpy(cand, ix.pmin, sizeof(double) * (size_t)n);
  qsort(cand, (size_t)n, sizeof *cand, cmp_double);
  int m = 0; /* distinct latencies */
  for (int i = 0; i < n; i++)
    if (!m || cand[i] != cand[m - 1]) cand[m++] = cand[i];
  need[0] = min_total_threads(&ix, cand[0], &k);
  need[m - 1] = min_total_threads(&ix, cand[m - 1], &k);
  fill_need(&ix, cand, need, 0, m - 1, &k);
  /* f[c]: the smallest latency whose need fits c cores; as c grows the
   * first such candidate moves down */
  int i = m; /* need[i..m) <= c */
  for (int c = 1; c <= T; c++) {
    while (i > 0 && need[i - 1] <= c) i--;
    f[c] = i < m ? cand[i] : INFINITY;
  }
out:
  free(cand);
  free(need);
  free(k.cost);
  free(k.f);
  index_free(&ix);
  return st;
}

double pr_plan_paper_dp(const pr_profile_t *p, int B, int T) {
  /* opt[t][b] = min over profiled (t', b') of max(opt[t - t'][b - b'], lat[t'][b']) */
  size_t W = (size_t)B + 1;
  double *opt = malloc(sizeof(double) * (size_t)(T + 1) * W);
  double *lat = malloc(sizeof(double) * (size_t)(T + 1) * W);
  if (!opt || !lat) {
    free(opt);
    free(lat);
    return -1;
  }
  for (size_t i = 0; i < (size_t)(T + 1) * W; i++) lat[i] = INFINITY;
  for (int i = 0; i < p->n_points; i++) {
    const pr_profile_point_t *q = &p->points[i];
    if (q->threads >= 1 && q->threads <= T && q->batch >= 1 && q->batch <= B)
      lat[(size_t)q->threads * W + (size_t)q->batch] =
          fmin(lat[(size_t)q->threads * W + (size_t)q->batch], q->latency_ms);
  }
  for (int t = 0; t <= T; t++) {
    opt[(size_t)t * W] = 0;
    for (int b = 1; b <= B; b++) {
      double best = INFINITY;
      for (int t2 = 1; t2 <= t; t2++)
        for (int b2 = 1; b2 <= b; b2++) {
          double l = lat[(size_t)t2 * W + (size_t)b2];
          if (l >= best) continue;
          double rest = opt[(size_t)(t - t2) * W + (size_t)(b - b2)];
          double v = rest > l ? rest : l;
          if (v < best) best = v;
        }
      opt[(size_t)t * W + (size_t)b] = best;
    }
  }
  double r = opt[(size_t)T * W + (size_t)B];
  free(opt);
  free(lat);
  return isfinite(r) ? r : -1;
}

pr_status_t pr_plan_parse(const char *spec, const pr_profile_t *profile, pr_plan_t *plan, char *err,
                          size_t err_len) {
  memset(plan, 0, offsetof(pr_plan_t, instances));
  const char *s = spec;
  int core = 0;
  while (*s) {
    char *end;
    /* digits only: strtol would take spaces and signs too */
    if (*s < '0' || *s > '9') goto bad;
    long t = strtol(s, &end, 10);
    if (*end != 'x') goto bad;
    s = end + 1;
    if (*s < '0' || *s > '9') goto bad;
    long b = strtol(s, &end, 10);
    if (t < 1 || b < 1 || t > 4096 || b > (1 << 20)) goto bad;
    s = end;
    if (*s == ',' && s[1])
      s++;
    else if (*s)
      goto bad;
    if (plan->n_instances == PR_PLAN_MAX_INSTANCES) goto bad;
    pr_plan_instance_t *in = &plan->instances[plan->n_instances++];
    in->threads = (int)t;
    in->batch = (int)b;
    in->first_core = core;
    in->latency_ms = profile ? pr_profile_latency(profile, in->threads, in->batch) : 0;
    if (in->latency_ms > plan->latency_ms) plan->latency_ms = in->latency_ms;
    core += (int)t;
    plan->batch += (int)b;
  }
  if (!plan->n_instances) goto bad;
  plan->cores = core;
  return PR_OK;
bad:
  snprintf(err, err_len, "plan '%s': expected THREADSxBATCH[,THREADSxBATCH...], e.g. 1x4,1x4",
           spec);
  return PR_ERR_INVALID;
}

void pr_profile_free(pr_profile_t *p) {
  if (!p) return;
  free(p->points);
  p->points = NULL;
  p->n_points = 0;
}

void pr_plan_format(const pr_plan_t *plan, char *buf, size_t len) {
  size_t off = 0;
  if (len) buf[0] = 0;
  for (int k = 0; k < plan->n_instances && off < len; k++)
    off += (size_t)snprintf(buf + off, len - off, "%s%dx%d", k ? "," : "",
                            plan->instances[k].threads, plan->instances[k].batch);
}

bool pr_plan_same_instances(const pr_plan_t *a, const pr_plan_t *b) {
  bool same = a->n_instances == b->n_instances;
  for (int k = 0; same && k < a->n_instances; k++)
    same = a->instances[k].threads == b->instances[k].threads &&
           a->instances[k].first_core == b->instances[k].first_core;
  return same;
}
