/**
 * The right OpenBLAS kernels for this CPU, chosen before OpenBLAS loads.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's, for one) picks its kernels ("core type") from the CPU id when
 * it loads; on CPUs newer than the library it can fall back to generic kernels 3-4x slower (Debian's
 * 0.3.21 on Sapphire Rapids: `Prescott`). OPENBLAS_CORETYPE overrides the choice, and OpenBLAS reads
 * it only at load. So, once per machine and library, child processes (blas-probe.ts) report which
 * core OpenBLAS picks by itself and, when that is below what the CPU's ISA allows, try the better
 * cores: each must be accepted by this OpenBLAS, agree with the reference backend and be faster.
 * The answer is cached (keyed by CPU, flags, addon and BLAS library), so later starts cost a stat.
 *
 * A user's own OPENBLAS_CORETYPE always wins: it is never changed or removed.
 *
 * The addon links no BLAS: it dlopens an OpenBLAS when one is installed and otherwise runs its own
 * sgemm (native/blas.c, MAGRPO_BLAS). With no OpenBLAS there is no core to choose: the probe of
 * the default says so once (cached) and no candidate is tried; MAGRPO_BLAS=builtin skips it.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { type CoreProbe, type FileStamp, probeCore, stamp } from './blas-probe.js';
import { type CpuInfo, cpuInfo, hasAvx512 } from './cpu.js';

/** Set next to OPENBLAS_CORETYPE when magrpo chose it, so child processes can tell it from a user's. */
export const AUTO_MARKER = 'MAGRPO_SET_OPENBLAS_CORETYPE';
/** A candidate must beat OpenBLAS's own choice by this factor: timing noise must not flip cores. */
const MIN_SPEEDUP = 1.1;
const CACHE_VERSION = 1;
const MAX_ENTRIES = 16;

/**
 * OpenBLAS core types that suit this ISA, best first (names as OpenBLAS's dynamic.c spells them).
 * OpenBLAS's own choice is kept unless it is missing from this list or ranked below a faster one.
 */
export function rankedCores(cpu: CpuInfo): string[] {
  const { isa } = cpu;
  if (cpu.arch === 'arm64') {
    if (isa.sve2) return ['neoversen2', 'neoversev1', 'neoversen1', 'armv8'];
    if (isa.sve) return ['neoversev1', 'neoversen2', 'neoversen1', 'armv8'];
    return isa.asimd ? ['neoversen1', 'cortexa72', 'armv8'] : ['armv8'];
  }
  if (cpu.arch !== 'x64') return [];
  const amd = cpu.vendor === 'AuthenticAMD' || cpu.vendor === 'HygonGenuine';
  const out: string[] = [];
  if (hasAvx512(isa) && isa.avx512bf16) out.push('Cooperlake');
  if (hasAvx512(isa)) out.push('SkylakeX');
  if (isa.avx2 && isa.fma) out.push(...(amd ? ['Zen', 'Haswell'] : ['Haswell', 'Zen']));
  if (cpu.flags.includes('avx')) out.push('Sandybridge');
  return out;
}

const same = (a: string | null | undefined, b: string | null | undefined) => a != null && b != null && a.toLowerCase() === b.toLowerCase();

/** The candidates worth trying: those ranked above OpenBLAS's own choice (all, if it is unranked). */
export function coresToTry(cpu: CpuInfo, defaultCore: string | null): string[] {
  const ranked = rankedCores(cpu);
  const at = ranked.findIndex((c) => same(c, defaultCore));
  return at < 0 ? ranked : ranked.slice(0, at);
}

export interface CoreChoice {
  /** The OPENBLAS_CORETYPE to set, or null to leave OpenBLAS's own choice. */
  core: string | null;
  /** Why, in one sentence (for `magrpo doctor`). */
  reason: string;
  /** Things the user should know (printed once, when the probe runs). */
  warnings: string[];
}

