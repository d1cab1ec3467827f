/**
 * Optimisers (AdamW, SGD), global gradient-norm clipping and learning-rate schedules.
 * Optimiser state is keyed by parameter name so it can be saved with a checkpoint and restored.
 */
import type { FloatArray } from './backend.js';
import { allocPersistent, backend } from './runtime.js';
import type { Tensor } from './tensor.js';

export interface OptimizerState {
  kind: 'adamw' | 'sgd';
  step: number;
  /** Per-parameter buffers (moments) by parameter name. */
  buffers: Record<string, Record<string, FloatArray>>;
}

export interface Optimizer {
  /** Learning rate of the next step (schedules set it). */
  lr: number;
  readonly params: readonly Tensor[];
  /** Applies one update from the parameters' `.grad` (parameters without a gradient are skipped). */
  step(): void;
  /**
   * Drops every parameter's gradient (torch's `zero_grad()` with its default set_to_none): the next
   * backward writes fresh gradients, and a parameter no backward reached before the next step is
   * skipped by it, as in torch.
   */
  zeroGrad(): void;
  state(): OptimizerState;
  loadState(s: OptimizerState): void;
}

export interface AdamWOptions {
  lr: number;
  betas?: [number, number];
  eps?: number;
  /** Decoupled weight decay (PyTorch default 0.01). */
  weightDecay?: number;
  /** Parameters that receive weight decay (default: all, as torch.optim.AdamW does). */
  decay?: (p: Tensor) => boolean;
}

function requireNames(params: readonly Tensor[]): void {
  const seen = new Set<string>();
  for (const p of params) {
    if (!p.name) throw new Error('optimizer: every parameter needs a name (its state is saved by name)');
    if (seen.has(p.name)) throw new Error(`optimizer: parameter "${p.name}" is listed twice`);
    seen.add(p.name);
  }
}

/** AdamW with bias correction and decoupled weight decay (Loshchilov & Hutter), torch semantics. */
export class AdamW implements Optimizer {
  lr: number;
  private t = 0;
  private readonly m = new Map<Tensor, FloatArray>();
  private readonly v = new Map<Tensor, FloatArray>();
  private readonly b1: number;
  private readonly b2: number;
  private readonly eps: number;
  private readonly wd: number;
  private readonly decay: (p: Tensor) => boolean;

  constructor(
    readonly params: readonly Tensor[],
    opts: AdamWOptions,
  ) {
    requireNames(params);
    this.lr = opts.lr;
    [this.b1, this.b2] = opts.betas ?? [0.9, 0.999];
    this.eps = opts.eps ?? 1e-8;
    this.wd = opts.weightDecay ?? 0.01;
    this.decay = opts.decay ?? (() => true);
  }

  step(): void {
    this.t += 1;
    const bc1 = 1 - this.b1 ** this.t;
    const bc2 = 1 - this.b2 ** this.t;
    const be = backend();
    for (const p of this.params) {
      if (p.grad === null) continue;
      let m = this.m.get(p);
      let v = this.v.get(p);
      if (!m || !v) {
        m = allocPersistent(p.size);
        v = allocPersistent(p.size);
        this.m.set(p, m);
        this.v.set(p, v);
      }
      be.adamw(p.size, p.data, p.grad, m, v, this.lr, this.b1, this.b2, this.eps, this.decay(p) ? this.wd : 0, bc1, bc2);
    }
  }

  zeroGrad(): void {
    for (const p of this.params) p.zeroGrad();
  }

  state(): OptimizerState {
    const buffers: OptimizerState['buffers'] = {};
    for (const p of this.params) {
      const m = this.m.get(p);
      const v = this.v.get(p);
      if (m && v) buffers[p.name as string] = { m, v };
    }
    return { kind: 'adamw', step: this.t, buffers };
  }

  loadState(s: OptimizerState): void {
    if (s.kind !== 'adamw') throw new Error(`cannot load ${s.kind} optimizer state into AdamW`);
    this.t = s.step;
    for (const p of this.params) {
      const b = s.buffers[p.name as string];
      if (!b) continue;
      if (b.m.length !== p.size) throw new Error(`optimizer state for "${p.name}" has ${b.m.length} entries, parameter has ${p.size}`);
      this.m.set(p, Float32Array.from(b.m));
      this.v.set(p, Float32Array.from(b.v));
    }
  }
}

