/* Session compiler: the passes that turn a model's graph into kernels, and
 * the helpers every op's infer and prepare use.
 *
 *   1. shapes (pr__compile_infer): every node's outputs inferred in order;
 *      nodes whose inputs are all constant run now (constant folding, shape
 *      subgraphs included);
 *   2. fusions (fuse.c), then dead-node removal (pr__compile_remove_dead);
 *   3. prepare (pr__compile_prepare): kernels created in order; oneDNN kernels
 *      choose their layouts and reorders are inserted where a consumer needs
 *      another layout (pr__require_plain, pr__require_md).
 * Memory planning follows in memplan.c.
 *
 * Notes on the design:
 * - All compile state lives in pr_compile_t and is passed explicitly; the
 *   prepare pass builds its new node list in c->build.
 * - While the prepare pass runs (c->values_fixed), the value array never
 *   moves: ops hold value pointers across pr__require_md/plain, so the array
 *   is reserved up front for every reorder that pass can add.
 */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "engine/compile.h"
#include "engine/graph.h"

/* ---- helpers shared with ops ---- */

const char *pr__mnode_name(const pr_mnode_t *m) {
  return m ? m->name : "(internal)";
}
const char *pr__node_name(const pr_node_t *n) {
  return pr__mnode_name(n->m);
}

pr_status_t pr__fail(pr_compile_t *c, const pr_node_t *n, pr_status_t st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n)
    pr__errf(c->err, c->err_len, "node '%s' (%s): %s", pr__node_name(n), n->op->name, msg);
  else
    pr__errf(c->err, c->err_len, "%s", msg);
  return st;
}

void pr__run_fail(pr_exec_t *x, const pr_node_t *n, pr_status_t st, const char *fmt, ...) {
  assert(st < 0);
  if (x->status) return;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  x->status = st;
  pr__errf(x->err, sizeof x->err, "node '%s' (%s): %s", pr__node_name(n), n->op->name, msg);
}

pr_status_t pr__need_values(pr_compile_t *c, const pr_node_t *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->needs_values = true;
  return pr__fail(c, n, PR_ERR_UNSUPPORTED, "%s", msg);
}

int64_t pr__value_numel(const pr_value_t *v) {
  int64_t n = 1;
  for (int k = 0; k < v->rank; k++) n *= v->dims[k];
  return n;
}

void pr__value_set_shape(pr_value_t *v, pr_dtype_t dtype, int rank, const int64_t *dims) {
  assert(rank >= 0 && rank <= PR_MAX_RANK);
  v->dtype = dtype;
  v->rank = rank;
  for (int k = 0; k < rank; k++) v->dims[k] = dims[k];
}

int pr__const_ints(const pr_value_t *v, int64_t *vals, int max) {
  if (!v || !v->is_const || v->rank > 1) return -1;
  int64_t n = pr__value_numel(v);
  if (n > max) return -1;
  for (int64_t i = 0; i < n; i++) {
    if (v->dtype == PR_DTYPE_INT64)
      vals[i] = ((const int64_t *)v->data)[i];
    else if (v->dtype == PR_DTYPE_INT32)
      vals[i] = ((const int32_t *)v->data)[i];
    else
      return -1;
  }
  return (int)n;
}

