import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BufferPool, reusingBuffers, scratch, sizeClass } from '../../src/engine/buffer-pool.js';
import { crossEntropy } from '../../src/engine/nn.js';
import { weightedSum } from '../../src/engine/ops.js';
import { AdamW } from '../../src/engine/optim.js';
import { Rng } from '../../src/engine/rng.js';
import { alloc } from '../../src/engine/runtime.js';
import { backward, noGrad, Tensor } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { completionLogprobs } from '../../src/model/logprobs.js';
import { describeEachBackend } from '../helpers/backends.js';

const HF = {
  model_type: 'llama',
  vocab_size: 61,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  max_position_embeddings: 64,
};

/** GPT-2 runs the other kernels (layernorm, GELU, learned positions, biases). */
const GPT2 = { model_type: 'gpt2', vocab_size: 61, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64 };

function setup(hf: Record<string, unknown> = HF) {
  const model = createModel(parseModelConfig(hf));
  model.initialize(new Rng(3));
  for (const p of model.params.values()) p.requiresGrad = true;
  const opt = new AdamW(model.trainableParams(), { lr: 1e-2 });
  return { model, opt };
}

/** Token ids of a batch of B rows of length T, fixed by `seed`. */
function batch(B: number, T: number, seed: number) {
  const rng = new Rng(seed);
  const ids = Int32Array.from({ length: B * T }, () => Math.floor(rng.next() * HF.vocab_size));
  const targets = Int32Array.from({ length: B * T }, () => Math.floor(rng.next() * HF.vocab_size));
  return { ids, targets, B, T };
}

/** Training steps over batches of the given lengths; returns the losses and the final weights. */
function train(lengths: number[], pool: BufferPool | null, hf: Record<string, unknown> = HF) {
  const { model, opt } = setup(hf);
  const losses: number[] = [];
  lengths.forEach((T, i) => {
    const step = () => {
      const b = batch(3, T, i);
      const loss = crossEntropy(model.forward(b.ids, b.B, b.T), b.targets);
      backward(loss);
      losses.push(loss.item()); // the root of the pass stays readable
      opt.step();
      opt.zeroGrad();
    };
    if (pool) pool.use(step);
    else step();
  });
  const weights = [...model.params.values()].map((p) => Array.from(p.data));
  return { losses, weights };
}

describeEachBackend('buffer pool', () => {
  // Recycled buffers hold old activations: a kernel that skipped part of an output it was given
  // unfilled (allocOverwritten) would read them here and change the bits.
  for (const [arch, hf] of [
    ['Llama', HF],
    ['GPT-2', GPT2],
  ] as const) {
    it(`${arch}: training with recycled activations is bit-identical to fresh allocations, over varying sequence lengths`, () => {
      const lengths = [16, 16, 9, 16, 23, 9];
      const pool = new BufferPool();
      const pooled = train(lengths, pool, hf);
      const plain = train(lengths, null, hf);
      assert.deepEqual(pooled.losses, plain.losses);
      assert.deepEqual(pooled.weights, plain.weights);
      assert.ok(pool.counts.taken > 0 && pool.counts.fresh < pool.counts.taken, `reused ${pool.counts.taken - pool.counts.fresh} of ${pool.counts.taken}`);
    });
  }

  it('padded batches with key masks and selected output rows (the learner) are bit-identical too', () => {
    const run = (pool: BufferPool | null) => {
      const { model, opt } = setup();
      const out: number[][] = [];
      for (let step = 0; step < 4; step++) {
        const rng = new Rng(10 + step);
        const word = () => 1 + Math.floor(rng.next() * (HF.vocab_size - 1));
        const batch = [3, 7, 1, 5].map((n, i) => ({ prompt: [word(), word()], completion: Array.from({ length: n + ((i + step) % 3) }, word) }));
        const go = () => {
          const lp = completionLogprobs(model, batch);
          const values = Array.from(lp.tokenLogprobs.data);
          backward(
            weightedSum(
              lp.tokenLogprobs,
              values.map((_, t) => (t % 2 ? -1 : 0.5)),
            ),
          );
          opt.step();
          opt.zeroGrad();
          out.push(values);
        };
        if (pool) pool.use(go);
        else go();
      }
      return { out, weights: [...model.params.values()].map((p) => Array.from(p.data)) };
    };
    const pooled = run(new BufferPool());
    const plain = run(null);
    assert.deepEqual(pooled.out, plain.out);
    assert.deepEqual(pooled.weights, plain.weights);
  });

  it('a repeated step of the same shapes takes every buffer but the loss from the pool', () => {
    const { model, opt } = setup();
    const pool = new BufferPool();
    const b = batch(2, 12, 0);
    const step = () =>
      pool.use(() => {
        backward(crossEntropy(model.forward(b.ids, b.B, b.T), b.targets));
        opt.step();
        opt.zeroGrad();
      });
    step();
    step(); // the optimizer's moments were allocated in the first step
    const before = { ...pool.counts };
    step();
    assert.ok(pool.counts.taken > before.taken);
    // One fresh buffer per step: the loss, the root of the pass, which stays with the caller.
    assert.equal(pool.counts.fresh - before.fresh, 1, 'the third step allocated new buffers');
    assert.ok(pool.bytes > 0);
    pool.clear();
    assert.equal(pool.bytes, 0);
  });

  it("backward empties the graph's activations, never parameters, gradients or tensors made outside the pool", () => {
    const { model } = setup();
    const b = batch(2, 8, 1);
    const outside = model.forward(b.ids, b.B, b.T); // outside any pool: an ordinary tensor
    const { logits, loss } = reusingBuffers(() => {
      const logits = model.forward(b.ids, b.B, b.T);
      const loss = crossEntropy(logits, b.targets);
      backward(loss);
      return { logits, loss };
    });
    assert.equal(logits.data.length, 0, 'a recycled activation must read as empty, not as another tensor');
    assert.throws(() => logits.item(), /recycled after backward\(\); read it before/);
    assert.throws(() => logits.toArray(), /recycled after backward\(\); read it before/);
    assert.equal(loss.data.length, 1);
    assert.ok(Number.isFinite(loss.item()));
    assert.equal(outside.data.length, outside.size);
    for (const p of model.params.values()) {
      assert.equal(p.data.length, p.size, p.name);
      assert.equal(p.grad?.length, p.size, `${p.name} lost its gradient`);
      assert.ok(p.grad?.every(Number.isFinite));
    }
  });

  it('drops buffers of sizes no pass has asked for lately', () => {
    const { model } = setup();
    const pool = new BufferPool();
    const pass = (T: number) =>
      pool.use(() => {
        const b = batch(2, T, T);
        backward(crossEntropy(model.forward(b.ids, b.B, b.T), b.targets));
      });
    pass(40);
    const afterLong = pool.bytes;
    for (let i = 0; i < 4; i++) pass(5);
    const afterShort = pool.bytes;
    assert.ok(afterShort < afterLong / 4, `${afterShort} bytes kept after short passes, ${afterLong} after the long one`);
    pass(5);
    assert.equal(pool.bytes, afterShort);
  });

  it("a forward without gradients reuses one layer's buffers in the next, with the same logits", () => {
    const model = createModel(parseModelConfig({ ...HF, num_hidden_layers: 6 }));
    model.initialize(new Rng(5));
    const b = batch(2, 24, 9);
    const plain = model.forward(b.ids, b.B, b.T).data.slice(); // gradients on: no scratch
    const pool = new BufferPool();
    const logits = pool.use(() => noGrad(() => model.forward(b.ids, b.B, b.T)));
    assert.deepEqual(logits.data, plain);
    // Six layers' temporaries from about two layers' fresh buffers: the rest came back and went out again.
    assert.ok(pool.counts.fresh * 2 < pool.counts.taken, `${pool.counts.fresh} fresh of ${pool.counts.taken}`);
    const again = pool.use(() => noGrad(() => model.forward(b.ids, b.B, b.T)));
    assert.deepEqual(again.data, plain);
    assert.deepEqual(logits.data, plain, "the first call's logits were not handed out again");
  });
});

