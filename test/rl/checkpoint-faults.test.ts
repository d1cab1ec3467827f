/**
 * Checkpoint faults: a full disk mid-checkpoint (a real, tiny tmpfs when this runs as root, and an
 * injected ENOSPC everywhere) keeps the previous checkpoint intact, says so in one clear error and
 * leaves no temp folder; after space is freed the run resumes and ends where an uninterrupted run
 * ends, bit for bit. Also: `latest` naming an incomplete folder, log rollback on resume, a trainer
 * state missing a field.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs, { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import { CheckpointWriteError, logSizes, readTrainerState, resolveCheckpoint, rollbackLogs } from '../../src/rl/checkpoint.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { optionalSkip } from '../helpers/skip.js';
import { makeTinyModel } from '../helpers/tiny-model.js';
import { type Item, ONE_TOKEN, sameWord } from '../helpers/tiny-run.js';

const task = sameWord(6);
const config = (out: string): MagrpoConfigInput => ({
  num_generations: 2,
  ...ONE_TOKEN,
  early_termination_threshold: null,
  rollout_buffer_size: 1,
  num_train_epochs: 1,
  agent_learning_rate: 0.05,
  save_steps: 1,
  save_total_limit: 2,
  output_dir: out,
});
const trainer = (model: string, out: string) => new MAGRPOTrainer({ task, models: [model, model], config: config(out) });
const weights = (t: MAGRPOTrainer<Item>) =>
  (t.agents as LocalAgent[]).flatMap((a) => [...a.agent.lm.model.params.values()].map((p) => Float32Array.from(p.data)));

let model = '';
let tmp = '';
let reference: Float32Array[] = [];
before(async () => {
  setBackend('native');
  tmp = mkdtempSync(join(tmpdir(), 'magrpo-ckpt-faults-'));
  model = makeTinyModel({ seed: 4, dir: join(tmp, 'model') });
  const t = trainer(model, join(tmp, 'reference'));
  await t.train();
  reference = weights(t);
  await t.close();
});
after(() => rmSync(tmp, { recursive: true, force: true }));

const latestName = (out: string) => readFileSync(join(out, 'checkpoints', 'latest'), 'utf8').trim();
const temps = (out: string) => readdirSync(join(out, 'checkpoints')).filter((d) => /\.(tmp|old)-\d+$/.test(d));

/** Trains 2 items (2 checkpoints), runs `fill` then resumes towards 4 items: the 3rd checkpoint must fail cleanly. */
async function diskFullScenario(out: string, fill: () => () => void): Promise<void> {
  const first = trainer(model, out);
  await first.train({ maxItems: 2 });
  await first.close();
  assert.equal(latestName(out), 'step-000002');
  const metricsBefore = readFileSync(join(out, 'metrics.jsonl'), 'utf8');

  const release = fill();
  const second = trainer(model, out);
  let error: unknown;
  try {
    await second.train({ resumeFrom: out, maxItems: 4 });
  } catch (e) {
    error = e;
  } finally {
    await second.close();
    release();
  }
  assert.ok(error instanceof CheckpointWriteError, `expected a CheckpointWriteError, got ${error}`);
  assert.match(error.message, /step-000003: checkpoint not written: the disk is full \(ENOSPC\); the previous checkpoint .*step-000002 is intact/);
  assert.equal(latestName(out), 'step-000002', 'latest still names the previous checkpoint');
  assert.deepEqual(temps(out), [], 'no temp folder left behind');
  assert.ok(existsSync(join(resolveCheckpoint(out), 'trainer_state.json')));
  assert.ok(readFileSync(join(out, 'metrics.jsonl'), 'utf8').startsWith(metricsBefore));

  // Space is back: resume from the intact checkpoint and finish exactly as the uninterrupted run.
  const third = trainer(model, out);
  await third.train({ resumeFrom: out });
  const w = weights(third);
  await third.close();
  assert.equal(w.length, reference.length);
  for (const [i, p] of w.entries()) assert.deepEqual(p, reference[i], `parameter ${i} differs after the disk-full resume`);
  const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).step);
  assert.equal(new Set(steps).size, steps.length, 'every step logged once');
}

