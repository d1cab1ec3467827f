/**
 * Hugging Face model folders ⇄ models: config.json + model.safetensors (or shards). Which keys are
 * parameters (and their legacy spellings) is the architecture entry's (architectures/).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { architectureOf } from './architectures/index.js';
import type { ModelConfig } from './config.js';
import { CheckpointError } from './errors.js';
import { readModelConfig, writeModelConfig } from './hf-config.js';
import { readShardedSafetensors, readShardedSafetensorsHeader, type WritableTensor, writeSafetensors } from './safetensors.js';
import type { CausalLM, ParamSpec } from './transformer.js';

/** A model of `config`'s architecture with uninitialised (zero) parameters. */
export function createModel(config: ModelConfig): CausalLM {
  return architectureOf(config).create(config);
}

/** The parameters a config implies (names, shapes), computed without allocating them. */
export function paramSpecsOf(config: ModelConfig): ParamSpec[] {
  return architectureOf(config).paramSpecs(config);
}

/**
 * Loads config.json + safetensors weights of a HF model folder. Errors name the offending file.
 * The weights' headers are checked against the config before any parameter is allocated (a
 * config.json claiming a huge model next to small weights is an error, not an out-of-memory
 * crash), and NaN or infinite weights are refused.
 */
export function loadModel(dir: string): CausalLM {
  const config = readModelConfig(dir);
  const weightsFile = existsSync(join(dir, 'model.safetensors')) ? join(dir, 'model.safetensors') : join(dir, 'model.safetensors.index.json');
  const headers = readShardedSafetensorsHeader(dir);
  const specs = new Map(paramSpecsOf(config).map((s) => [s.name, s]));
  const keyOf = new Map<string, string>();
  const arch = architectureOf(config);
  for (const [key, entry] of headers) {
    const name = arch.parameterName(key, config);
    if (name === null) continue;
    const spec = specs.get(name);
    if (spec === undefined) {
      throw new CheckpointError(
        'BAD_CONFIG',
        entry.file,
        `tensor "${key}" is not a parameter of a ${config.modelType} model with this config.json`,
        'check that config.json belongs to these weights',
      );
    }
    if (entry.shape.join() !== spec.shape.join()) {
      throw new CheckpointError(
        'SHAPE_MISMATCH',
        entry.file,
        `"${name}" has shape [${entry.shape}] but config.json implies [${spec.shape}]`,
        'check that config.json belongs to these weights',
      );
    }
    if (!entry.dtype.startsWith('F') && entry.dtype !== 'BF16') {
      throw new CheckpointError(
        'UNSUPPORTED_DTYPE',
        entry.file,
        `"${name}" is stored as ${entry.dtype}, not a float type`,
        're-export the weights as F32/F16/BF16',
      );
    }
    keyOf.set(name, key);
  }
  for (const name of specs.keys()) {
    if (!keyOf.has(name)) {
      throw new CheckpointError(
        'MISSING_TENSOR',
        weightsFile,
        `parameter "${name}" is missing`,
        'the checkpoint is incomplete or belongs to another architecture',
      );
    }
  }
  const model = createModel(config);
  const stored = readShardedSafetensors(dir);
  for (const [name, p] of model.params) {
    const key = keyOf.get(name) as string;
    const data = stored.get(key)?.data as Float32Array;
    const bad = data.findIndex((x) => !Number.isFinite(x));
    if (bad >= 0) {
      throw new CheckpointError(
        'CORRUPT',
        headers.get(key)?.file ?? weightsFile,
        `tensor "${key}" holds ${data[bad]} at element ${bad}: weights must be finite`,
        're-download or re-export the checkpoint (a diverged training run saves NaN weights)',
      );
    }
    p.data.set(data);
  }
  return model;
}

export type SaveDtype = 'F32' | 'F16' | 'BF16';

/** Writes config.json and model.safetensors (atomically) in `dir`. */
export function saveModel(model: CausalLM, dir: string, dtype: SaveDtype = 'F32'): void {
  mkdirSync(dir, { recursive: true });
  const tensors = new Map<string, WritableTensor>();
  for (const [name, p] of model.params) tensors.set(name, { dtype, shape: [...p.shape], data: Float32Array.from(p.data) });
  writeSafetensors(join(dir, 'model.safetensors'), tensors, { format: 'pt' });
  const torchDtype = dtype === 'F32' ? 'float32' : dtype === 'F16' ? 'float16' : 'bfloat16';
  writeModelConfig(dir, { ...model.config, torchDtype });
}
