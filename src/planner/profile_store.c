/* Profiles on disk: the JSON file (pr_profile_save / pr_profile_load) and
 * the profile cache (pr_profile_cache_path / pr_profile_cache_save).
 *
 * Notes on the design:
 * - A file is replaced, never rewritten in place: the JSON goes to a
 *   temporary file (mkstemp) in the destination's folder and is renamed over
 *   it, so a reader sees the old file or the whole new one, and a failure
 *   leaves nothing behind.
 * - The cache never fails the work that produced the profile: every cache
 *   problem is a warning in the log. A cache path that cannot be made is an
 *   empty string, never a truncated or stale buffer that might name another
 *   file (the server once wrote a profile over a model's config.json so).
 * - Only good profiles (n_suspicious == 0) are cached, and a cached profile
 *   that turns out suspicious on load does not match (pr_profile_matches),
 *   so a profile measured on a busy machine is measured again next time. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "packrat/profiler.h"

static json_t *profile_json(const pr_profile_t *p) {
  json_t *pts = json_array();
  for (int i = 0; pts && i < p->n_points; i++) {
    const pr_profile_point_t *q = &p->points[i];
    json_array_append_new(
        pts, json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:i}", "threads", q->threads, "batch",
                       q->batch, "latency_ms", q->latency_ms, "p90_ms", q->p90_ms, "isolated_ms",
                       q->isolated_ms, "runs", q->runs, "spread", q->spread, "remeasured",
                       q->remeasured));
  }
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:f, s:i, s:o}", "model", p->model,
                   "model_sha256", p->model_sha256, "cpu", p->cpu, "isa", p->isa, "precision",
                   p->precision[0] ? p->precision : "fp32", "cores", p->cores, "version",
                   "packrat " PR_VERSION, "tolerance",
                   p->tolerance > 0 ? p->tolerance : PR_PROFILE_TOLERANCE, "suspicious",
                   p->n_suspicious, "points", pts);
}

pr_status_t pr_profile_save(const pr_profile_t *p, const char *path, char *err, size_t err_len) {
  if (!path || !*path) {
    pr__errf(err, err_len, "no file to save the profile to");
    return PR_ERR_INVALID;
  }
  char tmp[4096];
  int w = snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
  if (w < 0 || (size_t)w >= sizeof tmp) {
    pr__errf(err, err_len, "cannot write %.200s...: path too long", path);
    return PR_ERR_INVALID;
  }
  json_t *root = profile_json(p);
  if (!root) {
    pr__errf(err, err_len, "cannot write %s: out of memory", path);
    return PR_ERR_NOMEM;
  }
  int fd = mkstemp(tmp), e = 0;
  if (fd < 0) {
    e = errno;
    json_decref(root);
    pr__errf(err, err_len, "cannot write %s: %s", path, strerror(e));
    return PR_ERR_IO;
  }
  fchmod(fd, 0644); /* mkstemp's 0600 would hide the profile from other users */
  FILE *f = fdopen(fd, "w");
  if (!f) close(fd);
  errno = 0;
  if (!f || json_dumpf(root, f, JSON_INDENT(1)) || fflush(f) || fsync(fileno(f)))
    e = errno ? errno : EIO;
  if (f && fclose(f) && !e) e = errno ? errno : EIO;
  json_decref(root);
  if (!e && rename(tmp, path)) e = errno;
  if (e) {
    unlink(tmp);
    pr__errf(err, err_len, "cannot write %s: %s", path, strerror(e));
    return PR_ERR_IO;
  }
  return PR_OK;
}

