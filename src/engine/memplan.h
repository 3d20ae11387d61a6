/* Memory planning of a compiled session (memplan.c): buffer sharing and one
 * arena placed by liveness. */
#ifndef PR_ENGINE_MEMPLAN_H
#define PR_ENGINE_MEMPLAN_H

#include "engine/graph.h"

/* Sets alias_of and arena offset of every TEMP value of the prepared graph;
 * *arena_bytes: the arena size (at most c->max_bytes). */
pr_status_t pr__memplan(pr_compile_t *c, size_t *arena_bytes);
/* Points constants at their data and TEMP roots into arena. */
void pr__memplan_bind(pr_compile_t *c, void *arena);
/* Points every alias at its root's buffer (after inputs are bound). */
void pr__memplan_bind_aliases(pr_compile_t *c);
/* The value that owns v's bytes. */
int pr__memplan_root(const pr_compile_t *c, int v);

#endif
