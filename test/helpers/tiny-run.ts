/**
 * What the trainer tests on tiny models (tiny-model.ts) set up alike: one-token sampling without
 * evaluation, the "say a" and "same word" tasks, and a copy of an agent's weights.
 */
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import type { Task } from '../../src/rl/task.js';
import type { MAGRPOTrainer } from '../../src/rl/trainer.js';

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

/** A copy of agent i's weights, by name. */
export const agentWeights = (t: MAGRPOTrainer<Item>, i: number): Map<string, Float32Array> =>
  new Map([...(t.agents[i] as LocalAgent).agent.lm.model.params].map(([k, p]) => [k, Float32Array.from(p.data)]));
