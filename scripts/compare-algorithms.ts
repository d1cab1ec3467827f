/**
 * MAGRPO against centralized MAGRPO, IAC, MAAC and MADPO on the TL;DR writing task with the
 * shipped 1.7M-parameter model (models/base), the same budget of sampled summaries for each
 * (configs/compare/*.yaml), three seeds: runs each algorithm × seed through the CLI, one run at a
 * time, and records results/algorithms/<algo>-seed<k>.json (eval metrics, verbatim completions,
 * settings, budget, timings, the machine and its load average before and after). The untrained
 * pair is evaluated once per seed as a reference (untrained-seed<k>.json). The README table is
 * built from the committed JSON files only; test/compare-algorithms-results.test.ts checks it.
 *
 *   npx tsx scripts/compare-algorithms.ts                        every algorithm × seeds 1–3, then the table
 *   npx tsx scripts/compare-algorithms.ts --algos magrpo,iac --seeds 1 [--skip-existing] [--out DIR]
 *                                         [--set key=value ...]   (passed to the CLI: smoke tests only)
 *   npx tsx scripts/compare-algorithms.ts --table                rewrite results/algorithms/README.md's table
 *   npx tsx scripts/compare-algorithms.ts --check                exit 1 if the README's table is out of date
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';

/** The compared algorithms, in table order: name in files → config and label. */
export const ALGORITHMS: { name: string; config: string; label: string }[] = [
  { name: 'magrpo', config: 'configs/compare/magrpo.yaml', label: 'MAGRPO' },
  { name: 'centralized', config: 'configs/compare/centralized.yaml', label: 'centralized MAGRPO' },
  { name: 'iac', config: 'configs/compare/iac.yaml', label: 'IAC' },
  { name: 'maac', config: 'configs/compare/maac.yaml', label: 'MAAC' },
  { name: 'madpo', config: 'configs/compare/madpo.yaml', label: 'MADPO' },
];
/** The untrained pair (MAGRPO's config, evaluated before any update): what training changed. */
export const UNTRAINED = { name: 'untrained', config: 'configs/compare/magrpo.yaml', label: 'untrained pair (reference)' };

export const RESULTS_DIR = 'results/algorithms';
export const README = join(RESULTS_DIR, 'README.md');
const SEEDS = [1, 2, 3];
/** Verbatim eval completions kept per run (the README quotes the first two of seed 1). */
const EXAMPLES = 4;

/** Table columns: metric key → header (the writing environment's eval metrics; docs/metrics.md). */
export const COLUMNS: [string, string][] = [
  ['return', 'return'],
  ['word_validity', 'word validity'],
  ['grammar_validity', 'grammar'],
  ['ref_nll', 'ref NLL'],
  ['content_support', 'content support'],
  ['copied_8', 'copied'],
  ['words/agent_0', 'words (concise)'],
  ['words/agent_1', 'words (detailed)'],
];

export interface Budget {
  /** Training posts. */
  posts: number;
  /** Summaries sampled per writer and post over the whole run (G × epochs; MADPO: its candidates). */
  per_post_per_writer: number;
  writers: number;
  /** Models trained (centralized: one for both writers). */
  policies: number;
  /** posts × per_post_per_writer × writers. */
  summaries: number;
  /** How this algorithm reaches per_post_per_writer. */
  how: string;
}

export interface AlgoResult {
  algo: string;
  label: string;
  seed: number;
  config: string;
  command: string;
  status: string;
  budget: Budget | null;
  /** The resolved trainer keys that differ between algorithms, and the shared ones. */
  settings: Record<string, unknown>;
  wall_s: number;
  train_s: number | null;
  eval_s: number | null;
  eval_items: number;
  metrics: Record<string, number>;
  reward_mean: number;
  examples: string[][];
  machine: Record<string, unknown>;
}

const num = (x: unknown): number => x as number;

