/**
 * `magrpo doctor`: what the engine runs on here and whether matrix products run as fast as this
 * machine allows. A report object (so the bench can embed it and others can add lines) and a
 * printer. The per-core FP32 ceiling is measured, not derived from a nominal clock: the best
 * one-thread sgemm over every OpenBLAS core type that suits the CPU, each run in a child process
 * (OpenBLAS fixes its core at load).
 */
import { availableParallelism, loadavg } from 'node:os';
import type { Backend } from './backend.js';
import { loadNativeBackend, type NativeBf16Kernel, nativeAddonFile, nativeBf16Kernel, nativeBlas, nativeFmaPeak, nativeIsa } from './backends/native.js';

/** The addon's name of its bf16 kernel, as the report spells it. */
const BF16_LABEL: Record<NativeBf16Kernel, 'amx' | 'avx512-bf16' | 'emulated'> = { amx: 'amx', avx512bf16: 'avx512-bf16', emulated: 'emulated' };

import { blasCoreSelection, type CoreSelection, coretypeSetter, defaultCacheFile, gemmDescription, rankedCores } from './blas-core.js';
import { type CoreProbe, probeCore } from './blas-probe.js';
import { type CpuInfo, cpuInfo, isaSummary } from './cpu.js';
import { Rng } from './rng.js';

/** Below this fraction of the best core's sgemm, the doctor warns and says how to fix it. */
export const SLOW_FRACTION = 0.7;
const SGEMM_N = 1024;

export interface SgemmRate {
  shape: string;
  threads: number;
  gflops: number;
}

/** One OpenBLAS core type tried in a child (1 thread, SGEMM_N³). */
export interface CoreRow {
  core: string;
  accepted: boolean;
  correct: boolean;
  gflops: number;
  inUse: boolean;
  openblasDefault: boolean;
  /** OpenBLAS picks this core by itself but ignores its name in OPENBLAS_CORETYPE. */
  onlyByItself?: boolean;
  error?: string;
}

export interface DoctorReport {
  backend: {
    selected: string;
    native: 'ok' | string;
    addon: string;
    threads: number;
    /** The compiled variant of magrpo's own C kernels in use, and every variant this CPU runs. */
    kernels: { isa: string; supported: string[] } | null;
    /** What runs sgemm: `openblas <core> via <file>` or `builtin <isa> (<why>)` (MAGRPO_BLAS). */
    gemm: string | null;
    /** How `precision: bf16` products run here: on AMX tiles, on VDPBF16PS, or emulated at fp32 speed. */
    bf16: 'amx' | 'avx512-bf16' | 'emulated' | null;
  };
  cpu: { model: string; vendor: string; family: number | null; modelNumber: number | null; arch: string; logicalCpus: number; isa: string };
  blas: {
    library: string | null;
    version: string | null;
    /** The core OpenBLAS runs in this process (as reported by a child with the same environment). */
    core: string | null;
    /** OPENBLAS_CORETYPE as seen at load, and who set it. */
    coretype: string | null;
    coretypeSetBy: 'user' | 'magrpo' | 'none';
    /** What the automatic choice did (blas-core.ts), in one sentence. */
    selection: string;
  };
  threads: { backend: number; logicalCpus: number; env: Record<string, string> };
  /** Load average (1, 5, 15 min) when measured: other jobs lower every wall-clock figure. */
  loadAverage: number[];
  /** sgemm in this process: one thread and all threads. */
  sgemm: SgemmRate[];
  /** Every candidate core (children), best first. */
  cores: CoreRow[];
  /**
   * One core's FP32 peak, measured by an FMA-throughput loop in the widest vectors it runs (not
   * from the nominal clock, which turbo and AVX-512 offsets make wrong both ways).
   */
  fmaPeak: { gflops: number; isa: string } | null;
  /** Measured per-core FP32 ceiling: the best one-thread sgemm over `cores`. */
  peakPerCore: { gflops: number; core: string | null; method: string };
  /** sgemm of the core in use as a fraction of the best core (one thread, same harness). */
  fractionOfBest: number | null;
  warnings: string[];
  /** Further `label: value` lines other parts of magrpo add (printed last, in order). */
  extra: { label: string; value: string }[];
}

