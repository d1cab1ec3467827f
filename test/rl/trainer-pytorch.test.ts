/**
 * The trainer end to end against PyTorch (in the spirit of llm.c's test_gpt2), for every
 * algorithm with a case there (the MAGRPO family, centralized MAGRPO, MADPO, IAC with its value heads). Each fixture in
 * test/fixtures/trainer/ holds a rollout sampled from models/micro (token ids, sampling log-probs,
 * joint rewards) and what scripts/make_trainer_fixtures.py computed from it in PyTorch float64:
 * returns, credit, KL shaping, advantages, losses, the drain schedule, gradients, clipping, the LR
 * schedule and AdamW. Here the same rollout is replayed through MAGRPOTrainer.train() (only the
 * token sampler is replaced by the record; rewards and transitions look the record up) on the
 * float64 reference backend, and the logged loss, gradient norm, entropy, completion length and
 * learning rate of every drain, the updated weights and the AdamW moments must agree to 1e-9
 * (they agree to ~1e-15). The production path, native kernels in float32, must agree to 1e-3.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it } from 'node:test';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import {
  type AgentExpected,
  close,
  compareAgentState,
  compareDrains,
  type DrainMetrics,
  describeOnSetups,
  type FixtureCase,
  parityFixtures,
  type RecordedRollout,
  replayTask,
  rolloutSampler,
  setInit,
} from '../helpers/pytorch-fixture.js';

const DIR = join('test', 'fixtures', 'trainer');
const REGENERATE = '/usr/bin/python3 scripts/make_trainer_fixtures.py';

interface Fixture extends FixtureCase {
  config: MagrpoConfigInput & { num_agents: number; num_generations: number; joint_mode?: 'aligned' | 'cross' };
  lora_init: Record<string, number[]>[] | null;
  /** Actor-critic cases: each agent's starting value head, by TRL name. */
  value_head_init?: Record<string, number[]>[];
  rollout: RecordedRollout;
  expected: AgentExpected<DrainMetrics & { steps: number; value_loss?: number }>[];
}

const fixtures = parityFixtures<Fixture>(DIR, 6, REGENERATE);

describeOnSetups('trainer vs PyTorch float64 on recorded rollouts', (tol) => {
  for (const fx of fixtures) {
    it(fx.case, async () => {
      const sink = new MemorySink();
      const { num_agents: N, num_generations: G, joint_mode } = fx.config;
      const t = new MAGRPOTrainer({
        task: replayTask(fx.rollout, N, G, joint_mode === 'cross' ? 'cross' : 'aligned'),
        model: fx.model,
        sinks: [sink],
        config: fx.config,
      });
      for (const handle of t.agents) {
        const agent = (handle as LocalAgent).agent;
        agent.lm.sample = rolloutSampler(fx.rollout, handle.index);
        setInit(agent.lm.model, null, fx.lora_init?.[handle.index] ?? {});
        assert.equal(agent.valueHead !== null, fx.value_head_init !== undefined, `${fx.case}: a value head exactly when the case has one`);
        setInit(agent.lm.model, agent.valueHead, fx.value_head_init?.[handle.index] ?? {});
      }
      await t.train();

      for (const [a, exp] of fx.expected.entries()) {
        const agent = (t.agents[a] as LocalAgent).agent;
        const who = `${fx.case} agent ${a}`;
        compareDrains((key) => sink.series(key).map((p) => p.value), a, exp.drains, who, tol);
        // actor-critic cases: the value term on its own
        const valueLoss = sink.series(`agent_${a}/value_loss`).map((p) => p.value);
        assert.equal(valueLoss.length, exp.drains.filter((e) => e.value_loss !== undefined).length, `${who}: value_loss entries`);
        for (const [d, e] of exp.drains.entries())
          if (e.value_loss !== undefined) close(valueLoss[d], e.value_loss, Math.abs(e.value_loss) + 1, `${who} drain ${d} value_loss`, tol);
        assert.equal(agent.spec.totalSteps, exp.optimizer_steps, `${who}: LR schedule length`);
        compareAgentState(agent, exp, who, tol);
      }
      await t.close();
    });
  }
});
