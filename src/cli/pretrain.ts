/** `magrpo pretrain`: train a base model from a YAML config, then export it with its model card. */
import type { Command } from 'commander';
import { type BackendName, setBackend } from '../engine/runtime.js';
import { loadPretrainConfig } from '../pretrain/config.js';
import { exportModel } from '../pretrain/export.js';
import { openRun, pretrain } from '../pretrain/train.js';
import { CLI, precisionOption } from './options.js';

interface PretrainFlags {
  resume?: boolean;
  set: string[];
  export: boolean;
  exportOnly?: boolean;
  backend?: BackendName;
  precision?: string;
}

export function registerPretrain(program: Command): void {
  program
    .command('pretrain')
    .description('Pretrain a Llama-style base model on the project corpus, then write the model folder and its card')
    .argument('<config>', 'pretraining config (YAML), e.g. configs/pretrain/small.yaml')
    .option('--resume', "continue from the run's latest checkpoint (the same losses as an uninterrupted run)")
    .option('--set <key=value>', 'override a config key, e.g. --set train.max_steps=100 (repeatable)', (v: string, acc: string[]) => [...acc, v], [])
    .option('--no-export', 'stop after training: do not write the model folder')
    .option('--export-only', "export the run's latest checkpoint without training (e.g. a run stopped early)")
    .option('--backend <name>', 'kernel backend: native or reference (default: MAGRPO_BACKEND or native)')
    .option('--precision <p>', 'matrix products: fp32 or bf16 (same as --set precision=<p>)', precisionOption)
    .addHelpText(
      'after',
      `
Ctrl-C once saves a checkpoint after the current step and exits; --resume continues from it.

Examples:
  ${CLI} pretrain configs/pretrain/micro.yaml
  nice -n 10 env MAGRPO_NUM_THREADS=2 ${CLI} pretrain configs/pretrain/small.yaml
  nice -n 10 env MAGRPO_NUM_THREADS=2 ${CLI} pretrain configs/pretrain/small.yaml --resume   # after Ctrl-C`,
    )
    .action(async (file: string, flags: PretrainFlags) => {
      if (flags.backend) setBackend(flags.backend);
      const config = loadPretrainConfig(file, flags.precision ? [...flags.set, `precision=${flags.precision}`] : flags.set);
      let interrupted = false;
      const onSigint = () => {
        if (interrupted) process.exit(130);
        interrupted = true;
        process.stderr.write('\nmagrpo: stopping after this step (Ctrl-C again to quit without a checkpoint)\n');
      };
      process.on('SIGINT', onSigint);
      const run = flags.exportOnly ? openRun(config) : await pretrain(config, { resume: flags.resume, shouldStop: () => interrupted });
      process.off('SIGINT', onSigint);
      const { state } = run;
      process.stderr.write(
        `pretrain: step ${state.step}/${config.train.max_steps}, ${state.tokens.toLocaleString('en-US')} tokens, ` +
          `${(state.elapsed_s / 60).toFixed(1)} min, validation loss ${state.val_loss?.toFixed(4) ?? '-'}\n`,
      );
      if (!run.completed && !flags.exportOnly) {
        process.stderr.write('pretrain: stopped early; continue by running the same command with --resume\n');
        // 128 + SIGINT, as a shell reports a command stopped by Ctrl-C (and as `train` does).
        if (interrupted) process.exitCode = 130;
        return;
      }
      if (!flags.export) return;
      const ev = await exportModel({ ...run, config, configFile: file }, { log: (l) => process.stderr.write(`${l}\n`) });
      const code = ev.code === null ? '' : `, code parse ${(100 * ev.code.parse_rate).toFixed(1)}% / pass ${(100 * ev.code.pass_rate).toFixed(1)}%`;
      process.stdout.write(
        `${config.export.dir}: ${ev.model.parameters.toLocaleString('en-US')} parameters, validation perplexity ${ev.perplexity.perplexity.toFixed(2)}${code}\n`,
      );
    });
}
