/* Sessions: create one from a model (compile.c, fuse.c, memplan.c do the
 * work) and run it.
 *
 * pr_engine_session_create turns a model into a runnable session for concrete
 * shapes and a thread count: values and nodes copied from the model, inputs
 * resolved to concrete shapes, then the compiler passes in order (shapes and
 * constant folding, fusions, dead-node removal, prepare with layouts) and the
 * memory plan: intermediates in one arena, graph outputs in buffers of their
 * own. A run binds the inputs and executes the node list; nothing is
 * allocated.
 *
 * The dynamic path: when an op needs the data of a value known only at run
 * time to know a shape (Range of run-time bounds, NonZero, a Reshape of a
 * computed shape, If/Loop/Scan: pr__need_values), the session is made
 * dynamic instead: it keeps its inputs' shapes, and each run compiles the
 * model with every input fixed to that run's data, so every node folds
 * (compile.c runs all-constant nodes) and every shape is known; the run's
 * session owns the outputs until the next run. Slower than the static path
 * (no fusion, a compile per run), but exact; models that need no run-time
 * value never take it.
 *
 * Threads: a session belongs to one thread at a time (the caller's); its
 * kernels use that thread's OpenMP team of session->threads threads.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/omp_team.h"
#include "base/util.h"
#include "engine/compile.h"
#include "engine/fuse.h"
#include "engine/graph.h"
#include "engine/memplan.h"
#include "engine/ops/sgemm.h"

struct pr_session {
  pr_compile_t c;
  int n_inputs, n_outputs;
  int *in_vals, *out_vals;
  void **out_bufs;
  void *arena;
  size_t arena_size;
  dnnl_stream_t stream;
  double flops;
  double *kernel_seconds; /* per node, with profile_kernels */
  int64_t runs;
  bool dynamic;        /* the dynamic path (see the top of this file) */
  pr_session_t *inner; /* dynamic: the last run's session, every input fixed */
};

/* ---- public API ---- */

pr_session_options_t pr_session_options_default(void) {
  pr_session_options_t o = {.threads = 1, .batch = 1};
  return o;
}

static pr_status_t resolve_input(pr_compile_t *c, const pr_session_options_t *opt, int i,
                                 pr_value_t *v, const pr_mvalue_t *mv) {
  if (opt->input_shapes) {
    const pr_tensor_info_t *in = &opt->input_shapes[i];
    if (mv->rank < 0) { /* a subgraph's input: its node gives the shape */
      if (in->rank < 0 || in->rank > PR_MAX_RANK)
        return pr__fail(c, NULL, PR_ERR_INVALID, "input '%s': rank %d", mv->name, in->rank);
      v->rank = in->rank;
    } else if (in->rank != mv->rank)
      return pr__fail(c, NULL, PR_ERR_INVALID, "input '%s': rank %d given, model has %d", mv->name,
                      in->rank, mv->rank);
    for (int k = 0; k < v->rank; k++) {
      if (in->dims[k] < 0 || (mv->rank >= 0 && mv->dims[k] >= 0 && in->dims[k] != mv->dims[k]))
        return pr__fail(c, NULL, PR_ERR_INVALID,
                        "input '%s': dimension %d is %lld, model needs %lld", mv->name, k,
                        (long long)in->dims[k], (long long)(mv->rank >= 0 ? mv->dims[k] : -1));
      v->dims[k] = in->dims[k];
    }
    return PR_OK;
  }
  for (int k = 0; k < mv->rank; k++) {
    if (mv->dims[k] >= 0) {
      v->dims[k] = mv->dims[k];
      continue;
    }
    int64_t val = -1;
    for (int j = 0; j < opt->n_dims; j++)
      if (mv->dim_names[k] && opt->dim_names[j] && !strcmp(mv->dim_names[k], opt->dim_names[j]))
        val = opt->dim_values[j];
    if (val < 0 && k == 0) val = opt->batch;
    if (val < 1)
      return pr__fail(c, NULL, PR_ERR_INVALID,
                      "input '%s': no value for symbolic dimension %d (%s): give it a size "
                      "(config.json \"dims\", or --dim NAME=N)",
                      mv->name, k, mv->dim_names[k] ? mv->dim_names[k] : "unnamed");
    v->dims[k] = val;
  }
  return PR_OK;
}

