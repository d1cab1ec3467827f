/**
 * The parts of iterative MADPO / MARLHF (CoMLRL MADPOIterTrainer / MARLHFIterTrainer,
 * comlrl/trainers/preference/iterative.py) that do not depend on the training loop: how each
 * iteration's pairs are formed against a comparator policy, which earlier iterations' pairs are
 * replayed, and the API comparator (an OpenAI-compatible endpoint such as `magrpo serve`).
 *
 * Per iteration, for each item: the current team samples C candidates per agent, the comparator
 * C' (comparator_num_candidates, default C); candidate k of the team meets candidate k of the
 * comparator (k < min(C, C')), and where their joint rewards differ the better one is the winner
 * (selectComparisonPairs). Replay then picks the pairs trained on from the iterations so far
 * (replayWeights, sampleReplay).
 */
import { z } from 'zod';
import type { Rng } from '../engine/rng.js';
import type { Prompt } from './task.js';

/** Option values as the reference spells them (its aliases are not accepted). */
export const COMPARATOR_POLICIES = ['current', 'current_copy', 'model', 'history', 'api'] as const;
export const REPLAY_MODES = ['current', 'nearest_k', 'all_history', 'lambda_decay'] as const;
export const COMPARISON_SELECTIONS = ['comparator_reward', 'reward_gap', 'all', 'random'] as const;
export type ComparisonSelection = (typeof COMPARISON_SELECTIONS)[number];
export type ReplayMode = (typeof REPLAY_MODES)[number];

/**
 * `trainer.iterative`: the reference's iterative keys (CoMLRL `_IterativePreferenceConfig`,
 * MADPOIterConfig, MARLHFIterConfig), with its defaults. Set (even to {}), the run is iterative
 * MADPO (algorithm madpo) or iterative MARLHF (an online algorithm); null, it is not.
 */
