import assert from 'node:assert/strict';
import { test } from 'node:test';
import { extractAsserts } from '../../src/sandbox/extract-asserts.js';

const TEST_SOURCE = [
  'METADATA = {}',
  '',
  '',
  'def check(candidate):',
  '    assert candidate(1) == 2',
  '    assert candidate(1) == 2',
  '    assert   candidate(2) == 3, "message"',
  '    assert True, "This prints if this assert fails"',
  '    assert(candidate(3) == 4)',
  '    x = candidate(5)',
  '    for n in range(3):',
  '        assert candidate(n) == n + 1',
  '    assert candidate([1,',
  '                      2]) == 3',
  '    assert abs(candidate_helper(1.0) - 2.0) < 1e-6',
  '',
  '',
  'def other(candidate):',
  '    assert candidate(9) == 9',
].join('\n');

test('keeps single-line asserts of check() that mention candidate, deduplicated and renamed', () => {
  assert.deepEqual(extractAsserts(TEST_SOURCE, 'inc'), [
    'assert inc(1) == 2',
    'assert   inc(2) == 3, "message"',
    'assert inc(n) == n + 1', // the loop variable is lost: fails with NameError when run
    'assert inc([1,', // only the first line of a multi-line assert
    'assert abs(inc_helper(1.0) - 2.0) < 1e-6', // plain string replace also renames identifiers
  ]);
});

test('needs whitespace after assert and stops at the next top-level def', () => {
  const asserts = extractAsserts(TEST_SOURCE, 'inc');
  assert.ok(!asserts.some((a) => a.startsWith('assert(')));
  assert.ok(!asserts.includes('assert inc(9) == 9'));
});

test('strips Python whitespace (\\x1c-\\x1f, \\x85) around lines but not \\ufeff', () => {
  const source = 'def check(candidate):\n\x1c\x85assert candidate(1) == 1\x1f\n\ufeffassert candidate(2) == 2';
  assert.deepEqual(extractAsserts(source, 'f'), ['assert f(1) == 1']);
});

test('returns nothing without a check(candidate) function, test source or entry point', () => {
  assert.deepEqual(extractAsserts('def check(c):\n    assert c(1) == 1', 'f'), []);
  assert.deepEqual(extractAsserts('', 'f'), []);
  assert.deepEqual(extractAsserts(TEST_SOURCE, ''), []);
});
