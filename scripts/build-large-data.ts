/**
 * The large corpus build behind `npx tsx scripts/build-data.ts --corpus large`:
 * writes .cache/data/large/train.jsonl.gz (git-ignored), data/manifest-large.json and the data
 * card's large section. Cached: when the recipe, options, package versions, eval sets and
 * validation split are unchanged and the output matches its stamp, nothing is rebuilt
 * (`--force` rebuilds anyway; `--check` rebuilds in memory and compares with the manifest).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Tokenizer } from '@huggingface/tokenizers';
import { type FileEntry, readJsonlGz, sha256Hex } from '../src/data/build-corpus.js';
import { buildLargeCorpus, DEFAULT_LARGE_OPTIONS, type LargeCorpusDoc, sourcePackages, writeJsonlGzStream } from '../src/data/build-large.js';
import { type Manifest, renderDataCard } from '../src/data/datacard.js';
import { type LargeManifest, renderLargeCard } from '../src/data/datacard-large.js';
import { DecontamIndex, NGRAM_WORDS, readEvalProblems } from '../src/data/decontam.js';
import { LARGE_SOURCES } from '../src/data/large-sources.js';
import { generatePyTasks } from '../src/data/pyfuncs.js';
import { Rng, seedFrom } from '../src/data/rng.js';
import { taskHeadline } from '../src/pretrain/code-eval.js';

export const OUTPUT_DIR = '.cache/data/large';
const EVAL_SETS = [
  { path: 'data/coding/coop-python.eval.jsonl', name: 'coop-python-eval' },
  { path: 'data/humaneval/HumanEval.jsonl.gz', name: 'humaneval' },
];
const VALIDATION = 'data/corpus/validation.jsonl.gz';
/** src/pretrain/config.ts's code_eval_seed and the candidates heldOutTasks draws for 200 tasks. */
const CODE_EVAL = { seed: 7_000_001, candidates: 1600 };
/** Characters per source that the tokenizer estimate reads (a seeded sample of documents). */
const TOKEN_SAMPLE_CHARS = 300_000;

function fileSha(file: string): string {
  return sha256Hex(readFileSync(file));
}

/** Hash of the code that defines the corpus: a change to any data module invalidates the cache. */
function recipeHash(root: string): string {
  const h = createHash('sha256');
  const dir = join(root, 'src/data');
  // The data card's renderers do not change the corpus (an up-to-date run still rewrites the card).
  for (const f of readdirSync(dir).sort()) if (f.endsWith('.ts') && !f.startsWith('datacard')) h.update(`${f}\n`).update(readFileSync(join(dir, f)));
  return h.digest('hex');
}

function tokenStats(root: string, docs: readonly LargeCorpusDoc[], charsBySource: Map<string, number>, seed: number): LargeManifest['tokens'] {
  const dir = join(root, 'data/tokenizer');
  const tok = new Tokenizer(
    JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
    JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
  );
  const by_source: { source: string; chars_per_token: number; est_tokens: number }[] = [];
  for (const [source, chars] of charsBySource) {
    let sampleChars = 0;
    let tokens = 0;
    for (const d of new Rng(seedFrom(seed, `tokens:${source}`)).shuffle(docs.filter((x) => x.source === source))) {
      if (sampleChars >= TOKEN_SAMPLE_CHARS) break;
      const text = d.text.slice(0, TOKEN_SAMPLE_CHARS);
      sampleChars += text.length;
      tokens += tok.encode(text).ids.length;
    }
    const cpt = tokens === 0 ? 0 : Math.round((sampleChars / tokens) * 1000) / 1000;
    by_source.push({ source, chars_per_token: cpt, est_tokens: cpt === 0 ? 0 : Math.round(chars / cpt) });
  }
  return { tokenizer_sha256: fileSha(join(dir, 'tokenizer.json')), by_source, est_total: by_source.reduce((a, s) => a + s.est_tokens, 0) };
}

