/**
 * Decontamination units: function bodies found by indentation and normalized, eval problems read
 * from the repository's eval files, and planted copies of eval problems caught (renamed, reformatted,
 * or quoted in prose) while unrelated text passes.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DecontamIndex, type EvalProblem, readEvalProblems, words } from '../../src/data/decontam.js';
import { normalizeBody, pythonDefs } from '../../src/data/pydefs.js';

const root = join(import.meta.dirname, '../..');
const humaneval = readEvalProblems(join(root, 'data/humaneval/HumanEval.jsonl.gz'), 'humaneval');
const coop = readEvalProblems(join(root, 'data/coding/coop-python.eval.jsonl'), 'coop-python-eval');
const index = new DecontamIndex([...humaneval, ...coop]);

describe('pythonDefs', () => {
  it('finds nested and one-line functions and normalizes their bodies', () => {
    const code = [
      'def outer(xs: list[int],',
      '          k: int) -> int:',
      '    """Docstring',
      '    over two lines."""',
      '    # a comment',
      '    def inner(v):  return v  *  2',
      '',
      '    return sum(inner(v)   for v in xs)',
      'x = 1',
    ].join('\n');
    const defs = pythonDefs(code);
    assert.deepEqual(
      defs.map((d) => [d.name, d.line]),
      [
        ['outer', 0],
        ['inner', 5],
      ],
    );
    assert.equal(defs[0].body, 'def inner(v): return v * 2\nreturn sum(inner(v) for v in xs)');
    assert.equal(defs[1].body, 'return v * 2');
  });

  it('ignores docstrings, comments, blank lines and spacing, not names or constants', () => {
    const a = normalizeBody(["    '''Doc.'''", '    total = 0', '', '    for v in xs:  # loop', '        total += v', '    return total']);
    const b = normalizeBody(['  total = 0', '  for v in xs:', '      total += v', '  # done', '  return total']);
    assert.equal(a, b);
    assert.notEqual(a, normalizeBody(['  total = 1', '  for v in xs:', '      total += v', '  return total']));
  });
});

describe('eval problems', () => {
  it('reads HumanEval and coop-python with team forms', () => {
    assert.equal(humaneval.length, 164);
    assert.equal(coop.length, 100);
    assert.equal(humaneval[0].id, 'humaneval:HumanEval/0');
    // coop: canonical (helper nested), the team main calling aux, and the main calling the helper by name.
    assert.equal(coop[0].solutions.length, 3);
    assert.ok(index.fingerprints.bodies > 200 && index.fingerprints.ngrams > 10_000, JSON.stringify(index.fingerprints));
  });

  it('names the file and line of a malformed record', () => {
    const dir = mkdtempSync(join(tmpdir(), 'decontam-'));
    try {
      const file = join(dir, 'bad.jsonl');
      writeFileSync(
        file,
        `${JSON.stringify({ task_id: 'a', prompt: 'def f():\n', canonical_solution: '  return 1\n', entry_point: 'f' })}\n{"task_id": "b"}\n`,
      );
      assert.throws(() => readEvalProblems(file, 'x'), /bad\.jsonl: line 2 lacks prompt/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('DecontamIndex', () => {
  const he0 = humaneval[0];

  it('compares words: lower case, letters and digits only', () => {
    assert.deepEqual(words("Don't STOP—now, 2x!"), ['don', 't', 'stop', 'now', '2x']);
  });

  it('catches an eval solution pasted under another name and layout', () => {
    const body = he0.solutions[0].slice(he0.solutions[0].indexOf('    for idx'));
    const planted = `import math\n\n\ndef close_pairs(values, limit):\n    # from somewhere\n${body.replace(/\n\n/g, '\n').replace(/ {4}/g, '  ')}\n`;
    const hit = index.check(planted);
    assert.equal(hit?.problem, 'humaneval:HumanEval/0');
    assert.equal(hit?.kind, 'function-body');
    assert.equal(hit?.evidence, 'def close_pairs');
  });

  it('catches an eval prompt quoted in prose, whatever the case and punctuation', () => {
    const p = coop.find((x) => words(x.prompt).length > 20) as EvalProblem;
    const doc = `Notes from the forum.\n\n${words(p.prompt).slice(2, 18).join(', ').toUpperCase()}!\n\nThe end.`;
    const hit = index.check(doc);
    assert.equal(hit?.problem, p.id);
    assert.equal(hit?.kind, 'ngram');
  });

  it('passes text that shares fewer than 13 words in a row, and unrelated code', () => {
    const ws = words(he0.prompt);
    const twelve = ws.slice(5, 17);
    assert.equal(index.check(`${twelve.join(' ')} and then something else entirely ${twelve.join(' ')}`), null);
    assert.equal(index.check('def add(a, b):\n    """Add."""\n    result = a + b\n    print("adding", a, b)\n    return result\n'), null);
    assert.equal(index.check('Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse.'), null);
  });
});
