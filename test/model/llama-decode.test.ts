/**
 * The Llama family's fused decode step (model/llama-decode.ts): the native addon's one call
 * (native/decode.c) against the step composed of the reference backend's kernels, on random
 * layer stacks (GQA, biases, bf16 packs, a padded cache, 1 to 33 rows), one thread against two,
 * and the addon's argument checks. Sampling through it is checked in fused-decode.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Backend, FloatArray } from '../../src/engine/backend.js';
import { loadNativeBackend, nativeFunction } from '../../src/engine/backends/native.js';
import { referenceBackend as ref } from '../../src/engine/backends/reference.js';
import { composeLlamaDecodeStep, type DecodeLoraRun, type LlamaDecodeArgs } from '../../src/model/llama-decode.js';
import { prng } from '../helpers/gradcheck.js';

type Step = (...args: LlamaDecodeArgs) => void;
const nat = loadNativeBackend();
const found = nativeFunction<Step>('llamaDecodeStep');
assert.ok(found !== null, 'the native addon has llamaDecodeStep');
const native: Step = found;
const composed: Step = (...args) => composeLlamaDecodeStep(ref, args);
const nativeWithLora = found as unknown as (...args: [...LlamaDecodeArgs, Float64Array, readonly (FloatArray | null)[]]) => void;
const nativeShared = found as unknown as (
  ...args: [...LlamaDecodeArgs, Float64Array | null, readonly (FloatArray | null)[] | null, Int32Array | null, number]
) => void;
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

  it('adds each run of rows its own LoRA adapters: native = composed = the packs of W + s·B·A, any thread count', () => {
    const d = dimsOf(9, 2, 3, false);
    const m = model(d, true);
    const [HD, KV] = [d.H * d.D, d.Hkv * d.D];
    const shapes = [
      [HD, d.C],
      [KV, d.C],
      [KV, d.C],
      [d.C, HD],
      [d.F, d.C],
      [d.F, d.C],
      [d.C, d.F],
    ]; // [out, in] per LORA_PROJECTIONS entry
    const rawIndex = [1, 2, 3, 4, 6, 7, 8]; // the same projections in a layer's weights
    const adapters = (r: number, skip: number) =>
      Array.from({ length: d.L }, () => shapes.flatMap(([out, inp], p) => (p === skip ? [null, null] : [uniform(r * inp), uniform(out * r)]))).flat();
    const runs: DecodeLoraRun[] = [
      { row0: 0, row1: 4, r: 3, scale: 0.7, weights: adapters(3, 2) }, // v_proj without one
      { row0: 5, row1: 9, r: 2, scale: 1.5, weights: adapters(2, -1) }, // row 4: the base alone
    ];
    const caches = Array.from({ length: 2 * d.L }, () => uniform(d.R * d.Smax * d.Hkv * d.D));
    const keyMask = new Uint8Array(d.R * d.Smax).fill(1);
    const ids = ints(d.R, 0, d.V);
    const positions = ints(d.R, 3, 20);
    const [cos, sin] = [uniform(20 * (d.D / 2)), uniform(20 * (d.D / 2))];
    const run = (step: (args: LlamaDecodeArgs) => void, weights: (Float32Array | null)[]) => {
      const cs = caches.map((c) => c.slice());
      const logits = new Float32Array(d.R * d.V);
      step([d.dims, weights, cs, keyMask, ids, positions, cos, sin, logits]);
      return logits;
    };
    const nativeRuns = (args: LlamaDecodeArgs) => {
      const loraRuns = Float64Array.from(runs.flatMap((a) => [a.row0, a.row1, a.r, a.scale]));
      nativeWithLora(
        ...args,
        loraRuns,
        runs.flatMap((a) => a.weights),
      );
    };
    const withLora = run(nativeRuns, packed(nat, m, false));
    const composedLora = run((args) => composeLlamaDecodeStep(ref, args, runs), packed(ref, m, false));
    assertClose(withLora, composedLora, { rtol: 1e-4, atol: 1e-4 }, 'native against composed');
    // Each run's rows as a model whose weights have its adapters merged in; row 4 as the base.
    const merged = (a: DecodeLoraRun | null) => {
      const raw = m.raw.map((w) => w?.slice() ?? null);
      if (a)
        for (let l = 0; l < d.L; l++)
          for (const [p, [out, inp]] of shapes.entries()) {
            const [A, B] = [a.weights[(l * 7 + p) * 2], a.weights[(l * 7 + p) * 2 + 1]];
            if (!A || !B) continue;
            const W = raw[3 + 16 * l + rawIndex[p]] as Float32Array;
            for (let o = 0; o < out; o++)
              for (let i = 0; i < inp; i++) for (let k = 0; k < a.r; k++) W[o * inp + i] += a.scale * B[o * a.r + k] * A[k * inp + i];
          }
      return run((args) => composeLlamaDecodeStep(ref, args), packed(ref, { raw, shapes: m.shapes }, false));
    };
    const V = d.V;
    for (const [rows, a] of [
      [[0, 4], runs[0]],
      [[4, 5], null],
      [[5, 9], runs[1]],
    ] as const) {
      const want = merged(a);
      assertClose(withLora.subarray(rows[0] * V, rows[1] * V), want.subarray(rows[0] * V, rows[1] * V), { rtol: 1e-4, atol: 1e-4 }, `rows ${rows}`);
    }
    assert.ok(
      withLora.some((x, i) => Math.abs(x - merged(null)[i]) > 1e-3),
      'the adapters change the logits',
    );
    // Rows split between threads: each slice finds its runs by its offset in the step.
    const threads = nat.getNumThreads();
    nat.setNumThreads(1);
    const one = run(nativeRuns, packed(nat, m, false));
    nat.setNumThreads(Math.max(2, threads));
    const two = run(nativeRuns, packed(nat, m, false));
    nat.setNumThreads(threads);
    assert.deepEqual(two, one, 'one thread against two');
    // Bad runs are errors naming the argument.
    const bad = (runs: Float64Array, weights: (Float32Array | null)[], message: RegExp) =>
      assert.throws(() => run((args) => nativeWithLora(...args, runs, weights), packed(nat, m, false)), { code: 'NATIVE_BAD_ARGUMENT', message });
    bad(Float64Array.of(0, 10, 2, 1), adapters(2, -1), /loraRuns run 0: rows \[0, 10\) are not inside \[0, 9\)/);
    bad(Float64Array.of(0, 4, 2, 1), adapters(2, -1).slice(1), /loraWeights must be an Array of 28 entries, got 27/);
    bad(Float64Array.of(0, 4, 3, 1), adapters(2, -1), /LoRA A \(element 0\) has 48 elements, needs at least 72/);
  });

  it("reads a group's shared keys from the row kvRows names: the same logits where the copies agree, that row's where they do not", () => {
    for (const [D, bf16, len, shared] of [
      [6, false, 7, 5], // the portable attention loop
      [64, true, 7, 5], // heads of 64: the AVX-512 kernel where there is one
      [64, false, 70, 45], // 71 keys: blocks of 16 keys and 32 values, the last ones partial
    ] as const) {
      const d0 = dimsOf(6, 2, len, bf16);
      const d = { ...d0, D, Smax: Math.max(d0.Smax, len + 2), dims: d0.dims.slice() };
      d.dims[5] = D;
      d.dims[8] = d.Smax;
      const m = model(d, false);
      const row = d.Smax * d.Hkv * d.D;
      // Rows 0-2 and 3-5 are two groups; each row's first `shared` positions are copies of its group's first row's.
      const caches = Array.from({ length: 2 * d.L }, () => {
        const c = uniform(d.R * row);
        for (const r of [1, 2, 4, 5]) c.copyWithin(r * row, (r < 3 ? 0 : 3) * row, (r < 3 ? 0 : 3) * row + shared * d.Hkv * d.D);
        return c;
      });
      const keyMask = new Uint8Array(d.R * d.Smax).fill(1);
      const ids = ints(d.R, 0, d.V);
      const positions = Int32Array.from({ length: d.R }, () => len);
      const [cos, sin] = [uniform((len + 8) * (D / 2)), uniform((len + 8) * (D / 2))];
      const weights = packed(nat, m, bf16);
      const run = (cs: Float32Array[], kvRows: Int32Array | null, shared: number) => {
        const logits = new Float32Array(d.R * d.V);
        nativeShared(
          d.dims,
          weights,
          cs.map((c) => c.slice()),
          keyMask,
          ids,
          positions,
          cos,
          sin,
          logits,
          null,
          null,
          kvRows,
          shared,
        );
        return logits;
      };
      const kvRows = Int32Array.of(0, 0, 0, 3, 3, 3);
      const plain = run(caches, null, 0);
      assert.deepEqual(run(caches, kvRows, shared), plain, `D ${D}: copies that agree give the same logits, bit for bit`);
      // Row 4's copy made different: read through kvRows it does not count; read as its own, it does.
      const broken = caches.map((c) => {
        const b = c.slice();
        for (let i = 4 * row; i < 4 * row + shared * d.Hkv * d.D; i++) b[i] += 0.5;
        return b;
      });
      const V = d.V;
      assert.deepEqual(run(broken, kvRows, shared).subarray(4 * V, 5 * V), plain.subarray(4 * V, 5 * V), `D ${D}: row 4 read row 3's copy`);
      assert.notDeepEqual(run(broken, null, 0).subarray(4 * V, 5 * V), plain.subarray(4 * V, 5 * V), `D ${D}: row 4's own copy differs`);
      const bad = { code: 'NATIVE_BAD_ARGUMENT' };
      assert.throws(() => run(caches, Int32Array.of(0, 0, 0, 3, 3, 6), shared), { ...bad, message: /kvRows\[5\] = 6 is not a row of \[0, 6\)/ });
      assert.throws(() => run(caches, kvRows, len + 1), { ...bad, message: new RegExp(`kvShared = ${len + 1} is not an integer in \\[0, len = ${len}\\]`) });
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
