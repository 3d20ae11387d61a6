#include "server/repository.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/text.h"
#include "base/util.h"
#include "packrat/engine.h"

static bool valid_name(const char *s) {
  if (!*s || strlen(s) >= PR_NAME_MAX || s[0] == '.') return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '-' || *s == '.'))
      return false;
  return true;
}

static bool is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

typedef struct {
  long number;
  char dir[256]; /* the folder as named: "007" is version 7 */
} version_t;

/* The numeric version folders of model folder p that hold model.onnx, the
 * highest `max` of them, highest first. Returns how many. */
static int list_versions(const char *p, version_t *out, int max) {
  DIR *md = opendir(p);
  if (!md) return 0;
  int n = 0;
  struct dirent *v;
  while ((v = readdir(md))) {
    char *end;
    errno = 0;
    long ver = strtol(v->d_name, &end, 10);
    if (errno == ERANGE) continue; /* no version that large can be asked for */
    char mp[4096];
    snprintf(mp, sizeof mp, "%s/%s/model.onnx", p, v->d_name);
    if (*end || end == v->d_name || v->d_name[0] < '0' || v->d_name[0] > '9' || ver < 0 ||
        strlen(v->d_name) >= sizeof out->dir || !is_file(mp))
      continue;
    bool dup = false; /* "7" and "007": the first met stands */
    for (int i = 0; i < n; i++) dup |= out[i].number == ver;
    if (dup) continue;
    int at; /* full: the lowest kept makes room, if lower */
    if (n < max)
      at = n++;
    else if (max > 0 && out[max - 1].number < ver)
      at = max - 1;
    else
      continue;
    out[at].number = ver;
    snprintf(out[at].dir, sizeof out[at].dir, "%s", v->d_name);
    for (; at > 0 && out[at - 1].number < out[at].number; at--) { /* keep highest first */
      version_t t = out[at];
      out[at] = out[at - 1], out[at - 1] = t;
    }
  }
  closedir(md);
  return n;
}

/* The entry of version folder v of model folder p (item: the model name). */
static void folder_entry(const char *p, const char *item, const version_t *v, pr_repo_entry_t *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", item);
  snprintf(r->version, sizeof r->version, "%ld", v->number);
  snprintf(r->path, sizeof r->path, "%s/%s/model.onnx", p, v->dir);
  char cp[4096];
  struct stat cs;
  snprintf(cp, sizeof cp, "%s/config.json", p);
  /* anything there is the config: one that is not a file fails the load */
  if (lstat(cp, &cs) == 0) snprintf(r->config, sizeof r->config, "%s", cp);
}

/* NAME.onnx as version 1 of model NAME; false when item is not one. */
static bool file_entry(const char *p, const char *item, pr_repo_entry_t *r) {
  size_t len = strlen(item);
  memset(r, 0, sizeof *r);
  if (len <= 5 || strcmp(item + len - 5, ".onnx") || !is_file(p)) return false;
  snprintf(r->name, sizeof r->name, "%.*s", (int)(len - 5), item);
  if (len - 5 >= sizeof r->name || !valid_name(r->name)) return false;
  snprintf(r->version, sizeof r->version, "1");
  snprintf(r->path, sizeof r->path, "%s", p);
  return true;
}

/* Folder p, named as model `item`, holds no version: r says what it holds
 * instead (a numeric folder without model.onnx, or none numeric). */
static void problem_entry(const char *p, const char *item, pr_repo_entry_t *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", item);
  snprintf(r->version, sizeof r->version, "1");
  char numeric[64] = "";
  DIR *d = opendir(p);
  struct dirent *e;
  while (d && !numeric[0] && (e = readdir(d))) {
    size_t digits = strspn(e->d_name, "0123456789");
    if (digits > 0 && !e->d_name[digits] && digits < sizeof numeric)
      snprintf(numeric, sizeof numeric, "%s", e->d_name);
  }
  if (d) closedir(d);
  if (numeric[0])
    snprintf(r->problem, sizeof r->problem,
             "version folder %s/%s has no model.onnx file (expected " PR_REPO_LAYOUT ")", item,
             numeric);
  else
    snprintf(r->problem, sizeof r->problem,
             "folder %s has no numeric version folder (expected " PR_REPO_LAYOUT ")", item);
}

