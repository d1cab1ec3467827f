/**
 * Neural-network ops a decoder-only transformer needs, each a fused kernel with its backward:
 * embedding, RMSNorm, LayerNorm, RoPE, SwiGLU, softmax, token log-probs and cross-entropy.
 *
 * Legend: N = rows (B·T), C = channels, V = vocabulary, H = heads, D = head size.
 */
import type { FloatArray } from './backend.js';
import { mean, scale } from './ops.js';
import { alloc, allocOverwritten, allocPersistent, backend } from './runtime.js';
import { needsGrad, record, Tensor } from './tensor.js';

/** out[..., :] = W[ids[...], :]. W: [V, C], ids: any shape → [...ids shape, C]. */
export function embedding(W: Tensor, ids: Int32Array, idsShape: readonly number[]): Tensor {
  const [V, C] = W.shape;
  for (const id of ids) if (id < 0 || id >= V) throw new Error(`embedding: token id ${id} is outside the vocabulary [0, ${V})`);
  const out = new Tensor(allocOverwritten(ids.length * C), [...idsShape, C]);
  const be = backend();
  be.embedding(ids.length, C, ids, W.data, out.data);
  if (needsGrad(W)) {
    record(out, () => {
      if (out.grad !== null) be.embeddingBackward(ids.length, C, ids, out.grad, W.ensureGrad());
    });
  }
  return out;
}

/** RMSNorm over the last axis: x · rsqrt(mean(x²) + eps) · w. */
export function rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
  const C = x.shape[x.shape.length - 1];
  const N = x.size / C;
  const out = new Tensor(allocOverwritten(x.size), x.shape);
  const rstd = allocOverwritten(N); // [N] saved for backward
  const be = backend();
  be.rmsnorm(N, C, x.data, w.data, eps, out.data, rstd);
  if (needsGrad(x, w)) {
    record(out, () => {
      if (out.grad === null) return;
      be.rmsnormBackward(N, C, x.data, w.data, rstd, out.grad, gradOrScratch(x), gradOrScratch(w));
    }, [rstd]);
  }
  return out;
}

/** LayerNorm over the last axis: (x − mean) · rstd · w + b. */
export function layernorm(x: Tensor, w: Tensor, b: Tensor, eps: number): Tensor {
  const C = x.shape[x.shape.length - 1];
  const N = x.size / C;
  const out = new Tensor(allocOverwritten(x.size), x.shape);
  const mu = allocOverwritten(N); // [N]
  const rstd = allocOverwritten(N); // [N]
  const be = backend();
  be.layernorm(N, C, x.data, w.data, b.data, eps, out.data, mu, rstd);
  if (needsGrad(x, w, b)) {
    record(out, () => {
      if (out.grad === null) return;
      be.layernormBackward(N, C, x.data, w.data, mu, rstd, out.grad, gradOrScratch(x), gradOrScratch(w), gradOrScratch(b));
    }, [mu, rstd]);
  }
  return out;
}

/** Kernels that always write every input gradient get a throwaway buffer for frozen inputs. */
function gradOrScratch(t: Tensor): FloatArray {
  return t.requiresGrad ? t.ensureGrad() : alloc(t.size);
}

/** cos/sin tables [maxPos, D/2] for RoPE with inv_freq = theta^(−2i/D), as HF computes them. */
export interface RopeTables {
  readonly cos: FloatArray;
  readonly sin: FloatArray;
  readonly maxPos: number;
  readonly dim: number;
}

export function ropeTables(dim: number, maxPos: number, theta: number): RopeTables {
  const half = dim / 2;
  const cos = allocPersistent(maxPos * half);
  const sin = allocPersistent(maxPos * half);
  for (let i = 0; i < half; i++) {
    // HF computes inv_freq in float32 and the angle as a float32 product; match it.
    const invFreq = Math.fround(1 / theta ** ((2 * i) / dim));
    for (let p = 0; p < maxPos; p++) {
      const angle = Math.fround(p * invFreq);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin, maxPos, dim };
}

/** Rotary embedding of x [B, T, H, D] at positions [B·T]. */
export function rope(x: Tensor, positions: Int32Array, tables: RopeTables): Tensor {
  const [B, T, H, D] = x.shape;
  if (D !== tables.dim) throw new Error(`rope: head size ${D} but tables built for ${tables.dim}`);
  for (const p of positions) if (p < 0 || p >= tables.maxPos) throw new Error(`rope: position ${p} is outside [0, ${tables.maxPos})`);
  const out = new Tensor(allocOverwritten(x.size), x.shape);
  const be = backend();
  be.rope(B * T, H, D, x.data, positions, tables.cos, tables.sin, out.data);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad === null) return;
      // A gradient seen for the first time is written, not added onto zeros.
      const fresh = x.grad === null;
      be.ropeBackward(B * T, H, D, out.grad, positions, tables.cos, tables.sin, x.grad ?? x.gradToOverwrite(), !fresh);
    });
  }
  return out;
}

