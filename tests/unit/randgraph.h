/* Random graphs for differential checking of the compiler (fusions,
 * layouts, memory plan): rg_generate draws an ONNX model from the patterns
 * src/engine/fuse.c rewrites and from the layout and buffer machinery
 * around them; rg_check runs it fused and unfused and compares.
 *
 * A graph is a pure function of its byte source: the bytes of a fuzz input
 * (tests/fuzz/fuzz_randgraph.c) or a seeded generator (test_randgraph.c),
 * so the same source always gives the same graph, sizes, batch and thread
 * counts. */
#ifndef PR_TEST_RANDGRAPH_H
#define PR_TEST_RANDGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model_builder.h"

/* Where the choices come from: data[0..len) then zeros (fuzz bytes), or,
 * with data NULL, a 64-bit generator seeded by rg_src_seed. */
typedef struct {
  const uint8_t *data;
  size_t len, pos;
  uint64_t state;
} rg_src_t;

rg_src_t rg_src_bytes(const uint8_t *data, size_t len);
rg_src_t rg_src_seed(uint64_t seed);

/* What a graph is run with, drawn with it. */
typedef struct {
  int64_t batch;
  int threads_fused, threads_ref;
  int n_nodes;
} rg_params_t;

/* Draws a model from src (a copy: the caller's source does not advance).
 * expose_all: every value the graph computes is also a graph output (the
 * same graph otherwise). log (may be NULL) receives the node list. Never
 * NULL. */
mb_t *rg_generate(rg_src_t src, bool expose_all, rg_params_t *params, char *log, size_t log_len);

typedef enum { RG_OK, RG_SKIP, RG_FAIL } rg_verdict_t;

typedef struct {
  rg_verdict_t verdict;
  char msg[512];  /* why it failed or was skipped */
  char log[8192]; /* the graph's node list */
  bool fused;     /* the fused session runs fewer kernels than the unfused one */
  char made[256]; /* ",LayerNorm,Attention,": the fuser-made kernels that ran */
  int n_kernels;  /* in the fused session */
} rg_result_t;

/* Runs the graph of src three ways on the same inputs: fused (threads_fused
 * threads), unfused (threads_ref) and unfused with every value a graph
 * output (one thread, so that nearly nothing is fused, aliased or reused);
 * each output of the first must match the other two within rg_tolerance
 * of the output's largest magnitude (+1e-5). RG_SKIP when the unfused graph
 * does not compile (an operator refuses the drawn shapes). */
void rg_check(rg_src_t src, rg_result_t *res);

/* The unfused session's outputs of src's graph, one after another
 * (malloc'd, *n floats), or NULL when it does not compile or run: for
 * comparing the answers of processes with other instruction sets. */
float *rg_reference(rg_src_t src, size_t *n, double *tol);
/* got against ref within tol of ref's largest magnitude (+1e-5); false
 * with a message. */
bool rg_agree(const float *ref, const float *got, size_t n, double tol, char *msg, size_t len);
/* The relative tolerance for a graph of n_nodes nodes: 1e-4 (test_fuse.c's)
 * up to 32 nodes, growing with the depth beyond: rounding differences
 * between kernels compound along long chains (a fuzzed stack of seven
 * attention blocks on unnormalized inputs drifted by 1.3e-4). */
double rg_tolerance(int n_nodes);

#endif
