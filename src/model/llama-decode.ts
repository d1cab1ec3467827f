/**
 * The Llama family's fused decode step: one new token for each of R sequences, from token ids to
 * logits [R, V], with the new keys and values written to row `len` of the KV cache, in one call.
 * model/llama.ts takes it inside sampling calls (weights packed once per call, engine/packed.ts).
 * With the native backend it is one addon call (native/decode.c: no framework between the
 * kernels, one pool wake-up per product); with any other it runs as the backend's own kernels,
 * `composeLlamaDecodeStep`, which is also the definition native/decode.c follows line for line.
 * Per layer:
 *
 *   x = rmsnorm(h) · ln1
 *   q = rope(x Wqᵀ + bq);   cache_k[len] = rope(x Wkᵀ + bk);   cache_v[len] = x Wvᵀ + bv
 *   h += attention(q, cache_k[0..len], cache_v[0..len]) Woᵀ + bo
 *   x = rmsnorm(h) · ln2;   h += (silu(x Wgᵀ + bg) ⊙ (x Wuᵀ + bu)) Wdᵀ + bd
 *
 * then logits = (rmsnorm(h) · lnf) headᵀ. Weights are packs (`packB(true, out, in, W, 0, in, …)`),
 * read by `gemmPrepacked`. The engine knows no architecture: this file is the Llama family's.
 */
import type { Backend, FloatArray } from '../engine/backend.js';
import { nativeFunction } from '../engine/backends/native.js';
import { timedNative } from '../engine/profile.js';

/**
 * The arguments of one step.
 *   dims     [R, L, C, H, Hkv, D, F, V, Smax, len, eps, bf16 (1: the packs hold bf16)]
 *   weights  GLOBAL_WEIGHTS (embedding [V, C], final norm [C], LM head pack), then per layer the
 *            LAYER_WEIGHTS in that order (biases null when absent)
 *   caches   [k₀, v₀, k₁, v₁, …], each [R, Smax, Hkv, D]
 *   keyMask  [R, Smax], row len already set; ids, positions [R]; cos/sin [maxPos, D/2]
 */
export type LlamaDecodeArgs = [
  dims: Float64Array,
  weights: readonly (FloatArray | null)[],
  caches: readonly FloatArray[],
  keyMask: Uint8Array,
  ids: Int32Array,
  positions: Int32Array,
  cos: FloatArray,
  sin: FloatArray,
  logits: FloatArray,
];

/**
 * The LoRA adapters of a run of rows: the sequences of one agent, when agents that share a base
 * model decode in one batch (model/sample.ts). Each projection's product with the base weight's
 * pack is followed, on rows [row0, row1), by `+ scale · (x Aᵀ) Bᵀ`, as ops.ts's linearLowRank
 * does. `weights` holds, per layer and per LORA_PROJECTIONS entry, A [r, in] then B [out, r]
 * (both null where that projection has no adapter).
 */
export interface DecodeLoraRun {
  row0: number;
  row1: number;
  r: number;
  scale: number;
  weights: readonly (FloatArray | null)[];
}

/** The projections a run's adapters may cover, in their order in `DecodeLoraRun.weights`. */
export const LORA_PROJECTIONS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;

/** The weights before the layers'. */
export const GLOBAL_WEIGHTS = ['embed', 'norm', 'head'] as const;
/** One layer's weights in the list, in order: norms and packs, then the projections' biases. */
export const LAYER_WEIGHTS = [
  'ln1',
  'q',
  'k',
  'v',
  'o',
  'ln2',
  'gate',
  'up',
  'down',
  'q_bias',
  'k_bias',
  'v_bias',
  'o_bias',
  'gate_bias',
  'up_bias',
  'down_bias',
] as const;
/** Weights per layer in the list (native/decode.c reads the same layout). */
export const DECODE_WEIGHTS_PER_LAYER = LAYER_WEIGHTS.length;
const at = Object.fromEntries(LAYER_WEIGHTS.map((name, i) => [name, i])) as Record<(typeof LAYER_WEIGHTS)[number], number>;

/** Steps run so far (tests and diagnostics: whether sampling took the fused path). */
export const decodeStepCount = { calls: 0 };

/**
 * Cache rows that hold the same first `len` keys and values (KVCache.sharedKeys): row r may read
 * them from row `rows[r]`. A hint, never a change of result: every row holds its own copy.
 */
export interface SharedKeys {
  rows: Int32Array;
  len: number;
}

type NativeStep = (
  ...args: [...LlamaDecodeArgs, loraRuns: Float64Array | null, loraWeights: readonly (FloatArray | null)[] | null, kvRows: Int32Array | null, kvShared: number]
) => void;