describe('checkpoint faults', () => {
  const root = process.getuid?.() === 0;
  it('a real full disk (16 MiB tmpfs) during a checkpoint', {
    skip: optionalSkip('root', !root && 'mounting a tmpfs needs root; the injected ENOSPC test below covers the same path'),
  }, async () => {
    const mnt = join(tmp, 'tmpfs');
    mkdirSync(mnt);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mnt]);
    try {
      const out = join(mnt, 'run');
      await diskFullScenario(out, () => {
        // Leave 8 KiB: metrics rows fit, a checkpoint (two agents' weights and moments) does not.
        const s = statfsSync(mnt);
        writeFileSync(join(mnt, 'filler'), Buffer.alloc(Number(s.bavail) * Number(s.bsize) - 8192));
        return () => rmSync(join(mnt, 'filler'));
      });
    } finally {
      execFileSync('umount', [mnt]);
    }
  });

  it('an injected ENOSPC in the middle of a checkpoint weights file', async () => {
    const out = join(tmp, 'injected');
    await diskFullScenario(out, () => {
      // Test double: fs.writeSync fails once a checkpoint temp file has had its first bytes.
      const open = fs.openSync;
      const write = fs.writeSync;
      const temp = new Set<number>();
      fs.openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
        const fd = (open as (...a: unknown[]) => number)(path, ...rest);
        if (/checkpoints\/step-\d+\.tmp-\d+\/agent_1\/optimizer\.safetensors\.tmp-/.test(String(path))) temp.add(fd);
        return fd;
      }) as typeof fs.openSync;
      fs.writeSync = ((fd: number, ...rest: unknown[]) => {
        if (temp.has(fd)) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
        return (write as (...a: unknown[]) => number)(fd, ...rest);
      }) as typeof fs.writeSync;
      syncBuiltinESMExports();
      return () => {
        fs.openSync = open;
        fs.writeSync = write;
        syncBuiltinESMExports();
      };
    });
  });

  it('latest naming a missing or incomplete folder resolves to the newest complete checkpoint', () => {
    const dir = join(tmp, 'resolve', 'checkpoints');
    for (const s of ['step-000001', 'step-000002', 'step-000003']) mkdirSync(join(dir, s), { recursive: true });
    writeFileSync(join(dir, 'step-000001', 'trainer_state.json'), '{}');
    writeFileSync(join(dir, 'step-000002', 'trainer_state.json'), '{}');
    writeFileSync(join(dir, 'latest'), 'step-000003\n'); // no trainer_state.json: incomplete
    assert.equal(resolveCheckpoint(join(tmp, 'resolve')), join(dir, 'step-000002'));
    writeFileSync(join(dir, 'latest'), 'step-000009\n'); // gone
    assert.equal(resolveCheckpoint(join(tmp, 'resolve')), join(dir, 'step-000002'));
    rmSync(join(dir, 'step-000001'), { recursive: true });
    rmSync(join(dir, 'step-000002'), { recursive: true });
    assert.throws(() => resolveCheckpoint(join(tmp, 'resolve')), /latest: names "step-000009", which is not a complete checkpoint/);
  });

  it('rollbackLogs cuts logs to their checkpoint size, torn lines included; removeNewer drops later files', () => {
    const run = join(tmp, 'logs');
    mkdirSync(run);
    writeFileSync(join(run, 'metrics.jsonl'), '{"step":1}\n{"step":2}\n');
    writeFileSync(join(run, 'events.out.tfevents.1.host'), 'AAAA');
    writeFileSync(join(run, 'report.md'), 'not a log');
    const sizes = logSizes(run);
    assert.deepEqual(sizes, { 'events.out.tfevents.1.host': 4, 'metrics.jsonl': 22 });
    appendFileSync(join(run, 'metrics.jsonl'), '{"step":3}\n{"st');
    appendFileSync(join(run, 'events.out.tfevents.1.host'), 'BB');
    writeFileSync(join(run, 'events.out.tfevents.2.host'), 'CCCC');
    writeFileSync(join(run, 'samples.jsonl'), '{"item":5}\n');
    assert.deepEqual(rollbackLogs(run, sizes).sort(), ['events.out.tfevents.1.host', 'metrics.jsonl']);
    assert.equal(readFileSync(join(run, 'metrics.jsonl'), 'utf8'), '{"step":1}\n{"step":2}\n');
    assert.ok(existsSync(join(run, 'events.out.tfevents.2.host')), 'without removeNewer, later files stay (this session may own them)');
    rollbackLogs(run, sizes, { removeNewer: true });
    assert.deepEqual(readdirSync(run).sort(), ['events.out.tfevents.1.host', 'metrics.jsonl', 'report.md']);
  });

  it('a trainer state without a field the resume restores is refused, naming the fields', () => {
    const dir = join(tmp, 'partial', 'step-000001');
    mkdirSync(dir, { recursive: true });
    const state = { version: 1, epoch: 0, index: 1, items: 1, envStep: 2, rng: [1, 2, 3, 4], buffers: [[], []], lastLogged: null, config: {} };
    writeFileSync(join(dir, 'trainer_state.json'), JSON.stringify(state));
    assert.throws(
      () => readTrainerState(dir),
      (e: unknown) =>
        e instanceof CheckpointWriteError &&
        e.path === join(dir, 'trainer_state.json') &&
        /has no logs, uniformItems, unbuffered, skipped: .*cannot be resumed exactly; start a new run/.test(e.message),
    );
    writeFileSync(join(dir, 'trainer_state.json'), JSON.stringify({ ...state, logs: {}, uniformItems: [], unbuffered: [], skipped: 0 }));
    assert.equal(readTrainerState(dir).items, 1);
  });
});
