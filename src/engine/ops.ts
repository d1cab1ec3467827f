/**
 * General tensor ops: elementwise arithmetic with broadcasting, matrix products, reductions and
 * shape ops. Each op's backward is the closure recorded right after its forward.
 */
import type { BinaryOp, FloatArray, GemmArgs, UnaryOp } from './backend.js';
import { packedWeight } from './packed.js';
import { alloc, allocOverwritten, backend } from './runtime.js';
import { broadcastShapes, broadcastStrides, copyOf, needsGrad, noGrad, numel, passGrad, record, rowMajorStrides, Tensor } from './tensor.js';

// ---- elementwise ----------------------------------------------------------------------------

function binary(op: BinaryOp, a: Tensor, b: Tensor): Tensor {
  const shape = broadcastShapes(a.shape, b.shape);
  const out = new Tensor(allocOverwritten(numel(shape)), shape);
  const be = backend();
  const sa = broadcastStrides(a.shape, shape);
  const sb = broadcastStrides(b.shape, shape);
  be.binary(op, shape, a.data, sa, b.data, sb, out.data);
  if (needsGrad(a, b)) {
    record(out, () => {
      const g = out.grad;
      if (g === null) return;
      const full = rowMajorStrides(shape);
      // d(a op b)/da and /db as elementwise products with g, each in a fresh buffer that passGrad
      // hands down (or reduces over broadcast axes).
      const times = (op2: BinaryOp, x: FloatArray, sx: number[]) => {
        const tmp = alloc(g.length);
        be.binary(op2, shape, g, full, x, sx, tmp);
        return tmp;
      };
      switch (op) {
        case 'add': {
          const taken = a.requiresGrad && passGrad(a, g, shape);
          if (b.requiresGrad) passGrad(b, g, shape, !taken);
          break;
        }
        case 'sub':
          if (a.requiresGrad) passGrad(a, g, shape);
          if (b.requiresGrad) {
            const neg = copyOf(g);
            be.scale(neg.length, -1, neg);
            passGrad(b, neg, shape);
          }
          break;
        case 'mul':
          if (a.requiresGrad) passGrad(a, times('mul', b.data, sb), shape);
          if (b.requiresGrad) passGrad(b, times('mul', a.data, sa), shape);
          break;
        case 'div':
          // d(a/b)/da = 1/b;  d(a/b)/db = −out/b
          if (a.requiresGrad) passGrad(a, times('div', b.data, sb), shape);
          if (b.requiresGrad) {
            const tmp = times('mul', out.data, full);
            be.binary('div', shape, tmp, full, b.data, sb, tmp);
            be.scale(tmp.length, -1, tmp);
            passGrad(b, tmp, shape);
          }
          break;
      }
    });
  }
  return out;
}

export const add = (a: Tensor, b: Tensor): Tensor => binary('add', a, b);
export const sub = (a: Tensor, b: Tensor): Tensor => binary('sub', a, b);
export const mul = (a: Tensor, b: Tensor): Tensor => binary('mul', a, b);
export const div = (a: Tensor, b: Tensor): Tensor => binary('div', a, b);

/** out = f(x) elementwise. */
export function unary(op: UnaryOp, x: Tensor): Tensor {
  const out = new Tensor(alloc(x.size), x.shape);
  const be = backend();
  be.unary(op, x.size, x.data, out.data);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad !== null) be.unaryBackward(op, x.size, x.data, out.grad, x.ensureGrad());
    });
  }
  return out;
}

export const gelu = (x: Tensor): Tensor => unary('gelu', x);
export const silu = (x: Tensor): Tensor => unary('silu', x);
export const relu = (x: Tensor): Tensor => unary('relu', x);
export const exp = (x: Tensor): Tensor => unary('exp', x);
export const log = (x: Tensor): Tensor => unary('log', x);
export const tanh = (x: Tensor): Tensor => unary('tanh', x);
export const square = (x: Tensor): Tensor => unary('square', x);

/** out = c · x for a constant c. */
export function scale(x: Tensor, c: number): Tensor {
  const out = new Tensor(alloc(x.size), x.shape);
  out.data.set(x.data);
  const be = backend();
  be.scale(out.size, c, out.data);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad === null) return;
      be.scale(out.size, c, out.grad);
      passGrad(x, out.grad, x.shape);
    });
  }
  return out;
}

// ---- matrix products ------------------------------------------------------------------------

/**
 * Matrix product over the last two axes, plus an optional bias row. a: [..., M, K]. b: [K, N]
 * (shared by every batch entry, e.g. a weight) or [..., K, N] with the same leading axes as a.
 * With `transB`, b is stored transposed ([N, K] or [..., N, K]), which is how HF Linear weights
 * are laid out. bias: [N], added to every output row (written first, then the GEMM adds onto it).
 */
