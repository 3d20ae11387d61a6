/* Profile coverage and merging: which batch sizes a cached profile lacks
 * for the thread counts a caller needs, and the union of two profiles of
 * the same model, machine and cores. pr_profile_get (profile_cache.c) uses
 * them so that a cached profile that covers what is needed is reused, one
 * that covers part of it is completed by measuring only what it lacks, and
 * a cached profile is never replaced by one that covers less.
 *
 * Notes on the design:
 * - Coverage is by batch column: a batch size is covered when every thread
 *   count 1..cores has a point at it. Missing columns are measured whole, so
 *   the quality checks that compare thread counts at one batch
 *   (pr_profile_assess: "inverted") compare points of one measurement.
 * - Points measured without their co-running neighbours (a completion
 *   measures only the missing columns) take the slowdown that the cached
 *   profile measured at the same thread count (pr_profile_apply_corun).
 * - All pure: no I/O, no clock. */
#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "packrat/profiler.h"

static bool has_point(const pr_profile_t *p, int threads, int batch) {
  for (int i = 0; i < p->n_points; i++)
    if (p->points[i].threads == threads && p->points[i].batch == batch) return true;
  return false;
}

int pr_profile_missing(const pr_profile_t *p, int cores, const int *need, int n_need, int *missing,
                       int max) {
  int n = 0;
  for (int i = 0; i < n_need; i++) {
    bool covered = p != NULL;
    for (int t = 1; covered && t <= cores; t++) covered = has_point(p, t, need[i]);
    bool listed = false;
    for (int k = 0; k < n && k < max; k++) listed |= missing[k] == need[i];
    if (covered || listed) continue;
    if (missing && n < max) missing[n] = need[i];
    n++;
  }
  return n;
}

pr_status_t pr_profile_merge(const pr_profile_t *base, const pr_profile_t *add, pr_profile_t *out) {
  assert(add && out && add != out && base != out);
  assert(add->n_points >= 0 && (!base || base->n_points >= 0));
  memset(out, 0, sizeof *out);
  int n_base = base ? base->n_points : 0;
  size_t total = (size_t)n_base + (size_t)add->n_points;
  out->points = calloc(total + 1, sizeof *out->points);
  if (!out->points) return PR_ERR_NOMEM;
  memcpy(out->model, add->model, sizeof out->model);
  memcpy(out->model_sha256, add->model_sha256, sizeof out->model_sha256);
  memcpy(out->cpu, add->cpu, sizeof out->cpu);
  memcpy(out->isa, add->isa, sizeof out->isa);
  memcpy(out->precision, add->precision, sizeof out->precision);
  int base_cores = base ? base->cores : 0;
  out->cores = add->cores > base_cores ? add->cores : base_cores;
  out->tolerance = add->tolerance;
  /* base's points that add does not measure again, then add's */
  for (int i = 0; i < n_base; i++) {
    const pr_profile_point_t *q = &base->points[i];
    if (!has_point(add, q->threads, q->batch)) out->points[out->n_points++] = *q;
  }
  for (int i = 0; i < add->n_points; i++) out->points[out->n_points++] = add->points[i];
  assert((size_t)out->n_points <= total);
  out->n_suspicious = pr_profile_assess(out, out->tolerance, NULL, 0);
  return PR_OK;
}

void pr_profile_apply_corun(const pr_profile_t *ref, pr_profile_t *p) {
  assert(ref && p && ref != p);
  for (int i = 0; i < p->n_points; i++) {
    pr_profile_point_t *q = &p->points[i];
    double factor = 1.0;
    for (int k = 0; k < ref->n_points; k++) {
      const pr_profile_point_t *r = &ref->points[k];
      if (r->threads == q->threads && r->isolated_ms > 0 && r->latency_ms > r->isolated_ms) {
        factor = r->latency_ms / r->isolated_ms;
        break;
      }
    }
    assert(factor >= 1.0); /* co-running slows, never speeds */
    q->latency_ms = q->isolated_ms * factor;
    q->p90_ms *= factor;
  }
}
