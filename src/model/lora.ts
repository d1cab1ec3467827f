/**
 * LoRA adapters (Hu et al., 2021): for a projection y = x Wᵀ, train y += (α/r) · x Aᵀ Bᵀ with
 * A: [r, in], B: [out, r] while W stays frozen. Files follow PEFT's layout
 * (adapter_config.json + adapter_model.safetensors with `base_model.model.<name>.lora_A.weight`),
 * so adapters move between magrpo and Python tooling.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { matmul } from '../engine/ops.js';
import type { Rng } from '../engine/rng.js';
import { alloc, allocPersistent } from '../engine/runtime.js';
import { noGrad, Tensor } from '../engine/tensor.js';
import { architectureOf } from './architectures/index.js';
import { writeFileAtomic } from './atomic-write.js';
import { CheckpointError } from './errors.js';
import { readSafetensors, type WritableTensor, writeSafetensors } from './safetensors.js';
import type { CausalLM } from './transformer.js';

export interface LoraConfig {
  /** Rank r of the update. */
  r: number;
  /** Scale numerator: the update is multiplied by alpha / r. */
  alpha: number;
  /** Projection names (last path component, e.g. "q_proj", "c_attn") that get adapters. */
  targetModules: string[];
}

/** Every adaptable projection of a model: name, storage layout and [out, in] sizes. */
export function projections(model: CausalLM): { name: string; conv1d: boolean; outDim: number; inDim: number }[] {
  const { conv1d, targets } = architectureOf(model.config).lora;
  const out = [];
  for (const [key, p] of model.params) {
    if (!key.endsWith('.weight') || p.shape.length !== 2) continue;
    if (!targets.includes(key.slice(0, -'.weight'.length).split('.').pop() as string)) continue;
    const [a, b] = p.shape;
    out.push({ name: key.slice(0, -'.weight'.length), conv1d, outDim: conv1d ? b : a, inDim: conv1d ? a : b });
  }
  return out;
}

/**
 * Freezes every base parameter and attaches fresh adapters to the target projections.
 * Init as PEFT: A ~ U(−1/√in, 1/√in) (kaiming-uniform with a = √5), B = 0, so the model is
 * unchanged until the first update.
 */
export function applyLora(model: CausalLM, cfg: LoraConfig, rng: Rng): void {
  if (!(Number.isInteger(cfg.r) && cfg.r > 0)) throw new Error(`lora.r must be a positive integer, got ${cfg.r}`);
  if (!(cfg.alpha > 0)) throw new Error(`lora.alpha must be > 0, got ${cfg.alpha}`);
  const targets = projections(model).filter((p) => cfg.targetModules.includes(p.name.split('.').pop() as string));
  if (targets.length === 0) {
    const names = [...new Set(projections(model).map((p) => p.name.split('.').pop()))].join(', ');
    throw new Error(`lora.target_modules ${JSON.stringify(cfg.targetModules)} match no projection; this model has: ${names}`);
  }
  for (const p of model.params.values()) p.requiresGrad = false;
  for (const t of targets) {
    const A = new Tensor(allocPersistent(cfg.r * t.inDim), [cfg.r, t.inDim], true, `${t.name}.lora_A.weight`);
    const bound = 1 / Math.sqrt(t.inDim);
    for (let i = 0; i < A.size; i++) A.data[i] = (rng.next() * 2 - 1) * bound;
    const B = new Tensor(allocPersistent(t.outDim * cfg.r), [t.outDim, cfg.r], true, `${t.name}.lora_B.weight`);
    model.lora.set(t.name, { A, B, scale: cfg.alpha / cfg.r });
  }
  loraConfigs.set(model, cfg);
}

const loraConfigs = new WeakMap<CausalLM, LoraConfig>();

/** Folds every adapter into its base weight (W += (α/r)·B·A) and removes the adapters. */
export function mergeLora(model: CausalLM): void {
  if (model.sharesWeights)
    throw new Error('mergeLora: this model shares its base weights with another (an agent or its reference); merge into a model of its own');
  noGrad(() => {
    for (const [name, ad] of model.lora) {
      const W = model.param(`${name}.weight`);
      const delta = matmul(ad.B, ad.A); // [out, in]
      const { conv1d } = architectureOf(model.config).lora;
      const [out, inn] = delta.shape;
      for (let o = 0; o < out; o++) {
        for (let i = 0; i < inn; i++) {
          const d = ad.scale * delta.data[o * inn + i];
          if (conv1d) W.data[i * out + o] += d;
          else W.data[o * inn + i] += d;
        }
      }
    }
  });
  model.lora.clear();
  loraConfigs.delete(model);
}