export function matmul(a: Tensor, b: Tensor, transB = false, bias: Tensor | null = null): Tensor {
  if (a.shape.length < 2 || b.shape.length < 2) throw new Error('matmul: both operands need rank ≥ 2');
  const K = a.shape[a.shape.length - 1];
  const M = a.shape[a.shape.length - 2];
  const bK = transB ? b.shape[b.shape.length - 1] : b.shape[b.shape.length - 2];
  const N = transB ? b.shape[b.shape.length - 2] : b.shape[b.shape.length - 1];
  if (bK !== K) throw new Error(`matmul: inner dimensions differ, [${a.shape.join(', ')}] × [${b.shape.join(', ')}]${transB ? 'ᵀ' : ''}`);
  if (bias !== null && bias.size !== N) throw new Error(`matmul: bias has ${bias.size} elements, the output has ${N} columns`);
  const batchShape = a.shape.slice(0, -2);
  const shared = b.shape.length === 2;
  if (!shared && b.shape.slice(0, -2).join() !== batchShape.join()) {
    throw new Error(`matmul: batch axes differ, [${a.shape.join(', ')}] × [${b.shape.join(', ')}]`);
  }
  const batch = numel(batchShape);
  const out = new Tensor(allocOverwritten(batch * M * N), [...batchShape, M, N]); // beta 0, or the bias copied in first
  const be = backend();
  const ldb = transB ? K : N;
  const beta = bias === null ? 0 : 1;
  if (bias !== null) be.copy2d(batch * M, N, bias.data, 0, 0, out.data, 0, N, false);
  const packed = shared && !needsGrad(a, b, bias) ? packedWeight(be, b.data, transB, batch * M, N, K) : null;
  if (packed !== null) {
    // Decoding inside withPackedWeights: the weight was packed once for the whole sampling call.
    be.gemmPrepacked(batch * M, N, K, 1, a.data, 0, K, packed.data, beta, out.data, 0, N, packed.bf16);
  } else if (shared) {
    // One GEMM over all batch rows: [batch·M, K] × [K, N].
    be.gemm(false, transB, batch * M, N, K, 1, a.data, 0, K, b.data, 0, ldb, beta, out.data, 0, N);
  } else {
    for (let i = 0; i < batch; i++) be.gemm(false, transB, M, N, K, 1, a.data, i * M * K, K, b.data, i * K * N, ldb, beta, out.data, i * M * N, N);
  }
  if (needsGrad(a, b, bias)) {
    record(out, () => {
      const g = out.grad;
      if (g === null) return;
      const rows = shared ? batch * M : M;
      const reps = shared ? 1 : batch;
      // A gradient seen for the first time is written (beta 0) rather than added onto zeros.
      const betaA = a.grad === null ? 0 : 1;
      const betaB = b.grad === null && b !== a ? 0 : 1;
      for (let i = 0; i < reps; i++) {
        const oa = i * M * K;
        const ob = shared ? 0 : i * K * N;
        const og = i * M * N;
        // dA = dC · opB(B)ᵀ
        const gA = !a.requiresGrad ? null : (a.grad ?? a.gradToOverwrite()); // betaA 0: written, not added to
        const dA: GemmArgs | null = gA ? [false, !transB, rows, K, N, 1, g, og, N, b.data, ob, ldb, betaA, gA, oa, K] : null;
        // dB = Aᵀ · dC   (or, stored transposed, dBᵀ = dCᵀ · A)
        const gB = !b.requiresGrad ? null : betaB === 0 && b.grad === null ? b.gradToOverwrite() : b.ensureGrad();
        const dB: GemmArgs | null =
          gB === null
            ? null
            : transB
              ? [true, false, N, K, rows, 1, g, og, N, a.data, oa, K, betaB, gB, ob, K]
              : [true, false, K, N, rows, 1, a.data, oa, K, g, og, N, betaB, gB, ob, N];
        // Independent products: at once when the backend can (not for matmul(x, x), one gradient).
        if (dA && dB && a !== b) be.gemmPair(...dA, ...dB);
        else {
          if (dA) be.gemm(...dA);
          if (dB) be.gemm(...dB);
        }
      }
      // dbias = Σ over rows of dC
      if (bias?.requiresGrad) be.reduceSum(1, batch * M, N, g, bias.ensureGrad(), true);
    });
  }
  return out;
}

/** HF Linear: y = x · Wᵀ + bias, W stored [out, in]. */
export function linear(x: Tensor, W: Tensor, bias?: Tensor | null): Tensor {
  return matmul(x, W, true, bias ?? null);
}

