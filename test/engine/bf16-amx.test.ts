/**
 * The bf16 product's kernels (native/amxgemm.c on AMX tiles, native/bf16gemm.c's VDPBF16PS):
 * which one runs (chosen at load: AMX where the CPU has AMX-BF16 and AMX-TILE and Linux grants the
 * tile state, else VDPBF16PS where it has AVX-512 BF16, else emulated; MAGRPO_BF16_KERNEL forces
 * one), and that the one in use equals the reference backend's bf16 product and the other kernel
 * (run in a child process under MAGRPO_BF16_KERNEL) over shapes around the tiles and blocks.
 *
 * Nothing here skips: on a CPU without AMX the tests say in their names that they checked the
 * kernel this CPU runs instead, against the reference and the emulated path.
 *
 * Tolerance: bf16 inputs multiply exactly in fp32, so two kernels differ only in the order of their
 * fp32 sums: |C − C_ref| / (1 + |C_ref|) < 1e-5 · √K for inputs uniform in [-1, 1] (a sum of K
 * rounding errors of 2^-24 relative, random in sign, on terms below 1).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { loadNativeBackend, type NativeBf16Kernel, nativeAddonFile, nativeBf16Kernel, nativeIsa } from '../../src/engine/backends/native.js';
import { referenceBackend as ref } from '../../src/engine/backends/reference.js';
import { autoPrecision, setBackend } from '../../src/engine/runtime.js';

const nat = loadNativeBackend();
after(() => {
  nat.setPrecision('fp32');
  ref.setPrecision('fp32');
});

/** The CPU's feature flags from /proc/cpuinfo (empty off Linux). */
function cpuFlags(): Set<string> {
  if (!existsSync('/proc/cpuinfo')) return new Set();
  const line = readFileSync('/proc/cpuinfo', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('flags'));
  return new Set((line ?? '').split(':')[1]?.trim().split(/\s+/) ?? []);
}

const flags = cpuFlags();
const avx512 = nativeIsa().isa === 'avx512';
const cpuVdp = avx512 && flags.has('avx512_bf16');
const cpuAmx = cpuVdp && flags.has('amx_bf16') && flags.has('amx_tile');
const forced = process.env.MAGRPO_BF16_KERNEL;
const kernel = nativeBf16Kernel();
/** The kernel the other side of the cross-check runs: VDPBF16PS against AMX, else emulated. */
const other: NativeBf16Kernel = kernel === 'amx' ? 'avx512bf16' : 'emulated';

/** Inputs in [-1, 1) from (index, seed), the same in this process and in a child. */
const GEN =
  'function gen(n, seed) { const x = new Float32Array(n); let v = seed >>> 0; for (let i = 0; i < n; i++) { v = (Math.imul(v, 1664525) + 1013904223) >>> 0; x[i] = v / 2147483648 - 1; } return x; }';
const gen = new Function(`${GEN}; return gen;`)() as (n: number, seed: number) => Float32Array;

interface Case {
  tA: boolean;
  tB: boolean;
  M: number;
  N: number;
  K: number;
  alpha: number;
  beta: number;
}

/** A, B, C and leading dimensions of a case: ld strides past the rows (+1, +3, +2). */
function operands(c: Case, seed: number) {
  const lda = (c.tA ? c.M : c.K) + 1;
  const ldb = (c.tB ? c.K : c.N) + 3;
  const ldc = c.N + 2;
  return {
    lda,
    ldb,
    ldc,
    A: gen((c.tA ? c.K : c.M) * lda, seed),
    B: gen((c.tB ? c.N : c.K) * ldb, seed + 1),
    C: gen(c.M * ldc, seed + 2),
  };
}

const SHAPES: [number, number, number][] = [
  [16, 1, 1],
  [16, 16, 32],
  [17, 33, 31],
  [31, 47, 63],
  [32, 32, 32],
  [33, 65, 97],
  [47, 100, 513],
  [64, 96, 200],
  [100, 31, 1030],
  [150, 70, 385],
  [300, 128, 64],
];
const SCALES: [number, number][] = [
  [1, 0],
  [1, 1],
  [0.7, 0.5],
  [-1.5, 1],
  [1, -0.25],
];

function cases(): Case[] {
  const out: Case[] = [];
  let i = 0;
  for (const [M, N, K] of SHAPES)
    for (const tA of [false, true])
      for (const tB of [false, true]) {
        const [alpha, beta] = SCALES[i++ % SCALES.length];
        out.push({ tA, tB, M, N, K, alpha, beta });
      }
  // Past a column block (N > 2,048) and with K too long for one pass (packed B over 8 MiB).
  out.push({ tA: false, tB: true, M: 20, N: 2100, K: 33, alpha: 1, beta: 1 });
  out.push({ tA: true, tB: false, M: 40, N: 2080, K: 2100, alpha: 1, beta: 0 });
  return out;
}

