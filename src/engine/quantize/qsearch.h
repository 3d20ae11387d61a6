/* The accuracy search (qsearch.c): which of the planned nodes to leave
 * float so that the quantized model agrees with the float one on samples
 * held out of calibration.
 *
 * Notes on the design:
 * - A trial writes the QDQ model for the plan's kept_float flags from the
 *   float model's bytes (unpacked afresh: the writer edits in place),
 *   loads it from memory and runs every held-out sample; the outputs are
 *   compared with the float model's, computed once by the same runner.
 * - Agreement: the share (%) of held-out samples (one per hold_out call,
 *   whatever its batch) whose every output agrees with fp32's. ARGMAX: the
 *   index of the largest value along the last axis is the same at every
 *   position (a classifier's class). CTC: each [T, C] block of the last two
 *   axes decodes greedily (argmax per step, repeats merged, class 0 the
 *   blank) to the same labels (a text recognizer's string). RANGE:
 *   max |int8 - fp32| <= tolerance * (max - min of the fp32 output over
 *   every held-out sample). An output that is not FLOAT must be equal.
 * - Search: every live op in int8 first (done when it agrees). Else each
 *   op's sensitivity: the output error with that op alone in int8 (sum of
 *   squared differences over the fp32 outputs' sum of squared deviations
 *   from their mean: noise to signal, summed over the FLOAT outputs; on the
 *   first PR_QZ_RANK_SAMPLES held-out samples). The
 *   fewest most sensitive ops to keep float is found by binary search on
 *   their count (agreement taken to grow with it), then each of them, least
 *   sensitive first, goes back to int8 when the target still holds. So no
 *   single float node of the result can go back to int8 without missing the
 *   target: locally minimal (the global minimum would take 2^n trials).
 *   Trials: 1 + n + log2(n) + k - 1 for n live ops, k of them float after
 *   the binary search. */
#ifndef PR_ENGINE_QUANTIZE_QSEARCH_H
#define PR_ENGINE_QUANTIZE_QSEARCH_H

/* Held-out samples the ranking trials run (the first ones): the noise
 * score is continuous, a few samples rank as well as many. */
#define PR_QZ_RANK_SAMPLES 16

#include "engine/quantize/qwrite.h"
#include "packrat/quantize.h"

typedef struct {
  pr_tensor_t *in; /* n * n_in tensors, data owned */
  int n, cap, n_in;
} pr_qz_holdout_t;

/* Copies one sample (n_in tensors) into h; PR_ERR_NOMEM. */
pr_status_t pr__qz_holdout_add(pr_qz_holdout_t *h, const pr_tensor_t *in, int n_in);
void pr__qz_holdout_free(pr_qz_holdout_t *h);

typedef struct {
  pr_quantize_metric_t metric;
  double tolerance; /* RANGE: of each output's fp32 range */
  double target;    /* % of held-out samples that must agree */
  int threads;
  const char *base_dir;
  pr_qz_write_options_t write;
} pr_qz_search_options_t;

typedef struct {
  int trials;
  double agreement;          /* % of the chosen plan */
  double agreement_all_int8; /* % with every live op in int8 */
} pr_qz_search_result_t;

/* Sets the kept_float flags of plan's live ops (plan settled) so that the
 * model written from float_model (the bytes of the graph the plan indexes)
 * reaches o->target on h. PR_ERR_INVALID with a message when no sample is
 * held out or only every op float reaches the target; errors of the
 * writer, of loading and of running as theirs. */
pr_status_t pr__qz_search(const uint8_t *float_model, size_t len, pr_qz_plan_t *plan,
                          const pr_qz_holdout_t *h, const pr_qz_search_options_t *o,
                          pr_qz_search_result_t *r, char *err, size_t err_len);

#endif
