/**
 * What every decoder-only architecture shares: a table of named parameters (names = HF safetensors
 * keys), projections that honour LoRA adapters, a KV cache, and the forward-pass contract.
 */

import { attention, prefixSharedAttention } from '../engine/attention.js';
import type { FloatArray } from '../engine/backend.js';
import { add, linear, linearLowRank, matmul, scale } from '../engine/ops.js';
import type { Rng } from '../engine/rng.js';
import { alloc, allocPersistent, backend } from '../engine/runtime.js';
import { isGradEnabled, noGrad, Tensor } from '../engine/tensor.js';
import type { ModelConfig } from './config.js';

/** How a parameter is initialised when a model is created from scratch. */
export type Init = { kind: 'normal'; std: number } | { kind: 'ones' } | { kind: 'zeros' };

export interface ParamSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly init: Init;
}

export interface ForwardOptions {
  /** [B·T] absolute positions; default pastLen + t (left-padded batches pass cumsum(mask) − 1). */
  positions?: Int32Array;
  /** [B·T]: 0 marks padding tokens, which no query attends to. */
  keyMask?: Uint8Array | null;
  /** Decode with a KV cache: the new tokens are appended to it. */
  cache?: KVCache;
  /** Rows of the flattened [B·T] sequence to produce logits for (default all): saves the LM head. */
  outputRows?: Int32Array;
  /**
   * The batch is one packed sequence (B = 1, no cache): a prompt of `promptLen` rows, then
   * `branches` continuations of equal length that each see the prompt and themselves only
   * (engine/attention.ts `prefixSharedAttention`); positions must be given. `keyMask` marks
   * continuation padding.
   */
  sharedPrompt?: SharedPromptLayout;
  /**
   * What the forward returns: logits (default), or the final hidden states after the final norm,
   * [B, T, C] (or [R, C] for `outputRows`), the LM head skipped (a value head reads them,
   * model/value-head.ts).
   */
  output?: 'logits' | 'hidden';
  /**
   * LoRA adapters per run of batch rows, in place of the model's own: several agents that share
   * this base model decode in one batch, each row with its agent's adapters (model/sample.ts).
   * Inference only (no gradient).
   */
  rowAdapters?: RowAdapters;
}

/**
 * Runs of batch rows with their adapters: run s is rows [bounds[s], bounds[s + 1]) with
 * `adapters[s]` (null: the base weights alone); bounds[S] is the batch size.
 */
export interface RowAdapters {
  bounds: readonly number[];
  adapters: readonly (ReadonlyMap<string, LoraAdapter> | null)[];
}

export interface SharedPromptLayout {
  promptLen: number;
  branches: number;
  keyMask?: Uint8Array | null;
}

/** Per-layer keys and values of past tokens, [B, maxLen, Hkv, D] each, plus their padding mask. */
export class KVCache {
  readonly k: Tensor[];
  readonly v: Tensor[];
  /** [B, maxLen] */
  readonly keyMask: Uint8Array;
  len = 0;
  /**
   * Rows that hold the same first `len` keys and values, copies of one row (sequences sampled from
   * one prompt): row r's are row `rows[r]`'s, the first row of its group. A decode step may read
   * them there (llama-decode.ts SharedKeys). Null: no two rows known to share any.
   */
  sharedKeys: { rows: Int32Array; len: number } | null = null;

  constructor(
    numLayers: number,
    readonly batch: number,
    readonly maxLen: number,
    kvHeads: number,
    headDim: number,
  ) {
    const shape = [batch, maxLen, kvHeads, headDim];
    this.k = Array.from({ length: numLayers }, () => new Tensor(allocPersistent(batch * maxLen * kvHeads * headDim), shape));
    this.v = Array.from({ length: numLayers }, () => new Tensor(allocPersistent(batch * maxLen * kvHeads * headDim), shape));
    this.keyMask = new Uint8Array(batch * maxLen);
  }

  /** Copies new keys/values [B, T, Hkv, D] of `layer` into rows [len, len + T). */
  write(layer: number, k: Tensor, v: Tensor): void {
    const [B, T, Hkv, D] = k.shape;
    if (this.len + T > this.maxLen) throw new Error(`KV cache overflow: ${this.len} + ${T} > ${this.maxLen}`);
    const row = Hkv * D;
    // B blocks of T·row values, one per batch row, at offset len·row of each [maxLen·row] cache row.
    const be = backend();
    be.copy2d(B, T * row, k.data, 0, T * row, this.k[layer].data, this.len * row, this.maxLen * row, false);
    be.copy2d(B, T * row, v.data, 0, T * row, this.v[layer].data, this.len * row, this.maxLen * row, false);
  }

  /** Records the padding mask of T new tokens (before the layers run). */
  appendMask(T: number, keyMask: Uint8Array | null | undefined): void {
    for (let b = 0; b < this.batch; b++) {
      for (let t = 0; t < T; t++) this.keyMask[b * this.maxLen + this.len + t] = keyMask ? keyMask[b * T + t] : 1;
    }
  }

