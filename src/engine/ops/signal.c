/* Signal processing: DFT (opset 17, and 20's axis input), STFT (17),
 * HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (17).
 * Float or double signals; complex values are a trailing dimension of 2
 * (real, imaginary), a real signal has a trailing 1.
 *
 * Notes on the design: the transforms are direct sums in double over a
 * table of the n twiddle factors (index f*k mod n), O(n^2) per line: exact
 * to the last float bit and fine for the frame sizes of speech models.
 * Everything that decides a shape (dft_length, frame_step, frame_length,
 * window sizes, the mel parameters) must be a constant; the messages say so
 * with that word, which lets a caller retry with inputs fixed.
 */
#include <math.h>
#include <string.h>

#include "engine/ops/ops.h"

static bool is_real_type(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE;
}

static bool output_type_ok(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE || pr__is_integer(t);
}

/* A constant integer scalar (or one-element) input k into *val. */
static pr_status_t const_scalar(pr_compile_t *c, pr_node_t *n, int k, const char *what,
                                int64_t *val) {
  int64_t v[1];
  pr_value_t *in = pr__in(c, n, k);
  if (!in) return pr__fail(c, n, PR_ERR_INVALID, "%s is missing", what);
  if (in->dtype != PR_DTYPE_INT32 && in->dtype != PR_DTYPE_INT64)
    return pr__fail(c, n, PR_ERR_INVALID, "%s must be INT32 or INT64", what);
  if (pr__value_numel(in) != 1) return pr__fail(c, n, PR_ERR_INVALID, "%s must be a scalar", what);
  if (pr__const_ints(in, v, 1) != 1) return pr__need_values(c, n, "%s must be a constant", what);
  *val = v[0];
  return PR_OK;
}

/* ---- the transform ---- */

/* Twiddles of an n-point transform: cos and sin of 2 pi m / n. */
typedef struct {
  int64_t n;
  double *cos, *sin;
} twiddle_t;

static pr_status_t twiddle_init(twiddle_t *t, int64_t n) {
  t->n = n;
  t->cos = malloc((size_t)n * sizeof(double));
  t->sin = malloc((size_t)n * sizeof(double));
  if (!t->cos || !t->sin) return PR_ERR_NOMEM;
  for (int64_t m = 0; m < n; m++) {
    double a = 2.0 * M_PI * (double)m / (double)n;
    t->cos[m] = cos(a), t->sin[m] = sin(a);
  }
  return PR_OK;
}

static void twiddle_free(twiddle_t *t) {
  free(t->cos);
  free(t->sin);
}

/* out[f] = sum_k in[k] exp(-+2 pi i f k / n) for f < n_out, in[] holding n
 * complex values (re, im interleaved); inverse: + and a 1/n scale. */
static void dft_line(const twiddle_t *t, const double *in, double *out, int64_t n_out,
                     bool inverse) {
  int64_t n = t->n;
  double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / (double)n : 1.0;
  for (int64_t f = 0; f < n_out; f++) {
    double re = 0, im = 0;
    int64_t m = 0; /* f * k mod n */
    for (int64_t k = 0; k < n; k++) {
      double c = t->cos[m], s = sign * t->sin[m];
      re += in[2 * k] * c - in[2 * k + 1] * s;
      im += in[2 * k] * s + in[2 * k + 1] * c;
      m += f;
      if (m >= n) m %= n;
    }
    out[2 * f] = re * scale, out[2 * f + 1] = im * scale;
  }
}

/* ---- DFT ---- */

typedef struct {
  int axis;
  int64_t n, n_out; /* transform length, output length along the axis */
  twiddle_t tw;
  double *line, *res;
} dft_state_t;

static void destroy_dft(void *p) {
  dft_state_t *s = p;
  if (!s) return;
  twiddle_free(&s->tw);
  free(s->line);
  free(s->res);
  free(s);
}

