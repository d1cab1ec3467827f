/**
 * Code-completion prompts (prompt_style: code): what each agent is shown, and that an agent's code
 * rebuilt as opening + completion scores exactly like the same code written out in full.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AUX_OPENING, codeAuxPrompt, codeMainPrompt, codeOpening, codeSinglePrompt } from '../../../src/envs/coding/code-prompts.js';
import { type CodingItem, coopPythonEnvironment, loadCoopPython } from '../../../src/envs/coding/index.js';
import { formattersFor, promptText, type RewardFn } from '../../../src/rl/task.js';
import { PythonSandbox } from '../../../src/sandbox/index.js';

const typed = {
  prompt: 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Return the sum of xs.\n    >>> total([1, 2])\n    3\n    """\n',
  entry_point: 'total',
};

describe('code-completion prompts', () => {
  it('aux continues "def aux(" after a comment naming the caller and its docstring summary', () => {
    assert.equal(codeAuxPrompt(typed), '# Helper for total(xs: List[int]) -> int: Return the sum of xs.\ndef aux(');
    assert.equal(codeOpening(typed, 'aux'), AUX_OPENING);
  });

  it('main continues the problem prompt after a note about aux; imports stay at the top', () => {
    const p = codeMainPrompt(typed);
    assert.ok(p.startsWith('from typing import List\n\n\n# aux(...) is written by another agent.\n\n\ndef total('), p);
    assert.ok(p.endsWith('    3\n    """'));
    assert.equal(codeOpening(typed, 'main'), typed.prompt.trimEnd());
  });

  it("main shown aux's code reads it above its own signature", () => {
    const p = codeMainPrompt(typed, 'def aux(x):\n    return x\n');
    assert.ok(p.includes('def aux(x):\n    return x\n\n\ndef total(xs: List[int]) -> int:'), p);
  });

  it('no prompt ends in whitespace (a bare newline is a token split the model never saw)', () => {
    for (const item of loadCoopPython().eval) {
      for (const p of [codeAuxPrompt(item), codeMainPrompt(item), codeSinglePrompt(item)]) assert.equal(p, p.trimEnd());
    }
  });
});

describe('the environment in code style', () => {
  it('rebuilds opening + completion: the canonical split scores as the full solution does', async () => {
    const sandbox = new PythonSandbox({ concurrency: 2 });
    const code = coopPythonEnvironment({ sandbox, prompt_style: 'code' }).task();
    const instruct = coopPythonEnvironment({ sandbox }).task();
    assert.equal(code.transition, undefined);
    assert.ok(instruct.transition);
    for (const item of loadCoopPython().eval.slice(0, 3)) {
      const { aux_solution: aux, main_solution: main } = item as unknown as { aux_solution: string; main_solution: string };
      const opening = item.prompt.trimEnd();
      assert.ok(aux.startsWith(AUX_OPENING) && main.startsWith(opening));
      const prompts = formattersFor(code, 2).map((f) => promptText(f(item)));
      assert.ok(prompts[0].endsWith(AUX_OPENING) && prompts[1].endsWith(opening));
      const split = await (code.reward as RewardFn<CodingItem>)({
        item,
        prompts,
        turn: 0,
        completions: [aux.slice(AUX_OPENING.length), main.slice(opening.length)],
      });
      const full = await (instruct.reward as RewardFn<CodingItem>)({ item, prompts, turn: 0, completions: [aux, main] });
      assert.deepEqual(split, full);
      const c = (split as { components: Record<string, number> }).components;
      assert.deepEqual([c.structure, c.syntax, c.tests], [1, 0.5, 1]);
    }
  });
});
