/*
 * Self-attention: softmax (scaled, causal, key-masked), attention over every batch row and head
 * with its backward, and rotary position embeddings.
 */
#include <stdlib.h>

#include "magrpo.h"

/* ---------------------------------------------------------------------------------------------
 * softmax, softmaxBackward
 * ------------------------------------------------------------------------------------------- */

/* Rows [lo, hi) of x into out (which may be x); also the softmax of attention's scores.
 *
 * A causal row sees `lim` columns, a different count on every row: its loops run over `lim` rounded
 * up to whole vectors (SOFTMAX_VEC floats), the columns past `lim` masked to -inf, so that no row
 * ends in a scalar remainder loop (at T = 128 those remainders took half of attention's forward).
 * The masked columns may hold anything (attention's score product writes only the block's visible
 * columns): they are read only through the select. Sums run in float across vector lanes. */
#define SOFTMAX_VEC 16

/* The max and the sum of SOFTMAX_VEC lanes, halving: vector code where the target has it (GCC's
 * own epilogue for a reduction goes through memory, one lane after another). */
INLINE float lanes_max(float *lane) {
  for (int w = SOFTMAX_VEC / 2; w > 0; w /= 2)
    for (int l = 0; l < w; l++) lane[l] = lane[l + w] > lane[l] ? lane[l + w] : lane[l];
  return lane[0];
}
INLINE float lanes_sum(float *lane) {
  for (int w = SOFTMAX_VEC / 2; w > 0; w /= 2)
    for (int l = 0; l < w; l++) lane[l] += lane[l + w];
  return lane[0];
}
/* Column j of a row's scaled logits: -inf past the row's `lim` visible columns or where the key mask hides it. */
INLINE float masked_logit(const float *xr, const uint8_t *km, int64_t j, int64_t lim, float scale) {
  return j < lim && (!km || km[j]) ? xr[j] * scale : -INFINITY;
}

INLINE void softmax_block(int64_t lo, int64_t hi, const SoftmaxSpec *sp, const float *x, float *out) {
  int64_t cols = sp->cols;
  const uint8_t *km = sp->km;
  float scale = sp->scale;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * cols;
    float *o = out + r * cols;
    int64_t lim = cols;
    if (sp->causal) {
      int64_t last = sp->rowPos0 + r; /* the last visible column */
      lim = last < 0 ? 0 : (last + 1 < cols ? last + 1 : cols);
    }
    int64_t span = (lim + SOFTMAX_VEC - 1) / SOFTMAX_VEC * SOFTMAX_VEC;
    if (span > cols) span = cols;
    int64_t whole = span / SOFTMAX_VEC * SOFTMAX_VEC; /* < span only where cols is not whole vectors */
    /* Pass 1: scaled logits, -inf where masked; the exp below turns those into exact zeros. */
    float lane[SOFTMAX_VEC];
    for (int l = 0; l < SOFTMAX_VEC; l++) lane[l] = -INFINITY;
    /* Two loops, with and without a key mask, each without a branch (the mask byte read with the
     * column test, not after it): the form GCC vectorises, where masked_logit's short circuit
     * compiles to scalar code. Columns past lim are within the row. */
    if (km)
      for (int64_t j0 = 0; j0 < whole; j0 += SOFTMAX_VEC)
        for (int l = 0; l < SOFTMAX_VEC; l++) {
          int64_t j = j0 + l;
          float v = (j < lim) & (km[j] != 0) ? xr[j] * scale : -INFINITY;
          o[j] = v;
          lane[l] = v > lane[l] ? v : lane[l];
        }
    else
      for (int64_t j0 = 0; j0 < whole; j0 += SOFTMAX_VEC)
        for (int l = 0; l < SOFTMAX_VEC; l++) {
          int64_t j = j0 + l;
          float v = j < lim ? xr[j] * scale : -INFINITY;
          o[j] = v;
          lane[l] = v > lane[l] ? v : lane[l];
        }
    for (int64_t j = whole; j < span; j++) {
      float v = o[j] = masked_logit(xr, km, j, lim, scale);
      lane[0] = v > lane[0] ? v : lane[0];
    }
    float m = lanes_max(lane);
    for (int64_t j = span; j < cols; j++) o[j] = 0.0f;
    if (m == -INFINITY) { /* nothing visible (or only -inf logits): an all-zero row */
      for (int64_t j = 0; j < span; j++) o[j] = 0.0f;
      continue;
    }
    for (int l = 0; l < SOFTMAX_VEC; l++) lane[l] = 0.0f;
    for (int64_t j0 = 0; j0 < whole; j0 += SOFTMAX_VEC)
      for (int l = 0; l < SOFTMAX_VEC; l++) {
        float e = fast_expf(o[j0 + l] - m);
        o[j0 + l] = e;
        lane[l] += e;
      }
    for (int64_t j = whole; j < span; j++) {
      float e = fast_expf(o[j] - m);
      o[j] = e;
      lane[0] += e;
    }
    float inv = 1.0f / lanes_sum(lane);
#pragma omp simd
    for (int64_t j = 0; j < span; j++) o[j] *= inv;
  }
}

