/**
 * `magrpo train <config.yaml>`: one run from a config file into its run directory (run-dir.ts),
 * with progress and ETA, TensorBoard scalars, recorded rollout trees, Ctrl-C → checkpoint and
 * stop, `--resume`, the final evaluation against baselines and report.md / report.json.
 */

import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { formatTable } from '../envs/run.js';
import { LanguageModel } from '../model/pretrained.js';
import { readTrainerState, resolveCheckpoint, rollbackLogs } from '../rl/checkpoint.js';
import type { MetricsSink } from '../rl/metrics.js';
import { MAGRPOTrainer } from '../rl/trainer.js';
import { type EvalReport, evaluateMethods, inferenceSampling, loadTeamModels, selectBaselines } from '../run/evaluate.js';
import { RunTracker } from '../run/failure-report.js';
import { type PreparedRun, prepareRun } from '../run/prepare.js';
import { formatDuration, isQuiet, type Progress, startProgress } from '../run/progress.js';
import { createRunDir, RUN_FILES, readJsonl, SamplesRecorder, teamFolders, writeRunConfig } from '../run/run-dir.js';
import { sandboxIsolation } from '../sandbox/index.js';
import { serveDashboard } from './dashboard.js';
import { untilInterrupted } from './interrupt.js';
import { CLI, intOption } from './options.js';

export interface TrainFlags {
  set?: string[];
  resume?: string;
  maxItems?: number;
  quiet?: boolean;
  dashboard?: boolean;
  port?: number;
}

export interface RunReport {
  run_name: string;
  dir: string;
  env: string;
  models: string[];
  /** finished: all epochs; stopped: --max-items; interrupted: Ctrl-C. */
  status: 'finished' | 'stopped' | 'interrupted';
  started_at: string;
  finished_at: string;
  items: number;
  total_items: number;
  env_step: number;
  timings: Record<string, number>;
  last_metrics: Record<string, number>;
  final_eval: EvalReport | null;
  /** Why the final evaluation failed, if it did (training results are kept). */
  final_eval_error?: string;
}

/** Remembers the newest value of every metric (for the progress line and the report). */
class LatestSink implements MetricsSink {
  readonly latest: Record<string, number> = {};
  constructor(private readonly tracker: RunTracker) {}
  log(step: number, metrics: Record<string, number>): void {
    Object.assign(this.latest, metrics);
    this.tracker.envStep = step;
  }
  status(): string {
    const r = this.latest['turn_1/reward_mean'];
    const e = this.latest['eval/turn_1/reward_mean'];
    return [r === undefined ? '' : `reward ${r.toFixed(3)}`, e === undefined ? '' : `eval ${e.toFixed(3)}`].filter(Boolean).join(' | ');
  }
}

/** Trains one run (see the module comment); a failure during training leaves failure.json in its run directory. */
export async function train(target: string | undefined, flags: TrainFlags = {}): Promise<RunReport> {
  const tracker = new RunTracker();
  try {
    return await trainRun(target, flags, tracker);
  } catch (e) {
    tracker.fail(e);
    throw e;
  }
}

