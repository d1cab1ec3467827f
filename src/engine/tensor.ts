/**
 * Tensors and the autodiff tape.
 *
 * A Tensor is a dense row-major buffer with a shape (strides are always the row-major ones; views
 * that would need other strides are materialised by an op). Every op that has an input with
 * `requiresGrad` pushes one closure on the tape; `backward(loss)` runs the tape in reverse. The
 * closure of an op sits next to its forward in the op's source file.
 *
 * Gradient buffers of intermediate tensors may be handed down to an input (`passGrad`) instead
 * of copied, so after backward only the gradients of leaves (parameters, inputs) are meaningful,
 * as in PyTorch without `retain_grad`.
 */
import type { FloatArray } from './backend.js';
import { isReusingBuffers, recycle } from './buffer-pool.js';
import { alloc, allocOverwritten, backend, getDType } from './runtime.js';

export type Shape = readonly number[];

export function numel(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function rowMajorStrides(shape: Shape): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

const EMPTY_F32 = new Float32Array(0);
const EMPTY_F64 = new Float64Array(0);

export class Tensor {
  /** Gradient of the loss w.r.t. this tensor; allocated on first use. */
  grad: FloatArray | null = null;

  constructor(
    readonly data: FloatArray,
    readonly shape: Shape,
    public requiresGrad = false,
    /** Parameter name (HF safetensors key) for parameters; unset for activations. */
    public name?: string,
  ) {
    if (data.length !== numel(shape)) {
      throw new Error(`tensor data has ${data.length} elements but shape [${shape.join(', ')}] needs ${numel(shape)}`);
    }
  }

  get size(): number {
    return this.data.length;
  }

  get strides(): number[] {
    return rowMajorStrides(this.shape);
  }

  /** The buffer zeroGrad took from `grad`, for the next gradient of this tensor to reuse. */
  private idleGrad: FloatArray | null = null;

  /** The gradient buffer, zero-filled if new (a spare one from this backward pass when possible). */
  ensureGrad(): FloatArray {
    if (this.grad === null) this.grad = this.takeIdleGrad(true) ?? takeSpare(this.data.length) ?? alloc(this.data.length);
    return this.grad;
  }

  /**
   * The gradient buffer for a kernel that writes all of it (a GEMM with beta 0): only valid while
   * there is no gradient yet, and then not zero-filled.
   */
  gradToOverwrite(): FloatArray {
    if (this.grad !== null) throw new Error('gradToOverwrite(): the tensor already has a gradient to add onto');
    this.grad = this.takeIdleGrad(false) ?? takeSpare(this.data.length, false) ?? allocOverwritten(this.data.length);
    return this.grad;
  }

  /**
   * Drops the gradient (`grad` becomes null), as torch's `zero_grad()` does by default
   * (set_to_none): the next backward then writes the gradient rather than adding it onto zeros
   * (matrix products with beta 0), so no step fills every gradient with zeros first. The buffer is
   * kept for that next gradient.
   */
  zeroGrad(): void {
    if (this.grad === null) return;
    this.idleGrad = this.grad;
    this.grad = null;
  }

  /** The buffer zeroGrad kept, taken away (passGrad hands this tensor another one instead). */
  dropIdleGrad(): FloatArray | null {
    const buf = this.idleGrad;
    this.idleGrad = null;
    return buf;
  }

  private takeIdleGrad(zero: boolean): FloatArray | null {
    const buf = this.dropIdleGrad();
    return buf !== null && buf.length === this.data.length ? reuse(buf, zero) : null;
  }

  /** The single value of a one-element tensor. */
  item(): number {
    this.checkLive();
    if (this.data.length !== 1) throw new Error(`item() needs a 1-element tensor, got shape [${this.shape.join(', ')}]`);
    return this.data[0];
  }

  toArray(): number[] {
    this.checkLive();
    return Array.from(this.data);
  }

  /**
   * Empties this tensor (its data becomes a 0-length array): a buffer pool took its buffer back
   * after backward, and the next taker will overwrite it. Called by `backward` only.
   */
  release(): void {
    // `data` is readonly to users; this is the one place that replaces it.
    (this as { data: FloatArray }).data = this.data instanceof Float32Array ? EMPTY_F32 : EMPTY_F64;
  }

  /** Throws if a buffer pool has recycled this tensor's buffer (its data reads as empty then). */
  private checkLive(): void {
    if (this.data.length === 0 && numel(this.shape) > 0) {
      throw new Error(
        `this tensor [${this.shape.join(', ')}] was an activation whose buffer the buffer pool recycled after backward(); read it before calling backward`,
      );
    }
  }
}

export function zeros(shape: Shape, requiresGrad = false): Tensor {
  return new Tensor(alloc(numel(shape)), shape, requiresGrad);
}

export function full(shape: Shape, value: number): Tensor {
  const t = zeros(shape);
  t.data.fill(value);
  return t;
}

/** A tensor over a copy of `values` in the active float type. */
export function tensor(values: ArrayLike<number>, shape: Shape = [values.length], requiresGrad = false): Tensor {
  const data = alloc(values.length);
  for (let i = 0; i < values.length; i++) data[i] = values[i];
  return new Tensor(data, shape, requiresGrad);
}

// ---- the tape -------------------------------------------------------------------------------

type Backward = () => void;

let tape: { out: Tensor; fn: Backward; saved?: FloatArray[] }[] = [];
let gradEnabled = true;

/** True when an op on these inputs must record its backward. */
export function needsGrad(...inputs: (Tensor | null | undefined)[]): boolean {
  if (!gradEnabled) return false;
  for (const t of inputs) if (t?.requiresGrad) return true;
  return false;
}

/**
 * Records the backward of an op whose output is `out`; marks `out` as requiring grad. `saved`:
 * buffers the backward reads besides inputs and output (statistics, probabilities), which die
 * with the pass (inside a buffer pool they are recycled with the activations).
 */
export function record(out: Tensor, fn: Backward, saved?: FloatArray[]): void {
  out.requiresGrad = true;
  tape.push({ out, fn, saved });
}

/** Runs `fn` without recording anything (sampling, evaluation, reference models). */
export function noGrad<T>(fn: () => T): T {
  const prev = gradEnabled;
  gradEnabled = false;
  try {
    return fn();
  } finally {
    gradEnabled = prev;
  }
}

export function isGradEnabled(): boolean {
  return gradEnabled;
}

/**
 * Backpropagates from `out` through everything recorded since the last backward, accumulating
 * into `.grad` of every tensor that requires it. A scalar `out` is seeded with 1 (or `grad`);
 * a non-scalar one needs its output gradient `grad` (like torch's `tensor.backward(gradient)`).
 * The tape is cleared afterwards, releasing the saved activations.
 *
 * Once an op's backward has run, its output's gradient is used up (every later use of the output
 * came earlier in the reverse pass): unless an input took the buffer over (passGrad), it becomes a
 * spare that the next ensureGrad of the same length reuses, so a pass allocates about one layer's
 * worth of gradients instead of all of them. Spares are dropped when the pass ends.
 *
 * While a buffer pool is active (buffer-pool.ts), the activations of the graph go back to it when
 * the pass ends: read what you need from them before calling backward.
 */
export function backward(out: Tensor, grad?: number | FloatArray): void {
  if (!out.requiresGrad) throw new Error('backward(): the output does not depend on any tensor that requires grad');
  const g = out.ensureGrad();
  if (typeof grad === 'object') {
    if (grad.length !== out.size) throw new Error(`backward(): gradient has ${grad.length} elements, output has ${out.size}`);
    for (let i = 0; i < g.length; i++) g[i] += grad[i];
  } else {
    if (out.size !== 1) throw new Error(`backward(): a non-scalar output [${out.shape.join(', ')}] needs an explicit gradient`);
    g[0] += grad ?? 1;
  }
  const entries = tape;
  tape = [];
  let finished = false;
  try {
    for (let i = entries.length - 1; i >= 0; i--) {
      const { out, fn } = entries[i];
      taken = [];
      fn();
      const used = out.grad;
      out.grad = null;
      if (used !== null && !taken.includes(used)) addSpare(used);
    }
    finished = true;
  } finally {
    // With a buffer pool active the pass's activations go back to it, but only after the whole
    // pass: a view (reshape) shares its input's buffer, which an earlier op's backward may still read.
    if (finished && isReusingBuffers()) {
      const dead: FloatArray[] = [];
      for (const list of spares.values()) dead.push(...list);
      for (const { out: t, saved } of entries) {
        if (t.data !== out.data) dead.push(t.data);
        if (saved) dead.push(...saved);
      }
      const back = recycle(dead);
      for (const { out: t } of entries) if (back.has(t.data.buffer)) t.release();
    }
    spares.clear();
  }
}

// ---- spare gradient buffers of the running backward pass -----------------------------------

const spares = new Map<number, FloatArray[]>();
/** Buffers passGrad handed to an input during the current op's backward. */
let taken: FloatArray[] = [];

function addSpare(buf: FloatArray): void {
  const list = spares.get(buf.length);
  if (list) list.push(buf);
  else spares.set(buf.length, [buf]);
}

/** A spare of length n and the active float type (zeroed unless `zero` is false), or null. */
function takeSpare(n: number, zero = true): FloatArray | null {
  const buf = spares.get(n)?.pop();
  return buf === undefined ? null : reuse(buf, zero);
}

/** `buf` for a new gradient if it is of the active float type (zeroed unless `zero` is false), else null. */
function reuse(buf: FloatArray, zero: boolean): FloatArray | null {
  if (!(buf instanceof (getDType() === 'float64' ? Float64Array : Float32Array))) return null;
  return zero ? buf.fill(0) : buf;
}

/** Drops everything recorded (e.g. after a forward whose loss is not needed). */
export function clearTape(): void {
  tape = [];
}

/** Length of the tape; tests use it to check that no-grad paths record nothing. */
export function tapeLength(): number {
  return tape.length;
}

// ---- broadcasting ---------------------------------------------------------------------------

export function broadcastShapes(a: Shape, b: Shape): number[] {
  const rank = Math.max(a.length, b.length);
  const out = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new Error(`shapes [${a.join(', ')}] and [${b.join(', ')}] do not broadcast`);
    }
    out[i] = Math.max(da, db);
  }
  return out;
}

