/* Einsum: the general equation (implicit or explicit output, ellipsis,
 * repeated subscripts in one input for diagonals, summed subscripts), every
 * numeric type.
 *
 * Notes on the design:
 * - The equation becomes labels: A-Z are 0..25, a-z 26..51 and the axes of
 *   the ellipsis 52.. (right-aligned, broadcast across the inputs). Each
 *   label has one extent; each input has one element stride per label, the
 *   sum of the strides of its axes with that label (a repeated subscript
 *   walks the diagonal), 0 when the input lacks it or broadcasts it.
 * - The kernel walks the output labels (one output element per task) and,
 *   inside, the summed labels with an odometer over the strides, multiplying
 *   one element of each input. Floats compute in double, integers in
 *   uint64 (two's complement wrap, as the other integer kernels).
 * - No GEMM path: the models that use Einsum run it on small operands; a
 *   transpose + batched-GEMM lowering for float is the next step. */
#include <ctype.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "engine/ops/ops.h"

#define EIN_LETTERS 52
#define EIN_LABELS (EIN_LETTERS + PR_MAX_RANK)
#define EIN_MAX_IN 16

typedef struct {
  int n_in;
  int n_labels;            /* output labels first, then the summed ones */
  int n_out;               /* output rank */
  int64_t dim[EIN_LABELS]; /* extent of each label, in walk order */
  int64_t stride[EIN_MAX_IN][EIN_LABELS];
  int64_t out_numel, sum_numel;
} einsum_plan_t;

static int letter_label(char ch) {
  return ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? 26 + (ch - 'a') : -1;
}

/* One term of the equation: its labels in axis order (the ellipsis as
 * EIN_LETTERS + its axis once widths are known: -2 marks it here). */
typedef struct {
  int n;
  int lab[PR_MAX_RANK + 1];
  bool ellipsis;
} term_t;

/* parse [letters and at most one "..."] up to one of stop; NULL on error */
static const char *parse_term(const char *p, term_t *t) {
  t->n = 0;
  t->ellipsis = false;
  for (;; p++) {
    while (*p == ' ') p++;
    if (!*p || *p == ',' || *p == '-') return p;
    if (p[0] == '.') {
      if (p[1] != '.' || p[2] != '.' || t->ellipsis || t->n > PR_MAX_RANK) return NULL;
      t->ellipsis = true;
      t->lab[t->n++] = -2;
      p += 2;
      continue;
    }
    int l = letter_label(*p);
    if (l < 0 || t->n > PR_MAX_RANK) return NULL;
    t->lab[t->n++] = l;
  }
}

/* The equation's terms: one per input, and the output term when explicit. */
static pr_status_t parse_equation(pr_compile_t *c, pr_node_t *n, term_t *in, term_t *out,
                                  bool *explicit_out) {
  const char *eq = pr__attr_string(n->m, "equation", NULL);
  if (!eq) return pr__fail(c, n, PR_ERR_INVALID, "needs an equation");
  if (n->n_in < 1 || n->n_in > EIN_MAX_IN)
    return pr__fail(c, n, PR_ERR_INVALID, "%d inputs", n->n_in);
  const char *p = eq;
  int k = 0;
  for (;; k++) {
    if (k >= n->n_in) return pr__fail(c, n, PR_ERR_INVALID, "more terms than inputs");
    if (!(p = parse_term(p, &in[k]))) return pr__fail(c, n, PR_ERR_INVALID, "bad equation");
    if (*p != ',') break;
    p++;
  }
  if (k + 1 != n->n_in) return pr__fail(c, n, PR_ERR_INVALID, "terms and inputs differ");
  *explicit_out = false;
  if (*p == '-') {
    if (p[1] != '>') return pr__fail(c, n, PR_ERR_INVALID, "bad equation");
    if (!(p = parse_term(p + 2, out)) || *p)
      return pr__fail(c, n, PR_ERR_INVALID, "bad output term");
    *explicit_out = true;
  } else if (*p) {
    return pr__fail(c, n, PR_ERR_INVALID, "bad equation");
  }

  return PR_OK;
}

/* Each label's extent (letters, then the ellipsis axes right-aligned), how
 * many times it appears, each input's stride per label, and the ellipsis
 * rank. */
