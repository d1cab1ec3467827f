/**
 * The value head (src/model/value-head.ts) and the forward's `output: 'hidden'`: the hidden
 * states are those the LM head reads (after the final norm) on Llama and GPT-2, the head is
 * w · h_last + b with gradients into the head and the model, and it saves under TRL's names.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { linear } from '../../src/engine/ops.js';
import { Rng } from '../../src/engine/rng.js';
import { setBackend } from '../../src/engine/runtime.js';
import { backward } from '../../src/engine/tensor.js';
import { loadModel } from '../../src/model/load.js';
import { readSafetensors } from '../../src/model/safetensors.js';
import { VALUE_HEAD_BIAS, VALUE_HEAD_FILE, VALUE_HEAD_WEIGHT, ValueHead } from '../../src/model/value-head.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

setBackend('native');
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

for (const arch of ['llama', 'gpt2'] as const) {
  describe(`output: 'hidden' on ${arch}`, () => {
    const dir = makeTinyModel({ arch, seed: 5, layers: 2 });
    dirs.push(dir);
    const model = loadModel(dir);
    const C = model.config.hiddenSize;
    const ids = Int32Array.from([1, 4, 2, 7, 3]);
    const embed = model.param(arch === 'gpt2' ? 'transformer.wte.weight' : 'model.embed_tokens.weight');

    it('is what the (tied) LM head reads: logits = hidden · Eᵀ, for every row or for outputRows', () => {
      const logits = model.forward(ids, 1, ids.length);
      const hidden = model.forward(ids, 1, ids.length, { output: 'hidden' });
      assert.deepEqual(hidden.shape, [1, ids.length, C]);
      const again = linear(hidden, embed);
      for (let j = 0; j < logits.size; j++) assert.ok(Math.abs(again.data[j] - logits.data[j]) < 1e-5, `logit ${j}`);
      const rows = Int32Array.of(4, 1);
      const picked = model.forward(ids, 1, ids.length, { output: 'hidden', outputRows: rows });
      assert.deepEqual(picked.shape, [2, C]);
      for (const [r, row] of [...rows].entries())
        for (let c = 0; c < C; c++) assert.ok(Math.abs(picked.data[r * C + c] - hidden.data[row * C + c]) < 1e-6, `row ${row}`);
    });

    it('the head is w · h_last + b, differentiable into the head and the model', () => {
      const head = new ValueHead(C, new Rng(1));
      head.bias.data[0] = 0.25;
      const h = model.forward(ids, 1, ids.length, { output: 'hidden' });
      const last = h.data.subarray((ids.length - 1) * C, ids.length * C);
      const v = head.value(model, [...ids]);
      let expected = 0.25;
      for (let c = 0; c < C; c++) expected += head.weight.data[c] * last[c];
      assert.ok(Math.abs(v.data[0] - expected) < 1e-5, `${v.data[0]} vs ${expected}`);
      backward(v);
      assert.equal(head.bias.grad?.[0], 1);
      for (let c = 0; c < C; c++) assert.ok(Math.abs((head.weight.grad as ArrayLike<number>)[c] - last[c]) < 1e-6);
      assert.ok(
        (embed.grad as ArrayLike<number>).length > 0 && Array.from(embed.grad as ArrayLike<number>).some((g) => g !== 0),
        'the gradient reaches the model',
      );
      for (const p of model.params.values()) p.grad = null;
    });
  });
}

describe('value head files', () => {
  it("saves TRL's v_head.summary names beside the weights and loads them back in place", () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-vhead-'));
    dirs.push(dir);
    const head = new ValueHead(8, new Rng(2));
    head.bias.data[0] = -0.5;
    head.save(dir);
    const t = readSafetensors(join(dir, VALUE_HEAD_FILE));
    assert.deepEqual([...t.keys()].sort(), [VALUE_HEAD_BIAS, VALUE_HEAD_WEIGHT].sort());
    assert.deepEqual(t.get(VALUE_HEAD_WEIGHT)?.shape, [1, 8]);
    assert.deepEqual(t.get(VALUE_HEAD_BIAS)?.shape, [1]);
    const other = new ValueHead(8, new Rng(3));
    const before = other.weight;
    other.load(dir);
    assert.equal(other.weight, before, 'same tensors: an optimizer over them stays valid');
    assert.deepEqual(Array.from(other.weight.data), Array.from(head.weight.data));
    assert.equal(other.bias.data[0], -0.5);
    assert.throws(() => new ValueHead(4, new Rng(0)).load(dir), /width 8/);
    assert.throws(() => new ValueHead(8, new Rng(0)).load(tmpdir()), /no value_head\.safetensors/);
  });
});
