/**
 * `magrpo demo`: two agents learn to cooperate on the writing task (a concise and a detailed
 * summary of a post whose lengths, vocabulary and style must fit each other): by default two LoRA
 * adapters on SmolLM2-135M-Instruct (`tldr-smollm2`), with `--env tldr` two copies of the shipped
 * 1.7M-parameter base model. run/demo.ts does the work; this prints the paper's table, verbatim
 * samples, and points to the dashboard. `--env coop-python` runs the coding task (longer).
 */
import { join } from 'node:path';
import type { Command } from 'commander';
import { startDashboard } from '../dashboard/server.js';
import { DEMOS, type DemoOptions, formatExamples, runDemo } from '../run/demo.js';
import { isQuiet } from '../run/progress.js';
import { CLI, intOption, precisionOption } from './options.js';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('Train two agents to cooperate on a writing task, and compare them with the untrained pair and the baselines')
    .option(
      '--env <name>',
      'tldr-smollm2 (SmolLM2-135M-Instruct, one LoRA adapter per agent; about 10 minutes on 2 cores), tldr (the shipped 1.7M-parameter base model; about 5) or coop-python (longer)',
      'tldr-smollm2',
    )
    .option('-s, --seed <n>', 'random seed of sampling, training and evaluation', intOption(0), 1)
    .option('--items <n>', 'training items (default: the demo config)', intOption(1))
    .option('-o, --output <dir>', 'parent folder of the run directory (default: runs)')
    .option('--set <key=value...>', 'override keys of the demo config, e.g. trainer.agent_learning_rate=2e-4')
    .option(
      '--precision <p>',
      'matrix products: fp32, bf16, or auto (bf16 where the CPU runs it natively); same as --set trainer.precision=<p>',
      precisionOption,
    )
    .option('--no-dashboard', 'do not serve the dashboard at the end')
    .option(
      '--record <dir>',
      'also write the result as <dir>/seed-<seed>.json (e.g. results/demo-tldr, from which scripts/readme-results.ts builds the README tables)',
    )
    .option('-q, --quiet', 'log lines instead of progress bars')
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} demo                         # the writing task on SmolLM2-135M-Instruct, seed 1
  ${CLI} demo --env tldr --seed 2 --no-dashboard   # on the shipped base model
  ${CLI} demo --env coop-python       # helper + main function writers, with code execution`,
    )
    .action(async (flags: DemoOptions & { dashboard: boolean; precision?: string }) => {
      if (!(flags.env in DEMOS)) throw new Error(`--env: got "${flags.env}", expected one of ${Object.keys(DEMOS).join(', ')}`);
      if (flags.precision) flags.set = [...(flags.set ?? []), `trainer.precision=${flags.precision}`];
      const { runDir, table, rows } = await runDemo(flags);
      process.stdout.write(`\n${table}\n\n${formatExamples(rows)}\nrun: ${runDir}\nplots: ${join(runDir, 'demo.png')} (and .svg)\n`);
      const interactive = process.stdout.isTTY && !isQuiet(flags.quiet);
      if (flags.dashboard && interactive) {
        const d = await startDashboard({ runs: [runDir], port: 0 });
        process.stdout.write(`dashboard: ${d.url}  (Ctrl-C to stop)\n`);
      } else {
        process.stdout.write(`dashboard: ${CLI} dashboard ${runDir}\n`);
      }
    });
}
