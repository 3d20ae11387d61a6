/* Internal IR of the engine.
 *
 * A model (pr_model_t) is the ONNX graph as loaded: values with possibly
 * symbolic shapes, nodes with attributes, initializers owned by the model.
 * A session compiles a copy of it for concrete shapes: pr_value_t/pr_node_t
 * below, where every shape is known, constants are folded, fusions applied,
 * layouts chosen and every buffer placed in one arena.
 *
 * Threads: a model is read-only after load and may be shared by sessions on
 * any thread; a session is used by one thread at a time.
 */
#ifndef PR_ENGINE_GRAPH_H
#define PR_ENGINE_GRAPH_H

#include <assert.h>
#include <dnnl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "packrat/engine.h"

/* ---- model level ---- */

enum { /* ONNX AttributeProto.AttributeType */
       PR_ATTR_FLOAT = 1,
       PR_ATTR_INT = 2,
       PR_ATTR_STRING = 3,
       PR_ATTR_TENSOR = 4,
       PR_ATTR_GRAPH = 5,
       PR_ATTR_FLOATS = 6,
       PR_ATTR_INTS = 7,
       PR_ATTR_STRINGS = 8
};

typedef struct {
  char *name;
  int type;
  float f;
  int64_t i;
  char *s; /* NUL-terminated copy of the bytes; strings: n of them one after another */
  int n;   /* element count of floats/ints/strings */
  float *floats;
  int64_t *ints;
  pr_tensor_t *t;
  struct pr_model *g; /* a GRAPH attribute's body (If, Loop, Scan), owned */
} pr_attr_t;

typedef struct {
  char *name;
  pr_dtype_t dtype;
  int rank; /* -1: unknown */
  int64_t dims[PR_MAX_RANK];
  char *dim_names[PR_MAX_RANK];
  pr_tensor_t *init; /* initializer or Constant data, owned; NULL otherwise */
  bool defined;      /* loader: produced by an earlier node, an input or an initializer */
} pr_mvalue_t;

struct pr_op;

typedef struct {
  char *name;
  char *op_type;
  int n_in, n_out;
  int *in, *out; /* value indices; -1 for an omitted optional input */
  int n_attrs;
  pr_attr_t *attrs;
  const struct pr_op *op;
  /* the last n_implicit of in[] are outer-scope values its subgraphs read
   * (ONNX's implicit inputs), after the node's own inputs */
  int n_implicit;
} pr_mnode_t;

/* Weights reordered into a kernel's layout, shared by every session of the
 * model that asks for the same (node, variant, layout). */
typedef struct {
  const void *node;
  int variant;
  dnnl_memory_desc_t md;
  void *buf;
  int refs;
} pr_wcache_entry_t;

struct pr_model {
  pr_mvalue_t *values;
  int n_values;
  pr_mnode_t *nodes;
  int n_nodes;
  int *inputs, n_inputs; /* graph inputs that are not initializers */
  int *outputs, n_outputs;
  int opset;
  /* a subgraph (If/Loop/Scan body): inputs[0..n_formal) are its own graph
   * inputs, the rest values of an enclosing scope; outer_slot[j] names the
   * owning node's implicit input that inputs[n_formal + j] receives */
  int n_formal;
  int *outer_slot;
  char sha256[65];
  /* shared reordered weights; the lock guards only this cache */
  pthread_mutex_t cache_lock;
  pr_wcache_entry_t *cache;
  int n_cache, cap_cache;
};

/* ---- session level ---- */

typedef enum { PR_VAL_TEMP = 0, PR_VAL_CONST, PR_VAL_INPUT, PR_VAL_OUTPUT } pr_val_kind_t;

typedef struct {
  const char *name; /* borrowed from the model, or NULL for compiler-made values */
  pr_dtype_t dtype;
  int rank;
  int64_t dims[PR_MAX_RANK];
  pr_val_kind_t kind;
  bool is_const; /* data known at compile time */
  bool owns_data;
  void *data;  /* constant data */
  bool opaque; /* stored in a oneDNN-chosen layout (md) instead of row-major */
  dnnl_memory_desc_t md;
  size_t nbytes;
  int alias_of;     /* -1, or the value whose buffer this one shares */
  size_t alias_off; /* bytes into alias_of's buffer where this one starts */
  int producer, last_use, n_uses;
  bool is_graph_output;
  size_t offset; /* in the arena */
  void *ptr;     /* buffer during a run */
} pr_value_t;

/* Post-operations fused into a kernel (Conv): element-wise activations and a
 * residual sum. With sum, the node's last input is the addend; it is added
 * after the first sum_before activations, then the rest apply. */
#define PR_MAX_POST 4
typedef struct {
  int n_eltwise;
  dnnl_alg_kind_t alg[PR_MAX_POST];
  float alpha[PR_MAX_POST], beta[PR_MAX_POST];
  bool sum;
  int sum_before;
} pr_post_t;

