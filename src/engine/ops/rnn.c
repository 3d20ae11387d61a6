/* Recurrent layers: RNN, GRU and LSTM (opset 7 onwards; 14 added layout).
 * Float only, as ONNX Runtime's CPU kernels. Directions forward, reverse and
 * bidirectional; activations with their alpha/beta; clip; sequence_lens;
 * initial_h and initial_c; LSTM peepholes and input_forget; GRU
 * linear_before_reset; every output optional.
 *
 * Notes on the design: one cell loop serves the three operators. Per
 * direction, the input projections of every step, X W' plus the biases, are
 * one sgemm into xw (rows in X's own order, so layout 1 needs no copy); each
 * step then adds H R' (one sgemm over the batch) and applies the gates. A
 * batch entry whose sequence has ended keeps its state and writes zeros to Y;
 * in reverse it starts at its own last step. Buffers live in the node's
 * state, sized at compile time (a session runs on one thread at a time).
 */
#include <math.h>
#include <string.h>

#include "base/util.h"
#include "engine/ops/ops.h"

typedef enum { CELL_RNN, CELL_GRU, CELL_LSTM } cell_t;

typedef enum {
  ACT_SIGMOID,
  ACT_TANH,
  ACT_RELU,
  ACT_AFFINE,
  ACT_LEAKY_RELU,
  ACT_THRESHOLDED_RELU,
  ACT_SCALED_TANH,
  ACT_HARD_SIGMOID,
  ACT_ELU,
  ACT_SOFTSIGN,
  ACT_SOFTPLUS,
} act_kind_t;

typedef struct {
  act_kind_t kind;
  float alpha, beta;
} act_t;