const name = (c: Case) => `${c.M}x${c.N}x${c.K} tA=${c.tA} tB=${c.tB} alpha=${c.alpha} beta=${c.beta}`;

/** C after the product on `b` in `mode`. */
function product(b: typeof nat | typeof ref, mode: 'bf16' | 'bf16-emulated', c: Case, seed: number): Float32Array {
  const o = operands(c, seed);
  const C = o.C.slice();
  b.setPrecision(mode);
  b.gemm(c.tA, c.tB, c.M, c.N, c.K, c.alpha, o.A, 0, o.lda, o.B, 0, o.ldb, c.beta, C, 0, o.ldc);
  b.setPrecision('fp32');
  return C;
}

/** Largest |x − y| / (1 + |y|) against the tolerance 1e-5 · √K. */
function within(x: Float32Array, y: Float32Array, K: number): { ok: boolean; err: number } {
  let err = 0;
  for (let i = 0; i < x.length; i++) err = Math.max(err, Math.abs(x[i] - y[i]) / (1 + Math.abs(y[i])));
  return { ok: err < 1e-5 * Math.sqrt(K), err };
}

/** The addon loaded in a child process with MAGRPO_BF16_KERNEL = `value`: its bf16Kernel(), or why it failed to load. */
function loadWith(value: string): { kernel?: string; error?: string } {
  const code = `try { console.log(JSON.stringify({ kernel: require(${JSON.stringify(nativeAddonFile())}).bf16Kernel() })); }
    catch (e) { console.log(JSON.stringify({ error: e.message })); }`;
  const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, MAGRPO_BF16_KERNEL: value }, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** Every case's C computed in a child process whose bf16 products run on `k` (emulated: precision bf16-emulated). */
