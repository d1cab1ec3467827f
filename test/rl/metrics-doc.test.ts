/**
 * Every metric name the trainers emit is listed in docs/metrics.md (style brief rule 12): the
 * MAGRPO family, the critic models (MAAC's shared critic, IAC's separate critic) and iterative
 * MADPO / MARLHF (iter/*, drift/*, reward_model/*), each run on a tiny model.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import { MemorySink } from '../../src/rl/metrics.js';
import type { Task } from '../../src/rl/task.js';
import { MAGRPOTrainer, type TrainerOptions } from '../../src/rl/trainer.js';
import { IACTrainer, MAACTrainer, MADPOIterTrainer, MARLHFIterTrainer } from '../../src/rl/trainers.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

type Item = { prompt: string };

/** The names docs/metrics.md lists literally (first column of its tables). */
const literal = new Set([...readFileSync('docs/metrics.md', 'utf8').matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]));

/** A name is documented when its generic form (turn_k, agent_i) is listed, or it matches a documented pattern. */
function documented(name: string): boolean {
  const g = name.replace(/turn_\d+/, 'turn_k').replace(/agent_\d+/, 'agent_i');
  return (
    literal.has(g) || /^turn_k\/reward\/[^/]+$/.test(g) || /^eval\/turn_k\/reward\/[^/]+$/.test(g) || (/^eval\/[^/]+$/.test(g) && !g.startsWith('eval/turn_'))
  );
}

/** Trains `t` to the end and returns every metric name its sink received. */
async function emitted(t: MAGRPOTrainer<Item>, sink: MemorySink): Promise<Set<string>> {
  await t.train();
  await t.close();
  return new Set(sink.entries.flatMap((e) => Object.keys(e.metrics)));
}

function assertDocumented(names: Set<string>, mustInclude: string[]): void {
  for (const n of mustInclude) assert.ok(names.has(n), `the run did not emit "${n}" (got ${[...names].sort().join(', ')})`);
  for (const n of names) assert.ok(documented(n), `metric "${n}" is not documented in docs/metrics.md`);
}

it('docs/metrics.md lists names in its tables, and the check refuses an unlisted one', () => {
  assert.ok(literal.size > 15);
  assert.ok(documented('agent_3/loss') && documented('turn_2/reward/same') && documented('eval/pass@1'));
  assert.ok(!documented('agent_0/no_such_metric') && !documented('iter/no_such_metric') && !documented('eval/turn_1/no_such'));
});

describe('every emitted metric is documented', () => {
  let dir = '';
  before(() => {
    setBackend('native');
    dir = makeTinyModel();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** Distinct joint rewards for distinct joint actions, so preference pairs are rarely tied. */
  const spread = ({ completions }: { completions: readonly string[] }) =>
    completions.reduce((a, c, i) => a + [...c].reduce((s, ch) => s * 31 + ch.charCodeAt(0), 7 + i) / 1000, 0) % 1;
  const train = (o: { sink: MemorySink; dataset?: Item[] }): Omit<TrainerOptions<Item>, 'config'> => ({
    task: { dataset: o.dataset ?? [{ prompt: 'go' }, { prompt: 'go' }], reward: spread },
    model: dir,
    sinks: [o.sink],
  });
  const small: MagrpoConfigInput = {
    num_train_epochs: 1,
    max_new_tokens: 2,
    temperature: 1,
    top_k: null,
    top_p: 1,
    eval_interval: 0,
    logging_steps: 1,
    fluency_metrics: false,
  };

  it('the MAGRPO family (two turns, evaluation, reference KL)', async () => {
    const sink = new MemorySink();
    const task: Task<Item> = {
      dataset: [{ prompt: 'go' }, { prompt: 'go' }],
      evalDataset: [{ prompt: 'go' }],
      reward: [{ name: 'same', weight: 1, fn: ({ completions }) => (completions[0] === completions[1] ? 1 : 0) }],
      transition: ({ completions }) => completions.map((c) => `go ${c}`),
      evalMetrics: () => ({ 'pass@1': 0 }),
    };
    const config: MagrpoConfigInput = {
      num_turns: 2,
      num_generations: 2,
      max_new_tokens: 2,
      num_train_epochs: 1,
      logging_steps: 1,
      eval_interval: 1,
      reference_kl_enabled: true,
      uniform_item_skip_epochs: 1,
      early_termination_threshold: null,
    };
    const names = await emitted(new MAGRPOTrainer({ task, model: dir, sinks: [sink], config }), sink);
    assert.ok(names.size > 15);
    assertDocumented(names, ['turn_1/reward_mean', 'turn_2/reference_kl_mean', 'agent_0/loss', 'eval/turn_1/reward_mean', 'eval/pass@1']);
  });

  it('critic models: maac (shared critic) and iac with a separate critic per agent', async () => {
    const critic = { ...small, num_generations: 2, rollout_buffer_size: 2, critic_learning_rate: 0.01 };
    const maac = new MemorySink();
    assertDocumented(await emitted(new MAACTrainer({ ...train({ sink: maac }), config: critic }), maac), [
      'critic/value_loss',
      'critic/grad_norm',
      'agent_1/loss',
    ]);
    const iac = new MemorySink();
    assertDocumented(await emitted(new IACTrainer({ ...train({ sink: iac }), config: { ...critic, use_separate_critic: true } }), iac), [
      'agent_0/value_loss',
      'agent_1/critic_grad_norm',
    ]);
  });

  it('iterative MADPO and iterative MARLHF: iter/*, drift/*, preference/*, reward_model/*', async () => {
    const dataset = Array.from({ length: 3 }, () => ({ prompt: 'go' }));
    const iterative = { num_iterations: 2, preference_num_candidates: 4, comparator_policy: 'current_copy' as const, drift_probe_items: 1 };
    const madpo = new MemorySink();
    const dpo: MagrpoConfigInput = { ...small, algorithm: 'madpo', iterative, train_batch_size: 4, agent_learning_rate: 0.02 };
    assertDocumented(await emitted(new MADPOIterTrainer({ ...train({ sink: madpo, dataset }), config: dpo }), madpo), [
      'iter/current_iteration',
      'iter/current_preference_pairs',
      'iter/total_preference_pairs',
      'iter/train_preference_pairs',
      'drift/agent_0/logratio_prev',
      'drift/agent_1/logratio_initial',
      'preference/accuracy',
      'preference/margin',
      'agent_0/loss',
    ]);
    const marlhf = new MemorySink();
    const rlhf: MagrpoConfigInput = {
      ...small,
      iterative: { ...iterative, reward_learning_rate: 0.01, reward_train_batch_size: 2 },
      num_generations: 2,
      rollout_buffer_size: 1,
      agent_learning_rate: 0.01,
    };
    assertDocumented(await emitted(new MARLHFIterTrainer({ ...train({ sink: marlhf, dataset }), config: rlhf }), marlhf), [
      'iter/current_iteration',
      'reward_model/loss',
      'reward_model/accuracy',
      'reward_model/margin',
      'drift/agent_1/logratio_prev',
      'turn_1/reward_mean',
    ]);
  });
});
