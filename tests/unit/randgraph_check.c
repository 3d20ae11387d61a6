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
  float *orig[2]; /* what the runs must leave in t */
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
    in->orig[i] = malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
    memcpy(in->orig[i], x, sizeof(float) * (size_t)cnt);
  }
}

static void free_inputs(inputs_t *in) {
  for (int i = 0; i < in->n; i++) free(in->t[i].data), free(in->orig[i]);
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

static pr_status_t open_session(pr_model_t *m, bool fuse, int threads, int64_t batch,
                                pr_session_t **s, char *err, size_t err_len) {
  pr_session_options_t opt = pr_session_options_default();
  opt.disable_fusion = !fuse;
  opt.threads = threads;
  opt.batch = batch;
  return pr_engine_session_create(m, &opt, s, err, err_len);
}

/* Runs s twice on in and copies the outputs into r. false with msg when a
 * run fails, writes into an input, or the second run's outputs are not the
 * first one's, bit for bit. */
static bool run_session(pr_session_t *s, const char *what, inputs_t *in, run_t *r, char *msg,
                        size_t len) {
  char err[256];
  record_ops(s, r);
  r->n_out = 0;
  int n_out = 0;
  while (pr_engine_session_output(s, n_out, &(pr_tensor_info_t){0}) == PR_OK) n_out++;
  pr_tensor_t *out = calloc((size_t)n_out + 1, sizeof *out);
  for (int pass = 0; pass < 2; pass++) {
    if (pr_engine_session_run(s, in->t, in->n, out, n_out, err, sizeof err)) {
      snprintf(msg, len, "%s: run %d: %s", what, pass + 1, err);
      free(out);
      return false;
    }
    for (int i = 0; i < in->n; i++)
      if (memcmp(in->t[i].data, in->orig[i], sizeof(float) * (size_t)pr_tensor_numel(&in->t[i]))) {
        snprintf(msg, len, "%s: run %d wrote into input %d", what, pass + 1, i);
        free(out);
        return false;
      }
    for (int i = 0; i < n_out; i++) {
      size_t n = (size_t)pr_tensor_numel(&out[i]);
      if (pass == 0) {
        pr_tensor_info_t info;
        pr_engine_session_output(s, i, &info);
        r->name[i] = info.name; /* the model's string: lives as long as the model */
        r->len[i] = n;
        r->out[i] = malloc(sizeof(float) * (n ? n : 1));
        memcpy(r->out[i], out[i].data, sizeof(float) * n);
        r->n_out = i + 1;
      } else if (memcmp(r->out[i], out[i].data, sizeof(float) * n)) {
        snprintf(msg, len, "%s: output %s of the second run differs from the first", what,
                 r->name[i]);
        free(out);
        return false;
      }
    }
  }
  free(out);
  return true;
}

/* got against ref: same NaNs, then max|diff| <= tol max|ref| + 1e-5. */
double rg_tolerance(int n_nodes) {
  return 1e-4 * (n_nodes > 32 ? n_nodes / 32.0 : 1.0);
}

static bool agree(const float *ref, const float *got, size_t n, double tol, const char *what,
                  const char *name, char *msg, size_t len) {
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
  if (getenv("PR_RANDGRAPH_VERBOSE"))
    printf("  %s %s: max diff %g, max |ref| %g\n", name, what, max_diff, max_ref);
  if (max_diff <= tol * max_ref + 1e-5) return true;
  snprintf(msg, len, "output %s, %s: max diff %g at element %zu (%g, reference %g), max |ref| %g",
           name, what, max_diff, at, got[at], ref[at], max_ref);
  return false;
}

/* Every output of the run with fewer outputs against the output of the same
 * name in the other; ref's values are the reference. */
static bool compare(const run_t *ref, const run_t *got, double tol, const char *what, char *msg,
                    size_t len) {
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
    if (!agree(r, o, few->len[i], tol, what, few->name[i], msg, len)) return false;
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

/* Opens the three sessions (all at once, so that the fused and unfused
 * ones share the model's reordered weights where they can), runs and
 * compares them. */
static void run_three(pr_model_t *m, pr_model_t *me, const rg_params_t *p, rg_result_t *res) {
  run_t *r = calloc(3, sizeof *r); /* unfused, fused, every value an output */
  pr_session_t *s[3] = {NULL, NULL, NULL};
  static const char *const what[3] = {"unfused", "fused", "every value an output"};
  inputs_t in = {0};
  char err[256];
  res->verdict = RG_FAIL;
  if (open_session(m, false, p->threads_ref, p->batch, &s[0], err, sizeof err)) {
    res->verdict = RG_SKIP;
    snprintf(res->msg, sizeof res->msg, "unfused: %s", err);
  } else if (open_session(m, true, p->threads_fused, p->batch, &s[1], err, sizeof err)) {
    snprintf(res->msg, sizeof res->msg, "fused session fails where the unfused one runs: %s", err);
  } else if (open_session(me, false, 1, p->batch, &s[2], err, sizeof err)) {
    snprintf(res->msg, sizeof res->msg, "with every value an output: %s", err);
  } else {
    make_inputs(s[0], pr_engine_model_num_inputs(m), &in);
    bool ok = true;
    for (int k = 0; k < 3 && ok; k++)
      ok = run_session(s[k], what[k], &in, &r[k], res->msg, sizeof res->msg);
    double tol = rg_tolerance(p->n_nodes);
    if (ok && compare(&r[0], &r[1], tol, "fused vs unfused", res->msg, sizeof res->msg) &&
        compare(&r[2], &r[1], tol, "fused vs every value an output", res->msg, sizeof res->msg) &&
        compare(&r[2], &r[0], tol, "unfused vs every value an output", res->msg, sizeof res->msg))
      res->verdict = RG_OK;
  }
  res->n_kernels = r[1].n_kernels;
  res->fused = r[1].n_kernels && r[1].n_kernels < r[0].n_kernels;
  made_ops(&r[1], &r[0], res->made, sizeof res->made);
  for (int k = 0; k < 3; k++) free_run(&r[k]), pr_engine_session_destroy(s[k]);
  free_inputs(&in);
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

float *rg_reference(rg_src_t src, size_t *n, double *tol) {
  rg_params_t p;
  char err[256];
  *n = 0;
  pr_model_t *m = mb_load(rg_generate(src, false, &p, NULL, 0), err, sizeof err);
  *tol = rg_tolerance(p.n_nodes);
  pr_session_t *s = NULL;
  float *all = NULL;
  if (m && !open_session(m, false, p.threads_ref, p.batch, &s, err, sizeof err)) {
    inputs_t in = {0};
    run_t *r = calloc(1, sizeof *r);
    make_inputs(s, pr_engine_model_num_inputs(m), &in);
    if (run_session(s, "unfused", &in, r, err, sizeof err)) {
      size_t total = 0;
      for (int i = 0; i < r->n_out; i++) total += r->len[i];
      all = malloc(sizeof(float) * (total ? total : 1));
      for (int i = 0; i < r->n_out; i++)
        memcpy(all + *n, r->out[i], sizeof(float) * r->len[i]), *n += r->len[i];
    }
    free_run(r);
    free(r);
    free_inputs(&in);
  }
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
  return all;
}

bool rg_agree(const float *ref, const float *got, size_t n, double tol, char *msg, size_t len) {
  return agree(ref, got, n, tol, "", "", msg, len);
}