/* Scaled-dot-product attention fused into one kernel (fuse.c, attention.c):
 * O = softmax(scale * Q K' + mask) V per (batch, head). Each operand is a
 * strided 4-D view of the node's input of the same index (0 Q, 1 K', 2 V,
 * 3 mask, 4 O as the output): element (b, h, i, j) at off + sum(idx * st),
 * so Split, Reshape and Transpose around the products are read through. */
typedef struct {
  int64_t B, H, Sq, Sk, D, Dv;
  int64_t off[5], st[5][4];
  float scale;
} pr_attn_t;

typedef struct pr_node {
  const struct pr_op *op;
  const pr_mnode_t *m; /* attributes and name; NULL for compiler-made nodes */
  int n_in, n_out;
  /* value indices (-1: an omitted optional input or output), in arrays made
   * by pr__node_io: any count, with room for PR_NODE_SPARE_IN more inputs
   * that fusions append */
  int *in, *out;
  bool dead;
  pr_post_t post;
  /* a BatchNormalization folded into this Conv: its node and the value
   * indices of scale, bias, mean, var */
  const pr_mnode_t *bn;
  int bn_in[4];
  /* spatial zero padding taken over from a fused Pad (begin..., end...) */
  bool pad_fused;
  int64_t pad_add[6];
  pr_attn_t attn;
  double flops;  /* multiply-adds x 2 of one run, set by prepare */
  char impl[48]; /* the oneDNN kernel that runs it (its first primitive's), "" if none */
  /* Concat whose inputs are contiguous byte ranges of its output (set by its
   * prepare): input k at slice_off[k]; the memory plan makes such inputs
   * views of the output, so their producers write in place (state-owned) */
  const size_t *slice_off;
  void *state;
} pr_node_t;

typedef struct pr_compile {
  pr_model_t *model;
  /* values; while `values_fixed` (the prepare pass, where ops hold value
   * pointers across pr__require_md/plain) the array never moves: it was
   * reserved for every reorder that pass can add */
  pr_value_t *v;
  int n_values, cap_values;
  bool values_fixed;
  pr_node_t *nodes;
  int n_nodes, cap_nodes;
  /* every node's in/out arrays (pr__node_io), freed with the session */
  int **io;
  int n_io, cap_io;
  /* the prepare pass (compile.c) builds the new node list here, reorders
   * included; plain_of maps an opaque value to its row-major copy (-1) */
  struct {
    pr_node_t *nodes;
    int n, cap;
    int *plain_of;
  } build;
  int threads;
  int opset;
  size_t max_bytes;
  bool fixed_inputs; /* some graph inputs were fixed at compile time (input_values) */
  int conv_block;    /* channel block of conv activations (16, 8), 0: the kernel's choice */
  bool concat_views; /* the memory plan may lay Concat inputs in their output (fusion on) */
  bool bf16;         /* convolutions and linear MatMuls take bf16 weights and activations */
  /* an op refused because a value it needs is known only at run time
   * (pr__need_values): the session takes the dynamic path (session.c) */
  bool needs_values;
  dnnl_engine_t engine;
  char *err;
  size_t err_len;
} pr_compile_t;

typedef struct {
  pr_value_t *v;
  int threads;
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  /* a kernel's refusal of its run's data (an index out of range): the
   * first one, which ends the run (pr__run_fail); PR_OK while none */
  pr_status_t status;
  char err[320];
} pr_exec_t;

/* An operator implementation. */
typedef struct pr_op {
  const char *name;
  const char *attrs; /* comma-separated attribute names it understands */
  int min_opset;     /* lowest opset version whose semantics it implements */
  int max_inputs;
  /* load time: validate attributes and inputs of m (NULL when fine). */
  pr_status_t (*check)(const pr_mnode_t *m, int opset, char *err, size_t len);
  /* compile: set dtype and shape of every output from the inputs. */
  pr_status_t (*infer)(pr_compile_t *c, pr_node_t *n);
  /* compile, after shapes and fusions: create kernel state, choose output
   * layouts (only ops with accepts_opaque see opaque inputs). */
  pr_status_t (*prepare)(pr_compile_t *c, pr_node_t *n);
  void (*run)(pr_exec_t *x, pr_node_t *n);
  void (*destroy)(void *state);
  bool accepts_opaque;
  bool view;           /* output 0 is input 0's bytes under a new shape */
  bool inplace;        /* output 0 may share input 0's buffer */
  bool first_optional; /* input 0 may be omitted (Loop's M, Scan-8's sequence_lens) */
} pr_op_t;

/* Shared weight cache of a model (thread-safe). get: the buffer for (node,
 * variant, md) with a reference taken, or NULL. put: insert buf (owned by the
 * cache from now on) and take a reference; when another session inserted the
 * same key first, buf is freed and the existing buffer returned. */
void *pr__wcache_get(pr_model_t *m, const void *node, int variant, const dnnl_memory_desc_t *md);
void *pr__wcache_put(pr_model_t *m, const void *node, int variant, const dnnl_memory_desc_t *md,
                     void *buf);
