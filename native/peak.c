/*
 * The CPU's FP32 peak, measured: one thread runs independent fused multiply-adds in the widest
 * vectors its variant has, enough chains in flight to cover FMA latency on every current core.
 * `magrpo doctor` reports sgemm against this instead of against a nominal clock, which turbo and
 * AVX-512 frequency offsets make wrong in both directions.
 */
#include <time.h>

#include "magrpo.h"

#if MAGRPO_X86
#include <immintrin.h>
#endif

#define CHAINS 12 /* latency 4 x 2 ports = 8 in flight needed; 12 leaves room */

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Each returns the FLOPs done; `rounds` x CHAINS FMAs of `width` lanes, 2 FLOPs per lane. */
typedef float v4sf __attribute__((vector_size(16)));
static double fma_loop_generic(long rounds) {
  v4sf acc[CHAINS];
  v4sf m = {0.999999f, 0.999999f, 0.999999f, 0.999999f}, a = {1e-7f, 1e-7f, 1e-7f, 1e-7f};
  for (int c = 0; c < CHAINS; c++) acc[c] = (v4sf){(float)c, 1, 2, 3};
  for (long r = 0; r < rounds; r++)
    for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * m + a;
  volatile float sink = 0;
  for (int c = 0; c < CHAINS; c++) sink += acc[c][0];
  (void)sink;
  return 2.0 * 4 * CHAINS * (double)rounds;
}

#if MAGRPO_X86
TARGET_avx2 static double fma_loop_avx2(long rounds) {
  __m256 acc[CHAINS];
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
  for (long r = 0; r < rounds; r++)
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
  __m256 s = acc[0];
  for (int c = 1; c < CHAINS; c++) s = _mm256_add_ps(s, acc[c]);
  volatile float sink = _mm256_cvtss_f32(s);
  (void)sink;
  return 2.0 * 8 * CHAINS * (double)rounds;
}

TARGET_avx512 static double fma_loop_avx512(long rounds) {
  __m512 acc[CHAINS];
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
  for (long r = 0; r < rounds; r++)
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
  __m512 s = acc[0];
  for (int c = 1; c < CHAINS; c++) s = _mm512_add_ps(s, acc[c]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return 2.0 * 16 * CHAINS * (double)rounds;
}
#endif

/* Best of several short bursts (another process may hold the core for one of them), in GFLOP/s. */
double fma_peak_gflops(Isa isa, double seconds) {
  double (*loop)(long) = fma_loop_generic;
#if MAGRPO_X86
  if (isa == ISA_AVX2) loop = fma_loop_avx2;
  if (isa == ISA_AVX512) loop = fma_loop_avx512;
#endif
  loop(1 << 16); /* wake the vector unit (and its clock) before timing */
  const long rounds = 1 << 20;
  double best = 0, start = now_seconds(), end = start + (seconds > 0 ? seconds : 0.1);
  do {
    double t0 = now_seconds();
    double flops = loop(rounds);
    double dt = now_seconds() - t0;
    if (dt > 0 && flops / dt > best) best = flops / dt;
  } while (now_seconds() < end);
  return best * 1e-9;
}
