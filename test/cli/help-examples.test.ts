/**
 * Every example in every command's --help runs as written, from a copy of the clone's root:
 * `npx magrpo …` becomes this checkout's CLI, shell quoting, `&&`, `>` and `nice … env X=1`
 * prefixes are honoured, and the examples of one command run in the order shown (train writes the
 * runs that eval and dashboard read). Examples that train get flags that shorten them (a few items,
 * short completions, small eval splits); the flags appended are listed per command below, so
 * an example with a wrong path, flag or run name still fails here.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CLI } from '../../src/cli/options.js';
import { buildProgram } from '../../src/cli/program.js';
import { readJsonlGz, writeJsonlGz } from '../../src/data/build-corpus.js';
import { findPullable, pulledPath } from '../../src/model/pull.js';
import { optionalSkip } from '../helpers/skip.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
const TSX = import.meta.resolve('tsx');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-examples-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** Shell words of one command line: quotes, backslashes, a trailing # comment (as bash splits them). */
function shellWords(line: string): string[] {
  const out: string[] = [];
  let word = '';
  let started = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      // in double quotes a backslash escapes only $ ` " \ (so "\n" stays backslash + n)
      if (c === '"') quote = null;
      else if (c === '\\' && '$`"\\'.includes(line[i + 1])) word += line[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      started = true;
    } else if (c === '\\') {
      word += line[++i];
      started = true;
    } else if (c === ' ') {
      if (started) out.push(word);
      word = '';
      started = false;
    } else if (c === '#' && !started) {
      break;
    } else {
      word += c;
      started = true;
    }
  }
  assert.equal(quote, null, `unbalanced quotes in: ${line}`);
  if (started) out.push(word);
  return out;
}

/** The example lines of a help text: the indented lines after "Examples:" up to a blank line. */
function examples(help: string): string[] {
  const m = /^Examples:\n((?: {2}.*\n?)+)/m.exec(help);
  return m
    ? m[1]
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'))
    : [];
}

interface Run {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI (or a command line whose `npx magrpo` is replaced by it); `until` stops a server once its output matches. */
function run(words: string[], cwd: string, opts: { until?: RegExp } = {}): Promise<Run> {
  const at = words.indexOf('magrpo');
  assert.ok(at >= 0, `not a magrpo command: ${words.join(' ')}`);
  const prefix = words.slice(0, words[at - 1] === 'npx' ? at - 1 : at);
  const cli = [process.execPath, '--import', TSX, MAIN, ...words.slice(at + 1)];
  const argv = [...prefix, ...cli];
  return new Promise((done, fail) => {
    const child: ChildProcess = spawn(argv[0], argv.slice(1), { cwd, env: { ...process.env, CI: 'true', MAGRPO_NUM_THREADS: '1' } });
    let stdout = '';
    let stderr = '';
    let stopped = false;
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (!stopped && opts.until?.test(stderr)) {
        stopped = true; // one Ctrl-C, as a user would press it
        child.kill('SIGINT');
      }
    });
    child.on('error', fail);
    child.on('close', (status, signal) => done({ status, signal, stdout, stderr }));
  });
}

/** Runs one example line as a shell would (`a && b`, `a > file`), with `extra(words)` appended to each magrpo command. */
async function runExample(line: string, cwd: string, extra: (args: string[]) => string[], until?: RegExp): Promise<Run[]> {
  const results: Run[] = [];
  for (const part of line.split(' && ')) {
    let words = shellWords(part);
    if (words[0] !== 'npx' && !words.includes('magrpo')) continue; // another tool (e.g. tensorboard)
    let redirect: string | null = null;
    const gt = words.indexOf('>');
    if (gt >= 0) {
      redirect = words[gt + 1];
      words = words.slice(0, gt);
    }
    const at = words.indexOf('magrpo');
    const r = await run([...words, ...extra(words.slice(at + 1))], cwd, { until });
    results.push(r);
    assert.equal(r.status, 0, `${line}\n(exit ${r.status}, signal ${r.signal})\n${r.stderr.slice(-3000)}`);
    if (redirect) writeFileSync(join(cwd, redirect), r.stdout);
  }
  return results;
}

/** A clone's root to run examples in: configs copied (examples may write there), data and models linked. */
function workspace(name: string, models: string[]): string {
  const dir = join(tmp, name);
  mkdirSync(join(dir, 'models'), { recursive: true });
  cpSync(join(ROOT, 'configs'), join(dir, 'configs'), { recursive: true });
  symlinkSync(join(ROOT, 'data'), join(dir, 'data'));
  for (const m of models) symlinkSync(join(ROOT, 'models', m), join(dir, 'models', m));
  return dir;
}

// Shorter runs: the same code paths, a few items and tokens.
const SHORT_RL = ['env.train_size=2', 'env.eval_size=1', 'trainer.max_new_tokens=4', 'eval.max_new_tokens=4'];
const flags = (sets: string[]) => sets.flatMap((s) => ['--set', s]);
const SHORT_TRAIN = [...SHORT_RL, 'trainer.eval_interval=0', 'trainer.save_steps=1'];

/** Each command's help as `magrpo <command> --help` prints it ('' = the top level). */
const help: Record<string, string> = {};
before(() => {
  let text = '';
  const program = buildProgram((s) => {
    text += s;
  });
  program.outputHelp();
  help[''] = text;
  for (const cmd of program.commands) {
    text = '';
    cmd.outputHelp();
    help[cmd.name()] = text;
  }
});

