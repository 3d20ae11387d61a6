/* Random graphs for the differential check of fusions, layouts and the
 * memory plan (see randgraph.h).
 *
 * A graph starts from one input (an image [N, C, H, W], a sequence
 * [N, S, D] or rows [N, D]; N is the symbolic batch) and grows by blocks,
 * each applied to a value drawn from those already made (mostly the newest,
 * sometimes an older one, which then has several consumers):
 * - image: Conv (groups, depthwise, strides, dilations, pads, auto_pad;
 *   BatchNormalization after it; a chain of activations written as ops or
 *   spelled out like exporters do; a residual Add), Pad before Conv or a
 *   pool, pools, Concat, Resize, Softmax, views (Reshape, Flatten,
 *   Transpose, Unsqueeze/Squeeze), Split and Slice, standalone
 *   BatchNormalization, ReduceMean, the step to a sequence or to rows;
 * - sequence and rows: linear MatMul with bias, activation and residual,
 *   Gemm, LayerNorm spelled out, attention (one or three projections,
 *   heads, scale, mask, the transposes around it), the step back to an
 *   image;
 * - any rank: element-wise activations, binary ops with another value,
 *   itself or a broadcast constant, Softmax, Concat.
 * Channel counts include ones that fill no 8 or 16 lane block. Every value
 * stays under MAX_ELEMS elements. A block whose shapes do not work out is
 * left out (its choices still consumed), so any byte string is a graph.
 *
 * Weights come from their own generator (seeded per tensor), so the choice
 * bytes only decide the structure. */
#include "randgraph.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packrat/engine.h"

enum { MAX_VALUES = 320, MAX_BLOCKS = 12, MAX_ELEMS = 1 << 14, ROOM = 48 };

typedef struct {
  char name[12];
  int rank;
  int64_t d[4];
  bool input;
} val_t;

typedef struct {
  rg_src_t *src;
  mb_t *b;
  val_t v[MAX_VALUES];
  int n_v, n_nodes, n_consts;
  int64_t batch;
  int opset; /* 13, or 18: ReduceMean's axes an input */
  char *log;
  size_t log_len, log_pos;
} gen_t;

#define IN(...) ((const char *const[]){__VA_ARGS__, NULL})
#define OUT(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- choices ---- */

rg_src_t rg_src_bytes(const uint8_t *data, size_t len) {
  return (rg_src_t){.data = data, .len = len};
}

rg_src_t rg_src_seed(uint64_t seed) {
  return (rg_src_t){.state = seed * 0x9e3779b97f4a7c15ull + 1};
}

static unsigned src_byte(rg_src_t *s) {
  if (s->data) return s->pos < s->len ? s->data[s->pos++] : 0;
  s->state = s->state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)(s->state >> 40) & 0xff;
}

static bool exhausted(const gen_t *g) {
  return g->src->data && g->src->pos >= g->src->len;
}

/* 0 .. n-1 (n <= 256) */
static int pick(gen_t *g, int n) {
  return (int)(src_byte(g->src) % (unsigned)n);
}

static bool chance(gen_t *g, int num, int den) {
  return pick(g, den) < num;
}

static int64_t pick_of(gen_t *g, const int64_t *opts, int n) {
  return opts[pick(g, n)];
}

/* ---- the model being built ---- */

static void logf_(gen_t *g, const char *fmt, ...) {
  if (!g->log || g->log_pos + 1 >= g->log_len) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(g->log + g->log_pos, g->log_len - g->log_pos, fmt, ap);
  va_end(ap);
  if (k > 0) g->log_pos += (size_t)k;
  if (g->log_pos >= g->log_len) g->log_pos = g->log_len - 1;
}

static int64_t numel(int rank, const int64_t *d) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= d[k];
  return n;
}

/* A new value of shape d: its index (there is always room: blocks start
 * only with ROOM values to spare). */
static int new_val(gen_t *g, int rank, const int64_t *d) {
  val_t *v = &g->v[g->n_v];
  snprintf(v->name, sizeof v->name, "t%d", g->n_v);
  v->rank = rank;
  for (int k = 0; k < rank; k++) v->d[k] = d[k];
  v->input = false;
  return g->n_v++;
}

static const char *nm(gen_t *g, int vi) {
  return g->v[vi].name;
}

/* Emits a node; note (may be "") goes to the log with it. */
static int node(gen_t *g, const char *op, const char *const *ins, const char *const *outs,
                const char *note) {
  char name[16];
  snprintf(name, sizeof name, "n%d", g->n_nodes++);
  logf_(g, "%s(", op);
  for (int k = 0; ins[k]; k++) logf_(g, "%s%s", k ? "," : "", ins[k]);
  logf_(g, ")%s%s ->", *note ? " " : "", note);
  for (int k = 0; outs[k]; k++) logf_(g, " %s", outs[k]);
  logf_(g, "\n");
  return mb_node(g->b, op, name, ins, outs);
}

/* One input, one new output of shape d; returns the output's index. */
static int unary_node(gen_t *g, const char *op, int xi, int rank, const int64_t *d,
                      const char *note, int *node_out) {
  int o = new_val(g, rank, d);
  int n = node(g, op, IN(nm(g, xi)), OUT(nm(g, o)), note);
  if (node_out) *node_out = n;
  return o;
}

static int binary_node(gen_t *g, const char *op, const char *a, const char *b, int rank,
                       const int64_t *d) {
  int o = new_val(g, rank, d);
  node(g, op, IN(a, b), OUT(nm(g, o)), "");
  return o;
}

static float wrand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.f - 1.f;
}

/* A float constant of random values scale * [-1, 1) + offset; its name in
 * name[12]. */
static void konst(gen_t *g, char *name, int rank, const int64_t *d, float scale, float offset) {
  snprintf(name, 12, "w%d", g->n_consts);
  uint32_t s = 0x1234567u + 7919u * (uint32_t)g->n_consts++;
  int64_t n = numel(rank, d);
  float *w = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) w[i] = wrand(&s) * scale + offset;
  mb_init(g->b, name, PR_DTYPE_FLOAT, rank, d, w, sizeof(float) * (size_t)n);
  free(w);
}

static void scalar(gen_t *g, char *name, float v) {
  snprintf(name, 12, "w%d", g->n_consts++);
  int64_t none[1] = {0};
  mb_init(g->b, name, PR_DTYPE_FLOAT, 0, none, &v, sizeof v);
}

static void ints(gen_t *g, char *name, int n, const int64_t *vals) {
  snprintf(name, 12, "w%d", g->n_consts++);
  int64_t d[1] = {n};
  mb_init(g->b, name, PR_DTYPE_INT64, 1, d, vals, sizeof(int64_t) * (size_t)n);
}

/* A value other than xi of exactly xi's shape, or -1. */
static int same_shape(gen_t *g, int xi) {
  const val_t *x = &g->v[xi];
  int found[MAX_VALUES], n = 0;
  for (int i = 0; i < g->n_v; i++)
    if (i != xi && g->v[i].rank == x->rank &&
        !memcmp(g->v[i].d, x->d, sizeof(int64_t) * (size_t)x->rank))
      found[n++] = i;
  return n ? found[pick(g, n)] : -1;
}

