/** Every differentiable op against central finite differences, in float64 on the reference backend. */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { attention, prefixSharedAttention } from '../../src/engine/attention.js';
import { crossEntropy, embedding, layernorm, rmsnorm, rope, ropeTables, softmax, swiglu, tokenLogprobs } from '../../src/engine/nn.js';
import * as ops from '../../src/engine/ops.js';
import { gradError, prng, randTensor, useFloat64Reference } from '../helpers/gradcheck.js';

const TOL = 1e-6;

describe('op gradients vs finite differences (float64)', () => {
  before(useFloat64Reference);
  const r = prng(1);

  it('add / sub / mul / div with broadcasting', () => {
    const a = randTensor([2, 3, 4], r);
    const b = randTensor([3, 1], r);
    const c = randTensor([4], r, 0.5, 1.5);
    for (const f of [ops.add, ops.sub, ops.mul]) assert.ok(gradError([a, b], () => f(a, b)) < TOL);
    assert.ok(gradError([a, c], () => ops.div(a, c)) < TOL);
    assert.ok(gradError([c, a], () => ops.div(c, a)) < 1e-4); // a near 0 → large curvature
  });

  it('unary ops', () => {
    const x = randTensor([3, 5], r, -2, 2);
    for (const f of [ops.gelu, ops.silu, ops.tanh, ops.exp, ops.square]) assert.ok(gradError([x], () => f(x)) < TOL, f.name);
    const pos = randTensor([7], r, 0.5, 2);
    assert.ok(gradError([pos], () => ops.log(pos)) < TOL);
    assert.ok(gradError([pos], () => ops.unary('sqrt', pos)) < TOL);
    assert.ok(gradError([x], () => ops.scale(x, -2.5)) < TOL);
  });

  it('matmul: shared weight, transposed weight, batched', () => {
    const a = randTensor([2, 3, 4], r);
    const w = randTensor([4, 5], r);
    const wt = randTensor([5, 4], r);
    const bb = randTensor([2, 4, 5], r);
    assert.ok(gradError([a, w], () => ops.matmul(a, w)) < TOL);
    assert.ok(gradError([a, wt], () => ops.matmul(a, wt, true)) < TOL);
    assert.ok(gradError([a, bb], () => ops.matmul(a, bb)) < TOL);
    const bias = randTensor([5], r);
    assert.ok(gradError([a, wt, bias], () => ops.linear(a, wt, bias)) < TOL);
  });

  it('reductions and shape ops', () => {
    const x = randTensor([2, 3, 4], r);
    assert.ok(gradError([x], () => ops.sum(x)) < TOL);
    assert.ok(gradError([x], () => ops.mean(x)) < TOL);
    for (const ax of [0, 1, 2]) assert.ok(gradError([x], () => ops.sumAxis(x, ax)) < TOL);
    assert.ok(gradError([x], () => ops.reshape(x, [6, -1])) < TOL);
    assert.ok(gradError([x], () => ops.sliceLast(x, 1, 2)) < TOL);
    const y = randTensor([2, 3, 2], r);
    assert.ok(gradError([x, y], () => ops.concatLast([x, y])) < TOL);
  });

  it('embedding (scatter-add with repeated ids)', () => {
    const W = randTensor([6, 3], r);
    const ids = Int32Array.from([1, 4, 1, 0, 5, 1]);
    assert.ok(gradError([W], () => embedding(W, ids, [2, 3])) < TOL);
  });

  it('rmsnorm and layernorm', () => {
    const x = randTensor([4, 7], r);
    const w = randTensor([7], r, 0.5, 1.5);
    const b = randTensor([7], r);
    assert.ok(gradError([x, w], () => rmsnorm(x, w, 1e-5)) < TOL);
    assert.ok(gradError([x, w, b], () => layernorm(x, w, b, 1e-5)) < TOL);
  });

  it('rope', () => {
    const x = randTensor([2, 3, 2, 4], r);
    const tables = ropeTables(4, 16, 10000);
    const pos = Int32Array.from([0, 1, 2, 5, 6, 9]);
    assert.ok(gradError([x], () => rope(x, pos, tables)) < TOL);
  });

  it('swiglu and softmax', () => {
    const g = randTensor([3, 5], r, -2, 2);
    const u = randTensor([3, 5], r);
    assert.ok(gradError([g, u], () => swiglu(g, u)) < TOL);
    assert.ok(gradError([g], () => softmax(g)) < TOL);
  });

  it('token log-probs and cross-entropy, with ignored rows', () => {
    const logits = randTensor([2, 3, 6], r, -3, 3);
    const targets = Int32Array.from([1, 5, -1, 0, 2, 2]);
    assert.ok(gradError([logits], () => tokenLogprobs(logits, targets)) < TOL);
    assert.ok(gradError([logits], () => crossEntropy(logits, targets)) < TOL);
  });

  it('attention: causal, grouped-query, key padding, KV-cache window', () => {
    const q = randTensor([2, 4, 4, 3], r);
    const k = randTensor([2, 4, 2, 3], r);
    const v = randTensor([2, 4, 2, 3], r);
    assert.ok(gradError([q, k, v], () => attention(q, k, v, { causal: true })) < TOL);
    const mask = Uint8Array.from([0, 1, 1, 1, 1, 1, 0, 1]);
    assert.ok(gradError([q, k, v], () => attention(q, k, v, { causal: true, keyMask: mask })) < TOL);
    const q1 = randTensor([2, 1, 4, 3], r);
    assert.ok(gradError([q1, k, v], () => attention(q1, k, v, { causal: true, kvLen: 3 })) < TOL);
  });

  it('attention over a prompt shared by continuations (packed: prompt 3 rows, 2 × 2 continuation rows, one padded)', () => {
    const q = randTensor([1, 7, 4, 3], r);
    const k = randTensor([1, 7, 2, 3], r);
    const v = randTensor([1, 7, 2, 3], r);
    const layout = { promptLen: 3, branches: 2, keyMask: Uint8Array.from([1, 1, 1, 0]) };
    assert.ok(gradError([q, k, v], () => prefixSharedAttention(q, k, v, layout)) < TOL);
    assert.ok(gradError([q, k, v], () => prefixSharedAttention(q, k, v, { promptLen: 7, branches: 0 })) < TOL);
  });

  it('linear with a low-rank update (LoRA): x, W, bias, A and B', () => {
    const x = randTensor([2, 3, 5], r);
    const W = randTensor([4, 5], r);
    const bias = randTensor([4], r);
    const A = randTensor([2, 5], r);
    const B = randTensor([4, 2], r);
    assert.ok(gradError([x, W, bias, A, B], () => ops.linearLowRank(x, W, bias, A, B, 1.5)) < TOL);
    assert.ok(gradError([x, A, B], () => ops.linearLowRank(x, W, null, A, B, -0.5)) < TOL);
  });
});

