/**
 * The TL;DR environment with a joint-policy adapter a base model can follow, for centralized
 * MAGRPO in the algorithm comparison (configs/compare/centralized.yaml).
 *
 * The reference's tagged joint prompt (rl/algorithms/centralized.ts TAGGED_ADAPTER) repeats the
 * post once per role and adds instructions: 400–1000 tokens, past models/base's 512-token context
 * (no item fits with room for an answer), and a base model does not write the tags anyway. Here
 * the joint prompt is the single-agent baseline's (the post, then "In other words,": writer 2's
 * prompt) and the completion is split at its first sentence end: the first sentence is the concise
 * summary, the rest the detailed one. Without a sentence end, the text is split at 1 / (1 + 2.5)
 * of its length on a space (the middle of the single-agent baseline's 2–3 ratio). Everything
 * else — data, reward, fluency guard, eval metrics — is the tldr environment's.
 */
import type { Environment } from '../../src/envs/environment.js';
import { type TldrItem, type TldrOptions, tldrEnvironment } from '../../src/envs/writing/index.js';
import type { CentralAdapter } from '../../src/rl/task.js';

/** The concise and the detailed summary in one joint completion. */
export function splitJoint(completion: string): [string, string] {
  const text = completion.trim();
  const end = /[.!?](?=\s+\S)/.exec(text);
  if (end) return [text.slice(0, end.index + 1).trim(), text.slice(end.index + 1).trim()];
  let cut = Math.floor(text.length / 3.5);
  while (cut < text.length && !/\s/.test(text[cut])) cut++;
  return [text.slice(0, cut).trim(), text.slice(cut).trim()];
}

export const ADAPTER: CentralAdapter<TldrItem> = {
  buildPrompt: (_item, rolePrompts) => rolePrompts[rolePrompts.length - 1],
  parseCompletion: (completion) => splitJoint(completion),
};

export default function environment(options: TldrOptions): Environment<TldrItem> {
  const env = tldrEnvironment(options);
  return { ...env, task: (o) => ({ ...env.task(o), centralAdapter: ADAPTER }) };
}