/* ---- activations: as ops, or spelled out as exporters write them ---- */

static int clip(gen_t *g, int xi, float lo, float hi, bool with_lo, bool with_hi) {
  char l[12] = "", h[12] = "";
  if (with_lo) scalar(g, l, lo);
  if (with_hi) scalar(g, h, hi);
  int o = new_val(g, g->v[xi].rank, g->v[xi].d);
  node(g, "Clip", with_hi ? IN(nm(g, xi), l, h) : IN(nm(g, xi), l), OUT(nm(g, o)), "");
  return o;
}

/* x * clip(x + 3, 0, 6) / 6, with Div 6 or Mul 1/6 */
static int hardswish_spelled(gen_t *g, int xi) {
  val_t x = g->v[xi];
  char three[12], six[12];
  scalar(g, three, 3.f);
  int p = binary_node(g, "Add", nm(g, xi), three, x.rank, x.d);
  int r = clip(g, p, 0.f, 6.f, true, true);
  int m = chance(g, 1, 2) ? binary_node(g, "Mul", nm(g, xi), nm(g, r), x.rank, x.d)
                          : binary_node(g, "Mul", nm(g, r), nm(g, xi), x.rank, x.d);
  bool div = chance(g, 1, 2);
  scalar(g, six, div ? 6.f : 1.f / 6.f);
  return binary_node(g, div ? "Div" : "Mul", nm(g, m), six, x.rank, x.d);
}

/* GELU: erf form 0.5 x (1 + erf(x / sqrt 2)), or the tanh form */
static int gelu_spelled(gen_t *g, int xi, bool tanh_form) {
  val_t x = g->v[xi];
  char c1[12], one[12], half[12];
  int t;
  if (!tanh_form) {
    bool div = chance(g, 1, 2);
    scalar(g, c1, div ? 1.41421356f : 0.70710678f);
    int a = binary_node(g, div ? "Div" : "Mul", nm(g, xi), c1, x.rank, x.d);
    t = unary_node(g, "Erf", a, x.rank, x.d, "", NULL);
  } else {
    char k[12], s[12];
    int sq = binary_node(g, "Mul", nm(g, xi), nm(g, xi), x.rank, x.d);
    int cube = binary_node(g, "Mul", nm(g, xi), nm(g, sq), x.rank, x.d);
    scalar(g, k, 0.044715f);
    int kc = binary_node(g, "Mul", nm(g, cube), k, x.rank, x.d);
    int in = binary_node(g, "Add", nm(g, xi), nm(g, kc), x.rank, x.d);
    scalar(g, s, 0.79788456f);
    int a = binary_node(g, "Mul", nm(g, in), s, x.rank, x.d);
    t = unary_node(g, "Tanh", a, x.rank, x.d, "", NULL);
  }
  scalar(g, one, 1.f);
  int p = binary_node(g, "Add", nm(g, t), one, x.rank, x.d);
  int m = binary_node(g, "Mul", nm(g, xi), nm(g, p), x.rank, x.d);
  scalar(g, half, 0.5f);
  return binary_node(g, "Mul", nm(g, m), half, x.rank, x.d);
}

/* a x + b with a constant scalar, in one of the spellings fuse.c folds */
static int scalar_linear(gen_t *g, int xi) {
  val_t x = g->v[xi];
  static const float vals[] = {0.5f, 1.5f, -0.75f, 2.f};
  char s[12];
  scalar(g, s, vals[pick(g, 4)]);
  static const char *const ops[] = {"Mul", "Add", "Sub", "Div"};
  int op = pick(g, 4);
  bool swap = op != 3 && chance(g, 1, 2);
  return swap ? binary_node(g, ops[op], s, nm(g, xi), x.rank, x.d)
              : binary_node(g, ops[op], nm(g, xi), s, x.rank, x.d);
}

static int plain_act(gen_t *g, int xi) {
  static const char *const ops[] = {"Relu",  "Sigmoid",  "Tanh", "HardSwish", "Elu",
                                    "Abs",   "Neg",      "Erf",  "Softplus",  "Softsign",
                                    "Floor", "Identity", "Exp"};
  val_t x = g->v[xi];
  int op = pick(g, 13);
  if (op == 12) { /* bounded first: Exp of a sum of many terms could overflow */
    xi = unary_node(g, "Tanh", xi, x.rank, x.d, "", NULL);
  }
  return unary_node(g, ops[op], xi, x.rank, x.d, "", NULL);
}

/* Add or Mul with a constant along the channels (axis 1 of an image) or
 * the last axis: a bias or scale layer */
static int bias_op(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int64_t cd[4] = {1, 1, 1, 1};
  int rank = 1;
  if (x.rank == 4 && chance(g, 3, 4)) {
    rank = chance(g, 1, 2) ? 4 : 3;
    cd[rank == 4 ? 1 : 0] = x.d[1];
  } else {
    cd[0] = x.d[x.rank - 1];
  }
  bool mul = chance(g, 1, 3);
  char c[12];
  konst(g, c, rank, cd, 0.5f, mul ? 1.f : 0.f);
  return chance(g, 1, 2) ? binary_node(g, mul ? "Mul" : "Add", nm(g, xi), c, x.rank, x.d)
                         : binary_node(g, mul ? "Mul" : "Add", c, nm(g, xi), x.rank, x.d);
}

static int act(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int n, o;
  char note[48];
  switch (pick(g, 18)) {
    case 16:
    case 17: return bias_op(g, xi);

    case 0: return unary_node(g, "Relu", xi, x.rank, x.d, "", NULL);
    case 1: {
      float alpha = chance(g, 1, 2) ? 0.1f : 0.01f;
      snprintf(note, sizeof note, "alpha=%g", alpha);
      o = unary_node(g, "LeakyRelu", xi, x.rank, x.d, note, &n);
      mb_attr_float(g->b, n, "alpha", alpha);
      return o;
    }
    case 2: return unary_node(g, "Sigmoid", xi, x.rank, x.d, "", NULL);
    case 3: return unary_node(g, "HardSwish", xi, x.rank, x.d, "", NULL);
    case 4: {
      o = unary_node(g, "HardSigmoid", xi, x.rank, x.d, "alpha=0.25 beta=0.4", &n);
      mb_attr_float(g->b, n, "alpha", 0.25f);
      mb_attr_float(g->b, n, "beta", 0.4f);
      return o;
    }
    case 5: {
      static const float lo[] = {0.f, -0.5f, -1.f, 0.3f}, hi[] = {6.f, 0.5f, 1.f, -0.2f};
      int k = pick(g, 4), form = pick(g, 4);
      return clip(g, xi, lo[k], hi[k], form != 1, form != 2);
    }
    case 6: return hardswish_spelled(g, xi);
    case 7: {
      int s = unary_node(g, "Sigmoid", xi, x.rank, x.d, "", NULL);
      return chance(g, 1, 2) ? binary_node(g, "Mul", nm(g, xi), nm(g, s), x.rank, x.d)
                             : binary_node(g, "Mul", nm(g, s), nm(g, xi), x.rank, x.d);
    }
    case 8: return gelu_spelled(g, xi, false);
    case 9: return gelu_spelled(g, xi, true);
    case 10:
    case 11: return scalar_linear(g, xi);
    case 12: return unary_node(g, "Tanh", xi, x.rank, x.d, "", NULL);
    default: return plain_act(g, xi);
  }
}

