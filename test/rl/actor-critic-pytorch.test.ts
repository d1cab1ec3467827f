/**
 * Critic models apart from the actors against PyTorch float64 (MAAC's shared critic, IAC's
 * separate critic, reference KL by shaping and as a loss term). Each fixture in
 * test/fixtures/actor-critic/ holds a rollout sampled from models/micro and what
 * scripts/make_actor_critic_fixtures.py computed from it independently: the joint critic input
 * (HF's tokenizer of the reference's joint prompt text), V_old, TD targets, KL shaping, advantages,
 * the actors' and the critics' losses, gradients and AdamW steps. The rollout is replayed through
 * MAGRPOTrainer.train() on the float64 reference backend; logged metrics, updated weights and AdamW
 * moments of every actor and critic must agree to 1e-9.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { jointIndices } from '../../src/rl/advantage.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import { jointCriticText } from '../../src/rl/algorithms/maac.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import type { LocalLearner } from '../../src/rl/learner.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import {
  assertFromShippedMicro,
  close,
  compareParams,
  loadFixtures,
  type ParamSummaries as Params,
  type RecordedRollout,
  replayTask,
  rolloutSampler,
  setInit,
} from '../helpers/pytorch-fixture.js';

const DIR = join('test', 'fixtures', 'actor-critic');
const REGENERATE = '.cache/venv-learner/bin/python scripts/make_actor_critic_fixtures.py';
const TOL = 1e-9;

interface Fixture {
  case: string;
  model: string;
  model_sha256: string;
  config: MagrpoConfigInput & { num_agents: number; num_generations: number };
  lora_init: Record<string, number[]>[] | null;
  critic_init: Record<string, number[]>[];
  joint_inputs: { texts: string[]; ids: number[][] }[][] | null;
  rollout: RecordedRollout;
  expected: {
    drains: { loss: number; grad_norm: number; entropy: number; completion_length: number; lr: number }[];
    optimizer_steps: number;
    params: Params;
  }[];
  critics: { drains: { value_loss: number; grad_norm: number }[]; optimizer_steps: number; params: Params }[];
}

const fixtures = loadFixtures<Fixture>(DIR);

it('has the fixtures, made from the shipped models/micro', () => assertFromShippedMicro(fixtures, 3, REGENERATE));

describe('critic models vs PyTorch float64 on recorded rollouts, reference backend', () => {
  before(() => {
    setBackend('reference');
    setDType('float64');
  });
  after(() => setDType('float32'));

  for (const fx of fixtures) {
    it(fx.case, async () => {
      const sink = new MemorySink();
      const t = new MAGRPOTrainer({
        task: replayTask(fx.rollout, fx.config.num_agents, fx.config.num_generations),
        model: fx.model,
        sinks: [sink],
        config: fx.config,
      });
      const critics = t.critics?.models ?? [];
      assert.equal(critics.length, fx.critic_init.length, `${fx.case}: critic models`);
      for (const handle of t.agents) {
        const agent = (handle as LocalAgent).agent;
        assert.equal(agent.valueHead, null, 'the actors carry no value head');
        agent.lm.sample = rolloutSampler(fx.rollout, handle.index);
        setInit(agent.lm.model, null, fx.lora_init?.[handle.index] ?? {});
      }
      for (const [k, critic] of critics.entries()) setInit(critic.lm.model, critic.head, fx.critic_init[k]);
      // the joint prompt text and its ids, as the reference formats and HF tokenizes them
      for (const [j, nodes] of (fx.joint_inputs ?? []).entries())
        for (const [n, node] of nodes.entries()) {
          const label = `i${j}n${n}`;
          for (const [k, text] of node.texts.entries()) {
            const actions =
              fx.config.critic_type === 'v'
                ? null
                : jointIndices('aligned', fx.config.num_agents, fx.config.num_generations)[k].map((g, a) => `${label}a${a}g${g}`);
            assert.equal(jointCriticText(new Array<string>(fx.config.num_agents).fill(label), actions), text);
            assert.deepEqual(critics[0].lm.tokenizer.promptIds(text), node.ids[k], `${fx.case}: ids of ${JSON.stringify(text)}`);
          }
        }
      await t.train();

      for (const [a, exp] of fx.expected.entries()) {
        const agent = (t.agents[a] as LocalAgent).agent;
        const who = `${fx.case} agent ${a}`;
        for (const key of ['loss', 'grad_norm', 'entropy', 'completion_length', 'lr'] as const) {
          const got = sink.series(`agent_${a}/${key}`).map((p) => p.value);
          assert.equal(got.length, exp.drains.length, `${who}: ${key} entries`);
          for (const [d, e] of exp.drains.entries()) close(got[d], e[key], Math.abs(e[key]) + (key === 'loss' ? 1 : 0), `${who} drain ${d} ${key}`, TOL);
        }
        const state = (agent.learner as LocalLearner).optimizer.state();
        assert.equal(state.step, exp.optimizer_steps, `${who}: optimizer steps`);
        compareParams(new Map(agent.lm.model.trainableParams().map((p) => [p.name as string, p])), state.buffers, exp.params, who, TOL);
      }
      const shared = fx.config.algorithm === 'maac';
      for (const [k, exp] of fx.critics.entries()) {
        const who = `${fx.case} critic ${shared ? '(shared)' : k}`;
        const [vl, gn] = shared ? ['critic/value_loss', 'critic/grad_norm'] : [`agent_${k}/value_loss`, `agent_${k}/critic_grad_norm`];
        const got = [sink.series(vl).map((p) => p.value), sink.series(gn).map((p) => p.value)];
        assert.equal(got[0].length, exp.drains.length, `${who}: value_loss entries`);
        for (const [d, e] of exp.drains.entries()) {
          close(got[0][d], e.value_loss, Math.abs(e.value_loss) + 1, `${who} drain ${d} value_loss`, TOL);
          close(got[1][d], e.grad_norm, Math.abs(e.grad_norm), `${who} drain ${d} grad_norm`, TOL);
        }
        const critic = critics[k];
        const state = critic.optimizer.state();
        assert.equal(state.step, exp.optimizer_steps, `${who}: optimizer steps`);
        compareParams(
          new Map([...critic.lm.model.trainableParams(), ...critic.head.params()].map((p) => [p.name as string, p])),
          state.buffers,
          exp.params,
          who,
          TOL,
        );
      }
      await t.close();
    });
  }
});
