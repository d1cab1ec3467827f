/**
 * Batched autoregressive sampling with a KV cache. Prompts of different lengths are left-padded
 * (positions = index among real tokens, padding masked out), so one prefill serves the batch;
 * sequences that finish drop out of the decode batch.
 */
import type { FloatArray } from '../engine/backend.js';
import { Rng } from '../engine/rng.js';
import { alloc, backend } from '../engine/runtime.js';
import { noGrad } from '../engine/tensor.js';
import type { CausalLM } from './transformer.js';

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
  const rng = opts.rng instanceof Rng ? opts.rng : new Rng(opts.rng ?? 0);
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

  return noGrad(() => {
    // Prefill: left-padded [B, T].
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
    let cache = model.createCache(B, maxLen);
    let logits = model.forward(ids, B, T, { positions: pos, keyMask: mask, cache, outputRows: lastRows }).data; // [B, V]
    let active = prompts.map((_, b) => b); // batch row → sequence index

    for (let step = 0; step < maxNewTokens && active.length > 0; step++) {
      const rows = active.length;
      const lp = rowLogprobs(rows, V, logits);
      const chosen = new Int32Array(rows);
      for (let r = 0; r < rows; r++) {
        const row = logits.subarray(r * V, (r + 1) * V);
        chosen[r] = temperature === 0 ? argmax(row) : sampleRow(row, temperature, topK, topP, rng);
      }
      const still: number[] = [];
      for (let r = 0; r < rows; r++) {
        const s = active[r];
        const tok = chosen[r];
        tokens[s].push(tok);
        logprobs[s].push(logits[r * V + tok] - lp[r]);
        if (stopIds.has(tok)) {
          finish[s] = 'stop_token';
          continue;
        }
        if (opts.stopStrings?.length && opts.decode) {
          const text = opts.decode(tokens[s]);
          if (opts.stopStrings.some((ss) => text.includes(ss))) {
            finish[s] = 'stop_string';
            continue;
          }
        }
        still.push(r);
      }
      if (still.length === 0 || step === maxNewTokens - 1) break;
      if (still.length < rows) cache = cache.select(still);
      const nextIds = Int32Array.from(still, (r) => chosen[r]);
      active = still.map((r) => active[r]);
      const positions = Int32Array.from(active, (s) => prompts[s].length + tokens[s].length - 1);
      logits = model.forward(nextIds, active.length, 1, { positions, cache, outputRows: Int32Array.from(active, (_, i) => i) }).data;
    }

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
  });
}

/** Log-sum-exp of each logits row. */
function rowLogprobs(rows: number, V: number, logits: FloatArray): FloatArray {
  const lse = alloc(rows);
  backend().logSoftmaxGather(rows, V, logits, new Int32Array(rows).fill(-1), alloc(rows), lse);
  return lse;
}

function argmax(row: FloatArray): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** Temperature, then top-k, then top-p, then one categorical draw. */
function sampleRow(row: FloatArray, temperature: number, topK: number | null, topP: number, rng: Rng): number {
  const V = row.length;
  const k = topK && topK > 0 ? Math.min(topK, V) : topP < 1 ? V : 0;
  let cand: Int32Array;
  let vals: FloatArray;
  if (k > 0) {
    vals = alloc(k);
    cand = new Int32Array(k);
    backend().topk(1, V, row, k, vals, cand);
  } else {
    vals = row;
    cand = Int32Array.from({ length: V }, (_, i) => i);
  }
  // Probabilities of the candidates at this temperature (max-subtracted for stability).
  const n = cand.length;
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, vals[i]);
  const probs = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    probs[i] = Math.exp((vals[i] - max) / temperature);
    sum += probs[i];
  }
  let keep = n;
  if (topP < 1) {
    // Candidates are sorted by descending logit: keep the shortest prefix reaching topP.
    let acc = 0;
    for (let i = 0; i < n; i++) {
      acc += probs[i] / sum;
      if (acc >= topP) {
        keep = i + 1;
        break;
      }
    }
    sum = 0;
    for (let i = 0; i < keep; i++) sum += probs[i];
  }
  let u = rng.next() * sum;
  for (let i = 0; i < keep; i++) {
    u -= probs[i];
    if (u < 0) return cand[i];
  }
  return cand[keep - 1];
}
