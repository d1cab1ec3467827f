/**
 * The native gemm against the reference backend, with each BLAS the addon can run: its builtin
 * sgemm (native/sgemm.c) under every ISA variant this CPU runs, and the user's OpenBLAS when one
 * loads here. Every transpose, odd sizes around the register tiles and cache blocks, decode shapes
 * (M = 1..8), alpha and beta (beta = 0 must ignore NaN in C), leading dimensions, offsets, one
 * and two threads. Then how the addon chooses its BLAS (MAGRPO_BLAS) and how that is reported.
 *
 * This process tests the BLAS it loaded; the other BLAS/ISA combinations run this same file in
 * child processes (GEMM_TEST_CHILD set there).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadNativeBackend, nativeAddonFile, nativeBlas, nativeIsa } from '../../src/engine/backends/native.js';
import { referenceBackend as ref } from '../../src/engine/backends/reference.js';
import { gemmDescription, probeAll } from '../../src/engine/blas-core.js';
import type { CoreProbe } from '../../src/engine/blas-probe.js';
import { cpuInfo } from '../../src/engine/cpu.js';
import { prng } from '../helpers/gradcheck.js';

const nat = loadNativeBackend();
const rand = prng(20251125);
const SELF = fileURLToPath(import.meta.url);
const isChild = process.env.GEMM_TEST_CHILD === '1';

function uniform(n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = 2 * rand() - 1;
  return a;
}

/** Largest |C − C_ref| / (1 + |C_ref|) of one product, both backends from the same inputs. */
function gemmError(tA: boolean, tB: boolean, M: number, N: number, K: number, alpha: number, beta: number, pad = 0, nanC = false): number {
  const [offA, offB, offC] = pad ? [3, 5, 1] : [0, 0, 0];
  const lda = (tA ? M : K) + pad;
  const ldb = (tB ? K : N) + pad;
  const ldc = N + pad;
  const A = uniform(offA + (tA ? K : M) * lda);
  const B = uniform(offB + (tB ? N : K) * ldb);
  const C0 = uniform(offC + M * ldc);
  if (nanC) C0.fill(Number.NaN);
  const got = C0.slice();
  const want = C0.slice();
  nat.gemm(tA, tB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, got, offC, ldc);
  ref.gemm(tA, tB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, want, offC, ldc);
  let err = 0;
  for (let i = 0; i < got.length; i++) {
    const e = Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i]));
    if (Number.isNaN(got[i]) !== Number.isNaN(want[i])) return Number.POSITIVE_INFINITY;
    if (!Number.isNaN(e)) err = Math.max(err, e);
  }
  return err;
}

/** float32 accumulation over K terms of size ≤ 1. */
const tol = (K: number) => 2e-6 * Math.sqrt(Math.max(K, 1)) + 1e-6;

const TRANSPOSES = [
  [false, false],
  [false, true],
  [true, false],
  [true, true],
] as const;

const label = () => {
  const b = nativeBlas();
  return `${b.kind}${b.kind === 'builtin' ? ` ${nativeIsa().isa}` : ''}`;
};

