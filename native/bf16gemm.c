/*
 * Mixed-precision GEMM: C = alpha · bf16(op(A)) · bf16(op(B)) + beta · C, fp32 in, fp32 out,
 * fp32 accumulation. `precision: bf16` routes every product of at least BF16_MIN_ROWS rows here
 * (training's forward and backward, prompt passes); decoding's few-rows products stay fp32,
 * because they are bound by reading fp32 weights, which a per-call conversion would only add to.
 *
 * Inputs are rounded to bfloat16 (round to nearest even) while they are packed, so there is no
 * separate conversion pass. With AVX-512 BF16 (Zen 4/5, Cooper Lake, Sapphire Rapids) the
 * micro-kernel is VDPBF16PS: each fp32 lane accumulates a[2k]·b[2k] + a[2k+1]·b[2k+1], twice the
 * multiply-adds of an FMA per instruction. Elsewhere the same rounding feeds the fp32 sgemm, so
 * results agree across machines up to summation order, only the speed differs.
 *
 * Blocking as in sgemm.c (BLIS): B packed in panels of NR columns × KC inner (k-pairs
 * interleaved: dst[((q·kc2 + kk)·NR + j)·2 + {0,1}] = B[2kk + {0,1}][j]), A in panels of MR rows
 * (dst[(kk·MR + i)·2 + {0,1}] = A[i][2kk + {0,1}]); an odd inner block is padded with a zero.
 */
#include <stdint.h>
#include <stdlib.h>

#include "magrpo.h"

#if MAGRPO_X86
#include <immintrin.h>
#endif

float round_to_bf16(float x) { return f32_from_bf16(bf16_from_f32(x)); }

static bool g_bf16 = false, g_emulate = false;

void set_precision_bf16(bool on, bool emulate) {
  g_bf16 = on;
  g_emulate = emulate;
}
bool precision_bf16(void) { return g_bf16; }

bool cpu_has_avx512bf16(void) {
#if MAGRPO_X86
  __builtin_cpu_init();
  return isa_supported(ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool bf16_native(void) { return !g_emulate && cpu_has_avx512bf16() && kern->isa == ISA_AVX512; }

/* ---------------------------------------------------------------------------------------------
 * Emulated: round copies of A and B, then the fp32 sgemm.
 * ------------------------------------------------------------------------------------------- */

static float *rounded_copy(const float *X, int64_t rows, int64_t cols, int64_t ld) {
  float *d = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof(float));
  if (d == NULL) abort(); /* the size of the operand itself: the process is out of memory */
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) d[r * cols + c] = round_to_bf16(X[r * ld + c]);
  return d;
}

static void gemm_bf16_emulated(bool tA, bool tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                               float beta, float *C, int64_t ldc) {
  int64_t rowsA = tA ? K : M, colsA = tA ? M : K, rowsB = tB ? N : K, colsB = tB ? K : N;
  float *a = rounded_copy(A, rowsA, colsA, lda), *b = rounded_copy(B, rowsB, colsB, ldb);
  blas_sgemm(tA, tB, M, N, K, alpha, a, colsA > 0 ? colsA : 1, b, colsB > 0 ? colsB : 1, beta, C, ldc);
  free(a);
  free(b);
}

/* ---------------------------------------------------------------------------------------------
 * AVX-512 BF16
 * ------------------------------------------------------------------------------------------- */

#if MAGRPO_X86
#define MR 12
#define NR 32
#define KC 384 /* inner elements per block: 192 pairs, a 24 KB B panel in L1 */
#define MC 144
#define NC 2048

static __thread uint16_t *tl_bbuf[2];
static __thread size_t tl_bcap[2];

static uint16_t *bbuffer(int slot, size_t n) {
  if (tl_bcap[slot] < n) {
    free(tl_bbuf[slot]);
    tl_bbuf[slot] = aligned_alloc(64, (n * sizeof(uint16_t) + 63) & ~(size_t)63);
    tl_bcap[slot] = tl_bbuf[slot] ? n : 0;
  }
  return tl_bbuf[slot];
}

static inline float at(const float *X, int64_t ld, bool trans, int64_t r, int64_t c) { return trans ? X[c * ld + r] : X[r * ld + c]; }