export const IterativeSchema = z.strictObject({
  num_iterations: z.number().int().min(1).default(6).describe('iterations: fresh pairs against the comparator, replay, training'),
  preference_num_candidates: z.number().int().min(1).max(4096).default(20).describe('C, completions each agent of the team samples per item and iteration'),
  preference_pairs_per_sample: z
    .number()
    .int()
    .min(1)
    .nullable()
    .default(4)
    .describe('comparison pairs kept per item (null = every one; pair_selection all ignores it)'),
  pair_selection: z
    .enum(COMPARISON_SELECTIONS)
    .default('comparator_reward')
    .describe("which comparisons are kept: the comparator's reward then the gap, the gap, all (candidate order), random"),
  comparator_policy: z
    .enum(COMPARATOR_POLICIES)
    .default('current')
    .describe(
      'who the team is compared with: current (the team itself, second draw), current_copy (a frozen copy of the current team), model (comparator_model_name / comparator_agents), history (the team comparator_history_k iterations back), api (an OpenAI-compatible endpoint)',
    ),
  comparator_num_candidates: z.number().int().min(1).max(4096).nullable().default(null).describe("C', the comparator's completions per item (null = C)"),
  comparator_model_name: z.string().min(1).nullable().default(null).describe('model: one model folder for every agent'),
  comparator_agents: z.array(z.string().min(1)).min(1).nullable().default(null).describe('model: one model folder per agent'),
  comparator_history_k: z
    .number()
    .int()
    .min(1)
    .nullable()
    .default(null)
    .describe('history: the team as it was this many iterations back (null = 1, the previous iteration; before the first: the starting team)'),
  comparator_generation_mode: z
    .enum(['decentralized', 'centralized'])
    .default('decentralized')
    .describe(
      "how the comparator writes a joint candidate: decentralized (each agent's comparator answers its own prompt) or centralized (one comparator answers one joint prompt over every agent's prompt, the task's centralized adapter or CoMLRL's <agent_i> tags, and the answer is split per agent; an untagged answer gives every agent an empty output)",
    ),
  comparator_centralized_agent_index: z
    .number()
    .int()
    .min(0)
    .default(0)
    .describe(
      'centralized: whose comparator writes the joint candidates (the team agent, comparator model or snapshot of this index; the API is asked as that agent)',
    ),
  comparator_api_url: z
    .string()
    .url()
    .nullable()
    .default(null)
    .describe('api: the URL requests are POSTed to (magrpo serve: http://host:port/v1/chat/completions, /v1/completions, /v1/messages or /v1/responses)'),
  comparator_api_format: z
    .enum(['generic', 'openai_chat', 'openai_completions', 'anthropic', 'openai_responses'])
    .default('generic')
    .describe(
      "api: openai_chat (messages), openai_completions (prompt), anthropic (Anthropic's Messages API: key as x-api-key, one candidate per request), openai_responses (OpenAI's Responses API: one candidate per request) or generic (the reference's own payload and response_field)",
    ),
  comparator_api_model: z
    .string()
    .nullable()
    .default(null)
    .describe('api: the "model" field of each request (null = none; anthropic and openai_responses need one)'),
  comparator_api_max_n_per_request: z.number().int().min(1).nullable().default(null).describe('api: most completions per request (null = all in one)'),
  comparator_api_timeout: z.number().positive().default(120).describe('api: seconds one request may take'),
  comparator_api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
    .nullable()
    .default(null)
    .describe('api: environment variable holding the key, sent as "Authorization: Bearer" (null = none)'),
  comparator_api_response_field: z.string().min(1).default('completions').describe('api generic: dotted path of the completions list in the answer'),
  comparator_api_extra_body: z.record(z.string(), z.unknown()).nullable().default(null).describe('api: fields merged into every request body'),
  preference_replay_mode: z
    .enum(REPLAY_MODES)
    .default('current')
    .describe("which iterations' pairs are trained on: current, nearest_k (the last k), all_history, lambda_decay (weights (1 − λ)λ^age)"),
  preference_replay_k: z.number().int().min(1).nullable().default(null).describe('nearest_k: k (required there, null elsewhere)'),
  preference_replay_lambda: z.number().min(0).max(1).nullable().default(null).describe('lambda_decay: λ (required there, null elsewhere)'),
  preference_replay_sample_size: z
    .number()
    .int()
    .min(1)
    .nullable()
    .default(null)
    .describe("pairs drawn from the replay per iteration (null = the iteration's own count); not with replay mode current"),
  preference_scoring_reward: z
    .enum(['task', 'reward_model'])
    .default('task')
    .describe("iterative MARLHF: what labels the candidates: the task's reward, or the previous iteration's reward model (the task's in the first)"),
  reward_model_name: z.string().min(1).nullable().default(null).describe("iterative MARLHF: the reward model's base model folder (null = agent 0's model)"),
  reward_learning_rate: z.number().positive().default(1e-5).describe('iterative MARLHF: AdamW learning rate of the reward model'),
  reward_num_train_epochs: z
    .number()
    .int()
    .min(1)
    .default(2)
    .describe("iterative MARLHF: passes over the iteration's pairs, reward model trained afresh each iteration"),
  reward_train_batch_size: z.number().int().min(1).default(1).describe('iterative MARLHF: pairs per reward-model step'),
  reward_max_length: z.number().int().min(1).nullable().default(null).describe('iterative MARLHF: tokens of a joint text kept (null = all)'),
  reward_freeze_backbone: z.boolean().default(false).describe("iterative MARLHF: train only the reward model's head"),
  drift_probe_items: z
    .number()
    .int()
    .min(0)
    .default(4)
    .describe("(magrpo) drift: the first iteration's candidates of this many items are re-scored after every iteration (0 = off)"),
});
export type IterativeOptions = z.output<typeof IterativeSchema>;

