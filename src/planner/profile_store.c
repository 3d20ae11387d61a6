/* Profiles on disk: the JSON file (pr_profile_save / pr_profile_load) and
 * the profile cache (pr_profile_cache_path). */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/util.h"
#include "packrat/profiler.h"

pr_status_t pr_profile_save(const pr_profile_t *p, const char *path, char *err, size_t err_len) {
  json_t *pts = json_array();
  for (int i = 0; i < p->n_points; i++)
    json_array_append_new(
        pts, json_pack("{s:i, s:i, s:f, s:f, s:f}", "threads", p->points[i].threads, "batch",
                       p->points[i].batch, "latency_ms", p->points[i].latency_ms, "p90_ms",
                       p->points[i].p90_ms, "isolated_ms", p->points[i].isolated_ms));
  json_t *root = json_pack("{s:s, s:s, s:s, s:i, s:s, s:o}", "model", p->model, "model_sha256",
                           p->model_sha256, "cpu", p->cpu, "cores", p->cores, "version",
                           "packrat " PR_VERSION, "points", pts);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int rc = json_dump_file(root, tmp, JSON_INDENT(1));
  json_decref(root);
  if (rc || rename(tmp, path)) {
    pr_errf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    return PR_ERR_IO;
  }
  return PR_OK;
}

pr_status_t pr_profile_load(const char *path, pr_profile_t *p, char *err, size_t err_len) {
  memset(p, 0, sizeof *p);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) {
    pr_errf(err, err_len, "%s: %s (line %d)", path, je.text, je.line);
    return errno == ENOENT ? PR_ERR_IO : PR_ERR_INVALID;
  }
  pr_status_t st = PR_ERR_INVALID;
  const char *model = "", *sha = "", *cpu = "", *version = "";
  json_t *pts = NULL;
  int cores = 0;
  if (json_unpack_ex(root, &je, 0, "{s?s, s?s, s?s, s:i, s?s, s:o}", "model", &model,
                     "model_sha256", &sha, "cpu", &cpu, "cores", &cores, "version", &version,
                     "points", &pts) ||
      !json_is_array(pts) || cores < 1 || json_array_size(pts) > 10000000) {
    pr_errf(err, err_len, "%s: not a packrat profile (needs cores and points)", path);
    goto out;
  }
  snprintf(p->model, sizeof p->model, "%s", model);
  snprintf(p->model_sha256, sizeof p->model_sha256, "%s", sha);
  snprintf(p->cpu, sizeof p->cpu, "%s", cpu);
  p->cores = cores;
  p->points = calloc(json_array_size(pts) + 1, sizeof *p->points);
  if (!p->points) {
    st = PR_ERR_NOMEM;
    goto out;
  }
  size_t i;
  json_t *it;
  json_array_foreach(pts, i, it) {
    int t = 0, b = 0;
    double lat = -1, p90 = -1, iso = -1;
    if (json_unpack_ex(it, &je, 0, "{s:i, s:i, s:F, s?F, s?F}", "threads", &t, "batch", &b,
                       "latency_ms", &lat, "p90_ms", &p90, "isolated_ms", &iso) ||
        t < 1 || b < 1 || !(lat >= 0) || !isfinite(lat)) {
      pr_errf(err, err_len, "%s: point %zu needs threads >= 1, batch >= 1, latency_ms >= 0", path,
              i);
      pr_profile_free(p);
      goto out;
    }
    p->points[p->n_points++] =
        (pr_profile_point_t){t, b, lat, p90 < 0 ? lat : p90, iso < 0 ? lat : iso};
  }
  st = PR_OK;
out:
  json_decref(root);
  return st;
}

pr_status_t pr_profile_cache_path(const char *sha256, const char *cpu, int cores,
                                  const pr_session_options_t *base, char *path, size_t len) {
  char dir[3072];
  const char *env = getenv("PACKRAT_CACHE"), *xdg = getenv("XDG_CACHE_HOME"),
             *home = getenv("HOME");
  if (env && *env)
    snprintf(dir, sizeof dir, "%s", env);
  else if (xdg && *xdg)
    snprintf(dir, sizeof dir, "%s/packrat", xdg);
  else
    snprintf(dir, sizeof dir, "%s/.cache/packrat", home && *home ? home : "/tmp");
  /* mkdir -p */
  for (char *s = dir + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(dir, 0755);
      *s = '/';
    }
  if (mkdir(dir, 0755) && errno != EEXIST) return PR_ERR_IO;
  char cpu_hash[65];
  char key[1024];
  size_t off = (size_t)snprintf(key, sizeof key, "%s|packrat %s|corun", cpu, PR_VERSION);
  /* a model profiled with other symbolic dim values is another workload */
  for (int i = 0; base && i < base->n_dims && off < sizeof key; i++)
    off += (size_t)snprintf(key + off, sizeof key - off, "|%s=%lld", base->dim_names[i],
                            (long long)base->dim_values[i]);
  pr_sha256_hex(key, strlen(key), cpu_hash);
  snprintf(path, len, "%s/profile-%.16s-%dc-%.8s.json", dir, sha256, cores, cpu_hash);
  return PR_OK;
}

int pr_profile_matches(const pr_profile_t *p, const char *sha256, const char *cpu, int cores,
                       int max_batch) {
  if (strcmp(p->model_sha256, sha256) || strcmp(p->cpu, cpu) || p->cores != cores) return 0;
  int grid[64];
  int n = pr_profile_grid(max_batch, NULL, 0, grid, 64);
  for (int t = 1; t <= cores; t++)
    for (int g = 0; g < n; g++)
      if (pr_profile_latency(p, t, grid[g]) < 0) return 0;
  return 1;
}
