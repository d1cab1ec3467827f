/** The reference harness's text surgery, case by case (no Python needed). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  callsAux,
  checkFunctionDefinition,
  cleanupCode,
  combineProgram,
  extractSpecificFunction,
  isThinWrapper,
  promptImports,
  promptParams,
  pyStrip,
  referenceIgnoredAuxCalls,
} from '../../../src/envs/coding/code-utils.js';

describe('cleanupCode', () => {
  it('strips ```python fences and keeps the def block', () => {
    const text = 'Here is my solution:\n```python\ndef aux(x):\n    return x + 1\n```\nHope it helps!';
    assert.equal(cleanupCode(text), 'def aux(x):\n    return x + 1');
  });

  it('drops top-level imports, constants and calls the model wrote (reference quirk)', () => {
    const text = 'import math\nLIMIT = 10\n\ndef f(x):\n    return math.sqrt(x) + LIMIT\n\nprint(f(4))\n';
    assert.equal(cleanupCode(text), 'def f(x):\n    return math.sqrt(x) + LIMIT');
  });

  it('drops prose lines, even inside a function, but keeps comments and code-looking lines', () => {
    const text = 'def f(x):\n    This adds one to the input.\n    # a comment.\n    y = x + 1\n    return y';
    assert.equal(cleanupCode(text), 'def f(x):\n    # a comment.\n    y = x + 1\n    return y');
  });

  it('keeps a docstring written at the def level, up to its closing quotes, then stops at the next line', () => {
    const text = 'def f(x):\n"""Doc\nmore\n"""\n    return x\nstray = 1';
    assert.equal(cleanupCode(text), 'def f(x):\n"""Doc\nmore\n"""\n    return x');
  });

  it('keeps several functions, separated by a blank line', () => {
    assert.equal(cleanupCode('def a():\n    return 1\nx = 2\ndef b():\n    return 2'), 'def a():\n    return 1\n\ndef b():\n    return 2');
  });

  it('returns "" when no def is left', () => {
    assert.equal(cleanupCode('The answer is 42.'), '');
    assert.equal(cleanupCode(''), '');
    assert.equal(cleanupCode('go a b c'), '');
  });
});

describe('extractSpecificFunction', () => {
  it('picks the named function out of several', () => {
    const text = 'def helper(y):\n    return y\n\ndef f(x):\n    y = helper(x)\n    return y\n';
    assert.equal(extractSpecificFunction(text, 'f'), 'def f(x):\n    y = helper(x)\n    return y');
  });

  it('a nested def starts a new block, so the outer body after it is lost (reference quirk)', () => {
    const text = 'def f(x):\n    def inner(z):\n        return z\n    return inner(x)\n';
    assert.equal(cleanupCode(text), 'def f(x):\n\n    def inner(z):\n        return z');
    assert.equal(extractSpecificFunction(text, 'f'), 'def f(x):\n\n    def inner(z):\n        return z');
  });

  it('does not match a longer name and returns "" when absent', () => {
    assert.equal(extractSpecificFunction('def auxiliary(x):\n    return x', 'aux'), '');
    assert.equal(extractSpecificFunction('def aux (x):\n    return x', 'aux'), 'def aux (x):\n    return x');
  });
});

describe('structure helpers', () => {
  it('checkFunctionDefinition needs `return` followed by whitespace', () => {
    assert.deepEqual(checkFunctionDefinition('def aux(x):\n    return x', 'aux', 'Aux function'), {
      ok: true,
      message: 'Aux function properly defined with return statement',
    });
    assert.equal(checkFunctionDefinition('def aux(x):\n    print(x)', 'aux', 'Aux function').message, 'Aux function missing return statement');
    assert.equal(checkFunctionDefinition('def aux(x):\n    return(x)', 'aux', 'Aux function').ok, false);
    assert.equal(checkFunctionDefinition('', 'aux', 'Aux function').message, 'Aux function not defined');
  });

  it('promptImports keeps the prompt import lines, deduplicated', () => {
    const prompt =
      'from typing import List\nimport math, re\n\n\ndef f(xs: List[int]) -> int:\n    """import this is not an import line."""\nfrom typing import List\n';
    assert.equal(promptImports(prompt), 'from typing import List\nimport math, re');
  });

  it('combineProgram joins prompt imports, aux and main with blank lines', () => {
    assert.equal(
      combineProgram('def aux():\n    return 1', 'def f():\n    return aux()', 'import math'),
      'import math\n\ndef aux():\n    return 1\n\ndef f():\n    return aux()',
    );
    assert.equal(combineProgram('', 'def f():\n    return 1', ''), 'def f():\n    return 1');
  });

  it('promptParams copies the FIRST signature of the prompt, splitting annotations on commas', () => {
    assert.deepEqual(promptParams('def f(numbers: List[float], threshold: float) -> bool:'), ['numbers: List[float]', 'threshold: float']);
    assert.deepEqual(promptParams('def is_palindrome(string: str) -> bool:\n    pass\n\ndef make_palindrome(s: str) -> str:'), ['string: str']);
    assert.deepEqual(promptParams('def f(d: Dict[str, int]):'), ['d: Dict[str', 'int]']);
    assert.deepEqual(promptParams('def f():'), []);
  });

  it('pyStrip strips what Python strips (\\x1c-\\x1f, \\x85) and keeps what it keeps (\\ufeff)', () => {
    assert.equal(pyStrip('\x1c\x85 a \t\n'), 'a');
    assert.equal(pyStrip('\ufeffa'), '\ufeffa');
  });
});

describe('aux usage', () => {
  it('callsAux needs `aux(` with a word boundary before it', () => {
    assert.equal(callsAux('def f(x):\n    return aux (x)'), true);
    assert.equal(callsAux('def f(x):\n    return my_aux(x)'), false);
    assert.equal(callsAux('def f(x):\n    return aux'), false);
    assert.equal(callsAux('def f(x):\n    return éaux(x)'), false);
  });

  const main = (...body: string[]) => `def f(x):\n${body.map((l) => `    ${l}`).join('\n')}`;

  it('thin wrappers: empty body, a single return mentioning aux, x = aux(...) then return x', () => {
    assert.equal(isThinWrapper(main('"""Only a docstring."""')), true);
    assert.equal(isThinWrapper(main('return aux(x)')), true);
    assert.equal(isThinWrapper(main('return len([v for v in x if aux(v)])')), true);
    assert.equal(isThinWrapper(main('# compute', 'r = aux(x)', 'return r')), true);
    assert.equal(isThinWrapper(main('r = aux(x) + 1', 'return r')), true);
  });

  it('not wrappers: more work around the call', () => {
    assert.equal(isThinWrapper(main('r = aux(x)', 'return r + 1')), false);
    assert.equal(isThinWrapper(main('y = x * 2', 'r = aux(y)', 'return r')), false);
    assert.equal(isThinWrapper(main('return x + 1')), false);
  });

  it("'reference' never closes a docstring ending in a lone quote line, so what follows is ignored; 'fixed' closes it", () => {
    const withDoc = main('"""Add.', '>>> f(1)', '2', '"""', 'y = aux(x)', 'return y + 1');
    assert.equal(isThinWrapper(withDoc, 'reference'), true);
    assert.equal(isThinWrapper(withDoc, 'fixed'), false);
    const closedOnText = main('"""Add.', 'more."""', 'y = aux(x)', 'return y + 1');
    assert.equal(isThinWrapper(closedOnText, 'reference'), false);
  });

  it('the reference "ignored aux" regex only matches a line that is exactly aux<space>(<one char>)', () => {
    assert.deepEqual(referenceIgnoredAuxCalls(main('aux (x)', 'return x')), ['Line 2: aux (x)']);
    assert.deepEqual(referenceIgnoredAuxCalls(main('aux(x)', 'return x')), []);
    assert.deepEqual(referenceIgnoredAuxCalls(main('aux (xs)', 'return x')), []);
    assert.deepEqual(referenceIgnoredAuxCalls(main('aux  (x)', 'return x')), []);
  });
});
