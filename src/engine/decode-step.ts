/**
 * `llamaDecodeStep` spelled out as the backend's own kernels: the reference backend's version of
 * the fused step, and the definition native/decode.c follows line for line. Per layer:
 *
 *   x = rmsnorm(h) · ln1
 *   q = rope(x Wqᵀ + bq);   cache_k[len] = rope(x Wkᵀ + bk);   cache_v[len] = x Wvᵀ + bv
 *   h += attention(q, cache_k[0..len], cache_v[0..len]) Woᵀ + bo
 *   x = rmsnorm(h) · ln2;   h += (silu(x Wgᵀ + bg) ⊙ (x Wuᵀ + bu)) Wdᵀ + bd
 *
 * then logits = (rmsnorm(h) · lnf) headᵀ. Weights are packs (`packB`), read by `gemmPrepacked`.
 */
import type { Backend, FloatArray } from './backend.js';

/** Weights per layer in `llamaDecodeStep`'s list: 9 norms and packs, then 7 biases. */
export const DECODE_WEIGHTS_PER_LAYER = 16;

export function composeLlamaDecodeStep(be: Backend, ...args: Parameters<Backend['llamaDecodeStep']>): void {
  const [dims, weights, caches, keyMask, ids, positions, cos, sin, logits] = args;
  const [R, L, C, H, Hkv, D, F, V, Smax, len, eps, bf16Flag] = dims;
  const bf16 = bf16Flag !== 0;
  const HD = H * D;
  const KV = Hkv * D;
  const S = len + 1;
  const ldkv = Smax * KV; // one sequence's cache rows
  const f32 = (n: number) => new Float32Array(n);
  const [h, x, y, q, att, g, u, P, rstd] = [f32(R * C), f32(R * C), f32(R * C), f32(R * HD), f32(R * HD), f32(R * F), f32(R * F), f32(R * H * S), f32(R)];
  const need = (i: number) => weights[i] as FloatArray;

  /** out[offC + r·ldc, :N] = A[r] · Wᵀ + bias for the R rows, W packed (the bias first, as ops.ts's linear). */
  const proj = (N: number, K: number, A: FloatArray, pack: FloatArray, bias: FloatArray | null, out: FloatArray, offC: number, ldc: number) => {
    if (bias) for (let r = 0; r < R; r++) out.set(bias.subarray(0, N), offC + r * ldc);
    be.gemmPrepacked(R, N, K, 1, A, 0, K, pack, bias ? 1 : 0, out, offC, ldc, bf16);
  };

  be.embedding(R, C, ids, need(0), h);
  for (let l = 0; l < L; l++) {
    const w = 3 + DECODE_WEIGHTS_PER_LAYER * l;
    const [kc, vc] = [caches[2 * l], caches[2 * l + 1]];
    be.rmsnorm(R, C, h, need(w), eps, x, rstd);
    proj(HD, C, x, need(w + 1), weights[w + 9], q, 0, HD);
    be.rope(R, H, D, q, positions, cos, sin, q);
    proj(KV, C, x, need(w + 2), weights[w + 10], kc, len * KV, ldkv);
    proj(KV, C, x, need(w + 3), weights[w + 11], vc, len * KV, ldkv);
    for (let r = 0; r < R; r++) {
      const row = kc.subarray(r * ldkv + len * KV, r * ldkv + len * KV + KV); // strided: one row at a time
      be.rope(1, Hkv, D, row, positions.subarray(r, r + 1), cos, sin, row);
    }
    be.attention(R, 1, S, Smax, H, Hkv, D, q, kc, vc, P, att, keyMask, true, len, 1 / Math.sqrt(D));
    proj(C, HD, att, need(w + 4), weights[w + 12], y, 0, C);
    be.axpy(R * C, 1, y, h); // the residual add, h + y as the unfused forward rounds it

    be.rmsnorm(R, C, h, need(w + 5), eps, x, rstd);
    proj(F, C, x, need(w + 6), weights[w + 13], g, 0, F);
    proj(F, C, x, need(w + 7), weights[w + 14], u, 0, F);
    be.swiglu(R * F, g, u, g);
    proj(C, F, g, need(w + 8), weights[w + 15], y, 0, C);
    be.axpy(R * C, 1, y, h);
  }
  be.rmsnorm(R, C, h, need(1), eps, x, rstd);
  proj(V, C, x, need(2), null, logits, 0, V);
}
