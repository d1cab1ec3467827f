/**
 * `magrpo bench`: how fast the engine runs on this machine, next to PyTorch on the same models.
 *
 * Measures sgemm GFLOP/s against the machine's FP32 peak, then for each model size (each in a
 * fresh child process, so peak RSS is per size): training tokens/s (forward + cross-entropy +
 * backward + AdamW on TRAIN_BATCH × TRAIN_SEQ tokens) and sampling tokens/s (KV-cache decoding of
 * NEW_TOKENS tokens after a PROMPT_LEN-token prompt, at each of SAMPLE_BATCHES). When
 * /usr/bin/python3 has torch, scripts/bench_torch.py runs the same models right after ours, with
 * the same thread count, and the table shows our/PyTorch ratios. On a shared machine the two
 * engines alternate (ROUNDS child pairs per size, the order flipped each round) and every figure is
 * the median over all repetitions; CPU-time throughputs (all threads) are reported as well, since
 * they move much less than wall time when other jobs compete for the cores.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Command, Option } from 'commander';
import { crossEntropy } from '../engine/nn.js';
import { AdamW } from '../engine/optim.js';
import { Rng } from '../engine/rng.js';
import { backend, setBackend } from '../engine/runtime.js';
import { backward } from '../engine/tensor.js';
import { parseModelConfig } from '../model/config.js';
import { createModel } from '../model/load.js';
import { generate } from '../model/sample.js';
import { intOption } from './options.js';

const TRAIN_BATCH = 8;
const TRAIN_SEQ = 128;
const SAMPLE_BATCHES = [8, 32];
/**
 * Untimed training steps first, at least 2 and then up to 5 within 5 s: the first steps also
 * allocate optimizer state, grow the heap and let the JIT settle; a real run takes thousands.
 */
const TRAIN_WARMUP = { min: 2, max: 5, seconds: 5 };
const PROMPT_LEN = 16;
const NEW_TOKENS = 64;
const MATMUL_SHAPES: readonly [number, number, number][] = [
  [1024, 1024, 1024],
  [512, 768, 3072], // M×K×N: 512 tokens through a GPT-2-small MLP up-projection
];

/** The benchmarked models, as the HF config.json each would have. */
const SIZES: Record<string, { label: string; hf: Record<string, unknown> }> = {
  '1m': {
    label: 'Llama-style, L4 C128 H4/2kv F352 V2048',
    hf: {
      model_type: 'llama',
      vocab_size: 2048,
      hidden_size: 128,
      intermediate_size: 352,
      num_hidden_layers: 4,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      max_position_embeddings: 512,
      rms_norm_eps: 1e-5,
      tie_word_embeddings: true,
    },
  },
  '10m': {
    label: 'Llama-style, L4 C384 H6/2kv F1024 V8192',
    hf: {
      model_type: 'llama',
      vocab_size: 8192,
      hidden_size: 384,
      intermediate_size: 1024,
      num_hidden_layers: 4,
      num_attention_heads: 6,
      num_key_value_heads: 2,
      max_position_embeddings: 1024,
      rms_norm_eps: 1e-5,
      tie_word_embeddings: true,
    },
  },
  '124m': {
    label: 'GPT-2 small, L12 C768 H12 V50257 ctx 1024',
    hf: { model_type: 'gpt2', vocab_size: 50257, n_embd: 768, n_layer: 12, n_head: 12, n_positions: 1024, layer_norm_epsilon: 1e-5 },
  },
};

const ROUNDS = 2;

interface BenchFlags {
  sizes: string;
  quick?: boolean;
  torch: boolean;
  json?: boolean;
  threads: number;
  python: string;
  worker?: string;
}

/** Seconds of each timed repetition. */
interface Timings {
  wall: number[];
  cpu: number[];
}

/** What one child process prints for one size (ours or torch): scripts/bench_torch.py prints the same. */
interface ChildReport {
  params: number;
  train: Timings;
  sample: Record<string, Timings>;
  peak_rss_mb: number;
  torch_version?: string;
}

/** Tokens/s per engine and size, from the medians over every round. */
interface Throughput {
  params: number;
  train_tokens_per_s: number;
  train_tokens_per_cpu_s: number;
  sample_tokens_per_s: Record<string, number>;
  sample_tokens_per_cpu_s: Record<string, number>;
  peak_rss_mb: number;
}