/** What `trainer.iterative` refuses, by key under it (rl/config.ts reports them). */
export function iterativeProblems(it: IterativeOptions): { path: string[]; message: string }[] {
  const out: { path: string[]; message: string }[] = [];
  const no = (key: string, message: string) => out.push({ path: ['iterative', key], message });
  const p = it.comparator_policy;
  if (p === 'model' && it.comparator_model_name === null && it.comparator_agents === null)
    no('comparator_policy', 'comparator_policy model needs comparator_model_name or comparator_agents');
  if (p !== 'model' && (it.comparator_model_name !== null || it.comparator_agents !== null))
    no(it.comparator_agents !== null ? 'comparator_agents' : 'comparator_model_name', 'only read with comparator_policy model');
  if (p !== 'history' && it.comparator_history_k !== null) no('comparator_history_k', 'only read with comparator_policy history');
  if (p === 'api' && it.comparator_api_url === null) no('comparator_api_url', 'comparator_policy api needs the URL of an OpenAI-compatible endpoint');
  const f = it.comparator_api_format;
  if (p === 'api' && (f === 'anthropic' || f === 'openai_responses') && it.comparator_api_model === null)
    no('comparator_api_model', `comparator_api_format ${f} needs the model to ask (its API has no default)`);
  const m = it.preference_replay_mode;
  if (m === 'nearest_k' && it.preference_replay_k === null) no('preference_replay_k', 'preference_replay_mode nearest_k needs k');
  if (m !== 'nearest_k' && it.preference_replay_k !== null && !(m === 'current' && it.preference_replay_k === 1))
    no('preference_replay_k', 'only read with preference_replay_mode nearest_k');
  if (m === 'lambda_decay' && it.preference_replay_lambda === null) no('preference_replay_lambda', 'preference_replay_mode lambda_decay needs λ');
  if (m !== 'lambda_decay' && it.preference_replay_lambda !== null) no('preference_replay_lambda', 'only read with preference_replay_mode lambda_decay');
  if (m === 'current' && it.preference_replay_sample_size !== null)
    no('preference_replay_sample_size', "replay mode current trains on the iteration's own pairs: set nearest_k, all_history or lambda_decay to draw a sample");
  return out;
}

/** One side of a comparison: the team's candidate k or the comparator's. */
export interface Side {
  source: 'current' | 'comparator';
  index: number;
}

/**
 * The reference's `_select_policy_comparison_pairs`: for k < min(C, C') with r_cur[k] ≠ r_cmp[k],
 * the better of the two wins. Ordered by `comparator_reward` (the comparator's reward, then the
 * gap, both descending), `reward_gap` (gap descending), `all` (k ascending) or `random`; all but
 * `all` keep `limit`. Ties in the sort keep k order (Python's stable sort).
 */
export function selectComparisonPairs(
  current: readonly number[],
  comparator: readonly number[],
  mode: ComparisonSelection,
  limit: number | null,
  rng: Rng,
): { winner: Side; loser: Side }[] {
  let cands: { gap: number; cmp: number; k: number; winner: Side; loser: Side }[] = [];
  for (let k = 0; k < Math.min(current.length, comparator.length); k++) {
    const gap = current[k] - comparator[k];
    if (gap === 0) continue;
    const cur: Side = { source: 'current', index: k };
    const cmp: Side = { source: 'comparator', index: k };
    cands.push({ gap: Math.abs(gap), cmp: comparator[k], k, ...(gap > 0 ? { winner: cur, loser: cmp } : { winner: cmp, loser: cur }) });
  }
  if (mode === 'random') rng.shuffle(cands);
  else if (mode === 'comparator_reward') cands = stableSort(cands, (a, b) => b.cmp - a.cmp || b.gap - a.gap);
  else if (mode === 'reward_gap') cands = stableSort(cands, (a, b) => b.gap - a.gap);
  if (mode !== 'all' && limit !== null) cands = cands.slice(0, limit);
  return cands.map(({ winner, loser }) => ({ winner, loser }));
}

function stableSort<T>(xs: T[], cmp: (a: T, b: T) => number): T[] {
  return xs
    .map((x, i) => ({ x, i }))
    .sort((a, b) => cmp(a.x, b.x) || a.i - b.i)
    .map((e) => e.x);
}

