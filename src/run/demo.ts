/**
 * The demo run behind `magrpo demo`: evaluate the untrained pair and the inference-only
 * baselines, train with MAGRPO, evaluate the trained pair, plot the curves (demo.png) and record
 * the result with the machine it ran on (demo.json, and `record` for the README's tables).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { blasCoreSelection } from '../engine/blas-core.js';
import { cpuInfo, isaSummary } from '../engine/cpu.js';
import { backend } from '../engine/runtime.js';
import { formatTable } from '../envs/run.js';
import { lineChart, stackCharts, svgToPng } from '../plot/index.js';
import { FLUENCY_METRICS } from '../rl/fluency-monitor.js';
import { type EvalReport, evaluateTarget } from './evaluate.js';
import { isQuiet } from './progress.js';
import { RUN_FILES, readJsonl } from './run-dir.js';
import { trainRun } from './train.js';

export const DEMOS = { tldr: 'demo-tldr.yaml', 'tldr-smollm2': 'demo-tldr-smollm2.yaml', 'coop-python': 'demo-coop-python.yaml' } as const;
export type DemoEnv = keyof typeof DEMOS;

/** The paper's table columns (all metrics stay in demo.json and report.json). */
const TABLE_COLUMNS: Record<DemoEnv, string[]> = {
  tldr: [
    'return',
    'structure',
    'coherence',
    'consistency',
    'word_validity',
    'grammar_validity',
    'ref_nll',
    'distinct_2',
    'clause_length',
    'response_s',
    'tokens',
  ],
  // A real model writes English: the columns ask whether it is about the post, copied or echoed.
  'tldr-smollm2': [
    'return',
    'structure',
    'coherence',
    'consistency',
    'content_support',
    'copied_8',
    'echo',
    'ref_nll',
    'words/agent_0',
    'words/agent_1',
    'repetition',
  ],
  'coop-python': ['return', 'structure', 'syntax', 'tests', 'cooperation', 'pass@1', 'response_s', 'output_tokens'],
};

function pick(m: Record<string, number>, keys: string[]): Record<string, number> {
  return Object.fromEntries(keys.filter((k) => k in m).map((k) => [k, m[k]]));
}

export interface DemoOptions {
  env: DemoEnv;
  seed: number;
  items?: number;
  output?: string;
  set?: string[];
  quiet?: boolean;
  /** Also copy demo.json to <record>/seed-<seed>.json (the README's tables are built from there). */
  record?: string;
}

/** configs/ of the installed package (works from src/ under tsx and from dist/src/). */
function configsDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++, dir = dirname(dir)) if (existsSync(join(dir, 'configs', DEMOS.tldr))) return join(dir, 'configs');
  throw new Error('cannot find the configs/ folder of magrpo');
}

/** Where a result was measured: enough to tell machines and commits apart when numbers differ. */
export function machineRecord(): Record<string, unknown> {
  const cpu = cpuInfo();
  const blas = blasCoreSelection();
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // not a git checkout (an installed package): the version below identifies the code
  }
  return {
    cpu: cpu.modelName,
    isa: isaSummary(cpu),
    logical_cpus: cpu.logicalCpus,
    blas_core: blas?.coretype ?? blas?.entry?.defaultProbe.core ?? 'OpenBLAS default',
    blas_core_source: blas?.source ?? 'unknown',
    threads: backend().getNumThreads(),
    backend: backend().name,
    node: process.version,
    commit,
    date: new Date().toISOString(),
  };
}

export async function runDemo(flags: DemoOptions): Promise<{ runDir: string; table: string; rows: EvalReport['rows'] }> {
  const started = performance.now();
  const machine = machineRecord(); // at the start: the commit and date the run began with
  const quiet = isQuiet(flags.quiet);
  const config = join(configsDir(), DEMOS[flags.env]);
  const sets = [`trainer.seed=${flags.seed}`, `eval.seed=${flags.seed}`, `run_name=demo-${flags.env}-seed${flags.seed}-${Date.now().toString(36)}`];
  if (flags.items !== undefined) sets.push(`env.train_size=${flags.items}`);
  if (flags.output) sets.push(`output_dir=${resolve(flags.output)}`);
  sets.push(...(flags.set ?? []));
  const say = (s: string) => process.stderr.write(`${s}\n`);

  say(`[demo] 1/3 evaluating the untrained pair (${flags.env}, seed ${flags.seed})`);
  const before = await evaluateTarget(config, { set: sets, baselines: 'none', quiet });
  say('[demo] 2/3 training the pair with MAGRPO, then evaluating it against the baselines');
  const report = await trainRun(config, { set: sets, quiet });
  if (!report.final_eval) throw new Error(`the final evaluation failed: ${report.final_eval_error ?? 'unknown error'}`);
  const label: Record<string, string> = { magrpo: 'trained pair (MAGRPO)', 'untrained team': 'untrained pair' };
  const rows = [...report.final_eval.rows, ...before.rows].map((r) => ({ ...r, method: label[r.method] ?? r.method }));
  const table = formatTable(rows.map((r) => ({ method: r.method, metrics: pick(r.metrics, TABLE_COLUMNS[flags.env]) })));
  say('[demo] 3/3 plotting');
  await plotDemo(report.dir, rows);
  const record = {
    env: flags.env,
    seed: flags.seed,
    training_fluency: trainingFluency(report.dir),
    overrides: flags.set ?? [],
    wall_s: (performance.now() - started) / 1000,
    machine: { ...machineRecord(), commit: machine.commit, date: machine.date },
    rows,
  };
  writeFileSync(join(report.dir, 'demo.json'), `${JSON.stringify(record, null, 2)}\n`);
  if (flags.record) {
    mkdirSync(flags.record, { recursive: true });
    writeFileSync(join(flags.record, `seed-${flags.seed}.json`), `${JSON.stringify(record, null, 2)}\n`);
  }
  return { runDir: report.dir, table, rows };
}

