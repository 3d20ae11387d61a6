/* Graph fusions applied by the session compiler after constant folding
 * (fuse.c): BatchNormalization folded into the preceding Conv; activations
 * and residual Adds as post-ops of Conv and of the linear MatMul (which also
 * takes a bias Add); a zero Pad into Conv or AveragePool; decomposed
 * LayerNorm, GELU and scaled-dot-product attention into single kernels. */
#ifndef PR_ENGINE_FUSE_H
#define PR_ENGINE_FUSE_H

#include <stdbool.h>

#include "engine/graph.h"

/* Needs use counts (n_uses) up to date; leaves fused-away nodes dead. */
pr_status_t pr__fuse(pr_compile_t *c);

/* QDQ folding (fuse_qdq.c), run by pr__fuse after the GELU, HardSwish and
 * SiLU patterns became single nodes and before any other fusion:
 * DequantizeLinear -> Conv/MatMul/Gemm [-> Relu] -> QuantizeLinear into
 * int8 kernels; DequantizeLinear -> element-wise float nodes ->
 * QuantizeLinear into a table lookup. */
pr_status_t pr__fuse_qdq(pr_compile_t *c);

/* The matchers both files use (inline, so that neither file calls the
 * other: fuse.c calls pr__fuse_qdq, fuse_qdq.c nothing of fuse.c). */

/* The node after `from` that reads `value`, when it is value's only reader
 * and value is no graph output; else -1. */
static inline int pr__fuse_only_consumer(pr_compile_t *c, int value, int from) {
  if (c->v[value].n_uses != 1 || c->v[value].is_graph_output) return -1;
  for (int i = from + 1; i < c->n_nodes; i++) {
    const pr_node_t *n = &c->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] == value) return i;
  }
  return -1;
}

/* value is a constant float scalar (one element, any rank): *out. */
static inline bool pr__fuse_scalar_const(pr_compile_t *c, int value, float *out) {
  const pr_value_t *v = &c->v[value];
  if (!v->is_const || v->dtype != PR_DTYPE_FLOAT || pr__value_numel(v) != 1) return false;
  *out = *(const float *)v->data;
  return true;
}

#endif