describe('gradient buffers handed down and reused during backward', () => {
  before(useFloat64Reference);
  const r = prng(5);

  it('a tensor used twice by one op or along two paths gets the sum of both gradients', () => {
    const x = randTensor([3, 4], r);
    const sq = randTensor([4, 4], r);
    assert.ok(gradError([x], () => ops.add(x, x)) < TOL);
    assert.ok(gradError([x], () => ops.sub(x, ops.scale(x, 0.5))) < TOL);
    assert.ok(gradError([x], () => ops.mul(x, x)) < TOL);
    assert.ok(gradError([sq], () => ops.matmul(sq, sq)) < TOL);
    assert.ok(gradError([sq], () => ops.matmul(sq, sq, true)) < TOL);
    // A residual stream: each block's output gradient is handed to the input it adds onto.
    const w = randTensor([4, 4], r);
    const bias = randTensor([4], r);
    const residual = () => {
      let h = x;
      for (let i = 0; i < 3; i++) h = ops.add(h, ops.gelu(ops.linear(ops.reshape(h, [3, 4]), w, bias)));
      return ops.add(h, ops.reshape(ops.sumAxis(h, 0), [1, 4]));
    };
    assert.ok(gradError([x, w, bias], residual) < TOL);
  });
});

describe('clamp and minimum gradients', () => {
  before(useFloat64Reference);
  const r = prng(3);
  it('clamp passes gradients inside the interval only; minimum routes to the smaller', () => {
    const x = randTensor([9], r, -2, 2);
    assert.ok(gradError([x], () => ops.clamp(x, -0.7, 0.9)) < TOL);
    const a = randTensor([9], r);
    const b = randTensor([9], r);
    assert.ok(gradError([a, b], () => ops.minimum(a, b)) < TOL);
  });
});
