/*
 * The builtin sgemm: C += alpha · op(A) · op(B), row-major, for machines without an OpenBLAS.
 *
 * The classic GotoBLAS/BLIS structure. For each block of NC columns and KC of the inner dimension,
 * op(B) is packed into panels of NR columns (kc × NR, contiguous, zero-padded); for each block of
 * MC rows, op(A) is packed into panels of MR rows (kc × MR). A micro-kernel then computes an
 * MR × NR tile of C in registers from one A panel and one B panel: the B panel stays in L1 while
 * the A panels of the block stream from L2. Transposes are absorbed by the packing.
 *
 * One variant per ISA (target attributes, never -m flags), each with its own register tile:
 *   generic  4 × 8   GCC vector extensions (SSE2 on x86-64, NEON on arm64)
 *   avx2     6 × 16  12 ymm accumulators, FMA
 *   avx512  12 × 32  24 zmm accumulators, FMA
 * Threads split the tiles of a block (rows of A panels, or columns of B panels when A has few
 * rows); B is packed by all threads first.
 */
#include <stdlib.h>

#include "magrpo.h"

#if MAGRPO_X86
#include <immintrin.h>
#endif

/* A pre-packed product is split between threads only above this many FLOPs (4 M: 8 rows × 1024 ×
 * 384 and up, ~40 µs on one core). Since the pool's threads spin for the next job instead of
 * sleeping (pool.c), a split costs a few µs; at 16 M only the LM head split. Idle Zen 4, 2 threads,
 * tokens/s at 16 M / 4 M / 2 M / 1 M: 10m b8 2,230-2,322 / 2,509-2,618 / 2,260-2,571 /
 * 2,251-2,366; 10m b32 ~4,040 / 4,041-4,261 / 3,811-3,944 / 4,097-4,263; 124m b8 ~270 / ~275 /
 * 283-300 / 286. */
#ifndef PREPACKED_PAR_MIN_FLOPS
#define PREPACKED_PAR_MIN_FLOPS (1 << 22)
#endif

/* Packing buffers, one pair per thread, grown on demand and kept (64-byte aligned). */
static __thread float *tl_buf[2];
static __thread size_t tl_cap[2];

static float *pack_buffer(int slot, size_t floats) {
  if (tl_cap[slot] < floats) {
    free(tl_buf[slot]);
    size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    tl_buf[slot] = aligned_alloc(64, bytes);
    tl_cap[slot] = tl_buf[slot] ? floats : 0;
  }
  return tl_buf[slot];
}

/* ---------------------------------------------------------------------------------------------
 * Packing
 * ------------------------------------------------------------------------------------------- */

/* Rows [r0, r0 + mr) × inner [k0, k0 + kc) of op(A) as panels of MR rows: dst[(p·kc + k)·MR + i]. */
INLINE void pack_a(const GemmCall *g, int64_t r0, int64_t mr, int64_t k0, int64_t kc, int64_t MR, float *dst) {
  for (int64_t p = 0; p < mr; p += MR, dst += kc * MR) {
    int64_t rows = mr - p < MR ? mr - p : MR;
    if (!g->tA) {
      for (int64_t i = 0; i < rows; i++) {
        const float *src = g->A + (r0 + p + i) * g->lda + k0;
        for (int64_t k = 0; k < kc; k++) dst[k * MR + i] = src[k];
      }
    } else {
      for (int64_t k = 0; k < kc; k++) {
        const float *src = g->A + (k0 + k) * g->lda + r0 + p;
        for (int64_t i = 0; i < rows; i++) dst[k * MR + i] = src[i];
      }
    }
    for (int64_t i = rows; i < MR; i++)
      for (int64_t k = 0; k < kc; k++) dst[k * MR + i] = 0.0f;
  }
}

/* Panels [q0, q1) of NR columns of the block at column c0 (nc wide) × inner [k0, k0 + kc) of
 * op(B): dst[(q·kc + k)·NR + j]. */
