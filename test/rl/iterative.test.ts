/**
 * Iterative MADPO / MARLHF (rl/iterative.ts) on tiny models: the trainer.iterative keys and their
 * refusals; end to end per comparator policy (current_copy, history, model, api against `magrpo
 * serve` started in-process), each iteration's pairs, replay, DPO steps and drift logged; a run
 * stopped after its first iteration and resumed ends with the weights of an uninterrupted run;
 * iterative MARLHF retrains a reward model per iteration and runs the online algorithm on it.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { resolveCheckpoint } from '../../src/rl/checkpoint.js';
import { type MagrpoConfigInput, resolveConfig } from '../../src/rl/config.js';
import { IterativePreferenceTrainer } from '../../src/rl/iterative.js';
import { meanLogRatio } from '../../src/rl/iterative-preference.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { createTrainer, MADPOIterTrainer, MARLHFIterTrainer } from '../../src/rl/trainers.js';
import { type ModelServer, startServer } from '../../src/serve/server.js';
import { configProblems as problems } from '../helpers/config-problems.js';
import { makeTinyModel } from '../helpers/tiny-model.js';
import { agentWeights, assertResumedSame, ONE_TOKEN, sayA } from '../helpers/tiny-run.js';

describe('trainer.iterative keys', () => {
  it('{} takes the reference defaults; the iterative configs pass fewer epochs', () => {
    const c = resolveConfig({ algorithm: 'madpo', iterative: {} });
    assert.equal(c.iterative?.num_iterations, 6);
    assert.equal(c.iterative?.comparator_policy, 'current');
    assert.equal(c.iterative?.preference_replay_mode, 'current');
    assert.equal(c.iterative?.preference_num_candidates, 20);
    assert.equal(c.iterative?.preference_pairs_per_sample, 4);
    assert.equal(c.iterative?.pair_selection, 'comparator_reward');
    assert.equal(c.num_train_epochs, 1, 'MADPOIterConfig');
    assert.equal(resolveConfig({ iterative: {} }).num_train_epochs, 2, 'MARLHFIterConfig');
    assert.equal(resolveConfig({ iterative: {} }).iterative?.reward_num_train_epochs, 2);
    assert.equal(resolveConfig({}).iterative, null);
  });

  it('refusals name the key', () => {
    assert.match(
      problems({ algorithm: 'centralized_magrpo', num_agents: 1, iterative: {} }).join('\n'),
      /iterative: iterative runs are MADPO .* not centralized_magrpo/,
    );
    assert.match(problems({ iterative: { preference_replay_mode: 'nearest_k' } }).join('\n'), /iterative\.preference_replay_k: .* needs k/);
    assert.match(problems({ iterative: { preference_replay_mode: 'lambda_decay' } }).join('\n'), /iterative\.preference_replay_lambda: .* needs λ/);
    assert.match(problems({ iterative: { preference_replay_sample_size: 3 } }).join('\n'), /iterative\.preference_replay_sample_size: replay mode current/);
    assert.match(problems({ iterative: { comparator_policy: 'api' } }).join('\n'), /iterative\.comparator_api_url: /);
    for (const format of ['anthropic', 'openai_responses'])
      assert.match(
        problems({ iterative: { comparator_policy: 'api', comparator_api_url: 'http://127.0.0.1:1/v1/x', comparator_api_format: format } }).join('\n'),
        new RegExp(`iterative\\.comparator_api_model: comparator_api_format ${format} needs the model`),
      );
    assert.match(problems({ iterative: { comparator_policy: 'model' } }).join('\n'), /iterative\.comparator_policy: comparator_policy model needs/);
    assert.match(problems({ iterative: { comparator_history_k: 2 } }).join('\n'), /iterative\.comparator_history_k: only read with comparator_policy history/);
    assert.match(
      problems({ iterative: { comparator_policy: 'history' }, lora: { r: 2, alpha: 4, target_modules: ['q_proj'] } }).join('\n'),
      /lora: comparator_policy history/,
    );
    assert.match(
      problems({ algorithm: 'madpo', iterative: {}, preference_num_candidates: 6 }).join('\n'),
      /preference_num_candidates: iterative MADPO reads iterative\.preference_num_candidates/,
    );
    assert.match(problems({ iterative: {}, reward_model: 'rm' }).join('\n'), /reward_model: iterative MARLHF trains its reward model/);
    assert.match(problems({ iterative: {}, save_steps: 2 }).join('\n'), /save_steps: /);
    assert.match(problems({ iterative: { comparator_polcy: 'api' } }).join('\n'), /comparator_polcy/);
    assert.equal(resolveConfig({ iterative: { preference_replay_mode: 'nearest_k', preference_replay_k: 2 } }).iterative?.preference_replay_k, 2);
  });

  it('drift: the mean per-token log-ratio, empty completions skipped', () => {
    assert.equal(meanLogRatio([2, 0, 4], [-1, 0, -2], [-3, 5, -4]), (2 / 2 + 2 / 4) / 2);
    assert.equal(meanLogRatio([0], [1], [0]), 0);
  });
});

describe('iterative MADPO / MARLHF end to end (tiny models)', () => {
  let base = '';
  let other = '';
  let server: ModelServer;
  before(async () => {
    setBackend('native');
    base = makeTinyModel({ seed: 3 });
    other = makeTinyModel({ seed: 9 });
    server = await startServer({ lm: LanguageModel.load(other), modelName: 'cmp', host: '127.0.0.1', port: 0, apiKey: 'key', maxBatch: 8, seed: 1 });
  });
  after(async () => {
    await server?.close();
    rmSync(base, { recursive: true, force: true });
    rmSync(other, { recursive: true, force: true });
  });
  /** Both agents saying "a" scores 1, one of them 0.5. */
  const task = sayA(3);
  const config = (iterative: Record<string, unknown>, over: MagrpoConfigInput = {}): MagrpoConfigInput => ({
    algorithm: 'madpo',
    iterative: { num_iterations: 3, preference_num_candidates: 6, preference_pairs_per_sample: 3, drift_probe_items: 2, ...iterative },
    dpo_beta: 0.5,
    ...ONE_TOKEN,
    train_batch_size: 2,
    agent_learning_rate: 0.02,
    ...over,
  });
  const weights = agentWeights;

  async function run(iterative: Record<string, unknown>, over: MagrpoConfigInput = {}) {
    const sink = new MemorySink();
    const t = new MADPOIterTrainer({ task, model: base, sinks: [sink], config: config(iterative, over) });
    const before = weights(t, 0);
    await t.train();
    const after = weights(t, 0);
    const changed = [...before].some(([k, v]) => !after.get(k)?.every((x, j) => x === v[j]));
    return { t, sink, changed };
  }

  for (const policy of ['current_copy', 'history', 'model'] as const) {
    it(`comparator ${policy}: pairs every iteration, DPO steps on them, drift logged`, async () => {
      const extra = policy === 'model' ? { comparator_model_name: other } : policy === 'history' ? { comparator_history_k: 1 } : {};
      const { t, sink, changed } = await run({ comparator_policy: policy, ...extra });
      assert.deepEqual(
        sink.series('iter/current_iteration').map((p) => p.value),
        [1, 2, 3],
      );
      const current = sink.series('iter/current_preference_pairs').map((p) => p.value);
      assert.ok(
        current.every((n) => n <= 3 * 3),
        `${current}`,
      );
      const trained = sink.series('iter/train_preference_pairs').map((p) => p.value);
      assert.deepEqual(trained, current, 'replay mode current trains on each iteration’s own pairs');
      const steps = trained.reduce((a, n) => a + Math.ceil(n / 2), 0);
      assert.ok(steps > 0, 'some pair was not tied');
      assert.equal(sink.series('agent_0/loss').length, steps, 'one step per minibatch of 2, one epoch per iteration');
      assert.ok(changed, 'the team was trained');
      const drift = sink.series('drift/agent_0/logratio_initial').map((p) => p.value);
      assert.equal(drift.length, 3);
      assert.ok(
        drift.some((d) => d !== 0),
        `drift ${drift}`,
      );
      await t.close();
    });
  }

  it('comparator api: candidates from magrpo serve, in requests of max_n', async () => {
    process.env.MAGRPO_TEST_COMPARATOR_KEY = 'key';
    const realFetch = globalThis.fetch;
    const bodies: { n: number; prompt: unknown }[] = [];
    globalThis.fetch = (input, init) => {
      bodies.push(JSON.parse(String(init?.body)));
      return realFetch(input, init);
    };
    try {
      const { t, sink, changed } = await run({
        num_iterations: 2,
        comparator_policy: 'api',
        comparator_api_url: `${server.url}/v1/completions`,
        comparator_api_format: 'openai_completions',
        comparator_api_model: 'cmp',
        comparator_api_max_n_per_request: 4,
        comparator_api_key_env: 'MAGRPO_TEST_COMPARATOR_KEY',
      });
      // 2 iterations × 3 items × 2 agents, C' = 6 in requests of 4 and 2
      assert.equal(bodies.length, 2 * 3 * 2 * 2);
      assert.deepEqual(
        bodies.slice(0, 2).map((b) => b.n),
        [4, 2],
      );
      assert.equal(bodies[0].prompt, 'go');
      assert.ok(sink.series('iter/current_preference_pairs').some((p) => p.value > 0));
      assert.ok(changed);
      await t.close();
    } finally {
      globalThis.fetch = realFetch;
      delete process.env.MAGRPO_TEST_COMPARATOR_KEY;
    }
  });

  it('centralized comparator generation: one joint request per candidate batch, each answer split per agent', async () => {
    const realFetch = globalThis.fetch;
    const prompts: string[] = [];
    // A comparator API that answers every second candidate in <agent_i> sections ("a" for both
    // agents: reward 1) and the others untagged (every agent "": reward 0).
    globalThis.fetch = async (_input, init) => {
      const body = JSON.parse(String(init?.body));
      prompts.push(body.prompt);
      const choices = Array.from({ length: body.n }, (_, k) => ({ index: k, text: k % 2 === 0 ? '<agent_0>a</agent_0>\n<agent_1> a </agent_1>' : 'no tags' }));
      return new Response(JSON.stringify({ choices }), { status: 200, headers: { 'Content-Type': 'application/json' } });
    };
    const out = mkdtempSync(join(tmpdir(), 'iter-central-'));
    try {
      const { t, sink } = await run(
        {
          num_iterations: 2,
          comparator_policy: 'api',
          comparator_generation_mode: 'centralized',
          comparator_centralized_agent_index: 1,
          comparator_api_url: 'http://127.0.0.1:9/v1/completions',
          comparator_api_format: 'openai_completions',
          comparator_api_max_n_per_request: 4,
        },
        { output_dir: out, report_to: 'none' },
      );
      // 2 iterations × 3 items, C' = 6 in requests of 4 and 2: one joint prompt per item, not one per agent
      assert.equal(prompts.length, 2 * 3 * 2);
      assert.match(prompts[0], /Agent 0 original prompt:\ngo[\s\S]*Agent 1 original prompt:\ngo[\s\S]*<agent_1>/);
      assert.ok(sink.series('iter/current_preference_pairs').some((p) => p.value > 0));
      const state = JSON.parse(readFileSync(join(resolveCheckpoint(out), 'trainer_state.json'), 'utf8'));
      const pairs = state.iterative.store.flat() as { chosen: { text: string }[]; rejected: { text: string }[] }[];
      const texts = pairs.flatMap((p) => [p.chosen, p.rejected]).map((side) => side.map((x) => x.text).join('|'));
      assert.ok(texts.includes('a|a'), 'a tagged answer split into each agent’s output');
      assert.ok(texts.includes('|'), 'an untagged answer gives every agent ""');
      await t.close();
    } finally {
      globalThis.fetch = realFetch;
      rmSync(out, { recursive: true, force: true });
    }
    assert.match(
      problems({ iterative: { comparator_generation_mode: 'centralized', comparator_centralized_agent_index: 2 } }).join('\n'),
      /iterative\.comparator_centralized_agent_index: 2 is not an agent of 2/,
    );
  });

  it('history snapshots: the starting team and every iteration under output_dir/policy_checkpoints', async () => {
    const out = mkdtempSync(join(tmpdir(), 'iter-hist-'));
    try {
      const { t } = await run({ comparator_policy: 'history', comparator_history_k: 1 }, { output_dir: out, report_to: 'none' });
      for (const name of ['initial', 'iteration_0000', 'iteration_0001', 'iteration_0002'])
        assert.ok(existsSync(join(out, 'policy_checkpoints', name, 'agent_1')), name);
      await t.close();
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('a run stopped after iteration 1 and resumed ends with the weights of an uninterrupted one; the checkpoint holds the pairs', async () => {
    const [a, b] = [mkdtempSync(join(tmpdir(), 'iter-')), mkdtempSync(join(tmpdir(), 'iter-'))];
    const iterative = { comparator_policy: 'current', preference_replay_mode: 'all_history' };
    try {
      const full = new MADPOIterTrainer({ task, model: base, config: config(iterative, { output_dir: a, report_to: 'none' }) });
      await full.train();
      const first = new MADPOIterTrainer({ task, model: base, config: config(iterative, { output_dir: b, report_to: 'none' }) });
      await first.train({ maxIterations: 1 });
      await first.close();
      const state = JSON.parse(readFileSync(join(resolveCheckpoint(b), 'trainer_state.json'), 'utf8'));
      assert.equal(state.iterative.iteration, 1);
      assert.equal(state.iterative.store.length, 1);
      assert.ok(state.iterative.probe.samples[0].length === 2, 'drift probe of 2 items');
      const resumed = createTrainer({ task, model: base, config: config(iterative, { output_dir: b, report_to: 'none' }) });
      assert.ok(resumed instanceof IterativePreferenceTrainer, 'createTrainer picks the iterative trainer');
      await resumed.train({ resumeFrom: b });
      await assertResumedSame(full, resumed);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });

  it('iterative MARLHF: a reward model per iteration, then the online algorithm on its reward', async () => {
    const sink = new MemorySink();
    const t = new MARLHFIterTrainer({
      task,
      model: base,
      sinks: [sink],
      config: {
        iterative: {
          num_iterations: 2,
          preference_num_candidates: 6,
          comparator_policy: 'current_copy',
          reward_learning_rate: 0.01,
          reward_train_batch_size: 2,
        },
        num_train_epochs: 1,
        num_generations: 4,
        ...ONE_TOKEN,
        rollout_buffer_size: 1,
        agent_learning_rate: 0.01,
      },
    });
    assert.equal(t.config.algorithm, 'magrpo');
    const before = weights(t, 0);
    await t.train();
    assert.equal(sink.series('reward_model/loss').length, 2, 'one reward model per iteration');
    // The RL phase logs rewards as the reward model scores them: not the task's 0 / 0.5 / 1.
    const rewards = sink.series('turn_1/reward_mean').map((p) => p.value);
    assert.equal(rewards.length, 2 * 3, 'one log entry per item, 3 items per iteration');
    assert.ok(
      rewards.some((r) => ![0, 0.5, 1, 0.25, 0.75].includes(r)),
      `${rewards}`,
    );
    const after = weights(t, 0);
    assert.ok([...before].some(([k, v]) => !after.get(k)?.every((x, j) => x === v[j])));
    await t.close();
    assert.throws(() => new MARLHFIterTrainer({ task, model: base, config: { algorithm: 'madpo' } }), /MARLHFIterTrainer runs an online algorithm/);
  });
});
