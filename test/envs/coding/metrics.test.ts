/** The coding eval table: normalised components and unbiased pass@k, hand-computed. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { codingMetrics, passAtKMetrics } from '../../../src/envs/coding/metrics.js';
import type { EpisodeResult } from '../../../src/envs/environment.js';

const episode = (index: number, components: Record<string, number>, extra: Partial<EpisodeResult> = {}): EpisodeResult => ({
  index,
  completions: [],
  reward: 0,
  components,
  responseSeconds: 0,
  outputTokens: 0,
  ...extra,
});
const full = { structure: 1, syntax: 0.5, tests: 1, cooperation: 1.5, penalty: 0 };
const broken = { structure: 0.4, syntax: 0, tests: 0, cooperation: 0, penalty: 0 };
const round = (m: Record<string, number>) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Math.round(v * 1e6) / 1e6]));

it('components in % of their maxima; return from the raw component sum; time and tokens per episode', () => {
  const m = codingMetrics([
    episode(0, full, { reward: -99, responseSeconds: 2, outputTokens: 10 }),
    episode(1, broken, { responseSeconds: 4, outputTokens: 30 }),
  ]);
  assert.deepEqual(round(m), { structure: 70, syntax: 50, tests: 50, cooperation: 50, return: 55, 'pass@1': 50, response_s: 3, output_tokens: 20 });
});

it('the penalty lowers return only', () => {
  const m = codingMetrics([episode(0, { ...full, penalty: -0.5 })]);
  assert.equal(m.cooperation, 100);
  assert.equal(m.return, 87.5);
});

it('unbiased pass@k per item, averaged: n = 5 with c = 2 and c = 0', () => {
  const eps = [...[1, 1, 0.5, 0, 0].map((t) => episode(0, { tests: t })), ...[0.5, 0, 0, 0, 0].map((t) => episode(1, { tests: t }))];
  // item 0: pass@1 = 2/5, pass@3 = 1 - C(3,3)/C(5,3) = 0.9, pass@5 = 1; item 1: all 0. k = 10 > n is left out.
  assert.deepEqual(round(passAtKMetrics(eps)), { 'pass@1': 20, 'pass@3': 45, 'pass@5': 50 });
});

it('k is limited by the item with the fewest samples', () => {
  const eps = [0, 0, 0].map(() => episode(0, { tests: 1 })).concat([episode(1, { tests: 1 })]);
  assert.deepEqual(Object.keys(passAtKMetrics(eps)), ['pass@1']);
  assert.deepEqual(passAtKMetrics([]), {});
});