async function trainRun(target: string | undefined, flags: TrainFlags, tracker: RunTracker): Promise<RunReport> {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const quiet = isQuiet(flags.quiet);
  const run = await prepareRun(target ?? (flags.resume as string), flags.set ?? []);
  const { config, env, split, models } = run;
  const baselines = config.eval.at_end ? selectBaselines(env, config.eval.baselines) : [];
  const dir = flags.resume ?? createRunDir(config);
  if (flags.resume && !existsSync(join(dir, 'checkpoints', 'latest'))) throw new Error(`${dir}: nothing to resume (no checkpoints/latest)`);
  writeRunConfig(dir, { ...config, run_name: config.run_name ?? dir.split(/[\\/]/).filter(Boolean).pop() ?? null });

  // Logs written after the checkpoint (by the run that died) would repeat the replayed steps.
  if (flags.resume) rollbackLogs(dir, readTrainerState(dir).logs, { removeNewer: true });
  tracker.dir = dir;
  const latest = new LatestSink(tracker);
  const recorder = new SamplesRecorder(join(dir, RUN_FILES.samples), config.samples);
  const totalItems = split.train.length * run.trainer.num_train_epochs;
  let progress: Progress | null = null;
  const trainer = new MAGRPOTrainer({
    task: env.task(split),
    models,
    config: { ...run.trainer, output_dir: dir },
    sinks: [latest],
    onItem: (p) => {
      tracker.items = p.items;
      progress?.update(p.items, latest.status());
    },
    onTree: (p) => recorder.onTree(p),
    // Fluency warnings (possible reward hacking) must stay visible above the progress bar.
    onWarning: (m) => (progress ? progress.log(`[magrpo] warning: ${m}`) : process.stderr.write(`[magrpo] warning: ${m}\n`)),
    onEval: (p) =>
      progress?.log(
        `[eval] env step ${p.envStep}: ${Object.entries(p.metrics)
          .map(([k, v]) => `${k}=${v.toFixed(3)}`)
          .join(' ')}`,
      ),
  });

  const port = flags.port ?? config.dashboard.port;
  const dashboard =
    flags.dashboard || config.dashboard.enabled ? await serveDashboard([dir], port, flags.port === undefined ? 'dashboard.port' : '--port') : null;
  if (dashboard) process.stderr.write(`dashboard: ${dashboard.url}\n`);
  if (trainer.task.outputKind === 'code') {
    // The reward runs model-written code: say how well it is fenced in.
    const isolation = await sandboxIsolation();
    process.stderr.write(`sandbox: ${isolation.level} (${isolation.detail})\n`);
  }
  let interrupts = 0;
  const onSigint = () => {
    if (++interrupts > 1) process.exit(130);
    trainer.requestStop();
    const msg = 'stopping after this item and writing a checkpoint (Ctrl-C again to abort)';
    if (progress) progress.log(msg);
    else process.stderr.write(`${msg}\n`);
  };
  process.on('SIGINT', onSigint);

  let result: Awaited<ReturnType<MAGRPOTrainer<unknown>['train']>>;
  const tTrain = performance.now();
  try {
    progress = startProgress('train', totalItems, { quiet, start: 0 });
    result = await trainer.train({ resumeFrom: flags.resume, maxItems: flags.maxItems });
  } finally {
    progress?.stop();
    progress = null;
    process.off('SIGINT', onSigint);
    await trainer.close();
  }
  tracker.dir = null;
  const trainSeconds = (performance.now() - tTrain) / 1000;
  const status = interrupts > 0 ? 'interrupted' : result.items < totalItems ? 'stopped' : 'finished';

  const tEval = performance.now();
  // A failed evaluation must not lose the report of a finished training run: report, then rethrow.
  let evalError: Error | null = null;
  const finalEval =
    status !== 'interrupted' && config.eval.at_end && split.eval.length > 0
      ? await finalEvaluation(run, dir, baselines, quiet).catch((e: Error) => {
          evalError = e;
          return null;
        })
      : null;
  if (finalEval) writeFileSync(join(dir, RUN_FILES.eval), `${JSON.stringify(finalEval, null, 2)}\n`);

  const report: RunReport = {
    run_name: dir.split(/[\\/]/).filter(Boolean).pop() as string,
    dir,
    env: env.name,
    models,
    status,
    started_at: startedAt,
    finished_at: new Date().toISOString(),
    items: result.items,
    total_items: totalItems,
    env_step: result.envStep,
    timings: { ...timingSplit(dir), train_s: trainSeconds, final_eval_s: (performance.now() - tEval) / 1000, total_s: (performance.now() - t0) / 1000 },
    last_metrics: latest.latest,
    final_eval: finalEval,
    ...(evalError ? { final_eval_error: (evalError as Error).message } : {}),
  };
  writeFileSync(join(dir, RUN_FILES.reportJson), `${JSON.stringify({ ...report, config }, null, 2)}\n`);
  writeFileSync(join(dir, RUN_FILES.reportMd), reportMarkdown(report));
  process.stderr.write(`${status}: ${report.items}/${totalItems} items, ${result.envStep} env steps in ${formatDuration(report.timings.total_s)} → ${dir}\n`);
  if (status !== 'finished') process.stderr.write(`checkpoint: ${resolveCheckpoint(dir)}\ncontinue with: ${CLI} train --resume ${dir}\n`);
  if (finalEval) process.stdout.write(`${formatTable(finalEval.rows)}\n`);
  if (evalError) throw new Error(`final evaluation failed (training results and checkpoints are in ${dir}): ${(evalError as Error).message}`);
  if (dashboard) {
    if (!quiet) {
      process.stderr.write(`dashboard still at ${dashboard.url} (Ctrl-C to exit)\n`);
      await untilInterrupted();
    }
    await dashboard.close();
  }
  return report;
}

