/* The CPU budget a cgroup quota gives this process: a container run with
 * `--cpus 4`, or a Kubernetes CPU limit, may use 4 CPUs' worth of time
 * per period though its affinity mask lists every CPU of a 64-core host;
 * a process that plans for 64 runs, and every thread beyond the quota is
 * stopped (throttled) for the rest of each period. */
#ifndef PR_BASE_CPU_QUOTA_H
#define PR_BASE_CPU_QUOTA_H

#include <stddef.h>

/* The quota of this process's cgroup, in CPUs (quota / period), into
 * *cpus: cgroup v2's cpu.max and cgroup v1's cpu.cfs_quota_us and
 * cpu.cfs_period_us, read on the process's own cgroup and every ancestor
 * up to the hierarchy's mount (the smallest wins, as the kernel enforces
 * it). Returns 1 with a description of where it came from in `from`
 * (from_len bytes), 0 when no quota applies (*cpus 0), -1 when the cgroup
 * files cannot be read (*cpus 0; not an error: no quota is known).
 * root: "" for this machine, else a folder standing for / (tests: its
 * proc/self/cgroup, proc/self/mountinfo and the cgroup files under it). */
int pr__cpu_quota(const char *root, double *cpus, char *from, size_t from_len);

/* The CPUs to plan for: min(allowed, quota rounded down), at least 1;
 * allowed when quota is 0 (none). */
int pr__cpu_budget(int allowed, double quota);

#endif
