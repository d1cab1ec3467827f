/*
 * The bf16 product on AMX tiles (Sapphire Rapids and later): C = alpha · bf16(op(A)) · bf16(op(B))
 * + beta · C, fp32 accumulation, the contract of bf16gemm.c's VDPBF16PS path, which it replaces
 * where the CPU has AMX-BF16 and AMX-TILE and Linux grants the process the tile state.
 *
 * TDPBF16PS multiplies a 16 × 32 bf16 tile of A by a 16 (pairs) × 16 × 2 bf16 tile of B into a
 * 16 × 16 fp32 tile of C: 8,192 multiply-adds per instruction, against 32 for VDPBF16PS. The
 * micro-kernel holds 2 × 2 C tiles (32 × 32 of C) in tiles 0-3, and per 32 of the inner dimension
 * loads two A tiles (4, 5) and two B tiles (6, 7): 4 tile products per 4 KB loaded, from packs
 * that sit in L2 (a B panel of a shallow block in L1).
 *
 * Packing rounds as bf16gemm.c does (VCVTNE2PS2BF16, bf16_from_f32's round to nearest even) into
 * the layouts the tiles load with a 64-byte stride, inner dimension zero-padded to a multiple of 32:
 *   A: panels of 32 rows, each two halves of 16 rows, each half its 1 KB tiles in inner order:
 *      dst32[(h · nkb + kb) · 256 + r · 16 + w] = (A[16h + r][2kk], A[16h + r][2kk + 1]), kk = 16kb + w
 *   B: panels of 32 columns, each two halves of 16 columns, pairs of inner rows (VNNI):
 *      dst32[(h · nkb · 16 + kk) · 16 + j] = (B[2kk][16h + j], B[2kk + 1][16h + j])
 * Rows, columns and inner elements past the matrix are zeros, so edge tiles need no other care
 * than where their results are written.
 *
 * Tile state is per thread: each thread that runs tiles loads the configuration at the start of
 * its share of a product and releases the tiles at its end (TILERELEASE returns the tile state to
 * its init value, so the kernel does not save 8 KB of tiles on each context switch between
 * products). The permission to use them (arch_prctl ARCH_REQ_XCOMP_PERM) is the process's, asked
 * for once at load; without it the first tile instruction would kill the process with SIGILL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "magrpo.h"

#if MAGRPO_AMX
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bf16pack.h"

#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

bool amx_enable(char *why, size_t n) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) {
    snprintf(why, n, "the CPU has no AMX-BF16 and AMX-TILE");
    return false;
  }
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
    snprintf(why, n, "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: %s", strerror(errno));
    return false;
  }
  unsigned long perm = 0;
  if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) != 0 || !(perm & (1ul << XFEATURE_XTILEDATA))) {
    snprintf(why, n, "the kernel did not grant the AMX tile state");
    return false;
  }
  return true;
}

#define TARGET_amx __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

#define AMR 32  /* rows of C per micro-kernel: two A tiles */
#define ANR 32  /* columns of C per micro-kernel: two B tiles */
#define AMC 128 /* rows per A block: up to 256 KB packed, in L2 */
#define ANC 2048
#define PASS_BYTES (8.0 * 1024 * 1024) /* packed B kept for a whole-K pass: about an L3 */

/* Packing buffers, per thread: 0 B, 1 A (products), 2 A (pre-packed products), 3-7 amx_scratch's;
 * grown on demand and kept (64-byte aligned). */
static __thread uint16_t *tl_buf[8];
static __thread size_t tl_cap[8];

static uint16_t *buffer(int slot, size_t n) {
  if (tl_cap[slot] < n) {
    free(tl_buf[slot]);
    tl_buf[slot] = aligned_alloc(64, (n * sizeof(uint16_t) + 63) & ~(size_t)63);
    tl_cap[slot] = tl_buf[slot] ? n : 0;
  }
  return tl_buf[slot];
}

/* Elements of one packed panel (32 rows or columns) of an inner block of kc. */
static inline int64_t panel_elems(int64_t kc) { return (kc + 31) / 32 * 32 * 32; }

