/**
 * Builds data/coding/: the coop-python problem set (coop-python.train.jsonl, coop-python.eval.jsonl)
 * and its data card README.md.
 *
 * Each problem comes from a helper + main template of the Python generator (src/data/pyfuncs.ts,
 * kind "compose"); the prompt keeps only the main function's signature and docstring, so a team has
 * to split the work as the paper's CoopHumanEval intends: agent 1 writes the helper as `aux`, agent 2
 * the entry point calling it. Every problem is checked in the sandbox before it is written:
 *   - prompt + canonical_solution (the helper nested in the main body) passes every extracted assert;
 *   - the team answer aux_solution + main_solution passes every assert through the reward, and main
 *     calls aux.
 * Problems whose prompt occurs verbatim in the pretraining corpus (data/corpus) are dropped, so the
 * base model has not seen their solutions.
 *
 *   npx tsx scripts/build-coding-data.ts            # write data/coding/
 *   npx tsx scripts/build-coding-data.ts --check    # rebuild in memory, exit 1 if the files differ
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { MIN_BODY_CHARS } from '../src/data/decontam.js';
import { pythonDefs } from '../src/data/pydefs.js';
import { generatePyTasks } from '../src/data/pyfuncs.js';
import { seedFrom } from '../src/data/rng.js';
import { callsAux } from '../src/envs/coding/code-utils.js';
import { toCoopItem } from '../src/envs/coding/coop-item.js';
import type { CodingItem } from '../src/envs/coding/data.js';
import { codeReward } from '../src/envs/coding/reward.js';
import { extractAsserts, PythonSandbox } from '../src/sandbox/index.js';

const SEED = 20250811;
const TRAIN = 400;
const EVAL = 100;
/** Candidates generated before deduplication and checks (the 20 templates repeat names often). */
const CANDIDATES = 3000;

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const outDir = join(root, 'data', 'coding');
const check = process.argv.includes('--check');

