/* packrat's own AVX2 float matrix product with a packed constant B (see
 * sgemm.h for the blocking). */
#include "engine/ops/sgemm.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "engine/ops/fastmath.h"

#define NR PR_SGEMM_NR
#define MR PR_SGEMM_MR
#define KC PR_SGEMM_KC
#define MC PR_SGEMM_MC

static inline int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

bool pr__sgemm_isa_fits(void) {
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
  unsigned avx512 = (unsigned)dnnl_cpu_isa_avx512_core, avx2 = (unsigned)dnnl_cpu_isa_avx2;
  return (isa & avx512) != avx512 && (isa & avx2) == avx2;
}

bool pr__sgemm_act_supported(dnnl_alg_kind_t alg) {
  switch (alg) {
    case dnnl_eltwise_relu:
    case dnnl_eltwise_linear:
    case dnnl_eltwise_logistic:
    case dnnl_eltwise_tanh:
    case dnnl_eltwise_gelu_erf:
    case dnnl_eltwise_gelu_tanh:
    case dnnl_eltwise_swish: return true;
    default: return false;
  }
}

size_t pr__sgemm_packed_size(int64_t K, int64_t N) {
  return (size_t)((N + NR - 1) / NR) * (size_t)K * NR * sizeof(float);
}

/* Slice by slice of PR_SGEMM_KC rows of B, panel by panel: the panels of a
 * slice are one run of memory, read in order (the tiles walk them so). */
static inline size_t panel_at(int64_t K, int64_t N, int64_t k0, int64_t p) {
  int64_t npad = (N + NR - 1) / NR * NR, kc = min64(KC, K - k0);
  return (size_t)(k0 * npad + p * kc * NR);
}

void pr__sgemm_pack_b(const float *b, int64_t K, int64_t N, float *packed) {
  for (int64_t k0 = 0; k0 < K; k0 += KC)
    for (int64_t p = 0; p * NR < N; p++) {
      int64_t nc = min64(NR, N - p * NR), kc = min64(KC, K - k0);
      float *dst = packed + panel_at(K, N, k0, p);
      for (int64_t k = 0; k < kc; k++) {
        memcpy(dst + k * NR, b + (k0 + k) * N + p * NR, sizeof(float) * (size_t)nc);
        memset(dst + k * NR + nc, 0, sizeof(float) * (size_t)(NR - nc));
      }
    }
}

/* Rows m0.. of A (mc of them, columns k0..k0+kc) into strips of MR rows:
 * strip s holds, for each k, its MR rows' values (zeros past mc). */
static void pack_a(const float *a, int64_t lda, int64_t mc, int64_t kc, float *buf) {
  for (int64_t s = 0; s * MR < mc; s++) {
    float *dst = buf + s * MR * kc;
    int64_t rows = min64(MR, mc - s * MR);
    for (int64_t r = 0; r < MR; r++) {
      const float *src = a + (s * MR + r) * lda;
      if (r < rows)
        for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = src[k];
      else
        for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = 0.f;
    }
  }
}

/* The activations of the epilogue on rows x cols of C (whole row runs of a
 * row block: long loops vectorize and pipeline better than a tile's 16). */
static void apply_acts(float *c, int64_t ldc, int64_t mr, int64_t nc, const pr_sgemm_epi_t *e) {
  for (int q = 0; q < e->n_act; q++) {
    float al = e->alpha[q], be = e->beta[q];
    for (int64_t i = 0; i < mr; i++) {
      float *r = c + i * ldc;
      switch (e->alg[q]) {
        case dnnl_eltwise_relu:
          for (int64_t j = 0; j < nc; j++) r[j] = r[j] > 0.f ? r[j] : al * r[j];
          break;
        case dnnl_eltwise_linear:
          for (int64_t j = 0; j < nc; j++) r[j] = al * r[j] + be;
          break;
        case dnnl_eltwise_logistic:
          for (int64_t j = 0; j < nc; j++) r[j] = pr__sigmoidf(r[j]);
          break;
        case dnnl_eltwise_tanh:
          for (int64_t j = 0; j < nc; j++) r[j] = pr__tanhf(r[j]);
          break;
        case dnnl_eltwise_gelu_erf:
          for (int64_t j = 0; j < nc; j++)
            r[j] = 0.5f * r[j] * (1.f + pr__erff(r[j] * 0.70710678f));
          break;
        case dnnl_eltwise_gelu_tanh:
          for (int64_t j = 0; j < nc; j++) {
            float x = r[j];
            r[j] = 0.5f * x * (1.f + pr__tanhf(0.79788456f * (x + 0.044715f * x * x * x)));
          }
          break;
        case dnnl_eltwise_swish:
          for (int64_t j = 0; j < nc; j++) r[j] = r[j] * pr__sigmoidf(al * r[j]);
          break;
        default: break; /* refused by pr__sgemm_act_supported */
      }
    }
  }
}

/* The 6 x 16 product of a strip and a panel over kc, into t (6 x 16): twelve
 * named accumulators, so that they stay in registers. */
