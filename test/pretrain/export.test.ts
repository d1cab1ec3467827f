/** Export of a tiny trained run: the HF folder, eval.json and the model card agree with each other. */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readJsonlGz, writeJsonlGz } from '../../src/data/build-corpus.js';
import { backend } from '../../src/engine/runtime.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { parsePretrainConfig } from '../../src/pretrain/config.js';
import { meanTokenNll } from '../../src/pretrain/evaluate.js';
import { exportModel } from '../../src/pretrain/export.js';
import type { EvalJson } from '../../src/pretrain/model-card.js';
import { pretrain } from '../../src/pretrain/train.js';

backend().setNumThreads(1);

test('exportModel writes a loadable HF folder whose card and eval.json report the measured numbers', async () => {
  const root = mkdtempSync(join(tmpdir(), 'magrpo-export-'));
  writeJsonlGz(join(root, 'train.jsonl.gz'), readJsonlGz('data/corpus/train.jsonl.gz').slice(0, 20));
  writeJsonlGz(join(root, 'validation.jsonl.gz'), readJsonlGz('data/corpus/validation.jsonl.gz').slice(0, 4));
  const config = parsePretrainConfig({
    run_dir: join(root, 'run'),
    data: { train: join(root, 'train.jsonl.gz'), validation: join(root, 'validation.jsonl.gz') },
    model: { hidden_size: 16, intermediate_size: 32, num_layers: 1, num_heads: 2, context_length: 128 },
    train: { max_steps: 12, micro_batch_size: 2, learning_rate: 0.01 },
    eval: { every_steps: 6, num_windows: 3 },
    checkpoint: { every_steps: 12 },
    export: { dir: join(root, 'model'), dtype: 'BF16', code_eval_tasks: 3, max_new_tokens: 16 },
  });
  const run = await pretrain(config, { progress: 'silent' });
  const ev = await exportModel({ ...run, config, configFile: 'configs/pretrain/test.yaml' });

  const dir = config.export.dir;
  for (const f of [
    'config.json',
    'generation_config.json',
    'model.safetensors',
    'tokenizer.json',
    'tokenizer_config.json',
    'README.md',
    'eval.json',
    'loss.png',
  ]) {
    assert.ok(existsSync(join(dir, f)), f);
  }
  const onDisk = JSON.parse(readFileSync(join(dir, 'eval.json'), 'utf8')) as EvalJson;
  assert.deepEqual(onDisk, JSON.parse(JSON.stringify(ev)));
  assert.equal(ev.training.steps, 12);
  assert.equal(ev.training.tokens, 12 * 2 * 128);
  assert.equal(ev.model.dtype, 'BF16');
  assert.deepEqual(ev.perplexity.offsets, run.data.validationOffsets);

  // The perplexity is that of the shipped (BF16-rounded) weights on the fixed windows.
  const lm = LanguageModel.load(dir);
  const nll = meanTokenNll(lm.model, run.data.validation, ev.perplexity.offsets, 128, 2);
  assert.equal(nll.meanNll, ev.perplexity.mean_nll);
  assert.equal(ev.perplexity.perplexity, Math.exp(nll.meanNll));
  assert.equal(ev.perplexity.targets, 3 * 128);
  assert.ok(ev.training.final_val_loss_f32 !== null && Math.abs(ev.training.final_val_loss_f32 - nll.meanNll) < 0.01);

  assert.ok(ev.code !== null);
  assert.equal(ev.code.tasks, 3);
  assert.equal(readFileSync(join(dir, 'code_completions.jsonl'), 'utf8').trim().split('\n').length, 3);

  const card = readFileSync(join(dir, 'README.md'), 'utf8');
  assert.ok(card.includes(`**Validation perplexity: ${ev.perplexity.perplexity.toFixed(2)}**`));
  assert.ok(card.includes(`| parameters | ${ev.model.parameters.toLocaleString('en-US')} (`));
  assert.ok(card.includes('Training ran to completion: 12 of 12 steps.'));
  assert.ok(card.includes('pretrain configs/pretrain/test.yaml --resume'));
  assert.ok(card.includes('Call me Ishmael. Some years ago⟨'));
});
