/** The `magrpo` program: every subcommand (each in its own module) and how help is shown. */
import { Command, Help, type Option } from 'commander';
import { registerBench } from './bench.js';
import { registerConvert } from './convert.js';
import { registerDashboard } from './dashboard.js';
import { registerDemo } from './demo.js';
import { registerDoctor } from './doctor.js';
import { registerEval } from './eval.js';
import { registerExport } from './export.js';
import { registerInit } from './init.js';
import { CLI } from './options.js';
import { registerPretrain } from './pretrain.js';
import { registerPull } from './pull.js';
import { registerRewardModel } from './reward-model.js';
import { registerSample } from './sample.js';
import { registerSchema } from './schema.js';
import { registerServe } from './serve.js';
import { registerTrain } from './train.js';

/**
 * Option help without noise: no "(default: [])" for repeatable flags, and no second default when
 * the description already says what the default is.
 */
function optionDescription(this: Help, option: Option): string {
  const d = option.defaultValue;
  if (!((Array.isArray(d) && d.length === 0) || /\(default[:\s]/.test(option.description))) return Help.prototype.optionDescription.call(this, option);
  option.defaultValue = undefined;
  try {
    return Help.prototype.optionDescription.call(this, option);
  } finally {
    option.defaultValue = d;
  }
}

/**
 * The whole command line, every subcommand registered. Help goes to `write` (stdout by default),
 * with examples shown as they run on a fresh clone.
 */
export function buildProgram(write: (text: string) => void = (s) => process.stdout.write(s)): Command {
  const program = new Command();
  program
    .name('magrpo')
    .description('Train teams of language models to cooperate with multi-agent RL (MAGRPO), on CPU.')
    .version('0.1.0')
    .showHelpAfterError()
    .configureHelp({ optionDescription })
    // Help examples are written "magrpo …" in some commands' text: show them as they run on a fresh clone.
    .configureOutput({ writeOut: (s) => write(s.replace(/^( +)magrpo /gm, `$1${CLI} `)) })
    .addHelpText(
      'after',
      `
Run it as \`${CLI} <command>\` in a clone (after \`npm start\` or \`bash scripts/setup.sh\`) or in
any project that installs magrpo; after \`npm install -g magrpo\`, plain \`magrpo\` works too.
\`${CLI} <command> --help\` shows each command's options and examples.`,
    );
  registerTrain(program);
  registerDemo(program);
  registerEval(program);
  registerDashboard(program);
  registerInit(program);
  registerSchema(program);
  registerSample(program);
  registerServe(program);
  registerExport(program);
  registerConvert(program);
  registerPull(program);
  registerBench(program);
  registerDoctor(program);
  registerPretrain(program);
  registerRewardModel(program);
  return program;
}
