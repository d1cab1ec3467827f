/**
 * Scaled dot-product attention with grouped-query heads, causal and key-padding masks: one
 * `attention` kernel call for every batch entry and head, and one for the backward.
 *
 *   S_bh = q_bh · k_bgᵀ / √D,   P_bh = softmax(S_bh + mask),   o_bh = P_bh · v_bg,   g = ⌊h·Hkv/H⌋
 *
 * Heads are read in place from the [B, T, H, D] layout, so no transposes are materialised.
 */
import type { FloatArray } from './backend.js';
import { alloc, allocOverwritten, backend } from './runtime.js';
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

/**
 * Attention over one prompt shared by S continuations, packed as one sequence of N = P + S·T rows:
 * rows [0, P) are the prompt, rows P + s·T + j continuation s's token j (absolute position P + j).
 * Prompt rows attend causally among themselves; a continuation row sees the whole prompt and its own
 * continuation up to itself, never another continuation. The same numbers as running the S
 * sequences prompt + continuation_s as a batch, for P + S·T rows of projections instead of S·(P + T).
 *
 * q: [1, N, H, D], k and v: [1, N, Hkv, D] → [1, N, H, D]. `keyMask` [S·T] marks continuation padding
 * (0); padding comes after a sequence's real tokens, so only padding queries could see it.
 * Backward: a prompt key gathers the gradients of all S continuations' queries and its own rows'.
 */
export function prefixSharedAttention(q: Tensor, k: Tensor, v: Tensor, layout: { promptLen: number; branches: number; keyMask?: Uint8Array | null }): Tensor {
  const [B, N, H, D] = q.shape;
  const [, , Hkv] = k.shape;
  const { promptLen: P, branches: S } = layout;
  const T = S > 0 ? (N - P) / S : 0;
  if (B !== 1 || k.shape[0] !== 1 || k.shape[1] !== N || v.shape.join() !== k.shape.join() || k.shape[3] !== D) {
    throw new Error(`prefixSharedAttention: q [${q.shape}] k [${k.shape}] v [${v.shape}] are not one packed sequence`);
  }
  if (P < 1 || !Number.isInteger(T) || T < 0)
    throw new Error(`prefixSharedAttention: ${N} rows are not a ${P}-token prompt + ${S} continuations of equal length`);
  if (H % Hkv !== 0) throw new Error(`attention: ${H} query heads are not a multiple of ${Hkv} key/value heads`);
  const mask = layout.keyMask ?? null;
  if (mask !== null && mask.length !== S * T) throw new Error(`prefixSharedAttention: keyMask has ${mask.length} entries, expected S·T = ${S * T}`);
  const scale = 1 / Math.sqrt(D);
  const be = backend();
  const qRow = H * D;
  const kRow = Hkv * D;
  const L = P + T; // keys a continuation sees

  const out = new Tensor(allocOverwritten(q.size), q.shape);
  const probsP = allocOverwritten(H * P * P);
  be.attention(
    1,
    P,
    P,
    P,
    H,
    Hkv,
    D,
    q.data.subarray(0, P * qRow),
    k.data.subarray(0, P * kRow),
    v.data.subarray(0, P * kRow),
    probsP,
    out.data.subarray(0, P * qRow),
    null,
    true,
    0,
    scale,
  );

  // Each continuation's keys and values: the prompt's rows, then its own.
  const kc = allocOverwritten(S * L * kRow);
  const vc = allocOverwritten(S * L * kRow);
  be.copy2d(S, P * kRow, k.data, 0, 0, kc, 0, L * kRow, false);
  be.copy2d(S, P * kRow, v.data, 0, 0, vc, 0, L * kRow, false);
  be.copy2d(S, T * kRow, k.data, P * kRow, T * kRow, kc, P * kRow, L * kRow, false);
  be.copy2d(S, T * kRow, v.data, P * kRow, T * kRow, vc, P * kRow, L * kRow, false);
  let maskC: Uint8Array | null = null;
  if (mask !== null) {
    maskC = new Uint8Array(S * L);
    for (let s = 0; s < S; s++) {
      maskC.fill(1, s * L, s * L + P);
      maskC.set(mask.subarray(s * T, (s + 1) * T), s * L + P);
    }
  }
  const probsC = allocOverwritten(S * H * T * L);
  const qC = q.data.subarray(P * qRow);
  if (S * T > 0) be.attention(S, T, L, L, H, Hkv, D, qC, kc, vc, probsC, out.data.subarray(P * qRow), maskC, true, P, scale);

  if (needsGrad(q, k, v)) {
    record(out, () => {
      if (out.grad === null) return;
      const gq = q.requiresGrad ? q.ensureGrad() : null;
      const gk = k.requiresGrad ? k.ensureGrad() : null;
      const gv = v.requiresGrad ? v.ensureGrad() : null;
      const head = (g: FloatArray | null, rows: number) => (g === null ? null : g.subarray(0, rows));
      be.attentionBackward(
        1,
        P,
        P,
        P,
        H,
        Hkv,
        D,
        q.data.subarray(0, P * qRow),
        k.data.subarray(0, P * kRow),
        v.data.subarray(0, P * kRow),
        probsP,
        out.grad.subarray(0, P * qRow),
        true,
        0,
        scale,
        head(gq, P * qRow),
        head(gk, P * kRow),
        head(gv, P * kRow),
      );
      if (S * T === 0) return;
      const gkc = gk === null ? null : alloc(S * L * kRow);
      const gvc = gv === null ? null : alloc(S * L * kRow);
      be.attentionBackward(
        S,
        T,
        L,
        L,
        H,
        Hkv,
        D,
        qC,
        kc,
        vc,
        probsC,
        out.grad.subarray(P * qRow),
        true,
        P,
        scale,
        gq === null ? null : gq.subarray(P * qRow),
        gkc,
        gvc,
      );
      // Scatter back: continuation s's prompt keys add into the shared prompt rows, its own into its rows.
      for (const [gc, g] of [
        [gkc, gk],
        [gvc, gv],
      ] as const) {
        if (gc === null || g === null) continue;
        for (let s = 0; s < S; s++) be.copy2d(1, P * kRow, gc, s * L * kRow, 0, g, 0, 0, true);
        be.copy2d(S, T * kRow, gc, P * kRow, L * kRow, g, P * kRow, T * kRow, true);
      }
    }, [probsP, probsC, kc, vc]);
  }
  return out;
}