/* Palette 1, all eight tiles 16 rows × 64 bytes. */
typedef struct __attribute__((aligned(64))) {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

TARGET_amx static void tiles_begin(void) {
  TileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
  /* GCC does not see LDTILECFG read the struct and may drop the stores above (it did, where this
   * function was not inlined: only the palette byte was written, and the first tile instruction
   * raised SIGILL). The barrier makes them happen. */
  __asm__ __volatile__("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

TARGET_amx static void tiles_end(void) { _tile_release(); }

/* A half panel of op(A) whose rows are contiguous along k (tA false): 16 rows (`rows` of them, the
 * rest zero) × kc, each row's 32 inner elements of a tile in one conversion. */
TARGET_amx static void pack_a_rows(const float *src, int64_t ld, int rows, int64_t kc, uint32_t *dst) {
  int64_t nkb = (kc + 31) / 32;
  for (int r = 0; r < 16; r++) {
    const float *s = src + r * ld;
    for (int64_t kb = 0; kb < nkb; kb++) {
      int n = (int)min64(32, kc - 32 * kb);
      __m512i w = r < rows ? pairs32(s + 32 * kb, n) : _mm512_setzero_si512();
      _mm512_store_si512(dst + kb * 256 + r * 16, w);
    }
  }
}

/* A half panel of op(A) stored transposed (tA: A is [K, M], op(A)'s 16 rows are columns): per tile,
 * 16 pair words of 16 columns from pairs of rows, transposed in registers to rows of op(A). */
TARGET_amx static void pack_a_cols(const float *src, int64_t ld, int cols, int64_t kc, uint32_t *dst) {
  int64_t nkb = (kc + 31) / 32;
  __mmask16 m = (__mmask16)((1u << cols) - 1);
  for (int64_t kb = 0; kb < nkb; kb++) {
    __m512i r[16];
    for (int q = 0; q < 16; q++) {
      int64_t k = 32 * kb + 2 * q;
      const float *s = src + k * ld;
      r[q] = k + 1 < kc ? pairs_of_rows(s, s + ld, m) : k < kc ? round16(_mm512_maskz_loadu_ps(m, s)) : _mm512_setzero_si512();
    }
    transpose16(r);
    for (int j = 0; j < 16; j++) _mm512_store_si512(dst + kb * 256 + j * 16, r[j]);
  }
}

/* Rows [r0, r0 + mr) × inner [k0, k0 + kc) of op(A) as panels of AMR rows (layout above). */
TARGET_amx static void pack_a(const GemmCall *g, int64_t r0, int64_t mr, int64_t k0, int64_t kc, uint16_t *dst) {
  int64_t half = panel_elems(kc) / 2;
  for (int64_t h = 0; h < (mr + AMR - 1) / AMR * 2; h++, dst += half) {
    int rows = (int)(mr - 16 * h <= 0 ? 0 : min64(16, mr - 16 * h));
    if (rows == 0) memset(dst, 0, (size_t)half * sizeof(uint16_t));
    else if (!g->tA) pack_a_rows(g->A + (r0 + 16 * h) * g->lda + k0, g->lda, rows, kc, (uint32_t *)dst);
    else pack_a_cols(g->A + k0 * g->lda + r0 + 16 * h, g->lda, rows, kc, (uint32_t *)dst);
  }
}

/* Half panels [h0, h1) (16 columns each) of the block at column c0 (nc wide) × inner [k0, k0 + kc)
 * of op(B), layout above. B row-major (tB false): row by row across the half panels, one pass over
 * each row's cache lines. */
TARGET_amx static void pack_b_rows(const GemmCall *g, int64_t c0, int64_t nc, int64_t k0, int64_t kc, int64_t h0, int64_t h1, uint16_t *dst) {
  int64_t kc2 = (kc + 1) / 2, kc2p = (kc + 31) / 32 * 16;
  for (int64_t kk = 0; kk < kc2p; kk++) {
    const float *s0 = g->B + (k0 + 2 * kk) * g->ldb + c0;
    bool pair = 2 * kk + 1 < kc;
    for (int64_t h = h0; h < h1; h++) {
      uint32_t *d = (uint32_t *)dst + (h * kc2p + kk) * 16;
      int64_t c = 16 * h, n = nc - c;
      __mmask16 load = n <= 0 || kk >= kc2 ? 0 : n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
      __m512i w = load == 0 ? _mm512_setzero_si512() : pair ? pairs_of_rows(s0 + c, s0 + g->ldb + c, load) : round16(_mm512_maskz_loadu_ps(load, s0 + c));
      _mm512_store_si512(d, w);
    }
  }
}

/* The same from B stored [N, K] (tB): each column of op(B) a contiguous row, 16 of them at a time
 * turned into pair rows by a transpose in registers. */
TARGET_amx static void pack_b_cols(const GemmCall *g, int64_t c0, int64_t nc, int64_t k0, int64_t kc, int64_t h0, int64_t h1, uint16_t *dst) {
  int64_t kc2p = (kc + 31) / 32 * 16;
  for (int64_t h = h0; h < h1; h++) {
    uint32_t *d = (uint32_t *)dst + h * kc2p * 16;
    int64_t c = 16 * h;
    int cols = nc - c <= 0 ? 0 : (int)min64(nc - c, 16);
    const float *src = g->B + (c0 + c) * g->ldb + k0;
    for (int64_t kk = 0; kk < kc2p; kk += 16) {
      int n = (int)min64(32, kc - 2 * kk);
      __m512i r[16];
      for (int i = 0; i < 16; i++) r[i] = i < cols ? pairs32(src + i * g->ldb + 2 * kk, n) : _mm512_setzero_si512();
      transpose16(r);
      for (int q = 0; q < 16; q++) _mm512_store_si512(d + (kk + q) * 16, r[q]);
    }
  }
}

/* C[0:mr, 0:nr] (mr, nr ≤ 32) gets alpha · Σ over nkb tiles of the inner dimension: the first inner
 * block of the product writes alpha · acc + beta · C (C unread when beta is 0), later ones add. With
 * alpha 1 and a whole 32 × 32 tile, C itself is the accumulator: loaded into the tiles (or zeroed,
 * for the first block with beta 0) and stored back, no pass over a scratch tile. */
TARGET_amx static inline __attribute__((always_inline)) void ukr_amx_halves(int64_t nkb, const uint16_t *a, int64_t ahalf, const uint16_t *b, int64_t bhalf,
                                                                           float *c, int64_t ldc, float alpha, float beta, bool first, int64_t mr, int64_t nr) {
  const bool rows2 = mr > 16, cols2 = nr > 16;
  const bool direct = alpha == 1.0f && mr == AMR && nr == ANR && (!first || beta == 0.0f || beta == 1.0f);
  const size_t ldcb = (size_t)ldc * sizeof(float);
  if (direct && !(first && beta == 0.0f)) {
    _tile_loadd(0, c, ldcb);
    _tile_loadd(1, c + 16, ldcb);
    _tile_loadd(2, c + 16 * ldc, ldcb);
    _tile_loadd(3, c + 16 * ldc + 16, ldcb);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t kb = 0; kb < nkb; kb++) {
    _tile_loadd(4, a + kb * 512, 64);
    _tile_loadd(6, b + kb * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (cols2) {
      _tile_loadd(7, b + bhalf + kb * 512, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if (rows2) {
      _tile_loadd(5, a + ahalf + kb * 512, 64);
      _tile_dpbf16ps(2, 5, 6);
      if (cols2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (direct) {
    _tile_stored(0, c, ldcb);
    _tile_stored(1, c + 16, ldcb);
    _tile_stored(2, c + 16 * ldc, ldcb);
    _tile_stored(3, c + 16 * ldc + 16, ldcb);
    return;
  }
  float tile[AMR * ANR] __attribute__((aligned(64)));
  _tile_stored(0, tile, ANR * sizeof(float));
  _tile_stored(1, tile + 16, ANR * sizeof(float));
  _tile_stored(2, tile + 16 * ANR, ANR * sizeof(float));
  _tile_stored(3, tile + 16 * ANR + 16, ANR * sizeof(float));
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < mr; i++)
    for (int j = 0; j < 2; j++) {
      int64_t n = nr - 16 * j;
      if (n <= 0) break;
      __mmask16 m = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
      float *ci = c + i * ldc + 16 * j;
      __m512 old = _mm512_setzero_ps();
      if (!first || beta != 0.0f) { /* C unread when beta is 0 */
        old = _mm512_maskz_loadu_ps(m, ci);
        if (first && beta != 1.0f) old = _mm512_mul_ps(vb, old);
      }
      _mm512_mask_storeu_ps(ci, m, _mm512_fmadd_ps(va, _mm512_load_ps(tile + i * ANR + 16 * j), old));
    }
}

/* The same where both operands were packed with nkb tiles of inner dimension (each half panel
 * nkb · 512 elements long). */
TARGET_amx static void ukr_amx(int64_t nkb, const uint16_t *a, const uint16_t *b, float *c, int64_t ldc, float alpha, float beta, bool first, int64_t mr,
                               int64_t nr) {
  ukr_amx_halves(nkb, a, nkb * 512, b, nkb * 512, c, ldc, alpha, beta, first, mr, nr);
}

/* One pass: the inner blocks [pc0, pc1) of the column block jc, as bf16gemm.c's driver: B's blocks
 * packed first (slabs `bslab` elements apart), then each row block of C takes every inner block in
 * turn, so its tiles of C stay in cache between blocks. */
typedef struct {
  const GemmCall *g;
  float beta;
  uint16_t *Bp;
  int64_t jc, nc, nJ, pc0, pc1, bslab;
  int64_t nIC, splitsJ, kc;
} AmxJob;

TARGET_amx static void job_pack_b(int t, int T, void *ctx) {
  const AmxJob *j = ctx;
  int64_t halves = 2 * j->nJ, h0 = halves * t / T, h1 = halves * (t + 1) / T;
  for (int64_t pc = j->pc0, s = 0; pc < j->pc1; pc += j->kc, s++) {
    int64_t kc = min64(j->kc, j->pc1 - pc);
    if (j->g->tB) pack_b_cols(j->g, j->jc, j->nc, pc, kc, h0, h1, j->Bp + s * j->bslab);
    else pack_b_rows(j->g, j->jc, j->nc, pc, kc, h0, h1, j->Bp + s * j->bslab);
  }
}

/* Rows [ic, ic + mc) (mc ≤ AMC) × B panels [q0, q1) of the pass, every inner block in turn. */
TARGET_amx static void tiles_block(const AmxJob *j, int64_t ic, int64_t mc, int64_t q0, int64_t q1, uint16_t *Ap) {
  const GemmCall *g = j->g;
  for (int64_t pc = j->pc0, s = 0; pc < j->pc1; pc += j->kc, s++) {
    int64_t kc = min64(j->kc, j->pc1 - pc), nkb = (kc + 31) / 32, panel = panel_elems(kc);
    pack_a(g, ic, mc, pc, kc, Ap);
    for (int64_t q = q0; q < q1; q++) {
      int64_t nr = min64(ANR, j->nc - q * ANR);
      const uint16_t *bp = j->Bp + s * j->bslab + q * panel;
      float *cq = g->C + ic * g->ldc + j->jc + q * ANR;
      for (int64_t p = 0; p < mc; p += AMR)
        ukr_amx(nkb, Ap + p / AMR * panel, bp, cq + p * g->ldc, g->ldc, g->alpha, j->beta, pc == 0, min64(AMR, mc - p), nr);
    }
  }
}

/* With rows enough for every thread, each takes its row_share (magrpo.h); with fewer, threads split
 * the B panels of each row block. */
TARGET_amx static void job_tiles(int t, int T, void *ctx) {
  const AmxJob *j = ctx;
  const GemmCall *g = j->g;
  uint16_t *Ap = buffer(1, (size_t)(AMC * j->kc));
  if (Ap == NULL) abort(); /* 128 KB: the process is out of memory */
  tiles_begin();
  if (j->splitsJ == 1) {
    RowShare rs = row_share(g->M, AMR, AMC, t, T);
    for (int64_t b = 0; b < rs.blocks; b++) {
      int64_t ic = row_block_start(&rs, b), end = row_block_start(&rs, b + 1);
      if (end > ic) tiles_block(j, ic, end - ic, 0, j->nJ, Ap);
    }
  } else {
    int64_t tasks = j->nIC * j->splitsJ;
    for (int64_t task = tasks * t / T; task < tasks * (t + 1) / T; task++) {
      int64_t ib = task / j->splitsJ, js = task % j->splitsJ, ic = ib * AMC;
      tiles_block(j, ic, min64(AMC, g->M - ic), j->nJ * js / j->splitsJ, j->nJ * (js + 1) / j->splitsJ, Ap);
    }
  }
  tiles_end();
}

/* Threads that own columns: thread t of T takes the B panels [nJ·t/T, nJ·(t+1)/T), packs them
 * itself, so that they sit in its own L2 (in the row-split driver above each thread packs half of
 * every panel and then reads the other half from the other core), in chunks of at most COL_CHUNK
 * bytes over all of K, and runs every row block of A against each chunk: A is packed per row
 * block and inner block by each thread (a few percent of the product), B once. Used for products
 * of at least 4 panels per thread and K in [COL_MIN_K, COL_MAX_K]: beyond, re-packing A per chunk
 * costs more than it saves; below (LoRA's rank-16 products) B is a few KB, C's traffic is the
 * product's cost, and row blocks keep each thread's rows of C contiguous. */
#define COL_CHUNK (1 << 20)
#define COL_MIN_K 256
#define COL_MAX_K 4096

typedef struct {
  const GemmCall *g;
  float beta;
  int64_t nJ, kc, nPc;
} AmxCols;

TARGET_amx static void job_columns(int t, int T, void *ctx) {
  const AmxCols *j = ctx;
  const GemmCall *g = j->g;
  int64_t q0 = j->nJ * t / T, q1 = j->nJ * (t + 1) / T;
  if (q0 >= q1) return;
  int64_t panel = panel_elems(j->kc), chunk = COL_CHUNK / (panel * (int64_t)sizeof(uint16_t) * j->nPc);
  if (chunk < 1) chunk = 1;
  uint16_t *Bp = buffer(0, (size_t)(min64(chunk, q1 - q0) * panel * j->nPc));
  uint16_t *Ap = buffer(1, (size_t)(AMC / AMR * panel));
  if (Bp == NULL || Ap == NULL) abort(); /* a megabyte: the process is out of memory */
  GemmCall whole = *g;
  for (int64_t qa = q0; qa < q1; qa += chunk) {
    int64_t qb = min64(q1, qa + chunk), c0 = qa * ANR, nc = min64(g->N, qb * ANR) - c0;
    for (int64_t s = 0; s < j->nPc; s++) {
      int64_t pc = s * j->kc, kc = min64(j->kc, g->K - pc);
      if (g->tB) pack_b_cols(&whole, c0, nc, pc, kc, 0, 2 * (qb - qa), Bp + s * (qb - qa) * panel);
      else pack_b_rows(&whole, c0, nc, pc, kc, 0, 2 * (qb - qa), Bp + s * (qb - qa) * panel);
    }
    tiles_begin();
    for (int64_t ic = 0; ic < g->M; ic += AMC) {
      int64_t mc = min64(AMC, g->M - ic);
      for (int64_t s = 0; s < j->nPc; s++) {
        int64_t pc = s * j->kc, kc = min64(j->kc, g->K - pc), nkb = (kc + 31) / 32, pe = panel_elems(kc);
        pack_a(g, ic, mc, pc, kc, Ap);
        const uint16_t *bs = Bp + s * (qb - qa) * panel;
        for (int64_t q = qa; q < qb; q++) {
          int64_t nr = min64(ANR, g->N - q * ANR);
          float *cq = g->C + ic * g->ldc + q * ANR;
          for (int64_t p = 0; p < mc; p += AMR)
            ukr_amx_halves(nkb, Ap + p / AMR * pe, pe / 2, bs + (q - qa) * pe, pe / 2, cq + p * g->ldc, g->ldc, g->alpha, j->beta, s == 0,
                           min64(AMR, mc - p), nr);
        }
      }
    }
    tiles_end();
  }
}

/* Inner blocks: K split evenly into blocks of at most MAX_KC (multiples of 32), so that no short
 * last block makes a pass over C of its own (loading and storing every tile of C for a few tile
 * products). Both drivers block K this way, so that the sums of a product are the same whichever
 * one runs it and however many threads: bit for bit. A B panel of a 1,024-deep block (64 KB) sits
 * in L2 with the A tiles; the micro-kernel loads both from there at full speed. */
#define MAX_KC 1024
static int64_t inner_block(int64_t K) {
  int64_t n = (K + MAX_KC - 1) / MAX_KC;
  return ((K + n - 1) / n + 31) / 32 * 32;
}

void gemm_bf16_amx(const GemmCall *g, float beta) {
  int T = threads();
  if ((double)g->M * g->N * g->K < PAR_MIN_FLOPS || team_size() > 1) T = 1;
  int64_t kc = inner_block(g->K), nJall = (g->N + ANR - 1) / ANR;
  if (T > 1 && g->K >= COL_MIN_K && g->K <= COL_MAX_K && nJall >= 4 * T) {
    AmxCols j = {g, beta, nJall, kc, (g->K + kc - 1) / kc};
    parallel_run(T, job_columns, &j);
    return;
  }
  int64_t ncMax = min64(ANC, (g->N + ANR - 1) / ANR * ANR), bslab = ncMax * kc;
  /* Inner blocks per pass: all of K while B's packed slabs stay within PASS_BYTES, else one. */
  int64_t blocks = (g->K + kc - 1) / kc, perPass = (double)bslab * blocks * sizeof(uint16_t) <= PASS_BYTES ? blocks : 1;
  uint16_t *Bp = buffer(0, (size_t)(bslab * perPass));
  if (Bp == NULL) abort();
  int64_t nIC = (g->M + AMC - 1) / AMC;
  for (int64_t jc = 0; jc < g->N; jc += ANC) {
    int64_t nc = min64(ANC, g->N - jc), nJ = (nc + ANR - 1) / ANR;
    int64_t splitsJ = nIC >= T ? 1 : min64(nJ, (T + nIC - 1) / nIC);
    for (int64_t pc0 = 0; pc0 < g->K; pc0 += perPass * kc) {
      AmxJob j = {g, beta, Bp, jc, nc, nJ, pc0, min64(g->K, pc0 + perPass * kc), bslab, nIC, splitsJ, kc};
      if (T > 1 && nJ > 1) parallel_run(T, job_pack_b, &j);
      else job_pack_b(0, 1, &j);
      if (T > 1 && nIC * splitsJ > 1) parallel_run(T, job_tiles, &j);
      else job_tiles(0, 1, &j);
    }
  }
}

/* ---------------------------------------------------------------------------------------------
 * Pre-packed B (decoding): a weight packed once per sampling call and multiplied by a few rows
 * per token. The pack is gemm_bf16_amx's B layout with all of K in one inner block, panels of 32
 * columns one after another: panel q at q · panel_elems(K), its second half at half of that. A
 * product streams each panel once through the tiles; at 8 rows the second A tile and half of the
 * first are empty, which costs tile throughput (plentiful) and no memory traffic (the limit).
 * ------------------------------------------------------------------------------------------- */

int64_t amx_packed_elems(int64_t N, int64_t K) { return (N + ANR - 1) / ANR * panel_elems(K); }

TARGET_amx void amx_pack_b(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, uint16_t *dst) {
  GemmCall g = {false, tB, 0, N, K, 0, ldb, 0, 1.0f, NULL, B, NULL, NULL, false};
  int64_t halves = (N + ANR - 1) / ANR * 2;
  if (tB) pack_b_cols(&g, 0, N, 0, K, 0, halves, dst);
  else pack_b_rows(&g, 0, N, 0, K, 0, halves, dst);
}

typedef struct {
  int64_t M, N, K;
  float alpha;
  const uint16_t *Ap, *Bp;
  float *C;
  int64_t ldc;
} AmxPrepacked;

/* Panels [q0, q1) of B for the thread's share, every row panel of A against each. */
TARGET_amx static void prepacked_panels(int t, int T, void *ctx) {
  const AmxPrepacked *j = ctx;
  int64_t nJ = (j->N + ANR - 1) / ANR, q0 = nJ * t / T, q1 = nJ * (t + 1) / T;
  int64_t nkb = (j->K + 31) / 32, panel = panel_elems(j->K);
  if (q0 >= q1) return;
  tiles_begin();
  for (int64_t q = q0; q < q1; q++) {
    int64_t nr = min64(ANR, j->N - q * ANR);
    for (int64_t p = 0; p < j->M; p += AMR)
      ukr_amx(nkb, j->Ap + p / AMR * panel, j->Bp + q * panel, j->C + p * j->ldc + q * ANR, j->ldc, j->alpha, 1.0f, false, min64(AMR, j->M - p), nr);
  }
  tiles_end();
}

TARGET_amx void amx_gemm_prepacked(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const uint16_t *pack, float *C, int64_t ldc,
                                   int T) {
  GemmCall g = {false, false, M, N, K, lda, 0, ldc, alpha, A, NULL, C, NULL, false};
  uint16_t *Ap = buffer(2, (size_t)((M + AMR - 1) / AMR * panel_elems(K)));
  if (Ap == NULL) abort(); /* a few rows' worth: the process is out of memory */
  pack_a(&g, 0, M, 0, K, Ap);
  AmxPrepacked j = {M, N, K, alpha, Ap, pack, C, ldc};
  int64_t nJ = (N + ANR - 1) / ANR;
  if (T > 1 && nJ > 1) parallel_run(T, prepacked_panels, &j);
  else prepacked_panels(0, 1, &j);
}

/* ---------------------------------------------------------------------------------------------
 * Building blocks for kernels that keep their own packs (attention.c): the packs above, the
 * micro-kernel with each operand's half-panel stride given (so that a product may use the first
 * tiles of a pack's inner dimension, or start at a later tile), and per-thread scratch.
 * ------------------------------------------------------------------------------------------- */

int64_t amx_panel_elems(int64_t kc) { return panel_elems(kc); }

/* Slots 3 and up of the per-thread packing buffers (0-2 are the products' own). */
uint16_t *amx_scratch(int slot, size_t n) { return buffer(3 + slot, n); }

TARGET_amx void amx_tiles_begin(void) { tiles_begin(); }
TARGET_amx void amx_tiles_end(void) { tiles_end(); }

TARGET_amx void amx_pack_a(bool tA, const float *A, int64_t lda, int64_t rows, int64_t kc, uint16_t *dst) {
  GemmCall g = {tA, false, rows, 0, kc, lda, 0, 0, 1.0f, A, NULL, NULL, NULL, false};
  pack_a(&g, 0, rows, 0, kc, dst);
}

TARGET_amx void amx_tile_product(int64_t nkb, const uint16_t *a, int64_t ahalf, const uint16_t *b, int64_t bhalf, float *c, int64_t ldc, float alpha,
                                 float beta, bool first, int64_t mr, int64_t nr) {
  ukr_amx_halves(nkb, a, ahalf, b, bhalf, c, ldc, alpha, beta, first, mr, nr);
}

#else

int64_t amx_packed_elems(int64_t N, int64_t K) {
  (void)N;
  (void)K;
  return 0;
}

void amx_pack_b(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, uint16_t *dst) {
  (void)tB, (void)N, (void)K, (void)B, (void)ldb, (void)dst;
  abort(); /* never chosen: amx_enable said no */
}

void amx_gemm_prepacked(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const uint16_t *pack, float *C, int64_t ldc,
                        int T) {
  (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)pack, (void)C, (void)ldc, (void)T;
  abort(); /* never chosen: amx_enable said no */
}

int64_t amx_panel_elems(int64_t kc) { return kc; }
uint16_t *amx_scratch(int slot, size_t n) {
  (void)slot, (void)n;
  abort(); /* never chosen: amx_enable said no */
}
void amx_tiles_begin(void) { abort(); }
void amx_tiles_end(void) { abort(); }
void amx_pack_a(bool tA, const float *A, int64_t lda, int64_t rows, int64_t kc, uint16_t *dst) {
  (void)tA, (void)A, (void)lda, (void)rows, (void)kc, (void)dst;
  abort();
}
void amx_tile_product(int64_t nkb, const uint16_t *a, int64_t ahalf, const uint16_t *b, int64_t bhalf, float *c, int64_t ldc, float alpha, float beta,
                      bool first, int64_t mr, int64_t nr) {
  (void)nkb, (void)a, (void)ahalf, (void)b, (void)bhalf, (void)c, (void)ldc, (void)alpha, (void)beta, (void)first, (void)mr, (void)nr;
  abort();
}

bool amx_enable(char *why, size_t n) {
  snprintf(why, n, "this build has no AMX code (an x86-64 Linux build with GCC 11+ or clang 12+ has)");
  return false;
}

void gemm_bf16_amx(const GemmCall *g, float beta) {
  (void)g;
  (void)beta;
  abort(); /* never chosen: amx_enable said no */
}

#endif
