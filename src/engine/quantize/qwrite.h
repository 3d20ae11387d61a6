/* The QDQ rewrite (qwrite.c) and the opset upgrade it needs (opset.c).
 *
 * Notes on the design:
 * - QDQ needs opset 13 (DequantizeLinear per axis). A model of opset 9 to
 *   12 is raised to 13 first, each node whose operator changed meaning in
 *   between rewritten into its opset-13 form (attributes that became
 *   inputs: Clip, Slice, Pad, TopK, Squeeze, Unsqueeze, ReduceSum, Split;
 *   Softmax, LogSoftmax and Hardmax kept only when their axis is the last,
 *   where the old and new meanings agree; Upsample, Scatter and opset 10's
 *   Resize refused). Every other operator of those opsets computes the same
 *   at 13. */
#ifndef PR_ENGINE_QUANTIZE_QWRITE_H
#define PR_ENGINE_QUANTIZE_QWRITE_H

#include "engine/quantize/qplan.h"

#define PR_QZ_OPSET 13

typedef struct {
  pr_dtype_t act_type;  /* UINT8 or INT8 */
  double percentile;    /* 100: min-max */
  const char *base_dir; /* the model's folder (external data) */
  int w_max;            /* weights in [-w_max, w_max]: 127, or 64 (reduce_range) */
} pr_qz_write_options_t;

/* Folds each BatchNormalization (inference mode, constant parameters) that
 * is the only reader of a Conv's output into the Conv's weights and bias
 * (fold_bn.c); *folded: how many. Only PR_ERR_NOMEM. */
pr_status_t pr__qz_fold_bn(Onnx__GraphProto *g, const char *base_dir, int *folded);

/* The model's default-domain opset (0 when it imports none). */
int pr__qz_opset(const Onnx__ModelProto *mp);

/* Raises the model to opset 13 when it is lower (qwrite.h's notes); plan's
 * observed tensors give the Softmax ranks. PR_ERR_UNSUPPORTED with a
 * message naming the node when one has no opset-13 form. */
pr_status_t pr__qz_opset_upgrade(Onnx__ModelProto *mp, const pr_qz_plan_t *plan, char *err,
                                 size_t err_len);

/* Rewrites the graph of mp in QDQ form: each quantized tensor of the plan
 * behind a QuantizeLinear/DequantizeLinear pair with the scale and zero
 * point of its measured range, the weights of each op as int8 per channel
 * behind a DequantizeLinear (a bias as int32), constants no node reads any
 * more removed, and every tensor's external data read in (the model is
 * written elsewhere, its data files are not). Node indices of the plan must be those of mp's graph.
 */
pr_status_t pr__qz_write_qdq(Onnx__ModelProto *mp, const pr_qz_plan_t *plan,
                             const pr_qz_write_options_t *o, char *err, size_t err_len);

/* Rewrites each live MatMul op of the plan (constant 2-D weights) in the
 * dynamic form ONNX Runtime's quantize_dynamic writes (qdynamic.c): its
 * input through a DynamicQuantizeLinear (one per input tensor, u8, scale
 * and zero point computed at run time), MatMulInteger with int8 weights
 * (symmetric per column, zero point 0), the int32 product Cast to float
 * and multiplied by x_scale * w_scale[column]. Unused constants pruned and
 * external data inlined as pr__qz_write_qdq. *n_dynamic: the
 * DynamicQuantizeLinear nodes. PR_ERR_UNSUPPORTED below opset 11. */
pr_status_t pr__qz_write_dynamic(Onnx__ModelProto *mp, const pr_qz_plan_t *plan,
                                 const char *base_dir, int w_max, int *n_dynamic, char *err,
                                 size_t err_len);

/* Drops the Constant nodes and initializers that nothing reads any more
 * (the float weights that int8 ones replaced); PR_ERR_NOMEM. */
pr_status_t pr__qz_prune(Onnx__GraphProto *g);
/* Every tensor of g (initializers, Constant values) with its external data
 * read inline (from base_dir). */
pr_status_t pr__qz_inline_all(Onnx__GraphProto *g, const char *base_dir, char *err, size_t err_len);

#endif
