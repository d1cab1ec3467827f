/**
 * Iterative MADPO (src/rl/iterative.ts) against PyTorch float64: the DPO loss on comparison pairs
 * formed against a comparator, with Δ_ref scored by the team as each iteration starts (not the
 * sampling log-probs, not the starting model from the second iteration on) and the others' Δ_j
 * detached. Each fixture in test/fixtures/iterative/ holds the completions the team and the
 * comparator sampled from models/micro per iteration, the rewards of every joint action, and what
 * scripts/make_iterative_fixtures.py computed from them: the pairs, Δ_ref, per step the loss,
 * gradient norm and preference accuracy / margin, the drift probe, the updated weights and AdamW
 * moments. The record is replayed through MADPOIterTrainer.train() (the token sampler replaced, the
 * reward looked up); the reference backend in float64 must agree to 1e-9, native float32 to 1e-3.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it } from 'node:test';
import type { TextSample } from '../../src/model/pretrained.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import { MemorySink } from '../../src/rl/metrics.js';
import { MADPOIterTrainer } from '../../src/rl/trainers.js';
import {
  type AgentExpected,
  close,
  compareAgentState,
  compareDrains,
  describeOnSetups,
  type FixtureCase,
  parityFixtures,
  queueSampler,
} from '../helpers/pytorch-fixture.js';

const DIR = join('test', 'fixtures', 'iterative');
const REGENERATE = '.cache/venv-learner/bin/python scripts/make_iterative_fixtures.py';

interface Fixture extends FixtureCase {
  config: MagrpoConfigInput & { num_agents: number };
  prompts: number[][];
  /** Per agent, per item label: what the sampler hands out, in call order (team, then comparator, per iteration). */
  samples: Record<string, { ids: number[]; logprobs: number[]; text: string }[]>[];
  /** The joint reward of each joint action, by its completions' labels joined with "|". */
  rewards: Record<string, number>;
  expected: AgentExpected[];
  /** Per optimizer step: the team's preference/accuracy and preference/margin before it. */
  team: { accuracy: number; margin: number; min_abs_z: number }[];
  iterations: { pairs: number }[];
  drift: { logratio_prev: number; logratio_initial: number }[][];
}

const fixtures = parityFixtures<Fixture>(DIR, 1, REGENERATE);

describeOnSetups('iterative MADPO vs PyTorch float64 on recorded comparisons', (tol) => {
  for (const fx of fixtures) {
    it(fx.case, async () => {
      const sink = new MemorySink();
      const task = {
        dataset: fx.prompts.map((_, j) => ({ prompt: `i${j}` })),
        reward: ({ completions }: { completions: readonly string[] }) => {
          const r = fx.rewards[completions.join('|')];
          assert.ok(r !== undefined, `no recorded reward for ${completions.join('|')}`);
          return r;
        },
      };
      const t = new MADPOIterTrainer({ task, model: fx.model, sinks: [sink], config: fx.config });
      for (const handle of t.agents) {
        const a = handle.index;
        const queues = new Map<string, TextSample[]>(
          Object.entries(fx.samples[a]).map(([label, xs]) => [
            label,
            xs.map((x) => ({
              promptIds: fx.prompts[Number(label.slice(1))],
              completionIds: x.ids,
              text: x.text,
              logprobs: x.logprobs,
              finishReason: 'stop_token' as const,
            })),
          ]),
        );
        (handle as LocalAgent).agent.lm.sample = queueSampler(queues, a);
      }
      await t.train();

      const series = (key: string) => sink.series(key).map((p) => p.value);
      assert.deepEqual(
        series('iter/current_preference_pairs'),
        fx.iterations.map((x) => x.pairs),
        'pairs per iteration',
      );
      for (const [a, exp] of fx.expected.entries()) {
        const agent = (t.agents[a] as LocalAgent).agent;
        const who = `${fx.case} agent ${a}`;
        compareDrains(series, a, exp.drains, who, tol, 'step');
        for (const key of ['logratio_prev', 'logratio_initial'] as const) {
          const got = series(`drift/agent_${a}/${key}`);
          assert.equal(got.length, fx.drift.length, `${who}: drift entries`);
          for (const [k, d] of fx.drift.entries()) close(got[k], d[a][key], Math.abs(d[a][key]) + 1, `${who} iteration ${k} drift ${key}`, tol);
        }
        compareAgentState(agent, exp, who, tol);
      }
      const margin = series('preference/margin');
      const accuracy = series('preference/accuracy');
      assert.equal(margin.length, fx.team.length, 'one team entry per optimizer step');
      for (const [s, e] of fx.team.entries()) {
        close(margin[s], e.margin, Math.abs(e.margin) + 1, `${fx.case} step ${s} preference/margin`, tol);
        // z = β(Σ_j Δ_j − Δ_ref) is 0 up to rounding at each iteration's first step: its sign is noise there
        if (e.min_abs_z > 1e-6) assert.equal(accuracy[s], e.accuracy, `${fx.case} step ${s} preference/accuracy`);
      }
      await t.close();
    });
  }
});
