/**
 * Weights packed once per sampling call. Decoding multiplies every weight matrix by a few rows
 * (one per sequence) at each generated token; a general sgemm repacks the weight into its cache
 * panels on every call, which for 9-64 rows costs about as much as the product itself (a profile
 * of 10m sampling at batch 32: 84 GFLOP/s with packing, the same micro-kernel without it far
 * more). Inside `withPackedWeights(fn)`, a product of such rows with a weight packs the weight on
 * first use and reuses the pack until `fn` returns; the packs are then dropped.
 *
 * Only for code that does not change weights inside the scope (model/sample.ts's generate is
 * synchronous and runs no optimizer step). Products with fewer rows keep the few-rows kernels
 * (they read each weight once already), more rows the sgemm (packing is amortised there), and
 * bf16 precision its own products.
 */
import type { Backend, FloatArray } from './backend.js';

/** Rows from which packing once pays: below, gemm's few-rows kernels read each weight once. */
export const PACKED_MIN_ROWS = 4;
/** Rows up to which packing once pays: above, the sgemm's own packing is amortised. */
export const PACKED_MAX_ROWS = 64;

let scope: Map<FloatArray, FloatArray> | null = null;
let enabled = true;

/** Turns packing off (or on again) for the process: for comparisons and benchmarks. */
export function setWeightPacking(on: boolean): void {
  enabled = on;
}

/** Runs `fn` with weight packing on (nested calls share the outer scope). */
export function withPackedWeights<T>(fn: () => T): T {
  if (scope !== null) return fn();
  scope = new Map();
  try {
    return fn();
  } finally {
    scope = null;
  }
}

/**
 * The packed form of B (stored [N, K] when `transB`, else [K, N], offset 0) for a product with
 * `rows` rows, or null when this product should not use one (no scope, rows out of range, a
 * backend without packing, bf16 precision).
 */
export function packedWeight(be: Backend, B: FloatArray, transB: boolean, rows: number, N: number, K: number): FloatArray | null {
  if (scope === null || !enabled || rows < PACKED_MIN_ROWS || rows > PACKED_MAX_ROWS || be.getPrecision() !== 'fp32') return null;
  let packed = scope.get(B);
  if (packed === undefined) {
    packed = new (B.constructor as Float32ArrayConstructor)(be.packedFloats(N, K));
    be.packB(transB, N, K, B, 0, transB ? K : N, packed);
    scope.set(B, packed);
  }
  return packed;
}