/**
 * Sampling weight of each iteration's pairs, oldest first, for `n` iterations so far: current and
 * nearest_k give the last 1 or k iterations equal weight (the others 0), all_history all equal,
 * lambda_decay (1 − λ)·λ^age normalised, age 0 the newest (λ = 1: equal; λ = 0: newest only).
 */
export function replayWeights(mode: ReplayMode, n: number, o: { k?: number | null; lambda?: number | null } = {}): number[] {
  if (n < 1) return [];
  const last = (k: number) => Array.from({ length: n }, (_, i) => (i >= n - k ? 1 : 0));
  if (mode === 'current') return last(1);
  if (mode === 'nearest_k') return last(o.k ?? 1);
  if (mode === 'all_history') return new Array<number>(n).fill(1);
  const lambda = o.lambda ?? 1;
  if (lambda === 1) return new Array<number>(n).fill(1 / n);
  const newestFirst = Array.from({ length: n }, (_, age) => (1 - lambda) * lambda ** age);
  const z = newestFirst.reduce((a, b) => a + b, 0);
  return newestFirst.map((w) => w / z).reverse();
}

/**
 * `size` pairs drawn from the iterations' pair sets (the reference's `_sample_replay_preferences`):
 * each draw picks a non-empty set with probability ∝ its weight; a set drawn c times gives c
 * distinct pairs when it has that many, else whole shuffled copies and then the rest without
 * replacement; the result is shuffled.
 */
export function sampleReplay<T>(sets: readonly (readonly T[])[], weights: readonly number[], size: number, rng: Rng): T[] {
  const eligible = sets.map((s, i) => ({ s, w: weights[i] ?? 0 })).filter((e) => e.s.length > 0 && e.w > 0);
  if (size <= 0 || eligible.length === 0) return [];
  const total = eligible.reduce((a, e) => a + e.w, 0);
  const counts = eligible.map(() => 0);
  for (let d = 0; d < size; d++) {
    let u = rng.next() * total;
    let j = 0;
    while (j < eligible.length - 1 && u >= eligible[j].w) u -= eligible[j++].w;
    counts[j]++;
  }
  const out: T[] = [];
  eligible.forEach((e, j) => {
    let left = counts[j];
    while (left > 0) {
      const take = Math.min(left, e.s.length);
      out.push(...rng.shuffle([...e.s]).slice(0, take));
      left -= take;
    }
  });
  return rng.shuffle(out);
}

/** The API comparator's settings (the reference's comparator_api_* keys that apply here). */
export interface ComparatorApi {
  /** Full URL requests are POSTed to (for `magrpo serve`: http://host:port/v1/chat/completions). */
  url: string;
  /**
   * openai_chat: chat completions, a prompt as the user message; openai_completions: text
   * completions; anthropic: Anthropic's Messages API; openai_responses: OpenAI's Responses API
   * (those two one candidate per request); generic: the reference's own payload.
   */
  format: 'openai_chat' | 'openai_completions' | 'anthropic' | 'openai_responses' | 'generic';
  model: string | null;
  /** Most candidates per request (null: all in one). */
  maxNPerRequest: number | null;
  timeoutS: number;
  /** The bearer token (read from comparator_api_key_env), or null. */
  apiKey: string | null;
  /** generic: dotted path of the completions list in the answer. */
  responseField: string;
  extraBody: Record<string, unknown> | null;
}

export interface ComparatorSampling {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  topK: number | null;
}

