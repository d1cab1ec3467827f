/**
 * Batched autoregressive sampling with a KV cache. Prompts of different lengths are left-padded
 * (positions = index among real tokens, padding masked out), so one prefill serves the batch;
 * sequences that finish drop out of the decode batch. A prompt that occurs several times in the
 * batch (the G completions of a group) is prefilled once and its cache row copied to each of its
 * sequences. The numbers are those of prefilling every copy up to the products' rounding for another
 * row count: the same bits on the reference backend, log-probs within ~1e-6 with OpenBLAS.
 *
 * One decode loop, `Decoder`, serves every sampler: `generate` (training rollouts, `magrpo sample`)
 * runs it to completion, `magrpo serve` (serve/engine.ts) one step at a time.
 */
import type { FloatArray } from '../engine/backend.js';
import { scratch } from '../engine/buffer-pool.js';
import { withPackedWeights } from '../engine/packed.js';
import { phase } from '../engine/profile.js';
import { Rng } from '../engine/rng.js';
import { alloc, backend } from '../engine/runtime.js';
import { noGrad } from '../engine/tensor.js';
import type { CausalLM, KVCache, LoraAdapter, RowAdapters } from './transformer.js';

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
   * Per prompt, the LoRA adapters it is sampled with in place of the model's own: agents that
   * share one base model (`CausalLM.sharedBase`) sample in one batch, each row with its agent's
   * adapters, reading the base weights once per step for all of them.
   */
  rowAdapters?: readonly (ReadonlyMap<string, LoraAdapter> | null)[];
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

/**
 * The distinct prompts of a batch: `first[u]` is the first row holding prompt u, `of[b]` the prompt
 * of row b. Rows whose `owners` differ (the agents whose adapters they run under) never share one.
 */
