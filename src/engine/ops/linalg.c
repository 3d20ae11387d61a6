/* Linear algebra on small matrices: Det (the determinant of each trailing
 * M x M matrix of a batch), float, double and float16.
 *
 * Notes on the design:
 * - LU decomposition with partial pivoting, in double whatever the element
 *   type: one matrix per task, the batch split over threads. A singular
 *   matrix (a zero pivot column) gives 0.
 * - The matrices are small (ONNX models take Det of 2x2..4x4 transforms),
 *   so no blocked or oneDNN kernel. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "engine/ops/ops.h"

static pr_status_t infer_det(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_DOUBLE && a->dtype != PR_DTYPE_FLOAT16)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  if (a->rank < 2 || a->dims[a->rank - 1] != a->dims[a->rank - 2])
    return pr__fail(c, n, PR_ERR_INVALID, "input must be [..., M, M]");
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank - 2, a->dims);
  return PR_OK;
}

/* determinant of the m x m matrix in w (overwritten) */
static double det_lu(double *w, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; k++) {
    int64_t p = k;
    for (int64_t i = k + 1; i < m; i++)
      if (fabs(w[i * m + k]) > fabs(w[p * m + k])) p = i;
    if (w[p * m + k] == 0) return 0;
    if (p != k) {
      for (int64_t j = 0; j < m; j++) {
        double t = w[k * m + j];
        w[k * m + j] = w[p * m + j];
        w[p * m + j] = t;
      }
      det = -det;
    }
    double piv = w[k * m + k];
    det *= piv;
    for (int64_t i = k + 1; i < m; i++) {
      double f = w[i * m + k] / piv;
      for (int64_t j = k + 1; j < m; j++) w[i * m + j] -= f * w[k * m + j];
    }
  }
  return det;
}

/* one m x m scratch matrix per thread, allocated at prepare */
typedef struct {
  int threads;
  double work[];
} det_state_t;

static pr_status_t prepare_det(pr_compile_t *c, pr_node_t *n) {
  int64_t m = pr__in(c, n, 0)->dims[pr__in(c, n, 0)->rank - 1];
  int threads = c->threads > 0 ? c->threads : 1;
  if (m > 46340) /* m * m overflows an int */
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "matrices of %lld rows", (long long)m);
  det_state_t *s = malloc(sizeof *s + sizeof(double) * (size_t)threads * (size_t)(m * m));
  if (!s) return PR_ERR_NOMEM;
  s->threads = threads;
  n->state = s;
  return PR_OK;
}

static void run_det(pr_exec_t *x, pr_node_t *n) {
  det_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t m = a->dims[a->rank - 1], batch = pr__value_numel(o);
  int threads = x->threads < s->threads ? x->threads : s->threads;
#pragma omp parallel for num_threads(threads) if (batch * m * m * m >= PR_PAR_MIN)
  for (int64_t b = 0; b < batch; b++) {
    double *w = s->work + (int64_t)omp_get_thread_num() * m * m;
    for (int64_t i = 0; i < m * m; i++) w[i] = pr__load_double(a->ptr, a->dtype, b * m * m + i);
    double d = det_lu(w, m);
    switch (o->dtype) {
      case PR_DTYPE_FLOAT: ((float *)o->ptr)[b] = (float)d; break;
      case PR_DTYPE_DOUBLE: ((double *)o->ptr)[b] = d; break;
      default: ((uint16_t *)o->ptr)[b] = pr__float_to_half((float)d); break;
    }
  }
}

const pr_op_t pr__op_det = {.name = "Det",
                            .attrs = "",
                            .min_opset = 11,
                            .max_inputs = 1,
                            .infer = infer_det,
                            .prepare = prepare_det,
                            .run = run_det,
                            .destroy = free};
