/* Session compiler and runtime.
 *
 * pr_engine_session_create turns a model into a runnable session for concrete
 * shapes and a thread count:
 *   1. shapes: every node's outputs inferred in order; nodes whose inputs are
 *      all constant are run now (constant folding, shape subgraphs included);
 *   2. fusions (fuse.c), then dead-node removal;
 *   3. prepare: kernels created in order under pr_omp_team(threads);
 *      oneDNN kernels choose their layouts and reorders are inserted where a
 *      consumer needs another layout;
 *   4. memory: views and in-place ops share buffers, the rest are placed in one
 *      arena by liveness; graph outputs get buffers of their own.
 * A run binds the inputs and executes the node list; nothing is allocated.
 *
 * Threads: a session belongs to one thread at a time (the caller's); its
 * kernels use that thread's OpenMP team of session->threads threads.
 */
#include <assert.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/omp_team.h"
#include "base/util.h"
#include "engine/fuse.h"
#include "engine/graph.h"

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
};

/* ---- helpers shared with ops ---- */

const char *pr_mnode_name(const pr_mnode_t *m) {
  return m ? m->name : "(internal)";
}
const char *pr_node_name(const pr_node_t *n) {
  return pr_mnode_name(n->m);
}

pr_status_t pr_fail(pr_compile_t *c, const pr_node_t *n, pr_status_t st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n)
    pr_errf(c->err, c->err_len, "node '%s' (%s): %s", pr_node_name(n), n->op->name, msg);
  else
    pr_errf(c->err, c->err_len, "%s", msg);
  return st;
}

int64_t pr_value_numel(const pr_value_t *v) {
  int64_t n = 1;
  for (int k = 0; k < v->rank; k++) n *= v->dims[k];
  return n;
}

void pr_value_set_shape(pr_value_t *v, pr_dtype_t dtype, int rank, const int64_t *dims) {
  v->dtype = dtype;
  v->rank = rank;
  for (int k = 0; k < rank; k++) v->dims[k] = dims[k];
}

int pr_const_ints(const pr_value_t *v, int64_t *vals, int max) {
  if (!v || !v->is_const || v->rank > 1) return -1;
  int64_t n = pr_value_numel(v);
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

pr_status_t pr_plain_md(const pr_value_t *v, dnnl_memory_desc_t *md) {
  dnnl_dims_t dims;
  int rank = v->rank ? v->rank : 1;
  for (int k = 0; k < rank; k++) dims[k] = v->rank ? v->dims[k] : 1;
  dnnl_data_type_t dt = v->dtype == PR_DTYPE_FLOAT   ? dnnl_f32
                        : v->dtype == PR_DTYPE_INT32 ? dnnl_s32
                        : v->dtype == PR_DTYPE_INT8  ? dnnl_s8
                        : v->dtype == PR_DTYPE_UINT8 ? dnnl_u8
                                                     : dnnl_data_type_undef;
  if (dt == dnnl_data_type_undef) return PR_ERR_UNSUPPORTED;
  static const dnnl_format_tag_t tags[] = {dnnl_a,    dnnl_a,     dnnl_ab,    dnnl_abc,
                                           dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  if (rank > 6) return PR_ERR_UNSUPPORTED;
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

int pr_compile_add_value(pr_compile_t *c) {
  if (c->n_values == c->cap_values) {
    /* the reservation of prepare_all covers every value that pass adds */
    assert(!c->values_fixed);
    if (c->values_fixed) return -1;
    int cap = c->cap_values ? c->cap_values * 2 : 64;
    pr_value_t *nv = realloc(c->v, sizeof *nv * (size_t)cap);
    if (!nv) return -1;
    c->v = nv;
    c->cap_values = cap;
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

static pr_status_t fold_node(pr_compile_t *c, pr_node_t *n) {
  pr_status_t st;
  for (int k = 0; k < n->n_out; k++) {
    pr_value_t *o = pr_out(c, n, k);
    if (!o) continue;
    size_t numel = (size_t)pr_value_numel(o), nbytes;
    if (pr_mul_size(numel, pr_dtype_size(o->dtype), &nbytes))
      return pr_fail(c, n, PR_ERR_NOMEM, "constant too large");
    o->data = pr_aligned_calloc(nbytes);
    if (!o->data) return PR_ERR_NOMEM;
    o->owns_data = true;
    o->nbytes = nbytes;
  }
  if (n->op->prepare && (st = n->op->prepare(c, n))) return st;
  pr_exec_t x = {.v = c->v, .threads = c->threads, .engine = c->engine};
  dnnl_stream_create(&x.stream, c->engine, dnnl_stream_default_flags);
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] >= 0) c->v[n->in[k]].ptr = c->v[n->in[k]].data;
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] >= 0) c->v[n->out[k]].ptr = c->v[n->out[k]].data;
  n->op->run(&x, n);
  dnnl_stream_wait(x.stream);
  dnnl_stream_destroy(x.stream);
  if (n->op->destroy && n->state) n->op->destroy(n->state);
  n->state = NULL;
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] >= 0) c->v[n->out[k]].is_const = true, c->v[n->out[k]].kind = PR_VAL_CONST;
  n->dead = true;
  return PR_OK;
}

