/**
 * The native backend against the reference backend, kernel by kernel, on seeded random inputs:
 * odd sizes, offsets and leading dimensions, broadcasting, masks, ignored targets, ties, and
 * sizes large enough to take the multi-threaded paths. Then the argument checks of the addon.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { BINARY_OPS, type GemmArgs, KERNELS, UNARY_OPS } from '../../src/engine/backend.js';
import { buildHint, loadNativeBackend, NativeBackendUnavailable } from '../../src/engine/backends/native.js';
import { referenceBackend as ref } from '../../src/engine/backends/reference.js';
import { prng } from '../helpers/gradcheck.js';

const nat = loadNativeBackend();
const rand = prng(20250807);

type Arg = Float32Array | Int32Array | Uint8Array | number | boolean | string | null | readonly number[];
type Kernel = (typeof KERNELS)[number];
interface Tol {
  rtol: number;
  atol: number;
}

const TOL: Tol = { rtol: 1e-5, atol: 1e-6 };

function uniform(n: number, lo = -1, hi = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = lo + (hi - lo) * rand();
  return a;
}

function ints(n: number, lo: number, hi: number): Int32Array {
  const a = new Int32Array(n);
  for (let i = 0; i < n; i++) a[i] = lo + Math.floor(rand() * (hi - lo));
  return a;
}

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tol, label: string): void {
  assert.equal(actual.length, expected.length, `${label}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i];
    const e = expected[i];
    if (Object.is(a, e) || (Number.isNaN(a) && Number.isNaN(e))) continue;
    if (!(Math.abs(a - e) <= tol.atol + tol.rtol * Math.abs(e))) assert.fail(`${label}[${i}]: native ${a}, reference ${e}`);
  }
}

/**
 * Runs `kernel` on both backends with copies of `args` and compares the arguments at `outputs`
 * (buffers written or accumulated into) and the return value.
 */
function compare(kernel: Kernel, args: Arg[], outputs: number[], tol: Tol = TOL, label = ''): void {
  const copy = () => args.map((a) => (ArrayBuffer.isView(a) ? a.slice() : a));
  const r = copy();
  const n = copy();
  const call = (b: typeof nat, a: Arg[]) => (b[kernel] as (...xs: Arg[]) => unknown)(...a);
  const rr = call(ref, r);
  const nr = call(nat, n);
  const what = `${kernel}${label ? ` ${label}` : ''}`;
  if (typeof rr === 'number') assertClose([nr as number], [rr], tol, `${what} result`);
  for (const i of outputs) assertClose(n[i] as Float32Array, r[i] as Float32Array, tol, `${what} arg ${i}`);
}

const SIZES = [1, 3, 17, 33, 65, 127, 140000]; // the last one takes the threaded paths (≥ 2^17 elements)