describe(`gemm against the reference backend (${label()})`, () => {
  it('every transpose, odd sizes around the register tiles and cache blocks', () => {
    // Around MR (4, 6, 12), NR (8, 16, 32), KC (192, 256) and MC (128, 144).
    const shapes = [
      [1, 1, 1],
      [2, 3, 5],
      [7, 9, 11],
      [13, 33, 17],
      [25, 47, 193],
      [37, 65, 257],
      [145, 31, 129],
      [129, 100, 300],
      [12, 32, 192],
      [6, 16, 256],
    ];
    for (const [M, N, K] of shapes)
      for (const [tA, tB] of TRANSPOSES) {
        const e = gemmError(tA, tB, M, N, K, 1, 0);
        assert.ok(e <= tol(K), `${M}x${N}x${K} tA=${tA} tB=${tB}: error ${e}`);
      }
  });

  it('decode shapes: M = 1..8 rows against 1024 × 1024 (and odd widths), both layouts of the weight', () => {
    for (const M of [1, 2, 3, 4, 5, 8, 9])
      for (const [N, K] of [
        [1024, 1024],
        [37, 515],
      ])
        for (const tB of [false, true]) {
          const e = gemmError(false, tB, M, N, K, 1, 0);
          assert.ok(e <= tol(K), `${M}x${N}x${K} tB=${tB}: error ${e}`);
        }
  });

  it("few rows against a short inner dimension (LoRA's t · Bᵀ while decoding): K ≤ 16, any width, alpha, beta, padding", () => {
    for (const M of [1, 4, 8])
      for (const K of [1, 7, 16, 17])
        for (const N of [5, 16, 37, 576])
          for (const [alpha, beta, pad] of [
            [1, 0, 0],
            [0.5, 1, 3],
            [-2, 0.25, 1],
          ]) {
            const e = gemmError(false, true, M, N, K, alpha, beta, pad);
            assert.ok(e <= tol(K), `${M}x${N}x${K} alpha=${alpha} beta=${beta} pad=${pad}: error ${e}`);
            assert.ok(gemmError(false, true, M, N, K, alpha, 0, pad, true) <= tol(K), `beta = 0 with NaN in C: ${M}x${N}x${K}`);
          }
  });

  it('alpha and beta (beta = 0 ignores NaN in C), padded leading dimensions and offsets', () => {
    for (const [M, N, K] of [
      [3, 5, 7],
      [8, 40, 33],
      [50, 70, 90],
    ])
      for (const [tA, tB] of TRANSPOSES)
        for (const [alpha, beta] of [
          [1, 1],
          [0.5, -2],
          [-1.5, 0.25],
          [0, 0.5],
        ]) {
          const e = gemmError(tA, tB, M, N, K, alpha, beta, 2);
          assert.ok(e <= tol(K), `${M}x${N}x${K} tA=${tA} tB=${tB} alpha=${alpha} beta=${beta}: error ${e}`);
          assert.ok(gemmError(tA, tB, M, N, K, alpha, 0, 2, true) <= tol(K), `beta = 0 with NaN in C: ${M}x${N}x${K} tA=${tA} tB=${tB}`);
        }
  });

  it('pre-packed weights (decoding): packB + gemmPrepacked equal gemm, around the tiles and blocks, both layouts, fp32 and bf16 packs, 1 and 2 threads', () => {
    // The packed path is always the builtin sgemm of the ISA in use, whatever BLAS gemm runs.
    const before = nat.getNumThreads();
    try {
      for (const threads of [1, 2]) {
        nat.setNumThreads(threads);
        for (const [M, N, K] of [
          [9, 37, 5],
          [12, 32, 192],
          [13, 2100, 200], // two column blocks (NC = 2048) and two inner blocks (KC = 192, 256)
          [32, 100, 385],
          [64, 33, 1],
          [1, 7, 3],
        ])
          for (const tB of [false, true])
            for (const bf16 of [false, true])
              for (const [alpha, beta, pad] of [
                [1, 0, 0],
                [0.5, -2, 2],
              ]) {
                const [offA, offB, offC] = pad ? [3, 5, 1] : [0, 0, 0];
                const lda = K + pad;
                const ldb = (tB ? K : N) + pad;
                const ldc = N + pad;
                const A = uniform(offA + M * lda);
                const B = uniform(offB + (tB ? N : K) * ldb);
                const C0 = uniform(offC + M * ldc);
                const packed = new Float32Array(nat.packedFloats(N, K, bf16));
                nat.packB(tB, N, K, B, offB, ldb, packed, bf16);
                const got = C0.slice();
                nat.gemmPrepacked(M, N, K, alpha, A, offA, lda, packed, beta, got, offC, ldc, bf16);
                // The reference backend's own packing: op(B) dense, rounded to bf16 for a bf16 pack.
                const refPacked = new Float32Array(ref.packedFloats(N, K, bf16));
                ref.packB(tB, N, K, B, offB, ldb, refPacked, bf16);
                const want = C0.slice();
                ref.gemmPrepacked(M, N, K, alpha, A, offA, lda, refPacked, beta, want, offC, ldc, bf16);
                let err = 0;
                for (let i = 0; i < got.length; i++) err = Math.max(err, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
                const what = `${M}x${N}x${K} tB=${tB} bf16=${bf16} alpha=${alpha} beta=${beta} pad=${pad} threads=${threads}`;
                assert.ok(err <= tol(K), `${what}: error ${err}`);
                const plain = C0.slice();
                ref.gemm(false, tB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, plain, offC, ldc);
                if (!bf16) {
                  // An fp32 pack is the plain product.
                  assert.deepEqual(want, plain);
                } else if (K >= 32) {
                  // A bf16 pack rounds both operands (8 bits of mantissa): close to the fp32 product, not equal.
                  let diff = 0;
                  for (let i = 0; i < got.length; i++) diff = Math.max(diff, Math.abs(got[i] - plain[i]) / (1 + Math.abs(plain[i])));
                  assert.ok(diff > 0 && diff < 0.05 * Math.sqrt(K), `${what}: bf16 differs from fp32 by ${diff}`);
                }
              }
      }
    } finally {
      nat.setNumThreads(before);
    }
  });

  it('every tile height: M = 1..25 rows, plain and pre-packed, full and edge column panels', () => {
    // The micro-kernels are compiled once per tile height (1..MR rows: 4, 6 or 12) and picked by
    // the rows left in a panel, so each height is its own code: 1..25 covers every height of every
    // variant, and N = 45 gives a full panel and an edge panel of every NR (8, 16, 32).
    const [N, K] = [45, 23];
    for (let M = 1; M <= 25; M++) {
      const e = gemmError(false, true, M, N, K, 1, 0);
      assert.ok(e <= tol(K), `gemm ${M}x${N}x${K}: error ${e}`);
      const A = uniform(M * K);
      const B = uniform(N * K);
      for (const bf16 of [false, true]) {
        const packed = new Float32Array(nat.packedFloats(N, K, bf16));
        nat.packB(true, N, K, B, 0, K, packed, bf16);
        const refPacked = new Float32Array(ref.packedFloats(N, K, bf16));
        ref.packB(true, N, K, B, 0, K, refPacked, bf16);
        const got = new Float32Array(M * N);
        const want = new Float32Array(M * N);
        nat.gemmPrepacked(M, N, K, 1, A, 0, K, packed, 0, got, 0, N, bf16);
        ref.gemmPrepacked(M, N, K, 1, A, 0, K, refPacked, 0, want, 0, N, bf16);
        let err = 0;
        for (let i = 0; i < got.length; i++) err = Math.max(err, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
        assert.ok(err <= tol(K), `gemmPrepacked ${M}x${N}x${K} bf16=${bf16}: error ${err}`);
      }
    }
  });

  it('a bf16 pack rounds A as bf16 precision does: ties to even, NaN and infinities kept (exact, K = 1)', () => {
    // With B = 1 in bf16 and K = 1, each output is A rounded to bf16, so it must equal the
    // reference rounding bit for bit, whichever vector width rounded it.
    const specials = [1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, -(1 + 2 ** -8), 3.14159, 65504.7, 1e-40, Number.NaN, Number.POSITIVE_INFINITY, -0, 3.4e38];
    const M = specials.length;
    for (const rows of [M, 4]) {
      const A = Float32Array.from(specials.slice(0, rows));
      const B = new Float32Array([1, 1, 1]); // K = 1, N = 3
      const packed = new Float32Array(nat.packedFloats(3, 1, true));
      nat.packB(false, 3, 1, B, 0, 3, packed, true);
      const got = new Float32Array(rows * 3);
      nat.gemmPrepacked(rows, 3, 1, 1, A, 0, 1, packed, 0, got, 0, 3, true);
      const refPacked = new Float32Array(ref.packedFloats(3, 1, true));
      ref.packB(false, 3, 1, B, 0, 3, refPacked, true);
      const want = new Float32Array(rows * 3);
      ref.gemmPrepacked(rows, 3, 1, 1, A, 0, 1, refPacked, 0, want, 0, 3, true);
      for (let i = 0; i < rows * 3; i++) assert.ok(Object.is(got[i], want[i]), `A = ${A[Math.floor(i / 3)]}: got ${got[i]}, want ${want[i]}`);
    }
  });

  it('a packed buffer too small for N × K is refused, naming it', () => {
    const small = new Float32Array(nat.packedFloats(10, 10) - 1);
    assert.throws(() => nat.packB(false, 10, 10, new Float32Array(100), 0, 10, small), /packed has \d+ elements, needs at least/);
    assert.throws(() => nat.gemmPrepacked(2, 10, 10, 1, new Float32Array(20), 0, 10, small, 0, new Float32Array(20), 0, 10), /packed/);
    // A bf16 pack is not read as an fp32 one: too small for it, or named as the other precision's.
    const half = new Float32Array(nat.packedFloats(10, 10, true));
    nat.packB(false, 10, 10, new Float32Array(100), 0, 10, half, true);
    assert.throws(
      () => nat.gemmPrepacked(2, 10, 10, 1, new Float32Array(20), 0, 10, half, 0, new Float32Array(20), 0, 10),
      /packed has \d+ elements|packed: not a pack made by packB with bf16 = false/,
    );
  });

  it('two threads give the one-thread result on products large enough to split', () => {
    const before = nat.getNumThreads();
    try {
      nat.setNumThreads(2);
      for (const [M, N, K] of [
        [300, 257, 200], // rows of A split between threads
        [301, 40, 70], // each thread's rows in two blocks, the second thread's ending in a partial panel
        [7, 3000, 300], // few rows: B's panels split
        [20, 2100, 150], // more than one column block (NC = 2048)
      ])
        for (const [tA, tB] of TRANSPOSES) {
          const e = gemmError(tA, tB, M, N, K, 0.75, 0.5);
          assert.ok(e <= tol(K), `${M}x${N}x${K} tA=${tA} tB=${tB} on 2 threads: error ${e}`);
        }
    } finally {
      nat.setNumThreads(before);
    }
  });
});

/** Loads the addon in a fresh process with `env`: blas() and isa(), or the load error. */
function loadWith(env: Record<string, string>): {
  blas?: { kind: string; path: string; corename: string; reason: string };
  isa?: string;
  error?: string;
  code?: string;
} {
  const code = `try { const a = require(${JSON.stringify(nativeAddonFile())}); console.log(JSON.stringify({ blas: a.blas(), isa: a.isa() })); }
    catch (e) { console.log(JSON.stringify({ error: e.message, code: e.code })); }`;
  const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, ...env }, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

if (!isChild) {
  describe('the BLAS choice (MAGRPO_BLAS)', () => {
    const auto = loadWith({ MAGRPO_BLAS: '' });
    const haveOpenblas = auto.blas?.kind === 'openblas';

    it('by default, an OpenBLAS that dlopen finds, else the builtin sgemm saying why', () => {
      assert.ok(auto.blas, auto.error);
      if (haveOpenblas) {
        assert.match(auto.blas.path, /openblas/i);
        assert.ok(auto.blas.corename.length > 0, 'OpenBLAS names its core');
      } else {
        assert.equal(auto.blas.path, '');
        assert.match(auto.blas.reason, /no OpenBLAS found \(libopenblas\.so\.0, libopenblas\.so/);
      }
    });

    it('builtin, openblas, a path; a bad value or a path that does not load fails the load naming MAGRPO_BLAS', () => {
      assert.deepEqual(loadWith({ MAGRPO_BLAS: 'builtin' }).blas, { kind: 'builtin', path: '', corename: '', config: '', reason: 'MAGRPO_BLAS=builtin' });
      const forced = loadWith({ MAGRPO_BLAS: 'openblas' });
      if (haveOpenblas) assert.equal(forced.blas?.path, auto.blas?.path);
      else assert.match(forced.error ?? '', /^MAGRPO_BLAS=openblas: no OpenBLAS loads/);
      if (haveOpenblas) assert.equal(loadWith({ MAGRPO_BLAS: auto.blas?.path ?? '' }).blas?.kind, 'openblas');
      const missing = loadWith({ MAGRPO_BLAS: '/nonexistent/libopenblas.so' });
      assert.equal(missing.code, 'NATIVE_BAD_BLAS');
      assert.match(missing.error ?? '', /^MAGRPO_BLAS=\/nonexistent\/libopenblas\.so does not load: /);
      // A library without cblas_sgemm (libm) is refused too.
      assert.match(loadWith({ MAGRPO_BLAS: '/lib/x86_64-linux-gnu/libm.so.6' }).error ?? 'no libm here', /has no cblas_sgemm|does not load|no libm here/);
      const bogus = loadWith({ MAGRPO_BLAS: 'mkl' });
      assert.equal(bogus.code, 'NATIVE_BAD_BLAS');
      assert.match(bogus.error ?? '', /MAGRPO_BLAS=mkl is not one of auto, builtin, openblas or a path/);
    });

    it('reports the gemm in use in a few words', () => {
      assert.equal(
        gemmDescription({ kind: 'openblas', path: '/usr/lib/libopenblas.so.0', corename: 'Haswell', reason: '' }, 'avx2'),
        'openblas Haswell via /usr/lib/libopenblas.so.0',
      );
      assert.equal(
        gemmDescription({ kind: 'builtin', path: '', corename: '', reason: 'MAGRPO_BLAS=builtin' }, 'avx512'),
        'builtin avx512 (MAGRPO_BLAS=builtin)',
      );
      assert.match(gemmDescription(nativeBlas(), nativeIsa().isa), /^(openblas \S+ via \/|builtin (generic|avx2|avx512) \()/);
    });

    it('with no OpenBLAS the core check probes once and tries no core', () => {
      const probed: (string | null)[] = [];
      const builtinProbe = (_: string, core: string | null): CoreProbe => {
        probed.push(core);
        return {
          requested: core,
          core: null,
          accepted: true,
          maxError: 0,
          correct: true,
          gflops: 50,
          wallGflops: 50,
          builtin: true,
          n: 64,
          lib: null,
          version: null,
        };
      };
      const entry = probeAll('/x/magrpo.node', cpuInfo(), 'k', builtinProbe);
      assert.deepEqual(probed, [null]);
      assert.equal(entry.choice.core, null);
      assert.match(entry.choice.reason, /builtin sgemm/);
    });

    // The other BLAS / ISA combinations: this file again in a child process each.
    const combos: Record<string, string>[] = nativeIsa().supported.map((isa) => ({ MAGRPO_BLAS: 'builtin', MAGRPO_ISA: isa }));
    if (haveOpenblas && nativeBlas().kind !== 'openblas') combos.push({ MAGRPO_BLAS: 'openblas' });
    for (const env of combos) {
      const name = Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ');
      it(`every gemm test above passes with ${name}`, () => {
        const { NODE_TEST_CONTEXT: _, ...base } = process.env;
        const r = spawnSync(process.execPath, [...process.execArgv, '--test', '--test-reporter=tap', SELF], {
          env: { ...base, ...env, GEMM_TEST_CHILD: '1', MAGRPO_BLAS_PROBE: '0' },
          encoding: 'utf8',
        });
        const failed = r.stdout
          .split('\n')
          .filter((l) => /^\s*not ok|error:|# gemm against/.test(l))
          .join('\n');
        assert.equal(r.status, 0, `gemm.test.ts with ${name} failed:\n${failed || r.stderr}`);
        assert.match(
          r.stdout,
          new RegExp(`gemm against the reference backend \\(${env.MAGRPO_BLAS === 'builtin' ? `builtin ${env.MAGRPO_ISA}` : 'openblas'}\\)`),
        );
        assert.match(r.stdout, /^# fail 0$/m);
      });
    }
  });
}
