/**
 * The CLI end to end, as a user runs it, on a tiny model and the coordination game:
 * train → Ctrl-C (checkpoint) → --resume → eval (JSON, CSV) → dashboard --print; plus the run
 * directory's contents and --help of every command.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Command } from 'commander';
import { printRuns, registerDashboard } from '../../src/cli/dashboard.js';
import { registerEval } from '../../src/cli/eval.js';
import { registerInit } from '../../src/cli/init.js';
import { registerSchema } from '../../src/cli/schema.js';
import { registerTrain, train } from '../../src/cli/train.js';
import { autoPrecision, getPrecision, setPrecision } from '../../src/engine/runtime.js';
import { evaluateTarget } from '../../src/run/evaluate.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
const ENV_MODULE = join(import.meta.dirname, 'fixtures', 'coordination-env.ts');
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const ITEMS = 150;
/** tsx's loader by absolute URL: the CLI runs in a temp folder with no node_modules. */
const TSX = import.meta.resolve('tsx');

let tmp = '';
let config = '';
before(() => {
  tmp = mkdtempSync(join(tmpdir(), 'magrpo-cli-'));
  makeTinyModel({ seed: 1, dir: join(tmp, 'tiny') });
  config = join(tmp, 'run.yaml');
  writeFileSync(
    config,
    `env:
  module: ${ENV_MODULE}
  options: {items: ${ITEMS}}
model: ./tiny
output_dir: ${join(tmp, 'runs')}
run_name: coord
trainer:
  num_generations: 4
  max_new_tokens: 2
  temperature: 1
  top_k: null
  top_p: 1
  num_train_epochs: 1
  agent_learning_rate: 0.03
  rollout_buffer_size: 1
  early_termination_threshold: null
  logging_steps: 1
  eval_interval: 50
  eval_num_samples: 3
  save_steps: 25
samples:
  every: 10
  max_chars: 40
`,
  );
});
after(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs the CLI in-process-free (a child node with tsx), as a shell would; CI=true: log lines. */
function magrpo(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', TSX, MAIN, ...args], { cwd: tmp, encoding: 'utf8', env: { ...process.env, CI: 'true' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function waitFor(child: ChildProcess, re: RegExp): Promise<void> {
  return new Promise((ok, fail) => {
    let seen = '';
    child.stderr?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (re.test(seen)) ok();
    });
    child.on('exit', () => fail(new Error(`exited before ${re}: ${seen}`)));
  });
}

const run = () => join(tmp, 'runs', 'coord');
const lines = (f: string) => readFileSync(f, 'utf8').trim().split('\n');

