/**
 * One training run from a run config into its run directory (run-dir.ts): the code behind
 * `magrpo train`, for the library too. It writes config.yaml, the trainer's metric files
 * (`report_to`), samples.jsonl, checkpoints, final/, eval.json (the trained team against the
 * baselines), report.json / report.md, and failure.json when training fails. Progress goes to
 * stderr unless `quiet`. Stopping (Ctrl-C in the CLI) is an AbortSignal: the run checkpoints after
 * the current item and reports status "interrupted".
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatTable } from '../envs/run.js';
import { LanguageModel } from '../model/pretrained.js';
import type { TrainerCallback } from '../rl/callbacks.js';
import { readTrainerState, rollbackLogs } from '../rl/checkpoint.js';
import type { MetricsSink } from '../rl/metrics.js';
import type { MAGRPOTrainer } from '../rl/trainer.js';
import { createTrainer } from '../rl/trainers.js';
import { sandboxIsolation } from '../sandbox/index.js';
import { type EvalReport, evaluateMethods, inferenceSampling, loadTeamModels, selectBaselines, trainedTeam } from './evaluate.js';
import { RunTracker } from './failure-report.js';
import { type PreparedRun, prepareRun } from './prepare.js';
import { formatDuration, isQuiet, type Progress, startProgress } from './progress.js';
import type { RunConfig } from './run-config.js';
import { createRunDir, RUN_FILES, readJsonl, SamplesRecorder, teamFolders, writeRunConfig } from './run-dir.js';

export interface TrainRunOptions {
  /** `key=value` overrides of the config file (values parsed as YAML), as `--set`. */
  set?: string[];
  /** Continue this run directory from its latest checkpoint. */
  resume?: string;
  /** Stop after this many training items in total (a checkpoint is written). */
  maxItems?: number;
  /** Log lines instead of progress bars (automatic on CI or when stderr is not a terminal). */
  quiet?: boolean;
  /** Aborting it stops the run after the current item, with a checkpoint (status "interrupted"). */
  signal?: AbortSignal;
  /** More hooks into the trainer (rl/callbacks.ts), after the run's own. */
  callbacks?: TrainerCallback[];
  /** Called once the run directory exists, before training (the CLI starts its dashboard here). */
  onRunDir?: (dir: string, config: RunConfig) => void | Promise<void>;
  /** Where progress messages go (default: stderr, above the progress bar). */
  log?: (message: string) => void;
}