/** Best-of-`reps` GFLOP/s of an M×K×N sgemm on `threads` threads, each sample ~`seconds` long. */
export function measureSgemm(be: Backend, M: number, K: number, N: number, threads: number, reps = 3, seconds = 0.2): SgemmRate {
  const before = be.getNumThreads();
  be.setNumThreads(threads);
  const rng = new Rng(1);
  const A = Float32Array.from({ length: M * K }, () => rng.next() - 0.5);
  const B = Float32Array.from({ length: K * N }, () => rng.next() - 0.5);
  const C = new Float32Array(M * N);
  const gemm = () => be.gemm(false, false, M, N, K, 1, A, 0, K, B, 0, N, 0, C, 0, N);
  gemm();
  let t = performance.now();
  gemm();
  const calls = Math.max(1, Math.round(seconds / Math.max(1e-6, (performance.now() - t) / 1000)));
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < reps; r++) {
    t = performance.now();
    for (let i = 0; i < calls; i++) gemm();
    best = Math.min(best, (performance.now() - t) / 1000 / calls);
  }
  be.setNumThreads(before);
  return { shape: `${M}x${K}x${N}`, threads, gflops: (2 * M * N * K) / best / 1e9 };
}

export interface DoctorOptions {
  /** Threads of the "all threads" sgemm (default: the backend's). */
  threads?: number;
  /** Skip trying the other core types (faster; no ceiling, no warning). */
  skipCores?: boolean;
}

