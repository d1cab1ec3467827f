/**
 * Shared by the tests that replay PyTorch float64 fixtures (scripts/make_*_fixtures.py) through
 * the trainers: the fields every fixture has, loading the fixtures of a folder, checking they were
 * made from the shipped models/micro, the backends they run on, tolerance comparisons, the
 * scripts' tensor summaries, and a token sampler that hands out recorded completions.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type BackendName, type DType, setBackend, setDType } from '../../src/engine/runtime.js';
import type { TextSample } from '../../src/model/pretrained.js';
import { jointIndices } from '../../src/rl/advantage.js';
import type { PolicyAgent } from '../../src/rl/agent.js';
import type { LocalLearner } from '../../src/rl/learner.js';
import type { Task } from '../../src/rl/task.js';

/** A tensor as the scripts store it: whole (≤ 64 entries), or Σx², Σx·h(j) and a few entries. */
export type Summary = { full: number[] } | { n: number; sumsq: number; proj: number; at: [number, number][] };
/** Per parameter (by TRL/PEFT name): the updated weight and the AdamW moments. */
export type ParamSummaries = Record<string, { w: Summary; m: Summary; v: Summary }>;

/** What every fixture names: its case, and the model it was made from with that model's SHA-256. */
export interface FixtureCase {
  case: string;
  model: string;
  model_sha256: string;
}

/** What the trainer logs per drain (optimizer step), as the scripts computed it. */
export interface DrainMetrics {
  loss: number;
  grad_norm: number;
  entropy: number;
  completion_length: number;
  lr: number;
}

/** One agent's expected run: per drain its metrics, the optimizer steps, and the updated parameters. */
export interface AgentExpected<D extends DrainMetrics = DrainMetrics> {
  drains: D[];
  optimizer_steps: number;
  params: ParamSummaries;
}

/** Every fixture (*.json) of `dir`, by file name. */
export function loadFixtures<F>(dir: string): F[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as F);
}

/** The fixtures of `dir`, and a test that there are at least `min`, made from the shipped models/micro. */
export function parityFixtures<F extends FixtureCase>(dir: string, min: number, regenerate: string): F[] {
  const fixtures = loadFixtures<F>(dir);
  it('has the fixtures, made from the shipped models/micro', () => assertFromShippedMicro(fixtures, min, regenerate));
  return fixtures;
}

/** Where the fixtures are replayed: the float64 reference backend to 1e-9, the production path to 1e-3. */
export const PARITY_SETUPS: readonly { name: string; backend: BackendName; dtype: DType; tol: number }[] = [
  { name: 'reference backend, float64', backend: 'reference', dtype: 'float64', tol: 1e-9 },
  { name: 'native backend, float32 (the production path)', backend: 'native', dtype: 'float32', tol: 1e-3 },
];

/** One describe block per PARITY_SETUPS entry, titled "<title>, <setup name>", on its backend and dtype (float32 again after); `body` gets its tolerance. */
export function describeOnSetups(title: string, body: (tol: number) => void): void {
  for (const { name, backend, dtype, tol } of PARITY_SETUPS) {
    describe(`${title}, ${name}`, () => {
      before(() => {
        setBackend(backend);
        setDType(dtype);
      });
      after(() => setDType('float32'));
      body(tol);
    });
  }
}

/** At least `min` fixtures, each made from the models/micro this checkout ships. */
export function assertFromShippedMicro(fixtures: readonly { case: string; model_sha256: string }[], min: number, regenerate: string): void {
  assert.ok(fixtures.length >= min, `${fixtures.length} fixtures; regenerate with ${regenerate}`);
  const digest = createHash('sha256')
    .update(readFileSync(join('models', 'micro', 'model.safetensors')))
    .digest('hex');
  for (const fx of fixtures) assert.equal(fx.model_sha256, digest, `${fx.case}: made from another models/micro; regenerate with ${regenerate}`);
}

/** |a − b| ≤ tol · scale, with a message naming what differs. */
export function close(actual: number, expected: number, scale: number, what: string, tol: number): void {
  assert.ok(Number.isFinite(actual), `${what}: got ${actual}`);
  assert.ok(Math.abs(actual - expected) <= tol * Math.max(scale, 1e-12), `${what}: magrpo ${actual}, PyTorch ${expected} (diff ${actual - expected})`);
}

/** The scripts' projection weights: h(j) = ((j · 2654435761) mod 2^32) / 2^32 − 0.5. */
const h = (j: number) => ((j * 2654435761) % 4294967296) / 4294967296 - 0.5;

