/**
 * engine/packed.ts: inside withPackedWeights, products of PACKED_MIN_ROWS..PACKED_MAX_ROWS rows with a shared weight use one
 * packing of it (native packB + gemmPrepacked, tested against the reference in gemm.test.ts);
 * other products and gradients keep the plain gemm; under bf16 precision the packs hold bf16 and
 * the products are bf16's; the packs die with the scope.
 * Sampling with packing gives the tokens sampling without it gives.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { matmul } from '../../src/engine/ops.js';
import { PACKED_MAX_ROWS, PACKED_MIN_ROWS, PackScope, packedWeight, setWeightPacking, withPackedWeights } from '../../src/engine/packed.js';
import { Rng } from '../../src/engine/rng.js';
import { backend, setBackend, setPrecision } from '../../src/engine/runtime.js';
import { noGrad, Tensor } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { generate } from '../../src/model/sample.js';
import { prng } from '../helpers/gradcheck.js';

const rand = prng(7);
const randn = (shape: number[], grad = false) => {
  const n = shape.reduce((a, b) => a * b, 1);
  return new Tensor(
    Float32Array.from({ length: n }, () => 2 * rand() - 1),
    shape,
    grad,
  );
};
const maxDiff = (a: Tensor, b: Tensor) => Math.max(...Array.from(a.data, (x, i) => Math.abs(x - b.data[i])));

for (const name of ['native', 'reference'] as const) {
  describe(`withPackedWeights (${name} backend)`, () => {
    setBackend(name);
    after(() => setBackend('native'));

    it('a product inside the scope equals the plain one, for every row count and both weight layouts', () => {
      const W = randn([40, 70], true);
      for (const rows of [1, PACKED_MIN_ROWS - 1, PACKED_MIN_ROWS, 32, PACKED_MAX_ROWS, PACKED_MAX_ROWS + 1])
        for (const transB of [true, false]) {
          const x = randn(transB ? [rows, 70] : [rows, 40]);
          const plain = noGrad(() => matmul(x, W, transB));
          const packed = withPackedWeights(() => noGrad(() => matmul(x, W, transB)));
          assert.ok(maxDiff(plain, packed) < 1e-5, `rows ${rows} transB ${transB}`);
        }
    });

    it('a low-rank delta is merged into the pack; adapters of one weight share its buffer across scopes, not within one', () => {
      const [N, K, r] = [24, 16, 3];
      const W = randn([N, K]);
      const x = randn([8, K]);
      const deltas = [0, 1].map(() => ({ A: randn([r, K]).data, B: randn([N, r]).data, r, scale: 0.7 }));
      const merged = (d: (typeof deltas)[number]) => {
        const m = Float32Array.from(W.data);
        for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) for (let j = 0; j < r; j++) m[n * K + k] += d.scale * d.B[n * r + j] * d.A[j * K + k];
        return noGrad(() => matmul(x, new Tensor(m, [N, K]), true));
      };
      const be = backend();
      const viaPack = (data: Float32Array | Float64Array) => {
        const out = new Tensor(new Float32Array(8 * N), [8, N]);
        be.gemmPrepacked(8, N, K, 1, x.data, 0, K, data, 0, out.data, 0, N, false);
        return out;
      };
      const first = withPackedWeights(() => {
        const p = packedWeight(be, W.data, true, 8, N, K, deltas[0]);
        assert.ok(p !== null);
        assert.ok(maxDiff(viaPack(p.data), merged(deltas[0])) < 1e-5, 'merged with adapter 0');
        return p.data;
      });
      withPackedWeights(() => {
        const p = packedWeight(be, W.data, true, 8, N, K, deltas[1]);
        assert.ok(p !== null);
        assert.equal(p.data, first, "the next call refills the last call's buffer");
        assert.ok(maxDiff(viaPack(p.data), merged(deltas[1])) < 1e-5, 'merged with adapter 1');
        const again = packedWeight(be, W.data, true, 8, N, K, deltas[0]);
        assert.ok(again !== null && again.data !== p.data, 'two adapters in one scope get a pack each');
        assert.ok(maxDiff(viaPack(again.data), merged(deltas[0])) < 1e-5);
        assert.ok(maxDiff(viaPack(p.data), merged(deltas[1])) < 1e-5, 'and the first is not overwritten');
      });
      assert.throws(() => withPackedWeights(() => packedWeight(be, W.data, true, 8, N, K, { ...deltas[0], r: 2 })), /does not fit/);
    });

    it('packs once per scope: a weight changed inside the scope is still read from its pack, and a new scope packs again', () => {
      const W = randn([24, 16], true);
      const x = randn([16, 16]);
      const before = noGrad(() => matmul(x, W, true));
      const [inside, afterChange] = withPackedWeights(() =>
        noGrad(() => {
          const first = matmul(x, W, true);
          W.data.fill(0); // the contract says weights do not change in a scope; this shows the pack was used
          return [first, matmul(x, W, true)];
        }),
      );
      assert.ok(maxDiff(before, inside) < 1e-5);
      assert.ok(maxDiff(before, afterChange) < 1e-5, 'the second product used the pack made before the change');
      const fresh = withPackedWeights(() => noGrad(() => matmul(x, W, true)));
      assert.ok(
        fresh.data.every((v) => v === 0),
        'a new scope packs the zeroed weight',
      );
      // The buffer is kept between scopes (no new allocation per sampling call) but packed again.
      const be = backend();
      const packOf = () => withPackedWeights(() => packedWeight(be, W.data, true, 16, 24, 16));
      const first = packOf();
      W.data.fill(1);
      const second = packOf();
      assert.ok(first !== null && first === second, 'the same buffer in the next scope');
      const ones = withPackedWeights(() => noGrad(() => matmul(x, W, true)));
      const sums = noGrad(() => matmul(x, new Tensor(new Float32Array(24 * 16).fill(1), [24, 16]), true));
      assert.ok(maxDiff(ones, sums) < 1e-5, 'the kept buffer holds the weight as it is now');
    });

    it('rows outside PACKED_MIN_ROWS..PACKED_MAX_ROWS and products that need gradients do not use a pack; bf16 precision uses a bf16 one', () => {
      const W = randn([24, 16], true);
      const probe = (rows: number, grad: boolean) =>
        withPackedWeights(() => {
          const x = randn([rows, 16], grad);
          const run = () => matmul(x, W, true);
          const first = grad ? run() : noGrad(run);
          W.data[0] += 1; // visible only to a product that reads W itself
          const second = grad ? run() : noGrad(run);
          W.data[0] -= 1;
          return maxDiff(first, second) > 0;
        });
      assert.equal(probe(PACKED_MIN_ROWS - 1, false), true, 'fewer rows: few-rows kernel');
      assert.equal(probe(PACKED_MAX_ROWS + 1, false), true, 'more rows: sgemm');
      assert.equal(probe(16, true), true, 'with gradients');
      assert.equal(probe(16, false), false, '16 rows without gradients: packed');
      setPrecision('bf16');
      try {
        assert.equal(probe(16, false), false, 'bf16 precision: packed too');
        // Its pack rounds both operands, as bf16 precision's gemm does (from 16 rows): same products.
        const x = randn([16, 16]);
        const plain = noGrad(() => matmul(x, W, true));
        const packed = withPackedWeights(() => noGrad(() => matmul(x, W, true)));
        assert.ok(maxDiff(plain, packed) < 1e-5, 'the bf16 pack gives the bf16 gemm');
        const pack = withPackedWeights(() => packedWeight(backend(), W.data, true, 16, 24, 16));
        assert.equal(pack?.bf16, true);
      } finally {
        setPrecision('fp32');
      }
      const x = randn([8, 16]);
      const fp32 = noGrad(() => matmul(x, W, true));
      setPrecision('bf16');
      try {
        const bf16 = withPackedWeights(() => noGrad(() => matmul(x, W, true)));
        const d = maxDiff(fp32, bf16);
        assert.ok(d > 0 && d < 0.05, `8 rows: bf16-rounded, close to fp32 (differs by ${d})`);
      } finally {
        setPrecision('fp32');
      }
    });
  });
}

describe('sampling with packed weights', () => {
  it('generate() on 12 prompts gives the same tokens and log-probs as the same products without packing', () => {
    setBackend('native');
    const model = createModel(
      parseModelConfig({
        model_type: 'llama',
        vocab_size: 64,
        hidden_size: 32,
        intermediate_size: 64,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        max_position_embeddings: 64,
      }),
    );
    model.initialize(new Rng(3));
    const prompts = Array.from({ length: 12 }, (_, i) => [1 + i, 2 + i, 3]);
    const packed = generate(model, prompts, { maxNewTokens: 12, temperature: 1, rng: 5 });
    setWeightPacking(false);
    let plain: ReturnType<typeof generate>;
    try {
      plain = generate(model, prompts, { maxNewTokens: 12, temperature: 1, rng: 5 });
    } finally {
      setWeightPacking(true);
    }
    assert.deepEqual(packed.tokens, plain.tokens);
    for (const [i, row] of packed.logprobs.entries()) for (const [j, lp] of row.entries()) assert.ok(Math.abs(lp - plain.logprobs[i][j]) < 1e-4);
  });
});

describe('withPackedWeights bookkeeping', () => {
  it('one array read both ways (a tied embedding is also the LM head) gets a pack per layout', () => {
    setBackend('native');
    const W = randn([16, 16], true);
    const x = randn([12, 16]);
    const plainT = noGrad(() => matmul(x, W, true));
    const plainN = noGrad(() => matmul(x, W, false));
    const [t, n] = withPackedWeights(() => noGrad(() => [matmul(x, W, true), matmul(x, W, false)]));
    assert.ok(maxDiff(plainT, t) < 1e-5);
    assert.ok(maxDiff(plainN, n) < 1e-5);
    assert.ok(maxDiff(plainT, plainN) > 0.01, 'the two layouts differ for this W');
  });
});

describe('PackScope (a scope kept across calls: magrpo serve)', () => {
  it('packs once for every run until invalidated, then packs the weight as it is', () => {
    setBackend('native');
    const W = randn([24, 16], true);
    const x = randn([8, 16]);
    const before = noGrad(() => matmul(x, W, true));
    const scope = new PackScope();
    const first = scope.run(() => noGrad(() => matmul(x, W, true)));
    W.data.fill(0);
    const second = scope.run(() => noGrad(() => matmul(x, W, true)));
    assert.ok(maxDiff(before, first) < 1e-5);
    assert.ok(maxDiff(before, second) < 1e-5, 'the next run reads the pack made in the first');
    scope.invalidate();
    const third = scope.run(() => noGrad(() => matmul(x, W, true)));
    assert.ok(
      third.data.every((v) => v === 0),
      'after invalidate() the zeroed weight is packed again',
    );
    // Outside any scope a product reads the weight itself.
    W.data.fill(1);
    const plain = noGrad(() => matmul(x, W, true));
    assert.ok(maxDiff(plain, third) > 0.1);
  });
});