/* Add(x, another value of x's shape) in either order, or -1 when none. */
static int residual(gen_t *g, int xi) {
  int other = chance(g, 1, 8) ? xi : same_shape(g, xi);
  if (other < 0) return -1;
  val_t x = g->v[xi];
  return chance(g, 1, 2) ? binary_node(g, "Add", nm(g, xi), nm(g, other), x.rank, x.d)
                         : binary_node(g, "Add", nm(g, other), nm(g, xi), x.rank, x.d);
}

/* count activations, a residual Add among them at a drawn place */
static int act_chain(gen_t *g, int xi, int count, bool with_residual) {
  int at = with_residual ? pick(g, count + 1) : -1;
  for (int k = 0; k <= count; k++) {
    if (k == at) {
      int r = residual(g, xi);
      if (r >= 0) xi = r;
    }
    if (k < count) xi = act(g, xi);
  }
  return xi;
}

/* ---- image blocks ---- */

static const int64_t CHANNELS[] = {1, 3, 4, 5, 8, 12, 16, 17, 24, 32};

/* Conv geometry drawn for an [N, C, spatial...] input (1 or 2 spatial
 * axes). pads: begin of each axis, then end of each. */
typedef struct {
  int sp;
  int64_t M, group, k[2], s[2], dil[2], pads[4];
  int pad_mode; /* 0 explicit pads, 1 SAME_UPPER, 2 SAME_LOWER, 3 none given */
  int64_t out[2];
} conv_geo_t;

/* Output size along one axis, or 0 when the window does not fit. */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t dil, int64_t pl, int64_t pr,
                          bool ceil_mode) {
  int64_t ext = (k - 1) * dil + 1, span = in + pl + pr - ext;
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + pl) o--;
  return o;
}

static void conv_out(const val_t *x, conv_geo_t *c) {
  for (int a = 0; a < c->sp; a++) {
    int64_t in = x->d[a + 2];
    if (c->pad_mode == 1 || c->pad_mode == 2)
      c->out[a] = (in + c->s[a] - 1) / c->s[a];
    else if (c->pad_mode == 3)
      c->out[a] = window_out(in, c->k[a], c->s[a], c->dil[a], 0, 0, false);
    else
      c->out[a] =
          window_out(in, c->k[a], c->s[a], c->dil[a], c->pads[a], c->pads[a + c->sp], false);
  }
}

static void draw_conv(gen_t *g, const val_t *x, conv_geo_t *c) {
  static const int64_t ks[] = {1, 3, 3, 1, 2, 5};
  int64_t C = x->d[1];
  *c = (conv_geo_t){.sp = x->rank - 2};
  c->M = pick_of(g, CHANNELS, 10);
  c->group = 1;
  int kind = pick(g, 5);
  if (kind == 2 || kind == 3) /* depthwise, multiplier 1 or 2 */
    c->group = C, c->M = C * (kind == 3 && C <= 16 ? 2 : 1);
  else if (kind == 4 && C % 2 == 0 && c->M % 2 == 0)
    c->group = 2;
  c->k[0] = pick_of(g, ks, 6);
  c->k[1] = chance(g, 1, 5) ? pick_of(g, ks, 6) : c->k[0];
  c->s[0] = c->s[1] = chance(g, 1, 4) ? 2 : 1;
  if (chance(g, 1, 8)) c->s[1] = 3 - c->s[0];
  c->dil[0] = c->dil[1] = chance(g, 1, 8) ? 2 : 1;
  c->pad_mode = pick(g, 6);
  if (c->pad_mode > 3) c->pad_mode = 0;
  for (int a = 0; a < c->sp; a++) {
    int64_t half = (c->k[a] - 1) * c->dil[a] / 2;
    bool asym = chance(g, 1, 4);
    c->pads[a] = asym ? pick(g, 3) : half;
    c->pads[a + c->sp] = asym ? pick(g, 3) : half;
  }
  conv_out(x, c);
}

static bool conv_fits(const val_t *x, const conv_geo_t *c) {
  int64_t n = x->d[0] * c->M;
  for (int a = 0; a < c->sp; a++) n *= c->out[a];
  return n >= 1 && n <= MAX_ELEMS;
}

static int emit_conv(gen_t *g, int xi, const conv_geo_t *c) {
  val_t x = g->v[xi];
  char w[12], bias[12] = "", note[96];
  int sp = c->sp;
  int64_t wd[4] = {c->M, x.d[1] / c->group, c->k[0], c->k[1]};
  konst(g, w, 2 + sp, wd, 1.7f / sqrtf((float)numel(1 + sp, wd + 1)), 0.f);
  if (chance(g, 2, 3)) konst(g, bias, 1, &c->M, 0.2f, 0.f);
  int64_t od[4] = {x.d[0], c->M, c->out[0], c->out[1]};
  int o = new_val(g, 2 + sp, od);
  snprintf(note, sizeof note, "k%lldx%lld s%lld,%lld d%lld g%lld pads%d(%lld,%lld,%lld,%lld)",
           (long long)c->k[0], (long long)c->k[1], (long long)c->s[0], (long long)c->s[1],
           (long long)c->dil[0], (long long)c->group, c->pad_mode, (long long)c->pads[0],
           (long long)c->pads[1], (long long)c->pads[2], (long long)c->pads[3]);
  int n = node(g, "Conv", *bias ? IN(nm(g, xi), w, bias) : IN(nm(g, xi), w), OUT(nm(g, o)), note);
  if (chance(g, 1, 2)) mb_attr_ints(g->b, n, "kernel_shape", sp, c->k);
  if (c->s[0] != 1 || c->s[sp - 1] != 1 || chance(g, 1, 4))
    mb_attr_ints(g->b, n, "strides", sp, c->s);
  if (c->dil[0] != 1) mb_attr_ints(g->b, n, "dilations", sp, c->dil);
  if (c->pad_mode == 0) mb_attr_ints(g->b, n, "pads", 2 * sp, c->pads);
  if (c->pad_mode == 1 || c->pad_mode == 2)
    mb_attr_string(g->b, n, "auto_pad", c->pad_mode == 1 ? "SAME_UPPER" : "SAME_LOWER");
  if (c->group > 1) mb_attr_int(g->b, n, "group", c->group);
  return o;
}

