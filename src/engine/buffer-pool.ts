/**
 * Reuse of activation buffers between training steps.
 *
 * A training step allocates every activation and gradient afresh: about 100 MB per step for the
 * 1m bench model, 400 MB for 10m. Fresh ArrayBuffers cost three times: the kernel zeroes and
 * maps their pages on first touch (3× the cost of refilling a warm buffer), V8 counts them as
 * external memory and runs full mark-compacts to reclaim them (about two per step), and those
 * collections' helper threads take a core from the matrix products.
 *
 * While a pool is active (`pool.use(fn)`, `reusingBuffers(fn)`), `alloc` hands out its buffers and
 * `backward` gives back what the pass has used up: the data of every tensor recorded on the tape
 * since the last backward (except the root, the loss), the statistics ops saved for their backward,
 * and the spare gradients. Buffers are pooled by size class (1/8 steps between powers of two), so
 * sequence lengths that vary from batch to batch still find a buffer.
 *
 * The contract: once `backward` returns, the activations of that graph are gone, as if PyTorch
 * freed its saved tensors. Read what you need (log-probs for metrics, ...) before backward. Every
 * tensor of the graph whose buffer went back is emptied (Tensor.release): a late read through it
 * sees an empty array, `item()` and `toArray()` say why, and native kernels refuse it, rather
 * than reading numbers of another tensor. A typed array taken from `tensor.data` before backward
 * is not emptied: it shares memory with whatever the pool hands out next. (Detaching the buffer,
 * by transferring it into the pool, would catch that too, but V8 counts every transfer as new
 * external memory and answered with two scavenges per 1m bench step, 4% of its time.) Buffers
 * that did not come from the pool (parameters, optimizer state, tensors made outside the scope)
 * are never touched. The pool is emptied when the owner clears it (BufferPool.clear), or when
 * `reusingBuffers` returns.
 */

import type { FloatArray } from './backend.js';

/** Passes a free buffer may wait for a taker before the pool drops it. */
const MAX_IDLE_PASSES = 2;

/** Buffers handed out by any pool and not given back yet, by their ArrayBuffer (what gets recycled). */
const handedOut = new WeakSet<ArrayBuffer>();
/** The pool `alloc` and `backward` use right now (null: plain allocation). */
let active: BufferPool | null = null;
/** Buffers taken while the innermost `scratch` scope runs (null: none is open). */
let scopeTaken: ArrayBuffer[] | null = null;

/** Free buffers of one owner (a learner, a pretraining run), kept between the graphs it builds. */
export class BufferPool {
  /** Free ArrayBuffers by byte length (a size class), each with the backward pass that gave it back. */
  private readonly free = new Map<number, { buffer: ArrayBuffer; pass: number }[]>();
  private freeBytes = 0;
  private pass = 0;
  /** Buffers handed out, and how many of them were fresh allocations (the rest were reused). */
  readonly counts = { taken: 0, fresh: 0 };

  /** Bytes held for reuse right now. */
  get bytes(): number {
    return this.freeBytes;
  }

  /** Runs `fn` with this pool active (see the module comment for the contract), then restores the previous one. */
  use<T>(fn: () => T): T {
    const prev = active;
    active = this;
    try {
      return fn();
    } finally {
      active = prev;
    }
  }

  /** Lets go of every free buffer (the memory returns once V8 collects them). */
  clear(): void {
    this.free.clear();
    this.freeBytes = 0;
  }

  /** n elements of the size class's buffer; zero-filled unless `zero` is false (then: whatever it held). */
  take(n: number, zero = true): Float32Array {
    const bytes = sizeClass(n) * 4;
    this.counts.taken++;
    const ab = this.free.get(bytes)?.pop()?.buffer;
    if (ab !== undefined) {
      this.freeBytes -= bytes;
      handedOut.add(ab);
      scopeTaken?.push(ab);
      const buf = new Float32Array(ab, 0, n);
      return zero ? buf.fill(0) : buf;
    }
    this.counts.fresh++;
    const fresh = new ArrayBuffer(bytes);
    handedOut.add(fresh);
    scopeTaken?.push(fresh);
    return new Float32Array(fresh, 0, n);
  }

  /** Takes back buffers it handed out (others are ignored), as free buffers of the current pass. */
  giveBack(buffers: Iterable<ArrayBufferLike>): void {
    for (const ab of buffers) {
      if (!(ab instanceof ArrayBuffer) || !handedOut.has(ab)) continue;
      handedOut.delete(ab);
      const list = this.free.get(ab.byteLength);
      const entry = { buffer: ab, pass: this.pass };
      if (list) list.push(entry);
      else this.free.set(ab.byteLength, [entry]);
      this.freeBytes += ab.byteLength;
    }
  }

