/**
 * The gated writing rewards, hand-computed at every level and band edge. Texts are built from
 * words "w1", "w2", … (no stopwords, no transition substrings) and right-padded with spaces to an
 * exact character length, so token counts, unique words, Jaccard and length ratios are set
 * independently.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  arxivLevels,
  arxivReward,
  normalisedMetrics,
  tldrLevels,
  tldrReward,
  ungated,
  type WritingComponents,
  type WritingReward,
} from '../../../src/envs/writing/rewards.js';

const ws = (from: number, n: number) => Array.from({ length: n }, (_, i) => `w${from + i}`);

/** Words joined by single spaces, padded with spaces to exactly `chars` characters. */
function text(list: readonly string[], chars: number): string {
  const s = list.join(' ');
  assert.ok(s.length <= chars, `${s.length} > ${chars}`);
  return s + ' '.repeat(chars - s.length);
}

const near = (actual: number, expected: number, what = '') => assert.ok(Math.abs(actual - expected) < 1e-12, `${what}: ${actual} ≠ ${expected}`);

function expectReward(r: WritingReward, total: number, c: WritingComponents) {
  near(r.reward, total, 'reward');
  for (const k of Object.keys(c) as (keyof WritingComponents)[]) near(r.components[k], c[k], k);
}

const ZERO: WritingComponents = { structure: 0, coordination: 0, vocabulary: 0, transition: 0, jaccard: 0 };
const ALL_12 = 'furthermore for example indeed therefore however meanwhile in summary likewise unless'.split(' ');

describe('tldrReward', () => {
  // c1: 10 words, 100 chars. c2: 20 words sharing w1 (J = 1/29 ≥ 0.03), 200 chars (r = 2, u = 2).
  const c1 = text(ws(1, 10), 100);
  const c2Words = ['w1', ...ws(101, 19)];
  const c2 = (chars: number) => text(c2Words, chars);

  it('all levels pass, no transition words: 0.5 + 1 + 0.5 + 0 + 0.6 = 2.6', () => {
    expectReward(tldrReward(c1, c2(200)), 2.6, { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0, jaccard: 0.6 });
  });

  it('maximum 2.98: all 12 transition categories give scale 0.95, transition 0.38', () => {
    // 1 shared + 8 new + 11 phrase words = 20 unique (stopwords "for", "in" included); J = 1/27.
    const r = tldrReward(c1, text(['w1', ...ws(101, 8), ...ALL_12], 200));
    expectReward(r, 2.98, { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0.38, jaccard: 0.6 });
  });

  describe('L1: both texts 8–256 whitespace tokens, else total 0', () => {
    it('7 tokens fail, 8 pass', () => {
      expectReward(tldrReward(text(ws(1, 7), 100), c2(200)), 0, ZERO);
      assert.equal(tldrReward(text(ws(1, 8), 100), c2(200)).components.structure, 0.5);
      expectReward(tldrReward(c1, text(ws(101, 7), 200)), 0, ZERO);
    });

    it('256 tokens pass, 257 fail', () => {
      assert.equal(tldrReward(ws(1, 256).join(' '), c2(200)).components.structure, 0.5);
      expectReward(tldrReward(ws(1, 257).join(' '), c2(200)), 0, ZERO);
    });

    it('empty texts score 0', () => {
      expectReward(tldrReward('', ''), 0, ZERO);
      expectReward(tldrReward(c1, ''), 0, ZERO);
    });
  });

  describe('L2: r = len(c2) / len(c1) in characters', () => {
    const cases: [number, number | null][] = [
      [109, null], // r 1.09: stop after L1
      [110, 0], // r 1.1: L2 = 0 but the reward goes on to L3
      [130, 0.4], // (1.3 − 1.1) / 0.5: the code divides by 0.5 (its comment says 0.4)
      [135, 0.5],
      [160, 1],
      [320, 1],
      [410, 0.5], // 1 − (4.1 − 3.2) / 1.8
      [500, 0], // r 5.0: L2 = 0, goes on
      [501, null],
    ];
    for (const [chars, l2] of cases) {
      it(`r = ${chars / 100}: L2 ${l2 === null ? 'fails' : `= ${l2}`}`, () => {
        const r = tldrReward(c1, c2(chars));
        if (l2 === null) expectReward(r, 0.5, { ...ZERO, structure: 0.5 });
        else expectReward(r, 0.5 + l2 + 0.5 + 0.6, { structure: 0.5, coordination: l2, vocabulary: 0.5, transition: 0, jaccard: 0.6 });
      });
    }

    it('length counts code points: 70 emoji make 100 characters, not 170', () => {
      const withEmoji = ws(1, 10).join(' ') + '😀'.repeat(70);
      assert.equal(withEmoji.length, 170);
      assert.equal(tldrReward(withEmoji, c2(200)).components.coordination, 1);
    });
  });

  describe('L3: u = unique(c2) / unique(c1), stopwords included', () => {
    // c2 = w1 + (k − 1) new words: J = 1/(9 + k), under the 0.03 cap only at k = 40.
    const cases: [number, number | null][] = [
      [12, null], // u 1.2: stop
      [13, 0], // u 1.3: L3 = 0, goes on to L4
      [15, (0.2 / 0.7) * 0.5],
      [20, 0.5],
      [40, 0.5], // u ≥ 2 has no upper band
    ];
    for (const [k, l3] of cases) {
      it(`u = ${k / 10}: L3 ${l3 === null ? 'fails' : `≈ ${l3.toFixed(4)}`}`, () => {
        const r = tldrReward(c1, text(['w1', ...ws(101, k - 1)], 250));
        const l2 = 1; // r = 2.5
        const j = k === 40 ? (0.6 * (1 / 49)) / 0.03 : 0.6;
        if (l3 === null) expectReward(r, 1.5, { ...ZERO, structure: 0.5, coordination: l2 });
        else expectReward(r, 0.5 + l2 + l3 + j, { structure: 0.5, coordination: l2, vocabulary: l3, transition: 0, jaccard: j });
      });
    }

    it('stopwords count as unique words: 13 content + 7 stopwords = 20 gives u = 2, not 1.3', () => {
      const r = tldrReward(c1, text(['w1', ...ws(101, 12), 'the', 'of', 'and', 'a', 'to', 'in', 'is'], 200));
      expectReward(r, 2.6, { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0, jaccard: 0.6 });
    });

    it('no words in c1 (8 punctuation tokens): stop at L3', () => {
      const dots = text(Array(8).fill('.'), 100);
      expectReward(tldrReward(dots, c2(200)), 1.5, { ...ZERO, structure: 0.5, coordination: 1 });
    });
  });

  describe('L4: 0.4 · transition scale (c2 only) + 0.6 · min(J, 0.03) / 0.03', () => {
    it('Jaccard excludes stopwords: sharing only "the" gives J = 0', () => {
      const r = tldrReward(text([...ws(1, 9), 'the'], 100), text([...ws(101, 19), 'the'], 200));
      expectReward(r, 2, { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0, jaccard: 0 });
    });

    it('J below the cap scales linearly: J = 1/59 gives 0.6 · (1/59) / 0.03', () => {
      const r = tldrReward(text(ws(1, 20), 100), text(['w1', ...ws(101, 39)], 200));
      near(r.components.jaccard, (0.6 * (1 / 59)) / 0.03);
    });

    it('transitions count in c2 only, and inside words ("reason" = as + so: 2 categories)', () => {
      const r = tldrReward(text([...ws(1, 9), 'however'], 100), text(['w1', ...ws(101, 18), 'reason'], 200));
      expectReward(r, 2.78, { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0.4 * 0.45, jaccard: 0.6 });
      assert.equal(tldrLevels(text([...ws(1, 9), 'however'], 100), c2(200)).transition, 0);
    });
  });
});