static pr_status_t dft_geometry(pr_compile_t *c, pr_node_t *n, int *axis, int64_t *len,
                                int64_t *n_out) {
  pr_value_t *x = pr__in(c, n, 0);
  if (!is_real_type(x->dtype)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT or DOUBLE");
  if (x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2))
    return pr__fail(c, n, PR_ERR_INVALID, "the last dimension must be 1 (real) or 2 (complex)");
  int64_t a = pr__attr_int(n->m, "axis", 1);
  pr_status_t st;
  if (c->opset >= 20) { /* axis became an input, counted over all dimensions */
    a = -2;
    if (pr__in(c, n, 2) && (st = const_scalar(c, n, 2, "axis", &a))) return st;
    if (a < 0) a += x->rank;
    if (a < 0 || a >= x->rank - 1) return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  } else if (a < 0 || a >= x->rank - 1) {
    return pr__fail(c, n, PR_ERR_INVALID, "axis out of range");
  }
  *axis = (int)a;
  *len = x->dims[a];
  if (pr__in(c, n, 1) && (st = const_scalar(c, n, 1, "dft_length", len))) return st;
  if (*len < 1) return pr__fail(c, n, PR_ERR_INVALID, "dft_length must be positive");
  bool onesided = pr__attr_int(n->m, "onesided", 0), inverse = pr__attr_int(n->m, "inverse", 0);
  if (onesided && (inverse || x->dims[x->rank - 1] != 1))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "onesided needs a real input and no inverse");
  *n_out = onesided ? *len / 2 + 1 : *len;
  return PR_OK;
}

static pr_status_t infer_dft(pr_compile_t *c, pr_node_t *n) {
  int axis = 0;
  int64_t len = 0, n_out = 0;
  pr_status_t st = dft_geometry(c, n, &axis, &len, &n_out);
  if (st) return st;
  pr_value_t *x = pr__in(c, n, 0);
  int64_t d[PR_MAX_RANK];
  for (int k = 0; k < x->rank; k++) d[k] = x->dims[k];
  d[axis] = n_out;
  d[x->rank - 1] = 2;
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, x->rank, d);
  return PR_OK;
}

static pr_status_t prepare_dft(pr_compile_t *c, pr_node_t *n) {
  dft_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_status_t st = dft_geometry(c, n, &s->axis, &s->n, &s->n_out);
  if (st) return st;
  if ((st = twiddle_init(&s->tw, s->n))) return st;
  s->line = malloc((size_t)s->n * 2 * sizeof(double));
  s->res = malloc((size_t)s->n_out * 2 * sizeof(double));
  return s->line && s->res ? PR_OK : PR_ERR_NOMEM;
}

static void run_dft(pr_exec_t *x, pr_node_t *n) {
  dft_state_t *s = n->state;
  const pr_value_t *in = &x->v[n->in[0]], *ov = &x->v[n->out[0]];
  int rank = in->rank, axis = s->axis;
  int64_t comp = in->dims[rank - 1], in_len = in->dims[axis], outer = 1, inner = 1;
  for (int k = 0; k < axis; k++) outer *= in->dims[k];
  for (int k = axis + 1; k < rank - 1; k++) inner *= in->dims[k];
  int64_t take = in_len < s->n ? in_len : s->n;
  bool inverse = pr__attr_int(n->m, "inverse", 0);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      memset(s->line, 0, (size_t)s->n * 2 * sizeof(double));
      for (int64_t k = 0; k < take; k++) {
        int64_t at = ((o * in_len + k) * inner + i) * comp;
        s->line[2 * k] = pr__load_double(in->ptr, in->dtype, at);
        if (comp == 2) s->line[2 * k + 1] = pr__load_double(in->ptr, in->dtype, at + 1);
      }
      dft_line(&s->tw, s->line, s->res, s->n_out, inverse);
      for (int64_t f = 0; f < s->n_out; f++) {
        int64_t at = ((o * s->n_out + f) * inner + i) * 2;
        pr__store_double(ov->ptr, ov->dtype, at, s->res[2 * f]);
        pr__store_double(ov->ptr, ov->dtype, at + 1, s->res[2 * f + 1]);
      }
    }
}