/** `n` completions of `prompt` from the endpoint, as many requests as maxNPerRequest needs; an empty or malformed answer is an error naming the URL. */
export async function apiCompletions(api: ComparatorApi, prompt: Prompt, n: number, s: ComparatorSampling, agent = 0): Promise<string[]> {
  const text = typeof prompt === 'string' ? prompt : null;
  const messages = text === null ? (prompt as readonly { role: string; content: string }[]) : [{ role: 'user', content: text }];
  // Anthropic's and OpenAI's Responses APIs have no `n`: one candidate per request.
  const single = api.format === 'anthropic' || api.format === 'openai_responses';
  const out: string[] = [];
  while (out.length < n) {
    const k = single ? 1 : Math.min(api.maxNPerRequest ?? n, n - out.length);
    const body =
      api.format === 'anthropic'
        ? anthropicBody(messages, s)
        : api.format === 'openai_responses'
          ? { input: messages, max_output_tokens: s.maxNewTokens, temperature: s.temperature, top_p: s.topP }
          : api.format === 'generic'
            ? {
                prompt: text ?? prompt,
                agent_idx: agent,
                num_return_sequences: k,
                max_new_tokens: s.maxNewTokens,
                temperature: s.temperature,
                top_p: s.topP,
                top_k: s.topK,
              }
            : {
                ...(api.format === 'openai_chat' ? { messages } : { prompt: text ?? prompt }),
                n: k,
                max_tokens: s.maxNewTokens,
                temperature: s.temperature,
                top_p: s.topP,
              };
    const payload = { ...body, ...(api.model ? { model: api.model } : {}), ...(api.extraBody ?? {}) };
    let res: Response;
    try {
      res = await fetch(api.url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...authHeaders(api) },
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(api.timeoutS * 1000),
      });
    } catch (e) {
      throw new Error(`comparator_api_url ${api.url}: request failed (${(e as Error).message})`);
    }
    const raw = await res.text();
    if (!res.ok) throw new Error(`comparator_api_url ${api.url}: HTTP ${res.status}: ${raw.slice(0, 500)}`);
    let data: unknown;
    try {
      data = JSON.parse(raw);
    } catch {
      throw new Error(`comparator_api_url ${api.url}: the answer is not JSON: ${raw.slice(0, 200)}`);
    }
    const got =
      api.format === 'generic'
        ? genericCompletions(data, api.responseField)
        : api.format === 'anthropic'
          ? anthropicTexts(data)
          : api.format === 'openai_responses'
            ? responsesTexts(data)
            : choiceTexts(data);
    if (got.length === 0) throw new Error(`comparator_api_url ${api.url}: no completions in the answer to a request for ${k}`);
    out.push(...got);
  }
  return out.slice(0, n);
}

/** The key as each API takes it: Anthropic's x-api-key (with the API version it requires), else a bearer token. */
function authHeaders(api: ComparatorApi): Record<string, string> {
  if (api.format === 'anthropic') return { 'anthropic-version': '2023-06-01', ...(api.apiKey ? { 'x-api-key': api.apiKey } : {}) };
  return api.apiKey ? { Authorization: `Bearer ${api.apiKey}` } : {};
}

/**
 * An Anthropic Messages request: system turns as its `system` field, top_p and top_k only where
 * they restrict sampling (newer models refuse temperature and top_p together at their defaults).
 */
function anthropicBody(messages: readonly { role: string; content: string }[], s: ComparatorSampling) {
  const system = messages.filter((m) => m.role === 'system').map((m) => m.content);
  return {
    max_tokens: s.maxNewTokens,
    messages: messages.filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content })),
    ...(system.length ? { system: system.join('\n\n') } : {}),
    temperature: s.temperature,
    ...(s.topP < 1 ? { top_p: s.topP } : {}),
    ...(s.topK !== null ? { top_k: s.topK } : {}),
  };
}

/** Anthropic answers: the text blocks of content[], joined. */
function anthropicTexts(data: unknown): string[] {
  const content = (data as { content?: unknown } | null)?.content;
  if (!Array.isArray(content)) return [];
  const texts = content.flatMap((b: { type?: unknown; text?: unknown }) => (b?.type === 'text' && typeof b.text === 'string' ? [b.text] : []));
  return texts.length ? [texts.join('')] : [];
}

