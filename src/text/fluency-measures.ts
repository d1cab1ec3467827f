/**
 * Fluency of generated prose, measured next to the reward so that reward hacking shows up in the
 * logs (a reward that rises while the text turns into letter soup is not learning).
 *
 *   wordValidity(text)  share of the text's letters that stand in real, non-degenerate words
 *   distinctN(text, 2)  unique word bigrams / word bigrams (Li et al., 2016, "distinct-2")
 *   repetitionRate(text) share of word trigrams that repeat an earlier trigram of the same text
 *   grammarValidity(text) share of the text's function-word trigrams found in English prose
 *                       (grammar.ts): catches real words in no English order (", and, and")
 *   clauseLength(text)  mean words per clause (a run of words between punctuation marks): lists
 *                       of fragments ("a kind, a large and a display, the subject, a sort") score
 *                       2–3, English prose 5–9 (TL;DR posts: median 6.7, 5th percentile 4.3)
 *
 * Word validity counts letters, not words, so long nonsense weighs more than a stray typo. A word
 * token's letters are valid when all of these hold:
 *   - its lower-case form is in the English word list (npm `word-list`, MIT, from SCOWL; plus the
 *     one-letter words "a" and "I" and contractions such as don't / it's / we'll);
 *   - its case is a natural one (lower, Capitalised or ALL CAPS; "tHe" is not);
 *   - it is not an initial: a single letter followed by a full stop ("F. P. B. L.");
 *   - it does not repeat the word just before it ("the the the"), nor complete a word trigram
 *     that already appeared in the text (loops such as "I am I am I am").
 * Text without letters scores 0: an empty or punctuation-only answer is not fluent prose.
 */
import { readFileSync } from 'node:fs';
import wordListPath from 'word-list';
import { grammarValidity } from './grammar.js';

let dictionary: Set<string> | null = null;

/** The English word list, loaded once (about 274k lower-case words). */
export function englishWords(): Set<string> {
  if (dictionary) return dictionary;
  // word-list's main module exports the path of its words.txt (one lower-case word a line).
  dictionary = new Set(readFileSync(wordListPath, 'utf8').split('\n').filter(Boolean));
  for (const w of ['a', 'i']) dictionary.add(w);
  return dictionary;
}

/** Contraction endings accepted after a known word (don't, it's, we're, I've, we'll, I'd, I'm). */
const CONTRACTION = /^(.+?)(n't|'s|'re|'ve|'ll|'d|'m|')$/;