pr_status_t pr__plain_md(const pr_value_t *v, dnnl_memory_desc_t *md) {
  dnnl_dims_t dims;
  int rank = v->rank ? v->rank : 1;
  if (rank > 6) return PR_ERR_UNSUPPORTED;
  for (int k = 0; k < rank; k++) dims[k] = v->rank ? v->dims[k] : 1;
  dnnl_data_type_t dt = v->dtype == PR_DTYPE_FLOAT   ? dnnl_f32
                        : v->dtype == PR_DTYPE_INT32 ? dnnl_s32
                        : v->dtype == PR_DTYPE_INT8  ? dnnl_s8
                        : v->dtype == PR_DTYPE_UINT8 ? dnnl_u8
                                                     : dnnl_data_type_undef;
  if (dt == dnnl_data_type_undef) return PR_ERR_UNSUPPORTED;
  static const dnnl_format_tag_t tags[] = {dnnl_a,    dnnl_a,     dnnl_ab,    dnnl_abc,
                                           dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  return dnnl_memory_desc_init_by_tag(md, rank, dims, dt, tags[rank]) == dnnl_success
             ? PR_OK
             : PR_ERR_INTERNAL;
}

static bool reserve_values(pr_compile_t *c, int cap) {
  if (cap <= c->cap_values) return true;
  pr_value_t *nv = realloc(c->v, sizeof *nv * (size_t)cap);
  if (!nv) return false;
  c->v = nv;
  c->cap_values = cap;
  return true;
}

pr_status_t pr__node_io(pr_compile_t *c, pr_node_t *n, int n_in, const int *ins, int n_out,
                        const int *outs) {
  assert(n_in >= 0 && n_out >= 0);
  if (c->n_io == c->cap_io) {
    int cap = c->cap_io ? c->cap_io * 2 : 256;
    int **io = realloc(c->io, sizeof *io * (size_t)cap);
    if (!io) return PR_ERR_NOMEM;
    c->io = io;
    c->cap_io = cap;
  }
  int room = n_in + PR_NODE_SPARE_IN;
  int *a = malloc(sizeof(int) * (size_t)(room + n_out + 1));
  if (!a) return PR_ERR_NOMEM;
  c->io[c->n_io++] = a;
  for (int k = 0; k < room + n_out; k++) a[k] = -1;
  if (ins) memcpy(a, ins, sizeof(int) * (size_t)n_in);
  if (outs) memcpy(a + room, outs, sizeof(int) * (size_t)n_out);
  n->in = a;
  n->out = a + room;
  n->n_in = n_in;
  n->n_out = n_out;
  return PR_OK;
}

int pr__compile_add_value(pr_compile_t *c) {
  if (c->n_values == c->cap_values) {
    /* the reservation of pr__compile_prepare covers every value that pass adds */
    assert(!c->values_fixed);
    if (c->values_fixed || !reserve_values(c, c->cap_values ? c->cap_values * 2 : 64)) return -1;
  }
  pr_value_t *v = &c->v[c->n_values];
  memset(v, 0, sizeof *v);
  v->alias_of = -1;
  v->producer = -1;
  return c->n_values++;
}

static int add_node(pr_node_t **nodes, int *n, int *cap, const pr_node_t *node) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 64;
    pr_node_t *nn = realloc(*nodes, sizeof *nn * (size_t)nc);
    if (!nn) return -1;
    *nodes = nn;
    *cap = nc;
  }
  (*nodes)[(*n)++] = *node;
  return 0;
}

/* ---- 1. shapes and constant folding ---- */

static pr_status_t prepare_node(pr_compile_t *c, pr_node_t n);
static int reorder_value(pr_compile_t *c, int src, const dnnl_memory_desc_t *md, pr_status_t *st);

/* Runs the nodes of the fold's build list, every value at its data; a
 * kernel's refusal of its (constant) inputs fails the compile. */
static pr_status_t fold_run(pr_compile_t *c) {
  pr_exec_t x = {.v = c->v, .threads = c->threads, .engine = c->engine};
  dnnl_stream_create(&x.stream, c->engine, dnnl_stream_default_flags);
  for (int i = 0; i < c->build.n; i++) {
    pr_node_t *b = &c->build.nodes[i];
    for (int k = 0; k < b->n_in; k++)
      if (b->in[k] >= 0) c->v[b->in[k]].ptr = c->v[b->in[k]].data;
    for (int k = 0; k < b->n_out; k++)
      if (b->out[k] >= 0) c->v[b->out[k]].ptr = c->v[b->out[k]].data;
    b->op->run(&x, b);
    if (x.status) break;
  }
  dnnl_stream_wait(x.stream);
  dnnl_stream_destroy(x.stream);
  if (x.status) pr__errf(c->err, c->err_len, "%s", x.err);
  return x.status;
}

/* Data for every value the fold's build list writes that has none. */
static pr_status_t fold_buffers(pr_compile_t *c) {
  for (int i = 0; i < c->build.n; i++) {
    pr_node_t *b = &c->build.nodes[i];
    for (int k = 0; k < b->n_out; k++) {
      pr_value_t *o = b->out[k] >= 0 ? &c->v[b->out[k]] : NULL;
      if (!o || o->data) continue;
      if (!(o->data = pr__aligned_calloc(o->nbytes))) return PR_ERR_NOMEM;
      o->owns_data = true;
    }
  }
  return PR_OK;
}

/* An output the kernel wrote in its own layout: a reorder to row-major
 * joins the build list, and the output takes the row-major data (after
 * fold_run; see fold_finish). Returns the row-major value or -1. */
