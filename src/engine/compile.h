/* The passes of the session compiler (compile.c), in the order a session
 * runs them; the helpers ops call during infer and prepare are declared in
 * graph.h. */
#ifndef PR_ENGINE_COMPILE_H
#define PR_ENGINE_COMPILE_H

#include "engine/graph.h"

/* Shapes of every node's outputs, in order; all-constant nodes are run now. */
pr_status_t pr__compile_infer(pr_compile_t *c);
/* n_uses and last_use of every value from the live nodes and graph outputs. */
void pr__compile_count_uses(pr_compile_t *c);
/* Marks dead every node whose outputs nobody uses; leaves use counts current. */
void pr__compile_remove_dead(pr_compile_t *c);
/* Creates every live node's kernel in order and rebuilds the node list with
 * the reorders layouts need; an opaque graph output gets a row-major copy,
 * which replaces it in out_vals. */
pr_status_t pr__compile_prepare(pr_compile_t *c, int *out_vals, int n_outputs);

#endif