pr_status_t pr_profile_load(const char *path, pr_profile_t *p, char *err, size_t err_len) {
  memset(p, 0, sizeof *p);
  json_error_t je;
  /* a FIFO or device at the cache's path is refused, never waited on */
  FILE *f = pr__fopen_regular(path);
  if (!f) {
    int e = errno;
    pr__errf(err, err_len, "%s: %s", path, pr__file_error(e));
    return e == EINVAL ? PR_ERR_INVALID : PR_ERR_IO;
  }
  json_t *root = json_loadf(f, 0, &je);
  fclose(f);
  if (!root) {
    pr__errf(err, err_len, "%s: %s (line %d)", path, je.text, je.line);
    return PR_ERR_INVALID;
  }
  pr_status_t st = PR_ERR_INVALID;
  const char *model = "", *sha = "", *cpu = "", *isa = "", *version = "", *prec = "fp32";
  json_t *pts = NULL;
  int cores = 0, suspicious = 0;
  double tolerance = 0;
  if (json_unpack_ex(root, &je, 0, "{s?s, s?s, s?s, s?s, s?s, s:i, s?s, s?F, s?i, s:o}", "model",
                     &model, "model_sha256", &sha, "cpu", &cpu, "isa", &isa, "precision", &prec,
                     "cores", &cores, "version", &version, "tolerance", &tolerance, "suspicious",
                     &suspicious, "points", &pts) ||
      !json_is_array(pts) || cores < 1 || json_array_size(pts) > 10000000 ||
      !(tolerance >= 0 && tolerance < 1)) {
    pr__errf(err, err_len, "%s: not a packrat profile (needs cores and points)", path);
    goto out;
  }
  snprintf(p->model, sizeof p->model, "%s", model);
  snprintf(p->model_sha256, sizeof p->model_sha256, "%s", sha);
  snprintf(p->cpu, sizeof p->cpu, "%s", cpu);
  snprintf(p->isa, sizeof p->isa, "%s", isa); /* absent (an older file): matches no ISA */
  snprintf(p->precision, sizeof p->precision, "%s", prec);
  p->cores = cores;
  p->tolerance = tolerance > 0 ? tolerance : PR_PROFILE_TOLERANCE;
  p->points = calloc(json_array_size(pts) + 1, sizeof *p->points);
  if (!p->points) {
    st = PR_ERR_NOMEM;
    goto out;
  }
  size_t i;
  json_t *it;
  json_array_foreach(pts, i, it) {
    int t = 0, b = 0, runs = 0, remeasured = 0;
    double lat = -1, p90 = -1, iso = -1, spread = 0;
    if (json_unpack_ex(it, &je, 0, "{s:i, s:i, s:F, s?F, s?F, s?i, s?F, s?i}", "threads", &t,
                       "batch", &b, "latency_ms", &lat, "p90_ms", &p90, "isolated_ms", &iso, "runs",
                       &runs, "spread", &spread, "remeasured", &remeasured) ||
        t < 1 || b < 1 || !(lat >= 0) || !isfinite(lat) || runs < 0 || !(spread >= 0) ||
        !isfinite(spread) || remeasured < -1 || remeasured > 1) {
      pr__errf(err, err_len,
               "%s: point %zu needs threads >= 1, batch >= 1, latency_ms >= 0 (and runs >= 0, "
               "spread >= 0, remeasured -1..1 when given)",
               path, i);
      pr_profile_free(p);
      goto out;
    }
    p->points[p->n_points++] = (pr_profile_point_t){.threads = t,
                                                    .batch = b,
                                                    .latency_ms = lat,
                                                    .p90_ms = p90 < 0 ? lat : p90,
                                                    .isolated_ms = iso < 0 ? lat : iso,
                                                    .runs = runs,
                                                    .spread = spread,
                                                    .remeasured = remeasured};
  }
  /* the file's own count is for readers; the verdict is recomputed */
  p->n_suspicious = pr_profile_assess(p, p->tolerance, NULL, 0);
  st = PR_OK;
out:
  json_decref(root);
  return st;
}