function corpusText(): string {
  const dir = join(root, 'data', 'corpus');
  if (!existsSync(dir)) return '';
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl.gz'))
    .sort()
    .map((f) =>
      gunzipSync(readFileSync(join(dir, f)))
        .toString('utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => (JSON.parse(l) as { text: string }).text)
        .join('\n'),
    )
    .join('\n');
}

async function verify(item: CodingItem, sandbox: PythonSandbox): Promise<string | null> {
  const asserts = extractAsserts(item.test, item.entry_point);
  if (asserts.length < 2) return `only ${asserts.length} assert(s)`;
  const solo = await sandbox.runTests(item.prompt + item.canonical_solution, asserts);
  if (solo.passed !== solo.total) return `canonical solution passes ${solo.passed}/${solo.total}`;
  const team = await codeReward(
    { auxText: item.aux_solution ?? '', mainText: item.main_solution ?? '', test: item.test, entryPoint: item.entry_point, prompt: item.prompt },
    sandbox,
  );
  if (team.components.tests !== 1) return `team solution passes ${team.passed}/${team.total}`;
  if (!callsAux(team.mainFunction)) return 'team main does not call aux';
  return null;
}

async function build() {
  const tasks = generatePyTasks({ seed: seedFrom(SEED, 'coop-python'), count: CANDIDATES, kinds: ['compose'] });
  const corpus = corpusText();
  const seen = new Set<string>();
  const sandbox = new PythonSandbox({ concurrency: 2 });
  const stats = { generated: tasks.length, duplicates: 0, inCorpus: 0, sharesEvalBody: 0, failed: [] as string[] };
  const candidates: (CodingItem & { template: string })[] = [];
  for (const task of tasks) {
    const item = toCoopItem(task, 0);
    if (seen.has(item.prompt)) {
      stats.duplicates++;
      continue;
    }
    seen.add(item.prompt);
    if (corpus.includes(item.prompt)) {
      stats.inCorpus++;
      continue;
    }
    candidates.push(item);
  }
  const kept: (CodingItem & { template: string })[] = [];
  let at = 0;
  /** Verifies the next batch of candidates in the sandbox; survivors go to `into`. */
  const verifyNext = async (into: (CodingItem & { template: string })[]) => {
    const batch = candidates.slice(at, at + 50);
    at += 50;
    const problems = await Promise.all(batch.map((item) => verify(item, sandbox)));
    for (const [i, problem] of problems.entries()) {
      if (problem === null) into.push(batch[i]);
      else stats.failed.push(`${batch[i].template} (${batch[i].entry_point}): ${problem}`);
    }
  };
  while (at < candidates.length && kept.length < TRAIN + EVAL) await verifyNext(kept);
  if (kept.length < TRAIN + EVAL) throw new Error(`only ${kept.length} problems survived, need ${TRAIN + EVAL}; raise CANDIDATES`);
  // Eval: survivors TRAIN .. TRAIN + EVAL in generation order (unchanged since the set was first
  // published, so the large corpus's decontamination against it stays valid).
  const evalItems = kept.slice(TRAIN, TRAIN + EVAL).map((item, i) => ({ ...item, task_id: `CoopPython/${TRAIN + i}` }));
  // Train: survivors in generation order whose functions share no normalized body with an eval
  // problem's entry point (same template, new names is allowed; the same solution is not).
  const evalBodies = new Set(evalItems.flatMap((item) => entryBodies(item)));
  const train: (CodingItem & { template: string })[] = [];
  const pool = [...kept.slice(0, TRAIN), ...kept.slice(TRAIN + EVAL)];
  const take = (item: CodingItem & { template: string }) => {
    if (train.length >= TRAIN) return;
    if (allBodies(item).some((b) => evalBodies.has(b))) stats.sharesEvalBody++;
    else train.push(item);
  };
  for (const item of pool) take(item);
  while (train.length < TRAIN && at < candidates.length) {
    const more: (CodingItem & { template: string })[] = [];
    await verifyNext(more);
    for (const item of more) take(item);
  }
  if (train.length < TRAIN) throw new Error(`only ${train.length} training problems share no body with eval; raise CANDIDATES`);
  return { train: train.map((item, i) => ({ ...item, task_id: `CoopPython/${i}` })), eval: evalItems, stats, corpusChecked: corpus !== '' };
}

/** The programs a problem's solutions form: as HumanEval (helper nested) and as the team writes them. */
function solutionPrograms(item: CodingItem): string[] {
  const helper = /^\s*def\s+(\w+)/.exec(item.canonical_solution ?? '')?.[1];
  const main = item.main_solution ?? '';
  return [item.prompt + item.canonical_solution, main, ...(helper === undefined ? [] : [main.replace(/\baux\b/g, helper)])];
}

/** Normalized bodies (≥ MIN_BODY_CHARS) of the entry point in every solution form. */
function entryBodies(item: CodingItem): string[] {
  return solutionPrograms(item).flatMap((p) =>
    pythonDefs(p)
      .filter((d) => d.name === item.entry_point && d.body.length >= MIN_BODY_CHARS)
      .map((d) => d.body),
  );
}

/** Normalized bodies (≥ MIN_BODY_CHARS) of every function in every solution form. */
function allBodies(item: CodingItem): string[] {
  return [...solutionPrograms(item), item.aux_solution ?? ''].flatMap((p) =>
    pythonDefs(p)
      .filter((d) => d.body.length >= MIN_BODY_CHARS)
      .map((d) => d.body),
  );
}

function jsonl(items: readonly object[]): string {
  return `${items.map((x) => JSON.stringify(x)).join('\n')}\n`;
}

function dataCard(built: Awaited<ReturnType<typeof build>>): string {
  const count = (items: readonly { template: string }[]) => {
    const m = new Map<string, number>();
    for (const x of items) m.set(x.template, (m.get(x.template) ?? 0) + 1);
    return m;
  };
  const tr = count(built.train);
  const ev = count(built.eval);
  const templates = [...new Set([...tr.keys(), ...ev.keys()])].sort();
  const example = built.train[0];
  const { stats } = built;
  return `# Coding data: coop-python

Generated by \`npx tsx scripts/build-coding-data.ts\` (seed ${SEED}); do not edit by hand. Licence:
generated by this repository (MIT). HumanEval itself lives in \`data/humaneval/\` (its own card).

## What it is

Small Python problems in HumanEval's format that decompose into a helper and a main function, in the
spirit of the paper's CoopHumanEval, sized for a ~10M-parameter model trained on simple Python. Each
comes from one of the ${templates.length} helper + main ("compose") templates of \`src/data/pyfuncs.ts\`
(names, constants, wording and test inputs vary). The prompt shows only the main function's signature
and docstring (with one \`>>>\` example, which is also the first test); the helper is not shown, so
agent 1 has to write it as \`aux\` and agent 2 to call it.

| split | file | problems |
| --- | --- | --- |
| train | \`coop-python.train.jsonl\` | ${built.train.length} |
| eval | \`coop-python.eval.jsonl\` | ${built.eval.length} |

Fields (one JSON object per line):

- \`task_id\` (\`CoopPython/<i>\`), \`prompt\`, \`test\` (\`def check(candidate):\` with 2-4 single-line
  asserts), \`entry_point\`: the HumanEval fields the environment uses;
- \`canonical_solution\`: the main body with the helper nested inside it, so \`prompt +
  canonical_solution\` is a correct program, as in HumanEval;
- \`aux_solution\`, \`main_solution\`: a correct team answer (the helper renamed \`aux\`, and the entry
  point calling it). Single-line mains such as \`return sum(v for v in xs if aux(v))\` count as thin
  wrappers under the reward, so this answer scores 3.0 on those problems and 4.0 on the others;
- \`template\`: the generator template.

Example (\`${example.task_id}\`, template \`${example.template}\`):

\`\`\`python
${example.prompt}\`\`\`

## How it was checked

${stats.generated} candidates were generated; ${stats.duplicates} repeated an earlier prompt and were
dropped; ${built.corpusChecked ? `${stats.inCorpus} whose prompt occurs verbatim in the pretraining corpus (\`data/corpus/*.jsonl.gz\` at build time) were dropped, so the base model has not seen their solutions` : 'no pretraining corpus was found, so no decontamination was done'}.
Then, in the Python sandbox, \`prompt + canonical_solution\` had to pass every extracted assert, and the
team answer had to pass every assert through the coding reward with main calling aux;
${stats.failed.length} candidate(s) failed${stats.failed.length ? `: ${stats.failed.slice(0, 5).join('; ')}` : ''}.
Eval is survivors ${TRAIN} to ${TRAIN + EVAL - 1} in generation order (which cycles through the templates). Train is
the other survivors in generation order, except the ${stats.sharesEvalBody} whose functions have the same normalized
body (docstrings, comments and layout removed; \`src/data/pydefs.ts\`) as an eval problem's entry point.

Train and eval share templates (eval measures generalisation to new names, constants and inputs, not
to new kinds of problems), but no prompt and no entry-point solution body occurs in both
(\`test/data/disjoint.test.ts\` checks it, and that the large pretraining corpus reproduces no eval problem).

## Problems per template

| template | train | eval |
| --- | --- | --- |
${templates.map((t) => `| \`${t}\` | ${tr.get(t) ?? 0} | ${ev.get(t) ?? 0} |`).join('\n')}
`;
}

const built = await build();
const files: Record<string, string> = {
  'coop-python.train.jsonl': jsonl(built.train),
  'coop-python.eval.jsonl': jsonl(built.eval),
  'README.md': dataCard(built),
};
if (check) {
  const stale = Object.entries(files).filter(([name, text]) => !existsSync(join(outDir, name)) || readFileSync(join(outDir, name), 'utf8') !== text);
  if (stale.length) {
    console.error(`data/coding is stale: ${stale.map(([n]) => n).join(', ')} — run npx tsx scripts/build-coding-data.ts`);
    process.exit(1);
  }
  console.log('data/coding is up to date');
} else {
  mkdirSync(outDir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(outDir, name), text);
  const s = built.stats;
  console.log(`wrote ${built.train.length} train + ${built.eval.length} eval problems to data/coding`);
  console.log(
    `generated ${s.generated}, duplicate prompts ${s.duplicates}, in corpus ${s.inCorpus}, sharing an eval body ${s.sharesEvalBody}, failed checks ${s.failed.length}`,
  );
}
