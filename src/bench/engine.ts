/**
 * `magrpo bench`: how fast the engine runs on this machine, next to the engines users would
 * otherwise run the same models with.
 *
 * Starts with the `magrpo doctor` report (backend, CPU, OpenBLAS core, measured sgemm and per-core
 * ceiling), then sgemm on two shapes, then for each model size (each in a fresh child process, so
 * peak RSS is per size): training tokens/s (forward + cross-entropy + backward + AdamW) and
 * sampling tokens/s (KV-cache decoding after a short prompt, at each batch), for magrpo and each
 * peer found (bench-peers.ts). Peers run with their own defaults; where a setting matters
 * (Debian PyTorch's BLAS threads) each is tried and every figure keeps the peer's best. On a shared
 * machine the engines alternate (ROUNDS rounds per size, the order flipped each round) and every
 * figure is the median over all repetitions. Next to each figure: the share of the machine's
 * sgemm rate the work represents (FLOPs per token × tokens/s ÷ measured sgemm GFLOP/s).
 * Where the CPU has AVX-512 BF16, training is also timed in bf16 on both sides (our precision:
 * bf16, PyTorch's torch.autocast), and each size reports training with each side at its faster
 * precision (bestTraining) beside the fp32-against-fp32 figures.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { loadavg, release } from 'node:os';
import { dirname, join } from 'node:path';
import { childExecArgv } from '../cli/node-flags.js';
import { packageRoot } from '../data/package-root.js';
import { collectDoctor, type DoctorReport, formatDoctor, measureSgemm } from '../engine/doctor.js';
import { backend } from '../engine/runtime.js';
import { LlamaBench, llamaEngineText, type SampleOnlyResults, sampleOnlyRows } from './llama.js';
import {
  type ChildReport,
  flopsPerToken,
  LORA_ALPHA,
  LORA_RANK,
  NEW_TOKENS,
  PROMPT_LEN,
  QUICK_REPEATS,
  type Repeats,
  repeatsArg,
  SAMPLE_BATCHES,
  SAMPLE_WARMUP,
  SIZES,
  TIMED_REPEATS,
  type Timings,
  TRAIN_BATCH,
  TRAIN_SEQ,
  TRAIN_WARMUP,
} from './models.js';
import { findPeers, type Peer } from './peers.js';

const MATMUL_SHAPES: readonly [number, number, number][] = [
  [1024, 1024, 1024],
  [512, 768, 3072], // M×K×N: 512 tokens through a GPT-2-small MLP up-projection
];
const ROUNDS = 2;
/** The user's own OpenMP settings, read before the native backend sets its default wait policy. */
const USER_OMP = { OMP_WAIT_POLICY: process.env.OMP_WAIT_POLICY, OMP_NUM_THREADS: process.env.OMP_NUM_THREADS };

export interface BenchFlags {
  sizes: string;
  quick?: boolean;
  torch: boolean;
  json?: boolean;
  out?: string;
  threads: number;
  python: string;
  worker?: string;
  lora?: boolean;
  rollout?: string | true;
  step?: boolean;
  model?: string;
  items?: number;
  warmup?: number;
  /** With --step: the trainer's precision. */
  precision?: 'fp32' | 'bf16';
  /** With --step: also the peers (step-peers.ts), all or a comma-separated list. */
  peers?: string | boolean;
}

/** Tokens/s per engine and size, from the medians over every round. */
export interface Throughput {
  params: number;
  train_tokens_per_s: number;
  train_tokens_per_cpu_s: number;
  sample_tokens_per_s: Record<string, number>;
  sample_tokens_per_cpu_s: Record<string, number>;
  peak_rss_mb: number;
  /** LoRA training (adapters only), where measured. */
  train_lora_tokens_per_s?: number;
  train_lora_tokens_per_cpu_s?: number;
  /** Full training in bf16 where measured: magrpo's precision: bf16, PyTorch's torch.autocast(cpu, bfloat16). */
  train_bf16_tokens_per_s?: number;
  /** Sampling with precision: bf16 (magrpo, bf16 weight packs), per batch. */
  sample_bf16_tokens_per_s?: Record<string, number>;
  /** Peak RSS after each phase (sample, lora, full), the largest over the runs. */
  rss_mb?: Record<string, number>;
}

