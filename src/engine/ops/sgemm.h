/* packrat's own float matrix product for AVX2 + FMA: C = A B with B a
 * constant matrix packed once (panels of 16 columns), for the linear MatMul
 * on CPUs where oneDNN 2.6 has no AVX-512 kernels (its AVX2 matmul ran BERT
 * at 65% of the AVX2 peak, ONNX Runtime's at 76%).
 *
 * Blocking: K in slices of PR_SGEMM_KC; A in blocks of PR_SGEMM_MC rows,
 * copied into 6-row strips; a 6 x 16 register tile (12 accumulators) walks a
 * 16-column panel of B (the slice of one panel stays in L1 while every strip
 * of the block passes over it). The threads split the columns (whole
 * panels), or the rows when there are fewer panels than threads.
 *
 * The epilogue: the bias on each tile as it is stored (first K slice), the
 * activations on each row block once its last K slice is stored (while it
 * is in cache). With `accumulate` the product is added to what C holds (the
 * residual sum, already copied there). */
#ifndef PR_ENGINE_OPS_SGEMM_H
#define PR_ENGINE_OPS_SGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dnnl.h>

#define PR_SGEMM_NR 16
#define PR_SGEMM_MR 6
#ifndef PR_SGEMM_KC
#define PR_SGEMM_KC 256
#endif
#ifndef PR_SGEMM_MC
#define PR_SGEMM_MC 144
#endif
#define PR_SGEMM_MAX_ACT 4

typedef struct {
  const float *bias; /* N floats, or NULL */
  bool accumulate;   /* C += A B (C holds the addend) instead of C = A B */
  int n_act;         /* activations applied in order after the sum */
  dnnl_alg_kind_t alg[PR_SGEMM_MAX_ACT];
  float alpha[PR_SGEMM_MAX_ACT], beta[PR_SGEMM_MAX_ACT];
} pr_sgemm_epi_t;

/* True where the linear MatMul takes this kernel: oneDNN runs AVX2 here but
 * no AVX-512 (the CPU, or ONEDNN_MAX_CPU_ISA=AVX2). */
bool pr__sgemm_isa_fits(void);

/* True when the activation runs in the epilogue (ReLU and leaky ReLU,
 * linear, logistic, tanh, GELU erf and tanh, swish). */
bool pr__sgemm_act_supported(dnnl_alg_kind_t alg);

/* Bytes of B (K x N, row-major) packed: slices of PR_SGEMM_KC rows, each
 * ceil(N / 16) panels of 16 columns. */
size_t pr__sgemm_packed_size(int64_t K, int64_t N);
/* Packs B into `packed` (pr__sgemm_packed_size bytes, 32-byte aligned); the
 * columns past N are zeros. */
void pr__sgemm_pack_b(const float *b, int64_t K, int64_t N, float *packed);
/* C (M x N, row stride ldc) = A (M x K, row stride lda) times the packed B,
 * with the epilogue, on `threads` OpenMP threads. */
void pr__sgemm_packed(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                      const float *packed, float *c, int64_t ldc, const pr_sgemm_epi_t *epi,
                      int threads);

#endif
