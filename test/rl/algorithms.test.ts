/**
 * The algorithm interface (src/rl/algorithms/): selection by `trainer.algorithm`, each algorithm's
 * keys, defaults and refusals, MADPO's pair selection, and MADPO end to end on a tiny model
 * (its numerics against PyTorch are in trainer-pytorch.test.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { readSafetensors } from '../../src/model/safetensors.js';
import { VALUE_HEAD_FILE } from '../../src/model/value-head.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import { centralTask, splitRoles, TAGGED_ADAPTER } from '../../src/rl/algorithms/centralized.js';
import { normalizeAdvantages } from '../../src/rl/algorithms/iac.js';
import { selectPairs } from '../../src/rl/algorithms/madpo.js';
import { resolveCheckpoint } from '../../src/rl/checkpoint.js';
import { ConfigError, type MagrpoConfigInput, resolveConfig } from '../../src/rl/config.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { type CentralAdapter, formattersFor, type Task } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { IACTrainer, MADPOTrainer } from '../../src/rl/trainers.js';
import { configProblems as problems } from '../helpers/config-problems.js';
import { assertResumedSame, mean, ONE_TOKEN, SAY_A_RUN, sameWord, sayA, useTinyModel } from '../helpers/tiny-run.js';

describe('trainer.algorithm: keys, defaults, refusals', () => {
  it('magrpo is the default; the family members fix their baseline and default to no normalisation', () => {
    assert.equal(resolveConfig({}).algorithm, 'magrpo');
    for (const [algorithm, mode] of [
      ['mareinforce', 'raw'],
      ['marloo', 'rloo'],
      ['maremax', 'max'],
    ] as const) {
      const c = resolveConfig({ algorithm });
      assert.equal(c.advantage_mode, mode, algorithm);
      assert.equal(c.advantage_normalization, false, algorithm);
      // the reference's setting stays available
      assert.equal(resolveConfig({ algorithm, advantage_normalization: true }).advantage_normalization, true);
    }
    assert.deepEqual(problems({ algorithm: 'marloo', advantage_mode: 'mean' }), [
      'advantage_mode: algorithm marloo is advantage_mode rloo, got mean; for another baseline use algorithm magrpo',
    ]);
  });

  it('madpo: the reference defaults, num_generations follows the candidates, and a resolved config reloads', () => {
    const c = resolveConfig({ algorithm: 'madpo' });
    assert.equal(c.preference_num_candidates, 80);
    assert.equal(c.num_generations, 80);
    assert.equal(c.preference_pairs_per_sample, 16);
    assert.equal(c.pair_selection, 'reward_gap');
    assert.equal(c.dpo_beta, 0.1);
    assert.equal(c.reference_free, false);
    assert.equal(resolveConfig({ algorithm: 'madpo', preference_num_candidates: 6 }).num_generations, 6);
    // run directories keep the resolved config, every key listed: it must load again
    assert.deepEqual(resolveConfig(c), c);
    assert.deepEqual(resolveConfig(resolveConfig({ algorithm: 'maremax' })), resolveConfig({ algorithm: 'maremax' }));
  });

  it("another algorithm's keys, and what madpo cannot do, are errors naming the key", () => {
    assert.deepEqual(problems({ dpo_beta: 0.5 }), ["dpo_beta: a key of algorithm madpo; this run's algorithm is magrpo"]);
    assert.deepEqual(problems({ algorithm: 'madpo', ppo_clip_eps: 0.2 }), [
      "ppo_clip_eps: a key of algorithm magrpo / mareinforce / marloo / maremax / centralized_magrpo; this run's algorithm is madpo",
    ]);
    assert.deepEqual(problems({ algorithm: 'madpo', num_turns: 2 }), ['num_turns: madpo is single-turn (num_turns 1), got 2']);
    assert.deepEqual(problems({ algorithm: 'madpo', pair_selection: 'all' }), [
      'preference_pairs_per_sample: pair_selection all keeps every pair: set preference_pairs_per_sample to null',
    ]);
    assert.equal(resolveConfig({ algorithm: 'madpo', pair_selection: 'all', preference_pairs_per_sample: null }).pair_selection, 'all');
    assert.match(problems({ algorithm: 'madpo', num_generations: 4 })[0], /^num_generations: madpo samples preference_num_candidates \(80\)/);
    assert.match(problems({ algorithm: 'madpo', joint_mode: 'cross' })[0], /^joint_mode: madpo pairs aligned joint actions/);
    assert.match(problems({ algorithm: 'madpo', lr_scheduler: 'cosine' })[0], /^lr_scheduler: /);
    assert.equal(resolveConfig({ algorithm: 'madpo', learner: { backend: 'torch' } }).learner.backend, 'torch');
    assert.match(problems({ algorithm: 'dpo' })[0], /^algorithm: got "dpo", expected one of "magrpo", .*"madpo"/);
  });
});

describe('MADPO pair selection (CoMLRL _select_preference_pair_indices)', () => {
  const rewards = [0.2, 0.9, 0.5, 0.5];
  const rng = () => new Rng(7);
  it('reward_gap: largest gap first, ties in candidate order, capped; equal rewards give no pair', () => {
    assert.deepEqual(selectPairs(rewards, 'reward_gap', 4, rng()), [
      [1, 0],
      [1, 2],
      [1, 3],
      [2, 0],
    ]);
    assert.deepEqual(selectPairs([0.3, 0.3, 0.3], 'reward_gap', null, rng()), []);
  });
  it('all: every ordered pair with r_w > r_l, in candidate order', () => {
    assert.deepEqual(selectPairs(rewards, 'all', null, rng()), [
      [1, 0],
      [1, 2],
      [1, 3],
      [2, 0],
      [3, 0],
    ]);
  });
  it('random: `limit` of those pairs, chosen by the RNG', () => {
    const all = selectPairs(rewards, 'all', null, rng()).map(String);
    const picks = [1, 2, 3, 4, 5].map((seed) => selectPairs(rewards, 'random', 2, new Rng(seed)).map(String));
    for (const p of picks) {
      assert.equal(p.length, 2);
      for (const pair of p) assert.ok(all.includes(pair), pair);
    }
    assert.ok(new Set(picks.map((p) => p.join(' '))).size > 1, 'different seeds choose differently');
  });
});

describe('MADPO end to end (tiny model, native backend)', () => {
  type Item = { prompt: string };
  const tiny = useTinyModel({ seed: 3 });
  /** Coordination: the team scores 1 when both agents say the same non-empty word. */
  const task = sameWord(6);
  const config: MagrpoConfigInput = {
    algorithm: 'madpo',
    preference_num_candidates: 8,
    preference_pairs_per_sample: 4,
    dpo_beta: 0.5,
    ...ONE_TOKEN,
    train_batch_size: 4,
    agent_learning_rate: 0.02,
    num_train_epochs: 3,
  };

  it('pairs come from every item first, then the team learns to prefer the winners', async () => {
    const sink = new MemorySink();
    const t = new MAGRPOTrainer({ task, model: tiny.dir, sinks: [sink], config });
    assert.equal(t.totalItems, 6, 'offline: each item is rolled out once, whatever num_train_epochs');
    await t.train();
    const pairs = (t as unknown as { buffers: unknown[][] }).buffers[0].length;
    assert.ok(pairs > 0 && pairs <= 6 * 4, `${pairs} pairs`);
    const steps = Math.ceil(pairs / 4) * 3;
    assert.equal(sink.series('agent_0/loss').length, steps, 'one optimizer step per batch per epoch');
    assert.equal(sink.series('agent_1/loss').length, steps);
    const margin = sink.series('preference/margin').map((p) => p.value);
    const accuracy = sink.series('preference/accuracy').map((p) => p.value);
    // the policies start as the reference: every joint log-ratio is 0
    assert.ok(Math.abs(margin[0]) < 1e-4, `first margin ${margin[0]}`);
    assert.ok(margin[margin.length - 1] > 0.5, `margin ${margin[0]} → ${margin[margin.length - 1]}`);
    assert.equal(accuracy[accuracy.length - 1], 1, 'every pair ranked right after training');
    const loss = sink.series('agent_0/loss').map((p) => p.value);
    assert.ok(Math.abs(loss[0] - Math.LN2) < 1e-4, `first loss ${loss[0]} is log 2`);
    await t.close();
  });

  it('a run stopped mid-pass and resumed redraws the same order and ends with the same weights', async () => {
    const [a, b] = [mkdtempSync(join(tmpdir(), 'madpo-')), mkdtempSync(join(tmpdir(), 'madpo-'))];
    try {
      const full = new MAGRPOTrainer({ task, model: tiny.dir, config: { ...config, output_dir: a } });
      await full.train();
      let steps = 0;
      const first: MAGRPOTrainer<Item> = new MAGRPOTrainer({
        task,
        model: tiny.dir,
        config: { ...config, output_dir: b },
        callbacks: [{ onLog: ({ metrics }) => void ('agent_0/loss' in metrics && ++steps === 2 && first.requestStop()) }],
      });
      await first.train();
      await first.close();
      const state = JSON.parse(readFileSync(join(resolveCheckpoint(b), 'trainer_state.json'), 'utf8'));
      assert.deepEqual([state.epoch, state.index], [0, 6 + 2], 'stopped after two minibatches of the first pass');
      const resumed = new MAGRPOTrainer({ task, model: tiny.dir, config: { ...config, output_dir: b } });
      await resumed.train({ resumeFrom: b });
      await assertResumedSame(full, resumed);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });

  it("the reference library's class names: MADPOTrainer is MAGRPOTrainer with algorithm madpo", async () => {
    const t = new MADPOTrainer({ task, model: tiny.dir, config });
    assert.ok(t instanceof MAGRPOTrainer);
    assert.equal(t.config.algorithm, 'madpo');
    assert.equal(t.algorithm.schedule, 'offline');
    await t.close();
    assert.throws(
      () => new MADPOTrainer({ task, model: tiny.dir, config: { ...config, algorithm: 'magrpo' } }),
      (e: unknown) =>
        e instanceof ConfigError && /^algorithm: MADPOTrainer trains with algorithm madpo, got "magrpo"/.test(`${e.issues[0].path}: ${e.issues[0].message}`),
    );
  });

  it('mp mode: the team log-ratios cross worker threads and training matches in-process', async () => {
    const small = { ...task, dataset: task.dataset.slice(0, 3) };
    const [a, b] = [mkdtempSync(join(tmpdir(), 'madpo-')), mkdtempSync(join(tmpdir(), 'madpo-'))];
    try {
      const local = new MAGRPOTrainer({ task: small, model: tiny.dir, config: { ...config, num_train_epochs: 1, output_dir: a } });
      await local.train();
      const mp = new MAGRPOTrainer({ task: small, model: tiny.dir, config: { ...config, num_train_epochs: 1, output_dir: b, parallel_training: 'mp' } });
      await mp.train();
      for (const agent of ['agent_0', 'agent_1']) {
        const wa = readFileSync(join(a, 'final', agent, 'model', 'model.safetensors'));
        const wb = readFileSync(join(b, 'final', agent, 'model', 'model.safetensors'));
        assert.ok(wa.equals(wb), `${agent}: same weights from workers as in-process`);
      }
      await local.close();
      await mp.close();
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });

  it('a run stopped after its first epoch and resumed ends with the same weights; the checkpoint holds the pairs', async () => {
    const [a, b] = [mkdtempSync(join(tmpdir(), 'madpo-')), mkdtempSync(join(tmpdir(), 'madpo-'))];
    try {
      const full = new MAGRPOTrainer({ task, model: tiny.dir, config: { ...config, output_dir: a } });
      await full.train();
      let saves = 0;
      const first: MAGRPOTrainer<Item> = new MAGRPOTrainer({
        task,
        model: tiny.dir,
        config: { ...config, output_dir: b },
        // checkpoints: after the last item, then after each epoch; stop once the first epoch is saved
        callbacks: [{ onSave: () => void (++saves === 2 && first.requestStop()) }],
      });
      await first.train();
      await first.close();
      const state = JSON.parse(readFileSync(join(resolveCheckpoint(b), 'trainer_state.json'), 'utf8'));
      assert.equal(state.epoch, 1, 'stopped before the second epoch');
      assert.ok(state.buffers[0].length > 0 && state.buffers[0][0].loss.preference, 'the pairs are saved');
      const resumed = new MAGRPOTrainer({ task, model: tiny.dir, config: { ...config, output_dir: b } });
      await resumed.train({ resumeFrom: b });
      await assertResumedSame(full, resumed);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});

describe('centralized MAGRPO: one joint policy for every role', () => {
  type Item = { prompt: string };
  const tiny = useTinyModel({ seed: 4 });

  it("the tagged adapter writes CoMLRL's prompt and parses its sections", () => {
    assert.equal(
      TAGGED_ADAPTER.buildPrompt({}, ['Summarise.', 'Expand.']),
      `You are a centralized coordinator producing the separate outputs of 2 agents.

Each output must satisfy its corresponding original prompt. Keep the outputs separate;
do not merge them or add commentary outside the required tags.

Agent 0 original prompt:
Summarise.

Agent 1 original prompt:
Expand.

Return exactly one section for each agent in this format:
<agent_0>
...
</agent_0>
<agent_1>
...
</agent_1>
`,
    );
    assert.deepEqual(splitRoles(TAGGED_ADAPTER, 'x <agent_1> b\n</agent_1> <AGENT_0 >a</ agent_0>', {}, 2), ['a', 'b']);
    assert.deepEqual(splitRoles(TAGGED_ADAPTER, '<agent_0>only</agent_0>', {}, 2), ['only', '']);
    assert.deepEqual(splitRoles(TAGGED_ADAPTER, 'no sections', {}, 2), ['', '']);
    assert.throws(
      () => splitRoles({ buildPrompt: () => '', parseCompletion: () => ['one'] }, 'x', {}, 2),
      /centralAdapter: parseCompletion must return 2 strings/,
    );
  });

  it('roles prompted with chat messages give a joint prompt in the user turn; rewards see the roles', async () => {
    const got: unknown[] = [];
    const { task, roleOutputs } = centralTask<{ prompt: string }>(
      {
        dataset: [{ prompt: 'p' }],
        formatters: [() => [{ role: 'user', content: 'one' }], () => [{ role: 'user', content: 'two' }]],
        reward: (input) => {
          got.push(input.completions, input.prompts);
          return 1;
        },
      },
      2,
    );
    const joint = formattersFor(task, 1)[0]({ prompt: 'p' });
    assert.deepEqual(joint, [{ role: 'user', content: TAGGED_ADAPTER.buildPrompt({}, ['one', 'two']) }]);
    await (task.reward as (i: unknown) => unknown)({
      completions: ['<agent_0>a</agent_0><agent_1>b</agent_1>'],
      prompts: ['x'],
      item: { prompt: 'p' },
      turn: 0,
    });
    assert.deepEqual(got, [
      ['a', 'b'],
      ['one', 'two'],
    ]);
    assert.deepEqual(roleOutputs(['<agent_1>z</agent_1>'], { prompt: 'p' }), ['', 'z']);
  });

  it('config: one model, single turn; num_roles is its key', () => {
    assert.deepEqual(problems({ algorithm: 'centralized_magrpo', num_agents: 1, num_turns: 2 }), [
      'num_turns: centralized_magrpo is single-turn (num_turns 1), got 2',
    ]);
    assert.match(problems({ algorithm: 'centralized_magrpo' })[0], /^num_agents: centralized_magrpo trains one joint policy: set num_agents 1/);
    assert.deepEqual(problems({ num_roles: 2 }), ["num_roles: a key of algorithm centralized_magrpo; this run's algorithm is magrpo"]);
    assert.equal(resolveConfig({ algorithm: 'centralized_magrpo', num_agents: 1, advantage_mode: 'rloo' }).advantage_mode, 'rloo');
  });

  // Roles split the joint completion by words: role 0 the first word, role 1 the second.
  const words: CentralAdapter<Item> = {
    buildPrompt: (item, prompts) => `${item.prompt}: ${prompts.join(' / ')}`,
    parseCompletion: (c) => {
      const w = c.trim().split(/\s+/);
      return [w[0] ?? '', w[1] ?? ''];
    },
  };
  const roleReward = ({ completions }: { completions: readonly string[] }) => (completions[0] !== '' && completions[0] === completions[1] ? 1 : 0);
  const seen: number[] = [];
  const roles: Task<Item> = {
    dataset: Array.from({ length: 24 }, () => ({ prompt: 'go' })),
    evalDataset: [{ prompt: 'go' }],
    formatters: [() => 'a', () => 'b'],
    reward: roleReward,
    centralAdapter: words,
    evalMetrics: (episodes) => {
      seen.push(...episodes.map((e) => e.turns[0].completions.length));
      return {};
    },
  };
  const config: MagrpoConfigInput = {
    num_agents: 1,
    num_generations: 8,
    max_new_tokens: 2,
    temperature: 1,
    top_k: null,
    top_p: 1,
    eval_interval: 12,
    eval_num_samples: 1,
    logging_steps: 1,
    rollout_buffer_size: 1,
    agent_learning_rate: 0.03,
    num_train_epochs: 1,
    early_termination_threshold: null,
  };

  it('is MAGRPO with one agent on the joint task: the same run as GRPO on it written by hand, and it learns', async () => {
    const sink = new MemorySink();
    const central = new MAGRPOTrainer({ task: roles, model: tiny.dir, sinks: [sink], config: { ...config, algorithm: 'centralized_magrpo' } });
    await central.train();
    const joint: Task<Item> = {
      ...roles,
      formatters: (item) => words.buildPrompt(item, ['a', 'b']),
      reward: ({ completions }) => roleReward({ completions: words.parseCompletion(completions[0], { prompt: 'go' }, 2) as string[] }),
      evalMetrics: undefined,
    };
    const grpo = new MAGRPOTrainer({ task: joint, model: tiny.dir, config });
    await grpo.train();
    const w = (t: MAGRPOTrainer<Item>) => (t.agents[0] as LocalAgent).agent.lm.model.params;
    for (const [k, p] of w(grpo)) assert.deepEqual(w(central).get(k)?.data, p.data, k);
    assert.deepEqual(seen, [2, 2, 2], 'eval metrics (items 0, 12 and the end) see one output per role');
    const r = sink.series('turn_1/reward_mean').map((p) => p.value);
    assert.ok(mean(r.slice(-6)) > mean(r.slice(0, 6)) + 0.3, `reward ${mean(r.slice(0, 6))} → ${mean(r.slice(-6))}`);
    await central.close();
    await grpo.close();
  });
});

describe('IAC: independent actor-critic with a value head per agent', () => {
  it("the reference's IACConfig defaults, and what iac cannot do, as errors naming the key", () => {
    const c = resolveConfig({ algorithm: 'iac' });
    assert.deepEqual([c.num_generations, c.rollout_buffer_size, c.num_train_epochs, c.agent_learning_rate, c.advantage_normalization], [1, 8, 40, 5e-6, true]);
    assert.deepEqual([c.use_separate_critic, c.critic_type, c.value_clip_range, c.value_loss_coef, c.critic_learning_rate], [false, 'v', 0.2, 0.6, null]);
    assert.deepEqual(resolveConfig(c), c);
    assert.equal(resolveConfig({ algorithm: 'iac', num_generations: 4 }).num_generations, 4);
    assert.deepEqual(
      problems({ algorithm: 'iac', num_turns: 2, num_generations: 2 }).map((p) => p.split(':')[0]),
      ['num_generations'],
    );
    assert.equal(resolveConfig({ algorithm: 'iac', num_turns: 2 }).num_generations, 1);
    assert.equal(resolveConfig({ algorithm: 'iac', use_separate_critic: true }).use_separate_critic, true);
    assert.match(problems({ algorithm: 'iac', critic_learning_rate: 1e-5 })[0], /^critic_learning_rate: the value head trains with its actor/);
    assert.match(problems({ algorithm: 'iac', num_generations: 2, joint_mode: 'cross' })[0], /^joint_mode: /);
    // the PyTorch learner trains value heads and separate critics (actor-critic-torch.test.ts)
    for (const use_separate_critic of [false, true])
      assert.equal(resolveConfig({ algorithm: 'iac', use_separate_critic, learner: { backend: 'torch' } }).learner.backend, 'torch');
    assert.match(problems({ algorithm: 'iac', ppo_clip_eps: 0.2 })[0], /^ppo_clip_eps: a key of algorithm magrpo/);
    assert.deepEqual(problems({ value_loss_coef: 1 }), ["value_loss_coef: a key of algorithm iac / maac; this run's algorithm is magrpo"]);
    // a group baseline needs two completions; the critic is iac's baseline
    assert.match(problems({ num_generations: 1 })[0], /^num_generations: algorithm magrpo needs ≥ 2/);
  });

  it('advantages are z-scored over a turn group (population std, floor 1e-6); one sample is left alone', () => {
    const s = (a: number) => ({ promptIds: [1], completions: [[2]], advantages: [a], oldLogprobs: [[0]] });
    const out = normalizeAdvantages([s(1), s(3)]).map((x) => x.advantages[0]);
    assert.deepEqual(out, [-1, 1]);
    assert.deepEqual(
      normalizeAdvantages([s(2), s(2)]).map((x) => x.advantages[0]),
      [0, 0],
    );
    assert.deepEqual(normalizeAdvantages([s(5)])[0].advantages, [5]);
  });

  describe('end to end (tiny model, native backend)', () => {
    const tiny = useTinyModel({ seed: 4 });
    const task = sayA(8);
    const config: MagrpoConfigInput = { algorithm: 'iac', ...SAY_A_RUN };

    it('the actors learn to say "a", the heads learn the value, and the heads are saved beside the weights', async () => {
      const out = mkdtempSync(join(tmpdir(), 'iac-'));
      try {
        const sink = new MemorySink();
        const t = new IACTrainer({ task, model: tiny.dir, sinks: [sink], config: { ...config, output_dir: out } });
        assert.equal(t.config.algorithm, 'iac');
        const agent = (t.agents[0] as LocalAgent).agent;
        const head = agent.valueHead;
        assert.ok(head, 'each agent has a value head');
        const value = () => head.value(agent.lm.model, agent.lm.tokenizer.encode('go')).data[0];
        const v0 = value();
        await t.train();
        const r = sink.series('turn_1/reward_mean').map((p) => p.value);
        assert.ok(mean(r.slice(-3)) > mean(r.slice(0, 3)) + 0.3, `reward ${mean(r.slice(0, 3))} → ${mean(r.slice(-3))}`);
        // 80 items, buffers of 8: 10 drains of 2 minibatches each
        assert.equal(sink.series('agent_0/loss').length, 10);
        assert.equal(agent.spec.totalSteps, 20);
        const vl = sink.series('agent_0/value_loss').map((p) => p.value);
        assert.equal(vl.length, 10, 'the value error is logged with every update');
        assert.ok(mean(vl.slice(-3)) < mean(vl.slice(0, 3)), `value_loss ${mean(vl.slice(0, 3))} → ${mean(vl.slice(-3))}`);
        const v1 = value();
        assert.ok(Math.abs(v1 - mean(r.slice(-3))) < Math.abs(v0 - mean(r.slice(-3))) / 2, `V(go) ${v0} → ${v1}, reward ${mean(r.slice(-3))}`);
        const saved = readSafetensors(join(out, 'final', 'agent_0', 'model', VALUE_HEAD_FILE));
        assert.deepEqual(Array.from(saved.get('v_head.summary.weight')?.data ?? []), Array.from(Float32Array.from(head.weight.data)));
        // a resumed run reads the head back from the checkpoint
        const resumed = new IACTrainer({ task, model: tiny.dir, config: { ...config, output_dir: out } });
        await resumed.train({ resumeFrom: out });
        assert.deepEqual(Array.from((resumed.agents[0] as LocalAgent).agent.valueHead?.bias.data ?? []), Array.from(head.bias.data));
        await t.close();
        await resumed.close();
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    });

    it('LoRA and mp mode: the head trains beside the adapter, and workers train the same as in-process', async () => {
      const lora = { ...config, num_train_epochs: 1, rollout_buffer_size: 4, lora: { r: 2, alpha: 4, target_modules: ['q_proj', 'v_proj'] } };
      const small = { ...task, dataset: task.dataset.slice(0, 4) };
      const [a, b] = [mkdtempSync(join(tmpdir(), 'iac-')), mkdtempSync(join(tmpdir(), 'iac-'))];
      try {
        const local = new MAGRPOTrainer({ task: small, model: tiny.dir, config: { ...lora, output_dir: a } });
        const head = (local.agents[1] as LocalAgent).agent.valueHead;
        const start = Float32Array.from(head?.weight.data ?? []);
        await local.train();
        assert.notDeepEqual(Float32Array.from(head?.weight.data ?? []), start, 'the head trains while the base is frozen');
        const mp = new MAGRPOTrainer({ task: small, model: tiny.dir, config: { ...lora, output_dir: b, parallel_training: 'mp' } });
        await mp.train();
        for (const agent of ['agent_0', 'agent_1']) {
          for (const file of ['adapter_model.safetensors', VALUE_HEAD_FILE]) {
            const wa = readFileSync(join(a, 'final', agent, 'adapter', file));
            const wb = readFileSync(join(b, 'final', agent, 'adapter', file));
            assert.ok(wa.equals(wb), `${agent} ${file}: same from workers as in-process`);
          }
        }
        await local.close();
        await mp.close();
      } finally {
        rmSync(a, { recursive: true, force: true });
        rmSync(b, { recursive: true, force: true });
      }
    });
  });
});