static bool is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The entry of directory item `item` of dir (a model folder, at its highest
 * version, or NAME.onnx; a folder named as a model that holds none, with
 * its problem); false when it is neither. */
static bool entry_for(const char *dir, const char *item, pr_repo_entry_t *r) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, item);
  if (file_entry(p, item, r)) return true;
  if (!valid_name(item) || !is_dir(p)) return false;
  version_t best;
  if (list_versions(p, &best, 1) < 1)
    problem_entry(p, item, r);
  else
    folder_entry(p, item, &best, r);
  return true;
}

int pr__repo_scan(const char *dir, pr_repo_entry_t *out, int max, int *total) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0, all = 0;
  struct dirent *e;
  pr_repo_entry_t tmp;
  while ((e = readdir(d))) {
    pr_repo_entry_t *r = n < max ? &out[n] : &tmp;
    if (!entry_for(dir, e->d_name, r)) continue;
    /* NAME/ and NAME.onnx are one model, NAME (the folder wins, unless it
     * is not a model's layout) */
    int same = -1;
    for (int i = 0; i < n && same < 0; i++)
      if (r != &out[i] && !strcmp(out[i].name, r->name)) same = i;
    if (same >= 0) {
      bool folder = strcmp(e->d_name, r->name) == 0;
      if (folder ? !r->problem[0] : out[same].problem[0] != 0) out[same] = *r;
      continue;
    }
    all++;
    if (n < max) n++;
  }
  closedir(d);
  if (total) *total = all;
  return n;
}

int pr__repo_find(const char *dir, const char *name, pr_repo_entry_t *out) {
  char item[PR_NAME_MAX + 8];
  if (!valid_name(name)) return -1;
  /* "m.onnx" names the model "m", not a model of its own */
  if (entry_for(dir, name, out) && !strcmp(out->name, name) && !out->problem[0]) return 0;
  pr_repo_entry_t folder = *out;
  bool problem = !strcmp(folder.name, name) && folder.problem[0];
  snprintf(item, sizeof item, "%s.onnx", name);
  if (entry_for(dir, item, out) && !strcmp(out->name, name)) return 0;
  if (problem) *out = folder; /* NAME/ holds no model and there is no NAME.onnx */
  return problem ? 0 : -1;
}

static bool policy_takes(const pr_version_policy_t *policy, long number, int rank) {
  if (policy->kind == PR_VERSIONS_ALL) return true;
  if (policy->kind == PR_VERSIONS_LATEST) return rank < (policy->latest > 0 ? policy->latest : 1);
  for (int i = 0; i < policy->n_specific; i++)
    if (policy->specific[i] == number) return true;
  return false;
}

int pr__repo_versions(const char *dir, const char *name, const pr_version_policy_t *policy,
                      pr_repo_entry_t *out, int max) {
  if (!valid_name(name)) return -1;
  if (max > PR_REPO_MAX_VERSIONS) max = PR_REPO_MAX_VERSIONS;
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  version_t vers[PR_REPO_MAX_VERSIONS * 4]; /* SPECIFIC may name old ones */
  int n = list_versions(p, vers, (int)(sizeof vers / sizeof vers[0]));
  if (n == 0) { /* NAME.onnx: version 1 */
    if (pr__repo_find(dir, name, &out[0]) || out[0].problem[0]) return -1;
    return max > 0 && policy_takes(policy, 1, 0) ? 1 : 0;
  }
  int k = 0;
  for (int i = 0; i < n && k < max; i++)
    if (policy_takes(policy, vers[i].number, i)) folder_entry(p, name, &vers[i], &out[k++]);
  return k;
}