export function registerBench(program: Command): void {
  program
    .command('bench')
    .description('Benchmark the engine (matmul, training and sampling throughput, memory), next to PyTorch when available')
    .option('--sizes <list>', `model sizes, comma-separated (${Object.keys(SIZES).join(', ')})`, Object.keys(SIZES).join(','))
    .option('--quick', 'one round of one timed repetition (default: 2 rounds of 3)')
    .option('--no-torch', 'skip the PyTorch comparison')
    .option('--threads <n>', 'threads for both engines (default: MAGRPO_NUM_THREADS, else all cores)', intOption(1), defaultThreads())
    .option('--python <path>', 'Python interpreter with torch', '/usr/bin/python3')
    .option('--json', 'print one JSON object instead of the table')
    .addOption(new Option('--worker <size>', 'internal: measure one size in this process').hideHelp())
    .action((flags: BenchFlags) => {
      if (flags.worker !== undefined) {
        process.stdout.write(`${JSON.stringify(measureSize(flags.worker, flags.quick ? 1 : 3))}\n`);
        return;
      }
      runBench(flags);
    });
}

function defaultThreads(): number {
  const n = Number(process.env.MAGRPO_NUM_THREADS);
  return Number.isInteger(n) && n > 0 ? n : availableParallelism();
}

// ---- the parent: matmul, then one child process per size and engine --------------------------