describe('arxivReward', () => {
  // c1: 130 words, 1000 chars. c2: 130 words, 60 shared (J = 60/200 = 0.3 ≥ 0.23), 1100 chars.
  const c1 = text(ws(1, 130), 1000);
  const c2Words = [...ws(1, 60), ...ws(1001, 70)];
  const c2 = (chars: number) => text(c2Words, chars);

  it('paper band: r = 1.1 is optimal: 0.5 + 1 + 0.5 + 0 + 0.6 = 2.6', () => {
    expectReward(arxivReward(c1, c2(1100), { version: 'paper' }), 2.6, { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0, jaccard: 0.6 });
  });

  it('latest band: r = 1.1 is on the lower ramp, (1.1 − 0.8) / 0.5 = 0.6', () => {
    expectReward(arxivReward(c1, c2(1100), { version: 'latest' }), 2.2, { structure: 0.5, coordination: 0.6, vocabulary: 0.5, transition: 0, jaccard: 0.6 });
  });

  it('L1: 128–256 tokens each', () => {
    const short = text(ws(1, 127), 1000);
    expectReward(arxivReward(short, c2(1100), { version: 'paper' }), 0, ZERO);
    assert.equal(arxivReward(text(ws(1, 128), 1000), c2(1100), { version: 'paper' }).components.structure, 0.5);
    assert.equal(arxivReward(ws(1, 256).join(' '), c2(1100), { version: 'paper' }).components.structure, 0.5);
    expectReward(arxivReward(ws(1, 257).join(' '), c2(1100), { version: 'paper' }), 0, ZERO);
  });

  const l2Cases: Record<'paper' | 'latest', [number, number | null][]> = {
    paper: [
      [790, null],
      [800, 0],
      [900, 0.5],
      [1000, 1],
      [1300, 1],
      [1400, 0.5],
      [1500, 0],
      [1510, null],
    ],
    latest: [
      [790, null],
      [800, 0],
      [1000, 0.4],
      [1050, 0.5],
      [1300, 1],
      [1600, 1],
      [1800, 0.5],
      [2000, 0],
      [2010, null],
    ],
  };
  for (const version of ['paper', 'latest'] as const) {
    describe(`L2 bands (${version})`, () => {
      for (const [chars, l2] of l2Cases[version]) {
        it(`r = ${chars / 1000}: L2 ${l2 === null ? 'fails' : `= ${l2}`}`, () => {
          const r = arxivReward(c1, c2(chars), { version });
          if (l2 === null) expectReward(r, 0.5, { ...ZERO, structure: 0.5 });
          else expectReward(r, 0.5 + l2 + 0.5 + 0.6, { structure: 0.5, coordination: l2, vocabulary: 0.5, transition: 0, jaccard: 0.6 });
        });
      }
    });
  }

  describe('L3 bands (both versions)', () => {
    // c2 = w1..wk (k unique) topped up to 128 tokens with repeats of w1; 1100 chars (paper L2 = 1).
    const cases: [number, number | null][] = [
      [63, null],
      [65, 0], // u 0.5: 0, goes on
      [78, 0.25], // u 0.6: 0.5 · 0.1 / 0.2
      [91, 0.5], // u 0.7
      [169, 0.5], // u 1.3
      [195, 0.25], // u 1.5: 0.5 · (1 − 0.2 / 0.4)
      [221, 0], // u 1.7: 0, goes on
      [223, null],
    ];
    for (const [k, l3] of cases) {
      it(`u = ${(k / 130).toFixed(3)}: L3 ${l3 === null ? 'fails' : `= ${l3}`}`, () => {
        const words = [...ws(1, k), ...Array(Math.max(0, 128 - k)).fill('w1')];
        const r = arxivReward(c1, text(words, 1100), { version: 'paper' });
        if (l3 === null) expectReward(r, 1.5, { ...ZERO, structure: 0.5, coordination: 1 });
        else expectReward(r, 0.5 + 1 + l3 + 0.6, { structure: 0.5, coordination: 1, vocabulary: l3, transition: 0, jaccard: 0.6 });
      });
    }
  });

  it('L4: Jaccard capped at 0.23 (J = 30/230 gives 0.6 · J / 0.23)', () => {
    const r = arxivReward(c1, text([...ws(1, 30), ...ws(1001, 100)], 1100), { version: 'paper' });
    near(r.components.jaccard, (0.6 * (30 / 230)) / 0.23);
  });

  it('L4: transitions are searched in c1 + c2 with no separator ("he" + "nce" = "hence")', () => {
    const a = [...ws(1, 129), 'he'];
    const b = ['nce', ...ws(1001, 129)];
    near(arxivLevels(text(a, 1000).trimEnd(), text(b, 1100), { version: 'paper' }).transition, 0.4 * 0.4);
    assert.equal(arxivLevels(`${a.join(' ')} `, text(b, 1100), { version: 'paper' }).transition, 0);
    // Each text alone is free of transition words, so TLDR (c2 only) finds none.
    assert.equal(tldrLevels(a.join(' '), b.join(' ')).transition, 0);
  });
});

