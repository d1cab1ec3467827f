/**
 * The eval table: a team (trained or not) and the environment's inference baselines on the same
 * eval items with the same sampling, scored by environment.metrics() (the paper's columns).
 * Shared by `magrpo eval`, the final evaluation of `magrpo train` and the demo.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolvePrecision, setPrecision } from '../engine/runtime.js';
import type { Baseline, Environment, EpisodeResult, InferenceSampling } from '../envs/environment.js';
import { fluencyColumns } from '../envs/fluency-columns.js';
import { runTeam } from '../envs/run.js';
import { loadLora } from '../model/lora.js';
import { LanguageModel } from '../model/pretrained.js';
import type { TeamTask } from '../rl/algorithms/algorithm.js';
import { algorithmNamed } from '../rl/algorithms/index.js';
import { ConfigError, didYouMean, type MagrpoConfig } from '../rl/config.js';
import type { Task } from '../rl/task.js';
import { prepareRun } from './prepare.js';
import { isQuiet, startProgress } from './progress.js';
import type { RunConfig } from './run-config.js';
import { isRunDir, RUN_FILES, teamFolders } from './run-dir.js';

export interface EvalRow {
  method: string;
  description: string;
  metrics: Record<string, number>;
  /** Mean raw reward of the last turn: comparable with the trainer's eval/turn_T/reward_mean. */
  reward_mean: number;
  /** The first episodes' final completions, one per role, verbatim (to read next to the numbers). */
  examples?: string[][];
}

/**
 * Episodes per method whose completions are kept in the report (eval.json, a demo's record): a
 * demo's whole eval split, so that its summaries can be read next to its numbers, trained
 * against untrained, item by item.
 */
const EXAMPLES = 32;

export interface EvalReport {
  env: string;
  items: number;
  samples_per_item: number;
  sampling: InferenceSampling;
  rows: EvalRow[];
}

/** Evaluation sampling: the eval section's values, else the trainer's. */
export function inferenceSampling(ev: RunConfig['eval'], t: MagrpoConfig): InferenceSampling {
  return {
    maxNewTokens: ev.max_new_tokens ?? t.max_new_tokens,
    stopStrings: t.stop_strings,
    temperature: ev.temperature ?? (t.eval_sampling === 'greedy' ? 0 : t.temperature),
    topP: ev.top_p ?? t.top_p,
    topK: ev.top_k ?? t.top_k,
    seed: ev.seed,
    // Baselines' prompts (instructions plus another agent's text) can outgrow small contexts.
    truncate: 'left',
  };
}

/** The baselines named by `which`; an unknown name is a ConfigError listing the real ones. */
export function selectBaselines<Item>(env: Environment<Item>, which: RunConfig['eval']['baselines'], path = 'eval.baselines'): Baseline<Item>[] {
  if (which === 'none') return [];
  if (which === 'all') return [...env.baselines];
  const names = env.baselines.map((b) => b.name);
  const bad = which.filter((n) => !names.includes(n));
  if (bad.length) {
    throw new ConfigError(
      bad.map((n) => {
        const hint = didYouMean(n, names);
        return {
          path,
          message: `got "${n}", expected one of ${names.join(', ') || '(this environment has no baselines)'}${hint ? ` — did you mean "${hint}"?` : ''}`,
        };
      }),
      `baselines of ${env.name}`,
    );
  }
  return env.baselines.filter((b) => which.includes(b.name));
}

/** Loads agent folders as language models: a HF folder, or a LoRA adapter on its base model. */
export function loadTeamModels(folders: readonly { model?: string; adapter?: string }[], baseModels: readonly string[]): LanguageModel[] {
  return folders.map((f, i) => {
    if (f.model) return LanguageModel.load(f.model);
    const lm = LanguageModel.load(baseModels[i] ?? baseModels[0]);
    loadLora(lm.model, f.adapter as string);
    return lm;
  });
}

/** Items per runTeam / baseline call: small enough for a moving progress bar, fixed for reproducibility. */
const CHUNK = 8;

