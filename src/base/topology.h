/* CPU topology (hwloc): the order in which instances take CPUs. */
#ifndef PR_BASE_TOPOLOGY_H
#define PR_BASE_TOPOLOGY_H

#include <stddef.h>

/* Writes the OS indexes of the CPUs this process may use into cpus (at most
 * max), ordered so that consecutive ranges make good instances: the first
 * hardware thread of every physical core (cores in NUMA and package order),
 * then the second hardware threads, and so on; as many as the CPU budget
 * (pr__topology_cpu_budget) allows. Returns the count, or -1. */
int pr__topology_cpu_order(int *cpus, int max);

/* Sets the CPU budget by hand (`--cpus N`; 0: the cgroup quota decides,
 * the default). Call before the first use of this module's functions. */
void pr__topology_set_cpus(int n);

/* The CPU budget: how many CPUs' worth of threads the process should run,
 * from the affinity mask (cpuset, online CPUs) and the cgroup CPU quota
 * (base/cpu_quota.h; rounded down, at least 1), or `--cpus`. */
int pr__topology_cpu_budget(void);

/* One line on what was found and what is used, for the log: "1 of 2 CPUs
 * (cgroup v1 /: cpu.cfs_quota_us 100000 / cpu.cfs_period_us 100000)". */
void pr__topology_describe(char *buf, size_t len);

/* The physical core of CPU `cpu` (OS index: hwloc's logical index of the
 * core, the order pr__topology_cpu_order takes cores in), and in *thread (may
 * be NULL) which hardware thread of that core it is (0 the first); -1 (both)
 * for a CPU this process may not use. */
int pr__topology_core_of(int cpu, int *thread);

/* Number of physical cores this process may use (>= 1), at most the CPU
 * budget. */
int pr__topology_num_cores(void);

/* Human-readable CPU model name ("unknown" if not found). */
const char *pr__topology_cpu_name(void);

/* Pin the calling thread to the given CPUs; returns 0 or -1. */
int pr__topology_pin(const int *cpus, int n);

#endif
