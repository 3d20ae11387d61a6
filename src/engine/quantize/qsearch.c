/* The accuracy search (qsearch.h): trials of QDQ models with some nodes
 * left float, run on the held-out samples against the float model. */
#include "engine/quantize/qsearch.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"

/* ---- held-out samples ---- */

static pr_status_t copy_tensor(pr_tensor_t *dst, const pr_tensor_t *src) {
  size_t n = (size_t)pr_tensor_numel(src) * pr_dtype_size(src->dtype);
  *dst = *src;
  if (!(dst->data = pr__aligned_alloc(n))) return PR_ERR_NOMEM;
  memcpy(dst->data, src->data, n);
  return PR_OK;
}

pr_status_t pr__qz_holdout_add(pr_qz_holdout_t *h, const pr_tensor_t *in, int n_in) {
  assert(!h->n || h->n_in == n_in);
  if (h->n == h->cap) {
    int cap = h->cap * 2 + 16;
    pr_tensor_t *grown = realloc(h->in, sizeof *grown * (size_t)cap * (size_t)n_in);
    if (!grown) return PR_ERR_NOMEM;
    h->in = grown, h->cap = cap;
  }
  h->n_in = n_in;
  pr_tensor_t *dst = &h->in[(size_t)h->n * (size_t)n_in];
  for (int i = 0; i < n_in; i++)
    if (copy_tensor(&dst[i], &in[i])) {
      while (i--) pr_engine_tensor_free(&dst[i]);
      return PR_ERR_NOMEM;
    }
  h->n++;
  return PR_OK;
}

void pr__qz_holdout_free(pr_qz_holdout_t *h) {
  for (int k = 0; k < h->n * h->n_in; k++) pr_engine_tensor_free(&h->in[k]);
  free(h->in);
  memset(h, 0, sizeof *h);
}

/* ---- running a model on every held-out sample ---- */

typedef struct search search_t;
/* Called with sample k's outputs (views valid during the call). */
typedef pr_status_t (*visit_fn)(search_t *s, int k, const pr_tensor_t *outs);

struct search {
  const uint8_t *float_model;
  size_t len;
  pr_qz_plan_t *plan;
  const pr_qz_holdout_t *h;
  const pr_qz_search_options_t *o;
  int n_out;
  pr_tensor_t *ref;    /* h->n * n_out: the float model's outputs */
  double *lo, *hi;     /* per output: fp32 range over every sample */
  double *mean, *dev2; /* per output: fp32 mean and sum of squared deviations */
  double *err2;        /* per output: this trial's sum of squared differences */
  int n_eval;          /* samples a trial runs: the first n_eval held out */
  int agree, trials;
  char *err;
  size_t err_len;
};

static bool same_shapes(const pr_tensor_t *a, const pr_tensor_t *b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i].rank != b[i].rank || memcmp(a[i].dims, b[i].dims, sizeof(int64_t) * (size_t)a[i].rank))
      return false;
  return true;
}

/* A session of m for sample k's input shapes. */
static pr_status_t session_for(search_t *s, pr_model_t *m, int k, pr_session_t **out) {
  const pr_tensor_t *in = &s->h->in[(size_t)k * (size_t)s->h->n_in];
  pr_tensor_info_t shapes[64];
  if (s->h->n_in > 64) return PR_ERR_INVALID;
  for (int i = 0; i < s->h->n_in; i++) {
    pr_engine_model_input(m, i, &shapes[i]);
    shapes[i].dtype = in[i].dtype, shapes[i].rank = in[i].rank;
    memcpy(shapes[i].dims, in[i].dims, sizeof in[i].dims);
  }
  pr_session_options_t so = pr_session_options_default();
  so.threads = s->o->threads;
  so.batch = s->h->n_in && in[0].rank ? in[0].dims[0] : 1;
  so.input_shapes = shapes;
  return pr_engine_session_create(m, &so, out, s->err, s->err_len);
}

/* Loads the model in bytes and runs every held-out sample through visit
 * (a session per run of samples of one shape). */
static pr_status_t run_all(search_t *s, const uint8_t *bytes, size_t len, visit_fn visit) {
  pr_model_t *m = NULL;
  pr_status_t st = pr_engine_model_load_memory(bytes, len, s->o->base_dir, &m, s->err, s->err_len);
  if (st) return st;
  int n_in = s->h->n_in, n_out = pr_engine_model_num_outputs(m);
  pr_tensor_t *outs = calloc((size_t)n_out + 1, sizeof *outs);
  pr_session_t *sess = NULL;
  if (!outs) st = PR_ERR_NOMEM;
  for (int k = 0; k < s->n_eval && !st; k++) {
    const pr_tensor_t *in = &s->h->in[(size_t)k * (size_t)n_in];
    if (!sess || !same_shapes(in, in - n_in, n_in)) {
      pr_engine_session_destroy(sess);
      sess = NULL;
      if ((st = session_for(s, m, k, &sess))) break;
    }
    st = pr_engine_session_run(sess, in, n_in, outs, n_out, s->err, s->err_len);
    if (!st) st = visit(s, k, outs);
  }
  pr_engine_session_destroy(sess);
  pr_engine_model_destroy(m);
  free(outs);
  return st;
}

