/**
 * One OpenBLAS core type, tried in a child process: which core OpenBLAS really runs (it prints
 * `Core: X` at OPENBLAS_VERBOSE=2, and `Core not found: X` when it ignores OPENBLAS_CORETYPE),
 * whether its sgemm agrees with the reference backend, and how fast it is on one thread.
 *
 * A child, because OpenBLAS reads OPENBLAS_CORETYPE once, when the library loads: a process can
 * only ever run the core it started with. The child is plain `node -e` (no TypeScript loader) and
 * only loads the addon; the parent sends it the check matrices and compares the products with
 * the reference backend itself.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { referenceBackend } from './backends/reference.js';
import { Rng } from './rng.js';

/** Path, size and modification time of a file: enough to notice an upgrade. */
export interface FileStamp {
  path: string;
  size: number;
  mtimeMs: number;
}

export interface CoreProbe {
  /** The OPENBLAS_CORETYPE the child ran with; null = unset (OpenBLAS's own choice). */
  requested: string | null;
  /** The core OpenBLAS reported it runs, or null when it printed none. */
  core: string | null;
  /** False when OpenBLAS did not take the requested name (unknown to this version, or unsupported). */
  accepted: boolean;
  /** Largest |C − C_ref| / Σ|A||B| over the check products (float32 rounding is ~1e-7·K). */
  maxError: number;
  correct: boolean;
  /**
   * sgemm n×n×n GFLOP/s on one thread per CPU-second of the child, best of the timed samples: CPU
   * time does not run while other jobs hold the core, so a busy machine distorts it far less.
   */
  gflops: number;
  /** The same per wall-clock second. */
  wallGflops: number;
  n: number;
  /** The BLAS library the child mapped (Linux), and its version when its file name says it. */
  lib: FileStamp | null;
  version: string | null;
  /** No OpenBLAS loaded in the child: the addon's builtin sgemm ran (there is no core to choose). */
  builtin?: boolean;
  /** Why the probe failed, when it did (then the other fields are empty). */
  error?: string;
}

/** Normalised error above which a product disagrees with the reference (bf16 rounding gives ~4e-3). */
export const MAX_ERROR = 1e-4;

/** [transA, transB, M, N, K]: odd sizes and K past a kernel's block, both transposes. */
const CHECKS: readonly [boolean, boolean, number, number, number][] = [
  [false, false, 67, 45, 300],
  [true, false, 33, 70, 129],
  [false, true, 96, 17, 257],
];

/** The child: reads its task as JSON on stdin, prints one JSON line. Plain CommonJS for `node -e`. */
const CHILD = `
const fs = require('fs');
const cfg = JSON.parse(fs.readFileSync(0, 'utf8'));
const addon = require(cfg.addon);
const f32 = (s) => { const b = Buffer.from(s, 'base64'); return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4); };
addon.setNumThreads(1);
const out = { checks: [], gflops: 0, wallGflops: 0, lib: null, core: null, builtin: false };
for (const c of cfg.checks) {
  const C = new Float32Array(c.M * c.N);
  addon.gemm(c.tA, c.tB, c.M, c.N, c.K, 1, f32(c.a), 0, c.tA ? c.M : c.K, f32(c.b), 0, c.tB ? c.K : c.N, 0, C, 0, c.N);
  out.checks.push(Buffer.from(C.buffer).toString('base64'));
}
const n = cfg.n;
const A = Float32Array.from({ length: n * n }, (_, i) => ((i * 7919) % 1000) / 1000 - 0.5);
const B = Float32Array.from({ length: n * n }, (_, i) => ((i * 104729) % 997) / 997 - 0.5);
const C = new Float32Array(n * n);
const gemm = () => addon.gemm(false, false, n, n, n, 1, A, 0, n, B, 0, n, 0, C, 0, n);
gemm();
let t = performance.now(); gemm();
const calls = Math.max(1, Math.round(cfg.seconds / Math.max(1e-6, (performance.now() - t) / 1000)));
let best = Infinity;
let bestWall = Infinity;
for (let r = 0; r < cfg.reps; r++) {
  t = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) gemm();
  const c = process.cpuUsage(c0);
  bestWall = Math.min(bestWall, (performance.now() - t) / 1000 / calls);
  best = Math.min(best, (c.user + c.system) / 1e6 / calls);
}
out.gflops = (2 * n * n * n) / best / 1e9;
out.wallGflops = (2 * n * n * n) / bestWall / 1e9;
if (fs.existsSync('/proc/self/maps')) {
  const libs = fs.readFileSync('/proc/self/maps', 'utf8').split('\\n').map((l) => l.trim().split(/\\s+/)[5]).filter(Boolean);
  out.lib = libs.find((p) => /libopenblas/.test(p)) || libs.find((p) => /blas/.test(p)) || null;
}
if (typeof addon.blasCoreName === 'function') out.core = addon.blasCoreName();
if (typeof addon.blas === 'function') {
  const b = addon.blas();
  out.builtin = b.kind === 'builtin';
  if (b.path) out.lib = b.path;
}
process.stdout.write(JSON.stringify(out) + '\\n');
`;

/** The core name OpenBLAS printed at OPENBLAS_VERBOSE=2, and whether it rejected the requested one. */
export function parseVerbose(stderr: string): { core: string | null; notFound: boolean } {
  const cores = [...stderr.matchAll(/^Core: (\S+)\s*$/gm)].map((m) => m[1]);
  return { core: cores.at(-1) ?? null, notFound: /^Core not found:/m.test(stderr) };
}