/* Two bf16 values as one 32-bit word, the first in the low half (branch-free: vectorises). */
static inline uint32_t bf16_pair(float lo, float hi) {
  uint32_t a, b;
  memcpy(&a, &lo, sizeof a);
  memcpy(&b, &hi, sizeof b);
  uint32_t ra = (a & 0x7fffffffu) > 0x7f800000u ? (a >> 16) | 0x40u : (a + 0x7fffu + ((a >> 16) & 1u)) >> 16;
  uint32_t rb = (b & 0x7fffffffu) > 0x7f800000u ? (b >> 16) | 0x40u : (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  return (ra & 0xffffu) | (rb << 16);
}

/* Rows [r0, r0 + mr) × inner [k0, k0 + kc) of op(A), kc2 = ceil(kc / 2) pairs per panel:
 * dst32[kk·MR + i] = (A[i][2kk], A[i][2kk+1]). Whole panels with an even kc take the fast loops. */
static void pack_a(const GemmCall *g, int64_t r0, int64_t mr, int64_t k0, int64_t kc, uint16_t *dst) {
  int64_t kc2 = (kc + 1) / 2;
  for (int64_t p = 0; p < mr; p += MR, dst += kc2 * MR * 2) {
    int64_t rows = mr - p < MR ? mr - p : MR;
    uint32_t *d32 = (uint32_t *)dst;
    if (rows == MR && kc % 2 == 0) {
      if (!g->tA) {
        for (int64_t i = 0; i < MR; i++) {
          const float *src = g->A + (r0 + p + i) * g->lda + k0;
          for (int64_t kk = 0; kk < kc2; kk++) d32[kk * MR + i] = bf16_pair(src[2 * kk], src[2 * kk + 1]);
        }
      } else {
        for (int64_t kk = 0; kk < kc2; kk++) {
          const float *s0 = g->A + (k0 + 2 * kk) * g->lda + r0 + p, *s1 = s0 + g->lda;
          for (int64_t i = 0; i < MR; i++) d32[kk * MR + i] = bf16_pair(s0[i], s1[i]);
        }
      }
      continue;
    }
    for (int64_t kk = 0; kk < kc2; kk++)
      for (int64_t i = 0; i < MR; i++) {
        float x0 = 0.0f, x1 = 0.0f;
        if (i < rows) {
          x0 = at(g->A, g->lda, g->tA, r0 + p + i, k0 + 2 * kk);
          if (2 * kk + 1 < kc) x1 = at(g->A, g->lda, g->tA, r0 + p + i, k0 + 2 * kk + 1);
        }
        d32[kk * MR + i] = bf16_pair(x0, x1);
      }
  }
}

/* Panels [q0, q1) of NR columns of the block at column c0 (nc wide) × inner [k0, k0 + kc):
 * dst32[(q·kc2 + kk)·NR + j] = (B[2kk][j], B[2kk+1][j]). */
static void pack_b(const GemmCall *g, int64_t c0, int64_t nc, int64_t k0, int64_t kc, int64_t q0, int64_t q1, uint16_t *dst) {
  int64_t kc2 = (kc + 1) / 2;
  for (int64_t q = q0; q < q1; q++) {
    uint32_t *d32 = (uint32_t *)(dst + q * kc2 * NR * 2);
    int64_t j0 = q * NR, cols = nc - j0 < NR ? nc - j0 : NR;
    if (cols == NR && kc % 2 == 0) {
      if (g->tB) {
        for (int64_t j = 0; j < NR; j++) {
          const float *src = g->B + (c0 + j0 + j) * g->ldb + k0;
          for (int64_t kk = 0; kk < kc2; kk++) d32[kk * NR + j] = bf16_pair(src[2 * kk], src[2 * kk + 1]);
        }
      } else {
        for (int64_t kk = 0; kk < kc2; kk++) {
          const float *s0 = g->B + (k0 + 2 * kk) * g->ldb + c0 + j0, *s1 = s0 + g->ldb;
          for (int64_t j = 0; j < NR; j++) d32[kk * NR + j] = bf16_pair(s0[j], s1[j]);
        }
      }
      continue;
    }
    for (int64_t kk = 0; kk < kc2; kk++)
      for (int64_t j = 0; j < NR; j++) {
        float x0 = 0.0f, x1 = 0.0f;
        if (j < cols) {
          x0 = at(g->B, g->ldb, g->tB, k0 + 2 * kk, c0 + j0 + j);
          if (2 * kk + 1 < kc) x1 = at(g->B, g->ldb, g->tB, k0 + 2 * kk + 1, c0 + j0 + j);
        }
        d32[kk * NR + j] = bf16_pair(x0, x1);
      }
  }
}

#define TARGET_bf16 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")))

TARGET_bf16 static void ukr_bf16(int64_t kc2, const uint16_t *a, const uint16_t *b, float *c, int64_t ldc, float alpha, int64_t mr, int64_t nr) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kc2; kk++, a += MR * 2, b += NR * 2) {
    __m512bh b0 = (__m512bh)_mm512_load_si512((const void *)b), b1 = (__m512bh)_mm512_load_si512((const void *)(b + 32));
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      int32_t pair;
      memcpy(&pair, a + 2 * i, sizeof pair);
      __m512bh ai = (__m512bh)_mm512_set1_epi32(pair);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  __m512 va = _mm512_set1_ps(alpha);
  if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; i++) {
      float *ci = c + i * ldc;
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, acc[i][0], _mm512_loadu_ps(ci)));
      _mm512_storeu_ps(ci + 16, _mm512_fmadd_ps(va, acc[i][1], _mm512_loadu_ps(ci + 16)));
    }
    return;
  }
  float tile[MR * NR] __attribute__((aligned(64)));
  for (int i = 0; i < MR; i++) {
    _mm512_store_ps(tile + i * NR, acc[i][0]);
    _mm512_store_ps(tile + i * NR + 16, acc[i][1]);
  }
  for (int64_t i = 0; i < mr; i++)
    for (int64_t j = 0; j < nr; j++) c[i * ldc + j] += alpha * tile[i * NR + j];
}