/** A peer's best figures over its variants, and which variant gave each. */
export interface PeerThroughput extends Throughput {
  best_variant: { train: string; train_lora?: string; train_bf16?: string; sample: Record<string, string> };
  variants: Record<string, Throughput>;
  settings?: Record<string, unknown>;
}

/** A name for the kind of machine, so results of like machines land in one table. */
export function machineClass(d: DoctorReport): string {
  const slug = (s: string) =>
    s
      .toLowerCase()
      .replace(/\(r\)|\(tm\)|processor|cpu|@.*$/g, '')
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '');
  const fm = d.cpu.family !== null ? `-f${d.cpu.family}m${d.cpu.modelNumber}` : '';
  return `${slug(d.cpu.model)}${fm}-${d.cpu.logicalCpus}cpu`;
}

export function runBench(flags: BenchFlags): void {
  const sizes = flags.sizes.split(',').map((s) => s.trim().toLowerCase());
  for (const s of sizes) if (!(s in SIZES)) throw new Error(`--sizes: unknown size "${s}", expected some of ${Object.keys(SIZES).join(', ')}`);
  const reps = flags.quick ? QUICK_REPEATS : TIMED_REPEATS;
  const rounds = flags.quick ? 1 : ROUNDS;
  const threads = flags.threads;
  const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
  const loadBefore = loadavg();

  log('doctor: backend, OpenBLAS core types, sgemm');
  const doctor = collectDoctor({ threads });
  if (doctor.backend.native !== 'ok') throw new Error(`the native backend cannot load: ${doctor.backend.native}`);
  if (!flags.json) process.stdout.write(`${formatDoctor(doctor).join('\n')}\n\n`);
  const be = backend();
  const matmul: Record<string, Record<string, number>> = {};
  for (const [M, K, N] of MATMUL_SHAPES) {
    const one = measureSgemm(be, M, K, N, 1, 2 * reps.min + 1);
    const all = threads === 1 ? one : measureSgemm(be, M, K, N, threads, 2 * reps.min + 1);
    matmul[one.shape] = { 1: one.gflops, [threads]: all.gflops };
  }
  be.setNumThreads(threads);
  // The rate the physical limits are measured against: the measured per-core sgemm ceiling (per
  // CPU-second, so other jobs do not lower it) times the threads; the wall-clock sgemm without it.
  const ceiling = doctor.peakPerCore.gflops;
  const sgemmRate = ceiling > 0 ? ceiling * threads : matmul['1024x1024x1024'][threads];
  const sgemmRateHow = ceiling > 0 ? `${threads} × the per-core ceiling (best 1-thread sgemm 1024³)` : `sgemm 1024³ on ${threads} threads`;

  const root = packageRoot();
  const torchScript = join(root, 'scripts', 'bench_torch.py');
  const peers: Peer[] = flags.torch ? findPeers(flags.python, root, threads, { ...process.env, ...USER_OMP }) : [];
  if (flags.torch && !existsSync(torchScript))
    for (const p of peers) if (p.id.startsWith('torch')) Object.assign(p, { runnable: false, why: `${torchScript} not found` });
  const core = doctor.blas.core ?? 'unknown';
  const ourSettings = {
    MAGRPO_NUM_THREADS: String(threads),
    OMP_WAIT_POLICY: process.env.OMP_WAIT_POLICY ?? '',
    openblas_core: core,
    OPENBLAS_CORETYPE: process.env.OPENBLAS_CORETYPE ?? '(unset)',
    node_flags: childExecArgv().join(' '),
  };
  const ourEnv = { ...process.env, MAGRPO_NUM_THREADS: String(threads) };
  // Peers get their own OpenMP defaults: no wait policy or thread count unless the user set one.
  // OPENBLAS_CORETYPE stays, so Debian's PyTorch runs the same OpenBLAS kernels as we do.
  const peerEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(USER_OMP)) {
    if (v === undefined) delete peerEnv[k];
    else peerEnv[k] = v;
  }
  delete peerEnv.MAGRPO_NUM_THREADS;
  // llama.cpp samples only, on each size written as GGUF: its own runner (bench-llama.ts).
  const llama = flags.torch ? LlamaBench.create(peers, root, { threads, reps, env: peerEnv, log, run: runChild }) : undefined;

  const ours = (size: string) => {
    log(`${size}: magrpo (${threads} thread(s))`);
    const extra = [...(flags.quick ? ['--quick'] : []), ...(flags.lora ? ['--lora'] : [])];
    return runChild(process.execPath, [...childExecArgv(), process.argv[1], 'bench', '--worker', size, ...extra], ourEnv);
  };
  const peer = (size: string, p: Peer, variant: Peer['variants'][number]) => {
    log(`${size}: ${p.name}, ${variant.label}`);
    const args = [torchScript, '--config', JSON.stringify(SIZES[size].hf), '--threads', String(threads), '--reps', repeatsArg(reps)];
    args.push('--train-batch', String(SIZES[size].trainBatch ?? TRAIN_BATCH), '--train-seq', String(TRAIN_SEQ), '--sample-batches', SAMPLE_BATCHES.join(','));
    if (SIZES[size].lora || flags.lora) args.push('--lora-rank', String(LORA_RANK), '--lora-alpha', String(LORA_ALPHA));
    args.push('--prompt-len', String(PROMPT_LEN), '--new-tokens', String(NEW_TOKENS));
    args.push('--train-warmup', repeatsArg(TRAIN_WARMUP), '--sample-warmup', repeatsArg(SAMPLE_WARMUP));
    // Where we time precision: bf16 on bf16 hardware, PyTorch gets its own mixed precision too.
    if (doctor.backend.bf16 === 'avx512-bf16' || doctor.backend.bf16 === 'amx') args.push('--bf16');
    return runChild(p.python as string, args, { ...peerEnv, ...variant.env });
  };

  const runnable = peers.filter((p) => p.runnable && p.id !== 'llama.cpp');
  const results: Record<string, { magrpo: Throughput; peers: Record<string, PeerThroughput>; best_training?: BestTraining } & SampleOnlyResults> = {};
  const report = (complete: boolean) => ({
    schema: 2,
    complete,
    date: new Date().toISOString(),
    command: `magrpo bench ${process.argv.slice(3).join(' ')}`.trim(),
    machine: {
      class: machineClass(doctor),
      cpu: doctor.cpu.model,
      isa: doctor.cpu.isa,
      logical_cpus: doctor.cpu.logicalCpus,
      blas: `${doctor.blas.library ?? '?'}${doctor.blas.version ? ` (OpenBLAS ${doctor.blas.version})` : ''}`,
      blas_core: core,
      os: `${process.platform} ${release()}`,
      node: process.version,
    },
    threads,
    rounds,
    reps: reps.min,
    repeats: reps,
    load_average: { before: loadBefore, after: loadavg() },
    doctor,
    matmul_gflops: matmul,
    sgemm_limit_gflops: sgemmRate,
    sgemm_limit: sgemmRateHow,
    engines: [
      { id: 'magrpo', name: 'magrpo (native backend)', found: true, runnable: true, settings: ourSettings },
      ...peers.map((p) => ({ ...p, variants: p.variants.map((v) => v.label) })),
    ],
    sizes: Object.fromEntries(
      Object.entries(results).map(([size, r]) => [
        size,
        {
          model: SIZES[size].label,
          params: r.magrpo.params,
          train_batch: SIZES[size].trainBatch ?? TRAIN_BATCH,
          flops_per_token: flopsPerToken(SIZES[size].hf),
          ...r,
        },
      ]),
    ),
  });
  for (const size of sizes) {
    const mine: ChildReport[] = [];
    const theirs = new Map<string, ChildReport[]>();
    const llamaJobs = llama?.prepare(size) ?? [];
    for (let r = 0; r < rounds; r++) {
      // Alternate which engine goes first, so a change in the machine's load hits all alike.
      const jobs: (() => void)[] = [() => mine.push(ours(size))];
      for (const p of runnable) {
        for (const v of p.variants) {
          const key = `${p.id}\t${v.label}`;
          jobs.push(() => theirs.set(key, [...(theirs.get(key) ?? []), peer(size, p, v)]));
        }
      }
      jobs.push(...llamaJobs);
      for (const job of r % 2 === 0 ? jobs : jobs.reverse()) job();
    }
    const peerResults: Record<string, PeerThroughput> = {};
    for (const p of runnable) {
      const variants = Object.fromEntries(p.variants.map((v) => [v.label, throughput(theirs.get(`${p.id}\t${v.label}`) ?? [])]));
      const first = theirs.get(`${p.id}\t${p.variants[0].label}`)?.[0];
      peerResults[p.id] = { ...bestOf(variants), settings: first?.settings };
    }
    const magrpo = throughput(mine);
    results[size] = { magrpo, peers: peerResults, best_training: bestTraining(magrpo, peerResults), ...llama?.results(size) };
    // An interrupted run keeps the sizes it finished (marked incomplete).
    if (flags.out && size !== sizes.at(-1)) save(flags.out, report(false));
  }
  const out = report(true);
  if (flags.out) save(flags.out, out);
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(out)}\n`);
    return;
  }
  printTables(out, peers, flags.torch);
}

function save(file: string, out: object): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(out, null, 1)}\n`);
  process.stderr.write(`[bench] wrote ${file}\n`);
}

