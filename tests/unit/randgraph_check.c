/* The differential check of a random graph (randgraph.h): fused against
 * unfused, and against unfused with every value a graph output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packrat/engine.h"
#include "randgraph.h"

enum { MAX_IO = 400 };

/* One session's outputs, copied. */
typedef struct {
  int n_out;
  const char *name[MAX_IO];
  float *out[MAX_IO];
  size_t len[MAX_IO];
  char ops[2048]; /* ",Conv,Relu," */
  int n_kernels;
} run_t;

static void free_run(run_t *r) {
  for (int i = 0; i < r->n_out; i++) free(r->out[i]);
  r->n_out = 0;
}

typedef struct {
  int n;
  pr_tensor_t t[2];
} inputs_t;

/* Random inputs in [-2, 2) for the shapes of session s. */
static void make_inputs(pr_session_t *s, int n, inputs_t *in) {
  uint32_t seed = 12345;
  in->n = n;
  for (int i = 0; i < n; i++) {
    pr_tensor_info_t info;
    pr_engine_session_input(s, i, &info);
    pr_tensor_t *t = &in->t[i];
    memset(t, 0, sizeof *t);
    t->dtype = PR_DTYPE_FLOAT;
    t->rank = info.rank;
    int64_t cnt = 1;
    for (int k = 0; k < info.rank; k++) cnt *= t->dims[k] = info.dims[k];
    float *x = malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
    for (int64_t j = 0; j < cnt; j++) {
      seed = seed * 1664525u + 1013904223u;
      x[j] = (float)((seed >> 8) & 0xffff) / 16384.f - 2.f;
    }
    t->data = x;
  }
}

static void record_ops(pr_session_t *s, run_t *r) {
  r->n_kernels = pr_engine_session_num_kernels(s);
  snprintf(r->ops, sizeof r->ops, ",");
  for (int i = 0; i < r->n_kernels; i++) {
    pr_kernel_info_t info;
    if (pr_engine_session_kernel(s, i, &info)) continue;
    size_t used = strlen(r->ops);
    snprintf(r->ops + used, sizeof r->ops - used, "%s,", info.op);
  }
}

/* Compiles m (fused or not, with threads) and runs it once on in (made
 * from this session's input shapes first when in->n is 0). */
static pr_status_t run_model(pr_model_t *m, bool fuse, int threads, int64_t batch, inputs_t *in,
                             run_t *r, char *err, size_t err_len) {
  pr_session_options_t opt = pr_session_options_default();
  opt.disable_fusion = !fuse;
  opt.threads = threads;
  opt.batch = batch;
  pr_session_t *s;
  pr_status_t st = pr_engine_session_create(m, &opt, &s, err, err_len);
  if (st) return st;
  int n_in = pr_engine_model_num_inputs(m);
  if (!in->n) make_inputs(s, n_in, in);
  r->n_out = pr_engine_model_num_outputs(m);
  pr_tensor_t *out = calloc((size_t)r->n_out, sizeof *out);
  st = pr_engine_session_run(s, in->t, n_in, out, r->n_out, err, err_len);
  for (int i = 0; i < r->n_out && !st; i++) {
    pr_tensor_info_t info;
    pr_engine_session_output(s, i, &info);
    r->name[i] = info.name; /* the model's string: lives as long as m */
    size_t n = (size_t)pr_tensor_numel(&out[i]);
    r->len[i] = n;
    r->out[i] = malloc(sizeof(float) * (n ? n : 1));
    memcpy(r->out[i], out[i].data, sizeof(float) * n);
  }
  if (st) r->n_out = 0;
  record_ops(s, r);
  free(out);
  pr_engine_session_destroy(s);
  return st;
}

/* got against ref: same NaNs, then max|diff| <= 1e-4 max|ref| + 1e-5. */
static bool agree(const float *ref, const float *got, size_t n, const char *what, const char *name,
                  char *msg, size_t len) {
  double max_ref = 0, max_diff = 0;
  size_t at = 0;
  for (size_t j = 0; j < n; j++)
    if (isfinite(ref[j])) max_ref = fmax(max_ref, fabs(ref[j]));
  for (size_t j = 0; j < n; j++) {
    if (isnan(ref[j]) != isnan(got[j]) || (isinf(ref[j]) && ref[j] != got[j])) {
      snprintf(msg, len, "output %s, %s: element %zu is %g, reference %g", name, what, j, got[j],
               ref[j]);
      return false;
    }
    double d = isfinite(ref[j]) ? fabs((double)ref[j] - got[j]) : 0;
    if (d > max_diff) max_diff = d, at = j;
  }
  if (max_diff <= 1e-4 * max_ref + 1e-5) return true;
  snprintf(msg, len, "output %s, %s: max diff %g at element %zu (%g, reference %g), max |ref| %g",
           name, what, max_diff, at, got[at], ref[at], max_ref);
  return false;
}

