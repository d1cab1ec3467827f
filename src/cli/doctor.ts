/** `magrpo doctor`: backend, CPU, OpenBLAS core and measured matmul speed, with fixes for what is slow. */
import type { Command } from 'commander';
import { collectDoctor, formatDoctor } from '../engine/doctor.js';
import { sandboxIsolation } from '../sandbox/index.js';
import { CLI, intOption } from './options.js';

interface DoctorFlags {
  json?: boolean;
  quick?: boolean;
  threads?: number;
}

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description('Check the engine on this machine: backend, CPU ISA, OpenBLAS library and core, threads, measured sgemm speed, sandbox isolation')
    .option('--threads <n>', 'threads of the all-threads sgemm (default: the backend thread count)', intOption(1))
    .option('--quick', 'skip trying the other OpenBLAS core types (no ceiling, no slow-core warning)')
    .option('--json', 'print the report as one JSON object')
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} doctor                       # everything, with the speed of each OpenBLAS core type
  ${CLI} doctor --quick --json > doctor.json
  OPENBLAS_CORETYPE=Haswell ${CLI} doctor --quick   # what a forced core type costs here`,
    )
    .action(async (flags: DoctorFlags) => {
      const report = collectDoctor({ threads: flags.threads, skipCores: flags.quick });
      // The coding rewards run model-written code: say how well it is fenced in on this machine.
      const isolation = await sandboxIsolation().catch((e: Error) => ({ level: 'unavailable', detail: e.message }));
      report.extra.push({ label: 'sandbox', value: `${isolation.level} (${isolation.detail})` });
      if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
      else process.stdout.write(`${formatDoctor(report).join('\n')}\n`);
    });
}