INLINE void softmax_rows(int64_t lo, int64_t hi, const SoftmaxArgs *a) { softmax_block(lo, hi, &a->sp, a->x, a->out); }

void softmax_forward(int64_t rows, const SoftmaxSpec *sp, const float *x, float *out) {
  double n = (double)rows * sp->cols;
  if (n == 0) return;
  SoftmaxArgs a = {*sp, x, out};
  PARALLEL_RANGE(n, rows, kern->softmax_rows, &a);
}

INLINE void softmax_backward_rows(int64_t lo, int64_t hi, const SoftmaxBackwardArgs *a) {
  int64_t cols = a->cols;
  float scale = a->scale;
  const float *y = a->y, *gy = a->gy;
  float *gx = a->gx;
  for (int64_t r = lo; r < hi; r++) {
    const float *yr = y + r * cols, *gr = gy + r * cols;
    float *o = gx + r * cols;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < cols; j++) dot += (double)gr[j] * yr[j];
    float d = (float)dot;
    for (int64_t j = 0; j < cols; j++) o[j] += scale * yr[j] * (gr[j] - d);
  }
}

void softmax_backward(int64_t rows, int64_t cols, float scale, const float *y, const float *gy, float *gx) {
  double n = (double)rows * cols;
  if (n == 0) return;
  SoftmaxBackwardArgs a = {cols, scale, y, gy, gx};
  PARALLEL_RANGE(n, rows, kern->softmax_backward_rows, &a);
}

/* ---------------------------------------------------------------------------------------------
 * attention, attentionBackward: every (batch, head) in one call. Per head the products are GEMM
 * calls on strided views of the [B, T, H, D] / [B, Smax, Hkv, D] layouts (blas_sgemm, or the bf16
 * GEMM under precision bf16: attn_gemm), or AMX tile products from per-head packs (the _amx
 * functions below), except at decode time (T = 1), where dot products over the KV cache beat GEMM
 * calls. Heads run in
 * parallel (each head's products then run on its thread), the backward per key/value head so
 * that the query heads sharing it add into its gradient one after another.
 * ------------------------------------------------------------------------------------------- */

INLINE int64_t attn_group(const AttnSpec *a) { return a->H / a->Hkv; }

/* Precision bf16 covers attention over at least BF16_MIN_ROWS query rows (prompt passes, training):
 * every product of the call then takes bf16 inputs (q, k, v, P, dO, dS rounded) and sums in fp32,
 * whatever the row count of its block, so that the rule is the call's and the reference backend
 * can follow it without knowing the blocks. Decoding (T = 1) stays fp32. Inside a pool job both
 * products run on the calling thread. */
INLINE bool attn_bf16(const AttnSpec *a) { return a->T >= BF16_MIN_ROWS && precision_bf16(); }

/* dS = scale · P ⊙ (dP − rowsum(dP ⊙ P)) in place of dP, over a block's `rows` rows (stride S) and
 * the `lim` keys it sees: the softmax's backward inside attention's (rowsum in double). */
INLINE void attn_score_grads(int64_t rows, int64_t lim, int64_t S, float scale, const float *P, float *dS) {
  for (int64_t t = 0; t < rows; t++) {
    float *row = dS + t * S;
    const float *pr = P + t * S;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t s = 0; s < lim; s++) dot += (double)row[s] * pr[s];
    float dt = (float)dot;
    for (int64_t s = 0; s < lim; s++) row[s] = scale * pr[s] * (row[s] - dt);
  }
}

