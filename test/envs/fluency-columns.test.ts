/** Eval-table fluency columns for a baseline whose team size differs from the task's (single_agent of a 2-agent task). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fluencyColumns } from '../../src/envs/fluency-columns.js';
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
