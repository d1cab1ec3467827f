/**
 * MARLHF end to end (tiny models): a joint reward model trained on preference pairs, then online
 * RL whose training rewards are that model's scores of each joint action while evaluation keeps
 * the task's reward; `magrpo reward-model`'s path from a run config (sampled pairs labelled by
 * the env reward) to a folder `trainer.reward_model` loads; the keys' refusals.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { RewardModel, trainRewardModel } from '../../src/rl/reward-model.js';
import { promptText, type Task, TaskError } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { MARLHFTrainer } from '../../src/rl/trainers.js';
import { rewardModelRun } from '../../src/run/reward-model.js';
import { configProblems as problems } from '../helpers/config-problems.js';
import { SMALL_RUN } from '../helpers/small-run.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

type Item = { prompt: string };

describe('MARLHF', () => {
  let base = '';
  let rmDir = '';
  before(() => {
    setBackend('native');
    base = makeTinyModel({ seed: 3 });
    rmDir = mkdtempSync(join(tmpdir(), 'magrpo-rm-'));
    // The preference: both agents saying "a" beats anything else.
    const rm = RewardModel.create(base, 2, { max_length: null, freeze_backbone: false, seed: 2 });
    const pairs = ['b', 'c', 'd'].flatMap((w) => [
      { prompts: ['go', 'go'], chosen: ['a', 'a'], rejected: [w, w] },
      { prompts: ['go', 'go'], chosen: ['a', 'a'], rejected: ['a', w] },
    ]);
    trainRewardModel(rm, pairs, { learning_rate: 0.01, num_train_epochs: 10, train_batch_size: 2, max_length: null, freeze_backbone: false, seed: 2 });
    rm.save(rmDir);
  });
  after(() => {
    rmSync(base, { recursive: true, force: true });
    rmSync(rmDir, { recursive: true, force: true });
  });

  /** The task's own reward is 0 everywhere: any training signal comes from the reward model. */
  const task: Task<Item> = {
    dataset: Array.from({ length: 4 }, () => ({ prompt: 'go' })),
    evalDataset: [{ prompt: 'go' }],
    reward: () => 0,
  };
  const config = (over: MagrpoConfigInput = {}): MagrpoConfigInput => ({
    reward_model: rmDir,
    num_generations: 4,
    max_new_tokens: 1,
    temperature: 1,
    top_k: null,
    top_p: 1,
    num_train_epochs: 1,
    rollout_buffer_size: 1,
    eval_interval: 100,
    eval_num_samples: 1,
    logging_steps: 1,
    agent_learning_rate: 0.01,
    ...over,
  });

  for (const algorithm of ['magrpo', 'maremax', 'iac'] as const) {
    it(`${algorithm}: training rewards are the reward model's scores, evaluation the task's`, async () => {
      const rm = RewardModel.load(rmDir);
      const scored: { expected: number; got: number }[] = [];
      const sink = new MemorySink();
      const t = new MAGRPOTrainer({
        task,
        model: base,
        sinks: [sink],
        config: config({ algorithm }),
        onTree: ({ root }) => {
          const prompts = root.groups.map((g) => promptText(g.prompt));
          root.joint.forEach((ks, k) => {
            scored.push({
              expected: rm.score(
                prompts,
                ks.map((g, i) => root.groups[i].completions[g].text),
              ),
              got: root.rewards[k],
            });
          });
        },
      });
      const embed = () => Float32Array.from((t.agents[0] as LocalAgent).agent.lm.model.param('model.embed_tokens.weight').data);
      const before = embed();
      const { eval: ev } = await t.train();
      assert.equal(scored.length, 4 * 4, 'every joint action of every item scored');
      for (const s of scored) assert.ok(Math.abs(s.got - s.expected) < 1e-5, `reward ${s.got}, reward model ${s.expected}`);
      assert.ok(new Set(scored.map((s) => s.got.toFixed(6))).size > 1, 'the reward model tells joint actions apart');
      const trainReward = sink.series('turn_1/reward_mean').map((p) => p.value);
      assert.ok(
        trainReward.some((r) => r !== 0),
        'training logs the reward model reward',
      );
      assert.equal(ev['eval/turn_1/reward_mean'], 0, 'evaluation keeps the task reward');
      assert.notDeepEqual(embed(), before, 'the agents were trained');
      await t.close();
    });
  }

  it('MARLHFTrainer is MAGRPOTrainer that needs reward_model', async () => {
    const t = new MARLHFTrainer({ task, model: base, config: config({ algorithm: 'mareinforce' }) });
    assert.ok(t instanceof MAGRPOTrainer);
    assert.equal(t.config.algorithm, 'mareinforce');
    await t.close();
    assert.throws(() => new MARLHFTrainer({ task, model: base, config: { num_generations: 2 } }), /reward_model: MARLHFTrainer trains on a reward model/);
  });

  it('refuses offline and joint-policy algorithms, and a reward model of another team size', () => {
    assert.match(problems({ algorithm: 'madpo', reward_model: 'rm' }).join('\n'), /reward_model: MARLHF trains an online algorithm .* not madpo/);
    assert.match(problems({ algorithm: 'centralized_magrpo', num_agents: 1, reward_model: 'rm' }).join('\n'), /reward_model: .* not centralized_magrpo/);
    assert.throws(
      () => new MAGRPOTrainer({ task, models: [base, base, base], config: config({ num_agents: 3 }) }),
      (e: unknown) => e instanceof TaskError && /reward model scores joint actions of 2 agents, this run has 3/.test(e.message),
    );
    assert.throws(() => new MAGRPOTrainer({ task, model: base, config: config({ reward_model: base }) }), /no reward_head\.safetensors/);
  });

  it('magrpo reward-model: pairs sampled from the config team and labelled by the env reward, then a folder train loads', async () => {
    const out = mkdtempSync(join(tmpdir(), 'magrpo-rm-cli-'));
    try {
      const r = await rewardModelRun(join('configs', 'custom', 'config.yaml'), {
        set: SMALL_RUN,
        out,
        candidates: 4,
        pairsPerSample: 2,
        max_length: 64,
        log: () => {},
      });
      assert.ok(r.pairs > 0 && r.pairs <= 4 * 2, `${r.pairs} pairs`);
      assert.equal(r.logs.length, r.pairs, 'batch size 1, one epoch: a step per pair');
      const rm = RewardModel.load(out);
      assert.equal(rm.numAgents, 2);
      assert.equal(rm.maxLength, 64);
      await assert.rejects(
        rewardModelRun(join('configs', 'custom', 'config.yaml'), { set: SMALL_RUN, out, pairSelection: 'all', pairsPerSample: 3, log: () => {} }),
        /pair selection "all" keeps every pair/,
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
