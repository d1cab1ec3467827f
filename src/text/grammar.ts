/**
 * Grammar validity: does the text put its function words where English puts them?
 *
 * Word validity (fluency.ts) asks whether each word is real; distinct-2 and words per clause ask
 * whether the text loops or breaks into fragments. None of them sees text like
 *
 *     "in this day, to th a time, and, and be filled and devourant, and in any moment,, in the time"
 *     "the only difference of the completely the was the first was the was suit of the terr"
 *
 * where every word is real but the words around them are not in any English order. English order
 * shows in its closed-class words: articles, pronouns, prepositions, conjunctions and auxiliaries
 * (about 140 words). Each word of a text becomes its class: a function word stands for itself,
 * every other word is W (content), a number N, punctuation its mark; then
 *
 *     grammarValidity(text) = share of the class trigrams of the text that occur at least
 *                             MIN_COUNT times in the reference table
 *
 * The table (data/grammar/function-trigrams.txt, built by scripts/build-grammar-table.ts) counts
 * those trigrams in the prose of the pretraining corpus: Brown Corpus, State of the Union addresses,
 * Moby-Dick (data/README.md). Held-out paragraphs of that prose score 0.96 on average (5th
 * percentile 0.90); "and , and", "the was the" and "W the was" never occur there. It judges order,
 * not meaning: "the tice year the RFC the Hist June" scores 1 (content words are all W) — word
 * validity and reading the samples cover that.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../data/package-root.js';

/** English closed-class words (lower case). Changing this list means rebuilding the table. */
export const FUNCTION_WORDS: readonly string[] = `
a an the this that these those my your his her its our their some any no every each either neither all both
i me you he she it we they him us them myself yourself himself herself itself ourselves themselves
who whom whose which what
of in on at by for with from to into onto upon about above below over under between among through during
before after against without within along across behind beyond near off out up down since until till than as like
and or but nor so yet if because although though while whereas unless whether when where why how then there here
is am are was were be been being have has had having do does did done will would shall should can could may might must
not never also too very just only even still ever`
  .trim()
  .split(/\s+/);

const FUNCTION_SET = new Set(FUNCTION_WORDS);

/** Contraction endings, read as the word they stand for ("don't" → do not, "we'll" → we will). */
const CONTRACTION = /^(.+?)(n't|'ll|'re|'ve|'m|'d|'s)$/;
const EXPANDED: Record<string, string> = { "n't": 'not', "'ll": 'will', "'re": 'are', "'ve": 'have', "'m": 'am', "'d": 'would', "'s": 'is' };
/** "can't", "won't", "shan't" split into a stem that is not the auxiliary itself. */
const IRREGULAR_STEM: Record<string, string> = { ca: 'can', wo: 'will', sha: 'shall' };

/** Words (letters and digits, inner apostrophes), dashes, and the punctuation marks that shape a sentence. */
const TOKEN = /[\p{L}\p{N}]+(?:['’][\p{L}\p{N}]+)*|—|–|--+|[,.;:!?"()]/gu;

function punctuationClass(t: string): string {
  if (t === '!' || t === '?' || t === '.') return '.';
  if (t === ';' || t === ':' || t === '—' || t === '–' || t.startsWith('--')) return ';';
  if (t === '(' || t === ')') return '(';
  return t; // , and "
}

/**
 * The class sequence of one line of text: function words as themselves, other words W, numbers N,
 * punctuation marks by kind ('.' ends a sentence, ';' breaks a clause, ',' '"' '(').
 */
export function wordClasses(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(TOKEN)) {
    const t = m[0].toLowerCase().replace(/’/g, "'");
    if (!/[\p{L}\p{N}]/u.test(t[0])) out.push(punctuationClass(t));
    else if (/^\p{N}/u.test(t)) out.push('N');
    else if (FUNCTION_SET.has(t)) out.push(t);
    else {
      const c = CONTRACTION.exec(t);
      if (!c) out.push('W');
      else {
        const stem = IRREGULAR_STEM[c[1]] ?? c[1];
        out.push(FUNCTION_SET.has(stem) ? stem : 'W', EXPANDED[c[2]]);
      }
    }
  }
  return out;
}

/** The class trigrams of a text, line by line (a trigram never spans a line break). */
export function classTrigrams(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const c = wordClasses(line);
    for (let i = 2; i < c.length; i++) out.push(`${c[i - 2]} ${c[i - 1]} ${c[i]}`);
  }
  return out;
}

/** A trigram counts as English when the reference prose has it at least this many times. */
export const MIN_COUNT = 3;

/** Where the shipped table lives (data/grammar/ in the repository and in the npm package). */
export function grammarTablePath(): string {
  return join(packageRoot(), 'data', 'grammar', 'function-trigrams.txt');
}

let attested: Set<string> | null = null;

/** The trigrams seen at least MIN_COUNT times in the reference prose, loaded once. */
export function attestedTrigrams(): Set<string> {
  if (attested) return attested;
  const path = grammarTablePath();
  if (!existsSync(path)) throw new Error(`grammar validity: the trigram table ${path} is missing (rebuild it with npx tsx scripts/build-grammar-table.ts)`);
  const set = new Set<string>();
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const tab = line.lastIndexOf('\t');
    if (tab < 0 || !(Number(line.slice(tab + 1)) >= 0)) throw new Error(`grammar validity: ${path}: malformed line ${JSON.stringify(line)}`);
    if (Number(line.slice(tab + 1)) >= MIN_COUNT) set.add(line.slice(0, tab));
  }
  attested = set;
  return set;
}

/** One trigram and whether the reference prose has it; for tests and sample inspection. */
export function grammarTrigrams(text: string): { trigram: string; attested: boolean }[] {
  const table = attestedTrigrams();
  return classTrigrams(text).map((trigram) => ({ trigram, attested: table.has(trigram) }));
}

/** Share of the text's class trigrams found in English prose, in [0, 1]; 0 below three tokens. */
export function grammarValidity(text: string): number {
  const grams = grammarTrigrams(text);
  if (grams.length === 0) return 0;
  return grams.filter((g) => g.attested).length / grams.length;
}