describe('native backend matches the reference', () => {
  it('has every kernel of KERNELS and the thread controls', () => {
    for (const k of [...KERNELS, 'setNumThreads', 'getNumThreads'] as const) assert.equal(typeof nat[k], 'function', k);
    assert.equal(nat.name, 'native');
  });

  it('gemm: all transposes, beta 0 and 1, offsets and padded leading dims', () => {
    const shapes = [
      [1, 1, 1],
      [3, 17, 33],
      [17, 3, 65],
      [33, 65, 1],
      [65, 127, 17],
      [128, 96, 200],
      [5, 300, 37], // few rows: the decode-time kernel of x · Wᵀ
      [8, 64, 700],
      [8, 300, 900], // threaded
      [0, 3, 4],
      [3, 4, 0],
    ];
    for (const [M, N, K] of shapes) {
      for (const tA of [false, true]) {
        for (const tB of [false, true]) {
          for (const beta of [0, 1]) {
            const [offA, offB, offC] = [5, 2, 7];
            const lda = (tA ? M : K) + 3;
            const ldb = (tB ? K : N) + 1;
            const ldc = N + 2;
            const A = uniform(offA + (tA ? K : M) * lda);
            const B = uniform(offB + (tB ? N : K) * ldb);
            const C = uniform(offC + M * ldc);
            if (beta === 0) C.fill(Number.NaN); // beta = 0 must ignore what C holds
            const scaleTol = { rtol: 1e-4, atol: 1e-4 * Math.sqrt(Math.max(K, 1)) };
            compare(
              'gemm',
              [tA, tB, M, N, K, 0.7, A, offA, lda, B, offB, ldb, beta, C, offC, ldc],
              [13],
              scaleTol,
              `${M}x${N}x${K} tA=${tA} tB=${tB} beta=${beta}`,
            );
          }
        }
      }
    }
  });

  it('gemmPair: both products as two gemm calls would write them, bit for bit on the native side', () => {
    const before = nat.getNumThreads();
    // Its own random stream, so the tests after it see the inputs they always did.
    const r = prng(7);
    const uniform = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
    try {
      // [M, N, K] of dX = dY · W and dW = dYᵀ · X in a training step; the small one stays sequential.
      for (const [M, N, K] of [
        [2, 3, 4],
        [96, 40, 72],
        [256, 352, 128],
        [0, 5, 7],
      ]) {
        const g = uniform(M * N);
        const W = uniform(N * K);
        const X = uniform(M * K);
        const dX = uniform(M * K);
        const dW = uniform(N * K);
        const args = (cx: Float32Array, cw: Float32Array, beta: number) =>
          [false, false, M, K, N, 1, g, 0, N, W, 0, K, beta, cx, 0, K, true, false, N, K, M, 1, g, 0, N, X, 0, K, beta, cw, 0, K] as const;
        for (const beta of [0, 1]) {
          const scaleTol = { rtol: 1e-4, atol: 1e-4 * Math.sqrt(Math.max(M, N, 1)) };
          compare('gemmPair', [...args(dX, dW, beta)], [13, 29], scaleTol, `${M}x${N}x${K} beta=${beta}`);
          for (const t of [1, 2]) {
            nat.setNumThreads(t);
            const [sx, sw, px, pw] = [dX.slice(), dW.slice(), dX.slice(), dW.slice()];
            const a = args(sx, sw, beta);
            nat.gemm(...(a.slice(0, 16) as unknown as GemmArgs));
            nat.gemm(...(a.slice(16) as unknown as GemmArgs));
            nat.gemmPair(...args(px, pw, beta));
            assert.deepEqual(px, sx, `dX ${M}x${N}x${K} threads ${t}`);
            assert.deepEqual(pw, sw, `dW ${M}x${N}x${K} threads ${t}`);
          }
        }
      }
      // Overlapping outputs (both add into one buffer) run one after the other: the sum of both.
      nat.setNumThreads(2);
      const [M, N, K] = [128, 64, 96];
      const [A1, B1, A2, B2] = [uniform(M * K), uniform(K * N), uniform(M * K), uniform(K * N)];
      const both = new Float32Array(M * N);
      nat.gemmPair(false, false, M, N, K, 1, A1, 0, K, B1, 0, N, 1, both, 0, N, false, false, M, N, K, 1, A2, 0, K, B2, 0, N, 1, both, 0, N);
      const seq = new Float32Array(M * N);
      nat.gemm(false, false, M, N, K, 1, A1, 0, K, B1, 0, N, 1, seq, 0, N);
      nat.gemm(false, false, M, N, K, 1, A2, 0, K, B2, 0, N, 1, seq, 0, N);
      assert.deepEqual(both, seq);
      // The second call's arguments are checked like the first's.
      assert.throws(
        () => nat.gemmPair(false, false, 2, 2, 2, 1, A1, 0, 2, B1, 0, 2, 0, seq, 0, 2, false, false, 2, 2, 2, 1, A1, 0, 1, B1, 0, 2, 0, seq, 0, 2),
        /lda/,
      );
    } finally {
      nat.setNumThreads(before);
    }
  });

  it('gemm at two threads: products cut into two halves of rows (gemm_split_rows) match the reference', () => {
    const before = nat.getNumThreads();
    const r = prng(11);
    const uniform = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
    try {
      nat.setNumThreads(2);
      // Tall outputs of training's shapes, an odd height (300 rows, cut at 144), and one too wide
      // for its height that stays whole; offsets and padded leading dimensions throughout. Each
      // tall one is large enough to be cut on every OpenBLAS core (at a multiple of 24 rows on
      // Haswell and Zen, 16 elsewhere). A product left whole runs on OpenBLAS's own two threads,
      // which on Haswell and Zen cores do not sum as one thread does (64 x 2048 x 32, 256 x 64 x
      // 128): only the cut ones are held to one thread's bits.
      for (const [M, N, K, cut] of [
        [512, 64, 128, true],
        [300, 77, 100, true],
        [128, 352, 256, true],
        [64, 2048, 32, false],
      ] as const) {
        for (const tA of [false, true]) {
          for (const beta of [0, 1]) {
            const [offA, offB, offC] = [3, 1, 5];
            const lda = (tA ? M : K) + 2;
            const ldc = N + 3;
            const A = uniform(offA + (tA ? K : M) * lda);
            const B = uniform(offB + N * K);
            const C = uniform(offC + M * ldc);
            const args = [tA, true, M, N, K, 0.5, A, offA, lda, B, offB, K, beta, C, offC, ldc] as const;
            const tol = { rtol: 1e-4, atol: 1e-4 * Math.sqrt(K) };
            compare('gemm', [...args], [13], tol, `${M}x${N}x${K} tA=${tA} beta=${beta}`);
            // The padding between rows is never written.
            const out = C.slice();
            nat.gemm(tA, true, M, N, K, 0.5, A, offA, lda, B, offB, K, beta, out, offC, ldc);
            for (let i = 0; i < M; i++) {
              for (let j = N; j < ldc && offC + i * ldc + j < out.length; j++)
                assert.equal(out[offC + i * ldc + j], C[offC + i * ldc + j], `padding ${i},${j}`);
            }
            // Two threads write what one writes, bit for bit (no half is small enough for
            // OpenBLAS's small-matrix kernels, which sum in another order).
            if (!cut) continue;
            nat.setNumThreads(1);
            const one = C.slice();
            nat.gemm(tA, true, M, N, K, 0.5, A, offA, lda, B, offB, K, beta, one, offC, ldc);
            nat.setNumThreads(2);
            assert.deepEqual(out, one, `threads 1 vs 2, ${M}x${N}x${K} tA=${tA}`);
          }
        }
      }
    } finally {
      nat.setNumThreads(before);
    }
  });

  it('binary: every op, dense, broadcast, transposed views, rank 0 and empty', () => {
    // [shape, aStrides, bStrides, a length, b length]
    const cases: [number[], number[], number[], number, number][] = [
      [[], [], [], 1, 1],
      [[17], [1], [1], 17, 17],
      [[17], [1], [0], 17, 1],
      [[3, 17, 5], [85, 5, 1], [0, 5, 1], 255, 85],
      [[3, 17, 5], [85, 5, 1], [0, 0, 1], 255, 5],
      [[3, 17, 5], [1, 3, 51], [5, 0, 1], 255, 15], // a is a transposed [5,17,3] buffer
      [[3, 1, 33], [33, 33, 1], [1, 0, 0], 99, 3],
      [[4, 0, 3], [0, 3, 1], [0, 3, 1], 0, 0],
      [[600, 257], [257, 1], [0, 1], 600 * 257, 257],
      [[600, 257], [1, 600], [1, 0], 600 * 257, 600],
    ];
    for (const op of BINARY_OPS) {
      for (const [shape, as, bs, na, nb] of cases) {
        const n = shape.reduce((p, d) => p * d, 1);
        const b = uniform(nb, 0.5, 2).map((v) => (rand() < 0.5 ? -v : v));
        compare('binary', [op, shape, uniform(na), as, b, bs, uniform(n)], [6], TOL, `${op} [${shape}]`);
      }
    }
  });

  it('unary and unaryBackward: every op', () => {
    for (const op of UNARY_OPS) {
      const [lo, hi] = op === 'log' || op === 'sqrt' ? [0.05, 4] : [-8, 8];
      for (const n of SIZES) {
        const x = uniform(n, lo, hi);
        compare('unary', [op, n, x, uniform(n)], [3], TOL, `${op} n=${n}`);
        compare('unaryBackward', [op, n, x, uniform(n), uniform(n)], [4], TOL, `${op} n=${n}`);
      }
    }
  });

  it('axpy, scale, sumSquares', () => {
    for (const n of [0, ...SIZES]) {
      compare('axpy', [n, -0.37, uniform(n), uniform(n)], [3]);
      compare('scale', [n, 1.7, uniform(n)], [2]);
      compare('sumSquares', [n, uniform(n, -3, 3)], [], { rtol: 1e-12, atol: 0 });
    }
  });

  it('reduceSum: inner 1, blocks wider than one task, accumulate on and off', () => {
    for (const [outer, len, inner] of [
      [1, 1, 1],
      [3, 17, 1],
      [1, 33, 65],
      [5, 7, 300],
      [2, 1, 3],
      [4, 300, 40],
      [1, 140000, 1],
      [2, 600, 257],
    ]) {
      for (const acc of [false, true]) {
        compare('reduceSum', [outer, len, inner, uniform(outer * len * inner), uniform(outer * inner), acc], [4], TOL, `${outer}x${len}x${inner}`);
      }
    }
  });

  it('softmax: plain, scaled, causal with fully masked rows, key mask, offsets', () => {
    for (const [rows, cols] of [
      [1, 1],
      [3, 17],
      [17, 33],
      [7, 127],
      [1100, 129],
    ]) {
      const [xOff, outOff, kmOff] = [3, 5, 2];
      const x = uniform(xOff + rows * cols, -6, 6);
      const mask = new Uint8Array(kmOff + cols).map(() => (rand() < 0.7 ? 1 : 0));
      for (const causal of [false, true]) {
        for (const rowPos0 of [-2, 0, cols - rows]) {
          for (const km of [null, mask, new Uint8Array(kmOff + cols)]) {
            const label = `${rows}x${cols} causal=${causal} rowPos0=${rowPos0} mask=${km === null ? 'none' : km === mask ? 'random' : 'zeros'}`;
            compare('softmax', [rows, cols, x, xOff, uniform(outOff + rows * cols), outOff, 0.125, causal, rowPos0, km, kmOff], [4], TOL, label);
          }
        }
      }
      compare('softmaxBackward', [rows, cols, uniform(1 + rows * cols, 0, 1), 1, uniform(2 + rows * cols), 2, uniform(3 + rows * cols), 3, 0.3], [6]);
    }
  });

  it('attention and its backward: GQA, causal, padding and fully masked rows, KV-cache decode, null gradients', () => {
    // [B, T, S, Smax, H, Hkv, D, pastLen]
    const cases: [number, number, number, number, number, number, number, number][] = [
      [1, 1, 1, 1, 1, 1, 1, 0],
      [2, 5, 5, 5, 4, 2, 8, 0], // training: T = S
      [3, 1, 9, 12, 6, 3, 16, 8], // decode: one query against a longer cache
      [3, 1, 37, 40, 9, 3, 64, 36], // decode, heads of 64 (AVX-512: registers), a partial block of 16 keys
      [2, 1, 50, 64, 6, 2, 64, 30], // decode with keys past the causal limit
      [2, 1, 40, 48, 8, 2, 64, 39], // decode, 4 query heads per key head: passes of 3 and 1 over the keys
      [2, 1, 33, 40, 4, 4, 64, 32], // decode without grouping
      [2, 1, 21, 24, 6, 2, 128, 20], // decode, heads of 128: passes of 2 and 1 query heads
      [1, 1, 17, 17, 8, 1, 64, 16], // 8 query heads per key head: two chunks of accumulators
      [2, 1, 20, 24, 4, 1, 128, 19], // heads of 128
      [2, 4, 11, 16, 2, 1, 5, 7], // prefill after a cache of 7
      [2, 64, 64, 64, 4, 4, 32, 0], // 2^21 multiply-adds: the threaded paths
      [2, 3, 0, 4, 2, 2, 4, 0], // no keys
    ];
    for (const [B, T, S, Smax, H, Hkv, D, pastLen] of cases) {
      const q = uniform(B * T * H * D, -2, 2);
      const k = uniform(B * Smax * Hkv * D, -2, 2);
      const v = uniform(B * Smax * Hkv * D);
      const mask = new Uint8Array(B * Smax).map(() => (rand() < 0.8 ? 1 : 0));
      mask.fill(0, 0, Smax); // batch row 0 has no visible key at all
      const scale = 1 / Math.sqrt(D);
      const tol = { rtol: 1e-4, atol: 1e-5 };
      for (const causal of [false, true]) {
        for (const km of [null, mask]) {
          const label = `B${B} T${T} S${S}/${Smax} H${H}/${Hkv} D${D} past=${pastLen} causal=${causal} mask=${km !== null}`;
          const P = new Float32Array(B * H * T * S);
          const out = new Float32Array(B * T * H * D);
          compare('attention', [B, T, S, Smax, H, Hkv, D, q, k, v, P.slice(), out.slice(), km, causal, pastLen, scale], [10, 11], tol, label);
          ref.attention(B, T, S, Smax, H, Hkv, D, q, k, v, P, out, km, causal, pastLen, scale);
          const gOut = uniform(B * T * H * D);
          const grads = () => [uniform(B * T * H * D), uniform(B * Smax * Hkv * D), uniform(B * Smax * Hkv * D)];
          compare('attentionBackward', [B, T, S, Smax, H, Hkv, D, q, k, v, P, gOut, causal, pastLen, scale, ...grads()], [15, 16, 17], tol, label);
          compare(
            'attentionBackward',
            [B, T, S, Smax, H, Hkv, D, q, k, v, P, gOut, causal, pastLen, scale, null, null, grads()[2]],
            [17],
            tol,
            `${label} gv only`,
          );
        }
      }
    }
  });

  it('causal attention by blocks of query rows: a partial last block, a cache before them', () => {
    const r = prng(11); // its own stream: the tests after it keep their inputs
    const u = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
    // [B, T, S, Smax, H, Hkv, D, pastLen]: 3 blocks of 32 rows (the last one of 6), S = past + T
    for (const [B, T, S, Smax, H, Hkv, D, pastLen] of [
      [1, 70, 75, 80, 2, 1, 8, 5],
      [2, 33, 33, 40, 2, 2, 4, 0],
    ]) {
      const [q, k, v] = [u(B * T * H * D), u(B * Smax * Hkv * D), u(B * Smax * Hkv * D)];
      const P = new Float32Array(B * H * T * S);
      const out = new Float32Array(B * T * H * D);
      const tol = { rtol: 1e-4, atol: 1e-5 };
      const label = `T${T} S${S} past=${pastLen}`;
      compare('attention', [B, T, S, Smax, H, Hkv, D, q, k, v, P.slice(), out.slice(), null, true, pastLen, 0.3], [10, 11], tol, label);
      // P as a reused buffer hands it over (NaN): the rows' vector-rounded softmax must not read it
      const [stale, staleOut] = [P.slice().fill(Number.NaN), out.slice().fill(Number.NaN)];
      compare('attention', [B, T, S, Smax, H, Hkv, D, q, k, v, stale.slice(), staleOut.slice(), null, true, pastLen, 0.3], [10, 11], tol, `${label} stale P`);
      nat.attention(B, T, S, Smax, H, Hkv, D, q, k, v, stale, staleOut, null, true, pastLen, 0.3);
      assert.ok(stale.every(Number.isFinite) && staleOut.every(Number.isFinite), `${label}: a stale value leaked into P or the output`);
      ref.attention(B, T, S, Smax, H, Hkv, D, q, k, v, P, out, null, true, pastLen, 0.3);
      const grads = [u(B * T * H * D), u(B * Smax * Hkv * D), u(B * Smax * Hkv * D)];
      compare('attentionBackward', [B, T, S, Smax, H, Hkv, D, q, k, v, P, u(B * T * H * D), true, pastLen, 0.3, ...grads], [15, 16, 17], tol, label);
    }
  });

  it('copy2d: copy and accumulate, offsets, padded and zero source strides', () => {
    // [rows, cols, ldSrc, ldDst]
    for (const [rows, cols, ldSrc, ldDst] of [
      [1, 1, 1, 1],
      [3, 17, 20, 17],
      [5, 7, 0, 9], // one source row repeated
      [1100, 129, 140, 131],
      [0, 5, 5, 5],
    ]) {
      for (const acc of [false, true]) {
        const src = uniform(2 + Math.max(0, rows - 1) * ldSrc + cols);
        compare('copy2d', [rows, cols, src, 2, ldSrc, uniform(3 + rows * ldDst), 3, ldDst, acc], [5], TOL, `${rows}x${cols} acc=${acc}`);
      }
    }
  });

  it('logSoftmaxGather, its backward and entropy, with ignored targets', () => {
    for (const [rows, V] of [
      [1, 1],
      [3, 17],
      [5, 1000],
      [140, 1031],
    ]) {
      const logits = uniform(rows * V, -10, 10);
      const targets = ints(rows, 0, V).map((t) => (rand() < 0.25 ? -1 : t));
      compare('logSoftmaxGather', [rows, V, logits, targets, uniform(rows), uniform(rows)], [4, 5], { rtol: 1e-5, atol: 1e-5 });
      const lse = new Float32Array(rows);
      ref.logSoftmaxGather(rows, V, logits, targets, new Float32Array(rows), lse);
      compare('logSoftmaxGatherBackward', [rows, V, logits, lse, targets, uniform(rows), uniform(rows * V), true], [6]);
      compare('logSoftmaxGatherBackward', [rows, V, logits, lse, targets, uniform(rows), uniform(rows * V), false], [6]);
      // Writing gives the bits of adding onto zeros (the pool's recycled buffers rely on it).
      const gLogp = uniform(rows);
      const added = new Float32Array(rows * V);
      const written = uniform(rows * V);
      nat.logSoftmaxGatherBackward(rows, V, logits, lse, targets, gLogp, added, true);
      nat.logSoftmaxGatherBackward(rows, V, logits, lse, targets, gLogp, written, false);
      assert.deepEqual(written, added);
      compare('entropy', [rows, V, logits, lse, uniform(rows)], [4], { rtol: 1e-5, atol: 1e-5 });
    }
  });

  it('rmsnorm and layernorm, forward and backward', () => {
    // gw/gb sum over rows; the reference rounds to float32 after every row, hence the atol.
    const paramTol = { rtol: 1e-5, atol: 1e-5 };
    for (const [rows, C] of [
      [1, 1],
      [3, 17],
      [7, 65],
      [1100, 127],
    ]) {
      const x = uniform(rows * C, -2, 2);
      const w = uniform(C, 0.5, 1.5);
      const b = uniform(C);
      const gy = uniform(rows * C);
      compare('rmsnorm', [rows, C, x, w, 1e-6, uniform(rows * C), uniform(rows)], [5, 6]);
      const rstd = new Float32Array(rows);
      ref.rmsnorm(rows, C, x, w, 1e-6, new Float32Array(rows * C), rstd);
      compare('rmsnormBackward', [rows, C, x, w, rstd, gy, uniform(rows * C), uniform(C)], [6], TOL);
      compare('rmsnormBackward', [rows, C, x, w, rstd, gy, uniform(rows * C), uniform(C)], [7], paramTol);

      compare('layernorm', [rows, C, x, w, b, 1e-5, uniform(rows * C), uniform(rows), uniform(rows)], [6, 7, 8]);
      const mean = new Float32Array(rows);
      const lstd = new Float32Array(rows);
      ref.layernorm(rows, C, x, w, b, 1e-5, new Float32Array(rows * C), mean, lstd);
      const args: Arg[] = [rows, C, x, w, mean, lstd, gy, uniform(rows * C), uniform(C), uniform(C)];
      compare('layernormBackward', args, [7], { rtol: 1e-5, atol: 1e-5 });
      compare('layernormBackward', args, [8, 9], paramTol);
    }
  });

  it('rope and ropeBackward, including out aliasing x', () => {
    const maxPos = 50;
    for (const [rows, H, D] of [
      [1, 1, 2],
      [3, 2, 8],
      [5, 3, 64],
      [600, 4, 64],
    ]) {
      const half = D / 2;
      const cos = new Float32Array(maxPos * half);
      const sin = new Float32Array(maxPos * half);
      for (let p = 0; p < maxPos; p++) {
        for (let i = 0; i < half; i++) {
          cos[p * half + i] = Math.cos(p * 10000 ** (-i / half));
          sin[p * half + i] = Math.sin(p * 10000 ** (-i / half));
        }
      }
      const n = rows * H * D;
      const positions = ints(rows, 0, maxPos);
      compare('rope', [rows, H, D, uniform(n), positions, cos, sin, uniform(n)], [7]);
      compare('ropeBackward', [rows, H, D, uniform(n), positions, cos, sin, uniform(n), true], [7]);
      // Written, not added: NaN already there must not reach the result.
      compare('ropeBackward', [rows, H, D, uniform(n), positions, cos, sin, new Float32Array(n).fill(Number.NaN), false], [7]);
      const x = uniform(n);
      const inPlaceRef = x.slice();
      const inPlaceNat = x.slice();
      ref.rope(rows, H, D, inPlaceRef, positions, cos, sin, inPlaceRef);
      nat.rope(rows, H, D, inPlaceNat, positions, cos, sin, inPlaceNat);
      assertClose(inPlaceNat, inPlaceRef, TOL, 'rope in place');
    }
  });

  it('swiglu and swigluBackward', () => {
    for (const n of SIZES) {
      const gate = uniform(n, -8, 8);
      const up = uniform(n, -2, 2);
      compare('swiglu', [n, gate, up, uniform(n)], [3]);
      compare('swigluBackward', [n, gate, up, uniform(n), uniform(n), uniform(n), true], [4, 5]);
      const nan = () => new Float32Array(n).fill(Number.NaN);
      compare('swigluBackward', [n, gate, up, uniform(n), nan(), nan(), false], [4, 5]);
    }
  });

  it('embedding and embeddingBackward with repeated ids', () => {
    const V = 50;
    for (const [n, C] of [
      [1, 1],
      [3, 17],
      [33, 65],
      [1400, 100],
    ]) {
      const ids = ints(n, 0, V);
      compare('embedding', [n, C, ids, uniform(V * C), uniform(n * C)], [4]);
      compare('embeddingBackward', [n, C, ids, uniform(n * C), uniform(V * C)], [4], { rtol: 1e-5, atol: 1e-5 });
    }
  });

  it('adamw', () => {
    const [b1, b2, t] = [0.9, 0.999, 3];
    for (const n of SIZES) {
      const args: Arg[] = [n, uniform(n), uniform(n), uniform(n, -0.1, 0.1), uniform(n, 0, 0.01), 1e-3, b1, b2, 1e-8, 0.01, 1 - b1 ** t, 1 - b2 ** t];
      compare('adamw', args, [1, 3, 4], { rtol: 1e-6, atol: 1e-7 });
    }
  });

  it('topk: descending, ties to the lower index, k from 0 to n', () => {
    for (const [rows, n] of [
      [1, 1],
      [3, 17],
      [4, 127],
      [2, 2000],
    ]) {
      for (const k of [0, 1, Math.min(5, n), n]) {
        // Values from a small set, so most rows have ties.
        const x = uniform(rows * n).map((v) => Math.round(v * 4));
        compare('topk', [rows, n, x, k, uniform(rows * k), ints(rows * k, 0, 1)], [4, 5], { rtol: 0, atol: 0 }, `${rows}x${n} k=${k}`);
      }
    }
  });
});

