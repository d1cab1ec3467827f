/**
 * MAGRPO_DEBUG=2: per-kernel timings. `profiled(be)` wraps every kernel of a backend with a clock
 * and a counter; at process exit a table goes to stderr: calls, total ms, share of the process's
 * wall time, and GFLOP/s for gemm. Wall time not covered by kernels is the framework's overhead
 * (JS ops, allocation, GC). Off by default: the unwrapped backend is used and nothing is timed.
 */
import { type Backend, KERNELS } from './backend.js';

interface Stat {
  calls: number;
  ms: number;
  flops: number;
}

const stats = new Map<string, Stat>();
const t0 = performance.now();
let reported = false;

/** A backend whose kernels record their time in `stats`; the first wrap registers the exit report. */
export function profiled(be: Backend): Backend {
  const wrapped: Record<string, unknown> = { ...be };
  for (const k of KERNELS) {
    const fn = be[k] as (...args: unknown[]) => unknown;
    const stat = stats.get(k) ?? { calls: 0, ms: 0, flops: 0 };
    stats.set(k, stat);
    wrapped[k] = (...args: unknown[]) => {
      const start = performance.now();
      const r = fn.apply(be, args);
      stat.ms += performance.now() - start;
      stat.calls++;
      if (k === 'gemm') stat.flops += 2 * (args[2] as number) * (args[3] as number) * (args[4] as number);
      if (k === 'gemmPair')
        stat.flops +=
          2 * ((args[2] as number) * (args[3] as number) * (args[4] as number) + (args[18] as number) * (args[19] as number) * (args[20] as number));
      if (k === 'gemmPrepacked') stat.flops += 2 * (args[0] as number) * (args[1] as number) * (args[2] as number);
      return r;
    };
  }
  if (!reported) {
    reported = true;
    process.on('exit', report);
  }
  return Object.freeze(wrapped) as unknown as Backend;
}

function report(): void {
  const wall = performance.now() - t0;
  const rows = [...stats.entries()].filter(([, s]) => s.calls > 0).sort((a, b) => b[1].ms - a[1].ms);
  const kernelMs = rows.reduce((a, [, s]) => a + s.ms, 0);
  const lines = [
    `[magrpo] kernel timings (MAGRPO_DEBUG=2), process wall ${wall.toFixed(0)} ms`,
    '  kernel                        calls        ms   % wall  GFLOP/s',
  ];
  for (const [k, s] of rows) {
    const gflops = s.flops > 0 ? (s.flops / s.ms / 1e6).toFixed(1) : '';
    lines.push(
      `  ${k.padEnd(26)} ${String(s.calls).padStart(8)} ${s.ms.toFixed(1).padStart(9)} ${((100 * s.ms) / wall).toFixed(1).padStart(7)}%  ${gflops.padStart(7)}`,
    );
  }
  lines.push(`  ${'(all kernels)'.padEnd(26)} ${''.padStart(8)} ${kernelMs.toFixed(1).padStart(9)} ${((100 * kernelMs) / wall).toFixed(1).padStart(7)}%`);
  process.stderr.write(`${lines.join('\n')}\n`);
}