describe('magrpo train / eval / dashboard, end to end', () => {
  it('Ctrl-C stops cleanly with a checkpoint; a second run refuses the same run_name', async () => {
    const child = spawn(process.execPath, ['--import', TSX, MAIN, 'train', config], { cwd: tmp, env: { ...process.env, CI: 'true' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    await waitFor(child, /\[train\] (1[5-9]|[2-9]\d)\//);
    child.kill('SIGINT');
    const code = await new Promise<number | null>((ok) => child.on('exit', ok));
    assert.equal(code, 130, `Ctrl-C exits with 128 + SIGINT\n${stderr}`);
    assert.match(stderr, /stopping after this item and writing a checkpoint/);
    assert.match(stderr, /interrupted: \d+\/150 items/);
    assert.match(stderr, /^checkpoint: .*checkpoints[\\/]step-\d+$/m);
    assert.match(stderr, /continue with: npx magrpo train --resume /);
    assert.ok(!existsSync(join(run(), 'failure.json')), 'an interrupted run has not failed');
    const report = JSON.parse(readFileSync(join(run(), 'report.json'), 'utf8'));
    assert.equal(report.status, 'interrupted');
    assert.ok(report.items > 0 && report.items < ITEMS);
    assert.equal(report.final_eval, null);
    assert.ok(existsSync(join(run(), 'checkpoints', 'latest')));
    const state = readFileSync(join(run(), 'checkpoints', readFileSync(join(run(), 'checkpoints', 'latest'), 'utf8').trim(), 'trainer_state.json'), 'utf8');
    assert.equal(JSON.parse(state).items, report.items, 'the checkpoint is at the item where it stopped');

    await assert.rejects(train(config, { quiet: true }), /already holds a run: choose another run_name, or continue it with --resume/);
  });

  it('--resume finishes the run: final agents, eval vs baselines, report, samples, TensorBoard', () => {
    const r = magrpo(['train', '--resume', run()]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /finished: 150\/150 items, 600 env steps/);
    assert.match(r.stdout, /^method +agreement +response_s +ref_nll +word_validity +grammar_validity +distinct_2 +repetition +clause_length +tokens$/m);
    assert.match(r.stdout, /^oracle +100 /m);
    const report = JSON.parse(readFileSync(join(run(), 'report.json'), 'utf8'));
    assert.equal(report.status, 'finished');
    assert.equal(report.env_step, 600);
    assert.deepEqual(
      report.final_eval.rows.map((x: { method: string }) => x.method),
      ['magrpo', 'untrained', 'oracle'],
    );
    assert.ok(report.timings.total_s > 0 && 'update_s_per_item' in report.timings);
    assert.match(readFileSync(join(run(), 'report.md'), 'utf8'), /## Final evaluation[\s\S]*magrpo[\s\S]*## Timings/);
    for (const i of [0, 1]) assert.ok(existsSync(join(run(), 'final', `agent_${i}`, 'model', 'model.safetensors')));

    // metrics.jsonl continues across the resume; the env step only grows.
    const metrics = lines(join(run(), 'metrics.jsonl')).map((l) => JSON.parse(l));
    const trainSteps = metrics.filter((m) => 'turn_1/reward_mean' in m).map((m) => m.step);
    assert.equal(trainSteps.length, ITEMS);
    assert.deepEqual(
      trainSteps,
      [...trainSteps].sort((a, b) => a - b),
    );
    assert.equal(trainSteps.at(-1), 600);

    // samples.jsonl: every 10th item, texts cut to max_chars, both agents' G completions.
    const samples = lines(join(run(), 'samples.jsonl')).map((l) => JSON.parse(l));
    assert.equal(samples.length, ITEMS / 10);
    for (const s of samples) {
      assert.equal(s.tree.prompts.length, 2);
      assert.deepEqual(
        s.tree.completions.map((c: string[]) => c.length),
        [4, 4],
      );
      assert.equal(s.tree.rewards.length, 4);
    }

    // TensorBoard: one events file per session, together holding every logged entry.
    const events = readdirSync(run()).filter((f) => f.startsWith('events.out.tfevents.'));
    assert.equal(events.length, 2);
    const scalarEvents = events.flatMap((f) =>
      execFileSync(PYTHON, [join(ROOT, 'test', 'cli', 'read_tfevents.py'), join(run(), f)], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .filter((e) => e.scalars),
    );
    assert.equal(scalarEvents.length, metrics.length);
    assert.deepEqual(
      scalarEvents.map((e) => e.step).sort((a, b) => a - b),
      metrics.map((m) => m.step).sort((a, b) => a - b),
    );

    const config = readFileSync(join(run(), 'config.yaml'), 'utf8');
    assert.match(config, new RegExp(`^model: ${join(tmp, 'tiny')}$`, 'm'), 'the resolved config has absolute paths');
    assert.match(config, /^ {2}num_agents: 2$/m);
  });

  it('eval: the trained team vs chosen baselines, as a table, JSON and CSV', () => {
    const r = magrpo(['eval', run(), '--baselines', 'oracle', '--json', 'out.json', '--csv', 'out.csv']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^magrpo +\d/m);
    assert.match(r.stdout, /^oracle +100 /m);
    assert.doesNotMatch(r.stdout, /untrained/);
    const json = JSON.parse(readFileSync(join(tmp, 'out.json'), 'utf8'));
    assert.equal(json.items, 3);
    assert.deepEqual(
      json.rows.map((x: { method: string }) => x.method),
      ['magrpo', 'oracle'],
    );
    const csv = lines(join(tmp, 'out.csv'));
    const header = csv[0].split(',');
    assert.deepEqual(header.slice(0, 3), ['method', 'agreement', 'response_s']);
    assert.deepEqual(header.slice(-2), ['tokens', 'reward_mean']);
    const oracle = Object.fromEntries(header.map((h, j) => [h, csv[2].split(',')[j]]));
    assert.equal(oracle.method, 'oracle');
    assert.equal(oracle.agreement, '100');
    assert.equal(oracle.tokens, '2');
    assert.equal(oracle.reward_mean, '1');
    // fluency columns, per agent and for the weakest agent: the oracle writes real words
    assert.equal(oracle['word_validity/agent_0'], '100');
    assert.equal(oracle.word_validity, '100');
    assert.ok(Number(oracle.ref_nll) > 0);
  });

  it('eval in-process: a config evaluates the untrained models; unknown baselines get a suggestion', async () => {
    await assert.rejects(
      evaluateTarget(run(), { baselines: 'orcale', quiet: true }),
      /--baselines: got "orcale", expected one of untrained, oracle — did you mean "oracle"\?/,
    );
    const report = await evaluateTarget(config, { baselines: 'none', quiet: true });
    assert.deepEqual(
      report.rows.map((r) => r.method),
      ['untrained team'],
    );
    const tokens = report.rows[0].metrics.tokens;
    assert.ok(tokens > 0 && tokens <= 4, `two agents × at most max_new_tokens 2, got ${tokens}`);
    // The evaluation samples with the products training would use (the demo evaluates before training starts).
    try {
      await evaluateTarget(config, { baselines: 'none', quiet: true, set: ['trainer.precision=bf16'] });
      assert.equal(getPrecision(), 'bf16');
      await evaluateTarget(config, { baselines: 'none', quiet: true, set: ['trainer.precision=auto'] });
      assert.equal(getPrecision(), autoPrecision());
    } finally {
      setPrecision('fp32');
    }
  });

  it('dashboard --print: the latest metrics and the final evaluation', () => {
    const out = printRuns([run()]);
    assert.match(out, /^metric +coord$/m);
    assert.match(out, /^env step +600$/m);
    assert.match(out, /^turn_1\/reward_mean +[\d.]+$/m);
    assert.match(out, /^agent_1\/entropy +[\d.e-]+$/m);
    assert.match(out, /final evaluation \(3 items × 1\)/);
  });

  it('config errors exit 1 with every problem and its position', () => {
    const bad = join(tmp, 'bad.yaml');
    writeFileSync(bad, `env:\n  module: ${ENV_MODULE}\nmodel: ./tiny\ntrainer:\n  num_generatons: 4\n  joint_mode: diagonal\n`);
    const r = magrpo(['train', bad, '--set', 'trainer.seed=-1']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /bad\.yaml: 3 problems/);
    assert.match(r.stderr, /bad\.yaml:5:3 {2}trainer\.num_generatons: unknown key — did you mean "num_generations"\?/);
    assert.match(r.stderr, /bad\.yaml:6:3 {2}trainer\.joint_mode: got "diagonal", expected one of/);
    assert.match(r.stderr, /--set trainer\.seed=-1 {2}trainer\.seed: got -1/);
  });

  it('--help of every command shows examples; main lists the commands', () => {
    const program = new Command().exitOverride();
    for (const register of [registerTrain, registerEval, registerDashboard, registerInit, registerSchema]) register(program);
    for (const cmd of program.commands) {
      let text = '';
      cmd.configureOutput({ writeOut: (s) => (text += s) });
      cmd.outputHelp();
      assert.match(text, /Examples:\n {2}npx magrpo /, cmd.name());
    }
    const r = magrpo(['--help']);
    assert.equal(r.status, 0);
    for (const cmd of ['train', 'eval', 'dashboard', 'init', 'schema']) assert.match(r.stdout, new RegExp(`^ {2}${cmd} `, 'm'));
  });
});