  /**
   * A cache of the batch rows in `rows`, in that order (a row may repeat): finished sequences drop
   * out, a shared prompt's row is copied to each of its sequences. Only the first `len` positions
   * are copied: a position is written before any query reads it.
   */
  select(rows: number[]): KVCache {
    const first = this.k[0];
    const [, , Hkv, D] = first.shape;
    const out = new KVCache(this.k.length, rows.length, this.maxLen, Hkv, D);
    const per = this.maxLen * Hkv * D;
    const used = this.len * Hkv * D;
    for (let l = 0; l < this.k.length; l++) {
      rows.forEach((r, i) => {
        out.k[l].data.set(this.k[l].data.subarray(r * per, r * per + used), i * per);
        out.v[l].data.set(this.v[l].data.subarray(r * per, r * per + used), i * per);
      });
    }
    for (const [i, r] of rows.entries()) out.keyMask.set(this.keyMask.subarray(r * this.maxLen, (r + 1) * this.maxLen), i * this.maxLen);
    out.len = this.len;
    // Copies of one row share all `len` positions; rows of one group here, their shared ones.
    const group = (r: number) => (this.sharedKeys ? this.sharedKeys.rows[r] : r);
    const firstOf = new Map<number, number>();
    const shared = Int32Array.from(rows, (r, i) => {
      if (!firstOf.has(group(r))) firstOf.set(group(r), i);
      return firstOf.get(group(r)) as number;
    });
    if (firstOf.size < rows.length) out.sharedKeys = { rows: shared, len: this.sharedKeys?.len ?? this.len };
    return out;
  }
}

/** A low-rank update of one projection: y += (alpha / r) · x Aᵀ Bᵀ (PEFT naming: lora_A, lora_B). */
export interface LoraAdapter {
  readonly A: Tensor; // [r, in]
  readonly B: Tensor; // [out, r]
  readonly scale: number; // alpha / r
}

/** Models whose parameter tensors another model reads too (`CausalLM.sharedBase`). */
const sharing = new WeakSet<object>();

export abstract class CausalLM {
  readonly params = new Map<string, Tensor>();
  readonly lora = new Map<string, LoraAdapter>();

  constructor(readonly config: ModelConfig) {
    for (const spec of this.paramSpecs()) {
      this.params.set(spec.name, new Tensor(allocPersistent(spec.shape.reduce((a, b) => a * b, 1)), spec.shape, true, spec.name));
    }
  }

  /** Every parameter of the architecture with its HF name, shape and initialisation. */
  abstract paramSpecs(): ParamSpec[];

  /** Logits [B, T, V] (or [R, V] for `outputRows`) of token ids [B·T]. */
  abstract forward(ids: Int32Array, batch: number, seqLen: number, opts?: ForwardOptions): Tensor;

  abstract createCache(batch: number, maxLen: number): KVCache;

  get vocabSize(): number {
    return this.config.vocabSize;
  }

  get maxPositions(): number {
    return this.config.maxPositions;
  }

  param(name: string): Tensor {
    const p = this.params.get(name);
    if (p === undefined) throw new Error(`model has no parameter "${name}"`);
    return p;
  }

  /** Initialises every parameter from scratch (normal / ones / zeros per its spec). */
  initialize(rng: Rng): void {
    for (const spec of this.paramSpecs()) {
      const d = this.param(spec.name).data;
      if (spec.init.kind === 'ones') d.fill(1);
      else if (spec.init.kind === 'zeros') d.fill(0);
      else for (let i = 0; i < d.length; i++) d[i] = rng.normal() * spec.init.std;
    }
  }

  /**
   * A model that reads this one's parameter tensors (shared, not copied) and has no adapters of
   * its own: the frozen base of a LoRA model as its reference, or another agent's starting point
   * on the same base. Every parameter must be frozen (LoRA freezes them): a shared weight that one
   * model trained would change under the other. `sharesWeights` then holds for both.
   */
  sharedBase(): this {
    for (const [name, p] of this.params) {
      if (p.requiresGrad) throw new Error(`cannot share the weights of a model whose "${name}" is trainable: only frozen (LoRA) bases are shared`);
    }
    const twin = Object.assign(Object.create(Object.getPrototypeOf(this)) as this, this, { lora: new Map<string, LoraAdapter>() });
    sharing.add(this);
    sharing.add(twin);
    return twin;
  }

  /** Whether `other` reads this model's parameter tensors (one is the other's `sharedBase`, or both of a third's). */
  sharesBaseWith(other: CausalLM): boolean {
    return other.params === this.params;
  }

  /** Whether another model reads these parameter tensors (`sharedBase`): they must not be written. */
  get sharesWeights(): boolean {
    return sharing.has(this);
  }