/** Picks the fastest usable candidate when it beats OpenBLAS's own choice by MIN_SPEEDUP. */
export function chooseCore(defaultProbe: CoreProbe, candidates: readonly CoreProbe[]): CoreChoice {
  const warnings: string[] = [];
  if (defaultProbe.error) warnings.push(defaultProbe.error);
  else if (!defaultProbe.correct)
    warnings.push(`OpenBLAS's own core ${defaultProbe.core ?? '?'} disagrees with the reference backend (error ${defaultProbe.maxError.toExponential(1)})`);
  const usable: CoreProbe[] = [];
  for (const p of candidates) {
    if (p.error) warnings.push(p.error);
    // A name this OpenBLAS does not know is no fault: it just cannot be chosen.
    else if (!p.accepted) continue;
    else if (!p.correct)
      warnings.push(`OpenBLAS core ${p.requested} disagrees with the reference backend (error ${p.maxError.toExponential(1)}); not using it`);
    else usable.push(p);
  }
  const own = defaultProbe.core ?? 'its default';
  if (usable.length === 0) {
    const tried = candidates.map((p) => p.requested).join(', ');
    return {
      core: null,
      reason: tried
        ? `kept OpenBLAS's own core ${own}: no usable faster core among ${tried}`
        : `OpenBLAS picks ${own}, the first-ranked core for this CPU's ISA`,
      warnings,
    };
  }
  const best = usable.reduce((a, b) => (b.gflops > a.gflops ? b : a));
  const baseline = defaultProbe.correct && !defaultProbe.error ? defaultProbe.gflops : 0;
  if (best.gflops < MIN_SPEEDUP * baseline) {
    return {
      core: null,
      reason: `kept OpenBLAS's own core ${own} (${baseline.toFixed(0)} GFLOP/s); ${best.requested} ran ${best.gflops.toFixed(0)}`,
      warnings,
    };
  }
  return {
    core: best.requested,
    reason: `OpenBLAS picks ${own} here (${baseline.toFixed(0)} GFLOP/s on one core); ${best.requested} runs ${best.gflops.toFixed(0)}`,
    warnings,
  };
}

/** What was decided for this process. */
export interface CoreSelection {
  /**
   * `user`: OPENBLAS_CORETYPE was set by the user (left alone); `auto`: magrpo set it (here or in a
   * parent process); `default`: OpenBLAS's own choice is best; `disabled`: MAGRPO_BLAS_PROBE=0;
   * `worker`: a worker thread (the library is already loaded by the main thread); `builtin`:
   * MAGRPO_BLAS=builtin (no OpenBLAS is loaded).
   */
  source: 'user' | 'auto' | 'default' | 'disabled' | 'worker' | 'builtin';
  /** OPENBLAS_CORETYPE as the library will see it (undefined: unset). */
  coretype: string | undefined;
  /** The probe results behind the choice, when the probe ran (now or from the cache). */
  entry: CacheEntry | null;
  fromCache: boolean;
}

export interface CacheEntry {
  key: string;
  lib: FileStamp | null;
  version: string | null;
  defaultProbe: CoreProbe;
  candidates: CoreProbe[];
  choice: CoreChoice;
  probedAt: string;
}

interface CacheFile {
  version: number;
  entries: CacheEntry[];
}

/** $XDG_CACHE_HOME/magrpo/blas-core.json, else ~/.cache/magrpo/blas-core.json. */
export function defaultCacheFile(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'magrpo', 'blas-core.json');
}

/** Everything that changes the answer except the BLAS library itself (checked by its stamp). */
export function cacheKey(cpu: CpuInfo, addon: FileStamp | null, env: NodeJS.ProcessEnv): string {
  const what = {
    v: CACHE_VERSION,
    arch: cpu.arch,
    vendor: cpu.vendor,
    family: cpu.family,
    model: cpu.model,
    name: cpu.modelName,
    flags: cpu.flags,
    addon,
    ld: [env.LD_LIBRARY_PATH ?? '', env.LD_PRELOAD ?? '', env.DYLD_LIBRARY_PATH ?? ''],
    blas: env.MAGRPO_BLAS ?? '',
  };
  return createHash('sha256').update(JSON.stringify(what)).digest('hex').slice(0, 32);
}

/** A cached entry still holds when the key matches and the library it probed is unchanged. */
export function lookup(file: string, key: string): CacheEntry | null {
  let data: CacheFile;
  try {
    data = JSON.parse(readFileSync(file, 'utf8')) as CacheFile;
  } catch {
    return null; // absent or unreadable: probe again
  }
  if (data.version !== CACHE_VERSION || !Array.isArray(data.entries)) return null;
  const e = data.entries.find((x) => x.key === key);
  if (e === undefined) return null;
  if (e.lib !== null) {
    const now = stamp(e.lib.path);
    if (now === null || now.size !== e.lib.size || now.mtimeMs !== e.lib.mtimeMs) return null;
  }
  return e;
}

