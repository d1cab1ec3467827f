/**
 * GPT-2 (module in model/gpt2.ts) as the rest of magrpo sees it. Its Conv1D weights are stored
 * [in, out]: LoRA and GGUF (which wants [out, in]) transpose them; llama.cpp's `gpt2` also carries
 * the tied head as `output.weight`, a copy of `token_embd`, as the converter wrote before llama.cpp
 * #12456 (March 2025): older llama.cpp refuses a GPT-2 file without it, newer ones take either.
 */
import { type Architecture, f32Decimal, sizeHyperparameters, transpose } from '../architecture.js';
import { CONFIG_LIMITS, type FieldReader, type Gpt2Config, readCommonFields, unrepresentable } from '../config.js';
import { metaNumber, required } from '../gguf-file.js';
import { Gpt2Model } from '../gpt2.js';
import type { ParamSpec } from '../transformer.js';

const conv1d = (name: string) => /\.(attn_qkv|attn_output|ffn_up|ffn_down)\.weight$/.test(name);

export const gpt2: Architecture = {
  family: 'gpt2',
  create: (config) => new Gpt2Model(config as Gpt2Config),
  paramSpecs: (config) => Gpt2Model.prototype.paramSpecs.call({ config } as unknown as Gpt2Model) as ParamSpec[],
  config: {
    classes: { GPT2LMHeadModel: 'gpt2' },
    read: (f) => readGpt2(f),
    write(config) {
      const c = config as Gpt2Config;
      if (c.numKvHeads !== c.numHeads || c.headDim * c.numHeads !== c.hiddenSize) {
        unrepresentable('gpt2 needs numKvHeads = numHeads and headDim = hiddenSize / numHeads');
      }
      return {
        n_embd: c.hiddenSize,
        n_inner: c.intermediateSize,
        n_layer: c.numLayers,
        n_head: c.numHeads,
        n_positions: c.maxPositions,
        activation_function: c.activation,
        layer_norm_epsilon: c.layerNormEps,
      };
    },
  },
  parameterName(key, config) {
    if (/\.attn\.(masked_)?bias$/.test(key)) return null; // causal-mask buffers
    if (config.tieWordEmbeddings && key === 'lm_head.weight') return null;
    // Checkpoints saved from GPT2Model rather than GPT2LMHeadModel lack the `transformer.` prefix.
    return key.startsWith('transformer.') || key.startsWith('lm_head.') ? key : `transformer.${key}`;
  },
  lora: { conv1d: true, targets: ['c_attn', 'c_proj', 'c_fc'] },
  gguf: {
    names: ['gpt2'],
    nameOf: () => 'gpt2',
    unsupported: () => null, // llama.cpp's gpt2 has the same tensors, the same tanh GELU and the tied head
    tensorNames: {
      fixed: {
        'transformer.wte.weight': 'token_embd.weight',
        'transformer.wpe.weight': 'position_embd.weight',
        'transformer.ln_f.weight': 'output_norm.weight',
        'transformer.ln_f.bias': 'output_norm.bias',
      },
      block: /^transformer\.h\.(\d+)\.(.+)\.(weight|bias)$/,
      parts: { ln_1: 'attn_norm', 'attn.c_attn': 'attn_qkv', 'attn.c_proj': 'attn_output', ln_2: 'ffn_norm', 'mlp.c_fc': 'ffn_up', 'mlp.c_proj': 'ffn_down' },
    },
    toGguf(_arch, _config, name, shape, data) {
      return conv1d(name) ? { shape: [shape[1], shape[0]], data: transpose(data, shape[0], shape[1]) } : { shape, data };
    },
    fromGguf(_arch, _config, name, shape, data) {
      return conv1d(name) ? { shape: [shape[1], shape[0]], data: transpose(data, shape[0], shape[1]) } : { shape, data };
    },
    droppable: ['output.weight'],
    hyperparameters: (arch, config) => [
      ...sizeHyperparameters(arch, config),
      [`${arch}.attention.layer_norm_epsilon`, { type: 'f32', value: (config as Gpt2Config).layerNormEps }],
    ],
    hfConfig(g, arch) {
      const need = (key: string) => required(g, `${arch}.${key}`, metaNumber(g, `${arch}.${key}`));
      return {
        architectures: ['GPT2LMHeadModel'],
        model_type: 'gpt2',
        tie_word_embeddings: true,
        n_embd: need('embedding_length'),
        n_inner: need('feed_forward_length'),
        n_layer: need('block_count'),
        n_head: need('attention.head_count'),
        n_positions: need('context_length'),
        activation_function: 'gelu_new',
        layer_norm_epsilon: f32Decimal(need('attention.layer_norm_epsilon')),
      };
    },
  },
};

/** GPT2Config as transformers reads it (the n_* keys, or their Llama-style aliases). */
function readGpt2(f: FieldReader): Gpt2Config {
  const hiddenSize = f.int(['n_embd', 'hidden_size'], 768, CONFIG_LIMITS.hidden);
  const numHeads = f.int(['n_head', 'num_attention_heads'], 12, CONFIG_LIMITS.heads);
  if (f.valid('n_embd', 'hidden_size', 'n_head', 'num_attention_heads') && hiddenSize % numHeads !== 0) {
    f.issue('n_embd', hiddenSize, `a multiple of n_head (${numHeads})`);
  }
  if (f.raw('scale_attn_weights') === false) f.unsupported('scale_attn_weights', false, 'attention is always scaled by 1/sqrt(head_dim)');
  if (f.raw('scale_attn_by_inverse_layer_idx') === true)
    f.unsupported('scale_attn_by_inverse_layer_idx', true, 'per-layer attention scaling is not implemented');
  if (f.raw('add_cross_attention') === true) f.unsupported('add_cross_attention', true, 'cross-attention is not implemented');
  return {
    arch: 'gpt2',
    modelType: 'gpt2',
    ...readCommonFields(f, 50257, 50256, 50256, true),
    hiddenSize,
    intermediateSize: f.optionalInt('n_inner', CONFIG_LIMITS.intermediate) ?? 4 * hiddenSize,
    numLayers: f.int(['n_layer', 'num_hidden_layers'], 12, CONFIG_LIMITS.layers),
    numHeads,
    numKvHeads: numHeads,
    headDim: Math.floor(hiddenSize / numHeads),
    maxPositions: f.int(['n_positions', 'max_position_embeddings'], 1024, CONFIG_LIMITS.positions),
    activation: f.enumeration('activation_function', 'gelu_new', ['gelu_new', 'gelu_pytorch_tanh'] as const, true),
    layerNormEps: f.positive('layer_norm_epsilon', 1e-5),
  };
}