static int batch_norm(gen_t *g, int xi) {
  val_t x = g->v[xi];
  char s[12], b[12], m[12], v[12];
  int64_t C = x.d[1];
  konst(g, s, 1, &C, 0.5f, 1.f);
  konst(g, b, 1, &C, 0.3f, 0.f);
  konst(g, m, 1, &C, 0.3f, 0.f);
  konst(g, v, 1, &C, 0.5f, 1.f);
  int o = new_val(g, x.rank, x.d);
  int n = node(g, "BatchNormalization", IN(nm(g, xi), s, b, m, v), OUT(nm(g, o)), "");
  if (chance(g, 1, 3)) mb_attr_float(g->b, n, "epsilon", 1e-3f);
  return o;
}

static int conv_block(gen_t *g, int xi) {
  conv_geo_t c;
  draw_conv(g, &g->v[xi], &c);
  int bn = chance(g, 1, 3), count = pick(g, 4) + (chance(g, 1, 8) ? 2 : 0);
  bool res = chance(g, 1, 3);
  if (!conv_fits(&g->v[xi], &c)) return -1;
  int o = emit_conv(g, xi, &c);
  if (bn) o = batch_norm(g, o);
  return act_chain(g, o, count, res);
}

/* A conv of x to M channels at stride s whose output is ceil(in / s) on
 * each axis (odd kernel, half pads or SAME_UPPER), with BN and activations:
 * one branch of a fork. */
static int conv_same(gen_t *g, int xi, int64_t M, int64_t s) {
  const val_t *x = &g->v[xi];
  conv_geo_t c;
  draw_conv(g, x, &c);
  c.M = M;
  c.group = M == x->d[1] && chance(g, 1, 2) ? M : 1;
  c.s[0] = c.s[1] = s;
  c.dil[0] = c.dil[1] = 1;
  for (int a = 0; a < c.sp; a++) {
    c.k[a] = 1 + 2 * pick(g, 3);
    c.pads[a] = c.pads[a + c.sp] = c.k[a] / 2;
  }
  c.pad_mode = chance(g, 1, 4);
  conv_out(x, &c);
  int bn = chance(g, 1, 3), count = pick(g, 3);
  if (!conv_fits(x, &c)) return -1;
  int o = emit_conv(g, xi, &c);
  if (bn) o = batch_norm(g, o);
  return act_chain(g, o, count, false);
}

/* Two branches from x joined by Add, Mul, Sub or Concat: conv branches (a
 * ResNet block's shortcut, an Inception cell), x itself, or linear
 * branches of a sequence. The second branch is computed after the first,
 * so a conv fused with the join's sum moves past it. */
static int fork_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  static const int64_t strides[] = {1, 1, 2};
  int64_t M = chance(g, 1, 2) ? x.d[1] : pick_of(g, CHANNELS, 10), s = pick_of(g, strides, 3);
  int br[2], join = pick(g, 5);
  for (int k = 0; k < 2; k++) {
    int kind = pick(g, 4);
    if (x.rank == 2 || (x.rank == 3 && kind < 2)) {
      int64_t K = x.d[x.rank - 1], wd[2] = {K, K};
      char w[12];
      konst(g, w, 2, wd, 1.7f / sqrtf((float)K), 0.f);
      br[k] = binary_node(g, "MatMul", nm(g, xi), w, x.rank, x.d);
      if (kind) br[k] = act_chain(g, br[k], kind - 1, false);
    } else if (kind == 0 && M == x.d[1] && s == 1) {
      br[k] = xi;
    } else {
      br[k] = conv_same(g, xi, M, s);
    }
    if (br[k] < 0) return -1;
  }
  val_t a = g->v[br[0]], b = g->v[br[1]];
  if (a.rank != b.rank || memcmp(a.d, b.d, sizeof(int64_t) * (size_t)a.rank)) return -1;
  static const char *const ops[] = {"Add", "Add", "Mul", "Sub", "Concat"};
  if (join < 4) return binary_node(g, ops[join], nm(g, br[0]), nm(g, br[1]), a.rank, a.d);
  int64_t od[4];
  memcpy(od, a.d, sizeof od);
  od[1] *= 2;
  if (numel(a.rank, od) > MAX_ELEMS) return -1;
  int o = new_val(g, a.rank, od);
  int n = node(g, "Concat", IN(nm(g, br[0]), nm(g, br[1])), OUT(nm(g, o)), "axis=1");
  mb_attr_int(g->b, n, "axis", 1);
  return o;
}

/* ConvTranspose (kernel, stride, pads, output_padding, groups), then
 * activations */
static int deconv_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int64_t C = x.d[1], M = pick_of(g, CHANNELS, 10), k = 1 + pick(g, 3), s = 1 + pick(g, 2);
  int64_t group = C % 2 == 0 && M % 2 == 0 && chance(g, 1, 4) ? 2 : 1, p = pick(g, (int)k);
  int64_t op = s > 1 ? pick(g, 2) : 0, ks[2] = {k, k}, st[2] = {s, s}, pads[4] = {p, p, p, p};
  int64_t od[4] = {x.d[0], M, (x.d[2] - 1) * s + k - 2 * p + op, (x.d[3] - 1) * s + k - 2 * p + op};
  int count = pick(g, 3);
  if (od[2] < 1 || od[3] < 1 || numel(4, od) > MAX_ELEMS) return -1;
  char w[12], note[48];
  int64_t wd[4] = {C, M / group, k, k};
  konst(g, w, 4, wd, 1.7f / sqrtf((float)(C * k * k / (s * s) + 1)), 0.f);
  snprintf(note, sizeof note, "k%lld s%lld p%lld op%lld g%lld", (long long)k, (long long)s,
           (long long)p, (long long)op, (long long)group);
  int o = new_val(g, 4, od);
  int n = node(g, "ConvTranspose", IN(nm(g, xi), w), OUT(nm(g, o)), note);
  mb_attr_ints(g->b, n, "kernel_shape", 2, ks);
  mb_attr_ints(g->b, n, "strides", 2, st);
  mb_attr_ints(g->b, n, "pads", 4, pads);
  if (op) mb_attr_ints(g->b, n, "output_padding", 2, (const int64_t[]){op, op});
  if (group > 1) mb_attr_int(g->b, n, "group", group);
  return act_chain(g, o, count, false);
}

/* Pad (spatial, sometimes channels, a value, another mode) and then a
 * Conv, an AveragePool or a MaxPool. */
