/* The cgroup CPU quota (base/cpu_quota.c) on made-up roots: cgroup v1's cpu
 * controller (mounted alone or with cpuacct, nested cgroups, a parent's
 * smaller limit, a container whose mount shows only its own cgroup), cgroup
 * v2's cpu.max, a hybrid host, no quota, no cgroup files; and the budget's
 * rounding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cpu_quota.h"

static char root[64];

/* root/path with text (folders made on the way). */
static void put(const char *path, const char *text) {
  char p[512], cmd[600];
  snprintf(p, sizeof p, "%s/%s", root, path);
  snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", p);
  assert_int_equal(system(cmd), 0);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int setup(void **s) {
  snprintf(root, sizeof root, "/tmp/pr_quota_XXXXXX");
  assert_non_null(mkdtemp(root));
  return 0;
}

static int teardown(void **s) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd);
}

static const char *V1_MOUNTS =
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
    "32 30 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";

static void test_v1_nested(void **s) {
  put("proc/self/mountinfo", V1_MOUNTS);
  put("proc/self/cgroup", "4:memory:/pod/box\n3:cpu,cpuacct:/pod/box\n0::/\n");
  put("sys/fs/cgroup/cpu,cpuacct/pod/box/cpu.cfs_quota_us", "250000\n");
  put("sys/fs/cgroup/cpu,cpuacct/pod/box/cpu.cfs_period_us", "100000\n");
  put("sys/fs/cgroup/cpu,cpuacct/pod/cpu.cfs_quota_us", "-1\n");
  put("sys/fs/cgroup/cpu,cpuacct/pod/cpu.cfs_period_us", "100000\n");
  double cpus;
  char from[256];
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 1);
  assert_true(cpus > 2.49 && cpus < 2.51);
  assert_non_null(strstr(from, "cgroup v1 /pod/box"));
  assert_non_null(strstr(from, "cpu.cfs_quota_us 250000"));
  assert_int_equal(pr__cpu_budget(64, cpus), 2);
  /* the parent's limit is smaller: it is the one that holds */
  put("sys/fs/cgroup/cpu,cpuacct/pod/cpu.cfs_quota_us", "150000\n");
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 1);
  assert_true(cpus > 1.49 && cpus < 1.51);
  assert_non_null(strstr(from, "cgroup v1 /pod:"));
  /* no limit anywhere */
  put("sys/fs/cgroup/cpu,cpuacct/pod/cpu.cfs_quota_us", "-1\n");
  put("sys/fs/cgroup/cpu,cpuacct/pod/box/cpu.cfs_quota_us", "-1\n");
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 0);
  assert_true(cpus == 0);
  assert_string_equal(from, "");
}

/* A container: the mount shows its own cgroup as the root (mountinfo's
 * root field), /proc/self/cgroup names the host's path. */
static void test_v1_container(void **s) {
  put("proc/self/mountinfo",
      "31 30 0:28 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
  put("proc/self/cgroup", "2:cpu:/docker/abc\n");
  put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "400000\n");
  put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  double cpus;
  char from[256];
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 1);
  assert_true(cpus > 3.99 && cpus < 4.01);
  assert_int_equal(pr__cpu_budget(64, cpus), 4);
  assert_int_equal(pr__cpu_budget(2, cpus), 2); /* the mask allows fewer */
}

static void test_v2(void **s) {
  put("proc/self/mountinfo", "25 22 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  put("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  put("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  put("sys/fs/cgroup/kubepods/pod1/cpu.max", "50000 100000\n");
  put("sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
  double cpus;
  char from[256];
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 1);
  assert_true(cpus > 0.49 && cpus < 0.51);
  assert_non_null(strstr(from, "cgroup v2 /kubepods/pod1: cpu.max 50000 100000"));
  assert_int_equal(pr__cpu_budget(8, cpus), 1); /* at least one */
  put("sys/fs/cgroup/kubepods/pod1/cpu.max", "max 100000\n");
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 0);
}

/* Hybrid: v2 mounted without the cpu controller beside v1's cpu. */
static void test_hybrid(void **s) {
  put("proc/self/mountinfo",
      "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
      "40 30 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  put("proc/self/cgroup", "1:cpu:/svc\n0::/svc\n");
  put("sys/fs/cgroup/cpu/svc/cpu.cfs_quota_us", "100000\n");
  put("sys/fs/cgroup/cpu/svc/cpu.cfs_period_us", "100000\n");
  double cpus;
  char from[256];
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 1);
  assert_true(cpus > 0.99 && cpus < 1.01);
  assert_non_null(strstr(from, "cgroup v1 /svc"));
}

static void test_none(void **s) {
  double cpus = 7;
  char from[64] = "x";
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), -1); /* no files at all */
  assert_true(cpus == 0);
  assert_string_equal(from, "");
  put("proc/self/mountinfo", V1_MOUNTS);
  put("proc/self/cgroup", "3:cpu,cpuacct:/\n");
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 0); /* read: no quota */
  /* malformed values are no quota, never a crash */
  put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "garbage\n");
  put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "0\n");
  assert_int_equal(pr__cpu_quota(root, &cpus, from, sizeof from), 0);
}

static void test_budget(void **s) {
  assert_int_equal(pr__cpu_budget(16, 0), 16);
  assert_int_equal(pr__cpu_budget(16, 3.99), 3);
  assert_int_equal(pr__cpu_budget(16, 0.2), 1);
  assert_int_equal(pr__cpu_budget(16, 1e30), 16);
  assert_int_equal(pr__cpu_budget(0, 0), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_v1_nested, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v1_container, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hybrid, setup, teardown),
      cmocka_unit_test_setup_teardown(test_none, setup, teardown),
      cmocka_unit_test(test_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
