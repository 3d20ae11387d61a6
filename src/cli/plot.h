/* SVG plots of a profile (packrat profile --plot) and of a plan over its
 * profile (packrat plan --plot): latency against batch (log scale), one
 * line per thread count. Plain SVG text, no dependency. */
#ifndef PR_CLI_PLOT_H
#define PR_CLI_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "packrat/planner.h"

typedef struct {
  int threads;           /* thread counts 1..threads are drawn */
  const pr_plan_t *plan; /* marked when not NULL, with the y axis fitted to it */
  double fat_ms;         /* one `threads`-thread instance at the plan's batch; < 0: none */
  bool log_y;            /* y on a log scale (the profile plot), else linear */
} pr_cli_plot_opts_t;

/* Writes the plot of p to path. Linear y (a plan): the axis ends at twice
 * the larger of the plan's and the fat instance's latency (or at the largest
 * latency when that is lower); points above it are drawn on the top edge as
 * triangles and counted in a note, so that one outlier does not squash the
 * part that matters. Log y: every point in range. The plot says that the
 * latencies include the co-running slowdown. Returns false with a message
 * in err when the file cannot be written. */
bool pr__cli_plot_svg(const char *path, const pr_profile_t *p, const pr_cli_plot_opts_t *o,
                      char *err, size_t err_len);

/* Writes the joint plan of n models (plans[k] on their cores, in the order
 * of the cores plans use) to path: one box per core, coloured by model,
 * shaded by instance, each instance's batch on its first core; unassigned
 * cores grey. Returns false with a message in err when the file cannot be
 * written. */
bool pr__cli_plot_joint_svg(const char *path, const pr_profile_t *ps, const pr_plan_t *plans, int n,
                            int cores, char *err, size_t err_len);

#endif