static int pad_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int64_t pads[8] = {0};
  for (int a = 2; a < 4; a++) pads[a] = pick(g, 3), pads[a + 4] = pick(g, 3);
  if (chance(g, 1, 10)) pads[1] = 1;
  int mode = pick(g, 10); /* 0: edge, 1: reflect, else constant */
  float value = chance(g, 1, 6) ? 0.5f : 0.f;
  bool value_given = chance(g, 1, 2);
  int consumer = pick(g, 3);
  int64_t pd[4] = {x.d[0], x.d[1] + pads[1] + pads[5], x.d[2] + pads[2] + pads[6],
                   x.d[3] + pads[3] + pads[7]};
  if (mode == 1 &&
      (pads[2] >= x.d[2] || pads[6] >= x.d[2] || pads[3] >= x.d[3] || pads[7] >= x.d[3] || pads[1]))
    mode = 2;
  if (numel(4, pd) > MAX_ELEMS) return -1;
  char pn[12], vn[12];
  ints(g, pn, 8, pads);
  if (value_given || value != 0.f) scalar(g, vn, value);
  int p = new_val(g, 4, pd);
  char note[64];
  snprintf(note, sizeof note, "%s(%lld,%lld,%lld,%lld,%lld,%lld) value %g",
           mode == 0   ? "edge"
           : mode == 1 ? "reflect"
                       : "constant",
           (long long)pads[1], (long long)pads[2], (long long)pads[3], (long long)pads[5],
           (long long)pads[6], (long long)pads[7], value);
  int n = node(g, "Pad", value_given || value != 0.f ? IN(nm(g, xi), pn, vn) : IN(nm(g, xi), pn),
               OUT(nm(g, p)), note);
  if (mode < 2) mb_attr_string(g->b, n, "mode", mode == 0 ? "edge" : "reflect");
  if (consumer == 0) {
    conv_geo_t c;
    draw_conv(g, &g->v[p], &c);
    return conv_fits(&g->v[p], &c) ? emit_conv(g, p, &c) : p;
  }
  return -2 - p; /* the caller pools p */
}

static int pool(gen_t *g, int xi, int kind) {
  val_t x = g->v[xi];
  static const char *const ops[] = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"};
  int64_t k[2], s[2], pads[4], od[4] = {x.d[0], x.d[1], 1, 1};
  bool ceil_mode = chance(g, 1, 3), include = chance(g, 1, 2);
  for (int a = 0; a < 2; a++) {
    k[a] = 1 + pick(g, 3);
    s[a] = 1 + pick(g, 2);
    pads[a] = k[a] > 1 ? pick(g, 2) : 0;
    pads[a + 2] = k[a] > 1 ? pick(g, 2) : 0;
  }
  if (kind < 2)
    for (int a = 0; a < 2; a++)
      if (!(od[a + 2] = window_out(x.d[a + 2], k[a], s[a], 1, pads[a], pads[a + 2], ceil_mode)))
        return -1;
  char note[64] = "";
  if (kind < 2)
    snprintf(note, sizeof note, "k%lldx%lld s%lld,%lld pads(%lld,%lld,%lld,%lld)%s%s",
             (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1], (long long)pads[0],
             (long long)pads[1], (long long)pads[2], (long long)pads[3], ceil_mode ? " ceil" : "",
             kind == 1 && include ? " include_pad" : "");
  int n, o = unary_node(g, ops[kind], xi, 4, od, note, &n);
  if (kind >= 2) return o;
  mb_attr_ints(g->b, n, "kernel_shape", 2, k);
  mb_attr_ints(g->b, n, "strides", 2, s);
  mb_attr_ints(g->b, n, "pads", 4, pads);
  if (ceil_mode) mb_attr_int(g->b, n, "ceil_mode", 1);
  if (kind == 1 && include) mb_attr_int(g->b, n, "count_include_pad", 1);
  return o;
}

static int pad_or_pool_block(gen_t *g, int xi, bool pad_first) {
  if (!pad_first) return pool(g, xi, pick(g, 4));
  int p = pad_block(g, xi);
  if (p >= -1) return p;
  return pool(g, -2 - p, pick(g, 2));
}

/* Concat of xi with values (or itself) that match off the axis */
static int concat_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int axis = x.rank == 4 && chance(g, 3, 4) ? 1 : 1 + pick(g, x.rank - 1);
  int ins[4] = {xi}, n_in = 1, want = 2 + pick(g, 2);
  for (int i = g->n_v - 1; i >= 0 && n_in < want; i--) {
    bool ok = g->v[i].rank == x.rank && i != xi && chance(g, 2, 3);
    for (int k = 0; ok && k < x.rank; k++) ok = k == axis || g->v[i].d[k] == x.d[k];
    if (ok) ins[n_in++] = i;
  }
  if (n_in == 1 || chance(g, 1, 6)) ins[n_in++] = xi;
  int64_t od[4];
  memcpy(od, x.d, sizeof od);
  od[axis] = 0;
  for (int k = 0; k < n_in; k++) od[axis] += g->v[ins[k]].d[axis];
  if (numel(x.rank, od) > MAX_ELEMS) return -1;
  for (int k = n_in - 1; k > 0; k--) { /* a drawn order of the inputs */
    int j = pick(g, k + 1), t = ins[k];
    ins[k] = ins[j], ins[j] = t;
  }
  const char *names[5] = {NULL};
  for (int k = 0; k < n_in; k++) names[k] = nm(g, ins[k]);
  int o = new_val(g, x.rank, od);
  char note[16];
  snprintf(note, sizeof note, "axis=%d", axis);
  int n = node(g, "Concat", names, OUT(nm(g, o)), note);
  mb_attr_int(g->b, n, "axis", axis);
  return o;
}

/* Add, Mul or Sub with another value of the same shape, a squeeze-excite
 * style [N, C, 1, 1] value, itself, or a broadcast constant; Div by a
 * constant. */
static int binary_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  static const char *const ops[] = {"Add", "Mul", "Sub", "Add"};
  const char *op = ops[pick(g, 4)];
  int form = pick(g, 5);
  char other[12];
  int oi = -1;
  if (form == 0) oi = same_shape(g, xi);
  if (form == 1)
    for (int i = g->n_v - 1; i >= 0 && oi < 0; i--)
      if (x.rank == 4 && g->v[i].rank == 4 && g->v[i].d[0] == x.d[0] && g->v[i].d[1] == x.d[1] &&
          g->v[i].d[2] == 1 && g->v[i].d[3] == 1 && (x.d[2] > 1 || x.d[3] > 1))
        oi = i;
  if (form == 2) oi = xi;
  if (oi >= 0) {
    snprintf(other, sizeof other, "%s", nm(g, oi));
  } else {
    int64_t cd[4] = {1, 1, 1, 1};
    int rank = pick(g, 3); /* 0: scalar, 1: along the last axis, 2: along axis 1 */
    if (rank == 1) cd[0] = x.d[x.rank - 1];
    if (rank == 2) rank = x.rank, cd[1] = x.d[1];
    if (form == 4 && !strcmp(op, "Mul")) op = "Div";
    konst(g, other, rank, cd, 0.5f, !strcmp(op, "Div") ? 1.5f : 0.f);
  }
  if (!strcmp(op, "Div") || chance(g, 1, 2))
    return binary_node(g, op, nm(g, xi), other, x.rank, x.d);
  return binary_node(g, op, other, nm(g, xi), x.rank, x.d);
}

