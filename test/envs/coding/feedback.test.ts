/**
 * The multi-turn transitions on a real failing program: aux is off by one and main is a thin
 * wrapper, so every test fails. Prompts are computed once, concurrently, then checked.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { CodingItem } from '../../../src/envs/coding/data.js';
import { codingTransition, type FeedbackOptions, sliceTests } from '../../../src/envs/coding/feedback.js';
import { originalInstructions } from '../../../src/envs/coding/prompts.js';
import { PythonSandbox } from '../../../src/sandbox/index.js';

const sandbox = new PythonSandbox({ concurrency: 2 });
const TEST = 'def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n    assert candidate(5) == 6\n';
const item: CodingItem = { task_id: 't/0', prompt: 'def f(x):\n    """Return x plus one."""\n', test: TEST, entry_point: 'f' };
const AUX = 'def aux(x):\n    return x + 2';
const MAIN = 'def f(x):\n    return aux(x)';

async function next(opts: FeedbackOptions, completions = [AUX, MAIN], numAgents: 1 | 2 = 2): Promise<readonly string[]> {
  const transition = codingTransition(sandbox, numAgents, opts);
  const promptHistory = numAgents === 2 ? [['AUX PROMPT'], ['MAIN PROMPT']] : [['PROMPT']];
  return transition({ prompt: item.prompt, completions, numAgents, promptHistory, responseHistory: completions.map((c) => [c]), item, turn: 0 });
}

const out: Record<string, readonly string[]> = {};
before(async () => {
  const runs: Record<string, () => Promise<readonly string[]>> = {
    feedback: () => next({ mode: 'level_feedback' }),
    feedbackAll: () => next({ mode: 'level_feedback', sandboxSlice: 'all' }),
    feedbackLast: () => next({ mode: 'level_feedback', sandboxSlice: -1 }),
    feedbackSyntax: () => next({ mode: 'level_feedback' }, [AUX, 'def f(x):\n    return (x +']),
    feedbackSingle: () => next({ mode: 'level_feedback', sandboxSlice: 0 }, ['def f(x):\n    return x + 2'], 1),
    levelPassed: () => next({ mode: 'level_passed' }),
    levelPassedBare: () => next({ mode: 'level_passed', originalPrompt: false, previousResponse: false }),
    passed: () => next({ mode: 'passed', originalPrompt: false }),
    passedGood: () => next({ mode: 'passed', originalPrompt: false }, ['def aux(x):\n    return x + 1', 'def f(x):\n    y = aux(x)\n    return y']),
    plain: () => next({ mode: 'plain' }),
    plainNoMain: () => next({ mode: 'plain', originalPrompt: false }, [AUX, 'I give up.']),
  };
  await Promise.all(
    Object.entries(runs).map(async ([k, run]) => {
      out[k] = await run();
    }),
  );
});

describe('level_feedback', () => {
  it('main: history, diagnostics on the first assert, aux-usage notes, thin-wrapper warning, closing line', () => {
    assert.equal(
      out.feedback[1],
      `History: previous prompts:
- Turn 1 prompt:
MAIN PROMPT

History: your previous main responses:
- Turn 1 response:
def f(x):
    return aux(x)

Static and execution diagnostics:
- Main definition: FOUND (Main function (f) properly defined with return statement)
- Aux definition: FOUND (Aux function properly defined with return statement)
- Syntax: OK (Combined code syntax OK)
- Tests: 0/1 passed
  Failed case: assert f(1) == 2 -> AssertionError: 
- Aux usage: main calls aux and uses its result
- Warning: main appears to be a thin wrapper over aux

Revise your f(...) accordingly. Output ONLY the function code with no extra text.`,
    );
  });

  it('aux: its own history and the same diagnostics, aux first, without usage notes', () => {
    const aux = out.feedback[0];
    assert.ok(
      aux.startsWith('History: previous prompts:\n- Turn 1 prompt:\nAUX PROMPT\n\nHistory: your previous aux(...) responses:\n- Turn 1 response:\ndef aux(x):'),
    );
    assert.ok(
      aux.includes(
        'Static and execution diagnostics:\n- Aux definition: FOUND (Aux function properly defined with return statement)\n- Main definition: FOUND',
      ),
    );
    assert.ok(!aux.includes('Aux usage'));
    assert.ok(aux.endsWith('\n\nRevise your aux(...) accordingly. Output ONLY the function code with no extra text.'));
  });

  it('sandboxSlice: all asserts with "all", the last one with -1', () => {
    assert.ok(out.feedbackAll[1].includes('- Tests: 0/3 passed\n  Failed case: assert f(1) == 2 -> AssertionError: \n  Failed case: assert f(2) == 3'));
    assert.ok(out.feedbackLast[1].includes('- Tests: 0/1 passed\n  Failed case: assert f(5) == 6 -> AssertionError: \n'));
  });

  it('a syntax error is reported with line, column and message; tests are not run', () => {
    const main = out.feedbackSyntax[1];
    assert.ok(main.includes("- Syntax: ERROR (Combined code has syntax error: '(' was never closed (<unknown>, line 5))\n"));
    assert.ok(main.includes("  SyntaxError at line 5, col 12: '(' was never closed\n- Tests: no test cases found\n- Aux usage: main does NOT call aux"));
  });

  it('single-agent mode returns one prompt without aux', () => {
    assert.equal(out.feedbackSingle.length, 1);
    assert.ok(out.feedbackSingle[0].includes('History: your previous responses:'));
    assert.ok(out.feedbackSingle[0].includes('- Main definition: FOUND') && !out.feedbackSingle[0].includes('Aux'));
    assert.ok(out.feedbackSingle[0].includes('- Tests: 0/3 passed'));
  });
});

describe('level_passed, passed, plain', () => {
  it('level_passed: first-turn instructions, the previous function, compact signals', () => {
    const [aux, main] = out.levelPassed;
    assert.ok(main.startsWith(`${originalInstructions(item).main}\n\nYour previous main implementation:\ndef f(x):\n    return aux(x)\n\nSignals:\n`));
    assert.ok(
      main.endsWith(
        'Signals:\n- Implementation: OK\n- Syntax: Syntax correct\n- Tests: No tests passed\n- Aux usage: Aux call present and used\n\nRevise your f(...) accordingly. Output ONLY the function code.',
      ),
    );
    assert.ok(aux.startsWith(originalInstructions(item).aux) && !aux.includes('Aux usage'));
  });

  it('the flags turn the instructions and the previous function off', () => {
    assert.equal(
      out.levelPassedBare[0],
      'Signals:\n- Implementation: OK\n- Syntax: Syntax correct\n- Tests: No tests passed\n\nRevise your aux(...) accordingly. Output ONLY the function code.',
    );
  });

  it('passed: a single signal, which flips when every sandbox test passes', () => {
    assert.equal(
      out.passed[1],
      'Your previous main implementation:\ndef f(x):\n    return aux(x)\n\nSignal: Not all levels passed\n\nRevise your f(...) if needed. Output ONLY the function code.',
    );
    assert.ok(out.passedGood[0].includes('Signal: All levels passed'));
  });

  it('plain: the previous function and "Revise ... accordingly"; a missing one is named', () => {
    assert.ok(
      out.plain[0].endsWith(
        'Your previous aux(...) implementation:\ndef aux(x):\n    return x + 2\n\nRevise your aux(...) accordingly. Output ONLY the function code.',
      ),
    );
    assert.equal(
      out.plainNoMain[1],
      'Your previous main implementation:\n<no implementation found>\n\nRevise your f(...) accordingly. Output ONLY the function code.',
    );
  });
});

describe('sliceTests', () => {
  const test = 'import math\n\n\ndef check(candidate):\n    assert candidate(1) == 2\n    x = 3\n    assert candidate(x) == 4\n    assert True\n';
  it('keeps the first N, the last |N|, or everything, with the preamble', () => {
    assert.equal(sliceTests(test, 1), 'import math\ndef check(candidate):\n    assert candidate(1) == 2\n');
    assert.equal(sliceTests(test, -1), 'import math\ndef check(candidate):\n    assert candidate(x) == 4\n');
    assert.equal(sliceTests(test, 'all'), test);
    assert.equal(sliceTests(test, 0), test);
  });

  it('rejects an unknown mode at construction', () => {
    assert.throws(() => codingTransition(sandbox, 2, { mode: 'telepathy' as never }), /feedback.mode: got "telepathy", expected one of plain, passed/);
  });
});
