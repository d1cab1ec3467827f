import assert from 'node:assert/strict';
import { test } from 'node:test';
import { distinctN, repetitionRate, textFluency, validTokens, wordValidity } from '../../src/text/fluency.js';

const ENGLISH = "My girlfriend and I broke up last week because she didn't like my friends. I'm sad, but it's okay.";

test('plain English scores full word validity, diversity and no repetition', () => {
  assert.equal(wordValidity(ENGLISH), 1);
  assert.equal(distinctN(ENGLISH, 2), 1);
  assert.equal(repetitionRate(ENGLISH), 0);
});

test('degenerate forms score low word validity', () => {
  const cases: [string, string, number][] = [
    ['letter soup (upper-case non-words)', 'EDESE SOSUSSTESESERE AIMOSECEESESE TESESE', 0.05],
    ['strings of initials', 'F. F. P. B. L. W. D. S. D. R. T. S. G. S. D.H. A. L. M. F. S.C. E. A. M. B. S. S.', 0.05],
    ['a run of one word', 'the the the the the the the the the the the the', 0.1],
    ['a loop of a short phrase', 'I am happy I am happy I am happy I am happy I am happy I am happy', 0.25],
    ['glued words', 'thethethe andandand ofofofof', 0],
    ['one letter repeated', 'aaaaaaaaaaaaaaaa bbbbbbbbbbb', 0],
    ['odd casing', 'tHe cAt sAT oN tHE mAT', 0],
    ['digits and symbols only', '1 2 3 4 5 6 ### $$$', 0],
    ['empty', '', 0],
    ['non-Latin letters', 'жжжж шшшш', 0],
  ];
  for (const [name, text, max] of cases) assert.ok(wordValidity(text) <= max, `${name}: ${wordValidity(text)} > ${max}`);
});

test('word validity weighs letters: one nonsense word among real ones costs its share', () => {
  // 'zqxv' is 4 of the 4 + 3 + 3 + 3 = 13 letters
  const v = wordValidity('zqxv the cat sat');
  assert.ok(Math.abs(v - 9 / 13) < 1e-12, String(v));
});

test('contractions, ordinals, decades, capitalised and all-caps real words are valid', () => {
  for (const t of ["don't", "We'll", "it's", "can't", '3rd', '1990s', 'Yesterday', 'HELLO', 'I', 'a']) {
    assert.equal(wordValidity(t), 1, t);
  }
  assert.deepEqual(
    validTokens('A. B. went home').map((x) => x.valid),
    [false, false, true, true],
  );
});

test('distinct-2 and repetition rate', () => {
  assert.equal(distinctN('a b a b a b', 2), 2 / 5);
  assert.equal(distinctN('single', 2), 0);
  assert.equal(repetitionRate('a b c a b c'), 1 / 4);
  assert.equal(repetitionRate('a b'), 0);
  const f = textFluency('the the the the');
  assert.ok(f.distinct_2 < 0.5 && f.repetition > 0.4);
});