static int resize_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  float sc[4] = {1, 1, 2, 2};
  if (chance(g, 1, 3)) sc[3] = 1;
  int64_t od[4] = {x.d[0], x.d[1], x.d[2] * (int64_t)sc[2], x.d[3] * (int64_t)sc[3]}, four = 4;
  bool linear = chance(g, 1, 2);
  if (numel(4, od) > MAX_ELEMS) return -1;
  char roi[12], scales[12];
  snprintf(roi, sizeof roi, "w%d", g->n_consts++);
  mb_init(g->b, roi, PR_DTYPE_FLOAT, 1, (int64_t[]){0}, sc, 0);
  snprintf(scales, sizeof scales, "w%d", g->n_consts++);
  mb_init(g->b, scales, PR_DTYPE_FLOAT, 1, &four, sc, sizeof sc);
  int o = new_val(g, 4, od);
  int n = node(g, "Resize", IN(nm(g, xi), roi, scales), OUT(nm(g, o)), linear ? "linear" : "");
  if (linear) mb_attr_string(g->b, n, "mode", "linear");
  return o;
}

static int softmax_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int axis = chance(g, 1, 2) ? -1 : 1 + pick(g, x.rank - 1), n;
  char note[16];
  snprintf(note, sizeof note, "axis=%d", axis);
  int o = unary_node(g, chance(g, 1, 5) ? "LogSoftmax" : "Softmax", xi, x.rank, x.d, note, &n);
  mb_attr_int(g->b, n, "axis", axis);
  return o;
}

static int reshape(gen_t *g, int xi, int rank, const int64_t *target, const int64_t *od) {
  char sh[12], note[48];
  ints(g, sh, rank, target);
  int o = new_val(g, rank, od);
  snprintf(note, sizeof note, "to [%lld,%lld,%lld,%lld]", (long long)target[0],
           (long long)target[1], (long long)(rank > 2 ? target[2] : 0),
           (long long)(rank > 3 ? target[3] : 0));
  node(g, "Reshape", IN(nm(g, xi), sh), OUT(nm(g, o)), note);
  return o;
}

static int transpose(gen_t *g, int xi, const int64_t *perm) {
  val_t x = g->v[xi];
  int64_t od[4];
  for (int k = 0; k < x.rank; k++) od[k] = x.d[perm[k]];
  char note[32];
  snprintf(note, sizeof note, "perm %lld%lld%lld%lld", (long long)perm[0], (long long)perm[1],
           (long long)perm[2], (long long)(x.rank > 3 ? perm[3] : 9));
  int n, o = unary_node(g, "Transpose", xi, x.rank, od, note, &n);
  mb_attr_ints(g->b, n, "perm", x.rank, perm);
  return o;
}

/* Views and transposes that keep a rank-4 value */
static int view_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  switch (pick(g, 5)) {
    case 0: {
      static const int64_t perms[3][4] = {{0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 3, 1}};
      return transpose(g, xi, perms[pick(g, 3)]);
    }
    case 1: {
      int64_t t[4] = {0, x.d[1] * x.d[2], x.d[3], 1}, od[4] = {x.d[0], t[1], t[2], 1};
      return reshape(g, xi, 4, t, od);
    }
    case 2: {
      if (x.d[1] % 2) return -1;
      int64_t t[4] = {0, x.d[1] / 2, -1, x.d[3]}, od[4] = {x.d[0], t[1], 2 * x.d[2], x.d[3]};
      return reshape(g, xi, 4, t, od);
    }
    case 3: {
      int f =
          unary_node(g, "Flatten", xi, 2, (int64_t[]){x.d[0], x.d[1] * x.d[2] * x.d[3]}, "", NULL);
      int64_t t[4] = {-1, x.d[1], x.d[2], x.d[3]};
      return reshape(g, f, 4, t, x.d);
    }
    default: { /* through rank 5 and back */
      char ax[12];
      int64_t a = 4;
      ints(g, ax, 1, &a);
      int u = new_val(g, 4, x.d);
      node(g, "Unsqueeze", IN(nm(g, xi), ax), OUT(nm(g, u)), "axis 4");
      g->v[u].rank = -1; /* rank 5 is not tracked: never an operand */
      int o = new_val(g, 4, x.d);
      node(g, "Squeeze", IN(nm(g, u), ax), OUT(nm(g, o)), "axis 4");
      return o;
    }
  }
}

/* Split into two along an axis, or a Slice */
static int split_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int axis = x.rank == 4 && chance(g, 1, 2) ? 1 : 1 + pick(g, x.rank - 1);
  if (x.d[axis] < 2) return -1;
  int64_t first = 1 + pick(g, x.d[axis] - 1 < 256 ? (int)x.d[axis] - 1 : 256),
          sizes[2] = {first, x.d[axis] - first};
  int64_t d0[4], d1[4];
  memcpy(d0, x.d, sizeof d0), memcpy(d1, x.d, sizeof d1);
  d0[axis] = sizes[0], d1[axis] = sizes[1];
  char sp[12], st[12], en[12], ax[12], note[24];
  snprintf(note, sizeof note, "axis=%d at %lld", axis, (long long)first);
  if (chance(g, 1, 3)) {
    int64_t s = 0, e = first, a = axis;
    ints(g, st, 1, &s), ints(g, en, 1, &e), ints(g, ax, 1, &a);
    int o = new_val(g, x.rank, d0);
    node(g, "Slice", IN(nm(g, xi), st, en, ax), OUT(nm(g, o)), note);
    return o;
  }
  ints(g, sp, 2, sizes);
  int o0 = new_val(g, x.rank, d0), o1 = new_val(g, x.rank, d1);
  int n = node(g, "Split", IN(nm(g, xi), sp), OUT(nm(g, o0), nm(g, o1)), note);
  mb_attr_int(g->b, n, "axis", axis);
  return chance(g, 1, 2) ? o0 : o1;
}

/* ReduceMean over axes, keeping them; od: the output shape */
static int reduce_mean(gen_t *g, int xi, const int64_t *od, int n_axes, const int64_t *axes) {
  int rank = g->v[xi].rank, o = new_val(g, rank, od);
  char note[24], an[12];
  snprintf(note, sizeof note, "axes %lld%s", (long long)axes[0], n_axes > 1 ? ",..." : "");
  if (g->opset >= 18) {
    ints(g, an, n_axes, axes);
    node(g, "ReduceMean", IN(nm(g, xi), an), OUT(nm(g, o)), note);
  } else {
    int n = node(g, "ReduceMean", IN(nm(g, xi)), OUT(nm(g, o)), note);
    mb_attr_ints(g->b, n, "axes", n_axes, axes);
  }
  return o;
}

static int reduce_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int64_t axes[2] = {2, 3}, od[4] = {x.d[0], x.d[1], 1, 1};
  return reduce_mean(g, xi, od, 2, axes);
}

/* [N, C, H, W] -> [N, H W, C] (a sequence), or -> [N, C] (rows) */
static int to_seq_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  if (chance(g, 1, 3)) {
    int gp = pool(g, xi, 2);
    return unary_node(g, "Flatten", gp, 2, (int64_t[]){x.d[0], x.d[1]}, "", NULL);
  }
  int64_t t[3] = {0, x.d[1], -1}, od[3] = {x.d[0], x.d[1], x.d[2] * x.d[3]};
  int r = reshape(g, xi, 3, t, od);
  return transpose(g, r, (const int64_t[]){0, 2, 1});
}

