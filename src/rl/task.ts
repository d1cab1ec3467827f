/**
 * A cooperative task: what users define. N agents each see a prompt made by their formatter, each
 * writes a completion, and ONE joint reward scores the team. Multi-turn tasks add a transition
 * that turns a turn's joint action into the next turn's prompts (CoMLRL's reward_func, formatters and external_transition, in TS form:
 * one object argument instead of Python signature inspection).
 */

import type { ChatMessage, Prompt } from '../model/tokenizer.js';

export type { ChatMessage, Prompt } from '../model/tokenizer.js';

/**
 * Turns a dataset item into agent i's prompt. Later turns also get the transition's prompt. A
 * formatter returns text, or a list of `{role, content}` messages (TRL's conversational prompts)
 * that each agent's chat template renders with the generation prompt (tokenizer.ts promptIds).
 */
export type Formatter<Item> = (item: Item, externalPrompt?: string) => Prompt;

/** What a formatter may return: a string, or a non-empty list of {role, content} messages whose fields are strings. */
export function isPrompt(v: unknown): v is Prompt {
  if (typeof v === 'string') return true;
  const message = (m: unknown) => typeof (m as ChatMessage | null)?.role === 'string' && typeof (m as ChatMessage).content === 'string';
  return Array.isArray(v) && v.length > 0 && v.every(message);
}

/**
 * A prompt as the task's callbacks and records see it (RewardInput.prompts, the transition's
 * histories, samples.jsonl): text as it is, messages as their contents joined by blank lines. The
 * template's markup is the agent's, not the task's; the recorded prompt ids hold it exactly.
 */
export function promptText(prompt: Prompt): string {
  return typeof prompt === 'string' ? prompt : prompt.map((m) => m.content).join('\n\n');
}

/** Everything a reward function may look at for one joint action. */
export interface RewardInput<Item> {
  /** One completion per agent, in agent order. */
  completions: readonly string[];
  /** The prompt each agent saw, as text (promptText). */
  prompts: readonly string[];
  item: Item;
  /** 0-based turn of this joint action. */
  turn: number;
}

/** A reward value, optionally with named components that are logged separately. */
export type RewardValue = number | { reward: number; components?: Record<string, number> };

export type RewardFn<Item> = (input: RewardInput<Item>) => RewardValue | Promise<RewardValue>;

/** A weighted reward component: total = Σ weight · fn. */
export interface RewardComponent<Item> {
  name: string;
  weight: number;
  fn: (input: RewardInput<Item>) => number | Promise<number>;
}

export interface TransitionInput<Item> {
  /** The item's original prompt (`item.prompt` when present, else ""). */
  prompt: string;
  /** This branch's completions, one per agent. */
  completions: readonly string[];
  numAgents: number;
  /** Per agent: prompts on this branch so far, including the current turn. */
  promptHistory: readonly (readonly string[])[];
  /** Per agent: responses on this branch so far, including the current turn. */
  responseHistory: readonly (readonly string[])[];
  item: Item;
  /** Turn that just finished (0-based). */
  turn: number;
}

/** Returns the N prompts of the next turn. */
export type Transition<Item> = (input: TransitionInput<Item>) => readonly string[] | Promise<readonly string[]>;

/** Extra evaluation metrics (e.g. pass@k) computed from whole eval episodes. */
export type EvalMetricsHook<Item> = (episodes: EvalEpisode<Item>[]) => Record<string, number> | Promise<Record<string, number>>;

export interface EvalEpisode<Item> {
  item: Item;
  /** Index of the item in the eval set and of the sample (0 ≤ sample < eval_samples_per_item). */
  index: number;
  sample: number;
  turns: { prompts: string[]; completions: string[]; reward: number; components: Record<string, number> }[];
}

export interface Task<Item> {
  /** Name used in logs and run directories. */
  name?: string;
  /** Training items, visited in order every epoch (batch size 1, no shuffling, as CoMLRL's `get_train_dataloader`). */
  dataset: readonly Item[];
  evalDataset?: readonly Item[];
  /** One formatter for all agents, or one per agent. Default: `item.prompt` or the external prompt. */
  formatters?: Formatter<Item> | readonly Formatter<Item>[];
  /** The joint reward: a function, or weighted named components. */
  reward: RewardFn<Item> | readonly RewardComponent<Item>[];
  /** Optional post-processing of every reward (applied after the config's reward_processor). */
  rewardProcessor?: (r: number) => number;
  /** Required when num_turns > 1. */
  transition?: Transition<Item>;
  evalMetrics?: EvalMetricsHook<Item>;
  /**
   * Seconds an asynchronous reward, reward component, reward processor or transition may take
   * per call before training stops with an error naming it (default 600). A synchronous callback
   * that never returns cannot be interrupted from the training thread: keep those bounded.
   */
  callbackTimeoutSeconds?: number;
  /**
   * What the agents write: `prose` (default) also gets the text fluency metrics (word validity,
   * distinct-2, repetition) next to ref NLL; `code` gets ref NLL only.
   */
  outputKind?: 'prose' | 'code';
  /**
   * `algorithm: centralized_magrpo`: how one joint prompt is built from the roles' prompts and
   * the joint completion split back into one output per role (default: the reference library's
   * tagged adapter, `<agent_i>…</agent_i>`; rl/algorithms/centralized.ts).
   */
  centralAdapter?: CentralAdapter<Item>;
}

/** How one joint prompt is built from the roles' prompts and one joint completion split back (CoMLRL's CentralizedComparatorAdapter). */
export interface CentralAdapter<Item> {
  buildPrompt(item: Item, rolePrompts: readonly string[]): string;
  /** One output per role; null when the completion has none of the sections (every role then gets ""). */
  parseCompletion(completion: string, item: Item, roles: number): readonly string[] | null;
}

/** The default formatter: the external prompt if any, else `item.prompt`, else "". */
export function defaultFormatter<Item>(item: Item, externalPrompt?: string): string {
  if (externalPrompt !== undefined) return externalPrompt;
  const p = (item as { prompt?: unknown } | null)?.prompt;
  return typeof p === 'string' ? p : '';
}

export function formattersFor<Item>(task: Task<Item>, numAgents: number): Formatter<Item>[] {
  const f = task.formatters;
  if (f === undefined) return Array.from({ length: numAgents }, () => defaultFormatter);
  if (typeof f === 'function') return Array.from({ length: numAgents }, () => f);
  if (f.length !== numAgents) throw new TaskError('formatters', `got ${f.length} formatters for ${numAgents} agents; give one, or exactly num_agents`);
  return [...f];
}

/** A task definition or callback problem, naming the field or callback. */
export class TaskError extends Error {
  override readonly name = 'TaskError';
  readonly code = 'INVALID_TASK';

  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}