/* ---- the float model's outputs ---- */

static pr_status_t keep_reference(search_t *s, int k, const pr_tensor_t *outs) {
  for (int o = 0; o < s->n_out; o++) {
    pr_tensor_t *r = &s->ref[(size_t)k * (size_t)s->n_out + (size_t)o];
    if (copy_tensor(r, &outs[o])) return PR_ERR_NOMEM;
    if (r->dtype != PR_DTYPE_FLOAT) continue;
    const float *v = r->data;
    for (int64_t i = 0, n = pr_tensor_numel(r); i < n; i++) {
      s->lo[o] = fmin(s->lo[o], v[i]), s->hi[o] = fmax(s->hi[o], v[i]);
      s->mean[o] += v[i], s->dev2[o] += 1; /* count, for now */
    }
  }
  return PR_OK;
}

/* Runs the float model: s->ref, and each output's range, mean and sum of
 * squared deviations. */
static pr_status_t references(search_t *s) {
  pr_model_t *m = NULL;
  pr_status_t st =
      pr_engine_model_load_memory(s->float_model, s->len, s->o->base_dir, &m, s->err, s->err_len);
  if (st) return st;
  s->n_out = pr_engine_model_num_outputs(m);
  pr_engine_model_destroy(m);
  size_t n_out = (size_t)s->n_out + 1;
  s->ref = calloc((size_t)s->h->n * n_out, sizeof *s->ref);
  s->lo = malloc(sizeof(double) * n_out), s->hi = malloc(sizeof(double) * n_out);
  s->mean = calloc(n_out, sizeof(double)), s->dev2 = calloc(n_out, sizeof(double));
  s->err2 = calloc(n_out, sizeof(double));
  if (!s->ref || !s->lo || !s->hi || !s->mean || !s->dev2 || !s->err2) return PR_ERR_NOMEM;
  for (int o = 0; o < s->n_out; o++) s->lo[o] = INFINITY, s->hi[o] = -INFINITY;
  if ((st = run_all(s, s->float_model, s->len, keep_reference))) return st;
  for (int o = 0; o < s->n_out; o++) {
    s->mean[o] = s->dev2[o] > 0 ? s->mean[o] / s->dev2[o] : 0;
    s->dev2[o] = 0;
    for (int k = 0; k < s->h->n; k++) {
      const pr_tensor_t *r = &s->ref[(size_t)k * (size_t)s->n_out + (size_t)o];
      const float *v = r->data;
      for (int64_t i = 0, n = r->dtype == PR_DTYPE_FLOAT ? pr_tensor_numel(r) : 0; i < n; i++)
        s->dev2[o] += (v[i] - s->mean[o]) * (v[i] - s->mean[o]);
    }
  }
  return PR_OK;
}

/* ---- comparing a trial's outputs with them ---- */

/* Whether the argmax along the last axis agrees at every position. */
static bool argmax_agrees(const float *a, const float *b, int64_t n, int64_t c) {
  for (int64_t row = 0; c > 0 && row < n / c; row++) {
    const float *x = a + row * c, *y = b + row * c;
    int64_t ia = 0, ib = 0;
    for (int64_t j = 1; j < c; j++) {
      if (x[j] > x[ia]) ia = j;
      if (y[j] > y[ib]) ib = j;
    }
    if (ia != ib) return false;
  }
  return true;
}

/* Greedy CTC decoding of t rows of c scores (class 0 the blank): the
 * labels into out, their count returned. */
static int64_t ctc_decode(const float *x, int64_t t, int64_t c, int64_t *out) {
  int64_t n = 0, prev = -1;
  for (int64_t row = 0; row < t; row++) {
    const float *v = x + row * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
      if (v[j] > v[best]) best = j;
    if (best != prev && best != 0) out[n++] = best;
    prev = best;
  }
  return n;
}

