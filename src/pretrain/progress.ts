/**
 * Progress of a pretraining run: a cli-progress bar with loss, tokens/s and ETA on a terminal, or
 * one plain log line every `logEvery` steps when stderr is not a TTY or CI is set (log files, CI).
 */
import { MultiBar } from 'cli-progress';

export interface StepReport {
  step: number;
  loss: number;
  valLoss: number | null;
  lr: number;
  tokensPerSecond: number;
}

export interface Progress {
  update(r: StepReport): void;
  /** A message between updates (validation, checkpoint). */
  note(line: string): void;
  stop(): void;
}

export type ProgressMode = 'bar' | 'lines' | 'silent';

export function defaultProgressMode(): ProgressMode {
  return process.stderr.isTTY && !process.env.CI ? 'bar' : 'lines';
}

function eta(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(Math.floor(seconds % 60)).padStart(2, '0')}s`;
}

export function createProgress(mode: ProgressMode, startStep: number, totalSteps: number, logEvery: number, tokensPerStep: number): Progress {
  const fmt = (r: StepReport) => ({
    loss: r.loss.toFixed(4),
    val: r.valLoss === null ? '-' : r.valLoss.toFixed(4),
    lr: r.lr.toExponential(2),
    tps: r.tokensPerSecond.toFixed(0),
    left: eta(((totalSteps - r.step) * tokensPerStep) / r.tokensPerSecond),
  });
  if (mode === 'silent') return { update() {}, note() {}, stop() {} };
  if (mode === 'lines') {
    return {
      update(r) {
        if (r.step % logEvery !== 0 && r.step !== totalSteps) return;
        const f = fmt(r);
        process.stderr.write(`step ${r.step}/${totalSteps} loss ${f.loss} val ${f.val} lr ${f.lr} ${f.tps} tok/s ETA ${f.left}\n`);
      },
      note: (line) => process.stderr.write(`${line}\n`),
      stop() {},
    };
  }
  // A MultiBar with one bar, because only MultiBar can print lines above the bar.
  const bars = new MultiBar({
    format: 'step {value}/{total} [{bar}] loss {loss} | val {val} | lr {lr} | {tps} tok/s | ETA {left}',
    hideCursor: true,
    clearOnComplete: false,
  });
  const bar = bars.create(totalSteps, startStep, { loss: '-', val: '-', lr: '-', tps: '-', left: '?' });
  return {
    update: (r) => bar.update(r.step, fmt(r)),
    note: (line) => bars.log(`${line}\n`),
    stop: () => bars.stop(),
  };
}