export interface RunReport {
  run_name: string;
  dir: string;
  env: string;
  models: string[];
  /** finished: all epochs; stopped: maxItems; interrupted: the signal was aborted. */
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

/**
 * Trains one run from a config file (`target`) or continues `opts.resume`; see the module comment.
 * A failure during training leaves failure.json in the run directory and is rethrown; a failed
 * final evaluation is recorded in report.json and rethrown after the report is written.
 */
export async function trainRun(target: string | undefined, opts: TrainRunOptions = {}): Promise<RunReport> {
  const tracker = new RunTracker();
  try {
    return await run(target, opts, tracker);
  } catch (e) {
    tracker.fail(e);
    throw e;
  }
}

async function run(target: string | undefined, opts: TrainRunOptions, tracker: RunTracker): Promise<RunReport> {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const quiet = isQuiet(opts.quiet);
  const source = target ?? opts.resume;
  if (!source) throw new Error('give a config file, or resume a run directory');
  const prepared = await prepareRun(source, opts.set ?? []);
  const { config, env, split, models } = prepared;
  const baselines = config.eval.at_end ? selectBaselines(env, config.eval.baselines) : [];
  const dir = opts.resume ?? createRunDir(config);
  if (opts.resume && !existsSync(join(dir, 'checkpoints', 'latest'))) throw new Error(`${dir}: nothing to resume (no checkpoints/latest)`);
  writeRunConfig(dir, { ...config, run_name: config.run_name ?? dir.split(/[\\/]/).filter(Boolean).pop() ?? null });

  // Logs written after the checkpoint (by the run that died) would repeat the replayed steps.
  if (opts.resume) rollbackLogs(dir, readTrainerState(dir).logs, { removeNewer: true });
  tracker.dir = dir;
  tracker.publish();
  await opts.onRunDir?.(dir, config);
  let progress: Progress | null = null;
  const say = opts.log ?? ((m: string) => (progress ? progress.log(m) : process.stderr.write(`${m}\n`)));
  const latest = new LatestSink(tracker);
  const runHooks: TrainerCallback = {
    onStepEnd: (p) => {
      tracker.items = p.items;
      tracker.publish();
      progress?.update(p.items, latest.status());
    },
    onEvaluate: (p) =>
      say(
        `[eval] env step ${p.envStep}: ${Object.entries(p.metrics)
          .map(([k, v]) => `${k}=${v.toFixed(3)}`)
          .join(' ')}`,
      ),
  };
  // An iterative config (trainer.iterative) gets the iterative trainer; any other, MAGRPOTrainer.
  const trainer = createTrainer({
    task: env.task(split),
    models,
    config: { ...prepared.trainer, output_dir: dir },
    sinks: [latest],
    callbacks: [runHooks, new SamplesRecorder(join(dir, RUN_FILES.samples), config.samples), ...(opts.callbacks ?? [])],
    // Fluency warnings (possible reward hacking) must stay visible above the progress bar.
    onWarning: (m) => say(`[magrpo] warning: ${m}`),
  });
  const totalItems = trainer.totalItems;
  if (trainer.task.outputKind === 'code') {
    // The reward runs model-written code: say how well it is fenced in.
    const isolation = await sandboxIsolation();
    say(`sandbox: ${isolation.level} (${isolation.detail})`);
  }
  const stop = () => {
    trainer.requestStop();
    say('stopping after this item and writing a checkpoint');
  };
  if (opts.signal?.aborted) trainer.requestStop();
  opts.signal?.addEventListener('abort', stop, { once: true });

  let result: Awaited<ReturnType<MAGRPOTrainer<unknown>['train']>>;
  const tTrain = performance.now();
  try {
    progress = startProgress('train', totalItems, { quiet, start: 0 });
    result = await trainer.train({ resumeFrom: opts.resume, maxItems: opts.maxItems });
  } finally {
    progress?.stop();
    progress = null;
    opts.signal?.removeEventListener('abort', stop);
    await trainer.close();
  }
  tracker.dir = null;
  tracker.publish();
  const trainSeconds = (performance.now() - tTrain) / 1000;
  const status = opts.signal?.aborted ? 'interrupted' : result.items < totalItems ? 'stopped' : 'finished';

  const tEval = performance.now();
  // A failed evaluation must not lose the report of a finished training run: report, then rethrow.
  let evalError: Error | null = null;
  const finalEval =
    status !== 'interrupted' && config.eval.at_end && split.eval.length > 0
      ? await finalEvaluation(prepared, dir, baselines, quiet).catch((e: Error) => {
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
  if (evalError) throw new Error(`final evaluation failed (training results and checkpoints are in ${dir}): ${(evalError as Error).message}`);
  return report;
}

async function finalEvaluation(run: PreparedRun, dir: string, baselines: ReturnType<typeof selectBaselines>, quiet: boolean): Promise<EvalReport> {
  const team = loadTeamModels(teamFolders(dir, run.models.length), run.models);
  const base = run.models.map((m) => LanguageModel.load(m));
  return evaluateMethods({
    env: run.env,
    items: run.split.eval,
    team: trainedTeam(run, team),
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

/** One line saying how the run ended (the CLI prints it). */
export function runSummary(r: RunReport): string {
  return `${r.status}: ${r.items}/${r.total_items} items, ${r.env_step} env steps in ${formatDuration(r.timings.total_s)} → ${r.dir}`;
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
