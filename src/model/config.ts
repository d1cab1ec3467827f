/**
 * Hugging Face `config.json` / `generation_config.json` <-> our camelCase model configs.
 *
 * Defaults are the ones transformers' LlamaConfig, Qwen2Config, MistralConfig and GPT2Config use
 * when a key is absent. Unknown keys are ignored (HF configs carry many training-only keys);
 * keys that would change the forward pass in a way we do not implement are errors, never ignored.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic-write.js';
import { CheckpointError } from './errors.js';

export type LlamaModelType = 'llama' | 'qwen2' | 'mistral';
export type TorchDtype = 'float32' | 'float16' | 'bfloat16';

interface CommonConfig {
  vocabSize: number;
  hiddenSize: number;
  /** MLP inner width (llama: gate/up rows; gpt2: c_fc columns). */
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  /** Key/value heads (grouped-query attention); gpt2: = numHeads. */
  numKvHeads: number;
  headDim: number;
  maxPositions: number;
  tieWordEmbeddings: boolean;
  bosTokenId: number | null;
  eosTokenId: number | number[] | null;
  padTokenId: number | null;
  /** Storage dtype the checkpoint was saved in (informational; we compute in f32). */
  torchDtype: TorchDtype | null;
}

/** Llama-style decoder (RMSNorm, RoPE, SwiGLU): Llama, Qwen2 and Mistral. */
export interface LlamaConfig extends CommonConfig {
  arch: 'llama';
  modelType: LlamaModelType;
  activation: 'silu';
  rmsNormEps: number;
  ropeTheta: number;
  /** q_proj, k_proj and v_proj have biases (qwen2: always; llama: `attention_bias`). */
  attentionBias: boolean;
  /** o_proj has a bias (llama: `attention_bias`; qwen2 and mistral: never). */
  oProjBias: boolean;
  /** gate/up/down_proj have biases (llama: `mlp_bias`). */
  mlpBias: boolean;
  /** Mistral's attention window: we do not implement it, so sequences longer than this must be refused. */
  slidingWindow: number | null;
}

/** GPT-2 (LayerNorm, learned positions, GELU MLP, Conv1D weights stored [in, out]). */
export interface Gpt2Config extends CommonConfig {
  arch: 'gpt2';
  modelType: 'gpt2';
  /** The tanh GELU (HF's gelu_new and gelu_pytorch_tanh); the exact erf GELU ("gelu") is not implemented. */
  activation: 'gelu_new' | 'gelu_pytorch_tanh';
  layerNormEps: number;
}

export type ModelConfig = LlamaConfig | Gpt2Config;

/** Sampling defaults a checkpoint ships in generation_config.json; absent keys are left out. */
export interface GenerationDefaults {
  bosTokenId?: number;
  eosTokenId?: number | number[];
  padTokenId?: number;
  doSample?: boolean;
  temperature?: number;
  topP?: number;
  topK?: number;
  maxNewTokens?: number;
}

const ARCHITECTURES = {
  LlamaForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  MistralForCausalLM: 'mistral',
  GPT2LMHeadModel: 'gpt2',
} as const;
type ModelType = (typeof ARCHITECTURES)[keyof typeof ARCHITECTURES];
const ARCHITECTURE_OF = Object.fromEntries(Object.entries(ARCHITECTURES).map(([a, t]) => [t, a])) as Record<ModelType, string>;

/**
 * Upper bounds on size keys, far beyond any published checkpoint (Llama-3.1-405B: 126 layers,
 * hidden 16384, MLP 53248, vocab 128256): a garbage or hostile config.json gets a clear error
 * instead of a loop over 10^9 layers or a request for terabytes. The weights are checked against
 * the config before anything is allocated (load.ts), so within these bounds memory follows the file.
 */
export const CONFIG_LIMITS = {
  vocab: 1 << 24,
  hidden: 1 << 17,
  intermediate: 1 << 20,
  layers: 1024,
  heads: 4096,
  headDim: 4096,
  positions: 1 << 24,
} as const;

/** HF defaults per model type, for keys whose absence means "use the class default". */
const LLAMA_DEFAULTS: Record<
  LlamaModelType,
  { vocab: number; hidden: number; inter: number; kvHeads: number | null; maxPos: number; bos: number | null; eos: number | null; window: number | null }