void pr_engine_session_destroy(pr_session_t *s) {
  if (!s) return;
  pr_engine_session_destroy(s->inner);
  pr_compile_t *c = &s->c;
  for (int i = 0; i < c->n_nodes; i++)
    if (c->nodes[i].state && c->nodes[i].op->destroy) c->nodes[i].op->destroy(c->nodes[i].state);
  for (int i = 0; i < c->n_values; i++)
    if (c->v[i].owns_data) pr__free(c->v[i].data);
  if (s->out_bufs)
    for (int i = 0; i < s->n_outputs; i++) pr__free(s->out_bufs[i]);
  free(s->out_bufs);
  free(s->in_vals);
  free(s->out_vals);
  free(s->kernel_seconds);
  free(c->v);
  free(c->nodes);
  for (int i = 0; i < c->n_io; i++) free(c->io[i]);
  free(c->io);
  pr__free(s->arena);
  if (s->stream) dnnl_stream_destroy(s->stream);
  if (c->engine) dnnl_engine_destroy(c->engine);
  free(s);
}

/* A depthwise convolution: a Conv whose groups each take one input channel
 * (constant weights [M, 1, k...] with group > 1). */
static bool has_depthwise_conv(const pr_model_t *m) {
  for (int i = 0; i < m->n_nodes; i++) {
    const pr_mnode_t *n = &m->nodes[i];
    if (strcmp(n->op_type, "Conv") || n->n_in < 2 || n->in[1] < 0) continue;
    const pr_tensor_t *w = m->values[n->in[1]].init;
    if (w && w->rank >= 3 && w->dims[1] == 1 && pr__attr_int(n, "group", 1) > 1) return true;
  }
  return false;
}

/* Convolution activation layout. Measured with oneDNN 2.6 (bench: `packrat
 * run` of each layout, interleaved, 2026-11-30): on AVX-512 with a batch of
 * 2 or more, the channel-blocked kernels run 2-5% faster than the
 * channels-last ones oneDNN picks by itself (ResNet-50, Inception-v3); at
 * batch 1 they are 3-19% faster on models with depthwise convolutions
 * (PaddleOCR det and rec, EfficientNet-B0, MobileNetV3) and 1-4% slower on
 * the others (Inception-v3, DenseNet-121), which keep oneDNN's choice. On
 * AVX2 the 8-channel blocks were not faster at batch 1 (PaddleOCR det 10%
 * slower): the kernel's choice stands there. */