async function finalEvaluation(run: PreparedRun, dir: string, baselines: ReturnType<typeof selectBaselines>, quiet: boolean): Promise<EvalReport> {
  const team = loadTeamModels(teamFolders(dir, run.models.length), run.models);
  const base = run.models.map((m) => LanguageModel.load(m));
  return evaluateMethods({
    env: run.env,
    items: run.split.eval,
    team: { method: 'magrpo', description: 'the trained team', models: team },
    baselines,
    baseModels: base,
    sampling: inferenceSampling(run.config.eval, run.trainer),
    samplesPerItem: run.config.eval.samples_per_item,
    numTurns: run.trainer.num_turns,
    quiet,
  });
}

/** Mean seconds per item in sampling / reward / update, over the logged entries. */
function timingSplit(dir: string): Record<string, number> {
  const rows = readJsonl<Record<string, number>>(join(dir, RUN_FILES.metrics));
  const out: Record<string, number> = {};
  for (const k of ['time/sampling_s', 'time/reward_s', 'time/update_s']) {
    const v = rows.map((r) => r[k]).filter((x) => typeof x === 'number');
    if (v.length) out[`${k.slice(5, -2)}_s_per_item`] = v.reduce((a, b) => a + b, 0) / v.length;
  }
  return out;
}

export function reportMarkdown(r: RunReport): string {
  const lines = [
    `# Run ${r.run_name}`,
    '',
    `- environment: ${r.env}`,
    `- models: ${[...new Set(r.models)].join(', ')}`,
    `- status: ${r.status} (${r.items}/${r.total_items} items, ${r.env_step} env steps)`,
    `- started ${r.started_at}, finished ${r.finished_at}`,
    '',
    '## Final evaluation',
    '',
  ];
  if (r.final_eval) {
    const e = r.final_eval;
    lines.push(`${e.items} eval items × ${e.samples_per_item} sample(s), temperature ${e.sampling.temperature}, top_p ${e.sampling.topP}.`, '');
    lines.push('```', formatTable(e.rows), '```', '');
  } else if (r.final_eval_error) lines.push(`Failed: ${r.final_eval_error}`, '');
  else lines.push('Not run (interrupted, eval.at_end false, or no eval split).', '');
  lines.push('## Timings', '', '| what | seconds |', '| --- | --- |');
  for (const [k, v] of Object.entries(r.timings)) lines.push(`| ${k} | ${v.toFixed(3)} |`);
  lines.push('', '## Last logged metrics', '', '| metric | value |', '| --- | --- |');
  for (const [k, v] of Object.entries(r.last_metrics).sort()) lines.push(`| ${k} | ${Number.isInteger(v) ? v : v.toFixed(4)} |`);
  lines.push('', 'The full configuration is in config.yaml; curves in metrics.jsonl (`magrpo dashboard` or TensorBoard).', '');
  return lines.join('\n');
}

export function registerTrain(program: Command): void {
  program
    .command('train')
    .description('Train a team from a YAML config into a run directory (metrics, TensorBoard, samples, checkpoints, report)')
    .argument('[config]', 'run config (YAML); optional with --resume')
    .option('--set <key=value...>', 'override a config key, value parsed as YAML (repeatable)', (v: string, acc: string[] = []) => [...acc, v])
    .option('--resume <run-dir>', 'continue an interrupted run from its latest checkpoint')
    .option('--max-items <n>', 'stop after this many training items in total (checkpoint written)', intOption(1))
    .option('-q, --quiet', 'log lines instead of progress bars (automatic on CI or when output is not a terminal)')
    .option('--dashboard', 'serve the live dashboard on 127.0.0.1 while training')
    .option('--port <n>', 'dashboard port (default: dashboard.port in the config)', intOption(0))
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} train configs/tldr.yaml                  # into runs/tldr (the config's run_name)
  ${CLI} train configs/tldr.yaml --set trainer.num_generations=8 --set run_name=g8
  ${CLI} train configs/coop-python.yaml --dashboard --port 0
  ${CLI} train --resume runs/g8                   # after Ctrl-C (one press stops cleanly, two abort)

Writes runs/<run_name or timestamp>/: config.yaml, metrics.jsonl, events.out.tfevents.*,
samples.jsonl, checkpoints/, final/, eval.json, report.md, report.json. Ctrl-C writes a
checkpoint, prints its path and exits with status 130; a failed run leaves failure.json (the
error, its stack and the last step) in its directory.`,
    )
    .action(async (config: string | undefined, flags: TrainFlags) => {
      if (!config && !flags.resume) throw new Error('give a config file, or --resume <run-dir>');
      const report = await train(config, flags);
      // 128 + SIGINT, as a shell reports a command stopped by Ctrl-C.
      if (report.status === 'interrupted') process.exitCode = 130;
    });
}
