/** Text statistics with the Python semantics of the authors' reward code. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  charLength,
  jaccard,
  pySplit,
  pyStrip,
  STOPWORDS,
  TRANSITION_CATEGORIES,
  TRANSITION_WORDS,
  tokenCount,
  transitionCategories,
  transitionScale,
  uniqueWordCount,
  wordSet,
  words,
} from '../../../src/envs/writing/text-stats.js';

describe('whitespace tokens (str.split)', () => {
  it('splits on every character Python calls whitespace, and only those', () => {
    // \x1c-\x1f, \x85, NBSP, ideographic space: Python splits; U+200B and U+FEFF it does not.
    const text = 'a\tb\nc\x0bd\x0ce\rf\x1cg\x1dh\x1ei\x1fj k\x85l\xa0m\u1680n\u2000o\u200ap\u2028q\u2029r\u202fs\u205ft\u3000u';
    assert.equal(tokenCount(text), 21);
    assert.deepEqual(pySplit('x\u200by\ufeffz'), ['x\u200by\ufeffz']);
  });

  it('empty and blank texts count 0; runs and ends of whitespace make no empty tokens', () => {
    assert.equal(tokenCount(''), 0);
    assert.equal(tokenCount(' \n\t\u3000'), 0);
    assert.deepEqual(pySplit('  one  two\n\nthree '), ['one', 'two', 'three']);
  });

  it('strip removes Python whitespace at both ends only', () => {
    assert.equal(pyStrip('\x85\u3000 a b \x1f\n'), 'a b');
    assert.equal(pyStrip('\ufeffa'), '\ufeffa');
  });
});

describe('lengths and words', () => {
  it('length counts code points: an emoji is 1, not 2', () => {
    assert.equal(charLength('😀'), 1);
    assert.equal('😀'.length, 2);
    assert.equal(charLength('ab😀c👍🏽'), 6);
  });

  it('words are lowercased maximal runs of letters, digits and underscore (Unicode-aware \\w)', () => {
    assert.deepEqual(words("Don't STOP-me_now, Café 42 naïve ΣΟΦΙΑ 日本語 x²"), ['don', 't', 'stop', 'me_now', 'café', '42', 'naïve', 'σοφια', '日本語', 'x²']);
    // A combining accent (category Mn) is not \w in Python: "e\u0301" splits the word.
    assert.deepEqual(words('cafe\u0301s'), ['cafe', 's']);
  });

  it('unique words keep stopwords; word sets drop them unless asked', () => {
    assert.equal(uniqueWordCount('The cat and the dog'), 4);
    assert.deepEqual([...wordSet('The cat and the dog')], ['cat', 'dog']);
    assert.deepEqual([...wordSet('The cat', { keepStopwords: true })], ['the', 'cat']);
  });
});

describe('Jaccard similarity (stopwords excluded)', () => {
  it('is |A∩B| / |A∪B| over content words', () => {
    assert.equal(jaccard('red fish blue fish', 'blue whale and red'), 2 / 4);
  });

  it('is 1 when both sets are empty (also when all words are stopwords), 0 when one is', () => {
    assert.equal(jaccard('', ''), 1);
    assert.equal(jaccard('the a of', 'and I'), 1);
    assert.equal(jaccard('whale', ''), 0);
  });

  it('shared stopwords do not count', () => {
    assert.equal(jaccard('the whale', 'the fish'), 0);
  });
});

describe('vendored lists (LLM_Collab_Writing rewards/tldr_rewards.py)', () => {
  it('106 stopwords, including the unusual adjectives', () => {
    assert.equal(STOPWORDS.size, 106);
    for (const w of ['good', 'great', 'bad', 'new', 'old', 'first', 'last', 'left', 'right', 'little', 'long', 'low', 'many', 'much', 'more', 'most']) {
      assert.ok(STOPWORDS.has(w), w);
    }
    assert.ok(!STOPWORDS.has('high'));
  });

  it('12 categories, 279 entries, 230 distinct, per-category counts as in the source', () => {
    const counts = TRANSITION_CATEGORIES.map((c) => TRANSITION_WORDS[c].length);
    assert.deepEqual(counts, [21, 22, 22, 26, 29, 33, 24, 21, 17, 19, 19, 26]);
    const all = Object.values(TRANSITION_WORDS).flat();
    assert.equal(all.length, 279);
    assert.equal(new Set(all).size, 230);
  });
});

describe('transition categories (raw substring rule)', () => {
  it('fires inside ordinary words: "as"/"so" in reason, "had" in shadow, "if" in gift, "but" in butter', () => {
    assert.deepEqual(transitionCategories('reason'), ['cause_effect', 'time']);
    assert.deepEqual(transitionCategories('shadow'), ['condition']);
    assert.deepEqual(transitionCategories('gift'), ['condition']);
    assert.deepEqual(transitionCategories('butter'), ['contrast']);
    assert.deepEqual(transitionCategories('whenever'), ['time']);
  });

  it('is case-insensitive and finds multi-word entries; a phrase can count for several categories', () => {
    assert.deepEqual(transitionCategories('For Example'), ['examples']);
    assert.deepEqual(transitionCategories('In summary'), ['sequence', 'summary']);
    assert.deepEqual(transitionCategories('w1 w2 w10 w101'), []);
  });

  it('all 12 categories', () => {
    assert.equal(transitionCategories('furthermore for example indeed therefore however meanwhile in summary likewise unless').length, 12);
  });

  it('scale: 0, then 0.4 + 0.05 per extra category, 0.95 at 12', () => {
    assert.equal(transitionScale(0), 0);
    assert.equal(transitionScale(1), 0.4);
    assert.ok(Math.abs(transitionScale(2) - 0.45) < 1e-15);
    assert.ok(Math.abs(transitionScale(12) - 0.95) < 1e-15);
    assert.ok(Math.abs(transitionScale(13) - 1.0) < 1e-15);
    assert.equal(transitionScale(30), 1);
  });
});
