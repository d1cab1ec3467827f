/**
 * Builds the code stage's corpus (.cache/data/code-stage/train.jsonl.gz): what models/coder is
 * trained on after models/base, so that the coding environment's untrained team has a real pass rate.
 *
 * models/base never saw the team protocol of the coding environment: no file of the large corpus
 * has a helper named `aux` or the comments the code-style prompts open with (code-prompts.ts). This
 * corpus teaches it on generated helper + main tasks (src/data/pyfuncs.ts, kind "compose", a seed of
 * their own), each written as a Python file in one of the shapes the agents will be prompted with:
 *
 *   helper-first   "# Helper for f(x): <summary>\ndef aux(...)..." then main calling aux, then asserts
 *                  (the aux agent's prompt; also main reading the helper, as in the sequential pipeline)
 *   main-first     "# aux(...) is written by another agent.\n\n\n" + main calling aux, then aux, asserts
 *                  (the main agent's prompt)
 *   plain          the generator's own file: helper, main calling it by name, asserts
 *
 * plus single-function tasks of every other kind (same generator, same seed family) and a replay
 * sample of the large corpus (prose, documentation, code), so the model keeps what it knew.
 *
 * Evaluation stays unseen: every document goes through the large corpus's decontamination index
 * (decontam.ts: the coop-python eval split and HumanEval, by normalized function body and 13-word
 * n-grams) and is dropped whole on a hit; no eval prompt may occur verbatim in what is written.
 *
 *   npx tsx scripts/build-code-stage-data.ts        # needs .cache/data/large (npm run data:large)
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CorpusDoc, readJsonlGz, sha256Hex, writeJsonlGz } from '../src/data/build-corpus.js';
import type { LargeCorpusDoc } from '../src/data/build-large.js';
import { DecontamIndex, readEvalProblems } from '../src/data/decontam.js';
import { generatePyTasks, type PyKind, type PyTask, taskCorpusText, verifyPyTasks } from '../src/data/pyfuncs.js';
import { Rng, seedFrom } from '../src/data/rng.js';
import { codeAuxPrompt, codeMainPrompt } from '../src/envs/coding/code-prompts.js';
import { toCoopItem } from '../src/envs/coding/coop-item.js';

const SEED = 20261126;
/** Compose candidates generated (many repeat: 20 templates with a few names each). */
const COMPOSE_CANDIDATES = 60_000;
/** Single-function candidates of the other kinds. */
const SINGLE_CANDIDATES = 12_000;
/** Characters replayed from the large corpus. */
const REPLAY_CHARS = 11_000_000;
const SINGLE_KINDS: PyKind[] = ['arith', 'string', 'list', 'dict'];

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const LARGE = join(root, '.cache', 'data', 'large', 'train.jsonl.gz');
const OUT_DIR = join(root, '.cache', 'data', 'code-stage');
const EVAL_SETS = [
  { name: 'coop-python', path: 'data/coding/coop-python.eval.jsonl' },
  { name: 'humaneval', path: 'data/humaneval/HumanEval.jsonl.gz' },
];

type Shape = 'helper-first' | 'main-first' | 'plain';

/** The task's file in one of the team shapes (see the module comment). */
function teamText(task: PyTask, shape: Shape): string {
  const tests = `${task.asserts.join('\n')}\n`;
  if (shape === 'plain') return taskCorpusText(task, 'asserts');
  const item = toCoopItem(task, 0);
  const mainBody = item.main_solution.slice(item.prompt.trimEnd().length);
  if (shape === 'helper-first') {
    const aux = item.aux_solution.slice('def aux('.length);
    return `${codeAuxPrompt(item)}${aux}\n\n${codeMainPrompt(item, item.aux_solution)}${mainBody}\n\n${tests}`;
  }
  return `${codeMainPrompt(item)}${mainBody}\n\n${item.aux_solution}\n\n${tests}`;
}

const int = (n: number) => n.toLocaleString('en-US');

