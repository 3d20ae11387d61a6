/* CPU topology (hwloc): the order in which instances take CPUs. */
#ifndef PR_BASE_TOPOLOGY_H
#define PR_BASE_TOPOLOGY_H

/* Writes the OS indexes of the CPUs this process may use into cpus (at most
 * max), ordered so that consecutive ranges make good instances: the first
 * hardware thread of every physical core (cores in NUMA and package order),
 * then the second hardware threads, and so on. Returns the count, or -1. */
int pr__topology_cpu_order(int *cpus, int max);

/* The physical core of CPU `cpu` (OS index: hwloc's logical index of the
 * core, the order pr__topology_cpu_order takes cores in), and in *thread (may
 * be NULL) which hardware thread of that core it is (0 the first); -1 (both)
 * for a CPU this process may not use. */
int pr__topology_core_of(int cpu, int *thread);

/* Number of physical cores this process may use (>= 1). */
int pr__topology_num_cores(void);

/* Human-readable CPU model name ("unknown" if not found). */
const char *pr__topology_cpu_name(void);

/* Pin the calling thread to the given CPUs; returns 0 or -1. */
int pr__topology_pin(const int *cpus, int n);

#endif
