/* Measures one core's peak fp32 FMA rate (GFLOP/s): independent FMA chains
 * on the widest vectors the CPU has (AVX-512, else AVX2), or on 256-bit
 * vectors when ONEDNN_MAX_CPU_ISA=AVX2 holds the engine to AVX2 (the same one
 * setting: the AVX2 peak of an AVX-512 machine). The result is the
 * denominator of the "fraction of peak" columns in docs/benchmarks.md. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

/* independent accumulators: enough to cover the FMA latency on every port,
 * few enough to stay in registers (AVX2 has 16 ymm registers, and the two
 * multiplicands take two of them: 16 chains there spilled and measured 57%) */
#define CHAINS 16
#define CHAINS256 12

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((target("avx512f"))) static double run512(long iters) {
  __m512 acc[CHAINS];
  __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
  double t0 = now();
  for (long n = 0; n < iters; n++)
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  double t = now() - t0;
  float sink = 0;
  for (int i = 0; i < CHAINS; i++) sink += _mm512_reduce_add_ps(acc[i]);
  if (sink == 12345.f) printf(" ");
  return (double)iters * CHAINS * 16 * 2 / t / 1e9;
}

__attribute__((target("avx2,fma"))) static double run256(long iters) {
  __m256 acc[CHAINS256];
  __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < CHAINS256; i++) acc[i] = _mm256_set1_ps((float)i);
  double t0 = now();
  for (long n = 0; n < iters; n++)
    for (int i = 0; i < CHAINS256; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  double t = now() - t0;
  float sink = 0, tmp[8];
  for (int i = 0; i < CHAINS256; i++) {
    _mm256_storeu_ps(tmp, acc[i]);
    for (int j = 0; j < 8; j++) sink += tmp[j];
  }
  if (sink == 12345.f) printf(" ");
  return (double)iters * CHAINS256 * 8 * 2 / t / 1e9;
}

int main(void) {
  __builtin_cpu_init();
  const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
  int avx512 = __builtin_cpu_supports("avx512f") && !(cap && !strcasecmp(cap, "AVX2"));
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double g = avx512 ? run512(20000000) : run256(20000000);
    if (g > best) best = g;
  }
  printf("{\"isa\": \"%s\", \"peak_gflops_per_core\": %.1f}\n", avx512 ? "avx512" : "avx2", best);
  return 0;
}