static int conv_block_for(const pr_model_t *m, const pr_session_options_t *opt) {
  int64_t batch = opt->batch;
  if (opt->input_shapes && m->n_inputs > 0 && opt->input_shapes[0].rank >= 1)
    batch = opt->input_shapes[0].dims[0];
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if ((isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core) return 0;
  return batch >= 2 || has_depthwise_conv(m) ? 16 : 0;
}

static pr_status_t check_options(const pr_session_options_t *opt, char *err, size_t err_len) {
  if (opt->threads < 1 || opt->threads > 1024) {
    pr__errf(err, err_len, "threads must be 1..1024, got %d", opt->threads);
    return PR_ERR_INVALID;
  }
  /* input_shapes override the batch, and their dims may be 0 (zero-size
   * tensors: `packrat run` on inputs with an empty first axis) */
  if (!opt->input_shapes && (opt->batch < 1 || opt->batch > (1 << 20))) {
    pr__errf(err, err_len, "batch must be 1..%d, got %lld", 1 << 20, (long long)opt->batch);
    return PR_ERR_INVALID;
  }
  if (!pr_precision_name(opt->precision)) {
    pr__errf(err, err_len, "precision must be fp32 or bf16, got %d", opt->precision);
    return PR_ERR_INVALID;
  }
  if (opt->precision == PR_PRECISION_BF16 && !pr_engine_bf16_native()) {
    pr__errf(err, err_len,
             "bf16 needs a CPU with native bf16 (AVX512_BF16 or AMX); this one runs %s: use fp32",
             pr_engine_isa());
    return PR_ERR_UNSUPPORTED;
  }
  return PR_OK;
}

const char *pr_precision_name(int precision) {
  return precision == PR_PRECISION_FP32 ? "fp32" : precision == PR_PRECISION_BF16 ? "bf16" : NULL;
}

int pr_precision_parse(const char *name) {
  return !name                   ? -1
         : !strcmp(name, "fp32") ? PR_PRECISION_FP32
         : !strcmp(name, "bf16") ? PR_PRECISION_BF16
                                 : -1;
}

int pr_engine_bf16_native(void) {
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(),
           bf16 = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
  return (isa & bf16) == bf16;
}

/* One compile value per model value; initializers are constants (borrowed). */
static pr_status_t copy_values(pr_compile_t *c, const pr_model_t *m) {
  for (int i = 0; i < m->n_values; i++) {
    int idx = pr__compile_add_value(c);
    if (idx < 0) return PR_ERR_NOMEM;
    assert(idx == i);
    pr_value_t *v = &c->v[idx];
    const pr_mvalue_t *mv = &m->values[i];
    v->name = mv->name;
    v->rank = -1;
    if (mv->init) {
      pr__value_set_shape(v, mv->init->dtype, mv->init->rank, mv->init->dims);
      v->is_const = true;
      v->kind = PR_VAL_CONST;
      v->data = mv->init->data;
      v->nbytes = (size_t)pr__value_numel(v) * pr_dtype_size(v->dtype);
    }
  }
  return PR_OK;
}

/* Graph input i: its concrete shape, and its data when input_values fixes it. */
static pr_status_t bind_input(pr_session_t *s, const pr_session_options_t *opt, int i) {
  pr_compile_t *c = &s->c;
  int idx = c->model->inputs[i];
  pr_value_t *v = &c->v[idx];
  const pr_mvalue_t *mv = &c->model->values[idx];
  pr_status_t st;
  v->dtype = mv->dtype;
  v->rank = mv->rank;
  v->kind = PR_VAL_INPUT;
  if (!mv->dtype) { /* a subgraph's input of no declared type takes its node's */
    if (!opt->input_shapes || !pr_dtype_size(opt->input_shapes[i].dtype))
      return pr__fail(c, NULL, PR_ERR_INVALID, "input '%s' has no element type", mv->name);
    v->dtype = opt->input_shapes[i].dtype;
  }
  if ((st = resolve_input(c, opt, i, v, mv))) return st;
  size_t numel = 1;
  for (int k = 0; k < v->rank; k++)
    if (pr__mul_size(numel, (size_t)v->dims[k], &numel))
      return pr__fail(c, NULL, PR_ERR_INVALID, "input '%s' too large", mv->name);
  v->nbytes = numel * pr_dtype_size(v->dtype);
  if (v->nbytes > c->max_bytes)
    return pr__fail(c, NULL, PR_ERR_NOMEM, "input '%s' needs %zu bytes, over the limit", mv->name,
                    v->nbytes);
  s->in_vals[i] = idx;
  if (!opt->input_values || !opt->input_values[i]) return PR_OK;
  if (!opt->input_shapes)
    return pr__fail(c, NULL, PR_ERR_INVALID, "input_values needs input_shapes");
  v->data = pr__aligned_alloc(v->nbytes);
  if (!v->data) return PR_ERR_NOMEM;
  memcpy(v->data, opt->input_values[i], v->nbytes);
  v->owns_data = true;
  v->is_const = true;
  v->kind = PR_VAL_CONST;
  c->fixed_inputs = true;
  return PR_OK;
}

static pr_status_t copy_nodes(pr_compile_t *c, const pr_model_t *m) {
  c->nodes = calloc((size_t)m->n_nodes + 1, sizeof *c->nodes);
  if (!c->nodes) return PR_ERR_NOMEM;
  c->cap_nodes = m->n_nodes + 1;
  for (int i = 0; i < m->n_nodes; i++) {
    const pr_mnode_t *mn = &m->nodes[i];
    pr_node_t *n = &c->nodes[c->n_nodes++];
    n->op = mn->op;
    n->m = mn;
    pr_status_t st = pr__node_io(c, n, mn->n_in, mn->in, mn->n_out, mn->out);
    if (st) return st;
  }
  return PR_OK;
}

/* The session's values and nodes from the model, for the shapes of opt. */
static pr_status_t load_graph(pr_session_t *s, const pr_session_options_t *opt) {
  pr_compile_t *c = &s->c;
  const pr_model_t *m = c->model;
  pr_status_t st;
  if ((st = copy_values(c, m))) return st;
  s->n_inputs = m->n_inputs;
  s->n_outputs = m->n_outputs;
  s->in_vals = calloc((size_t)m->n_inputs + 1, sizeof(int));
  s->out_vals = calloc((size_t)m->n_outputs + 1, sizeof(int));
  s->out_bufs = calloc((size_t)m->n_outputs + 1, sizeof(void *));
  if (!s->in_vals || !s->out_vals || !s->out_bufs) return PR_ERR_NOMEM;
  for (int i = 0; i < m->n_inputs; i++)
    if ((st = bind_input(s, opt, i))) return st;
  if ((st = copy_nodes(c, m))) return st;
  for (int i = 0; i < m->n_outputs; i++) {
    int idx = m->outputs[i];
    s->out_vals[i] = idx;
    c->v[idx].is_graph_output = true;
    if (c->v[idx].kind == PR_VAL_TEMP) c->v[idx].kind = PR_VAL_OUTPUT;
  }
  return PR_OK;
}

/* The compiler passes (compile.c, fuse.c), then the memory plan. */
static pr_status_t compile(pr_session_t *s, const pr_session_options_t *opt) {
  pr_compile_t *c = &s->c;
  pr_status_t st;
  if ((st = pr__compile_infer(c))) return st;
  for (int i = 0; i < s->n_outputs; i++)
    if (c->v[s->out_vals[i]].rank < 0)
      return pr__fail(c, NULL, PR_ERR_INVALID, "graph output %d is never computed", i);
  pr__compile_remove_dead(c);
  if (!opt->disable_fusion) {
    pr__compile_count_uses(c);
    if ((st = pr__fuse(c))) return st;
    pr__compile_remove_dead(c);
  }
  if ((st = pr__compile_prepare(c, s->out_vals, s->n_outputs))) return st;
  for (int i = 0; i < c->n_nodes; i++) s->flops += c->nodes[i].flops;
  c->concat_views = !opt->disable_fusion;
  return pr__memplan(c, &s->arena_size);
}

/* The arena and the output buffers, and every value's pointer into them. */
static pr_status_t allocate_buffers(pr_session_t *s) {
  pr_compile_t *c = &s->c;
  s->arena = pr__aligned_calloc(s->arena_size);
  if (!s->arena) return PR_ERR_NOMEM;
  pr__memplan_bind(c, s->arena);
  for (int i = 0; i < s->n_outputs; i++) {
    pr_value_t *v = &c->v[s->out_vals[i]];
    s->out_bufs[i] = pr__aligned_calloc(v->nbytes);
    if (!s->out_bufs[i]) return PR_ERR_NOMEM;
    if (v->kind == PR_VAL_OUTPUT && !v->is_const) v->ptr = s->out_bufs[i];
  }
  pr__memplan_bind_aliases(c);
  return PR_OK;
}

#ifdef PR_NO_DNNL_CACHE
static void disable_dnnl_cache(void) {
  dnnl_set_primitive_cache_capacity(0);
}
#endif

/* A session with its oneDNN engine and the model's graph loaded for the
 * shapes of opt; *st reports a failure (the session is then destroyed). */
static pr_session_t *session_begin(pr_model_t *m, const pr_session_options_t *opt, pr_status_t *st,
                                   char *err, size_t err_len) {
  pr_session_t *s = calloc(1, sizeof *s);
  if (!s) {
    *st = PR_ERR_NOMEM;
    return NULL;
  }
  pr_compile_t *c = &s->c;
  c->model = m;
  c->threads = opt->threads;
  c->opset = m->opset;
  c->max_bytes = opt->max_bytes ? opt->max_bytes : (size_t)16 << 30;
  c->err = err;
  c->err_len = err_len;
  c->conv_block = conv_block_for(m, opt);
  c->bf16 = opt->precision == PR_PRECISION_BF16;
  pr__omp_team(opt->threads);
  *st = PR_OK;
#ifdef PR_NO_DNNL_CACHE
  /* the ThreadSanitizer build: oneDNN's primitive cache hands a thread the
   * primitive descriptor another thread's primitive holds, published through
   * a std::future inside libdnnl, which TSan does not see (a race reported on
   * every read of it); without the cache each session's descriptors are its
   * own, and the server's threads are what that build checks */
  static pthread_once_t no_cache = PTHREAD_ONCE_INIT;
  pthread_once(&no_cache, disable_dnnl_cache);
#endif
  if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&s->stream, c->engine, dnnl_stream_default_flags) != dnnl_success)
    *st = pr__fail(c, NULL, PR_ERR_INTERNAL, "oneDNN engine creation failed");
  if (!*st) *st = load_graph(s, opt);
  if (*st) {
    pr_engine_session_destroy(s);
    return NULL;
  }
  return s;
}

