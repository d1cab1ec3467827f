/**
 * Is a summary about its post, and is it more than a copy of it? Measures that the writing reward
 * (lengths, shared words between the two agents, transition words) and its fluency guard do not
 * optimise, so a reward gain that makes summaries worse shows up here:
 * - `contentSupport`: share of the summary's content words (function words removed) that occur
 *   in the post: low for text about something else;
 * - `bigramSupport`: share of the summary's word bigrams found in the post: high for copying;
 * - `rougeL`: ROUGE-L precision of the summary against the post (longest common word subsequence
 *   over the summary's length), the usual extractiveness-tolerant faithfulness proxy;
 * - `copied8`: share of the summary's words inside a run of 8+ words copied from the post;
 * - `echo`: ROUGE-L F1 between two texts (the two agents' answers to one item): high when one
 *   agent repeats the other.
 * Words are lowercased runs of letters, digits and apostrophes.
 */
import { FUNCTION_WORDS } from './grammar.js';

const FUNCTION = new Set(FUNCTION_WORDS);

export function wordsOf(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? [];
}

const contentWordsOf = (words: readonly string[]) => words.filter((w) => !FUNCTION.has(w) && /\p{L}/u.test(w));

/** Share of the summary's content words that occur in the post (0 for a summary without any). */
export function contentSupport(summary: string, post: string): number {
  const content = contentWordsOf(wordsOf(summary));
  if (content.length === 0) return 0;
  const inPost = new Set(wordsOf(post));
  return content.filter((w) => inPost.has(w)).length / content.length;
}

const bigrams = (w: readonly string[]) => w.slice(1).map((x, i) => `${w[i]} ${x}`);

/** Share of the summary's word bigrams found in the post. */
export function bigramSupport(summary: string, post: string): number {
  const b = bigrams(wordsOf(summary));
  if (b.length === 0) return 0;
  const inPost = new Set(bigrams(wordsOf(post)));
  return b.filter((x) => inPost.has(x)).length / b.length;
}

/** Length of the longest common subsequence of two word lists (O(|a|·|b|) time, O(|b|) memory). */
export function lcsLength(a: readonly string[], b: readonly string[]): number {
  let prev = new Uint32Array(b.length + 1);
  let cur = new Uint32Array(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) cur[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], cur[j - 1]);
    [prev, cur] = [cur, prev];
  }
  return prev[b.length];
}

/** ROUGE-L precision of `summary` against `post`: LCS / summary words. */
export function rougeL(summary: string, post: string): number {
  const s = wordsOf(summary);
  return s.length === 0 ? 0 : lcsLength(s, wordsOf(post)) / s.length;
}

/** Share of the summary's words that sit in a run of `n` or more consecutive words copied from the post. */
export function copiedRuns(summary: string, post: string, n = 8): number {
  const s = wordsOf(summary);
  if (s.length === 0) return 0;
  const p = wordsOf(post);
  const grams = new Set<string>();
  for (let i = 0; i + n <= p.length; i++) grams.add(p.slice(i, i + n).join(' '));
  const copied = new Uint8Array(s.length);
  for (let i = 0; i + n <= s.length; i++) if (grams.has(s.slice(i, i + n).join(' '))) copied.fill(1, i, i + n);
  return copied.reduce((a, b) => a + b, 0) / s.length;
}

/** ROUGE-L F1 between two texts: how much one repeats the other (1 for identical texts). */
export function echo(a: string, b: string): number {
  const x = wordsOf(a);
  const y = wordsOf(b);
  if (x.length === 0 || y.length === 0) return 0;
  const l = lcsLength(x, y);
  return l === 0 ? 0 : (2 * l) / (x.length + y.length);
}

export interface Faithfulness {
  content_support: number;
  bigram_support: number;
  rouge_l: number;
  copied_8: number;
}

export const FAITHFULNESS_METRICS = ['content_support', 'bigram_support', 'rouge_l', 'copied_8'] as const;

export function faithfulness(summary: string, post: string): Faithfulness {
  return {
    content_support: contentSupport(summary, post),
    bigram_support: bigramSupport(summary, post),
    rouge_l: rougeL(summary, post),
    copied_8: copiedRuns(summary, post),
  };
}
