/* The numpy matmul shape rule (matmul_shape.h). */
#include "engine/ops/matmul_shape.h"

#include <string.h>

pr_status_t pr__mm_shape(pr_compile_t *c, pr_node_t *n, const pr_value_t *a, const pr_value_t *b,
                         pr_mm_shape_t *s, int *ro, int64_t *od) {
  if (a->rank < 1 || b->rank < 1) return pr__fail(c, n, PR_ERR_INVALID, "scalar input");
  int64_t ad[PR_MAX_RANK + 1], bd[PR_MAX_RANK + 1];
  int ra = a->rank, rb = b->rank;
  memcpy(ad, a->dims, sizeof(int64_t) * (size_t)ra);
  memcpy(bd, b->dims, sizeof(int64_t) * (size_t)rb);
  bool a1 = ra == 1, b1 = rb == 1;
  if (a1) ad[1] = ad[0], ad[0] = 1, ra = 2;
  if (b1) bd[1] = 1, rb = 2;
  s->M = ad[ra - 2], s->K = ad[ra - 1], s->N = bd[rb - 1];
  if (bd[rb - 2] != s->K)
    return pr__fail(c, n, PR_ERR_INVALID, "inner dimensions differ (%lld, %lld)", (long long)s->K,
                    (long long)bd[rb - 2]);
  int64_t batch[PR_MAX_RANK];
  if (pr__broadcast_shape(ra - 2, ad, rb - 2, bd, &s->rank, batch) < 0)
    return pr__fail(c, n, PR_ERR_INVALID, "batch dimensions do not broadcast");
  s->batch = 1;
  int64_t ea = s->M * s->K, eb = s->K * s->N;
  for (int k = s->rank - 1; k >= 0; k--) {
    int ka = k - (s->rank - (ra - 2)), kb = k - (s->rank - (rb - 2));
    int64_t da = ka >= 0 ? ad[ka] : 1, db = kb >= 0 ? bd[kb] : 1;
    s->bdims[k] = batch[k];
    s->sa[k] = da == 1 ? 0 : ea;
    s->sb[k] = db == 1 ? 0 : eb;
    ea *= da;
    eb *= db;
    s->batch *= batch[k];
  }
  int j = 0;
  for (int k = 0; k < s->rank; k++) od[j++] = batch[k];
  if (!a1) od[j++] = s->M;
  if (!b1) od[j++] = s->N;
  *ro = j;
  return j > PR_MAX_RANK ? pr__fail(c, n, PR_ERR_UNSUPPORTED, "rank over %d", PR_MAX_RANK) : PR_OK;
}
