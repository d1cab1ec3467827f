/**
 * Readers for the large corpus's Debian sources: WordNet glosses, dictd dictionaries, the King
 * James Bible, Sphinx reStructuredText sources, HTML manuals and Python source files. Each returns
 * raw documents (one file, chapter or block of entries each) in a fixed order; cleaning, dedup and
 * decontamination happen in build-large.ts.
 */
import { readFileSync, statSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { debFiles, runTool } from './debian.js';
import { DataError } from './errors.js';
import { htmlToText, rstToText, unwrapParagraphs } from './markup.js';
import { Rng } from './rng.js';

export interface LargeDoc {
  source: string;
  /** Where it came from (a file path, a chapter, an entry range). */
  id: string;
  text: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The file as UTF-8, or null when it is not valid UTF-8 (test data, legacy encodings). */
export function readUtf8(file: string): string | null {
  try {
    return utf8.decode(readFileSync(file));
  } catch {
    return null;
  }
}

/** Documents of `size` consecutive items each, ids `<label> <first>-<last>`. */
function chunk(source: string, label: string, items: readonly string[], size: number, sep: string): LargeDoc[] {
  const docs: LargeDoc[] = [];
  for (let i = 0; i < items.length; i += size) {
    docs.push({ source, id: `${label} ${i + 1}-${Math.min(i + size, items.length)}`, text: items.slice(i, i + size).join(sep) });
  }
  return docs;
}

const WN_POS: Record<string, string> = { n: 'noun', v: 'verb', a: 'adjective', s: 'adjective', r: 'adverb' };

/**
 * WordNet 3.0 synsets as dictionary lines, `word, synonym (noun): gloss; "example"`, in the
 * database's order; 100 synsets per document. The licence header (lines starting with spaces) is skipped.
 */
export function readWordnet(source: string, dir = '/usr/share/wordnet'): LargeDoc[] {
  const docs: LargeDoc[] = [];
  for (const pos of ['noun', 'verb', 'adj', 'adv']) {
    const file = `${dir}/data.${pos}`;
    const entries: string[] = [];
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line === '' || line.startsWith('  ')) continue;
      const bar = line.indexOf(' | ');
      if (bar < 0) throw new DataError('SOURCE_FORMAT', file, `synset line without a gloss: ${line.slice(0, 40)}`, 'reinstall wordnet-base');
      const fields = line.slice(0, bar).split(' ');
      const count = Number.parseInt(fields[3], 16);
      const words = Array.from({ length: count }, (_, i) => fields[4 + 2 * i].replace(/\(\w+\)$/, '').replace(/_/g, ' '));
      entries.push(`${words.join(', ')} (${WN_POS[fields[2]] ?? fields[2]}): ${line.slice(bar + 3).trim()}`);
    }
    docs.push(...chunk(source, `data.${pos}`, entries, 100, '\n'));
  }
  return docs;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

function dictNumber(s: string): number {
  let n = 0;
  for (const ch of s) n = n * 64 + B64.indexOf(ch);
  return n;
}

/**
 * A dictd database (`<name>.index` + `<name>.dict.dz`, a gzip file): every entry's text, in index
 * order, skipping the `00-database-*` metadata entries; 20 entries per document.
 */
export function readDictd(source: string, name: string, dir = '/usr/share/dictd'): LargeDoc[] {
  const dict = gunzipSync(readFileSync(`${dir}/${name}.dict.dz`));
  const entries: string[] = [];
  const seen = new Set<number>();
  for (const line of readFileSync(`${dir}/${name}.index`, 'utf8').split('\n')) {
    const [head, off, len] = line.split('\t');
    if (len === undefined || head.startsWith('00database') || head.startsWith('00-database')) continue;
    const start = dictNumber(off);
    if (seen.has(start)) continue;
    seen.add(start);
    const entry = dict
      .subarray(start, start + dictNumber(len))
      .toString('utf8')
      .split('\n')
      .map((l) => l.trim())
      .join('\n')
      // Cross-references ({C}) and underscores around italics (_We_) are markup, not text.
      .replace(/\{([^{}\n]+)\}/g, '$1')
      .replace(/(^|[\s("])_([^_\n]+)_(?=[\s).,;:!?"]|$)/g, '$1$2');
    entries.push(unwrapParagraphs(entry));
  }
  return chunk(source, name, entries, 20, '\n\n');
}

/**
 * The King James Bible through the `bible` program of Debian's bible-kjv (the text package stores
 * it compressed): one document per chapter, verse numbers dropped, verses grouped into paragraphs
 * of about 600 characters under a `Book N` heading.
 */
export function readKjv(source: string): LargeDoc[] {
  const out = runTool('bible', ['Gen1:1-Rev22:21']);
  const docs: LargeDoc[] = [];
  let title = '';
  let verses: string[] = [];
  const flush = (): void => {
    if (title === '' || verses.length === 0) return;
    const paragraphs: string[] = [];
    let current = '';
    for (const v of verses) {
      current = current === '' ? v : `${current} ${v}`;
      if (current.length >= 600) {
        paragraphs.push(current);
        current = '';
      }
    }
    if (current !== '') paragraphs.push(current);
    docs.push({ source, id: title, text: `${title}\n\n${paragraphs.join('\n\n')}` });
  };
  const lines = out.split('\n').filter((l) => l.trim() !== '');
  for (const [i, line] of lines.entries()) {
    // A chapter heading (`1 Samuel 3`) is followed by verse 1.
    if (/^[1-3]? ?[A-Z][A-Za-z ]+ \d+$/.test(line) && /^\s+1 /.test(lines[i + 1] ?? '')) {
      flush();
      title = line.trim();
      verses = [];
    } else if (/^\s+\d+ /.test(line)) verses.push(line.trim().replace(/^\d+ /, ''));
    else if (verses.length > 0) verses[verses.length - 1] += ` ${line.trim()}`;
  }
  flush();
  if (docs.length < 1000) throw new DataError('SOURCE_FORMAT', 'bible', `only ${docs.length} chapters decoded`, 'reinstall bible-kjv and bible-kjv-text');
  return docs;
}

/** Sphinx `_sources/*.rst.txt` (or `.txt`) files of a documentation package, each as text. */
export function readRstDocs(source: string, pkg: string, pattern: RegExp): LargeDoc[] {
  return debFiles(pkg, pattern).flatMap((file) => {
    const rst = readUtf8(file);
    return rst === null ? [] : [{ source, id: file, text: rstToText(rst) }];
  });
}

/** HTML pages of a documentation package, each as text. */
export function readHtmlDocs(source: string, pkg: string, pattern: RegExp, crop?: { start: RegExp; end: RegExp }): LargeDoc[] {
  return debFiles(pkg, pattern).flatMap((file) => {
    let html = readUtf8(file);
    if (html === null) return [];
    if (crop !== undefined) {
      const s = crop.start.exec(html);
      if (s !== null) html = html.slice(s.index);
      const e = crop.end.exec(html);
      if (e !== null) html = html.slice(0, e.index);
    }
    return [{ source, id: file, text: htmlToText(html) }];
  });
}

/** Largest Python file read: bigger ones are data tables or generated code. */
export const MAX_PY_BYTES = 200_000;

/** A leading comment block that states a copyright or licence (it repeats in every file of a project). */
export function stripLicenceHeader(code: string): string {
  const m = /^(?:#![^\n]*\n)?(?:#[^\n]*\n|[ \t]*\n)+/.exec(code);
  if (m === null || !/copyright|licen[cs]e/i.test(m[0])) return code;
  const shebang = /^#![^\n]*\n/.exec(m[0])?.[0] ?? '';
  return shebang + code.slice(m[0].length);
}

/**
 * Python files owned by `pkgs` (path matches `include`, not `exclude`), each a document: UTF-8
 * only, at most MAX_PY_BYTES, no line over 400 characters (generated tables), licence header removed.
 */
export function readPythonFiles(source: string, pkgs: readonly string[], include: RegExp, exclude?: RegExp): LargeDoc[] {
  const docs: LargeDoc[] = [];
  for (const pkg of pkgs) {
    for (const file of debFiles(pkg, include)) {
      if (exclude?.test(file) || statSync(file).size > MAX_PY_BYTES) continue;
      const code = readUtf8(file);
      if (code === null || code.trim() === '' || code.split('\n').some((l) => l.length > 400)) continue;
      docs.push({ source, id: file, text: stripLicenceHeader(code) });
    }
  }
  return docs;
}

/**
 * Whole documents in a seeded random order until `maxChars` is reached, returned in `id` order
 * (a deterministic subsample that keeps documents intact; all of them when they fit).
 */
export function sampleDocs<D extends { id: string; text: string }>(docs: readonly D[], maxChars: number, seed: number): D[] {
  const total = docs.reduce((n, d) => n + d.text.length, 0);
  if (total <= maxChars) return docs.slice();
  const picked: D[] = [];
  let chars = 0;
  for (const doc of new Rng(seed).shuffle(docs.slice())) {
    if (chars >= maxChars) break;
    picked.push(doc);
    chars += doc.text.length;
  }
  return picked.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
