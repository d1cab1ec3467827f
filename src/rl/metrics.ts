/**
 * Metric logging: entries keyed by env step (the x-axis of every chart), throttled by
 * `logging_steps` for training entries, written to sinks (JSONL here; the CLI adds more).
 * Names are slash-namespaced and listed in docs/metrics.md.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

export interface MetricsSink {
  log(step: number, metrics: Record<string, number>): void;
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

  private write(step: number, metrics: Record<string, number>): void {
    for (const s of this.sinks) s.log(step, metrics);
  }

  async close(): Promise<void> {
    for (const s of this.sinks) await s.close?.();
  }
}
