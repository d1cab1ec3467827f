/**
 * `magrpo bench --rollout [model]`: rollout throughput, i.e. sampled completion tokens per second,
 * of the in-process sampler against 1 and 2 local `magrpo serve` processes reached through the
 * trainer's own client (rollout.backend openai, src/rollout/openai.ts), on the same model, prompts
 * and settings: P prompts × G completions of exactly T new tokens (EOS ignored, so every setup
 * samples the same number of tokens), temperature 1.
 *
 * Threads: the in-process sampler and a single server use all `threads`; k servers get
 * max(1, ⌊threads / k⌋) each, so on one machine the servers share its cores instead of
 * oversubscribing them (on separate machines each would have its own). Model loading, server
 * start-up and a warm-up request are outside the timings; each figure is the median over `reps`
 * timed batches, next to the CPU seconds those batches took (this process for the in-process
 * sampler, the servers' processes from /proc for the servers).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { childExecArgv } from '../cli/node-flags.js';
import { Rng } from '../engine/rng.js';
import { backend } from '../engine/runtime.js';
import { LanguageModel } from '../model/pretrained.js';
import { OpenAISampler } from '../rollout/openai.js';

/** Short prose and code openings (the shipped models were pretrained on both). */
export const ROLLOUT_PROMPTS = [
  'The whale',
  'def add(a, b):',
  'Call me Ishmael. Some years ago',
  'function sum(xs) {',
  'The ship sailed at dawn, and',
  'def is_even(n):',
  'In the last year the nation',
  'const words = text.split(',
];

export interface RolloutBenchSettings {
  model: string;
  prompts: number;
  group: number;
  newTokens: number;
  reps: number;
  threads: number;
  serverCounts: number[];
}

export interface RolloutRow {
  setup: string;
  servers: number;
  threads_per_process: number;
  completion_tokens: number;
  /** Median wall seconds of one batch of P × G completions. */
  seconds: number;
  tokens_per_s: number;
  /** Completion tokens per CPU second of the sampling processes (null where not measurable). */
  tokens_per_cpu_s: number | null;
}

export interface RolloutBenchReport {
  command: string;
  date: string;
  settings: RolloutBenchSettings & { params: number; temperature: number; logical_cpus: number; load_average: { before: number[]; after: number[] } };
  rows: RolloutRow[];
}

/** Settings of `bench --rollout`: `--quick` is 4 prompts × G 8 × 32 tokens, median of 3; else 8 × 8 × 64, median of 5. */
export function rolloutSettings(model: string, quick: boolean, threads: number): RolloutBenchSettings {
  return { model, prompts: quick ? 4 : 8, group: 8, newTokens: quick ? 32 : 64, reps: quick ? 3 : 5, threads, serverCounts: [1, 2] };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** utime + stime of a process in seconds (Linux /proc), null elsewhere. */
function processCpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat(5), counted from the state (field 3) here; in clock ticks (100/s on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

interface Served {
  child: ChildProcess;
  url: string;
}

/** `magrpo serve --model M --port 0` with `threads` threads; resolves with its URL. */
function startServe(cli: readonly string[], model: string, maxBatch: number, threads: number): Promise<Served> {
  const child = spawn(process.execPath, [...cli, 'serve', '--model', model, '--port', '0', '--max-batch', String(maxBatch), '--seed', '1'], {
    env: { ...process.env, MAGRPO_NUM_THREADS: String(threads) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`magrpo serve did not start within 120 s: ${err}`)), 120_000);
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /serve: (http:\/\/[^\s]+)\/v1/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1] });
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`magrpo serve exited (${code ?? signal}): ${err}`));
    });
  });
}

/**
 * Runs the measurement. `cli` is how to start this CLI again (node flags and the entry script),
 * for the servers; `log` gets progress lines.
 */
