/**
 * Completion prompts (`prompt_style: completion`) for base models that were never taught to follow
 * instructions, such as magrpo's own models. The paper's prompts (prompts.ts) end in a bulleted
 * list of instructions ("- Be factual and informative"); a base model does not obey them, it
 * continues the document, and the natural continuation of a bulleted list is more bullets. Under
 * the tldr reward, which pays the concise agent for few words and few distinct words, that became
 * the demo's exploit: headings and empty bullets made of real words ("- Added os", "POST:").
 *
 * Here each prompt is the source text followed by the opening of the paragraph the agent should
 * write, so the continuation is prose about the text:
 *
 *   tldr   agent 1  "<post>\n\nIn short,"              agent 2  "<post>\n\nIn other words,"
 *   arxiv  agent 1  "<abstract>\n\nBackground."         agent 2  "<abstract>\n\nMethods and implications."
 *
 * The openings are prompt, not completion: rewards score what the agents wrote. Baselines get the
 * same kind of prompt: the single agent continues agent 2's opening and its text is split by the
 * fallback ratio (a base model writes no [PARAGRAPH_SPLIT]); in the sequential pipeline and the
 * discussion an agent reads the other's paragraph, with its opening, before writing its own.
 * An empty source text gives the paper prompts' error string.
 */
import { type BaselinePrompts, orError } from './prompts.js';

/** The two agents' openings and what their prompts share. */
interface Openings {
  what: 'prompt' | 'abstract';
  first: string;
  second: string;
  fallbackRatio: readonly [number, number];
}

const TLDR: Openings = { what: 'prompt', first: 'In short,', second: 'In other words,', fallbackRatio: [2.0, 3.0] };
const ARXIV: Openings = { what: 'abstract', first: 'Background.', second: 'Methods and implications.', fallbackRatio: [1.0, 1.3] };

export interface CompletionPrompts {
  formatters: readonly [(source: string) => string, (source: string) => string];
  baselines: BaselinePrompts;
}

function completionPrompts(o: Openings): CompletionPrompts {
  const first = (source: string) => orError(source, o.what, () => `${source}\n\n${o.first}`);
  const second = (source: string) => orError(source, o.what, () => `${source}\n\n${o.second}`);
  // An agent that reads the other's paragraph sees it as the document shows it: opening + text.
  const afterFirst = (source: string, text: string) => orError(source, o.what, () => `${source}\n\n${o.first} ${text}\n\n${o.second}`);
  const afterSecond = (source: string, text: string) => orError(source, o.what, () => `${source}\n\n${o.second} ${text}\n\n${o.first}`);
  return {
    formatters: [first, second],
    baselines: {
      single: second,
      fallbackRatio: o.fallbackRatio,
      sequential: [first, afterFirst],
      discussRound1: [first, second],
      discussRound2: [afterSecond, afterFirst],
    },
  };
}

export const TLDR_COMPLETION = completionPrompts(TLDR);
export const ARXIV_COMPLETION = completionPrompts(ARXIV);
