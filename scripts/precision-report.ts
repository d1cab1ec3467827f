/**
 * The bf16-vs-fp32 pretraining comparison of docs/precision.md, from the committed result files
 * results/precision/pretrain-base-400-{fp32,bf16}.jsonl (one row per step: train_loss, and
 * val_loss every 100 steps). Writes docs/precision-loss.svg and prints the markdown table.
 *
 *   npx tsx scripts/precision-report.ts
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { lineChart } from '../src/plot/index.js';

interface Row {
  step: number;
  train_loss?: number;
  val_loss?: number;
}

const read = (p: string): Row[] =>
  readFileSync(`results/precision/pretrain-base-400-${p}.jsonl`, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Row);
const runs = { fp32: read('fp32'), bf16: read('bf16') };

/** Mean train loss over steps [lo, hi]. */
const mean = (rows: Row[], lo: number, hi: number) => {
  const xs = rows.filter((r) => r.train_loss !== undefined && r.step >= lo && r.step <= hi).map((r) => r.train_loss as number);
  return xs.reduce((a, b) => a + b, 0) / xs.length;
};
/** Moving average over `w` steps (the raw per-step loss is noisy: one 4,096-token batch). */
const smooth = (rows: Row[], w = 20): [number, number][] => {
  const pts = rows.filter((r) => r.train_loss !== undefined);
  return pts.map((r, i) => {
    const win = pts.slice(Math.max(0, i - w + 1), i + 1);
    return [r.step, win.reduce((a, b) => a + (b.train_loss as number), 0) / win.length];
  });
};

const svg = await lineChart({
  title: 'models/base shape, 400 steps: training loss (20-step mean) and validation loss',
  xLabel: 'step',
  yLabel: 'loss (nats/token)',
  series: [
    { name: 'fp32 train', points: smooth(runs.fp32) },
    { name: 'bf16 train', points: smooth(runs.bf16) },
    { name: 'fp32 validation', points: runs.fp32.filter((r) => r.val_loss !== undefined).map((r) => [r.step, r.val_loss as number]), markers: true },
    { name: 'bf16 validation', points: runs.bf16.filter((r) => r.val_loss !== undefined).map((r) => [r.step, r.val_loss as number]), markers: true },
  ],
});
writeFileSync('docs/precision-loss.svg', svg);

const lines = ['| steps | fp32 train loss | bf16 train loss | bf16 − fp32 |', '| --- | ---: | ---: | ---: |'];
for (const [lo, hi] of [
  [1, 100],
  [101, 200],
  [201, 300],
  [301, 400],
]) {
  const a = mean(runs.fp32, lo, hi);
  const b = mean(runs.bf16, lo, hi);
  lines.push(`| ${lo}–${hi} (mean) | ${a.toFixed(3)} | ${b.toFixed(3)} | ${(b - a >= 0 ? '+' : '') + (b - a).toFixed(3)} |`);
}
for (const r of runs.fp32.filter((x) => x.val_loss !== undefined)) {
  const b = runs.bf16.find((x) => x.step === r.step && x.val_loss !== undefined)?.val_loss as number;
  const a = r.val_loss as number;
  lines.push(`| validation at ${r.step} | ${a.toFixed(3)} | ${b.toFixed(3)} | ${(b - a >= 0 ? '+' : '') + (b - a).toFixed(3)} |`);
}
process.stdout.write(`${lines.join('\n')}\n`);
