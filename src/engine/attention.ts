/**
 * Scaled dot-product attention with grouped-query heads, causal and key-padding masks: one
 * `attention` kernel call for every batch entry and head, and one for the backward.
 *
 *   S_bh = q_bh · k_bgᵀ / √D,   P_bh = softmax(S_bh + mask),   o_bh = P_bh · v_bg,   g = ⌊h·Hkv/H⌋
 *
 * Heads are read in place from the [B, T, H, D] layout, so no transposes are materialised.
 */
import { allocOverwritten, backend } from './runtime.js';
import { needsGrad, record, Tensor } from './tensor.js';

export interface AttentionOptions {
  /** Query i (absolute position pastLen + i) sees keys at positions ≤ pastLen + i. */
  causal: boolean;
  /** Keys actually present: the first `kvLen` rows of k/v (a KV cache may be larger). Default k.shape[1]. */
  kvLen?: number;
  /** Absolute position of the first query. Default kvLen − T (queries are the newest positions). */
  pastLen?: number;
  /** [B, k.shape[1]]: 0 marks a padding key that nobody may attend to. */
  keyMask?: Uint8Array | null;
}

/** q: [B, T, H, D], k and v: [B, Smax, Hkv, D] → [B, T, H, D]. */
export function attention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions): Tensor {
  const [B, T, H, D] = q.shape;
  const [kB, Smax, Hkv, kD] = k.shape;
  if (kB !== B || kD !== D || v.shape.join() !== k.shape.join()) {
    throw new Error(`attention: q [${q.shape}] does not fit k [${k.shape}] / v [${v.shape}]`);
  }
  if (H % Hkv !== 0) throw new Error(`attention: ${H} query heads are not a multiple of ${Hkv} key/value heads`);
  const S = opts.kvLen ?? Smax;
  const pastLen = opts.pastLen ?? S - T;
  const keyMask = opts.keyMask ?? null;
  if (keyMask !== null && keyMask.length !== B * Smax) throw new Error(`attention: keyMask has ${keyMask.length} entries, expected B·S = ${B * Smax}`);
  const scale = 1 / Math.sqrt(D);
  const be = backend();

  // Both written entirely by the kernel (masked probabilities as zeros).
  const out = new Tensor(allocOverwritten(q.size), q.shape);
  const P = allocOverwritten(B * H * T * S); // [B, H, T, S] attention probabilities, saved for backward
  be.attention(B, T, S, Smax, H, Hkv, D, q.data, k.data, v.data, P, out.data, keyMask, opts.causal, pastLen, scale);
  if (needsGrad(q, k, v)) {
    record(out, () => {
      if (out.grad === null) return;
      const grad = (t: Tensor) => (t.requiresGrad ? t.ensureGrad() : null);
      be.attentionBackward(B, T, S, Smax, H, Hkv, D, q.data, k.data, v.data, P, out.grad, opts.causal, pastLen, scale, grad(q), grad(k), grad(v));
    }, [P]);
  }
  return out;
}