/** Adds or replaces `entry`, keeping the newest MAX_ENTRIES; written atomically (rename). */
export function store(file: string, entry: CacheEntry): void {
  let entries: CacheEntry[] = [];
  try {
    const data = JSON.parse(readFileSync(file, 'utf8')) as CacheFile;
    if (data.version === CACHE_VERSION && Array.isArray(data.entries)) entries = data.entries;
  } catch {
    // no cache yet
  }
  entries = [entry, ...entries.filter((e) => e.key !== entry.key)].slice(0, MAX_ENTRIES);
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify({ version: CACHE_VERSION, entries }, null, 1)}\n`);
  renameSync(tmp, file);
}

/** Probes OpenBLAS's own core, then the better candidates, and chooses. */
export function probeAll(addonFile: string, cpu: CpuInfo, key: string, probe: typeof probeCore = probeCore): CacheEntry {
  const defaultProbe = probe(addonFile, null);
  const builtin = defaultProbe.builtin === true && !defaultProbe.error;
  const candidates = defaultProbe.error || builtin ? [] : coresToTry(cpu, defaultProbe.core).map((c) => probe(addonFile, c));
  return {
    key,
    lib: defaultProbe.lib,
    version: defaultProbe.version,
    defaultProbe,
    candidates,
    choice: builtin
      ? { core: null, reason: "no OpenBLAS loads here: magrpo's builtin sgemm runs (no core to choose)", warnings: [] }
      : chooseCore(defaultProbe, candidates),
    probedAt: new Date().toISOString(),
  };
}

/** What runs matrix products, in a few words: `openblas <core> via <file>` or `builtin <isa> (<why>)`. */
export function gemmDescription(blas: { kind: 'openblas' | 'builtin'; path: string; corename: string; reason: string }, isa: string): string {
  if (blas.kind === 'openblas') return `openblas ${blas.corename || '(unknown core)'} via ${blas.path}`;
  return `builtin ${isa} (${blas.reason})`;
}

export interface SelectOptions {
  env?: NodeJS.ProcessEnv;
  cpu?: CpuInfo;
  cacheFile?: string;
  probe?: typeof probeCore;
  mainThread?: boolean;
  /** Where warnings go (stderr). */
  warn?: (msg: string) => void;
}

let selection: CoreSelection | null = null;

/** The selection made when the native addon loaded, or null before that. */
export function blasCoreSelection(): CoreSelection | null {
  return selection;
}

/** Who set OPENBLAS_CORETYPE in `env`: nobody, the user, or magrpo (marker present and equal). */
export function coretypeSetter(env: NodeJS.ProcessEnv): 'none' | 'user' | 'magrpo' {
  const v = env.OPENBLAS_CORETYPE;
  if (v === undefined) return 'none';
  return env[AUTO_MARKER] === v ? 'magrpo' : 'user';
}

/**
 * Decides OPENBLAS_CORETYPE for the addon at `addonFile`, before it loads, and sets it in `env`
 * (process.env by default) when a better core than OpenBLAS's own was found. Never touches a
 * user's OPENBLAS_CORETYPE. A failed probe is reported and leaves OpenBLAS to choose.
 */
export function selectBlasCore(addonFile: string, opts: SelectOptions = {}): CoreSelection {
  const env = opts.env ?? process.env;
  const warn = opts.warn ?? ((m: string) => process.stderr.write(`[magrpo] ${m}\n`));
  const done = (s: CoreSelection) => {
    if (opts.env === undefined) selection = s;
    return s;
  };
  const setter = coretypeSetter(env);
  if (setter === 'user') return done({ source: 'user', coretype: env.OPENBLAS_CORETYPE, entry: null, fromCache: false });
  if (!(opts.mainThread ?? isMainThread)) return done({ source: 'worker', coretype: env.OPENBLAS_CORETYPE, entry: null, fromCache: false });
  if (env.MAGRPO_BLAS === 'builtin') return done({ source: 'builtin', coretype: env.OPENBLAS_CORETYPE, entry: null, fromCache: false });
  if (env.MAGRPO_BLAS_PROBE === '0') return done({ source: 'disabled', coretype: env.OPENBLAS_CORETYPE, entry: null, fromCache: false });
  const cpu = opts.cpu ?? cpuInfo();
  const file = opts.cacheFile ?? defaultCacheFile(env);
  const key = cacheKey(cpu, stamp(addonFile), env);
  // Set by a magrpo parent process: keep it, and show the parent's probe results when cached.
  if (setter === 'magrpo') return done({ source: 'auto', coretype: env.OPENBLAS_CORETYPE, entry: lookup(file, key), fromCache: true });
  let entry = lookup(file, key);
  const fromCache = entry !== null;
  if (entry === null) {
    entry = probeAll(addonFile, cpu, key, opts.probe);
    for (const w of entry.choice.warnings) warn(`OpenBLAS core check: ${w}`);
    // A probe that could not run (e.g. timed out on a busy machine) is tried again next time.
    if (!entry.defaultProbe.error)
      try {
        store(file, entry);
      } catch (err) {
        // A read-only home only costs the probe at every start; say so only when debugging.
        if (env.MAGRPO_DEBUG) warn(`could not cache the OpenBLAS core check in ${file}: ${(err as Error).message}`);
      }
  }
  const core = entry.choice.core;
  if (core === null) return done({ source: 'default', coretype: undefined, entry, fromCache });
  env.OPENBLAS_CORETYPE = core;
  env[AUTO_MARKER] = core;
  return done({ source: 'auto', coretype: core, entry, fromCache });
}
