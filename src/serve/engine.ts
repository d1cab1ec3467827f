/**
 * The generation engine behind `magrpo serve`: continuous batching over the KV-cache decoder.
 *
 * Requests arrive as sequence groups (one prompt × n completions, one sampling spec, one seed).
 * A single loop runs decode steps for every running row at once; between two steps the event loop
 * turns, so HTTP requests that arrived meanwhile are prefilled on their own and their cache rows
 * are merged into the running batch before the next step (right-aligned, padding masked out).
 * Rows that finish drop out at once. All rows of a batch use the same weights: the base model or
 * one LoRA adapter. Requests for another adapter wait until the running batch drains (no request
 * ever mixes weights, and FIFO order keeps any adapter from starving).
 *
 * Seeds: each group has its own Rng seeded with the request's `seed` and draws from it exactly as
 * `generate()` (model/sample.ts) draws for a batch holding only that group, so with a seed the n
 * completions of a prompt equal `LanguageModel.sample(Array(n).fill(prompt), { rng: seed, … })`
 * token for token, whatever else shares the batch.
 */
import type { FloatArray } from '../engine/backend.js';
import { PackScope } from '../engine/packed.js';
import { Rng } from '../engine/rng.js';
import { alloc, backend } from '../engine/runtime.js';
import { noGrad } from '../engine/tensor.js';
import { loadLora } from '../model/lora.js';
import type { LanguageModel } from '../model/pretrained.js';
import {
  distinctPrompts,
  type FinishReason,
  finishAfter,
  leftPadded,
  pickTokens,
  repeatRows,
  type SampleOptions,
  type SamplingParams,
} from '../model/sample.js';
import type { KVCache, LoraAdapter } from '../model/transformer.js';

/**
 * How one group samples: the shared knobs (maxNewTokens ≥ 1; stop strings match the completion
 * decoded with special tokens skipped; stop ids hold EOS unless the request ignores it), plus what
 * only the server has.
 */
export interface SamplingSpec extends SamplingParams, Required<Pick<SampleOptions, 'stopTokenIds'>> {
  /** How many most likely alternatives to report per token (0 = none). */
  topLogprobs: number;
  /** Seed of the group's Rng (uint32). */
  seed: number;
}

/** One generated token of one completion. */
export interface TokenEvent {
  token: number;
  /** log π(token | prefix) under the unmodified model distribution (no temperature). */
  logprob: number;
  /** The `topLogprobs` most likely tokens at this position, most likely first. */
  top: { id: number; logprob: number }[];
  /** Set on the completion's last token. */
  finish?: FinishReason;
}

/** A prompt and its n completions, sampled together. */
export interface GroupRequest {
  /** The base model's name or a loaded adapter's. */
  model: string;
  promptIds: readonly number[];
  n: number;
  spec: SamplingSpec;
  /** Called for every token of completion `index` (0 ≤ index < n), in order. */
  onToken(index: number, ev: TokenEvent): void;
  /** True once the client has gone: the group's rows are dropped at the next step. */
  cancelled?: () => boolean;
}

/** Counters for /stats and the tests: evidence that batching happens. */
export interface EngineStats {
  groupsSubmitted: number;
  groupsFinished: number;
  decodeSteps: number;
  /** Most rows ever decoded in one step. */
  maxRowsInStep: number;
  /** Groups admitted while other rows were already decoding. */
  joinedMidFlight: number;
  /** Rows currently decoding, groups waiting. */
  running: number;
  queued: number;
}

export class EngineClosedError extends Error {}

/** Thrown at admission when a queued request's adapter was unloaded meanwhile. */
export class UnknownModelError extends Error {
  constructor(readonly model: string) {
    super(`The model \`${model}\` does not exist.`);
  }
}

interface Group {
  req: GroupRequest;
  rng: Rng;
  lora: Map<string, LoraAdapter> | null;
  remaining: number;
  resolve: () => void;
  reject: (e: Error) => void;
}

interface Row {
  group: Group;
  index: number;
  promptLen: number;
  tokens: number[];
}

export interface EngineOptions {
  /** Most completion rows decoded together; a larger single group still runs, alone. */
  maxBatch: number;
}

export class BatchEngine {
  private readonly adapters = new Map<string, Map<string, LoraAdapter>>();
  private readonly queue: Group[] = [];
  private rows: Row[] = [];
  private cache: KVCache | null = null;
  private active: Map<string, LoraAdapter> | null = null;
  private wake: (() => void) | null = null;
  private closed = false;
  private readonly loop: Promise<void>;
  private readonly packs = new PackScope();
  readonly stats: EngineStats = { groupsSubmitted: 0, groupsFinished: 0, decodeSteps: 0, maxRowsInStep: 0, joinedMidFlight: 0, running: 0, queued: 0 };

  constructor(
    readonly lm: LanguageModel,
    /** Name the base model is served under. */
    readonly baseName: string,
    private readonly opts: EngineOptions,
  ) {
    if (!(Number.isInteger(opts.maxBatch) && opts.maxBatch >= 1)) throw new Error(`maxBatch must be an integer ≥ 1, got ${opts.maxBatch}`);
    lm.model.lora.clear();
    this.loop = this.run();
  }

