/* Loss operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * (opset 12 onwards; 13 only widened the types). Scores are float or double
 * of shape (N, C, d1..dk), labels int32 or int64 of shape (N, d1..dk),
 * optional per-class weights (C). reduction none gives one loss per label,
 * sum and mean a scalar; mean divides by the sum of the weights of the
 * labels that count. A label equal to ignore_index adds nothing and weighs
 * nothing.
 *
 * Notes on the design: every sum runs in double. A label outside [0, C) that
 * is not ignore_index is invalid input: the run fails naming the node and
 * the label, as in ONNX Runtime, before anything is computed.
 */
#include <math.h>
#include <string.h>

#include "engine/ops/ops.h"

typedef enum { RED_NONE, RED_SUM, RED_MEAN } reduction_t;

static pr_status_t reduction_of(const pr_mnode_t *m, reduction_t *r) {
  const char *s = pr__attr_string(m, "reduction", "mean");
  if (!strcmp(s, "none"))
    *r = RED_NONE;
  else if (!strcmp(s, "sum"))
    *r = RED_SUM;
  else if (!strcmp(s, "mean"))
    *r = RED_MEAN;
  else
    return PR_ERR_INVALID;
  return PR_OK;
}

static pr_status_t check_loss(const pr_mnode_t *m, int opset, char *err, size_t len) {
  (void)opset;
  reduction_t r;
  if (reduction_of(m, &r)) {
    snprintf(err, len, "node '%s' (%s): reduction must be none, sum or mean", pr__mnode_name(m),
             m->op_type);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

/* Shapes of both losses: (N, C, d...) scores, (N, d...) labels. With
 * log_prob (SoftmaxCrossEntropyLoss's second output) of the scores' shape. */
static pr_status_t infer_loss(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *x = pr__in(c, n, 0), *t = pr__in(c, n, 1), *w = pr__in(c, n, 2);
  if (!t) return pr__fail(c, n, PR_ERR_INVALID, "needs scores and labels");
  if (x->dtype != PR_DTYPE_FLOAT && x->dtype != PR_DTYPE_DOUBLE)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "scores must be FLOAT or DOUBLE, not %s",
                    pr_dtype_name(x->dtype));
  if (t->dtype != PR_DTYPE_INT32 && t->dtype != PR_DTYPE_INT64)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "labels must be INT32 or INT64");
  if (x->rank < 2 || t->rank != x->rank - 1)
    return pr__fail(c, n, PR_ERR_INVALID, "scores (N, C, d...) need labels (N, d...)");
  for (int k = 0; k < t->rank; k++)
    if (t->dims[k] != x->dims[k ? k + 1 : 0])
      return pr__fail(c, n, PR_ERR_INVALID, "labels dimension %d differs from the scores'", k);
  if (w && (w->dtype != x->dtype || w->rank != 1 || w->dims[0] != x->dims[1]))
    return pr__fail(c, n, PR_ERR_INVALID, "weights must be %lld values of the scores' type",
                    (long long)x->dims[1]);
  reduction_t r;
  if (reduction_of(n->m, &r)) return pr__fail(c, n, PR_ERR_INVALID, "bad reduction");
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, r == RED_NONE ? t->rank : 0, t->dims);
  if (pr__out(c, n, 1)) pr__value_set_shape(pr__out(c, n, 1), x->dtype, x->rank, x->dims);
  return PR_OK;
}

/* The loss from log-probabilities lp (read through load) of shape
 * (N, C, inner): shared by both operators. */
