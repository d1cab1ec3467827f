import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { crossEntropy } from '../../src/engine/nn.js';
import { AdamW } from '../../src/engine/optim.js';
import { Rng } from '../../src/engine/rng.js';
import { backend } from '../../src/engine/runtime.js';
import { backward } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { latestCheckpoint, loadCheckpoint, PRETRAIN_CHECKPOINT_VERSION, PretrainCheckpointError, saveCheckpoint } from '../../src/pretrain/checkpoint.js';

backend().setNumThreads(1);

const CONFIG = parseModelConfig({
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  vocab_size: 32,
  hidden_size: 8,
  intermediate_size: 16,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  max_position_embeddings: 8,
  tie_word_embeddings: true,
});

function trained(steps: number) {
  const model = createModel(CONFIG);
  model.initialize(new Rng(4));
  const opt = new AdamW(model.trainableParams(), { lr: 0.01, weightDecay: 0.1, decay: (p) => p.shape.length >= 2 });
  const ids = Int32Array.from({ length: 8 }, (_, i) => i + 1);
  for (let s = 0; s < steps; s++) {
    backward(
      crossEntropy(
        model.forward(ids, 1, 8),
        Int32Array.from(ids, (i) => (i + 1) % 32),
      ),
    );
    opt.step();
    opt.zeroGrad();
  }
  return { model, opt };
}

const state = (step: number) => ({
  version: PRETRAIN_CHECKPOINT_VERSION,
  step,
  tokens: step * 8,
  elapsed_s: 1.5,
  data_rng: new Rng(9).getState(),
  val_loss: 3.25,
});

test('save → load restores weights, AdamW moments and state bit for bit', () => {
  const run = mkdtempSync(join(tmpdir(), 'magrpo-ckpt-'));
  const a = trained(3);
  const dir = saveCheckpoint(run, a.model, a.opt, state(3), 2);
  assert.equal(latestCheckpoint(run), dir);
  const b = trained(0);
  assert.deepEqual(loadCheckpoint(dir, b.model, b.opt), state(3));
  for (const [name, p] of a.model.params) assert.deepEqual(b.model.param(name).data, p.data, name);
  const sa = a.opt.state();
  const sb = b.opt.state();
  assert.equal(sb.step, 3);
  for (const name of Object.keys(sa.buffers)) assert.deepEqual(sb.buffers[name], sa.buffers[name], name);
  // weights-only load (export) leaves the optimizer alone
  const c = trained(0);
  loadCheckpoint(dir, c.model, null);
  for (const [name, p] of a.model.params) assert.deepEqual(c.model.param(name).data, p.data, name);
});

test('latest moves atomically to the newest checkpoint and only `keep` remain', () => {
  const run = mkdtempSync(join(tmpdir(), 'magrpo-ckpt-'));
  assert.equal(latestCheckpoint(run), null);
  const a = trained(1);
  for (const step of [10, 20, 30]) saveCheckpoint(run, a.model, a.opt, state(step), 2);
  assert.deepEqual(readdirSync(join(run, 'checkpoints')).sort(), ['latest', 'step-000020', 'step-000030']);
  assert.equal(readFileSync(join(run, 'checkpoints', 'latest'), 'utf8'), 'step-000030\n');
  assert.ok(existsSync(join(run, 'checkpoints', 'step-000030', 'optimizer.safetensors')));
  assert.ok(existsSync(join(run, 'checkpoints', 'step-000030', 'config.json')));
});

test('a checkpoint of another version or a dangling latest is refused, naming the file', () => {
  const run = mkdtempSync(join(tmpdir(), 'magrpo-ckpt-'));
  const a = trained(1);
  const dir = saveCheckpoint(run, a.model, a.opt, state(1), 2);
  writeFileSync(join(dir, 'state.json'), JSON.stringify({ ...state(1), version: 99 }));
  assert.throws(
    () => loadCheckpoint(dir, a.model, a.opt),
    (e: unknown) => e instanceof PretrainCheckpointError && e.file === join(dir, 'state.json') && /version 99/.test(e.message),
  );
  writeFileSync(join(run, 'checkpoints', 'latest'), 'step-000777\n');
  assert.throws(() => latestCheckpoint(run), PretrainCheckpointError);
});
