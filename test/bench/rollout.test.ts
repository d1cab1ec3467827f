/**
 * `magrpo bench --rollout` (bench-rollout.ts) on tiny settings: models/micro, 2 prompts × G 2 × 4
 * tokens, the in-process sampler against 1 and 2 real `magrpo serve` processes; every setup samples
 * exactly P × G × T tokens (EOS ignored), and the table names the settings.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { formatRollout, measureRollout, rolloutSettings } from '../../src/bench/rollout.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CLI = ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts')];

describe('bench --rollout', () => {
  it('settings: --quick is 4 prompts × G 8 × 32 tokens, median of 3; 1 and 2 servers', () => {
    const s = rolloutSettings('models/base', true, 2);
    assert.deepEqual(
      { prompts: s.prompts, group: s.group, newTokens: s.newTokens, reps: s.reps, servers: s.serverCounts },
      { prompts: 4, group: 8, newTokens: 32, reps: 3, servers: [1, 2] },
    );
    assert.equal(rolloutSettings('m', false, 2).newTokens, 64);
  });

  it('measures the in-process sampler and 1 and 2 magrpo serve processes on the same work', { timeout: 120_000 }, async () => {
    const settings = { model: join(ROOT, 'models', 'micro'), prompts: 2, group: 2, newTokens: 4, reps: 1, threads: 2, serverCounts: [1, 2] };
    const logs: string[] = [];
    const r = await measureRollout(settings, CLI, (m) => logs.push(m));
    assert.deepEqual(
      r.rows.map((x) => [x.setup, x.servers, x.threads_per_process]),
      [
        ['in-process sampler', 0, 2],
        ['magrpo serve × 1', 1, 2],
        ['magrpo serve × 2', 2, 1],
      ],
    );
    for (const x of r.rows) {
      assert.equal(x.completion_tokens, 2 * 2 * 4, `${x.setup}: every completion is exactly T tokens`);
      assert.ok(x.seconds > 0 && Math.abs(x.tokens_per_s - x.completion_tokens / x.seconds) < 1e-9);
    }
    assert.ok(r.settings.params > 50_000);
    const text = formatRollout(r);
    assert.match(text, /2 prompts × G 2 completions × 4 new tokens \(EOS ignored\)/);
    assert.match(text, /magrpo serve × 2 +1 +16 /);
    assert.match(text, /cannot add throughput past what the cores give/);
    assert.ok(!logs.some((m) => /weight_sync/.test(m)), 'no rollout warnings in the bench output');
  });
});
