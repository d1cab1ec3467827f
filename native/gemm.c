/*
 * gemm: products with a few rows of A (decoding) take the kernels below, which read the big
 * operand once; everything else goes to blas_sgemm (the user's OpenBLAS, or the builtin sgemm:
 * blas.c).
 */
#include "magrpo.h"

/* ---------------------------------------------------------------------------------------------
 * Decode-time products x · Wᵀ have a handful of rows x against a weight W stored [N, K] (every
 * Llama projection, every LM head). OpenBLAS streams W at 4-8 GB/s there, a third of the memory
 * bandwidth, so rows M ≤ SKINNY_M take a kernel that reads each row of W once and dots it with
 * the rows of x, four at a time, straight from L1.
 * ------------------------------------------------------------------------------------------- */

#define SKINNY_M 8

/* out[i] = a_i · b over K for the four rows a_i, one variant per ISA, each with two accumulators
 * per row for FMA latency. The generic one uses GCC vector extensions (SSE2 on x86-64, NEON on
 * arm64). */
typedef float f32x4 __attribute__((vector_size(16)));

static inline f32x4 load4(const float *p) {
  f32x4 v;
  memcpy(&v, p, sizeof v);
  return v;
}

INLINE void dot4_generic(const float *b, const float *a0, const float *a1, const float *a2, const float *a3, int64_t K, float out[4]) {
  f32x4 s[8];
  for (int i = 0; i < 8; i++) s[i] = (f32x4){0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    f32x4 x = load4(b + k), y = load4(b + k + 4);
    s[0] += load4(a0 + k) * x, s[1] += load4(a1 + k) * x, s[2] += load4(a2 + k) * x, s[3] += load4(a3 + k) * x;
    s[4] += load4(a0 + k + 4) * y, s[5] += load4(a1 + k + 4) * y, s[6] += load4(a2 + k + 4) * y, s[7] += load4(a3 + k + 4) * y;
  }
  const float *a[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; i++) {
    f32x4 v = s[i] + s[i + 4];
    float t = (v[0] + v[2]) + (v[1] + v[3]);
    for (int64_t kk = k; kk < K; kk++) t += a[i][kk] * b[kk];
    out[i] = t;
  }
}

#if MAGRPO_X86
#include <immintrin.h>

TARGET_avx2 static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

TARGET_avx2 INLINE void dot4_avx2(const float *b, const float *a0, const float *a1, const float *a2, const float *a3, int64_t K, float out[4]) {
  __m256 s[8];
  for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m256 x = _mm256_loadu_ps(b + k), y = _mm256_loadu_ps(b + k + 8);
    s[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + k), x, s[0]);
    s[1] = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + k), x, s[1]);
    s[2] = _mm256_fmadd_ps(_mm256_loadu_ps(a2 + k), x, s[2]);
    s[3] = _mm256_fmadd_ps(_mm256_loadu_ps(a3 + k), x, s[3]);
    s[4] = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + k + 8), y, s[4]);
    s[5] = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + k + 8), y, s[5]);
    s[6] = _mm256_fmadd_ps(_mm256_loadu_ps(a2 + k + 8), y, s[6]);
    s[7] = _mm256_fmadd_ps(_mm256_loadu_ps(a3 + k + 8), y, s[7]);
  }
  const float *a[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; i++) {
    float t = hsum8(_mm256_add_ps(s[i], s[i + 4]));
    for (int64_t kk = k; kk < K; kk++) t += a[i][kk] * b[kk];
    out[i] = t;
  }
}

