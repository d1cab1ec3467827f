/**
 * The text statistics the writing rewards are built from, with the Python semantics of the
 * authors' reward code (OpenMLRL/LLM_Collab_Writing, rewards/tldr_rewards.py and
 * rewards/arxiv_rewards.py): whitespace tokens as `str.split()`, lengths in code points as `len()`,
 * words as `re.findall(r"\b\w+\b", text.lower())`, and a raw-substring transition-word test.
 */

/** Python's `str.isspace()` characters: what `str.split()` and `str.strip()` cut on (Unicode 14). */
const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const SPACE_RUN = new RegExp(`[${PY_SPACE}]+`, 'u');
const EDGE_SPACE = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, 'gu');
/** A regex character class for Python whitespace, for callers mirroring Python `\s`. */
export const PY_SPACE_CLASS = `[${PY_SPACE}]`;

/**
 * Python `\w` on str is "alphanumeric (str.isalnum) or underscore", which is exactly the Unicode
 * categories L* and N* plus "_". Runs are maximal, so `\b\w+\b` is simply every run.
 */
const WORD = /[\p{L}\p{N}_]+/gu;

/** `text.split()`: the pieces between runs of Python whitespace, empty ends dropped. */
export function pySplit(text: string): string[] {
  return text.split(SPACE_RUN).filter((s) => s !== '');
}

/** `text.strip()`. */
export function pyStrip(text: string): string {
  return text.replace(EDGE_SPACE, '');
}

/** Whitespace tokens (no model tokenizer); empty or blank text counts 0. */
export function tokenCount(text: string): number {
  return pySplit(text).length;
}

/** `len(text)` in Python: code points, not UTF-16 units (an emoji counts 1). */
export function charLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** The lowercased word runs of a text, in order, with repeats. */
export function words(text: string): string[] {
  return text.toLowerCase().match(WORD) ?? [];
}

/** The set of words, stopwords removed unless `keepStopwords`. */
export function wordSet(text: string, opts: { keepStopwords?: boolean } = {}): Set<string> {
  const all = words(text);
  return new Set(opts.keepStopwords ? all : all.filter((w) => !STOPWORDS.has(w)));
}

/**
 * Unique words as the rewards count them: stopwords INCLUDED (the reward code calls its counter
 * with the default `exclude_stopwords=False`, although its docstring says "excluding").
 */
export function uniqueWordCount(text: string): number {
  return wordSet(text, { keepStopwords: true }).size;
}

/** |A∩B| / |A∪B| over stopword-free word sets; 1 when both sets are empty. */
export function jaccard(a: string, b: string): number {
  const A = wordSet(a);
  const B = wordSet(b);
  if (A.size === 0 && B.size === 0) return 1;
  let inter = 0;
  for (const w of A) if (B.has(w)) inter++;
  return inter / (A.size + B.size - inter);
}

/** Categories with at least one entry occurring as a raw substring of the lowercased text. */
export function transitionCategories(text: string): TransitionCategory[] {
  const lower = text.toLowerCase();
  return TRANSITION_CATEGORIES.filter((c) => TRANSITION_WORDS[c].some((w) => lower.includes(w)));
}

/** 0 for no category; else 0.4 + 0.05 per extra category (extra capped at 0.6), at most 1. */
export function transitionScale(categories: number): number {
  if (categories <= 0) return 0;
  return Math.min(0.4 + Math.min((categories - 1) * 0.05, 0.6), 1);
}

// Vendored word lists: copied verbatim from OpenMLRL/LLM_Collab_Writing, rewards/tldr_rewards.py
// (commit 45c74e5; identical in rewards/arxiv_rewards.py). 106 stopwords; 12 transition categories,
// 279 entries, 230 distinct. Order kept as in the source.

// biome-ignore format: the vendored lists keep a compact layout
export const STOPWORDS: ReadonlySet<string> = new Set([
  'a', 'all', 'also', 'an', 'and', 'any', 'are', 'as', 'at', 'bad', 'be', 'been', 'being', 'both',
  'but', 'by', 'can', 'could', 'did', 'do', 'does', 'each', 'few', 'first', 'for', 'from', 'good',
  'great', 'had', 'has', 'have', 'he', 'her', 'here', 'him', 'his', 'how', 'i', 'if', 'in', 'is',
  'it', 'its', 'just', 'last', 'left', 'little', 'long', 'low', 'many', 'may', 'me', 'might',
  'more', 'most', 'much', 'must', 'my', 'new', 'no', 'not', 'now', 'of', 'old', 'on', 'only', 'or',
  'other', 'our', 'own', 'right', 'same', 'shall', 'should', 'so', 'some', 'such', 'than', 'that',
  'the', 'their', 'them', 'then', 'there', 'these', 'they', 'this', 'those', 'to', 'too', 'us',
  'very', 'was', 'we', 'were', 'what', 'when', 'where', 'which', 'who', 'why', 'will', 'with',
  'would', 'you', 'your',
]);

