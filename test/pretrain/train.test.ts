/**
 * The pretraining pipeline end to end on a tiny Llama, the project tokenizer and a slice of the
 * corpus: loss falls, checkpoints round-trip bit for bit, and a stopped-then-resumed run repeats
 * the uninterrupted run's losses exactly.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readJsonlGz, writeJsonlGz } from '../../src/data/build-corpus.js';
import { AdamW } from '../../src/engine/optim.js';
import { backend } from '../../src/engine/runtime.js';
import { createModel } from '../../src/model/load.js';
import { latestCheckpoint, loadCheckpoint } from '../../src/pretrain/checkpoint.js';
import { type PretrainConfig, PretrainConfigError, parsePretrainConfig } from '../../src/pretrain/config.js';
import { MetricsLog } from '../../src/pretrain/metrics.js';
import { modelConfigFor, openRun, pretrain } from '../../src/pretrain/train.js';

// Tiny matrices: one BLAS thread avoids spin-waiting when the machine is busy.
backend().setNumThreads(1);

const root = mkdtempSync(join(tmpdir(), 'magrpo-pretrain-'));
// A slice of the real corpus: 40 training documents (30 used) and 6 validation documents.
const sliceTrain = join(root, 'train.jsonl.gz');
const sliceValidation = join(root, 'validation.jsonl.gz');
writeJsonlGz(sliceTrain, readJsonlGz('data/corpus/train.jsonl.gz').slice(0, 40));
writeJsonlGz(sliceValidation, readJsonlGz('data/corpus/validation.jsonl.gz').slice(0, 6));

function tinyConfig(runDir: string, over: Partial<PretrainConfig['train']> = {}): PretrainConfig {
  return parsePretrainConfig({
    run_dir: runDir,
    seed: 5,
    data: { train: sliceTrain, validation: sliceValidation, max_train_docs: 30 },
    model: { hidden_size: 16, intermediate_size: 32, num_layers: 1, num_heads: 2, context_length: 32 },
    train: { max_steps: 120, micro_batch_size: 4, grad_accum_steps: 2, learning_rate: 0.02, warmup_steps: 10, ...over },
    eval: { every_steps: 40, num_windows: 4 },
    checkpoint: { every_steps: 100, keep: 2 },
    export: { dir: join(runDir, 'model') },
  });
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

test('pretraining end to end: loss falls, resume repeats the uninterrupted curve exactly', async () => {
  const full = await pretrain(tinyConfig(join(root, 'full')), { progress: 'silent' });
  assert.equal(full.completed, true);
  assert.equal(full.losses.length, 120);
  assert.equal(full.state.tokens, 120 * 4 * 2 * 32);
  assert.ok(mean(full.losses.slice(-20)) < mean(full.losses.slice(0, 10)) - 1, `loss did not fall: ${full.losses[0]} → ${full.losses.at(-1)}`);
  assert.ok(full.state.val_loss !== null && full.state.val_loss < 7.5);

  // Stop after step 50 (a checkpoint is written there), then resume in a new session.
  const dir = join(root, 'resumed');
  const first = await pretrain(tinyConfig(dir), { progress: 'silent', shouldStop: (s) => s === 50 });
  assert.equal(first.completed, false);
  assert.equal(first.state.step, 50);

  // Checkpoint round trip: the weights and moments on disk are the in-memory ones, bit for bit.
  const ckpt = latestCheckpoint(dir);
  assert.ok(ckpt?.endsWith('step-000050'), String(ckpt));
  const reloaded = createModel(modelConfigFor(tinyConfig(dir), first.tokenizer));
  const opt = new AdamW(reloaded.trainableParams(), { lr: 0 });
  const state = loadCheckpoint(ckpt as string, reloaded, opt);
  assert.deepEqual(state, first.state);
  for (const [name, p] of first.model.params) assert.deepEqual(reloaded.param(name).data, p.data, name);
  assert.equal(opt.state().step, 50);

  const second = await pretrain(tinyConfig(dir), { progress: 'silent', resume: true });
  assert.equal(second.completed, true);
  assert.deepEqual([...first.losses, ...second.losses], full.losses);
  assert.equal(second.state.tokens, full.state.tokens);
  assert.equal(second.state.val_loss, full.state.val_loss);
  for (const [name, p] of full.model.params) assert.deepEqual(second.model.param(name).data, p.data, name);

  // The metrics log holds each step once (entries past the resumed checkpoint were dropped).
  const steps = new MetricsLog(dir)
    .read()
    .filter((e) => 'train/loss' in e)
    .map((e) => e.step);
  assert.deepEqual(
    steps,
    Array.from({ length: 120 }, (_, i) => i + 1),
  );
  const vals = new MetricsLog(dir).read().filter((e) => 'val/loss' in e);
  assert.deepEqual(
    vals.map((e) => e.step),
    [40, 80, 120],
  );
  const png = readFileSync(join(dir, 'loss.png'));
  assert.equal(png.subarray(0, 4).toString('hex'), '89504e47');
  assert.ok(existsSync(join(dir, 'loss.svg')));

  // export-only reads the final checkpoint back.
  const opened = openRun(tinyConfig(dir));
  assert.equal(opened.state.step, 120);
  for (const [name, p] of full.model.params) assert.deepEqual(opened.model.param(name).data, p.data, name);
});

test('a run folder is never silently restarted or resumed with a different curve', async () => {
  const dir = join(root, 'guard');
  await pretrain(tinyConfig(dir, { max_steps: 20 }), { progress: 'silent' });
  await assert.rejects(pretrain(tinyConfig(dir, { max_steps: 20 }), { progress: 'silent' }), (e: unknown) => {
    return e instanceof PretrainConfigError && e.issues[0].path === 'run_dir' && /--resume/.test(e.message);
  });
  await assert.rejects(pretrain(tinyConfig(dir, { max_steps: 20, learning_rate: 0.5 }), { progress: 'silent', resume: true }), (e: unknown) => {
    return e instanceof PretrainConfigError && e.issues.map((i) => i.path).join() === 'train';
  });
  await assert.rejects(pretrain(tinyConfig(join(root, 'empty'), { max_steps: 20 }), { progress: 'silent', resume: true }), PretrainConfigError);
});

test('init_from: continued pretraining starts from a model folder (same architecture), and names a mismatch', async () => {
  const { saveModel } = await import('../../src/model/load.js');
  // A finished tiny run exported as a model folder is the starting point of a second run.
  const first = await pretrain(tinyConfig(join(root, 'stage1'), { max_steps: 20 }), { progress: 'silent' });
  const folder = join(root, 'stage1-model');
  saveModel(first.model, folder, 'F32');
  const { writeFileSync, copyFileSync } = await import('node:fs');
  copyFileSync(join('data', 'tokenizer', 'tokenizer.json'), join(folder, 'tokenizer.json'));
  copyFileSync(join('data', 'tokenizer', 'tokenizer_config.json'), join(folder, 'tokenizer_config.json'));
  writeFileSync(join(folder, 'generation_config.json'), '{}\n');

  const cont = { ...tinyConfig(join(root, 'stage2'), { max_steps: 1, learning_rate: 1e-12, warmup_steps: 0 }), init_from: folder };
  const second = await pretrain(cont, { progress: 'silent' });
  // One step at a negligible learning rate: the weights are still the folder's.
  for (const [name, p] of first.model.params) {
    const q = second.model.param(name).data;
    const worst = Math.max(...Array.from(p.data, (x, i) => Math.abs(x - q[i])));
    assert.ok(worst < 1e-6, `${name} moved by ${worst}`);
  }
  // A fresh start from the same seed is far from them.
  const scratch = await pretrain({ ...cont, run_dir: join(root, 'stage2-scratch'), init_from: null }, { progress: 'silent' });
  const emb = 'model.embed_tokens.weight';
  assert.notDeepEqual(scratch.model.param(emb).data, first.model.param(emb).data);

  const wider = tinyConfig(join(root, 'stage2-wider'));
  wider.model.hidden_size = 32;
  await assert.rejects(
    pretrain({ ...wider, init_from: folder }, { progress: 'silent' }),
    (e: unknown) => e instanceof PretrainConfigError && /init_from/.test(e.message) && /architectures differ|config\.json|shape/.test(e.message),
  );
  await assert.rejects(
    pretrain({ ...tinyConfig(join(root, 'stage2-missing')), init_from: join(root, 'nowhere') }, { progress: 'silent' }),
    (e: unknown) => e instanceof PretrainConfigError && /init_from/.test(e.message) && /nowhere/.test(e.message),
  );
});
