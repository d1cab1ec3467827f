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
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type BackendName, type DType, setBackend, setDType } from '../../src/engine/runtime.js';
import type { TextSample } from '../../src/model/pretrained.js';
import { jointIndices } from '../../src/rl/advantage.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import type { LocalLearner } from '../../src/rl/learner.js';
import { MemorySink } from '../../src/rl/metrics.js';
import type { Task } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';

const DIR = join('test', 'fixtures', 'trainer');
const REGENERATE = '/usr/bin/python3 scripts/make_trainer_fixtures.py';

interface RecordedNode {
  turn: number;
  parent: number | null;
  parent_joint: number | null;
  prompt_ids: number[][];
  completion_ids: number[][][];
  logprobs: number[][][];
  rewards: number[];
}
type Summary = { full: number[] } | { n: number; sumsq: number; proj: number; at: [number, number][] };
interface Fixture {
  case: string;
  model: string;
  model_sha256: string;
  config: MagrpoConfigInput & { num_agents: number; num_generations: number; joint_mode?: 'aligned' | 'cross' };
  lora_init: Record<string, number[]>[] | null;
  /** Actor-critic cases: each agent's starting value head, by TRL name. */
  value_head_init?: Record<string, number[]>[];
  rollout: { nodes: RecordedNode[] }[];
  expected: {
    drains: { loss: number; grad_norm: number; entropy: number; completion_length: number; lr: number; steps: number; value_loss?: number }[];
    optimizer_steps: number;
    params: Record<string, { w: Summary; m: Summary; v: Summary }>;
  }[];
}

const fixtures = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => JSON.parse(readFileSync(join(DIR, f), 'utf8')) as Fixture);

/** |a − b| ≤ tol · scale, with a message naming what differs. */
function close(actual: number, expected: number, scale: number, what: string, tol: number): void {
  assert.ok(Number.isFinite(actual), `${what}: got ${actual}`);
  assert.ok(Math.abs(actual - expected) <= tol * Math.max(scale, 1e-12), `${what}: magrpo ${actual}, PyTorch ${expected} (diff ${actual - expected})`);
}

const h = (j: number) => ((j * 2654435761) % 4294967296) / 4294967296 - 0.5;

function compareSummary(x: ArrayLike<number>, s: Summary, what: string, tol: number): void {
  if ('full' in s) {
    assert.equal(x.length, s.full.length, what);
    const scale = Math.sqrt(s.full.reduce((a, v) => a + v * v, 0) / s.full.length);
    for (let j = 0; j < x.length; j++) close(x[j], s.full[j], scale, `${what}[${j}]`, tol);
    return;
  }
  assert.equal(x.length, s.n, what);
  let sumsq = 0;
  let proj = 0;
  for (let j = 0; j < x.length; j++) {
    sumsq += x[j] * x[j];
    proj += x[j] * h(j);
  }
  close(sumsq, s.sumsq, s.sumsq, `${what} Σx²`, tol);
  // a projection on pseudo-random weights: catches sign flips and permutations that Σx² misses
  close(proj, s.proj, Math.sqrt(s.sumsq), `${what} Σx·h`, tol);
  const rms = Math.sqrt(s.sumsq / s.n);
  for (const [j, v] of s.at) close(x[j], v, Math.max(Math.abs(v), rms), `${what}[${j}]`, tol);
}

/** The trainer's task for a recorded rollout: completions are labels that point into the record. */
function replayTask(fx: Fixture): Task<{ prompt: string }> {
  const N = fx.config.num_agents;
  const G = fx.config.num_generations;
  const joint = jointIndices(fx.config.joint_mode === 'cross' ? 'cross' : 'aligned', N, G);
  const locate = (completions: readonly string[]) => {
    const parsed = completions.map((c) => {
      const m = /^i(\d+)n(\d+)a(\d+)g(\d+)$/.exec(c);
      if (!m) throw new Error(`not a replay label: ${c}`);
      return m.slice(1).map(Number);
    });
    const [item, node] = parsed[0];
    const k = joint.findIndex((idx) => idx.every((g, a) => g === parsed[a][3]));
    return { item, node, k };
  };
  return {
    dataset: fx.rollout.map((_, j) => ({ prompt: `i${j}n0` })),
    reward: ({ completions }) => {
      const { item, node, k } = locate(completions);
      return fx.rollout[item].nodes[node].rewards[k];
    },
    transition: ({ completions }) => {
      const { item, node, k } = locate(completions);
      const child = fx.rollout[item].nodes.findIndex((n) => n.parent === node && n.parent_joint === k);
      return new Array<string>(N).fill(`i${item}n${child}`);
    },
    // centralized_magrpo: the joint prompt is the label, and every role's output the joint completion's label
    centralAdapter: { buildPrompt: (item) => item.prompt, parseCompletion: (c, _item, roles) => new Array<string>(roles).fill(c) },
  };
}