static void nll(pr_exec_t *x, pr_node_t *n, const void *lp, pr_dtype_t lt) {
  const pr_value_t *sv = &x->v[n->in[0]], *tv = &x->v[n->in[1]], *ov = &x->v[n->out[0]];
  const void *w = n->n_in > 2 && n->in[2] >= 0 ? pr__xin(x, n, 2) : NULL;
  int64_t N = sv->dims[0], C = sv->dims[1], inner = 1;
  for (int k = 2; k < sv->rank; k++) inner *= sv->dims[k];
  int64_t ignore = pr__attr_int(n->m, "ignore_index", INT64_MIN);
  bool has_ignore = pr__attr_find(n->m, "ignore_index") != NULL;
  reduction_t r = RED_MEAN;
  reduction_of(n->m, &r);
  for (int64_t at = 0; at < N * inner; at++) {
    int64_t label = pr__load_int64(tv->ptr, tv->dtype, at);
    if ((label < 0 || label >= C) && !(has_ignore && label == ignore)) {
      pr__run_fail(x, n, PR_ERR_INVALID, "label %lld out of range [0, %lld]", (long long)label,
                   (long long)(C - 1));
      return;
    }
  }
  void *out = ov->ptr;
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t at = i * inner + j, label = pr__load_int64(tv->ptr, tv->dtype, at);
      double loss, wt;
      if (has_ignore && label == ignore) {
        loss = 0, wt = 0;
      } else if (label < 0 || label >= C) { /* refused above */
        loss = NAN, wt = 1;
      } else {
        wt = w ? pr__load_double(w, sv->dtype, label) : 1.0;
        loss = -pr__load_double(lp, lt, (i * C + label) * inner + j) * wt;
      }
      if (r == RED_NONE) pr__store_real(out, ov->dtype, at, loss);
      sum += loss, wsum += wt;
    }
  if (r == RED_SUM) pr__store_real(out, ov->dtype, 0, sum);
  if (r == RED_MEAN) pr__store_real(out, ov->dtype, 0, sum / wsum);
}

static void run_nll(pr_exec_t *x, pr_node_t *n) {
  nll(x, n, pr__xin(x, n, 0), x->v[n->in[0]].dtype);
}

const pr_op_t pr__op_nll_loss = {.name = "NegativeLogLikelihoodLoss",
                                 .attrs = "ignore_index,reduction",
                                 .min_opset = 12,
                                 .max_inputs = 3,
                                 .check = check_loss,
                                 .infer = infer_loss,
                                 .run = run_nll};

/* ---- SoftmaxCrossEntropyLoss: log-softmax over C, then the NLL ---- */

typedef struct {
  double *lp; /* log-probabilities, when the node does not output them */
} sce_state_t;

static void destroy_sce(void *p) {
  sce_state_t *s = p;
  if (s) free(s->lp);
  free(s);
}

static pr_status_t prepare_sce(pr_compile_t *c, pr_node_t *n) {
  sce_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  int64_t numel = pr__value_numel(pr__in(c, n, 0));
  if (!(s->lp = malloc((size_t)(numel ? numel : 1) * sizeof *s->lp))) return PR_ERR_NOMEM;
  return PR_OK;
}

static void run_sce(pr_exec_t *x, pr_node_t *n) {
  sce_state_t *s = n->state;
  const pr_value_t *sv = &x->v[n->in[0]];
  int64_t N = sv->dims[0], C = sv->dims[1], inner = 1;
  for (int k = 2; k < sv->rank; k++) inner *= sv->dims[k];
  double *lp = s->lp;
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = i * C * inner + j;
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < C; k++) {
        double v = pr__load_double(sv->ptr, sv->dtype, base + k * inner);
        lp[base + k * inner] = v;
        mx = v > mx ? v : mx;
      }
      for (int64_t k = 0; k < C; k++) sum += exp(lp[base + k * inner] - mx);
      double lse = mx + log(sum);
      for (int64_t k = 0; k < C; k++) lp[base + k * inner] -= lse;
    }
  if (n->n_out > 1 && n->out[1] >= 0) {
    void *o = pr__xout(x, n, 1);
    for (int64_t i = 0, e = N * C * inner; i < e; i++) pr__store_real(o, sv->dtype, i, lp[i]);
  }
  nll(x, n, lp, PR_DTYPE_DOUBLE);
}

const pr_op_t pr__op_sce_loss = {.name = "SoftmaxCrossEntropyLoss",
                                 .attrs = "ignore_index,reduction",
                                 .min_opset = 12,
                                 .max_inputs = 3,
                                 .check = check_loss,
                                 .infer = infer_loss,
                                 .prepare = prepare_sce,
                                 .run = run_sce,
                                 .destroy = destroy_sce};