const PREFIX = 'base_model.model.';

/** Writes adapter_config.json and adapter_model.safetensors (PEFT format) to `dir`. */
export function saveLora(model: CausalLM, dir: string, baseModel = ''): void {
  const cfg = loraConfigs.get(model);
  if (!cfg || model.lora.size === 0) throw new Error('saveLora: the model has no LoRA adapters');
  mkdirSync(dir, { recursive: true });
  const tensors = new Map<string, WritableTensor>();
  for (const [name, ad] of model.lora) {
    tensors.set(`${PREFIX}${name}.lora_A.weight`, { dtype: 'F32', shape: [...ad.A.shape], data: Float32Array.from(ad.A.data) });
    tensors.set(`${PREFIX}${name}.lora_B.weight`, { dtype: 'F32', shape: [...ad.B.shape], data: Float32Array.from(ad.B.data) });
  }
  writeSafetensors(join(dir, 'adapter_model.safetensors'), tensors, { format: 'pt' });
  const peft = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel,
    r: cfg.r,
    lora_alpha: cfg.alpha,
    lora_dropout: 0,
    bias: 'none',
    fan_in_fan_out: architectureOf(model.config).lora.conv1d,
    target_modules: cfg.targetModules,
  };
  writeFileAtomic(join(dir, 'adapter_config.json'), [`${JSON.stringify(peft, null, 2)}\n`]);
}

/** Attaches the adapters saved in `dir` (trainable, base frozen). */
export function loadLora(model: CausalLM, dir: string): LoraConfig {
  const cfgFile = join(dir, 'adapter_config.json');
  const weightsFile = join(dir, 'adapter_model.safetensors');
  if (!existsSync(cfgFile)) throw new CheckpointError('FILE_MISSING', cfgFile, 'no adapter_config.json', 'point to a folder written by saveLora or PEFT');
  const raw = JSON.parse(readFileSync(cfgFile, 'utf8')) as { r?: number; lora_alpha?: number; target_modules?: string[]; peft_type?: string };
  if (raw.peft_type !== 'LORA' || typeof raw.r !== 'number' || typeof raw.lora_alpha !== 'number' || !Array.isArray(raw.target_modules)) {
    throw new CheckpointError(
      'BAD_CONFIG',
      cfgFile,
      'not a LoRA adapter config (needs peft_type LORA, r, lora_alpha, target_modules)',
      'point to a folder written by saveLora or PEFT',
    );
  }
  const cfg: LoraConfig = { r: raw.r, alpha: raw.lora_alpha, targetModules: raw.target_modules };
  const stored = readSafetensors(weightsFile);
  model.lora.clear();
  for (const p of model.params.values()) p.requiresGrad = false;
  const scaleOf = cfg.alpha / cfg.r;
  for (const [key, t] of stored) {
    const m = /^(?:base_model\.model\.)?(.+)\.lora_([AB])(?:\.default)?\.weight$/.exec(key);
    if (!m || !(t.data instanceof Float32Array))
      throw new CheckpointError('CORRUPT', weightsFile, `unexpected tensor "${key}"`, 'point to a LoRA adapter file');
    const [, name, which] = m;
    if (!model.params.has(`${name}.weight`))
      throw new CheckpointError(
        'SHAPE_MISMATCH',
        weightsFile,
        `adapter for "${name}", which this model does not have`,
        'load the adapter onto the base model it was trained for',
      );
    const ad = model.lora.get(name) ?? { A: new Tensor(alloc(0), [0]), B: new Tensor(alloc(0), [0]), scale: scaleOf };
    const tensor = new Tensor(Float32Array.from(t.data), t.shape, true, `${name}.lora_${which}.weight`);
    model.lora.set(name, which === 'A' ? { ...ad, A: tensor } : { ...ad, B: tensor });
  }
  for (const [name, ad] of model.lora) {
    const proj = projections(model).find((p) => p.name === name);
    if (!proj || ad.A.shape.join() !== `${cfg.r},${proj.inDim}` || ad.B.shape.join() !== `${proj.outDim},${cfg.r}`) {
      throw new CheckpointError(
        'SHAPE_MISMATCH',
        weightsFile,
        `adapter "${name}" has A [${ad.A.shape}] and B [${ad.B.shape}]`,
        'load the adapter onto the base model it was trained for',
      );
    }
  }
  loraConfigs.set(model, cfg);
  return cfg;
}
