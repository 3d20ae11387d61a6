/* The served models: a registry of model versions and their lifecycle (load:
 * read the config, load the ONNX file, check it can be served, profile (or
 * take the cached profile), plan, start the scheduler; unload: wait for the
 * requests in flight, stop the instances, free).
 *
 * Notes on the design:
 * - Each version is an entry of its own (own scheduler and instances). The
 *   models that follow the load ("plan": "auto", not "cores": {"share":
 *   true}) divide the cores among them (pr_plan_joint, each planned for its
 *   max batch): each loads on its share, and a load or unload re-divides,
 *   every model whose share moved switching to plans on its new share
 *   (pr__sched_replan: no request fails). The others run on every core. At most `max_models`
 * entries are known at once (a setting); a load beyond it is refused with PR_ERR_BUSY and the
 * reason.
 * - Locks: `admin` serializes load and unload (one at a time, any model);
 *   `lock` (a rwlock) guards the array and each entry's state. A request
 *   takes a reference (atomic refs) under the read lock, so unload waits for
 *   the requests in flight before it frees anything. Lock order: admin, lock.
 *   Plan changes of a loaded model go through its scheduler, which
 *   serializes them itself. */
#ifndef PR_SERVER_MODELS_H
#define PR_SERVER_MODELS_H

#include <stdatomic.h>
#include <stdbool.h>

#include "packrat/buckets.h"
#include "packrat/engine.h"
#include "packrat/planner.h"
#include "sched/scheduler.h"
#include "server/protocol.h"
#include "server/repository.h"

typedef enum { PR_MODEL_UNAVAILABLE = 0, PR_MODEL_LOADING, PR_MODEL_READY } pr_model_state_t;

typedef struct {
  pr_repo_entry_t entry;
  pr_model_config_t cfg;
  pr_model_state_t state;
  char reason[512]; /* why not ready: a load error, or "unloaded" */
  pr_model_t *model;
  pr_sched_t *sched;
  pr_profile_t
      profile; /* the plans' latency[t][b] (no points: a fixed plan); read-only once ready */
  /* with shape buckets: the other buckets' profiles (the planned batches),
   * kept to re-plan on another share; at_bucket's is `profile` */
  pr_profile_t bucket_profiles[PR_BUCKETS_MAX];
  int n_buckets, at_bucket;
  /* its share of the cores (divided: in the joint plan; else every core,
   * from the first), written under admin and `lock` */
  bool divided;
  pr_joint_share_t share;
  int share_batch; /* the batch the share was planned for */
  /* loading with the others of the startup scan (pr__models_load_all): its
   * profiles are in and it takes part in the division, its plans and
   * scheduler are still to come (admin held throughout) */
  bool prepared;
  pr_proto_model_t proto;
  _Atomic int refs;
} pr_served_t;

typedef struct {
  const char *repository;
  const int *cpus; /* the cores instances are pinned to, in order */
  int n_cpus;
  int max_models;          /* models known at once */
  int max_plans;           /* prepared plans per model */
  double balance_window_s; /* the balancer's window (balance.c; 0: none) */
  pr_model_config_t defaults;
} pr_models_config_t;

typedef struct pr_models pr_models_t;

pr_status_t pr__models_create(const pr_models_config_t *cfg, pr_models_t **out);
/* Unloads every model (answering the requests in flight) and frees. */
void pr__models_destroy(pr_models_t *ms);

/* Loads (or reloads) the versions of model `name` that its version policy
 * selects (default: the highest), and unloads its ready versions the
 * policy no longer selects. PR_ERR_NOT_FOUND: no such model;
 * PR_ERR_INVALID: the policy selects no version there; PR_ERR_BUSY:
 * max_models (versions) reached; others: a version's load failed (it stays
 * known, unavailable, with the reason; the other versions load). */
pr_status_t pr__models_load(pr_models_t *ms, const char *name, char *err, size_t err_len);
/* The startup scan's loads: every version of every model named (as
 * pr__models_load each), the cores divided once among them all before any
 * is planned, so that none is planned again for the next one; errors are
 * logged per model. */
void pr__models_load_all(pr_models_t *ms, const char *const *names, int n);
/* Unloads every ready version of `name`; PR_ERR_NOT_FOUND when none is. */
pr_status_t pr__models_unload(pr_models_t *ms, const char *name);

/* The ready model `name` at `version` (NULL: the highest ready version)
 * with a reference taken, or NULL with *st: PR_ERR_NOT_FOUND (unknown model
 * or version), PR_ERR_BUSY (loading: retry) or PR_ERR_MODEL_UNAVAILABLE
 * (its load failed or it was unloaded: retrying does not help), and for a
 * known one the client's message in why (why_len bytes; may be NULL).
 * Release with pr__models_put. */
pr_served_t *pr__models_get(pr_models_t *ms, const char *name, const char *version, pr_status_t *st,
                            char *why, size_t why_len);
void pr__models_put(pr_served_t *m);

/* m's share of the cores, read under the lock (a re-division writes it). */
void pr__models_share(pr_models_t *ms, const pr_served_t *m, bool *divided,
                      pr_joint_share_t *share);
/* The cores plans use: the first this many of the server's cpus. */
int pr__models_cores(const pr_models_t *ms);
/* Re-divisions of the cores the balancer made (loads and unloads aside). */
uint64_t pr__models_core_moves(pr_models_t *ms);

/* Read access to every known model: fn runs under the read lock for each. */
void pr__models_each(pr_models_t *ms, void (*fn)(pr_served_t *m, void *ctx), void *ctx);
/* Each known version of model `name` (any state) under the read lock:
 * fn(NULL) once if none. */
void pr__models_with(pr_models_t *ms, const char *name, void (*fn)(pr_served_t *m, void *ctx),
                     void *ctx);

#endif
