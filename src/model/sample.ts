/**
 * Batched autoregressive sampling with a KV cache. Prompts of different lengths are left-padded
 * (positions = index among real tokens, padding masked out), so one prefill serves the batch;
 * sequences that finish drop out of the decode batch. A prompt that occurs several times in the
 * batch (the G completions of a group) is prefilled once and its cache row copied to each of its
 * sequences. The numbers are those of prefilling every copy up to the products' rounding for another
 * row count: the same bits on the reference backend, log-probs within ~1e-6 with OpenBLAS.
 */
import type { FloatArray } from '../engine/backend.js';
import { withPackedWeights } from '../engine/packed.js';
import { phase } from '../engine/profile.js';
import { Rng } from '../engine/rng.js';
import { alloc, backend } from '../engine/runtime.js';
import { noGrad } from '../engine/tensor.js';
import type { CausalLM } from './transformer.js';

/**
 * The sampling knobs, defined here once for every layer: `LanguageModel.sample` (pretrained.ts),
 * the trainer's samplers (rl/sampler.ts), the OpenAI-compatible client (rollout/openai.ts) and
 * server (serve/engine.ts) take this type or a `Pick`/extension of it. The wire format's snake_case
 * names (max_tokens, top_p, ...) are mapped to these at the HTTP boundary only.
 */
export interface SampleOptions {
  /** Upper bound on generated tokens per sequence. */
  maxNewTokens: number;
  /** 0 means greedy (argmax). */
  temperature?: number;
  /** Keep only the k most likely tokens (null/0 = off). */
  topK?: number | null;
  /** Nucleus sampling: keep the smallest set of tokens whose probability reaches p (1 = off). */
  topP?: number;
  /** Generation stops after any of these tokens (the token is kept in `tokens`). */
  stopTokenIds?: readonly number[];
  /** Generation stops once the decoded completion contains one of these; `text` is cut before it. */
  stopStrings?: readonly string[];
  /** Decoder for stop strings and `texts`; required when stopStrings are given. */
  decode?: (ids: number[]) => string;
  /** Random source; a number seeds a fresh one. The same seed gives the same tokens. */
  rng?: Rng | number;
  /**
   * One random source per prompt, instead of `rng`. Prompts may share one: at each step every
   * still-running row draws once from its own, in row order, so the n rows of a group sharing an
   * Rng draw exactly as a batch of that group alone would (as magrpo serve seeds a request).
   */
  rowRngs?: readonly Rng[];
}

/** The knobs a sampler call always states (no callee defaults): the trainer's, the rollout client's and the server's. */
export type SamplingParams = Required<Pick<SampleOptions, 'maxNewTokens' | 'stopStrings' | 'temperature' | 'topK' | 'topP'>>;

// MAGRPO_SHARED_PREFILL=0 prefills every copy of a repeated prompt (A/B benchmarks).
let prefillOnce = process.env.MAGRPO_SHARED_PREFILL !== '0';

/** Turns the one prefill per distinct prompt off or on again (sampling, and scoring a group: rl/agent.ts), for comparisons and tests. */
export function setSharedPrefill(on: boolean): void {
  prefillOnce = on;
}

/** Whether a prompt shared by several sequences is run once. */
export function sharedPrefill(): boolean {
  return prefillOnce;
}

/** The distinct prompts of a batch: `first[u]` is the first row holding prompt u, `of[b]` the prompt of row b. */
export function distinctPrompts(prompts: readonly (readonly number[])[]): { first: number[]; of: Int32Array } {
  const seen = new Map<string, number>();
  const first: number[] = [];
  const of = new Int32Array(prompts.length);
  for (const [b, p] of prompts.entries()) {
    const key = p.join(',');
    let u = seen.get(key);
    if (u === undefined || !prefillOnce) {
      u = first.length;
      seen.set(key, u);
      first.push(b);
    }
    of[b] = u;
  }
  return { first, of };
}

/**
 * Left-padded prefill inputs [B, T] of `prompts` (T the longest): ids (padding repeats the first
 * token), key mask, positions (index among real tokens) and the last row of each prompt.
 */
export function leftPadded(prompts: readonly (readonly number[])[], T: number) {
  const B = prompts.length;
  const ids = new Int32Array(B * T);
  const mask = new Uint8Array(B * T);
  const pos = new Int32Array(B * T);
  const lastRows = new Int32Array(B);
  for (let b = 0; b < B; b++) {
    const pad = T - prompts[b].length;
    for (let t = 0; t < T; t++) {
      ids[b * T + t] = t < pad ? prompts[b][0] : prompts[b][t - pad];
      mask[b * T + t] = t < pad ? 0 : 1;
      pos[b * T + t] = Math.max(0, t - pad);
    }
    lastRows[b] = b * T + T - 1;
  }
  return { ids, mask, pos, lastRows };
}