type BenchOutput = {
  threads: number;
  rounds: number;
  reps: number;
  /** Timed calls per figure and round (absent in results recorded before 2026-11-27 18:20: reps each). */
  repeats?: Repeats;
  load_average: { before: number[]; after: number[] };
  doctor: DoctorReport;
  matmul_gflops: Record<string, Record<string, number>>;
  sgemm_limit_gflops: number;
  sgemm_limit: string;
  sizes: Record<
    string,
    {
      model: string;
      params: number;
      train_batch?: number;
      flops_per_token: { train: number; train_lora?: number; sample: number };
      magrpo: Throughput;
      peers: Record<string, PeerThroughput>;
      best_training?: BestTraining;
    } & SampleOnlyResults
  >;
  engines: { id: string; settings?: Record<string, string> }[];
};

function printTables(out: BenchOutput, peers: Peer[], torch: boolean): void {
  const p = (s: string) => process.stdout.write(`${s}\n`);
  const f0 = (x: number) => x.toFixed(0);
  const { threads, doctor } = out;
  const ceiling = doctor.peakPerCore.gflops;
  p(
    `load average (1/5/15 min): ${fmtLoad(out.load_average.before)} before, ${fmtLoad(out.load_average.after)} after; medians of ${out.rounds} round(s) × ${runsText(out)}`,
  );
  p('');
  const mw = [14, 14, 10, 14, 10];
  p(row(['sgemm M×K×N', 'GFLOP/s 1 thr', '% ceiling', `GFLOP/s ${threads} thr`, '% ceiling'], mw));
  for (const [shape, g] of Object.entries(out.matmul_gflops)) {
    const pc = (x: number, n: number) => (ceiling > 0 ? `${f0((100 * x) / (ceiling * n))}%` : '-');
    p(row([shape, g[1].toFixed(1), pc(g[1], 1), g[threads].toFixed(1), pc(g[threads], threads)], mw));
  }
  p('');
  const ours = out.engines[0].settings ?? {};
  p('engines:');
  p(`  magrpo: native backend, MAGRPO_NUM_THREADS=${threads}, OMP_WAIT_POLICY=${ours.OMP_WAIT_POLICY || 'unset'}, OpenBLAS core ${ours.openblas_core}`);
  if (!torch) p('  peers: skipped (--no-torch)');
  for (const peer of peers) {
    if (!peer.runnable) {
      p(`  ${peer.name}: ${peer.why}`);
      continue;
    }
    if (peer.id === 'llama.cpp') {
      p(`  ${llamaEngineText(peer, threads)}`);
      continue;
    }
    const how = peer.variants.length > 1 ? `best per figure of ${peer.variants.map((v) => v.label).join(' / ')}` : peer.variants[0].label;
    const core = peer.id === 'torch-debian' ? `, OpenBLAS core ${ours.openblas_core} (the same library)` : '';
    p(`  ${peer.name}: ${peer.python}; torch.set_num_threads(${threads}), otherwise PyTorch's defaults; ${how}${core}`);
  }
  p('');
  const batches = Object.entries(out.sizes).filter(([, s]) => (s.train_batch ?? TRAIN_BATCH) !== TRAIN_BATCH);
  const otherBatch = batches.map(([size, s]) => `; ${size}: ${s.train_batch} × ${TRAIN_SEQ}`).join('');
  p(`train = tokens/s of forward + backward + AdamW on ${TRAIN_BATCH} × ${TRAIN_SEQ} tokens${otherBatch}, every weight trained (full fine-tuning)`);
  p(`sample bN = tokens/s generating ${NEW_TOKENS} tokens for N sequences after a ${PROMPT_LEN}-token prompt (KV cache, temperature 1)`);
  p(`(x%) = FLOPs per token × tokens/s ÷ ${out.sgemm_limit_gflops.toFixed(0)} GFLOP/s (${out.sgemm_limit}): the share of the matmul limit reached`);
  p('peer cells end with magrpo ÷ peer (half-precision rows, llama.cpp f16 and PyTorch bf16 autocast: magrpo with precision bf16 ÷ peer, "x bf16")');
  p('');
  const widths = [5, 26, 20, 20, 20, 7];
  p(row(['size', 'engine', 'train', ...SAMPLE_BATCHES.map((b) => `sample b${b}`), 'RSS MB'], widths));
  const names: Record<string, string> = Object.fromEntries(peers.map((x) => [x.id, x.name]));
  for (const [size, s] of Object.entries(out.sizes)) {
    const lim = (tps: number, flops: number) => {
      const pct = (100 * tps * flops) / (out.sgemm_limit_gflops * 1e9);
      return `${f0(tps)} (${pct.toFixed(pct < 10 ? 1 : 0)}%)`;
    };
    const cells = (t: Throughput, ref?: Throughput) => [
      lim(t.train_tokens_per_s, s.flops_per_token.train) + (ref ? ` ${(ref.train_tokens_per_s / t.train_tokens_per_s).toFixed(2)}x` : ''),
      ...SAMPLE_BATCHES.map(
        (b) => lim(t.sample_tokens_per_s[b], s.flops_per_token.sample) + (ref ? ` ${(ref.sample_tokens_per_s[b] / t.sample_tokens_per_s[b]).toFixed(2)}x` : ''),
      ),
      f0(t.peak_rss_mb),
    ];
    p(row([size, 'magrpo', ...cells(s.magrpo)], widths));
    const bf16 = s.magrpo.train_bf16_tokens_per_s;
    const bf16Sample = s.magrpo.sample_bf16_tokens_per_s;
    if (bf16 !== undefined || bf16Sample !== undefined) {
      const vsFp32 = (x: number | undefined, fp32: number, flops: number) => (x === undefined ? '—' : `${lim(x, flops)} ${(x / fp32).toFixed(2)}x fp32`);
      const trainCell = vsFp32(bf16, s.magrpo.train_tokens_per_s, s.flops_per_token.train);
      const sampleCells = SAMPLE_BATCHES.map((b) => vsFp32(bf16Sample?.[b], s.magrpo.sample_tokens_per_s[b], s.flops_per_token.sample));
      p(row(['', 'magrpo, precision bf16', trainCell, ...sampleCells, ''], widths));
    }
    for (const [id, t] of Object.entries(s.peers)) p(row(['', names[id] ?? id, ...cells(t, s.magrpo)], widths));
    for (const [id, t] of Object.entries(s.peers)) {
      if (t.train_bf16_tokens_per_s === undefined) continue;
      const ratio = bf16 === undefined ? '' : ` ${(bf16 / t.train_bf16_tokens_per_s).toFixed(2)}x bf16`;
      p(row(['', `${names[id] ?? id}, bf16 autocast`, lim(t.train_bf16_tokens_per_s, s.flops_per_token.train) + ratio, '—', '—', ''], widths));
    }
    const sampleCell = (tps: number) => lim(tps, s.flops_per_token.sample);
    for (const line of sampleOnlyRows(s, s.magrpo, sampleCell, (c) => row(c, widths))) p(line);
  }
  printLoraTable(out, names, f0);
  p('');
  for (const [size, s] of Object.entries(out.sizes)) {
    const winners = Object.entries(s.peers)
      .filter(([id]) => (peers.find((x) => x.id === id)?.variants.length ?? 0) > 1)
      .map(([id, t]) => {
        const lora = t.best_variant.train_lora ? `, LoRA ${t.best_variant.train_lora}` : '';
        return `${names[id]}: train ${t.best_variant.train}${lora}, ${SAMPLE_BATCHES.map((b) => `b${b} ${t.best_variant.sample[b]}`).join(', ')}`;
      });
    p(`${size}: ${s.model}${winners.length ? `; best settings ${winners.join('; ')}` : ''}`);
    const best = s.best_training;
    if (best)
      p(
        `${size}: training, each side at its faster precision: magrpo ${f0(best.magrpo.tokens_per_s)} (${best.magrpo.precision}) ÷ ${names[best.peer.engine] ?? best.peer.engine} ${f0(best.peer.tokens_per_s)} (${best.peer.precision}) = ${best.ratio.toFixed(2)}x`,
      );
  }
}

