/**
 * Models against PyTorch fixtures (scripts/make_fixtures.py): logits, next-token log-probs, the
 * gradient of an advantage-weighted log-prob loss w.r.t. every parameter, and greedy decoding.
 */
import assert from 'node:assert/strict';
import { before, it } from 'node:test';
import { tokenLogprobs } from '../../src/engine/nn.js';
import { scale, weightedSum } from '../../src/engine/ops.js';
import { type BackendName, setBackend, setDType } from '../../src/engine/runtime.js';
import { backward } from '../../src/engine/tensor.js';
import { loadModel } from '../../src/model/load.js';
import { readSafetensors } from '../../src/model/safetensors.js';
import { generate } from '../../src/model/sample.js';
import { describeEachBackend } from '../helpers/backends.js';

const FIX = 'test/fixtures';

type Fixture = Map<string, { shape: number[]; data: Float32Array | Int32Array }>;

function relErr(a: ArrayLike<number>, b: ArrayLike<number>, idx?: number[]): number {
  let num = 0;
  let den = 0;
  const ids = idx ?? Array.from({ length: b.length }, (_, i) => i);
  for (const i of ids) {
    num = Math.max(num, Math.abs(a[i] - b[i]));
    den = Math.max(den, Math.abs(b[i]));
  }
  return num / Math.max(den, 1e-12);
}

function checkModel(name: string, modelDir: string, backendName: BackendName, opts: { grads: boolean; prefix?: string }) {
  let fx: Fixture;
  before(() => {
    setDType('float32');
    setBackend(backendName);
    fx = readSafetensors(`${FIX}/${name}.fixture.safetensors`) as Fixture;
  });
  const get = (k: string) => {
    const t = fx.get(`${opts.prefix ?? ''}${k}`);
    assert.ok(t, `fixture tensor ${k}`);
    return t;
  };

  it(`${modelDir.split('/').pop()}: logits, log-probs${opts.grads ? ' and every parameter gradient' : ''} match PyTorch (rel. error < 1e-4)`, () => {
    const model = loadModel(modelDir);
    const ids = get('input_ids');
    const [B, T] = ids.shape;
    const mask = Uint8Array.from(get('attention_mask').data);
    const positions = Int32Array.from(get('position_ids').data);
    const logits = model.forward(Int32Array.from(ids.data), B, T, { positions, keyMask: mask });
    const V = logits.shape[2];

    const validQuery = get('valid_query').data;
    const rows: number[] = [];
    for (let r = 0; r < B * T; r++) if (validQuery[r]) for (let v = 0; v < V; v++) rows.push(r * V + v);
    assert.ok(relErr(logits.data, get('logits').data, rows) < 1e-4, 'logits');

    // next-token log-probs at valid (t, t+1) pairs, and the fixture's loss
    const valid = get('valid').data; // [B, T-1]
    const targets = new Int32Array(B * T).fill(-1);
    const weights = new Float64Array(B * T);
    const adv = get('adv').data;
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T - 1; t++) {
        if (!valid[b * (T - 1) + t]) continue;
        targets[b * T + t] = ids.data[b * T + t + 1];
        weights[b * T + t] = -adv[b] / B;
      }
    }
    const lp = tokenLogprobs(logits, targets);
    const refLogp = get('logp').data;
    const idx: number[] = [];
    const ours: number[] = [];
    const ref: number[] = [];
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T - 1; t++) {
        if (!valid[b * (T - 1) + t]) continue;
        idx.push(ours.length);
        ours.push(lp.data[b * T + t]);
        ref.push(refLogp[b * (T - 1) + t]);
      }
    }
    assert.ok(idx.length > 10);
    assert.ok(relErr(ours, ref) < 1e-4, 'log-probs');
    const loss = weightedSum(lp, weights);
    assert.ok(Math.abs(loss.item() - get('loss').data[0]) < 1e-4 * Math.max(1, Math.abs(get('loss').data[0])), 'loss');

    if (!opts.grads) return;
    backward(scale(loss, 1));
    let checked = 0;
    for (const [pname, p] of model.params) {
      const ref = fx.get(`grad.${pname}`);
      assert.ok(ref, `fixture has a gradient for ${pname}`);
      assert.ok(p.grad, `${pname} received a gradient`);
      const e = relErr(p.grad, ref.data);
      assert.ok(e < 1e-4, `${pname}: gradient rel. error ${e.toExponential(2)}`);
      checked++;
    }
    assert.equal(checked, model.params.size);
  });
}

for (const [fixture, dirs, grads] of [
  ['tiny-llama', ['tiny-llama', 'tiny-llama-sharded'], true],
  ['tiny-qwen2', ['tiny-qwen2'], true],
  ['tiny-gpt2', ['tiny-gpt2', 'tiny-gpt2-noprefix'], true],
  ['tiny-llama-bf16', ['tiny-llama-bf16'], false],
  ['tiny-llama-fp16', ['tiny-llama-fp16'], false],
] as const) {
  describeEachBackend(`PyTorch parity: ${fixture}`, (backendName) => {
    for (const dir of dirs) checkModel(fixture, `${FIX}/models/${dir}`, backendName, { grads });
  });
}

describeEachBackend('PyTorch parity: greedy decoding with a KV cache', (backendName) => {
  for (const fixture of ['tiny-llama', 'tiny-qwen2', 'tiny-gpt2']) {
    it(`${fixture}: left-padded batch gives PyTorch's greedy tokens exactly`, () => {
      setBackend(backendName);
      const fx = readSafetensors(`${FIX}/${fixture}.fixture.safetensors`) as Fixture;
      const ids = fx.get('greedy.prompt_ids');
      const mask = fx.get('greedy.prompt_mask');
      const expected = fx.get('greedy.new_tokens');
      if (!ids || !mask || !expected) return assert.fail(`${fixture} has no greedy fixture`);
      const [B, T] = ids.shape;
      const N = expected.shape[1];
      const prompts = Array.from({ length: B }, (_, b) => Array.from(ids.data.subarray(b * T, (b + 1) * T)).filter((_, t) => mask.data[b * T + t] === 1));
      const model = loadModel(`${FIX}/models/${fixture}`);
      const out = generate(model, prompts, { maxNewTokens: N, temperature: 0 });
      for (let b = 0; b < B; b++) assert.deepEqual(out.tokens[b], Array.from(expected.data.subarray(b * N, (b + 1) * N)));
    });
  }
});