static pr_status_t label_extents(pr_compile_t *c, pr_node_t *n, const term_t *in, einsum_plan_t *pl,
                                 int64_t *ext, int *count, int *ell_out) {
  /* extents: letters, then the ellipsis axes right-aligned */
  int ell = 0;
  for (int l = 0; l < EIN_LABELS; l++) count[l] = 0;
  for (int l = 0; l < EIN_LABELS; l++) ext[l] = -1;
  for (int k = 0; k < n->n_in; k++) {
    pr_value_t *v = pr__in(c, n, k);
    if (!v || !pr_dtype_size(v->dtype) || v->dtype != pr__in(c, n, 0)->dtype)
      return pr__fail(c, n, PR_ERR_INVALID, "inputs must share one element type");
    int letters = in[k].n - (in[k].ellipsis ? 1 : 0), e = v->rank - letters;
    if (e < 0 || (!in[k].ellipsis && e != 0))
      return pr__fail(c, n, PR_ERR_INVALID, "term %d does not match input rank %d", k, v->rank);
    if (e > ell) ell = e;
  }
  for (int k = 0; k < n->n_in; k++) {
    pr_value_t *v = pr__in(c, n, k);
    int letters = in[k].n - (in[k].ellipsis ? 1 : 0), e = v->rank - letters, ax = 0;
    memset(pl->stride[k], 0, sizeof pl->stride[k]);
    int64_t st[PR_MAX_RANK], acc = 1;
    for (int a = v->rank - 1; a >= 0; a--) st[a] = acc, acc *= v->dims[a];
    for (int t = 0; t < in[k].n; t++) {
      int labs[PR_MAX_RANK], nl = 0;
      if (in[k].lab[t] == -2)
        for (int j = 0; j < e; j++) labs[nl++] = EIN_LETTERS + (ell - e) + j;
      else
        labs[nl++] = in[k].lab[t];
      for (int j = 0; j < nl; j++, ax++) {
        int l = labs[j];
        int64_t d = v->dims[ax];
        bool is_ell = l >= EIN_LETTERS;
        if (ext[l] < 0 || (is_ell && ext[l] == 1))
          ext[l] = d;
        else if (d != ext[l] && !(is_ell && d == 1))
          return pr__fail(c, n, PR_ERR_INVALID, "subscript %d has extents %lld and %lld", l,
                          (long long)ext[l], (long long)d);
        if (!(is_ell && d == 1 && ext[l] != 1)) pl->stride[k][l] += st[ax];
        count[l]++;
      }
    }
  }
  /* a broadcast ellipsis axis (extent 1 here, more elsewhere) reads index 0 */
  for (int k = 0; k < n->n_in; k++) {
    pr_value_t *v = pr__in(c, n, k);
    int letters = in[k].n - (in[k].ellipsis ? 1 : 0), e = v->rank - letters;
    int first = -1;
    for (int t = 0; t < in[k].n; t++)
      if (in[k].lab[t] == -2) first = t;
    if (first < 0) continue;
    int ax0 = first;
    for (int j = 0; j < e; j++)
      if (v->dims[ax0 + j] == 1 && ext[EIN_LETTERS + (ell - e) + j] != 1)
        pl->stride[k][EIN_LETTERS + (ell - e) + j] = 0;
  }

  *ell_out = ell;
  return PR_OK;
}

/* The output's labels: the explicit term, or the ellipsis then the letters
 * seen once in ASCII order. */
static pr_status_t output_labels(pr_compile_t *c, pr_node_t *n, const term_t *out,
                                 bool explicit_out, const int64_t *ext, const int *count, int ell,
                                 int *olab, int *no_out, bool *in_out) {
  /* output labels */
  int no = 0;
  for (int l = 0; l < EIN_LABELS; l++) in_out[l] = false;
  if (explicit_out) {
    for (int t = 0; t < out->n; t++) {
      if (out->lab[t] == -2) {
        for (int j = 0; j < ell; j++) olab[no++] = EIN_LETTERS + j;
        continue;
      }
      int l = out->lab[t];
      if (ext[l] < 0 || in_out[l])
        return pr__fail(c, n, PR_ERR_INVALID, "output subscript not in the inputs or repeated");
      olab[no++] = l;
      in_out[l] = true;
    }
    for (int j = 0; j < no; j++) in_out[olab[j]] = true;
  } else { /* the ellipsis, then the letters seen once, in ASCII order */
    for (int j = 0; j < ell; j++) olab[no++] = EIN_LETTERS + j, in_out[EIN_LETTERS + j] = true;
    for (int l = 0; l < EIN_LETTERS; l++)
      if (count[l] == 1) olab[no++] = l, in_out[l] = true;
  }
  if (no > PR_MAX_RANK) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "output rank %d", no);
  *no_out = no;
  return PR_OK;
}