/* Error messages quote outside text (keys, paths) and may be cut to the
 * caller's buffer; the server sends them as JSON, which must be UTF-8: the
 * message is cut on a character boundary and bytes that are not UTF-8 become
 * '?' (pr__utf8_sanitize). */
static void set_error(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(char *err, size_t err_len, const char *fmt, ...) {
  char raw[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  if (err_len) pr__utf8_sanitize(raw, err, err_len);
}

/* ---- config.json: one setter per setting ---- */

/* A setter stores setting `key` = v into c; false with a message (without
 * the origin) in msg when v is not valid for it. */
typedef bool (*setting_fn)(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len);

/* An integer in min..10^8 (the four limits); false with a message. */
static bool int_setting(const char *key, json_t *v, long long min, long long *x, char *msg,
                        size_t len) {
  if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > 100000000) {
    snprintf(msg, len, "'%s' must be a positive integer", key);
    return false;
  }
  *x = json_integer_value(v);
  return true;
}

static bool set_max_batch(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  long long x;
  if (!int_setting(key, v, 1, &x, msg, len)) return false;
  if (x > 4096) {
    snprintf(msg, len, "max_batch_size at most 4096");
    return false;
  }
  c->max_batch = (int)x;
  return true;
}

static bool set_timeout(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  long long x;
  if (!int_setting(key, v, 1, &x, msg, len)) return false;
  c->request_timeout_s = (double)x / 1000.0;
  return true;
}

static bool set_plan(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  if (!json_is_string(v) || strlen(json_string_value(v)) >= sizeof c->plan) {
    snprintf(msg, len, "'plan' must be \"auto\" or THREADSxBATCH,...");
    return false;
  }
  snprintf(c->plan, sizeof c->plan, "%s", json_string_value(v));
  return true;
}

static bool set_autoscale(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  if (!json_is_boolean(v)) {
    snprintf(msg, len, "'autoscale' must be true or false");
    return false;
  }
  c->autoscale = json_is_true(v);
  return true;
}

static bool set_estimator(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  const char *e = json_string_value(v);
  if (!e || (strcmp(e, "rate") && strcmp(e, "paper"))) {
    snprintf(msg, len, "'estimator' must be \"rate\" or \"paper\"");
    return false;
  }
  c->estimator = !strcmp(e, "rate");
  return true;
}

static bool set_min_batch(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096) {
    snprintf(msg, len, "'min_batch_size' must be 1..4096");
    return false;
  }
  c->min_batch = (int)json_integer_value(v);
  return true;
}

/* A size of a dynamic dim: an integer in 1..PR_DIM_VALUE_MAX. */
static bool dim_size(json_t *v, long long *x) {
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > PR_DIM_VALUE_MAX)
    return false;
  *x = json_integer_value(v);
  return true;
}

/* Dim i of c as a range: {"min": A, "max": B[, "profile_at": P]}. */
static bool dim_range(pr_model_config_t *c, int i, const char *dn, json_t *dv, char *msg,
                      size_t len) {
  long long lo = 1, hi = 0, at = 0;
  const char *k;
  json_t *x;
  json_object_foreach(dv, k, x) {
    long long *to = !strcmp(k, "min")          ? &lo
                    : !strcmp(k, "max")        ? &hi
                    : !strcmp(k, "profile_at") ? &at
                                               : NULL;
    if (!to) {
      snprintf(msg, len, "dims: '%s': unknown key '%s' (known: min, max, profile_at)", dn, k);
      return false;
    }
    if (!dim_size(x, to)) {
      snprintf(msg, len, "dims: '%s': '%s' must be an integer in 1..%lld", dn, k, PR_DIM_VALUE_MAX);
      return false;
    }
  }
  if (!hi || lo > hi || (at && (at < lo || at > hi))) {
    snprintf(msg, len,
             "dims: '%s': a range needs 'max' (and 'min' at most 'max', 'profile_at' between "
             "them): min %lld, max %lld",
             dn, lo, hi);
    return false;
  }
  c->dim_kind[i] = PR_DIM_RANGE;
  c->dim_min[i] = lo, c->dim_max[i] = hi;
  c->dim_values[i] = at ? at : hi;
  return true;
}

