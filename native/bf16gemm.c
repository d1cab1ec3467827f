/*
 * Mixed-precision GEMM: C = alpha · bf16(op(A)) · bf16(op(B)) + beta · C, fp32 in, fp32 out,
 * fp32 accumulation. `precision: bf16` routes every product of at least BF16_MIN_ROWS rows here
 * (training's forward and backward, prompt passes); decoding's few-rows products stay fp32,
 * because they are bound by reading fp32 weights, which a per-call conversion would only add to.
 *
 * Inputs are rounded to bfloat16 (round to nearest even, subnormals to zero: bf16_from_f32) while
 * they are packed, so there is no separate conversion pass: VCVTNE2PS2BF16 rounds 32 floats in one
 * instruction (the integer rounding it replaced made packing 12% of the 10m bf16 training step).
 * With AVX-512 BF16 (Zen 4/5, Cooper Lake, Sapphire Rapids) the micro-kernel is VDPBF16PS: each
 * fp32 lane accumulates a[2k]·b[2k] + a[2k+1]·b[2k+1], twice the multiply-adds of an FMA per
 * instruction. Elsewhere the same rounding feeds the fp32 sgemm, so results agree across machines
 * up to summation order, only the speed differs.
 *
 * Blocking as in sgemm.c (BLIS): B packed in panels of NR columns × KC inner (k-pairs
 * interleaved: dst[((q·kc2 + kk)·NR + j)·2 + {0,1}] = B[2kk + {0,1}][j]), A in panels of MR rows
 * (dst[(kk·MR + i)·2 + {0,1}] = A[i][2kk + {0,1}]); an odd inner block is padded with a zero.
 * Packing runs in AVX-512 registers (rounding 16 floats at once, 16 × 16 word transposes where the
 * source runs along k): written as scalar loops it took a fifth of a product's time. When all of
 * B's inner blocks fit PASS_BYTES packed, each row block of C runs through every inner block
 * before the next, so C is read and written once rather than once per block.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "magrpo.h"

#if MAGRPO_X86
#include "bf16pack.h"
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

const char *const BF16_KERNEL_NAMES[BF16K_COUNT] = {"emulated", "avx512bf16", "amx"};

static Bf16Kernel g_kernel = BF16K_EMULATED;
static char g_kernel_error[320];

const char *bf16_kernel_init(void) {
  const char *want = getenv("MAGRPO_BF16_KERNEL");
  bool automatic = want == NULL || *want == '\0' || strcmp(want, "auto") == 0;
  bool vdp = cpu_has_avx512bf16() && kern->isa == ISA_AVX512;
  char why[200] = "it needs AVX-512 BF16 and the avx512 variant of the kernels";
  /* The tile permission is asked for only where AMX would run. */
  bool amx = vdp && (automatic || strcmp(want, "amx") == 0) && amx_enable(why, sizeof why);
  if (automatic) g_kernel = amx ? BF16K_AMX : vdp ? BF16K_AVX512BF16 : BF16K_EMULATED;
  else if (strcmp(want, "amx") == 0 && amx) g_kernel = BF16K_AMX;
  else if (strcmp(want, "avx512bf16") == 0 && vdp) g_kernel = BF16K_AVX512BF16;
  else if (strcmp(want, "amx") == 0 || strcmp(want, "avx512bf16") == 0)
    snprintf(g_kernel_error, sizeof g_kernel_error, "MAGRPO_BF16_KERNEL=%s: this machine cannot run it (%s)", want, why);
  else if (strcmp(want, "emulated") == 0) g_kernel = BF16K_EMULATED;
  else snprintf(g_kernel_error, sizeof g_kernel_error, "MAGRPO_BF16_KERNEL=%.40s is not one of amx, avx512bf16, emulated, auto", want);
  return g_kernel_error[0] ? g_kernel_error : NULL;
}

Bf16Kernel bf16_kernel(void) { return g_emulate ? BF16K_EMULATED : g_kernel; }

bool bf16_native(void) { return bf16_kernel() != BF16K_EMULATED; }

bool bf16_kernel_has_amx(void) { return g_kernel == BF16K_AMX; }

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
#define PASS_BYTES (8.0 * 1024 * 1024) /* packed B kept for a whole-K pass: about an L3 */
#define PREFETCH_ROWS 16 /* rows ahead that pack_rows_paired prefetches */

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

