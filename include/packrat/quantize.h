/* packrat quantizer: a float32 ONNX model and calibration inputs in, a QDQ
 * model out (QuantizeLinear/DequantizeLinear pairs, the form ONNX Runtime's
 * quantizer writes and both engines run).
 *
 *   pr_quantizer_t *q;
 *   pr_engine_quantizer_create("model.onnx", &opt, &q, err, sizeof err);
 *   for (int pass = 0; pass < pr_engine_quantizer_passes(q); pass++)
 *     for (each calibration sample)
 *       pr_engine_quantizer_observe(q, pass, inputs, n_inputs, err, sizeof err);
 *   pr_engine_quantizer_write(q, "model.int8.onnx", &report, err, sizeof err);
 *   pr_engine_quantizer_destroy(q);
 *
 * What is quantized: the nodes that the engine folds into int8 kernels
 * (Conv, MatMul and Gemm with constant weights, Add of two activations),
 * with their weights int8 symmetric per output channel, a bias int32, and
 * the activations they read and write per tensor, asymmetric, uint8 by
 * default (oneDNN's int8 kernels take u8 sources natively; s8 ones cost a
 * compensation pass) or int8. Calibration runs the float model through the
 * engine with every such activation as an extra output and keeps each
 * one's range: min-max, percentiles of a histogram or the KL-divergence
 * (entropy) threshold of one (a second pass over the same samples). With fold_batchnorm, a
 * BatchNormalization after a Conv is folded into the Conv first (so that the Conv runs in int8 too;
 * measured on PaddleOCR's recognizer it cost accuracy, hence off by
 * default). Models of opsets 9 to 12 are raised to 13 (per-axis
 * DequantizeLinear needs it).
 *
 * Accuracy search: with options.accuracy > 0, samples given to
 * pr_engine_quantizer_hold_out (not used for ranges) check the written
 * model: write() leaves float the fewest planned nodes it finds (ranked by
 * their sensitivity, each alone in int8) so that at least `accuracy` % of
 * the held-out samples agree with the float model's outputs by `metric`
 * (engine/quantize/qsearch.h has the search and the metrics). */
#ifndef PACKRAT_QUANTIZE_H
#define PACKRAT_QUANTIZE_H

#include "packrat/engine.h"

#pragma GCC visibility push(default) /* the public API: exported */

