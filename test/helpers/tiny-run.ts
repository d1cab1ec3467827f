/**
 * What the trainer tests on tiny models (tiny-model.ts) set up alike: a tiny model made for a
 * describe block, one-token sampling without evaluation, the "say a" and "same word" tasks, the
 * actor-critic runs' settings, and a copy and a comparison of agents' weights.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import type { Task } from '../../src/rl/task.js';
import type { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { makeTinyModel } from './tiny-model.js';

export type Item = { prompt: string };

/** One token per completion, sampled at temperature 1 from the whole distribution; no evaluation; every entry logged. */
export const ONE_TOKEN = {
  max_new_tokens: 1,
  temperature: 1,
  top_k: null,
  top_p: 1,
  eval_interval: 0,
  logging_steps: 1,
} as const satisfies MagrpoConfigInput;

/**
 * A tiny model (`makeTinyModel(opts)`) on the native backend for the tests of the calling describe
 * block: made before them and removed after; its folder is `.dir` once they run.
 */
export function useTinyModel(opts: Parameters<typeof makeTinyModel>[0] = {}): { readonly dir: string } {
  const model = { dir: '' };
  before(() => {
    setBackend('native');
    model.dir = makeTinyModel(opts);
  });
  after(() => rmSync(model.dir, { recursive: true, force: true }));
  return model;
}

/** `n` items, each the prompt "go". */
export const goItems = (n: number): Item[] => Array.from({ length: n }, () => ({ prompt: 'go' }));

/** Each agent earns half a point for saying "a" (`n` items). */
export const sayA = (n: number): Task<Item> => ({
  dataset: goItems(n),
  reward: ({ completions }) => completions.filter((c) => c === 'a').length / 2,
});

/** Coordination game: the team scores 1 when both agents say the same (non-empty) word (`n` items). */
export const sameWord = (n: number): Task<Item> => ({
  dataset: goItems(n),
  reward: ({ completions }) => (completions[0] !== '' && completions[0] === completions[1] ? 1 : 0),
});

/** The actor-critic runs on `sayA(8)`: one token, buffers of 4, learning rate 0.03, 10 epochs, no fluency metrics. */
export const SAY_A_RUN = {
  ...ONE_TOKEN,
  train_batch_size: 4,
  agent_learning_rate: 0.03,
  num_train_epochs: 10,
  fluency_metrics: false,
} as const satisfies MagrpoConfigInput;

export const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A copy of agent i's weights, by name. */
export const agentWeights = (t: MAGRPOTrainer<Item>, i: number): Map<string, Float32Array> =>
  new Map([...(t.agents[i] as LocalAgent).agent.lm.model.params].map(([k, p]) => [k, Float32Array.from(p.data)]));

/** The first `agents` agents of `b` hold exactly the weights of `a`'s (a resumed run against an uninterrupted one). */
export function assertSameWeights(a: MAGRPOTrainer<Item>, b: MAGRPOTrainer<Item>, agents = 2): void {
  for (let i = 0; i < agents; i++) {
    const wb = agentWeights(b, i);
    for (const [k, v] of agentWeights(a, i)) assert.deepEqual(v, wb.get(k), `agent ${i} ${k}`);
  }
}

/** A resumed run ended where the uninterrupted one did: the same env step, the same weights bit for bit. Closes both. */
export async function assertResumedSame(full: MAGRPOTrainer<Item>, resumed: MAGRPOTrainer<Item>): Promise<void> {
  assert.equal(resumed.envStep, full.envStep);
  assertSameWeights(full, resumed);
  await full.close();
  await resumed.close();
}
