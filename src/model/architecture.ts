/**
 * What the rest of magrpo needs to know about a model architecture, in one place per architecture
 * (model/architectures/<name>.ts; the module itself is model/<name>.ts): how to build it, its
 * parameters, its config.json keys both ways, which checkpoint keys are not parameters, LoRA's
 * view of its projections, and its GGUF names, layouts and metadata both ways. Loading, config.json,
 * LoRA and GGUF import/export go through the registry (model/architectures/index.ts) and hold no
 * per-architecture branches. The engine knows no architecture.
 */
import type { FieldReader, ModelConfig } from './config.js';
import type { GgufFile } from './gguf-file.js';
import type { GgufValue, TensorNames } from './gguf-names.js';
import type { CausalLM, ParamSpec } from './transformer.js';

/** llama.cpp's name of an architecture (GGUF `general.architecture`). */
export type GgufArchitecture = 'llama' | 'qwen2' | 'gpt2';

export interface Architecture {
  /** `ModelConfig.arch` of the configs this entry builds. */
  readonly family: ModelConfig['arch'];
  /** The model, parameters allocated and zero. */
  create(config: ModelConfig): CausalLM;
  /** Parameter names and shapes, without allocating. */
  paramSpecs(config: ModelConfig): ParamSpec[];
  /** Its config.json (model/config.ts holds what every architecture shares; model/hf-config.ts dispatches here). */
  config: {
    /** The transformers classes (config.json `architectures[0]`) this entry reads, each with its `model_type`. */
    readonly classes: Readonly<Record<string, string>>;
    /**
     * The config of `modelType` (one of `classes`' values) from config.json's keys, with the
     * transformers defaults for absent ones: every key that would change the forward pass is
     * implemented or recorded on `f` as unsupported, never ignored.
     */
    read(f: FieldReader, modelType: string): ModelConfig;
    /** The keys this architecture adds to config.json after the shared ones; throws (`unrepresentable`) for a config its class cannot express. */
    write(config: ModelConfig): Record<string, unknown>;
  };
  /** A checkpoint key's parameter name, or null for keys that are not parameters (buffers, a tied head's copy). */
  parameterName(key: string, config: ModelConfig): string | null;
  lora: {
    /** Projection weights are stored [in, out] (GPT-2's Conv1D), not [out, in]. */
    readonly conv1d: boolean;
    /** Every projection LoRA can adapt, by PEFT name (the last part of the parameter name). */
    readonly targets: readonly string[];
  };
  gguf: {
    /** The llama.cpp architectures this entry reads. */
    readonly names: readonly GgufArchitecture[];
    /** The one it writes for `config`. */
    nameOf(config: ModelConfig): GgufArchitecture;
    /** Why llama.cpp cannot take `config` (with what to do), or null. */
    unsupported(config: ModelConfig): { why: string; fix: string } | null;
    readonly tensorNames: TensorNames;
    /** A parameter's shape and data as convert_hf_to_gguf.py writes it (`name` is llama.cpp's). */
    toGguf(arch: GgufArchitecture, config: ModelConfig, name: string, shape: number[], data: Float32Array): { shape: number[]; data: Float32Array };
    /** The inverse: a GGUF tensor's shape and data back in HF layout. */
    fromGguf(arch: GgufArchitecture, config: ModelConfig, name: string, shape: number[], data: Float32Array): { shape: number[]; data: Float32Array };
    /** Extra tensors a writer adds and a reader may drop (GPT-2's copy of the tied head). */
    readonly droppable: readonly string[];
    /** The `<arch>.*` metadata llama.cpp's loader reads. */
    hyperparameters(arch: GgufArchitecture, config: ModelConfig): [string, GgufValue][];
    /** The config.json transformers would write for a GGUF file's metadata and tensors. */
    hfConfig(g: GgufFile, arch: GgufArchitecture): Record<string, unknown>;
  };
}

/** The `<arch>.*` sizes every architecture writes (llama.cpp takes the vocabulary size from it when a file has no tokenizer). */
export function sizeHyperparameters(arch: GgufArchitecture, c: ModelConfig): [string, GgufValue][] {
  const u32 = (value: number) => ({ type: 'u32', value }) as const;
  return [
    [`${arch}.vocab_size`, u32(c.vocabSize)],
    [`${arch}.context_length`, u32(c.maxPositions)],
    [`${arch}.embedding_length`, u32(c.hiddenSize)],
    [`${arch}.block_count`, u32(c.numLayers)],
    [`${arch}.feed_forward_length`, u32(c.intermediateSize)],
    [`${arch}.attention.head_count`, u32(c.numHeads)],
  ];
}

/** Row-major [rows, cols] → [cols, rows]. */
export function transpose(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = data[r * cols + c];
  return out;
}

/** The shortest decimal that is the same float32 (1e-5, not 9.999999747378752e-06): GGUF stores f32. */
export function f32Decimal(x: number): number {
  for (let p = 1; p <= 9; p++) {
    const d = Number(x.toPrecision(p));
    if (Math.fround(d) === Math.fround(x)) return d;
  }
  return x;
}