INLINE void attn_gemm(bool bf16, bool tA, bool tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                      float beta, float *C, int64_t ldc) {
  if (bf16) gemm_bf16(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else blas_sgemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Causal attention goes by blocks of ATTN_ROW_BLOCK query rows, each against only the keys its last
 * row sees: at T = S = 128 that is 62% of the full score and P · V products (and of the backward's),
 * the upper triangle of which the mask zeroes anyway. */
#define ATTN_ROW_BLOCK 32

/* Keys visible to query rows before `r1` (the visible prefix of the block ending there). */
INLINE int64_t attn_visible(const AttnSpec *a, int64_t r1) {
  if (!a->causal) return a->S;
  int64_t lim = a->pastLen + r1;
  return lim < 0 ? 0 : (lim < a->S ? lim : a->S);
}

/* Tasks are (b, h) heads: per block of query rows a GEMM for the scores, the masked softmax, a GEMM
 * for P · V, over the keys the block sees. */
INLINE void attention_heads(int64_t lo, int64_t hi, const AttnArgs *args) {
  const AttnSpec *a = args->a;
  float *P = args->P, *out = args->out;
  int64_t T = a->T, S = a->S, D = a->D, ldq = a->H * D, ldk = a->Hkv * D;
  bool bf16 = attn_bf16(a);
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / a->H, h = task % a->H, g = h / attn_group(a);
    const float *qh = a->q + b * T * ldq + h * D;
    const float *kh = a->k + b * a->Smax * ldk + g * D, *vh = a->v + b * a->Smax * ldk + g * D;
    float *Ph = P + task * T * S, *oh = out + b * T * ldq + h * D;
    SoftmaxSpec sp = {.cols = S, .rowPos0 = a->pastLen, .scale = a->scale, .causal = a->causal, .km = a->km ? a->km + b * a->Smax : NULL};
    int64_t RB = a->causal ? ATTN_ROW_BLOCK : T;
    for (int64_t r0 = 0; r0 < T; r0 += RB) {
      int64_t rows = T - r0 < RB ? T - r0 : RB, lim = attn_visible(a, r0 + rows);
      float *Pb = Ph + r0 * S, *ob = oh + r0 * ldq;
      /* softmax_block reads only the visible columns of each row and zeroes the rest */
      if (lim > 0) attn_gemm(bf16, false, true, rows, lim, D, 1.0f, qh + r0 * ldq, ldq, kh, ldk, 0.0f, Pb, S);
      softmax_block(r0, r0 + rows, &sp, Ph, Ph);
      if (lim > 0)
        attn_gemm(bf16, false, false, rows, D, lim, 1.0f, Pb, S, vh, ldk, 0.0f, ob, ldq);
      else
        for (int64_t t = 0; t < rows; t++) memset(ob + t * ldq, 0, (size_t)D * sizeof(float));
    }
  }
}

/* Decode (T = 1), tasks are (b, g): a row's key/value head g and the G query heads that share it
 * (grouped-query attention). Its keys and then its values are streamed once, in memory order, for
 * all G heads; a dot product per (key, head) instead of GEMM calls. */
INLINE void attention_decode_groups(int64_t lo, int64_t hi, const AttnArgs *args) {
  const AttnSpec *a = args->a;
  float *P = args->P, *out = args->out;
  int64_t S = a->S, D = a->D, H = a->H, ldk = a->Hkv * D, G = attn_group(a);
  int64_t lim = a->causal ? (a->pastLen < 0 ? 0 : (a->pastLen + 1 < S ? a->pastLen + 1 : S)) : S;
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / a->Hkv, g = task % a->Hkv, shared = a->kvRow ? a->kvShared : 0, rb = a->kvRow ? a->kvRow[b] : b;
    const float *qg = a->q + (b * H + g * G) * D, *kg = a->k + b * a->Smax * ldk + g * D, *vg = a->v + b * a->Smax * ldk + g * D;
    const float *kr = a->k + rb * a->Smax * ldk + g * D, *vr = a->v + rb * a->Smax * ldk + g * D; /* keys < shared */
    float *Pg = P + (b * H + g * G) * S, *og = out + (b * H + g * G) * D;
    for (int64_t s = 0; s < lim; s++) {
      const float *ks = (s < shared ? kr : kg) + s * ldk;
      for (int64_t h = 0; h < G; h++) {
        const float *qh = qg + h * D;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; d++) dot += qh[d] * ks[d];
        Pg[h * S + s] = dot;
      }
    }
    SoftmaxSpec sp = {.cols = S, .rowPos0 = a->pastLen, .scale = a->scale, .causal = a->causal, .km = a->km ? a->km + b * a->Smax : NULL};
    for (int64_t h = 0; h < G; h++) softmax_block(0, 1, &sp, Pg + h * S, Pg + h * S);
    memset(og, 0, (size_t)(G * D) * sizeof(float));
    for (int64_t s = 0; s < lim; s++) {
      const float *vs = (s < shared ? vr : vg) + s * ldk;
      for (int64_t h = 0; h < G; h++) {
        float p = Pg[h * S + s];
        if (p == 0.0f) continue;
        float *oh = og + h * D;
#pragma omp simd
        for (int64_t d = 0; d < D; d++) oh[d] += p * vs[d];
      }
    }
  }
}

#if MAGRPO_X86
#include <immintrin.h>

/* The same on AVX-512 for head sizes of NV × 16 floats, held in registers. Scores go 16 keys at a
 * time: 16 dot products as vectors of partial sums, then one tree of shuffles and adds turns the
 * 16 vectors into the vector of their 16 sums, in key order (3 operations a dot product instead of
 * a reduction each). Outputs keep up to 16 vectors of accumulators (heads × NV) in registers over
 * all the keys. Sums run in a different order than the portable loop's: equal within float
 * rounding, not bit for bit. */
TARGET_avx512 static inline __m512 sum16(__m512 *x) {
  __m512 y[8], z[4], w[2];
  for (int i = 0; i < 8; i++) y[i] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]), _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]));
  for (int i = 0; i < 4; i++) {
    __m512d a = _mm512_castps_pd(y[2 * i]), c = _mm512_castps_pd(y[2 * i + 1]);
    z[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, c)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, c)));
  }
  for (int i = 0; i < 2; i++) w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0x88), _mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xdd));
}