describe('scratch scopes', () => {
  it("give back what they took but the result and the consumed inputs; the result's buffer stays the caller's", () => {
    const pool = new BufferPool();
    pool.use(() => {
      const input = new Tensor(alloc(1000).fill(1), [1000]);
      const out = scratch(
        () => {
          const t = new Tensor(alloc(5000).fill(2), [5000]); // a temporary
          return new Tensor(alloc(1000).fill(t.data[0] + input.data[0]), [1000]);
        },
        (r) => [r.data],
        [input.data],
      );
      assert.equal(pool.bytes, (sizeClass(5000) + sizeClass(1000)) * 4, 'the temporary and the input are free again');
      const next = scratch(
        () => new Tensor(alloc(1000), [1000]),
        (r) => [r.data],
      );
      assert.ok(next.data.buffer !== out.data.buffer, 'the result was not handed out again');
      assert.ok(out.data.every((x) => x === 3));
      assert.equal(pool.counts.fresh, 3);
    });
  });

  it("nest: an inner result is the outer scope's, given back when the outer one ends", () => {
    const pool = new BufferPool();
    pool.use(() => {
      const out = scratch(
        () => {
          const inner = scratch(
            () => new Tensor(alloc(700).fill(4), [700]),
            (r) => [r.data],
          );
          return new Tensor(alloc(300).fill(inner.data[0]), [300]);
        },
        (r) => [r.data],
      );
      assert.equal(pool.bytes, sizeClass(700) * 4);
      assert.ok(out.data.every((x) => x === 4));
    });
  });

  it('keep several buffers of a result, or none (values copied out)', () => {
    const pool = new BufferPool();
    pool.use(() => {
      const both = scratch(
        () => ({ a: alloc(100).fill(1), b: alloc(200).fill(2), t: alloc(400) }),
        (r) => [r.a, r.b],
      );
      assert.equal(pool.bytes, sizeClass(400) * 4);
      const sum = scratch(
        () => Array.from(alloc(800).fill(0.5)).reduce((x, y) => x + y, 0),
        () => [],
      );
      assert.equal(sum, 400);
      assert.equal(pool.bytes, (sizeClass(400) + sizeClass(800)) * 4);
      assert.ok(both.a.every((x) => x === 1) && both.b.every((x) => x === 2));
    });
  });

  it('without an active pool take from a pool of their own and reuse it', () => {
    const take = () =>
      scratch(
        () => Array.from(alloc(3000).fill(1)).length,
        () => [],
      );
    assert.equal(take(), 3000);
    assert.equal(take(), 3000);
  });
});

it('size classes hold their size with at most 1/8 to spare', () => {
  for (const n of [1, 63, 64, 65, 100, 1000, 1024, 1025, 4097, 123457, 2 ** 20 + 1]) {
    const c = sizeClass(n);
    assert.ok(c >= n && (n <= 64 || c <= n * 1.125), `${n} -> ${c}`);
  }
  assert.equal(sizeClass(1024), 1024);
  assert.equal(sizeClass(1025), 1152);
});