/* Every graph input fixed at compile time (the dynamic path's runs). */
static bool all_inputs_fixed(const pr_session_t *s) {
  for (int i = 0; i < s->n_inputs; i++)
    if (!s->c.v[s->in_vals[i]].is_const) return false;
  return true;
}

pr_status_t pr_engine_session_create(pr_model_t *m, const pr_session_options_t *opt,
                                     pr_session_t **out, char *err, size_t err_len) {
  if (!m || !opt || !out) return PR_ERR_INVALID;
  *out = NULL;
  pr_status_t st = check_options(opt, err, err_len);
  if (st) return st;
  pr_session_t *s = session_begin(m, opt, &st, err, err_len);
  if (!s) return st;
  pr_compile_t *c = &s->c;
  st = compile(s, opt);
  if (st && c->needs_values && !all_inputs_fixed(s)) {
    /* a run-time value decides a shape: the dynamic path */
    pr_engine_session_destroy(s);
    if (!(s = session_begin(m, opt, &st, err, err_len))) return st;
    s->dynamic = true;
    *out = s;
    return PR_OK;
  }
  if (!st) st = allocate_buffers(s);
  if (!st && opt->profile_kernels &&
      !(s->kernel_seconds = calloc((size_t)c->n_nodes + 1, sizeof *s->kernel_seconds)))
    st = PR_ERR_NOMEM;
  if (st) {
    pr_engine_session_destroy(s);
    return st;
  }
  *out = s;
  return PR_OK;
}

