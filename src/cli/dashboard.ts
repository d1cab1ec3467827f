/** `magrpo dashboard <run-dir...>`: the local web dashboard, or `--print` for the same data as text. */

import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { type DashboardServer, startDashboard } from '../dashboard/server.js';
import { formatTable } from '../envs/run.js';
import type { EvalReport } from '../run/evaluate.js';
import { RUN_FILES, readJsonl } from '../run/run-dir.js';
import { untilInterrupted } from './interrupt.js';
import { CLI, intOption } from './options.js';

/** Starts the dashboard; a busy port is an error that says how to pick another. */
export async function serveDashboard(runs: readonly string[], port: number, flag = '--port'): Promise<DashboardServer> {
  try {
    return await startDashboard({ runs, port });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
    throw new Error(`port ${port} on 127.0.0.1 is already in use (another dashboard or TensorBoard?): pass ${flag} 0 for any free port, or another ${flag}`);
  }
}

/** Latest value (and its step) of every metric of each run. */
export function latestMetrics(dir: string): { step: number; values: Record<string, { value: number; step: number }> } {
  const values: Record<string, { value: number; step: number }> = {};
  let step = 0;
  for (const row of readJsonl<Record<string, number>>(join(dir, RUN_FILES.metrics))) {
    step = Math.max(step, row.step);
    for (const [k, v] of Object.entries(row)) if (k !== 'step' && k !== 'time' && typeof v === 'number') values[k] = { value: v, step: row.step };
  }
  return { step, values };
}

const num = (x: number) => (Math.abs(x) >= 100 || Number.isInteger(x) ? String(Math.round(x * 1000) / 1000) : x.toPrecision(4));

/** One row per metric, one column per run: what the dashboard's charts end with. */
export function printRuns(dirs: readonly string[]): string {
  const runs = dirs.map((d) => ({ name: basename(resolve(d)), ...latestMetrics(d) }));
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.values)))].sort();
  const header = ['metric', ...runs.map((r) => r.name)];
  const body = [['env step', ...runs.map((r) => String(r.step))], ...keys.map((k) => [k, ...runs.map((r) => (r.values[k] ? num(r.values[k].value) : '-'))])];
  const widths = header.map((h, j) => Math.max(h.length, ...body.map((b) => b[j].length)));
  const line = (cells: string[]) => cells.map((c, j) => (j === 0 ? c.padEnd(widths[j]) : c.padStart(widths[j]))).join('  ');
  const out = [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)];
  for (const [i, d] of dirs.entries()) {
    const file = join(d, RUN_FILES.eval);
    if (!existsSync(file)) continue;
    const ev = JSON.parse(readFileSync(file, 'utf8')) as EvalReport;
    out.push('', `${runs[i].name}: final evaluation (${ev.items} items × ${ev.samples_per_item})`, formatTable(ev.rows));
  }
  return out.join('\n');
}

export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .description('Serve live charts and rollout trees of one or more runs on 127.0.0.1 (or --print them)')
    .argument('<run-dirs...>', 'run directories; several are overlaid for comparison')
    .option('--port <n>', 'port on 127.0.0.1 (0 = any free port)', intOption(0), 6007)
    .option('--print', 'print the latest metrics (and final evaluation) as a table instead')
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} dashboard runs/g8                       # open http://127.0.0.1:6007/
  ${CLI} dashboard runs/tldr runs/g8 --port 0    # compare two runs, on any free port
  ${CLI} dashboard --print runs/tldr runs/g8     # the same numbers in the terminal
  tensorboard --logdir runs                      # the event files work there too`,
    )
    .action(async (dirs: string[], flags: { port: number; print?: boolean }) => {
      for (const d of dirs) if (!existsSync(join(d, RUN_FILES.config))) throw new Error(`${d}: not a run directory (no ${RUN_FILES.config})`);
      if (flags.print) {
        process.stdout.write(`${printRuns(dirs)}\n`);
        return;
      }
      const server = await serveDashboard(dirs, flags.port);
      // Handler first, message second: whoever reads the URL may press Ctrl-C at once.
      const interrupted = untilInterrupted();
      process.stderr.write(`dashboard: ${server.url} (Ctrl-C to stop)\n`);
      await interrupted;
      await server.close();
    });
}
