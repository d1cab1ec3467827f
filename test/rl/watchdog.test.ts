/**
 * A user callback stuck in a synchronous loop (no timer can fire): the watchdog stops the process
 * with a message naming the callback and where, and leaves failure.json in the registered run
 * directory. Through the rollout path (computeReward, formatPrompt) in child processes, since the
 * process under test must die.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';

const ROOT = process.cwd();
const url = (p: string) => JSON.stringify(pathToFileURL(join(ROOT, p)).href);

/** Runs `body` (an ES module snippet) in a child with tsx; returns its status, signal and stderr. */
function child(body: string) {
  const code = `
import { resolveConfig } from ${url('src/rl/config.ts')};
import { computeReward, formatPrompt } from ${url('src/rl/rollout.ts')};
import { watchdogRun, watched } from ${url('src/rl/watchdog.ts')};
const item = { prompt: 'go' };
const ctx = (task, formatters = [(i) => i.prompt, (i) => i.prompt]) => ({
  task: { dataset: [item], reward: () => 0, callbackTimeoutSeconds: 1, ...task },
  config: resolveConfig({ num_agents: 2 }),
  agents: [],
  formatters,
  itemIndex: 3,
});
const input = { completions: ['a', 'b'], prompts: ['go', 'go'], item, turn: 0 };
${body}
`;
  return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000, cwd: ROOT });
}

describe('callback watchdog', () => {
  it('a reward in an endless synchronous loop stops the process, names the callback and writes failure.json', () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-watchdog-'));
    try {
      const t0 = Date.now();
      const r = child(`
watchdogRun({ dir: ${JSON.stringify(dir)}, envStep: 12, items: 3, checkpoint: null });
await computeReward(ctx({ reward: () => { for (;;) {} } }), input);
console.log('unreachable');`);
      const seconds = (Date.now() - t0) / 1000;
      assert.equal(r.signal, 'SIGKILL', `status ${r.status}, stderr ${r.stderr}`);
      assert.doesNotMatch(r.stdout, /unreachable/);
      assert.match(r.stderr, /the task's reward callback has run for \d+ s on item 3, turn 0 without returning \(Task\.callbackTimeoutSeconds = 1\)/);
      assert.ok(seconds < 30, `stopped after ${seconds} s`);
      const file = join(dir, 'failure.json');
      assert.ok(existsSync(file), 'failure.json written');
      const report = JSON.parse(readFileSync(file, 'utf8'));
      assert.equal(report.status, 'failed');
      assert.equal(report.env_step, 12);
      assert.equal(report.items, 3);
      assert.match(report.error, /reward callback/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a formatter in an endless loop is stopped the same way', () => {
    const r = child(`formatPrompt(ctx({}, [() => { for (;;) {} }, (i) => i.prompt]), 0, item, null);`);
    assert.equal(r.signal, 'SIGKILL', r.stderr);
    assert.match(r.stderr, /the task's formatters callback has run/);
  });

  it('callbacks that return in time, and slow ones in a row, are left alone', () => {
    const r = child(`
let total = 0;
for (let i = 0; i < 3; i++) {
  total += (await computeReward(ctx({ reward: () => { const t = Date.now(); while (Date.now() - t < 600) {} return 1; } }), input)).reward;
}
total += watched('x', 'here', 1, () => 2);
console.log('done', total);`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /done 5/);
  });
});
