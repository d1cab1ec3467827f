import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { add, matmul, sum } from '../../src/engine/ops.js';
import { AdamW, clipGradNorm, gradNorm, lrMultiplier, SGD } from '../../src/engine/optim.js';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { backward, Tensor } from '../../src/engine/tensor.js';

const param = (values: number[], grad: number[], name = 'p') => {
  const p = new Tensor(Float32Array.from(values), [values.length], true, name);
  p.grad = Float32Array.from(grad);
  return p;
};

describe('optimizers', () => {
  before(() => {
    setDType('float32');
    setBackend('reference');
  });

  it('AdamW matches a hand-computed torch.optim.AdamW trajectory', () => {
    const p = param([1.0, -2.0], [0.5, -1.0]);
    const opt = new AdamW([p], { lr: 0.1, weightDecay: 0.01 });
    // step 1: m̂ = g, v̂ = g², update = lr · g/(|g| + eps) = ±0.1, after decay p·(1 − lr·wd)
    opt.step();
    assert.ok(Math.abs(p.data[0] - (1.0 * (1 - 0.001) - 0.1)) < 1e-6);
    assert.ok(Math.abs(p.data[1] - (-2.0 * (1 - 0.001) + 0.1)) < 1e-6);
    // step 2 with the same gradient: m̂ = g, v̂ = g² again → same ±0.1 step
    const p0 = p.data[0];
    opt.step();
    assert.ok(Math.abs(p.data[0] - (p0 * (1 - 0.001) - 0.1)) < 1e-6);
  });

  it('AdamW state round-trips by parameter name', () => {
    const a = param([1, 2, 3], [0.1, -0.2, 0.3], 'w');
    const opt = new AdamW([a], { lr: 0.01 });
    opt.step();
    const b = param(Array.from(a.data), [0.1, -0.2, 0.3], 'w');
    const opt2 = new AdamW([b], { lr: 0.01 });
    opt2.loadState(opt.state());
    opt.step();
    opt2.step();
    assert.deepEqual(Array.from(a.data), Array.from(b.data));
  });

  it('zeroGrad drops gradients (set_to_none): the next backward writes, in the same buffer; a step skips a parameter without one', () => {
    const w = new Tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3], true, 'w');
    const bias = new Tensor(new Float32Array(6), [2, 3], true, 'b'); // its gradient comes by passGrad, as a copy
    const frozenThisStep = param([7, 8], [0, 0], 'u');
    const x = new Tensor(Float32Array.from([1, -1, 0.5, 2]), [2, 2]);
    const opt = new AdamW([w, bias, frozenThisStep], { lr: 0.1 });
    const gradOfW = () => {
      backward(sum(add(matmul(x, w), bias)));
      assert.deepEqual(Array.from(bias.grad ?? []), [1, 1, 1, 1, 1, 1]);
      return Array.from(w.grad ?? []);
    };
    const first = gradOfW();
    const buf = w.grad;
    opt.step();
    opt.zeroGrad();
    assert.equal(w.grad, null);
    assert.equal(frozenThisStep.grad, null);
    const second = gradOfW();
    assert.equal(w.grad, buf, 'the dropped buffer is reused');
    assert.deepEqual(second, first, 'written afresh, not added onto the last step gradient');
    const u = Array.from(frozenThisStep.data);
    opt.step();
    assert.deepEqual(Array.from(frozenThisStep.data), u, 'no gradient: no update, no weight decay (as torch)');
  });

  it('SGD with momentum and weight decay', () => {
    const p = param([1], [0.5]);
    const opt = new SGD([p], { lr: 0.1, momentum: 0.9, weightDecay: 0.1 });
    opt.step(); // g' = 0.5 + 0.1·1 = 0.6; buf = 0.6; p = 1 − 0.06
    assert.ok(Math.abs(p.data[0] - 0.94) < 1e-6);
    opt.step(); // g' = 0.5 + 0.094 = 0.594; buf = 0.9·0.6 + 0.594 = 1.134; p = 0.94 − 0.1134
    assert.ok(Math.abs(p.data[0] - 0.8266) < 1e-6);
  });

  it('clips the global gradient norm and refuses non-finite gradients', () => {
    const a = param([0, 0], [3, 0], 'a');
    const b = param([0], [4], 'b');
    assert.ok(Math.abs(clipGradNorm([a, b], 1) - 5) < 1e-6);
    assert.ok(Math.abs(gradNorm([a, b]) - 1) < 1e-5);
    const c = param([0], [Number.NaN], 'c');
    assert.throws(() => clipGradNorm([c], 1), /gradient norm is NaN/);
  });

  it('learning-rate schedules: warmup, linear, cosine', () => {
    assert.equal(lrMultiplier(0, { kind: 'constant', warmupSteps: 4 }), 0.25);
    assert.equal(lrMultiplier(10, { kind: 'constant', warmupSteps: 4 }), 1);
    assert.equal(lrMultiplier(2, { kind: 'linear', totalSteps: 4 }), 0.5);
    assert.ok(Math.abs(lrMultiplier(7, { kind: 'cosine', warmupSteps: 2, totalSteps: 12 }) - 0.5) < 1e-12);
    assert.ok(Math.abs(lrMultiplier(12, { kind: 'cosine', totalSteps: 12, minRatio: 0.1 }) - 0.1) < 1e-12);
    assert.throws(() => lrMultiplier(5, { kind: 'cosine' }), /totalSteps/);
  });
});
