/**
 * Progress for long CLI work (training, evaluation, builds): a cli-progress bar with ETA on an
 * interactive terminal, plain periodic log lines otherwise (--quiet, CI=true, or output piped),
 * so logs in CI and files stay readable. Both go to stderr: stdout is for results.
 */
import cliProgress from 'cli-progress';

export interface Progress {
  /** Sets the position and the short status text shown after the bar (e.g. "reward 0.41"). */
  update(value: number, status?: string): void;
  /** Prints a line without breaking the bar. */
  log(line: string): void;
  stop(): void;
}

/** Quiet (log lines, no bars) when asked, on CI, or when stdout or stderr is not a terminal. */
export function isQuiet(flag = false): boolean {
  return flag || process.env.CI === 'true' || !process.stdout.isTTY || !process.stderr.isTTY;
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * A progress display for `total` units of work labelled `label`. Quiet mode prints a line at
 * every tenth of the work and at least every `intervalSeconds`.
 */
export function startProgress(label: string, total: number, opts: { quiet: boolean; start?: number; intervalSeconds?: number }): Progress {
  return opts.quiet ? new LogLines(label, total, opts.start ?? 0, opts.intervalSeconds ?? 30) : new Bar(label, total, opts.start ?? 0);
}

class Bar implements Progress {
  // A MultiBar of one: its log() prints above the bar without garbling the redraw.
  private readonly multi: cliProgress.MultiBar;
  private readonly bar: cliProgress.SingleBar;

  constructor(label: string, total: number, start: number) {
    this.multi = new cliProgress.MultiBar(
      {
        format: `${label.padEnd(5)} |{bar}| {value}/{total} | {duration_formatted} < ETA {eta_formatted} | {status}`,
        stream: process.stderr,
        hideCursor: true,
        etaBuffer: 20,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    this.bar = this.multi.create(total, start, { status: '' });
  }

  update(value: number, status = ''): void {
    this.bar.update(value, { status });
  }

  log(line: string): void {
    this.multi.log(`${line}\n`);
  }

  stop(): void {
    this.multi.update(); // flush lines logged since the last redraw
    this.multi.stop();
  }
}

class LogLines implements Progress {
  private readonly t0 = performance.now();
  private lastPrint = performance.now();
  private lastTenth: number;

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly start: number,
    private readonly intervalSeconds: number,
  ) {
    this.lastTenth = Math.floor((10 * start) / Math.max(1, total));
    process.stderr.write(`[${label}] ${start}/${total}\n`);
  }

  update(value: number, status = ''): void {
    const tenth = Math.floor((10 * value) / Math.max(1, this.total));
    const now = performance.now();
    if (tenth === this.lastTenth && now - this.lastPrint < this.intervalSeconds * 1000 && value < this.total) return;
    this.lastTenth = tenth;
    this.lastPrint = now;
    const elapsed = (now - this.t0) / 1000;
    const done = value - this.start;
    const eta = done > 0 ? (elapsed / done) * (this.total - value) : Number.NaN;
    const pct = ((100 * value) / Math.max(1, this.total)).toFixed(0);
    process.stderr.write(
      `[${this.label}] ${value}/${this.total} (${pct}%) ${formatDuration(elapsed)} elapsed, ETA ${formatDuration(eta)}${status ? ` | ${status}` : ''}\n`,
    );
  }

  log(line: string): void {
    process.stderr.write(`${line}\n`);
  }

  stop(): void {}
}