/** Word tokens: runs of letters and digits, with inner apostrophes (straight or curly). */
const TOKEN = /[\p{L}\p{N}]+(?:['’][\p{L}\p{N}]+)*/gu;
const LETTER = /\p{L}/gu;
const HAS_LETTER = /\p{L}/u;

interface Token {
  text: string;
  lower: string;
  letters: number;
  /** The character right after the token ("" at the end). */
  next: string;
}

function tokens(text: string): Token[] {
  const out: Token[] = [];
  for (const m of text.matchAll(TOKEN)) {
    const t = m[0].replace(/’/g, "'");
    const end = (m.index ?? 0) + m[0].length;
    out.push({ text: t, lower: t.toLowerCase(), letters: (t.match(LETTER) ?? []).length, next: text[end] ?? '' });
  }
  return out;
}

function naturalCase(w: string): boolean {
  const rest = w.slice(1);
  return w === w.toLowerCase() || w === w.toUpperCase() || rest === rest.toLowerCase();
}

function isEnglishWord(lower: string, words: Set<string>): boolean {
  if (words.has(lower)) return true;
  if (/^\d+(st|nd|rd|th|s)$/.test(lower)) return true; // 3rd, 1990s
  const m = CONTRACTION.exec(lower);
  if (m && words.has(m[1])) return true;
  return lower === "can't" || lower === "won't" || lower === "shan't";
}

/** Per-token validity (see the module comment); exported for tests and sample inspection. */
export function validTokens(text: string): { token: string; letters: number; valid: boolean }[] {
  const words = englishWords();
  const toks = tokens(text);
  const seenTrigrams = new Set<string>();
  return toks.map((t, k) => {
    let valid = t.letters > 0 && naturalCase(t.text) && isEnglishWord(t.lower, words);
    if (t.letters === 1 && t.text.length === 1 && t.next === '.') valid = false; // an initial
    if (k > 0 && toks[k - 1].lower === t.lower) valid = false; // "the the"
    if (k >= 2) {
      const tri = `${toks[k - 2].lower} ${toks[k - 1].lower} ${t.lower}`;
      if (seenTrigrams.has(tri)) valid = false;
      seenTrigrams.add(tri);
    }
    return { token: t.text, letters: t.letters, valid };
  });
}

/** Share of the text's letters that stand in valid words, in [0, 1]; 0 for text without letters. */
export function wordValidity(text: string): number {
  const all = (text.match(LETTER) ?? []).length;
  if (all === 0) return 0;
  let good = 0;
  for (const t of validTokens(text)) if (t.valid) good += t.letters;
  return good / all;
}

function wordNgrams(text: string, n: number): string[] {
  const w = tokens(text).map((t) => t.lower);
  const out: string[] = [];
  for (let i = 0; i + n <= w.length; i++) out.push(w.slice(i, i + n).join(' '));
  return out;
}

/** Unique word n-grams / word n-grams; 0 when the text has fewer than n words. */
export function distinctN(text: string, n = 2): number {
  const grams = wordNgrams(text, n);
  return grams.length ? new Set(grams).size / grams.length : 0;
}

/** Share of word trigrams that already occurred earlier in the same text; 0 below 3 words. */
export function repetitionRate(text: string): number {
  const grams = wordNgrams(text, 3);
  if (grams.length === 0) return 0;
  const seen = new Set<string>();
  let repeats = 0;
  for (const g of grams) {
    if (seen.has(g)) repeats++;
    seen.add(g);
  }
  return repeats / grams.length;
}

/** Where one clause ends: sentence and clause punctuation, brackets, quotes, dashes, line breaks. */
const CLAUSE_BREAK = /[,;:.!?()[\]{}"“”—–]|\s-+\s|\n/;

/**
 * Mean number of words per clause, counting only clauses that hold a word; 0 for text without
 * words. Measured in words, not a fraction: it catches text made of real words that is still not
 * prose — comma-separated fragments — which word validity and distinct-2 both pass.
 */
export function clauseLength(text: string): number {
  let words = 0;
  let clauses = 0;
  for (const clause of text.split(CLAUSE_BREAK)) {
    const n = [...clause.matchAll(TOKEN)].filter((m) => HAS_LETTER.test(m[0])).length;
    words += n;
    if (n > 0) clauses++;
  }
  return clauses ? words / clauses : 0;
}

/** The text-only fluency metrics of one completion (clause_length in words, the rest in [0, 1]). */
export interface TextFluency {
  word_validity: number;
  grammar_validity: number;
  distinct_2: number;
  repetition: number;
  clause_length: number;
}

export const TEXT_FLUENCY_METRICS = ['word_validity', 'grammar_validity', 'distinct_2', 'repetition', 'clause_length'] as const;

export function textFluency(text: string): TextFluency {
  return {
    word_validity: wordValidity(text),
    grammar_validity: grammarValidity(text),
    distinct_2: distinctN(text, 2),
    repetition: repetitionRate(text),
    clause_length: clauseLength(text),
  };
}

/** Mean of each metric over several texts (zeros for none). */
export function meanTextFluency(texts: readonly string[]): TextFluency {
  const m: TextFluency = { word_validity: 0, grammar_validity: 0, distinct_2: 0, repetition: 0, clause_length: 0 };
  if (texts.length === 0) return m;
  for (const t of texts) {
    const f = textFluency(t);
    for (const k of TEXT_FLUENCY_METRICS) m[k] += f[k] / texts.length;
  }
  return m;
}
