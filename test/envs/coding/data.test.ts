/** Coding datasets: the HumanEval-format loader, the paper-era HumanEval splits, and the shipped coop-python set. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { CodingDataError, humanevalSplits, loadCodingJsonl, loadCoopPython, loadHumanEval } from '../../../src/envs/coding/data.js';
import { codeReward } from '../../../src/envs/coding/reward.js';
import { extractAsserts, PythonSandbox } from '../../../src/sandbox/index.js';

const dir = mkdtempSync(join(tmpdir(), 'magrpo-coding-data-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const row = { task_id: 'T/0', prompt: 'def f(x):\n    """Add one."""\n', test: 'def check(candidate):\n    assert candidate(1) == 2\n', entry_point: 'f' };
function file(name: string, lines: string[]): string {
  const path = join(dir, name);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}
function loadError(path: string): CodingDataError {
  try {
    loadCodingJsonl(path);
  } catch (e) {
    assert.ok(e instanceof CodingDataError);
    return e;
  }
  assert.fail(`${path} loaded`);
}

describe('loadCodingJsonl', () => {
  it('reads the four HumanEval fields, keeps canonical_solution, ignores other fields and blank lines', () => {
    const path = file('good.jsonl', [JSON.stringify(row), '', JSON.stringify({ ...row, task_id: 'T/1', canonical_solution: '    return x + 1\n', extra: 7 })]);
    const items = loadCodingJsonl(path);
    assert.deepEqual(items, [row, { ...row, task_id: 'T/1', canonical_solution: '    return x + 1\n' }]);
  });

  it('reads .jsonl.gz', () => {
    const path = join(dir, 'good.jsonl.gz');
    writeFileSync(path, gzipSync(`${JSON.stringify(row)}\n`));
    assert.equal(loadCodingJsonl(path).length, 1);
  });

  it('names the file and the line of a bad row', () => {
    const bad = file('bad.jsonl', [JSON.stringify(row), JSON.stringify({ ...row, entry_point: 3, test: undefined })]);
    const e = loadError(bad);
    assert.equal(e.code, 'BAD_ROW');
    assert.equal(e.line, 2);
    assert.equal(
      e.message,
      `${bad}:2: needs non-empty string fields task_id, prompt, test, entry_point; test missing, entry_point = 3 — use the HumanEval format`,
    );
  });

  it('rejects broken JSON, a non-object, tests without check(candidate), a missing or empty file', () => {
    assert.equal(loadError(file('json.jsonl', ['{"task_id": ']))?.code, 'BAD_JSON');
    assert.equal(loadError(file('array.jsonl', ['[1, 2]'])).line, 1);
    assert.match(loadError(file('nocheck.jsonl', [JSON.stringify({ ...row, test: 'assert f(1) == 2' })])).message, /no `def check\(candidate\):`/);
    assert.equal(loadError(file('empty.jsonl', [''])).code, 'EMPTY');
    assert.equal(loadError(join(dir, 'nope.jsonl')).code, 'FILE_MISSING');
  });
});

describe('HumanEval', () => {
  it('paper-era splits: train test[33:133], eval test[:32], final test[133:]; find_zero (index 32) in none', () => {
    const all = loadHumanEval();
    const { train, eval: evalItems, final } = humanevalSplits(all);
    assert.deepEqual([all.length, train.length, evalItems.length, final.length], [164, 100, 32, 31]);
    assert.equal(train[0].task_id, 'HumanEval/33');
    assert.equal(evalItems.at(-1)?.task_id, 'HumanEval/31');
    assert.equal(final[0].task_id, 'HumanEval/133');
    const ids = new Set([...train, ...evalItems, ...final].map((x) => x.task_id));
    assert.equal(ids.has('HumanEval/32'), false);
    assert.equal(ids.size, 163);
  });
});

describe('coop-python (shipped)', () => {
  const { train, eval: evalItems } = loadCoopPython();

  it('400 train and 100 eval problems, no prompt in both, every one with a helper + main team answer', () => {
    assert.equal(train.length, 400);
    assert.equal(evalItems.length, 100);
    const trainPrompts = new Set(train.map((x) => x.prompt));
    assert.equal(evalItems.filter((x) => trainPrompts.has(x.prompt)).length, 0);
    for (const x of [...train, ...evalItems]) {
      assert.ok(x.aux_solution?.startsWith('def aux(') && x.main_solution?.startsWith(`def ${x.entry_point}(`), x.task_id);
      assert.ok(extractAsserts(x.test, x.entry_point).length >= 2, x.task_id);
    }
  });

  it('the first 40 eval team answers pass all their tests through the reward (3.0 for a one-line main, else 4.0)', async () => {
    const sandbox = new PythonSandbox({ concurrency: 2 });
    const sample = evalItems.slice(0, 40);
    const scored = await Promise.all(
      sample.map((x) =>
        codeReward({ auxText: x.aux_solution ?? '', mainText: x.main_solution ?? '', test: x.test, entryPoint: x.entry_point, prompt: x.prompt }, sandbox),
      ),
    );
    const bad = sample.filter((_, i) => scored[i].components.tests !== 1 || ![3, 4].includes(scored[i].reward)).map((x) => x.task_id);
    assert.deepEqual(bad, []);
    const solo = await Promise.all(evalItems.slice(0, 10).map((x) => sandbox.runTests(x.prompt + x.canonical_solution, extractAsserts(x.test, x.entry_point))));
    assert.ok(solo.every((r) => r.total > 0 && r.passed === r.total));
  });
});