/* name, whether it takes alpha and beta, their defaults (ONNX's operators) */
static const struct {
  const char *name;
  act_kind_t kind;
  bool uses_alpha, uses_beta;
  float alpha, beta;
} act_table[] = {
    {"Sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"Tanh", ACT_TANH, false, false, 0, 0},
    {"Relu", ACT_RELU, false, false, 0, 0},
    {"Affine", ACT_AFFINE, true, true, 1.f, 0.f},
    {"LeakyRelu", ACT_LEAKY_RELU, true, false, 0.01f, 0},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, true, false, 1.f, 0},
    {"ScaledTanh", ACT_SCALED_TANH, true, true, 1.f, 1.f},
    {"HardSigmoid", ACT_HARD_SIGMOID, true, true, 0.2f, 0.5f},
    {"Elu", ACT_ELU, true, false, 1.f, 0},
    {"Softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"Softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

typedef struct {
  cell_t cell;
  int gates, dirs, n_act;
  int64_t S, B, I, H;
  bool layout1, lbr, input_forget, has_clip;
  float clip;
  act_t act[2][3];
  float *xw;    /* S*B x gates*H: input projections plus biases */
  float *hr;    /* B x gates*H: H R' of one step */
  float *h, *c; /* B x H: state */
  float *rh;    /* B x H: GRU's r (.) H and its product with Rh */
  float *rh2;
  float *bias; /* gates*H: the biases folded into xw */
} rnn_state_t;

static void destroy_rnn(void *p) {
  rnn_state_t *s = p;
  if (!s) return;
  pr__free(s->xw);
  pr__free(s->hr);
  pr__free(s->h);
  pr__free(s->c);
  pr__free(s->rh);
  pr__free(s->rh2);
  pr__free(s->bias);
  free(s);
}

static cell_t cell_of(const pr_op_t *op);

static int dirs_of(const char *d) {
  if (!strcmp(d, "forward") || !strcmp(d, "reverse")) return 1;
  if (!strcmp(d, "bidirectional")) return 2;
  return 0;
}

/* Activations of both directions from the attributes into act; returns the
 * status and writes why into err. alpha/beta are consumed in order by the
 * activations that take them (as ONNX Runtime reads them). */
static pr_status_t parse_acts(const pr_mnode_t *m, cell_t cell, int dirs, act_t act[2][3],
                              char *err, size_t len) {
  static const char *defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  int n_act = cell == CELL_RNN ? 1 : cell == CELL_GRU ? 2 : 3;
  const pr_attr_t *names = pr__attr_find(m, "activations");
  const float *alpha = NULL, *beta = NULL;
  int n_alpha = pr__attr_floats(m, "activation_alpha", &alpha);
  int n_beta = pr__attr_floats(m, "activation_beta", &beta);
  int n_names = names ? names->n : 0;
  if (names && names->type != PR_ATTR_STRINGS) {
    snprintf(err, len, "activations must be strings");
    return PR_ERR_INVALID;
  }
  if (names && n_names != n_act && n_names != n_act * dirs) {
    snprintf(err, len, "%d activations given, %d expected", n_names, n_act * dirs);
    return PR_ERR_INVALID;
  }
  int ia = 0, ib = 0;
  for (int d = 0; d < dirs; d++)
    for (int k = 0; k < n_act; k++) {
      const char *nm = defaults[cell][k];
      if (names) {
        int at = n_names == n_act ? k : d * n_act + k;
        nm = pr__attr_strings_at(names, at);
        if (!nm) {
          snprintf(err, len, "activation %d is unreadable", at);
          return PR_ERR_INVALID;
        }
      }
      size_t t = 0, nt = sizeof act_table / sizeof act_table[0];
      while (t < nt && strcasecmp(act_table[t].name, nm)) t++;
      if (t == nt) {
        snprintf(err, len, "activation '%.40s' is not supported", nm);
        return PR_ERR_UNSUPPORTED;
      }
      act_t *a = &act[d][k];
      a->kind = act_table[t].kind;
      a->alpha = act_table[t].alpha, a->beta = act_table[t].beta;
      if (act_table[t].uses_alpha && ia < n_alpha) a->alpha = alpha[ia++];
      if (act_table[t].uses_beta && ib < n_beta) a->beta = beta[ib++];
    }
  return PR_OK;
}

static pr_status_t check_rnn(const pr_mnode_t *m, int opset, char *err, size_t len) {
  (void)opset;
  char why[160];
  int dirs = dirs_of(pr__attr_string(m, "direction", "forward"));
  if (!dirs) {
    snprintf(err, len, "node '%s' (%s): direction must be forward, reverse or bidirectional",
             pr__mnode_name(m), m->op_type);
    return PR_ERR_INVALID;
  }
  act_t act[2][3];
  pr_status_t st = parse_acts(m, cell_of(m->op), dirs, act, why, sizeof why);
  if (st) snprintf(err, len, "node '%s' (%s): %s", pr__mnode_name(m), m->op_type, why);
  return st;
}

/* Input indices: X W R B sequence_lens initial_h [initial_c P]. */
enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ, IN_H0, IN_C0, IN_P };

static pr_status_t geometry(pr_compile_t *c, pr_node_t *n, rnn_state_t *g) {
  memset(g, 0, sizeof *g);
  g->cell = cell_of(n->op);
  g->gates = g->cell == CELL_RNN ? 1 : g->cell == CELL_GRU ? 3 : 4;
  g->n_act = g->cell == CELL_RNN ? 1 : g->cell == CELL_GRU ? 2 : 3;
  g->dirs = dirs_of(pr__attr_string(n->m, "direction", "forward"));
  g->layout1 = c->opset >= 14 && pr__attr_int(n->m, "layout", 0) == 1;
  g->lbr = g->cell == CELL_GRU && pr__attr_int(n->m, "linear_before_reset", 0);
  g->input_forget = g->cell == CELL_LSTM && pr__attr_int(n->m, "input_forget", 0);
  g->has_clip = pr__attr_find(n->m, "clip") != NULL;
  g->clip = pr__attr_float(n->m, "clip", INFINITY);
  char why[160];
  if (!g->dirs) return pr__fail(c, n, PR_ERR_INVALID, "bad direction");
  if (parse_acts(n->m, g->cell, g->dirs, g->act, why, sizeof why))
    return pr__fail(c, n, PR_ERR_INVALID, "%s", why);
  const pr_value_t *x = pr__in(c, n, IN_X), *w = pr__in(c, n, IN_W), *r = pr__in(c, n, IN_R);
  if (!w || !r) return pr__fail(c, n, PR_ERR_INVALID, "needs X, W and R");
  if (x->dtype != PR_DTYPE_FLOAT || w->dtype != PR_DTYPE_FLOAT || r->dtype != PR_DTYPE_FLOAT)
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "only FLOAT");
  if (x->rank != 3 || w->rank != 3 || r->rank != 3)
    return pr__fail(c, n, PR_ERR_INVALID, "X, W and R must be 3-D");
  g->S = x->dims[g->layout1 ? 1 : 0];
  g->B = x->dims[g->layout1 ? 0 : 1];
  g->I = x->dims[2];
  g->H = pr__attr_int(n->m, "hidden_size", r->dims[2]);
  int64_t G = g->gates, H = g->H;
  if (H < 1 || r->dims[2] != H || w->dims[0] != g->dirs || r->dims[0] != g->dirs ||
      w->dims[1] != G * H || r->dims[1] != G * H || w->dims[2] != g->I)
    return pr__fail(c, n, PR_ERR_INVALID,
                    "W must be [%d, %lld, %lld] and R [%d, %lld, %lld] (hidden_size %lld)", g->dirs,
                    (long long)(G * H), (long long)g->I, g->dirs, (long long)(G * H), (long long)H,
                    (long long)H);
  const pr_value_t *b = pr__in(c, n, IN_B), *seq = pr__in(c, n, IN_SEQ);
  if (b && (b->dtype != PR_DTYPE_FLOAT || b->rank != 2 || b->dims[0] != g->dirs ||
            b->dims[1] != 2 * G * H))
    return pr__fail(c, n, PR_ERR_INVALID, "B must be [%d, %lld]", g->dirs, (long long)(2 * G * H));
  if (seq && ((seq->dtype != PR_DTYPE_INT32 && seq->dtype != PR_DTYPE_INT64) || seq->rank != 1 ||
              seq->dims[0] != g->B))
    return pr__fail(c, n, PR_ERR_INVALID, "sequence_lens must be %lld INT32", (long long)g->B);
  int64_t hd[3] = {g->dirs, g->B, H};
  if (g->layout1) hd[0] = g->B, hd[1] = g->dirs;
  for (int k = IN_H0; k <= (g->cell == CELL_LSTM ? IN_C0 : IN_H0); k++) {
    const pr_value_t *h0 = pr__in(c, n, k);
    if (h0 && (h0->dtype != PR_DTYPE_FLOAT || h0->rank != 3 || h0->dims[0] != hd[0] ||
               h0->dims[1] != hd[1] || h0->dims[2] != hd[2]))
      return pr__fail(c, n, PR_ERR_INVALID, "initial state %d must be [%lld, %lld, %lld]", k,
                      (long long)hd[0], (long long)hd[1], (long long)hd[2]);
  }
  const pr_value_t *p = g->cell == CELL_LSTM ? pr__in(c, n, IN_P) : NULL;
  if (p &&
      (p->dtype != PR_DTYPE_FLOAT || p->rank != 2 || p->dims[0] != g->dirs || p->dims[1] != 3 * H))
    return pr__fail(c, n, PR_ERR_INVALID, "P must be [%d, %lld]", g->dirs, (long long)(3 * H));
  return PR_OK;
}

