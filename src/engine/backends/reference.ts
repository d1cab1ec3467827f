/**
 * The reference backend: every kernel of `Backend` as a plain loop, written for reading, not speed.
 * It is the oracle the native backend is tested against and runs on Float32Array or Float64Array.
 */

import { type Backend, BF16_MIN_ROWS, type BinaryOp, type FloatArray, type GemmArgs, type Precision, type UnaryOp } from '../backend.js';

const GELU_K = Math.sqrt(2 / Math.PI);

function unaryF(op: UnaryOp, x: number): number {
  switch (op) {
    case 'gelu':
      return 0.5 * x * (1 + Math.tanh(GELU_K * (x + 0.044715 * x * x * x)));
    case 'silu':
      return x / (1 + Math.exp(-x));
    case 'relu':
      return Math.max(x, 0);
    case 'exp':
      return Math.exp(x);
    case 'log':
      return Math.log(x);
    case 'tanh':
      return Math.tanh(x);
    case 'neg':
      return -x;
    case 'sqrt':
      return Math.sqrt(x);
    case 'square':
      return x * x;
  }
}

/** d f(x) / dx */
function unaryDf(op: UnaryOp, x: number): number {
  switch (op) {
    case 'gelu': {
      const u = GELU_K * (x + 0.044715 * x * x * x);
      const t = Math.tanh(u);
      const du = GELU_K * (1 + 3 * 0.044715 * x * x);
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du;
    }
    case 'silu': {
      const s = 1 / (1 + Math.exp(-x));
      return s * (1 + x * (1 - s));
    }
    case 'relu':
      return x > 0 ? 1 : 0;
    case 'exp':
      return Math.exp(x);
    case 'log':
      return 1 / x;
    case 'tanh': {
      const t = Math.tanh(x);
      return 1 - t * t;
    }
    case 'neg':
      return -1;
    case 'sqrt':
      return 0.5 / Math.sqrt(x);
    case 'square':
      return 2 * x;
  }
}

function binaryF(op: BinaryOp, a: number, b: number): number {
  switch (op) {
    case 'add':
      return a + b;
    case 'sub':
      return a - b;
    case 'mul':
      return a * b;
    case 'div':
      return a / b;
  }
}

let threads = 1;
let precision: Precision = 'fp32';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/**
 * x as float32, then rounded to bfloat16 (nearest, ties to even; a subnormal becomes a zero of its
 * sign), as native/bf16gemm.c does with VCVTNE2PS2BF16.
 */
export function roundToBf16(x: number): number {
  f32[0] = x;
  const u = u32[0];
  if ((u & 0x7fffffff) > 0x7f800000) return x; // NaN stays NaN
  if ((u & 0x7f800000) === 0) return u & 0x80000000 ? -0 : 0;
  u32[0] = ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) << 16;
  return f32[0];
}

const identity = (x: number) => x;

/**
 * The rounding of attention's product inputs: under precision bf16, attention over at least
 * BF16_MIN_ROWS query rows takes bf16 inputs in every product (q, k, v, P; dO, dS in the backward),
 * as native/attention.c does; decoding (fewer rows) stays fp32.
 */
function attentionRounding(T: number): (x: number) => number {
  return precision !== 'fp32' && T >= BF16_MIN_ROWS ? roundToBf16 : identity;
}

