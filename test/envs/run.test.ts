/** The team runner: single-path episodes with transitions, timing and token counts. */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import { passAtK } from '../../src/envs/environment.js';
import { formatTable, runTeam } from '../../src/envs/run.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

let dir = '';
before(() => {
  setBackend('native');
  dir = makeTinyModel();
});
after(() => rmSync(dir, { recursive: true, force: true }));

it('runs a two-turn team through its transition and scores the last turn', async () => {
  const lm = LanguageModel.load(dir);
  const seen: string[][] = [];
  const task = {
    dataset: [],
    reward: ({ completions, turn }: { completions: readonly string[]; turn: number }) => turn * 10 + completions.length,
    transition: ({ completions }: { completions: readonly string[] }) => {
      seen.push([...completions]);
      return completions.map((c) => `go ${c}`);
    },
  };
  const items = [{ prompt: 'go' }, { prompt: 'go a' }];
  const out = await runTeam(task, items, [lm, lm], { maxNewTokens: 2, temperature: 1, seed: 1 }, 2);
  assert.equal(out.length, 2);
  assert.equal(seen.length, 2, 'one transition per episode');
  for (const r of out) {
    assert.equal(r.reward, 12, 'scored at turn 1 with two completions');
    assert.ok(r.outputTokens > 0 && r.outputTokens <= 2 * 2 * 2);
    assert.ok(r.responseSeconds >= 0);
  }
});

it('formats a table and computes unbiased pass@k', () => {
  const t = formatTable([
    { method: 'a', metrics: { return: 12.345 } },
    { method: 'b', metrics: { return: 150 } },
  ]);
  assert.match(t, /method\s+return/);
  assert.match(t, /a\s+12\.3/);
  assert.equal(passAtK(10, 0, 1), 0);
  assert.equal(passAtK(10, 10, 5), 1);
  assert.ok(Math.abs(passAtK(5, 1, 1) - 0.2) < 1e-12);
  assert.ok(Math.abs(passAtK(4, 2, 2) - (1 - 1 / 6)) < 1e-12);
});
