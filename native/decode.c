/*
 * One decode step of the Llama family (Llama, Qwen2, Mistral) in one call: every row is one
 * sequence with one new token (T = 1), its keys and values go into the KV cache, and the step
 * ends in the logits. The kernels are the other files' launchers, in the order model/llama.ts
 * calls them; what one call saves is the framework around ~15 kernels per layer (a tensor, a
 * buffer and an N-API crossing each), which for a small model is most of a step: 1m, 8 rows,
 * the kernels took 35% of the unfused step's time.
 *
 * One fusion on top: k and v are written straight into their cache rows (no copy). The residual
 * adds stay separate (h + y, as the layer-by-layer forward rounds them: accumulating into h inside
 * the product would add h before the last K block's partial sum), so the step's logits are the
 * unfused forward's bit for bit. Every product reads a weight packed once per sampling call
 * (sgemm_pack_b).
 *
 *   h = embed[ids]
 *   per layer:  x = rmsnorm(h) · ln1
 *               q = rope(x Wqᵀ + bq);  cache_k[len] = rope(x Wkᵀ + bk);  cache_v[len] = x Wvᵀ + bv
 *               h += attention(q, cache_k[0..len], cache_v[0..len]) Woᵀ + bo
 *               x = rmsnorm(h) · ln2;  h += (silu(x Wgᵀ + bg) ⊙ (x Wuᵀ + bu)) Wdᵀ + bd
 *   logits = (rmsnorm(h) · lnf) headᵀ
 */
#include <stdlib.h>

#include "magrpo.h"

/* h += y over n floats (the residual add). */
static void add_into(int64_t n, const float *y, float *h) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) h[i] += y[i];
}

/* One run's adapter on projection p of layer l: C[lo:hi] += scale · (A Loraᵀ) Lora_Bᵀ, as ops.ts's
 * linearLowRank does after the base product; `t` is the step's room of R · maxRank floats, of
 * which the run uses its own rows. */
typedef struct {
  const LlamaDecode *d;
  int64_t l, N, K, ldc;
  int p;
  const float *A;
  float *C, *t;
} LoraProj;

static void lora_run(const LoraProj *j, int64_t s) {
  const LlamaDecode *d = j->d;
  const LlamaDecodeLora *a = &d->lora[s];
  const float *La = a->ab[(j->l * DECODE_LORA_PROJ + j->p) * 2], *Lb = a->ab[(j->l * DECODE_LORA_PROJ + j->p) * 2 + 1];
  int64_t lo = a->row0 - d->row0, hi = a->row1 - d->row0;
  if (lo < 0) lo = 0;
  if (hi > d->R) hi = d->R;
  if (!La || lo >= hi) return;
  float *t = j->t + lo * d->maxRank;
  gemm_f32(false, true, hi - lo, a->r, j->K, 1.0, j->A + lo * j->K, j->K, La, j->K, 0.0, t, a->r);
  gemm_f32(false, true, hi - lo, j->N, a->r, a->scale, t, a->r, Lb, a->r, 1.0, j->C + lo * j->ldc, j->ldc);
}

static void job_lora(int t, int T, void *ctx) {
  const LoraProj *j = ctx;
  for (int64_t s = t; s < j->d->nLora; s += T) lora_run(j, s);
}

/* C = A · Wᵀ + bias, W packed; A is [R, K] dense, C has stride ldc. The bias goes in first and the
 * product adds onto it, as ops.ts's linear does. Then each run of rows with a LoRA adapter on this
 * projection (layer l, projection p of DECODE_LORA_PROJ) adds its low-rank product. The runs' rows
 * are disjoint, so with several runs (agents decoding together) threads take whole runs: each
 * product is a few rows by rank 16, too small to split, and reading the adapters (fp32, from
 * memory: they change every update) is most of its time, which one thread alone did at half the
 * machine's bandwidth. */
static void proj(const LlamaDecode *d, int64_t l, int p, int64_t N, int64_t K, const float *A, const float *pack, const float *bias, float *C,
                 int64_t ldc, float *t) {
  if (bias)
    for (int64_t r = 0; r < d->R; r++) memcpy(C + r * ldc, bias, (size_t)N * sizeof(float));
  sgemm_prepacked(d->R, N, K, 1.0f, A, K, pack, d->bf16, bias ? 1.0f : 0.0f, C, ldc);
  if (d->nLora == 0) return;
  LoraProj j = {d, l, N, K, ldc, p, A, C, t};
  int T = threads();
  if (T > d->nLora) T = (int)d->nLora;
  if (T > 1 && team_size() == 1) parallel_run(T, job_lora, &j);
  else job_lora(0, 1, &j);
}

