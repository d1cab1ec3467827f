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
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import type { TextSample } from '../../src/model/pretrained.js';
import { jointIndices } from '../../src/rl/advantage.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import { jointCriticText } from '../../src/rl/algorithms/maac.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import type { LocalLearner } from '../../src/rl/learner.js';
import { MemorySink } from '../../src/rl/metrics.js';
import type { Task } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';

const DIR = join('test', 'fixtures', 'actor-critic');
const REGENERATE = '.cache/venv-learner/bin/python scripts/make_actor_critic_fixtures.py';
const TOL = 1e-9;

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
type Params = Record<string, { w: Summary; m: Summary; v: Summary }>;
interface Fixture {
  case: string;
  model: string;
  model_sha256: string;
  config: MagrpoConfigInput & { num_agents: number; num_generations: number };
  lora_init: Record<string, number[]>[] | null;
  critic_init: Record<string, number[]>[];
  joint_inputs: { texts: string[]; ids: number[][] }[][] | null;
  rollout: { nodes: RecordedNode[] }[];
  expected: {
    drains: { loss: number; grad_norm: number; entropy: number; completion_length: number; lr: number }[];
    optimizer_steps: number;
    params: Params;
  }[];
  critics: { drains: { value_loss: number; grad_norm: number }[]; optimizer_steps: number; params: Params }[];
}

const fixtures = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => JSON.parse(readFileSync(join(DIR, f), 'utf8')) as Fixture);

function close(actual: number, expected: number, scale: number, what: string): void {
  assert.ok(Number.isFinite(actual), `${what}: got ${actual}`);
  assert.ok(Math.abs(actual - expected) <= TOL * Math.max(scale, 1e-12), `${what}: magrpo ${actual}, PyTorch ${expected} (diff ${actual - expected})`);
}

const h = (j: number) => ((j * 2654435761) % 4294967296) / 4294967296 - 0.5;

function compareSummary(x: ArrayLike<number>, s: Summary, what: string): void {
  if ('full' in s) {
    assert.equal(x.length, s.full.length, what);
    const scale = Math.sqrt(s.full.reduce((a, v) => a + v * v, 0) / s.full.length);
    for (let j = 0; j < x.length; j++) close(x[j], s.full[j], scale, `${what}[${j}]`);
    return;
  }
  assert.equal(x.length, s.n, what);
  let sumsq = 0;
  let proj = 0;
  for (let j = 0; j < x.length; j++) {
    sumsq += x[j] * x[j];
    proj += x[j] * h(j);
  }
  close(sumsq, s.sumsq, s.sumsq, `${what} Σx²`);
  close(proj, s.proj, Math.sqrt(s.sumsq), `${what} Σx·h`);
  const rms = Math.sqrt(s.sumsq / s.n);
  for (const [j, v] of s.at) close(x[j], v, Math.max(Math.abs(v), rms), `${what}[${j}]`);
}

function compareParams(params: Map<string, { data: ArrayLike<number> }>, buffers: Record<string, Record<string, ArrayLike<number>>>, exp: Params, who: string) {
  assert.deepEqual([...params.keys()].sort(), Object.keys(exp).sort(), `${who}: trainable parameters`);
  for (const [name, s] of Object.entries(exp)) {
    compareSummary((params.get(name) as { data: ArrayLike<number> }).data, s.w, `${who} ${name} (updated weight)`);
    compareSummary(buffers[name].m, s.m, `${who} ${name} (AdamW m)`);
    compareSummary(buffers[name].v, s.v, `${who} ${name} (AdamW v)`);
  }
}

/** The trainer's task for a recorded rollout: prompts and completions are labels that point into the record. */
function replayTask(fx: Fixture): Task<{ prompt: string }> {
  const N = fx.config.num_agents;
  const joint = jointIndices('aligned', N, fx.config.num_generations);
  const locate = (completions: readonly string[]) => {
    const parsed = completions.map((c) => (/^i(\d+)n(\d+)a(\d+)g(\d+)$/.exec(c) as RegExpExecArray).slice(1).map(Number));
    const [item, node] = parsed[0];
    return { item, node, k: joint.findIndex((idx) => idx.every((g, a) => g === parsed[a][3])) };
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
  };
}

