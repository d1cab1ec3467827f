/**
 * Hugging Face model folders ⇄ models: config.json + model.safetensors (or shards), with the
 * parameter-name table of each architecture and the few legacy key spellings real checkpoints use.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type ModelConfig, readModelConfig, writeModelConfig } from './config.js';
import { CheckpointError } from './errors.js';
import { Gpt2Model } from './gpt2.js';
import { LlamaModel } from './llama.js';
import { readShardedSafetensors, type Tensor as StoredTensor, type WritableTensor, writeSafetensors } from './safetensors.js';
import type { CausalLM } from './transformer.js';

/** A model of `config`'s architecture with uninitialised (zero) parameters. */
export function createModel(config: ModelConfig): CausalLM {
  return config.arch === 'llama' ? new LlamaModel(config) : new Gpt2Model(config);
}

/** Keys that checkpoints carry but that are not parameters (buffers, duplicated tied heads). */
function ignorable(key: string, config: ModelConfig): boolean {
  if (/\.attn\.(masked_)?bias$/.test(key)) return true; // GPT-2 causal-mask buffers
  if (key.endsWith('.rotary_emb.inv_freq')) return true; // old Llama buffers
  return config.tieWordEmbeddings && key === 'lm_head.weight'; // tied: the embedding is the head
}

/** Maps a stored key to our parameter name (GPT-2 checkpoints may lack the `transformer.` prefix). */
function canonicalName(key: string, config: ModelConfig): string {
  if (config.arch === 'gpt2' && !key.startsWith('transformer.') && !key.startsWith('lm_head.')) return `transformer.${key}`;
  return key;
}

/** Loads config.json + safetensors weights of a HF model folder. Errors name the offending file. */
export function loadModel(dir: string): CausalLM {
  const config = readModelConfig(dir);
  const model = createModel(config);
  const weightsFile = existsSync(join(dir, 'model.safetensors')) ? join(dir, 'model.safetensors') : join(dir, 'model.safetensors.index.json');
  const stored = readShardedSafetensors(dir);
  const byName = new Map<string, StoredTensor>();
  for (const [key, t] of stored) {
    if (ignorable(key, config)) continue;
    const name = canonicalName(key, config);
    if (!model.params.has(name)) {
      throw new CheckpointError(
        'BAD_CONFIG',
        weightsFile,
        `tensor "${key}" is not a parameter of a ${config.modelType} model with this config.json`,
        'check that config.json belongs to these weights',
      );
    }
    byName.set(name, t);
  }
  for (const [name, p] of model.params) {
    const t = byName.get(name);
    if (t === undefined)
      throw new CheckpointError(
        'MISSING_TENSOR',
        weightsFile,
        `parameter "${name}" is missing`,
        'the checkpoint is incomplete or belongs to another architecture',
      );
    if (t.shape.join() !== p.shape.join()) {
      throw new CheckpointError(
        'SHAPE_MISMATCH',
        weightsFile,
        `"${name}" has shape [${t.shape}] but config.json implies [${p.shape}]`,
        'check that config.json belongs to these weights',
      );
    }
    if (!(t.data instanceof Float32Array))
      throw new CheckpointError(
        'UNSUPPORTED_DTYPE',
        weightsFile,
        `"${name}" is stored as ${t.dtype}, not a float type`,
        're-export the weights as F32/F16/BF16',
      );
    p.data.set(t.data);
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