/* 16 lanes; the last partial blocks of K are masked loads, which do not fault past the end. */
TARGET_avx512 INLINE void dot4_avx512(const float *b, const float *a0, const float *a1, const float *a2, const float *a3, int64_t K,
                                             float out[4]) {
  __m512 s[8];
  for (int i = 0; i < 8; i++) s[i] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    __m512 x = _mm512_loadu_ps(b + k), y = _mm512_loadu_ps(b + k + 16);
    s[0] = _mm512_fmadd_ps(_mm512_loadu_ps(a0 + k), x, s[0]);
    s[1] = _mm512_fmadd_ps(_mm512_loadu_ps(a1 + k), x, s[1]);
    s[2] = _mm512_fmadd_ps(_mm512_loadu_ps(a2 + k), x, s[2]);
    s[3] = _mm512_fmadd_ps(_mm512_loadu_ps(a3 + k), x, s[3]);
    s[4] = _mm512_fmadd_ps(_mm512_loadu_ps(a0 + k + 16), y, s[4]);
    s[5] = _mm512_fmadd_ps(_mm512_loadu_ps(a1 + k + 16), y, s[5]);
    s[6] = _mm512_fmadd_ps(_mm512_loadu_ps(a2 + k + 16), y, s[6]);
    s[7] = _mm512_fmadd_ps(_mm512_loadu_ps(a3 + k + 16), y, s[7]);
  }
  for (; k < K; k += 16) {
    __mmask16 m = K - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (K - k)) - 1);
    __m512 x = _mm512_maskz_loadu_ps(m, b + k);
    s[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a0 + k), x, s[0]);
    s[1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a1 + k), x, s[1]);
    s[2] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a2 + k), x, s[2]);
    s[3] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a3 + k), x, s[3]);
  }
  for (int i = 0; i < 4; i++) out[i] = _mm512_reduce_add_ps(_mm512_add_ps(s[i], s[i + 4]));
}

/* Columns [lo, hi) of C = alpha · A · Bᵀ + beta · C for few rows and a short inner dimension
 * (K ≤ 16): LoRA's second product while decoding, t · Bᵀ with t [rows, r] and B [N, r]. Dot
 * products of K terms spend more on summing their vector across lanes than on the products; here
 * a gather loads column k of 16 rows of B, and each row of C is K broadcast multiply-adds over 16
 * columns at once. Sums go k = 0, 1, … in order: within float rounding of skinny_nt_cols. */
TARGET_avx512 static void skinny_nt_short_k(int64_t lo, int64_t hi, const SkinnyArgs *g) {
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32((int)g->ldb));
  for (int64_t n0 = lo; n0 < hi; n0 += 16) {
    int cols = (int)min64(16, hi - n0);
    __mmask16 cm = cols == 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    __m512 bk[16];
    for (int64_t k = 0; k < g->K; k++) bk[k] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), cm, rows, g->B + n0 * g->ldb + k, 4);
    for (int64_t m = 0; m < g->M; m++) {
      const float *a = g->A + m * g->lda;
      __m512 acc = _mm512_mul_ps(_mm512_set1_ps(a[0]), bk[0]);
      for (int64_t k = 1; k < g->K; k++) acc = _mm512_fmadd_ps(_mm512_set1_ps(a[k]), bk[k], acc);
      float *c = g->C + m * g->ldc + n0;
      __m512 out = _mm512_mul_ps(_mm512_set1_ps(g->alpha), acc);
      if (g->beta != 0.0f) out = _mm512_fmadd_ps(_mm512_set1_ps(g->beta), _mm512_maskz_loadu_ps(cm, c), out); /* beta 0: C unread */
      _mm512_mask_storeu_ps(c, cm, out);
    }
  }
}
#endif

typedef void (*Dot4)(const float *b, const float *a0, const float *a1, const float *a2, const float *a3, int64_t K, float out[4]);

/* Columns [lo, hi) of C = alpha · A · Bᵀ + beta · C. Each row of B is read once (B is the big
 * operand); rows past M in a block of four re-read the last row of A and are not stored. */
INLINE void skinny_nt_cols(int64_t lo, int64_t hi, const SkinnyArgs *g, Dot4 dot4) {
  for (int64_t n = lo; n < hi; n++) {
    const float *b = g->B + n * g->ldb;
    for (int64_t m0 = 0; m0 < g->M; m0 += 4) {
      const float *a[4];
      for (int64_t i = 0; i < 4; i++) a[i] = g->A + (m0 + i < g->M ? m0 + i : g->M - 1) * g->lda;
      float d[4];
      dot4(b, a[0], a[1], a[2], a[3], g->K, d);
      for (int64_t i = 0; i < 4 && m0 + i < g->M; i++) {
        float *c = g->C + (m0 + i) * g->ldc + n;
        *c = g->beta == 0.0f ? g->alpha * d[i] : g->alpha * d[i] + g->beta * *c;
      }
    }
  }
}

#define SKINNY_VARIANT(isa, _) \
  TARGET_##isa void skinny_nt_cols__##isa(int64_t lo, int64_t hi, const SkinnyArgs *a) { skinny_nt_cols(lo, hi, a, dot4_##isa); }