function productsInChild(k: NativeBf16Kernel, all: Case[], seed: number): Float32Array[] {
  const mode = k === 'emulated' ? 'bf16-emulated' : 'bf16';
  const code = `${GEN}
    const a = require(${JSON.stringify(nativeAddonFile())});
    const out = [];
    for (const c of ${JSON.stringify(all)}) {
      const lda = (c.tA ? c.M : c.K) + 1, ldb = (c.tB ? c.K : c.N) + 3, ldc = c.N + 2;
      const A = gen((c.tA ? c.K : c.M) * lda, ${seed}), B = gen((c.tB ? c.N : c.K) * ldb, ${seed + 1}), C = gen(c.M * ldc, ${seed + 2});
      a.setPrecision(${JSON.stringify(mode)});
      a.gemm(c.tA, c.tB, c.M, c.N, c.K, c.alpha, A, 0, lda, B, 0, ldb, c.beta, C, 0, ldc);
      out.push(Buffer.from(C.buffer).toString('base64'));
    }
    console.log(JSON.stringify({ kernel: a.bf16Kernel(), out }));`;
  const env = { ...process.env, MAGRPO_BF16_KERNEL: k === 'emulated' ? 'auto' : k };
  const r = spawnSync(process.execPath, ['-e', code], { env, encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr);
  const { kernel: ran, out } = JSON.parse(r.stdout) as { kernel: string; out: string[] };
  assert.equal(ran, k, `the child ran ${k}`);
  return out.map((s) => {
    const b = Buffer.from(s, 'base64');
    return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  });
}

describe('bf16 product kernels', () => {
  const expected: NativeBf16Kernel = cpuAmx ? 'amx' : cpuVdp ? 'avx512bf16' : 'emulated';
  const what = cpuAmx
    ? 'this CPU has AMX-BF16 and AMX-TILE: bf16 products run on AMX tiles'
    : flags.has('amx_bf16') && !avx512
      ? `this CPU has AMX, but MAGRPO_ISA=${nativeIsa().isa} turns AVX-512 off (checked the fallback instead): bf16 products run on ${expected}`
      : `this CPU has no AMX (checked the fallback instead): bf16 products run on ${expected}`;
  it(`${what}${forced ? ` (MAGRPO_BF16_KERNEL=${forced})` : ''}`, () => {
    const want = forced && forced !== 'auto' ? forced : expected;
    // Where AMX was expected but did not load, the forced load says why (e.g. the kernel refused the tile state).
    const why = kernel !== want && want === 'amx' ? `: ${loadWith('amx').error}` : '';
    assert.equal(kernel, want, `expected ${want} from /proc/cpuinfo flags and the ISA variant ${nativeIsa().isa}${why}`);
    nat.setPrecision('bf16-emulated');
    assert.equal(nativeBf16Kernel(), 'emulated', 'precision bf16-emulated runs the emulated path');
    nat.setPrecision('fp32');
    assert.equal(nativeBf16Kernel(), kernel);
  });

  it(`precision auto is ${kernel === 'emulated' ? 'fp32 here (no bf16 hardware)' : 'bf16 here'}: bf16 where bf16 products run natively, else fp32`, () => {
    assert.equal(autoPrecision(), kernel === 'emulated' ? 'fp32' : 'bf16');
    setBackend('reference');
    try {
      assert.equal(autoPrecision(), 'fp32', 'the reference backend has no bf16 hardware');
    } finally {
      setBackend('native');
    }
  });

  it('MAGRPO_BF16_KERNEL selects each kernel this machine runs; an unknown or unavailable one fails the load, naming the variable', () => {
    assert.deepEqual(loadWith('auto'), { kernel: expected });
    assert.deepEqual(loadWith('emulated'), { kernel: 'emulated' });
    for (const k of ['amx', 'avx512bf16'] as const) {
      const runs = k === 'amx' ? cpuAmx : cpuVdp;
      if (runs) assert.deepEqual(loadWith(k), { kernel: k });
      else assert.match(loadWith(k).error ?? '', new RegExp(`MAGRPO_BF16_KERNEL=${k}: this machine cannot run it`));
    }
    assert.match(loadWith('tiles').error ?? '', /MAGRPO_BF16_KERNEL=tiles is not one of amx, avx512bf16, emulated, auto/);
  });

  const all = cases();
  it(`${kernel} equals the reference backend's bf16 product: odd M/N/K, transposes, alpha/beta, ld strides, 16-300 rows, K past 32 and 2,048`, () => {
    for (const c of all) {
      const r = within(product(nat, 'bf16', c, 11), product(ref, 'bf16', c, 11), c.K);
      assert.ok(r.ok, `${name(c)}: error ${r.err}`);
    }
  });

  it(`${kernel} equals ${other} (${kernel === 'amx' ? 'VDPBF16PS, in a child process' : 'AMX is not in use here: the emulated path instead, in a child process'})`, () => {
    const theirs = productsInChild(other, all, 23);
    all.forEach((c, i) => {
      const r = within(product(nat, 'bf16', c, 23), theirs[i], c.K);
      assert.ok(r.ok, `${name(c)}: error ${r.err}`);
    });
  });

  it('products of 1-15 rows stay fp32 under bf16 (as in the reference backend)', () => {
    for (const M of [1, 5, 15]) {
      const c: Case = { tA: false, tB: true, M, N: 40, K: 70, alpha: 1, beta: 0 };
      const o = operands(c, 5);
      const fp32 = o.C.slice();
      nat.gemm(false, true, M, 40, 70, 1, o.A, 0, o.lda, o.B, 0, o.ldb, 0, fp32, 0, o.ldc);
      assert.deepEqual(product(nat, 'bf16', c, 5), fp32, `${M} rows`);
      assert.ok(within(product(nat, 'bf16', c, 5), product(ref, 'bf16', c, 5), 70).ok, `${M} rows against the reference`);
    }
  });

  // The emulated path runs the fp32 sgemm, whose split between threads (OpenBLAS's) may change
  // the order of the sums: there, two threads agree with one within the tolerance.
  it(`two threads write what one writes${kernel === 'emulated' ? ' (within the tolerance: emulated)' : ', bit for bit'}; beta = 0 never reads C`, () => {
    const before = nat.getNumThreads();
    try {
      for (const c of [
        { tA: false, tB: false, M: 301, N: 200, K: 500, alpha: 1, beta: 1 },
        { tA: true, tB: true, M: 40, N: 700, K: 300, alpha: 0.5, beta: 0 },
        // threads owning columns (≥ 4 panels each) against one thread's row blocks, K in 2-3 blocks
        { tA: false, tB: true, M: 130, N: 300, K: 1500, alpha: 0.5, beta: 1 },
        { tA: true, tB: false, M: 70, N: 520, K: 2100, alpha: 1, beta: 0 },
      ]) {
        nat.setNumThreads(1);
        const one = product(nat, 'bf16', c, 3);
        nat.setNumThreads(2);
        const two = product(nat, 'bf16', c, 3);
        if (kernel === 'emulated') assert.ok(within(two, one, c.K).ok, name(c));
        else assert.deepEqual(two, one, name(c));
      }
    } finally {
      nat.setNumThreads(before);
    }
    const [M, N, K] = [64, 64, 64];
    const C = new Float32Array(M * N).fill(Number.NaN);
    nat.setPrecision('bf16');
    nat.gemm(false, false, M, N, K, 1, gen(M * K, 1), 0, K, gen(K * N, 2), 0, N, 0, C, 0, N);
    nat.setPrecision('fp32');
    assert.ok(C.every(Number.isFinite), 'every element written from the product alone');
  });
});

// Decode packs (engine/packed.ts): a weight packed once per sampling call, multiplied by a few
// rows per token. Where AMX is the kernel, bf16 packs are laid out for the tiles; the layout is
// recorded in the pack, so a pack made under one kernel is read right under another.
describe('bf16 decode packs', () => {
  const PACKED: [number, number, number][] = [
    [1, 10, 10],
    [8, 33, 31],
    [8, 576, 576],
    [16, 100, 64],
    [17, 40, 97],
    [33, 65, 33],
    [40, 1536, 70],
  ];
  /** C after packB under `packMode` and gemmPrepacked under `runMode` on the native backend, or the reference. */
  function prepacked(b: typeof nat | typeof ref, packMode: 'bf16' | 'bf16-emulated', runMode: 'bf16' | 'bf16-emulated', c: Case, seed: number) {
    const o = operands(c, seed);
    const C = o.C.slice();
    const packed = new Float32Array(b.packedFloats(c.N, c.K, true));
    b.setPrecision(packMode);
    b.packB(c.tB, c.N, c.K, o.B, 0, o.ldb, packed, true);
    b.setPrecision(runMode);
    b.gemmPrepacked(c.M, c.N, c.K, c.alpha, o.A, 0, o.lda, packed, c.beta, C, 0, o.ldc, true);
    b.setPrecision('fp32');
    return C;
  }
  const packedCases = PACKED.flatMap(([M, N, K], i) =>
    [false, true].map((tB) => ({ tA: false, tB, M, N, K, alpha: SCALES[i % SCALES.length][0], beta: SCALES[i % SCALES.length][1] })),
  );

  it(`packs made under ${kernel} equal the reference's bf16 pack product: 1-40 rows, odd N and K, both layouts of B, alpha/beta`, () => {
    for (const c of packedCases) {
      const r = within(prepacked(nat, 'bf16', 'bf16', c, 31), prepacked(ref, 'bf16', 'bf16', c, 31), c.K);
      assert.ok(r.ok, `${name(c)}: error ${r.err}`);
    }
  });

  it('a pack is read in the layout it was made in, whichever kernel runs the product', () => {
    for (const c of packedCases.slice(0, 6)) {
      const want = prepacked(ref, 'bf16', 'bf16', c, 37);
      for (const [packMode, runMode] of [
        ['bf16-emulated', 'bf16'],
        ['bf16', 'bf16-emulated'],
      ] as const) {
        const r = within(prepacked(nat, packMode, runMode, c, 37), want, c.K);
        assert.ok(r.ok, `${name(c)} packed under ${packMode}, run under ${runMode}: error ${r.err}`);
      }
    }
  });

  it('two threads write what one writes, bit for bit', () => {
    const before = nat.getNumThreads();
    try {
      const c: Case = { tA: false, tB: true, M: 8, N: 1536, K: 576, alpha: 1, beta: 1 };
      nat.setNumThreads(1);
      const one = prepacked(nat, 'bf16', 'bf16', c, 41);
      nat.setNumThreads(2);
      assert.deepEqual(prepacked(nat, 'bf16', 'bf16', c, 41), one);
    } finally {
      nat.setNumThreads(before);
    }
  });

  it('a buffer packB did not fill, or filled at the other precision, is refused, naming it', () => {
    const [N, K] = [40, 64];
    const blank = new Float32Array(nat.packedFloats(N, K, true));
    const run = (packed: Float32Array, bf16: boolean) => nat.gemmPrepacked(2, N, K, 1, gen(2 * K, 1), 0, K, packed, 0, new Float32Array(2 * N), 0, N, bf16);
    assert.throws(() => run(blank, true), /packed: not a pack made by packB with bf16 = true/);
    const fp32 = new Float32Array(Math.max(nat.packedFloats(N, K), nat.packedFloats(N, K, true)));
    nat.packB(true, N, K, gen(N * K, 2), 0, K, fp32);
    assert.throws(() => run(fp32, true), /packed: not a pack made by packB with bf16 = true/);
    run(fp32, false);
  });
});
