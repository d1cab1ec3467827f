/**
 * Soak benchmark (not a test): trains a two-agent team of models/micro for a while, with metrics,
 * samples-style logging and a checkpoint every few items, and reports resident memory, JS heap and
 * open file descriptors over time. A leak shows as a steady climb after warm-up; the summary gives
 * the slope over the second half of the run.
 *
 *   npx tsx scripts/soak.ts [--minutes 3] [--every 10] [--out soak.json]
 *
 * CPU-heavy (one core): run it on a quiet machine. It trains in a temp folder it removes at the end.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Task } from '../src/rl/task.js';
import { MAGRPOTrainer } from '../src/rl/trainer.js';

const { values } = parseArgs({
  options: { minutes: { type: 'string', default: '3' }, every: { type: 'string', default: '10' }, out: { type: 'string' } },
});
const minutes = Number(values.minutes);
const everySeconds = Number(values.every);
if (!(minutes > 0) || !(everySeconds > 0)) throw new Error('--minutes and --every must be positive numbers');

const MODEL = resolve(import.meta.dirname, '..', 'models', 'micro');
const PROMPTS = ['def add(a, b):', 'The cat sat on the', 'Once upon a time', 'for i in range(', 'import os\n', 'Dear team,'];
type Item = { prompt: string };
/** Rewards agreeing on length and ending a line: cheap, and it keeps the policy moving. */
const task: Task<Item> = {
  name: 'soak',
  dataset: Array.from({ length: 60 }, (_, i) => ({ prompt: PROMPTS[i % PROMPTS.length] })),
  reward: ({ completions }) => -Math.abs(completions[0].length - completions[1].length) / 32 + (completions.every((c) => c.includes('\n')) ? 1 : 0),
};

interface Sample {
  t_s: number;
  items: number;
  rss_mib: number;
  heap_mib: number;
  external_mib: number;
  fds: number;
}

const mib = (b: number) => Math.round((b / 2 ** 20) * 10) / 10;
const openFds = () => readdirSync('/proc/self/fd').length;

const dir = mkdtempSync(join(tmpdir(), 'magrpo-soak-'));
const trainer = new MAGRPOTrainer({
  task,
  models: [MODEL, MODEL],
  config: {
    num_generations: 4,
    max_new_tokens: 24,
    temperature: 1,
    num_train_epochs: 1000,
    rollout_buffer_size: 2,
    agent_learning_rate: 1e-4,
    logging_steps: 1,
    eval_interval: 0,
    save_steps: 10,
    save_total_limit: 2,
    output_dir: dir,
  },
});

const samples: Sample[] = [];
const t0 = performance.now();
const sample = () => {
  const m = process.memoryUsage();
  const s = {
    t_s: Math.round((performance.now() - t0) / 1000),
    items: trainer.items,
    rss_mib: mib(m.rss),
    heap_mib: mib(m.heapUsed),
    external_mib: mib(m.external + m.arrayBuffers),
    fds: openFds(),
  };
  samples.push(s);
  process.stderr.write(
    `${String(s.t_s).padStart(5)} s  items ${String(s.items).padStart(5)}  rss ${s.rss_mib} MiB  heap ${s.heap_mib} MiB  external ${s.external_mib} MiB  fds ${s.fds}\n`,
  );
};
sample();
const timer = setInterval(sample, everySeconds * 1000);
const stop = setTimeout(() => trainer.requestStop(), minutes * 60_000);
try {
  await trainer.train();
} finally {
  clearInterval(timer);
  clearTimeout(stop);
  sample();
  await trainer.close();
  rmSync(dir, { recursive: true, force: true });
}

/** Least-squares slope of y over t, per minute. */
function slopePerMinute(points: Sample[], y: (s: Sample) => number): number {
  const n = points.length;
  if (n < 2) return 0;
  const mt = points.reduce((a, p) => a + p.t_s, 0) / n;
  const my = points.reduce((a, p) => a + y(p), 0) / n;
  const num = points.reduce((a, p) => a + (p.t_s - mt) * (y(p) - my), 0);
  const den = points.reduce((a, p) => a + (p.t_s - mt) ** 2, 0);
  return den === 0 ? 0 : (num / den) * 60;
}

const secondHalf = samples.slice(Math.floor(samples.length / 2));
const summary = {
  minutes,
  items: trainer.items,
  items_per_minute: Math.round((trainer.items / ((performance.now() - t0) / 60_000)) * 10) / 10,
  rss_mib: { first: samples[0].rss_mib, max: Math.max(...samples.map((s) => s.rss_mib)), last: samples[samples.length - 1].rss_mib },
  rss_mib_per_min_second_half: Math.round(slopePerMinute(secondHalf, (s) => s.rss_mib) * 100) / 100,
  heap_mib_per_min_second_half: Math.round(slopePerMinute(secondHalf, (s) => s.heap_mib) * 100) / 100,
  fds: { first: samples[0].fds, max: Math.max(...samples.map((s) => s.fds)), last: samples[samples.length - 1].fds },
  samples,
};
process.stdout.write(`${JSON.stringify({ ...summary, samples: undefined }, null, 2)}\n`);
if (values.out) writeFileSync(values.out, `${JSON.stringify(summary, null, 2)}\n`);