#define DECODE_AVX512(NV)                                                                                                                  \
  TARGET_avx512 static void attention_decode_groups_d##NV(int64_t lo, int64_t hi, const AttnArgs *args) {                                 \
    const AttnSpec *a = args->a;                                                                                                       \
    float *P = args->P, *out = args->out;                                                                                              \
    const int64_t S = a->S, D = NV * 16, H = a->H, ldk = a->Hkv * D, G = attn_group(a), HC = 16 / NV;                                  \
    enum { QH = NV == 4 ? 3 : 2 }; /* query heads per pass over the keys: QH × 8 sums and NV keys in registers */                    \
    int64_t lim = a->causal ? (a->pastLen < 0 ? 0 : (a->pastLen + 1 < S ? a->pastLen + 1 : S)) : S;                                    \
    for (int64_t task = lo; task < hi; task++) {                                                                                       \
      int64_t b = task / a->Hkv, g = task % a->Hkv, shared = a->kvRow ? a->kvShared : 0, rb = a->kvRow ? a->kvRow[b] : b;             \
      const float *qg = a->q + (b * H + g * G) * D, *kg = a->k + b * a->Smax * ldk + g * D, *vg = a->v + b * a->Smax * ldk + g * D;    \
      const float *kr = a->k + rb * a->Smax * ldk + g * D, *vr = a->v + rb * a->Smax * ldk + g * D;                                    \
      float *Pg = P + (b * H + g * G) * S, *og = out + (b * H + g * G) * D;                                                            \
      for (int64_t h0 = 0; h0 < G; h0 += QH) {                                                                                         \
        const int64_t hq = G - h0 < QH ? G - h0 : QH;                                                                                  \
        for (int64_t s0 = 0; s0 < lim; s0 += 16) {                                                                                     \
          int n = (int)(lim - s0 < 16 ? lim - s0 : 16);                                                                                \
          __mmask16 m = n == 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);                                                      \
          __m512 x[QH][16];                                                                                                            \
          for (int half = 0; half < 2; half++) {                                                                                       \
            __m512 acc[QH][8];                                                                                                         \
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {                                                                      \
              int64_t s = s0 + 8 * half + j;                                                                                           \
              __m512 k[NV];                                                                                                            \
              const float *ks = (s < shared ? kr : kg) + s * ldk;                                                                      \
              for (int v = 0; v < NV; v++) k[v] = 8 * half + j < n ? _mm512_loadu_ps(ks + 16 * v) : _mm512_setzero_ps();              \
              for (int h = 0; h < QH; h++) {                                                                                           \
                const float *qh = qg + (h0 + (h < hq ? h : 0)) * D;                                                                    \
                __m512 a = _mm512_mul_ps(_mm512_loadu_ps(qh), k[0]);                                                                   \
                for (int v = 1; v < NV; v++) a = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * v), k[v], a);                               \
                acc[h][j] = a;                                                                                                         \
              }                                                                                                                        \
            }                                                                                                                          \
            for (int h = 0; h < QH; h++)                                                                                               \
              for (int j = 0; j < 8; j++) x[h][8 * half + j] = acc[h][j];                                                              \
          }                                                                                                                            \
          for (int64_t h = 0; h < hq; h++) _mm512_mask_storeu_ps(Pg + (h0 + h) * S + s0, m, sum16(x[h]));                             \
        }                                                                                                                              \
      }                                                                                                                                \
      SoftmaxSpec sp = {.cols = S, .rowPos0 = a->pastLen, .scale = a->scale, .causal = a->causal, .km = a->km ? a->km + b * a->Smax : NULL}; \
      for (int64_t h = 0; h < G; h++) softmax_block(0, 1, &sp, Pg + h * S, Pg + h * S);                                                \
      for (int64_t h0 = 0; h0 < G; h0 += HC) {                                                                                         \
        int64_t hc = G - h0 < HC ? G - h0 : HC;                                                                                        \
        __m512 acc[16];                                                                                                                \
        for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();                                                                     \
        for (int64_t s = 0; s < lim; s++) {                                                                                            \
          const float *vs = (s < shared ? vr : vg) + s * ldk;                                                                          \
          __m512 v[NV];                                                                                                                \
          for (int i = 0; i < NV; i++) v[i] = _mm512_loadu_ps(vs + 16 * i);                                                            \
          /* a hidden key's value (probability exactly 0) is never added, as in the portable loop: a  \
           * masked FMA, not a branch per key and head */                                                                            \
          for (int h = 0; h < HC; h++)                                                                                                 \
            if (h < hc) {                                                                                                              \
              float ps = Pg[(h0 + h) * S + s];                                                                                         \
              __m512 p = _mm512_set1_ps(ps);                                                                                           \
              __mmask16 seen = ps != 0.0f ? (__mmask16)0xffff : (__mmask16)0;                                                          \
              for (int i = 0; i < NV; i++) acc[h * NV + i] = _mm512_mask3_fmadd_ps(p, v[i], acc[h * NV + i], seen);                   \
            }                                                                                                                          \
        }                                                                                                                              \
        for (int64_t h = 0; h < hc; h++)                                                                                               \
          for (int i = 0; i < NV; i++) _mm512_storeu_ps(og + (h0 + h) * D + 16 * i, acc[h * NV + i]);                                  \
      }                                                                                                                                \
    }                                                                                                                                  \
  }