/* Whether every [t, c] block of a and b decodes to the same labels. */
static bool ctc_agrees(const float *a, const float *b, int64_t n, int64_t t, int64_t c) {
  int64_t *la = malloc(sizeof(int64_t) * (size_t)(t + 1)),
          *lb = malloc(sizeof(int64_t) * (size_t)(t + 1));
  bool same = la && lb;
  for (int64_t blk = 0; same && t * c > 0 && blk < n / (t * c); blk++) {
    int64_t na = ctc_decode(a + blk * t * c, t, c, la), nb = ctc_decode(b + blk * t * c, t, c, lb);
    same = na == nb && !memcmp(la, lb, sizeof(int64_t) * (size_t)na);
  }
  free(la), free(lb);
  return same;
}

/* Output o of sample k against fp32's; its squared error into s->err2. */
static bool output_agrees(search_t *s, int o, const pr_tensor_t *r, const pr_tensor_t *t) {
  int64_t n = pr_tensor_numel(r);
  if (t->dtype != r->dtype || t->rank != r->rank ||
      memcmp(t->dims, r->dims, sizeof(int64_t) * (size_t)r->rank))
    return false;
  if (r->dtype != PR_DTYPE_FLOAT)
    return !memcmp(t->data, r->data, (size_t)n * pr_dtype_size(r->dtype));
  const float *x = r->data, *y = t->data;
  double worst = 0, e2 = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)y[i] - x[i]);
    worst = d > worst || d != d ? d : worst; /* a NaN where fp32 has none counts */
    e2 += d * d;
  }
  s->err2[o] += e2;
  int64_t c = r->rank ? r->dims[r->rank - 1] : 1, steps = r->rank > 1 ? r->dims[r->rank - 2] : 1;
  if (s->o->metric == PR_QUANT_METRIC_ARGMAX) return argmax_agrees(x, y, n, c);
  if (s->o->metric == PR_QUANT_METRIC_CTC) return ctc_agrees(x, y, n, steps, c);
  return worst <= s->o->tolerance * (s->hi[o] - s->lo[o]);
}

static pr_status_t compare(search_t *s, int k, const pr_tensor_t *outs) {
  bool agree = true;
  for (int o = 0; o < s->n_out; o++)
    agree =
        output_agrees(s, o, &s->ref[(size_t)k * (size_t)s->n_out + (size_t)o], &outs[o]) && agree;
  s->agree += agree;
  return PR_OK;
}

/* The QDQ model of the plan's current flags, packed into *out (malloc'd). */
static pr_status_t build(search_t *s, uint8_t **out, size_t *len) {
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, s->len, s->float_model);
  if (!mp) return PR_ERR_NOMEM;
  pr__qz_plan_recount(s->plan);
  pr_status_t st = pr__qz_opset_upgrade(mp, s->plan, s->err, s->err_len);
  if (!st) st = pr__qz_write_qdq(mp, s->plan, &s->o->write, s->err, s->err_len);
  if (!st) {
    *len = onnx__model_proto__get_packed_size(mp);
    if (!(*out = malloc(*len + 1))) st = PR_ERR_NOMEM;
    if (!st) onnx__model_proto__pack(mp, *out);
  }
  onnx__model_proto__free_unpacked(mp, NULL);
  return st;
}

/* One trial of the plan's flags: the % of samples that agree and the
 * noise-to-signal score. */
static pr_status_t trial(search_t *s, double *agreement, double *score) {
  uint8_t *bytes = NULL;
  size_t len = 0;
  s->agree = 0;
  for (int o = 0; o < s->n_out; o++) s->err2[o] = 0;
  double t0 = pr__now();
  pr_status_t st = build(s, &bytes, &len);
  if (!st) st = run_all(s, bytes, len, compare);
  free(bytes);
  if (st) return st;
  s->trials++;
  *agreement = 100.0 * s->agree / s->n_eval;
  double sum = 0;
  for (int o = 0; o < s->n_out; o++) sum += s->err2[o] / (s->dev2[o] > 0 ? s->dev2[o] : 1);
  if (sum != sum) sum = INFINITY; /* a NaN: as bad as it gets, and sortable */
  if (score) *score = sum;
  int n_float = 0;
  for (int i = 0; i < s->plan->n_ops; i++) n_float += s->plan->ops[i].kept_float;
  pr__log(PR_LOG_DEBUG, "quantize: trial %d, %d ops float: %.2f%% of %d agree, noise %.3g (%.2f s)",
          s->trials, n_float, *agreement, s->n_eval, sum, pr__now() - t0);
  return PR_OK;
}

/* ---- the search ---- */

typedef struct {
  int op;       /* index into plan->ops */
  double score; /* noise to signal with this op alone in int8 */
} ranked_t;

static int by_score(const void *a, const void *b) {
  const ranked_t *x = a, *y = b;
  if (x->score != y->score) return x->score < y->score ? 1 : -1; /* most sensitive first */
  return x->op - y->op;                                          /* then in graph order */
}