/* Dim i of c as a list of sizes, kept ascending. */
static bool dim_list(pr_model_config_t *c, int i, const char *dn, json_t *dv, char *msg,
                     size_t len) {
  size_t n = json_array_size(dv), j;
  json_t *x;
  if (n < 1 || n > PR_DIM_LIST_MAX) {
    snprintf(msg, len, "dims: '%s': a list holds 1 to %d sizes, not %zu", dn, PR_DIM_LIST_MAX, n);
    return false;
  }
  long long *l = c->dim_list[i];
  json_array_foreach(dv, j, x) {
    if (!dim_size(x, &l[j])) {
      snprintf(msg, len, "dims: '%s': sizes must be integers in 1..%lld", dn, PR_DIM_VALUE_MAX);
      return false;
    }
    for (size_t at = j; at > 0 && l[at - 1] >= l[at]; at--) {
      if (l[at - 1] == l[at]) {
        snprintf(msg, len, "dims: '%s': size %lld listed twice", dn, l[at]);
        return false;
      }
      long long t = l[at];
      l[at] = l[at - 1], l[at - 1] = t;
    }
  }
  c->dim_kind[i] = PR_DIM_LIST;
  c->dim_n_list[i] = (int)n;
  c->dim_min[i] = l[0], c->dim_max[i] = l[n - 1];
  c->dim_values[i] = l[n - 1];
  return true;
}

/* {"NAME": SIZE | {"min": A, "max": B} | [SIZES], ...} */
static bool set_dims(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  if (!json_is_object(v)) {
    snprintf(msg, len, "'dims' must map symbolic dimension names to sizes");
    return false;
  }
  const char *dn;
  json_t *dv;
  json_object_foreach(v, dn, dv) {
    if (c->n_dims == PR_DIMS_MAX || !*dn || strlen(dn) >= 64) {
      snprintf(msg, len, "dims: at most %d names of 1 to 63 bytes", PR_DIMS_MAX);
      return false;
    }
    int i = c->n_dims;
    memset(c->dim_names[i], 0, sizeof c->dim_names[i]);
    snprintf(c->dim_names[i], 64, "%s", dn);
    c->dim_kind[i] = PR_DIM_FIXED;
    bool ok;
    if (json_is_object(dv))
      ok = dim_range(c, i, dn, dv, msg, len);
    else if (json_is_array(dv))
      ok = dim_list(c, i, dn, dv, msg, len);
    else if ((ok = json_is_integer(dv) && json_integer_value(dv) >= 1))
      c->dim_values[i] = json_integer_value(dv);
    else
      snprintf(msg, len,
               "dims: '%s' must be a positive size, a range {\"min\": A, \"max\": B} or a list "
               "[A, B, ...]",
               dn);
    if (!ok) return false;
    c->n_dims++;
  }
  return true;
}

/* "fp32" or "bf16": the arithmetic of the model's sessions (bf16 needs a CPU
 * with native bf16: the model then fails to load elsewhere, with the reason). */
static bool set_precision(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  int p = json_is_string(v) ? pr_precision_parse(json_string_value(v)) : -1;
  if (p < 0) {
    snprintf(msg, len, "'%s' must be \"fp32\" or \"bf16\"", key);
    return false;
  }
  c->precision = p;
  return true;
}

/* {"max_sessions": N, "max_mb": M}: the per-instance cache of sessions for
 * request shapes other than the prepared one. */