/** silu(gate) · up, elementwise. */
export function swiglu(gate: Tensor, up: Tensor): Tensor {
  if (gate.size !== up.size) throw new Error('swiglu: gate and up must have the same shape');
  const out = new Tensor(allocOverwritten(gate.size), gate.shape);
  const be = backend();
  be.swiglu(gate.size, gate.data, up.data, out.data);
  if (needsGrad(gate, up)) {
    record(out, () => {
      if (out.grad === null) return;
      // Gradients seen for the first time (the usual case: gate and up each feed only this op) are
      // written, not added onto zeros; frozen inputs get a throwaway buffer.
      const fresh = gate !== up && gate.grad === null && up.grad === null;
      const target = (t: Tensor) => (!t.requiresGrad ? allocOverwritten(t.size) : fresh ? t.gradToOverwrite() : t.ensureGrad());
      be.swigluBackward(gate.size, gate.data, up.data, out.grad, target(gate), target(up), !fresh);
    });
  }
  return out;
}

/** Softmax over the last axis. */
export function softmax(x: Tensor): Tensor {
  const C = x.shape[x.shape.length - 1];
  const N = x.size / C;
  const out = new Tensor(allocOverwritten(x.size), x.shape);
  const be = backend();
  be.softmax(N, C, x.data, 0, out.data, 0, 1, false, 0, null, 0);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad !== null) be.softmaxBackward(N, C, out.data, 0, out.grad, 0, x.ensureGrad(), 0, 1);
    });
  }
  return out;
}

/**
 * log softmax(logits[n])[targets[n]] for logits [..., V] → [...]. Rows with target −1 give 0 and
 * no gradient (padding). The [N, V] probabilities are never materialised.
 */
export function tokenLogprobs(logits: Tensor, targets: Int32Array): Tensor {
  const V = logits.shape[logits.shape.length - 1];
  const N = logits.size / V;
  if (targets.length !== N) throw new Error(`tokenLogprobs: ${targets.length} targets for ${N} rows of logits`);
  for (const t of targets) if (t >= V || t < -1) throw new Error(`tokenLogprobs: target ${t} is outside [-1, ${V})`);
  const out = new Tensor(alloc(N), logits.shape.slice(0, -1));
  const lse = alloc(N); // [N] log-sum-exp, saved for backward
  const be = backend();
  be.logSoftmaxGather(N, V, logits.data, targets, out.data, lse);
  if (needsGrad(logits)) {
    record(out, () => {
      if (out.grad === null) return;
      // The usual case, logits used once: their gradient is written, not added onto zeros.
      const first = logits.grad === null;
      const g = first ? logits.gradToOverwrite() : logits.ensureGrad();
      be.logSoftmaxGatherBackward(N, V, logits.data, lse, targets, out.grad, g, !first);
    }, [lse]);
  }
  return out;
}

/** Mean cross-entropy of logits [..., V] against targets (−1 = ignore), as a scalar. */
export function crossEntropy(logits: Tensor, targets: Int32Array): Tensor {
  let counted = 0;
  for (const t of targets) if (t >= 0) counted++;
  if (counted === 0) throw new Error('crossEntropy: every target is ignored (-1)');
  const lp = tokenLogprobs(logits, targets);
  // mean over all rows × (rows / counted) = mean over counted rows, since ignored rows are 0.
  return scale(mean(lp), -lp.size / counted);
}

/** Entropy of softmax(logits) per row (no gradient; a metric). */
export function entropyRows(logits: Tensor): Float64Array {
  const V = logits.shape[logits.shape.length - 1];
  const N = logits.size / V;
  const be = backend();
  const lse = alloc(N);
  const logp = alloc(N);
  const out = alloc(N);
  be.logSoftmaxGather(N, V, logits.data, new Int32Array(N).fill(-1), logp, lse);
  be.entropy(N, V, logits.data, lse, out);
  return Float64Array.from(out);
}
