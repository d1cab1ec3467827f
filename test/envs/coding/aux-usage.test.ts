/** Our AST detector of ignored aux results (the 'fixed' penalty), run in the sandbox. */
import assert from 'node:assert/strict';
import { before, it } from 'node:test';
import { ignoredAuxCalls } from '../../../src/envs/coding/aux-usage.js';
import { PythonSandbox } from '../../../src/sandbox/index.js';

const sandbox = new PythonSandbox({ concurrency: 2 });
const main = (...body: string[]) => `def f(x):\n${body.map((l) => `    ${l}`).join('\n')}`;

const CASES: Record<string, [string, string[]]> = {
  standalone: [main('aux(x)', 'return x'), ['Line 2: standalone call (not assigned)']],
  unused: [main('r = aux(x)', 'return x'), ['Line 2: assigned to r but never used']],
  unusedTuple: [main('a, b = aux(x)', 'return x'), ['Line 2: assigned to a, b but never used']],
  usedLater: [main('r = aux(x)', 'return r + 1'), []],
  usedSameLine: [main('r = aux(x); return r'), []],
  oneOfTupleUsed: [main('a, b = aux(x)', 'return b'), []],
  loopCarried: [main('total = 0', 'for v in x:', '    print(total)', '    total = aux(v)', 'return 0'), []],
  returned: [main('return aux(x) * 2'), []],
  argument: [main('return len(aux(x))'), []],
  condition: [main('if aux(x):', '    return 1', 'return 0'), []],
  attributeTarget: [main('x.value = aux(x)', 'return x'), []],
  twoStandalone: [main('aux(1)', 'aux(2)', 'return x'), ['Line 2: standalone call (not assigned)', 'Line 3: standalone call (not assigned)']],
  otherFunction: [main('my_aux(x)', 'return x'), []],
  unparsable: [main('aux(x', 'return x'), []],
  noAuxAtAll: [main('return x'), []],
};

const found: Record<string, string[]> = {};
before(async () => {
  await Promise.all(
    Object.entries(CASES).map(async ([name, [code]]) => {
      found[name] = await ignoredAuxCalls(code, sandbox);
    }),
  );
});

for (const [name, [code, want]] of Object.entries(CASES)) {
  it(`${name}: ${want.length ? want.join('; ') : 'used'}`, () => {
    assert.deepEqual(found[name], want, code);
  });
}