export interface SGDOptions {
  lr: number;
  momentum?: number;
  weightDecay?: number;
}

/** SGD with optional momentum (torch semantics: buf = μ·buf + g; p −= lr·buf) and L2 decay. */
export class SGD implements Optimizer {
  lr: number;
  private t = 0;
  private readonly buf = new Map<Tensor, FloatArray>();
  private readonly momentum: number;
  private readonly wd: number;

  constructor(
    readonly params: readonly Tensor[],
    opts: SGDOptions,
  ) {
    requireNames(params);
    this.lr = opts.lr;
    this.momentum = opts.momentum ?? 0;
    this.wd = opts.weightDecay ?? 0;
  }

  step(): void {
    this.t += 1;
    const be = backend();
    for (const p of this.params) {
      if (p.grad === null) continue;
      let g = p.grad;
      if (this.wd !== 0) {
        g = Float32Array.from(g);
        be.axpy(p.size, this.wd, p.data, g);
      }
      if (this.momentum !== 0) {
        let b = this.buf.get(p);
        if (!b) {
          b = Float32Array.from(g);
          this.buf.set(p, b);
        } else {
          be.scale(p.size, this.momentum, b);
          be.axpy(p.size, 1, g, b);
        }
        g = b;
      }
      be.axpy(p.size, -this.lr, g, p.data);
    }
  }

  zeroGrad(): void {
    for (const p of this.params) p.zeroGrad();
  }

  state(): OptimizerState {
    const buffers: OptimizerState['buffers'] = {};
    for (const p of this.params) {
      const b = this.buf.get(p);
      if (b) buffers[p.name as string] = { momentum: b };
    }
    return { kind: 'sgd', step: this.t, buffers };
  }

  loadState(s: OptimizerState): void {
    if (s.kind !== 'sgd') throw new Error(`cannot load ${s.kind} optimizer state into SGD`);
    this.t = s.step;
    for (const p of this.params) {
      const b = s.buffers[p.name as string];
      if (b) this.buf.set(p, Float32Array.from(b.momentum));
    }
  }
}

/** Global L2 norm of all gradients. */
export function gradNorm(params: readonly Tensor[]): number {
  const be = backend();
  let ss = 0;
  for (const p of params) if (p.grad) ss += be.sumSquares(p.size, p.grad);
  return Math.sqrt(ss);
}

/**
 * Scales all gradients so their global L2 norm is at most `maxNorm` (torch.nn.utils.clip_grad_norm_).
 * Returns the norm before clipping. A non-finite norm is an error: the update would corrupt weights.
 */
export function clipGradNorm(params: readonly Tensor[], maxNorm: number): number {
  const norm = gradNorm(params);
  if (!Number.isFinite(norm)) throw new Error(`gradient norm is ${norm}: refusing to update the weights`);
  const coef = maxNorm / (norm + 1e-6);
  if (coef < 1) {
    const be = backend();
    for (const p of params) if (p.grad) be.scale(p.size, coef, p.grad);
  }
  return norm;
}

export type ScheduleKind = 'constant' | 'linear' | 'cosine';

export interface ScheduleOptions {
  kind: ScheduleKind;
  /** Steps of linear warmup from 0 to the base rate. */
  warmupSteps?: number;
  /** Total steps (needed by `linear` decay and `cosine`). */
  totalSteps?: number;
  /** Final rate as a fraction of the base rate (cosine / linear), default 0. */
  minRatio?: number;
}

/** Multiplier of the base learning rate at `step` (0-based): warmup, then constant / linear / cosine. */
export function lrMultiplier(step: number, o: ScheduleOptions): number {
  const warm = o.warmupSteps ?? 0;
  if (step < warm) return (step + 1) / warm;
  if (o.kind === 'constant') return 1;
  const total = o.totalSteps;
  if (total === undefined || total <= warm) throw new Error(`${o.kind} schedule needs totalSteps > warmupSteps`);
  const progress = Math.min(1, (step - warm) / (total - warm));
  const min = o.minRatio ?? 0;
  const shape = o.kind === 'linear' ? 1 - progress : 0.5 * (1 + Math.cos(Math.PI * progress));
  return min + (1 - min) * shape;
}
