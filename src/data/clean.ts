/**
 * Text cleaning for the pretraining corpus: normalization of prose and code, boilerplate removal,
 * paragraph splitting, and rebuilding readable sentences from the POS-tagged Brown corpus.
 */

const QUOTES: [RegExp, string][] = [
  [/[\u2018\u2019\u201a\u201b\u2032]/g, "'"],
  [/[\u201c\u201d\u201e\u201f\u2033]/g, '"'],
  [/[\u2010\u2011]/g, '-'],
  [/\u2026/g, '...'],
];

/** Characters that carry no text: zero-width marks, BOM, and C0/C1 controls other than \t and \n. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const INVISIBLE = /[\u200b-\u200d\u2060\ufeff\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;

/** Shared by prose and code: NFC, LF line ends, straight quotes, no invisible characters. */
function normalizeCommon(text: string): string {
  let s = text.normalize('NFC').replace(/\r\n?/g, '\n').replace(INVISIBLE, '');
  for (const [re, to] of QUOTES) s = s.replace(re, to);
  return s;
}

/** Prose: single spaces inside lines, no trailing spaces, at most one blank line in a row. */
export function normalizeProse(text: string): string {
  return normalizeCommon(text)
    .replace(/[\t\u00a0\u2000-\u200a\u202f\u205f\u3000 ]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** Code: indentation kept as written; trailing spaces removed; at most two blank lines in a row. */
export function normalizeCode(text: string): string {
  return normalizeCommon(text)
    .replace(/\u00a0/g, ' ')
    .replace(/[ \t]+\n/g, '\n')
    .replace(/\n{4,}/g, '\n\n\n')
    .replace(/^\n+|\s+$/g, '');
}

const GUTENBERG_START = /^.*\*{3}\s*START OF (?:THE |THIS )?PROJECT GUTENBERG[^\n]*\n/im;
const GUTENBERG_END = /^.*(?:\*{3}\s*END OF (?:THE |THIS )?PROJECT GUTENBERG|End of (?:the )?Project Gutenberg).*$/im;

/** Drops Project Gutenberg headers and trailing licence text when present. */
export function stripBoilerplate(text: string): string {
  let s = text;
  const start = GUTENBERG_START.exec(s);
  if (start !== null) s = s.slice(start.index + start[0].length);
  const end = GUTENBERG_END.exec(s);
  if (end !== null) s = s.slice(0, end.index);
  return s;
}

export function splitParagraphs(text: string): string[] {
  return text
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

const HEADING_LINE = /^(?:(?:CHAPTER|Chapter|BOOK|Book|PART|Part)\s+[\dIVXLC]+\b.{0,80}|CONTENTS|Contents|ETYMOLOGY\.?|EXTRACTS.{0,60})$/;

function isHeading(paragraph: string): boolean {
  return paragraph.split('\n').every((line) => HEADING_LINE.test(line.trim()));
}

/**
 * Removes tables of contents: any run of three or more heading-only paragraphs (e.g. "CHAPTER 1.
 * Loomings." after "CHAPTER 2. ...") and any multi-line paragraph made only of headings. A lone
 * chapter heading at the top of a chapter stays.
 */
export function dropChapterIndex(paragraphs: readonly string[]): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < paragraphs.length) {
    let j = i;
    while (j < paragraphs.length && isHeading(paragraphs[j])) j++;
    if (j === i) {
      out.push(paragraphs[i]);
      i++;
      continue;
    }
    const run = paragraphs.slice(i, j);
    const isIndex = run.length >= 3 || run.some((p) => p.includes('\n'));
    if (!isIndex) out.push(...run);
    i = j;
  }
  return out;
}

/** The word of a `word/tag` token (tags never contain '/', words may: `1/2/cd`). */
export function stripPosTag(token: string): string {
  const slash = token.lastIndexOf('/');
  return slash > 0 ? token.slice(0, slash) : token;
}

const NO_SPACE_BEFORE = new Set([',', '.', ':', ';', '?', '!', ')', ']', '}', "''", "'", '%']);
const NO_SPACE_AFTER = new Set(['(', '[', '{', '``', '$']);

/**
 * Joins tokens into text: `` and '' become straight double quotes hugging the quoted words, and
 * punctuation attaches to its neighbour ("word ," → "word,", "( word )" → "(word)").
 */
export function detokenize(tokens: readonly string[]): string {
  let out = '';
  let glueNext = true;
  for (const tok of tokens) {
    const text = tok === '``' || tok === "''" ? '"' : tok;
    if (!glueNext && !NO_SPACE_BEFORE.has(tok)) out += ' ';
    out += text;
    glueNext = NO_SPACE_AFTER.has(tok);
  }
  return out;
}

/** The packaged corpus writes every sentence-level ? ; ! : twice (`?/. ?/.`); one is the text. */
const DOUBLED_MARK = /^[?;!:]\/\./;
const INSIDE_QUOTES = new Set(['.', ',', '?', '!']);

/** One tagged Brown line (a sentence or a headline) → readable text. */
export function untagBrownLine(line: string): string {
  const tokens = line
    .trim()
    .split(/\s+/)
    .filter((t, i, all) => t !== '' && !(DOUBLED_MARK.test(t) && all[i - 1] === t))
    .map(stripPosTag);
  // Brown always puts . , ? ! after a closing quote; edited American text puts them inside.
  for (let i = 0; i + 1 < tokens.length; i++) {
    if (tokens[i] === "''" && INSIDE_QUOTES.has(tokens[i + 1])) [tokens[i], tokens[i + 1]] = [tokens[i + 1], tokens[i]];
  }
  return detokenize(tokens);
}

function isHeadline(line: string): boolean {
  const tokens = line
    .trim()
    .split(/\s+/)
    .filter((t) => t !== '');
  return tokens.length > 0 && tokens.every((t) => /-hl$/.test(t));
}

/**
 * A Brown corpus file (one sentence per line, paragraphs split by blank lines, headlines tagged
 * `-hl`) → paragraphs of plain text; each headline becomes its own paragraph.
 */
export function brownParagraphs(raw: string): string[] {
  const out: string[] = [];
  for (const block of raw.split(/\n\s*\n/)) {
    let sentences: string[] = [];
    const flush = (): void => {
      if (sentences.length > 0) out.push(sentences.join(' '));
      sentences = [];
    };
    for (const line of block.split('\n')) {
      if (line.trim() === '') continue;
      if (isHeadline(line)) {
        flush();
        out.push(untagBrownLine(line));
      } else sentences.push(untagBrownLine(line));
    }
    flush();
  }
  return out;
}

const ABBREVIATIONS = new Set(['Mr', 'Mrs', 'Ms', 'Dr', 'St', 'Jr', 'Sr', 'Gen', 'Gov', 'Hon', 'Col', 'Capt', 'No', 'U.S', 'vs', 'etc', 'Co', 'Inc']);

/** Splits running text into sentences at . ! ? followed by a capital, not after common abbreviations or initials. */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const m of text.matchAll(/[.!?]["')\]]*\s+(?=["'([]?[A-Z0-9])/g)) {
    const end = (m.index as number) + m[0].trimEnd().length;
    const before =
      text
        .slice(start, m.index as number)
        .split(/\s+/)
        .pop() ?? '';
    if (ABBREVIATIONS.has(before) || /^[A-Z]$/.test(before)) continue;
    out.push(text.slice(start, end).trim());
    start = (m.index as number) + m[0].length;
  }
  const rest = text.slice(start).trim();
  if (rest !== '') out.push(rest);
  return out;
}

/** Groups sentences into paragraphs of about `targetChars` (text that has no paragraph breaks). */
export function paragraphize(text: string, targetChars: number): string[] {
  const out: string[] = [];
  let current = '';
  for (const s of splitSentences(text)) {
    current = current === '' ? s : `${current} ${s}`;
    if (current.length >= targetChars) {
      out.push(current);
      current = '';
    }
  }
  if (current !== '') out.push(current);
  return out;
}

/** The key two paragraphs share when they differ only in case, punctuation or spacing. */
export function normalizedKey(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}