DECODE_AVX512(4)
DECODE_AVX512(8)
#endif

#if MAGRPO_AMX
/* Attention on AMX tiles: precision bf16 where AMX is the bf16 kernel, heads of a multiple of 32
 * floats. The same products, rounding and blocks of 32 query rows as the gemm path above, but each
 * operand that several products read is packed into tiles once: a head's keys and values once for
 * all its row blocks (the gemm path packed them again per block), in the backward also its queries
 * and output gradients. With the products on tiles the softmax and the packing are most of the
 * time left. Values past a block's visible keys (within its last tile of 32) meet probabilities of
 * exactly 0. */
INLINE bool attn_amx(const AttnSpec *a) { return attn_bf16(a) && a->D % 32 == 0 && bf16_kernel() == BF16K_AMX; }

#define AMX_SCRATCH_OR_ABORT(p) \
  if ((p) == NULL) abort() /* a few MB: the process is out of memory */

/* C[0:rows, 0:cols] = A · B + beta · C over the first nkb inner tiles: A's panels of 32 rows
 * `apanel` elements apart (half stride apanel / 2), B's panels of 32 columns `bpanel` apart from
 * `b` (half stride `bhalf`). */
TARGET_avx512 static void amx_block(int64_t rows, int64_t cols, int64_t nkb, const uint16_t *a, int64_t apanel, const uint16_t *b, int64_t bpanel,
                                    int64_t bhalf, float *C, int64_t ldc, float beta) {
  for (int64_t p = 0; p < rows; p += 32)
    for (int64_t q = 0; q < cols; q += 32)
      amx_tile_product(nkb, a + p / 32 * apanel, apanel / 2, b + q / 32 * bpanel, bhalf, C + p * ldc + q, ldc, 1.0f, beta, true, min64(32, rows - p),
                       min64(32, cols - q));
}

/* Forward, tasks (b, h): per block of 32 query rows, scores = Q_blk · Kᵀ over the keys the block
 * sees, the masked softmax, out = P_blk · V. Tasks by head rather than by key/value head balance
 * the threads when there are few of the latter (a prompt's 3); consecutive heads of one key/value
 * head on a thread pack its keys and values once. */
TARGET_avx512 static void attention_heads_amx(int64_t lo, int64_t hi, const AttnArgs *args) {
  const AttnSpec *a = args->a;
  float *P = args->P, *out = args->out;
  const int64_t T = a->T, S = a->S, D = a->D, ldq = a->H * D, ldk = a->Hkv * D;
  const int64_t pD = amx_panel_elems(D), pS = amx_panel_elems(S), nS = (S + 31) / 32;
  uint16_t *Kp = amx_scratch(0, (size_t)(nS * pD)), *Vp = amx_scratch(1, (size_t)(D / 32 * pS)), *Ap = amx_scratch(2, (size_t)(pD > pS ? pD : pS));
  /* A block's scores, [ATTN_ROW_BLOCK, S], read by the softmax into P: not in place, which GCC's
   * vectorised softmax loops take only when their input and output do not overlap */
  float *Sc = (float *)amx_scratch(3, (size_t)(2 * ATTN_ROW_BLOCK * S));
  AMX_SCRATCH_OR_ABORT(Sc);
  AMX_SCRATCH_OR_ABORT(Kp);
  AMX_SCRATCH_OR_ABORT(Vp);
  AMX_SCRATCH_OR_ABORT(Ap);
  amx_tiles_begin();
  int64_t packed = -1; /* the key/value head (b · Hkv + g) in Kp and Vp */
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / a->H, h = task % a->H, g = h / attn_group(a);
    const float *qh = a->q + b * T * ldq + h * D;
    const float *kh = a->k + b * a->Smax * ldk + g * D, *vh = a->v + b * a->Smax * ldk + g * D;
    float *Ph = P + task * T * S, *oh = out + b * T * ldq + h * D;
    if (b * a->Hkv + g != packed) { /* the task before read the same keys: a thread's tasks are consecutive heads */
      amx_pack_b(true, S, D, kh, ldk, Kp);  /* op(B) = Kᵀ [D, S] */
      amx_pack_b(false, D, S, vh, ldk, Vp); /* op(B) = V [S, D] */
      packed = b * a->Hkv + g;
    }
    SoftmaxSpec sp = {.cols = S, .rowPos0 = a->pastLen, .scale = a->scale, .causal = a->causal, .km = a->km ? a->km + b * a->Smax : NULL};
    for (int64_t r0 = 0; r0 < T; r0 += ATTN_ROW_BLOCK) {
      int64_t rows = min64(ATTN_ROW_BLOCK, T - r0), lim = attn_visible(a, r0 + rows);
      float *Pb = Ph + r0 * S, *ob = oh + r0 * ldq;
      if (lim > 0) {
        amx_pack_a(false, qh + r0 * ldq, ldq, rows, D, Ap);
        amx_block(rows, lim, D / 32, Ap, pD, Kp, pD, pD / 2, Sc, S, 0.0f);
      }
      SoftmaxSpec spb = sp;
      spb.rowPos0 = a->pastLen + r0; /* the block's rows as rows 0.. of Sc */
      softmax_block(0, rows, &spb, Sc, Pb);
      if (lim > 0) {
        amx_pack_a(false, Pb, S, rows, lim, Ap);
        amx_block(rows, D, (lim + 31) / 32, Ap, amx_panel_elems(lim), Vp, pS, pS / 2, ob, ldq, 0.0f);
      } else
        for (int64_t t = 0; t < rows; t++) memset(ob + t * ldq, 0, (size_t)D * sizeof(float));
    }
  }
  amx_tiles_end();
}