export async function measureRollout(s: RolloutBenchSettings, cli: readonly string[], log: (m: string) => void): Promise<RolloutBenchReport> {
  const loadBefore = loadavg();
  const lm = LanguageModel.load(s.model);
  const prompts = Array.from({ length: s.prompts }, (_, k) => ROLLOUT_PROMPTS[k % ROLLOUT_PROMPTS.length]);
  const requests = prompts.map((prompt) => ({ prompt, n: s.group }));
  const params = { maxNewTokens: s.newTokens, stopStrings: [] as string[], temperature: 1, topK: null, topP: 1 };
  const rows: RolloutRow[] = [];

  // In-process: one batch of P × G rows, as the local rollout backend samples.
  backend().setNumThreads(s.threads);
  const flat = requests.flatMap((r) => new Array<string>(r.n).fill(r.prompt));
  const rng = new Rng(1);
  lm.sample(flat, { maxNewTokens: 4, temperature: 1, stopAtEos: false, rng });
  log(`in-process sampler: ${s.prompts} prompts × G ${s.group} × ${s.newTokens} tokens, ${s.threads} thread(s)`);
  const local: { seconds: number; cpu: number; tokens: number }[] = [];
  for (let r = 0; r < s.reps; r++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const out = lm.sample(flat, { maxNewTokens: s.newTokens, temperature: 1, stopAtEos: false, rng });
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    local.push({ seconds, cpu: (cpu.user + cpu.system) / 1e6, tokens: out.reduce((a, o) => a + o.completionIds.length, 0) });
  }
  rows.push(row('in-process sampler', 0, s.threads, local));

  for (const k of s.serverCounts) {
    const threads = Math.max(1, Math.floor(s.threads / k));
    log(`${k} × magrpo serve (${threads} thread(s) each): starting`);
    const adapterDir = mkdtempSync(join(tmpdir(), 'magrpo-bench-rollout-'));
    const servers: Served[] = [];
    try {
      for (let i = 0; i < k; i++) servers.push(await startServe(cli, resolve(s.model), s.prompts * s.group, threads));
      const sampler = new OpenAISampler(
        lm,
        new Rng(2),
        {
          servers: servers.map((x) => x.url),
          apiKey: null,
          apiKeyEnv: null,
          timeoutMs: 600_000,
          maxConcurrency: s.prompts,
          maxRetries: 0,
          backoffMs: 100,
          maxBackoffMs: 100,
          maxFailures: 1,
          maxResponseBytes: 64 * 2 ** 20,
          balance: 'round_robin',
          promptFormat: 'token_ids',
          adapterDir,
          deleteOldAdapters: true,
          // The base model the servers were started with; every completion exactly T tokens.
          weightSync: 'none',
          extraBody: { ignore_eos: true },
        },
        (m) => {
          if (!m.startsWith('rollout.weight_sync none')) log(m);
        },
      );
      await sampler.loadWeights('base', () => {});
      // Warm-up: the same requests, 4 tokens each.
      await sampler.generate(requests, { ...params, maxNewTokens: 4 });
      log(`${k} × magrpo serve: ${s.prompts} requests with n = ${s.group}, round robin`);
      const timed: { seconds: number; cpu: number | null; tokens: number }[] = [];
      for (let r = 0; r < s.reps; r++) {
        const cpu0 = servers.map((x) => processCpuSeconds(x.child.pid));
        const t0 = performance.now();
        const out = await sampler.generate(requests, params);
        const seconds = (performance.now() - t0) / 1000;
        const cpu1 = servers.map((x) => processCpuSeconds(x.child.pid));
        const cpu =
          cpu0.every((c) => c !== null) && cpu1.every((c) => c !== null) ? cpu1.reduce((a, c, i) => a + (c as number) - (cpu0[i] as number), 0) : null;
        timed.push({ seconds, cpu, tokens: out.reduce((a, o) => a + o.completions.reduce((b, c) => b + c.ids.length, 0), 0) });
      }
      rows.push(row(`magrpo serve × ${k}`, k, threads, timed));
    } finally {
      for (const x of servers) x.child.kill('SIGTERM');
      rmSync(adapterDir, { recursive: true, force: true });
    }
  }
  return {
    command: `magrpo bench ${process.argv.slice(3).join(' ')}`.trim(),
    date: new Date().toISOString(),
    settings: {
      ...s,
      params: [...lm.model.params.values()].reduce((a, t) => a + t.data.length, 0),
      temperature: 1,
      logical_cpus: availableParallelism(),
      load_average: { before: loadBefore, after: loadavg() },
    },
    rows,
  };
}