/* `rows` (≤ 16) rows of op(X), each row's kc inner elements contiguous from src[row · ld], as pair
 * words dst32[kk · stride + row] for rows [0, width) (rows past `rows` zero), kk < ceil(kc / 2):
 * 16 pairs of every row at a time, transposed in registers. */
TARGET_bf16 static void pack_rows_transposed(const float *src, int64_t ld, int rows, int64_t kc, uint32_t *dst, int64_t stride, int width) {
  __mmask16 keep = (__mmask16)((1u << width) - 1);
  int64_t kc2 = (kc + 1) / 2;
  for (int64_t kk = 0; kk < kc2; kk += 16) {
    int n = kc2 - kk < 16 ? (int)(kc2 - kk) : 16, floats = kc - 2 * kk < 32 ? (int)(kc - 2 * kk) : 32;
    __m512i r[16];
    for (int i = 0; i < 16; i++) r[i] = i < rows ? pairs32(src + i * ld + 2 * kk, floats) : _mm512_setzero_si512();
    transpose16(r);
    for (int q = 0; q < n; q++) _mm512_mask_storeu_epi32(dst + (kk + q) * stride, keep, r[q]);
  }
}

/* Pair words of rows 2kk and 2kk + 1 (the second absent when 2kk + 1 = kc) of a row-major X, the
 * block's `cols` columns cut into panels of `width` (12 or 32) columns of kc2 = ceil(kc / 2) pairs
 * each: dst32[(panel · kc2 + kk) · width + j] = (X[2kk][c], X[2kk+1][c]), c = panel · width + j;
 * columns past `cols` zero. Row by row across all panels: one pass over each row's cache lines (a
 * panel at a time would stride down a power-of-two leading dimension, which the caches' sets do
 * not hold). */
TARGET_bf16 static void pack_rows_paired(const float *src, int64_t ld, int64_t cols, int64_t kc, uint32_t *dst, int width) {
  int64_t kc2 = (kc + 1) / 2, panels = (cols + width - 1) / width;
  int step = width < 16 ? width : 16;
  for (int64_t kk = 0; kk < kc2; kk++) {
    const float *s0 = src + 2 * kk * ld;
    bool pair = 2 * kk + 1 < kc;
    /* The rows a few pairs ahead: a short run of lines per row, then a long jump, is a pattern the
     * hardware prefetchers miss, and the pack would then be a large share of a dYᵀ·X product. */
    if (2 * kk + PREFETCH_ROWS + 1 < kc)
      for (int64_t c = 0; c < cols; c += 16) {
        _mm_prefetch((const char *)(s0 + PREFETCH_ROWS * ld + c), _MM_HINT_T0);
        _mm_prefetch((const char *)(s0 + (PREFETCH_ROWS + 1) * ld + c), _MM_HINT_T0);
      }
    for (int64_t q = 0; q < panels; q++) {
      uint32_t *d = dst + (q * kc2 + kk) * width;
      for (int j = 0; j < width; j += step) {
        int64_t c = q * width + j, n = cols - c;
        __mmask16 load = n <= 0 ? 0 : n >= step ? (__mmask16)((1u << step) - 1) : (__mmask16)((1u << n) - 1);
        __m512i w = pair ? pairs_of_rows(s0 + c, s0 + ld + c, load) : round16(_mm512_maskz_loadu_ps(load, s0 + c));
        _mm512_mask_storeu_epi32(d + j, (__mmask16)((1u << step) - 1), w);
      }
    }
  }
}

/* Rows [r0, r0 + mr) × inner [k0, k0 + kc) of op(A), kc2 = ceil(kc / 2) pairs per panel of MR rows:
 * dst32[kk·MR + i] = (A[i][2kk], A[i][2kk+1]); rows past mr, and an odd kc's last partner, zero. */
TARGET_bf16 static void pack_a(const GemmCall *g, int64_t r0, int64_t mr, int64_t k0, int64_t kc, uint16_t *dst) {
  int64_t kc2 = (kc + 1) / 2;
  if (g->tA) {
    pack_rows_paired(g->A + k0 * g->lda + r0, g->lda, mr, kc, (uint32_t *)dst, MR);
    return;
  }
  for (int64_t p = 0; p < mr; p += MR, dst += kc2 * MR * 2)
    pack_rows_transposed(g->A + (r0 + p) * g->lda + k0, g->lda, (int)min64(mr - p, MR), kc, (uint32_t *)dst, MR, MR);
}

