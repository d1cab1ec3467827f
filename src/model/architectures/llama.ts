/**
 * The Llama family (Llama, Qwen2, Mistral; module in model/llama.ts) as the rest of magrpo sees it.
 * GGUF: llama.cpp's `llama` permutes Q/K rows (its rope pairs 2i with 2i + 1, HF's i with i + D/2);
 * its `qwen2` keeps HF's layout (NeoX-style rope) and has q/k/v biases.
 */
import { type Architecture, f32Decimal, sizeHyperparameters } from '../architecture.js';
import { CONFIG_LIMITS, type FieldReader, isRecord, type LlamaConfig, type LlamaModelType, readCommonFields, unrepresentable } from '../config.js';
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
  config: {
    classes: { LlamaForCausalLM: 'llama', Qwen2ForCausalLM: 'qwen2', MistralForCausalLM: 'mistral' },
    read: (f, modelType) => readLlama(f, modelType as LlamaModelType),
    write: (config) => writeLlama(config as LlamaConfig),
  },
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

/** HF defaults per model type, for keys whose absence means "use the class default". */
const LLAMA_DEFAULTS: Record<
  LlamaModelType,
  { vocab: number; hidden: number; inter: number; kvHeads: number | null; maxPos: number; bos: number | null; eos: number | null; window: number | null }
> = {
  llama: { vocab: 32000, hidden: 4096, inter: 11008, kvHeads: null, maxPos: 2048, bos: 1, eos: 2, window: null },
  qwen2: { vocab: 151936, hidden: 4096, inter: 22016, kvHeads: 32, maxPos: 32768, bos: null, eos: null, window: null },
  mistral: { vocab: 32000, hidden: 4096, inter: 14336, kvHeads: 8, maxPos: 131072, bos: 1, eos: 2, window: 4096 },
};

/** LlamaConfig, Qwen2Config or MistralConfig as transformers reads it. */
function readLlama(f: FieldReader, modelType: LlamaModelType): LlamaConfig {
  const d = LLAMA_DEFAULTS[modelType];
  const hiddenSize = f.int('hidden_size', d.hidden, CONFIG_LIMITS.hidden);
  const numHeads = f.int('num_attention_heads', 32, CONFIG_LIMITS.heads);
  const numKvHeads = f.optionalInt('num_key_value_heads', CONFIG_LIMITS.heads) ?? d.kvHeads ?? numHeads;
  const headDim = f.optionalInt('head_dim', CONFIG_LIMITS.headDim) ?? Math.floor(hiddenSize / numHeads);
  const maxPositions = f.int('max_position_embeddings', d.maxPos, CONFIG_LIMITS.positions);
  if (!f.has('head_dim') && f.valid('hidden_size', 'num_attention_heads') && hiddenSize % numHeads !== 0) {
    f.issue('hidden_size', hiddenSize, `a multiple of num_attention_heads (${numHeads})`);
  }
  if (f.valid('num_attention_heads', 'num_key_value_heads') && numHeads % numKvHeads !== 0) {
    f.issue('num_key_value_heads', numKvHeads, `a divisor of num_attention_heads (${numHeads})`);
  }
  if (f.valid('head_dim', 'hidden_size', 'num_attention_heads') && headDim % 2 !== 0) f.issue('head_dim', headDim, 'an even number (RoPE rotates pairs)');
  f.enumeration('hidden_act', 'silu', ['silu'] as const, true);
  checkRope(f);

  let attentionBias = false;
  let oProjBias = false;
  let mlpBias = false;
  let slidingWindow: number | null = null;
  if (modelType === 'llama') {
    attentionBias = oProjBias = f.bool('attention_bias', false);
    mlpBias = f.bool('mlp_bias', false);
  } else if (modelType === 'qwen2') {
    attentionBias = true;
    if (f.bool('use_sliding_window', false))
      f.unsupported('use_sliding_window', true, 'sliding-window attention is not implemented; use a checkpoint with use_sliding_window: false');
  } else {
    slidingWindow = f.has('sliding_window') ? f.optionalInt('sliding_window') : d.window;
  }
  return {
    arch: 'llama',
    modelType,
    ...readCommonFields(f, d.vocab, d.bos, d.eos, false),
    hiddenSize,
    intermediateSize: f.int('intermediate_size', d.inter, CONFIG_LIMITS.intermediate),
    numLayers: f.int('num_hidden_layers', 32, CONFIG_LIMITS.layers),
    numHeads,
    numKvHeads,
    headDim,
    maxPositions,
    activation: 'silu',
    rmsNormEps: f.positive('rms_norm_eps', 1e-6),
    ropeTheta: ropeTheta(f),
    attentionBias,
    oProjBias,
    mlpBias,
    slidingWindow,
  };
}

/** Anything but plain RoPE over the whole head would silently change logits. */
function checkRope(f: FieldReader): void {
  for (const key of ['rope_scaling', 'rope_parameters']) {
    const rope = f.raw(key);
    if (rope === undefined || rope === null) continue;
    const type = isRecord(rope) ? (rope.rope_type ?? rope.type) : undefined;
    if (type !== 'default') f.unsupported(key, rope, 'only plain RoPE (null or rope_type "default") is implemented');
  }
  const partial = f.raw('partial_rotary_factor');
  if (partial !== undefined && partial !== null && partial !== 1) f.unsupported('partial_rotary_factor', partial, 'only full-head RoPE (1.0) is implemented');
}

function ropeTheta(f: FieldReader): number {
  // transformers >= 4.56 may move rope_theta into rope_parameters.
  const params = f.raw('rope_parameters');
  if (!f.has('rope_theta') && isRecord(params) && params.rope_theta !== undefined) {
    const theta = params.rope_theta;
    if (typeof theta === 'number' && Number.isFinite(theta) && theta > 0) return theta;
    f.issue('rope_parameters.rope_theta', theta, 'a positive number');
  }
  return f.positive('rope_theta', 10000);
}

/** The keys of config.json after the shared ones (model/config.ts `commonHfFields`). */
function writeLlama(cfg: LlamaConfig): Record<string, unknown> {
  const perType: Record<string, unknown> = {};
  if (cfg.modelType === 'llama') {
    if (cfg.attentionBias !== cfg.oProjBias) unrepresentable("llama's attention_bias covers q/k/v and o_proj together");
    perType.attention_bias = cfg.attentionBias;
    perType.mlp_bias = cfg.mlpBias;
  } else if (cfg.modelType === 'qwen2') {
    if (!cfg.attentionBias || cfg.oProjBias || cfg.mlpBias) unrepresentable('qwen2 always has q/k/v biases and no o_proj or MLP biases');
    perType.use_sliding_window = false;
  } else if (cfg.attentionBias || cfg.oProjBias || cfg.mlpBias) {
    unrepresentable('mistral has no attention or MLP biases');
  }
  if (cfg.modelType === 'mistral') perType.sliding_window = cfg.slidingWindow;
  else if (cfg.slidingWindow !== null) unrepresentable(`${cfg.modelType} has no sliding window here`);
  return {
    hidden_size: cfg.hiddenSize,
    intermediate_size: cfg.intermediateSize,
    num_hidden_layers: cfg.numLayers,
    num_attention_heads: cfg.numHeads,
    num_key_value_heads: cfg.numKvHeads,
    head_dim: cfg.headDim,
    max_position_embeddings: cfg.maxPositions,
    hidden_act: cfg.activation,
    rms_norm_eps: cfg.rmsNormEps,
    rope_theta: cfg.ropeTheta,
    rope_scaling: null,
    ...perType,
  };
}
