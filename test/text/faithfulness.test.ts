/** The faithfulness measures on hand-checked cases: a faithful summary, an unrelated one, a copy, an echo. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bigramSupport, contentSupport, copiedRuns, echo, faithfulness, lcsLength, rougeL } from '../../src/text/faithfulness.js';

const POST =
  'My landlord raised the rent by forty percent this year and still refuses to fix the broken heating in my apartment, so I spent the whole winter wearing two coats indoors.';

describe('faithfulness measures', () => {
  it('LCS of word lists', () => {
    assert.equal(lcsLength(['a', 'b', 'c', 'd'], ['a', 'c', 'd', 'x']), 3);
    assert.equal(lcsLength([], ['a']), 0);
    assert.equal(lcsLength(['x', 'y'], ['y', 'x']), 1);
  });

  it('a faithful summary: its content words come from the post, without copying a long run', () => {
    const s = 'Landlord raised rent forty percent but refuses to fix the heating.';
    // content words: landlord raised rent forty percent refuses fix heating: all in the post
    assert.equal(contentSupport(s, POST), 1);
    assert.ok(rougeL(s, POST) > 0.8);
    assert.equal(copiedRuns(s, POST), 0);
  });

  it('an unrelated text: content words and bigrams not in the post', () => {
    const s = 'Quantum computers factor large integers using qubits.';
    assert.equal(contentSupport(s, POST), 0);
    assert.equal(bigramSupport(s, POST), 0);
    assert.ok(rougeL(s, POST) < 0.2);
  });

  it('a copied sentence: every bigram and every word in an 8-word run from the post', () => {
    const s = 'still refuses to fix the broken heating in my apartment';
    assert.equal(bigramSupport(s, POST), 1);
    assert.equal(copiedRuns(s, POST), 1);
    assert.equal(copiedRuns(s, POST, 20), 0);
    const f = faithfulness(s, POST);
    assert.equal(f.copied_8, 1);
    assert.equal(f.rouge_l, 1);
  });

  it('echo: 1 for the same text, 0 for disjoint words, in between for a partial repeat', () => {
    assert.equal(echo('the cat sat', 'The cat sat.'), 1);
    assert.equal(echo('alpha beta', 'gamma delta'), 0);
    const e = echo('the rent went up a lot', 'the rent went up and the heating broke');
    assert.ok(e > 0.4 && e < 0.8, String(e));
    assert.equal(echo('', 'x'), 0);
  });

  it('empty summaries score 0, not NaN', () => {
    for (const v of Object.values(faithfulness('', POST))) assert.equal(v, 0);
  });
});
