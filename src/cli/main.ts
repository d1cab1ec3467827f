#!/usr/bin/env -S node --initial-old-space-size=128
/**
 * The `magrpo` command line (program.ts wires the subcommands): errors are one line, exit status 1.
 * The shebang passes node-flags.ts's NODE_FLAGS (keep the two in step).
 */
import { buildProgram } from './program.js';

buildProgram()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    process.stderr.write(`magrpo: ${err instanceof Error ? err.message : String(err)}\n`);
    if (process.env.MAGRPO_DEBUG) process.stderr.write(`${(err as Error).stack}\n`);
    process.exit(1);
  });