/**
 * The sizes with LoRA figures: LoRA and full fine-tuning side by side, and the peak RSS after
 * sampling, after LoRA training and after full fine-tuning (measured in that order).
 */
function printLoraTable(out: BenchOutput, names: Record<string, string>, f0: (x: number) => string): void {
  const sizes = Object.entries(out.sizes).filter(([, s]) => s.magrpo.train_lora_tokens_per_s !== undefined);
  if (sizes.length === 0) return;
  const p = (s: string) => process.stdout.write(`${s}\n`);
  p('');
  p(`train (LoRA r${LORA_RANK}) = tokens/s training only rank-${LORA_RANK} adapters on every linear layer (base frozen, AdamW over adapters)`);
  const widths = [5, 26, 20, 20, 22];
  p(row(['size', 'engine', `train (LoRA r${LORA_RANK})`, 'train (full)', 'RSS MB sample/LoRA/full'], widths));
  for (const [size, s] of sizes) {
    const lim = (tps: number | undefined, flops: number | undefined, ref: number | undefined) => {
      if (tps === undefined) return '-';
      const pct = flops === undefined ? '' : ` (${((100 * tps * flops) / (out.sgemm_limit_gflops * 1e9)).toFixed(0)}%)`;
      return `${f0(tps)}${pct}${ref === undefined ? '' : ` ${(ref / tps).toFixed(2)}x`}`;
    };
    const rss = (t: Throughput) => ['sample', 'lora', 'full'].map((k) => (t.rss_mb?.[k] === undefined ? '-' : f0(t.rss_mb[k]))).join('/');
    const cells = (t: Throughput, ref?: Throughput) => [
      lim(t.train_lora_tokens_per_s, s.flops_per_token.train_lora, ref?.train_lora_tokens_per_s),
      lim(t.train_tokens_per_s, s.flops_per_token.train, ref?.train_tokens_per_s),
      rss(t),
    ];
    p(row([`${size}`, 'magrpo', ...cells(s.magrpo)], widths));
    for (const [id, t] of Object.entries(s.peers)) p(row(['', names[id] ?? id, ...cells(t, s.magrpo)], widths));
  }
}

