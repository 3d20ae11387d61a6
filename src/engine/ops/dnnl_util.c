/* oneDNN glue: primitive + bound arguments, synchronous reorders, and the
 * compiler's internal Reorder op (layout changes between kernels). */
#include "engine/ops/dnnl_util.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

pr_status_t pr__dnnl_prim_init(pr_compile_t *c, pr_node_t *n, pr_dnnl_prim_t *p,
                               dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  if (!n->impl[0] &&
      dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
    snprintf(n->impl, sizeof n->impl, "%s", impl);
  dnnl_status_t st = dnnl_primitive_create(&p->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  if (st != dnnl_success)
    return pr__fail(c, n, PR_ERR_INTERNAL, "oneDNN primitive creation failed (%d)", st);
  return pr__dnnl_prim_reserve(p, PR_DNNL_ARGS);
}

dnnl_primitive_desc_t pr__dnnl_pd_first(
    const_dnnl_op_desc_t d, const_dnnl_primitive_attr_t attr, dnnl_engine_t engine,
    bool (*skip)(const_dnnl_primitive_desc_t pd, const void *ctx), const void *ctx) {
  dnnl_primitive_desc_iterator_t it;
  if (dnnl_primitive_desc_iterator_create(&it, d, attr, engine, NULL) != dnnl_success) return NULL;
  dnnl_primitive_desc_t found = NULL;
  do {
    dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
    dnnl_primitive_t prim;
    if (!pd) continue;
    /* the trial primitive stays in oneDNN's primitive cache, where the
     * op's own creation (pr__dnnl_prim_init) finds it (it is made again
     * where the cache is off: the ThreadSanitizer build) */
    if ((!skip || !skip(pd, ctx)) && dnnl_primitive_create(&prim, pd) == dnnl_success) {
      dnnl_primitive_destroy(prim);
      found = pd;
      break;
    }
    dnnl_primitive_desc_destroy(pd);
  } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
  dnnl_primitive_desc_iterator_destroy(it);
  return found;
}

pr_status_t pr__dnnl_prim_reserve(pr_dnnl_prim_t *p, int n) {
  if (n <= p->cap_args) return PR_OK;
  pr_dnnl_arg_t *args = realloc(p->args, sizeof *args * (size_t)n);
  if (!args) return PR_ERR_NOMEM;
  p->args = args;
  dnnl_exec_arg_t *exec = realloc(p->exec, sizeof *exec * (size_t)n);
  if (!exec) return PR_ERR_NOMEM;
  p->exec = exec;
  p->cap_args = n;
  return PR_OK;
}

void pr__dnnl_prim_add_arg(pr_dnnl_prim_t *p, int arg, int value, void *buf,
                           const dnnl_memory_desc_t *md) {
  assert(p->n_args < p->cap_args); /* init's slots, or pr__dnnl_prim_reserve */
  pr_dnnl_arg_t *a = &p->args[p->n_args++];
  memset(a, 0, sizeof *a);
  a->arg = arg;
  a->value = value;
  a->buf = buf;
  a->md = *md;
}

void pr__dnnl_prim_run(pr_exec_t *x, pr_dnnl_prim_t *p) {
  dnnl_exec_arg_t *args = p->exec;
  for (int i = 0; i < p->n_args; i++) {
    pr_dnnl_arg_t *a = &p->args[i];
    void *ptr = a->value >= 0 ? x->v[a->value].ptr : a->buf;
    if (!a->mem) {
      dnnl_memory_create(&a->mem, &a->md, x->engine, ptr);
      a->bound = ptr;
    } else if (a->bound != ptr) {
      dnnl_memory_set_data_handle(a->mem, ptr);
      a->bound = ptr;
    }
    args[i].arg = a->arg;
    args[i].memory = a->mem;
  }
  dnnl_primitive_execute(p->prim, x->stream, p->n_args, args);
}

void pr__dnnl_prim_destroy(pr_dnnl_prim_t *p) {
  if (p->prim) dnnl_primitive_destroy(p->prim);
  for (int i = 0; i < p->n_args; i++)
    if (p->args[i].mem) dnnl_memory_destroy(p->args[i].mem);
  free(p->args);
  free(p->exec);
  p->prim = NULL;
  p->args = NULL;
  p->exec = NULL;
  p->n_args = p->cap_args = 0;
}

pr_status_t pr__dnnl_reorder_now(dnnl_engine_t eng, const dnnl_memory_desc_t *src_md, void *src,
                                 const dnnl_memory_desc_t *dst_md, void *dst) {
  dnnl_memory_t ms = NULL, md = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t prim = NULL;
  dnnl_stream_t stream = NULL;
  pr_status_t st = PR_ERR_INTERNAL;
  if (dnnl_memory_create(&ms, src_md, eng, src) || dnnl_memory_create(&md, dst_md, eng, dst) ||
      dnnl_reorder_primitive_desc_create(&pd, src_md, eng, dst_md, eng, NULL) ||
      dnnl_primitive_create(&prim, pd) ||
      dnnl_stream_create(&stream, eng, dnnl_stream_default_flags))
    goto out;
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
  if (dnnl_primitive_execute(prim, stream, 2, args) || dnnl_stream_wait(stream)) goto out;
  st = PR_OK;
out:
  if (stream) dnnl_stream_destroy(stream);
  if (prim) dnnl_primitive_destroy(prim);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (ms) dnnl_memory_destroy(ms);
  if (md) dnnl_memory_destroy(md);
  return st;
}

void *pr__dnnl_weights_cached(pr_compile_t *c, pr_node_t *n, int variant,
                              const dnnl_memory_desc_t *md, pr_model_t **owner) {
  *owner = NULL;
  if (c->fixed_inputs || !n->m) return NULL;
  void *buf = pr__wcache_get(c->model, n->m, variant, md);
  if (buf) *owner = c->model;
  return buf;
}

pr_status_t pr__dnnl_weights_make(pr_compile_t *c, pr_node_t *n, int variant, const void *src,
                                  const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *md,
                                  void **buf, pr_model_t **owner) {
  *owner = NULL;
  void *b = pr__aligned_calloc(dnnl_memory_desc_get_size(md));
  if (!b) return PR_ERR_NOMEM;
  pr_status_t st = pr__dnnl_reorder_now(c->engine, plain, (void *)src, md, b);
  if (st) {
    pr__free(b);
    return pr__fail(c, n, st, "weight reorder failed");
  }
  if (c->fixed_inputs || !n->m) {
    *buf = b;
    return PR_OK;
  }
  if (!(*buf = pr__wcache_put(c->model, n->m, variant, md, b))) return PR_ERR_NOMEM;
  *owner = c->model;
  return PR_OK;
}

pr_status_t pr__dnnl_weights_dynamic(pr_compile_t *c, pr_node_t *n, int k,
                                     const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *md,
                                     pr_dnnl_prim_t *reorder, void **buf) {
  if (!(*buf = pr__aligned_calloc(dnnl_memory_desc_get_size(md)))) return PR_ERR_NOMEM;
  dnnl_primitive_desc_t rpd;
  PR_DNNL(c, n, dnnl_reorder_primitive_desc_create(&rpd, plain, c->engine, md, c->engine, NULL));
  pr_status_t st = pr__dnnl_prim_init(c, n, reorder, rpd);
  if (st) return st;
  pr__dnnl_prim_add_arg(reorder, DNNL_ARG_FROM, n->in[k], NULL, plain);
  pr__dnnl_prim_add_arg(reorder, DNNL_ARG_TO, -1, *buf, md);
  return PR_OK;
}

void pr__dnnl_weights_release(void *buf, pr_model_t *owner) {
  if (owner)
    pr__wcache_release(owner, buf);
  else
    pr__free(buf);
}

void pr__dnnl_sum_addend(pr_exec_t *x, const pr_node_t *n, int k) {
  const pr_value_t *a = &x->v[n->in[k]], *o = &x->v[n->out[0]];
  if (a->ptr != o->ptr) pr__copy(o->ptr, a->ptr, o->nbytes, x->threads);
}

pr_status_t pr__dnnl_post_attr(pr_compile_t *c, pr_node_t *n, dnnl_primitive_attr_t *attr) {
  return pr__dnnl_post_attr_round(c, n, false, attr);
}

pr_status_t pr__dnnl_post_attr_round(pr_compile_t *c, pr_node_t *n, bool round,
                                     dnnl_primitive_attr_t *attr) {
  dnnl_post_ops_t po;
  PR_DNNL(c, n, dnnl_primitive_attr_create(attr));
  if (dnnl_post_ops_create(&po) != dnnl_success) {
    dnnl_primitive_attr_destroy(*attr);
    return pr__fail(c, n, PR_ERR_INTERNAL, "oneDNN post-ops creation failed");
  }
  dnnl_status_t st = dnnl_success;
  for (int i = 0; i <= n->post.n_eltwise && st == dnnl_success; i++) {
    if (n->post.sum && i == n->post.sum_before) st = dnnl_post_ops_append_sum(po, 1.f);
    if (i < n->post.n_eltwise && st == dnnl_success)
      st = dnnl_post_ops_append_eltwise(po, 1.f, n->post.alg[i], n->post.alpha[i], n->post.beta[i]);
  }
  /* the rounding's post-op must be there: without it the answer is wrong */
  if (round && st == dnnl_success)
    st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_round, 0.f, 0.f);
  if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(*attr, po);
  dnnl_post_ops_destroy(po);
  if (st != dnnl_success) {
    dnnl_primitive_attr_destroy(*attr);
    return pr__fail(c, n, PR_ERR_INTERNAL, "oneDNN post-ops failed (%d)", st);
  }
  return PR_OK;
}

/* ---- Reorder (internal): in[0] -> out[0], layouts from the values' mds ---- */

static pr_status_t prepare_reorder(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *in = pr__in(c, n, 0), *out = pr__out(c, n, 0);
  pr_dnnl_prim_t *p = calloc(1, sizeof *p);
  if (!p) return PR_ERR_NOMEM;
  n->state = p;
  dnnl_primitive_desc_t pd;
  PR_DNNL(c, n,
          dnnl_reorder_primitive_desc_create(&pd, &in->md, c->engine, &out->md, c->engine, NULL));
  pr_status_t st = pr__dnnl_prim_init(c, n, p, pd);
  if (st) return st;
  pr__dnnl_prim_add_arg(p, DNNL_ARG_FROM, n->in[0], NULL, &in->md);
  pr__dnnl_prim_add_arg(p, DNNL_ARG_TO, n->out[0], NULL, &out->md);
  return PR_OK;
}

void pr__dnnl_run_state(pr_exec_t *x, pr_node_t *n) {
  pr__dnnl_prim_run(x, n->state);
}

void pr__dnnl_destroy_state(void *s) {
  pr__dnnl_prim_destroy(s);
  free(s);
}

const pr_op_t pr__op_reorder = {.name = "Reorder",
                                .prepare = prepare_reorder,
                                .run = pr__dnnl_run_state,
                                .destroy = pr__dnnl_destroy_state,
                                .accepts_opaque = true};