function runBench(flags: BenchFlags): void {
  const sizes = flags.sizes.split(',').map((s) => s.trim().toLowerCase());
  for (const s of sizes) if (!(s in SIZES)) throw new Error(`--sizes: unknown size "${s}", expected some of ${Object.keys(SIZES).join(', ')}`);
  const reps = flags.quick ? 1 : 3;
  const threads = flags.threads;
  // Both engines get the thread count and magrpo's default OpenMP wait policy (native.ts).
  const waitPolicy = process.env.OMP_WAIT_POLICY ?? 'passive';
  const threadEnv = {
    MAGRPO_NUM_THREADS: String(threads),
    OPENBLAS_NUM_THREADS: String(threads),
    OMP_NUM_THREADS: String(threads),
    OMP_WAIT_POLICY: waitPolicy,
  };
  const env = { ...process.env, ...threadEnv };
  const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
  const loadBefore = loadavg();

  const cpu = cpuPeak();
  log(`matmul (sgemm), 1 and ${threads} thread(s)`);
  setBackend('native');
  const matmul1 = measureMatmuls(1, reps);
  const matmulN = threads === 1 ? matmul1 : measureMatmuls(threads, reps);
  backend().setNumThreads(threads);

  const torchScript = join(packageRoot(), 'scripts', 'bench_torch.py');
  const torchWhy = !flags.torch ? 'skipped (--no-torch)' : !existsSync(torchScript) ? `skipped (${torchScript} not found)` : torchMissing(flags.python);
  const rounds = flags.quick ? 1 : ROUNDS;
  const ours = (size: string) => {
    log(`${size}: magrpo (${threads} thread(s))`);
    return runChild(process.execPath, [...process.execArgv, process.argv[1], 'bench', '--worker', size, ...(flags.quick ? ['--quick'] : [])], env);
  };
  const torch = (size: string) => {
    log(`${size}: PyTorch`);
    const args = [torchScript, '--config', JSON.stringify(SIZES[size].hf), '--threads', String(threads), '--reps', String(reps)];
    args.push('--train-batch', String(TRAIN_BATCH), '--train-seq', String(TRAIN_SEQ), '--sample-batches', SAMPLE_BATCHES.join(','));
    args.push('--prompt-len', String(PROMPT_LEN), '--new-tokens', String(NEW_TOKENS));
    args.push('--train-warmup', `${TRAIN_WARMUP.min},${TRAIN_WARMUP.max},${TRAIN_WARMUP.seconds}`);
    return runChild(flags.python, args, env);
  };
  const results: Record<string, Throughput & { torch?: Throughput }> = {};
  let torchVersion = '';
  for (const size of sizes) {
    const mine: ChildReport[] = [];
    const theirs: ChildReport[] = [];
    for (let r = 0; r < rounds; r++) {
      // Alternate which engine goes first, so a change in the machine's load hits both alike.
      const order = r % 2 === 0 ? ['ours', 'torch'] : ['torch', 'ours'];
      for (const who of order) {
        if (who === 'ours') mine.push(ours(size));
        else if (torchWhy === null) theirs.push(torch(size));
      }
    }
    results[size] = throughput(mine);
    if (theirs.length > 0) {
      results[size].torch = throughput(theirs);
      torchVersion = theirs[0].torch_version ?? '';
    }
  }
  const loadAfter = loadavg();

  if (flags.json) {
    const perSize = Object.fromEntries(
      Object.entries(results).map(([size, { torch: t, ...r }]) => [
        size,
        {
          model: SIZES[size].label,
          ...r,
          ...(t
            ? {
                torch_train_tokens_per_s: t.train_tokens_per_s,
                torch_train_tokens_per_cpu_s: t.train_tokens_per_cpu_s,
                torch_sample_tokens_per_s: t.sample_tokens_per_s,
                torch_sample_tokens_per_cpu_s: t.sample_tokens_per_cpu_s,
                torch_peak_rss_mb: t.peak_rss_mb,
              }
            : {}),
        },
      ]),
    );
    const out = {
      threads,
      env: threadEnv,
      rounds,
      reps,
      cpu: { model: cpu.model, cores: cpu.cores, ghz: cpu.ghz, flops_per_cycle: cpu.flopsPerCycle },
      peak_gflops: cpu.perCore * cpu.cores,
      peak_gflops_per_core: cpu.perCore,
      matmul_gflops: matmulN,
      matmul_gflops_single_core: matmul1,
      torch: torchWhy ?? `PyTorch ${torchVersion}`,
      load_average: { before: loadBefore, after: loadAfter },
      sizes: perSize,
    };
    process.stdout.write(`${JSON.stringify(out)}\n`);
    return;
  }

  const p = (s: string) => process.stdout.write(`${s}\n`);
  const f0 = (x: number) => x.toFixed(0);
  p(
    `magrpo bench: native backend, ${threads} thread(s) on both sides: ${Object.entries(threadEnv)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}, torch.set_num_threads(${threads})`,
  );
  p(`CPU: ${cpu.model}, ${cpu.cores} cores × ${cpu.ghz.toFixed(2)} GHz (${cpu.ghzSource}) × ${cpu.flopsPerCycle} FP32 flops/cycle (${cpu.isa})`);
  p(`    = ${f0(cpu.perCore)} GFLOP/s per core, ${f0(cpu.perCore * cpu.cores)} GFLOP/s peak`);
  p(`load average (1/5/15 min): ${fmtLoad(loadBefore)} before, ${fmtLoad(loadAfter)} after; medians of ${rounds} round(s) × ${reps} run(s)`);
  p('');
  p(row(['sgemm M×K×N', 'GFLOP/s 1 thread', '% core peak', `GFLOP/s ${threads} thr`, '% peak'], [14, 17, 12, 15, 7]));
  for (const key of Object.keys(matmul1)) {
    const pc = (g: number, peak: number) => `${f0((100 * g) / peak)}%`;
    const peakN = cpu.perCore * Math.min(threads, cpu.cores);
    p(row([key, matmul1[key].toFixed(1), pc(matmul1[key], cpu.perCore), matmulN[key].toFixed(1), pc(matmulN[key], peakN)], [14, 17, 12, 15, 7]));
  }
  p('');
  p(`torch: ${torchWhy ?? `PyTorch ${torchVersion} (${flags.python}), same shapes, eager mode`}`);
  p(`train = tokens/s of forward + backward + AdamW on ${TRAIN_BATCH} × ${TRAIN_SEQ} tokens`);
  p(`sample bN = tokens/s generating ${NEW_TOKENS} tokens for N sequences after a ${PROMPT_LEN}-token prompt (KV cache, temperature 1)`);
  p('cells: ours / torch = wall-clock ratio (ratio of CPU-time throughputs)');
  p('');
  const widths = [6, 9, 28, 28, 28, 12];
  const cell = (a: number, b: number | undefined, aCpu: number, bCpu: number | undefined) =>
    b === undefined || bCpu === undefined ? f0(a) : `${f0(a)} / ${f0(b)} = ${(a / b).toFixed(2)}x (${(aCpu / bCpu).toFixed(2)}x)`;
  const cols = ['size', 'params', 'train', ...SAMPLE_BATCHES.map((b) => `sample b${b}`), 'peak RSS MB'];
  p(row(cols, widths));
  for (const [size, r] of Object.entries(results)) {
    const t = r.torch;
    p(
      row(
        [
          size,
          `${(r.params / 1e6).toFixed(2)}M`,
          cell(r.train_tokens_per_s, t?.train_tokens_per_s, r.train_tokens_per_cpu_s, t?.train_tokens_per_cpu_s),
          ...SAMPLE_BATCHES.map((b) => cell(r.sample_tokens_per_s[b], t?.sample_tokens_per_s[b], r.sample_tokens_per_cpu_s[b], t?.sample_tokens_per_cpu_s[b])),
          t ? `${f0(r.peak_rss_mb)} / ${f0(t.peak_rss_mb)}` : f0(r.peak_rss_mb),
        ],
        widths,
      ),
    );
  }
  p('');
  for (const size of Object.keys(results)) p(`${size}: ${SIZES[size].label}`);
}