/** `0.3.21` from a Debian/OpenBLAS file name such as libopenblasp-r0.3.21.so. */
export function versionFromPath(path: string): string | null {
  return path.match(/openblas\w*-r(\d+\.\d+\.\d+)/)?.[1] ?? null;
}

export function stamp(path: string): FileStamp | null {
  if (!existsSync(path)) return null;
  const s = statSync(path);
  return { path, size: s.size, mtimeMs: Math.round(s.mtimeMs) };
}

export interface ProbeOptions {
  /** sgemm size of the timing (n×n×n). */
  n?: number;
  /** Seconds per timed sample, and how many samples (the best counts). */
  seconds?: number;
  reps?: number;
  /** The environment to start from (OPENBLAS_CORETYPE in it is replaced by `core`). */
  env?: NodeJS.ProcessEnv;
}

/** Runs the addon at `addonFile` in a child with OPENBLAS_CORETYPE=`core` (null: unset). */
export function probeCore(addonFile: string, core: string | null, opts: ProbeOptions = {}): CoreProbe {
  const n = opts.n ?? 512;
  const rng = new Rng(7);
  const checks = CHECKS.map(([tA, tB, M, N, K]) => ({
    tA,
    tB,
    M,
    N,
    K,
    A: Float32Array.from({ length: M * K }, () => rng.next() * 2 - 1),
    B: Float32Array.from({ length: K * N }, () => rng.next() * 2 - 1),
  }));
  const b64 = (x: Float32Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength).toString('base64');
  const task = {
    addon: addonFile,
    n,
    seconds: opts.seconds ?? 0.05,
    reps: opts.reps ?? 3,
    checks: checks.map((c) => ({ tA: c.tA, tB: c.tB, M: c.M, N: c.N, K: c.K, a: b64(c.A), b: b64(c.B) })),
  };
  const env: NodeJS.ProcessEnv = {
    ...(opts.env ?? process.env),
    OPENBLAS_VERBOSE: '2',
    MAGRPO_NUM_THREADS: '1',
    OPENBLAS_NUM_THREADS: '1',
    OMP_NUM_THREADS: '1',
  };
  delete env.OPENBLAS_CORETYPE;
  delete env.MAGRPO_SET_OPENBLAS_CORETYPE;
  if (core !== null) env.OPENBLAS_CORETYPE = core;
  env.OMP_WAIT_POLICY ??= 'passive';
  const empty: CoreProbe = {
    requested: core,
    core: null,
    accepted: false,
    maxError: Number.NaN,
    correct: false,
    gflops: 0,
    wallGflops: 0,
    n,
    lib: null,
    version: null,
  };
  const r = spawnSync(process.execPath, ['-e', CHILD], { env, input: JSON.stringify(task), encoding: 'utf8', timeout: 120_000, maxBuffer: 1 << 24 });
  if (r.status !== 0) {
    const why = r.error?.message ?? (r.stderr.trim().split('\n').slice(-3).join(' / ') || `exit ${r.status ?? r.signal}`);
    return { ...empty, error: `probe of core ${core ?? '(default)'} failed: ${why}` };
  }
  let out: { checks: string[]; gflops: number; wallGflops: number; lib: string | null; core: string | null; builtin?: boolean };
  try {
    out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '');
  } catch {
    return { ...empty, error: `probe of core ${core ?? '(default)'} printed no result` };
  }
  const verbose = parseVerbose(r.stderr);
  const reported = out.core ?? verbose.core;
  const accepted = core === null || (!verbose.notFound && reported?.toLowerCase() === core.toLowerCase());
  let maxError = 0;
  checks.forEach((c, i) => {
    const b = Buffer.from(out.checks[i], 'base64');
    const got = new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    maxError = Math.max(maxError, normalisedError(c, got));
  });
  return {
    requested: core,
    core: reported,
    accepted,
    maxError,
    correct: maxError <= MAX_ERROR,
    gflops: out.gflops,
    wallGflops: out.wallGflops,
    builtin: out.builtin === true,
    n,
    lib: out.lib === null ? null : stamp(out.lib),
    version: out.lib === null ? null : versionFromPath(out.lib),
  };
}

/** max |got − ref| / (|A||B|) in float64, so the tolerance does not depend on the values' size. */
function normalisedError(c: { tA: boolean; tB: boolean; M: number; N: number; K: number; A: Float32Array; B: Float32Array }, got: Float32Array): number {
  if (got.length !== c.M * c.N) return Number.POSITIVE_INFINITY;
  const lda = c.tA ? c.M : c.K;
  const ldb = c.tB ? c.K : c.N;
  const ref = new Float64Array(c.M * c.N);
  const scale = new Float64Array(c.M * c.N);
  const gemm = (A: Float64Array, B: Float64Array, C: Float64Array) => referenceBackend.gemm(c.tA, c.tB, c.M, c.N, c.K, 1, A, 0, lda, B, 0, ldb, 0, C, 0, c.N);
  gemm(Float64Array.from(c.A), Float64Array.from(c.B), ref);
  gemm(Float64Array.from(c.A, Math.abs), Float64Array.from(c.B, Math.abs), scale);
  let worst = 0;
  for (let i = 0; i < ref.length; i++) {
    const e = Math.abs(got[i] - ref[i]) / Math.max(scale[i], 1e-30);
    if (!(e <= worst)) worst = e; // NaN sticks
  }
  return worst;
}