/* Backward, tasks (b, g) as attention_backward_groups (the G query heads of a key/value head add
 * into its gradients one after another), the same blocks: per query head, row blocks give dP =
 * dO·Vᵀ, dS and dQ += dS·K; then key blocks give dV += Pᵀ·dO and dK += dSᵀ·Q, each over the query
 * rows from its first reader on (an inner range that starts at a whole tile: row blocks are 32). */
TARGET_avx512 static void attention_backward_amx(int64_t lo, int64_t hi, const AttnBackwardArgs *args) {
  const AttnSpec *a = args->a;
  const AttnGrads *gr = args->gr;
  const int64_t T = a->T, S = a->S, D = a->D, ldq = a->H * D, ldk = a->Hkv * D, G = attn_group(a);
  const int64_t pD = amx_panel_elems(D), pS = amx_panel_elems(S), pT = amx_panel_elems(T), nS = (S + 31) / 32;
  float *dS = args->scratch + thread_index() * T * S; /* the head's dS, row r at dS + r · S */
  uint16_t *VTp = amx_scratch(0, (size_t)(nS * pD)), *Kp = amx_scratch(1, (size_t)(D / 32 * pS)), *Bt = amx_scratch(2, (size_t)(D / 32 * pT));
  const int64_t pMax = pT > pS ? (pT > pD ? pT : pD) : (pS > pD ? pS : pD);
  uint16_t *Ap = amx_scratch(3, (size_t)((nS + 1) * pMax));
  AMX_SCRATCH_OR_ABORT(VTp);
  AMX_SCRATCH_OR_ABORT(Kp);
  AMX_SCRATCH_OR_ABORT(Bt);
  AMX_SCRATCH_OR_ABORT(Ap);
  amx_tiles_begin();
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / a->Hkv, g = task % a->Hkv;
    const float *kg = a->k + b * a->Smax * ldk + g * D, *vg = a->v + b * a->Smax * ldk + g * D;
    float *gkg = gr->gk ? gr->gk + b * a->Smax * ldk + g * D : NULL, *gvg = gr->gv ? gr->gv + b * a->Smax * ldk + g * D : NULL;
    if (gr->gq || gkg) {
      amx_pack_b(true, S, D, vg, ldk, VTp); /* op(B) = Vᵀ [D, S] */
      if (gr->gq) amx_pack_b(false, D, S, kg, ldk, Kp); /* op(B) = K [S, D] */
    }
    for (int64_t h = g * G; h < (g + 1) * G; h++) {
      int64_t off = b * T * ldq + h * D;
      const float *Ph = gr->P + (b * a->H + h) * T * S, *gOh = gr->gO + off, *qh = a->q + off;
      if (gr->gq || gkg)
        for (int64_t r0 = 0; r0 < T; r0 += ATTN_ROW_BLOCK) {
          int64_t rows = min64(ATTN_ROW_BLOCK, T - r0), lim = attn_visible(a, r0 + rows);
          if (lim == 0) continue;
          float *dSb = dS + r0 * S;
          amx_pack_a(false, gOh + r0 * ldq, ldq, rows, D, Ap);
          amx_block(rows, lim, D / 32, Ap, pD, VTp, pD, pD / 2, dSb, S, 0.0f);
          attn_score_grads(rows, lim, S, a->scale, Ph + r0 * S, dSb);
          if (gr->gq) {
            amx_pack_a(false, dSb, S, rows, lim, Ap);
            amx_block(rows, D, (lim + 31) / 32, Ap, amx_panel_elems(lim), Kp, pS, pS / 2, gr->gq + off + r0 * ldq, ldq, 1.0f);
          }
        }
      /* Keys [k0, lim) are first seen by row block r0 and seen by rows r0..T - 1 only; rows from r0
       * on wrote dS for all of them. The B packs hold all T rows; a product starts at tile r0 / 32. */
      for (int pass = 0; pass < 2; pass++) {
        float *gdst = pass == 0 ? gvg : gkg;
        if (gdst == NULL) continue;
        const float *src = pass == 0 ? Ph : dS; /* Pᵀ · dO, dSᵀ · Q */
        amx_pack_b(false, D, T, pass == 0 ? gOh : qh, ldq, Bt);
        for (int64_t r0 = 0; r0 < T; r0 += ATTN_ROW_BLOCK) {
          int64_t rows = min64(ATTN_ROW_BLOCK, T - r0), lim = attn_visible(a, r0 + rows), k0 = r0 == 0 ? 0 : attn_visible(a, r0);
          if (lim <= k0) continue;
          int64_t inner = T - r0, pI = amx_panel_elems(inner);
          amx_pack_a(true, src + r0 * S + k0, S, lim - k0, inner, Ap);
          amx_block(lim - k0, D, (inner + 31) / 32, Ap, pI, Bt + r0 / 32 * 512, pT, pT / 2, gdst + k0 * ldk, ldk, 1.0f);
        }
      }
    }
  }
  amx_tiles_end();
}
#endif