  /** Ends a pass: drops the free buffers no pass has asked for in the last MAX_IDLE_PASSES. */
  endPass(): void {
    this.pass++;
    this.dropIdle();
  }

  private dropIdle(): void {
    for (const [bytes, list] of this.free) {
      const kept = list.filter((e) => this.pass - e.pass <= MAX_IDLE_PASSES);
      this.freeBytes -= (list.length - kept.length) * bytes;
      if (kept.length === 0) this.free.delete(bytes);
      else if (kept.length < list.length) this.free.set(bytes, kept);
    }
  }

  /**
   * Takes back the buffers of a finished backward pass, then drops those no pass has asked for in
   * the last MAX_IDLE_PASSES (sizes of sequence lengths that no longer occur), so the pool stays
   * about one pass's activations.
   */
  recycle(bufs: Iterable<Float32Array | Float64Array>): Set<ArrayBufferLike> {
    this.pass++;
    const back = new Set<ArrayBufferLike>();
    for (const buf of bufs) {
      // not a pool's, or given back already (a view shared by two tensors)
      if (buf instanceof Float32Array && handedOut.has(buf.buffer as ArrayBuffer)) back.add(buf.buffer);
    }
    this.giveBack(back);
    this.dropIdle();
    return back;
  }
}

/** The pool of inference's temporaries where no other pool is active (see `scratch`). */
const scratchPool = new BufferPool();

/**
 * Runs `fn`, a step of inference (a transformer layer, a decode step, scoring under `noGrad`), with
 * its buffers from the active pool (or a pool of inference temporaries), then gives back every
 * buffer `fn` took except those `keep` names in its result, and the buffers of `consumed` (inputs
 * nothing reads again).
 *
 * The contract: nothing `fn` makes outlives it but what `keep` names. A layer's activations are
 * garbage once the next layer has its input; without gradients no tape holds them, so the next
 * layer can take the same buffers rather than fresh ones, which V8 would count as external memory
 * and answer with full mark-compacts (one every ~0.4 s of a 135M model's sampling, their marking
 * threads taking a core from the products).
 */
export function scratch<T>(fn: () => T, keep: (result: T) => readonly (FloatArray | undefined)[], consumed: readonly FloatArray[] = []): T {
  const pool = active ?? scratchPool;
  const [outerTaken, outerActive] = [scopeTaken, active];
  const taken: ArrayBuffer[] = [];
  scopeTaken = taken;
  active = pool;
  let result: T;
  try {
    result = fn();
  } finally {
    scopeTaken = outerTaken;
    active = outerActive;
  }
  const kept = new Set<ArrayBufferLike>(keep(result).flatMap((d) => (d ? [d.buffer] : [])));
  pool.giveBack([...taken, ...consumed.map((d) => d.buffer)].filter((ab) => !kept.has(ab)));
  for (const ab of kept) if (ab instanceof ArrayBuffer && handedOut.has(ab)) outerTaken?.push(ab); // the enclosing scope's now
  if (pool === scratchPool && outerTaken === null) pool.endPass();
  return result;
}

/** Runs `fn` with a fresh pool that is dropped afterwards (a pool for one stretch of training steps). */
export function reusingBuffers<T>(fn: () => T): T {
  const pool = new BufferPool();
  try {
    return pool.use(fn);
  } finally {
    pool.clear();
  }
}

/** True while a pool is active. */
export function isReusingBuffers(): boolean {
  return active !== null;
}

/** Elements of the size class that holds n: n rounded up to the next 1/8 step between powers of two. */
export function sizeClass(n: number): number {
  if (n <= 64) return 64;
  const step = 2 ** (Math.floor(Math.log2(n)) - 3);
  return Math.ceil(n / step) * step;
}

/**
 * A Float32Array of n elements from the active pool, or null when none is active; zero-filled
 * unless `zero` is false (for outputs a kernel overwrites entirely).
 */
export function takeFloat32(n: number, zero = true): Float32Array | null {
  return active === null ? null : active.take(n, zero);
}

/**
 * Gives the buffers of a finished backward pass to the active pool; those no pool handed out
 * (parameters, optimizer state, tensors made outside a pool) are left alone. Returns the buffers
 * taken back, whose tensors the caller must release (Tensor.release). Without an active pool
 * nothing is taken back.
 */
export function recycle(bufs: Iterable<Float32Array | Float64Array>): ReadonlySet<ArrayBufferLike> {
  return active?.recycle(bufs) ?? new Set();
}