const pr_op_t pr__op_dft = {.name = "DFT",
                            .attrs = "axis,inverse,onesided",
                            .min_opset = 17,
                            .max_inputs = 3,
                            .infer = infer_dft,
                            .prepare = prepare_dft,
                            .run = run_dft,
                            .destroy = destroy_dft};

/* ---- STFT ---- */

typedef struct {
  int64_t step, len, frames, bins;
  twiddle_t tw;
  double *line, *res;
} stft_state_t;

static void destroy_stft(void *p) {
  stft_state_t *s = p;
  if (!s) return;
  twiddle_free(&s->tw);
  free(s->line);
  free(s->res);
  free(s);
}

static pr_status_t stft_geometry(pr_compile_t *c, pr_node_t *n, stft_state_t *g) {
  pr_value_t *x = pr__in(c, n, 0), *w = pr__in(c, n, 2);
  if (!is_real_type(x->dtype)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT or DOUBLE");
  if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
    return pr__fail(c, n, PR_ERR_INVALID, "signal must be [batch, length, 1 or 2]");
  pr_status_t st = const_scalar(c, n, 1, "frame_step", &g->step);
  if (st) return st;
  g->len = -1;
  if (w) {
    if (w->dtype != x->dtype || w->rank != 1)
      return pr__fail(c, n, PR_ERR_INVALID, "window must be 1-D of the signal's type");
    g->len = w->dims[0];
  }
  int64_t fl;
  if (pr__in(c, n, 3)) {
    if ((st = const_scalar(c, n, 3, "frame_length", &fl))) return st;
    if (g->len >= 0 && fl != g->len)
      return pr__fail(c, n, PR_ERR_INVALID, "frame_length differs from the window's length");
    g->len = fl;
  }
  if (g->len < 1 || g->step < 1 || g->len > x->dims[1])
    return pr__fail(c, n, PR_ERR_INVALID, "needs a frame length in [1, %lld] and a positive step",
                    (long long)x->dims[1]);
  bool onesided = pr__attr_int(n->m, "onesided", 1);
  if (onesided && x->dims[2] != 1)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "onesided needs a real signal");
  g->frames = (x->dims[1] - g->len) / g->step + 1;
  g->bins = onesided ? g->len / 2 + 1 : g->len;
  return PR_OK;
}

static pr_status_t infer_stft(pr_compile_t *c, pr_node_t *n) {
  stft_state_t g = {0};
  pr_status_t st = stft_geometry(c, n, &g);
  if (st) return st;
  pr_value_t *x = pr__in(c, n, 0);
  int64_t d[4] = {x->dims[0], g.frames, g.bins, 2};
  pr__value_set_shape(pr__out(c, n, 0), x->dtype, 4, d);
  return PR_OK;
}

static pr_status_t prepare_stft(pr_compile_t *c, pr_node_t *n) {
  stft_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_status_t st = stft_geometry(c, n, s);
  if (st) return st;
  if ((st = twiddle_init(&s->tw, s->len))) return st;
  s->line = malloc((size_t)s->len * 2 * sizeof(double));
  s->res = malloc((size_t)s->bins * 2 * sizeof(double));
  return s->line && s->res ? PR_OK : PR_ERR_NOMEM;
}