/**
 * One fused decode step on `be`: the addon's when `be` is the native backend, else composed from
 * `be`'s kernels. `lora`: adapters per run of rows, added to the packs' products (none: the packs
 * alone). `shared`: the addon's attention reads each group's shared keys from one row, which then
 * stays in cache from one row of the group to the next (the composed step reads every row's own
 * copy: the same numbers).
 */
export function llamaDecodeStep(be: Backend, args: LlamaDecodeArgs, lora: readonly DecodeLoraRun[] = [], shared?: SharedKeys): void {
  decodeStepCount.calls++;
  const native = be.name === 'native' ? nativeFunction<NativeStep>('llamaDecodeStep') : null;
  if (native === null) {
    composeLlamaDecodeStep(be, args, lora);
    return;
  }
  const runs = lora.length > 0 ? Float64Array.from(lora.flatMap((a) => [a.row0, a.row1, a.r, a.scale])) : null;
  const weights = lora.length > 0 ? lora.flatMap((a) => a.weights) : null;
  timedNative('llamaDecodeStep', () => native(...args, runs, weights, shared?.rows ?? null, shared?.len ?? 0));
}

/** The step as `be`'s kernels in sequence: the definition (and the path of backends without a fused one). */
export function composeLlamaDecodeStep(be: Backend, args: LlamaDecodeArgs, lora: readonly DecodeLoraRun[] = []): void {
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

  const maxRank = Math.max(0, ...lora.map((a) => a.r));
  const t = f32(R * maxRank);
  /**
   * out[offC + r·ldc, :N] = A[r] · Wᵀ + bias for the R rows, W packed (the bias first, as ops.ts's
   * linear), then each run's adapter on projection `p` of layer `l` (-1: none, the head).
   */
  const proj = (
    l: number,
    p: number,
    N: number,
    K: number,
    A: FloatArray,
    pack: FloatArray,
    bias: FloatArray | null,
    out: FloatArray,
    offC: number,
    ldc: number,
  ) => {
    if (bias) for (let r = 0; r < R; r++) out.set(bias.subarray(0, N), offC + r * ldc);
    be.gemmPrepacked(R, N, K, 1, A, 0, K, pack, bias ? 1 : 0, out, offC, ldc, bf16);
    if (p < 0) return;
    for (const a of lora) {
      const La = a.weights[(l * LORA_PROJECTIONS.length + p) * 2];
      const Lb = a.weights[(l * LORA_PROJECTIONS.length + p) * 2 + 1];
      if (La === null || Lb === null) continue;
      const rows = a.row1 - a.row0;
      be.gemm(false, true, rows, a.r, K, 1, A, a.row0 * K, K, La, 0, K, 0, t, 0, a.r);
      be.gemm(false, true, rows, N, a.r, a.scale, t, 0, a.r, Lb, 0, a.r, 1, out, offC + a.row0 * ldc, ldc);
    }
  };

  be.embedding(R, C, ids, need(0), h);
  for (let l = 0; l < L; l++) {
    const w = GLOBAL_WEIGHTS.length + DECODE_WEIGHTS_PER_LAYER * l;
    const [kc, vc] = [caches[2 * l], caches[2 * l + 1]];
    be.rmsnorm(R, C, h, need(w + at.ln1), eps, x, rstd);
    proj(l, 0, HD, C, x, need(w + at.q), weights[w + at.q_bias], q, 0, HD);
    be.rope(R, H, D, q, positions, cos, sin, q);
    proj(l, 1, KV, C, x, need(w + at.k), weights[w + at.k_bias], kc, len * KV, ldkv);
    proj(l, 2, KV, C, x, need(w + at.v), weights[w + at.v_bias], vc, len * KV, ldkv);
    for (let r = 0; r < R; r++) {
      const row = kc.subarray(r * ldkv + len * KV, r * ldkv + len * KV + KV); // strided: one row at a time
      be.rope(1, Hkv, D, row, positions.subarray(r, r + 1), cos, sin, row);
    }
    be.attention(R, 1, S, Smax, H, Hkv, D, q, kc, vc, P, att, keyMask, true, len, 1 / Math.sqrt(D));
    proj(l, 3, C, HD, att, need(w + at.o), weights[w + at.o_bias], y, 0, C);
    be.axpy(R * C, 1, y, h); // the residual add, h + y as the unfused forward rounds it

    be.rmsnorm(R, C, h, need(w + at.ln2), eps, x, rstd);
    proj(l, 4, F, C, x, need(w + at.gate), weights[w + at.gate_bias], g, 0, F);
    proj(l, 5, F, C, x, need(w + at.up), weights[w + at.up_bias], u, 0, F);
    be.swiglu(R * F, g, u, g);
    proj(l, 6, C, F, g, need(w + at.down), weights[w + at.down_bias], y, 0, C);
    be.axpy(R * C, 1, y, h);
  }
  be.rmsnorm(R, C, h, need(1), eps, x, rstd);
  proj(-1, -1, V, C, x, need(2), null, logits, 0, V);
}
