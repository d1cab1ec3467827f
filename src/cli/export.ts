/** `magrpo export --format gguf`: a model folder (optionally with a LoRA adapter merged in) as one GGUF file for llama.cpp / Ollama. */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type Command, Option } from 'commander';
import { exportGguf } from '../model/gguf.js';
import { checkModelFolder } from './model-folder.js';
import { CLI } from './options.js';

interface ExportFlags {
  format: 'gguf';
  model: string;
  adapter?: string;
  out: string;
  dtype: 'f32' | 'f16';
  name?: string;
}

export function registerExport(program: Command): void {
  program
    .command('export')
    .description('Write a model folder (and a trained LoRA adapter, merged) in another format: GGUF for llama.cpp and Ollama')
    .addOption(new Option('--format <format>', 'output format').choices(['gguf']).makeOptionMandatory())
    .requiredOption('-m, --model <dir>', 'model folder (config.json, tokenizer.json, *.safetensors)')
    .option('--adapter <dir>', "LoRA adapter folder (PEFT, e.g. a run checkpoint's agent_0/adapter) to merge into the weights first")
    .requiredOption('-o, --out <file>', 'output file, e.g. agent.gguf')
    .addOption(new Option('--dtype <dtype>', 'matrix storage (norms stay f32)').choices(['f32', 'f16']).default('f32'))
    .option('--name <name>', "general.name in the file (default: the model folder's name)")
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} export --format gguf --model models/micro --out micro.gguf
  ${CLI} export --format gguf -m models/small --dtype f16 -o small-f16.gguf`,
    )
    .action((flags: ExportFlags) => {
      flags.model = checkModelFolder(flags.model, '--model');
      if (flags.adapter && !(existsSync(flags.adapter) && statSync(flags.adapter).isDirectory() && existsSync(join(flags.adapter, 'adapter_config.json'))))
        throw new Error(`--adapter ${flags.adapter}: not a LoRA adapter folder (no adapter_config.json)`);
      const t0 = performance.now();
      const r = exportGguf(flags.model, flags.out, { adapter: flags.adapter, dtype: flags.dtype === 'f16' ? 'F16' : 'F32', name: flags.name });
      const bytes = statSync(flags.out).size;
      process.stderr.write(
        `export: ${flags.out} (GGUF v3, ${r.architecture}, ${r.tensors} tensors, ${flags.dtype}, ${(bytes / 1e6).toFixed(2)} MB${flags.adapter ? ', adapter merged' : ''}) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
      );
    });
}
