/* The numpy matmul shape rule MatMul, MatMulInteger and QLinearMatMul
 * share: a [.., M, K] times b [.., K, N], a 1-D a or b promoted to a matrix
 * (and its dim dropped from the output), the batch dims broadcast. */
#ifndef PACKRAT_ENGINE_OPS_MATMUL_SHAPE_H
#define PACKRAT_ENGINE_OPS_MATMUL_SHAPE_H

#include "engine/ops/ops.h"

/* A product's geometry: matrices M x K and K x N, `batch` of them over the
 * broadcast batch dims bdims[0..rank), sa/sb each batch dim's stride in
 * elements of a and b (0 where that input is broadcast along it). */
typedef struct {
  int64_t M, N, K, batch;
  int rank;
  int64_t bdims[PR_MAX_RANK], sa[PR_MAX_RANK], sb[PR_MAX_RANK];
} pr_mm_shape_t;

/* Fills s from a and b (neither a scalar) and writes the output's dims into
 * od (PR_MAX_RANK + 2 entries) and rank into *ro. PR_ERR_INVALID through
 * pr__fail when the inner dims differ or the batch dims do not broadcast,
 * PR_ERR_UNSUPPORTED when the output's rank is over PR_MAX_RANK. */
pr_status_t pr__mm_shape(pr_compile_t *c, pr_node_t *n, const pr_value_t *a, const pr_value_t *b,
                         pr_mm_shape_t *s, int *ro, int64_t *od);

#endif
