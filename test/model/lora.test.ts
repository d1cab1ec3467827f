import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { crossEntropy } from '../../src/engine/nn.js';
import { AdamW } from '../../src/engine/optim.js';
import { Rng } from '../../src/engine/rng.js';
import { backward, noGrad } from '../../src/engine/tensor.js';
import { loadModel } from '../../src/model/load.js';
import { applyLora, loadLora, mergeLora, saveLora } from '../../src/model/lora.js';
import type { CausalLM } from '../../src/model/transformer.js';
import { describeEachBackend } from '../helpers/backends.js';

const ids = Int32Array.from([5, 17, 33, 2, 99, 41, 7, 12, 3, 64, 28, 11]);
const targets = Int32Array.from([17, 33, 2, 99, 41, 7, 12, 3, 64, 28, 11, -1]);
const logitsOf = (m: CausalLM) => noGrad(() => Float32Array.from(m.forward(ids, 1, 12).data));
const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

describeEachBackend('LoRA', () => {
  for (const dir of ['tiny-llama', 'tiny-gpt2']) {
    it(`${dir}: trains only adapters, merges exactly, saves and loads (PEFT layout)`, () => {
      const model = loadModel(`test/fixtures/models/${dir}`);
      const before = logitsOf(model);
      const baseCopy = new Map([...model.params].map(([k, p]) => [k, Float32Array.from(p.data)]));
      const targets_ = dir === 'tiny-llama' ? ['q_proj', 'v_proj', 'down_proj'] : ['c_attn', 'c_fc'];
      applyLora(model, { r: 4, alpha: 8, targetModules: targets_ }, new Rng(1));
      assert.equal(maxDiff(before, logitsOf(model)), 0, 'B = 0 at init: the model is unchanged');
      assert.ok(model.trainableParams().every((p) => /lora_[AB]/.test(p.name ?? '')));

      const opt = new AdamW(model.trainableParams(), { lr: 1e-2, weightDecay: 0 });
      const losses: number[] = [];
      for (let step = 0; step < 15; step++) {
        opt.zeroGrad();
        const loss = crossEntropy(model.forward(ids, 1, 12), targets);
        losses.push(loss.item());
        backward(loss);
        opt.step();
      }
      assert.ok(losses[14] < losses[0] - 0.05, `loss falls: ${losses[0]} → ${losses[14]}`);
      for (const [k, p] of model.params) assert.deepEqual(p.data, baseCopy.get(k), `${k} stayed frozen`);

      const adapted = logitsOf(model);
      const tmp = mkdtempSync(join(tmpdir(), 'lora-'));
      try {
        saveLora(model, tmp);
        const fresh = loadModel(`test/fixtures/models/${dir}`);
        loadLora(fresh, tmp);
        assert.ok(maxDiff(adapted, logitsOf(fresh)) < 1e-6, 'save → load reproduces the adapted model');
        mergeLora(model);
        assert.equal(model.lora.size, 0);
        assert.ok(maxDiff(adapted, logitsOf(model)) < 1e-4, 'merged weights reproduce the adapted model');
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    });
  }

  it('rejects target modules that match nothing, naming the available ones', () => {
    const model = loadModel('test/fixtures/models/tiny-llama');
    assert.throws(() => applyLora(model, { r: 2, alpha: 4, targetModules: ['qkv'] }, new Rng(0)), /lora\.target_modules .*q_proj/);
  });
});

describeEachBackend('LanguageModel save/load', () => {
  it('keeps weights, tokenizer and generation_config stop ids across a save', async () => {
    const { LanguageModel } = await import('../../src/model/pretrained.js');
    const lm = LanguageModel.load('test/fixtures/models/tiny-qwen2');
    const tmp = mkdtempSync(join(tmpdir(), 'lm-'));
    try {
      lm.save(tmp);
      const back = LanguageModel.load(tmp);
      assert.deepEqual(back.stopIds().sort(), lm.stopIds().sort());
      assert.ok(lm.stopIds().length >= 2, 'fixture has two EOS ids');
      assert.equal(maxDiff(logitsOf(lm.model), logitsOf(back.model)), 0);
      assert.equal(back.tokenizer.decode(back.encode('Hello, world')), lm.tokenizer.decode(lm.encode('Hello, world')));
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
