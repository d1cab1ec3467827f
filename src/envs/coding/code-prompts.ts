/**
 * Code-completion prompts (`prompt_style: code`) for base models that were never taught to follow
 * instructions, such as magrpo's own `small`. The paper's prompts (prompts.ts) ask an instruct model
 * to "output ONLY the function code"; a base model instead continues a source file. So each prompt
 * here is the start of a Python file that ends where the agent's code begins, and the agent's text
 * is that opening plus its completion, the way HumanEval itself is scored (prompt + completion).
 *
 *   aux      "# Helper for f(x): <summary>\ndef aux("      → "def aux(" + completion
 *   main     "# aux(...) is written by another agent.\n\n\n" + problem prompt P
 *                                                          → P + completion
 *   single   P                                             → P + completion
 *
 * Prompts end without trailing whitespace: the tokenizer merges a newline with the next line's
 * indentation, so a prompt ending in "\n" would ask for a token split the model has never seen.
 *
 * Shown the helper's code (sequential pipeline, discussion), main reads it above its own signature,
 * where a helper sits in every helper-plus-main file of the pretraining corpus. The reward, the
 * baselines and the metrics are the same as for the paper's prompts; only the wording differs.
 */
import type { PromptItem } from './prompts.js';

export const AUX_OPENING = 'def aux(';

/** The part of a role's prompt that belongs to its function, prepended to the reply before scoring. */
export function codeOpening(item: PromptItem, role: 'aux' | 'main' | 'single'): string {
  return role === 'aux' ? AUX_OPENING : item.prompt.trimEnd();
}

/** The problem's one-line summary: the first docstring line of its prompt (else the entry point). */
function summary(item: PromptItem): string {
  const doc = /("""|''')\s*([^\n]*)/.exec(item.prompt);
  return doc?.[2].replace(/("""|''')\s*$/, '').trim() ?? '';
}

/** The signature line `def f(...)` of the entry point, without its colon. */
function signature(item: PromptItem): string {
  const line = item.prompt.split('\n').find((l) => l.startsWith(`def ${item.entry_point}(`));
  return (line ?? `def ${item.entry_point}(...)`).replace(/:\s*$/, '').replace(/^def /, '');
}

/** The problem prompt with the text before it (imports stay at the top of the file). */
function withPreamble(item: PromptItem, preamble: string): string {
  const lines = item.prompt.split('\n');
  const at = lines.findIndex((l) => l.startsWith(`def ${item.entry_point}(`));
  if (at <= 0) return `${preamble}${item.prompt.trimEnd()}`;
  return `${lines.slice(0, at).join('\n').replace(/\s*$/, '\n\n\n')}${preamble}${lines.slice(at).join('\n').trimEnd()}`;
}

/** Agent 1: the helper, told which function will call it and what that function does. */
export function codeAuxPrompt(item: PromptItem): string {
  const what = summary(item);
  return `# Helper for ${signature(item)}${what ? `: ${what}` : ''}\n${AUX_OPENING}`;
}

/**
 * Agent 2: the entry point, after a note that aux(...) exists (round 1), or after the helper's
 * code when main may see it (sequential pipeline, discussion round 2).
 */
export function codeMainPrompt(item: PromptItem, auxCode?: string): string {
  return withPreamble(item, auxCode ? `${auxCode.trimEnd()}\n\n\n` : '# aux(...) is written by another agent.\n\n\n');
}

/** One model writes the entry point alone: the problem prompt as it is. */
export function codeSinglePrompt(item: PromptItem): string {
  return item.prompt.trimEnd();
}

/** Discussion round 2 for aux: main's code first, then the helper again. */
export function codeDiscussionAuxPrompt(item: PromptItem, mainCode: string): string {
  return `${mainCode.trimEnd()}\n\n\n${codeAuxPrompt(item)}`;
}
