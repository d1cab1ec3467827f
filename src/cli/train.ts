/**
 * `magrpo train <config.yaml>`: argument parsing and printing over run/train.ts (which writes the
 * run directory), plus what only a terminal has: Ctrl-C (once: checkpoint and stop, exit 130;
 * twice: abort) and the optional live dashboard.
 */
import type { Command } from 'commander';
import type { DashboardServer } from '../dashboard/server.js';
import { formatTable } from '../envs/run.js';
import { resolveCheckpoint } from '../rl/checkpoint.js';
import { isQuiet } from '../run/progress.js';
import { type RunReport, runSummary, trainRun } from '../run/train.js';
import { serveDashboard } from './dashboard.js';
import { untilInterrupted } from './interrupt.js';
import { CLI, intOption, precisionOption } from './options.js';

export type { RunReport } from '../run/train.js';

export interface TrainFlags {
  set?: string[];
  precision?: string;
  resume?: string;
  maxItems?: number;
  quiet?: boolean;
  dashboard?: boolean;
  port?: number;
}

/** Trains one run as `magrpo train` does: prints the summary and the final table; returns the report. */
export async function train(target: string | undefined, flags: TrainFlags = {}): Promise<RunReport> {
  const interrupt = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    if (++interrupts > 1) process.exit(130);
    process.stderr.write('(Ctrl-C again to abort without a checkpoint)\n');
    interrupt.abort();
  };
  let dashboard: DashboardServer | null = null;
  process.on('SIGINT', onSigint);
  let report: RunReport;
  try {
    report = await trainRun(target, {
      set: flags.set,
      resume: flags.resume,
      maxItems: flags.maxItems,
      quiet: flags.quiet,
      signal: interrupt.signal,
      onRunDir: async (dir, config) => {
        if (!(flags.dashboard || config.dashboard.enabled)) return;
        const port = flags.port ?? config.dashboard.port;
        dashboard = await serveDashboard([dir], port, flags.port === undefined ? 'dashboard.port' : '--port');
        process.stderr.write(`dashboard: ${dashboard.url}\n`);
      },
    });
  } finally {
    process.off('SIGINT', onSigint);
  }
  process.stderr.write(`${runSummary(report)}\n`);
  if (report.status !== 'finished') process.stderr.write(`checkpoint: ${resolveCheckpoint(report.dir)}\ncontinue with: ${CLI} train --resume ${report.dir}\n`);
  if (report.final_eval) process.stdout.write(`${formatTable(report.final_eval.rows)}\n`);
  const server = dashboard as DashboardServer | null;
  if (server) {
    if (!isQuiet(flags.quiet)) {
      const interrupted = untilInterrupted(); // before the message, which invites Ctrl-C
      process.stderr.write(`dashboard still at ${server.url} (Ctrl-C to exit)\n`);
      await interrupted;
    }
    await server.close();
  }
  return report;
}

export function registerTrain(program: Command): void {
  program
    .command('train')
    .description('Train a team from a YAML config into a run directory (metrics, TensorBoard, samples, checkpoints, report)')
    .argument('[config]', 'run config (YAML); optional with --resume')
    .option('--set <key=value...>', 'override a config key, value parsed as YAML (repeatable)', (v: string, acc: string[] = []) => [...acc, v])
    .option(
      '--precision <p>',
      'matrix products: fp32, bf16, or auto (bf16 where the CPU runs it natively); same as --set trainer.precision=<p>',
      precisionOption,
    )
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

Writes runs/<run_name or timestamp>/: config.yaml, metrics.jsonl, events.out.tfevents.* (and
metrics.csv with trainer.report_to including csv), samples.jsonl, checkpoints/, final/, eval.json,
report.md, report.json. Ctrl-C writes a checkpoint, prints its path and exits with status 130; a
failed run leaves failure.json (the error, its stack and the last step) in its directory.`,
    )
    .action(async (config: string | undefined, flags: TrainFlags) => {
      if (!config && !flags.resume) throw new Error('give a config file, or --resume <run-dir>');
      if (flags.precision) flags.set = [...(flags.set ?? []), `trainer.precision=${flags.precision}`];
      const report = await train(config, flags);
      // 128 + SIGINT, as a shell reports a command stopped by Ctrl-C.
      if (report.status === 'interrupted') process.exitCode = 130;
    });
}
