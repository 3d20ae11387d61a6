/* Model repository: which models a folder holds and their configuration. */
#ifndef PR_SERVER_REPOSITORY_H
#define PR_SERVER_REPOSITORY_H

#include <stdbool.h>
#include <stddef.h>

#define PR_NAME_MAX 128

typedef struct {
  char name[PR_NAME_MAX];
  char version[32];
  char path[4096];   /* model.onnx */
  char config[4096]; /* config.json, "" when absent */
  /* not "": a folder named as a model whose layout is not one (no numeric
   * version folder, or none holding model.onnx); path is then "" and the
   * text says what was found and what is expected */
  char problem[512];
} pr_repo_entry_t;

/* The layout a model folder must have, for messages. */
#define PR_REPO_LAYOUT "<repository>/<model>/<version>/model.onnx (version a number, e.g. 1)"

/* Lists DIR/<model>/<version>/model.onnx (the highest numeric version of
 * each model) and DIR/<model>.onnx (version 1), and the folders named as
 * models that are not one (entries with `problem` set, so that they can
 * be reported). Returns the count stored (at most max) or -1 when DIR
 * cannot be read; *total (optional): how many DIR holds, beyond max too.
 * Names are validated: [A-Za-z0-9_.-]. */
int pr__repo_scan(const char *dir, pr_repo_entry_t *out, int max, int *total);
/* The entry of one model by name (a folder or NAME.onnx; a folder that is
 * not a model's layout too, with `problem` set); 0, or -1 when DIR has no
 * such model (or the name is not a valid model name). */
int pr__repo_find(const char *dir, const char *name, pr_repo_entry_t *out);

#define PR_REPO_MAX_VERSIONS 16

typedef struct {
  enum { PR_VERSIONS_LATEST = 0, PR_VERSIONS_ALL, PR_VERSIONS_SPECIFIC } kind;
  int latest;                          /* LATEST: how many (default 1) */
  long specific[PR_REPO_MAX_VERSIONS]; /* SPECIFIC: the versions */
  int n_specific;
} pr_version_policy_t;

/* The versions of model `name` that policy selects, highest first, into out
 * (at most max, PR_REPO_MAX_VERSIONS at most); ALL beyond max keeps the
 * highest. Returns how many (0: the policy selects none of those there), or
 * -1 when DIR has no such model (or its folder is not a model's layout).
 * NAME.onnx has version 1 only. */
int pr__repo_versions(const char *dir, const char *name, const pr_version_policy_t *policy,
                      pr_repo_entry_t *out, int max);

#define PR_DIMS_MAX 8
#define PR_DIM_LIST_MAX 16
#define PR_DIM_VALUE_MAX (1LL << 24) /* largest size a dynamic dim may take */
#define PR_CACHE_SESSIONS_MAX 256
#define PR_CACHE_SESSIONS_DEFAULT 8
#define PR_CACHE_MB_DEFAULT 1024LL
typedef enum { PR_DIM_FIXED = 0, PR_DIM_RANGE, PR_DIM_LIST } pr_dim_kind_t;

/* Per-model settings (config.json), each defaulting to the server's. */
typedef struct {
  int max_batch;
  int precision; /* PR_PRECISION_FP32 (default) or PR_PRECISION_BF16 */
  int max_queue_delay_us;
  int queue_capacity;
  double request_timeout_s;
  char plan[1024]; /* "auto" or THREADSxBATCH,... */
  bool autoscale;  /* with "auto": follow the load between planned batch sizes */
  int estimator;   /* 0 paper rule, 1 arrival-rate rule */
  int min_batch;   /* smallest batch size planned for (autoscale) */
  /* named symbolic dims other than the batch: fixed ({"sequence": 128}),
   * a range ({"min": 1, "max": 512}) or a list ([64, 128]); dim_values is
   * the value sessions are planned and prepared at (fixed: the value;
   * range: profile_at, default the max; list: the largest) */
  int n_dims;
  char dim_names[PR_DIMS_MAX][64];
  long long dim_values[PR_DIMS_MAX];
  pr_dim_kind_t dim_kind[PR_DIMS_MAX];
  long long dim_min[PR_DIMS_MAX], dim_max[PR_DIMS_MAX]; /* range; a list's extremes */
  long long dim_list[PR_DIMS_MAX][PR_DIM_LIST_MAX];     /* list, ascending, distinct */
  int dim_n_list[PR_DIMS_MAX];
  /* per instance: sessions of shapes other than the prepared one, at most
   * this many and this many bytes (session_cache: max_sessions, max_mb) */
  int cache_sessions;
  long long cache_bytes;
  int priority_levels;  /* queue levels, 1 first */
  int default_priority; /* the level of a request that names none */
  /* which versions of the model folder are served: the latest n, all, or
   * the listed ones (Triton's version_policy) */
  pr_version_policy_t policy;
  /* its share of the server's cores ("cores": see pr_plan_joint): the
   * joint plan's weight (0: 1), bounds (0: none), latency target (0: its
   * best alone); share_cores: planned over every core, outside the
   * division (its instances and the others' then slow each other) */
  double core_weight;
  int min_cores, max_cores;
  double latency_target_ms;
  bool share_cores;
} pr_model_config_t;

/* Parses the config.json text (len bytes, no NUL needed) into c, which holds
 * the defaults; only the settings present change. Returns 0, or -1 with a
 * message in err that starts with origin (a path or "request"); c may be
 * partly updated on failure. */
int pr__repo_parse_config(const char *text, size_t len, const char *origin, pr_model_config_t *c,
                          char *err, size_t err_len);

/* Reads path (at most PR_REPO_CONFIG_MAX bytes) and parses it as above. */
#define PR_REPO_CONFIG_MAX (1 << 20)
int pr__repo_read_config(const char *path, pr_model_config_t *c, char *err, size_t err_len);

#endif
