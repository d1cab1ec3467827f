/**
 * The coding reward, level by level, against hand-computed values. All cases are scored up front in
 * one concurrent batch (two sandbox slots), then checked.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { type CodeRewardInput, type CodeRewardOptions, type CodeRewardResult, codeReward } from '../../../src/envs/coding/reward.js';
import { PythonSandbox } from '../../../src/sandbox/index.js';

const sandbox = new PythonSandbox({ concurrency: 2 });

const TEST =
  'def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n    assert candidate(-3) == -2\n    assert candidate(0) == 1\n';
const PROMPT = 'def f(x: int) -> int:\n    """Return x plus one."""\n';
const fn = (name: string, ...body: string[]) => `def ${name}(x):\n${body.map((l) => `    ${l}`).join('\n')}`;
const AUX = fn('aux', 'return x + 1');

const CASES: Record<string, Partial<CodeRewardInput> & { opts?: CodeRewardOptions }> = {
  perfect: { auxText: AUX, mainText: fn('f', 'y = aux(x)', 'return y * 1') },
  noMain: { auxText: AUX, mainText: fn('g', 'return x + 1') },
  mainNoReturn: { auxText: AUX, mainText: fn('f', 'print(x)') },
  noAux: { auxText: 'I cannot help.', mainText: fn('f', 'return x + 1') },
  singleAgentMax: { auxText: '', mainText: fn('f', 'return x + 1') },
  auxWithoutReturn: { auxText: fn('aux', 'print(x)'), mainText: fn('f', 'r = aux(x)', 'return x + 1') },
  syntaxError: { auxText: AUX, mainText: fn('f', 'return (x +') },
  partial: { auxText: AUX, mainText: fn('f', 'y = aux(x)', 'return y if x > 0 else 0') },
  noneRight: { auxText: AUX, mainText: fn('f', 'y = aux(x)', 'return y + 5') },
  wrapperReturn: { auxText: AUX, mainText: fn('f', 'return aux(x)') },
  wrapperAssign: { auxText: AUX, mainText: fn('f', 'r = aux(x)', 'return r') },
  notCalled: { auxText: AUX, mainText: fn('f', 'return x + 1') },
  docstringFixed: { auxText: AUX, mainText: fn('f', '"""Add one.', '>>> f(1)', '2', '"""', 'y = aux(x)', 'return y * 1') },
  docstringReference: {
    auxText: AUX,
    mainText: fn('f', '"""Add one.', '>>> f(1)', '2', '"""', 'y = aux(x)', 'return y * 1'),
    opts: { thinWrapper: 'reference' },
  },
  // aux is never called on the passing inputs, so the tests pass without an extracted aux.
  bonusNeedsAux: { auxText: '', mainText: fn('f', 'if x > 100:', '    return aux(x)', 'return x + 1') },
  ignoredFixed: { auxText: AUX, mainText: fn('f', 'aux(x)', 'return x + 1') },
  ignoredReference: { auxText: AUX, mainText: fn('f', 'aux(x)', 'return x + 1'), opts: { auxPenalty: 'reference' } },
  ignoredOff: { auxText: AUX, mainText: fn('f', 'aux(x)', 'return x + 1'), opts: { auxPenalty: 'off' } },
  brokenRegexFires: { auxText: AUX, mainText: fn('f', 'aux (x)', 'return x + 1'), opts: { auxPenalty: 'reference' } },
  unusedAssignment: { auxText: AUX, mainText: fn('f', 'r = aux(x)', 'return x + 1') },
  noTests: { auxText: AUX, mainText: fn('f', 'return aux(x)'), test: 'def check(candidate):\n    for x in range(3):\n        pass\n' },
  modelImportDropped: { auxText: AUX, mainText: 'import re\n\ndef f(x):\n    y = aux(x)\n    return int(re.sub("", "", str(y)))' },
  promptImportKept: {
    auxText: AUX,
    mainText: 'def f(x):\n    y = aux(x)\n    return int(re.sub("", "", str(y)))',
    prompt: `import re\n\n\n${PROMPT}`,
  },
  loadError: { auxText: AUX, mainText: fn('f', 'return x + 1').replace('(x)', '(x=undefined_name)') },
  fenced: { auxText: `Sure!\n\`\`\`python\n${AUX}\n\`\`\``, mainText: `\`\`\`python\n${fn('f', 'y = aux(x)', 'return y * 1')}\n\`\`\`\nThis works.` },
};

const results: Record<string, CodeRewardResult> = {};
before(async () => {
  await Promise.all(
    Object.entries(CASES).map(async ([name, c]) => {
      const input = { auxText: '', mainText: '', test: TEST, entryPoint: 'f', prompt: PROMPT, ...c };
      results[name] = await codeReward(input, sandbox, c.opts);
    }),
  );
});

const parts = (name: string) => {
  const { reward, components } = results[name];
  return { reward: Math.round(reward * 1e9) / 1e9, ...components };
};
const expect = (structure: number, syntax: number, tests: number, cooperation: number, penalty = 0) => ({
  reward: Math.round((structure + syntax + tests + cooperation + penalty) * 1e9) / 1e9,
  structure,
  syntax,
  tests,
  cooperation,
  penalty,
});

describe('levels', () => {
  it('a correct team that cooperates gets the maximum, 4.0', () => {
    assert.deepEqual(parts('perfect'), expect(1, 0.5, 1, 1.5));
    assert.equal(results.perfect.reward, 4);
    assert.equal(results.perfect.program, `${AUX}\n\n${fn('f', 'y = aux(x)', 'return y * 1')}`);
  });

  it('L1: a missing main (or one without return) stops at structure, keeping the aux 0.4', () => {
    assert.deepEqual(parts('noMain'), expect(0.4, 0, 0, 0));
    assert.equal(results.noMain.stoppedAt, 'structure');
    assert.deepEqual(parts('mainNoReturn'), expect(0.4, 0, 0, 0));
  });

  it('L1: a missing aux does not stop the reward; single-agent mode (aux = "") tops out at 2.1', () => {
    assert.deepEqual(parts('noAux'), expect(0.6, 0.5, 1, 0));
    assert.deepEqual(parts('singleAgentMax'), expect(0.6, 0.5, 1, 0));
    assert.equal(results.singleAgentMax.reward, 2.1);
  });

  it('L1: an aux without return earns no 0.4, but is still "extracted" for the bonus', () => {
    assert.deepEqual(parts('auxWithoutReturn'), expect(0.6, 0.5, 1, 1.5, -0.5));
  });

  it('L2: a syntax error in the combined program stops after structure', () => {
    assert.deepEqual(parts('syntaxError'), expect(1, 0, 0, 0));
    assert.equal(results.syntaxError.stoppedAt, 'syntax');
  });

  it('L3: the test share is passed / total; no passing test, no bonus', () => {
    assert.deepEqual(parts('partial'), expect(1, 0.5, 0.5, 1.5));
    assert.equal(`${results.partial.passed}/${results.partial.total}`, '2/4');
    assert.deepEqual(parts('noneRight'), expect(1, 0.5, 0, 0));
  });

  it('L3: no extractable single-line assert stops after syntax', () => {
    assert.deepEqual(parts('noTests'), expect(1, 0.5, 0, 0));
    assert.equal(results.noTests.stoppedAt, 'no_tests');
  });

  it('L3: a program that fails to load passes nothing', () => {
    assert.deepEqual(parts('loadError'), expect(1, 0.5, 0, 0));
    assert.equal(results.loadError.run?.loadError?.type, 'NameError');
  });

  it('fences and prose around the code are cleaned away', () => {
    assert.deepEqual(parts('fenced'), expect(1, 0.5, 1, 1.5));
  });

  it("the model's own imports are dropped; the prompt's imports are kept", () => {
    assert.deepEqual(parts('modelImportDropped'), expect(1, 0.5, 0, 0));
    assert.deepEqual(parts('promptImportKept'), expect(1, 0.5, 1, 1.5));
  });
});

describe('cooperation bonus', () => {
  it('+0.5 for calling aux, +1.0 more unless main is a thin wrapper', () => {
    assert.deepEqual(parts('wrapperReturn'), expect(1, 0.5, 1, 0.5));
    assert.deepEqual(parts('wrapperAssign'), expect(1, 0.5, 1, 0.5));
    assert.deepEqual(parts('notCalled'), expect(1, 0.5, 1, 0));
  });

  it('needs an extracted aux even when tests pass and main mentions aux(', () => {
    assert.deepEqual(parts('bonusNeedsAux'), expect(0.6, 0.5, 1, 0));
  });

  it("thinWrapper 'reference' loses the +1.0 for code after a docstring closed on its own line", () => {
    assert.deepEqual(parts('docstringFixed'), expect(1, 0.5, 1, 1.5));
    assert.deepEqual(parts('docstringReference'), expect(1, 0.5, 1, 0.5));
  });
});

describe('ignored-aux penalty', () => {
  it("'fixed' (default) penalises a standalone aux(x) statement and an unused assignment", () => {
    assert.deepEqual(parts('ignoredFixed'), expect(1, 0.5, 1, 1.5, -0.5));
    assert.deepEqual(results.ignoredFixed.ignoredCalls, ['Line 2: standalone call (not assigned)']);
    assert.deepEqual(parts('unusedAssignment'), expect(1, 0.5, 1, 1.5, -0.5));
  });

  it("'reference' reproduces the broken regex: aux(x) passes, only `aux (x)` is caught", () => {
    assert.deepEqual(parts('ignoredReference'), expect(1, 0.5, 1, 1.5));
    assert.deepEqual(parts('brokenRegexFires'), expect(1, 0.5, 1, 1.5, -0.5));
  });

  it("'off' never penalises", () => {
    assert.deepEqual(parts('ignoredOff'), expect(1, 0.5, 1, 1.5));
  });
});
