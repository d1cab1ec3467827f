/**
 * Weights packed once per sampling call. Decoding multiplies every weight matrix by a few rows
 * (one per sequence) at each generated token; a general sgemm repacks the weight into its cache
 * panels on every call, which for a few dozen rows costs about as much as the product itself.
 * Inside `withPackedWeights(fn)`, a product of 4-64 rows with a weight packs the weight on first
 * use (the builtin sgemm's panels, native/sgemm.c) and reuses the pack until `fn` returns. The
 * native product splits B's panels between threads with one pool wake-up per product, and only
 * above 4 MFLOP (PREPACKED_PAR_MIN_FLOPS in native/sgemm.c; a decode step's products take tens of
 * microseconds). Fewer than 4 rows keep gemm's few-rows kernels: one row fills a twelfth of the
 * packed kernel's 12-row register tile, which makes batch-1 decoding slower packed.
 *
 * Only for code that does not change weights inside the scope (model/sample.ts's generate is
 * synchronous and runs no optimizer step). More rows keep the sgemm (its packing is amortised).
 *
 * Under precision bf16 the packs hold bf16 values, half the bytes: decoding a small model reads
 * every weight once per token, and 10m's 38 MB of fp32 weights do not fit a 32 MB L3 where its
 * 19 MB of bf16 do. The product rounds A to bf16 as well and sums in fp32, as precision bf16's
 * gemm does, so sampling and the learner's log-probs still see the same products.
 *
 * A pack's buffer outlives its scope (held weakly by its weight, so it goes with the model) and is
 * packed again in the next scope: weights change between sampling calls (an optimizer step), but
 * allocating a fresh zero-filled copy of every weight on each call cost more than packing it
 * (page faults; 10m, 64 new tokens: ~30 ms of a 500 ms call). Peak memory is unchanged (a pack
 * existed during every call already); between calls the packs stay resident.
 */
import type { Backend, FloatArray } from './backend.js';

/** Rows from which packing once pays: below, gemm's few-rows kernels read each weight once. */
export const PACKED_MIN_ROWS = 4;
/** Rows up to which packing once pays: above, the sgemm's own packing is amortised. */
export const PACKED_MAX_ROWS = 64;

/**
 * Bytes of packs one scope may hold: a pack is a second copy of its weight, and a model too large
 * for two copies (a 500M-parameter model is 2 GB in fp32) keeps the plain products beyond it.
 */
export const PACK_BUDGET_BYTES = 1 << 30;

interface Pack {
  transB: boolean;
  bf16: boolean;
  N: number;
  K: number;
  /** The A of the low-rank delta merged into `data` (null: the plain weight). */
  delta: FloatArray | null;
  data: FloatArray;
}

/**
 * A low-rank update W + scale · B·A of a weight W stored [N, K] (a LoRA adapter: A [r, K],
 * B [N, r]), folded into its pack so that a decode step reads one matrix. The merged product
 * differs from W's plus the adapter's by float rounding only.
 */
export interface LowRankDelta {
  A: FloatArray;
  B: FloatArray;
  r: number;
  scale: number;
}

/** The packs current in a scope, and their bytes (against PACK_BUDGET_BYTES). */
interface ScopeState {
  packs: Set<Pack>;
  bytes: number;
}

/** Every pack made so far, per weight array; a pack is current only when it is in `scope`. */
let packsOf = new WeakMap<FloatArray, Pack[]>();
let scope: ScopeState | null = null;
// MAGRPO_PACK_WEIGHTS=0 turns packing off for a whole process (A/B benchmarks).
let enabled = process.env.MAGRPO_PACK_WEIGHTS !== '0';

/** Turns packing off (or on again) for the process: for comparisons and benchmarks. Off drops the kept buffers. */
export function setWeightPacking(on: boolean): void {
  enabled = on;
  if (!on) packsOf = new WeakMap();
}

function runIn<T>(state: ScopeState, fn: () => T): T {
  if (scope !== null) return fn();
  scope = state;
  try {
    return fn();
  } finally {
    scope = null;
  }
}

/** Runs `fn` with weight packing on (nested calls share the outer scope). */
export function withPackedWeights<T>(fn: () => T): T {
  return runIn({ packs: new Set(), bytes: 0 }, fn);
}

