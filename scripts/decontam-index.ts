/**
 * data/decontam-index.json: a small, committed hash index that lets test/data/disjoint.test.ts
 * check eval/pretraining disjointness on every run, also where the corpora (.cache/data/large,
 * .cache/data/code-stage; not committed, minutes to build) are absent, as on a fresh clone's CI.
 *
 * It holds, for the eval problems the corpora must not reproduce (the coop-python eval split and
 * HumanEval): each file's sha256, and per problem a hash of its decontamination fingerprints (the
 * normalized entry-point bodies and the 13-word n-grams that src/data/decontam.ts matches), with
 * the fingerprint counts and one digest over all. For each corpus shard: the sha256 its manifest
 * names, its documents, the eval digest it was checked against and the hits (0). `checked` says
 * how: "build" (the shard's own build dropped every document matching these fingerprints: its
 * manifest names the same eval files) or "scan" (this script read the built shard and matched
 * every document against them).
 *
 * The test recomputes the eval half from the committed files: an eval problem added or changed, or
 * a change to the normalization, no longer matches the index (the test names the problems), and
 * the corpora have to be rebuilt or rescanned before the index is written again. Where a shard is
 * built, the test also scans it in full and checks its sha256 against the index.
 *
 *   npx tsx scripts/decontam-index.ts     # rescans the shards that are built, then writes the index
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readJsonlGz, sha256Hex } from '../src/data/build-corpus.js';
import { DecontamIndex, type EvalProblem, MIN_BODY_CHARS, NGRAM_WORDS, readEvalProblems, words } from '../src/data/decontam.js';
import { pythonDefs } from '../src/data/pydefs.js';

export const INDEX_FILE = 'data/decontam-index.json';
export const EVAL_SETS = [
  { name: 'coop-python-eval', path: 'data/coding/coop-python.eval.jsonl' },
  { name: 'humaneval', path: 'data/humaneval/HumanEval.jsonl.gz' },
];
/** The corpus shards the eval problems must stay out of, each with the manifest that describes it. */
export const CORPORA = [
  { name: 'large', manifest: 'data/manifest-large.json', path: '.cache/data/large/train.jsonl.gz' },
  { name: 'code-stage', manifest: 'data/manifest-code-stage.json', path: '.cache/data/code-stage/train.jsonl.gz' },
];

export interface EvalHashes {
  ngram_words: number;
  min_body_chars: number;
  eval_sets: { name: string; path: string; sha256: string; problems: number }[];
  /** Distinct fingerprints as DecontamIndex counts them, and a digest over `problems`. */
  fingerprints: { bodies: number; ngrams: number; sha256: string };
  /** Problem id → first 16 hex digits of the sha256 of its sorted fingerprints. */
  problems: Record<string, string>;
}

export interface CorpusEntry {
  name: string;
  manifest: string;
  path: string;
  sha256: string;
  docs: number;
  /** fingerprints.sha256 of the eval problems this shard was checked against. */
  eval_fingerprints: string;
  checked: 'build' | 'scan';
  hits: number;
}

export interface DecontamHashIndex extends EvalHashes {
  about: string;
  corpora: CorpusEntry[];
}

const sha256 = (data: string | Uint8Array) => sha256Hex(data);

/** The strings decontam.ts matches for one problem: entry-point bodies and 13-word n-grams. */
function fingerprintsOf(p: EvalProblem): string[] {
  const out = new Set<string>();
  for (const program of p.solutions)
    for (const def of pythonDefs(program)) if (def.name === p.entryPoint && def.body.length >= MIN_BODY_CHARS) out.add(`body ${def.body}`);
  for (const text of p.ngramTexts) {
    const ws = words(text);
    for (let i = 0; i + NGRAM_WORDS <= ws.length; i++) out.add(`ngram ${ws.slice(i, i + NGRAM_WORDS).join(' ')}`);
  }
  return [...out].sort();
}

export function evalProblems(root = '.'): EvalProblem[] {
  return EVAL_SETS.flatMap((e) => readEvalProblems(join(root, e.path), e.name));
}

/** The eval half of the index, from the eval files under `root`. */
export function evalHashes(root = '.'): EvalHashes {
  const sets = EVAL_SETS.map((e) => ({ ...e, problems: readEvalProblems(join(root, e.path), e.name) }));
  const all = sets.flatMap((s) => s.problems);
  const problems: Record<string, string> = {};
  for (const p of all) problems[p.id] = sha256(fingerprintsOf(p).join('\n')).slice(0, 16);
  const { bodies, ngrams } = new DecontamIndex(all).fingerprints;
  const digest = sha256(
    Object.entries(problems)
      .map(([id, h]) => `${id} ${h}`)
      .sort()
      .join('\n'),
  );
  return {
    ngram_words: NGRAM_WORDS,
    min_body_chars: MIN_BODY_CHARS,
    eval_sets: sets.map((s) => ({ name: s.name, path: s.path, sha256: sha256(readFileSync(join(root, s.path))), problems: s.problems.length })),
    fingerprints: { bodies, ngrams, sha256: digest },
    problems,
  };
}

