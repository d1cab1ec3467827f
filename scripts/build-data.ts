/**
 * Builds data/: the pretraining corpus (corpus/*.jsonl.gz), the byte-level BPE tokenizer trained on
 * its train split (tokenizer/), manifest.json and the data card README.md.
 *
 *   npx tsx scripts/build-data.ts            # write everything
 *   npx tsx scripts/build-data.ts --check    # rebuild in memory, compare with manifest.json, exit 1 on drift
 *   npx tsx scripts/build-data.ts --corpus large [--check|--force]   # the large corpus (build-large-data.ts)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import { DEFAULT_SPECIAL_TOKENS, type TrainedTokenizer, trainBpe, writeTokenizer } from '../src/data/bpe.js';
import { buildCorpus, type CorpusDoc, DEFAULT_CORPUS_OPTIONS, type FileEntry, sha256Hex, toJsonl, writeJsonlGz } from '../src/data/build-corpus.js';
import { type CompressionStat, type Manifest, renderDataCard, sourceEntries } from '../src/data/datacard.js';
import { PY_TEMPLATES } from '../src/data/pyfuncs.js';
import { PROSE_SOURCES } from '../src/data/sources.js';
import { buildLarge, largeCardSection } from './build-large-data.js';

const VOCAB_SIZE = 4096;
const MIN_FREQUENCY = 2;

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const dataDir = join(root, 'data');
const check = process.argv.includes('--check');

function timed<T>(label: string, f: () => T): T {
  const t0 = performance.now();
  const out = f();
  console.log(`${label}: ${((performance.now() - t0) / 1000).toFixed(2)} s`);
  return out;
}

/** Characters per token of the validation documents, for prose, code, and each source. */
function compression(trained: TrainedTokenizer, docs: readonly CorpusDoc[]): CompressionStat[] {
  const tok = new Tokenizer(trained.tokenizerJson, trained.tokenizerConfig);
  const groups = new Map<string, { docs: number; chars: number; tokens: number }>();
  for (const d of docs) {
    const tokens = tok.encode(d.text).ids.length;
    for (const g of [PROSE_SOURCES.includes(d.source) ? 'prose' : 'code', `  ${d.source}`]) {
      const s = groups.get(g) ?? { docs: 0, chars: 0, tokens: 0 };
      groups.set(g, { docs: s.docs + 1, chars: s.chars + d.text.length, tokens: s.tokens + tokens });
    }
  }
  const order = ['prose', ...PROSE_SOURCES.map((s) => `  ${s}`), 'code', '  js-snippets', '  python-gen'];
  return order
    .filter((g) => groups.has(g))
    .map((g) => {
      const s = groups.get(g) as { docs: number; chars: number; tokens: number };
      return { group: g.trim() === g ? g : `└ ${g.trim()}`, ...s, chars_per_token: Math.round((s.chars / s.tokens) * 1000) / 1000 };
    });
}

// `--corpus large`: the ~100M-character corpus in .cache/data/large (scripts/build-large-data.ts).
const corpusArg = process.argv[process.argv.indexOf('--corpus') + 1];
if (process.argv.includes('--corpus') && corpusArg !== 'small') {
  if (corpusArg !== 'large') {
    console.error(`--corpus: expected small or large, got ${corpusArg ?? 'nothing'}`);
    process.exit(2);
  }
  process.exit(await buildLarge(root, process.argv.slice(2)));
}

const options = { ...DEFAULT_CORPUS_OPTIONS, root };
const corpus = timed('corpus (read, generate + verify python, clean, dedup, split)', () => buildCorpus(options));
for (const f of corpus.python.failures) console.log(`dropped python task ${f}`);
const trained = timed(`tokenizer (BPE, vocab ${VOCAB_SIZE})`, () =>
  trainBpe(
    corpus.train.map((d) => d.text),
    { vocabSize: VOCAB_SIZE, specialTokens: DEFAULT_SPECIAL_TOKENS, minFrequency: MIN_FREQUENCY },
  ),
);
const stats = timed('validation compression', () => compression(trained, corpus.validation));

if (check) {
  const manifest = JSON.parse(readFileSync(join(dataDir, 'manifest.json'), 'utf8')) as Manifest;
  const expected = new Map(manifest.files.map((f) => [f.path, f.text_sha256]));
  const actual = new Map([
    ['corpus/train.jsonl.gz', sha256Hex(toJsonl(corpus.train))],
    ['corpus/validation.jsonl.gz', sha256Hex(toJsonl(corpus.validation))],
    ['tokenizer/tokenizer.json', sha256Hex(`${JSON.stringify(trained.tokenizerJson, null, 2)}\n`)],
    ['tokenizer/tokenizer_config.json', sha256Hex(`${JSON.stringify(trained.tokenizerConfig, null, 2)}\n`)],
  ]);
  let drift = 0;
  for (const [path, hash] of actual) {
    const ok = expected.get(path) === hash;
    if (!ok) drift++;
    console.log(`${ok ? 'same   ' : 'DIFFERS'} ${path}`);
  }
  process.exit(drift === 0 ? 0 : 1);
}

const files: FileEntry[] = [
  writeJsonlGz(join(dataDir, 'corpus/train.jsonl.gz'), corpus.train, 'corpus/train.jsonl.gz'),
  writeJsonlGz(join(dataDir, 'corpus/validation.jsonl.gz'), corpus.validation, 'corpus/validation.jsonl.gz'),
];
const written = writeTokenizer(join(dataDir, 'tokenizer'), trained);
for (const [path, file] of [
  ['tokenizer/tokenizer.json', written.tokenizerPath],
  ['tokenizer/tokenizer_config.json', written.configPath],
] as const) {
  const bytes = readFileSync(file);
  const hash = sha256Hex(bytes);
  files.push({ path, sha256: hash, text_sha256: hash, bytes: bytes.length, docs: 0, chars: 0 });
}

const manifest: Manifest = {
  seed: options.seed,
  options: {
    validation_fraction: options.validationFraction,
    sotu_max_chars: options.sotuMaxChars,
    brown_max_chars: options.brownMaxChars,
    python_tasks: options.pythonTasks,
  },
  sources: sourceEntries(corpus.reports),
  python_tasks: { templates: PY_TEMPLATES.length, generated: corpus.python.generated, failed: corpus.python.failed },
  files,
  tokenizer: {
    vocab_size: Object.keys(trained.tokenizerJson.model.vocab).length,
    merges: trained.tokenizerJson.model.merges.length,
    special_tokens: [...DEFAULT_SPECIAL_TOKENS],
    validation_compression: stats,
  },
};
writeFileSync(join(dataDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
writeFileSync(join(dataDir, 'README.md'), renderDataCard(manifest) + largeCardSection(root));
for (const f of files) console.log(`${f.path}: ${f.bytes} bytes${f.docs ? `, ${f.docs} docs, ${f.chars} chars` : ''}`);
for (const s of stats) console.log(`${s.group}: ${s.chars_per_token} chars/token (${s.docs} docs)`);