/**
 * A scope whose packs stay current from one `run` to the next: for a process that decodes step by
 * step with weights that never change (`magrpo serve`'s batch engine, one `run` per decode step,
 * where packing on every step would cost as much as the products). `invalidate()` after changing
 * a weight; adapters (LoRA) are separate products and need not.
 */
export class PackScope {
  private state: ScopeState = { packs: new Set(), bytes: 0 };

  run<T>(fn: () => T): T {
    return runIn(this.state, fn);
  }

  invalidate(): void {
    this.state = { packs: new Set(), bytes: 0 };
  }
}

/** A weight packed for `gemmPrepacked(..., packed.data, ..., packed.bf16)`. */
export interface PackedWeight {
  data: FloatArray;
  /** bf16 values (precision bf16): pass to gemmPrepacked. */
  bf16: boolean;
}

/**
 * The packed form of B (stored [N, K] when `transB`, else [K, N], offset 0) for a product with
 * `rows` rows, or null when this product should not use one (no scope, packing off, rows out of
 * range, the scope's budget spent). bf16 under precision bf16, else fp32.
 */
export function packedWeight(
  be: Backend,
  B: FloatArray,
  transB: boolean,
  rows: number,
  N: number,
  K: number,
  delta: LowRankDelta | null = null,
): PackedWeight | null {
  if (scope === null || !enabled || rows < PACKED_MIN_ROWS || rows > PACKED_MAX_ROWS) return null;
  if (delta !== null && (!transB || delta.A.length !== delta.r * K || delta.B.length !== N * delta.r)) {
    throw new Error(`packedWeight: a low-rank delta of rank ${delta.r} does not fit a [${N}, ${K}] weight stored ${transB ? '[N, K]' : '[K, N]'}`);
  }
  const bf16 = be.getPrecision() !== 'fp32';
  // One array may be read both ways (a tied embedding is also the LM head): a pack per use. One
  // base weight may also be merged with several adapters (agents sharing a base model): their
  // sampling calls take turns, so each call refills the buffers the last one used.
  const key = delta?.A ?? null;
  let packs = packsOf.get(B) ?? [];
  const fits = (p: Pack) => p.transB === transB && p.bf16 === bf16 && p.N === N && p.K === K;
  const current = packs.find((p) => fits(p) && p.delta === key && scope?.packs.has(p));
  if (current !== undefined) return current;
  let pack = packs.find((p) => fits(p) && !scope?.packs.has(p));
  const floats = be.packedFloats(N, K, bf16);
  if (scope.bytes + floats * B.BYTES_PER_ELEMENT > PACK_BUDGET_BYTES) return null;
  scope.bytes += floats * B.BYTES_PER_ELEMENT;
  // A kept buffer is reused at this backend's size only (each backend packs its own way).
  if (pack !== undefined && pack.data.length !== floats) {
    packs = packs.filter((p) => p !== pack);
    pack = undefined;
  }
  if (pack === undefined) {
    pack = { transB, bf16, N, K, delta: key, data: new (B.constructor as Float32ArrayConstructor)(floats) };
    packsOf.set(B, [...packs, pack]);
  }
  pack.delta = key;
  if (delta === null) be.packB(transB, N, K, B, 0, transB ? K : N, pack.data, bf16);
  else {
    const merged = mergeScratch(B, N * K);
    merged.set(B.subarray(0, N * K));
    be.gemm(false, false, N, K, delta.r, delta.scale, delta.B, 0, delta.r, delta.A, 0, K, 1, merged, 0, K);
    be.packB(true, N, K, merged, 0, K, pack.data, bf16);
  }
  scope.packs.add(pack);
  return pack;
}

/** One weight's worth of room to merge a delta in before packing (packing is synchronous, one weight at a time). */
let scratch: FloatArray | null = null;
function mergeScratch(like: FloatArray, n: number): FloatArray {
  if (scratch === null || scratch.length < n || scratch.constructor !== like.constructor) scratch = new (like.constructor as Float32ArrayConstructor)(n);
  return scratch.subarray(0, n);
}
