/* Must NOT compile with the planner's include flags: the scheduler is above
 * the planner (it runs the plans the planner makes). */
#include "sched/scheduler.h"

int pr_layers_planner_sched(void);