export function distinctPrompts(prompts: readonly (readonly number[])[], owners?: readonly unknown[]): { first: number[]; of: Int32Array } {
  const seen = new Map<string, number>();
  const ownerIds = new Map<unknown, number>();
  const first: number[] = [];
  const of = new Int32Array(prompts.length);
  for (const [b, p] of prompts.entries()) {
    let owner = 0;
    if (owners) {
      owner = ownerIds.get(owners[b]) ?? ownerIds.size;
      ownerIds.set(owners[b], owner);
    }
    const key = `${owner}:${p.join(',')}`;
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

/** Samples one completion per prompt (token ids), all in one batch: a `Decoder` run to completion. */
export function generate(model: CausalLM, prompts: readonly (readonly number[])[], opts: SampleOptions): SampleResult {
  const B = prompts.length;
  if (B === 0) return { tokens: [], texts: [], logprobs: [], finishReasons: [] };
  const { maxNewTokens, temperature = 1, topK = null, topP = 1 } = opts;
  if (!(temperature >= 0)) throw new Error(`temperature must be ≥ 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new Error(`top_p must be in (0, 1], got ${topP}`);
  if (opts.stopStrings?.length && !opts.decode) throw new Error('stopStrings need a decode function');
  for (const [i, p] of prompts.entries()) if (p.length === 0) throw new Error(`prompt ${i} is empty: sampling needs at least one token`);
  if (opts.rowRngs && opts.rowRngs.length !== B) throw new Error(`rowRngs has ${opts.rowRngs.length} entries for ${B} prompts`);
  if (opts.rowAdapters && opts.rowAdapters.length !== B) throw new Error(`rowAdapters has ${opts.rowAdapters.length} entries for ${B} prompts`);
  const rng = opts.rng instanceof Rng ? opts.rng : new Rng(opts.rng ?? 0);
  const T = Math.max(...prompts.map((p) => p.length));
  if (T + maxNewTokens > model.maxPositions)
    throw new Error(`prompt (${T} tokens) + max_new_tokens (${maxNewTokens}) exceeds the model's context of ${model.maxPositions}`);

  const logprobs: number[][] = prompts.map(() => []);
  const finish: FinishReason[] = prompts.map(() => 'length');
  // One rule object for every row: the decoder picks all rows in one call, drawing in row order.
  const rule: DecodeRule = {
    maxNewTokens,
    temperature,
    topK,
    topP,
    stopIds: new Set(opts.stopTokenIds ?? []),
    stopStrings: opts.stopStrings,
    decode: opts.decode,
  };
  const decoder = new Decoder<number>(model);
  const record = (picked: Picked<number>[]) => {
    for (const p of picked) {
      logprobs[p.seq.tag].push(p.logprob);
      if (p.finish !== null) finish[p.seq.tag] = p.finish;
    }
  };
  const requests = prompts.map((prompt, s) => ({ tag: s, prompt, rule, rng: opts.rowRngs?.[s] ?? rng, adapters: opts.rowAdapters?.[s] }));

  // Weights stay fixed for the whole call: decoding products reuse one packing of each (engine/packed.ts).
  const tokens = withPackedWeights(() =>
    noGrad(() => {
      if (maxNewTokens <= 0) return prompts.map(() => []); // admission picks a first token: none is asked for
      const seqs = phase('sample/prefill', () => {
        const admitted = decoder.admit(requests);
        record(admitted);
        return admitted.map((p) => p.seq);
      });
      phase('sample/decode', () => {
        while (decoder.running.length > 0) record(decoder.step());
      });
      return seqs.map((s) => s.tokens);
    }),
  );

  const texts = tokens.map((ids, s) => {
    if (!opts.decode) return '';
    const text = opts.decode(ids);
    if (finish[s] !== 'stop_string') return text;
    return text.slice(0, Math.min(...(opts.stopStrings ?? []).map((ss) => text.indexOf(ss)).filter((i) => i >= 0)));
  });
  return { tokens, texts, logprobs, finishReasons: finish };
}

/**
 * How one sequence is sampled and when it stops (`finishAfter`). Neighbouring rows whose
 * sequences hold the same rule object are picked in one `pickTokens` call.
 */
export interface DecodeRule extends Pick<SamplingParams, 'maxNewTokens' | 'temperature' | 'topK' | 'topP'>, Pick<SampleOptions, 'stopStrings' | 'decode'> {
  /** The sequence ends after any of these tokens. */
  stopIds: ReadonlySet<number>;
  /** How many most likely alternatives to report per token (0 or absent: none). */
  topLogprobs?: number;
}

/** A sequence to decode: its prompt (at least one token), rule and random source, and the caller's handle. */
export interface DecodeRequest<T> {
  readonly tag: T;
  readonly prompt: readonly number[];
  readonly rule: DecodeRule;
  /** Drawn once per token of this sequence, in row order with the other rows of its pick. */
  readonly rng: Rng;
  /** LoRA adapters in place of the model's own (another agent on the same base model); absent: the model's. */
  readonly adapters?: ReadonlyMap<string, LoraAdapter> | null;
}

/** A sequence being decoded. */
export interface DecodeSequence<T> extends DecodeRequest<T> {
  /** Tokens picked so far (excluding the prompt). */
  readonly tokens: number[];
}

/** One token picked for one sequence. */
export interface Picked<T> {
  seq: DecodeSequence<T>;
  token: number;
  /** log π(token | prefix) under the unmodified model distribution (no temperature). */
  logprob: number;
  /** The rule's `topLogprobs` most likely tokens at this position, most likely first ([] without). */
  top: { id: number; logprob: number }[];
  /** Why the sequence ended with this token (it has left the batch), or null while it goes on. */
  finish: FinishReason | null;
}

/**
 * The decode loop of every sampler: `generate` runs it to completion, the serving engine
 * (serve/engine.ts) one step at a time, admitting sequences while others decode. It owns the KV
 * cache of its running sequences, picks their tokens and retires them when they stop.
 *
 * A sequence draws from its own Rng exactly as it would in a decoder holding only the sequences
 * of its rule, so what else shares the batch never changes its tokens: with the same seed a
 * served request gets the tokens `generate` gives for it alone.
 *
 * Callers run it without gradients (`noGrad`), and in a pack scope for speed (engine/packed.ts);
 * the model's weights and adapters must not change while sequences are running.
 */
export class Decoder<T> {
  private seqs: DecodeSequence<T>[] = [];
  private cache: KVCache | null = null;

  constructor(readonly model: CausalLM) {}

  /** The sequences still decoding, in batch order. */
  get running(): readonly DecodeSequence<T>[] {
    return this.seqs;
  }

  /**
   * Prefills `requests` (each distinct prompt once, left-padded), picks their first tokens and
   * appends the sequences that go on to the batch. Returns the picked tokens in request order.
   */
  admit(requests: readonly DecodeRequest<T>[]): Picked<T>[] {
    if (requests.length === 0) return [];
    const model = this.model;
    const fresh: DecodeSequence<T>[] = requests.map((r) => ({ ...r, tokens: [] }));
    const prompts = requests.map((r) => r.prompt);
    const T = Math.max(...prompts.map((p) => p.length));
    const extra = Math.max(...requests.map((r) => r.rule.maxNewTokens));
    const { first, of } = distinctPrompts(
      prompts,
      requests.map((r) => r.adapters),
    );
    const U = first.length;
    const { ids, mask, pos, lastRows } = leftPadded(
      first.map((b) => prompts[b]),
      T,
    );
    const cache = model.createCache(U, T + extra);
    const rowAdapters = this.adapterRuns(first.map((b) => requests[b]));
    // The logits and the prefill's activations go back to the buffer pool once the tokens are picked.
    const { picked, keep } = scratch(
      () => {
        const out = model.forward(ids, U, T, { positions: pos, keyMask: mask, cache, outputRows: lastRows, rowAdapters }).data; // [U, V]
        return this.pick(fresh, U === fresh.length ? out : repeatRows(out, model.vocabSize, of));
      },
      () => [],
    );
    if (keep.length > 0) {
      if (this.seqs.length === 0) {
        // Alone in the batch: the prefill's rows as they are (the layout `generate` has always had).
        this.cache = U === fresh.length && keep.length === U ? cache : cache.select(keep.map((i) => of[i]));
      } else {
        const running = this.cache as KVCache;
        const sources = [...this.seqs.map((seq, row) => ({ cache: running, row, seq })), ...keep.map((i) => ({ cache, row: of[i], seq: fresh[i] }))];
        this.cache = repack(model, sources, Math.max(...sources.map((s) => s.seq.rule.maxNewTokens - s.seq.tokens.length)));
      }
      this.seqs = [...this.seqs, ...keep.map((i) => fresh[i])];
    }
    return picked;
  }

  /** One decode step for every running sequence; the ones that finish leave the batch. */
  step(): Picked<T>[] {
    const seqs = this.seqs;
    const R = seqs.length;
    if (R === 0) return [];
    const ids = Int32Array.from(seqs, (s) => s.tokens[s.tokens.length - 1]);
    const positions = Int32Array.from(seqs, (s) => s.prompt.length + s.tokens.length - 1);
    const { picked, keep } = scratch(
      () => {
        const logits = this.model.forward(ids, R, 1, {
          positions,
          cache: this.cache as KVCache,
          outputRows: Int32Array.from(seqs, (_, i) => i),
          rowAdapters: this.adapterRuns(seqs),
        }).data;
        return this.pick(seqs, logits);
      },
      () => [],
    );
    this.keepRows(keep);
    return picked;
  }

  /** Drops the running sequences `done` holds for (a client gone), without a step. */
  retire(done: (seq: DecodeSequence<T>) => boolean): void {
    this.keepRows(this.seqs.flatMap((s, i) => (done(s) ? [] : [i])));
  }

  /** Drops every running sequence; returns them. */
  clear(): DecodeSequence<T>[] {
    const seqs = this.seqs;
    this.seqs = [];
    this.cache = null;
    return seqs;
  }

  /** The runs of rows sharing adapters, for a forward over `rows` (undefined: every row under the model's own). */
  private adapterRuns(rows: readonly DecodeRequest<T>[]): RowAdapters | undefined {
    const own = this.model.lora.size > 0 ? this.model.lora : null;
    if (rows.every((r) => r.adapters === undefined || r.adapters === own || (r.adapters?.size === 0 && own === null))) return undefined;
    const bounds = [0];
    const adapters: (ReadonlyMap<string, LoraAdapter> | null)[] = [];
    for (const [i, r] of rows.entries()) {
      const a = r.adapters === undefined ? own : r.adapters;
      if (adapters.length > 0 && adapters[adapters.length - 1] === a) bounds[bounds.length - 1] = i + 1;
      else {
        adapters.push(a);
        bounds.push(i + 1);
      }
    }
    return { bounds, adapters };
  }

  private keepRows(keep: number[]): void {
    if (keep.length === this.seqs.length) return;
    this.seqs = keep.map((i) => this.seqs[i]);
    this.cache = keep.length > 0 ? (this.cache as KVCache).select(keep) : null;
  }

  /** Picks one token per row of `logits` [rows, V], one `pickTokens` call per run of rows sharing a rule; returns them and the rows that go on. */
  private pick(seqs: readonly DecodeSequence<T>[], logits: FloatArray): { picked: Picked<T>[]; keep: number[] } {
    const V = this.model.vocabSize;
    const picked: Picked<T>[] = [];
    const keep: number[] = [];
    for (let start = 0; start < seqs.length; ) {
      const rule = seqs[start].rule;
      let end = start + 1;
      while (end < seqs.length && seqs[end].rule === rule) end++;
      const k = end - start;
      const slice = logits.subarray(start * V, end * V) as FloatArray;
      const rngs = seqs.slice(start, end).map((s) => s.rng);
      const { chosen, lse } = pickTokens(k, V, slice, rule, rngs);
      const top = rule.topLogprobs ? topLogprobs(k, V, slice, lse, Math.min(rule.topLogprobs, V)) : null;
      for (let r = 0; r < k; r++) {
        const seq = seqs[start + r];
        const token = chosen[r];
        seq.tokens.push(token);
        const finish = finishAfter(seq.tokens, rule.stopIds, rule);
        picked.push({ seq, token, logprob: slice[r * V + token] - lse[r], top: top?.[r] ?? [], finish });
        if (finish === null) keep.push(start + r);
      }
      start = end;
    }
    return { picked, keep };
  }
}

/** The K most likely tokens of each row with their log-probs (`lse` the rows' log-sum-exp), most likely first. */
function topLogprobs(rows: number, V: number, logits: FloatArray, lse: FloatArray, K: number): { id: number; logprob: number }[][] {
  const vals = alloc(rows * K);
  const ids = new Int32Array(rows * K);
  backend().topk(rows, V, logits, K, vals, ids);
  return Array.from({ length: rows }, (_, r) => Array.from({ length: K }, (_, j) => ({ id: ids[r * K + j], logprob: vals[r * K + j] - lse[r] })));
}

/**
 * A new cache holding the given rows, right-aligned: each row's real tokens (its slots after its
 * leading padding) end at the new length, so leading padding shared by every row is dropped.
 * Room for `extra` more tokens is left.
 */
function repack(model: CausalLM, sources: { cache: KVCache; row: number }[], extra: number): KVCache {
  const spans = sources.map(({ cache, row }) => {
    let first = 0;
    while (first < cache.len && cache.keyMask[row * cache.maxLen + first] === 0) first++;
    return { first, length: cache.len - first };
  });
  const len = Math.max(...spans.map((s) => s.length));
  const out = model.createCache(sources.length, len + Math.max(1, extra));
  const [, , Hkv, D] = out.k[0].shape;
  const width = Hkv * D;
  for (const [i, { cache, row }] of sources.entries()) {
    const { first, length } = spans[i];
    const to = len - length;
    const src = (row * cache.maxLen + first) * width;
    const dst = (i * out.maxLen + to) * width;
    for (let l = 0; l < out.k.length; l++) {
      out.k[l].data.set(cache.k[l].data.subarray(src, src + length * width), dst);
      out.v[l].data.set(cache.v[l].data.subarray(src, src + length * width), dst);
    }
    out.keyMask.fill(1, i * out.maxLen + to, i * out.maxLen + len);
  }
  out.len = len;
  return out;
}

/**
 * One decode step's tokens for `rows` logits rows [rows, V]: the argmax at temperature 0, else
 * `sampleRows`; with each row's log-sum-exp, so a token's log π is `logits[r * V + tok] - lse[r]`.
 * The pick of every `Decoder` step.
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
  if (k === V && topP < 1 && V > NUCLEUS_FIRST) return sampleNucleus(rows, V, logits, temperature, topP, u);
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

/** Candidates a top-p draw over the whole vocabulary looks at first (sampleNucleus). */
const NUCLEUS_FIRST = 256;

/**
 * Top-p sampling without top-k: the nucleus is the shortest run of the most likely tokens whose
 * probabilities reach topP. Sorting the whole vocabulary for it (49,152 tokens a row and step for
 * SmolLM2) took a third of a real-model training step; the nucleus is nearly always within the
 * first few hundred tokens. So: the NUCLEUS_FIRST best (topk), the normaliser over the whole
 * vocabulary, and the run over those candidates; a row whose nucleus is longer takes 4 times as
 * many candidates until it is found (the whole vocabulary at worst). The same tokens and
 * probabilities as sorting all of them: topk orders ties by index, so its first k are the full
 * sort's first k; only the order of the normaliser's float64 sum differs.
 */
function sampleNucleus(rows: number, V: number, logits: FloatArray, temperature: number, topP: number, u: (row: number) => number): Int32Array {
  const chosen = new Int32Array(rows);
  let probs = new Float64Array(NUCLEUS_FIRST);
  for (let r = 0; r < rows; r++) {
    const row = logits.subarray(r * V, (r + 1) * V) as FloatArray;
    for (let k = NUCLEUS_FIRST; ; k = Math.min(V, 4 * k)) {
      const vals = alloc(k);
      const cand = new Int32Array(k);
      backend().topk(1, V, row, k, vals, cand);
      const max = vals[0];
      let sum = 0;
      for (let j = 0; j < V; j++) sum += Math.exp((row[j] - max) / temperature);
      if (probs.length < k) probs = new Float64Array(k);
      let keep = 0;
      let acc = 0;
      for (let i = 0; i < k && keep === 0; i++) {
        probs[i] = Math.exp((vals[i] - max) / temperature);
        acc += probs[i];
        if (acc >= topP * sum) keep = i + 1;
      }
      if (keep === 0 && k < V) continue; // the nucleus reaches past the candidates
      if (keep === 0) keep = k;
      for (let i = 0; i < keep; i++) probs[i] /= acc;
      chosen[r] = cand[drawIndex(probs, 0, keep, u(r))];
      break;
    }
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