/* The cache file's path, or a message in why and path "". */
static pr_status_t cache_file(const char *sha256, const char *cpu, const char *isa, int cores,
                              const pr_session_options_t *base, char *path, size_t len, char *why,
                              size_t why_len) {
  if (path && len) path[0] = 0;
  if (!path || !len || !sha256 || !cpu) {
    pr__errf(why, why_len, "no buffer for the cache path");
    return PR_ERR_INVALID;
  }
  /* the file name holds the hash: it must be one, so that it names nothing else */
  for (int i = 0; i < 16; i++)
    if (!sha256[i] || !strchr("0123456789abcdef", sha256[i])) {
      pr__errf(why, why_len, "no model hash to name the cache file by");
      return PR_ERR_INVALID;
    }
  char dir[3072];
  const char *env = getenv("PACKRAT_CACHE"), *xdg = getenv("XDG_CACHE_HOME"),
             *home = getenv("HOME");
  int w;
  if (env && *env)
    w = snprintf(dir, sizeof dir, "%s", env);
  else if (xdg && *xdg)
    w = snprintf(dir, sizeof dir, "%s/packrat", xdg);
  else
    w = snprintf(dir, sizeof dir, "%s/.cache/packrat", home && *home ? home : "/tmp");
  if (w < 0 || (size_t)w >= sizeof dir) {
    pr__errf(why, why_len, "the cache folder's name is too long");
    return PR_ERR_INVALID;
  }
  /* mkdir -p */
  for (char *s = dir + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(dir, 0755);
      *s = '/';
    }
  struct stat sb;
  if (mkdir(dir, 0755) && errno != EEXIST) {
    pr__errf(why, why_len, "cannot create the cache folder %s: %s", dir, strerror(errno));
    return PR_ERR_IO;
  }
  if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
    pr__errf(why, why_len, "the cache folder %s is not a folder", dir);
    return PR_ERR_IO;
  }
  char cpu_hash[65];
  char key[1024];
  size_t off = (size_t)snprintf(key, sizeof key, "%s|%s|packrat %s|corun", cpu, isa, PR_VERSION);
  /* bf16 sessions are another workload (fp32 keys stay as they were) */
  if (base && base->precision != PR_PRECISION_FP32 && pr_precision_name(base->precision))
    off += (size_t)snprintf(key + off, sizeof key - off, "|precision=%s",
                            pr_precision_name(base->precision));
  /* a model profiled with other symbolic dim values is another workload */
  for (int i = 0; base && i < base->n_dims && off < sizeof key; i++)
    off += (size_t)snprintf(key + off, sizeof key - off, "|%s=%lld", base->dim_names[i],
                            (long long)base->dim_values[i]);
  pr__sha256_hex(key, strlen(key), cpu_hash);
  w = snprintf(path, len, "%s/profile-%.16s-%dc-%.8s.json", dir, sha256, cores, cpu_hash);
  if (w < 0 || (size_t)w >= len) {
    path[0] = 0;
    pr__errf(why, why_len, "the cache path does not fit in %zu bytes", len);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

pr_status_t pr_profile_cache_path(const char *sha256, const char *cpu, int cores,
                                  const pr_session_options_t *base, char *path, size_t len) {
  return cache_file(sha256, cpu, pr_engine_isa(), cores, base, path, len, NULL, 0);
}

pr_status_t pr_profile_cache_save(const pr_profile_t *p, const pr_session_options_t *base,
                                  char *path, size_t len) {
  if (path && len) path[0] = 0;
  if (p->n_suspicious) {
    pr__log(PR_LOG_INFO, "profile of %s: %d suspicious points, not cached", p->model,
            p->n_suspicious);
    return PR_ERR_INVALID;
  }
  char file[4096], why[512];
  pr_status_t st = cache_file(p->model_sha256, p->cpu, p->isa, p->cores, base, file, sizeof file,
                              why, sizeof why);
  if (!st) st = pr_profile_save(p, file, why, sizeof why);
  if (st) {
    pr__log(PR_LOG_WARN, "profile of %s not cached: %s", p->model, why);
    return st;
  }
  if (path && len && strlen(file) < len) memcpy(path, file, strlen(file) + 1);
  return PR_OK;
}

int pr_profile_matches(const pr_profile_t *p, const char *sha256, const char *cpu, int cores,
                       int max_batch) {
  if (p->n_suspicious || strcmp(p->model_sha256, sha256) || strcmp(p->cpu, cpu) ||
      strcmp(p->isa, pr_engine_isa()) || p->cores != cores)
    return 0;
  int grid[64];
  int n = pr_profile_grid(max_batch, NULL, 0, grid, 64);
  for (int t = 1; t <= cores; t++)
    for (int g = 0; g < n; g++)
      if (pr_profile_latency(p, t, grid[g]) < 0) return 0;
  return 1;
}