static pr_status_t infer_rnn(pr_compile_t *c, pr_node_t *n) {
  rnn_state_t g;
  pr_status_t st = geometry(c, n, &g);
  if (st) return st;
  int64_t yd[4] = {g.S, g.dirs, g.B, g.H}, hd[3] = {g.dirs, g.B, g.H};
  if (g.layout1) {
    yd[0] = g.B, yd[1] = g.S, yd[2] = g.dirs;
    hd[0] = g.B, hd[1] = g.dirs;
  }
  if (n->n_out > (g.cell == CELL_LSTM ? 3 : 2))
    return pr__fail(c, n, PR_ERR_INVALID, "too many outputs");
  if (pr__out(c, n, 0)) pr__value_set_shape(pr__out(c, n, 0), PR_DTYPE_FLOAT, 4, yd);
  for (int k = 1; k < n->n_out; k++)
    if (pr__out(c, n, k)) pr__value_set_shape(pr__out(c, n, k), PR_DTYPE_FLOAT, 3, hd);
  n->flops = 2.0 * (double)g.dirs * (double)g.S * (double)g.B * (double)(g.gates * g.H) *
             (double)(g.I + g.H);
  return PR_OK;
}

static pr_status_t prepare_rnn(pr_compile_t *c, pr_node_t *n) {
  rnn_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  pr_status_t st = geometry(c, n, s);
  if (st) return st;
  size_t gh = (size_t)(s->gates * s->H), rows, xw_len, bh;
  if (pr__mul_size((size_t)s->S, (size_t)s->B, &rows) || pr__mul_size(rows, gh, &xw_len) ||
      pr__mul_size(xw_len, sizeof(float), &xw_len) ||
      pr__mul_size((size_t)s->B * sizeof(float), (size_t)s->H, &bh))
    return pr__fail(c, n, PR_ERR_NOMEM, "sizes overflow");
  s->xw = pr__aligned_calloc(xw_len);
  s->hr = pr__aligned_calloc(bh * (size_t)s->gates);
  s->h = pr__aligned_calloc(bh);
  s->c = pr__aligned_calloc(bh);
  s->rh = pr__aligned_calloc(bh);
  s->rh2 = pr__aligned_calloc(bh);
  s->bias = pr__aligned_calloc(gh * sizeof(float));
  if (!s->xw || !s->hr || !s->h || !s->c || !s->rh || !s->rh2 || !s->bias) return PR_ERR_NOMEM;
  return PR_OK;
}