/**
 * A linear layer with a low-rank update, y = x·Wᵀ + bias + scale · (x·Aᵀ)·Bᵀ (W [N, K], A [r, K],
 * B [N, r]; LoRA's form), as one op: the update is added into the product's own output, so the
 * graph keeps x·Aᵀ ([rows, r]) and no full-width temporaries. Backward, with g = dy and
 * gu = scale · g·B:  dx = g·W + gu·A,  dA = guᵀ·x,  dB = scale · gᵀ·(x·Aᵀ),  dW = gᵀ·x,  dbias = Σ g.
 */
export function linearLowRank(x: Tensor, W: Tensor, bias: Tensor | null, A: Tensor, B: Tensor, scale: number): Tensor {
  const [N, K] = W.shape;
  const r = A.shape[0];
  if (A.shape.length !== 2 || A.shape[1] !== K || B.shape.length !== 2 || B.shape[0] !== N || B.shape[1] !== r) {
    throw new Error(`linearLowRank: A [${A.shape}] and B [${B.shape}] do not fit W [${W.shape}]`);
  }
  const out = noGrad(() => matmul(x, W, true, bias)); // checks x against W; packs when decoding
  const rows = x.size / K;
  const be = backend();
  const u = alloc(rows * r); // x·Aᵀ
  be.gemm(false, true, rows, r, K, 1, x.data, 0, K, A.data, 0, K, 0, u, 0, r);
  be.gemm(false, true, rows, N, r, scale, u, 0, r, B.data, 0, r, 1, out.data, 0, N);
  if (needsGrad(x, W, bias, A, B)) {
    record(out, () => {
      const g = out.grad;
      if (g === null) return;
      const gu = alloc(rows * r); // scale · g·B
      be.gemm(false, false, rows, r, N, scale, g, 0, N, B.data, 0, r, 0, gu, 0, r);
      if (x.requiresGrad) {
        const first = x.grad === null;
        const gx = first ? x.gradToOverwrite() : x.ensureGrad();
        be.gemm(false, false, rows, K, N, 1, g, 0, N, W.data, 0, K, first ? 0 : 1, gx, 0, K);
        be.gemm(false, false, rows, K, r, 1, gu, 0, r, A.data, 0, K, 1, gx, 0, K);
      }
      if (A.requiresGrad) be.gemm(true, false, r, K, rows, 1, gu, 0, r, x.data, 0, K, 1, A.ensureGrad(), 0, K);
      if (B.requiresGrad) be.gemm(true, false, N, r, rows, scale, g, 0, N, u, 0, r, 1, B.ensureGrad(), 0, r);
      if (W.requiresGrad) be.gemm(true, false, N, K, rows, 1, g, 0, N, x.data, 0, K, 1, W.ensureGrad(), 0, K);
      if (bias?.requiresGrad) be.reduceSum(1, rows, N, g, bias.ensureGrad(), true);
    }, [u]);
  }
  return out;
}

// ---- reductions -----------------------------------------------------------------------------

/** Sum of all elements, a scalar tensor [1]. */
export function sum(x: Tensor): Tensor {
  const be = backend();
  const out = new Tensor(alloc(1), [1]);
  be.reduceSum(1, x.size, 1, x.data, out.data, false);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad === null) return;
      const gx = x.ensureGrad();
      const g = out.grad[0];
      for (let i = 0; i < gx.length; i++) gx[i] += g;
    });
  }
  return out;
}

export function mean(x: Tensor): Tensor {
  return scale(sum(x), 1 / x.size);
}

/** Sum over one axis (the axis is removed from the shape). */
export function sumAxis(x: Tensor, axis: number): Tensor {
  const ax = axis < 0 ? x.shape.length + axis : axis;
  const outer = numel(x.shape.slice(0, ax));
  const len = x.shape[ax];
  const inner = numel(x.shape.slice(ax + 1));
  const shape = [...x.shape.slice(0, ax), ...x.shape.slice(ax + 1)];
  const out = new Tensor(alloc(outer * inner), shape);
  const be = backend();
  be.reduceSum(outer, len, inner, x.data, out.data, false);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad === null) return;
      passGrad(x, expandAxis(out.grad, outer, len, inner), x.shape);
    });
  }
  return out;
}

function expandAxis(g: FloatArray, outer: number, len: number, inner: number): FloatArray {
  const out = alloc(outer * len * inner);
  for (let o = 0; o < outer; o++) for (let l = 0; l < len; l++) out.set(g.subarray(o * inner, (o + 1) * inner), (o * len + l) * inner);
  return out;
}

// ---- shape ops ------------------------------------------------------------------------------

/** Same data, new shape (-1 infers one axis). */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  const known = shape.filter((d) => d !== -1).reduce((p, d) => p * d, 1);
  const resolved = shape.map((d) => (d === -1 ? x.size / known : d));
  if (numel(resolved) !== x.size) throw new Error(`reshape: cannot view [${x.shape.join(', ')}] as [${shape.join(', ')}]`);
  const out = new Tensor(x.data, resolved);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad !== null) passGrad(x, out.grad, x.shape);
    });
  }
  return out;
}

