/**
 * The run's metrics.jsonl (one `{step, <name>: value, …}` object per line) and the loss-curve plot
 * drawn from it. Metric names:
 *   train/loss, train/lr, train/grad_norm, train/tokens, perf/tokens_per_s, time/elapsed_s,
 *   val/loss, val/perplexity.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../model/atomic-write.js';
import { lineChart, svgToPng } from '../plot/index.js';

export type MetricsEntry = { step: number } & Record<string, number>;

export class MetricsLog {
  readonly file: string;

  constructor(runDir: string) {
    this.file = join(runDir, 'metrics.jsonl');
  }

  /** Starts the log at `step`: drops entries after it (written past the checkpoint being resumed). */
  resetTo(step: number): void {
    const kept = this.read().filter((e) => e.step <= step);
    writeFileSync(this.file, kept.map((e) => `${JSON.stringify(e)}\n`).join(''));
  }

  append(entry: MetricsEntry): void {
    appendFileSync(this.file, `${JSON.stringify(entry)}\n`);
  }

  read(): MetricsEntry[] {
    if (!existsSync(this.file)) return [];
    return readFileSync(this.file, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as MetricsEntry);
  }
}

/** Points [step, value] of one metric. */
export function series(entries: readonly MetricsEntry[], name: string): [number, number][] {
  return entries.filter((e) => typeof e[name] === 'number').map((e) => [e.step, e[name]]);
}

/** Exponential moving average y'_i = α·y'_{i−1} + (1 − α)·y_i, bias-corrected like Adam's moments. */
export function ema(points: readonly [number, number][], alpha: number): [number, number][] {
  let m = 0;
  return points.map(([x, y], i) => {
    m = alpha * m + (1 - alpha) * y;
    return [x, m / (1 - alpha ** (i + 1))];
  });
}

/** Writes loss.svg and loss.png (train loss, its EMA and validation loss against the step) into `dir`. */
export async function plotLoss(entries: readonly MetricsEntry[], dir: string, title: string): Promise<void> {
  const svg = await lineChart({
    title,
    series: [
      { name: 'train loss', points: series(entries, 'train/loss') },
      { name: 'train loss (EMA 0.9)', points: ema(series(entries, 'train/loss'), 0.9) },
      { name: 'validation loss', points: series(entries, 'val/loss'), markers: true },
    ],
    xLabel: 'optimizer step',
    yLabel: 'cross-entropy (nats / token)',
  });
  writeFileAtomic(join(dir, 'loss.svg'), [svg]);
  writeFileAtomic(join(dir, 'loss.png'), [svgToPng(svg)]);
}
