/**
 * llama.cpp in `magrpo bench`, sampling only (llama.cpp does not train): each bench size that
 * magrpo's GGUF exporter can write (Llama-family ones as `llama` / `qwen2`, GPT-2 as `gpt2`) is
 * written, with the worker's random initialisation, as two GGUF files, F32 and F16 matrices, to a
 * temporary folder; then
 * scripts/bench_llama.py (llama-cpp-python's low-level API: one sequence per batch row, a KV
 * cache of prompt + new tokens each, n_threads = n_threads_batch = the bench's threads) times the
 * same prompt and token counts as the other engines. F32 and F16 are different work, so each is
 * its own row, with the best of its settings (llama.cpp's OpenMP defaults, or passive waiting).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../engine/rng.js';
import { exportModelGguf, ggufUnsupported } from '../model/gguf.js';
import { parseModelConfig } from '../model/hf-config.js';
import { createModel } from '../model/load.js';
import { NEW_TOKENS, PROMPT_LEN, type Repeats, repeatsArg, SAMPLE_BATCHES, SAMPLE_WARMUP, SIZES, type Timings } from './models.js';
import type { Peer, PeerVariant } from './peers.js';

export type Weights = 'f32' | 'f16';

/** What scripts/bench_llama.py prints: a ChildReport without training. */
export interface LlamaReport {
  params: number;
  sample: Record<string, Timings>;
  peak_rss_mb: number;
  llama_cpp_version?: string;
  settings?: Record<string, unknown>;
}

/** Sampling tokens/s of one run setting (medians over every repetition of every round). */
export interface SampleThroughput {
  params: number;
  sample_tokens_per_s: Record<string, number>;
  sample_tokens_per_cpu_s: Record<string, number>;
  peak_rss_mb: number;
}

/** One sample-only row: a peer on one weight type, per figure the best of its settings. */
export interface SampleOnlyThroughput extends SampleThroughput {
  engine: Peer['id'];
  weights: Weights;
  best_variant: { sample: Record<string, string> };
  variants: Record<string, SampleThroughput>;
  settings?: Record<string, unknown>;
}

/** What a size's result gains from the sample-only peers. */
export interface SampleOnlyResults {
  /** Keyed "llama.cpp f32", "llama.cpp f16". */
  sample_peers?: Record<string, SampleOnlyThroughput>;
  /** Peers that could not run this size, and why. */
  peers_not_run?: Record<string, string>;
}

/**
 * Writes `size`'s model, initialised as the bench worker initialises it (Rng(0)), as GGUF for
 * llama.cpp in `dir`: F32 and F16 matrices (norms and biases F32), no tokenizer (token ids in).
 * Or says why the exporter cannot write this model (ggufUnsupported: e.g. a sliding window).
 */
export function writeSizeGguf(size: string, dir: string): { files: Record<Weights, string> } | { why: string } {
  const spec = SIZES[size];
  if (spec === undefined) throw new Error(`unknown size "${size}"`);
  const config = parseModelConfig(spec.hf);
  const why = ggufUnsupported(config);
  if (why !== null) return { why: `magrpo's GGUF exporter cannot write it (${why})` };
  const model = createModel(config);
  model.initialize(new Rng(0));
  const files = { f32: join(dir, `${size}-f32.gguf`), f16: join(dir, `${size}-f16.gguf`) };
  exportModelGguf(model, files.f32, { name: `magrpo-bench-${size}`, dtype: 'F32' });
  exportModelGguf(model, files.f16, { name: `magrpo-bench-${size}`, dtype: 'F16' });
  return { files };
}

