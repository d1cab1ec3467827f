/**
 * kill -9 at seeded random points of a short `magrpo train` run, including inside checkpoint writes,
 * then `--resume` until it finishes: the final weights and optimizer state equal an uninterrupted run's
 * bit for bit, no incomplete checkpoint is ever what `latest` resolves to, and metrics.jsonl,
 * samples.jsonl and the TensorBoard events hold every step exactly once, as the uninterrupted run's.
 *
 * The runs kill themselves (test/cli/fixtures/kill-points.mjs, a preload) at a point counted in
 * checkpoints and file-system changes, never in time: where each kill lands is the same on any
 * machine at any load, and a kill can never come after the run has finished.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { Rng } from '../../src/engine/rng.js';
import { readSafetensors } from '../../src/model/safetensors.js';
import { resolveCheckpoint } from '../../src/rl/checkpoint.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
const ENV_MODULE = join(import.meta.dirname, 'fixtures', 'coordination-env.ts');
const KILL_POINTS = pathToFileURL(join(import.meta.dirname, 'fixtures', 'kill-points.mjs')).href;
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const TSX = import.meta.resolve('tsx');
const ITEMS = 30;
/**
 * Kill schedule: "write" kills inside the n-th checkpoint write of a session (agent 1's weights
 * half-written); "after" at the op-th file-system change after the session's checkpoint-th commit
 * (a log append, a TensorBoard record, a file of the next checkpoint, …; about 50 changes per item).
 */
type Kill = { mode: 'write'; n: number } | { mode: 'after'; checkpoint: number; op: number };

let tmp = '';
let config = '';
before(() => {
  tmp = mkdtempSync(join(tmpdir(), 'magrpo-crash-'));
  makeTinyModel({ seed: 3, dir: join(tmp, 'tiny') });
  config = join(tmp, 'run.yaml');
  writeFileSync(
    config,
    `env:
  module: ${ENV_MODULE}
  options: {items: ${ITEMS}}
model: ./tiny
output_dir: ${join(tmp, 'runs')}
trainer:
  num_generations: 3
  max_new_tokens: 2
  temperature: 1
  top_k: null
  top_p: 1
  num_train_epochs: 1
  agent_learning_rate: 0.03
  rollout_buffer_size: 2
  early_termination_threshold: null
  logging_steps: 1
  eval_interval: 7
  eval_num_samples: 2
  save_steps: 1
  save_total_limit: 2
eval:
  at_end: false
samples:
  every: 3
`,
  );
});
after(() => rmSync(tmp, { recursive: true, force: true }));

const args = (name: string, resume: boolean) => (resume ? ['train', '--resume', join(tmp, 'runs', name)] : ['train', config, '--set', `run_name=${name}`]);
const childEnv = (extra: Record<string, string> = {}) => ({ ...process.env, CI: 'true', ...extra });

function runToEnd(name: string, resume: boolean): string {
  const r = spawnSync(process.execPath, ['--import', TSX, MAIN, ...args(name, resume)], { cwd: tmp, encoding: 'utf8', env: childEnv() });
  assert.equal(r.status, 0, r.stderr);
  return r.stderr;
}

