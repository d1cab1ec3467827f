import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clauseLength, distinctN, repetitionRate, textFluency, validTokens, wordValidity } from '../../src/text/fluency-measures.js';

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

test('clause length: words per clause separates prose from lists of fragments that word validity passes', () => {
  const prose = 'At dawn a great whale rose beside the ship. The crew did not panic; they watched it swim along the hull for an hour.';
  // What seed 2's agent 0 learned on the writing demo (docs/reward-hacking.md): real words, no loops.
  const fragments = 'the subject, a sort, the justice, the to come, the Government, in which,, such a completely, at a burn.';
  assert.equal(clauseLength(prose), 24 / 3);
  assert.equal(clauseLength(fragments), 19 / 8);
  assert.ok(wordValidity(fragments) > 0.9 && distinctN(fragments, 2) > 0.9, 'the other metrics pass the fragment list');
  // a list of single words, initials, a bullet list, and no words at all
  assert.equal(clauseLength('cats, dogs, birds, fish, cows'), 1);
  assert.equal(clauseLength('F. P. B. L.'), 1);
  assert.equal(clauseLength('- apples\n- pears\n- plums'), 1);
  assert.equal(clauseLength(''), 0);
  assert.equal(clauseLength('... , ; !'), 0);
  // dashes between words split clauses, hyphens inside words do not
  assert.equal(clauseLength('a well-known fact — and a long one'), 4); // well-known counts as two words
  assert.equal(textFluency(prose).clause_length, clauseLength(prose));
});
