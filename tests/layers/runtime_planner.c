/* Must NOT compile with the runtime's include flags: the planner (and its
 * public header) is above the runtime. */
#include "packrat/planner.h"

int pr_layers_runtime_planner(void);