function checkpointedItems(dir: string): number {
  const latest = join(dir, 'checkpoints', 'latest');
  if (!existsSync(latest)) return 0;
  const m = /step-(\d+)/.exec(readFileSync(latest, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Runs a session that kill -9s itself where `kill` says; `killed` is false if it ended otherwise. */
function killedSession(name: string, resume: boolean, kill: Kill): { stderr: string; killed: boolean } {
  const env = childEnv(
    kill.mode === 'write'
      ? { MAGRPO_TEST_KILL_IN_CHECKPOINT: String(kill.n) }
      : { MAGRPO_TEST_KILL_AFTER_CHECKPOINT: String(kill.checkpoint), MAGRPO_TEST_KILL_AT_OP: String(kill.op) },
  );
  const r = spawnSync(process.execPath, ['--import', TSX, '--import', KILL_POINTS, MAIN, ...args(name, resume)], { cwd: tmp, encoding: 'utf8', env });
  return { stderr: r.stderr, killed: r.signal === 'SIGKILL' && r.stderr.includes('[test] kill -9 ') };
}

/** Every checkpoint `latest` resolves to loads: complete state, readable weights and moments. */
function assertLoadableCheckpoint(dir: string): void {
  const ckpt = resolveCheckpoint(dir);
  const state = JSON.parse(readFileSync(join(ckpt, 'trainer_state.json'), 'utf8'));
  assert.equal(state.items, Number(/step-(\d+)/.exec(ckpt)?.[1]));
  for (const a of [0, 1]) {
    assert.ok(readSafetensors(join(ckpt, `agent_${a}`, 'model', 'model.safetensors')).size > 0);
    readSafetensors(join(ckpt, `agent_${a}`, 'optimizer.safetensors'));
    JSON.parse(readFileSync(join(ckpt, `agent_${a}`, 'agent_state.json'), 'utf8'));
  }
}

const jsonl = (f: string) =>
  readFileSync(f, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
/** Drops wall-clock fields: the only things a resumed run may legitimately log differently. */
const untimed = (row: Record<string, unknown>) => Object.fromEntries(Object.entries(row).filter(([k]) => k !== 'time' && !k.startsWith('time/')));

function tensorboardScalars(dir: string): { step: number; scalars: Record<string, number> }[] {
  return readdirSync(dir)
    .filter((f) => f.startsWith('events.out.tfevents.'))
    .sort()
    .flatMap((f) =>
      execFileSync(PYTHON, [join(ROOT, 'test', 'cli', 'read_tfevents.py'), join(dir, f)], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .filter((e) => e.scalars)
        .map((e) => ({ step: e.step, scalars: untimed(e.scalars) as Record<string, number> })),
    );
}

describe('kill -9 and --resume', () => {
  it('the resumed run equals the uninterrupted one bit for bit, logs without duplicate or missing steps', (t) => {
    runToEnd('straight', false);
    const straight = join(tmp, 'runs', 'straight');

    const rng = new Rng(2026);
    // 'after': 1-4 checkpoints into the session, at one of the next 60 file-system changes (at
    // most 24 of the 30 items are done before the last kill, so every kill point is reached)
    const schedule: (Kill | 'after')[] = [{ mode: 'write', n: 3 }, 'after', { mode: 'write', n: 2 }, 'after', { mode: 'write', n: 1 }, 'after'];
    const crashed = join(tmp, 'runs', 'crashed');
    let midWrite = 0;
    let kills = 0;
    for (const [round, planned] of schedule.entries()) {
      const kill: Kill = planned === 'after' ? { mode: 'after', checkpoint: 1 + Math.floor(rng.next() * 4), op: Math.floor(rng.next() * 60) } : planned;
      const s = killedSession('crashed', round > 0, kill);
      assert.ok(s.killed, `round ${round}: the run ended before the planned kill (${JSON.stringify(kill)}):\n${s.stderr}`);
      kills++;
      t.diagnostic(`round ${round}: ${/\[test\] (kill -9 .*)/.exec(s.stderr)?.[1]}, ${checkpointedItems(crashed)} items checkpointed`);
      if (kill.mode === 'write') {
        // The kill landed inside the write: a temp checkpoint folder holds a half-written weights file.
        const temps = readdirSync(join(crashed, 'checkpoints')).filter((d) => /\.tmp-\d+$/.test(d));
        assert.equal(temps.length, 1, `round ${round}: expected one temp checkpoint folder`);
        const half = readdirSync(join(crashed, 'checkpoints', temps[0], 'agent_1', 'model')).filter((f) => /model\.safetensors\.tmp-/.test(f));
        assert.equal(half.length, 1, 'the weights file was mid-write');
        midWrite++;
      }
      assertLoadableCheckpoint(crashed);
      assert.ok(checkpointedItems(crashed) < ITEMS, `round ${round}: killed before the end`);
    }
    runToEnd('crashed', true);
    assert.equal(kills, schedule.length);
    assert.equal(midWrite, 3);
    assert.deepEqual(
      readdirSync(join(crashed, 'checkpoints')).filter((d) => d.includes('.tmp-')),
      [],
      'temp folders of killed writers are cleaned up',
    );

    // Weights and optimizer state: bit for bit.
    for (const a of [0, 1]) {
      const model = (run: string) => readFileSync(join(run, 'final', `agent_${a}`, 'model', 'model.safetensors'));
      assert.ok(model(crashed).equals(model(straight)), `agent ${a}: final weights differ`);
      const moments = (run: string) => readFileSync(join(resolveCheckpoint(run), `agent_${a}`, 'optimizer.safetensors'));
      assert.ok(moments(crashed).equals(moments(straight)), `agent ${a}: optimizer moments differ`);
    }

    // Logs: the same entries, each step once, in the same order.
    const metrics = (run: string) => jsonl(join(run, 'metrics.jsonl')).map(untimed);
    const trainSteps = metrics(crashed)
      .filter((m) => 'turn_1/reward_mean' in m)
      .map((m) => m.step);
    assert.equal(new Set(trainSteps).size, trainSteps.length, 'no duplicate training step in metrics.jsonl');
    assert.equal(trainSteps.length, ITEMS / 2, 'one training entry per drain (rollout_buffer_size 2)');
    assert.deepEqual(metrics(crashed), metrics(straight));
    const samples = (run: string) => jsonl(join(run, 'samples.jsonl')).map(untimed);
    assert.equal(samples(crashed).length, ITEMS / 3);
    assert.deepEqual(samples(crashed), samples(straight));
    const tb = tensorboardScalars(crashed);
    assert.equal(tb.length, metrics(crashed).length, 'one TensorBoard event per metrics row');
    assert.deepEqual(tb, tensorboardScalars(straight));
  });
});
