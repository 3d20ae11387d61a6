/* The plan policy (packrat/policy.h has the rules): the batches a served
 * model is profiled and planned at, its shape buckets, and its plans on
 * its share of the cores. Pure: no threads, no I/O. */
#include "packrat/policy.h"

#include <assert.h>
#include <string.h>

#include "base/log.h"

/* Inserts b into the ascending batches[0..n) unless there; the new n. */
static int add_batch(int *batches, int n, int b) {
  int i = 0;
  while (i < n && batches[i] < b) i++;
  if (i < n && batches[i] == b) return n;
  memmove(batches + i + 1, batches + i, sizeof *batches * (size_t)(n - i));
  batches[i] = b;
  return n + 1;
}

int pr_policy_lowest_batch(const pr_policy_t *p) {
  assert(p->max_batch >= 1);
  if (!p->follow_load) return p->max_batch;
  int lo = p->min_batch > 0 ? p->min_batch : 1;
  return lo < p->max_batch ? lo : p->max_batch;
}

int pr_policy_n_batches(const pr_policy_t *p) {
  int n = 0;
  for (int b = pr_policy_lowest_batch(p);; b *= 2) {
    n++;
    if (b >= p->max_batch) return n;
  }
}

pr_status_t pr_policy_check(const pr_policy_t *p, char *err, size_t err_len) {
  if (p->fixed_plan) return PR_OK;
  int n = pr_policy_n_batches(p);
  if (n + 1 <= p->max_plans) return PR_OK;
  pr__errf(err, err_len,
           "batches %d..%d need %d prepared plans and one stays free for a pinned plan, over "
           "the limit of %d (raise --max-prepared-plans or min_batch_size)",
           pr_policy_lowest_batch(p), p->max_batch, n, p->max_plans);
  return PR_ERR_INVALID;
}

int pr_policy_buckets(const pr_policy_t *p, long long sizes[PR_BUCKETS_MAX]) {
  if (p->fixed_plan || !p->follow_load || !p->dynamic_dim) return 0;
  int n = pr_buckets_choose(p->dynamic_dim, (p->max_plans - 1) / pr_policy_n_batches(p), sizes);
  return n >= 2 ? n : 0;
}

int pr_policy_profile_batches(const pr_policy_t *p, int *batches, int cap) {
  assert(cap >= 1);
  int n = 0, max = p->max_batch;
  for (int b = 1; n < cap; b *= 2) { /* powers of two: 21 at most */
    n = add_batch(batches, n, b < max ? b : max);
    if (b >= max) break;
  }
  for (int b = pr_policy_lowest_batch(p); n < cap; b *= 2) {
    n = add_batch(batches, n, b < max ? b : max);
    if (b >= max) break;
  }
  return n;
}

int pr_policy_plans(const pr_policy_t *p, const pr_profile_t *const *profiles, int n_profiles,
                    int at_bucket, int first_core, int cores, pr_plan_t *plans, int *buckets,
                    int cap, int *active, char *err, size_t err_len) {
  assert(cap >= 1 && first_core >= 0);
  *active = 0;
  buckets[0] = -1;
  if (p->fixed_plan)
    return pr_plan_parse(p->fixed_plan, NULL, &plans[0], err, err_len) == PR_OK ? 1 : -1;
  assert(n_profiles >= 1 && at_bucket >= 0 && at_bucket < n_profiles);
  int n = 0;
  for (int k = 0; k < n_profiles; k++) {
    for (int b = pr_policy_lowest_batch(p);; b *= 2) {
      int batch = b < p->max_batch ? b : p->max_batch;
      if (n == cap) {
        pr__errf(err, err_len, "more than %d plans to prepare", cap);
        return -1;
      }
      if (pr_plan_optimize(profiles[k], batch, cores, &plans[n])) {
        pr__errf(err, err_len, "no plan for batch %d on %d cores", batch, cores);
        return -1;
      }
      pr_plan_offset(&plans[n], first_core);
      buckets[n++] = n_profiles > 1 ? k : -1;
      if (b >= p->max_batch) break;
    }
    if (k == at_bucket) *active = n - 1;
  }
  return n;
}