/** Loads the native backend (choosing the OpenBLAS core as usual) and measures. */
export function collectDoctor(opts: DoctorOptions = {}): DoctorReport {
  const env = process.env;
  const cpu: CpuInfo = cpuInfo();
  const addon = nativeAddonFile();
  const warnings: string[] = [];
  let be: Backend | null = null;
  let native: 'ok' | string = 'ok';
  try {
    be = loadNativeBackend();
  } catch (err) {
    native = (err as Error).message.split('\n')[0];
    warnings.push(`the native backend cannot load: ${native}`);
  }
  const sel: CoreSelection | null = blasCoreSelection();
  const threads = opts.threads ?? be?.getNumThreads() ?? 1;
  const report: DoctorReport = {
    backend: {
      selected: env.MAGRPO_BACKEND ?? 'native',
      native,
      addon,
      threads: be?.getNumThreads() ?? 0,
      kernels: be === null ? null : nativeIsa(),
      gemm: null,
      bf16: be === null ? null : BF16_LABEL[nativeBf16Kernel()],
    },
    cpu: {
      model: cpu.modelName,
      vendor: cpu.vendor,
      family: cpu.family,
      modelNumber: cpu.model,
      arch: cpu.arch,
      logicalCpus: cpu.logicalCpus,
      isa: isaSummary(cpu),
    },
    blas: {
      library: null,
      version: null,
      core: null,
      coretype: env.OPENBLAS_CORETYPE ?? null,
      coretypeSetBy: coretypeSetter(env),
      selection: selectionText(sel),
    },
    threads: {
      backend: be?.getNumThreads() ?? 0,
      logicalCpus: availableParallelism(),
      env: Object.fromEntries(
        ['MAGRPO_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'OMP_WAIT_POLICY'].flatMap((k) => (env[k] === undefined ? [] : [[k, env[k]]])),
      ),
    },
    loadAverage: loadavg(),
    sgemm: [],
    cores: [],
    fmaPeak: null,
    peakPerCore: { gflops: 0, core: null, method: 'not measured' },
    fractionOfBest: null,
    warnings,
    extra: [],
  };
  if (be === null) return report;
  const blas = nativeBlas();
  const isas = nativeIsa().supported;
  report.fmaPeak = { gflops: nativeFmaPeak(), isa: isas[isas.length - 1] };
  report.backend.gemm = gemmDescription(blas, nativeIsa().isa);
  if (blas.kind === 'builtin') {
    // No OpenBLAS: no core to check; the builtin sgemm's own speed is what there is.
    report.blas.selection = blas.reason;
    report.sgemm.push(measureSgemm(be, SGEMM_N, SGEMM_N, SGEMM_N, 1));
    if (threads > 1) report.sgemm.push(measureSgemm(be, SGEMM_N, SGEMM_N, SGEMM_N, threads));
    return report;
  }
  for (const w of sel?.entry?.choice.warnings ?? []) warnings.push(`OpenBLAS core check: ${w}`);

  // The core in use, as a child with this process's OPENBLAS_CORETYPE reports it.
  const current = probeCore(addon, env.OPENBLAS_CORETYPE ?? null, { n: SGEMM_N, seconds: 0.15 });
  report.blas.core = current.core;
  report.blas.library = current.lib?.path ?? null;
  report.blas.version = current.version;
  if (current.error) warnings.push(current.error);
  else if (!current.correct) warnings.push(`sgemm of core ${current.core} disagrees with the reference backend (error ${current.maxError.toExponential(1)})`);
  if (env.OPENBLAS_CORETYPE !== undefined && !current.accepted) {
    warnings.push(
      `OpenBLAS ${current.version ?? ''} does not accept OPENBLAS_CORETYPE=${env.OPENBLAS_CORETYPE}; it runs ${current.core ?? 'its own choice'} instead`,
    );
  }

  report.sgemm.push(measureSgemm(be, SGEMM_N, SGEMM_N, SGEMM_N, 1));
  if (threads > 1) report.sgemm.push(measureSgemm(be, SGEMM_N, SGEMM_N, SGEMM_N, threads));
  if (opts.skipCores) return report;

  const probes = new Map<string, CoreProbe>([[key(env.OPENBLAS_CORETYPE ?? null), current]]);
  const ownKey = key(null);
  if (!probes.has(ownKey)) probes.set(ownKey, probeCore(addon, null, { n: SGEMM_N, seconds: 0.15 }));
  const openblasDefault = probes.get(ownKey)?.core ?? null;
  for (const c of rankedCores(cpu)) if (!probes.has(key(c))) probes.set(key(c), probeCore(addon, c, { n: SGEMM_N, seconds: 0.15 }));
  const rows: CoreRow[] = [];
  for (const [k, p] of probes) {
    // A name OpenBLAS ignored runs another core: that core's own row tells its speed.
    if (p.requested !== null && !p.accepted && k !== key(env.OPENBLAS_CORETYPE ?? null)) {
      rows.push({ core: p.requested, accepted: false, correct: p.correct, gflops: 0, inUse: false, openblasDefault: false, error: p.error });
      continue;
    }
    const name = p.core ?? p.requested ?? '?';
    const twin = rows.find((r) => r.accepted && r.core.toLowerCase() === name.toLowerCase());
    if (twin) {
      twin.gflops = Math.max(twin.gflops, p.error ? 0 : p.gflops); // the same kernels reached twice
      continue;
    }
    rows.push({ core: name, accepted: true, correct: p.correct, gflops: p.error ? 0 : p.gflops, inUse: false, openblasDefault: false, error: p.error });
  }
  // A core OpenBLAS runs by itself but whose name it refuses is one row, not two.
  for (const r of rows.filter((x) => !x.accepted)) {
    const twin = rows.find((x) => x.accepted && x.core.toLowerCase() === r.core.toLowerCase());
    if (twin) {
      twin.onlyByItself = true;
      rows.splice(rows.indexOf(r), 1);
    }
  }
  for (const r of rows) {
    r.inUse = r.accepted && r.core.toLowerCase() === (current.core ?? '').toLowerCase();
    r.openblasDefault = r.accepted && r.core.toLowerCase() === (openblasDefault ?? '').toLowerCase();
  }
  report.cores = rows;
  const first = assessCores(report);
  const inUse = rows.find((r) => r.inUse);
  const best = rows.find((r) => r.core === first.peakPerCore.core && r.accepted);
  if (first.fractionOfBest !== null && first.fractionOfBest < SLOW_FRACTION && inUse && best) {
    // Other jobs on the machine must not raise a false alarm: time the two again, alternating.
    for (let i = 0; i < 2; i++) {
      for (const [row, requested] of [
        [inUse, env.OPENBLAS_CORETYPE ?? null],
        [best, best.core],
      ] as const) {
        const p = probeCore(addon, requested, { n: SGEMM_N, seconds: 0.15 });
        if (!p.error && p.correct) row.gflops = Math.max(row.gflops, p.gflops);
      }
    }
  }
  Object.assign(report, assessCores(report));
  return report;
}

const key = (core: string | null) => (core ?? '(default)').toLowerCase();

/**
 * Sorts `r.cores` (fastest first) and derives the ceiling, the in-use core's fraction of it and,
 * below SLOW_FRACTION, a warning that says how to fix it.
 */
export function assessCores(r: DoctorReport): Pick<DoctorReport, 'cores' | 'peakPerCore' | 'fractionOfBest' | 'warnings'> {
  const cores = [...r.cores].sort((a, b) => b.gflops - a.gflops);
  const warnings = [...r.warnings];
  const best = cores.find((c) => c.accepted && c.correct && c.gflops > 0);
  if (best === undefined) return { cores, peakPerCore: r.peakPerCore, fractionOfBest: null, warnings };
  const peakPerCore = {
    gflops: best.gflops,
    core: best.core,
    method: `best 1-thread sgemm ${SGEMM_N}³ over ${cores.filter((c) => c.accepted).length} OpenBLAS core types`,
  };
  const inUse = cores.find((c) => c.inUse);
  const fractionOfBest = inUse ? inUse.gflops / best.gflops : null;
  if (fractionOfBest !== null && fractionOfBest < SLOW_FRACTION) {
    const head = `matmul runs at ${(fractionOfBest * 100).toFixed(0)}% of what core ${best.core} gives here (core in use: ${r.blas.core ?? '?'}).`;
    warnings.push(
      r.blas.coretypeSetBy === 'user'
        ? `${head} Fix: OPENBLAS_CORETYPE=${r.blas.coretype} is set in your environment; unset it (magrpo then picks the core)${best.onlyByItself ? '' : ` or set OPENBLAS_CORETYPE=${best.core}`}.`
        : `${head} Fix: set OPENBLAS_CORETYPE=${best.core} before starting magrpo, or delete ${defaultCacheFile()} so magrpo checks the cores again.`,
    );
  }
  return { cores, peakPerCore, fractionOfBest, warnings };
}

function selectionText(sel: CoreSelection | null): string {
  if (sel === null) return 'not made (the native backend did not load)';
  const cached = sel.fromCache ? ' (cached check)' : '';
  switch (sel.source) {
    case 'user':
      return `OPENBLAS_CORETYPE=${sel.coretype} set by the user; magrpo leaves it alone`;
    case 'auto':
      return `magrpo set OPENBLAS_CORETYPE=${sel.coretype}: ${sel.entry?.choice.reason ?? 'chosen by a parent magrpo process'}${cached}`;
    case 'default':
      return `${sel.entry?.choice.reason ?? "OpenBLAS's own choice"}${cached}`;
    case 'disabled':
      return 'automatic choice off (MAGRPO_BLAS_PROBE=0)';
    case 'worker':
      return 'chosen by the main thread';
    case 'builtin':
      return 'none: MAGRPO_BLAS=builtin (no OpenBLAS is loaded)';
  }
}

/** The report as aligned `label: value` lines, then the core table and warnings. */
export function formatDoctor(r: DoctorReport): string[] {
  const f0 = (x: number) => x.toFixed(0);
  const lines: [string, string][] = [
    ['backend', `${r.backend.selected} (native addon: ${r.backend.native === 'ok' ? r.backend.addon : r.backend.native})`],
    [
      'CPU',
      `${r.cpu.model} (${r.cpu.vendor}${r.cpu.family !== null ? ` family ${r.cpu.family} model ${r.cpu.modelNumber}` : ''}), ${r.cpu.logicalCpus} logical CPUs`,
    ],
    ['ISA', r.cpu.isa],
    ...(r.backend.gemm ? [['gemm', r.backend.gemm] as [string, string]] : []),
    ...(r.backend.kernels
      ? [
          ['C kernels', `${r.backend.kernels.isa} variant (this CPU runs: ${r.backend.kernels.supported.join(', ')})`] as [string, string],
          [
            'bf16 products',
            r.backend.bf16 === 'amx'
              ? 'AMX tiles (TDPBF16PS), for precision: bf16'
              : r.backend.bf16 === 'avx512-bf16'
                ? 'VDPBF16PS (AVX-512 BF16), for precision: bf16'
                : 'emulated at fp32 speed (no AVX-512 BF16 here), for precision: bf16',
          ] as [string, string],
        ]
      : []),
    ['BLAS', `${r.blas.library ?? 'unknown library'}${r.blas.version ? ` (OpenBLAS ${r.blas.version})` : ''}`],
    [
      'BLAS core',
      `${r.blas.core ?? 'unknown'}; OPENBLAS_CORETYPE ${r.blas.coretype === null ? 'unset' : `=${r.blas.coretype} (set by ${r.blas.coretypeSetBy === 'user' ? 'you' : 'magrpo'})`}`,
    ],
    ['core choice', r.blas.selection],
    [
      'threads',
      `${r.threads.backend} of ${r.threads.logicalCpus}${
        Object.keys(r.threads.env).length
          ? ` (${Object.entries(r.threads.env)
              .map(([k, v]) => `${k}=${v}`)
              .join(' ')})`
          : ''
      }`,
    ],
  ];
  const busy = r.loadAverage[0] > 0.75 * r.cpu.logicalCpus;
  lines.push([
    'load',
    `${r.loadAverage.map((x) => x.toFixed(2)).join(' / ')} (1/5/15 min) on ${r.cpu.logicalCpus} CPUs${busy ? ': busy, so wall-clock figures are below what this machine gives (core speeds are per CPU-second)' : ''}`,
  ]);
  for (const s of r.sgemm) {
    const ceiling = r.peakPerCore.gflops * s.threads;
    const peak = (r.fmaPeak?.gflops ?? 0) * s.threads;
    const shares = [
      peak > 0 ? `${f0((100 * s.gflops) / peak)}% of ${s.threads} × FMA peak` : '',
      ceiling > 0 ? `${f0((100 * s.gflops) / ceiling)}% of ${s.threads} × sgemm ceiling` : '',
    ].filter(Boolean);
    lines.push([`sgemm ${s.threads} thr`, `${s.gflops.toFixed(1)} GFLOP/s wall clock (${s.shape})${shares.length ? `, ${shares.join(', ')}` : ''}`]);
  }
  if (r.fmaPeak) lines.push(['FP32 peak', `${r.fmaPeak.gflops.toFixed(1)} GFLOP/s per core (measured: FMA loop in ${r.fmaPeak.isa} vectors, one thread)`]);
  if (r.peakPerCore.gflops > 0)
    lines.push(['sgemm ceiling', `${r.peakPerCore.gflops.toFixed(1)} GFLOP/s per core (${r.peakPerCore.core}: ${r.peakPerCore.method})`]);
  for (const e of r.extra) lines.push([e.label, e.value]);
  const width = Math.max(...lines.map(([l]) => l.length));
  const out = lines.map(([l, v]) => `${`${l}:`.padEnd(width + 1)} ${v}`);
  if (r.cores.length > 0) {
    out.push('', 'OpenBLAS core types here (1 thread, sgemm 1024³ per CPU-second, each in a child process):');
    for (const c of r.cores) {
      const tags = [
        c.inUse ? 'in use' : '',
        c.openblasDefault ? "OpenBLAS's own choice" : '',
        c.onlyByItself ? 'not accepted as OPENBLAS_CORETYPE by this OpenBLAS' : '',
        !c.accepted ? 'name not accepted by this OpenBLAS' : '',
        c.accepted && !c.correct ? 'WRONG RESULTS' : '',
        c.error ?? '',
      ]
        .filter(Boolean)
        .join(', ');
      out.push(`  ${c.core.padEnd(12)} ${c.accepted ? `${c.gflops.toFixed(1).padStart(7)} GFLOP/s` : '        -        '}${tags ? `  ${tags}` : ''}`);
    }
  }
  for (const w of r.warnings) out.push(`warning: ${w}`);
  return out;
}