> = {
  llama: { vocab: 32000, hidden: 4096, inter: 11008, kvHeads: null, maxPos: 2048, bos: 1, eos: 2, window: null },
  qwen2: { vocab: 151936, hidden: 4096, inter: 22016, kvHeads: 32, maxPos: 32768, bos: null, eos: null, window: null },
  mistral: { vocab: 32000, hidden: 4096, inter: 14336, kvHeads: 8, maxPos: 131072, bos: 1, eos: 2, window: 4096 },
};

export function readModelConfig(dir: string): ModelConfig {
  const file = join(dir, 'config.json');
  return parseModelConfig(readJson(file, 'point to a Hugging Face model folder (it must contain config.json)'), file);
}

export function writeModelConfig(dir: string, cfg: ModelConfig): void {
  writeFileAtomic(join(dir, 'config.json'), [`${JSON.stringify(toHfConfig(cfg), null, 2)}\n`]);
}

/** Writes generation_config.json with the HF key names (absent fields are left out). */
export function writeGenerationConfig(dir: string, g: GenerationDefaults): void {
  const hf: Record<string, unknown> = {
    bos_token_id: g.bosTokenId,
    eos_token_id: g.eosTokenId,
    pad_token_id: g.padTokenId,
    do_sample: g.doSample,
    temperature: g.temperature,
    top_p: g.topP,
    top_k: g.topK,
    max_new_tokens: g.maxNewTokens,
  };
  for (const k of Object.keys(hf)) if (hf[k] === undefined) delete hf[k];
  writeFileAtomic(join(dir, 'generation_config.json'), [`${JSON.stringify(hf, null, 2)}\n`]);
}

/** Returns {} when the folder has no generation_config.json. */
export function readGenerationConfig(dir: string): GenerationDefaults {
  const file = join(dir, 'generation_config.json');
  return existsSync(file) ? parseGenerationConfig(readJson(file, 'fix or delete generation_config.json'), file) : {};
}

/** `file` only names the source in error messages. */
export function parseModelConfig(json: unknown, file = 'config.json'): ModelConfig {
  if (!isRecord(json)) throw new CheckpointError('BAD_CONFIG', file, 'top level is not a JSON object', "replace it with the model's config.json");
  const modelType = resolveModelType(json, file);
  const f = new FieldReader(json);
  const cfg = modelType === 'gpt2' ? readGpt2(f) : readLlama(f, modelType);
  f.throwIfAny(file);
  return cfg;
}

export function parseGenerationConfig(json: unknown, file = 'generation_config.json'): GenerationDefaults {
  if (!isRecord(json)) throw new CheckpointError('BAD_CONFIG', file, 'top level is not a JSON object', 'fix or delete generation_config.json');
  const f = new FieldReader(json);
  const out: GenerationDefaults = {};
  const set = <K extends keyof GenerationDefaults>(key: K, value: GenerationDefaults[K] | null) => {
    if (value !== null) out[key] = value;
  };
  set('bosTokenId', f.tokenId('bos_token_id', null));
  set('eosTokenId', f.tokenIds('eos_token_id', null));
  set('padTokenId', f.tokenId('pad_token_id', null));
  set('doSample', f.has('do_sample') ? f.bool('do_sample', false) : null);
  set('temperature', f.has('temperature') ? f.positive('temperature', 1) : null);
  set('topP', f.has('top_p') ? f.positive('top_p', 1) : null);
  set('topK', f.has('top_k') ? f.count('top_k', 0) : null);
  set('maxNewTokens', f.has('max_new_tokens') ? f.int('max_new_tokens', 1) : null);
  if (out.topP !== undefined && out.topP > 1) f.issue('top_p', out.topP, 'a number in (0, 1]');
  f.throwIfAny(file);
  return out;
}