/** The trained and the untrained pair's first `limit` eval completions, verbatim: read them next to the numbers (demo.json keeps more). */
export function formatExamples(rows: EvalReport['rows'], limit = 3): string {
  const out: string[] = [];
  for (const method of ['trained pair (MAGRPO)', 'untrained pair']) {
    const row = rows.find((r) => r.method === method);
    if (!row?.examples?.length) continue;
    const examples = row.examples.slice(0, limit);
    out.push(`${method}, first ${examples.length} eval items:`);
    for (const [k, ex] of examples.entries()) for (const [i, c] of ex.entries()) out.push(`  item ${k + 1}, agent ${i}: ${JSON.stringify(c.trim())}`);
    out.push('');
  }
  return out.join('\n');
}

/**
 * Each agent's fluency at the start and the end of training: the mean of the first and the last
 * tenth of its logged entries (at least one), per metric.
 */
export function trainingFluency(runDir: string): Record<string, { first: number; last: number }> {
  const out: Record<string, { first: number; last: number }> = {};
  const metrics = readJsonl<Record<string, number>>(join(runDir, RUN_FILES.metrics));
  const keys = new Set(
    metrics.flatMap((m) => Object.keys(m).filter((k) => /^agent_\d+\//.test(k) && (FLUENCY_METRICS as readonly string[]).includes(k.split('/')[1]))),
  );
  for (const k of keys) {
    const v = metrics.flatMap((m) => (Number.isFinite(m[k]) ? [m[k]] : []));
    const n = Math.max(1, Math.floor(v.length / 10));
    const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    out[k] = { first: avg(v.slice(0, n)), last: avg(v.slice(-n)) };
  }
  return out;
}

/** Moving average over the last `w` points (the per-item training metrics are noisy). */
function movingAverage(points: (readonly [number, number])[], w = 10): (readonly [number, number])[] {
  return points.map(([x], i) => {
    const win = points.slice(Math.max(0, i - w + 1), i + 1);
    return [x, win.reduce((s, p) => s + p[1], 0) / win.length] as const;
  });
}

/**
 * demo.png: the training reward (moving average) with the evaluated methods' mean rewards as
 * reference lines, and below it each agent's word validity in training with the trained and
 * untrained pairs' eval values: a reward that rises while word validity falls is hacking.
 */
export async function plotDemo(runDir: string, rows: EvalReport['rows']): Promise<void> {
  const metrics = readJsonl<Record<string, number>>(join(runDir, RUN_FILES.metrics)).filter((m) => m['turn_1/reward_mean'] !== undefined);
  const series = (key: string) => metrics.filter((m) => Number.isFinite(m[key])).map((m) => [m.step, m[key]] as const);
  const points = series('turn_1/reward_mean');
  const xMax = points.length ? points[points.length - 1][0] : 1;
  const flat = (name: string, y: number) => ({ name, points: [[0, y] as const, [xMax, y] as const] });
  const reward = await lineChart({
    title: 'MAGRPO demo: joint reward',
    xLabel: 'env step',
    yLabel: 'reward',
    series: [{ name: 'training reward (moving avg of 10)', points: movingAverage(points) }, ...rows.map((r) => flat(`eval: ${r.method}`, r.reward_mean))],
  });
  const agents = [...new Set(metrics.flatMap((m) => Object.keys(m).flatMap((k) => /^agent_(\d+)\/word_validity$/.exec(k)?.[1] ?? [])))];
  const charts = [reward];
  if (agents.length) {
    const evalLines = rows
      .filter((r) => r.metrics.word_validity !== undefined && /pair/.test(r.method))
      .map((r) => flat(`eval: ${r.method} (weakest agent)`, r.metrics.word_validity));
    charts.push(
      await lineChart({
        title: 'Fluency: word validity (% of letters in real words)',
        xLabel: 'env step',
        yLabel: 'word validity, %',
        series: [
          ...agents.map((a) => ({
            name: `training: agent ${a} (moving avg of 10)`,
            points: movingAverage(series(`agent_${a}/word_validity`).map(([x, y]) => [x, 100 * y] as const)),
          })),
          ...evalLines,
        ],
      }),
    );
  }
  const svg = stackCharts(charts);
  writeFileSync(join(runDir, 'demo.svg'), svg);
  writeFileSync(join(runDir, 'demo.png'), svgToPng(svg));
}
