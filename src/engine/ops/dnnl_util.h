/* Helpers for ops built on oneDNN primitives. */
#ifndef PR_ENGINE_DNNL_UTIL_H
#define PR_ENGINE_DNNL_UTIL_H

#include "engine/ops/ops.h"

/* A primitive argument bound to a value's buffer. The memory object is made
 * on the first run and its handle updated only when the value's pointer
 * changes (graph inputs), since oneDNN may zero-pad a blocked buffer on each
 * handle change. */
typedef struct {
  int arg;   /* DNNL_ARG_* */
  int value; /* value index, -1 for a state-owned buffer */
  void *buf; /* state-owned buffer when value < 0 */
  dnnl_memory_desc_t md;
  dnnl_memory_t mem;
  void *bound;
} pr_dnnl_arg_t;

/* Argument slots a primitive gets at init; pr__dnnl_prim_reserve for more. */
#define PR_DNNL_ARGS 8

typedef struct {
  dnnl_primitive_t prim;
  int n_args, cap_args;
  pr_dnnl_arg_t *args;
  dnnl_exec_arg_t *exec; /* cap_args entries, filled by each run */
} pr_dnnl_prim_t;

/* Create prim from pd (pd is destroyed), with PR_DNNL_ARGS argument slots. */
pr_status_t pr__dnnl_prim_init(pr_compile_t *c, pr_node_t *n, pr_dnnl_prim_t *p,
                               dnnl_primitive_desc_t pd);
/* The first implementation oneDNN lists for op desc d with attr that it
 * can create a primitive of (oneDNN 2.6 lists some whose code then fails
 * to generate: an int8 1x1 convolution of 4-channel groups with a rounding
 * post-op) and that skip (NULL: none) does not refuse, the caller's to
 * destroy (pr__dnnl_prim_init does); NULL when none. */
dnnl_primitive_desc_t pr__dnnl_pd_first(
    const_dnnl_op_desc_t d, const_dnnl_primitive_attr_t attr, dnnl_engine_t engine,
    bool (*skip)(const_dnnl_primitive_desc_t pd, const void *ctx), const void *ctx);
/* Room for n arguments in all (e.g. a concat of many inputs). */
pr_status_t pr__dnnl_prim_reserve(pr_dnnl_prim_t *p, int n);
void pr__dnnl_prim_add_arg(pr_dnnl_prim_t *p, int arg, int value, void *buf,
                           const dnnl_memory_desc_t *md);
void pr__dnnl_prim_run(pr_exec_t *x, pr_dnnl_prim_t *p);
void pr__dnnl_prim_destroy(pr_dnnl_prim_t *p);
/* run and destroy of an op whose state is one calloc'd pr_dnnl_prim_t. */
void pr__dnnl_run_state(pr_exec_t *x, pr_node_t *n);
void pr__dnnl_destroy_state(void *s);

/* Synchronous reorder of src (md) into dst (md). */
pr_status_t pr__dnnl_reorder_now(dnnl_engine_t eng, const dnnl_memory_desc_t *src_md, void *src,
                                 const dnnl_memory_desc_t *dst_md, void *dst);

/* Constant weights in a kernel's layout md. cached: the model-wide copy for
 * (n's model node, variant, md), with a reference taken, or NULL. make:
 * reorder src (layout plain) into md and share it through the model's cache
 * when the weights depend on the model alone (no inputs fixed at compile
 * time), else keep it private. *owner: the model for a shared buffer
 * (pr__wcache_release), NULL for a private one (pr__free). */
void *pr__dnnl_weights_cached(pr_compile_t *c, pr_node_t *n, int variant,
                              const dnnl_memory_desc_t *md, pr_model_t **owner);
pr_status_t pr__dnnl_weights_make(pr_compile_t *c, pr_node_t *n, int variant, const void *src,
                                  const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *md,
                                  void **buf, pr_model_t **owner);
void pr__dnnl_weights_release(void *buf, pr_model_t *owner);
/* Weights that are not constant (input k of n): *buf in the kernel's layout
 * md, filled from the row-major input (layout plain) by *reorder, which the
 * op runs before its kernel. */
pr_status_t pr__dnnl_weights_dynamic(pr_compile_t *c, pr_node_t *n, int k,
                                     const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *md,
                                     pr_dnnl_prim_t *reorder, void **buf);
/* Before a kernel with a fused residual sum runs: the addend (input k) into
 * the output buffer, unless the memory planner already placed it there. */
void pr__dnnl_sum_addend(pr_exec_t *x, const pr_node_t *n, int k);
/* Primitive attributes with n's fused post-ops (activations, residual sum). */
pr_status_t pr__dnnl_post_attr(pr_compile_t *c, pr_node_t *n, dnnl_primitive_attr_t *attr);
/* The same, then (when round) a rounding to the nearest integer, half to
 * even, after them all. */
pr_status_t pr__dnnl_post_attr_round(pr_compile_t *c, pr_node_t *n, bool round,
                                     dnnl_primitive_attr_t *attr);

#endif