/** The config.json transformers would write for `cfg`; parseModelConfig(toHfConfig(cfg)) deep-equals cfg. */
export function toHfConfig(cfg: ModelConfig): Record<string, unknown> {
  const common = {
    architectures: [ARCHITECTURE_OF[cfg.modelType]],
    model_type: cfg.modelType,
    vocab_size: cfg.vocabSize,
    bos_token_id: cfg.bosTokenId,
    eos_token_id: cfg.eosTokenId,
    pad_token_id: cfg.padTokenId,
    tie_word_embeddings: cfg.tieWordEmbeddings,
    torch_dtype: cfg.torchDtype,
  };
  if (cfg.arch === 'gpt2') {
    if (cfg.numKvHeads !== cfg.numHeads || cfg.headDim * cfg.numHeads !== cfg.hiddenSize) {
      unrepresentable('gpt2 needs numKvHeads = numHeads and headDim = hiddenSize / numHeads');
    }
    return {
      ...common,
      n_embd: cfg.hiddenSize,
      n_inner: cfg.intermediateSize,
      n_layer: cfg.numLayers,
      n_head: cfg.numHeads,
      n_positions: cfg.maxPositions,
      activation_function: cfg.activation,
      layer_norm_epsilon: cfg.layerNormEps,
    };
  }
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
    ...common,
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

function unrepresentable(why: string): never {
  throw new CheckpointError('BAD_CONFIG', 'config.json', `this config cannot be written as a Hugging Face config: ${why}`, 'fix the in-memory config');
}

function resolveModelType(json: Record<string, unknown>, file: string): ModelType {
  const supported = Object.keys(ARCHITECTURES).join(', ');
  const { architectures, model_type: modelType } = json;
  if (Array.isArray(architectures) && architectures.length > 0) {
    const arch = architectures[0];
    if (typeof arch === 'string' && arch in ARCHITECTURES) {
      const resolved = ARCHITECTURES[arch as keyof typeof ARCHITECTURES];
      if (modelType !== undefined && modelType !== resolved) {
        throw new CheckpointError(
          'BAD_CONFIG',
          file,
          `model_type: got ${JSON.stringify(modelType)}, expected "${resolved}" for ${arch}`,
          'make model_type match architectures',
        );
      }
      return resolved;
    }
    throw new CheckpointError(
      'UNKNOWN_ARCHITECTURE',
      file,
      `architecture ${JSON.stringify(arch)} is not supported; supported: ${supported}`,
      'use a checkpoint of a supported architecture',
    );
  }
  if (typeof modelType === 'string' && Object.values(ARCHITECTURES).includes(modelType as ModelType)) return modelType as ModelType;
  throw new CheckpointError(
    'UNKNOWN_ARCHITECTURE',
    file,
    `no supported "architectures" entry or model_type (got model_type ${JSON.stringify(modelType)}); supported: ${supported}`,
    'use a checkpoint of a supported architecture',
  );
}

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
    ...readCommon(f, d.vocab, d.bos, d.eos, false),
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
    ...readCommon(f, 50257, 50256, 50256, true),
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

function readCommon(f: FieldReader, vocab: number, bos: number | null, eos: number | null, tie: boolean) {
  const dtypeKey = f.has('torch_dtype') ? 'torch_dtype' : 'dtype'; // transformers >= 4.56 writes "dtype"
  return {
    vocabSize: f.int('vocab_size', vocab, CONFIG_LIMITS.vocab),
    tieWordEmbeddings: f.bool('tie_word_embeddings', tie),
    bosTokenId: f.tokenId('bos_token_id', bos),
    eosTokenId: f.tokenIds('eos_token_id', eos),
    padTokenId: f.tokenId('pad_token_id', null),
    torchDtype: f.has(dtypeKey) && f.raw(dtypeKey) !== null ? f.enumeration(dtypeKey, 'float32', ['float32', 'float16', 'bfloat16'] as const, false) : null,
  };
}

/** Typed reads of HF config keys that collect every problem, so one error lists them all. */
class FieldReader {
  private readonly problems: string[] = [];
  private readonly badKeys = new Set<string>();
  private readonly unsupportedFeatures: string[] = [];

  constructor(private readonly json: Record<string, unknown>) {}

  has(key: string): boolean {
    return this.json[key] !== undefined;
  }

  raw(key: string): unknown {
    return this.json[key];
  }

  /** False once `keys` produced a problem, so cross-field checks don't pile onto a fallback value. */
  valid(...keys: string[]): boolean {
    return keys.every((k) => !this.badKeys.has(k));
  }

  issue(key: string, got: unknown, expected: string): void {
    this.badKeys.add(key);
    this.problems.push(`${key}: got ${JSON.stringify(got)}, expected ${expected}`);
  }

  unsupported(key: string, got: unknown, why: string): void {
    this.unsupportedFeatures.push(`${key}: got ${JSON.stringify(got)} — ${why}`);
  }

  /** Positive integer up to `max`; `keys` lists aliases, first present wins. */
  int(keys: string | string[], fallback: number, max = Number.MAX_SAFE_INTEGER): number {
    const expected = max === Number.MAX_SAFE_INTEGER ? 'a positive integer' : `a positive integer ≤ ${max}`;
    return this.read(keys, fallback, (v) => Number.isSafeInteger(v) && (v as number) > 0 && (v as number) <= max, expected);
  }

  /** Positive integer, or null when absent or null (HF's "derive it from other fields"). */
  optionalInt(key: string, max?: number): number | null {
    return this.json[key] === null || this.json[key] === undefined ? null : this.int(key, 1, max);
  }

  count(key: string, fallback: number): number {
    return this.read(key, fallback, (v) => Number.isSafeInteger(v) && (v as number) >= 0, 'a non-negative integer');
  }

  positive(key: string, fallback: number): number {
    return this.read(key, fallback, (v) => typeof v === 'number' && Number.isFinite(v) && v > 0, 'a positive number');
  }

  bool(key: string, fallback: boolean): boolean {
    return this.read(key, fallback, (v) => typeof v === 'boolean', 'true or false');
  }

  tokenId(key: string, fallback: number | null): number | null {
    return this.read(key, fallback, (v) => v === null || isTokenId(v), 'a token id or null');
  }

  tokenIds(key: string, fallback: number | null): number | number[] | null {
    const ok = (v: unknown) => v === null || isTokenId(v) || (Array.isArray(v) && v.length > 0 && v.every(isTokenId));
    return this.read(key, fallback, ok, 'a token id, a non-empty list of token ids, or null');
  }

  /** `unsupportedIfOther`: a well-formed but unimplemented value is UNSUPPORTED_FEATURE, not BAD_CONFIG. */
  enumeration<T extends string>(key: string, fallback: T, allowed: readonly T[], unsupportedIfOther: boolean): T {
    const v = this.json[key];
    if (v === undefined) return fallback;
    if (allowed.includes(v as T)) return v as T;
    const expected = allowed.map((a) => `"${a}"`).join(' or ');
    if (unsupportedIfOther && typeof v === 'string') this.unsupported(key, v, `only ${expected} is implemented`);
    else this.issue(key, v, expected);
    return fallback;
  }

  throwIfAny(file: string): void {
    if (this.problems.length > 0) {
      throw new CheckpointError(
        'BAD_CONFIG',
        file,
        `invalid fields: ${[...this.problems, ...this.unsupportedFeatures].join('; ')}`,
        `fix these keys in ${file}`,
      );
    }
    if (this.unsupportedFeatures.length > 0) {
      throw new CheckpointError(
        'UNSUPPORTED_FEATURE',
        file,
        `unsupported settings: ${this.unsupportedFeatures.join('; ')}`,
        'use a checkpoint without these features',
      );
    }
  }

  private read<T>(keys: string | string[], fallback: T, ok: (v: unknown) => boolean, expected: string): T {
    const key = [keys].flat().find((k) => this.json[k] !== undefined);
    if (key === undefined) return fallback;
    const v = this.json[key];
    if (ok(v)) return (Array.isArray(v) ? [...v] : v) as T;
    this.issue(key, v, expected);
    return fallback;
  }
}

/** Real config.json / generation_config.json files are a few KiB. */
const MAX_CONFIG_BYTES = 16 << 20;

function readJson(file: string, fix: string): unknown {
  if (!existsSync(file)) throw new CheckpointError('FILE_MISSING', file, 'file does not exist', fix);
  const size = statSync(file).size;
  if (size > MAX_CONFIG_BYTES) throw new CheckpointError('BAD_CONFIG', file, `file is ${size} bytes; a config file is at most ${MAX_CONFIG_BYTES}`, fix);
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CheckpointError('BAD_CONFIG', file, `not valid JSON (${(err as Error).message})`, 'fix the JSON syntax');
  }
}

function isTokenId(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