/** Replaces agent a's token sampler by the record: prompt label → its G recorded completions. */
function replaySampler(fx: Fixture, a: number): (prompts: readonly string[]) => TextSample[] {
  const queues = new Map<string, TextSample[]>();
  for (const [j, item] of fx.rollout.entries()) {
    for (const [k, n] of item.nodes.entries()) {
      queues.set(
        `i${j}n${k}`,
        n.completion_ids[a].map((ids, g) => ({
          promptIds: n.prompt_ids[a],
          completionIds: ids,
          text: `i${j}n${k}a${a}g${g}`,
          logprobs: n.logprobs[a][g],
          finishReason: 'stop_token' as const,
        })),
      );
    }
  }
  return (prompts) =>
    prompts.map((p) => {
      const next = queues.get(p)?.shift();
      if (!next) throw new Error(`agent ${a}: nothing recorded (left) for prompt ${p}`);
      return next;
    });
}

it('has the fixtures, made from the shipped models/micro', () => {
  assert.ok(fixtures.length >= 6, `${fixtures.length} fixtures; regenerate with ${REGENERATE}`);
  const digest = createHash('sha256')
    .update(readFileSync(join('models', 'micro', 'model.safetensors')))
    .digest('hex');
  for (const fx of fixtures) assert.equal(fx.model_sha256, digest, `${fx.case}: made from another models/micro; regenerate with ${REGENERATE}`);
});

const SETUPS: { name: string; backend: BackendName; dtype: DType; tol: number }[] = [
  { name: 'reference backend, float64', backend: 'reference', dtype: 'float64', tol: 1e-9 },
  { name: 'native backend, float32 (the production path)', backend: 'native', dtype: 'float32', tol: 1e-3 },
];

for (const { name, backend, dtype, tol } of SETUPS) {
  describe(`trainer vs PyTorch float64 on recorded rollouts, ${name}`, () => {
    before(() => {
      setBackend(backend);
      setDType(dtype);
    });
    after(() => setDType('float32'));

    for (const fx of fixtures) {
      it(fx.case, async () => {
        const sink = new MemorySink();
        const t = new MAGRPOTrainer({ task: replayTask(fx), model: fx.model, sinks: [sink], config: fx.config });
        for (const handle of t.agents) {
          const agent = (handle as LocalAgent).agent;
          agent.lm.sample = replaySampler(fx, handle.index);
          for (const [name, values] of Object.entries(fx.lora_init?.[handle.index] ?? {})) {
            const m = /^(.+)\.lora_([AB])\.weight$/.exec(name) as RegExpExecArray;
            const adapter = agent.lm.model.lora.get(m[1]);
            assert.ok(adapter, `no LoRA adapter on ${m[1]}`);
            (m[2] === 'A' ? adapter.A : adapter.B).data.set(values);
          }
          const heads = new Map((agent.valueHead?.params() ?? []).map((p) => [p.name as string, p]));
          assert.equal(heads.size > 0, fx.value_head_init !== undefined, `${fx.case}: a value head exactly when the case has one`);
          for (const [name, values] of Object.entries(fx.value_head_init?.[handle.index] ?? {})) (heads.get(name) as { data: Float64Array }).data.set(values);
        }
        await t.train();

        for (const [a, exp] of fx.expected.entries()) {
          const agent = (t.agents[a] as LocalAgent).agent;
          const who = `${fx.case} agent ${a}`;
          for (const key of ['loss', 'grad_norm', 'entropy', 'completion_length', 'lr'] as const) {
            const got = sink.series(`agent_${a}/${key}`).map((p) => p.value);
            assert.equal(got.length, exp.drains.length, `${who}: ${got.length} drains logged, PyTorch has ${exp.drains.length}`);
            for (const [d, e] of exp.drains.entries()) close(got[d], e[key], Math.abs(e[key]) + (key === 'loss' ? 1 : 0), `${who} drain ${d} ${key}`, tol);
          }
          // actor-critic cases: the value term on its own
          const valueLoss = sink.series(`agent_${a}/value_loss`).map((p) => p.value);
          assert.equal(valueLoss.length, exp.drains.filter((e) => e.value_loss !== undefined).length, `${who}: value_loss entries`);
          for (const [d, e] of exp.drains.entries())
            if (e.value_loss !== undefined) close(valueLoss[d], e.value_loss, Math.abs(e.value_loss) + 1, `${who} drain ${d} value_loss`, tol);
          assert.equal(agent.spec.totalSteps, exp.optimizer_steps, `${who}: LR schedule length`);
          const state = (agent.learner as LocalLearner).optimizer.state();
          assert.equal(state.step, exp.optimizer_steps, `${who}: optimizer steps`);
          const params = new Map([...agent.lm.model.trainableParams(), ...(agent.valueHead?.params() ?? [])].map((p) => [p.name as string, p]));
          assert.deepEqual([...params.keys()].sort(), Object.keys(exp.params).sort(), `${who}: trainable parameters`);
          for (const [name, s] of Object.entries(exp.params)) {
            compareSummary((params.get(name) as { data: ArrayLike<number> }).data, s.w, `${who} ${name} (updated weight)`, tol);
            compareSummary(state.buffers[name].m, s.m, `${who} ${name} (AdamW m)`, tol);
            compareSummary(state.buffers[name].v, s.v, `${who} ${name} (AdamW v)`, tol);
          }
        }
        await t.close();
      });
    }
  });
}
