/* The quantizer's view of an ONNX graph (qgraph.c): a name index over a
 * GraphProto (who produces each value, how many nodes read it, which values
 * are constant), and the protobuf-c builders the rewrite passes use.
 *
 * Notes on the design:
 * - The graph is the unpacked ModelProto itself, edited in place. Every
 *   string, array and message added to it is malloc'd and owned by it
 *   alone, so onnx__model_proto__free_unpacked (default allocator: free)
 *   releases the edits with the rest.
 * - The index is a snapshot: a pass that adds or removes nodes rebuilds it
 *   (pr__qz_index_build) before it reads it again. */
#ifndef PR_ENGINE_QUANTIZE_QGRAPH_H
#define PR_ENGINE_QUANTIZE_QGRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/names.h"
#include "onnx.pb-c.h"
#include "packrat/engine.h"

typedef struct {
  Onnx__GraphProto *g;
  pr_names_t ids;  /* value name -> id (borrowed names of g) */
  int n;           /* values */
  int *producer;   /* node index, -1: graph input or initializer */
  int *uses;       /* node inputs that read it */
  int *consumer;   /* the last node that reads it (meaningful when uses == 1) */
  int *init;       /* initializer index, -1 */
  bool *is_const;  /* an initializer or a Constant node's output */
  bool *is_output; /* a graph output */
  bool *is_input;  /* a graph input (not an initializer) */
} pr_qz_index_t;

/* Builds the index of g; PR_ERR_NOMEM. */
pr_status_t pr__qz_index_build(pr_qz_index_t *ix, Onnx__GraphProto *g);
void pr__qz_index_free(pr_qz_index_t *ix);
/* Points every node input that reads an Identity of a constant (PyTorch
 * exports share equal biases that way) at the constant itself, so that the
 * weights and biases of the nodes to quantize are constants the planner
 * sees; the Identity nodes are left, unread. PR_ERR_NOMEM leaves g as it
 * was. */
pr_status_t pr__qz_bypass_identity(Onnx__GraphProto *g);
/* The id of a value name, -1 when the graph has none. */
int pr__qz_id(const pr_qz_index_t *ix, const char *name);

/* The TensorProto of constant `name` (an initializer, or the `value` of a
 * Constant node), NULL when it is neither. Borrowed from the graph. */
Onnx__TensorProto *pr__qz_const_proto(const pr_qz_index_t *ix, const char *name);
/* Constant `name` decoded as FLOAT (free with pr_engine_tensor_free and
 * free); PR_ERR_NOT_FOUND when it is no constant, PR_ERR_UNSUPPORTED when
 * it is not FLOAT. */
pr_status_t pr__qz_const_float(const pr_qz_index_t *ix, const char *name, const char *base_dir,
                               pr_tensor_t **out, char *err, size_t err_len);

/* Node attributes: the one named, or NULL; its value or def. */
const Onnx__AttributeProto *pr__qz_attr(const Onnx__NodeProto *n, const char *name);
int64_t pr__qz_attr_int(const Onnx__NodeProto *n, const char *name, int64_t def);
float pr__qz_attr_float(const Onnx__NodeProto *n, const char *name, float def);
/* A node's name for messages and --exclude: its name, else its first output. */
const char *pr__qz_node_name(const Onnx__NodeProto *n);

/* ---- builders (every result malloc'd; NULL when out of memory) ---- */

/* Appends node to the growing node list (*list, *n of *cap); PR_ERR_NOMEM
 * leaves the list as it was and the node the caller's. */
pr_status_t pr__qz_list_push(Onnx__NodeProto ***list, size_t *n, size_t *cap,
                             Onnx__NodeProto *node);

/* A node op(in...) -> out... ; n_in entries of in may be "" (absent). */
Onnx__NodeProto *pr__qz_node_new(const char *op, const char *name, int n_in, const char *const *in,
                                 int n_out, const char *const *out);
/* Adds an INT attribute; PR_ERR_NOMEM. */
pr_status_t pr__qz_node_set_int(Onnx__NodeProto *n, const char *name, int64_t v);
/* Replaces input k's name (the old one freed); PR_ERR_NOMEM. */
pr_status_t pr__qz_node_set_input(Onnx__NodeProto *n, int k, const char *name);
/* Appends an input; PR_ERR_NOMEM. */
pr_status_t pr__qz_node_add_input(Onnx__NodeProto *n, const char *name);
/* Removes attribute `name` when present. */
void pr__qz_node_drop_attr(Onnx__NodeProto *n, const char *name);
/* A tensor of dtype and dims holding nbytes of data as raw_data. */
Onnx__TensorProto *pr__qz_tensor_new(const char *name, pr_dtype_t dtype, int rank,
                                     const int64_t *dims, const void *data, size_t nbytes);
/* Appends an initializer (taken over by g); PR_ERR_NOMEM (t then freed). */
pr_status_t pr__qz_add_init(Onnx__GraphProto *g, Onnx__TensorProto *t);
/* A graph output `name` of element type elem (0: no type). */
Onnx__ValueInfoProto *pr__qz_value_info_new(const char *name, int elem);

/* "<base><suffix>" malloc'd (NULL when out of memory). */
char *pr__qz_name(const char *base, const char *suffix);

#endif
