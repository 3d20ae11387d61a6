/* packrat planner: profiles (latency of one instance per thread count and
 * batch size), the optimizer that turns a profile into a plan, and the
 * batch-size estimator. The optimizer is pure: profile in, plan out, no
 * threads and no I/O. */
#ifndef PACKRAT_PLANNER_H
#define PACKRAT_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "packrat/engine.h"

#pragma GCC visibility push(default) /* the public API: exported */

/* One measured configuration of a single instance. */
typedef struct {
  int threads;
  int batch;
  double latency_ms; /* median, with neighbouring instances busy (what a plan sees) */
  double p90_ms;
  double isolated_ms; /* median alone on the machine */
  /* how it was measured (profiler.h: "Measurement quality"); 0 when unknown */
  int runs;       /* timed runs behind the median */
  double spread;  /* middle half of the runs (q1..q3) over the median: 0.02 = 2% */
  int remeasured; /* 0 measured once, 1 re-measured and reproduced, -1 not reproduced */
} pr_profile_point_t;

/* latency[t][b] on a grid; points in any order, each (t, b) at most once. */
typedef struct {
  char model[256];
  char model_sha256[65];
  char cpu[128];
  char isa[32];      /* pr_engine_isa() where it was measured: another ISA's is not reused */
  char precision[8]; /* of the measured sessions: "fp32" or "bf16" (cached apart) */
  int cores;         /* T: the machine's cores the profile covers */
  int n_points;
  pr_profile_point_t *points;
  double tolerance; /* the profiler's tolerance (0: PR_PROFILE_TOLERANCE) */
  int n_suspicious; /* points pr_profile_assess flags: 0 = good, may be cached */
} pr_profile_t;

typedef struct {
  int threads;
  int batch;
  double latency_ms;
  int first_core; /* index into the core order the instance is pinned to */
} pr_plan_instance_t;

#define PR_PLAN_MAX_INSTANCES 1024

/* A plan: instances whose batches add up to batch and threads to at most cores. */
typedef struct {
  int batch;
  int cores;
  double latency_ms; /* the slowest instance */
  int n_instances;
  pr_plan_instance_t instances[PR_PLAN_MAX_INSTANCES];
} pr_plan_t;

/* Optimal plan for a batch of `batch` requests on `cores` cores: minimizes the
 * largest instance latency over every list of profiled points whose batches
 * sum to `batch` and threads to at most `cores`; ties go to fewer threads in
 * total, then fewer instances. Exact. Returns PR_ERR_NOT_FOUND when no
 * combination of profiled points makes the batch, PR_ERR_INVALID for bad
 * arguments (batch or cores < 1, batch > 1<<20) and PR_ERR_NOMEM. Instances
 * are listed by decreasing threads, with consecutive first_core. */
pr_status_t pr_plan_optimize(const pr_profile_t *profile, int batch, int cores, pr_plan_t *plan);

/* f[c] for c = 0..cores: the optimal plan's latency for a batch of `batch`
 * on at most c cores (pr_plan_optimize's max instance latency), INFINITY
 * where no combination of profiled points makes the batch (f[0] always).
 * Non-increasing in c. One knapsack per distinct value, not one optimize
 * per c. PR_ERR_INVALID for bad arguments, PR_ERR_NOMEM. */
pr_status_t pr_plan_latency_by_cores(const pr_profile_t *profile, int batch, int cores, double *f);

/* ---- many models, one host (joint.c) ---- */

#define PR_JOINT_MAX_MODELS 256

/* One model of a joint plan. */
typedef struct {
  const pr_profile_t *profile; /* borrowed */
  int batch;                   /* the batch to plan it for, >= 1 */
  double weight;               /* > 0 (0: 1): its score counts this much */
  int min_cores, max_cores;    /* bounds on its share (0: none) */
  double target_ms;            /* its reference latency (0: its best alone on every core) */
} pr_joint_model_t;

/* A model's share of the cores: [first_core, first_core + cores). */
typedef struct {
  int first_core, cores;
  double latency_ms;   /* its best plan's latency at its batch on its share */
  double reference_ms; /* target_ms, or its best on every core */
  double score;        /* weight * latency_ms / reference_ms */
} pr_joint_share_t;