static inline float act_apply(const act_t *a, float x) {
  switch (a->kind) {
    case ACT_SIGMOID: return 1.f / (1.f + expf(-x));
    case ACT_TANH: return tanhf(x);
    case ACT_RELU: return x > 0.f ? x : 0.f;
    case ACT_AFFINE: return a->alpha * x + a->beta;
    case ACT_LEAKY_RELU: return x >= 0.f ? x : a->alpha * x;
    case ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0.f;
    case ACT_SCALED_TANH: return a->alpha * tanhf(a->beta * x);
    case ACT_HARD_SIGMOID: {
      float v = a->alpha * x + a->beta;
      return v < 0.f ? 0.f : v > 1.f ? 1.f : v;
    }
    case ACT_ELU: return x >= 0.f ? x : a->alpha * (expf(x) - 1.f);
    case ACT_SOFTSIGN: return x / (1.f + fabsf(x));
    case ACT_SOFTPLUS: return x > 20.f ? x : log1pf(expf(x));
  }
  return x;
}

static inline float clipped(const rnn_state_t *s, float v) {
  if (!s->has_clip) return v;
  return v < -s->clip ? -s->clip : v > s->clip ? s->clip : v;
}

/* Length of batch entry b's sequence, within [0, S]. */
static int64_t seq_len(const pr_value_t *seqv, int64_t b, int64_t S) {
  int64_t len = seqv ? pr__load_int64(seqv->ptr, seqv->dtype, b) : S;
  return len < 0 ? 0 : len > S ? S : len;
}

/* The buffers of one direction's run (absent optional inputs and outputs
 * NULL). */
typedef struct {
  int d;
  bool reverse;
  const float *X, *W, *R, *Bias, *H0, *C0, *P;
  const float *Rbh; /* GRU, linear_before_reset: Rh's bias stays inside r (.) */
  const pr_value_t *seqv;
  float *Y, *Yh, *Yc;
  const act_t *af, *ag, *ah;
} dir_io_t;

static void bind_direction(pr_exec_t *x, pr_node_t *n, const rnn_state_t *s, int d, bool reverse,
                           dir_io_t *io) {
  const int64_t I = s->I, H = s->H, GH = s->gates * H;
  memset(io, 0, sizeof *io);
  io->d = d;
  io->reverse = reverse;
  io->X = pr__xin(x, n, IN_X);
  io->W = (const float *)pr__xin(x, n, IN_W) + d * GH * I;
  io->R = (const float *)pr__xin(x, n, IN_R) + d * GH * H;
  io->Bias = n->n_in > IN_B && n->in[IN_B] >= 0 ? pr__xin(x, n, IN_B) : NULL;
  io->seqv = n->n_in > IN_SEQ && n->in[IN_SEQ] >= 0 ? &x->v[n->in[IN_SEQ]] : NULL;
  io->H0 = n->n_in > IN_H0 && n->in[IN_H0] >= 0 ? pr__xin(x, n, IN_H0) : NULL;
  if (s->cell == CELL_LSTM) {
    io->C0 = n->n_in > IN_C0 && n->in[IN_C0] >= 0 ? pr__xin(x, n, IN_C0) : NULL;
    io->P =
        n->n_in > IN_P && n->in[IN_P] >= 0 ? (const float *)pr__xin(x, n, IN_P) + d * 3 * H : NULL;
  }
  io->Y = n->out[0] >= 0 ? pr__xout(x, n, 0) : NULL;
  io->Yh = n->n_out > 1 && n->out[1] >= 0 ? pr__xout(x, n, 1) : NULL;
  io->Yc = n->n_out > 2 && n->out[2] >= 0 ? pr__xout(x, n, 2) : NULL;
  io->af = &s->act[d][0], io->ag = &s->act[d][1], io->ah = &s->act[d][2];
}

