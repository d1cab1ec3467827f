/** Every metric name the trainer emits is listed in docs/metrics.md (style brief rule 12). */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { after, before, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

let dir = '';
before(() => {
  setBackend('native');
  dir = makeTinyModel();
});
after(() => rmSync(dir, { recursive: true, force: true }));

it('documents every emitted metric', async () => {
  const doc = readFileSync('docs/metrics.md', 'utf8');
  const literal = new Set([...doc.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]));
  const sink = new MemorySink();
  const t = new MAGRPOTrainer({
    task: {
      dataset: [{ prompt: 'go' }, { prompt: 'go' }],
      evalDataset: [{ prompt: 'go' }],
      reward: [{ name: 'same', weight: 1, fn: ({ completions }) => (completions[0] === completions[1] ? 1 : 0) }],
      transition: ({ completions }) => completions.map((c) => `go ${c}`),
      evalMetrics: () => ({ 'pass@1': 0 }),
    },
    model: dir,
    sinks: [sink],
    config: {
      num_turns: 2,
      num_generations: 2,
      max_new_tokens: 2,
      num_train_epochs: 1,
      logging_steps: 1,
      eval_interval: 1,
      reference_kl_enabled: true,
      uniform_item_skip_epochs: 1,
      early_termination_threshold: null,
    },
  });
  await t.train();
  await t.close();
  const names = new Set(sink.entries.flatMap((e) => Object.keys(e.metrics)));
  assert.ok(names.size > 15);
  const generic = (n: string) => n.replace(/turn_\d+/, 'turn_k').replace(/agent_\d+/, 'agent_i');
  for (const n of names) {
    const g = generic(n);
    const ok =
      literal.has(g) ||
      /^turn_k\/reward\/[^/]+$/.test(g) ||
      /^eval\/turn_k\/reward\/[^/]+$/.test(g) ||
      (/^eval\/[^/]+$/.test(g) && !g.startsWith('eval/turn_'));
    assert.ok(ok, `metric "${n}" is not documented in docs/metrics.md`);
  }
  assert.ok(literal.size > 15);
});
