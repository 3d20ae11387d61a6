/* The positive control of the sched layer: its headers, and those of the
 * layers below it, compile with its own flags. */
#include "base/lock.h"
#include "packrat/planner.h"
#include "runtime/worker.h"
#include "sched/internal.h"
#include "sched/request.h"
#include "sched/scheduler.h"

int pr_layers_sched_legal(void) {
  return PR_SCHED_MAX_IO;
}
