/* Helpers shared by the op files: broadcasting, typed element loads, the
 * parallel copy and the kernel of the view ops. */
#include "engine/ops/common.h"

#include <string.h>

void pr__copy(void *dst, const void *src, size_t n, int threads) {
  if (dst == src || !n) return;
  if (n < (1 << 20) || threads <= 1) {
    memcpy(dst, src, n);
    return;
  }
  size_t chunk = (n + (size_t)threads - 1) / (size_t)threads;
#pragma omp parallel for num_threads(threads)
  for (int t = 0; t < threads; t++) {
    size_t off = (size_t)t * chunk;
    if (off < n)
      memcpy((char *)dst + off, (const char *)src + off, off + chunk > n ? n - off : chunk);
  }
}

void pr__run_copy(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *o = &x->v[n->out[0]];
  pr__copy(o->ptr, pr__xin(x, n, 0), o->nbytes, x->threads);
}

bool pr__run_indices_ok(pr_exec_t *x, const pr_node_t *n, const void *idx, pr_dtype_t t,
                        int64_t count, const int64_t *lens, int n_lens) {
  assert(n_lens >= 1 && (t == PR_DTYPE_INT64 || t == PR_DTYPE_INT32));
  for (int64_t i = 0; i < count; i++) {
    int64_t j = t == PR_DTYPE_INT64 ? ((const int64_t *)idx)[i] : ((const int32_t *)idx)[i];
    int64_t len = lens[n_lens == 1 ? 0 : i % n_lens];
    if (j < -len || j >= len) {
      pr__run_fail(x, n, PR_ERR_INVALID, "index %lld out of range [%lld, %lld]", (long long)j,
                   (long long)-len, (long long)(len - 1));
      return false;
    }
  }
  return true;
}

pr_status_t pr__shape_same(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (!a) return pr__fail(c, n, PR_ERR_INVALID, "missing input");
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, a->rank, a->dims);
  return PR_OK;
}

bool pr__same_shape(const pr_value_t *a, const pr_value_t *b) {
  if (a->rank != b->rank) return false;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return false;
  return true;
}

int pr__broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o) {
  int r = ra > rb ? ra : rb;
  int64_t d[PR_MAX_RANK]; /* o may be a or b (accumulating over inputs) */
  if (r > PR_MAX_RANK) return -1;
  for (int k = 0; k < r; k++) {
    int64_t da = k - (r - ra) >= 0 ? a[k - (r - ra)] : 1;
    int64_t db = k - (r - rb) >= 0 ? b[k - (r - rb)] : 1;
    if (da == db || db == 1)
      d[k] = da;
    else if (da == 1)
      d[k] = db;
    else
      return -1;
  }
  for (int k = 0; k < r; k++) o[k] = d[k];
  *ro = r;
  return 0;
}

pr_status_t pr__shape_broadcast(pr_compile_t *c, pr_node_t *n, const pr_value_t *a,
                                const pr_value_t *b, pr_dtype_t dtype) {
  int r;
  int64_t d[PR_MAX_RANK];
  if (pr__broadcast_shape(a->rank, a->dims, b->rank, b->dims, &r, d) < 0)
    return pr__fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
  pr__value_set_shape(pr__out(c, n, 0), dtype, r, d);
  return PR_OK;
}

pr_status_t pr__broadcast_inputs(pr_compile_t *c, pr_node_t *n, int from, int *ro, int64_t *od) {
  pr_value_t *a = pr__in(c, n, from);
  if (!a) return pr__fail(c, n, PR_ERR_INVALID, "needs inputs");
  *ro = a->rank;
  memcpy(od, a->dims, sizeof(int64_t) * PR_MAX_RANK);
  for (int k = from + 1; k < n->n_in; k++) {
    pr_value_t *b = pr__in(c, n, k);
    if (!b || b->dtype != a->dtype) return pr__fail(c, n, PR_ERR_INVALID, "inputs of one type");
    if (pr__broadcast_shape(*ro, od, b->rank, b->dims, ro, od) < 0)
      return pr__fail(c, n, PR_ERR_INVALID, "shapes do not broadcast");
  }
  return PR_OK;
}