describe('native backend threads', () => {
  it('setNumThreads changes getNumThreads and results do not depend on it', () => {
    const before = nat.getNumThreads();
    assert.ok(before >= 1);
    const x = uniform(200000);
    const y = uniform(200000);
    const outs = [1, 2].map((t) => {
      nat.setNumThreads(t);
      assert.equal(nat.getNumThreads(), t);
      const out = new Float32Array(x.length);
      nat.binary('mul', [x.length], x, [1], y, [1], out);
      return out;
    });
    nat.setNumThreads(before);
    assert.deepEqual(outs[0], outs[1]);
    assert.throws(() => nat.setNumThreads(0), { name: 'RangeError' });
  });

  it('the pool runs thousands of back-to-back jobs exactly once each, across team sizes, spinning or sleeping', () => {
    // y += x over 2^18 elements is one pool job split by thread: a slice run twice or skipped
    // leaves a wrong count in y. Team sizes change between jobs (workers outside the team must
    // skip a job, not run a later one), and workers both catch jobs while spinning (back to back)
    // and sleep between them (after a pause longer than the spin).
    const before = nat.getNumThreads();
    const n = 1 << 18;
    const x = new Float32Array(n).fill(1);
    for (const t of [4, 2, 3, 1, 2, 4]) {
      nat.setNumThreads(t);
      const y = new Float32Array(n);
      for (let k = 0; k < 300; k++) nat.axpy(n, 1, x, y);
      const until = performance.now() + 2; // let the workers fall asleep
      while (performance.now() < until);
      nat.axpy(n, 1, x, y);
      const wrong = y.findIndex((v) => v !== 301);
      assert.equal(wrong, -1, `${t} threads: y[${wrong}] = ${y[wrong]}, expected 301`);
    }
    nat.setNumThreads(before);
  });

  it('loads and runs in worker threads', async () => {
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      const addon = require(workerData);
      const A = new Float32Array([1, 2, 3, 4]), C = new Float32Array(4);
      addon.gemm(false, false, 2, 2, 2, 1, A, 0, 2, A, 0, 2, 0, C, 0, 2);
      parentPort.postMessage(Array.from(C));`;
    const file = new URL('../../native/build/Release/magrpo.node', import.meta.url).pathname;
    const run = () =>
      new Promise<number[]>((resolve, reject) => {
        const w = new Worker(code, { eval: true, workerData: file });
        w.once('message', resolve);
        w.once('error', reject);
      });
    const results = await Promise.all([run(), run()]);
    for (const r of results) assert.deepEqual(r, [7, 10, 15, 22]);
  });
});

describe('native backend argument checks', () => {
  const bad = { name: 'TypeError', code: 'NATIVE_BAD_ARGUMENT' };
  const range = { name: 'RangeError', code: 'NATIVE_BAD_ARGUMENT' };
  const f = (n: number) => new Float32Array(n);

  it('rejects wrong array types, naming the argument', () => {
    assert.throws(() => nat.axpy(4, 1, new Float64Array(4), f(4)), { ...bad, message: /x must be a Float32Array, got Float64Array/ });
    assert.throws(() => nat.unary('exp', 2, [1, 2] as unknown as Float32Array, f(2)), { ...bad, message: /x must be a Float32Array, got Array/ });
    assert.throws(() => nat.embedding(1, 2, new Float32Array(1) as unknown as Int32Array, f(4), f(2)), { ...bad, message: /ids must be a Int32Array/ });
    const keyMask = new Int32Array(3) as unknown as Uint8Array;
    assert.throws(() => nat.softmax(1, 3, f(3), 0, f(3), 0, 1, false, 0, keyMask, 0), { ...bad, message: /keyMask must be a Uint8Array/ });
    assert.throws(() => nat.gemm(false, false, 1, 1, 1, 1, f(1), 0, 1, f(1), 0, 1, 0, new Float64Array(1), 0, 1), { ...bad, message: /C must be/ });
    assert.throws(() => (nat.scale as (...a: unknown[]) => void)(2, 1), { ...bad, message: /expects 3 arguments/ });
  });

  it('rejects buffers too short for the sizes, offsets and strides', () => {
    assert.throws(() => nat.gemm(false, false, 2, 2, 2, 1, f(4), 0, 2, f(4), 0, 2, 0, f(5), 2, 2), { ...bad, message: /C has 5 elements, needs at least 6/ });
    assert.throws(() => nat.gemm(true, false, 2, 3, 2, 1, f(3), 0, 2, f(6), 0, 3, 0, f(6), 0, 3), { ...bad, message: /A has 3 elements, needs at least 4/ });
    assert.throws(() => nat.binary('add', [2, 3], f(6), [3, 1], f(3), [0, 2], f(6)), { ...bad, message: /b has 3 elements, needs at least 5/ });
    assert.throws(() => nat.softmax(2, 3, f(6), 1, f(6), 0, 1, false, 0, null, 0), { ...bad, message: /x has 6/ });
    assert.throws(() => nat.topk(1, 4, f(4), 2, f(2), new Int32Array(1)), { ...bad, message: /idx has 1/ });
    assert.throws(() => nat.attention(1, 2, 2, 2, 1, 1, 2, f(4), f(4), f(4), f(3), f(4), null, true, 0, 1), {
      ...bad,
      message: /P has 3 elements, needs at least 4/,
    });
    assert.throws(() => nat.copy2d(2, 3, f(5), 0, 3, f(6), 0, 3, true), { ...bad, message: /src has 5 elements, needs at least 6/ });
  });

  it('rejects bad sizes and indices', () => {
    assert.throws(() => nat.axpy(-1, 1, f(1), f(1)), range);
    assert.throws(() => nat.axpy(1.5, 1, f(2), f(2)), range);
    assert.throws(() => nat.gemm(false, false, 2, 2, 2, 1, f(4), 0, 1, f(4), 0, 2, 0, f(4), 0, 2), { ...range, message: /lda = 1/ });
    assert.throws(() => nat.binary('pow' as 'add', [1], f(1), [1], f(1), [1], f(1)), { ...range, message: /unknown binary op 'pow'/ });
    assert.throws(() => nat.topk(1, 2, f(2), 3, f(3), new Int32Array(3)), { ...range, message: /k = 3/ });
    assert.throws(() => nat.embedding(1, 2, new Int32Array([2]), f(4), f(2)), { ...range, message: /ids\[0\] = 2/ });
    assert.throws(() => nat.logSoftmaxGather(1, 3, f(3), new Int32Array([3]), f(1), f(1)), { ...range, message: /targets\[0\] = 3/ });
    assert.throws(() => nat.rope(1, 1, 4, f(4), new Int32Array([1]), f(2), f(2), f(4)), { ...range, message: /positions\[0\] = 1/ });
    assert.throws(() => nat.rope(1, 1, 3, f(3), new Int32Array([0]), f(2), f(2), f(3)), { ...range, message: /D = 3 must be even/ });
    const attn = (S: number, Smax: number, H: number, Hkv: number) =>
      nat.attention(1, 1, S, Smax, H, Hkv, 2, f(2 * H), f(2 * Smax * Hkv), f(2 * Smax * Hkv), f(H * S), f(2 * H), null, true, 0, 1);
    assert.throws(() => attn(3, 2, 1, 1), { ...range, message: /S = 3 is larger than Smax = 2/ });
    assert.throws(() => attn(2, 2, 3, 2), { ...range, message: /H = 3 is not a multiple of Hkv = 2/ });
    assert.throws(() => nat.copy2d(2, 3, f(6), 0, 3, f(6), 0, 2, false), { ...range, message: /ldDst = 2 is less than cols = 3/ });
  });

  it('NativeBackendUnavailable carries its code and file', () => {
    const err = new NativeBackendUnavailable('native addon not built', '/x/magrpo.node');
    assert.equal(err.code, 'NATIVE_UNAVAILABLE');
    assert.equal(err.file, '/x/magrpo.node');
    assert.equal(err.message, 'native addon not built');
  });

  it('the one-line hint names what to install, how to rebuild, and the reference backend', () => {
    const inClone = buildHint(process.cwd());
    assert.match(inClone, /npm run build:native/);
    assert.match(inClone, /MAGRPO_BACKEND=reference/);
    assert.match(buildHint('/nonexistent/node_modules/magrpo'), /npm rebuild magrpo/);
  });
});
