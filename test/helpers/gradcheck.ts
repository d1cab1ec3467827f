/**
 * Finite-difference gradient checking in float64 on the reference backend.
 * `check(inputs, f)` compares the tape's gradients of sum(f(inputs) ⊙ R), R a fixed random
 * projection, with central differences, and returns the worst relative error.
 */
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { backward, clearTape, noGrad, numel, Tensor } from '../../src/engine/tensor.js';

export function useFloat64Reference(): void {
  setBackend('reference');
  setDType('float64');
}

/** mulberry32: a tiny seeded PRNG for tests. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randTensor(shape: number[], rand: () => number, lo = -1, hi = 1): Tensor {
  const t = new Tensor(new Float64Array(numel(shape)), shape, true);
  for (let i = 0; i < t.size; i++) t.data[i] = lo + (hi - lo) * rand();
  return t;
}

function project(out: Tensor, R: Float64Array): number {
  let s = 0;
  for (let i = 0; i < out.size; i++) s += out.data[i] * R[i];
  return s;
}

/** Returns max |analytic − numeric| / max(1, |numeric|) over every input element. */
export function gradError(inputs: Tensor[], f: () => Tensor, seed = 7, eps = 1e-6): number {
  const rand = prng(seed);
  for (const t of inputs) t.grad = null;
  const out = f();
  const R = new Float64Array(out.size).map(() => rand() * 2 - 1);
  backward(out, R); // the gradient of sum(out ⊙ R)
  let worst = 0;
  noGrad(() => {
    for (const t of inputs) {
      const analytic = t.grad ?? new Float64Array(t.size);
      for (let i = 0; i < t.size; i++) {
        const x0 = t.data[i];
        t.data[i] = x0 + eps;
        const fp = project(f(), R);
        t.data[i] = x0 - eps;
        const fm = project(f(), R);
        t.data[i] = x0;
        const numeric = (fp - fm) / (2 * eps);
        worst = Math.max(worst, Math.abs(analytic[i] - numeric) / Math.max(1, Math.abs(numeric)));
      }
    }
  });
  clearTape();
  return worst;
}