#define FMA_ROW(r, c0, c1)            \
  av = _mm256_broadcast_ss(pa + (r)); \
  c0 = _mm256_fmadd_ps(av, b0, c0);   \
  c1 = _mm256_fmadd_ps(av, b1, c1)
static void kernel6(int64_t kc, const float *restrict pa, const float *restrict pb,
                    float *restrict t) {
  __m256 z = _mm256_setzero_ps();
  __m256 a0 = z, a1 = z, b0_ = z, b1_ = z, c0 = z, c1 = z, d0 = z, d1 = z, e0 = z, e1 = z, f0 = z,
         f1 = z;
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_load_ps(pb), b1 = _mm256_load_ps(pb + 8), av;
    FMA_ROW(0, a0, a1);
    FMA_ROW(1, b0_, b1_);
    FMA_ROW(2, c0, c1);
    FMA_ROW(3, d0, d1);
    FMA_ROW(4, e0, e1);
    FMA_ROW(5, f0, f1);
    pa += MR;
    pb += NR;
  }
  _mm256_store_ps(t + 0, a0), _mm256_store_ps(t + 8, a1);
  _mm256_store_ps(t + 16, b0_), _mm256_store_ps(t + 24, b1_);
  _mm256_store_ps(t + 32, c0), _mm256_store_ps(t + 40, c1);
  _mm256_store_ps(t + 48, d0), _mm256_store_ps(t + 56, d1);
  _mm256_store_ps(t + 64, e0), _mm256_store_ps(t + 72, e1);
  _mm256_store_ps(t + 80, f0), _mm256_store_ps(t + 88, f1);
}
#undef FMA_ROW

/* One mr x nc tile of C from a strip and a panel: stored (added to C when
 * load_c) with the bias (when given). Rows past mr of the strip are zeros
 * and are dropped. */
static void tile(int mr, int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc,
                 int nc, bool load_c, const float *bias) {
  float t[MR * NR] __attribute__((aligned(32)));
  kernel6(kc, pa, pb, t);
  float bv[NR] = {0};
  if (bias) memcpy(bv, bias, sizeof(float) * (size_t)nc);
  for (int i = 0; i < mr; i++) {
    float *r = c + i * ldc, *ti = t + i * NR;
    if (nc == NR && load_c)
      for (int j = 0; j < NR; j++) r[j] += ti[j] + bv[j];
    else if (nc == NR)
      for (int j = 0; j < NR; j++) r[j] = ti[j] + bv[j];
    else
      for (int j = 0; j < nc; j++) r[j] = (load_c ? r[j] : 0.f) + ti[j] + bv[j];
  }
}

typedef struct {
  int64_t M, N, K, lda, ldc;
  const float *a, *pb;
  float *c;
  const pr_sgemm_epi_t *epi;
} job_t;

/* Rows m0..m1 and panels p0..p1 of C, every K slice. */
static void run_part(const job_t *j, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  static _Thread_local float abuf[MC * KC] __attribute__((aligned(64)));
  const pr_sgemm_epi_t *e = j->epi;
  for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
    int64_t kc = min64(KC, j->K - k0);
    bool first = k0 == 0, last = k0 + kc >= j->K;
    const pr_sgemm_epi_t *acts = last && e->n_act ? e : NULL;
    for (int64_t mb = m0; mb < m1; mb += MC) {
      int64_t mc = min64(MC, m1 - mb);
      pack_a(j->a + mb * j->lda + k0, j->lda, mc, kc, abuf);
      for (int64_t p = p0; p < p1; p++) {
        const float *pb = j->pb + panel_at(j->K, j->N, k0, p);
        int nc = (int)min64(NR, j->N - p * NR);
        const float *bias = first && e->bias ? e->bias + p * NR : NULL;
        for (int64_t i = 0; i < mc; i += MR)
          tile((int)min64(MR, mc - i), kc, abuf + i * kc, pb, j->c + (mb + i) * j->ldc + p * NR,
               j->ldc, nc, !first || e->accumulate, bias);
      }
      if (acts) /* the block's rows are final: activations while they are in cache */
        apply_acts(j->c + mb * j->ldc + p0 * NR, j->ldc, mc, min64(j->N, p1 * NR) - p0 * NR, acts);
    }
  }
}

void pr__sgemm_packed(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                      const float *packed, float *c, int64_t ldc, const pr_sgemm_epi_t *epi,
                      int threads) {
  job_t j = {M, N, K, lda, ldc, a, packed, c, epi};
  int64_t panels = (N + NR - 1) / NR, strips = (M + MR - 1) / MR;
  if (threads > panels * strips) threads = (int)(panels * strips);
  if (threads <= 1) {
    run_part(&j, 0, M, 0, panels);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (panels >= nt) {
      run_part(&j, 0, M, panels * t / nt, panels * (t + 1) / nt);
    } else {
      int64_t s0 = strips * t / nt, s1 = strips * (t + 1) / nt;
      run_part(&j, s0 * MR, min64(M, s1 * MR), 0, panels);
    }
  }
}
