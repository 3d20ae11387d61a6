/* TfIdfVectorizer on integer tokens (int32, int64): counts of the n-grams
 * of a pool in each row of the input, as term frequencies, IDF weights or
 * both. String tokens are left out: the engine has no string tensors.
 *
 * Notes on the design:
 * - pool_int64s holds the 1-grams, then the 2-grams... from the offsets in
 *   ngram_counts; n-gram number j (in pool order) counts into output column
 *   ngram_indexes[j].
 * - An n-gram takes n tokens spaced skip + 1 apart, for skip 0 ..
 *   max_skip_count; a 1-gram is counted once per position (every skip gives
 *   the same one), as ONNX Runtime does.
 * - Pools are small (a vocabulary of n-grams): each candidate is looked up
 *   by a linear scan over the pool's n-grams of its length. */
#include <string.h>

#include "engine/ops/ops.h"

typedef enum { TFIDF_TF, TFIDF_IDF, TFIDF_TFIDF } tfidf_mode_t;

static pr_status_t check_tfidf(const pr_mnode_t *m, int opset, char *err, size_t len) {
  (void)opset;
  const char *name = pr__mnode_name(m);
  const int64_t *counts, *idx, *pool;
  const float *w;
  int nc = pr__attr_ints(m, "ngram_counts", &counts), ni = pr__attr_ints(m, "ngram_indexes", &idx);
  int np = pr__attr_ints(m, "pool_int64s", &pool), nw = pr__attr_floats(m, "weights", &w);
  int64_t lo = pr__attr_int(m, "min_gram_length", 0), hi = pr__attr_int(m, "max_gram_length", 0);
  const char *mode = pr__attr_string(m, "mode", "");
  if (pr__attr_find(m, "pool_strings")) {
    snprintf(err, len, "node '%s' (TfIdfVectorizer): string pools are not supported", name);
    return PR_ERR_UNSUPPORTED;
  }
  bool ok = nc > 0 && ni > 0 && lo >= 1 && hi >= lo && hi <= nc &&
            pr__attr_int(m, "max_skip_count", 0) >= 0 && (nw == 0 || nw == ni) &&
            (!strcmp(mode, "TF") || !strcmp(mode, "IDF") || !strcmp(mode, "TFIDF"));
  /* offsets rise, each group a whole number of n-grams, one index per n-gram */
  int64_t grams = 0;
  for (int k = 0; ok && k < nc; k++) {
    int64_t end = k + 1 < nc ? counts[k + 1] : np;
    ok = counts[k] >= 0 && counts[k] <= end && end <= np && (end - counts[k]) % (k + 1) == 0;
    if (ok) grams += (end - counts[k]) / (k + 1);
  }
  ok = ok && grams == ni;
  for (int j = 0; ok && j < ni; j++) ok = idx[j] >= 0 && idx[j] < (1 << 24);
  if (!ok) {
    snprintf(err, len, "node '%s' (TfIdfVectorizer): inconsistent attributes", name);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

static pr_status_t infer_tfidf(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0);
  if (a->dtype != PR_DTYPE_INT32 && a->dtype != PR_DTYPE_INT64)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  if (a->rank != 1 && a->rank != 2)
    return pr__fail(c, n, PR_ERR_INVALID, "input must be [C] or [N, C]");
  const int64_t *idx;
  int ni = pr__attr_ints(n->m, "ngram_indexes", &idx);
  int64_t cols = 0;
  for (int j = 0; j < ni; j++) cols = idx[j] + 1 > cols ? idx[j] + 1 : cols;
  int64_t d[2] = {a->rank == 2 ? a->dims[0] : cols, cols};
  pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_FLOAT, a->rank, a->rank == 2 ? d : d + 1);
  return PR_OK;
}

/* number (pool order) of the n-gram of tokens t[0], t[step], ..., or -1 */
static int64_t find_gram(const pr_mnode_t *m, const void *x, pr_dtype_t t, int64_t at, int64_t step,
                         int64_t len) {
  const int64_t *counts, *pool;
  int nc = pr__attr_ints(m, "ngram_counts", &counts), np = pr__attr_ints(m, "pool_int64s", &pool);
  int64_t first = 0; /* n-grams before this length */
  for (int k = 0; k + 1 < len; k++)
    first += ((k + 1 < nc ? counts[k + 1] : np) - counts[k]) / (k + 1);
  int64_t start = counts[len - 1], end = len < nc ? counts[len] : np;
  for (int64_t g = start, j = 0; g < end; g += len, j++) {
    int64_t q = 0;
    while (q < len && pool[g + q] == pr__load_int64(x, t, at + q * step)) q++;
    if (q == len) return first + j;
  }
  return -1;
}

static void run_tfidf(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  const pr_mnode_t *m = n->m;
  const int64_t *idx;
  const float *w;
  pr__attr_ints(m, "ngram_indexes", &idx);
  int nw = pr__attr_floats(m, "weights", &w);
  const char *ms = pr__attr_string(m, "mode", "TF");
  tfidf_mode_t mode = !strcmp(ms, "TF") ? TFIDF_TF : !strcmp(ms, "IDF") ? TFIDF_IDF : TFIDF_TFIDF;
  int64_t lo = pr__attr_int(m, "min_gram_length", 1), hi = pr__attr_int(m, "max_gram_length", 1);
  int64_t skips = pr__attr_int(m, "max_skip_count", 0);
  int64_t rows = a->rank == 2 ? a->dims[0] : 1, cols = a->dims[a->rank - 1];
  int64_t width = o->dims[o->rank - 1];
  float *out = o->ptr;
  memset(out, 0, o->nbytes);
  for (int64_t r = 0; r < rows; r++) {
    float *y = out + r * width;
    for (int64_t i = 0; i < cols; i++)
      for (int64_t len = lo; len <= hi; len++)
        for (int64_t s = 0; s <= (len == 1 ? 0 : skips); s++) {
          if (i + (len - 1) * (s + 1) >= cols) break;
          int64_t g = find_gram(m, a->ptr, a->dtype, r * cols + i, s + 1, len);
          if (g >= 0) y[idx[g]] += 1;
        }
    /* the column of each pool n-gram: a count, its weight, or both */
    for (int64_t j = 0; mode != TFIDF_TF && j < (int64_t)nw; j++) {
      float *cell = &y[idx[j]];
      *cell = mode == TFIDF_IDF ? (*cell > 0 ? w[j] : 0) : *cell * w[j];
    }
    if (mode == TFIDF_IDF && nw == 0)
      for (int64_t k = 0; k < width; k++) y[k] = y[k] > 0 ? 1 : 0;
  }
}

const pr_op_t pr__op_tfidf_vectorizer = {
    .name = "TfIdfVectorizer",
    .attrs =
        "max_gram_length,max_skip_count,min_gram_length,mode,ngram_counts,ngram_indexes,"
        "pool_int64s,pool_strings,weights",
    .min_opset = 9,
    .max_inputs = 1,
    .check = check_tfidf,
    .infer = infer_tfidf,
    .run = run_tfidf};
