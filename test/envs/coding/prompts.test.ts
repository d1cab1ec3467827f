/** The agents' prompts, pinned word for word against the reference formatters. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import {
  auxPrompt,
  discussionMainPrompt,
  mainPrompt,
  originalInstructions,
  PARAMS_ERROR,
  sequentialMainPrompt,
  singleAgentPrompt,
} from '../../../src/envs/coding/prompts.js';

const item = { prompt: 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n', entry_point: 'add' };

const RULES = `IMPORTANT INSTRUCTIONS:
- Output ONLY the function code, no explanations or examples
- Do NOT include markdown code blocks (\`\`\`python)
- Do NOT include any text before or after the function
- Do NOT include test cases or example usage`;

it('aux: a helper named aux, under "Problem:", strict output rules, flat format hint', () => {
  assert.equal(
    auxPrompt(item),
    `Create a helper function for this coding problem.

Problem:
${item.prompt}

${RULES}
- Create a helper function named 'aux' that can assist the main function
- The function should return useful data for solving the problem

Your output should follow this format:

def aux(...):
 # your function code here
return result
`,
  );
});

it("main: told about aux(...), not to redefine it, to implement only the entry point; the hint copies the prompt's parameters", () => {
  assert.equal(
    mainPrompt(item),
    `Solve this coding problem by implementing the required function.

Problem:
${item.prompt}

You have access to a helper function: aux(...)

${RULES}
- Do NOT redefine the aux() function
- Implement ONLY the 'add' function as specified
- You can call aux() to assign value to a variable within your function if helpful

Your output should follow this format:

def add(a: int, b: int):
 # your function code here
return result
`,
  );
});

it('both formatters return the reference error string when the signature has no parameters', () => {
  const bare = { prompt: 'def now():\n    """Return the time."""\n', entry_point: 'now' };
  assert.equal(auxPrompt(bare), PARAMS_ERROR);
  assert.equal(mainPrompt(bare), 'Error: Could not extract function information from prompt.');
  assert.equal(mainPrompt({ ...item, entry_point: '' }), PARAMS_ERROR);
});

it('the single-agent prompt asks for the whole function, with an indented hint', () => {
  const text = singleAgentPrompt(item);
  assert.ok(text.startsWith('Solve this coding problem by implementing the required function.\n\nProblem:\n'));
  assert.ok(!text.includes('aux'));
  assert.ok(
    text.includes(
      '- Make sure your solution is complete and handles all cases\n\nYour output should follow this format:\n\ndef add(a: int, b: int):\n    # your function code here\n    return result\n',
    ),
  );
});

it('follow-up turns re-include the instructions under "Original problem and instructions:" with (...) parameters', () => {
  const { aux, main, single } = originalInstructions(item);
  assert.equal(aux, `Original problem and instructions:\n\n${auxPrompt(item)}`);
  assert.ok(main.startsWith('Original problem and instructions:\n\nSolve this coding problem'));
  assert.ok(main.endsWith('def add(...):\n # your function code here\nreturn result\n'));
  assert.ok(single.includes('- Make sure your solution is complete') && !single.includes('aux'));
});

it('baseline prompts show the other agent its partner code', () => {
  assert.ok(sequentialMainPrompt(item, 'def aux(a):\n    return a').includes('already been implemented:\n\ndef aux(a):\n    return a\n\nIMPORTANT'));
  assert.ok(discussionMainPrompt(item, 'def aux(a):\n    return a').includes('The auxiliary function implementation from another agent:\ndef aux(a):'));
});
