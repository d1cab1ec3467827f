/**
 * What a ready-made environment provides: the trainer Task (data, formatters, joint reward,
 * transitions), the paper's normalised metrics, and inference-only baselines, all evaluated by
 * one runner so trained teams and baselines land in the same table.
 */
import type { LanguageModel, TextSampleOptions } from '../model/pretrained.js';
import type { EvalEpisode, Prompt, Task } from '../rl/task.js';

/** Sampling settings for inference (baselines and `magrpo eval`). */
export type InferenceSampling = Omit<TextSampleOptions, 'rng'> & { seed: number };

/** One episode's result as the eval table sees it. */
export interface EpisodeResult {
  /** Index of the item in the eval split. */
  index: number;
  /** Final-turn completion of each role (agent 0, agent 1, ...), which the reward scores. */
  completions: string[];
  /** Total (processed) reward of the episode's last turn, and its named components. */
  reward: number;
  components: Record<string, number>;
  /** Wall time the method spent generating, in seconds (per the paper's timing rules). */
  responseSeconds: number;
  /** Tokens generated over every model call of the episode. */
  outputTokens: number;
}

/**
 * An inference-only way of solving the task without training (paper §5 baselines):
 * e.g. one model writing every part, agents in parallel, a sequential pipeline, a discussion.
 */
export interface Baseline<Item> {
  readonly name: string;
  readonly description: string;
  /** How many models it uses (1 for single-agent baselines). */
  readonly numModels: number;
  run(items: readonly Item[], models: readonly LanguageModel[], sampling: InferenceSampling): Promise<EpisodeResult[]>;
}

export interface Environment<Item> {
  readonly name: string;
  readonly description: string;
  readonly numAgents: number;
  /** The trainer task on a split of the environment's data (or user-supplied items). */
  task(opts?: { train?: readonly Item[]; eval?: readonly Item[] }): Task<Item>;
  /** Default train / eval items shipped with the project. */
  defaultSplits(): { train: Item[]; eval: Item[] };
  /** The paper's metrics for a set of scored episodes, in % where the paper reports %. */
  metrics(episodes: readonly EpisodeResult[], items: readonly Item[]): Record<string, number>;
  /** Inference-only baselines, by name. */
  readonly baselines: readonly Baseline<Item>[];
}

/**
 * `prompt_style: chat`: an environment's instruction prompt as the one user turn, which each
 * agent's chat template renders with the generation prompt (tokenizer.ts promptIds).
 */
export function userTurn(text: string): Prompt {
  return [{ role: 'user', content: text }];
}

/** Converts trainer eval episodes (last turn) to table rows. */
export function episodeResults<Item>(episodes: readonly EvalEpisode<Item>[]): EpisodeResult[] {
  return episodes.map((ep) => {
    const last = ep.turns[ep.turns.length - 1];
    return { index: ep.index, completions: last.completions, reward: last.reward, components: last.components, responseSeconds: 0, outputTokens: 0 };
  });
}

/** Unbiased pass@k (Chen et al., 2021): 1 − C(n−c, k) / C(n, k) for n samples with c correct. */
export function passAtK(n: number, c: number, k: number): number {
  if (k > n) throw new Error(`pass@${k} needs at least ${k} samples, got ${n}`);
  if (n - c < k) return 1;
  let prod = 1;
  for (let i = n - c + 1; i <= n; i++) prod *= 1 - k / i;
  return 1 - prod;
}
