/**
 * Resumable pretraining checkpoints: `<run>/checkpoints/step-<n>/` holds the model (F32
 * safetensors + config.json), the AdamW moments (optimizer.safetensors, `<param>.m` / `<param>.v`)
 * and state.json (step, optimizer step, data RNG, tokens seen, elapsed time). The folder is written
 * under a temporary name and renamed, then `checkpoints/latest` is replaced atomically, so a crash
 * mid-write leaves the previous checkpoint complete and `latest` pointing at it.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { FloatArray } from '../engine/backend.js';
import type { AdamW } from '../engine/optim.js';
import type { RngState } from '../engine/rng.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import { saveModel } from '../model/load.js';
import { readSafetensors, readSafetensorsHeader, type WritableTensor, writeSafetensors } from '../model/safetensors.js';
import type { CausalLM } from '../model/transformer.js';

export const PRETRAIN_CHECKPOINT_VERSION = 1;

export interface PretrainState {
  version: number;
  /** Optimizer steps completed. */
  step: number;
  /** Training tokens consumed (targets scored) so far. */
  tokens: number;
  /** Wall-clock seconds of training so far, over all sessions. */
  elapsed_s: number;
  /** State of the window-sampling RNG after `step` steps. */
  data_rng: RngState;
  /** Last validation loss, if one was computed. */
  val_loss: number | null;
}

/** A checkpoint problem tied to its folder. */
export class PretrainCheckpointError extends Error {
  readonly code = 'BAD_CHECKPOINT';
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
    this.name = 'PretrainCheckpointError';
  }
}

export function checkpointName(step: number): string {
  return `step-${String(step).padStart(6, '0')}`;
}

/** Writes a checkpoint atomically, points `latest` at it and keeps only the newest `keep`. */
export function saveCheckpoint(runDir: string, model: CausalLM, optimizer: AdamW, state: PretrainState, keep: number): string {
  const root = join(runDir, 'checkpoints');
  mkdirSync(root, { recursive: true });
  const name = checkpointName(state.step);
  const tmp = join(root, `${name}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  saveModel(model, tmp, 'F32');
  const opt = optimizer.state();
  const moments = new Map<string, WritableTensor>();
  for (const [param, { m, v }] of Object.entries(opt.buffers)) {
    moments.set(`${param}.m`, { dtype: 'F32', shape: [m.length], data: Float32Array.from(m) });
    moments.set(`${param}.v`, { dtype: 'F32', shape: [v.length], data: Float32Array.from(v) });
  }
  writeSafetensors(join(tmp, 'optimizer.safetensors'), moments, { step: String(opt.step) });
  writeFileAtomic(join(tmp, 'state.json'), [`${JSON.stringify(state, null, 2)}\n`]);
  const final = join(root, name);
  rmSync(final, { recursive: true, force: true });
  renameSync(tmp, final);
  writeFileAtomic(join(root, 'latest'), [`${name}\n`]);
  const all = readdirSync(root)
    .filter((d) => /^step-\d+$/.test(d))
    .sort();
  for (const old of all.slice(0, Math.max(0, all.length - keep))) if (old !== name) rmSync(join(root, old), { recursive: true, force: true });
  return final;
}

/** The folder `checkpoints/latest` names, or null when the run has no checkpoint yet. */
export function latestCheckpoint(runDir: string): string | null {
  const latest = join(runDir, 'checkpoints', 'latest');
  if (!existsSync(latest)) return null;
  const dir = join(runDir, 'checkpoints', readFileSync(latest, 'utf8').trim());
  if (!existsSync(join(dir, 'state.json'))) throw new PretrainCheckpointError(dir, 'checkpoints/latest points at a folder without state.json');
  return dir;
}

/** Restores weights (and optimizer moments, when given) in place and returns the trainer state. */
export function loadCheckpoint(dir: string, model: CausalLM, optimizer: AdamW | null): PretrainState {
  const stateFile = join(dir, 'state.json');
  const state = JSON.parse(readFileSync(stateFile, 'utf8')) as PretrainState;
  if (state.version !== PRETRAIN_CHECKPOINT_VERSION) {
    throw new PretrainCheckpointError(stateFile, `checkpoint version ${state.version}, this magrpo reads version ${PRETRAIN_CHECKPOINT_VERSION}`);
  }
  const weights = readSafetensors(join(dir, 'model.safetensors'));
  for (const [name, p] of model.params) {
    const t = weights.get(name);
    if (t === undefined || t.data.length !== p.size) throw new PretrainCheckpointError(dir, `parameter "${name}" is missing or has the wrong size`);
    p.data.set(t.data);
  }
  if (optimizer === null) return state;
  const optFile = join(dir, 'optimizer.safetensors');
  const stored = readSafetensors(optFile);
  const buffers: Record<string, Record<string, FloatArray>> = {};
  for (const p of optimizer.params) {
    const m = stored.get(`${p.name}.m`);
    const v = stored.get(`${p.name}.v`);
    if (m === undefined || v === undefined) throw new PretrainCheckpointError(optFile, `no moments for "${p.name}"`);
    buffers[p.name as string] = { m: m.data as Float32Array, v: v.data as Float32Array };
  }
  optimizer.loadState({ kind: 'adamw', step: optimizerStep(optFile), buffers });
  return state;
}

function optimizerStep(file: string): number {
  const step = Number(readSafetensorsHeader(file).metadata.step);
  if (!Number.isInteger(step)) throw new PretrainCheckpointError(file, 'metadata has no optimizer step');
  return step;
}