void attention_forward(const AttnSpec *a, float *P, float *out) {
  if (a->S == 0) { /* no keys: every output row is 0 */
    memset(out, 0, (size_t)(a->B * a->T * a->H * a->D) * sizeof(float));
    return;
  }
  AttnArgs args = {a, P, out};
  /* The work is both products, scores (Q·Kᵀ) and outputs (P·V): 2·B·H·T·S·D multiply-adds. */
  if (a->T == 1)
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, 2.0 * a->B * a->H * a->S * a->D, a->B * a->Hkv, kern->attention_decode_groups, &args);
#if MAGRPO_AMX
  else if (attn_amx(a))
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, 2.0 * a->B * a->H * a->T * a->S * a->D, a->B * a->H, attention_heads_amx, &args);
#endif
  else
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, 2.0 * a->B * a->H * a->T * a->S * a->D, a->B * a->H, kern->attention_heads, &args);
}

/* Tasks are (b, g) key/value heads. Per query head, causal attention goes by blocks of query rows
 * over the keys each block sees (P is 0 beyond them): dP = dO · Vᵀ, dS = scale · P ⊙ (dP −
 * rowsum(dP ⊙ P)), dQ += dS · K. Then dV += Pᵀ · dO and dK += dSᵀ · Q by blocks of keys, each over
 * only the query rows that see them, so that each block of dK and dV is one product summing over
 * up to T rows rather than a 32-deep product per row block. At T = S = 128 the blocks do 62% of the
 * full T × S products' work. */
INLINE void attention_backward_groups(int64_t lo, int64_t hi, const AttnBackwardArgs *args) {
  const AttnSpec *a = args->a;
  const AttnGrads *gr = args->gr;
  int64_t T = a->T, S = a->S, D = a->D, ldq = a->H * D, ldk = a->Hkv * D, G = attn_group(a);
  float *dS = args->scratch + thread_index() * T * S; /* the head's dS, row r at dS + r · S */
  int64_t RB = a->causal ? ATTN_ROW_BLOCK : T;
  bool bf16 = attn_bf16(a);
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / a->Hkv, g = task % a->Hkv;
    const float *kg = a->k + b * a->Smax * ldk + g * D, *vg = a->v + b * a->Smax * ldk + g * D;
    float *gkg = gr->gk ? gr->gk + b * a->Smax * ldk + g * D : NULL, *gvg = gr->gv ? gr->gv + b * a->Smax * ldk + g * D : NULL;
    for (int64_t h = g * G; h < (g + 1) * G; h++) {
      int64_t off = b * T * ldq + h * D;
      const float *Ph = gr->P + (b * a->H + h) * T * S, *gOh = gr->gO + off, *qh = a->q + off;
      if (gr->gq || gkg)
        for (int64_t r0 = 0; r0 < T; r0 += RB) {
          int64_t rows = T - r0 < RB ? T - r0 : RB, lim = attn_visible(a, r0 + rows);
          if (lim == 0) continue;
          float *dSb = dS + r0 * S;
          attn_gemm(bf16, false, true, rows, lim, D, 1.0f, gOh + r0 * ldq, ldq, vg, ldk, 0.0f, dSb, S);
          attn_score_grads(rows, lim, S, a->scale, Ph + r0 * S, dSb);
          if (gr->gq) attn_gemm(bf16, false, false, rows, D, lim, 1.0f, dSb, S, kg, ldk, 1.0f, gr->gq + off + r0 * ldq, ldq);
        }
      if (!gvg && !gkg) continue;
      /* The keys row block [r0, r0 + rows) sees first, [k0, lim), are seen by rows r0..T - 1 only
       * (the first block's also include the cache before the rows). Row blocks from r0 on wrote dS
       * for all of them. */
      for (int64_t r0 = 0; r0 < T; r0 += RB) {
        int64_t rows = T - r0 < RB ? T - r0 : RB, lim = attn_visible(a, r0 + rows), k0 = r0 == 0 ? 0 : attn_visible(a, r0);
        if (lim <= k0) continue;
        if (gvg) attn_gemm(bf16, true, false, lim - k0, D, T - r0, 1.0f, Ph + r0 * S + k0, S, gOh + r0 * ldq, ldq, 1.0f, gvg + k0 * ldk, ldk);
        if (gkg) attn_gemm(bf16, true, false, lim - k0, D, T - r0, 1.0f, dS + r0 * S + k0, S, qh + r0 * ldq, ldq, 1.0f, gkg + k0 * ldk, ldk);
      }
    }
  }
}