function row(setup: string, servers: number, threads: number, runs: { seconds: number; cpu: number | null; tokens: number }[]): RolloutRow {
  const seconds = median(runs.map((r) => r.seconds));
  const tokens = runs[0].tokens;
  const cpu = runs.every((r) => r.cpu !== null) ? median(runs.map((r) => r.cpu as number)) : null;
  return {
    setup,
    servers,
    threads_per_process: threads,
    completion_tokens: tokens,
    seconds,
    tokens_per_s: tokens / seconds,
    tokens_per_cpu_s: cpu && cpu > 0 ? tokens / cpu : null,
  };
}

/** The report as text: settings, then one line per setup. */
export function formatRollout(r: RolloutBenchReport): string {
  const s = r.settings;
  const lines = [
    `rollout throughput (sampled completion tokens per second): ${relative(process.cwd(), s.model) || s.model} (${(s.params / 1e6).toFixed(2)}M parameters)`,
    `  ${s.prompts} prompts × G ${s.group} completions × ${s.newTokens} new tokens (EOS ignored), temperature 1, median of ${s.reps} batch(es)`,
    `  ${s.threads} thread(s) on ${s.logical_cpus} logical CPUs; k servers get max(1, ⌊${s.threads}/k⌋) threads each; load average ${s.load_average.before.map((x) => x.toFixed(2)).join(' ')} → ${s.load_average.after.map((x) => x.toFixed(2)).join(' ')}`,
    '',
    `${'setup'.padEnd(22)}${'threads/proc'.padStart(13)}${'tokens'.padStart(8)}${'wall s'.padStart(9)}${'tok/s'.padStart(9)}${'tok/CPU-s'.padStart(11)}${'vs in-process'.padStart(15)}`,
  ];
  const base = r.rows[0]?.tokens_per_s ?? 0;
  for (const x of r.rows) {
    lines.push(
      `${x.setup.padEnd(22)}${String(x.threads_per_process).padStart(13)}${String(x.completion_tokens).padStart(8)}${x.seconds.toFixed(2).padStart(9)}${x.tokens_per_s.toFixed(0).padStart(9)}${(x.tokens_per_cpu_s === null ? '—' : x.tokens_per_cpu_s.toFixed(0)).padStart(11)}${`${(x.tokens_per_s / base).toFixed(2)}×`.padStart(15)}`,
    );
  }
  if (s.serverCounts.some((k) => k > 1))
    lines.push(
      '',
      `  The servers share this machine's ${s.logical_cpus} logical CPUs: more servers split the same cores, so they cannot add throughput past what the cores give; on separate machines each server would bring its own.`,
    );
  return `${lines.join('\n')}\n`;
}

/** `bench --rollout [model]`: measures, then prints the table (or one JSON object with --json). */
export async function runRolloutBench(model: string | true, flags: { quick?: boolean; threads: number; json?: boolean }): Promise<void> {
  const dir = model === true ? join(packageRoot(), 'models', 'base') : model;
  if (!existsSync(join(dir, 'config.json'))) throw new Error(`--rollout ${dir}: not a model folder (no config.json)`);
  const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
  const report = await measureRollout(rolloutSettings(dir, flags.quick === true, flags.threads), [...childExecArgv(), process.argv[1]], log);
  process.stdout.write(flags.json ? `${JSON.stringify(report)}\n` : formatRollout(report));
}

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}