/** Rows of `logits` [U, V] repeated as `of` says: [of.length, V]. */
export function repeatRows(logits: FloatArray, V: number, of: Int32Array): FloatArray {
  const out = alloc(of.length * V);
  for (const [b, u] of of.entries()) out.set(logits.subarray(u * V, (u + 1) * V), b * V);
  return out;
}

export type FinishReason = 'stop_token' | 'stop_string' | 'length';

export interface SampleResult {
  /** Generated token ids per sequence (excluding the prompt). */
  tokens: number[][];
  /** Decoded completions (cut at a stop string), when `decode` is given. */
  texts: string[];
  /** log π(token | prefix) of each generated token under the unmodified model distribution. */
  logprobs: number[][];
  finishReasons: FinishReason[];
}

/** Samples one completion per prompt (token ids), all in one batch. */
export function generate(model: CausalLM, prompts: readonly (readonly number[])[], opts: SampleOptions): SampleResult {
  const B = prompts.length;
  if (B === 0) return { tokens: [], texts: [], logprobs: [], finishReasons: [] };
  const { maxNewTokens, temperature = 1, topK = null, topP = 1 } = opts;
  if (!(temperature >= 0)) throw new Error(`temperature must be ≥ 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new Error(`top_p must be in (0, 1], got ${topP}`);
  if (opts.stopStrings?.length && !opts.decode) throw new Error('stopStrings need a decode function');
  for (const [i, p] of prompts.entries()) if (p.length === 0) throw new Error(`prompt ${i} is empty: sampling needs at least one token`);
  if (opts.rowRngs && opts.rowRngs.length !== B) throw new Error(`rowRngs has ${opts.rowRngs.length} entries for ${B} prompts`);
  const rng = opts.rng instanceof Rng ? opts.rng : new Rng(opts.rng ?? 0);
  const rowRngs = opts.rowRngs;
  const stopIds = new Set(opts.stopTokenIds ?? []);
  const V = model.vocabSize;

  const T = Math.max(...prompts.map((p) => p.length));
  const maxLen = T + maxNewTokens;
  if (maxLen > model.maxPositions)
    throw new Error(`prompt (${T} tokens) + max_new_tokens (${maxNewTokens}) exceeds the model's context of ${model.maxPositions}`);

  const tokens: number[][] = prompts.map(() => []);
  const logprobs: number[][] = prompts.map(() => []);
  const texts: string[] = prompts.map(() => '');
  const finish: FinishReason[] = prompts.map(() => 'length');

  // Weights stay fixed for the whole call: decoding products reuse one packing of each (engine/packed.ts).
  return withPackedWeights(() =>
    noGrad(() => {
      // Prefill: the distinct prompts, left-padded [U, T]; then one cache row and logits row per sequence.
      let { cache, logits } = phase('sample/prefill', () => {
        const { first, of } = distinctPrompts(prompts);
        const U = first.length;
        const { ids, mask, pos, lastRows } = leftPadded(
          first.map((b) => prompts[b]),
          T,
        );
        const unique = model.createCache(U, maxLen);
        const out = model.forward(ids, U, T, { positions: pos, keyMask: mask, cache: unique, outputRows: lastRows }).data; // [U, V]
        return U === B ? { cache: unique, logits: out } : { cache: unique.select(Array.from(of)), logits: repeatRows(out, V, of) };
      });
      let active = prompts.map((_, b) => b); // batch row → sequence index

      phase('sample/decode', () => {
        for (let step = 0; step < maxNewTokens && active.length > 0; step++) {
          const rows = active.length;
          const draws = rowRngs ? active.map((s) => rowRngs[s]) : rng;
          const { chosen, lse } = pickTokens(rows, V, logits, { temperature, topK, topP }, draws);
          const still: number[] = [];
          for (let r = 0; r < rows; r++) {
            const s = active[r];
            const tok = chosen[r];
            tokens[s].push(tok);
            logprobs[s].push(logits[r * V + tok] - lse[r]);
            const end = finishAfter(tokens[s], stopIds, opts);
            if (end === null) still.push(r);
            else finish[s] = end;
          }
          if (still.length === 0) break;
          if (still.length < rows) cache = cache.select(still);
          const nextIds = Int32Array.from(still, (r) => chosen[r]);
          active = still.map((r) => active[r]);
          const positions = Int32Array.from(active, (s) => prompts[s].length + tokens[s].length - 1);
          logits = model.forward(nextIds, active.length, 1, { positions, cache, outputRows: Int32Array.from(active, (_, i) => i) }).data;
        }
      });

      if (opts.decode) {
        for (let s = 0; s < B; s++) {
          let text = opts.decode(tokens[s]);
          if (finish[s] === 'stop_string') {
            const cut = Math.min(...(opts.stopStrings ?? []).map((ss) => text.indexOf(ss)).filter((i) => i >= 0));
            text = text.slice(0, cut);
          }
          texts[s] = text;
        }
      }
      return { tokens, texts, logprobs, finishReasons: finish };
    }),
  );
}

/**
 * One decode step's tokens for `rows` logits rows [rows, V]: the argmax at temperature 0, else
 * `sampleRows`; with each row's log-sum-exp, so a token's log π is `logits[r * V + tok] - lse[r]`.
 * The step of `generate` and of the serving engine (serve/engine.ts) alike.
 */
export function pickTokens(
  rows: number,
  V: number,
  logits: FloatArray,
  p: Pick<SamplingParams, 'temperature' | 'topK' | 'topP'>,
  rng: Rng | readonly Rng[],
): { chosen: Int32Array; lse: FloatArray } {
  const lse = rowLogprobs(rows, V, logits);
  const chosen = p.temperature === 0 ? argmaxRows(rows, V, logits) : sampleRows(rows, V, logits, p.temperature, p.topK, p.topP, rng);
  return { chosen, lse };
}

/**
 * Why a sequence ends after its latest token, or null while it goes on: a stop id first, then a
 * stop string in its decoded text (only with `decode`), then the `maxNewTokens` budget.
 */
export function finishAfter(
  tokens: number[],
  stopIds: ReadonlySet<number>,
  opts: Pick<SampleOptions, 'maxNewTokens' | 'stopStrings' | 'decode'>,
): FinishReason | null {
  if (stopIds.has(tokens[tokens.length - 1])) return 'stop_token';
  if (opts.stopStrings?.length && opts.decode) {
    const text = opts.decode(tokens);
    if (opts.stopStrings.some((ss) => text.includes(ss))) return 'stop_string';
  }
  return tokens.length >= opts.maxNewTokens ? 'length' : null;
}

/** Log-sum-exp of each logits row. */
export function rowLogprobs(rows: number, V: number, logits: FloatArray): FloatArray {
  const lse = alloc(rows);
  backend().logSoftmaxGather(rows, V, logits, new Int32Array(rows).fill(-1), alloc(rows), lse);
  return lse;
}

/** The most likely token of each row (the lower id on ties). */
export function argmaxRows(rows: number, V: number, logits: FloatArray): Int32Array {
  const idx = new Int32Array(rows);
  backend().topk(rows, V, logits, 1, alloc(rows), idx);
  return idx;
}

/**
 * One token per row: temperature, then top-k, then top-p, then one categorical draw (one draw per
 * row, in row order, from `rng` or from the row's own `rng[row]`).
 */
export function sampleRows(
  rows: number,
  V: number,
  logits: FloatArray,
  temperature: number,
  topK: number | null,
  topP: number,
  rng: Rng | readonly Rng[],
): Int32Array {
  const u = (r: number) => (rng instanceof Rng ? rng : rng[r]).next();
  const chosen = new Int32Array(rows);
  const k = topK && topK > 0 ? Math.min(topK, V) : topP < 1 ? V : 0;
  if (k === 0) {
    // The whole vocabulary: softmax(logits / temperature) in one kernel call, then an inverse-CDF draw.
    const probs = alloc(rows * V);
    backend().softmax(rows, V, logits, 0, probs, 0, 1 / temperature, false, 0, null, 0);
    for (let r = 0; r < rows; r++) chosen[r] = drawIndex(probs, r * V, V, u(r));
    return chosen;
  }
  // Candidates sorted by descending logit; their probabilities at this temperature (max-subtracted).
  const vals = alloc(rows * k);
  const cand = new Int32Array(rows * k);
  backend().topk(rows, V, logits, k, vals, cand);
  const probs = new Float64Array(k);
  for (let r = 0; r < rows; r++) {
    const max = vals[r * k];
    let keep = k;
    let sum = 0;
    for (let i = 0; i < k; i++) {
      probs[i] = Math.exp((vals[r * k + i] - max) / temperature);
      sum += probs[i];
    }
    if (topP < 1) {
      // Keep the shortest prefix reaching topP.
      let acc = 0;
      for (let i = 0; i < k; i++) {
        acc += probs[i];
        if (acc >= topP * sum) {
          keep = i + 1;
          break;
        }
      }
    }
    let total = 0;
    for (let i = 0; i < keep; i++) total += probs[i];
    for (let i = 0; i < keep; i++) probs[i] /= total;
    chosen[r] = cand[r * k + drawIndex(probs, 0, keep, u(r))];
  }
  return chosen;
}

/** The first i with p[off] + … + p[off + i] > u, for probabilities p summing to ~1; rounding past the end picks the last nonzero one. */
function drawIndex(p: ArrayLike<number>, off: number, n: number, u: number): number {
  let acc = 0;
  let last = 0;
  for (let i = 0; i < n; i++) {
    const pi = p[off + i];
    if (pi === 0) continue;
    acc += pi;
    last = i;
    if (u < acc) return i;
  }
  return last;
}