FOR_EACH_ISA(SKINNY_VARIANT, _)

/* Columns [lo, hi) of C = alpha · A · B + beta · C with few rows of A and B stored [K, N]
 * (x · W, GPT-2's Conv1D layout): each row of B is read once. Strips of 16 columns keep all M
 * rows of the strip in registers while k runs down B (one 64-byte line of each B row per
 * strip), so C is written once; the first version added every B row into C in memory, and ran
 * at 3-13 GB/s, a fifth of the memory bandwidth. Packing B, as a general sgemm does, would cost
 * more than the product. */
typedef float f32x16 __attribute__((vector_size(64), aligned(4)));

INLINE void skinny_nn_tail(int64_t lo, int64_t hi, const SkinnyArgs *g) {
  for (int64_t m = 0; m < g->M; m++) {
    float *c = g->C + m * g->ldc;
    for (int64_t j = lo; j < hi; j++) c[j] = g->beta == 0.0f ? 0.0f : c[j] * g->beta;
  }
  for (int64_t k = 0; k < g->K; k++) {
    const float *b = g->B + k * g->ldb;
    for (int64_t m = 0; m < g->M; m++) {
      float a = g->alpha * g->A[m * g->lda + k];
      float *c = g->C + m * g->ldc;
      for (int64_t j = lo; j < hi; j++) c[j] += a * b[j];
    }
  }
}

INLINE void skinny_nn_cols(int64_t lo, int64_t hi, const SkinnyArgs *g) {
  const float *arow[SKINNY_M];
  for (int64_t i = 0; i < SKINNY_M; i++) arow[i] = g->A + (i < g->M ? i : g->M - 1) * g->lda; /* rows past M: not stored */
  int64_t j = lo;
  for (; j + 16 <= hi; j += 16) {
    f32x16 acc[SKINNY_M];
    for (int i = 0; i < SKINNY_M; i++) acc[i] = (f32x16){0};
    const float *b = g->B + j;
    for (int64_t k = 0; k < g->K; k++, b += g->ldb) {
      f32x16 bv;
      memcpy(&bv, b, sizeof bv);
#pragma GCC unroll 8
      for (int i = 0; i < SKINNY_M; i++) acc[i] += arow[i][k] * bv;
    }
    for (int64_t i = 0; i < g->M; i++) {
      float *c = g->C + i * g->ldc + j;
      for (int t = 0; t < 16; t++) c[t] = g->beta == 0.0f ? g->alpha * acc[i][t] : g->alpha * acc[i][t] + g->beta * c[t];
    }
  }
  if (j < hi) skinny_nn_tail(j, hi, g);
}
LOOP_VARIANTS(skinny_nn_cols, SkinnyArgs)

void gemm_f32(bool tA, bool tB, int64_t M, int64_t N, int64_t K, double alpha, const float *A, int64_t lda, const float *B, int64_t ldb, double beta,
              float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (M >= BF16_MIN_ROWS && precision_bf16()) {
    gemm_bf16(tA, tB, M, N, K, (float)alpha, A, lda, B, ldb, (float)beta, C, ldc);
    return;
  }
  if (!tA && tB && M <= SKINNY_M && K > 0) {
    SkinnyArgs g = {M, K, lda, ldb, ldc, (float)alpha, (float)beta, A, B, C};
#if MAGRPO_X86
    if (K <= 16 && kern->isa == ISA_AVX512 && ldb <= INT32_MAX / 16) { /* gather offsets: 15 · ldb in an int32 */
      PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)M * N * K, N, skinny_nt_short_k, &g);
      return;
    }
#endif
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)M * N * K, N, kern->skinny_nt_cols, &g);
    return;
  }
  if (!tA && !tB && M <= SKINNY_M && K > 0) {
    SkinnyArgs g = {M, K, lda, ldb, ldc, (float)alpha, (float)beta, A, B, C};
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)M * N * K, N, kern->skinny_nn_cols, &g);
    return;
  }
  GemmPairCall whole = {tA, tB, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
  if (gemm_split_rows(&whole)) return;
  blas_sgemm(tA, tB, M, N, K, (float)alpha, A, lda, B, ldb, (float)beta, C, ldc);
}
