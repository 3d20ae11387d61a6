/* The quantizer's public API (packrat/quantize.h): plan, calibrate through
 * the engine, write the QDQ model.
 *
 * Notes on the design:
 * - Calibration reads intermediate tensors by marking them as graph
 *   outputs: the planned activations are appended to a copy of the model's
 *   outputs, and that model is loaded from memory and run like any other.
 *   The engine needs no observer hook, its fusions stay as they are (a
 *   value that is a graph output is simply not fused away), and the values
 *   are the ones a user's session computes.
 * - A session is compiled per distinct set of input shapes and kept while
 *   the samples keep that shape (samples of one width reuse it).
 * - write() edits the unpacked model in place: once per quantizer. The
 *   accuracy search (qsearch.h) before it works on a packed copy of the
 *   float model, one fresh unpacked copy per trial. */
#include "packrat/quantize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "engine/onnx_prescan.h"
#include "engine/quantize/qsearch.h"
#include "engine/tensor.h"

struct pr_quantizer {
  Onnx__ModelProto *mp;
  char base_dir[4096];
  pr_quantize_options_t opt;
  pr_qz_plan_t plan;
  int from_opset;
  int folded_bn;         /* BatchNormalizations folded into Convs */
  pr_model_t *calib;     /* the model with the planned tensors as outputs */
  int n_out;             /* outputs of calib */
  int *src;              /* per plan tensor: calib output k >= 0, or -1 - graph input */
  pr_session_t *session; /* for the shapes in `shapes` */
  pr_tensor_info_t shapes[64];
  int64_t samples[2]; /* per pass */
  pr_qz_holdout_t held_out;
  char **float_names; /* the nodes the accuracy search left float */
  int n_float;
  bool written;
};

pr_quantize_options_t pr_quantize_options_default(void) {
  return (pr_quantize_options_t){.activation_type = PR_DTYPE_UINT8,
                                 .method = PR_CALIB_MINMAX,
                                 .percentile = 99.999,
                                 .ops = PR_QUANT_ALL,
                                 .threads = 1,
                                 .tolerance = 0.02};
}