/* ---- sequence and row blocks ---- */

static const int64_t WIDTHS[] = {4, 8, 12, 16, 17, 24, 32};

static int linear_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int64_t K = x.d[x.rank - 1], N = pick_of(g, WIDTHS, 7), wd[2] = {K, N}, od[4];
  memcpy(od, x.d, sizeof od);
  od[x.rank - 1] = N;
  int bias = pick(g, 3), count = pick(g, 3);
  bool res = chance(g, 1, 3);
  if (numel(x.rank, od) > MAX_ELEMS) return -1;
  char w[12], b[12];
  konst(g, w, 2, wd, 1.7f / sqrtf((float)K), 0.f);
  int o = binary_node(g, "MatMul", nm(g, xi), w, x.rank, od);
  if (bias) {
    int64_t bd[2] = {1, N};
    konst(g, b, bias, bias == 1 ? &N : bd, 0.2f, 0.f);
    o = chance(g, 1, 2) ? binary_node(g, "Add", nm(g, o), b, x.rank, od)
                        : binary_node(g, "Add", b, nm(g, o), x.rank, od);
  }
  return act_chain(g, o, count, res);
}

static int gemm_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int64_t K = x.d[1], N = pick_of(g, WIDTHS, 7), od[2] = {x.d[0], N};
  bool trans_b = chance(g, 1, 2), with_c = chance(g, 2, 3);
  float alpha = chance(g, 1, 3) ? 0.5f : 1.f, beta = chance(g, 1, 3) ? 2.f : 1.f;
  int64_t wd[2] = {trans_b ? N : K, trans_b ? K : N};
  char w[12], cn[12];
  konst(g, w, 2, wd, 1.7f / sqrtf((float)K), 0.f);
  if (with_c) konst(g, cn, 1, &N, 0.2f, 0.f);
  int o = new_val(g, 2, od);
  int n = node(g, "Gemm", with_c ? IN(nm(g, xi), w, cn) : IN(nm(g, xi), w), OUT(nm(g, o)),
               trans_b ? "transB" : "");
  if (trans_b) mb_attr_int(g->b, n, "transB", 1);
  if (alpha != 1.f) mb_attr_float(g->b, n, "alpha", alpha);
  if (beta != 1.f) mb_attr_float(g->b, n, "beta", beta);
  return o;
}

/* LayerNorm over the last axis as exporters write it out */
static int layer_norm_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  int64_t L = x.d[x.rank - 1], axes = -1, md[4];
  if (L < 2) return -1;
  memcpy(md, x.d, sizeof md);
  md[x.rank - 1] = 1;
  bool square_by_mul = chance(g, 1, 6), gamma = chance(g, 2, 3), beta = chance(g, 2, 3);
  char two[12], eps[12], gn[12], bn[12];
  int m = reduce_mean(g, xi, md, 1, &axes);
  int d = binary_node(g, "Sub", nm(g, xi), nm(g, m), x.rank, x.d);
  int d2;
  if (square_by_mul) {
    d2 = binary_node(g, "Mul", nm(g, d), nm(g, d), x.rank, x.d);
  } else {
    scalar(g, two, 2.f);
    d2 = binary_node(g, "Pow", nm(g, d), two, x.rank, x.d);
  }
  int v = reduce_mean(g, d2, md, 1, &axes);
  scalar(g, eps, 1e-3f);
  int ve = binary_node(g, "Add", nm(g, v), eps, x.rank, md);
  int sd = unary_node(g, "Sqrt", ve, x.rank, md, "", NULL);
  int o = binary_node(g, "Div", nm(g, d), nm(g, sd), x.rank, x.d);
  if (gamma) {
    konst(g, gn, 1, &L, 0.5f, 1.f);
    o = binary_node(g, "Mul", nm(g, o), gn, x.rank, x.d);
  }
  if (beta) {
    konst(g, bn, 1, &L, 0.5f, 0.f);
    o = chance(g, 1, 2) ? binary_node(g, "Add", nm(g, o), bn, x.rank, x.d)
                        : binary_node(g, "Add", bn, nm(g, o), x.rank, x.d);
  }
  return o;
}

/* Q, K, V of [N, S, D] as [N, H, S, dh] (K as [N, H, dh, S]) views */
static void attn_heads(gen_t *g, int xi, int64_t H, int *qkv) {
  val_t x = g->v[xi];
  int64_t D = x.d[2], dh = D / H, wd[2] = {D, D};
  int proj[3];
  char w[12], sp[12];
  if (chance(g, 1, 2)) {
    for (int k = 0; k < 3; k++) {
      konst(g, w, 2, wd, 1.7f / sqrtf((float)D), 0.f);
      proj[k] = binary_node(g, "MatMul", nm(g, xi), w, 3, x.d);
    }
  } else {
    int64_t w3[2] = {D, 3 * D}, od[3] = {x.d[0], x.d[1], 3 * D}, sizes[3] = {D, D, D};
    konst(g, w, 2, w3, 1.7f / sqrtf((float)D), 0.f);
    int all = binary_node(g, "MatMul", nm(g, xi), w, 3, od);
    ints(g, sp, 3, sizes);
    for (int k = 0; k < 3; k++) proj[k] = new_val(g, 3, x.d);
    int n = node(g, "Split", IN(nm(g, all), sp),
                 OUT(nm(g, proj[0]), nm(g, proj[1]), nm(g, proj[2])), "axis=2");
    mb_attr_int(g->b, n, "axis", 2);
  }
  static const int64_t to_heads[4] = {0, 2, 1, 3}, k_heads[4] = {0, 2, 3, 1};
  for (int k = 0; k < 3; k++) {
    int64_t t[4] = {0, 0, H, dh}, od[4] = {x.d[0], x.d[1], H, dh};
    int r = reshape(g, proj[k], 4, t, od);
    qkv[k] = transpose(g, r, k == 1 ? k_heads : to_heads);
  }
}

static int attention_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  static const int64_t heads[] = {1, 2, 4};
  int64_t H = pick_of(g, heads, 3), N = x.d[0], S = x.d[1], D = x.d[2];
  int scale = pick(g, 3), mask = pick(g, 3);
  bool back = chance(g, 3, 4);
  if (D % H || N * H * S * S > MAX_ELEMS) return -1;
  int qkv[3];
  attn_heads(g, xi, H, qkv);
  int64_t sd[4] = {N, H, S, S}, od[4] = {N, H, S, D / H};
  int s = binary_node(g, "MatMul", nm(g, qkv[0]), nm(g, qkv[1]), 4, sd);
  char c[12];
  if (scale) {
    scalar(g, c, scale == 1 ? sqrtf((float)(D / H)) : 1.f / sqrtf((float)(D / H)));
    s = binary_node(g, scale == 1 ? "Div" : "Mul", nm(g, s), c, 4, sd);
  }
  if (mask) {
    int64_t md[4] = {1, 1, S, S};
    konst(g, c, mask == 1 ? 4 : 1, mask == 1 ? md : &S, 2.f, -2.f);
    s = binary_node(g, "Add", nm(g, s), c, 4, sd);
  }
  int n, p = unary_node(g, "Softmax", s, 4, sd, "axis=-1", &n);
  mb_attr_int(g->b, n, "axis", -1);
  int o = binary_node(g, "MatMul", nm(g, p), nm(g, qkv[2]), 4, od);
  if (back) o = transpose(g, o, (const int64_t[]){0, 2, 1, 3});
  int64_t t[3] = {0, -1, D}, rd[3] = {N, S, D};
  return reshape(g, o, 3, t, rd);
}