/* xw = X W' + Wb + Rb, every step at once (sets io->Rbh). */
static void project_inputs(rnn_state_t *s, dir_io_t *io) {
  const int64_t S = s->S, B = s->B, I = s->I, H = s->H, GH = s->gates * H;
  float *bias = s->bias;
  for (int64_t j = 0; j < GH; j++) bias[j] = 0.f;
  if (io->Bias) {
    const float *wb = io->Bias + io->d * 2 * GH, *rb = wb + GH;
    for (int64_t j = 0; j < GH; j++) bias[j] = wb[j] + rb[j];
    if (s->lbr) {
      io->Rbh = rb + 2 * H;
      for (int64_t j = 2 * H; j < 3 * H; j++) bias[j] = wb[j];
    }
  }
  int64_t rows = S * B;
  for (int64_t i = 0; i < rows; i++) memcpy(s->xw + i * GH, bias, (size_t)GH * sizeof(float));
  if (rows && I) dnnl_sgemm('N', 'T', rows, GH, I, 1.f, io->X, I, io->W, I, 1.f, s->xw, GH);
}

/* Offset of batch entry b's state in H0, C0, Y_h and Y_c. */
static int64_t state_at(const rnn_state_t *s, int d, int64_t b) {
  return (s->layout1 ? b * s->dirs + d : d * s->B + b) * s->H;
}

static void load_initial_state(rnn_state_t *s, const dir_io_t *io) {
  for (int64_t b = 0; b < s->B; b++) {
    int64_t at = state_at(s, io->d, b);
    for (int64_t j = 0; j < s->H; j++) {
      s->h[b * s->H + j] = io->H0 ? io->H0[at + j] : 0.f;
      s->c[b * s->H + j] = io->C0 ? io->C0[at + j] : 0.f;
    }
  }
}

static void store_final_state(rnn_state_t *s, const dir_io_t *io) {
  for (int64_t b = 0; b < s->B; b++) {
    int64_t at = state_at(s, io->d, b);
    if (io->Yh) memcpy(io->Yh + at, s->h + b * s->H, (size_t)s->H * sizeof(float));
    if (io->Yc) memcpy(io->Yc + at, s->c + b * s->H, (size_t)s->H * sizeof(float));
  }
}

/* GRU without linear_before_reset: r first, for the product (r (.) H) Rh'
 * into rh2. */
static void gru_reset_product(rnn_state_t *s, const dir_io_t *io, int64_t step) {
  const int64_t S = s->S, B = s->B, H = s->H, GH = s->gates * H;
  for (int64_t b = 0; b < B; b++) {
    int64_t len = seq_len(io->seqv, b, S);
    int64_t t = step >= len ? step : io->reverse ? len - 1 - step : step;
    const float *xr = s->xw + (s->layout1 ? b * S + t : t * B + b) * GH;
    for (int64_t j = 0; j < H; j++) {
      float r = act_apply(io->af, clipped(s, xr[H + j] + s->hr[b * GH + H + j]));
      s->rh[b * H + j] = r * s->h[b * H + j];
    }
  }
  dnnl_sgemm('N', 'T', B, H, H, 1.f, s->rh, H, io->R + 2 * H * H, H, 0.f, s->rh2, H);
}

/* The new hidden (and cell) state of batch entry b from its input part xr
 * and recurrent part hr. */