/** Agent a's token sampler replaced by the record: prompt label → its G recorded completions. */
function replaySampler(fx: Fixture, a: number): (prompts: readonly string[]) => TextSample[] {
  const queues = new Map<string, TextSample[]>();
  for (const [j, item] of fx.rollout.entries())
    for (const [k, n] of item.nodes.entries())
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
  return (prompts) =>
    prompts.map((p) => {
      const next = queues.get(p)?.shift();
      if (!next) throw new Error(`agent ${a}: nothing recorded (left) for prompt ${p}`);
      return next;
    });
}

/** Sets named tensors of a model's LoRA adapters and a value head from a fixture's init. */
function setInit(
  model: { lora: Map<string, { A: { data: Float64Array | Float32Array }; B: { data: Float64Array | Float32Array } }> },
  head: { weight: { data: Float64Array | Float32Array }; bias: { data: Float64Array | Float32Array } } | null,
  init: Record<string, number[]>,
): void {
  for (const [name, values] of Object.entries(init)) {
    if (name === 'v_head.summary.weight') (head as NonNullable<typeof head>).weight.data.set(values);
    else if (name === 'v_head.summary.bias') (head as NonNullable<typeof head>).bias.data.set(values);
    else {
      const m = /^(.+)\.lora_([AB])\.weight$/.exec(name) as RegExpExecArray;
      const adapter = model.lora.get(m[1]);
      assert.ok(adapter, `no LoRA adapter on ${m[1]}`);
      (m[2] === 'A' ? adapter.A : adapter.B).data.set(values);
    }
  }
}

it('has the fixtures, made from the shipped models/micro', () => {
  assert.ok(fixtures.length >= 3, `${fixtures.length} fixtures; regenerate with ${REGENERATE}`);
  const digest = createHash('sha256')
    .update(readFileSync(join('models', 'micro', 'model.safetensors')))
    .digest('hex');
  for (const fx of fixtures) assert.equal(fx.model_sha256, digest, `${fx.case}: made from another models/micro; regenerate with ${REGENERATE}`);
});

describe('critic models vs PyTorch float64 on recorded rollouts, reference backend', () => {
  before(() => {
    setBackend('reference');
    setDType('float64');
  });
  after(() => setDType('float32'));

  for (const fx of fixtures) {
    it(fx.case, async () => {
      const sink = new MemorySink();
      const t = new MAGRPOTrainer({ task: replayTask(fx), model: fx.model, sinks: [sink], config: fx.config });
      const critics = t.critics?.models ?? [];
      assert.equal(critics.length, fx.critic_init.length, `${fx.case}: critic models`);
      for (const handle of t.agents) {
        const agent = (handle as LocalAgent).agent;
        assert.equal(agent.valueHead, null, 'the actors carry no value head');
        agent.lm.sample = replaySampler(fx, handle.index);
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
          for (const [d, e] of exp.drains.entries()) close(got[d], e[key], Math.abs(e[key]) + (key === 'loss' ? 1 : 0), `${who} drain ${d} ${key}`);
        }
        const state = (agent.learner as LocalLearner).optimizer.state();
        assert.equal(state.step, exp.optimizer_steps, `${who}: optimizer steps`);
        compareParams(new Map(agent.lm.model.trainableParams().map((p) => [p.name as string, p])), state.buffers, exp.params, who);
      }
      const shared = fx.config.algorithm === 'maac';
      for (const [k, exp] of fx.critics.entries()) {
        const who = `${fx.case} critic ${shared ? '(shared)' : k}`;
        const [vl, gn] = shared ? ['critic/value_loss', 'critic/grad_norm'] : [`agent_${k}/value_loss`, `agent_${k}/critic_grad_norm`];
        const got = [sink.series(vl).map((p) => p.value), sink.series(gn).map((p) => p.value)];
        assert.equal(got[0].length, exp.drains.length, `${who}: value_loss entries`);
        for (const [d, e] of exp.drains.entries()) {
          close(got[0][d], e.value_loss, Math.abs(e.value_loss) + 1, `${who} drain ${d} value_loss`);
          close(got[1][d], e.grad_norm, Math.abs(e.grad_norm), `${who} drain ${d} grad_norm`);
        }
        const critic = critics[k];
        const state = critic.optimizer.state();
        assert.equal(state.step, exp.optimizer_steps, `${who}: optimizer steps`);
        compareParams(
          new Map([...critic.lm.model.trainableParams(), ...critic.head.params()].map((p) => [p.name as string, p])),
          state.buffers,
          exp.params,
          who,
        );
      }
      await t.close();
    });
  }
});