export async function evaluateMethods<Item>(p: {
  env: Environment<Item>;
  items: readonly Item[];
  /** `play`: the task the team's models play when its algorithm changes it (rl/algorithms TeamTask). */
  team: { method: string; description: string; models: LanguageModel[]; play?: (task: Task<Item>) => TeamTask<Item> } | null;
  baselines: readonly Baseline<Item>[];
  baseModels: LanguageModel[];
  sampling: InferenceSampling;
  samplesPerItem: number;
  numTurns: number;
  quiet: boolean;
}): Promise<EvalReport> {
  const n = p.items.length;
  const episodes = Array.from({ length: p.samplesPerItem }, () => p.items).flat();
  const methods: { method: string; description: string; run: (chunk: Item[], seed: number) => Promise<EpisodeResult[]> }[] = [];
  const task = p.env.task({ train: [...p.items], eval: [...p.items] });
  if (p.team) {
    const models = p.team.models;
    const play = p.team.play?.(task);
    methods.push({
      ...p.team,
      run: async (chunk, seed) => {
        const out = await runTeam(play?.task ?? task, chunk, models, { ...p.sampling, seed }, p.numTurns);
        // Metrics and tables read one output per role of the environment's task.
        return play ? out.map((r, j) => ({ ...r, completions: play.roleOutputs(r.completions, chunk[j]) })) : out;
      },
    });
  }
  for (const b of p.baselines) {
    const models = Array.from({ length: b.numModels }, (_, i) => p.baseModels[i] ?? p.baseModels[0]);
    methods.push({ method: b.name, description: b.description, run: (chunk, seed) => b.run(chunk, models, { ...p.sampling, seed }) });
  }
  const total = methods.length * episodes.length;
  const bar = startProgress('eval', total, { quiet: p.quiet });
  const rows: EvalRow[] = [];
  let done = 0;
  for (const m of methods) {
    const results: EpisodeResult[] = [];
    for (let k = 0; k < episodes.length; k += CHUNK) {
      const chunk = episodes.slice(k, k + CHUNK);
      const out = await m.run(chunk, p.sampling.seed + 1009 * k);
      for (const [j, r] of out.entries()) results.push({ ...r, index: (k + j) % n });
      done += chunk.length;
      bar.update(done, m.method);
    }
    const metrics = { ...p.env.metrics(results, p.items), ...fluencyColumns(results, p.items, task, p.baseModels, task.outputKind !== 'code') };
    if (!('tokens' in metrics)) metrics.tokens = results.reduce((s, r) => s + r.outputTokens, 0) / Math.max(1, results.length);
    const reward_mean = results.reduce((s, r) => s + r.reward, 0) / Math.max(1, results.length);
    const examples = results.slice(0, EXAMPLES).map((r) => [...r.completions]);
    rows.push({ method: m.method, description: m.description, metrics, reward_mean, examples });
  }
  bar.stop();
  return { env: p.env.name, items: n, samples_per_item: p.samplesPerItem, sampling: p.sampling, rows };
}

/** JSON (the whole report) or CSV (one row per method, one column per metric). */
export function writeEvalOutputs(report: EvalReport, o: { json?: string; csv?: string }): void {
  if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
  if (o.csv) {
    const cols = [...new Set(report.rows.flatMap((r) => Object.keys(r.metrics)))];
    const esc = (s: string) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
    const lines = [
      ['method', ...cols, 'reward_mean'].map(esc).join(','),
      ...report.rows.map((r) => [esc(r.method), ...cols.map((c) => r.metrics[c] ?? ''), r.reward_mean].join(',')),
    ];
    writeFileSync(o.csv, `${lines.join('\n')}\n`);
  }
}

/** Options of evaluateTarget (the flags of `magrpo eval`). */
export interface EvalFlags {
  set?: string[];
  baselines?: string;
  json?: string;
  csv?: string;
  samplesPerItem?: number;
  quiet?: boolean;
}

function parseBaselines(v: string | undefined): RunConfig['eval']['baselines'] | undefined {
  if (v === undefined) return undefined;
  if (v === 'all' || v === 'none') return v;
  return v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A run's trained team for the eval table: named by its algorithm, playing the task its algorithm plays. */
export function trainedTeam<Item>(run: { trainer: MagrpoConfig }, models: LanguageModel[]) {
  const team = algorithmNamed(run.trainer.algorithm).team;
  return {
    method: run.trainer.algorithm,
    description: 'the trained team',
    models,
    ...(team ? { play: (task: Task<Item>) => team(task, run.trainer) } : {}),
  };
}

/** Evaluates a run's trained team (a run directory) or a config's untrained models, with baselines. */
export async function evaluateTarget(target: string, flags: EvalFlags = {}): Promise<EvalReport> {
  const run = await prepareRun(target, flags.set ?? []);
  setPrecision(resolvePrecision(run.trainer.precision)); // the products training samples with, before and after it
  const trained = isRunDir(target);
  const baselines = selectBaselines(run.env, parseBaselines(flags.baselines) ?? run.config.eval.baselines, flags.baselines ? '--baselines' : 'eval.baselines');
  if (run.split.eval.length === 0) throw new Error(`${run.file}: the environment's eval split is empty`);
  const base = run.models.map((m) => LanguageModel.load(m));
  const team = trained
    ? trainedTeam(run, loadTeamModels(teamFolders(target, run.models.length), run.models))
    : { method: 'untrained team', description: 'the configured models before training', models: base };
  const report = await evaluateMethods({
    env: run.env,
    items: run.split.eval,
    team,
    baselines,
    baseModels: base,
    sampling: inferenceSampling(run.config.eval, run.trainer),
    samplesPerItem: flags.samplesPerItem ?? run.config.eval.samples_per_item,
    numTurns: run.trainer.num_turns,
    quiet: isQuiet(flags.quiet),
  });
  if (trained) writeFileSync(join(target, RUN_FILES.eval), `${JSON.stringify(report, null, 2)}\n`);
  writeEvalOutputs(report, flags);
  return report;
}