static bool set_cache(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  const char *k;
  json_t *x;
  if (!json_is_object(v)) {
    snprintf(msg, len, "'%s' must be {\"max_sessions\": N, \"max_mb\": M}", key);
    return false;
  }
  json_object_foreach(v, k, x) {
    bool sessions = !strcmp(k, "max_sessions"), mb = !strcmp(k, "max_mb");
    long long n = json_is_integer(x) ? json_integer_value(x) : 0;
    if ((!sessions && !mb) || n < 1 || (sessions && n > PR_CACHE_SESSIONS_MAX) ||
        (mb && n > (1LL << 20))) {
      snprintf(msg, len, "'%s': max_sessions must be 1..%d and max_mb 1..%lld", key,
               PR_CACHE_SESSIONS_MAX, 1LL << 20);
      return false;
    }
    if (sessions)
      c->cache_sessions = (int)n;
    else
      c->cache_bytes = n << 20;
  }
  return true;
}

static bool set_levels(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  long long x;
  if (!json_is_integer(v) || (x = json_integer_value(v)) < 1 || x > 1000) {
    snprintf(msg, len, "'%s' must be 1..1000", key);
    return false;
  }
  if (!strcmp(key, "priority_levels"))
    c->priority_levels = (int)x;
  else
    c->default_priority = (int)x;
  return true;
}

/* Triton's form: {"latest": {"num_versions": N}}, {"all": {}} or
 * {"specific": {"versions": [V, ...]}}. */
static bool set_policy(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  pr_version_policy_t *p = &c->policy;
  memset(p, 0, sizeof *p);
  json_t *latest = json_object_get(v, "latest"), *specific = json_object_get(v, "specific");
  json_t *n = json_object_get(latest, "num_versions"),
         *list = json_object_get(specific, "versions");
  bool one = json_object_size(v) == 1;
  if (one && json_is_object(json_object_get(v, "all"))) {
    p->kind = PR_VERSIONS_ALL;
    return true;
  }
  if (one && json_object_size(latest) == 1 && json_is_integer(n) && json_integer_value(n) >= 1 &&
      json_integer_value(n) <= PR_REPO_MAX_VERSIONS) {
    p->kind = PR_VERSIONS_LATEST;
    p->latest = (int)json_integer_value(n);
    return true;
  }
  size_t i, count = json_array_size(list);
  json_t *x;
  if (one && json_object_size(specific) == 1 && count >= 1 && count <= PR_REPO_MAX_VERSIONS) {
    p->kind = PR_VERSIONS_SPECIFIC;
    json_array_foreach(list, i, x) {
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > LONG_MAX)
        break;
      p->specific[p->n_specific++] = (long)json_integer_value(x);
    }
    if (p->n_specific == (int)count) return true;
  }
  snprintf(msg, len,
           "'%s' must be {\"latest\": {\"num_versions\": 1..%d}}, {\"all\": {}} or "
           "{\"specific\": {\"versions\": [up to %d non-negative integers]}}",
           key, PR_REPO_MAX_VERSIONS, PR_REPO_MAX_VERSIONS);
  memset(p, 0, sizeof *p);
  return false;
}

/* {"weight": W, "min": N, "max": N, "latency_target_ms": L} or
 * {"share": true}: the model's part in the joint plan. */
static bool set_cores(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  const char *k;
  json_t *x;
  bool ok = json_is_object(v) && json_object_size(v) > 0;
  json_object_foreach(v, k, x) {
    double d = json_is_number(x) ? json_number_value(x) : -1;
    long long i = json_is_integer(x) ? json_integer_value(x) : -1;
    if (!strcmp(k, "weight") && d > 0 && d <= 1000)
      c->core_weight = d;
    else if (!strcmp(k, "min") && i >= 1 && i <= 65536)
      c->min_cores = (int)i;
    else if (!strcmp(k, "max") && i >= 1 && i <= 65536)
      c->max_cores = (int)i;
    else if (!strcmp(k, "latency_target_ms") && d > 0 && d <= 1e7)
      c->latency_target_ms = d;
    else if (!strcmp(k, "share") && json_is_boolean(x))
      c->share_cores = json_is_true(x);
    else
      ok = false;
  }
  if (ok && c->min_cores && c->max_cores && c->min_cores > c->max_cores) {
    snprintf(msg, len, "'%s': min %d above max %d", key, c->min_cores, c->max_cores);
    return false;
  }
  if (ok && c->share_cores && json_object_size(v) > 1) {
    snprintf(msg, len,
             "'%s': \"share\": true plans the model over every core; it takes no "
             "weight, bounds or target",
             key);
    return false;
  }
  if (!ok)
    snprintf(msg, len,
             "'%s' must be {\"weight\": 0 < W <= 1000, \"min\": 1..65536, \"max\": 1..65536, "
             "\"latency_target_ms\": 0 < L <= 1e7} (any of them) or {\"share\": true}",
             key);
  return ok;
}

