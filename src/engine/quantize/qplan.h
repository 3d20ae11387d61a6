/* What the quantizer quantizes (qplan.c): the nodes that the engine's QDQ
 * folding (fuse_qdq.c) turns into int8 kernels, and the activations around
 * them whose ranges calibration must measure.
 *
 * Notes on the design:
 * - A node is quantized when the folding can take it: Conv with constant
 *   float weights (per output channel, axis 0) and an optional constant
 *   bias; MatMul with a constant 2-D B (per column, axis 1); Gemm with a
 *   constant B, transA 0 and alpha 1 (axis 0 when transB, else 1); Add of
 *   two activations of one shape (checked on the calibration run:
 *   pr__qz_plan_settle). Its activation inputs are quantized, and its output
 *   where the folded kernel ends: after a MatMul's bias Add (an Add of a
 *   constant of N values, its only reader) and then after a Relu that is
 *   the only reader, as fuse_qdq.c matches. A graph output stays float.
 * - A quantized tensor gets one QuantizeLinear/DequantizeLinear pair, read
 *   by every node that read the tensor, quantized or not (so the float
 *   nodes between two int8 kernels see the values the kernels see).
 * - `observe` tensors are measured but not quantized: the inputs of
 *   Softmax/LogSoftmax/Hardmax, whose rank the opset upgrade needs. */
#ifndef PR_ENGINE_QUANTIZE_QPLAN_H
#define PR_ENGINE_QUANTIZE_QPLAN_H

#include "engine/quantize/calib.h"
#include "engine/quantize/qgraph.h"

typedef enum { PR_QZ_CONV, PR_QZ_MATMUL, PR_QZ_GEMM, PR_QZ_ADD, PR_QZ_KINDS } pr_qz_kind_t;

typedef struct {
  int node; /* index in the graph's node list */
  pr_qz_kind_t kind;
  int act[2];      /* tensor entries of the activation inputs (Add: both; else act[1] -1) */
  int w_input;     /* input index of the weights (-1 for Add) */
  int w_axis;      /* their channel axis */
  int bias_input;  /* input index of a bias to store as int32, -1 */
  int out;         /* tensor entry of the output, -1: stays float */
  bool dropped;    /* left float after calibration (pr__qz_plan_settle) */
  bool kept_float; /* left float by the accuracy search (qsearch.h) */
} pr_qz_op_t;

typedef struct {
  char *name;       /* owned */
  bool graph_input; /* its values come from the calibration input itself */
  bool observe;     /* measured for its rank only */
  int refs;         /* quantized ops that read or write it */
  pr_qz_range_t range;
  bool seen;
  int rank;
  int64_t dims[PR_MAX_RANK]; /* of the last calibration run */
} pr_qz_tensor_t;

typedef struct {
  unsigned kinds;             /* bit (1 << kind) per kind to quantize */
  const char *const *exclude; /* node names left float */
  int n_exclude;
  bool want_softmax_ranks; /* observe Softmax inputs (opset < 13) */
  bool dynamic;            /* for pr__qz_write_dynamic: a MatMul whose output
                              is a graph output (or ends no kernel) counts too */
} pr_qz_plan_options_t;

typedef struct {
  pr_qz_op_t *ops;
  int n_ops;
  pr_qz_tensor_t *t;
  int n_t;
  pr_names_t by_name; /* tensor name -> entry */
} pr_qz_plan_t;

/* The plan for the indexed graph. An excluded name that names no node is
 * PR_ERR_NOT_FOUND; a graph with nothing to quantize is PR_ERR_INVALID;
 * both with a message. */
pr_status_t pr__qz_plan_make(const pr_qz_index_t *ix, const pr_qz_plan_options_t *opt,
                             pr_qz_plan_t *plan, char *err, size_t err_len);
void pr__qz_plan_free(pr_qz_plan_t *plan);
/* The entry of tensor `name`, -1. */
int pr__qz_plan_find(const pr_qz_plan_t *plan, const char *name);
/* After calibration: drops the Adds whose inputs and output differ in
 * shape and MatMuls whose input has rank < 2 (and each tensor no op needs
 * any more); the number of ops left. */
int pr__qz_plan_settle(pr_qz_plan_t *plan);
/* Whether op is written in int8: neither dropped nor kept float. */
static inline bool pr__qz_op_live(const pr_qz_op_t *op) {
  return !op->dropped && !op->kept_float;
}
/* Recounts each tensor's refs from the live ops (after kept_float flags
 * change): a tensor no live op reads or writes is not quantized. */
void pr__qz_plan_recount(pr_qz_plan_t *plan);
/* Counts of the ops left per kind (PR_QZ_KINDS entries). */
void pr__qz_plan_counts(const pr_qz_plan_t *plan, int *counts);

#endif