bool pr_engine_session_is_dynamic(const pr_session_t *s) {
  return s && s->dynamic;
}

double pr_engine_session_flops(const pr_session_t *s) {
  return s ? s->flops : 0;
}
int pr_engine_session_num_kernels(const pr_session_t *s) {
  return s ? s->c.n_nodes : 0;
}
pr_status_t pr_engine_session_kernel(const pr_session_t *s, int i, pr_kernel_info_t *info) {
  if (!s || i < 0 || i >= s->c.n_nodes || !info) return PR_ERR_INVALID;
  const pr_node_t *n = &s->c.nodes[i];
  info->op = n->op->name;
  info->node = pr__node_name(n);
  info->impl = n->impl;
  info->flops = n->flops;
  info->seconds = s->kernel_seconds ? s->kernel_seconds[i] : 0;
  info->runs = s->kernel_seconds ? s->runs : 0;
  return PR_OK;
}
void pr_engine_session_kernel_reset(pr_session_t *s) {
  if (!s || !s->kernel_seconds) return;
  memset(s->kernel_seconds, 0, sizeof *s->kernel_seconds * (size_t)s->c.n_nodes);
  s->runs = 0;
}
size_t pr_engine_session_arena_bytes(const pr_session_t *s) {
  return s ? s->arena_size : 0;
}

