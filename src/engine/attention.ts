/**
 * Scaled dot-product attention with grouped-query heads, causal and key-padding masks, written
 * once above the backend from GEMMs and the masked-softmax kernel.
 *
 *   S_bh = q_bh · k_bgᵀ / √D,   P_bh = softmax(S_bh + mask),   o_bh = P_bh · v_bg,   g = ⌊h·Hkv/H⌋
 *
 * Heads are read in place from the [B, T, H, D] layout through GEMM leading dimensions, so no
 * transposes are materialised.
 */
import { alloc, backend } from './runtime.js';
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
  const group = H / Hkv;
  const scale = 1 / Math.sqrt(D);
  const ldq = H * D;
  const ldk = Hkv * D;
  const be = backend();

  const out = new Tensor(alloc(q.size), q.shape);
  const P = alloc(B * H * T * S); // [B, H, T, S] attention probabilities, saved for backward
  const qOff = (b: number, h: number) => b * T * ldq + h * D;
  const kOff = (b: number, h: number) => b * Smax * ldk + Math.floor(h / group) * D;
  const pOff = (b: number, h: number) => (b * H + h) * T * S;

  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      be.gemm(false, true, T, S, D, 1, q.data, qOff(b, h), ldq, k.data, kOff(b, h), ldk, 0, P, pOff(b, h), S);
      be.softmax(T, S, P, pOff(b, h), P, pOff(b, h), scale, opts.causal, pastLen, keyMask, b * Smax);
      be.gemm(false, false, T, D, S, 1, P, pOff(b, h), S, v.data, kOff(b, h), ldk, 0, out.data, qOff(b, h), ldq);
    }
  }

  if (needsGrad(q, k, v)) {
    record(out, () => {
      const gO = out.grad;
      if (gO === null) return;
      const gq = q.requiresGrad ? q.ensureGrad() : null;
      const gk = k.requiresGrad ? k.ensureGrad() : null;
      const gv = v.requiresGrad ? v.ensureGrad() : null;
      const dP = alloc(T * S); // [T, S] scratch
      const dS = alloc(T * S); // [T, S] scratch
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < H; h++) {
          const [qo, ko, po] = [qOff(b, h), kOff(b, h), pOff(b, h)];
          // dV += Pᵀ · dO
          if (gv) be.gemm(true, false, S, D, T, 1, P, po, S, gO, qo, ldq, 1, gv, ko, ldk);
          if (!gq && !gk) continue;
          // dP = dO · Vᵀ;  dS = softmax'(P) · dP · scale
          be.gemm(false, true, T, S, D, 1, gO, qo, ldq, v.data, ko, ldk, 0, dP, 0, S);
          dS.fill(0);
          be.softmaxBackward(T, S, P, po, dP, 0, dS, 0, scale);
          // dQ += dS · K;  dK += dSᵀ · Q
          if (gq) be.gemm(false, false, T, D, S, 1, dS, 0, S, k.data, ko, ldk, 1, gq, qo, ldq);
          if (gk) be.gemm(true, false, S, D, T, 1, dS, 0, S, q.data, qo, ldq, 1, gk, ko, ldk);
        }
      }
    });
  }
  return out;
}