/** The stage corpus's data card (data/code-stage.md). */
function card(m: {
  seed: number;
  file: { docs: number; chars: number; sha256: string };
  parts: Record<string, { docs: number; chars: number }>;
  stats: { composeGenerated: number; singleGenerated: number; contaminated: number; duplicates: number };
  compose_templates: Record<string, { kept: number; contaminated: number }>;
  eval_prompts_in_corpus: number;
}): string {
  const rows = Object.entries(m.parts)
    .sort((a, b) => b[1].chars - a[1].chars)
    .map(([name, p]) => `| ${name} | ${int(p.docs)} | ${int(p.chars)} | ${((100 * p.chars) / m.file.chars).toFixed(1)}% |`);
  const none = Object.entries(m.compose_templates)
    .filter(([, t]) => t.kept === 0)
    .map(([name]) => `\`${name}\``);
  const tpl = Object.entries(m.compose_templates).map(([name, t]) => `| \`${name}\` | ${int(t.kept)} | ${int(t.contaminated)} |`);
  return `# Code stage corpus (models/coder)

Built by \`npx tsx scripts/build-code-stage-data.ts\` (seed ${m.seed}) into \`.cache/data/code-stage/train.jsonl.gz\`
(${int(m.file.docs)} documents, ${int(m.file.chars)} characters, sha256 \`${m.file.sha256}\`); needs the large corpus
(\`npm run data:large\`). \`configs/pretrain/coder.yaml\` continues \`models/base\` on it. Licences: the generated
Python is this repository's (MIT); the replayed documents keep the licences of the large corpus ([README.md](README.md)).

Why: \`models/base\` never saw the coding environment's team protocol (no file of the large corpus has a helper
called \`aux\` or the comments the code-style prompts open with), so its untrained team passed 0% of the
coop-python eval problems and the reward's test and cooperation levels never fired.

| part | documents | characters | share |
| --- | ---: | ---: | ---: |
${rows.join('\n')}

- \`python-team:helper-first\`: \`# Helper for f(x): <summary>\` + \`def aux(...)\`, then the main function calling \`aux\`,
  then asserts (the aux agent's prompt, and main reading the helper as in the sequential pipeline);
- \`python-team:main-first\`: \`# aux(...) is written by another agent.\` + the main function calling \`aux\`, then
  \`aux\` and the asserts (the main agent's prompt);
- \`python-team:plain\`: the generator's own file; \`python-gen\`: single-function tasks of the other kinds;
- \`replay\`: whole documents of the large corpus (prose, documentation, code), so the model keeps what it knew.

Every generated program ran and passed its asserts. ${int(m.stats.composeGenerated)} helper + main and
${int(m.stats.singleGenerated)} single-function candidates were generated; ${int(m.stats.contaminated)} documents were
dropped because they reproduce a coop-python eval or HumanEval problem (the large corpus's decontamination,
\`src/data/decontam.ts\`: same normalized function body, or a 13-word run of its prompt or solution) and
${int(m.stats.duplicates)} as duplicates. Eval prompts found verbatim in what was written: ${m.eval_prompts_in_corpus}.

Decontamination removes whole templates whose bodies or docstrings do not vary enough: ${none.length === 0 ? 'none' : none.join(', ')}
kept no file, so the coder saw no example of ${none.length === 1 ? 'it' : 'them'} (their coop-python eval problems test generalisation
to an unseen kind of problem).

| compose template | files kept | dropped (eval overlap) |
| --- | ---: | ---: |
${tpl.join('\n')}
`;
}

