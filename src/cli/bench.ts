/**
 * `magrpo bench`: the command line of the benchmarks in src/bench/ (engine.ts: training and
 * sampling against PyTorch and llama.cpp; rollout.ts: samplers against local servers; step.ts:
 * where one MAGRPO step's time goes).
 */
import { availableParallelism } from 'node:os';
import { type Command, Option } from 'commander';
import { type BenchFlags, runBench } from '../bench/engine.js';
import { DEFAULT_SIZES, LORA_RANK, measureSize, QUICK_REPEATS, SIZES, TIMED_REPEATS } from '../bench/models.js';
import { runRolloutBench } from '../bench/rollout.js';
import { runStepBench } from '../bench/step.js';
import { CLI, intOption } from './options.js';

export function registerBench(program: Command): void {
  program
    .command('bench')
    .description('Benchmark the engine (matmul, training and sampling throughput, memory), next to PyTorch and llama.cpp when available')
    .option(
      '--sizes <list>',
      `model sizes, comma-separated (${Object.keys(SIZES).join(', ')}; 500m, Qwen2.5-0.5B-shaped with LoRA and full fine-tuning, is opt-in)`,
      DEFAULT_SIZES.join(','),
    )
    .option('--quick', 'one round of one timed repetition (default: 2 rounds of 3)')
    .option('--no-torch', 'run no peer engines (PyTorch, llama.cpp)')
    .option('--threads <n>', 'threads for every engine (default: MAGRPO_NUM_THREADS, else all cores)', intOption(1), defaultThreads())
    .option('--python <path>', "Python interpreter of Debian's PyTorch", '/usr/bin/python3')
    .option('--json', 'print one JSON object instead of the table')
    .option('--out <file>', 'also write the JSON object to this file (input of scripts/bench-report.mjs)')
    .option(
      '--rollout [model]',
      'rollout throughput instead: the in-process sampler against 1 and 2 local `magrpo serve` processes on a model folder (default models/base), G = 8 (bench-rollout.ts)',
    )
    .option(
      '--step',
      'profile one MAGRPO training step instead: SmolLM2-135M shape (random weights) or --model, 2 agents, LoRA r16, G = 4 × 64 tokens (bench-step.ts)',
    )
    .option('--model <path>', 'with --step: a model folder or .gguf file instead of random weights')
    .option('--items <n>', 'with --step: timed items (default 2, one update)', intOption(1))
    .option('--warmup <n>', 'with --step: untimed items first (default 2, one update)', intOption(0))
    .addOption(new Option('--precision <p>', "with --step: the trainer's matrix products (trainer.precision)").choices(['fp32', 'bf16']))
    .option(
      '--peers [list]',
      'with --step and --model: the same TL;DR step on CoMLRL 1.4.3 and TRL (scripts/setup.sh --with-peers) and llama.cpp sampling, side by side (comlrl,trl,llama.cpp; default all; 1 warm-up + 3 timed items)',
    )
    .addOption(new Option('--worker <size>', 'internal: measure one size in this process').hideHelp())
    .addOption(new Option('--lora', `internal: also measure LoRA training (rank ${LORA_RANK}, every linear layer) at every size`).hideHelp())
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} bench --sizes 1m --quick --no-torch       # a minute: this engine alone
  ${CLI} bench --sizes 1m,10m --out bench/results/mine.json   # with PyTorch and llama.cpp when installed
  ${CLI} bench --sizes 1m,10m,124m,500m --threads 2           # adds Qwen2.5-0.5B shapes: LoRA r16 and full fine-tuning (~12 GB RAM)
  ${CLI} bench --step --model SmolLM2-135M-Instruct.Q4_1.gguf  # where a training step's time goes (docs/benchmarks.md)
  ${CLI} bench --step --peers --model SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --out bench/step/peers/mine.json  # next to CoMLRL, TRL, llama.cpp
  # then: node scripts/bench-report.mjs rebuilds docs/benchmarks.md from bench/results/*.json`,
    )
    .action((flags: BenchFlags) => {
      if (flags.rollout !== undefined) return runRolloutBench(flags.rollout, flags);
      if (flags.step) return runStepBench(flags);
      if (flags.model !== undefined || flags.items !== undefined || flags.warmup !== undefined || flags.peers !== undefined || flags.precision !== undefined)
        throw new Error('--model, --items, --warmup, --peers and --precision go with --step');
      if (flags.worker !== undefined) {
        process.stdout.write(`${JSON.stringify(measureSize(flags.worker, flags.quick ? QUICK_REPEATS : TIMED_REPEATS, { lora: flags.lora }))}\n`);
        return;
      }
      runBench(flags);
    });
}

function defaultThreads(): number {
  const n = Number(process.env.MAGRPO_NUM_THREADS);
  return Number.isInteger(n) && n > 0 ? n : availableParallelism();
}