/* Panels [q0, q1) of NR columns of the block at column c0 (nc wide) × inner [k0, k0 + kc):
 * dst32[(q·kc2 + kk)·NR + j] = (B[2kk][j], B[2kk+1][j]), in two halves of 16 columns. */
TARGET_bf16 static void pack_b(const GemmCall *g, int64_t c0, int64_t nc, int64_t k0, int64_t kc, int64_t q0, int64_t q1, uint16_t *dst) {
  int64_t kc2 = (kc + 1) / 2;
  if (!g->tB) {
    int64_t j0 = q0 * NR, cols = (q1 * NR < nc ? q1 * NR : nc) - j0;
    pack_rows_paired(g->B + k0 * g->ldb + c0 + j0, g->ldb, cols, kc, (uint32_t *)(dst + q0 * kc2 * NR * 2), NR);
    return;
  }
  for (int64_t q = q0; q < q1; q++) {
    uint32_t *d32 = (uint32_t *)(dst + q * kc2 * NR * 2);
    for (int half = 0; half < NR; half += 16) {
      int64_t c = q * NR + half;
      int cols = nc - c <= 0 ? 0 : (int)min64(nc - c, 16);
      pack_rows_transposed(g->B + (c0 + c) * g->ldb + k0, g->ldb, cols, kc, d32 + half, NR, 16);
    }
  }
}

TARGET_bf16 static void ukr_bf16(int64_t kc2, const uint16_t *a, const uint16_t *b, float *c, int64_t ldc, float alpha, float beta, bool first, int64_t mr,
                                 int64_t nr) {
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
  /* The first inner block writes C = alpha·acc + beta·C (C unread when beta is 0), later ones add
   * alpha·acc: no separate pass over C to scale it first. */
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta), zero = _mm512_setzero_ps();
  if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; i++) {
      float *ci = c + i * ldc;
      __m512 c0 = zero, c1 = zero;
      if (!first || beta != 0.0f) {
        c0 = _mm512_loadu_ps(ci);
        c1 = _mm512_loadu_ps(ci + 16);
        if (first && beta != 1.0f) c0 = _mm512_mul_ps(vb, c0), c1 = _mm512_mul_ps(vb, c1);
      }
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, acc[i][0], c0));
      _mm512_storeu_ps(ci + 16, _mm512_fmadd_ps(va, acc[i][1], c1));
    }
    return;
  }
  float tile[MR * NR] __attribute__((aligned(64)));
  for (int i = 0; i < MR; i++) {
    _mm512_store_ps(tile + i * NR, acc[i][0]);
    _mm512_store_ps(tile + i * NR + 16, acc[i][1]);
  }
  for (int64_t i = 0; i < mr; i++)
    for (int64_t j = 0; j < nr; j++) {
      float *cij = c + i * ldc + j;
      float old = !first ? *cij : beta == 0.0f ? 0.0f : beta * *cij; /* C unread when beta is 0 */
      *cij = fmaf(alpha, tile[i * NR + j], old); /* as the full tile's vector FMA rounds */
    }
}

/* One pass: the inner blocks [pc0, pc1) of the column block jc. B's blocks are all packed first
 * (slabs `bslab` elements apart), then each row block of C takes every inner block in turn, so its
 * tiles stay in cache from one inner block to the next rather than going out to memory and back
 * once per block. */
typedef struct {
  const GemmCall *g; /* C += alpha · op(A) · op(B) */
  float beta;        /* applied to C by the first inner block's tiles */
  uint16_t *Bp;
  int64_t jc, nc, nJ, pc0, pc1, bslab;
  int64_t nIC, splitsJ;
} Bf16Job;

static void job_pack_b(int t, int T, void *ctx) {
  const Bf16Job *j = ctx;
  for (int64_t pc = j->pc0, s = 0; pc < j->pc1; pc += KC, s++)
    pack_b(j->g, j->jc, j->nc, pc, min64(KC, j->pc1 - pc), j->nJ * t / T, j->nJ * (t + 1) / T, j->Bp + s * j->bslab);
}