static void session_info(const pr_session_t *s, int idx, pr_tensor_info_t *info) {
  const pr_value_t *v = &s->c.v[idx];
  memset(info, 0, sizeof *info);
  info->name = v->name;
  info->dtype = v->dtype;
  info->rank = v->rank;
  for (int k = 0; k < v->rank; k++) info->dims[k] = v->dims[k];
}

pr_status_t pr_engine_session_input(const pr_session_t *s, int i, pr_tensor_info_t *info) {
  if (!s || i < 0 || i >= s->n_inputs || !info) return PR_ERR_INVALID;
  session_info(s, s->in_vals[i], info);
  return PR_OK;
}

pr_status_t pr_engine_session_output(const pr_session_t *s, int i, pr_tensor_info_t *info) {
  if (!s || i < 0 || i >= s->n_outputs || !info) return PR_ERR_INVALID;
  if (s->inner) return pr_engine_session_output(s->inner, i, info);
  if (s->dynamic) { /* no run yet: the model's declared type and shape */
    const pr_mvalue_t *mv = &s->c.model->values[s->out_vals[i]];
    memset(info, 0, sizeof *info);
    info->name = mv->name;
    info->dtype = mv->dtype;
    info->rank = mv->rank;
    for (int k = 0; k < mv->rank; k++) info->dims[k] = mv->dims[k];
    return PR_OK;
  }
  session_info(s, s->out_vals[i], info);
  return PR_OK;
}

/* Binds inputs[i] to the session's input value, after checking its type and
 * shape (and, for an input fixed at compile time, its data). */
static pr_status_t bind_run_input(pr_session_t *s, int i, const pr_tensor_t *t, char *err,
                                  size_t err_len) {
  pr_value_t *v = &s->c.v[s->in_vals[i]];
  bool ok = t->dtype == v->dtype && t->rank == v->rank && (t->data || !v->nbytes);
  for (int k = 0; ok && k < v->rank; k++) ok = t->dims[k] == v->dims[k];
  if (!ok) {
    char want[160] = "", got[160] = "";
    size_t a = 0, b = 0;
    for (int k = 0; k < v->rank; k++)
      a += (size_t)snprintf(want + a, sizeof want - a, "%s%lld", k ? "," : "",
                            (long long)v->dims[k]);
    for (int k = 0; k < t->rank && k < PR_MAX_RANK; k++)
      b += (size_t)snprintf(got + b, sizeof got - b, "%s%lld", k ? "," : "", (long long)t->dims[k]);
    pr__errf(err, err_len, "input '%s': expected %s [%s], got %s [%s]", v->name,
             pr_dtype_name(v->dtype), want, pr_dtype_name(t->dtype), got);
    return PR_ERR_INVALID;
  }
  if (v->is_const) {
    if (memcmp(v->data, t->data, v->nbytes)) {
      pr__errf(err, err_len, "input '%s' differs from the value fixed when the session was made",
               v->name);
      return PR_ERR_INVALID;
    }
    return PR_OK;
  }
  v->ptr = t->data;
  return PR_OK;
}

/* Runs every kernel; stops after one that refuses its data (its status,
 * the message in err). */
static pr_status_t run_kernels(pr_session_t *s, char *err, size_t err_len) {
  pr_compile_t *c = &s->c;
  pr_exec_t x = {.v = c->v, .threads = c->threads, .engine = c->engine, .stream = s->stream};
  if (s->kernel_seconds) {
    for (int i = 0; i < c->n_nodes && !x.status; i++) {
      double t0 = pr__now();
      c->nodes[i].op->run(&x, &c->nodes[i]);
      dnnl_stream_wait(s->stream);
      s->kernel_seconds[i] += pr__now() - t0;
    }
    s->runs++;
  } else {
    for (int i = 0; i < c->n_nodes && !x.status; i++) c->nodes[i].op->run(&x, &c->nodes[i]);
  }
  dnnl_stream_wait(s->stream);
  if (x.status) pr__errf(err, err_len, "%s", x.err);
  return x.status;
}

/* The dynamic path's run: a session compiled for these inputs' data (all
 * of it folds), run, kept until the next run as the owner of the outputs. */
