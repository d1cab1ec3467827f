/**
 * The CLI's answers to common mistakes, as a shell sees them: a failed run's failure.json, an
 * agent folder given where its model/ is meant, a busy dashboard port, a missing `init --model`,
 * `--stop "\n\n"` typed in a shell, and help without noisy defaults.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { serveDashboard } from '../../src/cli/dashboard.js';
import { scaffold } from '../../src/cli/init.js';
import { checkModelFolder } from '../../src/cli/model-folder.js';
import { unescapeArg } from '../../src/cli/options.js';
import { buildProgram } from '../../src/cli/program.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
const TSX = import.meta.resolve('tsx');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-cli-ux-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function magrpo(args: string[], cwd = tmp) {
  const r = spawnSync(process.execPath, ['--import', TSX, MAIN, ...args], { cwd, encoding: 'utf8', env: { ...process.env, CI: 'true' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('a failed run', () => {
  it('exits 1 and leaves failure.json with the error, its stack and the last step', () => {
    makeTinyModel({ seed: 1, dir: join(tmp, 'tiny') });
    const config = join(tmp, 'fail.yaml');
    writeFileSync(
      config,
      `env:
  module: ${join(import.meta.dirname, 'fixtures', 'failing-env.ts')}
  options: {items: 40, failAt: 20}
model: ./tiny
output_dir: ${join(tmp, 'runs')}
run_name: broken
trainer: {num_generations: 4, max_new_tokens: 2, rollout_buffer_size: 1, logging_steps: 1, eval_interval: 0, save_steps: 2}
eval: {at_end: false}
`,
    );
    const r = magrpo(['train', config]);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /^magrpo: .*the reward exploded on purpose$/m);
    const file = join(tmp, 'runs', 'broken', 'failure.json');
    assert.match(r.stderr, new RegExp(`details in ${file.replace(/[.]/g, '\\.')}`));
    const failure = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(failure.status, 'failed');
    assert.match(failure.error, /the reward exploded on purpose/);
    assert.match(failure.stack, /^TaskError: .*\n +at .*rollout\.ts:\d+/);
    assert.equal(failure.items, 5, '20 joint rewards = 5 items of 4 joint actions');
    assert.equal(typeof failure.env_step, 'number');
    assert.ok(failure.env_step > 0);
    assert.match(failure.checkpoint, /checkpoints[\\/]step-0*4$/, 'the newest checkpoint to resume from');
  });

  it('a failure before the run directory exists (a config error) leaves no directory', () => {
    const r = magrpo(['train', join(tmp, 'fail.yaml'), '--set', 'run_name=never', '--set', 'trainer.learning_rate=-1']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /trainer\.learning_rate: \(as agent_learning_rate\) got -1/);
    assert.ok(!existsSync(join(tmp, 'runs', 'never')));
  });
});

describe('model folders', () => {
  const agent = join(tmp, 'run', 'final', 'agent_1');
  it('an agent folder without /model names the folder that works', () => {
    makeTinyModel({ seed: 2, dir: join(agent, 'model') });
    assert.throws(
      () => checkModelFolder(agent, '--model'),
      new RegExp(`--model: ${agent} is not a model folder \\(no config\\.json\\); the model folder inside: ${agent}/model$`),
    );
    const r = magrpo(['sample', '-m', agent, '-p', 'go']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /the model folder inside: .*agent_1\/model/);
    const run = magrpo(['sample', '-m', join(tmp, 'run'), '-p', 'go']);
    assert.match(run.stderr, /the model folder inside: .*final\/agent_1\/model/);
    assert.equal(magrpo(['sample', '-m', join(agent, 'model'), '-p', 'go', '-n', '2']).status, 0);
  });

  it('a missing folder suggests the near name', () => {
    assert.throws(() => checkModelFolder(join(ROOT, 'models', 'smal'), '-m'), /-m: .*models\/smal does not exist — did you mean .*models\/small\?/);
  });

  it('init --model is checked before anything is written', () => {
    const target = join(tmp, 'scaffold');
    assert.throws(() => scaffold(target, join(tmp, 'no-such-model')), /--model: .*no-such-model does not exist/);
    assert.throws(() => scaffold(target, agent), /the model folder inside/);
    assert.ok(!existsSync(target), 'nothing created');
    const r = magrpo(['init', target, '--model', join(tmp, 'missing')]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /--model: .*missing does not exist/);
    assert.equal(magrpo(['init', target, '--model', join(agent, 'model')]).status, 0);
    assert.match(readFileSync(join(target, 'config.yaml'), 'utf8'), /^model: "\.\.\/run\/final\/agent_1\/model"$/m);
  });
});

describe('dashboard port', () => {
  it('a busy port is a clear error suggesting --port 0', async () => {
    const busy = createServer();
    await new Promise<void>((ok) => busy.listen(0, '127.0.0.1', ok));
    const port = (busy.address() as { port: number }).port;
    const dir = join(tmp, 'runs', 'viewed');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'config.yaml'), 'run_name: viewed\n');
    try {
      await assert.rejects(
        serveDashboard([dir], port),
        new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use .*: pass --port 0 for any free port, or another --port`),
      );
      const r = magrpo(['dashboard', dir, '--port', String(port)]);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /is already in use .*--port 0/);
      assert.doesNotMatch(r.stderr, /EADDRINUSE/);
    } finally {
      busy.close();
    }
  });
});

describe('--stop and help text', () => {
  it('backslash escapes in --stop: \\n\\n stops at a real blank line', () => {
    assert.equal(unescapeArg('\\n\\n'), '\n\n');
    assert.equal(unescapeArg('a\\tb\\\\n\\r'), 'a\tb\\n\r');
    assert.equal(unescapeArg('C:\\path'), 'C:\\path', 'other backslashes are kept');
    const args = ['sample', '-m', join(ROOT, 'models', 'small'), '-p', 'def add(a, b):', '-t', '0', '-n', '64', '--json'];
    const free = JSON.parse(magrpo(args).stdout);
    assert.match(free.text, /\n\n/, 'without --stop the greedy completion runs past a blank line');
    const r = magrpo([...args, '--stop', '\\n\\n']);
    assert.equal(r.status, 0, r.stderr);
    const stopped = JSON.parse(r.stdout);
    assert.equal(stopped.finish_reason, 'stop_string');
    assert.equal(stopped.text, free.text.slice(0, free.text.indexOf('\n\n')));
  });

  it('no "(default: [])" and never two defaults for one option', () => {
    let help = '';
    const program = buildProgram((s) => {
      help += s;
    });
    assert.ok(program.commands.length >= 10);
    for (const command of program.commands) {
      const cmd = command.name();
      help = '';
      command.outputHelp();
      assert.doesNotMatch(help, /\(default: \[\]\)/, cmd);
      const options = help.split(/^Options:$/m)[1].split(/^\S/m)[0];
      for (const entry of options.split(/\n(?= {2}-)/)) assert.ok((entry.match(/\(default/g) ?? []).length <= 1, `${cmd}: ${entry}`);
    }
  });
});