static int fold_plain_output(pr_compile_t *c, int o, pr_status_t *st) {
  c->values_fixed = true;
  int idx = reorder_value(c, o, NULL, st);
  c->values_fixed = false;
  return idx;
}

/* Constant folding of node n: its kernel prepared alone (with the reorders
 * its layouts need, done now), run on the constant inputs, and its outputs
 * made constants in row-major layout. */
static pr_status_t fold_node(pr_compile_t *c, pr_node_t *n) {
  int64_t need = c->n_values + 2 * (int64_t)(n->n_in + n->n_out) + 2;
  if (need > INT_MAX / 2 || !reserve_values(c, (int)need)) return PR_ERR_NOMEM;
  int first_new = c->n_values;
  memset(&c->build, 0, sizeof c->build);
  if (!(c->build.plain_of = malloc(sizeof(int) * (size_t)c->cap_values))) return PR_ERR_NOMEM;
  for (int i = 0; i < c->cap_values; i++) c->build.plain_of[i] = -1;
  for (int k = 0; k < n->n_in; k++) {
    pr_value_t *v = pr__in(c, n, k);
    if (v && v->dtype == PR_DTYPE_FLOAT && !v->opaque) pr__plain_md(v, &v->md);
  }
  c->values_fixed = true;
  pr_status_t st = prepare_node(c, *n);
  c->values_fixed = false;
  n->state = NULL; /* the build list's copy owns it now */
  int *plain = calloc((size_t)n->n_out + 1, sizeof *plain);
  if (!st && !plain) st = PR_ERR_NOMEM;
  for (int k = 0; !st && k < n->n_out; k++) {
    plain[k] = -1;
    if (n->out[k] >= 0 && c->v[n->out[k]].opaque) plain[k] = fold_plain_output(c, n->out[k], &st);
  }
  if (!st) st = fold_buffers(c);
  if (!st) st = fold_run(c);
  for (int k = 0; !st && k < n->n_out; k++) {
    if (n->out[k] < 0) continue;
    pr_value_t *o = &c->v[n->out[k]];
    if (plain[k] >= 0) { /* take the row-major copy's data */
      pr_value_t *p = &c->v[plain[k]];
      pr__free(o->data);
      o->data = p->data;
      p->data = NULL;
      p->owns_data = false;
      o->opaque = false;
      o->nbytes = p->nbytes;
      pr__plain_md(o, &o->md);
    }
    o->is_const = true;
    o->kind = PR_VAL_CONST;
    o->producer = (int)(n - c->nodes); /* prepare_node set its build index */
  }
  for (int i = 0; i < c->build.n; i++) {
    pr_node_t *b = &c->build.nodes[i];
    if (b->op->destroy && b->state) b->op->destroy(b->state);
  }
  for (int i = first_new; i < c->n_values; i++) /* the reorders' scratch values */
    if (c->v[i].owns_data) pr__free(c->v[i].data), c->v[i].data = NULL, c->v[i].owns_data = false;
  free(plain);
  free(c->build.nodes);
  free(c->build.plain_of);
  memset(&c->build, 0, sizeof c->build);
  n->dead = true;
  return st;
}

/* Checks the shape op->infer gave output k of node i and sizes it. */
static pr_status_t check_output(pr_compile_t *c, pr_node_t *n, int i, int k) {
  pr_value_t *o = pr__out(c, n, k);
  if (!o) return PR_OK;
  if (o->rank < 0 || !pr_dtype_size(o->dtype))
    return pr__fail(c, n, PR_ERR_INTERNAL, "output %d shape not inferred", k);
  size_t numel = 1;
  for (int d = 0; d < o->rank; d++)
    if (o->dims[d] < 0 || pr__mul_size(numel, (size_t)o->dims[d], &numel))
      return pr__fail(c, n, PR_ERR_INVALID, "output %d has an invalid shape", k);
  if (pr__mul_size(numel, pr_dtype_size(o->dtype), &o->nbytes) || o->nbytes > c->max_bytes)
    return pr__fail(c, n, PR_ERR_NOMEM,
                    "output %d needs %zu bytes, over the session's limit of %zu", k, o->nbytes,
                    c->max_bytes);
  o->producer = i;
  return PR_OK;
}

