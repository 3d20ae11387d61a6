/* The cgroup CPU quota (see cpu_quota.h).
 *
 * Notes on the design:
 * - Where the files are: /proc/self/cgroup names the process's cgroup in
 *   each hierarchy ("0::/path" for cgroup v2, "N:cpu,cpuacct:/path" for
 *   v1's cpu controller); /proc/self/mountinfo says where each hierarchy
 *   is mounted and which of its folders the mount shows (a container sees
 *   its own cgroup as the mount's root). The cgroup's folder is the mount
 *   point plus the path below that root.
 * - The quota that holds is the smallest on the way from the cgroup up to
 *   the mount: a limit on a parent (a Kubernetes pod) bounds its children.
 *   Both hierarchies are read (a hybrid host mounts v2 without the cpu
 *   controller beside v1's), and the smaller quota wins.
 * - Nothing here is cached: a caller that wants to follow a quota that
 *   changes reads it again. */
#include "base/cpu_quota.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_LEN 4096

typedef struct {
  double cpus; /* the smallest quota met, in CPUs; 0: none */
  char from[256];
} found_t;

/* root + path into out; false when it does not fit. */
static bool join(const char *root, const char *path, char *out, size_t len) {
  return (size_t)snprintf(out, len, "%s%s", root, path) < len;
}

/* The cgroup path of hierarchy `want` ("" for v2, else a v1 controller)
 * from root's /proc/self/cgroup into out; false when it has none. */
static bool cgroup_path(const char *root, const char *want, char *out, size_t len) {
  char p[PATH_LEN], line[PATH_LEN];
  if (!join(root, "/proc/self/cgroup", p, sizeof p)) return false;
  FILE *f = fopen(p, "re");
  if (!f) return false;
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c1 = *c2 = 0;
    const char *controllers = c1 + 1, *path = c2 + 1;
    if (!want[0]) {
      found = !strcmp(line, "0") && !controllers[0];
    } else {
      char list[512];
      snprintf(list, sizeof list, "%s", controllers);
      char *save = NULL;
      for (char *t = strtok_r(list, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
        found = !strcmp(t, want);
    }
    if (found) snprintf(out, len, "%s", path);
  }
  fclose(f);
  return found;
}

/* The mount of hierarchy `want` (as in cgroup_path): its root within the
 * hierarchy and its mount point, from root's /proc/self/mountinfo. */
static bool mount_of(const char *root, const char *want, char *mroot, char *point, size_t len) {
  char p[PATH_LEN], line[PATH_LEN];
  if (!join(root, "/proc/self/mountinfo", p, sizeof p)) return false;
  FILE *f = fopen(p, "re");
  if (!f) return false;
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    /* id parent major:minor root point options [optional...] - type source super */
    char *dash = strstr(line, " - ");
    if (!dash) continue;
    *dash = 0;
    char type[64], super[512];
    if (sscanf(dash + 3, "%63s %*s %511s", type, super) != 2) continue;
    char r[PATH_LEN], m[PATH_LEN];
    if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2) continue;
    if (!want[0]) {
      found = !strcmp(type, "cgroup2");
    } else if (!strcmp(type, "cgroup")) {
      char *save = NULL;
      for (char *t = strtok_r(super, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
        found = !strcmp(t, want);
    }
    if (found) snprintf(mroot, len, "%s", r), snprintf(point, len, "%s", m);
  }
  fclose(f);
  return found;
}

/* The first line of file dir/name into out (false when absent). */
static bool read_text(const char *dir, const char *name, char *out, size_t len) {
  char p[PATH_LEN];
  if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return false;
  FILE *f = fopen(p, "re");
  if (!f) return false;
  bool ok = fgets(out, (int)len, f) != NULL;
  fclose(f);
  return ok;
}

/* The quota that folder dir of a hierarchy sets, in CPUs (0: none). */
static double quota_at(const char *dir, bool v2, char *file, size_t file_len) {
  char text[128];
  if (v2) {
    char q[32];
    long long period;
    if (!read_text(dir, "cpu.max", text, sizeof text) ||
        sscanf(text, "%31s %lld", q, &period) != 2 || !strcmp(q, "max") || period <= 0)
      return 0;
    long long quota = atoll(q);
    snprintf(file, file_len, "cpu.max %lld %lld", quota, period);
    return quota > 0 ? (double)quota / (double)period : 0;
  }
  long long quota, period;
  if (!read_text(dir, "cpu.cfs_quota_us", text, sizeof text) || sscanf(text, "%lld", &quota) != 1 ||
      quota <= 0 || !read_text(dir, "cpu.cfs_period_us", text, sizeof text) ||
      sscanf(text, "%lld", &period) != 1 || period <= 0)
    return 0;
  snprintf(file, file_len, "cpu.cfs_quota_us %lld / cpu.cfs_period_us %lld", quota, period);
  return (double)quota / (double)period;
}

/* Reads hierarchy `want` into f; false when it is not there. */
static bool read_hierarchy(const char *root, const char *want, found_t *f) {
  char path[PATH_LEN], mroot[PATH_LEN], point[PATH_LEN];
  if (!cgroup_path(root, want, path, sizeof path) ||
      !mount_of(root, want, mroot, point, sizeof point))
    return false;
  /* the path below the mount's root ("/" mounts show the whole tree) */
  const char *below = path;
  size_t rl = strlen(mroot);
  if (strcmp(mroot, "/") && !strncmp(path, mroot, rl) && (path[rl] == '/' || !path[rl]))
    below = path + rl;
  else if (strcmp(mroot, "/"))
    below = ""; /* outside what the mount shows (a cgroup namespace): its root */
  char top[PATH_LEN], dir[PATH_LEN];
  if ((size_t)snprintf(top, sizeof top, "%s%s", root, point) >= sizeof top ||
      (size_t)snprintf(dir, sizeof dir, "%s%s", top, strcmp(below, "/") ? below : "") >= sizeof dir)
    return false;
  size_t top_len = strlen(top);
  for (;;) {
    char file[160];
    double q = quota_at(dir, !want[0], file, sizeof file);
    if (q > 0 && (f->cpus == 0 || q < f->cpus)) {
      f->cpus = q;
      const char *rel = strlen(dir) > top_len ? dir + top_len : "/";
      snprintf(f->from, sizeof f->from, "cgroup %s %s: %s", want[0] ? "v1" : "v2", rel, file);
    }
    char *slash = strrchr(dir, '/');
    if (strlen(dir) <= top_len || !slash || (size_t)(slash - dir) < top_len) break;
    *slash = 0;
  }
  return true;
}

int pr__cpu_quota(const char *root, double *cpus, char *from, size_t from_len) {
  found_t f = {0};
  bool v2 = read_hierarchy(root ? root : "", "", &f);
  bool v1 = read_hierarchy(root ? root : "", "cpu", &f);
  *cpus = f.cpus;
  if (from_len) snprintf(from, from_len, "%s", f.cpus > 0 ? f.from : "");
  return f.cpus > 0 ? 1 : v1 || v2 ? 0 : -1;
}

int pr__cpu_budget(int allowed, double quota) {
  if (allowed < 1) allowed = 1;
  if (quota <= 0) return allowed;
  double whole = quota < (double)INT_MAX ? quota : (double)INT_MAX;
  int n = (int)whole; /* rounded down: a fraction of a CPU is throttled time */
  if (n < 1) n = 1;
  return n < allowed ? n : allowed;
}