  /** Served model names: the base first, then adapters in load order. */
  models(): string[] {
    return [this.baseName, ...this.adapters.keys()];
  }

  hasModel(name: string): boolean {
    return name === this.baseName || this.adapters.has(name);
  }

  /** Loads a PEFT LoRA folder under `name` (throws CheckpointError for a bad folder). */
  loadAdapter(name: string, dir: string): void {
    if (this.hasModel(name)) throw new Error(`the adapter '${name}' has already been loaded`);
    const model = this.lm.model;
    const saved = new Map(model.lora);
    try {
      loadLora(model, dir);
      this.adapters.set(name, new Map(model.lora));
    } finally {
      model.lora.clear();
      for (const [k, v] of saved) model.lora.set(k, v);
    }
  }

  /** Removes an adapter; a batch already decoding with it finishes with the weights it started with. */
  unloadAdapter(name: string): boolean {
    // Drops the packs of its weights (the scope holds them); the base is packed again on the next step.
    this.packs.invalidate();
    return this.adapters.delete(name);
  }

  /** Queues a group; resolves when its n completions are finished (or it was cancelled). */
  submit(req: GroupRequest): Promise<void> {
    if (this.closed) return Promise.reject(new EngineClosedError('the server is shutting down'));
    if (!this.hasModel(req.model)) return Promise.reject(new UnknownModelError(req.model));
    this.stats.groupsSubmitted++;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ req, rng: new Rng(req.spec.seed), lora: null, remaining: req.n, resolve, reject });
      this.stats.queued = this.queue.length;
      this.wake?.();
    });
  }

  /** Groups waiting for admission. */
  get queued(): number {
    return this.queue.length;
  }

  /** Stops the loop; running and queued groups are rejected with EngineClosedError. */
  async close(): Promise<void> {
    this.closed = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      if (this.rows.length === 0 && this.queue.length === 0) {
        await new Promise<void>((r) => {
          this.wake = r;
        });
        this.wake = null;
        continue;
      }
      try {
        // The base weights never change while serving: packed once, for every step (engine/packed.ts).
        this.packs.run(() =>
          noGrad(() => {
            this.admit();
            if (this.rows.length > 0) this.step();
          }),
        );
      } catch (e) {
        this.failRunning(e as Error);
      }
      this.stats.running = this.rows.length;
      this.stats.queued = this.queue.length;
      // Let HTTP I/O run: new requests join before the next step.
      await new Promise<void>((r) => setImmediate(r));
    }
    const err = new EngineClosedError('the server is shutting down');
    this.failRunning(err);
    for (const g of this.queue.splice(0)) g.reject(err);
  }

  private failRunning(err: Error): void {
    const groups = new Set(this.rows.map((r) => r.group));
    for (const g of groups) g.reject(err);
    this.rows = [];
    this.cache = null;
  }

  /** Puts the batch's adapter (or none) into the model's projections. */
  private activate(lora: Map<string, LoraAdapter> | null): void {
    const model = this.lm.model;
    model.lora.clear();
    if (lora) for (const [k, v] of lora) model.lora.set(k, v);
    this.active = lora;
  }

  /**
   * Takes queued groups in FIFO order while they use the running batch's weights and fit in
   * maxBatch; prefills them together and merges their cache rows into the running batch.
   */
  private admit(): void {
    const admitted: Group[] = [];
    let rows = this.rows.length;
    const running = this.rows.length > 0;
    while (this.queue.length > 0) {
      const g = this.queue[0];
      const name = g.req.model;
      if (name !== this.baseName && !this.adapters.has(name)) {
        this.queue.shift();
        g.reject(new UnknownModelError(name));
        continue;
      }
      const lora = name === this.baseName ? null : (this.adapters.get(name) ?? null);
      const batchLora = running ? this.active : admitted.length > 0 ? admitted[0].lora : lora;
      if (lora !== batchLora) break;
      if (rows > 0 && rows + g.req.n > this.opts.maxBatch) break;
      if (g.req.cancelled?.()) {
        this.queue.shift();
        g.resolve();
        continue;
      }
      this.queue.shift();
      g.lora = lora;
      admitted.push(g);
      rows += g.req.n;
    }
    if (admitted.length === 0) return;
    this.activate(admitted[0].lora);
    if (running) this.stats.joinedMidFlight += admitted.length;
    this.prefill(admitted);
  }

  /** Prefills new groups (left-padded, one forward over their distinct prompts), samples their first tokens, merges the rest into the batch. */
  private prefill(groups: Group[]): void {
    const model = this.lm.model;
    const newRows: Row[] = groups.flatMap((g) =>
      Array.from({ length: g.req.n }, (_, i) => ({ group: g, index: i, promptLen: g.req.promptIds.length, tokens: [] })),
    );
    const T = Math.max(...newRows.map((r) => r.promptLen));
    const extra = Math.max(...newRows.map((r) => r.group.req.spec.maxNewTokens));
    // Each distinct prompt once (a group's n rows share theirs): row b reads prefill row of[b].
    const prompts = newRows.map((r) => r.group.req.promptIds);
    const { first, of } = distinctPrompts(prompts);
    const { ids, mask, pos, lastRows } = leftPadded(
      first.map((b) => prompts[b]),
      T,
    );
    const cache = model.createCache(first.length, T + extra);
    const out = model.forward(ids, first.length, T, { positions: pos, keyMask: mask, cache, outputRows: lastRows }).data; // [U, V]
    const keep = this.sampleStep(newRows, repeatRows(out, model.vocabSize, of));
    const survivors = keep.map((i) => newRows[i]);
    if (survivors.length === 0) return;
    const sources = [
      ...this.rows.map((row, i) => ({ cache: this.cache as KVCache, row: i, data: row })),
      ...keep.map((i) => ({ cache, row: of[i], data: newRows[i] })),
    ];
    this.cache = repack(this.lm, sources, Math.max(...sources.map((s) => s.data.group.req.spec.maxNewTokens - s.data.tokens.length)));
    this.rows = sources.map((s) => s.data);
  }

  /** One decode step for every running row. */
  private step(): void {
    const cancelled = this.rows.map((r, i) => (r.group.req.cancelled?.() ? -1 : i)).filter((i) => i >= 0);
    if (cancelled.length < this.rows.length) this.dropTo(cancelled);
    if (this.rows.length === 0) return;
    const model = this.lm.model;
    const cache = this.cache as KVCache;
    const R = this.rows.length;
    const ids = Int32Array.from(this.rows, (r) => r.tokens[r.tokens.length - 1]);
    const positions = Int32Array.from(this.rows, (r) => r.promptLen + r.tokens.length - 1);
    const logits = model.forward(ids, R, 1, { positions, cache, outputRows: Int32Array.from(this.rows, (_, i) => i) }).data;
    this.stats.decodeSteps++;
    this.stats.maxRowsInStep = Math.max(this.stats.maxRowsInStep, R);
    const keep = this.sampleStep(this.rows, logits);
    if (keep.length < R) this.dropTo(keep);
  }

  private dropTo(keep: number[]): void {
    this.rows = keep.map((i) => this.rows[i]);
    this.cache = this.rows.length > 0 ? (this.cache as KVCache).select(keep) : null;
  }

  /**
   * Picks one token per row from `logits` [rows, V]. Each group's rows are contiguous and drawn
   * with the group's own Rng and spec, as generate() does for one group. Returns the rows that go on.
   */
  private sampleStep(rows: Row[], logits: FloatArray): number[] {
    const V = this.lm.model.vocabSize;
    const decode = (ids: number[]) => this.lm.tokenizer.decode(ids, { skipSpecialTokens: true });
    const keep: number[] = [];
    for (let start = 0; start < rows.length; ) {
      const g = rows[start].group;
      let end = start + 1;
      while (end < rows.length && rows[end].group === g) end++;
      const k = end - start;
      const slice = logits.subarray(start * V, end * V) as FloatArray;
      const { spec } = g.req;
      const { chosen, lse } = pickTokens(k, V, slice, spec, g.rng);
      let topVals: FloatArray | null = null;
      let topIds: Int32Array | null = null;
      const K = Math.min(spec.topLogprobs, V);
      if (K > 0) {
        topVals = alloc(k * K);
        topIds = new Int32Array(k * K);
        backend().topk(k, V, slice, K, topVals, topIds);
      }
      const stops = new Set(spec.stopTokenIds);
      const rule = { maxNewTokens: spec.maxNewTokens, stopStrings: spec.stopStrings, decode };
      for (let r = 0; r < k; r++) {
        const row = rows[start + r];
        const tok = chosen[r];
        row.tokens.push(tok);
        const ev: TokenEvent = { token: tok, logprob: slice[r * V + tok] - lse[r], top: [] };
        if (topVals && topIds) for (let j = 0; j < K; j++) ev.top.push({ id: topIds[r * K + j], logprob: topVals[r * K + j] - lse[r] });
        const end = finishAfter(row.tokens, stops, rule);
        if (end !== null) ev.finish = end;
        g.req.onToken(row.index, ev);
        if (ev.finish) {
          g.remaining--;
          if (g.remaining === 0) {
            this.stats.groupsFinished++;
            g.resolve();
          }
        } else keep.push(start + r);
      }
      start = end;
    }
    return keep;
  }
}

/**
 * A new cache holding the given rows, right-aligned: each row's real tokens (its slots after its
 * leading padding) end at the new length, so leading padding shared by every row is dropped.
 * Room for `extra` more tokens is left.
 */
function repack(lm: LanguageModel, sources: { cache: KVCache; row: number }[], extra: number): KVCache {
  const spans = sources.map(({ cache, row }) => {
    let first = 0;
    while (first < cache.len && cache.keyMask[row * cache.maxLen + first] === 0) first++;
    return { first, length: cache.len - first };
  });
  const len = Math.max(...spans.map((s) => s.length));
  const out = lm.model.createCache(sources.length, len + Math.max(1, extra));
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