/** Tokens/s from the median seconds over every repetition of every round. */
function throughput(reports: ChildReport[]): Throughput {
  const all = (pick: (r: ChildReport) => Timings, key: keyof Timings) => median(reports.flatMap((r) => pick(r)[key]));
  const train = (reports[0].train_batch ?? TRAIN_BATCH) * TRAIN_SEQ;
  const perBatch = (key: keyof Timings) => Object.fromEntries(SAMPLE_BATCHES.map((b) => [b, (b * NEW_TOKENS) / all((r) => r.sample[b], key)]));
  const out: Throughput = {
    params: reports[0].params,
    train_tokens_per_s: train / all((r) => r.train, 'wall'),
    train_tokens_per_cpu_s: train / all((r) => r.train, 'cpu'),
    sample_tokens_per_s: perBatch('wall'),
    sample_tokens_per_cpu_s: perBatch('cpu'),
    peak_rss_mb: Math.max(...reports.map((r) => r.peak_rss_mb)),
  };
  const bf16 = reports.flatMap((r) => (r.train_bf16 ? [r.train_bf16] : []));
  if (bf16.length > 0) out.train_bf16_tokens_per_s = train / median(bf16.flatMap((t) => t.wall));
  const bf16Sample = reports.flatMap((r) => (r.sample_bf16 ? [r.sample_bf16] : []));
  if (bf16Sample.length > 0)
    out.sample_bf16_tokens_per_s = Object.fromEntries(SAMPLE_BATCHES.map((b) => [b, (b * NEW_TOKENS) / median(bf16Sample.flatMap((t) => t[b]?.wall ?? []))]));
  const lora = reports.flatMap((r) => (r.train_lora ? [r.train_lora] : []));
  if (lora.length > 0) {
    out.train_lora_tokens_per_s = train / median(lora.flatMap((t) => t.wall));
    out.train_lora_tokens_per_cpu_s = train / median(lora.flatMap((t) => t.cpu));
  }
  if (reports.some((r) => r.rss_mb)) {
    const phases = [...new Set(reports.flatMap((r) => Object.keys(r.rss_mb ?? {})))];
    out.rss_mb = Object.fromEntries(phases.map((k) => [k, Math.max(...reports.map((r) => r.rss_mb?.[k] ?? 0))]));
  }
  return out;
}

