/** Hand-computed cases of docs/algorithms.md "The update, equation by equation": advantages of each mode, returns, cross credit, KL shaping. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { advantages, agentReturns, jointActionsPerNode, jointIndices, jointReturns, klK3, shapeWithKl, treeNodeTurns } from '../../src/rl/advantage.js';

const close = (a: number[], b: number[], tol = 1e-9) => {
  assert.equal(a.length, b.length);
  for (const [i, x] of a.entries()) assert.ok(Math.abs(x - b[i]) < tol, `${a} vs ${b}`);
};

describe('advantages', () => {
  const R = [1, 0, 0, 1];
  it('mean baseline, then standardised', () => {
    close(advantages(R, 'mean', false), [0.5, -0.5, -0.5, 0.5]);
    close(advantages(R, 'mean', true), [1, -1, -1, 1]);
  });
  it('rloo, max and raw without normalisation', () => {
    close(advantages(R, 'rloo', false), [2 / 3, -2 / 3, -2 / 3, 2 / 3]);
    close(advantages(R, 'max', false), [0, -1, -1, 0]);
    close(advantages(R, 'raw', false), [1, 0, 0, 1]);
  });
  it('with normalisation all four baselines coincide (the documented collapse)', () => {
    const R2 = [0.3, 2.0, -1.0, 0.7];
    const ref = advantages(R2, 'mean', true);
    for (const m of ['raw', 'max', 'rloo'] as const) close(advantages(R2, m, true), ref);
  });
  it('constant returns give zero advantages (std floor 1e-6, no NaN)', () => {
    close(advantages([2, 2, 2], 'mean', true), [0, 0, 0]);
  });
});

describe('returns and credit', () => {
  it('two-turn aligned: R_root = r + mean(child rewards)', () => {
    close(
      jointReturns(
        [1, 0],
        [
          [0, 1],
          [1, 1],
        ],
        1,
      ),
      [1 + 0.5, 0 + 1],
    );
    close(jointReturns([1, 0], [[0, 1], null], 0.5), [1 + 0.25, 0]);
  });
  it('cross N=2, G=2: agent-0 gets rows, agent-1 columns (sum = reference, mean = ours)', () => {
    const idx = jointIndices('cross', 2, 2);
    assert.deepEqual(idx, [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    const q = [1, 2, 3, 4]; // q00 q01 q10 q11
    close(agentReturns(q, idx, 0, 2, 'sum'), [1 + 2, 3 + 4]);
    close(agentReturns(q, idx, 1, 2, 'sum'), [1 + 3, 2 + 4]);
    close(agentReturns(q, idx, 0, 2, 'mean'), [1.5, 3.5]);
    close(agentReturns(q, idx, 1, 2, 'mean'), [2, 3]);
  });
  it('K, the joint actions per node, is the length of the index tuples in both modes', () => {
    for (const [mode, N, G, K] of [
      ['aligned', 3, 4, 4],
      ['cross', 3, 4, 64],
      ['cross', 1, 5, 5],
    ] as const) {
      assert.equal(jointActionsPerNode(mode, N, G), K);
      assert.equal(jointIndices(mode, N, G).length, K);
    }
  });
  it("a full tree lists its nodes' turns depth-first, Σ K^t of them", () => {
    assert.deepEqual(treeNodeTurns(2, 3), [0, 1, 2, 2, 1, 2, 2]);
    assert.deepEqual(treeNodeTurns(5, 1), [0]);
    assert.equal(treeNodeTurns(4, 3).length, 1 + 4 + 16);
  });
  it('aligned credit is the joint return itself', () => {
    close(agentReturns([5, 6, 7], jointIndices('aligned', 3, 3), 2, 3, 'mean'), [5, 6, 7]);
  });
});

describe('reference KL', () => {
  it('returns [1, 2] with KLs [0.2, 0.4] and coef 0.5 give [0.9, 1.8]', () => {
    close(shapeWithKl([1, 2], [0.2, 0.4], 0.5), [0.9, 1.8]);
    close(shapeWithKl([1, 2], null, 0.5), [1, 2]);
  });
  it('k3 is 0 for identical distributions and positive otherwise', () => {
    assert.equal(klK3([-1, -2], [-1, -2]), 0);
    assert.ok(klK3([-1, -2], [-1.5, -1]) > 0);
  });
});
