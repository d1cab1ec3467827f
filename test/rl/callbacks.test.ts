/** Trainer callbacks (TRL's TrainerCallback idea) and `report_to` writers: jsonl, TensorBoard, CSV. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import type { TrainerCallback } from '../../src/rl/callbacks.js';
import { type MagrpoConfigInput, resolveConfig } from '../../src/rl/config.js';
import { jsonlToCsv } from '../../src/rl/metrics.js';
import type { Task } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

type Item = { prompt: string };
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const READER = join(import.meta.dirname, '..', 'cli', 'read_tfevents.py');
const task: Task<Item> = {
  dataset: Array.from({ length: 6 }, () => ({ prompt: 'go' })),
  evalDataset: [{ prompt: 'go' }],
  reward: ({ completions }) => (completions[0] === completions[1] ? 1 : 0),
};
const config: MagrpoConfigInput = {
  max_new_tokens: 2,
  num_generations: 2,
  rollout_buffer_size: 2,
  logging_steps: 1,
  eval_interval: 3,
  eval_num_samples: 1,
  save_steps: 2,
  num_train_epochs: 1,
  early_termination_threshold: null,
};
const jsonl = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number>);
const tfevents = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith('events.out.tfevents.'))
    .flatMap((f) =>
      execFileSync(PYTHON, [READER, join(dir, f)], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    );

/** Records every hook call in order. */
class Recorder implements TrainerCallback<Item> {
  readonly calls: { hook: string; arg: Record<string, unknown> }[] = [];
  onTrainBegin(p: object) {
    this.calls.push({ hook: 'onTrainBegin', arg: { ...p } });
  }
  onLog(p: object) {
    this.calls.push({ hook: 'onLog', arg: { ...p } });
  }
  onTree(p: object) {
    this.calls.push({ hook: 'onTree', arg: { ...p } });
  }
  onStepEnd(p: object) {
    this.calls.push({ hook: 'onStepEnd', arg: { ...p } });
  }
  async onEvaluate(p: object) {
    await new Promise((r) => setTimeout(r, 1)); // async callbacks are awaited
    this.calls.push({ hook: 'onEvaluate', arg: { ...p } });
  }
  onSave(p: object) {
    this.calls.push({ hook: 'onSave', arg: { ...p } });
  }
  onTrainEnd(p: object) {
    this.calls.push({ hook: 'onTrainEnd', arg: { ...p } });
  }
  hooks(name: string) {
    return this.calls.filter((c) => c.hook === name).map((c) => c.arg);
  }
}

let model = '';
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'magrpo-cb-'));
  dirs.push(d);
  return d;
};
before(() => {
  setBackend('native');
  model = makeTinyModel({ seed: 3 });
});
after(() => {
  for (const d of [model, ...dirs]) rmSync(d, { recursive: true, force: true });
});

