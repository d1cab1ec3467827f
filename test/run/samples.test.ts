/**
 * samples.jsonl keeps what was trained on: every completion's sampled token ids (texts may be cut
 * and need not re-tokenise to the same ids) and its sampling log-probs, so a run can be audited
 * and replayed from its files.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import { noGrad } from '../../src/engine/tensor.js';
import { completionLogprobs } from '../../src/model/logprobs.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import type { TreeNode } from '../../src/rl/rollout.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { readJsonl, type SampleNode, type SampleRecord, SamplesRecorder } from '../../src/run/run-dir.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

let dir = '';
let out = '';
before(() => {
  setBackend('native');
  dir = makeTinyModel({ seed: 6 });
  out = mkdtempSync(join(tmpdir(), 'magrpo-samples-'));
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(out, { recursive: true, force: true });
});

it('records prompt and completion token ids and sampling log-probs of every node, untruncated', async () => {
  const file = join(out, 'samples.jsonl');
  const recorder = new SamplesRecorder(file, { every: 1, max_records: 10, max_chars: 3 });
  const trees: TreeNode[] = [];
  const t = new MAGRPOTrainer({
    task: {
      dataset: [{ prompt: 'go' }, { prompt: 'go a' }],
      reward: ({ completions }) => (completions[0] === completions[1] ? 1 : 0),
      transition: ({ completions }) => completions.map((c) => `go ${c}`),
    },
    model: dir,
    config: { max_new_tokens: 4, num_generations: 2, num_turns: 2, eval_interval: 0, early_termination_threshold: null, temperature: 1, top_k: null, top_p: 1 },
    onTree: (p) => {
      trees.push(p.root);
      recorder.onTree(p);
    },
  });
  for (const [i, item] of t.task.dataset.entries()) await t.trainStep(item, i);
  await t.close();

  const records = readJsonl<SampleRecord>(file);
  assert.equal(records.length, 2);
  const lm = LanguageModel.load(dir); // the untrained policy that sampled all of item 0's tree
  let tokens = 0;
  let cutTexts = 0;
  const walk = (rec: SampleNode, node: TreeNode, scoreWithLm: boolean) => {
    for (const [i, g] of node.groups.entries()) {
      assert.deepEqual(rec.prompt_ids[i], g.promptIds);
      assert.deepEqual(
        rec.completion_ids[i],
        g.completions.map((c) => c.ids),
      );
      for (const [k, c] of g.completions.entries()) {
        assert.equal(rec.logprobs[i][k].length, c.ids.length);
        for (const [j, x] of c.logprobs.entries()) assert.ok(Math.abs(rec.logprobs[i][k][j] - x) <= 5e-7, `logprob ${rec.logprobs[i][k][j]} vs ${x}`);
        if (rec.completions[i][k] !== c.text) cutTexts++;
        tokens += c.ids.length;
      }
      if (scoreWithLm) {
        // replay from the record alone: the recorded ids, scored by the model that sampled them,
        // give back the recorded sampling log-probs
        const batch = rec.completion_ids[i].map((ids) => ({ prompt: rec.prompt_ids[i], completion: ids })).filter((b) => b.completion.length > 0);
        const lp = noGrad(() => completionLogprobs(lm.model, batch));
        const recorded = rec.logprobs[i].filter((l) => l.length > 0).flat();
        assert.equal(lp.tokenLogprobs.size, recorded.length);
        for (let j = 0; j < recorded.length; j++) assert.ok(Math.abs(lp.tokenLogprobs.data[j] - recorded[j]) < 1e-4);
      }
    }
    for (const [k, child] of node.children.entries()) if (child) walk(rec.children[k] as SampleNode, child, scoreWithLm);
  };
  walk(records[0].tree, trees[0], true);
  walk(records[1].tree, trees[1], false);
  assert.ok(tokens > 20, `${tokens} tokens recorded`);
  assert.ok(cutTexts > 0, 'some texts were cut to max_chars while their ids were kept whole');
});