bool attention_backward(const AttnSpec *a, const AttnGrads *gr) {
  if (a->S == 0 || a->T == 0) return true;
  float *scratch = malloc((size_t)(threads() * a->T * a->S) * sizeof(float));
  if (scratch == NULL) return false;
  AttnBackwardArgs args = {a, gr, scratch};
#if MAGRPO_AMX
  if (attn_amx(a))
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)a->B * a->H * a->T * a->S * a->D, a->B * a->Hkv, attention_backward_amx, &args);
  else
#endif
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)a->B * a->H * a->T * a->S * a->D, a->B * a->Hkv, kern->attention_backward_groups, &args);
  free(scratch);
  return true;
}

/* ---------------------------------------------------------------------------------------------
 * rope, ropeBackward
 * ------------------------------------------------------------------------------------------- */

INLINE void rope_rows(int64_t lo, int64_t hi, const RopeArgs *args) {
  const RopeSpec *sp = &args->sp;
  const float *x = args->x;
  float *out = args->out;
  int64_t H = sp->H, D = sp->D, half = D / 2;
  for (int64_t r = lo; r < hi; r++) {
    const float *cr = sp->cos + (int64_t)sp->pos[r] * half, *sr = sp->sin + (int64_t)sp->pos[r] * half;
    for (int64_t h = 0; h < H; h++) {
      const float *xh = x + (r * H + h) * D;
      float *o = out + (r * H + h) * D;
      for (int64_t i = 0; i < half; i++) {
        float a = xh[i], b = xh[i + half]; /* read both first: out may alias x */
        o[i] = a * cr[i] - b * sr[i];
        o[i + half] = b * cr[i] + a * sr[i];
      }
    }
  }
}

void rope_forward(int64_t rows, const RopeSpec *sp, const float *x, float *out) {
  RopeArgs a = {*sp, x, out, false};
  PARALLEL_RANGE((double)rows * sp->H * sp->D, rows, kern->rope_rows, &a);
}

INLINE void rope_backward_rows(int64_t lo, int64_t hi, const RopeArgs *args) {
  const RopeSpec *sp = &args->sp;
  const float *gy = args->x;
  float *gx = args->out;
  int64_t H = sp->H, D = sp->D, half = D / 2;
  for (int64_t r = lo; r < hi; r++) {
    const float *cr = sp->cos + (int64_t)sp->pos[r] * half, *sr = sp->sin + (int64_t)sp->pos[r] * half;
    for (int64_t h = 0; h < H; h++) {
      const float *g = gy + (r * H + h) * D;
      float *o = gx + (r * H + h) * D;
      if (args->acc)
        for (int64_t i = 0; i < half; i++) {
          float a = g[i], b = g[i + half];
          o[i] += a * cr[i] + b * sr[i];
          o[i + half] += b * cr[i] - a * sr[i];
        }
      else
        for (int64_t i = 0; i < half; i++) {
          float a = g[i], b = g[i + half];
          o[i] = a * cr[i] + b * sr[i];
          o[i + half] = b * cr[i] - a * sr[i];
        }
    }
  }
}

void rope_backward(int64_t rows, const RopeSpec *sp, const float *gy, float *gx, bool acc) {
  RopeArgs a = {*sp, gy, gx, acc};
  PARALLEL_RANGE((double)rows * sp->H * sp->D, rows, kern->rope_backward_rows, &a);
}

LOOP_VARIANTS(softmax_rows, SoftmaxArgs)
LOOP_VARIANTS(softmax_backward_rows, SoftmaxBackwardArgs)
LOOP_VARIANTS(attention_heads, AttnArgs)
#if MAGRPO_X86
/* Head sizes of 64 and 128 floats (most Llama-family models) take the AVX-512 code above; others the
 * portable loop, compiled for AVX2 as for the other short rows. */
LOOP_VARIANT_(generic, attention_decode_groups, AttnArgs)
LOOP_VARIANT_(avx2, attention_decode_groups, AttnArgs)
TARGET_avx512 void attention_decode_groups__avx512(int64_t lo, int64_t hi, const AttnArgs *a) {
  if (a->a->D == 64) attention_decode_groups_d4(lo, hi, a);
  else if (a->a->D == 128) attention_decode_groups_d8(lo, hi, a);
  else attention_decode_groups__avx2(lo, hi, a);
}
#else
LOOP_VARIANTS(attention_decode_groups, AttnArgs)
#endif
LOOP_VARIANTS(attention_backward_groups, AttnBackwardArgs)
LOOP_VARIANTS_SHORT(rope_rows, RopeArgs)
LOOP_VARIANTS_SHORT(rope_backward_rows, RopeArgs)