static void run_stft(pr_exec_t *x, pr_node_t *n) {
  stft_state_t *s = n->state;
  const pr_value_t *in = &x->v[n->in[0]], *ov = &x->v[n->out[0]];
  const void *w = n->n_in > 2 && n->in[2] >= 0 ? pr__xin(x, n, 2) : NULL;
  int64_t B = in->dims[0], L = in->dims[1], comp = in->dims[2];
  for (int64_t b = 0; b < B; b++)
    for (int64_t f = 0; f < s->frames; f++) {
      for (int64_t k = 0; k < s->len; k++) {
        int64_t at = (b * L + f * s->step + k) * comp;
        double wk = w ? pr__load_double(w, in->dtype, k) : 1.0;
        s->line[2 * k] = pr__load_double(in->ptr, in->dtype, at) * wk;
        s->line[2 * k + 1] = comp == 2 ? pr__load_double(in->ptr, in->dtype, at + 1) * wk : 0.0;
      }
      dft_line(&s->tw, s->line, s->res, s->bins, false);
      for (int64_t k = 0; k < 2 * s->bins; k++)
        pr__store_double(ov->ptr, ov->dtype, (b * s->frames + f) * s->bins * 2 + k, s->res[k]);
    }
}

const pr_op_t pr__op_stft = {.name = "STFT",
                             .attrs = "onesided",
                             .min_opset = 17,
                             .max_inputs = 4,
                             .infer = infer_stft,
                             .prepare = prepare_stft,
                             .run = run_stft,
                             .destroy = destroy_stft};

/* ---- window functions: a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N),
 * N the size (periodic) or the size - 1 (symmetric) ---- */

typedef struct {
  double a0, a1, a2;
} window_t;

static pr_status_t infer_window(pr_compile_t *c, pr_node_t *n) {
  int64_t size;
  pr_status_t st = const_scalar(c, n, 0, "size", &size);
  if (st) return st;
  if (size < 0) return pr__fail(c, n, PR_ERR_INVALID, "negative size");
  pr_dtype_t t = (pr_dtype_t)pr__attr_int(n->m, "output_datatype", PR_DTYPE_FLOAT);
  if (!output_type_ok(t)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "output_datatype %d", (int)t);
  pr__value_set_shape(pr__out(c, n, 0), t, 1, &size);
  return PR_OK;
}

static void run_window(pr_exec_t *x, pr_node_t *n, window_t w) {
  const pr_value_t *o = &x->v[n->out[0]];
  int64_t size = o->dims[0];
  double N = (double)(pr__attr_int(n->m, "periodic", 1) ? size : size - 1);
  for (int64_t k = 0; k < size; k++) {
    double a = 2.0 * M_PI * (double)k / N;
    pr__store_double(o->ptr, o->dtype, k, w.a0 - w.a1 * cos(a) + w.a2 * cos(2 * a));
  }
}

static void run_hann(pr_exec_t *x, pr_node_t *n) {
  run_window(x, n, (window_t){0.5, 0.5, 0});
}

static void run_hamming(pr_exec_t *x, pr_node_t *n) {
  run_window(x, n, (window_t){25.0 / 46.0, 1.0 - 25.0 / 46.0, 0});
}

static void run_blackman(pr_exec_t *x, pr_node_t *n) {
  run_window(x, n, (window_t){0.42, 0.5, 0.08});
}

#define WINDOW_OP(var, onnx_name, runner)                   \
  const pr_op_t var = {.name = onnx_name,                   \
                       .attrs = "output_datatype,periodic", \
                       .min_opset = 17,                     \
                       .max_inputs = 1,                     \
                       .infer = infer_window,               \
                       .run = runner}

WINDOW_OP(pr__op_hann_window, "HannWindow", run_hann);
WINDOW_OP(pr__op_hamming_window, "HammingWindow", run_hamming);
WINDOW_OP(pr__op_blackman_window, "BlackmanWindow", run_blackman);

/* ---- MelWeightMatrix: triangular filters over the DFT bins ---- */

typedef struct {
  int64_t mel_bins, dft_length, sample_rate;
  double lower, upper;
} mel_t;

