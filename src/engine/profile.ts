/**
 * MAGRPO_DEBUG=2: per-kernel timings. `profiled(be)` wraps every kernel of a backend with a clock
 * and a counter; at process exit a table goes to stderr: calls, total ms, share of the process's
 * wall time, and GFLOP/s for gemm. Wall time not covered by kernels is the framework's overhead
 * (JS ops, allocation, GC). MAGRPO_DEBUG=3 adds a table of gemm time by shape. Off by default:
 * the unwrapped backend is used and nothing is timed.
 */
import { type Backend, KERNELS } from './backend.js';

interface Stat {
  calls: number;
  ms: number;
  flops: number;
}

const stats = new Map<string, Stat>();
/** MAGRPO_DEBUG=3: gemm and gemmPair time by shape ("N" / "T" per operand, M×N×K). */
const shapes = new Map<string, Stat>();
const byShape = Number(process.env.MAGRPO_DEBUG ?? 0) >= 3;

/** Floating-point operations of a matrix-product kernel call (0 for other kernels). */
function flopsOf(k: string, args: unknown[]): number {
  const n = (i: number) => args[i] as number;
  if (k === 'gemm') return 2 * n(2) * n(3) * n(4);
  if (k === 'gemmPair') return 2 * (n(2) * n(3) * n(4) + n(18) * n(19) * n(20));
  if (k === 'gemmPrepacked') return 2 * n(0) * n(1) * n(2);
  return 0;
}

/** "NT 1024×384×128" for gemm arguments starting at `i` (transA, transB, M, N, K, ...). */
function shapeOf(args: unknown[], i: number): string {
  return `${args[i] ? 'T' : 'N'}${args[i + 1] ? 'T' : 'N'} ${args[i + 2]}×${args[i + 3]}×${args[i + 4]}`;
}

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
      const ms = performance.now() - start;
      stat.ms += ms;
      stat.calls++;
      const flops = flopsOf(k, args);
      stat.flops += flops;
      if (byShape && (k === 'gemm' || k === 'gemmPair')) {
        const key = k === 'gemm' ? shapeOf(args, 0) : `${shapeOf(args, 0)} + ${shapeOf(args, 16)}`;
        const sh = shapes.get(key) ?? { calls: 0, ms: 0, flops: 0 };
        shapes.set(key, sh);
        sh.calls++;
        sh.ms += ms;
        sh.flops += flops;
      }
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
  if (shapes.size > 0) {
    lines.push('  gemm shapes (op(A) op(B) M×N×K)                 calls        ms  GFLOP/s');
    for (const [key, s] of [...shapes.entries()].sort((a, b) => b[1].ms - a[1].ms)) {
      lines.push(`  ${key.padEnd(46)} ${String(s.calls).padStart(6)} ${s.ms.toFixed(1).padStart(9)}  ${(s.flops / s.ms / 1e6).toFixed(1).padStart(7)}`);
    }
  }
  process.stderr.write(`${lines.join('\n')}\n`);
}
