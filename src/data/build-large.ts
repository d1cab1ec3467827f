/**
 * The large pretraining corpus (~10× the small one): read every source of large-sources.ts →
 * clean → drop boilerplate and duplicates → keep the small corpus's validation documents out →
 * drop documents that reproduce an eval problem (decontam.ts) → shuffle → gzip'd JSONL.
 * Validation stays the small corpus's split (data/corpus/validation.jsonl.gz), so validation
 * perplexity compares across corpora. Every step is seeded or ordered: a rebuild with the same
 * package versions gives byte-identical text.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { createGzip } from 'node:zlib';
import type { FileEntry } from './build-corpus.js';
import { dropChapterIndex, normalizeCode, normalizedKey, normalizeProse, splitParagraphs, stripBoilerplate } from './clean.js';
import { checkDebLicence, debVersion } from './debian.js';
import type { Contamination, DecontamIndex } from './decontam.js';
import { DataError } from './errors.js';
import { LARGE_SOURCES, type LargeSource, type ReadContext, type SourceGroup } from './large-sources.js';
import { Rng, seedFrom } from './rng.js';
import { packageInfo } from './sources.js';
import { type LargeDoc, sampleDocs } from './sources-deb.js';

/** One line of the large corpus: its source is any name in LARGE_SOURCES. */
export interface LargeCorpusDoc {
  source: string;
  text: string;
}

export interface LargeOptions extends ReadContext {
  /** The sources to build, in order (default: LARGE_SOURCES). */
  sources?: readonly LargeSource[];
  /** Documents that must stay out of train: the small corpus's validation split. */
  validation: readonly LargeCorpusDoc[];
  decontam: DecontamIndex;
}

export const DEFAULT_LARGE_OPTIONS = { seed: 20240601, pythonTasks: 20_000 } as const;

/** Prose paragraphs shorter than this are never deduplicated ("Aye, aye, sir!" recurs legitimately). */
const MIN_DEDUP_CHARS = 40;
/** A docs paragraph found in this many pages of one source is navigation or boilerplate. */
const BOILERPLATE_DOCS = 10;
/** A document that shares this share of its characters with validation paragraphs is dropped whole. */
const VALIDATION_OVERLAP = 0.5;
/** Documents shorter than this after cleaning carry nothing (an empty page, a stub module). */
const MIN_DOC_CHARS: Record<SourceGroup, number> = { prose: 200, docs: 200, code: 50 };

export interface PackageVersion {
  name: string;
  version: string;
  /** npm: the package.json `license` field; Debian: the copyright file checked. */
  licenceSource: string;
}

export interface LargeSourceReport {
  name: string;
  group: SourceGroup;
  licence: string;
  packages: PackageVersion[];
  rawDocs: number;
  rawChars: number;
  docs: number;
  chars: number;
  /** Boilerplate and duplicate paragraphs (prose, docs) or duplicate documents (code). */
  duplicatesDropped: number;
  /** Documents dropped because they are (mostly) a validation document. */
  validationDropped: number;
  /** Documents under MIN_DOC_CHARS after cleaning (stub modules, empty pages). */
  shortDropped: number;
  contaminatedDropped: number;
}

export interface LargeCorpus {
  train: LargeCorpusDoc[];
  reports: LargeSourceReport[];
  contamination: (Contamination & { source: string; id: string })[];
  python: { generated: number };
}

function sha(text: string): string {
  return createHash('sha256').update(text).digest('base64');
}

/** Checks every package's licence evidence and returns the installed versions. */
export function sourcePackages(source: LargeSource, root: string): PackageVersion[] {
  const origin = source.origin;
  if (origin.kind === 'generated') return [];
  return origin.packages.map((name) => {
    if (origin.kind === 'npm') {
      const info = packageInfo(root, name);
      if (source.evidence !== null && !source.evidence.test(info.license)) {
        throw new DataError(
          'SOURCE_FORMAT',
          `node_modules/${name}/package.json`,
          `license "${info.license}" is not ${source.evidence.source}`,
          'check the licence before using this source',
        );
      }
      return { name, version: info.version, licenceSource: `package.json license: ${info.license}` };
    }
    if (source.evidence !== null) checkDebLicence(name, source.evidence);
    return { name, version: debVersion(name), licenceSource: `/usr/share/doc/${name}/copyright` };
  });
}

/** Paragraphs split at blank lines, keeping the first line's indentation (code blocks in docs). */
function splitBlocks(text: string): string[] {
  return text
    .split(/\n[ \t]*\n/)
    .map((p) => p.replace(/^\n+/, '').trimEnd())
    .filter((p) => p.trim() !== '');
}

function cleanText(group: SourceGroup, text: string): string {
  if (group === 'prose') return dropChapterIndex(splitParagraphs(normalizeProse(stripBoilerplate(text)))).join('\n\n');
  return normalizeCode(text);
}

/** Paragraphs that occur in BOILERPLATE_DOCS or more documents of one docs source (menus, headers, footers). */
function boilerplate(docs: readonly LargeDoc[]): Set<string> {
  const count = new Map<string, number>();
  for (const d of docs) for (const p of new Set(splitBlocks(d.text))) count.set(p, (count.get(p) ?? 0) + 1);
  return new Set([...count].filter(([, n]) => n >= BOILERPLATE_DOCS).map(([p]) => p));
}

