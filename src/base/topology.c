/* CPU topology with hwloc. The result is computed once (thread-safe). */
#define _GNU_SOURCE
#include "base/topology.h"

#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/cpu_quota.h"

#define MAX_CPUS 4096

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int order[MAX_CPUS], n_order, n_cores;
/* by OS index: the physical core (0.. in core order) and the hardware
 * thread within it; -1 for CPUs not in the order */
static int core_of[MAX_CPUS], thread_of[MAX_CPUS];

static void place(int cpu, int core, int thread) {
  order[n_order++] = cpu;
  if (cpu < 0 || cpu >= MAX_CPUS) return;
  core_of[cpu] = core;
  thread_of[cpu] = thread;
}
static char cpu_name[128] = "unknown";
/* the CPU budget: --cpus (set before init), else the cgroup quota's */
static int cpus_wanted, budget;
static double quota;
static char quota_from[256];

static void init(void) {
  for (int i = 0; i < MAX_CPUS; i++) core_of[i] = thread_of[i] = -1;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
    /* rank r of every core, for r = 0, 1, ...: physical cores first */
    for (int rank = 0; rank < 8 && n_order < MAX_CPUS; rank++) {
      int added = 0;
      for (int i = 0; i < cores; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
        int seen = 0;
        for (unsigned k = 0; k < core->arity || (core->arity == 0 && k == 0); k++) {
          hwloc_obj_t pu = core->arity ? core->children[k] : NULL;
          if (!pu || pu->type != HWLOC_OBJ_PU || !hwloc_bitmap_isset(allowed, pu->os_index))
            continue;
          if (seen++ == rank && n_order < MAX_CPUS) {
            place((int)pu->os_index, i, rank);
            added++;
            if (rank == 0) n_cores++;
          }
        }
      }
      if (!added) break;
    }
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    const char *name = hwloc_obj_get_info_by_name(root, "CPUModel");
    if (!name) {
      hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
      if (pkg) name = hwloc_obj_get_info_by_name(pkg, "CPUModel");
    }
    if (name) snprintf(cpu_name, sizeof cpu_name, "%s", name);
    hwloc_topology_destroy(topo);
  }
  if (n_order == 0) { /* no topology: whatever the affinity mask allows */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE && n_order < MAX_CPUS; c++)
        if (CPU_ISSET(c, &set)) place(c, n_order, 0);
    n_cores = n_order;
  }
  if (n_cores < 1) n_cores = 1;
  pr__cpu_quota("", &quota, quota_from, sizeof quota_from);
  budget = cpus_wanted > 0 ? (cpus_wanted < n_order ? cpus_wanted : n_order)
                           : pr__cpu_budget(n_order, quota);
  if (budget < 1) budget = 1;
}

void pr__topology_set_cpus(int n) {
  cpus_wanted = n > 0 ? n : 0;
}

int pr__topology_cpu_budget(void) {
  pthread_once(&once, init);
  return budget;
}

void pr__topology_describe(char *buf, size_t len) {
  pthread_once(&once, init);
  if (cpus_wanted > 0)
    snprintf(buf, len, "%d of %d CPUs (--cpus %d)", budget, n_order, cpus_wanted);
  else if (quota > 0)
    snprintf(buf, len, "%d of %d CPUs (the cgroup quota, %.2f CPUs: %s)", budget, n_order, quota,
             quota_from);
  else
    snprintf(buf, len, "%d of %d CPUs (no cgroup CPU quota)", budget, n_order);
}

int pr__topology_cpu_order(int *cpus, int max) {
  pthread_once(&once, init);
  int n = budget < max ? budget : max;
  memcpy(cpus, order, sizeof(int) * (size_t)n);
  return n;
}

int pr__topology_core_of(int cpu, int *thread) {
  pthread_once(&once, init);
  bool known = cpu >= 0 && cpu < MAX_CPUS && core_of[cpu] >= 0;
  if (thread) *thread = known ? thread_of[cpu] : -1;
  return known ? core_of[cpu] : -1;
}

int pr__topology_num_cores(void) {
  pthread_once(&once, init);
  return n_cores < budget ? n_cores : budget;
}

const char *pr__topology_cpu_name(void) {
  pthread_once(&once, init);
  return cpu_name;
}

int pr__topology_pin(const int *cpus, int n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < n; i++)
    if (cpus[i] >= 0 && cpus[i] < CPU_SETSIZE) CPU_SET(cpus[i], &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : -1;
}
