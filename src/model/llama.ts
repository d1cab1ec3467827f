/**
 * Llama-family decoder (Llama, Qwen2, Mistral without sliding window): RMSNorm, RoPE, grouped-query
 * attention, SwiGLU MLP, tied or untied LM head. Parameter names are the HF safetensors keys.
 *
 * Legend: B batch, T new tokens, C hidden size, H query heads, Hkv key/value heads, D head size,
 * F MLP size, V vocabulary, L layers.
 *
 *   h = embed(ids)
 *   for each layer:  h = h + o_proj(attn(rope(q(n1(h))), rope(k(n1(h))), v(n1(h))))
 *                    h = h + down(silu(gate(n2(h))) ⊙ up(n2(h)))
 *   logits = lm_head(norm(h))
 */
import type { FloatArray } from '../engine/backend.js';
import { scratch } from '../engine/buffer-pool.js';
import { embedding, type RopeTables, rmsnorm, rope, ropeTables, swiglu } from '../engine/nn.js';
import { add, gatherRows, linear, reshape } from '../engine/ops.js';
import { packedWeight } from '../engine/packed.js';
import { alloc, backend, getDType } from '../engine/runtime.js';
import { isGradEnabled, Tensor } from '../engine/tensor.js';
import type { LlamaConfig } from './config.js';
import { type DecodeLoraRun, LAYER_WEIGHTS, LORA_PROJECTIONS, llamaDecodeStep } from './llama-decode.js';
import { CausalLM, type ForwardOptions, KVCache, type LoraAdapter, type ParamSpec, type RowAdapters } from './transformer.js';

// MAGRPO_FUSED_DECODE=0 keeps decode steps on the layer-by-layer path (A/B benchmarks).
let fusedDecode = process.env.MAGRPO_FUSED_DECODE !== '0';

/** Turns the one-call decode step (llama-decode.ts) off or on again, for comparisons and tests. */
export function setFusedDecode(on: boolean): void {
  fusedDecode = on;
}

export class LlamaModel extends CausalLM {
  declare readonly config: LlamaConfig;
  private rope: RopeTables | null = null;

  constructor(config: LlamaConfig) {
    super(config);
  }