export const referenceBackend: Backend = {
  name: 'reference',
  setNumThreads(n) {
    threads = n;
  },
  getNumThreads() {
    return threads;
  },

  setPrecision(p) {
    precision = p;
  },
  getPrecision() {
    return precision;
  },

  gemmPair(...args) {
    // One after the other: the definition the native backend's concurrent version must match.
    referenceBackend.gemm(...(args.slice(0, 16) as GemmArgs));
    referenceBackend.gemm(...(args.slice(16) as GemmArgs));
  },

  gemm(transA, transB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc) {
    const round = precision !== 'fp32' && M >= BF16_MIN_ROWS ? roundToBf16 : (x: number) => x;
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let acc = 0;
        for (let k = 0; k < K; k++) {
          const a = round(transA ? A[offA + k * lda + i] : A[offA + i * lda + k]);
          const b = round(transB ? B[offB + j * ldb + k] : B[offB + k * ldb + j]);
          acc += a * b;
        }
        const c = offC + i * ldc + j;
        C[c] = beta === 0 ? alpha * acc : alpha * acc + beta * C[c];
      }
    }
  },

  packedFloats(N, K) {
    return N * K;
  },

  // The reference's "packing" is op(B) as a dense [K, N] copy (rounded to bf16 values for a bf16
  // pack); the product is then a plain gemm.
  packB(transB, N, K, B, offB, ldb, packed, bf16 = false) {
    const round = bf16 ? roundToBf16 : (x: number) => x;
    for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) packed[k * N + j] = round(transB ? B[offB + j * ldb + k] : B[offB + k * ldb + j]);
  },

  gemmPrepacked(M, N, K, alpha, A, offA, lda, packed, beta, C, offC, ldc, bf16 = false) {
    if (bf16) {
      const rounded = new Float32Array(M * K);
      for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) rounded[i * K + k] = roundToBf16(A[offA + i * lda + k]);
      [A, offA, lda] = [rounded, 0, K];
    }
    const fp32 = precision;
    precision = 'fp32';
    try {
      referenceBackend.gemm(false, false, M, N, K, alpha, A, offA, lda, packed, 0, N, beta, C, offC, ldc);
    } finally {
      precision = fp32;
    }
  },

  binary(op, shape, a, aStrides, b, bStrides, out) {
    const rank = shape.length;
    const n = shape.reduce((p, d) => p * d, 1);
    const idx = new Array<number>(rank).fill(0);
    for (let i = 0; i < n; i++) {
      let ia = 0;
      let ib = 0;
      for (let d = 0; d < rank; d++) {
        ia += idx[d] * aStrides[d];
        ib += idx[d] * bStrides[d];
      }
      out[i] = binaryF(op, a[ia], b[ib]);
      for (let d = rank - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  },

  unary(op, n, x, out) {
    for (let i = 0; i < n; i++) out[i] = unaryF(op, x[i]);
  },
  unaryBackward(op, n, x, gy, gx) {
    for (let i = 0; i < n; i++) gx[i] += gy[i] * unaryDf(op, x[i]);
  },

  axpy(n, alpha, x, y) {
    for (let i = 0; i < n; i++) y[i] += alpha * x[i];
  },
  scale(n, alpha, x) {
    for (let i = 0; i < n; i++) x[i] *= alpha;
  },
  sumSquares(n, x) {
    let s = 0;
    for (let i = 0; i < n; i++) s += x[i] * x[i];
    return s;
  },

  reduceSum(outer, len, inner, x, out, accumulate) {
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < inner; j++) {
        let s = 0;
        for (let l = 0; l < len; l++) s += x[(o * len + l) * inner + j];
        const k = o * inner + j;
        out[k] = accumulate ? out[k] + s : s;
      }
    }
  },

  softmax(rows, cols, x, xOff, out, outOff, scale, causal, rowPos0, keyMask, kmOff) {
    for (let r = 0; r < rows; r++) {
      const xr = xOff + r * cols;
      const yr = outOff + r * cols;
      const visible = (c: number) => (!causal || c <= rowPos0 + r) && (keyMask === null || keyMask[kmOff + c] !== 0);
      let max = -Infinity;
      for (let c = 0; c < cols; c++) if (visible(c)) max = Math.max(max, scale * x[xr + c]);
      if (max === -Infinity) {
        for (let c = 0; c < cols; c++) out[yr + c] = 0;
        continue;
      }
      let sum = 0;
      for (let c = 0; c < cols; c++) {
        const e = visible(c) ? Math.exp(scale * x[xr + c] - max) : 0;
        out[yr + c] = e;
        sum += e;
      }
      for (let c = 0; c < cols; c++) out[yr + c] /= sum;
    }
  },
  softmaxBackward(rows, cols, y, yOff, gy, gyOff, gx, gxOff, scale) {
    for (let r = 0; r < rows; r++) {
      let dot = 0;
      for (let c = 0; c < cols; c++) dot += gy[gyOff + r * cols + c] * y[yOff + r * cols + c];
      for (let c = 0; c < cols; c++) {
        const yv = y[yOff + r * cols + c];
        gx[gxOff + r * cols + c] += scale * yv * (gy[gyOff + r * cols + c] - dot);
      }
    }
  },

  attention(B, T, S, Smax, H, Hkv, D, q, k, v, P, out, keyMask, causal, pastLen, scale) {
    const r = attentionRounding(T);
    const group = H / Hkv;
    const qAt = (b: number, t: number, h: number) => ((b * T + t) * H + h) * D;
    const kAt = (b: number, s: number, g: number) => ((b * Smax + s) * Hkv + g) * D;
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / group);
        const pOff = (b * H + h) * T * S;
        for (let t = 0; t < T; t++) {
          for (let s = 0; s < S; s++) {
            let dot = 0;
            for (let d = 0; d < D; d++) dot += r(q[qAt(b, t, h) + d]) * r(k[kAt(b, s, g) + d]);
            P[pOff + t * S + s] = dot;
          }
        }
        referenceBackend.softmax(T, S, P, pOff, P, pOff, scale, causal, pastLen, keyMask, b * Smax);
        for (let t = 0; t < T; t++) {
          for (let d = 0; d < D; d++) {
            let acc = 0;
            for (let s = 0; s < S; s++) acc += r(P[pOff + t * S + s]) * r(v[kAt(b, s, g) + d]);
            out[qAt(b, t, h) + d] = acc;
          }
        }
      }
    }
  },
  // Every key, hidden or not: P is 0 where causal / pastLen hide one, so nothing hidden adds.
  attentionBackward(B, T, S, Smax, H, Hkv, D, q, k, v, P, gOut, _causal, _pastLen, scale, gq, gk, gv) {
    const r = attentionRounding(T);
    const group = H / Hkv;
    const qAt = (b: number, t: number, h: number) => ((b * T + t) * H + h) * D;
    const kAt = (b: number, s: number, g: number) => ((b * Smax + s) * Hkv + g) * D;
    const dP = new Float64Array(S);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / group);
        const pOff = (b * H + h) * T * S;
        for (let t = 0; t < T; t++) {
          const p = (s: number) => P[pOff + t * S + s];
          let dot = 0;
          for (let s = 0; s < S; s++) {
            dP[s] = 0;
            for (let d = 0; d < D; d++) dP[s] += r(gOut[qAt(b, t, h) + d]) * r(v[kAt(b, s, g) + d]);
            dot += dP[s] * p(s);
          }
          for (let s = 0; s < S; s++) {
            const dS = r(scale * p(s) * (dP[s] - dot));
            const ps = r(p(s));
            for (let d = 0; d < D; d++) {
              if (gq) gq[qAt(b, t, h) + d] += dS * r(k[kAt(b, s, g) + d]);
              if (gk) gk[kAt(b, s, g) + d] += dS * r(q[qAt(b, t, h) + d]);
              if (gv) gv[kAt(b, s, g) + d] += ps * r(gOut[qAt(b, t, h) + d]);
            }
          }
        }
      }
    }
  },

  copy2d(rows, cols, src, srcOff, ldSrc, dst, dstOff, ldDst, accumulate) {
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < cols; j++) {
        const i = dstOff + r * ldDst + j;
        dst[i] = (accumulate ? dst[i] : 0) + src[srcOff + r * ldSrc + j];
      }
    }
  },

  logSoftmaxGather(rows, V, logits, targets, logp, lse) {
    for (let r = 0; r < rows; r++) {
      let max = -Infinity;
      for (let v = 0; v < V; v++) max = Math.max(max, logits[r * V + v]);
      let sum = 0;
      for (let v = 0; v < V; v++) sum += Math.exp(logits[r * V + v] - max);
      lse[r] = max + Math.log(sum);
      const t = targets[r];
      logp[r] = t < 0 ? 0 : logits[r * V + t] - lse[r];
    }
  },
  logSoftmaxGatherBackward(rows, V, logits, lse, targets, gLogp, gLogits, accumulate) {
    if (!accumulate) gLogits.fill(0, 0, rows * V);
    for (let r = 0; r < rows; r++) {
      const t = targets[r];
      if (t < 0) continue;
      const g = gLogp[r];
      for (let v = 0; v < V; v++) {
        const p = Math.exp(logits[r * V + v] - lse[r]);
        gLogits[r * V + v] += g * ((v === t ? 1 : 0) - p);
      }
    }
  },
  entropy(rows, V, logits, lse, out) {
    for (let r = 0; r < rows; r++) {
      let h = 0;
      for (let v = 0; v < V; v++) {
        const lp = logits[r * V + v] - lse[r];
        h -= Math.exp(lp) * lp;
      }
      out[r] = h;
    }
  },

  rmsnorm(rows, C, x, w, eps, out, rstd) {
    for (let r = 0; r < rows; r++) {
      let ss = 0;
      for (let c = 0; c < C; c++) ss += x[r * C + c] * x[r * C + c];
      const s = 1 / Math.sqrt(ss / C + eps);
      rstd[r] = s;
      for (let c = 0; c < C; c++) out[r * C + c] = x[r * C + c] * s * w[c];
    }
  },
  rmsnormBackward(rows, C, x, w, rstd, gy, gx, gw) {
    // y = w ⊙ x·s, s = (mean(x²)+eps)^(-1/2):  dx = s·(w⊙gy) − x·s³·mean(x ⊙ w ⊙ gy)
    for (let r = 0; r < rows; r++) {
      const s = rstd[r];
      let dot = 0;
      for (let c = 0; c < C; c++) dot += x[r * C + c] * w[c] * gy[r * C + c];
      const k = (s * s * s * dot) / C;
      for (let c = 0; c < C; c++) {
        const i = r * C + c;
        gx[i] += s * w[c] * gy[i] - k * x[i];
        gw[c] += gy[i] * x[i] * s;
      }
    }
  },

  layernorm(rows, C, x, w, b, eps, out, mean, rstd) {
    for (let r = 0; r < rows; r++) {
      let m = 0;
      for (let c = 0; c < C; c++) m += x[r * C + c];
      m /= C;
      let v = 0;
      for (let c = 0; c < C; c++) v += (x[r * C + c] - m) ** 2;
      const s = 1 / Math.sqrt(v / C + eps);
      mean[r] = m;
      rstd[r] = s;
      for (let c = 0; c < C; c++) out[r * C + c] = (x[r * C + c] - m) * s * w[c] + b[c];
    }
  },
  layernormBackward(rows, C, x, w, mean, rstd, gy, gx, gw, gb) {
    // xhat = (x−m)·s;  dx = s·(g − mean(g) − xhat·mean(g ⊙ xhat)) with g = w ⊙ gy
    for (let r = 0; r < rows; r++) {
      const m = mean[r];
      const s = rstd[r];
      let gMean = 0;
      let gxhatMean = 0;
      for (let c = 0; c < C; c++) {
        const i = r * C + c;
        const g = w[c] * gy[i];
        gMean += g;
        gxhatMean += g * (x[i] - m) * s;
      }
      gMean /= C;
      gxhatMean /= C;
      for (let c = 0; c < C; c++) {
        const i = r * C + c;
        const xhat = (x[i] - m) * s;
        gx[i] += s * (w[c] * gy[i] - gMean - xhat * gxhatMean);
        gw[c] += gy[i] * xhat;
        gb[c] += gy[i];
      }
    }
  },

  rope(rows, H, D, x, positions, cos, sin, out) {
    const half = D / 2;
    for (let r = 0; r < rows; r++) {
      const p = positions[r] * half;
      for (let h = 0; h < H; h++) {
        const o = (r * H + h) * D;
        for (let i = 0; i < half; i++) {
          const c = cos[p + i];
          const s = sin[p + i];
          const x1 = x[o + i];
          const x2 = x[o + i + half];
          out[o + i] = x1 * c - x2 * s;
          out[o + i + half] = x2 * c + x1 * s;
        }
      }
    }
  },
  ropeBackward(rows, H, D, gy, positions, cos, sin, gx, accumulate) {
    if (!accumulate) gx.fill(0, 0, rows * H * D);
    const half = D / 2;
    for (let r = 0; r < rows; r++) {
      const p = positions[r] * half;
      for (let h = 0; h < H; h++) {
        const o = (r * H + h) * D;
        for (let i = 0; i < half; i++) {
          const c = cos[p + i];
          const s = sin[p + i];
          const g1 = gy[o + i];
          const g2 = gy[o + i + half];
          gx[o + i] += g1 * c + g2 * s;
          gx[o + i + half] += g2 * c - g1 * s;
        }
      }
    }
  },

  swiglu(n, gate, up, out) {
    for (let i = 0; i < n; i++) out[i] = unaryF('silu', gate[i]) * up[i];
  },
  swigluBackward(n, gate, up, gy, gGate, gUp, accumulate) {
    if (!accumulate) {
      gGate.fill(0, 0, n);
      gUp.fill(0, 0, n);
    }
    for (let i = 0; i < n; i++) {
      gGate[i] += gy[i] * up[i] * unaryDf('silu', gate[i]);
      gUp[i] += gy[i] * unaryF('silu', gate[i]);
    }
  },

  embedding(n, C, ids, W, out) {
    for (let i = 0; i < n; i++) for (let c = 0; c < C; c++) out[i * C + c] = W[ids[i] * C + c];
  },
  embeddingBackward(n, C, ids, gy, gW) {
    for (let i = 0; i < n; i++) for (let c = 0; c < C; c++) gW[ids[i] * C + c] += gy[i * C + c];
  },

  adamw(n, p, g, m, v, lr, b1, b2, eps, wd, bc1, bc2) {
    for (let i = 0; i < n; i++) {
      p[i] -= lr * wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= (lr * (m[i] / bc1)) / (Math.sqrt(v[i] / bc2) + eps);
    }
  },

  topk(rows, n, x, k, vals, idx) {
    const order = Array.from({ length: n }, (_, i) => i);
    for (let r = 0; r < rows; r++) {
      const row = (i: number) => x[r * n + i];
      order.sort((i, j) => row(j) - row(i) || i - j);
      for (let j = 0; j < k; j++) {
        vals[r * k + j] = row(order[j]);
        idx[r * k + j] = order[j];
      }
      order.sort((i, j) => i - j);
    }
  },
};

/** Exposed so the native backend's tests can reuse the scalar definitions. */
export const scalarReference = { unaryF, unaryDf, binaryF };
export type { FloatArray };