  /** Parameters the optimiser updates (all of them, or only LoRA factors when adapters exist). */
  trainableParams(): Tensor[] {
    return [...this.params.values(), ...[...this.lora.values()].flatMap((a) => [a.A, a.B])].filter((p) => p.requiresGrad);
  }

  numParams(): number {
    let n = 0;
    for (const p of this.params.values()) n += p.size;
    return n;
  }

  /**
   * A named projection. `layout` is 'linear' for HF nn.Linear (W: [out, in], y = x Wᵀ + b) and
   * 'conv1d' for GPT-2's Conv1D (W: [in, out], y = x W + b). Applies the LoRA adapter of `name`.
   */
  protected proj(x: Tensor, name: string, layout: 'linear' | 'conv1d' = 'linear', rows?: RowAdapters): Tensor {
    const W = this.param(`${name}.weight`);
    const b = this.params.get(`${name}.bias`) ?? null;
    if (rows) return this.projRows(x, W, b, name, layout, rows);
    const ad = this.lora.get(name);
    if (ad && layout === 'linear') return linearLowRank(x, W, b, ad.A, ad.B, ad.scale);
    const y = layout === 'linear' ? linear(x, W, b) : matmul(x, W, false, b);
    return ad ? add(y, scale(linear(linear(x, ad.A), ad.B), ad.scale)) : y;
  }

  /**
   * `proj` with each run of rows under its own adapter: the base product for every row, then
   * y[rows] += scale · (x[rows] Aᵀ) Bᵀ per run, the products linearLowRank makes for one adapter.
   */
  private projRows(x: Tensor, W: Tensor, b: Tensor | null, name: string, layout: 'linear' | 'conv1d', rows: RowAdapters): Tensor {
    if (isGradEnabled()) throw new Error('rowAdapters are for inference: run the forward under noGrad');
    const y = layout === 'linear' ? linear(x, W, b) : matmul(x, W, false, b);
    const K = x.shape[x.shape.length - 1];
    const N = y.shape[y.shape.length - 1];
    const batch = rows.bounds[rows.bounds.length - 1];
    const perRow = x.size / K / batch; // tokens per batch row
    if (!Number.isInteger(perRow)) throw new Error(`rowAdapters cover ${batch} rows; the input has ${x.size / K} tokens`);
    const be = backend();
    for (const [s, adapters] of rows.adapters.entries()) {
      const ad = adapters?.get(name);
      if (!ad) continue;
      const r = ad.A.shape[0];
      const m = (rows.bounds[s + 1] - rows.bounds[s]) * perRow;
      const first = rows.bounds[s] * perRow;
      const t = alloc(m * r);
      be.gemm(false, true, m, r, K, 1, x.data, first * K, K, ad.A.data, 0, K, 0, t, 0, r);
      be.gemm(false, true, m, N, r, ad.scale, t, 0, r, ad.B.data, 0, r, 1, y.data, first * N, N);
    }
    return y;
  }

  /**
   * Causal self-attention of layer `layer`, q [B, T, H, D] over k, v [B, T, Hkv, D]. With a cache the
   * new keys/values are appended first and the queries see every cached position (pastLen + t).
   * `keyMask` is the cache's mask after `cache.appendMask`, or this call's own mask without a cache.
   * A `shared` layout replaces both (see ForwardOptions.sharedPrompt).
   */
  protected selfAttention(
    layer: number,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cache: KVCache | undefined,
    keyMask: Uint8Array | null,
    shared?: SharedPromptLayout,
  ): Tensor {
    if (shared) return prefixSharedAttention(q, k, v, shared);
    if (!cache) return attention(q, k, v, { causal: true, keyMask });
    cache.write(layer, k, v);
    return attention(q, cache.k[layer], cache.v[layer], { causal: true, kvLen: cache.len + q.shape[1], pastLen: cache.len, keyMask });
  }

  /** Row positions for a forward: given ones, or pastLen + t. */
  protected positionsFor(batch: number, seqLen: number, opts: ForwardOptions): Int32Array {
    if (opts.sharedPrompt && (batch !== 1 || opts.cache || opts.keyMask || !opts.positions)) {
      throw new Error('a shared-prompt forward is one packed sequence (batch 1) with positions, without a cache or keyMask');
    }
    if (opts.positions) {
      if (opts.positions.length !== batch * seqLen) throw new Error(`positions has ${opts.positions.length} entries, expected ${batch * seqLen}`);
      return opts.positions;
    }
    const past = opts.cache?.len ?? 0;
    const pos = new Int32Array(batch * seqLen);
    for (let b = 0; b < batch; b++) for (let t = 0; t < seqLen; t++) pos[b * seqLen + t] = past + t;
    return pos;
  }

  /** Sets every parameter from `tensors` (same names and shapes). */
  loadTensors(tensors: Map<string, FloatArray>): void {
    noGrad(() => {
      for (const [name, p] of this.params) {
        const src = tensors.get(name);
        if (src === undefined) throw new Error(`missing tensor "${name}"`);
        p.data.set(src);
      }
    });
  }
}
