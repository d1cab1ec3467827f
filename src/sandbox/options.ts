import { availableParallelism } from 'node:os';
import { type OptionIssue, SandboxError } from './errors.js';

/** How network access is cut off. `auto` prefers a namespace and says so in `sandboxInfo()`. */
export type NetworkMode = 'auto' | 'namespace' | 'socket-patch';

/** Constructor options of `PythonSandbox`; every key is optional and defaults as documented. */
export interface SandboxOptions {
  /** Interpreter: a bare name, looked up on the sandbox PATH (/usr/bin:/bin) rather than the caller's, or an absolute path. Default `python3`. */
  python?: string;
  /** RLIMIT_CPU of the worker, whole seconds ≥ 1. Default 60 (covers 3 timeouts × 10 s plus loading). */
  cpuSeconds?: number;
  /** Wall-clock budget of one execution; the process group is SIGKILLed when it expires. Default 90. */
  wallSeconds?: number;
  /** RLIMIT_AS of the worker in MiB (virtual memory, so leave room above the resident need). Default 1024. */
  memoryMb?: number;
  /** RLIMIT_NPROC: processes + threads of the sandbox uid; fork bombs hit it. Default 32. */
  maxProcesses?: number;
  /** RLIMIT_FSIZE: largest file the program may write, bytes. Default 16 MiB. */
  maxFileBytes?: number;
  /** Size of the private /tmp (cwd and HOME) under bubblewrap, MiB; its files live in memory until the run ends. Default 64. */
  tmpMb?: number;
  /** Cap per stream (stdout, stderr); exceeding it kills the run with `killed: 'output'`. Default 64 KiB. */
  maxOutputBytes?: number;
  /** Per-assert timer in `runTests` (the reference's 10 s SIGALRM). Default 10. */
  perTestTimeoutSeconds?: number;
  /** After this many timed-out asserts the rest are skipped (reference: 3). Default 3. */
  maxTimeouts?: number;
  /** Simultaneous executions. Default: number of cores. */
  concurrency?: number;
  /** `namespace` fails when unavailable; `socket-patch` forces the weaker fallback. Default `auto`. */
  network?: NetworkMode;
}

export type ResolvedOptions = Required<SandboxOptions>;

export function defaultOptions(): ResolvedOptions {
  return {
    python: 'python3',
    cpuSeconds: 60,
    wallSeconds: 90,
    memoryMb: 1024,
    maxProcesses: 32,
    maxFileBytes: 16 * 1024 * 1024,
    tmpMb: 64,
    maxOutputBytes: 64 * 1024,
    perTestTimeoutSeconds: 10,
    maxTimeouts: 3,
    concurrency: availableParallelism(),
    network: 'auto',
  };
}

type Check = (value: unknown) => string | null;

const positive: Check = (v) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? null : 'a positive number');
const positiveInt: Check = (v) => (Number.isInteger(v) && (v as number) > 0 ? null : 'a positive integer');
const nonNegativeInt: Check = (v) => (Number.isInteger(v) && (v as number) >= 0 ? null : 'an integer ≥ 0');

const CHECKS: Record<keyof SandboxOptions, Check> = {
  // Relative paths would resolve against the per-run temp dir.
  python: (v) => (typeof v === 'string' && /^(\/.+|[^/]+)$/.test(v) ? null : 'a bare command name or an absolute path'),
  cpuSeconds: positiveInt,
  wallSeconds: positive,
  memoryMb: positiveInt,
  maxProcesses: positiveInt,
  maxFileBytes: nonNegativeInt,
  tmpMb: positiveInt,
  maxOutputBytes: positiveInt,
  perTestTimeoutSeconds: positive,
  maxTimeouts: positiveInt,
  concurrency: positiveInt,
  network: (v) => (v === 'auto' || v === 'namespace' || v === 'socket-patch' ? null : "'auto' | 'namespace' | 'socket-patch'"),
};

/** Fills defaults and validates every key at once; unknown keys are errors. */
export function resolveOptions(options: SandboxOptions): ResolvedOptions {
  const issues: OptionIssue[] = [];
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    const check = CHECKS[key as keyof SandboxOptions];
    const expected = check ? check(value) : `no such option (known: ${Object.keys(CHECKS).join(', ')})`;
    if (expected) issues.push({ path: key, message: `${key}: got ${JSON.stringify(value)}, expected ${expected}` });
  }
  if (issues.length > 0) {
    throw new SandboxError('BAD_OPTIONS', `invalid sandbox options:\n${issues.map((i) => `  ${i.message}`).join('\n')}`, issues);
  }
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  return { ...defaultOptions(), ...defined };
}