/** The sampling budget of a config (read from the YAML file, the same values the CLI reads). */
export function budgetOf(file: string): Budget {
  const c = parse(readFileSync(file, 'utf8')) as { env: { train_size: number }; trainer: Record<string, unknown> };
  const t = c.trainer;
  const writers = 2;
  const posts = c.env.train_size;
  if (t.algorithm === 'madpo') {
    const k = num(t.preference_num_candidates);
    return {
      posts,
      per_post_per_writer: k,
      writers,
      policies: 2,
      summaries: posts * k * writers,
      how: `${k} candidates per writer, sampled once before any update (then ${t.num_train_epochs} DPO passes over ${t.preference_pairs_per_sample} pairs per post)`,
    };
  }
  const g = num(t.num_generations);
  const e = num(t.num_train_epochs);
  const policies = t.algorithm === 'centralized_magrpo' ? 1 : 2;
  return {
    posts,
    per_post_per_writer: g * e,
    writers,
    policies,
    summaries: posts * g * e * writers,
    how: `G = ${g} × ${e} epochs${policies === 1 ? ' (one model writes both summaries in one completion)' : ''}`,
  };
}

function loadavg(): number[] {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
}

function cpuModel(): string {
  const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
  return m ? m[1].trim() : 'unknown';
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

/** Where a run was measured: the CPU, BLAS, threads, commit, uncommitted engine changes, load. */
async function machine(): Promise<Record<string, unknown>> {
  const { machineRecord } = await import('../src/run/demo.js');
  const { backend } = await import('../src/engine/runtime.js');
  backend(); // loads the addon, which picks the OpenBLAS core machineRecord reports
  const dirty = git(['status', '--porcelain', '--', 'src', 'native'])
    .split('\n')
    .filter(Boolean)
    .map((l) => l.slice(3));
  return { ...machineRecord(), cpu_model: cpuModel(), uncommitted: dirty };
}

/** `--set key=value` flags of this script, passed on to every CLI run. */
function extraSets(): string[] {
  return process.argv.flatMap((a, i) => (a === '--set' && process.argv[i + 1] ? ['--set', process.argv[i + 1]] : []));
}

function cli(args: string[]): { command: string; wall_s: number; ok: boolean } {
  const t0 = performance.now();
  args = [...args, ...extraSets()];
  const r = spawnSync('npx', ['tsx', 'src/cli/main.ts', ...args], { stdio: 'inherit' });
  return { command: `npx tsx src/cli/main.ts ${args.join(' ')}`, wall_s: (performance.now() - t0) / 1000, ok: r.status === 0 };
}

/** What an evaluation or a training run gives a result: the CLI call, the eval row, and the fields that differ. */
interface Measured {
  run: { command: string; wall_s: number };
  row: { metrics: Record<string, number>; reward_mean: number; examples?: string[][] };
  own: Pick<AlgoResult, 'status' | 'budget' | 'settings' | 'train_s' | 'eval_s' | 'eval_items'>;
}

/** The untrained pair through `magrpo eval` at eval seed `seed`. */
function evaluateUntrained(algo: { config: string }, seed: number, runs: string, runName: string): Measured {
  const json = join(runs, `${runName}.json`);
  const r = cli(['eval', algo.config, '-q', '--baselines', 'none', '--json', json, '--set', `eval.seed=${seed}`]);
  if (!r.ok) throw new Error(`${r.command} failed`);
  const report = JSON.parse(readFileSync(json, 'utf8'));
  return {
    run: r,
    row: report.rows[0],
    own: { status: 'evaluated', budget: null, settings: {}, train_s: null, eval_s: null, eval_items: report.items },
  };
}

/** One algorithm through `magrpo train` with trainer and eval seed `seed`, its run folder <runs>/<runName>. */
function train(algo: { config: string }, seed: number, runs: string, runName: string): Measured {
  const r = cli([
    'train',
    algo.config,
    '-q',
    '--set',
    `trainer.seed=${seed}`,
    '--set',
    `eval.seed=${seed}`,
    '--set',
    `output_dir=${runs}`,
    '--set',
    `run_name=${runName}`,
  ]);
  const dir = join(runs, runName);
  if (!r.ok || !existsSync(join(dir, 'eval.json'))) {
    const failure = existsSync(join(dir, 'failure.json')) ? readFileSync(join(dir, 'failure.json'), 'utf8') : '(no failure.json)';
    throw new Error(`${r.command} failed: ${failure}`);
  }
  const report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
  const ev = JSON.parse(readFileSync(join(dir, 'eval.json'), 'utf8'));
  // The trainer keys the config sets (the rest are the algorithm's defaults), as the run resolved them.
  const t = report.config.trainer as Record<string, unknown>;
  const own = Object.keys((parse(readFileSync(algo.config, 'utf8')) as { trainer: Record<string, unknown> }).trainer);
  const settings = Object.fromEntries([...own, 'seed'].map((k) => [k, t[k]]));
  return {
    run: r,
    row: ev.rows[0],
    own: {
      status: `${report.status}: ${report.items}/${report.total_items} items`,
      budget: budgetOf(algo.config),
      settings: { ...settings, train_posts: report.config.env.train_size, eval_posts: ev.items },
      train_s: report.timings.train_s,
      eval_s: report.timings.final_eval_s,
      eval_items: ev.items,
    },
  };
}

/** One algorithm × seed through `magrpo train` (the untrained pair: `magrpo eval`), recorded as <out>/<algo>-seed<seed>.json. */
async function runOne(algo: { name: string; config: string; label: string }, seed: number, out: string, runs: string): Promise<AlgoResult> {
  const runName = `${algo.name}-seed${seed}-${Date.now().toString(36)}`;
  const before = loadavg();
  const m = await machine();
  const { run, row, own } = algo.name === UNTRAINED.name ? evaluateUntrained(algo, seed, runs, runName) : train(algo, seed, runs, runName);
  const result: AlgoResult = {
    algo: algo.name,
    label: algo.label,
    seed,
    config: algo.config,
    command: run.command,
    status: own.status,
    budget: own.budget,
    settings: own.settings,
    wall_s: run.wall_s,
    train_s: own.train_s,
    eval_s: own.eval_s,
    eval_items: own.eval_items,
    metrics: row.metrics,
    reward_mean: row.reward_mean,
    examples: (row.examples ?? []).slice(0, EXAMPLES),
    machine: { ...m, loadavg_before: before, loadavg_after: loadavg() },
  };
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, `${algo.name}-seed${seed}.json`), `${JSON.stringify(result, null, 2)}\n`);
  return result;
}

