/** Python repr of generated values, checked against what python3 itself prints. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runPythonBatch } from '../../src/data/python.js';
import { type PyValue, pyRepr, tuple } from '../../src/data/pyvalue.js';

const CASES: [PyValue, string][] = [
  [null, 'None'],
  [true, 'True'],
  [-3, '-3'],
  ['plain', "'plain'"],
  ["it's", '"it\'s"'],
  ['both \' and "', `'both \\' and "'`],
  ['tab\tnew\nline\\', "'tab\\tnew\\nline\\\\'"],
  [[1, [2, 'x'], []], "[1, [2, 'x'], []]"],
  [tuple(1), '(1,)'],
  [tuple([1], []), '([1], [])'],
  [
    new Map<string | number, PyValue>([
      ['a', 1],
      [2, ['b']],
    ]),
    "{'a': 1, 2: ['b']}",
  ],
  [new Map(), '{}'],
];

describe('pyRepr', () => {
  it('writes the literals expected', () => {
    for (const [value, text] of CASES) assert.equal(pyRepr(value), text);
  });

  it('agrees with python3: repr(eval(text)) == text', () => {
    const program = CASES.map(([, text]) => `assert repr(${text}) == ${JSON.stringify(text)}, repr(${text})`).join('\n');
    assert.deepEqual(runPythonBatch([program]), [null]);
  });

  it('refuses non-integers', () => {
    assert.throws(() => pyRepr(0.5), RangeError);
  });
});