static pr_status_t check_options(const pr_quantize_options_t *o, char *err, size_t err_len) {
  if (o->activation_type != PR_DTYPE_UINT8 && o->activation_type != PR_DTYPE_INT8) {
    pr__errf(err, err_len, "activations are UINT8 or INT8");
    return PR_ERR_INVALID;
  }
  if (o->method < PR_CALIB_MINMAX || o->method > PR_CALIB_ENTROPY) {
    pr__errf(err, err_len, "the calibration method is min-max, percentile or entropy");
    return PR_ERR_INVALID;
  }
  if (o->method == PR_CALIB_PERCENTILE && !(o->percentile >= 50 && o->percentile <= 100)) {
    pr__errf(err, err_len, "the percentile must be in [50, 100]");
    return PR_ERR_INVALID;
  }
  if (!(o->accuracy >= 0 && o->accuracy <= 100) || !(o->tolerance > 0 && o->tolerance <= 1) ||
      (o->metric < PR_QUANT_METRIC_RANGE || o->metric > PR_QUANT_METRIC_CTC)) {
    pr__errf(err, err_len, "the accuracy is in [0, 100], the tolerance in (0, 1]");
    return PR_ERR_INVALID;
  }
  if (o->dynamic && (o->accuracy > 0 || !(o->ops & PR_QUANT_MATMUL))) {
    pr__errf(err, err_len, "dynamic quantization is of MatMuls, without an accuracy search");
    return PR_ERR_INVALID;
  }
  if (o->threads < 1 || !(o->ops & PR_QUANT_ALL) || o->n_exclude < 0) {
    pr__errf(err, err_len, "bad quantizer options (threads >= 1, at least one operator kind)");
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

static pr_status_t read_model(pr_quantizer_t *q, const char *path, char *err, size_t err_len) {
  void *data;
  size_t len;
  if (pr__read_file(path, &data, &len, PR_MAX_MODEL_BYTES) < 0) {
    pr__errf(err, err_len, "cannot read %s: %s", path, pr__file_error(errno));
    return PR_ERR_IO;
  }
  pr_status_t st =
      pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor, PR_PRESCAN_MAX_DEPTH,
                               PR_PRESCAN_MAX_ITEMS, err, err_len);
  if (st) {
    free(data);
    return st;
  }
  q->mp = onnx__model_proto__unpack(NULL, len, data);
  free(data);
  if (!q->mp || !q->mp->graph) {
    pr__errf(err, err_len, "%s: not an ONNX model", path);
    return PR_ERR_INVALID;
  }
  pr__dirname(path, q->base_dir, sizeof q->base_dir);
  q->from_opset = pr__qz_opset(q->mp);
  return PR_OK;
}

/* The model with every planned tensor (but graph inputs) as an output,
 * loaded; q->src says where each tensor comes from. */
static pr_status_t load_calibration_model(pr_quantizer_t *q, char *err, size_t err_len) {
  Onnx__GraphProto *g = q->mp->graph;
  size_t n0 = g->n_output, n = n0;
  pr_qz_plan_t *p = &q->plan;
  Onnx__ValueInfoProto **outs = realloc(g->output, sizeof *outs * (n0 + (size_t)p->n_t + 1));
  q->src = calloc((size_t)p->n_t + 1, sizeof *q->src);
  if (!outs || !q->src) {
    if (outs) g->output = outs;
    return PR_ERR_NOMEM;
  }
  g->output = outs;
  pr_status_t st = PR_OK;
  for (int e = 0; e < p->n_t && !st; e++) {
    size_t k = 0;
    while (k < n && strcmp(outs[k]->name, p->t[e].name)) k++;
    if (p->t[e].graph_input) continue; /* src set below */
    q->src[e] = (int)k;
    if (k == n && !(outs[n++] = pr__qz_value_info_new(p->t[e].name, 0))) st = PR_ERR_NOMEM;
  }
  g->n_output = n - (st ? 1 : 0);
  size_t len = st ? 0 : onnx__model_proto__get_packed_size(q->mp);
  uint8_t *buf = st ? NULL : malloc(len + 1);
  if (!st && !buf) st = PR_ERR_NOMEM;
  if (!st) onnx__model_proto__pack(q->mp, buf);
  for (size_t k = n0; k < g->n_output; k++) onnx__value_info_proto__free_unpacked(outs[k], NULL);
  g->n_output = n0;
  if (!st) st = pr_engine_model_load_memory(buf, len, q->base_dir, &q->calib, err, err_len);
  free(buf);
  if (st) return st;
  q->n_out = pr_engine_model_num_outputs(q->calib);
  for (int e = 0; e < p->n_t; e++) {
    if (!p->t[e].graph_input) continue;
    int i = 0, n_in = pr_engine_model_num_inputs(q->calib);
    pr_tensor_info_t info;
    while (i < n_in && !pr_engine_model_input(q->calib, i, &info) &&
           strcmp(info.name, p->t[e].name))
      i++;
    q->src[e] = -1 - i;
  }
  return PR_OK;
}

static pr_status_t plan(pr_quantizer_t *q, char *err, size_t err_len) {
  pr_qz_index_t ix;
  if (pr__qz_bypass_identity(q->mp->graph) ||
      (q->opt.fold_batchnorm && pr__qz_fold_bn(q->mp->graph, q->base_dir, &q->folded_bn)) ||
      pr__qz_index_build(&ix, q->mp->graph))
    return PR_ERR_NOMEM;
  pr_qz_plan_options_t po = {.kinds = q->opt.dynamic ? 1u << PR_QZ_MATMUL : q->opt.ops,
                             .exclude = q->opt.exclude,
                             .n_exclude = q->opt.n_exclude,
                             .want_softmax_ranks = !q->opt.dynamic && q->from_opset < PR_QZ_OPSET,
                             .dynamic = q->opt.dynamic};
  pr_status_t st = pr__qz_plan_make(&ix, &po, &q->plan, err, err_len);
  pr__qz_index_free(&ix);
  return st;
}

pr_status_t pr_engine_quantizer_create(const char *path, const pr_quantize_options_t *opt,
                                       pr_quantizer_t **out, char *err, size_t err_len) {
  *out = NULL;
  pr_status_t st = check_options(opt, err, err_len);
  if (st) return st;
  pr_quantizer_t *q = calloc(1, sizeof *q);
  if (!q) return PR_ERR_NOMEM;
  q->opt = *opt;
  if (!(st = read_model(q, path, err, err_len)) && !(st = plan(q, err, err_len)))
    st = load_calibration_model(q, err, err_len);
  if (st == PR_ERR_NOMEM) pr__errf(err, err_len, "out of memory reading %s", path);
  if (st) {
    pr_engine_quantizer_destroy(q);
    return st;
  }
  *out = q;
  return PR_OK;
}

void pr_engine_quantizer_destroy(pr_quantizer_t *q) {
  if (!q) return;
  pr_engine_session_destroy(q->session);
  pr_engine_model_destroy(q->calib);
  pr__qz_plan_free(&q->plan);
  pr__qz_holdout_free(&q->held_out);
  for (int i = 0; i < q->n_float; i++) free(q->float_names[i]);
  free(q->float_names);
  if (q->mp) onnx__model_proto__free_unpacked(q->mp, NULL);
  free(q->src);
  free(q);
}

int pr_engine_quantizer_num_inputs(const pr_quantizer_t *q) {
  return pr_engine_model_num_inputs(q->calib);
}

pr_status_t pr_engine_quantizer_input(const pr_quantizer_t *q, int i, pr_tensor_info_t *info) {
  return pr_engine_model_input(q->calib, i, info);
}

int pr_engine_quantizer_passes(const pr_quantizer_t *q) {
  return q->opt.dynamic ? 0 : q->opt.method == PR_CALIB_MINMAX ? 1 : 2;
}

/* ---- calibration ---- */

static void shape_text(const int64_t *dims, int rank, char *buf, size_t len) {
  size_t off = (size_t)snprintf(buf, len, "[");
  for (int k = 0; k < rank && off < len; k++) {
    if (dims[k] < 0)
      off += (size_t)snprintf(buf + off, len - off, "%s?", k ? ", " : "");
    else
      off += (size_t)snprintf(buf + off, len - off, "%s%lld", k ? ", " : "", (long long)dims[k]);
  }
  if (off < len) snprintf(buf + off, len - off, "]");
}

/* Each input against the model's declared type and shape. */
static pr_status_t check_inputs(const pr_quantizer_t *q, const pr_tensor_t *in, int n, char *err,
                                size_t err_len) {
  int n_in = pr_engine_model_num_inputs(q->calib);
  if (n != n_in || n > 64) {
    pr__errf(err, err_len, "the model has %d inputs, %d given", n_in, n);
    return PR_ERR_INVALID;
  }
  for (int i = 0; i < n; i++) {
    pr_tensor_info_t info;
    pr_engine_model_input(q->calib, i, &info);
    bool ok = in[i].dtype == info.dtype && in[i].rank == info.rank;
    for (int k = 0; ok && k < info.rank; k++)
      ok = in[i].dims[k] > 0 && (info.dims[k] < 0 || info.dims[k] == in[i].dims[k]);
    if (!ok) {
      char want[256], got[256];
      shape_text(info.dims, info.rank, want, sizeof want);
      shape_text(in[i].dims, in[i].rank, got, sizeof got);
      pr__errf(err, err_len, "input '%.100s' is %s %s, the model takes %s %s", info.name,
               pr_dtype_name(in[i].dtype), got, pr_dtype_name(info.dtype), want);
      return PR_ERR_INVALID;
    }
  }
  return PR_OK;
}

/* The session for these inputs' shapes (the kept one when they match). */
static pr_status_t session_for(pr_quantizer_t *q, const pr_tensor_t *in, int n, char *err,
                               size_t err_len) {
  bool same = q->session != NULL;
  for (int i = 0; same && i < n; i++)
    same = q->shapes[i].rank == in[i].rank &&
           !memcmp(q->shapes[i].dims, in[i].dims, sizeof(int64_t) * (size_t)in[i].rank);
  if (same) return PR_OK;
  pr_engine_session_destroy(q->session);
  q->session = NULL;
  for (int i = 0; i < n; i++) {
    pr_engine_model_input(q->calib, i, &q->shapes[i]);
    q->shapes[i].dtype = in[i].dtype;
    q->shapes[i].rank = in[i].rank;
    memcpy(q->shapes[i].dims, in[i].dims, sizeof in[i].dims);
  }
  pr_session_options_t so = pr_session_options_default();
  so.threads = q->opt.threads;
  so.batch = n && in[0].rank ? in[0].dims[0] : 1;
  so.input_shapes = q->shapes;
  return pr_engine_session_create(q->calib, &so, &q->session, err, err_len);
}

/* Tensor e's values of this run into its statistics of `pass`. */
static pr_status_t gather(pr_qz_tensor_t *t, int pass, const pr_tensor_t *v, char *err,
                          size_t err_len) {
  if (v->dtype != PR_DTYPE_FLOAT) {
    pr__errf(err, err_len, "tensor '%.200s' is %s: only FLOAT activations are quantized", t->name,
             pr_dtype_name(v->dtype));
    return PR_ERR_INVALID;
  }
  if (pass == 0) {
    pr__qz_range_add(&t->range, v->data, pr_tensor_numel(v));
    t->seen = true, t->rank = v->rank;
    memcpy(t->dims, v->dims, sizeof t->dims);
  } else {
    pr__qz_range_hist_add(&t->range, v->data, pr_tensor_numel(v));
  }
  return PR_OK;
}

pr_status_t pr_engine_quantizer_observe(pr_quantizer_t *q, int pass, const pr_tensor_t *inputs,
                                        int n_inputs, char *err, size_t err_len) {
  if (pass < 0 || pass >= pr_engine_quantizer_passes(q) || q->written ||
      (pass == 1 && !q->samples[0])) {
    pr__errf(err, err_len, "calibration pass %d out of order", pass);
    return PR_ERR_INVALID;
  }
  pr_status_t st = check_inputs(q, inputs, n_inputs, err, err_len);
  if (!st) st = session_for(q, inputs, n_inputs, err, err_len);
  if (st) return st;
  pr_qz_plan_t *p = &q->plan;
  if (pass == 1 && !q->samples[1])
    for (int e = 0; e < p->n_t; e++)
      if (q->opt.method == PR_CALIB_ENTROPY ? pr__qz_range_hist_begin_abs(&p->t[e].range)
                                            : pr__qz_range_hist_begin(&p->t[e].range))
        return PR_ERR_NOMEM;
  pr_tensor_t *outs = calloc((size_t)q->n_out + 1, sizeof *outs);
  if (!outs) return PR_ERR_NOMEM;
  st = pr_engine_session_run(q->session, inputs, n_inputs, outs, q->n_out, err, err_len);
  for (int e = 0; e < p->n_t && !st; e++) {
    int s = q->src[e];
    st = gather(&p->t[e], pass, s >= 0 ? &outs[s] : &inputs[-1 - s], err, err_len);
  }
  free(outs);
  if (!st) q->samples[pass]++;
  return st;
}

pr_status_t pr_engine_quantizer_hold_out(pr_quantizer_t *q, const pr_tensor_t *inputs, int n_inputs,
                                         char *err, size_t err_len) {
  if (!(q->opt.accuracy > 0) || q->written) {
    pr__errf(err, err_len, "held-out samples are for the accuracy search, before writing");
    return PR_ERR_INVALID;
  }
  pr_status_t st = check_inputs(q, inputs, n_inputs, err, err_len);
  if (!st && (st = pr__qz_holdout_add(&q->held_out, inputs, n_inputs)))
    pr__errf(err, err_len, "out of memory holding a sample out");
  return st;
}

/* ---- writing ---- */

/* Packs mp into path through a temporary file renamed over it. */
static pr_status_t save(const Onnx__ModelProto *mp, const char *path, uint8_t **buf, size_t *len,
                        char *err, size_t err_len) {
  *len = onnx__model_proto__get_packed_size(mp);
  if (!(*buf = malloc(*len + 1))) return PR_ERR_NOMEM;
  onnx__model_proto__pack(mp, *buf);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(*buf, 1, *len, f) == *len;
  ok = (f && !fclose(f)) && ok;
  if (!ok || rename(tmp, path)) {
    pr__errf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return PR_ERR_IO;
  }
  return PR_OK;
}

/* The accuracy search over the held-out samples: sets the plan's kept_float
 * flags and q->float_names. */
static pr_status_t search(pr_quantizer_t *q, const pr_qz_write_options_t *wo,
                          pr_qz_search_result_t *res, char *err, size_t err_len) {
  size_t len = onnx__model_proto__get_packed_size(q->mp);
  uint8_t *bytes = malloc(len + 1);
  if (!bytes) return PR_ERR_NOMEM;
  onnx__model_proto__pack(q->mp, bytes);
  pr_qz_search_options_t so = {.metric = q->opt.metric,
                               .tolerance = q->opt.tolerance,
                               .target = q->opt.accuracy,
                               .threads = q->opt.threads,
                               .base_dir = q->base_dir,
                               .write = *wo};
  pr_status_t st = pr__qz_search(bytes, len, &q->plan, &q->held_out, &so, res, err, err_len);
  free(bytes);
  if (st) return st;
  q->float_names = calloc((size_t)q->plan.n_ops + 1, sizeof *q->float_names);
  if (!q->float_names) return PR_ERR_NOMEM;
  for (int i = 0; i < q->plan.n_ops; i++) {
    if (!q->plan.ops[i].kept_float) continue;
    const char *name = pr__qz_node_name(q->mp->graph->node[q->plan.ops[i].node]);
    if (!(q->float_names[q->n_float++] = strdup(name))) return PR_ERR_NOMEM;
  }
  pr__log(PR_LOG_INFO,
          "quantize: %d nodes left float after %d trials: %.1f%% agree (all int8 %.1f%%)",
          q->n_float, res->trials, res->agreement, res->agreement_all_int8);
  return PR_OK;
}

static void fill_report(const pr_quantizer_t *q, const pr_qz_search_result_t *res,
                        pr_quantize_report_t *report) {
  memset(report, 0, sizeof *report);
  pr__qz_plan_counts(&q->plan, report->ops);
  for (int e = 0; e < q->plan.n_t; e++) report->tensors += q->plan.t[e].refs > 0;
  report->from_opset = q->from_opset;
  report->opset = pr__qz_opset(q->mp);
  report->samples = q->samples[0];
  report->folded_bn = q->folded_bn;
  report->held_out = q->held_out.n;
  report->trials = res->trials;
  report->n_float = q->n_float;
  report->float_nodes = (const char *const *)q->float_names;
  report->agreement = q->opt.accuracy > 0 ? res->agreement : -1;
  report->agreement_all_int8 = q->opt.accuracy > 0 ? res->agreement_all_int8 : -1;
}

/* The model checked: it loads (the bytes just saved). */
static pr_status_t check_loads(pr_quantizer_t *q, const char *path, const uint8_t *buf, size_t len,
                               char *err, size_t err_len) {
  pr_model_t *check = NULL;
  pr_status_t st = pr_engine_model_load_memory(buf, len, q->base_dir, &check, err, err_len);
  if (st) pr__log(PR_LOG_ERROR, "the quantized model %s does not load: %s", path, err);
  pr_engine_model_destroy(check);
  return st;
}

static pr_status_t write_dynamic(pr_quantizer_t *q, const char *path, pr_quantize_report_t *report,
                                 char *err, size_t err_len) {
  q->written = true;
  int n_dynamic = 0;
  uint8_t *buf = NULL;
  size_t len = 0;
  pr_status_t st = pr__qz_write_dynamic(q->mp, &q->plan, q->base_dir,
                                        q->opt.reduce_range ? 64 : 127, &n_dynamic, err, err_len);
  if (!st) st = save(q->mp, path, &buf, &len, err, err_len);
  if (!st) st = check_loads(q, path, buf, len, err, err_len);
  free(buf);
  if (st) return st;
  if (report) {
    pr_qz_search_result_t none = {0};
    fill_report(q, &none, report);
    report->tensors = n_dynamic;
  }
  return PR_OK;
}

pr_status_t pr_engine_quantizer_write(pr_quantizer_t *q, const char *path,
                                      pr_quantize_report_t *report, char *err, size_t err_len) {
  if (q->opt.dynamic && !q->written) return write_dynamic(q, path, report, err, err_len);
  const char *refusal =
      q->written ? "the quantized model was written already"
      : !q->samples[0] || (pr_engine_quantizer_passes(q) > 1 && q->samples[1] != q->samples[0])
          ? "every calibration pass needs every sample"
      : q->opt.accuracy > 0 && !q->held_out.n ? "the accuracy search needs held-out samples"
                                              : NULL;
  if (refusal) {
    pr__errf(err, err_len, "%s", refusal);
    return PR_ERR_INVALID;
  }
  q->written = true;
  for (int e = 0; e < q->plan.n_t; e++) pr__qz_range_entropy(&q->plan.t[e].range); /* if one */
  if (!pr__qz_plan_settle(&q->plan)) {
    pr__errf(err, err_len,
             "nothing left to quantize after calibration (no Add of two inputs of "
             "one shape, no MatMul input of rank 2 or more)");
    return PR_ERR_INVALID;
  }
  pr_qz_write_options_t wo = {
      .act_type = q->opt.activation_type,
      .percentile = q->opt.method == PR_CALIB_PERCENTILE ? q->opt.percentile : 100,
      .base_dir = q->base_dir,
      .w_max = q->opt.reduce_range ? 64 : 127};
  pr_qz_search_result_t res = {0};
  pr_status_t st = q->opt.accuracy > 0 ? search(q, &wo, &res, err, err_len) : PR_OK;
  if (st == PR_ERR_NOMEM) pr__errf(err, err_len, "out of memory in the accuracy search");
  if (!st) st = pr__qz_opset_upgrade(q->mp, &q->plan, err, err_len);
  if (!st) st = pr__qz_write_qdq(q->mp, &q->plan, &wo, err, err_len);
  uint8_t *buf = NULL;
  size_t len = 0;
  if (!st) st = save(q->mp, path, &buf, &len, err, err_len);
  if (!st) st = check_loads(q, path, buf, len, err, err_len);
  free(buf);
  if (st) return st;
  if (report) fill_report(q, &res, report);
  return PR_OK;
}
