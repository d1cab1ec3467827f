#!/usr/bin/env node
/** The `magrpo` command line. Each subcommand lives in its own module; this file only wires them. */
import { Command } from 'commander';
import { registerBench } from './bench.js';
import { registerDashboard } from './dashboard.js';
import { registerDemo } from './demo.js';
import { registerDoctor } from './doctor.js';
import { registerEval } from './eval.js';
import { registerInit } from './init.js';
import { registerPretrain } from './pretrain.js';
import { registerSample } from './sample.js';
import { registerSchema } from './schema.js';
import { registerTrain } from './train.js';

const program = new Command();
program.name('magrpo').description('Train teams of language models to cooperate with multi-agent RL (MAGRPO), on CPU.').version('0.1.0').showHelpAfterError();
registerTrain(program);
registerDemo(program);
registerEval(program);
registerDashboard(program);
registerInit(program);
registerSchema(program);
registerSample(program);
registerBench(program);
registerDoctor(program);
registerPretrain(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`magrpo: ${err instanceof Error ? err.message : String(err)}\n`);
  if (process.env.MAGRPO_DEBUG) process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
