/**
 * failure.json: what a run directory holds when training failed, so that a directory with a
 * config and a few logs is never left without the reason (the error, its stack, how far the run
 * got and the checkpoint to resume from).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveCheckpoint } from '../rl/checkpoint.js';
import { watchdogRun } from '../rl/watchdog.js';

export const FAILURE_FILE = 'failure.json';

export interface FailureReport {
  status: 'failed';
  /** The error's message (first line: what went wrong). */
  error: string;
  /** The error's class name, e.g. ConfigError, RewardError. */
  name: string;
  stack: string | null;
  /** The last logged environment step (null: nothing was logged). */
  env_step: number | null;
  /** Training items finished before the failure. */
  items: number;
  /** The newest checkpoint (resume with `train --resume <run-dir>`), or null. */
  checkpoint: string | null;
  failed_at: string;
}

/**
 * Follows one training run: once its directory exists (`dir`), a failure writes failure.json
 * there with how far the run got. `dir` is cleared again when training is over, so a failure
 * after it (e.g. of the final evaluation, which report.json records) writes none.
 */
export class RunTracker {
  dir: string | null = null;
  envStep: number | null = null;
  items = 0;

  /**
   * Tells the callback watchdog (rl/watchdog.ts) where the run is and how far it got, so that a
   * user callback stuck in a synchronous loop still leaves failure.json (call after progress).
   */
  publish(): void {
    if (this.dir === null) {
      watchdogRun(null);
      return;
    }
    let checkpoint: string | null = null;
    try {
      checkpoint = resolveCheckpoint(this.dir);
    } catch {
      // no checkpoint yet
    }
    watchdogRun({ dir: this.dir, envStep: this.envStep, items: this.items, checkpoint });
  }

  /** Writes failure.json if a run directory is being trained into; returns the file or null. */
  fail(err: unknown): string | null {
    if (this.dir === null) return null;
    const file = writeFailureReport(this.dir, err, { envStep: this.envStep, items: this.items });
    process.stderr.write(`the run failed after ${this.items} items (last logged env step ${this.envStep ?? '-'}): details in ${file}\n`);
    return file;
  }
}

/** Writes `<dir>/failure.json` for `err`; returns the file. */
export function writeFailureReport(dir: string, err: unknown, progress: { envStep: number | null; items: number }): string {
  const e = err instanceof Error ? err : new Error(String(err));
  let checkpoint: string | null = null;
  try {
    checkpoint = resolveCheckpoint(dir);
  } catch {
    // no checkpoint yet: nothing to resume from
  }
  const report: FailureReport = {
    status: 'failed',
    error: e.message,
    name: e.name,
    stack: e.stack ?? null,
    env_step: progress.envStep,
    items: progress.items,
    checkpoint,
    failed_at: new Date().toISOString(),
  };
  const file = join(dir, FAILURE_FILE);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}