export async function buildLarge(root: string, args: readonly string[]): Promise<number> {
  const check = args.includes('--check');
  const force = args.includes('--force');
  const outDir = join(root, OUTPUT_DIR);
  const manifestFile = join(root, 'data/manifest-large.json');
  const stampFile = join(outDir, 'stamp.json');

  const small = JSON.parse(readFileSync(join(root, 'data/manifest.json'), 'utf8')) as Manifest;
  const validationFile = join(root, VALIDATION);
  const validationEntry = small.files.find((f) => f.path === 'corpus/validation.jsonl.gz');
  const validationSha = sha256Hex(gunzipSync(readFileSync(validationFile)));
  if (validationEntry === undefined || validationEntry.text_sha256 !== validationSha) {
    console.error(`${VALIDATION}: differs from data/manifest.json — the held-out set must stay the shipped one`);
    return 1;
  }
  const validation = readJsonlGz(validationFile);
  const evalSets = EVAL_SETS.map((e) => ({ ...e, sha256: fileSha(join(root, e.path)), problems: readEvalProblems(join(root, e.path), e.name) }));
  const options = { ...DEFAULT_LARGE_OPTIONS, root };
  const inputs = sha256Hex(
    JSON.stringify({
      recipe: recipeHash(root),
      seed: options.seed,
      pythonTasks: options.pythonTasks,
      packages: LARGE_SOURCES.map((s) => sourcePackages(s, root)),
      evalSets: evalSets.map((e) => e.sha256),
      validation: validationSha,
    }),
  );
  const trainFile = join(outDir, 'train.jsonl.gz');
  if (!check && !force && existsSync(stampFile) && existsSync(trainFile)) {
    const stamp = JSON.parse(readFileSync(stampFile, 'utf8')) as { inputs: string; sha256: string };
    if (stamp.inputs === inputs && fileSha(trainFile) === stamp.sha256) {
      writeFileSync(join(root, 'data/README.md'), renderDataCard(small) + largeCardSection(root));
      console.log(`${OUTPUT_DIR}/train.jsonl.gz is up to date (inputs ${inputs.slice(0, 12)}); --force rebuilds`);
      return 0;
    }
  }

  const t0 = performance.now();
  const decontam = new DecontamIndex(evalSets.flatMap((e) => e.problems));
  const corpus = buildLargeCorpus({ ...options, validation, decontam });
  console.log(`corpus: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  for (const r of corpus.reports) console.log(`  ${r.name}: ${r.docs} docs, ${r.chars} chars (raw ${r.rawChars})`);

  // Independent of the filter: no eval prompt may occur verbatim in what is written.
  const allText = corpus.train.map((d) => d.text).join('\n\u0000\n');
  const promptsInCorpus = evalSets.flatMap((e) => e.problems).filter((p) => allText.includes(p.prompt.trim())).length;
  const pyGenText = corpus.train
    .filter((d) => d.source === 'python-gen')
    .map((d) => d.text)
    .join('\n');
  // heldOutTasks' rule (prompt or headline in the training text) on the generated Python, where
  // those headlines come from (searching all 100 MB for 1,600 candidates would take minutes).
  const heldOut = generatePyTasks({ seed: CODE_EVAL.seed, count: CODE_EVAL.candidates }).filter(
    (t) => !pyGenText.includes(t.prompt) && !pyGenText.includes(taskHeadline(t)),
  ).length;

  const textSha = sha256Hex(corpus.train.map((d) => `${JSON.stringify({ source: d.source, text: d.text })}\n`).join(''));
  if (check) {
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as LargeManifest;
    const same = manifest.files[0]?.text_sha256 === textSha;
    console.log(`${same ? 'same   ' : 'DIFFERS'} ${OUTPUT_DIR}/train.jsonl.gz (text_sha256 ${textSha})`);
    return same && promptsInCorpus === 0 ? 0 : 1;
  }
  const file: FileEntry = await writeJsonlGzStream(trainFile, corpus.train, 'train.jsonl.gz');
  const charsBySource = new Map(corpus.reports.map((r) => [r.name, r.chars]));
  const manifest: LargeManifest = {
    seed: options.seed,
    python_tasks: options.pythonTasks,
    output_dir: OUTPUT_DIR,
    sources: corpus.reports,
    validation: { path: `data/${validationEntry.path}`, text_sha256: validationSha, docs: validationEntry.docs, chars: validationEntry.chars },
    decontamination: {
      eval_sets: evalSets.map((e) => ({ path: e.path, sha256: e.sha256, problems: e.problems.length })),
      ngram_words: NGRAM_WORDS,
      fingerprints: decontam.fingerprints,
      dropped: {
        function_body: corpus.contamination.filter((c) => c.kind === 'function-body').length,
        ngram: corpus.contamination.filter((c) => c.kind === 'ngram').length,
      },
      examples: corpus.contamination.slice(0, 20).map(({ source, id, problem, kind, evidence }) => ({ source, id, problem, kind, evidence })),
      prompts_in_corpus: promptsInCorpus,
    },
    code_eval_held_out: { seed: CODE_EVAL.seed, candidates: CODE_EVAL.candidates, held_out: heldOut },
    tokens: tokenStats(root, corpus.train, charsBySource, options.seed),
    files: [file],
  };
  writeFileSync(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(join(root, 'data/README.md'), renderDataCard(small) + largeCardSection(root));
  writeFileSync(stampFile, `${JSON.stringify({ inputs, sha256: file.sha256 }, null, 2)}\n`);
  console.log(`${OUTPUT_DIR}/train.jsonl.gz: ${file.docs} docs, ${file.chars} chars, ${file.bytes} bytes (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  console.log(`decontamination: ${corpus.contamination.length} documents dropped; eval prompts left in corpus: ${promptsInCorpus}`);
  if (promptsInCorpus > 0) return 1;
  return 0;
}

/** The large corpus's card section, when data/manifest-large.json exists. */
export function largeCardSection(root: string): string {
  const file = join(root, 'data/manifest-large.json');
  return existsSync(file) ? `\n${renderLargeCard(JSON.parse(readFileSync(file, 'utf8')) as LargeManifest)}` : '';
}