#ifdef __cplusplus
extern "C" {
#endif

/* MINMAX: the range seen. PERCENTILE: `percentile` % of the values kept at
 * each end. ENTROPY: TensorRT's KL-divergence threshold T over a histogram
 * of |x| (engine/quantize/calib.h), the range [-T, T] cut to [min, max].
 * The last two take a second pass over the samples. */
typedef enum {
  PR_CALIB_MINMAX = 0,
  PR_CALIB_PERCENTILE = 1,
  PR_CALIB_ENTROPY = 2
} pr_calib_method_t;

/* When a held-out sample's outputs agree with fp32's (the accuracy
 * search). RANGE: each output's max |int8 - fp32| is at most `tolerance`
 * times the output's fp32 range (max - min over every held-out sample).
 * ARGMAX: each output's argmax along its last axis is the same at every
 * position (a classifier's class). CTC: each output's [T, C] blocks (its
 * last two axes) decode greedily to the same labels (argmax per step,
 * repeats merged, class 0 the blank: a text recognizer reads the same
 * string). Outputs that are not FLOAT must be equal whatever the metric. */
typedef enum {
  PR_QUANT_METRIC_RANGE = 0,
  PR_QUANT_METRIC_ARGMAX = 1,
  PR_QUANT_METRIC_CTC = 2
} pr_quantize_metric_t;

/* Operator kinds to quantize (bits of pr_quantize_options_t.ops). */
enum {
  PR_QUANT_CONV = 1 << 0,
  PR_QUANT_MATMUL = 1 << 1,
  PR_QUANT_GEMM = 1 << 2,
  PR_QUANT_ADD = 1 << 3,
  PR_QUANT_ALL = 0xf,
};

/* activation_type: PR_DTYPE_UINT8 or PR_DTYPE_INT8. percentile: for
 * PR_CALIB_PERCENTILE, in [50, 100]. ops: PR_QUANT_* bits. exclude: names
 * of nodes left float (a node without a name goes by its first output).
 * threads: of the calibration session. fold_batchnorm: fold each
 * BatchNormalization that follows a Conv into it before quantizing.
 * accuracy: 0 (no search), or the % in (0, 100] of held-out samples that
 * must agree by metric; tolerance: RANGE's share of the range, in (0, 1].
 * dynamic: the MatMuls with constant weights only, activations quantized
 * at run time (DynamicQuantizeLinear + MatMulInteger, the form ONNX
 * Runtime's quantize_dynamic writes); no calibration (passes() is 0), no
 * accuracy search; opset 11 or more. reduce_range: weights in 7 bits
 * ([-64, 64] instead of [-127, 127], ONNX Runtime's reduce_range): CPUs
 * without VNNI (AVX2) sum u8 x s8 products in pairs in int16, which 7-bit
 * weights cannot overflow, so packrat runs oneDNN's int8 kernels there
 * (exact) instead of its plain loops. */
typedef struct {
  pr_dtype_t activation_type;
  pr_calib_method_t method;
  double percentile;
  unsigned ops;
  const char *const *exclude;
  int n_exclude;
  int threads;
  bool fold_batchnorm;
  double accuracy;
  pr_quantize_metric_t metric;
  double tolerance;
  bool dynamic;
  bool reduce_range;
} pr_quantize_options_t;

/* uint8 activations, min-max, every kind, no exclusions, 1 thread, no
 * accuracy search (RANGE, tolerance 0.02 when one is asked for). */
pr_quantize_options_t pr_quantize_options_default(void);

typedef struct pr_quantizer pr_quantizer_t;

/* Reads the model at path and plans its quantization. Errors (with a
 * message): PR_ERR_IO (unreadable), PR_ERR_INVALID (not ONNX, not float,
 * nothing to quantize, bad options), PR_ERR_NOT_FOUND (an excluded name
 * that names no node), PR_ERR_UNSUPPORTED (the engine does not run it). */
pr_status_t pr_engine_quantizer_create(const char *path, const pr_quantize_options_t *opt,
                                       pr_quantizer_t **out, char *err, size_t err_len);
void pr_engine_quantizer_destroy(pr_quantizer_t *q);

/* The model's inputs, as pr_engine_model_input. */
int pr_engine_quantizer_num_inputs(const pr_quantizer_t *q);
pr_status_t pr_engine_quantizer_input(const pr_quantizer_t *q, int i, pr_tensor_info_t *info);

/* Passes over the calibration set the method needs (1 or 2; 0 dynamic). */
int pr_engine_quantizer_passes(const pr_quantizer_t *q);

/* Runs one calibration sample (one tensor per model input, in order; a
 * batch of any size) in pass `pass` (passes in order, every sample in
 * each). PR_ERR_INVALID with a message when an input's type or shape does
 * not fit the model; errors of session create and run as theirs. */
pr_status_t pr_engine_quantizer_observe(pr_quantizer_t *q, int pass, const pr_tensor_t *inputs,
                                        int n_inputs, char *err, size_t err_len);

/* Sets one sample (as observe's) aside for the accuracy search: copied,
 * never used for ranges. PR_ERR_INVALID as observe's (and when
 * options.accuracy is 0), PR_ERR_NOMEM. */
pr_status_t pr_engine_quantizer_hold_out(pr_quantizer_t *q, const pr_tensor_t *inputs, int n_inputs,
                                         char *err, size_t err_len);

typedef struct {
  int ops[4];  /* quantized Conv, MatMul, Gemm, Add */
  int tensors; /* activations behind Q/DQ (dynamic: DynamicQuantizeLinear) */
  int from_opset, opset;
  int64_t samples; /* calibration runs of the first pass */
  int folded_bn;   /* BatchNormalizations folded into the Conv before them */
  /* the accuracy search (zero, and agreements -1, without one): */
  int held_out, trials;           /* held-out samples; models tried */
  int n_float;                    /* planned nodes it left float */
  const char *const *float_nodes; /* their names; the quantizer's, until destroy */
  double agreement;               /* % of held-out samples agreeing, as written */
  double agreement_all_int8;      /* % with every planned node in int8 */
} pr_quantize_report_t;

/* Writes the QDQ model (or the dynamic one) to path (once per quantizer; the file is replaced
 * whole or not at all) and checks that the engine loads it; with an
 * accuracy target, searches first for the nodes to leave float (many
 * trial models: slow). PR_ERR_INVALID when no sample was observed (or held
 * out, with a target), nothing is left to quantize (e.g. every Add's
 * inputs differ in shape) or only every node float meets the target, PR_ERR_UNSUPPORTED when the
 * opset upgrade meets a node it cannot carry, PR_ERR_IO. */
pr_status_t pr_engine_quantizer_write(pr_quantizer_t *q, const char *path,
                                      pr_quantize_report_t *report, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