describe('trainer callbacks', () => {
  it('are called in order with what the run wrote: logs, items, evaluations, checkpoints', async () => {
    const out = tmp();
    const rec = new Recorder();
    const t = new MAGRPOTrainer({ task, model, config: { ...config, output_dir: out, report_to: 'all' }, callbacks: [rec] });
    const result = await t.train();
    await t.close();
    const order = rec.calls.map((c) => c.hook);
    assert.equal(order[0], 'onTrainBegin');
    assert.equal(order.at(-1), 'onTrainEnd');
    assert.deepEqual(rec.hooks('onTrainEnd'), [{ ...result, stoppedEarly: false }]);
    assert.deepEqual(
      rec.hooks('onStepEnd').map((p) => p.items),
      [1, 2, 3, 4, 5, 6],
    );
    assert.equal(rec.hooks('onTree').length, 6);
    // eval before items 0 and 3, and at the end
    assert.equal(rec.hooks('onEvaluate').length, 3);
    // every logged entry reaches onLog, in the order metrics.jsonl holds them
    const logged = jsonl(join(out, 'metrics.jsonl'));
    assert.deepEqual(
      rec.hooks('onLog').map((p) => [p.envStep, p.metrics]),
      logged.map(({ step, time, ...m }) => [step, m]),
    );
    // checkpoints every 2 items and at the end; each named folder was written before the call
    const saves = rec.hooks('onSave');
    assert.deepEqual(
      saves.map((p) => p.items),
      [2, 4, 6, 6],
    );
    for (const s of saves) assert.match(String(s.dir), /checkpoints[\\/]step-\d+$/);
    assert.ok(existsSync(join(String(saves.at(-1)?.dir), 'trainer_state.json')));
  });

  it('report_to: all writes metrics.csv (the jsonl as a table) and TensorBoard scalars, text samples and hparams', async () => {
    const out = tmp();
    const t = new MAGRPOTrainer({ task, model, config: { ...config, output_dir: out, report_to: ['jsonl', 'tensorboard', 'csv'] } });
    await t.train();
    await t.close();
    const logged = jsonl(join(out, 'metrics.jsonl'));
    const csv = readFileSync(join(out, 'metrics.csv'), 'utf8');
    assert.equal(csv, jsonlToCsv(logged));
    const header = csv.split('\n')[0].split(',');
    assert.deepEqual(header.slice(0, 2), ['step', 'time']);
    assert.ok(header.includes('eval/turn_1/reward_mean') && header.includes('agent_1/loss'), header.join(','));
    assert.equal(csv.trim().split('\n').length, logged.length + 1);

    const events = tfevents(out);
    assert.equal(events.filter((e) => e.scalars).length, logged.length);
    const texts = events.filter((e) => e.texts);
    assert.equal(texts.length, 3, 'one text entry per evaluation');
    assert.match(texts[0].texts['eval/samples'], /^\*\*eval item 0, sample 0\*\*\n\nturn 1: reward [01]\.000\n\nagent 0:\n\n```/);
    const start = events.find((e) => e.plugins?.['_hparams_/session_start_info']);
    const hp = start.plugins['_hparams_/session_start_info'].content.session_start_info;
    const resolved = resolveConfig({ ...config, output_dir: out, report_to: 'all', num_agents: 2 });
    assert.equal(hp.num_generations, resolved.num_generations);
    assert.equal(hp.rollout_buffer_size, 2);
    assert.equal(hp.report_to, '["jsonl","tensorboard","csv"]');
  });

  it('report_to: none writes no metric files (checkpoints still go to output_dir)', async () => {
    const out = tmp();
    const t = new MAGRPOTrainer({ task, model, config: { ...config, output_dir: out, report_to: 'none' } });
    await t.train({ maxItems: 2 });
    await t.close();
    const files = readdirSync(out);
    assert.deepEqual(
      files.filter((f) => /metrics|tfevents/.test(f)),
      [],
    );
    assert.ok(files.includes('checkpoints'));
  });

  it('a resumed run keeps metrics.csv equal to the rolled-back metrics.jsonl', async () => {
    const out = tmp();
    const first = new MAGRPOTrainer({ task, model, config: { ...config, output_dir: out, report_to: ['jsonl', 'csv'] } });
    await first.train({ maxItems: 3 });
    await first.close();
    const resumed = new MAGRPOTrainer({ task, model, config: { ...config, output_dir: out, report_to: ['jsonl', 'csv'] } });
    await resumed.train({ resumeFrom: out });
    await resumed.close();
    const logged = jsonl(join(out, 'metrics.jsonl'));
    assert.equal(new Set(logged.map((e) => `${e.step} ${Object.keys(e).sort().join()}`)).size, logged.length, 'no entry twice');
    assert.equal(readFileSync(join(out, 'metrics.csv'), 'utf8'), jsonlToCsv(logged));
  });

  it('a callback that throws stops training with an error naming it and the hook', async () => {
    class Exploding implements TrainerCallback<Item> {
      onStepEnd() {
        throw new Error('disk is full');
      }
    }
    const t = new MAGRPOTrainer({ task, model, config, callbacks: [{ onLog: () => {} }, new Exploding()] });
    await assert.rejects(t.train(), /Exploding\.onStepEnd failed: disk is full/);
    await t.close();
    const anon = new MAGRPOTrainer({
      task,
      model,
      config,
      callbacks: [
        {
          onTrainBegin: () => {
            throw new Error('nope');
          },
        },
      ],
    });
    await assert.rejects(anon.train(), /callbacks\[0\]\.onTrainBegin failed: nope/);
    await anon.close();
  });

  it('rejects an unknown report_to target, naming the key', () => {
    assert.throws(() => resolveConfig({ report_to: ['wandb'] as never }), /report_to/);
  });
});