/* [N, S, D] -> [N, D, S, 1]; [N, D] -> [N, D, 1, 1] */
static int to_image_block(gen_t *g, int xi) {
  val_t x = g->v[xi];
  if (x.rank == 2) {
    int64_t t[4] = {0, x.d[1], 1, 1}, od[4] = {x.d[0], x.d[1], 1, 1};
    return reshape(g, xi, 4, t, od);
  }
  int tr = transpose(g, xi, (const int64_t[]){0, 2, 1});
  int64_t t[4] = {0, x.d[2], x.d[1], 1}, od[4] = {x.d[0], x.d[2], x.d[1], 1};
  return reshape(g, tr, 4, t, od);
}

/* ---- the graph ---- */

static int image_block(gen_t *g, int xi) {
  switch (pick(g, 23)) {
    case 20:
    case 21: return fork_block(g, xi);
    case 22: return deconv_block(g, xi);
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5: return conv_block(g, xi);
    case 6:
    case 7: return pad_or_pool_block(g, xi, true);
    case 8: return pad_or_pool_block(g, xi, false);
    case 9: return concat_block(g, xi);
    case 10: return binary_block(g, xi);
    case 11: return act(g, xi);
    case 12: return resize_block(g, xi);
    case 13: return softmax_block(g, xi);
    case 14: return view_block(g, xi);
    case 15: return split_block(g, xi);
    case 16: return batch_norm(g, xi);
    case 17: return reduce_block(g, xi);
    case 18: return to_seq_block(g, xi);
    default: return layer_norm_block(g, xi);
  }
}

static int seq_block(gen_t *g, int xi) {
  int rank = g->v[xi].rank;
  switch (pick(g, 19)) {
    case 16: return fork_block(g, xi);
    case 17:
    case 18: return rank == 3 ? conv_block(g, xi) : linear_block(g, xi);
    case 0:
    case 1:
    case 2:
    case 3: return linear_block(g, xi);
    case 4: return rank == 2 ? gemm_block(g, xi) : linear_block(g, xi);
    case 5:
    case 6: return layer_norm_block(g, xi);
    case 7:
    case 8: return rank == 3 ? attention_block(g, xi) : gemm_block(g, xi);
    case 9: return act(g, xi);
    case 10: return binary_block(g, xi);
    case 11: return softmax_block(g, xi);
    case 12: return concat_block(g, xi);
    case 13: return split_block(g, xi);
    default: return to_image_block(g, xi);
  }
}

static void add_input(gen_t *g, const char *name, int rank, const int64_t *d) {
  int i = new_val(g, rank, d);
  snprintf(g->v[i].name, sizeof g->v[i].name, "%s", name);
  g->v[i].input = true;
  int64_t sym[4];
  memcpy(sym, d, sizeof sym);
  sym[0] = -1; /* the batch: the session's batch option decides the layouts */
  mb_input(g->b, name, PR_DTYPE_FLOAT, rank, sym);
}

static void draw_inputs(gen_t *g) {
  static const int64_t sides[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12};
  int64_t d[4] = {g->batch};
  int kind = pick(g, 8), rank = kind < 5 ? 4 : kind < 7 ? 3 : 2;
  if (rank == 4) {
    d[1] = pick_of(g, CHANNELS, 10), d[2] = pick_of(g, sides, 10), d[3] = pick_of(g, sides, 10);
    while (numel(4, d) > MAX_ELEMS / 4) d[2] = (d[2] + 1) / 2;
  } else if (rank == 3) {
    d[1] = 1 + pick(g, 9), d[2] = pick_of(g, WIDTHS, 7);
  } else {
    d[1] = pick_of(g, WIDTHS, 7);
  }
  add_input(g, "x", rank, d);
  if (chance(g, 1, 4)) add_input(g, "x2", rank, d);
  logf_(g, "inputs x%s [%lld,%lld,%lld,%lld]\n", g->n_v > 1 ? ", x2" : "", (long long)d[0],
        (long long)d[1], (long long)(rank > 2 ? d[2] : 0), (long long)(rank > 3 ? d[3] : 0));
}

/* The operand of the next block: mostly the newest value */
static int operand(gen_t *g) {
  int i = g->n_v - 1;
  if (chance(g, 1, 3)) i = pick(g, g->n_v < 256 ? g->n_v : 256);
  for (int tries = 0; g->v[i].rank < 2 && tries < g->n_v; tries++) i = (i + 1) % g->n_v;
  return i;
}

static void draw_outputs(gen_t *g, bool expose_all) {
  int last = g->n_v - 1;
  while (last > 0 && g->v[last].rank < 2) last--;
  logf_(g, "outputs:");
  for (int i = 0; i < g->n_v; i++) {
    bool want = i == last || chance(g, 1, 10);
    if (g->v[i].input || g->v[i].rank < 0) continue;
    if (want) logf_(g, " %s", g->v[i].name);
    if (want || expose_all) mb_output(g->b, g->v[i].name);
  }
  logf_(g, "\n");
}

mb_t *rg_generate(rg_src_t src, bool expose_all, rg_params_t *params, char *log, size_t log_len) {
  gen_t *g = calloc(1, sizeof *g);
  g->src = &src;
  g->opset = chance(g, 1, 4) ? 18 : 13;
  g->b = mb_new(g->opset);
  g->log = log;
  g->log_len = log_len;
  if (log && log_len) log[0] = 0;
  static const int64_t batches[] = {1, 1, 2, 3};
  g->batch = pick_of(g, batches, 4);
  params->batch = g->batch;
  params->threads_fused = 1 + pick(g, 2);
  params->threads_ref = 1 + pick(g, 2);
  logf_(g, "opset %d, batch %lld, threads fused %d, unfused %d\n", g->opset, (long long)g->batch,
        params->threads_fused, params->threads_ref);
  draw_inputs(g);
  int blocks = 1 + pick(g, MAX_BLOCKS);
  for (int k = 0; k < blocks && g->n_v + ROOM < MAX_VALUES && !exhausted(g); k++) {
    int xi = operand(g);
    if (g->v[xi].rank == 4)
      image_block(g, xi);
    else
      seq_block(g, xi);
  }
  if (g->n_v == 1 + (g->v[1].input ? 1 : 0)) act(g, 0); /* at least one node */
  draw_outputs(g, expose_all);
  params->n_nodes = g->n_nodes;
  mb_t *b = g->b;
  free(g);
  return b;
}
