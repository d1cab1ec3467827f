/**
 * The Python task generator: seeded determinism, variety, HumanEval shape, and — in one python3
 * process per batch — that canonical solutions pass and broken ones fail.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generatePyTasks, PY_KINDS, PY_TEMPLATES, taskCorpusText, taskProgram, verifyPyTasks } from '../../src/data/pyfuncs.js';
import { runPythonBatch } from '../../src/data/python.js';

describe('generatePyTasks', () => {
  const tasks = generatePyTasks({ seed: 11, count: 400 });

  it('is deterministic by seed', () => {
    assert.deepEqual(generatePyTasks({ seed: 11, count: 400 }), tasks);
    assert.notDeepEqual(generatePyTasks({ seed: 12, count: 400 }), tasks);
  });

  it('gives distinct functions from 40+ templates of every kind', () => {
    assert.equal(tasks.length, 400);
    assert.equal(new Set(tasks.map((t) => t.prompt + t.canonical_solution)).size, 400);
    assert.ok(PY_TEMPLATES.length >= 40);
    assert.equal(new Set(PY_TEMPLATES.map((t) => t.id)).size, PY_TEMPLATES.length);
    assert.deepEqual(new Set(tasks.map((t) => t.kind)), new Set(PY_KINDS));
    assert.ok(new Set(tasks.map((t) => t.template)).size >= 40);
  });

  it('restricts to the requested kinds', () => {
    const compose = generatePyTasks({ seed: 1, count: 50, kinds: ['compose'] });
    assert.ok(compose.every((t) => t.kind === 'compose' && t.helper !== undefined));
  });

  it('has HumanEval fields: prompt ends in the docstring, 2–4 asserts in check and as plain lines', () => {
    for (const t of tasks) {
      assert.match(t.prompt, new RegExp(`def ${t.entry_point}\\(`));
      assert.ok(t.prompt.endsWith('"""\n'), t.task_id);
      assert.match(t.prompt, />>> /);
      assert.match(t.test, /^def check\(candidate\):\n/);
      const checks = t.test.split('\n').filter((l) => l.startsWith('    assert candidate('));
      assert.ok(checks.length >= 2 && checks.length <= 4, t.task_id);
      assert.equal(t.asserts.length, checks.length);
      assert.ok(t.asserts.every((a) => a.startsWith(`assert ${t.entry_point}(`)));
    }
  });

  it('gives compose tasks a helper that the main function calls', () => {
    const compose = tasks.filter((t) => t.kind === 'compose');
    assert.ok(compose.length > 0);
    for (const t of compose) {
      const helper = t.helper as NonNullable<typeof t.helper>;
      assert.ok(t.prompt.startsWith(helper.code));
      assert.ok(helper.code.startsWith(helper.prompt));
      assert.match(t.canonical_solution, new RegExp(`\\b${helper.name}\\b`));
    }
  });

  it('writes corpus text with plain asserts or a check block', () => {
    const t = tasks[0];
    assert.ok(taskCorpusText(t, 'asserts').endsWith(`${t.asserts.join('\n')}\n`));
    assert.ok(taskCorpusText(t, 'check').endsWith(`check(${t.entry_point})\n`));
  });
});

const WRONG =
  'def _wrong(v):\n    if isinstance(v, bool):\n        return not v\n    if isinstance(v, int):\n        return v + 1\n    return v[:-1] if v else [0]\n\n\n';

describe('running the tasks under python3 (one process per batch)', () => {
  const tasks = generatePyTasks({ seed: 5, count: 300 });

  it('passes every canonical solution', () => {
    const { passed, failed } = verifyPyTasks(tasks);
    assert.deepEqual(
      failed.map((f) => `${f.task.task_id} ${f.task.template}: ${f.error}`),
      [],
    );
    assert.equal(passed.length, tasks.length);
  });

  it('fails broken solutions', () => {
    const sample = tasks.filter((_, i) => i % 10 === 0);
    const broken = sample.flatMap((t) => [
      taskProgram(t, '    return None\n'),
      taskProgram(t, `    raise ValueError("not implemented")\n`),
      // Every return of the main function nudged: same type where possible, never the right value.
      WRONG + taskProgram(t, t.canonical_solution.replace(/return (.+)$/gm, 'return _wrong($1)')),
    ]);
    const errors = runPythonBatch(broken);
    const passedBroken = broken.filter((_, i) => errors[i] === null);
    assert.equal(passedBroken.length, 0, passedBroken[0]);
  });

  it('reports timeouts instead of hanging', () => {
    const [error] = runPythonBatch(['while True:\n    pass\n'], { timeoutSeconds: 1 });
    assert.match(error ?? '', /^TimeoutError/);
  });
});