/* Every output of the run with fewer outputs against the output of the same
 * name in the other; ref's values are the reference. */
static bool compare(const run_t *ref, const run_t *got, const char *what, char *msg, size_t len) {
  const run_t *few = ref->n_out <= got->n_out ? ref : got, *many = few == ref ? got : ref;
  for (int i = 0; i < few->n_out; i++) {
    int j = 0;
    while (j < many->n_out && strcmp(many->name[j], few->name[i])) j++;
    if (j == many->n_out) {
      snprintf(msg, len, "output %s missing (%s)", few->name[i], what);
      return false;
    }
    const float *r = few == ref ? few->out[i] : many->out[j];
    const float *o = few == ref ? many->out[j] : few->out[i];
    if (few->len[i] != many->len[j]) {
      snprintf(msg, len, "output %s: %zu and %zu elements (%s)", few->name[i], few->len[i],
               many->len[j], what);
      return false;
    }
    if (!agree(r, o, few->len[i], what, few->name[i], msg, len)) return false;
  }
  return true;
}

/* The kernels of the fused session that the unfused one does not run. */
static void made_ops(const run_t *fused, const run_t *ref, char *out, size_t len) {
  snprintf(out, len, ",");
  char ops[sizeof fused->ops];
  snprintf(ops, sizeof ops, "%s", fused->ops);
  for (char *tok = strtok(ops, ","); tok; tok = strtok(NULL, ",")) {
    char key[64];
    snprintf(key, sizeof key, ",%s,", tok);
    if (!strstr(ref->ops, key) && !strstr(out, key) && strlen(out) + strlen(tok) + 2 < len)
      strcat(strcat(out, tok), ",");
  }
}

static void run_three(pr_model_t *m, pr_model_t *me, const rg_params_t *p, rg_result_t *res) {
  run_t *r = calloc(3, sizeof *r); /* unfused, fused, every value an output */
  inputs_t in = {0};
  char err[256];
  if (run_model(m, false, p->threads_ref, p->batch, &in, &r[0], err, sizeof err)) {
    res->verdict = RG_SKIP;
    snprintf(res->msg, sizeof res->msg, "unfused: %s", err);
  } else if (run_model(m, true, p->threads_fused, p->batch, &in, &r[1], err, sizeof err)) {
    res->verdict = RG_FAIL;
    snprintf(res->msg, sizeof res->msg, "fused session fails where the unfused one runs: %s", err);
  } else if (run_model(me, false, 1, p->batch, &in, &r[2], err, sizeof err)) {
    res->verdict = RG_FAIL;
    snprintf(res->msg, sizeof res->msg, "with every value an output: %s", err);
  } else if (!compare(&r[0], &r[1], "fused vs unfused", res->msg, sizeof res->msg) ||
             !compare(&r[2], &r[1], "fused vs every value an output", res->msg, sizeof res->msg) ||
             !compare(&r[2], &r[0], "unfused vs every value an output", res->msg,
                      sizeof res->msg)) {
    res->verdict = RG_FAIL;
  }
  res->n_kernels = r[1].n_kernels;
  res->fused = r[1].n_kernels && r[1].n_kernels < r[0].n_kernels;
  made_ops(&r[1], &r[0], res->made, sizeof res->made);
  for (int k = 0; k < 3; k++) free_run(&r[k]);
  for (int i = 0; i < in.n; i++) free(in.t[i].data);
  free(r);
}

void rg_check(rg_src_t src, rg_result_t *res) {
  memset(res, 0, sizeof *res);
  rg_params_t p, pe;
  mb_t *b = rg_generate(src, false, &p, res->log, sizeof res->log);
  mb_t *be = rg_generate(src, true, &pe, NULL, 0);
  char err[256], err_e[256];
  pr_model_t *m = mb_load(b, err, sizeof err), *me = mb_load(be, err_e, sizeof err_e);
  if (!m || !me) {
    res->verdict = RG_FAIL; /* the generator made a model the loader refuses */
    snprintf(res->msg, sizeof res->msg, "load: %s", m ? err_e : err);
  } else {
    run_three(m, me, &p, res);
  }
  pr_engine_model_destroy(m);
  pr_engine_model_destroy(me);
}
