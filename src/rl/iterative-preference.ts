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
import type { Rng } from '../engine/rng.js';
import type { Prompt } from './task.js';

/** Option values as the reference spells them (its aliases are not accepted). */
export const COMPARATOR_POLICIES = ['current', 'current_copy', 'model', 'history', 'api'] as const;
export const REPLAY_MODES = ['current', 'nearest_k', 'all_history', 'lambda_decay'] as const;
export const COMPARISON_SELECTIONS = ['comparator_reward', 'reward_gap', 'all', 'random'] as const;
export type ComparisonSelection = (typeof COMPARISON_SELECTIONS)[number];
export type ReplayMode = (typeof REPLAY_MODES)[number];

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
  /** openai_chat: chat completions, a prompt as the user message; openai_completions: text completions; generic: the reference's own payload. */
  format: 'openai_chat' | 'openai_completions' | 'generic';
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
  const out: string[] = [];
  while (out.length < n) {
    const k = Math.min(api.maxNPerRequest ?? n, n - out.length);
    const body =
      api.format === 'generic'
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
            ...(api.format === 'openai_chat' ? { messages: text === null ? prompt : [{ role: 'user', content: text }] } : { prompt: text ?? prompt }),
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
        headers: { 'Content-Type': 'application/json', ...(api.apiKey ? { Authorization: `Bearer ${api.apiKey}` } : {}) },
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
    const got = api.format === 'generic' ? genericCompletions(data, api.responseField) : choiceTexts(data);
    if (got.length === 0) throw new Error(`comparator_api_url ${api.url}: no completions in the answer to a request for ${k}`);
    out.push(...got);
  }
  return out.slice(0, n);
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
