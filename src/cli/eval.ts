/** `magrpo eval <config | run-dir>`: the paper's table for a team and the environment's baselines. */
import type { Command } from 'commander';
import { formatTable } from '../envs/run.js';
import { type EvalFlags, evaluateTarget } from '../run/evaluate.js';
import { CLI, intOption } from './options.js';

export function registerEval(program: Command): void {
  program
    .command('eval')
    .description("Evaluate a trained run (or a config's untrained models) and the environment's baselines on the eval split")
    .argument('<target>', 'a run directory (its final agents) or a config file (its models, untrained)')
    .option('--baselines <which>', 'all, none, or comma-separated baseline names (default: eval.baselines)')
    .option('--samples-per-item <k>', 'episodes per eval item (pass@k needs k)', intOption(1))
    .option('--json <file>', 'also write the table as JSON')
    .option('--csv <file>', 'also write the table as CSV')
    .option('--set <key=value...>', 'override a config key (repeatable)', (v: string, acc: string[] = []) => [...acc, v])
    .option('-q, --quiet', 'no progress bar')
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} eval runs/g8                        # trained team vs every baseline
  ${CLI} eval configs/humaneval.yaml --baselines none --samples-per-item 5
  ${CLI} eval runs/g8 --baselines single_agent,naive_parallel --csv table.csv

A run directory's result is also saved as its eval.json (the dashboard draws baselines from it).`,
    )
    .action(async (target: string, flags: EvalFlags) => {
      const report = await evaluateTarget(target, flags);
      process.stdout.write(`${formatTable(report.rows)}\n`);
    });
}