static pr_status_t infer_all(pr_compile_t *c) {
  pr_status_t st;
  for (int i = 0; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    bool all_const = true;
    if (n->n_in < 1 || n->in[0] < 0) /* every operator here reads its first input */
      return pr_fail(c, n, PR_ERR_INVALID, "the first input is missing");
    if (n->n_out >= 1 && n->out[0] < 0) {
      /* an omitted first output (RNN's Y when only Y_h is wanted) gets a
       * scratch value: every later pass relies on output 0 */
      int idx = pr_compile_add_value(c);
      if (idx < 0) return PR_ERR_NOMEM;
      n->out[0] = idx;
    }
    if (n->n_out < 1) return pr_fail(c, n, PR_ERR_INVALID, "the first output is missing");
    for (int k = 0; k < n->n_in; k++) {
      pr_value_t *v = pr_in(c, n, k);
      if (!v) continue;
      if (v->rank < 0) return pr_fail(c, n, PR_ERR_INVALID, "input %d has no shape", k);
      all_const &= v->is_const;
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) c->v[n->out[k]].rank = -1;
    if ((st = n->op->infer(c, n))) return st;
    for (int k = 0; k < n->n_out; k++) {
      pr_value_t *o = pr_out(c, n, k);
      if (!o) continue;
      if (o->rank < 0 || !pr_dtype_size(o->dtype))
        return pr_fail(c, n, PR_ERR_INTERNAL, "output %d shape not inferred", k);
      size_t numel = 1;
      for (int d = 0; d < o->rank; d++)
        if (o->dims[d] < 0 || pr_mul_size(numel, (size_t)o->dims[d], &numel))
          return pr_fail(c, n, PR_ERR_INVALID, "output %d has an invalid shape", k);
      if (pr_mul_size(numel, pr_dtype_size(o->dtype), &o->nbytes) || o->nbytes > c->max_bytes)
        return pr_fail(c, n, PR_ERR_NOMEM,
                       "output %d needs %zu bytes, over the session's limit of %zu", k, o->nbytes,
                       c->max_bytes);
      o->producer = i;
    }
    /* a node may finish itself in infer (Shape marks itself dead) */
    if (all_const && !n->dead && (st = fold_node(c, n))) return st;
  }
  return PR_OK;
}

/* ---- 2. liveness helpers and dead-node removal ---- */