/** Paragraph keys (exact and normalized) of the validation documents. */
function paragraphKeys(text: string): string[] {
  return splitParagraphs(text).flatMap((p) => {
    const key = normalizedKey(p);
    return key.length < MIN_DEDUP_CHARS ? [] : [`e:${sha(p)}`, `n:${sha(key)}`];
  });
}

const docKey = (text: string) => sha(text.replace(/\s+/g, ' ').trim());

export function buildLargeCorpus(options: LargeOptions): LargeCorpus {
  const sources = options.sources ?? LARGE_SOURCES;
  const validationParagraphs = new Set(options.validation.flatMap((d) => paragraphKeys(d.text)));
  const validationDocs = new Set(options.validation.map((d) => docKey(d.text)));
  const seenParagraphs = new Set<string>();
  const seenDocs = new Set<string>();
  const kept: LargeCorpusDoc[] = [];
  const reports: LargeSourceReport[] = [];
  const contamination: LargeCorpus['contamination'] = [];
  let generated = 0;

  for (const source of sources) {
    const packages = sourcePackages(source, options.root);
    const raw = source.read(options);
    if (source.name === 'python-gen') generated = raw.length;
    const sampled = source.maxChars === null ? raw : sampleDocs(raw, source.maxChars, seedFrom(options.seed, `large:${source.name}`));
    const report: LargeSourceReport = {
      name: source.name,
      group: source.group,
      licence: source.licence,
      packages,
      rawDocs: sampled.length,
      rawChars: sampled.reduce((n, d) => n + d.text.length, 0),
      docs: 0,
      chars: 0,
      duplicatesDropped: 0,
      validationDropped: 0,
      shortDropped: 0,
      contaminatedDropped: 0,
    };
    const cleaned = sampled.map((d) => ({ ...d, text: cleanText(source.group, d.text) }));
    const skip = source.group === 'docs' ? boilerplate(cleaned) : new Set<string>();
    for (const doc of cleaned) {
      let text = doc.text;
      if (source.group === 'code') {
        const key = docKey(text);
        if (validationDocs.has(key)) {
          report.validationDropped++;
          continue;
        }
        if (seenDocs.has(key)) {
          report.duplicatesDropped++;
          continue;
        }
        seenDocs.add(key);
      } else {
        let overlap = 0;
        const paragraphs = (source.group === 'docs' ? splitBlocks(text) : splitParagraphs(text)).filter((p) => {
          if (skip.has(p)) {
            report.duplicatesDropped++;
            return false;
          }
          const key = normalizedKey(p);
          if (key.length < MIN_DEDUP_CHARS) return true;
          const keys = [`e:${sha(p)}`, `n:${sha(key)}`];
          if (keys.some((k) => validationParagraphs.has(k))) {
            overlap += p.length;
            return false;
          }
          if (keys.some((k) => seenParagraphs.has(k))) {
            report.duplicatesDropped++;
            return false;
          }
          for (const k of keys) seenParagraphs.add(k);
          return true;
        });
        if (overlap > 0 && overlap >= VALIDATION_OVERLAP * text.length) {
          report.validationDropped++;
          continue;
        }
        text = paragraphs.join('\n\n');
      }
      if (text.length < MIN_DOC_CHARS[source.group]) {
        report.shortDropped++;
        continue;
      }
      const hit = options.decontam.check(text);
      if (hit !== null) {
        report.contaminatedDropped++;
        contamination.push({ ...hit, source: source.name, id: doc.id });
        continue;
      }
      kept.push({ source: source.name, text });
      report.docs++;
      report.chars += text.length;
    }
    reports.push(report);
  }
  return { train: new Rng(seedFrom(options.seed, 'large-train')).shuffle(kept), reports, contamination, python: { generated } };
}

/** Writes `docs` as gzip'd JSONL without building the whole file in memory; hashes as writeJsonlGz does. */
export async function writeJsonlGzStream(file: string, docs: readonly LargeCorpusDoc[], label = file): Promise<FileEntry> {
  mkdirSync(dirname(file), { recursive: true });
  const text = createHash('sha256');
  const gzHash = createHash('sha256');
  let bytes = 0;
  const gzip = createGzip({ level: 6 });
  const out = createWriteStream(file);
  gzip.on('data', (chunk: Buffer) => {
    gzHash.update(chunk);
    bytes += chunk.length;
  });
  gzip.pipe(out);
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve);
    out.on('error', reject);
    gzip.on('error', reject);
  });
  let chars = 0;
  for (const d of docs) {
    const line = `${JSON.stringify({ source: d.source, text: d.text })}\n`;
    text.update(line);
    chars += d.text.length;
    if (!gzip.write(line)) await new Promise((r) => gzip.once('drain', r));
  }
  gzip.end();
  await done;
  return { path: label, sha256: gzHash.digest('hex'), text_sha256: text.digest('hex'), bytes, docs: docs.length, chars };
}