function main(): number {
  if (!existsSync(LARGE)) {
    console.error(`${LARGE}: missing — build the large corpus first (npm run data:large)`);
    return 1;
  }
  const t0 = performance.now();
  const problems = EVAL_SETS.flatMap((e) => readEvalProblems(join(root, e.path), e.name));
  const decontam = new DecontamIndex(problems);
  const rng = new Rng(seedFrom(SEED, 'code-stage'));
  const stats = {
    composeGenerated: 0,
    composeFailed: 0,
    singleGenerated: 0,
    singleFailed: 0,
    duplicates: 0,
    contaminated: 0,
    shapes: {} as Record<string, number>,
  };

  /** Per compose template: files kept and files dropped by decontamination. */
  const templates = new Map<string, { kept: number; contaminated: number }>();
  const seen = new Set<string>();
  const docs: LargeCorpusDoc[] = [];
  const keep = (source: string, text: string): boolean => {
    const key = text.replace(/\s+/g, ' ');
    if (seen.has(key)) {
      stats.duplicates++;
      return false;
    }
    seen.add(key);
    if (decontam.check(text) !== null) {
      stats.contaminated++;
      return false;
    }
    docs.push({ source, text });
    return true;
  };

  const compose = generatePyTasks({ seed: seedFrom(SEED, 'compose'), count: COMPOSE_CANDIDATES, kinds: ['compose'] });
  const composeOk = verifyPyTasks(compose);
  stats.composeGenerated = compose.length;
  stats.composeFailed = composeOk.failed.length;
  for (const task of composeOk.passed) {
    const u = rng.next();
    const shape: Shape = u < 0.45 ? 'helper-first' : u < 0.9 ? 'main-first' : 'plain';
    const t = templates.get(task.template) ?? { kept: 0, contaminated: 0 };
    templates.set(task.template, t);
    const before = stats.contaminated;
    if (keep(`python-team:${shape}`, teamText(task, shape))) {
      stats.shapes[shape] = (stats.shapes[shape] ?? 0) + 1;
      t.kept++;
    } else if (stats.contaminated > before) t.contaminated++;
  }

  const single = generatePyTasks({ seed: seedFrom(SEED, 'single'), count: SINGLE_CANDIDATES, kinds: SINGLE_KINDS });
  const singleOk = verifyPyTasks(single);
  stats.singleGenerated = single.length;
  stats.singleFailed = singleOk.failed.length;
  for (const task of singleOk.passed) keep('python-gen', taskCorpusText(task, rng.chance(0.7) ? 'asserts' : 'check'));

  // Replay: whole documents of the large corpus in a seeded order until REPLAY_CHARS.
  const large = readJsonlGz(LARGE);
  const order = rng.shuffle(large.map((_, i) => i));
  let replayed = 0;
  for (const i of order) {
    if (replayed >= REPLAY_CHARS) break;
    const d = large[i];
    docs.push({ source: `replay:${d.source}`, text: d.text });
    replayed += d.text.length;
  }

  // Shuffle everything once (seeded) so the stage's windows mix the three parts.
  rng.shuffle(docs);
  const allText = docs.map((d) => d.text).join('\n\u0000\n');
  const promptsInCorpus = problems.filter((p) => allText.includes(p.prompt.trim())).length;
  if (promptsInCorpus > 0) {
    console.error(`${promptsInCorpus} eval prompt(s) occur verbatim in the code stage corpus: refusing to write it`);
    return 1;
  }

  // The writer only serialises {source, text}; the large corpus's source names are plain strings.
  const entry = writeJsonlGz(join(OUT_DIR, 'train.jsonl.gz'), docs as unknown as CorpusDoc[], '.cache/data/code-stage/train.jsonl.gz');
  const bySource = new Map<string, { docs: number; chars: number }>();
  for (const d of docs) {
    const group = d.source.startsWith('replay:') ? 'replay' : d.source;
    const s = bySource.get(group) ?? { docs: 0, chars: 0 };
    bySource.set(group, { docs: s.docs + 1, chars: s.chars + d.text.length });
  }
  const manifest = {
    seed: SEED,
    output: '.cache/data/code-stage/train.jsonl.gz',
    inputs: { large_sha256: sha256Hex(readFileSync(LARGE)), eval_sets: EVAL_SETS },
    file: entry,
    parts: Object.fromEntries(bySource),
    stats,
    compose_templates: Object.fromEntries([...templates].sort(([a], [b]) => a.localeCompare(b))),
    eval_prompts_in_corpus: promptsInCorpus,
  };
  writeFileSync(join(root, 'data', 'manifest-code-stage.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(join(root, 'data', 'code-stage.md'), card(manifest));
  console.log(JSON.stringify({ ...manifest.parts, stats }, null, 1));
  console.log(`wrote ${entry.path}: ${entry.docs} docs, ${entry.chars} chars in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return 0;
}

process.exit(main());
