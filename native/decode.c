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

/* C = A · Wᵀ + bias, W packed; A is [R, K] dense, C has stride ldc. The bias goes in first and the
 * product adds onto it, as ops.ts's linear does. */
static void proj(const LlamaDecode *d, int64_t N, int64_t K, const float *A, const float *pack, const float *bias, float *C, int64_t ldc) {
  if (bias)
    for (int64_t r = 0; r < d->R; r++) memcpy(C + r * ldc, bias, (size_t)N * sizeof(float));
  sgemm_prepacked(d->R, N, K, 1.0f, A, K, pack, d->bf16, bias ? 1.0f : 0.0f, C, ldc);
}

bool llama_decode_step(const LlamaDecode *d, float *logits) {
  const int64_t R = d->R, C = d->C, H = d->H, Hkv = d->Hkv, D = d->D, F = d->F, S = d->len + 1;
  const int64_t ldkv = d->Smax * Hkv * D; /* one cache row (sequence) */
  float *buf = malloc((size_t)(R * (3 * C + 2 * H * D + 2 * F + H * S + 1)) * sizeof(float));
  if (!buf) return false;
  float *h = buf, *x = h + R * C, *y = x + R * C, *q = y + R * C, *att = q + R * H * D, *g = att + R * H * D, *u = g + R * F, *P = u + R * F,
        *rstd = P + R * H * S;

  embedding_forward(R, C, d->ids, d->embed, h);
  for (int64_t l = 0; l < d->L; l++) {
    const LlamaDecodeLayer *w = &d->layers[l];
    float *kc = d->cacheK[l], *vc = d->cacheV[l];
    float *krow = kc + d->len * Hkv * D, *vrow = vc + d->len * Hkv * D;

    rmsnorm_forward(R, C, h, w->ln1, d->eps, x, rstd);
    proj(d, H * D, C, x, w->q, w->bq, q, H * D);
    RopeSpec rq = {H, D, d->pos, d->cos, d->sin};
    rope_forward(R, &rq, q, q);
    proj(d, Hkv * D, C, x, w->k, w->bk, krow, ldkv);
    proj(d, Hkv * D, C, x, w->v, w->bv, vrow, ldkv);
    for (int64_t r = 0; r < R; r++) { /* cache rows are strided: one RoPE row at a time */
      RopeSpec rk = {Hkv, D, d->pos + r, d->cos, d->sin};
      rope_forward(1, &rk, krow + r * ldkv, krow + r * ldkv);
    }
    AttnSpec a = {.B = R, .T = 1, .S = S, .Smax = d->Smax, .H = H, .Hkv = Hkv, .D = D, .pastLen = d->len,
                  .scale = (float)(1.0 / sqrt((double)D)), .causal = true, .km = d->keyMask, .q = q, .k = kc, .v = vc};
    attention_forward(&a, P, att);
    proj(d, C, H * D, att, w->o, w->bo, y, C);
    add_into(R * C, y, h);

    rmsnorm_forward(R, C, h, w->ln2, d->eps, x, rstd);
    proj(d, F, C, x, w->gate, w->bgate, g, F);
    proj(d, F, C, x, w->up, w->bup, u, F);
    swiglu_forward(R * F, g, u, g);
    proj(d, C, F, g, w->down, w->bdown, y, C);
    add_into(R * C, y, h);
  }
  rmsnorm_forward(R, C, h, d->lnf, d->eps, x, rstd);
  proj(d, d->V, C, x, d->head, NULL, logits, d->V);
  free(buf);
  return true;
}