/** Full-training tokens/s of one engine at the faster of its precisions. */
export interface TrainingAtBest {
  engine: string;
  tokens_per_s: number;
  precision: 'fp32' | 'bf16';
}

/** Training with each side at its best precision: magrpo's against the strongest peer's. */
export interface BestTraining {
  magrpo: TrainingAtBest;
  peer: TrainingAtBest;
  /** magrpo ÷ peer. */
  ratio: number;
}

/**
 * Each side's fastest full training, fp32 or bf16 (magrpo's precision: bf16, PyTorch's autocast):
 * the figure where both pick their best settings. undefined without a PyTorch peer.
 */
export function bestTraining(magrpo: Throughput, peers: Record<string, Throughput>): BestTraining | undefined {
  const atBest = (engine: string, t: Throughput): TrainingAtBest =>
    (t.train_bf16_tokens_per_s ?? 0) > t.train_tokens_per_s
      ? { engine, tokens_per_s: t.train_bf16_tokens_per_s as number, precision: 'bf16' }
      : { engine, tokens_per_s: t.train_tokens_per_s, precision: 'fp32' };
  const candidates = Object.entries(peers).map(([id, t]) => atBest(id, t));
  if (candidates.length === 0) return undefined;
  const peer = candidates.reduce((a, b) => (b.tokens_per_s > a.tokens_per_s ? b : a));
  const ours = atBest('magrpo', magrpo);
  return { magrpo: ours, peer, ratio: ours.tokens_per_s / peer.tokens_per_s };
}

