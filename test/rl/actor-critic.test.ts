/**
 * Critic models apart from the actors (src/rl/critics.ts): MAAC's shared critic over joint prompts
 * and IAC's separate critic per agent; their keys and refusals, the reference-model KL of both,
 * learning on a tiny model, and critics saved beside the weights so a resume continues the run.
 * Their numerics against PyTorch float64 are in actor-critic-pytorch.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { readSafetensors } from '../../src/model/safetensors.js';
import { VALUE_HEAD_FILE } from '../../src/model/value-head.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { ScoredNode } from '../../src/rl/algorithms/algorithm.js';
import { actorCriticSamples } from '../../src/rl/algorithms/iac.js';
import { jointCriticText, maacSamples } from '../../src/rl/algorithms/maac.js';
import { policyGradientSample } from '../../src/rl/algorithms/magrpo.js';
import { type MagrpoConfigInput, resolveConfig } from '../../src/rl/config.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { IACTrainer, MAACTrainer } from '../../src/rl/trainers.js';
import { configProblems as problems } from '../helpers/config-problems.js';
import { mean, SAY_A_RUN, sayA, useTinyModel } from '../helpers/tiny-run.js';

describe('MAAC and critic models: keys, defaults, refusals', () => {
  it("maac: the reference's MAACConfig defaults; what it cannot do is an error naming the key", () => {
    const c = resolveConfig({ algorithm: 'maac' });
    assert.deepEqual([c.num_generations, c.rollout_buffer_size, c.num_train_epochs, c.agent_learning_rate, c.advantage_normalization], [1, 8, 40, 5e-6, true]);
    assert.deepEqual([c.critic_type, c.value_loss_coef, c.critic_learning_rate, c.reference_kl_enabled, c.reference_kl_coef], ['v', 0.6, null, false, 0.1]);
    assert.deepEqual(resolveConfig(c), c);
    assert.equal(resolveConfig({ algorithm: 'maac', critic_type: 'Q' }).critic_type, 'q');
    // the PyTorch learner trains the shared critic too (actor-critic-torch.test.ts)
    assert.equal(resolveConfig({ algorithm: 'maac', learner: { backend: 'torch' } }).learner.backend, 'torch');
    assert.match(problems({ algorithm: 'maac', num_turns: 2, num_generations: 2 })[0], /^num_generations: multi-turn maac/);
    assert.match(problems({ algorithm: 'maac', num_generations: 2, joint_mode: 'cross' })[0], /^joint_mode: maac rewards aligned/);
    // the reference's MAAC has no value clipping, and no separate-critic switch: the critic is always its own model
    assert.deepEqual(problems({ algorithm: 'maac', value_clip_range: 0.1 }), ["value_clip_range: a key of algorithm iac; this run's algorithm is maac"]);
    assert.deepEqual(problems({ algorithm: 'maac', use_separate_critic: true }), ["use_separate_critic: a key of algorithm iac; this run's algorithm is maac"]);
    assert.deepEqual(problems({ critic_learning_rate: 1e-5 }), ["critic_learning_rate: a key of algorithm iac / maac; this run's algorithm is magrpo"]);
  });

  it('iac: the separate critic and its learning rate; reference KL in iac and maac', () => {
    const c = resolveConfig({ algorithm: 'iac', use_separate_critic: true, critic_learning_rate: 1e-5 });
    assert.deepEqual([c.use_separate_critic, c.critic_learning_rate], [true, 1e-5]);
    assert.match(problems({ algorithm: 'iac', critic_learning_rate: 1e-5 })[0], /^critic_learning_rate: the value head trains with its actor/);
    for (const algorithm of ['iac', 'maac']) {
      const k = resolveConfig({ algorithm, reference_kl_enabled: true, reference_kl_mode: 'loss' });
      assert.deepEqual([k.reference_kl_enabled, k.reference_kl_coef, k.reference_kl_mode], [true, 0.1, 'loss']);
    }
  });

  it("the joint prompt and joint action are formatted as the reference's MAACTrainer._build_critic_input", () => {
    assert.equal(jointCriticText(['write a', 'write b'], null), '[Agent 0] write a\n\n[Agent 1] write b');
    assert.equal(jointCriticText(['p0', 'p1'], ['x', 'y z']), '[Agent 0] p0\n\n[Agent 1] p1\n\n[Joint Action]\n\n[Agent 0 action]\nx\n\n[Agent 1 action]\ny z');
  });
});

describe('actor-critic samples: reference-KL shaping and the shared critic target', () => {
  /** Two agents, G = 2 aligned, one turn; agent 1's completions drift further from the reference. */
  const node: ScoredNode = {
    turn: 0,
    groups: [0, 1].map((a) => ({
      promptIds: [5, 6],
      completions: [0, 1].map((g) => ({ ids: [7 + g], logprobs: [-1] })),
      refLogprobs: [[-1.5], [-2]],
      refKl: [0.5 * (a + 1), 1 * (a + 1)],
      values: [0.25, 0.75],
    })),
    joint: [
      [0, 0],
      [1, 1],
    ],
    rewards: [1, 2],
    returns: [1, 2],
    jointCritic: { inputs: [[9], [10]], values: [0.25, 0.75] },
  };
  const kl = { discount: 1, reference_kl_enabled: true, reference_kl_coef: 0.1, reference_kl_mode: 'reward_shaping' as const };

  it('iac: target r − β·KL_i, advantage target − V_old; the loss mode leaves the reward alone', () => {
    const s = actorCriticSamples(node, 1, kl);
    assert.deepEqual(
      s.map((x) => x.critic?.targets[0]),
      [1 - 0.1 * 1, 2 - 0.1 * 2],
    );
    assert.deepEqual(
      s.map((x) => x.advantages[0]),
      [1 - 0.1 - 0.25, 2 - 0.2 - 0.75],
    );
    assert.deepEqual(s[0].refLogprobs, [[-1.5]]);
    // One β per agent: agent 1 reads the second.
    assert.deepEqual(
      actorCriticSamples(node, 1, { ...kl, reference_kl_coef: [5, 0.1] }).map((x) => x.critic?.targets[0]),
      [1 - 0.1 * 1, 2 - 0.1 * 2],
    );
    assert.deepEqual(
      actorCriticSamples(node, 0, { ...kl, reference_kl_coef: [0.5, 9] }).map((x) => x.critic?.targets[0]),
      [1 - 0.5 * 0.5, 2 - 0.5 * 1],
    );
    const loss = actorCriticSamples(node, 1, { ...kl, reference_kl_mode: 'loss' });
    assert.deepEqual(
      loss.map((x) => x.critic?.targets[0]),
      [1, 2],
    );
  });

  it("maac: each actor's advantage from its own target; the critic regresses the joint input to their mean", () => {
    const s = maacSamples(node, kl);
    assert.deepEqual(
      s[0].map((x) => x.advantages[0]),
      [1 - 0.05 - 0.25, 2 - 0.1 - 0.75],
    );
    for (const a of [0, 1]) {
      assert.deepEqual(
        s[a].map((x) => x.critic?.targets[0]),
        [1 - (0.05 + 0.1) / 2, 2 - (0.1 + 0.2) / 2],
      );
      assert.deepEqual(
        s[a].map((x) => x.critic?.inputs),
        [[[9]], [[10]]],
      );
    }
    assert.throws(() => maacSamples({ ...node, jointCritic: undefined }, kl), /maac: no shared critic values/);
  });

  it("magrpo: KL shaping reads the agent's own β from a per-agent list", () => {
    const c = resolveConfig({ num_agents: 2, num_generations: 2, reference_kl_enabled: true, reference_kl_coef: [0, 2], advantage_normalization: false });
    // Agent 0 (β 0): returns 1, 2 → advantages ∓0.5. Agent 1 (β 2): 1 − 2·1, 2 − 2·2 = −1, −2 → ±0.5 reversed.
    assert.deepEqual(policyGradientSample(node, 0, c).advantages, [-0.5, 0.5]);
    assert.deepEqual(policyGradientSample(node, 1, c).advantages, [0.5, -0.5]);
  });
});

