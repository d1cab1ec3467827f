/**
 * Our camelCase model configs, and the parts of reading Hugging Face's `config.json` every
 * architecture shares: the field reader that collects every problem into one error, the keys all
 * architectures have, and the size limits. Each architecture reads and writes its own keys in its
 * registry entry (model/architectures/<name>.ts); model/hf-config.ts dispatches between them.
 * `generation_config.json` has no architecture and is read and written here.
 *
 * Defaults are the ones transformers' config classes use when a key is absent. Unknown keys are
 * ignored (HF configs carry many training-only keys); keys that would change the forward pass in
 * a way we do not implement are errors, never ignored.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic-write.js';
import { CheckpointError } from './errors.js';

export type LlamaModelType = 'llama' | 'qwen2' | 'mistral';
export type TorchDtype = 'float32' | 'float16' | 'bfloat16';

/** The fields every architecture's config has. */
export interface CommonConfig {
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

/** The keys every architecture's config.json has, for `cfg` of the HF class `className`; the entry adds its own after them. */
export function commonHfFields(cfg: ModelConfig, className: string): Record<string, unknown> {
  return {
    architectures: [className],
    model_type: cfg.modelType,
    vocab_size: cfg.vocabSize,
    bos_token_id: cfg.bosTokenId,
    eos_token_id: cfg.eosTokenId,
    pad_token_id: cfg.padTokenId,
    tie_word_embeddings: cfg.tieWordEmbeddings,
    torch_dtype: cfg.torchDtype,
  };
}

/** Throws: `cfg` has a combination the HF config class of its model type cannot express. */
export function unrepresentable(why: string): never {
  throw new CheckpointError('BAD_CONFIG', 'config.json', `this config cannot be written as a Hugging Face config: ${why}`, 'fix the in-memory config');
}

/** The keys every architecture reads, with the architecture's defaults for vocabulary, BOS, EOS and tied head. */
export function readCommonFields(
  f: FieldReader,
  vocab: number,
  bos: number | null,
  eos: number | null,
  tie: boolean,
): Pick<CommonConfig, 'vocabSize' | 'tieWordEmbeddings' | 'bosTokenId' | 'eosTokenId' | 'padTokenId' | 'torchDtype'> {
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
export class FieldReader {
  private readonly problems: string[] = [];
  private readonly badKeys = new Set<string>();
  private readonly unsupportedFeatures: string[] = [];

  constructor(private readonly json: Record<string, unknown>) {}

  /** Whether `key` is present (a null value counts). */
  has(key: string): boolean {
    return this.json[key] !== undefined;
  }

  /** The value of `key` as the JSON has it, unchecked. */
  raw(key: string): unknown {
    return this.json[key];
  }

  /** False once `keys` produced a problem, so cross-field checks don't pile onto a fallback value. */
  valid(...keys: string[]): boolean {
    return keys.every((k) => !this.badKeys.has(k));
  }

  /** Records a malformed value (BAD_CONFIG). */
  issue(key: string, got: unknown, expected: string): void {
    this.badKeys.add(key);
    this.problems.push(`${key}: got ${JSON.stringify(got)}, expected ${expected}`);
  }

  /** Records a well-formed value that asks for something not implemented (UNSUPPORTED_FEATURE). */
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

  /** Non-negative integer. */
  count(key: string, fallback: number): number {
    return this.read(key, fallback, (v) => Number.isSafeInteger(v) && (v as number) >= 0, 'a non-negative integer');
  }

  /** Positive finite number. */
  positive(key: string, fallback: number): number {
    return this.read(key, fallback, (v) => typeof v === 'number' && Number.isFinite(v) && v > 0, 'a positive number');
  }

  /** true or false. */
  bool(key: string, fallback: boolean): boolean {
    return this.read(key, fallback, (v) => typeof v === 'boolean', 'true or false');
  }

  /** A token id, or null. */
  tokenId(key: string, fallback: number | null): number | null {
    return this.read(key, fallback, (v) => v === null || isTokenId(v), 'a token id or null');
  }

  /** A token id, a non-empty list of them, or null. */
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

  /** Throws one CheckpointError listing every problem recorded (BAD_CONFIG before UNSUPPORTED_FEATURE). */
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

/** A config file's JSON; `fix` says what to do when it is missing, too large or not JSON. */
export function readJson(file: string, fix: string): unknown {
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

/** A JSON object (not null, not an array). */
export function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
