/**
 * Every prompt the coding environment shows a model, worded as the reference's (docs/environments.md
 * "Coding: roles and prompts"): the two training formatters (train_magrpo.py at the
 * paper-era commit 8eceeec), the single-agent prompt, the "Original problem and instructions"
 * blocks follow-up turns may re-include (external/common.py), the test-time-interaction baseline
 * prompts (baselines/multi_agent_tti.py) and the expert's review request (external/expert_edits.py).
 *
 * Two format hints exist in the reference and are kept apart on purpose: the training formatters
 * write `def f(...):\n # your function code here\nreturn result` (body NOT indented), the
 * baselines indent it by four spaces.
 */
import { promptParams } from './code-utils.js';

/** What a prompt needs from an item. */
export interface PromptItem {
  prompt: string;
  entry_point: string;
}

/** Returned instead of a prompt when the prompt's signature has no parameters to copy (reference behaviour). */
export const PARAMS_ERROR = 'Error: Could not extract function information from prompt.';

const NO_PROSE = [
  '- Output ONLY the function code, no explanations or examples',
  '- Do NOT include markdown code blocks (```python)',
  '- Do NOT include any text before or after the function',
  '- Do NOT include test cases or example usage',
];
const AUX_RULES = [
  "- Create a helper function named 'aux' that can assist the main function",
  '- The function should return useful data for solving the problem',
];
const mainRules = (entryPoint: string) => [
  '- Do NOT redefine the aux() function',
  `- Implement ONLY the '${entryPoint}' function as specified`,
  '- You can call aux() to assign value to a variable within your function if helpful',
];
const singleRules = (entryPoint: string) => [
  `- Implement ONLY the '${entryPoint}' function as specified`,
  '- Make sure your solution is complete and handles all cases',
];

/** The training formatters' hint: the body is NOT indented (as the reference writes it). */
const flatHint = (signature: string) => `Your output should follow this format:\n\n${signature}:\n # your function code here\nreturn result\n`;
/** The baselines' hint, indented. */
const indentedHint = (signature: string, what = 'your function code here') =>
  `Your output should follow this format:\n\n${signature}:\n    # ${what}\n    return result\n`;

const block = (...parts: string[]) => parts.join('\n\n');
const rules = (lines: string[]) => `IMPORTANT INSTRUCTIONS:\n${lines.join('\n')}`;
const params = (item: PromptItem) => promptParams(item.prompt).join(', ');

/** Agent 1 (aux), first turn. */
export function auxPrompt(item: PromptItem): string {
  if (promptParams(item.prompt).length === 0 || !item.entry_point) return PARAMS_ERROR;
  return block('Create a helper function for this coding problem.', `Problem:\n${item.prompt}`, rules([...NO_PROSE, ...AUX_RULES]), flatHint('def aux(...)'));
}

/** Agent 2 (main), first turn: told about aux(...), hinted with the prompt's own parameters. */
export function mainPrompt(item: PromptItem): string {
  if (promptParams(item.prompt).length === 0 || !item.entry_point) return PARAMS_ERROR;
  return block(
    'Solve this coding problem by implementing the required function.',
    `Problem:\n${item.prompt}`,
    'You have access to a helper function: aux(...)',
    rules([...NO_PROSE, ...mainRules(item.entry_point)]),
    flatHint(`def ${item.entry_point}(${params(item)})`),
  );
}

/** One model writing the whole solution (single-agent training and the single_agent baseline). */
export function singleAgentPrompt(item: PromptItem): string {
  return block(
    'Solve this coding problem by implementing the required function.',
    `Problem:\n${item.prompt}`,
    rules([...NO_PROSE, ...singleRules(item.entry_point)]),
    indentedHint(`def ${item.entry_point}(${params(item)})`),
  );
}

const ORIGINAL = 'Original problem and instructions:';

/** The first-turn instructions re-included by follow-up turns when `originalPrompt` is on (parameters shown as "..."). */
export function originalInstructions(item: PromptItem): { aux: string; main: string; single: string } {
  const signature = `def ${item.entry_point}(...)`;
  return {
    aux: block(
      ORIGINAL,
      'Create a helper function for this coding problem.',
      `Problem:\n${item.prompt}`,
      rules([...NO_PROSE, ...AUX_RULES]),
      flatHint('def aux(...)'),
    ),
    main: block(
      ORIGINAL,
      'Solve this coding problem by implementing the required function.',
      `Problem:\n${item.prompt}`,
      'You have access to a helper function: aux(...)',
      rules([...NO_PROSE, ...mainRules(item.entry_point)]),
      flatHint(signature),
    ),
    single: block(
      ORIGINAL,
      'Solve this coding problem by implementing the required function.',
      `Problem:\n${item.prompt}`,
      rules([...NO_PROSE, ...singleRules(item.entry_point)]),
      flatHint(signature),
    ),
  };
}

