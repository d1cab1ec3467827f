/**
 * How the coding prompts are worded, as one choice per environment (`prompt_style`):
 *
 *   instruct  the paper's instructions (prompts.ts) as raw text; the agent's whole reply is its code
 *   chat      the same instructions as the user turn of each agent's chat template, for
 *             instruction-tuned models; feedback prompts of later turns too
 *   code      code-completion prompts (code-prompts.ts), for base models; the agent's code is the
 *             prompt's opening plus its reply
 *
 * The opening depends only on the agent's role ('' for instruct and chat), so the trainer and the
 * baselines rebuild an agent's code the same way: `opening(item, role) + completion`. The prompt
 * functions return text; `wrap` turns any of them, or a transition's prompt, into what the agent
 * is sent, so the trainer and the baselines format alike.
 */

import type { Prompt } from '../../rl/task.js';
import { userTurn } from '../environment.js';
import { codeAuxPrompt, codeDiscussionAuxPrompt, codeMainPrompt, codeOpening, codeSinglePrompt } from './code-prompts.js';
import { extractSpecificFunction } from './code-utils.js';
import type { PromptStyleName } from './options.js';
import {
  auxPrompt,
  baselineAuxPrompt,
  baselineMainPrompt,
  discussionAuxPrompt,
  discussionMainPrompt,
  mainPrompt,
  type PromptItem,
  sequentialMainPrompt,
  singleAgentPrompt,
} from './prompts.js';

export type CodingRole = 'aux' | 'main' | 'single';

export interface PromptStyle {
  readonly name: PromptStyleName;
  /** Training formatters, first turn. */
  aux(item: PromptItem): string;
  main(item: PromptItem): string;
  single(item: PromptItem): string;
  /** Baselines: independent round-1 prompts (the paper words these slightly differently from training). */
  baselineAux(item: PromptItem): string;
  baselineMain(item: PromptItem): string;
  /** Main shown aux's code (sequential pipeline, discussion round 2). */
  mainSeeingAux(item: PromptItem, auxCode: string, round: 'sequential' | 'discussion'): string;
  /** Aux shown main's code (discussion round 2). */
  auxSeeingMain(item: PromptItem, mainCode: string): string;
  /** The start of the role's function that its prompt already holds ('' for instruct). */
  opening(item: PromptItem, role: CodingRole): string;
  /** What one agent shows the other of its code: the reply as it is, or just its function. */
  share(code: string, fn: string): string;
  /** A prompt's text as the agent is sent it: the text itself, or (chat) the user turn. */
  wrap(text: string): Prompt;
}

export const INSTRUCT: PromptStyle = {
  name: 'instruct',
  aux: auxPrompt,
  main: mainPrompt,
  single: singleAgentPrompt,
  baselineAux: baselineAuxPrompt,
  baselineMain: baselineMainPrompt,
  mainSeeingAux: (item, auxCode, round) => (round === 'sequential' ? sequentialMainPrompt(item, auxCode) : discussionMainPrompt(item, auxCode)),
  auxSeeingMain: discussionAuxPrompt,
  opening: () => '',
  share: (code) => code,
  wrap: (text) => text,
};

export const CHAT: PromptStyle = { ...INSTRUCT, name: 'chat', wrap: userTurn };

export const CODE: PromptStyle = {
  name: 'code',
  aux: codeAuxPrompt,
  main: (item) => codeMainPrompt(item),
  single: codeSinglePrompt,
  baselineAux: codeAuxPrompt,
  baselineMain: (item) => codeMainPrompt(item),
  mainSeeingAux: (item, auxCode) => codeMainPrompt(item, auxCode),
  auxSeeingMain: codeDiscussionAuxPrompt,
  opening: codeOpening,
  share: (code, fn) => extractSpecificFunction(code, fn) || code,
  wrap: (text) => text,
};

export function promptStyle(name: PromptStyleName = 'instruct'): PromptStyle {
  if (name === 'instruct') return INSTRUCT;
  if (name === 'chat') return CHAT;
  if (name === 'code') return CODE;
  throw new Error(`prompt_style: got ${JSON.stringify(name)}, expected "instruct", "chat" or "code"`);
}
