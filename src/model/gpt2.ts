/**
 * GPT-2: LayerNorm, learned positions, GELU (tanh approximation), fused c_attn Conv1D weights
 * (stored [in, out]), LM head tied to the token embedding. Parameter names are the HF keys with
 * the `transformer.` prefix (the loader also accepts checkpoints saved without it).
 *
 * Legend: B batch, T new tokens, C hidden size, H heads, D = C / H head size, V vocabulary.
 *
 *   h = wte(ids) + wpe(pos)
 *   for each layer:  h = h + c_proj(attn(split(c_attn(ln_1(h)))))
 *                    h = h + mlp.c_proj(gelu(mlp.c_fc(ln_2(h))))
 *   logits = ln_f(h) · wteᵀ
 */
import { embedding, layernorm } from '../engine/nn.js';
import { add, gatherRows, gelu, linear, reshape, sliceLast } from '../engine/ops.js';
import type { Tensor } from '../engine/tensor.js';
import type { Gpt2Config } from './config.js';
import { CausalLM, type ForwardOptions, KVCache, type ParamSpec } from './transformer.js';

export class Gpt2Model extends CausalLM {
  declare readonly config: Gpt2Config;

  constructor(config: Gpt2Config) {
    super(config);
  }

  paramSpecs(): ParamSpec[] {
    const { vocabSize: V, hiddenSize: C, intermediateSize: F, numLayers: L, maxPositions: P } = this.config;
    const w = { kind: 'normal', std: 0.02 } as const;
    const out = { kind: 'normal', std: 0.02 / Math.sqrt(2 * L) } as const;
    const ones = { kind: 'ones' } as const;
    const zeros = { kind: 'zeros' } as const;
    const specs: ParamSpec[] = [
      { name: 'transformer.wte.weight', shape: [V, C], init: w },
      { name: 'transformer.wpe.weight', shape: [P, C], init: { kind: 'normal', std: 0.01 } },
    ];
    for (let l = 0; l < L; l++) {
      const p = `transformer.h.${l}`;
      specs.push(
        { name: `${p}.ln_1.weight`, shape: [C], init: ones },
        { name: `${p}.ln_1.bias`, shape: [C], init: zeros },
        { name: `${p}.attn.c_attn.weight`, shape: [C, 3 * C], init: w }, // Conv1D [in, out]
        { name: `${p}.attn.c_attn.bias`, shape: [3 * C], init: zeros },
        { name: `${p}.attn.c_proj.weight`, shape: [C, C], init: out },
        { name: `${p}.attn.c_proj.bias`, shape: [C], init: zeros },
        { name: `${p}.ln_2.weight`, shape: [C], init: ones },
        { name: `${p}.ln_2.bias`, shape: [C], init: zeros },
        { name: `${p}.mlp.c_fc.weight`, shape: [C, F], init: w },
        { name: `${p}.mlp.c_fc.bias`, shape: [F], init: zeros },
        { name: `${p}.mlp.c_proj.weight`, shape: [F, C], init: out },
        { name: `${p}.mlp.c_proj.bias`, shape: [C], init: zeros },
      );
    }
    specs.push({ name: 'transformer.ln_f.weight', shape: [C], init: ones }, { name: 'transformer.ln_f.bias', shape: [C], init: zeros });
    return specs;
  }

  createCache(batch: number, maxLen: number): KVCache {
    const { numHeads: H, hiddenSize: C } = this.config;
    return new KVCache(this.config.numLayers, batch, maxLen, H, C / H);
  }

  forward(ids: Int32Array, B: number, T: number, opts: ForwardOptions = {}): Tensor {
    const { hiddenSize: C, numLayers: L, numHeads: H, layerNormEps: eps } = this.config;
    const D = C / H;
    const cache = opts.cache;
    const positions = this.positionsFor(B, T, opts);
    cache?.appendMask(T, opts.keyMask);
    const keyMask = cache ? cache.keyMask : (opts.keyMask ?? null);
    const ln = (x: Tensor, name: string) => layernorm(x, this.param(`${name}.weight`), this.param(`${name}.bias`), eps);

    let h = add(embedding(this.param('transformer.wte.weight'), ids, [B, T]), embedding(this.param('transformer.wpe.weight'), positions, [B, T])); // [B, T, C]
    for (let l = 0; l < L; l++) {
      const p = `transformer.h.${l}`;
      const qkv = this.proj(ln(h, `${p}.ln_1`), `${p}.attn.c_attn`, 'conv1d', opts.rowAdapters); // [B, T, 3C]
      const q = reshape(sliceLast(qkv, 0, C), [B, T, H, D]);
      const k = reshape(sliceLast(qkv, C, C), [B, T, H, D]);
      const v = reshape(sliceLast(qkv, 2 * C, C), [B, T, H, D]);
      const a = this.selfAttention(l, q, k, v, cache, keyMask, opts.sharedPrompt); // [B, T, H, D]
      h = add(h, this.proj(reshape(a, [B, T, C]), `${p}.attn.c_proj`, 'conv1d', opts.rowAdapters));
      const m = gelu(this.proj(ln(h, `${p}.ln_2`), `${p}.mlp.c_fc`, 'conv1d', opts.rowAdapters)); // [B, T, F]
      h = add(h, this.proj(m, `${p}.mlp.c_proj`, 'conv1d', opts.rowAdapters));
    }
    if (cache) cache.len += T;

    let out = reshape(h, [B * T, C]);
    if (opts.outputRows) out = gatherRows(out, opts.outputRows); // [R, C]
    out = ln(out, 'transformer.ln_f');
    if (opts.output === 'hidden') return opts.outputRows ? out : reshape(out, [B, T, C]);
    const logits = linear(out, this.param('transformer.wte.weight')); // [R, V]
    return opts.outputRows ? logits : reshape(logits, [B, T, this.config.vocabSize]);
  }
}
