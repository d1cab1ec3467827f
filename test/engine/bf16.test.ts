/**
 * Mixed precision (`precision: bf16`): the native bf16 gemm (VDPBF16PS where the CPU has AVX-512
 * BF16, and the emulated path everywhere) against the reference backend rounding the same inputs;
 * the rounding itself; which products it applies to; a model's loss and gradients against fp32;
 * the config key.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { Precision } from '../../src/engine/backend.js';
import { loadNativeBackend, nativeIsa, nativePrecision } from '../../src/engine/backends/native.js';
import { referenceBackend as ref, roundToBf16 } from '../../src/engine/backends/reference.js';
import { crossEntropy } from '../../src/engine/nn.js';
import { Rng } from '../../src/engine/rng.js';
import { getPrecision, setBackend, setPrecision } from '../../src/engine/runtime.js';
import { backward } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { ConfigError, resolveConfig } from '../../src/rl/config.js';
import { prng } from '../helpers/gradcheck.js';

const nat = loadNativeBackend();
const rand = prng(7);
after(() => {
  nat.setPrecision('fp32');
  ref.setPrecision('fp32');
  setPrecision('fp32');
});

function uniform(n: number): Float32Array {
  return Float32Array.from({ length: n }, () => 2 * rand() - 1);
}

/** Largest |C − C_ref| / (1 + |C_ref|), native in `mode` against the reference in bf16. */
function bf16Error(mode: Precision, tA: boolean, tB: boolean, M: number, N: number, K: number, alpha = 0.7, beta = 0.5): number {
  const lda = (tA ? M : K) + 1;
  const ldb = (tB ? K : N) + 3;
  const ldc = N + 2;
  const A = uniform((tA ? K : M) * lda);
  const B = uniform((tB ? N : K) * ldb);
  const C0 = uniform(M * ldc);
  const got = C0.slice();
  const want = C0.slice();
  nat.setPrecision(mode);
  ref.setPrecision('bf16');
  nat.gemm(tA, tB, M, N, K, alpha, A, 0, lda, B, 0, ldb, beta, got, 0, ldc);
  ref.gemm(tA, tB, M, N, K, alpha, A, 0, lda, B, 0, ldb, beta, want, 0, ldc);
  nat.setPrecision('fp32');
  ref.setPrecision('fp32');
  let err = 0;
  for (let i = 0; i < got.length; i++) err = Math.max(err, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
  return err;
}

describe('roundToBf16', () => {
  const bits = (u: number) => new Float32Array(new Uint32Array([u]).buffer)[0];
  it('keeps bf16 values, rounds to nearest and ties to even', () => {
    assert.equal(roundToBf16(1), 1);
    assert.equal(roundToBf16(-2.5), -2.5);
    assert.equal(roundToBf16(bits(0x3f808000)), bits(0x3f800000), 'a tie rounds down to the even mantissa');
    assert.equal(roundToBf16(bits(0x3f818000)), bits(0x3f820000), 'a tie rounds up to the even mantissa');
    assert.equal(roundToBf16(bits(0x3f808001)), bits(0x3f810000), 'above the tie rounds up');
    assert.equal(roundToBf16(bits(0x7f7fffff)), Number.POSITIVE_INFINITY, 'past the largest bf16 is infinite');
    assert.ok(Number.isNaN(roundToBf16(Number.NaN)));
    assert.equal(roundToBf16(Number.NEGATIVE_INFINITY), Number.NEGATIVE_INFINITY);
  });
  it('makes a subnormal a zero of its sign (as VCVTNE2PS2BF16), and keeps the smallest normal', () => {
    assert.ok(Object.is(roundToBf16(bits(0x007fffff)), 0), 'largest subnormal');
    assert.ok(Object.is(roundToBf16(bits(0x80000001)), -0), 'negative subnormal');
    assert.equal(roundToBf16(bits(0x00800000)), bits(0x00800000), 'smallest normal');
  });
});

describe('bf16 gemm (native) against the reference backend', () => {
  const info = nativePrecision();
  const modes: Precision[] = ['bf16', 'bf16-emulated'];
  it(`reports its path (this CPU: AVX-512 BF16 ${info.cpu ? 'yes' : 'no'})`, () => {
    nat.setPrecision('bf16');
    const on = nativePrecision();
    nat.setPrecision('fp32');
    assert.equal(on.bf16, true);
    assert.equal(nativePrecision().bf16, false);
    assert.equal(on.native, info.cpu && nativeIsa().isa === 'avx512', 'VDPBF16PS exactly where the CPU has AVX-512 BF16');
  });
  for (const mode of modes) {
    for (const [tA, tB] of [
      [false, false],
      [false, true],
      [true, false],
      [true, true],
    ] as const) {
      it(`${mode} tA=${tA} tB=${tB}: odd sizes around the tiles and blocks`, () => {
        for (const [M, N, K] of [
          [16, 1, 1],
          [17, 33, 31],
          [37, 75, 397],
          [150, 70, 385],
        ])
          assert.ok(bf16Error(mode, tA, tB, M, N, K) < 1e-5 * Math.sqrt(K), `${M}x${N}x${K}`);
      });
    }
    it(`${mode}: past a column block (N > 2,048) and with K too long for one pass (packed B over 8 MiB)`, () => {
      assert.ok(bf16Error(mode, false, true, 20, 2100, 33) < 1e-4, '20x2100x33');
      assert.ok(bf16Error(mode, true, false, 20, 2080, 2100) < 1e-5 * Math.sqrt(2100), '20x2080x2100');
    });
    it(`${mode}: beta = 0 never reads C (NaN there stays out of the product)`, () => {
      const [M, N, K] = [29, 70, 400];
      const A = uniform(M * K);
      const B = uniform(K * N);
      const C = new Float32Array(M * N).fill(Number.NaN);
      nat.setPrecision(mode);
      nat.gemm(false, false, M, N, K, 1, A, 0, K, B, 0, N, 0, C, 0, N);
      nat.setPrecision('fp32');
      assert.ok(C.every(Number.isFinite), 'every element written from the product alone');
    });
    it(`${mode}: beta = 0 overwrites C, alpha scales, two threads agree with one`, () => {
      assert.ok(bf16Error(mode, false, true, 64, 96, 200, 1, 0) < 2e-4);
      const before = nat.getNumThreads();
      nat.setNumThreads(2);
      try {
        assert.ok(bf16Error(mode, false, true, 300, 200, 500, -1.5, 1) < 3e-4);
        // Each thread's rows in blocks of at most 144, the second thread's ending in a partial panel.
        assert.ok(bf16Error(mode, false, false, 301, 40, 70) < 1e-5 * Math.sqrt(70), '301x40x70');
      } finally {
        nat.setNumThreads(before);
      }
    });
  }

  it('counts subnormal inputs as zero on every path: bf16, emulated, reference, bf16 weight packs', () => {
    // fp32 sums K products of 1e-39 · 1e30 to about 1e-7; rounded as VCVTNE2PS2BF16 rounds, the
    // subnormal operands are zeros and so is C, exactly.
    const [M, N, K] = [16, 40, 64];
    const A = new Float32Array(M * K).fill(1e-39);
    const B = new Float32Array(K * N).fill(1e30);
    const product = (b: typeof nat | typeof ref, mode: Precision) => {
      const C = new Float32Array(M * N).fill(1);
      b.setPrecision(mode);
      b.gemm(false, false, M, N, K, 1, A, 0, K, B, 0, N, 0, C, 0, N);
      b.setPrecision('fp32');
      return C;
    };
    assert.ok(product(nat, 'fp32')[0] > 1e-8, 'fp32 keeps them');
    for (const [b, mode] of [
      [nat, 'bf16'],
      [nat, 'bf16-emulated'],
      [ref, 'bf16'],
    ] as const)
      assert.ok(
        product(b, mode).every((c) => c === 0),
        `${b.name} ${mode}`,
      );
    // A decode pack in bf16 (engine/packed.ts): the weights' subnormals too.
    const packed = new Float32Array(nat.packedFloats(N, K, true));
    nat.packB(false, N, K, new Float32Array(K * N).fill(-1e-39), 0, N, packed, true);
    const C = new Float32Array(4 * N).fill(1);
    nat.gemmPrepacked(4, N, K, 1, new Float32Array(4 * K).fill(1e30), 0, K, packed, 0, C, 0, N, true);
    assert.ok(
      C.every((c) => c === 0),
      'bf16 pack',
    );
  });

  it('differs from fp32 by bf16 rounding, and products under 16 rows stay fp32', () => {
    const [M, N, K] = [32, 40, 256];
    const A = uniform(M * K);
    const B = uniform(K * N);
    const run = (mode: Precision, rows: number) => {
      const C = new Float32Array(rows * N);
      nat.setPrecision(mode);
      nat.gemm(false, false, rows, N, K, 1, A, 0, K, B, 0, N, 0, C, 0, N);
      nat.setPrecision('fp32');
      return C;
    };
    const maxDiff = (x: Float32Array, y: Float32Array) => x.reduce((m, v, i) => Math.max(m, Math.abs(v - y[i])), 0);
    const d = maxDiff(run('bf16', M), run('fp32', M));
    assert.ok(d > 1e-3 && d < 0.2, `bf16 moves a 256-term dot product by rounding only (max ${d})`);
    assert.equal(maxDiff(run('bf16', 15), run('fp32', 15)), 0, '15 rows: fp32');
  });
});

describe('attention under bf16 (native) against the reference backend', () => {
  // [B, T, S, Smax, H, Hkv, D, pastLen, causal, key mask]. Heads of a multiple of 32 floats run on
  // AMX tiles where AMX is the bf16 kernel, others on the bf16 gemm.
  type Case = [number, number, number, number, number, number, number, number, boolean, boolean];
  const cases: Case[] = [
    [1, 40, 40, 40, 6, 2, 64, 0, true, false], // a prompt: blocks of 32 query rows, a last block of 8 (bf16 too: the call's rule)
    [4, 20, 50, 50, 9, 3, 64, 30, true, false], // continuations after a cached prompt
    [2, 16, 16, 16, 2, 1, 32, 0, false, false], // 16 rows, not causal
    [2, 70, 75, 80, 4, 2, 128, 5, true, true], // heads of 128, a cache larger than its keys, padding keys, a last block of 6 rows
    [1, 45, 45, 45, 4, 1, 64, 0, false, true], // not causal, padding keys
    [1, 33, 33, 33, 3, 3, 48, 0, true, false], // heads of 48: the gemm path everywhere
    [3, 1, 30, 32, 4, 2, 64, 29, true, false], // decode: one query row, fp32
  ];
  const maxRel = (x: Float32Array, y: Float32Array) => x.reduce((m, v, i) => Math.max(m, Math.abs(v - y[i]) / (1 + Math.abs(y[i]))), 0);
  function inputs(c: Case) {
    const [B, T, , Smax, H, Hkv, D, , , masked] = c;
    return {
      km: masked ? new Uint8Array(B * Smax).map((_, i) => (i % 7 === 3 ? 0 : 1)) : null,
      q: uniform(B * T * H * D).map((x) => 2 * x),
      k: uniform(B * Smax * Hkv * D).map((x) => 2 * x),
      v: uniform(B * Smax * Hkv * D),
      gOut: uniform(B * T * H * D),
    };
  }
  /** Forward output and the three gradients of native in `mode` and of the reference in `refMode`. */
  function run(c: Case, x: ReturnType<typeof inputs>, mode: Precision, refMode: Precision) {
    const [B, T, S, Smax, H, Hkv, D, pastLen, causal] = c;
    const { q, k, v, gOut, km } = x;
    const scale = 1 / Math.sqrt(D);
    const results = [] as Float32Array[][];
    for (const [be, m] of [
      [nat, mode],
      [ref, refMode],
    ] as const) {
      be.setPrecision(m);
      const P = new Float32Array(B * H * T * S);
      const out = new Float32Array(B * T * H * D);
      be.attention(B, T, S, Smax, H, Hkv, D, q, k, v, P, out, km, causal, pastLen, scale);
      const [gq, gk, gv] = [new Float32Array(q.length), new Float32Array(k.length), new Float32Array(v.length)];
      be.attentionBackward(B, T, S, Smax, H, Hkv, D, q, k, v, P, gOut, causal, pastLen, scale, gq, gk, gv);
      be.setPrecision('fp32');
      results.push([out, gq, gk, gv]);
    }
    return results;
  }
  for (const mode of ['bf16', 'bf16-emulated'] as Precision[]) {
    it(`${mode}: prompt-sized calls take bf16 inputs in every product, decode stays fp32`, () => {
      for (const c of cases) {
        const label = `${mode} B${c[0]} T${c[1]} S${c[2]}/${c[3]} H${c[4]}/${c[5]} D${c[6]} past=${c[7]} causal=${c[8]} mask=${c[9]}`;
        const x = inputs(c);
        const [got, want] = run(c, x, mode, 'bf16');
        const [, fp32] = run(c, x, mode, 'fp32');
        for (const [i, name] of ['out', 'gq', 'gk', 'gv'].entries()) {
          // Same rounded inputs, sums in fp32 against float64 (~1e-7, up to 7e-6 seen), except where
          // an entry of P or dS lies at a bf16 rounding boundary: the kernel computes it in fp32,
          // the reference in float64, so it may round one bf16 step apart, moving an output by up
          // to P·2⁻⁸·|v| (2.4e-4 in out and gv seen on an AMD Zen 4, AVX-512 BF16). fp32 inputs
          // against bf16 ones move every term (2e-3 to 7e-3 seen), so 1e-3 still tells them apart.
          const err = maxRel(got[i], want[i]);
          assert.ok(err < 1e-3, `${label} ${name}: native against the reference's bf16 rounding, max ${err}`);
          if (c[1] === 1) assert.ok(err < 1e-4, `${label} ${name}: decode stays fp32 (max ${err})`);
        }
        const moved = maxRel(got[0], fp32[0]);
        if (c[1] === 1) assert.ok(moved < 1e-4, `${label}: decode equals fp32 (max ${moved})`);
        else assert.ok(moved > 1e-3, `${label}: bf16 rounding moves the output (max ${moved})`);
      }
    });
  }
});

describe('a model under bf16', () => {
  const hf = {
    model_type: 'llama',
    vocab_size: 256,
    hidden_size: 64,
    intermediate_size: 176,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    max_position_embeddings: 64,
    rms_norm_eps: 1e-5,
    tie_word_embeddings: true,
  };
  function lossAndGrads(p: Precision): { loss: number; grads: Float32Array[] } {
    setBackend('native');
    setPrecision(p);
    const model = createModel(parseModelConfig(hf));
    const rng = new Rng(3);
    model.initialize(rng);
    const ids = Int32Array.from({ length: 4 * 32 }, () => Math.floor(rng.next() * 256));
    const targets = Int32Array.from({ length: 4 * 32 }, () => Math.floor(rng.next() * 256));
    const loss = crossEntropy(model.forward(ids, 4, 32), targets);
    backward(loss);
    const grads = model.trainableParams().map((t) => Float32Array.from(t.grad ?? []));
    setPrecision('fp32');
    return { loss: loss.data[0], grads };
  }
  it('gives the fp32 loss within 1% and gradients that point the same way', () => {
    const a = lossAndGrads('fp32');
    const b = lossAndGrads('bf16');
    assert.equal(getPrecision(), 'fp32');
    assert.ok(Math.abs(a.loss - b.loss) / a.loss < 0.01, `loss ${a.loss} vs ${b.loss}`);
    assert.notEqual(a.loss, b.loss, 'bf16 did change the products');
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let i = 0; i < a.grads.length; i++)
      for (let j = 0; j < a.grads[i].length; j++) {
        dot += a.grads[i][j] * b.grads[i][j];
        na += a.grads[i][j] ** 2;
        nb += b.grads[i][j] ** 2;
      }
    const cos = dot / Math.sqrt(na * nb);
    assert.ok(cos > 0.99, `cosine of the gradients ${cos}`);
  });
});

describe('precision in the config', () => {
  it('defaults to fp32, accepts bf16, and names the key when wrong', () => {
    assert.equal(resolveConfig({}).precision, 'fp32');
    assert.equal(resolveConfig({ precision: 'bf16' }).precision, 'bf16');
    assert.throws(
      () => resolveConfig({ precision: 'fp16' } as never),
      (e: unknown) => e instanceof ConfigError && /precision/.test(e.message),
    );
  });
});