/** Tokens/s from the median seconds over every repetition of every round. */
function throughput(reports: ChildReport[]): Throughput {
  const all = (pick: (r: ChildReport) => Timings, key: keyof Timings) => median(reports.flatMap((r) => pick(r)[key]));
  const train = TRAIN_BATCH * TRAIN_SEQ;
  const perBatch = (key: keyof Timings) => Object.fromEntries(SAMPLE_BATCHES.map((b) => [b, (b * NEW_TOKENS) / all((r) => r.sample[b], key)]));
  return {
    params: reports[0].params,
    train_tokens_per_s: train / all((r) => r.train, 'wall'),
    train_tokens_per_cpu_s: train / all((r) => r.train, 'cpu'),
    sample_tokens_per_s: perBatch('wall'),
    sample_tokens_per_cpu_s: perBatch('cpu'),
    peak_rss_mb: Math.max(...reports.map((r) => r.peak_rss_mb)),
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function row(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
}

function fmtLoad(l: number[]): string {
  return l.map((x) => x.toFixed(2)).join(' ');
}

/** Runs a child that prints one JSON line last; its stderr goes to ours. */
function runChild(cmd: string, args: string[], env: NodeJS.ProcessEnv): ChildReport {
  const r = spawnSync(cmd, args, { env, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`benchmark child \`${cmd} ${args.slice(0, 4).join(' ')} …\` failed (exit ${r.status ?? r.signal})`);
  const last = r.stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(last) as ChildReport;
}

/** Why PyTorch cannot be used, or null when it can. */
function torchMissing(python: string): string | null {
  const r = spawnSync(python, ['-c', 'import torch'], { stdio: 'ignore' });
  return r.status === 0 ? null : `not available (${python} cannot import torch; \`bash scripts/setup.sh --with-torch\` installs it)`;
}

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

interface CpuPeak {
  model: string;
  cores: number;
  ghz: number;
  ghzSource: string;
  flopsPerCycle: number;
  isa: string;
  /** GFLOP/s of one core. */
  perCore: number;
}

/**
 * FP32 peak = cores × GHz × flops/cycle. Zen/Haswell-class cores with AVX2+FMA retire two 8-lane
 * FMAs per cycle: 2 × 8 × 2 = 32 flops; AVX-512 doubles the lanes, plain AVX has no FMA.
 */
function cpuPeak(): CpuPeak {
  const info = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const flags = new Set((info.match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/));
  const [flopsPerCycle, isa] = flags.has('avx512f')
    ? [64, 'AVX-512']
    : flags.has('avx2') && flags.has('fma')
      ? [32, 'AVX2+FMA']
      : flags.has('avx')
        ? [16, 'AVX']
        : [8, 'SSE'];
  const lscpu = spawnSync('lscpu', [], { encoding: 'utf8' });
  const maxMhz = Number(lscpu.stdout?.match(/^CPU max MHz:\s*([\d.]+)/m)?.[1]);
  const mhzLines = [...info.matchAll(/^cpu MHz\s*:\s*([\d.]+)/gm)].map((m) => Number(m[1]));
  const [mhz, ghzSource] =
    maxMhz > 0
      ? [maxMhz, 'lscpu max']
      : mhzLines.length > 0
        ? [Math.max(...mhzLines), '/proc/cpuinfo cpu MHz; no max reported']
        : [cpus()[0]?.speed ?? 0, 'os.cpus()'];
  const ghz = mhz / 1000;
  return { model: cpus()[0]?.model ?? 'unknown', cores: availableParallelism(), ghz, ghzSource, flopsPerCycle, isa, perCore: ghz * flopsPerCycle };
}

/** Median sgemm GFLOP/s per shape ("M×K×N") on `threads` threads. */
function measureMatmuls(threads: number, reps: number): Record<string, number> {
  const be = backend();
  be.setNumThreads(threads);
  const rng = new Rng(1);
  const out: Record<string, number> = {};
  for (const [M, K, N] of MATMUL_SHAPES) {
    const A = Float32Array.from({ length: M * K }, () => rng.next() - 0.5);
    const B = Float32Array.from({ length: K * N }, () => rng.next() - 0.5);
    const C = new Float32Array(M * N);
    const gemm = () => be.gemm(false, false, M, N, K, 1, A, 0, K, B, 0, N, 0, C, 0, N);
    // Each timed sample repeats the product for ~0.2 s so timer and scheduler noise average out.
    const calls = Math.max(1, Math.round(0.2 / ((2 * M * N * K) / 60e9)));
    const seconds = medianSeconds(
      () => {
        for (let i = 0; i < calls; i++) gemm();
      },
      2 * reps + 1,
    );
    out[`${M}x${K}x${N}`] = (2 * M * N * K * calls) / seconds / 1e9;
  }
  return out;
}

function medianSeconds(fn: () => void, reps: number): number {
  return median(timed(fn, reps).wall);
}

/**
 * Wall and CPU (all threads) seconds of each of `reps` calls, after untimed warm-up calls: `min`
 * of them, then more while fewer than `max` ran and less than `seconds` passed.
 */
function timed(fn: () => void, reps: number, warmup = { min: 1, max: 1, seconds: 0 }): Timings {
  const start = performance.now();
  for (let i = 0; i < warmup.max && (i < warmup.min || performance.now() - start < warmup.seconds * 1000); i++) fn();
  const out: Timings = { wall: [], cpu: [] };
  for (let i = 0; i < reps; i++) {
    const w0 = performance.now();
    const c0 = process.cpuUsage();
    fn();
    const c = process.cpuUsage(c0);
    out.wall.push((performance.now() - w0) / 1000);
    out.cpu.push((c.user + c.system) / 1e6);
  }
  return out;
}

// ---- the child: one model size -------------------------------------------------------------

function measureSize(size: string, reps: number): ChildReport {
  const spec = SIZES[size];
  if (spec === undefined) throw new Error(`unknown size "${size}"`);
  setBackend('native');
  const model = createModel(parseModelConfig(spec.hf));
  const rng = new Rng(0);
  model.initialize(rng);
  const V = model.vocabSize;
  const randomIds = (n: number) => Int32Array.from({ length: n }, () => Math.floor(rng.next() * V));

  const opt = new AdamW(model.trainableParams(), { lr: 1e-4, weightDecay: 0.01 });
  const ids = randomIds(TRAIN_BATCH * TRAIN_SEQ);
  const targets = randomIds(TRAIN_BATCH * TRAIN_SEQ);
  const train = timed(
    () => {
      backward(crossEntropy(model.forward(ids, TRAIN_BATCH, TRAIN_SEQ), targets));
      opt.step();
      opt.zeroGrad();
    },
    reps,
    TRAIN_WARMUP,
  );

  const sample: Record<string, Timings> = {};
  for (const b of SAMPLE_BATCHES) {
    const prompts = Array.from({ length: b }, () => Array.from(randomIds(PROMPT_LEN)));
    sample[b] = timed(() => generate(model, prompts, { maxNewTokens: NEW_TOKENS, temperature: 1, rng }), reps);
  }
  return { params: model.numParams(), train, sample, peak_rss_mb: process.resourceUsage().maxRSS / 1024 };
}