/** Strides that read a tensor of `shape` as if it had the (broadcast) shape `to` (0 = repeat). */
export function broadcastStrides(shape: Shape, to: Shape): number[] {
  const s = rowMajorStrides(shape);
  const out = new Array<number>(to.length).fill(0);
  for (let i = 0; i < shape.length; i++) {
    const j = to.length - shape.length + i;
    out[j] = shape[i] === 1 && to[j] !== 1 ? 0 : s[i];
  }
  return out;
}

/**
 * Adds an op's output gradient `g` (shape `from`) into the gradient of input `t`, reducing over
 * broadcast axes. When `t` has no gradient yet and the shapes match, `g` itself becomes t's
 * gradient: the output's gradient is complete when its op's backward runs (every later use of
 * the output came later on the tape), so the buffer can be handed down instead of copied. A
 * buffer can be handed to one input only: pass `owned = false` once it has been taken (a copy
 * is made instead). Returns whether `g` was taken.
 */
export function passGrad(t: Tensor, g: FloatArray, from: Shape, owned = true): boolean {
  if (t.grad === null && g.length === t.size) {
    // A kept buffer (a parameter after zeroGrad) goes to this pass's spares rather than waiting
    // for a gradient that now comes in another buffer.
    const idle = t.dropIdleGrad();
    if (idle !== null) addSpare(idle);
    t.grad = owned ? g : copyOf(g);
    if (owned) taken.push(g);
    return owned;
  }
  accumulateReduced(g, from, t.ensureGrad(), t.shape);
  return false;
}