void pr__wcache_release(pr_model_t *m, void *buf);

/* Registry. */
const pr_op_t *pr__op_find(const char *name);
/* Internal op that converts an opaque value to row-major. */
extern const pr_op_t pr__op_reorder;

/* Attribute access on a node (m may be NULL: defaults). */
const pr_attr_t *pr__attr_find(const pr_mnode_t *m, const char *name);
int64_t pr__attr_int(const pr_mnode_t *m, const char *name, int64_t def);
float pr__attr_float(const pr_mnode_t *m, const char *name, float def);
const char *pr__attr_string(const pr_mnode_t *m, const char *name, const char *def);
/* ints attribute: returns count (0 when absent) and sets *vals. */
int pr__attr_ints(const pr_mnode_t *m, const char *name, const int64_t **vals);
int pr__attr_floats(const pr_mnode_t *m, const char *name, const float **vals);
/* String k of a strings attribute, or NULL when out of range or not strings. */
const char *pr__attr_strings_at(const pr_attr_t *a, int k);

/* Compile helpers (compile.c). pr__in/pr__out: value k of n, NULL when absent
 * (compile time); pr__xin/pr__xout: its buffer in a run, for a k the op
 * requires (called once per kernel run, never per element). */
pr_status_t pr__fail(pr_compile_t *c, const pr_node_t *n, pr_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* pr__fail for an op that needs the data of an input known only at run
 * time (a shape, k, a condition, a subgraph's inputs): marks c so that the
 * session runs on its dynamic path, where every value is known. */
pr_status_t pr__need_values(pr_compile_t *c, const pr_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A kernel refuses the data of its run (an index out of range, which ONNX
 * leaves undefined and ONNX Runtime refuses): records st and "node 'NAME'
 * (Op): message" in x, unless a failure is recorded already; the session
 * stops after the node and its run returns st and the message (no output
 * of the run is read then: the kernel may leave its outputs unwritten).
 * Not for a parallel region's threads: kernels check their inputs before
 * their loops. */
void pr__run_fail(pr_exec_t *x, const pr_node_t *n, pr_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fusions append at most this many inputs to a node (a conv's bias slot
 * and its residual addend). */
#define PR_NODE_SPARE_IN 2
/* Gives n fresh in/out arrays owned by c: n_in inputs (+ PR_NODE_SPARE_IN
 * of room) and n_out outputs, copied from ins/outs (NULL: all -1). */
pr_status_t pr__node_io(pr_compile_t *c, pr_node_t *n, int n_in, const int *ins, int n_out,
                        const int *outs);
static inline pr_value_t *pr__in(pr_compile_t *c, const pr_node_t *n, int k) {
  assert(k >= 0 && (k >= n->n_in || n->in[k] < c->n_values));
  return (k < n->n_in && n->in[k] >= 0) ? &c->v[n->in[k]] : NULL;
}
static inline pr_value_t *pr__out(pr_compile_t *c, const pr_node_t *n, int k) {
  assert(k >= 0 && (k >= n->n_out || n->out[k] < c->n_values));
  return (k < n->n_out && n->out[k] >= 0) ? &c->v[n->out[k]] : NULL;
}
static inline void *pr__xin(pr_exec_t *x, const pr_node_t *n, int k) {
  assert(k >= 0 && k < n->n_in && n->in[k] >= 0);
  return x->v[n->in[k]].ptr;
}
static inline void *pr__xout(pr_exec_t *x, const pr_node_t *n, int k) {
  assert(k >= 0 && k < n->n_out && n->out[k] >= 0);
  return x->v[n->out[k]].ptr;
}
int64_t pr__value_numel(const pr_value_t *v);
void pr__value_set_shape(pr_value_t *v, pr_dtype_t dtype, int rank, const int64_t *dims);
/* Read a constant int64/int32 1-D input into vals (at most max); returns count or -1. */
int pr__const_ints(const pr_value_t *v, int64_t *vals, int max);
/* Row-major oneDNN descriptor of a float value. */
pr_status_t pr__plain_md(const pr_value_t *v, dnnl_memory_desc_t *md);
/* Add a value / node to the compile graph; returns its index or -1. */
int pr__compile_add_value(pr_compile_t *c);
/* During prepare: make input k of n row-major (or of layout md), inserting a
 * reorder node before n when needed; rewires n->in[k]. */
pr_status_t pr__require_plain(pr_compile_t *c, pr_node_t *n, int k);
pr_status_t pr__require_md(pr_compile_t *c, pr_node_t *n, int k, const dnnl_memory_desc_t *md);
const char *pr__node_name(const pr_node_t *n);
const char *pr__mnode_name(const pr_mnode_t *m);

#define PR_DNNL(c, n, call)                                                            \
  do {                                                                                 \
    dnnl_status_t st_ = (call);                                                        \
    if (st_ != dnnl_success)                                                           \
      return pr__fail((c), (n), PR_ERR_INTERNAL, "oneDNN %s failed (%d)", #call, st_); \
  } while (0)

#endif
