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
  const be = backend();
  const qRow = H * D;
  const kRow = Hkv * D;
  const L = P + T; // keys a continuation sees

  // Each continuation's keys and values: the prompt's rows, then its own.
  const kc = allocOverwritten(S * L * kRow);
  const vc = allocOverwritten(S * L * kRow);
  for (const [src, dst] of [
    [k.data, kc],
    [v.data, vc],
  ] as const) {
    be.copy2d(S, P * kRow, src, 0, 0, dst, 0, L * kRow, false);
    be.copy2d(S, T * kRow, src, P * kRow, T * kRow, dst, P * kRow, L * kRow, false);
  }
  let maskC: Uint8Array | null = null;
  if (mask !== null) {
    maskC = new Uint8Array(S * L);
    for (let s = 0; s < S; s++) {
      maskC.fill(1, s * L, s * L + P);
      maskC.set(mask.subarray(s * T, (s + 1) * T), s * L + P);
    }
  }
  // Two attention calls: the prompt over itself, then the continuations (batch S) over theirs.
  // `rows` picks a part's query rows out of the packed q / out / their gradients.
  const parts = [
    {
      B: 1,
      T: P,
      S: P,
      rows: [0, P * qRow],
      k: k.data.subarray(0, P * kRow),
      v: v.data.subarray(0, P * kRow),
      mask: null,
      past: 0,
      probs: allocOverwritten(H * P * P),
    },
    { B: S, T, S: L, rows: [P * qRow, N * qRow], k: kc, v: vc, mask: maskC, past: P, probs: allocOverwritten(S * H * T * L) },
  ] as const;
  const out = new Tensor(allocOverwritten(q.size), q.shape);
  const scale = 1 / Math.sqrt(D);
  const rowsOf = (x: FloatArray, [a, b]: readonly [number, number]) => x.subarray(a, b);
  for (const p of parts) {
    if (p.B * p.T > 0)
      be.attention(p.B, p.T, p.S, p.S, H, Hkv, D, rowsOf(q.data, p.rows), p.k, p.v, p.probs, rowsOf(out.data, p.rows), p.mask, true, p.past, scale);
  }

  if (needsGrad(q, k, v)) {
    record(out, () => {
      if (out.grad === null) return;
      const gq = q.requiresGrad ? q.ensureGrad() : null;
      const gk = k.requiresGrad ? k.ensureGrad() : null;
      const gv = v.requiresGrad ? v.ensureGrad() : null;
      // The prompt's key gradients go straight to its rows; the continuations' to copies (gkc, gvc).
      const gkc = gk === null ? null : alloc(S * L * kRow);
      const gvc = gv === null ? null : alloc(S * L * kRow);
      const targets = [
        [gk?.subarray(0, P * kRow) ?? null, gv?.subarray(0, P * kRow) ?? null],
        [gkc, gvc],
      ] as const;
      for (const [i, p] of parts.entries()) {
        if (p.B * p.T === 0) continue;
        const gqPart = gq === null ? null : rowsOf(gq, p.rows);
        be.attentionBackward(
          p.B,
          p.T,
          p.S,
          p.S,
          H,
          Hkv,
          D,
          rowsOf(q.data, p.rows),
          p.k,
          p.v,
          p.probs,
          rowsOf(out.grad, p.rows),
          true,
          p.past,
          scale,
          gqPart,
          targets[i][0],
          targets[i][1],
        );
      }
      // Scatter back: continuation s's prompt keys add into the shared prompt rows, its own into its rows.
      for (const [gc, g] of [
        [gkc, gk],
        [gvc, gv],
      ] as const) {
        if (gc === null || g === null || S * T === 0) continue;
        for (let s = 0; s < S; s++) be.copy2d(1, P * kRow, gc, s * L * kRow, 0, g, 0, 0, true);
        be.copy2d(S, T * kRow, gc, P * kRow, L * kRow, g, P * kRow, T * kRow, true);
      }
    }, [parts[0].probs, parts[1].probs, kc, vc]);
  }
  return out;
}