static pr_status_t einsum_plan(pr_compile_t *c, pr_node_t *n, einsum_plan_t *pl,
                               int64_t *out_dims) {
  term_t in[EIN_MAX_IN], out;
  bool explicit_out;
  int64_t ext[EIN_LABELS];
  int count[EIN_LABELS], ell = 0, olab[EIN_LABELS], no = 0;
  bool in_out[EIN_LABELS];
  pr_status_t st;
  if ((st = parse_equation(c, n, in, &out, &explicit_out)) ||
      (st = label_extents(c, n, in, pl, ext, count, &ell)) ||
      (st = output_labels(c, n, &out, explicit_out, ext, count, ell, olab, &no, in_out)))
    return st;
  /* walk order: output labels, then every other label in use */
  int order[EIN_LABELS], nl = 0;
  for (int j = 0; j < no; j++) order[nl++] = olab[j];
  for (int l = 0; l < EIN_LABELS; l++)
    if (ext[l] >= 0 && !in_out[l]) order[nl++] = l;
  int64_t st2[EIN_MAX_IN][EIN_LABELS];
  pl->out_numel = pl->sum_numel = 1;
  for (int j = 0; j < nl; j++) {
    pl->dim[j] = ext[order[j]];
    for (int k = 0; k < n->n_in; k++) st2[k][j] = pl->stride[k][order[j]];
    if (j < no)
      out_dims[j] = ext[order[j]], pl->out_numel *= ext[order[j]];
    else
      pl->sum_numel *= ext[order[j]];
  }
  memcpy(pl->stride, st2, sizeof st2);
  pl->n_in = n->n_in;
  pl->n_labels = nl;
  pl->n_out = no;
  return PR_OK;
}

static pr_status_t infer_einsum(pr_compile_t *c, pr_node_t *n) {
  einsum_plan_t pl;
  int64_t od[EIN_LABELS];
  pr_status_t st = einsum_plan(c, n, &pl, od);
  if (st) return st;
  pr_value_t *a = pr__in(c, n, 0);
  if (a->dtype == PR_DTYPE_BOOL || a->dtype == PR_DTYPE_STRING)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, pl.n_out, od);
  return PR_OK;
}

static pr_status_t prepare_einsum(pr_compile_t *c, pr_node_t *n) {
  einsum_plan_t *pl = malloc(sizeof *pl);
  if (!pl) return PR_ERR_NOMEM;
  n->state = pl;
  int64_t od[EIN_LABELS];
  return einsum_plan(c, n, pl, od);
}

static bool is_float_type(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE || t == PR_DTYPE_FLOAT16;
}

static void store(void *p, pr_dtype_t t, int64_t i, double d, uint64_t u) {
  switch (t) {
    case PR_DTYPE_FLOAT: ((float *)p)[i] = (float)d; break;
    case PR_DTYPE_DOUBLE: ((double *)p)[i] = d; break;
    case PR_DTYPE_FLOAT16: ((uint16_t *)p)[i] = pr__float_to_half((float)d); break;
    case PR_DTYPE_INT8:
    case PR_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)u; break;
    case PR_DTYPE_INT16:
    case PR_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)u; break;
    case PR_DTYPE_INT32:
    case PR_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)u; break;
    default: ((uint64_t *)p)[i] = u; break;
  }
}

static void run_einsum(pr_exec_t *x, pr_node_t *n) {
  const einsum_plan_t *pl = n->state;
  const pr_value_t *o = &x->v[n->out[0]];
  pr_dtype_t t = o->dtype;
  bool fl = is_float_type(t);
  const void *src[EIN_MAX_IN];
  for (int k = 0; k < pl->n_in; k++) src[k] = pr__xin(x, n, k);
  int no = pl->n_out, nl = pl->n_labels, nin = pl->n_in;
#pragma omp parallel for num_threads(x->threads) if (pl->out_numel * pl->sum_numel * nin >= \
                                                     PR_PAR_MIN)
  for (int64_t oi = 0; oi < pl->out_numel; oi++) {
    int64_t base[EIN_MAX_IN] = {0}, off[EIN_MAX_IN], idx[EIN_LABELS] = {0}, rem = oi;
    for (int j = no - 1; j >= 0; j--) {
      int64_t q = rem % pl->dim[j];
      rem /= pl->dim[j];
      for (int k = 0; k < nin; k++) base[k] += q * pl->stride[k][j];
    }
    for (int k = 0; k < nin; k++) off[k] = base[k];
    double sd = 0;
    uint64_t su = 0;
    for (int64_t s = 0; s < pl->sum_numel; s++) {
      if (fl) {
        double p = 1;
        for (int k = 0; k < nin; k++) p *= pr__load_double(src[k], t, off[k]);
        sd += p;
      } else {
        uint64_t p = 1;
        for (int k = 0; k < nin; k++) p *= (uint64_t)pr__load_int64(src[k], t, off[k]);
        su += p;
      }
      /* odometer over the summed labels */
      for (int j = nl - 1; j >= no; j--) {
        if (++idx[j] < pl->dim[j]) {
          for (int k = 0; k < nin; k++) off[k] += pl->stride[k][j];
          break;
        }
        idx[j] = 0;
        for (int k = 0; k < nin; k++) off[k] -= (pl->dim[j] - 1) * pl->stride[k][j];
      }
    }
    store(o->ptr, t, oi, sd, su);
  }
}

const pr_op_t pr__op_einsum = {.name = "Einsum",
                               .attrs = "equation",
                               .min_opset = 12,
                               .max_inputs = EIN_MAX_IN,
                               .infer = infer_einsum,
                               .prepare = prepare_einsum,
                               .run = run_einsum,
                               .destroy = free};
