/** `magrpo serve`: an OpenAI-compatible HTTP server (vLLM dialect) over a model folder and its LoRA adapters. */
import type { Command } from 'commander';
import { type BackendName, setBackend, setPrecision } from '../engine/runtime.js';
import { LanguageModel } from '../model/pretrained.js';
import { startServer } from '../serve/server.js';
import { untilInterrupted } from './interrupt.js';
import { checkModelFolder } from './model-folder.js';
import { CLI, intOption, precisionOption } from './options.js';

interface ServeFlags {
  model: string;
  port: number;
  host: string;
  apiKeyEnv?: string;
  maxBatch: number;
  maxTokens?: number;
  maxBodyBytes: number;
  maxQueue: number;
  servedModelName?: string;
  lora: string[];
  seed?: number;
  backend?: BackendName;
  precision?: 'fp32' | 'bf16';
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('Serve a model folder (and LoRA adapters) over an OpenAI-compatible HTTP API, vLLM dialect')
    .requiredOption('-m, --model <dir>', 'model folder (config.json, tokenizer.json, *.safetensors)')
    .option('--port <n>', 'port (0 = any free port)', intOption(0), 8000)
    .option('--host <addr>', 'address to listen on; anything but loopback exposes the model to the network', '127.0.0.1')
    .option('--api-key-env <name>', 'require "Authorization: Bearer <key>", the key read from this environment variable')
    .option('--max-batch <n>', 'most completions decoded together (continuous batching)', intOption(1), 32)
    .option('--max-tokens <n>', "largest max_tokens a request may ask for (default: the model's context)", intOption(1))
    .option('--max-body-bytes <n>', 'largest request body', intOption(1024), 4 * 1024 * 1024)
    .option('--max-queue <n>', 'prompts waiting for a batch before requests get 503', intOption(1), 1024)
    .option('--served-model-name <name>', "the base model's name in requests and /v1/models (default: the --model argument)")
    .option(
      '--lora <name=dir...>',
      'LoRA adapters (PEFT folders) to load at start, as /v1/load_lora_adapter does',
      (v: string, acc: string[] = []) => [...acc, v],
      [],
    )
    .option('--seed <n>', 'seeds requests that give no seed (default: random)', intOption(0))
    .option('--backend <name>', 'kernel backend: native or reference (default: MAGRPO_BACKEND or native)')
    .option('--precision <p>', 'matrix products: fp32, or bf16 (bf16 weights and inputs, fp32 sums: faster decoding, docs/precision.md)', precisionOption)
    .addHelpText(
      'after',
      `
Routes: GET /health, GET /v1/models, POST /v1/completions and /v1/chat/completions (stream: true
for server-sent events), POST /v1/load_lora_adapter and /v1/unload_lora_adapter, POST /tokenize
and /detokenize, GET /stats. A request's "model" picks the base model or an adapter. With a
"seed", a request's completions are those \`${CLI} sample --seed\` gives (see docs/serve.md).

Examples:
  ${CLI} serve --model models/micro --port 8000          # http://127.0.0.1:8000/v1
  MAGRPO_KEY=secret ${CLI} serve -m models/small --port 0 --api-key-env MAGRPO_KEY`,
    )
    .action(async (flags: ServeFlags) => {
      if (flags.backend) setBackend(flags.backend);
      if (flags.precision) setPrecision(flags.precision);
      flags.model = checkModelFolder(flags.model, '--model');
      let apiKey: string | null = null;
      if (flags.apiKeyEnv) {
        apiKey = process.env[flags.apiKeyEnv] ?? '';
        if (apiKey === '') throw new Error(`--api-key-env ${flags.apiKeyEnv}: that environment variable is not set (or empty)`);
      }
      const adapters = flags.lora.map((spec) => {
        const at = spec.indexOf('=');
        if (at <= 0 || at === spec.length - 1) throw new Error(`--lora "${spec}": expected name=dir`);
        return { name: spec.slice(0, at), path: spec.slice(at + 1) };
      });
      const lm = LanguageModel.load(flags.model);
      const name = flags.servedModelName ?? flags.model;
      let server: Awaited<ReturnType<typeof startServer>>;
      try {
        server = await startServer({
          lm,
          modelName: name,
          host: flags.host,
          port: flags.port,
          apiKey,
          maxBatch: flags.maxBatch,
          maxTokens: flags.maxTokens,
          maxBodyBytes: flags.maxBodyBytes,
          maxQueue: flags.maxQueue,
          seed: flags.seed,
          adapters,
        });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE')
          throw new Error(`port ${flags.port} on ${flags.host} is already in use: pass --port 0 for any free port, or another --port`);
        throw e;
      }
      // The Ctrl-C handler is in place before the URL is printed: a supervisor may signal as soon as it reads it.
      const interrupted = untilInterrupted();
      process.stderr.write(`serve: ${server.url}/v1 (model "${name}"${apiKey ? ', API key required' : ''}; Ctrl-C to stop)\n`);
      await interrupted;
      process.stderr.write('serve: stopping\n');
      await server.close();
    });
}
