/** `magrpo convert in.gguf -o dir`: a GGUF file as a Hugging Face model folder (src/model/gguf-import.ts). */
import { statSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { convertGguf } from '../model/gguf-import.js';
import { CLI } from './options.js';

export function registerConvert(program: Command): void {
  program
    .command('convert')
    .description('Write a GGUF model file (llama.cpp, Ollama, LM Studio) as a Hugging Face model folder')
    .argument('<file>', 'the .gguf file (architectures llama, qwen2, gpt2; BPE tokenizers)')
    .requiredOption('-o, --out <dir>', 'new folder for config.json, model.safetensors, tokenizer files and a model card')
    .addOption(new Option('--dtype <dtype>', 'weight storage in the folder').choices(['f32', 'bf16', 'f16']).default('f32'))
    .addHelpText(
      'after',
      `
Quantized tensors (Q4_0 … Q8_0, Q2_K … Q6_K) are dequantized; the folder is written atomically.
A .gguf file also works directly wherever a model folder does, without converting.

Examples:
  ${CLI} convert ~/.cache/magrpo/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf -o models/smollm2`,
    )
    .action((file: string, flags: { out: string; dtype: 'f32' | 'bf16' | 'f16' }) => {
      const t0 = performance.now();
      const dtype = flags.dtype === 'f32' ? 'F32' : flags.dtype === 'bf16' ? 'BF16' : 'F16';
      const r = convertGguf(file, flags.out, { dtype });
      process.stderr.write(
        `convert: ${flags.out} (${r.config.modelType}, ${r.tensors} tensors, ${flags.dtype}, ${(statSync(file).size / 1e6).toFixed(1)} MB in) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
      );
    });
}
