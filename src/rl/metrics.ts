/**
 * Metric logging: entries keyed by env step (the x-axis of every chart), throttled by
 * `logging_steps` for training entries, written to sinks (JSONL here; the CLI adds more).
 * Names are slash-namespaced and listed in docs/metrics.md.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export interface MetricsSink {
  log(step: number, metrics: Record<string, number>): void;
  /** Free text at a step, e.g. sampled completions (TensorBoard's Text tab). */
  text?(step: number, tag: string, text: string): void;
  /** The run's hyperparameters and the metrics to tabulate against them (TensorBoard's HParams tab). */
  hparams?(hparams: Record<string, unknown>, metricTags: readonly string[]): void;
  close?(): void | Promise<void>;
}

/** One JSON object per line: {"step": 12, "turn_1/reward_mean": 0.5, ...}. */
export class JsonlSink implements MetricsSink {
  constructor(readonly file: string) {
    mkdirSync(dirname(file), { recursive: true });
  }
  log(step: number, metrics: Record<string, number>): void {
    appendFileSync(this.file, `${JSON.stringify({ step, time: Date.now() / 1000, ...metrics })}\n`);
  }
}

/**
 * metrics.csv: the entries of metrics.jsonl as a table, for spreadsheets and pandas. A CSV header
 * is fixed while metrics appear over a run (eval entries, new reward components), so the file is
 * regenerated from metrics.jsonl (the log a resume rolls back) every `every` entries and at close:
 * columns are `step`, `time`, then every metric in order of first appearance.
 */
export class CsvSink implements MetricsSink {
  private sinceWrite = 0;
  constructor(
    readonly file: string,
    readonly jsonlFile: string,
    private readonly every = 20,
  ) {
    mkdirSync(dirname(file), { recursive: true });
  }
  log(): void {
    if (++this.sinceWrite >= this.every) this.write();
  }
  close(): void {
    this.write();
  }
  private write(): void {
    this.sinceWrite = 0;
    if (!existsSync(this.jsonlFile)) return;
    const rows: Record<string, unknown>[] = [];
    for (const line of readFileSync(this.jsonlFile, 'utf8').split('\n')) {
      try {
        if (line.trim()) rows.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // a torn last line (a crash can cut one)
      }
    }
    writeFileSync(this.file, jsonlToCsv(rows));
  }
}

/** Rows of {name: value} as CSV: header = step, time, then names in order of first appearance. */
export function jsonlToCsv(rows: readonly Record<string, unknown>[]): string {
  const columns = ['step', 'time'];
  for (const r of rows) for (const k of Object.keys(r)) if (!columns.includes(k)) columns.push(k);
  const field = (v: unknown) => {
    const s = v === undefined || v === null ? '' : String(v);
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return `${[columns.map(field).join(','), ...rows.map((r) => columns.map((c) => field(r[c])).join(','))].join('\n')}\n`;
}

/** Collects logged entries in memory (tests, notebooks). */
export class MemorySink implements MetricsSink {
  readonly entries: { step: number; metrics: Record<string, number> }[] = [];
  log(step: number, metrics: Record<string, number>): void {
    this.entries.push({ step, metrics: { ...metrics } });
  }
  /** Values of one metric in logging order, with their steps. */
  series(name: string): { step: number; value: number }[] {
    return this.entries.filter((e) => name in e.metrics).map((e) => ({ step: e.step, value: e.metrics[name] }));
  }
}

export class MetricsLogger {
  /** Env step of the last training entry written (saved in checkpoints). */
  lastLogged: number | null = null;

  constructor(
    private readonly sinks: MetricsSink[],
    private readonly loggingSteps: number,
  ) {}

  /**
   * A training entry: written if it is the first, or `logging_steps` ≤ 1, or at least
   * `logging_steps` env steps after the last one (the reference's throttle; entries of several
   * agents at one step are merged by the caller instead of dropped).
   */
  train(step: number, metrics: Record<string, number>): boolean {
    if (this.lastLogged !== null && this.loggingSteps > 1 && step - this.lastLogged < this.loggingSteps) return false;
    this.lastLogged = step;
    this.write(step, metrics);
    return true;
  }

  /** Evaluation and run-level entries are never throttled. */
  always(step: number, metrics: Record<string, number>): void {
    this.write(step, metrics);
  }

  /** Free text (sampled completions) to the sinks that take text. */
  text(step: number, tag: string, text: string): void {
    for (const s of this.sinks) s.text?.(step, tag, text);
  }

  /** Hyperparameters to the sinks that take them. */
  hparams(hparams: Record<string, unknown>, metricTags: readonly string[]): void {
    for (const s of this.sinks) s.hparams?.(hparams, metricTags);
  }

  private write(step: number, metrics: Record<string, number>): void {
    for (const s of this.sinks) s.log(step, metrics);
  }

  async close(): Promise<void> {
    for (const s of this.sinks) await s.close?.();
  }
}
