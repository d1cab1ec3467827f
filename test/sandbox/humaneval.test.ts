/**
 * All 164 HumanEval canonical solutions through the sandbox, two ways:
 *   (a) the official harness, `prompt + canonical_solution + test + check(entry_point)`, as one program;
 *   (b) the reference reward's L3 rule: extractAsserts + runTests on `prompt + canonical_solution`.
 * (b) cannot reach 1.0 everywhere: single-line extraction loses loop variables, helper code and the
 * tails of multi-line asserts. The counts pinned below are a property of the data and the rule.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { extractAsserts } from '../../src/sandbox/extract-asserts.js';
import { PythonSandbox } from '../../src/sandbox/python-sandbox.js';

interface Problem {
  task_id: string;
  prompt: string;
  canonical_solution: string;
  test: string;
  entry_point: string;
}

const DATA = new URL('../../data/humaneval/HumanEval.jsonl.gz', import.meta.url);
const problems: Problem[] = gunzipSync(readFileSync(DATA))
  .toString('utf8')
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as Problem);

const sandbox = new PythonSandbox({ concurrency: 2 });

test('the data set has 164 problems', () => {
  assert.equal(problems.length, 164);
});

test('(a) every canonical solution passes its full official check()', async () => {
  const results = await Promise.all(problems.map((p) => sandbox.run(`${p.prompt}${p.canonical_solution}\n${p.test}\ncheck(${p.entry_point})\n`)));
  const failing = problems.filter((_, i) => results[i].exitCode !== 0).map((p) => p.task_id);
  assert.deepEqual(failing, []);
});

test('(b) under the single-line extraction rule, 155 of 164 canonical solutions score 1.0', async () => {
  const asserts = problems.map((p) => extractAsserts(p.test, p.entry_point));
  assert.equal(asserts.flat().length, 1128);
  const results = await Promise.all(problems.map((p, i) => sandbox.runTests(p.prompt + p.canonical_solution, asserts[i])));
  assert.ok(results.every((r) => r.ok && r.timeouts === 0 && r.killed === undefined));

  const score = (i: number) => `${results[i].passed}/${results[i].total}`;
  const imperfect = Object.fromEntries(
    problems.flatMap((p, i) => (results[i].passed === results[i].total && results[i].total > 0 ? [] : [[p.task_id, score(i)]])),
  );
  assert.deepEqual(imperfect, {
    'HumanEval/1': '1/4', // multi-line expected lists: only the first line is taken
    'HumanEval/32': '0/0', // every assert uses loop variables: nothing extracted, no L3 at all
    'HumanEval/38': '0/1', // needs encoded_str from the loop body
    'HumanEval/44': '6/7', // loop variable x
    'HumanEval/50': '0/1', // needs copy and encoded_str
    'HumanEval/53': '5/6', // loop variables x, y
    'HumanEval/87': '3/4', // multi-line argument
    'HumanEval/113': '2/3', // multi-line expected list
    'HumanEval/151': '6/7', // lst and odd_sum from check()
  });
  assert.equal(problems.length - Object.keys(imperfect).length, 155);
});
