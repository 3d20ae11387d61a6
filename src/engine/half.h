/* float16 models: float32 inside, float16 at the edges (half.c). */
#ifndef PR_ENGINE_HALF_H
#define PR_ENGINE_HALF_H

#include "engine/graph.h"

/* Rewrites a loaded model that uses float16 (weights, inputs, outputs:
 * out_types holds each graph output's declared type) to compute in float32
 * with Casts at its float16 inputs and outputs; other models are left as
 * they are. */
pr_status_t pr__half_edges(pr_model_t *m, const pr_dtype_t *out_types);

#endif