/* A setting is a setter, or (set NULL) an int field of the config at `off`
 * that takes min..10^8. */
static const struct {
  const char *key;
  setting_fn set;
  long long min;
  size_t off;
} settings[] = {
    {"max_batch_size", .set = set_max_batch},
    {"max_queue_delay_us", NULL, 0, offsetof(pr_model_config_t, max_queue_delay_us)},
    {"queue_capacity", NULL, 1, offsetof(pr_model_config_t, queue_capacity)},
    {"request_timeout_ms", .set = set_timeout},
    {"plan", .set = set_plan},
    {"autoscale", .set = set_autoscale},
    {"estimator", .set = set_estimator},
    {"min_batch_size", .set = set_min_batch},
    {"dims", .set = set_dims},
    {"session_cache", .set = set_cache},
    {"precision", .set = set_precision},
    {"priority_levels", .set = set_levels},
    {"default_priority_level", .set = set_levels},
    {"version_policy", .set = set_policy},
    {"cores", .set = set_cores},
};

/* Setting key = v into c; false with a message in msg. */
static bool apply_setting(pr_model_config_t *c, const char *key, json_t *v, char *msg, size_t len) {
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
    if (strcmp(key, settings[i].key)) continue;
    if (settings[i].set) return settings[i].set(c, key, v, msg, len);
    long long x;
    if (!int_setting(key, v, settings[i].min, &x, msg, len)) return false;
    *(int *)((char *)c + settings[i].off) = (int)x;
    return true;
  }
  size_t off = (size_t)snprintf(msg, len, "unknown setting '%s' (known: ", key);
  for (size_t i = 0; i < sizeof settings / sizeof settings[0] && off < len; i++)
    off += (size_t)snprintf(msg + off, len - off, "%s%s", i ? ", " : "", settings[i].key);
  if (off < len) snprintf(msg + off, len - off, ")");
  return false;
}

int pr__repo_parse_config(const char *text, size_t len, const char *origin, pr_model_config_t *c,
                          char *err, size_t err_len) {
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    set_error(err, err_len, "%s: %s (line %d)", origin, je.text, je.line);
    return -1;
  }
  char msg[1024] = "must be a JSON object";
  bool ok = json_is_object(root);
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (!ok || !(ok = apply_setting(c, key, v, msg, sizeof msg))) break;
  }
  if (ok && c->min_batch > c->max_batch) {
    snprintf(msg, sizeof msg, "min_batch_size above max_batch_size");
    ok = false;
  }
  if (ok && c->default_priority > 0 && c->default_priority > c->priority_levels) {
    snprintf(msg, sizeof msg, "default_priority_level above priority_levels");
    ok = false;
  }
  if (!ok) set_error(err, err_len, "%s: %s", origin, msg);
  json_decref(root);
  return ok ? 0 : -1;
}

int pr__repo_read_config(const char *path, pr_model_config_t *c, char *err, size_t err_len) {
  void *text;
  size_t len;
  if (!is_file(path)) { /* a folder or a FIFO (which would block the read) */
    set_error(err, err_len, "%s: not a regular file", path);
    return -1;
  }
  if (pr__read_file(path, &text, &len, PR_REPO_CONFIG_MAX)) {
    set_error(err, err_len, "%s: %s", path, pr__file_error(errno));
    return -1;
  }
  int rc = pr__repo_parse_config(text, len, path, c, err, err_len);
  free(text);
  return rc;
}