describe('critic models end to end (tiny model, native backend)', () => {
  const tiny = useTinyModel({ seed: 4 });
  const task = sayA(8);
  const config: MagrpoConfigInput = { ...SAY_A_RUN, critic_learning_rate: 0.01 };

  it('maac: the actors learn to say "a", the shared critic learns the joint value, and it is saved beside the agents', async () => {
    const out = mkdtempSync(join(tmpdir(), 'maac-'));
    try {
      const sink = new MemorySink();
      const t = new MAACTrainer({ task, model: tiny.dir, sinks: [sink], config: { ...config, output_dir: out } });
      assert.equal(t.config.algorithm, 'maac');
      assert.equal((t.agents[0] as LocalAgent).agent.valueHead, null, 'the actors carry no head');
      const critic = t.critics?.models[0];
      assert.ok(critic && t.critics?.models.length === 1, 'one critic for the team');
      const joint = critic.lm.tokenizer.promptIds('[Agent 0] go\n\n[Agent 1] go');
      const value = () => critic.values([joint])[0];
      const v0 = value();
      await t.train();
      const r = sink.series('turn_1/reward_mean').map((p) => p.value);
      assert.ok(mean(r.slice(-3)) > mean(r.slice(0, 3)) + 0.3, `reward ${mean(r.slice(0, 3))} → ${mean(r.slice(-3))}`);
      const vl = sink.series('critic/value_loss').map((p) => p.value);
      assert.equal(vl.length, 10, 'one critic entry per drain');
      assert.equal(sink.series('critic/grad_norm').length, 10);
      assert.equal(sink.series('agent_0/value_loss').length, 0, 'the actors have no value loss of their own');
      assert.equal(critic.optimizer.state().step, 20, 'one critic step per minibatch of joint actions, not one per agent');
      const v1 = value();
      assert.ok(Math.abs(v1 - mean(r.slice(-3))) < Math.abs(v0 - mean(r.slice(-3))) / 2, `V(joint) ${v0} → ${v1}, reward ${mean(r.slice(-3))}`);
      const saved = readSafetensors(join(out, 'final', 'critic', 'model', VALUE_HEAD_FILE));
      assert.deepEqual(Array.from(saved.get('v_head.summary.bias')?.data ?? []), Array.from(Float32Array.from(critic.head.bias.data)));
      const resumed = new MAACTrainer({ task, model: tiny.dir, config: { ...config, output_dir: out } });
      await resumed.train({ resumeFrom: out });
      assert.deepEqual(Array.from(resumed.critics?.models[0].head.bias.data ?? []), Array.from(critic.head.bias.data));
      assert.equal(resumed.critics?.models[0].optimizer.state().step, 20);
      await t.close();
      await resumed.close();
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('iac with a separate critic per agent: learns, and a run stopped and resumed ends with the same actors and critics', async () => {
    const sep: MagrpoConfigInput = { ...config, algorithm: 'iac', use_separate_critic: true, num_train_epochs: 2, rollout_buffer_size: 4 };
    const [a, b] = [mkdtempSync(join(tmpdir(), 'iac-sep-')), mkdtempSync(join(tmpdir(), 'iac-sep-'))];
    try {
      const sink = new MemorySink();
      const full = new IACTrainer({ task, model: tiny.dir, sinks: [sink], config: { ...sep, output_dir: a } });
      assert.equal(full.critics?.models.length, 2, 'one critic per agent');
      assert.equal((full.agents[1] as LocalAgent).agent.valueHead, null, 'the actor carries no head');
      await full.train();
      assert.equal(sink.series('agent_1/value_loss').length, 4);
      assert.equal(sink.series('agent_1/critic_grad_norm').length, 4);
      const first = new IACTrainer({ task, model: tiny.dir, config: { ...sep, output_dir: b } });
      await first.train({ maxItems: 6 });
      await first.close();
      const resumed = new IACTrainer({ task, model: tiny.dir, config: { ...sep, output_dir: b } });
      await resumed.train({ resumeFrom: b });
      for (const agent of ['agent_0', 'agent_1']) {
        for (const file of [join('model', 'model.safetensors'), join('critic', 'model', 'model.safetensors'), join('critic', 'model', VALUE_HEAD_FILE)]) {
          const wa = readFileSync(join(a, 'final', agent, file));
          const wb = readFileSync(join(b, 'final', agent, file));
          assert.ok(wa.equals(wb), `${agent} ${file}: the resumed run ends where the uninterrupted one does`);
        }
      }
      await full.close();
      await resumed.close();
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });

  it('mp mode: the shared critic trains in the trainer thread; workers train the same as in-process', async () => {
    const lora: MagrpoConfigInput = {
      ...config,
      algorithm: 'maac',
      num_train_epochs: 1,
      rollout_buffer_size: 4,
      lora: { r: 2, alpha: 4, target_modules: ['q_proj', 'v_proj'] },
    };
    const small = { ...task, dataset: task.dataset.slice(0, 4) };
    const [a, b] = [mkdtempSync(join(tmpdir(), 'maac-')), mkdtempSync(join(tmpdir(), 'maac-'))];
    try {
      const local = new MAGRPOTrainer({ task: small, model: tiny.dir, config: { ...lora, output_dir: a } });
      await local.train();
      const mp = new MAGRPOTrainer({ task: small, model: tiny.dir, config: { ...lora, output_dir: b, parallel_training: 'mp' } });
      await mp.train();
      for (const file of [
        join('agent_0', 'adapter', 'adapter_model.safetensors'),
        join('critic', 'adapter', 'adapter_model.safetensors'),
        join('critic', 'adapter', VALUE_HEAD_FILE),
      ]) {
        const wa = readFileSync(join(a, 'final', file));
        const wb = readFileSync(join(b, 'final', file));
        assert.ok(wa.equals(wb), `${file}: same from workers as in-process`);
      }
      await local.close();
      await mp.close();
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});