/** Per figure, the best variant's value (a peer gets its best setting for each). */
export function bestOf(variants: Record<string, Throughput>): PeerThroughput {
  const entries = Object.entries(variants);
  const pick = (score: (t: Throughput) => number) => entries.reduce((a, b) => (score(b[1]) > score(a[1]) ? b : a));
  const [trainLabel, trainBest] = pick((t) => t.train_tokens_per_s);
  const sample: Record<string, string> = {};
  const out: PeerThroughput = {
    ...trainBest,
    sample_tokens_per_s: {},
    sample_tokens_per_cpu_s: {},
    peak_rss_mb: Math.min(...entries.map(([, t]) => t.peak_rss_mb)),
    best_variant: { train: trainLabel, sample },
    variants,
  };
  if (entries.some(([, t]) => t.train_bf16_tokens_per_s !== undefined)) {
    const [label, t] = pick((x) => x.train_bf16_tokens_per_s ?? 0);
    out.best_variant.train_bf16 = label;
    out.train_bf16_tokens_per_s = t.train_bf16_tokens_per_s;
  }
  if (entries.some(([, t]) => t.train_lora_tokens_per_s !== undefined)) {
    const [label, t] = pick((x) => x.train_lora_tokens_per_s ?? 0);
    out.best_variant.train_lora = label;
    out.train_lora_tokens_per_s = t.train_lora_tokens_per_s;
    out.train_lora_tokens_per_cpu_s = t.train_lora_tokens_per_cpu_s;
  }
  // Like peak_rss_mb, the least memory any variant needed.
  if (entries.some(([, t]) => t.rss_mb)) {
    const phases = [...new Set(entries.flatMap(([, t]) => Object.keys(t.rss_mb ?? {})))];
    out.rss_mb = Object.fromEntries(phases.map((k) => [k, Math.min(...entries.map(([, t]) => t.rss_mb?.[k] ?? Number.POSITIVE_INFINITY))]));
  }
  for (const b of SAMPLE_BATCHES) {
    const [label, t] = pick((x) => x.sample_tokens_per_s[b]);
    sample[b] = label;
    out.sample_tokens_per_s[b] = t.sample_tokens_per_s[b];
    out.sample_tokens_per_cpu_s[b] = t.sample_tokens_per_cpu_s[b];
  }
  return out;
}

/** How many timed runs each figure has per round. */
function runsText(out: { reps: number; repeats?: Repeats }): string {
  const r = out.repeats;
  return r === undefined || r.max === r.min ? `${out.reps} run(s)` : `${r.min}-${r.max} runs (more while under ${r.seconds} s)`;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function row(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i <= 1 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
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
