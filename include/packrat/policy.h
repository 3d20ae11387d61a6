/* packrat plan policy: which profiles a served model needs and which plans
 * to prepare from them. Pure: settings, profiles and the model's share of
 * the cores in; batches, shape buckets and plans out; no threads and no
 * I/O. The server's model loader measures (or reads from the cache) the
 * profiles this asks for and hands the scheduler the plans it returns.
 *
 * The rules:
 * - A fixed plan (a "THREADSxBATCH,..." spec) is served as written, and no
 *   profile is needed.
 * - Following the load: one plan per batch lo, 2 lo, 4 lo, ... up to the
 *   max batch, and the max batch itself (the autoscaler switches among
 *   them); lo is the min batch (1 by default). Not following: the max
 *   batch's plan only.
 * - Those plans, and one slot kept free for a plan pinned by hand, fit in
 *   the prepared-plan limit, or the model does not load.
 * - Following the load with exactly one dynamic dim: that dim's shape
 *   buckets (packrat/buckets.h), as many as the limit leaves room for (a
 *   plan per bucket and batch); at least two, else none. The bucket
 *   holding the dim's profile_at size is profiled on the full grid, the
 *   others on the batches plans use (pr_policy_profile_batches).
 * - Every plan is the optimizer's for its batch on the model's share of
 *   the cores, moved to the share's first core. The active plan is the max
 *   batch's at the profile_at bucket. */
#ifndef PACKRAT_POLICY_H
#define PACKRAT_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "packrat/buckets.h"
#include "packrat/planner.h"

#pragma GCC visibility push(default) /* the public API: exported */

typedef struct {
  const char *fixed_plan; /* a plan spec served as written, or NULL: plans from profiles */
  bool follow_load;       /* a plan per batch from min_batch up (else the max batch's) */
  int min_batch;          /* the lowest batch planned for when following (< 1: 1) */
  int max_batch;          /* 1..1 << 20 */
  int max_plans;          /* the prepared-plan limit, >= 1 */
  /* the model's one dynamic dim (NULL: none, or more than one) */
  const pr_bucket_dim_t *dynamic_dim;
} pr_policy_t;

/* The smallest batch planned for. */
int pr_policy_lowest_batch(const pr_policy_t *p);

/* How many plans one profile gives (one per batch planned for). */
int pr_policy_n_batches(const pr_policy_t *p);

/* PR_OK when the plans fit the prepared-plan limit with one slot free;
 * PR_ERR_INVALID with err naming the settings to change. A fixed plan
 * always fits. */
pr_status_t pr_policy_check(const pr_policy_t *p, char *err, size_t err_len);

/* The shape buckets' sizes (ascending) into sizes; how many (0: none). */
int pr_policy_buckets(const pr_policy_t *p, long long sizes[PR_BUCKETS_MAX]);

/* The batches a bucket other than profile_at's is profiled at: the powers
 * of two up to the max batch and the planned batches, ascending and
 * distinct, into batches (cap entries, 64 hold every one); how many. */
int pr_policy_profile_batches(const pr_policy_t *p, int *batches, int cap);

/* The plans to prepare on cores [first_core, first_core + cores): the
 * fixed one, or for each of n_profiles profiles (one per shape bucket, or
 * one) a plan per batch planned for, into plans[0..cap); buckets[i] is
 * plans[i]'s bucket (-1 without buckets); *active the one to start on
 * (at_bucket's max batch). Returns how many, or -1 with err (a batch with
 * no plan on the cores, a bad fixed plan, over cap). */
int pr_policy_plans(const pr_policy_t *p, const pr_profile_t *const *profiles, int n_profiles,
                    int at_bucket, int first_core, int cores, pr_plan_t *plans, int *buckets,
                    int cap, int *active, char *err, size_t err_len);

#pragma GCC visibility pop

#endif