INLINE void pack_b(const GemmCall *g, int64_t c0, int64_t nc, int64_t k0, int64_t kc, int64_t NR, int64_t q0, int64_t q1, float *dst) {
  for (int64_t q = q0; q < q1; q++) {
    float *d = dst + q * kc * NR;
    int64_t j0 = q * NR, cols = nc - j0 < NR ? nc - j0 : NR;
    if (!g->tB) {
      for (int64_t k = 0; k < kc; k++) {
        const float *src = g->B + (k0 + k) * g->ldb + c0 + j0;
        for (int64_t j = 0; j < cols; j++) d[k * NR + j] = src[j];
        for (int64_t j = cols; j < NR; j++) d[k * NR + j] = 0.0f;
      }
    } else {
      for (int64_t j = 0; j < cols; j++) {
        const float *src = g->B + (c0 + j0 + j) * g->ldb + k0;
        for (int64_t k = 0; k < kc; k++) d[k * NR + j] = src[k];
      }
      for (int64_t j = cols; j < NR; j++)
        for (int64_t k = 0; k < kc; k++) d[k * NR + j] = 0.0f;
    }
  }
}

/* Rounds x[0, n) to bf16 values in place, as bf16_from_f32 does (nearest even, NaN stays NaN,
 * subnormals to zero),
 * without a branch so that it vectorises in each ISA's driver: decode products of a small model
 * round an A panel per call, and the scalar loop cost as much as the product at 1m. */
INLINE void round_bf16_inplace(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    uint32_t nan = (u | 0x400000u) & 0xffff0000u;
    r = (u & 0x7fffffffu) > 0x7f800000u ? nan : r;
    r = (u & 0x7f800000u) == 0 ? (u & 0x80000000u) : r;
    memcpy(x + i, &r, sizeof r);
  }
}

/* Adds alpha · tile (MR × NR, row stride NR) to the mr × nr corner of C: edge tiles. */
INLINE void add_tile(const float *tile, int64_t NR, float *c, int64_t ldc, float alpha, int64_t mr, int64_t nr) {
  for (int64_t i = 0; i < mr; i++)
    for (int64_t j = 0; j < nr; j++) c[i * ldc + j] += alpha * tile[i * NR + j];
}

/* ---------------------------------------------------------------------------------------------
 * Micro-kernels: C[0:mr, 0:nr] += alpha · Σ_k a[k·MR + i] · b[k·NR + j]
 * ------------------------------------------------------------------------------------------- */

typedef float v4f __attribute__((vector_size(16), aligned(4)));

/* B's panels hold fp32, or bf16 (`bf`, decode packs of precision bf16: half the bytes to stream). */
INLINE void ukr_generic(const bool bf, int64_t kc, const float *a, const void *bv, float *c, int64_t ldc, float alpha, int64_t mr, int64_t nr) {
  v4f acc[4][2];
  for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = (v4f){0, 0, 0, 0};
  for (int64_t k = 0; k < kc; k++, a += 4) {
    v4f b0, b1;
    if (bf) {
      const uint16_t *b = (const uint16_t *)bv + k * 8;
      for (int j = 0; j < 4; j++) b0[j] = f32_from_bf16(b[2 * j]), b1[j] = f32_from_bf16(b[2 * j + 1]);
    } else {
      memcpy(&b0, (const float *)bv + k * 8, sizeof b0);
      memcpy(&b1, (const float *)bv + k * 8 + 4, sizeof b1);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      acc[i][0] += a[i] * b0;
      acc[i][1] += a[i] * b1;
    }
  }
  float tile[4 * 8];
  for (int i = 0; i < 4; i++) memcpy(tile + i * 8, acc[i], sizeof acc[i]);
  add_tile(tile, 8, c, ldc, alpha, mr, nr);
}



#if MAGRPO_X86
/* The x86 micro-kernels are written once per tile height R (1..MR) and picked by `mr`, so an edge
 * tile computes only its real rows: decoding runs M = 4-64 rows (G samples × items), and M = 8
 * on the 12-row AVX-512 tile spent a third of its FMAs on padding rows and summed the tile into C
 * with a scalar loop. Only columns past the matrix's edge still go through `add_tile`. */