static pr_status_t mel_params(pr_compile_t *c, pr_node_t *n, mel_t *p) {
  pr_status_t st;
  if ((st = const_scalar(c, n, 0, "num_mel_bins", &p->mel_bins)) ||
      (st = const_scalar(c, n, 1, "dft_length", &p->dft_length)) ||
      (st = const_scalar(c, n, 2, "sample_rate", &p->sample_rate)))
    return st;
  double *edge[2] = {&p->lower, &p->upper};
  for (int k = 0; k < 2; k++) {
    pr_value_t *v = pr__in(c, n, 3 + k);
    if (!v || !is_real_type(v->dtype) || pr__value_numel(v) != 1)
      return pr__fail(c, n, PR_ERR_INVALID, "edge frequencies must be FLOAT scalars");
    if (!v->is_const) return pr__need_values(c, n, "edge frequencies must be a constant");
    *edge[k] = pr__load_double(v->data, v->dtype, 0);
  }
  if (p->mel_bins < 1 || p->dft_length < 1 || p->sample_rate < 1 || p->lower < 0 ||
      p->upper <= p->lower)
    return pr__fail(c, n, PR_ERR_INVALID, "bad mel parameters");
  return PR_OK;
}

static pr_status_t infer_mel(pr_compile_t *c, pr_node_t *n) {
  mel_t p;
  pr_status_t st = mel_params(c, n, &p);
  if (st) return st;
  pr_dtype_t t = (pr_dtype_t)pr__attr_int(n->m, "output_datatype", PR_DTYPE_FLOAT);
  if (!output_type_ok(t)) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "output_datatype %d", (int)t);
  int64_t d[2] = {p.dft_length / 2 + 1, p.mel_bins};
  pr__value_set_shape(pr__out(c, n, 0), t, 2, d);
  return PR_OK;
}

static pr_status_t prepare_mel(pr_compile_t *c, pr_node_t *n) {
  mel_t *p = calloc(1, sizeof *p);
  if (!p) return PR_ERR_NOMEM;
  n->state = p;
  return mel_params(c, n, p);
}

/* The mel scale is split into mel_bins + 2 equal steps (ONNX's reference and
 * ONNX Runtime divide by that count); each edge maps to the DFT bin
 * floor((dft_length + 1) hz / sample_rate). Bins past the spectrum are
 * dropped. */
static void run_mel(pr_exec_t *x, pr_node_t *n) {
  const mel_t *p = n->state;
  const pr_value_t *o = &x->v[n->out[0]];
  int64_t rows = o->dims[0], M = p->mel_bins;
  for (int64_t i = 0; i < rows * M; i++) pr__store_double(o->ptr, o->dtype, i, 0);
  double lo = 2595.0 * log10(1.0 + p->lower / 700.0), hi = 2595.0 * log10(1.0 + p->upper / 700.0);
  double step = (hi - lo) / (double)(M + 2);
  int64_t bins[3];
  for (int64_t m = 0; m < M; m++) {
    for (int k = 0; k < 3; k++) {
      double hz = 700.0 * (pow(10.0, (lo + step * (double)(m + k)) / 2595.0) - 1.0);
      bins[k] = (int64_t)floor((double)(p->dft_length + 1) * hz / (double)p->sample_rate);
    }
    int64_t left = bins[0], center = bins[1], right = bins[2];
    if (center == left) {
      if (center >= 0 && center < rows) pr__store_double(o->ptr, o->dtype, center * M + m, 1.0);
    } else {
      for (int64_t j = left; j <= center; j++)
        if (j >= 0 && j < rows)
          pr__store_double(o->ptr, o->dtype, j * M + m,
                           (double)(j - left) / (double)(center - left));
    }
    for (int64_t j = center; j < right; j++)
      if (j >= 0 && j < rows)
        pr__store_double(o->ptr, o->dtype, j * M + m,
                         (double)(right - j) / (double)(right - center));
  }
}

const pr_op_t pr__op_mel_weight_matrix = {.name = "MelWeightMatrix",
                                          .attrs = "output_datatype",
                                          .min_opset = 17,
                                          .max_inputs = 5,
                                          .infer = infer_mel,
                                          .prepare = prepare_mel,
                                          .run = run_mel,
                                          .destroy = free};