/* Rows [ic, ic + mc) (mc ≤ MC) × B panels [q0, q1) of the pass, every inner block in turn. */
static void tiles_block(const Bf16Job *j, int64_t ic, int64_t mc, int64_t q0, int64_t q1, uint16_t *Ap) {
  const GemmCall *g = j->g;
  for (int64_t pc = j->pc0, s = 0; pc < j->pc1; pc += KC, s++) {
    int64_t kc = min64(KC, j->pc1 - pc), kc2 = (kc + 1) / 2;
    pack_a(g, ic, mc, pc, kc, Ap);
    for (int64_t q = q0; q < q1; q++) {
      int64_t nr = min64(NR, j->nc - q * NR);
      const uint16_t *bp = j->Bp + s * j->bslab + q * kc2 * NR * 2;
      float *cq = g->C + ic * g->ldc + j->jc + q * NR;
      for (int64_t p = 0; p < mc; p += MR)
        ukr_bf16(kc2, Ap + p * kc2 * 2, bp, cq + p * g->ldc, g->ldc, g->alpha, j->beta, pc == 0, min64(MR, mc - p), nr);
    }
  }
}

/* With rows enough for every thread, each takes its row_share (magrpo.h); with fewer, threads split
 * the B panels of each row block. */
static void job_tiles(int t, int T, void *ctx) {
  const Bf16Job *j = ctx;
  const GemmCall *g = j->g;
  uint16_t *Ap = bbuffer(1, (size_t)MC * (KC + 1));
  if (Ap == NULL) abort();
  if (j->splitsJ == 1) {
    RowShare rs = row_share(g->M, MR, MC, t, T);
    for (int64_t b = 0; b < rs.blocks; b++) {
      int64_t ic = row_block_start(&rs, b), end = row_block_start(&rs, b + 1);
      if (end > ic) tiles_block(j, ic, end - ic, 0, j->nJ, Ap);
    }
    return;
  }
  int64_t tasks = j->nIC * j->splitsJ;
  for (int64_t task = tasks * t / T; task < tasks * (t + 1) / T; task++) {
    int64_t ib = task / j->splitsJ, js = task % j->splitsJ, ic = ib * MC;
    tiles_block(j, ic, min64(MC, g->M - ic), j->nJ * js / j->splitsJ, j->nJ * (js + 1) / j->splitsJ, Ap);
  }
}

static void gemm_bf16_avx512(const GemmCall *g, float beta) {
  int T = threads();
  if ((double)g->M * g->N * g->K < PAR_MIN_FLOPS || team_size() > 1) T = 1;
  int64_t ncMax = min64(NC, (g->N + NR - 1) / NR * NR), bslab = ncMax * (KC + 1);
  /* Inner blocks per pass: all of K while B's packed slabs stay within PASS_BYTES, else one. */
  int64_t blocks = (g->K + KC - 1) / KC, perPass = (double)bslab * blocks * sizeof(uint16_t) <= PASS_BYTES ? blocks : 1;
  uint16_t *Bp = bbuffer(0, (size_t)(bslab * perPass));
  if (Bp == NULL) abort();
  int64_t nIC = (g->M + MC - 1) / MC;
  for (int64_t jc = 0; jc < g->N; jc += NC) {
    int64_t nc = min64(NC, g->N - jc), nJ = (nc + NR - 1) / NR;
    int64_t splitsJ = nIC >= T ? 1 : min64(nJ, (T + nIC - 1) / nIC);
    for (int64_t pc0 = 0; pc0 < g->K; pc0 += perPass * KC) {
      Bf16Job j = {g, beta, Bp, jc, nc, nJ, pc0, min64(g->K, pc0 + perPass * KC), bslab, nIC, splitsJ};
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
  Bf16Kernel k = bf16_kernel();
  if (K > 0 && alpha != 0.0f && k != BF16K_EMULATED) {
    GemmCall g = {tA, tB, M, N, K, lda, ldb, ldc, alpha, A, B, C, NULL, false};
    if (k == BF16K_AMX) gemm_bf16_amx(&g, beta);
    else gemm_bf16_avx512(&g, beta);
    return;
  }
#endif
  gemm_bf16_emulated(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
