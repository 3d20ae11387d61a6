/* Subgraphs (the bodies of If, Loop and Scan) run by their node: once per
 * branch taken or iteration, each as a session of the body with every input
 * fixed, so that every node of the body folds and every shape is known
 * (session.c's dynamic path, one level down). */
#ifndef PR_ENGINE_SUBGRAPH_H
#define PR_ENGINE_SUBGRAPH_H

#include "engine/graph.h"

/* Tensors a node computed in infer (the whole result, which decides the
 * shapes), copied to its outputs by pr__results_run; the node's state. */
typedef struct {
  int n;
  pr_tensor_t *t; /* owned, [n] */
} pr_results_t;

/* A result of n tensors, all empty (NULL data); NULL when out of memory. */
pr_results_t *pr__results_new(int n);
void pr__results_destroy(void *state);
/* Sets output k's shape from result k (every output the node has). */
void pr__results_shapes(pr_compile_t *c, pr_node_t *n, const pr_results_t *r);
/* run of a node whose state is a pr_results_t. */
void pr__results_run(pr_exec_t *x, pr_node_t *n);

/* A view of compile value v (constant: its data) as a tensor. */
pr_tensor_t pr__value_tensor(const pr_value_t *v);
/* A tensor of t's type and shape holding a copy of its bytes (into *out). */
pr_status_t pr__tensor_copy(const pr_tensor_t *t, pr_tensor_t *out);

/* The values of node n that the body's outer-scope inputs receive, written
 * to in[body->n_formal ...] (views; n's inputs must be constant). */
void pr__subgraph_outer(pr_compile_t *c, const pr_node_t *n, const pr_model_t *body,
                        pr_tensor_t *in);

/* Runs body on in[0..body->n_inputs) (its own inputs, then the outer
 * ones): out[0..body->n_outputs) get copies the caller frees
 * (pr_engine_tensor_free). Errors name node n. */
pr_status_t pr__subgraph_run(pr_compile_t *c, const pr_node_t *n, pr_model_t *body,
                             const pr_tensor_t *in, pr_tensor_t *out);

#endif
