/**
 * The Llama family (Llama, Qwen2, Mistral; module in model/llama.ts) as the rest of magrpo sees it.
 * GGUF: llama.cpp's `llama` permutes Q/K rows (its rope pairs 2i with 2i + 1, HF's i with i + D/2);
 * its `qwen2` keeps HF's layout (NeoX-style rope) and has q/k/v biases.
 */
import { type Architecture, f32Decimal, sizeHyperparameters } from '../architecture.js';
import type { LlamaConfig } from '../config.js';
import { CheckpointError } from '../errors.js';
import { metaNumber, metaString, required } from '../gguf-file.js';
import { type GgufValue, permuteForRope, unpermuteForRope } from '../gguf-names.js';
import { LlamaModel } from '../llama.js';
import type { ParamSpec } from '../transformer.js';

const isQ = (name: string) => /\.attn_q\./.test(name);
const isK = (name: string) => /\.attn_k\./.test(name);

export const llama: Architecture = {
  family: 'llama',
  create: (config) => new LlamaModel(config as LlamaConfig),
  paramSpecs: (config) => LlamaModel.prototype.paramSpecs.call({ config } as unknown as LlamaModel) as ParamSpec[],
  parameterName(key, config) {
    if (key.endsWith('.rotary_emb.inv_freq')) return null; // old checkpoints' rope buffer
    return config.tieWordEmbeddings && key === 'lm_head.weight' ? null : key;
  },
  lora: { conv1d: false, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] },
  gguf: {
    names: ['llama', 'qwen2'],
    nameOf: (config) => ((config as LlamaConfig).modelType === 'qwen2' ? 'qwen2' : 'llama'),
    unsupported(config) {
      const c = config as LlamaConfig;
      if (c.slidingWindow !== null) return { why: 'sliding-window attention is not exported', fix: 'export a model without sliding_window' };
      if (c.modelType !== 'qwen2' && (c.mlpBias || c.oProjBias))
        return { why: 'MLP or output-projection biases have no llama.cpp tensor', fix: 'export a model without mlp_bias / attention_bias' };
      return null;
    },
    tensorNames: {
      fixed: { 'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'lm_head.weight': 'output.weight' },
      block: /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/,
      parts: {
        input_layernorm: 'attn_norm',
        'self_attn.q_proj': 'attn_q',
        'self_attn.k_proj': 'attn_k',
        'self_attn.v_proj': 'attn_v',
        'self_attn.o_proj': 'attn_output',
        post_attention_layernorm: 'ffn_norm',
        'mlp.gate_proj': 'ffn_gate',
        'mlp.up_proj': 'ffn_up',
        'mlp.down_proj': 'ffn_down',
      },
    },
    toGguf(arch, config, name, shape, data) {
      const cols = shape.length === 2 ? shape[1] : 1;
      if (arch === 'llama' && isQ(name)) return { shape, data: permuteForRope(data, config.numHeads, cols) };
      if (arch === 'llama' && isK(name)) return { shape, data: permuteForRope(data, config.numKvHeads, cols) };
      return { shape, data };
    },
    fromGguf(arch, config, name, shape, data) {
      const cols = shape.length === 2 ? shape[1] : 1;
      if (arch === 'llama' && isQ(name)) return { shape, data: unpermuteForRope(data, config.numHeads, cols) };
      if (arch === 'llama' && isK(name)) return { shape, data: unpermuteForRope(data, config.numKvHeads, cols) };
      return { shape, data };
    },
    droppable: [],
    hyperparameters(arch, config) {
      const u32 = (value: number) => ({ type: 'u32', value }) as const;
      const f32 = (value: number) => ({ type: 'f32', value }) as const;
      const c = config as LlamaConfig;
      const meta: [string, GgufValue][] = [
        ...sizeHyperparameters(arch, c),
        [`${arch}.attention.head_count_kv`, u32(c.numKvHeads)],
        [`${arch}.rope.freq_base`, f32(c.ropeTheta)],
        [`${arch}.rope.dimension_count`, u32(c.headDim)],
        [`${arch}.attention.layer_norm_rms_epsilon`, f32(c.rmsNormEps)],
      ];
      if (c.headDim * c.numHeads !== c.hiddenSize)
        meta.push([`${arch}.attention.key_length`, u32(c.headDim)], [`${arch}.attention.value_length`, u32(c.headDim)]);
      return meta;
    },
    hfConfig(g, arch) {
      const num = (key: string) => metaNumber(g, `${arch}.${key}`);
      const need = (key: string) => required(g, `${arch}.${key}`, num(key));
      const hidden = need('embedding_length');
      const heads = need('attention.head_count');
      const headDim = num('attention.key_length') ?? hidden / heads;
      const valueDim = num('attention.value_length') ?? headDim;
      if (valueDim !== headDim)
        throw new CheckpointError(
          'UNSUPPORTED_FEATURE',
          g.file,
          `${arch}.attention.value_length ${valueDim} differs from key_length ${headDim}`,
          'use a model whose keys and values have one head size',
        );
      const ropeDims = num('rope.dimension_count') ?? headDim;
      if (ropeDims !== headDim)
        throw new CheckpointError(
          'UNSUPPORTED_FEATURE',
          g.file,
          `${arch}.rope.dimension_count is ${ropeDims}, head size ${headDim}: partial RoPE is not implemented`,
          'use a model with full-head RoPE',
        );
      const scaling = metaString(g, `${arch}.rope.scaling.type`);
      if (scaling !== undefined && scaling !== 'none')
        throw new CheckpointError(
          'UNSUPPORTED_FEATURE',
          g.file,
          `${arch}.rope.scaling.type is "${scaling}": scaled RoPE is not implemented`,
          'use a model with plain RoPE',
        );
      const has = (name: string) => g.tensors.some((t) => t.name === name);
      return {
        architectures: [arch === 'qwen2' ? 'Qwen2ForCausalLM' : 'LlamaForCausalLM'],
        model_type: arch,
        tie_word_embeddings: !has('output.weight'),
        hidden_size: hidden,
        intermediate_size: need('feed_forward_length'),
        num_hidden_layers: need('block_count'),
        num_attention_heads: heads,
        num_key_value_heads: num('attention.head_count_kv') ?? heads,
        head_dim: headDim,
        max_position_embeddings: need('context_length'),
        hidden_act: 'silu',
        rms_norm_eps: f32Decimal(need('attention.layer_norm_rms_epsilon')),
        rope_theta: f32Decimal(num('rope.freq_base') ?? 10000),
        rope_scaling: null,
        ...(arch === 'qwen2' ? { use_sliding_window: false } : { attention_bias: has('blk.0.attn_q.bias'), mlp_bias: has('blk.0.ffn_gate.bias') }),
      };
    },
  },
};