describe('gated vs ungated', () => {
  it('ungated scores every level independently, as the authors’ loggers do', () => {
    const c1 = text(ws(1, 10), 100);
    const c2 = text(['w1', ...ws(101, 19)], 109); // r 1.09: gated reward stops at L1
    const levels = tldrLevels(c1, c2);
    assert.equal(levels.coordination, null);
    near(tldrReward(c1, c2).reward, 0.5);
    expectReward(ungated(levels), 0.5 + 0 + 0.5 + 0.6, { structure: 0.5, coordination: 0, vocabulary: 0.5, transition: 0, jaccard: 0.6 });
  });
});

describe('normalisedMetrics (paper plots, %)', () => {
  it('structure = (L1+L2+L3)/2, coherence = transition/0.4, consistency = jaccard/0.6, return = total/3', () => {
    const a = { reward: 2.6, components: { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0, jaccard: 0.6 } };
    const b = { reward: 1.0, components: { structure: 0.5, coordination: 0.5, vocabulary: 0, transition: 0, jaccard: 0 } };
    const c = { reward: 2.98, components: { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0.38, jaccard: 0.6 } };
    const m = normalisedMetrics([a, b, c]);
    near(m.structure, (100 * ((2 + 1 + 2) / 3)) / 2);
    near(m.coherence, (100 * (0.38 / 3)) / 0.4);
    near(m.consistency, (100 * (1.2 / 3)) / 0.6);
    near(m.return, (100 * ((2.6 + 1 + 2.98) / 3)) / 3);
    assert.deepEqual(normalisedMetrics([]), { structure: 0, coherence: 0, consistency: 0, return: 0 });
  });
});