static pr_status_t run_dynamic(pr_session_t *s, const pr_tensor_t *inputs, int n_inputs,
                               pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len) {
  static const char empty[PR_MAX_RANK]; /* the data of an empty input */
  pr_tensor_info_t *info = calloc((size_t)n_inputs + 1, sizeof *info);
  const void **vals = calloc((size_t)n_inputs + 1, sizeof *vals);
  pr_status_t st = info && vals ? PR_OK : PR_ERR_NOMEM;
  for (int i = 0; !st && i < n_inputs; i++) {
    info[i].dtype = inputs[i].dtype;
    info[i].rank = inputs[i].rank;
    memcpy(info[i].dims, inputs[i].dims, sizeof info[i].dims);
    vals[i] = inputs[i].data ? inputs[i].data : empty;
  }
  pr_engine_session_destroy(s->inner);
  s->inner = NULL;
  pr_session_options_t opt = pr_session_options_default();
  opt.threads = s->c.threads;
  opt.max_bytes = s->c.max_bytes;
  opt.input_shapes = info;
  opt.input_values = vals;
  if (!st) st = pr_engine_session_create(s->c.model, &opt, &s->inner, err, err_len);
  if (!st) st = pr_engine_session_run(s->inner, inputs, n_inputs, outputs, n_outputs, err, err_len);
  free(info);
  free(vals);
  return st;
}

pr_status_t pr_engine_session_run(pr_session_t *s, const pr_tensor_t *inputs, int n_inputs,
                                  pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len) {
  if (!s) return PR_ERR_INVALID;
  pr_compile_t *c = &s->c;
  if (n_inputs != s->n_inputs || (n_outputs && n_outputs != s->n_outputs) ||
      (n_inputs && !inputs)) {
    pr__errf(err, err_len, "expected %d inputs and %d outputs", s->n_inputs, s->n_outputs);
    return PR_ERR_INVALID;
  }
  for (int i = 0; i < n_inputs; i++) {
    pr_status_t st = bind_run_input(s, i, &inputs[i], err, err_len);
    if (st) return st;
  }
  if (s->dynamic) return run_dynamic(s, inputs, n_inputs, outputs, n_outputs, err, err_len);
  pr__memplan_bind_aliases(c);
  pr__omp_team(c->threads);
  pr_status_t st = run_kernels(s, err, err_len);
  if (st) return st;
  for (int i = 0; i < s->n_outputs; i++) {
    pr_value_t *v = &c->v[s->out_vals[i]];
    if (v->ptr != s->out_bufs[i] && v->nbytes) memcpy(s->out_bufs[i], v->ptr, v->nbytes);
    if (n_outputs) {
      pr_tensor_t *o = &outputs[i];
      memset(o, 0, sizeof *o);
      o->dtype = v->dtype;
      o->rank = v->rank;
      for (int k = 0; k < v->rank; k++) o->dims[k] = v->dims[k];
      o->data = s->out_bufs[i];
    }
  }
  return PR_OK;
}

static char backend_version[160];

static void backend_version_text(void) {
  const dnnl_version_t *v = dnnl_version();
  snprintf(backend_version, sizeof backend_version,
           "oneDNN %d.%d.%d (commit %.12s, CPU runtime %s)", v->major, v->minor, v->patch,
           v->hash ? v->hash : "unknown", v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
}

const char *pr_engine_isa(void) {
  static const struct {
    dnnl_cpu_isa_t isa;
    const char *name;
  } isas[] = {{dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
              {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
              {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
              {dnnl_cpu_isa_avx512_core, "avx512_core"},
              {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
              {dnnl_cpu_isa_avx2, "avx2"},
              {dnnl_cpu_isa_avx, "avx"},
              {dnnl_cpu_isa_sse41, "sse41"}};
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) /* the widest first */
    if ((isa & isas[i].isa) == isas[i].isa) return isas[i].name;
  return "other";
}

const char *pr_engine_matmul_kernel(void) {
  return pr__sgemm_isa_fits() ? "packrat_avx2" : "onednn";
}

const char *pr_engine_backend_version(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, backend_version_text);
  return backend_version;
}