/* A bf16 pack's row of 16 (sgemm_pack: column j in the low half of 32-bit word j, column j + 8 in
 * its high half) as two vectors of 8 fp32: one shift and one mask, no widening shuffle. */
TARGET_avx2 INLINE void bf16x16_avx2(const uint16_t *p, __m256 *lo, __m256 *hi) {
  __m256i w = _mm256_load_si256((const __m256i *)p);
  *lo = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  *hi = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000u)));
}

TARGET_avx2 INLINE void ukr_avx2_rows(const int R, const bool bf, int64_t kc, const float *a, const void *bv, float *c, int64_t ldc, float alpha, int64_t nr) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; k++, a += 6) {
    __m256 b0, b1;
    if (bf) {
      bf16x16_avx2((const uint16_t *)bv + k * 16, &b0, &b1);
    } else {
      b0 = _mm256_load_ps((const float *)bv + k * 16);
      b1 = _mm256_load_ps((const float *)bv + k * 16 + 8);
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  __m256 va = _mm256_set1_ps(alpha);
  if (nr == 16) {
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
      float *ci = c + i * ldc;
      _mm256_storeu_ps(ci, _mm256_fmadd_ps(va, acc[i][0], _mm256_loadu_ps(ci)));
      _mm256_storeu_ps(ci + 8, _mm256_fmadd_ps(va, acc[i][1], _mm256_loadu_ps(ci + 8)));
    }
    return;
  }
  float tile[6 * 16] __attribute__((aligned(32)));
  for (int i = 0; i < R; i++) {
    _mm256_store_ps(tile + i * 16, acc[i][0]);
    _mm256_store_ps(tile + i * 16 + 8, acc[i][1]);
  }
  add_tile(tile, 16, c, ldc, alpha, R, nr);
}

/* The tile height as a compile-time constant, so each height gets its own unrolled kernel. */
TARGET_avx2 INLINE void ukr_avx2(const bool bf, int64_t kc, const float *a, const void *b, float *c, int64_t ldc, float alpha, int64_t mr, int64_t nr) {
  switch (mr) {
  case 6: ukr_avx2_rows(6, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 5: ukr_avx2_rows(5, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 4: ukr_avx2_rows(4, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 3: ukr_avx2_rows(3, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 2: ukr_avx2_rows(2, bf, kc, a, b, c, ldc, alpha, nr); break;
  default: ukr_avx2_rows(1, bf, kc, a, b, c, ldc, alpha, nr); break;
  }
}



/* A bf16 pack's row of 32 as two vectors of 16 fp32, as bf16x16_avx2. The widening shares the
 * ports of the FMAs, so it is one shift and one AND per 32 values rather than a VPMOVZXWD and a
 * shift per 16: where the weights sit in cache the product is bound by those ports. */
TARGET_avx512 INLINE void bf16x32_avx512(const uint16_t *p, __m512 *lo, __m512 *hi) {
  __m512i w = _mm512_load_si512((const void *)p);
  *lo = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  *hi = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000u)));
}

TARGET_avx512 INLINE void ukr_avx512_rows(const int R, const bool bf, int64_t kc, const float *a, const void *bv, float *c, int64_t ldc, float alpha, int64_t nr) {
  __m512 acc[12][2];
#pragma GCC unroll 12
  for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k++, a += 12) {
    __m512 b0, b1;
    if (bf) {
      bf16x32_avx512((const uint16_t *)bv + k * 32, &b0, &b1);
    } else {
      b0 = _mm512_load_ps((const float *)bv + k * 32);
      b1 = _mm512_load_ps((const float *)bv + k * 32 + 16);
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  __m512 va = _mm512_set1_ps(alpha);
  if (nr == 32) {
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      float *ci = c + i * ldc;
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, acc[i][0], _mm512_loadu_ps(ci)));
      _mm512_storeu_ps(ci + 16, _mm512_fmadd_ps(va, acc[i][1], _mm512_loadu_ps(ci + 16)));
    }
    return;
  }
  float tile[12 * 32] __attribute__((aligned(64)));
  for (int i = 0; i < R; i++) {
    _mm512_store_ps(tile + i * 32, acc[i][0]);
    _mm512_store_ps(tile + i * 32 + 16, acc[i][1]);
  }
  add_tile(tile, 32, c, ldc, alpha, R, nr);
}

