/**
 * MAGRPO_DEBUG=2: per-kernel timings. `profiled(be)` wraps every kernel of a backend with a clock
 * and a counter; at process exit a table goes to stderr: calls, total ms, share of the process's
 * wall time, and GFLOP/s for gemm. Wall time not covered by kernels is the framework's overhead
 * (JS ops, allocation, GC). MAGRPO_DEBUG=3 adds a table of gemm time by shape. Off by default:
 * the unwrapped backend is used and nothing is timed.
 *
 * MAGRPO_DEBUG_SKIP_S=<seconds> leaves out the calls that start in the first seconds after the
 * engine loads: a
 * training step's first calls page-fault fresh buffers in (AdamW's first step took 173 ms at 10m,
 * its later ones 4), which a short profile would otherwise charge to the kernels.
 *
 * Phases: named stretches of a training step (sampling's prefill and decode, the reference's
 * scoring, the update's forward, backward and optimizer) timed by wall clock and by the kernel
 * time spent inside them; the difference is JS, allocation and GC. On with MAGRPO_DEBUG=2 (a
 * table at exit, after the kernels') or `timePhases(true)` (`magrpo bench --step`). Phases do not
 * nest: one opened inside another runs untimed and its time counts in the outer one.
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
/** Milliseconds of every timed kernel call so far, skipped ones included: the phases' kernel clock. */
let kernelMs = 0;

/** MAGRPO_DEBUG_SKIP_S in ms (0 when unset); anything but a number ≥ 0 is an error naming it. */
function skipMs(): number {
  const raw = process.env.MAGRPO_DEBUG_SKIP_S;
  if (raw === undefined || raw.trim() === '') return 0;
  const s = Number(raw);
  if (!Number.isFinite(s) || s < 0) throw new Error(`MAGRPO_DEBUG_SKIP_S must be a number of seconds ≥ 0, got "${raw}"`);
  return s * 1000;
}
let countFrom = t0;

/**
 * A backend whose kernels record their time in `stats`; the first wrap registers the exit report
 * unless `report` is false (a caller that prints its own figures).
 */
export function profiled(be: Backend, report = true): Backend {
  countFrom = t0 + skipMs();
  timing = true;
  const wrapped: Record<string, unknown> = { ...be };
  for (const k of KERNELS) {
    const fn = be[k] as (...args: unknown[]) => unknown;
    const stat = stats.get(k) ?? { calls: 0, ms: 0, flops: 0 };
    stats.set(k, stat);
    wrapped[k] = (...args: unknown[]) => {
      const start = performance.now();
      const r = fn.apply(be, args);
      const ms = performance.now() - start;
      kernelMs += ms;
      if (start < countFrom) return r;
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
  if (report && !reported) {
    reported = true;
    process.on('exit', reportAll);
  }
  return Object.freeze(wrapped) as unknown as Backend;
}

function reportAll(): void {
  reportKernels();
  if (phases.size > 0) process.stderr.write(`${formatPhases(takePhases()).join('\n')}\n`);
}

function reportKernels(): void {
  if (performance.now() <= countFrom) {
    const s = ((countFrom - t0) / 1000).toFixed(1);
    process.stderr.write(`[magrpo] kernel timings (MAGRPO_DEBUG=2): the process ended within MAGRPO_DEBUG_SKIP_S (${s} s); nothing was counted\n`);
    return;
  }
  const wall = performance.now() - countFrom;
  const rows = [...stats.entries()].filter(([, s]) => s.calls > 0).sort((a, b) => b[1].ms - a[1].ms);
  const kernelMs = rows.reduce((a, [, s]) => a + s.ms, 0);
  const lines = [
    countFrom > t0
      ? `[magrpo] kernel timings (MAGRPO_DEBUG=2), wall ${wall.toFixed(0)} ms after the first ${((countFrom - t0) / 1000).toFixed(1)} s (MAGRPO_DEBUG_SKIP_S)`
      : `[magrpo] kernel timings (MAGRPO_DEBUG=2), process wall ${wall.toFixed(0)} ms`,
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

/** Wall and kernel milliseconds of one phase over its calls. */
export interface PhaseStat {
  calls: number;
  ms: number;
  kernelMs: number;
}

const phases = new Map<string, PhaseStat>();
let phasesOn = Number(process.env.MAGRPO_DEBUG ?? 0) >= 2;
let inPhase = false;

/** Turns phase timing on or off (on by default with MAGRPO_DEBUG=2). */
export function timePhases(on: boolean): void {
  phasesOn = on;
}

/** Runs `f` as phase `name`: its wall time and the kernel time inside it are added to the phase. */
export function phase<T>(name: string, f: () => T): T {
  if (!phasesOn || inPhase) return f();
  inPhase = true;
  const k0 = kernelMs;
  const start = performance.now();
  try {
    return f();
  } finally {
    const s = phases.get(name) ?? { calls: 0, ms: 0, kernelMs: 0 };
    phases.set(name, s);
    s.calls++;
    s.ms += performance.now() - start;
    s.kernelMs += kernelMs - k0;
    inPhase = false;
  }
}

/** The phases timed since the last call, in the order first seen; the counters start again. */
export function takePhases(): Map<string, PhaseStat> {
  const out = new Map([...phases].map(([k, v]) => [k, { ...v }]));
  phases.clear();
  return out;
}

/** Whether a backend has been `profiled` (kernel timing on). */
let timing = false;

/**
 * Runs `fn`, a native call outside the kernel interface (a model's fused step, reached through
 * `nativeFunction`), and counts it as kernel time under `name` when kernels are timed: the phases'
 * in-kernel and outside-kernel split then means the same whichever path ran.
 */
export function timedNative<T>(name: string, fn: () => T): T {
  if (!timing) return fn();
  const start = performance.now();
  const r = fn();
  const ms = performance.now() - start;
  kernelMs += ms;
  if (start >= countFrom) {
    const stat = stats.get(name) ?? { calls: 0, ms: 0, flops: 0 };
    stats.set(name, stat);
    stat.ms += ms;
    stat.calls++;
  }
  return r;
}

/** Kernel milliseconds so far (0 unless the backend is `profiled`). */
export function kernelClock(): number {
  return kernelMs;
}

function formatPhases(p: Map<string, PhaseStat>): string[] {
  const lines = [
    '[magrpo] phase timings (MAGRPO_DEBUG=2): wall ms, of it in kernels, and outside them (JS, allocation, GC)',
    '  phase                      calls   wall ms  kernel ms  outside ms',
  ];
  for (const [k, s] of p) {
    lines.push(
      `  ${k.padEnd(24)} ${String(s.calls).padStart(7)} ${s.ms.toFixed(0).padStart(9)} ${s.kernelMs.toFixed(0).padStart(10)} ${(s.ms - s.kernelMs).toFixed(0).padStart(11)}`,
    );
  }
  return lines;
}