/* Ranks the n live ops by sensitivity into r (a trial each). */
static pr_status_t rank_ops(search_t *s, ranked_t *r, int n) {
  pr_qz_plan_t *p = s->plan;
  s->n_eval = s->h->n < PR_QZ_RANK_SAMPLES ? s->h->n : PR_QZ_RANK_SAMPLES;
  for (int k = 0; k < n; k++) {
    for (int j = 0; j < n; j++) p->ops[r[j].op].kept_float = j != k;
    double agreement;
    pr_status_t st = trial(s, &agreement, &r[k].score);
    if (st) return st;
  }
  s->n_eval = s->h->n;
  qsort(r, (size_t)n, sizeof *r, by_score);
  return PR_OK;
}

/* Keeps the first k ranked ops float, the others int8. */
static void keep_first(search_t *s, const ranked_t *r, int n, int k) {
  for (int j = 0; j < n; j++) s->plan->ops[r[j].op].kept_float = j < k;
}

/* The fewest most sensitive ops whose float keeping reaches the target
 * (binary search: k = 0 misses it, k = n, nothing in int8, meets it); its
 * agreement into *best. */
static pr_status_t fewest(search_t *s, const ranked_t *r, int n, int *k_out, double *best) {
  int lo = 0, hi = n;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    keep_first(s, r, n, mid);
    double a;
    pr_status_t st = trial(s, &a, NULL);
    if (st) return st;
    if (a >= s->o->target)
      hi = mid, *best = a;
    else
      lo = mid;
  }
  *k_out = hi;
  return PR_OK;
}

/* Each of the k float ops, least sensitive first, back to int8 when the
 * target still holds. The k-th goes first but is not tried: the first k - 1
 * float is what the binary search saw miss the target. */
static pr_status_t prune(search_t *s, const ranked_t *r, int k, double *best) {
  for (int j = k - 2; j >= 0; j--) {
    s->plan->ops[r[j].op].kept_float = false;
    double a;
    pr_status_t st = trial(s, &a, NULL);
    if (st) return st;
    if (a >= s->o->target)
      *best = a;
    else
      s->plan->ops[r[j].op].kept_float = true;
  }
  return PR_OK;
}

static pr_status_t search(search_t *s, ranked_t *r, int n, pr_qz_search_result_t *res) {
  double a0;
  pr_status_t st = references(s);
  if (!st) st = trial(s, &a0, NULL);
  if (st) return st;
  res->agreement_all_int8 = res->agreement = a0;
  if (a0 >= s->o->target) return PR_OK;
  int k = n;
  double best = 100;
  if ((st = rank_ops(s, r, n)) || (st = fewest(s, r, n, &k, &best))) return st;
  if (k == n) {
    pr__errf(s->err, s->err_len,
             "the accuracy target (%g%% of %d held-out samples agree) is met with no node in int8 "
             "(every node in int8: %.1f%%)",
             s->o->target, s->h->n, a0);
    return PR_ERR_INVALID;
  }
  keep_first(s, r, n, k);
  if ((st = prune(s, r, k, &best))) return st;
  res->agreement = best;
  return PR_OK;
}

pr_status_t pr__qz_search(const uint8_t *float_model, size_t len, pr_qz_plan_t *plan,
                          const pr_qz_holdout_t *h, const pr_qz_search_options_t *o,
                          pr_qz_search_result_t *res, char *err, size_t err_len) {
  memset(res, 0, sizeof *res);
  if (!h->n) {
    pr__errf(err, err_len, "the accuracy search needs held-out samples");
    return PR_ERR_INVALID;
  }
  search_t s = {.float_model = float_model,
                .len = len,
                .plan = plan,
                .h = h,
                .n_eval = h->n,
                .o = o,
                .err = err,
                .err_len = err_len};
  ranked_t *r = calloc((size_t)plan->n_ops + 1, sizeof *r);
  int n = 0;
  for (int i = 0; r && i < plan->n_ops; i++) {
    plan->ops[i].kept_float = false;
    if (!plan->ops[i].dropped) r[n++].op = i;
  }
  pr_status_t st = r ? search(&s, r, n, res) : PR_ERR_NOMEM;
  res->trials = s.trials;
  pr__qz_plan_recount(plan);
  for (int k = 0; s.ref && k < h->n * s.n_out; k++) pr_engine_tensor_free(&s.ref[k]);
  free(s.ref), free(s.lo), free(s.hi), free(s.mean), free(s.dev2), free(s.err2), free(r);
  if (st == PR_ERR_NOMEM) pr__errf(err, err_len, "out of memory in the accuracy search");
  return st;
}
