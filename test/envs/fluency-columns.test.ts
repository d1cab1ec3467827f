/** Eval-table fluency columns for a baseline whose team size differs from the task's (single_agent of a 2-agent task). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { completionNll, completionNlls, fluencyColumns } from '../../src/envs/fluency-columns.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import type { Task } from '../../src/rl/task.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

test('a one-model baseline of a two-formatter task gets text columns and no reference NLL (it was prompted differently)', () => {
  const lm = LanguageModel.load(makeTinyModel({ seed: 3 }));
  const task: Task<{ prompt: string }> = { dataset: [{ prompt: 'go' }], formatters: [(x) => x.prompt, (x) => `${x.prompt} a`], reward: () => 0 };
  const single = [{ index: 0, completions: ['a b'], reward: 0, components: {}, responseSeconds: 0, outputTokens: 2 }];
  const cols = fluencyColumns(single, task.dataset, task, [lm], true);
  assert.ok(!('ref_nll' in cols), JSON.stringify(cols));
  assert.equal(typeof cols['word_validity/agent_0'], 'number');
  const team = [{ ...single[0], completions: ['a b', 'c'] }];
  assert.equal(typeof fluencyColumns(team, task.dataset, task, [lm, lm], true).ref_nll, 'number', 'the team itself is scored under its formatters');
});

test("an item's samples scored as one group give each completion's own NLL (llama and gpt2), with a fallback where the prompt must be cut", () => {
  for (const arch of ['llama', 'gpt2'] as const) {
    const lm = LanguageModel.load(makeTinyModel({ arch, seed: 5 }));
    const prompt = 'a b c a b';
    const samples = ['c a b c', 'b', '', 'a a a b b b c c'];
    const grouped = completionNlls(lm, prompt, samples);
    const alone = samples.map((c) => completionNll(lm, prompt, c));
    assert.equal(grouped[2], null, 'an empty completion scores nothing');
    for (const [k, v] of alone.entries()) {
      if (v === null) assert.equal(grouped[k], null);
      else assert.ok(Math.abs((grouped[k] as number) - v) < 1e-4 * Math.max(1, Math.abs(v)), `${arch} sample ${k}: ${grouped[k]} vs ${v}`);
    }
    // A prompt too long for the 64-position context beside the longest sample: each alone, truncated.
    const long = Array.from({ length: 60 }, (_, i) => 'abc'[i % 3]).join(' ');
    assert.deepEqual(
      completionNlls(lm, long, samples),
      samples.map((c) => completionNll(lm, long, c)),
    );
  }
});
