/** The data pipeline's seeded PRNG: reproducible, in range, and a proper shuffle. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Rng, seedFrom } from '../../src/data/rng.js';

describe('Rng', () => {
  it('repeats its stream for a seed and differs across seeds', () => {
    const r1 = new Rng(42);
    const r2 = new Rng(42);
    const xs = Array.from({ length: 100 }, () => r1.next());
    assert.deepEqual(
      Array.from({ length: 100 }, () => r2.next()),
      xs,
    );
    assert.notDeepEqual(
      Array.from({ length: 5 }, () => new Rng(43).next()),
      xs.slice(0, 5),
    );
    assert.ok(xs.every((x) => x >= 0 && x < 1));
  });

  it('draws integers in [lo, hi] covering both ends', () => {
    const r = new Rng(7);
    const seen = new Set(Array.from({ length: 500 }, () => r.int(-2, 2)));
    assert.deepEqual([...seen].sort(), [-1, -2, 0, 1, 2]);
  });

  it('shuffles into a permutation and samples distinct items', () => {
    const r = new Rng(3);
    const items = Array.from({ length: 50 }, (_, i) => i);
    const shuffled = r.shuffle(items.slice());
    assert.notDeepEqual(shuffled, items);
    assert.deepEqual(
      shuffled.slice().sort((a, b) => a - b),
      items,
    );
    assert.equal(new Set(r.sample(items, 10)).size, 10);
  });

  it('derives distinct seeds per label', () => {
    assert.equal(seedFrom(1, 'sotu'), seedFrom(1, 'sotu'));
    assert.notEqual(seedFrom(1, 'sotu'), seedFrom(1, 'brown'));
    assert.notEqual(seedFrom(1, 'sotu'), seedFrom(2, 'sotu'));
  });
});
