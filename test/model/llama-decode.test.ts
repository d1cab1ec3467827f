/**
 * The Llama family's fused decode step (model/llama-decode.ts): the native addon's one call
 * (native/decode.c) against the step composed of the reference backend's kernels, on random
 * layer stacks (GQA, biases, bf16 packs, a padded cache, 1 to 33 rows), one thread against two,
 * and the addon's argument checks. Sampling through it is checked in fused-decode.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Backend } from '../../src/engine/backend.js';
import { loadNativeBackend, nativeFunction } from '../../src/engine/backends/native.js';
import { referenceBackend as ref } from '../../src/engine/backends/reference.js';
import { composeLlamaDecodeStep, type LlamaDecodeArgs } from '../../src/model/llama-decode.js';
import { prng } from '../helpers/gradcheck.js';

type Step = (...args: LlamaDecodeArgs) => void;
const nat = loadNativeBackend();
const found = nativeFunction<Step>('llamaDecodeStep');
assert.ok(found !== null, 'the native addon has llamaDecodeStep');
const native: Step = found;
const composed: Step = (...args) => composeLlamaDecodeStep(ref, ...args);
const rand = prng(20250807);

function uniform(n: number, lo = -1, hi = 1): Float32Array {
  return Float32Array.from({ length: n }, () => lo + (hi - lo) * rand());
}

function ints(n: number, lo: number, hi: number): Int32Array {
  return Int32Array.from({ length: n }, () => lo + Math.floor(rand() * (hi - lo)));
}

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: { rtol: number; atol: number }, label: string): void {
  assert.equal(actual.length, expected.length, `${label}: length`);
  for (let i = 0; i < expected.length; i++) {
    const [a, e] = [actual[i], expected[i]];
    if (!(Math.abs(a - e) <= tol.atol + tol.rtol * Math.abs(e))) assert.fail(`${label}[${i}]: native ${a}, composed ${e}`);
  }
}

describe('llamaDecodeStep (one decode step in one call)', () => {
  // A random Llama-family layer stack; each backend packs the weights its own way.
  const dimsOf = (R: number, L: number, len: number, bf16: boolean) => {
    const [C, H, Hkv, D, F, V, Smax] = [24, 4, 2, 6, 40, 50, 9];
    return { R, L, C, H, Hkv, D, F, V, Smax, len, bf16, dims: Float64Array.of(R, L, C, H, Hkv, D, F, V, Smax, len, 1e-5, bf16 ? 1 : 0) };
  };
  type Dims = ReturnType<typeof dimsOf>;
  const model = (d: Dims, biases: boolean) => {
    const shapes: [number, number][] = [];
    const raw: (Float32Array | null)[] = [uniform(d.V * d.C), uniform(d.C, 0.5, 1.5), uniform(d.V * d.C)];
    shapes.push([0, 0], [0, 0], [d.V, d.C]);
    for (let l = 0; l < d.L; l++) {
      const proj: [number, number][] = [
        [d.H * d.D, d.C],
        [d.Hkv * d.D, d.C],
        [d.Hkv * d.D, d.C],
        [d.C, d.H * d.D],
      ];
      const mlp: [number, number][] = [
        [d.F, d.C],
        [d.F, d.C],
        [d.C, d.F],
      ];
      raw.push(uniform(d.C, 0.5, 1.5), ...proj.map(([n, k]) => uniform(n * k)), uniform(d.C, 0.5, 1.5), ...mlp.map(([n, k]) => uniform(n * k)));
      shapes.push([0, 0], ...proj, [0, 0], ...mlp);
      for (const [n] of [...proj, ...mlp]) {
        raw.push(biases ? uniform(n) : null);
        shapes.push([0, 0]);
      }
    }
    return { raw, shapes };
  };
  const packed = (be: Backend, m: ReturnType<typeof model>, bf16: boolean) =>
    m.raw.map((w, i) => {
      const [n, k] = m.shapes[i];
      if (w === null || n === 0) return w;
      const p = new Float32Array(be.packedFloats(n, k, bf16));
      be.packB(true, n, k, w, 0, k, p, bf16);
      return p;
    });

  it('matches the reference: GQA, biases or none, bf16 packs, a cache with padding, 1 to 33 rows', () => {
    for (const [R, len, biases, bf16] of [
      [1, 0, false, false],
      [5, 3, true, false],
      [8, 8, false, true],
      [33, 4, true, true],
    ] as const) {
      const d = dimsOf(R, 2, len, bf16);
      const m = model(d, biases);
      const caches = Array.from({ length: 2 * d.L }, () => uniform(R * d.Smax * d.Hkv * d.D));
      const keyMask = Uint8Array.from({ length: R * d.Smax }, (_, i) => (i % d.Smax === 0 && i > 0 ? 0 : 1)); // left padding in rows > 0
      const ids = ints(R, 0, d.V);
      const positions = ints(R, 0, 20);
      const [cos, sin] = [uniform(20 * (d.D / 2)), uniform(20 * (d.D / 2))];
      const run = (step: Step, be: Backend) => {
        const cs = caches.map((c) => c.slice());
        const logits = new Float32Array(R * d.V);
        step(d.dims, packed(be, m, bf16), cs, keyMask, ids, positions, cos, sin, logits);
        return { logits, cs };
      };
      const [n, r] = [run(native, nat), run(composed, ref)];
      const label = `R ${R} len ${len} biases ${biases} bf16 ${bf16}`;
      // bf16 products round their inputs: where the two backends' fp32 sums differ in the last bit
      // near a bf16 boundary, a rounding flips (0.4%) and carries through the layers.
      const tol = bf16 ? { rtol: 5e-2, atol: 5e-2 } : { rtol: 1e-4, atol: 1e-4 };
      assertClose(n.logits, r.logits, tol, `logits ${label}`);
      for (const [i, c] of n.cs.entries()) assertClose(c, r.cs[i], bf16 ? tol : { rtol: 1e-5, atol: 1e-5 }, `cache ${i} ${label}`);
      assert.notDeepEqual(n.cs[0], caches[0], 'the new keys were written');
      // Rows split between threads (a small model's step) give the one-thread result bit for bit.
      const threads = nat.getNumThreads();
      nat.setNumThreads(1);
      const one = run(native, nat);
      nat.setNumThreads(Math.max(2, threads));
      const two = run(native, nat);
      nat.setNumThreads(threads);
      assert.deepEqual(two.logits, one.logits, `threads ${label}`);
      assert.deepEqual(two.cs, one.cs, `threads, caches ${label}`);
    }
  });

  it('rejects a short pack, a wrong weight count, a full cache and an id outside the vocabulary', () => {
    const d = dimsOf(2, 1, 0, false);
    const m = model(d, false);
    const args = () => ({
      dims: d.dims.slice(),
      weights: packed(nat, m, false),
      caches: [uniform(2 * d.Smax * d.Hkv * d.D), uniform(2 * d.Smax * d.Hkv * d.D)],
      ids: new Int32Array([1, 2]),
    });
    const call = (a: ReturnType<typeof args>) =>
      native(a.dims, a.weights, a.caches, new Uint8Array(2 * d.Smax).fill(1), a.ids, new Int32Array(2), uniform(30), uniform(30), new Float32Array(2 * d.V));
    call(args()); // the valid call runs
    const bad = { code: 'NATIVE_BAD_ARGUMENT' };
    const short = args();
    short.weights[4] = new Float32Array(3);
    assert.throws(() => call(short), { ...bad, message: /q_proj pack \(element 4\) has 3 elements/ });
    const count = args();
    count.weights.pop();
    assert.throws(() => call(count), { ...bad, message: /weights must be an Array of 19 entries, got 18/ });
    const full = args();
    full.dims[9] = d.Smax;
    assert.throws(() => call(full), { ...bad, message: /the cache is full/ });
    const id = args();
    id.ids[1] = d.V;
    assert.throws(() => call(id), { ...bad, message: /ids\[1\] = 50 is outside the vocabulary/ });
  });
});