/** Responses answers: the output_text parts of output[]'s messages, joined. */
function responsesTexts(data: unknown): string[] {
  const output = (data as { output?: unknown } | null)?.output;
  if (!Array.isArray(output)) return [];
  const texts = output.flatMap((item: { type?: unknown; content?: unknown }) =>
    item?.type === 'message' && Array.isArray(item.content)
      ? item.content.flatMap((p: { type?: unknown; text?: unknown }) => (p?.type === 'output_text' && typeof p.text === 'string' ? [p.text] : []))
      : [],
  );
  return texts.length ? [texts.join('')] : [];
}

/** OpenAI answers: choices[].message.content (chat) or choices[].text (completions). */
function choiceTexts(data: unknown): string[] {
  const choices = (data as { choices?: unknown } | null)?.choices;
  if (!Array.isArray(choices)) return [];
  return choices.flatMap((c: { message?: { content?: unknown }; text?: unknown }) =>
    typeof c?.message?.content === 'string' ? [c.message.content] : typeof c?.text === 'string' ? [c.text] : [],
  );
}

function genericCompletions(data: unknown, field: string): string[] {
  let v: unknown = data;
  for (const part of field.split('.')) v = (v as Record<string, unknown> | null)?.[part];
  if (!Array.isArray(v)) return [];
  return v.flatMap((x) => (typeof x === 'string' ? [x] : typeof x?.text === 'string' ? [x.text] : []));
}

/**
 * The pairs one iteration trains on, from every iteration's pairs so far (oldest first, the
 * current one last; the reference's `_select_iteration_preference_pairs`): replay mode current
 * takes the current pairs as they are; the others draw preference_replay_sample_size pairs (null:
 * the current count, or the newest non-empty iteration's when the current one has none).
 */
export function replayPairs<T>(store: readonly (readonly T[])[], it: IterativeOptions, rng: Rng): T[] {
  const current = store.at(-1) ?? [];
  if (it.preference_replay_mode === 'current') return [...current];
  const size = it.preference_replay_sample_size ?? (current.length || ([...store].reverse().find((s) => s.length > 0)?.length ?? 0));
  const weights = replayWeights(it.preference_replay_mode, store.length, { k: it.preference_replay_k, lambda: it.preference_replay_lambda });
  return sampleReplay(store, weights, size, rng);
}

/** One comparison as stored for replay: per agent its prompt and the winner's and loser's completion. */
export interface PairRecord {
  /** The training item (index in the dataset) the pair came from. */
  item: number;
  iteration: number;
  /** Per agent: the prompt as text (reward model) and as the agent's token ids (DPO). */
  prompts: string[];
  promptIds: number[][];
  /** Per agent: the winner's and the loser's completion, text and the agent's token ids. */
  chosen: { text: string; ids: number[] }[];
  rejected: { text: string; ids: number[] }[];
  /** Joint rewards of the winner and the loser. */
  rewards: [number, number];
}

/** A drift probe: per agent, fixed completions re-scored after every iteration. */
export interface DriftProbe {
  samples: { promptIds: number[]; completions: number[][] }[][];
  /** Per agent, per sample, per completion: Σ_t log π under the starting team and the last iteration's. */
  initial: number[][][];
  last: number[][][];
}

/** What an iterative run checkpoints besides the trainer's own state (rl/checkpoint.ts). */
export interface IterativeState {
  /** Iterations completed. */
  iteration: number;
  /** Every iteration's pairs, oldest first. */
  store: PairRecord[][];
  probe: DriftProbe | null;
}

/**
 * Drift of one agent between two scorings of the same probe completions: the mean over
 * completions of the per-token log-ratio (Σ_t log π_new − Σ_t log π_old) / |y| (empty ones
 * skipped). Under completions drawn from π_old this estimates −KL(π_old ‖ π_new) per token.
 */
export function meanLogRatio(lengths: readonly number[], now: readonly number[], before: readonly number[]): number {
  let sum = 0;
  let n = 0;
  lengths.forEach((len, k) => {
    if (len > 0) {
      sum += (now[k] - before[k]) / len;
      n++;
    }
  });
  return n === 0 ? 0 : sum / n;
}