pr_status_t pr__compile_infer(pr_compile_t *c) {
  pr_status_t st;
  for (int i = 0; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    bool all_const = true;
    /* every operator here but the control ones reads its first input */
    if ((n->n_in < 1 || n->in[0] < 0) && !n->op->first_optional)
      return pr__fail(c, n, PR_ERR_INVALID, "the first input is missing");
    if (n->n_out >= 1 && n->out[0] < 0) {
      /* an omitted first output (RNN's Y when only Y_h is wanted) gets a
       * scratch value: every later pass relies on output 0 */
      int idx = pr__compile_add_value(c);
      if (idx < 0) return PR_ERR_NOMEM;
      n->out[0] = idx;
    }
    if (n->n_out < 1) return pr__fail(c, n, PR_ERR_INVALID, "the first output is missing");
    for (int k = 0; k < n->n_in; k++) {
      pr_value_t *v = pr__in(c, n, k);
      if (!v) continue;
      if (v->rank < 0) return pr__fail(c, n, PR_ERR_INVALID, "input %d has no shape", k);
      all_const &= v->is_const;
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) c->v[n->out[k]].rank = -1;
    if ((st = n->op->infer(c, n))) return st;
    for (int k = 0; k < n->n_out; k++)
      if ((st = check_output(c, n, i, k))) return st;
    /* a node may finish itself in infer (Shape marks itself dead) */
    if (all_const && !n->dead && (st = fold_node(c, n))) return st;
  }
  return PR_OK;
}

/* ---- 2. liveness and dead-node removal ---- */

void pr__compile_count_uses(pr_compile_t *c) {
  for (int i = 0; i < c->n_values; i++) c->v[i].n_uses = 0, c->v[i].last_use = -1;
  for (int i = 0; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) c->v[n->in[k]].n_uses++, c->v[n->in[k]].last_use = i;
  }
  for (int i = 0; i < c->n_values; i++)
    if (c->v[i].is_graph_output) c->v[i].n_uses++, c->v[i].last_use = INT_MAX;
}

void pr__compile_remove_dead(pr_compile_t *c) {
  bool changed = true;
  while (changed) {
    changed = false;
    pr__compile_count_uses(c);
    for (int i = c->n_nodes - 1; i >= 0; i--) {
      pr_node_t *n = &c->nodes[i];
      if (n->dead) continue;
      bool used = false;
      for (int k = 0; k < n->n_out; k++) used |= n->out[k] >= 0 && c->v[n->out[k]].n_uses > 0;
      if (!used) {
        n->dead = true;
        changed = true;
      }
    }
  }
}

/* ---- 3. prepare with layouts ---- */

/* A new value holding src in layout md (row-major when NULL), made by a
 * reorder node appended to the build list; its index, or -1 with *st set. */
static int reorder_value(pr_compile_t *c, int src, const dnnl_memory_desc_t *md, pr_status_t *st) {
  int idx = pr__compile_add_value(c);
  if (idx < 0) { /* cannot happen: pr__compile_prepare reserved the values */
    *st = PR_ERR_INTERNAL;
    return -1;
  }
  assert(idx < c->cap_values);
  c->build.plain_of[idx] = -1;
  pr_value_t *v = &c->v[idx], *s = &c->v[src];
  pr__value_set_shape(v, s->dtype, s->rank, s->dims);
  v->opaque = md != NULL;
  if (md)
    v->md = *md;
  else
    pr__plain_md(v, &v->md);
  v->nbytes = dnnl_memory_desc_get_size(&v->md);
  pr_node_t r = {.op = &pr__op_reorder};
  if ((*st = pr__node_io(c, &r, 1, &src, 1, &idx)) || (*st = r.op->prepare(c, &r))) return -1;
  v->producer = c->build.n;
  if (add_node(&c->build.nodes, &c->build.n, &c->build.cap, &r) < 0) {
    *st = PR_ERR_NOMEM;
    return -1;
  }
  return idx;
}

pr_status_t pr__require_plain(pr_compile_t *c, pr_node_t *n, int k) {
  assert(k >= 0 && k < n->n_in);
  int src = n->in[k];
  if (src < 0 || !c->v[src].opaque) return PR_OK;
  if (c->build.plain_of[src] < 0) {
    pr_status_t st = PR_OK;
    int idx = reorder_value(c, src, NULL, &st);
    if (idx < 0) return st;
    c->build.plain_of[src] = idx;
  }
  for (int j = 0; j < n->n_in; j++)
    if (n->in[j] == src) n->in[j] = c->build.plain_of[src];
  return PR_OK;
}