typedef struct {
  const GemmCall *g;
  uint16_t *Bp;
  int64_t jc, nc, pc, kc;
  int64_t nIC, splitsJ, nJ;
} Bf16Job;

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void job_pack_b(int t, int T, void *ctx) {
  const Bf16Job *j = ctx;
  pack_b(j->g, j->jc, j->nc, j->pc, j->kc, j->nJ * t / T, j->nJ * (t + 1) / T, j->Bp);
}

static void job_tiles(int t, int T, void *ctx) {
  const Bf16Job *j = ctx;
  const GemmCall *g = j->g;
  int64_t kc2 = (j->kc + 1) / 2, tasks = j->nIC * j->splitsJ, packed = -1;
  uint16_t *Ap = bbuffer(1, (size_t)MC * (KC + 1));
  if (Ap == NULL) abort();
  for (int64_t task = tasks * t / T; task < tasks * (t + 1) / T; task++) {
    int64_t ib = task / j->splitsJ, js = task % j->splitsJ;
    int64_t ic = ib * MC, mc = min64(MC, g->M - ic);
    if (ib != packed) {
      pack_a(g, ic, mc, j->pc, j->kc, Ap);
      packed = ib;
    }
    for (int64_t q = j->nJ * js / j->splitsJ; q < j->nJ * (js + 1) / j->splitsJ; q++) {
      int64_t nr = min64(NR, j->nc - q * NR);
      const uint16_t *bp = j->Bp + q * kc2 * NR * 2;
      float *cq = g->C + ic * g->ldc + j->jc + q * NR;
      for (int64_t p = 0; p < mc; p += MR) ukr_bf16(kc2, Ap + p * kc2 * 2, bp, cq + p * g->ldc, g->ldc, g->alpha, min64(MR, mc - p), nr);
    }
  }
}

static void gemm_bf16_avx512(const GemmCall *g) {
  int T = threads();
  if ((double)g->M * g->N * g->K < PAR_MIN_FLOPS || team_size() > 1) T = 1;
  int64_t ncMax = min64(NC, (g->N + NR - 1) / NR * NR);
  uint16_t *Bp = bbuffer(0, (size_t)ncMax * (KC + 1));
  if (Bp == NULL) abort();
  for (int64_t jc = 0; jc < g->N; jc += NC) {
    int64_t nc = min64(NC, g->N - jc), nJ = (nc + NR - 1) / NR;
    for (int64_t pc = 0; pc < g->K; pc += KC) {
      int64_t kc = min64(KC, g->K - pc), nIC = (g->M + MC - 1) / MC;
      int64_t splitsJ = nIC >= T ? 1 : min64(nJ, (T + nIC - 1) / nIC);
      Bf16Job j = {g, Bp, jc, nc, pc, kc, nIC, splitsJ, nJ};
      if (T > 1 && nJ > 1) parallel_run(T, job_pack_b, &j);
      else job_pack_b(0, 1, &j);
      if (T > 1 && nIC * splitsJ > 1) parallel_run(T, job_tiles, &j);
      else job_tiles(0, 1, &j);
    }
  }
}
#endif

void gemm_bf16(bool tA, bool tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
               float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
#if MAGRPO_X86
  if (K > 0 && alpha != 0.0f && bf16_native()) {
    for (int64_t i = 0; i < M; i++) {
      float *row = C + i * ldc;
      if (beta == 0.0f)
        memset(row, 0, (size_t)N * sizeof(float));
      else if (beta != 1.0f)
        for (int64_t j = 0; j < N; j++) row[j] *= beta;
    }
    GemmCall g = {tA, tB, M, N, K, lda, ldb, ldc, alpha, A, B, C, NULL, false};
    gemm_bf16_avx512(&g);
    return;
  }
#endif
  gemm_bf16_emulated(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
