/* The live dashboard: its page, script and style sheet (source files in
 * src/server/dashboard/, embedded into the binary at build time by
 * embed.cmake) and the state it polls, one JSON document: the machine's
 * cores (and their physical cores, from base/topology), and for each model its plan and instances
 * (threads, batch, cores, predicted and measured latency), the prepared plans, the profile
 * (latency[t][b]), the per-second series of the last minutes (request rate,
 * p50/p99 latency, queue depth) and the reconfiguration timeline.
 *
 * Notes on the design:
 * - Every text that reaches the JSON (model names, versions, reasons, plan
 *   specs) goes through pr__utf8_sanitize first and is escaped by jansson;
 *   the page inserts it with textContent only. Numbers that are unknown
 *   (no request completed, nothing measured yet) are null, never NaN.
 * - Everything is bounded: at most the server's models, the history's
 *   seconds and switches (history.h), the plan's instances, the profile's
 *   points.
 * - Encoding (pr__dash_model_json) works on a plain view of one model, so
 *   it is tested without a server; pr__dash_state collects the views from
 *   the registry under its read lock.
 * - Locks: pr_dash_t's `lock` serializes the making of states (it guards
 *   the copy room); under it the registry's read lock, and inside that each
 *   model's scheduler queue lock and history lock, one at a time. Lock
 *   order: dash, registry, scheduler, history. */
#ifndef PR_SERVER_DASHBOARD_H
#define PR_SERVER_DASHBOARD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "packrat/planner.h"
#include "sched/history.h"
#include "sched/scheduler.h"
#include "server/models.h"

/* The embedded files. */
typedef enum { PR_DASH_PAGE, PR_DASH_SCRIPT, PR_DASH_STYLE, PR_DASH_N_ASSETS } pr_dash_asset_id_t;

typedef struct {
  const unsigned char *data; /* NUL-terminated too */
  size_t len;
  const char *content_type;
} pr_dash_asset_t;

/* The embedded file `id` (a PR_DASH_* below PR_DASH_N_ASSETS). */
pr_dash_asset_t pr__dash_asset(pr_dash_asset_id_t id);

/* Headers every dashboard answer carries (a Content-Security-Policy that
 * allows this origin only, no sniffing, no referrer, no framing), as
 * {name, value} rows ending with {NULL, NULL}. */
extern const char *const pr__dash_headers[][2];
/* Cache-Control of the embedded files (revalidated: a new binary's page is
 * seen at once) and of the state (never stored). */
#define PR_DASH_CACHE_ASSET "no-cache"
#define PR_DASH_CACHE_STATE "no-store"

/* The machine, as the server sees it. */
typedef struct {
  const char *cpu_name;
  int physical_cores;
  const int *cpus; /* the CPUs instances are pinned to, in the order plans take them */
  int n_cpus;
  double uptime_s;
} pr_dash_machine_t;

/* A plain view of one model: what the encoder needs. Pointers may be NULL
 * (with their counts 0) for a model that is not ready. */
typedef struct {
  const char *name, *version, *state, *reason;
  int max_batch, queue_depth, queue_capacity;
  bool autoscale;
  const char *precision;               /* of the sessions: "fp32", "bf16" */
  const pr_plan_t *plan;               /* the active plan */
  const pr_sched_instance_t *measured; /* n_measured, in the plan's order */
  int n_measured;
  const int *cpus; /* the order plans' first_core indexes */
  int n_cpus;
  const pr_plan_t *prepared;
  const long long *prepared_bucket; /* each one's shape bucket size (0: none); may be NULL */
  int n_prepared, active;           /* active: index into prepared, -1 when none */
  const pr_profile_t *profile;
  const pr_history_point_t *series; /* one a second, oldest first, the last at now */
  int n_series;
  double p50_ms, p99_ms;               /* over the last PR_DASH_SUMMARY_S seconds; < 0: none */
  const pr_history_switch_t *switches; /* oldest first */
  int n_switches;
  uint64_t switches_total;
  /* its share of the cores in the joint plan (divided false: every core) */
  bool divided;
  int share_first, share_cores;
} pr_dash_model_t;

#define PR_DASH_SUMMARY_S 60

/* JSON of the machine and of one model; now_mono/now_wall (monotonic and
 * Unix seconds) date the series and switches. NULL when out of memory. */
json_t *pr__dash_machine_json(const pr_dash_machine_t *m);
json_t *pr__dash_model_json(const pr_dash_model_t *v, double now_mono, double now_wall);

/* The state's maker: the room it copies each model into (about 2 MB: every
 * prepared plan, the history) is allocated once and reused, and its lock
 * lets one state be made at a time, so that many clients polling at once
 * hold no more than that; a state made less than PR_DASH_REUSE_S ago is
 * answered again (a copy) instead of made anew, so that they cost no more
 * than a few states a second either. */
#define PR_DASH_REUSE_S 0.25
typedef struct pr_dash pr_dash_t;

/* NULL when out of memory. */
pr_dash_t *pr__dash_create(void);
/* pr__dash_destroy(NULL) is a no-op. */
void pr__dash_destroy(pr_dash_t *d);

/* The whole state as JSON text (malloc'd, the caller frees), or NULL when
 * out of memory. Thread-safe (callers take turns). */
char *pr__dash_state(pr_dash_t *d, pr_models_t *ms, const pr_dash_machine_t *machine);

#endif
