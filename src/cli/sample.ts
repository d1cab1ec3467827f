/** `magrpo sample`: text from a model folder. */
import type { Command } from 'commander';
import { type BackendName, setBackend, setPrecision } from '../engine/runtime.js';
import { LanguageModel } from '../model/pretrained.js';
import type { Prompt } from '../model/tokenizer.js';
import { checkModelFolder } from './model-folder.js';
import { CLI, floatOption, intOption, precisionOption, unescapeArg } from './options.js';

interface SampleFlags {
  model: string;
  prompt: string;
  maxNewTokens: number;
  temperature: number;
  topK?: number;
  topP: number;
  seed: number;
  numSamples: number;
  chat?: boolean;
  stop?: string[];
  backend?: BackendName;
  precision?: 'fp32' | 'bf16';
  json?: boolean;
}

export function registerSample(program: Command): void {
  program
    .command('sample')
    .description('Sample completions of a prompt from a Hugging Face-format model folder')
    .requiredOption('-m, --model <dir>', 'model folder (config.json, tokenizer.json, *.safetensors)')
    .requiredOption('-p, --prompt <text>', 'prompt text')
    .option('-n, --max-new-tokens <n>', 'tokens to generate', intOption(1), 64)
    .option('-t, --temperature <t>', 'sampling temperature (0 = greedy)', floatOption(0), 0.8)
    .option('--top-k <k>', 'keep the k most likely tokens', intOption(1))
    .option('--top-p <p>', 'nucleus sampling threshold', floatOption(0, 1), 1)
    .option('-s, --seed <n>', 'random seed (same seed, same text)', intOption(0), 0)
    .option('--num-samples <n>', 'completions to sample (in one batch)', intOption(1), 1)
    .option('--chat', "wrap the prompt in the tokenizer's chat template")
    .option('--stop <text...>', 'stop strings; \\n, \\t, \\r and \\\\ in them are newline, tab, return and backslash', (v: string, acc: string[] = []) => [
      ...acc,
      unescapeArg(v),
    ])
    .option('--backend <name>', 'kernel backend: native or reference (default: MAGRPO_BACKEND or native)')
    .option('--precision <p>', 'matrix products: fp32, or bf16 (bf16 weights and inputs, fp32 sums: faster decoding, docs/precision.md)', precisionOption)
    .option('--json', 'print one JSON object per sample (text, tokens, log-probs)')
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} sample -m models/small -p "Call me Ishmael." -n 40 --seed 3
  ${CLI} sample -m models/small -p "def add(a, b):" -t 0 --stop "\\n\\n"     # stops at the first blank line`,
    )
    .action((flags: SampleFlags) => {
      if (flags.backend) setBackend(flags.backend);
      if (flags.precision) setPrecision(flags.precision);
      flags.model = checkModelFolder(flags.model, '--model');
      const lm = LanguageModel.load(flags.model);
      const prompt: Prompt = flags.chat ? [{ role: 'user', content: flags.prompt }] : flags.prompt;
      const t0 = performance.now();
      const samples = lm.sample(new Array<Prompt>(flags.numSamples).fill(prompt), {
        maxNewTokens: flags.maxNewTokens,
        temperature: flags.temperature,
        topK: flags.topK ?? null,
        topP: flags.topP,
        stopStrings: flags.stop,
        rng: flags.seed,
      });
      const seconds = (performance.now() - t0) / 1000;
      const tokens = samples.reduce((n, s) => n + s.completionIds.length, 0);
      for (const s of samples) {
        if (flags.json)
          process.stdout.write(`${JSON.stringify({ text: s.text, tokens: s.completionIds, logprobs: s.logprobs, finish_reason: s.finishReason })}\n`);
        else process.stdout.write(`${flags.prompt}${s.text}\n${samples.length > 1 ? '---\n' : ''}`);
      }
      process.stderr.write(`[${tokens} tokens in ${seconds.toFixed(2)} s, ${(tokens / seconds).toFixed(0)} tokens/s]\n`);
    });
}