/** Ids of the problems added, removed or changed between two eval halves. */
export function changedProblems(from: Record<string, string>, to: Record<string, string>): string[] {
  const ids = new Set([...Object.keys(from), ...Object.keys(to)]);
  return [...ids].filter((id) => from[id] !== to[id]).sort();
}

/** Documents of a built shard that reproduce an eval problem: how many, and the first few. */
export function scanShard(file: string, problems: readonly EvalProblem[]): { docs: number; hits: number; examples: string[] } {
  const index = new DecontamIndex(problems);
  const docs = readJsonlGz(file);
  const examples: string[] = [];
  let hits = 0;
  for (const d of docs) {
    const hit = index.check(d.text);
    if (!hit) continue;
    hits++;
    if (examples.length < 10) examples.push(`${d.source}: ${hit.problem} (${hit.kind}: ${hit.evidence})`);
  }
  return { docs: docs.length, hits, examples };
}

/** The shard's sha256 and document count as its manifest records them. */
export function manifestShard(root: string, manifest: string): { sha256: string; docs: number } {
  const m = JSON.parse(readFileSync(join(root, manifest), 'utf8'));
  const file = m.files?.find((f: { path: string }) => f.path === 'train.jsonl.gz') ?? m.file;
  return { sha256: file.sha256, docs: file.docs };
}

/** The eval files (path, sha256) a shard's manifest says its build was decontaminated against, where it says. */
export function manifestEvalSets(root: string, manifest: string): { path: string; sha256: string }[] | null {
  const m = JSON.parse(readFileSync(join(root, manifest), 'utf8'));
  return m.decontamination?.eval_sets ?? null;
}

export function readIndex(root = '.'): DecontamHashIndex {
  return JSON.parse(readFileSync(join(root, INDEX_FILE), 'utf8'));
}

function main(root: string): void {
  const evals = evalHashes(root);
  const previous = existsSync(join(root, INDEX_FILE)) ? readIndex(root) : null;
  const problems = evalProblems(root);
  const corpora: CorpusEntry[] = [];
  for (const c of CORPORA) {
    const described = manifestShard(root, c.manifest);
    const file = join(root, c.path);
    if (existsSync(file)) {
      const sha = sha256(readFileSync(file));
      if (sha !== described.sha256)
        throw new Error(`${c.path}: sha256 ${sha}, but ${c.manifest} describes ${described.sha256}: rebuild it, or commit its manifest`);
      const scan = scanShard(file, problems);
      console.log(`${c.path}: ${scan.docs} documents scanned, ${scan.hits} reproduce an eval problem${scan.examples.map((e) => `\n  ${e}`).join('')}`);
      corpora.push({ ...c, ...described, eval_fingerprints: evals.fingerprints.sha256, checked: 'scan', hits: scan.hits });
      continue;
    }
    const before = previous?.corpora.find((e) => e.name === c.name);
    if (before && before.sha256 === described.sha256 && before.eval_fingerprints === evals.fingerprints.sha256) {
      console.log(`${c.path}: not built here; its entry stands (same shard, same eval fingerprints)`);
      corpora.push(before);
      continue;
    }
    if (previous) {
      throw new Error(
        `${c.path} is not built here, and the shard (${c.manifest}) or the eval problems changed since it was checked: build it (npm run data:large; npx tsx scripts/build-code-stage-data.ts) and run this again`,
      );
    }
    // First index: the shard's build filtered it against the eval files its manifest names.
    const named = manifestEvalSets(root, c.manifest);
    const stale = named?.filter((e) => evals.eval_sets.find((x) => x.path === e.path)?.sha256 !== e.sha256);
    if (stale?.length) throw new Error(`${c.manifest} was decontaminated against other eval files (${stale.map((e) => e.path).join(', ')}): rebuild ${c.path}`);
    console.log(`${c.path}: not built here; entry from ${c.manifest} (its build dropped every matching document)`);
    corpora.push({ ...c, ...described, eval_fingerprints: evals.fingerprints.sha256, checked: 'build', hits: 0 });
  }
  const index: DecontamHashIndex = {
    about: 'Written by scripts/decontam-index.ts (its header says what each field means); checked by test/data/disjoint.test.ts.',
    ...evals,
    corpora,
  };
  writeFileSync(join(root, INDEX_FILE), `${JSON.stringify(index, null, 2)}\n`);
  console.log(`${INDEX_FILE}: ${Object.keys(evals.problems).length} problems, ${evals.fingerprints.bodies} bodies, ${evals.fingerprints.ngrams} n-grams`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main(join(dirname(fileURLToPath(import.meta.url)), '..'));