/** Baselines, round 1: the helper writer. */
export function baselineAuxPrompt(item: PromptItem): string {
  return block(
    'Create a helper function for this coding problem.',
    `Problem:\n${item.prompt}`,
    rules([...NO_PROSE, ...AUX_RULES]),
    indentedHint('def aux(...)'),
  );
}

/** naive_concat (and discussion round 1): main without seeing aux. */
export function baselineMainPrompt(item: PromptItem): string {
  return block(
    'Solve this coding problem by implementing the required function.',
    `Problem:\n${item.prompt}`,
    `You have access to a helper function: aux(${params(item)})`,
    rules([
      ...NO_PROSE,
      '- Do NOT redefine the aux() function',
      `- Implement ONLY the '${item.entry_point}' function as specified`,
      '- You call aux() to assign value to a variable within your function',
    ]),
    indentedHint(`def ${item.entry_point}(${params(item)})`),
  );
}

/** sequential_pipeline: main sees aux's raw output as "already implemented". */
export function sequentialMainPrompt(item: PromptItem, auxCode: string): string {
  return block(
    'Solve this coding problem by implementing the required function.',
    `Problem:\n${item.prompt}`,
    'You have access to this helper function that has already been implemented:',
    auxCode,
    rules([
      ...NO_PROSE,
      "- Do NOT redefine the aux() function (it's already provided above)",
      `- Implement ONLY the '${item.entry_point}' function as specified`,
      '- You can call aux() to get useful data for solving the problem',
      '- Make sure to use the aux() function effectively in your solution',
    ]),
    indentedHint(`def ${item.entry_point}(${params(item)})`),
  );
}

/** one_round_discussion, round 2: aux sees main's code and improves what main needs. */
export function discussionAuxPrompt(item: PromptItem, mainCode: string): string {
  return block(
    "Improve your helper function based on how it's being used by the main function.",
    `Problem:\n${item.prompt}`,
    `The main function implementation from another agent:\n${mainCode}`,
    rules([
      '- Output ONLY the improved aux function code, no explanations',
      ...NO_PROSE.slice(1, 3),
      "- Create an improved helper function named 'aux' that better assists the main function",
      '- Look at how the main function uses (or could use) aux() and optimize accordingly',
      '- The aux function should provide exactly what the main function needs',
    ]),
    indentedHint('def aux(...)', 'your improved function code here'),
  );
}

/** one_round_discussion, round 2: main sees aux's code and uses it correctly. */
export function discussionMainPrompt(item: PromptItem, auxCode: string): string {
  return block(
    'Improve your main function implementation based on the helper function provided.',
    `Problem:\n${item.prompt}`,
    `The auxiliary function implementation from another agent:\n${auxCode}`,
    rules([
      '- Output ONLY the improved main function code, no explanations',
      ...NO_PROSE.slice(1, 3),
      "- Do NOT redefine the aux() function (it's already provided above)",
      `- Implement ONLY the improved '${item.entry_point}' function`,
      '- Make effective use of the aux() function based on what it provides',
      "- Ensure your solution correctly uses the aux() function's return value",
    ]),
    indentedHint(`def ${item.entry_point}(${params(item)})`, 'your improved function code here'),
  );
}

/** The expert's review request (expert_edits); the reply must end in {"aux": ..., "main": ...}. */
export function expertPrompt(problem: string, combinedCode: string): string {
  return `You are an expert reviewing code collaboratively written by two agents for the task: ${problem}
The auxiliary agent implements a helper function (aux), and the main agent implements the task entry function.

Your job is to return proposed edits for each agent as JSON with keys 'aux' and 'main'.
Guidelines:
1) If a function is missing, provide a minimal correct implementation as the edit.
2) If both exist, provide concise edits that would help pass the provided unit tests.
3) If no changes are needed, respond with short note: "Perfect! No changes needed!" for that field.

Provide only JSON in the following format: { "aux": <string with edits or replacement>, "main": <string with edits or replacement> }
Here is the current combined code to consider:
${combinedCode}
`;
}