static void cell_update(rnn_state_t *s, const dir_io_t *io, int64_t b, const float *xr,
                        const float *hr) {
  const int64_t H = s->H;
  const act_t *af = io->af, *ag = io->ag, *ah = io->ah;
  const float *P = io->P, *Rbh = io->Rbh;
  float *h = s->h + b * H, *cs = s->c + b * H;
  switch (s->cell) {
    case CELL_RNN:
      for (int64_t j = 0; j < H; j++) h[j] = act_apply(af, clipped(s, xr[j] + hr[j]));
      break;
    case CELL_GRU:
      for (int64_t j = 0; j < H; j++) {
        float z = act_apply(af, clipped(s, xr[j] + hr[j]));
        float hh;
        if (s->lbr) {
          float r = act_apply(af, clipped(s, xr[H + j] + hr[H + j]));
          float rec = hr[2 * H + j] + (Rbh ? Rbh[j] : 0.f);
          hh = act_apply(ag, clipped(s, xr[2 * H + j] + r * rec));
        } else {
          hh = act_apply(ag, clipped(s, xr[2 * H + j] + s->rh2[b * H + j]));
        }
        h[j] = (1.f - z) * hh + z * h[j];
      }
      break;
    case CELL_LSTM: /* gates i, o, f, c; peepholes i, o, f */
      for (int64_t j = 0; j < H; j++) {
        float cp = cs[j];
        float gi = xr[j] + hr[j] + (P ? P[j] * cp : 0.f);
        float gf = xr[2 * H + j] + hr[2 * H + j] + (P ? P[2 * H + j] * cp : 0.f);
        float i = act_apply(af, clipped(s, gi));
        float f = s->input_forget ? 1.f - i : act_apply(af, clipped(s, gf));
        float cc = act_apply(ag, clipped(s, xr[3 * H + j] + hr[3 * H + j]));
        float cn = f * cp + i * cc;
        float go = xr[H + j] + hr[H + j] + (P ? P[H + j] * cn : 0.f);
        float o = act_apply(af, clipped(s, go));
        cs[j] = cn;
        h[j] = o * act_apply(ah, cn);
      }
      break;
  }
}

/* One direction d of the layer over every step. */
static void run_direction(pr_exec_t *x, pr_node_t *n, rnn_state_t *s, int d, bool reverse) {
  const int64_t S = s->S, B = s->B, H = s->H, GH = s->gates * H;
  dir_io_t io;
  bind_direction(x, n, s, d, reverse, &io);
  project_inputs(s, &io);
  load_initial_state(s, &io);
  for (int64_t step = 0; step < S; step++) {
    dnnl_sgemm('N', 'T', B, GH, H, 1.f, s->h, H, io.R, H, 0.f, s->hr, GH);
    if (s->cell == CELL_GRU && !s->lbr) gru_reset_product(s, &io, step);
    for (int64_t b = 0; b < B; b++) {
      int64_t len = seq_len(io.seqv, b, S);
      bool active = step < len;
      /* steps past the end write zeros at the times past the end */
      int64_t t = active && reverse ? len - 1 - step : step;
      float *y =
          io.Y ? io.Y + (s->layout1 ? (b * S + t) * s->dirs + d : (t * s->dirs + d) * B + b) * H
               : NULL;
      if (!active) {
        if (y) memset(y, 0, (size_t)H * sizeof(float));
        continue;
      }
      cell_update(s, &io, b, s->xw + (s->layout1 ? b * S + t : t * B + b) * GH, s->hr + b * GH);
      if (y) memcpy(y, s->h + b * H, (size_t)H * sizeof(float));
    }
  }
  store_final_state(s, &io);
}

static void run_rnn(pr_exec_t *x, pr_node_t *n) {
  rnn_state_t *s = n->state;
  const char *dir = pr__attr_string(n->m, "direction", "forward");
  if (s->dirs == 2) {
    run_direction(x, n, s, 0, false);
    run_direction(x, n, s, 1, true);
  } else {
    run_direction(x, n, s, 0, !strcmp(dir, "reverse"));
  }
}

#define RNN_ATTRS "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout"

const pr_op_t pr__op_rnn = {.name = "RNN",
                            .attrs = RNN_ATTRS,
                            .min_opset = 7,
                            .max_inputs = 6,
                            .check = check_rnn,
                            .infer = infer_rnn,
                            .prepare = prepare_rnn,
                            .run = run_rnn,
                            .destroy = destroy_rnn};

const pr_op_t pr__op_gru = {.name = "GRU",
                            .attrs = RNN_ATTRS ",linear_before_reset",
                            .min_opset = 7,
                            .max_inputs = 6,
                            .check = check_rnn,
                            .infer = infer_rnn,
                            .prepare = prepare_rnn,
                            .run = run_rnn,
                            .destroy = destroy_rnn};

const pr_op_t pr__op_lstm = {.name = "LSTM",
                             .attrs = RNN_ATTRS ",input_forget",
                             .min_opset = 7,
                             .max_inputs = 8,
                             .check = check_rnn,
                             .infer = infer_rnn,
                             .prepare = prepare_rnn,
                             .run = run_rnn,
                             .destroy = destroy_rnn};

static cell_t cell_of(const pr_op_t *op) {
  return op == &pr__op_lstm ? CELL_LSTM : op == &pr__op_gru ? CELL_GRU : CELL_RNN;
}