describe('help examples run as written', () => {
  it('every command with examples writes them as they run on a fresh clone (npx magrpo …)', () => {
    assert.ok(Object.keys(help).length > 10, Object.keys(help).join(' '));
    for (const [cmd, text] of Object.entries(help)) {
      for (const line of examples(text)) {
        const words = shellWords(line.split(' && ')[0]);
        if (words[0] === 'tensorboard') continue;
        assert.ok(line.includes(`${CLI} `), `${cmd || 'magrpo'} --help: "${line}" should start with ${CLI}`);
        assert.ok(!/ magrpo /.test(line.replaceAll(`${CLI} `, '')), `${cmd}: "${line}" has a bare magrpo`);
      }
    }
    for (const cmd of ['train', 'eval', 'dashboard', 'init', 'schema', 'sample', 'pretrain', 'demo'])
      assert.ok(examples(help[cmd]).length > 0, `${cmd} --help has examples`);
  });

  it('schema, sample, init', async () => {
    const ws = workspace('basic', ['small', 'micro']);
    for (const line of examples(help.schema)) await runExample(line, ws, () => []);
    // (that the committed configs/schema.json equals this output is checked in config-file.test.ts)
    assert.equal(JSON.parse(readFileSync(join(ws, 'configs', 'schema.json'), 'utf8')).title, 'magrpo run config');
    const samples = [];
    for (const line of examples(help.sample)) samples.push(...(await runExample(line, ws, () => [])));
    assert.match(samples[0].stdout, /^Call me Ishmael\./);
    assert.doesNotMatch(samples[1].stdout.replace(/\n$/, ''), /\n\n/, '--stop "\\n\\n" stops before the first blank line');
    for (const line of examples(help.init)) await runExample(line, ws, (args) => (args[0] === 'train' ? ['--max-items', '1'] : []));
  });

  it('train, then eval and dashboard on the runs it wrote', async () => {
    const ws = workspace('rl', ['small']);
    for (const line of examples(help.train)) {
      const resume = line.includes('--resume');
      await runExample(line, ws, () => (resume ? ['--max-items', '2', ...flags(SHORT_RL)] : ['--max-items', '1', ...flags(SHORT_TRAIN)]));
    }
    for (const line of examples(help.eval)) await runExample(line, ws, () => flags(SHORT_RL));
    const served = [];
    for (const line of examples(help.dashboard))
      served.push(...(await runExample(line, ws, (a) => (a.includes('--print') ? [] : ['--port', '0']), /dashboard: http/)));
    assert.ok(served.some((r) => /^dashboard: http:\/\/127\.0\.0\.1:\d+\//m.test(r.stderr)));
  });

  it('pretrain', async () => {
    const ws = workspace('pretrain', []);
    // a slice of the corpus: the same code paths in seconds
    writeJsonlGz(join(ws, 'train.jsonl.gz'), readJsonlGz(join(ROOT, 'data', 'corpus', 'train.jsonl.gz')).slice(0, 20));
    writeJsonlGz(join(ws, 'validation.jsonl.gz'), readJsonlGz(join(ROOT, 'data', 'corpus', 'validation.jsonl.gz')).slice(0, 3));
    const short = ['train.jsonl.gz', 'validation.jsonl.gz'].map((f, i) => `data.${i ? 'validation' : 'train'}=${f}`);
    const sets = [
      ...short,
      'model.context_length=64',
      'train.micro_batch_size=1',
      'train.max_steps=2',
      'train.warmup_steps=1',
      'eval.every_steps=1',
      'eval.num_windows=1',
      'checkpoint.every_steps=1',
      'export.code_eval_tasks=0',
      'export.max_new_tokens=8',
    ];
    for (const line of examples(help.pretrain)) await runExample(line, ws, () => sets.flatMap((s) => ['--set', s]));
    assert.ok(readFileSync(join(ws, 'models', 'small', 'config.json'), 'utf8').includes('"hidden_size": 256'), 'exported in the workspace, not the clone');
  });

  // The default demo trains LoRA adapters on the pulled SmolLM2 GGUF; `--env` lines use shipped models.
  const shortDemo = ['--items', '1', '-o', 'runs', ...flags(SHORT_RL.filter((s) => !s.startsWith('env.train_size')))];
  it('demo --env (shipped models)', async () => {
    const ws = workspace('demo', []);
    const lines = examples(help.demo).filter((l) => l.includes('--env'));
    assert.ok(lines.length > 0);
    for (const line of lines) await runExample(line, ws, () => shortDemo);
  });
  const smollm2 = pulledPath(findPullable('smollm2-135m-instruct') as never);
  it('demo (SmolLM2-135M-Instruct)', {
    skip: optionalSkip('smollm2', !existsSync(smollm2) && `no ${smollm2} (npm start's setup, or magrpo pull smollm2-135m-instruct)`),
  }, async () => {
    const ws = workspace('demo-smollm2', []);
    const lines = examples(help.demo).filter((l) => !l.includes('--env'));
    assert.ok(lines.length > 0);
    for (const line of lines) {
      const [run] = await runExample(line, ws, () => shortDemo);
      assert.match(run.stdout, /content_support/, 'the real-model table reports faithfulness');
    }
  });
});