/* The step for d->R rows on the calling thread (its kernels may still split their own work). */
static bool decode_rows(const LlamaDecode *d, float *logits) {
  const int64_t R = d->R, C = d->C, H = d->H, Hkv = d->Hkv, D = d->D, F = d->F, S = d->len + 1;
  const int64_t ldkv = d->Smax * Hkv * D; /* one cache row (sequence) */
  float *buf = malloc((size_t)(R * (3 * C + 2 * H * D + 2 * F + H * S + 1 + d->maxRank)) * sizeof(float));
  if (!buf) return false;
  float *h = buf, *x = h + R * C, *y = x + R * C, *q = y + R * C, *att = q + R * H * D, *g = att + R * H * D, *u = g + R * F, *P = u + R * F,
        *rstd = P + R * H * S, *t = rstd + R;

  embedding_forward(R, C, d->ids, d->embed, h);
  for (int64_t l = 0; l < d->L; l++) {
    const LlamaDecodeLayer *w = &d->layers[l];
    float *kc = d->cacheK[l], *vc = d->cacheV[l];
    float *krow = kc + d->len * Hkv * D, *vrow = vc + d->len * Hkv * D;

    rmsnorm_forward(R, C, h, w->ln1, d->eps, x, rstd);
    proj(d, l, 0, H * D, C, x, w->q, w->bq, q, H * D, t);
    RopeSpec rq = {H, D, d->pos, d->cos, d->sin};
    rope_forward(R, &rq, q, q);
    proj(d, l, 1, Hkv * D, C, x, w->k, w->bk, krow, ldkv, t);
    proj(d, l, 2, Hkv * D, C, x, w->v, w->bv, vrow, ldkv, t);
    for (int64_t r = 0; r < R; r++) { /* cache rows are strided: one RoPE row at a time */
      RopeSpec rk = {Hkv, D, d->pos + r, d->cos, d->sin};
      rope_forward(1, &rk, krow + r * ldkv, krow + r * ldkv);
    }
    AttnSpec a = {.B = R, .T = 1, .S = S, .Smax = d->Smax, .H = H, .Hkv = Hkv, .D = D, .pastLen = d->len,
                  .scale = (float)(1.0 / sqrt((double)D)), .causal = true, .km = d->keyMask, .q = q, .k = kc, .v = vc,
                  .kvRow = d->kvRow, .kvShared = d->kvShared};
    attention_forward(&a, P, att);
    proj(d, l, 3, C, H * D, att, w->o, w->bo, y, C, t);
    add_into(R * C, y, h);

    rmsnorm_forward(R, C, h, w->ln2, d->eps, x, rstd);
    proj(d, l, 4, F, C, x, w->gate, w->bgate, g, F, t);
    proj(d, l, 5, F, C, x, w->up, w->bup, u, F, t);
    swiglu_forward(R * F, g, u, g);
    proj(d, l, 6, C, F, g, w->down, w->bdown, y, C, t);
    add_into(R * C, y, h);
  }
  rmsnorm_forward(R, C, h, d->lnf, d->eps, x, rstd);
  LlamaDecode plain = *d; /* the head has no adapter */
  plain.nLora = 0;
  proj(&plain, 0, 0, d->V, C, x, d->head, NULL, logits, d->V, t);
  free(buf);
  return true;
}

/* Rows are independent sequences, so threads can take whole rows through the whole step: one pool
 * wake-up per step instead of one per product, where a small model's products are each too small
 * to split (PREPACKED_PAR_MIN_FLOPS) and the second core would idle. Each thread then reads every
 * weight, which pays while the weights stay in cache, not for a model whose decode streams them
 * from memory (10m's 38 MB of fp32 packs): that one keeps splitting its products instead. */
#define ROW_SPLIT_MAX_BYTES (8 << 20)
#define ROW_SPLIT_MIN_ROWS 4 /* per thread: a packed product's rows come in register tiles */

typedef struct {
  const LlamaDecode *d;
  float *logits;
  int failed;
} RowSplit;

static void decode_slice(int t, int T, void *ctx) {
  RowSplit *s = ctx;
  const LlamaDecode *d = s->d;
  int64_t r0 = d->R * t / T, r1 = d->R * (t + 1) / T, ldkv = d->Smax * d->Hkv * d->D;
  float **kv = malloc((size_t)(2 * d->L) * sizeof *kv);
  int32_t *kvRow = d->kvRow ? malloc((size_t)(r1 - r0) * sizeof *kvRow) : NULL;
  if (!kv || (d->kvRow && !kvRow)) {
    free(kv);
    __atomic_store_n(&s->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  /* The slice's rows from 0: a row whose shared keys lie in another slice reads its own copy. */
  for (int64_t r = r0; kvRow && r < r1; r++) kvRow[r - r0] = d->kvRow[r] >= r0 && d->kvRow[r] < r1 ? d->kvRow[r] - (int32_t)r0 : (int32_t)(r - r0);
  for (int64_t l = 0; l < d->L; l++) kv[l] = d->cacheK[l] + r0 * ldkv, kv[d->L + l] = d->cacheV[l] + r0 * ldkv;
  LlamaDecode sub = *d;
  sub.R = r1 - r0;
  sub.row0 = d->row0 + r0;
  sub.ids += r0;
  sub.pos += r0;
  sub.keyMask += r0 * d->Smax;
  sub.cacheK = kv;
  sub.cacheV = kv + d->L;
  sub.kvRow = kvRow;
  if (!decode_rows(&sub, s->logits + r0 * d->V)) __atomic_store_n(&s->failed, 1, __ATOMIC_RELAXED);
  free(kv);
  free(kvRow);
}

bool llama_decode_step(const LlamaDecode *d, float *logits) {
  int64_t per_layer = d->C * d->H * d->D * 2 + 2 * d->C * d->Hkv * d->D + 3 * d->C * d->F;
  double bytes = ((double)d->L * per_layer + (double)d->V * d->C) * (d->bf16 ? 2 : 4);
  int64_t T = d->R / ROW_SPLIT_MIN_ROWS;
  if (T > threads()) T = threads();
  if (T < 2 || team_size() > 1 || bytes > ROW_SPLIT_MAX_BYTES) return decode_rows(d, logits);
  RowSplit s = {d, logits, 0};
  parallel_run((int)T, decode_slice, &s);
  return !s.failed;
}