/** The arguments of scripts/bench_llama.py for one GGUF file. */
export function llamaArgs(script: string, file: string, threads: number, reps: Repeats): string[] {
  return [
    script,
    '--model',
    file,
    '--threads',
    String(threads),
    '--reps',
    repeatsArg(reps),
    '--sample-batches',
    SAMPLE_BATCHES.join(','),
    '--prompt-len',
    String(PROMPT_LEN),
    '--new-tokens',
    String(NEW_TOKENS),
    '--warmup',
    repeatsArg(SAMPLE_WARMUP),
  ];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Sampling tokens/s from the median seconds over every repetition of every report. */
export function sampleThroughput(reports: LlamaReport[]): SampleThroughput {
  const perBatch = (key: keyof Timings) =>
    Object.fromEntries(SAMPLE_BATCHES.map((b) => [b, (b * NEW_TOKENS) / median(reports.flatMap((r) => r.sample[b][key]))]));
  return {
    params: reports[0].params,
    sample_tokens_per_s: perBatch('wall'),
    sample_tokens_per_cpu_s: perBatch('cpu'),
    peak_rss_mb: Math.max(...reports.map((r) => r.peak_rss_mb)),
  };
}

interface LlamaBenchOptions {
  threads: number;
  reps: Repeats;
  /** The peers' environment (their own OpenMP defaults); each variant adds its own. */
  env: NodeJS.ProcessEnv;
  log: (msg: string) => void;
  /** Runs a child that prints one JSON object last, and parses it. */
  run: (cmd: string, args: string[], env: NodeJS.ProcessEnv) => object;
}

/** The llama.cpp side of one bench run: GGUF files per size, the child runs, the rows. */
export class LlamaBench {
  private dir: string | undefined;
  private files = new Map<string, Record<Weights, string>>();
  private notRun = new Map<string, string>();
  private reports = new Map<string, LlamaReport[]>();

  private constructor(
    readonly peer: Peer,
    private readonly script: string,
    private readonly opts: LlamaBenchOptions,
  ) {}

  /** The runner when llama.cpp was found and scripts/bench_llama.py is there (else the peer says why not). */
  static create(peers: Peer[], root: string, opts: LlamaBenchOptions): LlamaBench | undefined {
    const peer = peers.find((p) => p.id === 'llama.cpp' && p.runnable);
    if (peer === undefined) return undefined;
    const script = join(root, 'scripts', 'bench_llama.py');
    if (!existsSync(script)) {
      Object.assign(peer, { runnable: false, why: `${script} not found` });
      return undefined;
    }
    return new LlamaBench(peer, script, opts);
  }

  /** Writes `size` as GGUF and returns one job per variant (run once per round), or none with the reason kept. */
  prepare(size: string): (() => void)[] {
    if (this.dir === undefined) {
      const dir = mkdtempSync(join(tmpdir(), 'magrpo-bench-gguf-'));
      this.dir = dir;
      process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    }
    const r = writeSizeGguf(size, this.dir);
    if ('why' in r) {
      this.notRun.set(size, r.why);
      this.opts.log(`${size}: ${this.peer.name} cannot run this size: ${r.why}`);
      return [];
    }
    this.files.set(size, r.files);
    return this.peer.variants.map((v) => () => this.runOne(size, v));
  }

  private runOne(size: string, v: PeerVariant): void {
    const { threads, reps, env, log, run } = this.opts;
    const file = this.files.get(size)?.[v.weights ?? 'f32'] as string;
    log(`${size}: ${this.peer.name}, ${v.label}`);
    const report = run(this.peer.python as string, llamaArgs(this.script, file, threads, reps), { ...env, ...v.env }) as LlamaReport;
    const key = `${size}\t${v.label}`;
    this.reports.set(key, [...(this.reports.get(key) ?? []), report]);
  }

  /** `size`'s rows (one per weight type, best of its settings per figure), or why it could not run. */
  results(size: string): SampleOnlyResults {
    const why = this.notRun.get(size);
    if (why !== undefined) return { peers_not_run: { [this.peer.id]: why } };
    const rows: Record<string, SampleOnlyThroughput> = {};
    for (const weights of ['f32', 'f16'] as const) {
      const vs = this.peer.variants.filter((v) => (v.weights ?? 'f32') === weights);
      const done = vs.filter((v) => (this.reports.get(`${size}\t${v.label}`) ?? []).length > 0);
      if (done.length === 0) continue;
      const variants = Object.fromEntries(done.map((v) => [v.label, sampleThroughput(this.reports.get(`${size}\t${v.label}`) as LlamaReport[])]));
      const first = (this.reports.get(`${size}\t${done[0].label}`) as LlamaReport[])[0];
      rows[`${this.peer.id} ${weights}`] = { engine: this.peer.id, weights, ...bestSample(variants), settings: first.settings };
    }
    return { sample_peers: rows };
  }
}

/** Per batch, the best variant's figures; the least memory any variant needed. */
function bestSample(variants: Record<string, SampleThroughput>): Omit<SampleOnlyThroughput, 'engine' | 'weights'> {
  const entries = Object.entries(variants);
  const out = {
    params: entries[0][1].params,
    sample_tokens_per_s: {} as Record<string, number>,
    sample_tokens_per_cpu_s: {} as Record<string, number>,
    peak_rss_mb: Math.min(...entries.map(([, t]) => t.peak_rss_mb)),
    best_variant: { sample: {} as Record<string, string> },
    variants,
  };
  for (const b of SAMPLE_BATCHES) {
    const [label, t] = entries.reduce((a, c) => (c[1].sample_tokens_per_s[b] > a[1].sample_tokens_per_s[b] ? c : a));
    out.best_variant.sample[b] = label;
    out.sample_tokens_per_s[b] = t.sample_tokens_per_s[b];
    out.sample_tokens_per_cpu_s[b] = t.sample_tokens_per_cpu_s[b];
  }
  return out;
}

/** How llama.cpp ran, for the engines list. */
export function llamaEngineText(peer: Peer, threads: number): string {
  const settings = [...new Set(peer.variants.map((v) => v.label.replace(/^f(32|16) weights,? ?/, '') || 'its defaults'))];
  return (
    `${peer.name}: ${peer.python}; sampling only, on the bench models written as GGUF by magrpo (f32 and f16 weights, a row each); ` +
    `n_threads = n_threads_batch = ${threads}, otherwise llama.cpp's defaults (flash attention auto, F16 KV cache); ` +
    `${settings.length > 1 ? `best per figure of ${settings.join(' / ')}` : settings[0]}; ` +
    'draws from softmax(logits) with numpy, without the full-vocabulary log-probs magrpo computes'
  );
}

/**
 * The table rows of a size's sample-only peers (train "—", each sample cell ending with
 * magrpo ÷ peer) and of the peers that could not run it. `cell` formats tokens/s.
 */
export function sampleOnlyRows(
  s: SampleOnlyResults,
  magrpo: { sample_tokens_per_s: Record<string, number>; sample_bf16_tokens_per_s?: Record<string, number> },
  cell: (tps: number) => string,
  row: (cells: string[]) => string,
): string[] {
  const lines: string[] = [];
  for (const t of Object.values(s.sample_peers ?? {})) {
    const name = `${t.engine} ${t.weights}`;
    // Half-precision weights are compared with ours in precision bf16 (bf16 weight packs), where measured.
    const half = t.weights !== 'f32' && magrpo.sample_bf16_tokens_per_s !== undefined;
    const ours = half ? magrpo.sample_bf16_tokens_per_s! : magrpo.sample_tokens_per_s;
    const sample = SAMPLE_BATCHES.map((b) => `${cell(t.sample_tokens_per_s[b])} ${(ours[b] / t.sample_tokens_per_s[b]).toFixed(2)}x${half ? ' bf16' : ''}`);
    lines.push(row(['', name, '—', ...sample, t.peak_rss_mb.toFixed(0)]));
  }
  for (const [id, why] of Object.entries(s.peers_not_run ?? {})) lines.push(`${row(['', id])}  could not run this size: ${why}`);
  return lines;
}