static void count_uses(pr_compile_t *c) {
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

static void remove_dead(pr_compile_t *c) {
  bool changed = true;
  while (changed) {
    changed = false;
    count_uses(c);
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

typedef struct {
  pr_node_t *nodes;
  int n, cap;
  int *plain_of; /* opaque value -> its row-major copy, -1 */
} build_t;

static __thread build_t *tls_build;

static int reorder_value(pr_compile_t *c, build_t *b, int src, const dnnl_memory_desc_t *md,
                         pr_status_t *st) {
  int idx = pr_compile_add_value(c);
  if (idx < 0) { /* cannot happen: prepare_all reserved the values */
    *st = PR_ERR_INTERNAL;
    return -1;
  }
  b->plain_of[idx] = -1;
  pr_value_t *v = &c->v[idx], *s = &c->v[src];
  pr_value_set_shape(v, s->dtype, s->rank, s->dims);
  v->opaque = md != NULL;
  if (md)
    v->md = *md;
  else
    pr_plain_md(v, &v->md);
  v->nbytes = dnnl_memory_desc_get_size(&v->md);
  pr_node_t r = {.op = &pr_op_reorder, .n_in = 1, .n_out = 1, .in = {src}, .out = {idx}};
  if ((*st = r.op->prepare(c, &r))) return -1;
  v->producer = b->n;
  if (add_node(&b->nodes, &b->n, &b->cap, &r) < 0) {
    *st = PR_ERR_NOMEM;
    return -1;
  }
  return idx;
}

pr_status_t pr_require_plain(pr_compile_t *c, pr_node_t *n, int k) {
  build_t *b = tls_build;
  int src = n->in[k];
  if (src < 0 || !c->v[src].opaque) return PR_OK;
  if (b->plain_of[src] < 0) {
    pr_status_t st = PR_OK;
    int idx = reorder_value(c, b, src, NULL, &st);
    if (idx < 0) return st;
    b->plain_of[src] = idx;
  }
  for (int j = 0; j < n->n_in; j++)
    if (n->in[j] == src) n->in[j] = b->plain_of[src];
  return PR_OK;
}

pr_status_t pr_require_md(pr_compile_t *c, pr_node_t *n, int k, const dnnl_memory_desc_t *md) {
  int src = n->in[k];
  if (dnnl_memory_desc_equal(&c->v[src].md, md)) return PR_OK;
  pr_status_t st = PR_OK;
  int idx = reorder_value(c, tls_build, src, md, &st);
  if (idx < 0) return st;
  n->in[k] = idx;
  return PR_OK;
}

static pr_status_t prepare_all(pr_compile_t *c, pr_session_t *s) {
  build_t b = {0};
  /* Ops keep value pointers across pr_require_md/plain, so the value array
   * must not move in this pass: reserve a reorder per input twice over (the
   * generic pass before prepare, and the op's own request) and one per graph
   * output. */
  int64_t need = c->n_values + (int64_t)s->n_outputs;
  for (int i = 0; i < c->n_nodes; i++) need += 2 * (int64_t)c->nodes[i].n_in;
  if (need > INT_MAX / 2 || !reserve_values(c, (int)need)) return PR_ERR_NOMEM;
  b.plain_of = malloc(sizeof(int) * (size_t)c->cap_values);
  if (!b.plain_of) return PR_ERR_NOMEM;
  for (int i = 0; i < c->n_values; i++) b.plain_of[i] = -1;
  tls_build = &b;
  c->values_fixed = true;
  pr_status_t st = PR_OK;
  for (int i = 0; i < c->n_values; i++) {
    pr_value_t *v = &c->v[i];
    if (v->rank >= 0 && v->dtype == PR_DTYPE_FLOAT && !v->opaque) pr_plain_md(v, &v->md);
  }
  for (int i = 0; i < c->n_nodes && !st; i++) {
    pr_node_t n = c->nodes[i];
    if (n.dead) continue;
    if (!n.op->accepts_opaque)
      for (int k = 0; k < n.n_in && !st; k++) st = pr_require_plain(c, &n, k);
    if (!st && n.op->prepare) st = n.op->prepare(c, &n);
    for (int k = 0; k < n.n_out && !st; k++) {
      pr_value_t *o = pr_out(c, &n, k);
      if (!o) continue;
      if (o->opaque) o->nbytes = dnnl_memory_desc_get_size(&o->md);
      o->producer = b.n;
    }
    if (!st && add_node(&b.nodes, &b.n, &b.cap, &n) < 0) st = PR_ERR_NOMEM;
    if (st && n.op->destroy && n.state) n.op->destroy(n.state);
  }
  /* graph outputs leave in row-major layout */
  for (int i = 0; i < s->n_outputs && !st; i++) {
    int o = s->out_vals[i];
    if (!c->v[o].opaque) continue;
    int idx = reorder_value(c, &b, o, NULL, &st);
    if (idx < 0) break;
    c->v[o].is_graph_output = false;
    c->v[o].kind = PR_VAL_TEMP;
    c->v[idx].is_graph_output = true;
    c->v[idx].kind = PR_VAL_OUTPUT;
    c->v[idx].name = c->v[o].name;
    for (int j = i; j < s->n_outputs; j++)
      if (s->out_vals[j] == o) s->out_vals[j] = idx;
  }
  tls_build = NULL;
  c->values_fixed = false;
  free(b.plain_of);
  /* old list: states moved to the new list; free the old array only */
  free(c->nodes);
  c->nodes = b.nodes;
  c->n_nodes = b.n;
  c->cap_nodes = b.cap;
  return st;
}

/* ---- 4. memory ---- */

static int root_of(pr_compile_t *c, int v) {
  while (c->v[v].alias_of >= 0) v = c->v[v].alias_of;
  return v;
}

typedef struct {
  size_t off, len;
} block_t;

static pr_status_t plan_memory(pr_compile_t *c, pr_session_t *s) {
  count_uses(c);
  int nv = c->n_values;
  int *root_last = malloc(sizeof(int) * (size_t)nv);
  if (!root_last) return PR_ERR_NOMEM;
  for (int i = 0; i < nv; i++) root_last[i] = c->v[i].last_use;
  /* aliases: views and in-place outputs share their input's buffer */
  for (int i = 0; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    int in0 = n->n_in ? n->in[0] : -1;
    int out0 = n->n_out ? n->out[0] : -1;
    int alias_src = -1;
    if (n->post.sum) {
      int addend = n->in[n->n_in - 1];
      int r = root_of(c, addend);
      bool also_read = false; /* the kernel must not write over its own source */
      for (int k = 0; k < n->n_in - 1; k++) also_read |= n->in[k] >= 0 && root_of(c, n->in[k]) == r;
      if (c->v[r].kind == PR_VAL_TEMP && root_last[r] == i && c->v[out0].kind == PR_VAL_TEMP &&
          c->v[addend].nbytes == c->v[out0].nbytes && !also_read)
        alias_src = addend;
    } else if (in0 >= 0 && out0 >= 0 && c->v[out0].kind == PR_VAL_TEMP) {
      int r = root_of(c, in0);
      if (n->op->view && !c->v[in0].opaque && !c->v[out0].opaque)
        alias_src = in0;
      else if (n->op->inplace && c->v[r].kind == PR_VAL_TEMP && root_last[r] == i &&
               c->v[in0].nbytes == c->v[out0].nbytes && c->v[in0].opaque == c->v[out0].opaque)
        alias_src = in0;
    }
    if (alias_src >= 0 && out0 >= 0 && c->v[out0].kind == PR_VAL_TEMP) {
      int r = root_of(c, alias_src);
      c->v[out0].alias_of = r;
      if (c->v[out0].last_use > root_last[r]) root_last[r] = c->v[out0].last_use;
    }
  }
  /* arena: place TEMP roots by liveness, best fit in a free list */
  block_t *free_list = NULL;
  int n_free = 0, cap_free = 0;
  size_t top = 0;
  for (int i = 0; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    for (int k = 0; k < n->n_out; k++) {
      int o = n->out[k];
      if (o < 0) continue;
      pr_value_t *v = &c->v[o];
      if (v->kind != PR_VAL_TEMP || v->alias_of >= 0) continue;
      size_t len = (v->nbytes + PR_ALIGN - 1) / PR_ALIGN * PR_ALIGN;
      if (!len) len = PR_ALIGN;
      int best = -1;
      for (int f = 0; f < n_free; f++)
        if (free_list[f].len >= len && (best < 0 || free_list[f].len < free_list[best].len))
          best = f;
      if (best >= 0) {
        v->offset = free_list[best].off;
        free_list[best].off += len;
        free_list[best].len -= len;
      } else if (n_free && free_list[n_free - 1].off + free_list[n_free - 1].len == top) {
        /* the free block at the end grows into new space */
        block_t *e = &free_list[n_free - 1];
        v->offset = e->off;
        top = e->off + len;
        e->off = top;
        e->len = 0;
      } else {
        v->offset = top;
        top += len;
      }
      if (root_last[o] < 0) root_last[o] = i; /* unused output: free right away */
    }
    /* free roots whose last use is this node */
    for (int k = 0; k < n->n_in + n->n_out; k++) {
      int val = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
      if (val < 0) continue;
      int r = root_of(c, val);
      pr_value_t *v = &c->v[r];
      if (v->kind != PR_VAL_TEMP || root_last[r] != i) continue;
      size_t len = (v->nbytes + PR_ALIGN - 1) / PR_ALIGN * PR_ALIGN;
      if (!len) len = PR_ALIGN;
      root_last[r] = -2; /* freed */
      if (n_free == cap_free) {
        cap_free = cap_free ? cap_free * 2 : 32;
        block_t *nf = realloc(free_list, sizeof *nf * (size_t)cap_free);
        if (!nf) {
          free(free_list);
          free(root_last);
          return PR_ERR_NOMEM;
        }
        free_list = nf;
      }
      /* insert sorted by offset, then coalesce */
      int pos = n_free;
      while (pos > 0 && free_list[pos - 1].off > v->offset) {
        free_list[pos] = free_list[pos - 1];
        pos--;
      }
      free_list[pos] = (block_t){v->offset, len};
      n_free++;
      for (int f = 0; f + 1 < n_free;) {
        if (free_list[f].off + free_list[f].len == free_list[f + 1].off) {
          free_list[f].len += free_list[f + 1].len;
          memmove(&free_list[f + 1], &free_list[f + 2],
                  sizeof *free_list * (size_t)(n_free - f - 2));
          n_free--;
        } else {
          f++;
        }
      }
    }
  }
  free(free_list);
  free(root_last);
  if (top > c->max_bytes)
    return pr_fail(c, NULL, PR_ERR_NOMEM,
                   "intermediate buffers need %zu bytes, over the limit of %zu", top, c->max_bytes);
  s->arena_size = top;
  s->arena = pr_aligned_calloc(top);
  if (!s->arena) return PR_ERR_NOMEM;
  for (int i = 0; i < nv; i++) {
    pr_value_t *v = &c->v[i];
    if (v->is_const)
      v->ptr = v->data;
    else if (v->kind == PR_VAL_TEMP && v->alias_of < 0)
      v->ptr = (char *)s->arena + v->offset;
  }
  for (int i = 0; i < s->n_outputs; i++) {
    pr_value_t *v = &c->v[s->out_vals[i]];
    s->out_bufs[i] = pr_aligned_calloc(v->nbytes);
    if (!s->out_bufs[i]) return PR_ERR_NOMEM;
    if (v->kind == PR_VAL_OUTPUT && !v->is_const) v->ptr = s->out_bufs[i];
  }
  for (int i = 0; i < nv; i++)
    if (c->v[i].alias_of >= 0) c->v[i].ptr = c->v[root_of(c, i)].ptr;
  return PR_OK;
}

/* ---- public API ---- */

pr_session_options_t pr_session_options_default(void) {
  pr_session_options_t o = {.threads = 1, .batch = 1};
  return o;
}

static pr_status_t resolve_input(pr_compile_t *c, const pr_session_options_t *opt, int i,
                                 pr_value_t *v, const pr_mvalue_t *mv) {
  if (opt->input_shapes) {
    const pr_tensor_info_t *in = &opt->input_shapes[i];
    if (in->rank != mv->rank)
      return pr_fail(c, NULL, PR_ERR_INVALID, "input '%s': rank %d given, model has %d", mv->name,
                     in->rank, mv->rank);
    for (int k = 0; k < mv->rank; k++) {
      if (in->dims[k] < 0 || (mv->dims[k] >= 0 && in->dims[k] != mv->dims[k]))
        return pr_fail(c, NULL, PR_ERR_INVALID,
                       "input '%s': dimension %d is %lld, model needs %lld", mv->name, k,
                       (long long)in->dims[k], (long long)mv->dims[k]);
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
      return pr_fail(c, NULL, PR_ERR_INVALID, "input '%s': no value for symbolic dimension %d (%s)",
                     mv->name, k, mv->dim_names[k] ? mv->dim_names[k] : "unnamed");
    v->dims[k] = val;
  }
  return PR_OK;
}

void pr_engine_session_destroy(pr_session_t *s) {
  if (!s) return;
  pr_compile_t *c = &s->c;
  for (int i = 0; i < c->n_nodes; i++)
    if (c->nodes[i].state && c->nodes[i].op->destroy) c->nodes[i].op->destroy(c->nodes[i].state);
  for (int i = 0; i < c->n_values; i++)
    if (c->v[i].owns_data) pr_free(c->v[i].data);
  if (s->out_bufs)
    for (int i = 0; i < s->n_outputs; i++) pr_free(s->out_bufs[i]);
  free(s->out_bufs);
  free(s->in_vals);
  free(s->out_vals);
  free(s->kernel_seconds);
  free(c->v);
  free(c->nodes);
  pr_free(s->arena);
  if (s->stream) dnnl_stream_destroy(s->stream);
  if (c->engine) dnnl_engine_destroy(c->engine);
  free(s);
}

/* Convolution activation layout. Measured on ResNet-50 and Inception-v3
 * (AVX-512, oneDNN 2.6): with a batch of 2 or more, the channel-blocked
 * kernels run 2-5% faster than the channels-last ones oneDNN picks by itself;
 * at batch 1 the channels-last ones are as fast or faster (up to 5%). */
static int conv_block_for(const pr_model_t *m, const pr_session_options_t *opt) {
  int64_t batch = opt->batch;
  if (opt->input_shapes && m->n_inputs > 0 && opt->input_shapes[0].rank >= 1)
    batch = opt->input_shapes[0].dims[0];
  if (batch < 2) return 0;
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  /* measured on AVX-512 only; elsewhere the kernel's choice stands */
  return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? 16 : 0;
}

pr_status_t pr_engine_session_create(pr_model_t *m, const pr_session_options_t *opt,
                                     pr_session_t **out, char *err, size_t err_len) {
  if (!m || !opt || !out) return PR_ERR_INVALID;
  *out = NULL;
  if (opt->threads < 1 || opt->threads > 1024) {
    pr_errf(err, err_len, "threads must be 1..1024, got %d", opt->threads);
    return PR_ERR_INVALID;
  }
  if (opt->batch < 1 || opt->batch > (1 << 20)) {
    pr_errf(err, err_len, "batch must be 1..%d, got %lld", 1 << 20, (long long)opt->batch);
    return PR_ERR_INVALID;
  }
  pr_session_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  pr_compile_t *c = &s->c;
  c->model = m;
  c->threads = opt->threads;
  c->opset = m->opset;
  c->max_bytes = opt->max_bytes ? opt->max_bytes : (size_t)16 << 30;
  c->err = err;
  c->err_len = err_len;
  c->conv_block = conv_block_for(m, opt);
  pr_status_t st = PR_ERR_NOMEM;
  pr_omp_team(opt->threads);
  if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&s->stream, c->engine, dnnl_stream_default_flags) != dnnl_success) {
    st = pr_fail(c, NULL, PR_ERR_INTERNAL, "oneDNN engine creation failed");
    goto fail;
  }
  for (int i = 0; i < m->n_values; i++) {
    int idx = pr_compile_add_value(c);
    if (idx < 0) goto fail;
    pr_value_t *v = &c->v[idx];
    const pr_mvalue_t *mv = &m->values[i];
    v->name = mv->name;
    v->rank = -1;
    if (mv->init) {
      pr_value_set_shape(v, mv->init->dtype, mv->init->rank, mv->init->dims);
      v->is_const = true;
      v->kind = PR_VAL_CONST;
      v->data = mv->init->data;
      v->nbytes = (size_t)pr_value_numel(v) * pr_dtype_size(v->dtype);
    }
  }
  s->n_inputs = m->n_inputs;
  s->n_outputs = m->n_outputs;
  s->in_vals = calloc((size_t)m->n_inputs + 1, sizeof(int));
  s->out_vals = calloc((size_t)m->n_outputs + 1, sizeof(int));
  s->out_bufs = calloc((size_t)m->n_outputs + 1, sizeof(void *));
  if (!s->in_vals || !s->out_vals || !s->out_bufs) goto fail;
  for (int i = 0; i < m->n_inputs; i++) {
    int idx = m->inputs[i];
    pr_value_t *v = &c->v[idx];
    const pr_mvalue_t *mv = &m->values[idx];
    v->dtype = mv->dtype;
    v->rank = mv->rank;
    v->kind = PR_VAL_INPUT;
    if ((st = resolve_input(c, opt, i, v, mv))) goto fail;
    size_t numel = 1;
    for (int k = 0; k < v->rank; k++)
      if (pr_mul_size(numel, (size_t)v->dims[k], &numel)) {
        st = pr_fail(c, NULL, PR_ERR_INVALID, "input '%s' too large", mv->name);
        goto fail;
      }
    v->nbytes = numel * pr_dtype_size(v->dtype);
    if (v->nbytes > c->max_bytes) {
      st = pr_fail(c, NULL, PR_ERR_NOMEM, "input '%s' needs %zu bytes, over the limit", mv->name,
                   v->nbytes);
      goto fail;
    }
    s->in_vals[i] = idx;
    if (opt->input_values && opt->input_values[i]) {
      if (!opt->input_shapes) {
        st = pr_fail(c, NULL, PR_ERR_INVALID, "input_values needs input_shapes");
        goto fail;
      }
      v->data = pr_aligned_alloc(v->nbytes);
      if (!v->data) goto fail;
      memcpy(v->data, opt->input_values[i], v->nbytes);
      v->owns_data = true;
      v->is_const = true;
      v->kind = PR_VAL_CONST;
      c->fixed_inputs = true;
    }
  }
  c->nodes = calloc((size_t)m->n_nodes + 1, sizeof *c->nodes);
  if (!c->nodes) goto fail;
  c->cap_nodes = m->n_nodes + 1;
  for (int i = 0; i < m->n_nodes; i++) {
    const pr_mnode_t *mn = &m->nodes[i];
    pr_node_t *n = &c->nodes[c->n_nodes++];
    n->op = mn->op;
    n->m = mn;
    n->n_in = mn->n_in;
    n->n_out = mn->n_out;
    memcpy(n->in, mn->in, sizeof(int) * (size_t)mn->n_in);
    memcpy(n->out, mn->out, sizeof(int) * (size_t)mn->n_out);
  }
  for (int i = 0; i < m->n_outputs; i++) {
    int idx = m->outputs[i];
    s->out_vals[i] = idx;
    c->v[idx].is_graph_output = true;
    if (c->v[idx].kind == PR_VAL_TEMP) c->v[idx].kind = PR_VAL_OUTPUT;
  }
  if ((st = infer_all(c))) goto fail;
  for (int i = 0; i < m->n_outputs; i++)
    if (c->v[s->out_vals[i]].rank < 0) {
      st = pr_fail(c, NULL, PR_ERR_INVALID, "graph output %d is never computed", i);
      goto fail;
    }
  remove_dead(c);
  if (!opt->disable_fusion) {
    count_uses(c);
    if ((st = pr_fuse(c))) goto fail;
    remove_dead(c);
  }
  if ((st = prepare_all(c, s))) goto fail;
  for (int i = 0; i < c->n_nodes; i++) s->flops += c->nodes[i].flops;
  if ((st = plan_memory(c, s))) goto fail;
  if (opt->profile_kernels &&
      !(s->kernel_seconds = calloc((size_t)c->n_nodes + 1, sizeof *s->kernel_seconds)))
    goto fail;
  *out = s;
  return PR_OK;
fail:
  if (!st) st = PR_ERR_NOMEM;
  pr_engine_session_destroy(s);
  return st;
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
  info->node = pr_node_name(n);
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
  session_info(s, s->out_vals[i], info);
  return PR_OK;
}

pr_status_t pr_engine_session_run(pr_session_t *s, const pr_tensor_t *inputs, int n_inputs,
                                  pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len) {
  if (!s) return PR_ERR_INVALID;
  pr_compile_t *c = &s->c;
  if (n_inputs != s->n_inputs || (n_outputs && n_outputs != s->n_outputs) ||
      (n_inputs && !inputs)) {
    pr_errf(err, err_len, "expected %d inputs and %d outputs", s->n_inputs, s->n_outputs);
    return PR_ERR_INVALID;
  }
  for (int i = 0; i < n_inputs; i++) {
    pr_value_t *v = &c->v[s->in_vals[i]];
    const pr_tensor_t *t = &inputs[i];
    bool ok = t->dtype == v->dtype && t->rank == v->rank && (t->data || !v->nbytes);
    for (int k = 0; ok && k < v->rank; k++) ok = t->dims[k] == v->dims[k];
    if (!ok) {
      char want[160] = "", got[160] = "";
      size_t a = 0, b = 0;
      for (int k = 0; k < v->rank; k++)
        a += (size_t)snprintf(want + a, sizeof want - a, "%s%lld", k ? "," : "",
                              (long long)v->dims[k]);
      for (int k = 0; k < t->rank && k < PR_MAX_RANK; k++)
        b += (size_t)snprintf(got + b, sizeof got - b, "%s%lld", k ? "," : "",
                              (long long)t->dims[k]);
      pr_errf(err, err_len, "input '%s': expected %s [%s], got %s [%s]", v->name,
              pr_dtype_name(v->dtype), want, pr_dtype_name(t->dtype), got);
      return PR_ERR_INVALID;
    }
    if (v->is_const) {
      if (memcmp(v->data, t->data, v->nbytes)) {
        pr_errf(err, err_len, "input '%s' differs from the value fixed when the session was made",
                v->name);
        return PR_ERR_INVALID;
      }
      continue;
    }
    v->ptr = t->data;
  }
  for (int i = 0; i < c->n_values; i++)
    if (c->v[i].alias_of >= 0) c->v[i].ptr = c->v[root_of(c, i)].ptr;
  pr_omp_team(c->threads);
  pr_exec_t x = {.v = c->v, .threads = c->threads, .engine = c->engine, .stream = s->stream};
  if (s->kernel_seconds) {
    for (int i = 0; i < c->n_nodes; i++) {
      double t0 = pr_now();
      c->nodes[i].op->run(&x, &c->nodes[i]);
      dnnl_stream_wait(s->stream);
      s->kernel_seconds[i] += pr_now() - t0;
    }
    s->runs++;
  } else {
    for (int i = 0; i < c->n_nodes; i++) c->nodes[i].op->run(&x, &c->nodes[i]);
  }
  dnnl_stream_wait(s->stream);
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
