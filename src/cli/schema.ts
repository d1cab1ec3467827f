/** `magrpo schema`: the run config's JSON Schema (configs/schema.json is this output). */
import type { Command } from 'commander';
import { runConfigJsonSchema } from '../run/run-config.js';
import { CLI } from './options.js';

export function schemaText(): string {
  return `${JSON.stringify(runConfigJsonSchema(), null, 2)}\n`;
}

export function registerSchema(program: Command): void {
  program
    .command('schema')
    .description('Print the JSON Schema of run config files (for editor completion and validation)')
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} schema > configs/schema.json
  # then, first line of a config:  # yaml-language-server: $schema=./schema.json`,
    )
    .action(() => {
      process.stdout.write(schemaText());
    });
}
