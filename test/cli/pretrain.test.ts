/** `magrpo pretrain` as a shell runs it: config errors by key path, a tiny run, --resume and --export-only. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { readJsonlGz, writeJsonlGz } from '../../src/data/build-corpus.js';

const TSX = import.meta.resolve('tsx');
const MAIN = resolve('src/cli/main.ts');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-cli-pretrain-'));

function cli(...args: string[]) {
  return spawnSync(process.execPath, ['--import', TSX, MAIN, 'pretrain', ...args], {
    cwd: tmp,
    encoding: 'utf8',
    env: { ...process.env, CI: 'true', MAGRPO_NUM_THREADS: '1' },
  });
}

writeJsonlGz(join(tmp, 'train.jsonl.gz'), readJsonlGz('data/corpus/train.jsonl.gz').slice(0, 10));
writeJsonlGz(join(tmp, 'validation.jsonl.gz'), readJsonlGz('data/corpus/validation.jsonl.gz').slice(0, 3));
const config = join(tmp, 'tiny.yaml');
writeFileSync(
  config,
  `run_dir: run
data:
  train: train.jsonl.gz
  validation: validation.jsonl.gz
  tokenizer: ${resolve('data/tokenizer')}
model: {hidden_size: 16, intermediate_size: 32, num_layers: 1, num_heads: 2, context_length: 32}
train: {max_steps: 10, micro_batch_size: 2, learning_rate: 0.01}
eval: {every_steps: 5, num_windows: 2}
checkpoint: {every_steps: 5}
export: {dir: model, code_eval_tasks: 0}
`,
);

test('config problems exit 1 and name every offending key', () => {
  const r = cli(config, '--set', 'train.learing_rate=1', '--set', 'export.dtype=F8');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /train\.learing_rate: unknown key/);
  assert.match(r.stderr, /export\.dtype: Invalid option/);
});

test('a tiny run trains, logs lines without a TTY, and exports; --resume of a finished run re-exports only', () => {
  const first = cli(config, '--no-export');
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stderr, /step 10\/10 loss \d+\.\d{4} val \d+\.\d{4}/);
  assert.ok(!existsSync(join(tmp, 'model')));

  const resumed = cli(config, '--resume');
  assert.equal(resumed.status, 0, resumed.stderr);
  assert.doesNotMatch(resumed.stderr, /step \d+\/10 loss/);
  assert.match(resumed.stdout, /^model: [\d,]+ parameters, validation perplexity \d+\.\d{2}\n$/);
  const ev = JSON.parse(readFileSync(join(tmp, 'model', 'eval.json'), 'utf8')) as { training: { steps: number }; code: null };
  assert.equal(ev.training.steps, 10);
  assert.equal(ev.code, null);

  const exported = cli(config, '--export-only', '--set', 'export.dir=model2');
  assert.equal(exported.status, 0, exported.stderr);
  assert.ok(existsSync(join(tmp, 'model2', 'model.safetensors')));
});

test('Ctrl-C stops after the current step with a checkpoint and exit status 130; --resume finishes the run', async () => {
  const dir = join(tmp, 'interrupted');
  const sets = ['--no-export', '--set', `run_dir=${dir}`, '--set', 'train.max_steps=400', '--set', 'log_every=1'];
  const child = spawn(process.execPath, ['--import', TSX, MAIN, 'pretrain', config, ...sets], {
    cwd: tmp,
    env: { ...process.env, CI: 'true', MAGRPO_NUM_THREADS: '1' },
  });
  let stderr = '';
  let sent = false;
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    if (!sent && /step 2\/400/.test(stderr)) {
      sent = true; // one press, as a user would
      child.kill('SIGINT');
    }
  });
  const status = await new Promise<number | null>((done) => child.on('close', (code) => done(code)));
  assert.equal(status, 130, stderr);
  assert.match(stderr, /stopped early; continue by running the same command with --resume/);
  const saved = readdirSync(join(dir, 'checkpoints'))
    .filter((d) => d.startsWith('step-'))
    .sort();
  const state = JSON.parse(readFileSync(join(dir, 'checkpoints', saved.at(-1) as string, 'state.json'), 'utf8'));
  assert.ok(state.step >= 2 && state.step < 400, `stopped at step ${state.step}`);
  const resumed = cli(config, ...sets, '--resume');
  assert.equal(resumed.status, 0, resumed.stderr);
  assert.match(resumed.stderr, /step 400\/400/);
});