/** x[..., start:start+len] along the last axis (a copy). */
export function sliceLast(x: Tensor, start: number, len: number): Tensor {
  const C = x.shape[x.shape.length - 1];
  if (start < 0 || start + len > C) throw new Error(`sliceLast: [${start}, ${start + len}) is outside an axis of ${C}`);
  const rows = x.size / C;
  const out = new Tensor(alloc(rows * len), [...x.shape.slice(0, -1), len]);
  const be = backend();
  be.copy2d(rows, len, x.data, start, C, out.data, 0, len, false);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad !== null) be.copy2d(rows, len, out.grad, 0, len, x.ensureGrad(), start, C, true);
    });
  }
  return out;
}

/** Concatenation along the last axis. */
export function concatLast(parts: Tensor[]): Tensor {
  const lead = parts[0].shape.slice(0, -1);
  const widths = parts.map((p) => p.shape[p.shape.length - 1]);
  const C = widths.reduce((p, w) => p + w, 0);
  const rows = numel(lead);
  const out = new Tensor(alloc(rows * C), [...lead, C]);
  const be = backend();
  const offsets = widths.map((_, k) => widths.slice(0, k).reduce((p, w) => p + w, 0));
  for (const [k, p] of parts.entries()) be.copy2d(rows, widths[k], p.data, 0, widths[k], out.data, offsets[k], C, false);
  if (needsGrad(...parts)) {
    record(out, () => {
      const g = out.grad;
      if (g === null) return;
      for (const [k, p] of parts.entries()) if (p.requiresGrad) be.copy2d(rows, widths[k], g, offsets[k], C, p.ensureGrad(), 0, widths[k], true);
    });
  }
  return out;
}

/** x[rows[i], :] of x viewed as [N, C] → [R, C]; the backward scatter-adds. */
export function gatherRows(x: Tensor, rows: Int32Array): Tensor {
  const C = x.shape[x.shape.length - 1];
  const N = x.size / C;
  for (const r of rows) if (r < 0 || r >= N) throw new Error(`gatherRows: row ${r} is outside [0, ${N})`);
  const out = new Tensor(alloc(rows.length * C), [rows.length, C]);
  // A row gather is an embedding lookup with x as the table; its backward the scatter-add.
  const be = backend();
  be.embedding(rows.length, C, rows, x.data, out.data);
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad !== null) be.embeddingBackward(rows.length, C, rows, out.grad, x.ensureGrad());
    });
  }
  return out;
}

/** Σ_i w[i] · x[i] with constant weights w, as a scalar [1] (e.g. advantage-weighted log-probs). */
export function weightedSum(x: Tensor, w: ArrayLike<number>): Tensor {
  if (w.length !== x.size) throw new Error(`weightedSum: ${w.length} weights for ${x.size} elements`);
  const out = new Tensor(alloc(1), [1]);
  let s = 0;
  for (let i = 0; i < x.size; i++) s += w[i] * x.data[i];
  out.data[0] = s;
  if (needsGrad(x)) {
    record(out, () => {
      if (out.grad === null) return;
      const gx = x.ensureGrad();
      const g = out.grad[0];
      for (let i = 0; i < gx.length; i++) gx[i] += g * w[i];
    });
  }
  return out;
}

/** min(max(x, lo), hi) elementwise; the gradient flows where x is inside [lo, hi]. */
export function clamp(x: Tensor, lo: number, hi: number): Tensor {
  const out = new Tensor(alloc(x.size), x.shape);
  for (let i = 0; i < x.size; i++) out.data[i] = Math.min(hi, Math.max(lo, x.data[i]));
  if (needsGrad(x)) {
    record(out, () => {
      const g = out.grad;
      if (g === null) return;
      const gx = x.ensureGrad();
      for (let i = 0; i < gx.length; i++) if (x.data[i] >= lo && x.data[i] <= hi) gx[i] += g[i];
    });
  }
  return out;
}

/** Elementwise minimum of two same-shape tensors; the gradient goes to the smaller (a on ties). */
export function minimum(a: Tensor, b: Tensor): Tensor {
  if (a.size !== b.size) throw new Error('minimum: tensors must have the same shape');
  const out = new Tensor(alloc(a.size), a.shape);
  for (let i = 0; i < a.size; i++) out.data[i] = Math.min(a.data[i], b.data[i]);
  if (needsGrad(a, b)) {
    record(out, () => {
      const g = out.grad;
      if (g === null) return;
      for (let i = 0; i < g.length; i++) {
        const t = a.data[i] <= b.data[i] ? a : b;
        if (t.requiresGrad) t.ensureGrad()[i] += g[i];
      }
    });
  }
  return out;
}