/** A copy of `g` in a recycled buffer (a spare of this pass, or the pool's): `slice()` would map fresh pages. */
export function copyOf(g: FloatArray): FloatArray {
  const c = takeSpare(g.length, false) ?? allocOverwritten(g.length);
  c.set(g);
  return c;
}

/**
 * The one place where broadcast gradients are reduced: adds `g` (of shape `from`) into `target`
 * (of shape `to`, broadcastable to `from`), summing over every broadcast axis.
 */
export function accumulateReduced(g: FloatArray, from: Shape, target: FloatArray, to: Shape): void {
  const be = backend();
  if (numel(from) === numel(to)) {
    be.axpy(g.length, 1, g, target);
    return;
  }
  // Sum axis by axis, from the last, over the axes where `to` (left-padded with 1s) is 1.
  const padded = [...new Array(from.length - to.length).fill(1), ...to];
  let cur = g;
  const curShape = [...from];
  for (let ax = from.length - 1; ax >= 0; ax--) {
    if (padded[ax] !== 1 || curShape[ax] === 1) continue;
    const outer = numel(curShape.slice(0, ax));
    const inner = numel(curShape.slice(ax + 1));
    const next = alloc(outer * inner);
    be.reduceSum(outer, curShape[ax], inner, cur, next, false);
    cur = next;
    curShape[ax] = 1;
  }
  be.axpy(cur.length, 1, cur, target);
}