/* Divides `cores` cores among n models, each core to one model, exactly
 * minimizing, in order: the largest score (the worst-served model's
 * slowdown against its reference), the sum of the scores, the cores used;
 * the cores left are then given out in proportion to the shares within
 * the bounds (they lower no score at the planned batch). Shares are
 * contiguous, in the models' order. Returns PR_OK; PR_ERR_NOT_FOUND when
 * the models cannot all fit (err: how many cores they need) or a model's
 * batch has no plan within its max cores; PR_ERR_INVALID for bad
 * arguments (err says which); PR_ERR_NOMEM. A model's plan on its share
 * is pr_plan_optimize(profile, batch, cores) moved by pr_plan_offset. */
pr_status_t pr_plan_joint(const pr_joint_model_t *models, int n, int cores,
                          pr_joint_share_t *shares, char *err, size_t err_len);

/* The worst and the sum of the scores of a given division (cores[k] for
 * model k, 1..cores each), at the models' batches, as pr_plan_joint scores
 * its own. PR_ERR_NOT_FOUND when a model's batch has no plan on its cores,
 * PR_ERR_INVALID, PR_ERR_NOMEM. */
pr_status_t pr_plan_joint_score(const pr_joint_model_t *models, int n, int cores,
                                const int *division, double *worst, double *sum);

/* Hysteresis for re-dividing the cores as the loads move: a new division
 * replaces the current one when it lowers the worst score, or at a worst
 * no higher the sum, by PR_BALANCE_GAIN, in PR_BALANCE_WINDOWS windows in
 * a row, at most once every PR_BALANCE_MIN_S seconds. */
#define PR_BALANCE_GAIN 0.10
#define PR_BALANCE_WINDOWS 3
#define PR_BALANCE_MIN_S 10.0
typedef struct {
  int streak;       /* windows in a row a better division held */
  double last_move; /* when the last move was made (seconds, any clock) */
} pr_balance_t;

/* One window: same (the new division is the current one), the current
 * division's worst and sum, the new one's. Returns whether to move now. */
bool pr_balance_step(pr_balance_t *b, double now, bool same, double worst, double sum,
                     double new_worst, double new_sum);

/* Moves every instance of plan first_core cores up the core order. */
void pr_plan_offset(pr_plan_t *plan, int first_core);

/* The Packrat paper's dynamic program, O(T^2 B^2) over the same points, kept
 * as the reference the fast optimizer is checked and benchmarked against.
 * Returns the optimal max latency (or a negative value when infeasible). */
double pr_plan_paper_dp(const pr_profile_t *profile, int batch, int cores);

/* Latency of the point (threads, batch), or a negative value if not profiled. */
double pr_profile_latency(const pr_profile_t *profile, int threads, int batch);

/* Parse "t1xb1,t2xb2,..." into plan (latencies from profile when given, else 0). */
pr_status_t pr_plan_parse(const char *spec, const pr_profile_t *profile, pr_plan_t *plan, char *err,
                          size_t err_len);

/* Writes plan as "THREADSxBATCH,..." (pr_plan_parse's form) into buf, cut
 * (NUL-terminated) when len is too small. */
void pr_plan_format(const pr_plan_t *plan, char *buf, size_t len);

/* Whether plans a and b run the same instances: as many, each with the
 * same threads on the same cores; their batches aside. */
bool pr_plan_same_instances(const pr_plan_t *a, const pr_plan_t *b);

/* The next run of a batch of `rows` rows on an instance's prepared sessions:
 * sizes[0..n) their rows, ascending, ms[i] the time of a run of sizes[i] (a
 * run of fewer rows is padded to it), each run PR_CHUNK_RUN_MS more. Of
 * every cover of the rows by runs, the one with the least total time, if
 * it takes under PR_CHUNK_GAIN of one run of the smallest size that holds
 * them all; its largest run first. Returns that run's rows (at most
 * `rows`); when a size is `rows` exactly, with no such cover, or sizes not
 * ascending, a time unknown (<= 0) or rows over PR_CHUNK_MAX_ROWS, the rows
 * of one run of the smallest size holding them (else the largest). Its
 * tables are on the stack (16 KB). */
#define PR_CHUNK_GAIN 0.9
#define PR_CHUNK_RUN_MS 0.05
#define PR_CHUNK_MAX_ROWS 1024
int pr_plan_next_chunk(const int *sizes, const double *ms, int n, int rows);

void pr_profile_free(pr_profile_t *profile);

#pragma GCC visibility pop

#endif