  paramSpecs(): ParamSpec[] {
    const { vocabSize: V, hiddenSize: C, intermediateSize: F, numLayers: L, numHeads: H, numKvHeads: Hkv, headDim: D } = this.config;
    const std = 0.02;
    const out = { kind: 'normal', std: std / Math.sqrt(2 * L) } as const; // residual projections, GPT-2 style
    const w = { kind: 'normal', std } as const;
    const specs: ParamSpec[] = [{ name: 'model.embed_tokens.weight', shape: [V, C], init: w }]; // [V, C]
    for (let l = 0; l < L; l++) {
      const p = `model.layers.${l}`;
      specs.push(
        { name: `${p}.input_layernorm.weight`, shape: [C], init: { kind: 'ones' } },
        { name: `${p}.self_attn.q_proj.weight`, shape: [H * D, C], init: w },
        { name: `${p}.self_attn.k_proj.weight`, shape: [Hkv * D, C], init: w },
        { name: `${p}.self_attn.v_proj.weight`, shape: [Hkv * D, C], init: w },
        { name: `${p}.self_attn.o_proj.weight`, shape: [C, H * D], init: out },
        { name: `${p}.post_attention_layernorm.weight`, shape: [C], init: { kind: 'ones' } },
        { name: `${p}.mlp.gate_proj.weight`, shape: [F, C], init: w },
        { name: `${p}.mlp.up_proj.weight`, shape: [F, C], init: w },
        { name: `${p}.mlp.down_proj.weight`, shape: [C, F], init: out },
      );
      const bias = (name: string, width: number) => specs.push({ name: `${name}.bias`, shape: [width], init: { kind: 'zeros' } });
      if (this.config.attentionBias) {
        bias(`${p}.self_attn.q_proj`, H * D);
        bias(`${p}.self_attn.k_proj`, Hkv * D);
        bias(`${p}.self_attn.v_proj`, Hkv * D);
      }
      if (this.config.oProjBias) bias(`${p}.self_attn.o_proj`, C);
      if (this.config.mlpBias) {
        bias(`${p}.mlp.gate_proj`, F);
        bias(`${p}.mlp.up_proj`, F);
        bias(`${p}.mlp.down_proj`, C);
      }
    }
    specs.push({ name: 'model.norm.weight', shape: [C], init: { kind: 'ones' } });
    if (!this.config.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [V, C], init: w }); // [V, C]
    return specs;
  }

  createCache(batch: number, maxLen: number): KVCache {
    return new KVCache(this.config.numLayers, batch, maxLen, this.config.numKvHeads, this.config.headDim);
  }

  forward(ids: Int32Array, B: number, T: number, opts: ForwardOptions = {}): Tensor {
    const { hiddenSize: C, numLayers: L, numHeads: H, numKvHeads: Hkv, headDim: D, rmsNormEps: eps } = this.config;
    const cache = opts.cache;
    const window = this.config.slidingWindow;
    if (window !== null && (cache?.len ?? 0) + T > window) {
      throw new Error(`sequence of ${(cache?.len ?? 0) + T} tokens exceeds the sliding window (${window}), which is not implemented`);
    }
    const positions = this.positionsFor(B, T, opts);
    const tables = this.ropeTables();
    if (cache && T === 1 && opts.output !== 'hidden') {
      const logits = this.fusedDecodeStep(ids, B, positions, cache, opts);
      if (logits) return logits;
    }
    cache?.appendMask(T, opts.keyMask);
    const keyMask = cache ? cache.keyMask : (opts.keyMask ?? null);

    const layer = (l: number, h: Tensor): Tensor => {
      const p = `model.layers.${l}`;
      const x = rmsnorm(h, this.param(`${p}.input_layernorm.weight`), eps);
      const q = rope(reshape(this.proj(x, `${p}.self_attn.q_proj`, 'linear', opts.rowAdapters), [B, T, H, D]), positions, tables);
      const k = rope(reshape(this.proj(x, `${p}.self_attn.k_proj`, 'linear', opts.rowAdapters), [B, T, Hkv, D]), positions, tables);
      const v = reshape(this.proj(x, `${p}.self_attn.v_proj`, 'linear', opts.rowAdapters), [B, T, Hkv, D]);
      const a = this.selfAttention(l, q, k, v, cache, keyMask, opts.sharedPrompt); // [B, T, H, D]
      const r = add(h, this.proj(reshape(a, [B, T, H * D]), `${p}.self_attn.o_proj`, 'linear', opts.rowAdapters));

      const y = rmsnorm(r, this.param(`${p}.post_attention_layernorm.weight`), eps);
      const m = swiglu(this.proj(y, `${p}.mlp.gate_proj`, 'linear', opts.rowAdapters), this.proj(y, `${p}.mlp.up_proj`, 'linear', opts.rowAdapters)); // [B, T, F]
      return add(r, this.proj(m, `${p}.mlp.down_proj`, 'linear', opts.rowAdapters));
    };
    // Without gradients a layer's activations are garbage once the next layer has its input: each
    // layer reuses the last one's buffers (engine/buffer-pool.ts, scratch).
    const inference = !isGradEnabled();
    let h = embedding(this.param('model.embed_tokens.weight'), ids, [B, T]); // [B, T, C]
    for (let l = 0; l < L; l++) {
      const input = h;
      h = inference
        ? scratch(
            () => layer(l, input),
            (r) => [r.data],
            [input.data],
          )
        : layer(l, input);
    }
    if (cache) cache.len += T;

    let out = reshape(h, [B * T, C]);
    if (opts.outputRows) out = gatherRows(out, opts.outputRows); // [R, C]
    out = rmsnorm(out, this.param('model.norm.weight'), eps);
    if (opts.output === 'hidden') return opts.outputRows ? out : reshape(out, [B, T, C]);
    const head = this.config.tieWordEmbeddings ? this.param('model.embed_tokens.weight') : this.param('lm_head.weight');
    const logits = linear(out, head); // [R, V]
    return opts.outputRows ? logits : reshape(logits, [B, T, this.config.vocabSize]);
  }

  /**
   * A decode step (one new token per row) in one call (llama-decode.ts), when it can be: weights packed
   * for this many rows (inside a sampling call, engine/packed.ts), no gradient, float32, logits
   * for every row. Null otherwise, and the layer-by-layer forward runs: both give the same products
   * in the same order, except that LoRA adapters are merged into their packs here (W + s·B·A, equal
   * to the separate products up to float rounding).
   */
  private fusedDecodeStep(ids: Int32Array, B: number, positions: Int32Array, cache: KVCache, opts: ForwardOptions): Tensor | null {
    const c = this.config;
    if (!fusedDecode || isGradEnabled() || getDType() !== 'float32') return null;
    if (opts.outputRows && (opts.outputRows.length !== B || opts.outputRows.some((r, i) => r !== i))) return null;
    const { hiddenSize: C, numLayers: L, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: F, vocabSize: V } = c;
    const be = backend();
    // Rows under their own adapters (agents sharing this base): the base packs, and each run's adapters as products of their own.
    const lora = opts.rowAdapters ? this.decodeLoraRuns(opts.rowAdapters) : [];
    if (lora === null) return null;
    // A projection's LoRA adapter is folded into its pack: one product per projection, as without one.
    const pack = (name: string, N: number, K: number): FloatArray | null => {
      const ad = opts.rowAdapters ? undefined : this.lora.get(name.slice(0, -'.weight'.length));
      const delta = ad ? { A: ad.A.data, B: ad.B.data, r: ad.A.shape[0], scale: ad.scale } : null;
      return packedWeight(be, this.param(name).data, true, B, N, K, delta)?.data ?? null;
    };
    const bias = (name: string) => this.params.get(`${name}.bias`)?.data ?? null;
    const head = pack(c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight', V, C);
    if (head === null) return null; // no pack scope, or rows outside the packs' range
    const weights: (FloatArray | null)[] = [this.param('model.embed_tokens.weight').data, this.param('model.norm.weight').data, head];
    const caches: FloatArray[] = [];
    for (let l = 0; l < L; l++) {
      const p = `model.layers.${l}`;
      const a = `${p}.self_attn`;
      const m = `${p}.mlp`;
      // In llama-decode.ts's LAYER_WEIGHTS order.
      const layer: Record<(typeof LAYER_WEIGHTS)[number], FloatArray | null> = {
        ln1: this.param(`${p}.input_layernorm.weight`).data,
        q: pack(`${a}.q_proj.weight`, H * D, C),
        k: pack(`${a}.k_proj.weight`, Hkv * D, C),
        v: pack(`${a}.v_proj.weight`, Hkv * D, C),
        o: pack(`${a}.o_proj.weight`, C, H * D),
        ln2: this.param(`${p}.post_attention_layernorm.weight`).data,
        gate: pack(`${m}.gate_proj.weight`, F, C),
        up: pack(`${m}.up_proj.weight`, F, C),
        down: pack(`${m}.down_proj.weight`, C, F),
        q_bias: bias(`${a}.q_proj`),
        k_bias: bias(`${a}.k_proj`),
        v_bias: bias(`${a}.v_proj`),
        o_bias: bias(`${a}.o_proj`),
        gate_bias: bias(`${m}.gate_proj`),
        up_bias: bias(`${m}.up_proj`),
        down_bias: bias(`${m}.down_proj`),
      };
      if ([layer.q, layer.k, layer.v, layer.o, layer.gate, layer.up, layer.down].includes(null)) return null; // the scope's pack budget ran out
      weights.push(...LAYER_WEIGHTS.map((name) => layer[name]));
      caches.push(cache.k[l].data, cache.v[l].data);
    }
    const bf16 = be.getPrecision() !== 'fp32'; // packedWeight makes bf16 packs exactly then
    cache.appendMask(1, opts.keyMask);
    const tables = this.ropeTables();
    const dims = Float64Array.of(B, L, C, H, Hkv, D, F, V, cache.maxLen, cache.len, c.rmsNormEps, bf16 ? 1 : 0);
    const logits = new Tensor(alloc(B * V), opts.outputRows ? [B, V] : [B, 1, V]);
    llamaDecodeStep(be, [dims, weights, caches, cache.keyMask, ids, positions, tables.cos, tables.sin, logits.data], lora, cache.sharedKeys ?? undefined);
    cache.len += 1;
    return logits;
  }

  /**
   * The fused step's form of `rows` (llama-decode.ts DecodeLoraRun), or null when it has none: an
   * adapter outside the layers' seven projections, or a run whose adapters differ in rank or scale.
   */
  private decodeLoraRuns(rows: RowAdapters): DecodeLoraRun[] | null {
    const L = this.config.numLayers;
    const names = LORA_PROJECTIONS.map((p) => (p === 'q' || p === 'k' || p === 'v' || p === 'o' ? `self_attn.${p}_proj` : `mlp.${p}_proj`));
    const runs: DecodeLoraRun[] = [];
    for (const [s, adapters] of rows.adapters.entries()) {
      if (adapters === null || adapters.size === 0) continue;
      const first = adapters.values().next().value as LoraAdapter;
      const [r, scale] = [first.A.shape[0], first.scale];
      const weights: (FloatArray | null)[] = [];
      let found = 0;
      for (let l = 0; l < L; l++) {
        for (const n of names) {
          const ad = adapters.get(`model.layers.${l}.${n}`);
          if (ad && (ad.A.shape[0] !== r || ad.scale !== scale)) return null;
          if (ad) found++;
          weights.push(ad?.A.data ?? null, ad?.B.data ?? null);
        }
      }
      if (found !== adapters.size) return null;
      runs.push({ row0: rows.bounds[s], row1: rows.bounds[s + 1], r, scale, weights });
    }
    return runs;
  }

  private ropeTables(): RopeTables {
    this.rope ??= ropeTables(this.config.headDim, this.config.maxPositions, this.config.ropeTheta);
    return this.rope;
  }
}