/* The tile height as a compile-time constant, so each height gets its own unrolled kernel. */
TARGET_avx512 INLINE void ukr_avx512(const bool bf, int64_t kc, const float *a, const void *b, float *c, int64_t ldc, float alpha, int64_t mr, int64_t nr) {
  switch (mr) {
  case 12: ukr_avx512_rows(12, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 11: ukr_avx512_rows(11, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 10: ukr_avx512_rows(10, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 9: ukr_avx512_rows(9, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 8: ukr_avx512_rows(8, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 7: ukr_avx512_rows(7, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 6: ukr_avx512_rows(6, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 5: ukr_avx512_rows(5, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 4: ukr_avx512_rows(4, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 3: ukr_avx512_rows(3, bf, kc, a, b, c, ldc, alpha, nr); break;
  case 2: ukr_avx512_rows(2, bf, kc, a, b, c, ldc, alpha, nr); break;
  default: ukr_avx512_rows(1, bf, kc, a, b, c, ldc, alpha, nr); break;
  }
}


#endif

/* ---------------------------------------------------------------------------------------------
 * The driver, written once and instantiated per ISA with its tile and block sizes.
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  const GemmCall *g;
  float *Bp;
  int64_t jc, nc, pc, kc;
  int64_t nIC, splitsJ, nJ; /* row blocks, column splits per row block, B panels */
} BlockJob;

#define SGEMM_VARIANT(isa, MR, NR, KC, MC, NC)                                                                        \
  TARGET_##isa static void sgemm_pack_b__##isa(int t, int T, void *ctx) {                                            \
    const BlockJob *j = ctx;                                                                                         \
    pack_b(j->g, j->jc, j->nc, j->pc, j->kc, NR, j->nJ * t / T, j->nJ * (t + 1) / T, j->Bp);                          \
  }                                                                                                                  \
  /* Rows [ic, ic + mc) (mc <= MC) x B panels [q0, q1) of the block. */                                              \
  TARGET_##isa static void sgemm_rows__##isa(const BlockJob *j, int64_t ic, int64_t mc, int64_t q0, int64_t q1, float *Ap) {\
    const GemmCall *g = j->g;                                                                                        \
    pack_a(g, ic, mc, j->pc, j->kc, MR, Ap);                                                                         \
    for (int64_t q = q0; q < q1; q++) {                                                                              \
      int64_t nr = min64(NR, j->nc - q * NR);                                                                        \
      const float *bp = j->Bp + q * j->kc * NR;                                                                      \
      float *cq = g->C + ic * g->ldc + j->jc + q * NR;                                                               \
      for (int64_t p = 0; p < mc; p += MR)                                                                           \
        ukr_##isa(false, j->kc, Ap + p * j->kc, bp, cq + p * g->ldc, g->ldc, g->alpha, min64(MR, mc - p), nr);       \
    }                                                                                                                \
  }                                                                                                                  \
  /* With rows enough for every thread, each takes its row_share (magrpo.h); with fewer, threads                     \
   * split the B panels of each row block. */                                                                        \
  TARGET_##isa static void sgemm_tiles__##isa(int t, int T, void *ctx) {                                             \
    const BlockJob *j = ctx;                                                                                         \
    const GemmCall *g = j->g;                                                                                        \
    float *Ap = pack_buffer(1, (size_t)MC * KC);                                                                     \
    if (Ap == NULL) abort(); /* 150-300 KB: the process is out of memory */                                          \
    if (j->splitsJ == 1) {                                                                                           \
      RowShare rs = row_share(g->M, MR, MC, t, T);                                                                   \
      for (int64_t b = 0; b < rs.blocks; b++) {                                                                      \
        int64_t ic = row_block_start(&rs, b), end = row_block_start(&rs, b + 1);                                     \
        if (end > ic) sgemm_rows__##isa(j, ic, end - ic, 0, j->nJ, Ap);                                              \
      }                                                                                                              \
      return;                                                                                                        \
    }                                                                                                                \
    int64_t tasks = j->nIC * j->splitsJ;                                                                             \
    for (int64_t task = tasks * t / T; task < tasks * (t + 1) / T; task++) {                                         \
      int64_t ib = task / j->splitsJ, js = task % j->splitsJ, ic = ib * MC;                                          \
      sgemm_rows__##isa(j, ic, min64(MC, g->M - ic), j->nJ * js / j->splitsJ, j->nJ * (js + 1) / j->splitsJ, Ap);    \
    }                                                                                                                \
  }                                                                                                                  \
  TARGET_##isa void sgemm_builtin__##isa(const GemmCall *g) {                                                        \
    int T = threads();                                                                                               \
    if ((double)g->M * g->N * g->K < PAR_MIN_FLOPS || team_size() > 1) T = 1;                                       \
    int64_t ncMax = min64(NC, (g->N + NR - 1) / NR * NR);                                                            \
    float *Bp = g->Bpre != NULL ? NULL : pack_buffer(0, (size_t)ncMax * KC);                                        \
    if (g->Bpre == NULL && Bp == NULL) abort(); /* at most 2-3 MB, kept per thread: out of memory */               \
    for (int64_t jc = 0; jc < g->N; jc += NC) {                                                                      \
      int64_t nc = min64(NC, g->N - jc), nJ = (nc + NR - 1) / NR;                                                    \
      for (int64_t pc = 0; pc < g->K; pc += KC) {                                                                    \
        int64_t kc = min64(KC, g->K - pc), nIC = (g->M + MC - 1) / MC;                                               \
        int64_t splitsJ = nIC >= T ? 1 : min64(nJ, (T + nIC - 1) / nIC);                                             \
        /* sgemm_pack's layout: block (jc, pc) at jc·K + pc·nJ·NR (full blocks are NC wide). */                     \
        float *bp = g->Bpre != NULL ? (float *)g->Bpre + jc * g->K + pc * nJ * NR : Bp;                             \
        BlockJob j = {g, bp, jc, nc, pc, kc, nIC, splitsJ, nJ};                                                      \
        if (g->Bpre == NULL) {                                                                                       \
          if (T > 1 && nJ > 1) parallel_run(T, sgemm_pack_b__##isa, &j);                                            \
          else sgemm_pack_b__##isa(0, 1, &j);                                                                        \
        }                                                                                                            \
        if (T > 1 && nIC * splitsJ > 1) parallel_run(T, sgemm_tiles__##isa, &j);                                      \
        else sgemm_tiles__##isa(0, 1, &j);                                                                           \
      }                                                                                                              \
    }                                                                                                                \
  }                                                                                                                  \
  /* Pre-packed B (decoding): threads split B's panels over the whole of N, and each runs every     \
   * inner block over its panels, so a product takes one parallel_run (the general driver's two per \
   * block cost more than a product of a few rows). A is packed per inner block, all rows. */       \
  TARGET_##isa static void sgemm_prepacked_cols__##isa(int t, int T, void *ctx) {                                    \
    const GemmCall *g = ctx;                                                                                         \
    const bool bf = g->bpre_bf16;                                                                                    \
    int64_t nJall = (g->N + NR - 1) / NR, q0 = nJall * t / T, q1 = nJall * (t + 1) / T;                             \
    float *Ap = pack_buffer(1, (size_t)MC * KC);                                                                     \
    if (Ap == NULL) abort(); /* 150-300 KB: the process is out of memory */                                         \
    for (int64_t pc = 0; pc < g->K; pc += KC) {                                                                      \
      int64_t kc = min64(KC, g->K - pc);                                                                             \
      for (int64_t ic = 0; ic < g->M; ic += MC) {                                                                    \
        int64_t mc = min64(MC, g->M - ic);                                                                           \
        pack_a(g, ic, mc, pc, kc, MR, Ap);                                                                           \
        /* bf16 packs: A is rounded too, so the product is precision bf16's (bf16 inputs, fp32 sums). */           \
        if (bf) round_bf16_inplace(Ap, (mc + MR - 1) / MR * MR * kc);                                                \
        for (int64_t q = q0; q < q1; q++) {                                                                          \
          int64_t jc = q * NR / NC * NC, nc = min64(NC, g->N - jc), nJ = (nc + NR - 1) / NR, qi = q - jc / NR;      \
          int64_t off = jc * g->K + pc * nJ * NR + qi * kc * NR; /* elements of the pack */                          \
          float *cq = g->C + ic * g->ldc + jc + qi * NR;                                                             \
          int64_t nr = min64(NR, nc - qi * NR);                                                                      \
          const void *bp = bf ? (const void *)((const uint16_t *)g->Bpre + off) : (const void *)(g->Bpre + off);    \
          for (int64_t p = 0; p < mc; p += MR)                                                                       \
            /* bf as a constant in each call, so that each kernel is compiled without the branch */            \
            if (bf) ukr_##isa(true, kc, Ap + p * kc, bp, cq + p * g->ldc, g->ldc, g->alpha, min64(MR, mc - p), nr);    \
            else ukr_##isa(false, kc, Ap + p * kc, bp, cq + p * g->ldc, g->ldc, g->alpha, min64(MR, mc - p), nr);      \
        }                                                                                                            \
      }                                                                                                              \
    }                                                                                                                \
  }                                                                                                                  \
  TARGET_##isa void sgemm_prepacked__##isa(const GemmCall *g) {                                                      \
    int T = threads();                                                                                               \
    int64_t nJall = (g->N + NR - 1) / NR;                                                                            \
    if (2.0 * g->M * g->N * g->K < PREPACKED_PAR_MIN_FLOPS || team_size() > 1 || nJall < 2) T = 1;                        \
    if (T > 1) parallel_run(T, sgemm_prepacked_cols__##isa, (void *)g);                                              \
    else sgemm_prepacked_cols__##isa(0, 1, (void *)g);                                                               \
  }                                                                                                                  \
  TARGET_##isa int64_t sgemm_packed_floats__##isa(int64_t N, int64_t K) { return (N + NR - 1) / NR * NR * K; }      \
  /* bf16 packs (`dst` then holds uint16): each block is packed in fp32, then rounded, each row of NR   \
   * interleaved: column j of the panel in element 2j, column j + NR/2 in 2j + 1, so that a 32-bit      \
   * word holds both and the kernels widen them with a shift and a mask. */                            \
  TARGET_##isa void sgemm_pack__##isa(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, float *dst, bool bf16) {  \
    GemmCall g = {false, tB, 0, N, K, 0, ldb, 0, 1.0f, NULL, B, NULL, NULL, false};                                  \
    float *tmp = bf16 ? pack_buffer(0, (size_t)NC * KC) : NULL;                                                      \
    if (bf16 && tmp == NULL) abort(); /* 2-3 MB, kept per thread: out of memory */                                  \
    for (int64_t jc = 0; jc < N; jc += NC) {                                                                         \
      int64_t nc = min64(NC, N - jc), nJ = (nc + NR - 1) / NR;                                                       \
      for (int64_t pc = 0; pc < K; pc += KC) {                                                                       \
        int64_t kc = min64(KC, K - pc), at = jc * K + pc * nJ * NR;                                                  \
        if (!bf16) {                                                                                                 \
          pack_b(&g, jc, nc, pc, kc, NR, 0, nJ, dst + at);                                                           \
          continue;                                                                                                  \
        }                                                                                                            \
        pack_b(&g, jc, nc, pc, kc, NR, 0, nJ, tmp);                                                                  \
        uint16_t *d = (uint16_t *)dst + at;                                                                          \
        for (int64_t r = 0; r < nJ * kc; r++)                                                                        \
          for (int64_t j = 0; j < NR / 2; j++) {                                                                     \
            d[r * NR + 2 * j] = bf16_from_f32(tmp[r * NR + j]);                                                      \
            d[r * NR + 2 * j + 1] = bf16_from_f32(tmp[r * NR + j + NR / 2]);                                         \
          }                                                                                                          \
      }                                                                                                              \
    }                                                                                                                \
  }

SGEMM_VARIANT(generic, 4, 8, 256, 128, 2048)
#if MAGRPO_X86
SGEMM_VARIANT(avx2, 6, 16, 256, 144, 2048)
SGEMM_VARIANT(avx512, 12, 32, 192, 144, 2048)
#endif

/* ---------------------------------------------------------------------------------------------
 * Pre-packed B (decoding): the caller keeps the packed weights for as long as they do not change.
 * ------------------------------------------------------------------------------------------- */

/* The buffer comes from JavaScript (a Float32Array, 8- or 16-byte aligned): the pack starts at its
 * first 64-byte boundary (15 floats of slack at most) with a 64-byte header naming its layout,
 * then the data. The layout is the packing's choice (the bf16 kernel in use then, which tests
 * may switch), so the product reads it from the pack rather than asking again. */
typedef enum { PACK_FP32 = 0x50463332, PACK_BF16_WIDEN = 0x50423136, PACK_BF16_AMX = 0x50414d58 } PackLayout;
#define PACK_HEADER_FLOATS 16

static float *aligned64(const float *buf) { return (float *)(((uintptr_t)buf + 63) & ~(uintptr_t)63); }

/* bf16 packs hold two values per float of the buffer; the buffer fits either bf16 layout. */
int64_t sgemm_packed_floats(int64_t N, int64_t K, bool bf16) {
  int64_t elems = kern->sgemm_packed_floats(N, K);
  if (bf16) {
    int64_t amx = amx_packed_elems(N, K);
    elems = ((amx > elems ? amx : elems) + 1) / 2;
  }
  return elems + PACK_HEADER_FLOATS + 16;
}

void sgemm_pack_b(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, float *buf, bool bf16) {
  float *head = aligned64(buf), *data = head + PACK_HEADER_FLOATS;
  PackLayout layout = !bf16 ? PACK_FP32 : bf16_kernel() == BF16K_AMX ? PACK_BF16_AMX : PACK_BF16_WIDEN;
  memcpy(head, &layout, sizeof layout);
  if (layout == PACK_BF16_AMX) amx_pack_b(tB, N, K, B, ldb, (uint16_t *)data);
  else kern->sgemm_pack(tB, N, K, B, ldb, data, bf16);
}

static PackLayout pack_layout(const float *buf) {
  PackLayout layout;
  memcpy(&layout, aligned64(buf), sizeof layout);
  return layout;
}

bool sgemm_pack_matches(const float *buf, bool bf16) {
  PackLayout layout = pack_layout(buf);
  return bf16 ? layout == PACK_BF16_WIDEN || (layout == PACK_BF16_AMX && bf16_kernel_has_amx()) : layout == PACK_FP32;
}

void sgemm_prepacked(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *buf, bool bf16, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  for (int64_t i = 0; i < M && beta != 1.0f; i++) {
    float *row = C + i * ldc;
    if (beta == 0.0f)
      memset(row, 0, (size_t)N * sizeof(float));
    else
      for (int64_t j = 0; j < N; j++) row[j] *= beta;
  }
  if (K == 0 || alpha == 0.0f) return;
  if (!sgemm_pack_matches(buf, bf16)) abort(); /* binding.c checks every pack it is given */
  const float *data = aligned64(buf) + PACK_HEADER_FLOATS;
  if (pack_layout(buf) == PACK_BF16_AMX) {
    int T = threads();
    if (2.0 * M * N * K < PREPACKED_PAR_MIN_FLOPS || team_size() > 1) T = 1;
    amx_gemm_prepacked(M, N, K, alpha, A, lda, (const uint16_t *)data, C, ldc, T);
    return;
  }
  GemmCall g = {false, false, M, N, K, lda, 0, ldc, alpha, A, NULL, C, data, bf16};
  kern->sgemm_prepacked(&g);
}