// ---------------------------------------------------------------- the table

export function loadResults(dir = RESULTS_DIR): AlgoResult[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /^[a-z_]+-seed\d+\.json$/.test(f))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as AlgoResult);
}

const fmt = (x: number) => (Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;

function cell(v: number[]): string {
  if (v.length === 0) return '-';
  return v.length > 1 ? `${fmt(mean(v))} (${fmt(Math.min(...v))}–${fmt(Math.max(...v))})` : fmt(v[0]);
}

const oneLine = (s: string) => s.trim().replace(/\s*\n\s*/g, ' ⏎ ');

/** The generated part of results/algorithms/README.md, from the result files in `dir`. */
export function renderTable(dir = RESULTS_DIR): string {
  const results = loadResults(dir);
  if (results.length === 0) return `_No result files in \`${dir}\` yet._`;
  const rows = [...ALGORITHMS, UNTRAINED]
    .map((a) => ({ ...a, runs: results.filter((r) => r.algo === a.name).sort((x, y) => x.seed - y.seed) }))
    .filter((a) => a.runs.length);
  const lines = [
    `| algorithm | seeds | ${COLUMNS.map(([, h]) => h).join(' | ')} | train (min) | wall (min) |`,
    `| --- | --- |${' --- |'.repeat(COLUMNS.length + 2)}`,
  ];
  for (const a of rows) {
    const cells = COLUMNS.map(([k]) => cell(a.runs.flatMap((r) => (Number.isFinite(r.metrics[k]) ? [r.metrics[k]] : []))));
    const train = cell(a.runs.flatMap((r) => (r.train_s === null ? [] : [r.train_s / 60])));
    const wall = cell(a.runs.map((r) => r.wall_s / 60));
    lines.push(`| ${a.label} | ${a.runs.map((r) => r.seed).join(', ')} | ${cells.join(' | ')} | ${train} | ${wall} |`);
  }
  // Which returns are inside the seed spread of MAGRPO's: overlapping min–max ranges.
  const ret = (name: string) => results.filter((r) => r.algo === name).map((r) => r.metrics.return);
  const ref = ret('magrpo');
  const spread: string[] = [];
  if (ref.length > 1)
    for (const a of rows.filter((x) => x.name !== 'magrpo')) {
      const v = ret(a.name);
      const lo = Math.min(...v);
      const hi = Math.max(...v);
      const where =
        hi < Math.min(...ref)
          ? 'below every MAGRPO seed'
          : lo > Math.max(...ref)
            ? 'above every MAGRPO seed'
            : 'inside the seed spread (the min–max ranges overlap)';
      spread.push(`${a.label} ${where}`);
    }
  const trained = results.filter((r) => r.budget);
  const budgets = rows.flatMap((a) => (a.runs[0].budget ? [`${a.label}: ${a.runs[0].budget.how}`] : []));
  const b = trained[0]?.budget;
  const budgetKey = (x: Budget | null) => (x ? `${x.posts} × ${x.per_post_per_writer} × ${x.writers}` : '');
  const differ = [...new Set(trained.map((r) => budgetKey(r.budget)))].length > 1;
  const cpus = [
    ...new Set(
      results.map(
        (r) =>
          `${r.machine.cpu_model} (${r.machine.logical_cpus} logical CPUs, ${r.machine.isa}; OpenBLAS core ${r.machine.blas_core}, ${r.machine.threads} thread(s))`,
      ),
    ),
  ];
  const commitList = [...new Set(results.map((r) => r.machine.commit as string))];
  const commits = `${commitList.length > 1 ? 'commits' : 'commit'} ${commitList.join(', ')}`;
  const dirty = results.some((r) => (r.machine.uncommitted as string[] | undefined)?.length);
  const loads = results.flatMap((r) => [
    ...((r.machine.loadavg_before as number[]) ?? []).slice(0, 1),
    ...((r.machine.loadavg_after as number[]) ?? []).slice(0, 1),
  ]);
  const evalItems = [...new Set(results.map((r) => r.eval_items))].join(', ');
  lines.push(
    '',
    `Mean over the seeds listed, with min–max in brackets. Return is the eval expected return (the paper's normalised TL;DR reward, %, without the fluency guard, on ${evalItems} held-out posts, one sample each at the training temperature). ` +
      "Word validity is the weaker writer's share (%) of letters in real words, grammar its share (%) of function-word trigrams found in English prose (TL;DR posts: 96.7), ref NLL the higher mean per-token NLL under the untrained model (lower: more natural text), " +
      "content support the weaker writer's share (%) of content words found in the post, copied the larger share (%) of words in 8-word runs copied from the post, words the mean words per summary. " +
      'Train is the training loop, wall the whole CLI run (model loading, training, final evaluation).',
    '',
    differ
      ? `The result files have different budgets: ${trained.map((r) => `${r.algo} seed ${r.seed} ${budgetKey(r.budget)}`).join(', ')}.`
      : b
        ? `Budget, identical for every algorithm: ${b.posts} training posts × ${b.per_post_per_writer} sampled summaries per writer and post × ${b.writers} writers = ${b.summaries} summaries, at most 96 new tokens per summary (centralized: 192 per joint completion, which holds both). ${budgets.join('; ')}.`
        : '',
    '',
    `Measured on ${cpus.join('; ')} at ${commits}${dirty ? ' (with uncommitted engine changes of that day in the working tree: each file lists them under machine.uncommitted)' : ''}, one run at a time; load average (1 min) ${fmt(Math.min(...loads))}–${fmt(Math.max(...loads))} before and after the runs. ` +
      'Generated by `npx tsx scripts/compare-algorithms.ts --table` from `results/algorithms/*.json`; the runs by `npx tsx scripts/compare-algorithms.ts` (each one `' +
      (rows[0].runs[0].command.replace(/run_name=\S+/, 'run_name=…').replace(/output_dir=\S+/, 'output_dir=…') ?? '') +
      '`, per algorithm and seed).',
  );
  if (spread.length) lines.push('', `Return against MAGRPO's seeds: ${spread.join('; ')}.`);
  lines.push('', 'Eval posts 1 and 2 of seed 1, verbatim (writer 0 concise, writer 1 detailed):');
  for (const a of rows) {
    const first = a.runs.find((r) => r.seed === 1) ?? a.runs[0];
    if (!first?.examples.length) continue;
    lines.push('', `${a.label}, seed ${first.seed}:`, '', '```text');
    for (const [k, ex] of first.examples.slice(0, 2).entries()) for (const [i, c] of ex.entries()) lines.push(`[post ${k + 1}, writer ${i}] ${oneLine(c)}`);
    lines.push('```');
  }
  return lines.join('\n');
}

const OPEN = '<!-- compare-algorithms:table -->';
const CLOSE = '<!-- /compare-algorithms:table -->';

/** The README with its generated block replaced (or appended when it has none). */
export function renderReadme(text: string, dir = RESULTS_DIR): string {
  const block = `${OPEN}\n${renderTable(dir)}\n${CLOSE}`;
  const at = text.indexOf(OPEN);
  const end = text.indexOf(CLOSE);
  if (at < 0 || end < 0) return `${text}${text.endsWith('\n') || text === '' ? '' : '\n'}\n${block}\n`;
  return text.slice(0, at) + block + text.slice(end + CLOSE.length);
}

// ---------------------------------------------------------------- command line

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  if (process.argv.includes('--table') || process.argv.includes('--check')) {
    const text = existsSync(README) ? readFileSync(README, 'utf8') : '# Algorithms compared on TL;DR\n';
    const next = renderReadme(text);
    if (process.argv.includes('--check')) {
      if (next !== text) {
        process.stderr.write(`${README}: the table differs from results/algorithms/*.json: run npx tsx scripts/compare-algorithms.ts --table\n`);
        process.exit(1);
      }
      return;
    }
    writeFileSync(README, next);
    process.stdout.write(`${README}\n`);
    return;
  }
  const names = arg('--algos')?.split(',') ?? [...ALGORITHMS.map((a) => a.name), UNTRAINED.name];
  const seeds = arg('--seeds')?.split(',').map(Number) ?? SEEDS;
  const out = arg('--out') ?? RESULTS_DIR;
  const runs = arg('--runs') ?? join(tmpdir(), 'magrpo-compare-runs');
  const algos = names.map((n) => {
    const a = [...ALGORITHMS, UNTRAINED].find((x) => x.name === n);
    if (!a) throw new Error(`unknown algorithm "${n}" (known: ${[...ALGORITHMS, UNTRAINED].map((x) => x.name).join(', ')})`);
    return a;
  });
  // The same budget or nothing: refuse before any run.
  const budgets = ALGORITHMS.map((a) => ({ name: a.name, b: budgetOf(a.config) }));
  const key = (b: Budget) => `${b.posts} × ${b.per_post_per_writer} × ${b.writers}`;
  if (new Set(budgets.map((x) => key(x.b))).size !== 1) throw new Error(`budgets differ: ${budgets.map((x) => `${x.name} ${key(x.b)}`).join(', ')}`);
  mkdirSync(runs, { recursive: true });
  const failed: string[] = [];
  // Seed-major: a cut-short set still has whole seeds.
  for (const seed of seeds)
    for (const a of algos) {
      if (process.argv.includes('--skip-existing') && existsSync(join(out, `${a.name}-seed${seed}.json`))) continue;
      process.stderr.write(`[compare] ${a.name} seed ${seed} (load ${loadavg().join(' ')})\n`);
      try {
        const r = await runOne(a, seed, out, runs);
        process.stderr.write(`[compare] ${a.name} seed ${seed}: return ${fmt(r.metrics.return)}, ${fmt(r.wall_s / 60)} min\n`);
      } catch (e) {
        failed.push(`${a.name} seed ${seed}: ${(e as Error).message}`);
        process.stderr.write(`[compare] FAILED ${a.name} seed ${seed}: ${(e as Error).message}\n`);
      }
    }
  if (out === RESULTS_DIR) writeFileSync(README, renderReadme(existsSync(README) ? readFileSync(README, 'utf8') : '# Algorithms compared on TL;DR\n'));
  if (failed.length) {
    process.stderr.write(`failed:\n${failed.join('\n')}\n`);
    process.exitCode = 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