// biome-ignore format: the vendored lists keep a compact layout
export const TRANSITION_CATEGORIES = [
  'elaboration', 'examples', 'explanation', 'cause_effect', 'contrast', 'sequence',
  'emphasis', 'summary', 'comparison', 'concession', 'condition', 'time',
] as const;
export type TransitionCategory = (typeof TRANSITION_CATEGORIES)[number];

// biome-ignore format: the vendored lists keep a compact layout
export const TRANSITION_WORDS: Readonly<Record<TransitionCategory, readonly string[]>> = {
  elaboration: [
    'furthermore', 'moreover', 'additionally', 'also', 'besides', 'in addition', 'what is more',
    'not only', 'as well as', 'along with', 'coupled with', 'together with', 'likewise',
    'similarly', 'equally important', 'by the same token', 'in the same way', 'correspondingly',
    'in like manner', 'comparatively', 'analogously',
  ],
  examples: [
    'for example', 'for instance', 'specifically', 'particularly', 'namely', 'such as', 'including',
    'especially', 'in particular', 'to illustrate', 'as an illustration', 'case in point',
    'to demonstrate', 'as evidence', 'to exemplify', 'notably', 'markedly', 'chiefly', 'mainly',
    'primarily', 'above all', 'most importantly',
  ],
  explanation: [
    'that is', 'in other words', 'to put it simply', 'to clarify', 'indeed', 'in fact', 'actually',
    'clearly', 'obviously', 'to put it another way', 'to rephrase', 'more precisely',
    'specifically speaking', 'what this means is', 'the point is', 'essentially', 'basically',
    'fundamentally', 'at its core', 'in essence', 'simply put', 'stated differently',
  ],
  cause_effect: [
    'therefore', 'thus', 'consequently', 'as a result', 'hence', 'accordingly', 'for this reason',
    'due to this', 'because of this', 'so', 'then', 'thereby', 'wherefore', 'thence', 'ergo',
    'as a consequence', 'in consequence', 'it follows that', 'this leads to', 'this results in',
    'this causes', 'this brings about', 'owing to', 'on account of', 'thanks to', 'resulting from',
  ],
  contrast: [
    'however', 'nevertheless', 'nonetheless', 'on the other hand', 'in contrast', 'while',
    'whereas', 'although', 'even though', 'despite this', 'but', 'yet', 'still', 'conversely',
    'on the contrary', 'rather', 'instead', 'alternatively', 'otherwise', 'in opposition',
    'by contrast', 'contrarily', 'notwithstanding', 'regardless', 'all the same', 'even so',
    'be that as it may', 'in any case', 'at any rate',
  ],
  sequence: [
    'first', 'second', 'third', 'next', 'then', 'after that', 'finally', 'lastly', 'initially',
    'subsequently', 'meanwhile', 'to begin with', 'to start with', 'in the beginning', 'at first',
    'at the outset', 'primarily', 'secondly', 'thirdly', 'following this', 'afterward', 'later',
    'later on', 'in the meantime', 'simultaneously', 'concurrently', 'at the same time',
    'in conclusion', 'to conclude', 'ultimately', 'in the end', 'to summarize', 'in summary',
  ],
  emphasis: [
    'indeed', 'certainly', 'surely', 'undoubtedly', 'without doubt', 'definitely', 'absolutely',
    'positively', 'unquestionably', 'indubitably', 'of course', 'naturally', 'obviously', 'clearly',
    'evidently', 'manifestly', 'undeniably', 'admittedly', 'granted', 'to be sure', 'in fact',
    'as a matter of fact', 'notably', 'significantly',
  ],
  summary: [
    'in summary', 'in conclusion', 'to summarize', 'to conclude', 'in short', 'in brief', 'briefly',
    'to sum up', 'on the whole', 'overall', 'all in all', 'in essence', 'essentially', 'basically',
    'fundamentally', 'in the final analysis', 'after all', 'ultimately', 'in the end',
    'when all is said and done', 'the bottom line is',
  ],
  comparison: [
    'similarly', 'likewise', 'in the same way', 'equally', 'just as', 'comparable to',
    'in comparison', 'by the same token', 'correspondingly', 'in like manner',
    'along the same lines', 'in similar fashion', 'analogously', 'by analogy', 'just like',
    'much like', 'as with',
  ],
  concession: [
    'although', 'though', 'even though', 'while', 'whereas', 'despite', 'in spite of',
    'regardless of', 'notwithstanding', 'admittedly', 'granted', 'even if', 'be that as it may',
    'nevertheless', 'nonetheless', 'however', 'yet', 'still', 'all the same',
  ],
  condition: [
    'if', 'unless', 'provided that', 'assuming that', 'supposing that', 'in case',
    'in the event that', 'on condition that', 'given that', 'as long as', 'so long as', 'only if',
    'even if', 'whether or not', 'should', 'were', 'had', 'otherwise', 'or else',
  ],
  time: [
    'when', 'while', 'as', 'after', 'before', 'until', 'since', 'during', 'meanwhile',
    'simultaneously', 'at the same time', 'concurrently', 'previously', 'formerly', 'earlier',
    'later', 'afterward', 'subsequently', 'eventually', 'finally', 'recently', 'lately', 'nowadays',
    'currently', 'presently', 'immediately',
  ],
};