export function compareSummary(x: ArrayLike<number>, s: Summary, what: string, tol: number): void {
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

/** The trainable parameters (by name), their AdamW moments, against the fixture's summaries. */
export function compareParams(
  params: Map<string, { data: ArrayLike<number> }>,
  buffers: Record<string, Record<string, ArrayLike<number>>>,
  exp: ParamSummaries,
  who: string,
  tol: number,
): void {
  assert.deepEqual([...params.keys()].sort(), Object.keys(exp).sort(), `${who}: trainable parameters`);
  for (const [name, s] of Object.entries(exp)) {
    compareSummary((params.get(name) as { data: ArrayLike<number> }).data, s.w, `${who} ${name} (updated weight)`, tol);
    compareSummary(buffers[name].m, s.m, `${who} ${name} (AdamW m)`, tol);
    compareSummary(buffers[name].v, s.v, `${who} ${name} (AdamW v)`, tol);
  }
}

/**
 * Agent `a`'s logged metrics (`series(key)`: the values of a metric, in order) against each of
 * PyTorch's drains; `unit` names one in messages (a drain, an iterative step).
 */
export function compareDrains(series: (key: string) => number[], a: number, drains: readonly DrainMetrics[], who: string, tol: number, unit = 'drain'): void {
  for (const key of ['loss', 'grad_norm', 'entropy', 'completion_length', 'lr'] as const) {
    const got = series(`agent_${a}/${key}`);
    assert.equal(got.length, drains.length, `${who}: ${got.length} ${unit}s logged, PyTorch has ${drains.length}`);
    for (const [d, e] of drains.entries()) close(got[d], e[key], Math.abs(e[key]) + (key === 'loss' ? 1 : 0), `${who} ${unit} ${d} ${key}`, tol);
  }
}

/** An in-process agent's optimizer steps, updated weights (with its value head's) and AdamW moments against PyTorch's. */
export function compareAgentState(agent: PolicyAgent, exp: AgentExpected, who: string, tol: number): void {
  const state = (agent.learner as LocalLearner).optimizer.state();
  assert.equal(state.step, exp.optimizer_steps, `${who}: optimizer steps`);
  const params = new Map([...agent.lm.model.trainableParams(), ...(agent.valueHead?.params() ?? [])].map((p) => [p.name as string, p]));
  compareParams(params, state.buffers, exp.params, who, tol);
}

/** A replacement for `lm.sample` of agent `a`: per prompt text, the recorded completions in order. */
export function queueSampler(queues: Map<string, TextSample[]>, a: number): (prompts: readonly string[]) => TextSample[] {
  return (prompts) =>
    prompts.map((p) => {
      const next = queues.get(p)?.shift();
      if (!next) throw new Error(`agent ${a}: nothing recorded (left) for prompt ${p}`);
      return next;
    });
}

/** One node of a rollout the scripts recorded: per agent its prompt ids and G completions (ids, sampling log-probs); the joint rewards. */
export interface RecordedNode {
  turn: number;
  parent: number | null;
  parent_joint: number | null;
  prompt_ids: number[][];
  completion_ids: number[][][];
  logprobs: number[][][];
  rewards: number[];
}
export type RecordedRollout = { nodes: RecordedNode[] }[];

/**
 * The trainer's task for a recorded rollout: item j's prompt is the label `i<j>n0`, completion g of
 * agent a at node k the label `i<j>n<k>a<a>g<g>`; rewards and transitions look the labels up.
 * Centralized MAGRPO: the joint prompt is the label, and every role's output the joint completion's.
 */
export function replayTask(
  rollout: RecordedRollout,
  numAgents: number,
  numGenerations: number,
  jointMode: 'aligned' | 'cross' = 'aligned',
): Task<{ prompt: string }> {
  const joint = jointIndices(jointMode, numAgents, numGenerations);
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
    dataset: rollout.map((_, j) => ({ prompt: `i${j}n0` })),
    reward: ({ completions }) => {
      const { item, node, k } = locate(completions);
      return rollout[item].nodes[node].rewards[k];
    },
    transition: ({ completions }) => {
      const { item, node, k } = locate(completions);
      const child = rollout[item].nodes.findIndex((n) => n.parent === node && n.parent_joint === k);
      return new Array<string>(numAgents).fill(`i${item}n${child}`);
    },
    centralAdapter: { buildPrompt: (item) => item.prompt, parseCompletion: (c, _item, roles) => new Array<string>(roles).fill(c) },
  };
}

/** Agent a's token sampler replaced by the record: prompt label → its G recorded completions, labelled as replayTask reads them. */
export function rolloutSampler(rollout: RecordedRollout, a: number): (prompts: readonly string[]) => TextSample[] {
  const queues = new Map<string, TextSample[]>();
  for (const [j, item] of rollout.entries())
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
  return queueSampler(queues, a);
}

type Data = { data: Float64Array | Float32Array };

/** Sets a model's LoRA factors and a value head from a fixture's init, by TRL/PEFT name. */
export function setInit(model: { lora: Map<string, { A: Data; B: Data }> }, head: { weight: Data; bias: Data } | null, init: Record<string, number[]>): void {
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