pr_status_t pr__require_md(pr_compile_t *c, pr_node_t *n, int k, const dnnl_memory_desc_t *md) {
  assert(k >= 0 && k < n->n_in && n->in[k] >= 0);
  int src = n->in[k];
  if (dnnl_memory_desc_equal(&c->v[src].md, md)) return PR_OK;
  pr_status_t st = PR_OK;
  int idx = reorder_value(c, src, md, &st);
  if (idx < 0) return st;
  n->in[k] = idx;
  return PR_OK;
}

/* Ops keep value pointers across pr__require_md/plain, so the value array
 * must not move in the prepare pass: reserve a reorder per input twice over
 * (the generic pass before prepare, and the op's own request) and one per
 * graph output. */
static pr_status_t begin_prepare(pr_compile_t *c, int n_outputs) {
  int64_t need = c->n_values + (int64_t)n_outputs;
  for (int i = 0; i < c->n_nodes; i++) need += 2 * (int64_t)c->nodes[i].n_in;
  if (need > INT_MAX / 2 || !reserve_values(c, (int)need)) return PR_ERR_NOMEM;
  memset(&c->build, 0, sizeof c->build);
  c->build.plain_of = malloc(sizeof(int) * (size_t)c->cap_values);
  if (!c->build.plain_of) return PR_ERR_NOMEM;
  for (int i = 0; i < c->n_values; i++) c->build.plain_of[i] = -1;
  c->values_fixed = true;
  for (int i = 0; i < c->n_values; i++) {
    pr_value_t *v = &c->v[i];
    if (v->rank >= 0 && !v->opaque) pr__plain_md(v, &v->md); /* types oneDNN has */
  }
  return PR_OK;
}

/* Prepares a copy of node n and appends it to the build list. */
static pr_status_t prepare_node(pr_compile_t *c, pr_node_t n) {
  pr_status_t st = PR_OK;
  if (!n.op->accepts_opaque)
    for (int k = 0; k < n.n_in && !st; k++) st = pr__require_plain(c, &n, k);
  if (!st && n.op->prepare) st = n.op->prepare(c, &n);
  for (int k = 0; k < n.n_out && !st; k++) {
    pr_value_t *o = pr__out(c, &n, k);
    if (!o) continue;
    if (o->opaque) o->nbytes = dnnl_memory_desc_get_size(&o->md);
    o->producer = c->build.n;
  }
  if (!st && add_node(&c->build.nodes, &c->build.n, &c->build.cap, &n) < 0) st = PR_ERR_NOMEM;
  if (st && n.op->destroy && n.state) n.op->destroy(n.state);
  return st;
}

/* Graph outputs leave in row-major layout: an opaque one gets a reorder,
 * whose value takes its place in out_vals. */
static pr_status_t plain_outputs(pr_compile_t *c, int *out_vals, int n_outputs) {
  pr_status_t st = PR_OK;
  for (int i = 0; i < n_outputs; i++) {
    int o = out_vals[i];
    if (!c->v[o].opaque) continue;
    int idx = reorder_value(c, o, NULL, &st);
    if (idx < 0) return st;
    c->v[o].is_graph_output = false;
    c->v[o].kind = PR_VAL_TEMP;
    c->v[idx].is_graph_output = true;
    c->v[idx].kind = PR_VAL_OUTPUT;
    c->v[idx].name = c->v[o].name;
    for (int j = i; j < n_outputs; j++)
      if (out_vals[j] == o) out_vals[j] = idx;
  }
  return PR_OK;
}

pr_status_t pr__compile_prepare(pr_compile_t *c, int *out_vals, int n_outputs) {
  pr_status_t st = begin_prepare(c, n_outputs);
  for (int i = 0; i < c->n_nodes && !st; i++)
    if (!c->nodes[i].dead) st = prepare_node(c, c->nodes[i]);
  if (!st) st = plain_outputs(c, out_vals, n_outputs);
  c->values_fixed = false;
  free(c->build.plain_of);
  c->build.plain_of = NULL;
  /* old list: states moved to the new list; free the old array only */
  free(c->nodes);
  c->nodes = c->build.nodes;
  c->n_nodes = c->build.n;
  c->cap_nodes = c->build.cap;
  memset(&c->build, 0, sizeof c->build);
  return st;
}
